//! Placement and lag: joining a runqueue (`enqueue`, `place_entity`), saving lag on the way
//! out (`update_entity_lag`), and changing weight or slice in place.
//!
//! Invariant: an entity leaves with its lag saved (clamped to about one request plus a tick)
//! and re-joins with that same lag, so sleeping neither earns nor forgives service.
//!
//! Joining with lag `vl` moves V by `−w·vl/(W + w)`, so `place_entity` inflates the saved lag
//! by `(W + w)/W` first; right after placement the entity's lag is exactly the saved one.

use super::entity::SchedEntity;
use super::features::Feature;
use super::runqueue::{Handle, RunQueue};
use super::tree::NIL;
use super::vtime::{vadd, vdiff};
use super::wake_flags::WakeFlags;
use super::weight::{calc_delta_fair, scale_signed};

/// Why an entity is enqueued (the kernel's ENQUEUE_* flags that change placement).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnqueueKind {
    /// A task that slept wakes up.
    Wakeup,
    /// A brand-new task (ENQUEUE_INITIAL): with PLACE_DEADLINE_INITIAL it starts with half a
    /// request.
    Initial,
    /// The second half of a non-sleep dequeue (migration, save/restore): with
    /// PLACE_REL_DEADLINE the deadline saved relative to vruntime is restored.
    Restore,
}

/// The kernel's `ENQUEUE_*` flags that do not change how an entity is placed
/// ([`EnqueueKind`] says that): so far whether it arrives by migration.
///
/// ```
/// use lagom_policy::{EnqueueFlags, WakeFlags};
/// assert_eq!(EnqueueFlags::of_wake(WakeFlags::TTWU | WakeFlags::MIGRATED), EnqueueFlags::MIGRATED);
/// assert_eq!(EnqueueFlags::of_wake(WakeFlags::TTWU), EnqueueFlags::NONE);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EnqueueFlags {
    /// The entity comes from another CPU (`ENQUEUE_MIGRATED`): a wakeup that chose another
    /// CPU than the task's last, a balance move, an active balance. Its `exec_start` is
    /// cleared, so that it is not cache hot where it arrives (`task_hot`).
    pub migrated: bool,
}

impl EnqueueFlags {
    /// No flag.
    pub const NONE: EnqueueFlags = EnqueueFlags { migrated: false };
    /// `ENQUEUE_MIGRATED`.
    pub const MIGRATED: EnqueueFlags = EnqueueFlags { migrated: true };

    /// The enqueue flags of an activation with flags `wf` (`ttwu_do_activate`:
    /// `WF_MIGRATED` becomes `ENQUEUE_MIGRATED`).
    pub const fn of_wake(wf: WakeFlags) -> EnqueueFlags {
        EnqueueFlags {
            migrated: wf.contains(WakeFlags::MIGRATED),
        }
    }
}

impl<T> RunQueue<T> {
    /// Enqueues `se` (which must not be queued anywhere) with its payload: charges the running
    /// entity, places `se` by its saved lag and inserts it. Returns its handle. With
    /// `flags.migrated` its `exec_start` is cleared (`enqueue_entity` with
    /// `ENQUEUE_MIGRATED`): a task that comes from another CPU is not cache hot here until it
    /// runs.
    ///
    /// An entity that was delayed when it was dequeued for migration stays delayed here.
    pub fn enqueue(
        &mut self,
        se: SchedEntity,
        payload: T,
        kind: EnqueueKind,
        flags: EnqueueFlags,
        now: u64,
    ) -> Handle {
        debug_assert!(!se.on_rq, "entity is already queued");
        self.update_curr(now);
        let mut se = se;
        self.place_entity(&mut se, kind == EnqueueKind::Initial);
        if flags.migrated {
            se.exec_start = 0;
        }
        se.on_rq = true;
        let delayed = se.sched_delayed;
        let w = se.weight;
        let i = self.alloc(se, payload);
        self.tree_insert(i);
        self.load_weight += w;
        self.nr_queued += 1;
        if delayed {
            self.nr_delayed += 1;
        }
        self.handle(i)
    }

    /// `place_entity`: sets vruntime from V and the saved lag, and the deadline. `se` is not
    /// accounted in the runqueue while this runs.
    pub(super) fn place_entity(&mut self, se: &mut SchedEntity, initial: bool) {
        let p = self.placement(Placing::of(se), initial);
        p.apply(se);
    }

