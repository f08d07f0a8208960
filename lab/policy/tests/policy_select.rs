//! Placement decisions over topologies, through the pure policy: the workers' layout from a
//! `Topology` (recorded fixtures and synthetic trees), `select_task_rq_fair` (wake_affine,
//! select_idle_sibling, fork placement, WAKE_PREFER_RANK, SIS_UTIL), `ttwu_queue_cond`, and a
//! property test that no choice ever leaves the task's affinity.

mod policy_util;
#[path = "../../topology/tests/topology_util/mod.rs"]
mod topology_util;

use lagom_policy::{
    CpuMap, CpuView, Features, LevelFlags, MapLevel, Placement, WakeCtx, WakeFlags, select_task_rq,
    sis_util_scan, ttwu_queue_cond,
};
use lagom_topology::Topology;
use policy_util::Rng;
use topology_util::synthetic::ryzen_7950x;

/// The worker order and CPU map a runtime (or the simulator) builds on `cpus` of `topo`.
fn layout(topo: &Topology, cpus: &[usize]) -> (Vec<usize>, CpuMap) {
    let l = lagom_topology::layout(topo, cpus, &[]);
    (l.cpus, l.map)
}

const IDLE: CpuView = CpuView {
    idle: true,
    nr_running: 0,
    load: 0,
};

fn busy(n: usize) -> CpuView {
    CpuView {
        idle: false,
        nr_running: n,
        load: 1024 * n as u64,
    }
}

/// `n` CPUs in LLCs of `llc` CPUs each (no SMT), priorities as given.
fn llcs(n: usize, llc: usize, priority: Vec<u32>) -> CpuMap {
    CpuMap::new(
        priority,
        vec![MapLevel {
            name: "MC",
            flags: LevelFlags::MC,
            spans: (0..n).step_by(llc).map(|s| s..(s + llc).min(n)).collect(),
        }],
    )
    .unwrap()
}

/// A wakeup of task 1 (free to run anywhere) that last ran on `prev`, from `waker`.
fn wake(prev: usize, waker: Option<usize>) -> WakeCtx {
    WakeCtx::wakeup(prev, waker, usize::MAX, 1)
}

/// A fork from `parent`'s CPU, free to run anywhere.
fn fork(parent: usize) -> WakeCtx {
    WakeCtx::fork(parent, usize::MAX)
}

/// `select_task_rq` with no waker record, as (CPU, how).
fn sel(
    map: &CpuMap,
    view: impl Fn(usize) -> CpuView,
    allowed: impl Fn(usize) -> bool,
    f: Features,
    ctx: WakeCtx,
) -> (usize, Placement) {
    let s = select_task_rq(map, view, allowed, f, ctx, None);
    (s.cpu, s.how)
}

/// The synthetic Ryzen 7950X: workers are ordered SMT siblings first (CPU n, then n+16),
/// and the map has SMT, MC (one CCD each) and a top level; CPU 6 carries the top rank.
#[test]
fn ryzen_layout_puts_siblings_and_ccds_together() {
    let tree = ryzen_7950x();
    let topo = Topology::from_sysfs(tree.root()).unwrap();
    let cpus: Vec<usize> = topo.allowed_cpus().iter().collect();
    let (order, map) = layout(&topo, &cpus);
    assert_eq!(order.len(), 32);
    assert_eq!(&order[..4], &[0, 16, 1, 17], "siblings adjacent");
    for w in 0..32 {
        let sib = map.smt_siblings(w);
        assert_eq!(sib.len(), 2, "worker {w}");
        assert_eq!(order[sib.start] % 16, order[sib.start + 1] % 16);
        let llc = map.llc(w);
        assert_eq!(llc.len(), 16, "one CCD of 8 cores, 16 threads");
        let ccd = |c: usize| (c % 16) / 8;
        assert!(llc.clone().all(|x| ccd(order[x]) == ccd(order[w])));
    }
    let names: Vec<&str> = map.levels().iter().map(|l| l.name).collect();
    assert_eq!(names.first(), Some(&"SMT"));
    assert!(names.contains(&"MC"), "{names:?}");
    let w6 = order.iter().position(|&c| c == 6).unwrap();
    assert!((0..32).all(|w| w == w6 || map.priority(w) <= map.priority(w6)));
    assert!(map.has_asym_priority());
}

