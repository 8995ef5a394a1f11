//! The one error type of atmlab-core.

/// What went wrong while building or parsing a core value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    /// A quantity string did not parse: the text, and what was expected.
    #[error("cannot parse {text:?} as {expected}")]
    Parse {
        /// The offending text.
        text: String,
        /// What was expected, e.g. "a bit rate such as \"155.52 Mb/s\"".
        expected: &'static str,
    },
    /// A value lies outside its legal range.
    #[error("{what} {value} is out of range (allowed {min}..={max})")]
    OutOfRange {
        /// The name of the quantity.
        what: &'static str,
        /// The value given.
        value: u64,
        /// Smallest legal value.
        min: u64,
        /// Largest legal value.
        max: u64,
    },
    /// A parameter of a core (e.g. the GCRA's rates) is not usable.
    #[error("{param}: {reason}")]
    InvalidParameter {
        /// The parameter.
        param: &'static str,
        /// Why.
        reason: String,
    },
}
