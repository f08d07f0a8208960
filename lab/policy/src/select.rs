//! CPU selection at wakeup and fork (`select_task_rq`, `select_task_rq_fair`), decided over a
//! read-only view of the CPUs ([`CpuView`]), the [`CpuMap`] (domains, flags, priorities), the
//! task's affinity and the wakeup's context ([`WakeCtx`]): the rules of Linux v7.1's
//! `kernel/sched/core.c` and `fair.c`, each step named after the kernel's function.
//!
//! * `select_task_rq`: a task that may use one CPU only (an affinity of one, or lagom's
//!   migration contract for a started task) stays where it is, and nothing is recorded;
//!   otherwise the fair class's selection runs and the wakeup gains `WF_RQ_SELECTED`.
//! * `select_task_rq_fair`: a wakeup records its wakee in the waker's flips (`record_wakee`)
//!   and is affine (`want_affine`) unless it is wide ([`wake_wide`]) or the waker's CPU is
//!   not allowed; the waker's domains are walked bottom-up for the lowest one that is
//!   `SD_WAKE_AFFINE` and spans the previous CPU, where `wake_affine` chooses between the two
//!   CPUs with that domain's `imbalance_pct`; then `select_idle_sibling` searches the chosen
//!   target's LLC. A fork walks the parent's domains for the highest one that is
//!   `SD_BALANCE_FORK` and descends through its idlest groups (`sched_balance_find_dst_cpu`).
//!
//! Where lagom's inputs differ from the kernel's (it has no PELT averages), the item says so:
//! `wake_affine_weight` and the fork's group types compare runnable counts and queued weights,
//! and the idle-core hint is exact.

use core::ops::Range;

use super::cpumap::CpuMap;
use super::features::{Feature, Features};
use super::wake_flags::WakeFlags;
use super::wakee::{WakeeState, record_wakee, wake_wide};

/// What CPU selection knows about one CPU (a snapshot; it may be stale by the time the
/// choice is acted on, which only costs balance, never correctness).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuView {
    /// Nothing runs or is queued there, and nothing waits on its wakelist (the kernel's
    /// `available_idle_cpu`, whose `idle_cpu` also looks at `ttwu_pending`).
    pub idle: bool,
    /// Runnable entities queued there, the running one included (`nr_running`, delayed
    /// entities not counted): a wakeup waiting on the wakelist is not counted until
    /// activated, as the kernel's `nr_running` does not count it.
    pub nr_running: usize,
    /// Weight of everything queued there (lagom's stand-in for the kernel's `cpu_load`,
    /// which is a decayed average).
    pub load: u64,
}

impl CpuView {
    /// What selection reads of a CPU with `nr_running` runnable entities, queued weight
    /// `load` and a wakelist that is (`pending`) or is not empty, as both drivers publish
    /// them: idle only when nothing is runnable and nothing waits on the wakelist.
    ///
    /// ```
    /// use lagom_policy::CpuView;
    /// assert_eq!(CpuView::of(0, 0, false), CpuView { idle: true, nr_running: 0, load: 0 });
    /// assert_eq!(CpuView::of(0, 0, true), CpuView { idle: false, nr_running: 0, load: 0 });
    /// assert_eq!(CpuView::of(2, 2048, false).nr_running, 2);
    /// ```
    pub fn of(nr_running: usize, load: u64, pending: bool) -> CpuView {
        CpuView {
            idle: nr_running == 0 && !pending,
            nr_running,
            load,
        }
    }
}

/// How [`select_task_rq`] chose its CPU (one counter each in the drivers' stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The waker's CPU, chosen by `wake_affine` (and kept by `select_idle_sibling`).
    Affine,
    /// An idle CPU of the target's LLC other than the target and the previous CPU: the
    /// recently used CPU, the previous CPU's idle SMT sibling, or one the scan found
    /// (`select_idle_sibling`).
    IdleSibling,
    /// The task's previous CPU (also the only CPU of a task that may use one).
    Prev,
    /// A new task's CPU, found by the idlest-group descent (`sched_balance_find_dst_cpu`).
    ForkIdlest,
}

