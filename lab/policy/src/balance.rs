//! Load-balancing decisions: which CPU to pull from, how much, and which entities may move
//! (the kernel's `find_busiest_queue`, `calculate_imbalance` and `can_migrate_task`), over a
//! read-only view of the CPUs, so that the threaded runtime and the simulator balance alike.
//!
//! Two balancers use them, as in the kernel:
//!
//! * **Newly idle** ([`newidle_imbalance`]): a CPU about to go idle pulls one runnable entity
//!   from the CPU with the most runnable entities (at least two). The count is what matters
//!   to an idle CPU (the kernel's `migrate_task`): any work beats none. Delayed entities are
//!   not work and never move this way.
//! * **Periodic** ([`periodic_imbalance`], run from the tick when a level is due,
//!   `LevelBalance`): the
//!   CPU pulls *load* (the weight sum of everything queued, delayed entities included, as the
//!   kernel's `cfs_rq` load counts them) from the CPU with the most load, when that exceeds its
//!   own by more than [`IMBALANCE_PCT`] %; it moves entities while the amount moved stays
//!   within half the difference (`migrate_load`). Only this balancer moves delayed entities
//!   (the kernel's `can_migrate_task` allows them only for `migrate_load`), which is what makes
//!   a queued delayed wakeup meet a task that moved (the migration race: the drain must follow
//!   the task to its new CPU).
//!
//! Weighted fairness across CPUs comes from the periodic balancer: with nice 0, 0, 5 and −5
//! on two CPUs (weights 1024, 1024, 335, 3121), pulling by load ends with the −5 entity
//! alone on one CPU and the other three sharing the other, which is the fairest feasible
//! split (an entity cannot use more than one CPU, so the −5 entity's share is capped at one
//! CPU and the rest is shared by weight). Counting entities would stop at two and two.
//!
//! The half-difference bound is what keeps the balancer from oscillating: a move never
//! makes the puller heavier than the CPU it pulled from.

use super::cpumap::{CpuMap, MapLevel};
use super::features::{Feature, Features};

/// What balancing knows about one CPU (a snapshot; stale values cost balance, never
/// correctness: the mechanism re-checks everything under the runqueue locks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadView {
    /// Weight sum of the queued entities, the running and the delayed ones included.
    pub load: u64,
    /// Runnable entities (the running one included, delayed ones not).
    pub nr_running: usize,
}

/// How an imbalance is measured and settled (the kernel's `enum migration_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Migration {
    /// Move runnable entities, one at a time, regardless of weight (`migrate_task`).
    Task,
    /// Move weight: entities whose weight fits in what is left of the imbalance
    /// (`migrate_load`); delayed entities may move.
    Load,
}

/// A decision to pull from `busiest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Imbalance {
    /// The CPU to pull from.
    pub busiest: usize,
    /// What to move.
    pub kind: Migration,
    /// How much: entities for [`Migration::Task`], weight for [`Migration::Load`].
    pub amount: u64,
}

/// The kernel's `imbalance_pct` of a multi-core domain: the busiest CPU's load must exceed
/// the puller's by more than this percentage before the periodic balancer moves anything.
pub const IMBALANCE_PCT: u64 = 117;

/// How often (ns of the puller's clock) a busy CPU's tick looks at its periodic balance and
/// its nohz kick: 4 ms (the kernel's tick runs `sched_balance_trigger` and
/// `nohz_balancer_kick` at every tick, 1 ms at HZ=1000; lagom has no tick interrupt). Each
/// domain level then balances only when it is due (`LevelBalance::due`: its
/// `balance_interval` × `busy_factor`, 32 ms or more for a 2-CPU domain).
pub const BALANCE_INTERVAL: u64 = 4_000_000;

/// Newly idle balance for CPU `me` of `n`: pull one runnable entity from the CPU with the
/// most runnable entities, if it has at least two (one runs there, one may move).
///
/// ```
/// use lagom_policy::{LoadView, Migration, newidle_imbalance};
/// let cpus = [LoadView { load: 0, nr_running: 0 }, LoadView { load: 2048, nr_running: 2 }];
/// let imb = newidle_imbalance(2, 0, |i| cpus[i]).unwrap();
/// assert_eq!((imb.busiest, imb.kind, imb.amount), (1, Migration::Task, 1));
/// ```
pub fn newidle_imbalance(
    n: usize,
    me: usize,
    view: impl Fn(usize) -> LoadView,
) -> Option<Imbalance> {
    let (nr, busiest) = (0..n)
        .filter(|&i| i != me)
        .map(|i| (view(i).nr_running, i))
        .max()?;
    (nr >= 2).then_some(Imbalance {
        busiest,
        kind: Migration::Task,
        amount: 1,
    })
}