/// Every recorded tree: the layout covers the allowed CPUs once, every span of every level
/// is a run of workers whose CPUs the topology puts in one domain, and SMT siblings are
/// adjacent.
#[test]
fn recorded_layouts_are_contiguous_and_faithful() {
    let Some(dir) = topology_util::fixtures_dir() else {
        return;
    };
    let mut checked = 0;
    for fx in topology_util::all_fixtures(&dir) {
        let Ok(topo) = Topology::from_sysfs(fx.root.to_str().unwrap()) else {
            continue;
        };
        let cpus: Vec<usize> = topo.allowed_cpus().iter().collect();
        if cpus.is_empty() {
            continue;
        }
        let (order, map) = layout(&topo, &cpus);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, cpus, "{}", fx.name);
        for w in 0..order.len() {
            let cpu = topo.cpu(order[w]).unwrap();
            let core = &topo.cores()[cpu.core];
            for s in map.smt_siblings(w) {
                assert!(core.contains(order[s]), "{}: worker {w}", fx.name);
            }
            // Where the topology knows the LLC, the map's is within it (an LLC cut at a NUMA
            // node boundary, as x86 does for SNC, is smaller).
            if let Some(llc) = topo.llc(order[w]) {
                for s in map.llc(w) {
                    assert!(
                        llc.contains(order[s]),
                        "{}: workers {w} and {s} share no LLC",
                        fx.name
                    );
                }
            }
        }
        checked += 1;
    }
    assert!(checked > 5, "only {checked} fixtures read");
}

/// An idle CPU in the target's LLC is chosen before an idle one across it, on every
/// recorded machine with more than one LLC.
#[test]
fn idle_sibling_in_the_llc_beats_one_across_it_on_recorded_machines() {
    let Some(dir) = topology_util::fixtures_dir() else {
        return;
    };
    let mut checked = 0;
    for fx in topology_util::all_fixtures(&dir) {
        let Ok(topo) = Topology::from_sysfs(fx.root.to_str().unwrap()) else {
            continue;
        };
        let cpus: Vec<usize> = topo.allowed_cpus().iter().collect();
        let (_, map) = layout(&topo, &cpus);
        let n = map.len();
        // Worker 0's LLC must hold at least 3 workers, and some worker lie outside it.
        let llc = map.llc(0);
        if llc.len() < 3 || llc.end >= n {
            continue;
        }
        let inside = llc.end - 1;
        let outside = llc.end;
        let view = |i: usize| {
            if i == inside || i == outside {
                IDLE
            } else {
                busy(2)
            }
        };
        // Without SIS_UTIL: an LLC this busy would not be scanned at all.
        let f = Features::DEFAULT.apply("NO_SIS_UTIL").unwrap();
        let (cpu, how) = sel(&map, view, |_| true, f, wake(1, Some(0)));
        assert_eq!(cpu, inside, "{}", fx.name);
        assert_eq!(how, Placement::IdleSibling);
        checked += 1;
    }
    assert!(checked > 3, "only {checked} fixtures with several LLCs");
}

/// wake_affine: an idle waker CPU in the previous CPU's LLC takes the wakee when the previous
/// CPU is busy; a busy waker loses to an idle previous CPU; WF_SYNC with the waker alone on
/// its CPU hands the wakee to it even across LLCs.
#[test]
fn wake_affine_rules() {
    let map = llcs(4, 2, vec![0; 4]);
    let f = Features::DEFAULT.apply("NO_SIS_UTIL").unwrap();
    // Waker 0 idle (it is not: a waker runs; but an idle CPU — a timer's — can wake).
    let v = |i: usize| if i == 0 { IDLE } else { busy(3) };
    assert_eq!(
        sel(&map, v, |_| true, f, wake(1, Some(0))),
        (0, Placement::Affine)
    );
    let v = |i: usize| if i == 2 { IDLE } else { busy(1) };
    assert_eq!(
        sel(&map, v, |_| true, f, wake(2, Some(0))),
        (2, Placement::Prev)
    );
    // Both busy, waker alone on CPU 0, previous CPU 2 (other LLC) has 2.
    let v = |i: usize| busy(if i == 0 { 1 } else { 2 });
    let sync = WakeCtx {
        flags: WakeFlags::TTWU | WakeFlags::SYNC,
        ..wake(2, Some(0))
    };
    assert_eq!(sel(&map, v, |_| true, f, sync), (0, Placement::Affine));
    // Without WF_SYNC the weight test: 1 + 1 on the waker's CPU is not lighter than 2 on
    // the previous one with the bias towards it.
    let v = |_: usize| busy(2);
    assert_eq!(
        sel(&map, v, |_| true, f, wake(2, Some(0))),
        (2, Placement::Prev)
    );
}

