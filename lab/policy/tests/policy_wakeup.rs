//! CPU selection's rules between CPUs, through the pure `select_task_rq` on synthetic and
//! recorded topologies, each expected answer derived in the test's doc from the kernel's
//! rule (Linux v7.1, `kernel/sched/core.c` and `fair.c`): `select_task_rq`
//! (`WF_RQ_SELECTED`), `record_wakee` / `wake_wide`, the `SD_WAKE_AFFINE` domain walk and
//! `wake_affine_weight`'s `imbalance_pct`, `select_idle_sibling` (`recent_used_cpu`,
//! `select_idle_smt`, clusters), `select_idle_cpu` (the budget on allowed CPUs), and the
//! fork's `sched_balance_find_dst_cpu`.

// A domain level that spans every CPU has one span: a `Vec` of one `Range`, as meant.
#![allow(clippy::single_range_in_vec_init)]

#[path = "../../topology/tests/topology_util/mod.rs"]
mod topology_util;

use lagom_policy::{
    CpuMap, CpuView, Features, LevelFlags, MapLevel, Placement, Selection, WakeCtx, WakeFlags,
    WakeeState, select_task_rq,
};
use lagom_topology::Topology;
use topology_util::synthetic::intel_hybrid;

fn view_of(nr: &[usize]) -> impl Fn(usize) -> CpuView + '_ {
    |i| CpuView::of(nr[i], 1024 * nr[i] as u64, false)
}

fn sel(
    map: &CpuMap,
    nr: &[usize],
    allowed: impl Fn(usize) -> bool,
    f: Features,
    ctx: WakeCtx,
) -> Selection {
    select_task_rq(map, view_of(nr), allowed, f, ctx, None)
}

/// Four cores of two threads, (0,1) … (6,7), in one LLC.
fn four_cores() -> CpuMap {
    CpuMap::new(
        vec![0; 8],
        vec![
            MapLevel {
                name: "SMT",
                flags: LevelFlags::SMT,
                spans: vec![0..2, 2..4, 4..6, 6..8],
            },
            MapLevel {
                name: "MC",
                flags: LevelFlags::MC,
                spans: vec![0..8],
            },
        ],
    )
    .unwrap()
}

/// `select_idle_smt(prev)`: 4 cores × 2 threads, CPUs 0, 1, 3, 5, 6, 7 busy, prev 5, woken from
/// outside (target = prev). No core is wholly idle (each has a busy thread), prev shares the
/// target's LLC, so `select_idle_sibling` returns prev's idle sibling 4 before the LLC scan
/// (whose SIS_UTIL budget, `8 − ⌈6²·100²/(8·85²)⌉ = 1`, would only look at CPU 6). With an idle
/// waker on CPU 2 in the LLC, `wake_affine_idle` makes 2 the target, which is idle: 2.
#[test]
fn select_idle_smt_takes_prevs_idle_sibling() {
    let map = four_cores();
    let nr = [1, 1, 0, 1, 0, 1, 1, 1];
    let f = Features::DEFAULT;
    let s = sel(&map, &nr, |_| true, f, WakeCtx::wakeup(5, None, 8, 1));
    assert_eq!((s.cpu, s.how), (4, Placement::IdleSibling));
    let s = sel(&map, &nr, |_| true, f, WakeCtx::wakeup(5, Some(2), 8, 1));
    assert_eq!((s.cpu, s.how), (2, Placement::Affine));
    // Not an allowed sibling: the scan (one CPU, 6, busy) finds nothing: prev.
    let s = sel(&map, &nr, |i| i != 4, f, WakeCtx::wakeup(5, None, 7, 1));
    assert_eq!(s.cpu, 5);
}