/// Periodic balance for CPU `me` of `n`: pull half the load difference from the CPU with the
/// most load, if that is more than [`IMBALANCE_PCT`] % of this CPU's load.
///
/// ```
/// use lagom_policy::{LoadView, Migration, periodic_imbalance};
/// // nice 0 and 5 here, nice 0 and −5 there: pull up to (4145 − 1359) / 2 of weight.
/// let cpus = [LoadView { load: 1359, nr_running: 2 }, LoadView { load: 4145, nr_running: 2 }];
/// let imb = periodic_imbalance(2, 0, |i| cpus[i]).unwrap();
/// assert_eq!((imb.busiest, imb.kind, imb.amount), (1, Migration::Load, 1393));
/// // The other way round there is nothing to pull.
/// assert_eq!(periodic_imbalance(2, 1, |i| cpus[i]), None);
/// ```
pub fn periodic_imbalance(
    n: usize,
    me: usize,
    view: impl Fn(usize) -> LoadView,
) -> Option<Imbalance> {
    let local = view(me).load;
    let (load, busiest) = (0..n)
        .filter(|&i| i != me)
        .map(|i| (view(i).load, i))
        .max()?;
    if u128::from(load) * 100 <= u128::from(local) * u128::from(IMBALANCE_PCT) {
        return None;
    }
    Some(Imbalance {
        busiest,
        kind: Migration::Load,
        amount: (load - local) / 2,
    })
}

/// The kernel's `imbalance_pct` of a domain level: 110 within an SMT core, [`IMBALANCE_PCT`]
/// (117) above ([`MapLevel::params`], `sd_init`).
pub fn imbalance_pct(level: &MapLevel) -> u64 {
    level.params(1).imbalance_pct
}

/// Periodic balance for CPU `me` over the domains of `map` (the kernel's
/// `sched_balance_domains` walk from the tick): level by level from the bottom (SMT, then
/// the LLC, then package and NUMA), the first level whose busiest CPU has more than the
/// level's [`imbalance_pct`] % of `me`'s load decides, and half the difference may move
/// ([`periodic_imbalance`] within that level's span). So load moves between SMT siblings or
/// cache siblings before it crosses an LLC. (The kernel compares groups, not CPUs; lagom
/// compares the CPUs of the span. The drivers' tick balances each level at its own
/// interval, [`periodic_imbalance_level`]; this walk over every level is for a caller that
/// balances all at once.) CPUs in `pinned` are left out: an earlier search of this attempt
/// found them all pinned ([`PinnedCpus`], the kernel's `redo`).
///
/// ```
/// use lagom_policy::{
///     CpuMap, LevelFlags, LoadView, MapLevel, PinnedCpus, periodic_imbalance_domains,
/// };
/// // Two LLCs of two CPUs: CPU 3 (other LLC) is busiest, CPU 1 (same LLC) busy enough.
/// let map = CpuMap::new(
///     vec![0; 4],
///     vec![
///         MapLevel { name: "MC", flags: LevelFlags::MC, spans: vec![0..2, 2..4] },
///         MapLevel { name: "PKG", flags: LevelFlags::PKG, spans: vec![0..4] },
///     ],
/// )
/// .unwrap();
/// let load = [1024, 3072, 0, 4096];
/// let view = |i: usize| LoadView { load: load[i], nr_running: (load[i] / 1024) as usize };
/// let mut pinned = PinnedCpus::default();
/// let imb = periodic_imbalance_domains(&map, 0, view, &pinned).unwrap();
/// assert_eq!((imb.busiest, imb.amount), (1, 1024), "the cache sibling first");
/// // CPU 1's tasks were all pinned: the search is redone without it.
/// pinned.insert(1);
/// let imb = periodic_imbalance_domains(&map, 0, view, &pinned).unwrap();
/// assert_eq!((imb.busiest, imb.amount), (3, 1536));
/// ```
pub fn periodic_imbalance_domains(
    map: &CpuMap,
    me: usize,
    view: impl Fn(usize) -> LoadView,
    pinned: &PinnedCpus,
) -> Option<Imbalance> {
    (0..map.levels().len())
        .find_map(|level| periodic_imbalance_level(map, level, me, &view, pinned))
}

/// Periodic balance for CPU `me` at one `level` of `map` (the kernel's `sched_balance_rq` of
/// one domain, called by a driver's walk when the level is due, `LevelBalance::due`): the
/// CPU of the level's span with the most load, if that is more than the level's
/// [`imbalance_pct`] % of `me`'s, leaving out `pinned`; half the difference may move.
/// [`periodic_imbalance_domains`] is the walk over every level.
///
/// ```
/// use lagom_policy::{CpuMap, LoadView, PinnedCpus, periodic_imbalance_level};
/// let map = CpuMap::flat(2);
/// let load = [1024, 3072];
/// let view = |i: usize| LoadView { load: load[i], nr_running: (load[i] / 1024) as usize };
/// let imb = periodic_imbalance_level(&map, 0, 0, view, &PinnedCpus::default()).unwrap();
/// assert_eq!((imb.busiest, imb.amount), (1, 1024));
/// ```
pub fn periodic_imbalance_level(
    map: &CpuMap,
    level: usize,
    me: usize,
    view: impl Fn(usize) -> LoadView,
    pinned: &PinnedCpus,
) -> Option<Imbalance> {
    let local = view(me).load;
    let (load, busiest) = map
        .span(level, me)
        .filter(|&i| i != me && !pinned.contains(i))
        .map(|i| (view(i).load, i))
        .max()?;
    let pct = imbalance_pct(&map.levels()[level]);
    (u128::from(load) * 100 > u128::from(local) * u128::from(pct)).then(|| Imbalance {
        busiest,
        kind: Migration::Load,
        amount: (load - local) / 2,
    })
}