/// A spawn goes to the idlest allowed CPU, not the parent's, and an idle core before the
/// idle sibling of a busy one.
#[test]
fn fork_goes_to_the_idlest_cpu() {
    let map = llcs(4, 4, vec![0; 4]);
    let v = |i: usize| if i == 0 { busy(1) } else { busy(2) };
    let v2 = |i: usize| if i == 3 { IDLE } else { v(i) };
    assert_eq!(
        sel(&map, v2, |_| true, Features::DEFAULT, fork(0)),
        (3, Placement::ForkIdlest)
    );
    // Everything busy: the least loaded, which is the parent's here.
    assert_eq!(sel(&map, v, |_| true, Features::DEFAULT, fork(0)).0, 0);
    // Not an allowed one: CPU 3 is idle but forbidden.
    assert_ne!(sel(&map, v2, |i| i != 3, Features::DEFAULT, fork(0)).0, 3);
    // Two cores of two threads, another LLC of two: the parent runs on CPU 0; CPU 1 (its
    // sibling) is idle, and so is the whole core 2–3: the idle core wins.
    let smt = CpuMap::new(
        vec![0; 6],
        vec![
            MapLevel {
                name: "SMT",
                flags: LevelFlags::SMT,
                spans: vec![0..2, 2..4, 4..5, 5..6],
            },
            MapLevel {
                name: "MC",
                flags: LevelFlags::MC,
                spans: vec![0..4, 4..6],
            },
        ],
    )
    .unwrap();
    let v = |i: usize| match i {
        0 | 4 | 5 => busy(1),
        _ => IDLE,
    };
    let (cpu, _) = sel(&smt, v, |_| true, Features::DEFAULT, fork(0));
    assert!(cpu == 2 || cpu == 3, "{cpu}");
}

/// WAKE_PREFER_RANK: of two idle CPUs the scan finds, the higher-ranked wins; without it
/// the first in scan order (after the target) does.
#[test]
fn wake_prefer_rank_breaks_ties_by_priority() {
    let map = llcs(4, 4, vec![10, 10, 5, 50]);
    let v = |i: usize| if i == 2 || i == 3 { IDLE } else { busy(2) };
    let f = Features::DEFAULT;
    assert_eq!(
        sel(&map, v, |_| true, f, wake(1, None)),
        (2, Placement::IdleSibling)
    );
    let r = f.apply("WAKE_PREFER_RANK").unwrap();
    assert_eq!(
        sel(&map, v, |_| true, r, wake(1, None)),
        (3, Placement::IdleSibling)
    );
    // Equal ranks tie to the lower index, after the scan order's first.
    let map = llcs(4, 4, vec![10, 10, 50, 50]);
    assert_eq!(sel(&map, v, |_| true, r, wake(1, None)).0, 2);
}

/// SIS_UTIL bounds the scan: in a 16-CPU LLC with 15 busy CPUs the idle one is found only
/// without it.
#[test]
fn sis_util_bounds_the_idle_scan() {
    assert_eq!(sis_util_scan(16, 15), 0);
    let map = llcs(16, 16, vec![0; 16]);
    let v = |i: usize| if i == 9 { IDLE } else { busy(2) };
    let f = Features::DEFAULT;
    assert_eq!(sel(&map, v, |_| true, f, wake(1, None)).0, 1);
    let no = f.apply("NO_SIS_UTIL").unwrap();
    assert_eq!(sel(&map, v, |_| true, no, wake(1, None)).0, 9);
}

/// The recently used CPU: idle, in the target's LLC, allowed — chosen after target and
/// previous CPU.
#[test]
fn recent_used_cpu_is_tried_before_the_scan() {
    let map = llcs(8, 8, vec![0; 8]);
    let v = |i: usize| if i == 2 || i == 6 { IDLE } else { busy(2) };
    let ctx = WakeCtx {
        recent: Some(6),
        ..wake(1, None)
    };
    assert_eq!(
        sel(&map, v, |_| true, Features::DEFAULT, ctx),
        (6, Placement::IdleSibling)
    );
}

