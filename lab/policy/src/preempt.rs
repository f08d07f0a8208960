//! Preemption decisions: does a woken entity preempt the running one (`wakeup_preempt`), and
//! the tick.
//!
//! Invariant: a wakeup never preempts for a delayed or forked wakee (except through
//! PREEMPT_SHORT), and an equal-slice wakee never cuts short the running entity's protected
//! slice; it waits for the protection or the deadline to run out.
//!
//! WF_SYNC with NEXT_BUDDY (`preempt_sync`): the waker says it is about to sleep, so the wakee
//! may preempt it once the waker has run `migration_cost` (a quarter of it if the wakeup went
//! through CPU selection, `WF_RQ_SELECTED`). Linux v7.1 measures that time as
//! `now − exec_start` right after `update_curr` set `exec_start = now`: always 0, so the rule
//! preempts only with a migration cost of 0, and lagom does the same by default. The fix
//! posted for it (November 2026, against v7.4-rc1) measures `sum_exec_runtime −
//! prev_sum_exec_runtime`, the time run since the waker was picked: `PREEMPT_SYNC_RUNTIME`.

use super::entity::SchedEntity;
use super::features::Feature;
use super::runqueue::{Handle, RunQueue};
use super::tree::NIL;
use super::vtime::{vbefore, vmin};
use super::wake_flags::WakeFlags;
use super::weight::calc_delta_fair;

/// What a wakeup-preemption check decided.
#[derive(Debug)]
#[must_use = "a finished delayed entity must be taken back by the caller"]
pub enum Wakeup<T> {
    /// Leave the running entity alone.
    NoPreempt,
    /// Set need-resched on this runqueue's CPU (lazily: honoured at the next scheduling
    /// point). Also returned when nothing is running.
    Preempt,
    /// The check's pick met a delayed entity and completed its dequeue (as a pick does):
    /// take the task back and call [`RunQueue::wakeup_preempt`] again.
    FinishedDelayed {
        /// The entity, with its lag saved.
        se: SchedEntity,
        /// Its payload.
        payload: T,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Action {
    None,
    Short,
    Pick,
    Resched,
}

impl<T> RunQueue<T> {
    /// `wakeup_preempt_fair`: the entity behind `h` was just enqueued or requeued; should it
    /// preempt the running entity? May set the next buddy (NEXT_BUDDY), shrink the running
    /// entity's protection (RUN_TO_PARITY), or cancel it (PREEMPT_SHORT).
    ///
    /// Nothing is decided while a switch is already asked for
    /// ([`need_resched`](Self::need_resched)): the kernel's early return on
    /// `test_tsk_need_resched(rq->curr)`. A `Preempt` answer sets it.
    pub fn wakeup_preempt(&mut self, h: Handle, wf: WakeFlags, now: u64) -> Wakeup<T> {
        let w = self.wakeup_preempt_inner(h, wf, now);
        if matches!(w, Wakeup::Preempt) {
            self.need_resched = true;
        }
        w
    }

    fn wakeup_preempt_inner(&mut self, h: Handle, wf: WakeFlags, now: u64) -> Wakeup<T> {
        let p = self.idx(h);
        let c = self.curr;
        if c == NIL {
            return Wakeup::Preempt;
        }
        if p == c || self.need_resched || !self.feat(Feature::WakeupPreemption) {
            return Wakeup::NoPreempt;
        }
        self.update_curr(now);
        let (pse, se) = (*self.se(p), *self.se(c));
        let action = if self.feat(Feature::PreemptShort) && pse.slice < se.slice {
            Action::Short
        } else {
            if wf.contains(WakeFlags::FORK) || pse.sched_delayed {
                return Wakeup::NoPreempt;
            }
            let mut action = Action::Pick;
            if self.feat(Feature::NextBuddy) {
                let keep = self.next != NIL && vbefore(self.se(self.next).deadline, pse.deadline);
                if !keep {
                    self.next = p;
                    if wf.contains(WakeFlags::SYNC) {
                        action = self.preempt_sync(wf, &pse, &se, now);
                    }
                }
            }
            action
        };
        match action {
            Action::None => return Wakeup::NoPreempt,
            Action::Resched => return Wakeup::Preempt,
            Action::Short | Action::Pick => {}
        }
        let n = self.pick_eevdf_idx(action != Action::Short);
        if n != NIL && self.se(n).sched_delayed {
            let (se, payload) = self.finish_delayed_idx(n);
            return Wakeup::FinishedDelayed { se, payload };
        }
        if n == p {
            if action == Action::Short {
                let cse = self.se_mut(c);
                if vbefore(cse.vruntime, cse.vprot) {
                    cse.vprot = cse.vruntime;
                }
                self.clear_buddies(c);
            }
            return Wakeup::Preempt;
        }
        if self.feat(Feature::RunToParity) {
            // Let the wakee in within one minimum slice.
            let min_slice = self.min_slice();
            let cse = self.se_mut(c);
            let cap = cse
                .vruntime
                .wrapping_add(calc_delta_fair(min_slice, cse.weight));
            cse.vprot = vmin(cse.vprot, cap);
        }
        Wakeup::NoPreempt
    }

    /// `preempt_sync`: reschedule at once only if the wakee's deadline is earlier and the
    /// waker has run its threshold (module doc). `se` is the waker as charged at `now`.
    fn preempt_sync(&self, wf: WakeFlags, pse: &SchedEntity, se: &SchedEntity, now: u64) -> Action {
        let mut threshold = self.cfg.migration_cost;
        if wf.contains(WakeFlags::RQ_SELECTED) {
            threshold >>= 2;
        }
        let ran = if self.feat(Feature::PreemptSyncRuntime) {
            se.sum_exec_runtime.saturating_sub(se.prev_sum_exec_runtime)
        } else {
            // v7.1: the time since the charge that just ran (`exec_start` is `now`).
            now.saturating_sub(se.exec_start)
        };
        if vbefore(pse.deadline, se.deadline) && ran >= threshold {
            Action::Resched
        } else {
            Action::None
        }
    }

    /// The scheduler tick (`task_tick_fair`): charges the running entity; returns whether it
    /// should be switched out ([`need_resched`](Self::need_resched): this charge used up its
    /// request or its protected slice while others are queued, or an earlier operation asked
    /// for a switch that no pick has answered yet).
    pub fn task_tick(&mut self, now: u64) -> bool {
        self.update_curr(now);
        self.need_resched
    }
}
