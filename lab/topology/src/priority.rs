//! Per-CPU priority and capacity, and whether ITMT is on.
//!
//! *Priority* orders CPUs for asymmetric packing (the kernel's `arch_asym_cpu_priority`):
//! higher is preferred. It comes from the first source every online CPU has:
//!
//! 1. AMD preferred core: `cpuN/cpufreq/amd_pstate_prefcore_ranking` (valid below 255;
//!    ignored when `amd_pstate_hw_prefcore` says `disabled`);
//! 2. ACPI CPPC `cpuN/acpi_cppc/highest_perf` (Intel ITMT, Arm);
//! 3. `cpuN/cpufreq/amd_pstate_highest_perf`;
//! 4. `cpuN/cpu_capacity`;
//! 5. Intel hybrid `/sys/devices/cpu_core/cpus` (2) and `/sys/devices/cpu_atom/cpus` (1).
//!
//! Otherwise every CPU has priority 0. *Capacity* (the kernel's `capacity_orig`, at most
//! 1024) is `cpu_capacity` where every CPU has it, else `amd_pstate_highest_perf` or CPPC
//! `highest_perf` scaled so that the largest is 1024, else 1024 everywhere. Equal values on
//! every CPU mean "no preference", whatever their source.

use alloc::format;
use alloc::vec::Vec;

use super::cpus::{CPU_DIR, CpuTopology};
use super::source::Sysfs;
use crate::TopologyError;

/// Where the per-CPU priorities came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrioritySource {
    /// `cpufreq/amd_pstate_prefcore_ranking` (AMD preferred core, Linux ≥ 6.9).
    AmdPrefcoreRanking,
    /// `acpi_cppc/highest_perf` (Intel Turbo Boost Max 3.0 / ITMT, Arm CPPC).
    AcpiCppcHighestPerf,
    /// `cpufreq/amd_pstate_highest_perf`.
    AmdHighestPerf,
    /// `cpu_capacity` (Arm big.LITTLE).
    CpuCapacity,
    /// Intel hybrid core type: P-cores (`cpu_core`) 2, E-cores (`cpu_atom`) 1.
    HybridCoreType,
    /// No source: every CPU has priority 0.
    None,
}

/// Where the per-CPU capacities came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CapacitySource {
    /// `cpu_capacity`, as the kernel computed it.
    CpuCapacity,
    /// `cpufreq/amd_pstate_highest_perf`, scaled so that the largest is 1024.
    AmdHighestPerf,
    /// `acpi_cppc/highest_perf`, scaled so that the largest is 1024.
    AcpiCppcHighestPerf,
    /// No source: every CPU has capacity 1024.
    None,
}

/// An Intel hybrid core type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CoreType {
    /// A performance core (`/sys/devices/cpu_core/cpus`).
    Performance,
    /// An efficiency core (`/sys/devices/cpu_atom/cpus`).
    Efficiency,
}

/// What `scan` finds, per CPU in the order of `topo.cpus`.
pub(crate) struct Priorities {
    pub(crate) priority: Vec<u32>,
    pub(crate) capacity: Vec<u32>,
    pub(crate) core_type: Vec<Option<CoreType>>,
    pub(crate) priority_source: PrioritySource,
    pub(crate) capacity_source: CapacitySource,
    pub(crate) itmt_enabled: Option<bool>,
}

/// One value per CPU, or `None` when some CPU lacks it.
fn per_cpu(
    fs: &mut Sysfs,
    topo: &CpuTopology,
    file: &'static str,
    valid: fn(i64) -> bool,
) -> Result<Option<Vec<u32>>, TopologyError> {
    let mut values = Vec::with_capacity(topo.cpus.len());
    for (i, cpu) in topo.cpus.iter().enumerate() {
        match fs.read_i64(&format!("{CPU_DIR}/cpu{}/{file}", cpu.id))? {
            Some(v) if valid(v) => values.push(u32::try_from(v).unwrap_or(u32::MAX)),
            Some(_) | None => {
                if i > 0 {
                    fs.fall_back(file, "the next priority source (not every CPU has it)");
                }
                return Ok(None);
            }
        }
    }
    Ok(Some(values))
}

