//! [`layout`]: a driver's CPUs from the topology, one function for both of lagom's drivers;
//! and [`spread`]: which `n` of them to use when fewer workers than CPUs are asked for.

use alloc::vec::Vec;

use crate::{CapacitySource, CpuSet, DomainLevel, LevelKind, PrioritySource, Topology};
use lagom_policy::{CpuMap, LevelFlags, MapLevel};

/// The workers' CPUs and the decisions' view of them.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The OS CPU of each worker, in worker order.
    pub cpus: Vec<usize>,
    /// The domains and priorities over worker indices.
    pub map: CpuMap,
    /// Why the map is flat, if it fell back.
    pub fallback: Option<&'static str>,
}

/// The layout of workers on `cpus` (any order, each once) of `topo`: which OS CPU each CPU
/// index (a worker of the threaded runtime, a virtual CPU of the simulator) stands for, and
/// the [`CpuMap`] the placement and balancing decisions read. `ranks` overrides the priority
/// of the CPUs it names (`(cpu, priority)`).
///
/// Both drivers build their CPUs with this one function (the runtime's builder for its
/// workers, the simulator's `Machine` for its virtual CPUs), so that the simulator's placement
/// and balancing see the domains, LLC spans, SMT siblings and priorities the threaded runtime
/// would see on that machine.
///
/// Workers are ordered so that every domain's CPUs are adjacent: by the first CPU of their
/// span at each level, top level first, then by CPU number. SMT siblings are then
/// neighbours, inside their cluster, inside their LLC, inside their package and node, and each
/// level's spans (restricted to the workers) are index ranges. A CPU a level has no span for
/// (the level is degenerate there) keeps its span of the level below.
///
/// The map is the topology's, restricted to the workers: two workers share an LLC if their
/// CPUs do. A level whose spans do not partition the workers into runs nested in the level
/// below (the kernel's overlapping NUMA levels, on a machine whose nodes are not all
/// equidistant) is dropped, with a note in [`Layout::fallback`]; the top level spanning every
/// worker then stands in for it. Should nothing nest at all, the map is one LLC with the
/// CPUs' priorities.
///
/// Each level carries the domain flags Linux v7.1 gives it on x86 ([`level_flags`]): the CLS,
/// MC and PKG levels pack by priority (`SD_ASYM_PACKING`) where the kernel would enable ITMT
/// ([`itmt_packing`]), the SMT level never.
///
/// ```
/// use lagom_topology::{Topology, layout};
/// let mut files = Vec::new();
/// files.push(("sys/devices/system/cpu/online".to_string(), "0-3\n".to_string()));
/// for cpu in 0..4 {
///     let d = format!("sys/devices/system/cpu/cpu{cpu}/topology");
///     // Two cores of two SMT siblings each: CPUs n and n + 2.
///     files.push((format!("{d}/core_cpus_list"), format!("{},{}", cpu % 2, cpu % 2 + 2)));
///     files.push((format!("{d}/package_cpus_list"), "0-3".to_string()));
/// }
/// let topo = Topology::from_files("2x2", files)?;
/// let l = layout(&topo, &[0, 1, 2, 3], &[]);
/// assert_eq!(l.cpus, [0, 2, 1, 3], "SMT siblings are neighbours");
/// assert_eq!(l.map.smt_siblings(0), 0..2);
/// # Ok::<(), lagom_topology::TopologyError>(())
/// ```
pub fn layout(topo: &Topology, cpus: &[usize], ranks: &[(usize, u32)]) -> Layout {
    let levels = topo.levels();
    // Each CPU's span per level (its own span if the level has one for it, else the one
    // below, else the CPU alone).
    let span_of = |cpu: usize| -> Vec<CpuSet> {
        let mut out: Vec<CpuSet> = Vec::with_capacity(levels.len());
        for l in levels {
            let s = l.spans.iter().find(|s| s.contains(cpu)).cloned();
            let s = s.or_else(|| out.last().cloned()).unwrap_or_else(|| {
                let mut one = CpuSet::default();
                one.insert(cpu);
                one
            });
            out.push(s);
        }
        out
    };
    let mut order: Vec<(Vec<usize>, usize, Vec<CpuSet>)> = cpus
        .iter()
        .map(|&c| {
            let spans = span_of(c);
            let key = spans.iter().rev().map(|s| s.first().unwrap_or(c)).collect();
            (key, c, spans)
        })
        .collect();
    order.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let sorted: Vec<usize> = order.iter().map(|o| o.1).collect();
    let priority = sorted
        .iter()
        .map(|&c| {
            ranks
                .iter()
                .rev()
                .find(|r| r.0 == c)
                .map(|r| r.1)
                .or_else(|| topo.cpu(c).map(|x| x.priority))
                .unwrap_or(0)
        })
        .collect::<Vec<u32>>();
    let n = sorted.len();
    let itmt = itmt_packing(topo, !ranks.is_empty(), &priority);
    let mut map_levels: Vec<MapLevel> = Vec::with_capacity(levels.len());
    let mut dropped = None;
    for (li, l) in levels.iter().enumerate() {
        let mut spans = Vec::new();
        let mut ok = true;
        let mut i = 0;
        while i < n {
            let span = &order[i].2[li];
            let mut j = i;
            while j < n && span.contains(order[j].1) {
                j += 1;
            }
            // Every member of the span must be in this run, with this span, and no other
            // worker in it.
            if (0..n).any(|k| (k < i || k >= j) && span.contains(order[k].1))
                || (i..j).any(|k| order[k].2[li] != *span)
            {
                ok = false;
            }
            spans.push(i..j);
            i = j;
        }
        // Nested in the level kept below: each boundary is one of its boundaries.
        if let Some(below) = map_levels.last()
            && spans
                .iter()
                .any(|s| !below.spans.iter().any(|b| b.start == s.start))
        {
            ok = false;
        }
        if !ok {
            // The kernel's NUMA levels may overlap (a node's neighbours at a distance are not
            // a partition); a map of ranges cannot hold them. Placement works within an LLC
            // and balancing walks upward, so the top level spanning every worker stands in.
            dropped = Some("a domain level that does not partition the workers was dropped");
            continue;
        }
        map_levels.push(MapLevel {
            name: l.kind.name(),
            flags: level_flags(l, itmt),
            spans,
        });
    }
    match CpuMap::new(priority.clone(), map_levels) {
        Some(map) => Layout {
            cpus: sorted,
            map,
            fallback: dropped,
        },
        None => Layout {
            map: CpuMap::new(
                priority,
                alloc::vec![MapLevel {
                    name: "MC",
                    flags: if itmt {
                        LevelFlags::MC.with_asym_packing()
                    } else {
                        LevelFlags::MC
                    },
                    spans: alloc::vec![0..n],
                }],
            )
            .unwrap_or_else(|| CpuMap::flat(n)),
            cpus: sorted,
            fallback: Some("the topology's domains do not nest over the workers' CPUs"),
        },
    }
}

