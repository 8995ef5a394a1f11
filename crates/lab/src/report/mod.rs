//! The report toolkit every experiment writes with (DESIGN.md §4, Reports): the five
//! reproductions ([`crate::reproduce`]) and `atmlab demo` ([`crate::demo`]) build their
//! files from these pieces and nothing else.
//!
//! - [`write()`], [`write_json`] and [`create_dir`]: files, each failure naming its path;
//! - [`plot`]: a figure (PNG and SVG) through `atmlab_sim::plot`;
//! - [`Table`] ([`table`]): a table's columns (markdown header, CSV name, alignment, a
//!   format for each) and typed rows, rendered to markdown and to CSV from the same rows,
//!   with rows for one of the two only (the paper's published numbers beside ours in the
//!   markdown, the long form of a wide table in the CSV);
//! - [`SeriesSet`] ([`series`]): plot series gathered point by point under their labels;
//! - [`Verdicts`] ([`verdict`]): the table every report opens with, each of the paper's
//!   items beside ours with a verdict computed by a stated criterion;
//! - [`render`] ([`template`]): a report's prose, a template under `crates/lab/templates/`,
//!   filled with the tables, figure links and numbers the code computed.
//!
//! The templates are rendered with `minijinja`: it is well kept (Jinja2's own author
//! maintains it, with frequent releases), small (two dependencies with its
//! default features off, no proc macros, so it adds little to the build), and it takes
//! templates as data: plain text files embedded with `include_str!`, readable and
//! editable as prose, checked when rendered rather than compiled into Rust code. The code
//! decides what to compute and which rows to show; the template holds the words.

pub mod series;
pub mod table;
pub mod template;
pub mod verdict;

use std::path::Path;

use atmlab_sim::plot::{PlotSpec, Series};

use crate::LabError;

pub use series::SeriesSet;
pub use table::{Align, Column, Format, Table, Value};
pub use template::render;
pub use verdict::{Check, Verdict, Verdicts};

/// Writes `text` to `dir/name`, naming the file if it fails.
pub fn write(dir: &Path, name: &str, text: &str) -> Result<(), LabError> {
    Ok(atmlab_sim::report::write(dir, name, text)?)
}

/// Writes `value` to `dir/name` as pretty-printed JSON with a final newline.
pub fn write_json(dir: &Path, name: &str, value: &serde_json::Value) -> Result<(), LabError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| LabError::run(format!("writing {name}"), e))?;
    write(dir, name, &(text + "\n"))
}

/// Creates `dir` and its parents.
pub fn create_dir(dir: &Path) -> Result<(), LabError> {
    std::fs::create_dir_all(dir).map_err(|e| LabError::io(format!("creating {}", dir.display()), e))
}

/// Plots `series` into `dir/stem.png` and `dir/stem.svg`.
pub fn plot(dir: &Path, stem: &str, spec: PlotSpec<'_>, series: &[Series]) -> Result<(), LabError> {
    let path = dir.join(stem);
    atmlab_sim::plot::plot_metric(&path, &spec, series)
        .map_err(|e| LabError::run(format!("plotting {}", path.display()), e))
}
