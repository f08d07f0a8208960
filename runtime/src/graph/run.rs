//! Running a graph: one task per node, spawned by the node that releases it last.
//!
//! Invariant: *a node's task is spawned exactly once, after every predecessor stored its
//! output, by the predecessor whose end brought its count of unfinished predecessors to zero;
//! a node with a failed predecessor is never run, and is counted cancelled once.*
//!
//! Each node has `remaining` (its predecessors not yet ended) and `poisoned` (one of them
//! failed). A node that ends stores its output (or its failure), then for each successor
//! stores `poisoned` if it failed and decrements the successor's `remaining` with an AcqRel
//! read-modify-write: the Release half publishes the output and the poison, and the
//! decrements form one release sequence, so the predecessor that reads 1 (the last) sees every
//! other predecessor's output and poison through its Acquire half. That predecessor alone then
//! spawns the successor's task, from its own task, so the new task starts on the finishing
//! worker (the output it reads is in that worker's cache) unless CPU selection places it
//! elsewhere or the node's affinity forbids — or, if the successor is poisoned, marks it
//! cancelled and goes on to release that successor's successors as failed, in its place. The
//! roots are spawned at the start, from the calling task or, from a plain thread, from one
//! launcher task (a spawn from a task uses its worker's stack pool; one from outside maps a
//! stack).
//!
//! Each task is spawned in a [`Scope`](crate::Scope) owned by `run`'s caller, which waits for
//! all of them; so nodes may borrow from the caller's stack (`'env`), and every task has ended
//! when `run` returns, whatever failed.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

use super::data::{Counters, Inputs, Slot};
use super::error::{FailedNode, NodeFailure};
use super::order::Order;
use super::{Job, NodeId};
use crate::JoinError;
use crate::Scope;
use crate::locking::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use crate::locking::cell::UnsafeCell;
use crate::task::Builder;

/// The node has not ended.
const PENDING: u32 = 0;
/// It stored its output.
const FINISHED: u32 = 1;
/// It failed (its failure is stored).
const FAILED: u32 = 2;
/// It was never run: a node it depends on failed.
const CANCELLED: u32 = 3;

/// One node's part of a run.
pub(crate) struct NodeRun<'env, T> {
    /// Predecessors not yet ended.
    remaining: AtomicUsize,
    /// A predecessor failed.
    poisoned: AtomicBool,
    /// `PENDING`, `FINISHED`, `FAILED` or `CANCELLED`.
    status: AtomicU32,
    /// The closure and the task options, taken by the one spawner (module doc).
    start: UnsafeCell<Option<(Builder, Job<'env, T>)>>,
    /// Why it failed; written by whoever marks it `FAILED`, read after the run.
    failure: UnsafeCell<Option<NodeFailure>>,
}

/// A run's shared state, borrowed by every node's task.
pub(crate) struct RunState<'g, 'env, T> {
    /// The graph's number, for the [`NodeId`]s of failures.
    pub(crate) graph: u64,
    pub(crate) order: &'g Order,
    pub(crate) names: &'g [String],
    pub(crate) nodes: Vec<NodeRun<'env, T>>,
    pub(crate) outputs: Vec<Slot<T>>,
    pub(crate) counters: &'g Counters,
}

// SAFETY: the cells of each node are handed from one task to the next by the protocol of the
// module doc: `start` is taken once by the node's one spawner, `failure` written once by the
// one task that marks the node failed, before the release that publishes it, and read by the
// owner after every task ended; outputs as `Slot` says. The closures are `Send`, the outputs
// `Send + Sync`.
unsafe impl<T: Send + Sync> Sync for RunState<'_, '_, T> {}

/// Runs `f`, catching its panic (with `std`; without it a panic aborts the process).
fn catch<R>(f: impl FnOnce() -> R) -> Result<R, Box<dyn core::any::Any + Send>> {
    #[cfg(feature = "std")]
    return std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    #[cfg(not(feature = "std"))]
    return Ok(f());
}