/// One queued entity of the busiest CPU, as `can_migrate_task` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Its weight.
    pub weight: u64,
    /// It sleeps, still queued (DELAY_DEQUEUE).
    pub delayed: bool,
    /// It runs there, or its CPU is still switching away from it.
    pub running: bool,
    /// Its affinity allows the pulling CPU. A driver that keeps a task where it last ran
    /// (lagom's migration contract, for a task that has started and did not opt in to
    /// migration) passes an affinity of one CPU, the one it is queued on: `false` here.
    pub allowed: bool,
    /// It is the next buddy of its runqueue (`cfs_rq->next`): about to run there.
    pub next_buddy: bool,
    /// When it last ran, on the source's clock (its entity's `exec_start`: the last time it
    /// was charged); 0 for an entity that never ran there (a new task, or one that came by
    /// migration, as the kernel's ENQUEUE_MIGRATED clears it).
    pub exec_start: u64,
    /// It is eligible on its source runqueue (its lag is not negative).
    pub eligible: bool,
}

/// The kernel's `sysctl_sched_migration_cost` default (ns, 0.5 ms): a task that ran within
/// this long is cache hot (`task_hot`). The runtime's value is
/// `Builder::sched_migration_cost_ns`.
pub const MIGRATION_COST: u64 = 500_000;

/// A migration cost meaning "always cache hot": the kernel's `sysctl_sched_migration_cost`
/// is an unsigned int, and `task_hot` treats −1 (its largest value) so.
pub const MIGRATION_COST_ALWAYS_HOT: u64 = u32::MAX as u64;

/// What `can_migrate_task` knows about the balance attempt (the kernel's `lb_env` and the
/// domain it balances).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrateEnv {
    /// The source's clock now (ns; the kernel's `rq_clock_task(src_rq)`).
    pub now: u64,
    /// `sysctl_sched_migration_cost` (ns): 0 means nothing is hot by time,
    /// [`MIGRATION_COST_ALWAYS_HOT`] everything is.
    pub migration_cost: u64,
    /// The domain shares CPU capacity (an SMT level): its CPUs share every cache, so nothing
    /// is hot within it.
    pub smt: bool,
    /// Runnable entities on the destination (the buddy is hot only while there are some:
    /// an idle destination is better off with it).
    pub dst_nr_running: usize,
    /// Balance attempts of this domain that found an imbalance and moved nothing, since
    /// the last that moved something (`sd->nr_balance_failed`).
    pub nr_balance_failed: u32,
    /// The domain's `cache_nice_tries` ([`cache_nice_tries`]): hot entities move once
    /// `nr_balance_failed` exceeds it.
    pub cache_nice_tries: u32,
    /// The source runqueue's features (CACHE_HOT_BUDDY, PLACE_LAG).
    pub features: Features,
}

impl MigrateEnv {
    /// The environment of a pull from CPU `src` to `dst` over the domain the two first meet
    /// in (`CpuMap::lowest_common_level`: its SMT flag and `cache_nice_tries`), as both
    /// drivers build it; `nr_balance_failed` is the puller's count ([`failed_after`]).
    #[allow(clippy::too_many_arguments)]
    pub fn of(
        map: &CpuMap,
        dst: usize,
        src: usize,
        now: u64,
        migration_cost: u64,
        dst_nr_running: usize,
        nr_balance_failed: u32,
        features: Features,
    ) -> MigrateEnv {
        let level = &map.levels()[map.lowest_common_level(dst, src)];
        MigrateEnv {
            now,
            migration_cost,
            smt: level.flags.share_cpucapacity,
            dst_nr_running,
            nr_balance_failed,
            cache_nice_tries: cache_nice_tries(level),
            features,
        }
    }
}

/// How one balance attempt ended: the exits of the kernel's `sched_balance_rq`, which decide
/// `sd->nr_balance_failed` ([`failed_after`]) and whether the search is redone
/// ([`PinnedCpus::redo`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbOutcome {
    /// No imbalance, or none left once the all-pinned CPUs are left out (`out_balanced`).
    Balanced,
    /// The busiest CPU had more than one runnable entity and every one examined may not come
    /// here (LBF_ALL_PINNED: none got past `can_migrate_task`'s affinity test,
    /// [`clears_all_pinned`]).
    AllPinned,
    /// An imbalance, an entity that may come here, and nothing moved (running, cache hot,
    /// too heavy): `ld_moved == 0`.
    Failed,
    /// Entities moved (`ld_moved > 0`).
    Moved,
}

