//! The simulator's errors: [`ScenarioError`], what is wrong with a scenario, with the line
//! and the field; and [`MachineError`], why a topology cannot be simulated.
//!
//! Every scenario error carries a line number and a field name, and the parser returns many
//! of them from one place, so one type with a message serves them all rather than a variant
//! per kind of mistake. Problems that are not the scenario's have the types of the crates
//! they come from: an unreadable topology `lagom_topology::TopologyError`, an unknown feature
//! name `lagom_policy::UnknownFeature`.

use alloc::string::String;
use core::fmt;

/// A mistake in a scenario: where it is and what is wrong.
///
/// ```
/// let err = lagom_sim::parse("task a nice=40\n  run 1ms\nend\n").unwrap_err();
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

/// Why a topology cannot be simulated ([`Machine::new`](crate::Machine::new)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MachineError {
    /// The topology allows no CPU: its online CPUs, cgroup cpuset and affinity mask have none
    /// in common.
    NoCpus {
        /// The machine's name, as given.
        name: String,
    },
}

impl fmt::Display for MachineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MachineError::NoCpus { name } => write!(
                f,
                "machine `{name}`: its topology allows no CPU (online CPUs ∩ cpuset ∩ affinity \
                 is empty); give a topology that allows at least one CPU, or read a recorded \
                 tree without an affinity restriction"
            ),
        }
    }
}

impl core::error::Error for MachineError {}
