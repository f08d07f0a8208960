//! Task graphs: [`TaskGraph`], a DAG of blocking closures run on a [`Runtime`], each node a
//! task of its own (name, nice level, slice, CPUs: a [`task::Builder`]) that receives its
//! predecessors' outputs by reference.
//!
//! * the graph keeps an online topological order: an edge that would close a cycle is refused
//!   when it is added ([`GraphError`]), naming the nodes on the cycle;
//! * in the run, a node's task is spawned by its last predecessor to finish, on that
//!   predecessor's worker; a failure cancels the dependants and nothing else;
//! * a node gets its predecessors' outputs as [`Inputs`]; the run returns [`Outputs`], or a
//!   [`RunError`] with the [`PartialOutputs`] of the nodes that finished; [`Progress`] counts
//!   what is done, readable from any thread while it runs.
//!
//! Every node's output has one type `T` (an enum where the nodes produce different things):
//! a node gets `&T` of each predecessor and the run returns every `T` by [`NodeId`], with no
//! boxing or downcasting on the user's side. Nodes may borrow from the caller (`'env`): the
//! run is a [`Scope`](crate::Scope), and every node's task has ended when
//! [`run`](TaskGraph::run) returns.
//!
//! A [`NodeId`] belongs to the graph whose [`add`](TaskGraph::add) returned it: every graph
//! numbers its nodes from 0, so the id also carries its graph's number, and an id of another
//! graph is refused ([`GraphError::ForeignNode`], or `None` / a panic where the method says),
//! never read as this graph's node of the same index. A failed run gives back what the
//! finished nodes produced ([`RunError::outputs`]).
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

pub use data::{Inputs, Outputs, PartialOutputs, Progress};
pub use error::{FailedNode, GraphError, NodeFailure, RunError};

use crate::Runtime;
use crate::locking::atomic::Ordering;
use crate::task::{self, Builder};
use data::Counters;
use order::Order;
use run::RunState;

/// A node's closure.
type Job<'env, T> = Box<dyn for<'a> FnOnce(Inputs<'a, T>) -> T + Send + 'env>;

/// A node of a [`TaskGraph`]: its index in the order of [`TaskGraph::add`], and the graph it
/// belongs to (module doc: an id of another graph is refused, not read as this graph's node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId {
    /// The number of the graph that made it ([`next_graph`]).
    pub(crate) graph: u64,
    /// Its index in that graph.
    pub(crate) index: usize,
}

impl NodeId {
    /// The node's index in its graph: 0 for the first node added, and so on.
    pub fn index(self) -> usize {
        self.index
    }
}

/// The process's graph numbers, from 1. 64 bits: a program making a million graphs a second
/// would take half a million years to wrap, so two graphs never share a number.
static NEXT_GRAPH: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);

/// A fresh graph number.
fn next_graph() -> u64 {
    NEXT_GRAPH.fetch_add(1, core::sync::atomic::Ordering::Relaxed)
}

