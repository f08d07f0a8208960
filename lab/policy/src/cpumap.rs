//! The CPUs as the placement and balancing decisions see them: the scheduling-domain levels
//! over the runtime's CPUs (its workers, by index), and each CPU's priority.
//!
//! The policy does not read the topology (`lagom-topology` builds on this crate, not the reverse): the driver turns a
//! `Topology` into a [`CpuMap`] once, at start (`lagom::runtime`), ordering its CPUs so that SMT
//! siblings, cluster and LLC members are adjacent. Every span of every level is then a range
//! of CPU indices, and each level's ranges partition `0..n` and are unions of the ranges of
//! the level below (the kernel's sched-group nesting). The top level spans every CPU.
//!
//! ```
//! use lagom_policy::{CpuMap, MapLevel};
//! // Two cores of two SMT threads sharing one LLC.
//! let map = CpuMap::new(
//!     vec![10, 10, 20, 20],
//!     vec![
//!         MapLevel { name: "SMT", smt: true, share_llc: true, spans: vec![0..2, 2..4] },
//!         MapLevel { name: "MC", smt: false, share_llc: true, spans: vec![0..4] },
//!     ],
//! )
//! .unwrap();
//! assert_eq!(map.llc(1), 0..4);
//! assert_eq!(map.smt_siblings(3), 2..4);
//! assert!(map.share_llc(0, 3));
//! assert_eq!(map.priority(2), 20);
//! ```

use alloc::vec::Vec;
use core::ops::Range;

/// One scheduling-domain level over the map's CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapLevel {
    /// The kernel's name of the level (`"SMT"`, `"CLS"`, `"MC"`, `"PKG"`, `"NODE"`,
    /// `"NUMA"`), or `"ALL"` for the level [`CpuMap::new`] adds on top.
    pub name: &'static str,
    /// Its spans are the hardware threads of one core (`SD_SHARE_CPUCAPACITY`).
    pub smt: bool,
    /// Its spans lie within one last-level cache (`SD_SHARE_LLC`).
    pub share_llc: bool,
    /// Its spans (the domains of its CPUs), as ranges of CPU indices in ascending order.
    pub spans: Vec<Range<usize>>,
}

/// The runtime's CPUs with their domain levels and priorities (module doc).
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
    /// Whether priorities differ (`sched_asym_prefer` has anything to prefer).
    asym: bool,
}

impl CpuMap {
    /// The map of `priority.len()` CPUs with `levels` bottom-up. Levels whose spans are those
    /// of the level below (degenerate) are dropped, and a level `"ALL"` spanning every CPU is
    /// added when the top one does not. `None` when the levels do not nest: a level's spans
    /// must partition `0..n` in ascending order, each a union of spans of the level below.
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
                smt: false,
                share_llc: false,
                spans: alloc::vec![0..n],
            });
        }
        let of = kept
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
        let llc = kept.iter().rposition(|l| l.share_llc);
        let smt = kept.iter().position(|l| l.smt);
        let asym = priority.iter().any(|&p| p != priority[0]);
        Some(CpuMap {
            priority,
            levels: kept,
            of,
            llc,
            smt,
            asym,
        })
    }

    /// `n` CPUs that share one LLC and have equal priorities: a machine whose topology is
    /// unknown (a single package, as the kernel assumes without cache information).
    pub fn flat(n: usize) -> CpuMap {
        let n = n.max(1);
        CpuMap::new(
            alloc::vec![0; n],
            alloc::vec![MapLevel {
                name: "MC",
                smt: false,
                share_llc: true,
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

    /// CPU `cpu`'s priority (higher is preferred, `arch_asym_cpu_priority`).
    pub fn priority(&self, cpu: usize) -> u32 {
        self.priority[cpu]
    }

    /// Whether the CPUs' priorities differ.
    pub fn has_asym_priority(&self) -> bool {
        self.asym
    }

    /// Whether `a` is preferred to `b` (`sched_asym_prefer`): a higher priority, ties to the
    /// lower index (as the kernel's comparison ties to the lower CPU number).
    pub fn asym_prefer(&self, a: usize, b: usize) -> bool {
        let (pa, pb) = (self.priority[a], self.priority[b]);
        pa > pb || (pa == pb && a < b)
    }

    /// The CPUs sharing `cpu`'s last-level cache (`sd_llc`'s span; `cpu` alone when no
    /// level shares an LLC).
    pub fn llc(&self, cpu: usize) -> Range<usize> {
        match self.llc {
            Some(l) => self.span(l, cpu),
            None => cpu..cpu + 1,
        }
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

    /// The lowest level whose domain of `a` contains `b` (the domain a balance between them
    /// acts in). The top level spans every CPU, so there is one for any two CPUs of the map.
    ///
    /// ```
    /// use lagom_policy::{CpuMap, MapLevel};
    /// let map = CpuMap::new(
    ///     vec![0; 4],
    ///     vec![
    ///         MapLevel { name: "SMT", smt: true, share_llc: true, spans: vec![0..2, 2..4] },
    ///         MapLevel { name: "MC", smt: false, share_llc: true, spans: vec![0..4] },
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
}
