//! Which CPUs exist and are online, and how they group into cores, clusters, dies and
//! packages.
//!
//! Online CPUs come from `cpu/online`, or on old kernels from each `cpuN/online` (a missing
//! file, as for cpu0, means online); only CPUs with a `topology/` directory count, as in
//! hwloc. Groups come from the CPU *sets* the kernel publishes, never from the ids, which lie
//! (`physical_package_id` is -1 on s390 and POWER, `core_id` repeats across dies): the newest
//! file name first (`core_cpus_list`), then the old ones (`thread_siblings_list`), then the hex
//! masks. Every set is intersected with the online CPUs.
//!
//! One deliberate rule: on AMD Bulldozer-family parts the kernel lists the two cores of a
//! compute unit as thread siblings although they have different `core_id`s and separate
//! integer units. lagom, like hwloc, splits a sibling set by `core_id`, so those are two cores
//! without SMT; the pair still shares its L2, which makes it a CLS domain (see `domains`).

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::vec::Vec;

use super::cpuset::{CpuId, CpuSet};
use super::source::{Sysfs, numbered};
use crate::TopologyError;

pub(crate) const CPU_DIR: &str = "/sys/devices/system/cpu";

/// Distinct CPU sets, each with an index, in order of first appearance.
#[derive(Default)]
pub(crate) struct Groups {
    pub(crate) sets: Vec<CpuSet>,
    index: BTreeMap<Vec<u64>, usize>,
}

impl Groups {
    /// The index of `set`, added if new.
    pub(crate) fn add(&mut self, set: CpuSet) -> usize {
        let key = set.as_words().to_vec();
        let next = self.sets.len();
        let i = *self.index.entry(key).or_insert(next);
        if i == next {
            self.sets.push(set);
        }
        i
    }
}

/// The CPU-level facts of one CPU.
pub(crate) struct CpuScan {
    pub(crate) id: CpuId,
    pub(crate) core: usize,
    pub(crate) package: usize,
    pub(crate) die: Option<usize>,
    pub(crate) cluster: Option<usize>,
}

/// What `scan` finds.
pub(crate) struct CpuTopology {
    pub(crate) possible: CpuSet,
    pub(crate) present: CpuSet,
    /// Online CPUs that have a `topology/` directory.
    pub(crate) online: CpuSet,
    /// Every CPU that has a `cpuN` directory or is `possible`: what a mask may name.
    pub(crate) known: CpuSet,
    pub(crate) cpus: Vec<CpuScan>,
    pub(crate) cores: Vec<CpuSet>,
    pub(crate) packages: Vec<CpuSet>,
    pub(crate) dies: Vec<CpuSet>,
    pub(crate) clusters: Vec<CpuSet>,
}

const SIBLINGS: &[&str] = &[
    "core_cpus_list",
    "thread_siblings_list",
    "core_cpus",
    "thread_siblings",
];
const PACKAGE: &[&str] = &[
    "package_cpus_list",
    "core_siblings_list",
    "package_cpus",
    "core_siblings",
];
const DIE: &[&str] = &["die_cpus_list", "die_cpus"];
const CLUSTER: &[&str] = &["cluster_cpus_list", "cluster_cpus"];

