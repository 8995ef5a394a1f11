//! The reproductions (`atmlab reproduce PAPER`, DESIGN.md §4, Reports): each regenerates
//! one paper's tables and figures (markdown, PNG/SVG, CSV) with the paper's published
//! numbers beside ours, and opens its report with the verdicts its numbers give.
//!
//! - [`xbind`]: paper 000, on the live lab;
//! - [`retina`]: paper 001, on a chain of live switch servers;
//! - [`smds`]: paper 002, on the SMDS servers in simulated time and live;
//! - [`rdma`]: paper 003, scenarios through the simulation runner;
//! - [`gateway`]: paper 004, scenarios through the simulation runner.
//!
//! Each writes its files with [`crate::report`]: its tables as [`crate::report::Table`]s,
//! its words as the template `crates/lab/templates/PAPER.md`.

pub mod gateway;
pub mod rdma;
pub mod retina;
pub mod smds;
pub mod xbind;

/// Runs `write` (a reproduction's `write_report`) into a fresh directory; returns the
/// directory, to read the other files from, and the `README.md` written there.
#[cfg(test)]
fn written(
    write: impl FnOnce(&std::path::Path) -> Result<(), crate::LabError>,
) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    write(dir.path()).expect("the report is written");
    let md = std::fs::read_to_string(dir.path().join("README.md")).expect("README.md");
    (dir, md)
}
