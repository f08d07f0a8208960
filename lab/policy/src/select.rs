//! `select_task_rq`: where a waking task should run, decided over a read-only view of the
//! workers' state (the simple rule of this stage; a topology-aware search replaces its body
//! later, behind the same signature).
//!
//! The rule: the task's previous CPU if it is allowed and idle (cache-warm and free); else the
//! waker's CPU if it is allowed (the wakee probably shares data with the waker); else the
//! allowed CPU with the fewest runnable entities (ties: the lowest index). CPUs are worker
//! indices here, not OS CPU numbers.

/// What `select_task_rq` knows about one CPU (a snapshot; it may be stale by the time the
/// choice is acted on, which only costs balance, never correctness).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuView {
    /// The CPU runs nothing and has nothing queued.
    pub idle: bool,
    /// Runnable entities queued there (the running one included).
    pub nr_running: usize,
}

impl CpuView {
    /// What selection reads of a CPU with `nr_running` runnable entities and a wakelist
    /// that is (`pending`) or is not empty, as both drivers publish it: idle only when
    /// nothing is runnable and nothing waits on the wakelist (the kernel's `idle_cpu` also
    /// checks `ttwu_pending`), and a non-empty wakelist counts as one more runnable entity,
    /// so that a burst of spawns does not pile onto a CPU that has not drained yet.
    ///
    /// ```
    /// use lagom_policy::CpuView;
    /// assert_eq!(CpuView::of(0, false), CpuView { idle: true, nr_running: 0 });
    /// assert_eq!(CpuView::of(0, true), CpuView { idle: false, nr_running: 1 });
    /// assert_eq!(CpuView::of(2, false), CpuView { idle: false, nr_running: 2 });
    /// ```
    pub fn of(nr_running: usize, pending: bool) -> CpuView {
        CpuView {
            idle: nr_running == 0 && !pending,
            nr_running: nr_running + usize::from(pending),
        }
    }
}

/// Chooses the CPU (an index below `n`) for a waking task that last ran on `prev`, woken
/// from `waker` (`None`: from outside the runtime). `view(i)` describes CPU `i`;
/// `allowed(i)` says whether the task may run there; at least one CPU must be allowed. A
/// task that must resume where it last ran (lagom's migration contract) is passed an
/// affinity of one, `prev`, and is placed there.
///
/// ```
/// use lagom_policy::{CpuView, select_task_rq};
/// let busy = CpuView { idle: false, nr_running: 3 };
/// let idle = CpuView { idle: true, nr_running: 0 };
/// let light = CpuView { idle: false, nr_running: 1 };
/// let cpus = [busy, idle, busy, light];
/// let view = |i: usize| cpus[i];
/// // The previous CPU wins when it is idle.
/// assert_eq!(select_task_rq(4, view, 1, Some(0), |_| true), 1);
/// // Else the waker's CPU.
/// assert_eq!(select_task_rq(4, view, 2, Some(0), |_| true), 0);
/// // Else the least loaded allowed CPU.
/// assert_eq!(select_task_rq(4, view, 0, Some(0), |i| i != 0 && i != 1), 3);
/// // From outside the runtime, a busy previous CPU loses to the least loaded one.
/// assert_eq!(select_task_rq(4, view, 2, None, |_| true), 1);
/// ```
#[track_caller]
pub fn select_task_rq(
    n: usize,
    view: impl Fn(usize) -> CpuView,
    prev: usize,
    waker: Option<usize>,
    allowed: impl Fn(usize) -> bool,
) -> usize {
    if prev < n && allowed(prev) && view(prev).idle {
        return prev;
    }
    if let Some(w) = waker.filter(|&w| w < n && allowed(w)) {
        return w;
    }
    (0..n)
        .filter(|&i| allowed(i))
        .min_by_key(|&i| (view(i).nr_running, i != prev))
        .expect("select_task_rq: the task is allowed on no CPU")
}

// ---------------------------------------------------------------------------------------
// The fair class's selection over the topology.
// ---------------------------------------------------------------------------------------

use super::cpumap::CpuMap;
use super::features::{Feature, Features};
use super::wake_flags::WakeFlags;

/// How [`select_task_rq_fair`] chose its CPU (one counter each in the runtime's stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The waker's CPU, chosen by `wake_affine` (and kept by `select_idle_sibling`).
    Affine,
    /// An idle CPU of the target's LLC other than the target and the previous CPU: the
    /// recently used CPU or one found by the scan (`select_idle_sibling`).
    IdleSibling,
    /// The task's previous CPU.
    Prev,
    /// A new task's CPU, found by the idlest-group descent (`sched_balance_find_dst_cpu`).
    ForkIdlest,
}

