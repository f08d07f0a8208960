//! What a node sees and what a run gives back: [`Inputs`] (the predecessors' outputs, by
//! reference), [`Outputs`] (every node's output, by [`NodeId`]), [`PartialOutputs`] (the
//! outputs of the nodes that finished, from a failed run), and [`Progress`] (counters another
//! thread reads while the graph runs).
//!
//! Each is tied to its graph: a [`NodeId`] of another graph finds nothing (`get` and `of`
//! return `None`, indexing panics naming both graphs), whatever its index.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::ops::Index;

use super::NodeId;
use crate::locking::atomic::{AtomicUsize, Ordering};
use crate::locking::cell::UnsafeCell;

/// One node's output cell: written once by the node's task, then only read (`run.rs`).
pub(crate) struct Slot<T>(UnsafeCell<Option<T>>);

// SAFETY: a slot is written once, by its node's task, before the node releases its
// successors (an AcqRel read-modify-write on each successor's count, which the successor's
// task is spawned after); after that it is only read, by any number of successor tasks at
// once (`T: Sync`) and, once every task ended, moved out by the run's owner (`T: Send`).
unsafe impl<T: Send + Sync> Sync for Slot<T> {}

impl<T> Slot<T> {
    /// An empty slot.
    pub(crate) fn new() -> Self {
        Slot(UnsafeCell::new(None))
    }

    /// Stores the output.
    ///
    /// # Safety
    /// Called once, by the node's task, before any reader can run (type doc).
    pub(crate) unsafe fn set(&self, v: T) {
        // SAFETY: per contract: no other access runs.
        self.0.with_mut(|p| unsafe { *p = Some(v) });
    }

    /// The output.
    ///
    /// # Safety
    /// The node has stored it and released this reader (type doc).
    unsafe fn get(&self) -> &T {
        // SAFETY: per contract: written before, never written again while `&self` lives.
        let v = self.0.with(|p| unsafe { (*p).as_ref() });
        v.expect("lagom: a node read an output that was not stored")
    }

    /// Moves the output out, once every task ended.
    pub(crate) fn into_inner(self) -> Option<T> {
        self.0.with_mut(|p| {
            // SAFETY: `self` is owned: nobody else can access the cell.
            unsafe { (*p).take() }
        })
    }
}

/// The outputs of a node's predecessors, by reference, in the order their edges were added
/// ([`TaskGraph::add_edge`](super::TaskGraph::add_edge)).
///
/// ```
/// # let rt = lagom::Runtime::builder().build()?;
/// let mut g = lagom::TaskGraph::new();
/// let a = g.add(|_| 2);
/// let b = g.add(|_| 3);
/// let c = g.add(|inputs| inputs.iter().product::<i32>());
/// g.add_edge(a, c)?;
/// g.add_edge(b, c)?;
/// assert_eq!(g.run(&rt)?[c], 6);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Inputs<'a, T> {
    /// The graph's number.
    pub(crate) graph: u64,
    pub(crate) outputs: &'a [Slot<T>],
    pub(crate) preds: &'a [usize],
}

impl<T> core::fmt::Debug for Inputs<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Inputs")
            .field("preds", &self.preds)
            .finish()
    }
}

impl<'a, T> Inputs<'a, T> {
    /// How many predecessors the node has.
    pub fn len(&self) -> usize {
        self.preds.len()
    }

    /// Whether the node has no predecessor.
    pub fn is_empty(&self) -> bool {
        self.preds.is_empty()
    }

    /// The `i`-th predecessor's output (edge order), if there is one.
    pub fn get(&self, i: usize) -> Option<&'a T> {
        let &p = self.preds.get(i)?;
        // SAFETY: a node runs only once every predecessor stored its output and released it
        // (`run.rs`).
        Some(unsafe { self.outputs[p].get() })
    }

    /// The output of predecessor `node`, if `node` is one (`None` for a node of another
    /// graph).
    pub fn of(&self, node: NodeId) -> Option<&'a T> {
        if node.graph != self.graph {
            return None;
        }
        let i = self.preds.iter().position(|&p| p == node.index)?;
        self.get(i)
    }

    /// The predecessors' ids, in edge order.
    pub fn ids(&self) -> impl ExactSizeIterator<Item = NodeId> + 'a {
        let graph = self.graph;
        self.preds.iter().map(move |&p| NodeId { graph, index: p })
    }

    /// The predecessors' outputs, in edge order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &'a T> + 'a {
        let outputs = self.outputs;
        // SAFETY: as in `get`.
        self.preds.iter().map(move |&p| unsafe { outputs[p].get() })
    }
}

impl<T> Index<usize> for Inputs<'_, T> {
    type Output = T;

    /// The `i`-th predecessor's output.
    ///
    /// # Panics
    /// If the node has no `i`-th predecessor.
    #[track_caller]
    fn index(&self, i: usize) -> &T {
        match self.get(i) {
            Some(v) => v,
            None => panic!(
                "lagom::Inputs: input {i} asked of a node with {} predecessor(s)",
                self.len()
            ),
        }
    }
}

/// Every node's output after a successful [`TaskGraph::run`](super::TaskGraph::run), by
/// [`NodeId`] (`outputs[id]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outputs<T> {
    /// The graph's number.
    pub(crate) graph: u64,
    pub(crate) values: Vec<T>,
}

/// Says why `node` has no entry in outputs of graph `graph` with `len` nodes.
#[cold]
#[inline(never)]
#[track_caller]
fn missing(what: &str, node: NodeId, graph: u64, len: usize) -> ! {
    if node.graph != graph {
        panic!(
            "lagom::{what}: node {} of task graph #{} asked of task graph #{graph}: a NodeId \
             is valid only with the graph whose `add` returned it",
            node.index, node.graph
        )
    }
    panic!(
        "lagom::{what}: node {} asked of a graph with {len} nodes",
        node.index
    )
}