impl LbOutcome {
    /// The outcome of a pull from a CPU with `src_nr_running` runnable entities that moved
    /// `pulled`, where `affine` says whether any entity examined cleared LBF_ALL_PINNED
    /// ([`clears_all_pinned`]). As in the kernel, only a source with more than one runnable
    /// entity can be all pinned (`sched_balance_rq` tries to detach only then).
    ///
    /// ```
    /// use lagom_policy::LbOutcome;
    /// assert_eq!(LbOutcome::of_pull(3, 0, false), LbOutcome::AllPinned);
    /// assert_eq!(LbOutcome::of_pull(3, 0, true), LbOutcome::Failed);
    /// assert_eq!(LbOutcome::of_pull(1, 0, false), LbOutcome::Failed, "one runnable: not tried");
    /// assert_eq!(LbOutcome::of_pull(3, 1, true), LbOutcome::Moved);
    /// ```
    pub fn of_pull(src_nr_running: usize, pulled: usize, affine: bool) -> LbOutcome {
        if pulled > 0 {
            LbOutcome::Moved
        } else if src_nr_running > 1 && !affine {
            LbOutcome::AllPinned
        } else {
            LbOutcome::Failed
        }
    }
}

/// The puller's `nr_balance_failed` after an attempt that ended in `outcome`, from `failed`
/// (the kernel's `sched_balance_rq`): one more after [`LbOutcome::Failed`]; 0 after a move
/// and when all pinned (`out_all_pinned`: nothing could have moved, so it must not make
/// cache-hot tasks movable later).
///
/// Differences (`docs/src/design/kernel-map.md`): lagom keeps one count per CPU, not one
/// per domain; it counts newly idle failures too (the kernel only periodic and idle
/// balances), since lagom's idle worker has no separate idle balance (its newly idle
/// balance, run when a nohz kick wakes it, stands for the kernel's nohz idle balance); and
/// it does not yet reset the count when balanced (`out_balanced`): with every newly idle
/// attempt counted, a reset at each one that finds nothing (most idle entries) would keep a
/// cache-hot task from ever building the failures that let it move — the kernel's failures
/// come from balances at intervals that lagom does not have yet (per-domain intervals,
/// newly idle gating).
///
/// ```
/// use lagom_policy::{LbOutcome, failed_after};
/// assert_eq!(failed_after(2, LbOutcome::Failed), 3);
/// assert_eq!(failed_after(2, LbOutcome::Moved), 0);
/// assert_eq!(failed_after(2, LbOutcome::AllPinned), 0, "out_all_pinned");
/// assert_eq!(failed_after(2, LbOutcome::Balanced), 2, "lagom: no out_balanced reset yet");
/// ```
pub fn failed_after(failed: u32, outcome: LbOutcome) -> u32 {
    match outcome {
        LbOutcome::Failed => failed.saturating_add(1),
        LbOutcome::Moved | LbOutcome::AllPinned => 0,
        // Not yet the kernel's `out_balanced` reset (kernel-map.md): lagom counts its
        // frequent newly idle attempts, and a reset at each that finds nothing would keep a
        // cache-hot task from ever building the failures that let it move.
        LbOutcome::Balanced => failed,
    }
}

/// The CPUs one balance attempt found all pinned ([`LbOutcome::AllPinned`]), which its next
/// searches leave out: the kernel's `sched_balance_rq` clears such a busiest CPU from its
/// candidate mask and searches again (`goto redo`) while CPUs remain. Without it, under
/// lagom's migration contract (a started task stays on its worker unless it opted in), an
/// idle worker that first meets a worker full of started tasks gives up while a task that
/// never ran waits on another.
///
/// A driver starts each attempt with an empty set, searches
/// ([`newidle_imbalance_domains`], [`periodic_imbalance_domains`]) leaving out the set,
/// pulls, and calls [`PinnedCpus::redo`] with the pull's outcome; when a search finds
/// nothing, [`PinnedCpus::nothing_found`] is the attempt's outcome.
///
/// Difference: the kernel redoes within one domain and starts the next domain with a full
/// mask (where it finds the same CPU pinned again, since pinning depends on the destination
/// only); lagom leaves the CPU out for the rest of the attempt's domain walk: the same
/// answer without taking the locks again.
///
/// ```
/// use lagom_policy::{LbOutcome, PinnedCpus};
/// let mut pinned = PinnedCpus::default();
/// assert!(pinned.redo(1, LbOutcome::AllPinned), "search again without CPU 1");
/// assert!(pinned.contains(1));
/// assert!(!pinned.redo(2, LbOutcome::Failed), "found a task that may come: done");
/// assert_eq!(pinned.nothing_found(), LbOutcome::AllPinned);
/// assert_eq!(PinnedCpus::default().nothing_found(), LbOutcome::Balanced);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PinnedCpus {
    cpus: alloc::vec::Vec<usize>,
}

impl PinnedCpus {
    /// Whether `cpu` was found all pinned in this attempt.
    pub fn contains(&self, cpu: usize) -> bool {
        self.cpus.contains(&cpu)
    }

    /// Leaves `cpu` out of this attempt's next searches.
    pub fn insert(&mut self, cpu: usize) {
        if !self.contains(cpu) {
            self.cpus.push(cpu);
        }
    }