impl<'g, 'env, T: Send + Sync> RunState<'g, 'env, T> {
    /// The state of a run of `order`'s nodes with these options and closures.
    pub(crate) fn new(
        graph: u64,
        order: &'g Order,
        names: &'g [String],
        starts: Vec<(Builder, Job<'env, T>)>,
        counters: &'g Counters,
    ) -> Self {
        let nodes = starts
            .into_iter()
            .enumerate()
            .map(|(i, s)| NodeRun {
                remaining: AtomicUsize::new(order.preds[i].len()),
                poisoned: AtomicBool::new(false),
                status: AtomicU32::new(PENDING),
                start: UnsafeCell::new(Some(s)),
                failure: UnsafeCell::new(None),
            })
            .collect();
        let outputs = (0..order.len()).map(|_| Slot::new()).collect();
        RunState {
            graph,
            order,
            names,
            nodes,
            outputs,
            counters,
        }
    }

    /// Spawns node `i`, whose predecessors all finished, in `s`; a failed spawn fails the
    /// node. The caller is `i`'s one spawner (module doc).
    pub(crate) fn start<'s>(&'s self, s: &'s Scope<'s, '_>, i: usize)
    where
        'g: 's,
        'env: 's,
    {
        // SAFETY: the one spawner takes the start once (module doc).
        let start = self.nodes[i].start.with_mut(|p| unsafe { (*p).take() });
        let (b, job) = start.expect("lagom: a graph node is started once");
        if let Err(e) = s.spawn_detached(b, move || self.execute(s, i, job)) {
            self.fail(i, NodeFailure::Spawn(e));
            self.release(s, i, false);
        }
    }

    /// Node `i`'s task: runs its closure on its inputs, stores what came of it, releases its
    /// successors.
    fn execute<'s>(&'s self, s: &'s Scope<'s, '_>, i: usize, job: Job<'env, T>)
    where
        'g: 's,
        'env: 's,
    {
        let inputs = Inputs {
            graph: self.graph,
            outputs: &self.outputs,
            preds: &self.order.preds[i],
        };
        match catch(move || job(inputs)) {
            Ok(v) => {
                // SAFETY: node `i`'s one store, before it releases its successors.
                unsafe { self.outputs[i].set(v) };
                self.nodes[i].status.store(FINISHED, Ordering::Relaxed);
                self.counters.done.fetch_add(1, Ordering::Relaxed);
                self.release(s, i, true);
            }
            Err(payload) => {
                let id = crate::task::current().map_or(0, |c| c.id);
                let e = JoinError::panicked(self.names[i].clone(), id, payload);
                self.fail(i, NodeFailure::Panicked(e));
                self.release(s, i, false);
            }
        }
    }

    /// Marks node `i` failed with `f`.
    fn fail(&self, i: usize, f: NodeFailure) {
        // SAFETY: the one task that fails node `i` (its own, or its spawner's after a failed
        // spawn) writes this once, before the release that publishes it.
        self.nodes[i].failure.with_mut(|p| unsafe { *p = Some(f) });
        self.nodes[i].status.store(FAILED, Ordering::Relaxed);
        self.counters.failed.fetch_add(1, Ordering::Relaxed);
        self.counters.done.fetch_add(1, Ordering::Relaxed);
    }

    /// Node `i` ended (`ok`: with an output): releases its successors (module doc); those it
    /// releases last are spawned, or, poisoned, cancelled and released in turn.
    fn release<'s>(&'s self, s: &'s Scope<'s, '_>, i: usize, ok: bool)
    where
        'g: 's,
        'env: 's,
    {
        let mut next = Some((i, ok));
        let mut more: Vec<usize> = Vec::new();
        while let Some((n, ok)) = next.take().or_else(|| more.pop().map(|n| (n, false))) {
            for &j in &self.order.succs[n] {
                let node = &self.nodes[j];
                if !ok {
                    node.poisoned.store(true, Ordering::Relaxed);
                }
                if node.remaining.fetch_sub(1, Ordering::AcqRel) != 1 {
                    continue;
                }
                if node.poisoned.load(Ordering::Relaxed) {
                    node.status.store(CANCELLED, Ordering::Relaxed);
                    // Its closure is dropped here, unrun.
                    // SAFETY: the one releaser of `j` takes its start.
                    drop(node.start.with_mut(|p| unsafe { (*p).take() }));
                    self.counters.cancelled.fetch_add(1, Ordering::Relaxed);
                    self.counters.done.fetch_add(1, Ordering::Relaxed);
                    more.push(j);
                } else {
                    self.start(s, j);
                }
            }
        }
    }

    /// After every task ended: the outputs; or who failed, who was cancelled, and the
    /// outputs of the nodes that finished (by index, `None` for the others).
    #[allow(clippy::type_complexity)]
    pub(crate) fn finish(self) -> Result<Vec<T>, (Vec<FailedNode>, Vec<String>, Vec<Option<T>>)> {
        let mut failed = Vec::new();
        let mut cancelled = Vec::new();
        let mut values = Vec::with_capacity(self.outputs.len());
        for (i, (n, out)) in self.nodes.into_iter().zip(self.outputs).enumerate() {
            let status = n.status.load(Ordering::Relaxed);
            values.push(out.into_inner());
            match status {
                FINISHED => {}
                FAILED => failed.push(FailedNode {
                    node: NodeId {
                        graph: self.graph,
                        index: i,
                    },
                    name: self.names[i].clone(),
                    failure: n
                        .failure
                        .with_mut(|p| {
                            // SAFETY: every task ended; `self` is owned.
                            unsafe { (*p).take() }
                        })
                        .expect("lagom: a failed node stored its failure"),
                }),
                CANCELLED => cancelled.push(self.names[i].clone()),
                _ => unreachable!("lagom: a graph node neither ran nor was cancelled"),
            }
        }
        match failed.is_empty() {
            // Every node finished, so every slot holds its output.
            true => Ok(values.into_iter().flatten().collect()),
            false => Err((failed, cancelled, values)),
        }
    }
}
