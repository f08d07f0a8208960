//! # lagom-topology
//!
//! The machine as the Linux scheduler sees it, read from sysfs: CPUs, their caches, cores,
//! clusters, packages and NUMA nodes, the sched-domain levels the kernel would build from
//! them, each CPU's priority (ITMT / preferred-core rankings) and capacity, and the CPUs this
//! process may use; and the CPU layout that lagom's scheduling decisions read ([`layout`]:
//! a [`Topology`] and a set of CPUs → their order and the policy's `CpuMap`).
//!
//! **Who it is for.** Both of lagom's drivers: the threaded runtime (crate `lagom`) reads the
//! live machine when it starts and lays its workers out with [`layout`]; the deterministic
//! simulator (crate `lagom-sim`) builds its virtual CPUs from any topology — a recorded sysfs
//! tree, or a machine described in code — with the same function, so that its placement and
//! balancing see what the runtime would see on that machine. Scheduler engineers use it to
//! inspect a machine (`examples/topo` prints one as `lstopo` does), or to test a policy on
//! machines they do not have: [`Topology::from_sysfs`] reads a tree recorded elsewhere.
//!
//! **What it needs.** `#![no_std]` + `alloc`; its OS access (reading files and directories,
//! `sched_getaffinity`) goes through `libc` in its `sys/` folder only, and a tree held in
//! memory ([`Topology::from_files`]) needs no OS at all.
//!
//! ## Reading a topology
//!
//! [`Topology::detect`] reads the live system (root `/`, plus the process's affinity mask);
//! [`Topology::from_sysfs`] reads a recorded tree (a directory holding `sys/` and usually
//! `proc/`), whose cpuset files stand in for the live process's; [`Topology::from_files`] reads
//! a tree held in memory (a machine described in code). All run the same reader:
//!
//! 1. `cpus`: online CPUs, then cores, clusters, dies and packages from the CPU-set files;
//! 2. `cache`: caches per CPU, the L2 and the LLC of each;
//! 3. `numa`: nodes and distances;
//! 4. `priority`: priorities and capacities with their source, and ITMT;
//! 5. `allowed`: online ∩ cgroup cpuset (∩ affinity mask for the live system);
//! 6. `domains`: the sched-domain levels;
//! 7. `quota`: the cgroup's CPU bandwidth limit ([`CpuQuota`]), by the rules of std's
//!    `available_parallelism`.
//!
//! Missing files are normal (old kernels, containers): each reader falls back and records a
//! [`Fallback`]. So are a per-CPU file that cannot be read or is empty (read as missing,
//! with a fallback recorded). Malformed files are errors naming the file and its content.
//!
//! ```no_run
//! let topo = lagom_topology::Topology::detect()?;
//! for cpu in topo.allowed_cpus() {
//!     let llc = topo.llc(cpu).unwrap();
//!     println!("CPU {cpu}: LLC {llc}, priority {}", topo.cpu(cpu).unwrap().priority);
//! }
//! # Ok::<(), lagom_topology::TopologyError>(())
//! ```

#![no_std]
#![deny(missing_docs)]

extern crate alloc;
#[cfg(test)]
extern crate std;

mod allowed;
mod cache;
mod cpus;
mod cpuset;
mod domains;
mod error;
mod layout;
mod numa;
mod priority;
mod quota;
mod source;
mod sys;

use alloc::string::String;
use alloc::vec::Vec;

pub use cache::{Cache, CacheKind};
pub use cpuset::{CpuId, CpuSet, Iter, MAX_CPU_ID};
pub use domains::{DomainFlags, DomainLevel, LevelKind};
pub use error::TopologyError;
pub use layout::{Layout, itmt_packing, layout, level_flags, spread};
pub use numa::NumaNode;
pub use priority::{CapacitySource, CoreType, PrioritySource};
pub use quota::{CgroupVersion, CpuQuota};
pub use source::Fallback;

use source::Sysfs;

