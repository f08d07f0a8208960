//! The simulated machine: one virtual CPU per allowed CPU of a [`Topology`], and the
//! machines the simulator knows by name, described in code as sysfs trees held in memory
//! ([`Topology::from_files`]) so that the same reader builds them as it builds a recording.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::error::MachineError;
use lagom_policy::CpuMap;
use lagom_topology::{CpuId, Topology};

/// The virtual CPUs of a simulation.
///
/// Virtual CPUs are numbered `0..n` in the order the threaded runtime gives its workers on
/// that topology, and their [`CpuMap`] (domains, LLC spans, SMT siblings, priorities) is the
/// one it would build: both come from one function (`lagom_topology::layout`), so placement and
/// balancing decide alike in both drivers. SMT siblings and LLC members are adjacent (on the
/// 7950X, virtual CPUs 0 and 1 are OS CPUs 0 and 16). Scenarios name CPUs by OS id
/// (`cpus=4-7`), and the machine maps between the two.
///
/// Named machines:
///
/// * `ryzen-7950x`: the AMD Ryzen 9 7950X of the preferred-core stall report — 16 cores / 32
///   threads (siblings n and n+16), two CCDs of 8 cores with a 32 MiB L3 each, amd-pstate
///   preferred-core rankings (CPUs 4–7 ranked 211 / 216 / 231 / 221 as in the report, the other
///   cores invented and lower, so that CPU 6 and its sibling 22 lead), ITMT on. The same tree,
///   file for file, as the topology tests' synthetic one (`tests/topology_util/synthetic.rs`; a
///   test compares the two).
/// * `cpus-N`: N single-thread CPUs sharing one LLC, in one package.
/// * `cpus-N-llcs-L`: N single-thread CPUs in L equal LLCs (N a multiple of L), one package.
#[derive(Debug, Clone)]
pub struct Machine {
    name: String,
    topology: Topology,
    /// OS CPU id of each virtual CPU.
    ids: Vec<CpuId>,
    /// Virtual CPU of each OS CPU id (`u32::MAX`: none).
    index: Vec<u32>,
    /// The domains and priorities over the virtual CPUs.
    map: CpuMap,
    /// Why the map is flat or lost a level, if the layout fell back.
    fallback: Option<&'static str>,
}

impl Machine {
    /// One virtual CPU per allowed CPU of `topology`, called `name` in reports.
    ///
    /// # Errors
    /// [`MachineError::NoCpus`] if the topology allows no CPU.
    pub fn new(name: &str, topology: Topology) -> Result<Machine, MachineError> {
        let allowed: Vec<CpuId> = topology.allowed_cpus().iter().collect();
        let Some(&last) = allowed.last() else {
            return Err(MachineError::NoCpus {
                name: String::from(name),
            });
        };
        let lay = lagom_topology::layout(&topology, &allowed, &[]);
        let ids = lay.cpus;
        let mut index = alloc::vec![u32::MAX; last + 1];
        for (i, &id) in ids.iter().enumerate() {
            index[id] = i as u32;
        }
        Ok(Machine {
            name: String::from(name),
            topology,
            ids,
            index,
            map: lay.map,
            fallback: lay.fallback,
        })
    }

    /// A machine the simulator knows by name (module doc), or `None`.
    ///
    /// ```
    /// let m = lagom_sim::Machine::named("ryzen-7950x").unwrap();
    /// assert_eq!(m.cpus(), 32);
    /// assert!(m.share_llc(m.index_of(6).unwrap(), m.index_of(22).unwrap()));
    /// assert!(!m.share_llc(m.index_of(6).unwrap(), m.index_of(8).unwrap()));
    /// assert_eq!(lagom_sim::Machine::named("cpus-4-llcs-2").unwrap().cpus(), 4);
    /// ```
    pub fn named(name: &str) -> Option<Machine> {
        let files = if name == "ryzen-7950x" {
            ryzen_7950x_files()
        } else {
            let rest = name.strip_prefix("cpus-")?;
            let (n, l) = match rest.split_once("-llcs-") {
                Some((n, l)) => (n.parse().ok()?, l.parse().ok()?),
                None => (rest.parse().ok()?, 1),
            };
            if n == 0 || l == 0 || n % l != 0 || n > 4096 {
                return None;
            }
            uniform_files(n, l)
        };
        let topology = Topology::from_files(name, files).ok()?;
        Machine::new(name, topology).ok()
    }

    /// The names [`Machine::named`] accepts, as patterns.
    pub const NAMES: &'static [&'static str] = &["ryzen-7950x", "cpus-N", "cpus-N-llcs-L"];

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The topology it was built from.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The number of virtual CPUs.
    pub fn cpus(&self) -> usize {
        self.ids.len()
    }

    /// The OS CPU id of virtual CPU `cpu`.
    pub fn os_id(&self, cpu: usize) -> CpuId {
        self.ids[cpu]
    }

    /// The virtual CPU of OS CPU `id`, if the machine has it.
    pub fn index_of(&self, id: CpuId) -> Option<usize> {
        match self.index.get(id) {
            Some(&i) if i != u32::MAX => Some(i as usize),
            _ => None,
        }
    }

    /// Whether virtual CPUs `a` and `b` share a last-level cache.
    pub fn share_llc(&self, a: usize, b: usize) -> bool {
        self.map.share_llc(a, b)
    }

    /// The preferred-core priority of virtual CPU `cpu` (higher is preferred).
    pub fn priority(&self, cpu: usize) -> u32 {
        self.map.priority(cpu)
    }

    /// The domains and priorities over the virtual CPUs, as the threaded runtime's workers
    /// would have them on this topology (module doc).
    ///
    /// ```
    /// let m = lagom_sim::Machine::named("cpus-8-llcs-2").unwrap();
    /// assert_eq!(m.cpu_map().llc(5), 4..8);
    /// ```
    pub fn cpu_map(&self) -> &CpuMap {
        &self.map
    }

    /// Why the map is flat or lost a domain level, if the layout had to fall back (a
    /// topology whose levels do not nest over its CPUs).
    pub fn layout_fallback(&self) -> Option<&'static str> {
        self.fallback
    }
}