/// What a wakeup or spawn tells [`select_task_rq_fair`] beyond the CPUs' state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeCtx {
    /// The CPU the task last ran on (a new task: its parent's CPU, or any for a spawn from
    /// outside the runtime).
    pub prev: usize,
    /// The waker's CPU; `None` for a wakeup from outside the runtime (a plain thread).
    pub waker: Option<usize>,
    /// The task's `recent_used_cpu` (the previous CPU of its previous wakeup), if any.
    pub recent: Option<usize>,
    /// `WF_SYNC`, `WF_FORK` (others are ignored).
    pub flags: WakeFlags,
}

/// The kernel's `imbalance_pct` of an LLC (MC) domain, which `wake_affine_weight` halves
/// as its bias towards the previous CPU.
const WAKE_AFFINE_IMBALANCE_PCT: u64 = 117;

/// `select_task_rq_fair`: the CPU (an index of `map`) for a task woken (or, with
/// `WF_FORK`, spawned) as `ctx` says, over the CPUs' state `view` and the task's affinity
/// `allowed` (at least one CPU must be allowed; a task that may not move is passed an
/// affinity of one CPU). The result is always allowed.
///
/// * **Fork** (`WF_FORK`): `sched_balance_find_dst_cpu` — from the top level down, the
///   idlest group of the domain (most idle allowed CPUs, then fewest runnable entities per
///   CPU; the parent's own group unless another is strictly idler), then its idlest CPU. A
///   spawn from a task that runs is thus placed on an idle CPU when there is one.
/// * **Wakeup**: when the waker runs on an allowed CPU other than `prev`, `wake_affine`
///   chooses between the two (`wake_affine_idle`, then `wake_affine_weight` on runnable
///   counts, with `WF_SYNC` discounting the waker); then `select_idle_sibling` looks for an
///   idle CPU in the chosen target's LLC: the target, the previous CPU if it shares the LLC,
///   the recently used CPU, an idle core (with SMT), an idle CPU — the last scan bounded by
///   `SIS_UTIL` to a number of CPUs that shrinks as the LLC fills ([`sis_util_scan`]).
///
/// As in mainline, priorities play no part; `WAKE_PREFER_RANK` (lagom's, off by default)
/// makes the higher-ranked of equally good idle CPUs win: of an idle target and an idle
/// previous CPU in one LLC, and among the idle CPUs the scan finds within its bound.
pub fn select_task_rq_fair(
    map: &CpuMap,
    view: impl Fn(usize) -> CpuView,
    allowed: impl Fn(usize) -> bool,
    features: Features,
    ctx: WakeCtx,
) -> (usize, Placement) {
    let n = map.len();
    let prev = if ctx.prev < n { ctx.prev } else { 0 };
    let (cpu, how) = if ctx.flags.contains(WakeFlags::FORK) {
        (
            find_idlest_cpu(map, &view, &allowed, prev),
            Placement::ForkIdlest,
        )
    } else {
        let sync = ctx.flags.contains(WakeFlags::SYNC);
        let target = match ctx.waker.filter(|&w| w < n && w != prev && allowed(w)) {
            Some(w) => wake_affine(&view, w, prev, sync, map),
            None => prev,
        };
        let recent = ctx.recent.filter(|&r| r < n);
        let cpu = select_idle_sibling(map, &view, &allowed, features, prev, target, recent);
        let how = if cpu == prev {
            Placement::Prev
        } else if cpu == target {
            Placement::Affine
        } else {
            Placement::IdleSibling
        };
        (cpu, how)
    };
    if allowed(cpu) {
        return (cpu, how);
    }
    // `select_fallback_rq`: the previous CPU if allowed, else the least loaded allowed one.
    let cpu = if allowed(prev) {
        prev
    } else {
        (0..n)
            .filter(|&i| allowed(i))
            .min_by_key(|&i| view(i).nr_running)
            .expect("select_task_rq_fair: the task is allowed on no CPU")
    };
    let how = if cpu == prev { Placement::Prev } else { how };
    (cpu, how)
}

/// `wake_affine`: the waker's CPU `this` or the wakee's `prev` as the target.
fn wake_affine(
    view: &impl Fn(usize) -> CpuView,
    this: usize,
    prev: usize,
    sync: bool,
    map: &CpuMap,
) -> usize {
    let (vt, vp) = (view(this), view(prev));
    // wake_affine_idle.
    if vt.idle && map.share_llc(this, prev) {
        return if vp.idle { prev } else { this };
    }
    if sync && vt.nr_running == 1 {
        return this;
    }
    if vp.idle {
        return prev;
    }
    // wake_affine_weight over runnable counts (the wakee, asleep, is on neither).
    let mut this_load = vt.nr_running as u64;
    if sync {
        this_load = this_load.saturating_sub(1);
    }
    let this_eff = (this_load + 1) * 100;
    let prev_eff =
        vp.nr_running as u64 * (100 + (WAKE_AFFINE_IMBALANCE_PCT - 100) / 2) + u64::from(sync);
    if this_eff < prev_eff { this } else { prev }
}

