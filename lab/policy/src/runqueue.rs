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
//! by a multiplication, never a division, so it is exact (`avg_vruntime.rs` keeps the sums).
//!
//! A slot stores its entity unconditionally and its payload as the occupancy: the hot paths
//! address entities by indices the runqueue itself holds (the tree's, `curr`, `next`), which
//! are occupied by construction, so reading an entity is one bounds-checked load; handles
//! from outside are checked (generation and occupancy) once, by `idx`.

use alloc::vec::Vec;

use super::config::RqConfig;
use super::entity::SchedEntity;
use super::features::{Feature, Features};
use super::tree::{NIL, Tree};
use super::vtime::{vbefore, vdiff};
use super::weight::{calc_delta_fair, calc_delta_fair_narrow};

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
    /// The running entity should be switched out at the next scheduling point (the kernel's
    /// `TIF_NEED_RESCHED` of this CPU's current task, as far as this runqueue sets it).
    pub(super) need_resched: bool,
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
            need_resched: false,
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

    /// Whether the running entity should be switched out at the next scheduling point (the
    /// kernel's `TIF_NEED_RESCHED`). Set by every charge of the running entity that asks for a
    /// switch — `update_curr` inside `enqueue`, `dequeue`, `requeue_delayed`, `wakeup_preempt`,
    /// `yield_curr`, `reweight`, `set_slice`, `task_tick`, as the kernel's `update_curr` calls
    /// `resched_curr_lazy` itself —, by a wakeup preemption, and by
    /// [`set_need_resched`](Self::set_need_resched); cleared by [`pick_next`](Self::pick_next)
    /// and [`clear_need_resched`](Self::clear_need_resched). A driver reads it after each
    /// operation under its runqueue lock and tells the running task (the threaded runtime's
    /// `Worker::publish`), so that no charge's request for a switch is lost.
    ///
    /// ```
    /// use lagom_policy::{EnqueueFlags, EnqueueKind, Pick, RqConfig, RunQueue, SchedEntity};
    /// let mut rq = RunQueue::new(RqConfig::for_cpus(1));
    /// rq.enqueue(SchedEntity::new(0), 'a', EnqueueKind::Wakeup, EnqueueFlags::NONE, 0);
    /// rq.enqueue(SchedEntity::new(0), 'b', EnqueueKind::Wakeup, EnqueueFlags::NONE, 0);
    /// let _ = rq.pick_next(0);
    /// // A wakeup 10 ms later charges the running entity past its request.
    /// rq.enqueue(SchedEntity::new(0), 'c', EnqueueKind::Wakeup, EnqueueFlags::NONE, 10_000_000);
    /// assert!(rq.need_resched());
    /// let _ = rq.pick_next(10_000_000);
    /// assert!(!rq.need_resched());
    /// ```
    pub fn need_resched(&self) -> bool {
        self.need_resched
    }

    /// Asks for a switch at the next scheduling point (a driver's remote request, e.g. an
    /// active balance that wants the running task to leave its CPU: `resched_curr`).
    pub fn set_need_resched(&mut self) {
        self.need_resched = true;
    }

    /// Forgets a request for a switch (a driver that switches away without picking here).
    pub fn clear_need_resched(&mut self) {
        self.need_resched = false;
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

    /// The payload behind `h` if `h` is a live handle of this runqueue (its entity still
    /// queued here), `None` if it is stale (the entity left, its slot maybe reused).
    pub fn try_payload(&self, h: Handle) -> Option<&T> {
        match self.slots.get(h.index as usize) {
            Some(s) if s.generation == h.generation => s.payload.as_ref(),
            _ => None,
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

    /// [`iter`](Self::iter) from slab slot `start` on, wrapping round to the slots before it
    /// (a balancer that examines only a few entities per pass, as the kernel's `detach_tasks`
    /// examines at most `sysctl_sched_nr_migrate`, resumes after the last one it looked at,
    /// so that a run of entities it cannot move does not hide the others for good).
    pub fn iter_from(&self, start: usize) -> impl Iterator<Item = (Handle, &SchedEntity, &T)> {
        let n = self.slots.len();
        let start = if n == 0 { 0 } else { start % n };
        (start..n).chain(0..start).filter_map(move |i| {
            let s = &self.slots[i];
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

    // ----- slices ----------------------------------------------------------------------

    /// Smallest slice among queued entities, the running one included (`cfs_rq_min_slice`),
    /// `u64::MAX` if none: what the kernel gives a group entity as its slice, and what a
    /// worker thread tells the kernel as its own (the runtime's host hints).
    pub fn min_slice(&self) -> u64 {
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

    // ----- the running entity ------------------------------------------------

    /// Charges the running entity for the time since its last accounting point
    /// (`update_curr`). Returns whether this charge asks for a switch: it used up its
    /// request, or ran past its protected slice, while others are queued; the request is
    /// also kept in [`need_resched`](Self::need_resched) until the next pick.
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

    /// Leaves `ns` of the time since the running entity's last accounting point out of its
    /// charge, as the kernel's `rq_clock_task` leaves out the time its CPU spent elsewhere
    /// (interrupts, a hypervisor's steal): the driver measured its thread off the CPU for
    /// `ns` (a host stall) and calls this before [`Self::update_curr`] at `now`. The
    /// accounting point moves forward by `ns`, never past `now`; returns how much it moved.
    /// Nothing to do without a running entity.
    ///
    /// ```
    /// use lagom_policy::{EnqueueFlags, EnqueueKind, Pick, RqConfig, RunQueue, SchedEntity};
    /// let mut rq = RunQueue::new(RqConfig::for_cpus(1));
    /// let a = rq.enqueue(SchedEntity::new(0), (), EnqueueKind::Wakeup, EnqueueFlags::NONE, 0);
    /// assert!(matches!(rq.pick_next(0), Pick::Run(h) if h == a));
    /// // 3 ms pass, 2 ms of them with the worker's thread off its CPU.
    /// assert_eq!(rq.exclude_from_curr(2_000_000, 3_000_000), 2_000_000);
    /// rq.update_curr(3_000_000);
    /// assert_eq!(rq.entity(a).sum_exec_runtime, 1_000_000);
    /// // Never past now: the time already charged stays charged.
    /// assert_eq!(rq.exclude_from_curr(5_000_000, 4_000_000), 1_000_000);
    /// ```
    pub fn exclude_from_curr(&mut self, ns: u64, now: u64) -> u64 {
        let c = self.curr;
        if c == NIL || ns == 0 {
            return 0;
        }
        let se = self.se_mut(c);
        let room = now.saturating_sub(se.exec_start);
        let moved = ns.min(room);
        se.exec_start += moved;
        moved
    }

    /// The charge of [`Self::update_curr`]: `delta > 0` ns since the last accounting point.
    ///
    /// The usual charge makes no call at all, so that it saves no registers: the refresh of
    /// the request (once per request) is a tail call, and so is a charge that needs 128-bit
    /// arithmetic (a weighted delta of hours).
    #[inline(never)]
    fn charge_curr(&mut self, c: u32, delta: u64, now: u64) -> bool {
        // The weight-blind charge (runtime/tests/mutants.sh): every entity charged as nice 0.
        #[cfg(lagom_mutant = "charge_weight_blind")]
        return self.charge_by(c, delta, delta, now);
        let se = self.se(c);
        match calc_delta_fair_narrow(delta, se.weight) {
            Some(dv) => self.charge_by(c, delta, dv, now),
            None => self.charge_curr_wide(c, delta, now),
        }
    }

    /// [`Self::charge_curr`] when the virtual delta needs 128-bit arithmetic.
    #[cold]
    #[inline(never)]
    fn charge_curr_wide(&mut self, c: u32, delta: u64, now: u64) -> bool {
        let dv = calc_delta_fair(delta, self.se(c).weight);
        self.charge_by(c, delta, dv, now)
    }

    /// Charges the running entity `delta` ns, `dv` virtual ns, and decides need-resched.
    #[inline(always)]
    fn charge_by(&mut self, c: u32, delta: u64, dv: u64, now: u64) -> bool {
        let se = self.se_mut(c);
        se.exec_start = now;
        se.sum_exec_runtime += delta;
        let v = se.vruntime.wrapping_add(dv);
        se.vruntime = v;
        let (deadline, vprot) = (se.deadline, se.vprot);
        if !vbefore(v, deadline) {
            return self.charge_new_request(c);
        }
        // Still within its request: switch out only past its protected slice.
        if self.nr_queued == 1 || vbefore(v, vprot) {
            return false;
        }
        if self.next == c {
            self.next = NIL;
        }
        self.need_resched = true;
        true
    }

    /// The end of [`Self::charge_curr`] when the running entity used up its request: a new
    /// request (which moves neither its vruntime nor its protection), and a switch-out if
    /// others are queued.
    #[inline(never)]
    fn charge_new_request(&mut self, c: u32) -> bool {
        self.new_request(c);
        if self.nr_queued == 1 {
            return false;
        }
        if self.next == c {
            self.next = NIL;
        }
        self.need_resched = true;
        true
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
