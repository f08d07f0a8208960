//! Synthetic sysfs trees, written file by file in the kernel's documented layout, for what no
//! recording has: AMD preferred-core rankings, a container's restricted cpuset with offline
//! CPUs, and Intel hybrid PMU files. They are labelled synthetic: the values are chosen, not
//! recorded.

use super::Tree;

const CPU: &str = "sys/devices/system/cpu";

/// `n` single-thread CPUs in one package, with `cpu/online` and nothing else: the smallest
/// tree the reader accepts. The error tests break it one file at a time.
pub fn small_machine(n: usize) -> Tree {
    let t = Tree::new();
    let all = format!("0-{}", n - 1);
    t.file(&format!("{CPU}/online"), &all);
    t.file(&format!("{CPU}/possible"), &all);
    for cpu in 0..n {
        t.topology(cpu, &cpu.to_string(), &all, cpu, 0);
    }
    t
}

/// A Ryzen 9 7950X as the preferred-core stall report describes it: 16 cores / 32 threads
/// (siblings n and n+16), two CCDs of 8 cores each with its own 32 MiB L3, amd-pstate with
/// preferred cores, ITMT on.
///
/// Rankings: CPUs 4-7 are 211, 216, 231, 221 (as reported); the other cores' values are
/// invented, all below 231 so that CPU 6 (and its sibling 22) is the most preferred.
/// `amd_pstate_highest_perf` is 166 everywhere (as reported), and so is
/// `acpi_cppc/highest_perf` here, so that a reader preferring CPPC over the ranking fails.
pub const RYZEN_RANKINGS: [u32; 16] = [
    186, 191, 196, 201, 211, 216, 231, 221, 146, 151, 156, 161, 166, 171, 176, 181,
];

pub fn ryzen_7950x() -> Tree {
    let t = Tree::new();
    t.file(&format!("{CPU}/online"), "0-31");
    t.file(&format!("{CPU}/possible"), "0-31");
    t.file(&format!("{CPU}/present"), "0-31");
    for cpu in 0..32 {
        let core = cpu % 16;
        let siblings = format!("{core},{}", core + 16);
        t.topology(cpu, &siblings, "0-31", core, 0);
        let d = format!("{CPU}/cpu{cpu}/topology");
        t.file(&format!("{d}/cluster_cpus_list"), &siblings);
        t.file(&format!("{d}/die_cpus_list"), "0-31");
        let ccd = if core < 8 { "0-7,16-23" } else { "8-15,24-31" };
        t.cache(cpu, 0, 1, "Data", &siblings, "32K");
        t.cache(cpu, 1, 1, "Instruction", &siblings, "32K");
        t.cache(cpu, 2, 2, "Unified", &siblings, "1024K");
        t.cache(cpu, 3, 3, "Unified", ccd, "32768K");
        // amd-pstate publishes its files in the policy directory, reached through a
        // relative symlink, as on a real system.
        let policy = format!("{CPU}/cpufreq/policy{cpu}");
        t.file(
            &format!("{policy}/amd_pstate_prefcore_ranking"),
            &RYZEN_RANKINGS[core].to_string(),
        );
        t.file(&format!("{policy}/amd_pstate_highest_perf"), "166");
        t.file(&format!("{policy}/amd_pstate_hw_prefcore"), "enabled");
        t.symlink(
            &format!("{CPU}/cpu{cpu}/cpufreq"),
            &format!("../cpufreq/policy{cpu}"),
        );
        t.file(&format!("{CPU}/cpu{cpu}/acpi_cppc/highest_perf"), "166");
    }
    t.file("sys/devices/system/node/node0/cpulist", "0-31");
    t.file("sys/devices/system/node/node0/distance", "10");
    t.file("proc/sys/kernel/sched_itmt_enabled", "1");
    t.file("proc/self/cgroup", "0::/");
    t.file(
        "proc/mounts",
        "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0",
    );
    t.file(
        "sys/fs/cgroup/cgroup.controllers",
        "cpuset cpu io memory pids",
    );
    t.file("sys/fs/cgroup/cpuset.cpus.effective", "0-31");
    t
}