/// `select_idle_sibling` inside `target`'s LLC.
fn select_idle_sibling(
    map: &CpuMap,
    view: &impl Fn(usize) -> CpuView,
    allowed: &impl Fn(usize) -> bool,
    features: Features,
    prev: usize,
    target: usize,
    recent: Option<usize>,
) -> usize {
    let rank = features.is_enabled(Feature::WakePreferRank);
    let idle = |c: usize| view(c).idle && allowed(c);
    let prev_ok = prev != target && map.share_llc(prev, target) && idle(prev);
    if idle(target) {
        if rank && prev_ok && map.asym_prefer(prev, target) {
            return prev;
        }
        return target;
    }
    if prev_ok {
        return prev;
    }
    if let Some(r) = recent
        && r != prev
        && r != target
        && map.share_llc(r, target)
        && idle(r)
    {
        return r;
    }
    let llc = map.llc(target);
    let len = llc.end - llc.start;
    // The scan order: from the CPU after the target, wrapping (`for_each_cpu_wrap`).
    let order = (1..len).map(|k| llc.start + (target - llc.start + k) % len);
    if map.has_smt() {
        // An idle core: every sibling idle (the kernel's `has_idle_cores` hint, here exact).
        let core_idle = |c: usize| map.smt_siblings(c).all(|s| view(s).idle);
        if let Some(c) = order.clone().find(|&c| idle(c) && core_idle(c)) {
            return c;
        }
    }
    let mut budget = if features.is_enabled(Feature::SisUtil) {
        sis_util_scan(len, llc.clone().filter(|&c| !view(c).idle).count())
    } else {
        len
    };
    let mut best: Option<usize> = None;
    for c in order {
        if budget == 0 {
            break;
        }
        budget -= 1;
        if idle(c) {
            if !rank {
                return c;
            }
            if best.is_none_or(|b| map.asym_prefer(c, b)) {
                best = Some(c);
            }
        }
    }
    best.unwrap_or(target)
}

/// How many CPUs the idle-CPU scan of an LLC of `llc_weight` CPUs, `busy` of them busy, may
/// look at under SIS_UTIL: the kernel's `update_idle_cpu_scan` with a busy CPU counted as
/// full utilisation, `llc_weight · (1 − (util/cap · 100/85)²)`, 0 from 85 % busy on. (The
/// kernel uses the LLC's decayed utilisation; lagom has no PELT, and counts busy CPUs.)
///
/// ```
/// use lagom_policy::sis_util_scan;
/// assert_eq!(sis_util_scan(8, 0), 8);
/// assert_eq!(sis_util_scan(8, 4), 5);
/// assert_eq!(sis_util_scan(8, 7), 0);
/// ```
pub fn sis_util_scan(llc_weight: usize, busy: usize) -> usize {
    let (w, b) = (llc_weight as u128, busy.min(llc_weight) as u128);
    if w == 0 {
        return 0;
    }
    // w · (1 − (b/w)² · (100/85)²) = w − b² · 100² / (w · 85²)
    let cut = (b * b * 10_000).div_ceil(w * 7_225);
    w.saturating_sub(cut) as usize
}

/// `sched_balance_find_dst_cpu` for a fork from `cpu`: from the top level down, the idlest
/// group, then the idlest CPU of the bottom group reached.
fn find_idlest_cpu(
    map: &CpuMap,
    view: &impl Fn(usize) -> CpuView,
    allowed: &impl Fn(usize) -> bool,
    mut cpu: usize,
) -> usize {
    let stats = |g: &core::ops::Range<usize>| {
        let (mut idle, mut nr, mut cnt) = (0u64, 0u64, 0u64);
        for c in g.clone().filter(|&c| allowed(c)) {
            let v = view(c);
            idle += u64::from(v.idle);
            nr += v.nr_running as u64;
            cnt += 1;
        }
        (idle, nr, cnt)
    };
    let mut level = map.levels().len();
    while level > 0 {
        level -= 1;
        let local = map
            .groups(level, cpu)
            .find(|g| g.contains(&cpu))
            .expect("a CPU is in one of its domain's groups");
        let ls = stats(&local);
        let mut best = (local.clone(), ls);
        for g in map.groups(level, cpu) {
            let s = stats(&g);
            if s.2 == 0 {
                continue;
            }
            let (bi, bn, bc) = best.1;
            // More idle CPUs wins; then fewer runnable entities per CPU (cross-multiplied).
            let better = s.0 > bi || bc == 0 || (s.0 == bi && s.1 * bc < bn * s.2);
            if better {
                best = (g, s);
            }
        }
        if best.0 != local {
            // Descend into the chosen group: its idlest allowed CPU leads the next level.
            cpu = best
                .0
                .clone()
                .filter(|&c| allowed(c))
                .min_by_key(|&c| {
                    let v = view(c);
                    (!v.idle, v.nr_running)
                })
                .expect("the group has an allowed CPU");
        }
    }
    if allowed(cpu) {
        return cpu;
    }
    (0..map.len())
        .filter(|&c| allowed(c))
        .min_by_key(|&c| {
            let v = view(c);
            (!v.idle, v.nr_running)
        })
        .unwrap_or(cpu)
}