impl<T> Outputs<T> {
    /// The output of `node`, if it is a node of the graph (`None` for a node of another
    /// graph).
    pub fn get(&self, node: NodeId) -> Option<&T> {
        if node.graph != self.graph {
            return None;
        }
        self.values.get(node.index)
    }

    /// The number of outputs (the graph's nodes).
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the graph had no node.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The outputs in the order of the nodes' ids.
    pub fn into_vec(self) -> Vec<T> {
        self.values
    }

    /// The outputs with their ids, in id order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (NodeId, &T)> {
        let graph = self.graph;
        self.values
            .iter()
            .enumerate()
            .map(move |(index, v)| (NodeId { graph, index }, v))
    }
}

impl<T> Index<NodeId> for Outputs<T> {
    type Output = T;

    /// The output of `node`.
    ///
    /// # Panics
    /// If `node` is of another graph (the message names both).
    #[track_caller]
    fn index(&self, node: NodeId) -> &T {
        match self.get(node) {
            Some(v) => v,
            None => missing("Outputs", node, self.graph, self.len()),
        }
    }
}

/// The outputs of the nodes that finished, from a run that failed
/// ([`RunError::outputs`](super::RunError::outputs)): by [`NodeId`], `None` for a node that
/// failed or was cancelled.
///
/// ```
/// # let rt = lagom::Runtime::builder().build()?;
/// let mut g = lagom::TaskGraph::new();
/// let ok = g.add(|_| "kept");
/// let bad = g.add(|_| -> &str { panic!("deliberate") });
/// let after = g.add(|i| i[0]);
/// g.add_edge(bad, after)?;
/// let done = g.run(&rt).unwrap_err().into_outputs();
/// assert_eq!((done.finished(), done.len()), (1, 3));
/// assert_eq!(done.iter().collect::<Vec<_>>(), [(ok, &"kept")]);
/// assert_eq!((done.get(bad), done.get(after)), (None, None));
/// assert_eq!(done.into_vec(), [Some("kept"), None, None]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialOutputs<T> {
    /// The graph's number.
    pub(crate) graph: u64,
    /// By node index; `None` where the node did not finish.
    pub(crate) values: Vec<Option<T>>,
}

impl<T> PartialOutputs<T> {
    /// The output of `node`, if it is a node of the graph that finished (`None` for a node
    /// that failed or was cancelled, and for a node of another graph).
    pub fn get(&self, node: NodeId) -> Option<&T> {
        if node.graph != self.graph {
            return None;
        }
        self.values.get(node.index)?.as_ref()
    }

    /// Moves the output of `node` out (`None` as for [`get`](Self::get), and once taken).
    pub fn take(&mut self, node: NodeId) -> Option<T> {
        if node.graph != self.graph {
            return None;
        }
        self.values.get_mut(node.index)?.take()
    }

    /// How many nodes finished (those [`iter`](Self::iter) yields).
    pub fn finished(&self) -> usize {
        self.values.iter().filter(|v| v.is_some()).count()
    }

    /// The number of nodes of the graph, finished or not.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the graph had no node.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The outputs of the nodes that finished, with their ids, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (NodeId, &T)> {
        let graph = self.graph;
        self.values
            .iter()
            .enumerate()
            .filter_map(move |(index, v)| Some((NodeId { graph, index }, v.as_ref()?)))
    }

    /// Every node's output in the order of the ids, `None` where the node did not finish.
    pub fn into_vec(self) -> Vec<Option<T>> {
        self.values
    }
}

impl<T> Index<NodeId> for PartialOutputs<T> {
    type Output = T;

    /// The output of `node`.
    ///
    /// # Panics
    /// If `node` did not finish (it failed or was cancelled), or is of another graph.
    #[track_caller]
    fn index(&self, node: NodeId) -> &T {
        match self.get(node) {
            Some(v) => v,
            None if node.graph == self.graph && node.index < self.len() => panic!(
                "lagom::PartialOutputs: node {} did not finish (it failed or was cancelled): \
                 use `get` to ask",
                node.index
            ),
            None => missing("PartialOutputs", node, self.graph, self.len()),
        }
    }
}

/// The counters of a run, shared with its [`Progress`] handles.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) total: AtomicUsize,
    pub(crate) done: AtomicUsize,
    pub(crate) failed: AtomicUsize,
    pub(crate) cancelled: AtomicUsize,
}

/// A view of a graph's run that any thread may read while it runs
/// ([`TaskGraph::progress`](super::TaskGraph::progress)): each node's end is one atomic
/// increment, no lock.
#[derive(Debug, Clone)]
pub struct Progress {
    pub(crate) counters: Arc<Counters>,
}

impl Progress {
    /// The graph's nodes.
    pub fn total(&self) -> usize {
        self.counters.total.load(Ordering::Relaxed)
    }

    /// The nodes that have ended: finished, failed or cancelled.
    pub fn done(&self) -> usize {
        self.counters.done.load(Ordering::Relaxed)
    }

    /// The nodes that failed (panicked, or could not start).
    pub fn failed(&self) -> usize {
        self.counters.failed.load(Ordering::Relaxed)
    }

    /// The nodes cancelled because a node they depend on failed.
    pub fn cancelled(&self) -> usize {
        self.counters.cancelled.load(Ordering::Relaxed)
    }

    /// Whether every node has ended.
    pub fn is_finished(&self) -> bool {
        self.done() >= self.total()
    }
}