    /// After a pull from `busiest` that ended in `outcome`: whether the attempt searches
    /// again, without `busiest` (only when it was all pinned, LBF_ALL_PINNED). The driver
    /// loops at most once per CPU, since each redo leaves one more out.
    pub fn redo(&mut self, busiest: usize, outcome: LbOutcome) -> bool {
        if outcome != LbOutcome::AllPinned {
            return false;
        }
        self.insert(busiest);
        // No redo (runtime/tests/mutants.sh): the attempt gives up at the first all-pinned CPU.
        #[cfg(lagom_mutant = "lb_all_pinned_no_redo")]
        return false;
        #[cfg(not(lagom_mutant = "lb_all_pinned_no_redo"))]
        true
    }

    /// The outcome of an attempt whose search found nothing (more) to pull:
    /// [`LbOutcome::AllPinned`] when an earlier search's busiest CPU was all pinned, else
    /// [`LbOutcome::Balanced`]. (The kernel's redo that finds no busiest group goes to
    /// `out_balanced`, which resets `nr_balance_failed` as `out_all_pinned` does; lagom
    /// resets it only for the latter, [`failed_after`].)
    pub fn nothing_found(&self) -> LbOutcome {
        if self.cpus.is_empty() {
            LbOutcome::Balanced
        } else {
            LbOutcome::AllPinned
        }
    }
}

/// The kernel's `cache_nice_tries` of a domain level: 0 on SMT, 2 on NUMA levels, 1 on the
/// others ([`MapLevel::params`], `sd_init`).
pub fn cache_nice_tries(level: &MapLevel) -> u32 {
    level.params(1).cache_nice_tries
}

/// Whether `cpu` may use its priority at `level` (the kernel's `sched_use_asym_prio`): the
/// level packs by priority ([`CpuMap::asym_packing`]), and without SMT always, with SMT only
/// within a core or where `cpu`'s whole core is idle (`core_idle`, the kernel's
/// `is_core_idle`).
fn use_asym_prio(map: &CpuMap, level: usize, features: Features, core_idle: bool) -> bool {
    map.asym_packing(level, features)
        && (!map.smt_active() || map.levels()[level].flags.share_cpucapacity || core_idle)
}

/// `task_hot`: whether moving `c` would lose a warm cache. Never within an SMT domain; the
/// next buddy is hot (CACHE_HOT_BUDDY) while the destination has tasks; otherwise hot iff
/// it ran within the migration cost ([`MIGRATION_COST_ALWAYS_HOT`]: always; 0: never).
///
/// ```
/// use lagom_policy::{Candidate, Features, MigrateEnv, MIGRATION_COST, task_hot};
/// let env = MigrateEnv {
///     now: 10_000_000,
///     migration_cost: MIGRATION_COST,
///     smt: false,
///     dst_nr_running: 1,
///     nr_balance_failed: 0,
///     cache_nice_tries: 1,
///     features: Features::DEFAULT,
/// };
/// let c = Candidate {
///     weight: 1024, delayed: false, running: false, allowed: true,
///     next_buddy: false, exec_start: 9_800_000, eligible: true,
/// };
/// assert!(task_hot(&env, c), "ran 0.2 ms ago");
/// assert!(!task_hot(&env, Candidate { exec_start: 9_000_000, ..c }), "1 ms ago");
/// assert!(!task_hot(&MigrateEnv { smt: true, ..env }, c), "SMT siblings share the cache");
/// ```
pub fn task_hot(env: &MigrateEnv, c: Candidate) -> bool {
    if env.smt {
        return false;
    }
    if env.features.is_enabled(Feature::CacheHotBuddy) && env.dst_nr_running > 0 && c.next_buddy {
        return true;
    }
    hot_by_time(env.now, c.exec_start, env.migration_cost)
}

/// `task_hot`'s time test: a task that last ran at `exec_start` is hot at `now` when it ran
/// within `cost` ns (`sysctl_sched_migration_cost`); never with a cost of 0, always with
/// [`MIGRATION_COST_ALWAYS_HOT`] (the kernel's −1).
pub(crate) fn hot_by_time(now: u64, exec_start: u64, cost: u64) -> bool {
    match cost {
        MIGRATION_COST_ALWAYS_HOT => true,
        0 => false,
        cost => (now.wrapping_sub(exec_start) as i64) < cost as i64,
    }
}