/// `ttwu_queue_cond` on the Ryzen's layout: a remote wakeup inside an LLC to a busy CPU
/// takes the lock, across LLCs the wakelist, to an idle CPU the wakelist; with
/// TTWU_QUEUE_DEFAULT the wakelist always; with NO_TTWU_QUEUE never.
#[test]
fn ttwu_queue_cond_on_a_recorded_layout() {
    let tree = ryzen_7950x();
    let topo = Topology::from_sysfs(tree.root()).unwrap();
    let cpus: Vec<usize> = topo.allowed_cpus().iter().collect();
    let (_, map) = layout(&topo, &cpus);
    let f = Features::DEFAULT;
    let (a, same, other) = (0, 5, 20);
    assert!(map.share_llc(a, same) && !map.share_llc(a, other));
    assert!(!ttwu_queue_cond(&map, f, Some(a), same, 1));
    assert!(ttwu_queue_cond(&map, f, Some(a), same, 0));
    assert!(ttwu_queue_cond(&map, f, Some(a), other, 3));
    assert!(ttwu_queue_cond(&map, f, None, same, 3), "an outside waker");
    assert!(
        !ttwu_queue_cond(&map, f, Some(a), a, 0),
        "the waker's own CPU"
    );
    let def = f.apply("TTWU_QUEUE_DEFAULT").unwrap();
    assert!(ttwu_queue_cond(&map, def, Some(a), same, 1));
    assert!(ttwu_queue_cond(&map, def, Some(a), other, 3));
    let off = f.apply("NO_TTWU_QUEUE").unwrap();
    assert!(!ttwu_queue_cond(&map, off, Some(a), other, 3));
}

/// A random nesting of levels over `n` CPUs: SMT pairs sometimes, then LLC groups, then
/// packages.
fn random_map(rng: &mut Rng) -> CpuMap {
    let n = rng.range(1, 40) as usize;
    let mut levels = Vec::new();
    let mut bounds: Vec<usize> = (0..=n).collect();
    let smt = rng.chance(50);
    for (name, is_smt, llc) in [
        ("SMT", true, true),
        ("MC", false, true),
        ("PKG", false, false),
    ] {
        if is_smt && !smt {
            continue;
        }
        // Keep each boundary with some chance (0 and n always).
        let keep = if is_smt { 50 } else { 40 };
        bounds = bounds
            .iter()
            .copied()
            .enumerate()
            .filter(|&(i, b)| b == 0 || b == n || (is_smt && i % 2 == 0) || rng.chance(keep))
            .map(|(_, b)| b)
            .collect();
        if is_smt {
            // Pairs (or a single CPU at the end).
            bounds = (0..n).step_by(2).chain([n]).collect();
        }
        let spans = bounds.windows(2).map(|w| w[0]..w[1]).collect();
        levels.push(MapLevel {
            name,
            flags: if is_smt {
                LevelFlags::SMT
            } else if llc {
                LevelFlags::MC.with_asym_packing()
            } else {
                LevelFlags::PKG.with_asym_packing()
            },
            spans,
        });
    }
    let prio = (0..n).map(|_| rng.range(0, 4) as u32).collect();
    CpuMap::new(prio, levels).expect("random levels nest")
}