    /// The computation of [`Self::place_entity`], from the fields it reads to the fields it
    /// writes, so that an entity in its slot is placed without copying it out and back.
    /// Inlined into its two callers (enqueue, and the requeue of a woken delayed entity),
    /// where the fields stay in registers.
    #[inline(always)]
    fn placement(&mut self, se: Placing, initial: bool) -> Placed {
        let (v_avg, w_all) = self.update_avg();
        let slice = if se.custom_slice {
            se.slice
        } else {
            self.cfg.base_slice
        };
        let mut vslice = calc_delta_fair(slice, se.weight);
        let mut lag: i64 = 0;
        let mut rebase = false;
        if self.feat(Feature::PlaceLag) && self.nr_queued > 0 && se.vlag != 0 {
            let w_all = w_all.max(1);
            let w = se.weight as i128;
            lag = inflate_lag(se.vlag, w_all, w);
            rebase = w > w_all;
        }
        let vruntime = vadd(v_avg, -lag);
        if rebase {
            // A heavy entity: move the zero point next to it so later key·w products stay
            // small (the kernel does this to avoid 64-bit overflow; here it keeps the sums
            // small and mirrors the kernel's rounding).
            self.rebase(-lag);
        }
        if se.rel_deadline && self.feat(Feature::PlaceRelDeadline) {
            return Placed {
                slice,
                vruntime,
                deadline: se.deadline.wrapping_add(vruntime),
            };
        }
        if initial && self.feat(Feature::PlaceDeadlineInitial) {
            vslice /= 2;
        }
        Placed {
            slice,
            vruntime,
            deadline: vruntime.wrapping_add(vslice),
        }
    }

    /// The lag clamp: `calc_delta_fair(max_slice + tick)` for this entity.
    pub(super) fn lag_limit(&self, weight: u64) -> i64 {
        calc_delta_fair(self.max_slice() + self.cfg.tick, weight).min(i64::MAX as u64) as i64
    }

    /// `update_entity_lag`: saves `vlag = clamp(V − v)` for entity `i`, which is still
    /// accounted. A delayed entity keeps at least the lag it was delayed with and, with
    /// DELAY_ZERO, at most zero. Returns whether the saved lag differs from `V − v`.
    pub(super) fn update_entity_lag(&mut self, i: u32) -> bool {
        let v_avg = self.avg_vruntime();
        self.update_entity_lag_at(i, v_avg)
    }

    /// [`Self::update_entity_lag`] with V already computed (nothing changed since).
    #[inline]
    pub(super) fn update_entity_lag_at(&mut self, i: u32, v_avg: u64) -> bool {
        let limit = self.lag_limit(self.se(i).weight);
        let delay_zero = self.feat(Feature::DelayZero);
        let se = self.se_mut(i);
        let raw = vdiff(v_avg, se.vruntime);
        let mut vl = raw.clamp(-limit, limit);
        if se.sched_delayed {
            // The missing lag floor (runtime/tests/mutants.sh) drops this line.
            #[cfg(not(lagom_mutant = "delayed_no_lag_floor"))]
            {
                vl = vl.max(se.vlag);
            }
            if delay_zero {
                vl = vl.min(0);
            }
        }
        se.vlag = vl;
        vl != raw
    }

    /// Takes queued entity `i` out of the accounting (tree or curr term, load, count) without
    /// releasing its slot, so that it can be placed again.
    pub(super) fn detach(&mut self, i: u32) {
        if i == self.curr {
            self.se_mut(i).on_rq = false;
        } else {
            self.tree_remove(i);
        }
        self.load_weight -= self.se(i).weight;
        self.nr_queued -= 1;
    }

    /// Undoes [`Self::detach`].
    pub(super) fn attach(&mut self, i: u32) {
        if i == self.curr {
            self.se_mut(i).on_rq = true;
        } else {
            self.tree_insert(i);
        }
        self.load_weight += self.se(i).weight;
        self.nr_queued += 1;
    }

    /// Places queued entity `i` afresh by its saved lag, with a new request: it leaves the
    /// accounting (V, load, count), is placed as any joining entity, and rejoins. Placement
    /// reads only the sums, so a tree entity's item stays where it is until its new keys are
    /// known and then moves in one step (in place when it is the tree's only entity).
    pub(super) fn place_again(&mut self, i: u32) {
        let in_tree = i != self.curr;
        if in_tree {
            self.unsum(i);
        } else {
            self.se_mut(i).on_rq = false;
        }
        let w = self.se(i).weight;
        self.load_weight -= w;
        self.nr_queued -= 1;
        let p = self.placement(Placing::of(self.se(i)), false);
        p.apply(self.se_mut(i));
        if in_tree {
            self.tree_rekey(i);
        } else {
            self.se_mut(i).on_rq = true;
        }
        self.load_weight += w;
        self.nr_queued += 1;
    }