/// Whether `c` may move to settle what is `left` of `imb` (the kernel's
/// `can_migrate_task` and the weight test of `detach_tasks`). After moving it, subtract
/// [`moved`] from `left`; stop when `left` is zero.
///
/// In the kernel's order: a delayed entity moves only when load is moved; never one
/// whose affinity forbids the destination, nor the running one; while no attempt of the
/// domain has failed, an entity that is not eligible stays when PLACE_LAG is on and the
/// destination has tasks (it would carry its negative lag there anyway); a cache-hot one
/// ([`task_hot`]) moves only once `nr_balance_failed > cache_nice_tries`; and with
/// [`Migration::Load`] only an entity whose weight fits in what is left — its weight halved
/// for each failed attempt (`detach_tasks`'s `shr_bound(load, nr_balance_failed)`), so that
/// an entity heavier than the imbalance moves once balancing has failed often enough. What
/// it settles ([`moved`]) is its whole weight all the same.
///
/// ```
/// use lagom_policy::{Candidate, Features, Imbalance, MigrateEnv, Migration, can_migrate};
/// let imb = Imbalance { busiest: 1, kind: Migration::Load, amount: 1393 };
/// let env = MigrateEnv {
///     now: 10_000_000, migration_cost: 500_000, smt: false, dst_nr_running: 1,
///     nr_balance_failed: 0, cache_nice_tries: 1, features: Features::DEFAULT,
/// };
/// let nice0 = Candidate {
///     weight: 1024, delayed: false, running: false, allowed: true,
///     next_buddy: false, exec_start: 0, eligible: true,
/// };
/// let nice_m5 = Candidate { weight: 3121, ..nice0 };
/// assert!(can_migrate(&env, &imb, imb.amount, nice0));
/// assert!(!can_migrate(&env, &imb, imb.amount, nice_m5), "too heavy: it would reverse the imbalance");
/// assert!(!can_migrate(&env, &imb, imb.amount, Candidate { running: true, ..nice0 }));
/// let buddy = Candidate { next_buddy: true, ..nice0 };
/// assert!(!can_migrate(&env, &imb, imb.amount, buddy), "cache hot");
/// let failed = MigrateEnv { nr_balance_failed: 2, ..env };
/// assert!(can_migrate(&failed, &imb, imb.amount, buddy), "after cache_nice_tries failures");
/// // A failed attempt halves the weight tested: 3121 >> 2 = 780 fits in 1393.
/// assert!(can_migrate(&failed, &imb, imb.amount, nice_m5));
/// assert!(!can_migrate(&MigrateEnv { nr_balance_failed: 1, ..env }, &imb, imb.amount, nice_m5));
/// ```
pub fn can_migrate(env: &MigrateEnv, imb: &Imbalance, left: u64, c: Candidate) -> bool {
    if left == 0 || !clears_all_pinned(env, imb, c) || c.running {
        return false;
    }
    if task_hot(env, c) && env.nr_balance_failed <= env.cache_nice_tries {
        return false;
    }
    match imb.kind {
        Migration::Task => true,
        Migration::Load => c.weight >> env.nr_balance_failed.min(u64::BITS - 1) <= left,
    }
}

/// Whether [`can_migrate`] examines `c` as far as its affinity test and passes it, which
/// clears the kernel's LBF_ALL_PINNED (`can_migrate_task`, in its order: a delayed entity
/// when not moving load, and an ineligible one while no attempt has failed (PLACE_LAG, a
/// destination with tasks), are turned away before the affinity test and so leave the flag
/// set; a running entity that may come here clears it). [`LbOutcome::of_pull`] makes the
/// pull's outcome of it.
///
/// ```
/// use lagom_policy::{Candidate, Features, Imbalance, MigrateEnv, Migration, clears_all_pinned};
/// let imb = Imbalance { busiest: 1, kind: Migration::Task, amount: 1 };
/// let env = MigrateEnv {
///     now: 0, migration_cost: 500_000, smt: false, dst_nr_running: 0,
///     nr_balance_failed: 0, cache_nice_tries: 1, features: Features::DEFAULT,
/// };
/// let c = Candidate {
///     weight: 1024, delayed: false, running: true, allowed: true,
///     next_buddy: false, exec_start: 0, eligible: true,
/// };
/// assert!(clears_all_pinned(&env, &imb, c), "running, but it may come here");
/// assert!(!clears_all_pinned(&env, &imb, Candidate { allowed: false, ..c }));
/// assert!(!clears_all_pinned(&env, &imb, Candidate { delayed: true, ..c }));
/// ```
pub fn clears_all_pinned(env: &MigrateEnv, imb: &Imbalance, c: Candidate) -> bool {
    if c.delayed && imb.kind != Migration::Load {
        return false;
    }
    if env.nr_balance_failed == 0
        && !c.eligible
        && env.features.is_enabled(Feature::PlaceLag)
        && env.dst_nr_running > 0
    {
        return false;
    }
    c.allowed
}

/// What moving `c` settles of `imb`.
pub fn moved(imb: &Imbalance, c: Candidate) -> u64 {
    match imb.kind {
        Migration::Task => 1,
        Migration::Load => c.weight,
    }
}

/// Why [`newidle_imbalance_domains`] pulls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullReason {
    /// From the CPU with the most runnable entities in the lowest domain that has one to
    /// spare.
    Busiest,
    /// ITMT asym packing: this idle CPU is preferred to the source, so it takes the
    /// source's queued work.
    AsymPacking,
}

