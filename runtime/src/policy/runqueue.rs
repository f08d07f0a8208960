//! The per-CPU runqueue (the kernel's `cfs_rq`): entity storage and the accounting of
//! virtual time.
//!
//! Invariant: `zero_vruntime + (sum_w_vruntime + key(curr)·w(curr)) / (sum_weight + w(curr))`
//! is the weighted mean vruntime V of every queued entity, where the sums run over the tree
//! and the running entity's term is added when V is read.
//!
//! Entities that are queued (in the tree, running as `curr`, or delayed) live in a slab inside
//! the runqueue and are addressed by a copyable [`Handle`]. The tree holds every queued entity
//! except `curr`. V is kept incrementally as weighted sums of keys relative to a zero point
//! (`zero_vruntime`), in 128 bits so that nothing overflows; eligibility (`V ≥ v`) is tested
//! by a multiplication, never a division, so it is exact.

use alloc::vec::Vec;

use super::config::RqConfig;
use super::entity::SchedEntity;
use super::features::{Feature, Features};
use super::tree::{NIL, Tree};
use super::vtime::{vadd, vbefore, vdiff};
use super::weight::calc_delta_fair;

/// Addresses a queued entity of one [`RunQueue`]. Valid from `enqueue` until the entity
/// leaves that runqueue (full dequeue or finished delayed dequeue); using it afterwards
/// panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Handle {
    index: u32,
    generation: u32,
}

impl Handle {
    /// The slot index (stable while queued; reused after the entity leaves).
    pub fn index(self) -> u32 {
        self.index
    }
}

/// One slab slot. The entity is stored unconditionally (stale while the slot is free) and
/// the payload says whether the slot is occupied, so that the hot paths, which address
/// entities known to be queued, read an entity with one bounds check and no occupancy test.
pub(super) struct Slot<T> {
    pub(super) generation: u32,
    pub(super) se: SchedEntity,
    pub(super) payload: Option<T>,
}

/// The fair runqueue of one CPU. `T` is the caller's payload stored beside each entity (a
/// task pointer, a task index).
pub struct RunQueue<T> {
    pub(super) cfg: RqConfig,
    pub(super) slots: Vec<Slot<T>>,
    pub(super) free: Vec<u32>,
    pub(super) tree: Tree,
    /// The running entity (not in the tree), or NIL.
    pub(super) curr: u32,
    /// The next buddy, or NIL.
    pub(super) next: u32,
    pub(super) zero_vruntime: u64,
    /// Σ over tree entities of (v − zero_vruntime)·w.
    pub(super) sum_w_vruntime: i128,
    /// Σ over tree entities of w.
    pub(super) sum_weight: u64,
    /// Σ of the weights of all queued entities (tree, curr, delayed).
    pub(super) load_weight: u64,
    pub(super) nr_queued: usize,
    pub(super) nr_delayed: usize,
}

impl<T> RunQueue<T> {
    /// An empty runqueue. The zero point starts just below 2^64 (as in the kernel), so
    /// virtual time wraps early and wrap-safety is exercised at once.
    pub fn new(cfg: RqConfig) -> RunQueue<T> {
        RunQueue {
            cfg,
            slots: Vec::new(),
            free: Vec::new(),
            tree: Tree::new(),
            curr: NIL,
            next: NIL,
            zero_vruntime: 0u64.wrapping_sub(1 << 20),
            sum_w_vruntime: 0,
            sum_weight: 0,
            load_weight: 0,
            nr_queued: 0,
            nr_delayed: 0,
        }
    }

    /// Makes room for `additional` more queued entities, so that enqueues up to that count do
    /// not allocate.
    pub fn reserve(&mut self, additional: usize) {
        let want = (self.slots.len() - self.free.len()) + additional;
        if want > self.slots.len() {
            self.slots.reserve(want - self.slots.len());
            self.free.reserve(want);
            self.tree.reserve_capacity(want);
        }
    }

    /// The parameters.
    pub fn config(&self) -> &RqConfig {
        &self.cfg
    }

