//! The CPU map's domain flags, `sd_init` parameters and per-CPU topology answers, on recorded
//! and synthetic machines through `lagom_topology::layout`, each expected value derived from
//! the kernel's rule (Linux v7.1, x86): `build_sched_topology`'s flags, `sd_init`,
//! `highest_flag_domain`, `update_top_cache_domain` (`sd_llc_size`, `sd_share_id`),
//! `sched_asym_prefer`; and the strict priority comparison through the pure balance
//! decisions.

// A domain level that spans every CPU has one span: a `Vec` of one `Range`, as meant.
#![allow(clippy::single_range_in_vec_init)]

#[path = "../../topology/tests/topology_util/mod.rs"]
mod topology_util;

use lagom_policy::{
    CpuMap, Features, LevelFlags, LoadView, MapLevel, PinnedCpus, asym_active_balance,
    newidle_imbalance_domains, nohz_kick_target,
};
use lagom_topology::{DomainFlags, DomainLevel, LevelKind, Topology};
use topology_util::synthetic::{intel_hybrid, ryzen_7950x};

/// The map a runtime builds over every allowed CPU of `topo`, and the worker index of each OS
/// CPU.
fn map_of(topo: &Topology) -> (CpuMap, impl Fn(usize) -> usize) {
    let cpus: Vec<usize> = topo.allowed_cpus().iter().collect();
    let l = lagom_topology::layout(topo, &cpus, &[]);
    let order = l.cpus;
    (l.map, move |cpu: usize| {
        order.iter().position(|&c| c == cpu).unwrap()
    })
}

fn level<'a>(map: &'a CpuMap, name: &str) -> Option<(usize, &'a MapLevel)> {
    map.levels()
        .iter()
        .enumerate()
        .find(|(_, l)| l.name == name)
}

/// The Ryzen 9 7950X (amd-pstate preferred cores, ITMT on): x86 gives SD_ASYM_PACKING to MC
/// (one CCD) and PKG (`x86_core_flags`, `x86_sched_itmt_flags`), never to SMT
/// (`cpu_smt_flags`); the highest level with the flag (`sd_asym_packing`) is PKG, so an
/// ITMT decision may cross the CCDs. Siblings have equal rankings, so neither is preferred.
/// With ITMT off no level packs.
#[test]
fn ryzen_packs_on_mc_and_pkg_not_smt() {
    let tree = ryzen_7950x();
    let topo = Topology::from_sysfs(tree.root()).unwrap();
    let (map, w) = map_of(&topo);
    let names: Vec<&str> = map.levels().iter().map(|l| l.name).collect();
    assert_eq!(names, ["SMT", "MC", "PKG"]);
    let (smt, mc, pkg) = (&map.levels()[0], &map.levels()[1], &map.levels()[2]);
    assert!(smt.flags.share_cpucapacity && smt.flags.share_llc && !smt.flags.asym_packing);
    assert!(mc.flags.share_llc && mc.flags.asym_packing && !mc.flags.share_cpucapacity);
    assert!(!pkg.flags.share_llc && pkg.flags.asym_packing);
    let f = Features::DEFAULT;
    assert_eq!(map.sd_asym_packing(f), Some(2));
    assert!(!map.asym_packing(0, f) && map.asym_packing(1, f) && map.asym_packing(2, f));
    let off = Features::parse("NO_ITMT").unwrap();
    assert_eq!(map.sd_asym_packing(off), None);
    assert!((0..3).all(|l| !map.asym_packing(l, off)));
    // CPU 6 (231) and its sibling 22 (231): neither preferred; CPU 6 over CPU 7 (221).
    assert!(!map.asym_prefer(w(6), w(22)) && !map.asym_prefer(w(22), w(6)));
    assert!(map.asym_prefer(w(6), w(7)) && !map.asym_prefer(w(7), w(6)));
    assert!(map.smt_active());
    // One CCD of 16 threads per LLC: `sd_llc_size`.
    assert_eq!(map.llc_size(w(6)), 16);
    // No cluster: x86's cluster mask (the L2) is the core here, degenerate.
    assert!(!map.cluster_active());
    assert_eq!(map.cluster_span(w(6)), None);
    assert!(map.share_resources(w(0), w(7)) && !map.share_resources(w(0), w(8)));
}