fn scaled(values: &[u32]) -> Vec<u32> {
    let max = u64::from(values.iter().copied().max().unwrap_or(1).max(1));
    values
        .iter()
        .map(|&v| ((u64::from(v) * 1024) / max).max(1) as u32)
        .collect()
}

pub(crate) fn scan(fs: &mut Sysfs, topo: &CpuTopology) -> Result<Priorities, TopologyError> {
    let positive = |v: i64| v > 0 && v <= i64::from(u32::MAX);
    let hw_prefcore_off = topo.cpus.first().is_some_and(|c| {
        matches!(
            fs.read(&format!(
                "{CPU_DIR}/cpu{}/cpufreq/amd_pstate_hw_prefcore",
                c.id
            )),
            Ok(Some(ref t)) if t == "disabled"
        )
    });
    let ranking = if hw_prefcore_off {
        None
    } else {
        per_cpu(fs, topo, "cpufreq/amd_pstate_prefcore_ranking", |v| {
            (0..255).contains(&v)
        })?
    };
    let cppc = per_cpu(fs, topo, "acpi_cppc/highest_perf", positive)?;
    let amd_perf = per_cpu(fs, topo, "cpufreq/amd_pstate_highest_perf", positive)?;
    let capacity_file = per_cpu(fs, topo, "cpu_capacity", |v| (1..=1024).contains(&v))?;
    let p_cores = fs.read_list("/sys/devices/cpu_core/cpus")?;
    let e_cores = fs.read_list("/sys/devices/cpu_atom/cpus")?;
    let core_type: Vec<Option<CoreType>> = topo
        .cpus
        .iter()
        .map(|c| {
            if p_cores.as_ref().is_some_and(|s| s.contains(c.id)) {
                Some(CoreType::Performance)
            } else if e_cores.as_ref().is_some_and(|s| s.contains(c.id)) {
                Some(CoreType::Efficiency)
            } else {
                None
            }
        })
        .collect();
    let hybrid = core_type.iter().all(Option::is_some).then(|| {
        core_type
            .iter()
            .map(|t| match t {
                Some(CoreType::Performance) => 2,
                _ => 1,
            })
            .collect::<Vec<u32>>()
    });

    let (priority_source, priority) = if let Some(v) = ranking.clone() {
        (PrioritySource::AmdPrefcoreRanking, v)
    } else if let Some(v) = cppc.clone() {
        (PrioritySource::AcpiCppcHighestPerf, v)
    } else if let Some(v) = amd_perf.clone() {
        (PrioritySource::AmdHighestPerf, v)
    } else if let Some(v) = capacity_file.clone() {
        (PrioritySource::CpuCapacity, v)
    } else if let Some(v) = hybrid {
        (PrioritySource::HybridCoreType, v)
    } else {
        (PrioritySource::None, alloc::vec![0; topo.cpus.len()])
    };
    let (capacity_source, capacity) = if let Some(v) = capacity_file {
        (CapacitySource::CpuCapacity, v)
    } else if let Some(v) = amd_perf {
        (CapacitySource::AmdHighestPerf, scaled(&v))
    } else if let Some(v) = cppc {
        (CapacitySource::AcpiCppcHighestPerf, scaled(&v))
    } else {
        (CapacitySource::None, alloc::vec![1024; topo.cpus.len()])
    };

    let mut itmt_enabled = None;
    for rel in [
        "/proc/sys/kernel/sched_itmt_enabled",
        "/sys/kernel/debug/x86/sched_itmt_enabled",
    ] {
        if let Some(text) = fs.read(rel)? {
            itmt_enabled = match text.as_str() {
                "1" | "Y" | "y" => Some(true),
                "0" | "N" | "n" => Some(false),
                _ => {
                    return Err(TopologyError::MalformedNumber {
                        path: fs.path(rel),
                        content: text,
                    });
                }
            };
            break;
        }
    }
    Ok(Priorities {
        priority,
        capacity,
        core_type,
        priority_source,
        capacity_source,
        itmt_enabled,
    })
}

/// True when the values are not all equal.
pub(crate) fn differ(values: impl IntoIterator<Item = u32>) -> bool {
    let mut it = values.into_iter();
    let Some(first) = it.next() else { return false };
    it.any(|v| v != first)
}
