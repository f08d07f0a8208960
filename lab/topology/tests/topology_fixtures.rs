//! Every recorded sysfs tree in the fixtures directory (`topology_util::fixtures_dir`) against
//! its known answer (hwloc's, and util-linux's for the EPYC): PUs, packages, NUMA nodes with
//! their CPUs and distances, L3 and L2 groups as CPU sets, cores, SMT width, clusters, dies,
//! allowed CPUs, the restricted view, and the priorities and capacities.
//!
//! Where lagom deliberately differs from hwloc the comparison says so:
//! * AMD Bulldozer compute units (`64amd64-4s2n4ca2co`): lagom agrees with hwloc (64 cores,
//!   no SMT) — the pair is two integer cores — and shows the shared L2 as a CLS domain.
//! * Restricted snapshots: hwloc's restricted view also keeps packages that hold an allowed
//!   NUMA node but no allowed PU; lagom counts only objects holding an allowed PU (the
//!   `allowed` section's CPU-centric counts, which `hwloc-calc` confirms).

mod topology_util;

use lagom_topology::{CapacitySource, CpuSet, LevelKind, PrioritySource, Topology};
use serde_json::Value;
use std::collections::BTreeMap;

fn set(text: &str) -> CpuSet {
    CpuSet::parse_list(text).unwrap_or_else(|| panic!("bad cpulist {text:?} in expected.json"))
}

fn sets_of(v: &Value) -> Vec<CpuSet> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|g| {
            g.as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_u64().unwrap() as usize)
                .collect()
        })
        .collect()
}

fn sorted(mut v: Vec<CpuSet>) -> Vec<CpuSet> {
    v.sort_by_key(|s| s.first());
    v.dedup();
    v
}

/// Every difference between `topo` and the expected answer `e`.
fn compare(topo: &Topology, e: &Value) -> Vec<String> {
    let mut diffs = Vec::new();
    let mut check = |what: &str, got: String, want: String| {
        if got != want {
            diffs.push(format!("{what}: lagom {got}, expected {want}"));
        }
    };
    check(
        "online CPUs",
        topo.online_cpus().to_string(),
        e["online_cpus"].as_str().unwrap().to_string(),
    );
    check(
        "pus",
        topo.online_cpus().len().to_string(),
        e["pus"].to_string(),
    );
    check(
        "packages",
        topo.packages().len().to_string(),
        e["packages"].to_string(),
    );
    check(
        "numa_nodes",
        topo.numa_nodes().len().to_string(),
        e["numa_nodes"].to_string(),
    );
    let numa_got: Vec<String> = topo
        .numa_nodes()
        .iter()
        .map(|n| format!("{}:{}", n.id, n.cpus))
        .collect();
    let numa_want: Vec<String> = e["numa"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| format!("{}:{}", n["os_index"], n["cpus"].as_str().unwrap()))
        .collect();
    check("numa", format!("{numa_got:?}"), format!("{numa_want:?}"));
    check(
        "implicit numa",
        topo.numa_implicit().to_string(),
        e["numa"][0]["implicit"]
            .as_bool()
            .unwrap_or(false)
            .to_string(),
    );
    let dist_want = match &e["numa_distances"] {
        Value::Null => "unknown".to_string(),
        d => format!("{}", d["matrix"]),
    };
    let dist_got = match topo.numa_distance(topo.numa_nodes()[0].id, topo.numa_nodes()[0].id) {
        None => "unknown".to_string(),
        Some(_) => {
            let rows: Vec<Vec<u32>> = topo
                .numa_nodes()
                .iter()
                .map(|a| {
                    topo.numa_nodes()
                        .iter()
                        .map(|b| topo.numa_distance(a.id, b.id).unwrap())
                        .collect()
                })
                .collect();
            serde_json::to_string(&rows).unwrap()
        }
    };
    check("numa distances", dist_got, dist_want);
    for (level, key) in [(3u8, "l3"), (2, "l2")] {
        let got: Vec<CpuSet> = topo.cache_spans(level).into_iter().cloned().collect();
        check(
            key,
            format!("{:?}", sorted(got)),
            format!("{:?}", sorted(sets_of(&e[key]))),
        );
    }
    check(
        "cores",
        topo.cores().len().to_string(),
        e["cores"].to_string(),
    );
    check("smt", topo.smt_width().to_string(), e["smt"].to_string());
    let mut widths: BTreeMap<String, u64> = BTreeMap::new();
    for core in topo.cores() {
        *widths.entry(core.len().to_string()).or_default() += 1;
    }
    check(
        "smt_widths",
        serde_json::to_string(&widths).unwrap(),
        e["smt_widths"].to_string(),
    );
    if let Some(clusters) = e["sysfs_clusters"].as_array() {
        let got = sorted(topo.clusters().to_vec());
        let want = sorted(clusters.iter().map(|c| set(c.as_str().unwrap())).collect());
        check("clusters", format!("{got:?}"), format!("{want:?}"));
    }
    if let Some(dies) = e["sysfs_dies"].as_array() {
        let got = sorted(topo.dies().to_vec());
        let want = sorted(dies.iter().map(|c| set(c.as_str().unwrap())).collect());
        check("dies", format!("{got:?}"), format!("{want:?}"));
    }
    // hwloc shows a Die only where it differs from its package.
    let dies = topo
        .dies()
        .iter()
        .filter(|d| !topo.packages().contains(d))
        .count();
    check("hwloc dies", dies.to_string(), e["hwloc_dies"].to_string());
    check(
        "allowed_cpus",
        topo.allowed_cpus().to_string(),
        e["allowed_cpus"].as_str().unwrap().to_string(),
    );
    if let Some(a) = e.get("allowed") {
        // The restricted view, counted by objects holding at least one allowed PU.
        let allowed = topo.allowed_cpus();
        let count = |groups: &[CpuSet]| groups.iter().filter(|g| g.intersects(allowed)).count();
        check(
            "allowed pus",
            allowed.len().to_string(),
            a["pus"].to_string(),
        );
        check(
            "allowed packages",
            count(topo.packages()).to_string(),
            a["packages"].to_string(),
        );
        check(
            "allowed cores",
            count(topo.cores()).to_string(),
            a["cores"].to_string(),
        );
        let l3: Vec<CpuSet> = topo
            .cache_spans(3)
            .into_iter()
            .filter(|s| s.intersects(allowed))
            .map(|s| s & allowed)
            .collect();
        check(
            "allowed l3",
            format!("{:?}", sorted(l3)),
            format!("{:?}", sorted(sets_of(&a["l3"]))),
        );
    }
    compare_priorities(topo, e, &mut diffs);
    diffs
}