/// What a wakeup or spawn tells [`select_task_rq`] beyond the CPUs' state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeCtx {
    /// The CPU the task last ran on (a new task: its parent's CPU, or, for a spawn from
    /// outside the runtime, the driver's choice).
    pub prev: usize,
    /// The waker's CPU (a fork's: the parent's); `None` for a wakeup from outside the
    /// runtime (a plain thread), which is never affine.
    pub waker: Option<usize>,
    /// The task's `recent_used_cpu`, if any.
    pub recent: Option<usize>,
    /// `WF_TTWU` (a wakeup: records the wakee, may be affine), `WF_SYNC`, `WF_FORK`.
    pub flags: WakeFlags,
    /// How many CPUs of the map the task may run on (`nr_cpus_allowed`; 1 for a task that
    /// may not migrate). With 1, no selection runs.
    pub nr_allowed: usize,
    /// The wakee's id (nonzero; the driver's), for the waker's `last_wakee`.
    pub wakee: u64,
    /// The wakee's own flips ([`WakeeState::flips`]).
    pub wakee_flips: u32,
    /// The driver's clock (ns), for the flips' decay.
    pub now: u64,
}

impl WakeCtx {
    /// A wakeup (`WF_TTWU`) of task `wakee` that last ran on `prev`, from `waker`, free to
    /// run on `nr_allowed` CPUs, with nothing else known (no recent CPU, no flips, time 0).
    pub fn wakeup(prev: usize, waker: Option<usize>, nr_allowed: usize, wakee: u64) -> WakeCtx {
        WakeCtx {
            prev,
            waker,
            recent: None,
            flags: WakeFlags::TTWU,
            nr_allowed,
            wakee,
            wakee_flips: 0,
            now: 0,
        }
    }

    /// A fork (`WF_FORK`) from `parent`'s CPU, free to run on `nr_allowed` CPUs.
    pub fn fork(parent: usize, nr_allowed: usize) -> WakeCtx {
        WakeCtx {
            prev: parent,
            waker: Some(parent),
            recent: None,
            flags: WakeFlags::FORK,
            nr_allowed,
            wakee: 0,
            wakee_flips: 0,
            now: 0,
        }
    }
}

/// What [`select_task_rq`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selection {
    /// The CPU (always allowed).
    pub cpu: usize,
    /// How it was chosen.
    pub how: Placement,
    /// The flags the selection adds to the wakeup's: `WF_RQ_SELECTED` when the fair class's
    /// selection ran (`select_task_rq`).
    pub flags: WakeFlags,
    /// The task's new `recent_used_cpu`, where the kernel writes it: `select_idle_sibling`
    /// sets it to the previous CPU once past its target and previous-CPU answers, and a fork
    /// starts with the parent's CPU; `None`: leave it as it is.
    pub recent_used_cpu: Option<usize>,
    /// `wake_wide` said wide: the wakeup was not affine because of it.
    pub wide: bool,
}

/// `select_task_rq`: the CPU (an index of `map`) for a task woken (`WF_TTWU`) or forked
/// (`WF_FORK`) as `ctx` says, over the CPUs' state `view` and the task's affinity `allowed`
/// (at least one CPU allowed). `waker` is the waking task's wakee record, updated here when
/// the fair class's selection runs for a wakeup (`record_wakee`); `None` when the waker is
/// not a task (a thread outside the runtime, an idle CPU's timer).
///
/// With `ctx.nr_allowed <= 1` nothing is selected (the kernel's `select_task_rq` for a task
/// of one allowed CPU or with migration disabled, which is what lagom's migration contract
/// makes of a started task): the task stays on `prev` (or its one allowed CPU), no flag is
/// added, nothing is recorded. Otherwise `select_task_rq_fair` runs and `WF_RQ_SELECTED` is
/// added; a choice the affinity forbids falls back to `prev` if allowed, else the least
/// loaded allowed CPU (`select_fallback_rq`).
///
/// ```
/// use lagom_policy::{CpuMap, CpuView, Features, Placement, WakeCtx, WakeFlags, select_task_rq};
/// let map = CpuMap::flat(4);
/// let nr = [3, 0, 0, 1];
/// let view = |i: usize| CpuView::of(nr[i], 1024 * nr[i] as u64, false);
/// // A task free to move, woken from outside, its previous CPU busy: the idle CPU 1.
/// let s = select_task_rq(&map, view, |_| true, Features::DEFAULT, WakeCtx::wakeup(0, None, 4, 7), None);
/// assert_eq!((s.cpu, s.how), (1, Placement::IdleSibling));
/// assert!(s.flags.contains(WakeFlags::RQ_SELECTED));
/// // The same task pinned to CPU 0: it stays, and no selection ran.
/// let s = select_task_rq(&map, view, |i| i == 0, Features::DEFAULT, WakeCtx::wakeup(0, None, 1, 7), None);
/// assert_eq!((s.cpu, s.flags, s.recent_used_cpu), (0, WakeFlags::NONE, None));
/// ```
pub fn select_task_rq(
    map: &CpuMap,
    view: impl Fn(usize) -> CpuView,
    allowed: impl Fn(usize) -> bool,
    features: Features,
    ctx: WakeCtx,
    waker: Option<&mut WakeeState>,
) -> Selection {
    let n = map.len();
    let prev = if ctx.prev < n { ctx.prev } else { 0 };
    let fork = ctx.flags.contains(WakeFlags::FORK);
    if ctx.nr_allowed <= 1 {
        let cpu = if allowed(prev) {
            prev
        } else {
            fallback(n, &view, &allowed, prev)
        };
        return Selection {
            cpu,
            how: Placement::Prev,
            flags: WakeFlags::NONE,
            recent_used_cpu: fork.then_some(prev),
            wide: false,
        };
    }
    let mut s = select_task_rq_fair(map, &view, &allowed, features, ctx, waker);
    s.flags |= WakeFlags::RQ_SELECTED;
    if !allowed(s.cpu) {
        s.cpu = fallback(n, &view, &allowed, prev);
        if s.cpu == prev {
            s.how = Placement::Prev;
        }
    }
    s
}

