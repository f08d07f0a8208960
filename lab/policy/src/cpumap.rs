//! The CPUs as the placement and balancing decisions see them: the scheduling-domain levels
//! over the runtime's CPUs (its workers, by index), and each CPU's priority.

use alloc::vec::Vec;
use core::ops::Range;

use super::features::{Feature, Features};

/// What the kernel's scheduling-domain flags (`SD_*`) say of one level, as the architecture's
/// topology table and `sd_init` set them (lagom models x86's table; the topology crate's
/// `layout` fills these from the machine). Each holds for every span of the level.
///
/// The constants are the levels of Linux v7.1 on x86 (`build_sched_topology`, `sd_init`):
/// `SMT`, `CLS` and `MC` share the LLC; `CLS`, `MC` and `PKG` carry `SD_ASYM_PACKING` while
/// ITMT is enabled ([`LevelFlags::with_asym_packing`]), the SMT level never; the NUMA
/// identity level (`NODE`) has no topology flag; the levels above it are `SD_NUMA`, which
/// `sd_init` makes `SD_SERIALIZE` and takes `SD_PREFER_SIBLING` from, and beyond the node
/// reclaim distance (30) also `SD_WAKE_AFFINE` and `SD_BALANCE_FORK`/`EXEC`.
///
/// ```
/// use lagom_policy::LevelFlags;
/// assert!(LevelFlags::SMT.share_cpucapacity && !LevelFlags::SMT.asym_packing);
/// assert!(LevelFlags::MC.with_asym_packing().asym_packing);
/// assert!(!LevelFlags::NUMA_FAR.wake_affine && LevelFlags::NUMA.wake_affine);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LevelFlags {
    /// The spans are the hardware threads of one core (`SD_SHARE_CPUCAPACITY`).
    pub share_cpucapacity: bool,
    /// The spans are clusters: CPUs sharing an L2 or a cluster tag (`SD_CLUSTER`).
    pub cluster: bool,
    /// The spans lie within one last-level cache (`SD_SHARE_LLC`).
    pub share_llc: bool,
    /// A NUMA level above the node (`SD_NUMA`).
    pub numa: bool,
    /// Asymmetric packing by CPU priority (`SD_ASYM_PACKING`, ITMT).
    pub asym_packing: bool,
    /// A waker's domain at this level may pull its wakee to the waker's CPU
    /// (`SD_WAKE_AFFINE`).
    pub wake_affine: bool,
    /// A fork (and an exec) may be placed anywhere in the span (`SD_BALANCE_FORK`,
    /// `SD_BALANCE_EXEC`).
    pub balance_fork: bool,
    /// Balancing prefers spreading over the groups (`SD_PREFER_SIBLING`).
    pub prefer_sibling: bool,
    /// One balance at a time over the whole machine (`SD_SERIALIZE`).
    pub serialize: bool,
}

impl LevelFlags {
    /// What `sd_init` gives every level before the topology's flags.
    const BASE: LevelFlags = LevelFlags {
        share_cpucapacity: false,
        cluster: false,
        share_llc: false,
        numa: false,
        asym_packing: false,
        wake_affine: true,
        balance_fork: true,
        prefer_sibling: true,
        serialize: false,
    };
    /// SMT siblings (`cpu_smt_flags`: `SD_SHARE_CPUCAPACITY | SD_SHARE_LLC`).
    pub const SMT: LevelFlags = LevelFlags {
        share_cpucapacity: true,
        share_llc: true,
        ..LevelFlags::BASE
    };
    /// A cluster (`cpu_cluster_flags`: `SD_CLUSTER | SD_SHARE_LLC`).
    pub const CLS: LevelFlags = LevelFlags {
        cluster: true,
        share_llc: true,
        ..LevelFlags::BASE
    };
    /// The CPUs of one last-level cache (`cpu_core_flags`: `SD_SHARE_LLC`).
    pub const MC: LevelFlags = LevelFlags {
        share_llc: true,
        ..LevelFlags::BASE
    };
    /// A package, or any level without topology flags (the NUMA identity level `NODE`, and
    /// lagom's `ALL`).
    pub const PKG: LevelFlags = LevelFlags::BASE;
    /// A NUMA level within the node reclaim distance (`SD_NUMA`, then `SD_SERIALIZE`, no
    /// `SD_PREFER_SIBLING`).
    pub const NUMA: LevelFlags = LevelFlags {
        numa: true,
        serialize: true,
        prefer_sibling: false,
        ..LevelFlags::BASE
    };
    /// A NUMA level beyond the node reclaim distance: also no `SD_WAKE_AFFINE` and no
    /// `SD_BALANCE_FORK`/`EXEC`.
    pub const NUMA_FAR: LevelFlags = LevelFlags {
        wake_affine: false,
        balance_fork: false,
        ..LevelFlags::NUMA
    };

