//! The one error type of atmlab-models.

/// What went wrong while building a model.
///
/// Every constructor validates its parameters up front, so that a scenario with a typo
/// (a negative rate, a mean above the peak) fails when it is loaded, naming the model and
/// the parameter, rather than producing a silently wrong run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelsError {
    /// A parameter lies outside its legal range.
    ///
    /// The model is called `model` rather than `source` because `thiserror` treats a field
    /// named `source` as the underlying error.
    #[error("{model}: invalid {param}: {reason}")]
    InvalidParameter {
        /// The model (e.g. `"OnOff"`).
        model: &'static str,
        /// The parameter, as the constructor spells it (e.g. `"mean_rate"`).
        param: &'static str,
        /// Why it is rejected, with the offending value.
        reason: String,
    },
    /// Bytes that do not form a valid unit (a cell of the gateway's SAR format, ...).
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// What was being parsed or built.
        what: &'static str,
        /// What was wrong.
        reason: String,
    },
}
