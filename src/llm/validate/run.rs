//! Validation of a whole-run length ([`validate_run`]).

use crate::llm::config::{bad, ConfigError, RunSpec};

/// Validates a whole-run length: exactly one of `tokens` (> 0, finite) and `steps` (≥ 1). Errors name
/// `run`, `run.tokens` or `run.steps`.
pub fn validate_run(run: &RunSpec) -> Result<(), ConfigError> {
    match (run.tokens, run.steps) {
        (Some(_), Some(_)) | (None, None) => Err(bad("run", "give exactly one of tokens and steps")),
        (Some(t), None) if !(t.is_finite() && t > 0.0) => Err(bad("run.tokens", "must be a positive number")),
        (None, Some(0)) => Err(bad("run.steps", "must be at least 1")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_length_needs_exactly_one_of_tokens_and_steps() {
        assert!(validate_run(&RunSpec { tokens: Some(1e9), steps: None }).is_ok());
        assert!(validate_run(&RunSpec { tokens: None, steps: Some(10) }).is_ok());
        assert_eq!(validate_run(&RunSpec { tokens: Some(1e9), steps: Some(1) }).unwrap_err().field, "run");
        assert_eq!(validate_run(&RunSpec { tokens: Some(-1.0), steps: None }).unwrap_err().field, "run.tokens");
        assert_eq!(validate_run(&RunSpec { tokens: None, steps: Some(0) }).unwrap_err().field, "run.steps");
    }
}