/// `select_fallback_rq`: `prev` if allowed, else the least loaded allowed CPU.
fn fallback(
    n: usize,
    view: &impl Fn(usize) -> CpuView,
    allowed: &impl Fn(usize) -> bool,
    prev: usize,
) -> usize {
    if prev < n && allowed(prev) {
        return prev;
    }
    (0..n)
        .filter(|&i| allowed(i))
        .min_by_key(|&i| view(i).nr_running)
        .expect("select_task_rq: the task is allowed on no CPU")
}

/// `select_task_rq_fair`: the fair class's choice for a task that may use more than one CPU
/// ([`select_task_rq`] calls it; its result may still be outside the affinity, which
/// `select_task_rq` corrects).
///
/// * **Wakeup** (`WF_TTWU`): with a waker task (`waker`), `record_wakee` and then
///   `want_affine = !wake_wide && waker's CPU allowed`. If affine, the waker's lowest domain
///   that is `SD_WAKE_AFFINE` and spans `prev` is `wake_affine`'s domain (none: not
///   affine): `wake_affine_idle`, then `wake_affine_weight` with that domain's
///   `imbalance_pct`, over runnable counts (the kernel compares decayed loads; with
///   `WF_SYNC` the waker's own entity is left out). Then `select_idle_sibling(prev,
///   target)`.
/// * **Fork** (`WF_FORK`): the highest domain of the parent's CPU that is `SD_BALANCE_FORK`
///   (contiguous from the bottom), and `sched_balance_find_dst_cpu` down from it.
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
    waker: Option<&mut WakeeState>,
) -> Selection {
    let n = map.len();
    let prev = if ctx.prev < n { ctx.prev } else { 0 };
    let ttwu = ctx.flags.contains(WakeFlags::TTWU);
    let fork = ctx.flags.contains(WakeFlags::FORK);
    let sync = ctx.flags.contains(WakeFlags::SYNC);
    let this = ctx.waker.filter(|&w| w < n);
    let mut want_affine = false;
    let mut wide = false;
    if ttwu && let Some(w) = this {
        let waker_flips = match waker {
            Some(state) => {
                record_wakee(state, ctx.wakee, ctx.now);
                state.flips
            }
            None => 0,
        };
        wide = wake_wide(waker_flips, ctx.wakee_flips, map.llc_size(w));
        want_affine = !wide && allowed(w);
    }
    // The domain walk runs over `this` CPU's domains: the waker's, the parent's (a spawn from
    // outside the runtime walks from `prev`, the CPU the driver chose for it).
    let cpu = this.unwrap_or(prev);
    let mut new_cpu = prev;
    let mut sd: Option<usize> = None;
    for (level, l) in map.levels().iter().enumerate() {
        if want_affine && l.flags.wake_affine && map.span(level, cpu).contains(&prev) {
            if cpu != prev {
                new_cpu = wake_affine(map, &view, level, cpu, prev, sync);
            }
            sd = None;
            break;
        }
        if fork && l.flags.balance_fork {
            sd = Some(level);
        } else if !want_affine {
            break;
        }
    }
    if let Some(level) = sd {
        let cpu = find_dst_cpu(map, &view, &allowed, level, cpu, prev);
        return Selection {
            cpu,
            how: Placement::ForkIdlest,
            flags: WakeFlags::NONE,
            recent_used_cpu: Some(prev),
            wide: false,
        };
    }
    if !ttwu {
        // A fork with no domain to balance over (one CPU, or only far NUMA levels above).
        return Selection {
            cpu: new_cpu,
            how: if new_cpu == prev {
                Placement::Prev
            } else {
                Placement::ForkIdlest
            },
            flags: WakeFlags::NONE,
            recent_used_cpu: fork.then_some(prev),
            wide,
        };
    }
    let target = new_cpu;
    let (cpu, recent) = select_idle_sibling(
        map,
        &view,
        &allowed,
        features,
        prev,
        target,
        ctx.recent.filter(|&r| r < n),
    );
    let how = if cpu == prev {
        Placement::Prev
    } else if cpu == target {
        Placement::Affine
    } else {
        Placement::IdleSibling
    };
    Selection {
        cpu,
        how,
        flags: WakeFlags::NONE,
        recent_used_cpu: recent,
        wide,
    }
}