/// One online CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cpu {
    /// Its number.
    pub id: CpuId,
    /// Index into [`Topology::cores`]: its SMT siblings.
    pub core: usize,
    /// Index into [`Topology::packages`].
    pub package: usize,
    /// Index into [`Topology::dies`], when dies span more than one CPU.
    pub die: Option<usize>,
    /// Index into [`Topology::clusters`], when `cluster_cpus` exists.
    pub cluster: Option<usize>,
    /// Index into [`Topology::caches`] of its L2.
    pub l2: Option<usize>,
    /// Index into [`Topology::caches`] of its last-level cache.
    pub llc: Option<usize>,
    /// The id of its NUMA node (not an index), when it has one.
    pub numa_node: Option<usize>,
    /// Its priority: higher is preferred (see [`Topology::priority_source`]).
    pub priority: u32,
    /// Its capacity, at most 1024 (see [`Topology::capacity_source`]).
    pub capacity: u32,
    /// Its Intel hybrid core type, when the PMU files say.
    pub core_type: Option<CoreType>,
}

/// A CPU's domain at one level: the level and the CPU's span there.
#[derive(Debug, Clone, Copy)]
pub struct Domain<'a> {
    /// The level (kind and flags).
    pub level: &'a DomainLevel,
    /// The CPUs of this domain.
    pub span: &'a CpuSet,
}

/// The topology of one machine.
#[derive(Debug, Clone)]
pub struct Topology {
    root: String,
    possible: CpuSet,
    present: CpuSet,
    online: CpuSet,
    allowed: CpuSet,
    /// Online CPUs in ascending order.
    cpus: Vec<Cpu>,
    /// Index into `cpus` by CPU id (`u32::MAX` for none).
    index: Vec<u32>,
    cores: Vec<CpuSet>,
    packages: Vec<CpuSet>,
    dies: Vec<CpuSet>,
    clusters: Vec<CpuSet>,
    caches: Vec<Cache>,
    numa_nodes: Vec<NumaNode>,
    numa_implicit: bool,
    numa_distances: Option<Vec<Vec<u32>>>,
    levels: Vec<DomainLevel>,
    /// Per CPU (as `cpus`), its domains bottom-up as (level, span) indices.
    domains: Vec<Vec<(usize, usize)>>,
    priority_source: PrioritySource,
    capacity_source: CapacitySource,
    itmt_enabled: Option<bool>,
    cpu_quota: Option<CpuQuota>,
    fallbacks: Vec<Fallback>,
}

impl Topology {
    /// Reads the live system: sysfs at `/`, the process's cgroup cpuset and its affinity
    /// mask (`sched_getaffinity`).
    pub fn detect() -> Result<Topology, TopologyError> {
        Topology::read(Sysfs::new("/"), Some(&process_affinity()?))
    }

    /// Reads a recorded tree: `root` holds `sys/` (and usually `proc/`); its cpuset files
    /// stand in for the process's, and no affinity mask applies.
    pub fn from_sysfs(root: &str) -> Result<Topology, TopologyError> {
        Topology::read(Sysfs::new(root), None)
    }

