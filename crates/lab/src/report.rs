//! The report toolkit every experiment writes with (DESIGN.md §4, Reports).

use std::path::Path;

use crate::LabError;

/// Writes `text` to `dir/name`, naming the file if it fails.
pub fn write(dir: &Path, name: &str, text: &str) -> Result<(), LabError> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|e| LabError::io(format!("writing {}", path.display()), e))
}