const CPU: &str = "sys/devices/system/cpu";

/// The preferred-core stall report's rankings per core (module doc); the topology tests'
/// synthetic tree uses the same values (`RYZEN_RANKINGS` there).
pub(crate) const RYZEN_RANKINGS: [u32; 16] = [
    186, 191, 196, 201, 211, 216, 231, 221, 146, 151, 156, 161, 166, 171, 176, 181,
];

struct Files(BTreeMap<String, String>);

impl Files {
    fn put(&mut self, path: String, content: &str) {
        self.0.insert(path, format!("{content}\n"));
    }

    fn topology(&mut self, cpu: usize, core: &str, package: &str, core_id: usize) {
        let d = format!("{CPU}/cpu{cpu}/topology");
        self.put(format!("{d}/core_cpus_list"), core);
        self.put(format!("{d}/thread_siblings_list"), core);
        self.put(format!("{d}/package_cpus_list"), package);
        self.put(format!("{d}/core_siblings_list"), package);
        self.put(format!("{d}/core_id"), &core_id.to_string());
        self.put(format!("{d}/physical_package_id"), "0");
    }

    fn cache(&mut self, cpu: usize, index: usize, level: u8, kind: &str, shared: &str, size: &str) {
        let d = format!("{CPU}/cpu{cpu}/cache/index{index}");
        self.put(format!("{d}/level"), &level.to_string());
        self.put(format!("{d}/type"), kind);
        self.put(format!("{d}/shared_cpu_list"), shared);
        self.put(format!("{d}/size"), size);
    }
}

/// The 7950X of the preferred-core stall report as sysfs files (module doc).
fn ryzen_7950x_files() -> BTreeMap<String, String> {
    let mut f = Files(BTreeMap::new());
    for name in ["online", "possible", "present"] {
        f.put(format!("{CPU}/{name}"), "0-31");
    }
    for cpu in 0..32 {
        let core = cpu % 16;
        let siblings = format!("{core},{}", core + 16);
        f.topology(cpu, &siblings, "0-31", core);
        let d = format!("{CPU}/cpu{cpu}/topology");
        f.put(format!("{d}/cluster_cpus_list"), &siblings);
        f.put(format!("{d}/die_cpus_list"), "0-31");
        let ccd = if core < 8 { "0-7,16-23" } else { "8-15,24-31" };
        f.cache(cpu, 0, 1, "Data", &siblings, "32K");
        f.cache(cpu, 1, 1, "Instruction", &siblings, "32K");
        f.cache(cpu, 2, 2, "Unified", &siblings, "1024K");
        f.cache(cpu, 3, 3, "Unified", ccd, "32768K");
        let freq = format!("{CPU}/cpu{cpu}/cpufreq");
        f.put(
            format!("{freq}/amd_pstate_prefcore_ranking"),
            &RYZEN_RANKINGS[core].to_string(),
        );
        f.put(format!("{freq}/amd_pstate_highest_perf"), "166");
        f.put(format!("{freq}/amd_pstate_hw_prefcore"), "enabled");
        f.put(format!("{CPU}/cpu{cpu}/acpi_cppc/highest_perf"), "166");
    }
    f.put("sys/devices/system/node/node0/cpulist".into(), "0-31");
    f.put("sys/devices/system/node/node0/distance".into(), "10");
    f.put("proc/sys/kernel/sched_itmt_enabled".into(), "1");
    f.put("proc/self/cgroup".into(), "0::/");
    f.put(
        "proc/mounts".into(),
        "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0",
    );
    f.put(
        "sys/fs/cgroup/cgroup.controllers".into(),
        "cpuset cpu io memory pids",
    );
    f.put("sys/fs/cgroup/cpuset.cpus.effective".into(), "0-31");
    f.0
}

/// `n` single-thread CPUs in `llcs` equal LLCs, one package, one NUMA node.
fn uniform_files(n: usize, llcs: usize) -> BTreeMap<String, String> {
    let mut f = Files(BTreeMap::new());
    let all = format!("0-{}", n - 1);
    for name in ["online", "possible", "present"] {
        f.put(format!("{CPU}/{name}"), &all);
    }
    let per = n / llcs;
    for cpu in 0..n {
        f.topology(cpu, &cpu.to_string(), &all, cpu);
        let first = cpu / per * per;
        let llc = format!("{first}-{}", first + per - 1);
        f.cache(cpu, 0, 1, "Data", &cpu.to_string(), "48K");
        f.cache(cpu, 1, 2, "Unified", &cpu.to_string(), "2048K");
        f.cache(cpu, 2, 3, "Unified", &llc, "32768K");
    }
    f.put("sys/devices/system/node/node0/cpulist".into(), &all);
    f.put("sys/devices/system/node/node0/distance".into(), "10");
    f.0
}