/// `wake_affine` in domain `level`: the waker's CPU `this` or the wakee's `prev` as the
/// target (`wake_affine_idle`, then `wake_affine_weight`).
fn wake_affine(
    map: &CpuMap,
    view: &impl Fn(usize) -> CpuView,
    level: usize,
    this: usize,
    prev: usize,
    sync: bool,
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
    // wake_affine_weight over runnable counts (the wakee, asleep, is on neither), with the
    // domain's imbalance_pct as the bias towards the previous CPU.
    let pct = map.params(level, this).imbalance_pct;
    let mut this_load = vt.nr_running as u64;
    if sync {
        this_load = this_load.saturating_sub(1);
    }
    let this_eff = (this_load + 1) * 100;
    let prev_eff = vp.nr_running as u64 * (100 + (pct - 100) / 2) + u64::from(sync);
    if this_eff < prev_eff { this } else { prev }
}

/// `select_idle_sibling` inside `target`'s LLC; returns the CPU and the task's new
/// `recent_used_cpu` (`Some(prev)` once past the target and previous-CPU answers, as the
/// kernel writes it).
///
/// 1. An idle `target`; an idle `prev` in the target's LLC — but with clusters
///    (`sched_cluster_active`) an idle `prev` outside the target's cluster
///    (`cpus_share_resources`) is only remembered (`prev_aff`).
/// 2. The recently used CPU, idle, allowed, in the target's LLC, neither `prev` nor the
///    target; outside the target's cluster only remembered.
/// 3. With SMT: when no core of the LLC is wholly idle and `prev` shares the target's LLC,
///    an idle SMT sibling of `prev` (`select_idle_smt`).
/// 4. `select_idle_cpu`: the target's cluster first, then the rest of the LLC.
/// 5. The remembered `prev`, the remembered recent CPU, the target.
fn select_idle_sibling(
    map: &CpuMap,
    view: &impl Fn(usize) -> CpuView,
    allowed: &impl Fn(usize) -> bool,
    features: Features,
    prev: usize,
    target: usize,
    recent: Option<usize>,
) -> (usize, Option<usize>) {
    let rank = features.is_enabled(Feature::WakePreferRank);
    let clusters = map.cluster_active();
    let idle = |c: usize| view(c).idle && allowed(c);
    let prev_ok = prev != target && map.share_llc(prev, target) && idle(prev);
    if idle(target) {
        if rank && prev_ok && map.asym_prefer(prev, target) {
            return (prev, None);
        }
        return (target, None);
    }
    let mut prev_aff = None;
    if prev_ok {
        if !clusters || map.share_resources(prev, target) {
            return (prev, None);
        }
        prev_aff = Some(prev);
    }
    // From here on the kernel has written `recent_used_cpu = prev`.
    let written = Some(prev);
    let mut recent_aff = None;
    if let Some(r) = recent
        && r != prev
        && r != target
        && map.share_llc(r, target)
        && idle(r)
    {
        if !clusters || map.share_resources(r, target) {
            return (r, written);
        }
        recent_aff = Some(r);
    }
    let mut has_idle_core = false;
    if map.smt_active() {
        // The kernel's `test_idle_cores` hint, here exact: some core of the LLC is wholly
        // idle.
        has_idle_core = idle_core_in(map, view, map.llc(target));
        if !has_idle_core && map.share_llc(prev, target) {
            // select_idle_smt(prev).
            let llc = map.llc(target);
            if let Some(c) = map
                .smt_siblings(prev)
                .find(|&c| c != prev && llc.contains(&c) && idle(c))
            {
                return (c, written);
            }
        }
    }
    if let Some(c) = select_idle_cpu(map, view, allowed, features, has_idle_core, target, rank) {
        return (c, written);
    }
    (prev_aff.or(recent_aff).unwrap_or(target), written)
}

