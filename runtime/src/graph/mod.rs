//! Task graphs: [`TaskGraph`], a DAG of blocking closures run on a [`Runtime`], each node a
//! task of its own (name, nice level, slice, CPUs: a [`task::Builder`]) that receives its
//! predecessors' outputs by reference.
//!
//! * the graph keeps an online topological order: an edge that would close a cycle is refused
//!   when it is added ([`GraphError`]), naming the nodes on the cycle;
//! * in the run, a node's task is spawned by its last predecessor to finish, on that
//!   predecessor's worker; a failure cancels the dependants and nothing else;
//! * a node gets its predecessors' outputs as [`Inputs`]; the run returns [`Outputs`];
//!   [`Progress`] counts what is done, readable from any thread while it runs.
//!
//! Every node's output has one type `T` (an enum where the nodes produce different things):
//! a node gets `&T` of each predecessor and the run returns every `T` by [`NodeId`], with no
//! boxing or downcasting on the user's side. Nodes may borrow from the caller (`'env`): the
//! run is a [`Scope`](crate::Scope), and every node's task has ended when
//! [`run`](TaskGraph::run) returns.
//!
//! ```
//! let rt = lagom::Runtime::builder().build()?;
//! let sources = ["fn a() {}", "fn b() {}"];
//! let mut g = lagom::TaskGraph::new();
//! // A diamond: parse → {check, lint} → link.
//! let parse = g.add(|_| sources.iter().map(|s| s.len()).sum::<usize>());
//! let check = g.add(|i| i[0] * 2);
//! let lint = g.add_with(lagom::task::Builder::new().name("lint").nice(5), |i| i[0] + 1);
//! let link = g.add(|i| i.iter().sum::<usize>());
//! g.add_edge(parse, check)?;
//! g.add_edge(parse, lint)?;
//! g.add_edge(check, link)?;
//! g.add_edge(lint, link)?;
//! let progress = g.progress(); // readable from any thread while it runs
//! let out = g.run(&rt)?;
//! assert_eq!((out[link], progress.done()), (18 * 2 + 19, 4));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod data;
mod error;
mod order;
mod run;

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

pub use data::{Inputs, Outputs, Progress};
pub use error::{FailedNode, GraphError, NodeFailure};

use crate::Runtime;
use crate::locking::atomic::Ordering;
use crate::task::{self, Builder};
use data::Counters;
use order::Order;
use run::RunState;

/// A node's closure.
type Job<'env, T> = Box<dyn for<'a> FnOnce(Inputs<'a, T>) -> T + Send + 'env>;

/// A node of a [`TaskGraph`] (its index in the order of [`TaskGraph::add`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub(crate) usize);

impl NodeId {
    /// The node's index: 0 for the first node added, and so on.
    pub fn index(self) -> usize {
        self.0
    }
}

/// A directed acyclic graph of closures, each run as a task once its predecessors finished
/// (module doc). `T` is the nodes' output; `'env` what they may borrow.
pub struct TaskGraph<'env, T> {
    order: Order,
    names: Vec<String>,
    starts: Vec<(Builder, Job<'env, T>)>,
    counters: Arc<Counters>,
}

impl<T> core::fmt::Debug for TaskGraph<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TaskGraph")
            .field("nodes", &self.names)
            .field("succs", &self.order.succs)
            .finish()
    }
}

impl<T> Default for TaskGraph<'_, T> {
    fn default() -> Self {
        TaskGraph {
            order: Order::default(),
            names: Vec::new(),
            starts: Vec::new(),
            counters: Arc::new(Counters::default()),
        }
    }
}

