//! The process's register of the CPUs its runtimes' workers are pinned to: two runtimes on
//! one CPU oversubscribe it (each pins a worker there, and the kernel, not lagom, then shares
//! the CPU between them: time slices of milliseconds, spinning idle workers taking turns), so
//! the runtime whose build makes a CPU doubly claimed says so on stderr, once per process,
//! unless it was built with [`Builder::share_cpus`](super::Builder::share_cpus).
//!
//! A counter per CPU, raised at build and lowered when the runtime is dropped, for CPUs below
//! [`TRACKED`] (beyond them nothing is checked): one atomic add per worker, no lock, and two
//! runtimes built at once cannot both miss each other (one of the two adds sees the other's).
//! Other processes are not seen: two programs each with a runtime on the same CPUs
//! oversubscribe them without a word (split them with `taskset` or cgroup cpusets, or with
//! [`Builder::worker_cpus`](super::Builder::worker_cpus) in each).

use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU16, Ordering};

/// CPUs `0..TRACKED` are counted.
pub(crate) const TRACKED: usize = 1024;

/// Workers pinned to each CPU, over the process's runtimes.
static PINNED: [AtomicU16; TRACKED] = [const { AtomicU16::new(0) }; TRACKED];

/// Whether the warning was printed.
static WARNED: AtomicBool = AtomicBool::new(false);

/// A runtime's claim on its workers' CPUs, given back on drop.
#[derive(Debug)]
pub(crate) struct CpuClaim {
    cpus: Vec<usize>,
    /// The CPUs another runtime had claimed when this one was built.
    shared: Vec<usize>,
}

impl CpuClaim {
    /// Claims `cpus` (those below [`TRACKED`]); returns the claim and warns (once per
    /// process, unless `quiet`) if another runtime holds one of them.
    pub(crate) fn new(cpus: &[usize], quiet: bool) -> CpuClaim {
        let cpus: Vec<usize> = cpus.iter().copied().filter(|&c| c < TRACKED).collect();
        let shared: Vec<usize> = cpus
            .iter()
            .copied()
            .filter(|&c| PINNED[c].fetch_add(1, Ordering::Relaxed) > 0)
            .collect();
        if !shared.is_empty() && !quiet && !WARNED.swap(true, Ordering::Relaxed) {
            warn(&shared);
        }
        CpuClaim { cpus, shared }
    }

    /// The CPUs another runtime of the process held when this one was built.
    pub(crate) fn shared(&self) -> &[usize] {
        &self.shared
    }
}

impl Drop for CpuClaim {
    fn drop(&mut self) {
        for &c in &self.cpus {
            PINNED[c].fetch_sub(1, Ordering::Relaxed);
        }
    }
}

fn warn(shared: &[usize]) {
    let mut list = alloc::string::String::new();
    for (i, c) in shared.iter().enumerate() {
        if i > 0 {
            list.push_str(", ");
        }
        list.push_str(&alloc::format!("{c}"));
    }
    let msg = alloc::format!(
        "lagom: a runtime pins workers to CPU(s) {list}, where another runtime of this process \
         already runs workers: each of these CPUs is now shared by two workers, which the \
         kernel time-slices. Give each runtime its own CPUs (Builder::worker_cpus), or, if the \
         sharing is meant, build it with Builder::share_cpus(true). (Said once per process.)\n"
    );
    #[cfg(feature = "std")]
    std::eprint!("{msg}");
    #[cfg(not(feature = "std"))]
    crate::sys::signal::write_stderr(msg.as_bytes());
}
