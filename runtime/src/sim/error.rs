//! [`ScenarioError`]: what is wrong with a scenario, with the line and the field.
//!
//! A type of its own rather than a variant of [`crate::Error`]: every scenario error carries
//! a line number and a field name, which no other error of the crate has, and the parser
//! returns many of them from one place; a variant per kind of mistake would add a dozen
//! variants that only the simulator produces. Problems that are not the scenario's (an
//! unreadable topology, an unknown feature name) stay [`crate::Error`]s.

use alloc::string::String;
use core::fmt;

/// A mistake in a scenario: where it is and what is wrong.
///
/// ```
/// let err = lagom::sim::parse("task a nice=40\n  run 1ms\nend\n").unwrap_err();
/// assert_eq!((err.line, err.field.as_str()), (1, "nice"));
/// assert!(err.to_string().starts_with("line 1, `nice`:"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// The line of the scenario file (1-based; 0 for a scenario built in code).
    pub line: usize,
    /// The directive, attribute or step that is wrong (`nice`, `run`, `cost switch`).
    pub field: String,
    /// What is wrong, and what would be right.
    pub message: String,
}

impl ScenarioError {
    /// An error at `line` in `field`.
    pub fn new(line: usize, field: impl Into<String>, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            line,
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "scenario, `{}`: {}", self.field, self.message)
        } else {
            write!(f, "line {}, `{}`: {}", self.line, self.field, self.message)
        }
    }
}

impl core::error::Error for ScenarioError {}