/// Over random topologies, CPU states, affinities, flags and features: the chosen CPU is
/// always allowed.
#[test]
fn no_choice_ever_leaves_the_affinity() {
    let mut rng = Rng::new(18);
    for round in 0..20_000 {
        let map = random_map(&mut rng);
        let n = map.len();
        let views: Vec<CpuView> = (0..n)
            .map(|_| {
                let nr = rng.range(0, 4) as usize;
                CpuView::of(nr, 1024 * nr as u64, false)
            })
            .collect();
        let mut allowed: Vec<bool> = (0..n).map(|_| rng.chance(30)).collect();
        let one = rng.range(0, n as u64) as usize;
        allowed[one] = true;
        let mut f = Features::DEFAULT;
        policy_util::toggle_features(&mut f, &mut rng, 30);
        f = f.with(lagom_policy::Feature::WakePreferRank, rng.chance(50));
        f = f.with(lagom_policy::Feature::SisUtil, rng.chance(50));
        let flags = match rng.range(0, 3) {
            0 => WakeFlags::FORK,
            1 => WakeFlags::TTWU | WakeFlags::SYNC,
            _ => WakeFlags::TTWU,
        };
        let ctx = WakeCtx {
            prev: rng.range(0, n as u64) as usize,
            waker: rng.chance(70).then(|| rng.range(0, n as u64) as usize),
            recent: rng.chance(50).then(|| rng.range(0, n as u64) as usize),
            flags,
            nr_allowed: allowed.iter().filter(|&&a| a).count(),
            wakee: 1,
            wakee_flips: rng.range(0, 100) as u32,
            now: rng.range(0, 4_000_000_000),
        };
        let mut waker = lagom_policy::WakeeState {
            flips: rng.range(0, 100) as u32,
            decay_ts: 0,
            last: 0,
        };
        let s = select_task_rq(&map, |i| views[i], |i| allowed[i], f, ctx, Some(&mut waker));
        assert!(
            s.cpu < n && allowed[s.cpu],
            "round {round}: {} not allowed, {ctx:?}, {map:?}",
            s.cpu
        );
        // A task pinned to its previous CPU (the migration contract) stays there.
        let pinned = WakeCtx {
            nr_allowed: 1,
            ..ctx
        };
        let s = select_task_rq(&map, |i| views[i], |i| i == ctx.prev, f, pinned, None);
        assert_eq!(
            (s.cpu, s.how, s.flags),
            (ctx.prev, Placement::Prev, WakeFlags::NONE)
        );
    }
}

/// A delayed wakee on a busy CPU with an idle allowed CPU in its LLC: moved (dequeued for
/// CPU selection) under DELAYED_WAKE_IDLE and TTWU_DEQUEUE, requeued in place by default;
/// DELAYED_WAKE_IDLE keeps it in place when its CPU would run it next, when no CPU is idle,
/// and when it is cache hot and the wait is shorter than the migration cost.
#[test]
fn delayed_wakee_moves_only_under_its_features() {
    use lagom_policy::{DelayedWake, DelayedWakeView, MIGRATION_COST, delayed_wake};
    let stall = DelayedWakeView {
        hot: true,
        runs_next: false,
        wait: 3 * MIGRATION_COST,
        idle_elsewhere: true,
        migration_cost: MIGRATION_COST,
    };
    let d = Features::DEFAULT;
    let idle = d.apply("DELAYED_WAKE_IDLE").unwrap();
    let deq = d.apply("TTWU_DEQUEUE").unwrap();
    assert_eq!(delayed_wake(d, stall), DelayedWake::InPlace);
    assert_eq!(delayed_wake(idle, stall), DelayedWake::Dequeue);
    assert_eq!(delayed_wake(deq, stall), DelayedWake::Dequeue);
    for keep in [
        DelayedWakeView {
            runs_next: true,
            wait: 0,
            ..stall
        },
        DelayedWakeView {
            idle_elsewhere: false,
            ..stall
        },
        DelayedWakeView {
            wait: MIGRATION_COST / 2,
            ..stall
        },
    ] {
        assert_eq!(delayed_wake(idle, keep), DelayedWake::InPlace, "{keep:?}");
        assert_eq!(delayed_wake(deq, keep), DelayedWake::Dequeue, "{keep:?}");
    }
    // Not hot: a short wait does not keep it.
    let cold = DelayedWakeView {
        hot: false,
        wait: MIGRATION_COST / 2,
        ..stall
    };
    assert_eq!(delayed_wake(idle, cold), DelayedWake::Dequeue);
}