    /// Reads a tree held in memory, called `name` in messages and [`Topology::root`]:
    /// `files` maps paths below the root (`sys/devices/system/cpu/online`, without or with a
    /// leading `/`) to their contents, as a recorded tree holds them. The same reader as for
    /// a tree on disk runs over it, so a machine described in code (the simulator's built-in
    /// machines, a test's synthetic tree) is read exactly as its recording would be; it needs
    /// no file system, also without `std`.
    ///
    /// ```
    /// use lagom_topology::Topology;
    /// let mut files = Vec::new();
    /// files.push(("sys/devices/system/cpu/online".to_string(), "0-1\n".to_string()));
    /// for cpu in 0..2 {
    ///     let d = format!("sys/devices/system/cpu/cpu{cpu}/topology");
    ///     files.push((format!("{d}/core_cpus_list"), cpu.to_string()));
    ///     files.push((format!("{d}/package_cpus_list"), "0-1".to_string()));
    /// }
    /// let t = Topology::from_files("two-cpus", files)?;
    /// assert_eq!(t.online_cpus().to_string(), "0-1");
    /// assert_eq!(t.cores().len(), 2);
    /// # Ok::<(), lagom_topology::TopologyError>(())
    /// ```
    pub fn from_files(
        name: &str,
        files: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Topology, TopologyError> {
        Topology::read(Sysfs::in_memory(name, files), None)
    }

    /// Like [`from_files`](Topology::from_files), then restricts the allowed CPUs to
    /// `affinity` as [`detect`](Topology::detect) does with the process's mask.
    pub fn from_files_with_affinity(
        name: &str,
        files: impl IntoIterator<Item = (String, String)>,
        affinity: &CpuSet,
    ) -> Result<Topology, TopologyError> {
        Topology::read(Sysfs::in_memory(name, files), Some(affinity))
    }

    /// Like [`from_sysfs`](Topology::from_sysfs), then restricts the allowed CPUs to
    /// `affinity` as [`detect`](Topology::detect) does with the process's mask.
    pub fn from_sysfs_with_affinity(
        root: &str,
        affinity: &CpuSet,
    ) -> Result<Topology, TopologyError> {
        Topology::read(Sysfs::new(root), Some(affinity))
    }

    fn read(mut fs: Sysfs, affinity: Option<&CpuSet>) -> Result<Topology, TopologyError> {
        let topo = cpus::scan(&mut fs)?;
        let (caches, cpu_caches) = cache::scan(&mut fs, &topo)?;
        let numa = numa::scan(&mut fs, &topo.online)?;
        let prio = priority::scan(&mut fs, &topo)?;
        let allowed = allowed::allowed(&mut fs, &topo.online, affinity)?;
        let cpu_quota = quota::cpu_quota(&fs);

        let ids: Vec<CpuId> = topo.cpus.iter().map(|c| c.id).collect();
        let node_of = |id: CpuId| numa.nodes.iter().position(|n| n.cpus.contains(id));
        let node_sets: Vec<CpuSet> = numa.nodes.iter().map(|n| n.cpus.clone()).collect();
        let llc_spans: Vec<&CpuSet> = topo
            .cpus
            .iter()
            .zip(&cpu_caches)
            .map(|(c, cc)| match cc.llc {
                Some(i) => &caches[i].span,
                None => &topo.packages[c.package],
            })
            .collect();
        let input = domains::DomainInput {
            cpus: &ids,
            online: &topo.online,
            core: topo.cpus.iter().map(|c| &topo.cores[c.core]).collect(),
            cluster: topo
                .cpus
                .iter()
                .map(|c| c.cluster.map(|k| &topo.clusters[k]))
                .collect(),
            l2: cpu_caches
                .iter()
                .map(|cc| cc.l2.map(|i| &caches[i].span))
                .collect(),
            llc: llc_spans,
            package: topo
                .cpus
                .iter()
                .map(|c| &topo.packages[c.package])
                .collect(),
            node: ids.iter().map(|&id| node_of(id)).collect(),
            nodes: &node_sets,
            distances: numa.distances.as_deref(),
            capacity: &prio.capacity,
        };
        let (levels, domains) = domains::build(&input);

        let mut index = alloc::vec![u32::MAX; topo.online.last().map_or(0, |l| l + 1)];
        let cpus: Vec<Cpu> = topo
            .cpus
            .iter()
            .enumerate()
            .map(|(i, c)| {
                index[c.id] = i as u32;
                Cpu {
                    id: c.id,
                    core: c.core,
                    package: c.package,
                    die: c.die,
                    cluster: c.cluster,
                    l2: cpu_caches[i].l2,
                    llc: cpu_caches[i].llc,
                    numa_node: node_of(c.id).map(|k| numa.nodes[k].id),
                    priority: prio.priority[i],
                    capacity: prio.capacity[i],
                    core_type: prio.core_type[i],
                }
            })
            .collect();
        fs.take_soft();
        Ok(Topology {
            root: String::from(fs.root()),
            possible: topo.possible,
            present: topo.present,
            online: topo.online,
            allowed,
            cpus,
            index,
            cores: topo.cores,
            packages: topo.packages,
            dies: topo.dies,
            clusters: topo.clusters,
            caches,
            numa_nodes: numa.nodes,
            numa_implicit: numa.implicit,
            numa_distances: numa.distances,
            levels,
            domains,
            priority_source: prio.priority_source,
            capacity_source: prio.capacity_source,
            itmt_enabled: prio.itmt_enabled,
            cpu_quota,
            fallbacks: fs.fallbacks,
        })
    }

    /// The root it was read from (`/` for the live system).
    pub fn root(&self) -> &str {
        &self.root
    }

    /// `cpu/possible` (or every `cpuN` directory when the file is missing).
    pub fn possible_cpus(&self) -> &CpuSet {
        &self.possible
    }

    /// `cpu/present` (or every `cpuN` directory when the file is missing).
    pub fn present_cpus(&self) -> &CpuSet {
        &self.present
    }

    /// Online CPUs that have a `topology/` directory: the processing units.
    pub fn online_cpus(&self) -> &CpuSet {
        &self.online
    }

    /// The CPUs workers may use: online ∩ cgroup cpuset (∩ affinity mask).
    pub fn allowed_cpus(&self) -> &CpuSet {
        &self.allowed
    }

    /// The online CPUs in ascending order.
    pub fn cpus(&self) -> &[Cpu] {
        &self.cpus
    }

    /// One online CPU, or `None` when `id` is not online.
    pub fn cpu(&self, id: CpuId) -> Option<&Cpu> {
        let i = *self.index.get(id)?;
        self.cpus.get(i as usize)
    }

    /// Cores: sets of SMT siblings, in order of first appearance.
    pub fn cores(&self) -> &[CpuSet] {
        &self.cores
    }

    /// The largest number of hardware threads in a core.
    pub fn smt_width(&self) -> usize {
        self.cores.iter().map(CpuSet::len).max().unwrap_or(1)
    }

    /// Packages, in order of first appearance.
    pub fn packages(&self) -> &[CpuSet] {
        &self.packages
    }

    /// Dies that hold more than one CPU (empty when sysfs has no `die_cpus`).
    pub fn dies(&self) -> &[CpuSet] {
        &self.dies
    }

    /// `cluster_cpus` sets (empty when sysfs has none).
    pub fn clusters(&self) -> &[CpuSet] {
        &self.clusters
    }

    /// Data and unified caches, each once.
    pub fn caches(&self) -> &[Cache] {
        &self.caches
    }

    /// The distinct spans of the caches of `level`, sorted by first CPU.
    pub fn cache_spans(&self, level: u8) -> Vec<&CpuSet> {
        cache::spans_of_level(&self.caches, level)
    }

    /// The CPUs sharing `cpu`'s last-level cache (its package when no cache is known), or
    /// `None` when `cpu` is not online. This is the scope of the idle-CPU search.
    pub fn llc(&self, cpu: CpuId) -> Option<&CpuSet> {
        let c = self.cpu(cpu)?;
        Some(match c.llc {
            Some(i) => &self.caches[i].span,
            None => &self.packages[c.package],
        })
    }

    /// True when `a` and `b` share a last-level cache (`cpus_share_cache`).
    pub fn cpus_share_cache(&self, a: CpuId, b: CpuId) -> bool {
        self.llc(a).is_some_and(|s| s.contains(b))
    }

    /// NUMA nodes in ascending id order (one implicit node when sysfs has none).
    pub fn numa_nodes(&self) -> &[NumaNode] {
        &self.numa_nodes
    }

    /// True when sysfs has no `node/` directory and one node was assumed.
    pub fn numa_implicit(&self) -> bool {
        self.numa_implicit
    }

    /// The distance between two nodes, given by id; `None` when unknown.
    pub fn numa_distance(&self, a: usize, b: usize) -> Option<u32> {
        let i = self.numa_nodes.iter().position(|n| n.id == a)?;
        let j = self.numa_nodes.iter().position(|n| n.id == b)?;
        Some(self.numa_distances.as_ref()?[i][j])
    }

    /// The sched-domain levels that at least one CPU has, bottom-up.
    pub fn levels(&self) -> &[DomainLevel] {
        &self.levels
    }

    /// `cpu`'s domains, bottom-up, without the degenerate ones (empty when not online).
    pub fn domains(&self, cpu: CpuId) -> impl Iterator<Item = Domain<'_>> + '_ {
        let list = self
            .index
            .get(cpu)
            .and_then(|&i| self.domains.get(i as usize))
            .map_or(&[][..], Vec::as_slice);
        list.iter().map(|&(l, s)| Domain {
            level: &self.levels[l],
            span: &self.levels[l].spans[s],
        })
    }

    /// Where the priorities came from.
    pub fn priority_source(&self) -> PrioritySource {
        self.priority_source
    }

    /// Where the capacities came from.
    pub fn capacity_source(&self) -> CapacitySource {
        self.capacity_source
    }

    /// True when the priorities differ between CPUs (equal values mean no preference).
    pub fn has_preferred_cpus(&self) -> bool {
        priority::differ(self.cpus.iter().map(|c| c.priority))
    }

    /// True when the capacities differ between CPUs (asymmetric capacity).
    pub fn has_asym_capacity(&self) -> bool {
        priority::differ(self.cpus.iter().map(|c| c.capacity))
    }

    /// `kernel.sched_itmt_enabled`, when readable.
    pub fn itmt_enabled(&self) -> Option<bool> {
        self.itmt_enabled
    }

    /// The CPU quota of the process's cgroup (module doc of [`CpuQuota`]): the live process's
    /// for [`detect`](Topology::detect), the tree's `proc/self/cgroup` and cgroup files for a
    /// recorded or in-memory tree; `None` where there is none.
    pub fn cpu_quota(&self) -> Option<&CpuQuota> {
        self.cpu_quota.as_ref()
    }

    /// What was missing and what was used instead, each once.
    pub fn fallbacks(&self) -> &[Fallback] {
        &self.fallbacks
    }
}

/// The CPUs the calling thread may run on: its affinity mask (`sched_getaffinity`), which
/// [`Topology::detect`] intersects with the online CPUs and the cgroup cpuset.
///
/// # Errors
/// [`TopologyError::Unreadable`] (path `sched_getaffinity(0)`) if the kernel refuses the call.
///
/// ```
/// let mine = lagom_topology::process_affinity()?;
/// assert!(!mine.is_empty());
/// # Ok::<(), lagom_topology::TopologyError>(())
/// ```
pub fn process_affinity() -> Result<CpuSet, TopologyError> {
    let words = sys::affinity::process_affinity().map_err(|e| TopologyError::Unreadable {
        path: String::from("sched_getaffinity(0)"),
        os_error: alloc::format!("{e}"),
    })?;
    Ok(CpuSet::from_words(&words))
}

/// The CPU quota of the calling process's cgroup, as `std::thread::available_parallelism`
/// reads it (the rules are on [`CpuQuota`]); `None` where there is none, or where the files
/// cannot be read.
///
/// ```
/// if let Some(q) = lagom_topology::cpu_quota() {
///     println!("this process may use {} CPUs' worth of time: {q}", q.cpus);
/// }
/// ```
pub fn cpu_quota() -> Option<CpuQuota> {
    quota::cpu_quota(&Sysfs::new("/"))
}

/// [`cpu_quota`] as the files below `root` say: a recorded tree, or one a test writes
/// (`root/proc/self/cgroup`, `root/proc/self/mountinfo`, `root/sys/fs/cgroup/…`).
///
/// # Errors
/// [`TopologyError::Unreadable`] if `root` cannot be listed (a typo, most likely); missing
/// files below it are no error but no quota.
pub fn cpu_quota_at(root: &str) -> Result<Option<CpuQuota>, TopologyError> {
    let fs = Sysfs::new(root);
    fs.check_root()?;
    Ok(quota::cpu_quota(&fs))
}

/// [`cpu_quota`] as a tree held in memory says (`files` as for
/// [`Topology::from_files`], called `name` in [`CpuQuota::file`]).
pub fn cpu_quota_from_files(
    name: &str,
    files: impl IntoIterator<Item = (String, String)>,
) -> Option<CpuQuota> {
    quota::cpu_quota(&Sysfs::in_memory(name, files))
}

/// The kernel's current clocksource (`tsc`, `hpet`, `arch_sys_counter`, …), the clock it
/// trusts for timekeeping, from `/sys/devices/system/clocksource/clocksource0/`; lagom's
/// runtime reads its scheduler clock from the TSC only where the kernel does.
///
/// # Errors
/// [`TopologyError::Unreadable`] if the file cannot be read (no sysfs, as in some sandboxes).
pub fn current_clocksource() -> Result<String, TopologyError> {
    let path = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
    let bytes = sys::fs::read(path).map_err(|e| TopologyError::Unreadable {
        path: String::from(path),
        os_error: alloc::format!("{e}"),
    })?;
    Ok(String::from_utf8_lossy(&bytes).trim().into())
}