/// Priorities and capacities against `preferred_core.per_cpu`: CPPC `highest_perf` first,
/// else `cpu_capacity`, else no source (every priority 0, every capacity 1024).
fn compare_priorities(topo: &Topology, e: &Value, diffs: &mut Vec<String>) {
    let per_cpu = &e["preferred_core"]["per_cpu"];
    let value = |cpu: usize, key: &str| per_cpu[cpu.to_string()][key].as_u64();
    let first = topo.cpus()[0].id;
    let (want_src, key) = if value(first, "acpi_cppc_highest_perf").is_some() {
        (
            PrioritySource::AcpiCppcHighestPerf,
            "acpi_cppc_highest_perf",
        )
    } else if value(first, "cpu_capacity").is_some() {
        (PrioritySource::CpuCapacity, "cpu_capacity")
    } else {
        (PrioritySource::None, "")
    };
    if topo.priority_source() != want_src {
        diffs.push(format!(
            "priority source: lagom {:?}, expected {want_src:?}",
            topo.priority_source()
        ));
    }
    let want_cap_src = if value(first, "cpu_capacity").is_some() {
        CapacitySource::CpuCapacity
    } else if value(first, "acpi_cppc_highest_perf").is_some() {
        CapacitySource::AcpiCppcHighestPerf
    } else {
        CapacitySource::None
    };
    if topo.capacity_source() != want_cap_src {
        diffs.push(format!(
            "capacity source: lagom {:?}, expected {want_cap_src:?}",
            topo.capacity_source()
        ));
    }
    for c in topo.cpus() {
        let want = value(c.id, key).unwrap_or(0);
        if u64::from(c.priority) != want {
            diffs.push(format!(
                "CPU {} priority {} expected {want}",
                c.id, c.priority
            ));
        }
        if let Some(cap) = value(c.id, "cpu_capacity")
            && u64::from(c.capacity) != cap
        {
            diffs.push(format!(
                "CPU {} capacity {} expected {cap}",
                c.id, c.capacity
            ));
        }
    }
}

/// Domain invariants every tree must satisfy: each CPU's domains start above itself, grow
/// strictly, nest, and the SHARE_LLC ones stay within its LLC.
fn check_domains(topo: &Topology) -> Vec<String> {
    let mut diffs = Vec::new();
    for c in topo.cpus() {
        let mut below = CpuSet::from_iter([c.id]);
        for d in topo.domains(c.id) {
            if !(below.is_subset(d.span) && below != *d.span) {
                diffs.push(format!(
                    "CPU {}: {} {} does not strictly contain {below}",
                    c.id,
                    d.level.kind.name(),
                    d.span
                ));
            }
            if d.level.flags.share_llc && !d.span.is_subset(topo.llc(c.id).unwrap()) {
                diffs.push(format!("CPU {}: SHARE_LLC {} beyond LLC", c.id, d.span));
            }
            below = d.span.clone();
        }
    }
    diffs
}

