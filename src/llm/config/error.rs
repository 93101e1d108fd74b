//! The error every validation of a request returns ([`ConfigError`]): the offending field and why.

/// A configuration the model cannot represent: the field path (as in the request, e.g. `parallelism.tp`) and
/// why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    pub field: String,
    pub message: String,
}

/// A [`ConfigError`] for `field`.
pub fn bad(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError { field: field.to_string(), message: message.into() }
}