    /// These flags with `SD_ASYM_PACKING` (`x86_sched_itmt_flags` while ITMT is enabled).
    #[must_use]
    pub const fn with_asym_packing(self) -> LevelFlags {
        LevelFlags {
            asym_packing: true,
            ..self
        }
    }
}

/// The balancing parameters `sd_init` gives a domain of `span_weight` CPUs (Linux v7.1,
/// `kernel/sched/topology.c`), with the kernel's milliseconds as nanoseconds (HZ=1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DomainParams {
    /// The busiest group must exceed the local one by this percentage (`imbalance_pct`):
    /// 110 within a core, 117 above.
    pub imbalance_pct: u64,
    /// Failed balance attempts after which cache-hot tasks may move (`cache_nice_tries`):
    /// 0 within a core, 2 on NUMA levels, 1 elsewhere.
    pub cache_nice_tries: u32,
    /// How much longer a busy CPU waits between balances (`busy_factor`, 16).
    pub busy_factor: u32,
    /// `min_interval`: the span weight, in ms.
    pub min_interval_ns: u64,
    /// `max_interval`: twice the span weight, in ms.
    pub max_interval_ns: u64,
    /// The initial `balance_interval`: the span weight, in ms.
    pub balance_interval_ns: u64,
}

/// One scheduling-domain level over the map's CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapLevel {
    /// The kernel's name of the level (`"SMT"`, `"CLS"`, `"MC"`, `"PKG"`, `"NODE"`,
    /// `"NUMA"`), or `"ALL"` for the level [`CpuMap::new`] adds on top.
    pub name: &'static str,
    /// Its domain flags.
    pub flags: LevelFlags,
    /// Its spans (the domains of its CPUs), as ranges of CPU indices in ascending order.
    pub spans: Vec<Range<usize>>,
}

impl MapLevel {
    /// The parameters `sd_init` gives a domain of this level spanning `span_weight` CPUs.
    ///
    /// ```
    /// use lagom_policy::{LevelFlags, MapLevel};
    /// let mc = MapLevel { name: "MC", flags: LevelFlags::MC, spans: vec![0..8] };
    /// let p = mc.params(8);
    /// assert_eq!((p.imbalance_pct, p.cache_nice_tries, p.busy_factor), (117, 1, 16));
    /// assert_eq!((p.min_interval_ns, p.max_interval_ns), (8_000_000, 16_000_000));
    /// ```
    pub fn params(&self, span_weight: usize) -> DomainParams {
        let f = self.flags;
        let (imbalance_pct, cache_nice_tries) = if f.share_cpucapacity {
            (110, 0)
        } else if f.share_llc {
            (117, 1)
        } else if f.numa {
            (117, 2)
        } else {
            (117, 1)
        };
        let ms = span_weight as u64 * 1_000_000;
        DomainParams {
            imbalance_pct,
            cache_nice_tries,
            busy_factor: 16,
            min_interval_ns: ms,
            max_interval_ns: 2 * ms,
            balance_interval_ns: ms,
        }
    }
}