/// `sd_init`'s parameters per level, on the 7950X: SMT (`SD_SHARE_CPUCAPACITY`) 110 and no
/// cache-nice tries; MC (`SD_SHARE_LLC`) 117 and one; PKG (no cache flag) 117 and one;
/// intervals from the span weight (2, 16, 32 CPUs): `min_interval = weight` ms,
/// `max_interval = 2 · weight` ms, `balance_interval = weight` ms, `busy_factor` 16.
#[test]
fn domain_parameters_follow_sd_init() {
    let tree = ryzen_7950x();
    let topo = Topology::from_sysfs(tree.root()).unwrap();
    let (map, w) = map_of(&topo);
    let ms = 1_000_000;
    let p = |l| map.params(l, w(6));
    assert_eq!((p(0).imbalance_pct, p(0).cache_nice_tries), (110, 0));
    assert_eq!((p(1).imbalance_pct, p(1).cache_nice_tries), (117, 1));
    assert_eq!((p(2).imbalance_pct, p(2).cache_nice_tries), (117, 1));
    assert_eq!(
        (p(0).min_interval_ns, p(0).max_interval_ns),
        (2 * ms, 4 * ms)
    );
    assert_eq!(
        (p(1).min_interval_ns, p(1).balance_interval_ns),
        (16 * ms, 16 * ms)
    );
    assert_eq!(p(2).max_interval_ns, 64 * ms);
    assert!((0..3).all(|l| p(l).busy_factor == 16));
    // A NUMA level: two cache-nice tries (`SD_NUMA`), serialized, no prefer-sibling.
    let numa = MapLevel {
        name: "NUMA",
        flags: LevelFlags::NUMA,
        spans: vec![0..4],
    };
    assert_eq!(numa.params(4).cache_nice_tries, 2);
    // `sd_init` on NUMA levels: serialized, no prefer-sibling; beyond the node reclaim
    // distance (30) neither wake-affine nor fork-balanced.
    let numa = |d| {
        let l = DomainLevel {
            kind: LevelKind::Numa,
            flags: DomainFlags {
                numa_distance: Some(d),
                ..DomainFlags::default()
            },
            spans: Vec::new(),
        };
        lagom_topology::level_flags(&l, true)
    };
    assert!(numa(21).serialize && !numa(21).prefer_sibling && numa(21).wake_affine);
    assert_eq!(numa(30), LevelFlags::NUMA, "at the distance: still near");
    assert!(!numa(32).wake_affine && !numa(32).balance_fork && numa(32).serialize);
    assert!(!numa(32).asym_packing, "x86 packs on CLS, MC and PKG only");
}