/// Whether some core whose CPUs all lie in `span` is wholly idle.
fn idle_core_in(map: &CpuMap, view: &impl Fn(usize) -> CpuView, span: Range<usize>) -> bool {
    let mut c = span.start;
    while c < span.end {
        let core = map.smt_siblings(c);
        if core.clone().all(|s| view(s).idle) {
            return true;
        }
        c = core.end.max(c + 1);
    }
    false
}

/// `select_idle_cpu`: the scan of `target`'s LLC for an idle allowed CPU, starting after the
/// target and wrapping round (the target itself last), over the target's cluster first
/// (when it has one) and then the rest of the LLC. With `has_idle_core` it looks for a
/// wholly idle core (`select_idle_core`, no budget; each core once), else the first idle
/// CPU it met in the cores it looked at; without, it visits at most SIS_UTIL's
/// `nr_idle_scan` allowed CPUs ([`sis_util_scan`]; none at all when that is 0, even with an
/// idle core). Only allowed CPUs are visited and spend the budget.
fn select_idle_cpu(
    map: &CpuMap,
    view: &impl Fn(usize) -> CpuView,
    allowed: &impl Fn(usize) -> bool,
    features: Features,
    has_idle_core: bool,
    target: usize,
    rank: bool,
) -> Option<usize> {
    let llc = map.llc(target);
    let mut budget = usize::MAX;
    if features.is_enabled(Feature::SisUtil) {
        let busy = llc.clone().filter(|&c| !view(c).idle).count();
        budget = sis_util_scan(llc.len(), busy);
        if budget == 0 {
            return None;
        }
    }
    let cluster = map.cluster_span(target);
    let mut scan = Scan {
        map,
        view,
        allowed,
        target,
        llc: llc.clone(),
        has_idle_core,
        rank,
        budget,
        idle_cpu: None,
        best: None,
    };
    if let Some(cl) = cluster.clone() {
        match scan.run(cl.clone(), None) {
            Step::Found(c) => return Some(c),
            Step::Out => return scan.out(),
            Step::Done => {}
        }
        match scan.run(llc, Some(cl)) {
            Step::Found(c) => Some(c),
            Step::Out | Step::Done => scan.out(),
        }
    } else {
        match scan.run(llc, None) {
            Step::Found(c) => Some(c),
            Step::Out | Step::Done => scan.out(),
        }
    }
}

/// The outcome of one part of [`select_idle_cpu`]'s scan.
enum Step {
    /// A CPU to return at once.
    Found(usize),
    /// The budget ran out.
    Out,
    /// The part is scanned.
    Done,
}

/// The state of [`select_idle_cpu`]'s scan over its parts.
struct Scan<'a, V, A> {
    map: &'a CpuMap,
    view: &'a V,
    allowed: &'a A,
    target: usize,
    llc: Range<usize>,
    has_idle_core: bool,
    rank: bool,
    /// Allowed CPUs that may still be visited (without an idle core).
    budget: usize,
    /// The first idle allowed CPU met in a core that was not wholly idle.
    idle_cpu: Option<usize>,
    /// With WAKE_PREFER_RANK, the best-ranked idle CPU seen so far.
    best: Option<usize>,
}

