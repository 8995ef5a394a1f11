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
//! its words as the template `crates/lab/templates/PAPER.md`. Each logs which of its
//! experiments it is on ([`Experiments`]), so a person watching a long run knows where
//! it is.

pub mod gateway;
pub mod rdma;
pub mod retina;
pub mod smds;
pub mod xbind;

/// The log target of the "experiment N/M" lines: a command that logs at `warn` (the
/// reproductions) still shows these at `info`, and `RUST_LOG` can name them.
pub const EXPERIMENT_TARGET: &str = "atmlab_lab::experiment";

/// A reproduction's experiments, counted as they start: each [`start`](Self::start)
/// logs "experiment N/M: NAME" at `info` (target [`EXPERIMENT_TARGET`]).
#[derive(Debug)]
pub struct Experiments {
    paper: &'static str,
    total: usize,
    started: usize,
}

impl Experiments {
    /// The `total` experiments of `paper` (its command-line name).
    pub fn new(paper: &'static str, total: usize) -> Experiments {
        Experiments {
            paper,
            total,
            started: 0,
        }
    }

    /// Logs that experiment `name` starts, and returns its number (from 1).
    pub fn start(&mut self, name: &str) -> usize {
        self.started += 1;
        // A miscount shows as "7/6" in a log, never as a failed run.
        let total = self.total.max(self.started);
        tracing::info!(
            target: EXPERIMENT_TARGET,
            paper = self.paper,
            "experiment {}/{total}: {name}",
            self.started
        );
        self.started
    }
}

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