/// `DelayedWakeView::of` on a real runqueue: a delayed wakee that is not eligible waits at
/// least until the average reaches it, however little is left of the running task's
/// protection. A ran 3 ms alone and slept, ineligible, so DELAY_DEQUEUE kept it; B has run
/// 0.45 ms since: A is cache hot and B's protection has 0.25 ms left, but the average is
/// 2.55 ms of B's running from A, so under DELAYED_WAKE_IDLE A is moved, not requeued
/// behind B (which a wait of only the protection would have done).
#[test]
fn an_ineligible_delayed_wakee_waits_until_the_average_reaches_it() {
    use lagom_policy::{
        DelayedWake, DelayedWakeView, DequeueKind, Dequeued, EnqueueFlags, EnqueueKind,
        MIGRATION_COST, Pick, RqConfig, RunQueue, SchedEntity, curr_protection_left, delayed_wake,
    };
    const MS: u64 = 1_000_000;
    let mut rq = RunQueue::new(RqConfig::for_cpus(1));
    let a = rq.enqueue(
        SchedEntity::new(0),
        'a',
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        0,
    );
    assert!(matches!(rq.pick_next(0), Pick::Run(h) if h == a));
    let b = rq.enqueue(
        SchedEntity::new(0),
        'b',
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        0,
    );
    rq.update_curr(3 * MS);
    assert!(matches!(
        rq.dequeue(a, DequeueKind::Sleep, 3 * MS),
        Dequeued::Delayed
    ));
    assert!(matches!(rq.pick_next(3 * MS), Pick::Run(h) if h == b));
    let now = 3 * MS + 450_000;
    rq.update_curr(now);
    assert!(!rq.entity_eligible(a));
    let protection = curr_protection_left(&rq);
    assert!(
        protection < MIGRATION_COST,
        "B's protection left: {protection} ns"
    );
    let v = DelayedWakeView::of(&rq, a, now, true);
    assert!(v.hot, "{v:?}");
    assert!(v.wait > 2 * MS && v.wait == rq.time_to_eligible(a), "{v:?}");
    let idle = Features::DEFAULT.apply("DELAYED_WAKE_IDLE").unwrap();
    assert_eq!(delayed_wake(idle, v), DelayedWake::Dequeue);
    // With only the protection as the wait, it would have stayed behind B.
    let protection_only = DelayedWakeView {
        wait: protection,
        ..v
    };
    assert_eq!(delayed_wake(idle, protection_only), DelayedWake::InPlace);
}

/// ITMT asym packing on the Ryzen: idle CPU 6 (the top rank) pulls the queued work of the
/// least preferred busy CPU of its CCD; with ITMT off it pulls from the busiest; while its
/// SMT sibling is busy, it does not use its priority above the SMT level.
#[test]
fn itmt_asym_packing_pulls_to_the_preferred_cpu() {
    use lagom_policy::{LoadView, PinnedCpus, PullReason, newidle_imbalance_domains};
    let tree = ryzen_7950x();
    let topo = Topology::from_sysfs(tree.root()).unwrap();
    let cpus: Vec<usize> = topo.allowed_cpus().iter().collect();
    let (order, map) = layout(&topo, &cpus);
    let w = |cpu: usize| order.iter().position(|&c| c == cpu).unwrap();
    let (me, low, busiest) = (w(6), w(0), w(5));
    let nr = |i: usize| {
        if i == low {
            2
        } else if i == busiest {
            4
        } else {
            0
        }
    };
    let view = |i: usize| LoadView {
        load: 1024 * nr(i) as u64,
        nr_running: nr(i),
    };
    let (imb, why) =
        newidle_imbalance_domains(&map, me, view, Features::DEFAULT, &PinnedCpus::default())
            .unwrap();
    assert_eq!((imb.busiest, why), (low, PullReason::AsymPacking));
    let off = Features::DEFAULT.apply("NO_ITMT").unwrap();
    let (imb, why) =
        newidle_imbalance_domains(&map, me, view, off, &PinnedCpus::default()).unwrap();
    assert_eq!(
        (imb.busiest, why, imb.amount),
        (busiest, PullReason::Busiest, 2)
    );
    // A busy sibling (CPU 22): priorities are not used above the SMT level.
    let sib = w(22);
    let view2 = |i: usize| LoadView {
        load: 0,
        nr_running: if i == sib { 1 } else { nr(i) },
    };
    let (_, why) =
        newidle_imbalance_domains(&map, me, view2, Features::DEFAULT, &PinnedCpus::default())
            .unwrap();
    assert_eq!(why, PullReason::Busiest);
    // Nothing to spare anywhere (one running each): nothing to pull, ITMT or not (lagom has
    // no active balance).
    let ones = |_: usize| LoadView {
        load: 1024,
        nr_running: 1,
    };
    assert_eq!(
        newidle_imbalance_domains(&map, me, ones, Features::DEFAULT, &PinnedCpus::default()),
        None
    );
}

