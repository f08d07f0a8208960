//! V, the zero-lag point: the weighted sums it is kept in, the tree membership that keeps
//! them, and eligibility (the kernel's `avg_vruntime` and
//! `vruntime_eligible`).
//!
//! Invariant: S = Σ over tree entities of (vᵢ − v0)·wᵢ and W = Σ wᵢ, exactly, where v0 is the
//! zero point; V = v0 + ⌊(S + (v_curr − v0)·w_curr) / (W + w_curr)⌋, the running entity's term
//! added when V is read (if it is queued). Entities enter and leave the sums only with the
//! tree (`tree_insert`, `tree_remove`, and the one-step forms `tree_replace_only` and
//! `unsum` + `tree_rekey`), and the sums are 128-bit, so nothing rounds or overflows.
//!
//! Reading V re-bases the zero point to V (`rebase` moves v0 and S together, exactly), which
//! keeps the keys small: the division usually fits 64 bits. Afterwards S + the running term
//! lies in `[0, W)`; an operation that reads V again before anything changed finds it there
//! and returns at once, and while it is there eligibility (`S ≥ (v − v0)·W`) is `v ≤ V`
//! (`eligible_at`). Eligibility in general is tested by that product, never a division, so it
//! is exact.

use super::runqueue::{Handle, RunQueue};
use super::tree::NIL;
use super::vtime::{vadd, vbefore, vdiff};

impl<T> RunQueue<T> {
    // ----- tree membership and the weighted sums -----------------------------------

    pub(super) fn tree_insert(&mut self, i: u32) {
        let se = *self.se(i);
        self.tree
            .insert(i, se.deadline, se.vruntime, se.slice, se.sched_delayed);
        self.sum_w_vruntime += vdiff(se.vruntime, self.zero_vruntime) as i128 * se.weight as i128;
        self.sum_weight += se.weight;
    }

    /// Entity `i`'s deadline, vruntime, weight, slice and delayed flag: what its tree item
    /// and its term of the sums are made of.
    #[inline(always)]
    fn tree_keys(&self, i: u32) -> (u64, u64, u64, u64, bool) {
        let se = self.se(i);
        (
            se.deadline,
            se.vruntime,
            se.weight,
            se.slice,
            se.sched_delayed,
        )
    }

    /// [`Self::tree_remove`] of `old`, the tree's only entity, then [`Self::tree_insert`]
    /// of `i`, in one step (same sums: integer additions in any order).
    pub(super) fn tree_replace_only(&mut self, old: u32, i: u32) {
        let (vo, wo) = (self.se(old).vruntime, self.se(old).weight);
        debug_assert_eq!(
            self.tree.get(old).vruntime,
            vo,
            "vruntime changed while in the tree"
        );
        let (d, v, w, sl, dl) = self.tree_keys(i);
        self.tree.replace_only(old, i, d, v, sl, dl);
        let z = self.zero_vruntime;
        self.sum_w_vruntime += vdiff(v, z) as i128 * w as i128 - vdiff(vo, z) as i128 * wo as i128;
        self.sum_weight = self.sum_weight - wo + w;
    }

    /// Re-keys entity `i`, in the tree with the keys it had when its term left the sums
    /// ([`Self::unsum`]), to its entity's present keys, and adds its term back: what
    /// `tree_remove` before the change and `tree_insert` after it would do. The only entity
    /// of the tree is re-keyed in place.
    pub(super) fn tree_rekey(&mut self, i: u32) {
        let (d, v, w, sl, dl) = self.tree_keys(i);
        if self.tree.len() == 1 {
            self.tree.replace_only(i, i, d, v, sl, dl);
        } else {
            self.tree.remove(i);
            self.tree.insert(i, d, v, sl, dl);
        }
        self.sum_w_vruntime += vdiff(v, self.zero_vruntime) as i128 * w as i128;
        self.sum_weight += w;
    }

    /// Takes tree entity `i`'s term out of the sums (V and W), leaving its tree item for
    /// [`Self::tree_rekey`].
    pub(super) fn unsum(&mut self, i: u32) {
        let se = self.se(i);
        let (v, w) = (se.vruntime, se.weight);
        debug_assert_eq!(
            self.tree.get(i).vruntime,
            v,
            "vruntime changed while in the tree"
        );
        self.sum_w_vruntime -= vdiff(v, self.zero_vruntime) as i128 * w as i128;
        self.sum_weight -= w;
    }

    pub(super) fn tree_remove(&mut self, i: u32) {
        let se = self.se(i);
        let (v, w) = (se.vruntime, se.weight);
        debug_assert_eq!(
            self.tree.get(i).vruntime,
            v,
            "vruntime changed while in the tree"
        );
        self.tree.remove(i);
        self.sum_w_vruntime -= vdiff(v, self.zero_vruntime) as i128 * w as i128;
        self.sum_weight -= w;
    }

    // ----- virtual time ------------------------------------------------------