    /// Replaces the parameters (e.g. a new base slice after CPU hotplug, or new features).
    /// Queued entities pick up a new base slice at their next deadline refresh.
    pub fn set_config(&mut self, cfg: RqConfig) {
        self.cfg = cfg;
    }

    /// The feature set.
    pub fn features(&self) -> Features {
        self.cfg.features
    }

    #[inline]
    pub(super) fn feat(&self, f: Feature) -> bool {
        self.cfg.features.is_enabled(f)
    }

    /// Entities accounted here (runnable, running and delayed): the kernel's `nr_queued`.
    pub fn nr_queued(&self) -> usize {
        self.nr_queued
    }

    /// Queued entities that are not delayed: `h_nr_runnable`.
    pub fn nr_runnable(&self) -> usize {
        self.nr_queued - self.nr_delayed
    }

    /// Delayed entities (`h_nr_queued − h_nr_runnable`).
    pub fn nr_delayed(&self) -> usize {
        self.nr_delayed
    }

    /// Σ of the weights of all queued entities (`cfs_rq->load.weight`).
    pub fn load_weight(&self) -> u64 {
        self.load_weight
    }

    /// The running entity, if one is installed.
    pub fn curr(&self) -> Option<Handle> {
        (self.curr != NIL).then(|| self.handle(self.curr))
    }

    /// The next buddy, if set.
    pub fn next_buddy(&self) -> Option<Handle> {
        (self.next != NIL).then(|| self.handle(self.next))
    }

    /// The entity behind `h`.
    pub fn entity(&self, h: Handle) -> &SchedEntity {
        self.se(self.idx(h))
    }

    /// The payload behind `h`.
    pub fn payload(&self, h: Handle) -> &T {
        match &self.slots[self.idx(h) as usize].payload {
            Some(p) => p,
            None => unreachable!("idx checked the slot is occupied"),
        }
    }

    /// The payload behind `h`, mutably.
    pub fn payload_mut(&mut self, h: Handle) -> &mut T {
        let i = self.idx(h);
        match &mut self.slots[i as usize].payload {
            Some(p) => p,
            None => unreachable!("idx checked the slot is occupied"),
        }
    }

