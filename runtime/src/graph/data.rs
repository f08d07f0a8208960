//! What a node sees and what a run gives back: [`Inputs`] (the predecessors' outputs, by
//! reference), [`Outputs`] (every node's output, by [`NodeId`]), and [`Progress`] (counters
//! another thread reads while the graph runs).

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

    /// The output of predecessor `node`, if `node` is one.
    pub fn of(&self, node: NodeId) -> Option<&'a T> {
        let i = self.preds.iter().position(|&p| p == node.0)?;
        self.get(i)
    }

    /// The predecessors' ids, in edge order.
    pub fn ids(&self) -> impl ExactSizeIterator<Item = NodeId> + 'a {
        self.preds.iter().map(|&p| NodeId(p))
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
    pub(crate) values: Vec<T>,
}

impl<T> Outputs<T> {
    /// The output of `node`, if it is a node of the graph.
    pub fn get(&self, node: NodeId) -> Option<&T> {
        self.values.get(node.0)
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
        self.values.iter().enumerate().map(|(i, v)| (NodeId(i), v))
    }
}

impl<T> Index<NodeId> for Outputs<T> {
    type Output = T;

    #[track_caller]
    fn index(&self, node: NodeId) -> &T {
        match self.get(node) {
            Some(v) => v,
            None => panic!(
                "lagom::Outputs: node {} asked of a graph with {} nodes",
                node.0,
                self.len()
            ),
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