/// `select_idle_cpu` spends SIS_UTIL's budget on allowed CPUs only (`cpus = LLC ∩
/// p->cpus_ptr`). An LLC of 12 CPUs, 9 busy: budget `12 − ⌈81·10⁴/(12·7225)⌉ = 2`. Target 0
/// busy; CPUs 1–4 not allowed (1 and 2 idle); CPU 5 allowed and idle: the scan from CPU 1
/// skips 1–4 and visits 5 first: 5. (Counting the forbidden CPUs, the budget ran out at CPU
/// 2 and the target was kept.)
#[test]
fn sis_util_budget_counts_only_allowed_cpus() {
    let map = CpuMap::new(
        vec![0; 12],
        vec![MapLevel {
            name: "MC",
            flags: LevelFlags::MC,
            spans: vec![0..12],
        }],
    )
    .unwrap();
    assert_eq!(lagom_policy::sis_util_scan(12, 9), 2);
    let mut nr = [1; 12];
    for c in [1, 2, 5] {
        nr[c] = 0;
    }
    let allowed = |i: usize| !(1..=4).contains(&i);
    let s = sel(
        &map,
        &nr,
        allowed,
        Features::DEFAULT,
        WakeCtx::wakeup(0, None, 8, 1),
    );
    assert_eq!((s.cpu, s.how), (5, Placement::IdleSibling));
}

/// `recent_used_cpu`: `select_idle_sibling` writes the previous CPU into it only once past
/// its first two answers (an idle target, an idle previous CPU in the LLC); a task that may
/// use one CPU has no selection and keeps it; a fork starts with the parent's CPU.
#[test]
fn recent_used_cpu_updates_only_past_the_early_returns() {
    let map = CpuMap::flat(4);
    let f = Features::DEFAULT;
    // Target (= prev, no waker) idle.
    let s = sel(
        &map,
        &[1, 0, 1, 1],
        |_| true,
        f,
        WakeCtx::wakeup(1, None, 4, 1),
    );
    assert_eq!((s.cpu, s.recent_used_cpu), (1, None));
    // Waker 0 busy, sync, alone: target 0; prev 2 idle in the LLC.
    let sync = WakeCtx {
        flags: WakeFlags::TTWU | WakeFlags::SYNC,
        ..WakeCtx::wakeup(2, Some(0), 4, 1)
    };
    let s = sel(&map, &[1, 1, 0, 1], |_| true, f, sync);
    assert_eq!((s.cpu, s.recent_used_cpu), (2, None));
    // Neither idle: the recent CPU 3 is taken, and prev 1 becomes the recent one.
    let with_recent = WakeCtx {
        recent: Some(3),
        ..WakeCtx::wakeup(1, None, 4, 1)
    };
    let s = sel(&map, &[1, 1, 1, 0], |_| true, f, with_recent);
    assert_eq!((s.cpu, s.recent_used_cpu), (3, Some(1)));
    // One allowed CPU: no selection, nothing written.
    let s = sel(
        &map,
        &[1, 1, 1, 0],
        |i| i == 1,
        f,
        WakeCtx::wakeup(1, None, 1, 1),
    );
    assert_eq!((s.cpu, s.recent_used_cpu), (1, None));
    // A fork from CPU 2.
    let s = sel(&map, &[1, 1, 1, 0], |_| true, f, WakeCtx::fork(2, 4));
    assert_eq!(s.recent_used_cpu, Some(2));
}

/// `select_task_rq`: the fair class's selection runs, and `WF_RQ_SELECTED` is added, only for
/// a task that may use more than one CPU (the kernel's `nr_cpus_allowed > 1 &&
/// !is_migration_disabled`); otherwise the task stays on its CPU.
#[test]
fn rq_selected_only_when_selection_ran() {
    let map = CpuMap::flat(4);
    let nr = [2, 2, 0, 0];
    let f = Features::DEFAULT;
    let s = sel(&map, &nr, |_| true, f, WakeCtx::wakeup(0, Some(1), 4, 1));
    assert!(s.flags.contains(WakeFlags::RQ_SELECTED));
    assert_ne!(s.cpu, 0, "an idle CPU is found");
    let s = sel(&map, &nr, |i| i == 0, f, WakeCtx::wakeup(0, Some(1), 1, 1));
    assert_eq!(
        (s.cpu, s.flags, s.how),
        (0, WakeFlags::NONE, Placement::Prev)
    );
    // A fork of a task pinned to one CPU is not selected either.
    let s = sel(&map, &nr, |i| i == 3, f, WakeCtx::fork(0, 1));
    assert_eq!((s.cpu, s.flags), (3, WakeFlags::NONE));
}

