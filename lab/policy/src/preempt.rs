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
use super::weight::{NICE_0_LOAD, calc_delta_fair};

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

    /// When the running entity's charge will next ask for a switch if nothing else happens
    /// (the kernel's `hrtick_start_fair`, which arms a high-resolution timer for the end of
    /// the running task's slice so that the tick need not find it): the scheduler-clock time
    /// at which [`update_curr`](Self::update_curr) first returns `true`, i.e. at which its
    /// vruntime reaches the end of its protected slice (`vprot`: its request's deadline, or
    /// less under RUN_TO_PARITY) while others are queued. `None` when nothing runs, when it
    /// runs alone (a charge then begins a new request in place and asks for nothing), or
    /// when a switch is already asked for ([`need_resched`](Self::need_resched)). A time at
    /// or before the last accounting point means the next charge asks.
    ///
    /// The real time is the virtual distance scaled back by the entity's weight, rounded up:
    /// the least charge that reaches it (the charge rounds its virtual delta down). The
    /// kernel's timer measures `slice − ran` in real time instead, which is the same point
    /// for an entity that runs its whole request; lagom's is exact for its own charge, so a
    /// driver that arms a timer for it is woken when the charge asks, not before.
    ///
    /// ```
    /// use lagom_policy::{EnqueueFlags, EnqueueKind, Pick, RqConfig, RunQueue, SchedEntity};
    /// let mut cfg = RqConfig::for_cpus(1);
    /// cfg.base_slice = 3_000_000;
    /// let mut rq = RunQueue::new(cfg);
    /// let a = rq.enqueue(SchedEntity::new(0), (), EnqueueKind::Wakeup, EnqueueFlags::NONE, 0);
    /// assert!(matches!(rq.pick_next(0), Pick::Run(h) if h == a));
    /// assert_eq!(rq.curr_resched_at(), None, "alone: its charge never asks");
    /// rq.enqueue(SchedEntity::new(0), (), EnqueueKind::Wakeup, EnqueueFlags::NONE, 0);
    /// let at = rq.curr_resched_at().expect("another is queued");
    /// assert!(!rq.update_curr(at - 1));
    /// assert!(rq.update_curr(at));
    /// ```
    pub fn curr_resched_at(&self) -> Option<u64> {
        let c = self.curr;
        if c == NIL || self.nr_queued <= 1 || self.need_resched {
            return None;
        }
        let se = self.se(c);
        // `charge_by`: a switch once the vruntime reaches the deadline or the protected
        // point, whichever comes first.
        let target = vmin(se.vprot, se.deadline);
        let left = target.wrapping_sub(se.vruntime) as i64;
        if left <= 0 {
            return Some(se.exec_start);
        }
        let left = left as u64;
        let wall = if se.weight == NICE_0_LOAD {
            left
        } else {
            let w = u128::from(se.weight);
            let n = u128::from(NICE_0_LOAD);
            u64::try_from((u128::from(left) * w).div_ceil(n)).unwrap_or(u64::MAX)
        };
        Some(se.exec_start.saturating_add(wall))
    }
}

/// How long a running task's scheduling points (`cond_resched`, the point after a spawn) may
/// go between two full ticks when nothing asks for the CPU: 50 µs. A full tick charges the
/// running task (`task_tick`), fires due timers and runs the periodic balance; between full
/// ticks a scheduling point only looks for a request to switch. lagom has no timer
/// interrupt: this is its tick, for both drivers (the threaded runtime's `cond_resched`, the
/// simulator's cooperative scheduling points).
pub const COND_RESCHED_TICK: u64 = 50_000;

/// Whether a scheduling point at `now` runs its full tick: the next full tick (`next_tick`,
/// [`COND_RESCHED_TICK`] after the last one, sooner for a due timer, 0 right after a switch)
/// is due, or something asks for the CPU — a request to switch (`need_resched`) or a wakeup
/// waiting on the CPU's wakelist (`wakelist_pending`). Both drivers call it at every
/// scheduling point, so that they tick alike.
///
/// ```
/// use lagom_policy::{COND_RESCHED_TICK, resched_point_due};
/// assert!(resched_point_due(0, 0, false, false), "right after a switch");
/// assert!(!resched_point_due(10_000, COND_RESCHED_TICK, false, false));
/// assert!(resched_point_due(10_000, COND_RESCHED_TICK, true, false));
/// assert!(resched_point_due(10_000, COND_RESCHED_TICK, false, true));
/// assert!(resched_point_due(COND_RESCHED_TICK, COND_RESCHED_TICK, false, false));
/// ```
#[inline]
pub fn resched_point_due(
    now: u64,
    next_tick: u64,
    need_resched: bool,
    wakelist_pending: bool,
) -> bool {
    now >= next_tick || need_resched || wakelist_pending
}