/// The recorded Raptor Lake (i7-1370P: 6 P-cores with HT, 8 E-cores in two clusters of 4
/// sharing an L2, one L3; CPPC highest_perf 64/67 on P-cores, 39 on E-cores): SMT without
/// SD_ASYM_PACKING, CLS and MC with it (`x86_cluster_flags`, `x86_core_flags`); the
/// E-cores' cluster is their L2 quad, a P-core's cluster is its core (degenerate: no
/// cluster, `sd_share_id` falls back to the LLC); `sched_cluster_active` since some CPU
/// keeps a cluster domain.
#[test]
fn recorded_hybrid_has_clusters_and_packs_above_smt() {
    let Some(dir) = topology_util::fixtures_dir() else {
        return;
    };
    let fx = topology_util::fixture(&dir, "20em64t-hybrid-1p6c2t+2ca4co1t");
    let topo = Topology::from_sysfs(fx.root.to_str().unwrap()).unwrap();
    let (map, w) = map_of(&topo);
    let (_, smt) = level(&map, "SMT").expect("an SMT level");
    let (_, cls) = level(&map, "CLS").expect("a cluster level");
    let (_, mc) = level(&map, "MC").expect("an LLC level");
    assert!(!smt.flags.asym_packing);
    assert!(cls.flags.cluster && cls.flags.asym_packing && cls.flags.share_llc);
    assert!(mc.flags.asym_packing);
    assert!(map.cluster_active());
    let e = |cpu| map.cluster_span(w(cpu)).map(|s| s.len());
    assert_eq!(e(13), Some(4));
    assert_eq!(map.cluster_span(w(13)), map.cluster_span(w(12)));
    assert_eq!(e(0), None, "a P-core's cluster is the core");
    assert!(map.share_resources(w(12), w(15)));
    assert!(!map.share_resources(w(12), w(16)));
    assert!(map.share_resources(w(0), w(2)), "both fall back to the LLC");
    assert!(!map.share_resources(w(0), w(12)));
    assert_eq!(map.llc_size(w(0)), 20);
    // The favoured P-cores (67) over the others (64) over the E-cores (39).
    assert!(map.asym_prefer(w(4), w(0)) && map.asym_prefer(w(0), w(12)));
    assert!(!map.asym_prefer(w(4), w(5)) && !map.asym_prefer(w(12), w(13)));
}

/// The synthetic hybrid (core types only, no CPPC) gives the same cluster answers without
/// the fixtures: E-core clusters 12–15 and 16–19.
#[test]
fn synthetic_hybrid_clusters() {
    let tree = intel_hybrid();
    let topo = Topology::from_sysfs(tree.root()).unwrap();
    let (map, w) = map_of(&topo);
    assert!(map.cluster_active());
    assert_eq!(map.cluster_span(w(13)).map(|s| s.len()), Some(4));
    assert_eq!(map.cluster_span(w(3)), None);
    assert!(map.share_resources(w(12), w(15)) && !map.share_resources(w(15), w(16)));
    let (_, mc) = level(&map, "MC").unwrap();
    assert!(
        mc.flags.asym_packing,
        "core types stand for ITMT priorities"
    );
}

/// The recorded EPYC 7451 (a package holds four NUMA nodes): x86 builds no PKG level there
/// (`x86_has_numa_in_package`); the NUMA levels are `SD_NUMA` and serialized. Priorities are
/// equal, so nothing packs.
#[test]
fn recorded_epyc_has_numa_levels_and_no_pkg() {
    let Some(dir) = topology_util::fixtures_dir() else {
        return;
    };
    let fx = topology_util::fixture(&dir, "x86_64-epyc_7451");
    let topo = Topology::from_sysfs(fx.root.to_str().unwrap()).unwrap();
    let (map, _) = map_of(&topo);
    assert!(level(&map, "PKG").is_none());
    let numa: Vec<&MapLevel> = map.levels().iter().filter(|l| l.name == "NUMA").collect();
    assert!(!numa.is_empty());
    assert!(numa.iter().all(|l| l.flags.numa && l.flags.serialize));
    assert_eq!(map.sd_asym_packing(Features::DEFAULT), None);
    assert_eq!(map.llc_size(0), 6, "a CCX of three cores with two threads");
}

/// An Arm machine's priorities come from `cpu_capacity` (capacity asymmetry, which the kernel
/// handles with SD_ASYM_CPUCAPACITY, not asym packing): no level packs.
#[test]
fn capacity_priorities_do_not_pack() {
    let Some(dir) = topology_util::fixtures_dir() else {
        return;
    };
    let fx = topology_util::fixture(&dir, "nvidia-dgx-gb10");
    let topo = Topology::from_sysfs(fx.root.to_str().unwrap()).unwrap();
    let (map, _) = map_of(&topo);
    assert!(map.has_asym_priority(), "{:?}", topo.priority_source());
    assert_eq!(map.sd_asym_packing(Features::DEFAULT), None);
    // The lab's explicit ranks do pack (they stand for an ITMT platform).
    let cpus: Vec<usize> = topo.allowed_cpus().iter().collect();
    let ranked = lagom_topology::layout(&topo, &cpus, &[(cpus[0], 9999)]);
    assert!(ranked.map.sd_asym_packing(Features::DEFAULT).is_some());
}