/// A container on an 8-CPU host (4 cores x 2 threads): CPUs 6-7 offline (their directories
/// hold only `online` = 0, as the kernel leaves them), no `node/` directory (masked), and a
/// cgroup v2 cpuset of `cpuset` at `cgroup_path`, while the root cgroup allows every CPU.
pub fn container(cgroup_path: &str, cpuset: &str) -> Tree {
    let t = Tree::new();
    t.file(&format!("{CPU}/online"), "0-5");
    t.file(&format!("{CPU}/offline"), "6-7");
    t.file(&format!("{CPU}/possible"), "0-7");
    t.file(&format!("{CPU}/present"), "0-7");
    for cpu in 0..6 {
        let core = cpu / 2;
        let siblings = format!("{}-{}", 2 * core, 2 * core + 1);
        t.topology(cpu, &siblings, "0-5", core, 0);
        t.cache(cpu, 0, 1, "Data", &siblings, "48K");
        t.cache(cpu, 1, 2, "Unified", &siblings, "2048K");
        // Offline CPUs still appear in the shared maps of some kernels.
        t.cache(cpu, 2, 3, "Unified", "0-7", "16384K");
    }
    for cpu in 6..8 {
        t.file(&format!("{CPU}/cpu{cpu}/online"), "0");
    }
    t.file(
        "proc/mounts",
        "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0",
    );
    t.file("proc/self/cgroup", &format!("0::{cgroup_path}"));
    t.file("sys/fs/cgroup/cgroup.controllers", "cpuset cpu memory");
    t.file("sys/fs/cgroup/cpuset.cpus.effective", "0-7");
    let dir = format!("sys/fs/cgroup{}", cgroup_path.trim_end_matches('/'));
    t.file(&format!("{dir}/cpuset.cpus.effective"), cpuset);
    t
}

/// An Intel hybrid part (Raptor Lake-like): 6 P-cores with HT (CPUs 0-11, siblings 2k and
/// 2k+1) and 8 E-cores (CPUs 12-19) in two clusters of 4 sharing an L2, one L3, and the
/// PMU files `/sys/devices/cpu_core/cpus` and `/sys/devices/cpu_atom/cpus`; no CPPC, no
/// `cpu_capacity`, so the core type is the only priority source.
pub fn intel_hybrid() -> Tree {
    let t = Tree::new();
    t.file(&format!("{CPU}/online"), "0-19");
    t.file(&format!("{CPU}/possible"), "0-19");
    for cpu in 0..20 {
        let (siblings, cluster, l2, core_id) = if cpu < 12 {
            let s = format!("{}-{}", cpu & !1, cpu | 1);
            (s.clone(), s.clone(), s, (cpu / 2) * 4)
        } else {
            let c = if cpu < 16 { "12-15" } else { "16-19" };
            (cpu.to_string(), c.to_string(), c.to_string(), 48 + cpu)
        };
        t.topology(cpu, &siblings, "0-19", core_id, 0);
        t.file(
            &format!("{CPU}/cpu{cpu}/topology/cluster_cpus_list"),
            &cluster,
        );
        t.cache(cpu, 0, 1, "Data", &siblings, "48K");
        t.cache(cpu, 1, 1, "Instruction", &siblings, "32K");
        t.cache(cpu, 2, 2, "Unified", &l2, "2048K");
        t.cache(cpu, 3, 3, "Unified", "0-19", "24576K");
    }
    t.file("sys/devices/system/node/node0/cpulist", "0-19");
    t.file("sys/devices/system/node/node0/distance", "10");
    t.file("sys/devices/cpu_core/cpus", "0-11");
    t.file("sys/devices/cpu_atom/cpus", "12-19");
    t
}
