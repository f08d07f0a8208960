//! The one error type of the crate.
//!
//! Every message says what was wrong and what to do about it: an unknown feature name lists
//! the valid ones, a CPU outside the allowed set names the allowed ones, an unreadable sysfs
//! file names its path (`TopologyError`, wrapped).
//!
//! ## Out-of-range settings: one rule
//!
//! A setting that is the kernel's own concept follows the kernel: a nice level is clamped to
//! −20..=19 as `setpriority(2)` clamps it, and a slice (a task's, or the runtime's default) to
//! 0.1 ms – 100 ms as the kernel clamps `sched_attr.sched_runtime`; their docs say so. Every
//! other setting refuses a value outside its range with an error of this type that names the
//! value and the range (a stack below the minimum, an idle spin above the maximum, an empty or
//! disallowed CPU list, a trace capacity of 0, a blocking pool bound of 0, an unknown
//! feature), and a bad value never panics the runtime or loses a task.

use alloc::string::String;
use core::fmt;

/// Everything that can go wrong when configuring or starting lagom.
///
/// Bad input is reported through this type; it never panics the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A feature string named a feature that does not exist (the name, and every valid
    /// one).
    UnknownFeature(lagom_policy::UnknownFeature),
    /// The machine's topology could not be read (what, where, and what to do: the
    /// topology crate's error).
    Topology(lagom_topology::TopologyError),
    /// A task stack size below the minimum was requested.
    StackTooSmall {
        /// The size asked for, in bytes.
        requested: usize,
        /// The smallest size accepted, in bytes.
        minimum: usize,
    },
    /// An idle spin longer than the maximum was requested.
    IdleSpinTooLong {
        /// The spin asked for.
        requested: core::time::Duration,
        /// The longest spin accepted.
        maximum: core::time::Duration,
    },
    /// A timer spin longer than the maximum was requested.
    TimerSpinTooLong {
        /// The spin asked for.
        requested: core::time::Duration,
        /// The longest spin accepted.
        maximum: core::time::Duration,
    },
    /// The kernel refused to map a task stack.
    StackMap {
        /// The usable size asked for, in bytes.
        size: usize,
        /// The `errno` of the failed `mmap`/`mprotect`.
        errno: i32,
    },
    /// Setting up stack-overflow reporting (signal handler or alternate signal stack) failed.
    SignalSetup {
        /// The `errno` of the failed call.
        errno: i32,
    },
    /// A runtime was configured with no worker CPU.
    NoCpus,
    /// A worker CPU is not in the process's allowed set (or is listed twice).
    CpuNotAllowed {
        /// The CPU asked for.
        cpu: usize,
        /// The CPUs this process may run on.
        allowed: alloc::vec::Vec<usize>,
    },
    /// `Builder::worker_threads` asked for no worker, or for more workers than there are
    /// CPUs to pin them to (one pinned worker per CPU).
    WorkerThreads {
        /// The number asked for.
        requested: usize,
        /// The CPUs the workers could run on: `worker_cpus`, or the process's allowed CPUs.
        cpus: alloc::vec::Vec<usize>,
        /// Whether `cpus` is the `worker_cpus` list (else the allowed CPUs).
        listed: bool,
    },
    /// A worker thread could not be started.
    ThreadSpawn {
        /// The error number `pthread_create` returned.
        errno: i32,
    },
    /// A task's CPU affinity names a CPU that has no worker (or no CPU at all).
    AffinityOutsideWorkers {
        /// The CPU asked for (`usize::MAX`: the list was empty).
        cpu: usize,
        /// The CPUs of the runtime's workers.
        workers: alloc::vec::Vec<usize>,
    },
    /// A call that only a task can make was made outside tasks.
    NotInTask,
    /// The trace logs asked for (`Builder::trace_capacity`) are empty or cannot be allocated.
    TraceCapacity {
        /// The capacity asked for, in events per log.
        events: usize,
        /// The number of workers (each has a log, and there is one more for outside threads).
        workers: usize,
    },
    /// A setting was given a value outside the range it accepts. (Settings that are the
    /// kernel's own concepts — nice levels, slices — are clamped as the kernel clamps them
    /// instead; each setting's documentation says which rule it follows.)
    OutOfRange {
        /// The setting, as its function is named (e.g. `"Builder::trace_capacity"`).
        setting: &'static str,
        /// The value given, as text.
        value: String,
        /// The values accepted, as text (e.g. `"1 to 10000"`).
        valid: &'static str,
    },
    /// A trace could not be written to its file (`Trace::save`: the path and the OS
    /// error).
    TraceWrite(lagom_trace::SaveError),
    /// `Builder::interpose_sleep` (the `interpose` feature) was asked for, but this program's
    /// calls of `clock_nanosleep` do not reach lagom's hook: another definition of the
    /// function is linked ahead of it.
    InterposeInactive,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownFeature(e) => e.fmt(f),
            Error::Topology(e) => e.fmt(f),
            Error::StackTooSmall { requested, minimum } => write!(
                f,
                "task stack size {requested} bytes is below the minimum of {} KiB; \
                 ask for at least {minimum} bytes",
                minimum / 1024
            ),
            Error::TimerSpinTooLong { requested, maximum } => write!(
                f,
                "timer spin of {requested:?} is longer than the maximum of {maximum:?}; an \
                 idle worker's futex sleep ends some tens of µs after its deadline, so a \
                 longer spin only burns CPU: ask for a shorter one, or Duration::ZERO for \
                 plain futex timeouts"
            ),
            Error::IdleSpinTooLong { requested, maximum } => write!(
                f,
                "idle spin of {requested:?} is longer than the maximum of {maximum:?}; a \
                 futex wake costs tens of µs, so a longer spin only burns CPU: ask for a \
                 shorter one (the spin is a duration, not a count), or Duration::ZERO to sleep \
                 at once"
            ),
            Error::StackMap { size, errno } => write!(
                f,
                "could not map a task stack of {} KiB: errno {errno} ({}); lower the stack \
                 size or the number of live tasks, or raise the kernel's limit on mappings \
                 (sysctl vm.max_map_count=262144; {})",
                size / 1024,
                crate::sys::mem::errno_name(*errno),
                if crate::sys::mem::guard_regions() {
                    "stacks are batched into few mappings here, so memory is the likelier limit"
                } else {
                    "this kernel has no guard regions (Linux 6.13), so each stack takes two \
                     mappings: about 32 000 live stacks at the default of 65 530"
                }
            ),
            Error::SignalSetup { errno } => write!(
                f,
                "could not set up stack-overflow reporting (sigaction/sigaltstack/mmap): \
                 errno {errno} ({}); check the signal mask and memory limits of the thread",
                crate::sys::mem::errno_name(*errno)
            ),
            Error::NoCpus => f.write_str(
                "the runtime has no worker CPU; list at least one CPU in `worker_cpus`, or leave \
                 it unset to use every allowed CPU",
            ),
            Error::CpuNotAllowed { cpu, allowed } => {
                write!(
                    f,
                    "CPU {cpu} is not allowed for this process (or is listed twice); the allowed \
                     CPUs are "
                )?;
                write_list(f, allowed)
            }
            Error::WorkerThreads { requested: 0, .. } => f.write_str(
                "worker_threads(0): a runtime needs at least one worker; ask for 1 or more, \
                 or leave it unset for one worker per allowed CPU (within the CPU quota)",
            ),
            Error::WorkerThreads {
                requested,
                cpus,
                listed,
            } => {
                write!(
                    f,
                    "worker_threads({requested}) asks for more workers than CPUs: lagom pins \
                     one worker to each CPU, and {} {} CPU(s) (",
                    if *listed {
                        "worker_cpus lists"
                    } else {
                        "this process may use"
                    },
                    cpus.len()
                )?;
                write_list(f, cpus)?;
                write!(
                    f,
                    "); ask for at most {}, {}or, to try a runtime the size of a larger \
                     machine, give that machine's topology (Builder::topology: workers whose CPU \
                     this machine lacks run unpinned)",
                    cpus.len(),
                    if *listed {
                        "list more CPUs in worker_cpus, "
                    } else {
                        "run the process on more CPUs (taskset, the cgroup's cpuset), "
                    }
                )
            }
            Error::ThreadSpawn { errno } => write!(
                f,
                "could not start a worker thread: errno {errno} ({}); lower the number of \
                 workers or raise the thread limit",
                crate::sys::mem::errno_name(*errno)
            ),
            Error::AffinityOutsideWorkers { cpu, workers } => {
                if *cpu == usize::MAX {
                    f.write_str("a task's CPU list is empty")?;
                } else {
                    write!(f, "CPU {cpu} in a task's CPU list has no worker")?;
                }
                f.write_str("; the runtime's workers run on CPUs ")?;
                write_list(f, workers)
            }
            Error::NotInTask => f.write_str(
                "this call must be made from inside a task; from other threads use the \
                 `Runtime` methods (`spawn_with`, `block_on`)",
            ),
            Error::TraceCapacity { events: 0, .. } => f.write_str(
                "a trace capacity of 0 events would record nothing; ask for at least 1 event \
                 per worker, or turn tracing off",
            ),
            Error::TraceCapacity { events, workers } => write!(
                f,
                "could not allocate {} trace logs of {events} events each; lower \
                 `trace_capacity` (each event takes {} bytes)",
                workers + 1,
                size_of::<lagom_trace::TraceEvent>()
            ),
            Error::OutOfRange {
                setting,
                value,
                valid,
            } => write!(
                f,
                "{setting} was given {value}, which is out of range; it accepts {valid}"
            ),
            Error::TraceWrite(e) => e.fmt(f),
            Error::InterposeInactive => f.write_str(
                "Builder::interpose_sleep was asked for, but this program's calls of \
                 clock_nanosleep do not reach lagom's hook (another definition of \
                 clock_nanosleep is linked ahead of it, or lagom is not part of the program \
                 itself); remove the other definition, link lagom into the program, or build \
                 without interpose_sleep and use lagom::task::sleep in tasks",
            ),
        }
    }
}

/// Writes `list` as `0, 1, 2`.
fn write_list(f: &mut fmt::Formatter<'_>, list: &[usize]) -> fmt::Result {
    for (i, c) in list.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{c}")?;
    }
    Ok(())
}

// No `source()`: a wrapped error's message is this one's whole message (`Display` above), so
// a chain printer would print it twice.
impl core::error::Error for Error {}

impl From<lagom_topology::TopologyError> for Error {
    fn from(e: lagom_topology::TopologyError) -> Error {
        Error::Topology(e)
    }
}

impl From<lagom_trace::SaveError> for Error {
    fn from(e: lagom_trace::SaveError) -> Error {
        Error::TraceWrite(e)
    }
}

impl From<lagom_policy::UnknownFeature> for Error {
    fn from(e: lagom_policy::UnknownFeature) -> Error {
        Error::UnknownFeature(e)
    }
}