/// The runtime's CPUs with their domain levels and priorities.
///
/// The policy does not read the topology (`lagom-topology` builds on this crate, not the reverse): the driver turns a
/// `Topology` into a [`CpuMap`] once, at start (`lagom::runtime`), ordering its CPUs so that SMT
/// siblings, cluster and LLC members are adjacent. Every span of every level is then a range
/// of CPU indices, and each level's ranges partition `0..n` and are unions of the ranges of
/// the level below (the kernel's sched-group nesting). The top level spans every CPU.
///
/// ```
/// use lagom_policy::{CpuMap, Features, LevelFlags, MapLevel};
/// // Two cores of two SMT threads sharing one LLC, the second core preferred (ITMT).
/// let map = CpuMap::new(
///     vec![10, 10, 20, 20],
///     vec![
///         MapLevel { name: "SMT", flags: LevelFlags::SMT, spans: vec![0..2, 2..4] },
///         MapLevel { name: "MC", flags: LevelFlags::MC.with_asym_packing(), spans: vec![0..4] },
///     ],
/// )
/// .unwrap();
/// assert_eq!(map.llc(1), 0..4);
/// assert_eq!(map.smt_siblings(3), 2..4);
/// assert!(map.share_llc(0, 3));
/// assert_eq!(map.priority(2), 20);
/// assert!(map.asym_prefer(2, 0) && !map.asym_prefer(2, 3));
/// assert_eq!(map.sd_asym_packing(Features::DEFAULT), Some(1));
/// assert_eq!(map.sd_asym_packing(Features::parse("NO_ITMT").unwrap()), None);
/// ```
///
/// The levels carry the kernel's domain flags ([`LevelFlags`]) and give the parameters
/// `sd_init` sets ([`DomainParams`]); the map answers the kernel's per-CPU topology
/// questions (`sd_llc`, `sd_llc_size`, `sd_share_id`, `cpus_share_cache`,
/// `cpus_share_resources`, `sched_smt_present`, `sched_cluster_active`, `sd_asym_packing`,
/// `sched_asym_prefer`) for the placement and balancing decisions of both drivers. lagom
/// models Linux v7.1 on x86; Arm's capacity asymmetry (`SD_ASYM_CPUCAPACITY`, misfit tasks)
/// and powerpc's SMT-level asym packing are not modelled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuMap {
    priority: Vec<u32>,
    levels: Vec<MapLevel>,
    /// Per level, per CPU: the index of its span.
    of: Vec<Vec<u32>>,
    /// The highest level whose spans share an LLC (`sd_llc`), if any.
    llc: Option<usize>,
    /// The SMT level, if any.
    smt: Option<usize>,
    /// The cluster level, if any.
    cls: Option<usize>,
    /// Whether priorities differ (`sched_asym_prefer` has anything to prefer).
    asym: bool,
    /// Some core has two or more CPUs (`sched_smt_present`).
    smt_active: bool,
    /// Some CPU keeps a cluster domain (`sched_cluster_active`).
    cluster_active: bool,
}

impl CpuMap {
    /// The map of `priority.len()` CPUs with `levels` bottom-up. Levels whose spans are those
    /// of the level below (degenerate) are dropped, and a level `"ALL"` spanning every CPU
    /// (flags [`LevelFlags::PKG`]) is added when the top one does not. `None` when the levels
    /// do not nest: a level's spans must partition `0..n` in ascending order, each a union of
    /// spans of the level below.
    pub fn new(priority: Vec<u32>, levels: Vec<MapLevel>) -> Option<CpuMap> {
        let n = priority.len();
        if n == 0 {
            return None;
        }
        let mut kept: Vec<MapLevel> = Vec::new();
        for l in levels {
            let mut at = 0;
            for s in &l.spans {
                if s.start != at || s.end <= s.start {
                    return None;
                }
                at = s.end;
            }
            if at != n {
                return None;
            }
            if let Some(below) = kept.last() {
                // Every boundary of this level is a boundary of the one below.
                if l.spans
                    .iter()
                    .any(|s| !below.spans.iter().any(|b| b.start == s.start))
                {
                    return None;
                }
                if below.spans == l.spans {
                    continue;
                }
            }
            kept.push(l);
        }
        if kept.last().is_none_or(|l| l.spans.len() != 1) {
            kept.push(MapLevel {
                name: "ALL",
                flags: LevelFlags::PKG,
                spans: alloc::vec![0..n],
            });
        }
        let of: Vec<Vec<u32>> = kept
            .iter()
            .map(|l| {
                let mut v = alloc::vec![0u32; n];
                for (i, s) in l.spans.iter().enumerate() {
                    for c in s.clone() {
                        v[c] = i as u32;
                    }
                }
                v
            })
            .collect();
        let llc = kept.iter().rposition(|l| l.flags.share_llc);
        let smt = kept.iter().position(|l| l.flags.share_cpucapacity);
        let cls = kept.iter().position(|l| l.flags.cluster);
        let asym = priority.iter().any(|&p| p != priority[0]);
        let mut map = CpuMap {
            priority,
            levels: kept,
            of,
            llc,
            smt,
            cls,
            asym,
            smt_active: false,
            cluster_active: false,
        };
        map.smt_active = map
            .smt
            .is_some_and(|l| map.levels[l].spans.iter().any(|s| s.len() > 1));
        map.cluster_active = (0..n).any(|c| map.cluster_span(c).is_some());
        Some(map)
    }