/// Whether the kernel would pack by priority on this machine (ITMT: `sched_itmt_enabled`, and
/// `SD_ASYM_PACKING` on x86's CLS, MC and PKG levels) for workers of priorities `priority`:
/// the priorities differ, and either the caller gave them (`ranked`: the runtime's
/// `Builder::cpu_priorities` stands for a platform that reports rankings with ITMT on) or
/// they come from a source x86 builds ITMT on — AMD preferred-core rankings or highest
/// performance, ACPI CPPC highest performance (Intel Turbo Boost Max 3.0), Intel hybrid core
/// types — and the machine does not report `sched_itmt_enabled` off.
///
/// Where every CPU has a `cpu_capacity` file (Arm and RISC-V, whose `arch_topology` writes
/// it; x86 has none) the priorities describe capacity asymmetry, which the kernel handles
/// with `SD_ASYM_CPUCAPACITY`, misfit migration and energy-aware placement, not asym
/// packing: lagom does not model those, and such a machine gets no asym packing (its
/// priorities still serve lagom's WAKE_PREFER_RANK).
pub fn itmt_packing(topo: &Topology, ranked: bool, priority: &[u32]) -> bool {
    if !priority.iter().any(|&p| p != priority[0]) {
        return false;
    }
    if ranked {
        return true;
    }
    let source = matches!(
        topo.priority_source(),
        PrioritySource::AmdPrefcoreRanking
            | PrioritySource::AcpiCppcHighestPerf
            | PrioritySource::AmdHighestPerf
            | PrioritySource::HybridCoreType
    );
    source
        && topo.capacity_source() != CapacitySource::CpuCapacity
        && topo.itmt_enabled() != Some(false)
}

