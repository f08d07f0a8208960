//! The simulator's machines: the built-in Ryzen 9 7950X (a sysfs tree in memory) is the
//! topology tests' synthetic tree file for file, and a recorded tree becomes a machine whose
//! virtual CPUs, LLCs and priorities are the topology's.

#[path = "../../topology/tests/topology_util/mod.rs"]
mod topology_util;

use lagom_sim::{Machine, Options, Report, Sim, parse};
use lagom_topology::Topology;
use topology_util::synthetic;

/// The in-memory 7950X reads as the on-disk synthetic one: every CPU, cache, domain,
/// priority, capacity and fallback (only the root's name differs).
#[test]
fn ryzen_in_memory_equals_the_synthetic_tree() {
    let disk = synthetic::ryzen_7950x();
    let from_disk = Topology::from_sysfs(disk.root()).unwrap();
    let m = Machine::named("ryzen-7950x").unwrap();
    let show = |t: &Topology| format!("{t:?}").replace(t.root(), "<root>");
    assert_eq!(show(m.topology()), show(&from_disk));
    assert_eq!(m.cpus(), 32);
    let prio: Vec<u32> = (4..8).map(|c| m.priority(m.index_of(c).unwrap())).collect();
    assert_eq!(prio, [211, 216, 231, 221]);
    assert_eq!(synthetic::RYZEN_RANKINGS[6], 231);
}

/// A recorded 256-CPU tree (IBM POWER, 8 NUMA nodes, 64 L3 groups) as a machine, and one
/// simulated second on it: every CPU busy with its own pinned hog, LLC sharing as the
/// topology says.
#[test]
fn recorded_256_cpu_tree_runs() {
    let Some(dir) = topology_util::fixtures_dir() else {
        return;
    };
    let fx = topology_util::fixture(&dir, "256ppc-8n8s4t");
    let t = Topology::from_sysfs(fx.root.to_str().unwrap()).unwrap();
    let m = Machine::new("256ppc-8n8s4t", t.clone()).unwrap();
    assert_eq!(m.cpus(), 256);
    for (a, b) in [(0, 1), (0, 3), (0, 4), (0, 255), (100, 101)] {
        let (va, vb) = (m.index_of(a).unwrap(), m.index_of(b).unwrap());
        assert_eq!(
            m.share_llc(va, vb),
            t.cpus_share_cache(a, b),
            "CPUs {a} and {b}"
        );
    }
    let s = parse(
        "duration 1s\nresched 100us\ntask hog count=256 cpu=i\n  run 10s\nend\n\
         task tick count=8 cpu=i\n  loop\n    sleep 1ms\n  end\nend\n",
    )
    .unwrap();
    let mut sim = Sim::new(&s, m, Options::of(&s).unwrap()).unwrap();
    sim.run();
    let r = Report::of(&sim);
    assert_eq!(r.elapsed, 1_000_000_000);
    assert!(
        r.cpus.iter().all(|c| c.busy > 990_000_000),
        "every CPU runs its hog"
    );
    let ticks: u64 = r.tasks[256..].iter().map(|t| t.stats.wakeups).sum();
    assert!(
        (7900..=8000).contains(&ticks),
        "8 sleepers wake about every ms: {ticks}"
    );
}

/// The simulator's virtual CPUs and their `CpuMap` are the threaded runtime's workers and map
/// on the same topology (one `layout` function builds both): the worker order, every domain
/// span and every priority, on the 7950X (SMT, two LLCs, rankings) and a recorded NUMA tree.
#[test]
fn virtual_cpus_are_the_workers_of_a_runtime_on_that_machine() {
    let mut machines = vec![Machine::named("ryzen-7950x").unwrap()];
    if let Some(dir) = topology_util::fixtures_dir() {
        let fx = topology_util::fixture(&dir, "x86_64-epyc_7451");
        let t = Topology::from_sysfs(fx.root.to_str().unwrap()).unwrap();
        machines.push(Machine::new("x86_64-epyc_7451", t).unwrap());
    }
    for m in machines {
        // Given in reverse: the order comes from the topology, not from the caller.
        let mut cpus: Vec<usize> = m.topology().allowed_cpus().iter().collect();
        cpus.reverse();
        let lagom_topology::Layout {
            cpus: order, map, ..
        } = lagom_topology::layout(m.topology(), &cpus, &[]);
        let ids: Vec<usize> = (0..m.cpus()).map(|i| m.os_id(i)).collect();
        assert_eq!(ids, order, "{}", m.name());
        assert_eq!(m.cpu_map(), &map, "{}", m.name());
        assert!(map.levels().len() >= 2, "{}: {:?}", m.name(), map.levels());
    }
    let m = Machine::named("ryzen-7950x").unwrap();
    // SMT siblings are neighbours: OS CPUs 0 and 16 are virtual CPUs 0 and 1.
    assert_eq!((m.os_id(0), m.os_id(1)), (0, 16));
    assert_eq!(m.cpu_map().smt_siblings(0), 0..2);
    assert_eq!(m.cpu_map().llc(0), 0..16);
}
