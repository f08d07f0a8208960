//! The synthetic trees of `topology_util/synthetic.rs`: AMD preferred cores (the 7950X of the
//! preferred-core stall report), a container with a restricted cpuset and offline CPUs, and an
//! Intel hybrid part.

mod topology_util;

use lagom_topology::{CapacitySource, CoreType, CpuSet, LevelKind, PrioritySource, Topology};
use topology_util::synthetic;

fn set(text: &str) -> CpuSet {
    text.parse().unwrap()
}

fn walk(t: &Topology, cpu: usize) -> Vec<String> {
    t.domains(cpu)
        .map(|d| format!("{} {}", d.level.kind.name(), d.span))
        .collect()
}

#[test]
fn ryzen_7950x_prefcore_rankings_of_seed_001() {
    let tree = synthetic::ryzen_7950x();
    let t = Topology::from_sysfs(tree.root()).unwrap();
    assert_eq!(t.fallbacks(), [], "every file is present");
    assert_eq!(t.online_cpus(), &set("0-31"));
    assert_eq!(t.cores().len(), 16);
    assert_eq!(t.smt_width(), 2);
    let l3: Vec<String> = t.cache_spans(3).iter().map(|s| s.to_string()).collect();
    assert_eq!(l3, ["0-7,16-23", "8-15,24-31"]);
    assert_eq!(
        t.caches().iter().find(|c| c.level == 3).unwrap().size,
        Some(32 << 20)
    );

    assert_eq!(t.priority_source(), PrioritySource::AmdPrefcoreRanking);
    let prio = |cpu| t.cpu(cpu).unwrap().priority;
    assert_eq!([prio(4), prio(5), prio(6), prio(7)], [211, 216, 231, 221]);
    assert_eq!(prio(22), 231, "an SMT sibling has its core's ranking");
    assert!(t.has_preferred_cpus());
    // Of the CPUs the report allows (4-7), CPU 6 is the preferred one, though not faster.
    let allowed = Topology::from_sysfs_with_affinity(tree.root(), &set("4-7")).unwrap();
    assert_eq!(allowed.allowed_cpus(), &set("4-7"));
    let best = allowed
        .allowed_cpus()
        .iter()
        .max_by_key(|&c| allowed.cpu(c).unwrap().priority);
    assert_eq!(best, Some(6));
    assert_eq!(t.capacity_source(), CapacitySource::AmdHighestPerf);
    assert!(t.cpus().iter().all(|c| c.capacity == 1024));
    assert!(!t.has_asym_capacity());
    assert_eq!(t.itmt_enabled(), Some(true));

    // CLS (the per-core L2) equals SMT and the die equals the package: both add nothing.
    let kinds: Vec<LevelKind> = t.levels().iter().map(|l| l.kind).collect();
    assert_eq!(kinds, [LevelKind::Smt, LevelKind::Mc, LevelKind::Pkg]);
    assert_eq!(walk(&t, 6), ["SMT 6,22", "MC 0-7,16-23", "PKG 0-31"]);
    assert!(t.levels()[1].flags.share_llc && !t.levels()[2].flags.share_llc);
    // The idle-CPU search: idle CPUs sharing CPU 6's LLC.
    let idle = set("3,9,17,30");
    assert_eq!((t.llc(6).unwrap() & &idle).to_string(), "3,17");
    assert!(t.cpus_share_cache(6, 23) && !t.cpus_share_cache(6, 8));
}

#[test]
fn container_with_restricted_cpuset_and_offline_cpus() {
    // cgroup namespace: the container's own cgroup is the root of the mount.
    let tree = synthetic::container("/", "2-5,7");
    let t = Topology::from_sysfs(tree.root()).unwrap();
    assert_eq!(t.possible_cpus(), &set("0-7"));
    assert_eq!(t.online_cpus(), &set("0-5"));
    assert_eq!(
        t.allowed_cpus(),
        &set("2-5"),
        "offline CPU 7 is not allowed"
    );
    assert_eq!(t.cores().len(), 3);
    assert_eq!(t.cache_spans(3), [&set("0-5")], "offline CPUs leave the L3");
    assert!(t.numa_implicit());
    assert_eq!(t.numa_nodes()[0].cpus, set("0-5"));
    assert!(
        t.fallbacks()
            .iter()
            .any(|f| f.used == "one implicit NUMA node holding every CPU")
    );
    assert_eq!(t.priority_source(), PrioritySource::None);
    assert!(!t.has_preferred_cpus());
    assert!(t.cpu(6).is_none() && t.domains(6).next().is_none());

    // The affinity mask narrows further; one that leaves nothing is ignored and recorded.
    let narrowed = Topology::from_sysfs_with_affinity(tree.root(), &set("0-3")).unwrap();
    assert_eq!(narrowed.allowed_cpus(), &set("2-3"));
    let disjoint = Topology::from_sysfs_with_affinity(tree.root(), &set("6-7")).unwrap();
    assert_eq!(disjoint.allowed_cpus(), &set("2-5"));
    assert!(
        disjoint
            .fallbacks()
            .iter()
            .any(|f| f.missing == "an affinity mask holding an allowed CPU")
    );

    // Without a cgroup namespace, the process's path below the mount is what counts.
    let tree = synthetic::container("/docker/f00d", "1,3");
    let t = Topology::from_sysfs(tree.root()).unwrap();
    assert_eq!(t.allowed_cpus(), &set("1,3"));
}

#[test]
fn intel_hybrid_core_types() {
    let tree = synthetic::intel_hybrid();
    let t = Topology::from_sysfs(tree.root()).unwrap();
    assert_eq!(t.cores().len(), 14);
    assert_eq!(t.smt_width(), 2);
    assert_eq!(t.priority_source(), PrioritySource::HybridCoreType);
    assert_eq!(t.cpu(0).unwrap().core_type, Some(CoreType::Performance));
    assert_eq!(t.cpu(19).unwrap().core_type, Some(CoreType::Efficiency));
    assert!(t.cpu(3).unwrap().priority > t.cpu(12).unwrap().priority);
    assert!(t.has_preferred_cpus());
    assert_eq!(t.capacity_source(), CapacitySource::None);
    assert_eq!(t.itmt_enabled(), None);

    // SMT exists only for P-cores, CLS only for E-cores; both share the LLC.
    assert_eq!(walk(&t, 0), ["SMT 0-1", "MC 0-19"]);
    assert_eq!(walk(&t, 13), ["CLS 12-15", "MC 0-19"]);
    let cls = t
        .levels()
        .iter()
        .find(|l| l.kind == LevelKind::Cluster)
        .unwrap();
    assert_eq!(cls.spans, [set("12-15"), set("16-19")]);
    assert!(cls.flags.share_llc && !cls.flags.share_cpucapacity);
    let l2: Vec<String> = t.cache_spans(2).iter().map(|s| s.to_string()).collect();
    assert_eq!(l2.len(), 8);
    assert_eq!(l2[6..], ["12-15", "16-19"]);
}