/// Newly idle balance for CPU `me` over the domains of `map` (the kernel's
/// `sched_balance_newidle` walk): level by level from the bottom (SMT, then the LLC, then
/// package and NUMA), the first level with something to pull decides.
///
/// * With CPU priorities that differ, at a level that packs by priority
///   ([`CpuMap::asym_packing`]: SD_ASYM_PACKING with ITMT on — never x86's SMT level) where
///   `me` may use its priority (`sched_use_asym_prio`: no SMT, or `me`'s whole core is idle): of the
///   less preferred CPUs of the domain with queued work besides their running entity, the
///   least preferred is the source and all its queued work may come (asym packing, which
///   bypasses the load comparison).
/// * Else the CPU of the domain with the most runnable entities, at least two, and up to
///   half the difference to `me`'s count, at least one (the kernel's `migrate_task`
///   imbalance of a group with spare capacity). Pulling more than one helps a CPU that goes
///   idle next to a long queue: it does not come back for each task.
///
/// A running entity alone on its CPU is not pulled here: that is active balance
/// ([`asym_active_balance`]). CPUs in `pinned` are left out: an earlier search of this
/// attempt found them all pinned ([`PinnedCpus`], the kernel's `redo`).
///
/// ```
/// use lagom_policy::{
///     CpuMap, Features, LevelFlags, LoadView, MapLevel, PinnedCpus, PullReason,
///     newidle_imbalance_domains,
/// };
/// // Three CPUs in one LLC, CPU 0 preferred; CPU 1 has 4 runnable, CPU 2 (least preferred) 2.
/// let map = CpuMap::new(
///     vec![30, 20, 10],
///     vec![MapLevel { name: "MC", flags: LevelFlags::MC.with_asym_packing(), spans: vec![0..3] }],
/// )
/// .unwrap();
/// let nr = [0, 4, 2];
/// let view = |i: usize| LoadView { load: 1024 * nr[i] as u64, nr_running: nr[i] };
/// let none = PinnedCpus::default();
/// let (imb, why) = newidle_imbalance_domains(&map, 0, view, Features::DEFAULT, &none).unwrap();
/// assert_eq!((imb.busiest, imb.amount, why), (2, 1, PullReason::AsymPacking));
/// let no_itmt = Features::parse("NO_ITMT").unwrap();
/// let (imb, why) = newidle_imbalance_domains(&map, 0, view, no_itmt, &none).unwrap();
/// assert_eq!((imb.busiest, imb.amount, why), (1, 2, PullReason::Busiest));
/// ```
pub fn newidle_imbalance_domains(
    map: &CpuMap,
    me: usize,
    view: impl Fn(usize) -> LoadView,
    features: Features,
    pinned: &PinnedCpus,
) -> Option<(Imbalance, PullReason)> {
    let itmt = map.has_asym_priority();
    let mine = view(me).nr_running;
    let core_idle = map.smt_siblings(me).all(|s| view(s).nr_running == 0);
    for level in 0..map.levels().len() {
        let span = map.span(level, me);
        if itmt && use_asym_prio(map, level, features, core_idle) {
            // Each CPU's view is read once: a driver's view is a live snapshot, and a second
            // read may see a count that fell below the one the filter accepted (a worker
            // thread died on `nr_running - 1` underflowing when it did).
            let src = span
                .clone()
                .filter(|&i| i != me && !pinned.contains(i) && map.asym_prefer(me, i))
                .map(|i| (i, view(i).nr_running))
                .filter(|&(_, nr)| nr >= 2)
                // The least preferred: lowest priority, ties to the higher index.
                .min_by_key(|&(i, _)| (map.priority(i), core::cmp::Reverse(i)));
            if let Some((src, nr)) = src {
                let imb = Imbalance {
                    busiest: src,
                    kind: Migration::Task,
                    amount: nr as u64 - 1,
                };
                return Some((imb, PullReason::AsymPacking));
            }
        }
        let busiest = span
            .filter(|&i| i != me && !pinned.contains(i))
            .map(|i| (view(i).nr_running, i))
            .max();
        if let Some((nr, b)) = busiest
            && nr >= 2
        {
            let amount = (nr.saturating_sub(mine) / 2).max(1) as u64;
            let imb = Imbalance {
                busiest: b,
                kind: Migration::Task,
                amount,
            };
            return Some((imb, PullReason::Busiest));
        }
    }
    None
}

/// ITMT active balance for the idle CPU `me`: when a newly idle balance found
/// nothing to pull, the least preferred CPU of `me`'s domains that `me` is preferred to
/// (where `me` may use its priority, as [`newidle_imbalance_domains`]) and that runs a single
/// entity, whose running task should move to `me`. `None` with ITMT off, equal priorities,
/// or no such CPU.
///
/// ```
/// use lagom_policy::{CpuMap, Features, LevelFlags, LoadView, MapLevel, asym_active_balance};
/// let map = CpuMap::new(
///     vec![30, 10],
///     vec![MapLevel { name: "MC", flags: LevelFlags::MC.with_asym_packing(), spans: vec![0..2] }],
/// )
/// .unwrap();
/// let one = |i: usize| LoadView { load: 1024 * i as u64, nr_running: i };
/// assert_eq!(asym_active_balance(&map, 0, one, Features::DEFAULT), Some(1));
/// assert_eq!(asym_active_balance(&map, 1, one, Features::DEFAULT), None, "not preferred");
/// let off = Features::parse("NO_ITMT").unwrap();
/// assert_eq!(asym_active_balance(&map, 0, one, off), None);
/// ```
pub fn asym_active_balance(
    map: &CpuMap,
    me: usize,
    view: impl Fn(usize) -> LoadView,
    features: Features,
) -> Option<usize> {
    if !map.has_asym_priority() {
        return None;
    }
    let core_idle = map.smt_siblings(me).all(|s| view(s).nr_running == 0);
    let mut best = None;
    for level in 0..map.levels().len() {
        if !use_asym_prio(map, level, features, core_idle) {
            continue;
        }
        best = map
            .span(level, me)
            .filter(|&i| i != me && map.asym_prefer(me, i) && view(i).nr_running == 1)
            .min_by_key(|&i| (map.priority(i), core::cmp::Reverse(i)))
            .or(best);
        if best.is_some() {
            break;
        }
    }
    best
}