/// A driver's view is a live snapshot: asym packing reads each CPU's count once, so a count
/// that falls between two reads (here 2, then 0 on every later read) gives a pull of what it
/// saw, never `0 - 1`. (It did read twice, and a worker thread died of the underflow while
/// the source's tasks left it: a runtime test hung under qemu on it.)
#[test]
fn asym_packing_reads_each_count_once() {
    use lagom_policy::{LoadView, PinnedCpus, PullReason, newidle_imbalance_domains};
    use std::cell::Cell;
    let map = CpuMap::new(
        vec![30, 10],
        vec![MapLevel {
            name: "MC",
            flags: LevelFlags::MC.with_asym_packing(),
            spans: core::iter::once(0..2).collect(),
        }],
    )
    .unwrap();
    let reads = Cell::new(0u32);
    let view = |i: usize| {
        if i == 0 {
            return LoadView {
                load: 0,
                nr_running: 0,
            };
        }
        reads.set(reads.get() + 1);
        let nr = if reads.get() == 1 { 2 } else { 0 };
        LoadView {
            load: 1024 * nr as u64,
            nr_running: nr,
        }
    };
    let (imb, why) =
        newidle_imbalance_domains(&map, 0, view, Features::DEFAULT, &PinnedCpus::default())
            .unwrap();
    assert_eq!(
        (imb.busiest, imb.amount, why),
        (1, 1, PullReason::AsymPacking)
    );
}

/// DELAYED_WAKE_IDLE's "hot" is `task_hot`'s time test with the runqueue's configured
/// migration cost, and its "wait" is compared with that cost: A ran until 1 ms and slept,
/// delayed; woken at 1.2 ms it ran 0.2 ms ago. With a cost of 0.1 ms it is cold and moves
/// even for a short wait (it would stay with the kernel's default 0.5 ms); with 0 nothing
/// is hot; with the "always hot" cost it stays unless the wait reaches the cost.
#[test]
fn delayed_wake_idle_uses_the_configured_cost() {
    use lagom_policy::{
        DelayedWake, DelayedWakeView, DequeueKind, Dequeued, EnqueueFlags, EnqueueKind,
        MIGRATION_COST_ALWAYS_HOT, Pick, RqConfig, RunQueue, SchedEntity, delayed_wake,
    };
    let idle = Features::parse("DELAYED_WAKE_IDLE").unwrap();
    let view_at = |cost: u64| {
        let mut cfg = RqConfig::for_cpus(2);
        cfg.migration_cost = cost;
        let mut rq = RunQueue::new(cfg);
        let a = rq.enqueue(
            SchedEntity::new(0),
            'a',
            EnqueueKind::Wakeup,
            EnqueueFlags::NONE,
            0,
        );
        rq.enqueue(
            SchedEntity::new(0),
            'b',
            EnqueueKind::Wakeup,
            EnqueueFlags::NONE,
            0,
        );
        let Pick::Run(first) = rq.pick_next(0) else {
            panic!()
        };
        assert_eq!(first, a, "the first enqueued runs first");
        assert!(matches!(
            rq.dequeue(a, DequeueKind::Sleep, 1_000_000),
            Dequeued::Delayed
        ));
        let _ = rq.pick_next(1_000_000);
        DelayedWakeView::of(&rq, a, 1_200_000, true)
    };
    let v = view_at(100_000);
    assert!(!v.hot && v.migration_cost == 100_000);
    let short = DelayedWakeView { wait: 50_000, ..v };
    assert_eq!(delayed_wake(idle, short), DelayedWake::Dequeue);
    assert!(view_at(500_000).hot, "the default cost: hot");
    assert_eq!(
        delayed_wake(
            idle,
            DelayedWakeView {
                wait: 50_000,
                ..view_at(500_000)
            }
        ),
        DelayedWake::InPlace
    );
    assert!(!view_at(0).hot);
    let always = view_at(MIGRATION_COST_ALWAYS_HOT);
    assert!(always.hot);
    assert_eq!(
        delayed_wake(
            idle,
            DelayedWakeView {
                wait: 3_000_000,
                ..always
            }
        ),
        DelayedWake::InPlace,
        "a wait below the (huge) cost keeps it"
    );
    assert_eq!(
        delayed_wake(
            idle,
            DelayedWakeView {
                wait: MIGRATION_COST_ALWAYS_HOT,
                ..always
            }
        ),
        DelayedWake::Dequeue
    );
}