impl<V: Fn(usize) -> CpuView, A: Fn(usize) -> bool> Scan<'_, V, A> {
    /// Scans `part` (a sub-range of the LLC) from after the target, wrapping, skipping the
    /// CPUs of `skip` (a part scanned before).
    fn run(&mut self, part: Range<usize>, skip: Option<Range<usize>>) -> Step {
        let len = part.len();
        let first = part.start;
        // `for_each_cpu_wrap(.., target + 1)`: the part's CPUs above the target, then those
        // up to it. `start` is how many of the part's CPUs come before the target's successor.
        let start = (self.target + 1).saturating_sub(first).min(len) % len.max(1);
        let order = |k: usize| first + (start + k) % len;
        let in_scan = |c: usize| {
            part.contains(&c) && (self.allowed)(c) && !skip.as_ref().is_some_and(|s| s.contains(&c))
        };
        for k in 0..len {
            let c = order(k);
            if !in_scan(c) {
                continue;
            }
            if self.has_idle_core {
                // Each core once: skip a CPU whose core an earlier CPU of this scan stood for.
                let pos = |x: usize| (x - first + len - start) % len;
                let core = self.map.smt_siblings(c);
                if core
                    .clone()
                    .any(|s| s != c && in_scan(s) && self.llc.contains(&s) && pos(s) < pos(c))
                {
                    continue;
                }
                let mut whole = true;
                for s in core {
                    if !(self.view)(s).idle {
                        whole = false;
                    } else if self.idle_cpu.is_none() && in_scan(s) {
                        self.idle_cpu = Some(s);
                    }
                }
                if whole {
                    return Step::Found(c);
                }
            } else {
                if self.budget == 0 {
                    return Step::Out;
                }
                self.budget -= 1;
                if (self.view)(c).idle {
                    if !self.rank {
                        return Step::Found(c);
                    }
                    if self.best.is_none_or(|b| self.map.asym_prefer(c, b)) {
                        self.best = Some(c);
                    }
                }
            }
        }
        Step::Done
    }

    /// What the scan answers when it found no CPU to return at once.
    fn out(&self) -> Option<usize> {
        if self.has_idle_core {
            self.idle_cpu
        } else {
            self.best
        }
    }
}

/// How many CPUs the idle-CPU scan of an LLC of `llc_weight` CPUs, `busy` of them busy, may
/// look at under SIS_UTIL: the kernel's `update_idle_cpu_scan` with a busy CPU counted as
/// full utilisation, `llc_weight · (1 − (util/cap · 100/85)²)`, 0 from 85 % busy on. (The
/// kernel uses the LLC's decayed utilisation, recomputed by the LLC's periodic balance;
/// lagom has no PELT, and counts busy CPUs at each scan.)
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

/// The statistics of one group that the fork's slow path compares (`update_sg_wakeup_stats`),
/// with lagom's inputs: runnable counts and queued weights, no decayed averages.
#[derive(Debug, Clone, Copy)]
struct GroupStats {
    /// Σ runnable (`sum_nr_running`; also lagom's stand-in for `group_util`).
    nr: usize,
    /// Idle CPUs (`idle_cpus`).
    idle_cpus: usize,
    /// The group's type.
    kind: GroupKind,
    /// `group_load · SCHED_CAPACITY_SCALE / group_capacity` (Σ queued weight over the CPUs,
    /// every CPU of capacity 1024: the load per CPU; busy types only).
    avg_load: u64,
}

/// `group_type` as the fork's slow path uses it (`group_classify`), decided by runnable
/// counts: spare capacity while fewer runnable than CPUs, overloaded with more, fully busy
/// with as many (the kernel adds utilisation tests that need decayed averages). The other
/// types (misfit, asym packing, imbalanced, SMT balance) are not used on this path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum GroupKind {
    HasSpare,
    FullyBusy,
    Overloaded,
}

fn wakeup_stats(view: &impl Fn(usize) -> CpuView, g: Range<usize>) -> GroupStats {
    let (mut load, mut nr, mut idle_cpus) = (0u64, 0usize, 0usize);
    let weight = g.len();
    for c in g {
        let v = view(c);
        load += v.load;
        nr += v.nr_running;
        idle_cpus += usize::from(v.nr_running == 0 && v.idle);
    }
    let kind = if nr < weight {
        GroupKind::HasSpare
    } else if nr > weight {
        GroupKind::Overloaded
    } else {
        GroupKind::FullyBusy
    };
    let avg_load = match kind {
        GroupKind::HasSpare => 0,
        _ => load / weight.max(1) as u64,
    };
    GroupStats {
        nr,
        idle_cpus,
        kind,
        avg_load,
    }
}

