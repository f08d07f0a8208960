//! Scheduling-domain levels, built as the kernel's `build_sched_domains()` builds them,
//! from the groups the other readers found.
//!
//! Candidate levels, bottom-up, each a span per CPU:
//!
//! * **SMT**: the CPU's core.
//! * **CLS**: its `cluster_cpus`, else the CPUs sharing its L2 (x86's cluster mask). A
//!   cluster holding the whole LLC is no cluster level: like arm64's
//!   `cpu_clustergroup_mask()`, the level then spans the core only (and so disappears),
//!   and MC takes the cluster's span.
//! * **MC**: the CPUs sharing its last-level cache (its package when no cache is known, as
//!   x86 does); when a package holds several NUMA nodes (Intel SNC, AMD Magny-Cours) the LLC
//!   is cut at the node boundary, as x86's topology code does.
//! * **PKG**: its package, omitted when a package holds several NUMA nodes.
//! * **NODE**: its NUMA node (the kernel's first NUMA level, at the local distance).
//! * **NUMA**: one level per distinct larger distance `d`: every CPU of the nodes within
//!   `d` of its node. With unknown distances and several nodes, one level spanning all CPUs.
//!
//! Each span is widened to hold its child's (the kernel's fix-up for inconsistent
//! firmware). Then, per CPU, a level spanning one CPU or the same CPUs as the level kept
//! below it is degenerate and dropped (`sd_degenerate`, `sd_parent_degenerate`); a level
//! that no CPU keeps disappears. Walking a CPU's domains upward is a walk over a short
//! vector; the LLC span, which the idle-CPU search intersects with the idle mask, is one
//! lookup ([`Topology::llc`](super::Topology::llc)).

use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use super::cpus::Groups;
use super::cpuset::{CpuId, CpuSet};

/// The kind of a scheduling-domain level, with the kernel's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LevelKind {
    /// Hardware threads of one core (`SMT`).
    Smt,
    /// A cluster: CPUs sharing an L2 or a cluster tag (`CLS`).
    Cluster,
    /// CPUs sharing the last-level cache (`MC`).
    Mc,
    /// A package (`PKG`, formerly `DIE`).
    Pkg,
    /// A NUMA node (`NODE`).
    Node,
    /// CPUs of the nodes within a NUMA distance (`NUMA`).
    Numa,
}

impl LevelKind {
    /// The kernel's name for the level.
    pub fn name(self) -> &'static str {
        match self {
            LevelKind::Smt => "SMT",
            LevelKind::Cluster => "CLS",
            LevelKind::Mc => "MC",
            LevelKind::Pkg => "PKG",
            LevelKind::Node => "NODE",
            LevelKind::Numa => "NUMA",
        }
    }
}

/// What the wakeup and balance paths ask of a level; each holds for every CPU's span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DomainFlags {
    /// Spans are hardware threads of one core (`SD_SHARE_CPUCAPACITY`).
    pub share_cpucapacity: bool,
    /// Every span lies within its CPUs' last-level cache (`SD_SHARE_LLC`).
    pub share_llc: bool,
    /// Every span lies within one package.
    pub share_pkg: bool,
    /// Some span holds CPUs of different capacities (`SD_ASYM_CPUCAPACITY`). Never set on a
    /// machine with SMT: the kernel does not combine the two (x86 hybrid parts with SMT keep
    /// equal capacities and use ITMT priorities instead).
    pub asym_cpucapacity: bool,
    /// For NUMA levels, the distance that bounds the span; `None` elsewhere or when the
    /// distances are unknown.
    pub numa_distance: Option<u32>,
}

/// One scheduling-domain level: its kind, flags, and the distinct spans its CPUs have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainLevel {
    /// The kind of level.
    pub kind: LevelKind,
    /// What holds for every span of the level.
    pub flags: DomainFlags,
    /// The distinct spans (sched groups at the level above), in order of first CPU.
    pub spans: Vec<CpuSet>,
}

/// The facts `build` needs, per CPU in ascending CPU order.
pub(crate) struct DomainInput<'a> {
    pub(crate) cpus: &'a [CpuId],
    pub(crate) online: &'a CpuSet,
    pub(crate) core: Vec<&'a CpuSet>,
    pub(crate) cluster: Vec<Option<&'a CpuSet>>,
    pub(crate) l2: Vec<Option<&'a CpuSet>>,
    pub(crate) llc: Vec<&'a CpuSet>,
    pub(crate) package: Vec<&'a CpuSet>,
    /// Index into `nodes`, per CPU.
    pub(crate) node: Vec<Option<usize>>,
    pub(crate) nodes: &'a [CpuSet],
    pub(crate) distances: Option<&'a [Vec<u32>]>,
    pub(crate) capacity: &'a [u32],
}

