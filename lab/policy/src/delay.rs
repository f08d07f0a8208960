//! Leaving a runqueue: `dequeue`, and delayed dequeue (DELAY_DEQUEUE, DELAY_ZERO).
//!
//! Invariant: a delayed entity is never handed out as work; it stays accounted (in the tree,
//! in V, in the load) until a pick selects it — then its dequeue completes and it is handed
//! back ([`Pick::FinishedDelayed`](super::Pick)) — or until it is woken in place
//! ([`RunQueue::requeue_delayed`]).
//!
//! Why: an entity that sleeps with negative lag would shed its debt if it left at once (and
//! could game the scheduler by short sleeps at the end of each slice). Delayed, it keeps
//! competing until it would be picked, at which point its lag is ≥ 0 by construction.
//! DELAY_ZERO then clips the lag it leaves with to at most zero, so it gains no credit either.
//!
//! States of one entity: OFF → (enqueue) QUEUED ⇄ (pick / switch-out) RUNNING; RUNNING →
//! (sleep, eligible) OFF; RUNNING → (sleep, not eligible) DELAYED; DELAYED → (pick) OFF;
//! DELAYED → (wake) QUEUED.

use super::entity::SchedEntity;
use super::features::Feature;
use super::runqueue::{Handle, RunQueue};
use super::tree::NIL;

/// Why an entity is dequeued (the kernel's DEQUEUE_* flags that matter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DequeueKind {
    /// The task blocks (DEQUEUE_SLEEP): may be delayed; a fresh deadline on wakeup.
    Sleep,
    /// Save/restore or migration (DEQUEUE_SAVE): never delayed; with PLACE_REL_DEADLINE the
    /// deadline is kept relative to vruntime; a delayed entity stays delayed (it is enqueued
    /// elsewhere as delayed).
    Save,
    /// The task ended (`TASK_DEAD`): removed at once, never delayed, and its lag is not
    /// saved (nor V computed for it). The kernel dequeues a dying task as a sleeper, which
    /// may delay it, and completes that dequeue at once in `task_dead_fair`; at the same
    /// `now` both leave the runqueue as this plain removal does (V, sums, load, counts,
    /// current: the zero point of the sums may be rebased later, which moves nothing), and
    /// only the dead entity's saved lag, which nobody reads, differs (the round
    /// trip and the lag cost ~270 instructions per spawn+join).
    Dead,
}

/// What [`RunQueue::dequeue`] did.
#[derive(Debug)]
#[must_use = "a removed entity must be taken back by the caller"]
pub enum Dequeued<T> {
    /// The entity stays queued as delayed (not eligible, DELAY_DEQUEUE): the task is asleep
    /// but still on the runqueue; it leaves when picked or is requeued when woken.
    Delayed,
    /// The entity left the runqueue.
    Removed {
        /// The entity, with its lag saved.
        se: SchedEntity,
        /// Its payload.
        payload: T,
    },
}

impl<T> RunQueue<T> {
    /// Dequeues the entity behind `h` (`dequeue_entity`): charges the running entity, then
    /// either delays the dequeue (a sleep of a non-eligible entity under DELAY_DEQUEUE) or
    /// saves the lag and removes it. If it is the running entity, the runqueue has no current
    /// entity afterwards unless it was delayed (a delayed current stays current until the next
    /// pick puts it back into the tree).
    pub fn dequeue(&mut self, h: Handle, kind: DequeueKind, now: u64) -> Dequeued<T> {
        let i = self.idx(h);
        self.update_curr(now);
        if kind == DequeueKind::Dead {
            // No lag to save, hence no V to compute: the entity leaves for good.
            self.clear_buddies(i);
            let (se, payload) = self.remove(i, false);
            return Dequeued::Removed { se, payload };
        }
        let (vruntime, delayed) = {
            let se = self.se(i);
            (se.vruntime, se.sched_delayed)
        };
        if kind == DequeueKind::Sleep && delayed {
            // Already asleep: a second sleep completes the delayed dequeue.
            let (se, payload) = self.finish_delayed_idx(i);
            return Dequeued::Removed { se, payload };
        }
        // V once, for both the eligibility test and the saved lag (W > 0: `i` is queued).
        let v_avg = self.avg_vruntime();
        if kind == DequeueKind::Sleep
            && self.feat(Feature::DelayDequeue)
            // Every sleeper delayed (runtime/tests/mutants.sh) drops the eligibility test.
            && (cfg!(lagom_mutant = "delay_every_sleeper") || !Self::eligible_at(v_avg, vruntime))
        {
            self.clear_buddies(i);
            self.update_entity_lag_at(i, v_avg);
            self.se_mut(i).sched_delayed = true;
            if i != self.curr {
                self.tree.set_delayed(i, true);
            }
            self.nr_delayed += 1;
            return Dequeued::Delayed;
        }
        self.clear_buddies(i);
        self.update_entity_lag_at(i, v_avg);
        if kind == DequeueKind::Save && self.feat(Feature::PlaceRelDeadline) {
            let se = self.se_mut(i);
            se.deadline = se.deadline.wrapping_sub(se.vruntime);
            se.rel_deadline = true;
        }
        let (se, payload) = self.remove(i, false);
        Dequeued::Removed { se, payload }
    }