/// `update_pick_idlest`: whether group stats `s` beat the idlest so far.
fn better_idlest(idlest: Option<&GroupStats>, s: &GroupStats) -> bool {
    let Some(i) = idlest else { return true };
    if s.kind != i.kind {
        return s.kind < i.kind;
    }
    match s.kind {
        GroupKind::Overloaded | GroupKind::FullyBusy => s.avg_load < i.avg_load,
        GroupKind::HasSpare => {
            s.idle_cpus > i.idle_cpus || (s.idle_cpus == i.idle_cpus && s.nr < i.nr)
        }
    }
}

/// `sched_balance_find_dst_group`: the group of `cpu`'s domain at `level` to push a new
/// task to, or `None` to stay in the local group.
///
/// For a task whose affinity leaves out part of a group, lagom's statistics still count
/// every CPU of the group, and the NUMA allowance is `imb_numa_nr` whatever the task may use
/// of the local group; the kernel cuts the allowance to the task's CPUs in the local group,
/// and later kernels count only the task's CPUs in a group's statistics (a difference only
/// for a spawn whose affinity leaves out part of a group).
fn find_dst_group(
    map: &CpuMap,
    view: &impl Fn(usize) -> CpuView,
    allowed: &impl Fn(usize) -> bool,
    level: usize,
    cpu: usize,
) -> Option<Range<usize>> {
    let mut idlest: Option<(Range<usize>, GroupStats)> = None;
    let mut local: Option<GroupStats> = None;
    for g in map.groups(level, cpu) {
        if !g.clone().any(allowed) {
            continue;
        }
        let s = wakeup_stats(view, g.clone());
        if g.contains(&cpu) {
            local = Some(s);
        } else if better_idlest(idlest.as_ref().map(|x| &x.1), &s) {
            idlest = Some((g, s));
        }
    }
    let (group, idle) = idlest?;
    let Some(local) = local else {
        return Some(group);
    };
    if local.kind < idle.kind {
        return None;
    }
    if local.kind > idle.kind {
        return Some(group);
    }
    let params = map.params(level, cpu);
    let numa = map.levels()[level].flags.numa;
    match local.kind {
        GroupKind::Overloaded | GroupKind::FullyBusy => {
            // The allowed imbalance, a nice-0 task's share of imbalance_pct.
            let imbalance = super::NICE_0_LOAD * (params.imbalance_pct - 100) / 100;
            if numa && idle.avg_load + imbalance >= local.avg_load {
                return None;
            }
            if idle.avg_load >= local.avg_load + imbalance {
                return None;
            }
            if 100 * local.avg_load <= params.imbalance_pct * idle.avg_load {
                return None;
            }
        }
        GroupKind::HasSpare => {
            if numa {
                let imbalance = local.idle_cpus.abs_diff(idle.idle_cpus);
                let imb_numa_nr = imb_numa_nr(map, level, cpu);
                // `adjust_numa_imbalance`: a small imbalance is allowed while the local
                // group would stay lightly loaded.
                // (`dst_running = local + 1 <= imb_numa_nr`.)
                if local.nr < imb_numa_nr && imbalance <= NUMA_IMBALANCE_MIN {
                    return None;
                }
            }
            if local.idle_cpus >= idle.idle_cpus {
                return None;
            }
        }
    }
    Some(group)
}

/// The kernel's `NUMA_IMBALANCE_MIN`.
const NUMA_IMBALANCE_MIN: usize = 2;

/// `sd->imb_numa_nr` of `cpu`'s domain at NUMA level `level`, as `build_sched_domains` sets
/// it: at the first domain above the LLC, the number of LLCs it spans (an eighth of its
/// CPUs when it spans one), at least 1; above, that times how many spans of the first NUMA
/// level the domain covers.
fn imb_numa_nr(map: &CpuMap, level: usize, cpu: usize) -> usize {
    let levels = map.levels();
    let llc_weight = map.llc_size(cpu).max(1);
    // The first level above the LLC.
    let Some(first) = (0..levels.len()).find(|&l| !levels[l].flags.share_llc) else {
        return 1;
    };
    let w = map.span(first, cpu).len();
    let nr_llcs = w / llc_weight;
    let imb = if nr_llcs <= 1 { w >> 3 } else { nr_llcs }.max(1);
    if level <= first {
        return imb;
    }
    let imb_span = (first + 1..levels.len())
        .find(|&l| levels[l].flags.numa)
        .map_or(w, |l| map.span(l, cpu).len())
        .max(1);
    imb * (map.span(level, cpu).len() / imb_span).max(1)
}