/// Two LLCs of two CPUs joined by a NUMA level with the flags `top` gives.
fn two_nodes(top: LevelFlags) -> CpuMap {
    CpuMap::new(
        vec![0; 4],
        vec![
            MapLevel {
                name: "MC",
                flags: LevelFlags::MC,
                spans: vec![0..2, 2..4],
            },
            MapLevel {
                name: "NUMA",
                flags: top,
                spans: vec![0..4],
            },
        ],
    )
    .unwrap()
}

/// The affine domain is the waker's lowest `SD_WAKE_AFFINE` domain spanning prev. An idle
/// waker on CPU 0 wakes a task whose previous CPU 2, in the other node, is busy (CPU 3 idle).
/// Near nodes: the NUMA domain is wake-affine; `wake_affine_idle` does not move across LLCs
/// from an idle CPU, prev is busy, so `wake_affine_weight` decides: the waker's `(0+1)·100`
/// against prev's `1·(100 + (117−100)/2)`: the waker's CPU 0, idle: 0. Beyond the node
/// reclaim distance the domain is not wake-affine: no affine target, the search stays around
/// prev: its idle neighbour 3.
#[test]
fn far_numa_is_never_wake_affine() {
    let nr = [0, 1, 1, 0];
    let f = Features::DEFAULT;
    let ctx = WakeCtx::wakeup(2, Some(0), 4, 1);
    let s = sel(&two_nodes(LevelFlags::NUMA), &nr, |_| true, f, ctx);
    assert_eq!((s.cpu, s.how), (0, Placement::Affine));
    let s = sel(&two_nodes(LevelFlags::NUMA_FAR), &nr, |_| true, f, ctx);
    assert_eq!((s.cpu, s.how), (3, Placement::IdleSibling));
}

/// `wake_affine_weight` uses the affine domain's `imbalance_pct`: 110 when waker and prev are
/// SMT siblings, 117 across cores. With 20 runnable on the waker's CPU and 20 on prev's, the
/// waker's `(20+1)·100 = 2100` against prev's `20·(100 + 10/2) = 2100` keeps prev (not
/// lighter), against `20·(100 + 17/2) = 2160` takes the waker's CPU.
#[test]
fn wake_affine_weight_uses_the_domains_imbalance_pct() {
    let map = four_cores();
    let mut nr = [1; 8];
    nr[0] = 20;
    nr[1] = 20;
    nr[2] = 20;
    let f = Features::DEFAULT.apply("NO_SIS_UTIL").unwrap();
    let s = sel(&map, &nr, |_| true, f, WakeCtx::wakeup(1, Some(0), 8, 1));
    assert_eq!((s.cpu, s.how), (1, Placement::Prev));
    let s = sel(&map, &nr, |_| true, f, WakeCtx::wakeup(2, Some(0), 8, 1));
    assert_eq!((s.cpu, s.how), (0, Placement::Affine));
}