/// Two cores of two threads in one LLC that packs by priority, core 0–1 ranked 20, core 2–3
/// ranked 10.
fn smt_map(priority: Vec<u32>) -> CpuMap {
    CpuMap::new(
        priority,
        vec![
            MapLevel {
                name: "SMT",
                flags: LevelFlags::SMT,
                spans: vec![0..2, 2..4],
            },
            MapLevel {
                name: "MC",
                flags: LevelFlags::MC.with_asym_packing(),
                spans: vec![0..4],
            },
        ],
    )
    .unwrap()
}

fn loads(nr: [usize; 4]) -> impl Fn(usize) -> LoadView {
    move |i| LoadView {
        load: 1024 * nr[i] as u64,
        nr_running: nr[i],
    }
}

/// ITMT never acts between equal priorities (`sched_asym_prefer` is a strict `>`; x86's SMT
/// level has no SD_ASYM_PACKING). Priorities [20, 20, 10, 10], SMT pairs (0,1), (2,3): CPU 1
/// runs one task, the rest idle. CPU 0's newly idle balance finds nothing to pull, and asks
/// for no task: at SMT nothing packs; at MC `sched_use_asym_prio(MC, 0)` is false (its
/// sibling is busy) and group {2,3} is idle anyway. CPU 1's tick kicks nobody: CPU 0 is
/// ranked equal. With CPU 1 idle and CPU 3 busy, CPU 0 (whole core idle, 20 > 10) asks for
/// CPU 3's task.
#[test]
fn itmt_ignores_equal_priorities() {
    let map = smt_map(vec![20, 20, 10, 10]);
    let f = Features::DEFAULT;
    let one_on_1 = loads([0, 1, 0, 0]);
    assert_eq!(
        newidle_imbalance_domains(&map, 0, &one_on_1, f, &PinnedCpus::default()),
        None
    );
    assert_eq!(asym_active_balance(&map, 0, &one_on_1, f), None);
    assert_eq!(nohz_kick_target(&map, 1, &one_on_1, f), None);
    let one_on_3 = loads([0, 0, 0, 1]);
    assert_eq!(asym_active_balance(&map, 0, &one_on_3, f), Some(3));
    // The same without SMT: CPUs 0 and 1 are equals, so CPU 0 asks nothing of CPU 1, and
    // CPU 1's tick kicks nobody (the kernel's nohz kick tests `sched_asym(sd, i, cpu)`).
    let flat = CpuMap::new(
        vec![20, 20, 10, 10],
        vec![MapLevel {
            name: "MC",
            flags: LevelFlags::MC.with_asym_packing(),
            spans: vec![0..4],
        }],
    )
    .unwrap();
    assert_eq!(asym_active_balance(&flat, 0, &one_on_1, f), None);
    assert_eq!(nohz_kick_target(&flat, 1, &one_on_1, f), None);
    assert_eq!(asym_active_balance(&flat, 0, &one_on_3, f), Some(3));
}

/// A level without SD_ASYM_PACKING never packs, whatever the priorities: the same map with
/// the flag off everywhere asks for nothing.
#[test]
fn no_packing_without_the_flag() {
    let map = CpuMap::new(
        vec![20, 20, 10, 10],
        vec![
            MapLevel {
                name: "SMT",
                flags: LevelFlags::SMT,
                spans: vec![0..2, 2..4],
            },
            MapLevel {
                name: "MC",
                flags: LevelFlags::MC,
                spans: vec![0..4],
            },
        ],
    )
    .unwrap();
    let f = Features::DEFAULT;
    assert_eq!(asym_active_balance(&map, 0, loads([0, 0, 0, 1]), f), None);
    assert_eq!(map.sd_asym_packing(f), None);
}
