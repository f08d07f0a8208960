//! [`GraphError`]: what went wrong building or running a [`TaskGraph`](super::TaskGraph), in
//! the style of [`crate::Error`]: each message says what was wrong and what to do.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use super::NodeId;
use crate::{Error, JoinError};

/// Why a node produced no output.
#[derive(Debug)]
pub enum NodeFailure {
    /// Its closure panicked (or the runtime's shutdown cancelled it:
    /// [`JoinError::is_cancelled`]); the error carries the payload.
    Panicked(JoinError),
    /// Its task could not be spawned (a bad affinity or stack size, or no memory).
    Spawn(Error),
}

/// A node that failed, by id and name.
#[derive(Debug)]
pub struct FailedNode {
    /// The node.
    pub node: NodeId,
    /// Its name (`node-<index>` for an unnamed node).
    pub name: String,
    /// What happened.
    pub failure: NodeFailure,
}

/// An error of a [`TaskGraph`](super::TaskGraph): building it (`add_edge`) or running it.
#[derive(Debug)]
pub enum GraphError {
    /// The edge would close a cycle: `path` names the nodes on it, from the edge's source
    /// through its target and back (`a → b → … → a`). The graph is unchanged.
    Cycle {
        /// The names of the nodes on the cycle, the first repeated at the end.
        path: Vec<String>,
    },
    /// A [`NodeId`] that is not of this graph.
    UnknownNode {
        /// The id's index.
        index: usize,
        /// The number of nodes of the graph.
        nodes: usize,
    },
    /// Nodes failed while the graph ran. Nodes that depend on a failed node, directly or not,
    /// were cancelled (never run); every other node ran.
    Failed {
        /// The nodes that failed, in the order of their ids.
        failed: Vec<FailedNode>,
        /// The names of the nodes cancelled because a node they depend on failed, in the
        /// order of their ids.
        cancelled: Vec<String>,
        /// How many nodes finished with an output.
        finished: usize,
        /// How many nodes the graph has.
        total: usize,
    },
}

impl fmt::Display for GraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GraphError::Cycle { path } => {
                f.write_str("the edge ")?;
                if let [from, to, ..] = path.as_slice() {
                    write!(f, "`{from}` → `{to}` ")?;
                }
                f.write_str("would close the cycle ")?;
                for (i, n) in path.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" → ")?;
                    }
                    write!(f, "`{n}`")?;
                }
                f.write_str("; a task graph must be acyclic: drop one of these dependencies")
            }
            GraphError::UnknownNode { index, nodes } => write!(
                f,
                "node id {index} is not of this graph, which has {nodes} nodes; use the ids \
                 that this graph's `add` returned"
            ),
            GraphError::Failed {
                failed,
                cancelled,
                finished,
                total,
            } => {
                for (i, n) in failed.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    match &n.failure {
                        NodeFailure::Panicked(e) if e.is_cancelled() => write!(
                            f,
                            "node `{}` was cancelled: the runtime shut down while it ran",
                            n.name
                        )?,
                        NodeFailure::Panicked(e) => {
                            write!(f, "node `{}` failed: {e}", n.name)?;
                        }
                        NodeFailure::Spawn(e) => {
                            write!(f, "node `{}` could not start: {e}", n.name)?;
                        }
                    }
                }
                if !cancelled.is_empty() {
                    write!(f, "; {} dependant(s) cancelled: ", cancelled.len())?;
                    for (i, c) in cancelled.iter().take(8).enumerate() {
                        if i > 0 {
                            f.write_str(", ")?;
                        }
                        write!(f, "`{c}`")?;
                    }
                    if cancelled.len() > 8 {
                        write!(f, " and {} more", cancelled.len() - 8)?;
                    }
                }
                write!(
                    f,
                    "; {finished} of {total} nodes finished; fix the failed node(s) and run \
                     the graph again"
                )
            }
        }
    }
}

impl core::error::Error for GraphError {}