/// `wake_wide` on the recorded EPYC 7451 (LLCs of 6 CPUs: the factor is 6). An idle waker CPU
/// wakes a task whose previous CPU, in another LLC of the same node, is busy, its LLC
/// otherwise idle. The waker flipped 63 times and records this wakee (a new one: 64); the
/// wakee flips 8: `8 ≥ 6` and `64 ≥ 8·6`: wide, so not affine, and `select_idle_sibling`
/// searches prev's LLC: an idle CPU there. With few flips the wakeup is affine and the idle
/// waker's CPU wins `wake_affine_weight` (`100 < 108`).
#[test]
fn wake_wide_keeps_a_wide_wakee_near_its_previous_cpu() {
    let Some(dir) = topology_util::fixtures_dir() else {
        return;
    };
    let fx = topology_util::fixture(&dir, "x86_64-epyc_7451");
    let topo = Topology::from_sysfs(fx.root.to_str().unwrap()).unwrap();
    let cpus: Vec<usize> = topo.allowed_cpus().iter().collect();
    let map = lagom_topology::layout(&topo, &cpus, &[]).map;
    let n = map.len();
    assert_eq!(map.llc_size(0), 6);
    let waker = 0;
    let prev = map.llc(0).end; // the first CPU of the next LLC
    let level = map.lowest_common_level(waker, prev);
    assert!(map.levels()[level].flags.wake_affine, "same node: near");
    let mut nr = vec![0; n];
    nr[prev] = 1;
    let ctx = WakeCtx {
        wakee_flips: 8,
        now: 1,
        ..WakeCtx::wakeup(prev, Some(waker), n, 7)
    };
    let mut flips = WakeeState {
        flips: 63,
        decay_ts: 1,
        last: 3,
    };
    let s = select_task_rq(
        &map,
        view_of(&nr),
        |_| true,
        Features::DEFAULT,
        ctx,
        Some(&mut flips),
    );
    assert_eq!(
        (flips.flips, flips.last),
        (64, 7),
        "recorded before the test"
    );
    assert!(s.wide);
    assert!(map.llc(prev).contains(&s.cpu) && s.cpu != prev, "{s:?}");
    let mut few = WakeeState::default();
    let s = select_task_rq(
        &map,
        view_of(&nr),
        |_| true,
        Features::DEFAULT,
        ctx,
        Some(&mut few),
    );
    assert!(!s.wide);
    assert_eq!((s.cpu, s.how), (waker, Placement::Affine));
}

/// Clusters (`sched_cluster_active`) on the synthetic hybrid (E-core clusters 12–15 and
/// 16–19, one LLC):
///
/// * target 15 busy (woken from outside, prev 15), idle 12 and 16, no SIS_UTIL: an idle core
///   exists, and `select_idle_cpu` scans the target's cluster first (from 16 wrapping to 12):
///   12, where a plain scan of the LLC from 16 gives 16;
/// * prev 17 idle in the other cluster, a sync waker alone on 13 (the target), 14 idle: prev
///   is not returned early (`!cpus_share_resources(17, 13)`), the cluster scan finds 14;
/// * the same with the LLC nearly full (SIS_UTIL's budget 0): no scan at all, and the
///   remembered prev 17 (`prev_aff`) is the answer.
#[test]
fn clusters_are_searched_first_and_prev_outside_is_a_fallback() {
    let tree = intel_hybrid();
    let topo = Topology::from_sysfs(tree.root()).unwrap();
    let cpus: Vec<usize> = topo.allowed_cpus().iter().collect();
    let l = lagom_topology::layout(&topo, &cpus, &[]);
    assert_eq!(l.cpus, (0..20).collect::<Vec<_>>(), "workers in CPU order");
    let map = l.map;
    assert!(map.cluster_active());
    let no_sis = Features::parse("NO_SIS_UTIL").unwrap();
    let mut nr = [1; 20];
    nr[12] = 0;
    nr[16] = 0;
    let s = sel(
        &map,
        &nr,
        |_| true,
        no_sis,
        WakeCtx::wakeup(15, None, 20, 1),
    );
    assert_eq!(s.cpu, 12);
    let sync = |prev| WakeCtx {
        flags: WakeFlags::TTWU | WakeFlags::SYNC,
        ..WakeCtx::wakeup(prev, Some(13), 20, 1)
    };
    let mut nr = [2; 20];
    nr[13] = 1;
    nr[17] = 0;
    nr[14] = 0;
    let s = sel(&map, &nr, |_| true, no_sis, sync(17));
    assert_eq!(s.cpu, 14);
    assert_eq!(lagom_policy::sis_util_scan(20, 18), 0);
    let s = sel(&map, &nr, |_| true, Features::DEFAULT, sync(17));
    assert_eq!(s.cpu, 17, "prev_aff");
}