    /// Changes the weight (nice level) of a queued or running entity, keeping its real lag
    /// and its relative deadline; V does not move (up to rounding, unless the lag
    /// clamp bites). The protected point (`vprot`, RUN_TO_PARITY) is left as it is, unscaled,
    /// as the kernel's `reweight_entity` leaves it: the kernel changes a queued task's nice
    /// level by a save-dequeue, the rescale, and a restore-enqueue, none of which touches
    /// `vprot`.
    pub fn reweight(&mut self, h: Handle, weight: u64, now: u64) {
        let i = self.idx(h);
        let weight = weight.max(1);
        self.update_curr(now);
        let v_avg = self.avg_vruntime();
        let limit = self.lag_limit(self.se(i).weight);
        let se = *self.se(i);
        let vlag = vdiff(v_avg, se.vruntime).clamp(-limit, limit);
        let rel_deadline = vdiff(se.deadline, v_avg);
        self.detach(i);
        let (old, new) = (se.weight, weight);
        let se = self.se_mut(i);
        se.vlag = scale_signed(vlag, old, new);
        se.weight = new;
        se.vruntime = vadd(v_avg, -se.vlag);
        se.deadline = vadd(v_avg, scale_signed(rel_deadline, old, new));
        self.attach(i);
    }

    /// Sets (`Some`) or resets (`None`) the custom slice of a queued or running entity
    /// (clamped into 0.1 … 100 ms). Vruntime and deadline stay as they are (the kernel's
    /// save/restore around `sched_setattr` gives the same result up to rounding); the new
    /// slice takes effect at the entity's next request.
    pub fn set_slice(&mut self, h: Handle, slice: Option<u64>, now: u64) {
        let i = self.idx(h);
        self.update_curr(now);
        let in_tree = i != self.curr;
        if in_tree {
            self.tree_remove(i);
        }
        let base = self.cfg.base_slice;
        let se = self.se_mut(i);
        se.set_custom_slice(slice);
        if slice.is_none() {
            se.slice = base;
        }
        if in_tree {
            self.tree_insert(i);
        }
        debug_assert!(self.curr != NIL || in_tree);
    }
}

/// What placement reads of an entity.
#[derive(Clone, Copy)]
struct Placing {
    custom_slice: bool,
    slice: u64,
    weight: u64,
    vlag: i64,
    rel_deadline: bool,
    deadline: u64,
}

impl Placing {
    #[inline]
    fn of(se: &SchedEntity) -> Placing {
        Placing {
            custom_slice: se.custom_slice,
            slice: se.slice,
            weight: se.weight,
            vlag: se.vlag,
            rel_deadline: se.rel_deadline,
            deadline: se.deadline,
        }
    }
}

/// What placement writes: the slice (the base slice unless custom), vruntime and the
/// absolute deadline (a relative deadline is made absolute or dropped).
#[derive(Clone, Copy)]
struct Placed {
    slice: u64,
    vruntime: u64,
    deadline: u64,
}

impl Placed {
    #[inline]
    fn apply(self, se: &mut SchedEntity) {
        se.slice = self.slice;
        se.vruntime = self.vruntime;
        se.deadline = self.deadline;
        se.rel_deadline = false;
    }
}

/// `vlag·(W + w)/W` (truncated toward zero), clamped to ±2^62: the lag to place with so that
/// the lag right after joining is `vlag` (see the module doc). In 64 bits when the product
/// fits (a division there is several times cheaper than in 128), else in 128; truncating
/// division gives the same quotient in both.
#[inline]
fn inflate_lag(vlag: i64, w_all: i128, w: i128) -> i64 {
    let l = match (i64::try_from(w_all + w), i64::try_from(w_all)) {
        (Ok(sum), Ok(div)) => match vlag.checked_mul(sum) {
            Some(p) => (p / div) as i128,
            None => vlag as i128 * (w_all + w) / w_all,
        },
        _ => vlag as i128 * (w_all + w) / w_all,
    };
    l.clamp(i64::MIN as i128 / 2, i64::MAX as i128 / 2) as i64
}

#[cfg(test)]
mod tests {
    use super::inflate_lag;

    /// The 64-bit path gives the 128-bit quotient (truncated toward zero, then clamped), on
    /// both sides of the overflow bound and at the extremes (weights below 2^62: a queue's
    /// total weight is a `u64`).
    #[test]
    fn inflate_lag_matches_128_bit_arithmetic() {
        let mut s = 0x1319_8a2e_0370_7344_u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let lags = [
            0,
            1,
            -1,
            -7,
            i64::MIN,
            i64::MAX,
            i64::MIN / 2 - 1,
            i64::MAX / 2 + 1,
        ];
        for k in 0..200_000 {
            let vlag = if k < 64 {
                lags[k % 8]
            } else {
                next() as i64 >> (next() % 64)
            };
            let w_all = (next() >> (2 + next() % 62)).max(1) as i128;
            let w = (next() >> (2 + next() % 62)).max(1) as i128;
            let (w_all, w) = if k < 64 {
                (
                    [1, 2, 1 << 20, 1 << 61, (1 << 62) - 1, 3, 1 << 40, 5][k / 8],
                    w,
                )
            } else {
                (w_all, w)
            };
            let want = (vlag as i128 * (w_all + w) / w_all)
                .clamp(i64::MIN as i128 / 2, i64::MAX as i128 / 2) as i64;
            assert_eq!(
                inflate_lag(vlag, w_all, w),
                want,
                "inflate_lag({vlag}, {w_all}, {w})"
            );
        }
    }
}