/// A directed acyclic graph of closures, each run as a task once its predecessors finished
/// (module doc). `T` is the nodes' output; `'env` what they may borrow.
pub struct TaskGraph<'env, T> {
    /// This graph's number, carried by its [`NodeId`]s.
    id: u64,
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
            id: next_graph(),
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

    /// Adds a node named `name` that runs `f` with default task options: the same as
    /// [`add_with`](Self::add_with)`(Builder::new().name(name), f)`.
    ///
    /// ```
    /// # let rt = lagom::Runtime::builder().build()?;
    /// let mut g = lagom::TaskGraph::new();
    /// let parse = g.add_named("parse", |_| 21);
    /// let double = g.add(|i| i[0] * 2);
    /// g.add_edge(parse, double)?;
    /// assert_eq!((g.name(parse), g.name(double)), (Some("parse"), Some("node-1")));
    /// assert_eq!(g.run(&rt)?[double], 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn add_named<F>(&mut self, name: impl Into<String>, f: F) -> NodeId
    where
        F: for<'a> FnOnce(Inputs<'a, T>) -> T + Send + 'env,
    {
        self.add_with(Builder::new().name(name), f)
    }

    /// Adds a node that runs `f` as a task with the options of `b`: its name (`node-<index>`
    /// without one, or with an empty one), nice level, slice, CPUs and stack size. The name is
    /// the task's: errors, panic messages, [`task::current`] and traces show it. Options
    /// that are refused at spawn (an affinity outside the workers, a stack below the minimum)
    /// fail the node when it would start ([`NodeFailure::Spawn`]).
    pub fn add_with<F>(&mut self, mut b: Builder, f: F) -> NodeId
    where
        F: for<'a> FnOnce(Inputs<'a, T>) -> T + Send + 'env,
    {
        let i = self.order.add_node();
        let name = match &b.name {
            Some(n) if !n.is_empty() => n.clone(),
            _ => format!("node-{i}"),
        };
        b.name = Some(name.clone());
        self.names.push(name);
        self.starts.push((b, Box::new(f)));
        NodeId {
            graph: self.id,
            index: i,
        }
    }

    /// `node`'s index, if it is a node of this graph.
    fn index_of(&self, node: NodeId) -> Result<usize, GraphError> {
        #[cfg(not(lagom_mutant = "graph_foreign_accepted"))]
        let ours = node.graph == self.id;
        #[cfg(lagom_mutant = "graph_foreign_accepted")]
        let ours = node.index < self.order.len();
        if ours {
            Ok(node.index)
        } else {
            Err(GraphError::ForeignNode {
                index: node.index,
                node_graph: node.graph,
                graph: self.id,
            })
        }
    }

    /// Adds the dependency `from → to`: `to` runs after `from` finished and receives its
    /// output (its [`Inputs`] are in the order of these calls). Adding an edge twice adds it
    /// once.
    ///
    /// # Errors
    /// [`GraphError::Cycle`], naming the nodes on it, if `to` already reaches `from` (or they
    /// are the same node); the graph is then unchanged. [`GraphError::ForeignNode`] for an id
    /// of another graph (whatever its index).
    pub fn add_edge(&mut self, from: NodeId, to: NodeId) -> Result<(), GraphError> {
        let (from, to) = (self.index_of(from)?, self.index_of(to)?);
        match self.order.add_edge(from, to) {
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

    /// The name of `node` (`node-<index>` for an unnamed one), if it is a node of the graph
    /// (`None` for an id of another graph).
    pub fn name(&self, node: NodeId) -> Option<&str> {
        let i = self.index_of(node).ok()?;
        self.names.get(i).map(String::as_str)
    }

    /// The predecessors of `node`, in edge order.
    ///
    /// # Panics
    /// If `node` is of another graph (the message names both graphs), as indexing a slice out
    /// of bounds does.
    #[track_caller]
    pub fn predecessors(&self, node: NodeId) -> impl ExactSizeIterator<Item = NodeId> + '_ {
        let i = match self.index_of(node) {
            Ok(i) => i,
            Err(e) => panic!("lagom::TaskGraph::predecessors: {e}"),
        };
        let graph = self.id;
        self.order.preds[i]
            .iter()
            .map(move |&p| NodeId { graph, index: p })
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
    /// A [`RunError`] if a node panicked or could not start. Its [`error`](RunError::error),
    /// a [`GraphError::Failed`], names them and the nodes that were cancelled because they
    /// depend on one, and says how many finished; its [`outputs`](RunError::outputs) hold
    /// what every finished node produced. Every node that does not depend on a failed one
    /// still ran, and every task has ended. `?` turns it into a [`GraphError`] (dropping the
    /// outputs) or into a `Box<dyn Error>`.
    ///
    /// ```
    /// # let rt = lagom::Runtime::builder().build()?;
    /// let mut g = lagom::TaskGraph::new();
    /// let fetch = g.add_named("fetch", |_| 10);
    /// let bad = g.add_named("parse", |i| if i[0] > 5 { panic!("bad input") } else { i[0] });
    /// let other = g.add_named("other", |_| 7);
    /// g.add_edge(fetch, bad)?;
    /// let err = g.run(&rt).unwrap_err();
    /// assert!(err.to_string().contains("node `parse` failed"));
    /// let done = err.outputs();
    /// assert_eq!((done.get(fetch), done.get(bad), done.get(other)), (Some(&10), None, Some(&7)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Panics
    /// As [`Runtime::scope`]: from a task of another runtime.
    #[track_caller]
    pub fn run(self, rt: &Runtime) -> Result<Outputs<T>, RunError<T>> {
        let TaskGraph {
            id,
            order,
            names,
            starts,
            counters,
        } = self;
        let total = order.len();
        counters.total.store(total, Ordering::Relaxed);
        let state = RunState::new(id, &order, &names, starts, &counters);
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
            Ok(values) => Ok(Outputs { graph: id, values }),
            Err((failed, cancelled, values)) => {
                let outputs = PartialOutputs { graph: id, values };
                Err(RunError {
                    error: GraphError::Failed {
                        failed,
                        cancelled,
                        finished: outputs.finished(),
                        total,
                    },
                    outputs,
                })
            }
        }
    }
}