    /// `n` CPUs that share one LLC and have equal priorities: a machine whose topology is
    /// unknown (a single package, as the kernel assumes without cache information).
    pub fn flat(n: usize) -> CpuMap {
        let n = n.max(1);
        CpuMap::new(
            alloc::vec![0; n],
            alloc::vec![MapLevel {
                name: "MC",
                flags: LevelFlags::MC,
                spans: alloc::vec![0..n],
            }],
        )
        .expect("one span over every CPU nests")
    }

    /// The number of CPUs.
    pub fn len(&self) -> usize {
        self.priority.len()
    }

    /// Never true (a map has at least one CPU); for clippy's `len` convention.
    pub fn is_empty(&self) -> bool {
        self.priority.is_empty()
    }

    /// The levels, bottom-up (the top one spans every CPU).
    pub fn levels(&self) -> &[MapLevel] {
        &self.levels
    }

    /// CPU `cpu`'s span at level `level`.
    pub fn span(&self, level: usize, cpu: usize) -> Range<usize> {
        self.levels[level].spans[self.of[level][cpu] as usize].clone()
    }

    /// The parameters `sd_init` gives CPU `cpu`'s domain at level `level` ([`MapLevel::params`]
    /// for the weight of its span).
    pub fn params(&self, level: usize, cpu: usize) -> DomainParams {
        self.levels[level].params(self.span(level, cpu).len())
    }

    /// CPU `cpu`'s priority (higher is preferred, `arch_asym_cpu_priority`).
    pub fn priority(&self, cpu: usize) -> u32 {
        self.priority[cpu]
    }

    /// Whether the CPUs' priorities differ.
    pub fn has_asym_priority(&self) -> bool {
        self.asym
    }

    /// Whether `a` is preferred to `b` (`sched_asym_prefer`): a strictly higher priority.
    /// Equal priorities prefer neither, whichever the CPU numbers (x86 gives every SMT
    /// sibling of a core its core's priority, so siblings never prefer each other).
    ///
    /// ```
    /// use lagom_policy::CpuMap;
    /// let map = CpuMap::new(vec![20, 20, 10], vec![]).unwrap();
    /// assert!(map.asym_prefer(0, 2) && !map.asym_prefer(2, 0));
    /// assert!(!map.asym_prefer(0, 1) && !map.asym_prefer(1, 0), "a tie prefers neither");
    /// ```
    pub fn asym_prefer(&self, a: usize, b: usize) -> bool {
        let (pa, pb) = (self.priority[a], self.priority[b]);
        // The tie broken by CPU number (runtime/tests/mutants.sh).
        let tie = cfg!(lagom_mutant = "asym_prefer_tie_by_index") && pa == pb && a < b;
        pa > pb || tie
    }

    /// Whether `level` packs by priority under `features`: the level carries
    /// `SD_ASYM_PACKING` and ITMT is on ([`Feature::Itmt`] stands for the kernel's
    /// `sched_itmt_enabled`, whose change rebuilds the domains without the flag).
    pub fn asym_packing(&self, level: usize, features: Features) -> bool {
        features.is_enabled(Feature::Itmt) && self.levels[level].flags.asym_packing
    }

    /// CPU `cpu`'s highest level that packs by priority under `features` (the kernel's
    /// `sd_asym_packing`, `highest_flag_domain(cpu, SD_ASYM_PACKING)`: the flag is not
    /// shared with the children, so the search does not stop at a level without it, such as
    /// x86's SMT level). Every CPU has every level of the map, so the answer is the same
    /// level for all of them.
    pub fn sd_asym_packing(&self, features: Features) -> Option<usize> {
        (0..self.levels.len())
            .rev()
            .find(|&l| self.asym_packing(l, features))
    }

    /// The CPUs sharing `cpu`'s last-level cache (`sd_llc`'s span; `cpu` alone when no
    /// level shares an LLC).
    pub fn llc(&self, cpu: usize) -> Range<usize> {
        match self.llc {
            Some(l) => self.span(l, cpu),
            None => cpu..cpu + 1,
        }
    }