/// `sched_balance_find_dst_group_cpu`: in `group`, the first idle allowed CPU (the kernel
/// prefers the shallowest idle state, then the most recently idled CPU; lagom's view has
/// neither, so among idle CPUs the first wins), else the least loaded allowed one.
fn find_dst_group_cpu(
    view: &impl Fn(usize) -> CpuView,
    allowed: &impl Fn(usize) -> bool,
    group: Range<usize>,
    this: usize,
) -> usize {
    if group.len() == 1 {
        return group.start;
    }
    let mut least: Option<(u64, usize)> = None;
    for c in group.filter(|&c| allowed(c)) {
        let v = view(c);
        if v.idle {
            return c;
        }
        if least.is_none_or(|(l, _)| v.load < l) {
            least = Some((v.load, c));
        }
    }
    least.map_or(this, |(_, c)| c)
}

/// `sched_balance_find_dst_cpu` from the fork domain at `top` of CPU `cpu`: the idlest group
/// of each domain down to the bottom, re-walking the domains of each CPU it moves to.
fn find_dst_cpu(
    map: &CpuMap,
    view: &impl Fn(usize) -> CpuView,
    allowed: &impl Fn(usize) -> bool,
    top: usize,
    mut cpu: usize,
    prev: usize,
) -> usize {
    if !map.span(top, cpu).any(allowed) {
        return prev;
    }
    let mut new_cpu = cpu;
    let mut sd = Some(top);
    while let Some(level) = sd {
        let below = level.checked_sub(1);
        if !map.levels()[level].flags.balance_fork {
            sd = below;
            continue;
        }
        let Some(group) = find_dst_group(map, view, allowed, level, cpu) else {
            sd = below;
            continue;
        };
        new_cpu = find_dst_group_cpu(view, allowed, group, cpu);
        if new_cpu == cpu {
            sd = below;
            continue;
        }
        let weight = map.span(level, cpu).len();
        cpu = new_cpu;
        sd = None;
        for l in 0..map.levels().len() {
            if weight <= map.span(l, cpu).len() {
                break;
            }
            if map.levels()[l].flags.balance_fork {
                sd = Some(l);
            }
        }
    }
    new_cpu
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
// Runnable wakeups of a delayed task (`ttwu_runnable`, the RFC's TTWU_DEQUEUE, DELAYED_WAKE_IDLE).
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
    /// It ran within the migration cost (`task_hot`'s time test with the runqueue's
    /// configured `migration_cost`): its cache is probably still warm.
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
    /// The configured migration cost (`sysctl_sched_migration_cost`, the runqueue's
    /// `RqConfig::migration_cost`): the wait that makes moving a hot task worth it.
    pub migration_cost: u64,
}

impl DelayedWakeView {
    /// The view of the delayed entity `h` of `rq` woken at `now` (`hot`: it ran within
    /// `rq`'s configured migration cost, as `task_hot` tests it — never with a cost of 0,
    /// always with [`crate::MIGRATION_COST_ALWAYS_HOT`]; `runs_next`: nothing runs on `rq`;
    /// `wait`: the longer of
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
        let migration_cost = rq.config().migration_cost;
        DelayedWakeView {
            hot: super::balance::hot_by_time(now, se.exec_start, migration_cost),
            runs_next: rq.curr().is_none(),
            wait: match rq.curr() {
                Some(_) => curr_protection_left(rq).max(rq.time_to_eligible(h)),
                None => 0,
            },
            idle_elsewhere,
            migration_cost,
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
/// let view = |i: usize| CpuView::of(nr[i], 1024 * nr[i] as u64, false);
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
/// let stall = DelayedWakeView {
///     hot: true, runs_next: false, wait: 2_000_000, idle_elsewhere: true, migration_cost: 500_000,
/// };
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
        && !(v.hot && v.wait < v.migration_cost)
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