    /// Removes accounted entity `i` and releases its slot; `finish_delay` also clears its
    /// delayed flag (a completed delayed dequeue; a save dequeue keeps it). The flags are
    /// written in the slot, so that the entity is copied out once, straight into the result.
    #[inline]
    fn remove(&mut self, i: u32, finish_delay: bool) -> (SchedEntity, T) {
        self.detach(i);
        if i == self.curr {
            self.curr = NIL;
        }
        let se = self.se_mut(i);
        se.on_rq = false;
        let delayed = se.sched_delayed;
        se.sched_delayed &= !finish_delay;
        if delayed {
            self.nr_delayed -= 1;
        }
        self.release(i)
    }

    /// Completes the delayed dequeue of entity `i`.
    pub(super) fn finish_delayed_idx(&mut self, i: u32) -> (SchedEntity, T) {
        debug_assert!(self.se(i).sched_delayed);
        self.clear_buddies(i);
        self.update_entity_lag(i);
        self.remove(i, true)
    }

    /// Completes the delayed dequeue of the entity behind `h` outside a pick (the task exits
    /// or leaves the fair class) and hands it back.
    pub fn finish_delayed(&mut self, h: Handle, now: u64) -> (SchedEntity, T) {
        let i = self.idx(h);
        assert!(
            self.se(i).sched_delayed,
            "finish_delayed on an entity that is not delayed"
        );
        self.update_curr(now);
        self.finish_delayed_idx(i)
    }

    /// Wakes a delayed entity in place (`requeue_delayed_entity`, the `ttwu_runnable` path).
    /// Its lag is saved again (at least the lag it was delayed with; ≤ 0 with DELAY_ZERO); if
    /// that changed anything it is placed afresh with a new request, else it keeps its
    /// vruntime and deadline. The caller then runs [`RunQueue::wakeup_preempt`].
    ///
    /// In Linux v7.1 the running entity is not accounted first: `ttwu_runnable` requeues
    /// through `enqueue_task(ENQUEUE_DELAYED)`, which does not call `update_curr`; the
    /// preemption check that follows does. So the lag saved again is measured against V as of
    /// the last accounting, and `now` is not read. With `REQUEUE_UPDATE_CURR` (mainline's
    /// 333238da9a19, v7.2) the running entity is charged up to `now` first, so the lag is
    /// measured against an up-to-date V (a charge that asks for a switch sets
    /// [`need_resched`](Self::need_resched)).
    pub fn requeue_delayed(&mut self, h: Handle, now: u64) {
        let i = self.idx(h);
        assert!(
            self.se(i).sched_delayed,
            "requeue_delayed on an entity that is not delayed"
        );
        if self.feat(Feature::RequeueUpdateCurr) {
            self.update_curr(now);
        }
        let replace = self.update_entity_lag(i);
        self.se_mut(i).sched_delayed = false;
        self.nr_delayed -= 1;
        if replace {
            // A delayed entity may still be current (woken before it was switched out). The
            // kernel then places it while it still counts in V and in the load it inflates
            // its lag by; lagom takes it out of both first, so that the placed lag is exactly
            // the saved one, as for any other placement. Placement reads no flag,
            // and a tree entity's item moves with the flag already cleared.
            self.place_again(i);
        } else if i != self.curr {
            self.tree.set_delayed(i, false);
        }
    }
}