#[test]
fn every_fixture_matches_its_known_answer() {
    let Some(dir) = topology_util::fixtures_dir() else {
        return;
    };
    let mut failures = Vec::new();
    let fixtures = topology_util::all_fixtures(&dir);
    assert_eq!(fixtures.len(), 17, "expected the 17 fixtures of the README");
    for f in &fixtures {
        let topo = match Topology::from_sysfs(f.root.to_str().unwrap()) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{}: {e}", f.name));
                continue;
            }
        };
        for d in compare(&topo, &f.expected)
            .into_iter()
            .chain(check_domains(&topo))
        {
            failures.push(format!("{}: {d}", f.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The level kinds of `topo`, bottom-up.
fn kinds(topo: &Topology) -> Vec<&'static str> {
    topo.levels().iter().map(|l| l.kind.name()).collect()
}

#[test]
fn fixture_domains_follow_the_kernel() {
    let Some(dir) = topology_util::fixtures_dir() else {
        return;
    };
    let load = |name: &str| {
        let f = topology_util::fixture(&dir, name);
        (Topology::from_sysfs(f.root.to_str().unwrap()).unwrap(), f)
    };

    // Zen 1: the LLC (a 3-core CCX) is finer than the NUMA node; no distances recorded.
    let (t, _f) = load("x86_64-epyc_7451");
    assert_eq!(kinds(&t), ["SMT", "MC", "NODE", "NUMA"]);
    let walk: Vec<String> = t.domains(0).map(|d| d.span.to_string()).collect();
    assert_eq!(walk, ["0,48", "0-2,48-50", "0-5,48-53", "0-95"]);
    assert_eq!(t.levels()[3].flags.numa_distance, None);
    assert!(t.cpus_share_cache(0, 50) && !t.cpus_share_cache(0, 3));

    // Bulldozer: compute-unit pairs are two cores sharing an L2, i.e. a CLS domain; each
    // package holds two nodes (so no PKG), each node is one L3 (so NODE = MC, dropped).
    let (t, _f) = load("64amd64-4s2n4ca2co");
    assert_eq!(t.smt_width(), 1);
    assert_eq!(kinds(&t), ["CLS", "MC", "NUMA", "NUMA"]);
    assert_eq!(t.domains(0).next().unwrap().span.to_string(), "0-1");

    // Cascade Lake SNC2: two NUMA nodes per L3, so MC is the L3 cut at the node and PKG
    // is dropped (the package holds several nodes).
    let (t, _f) = load("memorysidecaches");
    assert_eq!(kinds(&t), ["SMT", "MC", "NUMA", "NUMA"]);
    let mc = t.domains(0).nth(1).unwrap();
    assert_eq!(mc.level.kind, LevelKind::Mc);
    assert_eq!(*mc.span, t.numa_nodes()[0].cpus);
    let numa: Vec<Option<u32>> = t
        .levels()
        .iter()
        .map(|l| l.flags.numa_distance)
        .filter(Option::is_some)
        .collect();
    assert_eq!(numa, [Some(11), Some(21)]);

    // Kunpeng 920: clusters of 4 inside a 32-CPU L3 per node, 2 nodes per package.
    let (t, _f) = load("128arm-2pa2n8cluster4co");
    let walk: Vec<(&str, String)> = t
        .domains(5)
        .map(|d| (d.level.kind.name(), d.span.to_string()))
        .collect();
    assert_eq!(walk[0], ("CLS", "4-7".to_string()));
    assert_eq!(walk[1], ("MC", "0-31".to_string()));
    assert!(t.levels()[0].flags.share_llc);
    assert!(
        !t.has_preferred_cpus(),
        "cpu_capacity 1024 everywhere is no preference"
    );

    // Raptor Lake hybrid: SMT only on P-cores, CLS only on E-cores; the favoured P-cores
    // (highest_perf 67) rank above the others, E-cores last.
    let (t, _f) = load("20em64t-hybrid-1p6c2t+2ca4co1t");
    let names = |cpu| {
        t.domains(cpu)
            .map(|d| d.level.kind.name())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(0), ["SMT", "MC"]);
    assert_eq!(names(12), ["CLS", "MC"]);
    assert!(t.has_preferred_cpus());
    let best = t.cpus().iter().max_by_key(|c| c.priority).unwrap();
    assert_eq!(best.priority, 67);
    assert!(t.cpu(4).unwrap().priority > t.cpu(0).unwrap().priority);
    assert!(t.cpu(0).unwrap().priority > t.cpu(12).unwrap().priority);
    // Capacities differ (scaled highest_perf) but, with SMT, no level is asym-capacity.
    assert!(t.has_asym_capacity());
    assert!(t.levels().iter().all(|l| !l.flags.asym_cpucapacity));

    // GB10: each cluster is its L3, so (as arm64's cpu_clustergroup_mask rules) there is
    // no CLS level but an MC; big and little cores meet in each: asymmetric capacity.
    let (t, _f) = load("nvidia-dgx-gb10");
    assert_eq!(kinds(&t), ["MC", "PKG"]);
    assert!(t.has_asym_capacity());
    assert!(t.levels().iter().any(|l| l.flags.asym_cpucapacity));

    // ia64: 64 nodes, distances 10/22/26/30/34: NODE then one NUMA level per distance,
    // minus the degenerate ones.
    let (t, _f) = load("256ia64-64n2s2c");
    let d: Vec<u32> = t
        .levels()
        .iter()
        .filter_map(|l| l.flags.numa_distance)
        .collect();
    assert!(
        !d.is_empty() && d.iter().all(|x| [22, 26, 30, 34].contains(x)),
        "{d:?}"
    );
    assert_eq!(t.levels().last().unwrap().spans, [t.online_cpus().clone()]);
}