impl<'env, T: Send + Sync> TaskGraph<'env, T> {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a node that runs `f` with default task options; it is named `node-<index>`.
    pub fn add<F>(&mut self, f: F) -> NodeId
    where
        F: for<'a> FnOnce(Inputs<'a, T>) -> T + Send + 'env,
    {
        self.add_with(Builder::new(), f)
    }

    /// Adds a node that runs `f` as a task with the options of `b`: its name (used in
    /// errors; `node-<index>` without one), nice level, slice, CPUs and stack size. Options
    /// that are refused at spawn (an affinity outside the workers, a stack below the minimum)
    /// fail the node when it would start ([`NodeFailure::Spawn`]).
    pub fn add_with<F>(&mut self, b: Builder, f: F) -> NodeId
    where
        F: for<'a> FnOnce(Inputs<'a, T>) -> T + Send + 'env,
    {
        let i = self.order.add_node();
        let name = match &b.name {
            Some(n) if !n.is_empty() => n.clone(),
            _ => format!("node-{i}"),
        };
        self.names.push(name);
        self.starts.push((b, Box::new(f)));
        NodeId(i)
    }

    /// Adds the dependency `from → to`: `to` runs after `from` finished and receives its
    /// output (its [`Inputs`] are in the order of these calls). Adding an edge twice adds it
    /// once.
    ///
    /// # Errors
    /// [`GraphError::Cycle`], naming the nodes on it, if `to` already reaches `from` (or they
    /// are the same node); the graph is then unchanged. [`GraphError::UnknownNode`] for an id
    /// of another graph.
    pub fn add_edge(&mut self, from: NodeId, to: NodeId) -> Result<(), GraphError> {
        for n in [from, to] {
            if n.0 >= self.order.len() {
                return Err(GraphError::UnknownNode {
                    index: n.0,
                    nodes: self.order.len(),
                });
            }
        }
        match self.order.add_edge(from.0, to.0) {
            Ok(_) => Ok(()),
            Err(path) => Err(GraphError::Cycle {
                path: path.into_iter().map(|n| self.names[n].clone()).collect(),
            }),
        }
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether the graph has no node.
    pub fn is_empty(&self) -> bool {
        self.order.len() == 0
    }

    /// The name of `node` (`node-<index>` for an unnamed one), if it is a node of the graph.
    pub fn name(&self, node: NodeId) -> Option<&str> {
        self.names.get(node.0).map(String::as_str)
    }

    /// The predecessors of `node`, in edge order.
    pub fn predecessors(&self, node: NodeId) -> impl ExactSizeIterator<Item = NodeId> + '_ {
        let preds = self.order.preds.get(node.0).map_or(&[][..], Vec::as_slice);
        preds.iter().map(|&p| NodeId(p))
    }

    /// A handle on the counters of this graph's run (nodes done, failed, cancelled, of the
    /// total), which any thread may read while [`run`](Self::run) runs.
    pub fn progress(&self) -> Progress {
        self.counters.total.store(self.len(), Ordering::Relaxed);
        Progress {
            counters: Arc::clone(&self.counters),
        }
    }

    /// Runs every node on `rt` and returns their outputs, once every node's task has ended.
    /// Called from a plain thread, it sleeps meanwhile; from a task of `rt`, it blocks as a
    /// task. The roots start at once; every other node as soon as its last predecessor
    /// finished, spawned from that predecessor's task (so on its worker, unless CPU selection
    /// or the node's CPUs place it elsewhere).
    ///
    /// # Errors
    /// [`GraphError::Failed`] if a node panicked or could not start: it names them and the
    /// nodes that were cancelled because they depend on one, and says how many finished;
    /// every node that does not depend on a failed one still ran, and every task has ended.
    ///
    /// # Panics
    /// As [`Runtime::scope`]: from a task of another runtime.
    #[track_caller]
    pub fn run(self, rt: &Runtime) -> Result<Outputs<T>, GraphError> {
        let TaskGraph {
            order,
            names,
            starts,
            counters,
        } = self;
        let total = order.len();
        counters.total.store(total, Ordering::Relaxed);
        let state = RunState::new(&order, &names, starts, &counters);
        let roots: Vec<usize> = (0..total).filter(|&i| order.preds[i].is_empty()).collect();
        rt.scope(|s| {
            let state = &state;
            if crate::worker::local().is_some() {
                // A task of `rt` (`Runtime::scope` checked): spawn from here.
                roots.iter().for_each(|&r| state.start(s, r));
                return;
            }
            let launch = task::Builder::new().name("graph-launch");
            let launched = s.spawn_detached(launch, || {
                roots.iter().for_each(|&r| state.start(s, r));
            });
            if launched.is_err() {
                roots.iter().for_each(|&r| state.start(s, r));
            }
        });
        match state.finish() {
            Ok(values) => Ok(Outputs { values }),
            Err((failed, cancelled, finished)) => Err(GraphError::Failed {
                failed,
                cancelled,
                finished,
                total,
            }),
        }
    }
}
