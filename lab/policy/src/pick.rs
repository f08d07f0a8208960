//! Selection: `pick_eevdf` (eligible entity with the earliest virtual deadline, with the
//! kernel's buddy and slice-protection rules), switching entities in and out, and yield.
//!
//! Invariant: while any entity is queued, the one with the smallest vruntime is eligible, so a
//! pick on a non-empty runqueue always finds an entity.

use super::entity::SchedEntity;
use super::features::Feature;
use super::runqueue::{Handle, RunQueue};
use super::tree::NIL;
use super::vtime::{vbefore, vdiff, vmin};
use super::weight::calc_delta_fair;

/// How many picks ahead [`RunQueue::pick_next`] prefetches an entity: enough picks to cover
/// a miss to memory (a few hundred ns on a busy host) at about 50–100 ns per pick.
const PREFETCH_AHEAD: usize = 3;

/// What [`RunQueue::pick_next`] found. It never loses a task: a delayed entity that wins the
/// pick leaves the runqueue and is handed back.
#[derive(Debug)]
#[must_use = "a finished delayed entity must be taken back by the caller"]
pub enum Pick<T> {
    /// Run this entity; it is now the runqueue's current entity.
    Run(Handle),
    /// The winner was a delayed entity: its dequeue is now complete. The task is off
    /// the runqueue (its sleep is final); pick again.
    FinishedDelayed {
        /// The entity, with its lag saved.
        se: SchedEntity,
        /// Its payload.
        payload: T,
    },
    /// Nothing is queued.
    Idle,
}

impl<T> RunQueue<T> {
    /// `pick_eevdf(protect)` without side effects: the handle of the entity EEVDF would
    /// run now, which may be a delayed entity. `protect = false` ignores the next buddy and
    /// the running entity's slice protection (the PREEMPT_SHORT check).
    pub fn pick_eevdf(&self, protect: bool) -> Option<Handle> {
        let i = self.pick_eevdf_idx(protect);
        (i != NIL).then(|| self.handle(i))
    }

    pub(super) fn pick_eevdf_idx(&self, protect: bool) -> u32 {
        if self.nr_queued == 0 {
            return NIL;
        }
        // Alone: no choice (this may hand out a delayed entity, which the caller finishes).
        if self.nr_queued == 1 {
            return if self.curr != NIL && self.se(self.curr).on_rq {
                self.curr
            } else {
                self.tree.leftmost()
            };
        }
        let (s, w) = self.sums_with_curr();
        let v0 = self.zero_vruntime;
        if (0..w).contains(&s) {
            // V is the zero point (the usual case: the operation before read V and nothing
            // moved since), so `S ≥ (v − v0)·W` holds iff `v − v0 ≤ 0` (see `eligible_at`):
            // no 128-bit product per test.
            self.pick_eevdf_with(protect, |v: u64| vdiff(v, v0) <= 0)
        } else {
            self.pick_eevdf_with(protect, |v: u64| s >= vdiff(v, v0) as i128 * w)
        }
    }

    /// The choice of [`Self::pick_eevdf_idx`] among two or more queued entities, with
    /// `eligible` the exact eligibility test for the present sums.
    #[inline(always)]
    fn pick_eevdf_with(&self, protect: bool, eligible: impl Fn(u64) -> bool + Copy) -> u32 {
        // The eligibility-blind pick (runtime/tests/mutants.sh): earliest deadline of all.
        #[cfg(lagom_mutant = "pick_eligibility_blind")]
        let eligible = |_: u64| true;
        if protect
            && self.next != NIL
            && self.feat(Feature::PickBuddy)
            && eligible(self.se(self.next).vruntime)
        {
            return self.next;
        }
        let mut c = NIL;
        if self.curr != NIL {
            let cse = self.se(self.curr);
            if cse.on_rq && eligible(cse.vruntime) {
                if protect && vbefore(cse.vruntime, cse.vprot) {
                    return self.curr;
                }
                c = self.curr;
            }
        }
        match self.tree.pick(eligible) {
            Some(best) if c == NIL || !vbefore(self.se(c).deadline, best.deadline) => best.index,
            _ => c,
        }
    }

    /// `pick_next_task_fair`: charges the running entity, picks, and switches: the previous
    /// entity (if still queued) goes back into the tree and the picked one becomes current
    /// (its run time since now counts as "since picked", and its slice protection is set).
    ///
    /// A delayed winner is dequeued for good and returned as [`Pick::FinishedDelayed`];
    /// call again until the result is `Run` or `Idle`. Whatever it returns, the request for
    /// a switch ([`RunQueue::need_resched`]) is answered: it is cleared.
    pub fn pick_next(&mut self, now: u64) -> Pick<T> {
        if self.nr_queued == 0 {
            debug_assert_eq!(self.curr, NIL);
            self.need_resched = false;
            return Pick::Idle;
        }
        self.update_curr(now);
        self.need_resched = false;
        let i = self.pick_eevdf_idx(true);
        assert!(
            i != NIL,
            "lagom: pick on a non-empty runqueue found nothing"
        );
        // The tree keeps a copy of the flag, so a pick from the tree need not touch the
        // entity before it is switched in.
        let delayed = if i == self.curr {
            self.se(i).sched_delayed
        } else {
            self.tree.get(i).delayed
        };
        if delayed {
            let (se, payload) = self.finish_delayed_idx(i);
            return Pick::FinishedDelayed { se, payload };
        }
        if i != self.curr {
            self.switch_to(i, now);
        }
        self.prefetch_next_picks();
        Pick::Run(self.handle(i))
    }

