//! [`GraphError`]: what went wrong building or running a [`TaskGraph`](super::TaskGraph), in
//! the style of [`crate::Error`]: each message says what was wrong and what to do.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use super::{NodeId, PartialOutputs};
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
    /// A [`NodeId`] of another graph. Every graph numbers its nodes from 0, so the id's
    /// index alone would name some node of this graph: it is refused instead.
    ForeignNode {
        /// The id's index (in its own graph).
        index: usize,
        /// The number of the graph the id belongs to (graphs are numbered from 1 in the
        /// order they were made, process-wide).
        node_graph: u64,
        /// The number of the graph it was given to.
        graph: u64,
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
            GraphError::ForeignNode {
                index,
                node_graph,
                graph,
            } => write!(
                f,
                "node {index} of task graph #{node_graph} was given to task graph #{graph}: a \
                 NodeId is valid only with the graph whose `add` returned it; use that graph's \
                 ids"
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

/// A failed [`TaskGraph::run`](super::TaskGraph::run): what went wrong
/// ([`error`](RunError::error), a [`GraphError::Failed`]) and the outputs of the nodes that
/// finished ([`outputs`](RunError::outputs)), as std's `PoisonError` and `FromUtf8Error`
/// hand back what they hold.
///
/// It displays as its error; `?` converts it into a [`GraphError`] (the outputs dropped) or,
/// with `T: 'static`, into a `Box<dyn Error>`. Its `Debug` shows the error and how many nodes
/// finished, not the outputs, so it needs no `T: Debug`.
pub struct RunError<T> {
    pub(crate) error: GraphError,
    pub(crate) outputs: PartialOutputs<T>,
}

impl<T> RunError<T> {
    /// What went wrong: a [`GraphError::Failed`] naming the failed and cancelled nodes.
    pub fn error(&self) -> &GraphError {
        &self.error
    }

    /// The outputs of the nodes that finished.
    pub fn outputs(&self) -> &PartialOutputs<T> {
        &self.outputs
    }

    /// The outputs of the nodes that finished, by value.
    pub fn into_outputs(self) -> PartialOutputs<T> {
        self.outputs
    }

    /// The error alone (the outputs dropped).
    pub fn into_error(self) -> GraphError {
        self.error
    }

    /// The error and the outputs.
    pub fn into_parts(self) -> (GraphError, PartialOutputs<T>) {
        (self.error, self.outputs)
    }
}

impl<T> fmt::Debug for RunError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunError")
            .field("error", &self.error)
            .field("finished", &self.outputs.finished())
            .field("nodes", &self.outputs.len())
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Display for RunError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl<T> core::error::Error for RunError<T> {}

impl<T> From<RunError<T>> for GraphError {
    fn from(e: RunError<T>) -> GraphError {
        e.error
    }
}