/// What a driver knows where it could carry out a pending ITMT active-balance request
/// ([`asym_active_balance`]) for a task: at the task's next schedule point on the source,
/// and again at the move once it is switched out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActivePush {
    /// The request names this task (the one that ran alone on the source when it was made).
    pub named: bool,
    /// The task is still the source's: queued there, alone (at the schedule point) or not
    /// running (at the move).
    pub on_src: bool,
    /// The task may run on the requesting CPU (its affinity and, in the threaded runtime,
    /// the migration contract).
    pub allowed: bool,
    /// The requesting CPU is still idle ([`CpuView::idle`](super::CpuView): nothing runs
    /// or is queued there, nothing waits on its wakelist). Read only under
    /// `ACTIVE_BALANCE_RECHECK`.
    pub dst_idle: bool,
}

/// Whether a pending ITMT active-balance request may be carried out: the task it names is still
/// the source's and may go to the CPU that asked. By default *not* whether that CPU is still
/// idle: the kernel's `active_load_balance_cpu_stop` re-checks only that the source still has
/// the task to move and `can_migrate_task` (with the destination counted idle), so a task woken
/// onto the preferred CPU while the stopper's move was pending ends up sharing it with the
/// moved one (the part of the preferred-core stall that ITMT makes, which NO_DELAY_DEQUEUE
/// leaves). Under lagom's `ACTIVE_BALANCE_RECHECK` that CPU must still be idle: a request it
/// outlived is dropped (the task stays where it runs; a later newly idle balance or nohz kick
/// may ask again).
///
/// ```
/// use lagom_policy::{ActivePush, Features, may_active_push};
/// let f = Features::DEFAULT;
/// let p = ActivePush { named: true, on_src: true, allowed: true, dst_idle: true };
/// assert!(may_active_push(f, p));
/// assert!(!may_active_push(f, ActivePush { on_src: false, ..p }), "it blocked or moved");
/// assert!(!may_active_push(f, ActivePush { allowed: false, ..p }), "affinity");
/// let busy = ActivePush { dst_idle: false, ..p };
/// assert!(may_active_push(f, busy), "the kernel's stopper does not re-check");
/// let recheck = Features::parse("ACTIVE_BALANCE_RECHECK").unwrap();
/// assert!(!may_active_push(recheck, busy), "a wakeup made the asker busy meanwhile");
/// assert!(may_active_push(recheck, p));
/// ```
pub fn may_active_push(features: Features, p: ActivePush) -> bool {
    // The recheck read and ignored (runtime/tests/mutants.sh).
    #[cfg(lagom_mutant = "active_balance_no_recheck")]
    let recheck = {
        let _ = features;
        false
    };
    #[cfg(not(lagom_mutant = "active_balance_no_recheck"))]
    let recheck = features.is_enabled(Feature::ActiveBalanceRecheck);
    p.named && p.on_src && p.allowed && (p.dst_idle || !recheck)
}

/// Whether an idle CPU's ITMT active-balance request for the task running alone on the
/// busiest CPU is made (the kernel's `sched_balance_rq`, under the busiest runqueue's lock,
/// once `need_active_balance` said yes): not when that task may not run on the asking CPU
/// (`allowed`: its affinity and, in the threaded runtime, the migration contract — the
/// kernel's test of `busiest->curr->cpus_ptr`, which a `migrate_disable`d task narrows to
/// its CPU), and not while an earlier request for the same running task is pending
/// (`pending`: the kernel sets `busiest->active_balance` and `push_cpu` only when no
/// stopper work is queued, so the first asker wins and later ones leave it alone).
///
/// A request is pending in lagom while it names the task that still runs there: lagom has
/// no stopper that always runs and clears the flag, and a request whose task has since
/// blocked, moved or exited is stale, so a new asker may replace it.
///
/// ```
/// use lagom_policy::active_request_made;
/// assert!(active_request_made(true, false));
/// assert!(!active_request_made(false, false), "the task may not run on the asker");
/// assert!(!active_request_made(true, true), "the first asker's request stands");
/// ```
pub fn active_request_made(allowed: bool, pending: bool) -> bool {
    // The last asker overwrites (runtime/tests/mutants.sh).
    if cfg!(lagom_mutant = "active_request_last_wins") {
        return allowed;
    }
    allowed && !pending
}