/// Reads the CPU directories below the root.
pub(crate) fn scan(fs: &mut Sysfs) -> Result<CpuTopology, TopologyError> {
    fs.check_root()?;
    let Some(entries) = fs.list(CPU_DIR)? else {
        return Err(TopologyError::Missing {
            path: alloc::string::String::from(fs.root()),
            expected: "`sys/devices/system/cpu` directory",
        });
    };
    let ids = numbered(&entries, "cpu");
    if ids.is_empty() {
        return Err(TopologyError::Missing {
            path: fs.path(CPU_DIR),
            expected: "`cpuN` directories",
        });
    }
    let dirs: CpuSet = ids.iter().copied().collect();

    let listed_online = match fs.read_list(&format!("{CPU_DIR}/online"))? {
        Some(set) => set,
        None => {
            fs.fall_back("cpu/online", "each cpuN/online file (missing means online)");
            let mut set = CpuSet::new();
            for &n in &ids {
                match fs.read_i64(&format!("{CPU_DIR}/cpu{n}/online"))? {
                    Some(0) => {}
                    _ => set.insert(n),
                }
            }
            set
        }
    };
    let possible = fs
        .read_list(&format!("{CPU_DIR}/possible"))?
        .unwrap_or_else(|| {
            fs.fall_back("cpu/possible", "the cpuN directories");
            dirs.clone()
        });
    let present = fs
        .read_list(&format!("{CPU_DIR}/present"))?
        .unwrap_or_else(|| {
            fs.fall_back("cpu/present", "the cpuN directories");
            dirs.clone()
        });
    let mut online = CpuSet::new();
    for n in listed_online.iter().filter(|&n| dirs.contains(n)) {
        if fs.exists(&format!("{CPU_DIR}/cpu{n}/topology")) {
            online.insert(n);
        }
    }
    if online.is_empty() {
        return Err(TopologyError::Missing {
            path: fs.path(CPU_DIR),
            expected: "online `cpuN` directory with a `topology/` subdirectory",
        });
    }

    struct Raw {
        id: CpuId,
        siblings: CpuSet,
        package: Option<CpuSet>,
        die: Option<CpuSet>,
        cluster: Option<CpuSet>,
        core_id: Option<i64>,
        package_id: Option<i64>,
    }
    let mut raw = Vec::with_capacity(online.len());
    for n in online.iter() {
        let dir = format!("{CPU_DIR}/cpu{n}/topology");
        let own = |set: CpuSet| {
            let mut s = &set & &online;
            s.insert(n);
            s
        };
        let siblings = match fs.read_first_set(&dir, SIBLINGS)? {
            Some((0, set)) => own(set),
            Some((_, set)) => {
                fs.fall_back("cpuN/topology/core_cpus_list", "thread_siblings(_list)");
                own(set)
            }
            None => {
                fs.fall_back("cpuN/topology/thread_siblings", "each CPU its own core");
                own(CpuSet::new())
            }
        };
        let package = match fs.read_first_set(&dir, PACKAGE)? {
            Some((i, set)) => {
                if i > 0 {
                    fs.fall_back("cpuN/topology/package_cpus_list", "core_siblings(_list)");
                }
                Some(own(set))
            }
            None => None,
        };
        let die = fs
            .read_first_set(&dir, DIE)?
            .map(|(_, s)| own(s))
            .filter(|s| s.len() > 1);
        let cluster = fs.read_first_set(&dir, CLUSTER)?.map(|(_, s)| own(s));
        // The ids are read only where the sets need them: core_id to split sibling sets,
        // physical_package_id where no package set exists.
        let core_id = if siblings.len() > 1 {
            fs.read_i64(&format!("{dir}/core_id"))?
        } else {
            None
        };
        let package_id = if package.is_none() {
            fs.read_i64(&format!("{dir}/physical_package_id"))?
        } else {
            None
        };
        raw.push(Raw {
            id: n,
            siblings,
            package,
            die,
            cluster,
            core_id,
            package_id,
        });
    }

    // Package sets by id where no mask exists (very old kernels): -1 or a missing id puts
    // the CPU in one package with every other such CPU.
    if raw.iter().any(|r| r.package.is_none()) {
        fs.fall_back(
            "cpuN/topology/core_siblings",
            "CPUs grouped by physical_package_id",
        );
        let mut by_id: BTreeMap<i64, CpuSet> = BTreeMap::new();
        for r in raw.iter().filter(|r| r.package.is_none()) {
            by_id
                .entry(r.package_id.unwrap_or(-1).max(-1))
                .or_default()
                .insert(r.id);
        }
        for r in raw.iter_mut().filter(|r| r.package.is_none()) {
            r.package = Some(by_id[&r.package_id.unwrap_or(-1).max(-1)].clone());
        }
    }

    // Split sibling sets by core_id (Bulldozer compute units, see the module doc).
    let core_id_of: BTreeMap<CpuId, Option<i64>> = raw.iter().map(|r| (r.id, r.core_id)).collect();
    let mut cores = Groups::default();
    let mut packages = Groups::default();
    let mut dies = Groups::default();
    let mut clusters = Groups::default();
    let mut cpus = Vec::with_capacity(raw.len());
    for r in raw {
        let mut core = r.siblings;
        if let Some(mine) = r.core_id
            && core.len() > 1
            && core.iter().all(|m| core_id_of[&m].is_some())
        {
            core = core
                .iter()
                .filter(|m| core_id_of[m] == Some(mine))
                .collect();
        }
        cpus.push(CpuScan {
            id: r.id,
            core: cores.add(core),
            package: packages.add(r.package.unwrap_or_default()),
            die: r.die.map(|d| dies.add(d)),
            cluster: r.cluster.map(|c| clusters.add(c)),
        });
    }
    let mut known = dirs;
    known.union_with(&possible);
    Ok(CpuTopology {
        possible,
        present,
        online,
        known,
        cpus,
        cores: cores.sets,
        packages: packages.sets,
        dies: dies.sets,
        clusters: clusters.sets,
    })
}