    /// Every queued entity (tree, running and delayed), in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (Handle, &SchedEntity, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            s.payload.as_ref().map(|p| {
                let h = Handle {
                    index: i as u32,
                    generation: s.generation,
                };
                (h, &s.se, p)
            })
        })
    }

    // ----- slab ------------------------------------------------------------------------

    #[inline]
    pub(super) fn idx(&self, h: Handle) -> u32 {
        match self.slots.get(h.index as usize) {
            Some(s) if s.generation == h.generation && s.payload.is_some() => h.index,
            _ => panic!("lagom: stale or foreign runqueue handle {h:?}"),
        }
    }

    #[inline]
    pub(super) fn handle(&self, i: u32) -> Handle {
        Handle {
            index: i,
            generation: self.slots[i as usize].generation,
        }
    }

    /// The entity in slot `i`, which must be occupied (an index the runqueue holds: the
    /// tree's, `curr`, `next`, or one `idx` checked).
    #[inline]
    pub(super) fn se(&self, i: u32) -> &SchedEntity {
        debug_assert!(
            self.slots[i as usize].payload.is_some(),
            "slot {i} is empty"
        );
        &self.slots[i as usize].se
    }

    /// [`Self::se`], mutably.
    #[inline]
    pub(super) fn se_mut(&mut self, i: u32) -> &mut SchedEntity {
        debug_assert!(
            self.slots[i as usize].payload.is_some(),
            "slot {i} is empty"
        );
        &mut self.slots[i as usize].se
    }

    pub(super) fn alloc(&mut self, se: SchedEntity, payload: T) -> u32 {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    se,
                    payload: None,
                });
                self.tree.reserve_index(self.slots.len());
                (self.slots.len() - 1) as u32
            }
        };
        let s = &mut self.slots[i as usize];
        (s.se, s.payload) = (se, Some(payload));
        i
    }

    #[inline]
    pub(super) fn release(&mut self, i: u32) -> (SchedEntity, T) {
        let s = &mut self.slots[i as usize];
        s.generation = s.generation.wrapping_add(1);
        let p = s.payload.take().expect("released slot is occupied");
        let se = s.se;
        self.free.push(i);
        (se, p)
    }

    // ----- tree membership and the weighted sums (§2.3) -----------------------------------

    pub(super) fn tree_insert(&mut self, i: u32) {
        let se = *self.se(i);
        self.tree
            .insert(i, se.deadline, se.vruntime, se.slice, se.sched_delayed);
        self.sum_w_vruntime += vdiff(se.vruntime, self.zero_vruntime) as i128 * se.weight as i128;
        self.sum_weight += se.weight;
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
        let se = self.se(i);
        let (d, v, w, sl, dl) = (
            se.deadline,
            se.vruntime,
            se.weight,
            se.slice,
            se.sched_delayed,
        );
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
        let se = self.se(i);
        let (d, v, w, sl, dl) = (
            se.deadline,
            se.vruntime,
            se.weight,
            se.slice,
            se.sched_delayed,
        );
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

    // ----- virtual time (§2.2–§2.5) ------------------------------------------------------

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
            // The common case fits 64 bits, where division is several times cheaper.
            s64.div_euclid(w64)
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

    /// Smallest slice among queued entities (`cfs_rq_min_slice`), `u64::MAX` if none.
    pub(super) fn min_slice(&self) -> u64 {
        let mut s = self.tree.min_slice();
        if self.curr != NIL && self.se(self.curr).on_rq {
            s = s.min(self.se(self.curr).slice);
        }
        s
    }

    /// Largest slice among queued entities (`cfs_rq_max_slice`), 0 if none.
    pub(super) fn max_slice(&self) -> u64 {
        let mut s = self.tree.max_slice();
        if self.curr != NIL && self.se(self.curr).on_rq {
            s = s.max(self.se(self.curr).slice);
        }
        s
    }

    // ----- the running entity (§2.7, §3.6) ------------------------------------------------

    /// Charges the running entity for the time since its last accounting point
    /// (`update_curr`). Returns whether it should be switched out (need-resched): it used up
    /// its request, or ran past its protected slice, while others are queued.
    #[inline]
    pub fn update_curr(&mut self, now: u64) -> bool {
        // Most calls find nothing to charge (the driver and the operation it calls both
        // account at the same `now`): that check inlines, the charge does not.
        let c = self.curr;
        if c == NIL {
            return false;
        }
        let delta = vdiff(now, self.se(c).exec_start);
        if delta <= 0 {
            return false;
        }
        self.charge_curr(c, delta as u64, now)
    }

    /// The charge of [`Self::update_curr`]: `delta > 0` ns since the last accounting point.
    #[inline(never)]
    fn charge_curr(&mut self, c: u32, delta: u64, now: u64) -> bool {
        let se = self.se_mut(c);
        se.exec_start = now;
        se.sum_exec_runtime += delta;
        se.vruntime = se.vruntime.wrapping_add(calc_delta_fair(delta, se.weight));
        let resched = self.update_deadline(c);
        if self.nr_queued == 1 {
            return false;
        }
        let se = self.se(c);
        if resched || !vbefore(se.vruntime, se.vprot) {
            if self.next == c {
                self.next = NIL;
            }
            return true;
        }
        false
    }

    /// Issues a new request once the running entity's vruntime reached its deadline
    /// (`update_deadline`); returns whether it did.
    #[inline]
    pub(super) fn update_deadline(&mut self, i: u32) -> bool {
        debug_assert_eq!(
            i, self.curr,
            "only the running entity's deadline is refreshed"
        );
        let se = self.se(i);
        if vbefore(se.vruntime, se.deadline) {
            return false;
        }
        self.new_request(i);
        true
    }

    /// The refresh of [`Self::update_deadline`], once per request: kept out of line so that
    /// the check inlines into every `update_curr`.
    #[inline(never)]
    fn new_request(&mut self, i: u32) {
        let base = self.cfg.base_slice;
        let se = self.se_mut(i);
        if !se.custom_slice {
            se.slice = base;
        }
        se.deadline = se
            .vruntime
            .wrapping_add(calc_delta_fair(se.slice, se.weight));
        self.avg_vruntime();
    }
}