/// The same cluster rules on the recorded Raptor Lake (whose E-core clusters are 12–15 and
/// 16–19 too): the target's cluster is scanned first.
#[test]
fn recorded_hybrid_scans_the_cluster_first() {
    let Some(dir) = topology_util::fixtures_dir() else {
        return;
    };
    let fx = topology_util::fixture(&dir, "20em64t-hybrid-1p6c2t+2ca4co1t");
    let topo = Topology::from_sysfs(fx.root.to_str().unwrap()).unwrap();
    let cpus: Vec<usize> = topo.allowed_cpus().iter().collect();
    let l = lagom_topology::layout(&topo, &cpus, &[]);
    let w = |cpu: usize| l.cpus.iter().position(|&c| c == cpu).unwrap();
    let map = l.map;
    let mut nr = vec![1; 20];
    nr[w(12)] = 0;
    nr[w(16)] = 0;
    let no_sis = Features::parse("NO_SIS_UTIL").unwrap();
    let s = sel(
        &map,
        &nr,
        |_| true,
        no_sis,
        WakeCtx::wakeup(w(15), None, 20, 1),
    );
    assert_eq!(s.cpu, w(12));
}

/// The fork's `sched_balance_find_dst_cpu` on two CPUs, each new child counted where it went
/// at once (the kernel activates it under the target's lock before the next fork). From a
/// spawner running on CPU 0 (load 1024): 1 (CPU 1 has spare, CPU 0 is fully busy), 0 (both
/// fully busy, equal loads: stay), 1 (CPU 0 overloaded with 2, CPU 1 fully busy), 0 (2 and 2),
/// 1 (3 against 2: `100·3072 > 117·2048`), 0, 1, 0: four and four. From outside, each spawn
/// starting where the driver's round robin puts it (0, 1, 0, …), every one stays: four and
/// four too.
#[test]
fn a_fork_burst_alternates() {
    let map = CpuMap::flat(2);
    let f = Features::DEFAULT;
    let mut nr = [1usize, 0];
    let mut placed = Vec::new();
    for _ in 0..8 {
        let s = sel(&map, &nr, |_| true, f, WakeCtx::fork(0, 2));
        assert_eq!(s.how, Placement::ForkIdlest);
        nr[s.cpu] += 1;
        placed.push(s.cpu);
    }
    assert_eq!(placed, [1, 0, 1, 0, 1, 0, 1, 0]);
    let mut nr = [0usize, 0];
    let mut placed = Vec::new();
    for k in 0..8 {
        let ctx = WakeCtx {
            waker: None,
            ..WakeCtx::fork(k % 2, 2)
        };
        let s = sel(&map, &nr, |_| true, f, ctx);
        nr[s.cpu] += 1;
        placed.push(s.cpu);
    }
    assert_eq!(nr, [4, 4], "{placed:?}");
}

/// `sched_balance_find_dst_group` between two LLCs of four: the parent's LLC holds 3 tasks
/// (spare capacity, one idle CPU), the other 1 (three idle CPUs): has-spare against
/// has-spare, more idle CPUs win: the other LLC, then its first idle CPU. With both LLCs
/// equally busy the child stays in the parent's.
#[test]
fn a_fork_goes_to_the_group_with_more_idle_cpus() {
    let map = CpuMap::new(
        vec![0; 8],
        vec![
            MapLevel {
                name: "MC",
                flags: LevelFlags::MC,
                spans: vec![0..4, 4..8],
            },
            MapLevel {
                name: "PKG",
                flags: LevelFlags::PKG,
                spans: vec![0..8],
            },
        ],
    )
    .unwrap();
    let f = Features::DEFAULT;
    let s = sel(
        &map,
        &[1, 1, 1, 0, 1, 0, 0, 0],
        |_| true,
        f,
        WakeCtx::fork(0, 8),
    );
    assert_eq!(s.cpu, 5);
    let s = sel(
        &map,
        &[1, 1, 1, 0, 1, 1, 1, 0],
        |_| true,
        f,
        WakeCtx::fork(0, 8),
    );
    assert_eq!(s.cpu, 3);
}
