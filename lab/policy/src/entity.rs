//! The scheduling entity (the kernel's `sched_entity`): per-task scheduling state.
//!
//! A [`SchedEntity`] is plain data. While its task is not queued the caller owns it (the task
//! control block holds it); [`RunQueue::enqueue`](super::RunQueue::enqueue) moves it into the
//! runqueue, and a full dequeue hands it back. Virtual quantities (vruntime, deadline, vlag,
//! vprot) are in virtual nanoseconds: real nanoseconds scaled by `NICE_0_LOAD / weight`.

use super::weight::{NICE_0_LOAD, scale_signed, weight_of_nice};

/// Smallest custom slice (0.1 ms), as for `sched_attr.sched_runtime`.
pub const MIN_CUSTOM_SLICE: u64 = 100_000;
/// Largest custom slice (100 ms).
pub const MAX_CUSTOM_SLICE: u64 = 100_000_000;

/// Scheduling state of one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedEntity {
    /// Load weight at full resolution (see [`weight_of_nice`]).
    pub weight: u64,
    /// Virtual service received (virtual ns).
    pub vruntime: u64,
    /// Virtual deadline of the current request; the runqueue's tree key. Holds
    /// `deadline − vruntime` instead while `rel_deadline` is set.
    pub deadline: u64,
    /// Saved virtual lag `V − vruntime`, written when the entity leaves (or is delayed) and
    /// used when it is placed again.
    pub vlag: i64,
    /// Protected vruntime: as the running entity it is not preempted by a pick before its
    /// vruntime reaches this mark (RUN_TO_PARITY).
    pub vprot: u64,
    /// Request size in real ns: the runqueue's base slice, or the custom slice.
    pub slice: u64,
    /// `slice` was set explicitly ([`SchedEntity::set_custom_slice`]).
    pub custom_slice: bool,
    /// `deadline` holds a relative value (PLACE_REL_DEADLINE).
    pub rel_deadline: bool,
    /// Accounted in a runqueue (in its tree, running, or delayed).
    pub on_rq: bool,
    /// Asked to sleep but left queued because it was not eligible (DELAY_DEQUEUE).
    pub sched_delayed: bool,
    /// Clock value at the last accounting point while running (0: never ran / cache cold).
    pub exec_start: u64,
    /// Total real run time (ns).
    pub sum_exec_runtime: u64,
    /// `sum_exec_runtime` when the entity was last switched in.
    pub prev_sum_exec_runtime: u64,
}

impl SchedEntity {
    /// A fresh entity at `nice` (clamped into −20 … 19), as after fork: zero vruntime, lag and
    /// run time, no custom slice. The slice is filled in at placement.
    pub const fn new(nice: i32) -> SchedEntity {
        SchedEntity::with_weight(weight_of_nice(nice))
    }

    /// A fresh entity with an explicit full-resolution weight (must be positive).
    pub const fn with_weight(weight: u64) -> SchedEntity {
        SchedEntity {
            weight: if weight == 0 { 1 } else { weight },
            vruntime: 0,
            deadline: 0,
            vlag: 0,
            vprot: 0,
            slice: 0,
            custom_slice: false,
            rel_deadline: false,
            on_rq: false,
            sched_delayed: false,
            exec_start: 0,
            sum_exec_runtime: 0,
            prev_sum_exec_runtime: 0,
        }
    }

    /// Sets a custom slice (`sched_attr.sched_runtime`), clamped into 0.1 … 100 ms; `None`
    /// returns to the runqueue's base slice at the next placement. For a queued entity use
    /// [`RunQueue::set_slice`](super::RunQueue::set_slice).
    pub fn set_custom_slice(&mut self, slice: Option<u64>) {
        match slice {
            Some(s) => {
                self.slice = s.clamp(MIN_CUSTOM_SLICE, MAX_CUSTOM_SLICE);
                self.custom_slice = true;
            }
            None => self.custom_slice = false,
        }
    }

    /// Changes the weight of an entity that is not queued, rescaling its saved lag (and a
    /// relative deadline) so that its real lag is kept. For a queued entity use
    /// [`RunQueue::reweight`](super::RunQueue::reweight).
    pub fn reweight_detached(&mut self, weight: u64) {
        debug_assert!(
            !self.on_rq,
            "queued entities are reweighted by their runqueue"
        );
        let weight = weight.max(1);
        self.vlag = scale_signed(self.vlag, self.weight, weight);
        if self.rel_deadline {
            self.deadline = scale_signed(self.deadline as i64, self.weight, weight) as u64;
        }
        self.weight = weight;
    }

    /// The entity's nice level if its weight is one of the table's.
    pub fn nice(&self) -> Option<i32> {
        (-20..=19).find(|n| weight_of_nice(*n) == self.weight)
    }

    /// Real lag (ns of service owed) for a virtual lag, at this entity's weight.
    pub fn real_lag(&self, vlag: i64) -> i64 {
        scale_signed(vlag, self.weight, NICE_0_LOAD)
    }
}