    /// (S, W) with the running entity folded in if it is queued.
    #[inline]
    pub(super) fn sums_with_curr(&self) -> (i128, i128) {
        let (mut s, mut w) = (self.sum_w_vruntime, self.sum_weight as i128);
        if self.curr != NIL {
            let c = self.se(self.curr);
            if c.on_rq {
                s += vdiff(c.vruntime, self.zero_vruntime) as i128 * c.weight as i128;
                w += c.weight as i128;
            }
        }
        (s, w)
    }

    /// V, the weighted mean vruntime of the queued entities (the zero-lag point), rounded
    /// toward −∞ so that an entity placed at V is eligible. Re-bases the zero point to V.
    pub fn avg_vruntime(&mut self) -> u64 {
        self.update_avg().0
    }

    /// [`Self::avg_vruntime`], also returning W, the weight it averaged over (with the
    /// running entity's if it is queued; 0 when nothing is).
    ///
    /// After it, S (with the running entity's term) lies in `[0, W)`: V is the zero point
    /// exactly. A second call with nothing changed in between finds S there and returns at
    /// once, with no division and no rebase, which is what the division would have found
    /// (a quotient of 0). So does a call when nothing is queued (W = 0, S = 0).
    #[inline]
    pub(super) fn update_avg(&mut self) -> (u64, i128) {
        let (s, w) = self.sums_with_curr();
        if w <= 0 || (0..w).contains(&s) {
            return (self.zero_vruntime, w);
        }
        let delta = if let (Ok(s64), Ok(w64)) = (i64::try_from(s), i64::try_from(w)) {
            // The common case fits 64 bits, where division is several times cheaper; and a
            // total weight that is a power of two (nice-0 entities, 2^20 each, in a queue of
            // one, two or four) divides by a shift, as exact (rounding toward −∞ both).
            if w64 & (w64 - 1) == 0 {
                s64 >> w64.trailing_zeros()
            } else {
                s64.div_euclid(w64)
            }
        } else {
            s.div_euclid(w) as i64
        };
        self.rebase(delta);
        (self.zero_vruntime, w)
    }

    /// Whether `v` is eligible given `v_avg`, the V that [`Self::update_avg`] just returned
    /// with W > 0 and nothing changed since: S then lies in `[0, W)`, so the exact test
    /// `S ≥ (v − V)·W` holds iff `v − V ≤ 0`. No multiplication, and no second look at the
    /// sums.
    #[inline]
    pub(super) fn eligible_at(v_avg: u64, v: u64) -> bool {
        !vbefore(v_avg, v)
    }

    /// Moves the zero point by `delta`, adjusting the tree sum to match.
    pub(super) fn rebase(&mut self, delta: i64) {
        self.sum_w_vruntime -= self.sum_weight as i128 * delta as i128;
        self.zero_vruntime = vadd(self.zero_vruntime, delta);
    }

    /// Whether virtual time `v` is eligible: `V ≥ v`, evaluated as `S ≥ (v − v0)·W` without
    /// division.
    #[inline]
    pub fn vruntime_eligible(&self, v: u64) -> bool {
        let (s, w) = self.sums_with_curr();
        s >= vdiff(v, self.zero_vruntime) as i128 * w
    }

    /// Whether the entity behind `h` is eligible (its lag is ≥ 0).
    pub fn entity_eligible(&self, h: Handle) -> bool {
        self.vruntime_eligible(self.se(self.idx(h)).vruntime)
    }

    /// The least real time (ns) until the entity behind `h` is eligible: 0 if it is; else
    /// how long the average vruntime takes to reach it, which it does fastest while only
    /// others run — V then advances `NICE_0_LOAD / W` virtual ns per ns, `W` the queued
    /// weight — so `(v − V) · W / NICE_0_LOAD`.
    ///
    /// ```
    /// use lagom_policy::{EnqueueFlags, EnqueueKind, Pick, RqConfig, RunQueue, SchedEntity};
    /// let mut rq = RunQueue::new(RqConfig::for_cpus(1));
    /// let a = rq.enqueue(SchedEntity::new(0), (), EnqueueKind::Wakeup, EnqueueFlags::NONE, 0);
    /// let b = rq.enqueue(SchedEntity::new(0), (), EnqueueKind::Wakeup, EnqueueFlags::NONE, 0);
    /// let Pick::Run(first) = rq.pick_next(0) else { unreachable!() };
    /// let other = if first == a { b } else { a };
    /// rq.update_curr(400_000); // `first` ran 0.4 ms: 0.2 ms ahead of V, `other` 0.2 behind
    /// assert_eq!(rq.time_to_eligible(other), 0);
    /// // V reaches `first` once `other` has run 0.4 ms (two entities of equal weight).
    /// assert_eq!(rq.time_to_eligible(first), 400_000);
    /// ```
    pub fn time_to_eligible(&self, h: Handle) -> u64 {
        let v = self.se(self.idx(h)).vruntime;
        let (s, w) = self.sums_with_curr();
        if w <= 0 || s >= vdiff(v, self.zero_vruntime) as i128 * w {
            return 0;
        }
        // (v − V)·W = (v − v0)·W − S, with V − v0 = S / W.
        let ahead_w = vdiff(v, self.zero_vruntime) as i128 * w - s;
        (ahead_w / super::NICE_0_LOAD as i128).clamp(0, u64::MAX as i128) as u64
    }
}
