//! The one error type of atmlab-sim.

use atmlab_core::time::Instant;

/// What went wrong in the engine, a scenario file or a run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// An event was scheduled into a lane earlier than the lane's last event.
    #[error(
        "lane {lane}: event at {at} is earlier than the lane's last event at {last} (lanes are FIFO)"
    )]
    LaneOrder {
        /// The lane.
        lane: u32,
        /// The lane's last event time.
        last: Instant,
        /// The offending time.
        at: Instant,
    },
    /// A lane id that was never created.
    #[error("no such event lane {0}")]
    NoSuchLane(u32),
    /// An event was scheduled in the past.
    #[error("event scheduled at {at}, before the current time {now} (causality)")]
    Causality {
        /// Current time.
        now: Instant,
        /// Requested time.
        at: Instant,
    },
    /// A scenario file is wrong: the file, the key, and what was expected.
    #[error("{file}: {key}: {message}")]
    Scenario {
        /// The file (or "<--set>" for command-line overrides).
        file: String,
        /// The dotted key, e.g. "params.arrival.rate".
        key: String,
        /// What was wrong and what was expected.
        message: String,
    },
    /// A model could not be built or run.
    #[error("model {model}: {message}")]
    Model {
        /// The model kind.
        model: String,
        /// What went wrong.
        message: String,
    },
    /// A file could not be written or read.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}
