//! The crate's one error type: what an experiment can fail at. The systems' own errors
//! pass through unchanged; the lab adds its own steps (writing a report, a run that went
//! wrong) with what was being done.

use atmlab_control::ControlError;
use atmlab_fabric::FabricError;
use atmlab_models::ModelsError;
use atmlab_rpc::RpcError;
use atmlab_sim::SimError;
use atmlab_smds::SmdsError;

/// Everything an experiment or report can fail at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LabError {
    /// The control plane refused or failed.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// A switch (server) refused or failed.
    #[error(transparent)]
    Fabric(#[from] FabricError),
    /// An SMDS server or its configuration failed.
    #[error(transparent)]
    Smds(#[from] SmdsError),
    /// A model could not be built.
    #[error(transparent)]
    Models(#[from] ModelsError),
    /// The simulation engine, a scenario, a result file or a plot failed.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// TLS or connection set-up failed.
    #[error(transparent)]
    Rpc(#[from] RpcError),
    /// A file could not be written or read.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, naming the file.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A step of an experiment went wrong (a run that did not converge, a manager that
    /// could not start, an audit that found something left).
    #[error("{what}: {reason}")]
    Run {
        /// The experiment (and step).
        what: String,
        /// What went wrong.
        reason: String,
    },
}

impl LabError {
    /// A failed step of `what`.
    pub fn run(what: impl Into<String>, reason: impl std::fmt::Display) -> LabError {
        LabError::Run {
            what: what.into(),
            reason: reason.to_string(),
        }
    }

    /// An I/O error while doing `what`.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> LabError {
        LabError::Io {
            what: what.into(),
            source,
        }
    }
}