/// The levels, and per CPU the `(level, span)` indices of its domains, bottom-up.
pub(crate) fn build(input: &DomainInput<'_>) -> (Vec<DomainLevel>, Vec<Vec<(usize, usize)>>) {
    let n = input.cpus.len();
    let smt = input.core.iter().any(|c| c.len() > 1);
    let nodes_with_cpus = input.nodes.iter().filter(|s| !s.is_empty()).count();
    let numa_in_package = nodes_with_cpus > 1
        && (0..n).any(|i| {
            input
                .nodes
                .iter()
                .filter(|node| node.intersects(input.package[i]))
                .count()
                > 1
        });
    let node_span = |i: usize| -> CpuSet {
        match input.node[i] {
            Some(k) => input.nodes[k].clone(),
            None => input.package[i].clone(),
        }
    };

    let mut candidates: Vec<(LevelKind, Option<u32>, Vec<CpuSet>)> = Vec::new();
    candidates.push((
        LevelKind::Smt,
        None,
        (0..n).map(|i| input.core[i].clone()).collect(),
    ));
    candidates.push((
        LevelKind::Cluster,
        None,
        (0..n)
            .map(|i| match (input.cluster[i], input.l2[i]) {
                (Some(c), _) if input.llc[i].is_subset(c) => input.core[i].clone(),
                (Some(c), _) => c.clone(),
                (None, Some(l2)) => l2.clone(),
                (None, None) => input.core[i].clone(),
            })
            .collect(),
    ));
    candidates.push((
        LevelKind::Mc,
        None,
        (0..n)
            .map(|i| {
                let mut llc = input.llc[i].clone();
                if let Some(c) = input.cluster[i] {
                    llc.union_with(c);
                }
                if numa_in_package {
                    llc.intersect_with(&node_span(i));
                }
                llc
            })
            .collect(),
    ));
    if !numa_in_package {
        candidates.push((
            LevelKind::Pkg,
            None,
            (0..n).map(|i| input.package[i].clone()).collect(),
        ));
    }
    if nodes_with_cpus > 1 {
        candidates.push((LevelKind::Node, None, (0..n).map(node_span).collect()));
        match input.distances {
            Some(matrix) => {
                let local: u32 = (0..matrix.len()).map(|k| matrix[k][k]).min().unwrap_or(0);
                let distinct: BTreeSet<u32> = matrix
                    .iter()
                    .flatten()
                    .copied()
                    .filter(|&d| d > local)
                    .collect();
                for d in distinct {
                    let spans = (0..n)
                        .map(|i| match input.node[i] {
                            Some(k) => {
                                let mut s = CpuSet::new();
                                for (j, node) in input.nodes.iter().enumerate() {
                                    if matrix[k][j] <= d {
                                        s.union_with(node);
                                    }
                                }
                                s
                            }
                            None => input.online.clone(),
                        })
                        .collect();
                    candidates.push((LevelKind::Numa, Some(d), spans));
                }
            }
            None => candidates.push((
                LevelKind::Numa,
                None,
                (0..n).map(|_| input.online.clone()).collect(),
            )),
        }
    }

    // Widen each span to hold its child's.
    for l in 1..candidates.len() {
        let (lower, upper) = candidates.split_at_mut(l);
        let child = &lower[l - 1].2;
        for (span, c) in upper[0].2.iter_mut().zip(child) {
            span.union_with(c);
        }
    }

    let mut levels = Vec::new();
    let mut per_cpu: Vec<Vec<(usize, usize)>> = alloc::vec![Vec::new(); n];
    let mut last: Vec<Option<CpuSet>> = alloc::vec![None; n];
    for (kind, distance, spans) in candidates {
        let mut groups = Groups::default();
        let mut kept_by = Vec::new();
        for (i, span) in spans.iter().enumerate() {
            let degenerate = span.len() <= 1 || last[i].as_ref() == Some(span);
            if !degenerate {
                kept_by.push((i, groups.add(span.clone())));
                last[i] = Some(span.clone());
            }
        }
        if kept_by.is_empty() {
            continue;
        }
        let flags = DomainFlags {
            share_cpucapacity: kind == LevelKind::Smt,
            share_llc: (0..n).all(|i| spans[i].is_subset(input.llc[i])),
            share_pkg: (0..n).all(|i| spans[i].is_subset(input.package[i])),
            asym_cpucapacity: !smt
                && spans.iter().any(|s| {
                    let caps = s.iter().filter_map(|c| {
                        input.cpus.binary_search(&c).ok().map(|k| input.capacity[k])
                    });
                    super::priority::differ(caps)
                }),
            numa_distance: distance,
        };
        // Order the spans by first CPU, remapping the indices.
        let mut order: Vec<usize> = (0..groups.sets.len()).collect();
        order.sort_by_key(|&g| groups.sets[g].first());
        let mut rank = alloc::vec![0; order.len()];
        for (r, &g) in order.iter().enumerate() {
            rank[g] = r;
        }
        let level = levels.len();
        for (i, g) in kept_by {
            per_cpu[i].push((level, rank[g]));
        }
        let mut sets: Vec<Option<CpuSet>> = groups.sets.into_iter().map(Some).collect();
        let spans = order
            .iter()
            .map(|&g| sets[g].take().unwrap_or_default())
            .collect();
        levels.push(DomainLevel { kind, flags, spans });
    }
    (levels, per_cpu)
}