/// `ttwu_queue_cond` (with the RFC's TTWU_QUEUE_DEFAULT): whether a
/// remote wakeup to `target` goes through the target's wakelist (`true`) or takes its
/// runqueue lock (`false`). `waker` is the waker's CPU (`None`: a thread outside the
/// runtime, which shares no cache with any worker), `target_nr_running` the target's
/// runnable count (for a wakee still being switched away from, without it).
///
/// TTWU_QUEUE off: never. Across LLCs, or to a target that runs nothing: yes. To the
/// waker's own CPU: no. Otherwise the default outcome: no, or yes with TTWU_QUEUE_DEFAULT.
///
/// ```
/// use lagom_policy::{CpuMap, Features, LevelFlags, MapLevel, ttwu_queue_cond};
/// let two_llcs = CpuMap::new(
///     vec![0; 4],
///     vec![MapLevel { name: "MC", flags: LevelFlags::MC, spans: vec![0..2, 2..4] }],
/// )
/// .unwrap();
/// let f = Features::DEFAULT;
/// assert!(!ttwu_queue_cond(&two_llcs, f, Some(0), 1, 1), "same LLC, busy: the lock");
/// assert!(ttwu_queue_cond(&two_llcs, f, Some(0), 1, 0), "same LLC, idle: the wakelist");
/// assert!(ttwu_queue_cond(&two_llcs, f, Some(0), 2, 1), "across LLCs: the wakelist");
/// let def = f.apply("TTWU_QUEUE_DEFAULT").unwrap();
/// assert!(ttwu_queue_cond(&two_llcs, def, Some(0), 1, 1));
/// ```
pub fn ttwu_queue_cond(
    map: &CpuMap,
    features: Features,
    waker: Option<usize>,
    target: usize,
    target_nr_running: usize,
) -> bool {
    if !features.is_enabled(Feature::TtwuQueue) {
        return false;
    }
    let Some(w) = waker else {
        return true;
    };
    if !map.share_llc(w, target) {
        return true;
    }
    if w == target {
        return false;
    }
    if target_nr_running == 0 {
        return true;
    }
    features.is_enabled(Feature::TtwuQueueDefault)
}

// ---------------------------------------------------------------------------------------
// Runnable wakeups of a delayed task.
// ---------------------------------------------------------------------------------------

/// How `ttwu_runnable` treats a delayed wakee.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelayedWake {
    /// Requeue it in place on its CPU (the kernel's default).
    InPlace,
    /// Finish its delayed dequeue and wake it like a sleeper, through CPU selection
    /// (TTWU_DEQUEUE; DELAYED_WAKE_IDLE when waiting in place would stall it).
    Dequeue,
}

/// What [`delayed_wake`] knows about a delayed wakee and its CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayedWakeView {
    /// It ran within the migration cost ([`crate::MIGRATION_COST`]): its cache is
    /// probably still warm (`task_hot`).
    pub hot: bool,
    /// Its CPU would run it next: nothing runs there now.
    pub runs_next: bool,
    /// The least time (ns) the wakee would wait there: what is left of the running task's
    /// protection (RUN_TO_PARITY), or, if the wakee is not eligible (a delayed task slept
    /// with a negative lag), the time until the average reaches it
    /// ([`RunQueue::time_to_eligible`](super::RunQueue::time_to_eligible)), whichever is
    /// longer; 0 when nothing runs.
    pub wait: u64,
    /// An allowed CPU in its LLC is idle, and the task may move there (the migration
    /// contract: a started task that did not opt in may not).
    pub idle_elsewhere: bool,
}