/// The domain flags of topology level `l` (Linux v7.1 on x86, `build_sched_topology` and
/// `sd_init`): SMT shares CPU capacity; CLS is a cluster; SMT, CLS and MC share the LLC
/// (lagom takes that from the caches: a level whose every span lies in one LLC); CLS, MC and
/// PKG pack by priority when `itmt` ([`itmt_packing`]); the NUMA identity level (NODE) has
/// no topology flag; a NUMA level is `SD_NUMA` and `SD_SERIALIZE`, and beyond the node
/// reclaim distance (30) neither wake-affine nor fork-balancing. A NUMA level of unknown
/// distance counts as near.
pub fn level_flags(l: &DomainLevel, itmt: bool) -> LevelFlags {
    /// The kernel's `node_reclaim_distance` (`RECLAIM_DISTANCE`).
    const NODE_RECLAIM_DISTANCE: u32 = 30;
    let mut f = match l.kind {
        LevelKind::Smt => LevelFlags::SMT,
        LevelKind::Cluster => LevelFlags::CLS,
        LevelKind::Mc => LevelFlags::MC,
        LevelKind::Pkg | LevelKind::Node => LevelFlags::PKG,
        LevelKind::Numa => match l.flags.numa_distance {
            Some(d) if d > NODE_RECLAIM_DISTANCE => LevelFlags::NUMA_FAR,
            _ => LevelFlags::NUMA,
        },
    };
    f.share_llc = l.flags.share_llc;
    if itmt && matches!(l.kind, LevelKind::Cluster | LevelKind::Mc | LevelKind::Pkg) {
        f = f.with_asym_packing();
    }
    f
}

impl Layout {
    /// The flat layout (one LLC, no preference) for workers on `cpus` in the given order,
    /// with `reason` as its [`fallback`](Layout::fallback): where no topology could be read.
    pub fn flat(cpus: &[usize], reason: &'static str) -> Layout {
        Layout {
            cpus: cpus.to_vec(),
            map: CpuMap::flat(cpus.len()),
            fallback: Some(reason),
        }
    }
}