    /// How many CPUs share `cpu`'s last-level cache (`sd_llc_size`).
    pub fn llc_size(&self, cpu: usize) -> usize {
        self.llc(cpu).len()
    }

    /// Whether `a` and `b` share a last-level cache (`cpus_share_cache`).
    pub fn share_llc(&self, a: usize, b: usize) -> bool {
        a == b || self.llc(a).contains(&b)
    }

    /// `cpu`'s SMT siblings, itself included.
    pub fn smt_siblings(&self, cpu: usize) -> Range<usize> {
        match self.smt {
            Some(l) => self.span(l, cpu),
            None => cpu..cpu + 1,
        }
    }

    /// Whether the map has an SMT level.
    pub fn has_smt(&self) -> bool {
        self.smt.is_some()
    }

    /// Whether some core has two or more CPUs of the map (`sched_smt_present`).
    pub fn smt_active(&self) -> bool {
        self.smt_active
    }

    /// `cpu`'s cluster (`sd_cluster`'s span), if it has one: the span of the map's cluster
    /// level when it differs from `cpu`'s SMT span and from its LLC span. Where it equals
    /// one of them the kernel's domain for `cpu` is degenerate (a cluster that holds one
    /// core, or the whole LLC), and `cpu` has no cluster.
    pub fn cluster_span(&self, cpu: usize) -> Option<Range<usize>> {
        let s = self.span(self.cls?, cpu);
        (s != self.smt_siblings(cpu) && s != self.llc(cpu) && s.len() > 1).then_some(s)
    }

    /// Whether some CPU has a cluster ([`Self::cluster_span`]; the kernel's
    /// `sched_cluster_active`).
    pub fn cluster_active(&self) -> bool {
        self.cluster_active
    }

    /// The CPU that names `cpu`'s cache-sharing resources (`sd_share_id`): the first CPU of
    /// its cluster if it has one, else the first CPU of its LLC.
    pub fn share_id(&self, cpu: usize) -> usize {
        match self.cluster_span(cpu) {
            Some(s) => s.start,
            None => self.llc(cpu).start,
        }
    }

    /// Whether `a` and `b` share their cluster, or, where there is none, their LLC
    /// (`cpus_share_resources`).
    pub fn share_resources(&self, a: usize, b: usize) -> bool {
        a == b || self.share_id(a) == self.share_id(b)
    }

    /// The lowest level whose domain of `a` contains `b` (the domain a balance between them
    /// acts in). The top level spans every CPU, so there is one for any two CPUs of the map.
    ///
    /// ```
    /// use lagom_policy::{CpuMap, LevelFlags, MapLevel};
    /// let map = CpuMap::new(
    ///     vec![0; 4],
    ///     vec![
    ///         MapLevel { name: "SMT", flags: LevelFlags::SMT, spans: vec![0..2, 2..4] },
    ///         MapLevel { name: "MC", flags: LevelFlags::MC, spans: vec![0..4] },
    ///     ],
    /// )
    /// .unwrap();
    /// assert_eq!(map.levels()[map.lowest_common_level(0, 1)].name, "SMT");
    /// assert_eq!(map.levels()[map.lowest_common_level(0, 3)].name, "MC");
    /// ```
    pub fn lowest_common_level(&self, a: usize, b: usize) -> usize {
        (0..self.levels.len())
            .find(|&l| self.span(l, a).contains(&b))
            .unwrap_or(self.levels.len() - 1)
    }

    /// The groups of `cpu`'s domain at `level`: the spans of the level below inside it (or
    /// its single CPUs at the bottom level).
    pub fn groups(&self, level: usize, cpu: usize) -> impl Iterator<Item = Range<usize>> + '_ {
        let span = self.span(level, cpu);
        span.filter_map(move |c| match level.checked_sub(1) {
            None => Some(c..c + 1),
            Some(b) => {
                let g = self.span(b, c);
                (g.start == c).then_some(g)
            }
        })
    }

    /// The group `cpu` belongs to in its domain at `level`: its span at the level below (or
    /// itself at the bottom level).
    pub fn group_of(&self, level: usize, cpu: usize) -> Range<usize> {
        match level.checked_sub(1) {
            None => cpu..cpu + 1,
            Some(b) => self.span(b, cpu),
        }
    }
}