    /// Hints the CPU to fetch what the next picks most likely need: the entities of the new
    /// leftmost one (the next pick) and of the one [`PREFETCH_AHEAD`] places after it, and
    /// the leaf that the leftmost leaf will soon merge with or borrow from. On a large
    /// runqueue these are cold; fetching them some picks early overlaps the misses with the
    /// work in between instead of stalling on them. The leftmost leaf lists the upcoming
    /// picks in order, so the hints cost no miss of their own.
    #[inline]
    fn prefetch_next_picks(&self) {
        if self.tree.single_leaf() {
            // Everything is in one leaf, which this pick just touched.
            return;
        }
        for k in [0, PREFETCH_AHEAD] {
            if let Some(slot) = self.slots.get(self.tree.upcoming(k) as usize) {
                crate::hint::prefetch(slot);
            }
        }
        self.tree.prefetch_left_sibling_leaf();
    }

    /// `put_prev_task` without a pick: the running entity (if still queued) goes back into
    /// the tree and nothing runs here until the next pick, which chooses among all queued
    /// entities. For a driver that switches away from a task it is about to hand to another
    /// CPU (lagom's ITMT active balance, `sched/balance.rs`). The caller charges the running
    /// entity first (`update_curr`).
    pub fn put_curr(&mut self) {
        self.put_prev();
    }

    /// The payload of the entity in the tree (the running one left out) that the pick's rule
    /// chooses now: the earliest deadline among the eligible ones, eligibility counting the
    /// running entity in the average as a pick does; `None` if the tree is empty. For hints
    /// that fetch what the next switch will touch (the driver's resume prefetch), never for a
    /// decision: the running entity, the next buddy and slice protection are left out, and
    /// what is enqueued before the next pick may change its outcome.
    #[inline]
    pub fn predicted_payload(&self) -> Option<&T> {
        let (s, w) = self.sums_with_curr();
        let v0 = self.zero_vruntime;
        let e = self.tree.pick(|v: u64| s >= vdiff(v, v0) as i128 * w)?;
        self.slots
            .get(e.index as usize)
            .and_then(|s| s.payload.as_ref())
    }

    /// Switch-out of the running entity: back into the tree if it is still queued.
    pub(super) fn put_prev(&mut self) {
        let c = self.curr;
        if c == NIL {
            return;
        }
        self.curr = NIL;
        if self.se(c).on_rq {
            self.tree_insert(c);
        }
    }

    /// [`Self::put_prev`] then [`Self::set_next`]: the running entity (if still queued) goes
    /// back into the tree and entity `i` (in the tree) comes out and runs. When `i` is the
    /// tree's only entity (a switch between the two entities of a two-entity queue) the
    /// running one takes its place in the tree in one step, with the same result.
    fn switch_to(&mut self, i: u32, now: u64) {
        let c = self.curr;
        if c != NIL && self.se(c).on_rq && self.tree.len() == 1 {
            self.curr = NIL;
            self.tree_replace_only(i, c);
            self.switch_in(i, now);
        } else {
            self.put_prev();
            self.set_next(i, now);
        }
    }

    /// Switch-in of entity `i` (in the tree): it becomes current.
    fn set_next(&mut self, i: u32, now: u64) {
        self.tree_remove(i);
        self.switch_in(i, now);
    }

    /// The rest of [`Self::set_next`], once `i` is out of the tree.
    #[inline]
    fn switch_in(&mut self, i: u32, now: u64) {
        if self.next == i {
            self.next = NIL;
        }
        // Protection: with RUN_TO_PARITY up to the deadline, but only one minimum
        // slice if someone queued has a shorter slice; without it, at most 0.7 ms.
        let s = if self.feat(Feature::RunToParity) {
            self.min_slice()
        } else {
            self.cfg.normalized_base_slice
        };
        let se = self.se_mut(i);
        se.exec_start = now;
        se.prev_sum_exec_runtime = se.sum_exec_runtime;
        let s = s.min(se.slice);
        se.vprot = se.deadline;
        if s != se.slice {
            se.vprot = vmin(
                se.vprot,
                se.vruntime.wrapping_add(calc_delta_fair(s, se.weight)),
            );
        }
        self.curr = i;
    }

    /// Clears the next buddy if it is `i`.
    pub(super) fn clear_buddies(&mut self, i: u32) {
        if self.next == i {
            self.next = NIL;
        }
    }

    /// Sets the next buddy (the `yield_to` hint): a later pick prefers it while it is
    /// eligible. Ignored for the running entity and for delayed entities.
    pub fn set_next_buddy(&mut self, h: Handle) {
        let i = self.idx(h);
        if i != self.curr && !self.se(i).sched_delayed {
            self.next = i;
        }
    }

    /// `yield_task_fair`: the running entity gives up the rest of its request. If it is
    /// eligible its vruntime jumps to its deadline and it gets a new request (so it becomes
    /// ineligible); otherwise nothing changes (no vruntime run-away). The caller then picks.
    pub fn yield_curr(&mut self, now: u64) {
        let c = self.curr;
        // The spec says "more than one runnable"; the kernel tests rq->nr_running, which
        // counts delayed entities too. We follow the kernel.
        if c == NIL || self.nr_queued <= 1 {
            return;
        }
        self.clear_buddies(c);
        self.update_curr(now);
        if self.vruntime_eligible(self.se(c).vruntime) {
            let se = self.se_mut(c);
            se.vruntime = se.deadline;
            self.update_deadline(c);
        }
    }
}