/// `n` of `cpus` (each once) to run `n` workers on, chosen where the kernel's load balancer
/// settles `n` CPU-bound threads that may run on all of `cpus`; in `cpus`'s order. All of
/// them when `n >= cpus.len()`.
///
/// The choice is greedy, one CPU at a time, taking the CPU that is least by, in this order:
///
/// 1. **capacity, largest first**: on a machine of big and little cores a busy thread does
///    not fit a little one, and misfit balancing moves it to a big one;
/// 2. **the chosen CPUs already in its span at each domain level, top level first**: at every
///    level but NUMA the kernel marks the child domain `SD_PREFER_SIBLING`, and the balancer
///    then evens out the running threads between the groups (packages, LLCs, clusters), so
///    busy threads spread over the packages first, then over the LLCs of each, the
///    clusters, the cores; the last level, SMT, puts one thread per core before any
///    sibling (an idle core is also what `select_idle_core` looks for first);
/// 3. **priority, highest first**: within a group, `ASYM_PACKING` (ITMT, preferred cores)
///    pulls busy threads to the highest-priority idle CPU;
/// 4. the CPU number.
///
/// Where lagom differs: the kernel leaves a few threads on one NUMA node while the node is
/// lightly loaded (`allow_numa_imbalance`, for the locality of threads that share memory);
/// `spread` treats NUMA levels as any other level and spreads over the nodes too, as the
/// kernel does once the node is busier than that allowance. A CPU the topology does not know
/// counts as capacity 0 and priority 0, alone at every level.
///
/// ```
/// use lagom_topology::{Topology, spread};
/// let mut files = Vec::new();
/// files.push(("sys/devices/system/cpu/online".to_string(), "0-7\n".to_string()));
/// for cpu in 0..8 {
///     let d = format!("sys/devices/system/cpu/cpu{cpu}/topology");
///     // Two packages (0-3, 4-7) of two cores each, SMT siblings n and n + 1.
///     let core = cpu / 2 * 2;
///     files.push((format!("{d}/core_cpus_list"), format!("{core}-{}", core + 1)));
///     let pkg = cpu / 4 * 4;
///     files.push((format!("{d}/package_cpus_list"), format!("{pkg}-{}", pkg + 3)));
/// }
/// let topo = Topology::from_files("2p2c2t", files)?;
/// let all: Vec<usize> = (0..8).collect();
/// assert_eq!(spread(&topo, &all, 2), [0, 4], "one per package");
/// assert_eq!(spread(&topo, &all, 4), [0, 2, 4, 6], "then one per core");
/// assert_eq!(spread(&topo, &all, 5), [0, 1, 2, 4, 6], "then siblings");
/// # Ok::<(), lagom_topology::TopologyError>(())
/// ```
pub fn spread(topo: &Topology, cpus: &[usize], n: usize) -> Vec<usize> {
    if n >= cpus.len() {
        return cpus.to_vec();
    }
    let levels = topo.levels();
    // Per candidate: (capacity, priority, the index of its span at each level, top first).
    let facts: Vec<(u32, u32, Vec<usize>)> = cpus
        .iter()
        .map(|&c| {
            let (cap, prio) = topo.cpu(c).map_or((0, 0), |x| (x.capacity, x.priority));
            let spans = levels
                .iter()
                .rev()
                .map(|l| {
                    l.spans
                        .iter()
                        .position(|s| s.contains(c))
                        // Alone at this level: a span index no other CPU has.
                        .unwrap_or(l.spans.len() + c)
                })
                .collect();
            (cap, prio, spans)
        })
        .collect();
    let mut chosen = alloc::vec![false; cpus.len()];
    // Chosen CPUs per (level, span index).
    let mut load: Vec<alloc::collections::BTreeMap<usize, usize>> =
        alloc::vec![alloc::collections::BTreeMap::new(); levels.len()];
    for _ in 0..n {
        let key = |i: usize| {
            let (cap, prio, spans) = &facts[i];
            let counts: Vec<usize> = spans
                .iter()
                .enumerate()
                .map(|(l, s)| load[l].get(s).copied().unwrap_or(0))
                .collect();
            (
                core::cmp::Reverse(*cap),
                counts,
                core::cmp::Reverse(*prio),
                cpus[i],
            )
        };
        let Some(best) = (0..cpus.len())
            .filter(|&i| !chosen[i])
            .min_by_key(|&i| key(i))
        else {
            break;
        };
        chosen[best] = true;
        for (l, s) in facts[best].2.iter().enumerate() {
            *load[l].entry(*s).or_insert(0) += 1;
        }
    }
    cpus.iter()
        .zip(&chosen)
        .filter_map(|(&c, &k)| k.then_some(c))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::string::{String, ToString};

    /// Four single-thread cores in one package; `extra(cpu)` adds per-CPU files.
    fn four(extra: impl Fn(usize) -> Vec<(String, String)>) -> Topology {
        let mut files = alloc::vec![(
            "sys/devices/system/cpu/online".to_string(),
            "0-3\n".to_string()
        )];
        for cpu in 0..4 {
            let d = format!("sys/devices/system/cpu/cpu{cpu}");
            files.push((format!("{d}/topology/core_cpus_list"), cpu.to_string()));
            files.push((format!("{d}/topology/package_cpus_list"), "0-3".to_string()));
            files.extend(extra(cpu));
        }
        Topology::from_files("four", files).unwrap()
    }

    #[test]
    fn big_cores_first_then_higher_priority() {
        // CPUs 2 and 3 are big: they fit a busy thread.
        let t = four(|cpu| {
            let cap = if cpu >= 2 { 1024 } else { 400 };
            alloc::vec![(
                format!("sys/devices/system/cpu/cpu{cpu}/cpu_capacity"),
                cap.to_string()
            )]
        });
        assert_eq!(spread(&t, &[0, 1, 2, 3], 2), [2, 3]);
        assert_eq!(spread(&t, &[0, 1, 2, 3], 3), [0, 2, 3]);
        // Preferred cores (CPPC highest_perf): CPU 1 ranks highest, then 3.
        let t = four(|cpu| {
            let perf = [100, 220, 100, 200][cpu];
            alloc::vec![(
                format!("sys/devices/system/cpu/cpu{cpu}/acpi_cppc/highest_perf"),
                perf.to_string()
            )]
        });
        assert!(t.has_preferred_cpus());
        assert_eq!(spread(&t, &[0, 1, 2, 3], 1), [1]);
        assert_eq!(spread(&t, &[0, 1, 2, 3], 2), [1, 3]);
    }

    #[test]
    fn all_or_more_is_every_cpu_in_the_given_order() {
        let t = four(|_| Vec::new());
        assert_eq!(spread(&t, &[3, 1, 2], 3), [3, 1, 2]);
        assert_eq!(spread(&t, &[3, 1, 2], 9), [3, 1, 2]);
        assert_eq!(spread(&t, &[3, 1, 2], 0), Vec::<usize>::new());
        // A CPU the topology lacks is taken last.
        assert_eq!(spread(&t, &[9, 0], 1), [0]);
    }
}
