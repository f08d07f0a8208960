//! Runqueue parameters: the base slice and its scaling with the CPU count, the tick, the
//! migration cost, and the feature set.

use super::features::Features;

/// The kernel's "normalized" base slice, 0.70 ms, before CPU-count scaling.
pub const NORMALIZED_BASE_SLICE: u64 = 700_000;

/// How the base slice grows with the number of CPUs (`sysctl_sched_tunable_scaling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunableScaling {
    /// Factor 1.
    None,
    /// Factor `1 + ⌊log2 ncpus⌋` (the kernel's default).
    Log,
    /// Factor `ncpus`.
    Linear,
}

/// Runqueue parameters: slices, tick, thresholds and the feature set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RqConfig {
    /// Base slice (ns) given to entities without a custom slice.
    pub base_slice: u64,
    /// Unscaled base slice (ns); the protection length when RUN_TO_PARITY is off.
    pub normalized_base_slice: u64,
    /// Tick period (ns); part of the lag clamp.
    pub tick: u64,
    /// `sysctl_sched_migration_cost` (ns); the preempt_sync threshold.
    pub migration_cost: u64,
    /// The scheduler features this runqueue obeys.
    pub features: Features,
}

impl RqConfig {
    /// The kernel's defaults for `ncpus` CPUs: base slice 0.7 ms × (1 + ⌊log2 min(ncpus, 8)⌋),
    /// tick 1 ms (HZ = 1000), migration cost 0.5 ms, default features.
    ///
    /// ```
    /// use lagom_policy::RqConfig;
    /// assert_eq!(RqConfig::for_cpus(1).base_slice, 700_000);
    /// assert_eq!(RqConfig::for_cpus(2).base_slice, 1_400_000);
    /// assert_eq!(RqConfig::for_cpus(64).base_slice, 2_800_000);
    /// ```
    pub fn for_cpus(ncpus: usize) -> RqConfig {
        RqConfig {
            base_slice: scaled_base_slice(ncpus, TunableScaling::Log),
            normalized_base_slice: NORMALIZED_BASE_SLICE,
            tick: 1_000_000,
            migration_cost: 500_000,
            features: Features::DEFAULT,
        }
    }
}

/// `NORMALIZED_BASE_SLICE` scaled for `ncpus` CPUs (capped at 8, as in the kernel).
pub fn scaled_base_slice(ncpus: usize, scaling: TunableScaling) -> u64 {
    let n = ncpus.clamp(1, 8) as u64;
    let factor = match scaling {
        TunableScaling::None => 1,
        TunableScaling::Log => 1 + n.ilog2() as u64,
        TunableScaling::Linear => n,
    };
    NORMALIZED_BASE_SLICE * factor
}