impl DelayedWakeView {
    /// The view of the delayed entity `h` of `rq` woken at `now` (`hot`: it ran within the
    /// migration cost; `runs_next`: nothing runs on `rq`; `wait`: the longer of
    /// [`curr_protection_left`] and the entity's time to be eligible, 0 if nothing runs),
    /// with `idle_elsewhere` as the driver found it ([`idle_in_llc`], restricted by the
    /// migration contract where the driver has one).
    pub fn of<T>(
        rq: &super::RunQueue<T>,
        h: super::Handle,
        now: u64,
        idle_elsewhere: bool,
    ) -> Self {
        let se = rq.entity(h);
        DelayedWakeView {
            hot: now.saturating_sub(se.exec_start) < super::balance::MIGRATION_COST,
            runs_next: rq.curr().is_none(),
            wait: match rq.curr() {
                Some(_) => curr_protection_left(rq).max(rq.time_to_eligible(h)),
                None => 0,
            },
            idle_elsewhere,
        }
    }
}

/// Whether a CPU of `cpu`'s LLC other than `cpu` is idle and `allowed` (the
/// `idle_elsewhere` of [`DelayedWakeView`]).
///
/// ```
/// use lagom_policy::{CpuMap, CpuView, LevelFlags, MapLevel, idle_in_llc};
/// let map = CpuMap::new(
///     vec![0; 4],
///     vec![MapLevel { name: "MC", flags: LevelFlags::MC, spans: vec![0..2, 2..4] }],
/// )
/// .unwrap();
/// let nr = [1, 1, 0, 0];
/// let view = |i: usize| CpuView::of(nr[i], false);
/// assert!(!idle_in_llc(&map, 0, |_| true, view), "CPUs 2 and 3 are idle, but in the other LLC");
/// assert!(idle_in_llc(&map, 2, |_| true, view));
/// assert!(!idle_in_llc(&map, 2, |i| i != 3, view));
/// ```
pub fn idle_in_llc(
    map: &CpuMap,
    cpu: usize,
    allowed: impl Fn(usize) -> bool,
    view: impl Fn(usize) -> CpuView,
) -> bool {
    map.llc(cpu).any(|i| i != cpu && allowed(i) && view(i).idle)
}

/// The runnable wakeup of a delayed task: TTWU_DEQUEUE always dequeues; lagom's
/// DELAYED_WAKE_IDLE dequeues only when waiting in place would cost more than moving — its
/// CPU would not run it next, it is not cache hot or would wait past the migration cost
/// behind the running task, and an idle allowed CPU in its LLC can take it at once; the
/// default requeues in place.
///
/// ```
/// use lagom_policy::{DelayedWake, DelayedWakeView, Features, delayed_wake};
/// let stall = DelayedWakeView { hot: true, runs_next: false, wait: 2_000_000, idle_elsewhere: true };
/// assert_eq!(delayed_wake(Features::DEFAULT, stall), DelayedWake::InPlace);
/// let fix = Features::parse("DELAYED_WAKE_IDLE").unwrap();
/// assert_eq!(delayed_wake(fix, stall), DelayedWake::Dequeue);
/// let next = DelayedWakeView { runs_next: true, wait: 0, ..stall };
/// assert_eq!(delayed_wake(fix, next), DelayedWake::InPlace);
/// ```
pub fn delayed_wake(features: Features, v: DelayedWakeView) -> DelayedWake {
    if features.is_enabled(Feature::TtwuDequeue) {
        return DelayedWake::Dequeue;
    }
    if features.is_enabled(Feature::DelayedWakeIdle)
        && !v.runs_next
        && v.idle_elsewhere
        && !(v.hot && v.wait < super::balance::MIGRATION_COST)
    {
        return DelayedWake::Dequeue;
    }
    DelayedWake::InPlace
}

/// The least time (ns) an entity woken on `rq` now waits behind the running one: what is
/// left of its protection (RUN_TO_PARITY's `vprot`, in real time at its weight); 0 when
/// nothing runs or it is not protected. The running entity's vruntime is as of its last
/// accounting (not updated here: a runnable wakeup does not account the current task first).
pub fn curr_protection_left<T>(rq: &super::RunQueue<T>) -> u64 {
    let Some(c) = rq.curr() else {
        return 0;
    };
    if !rq.features().is_enabled(Feature::RunToParity) {
        return 0;
    }
    let se = rq.entity(c);
    let left = se.vprot.wrapping_sub(se.vruntime) as i64;
    if left <= 0 {
        return 0;
    }
    (u128::from(left as u64) * u128::from(se.weight) / u128::from(super::NICE_0_LOAD))
        .min(u128::from(u64::MAX)) as u64
}
