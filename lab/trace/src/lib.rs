//! # lagom-trace
//!
//! The scheduler's timeline as plain data: which task ran where and why it stopped
//! ([`SwitchReason`]), which wakeup took which path ([`WakePath`]), which task moved between
//! CPUs and why ([`MigrateCause`]), which task held its CPU too long without a scheduling call
//! and what its thread was doing ([`StallCause`], the threaded runtime's stall monitor), one
//! [`TrackTrace`] per CPU, gathered in a [`Trace`]; and
//! its export as Chrome trace event JSON ([`Trace::json`]), which ui.perfetto.dev and
//! `chrome://tracing` open.
//!
//! **Who it is for.** Both of lagom's drivers write their events in these types: the threaded
//! runtime (crate `lagom`, whose `lagom::trace` module re-exports them beside its recorder:
//! `Builder::tracing`, `Runtime::trace`) and the deterministic simulator (crate `lagom-sim`,
//! `Sim::trace`), so a run of either opens in the same viewer, track for track, and a tool
//! that reads one reads the other. Scheduler engineers use it to compare the two, or to
//! analyse a trace in code (every event is a public field) rather than by eye. It also names
//! the per-CPU counters both drivers keep ([`sched_counters!`]), in the spirit of the
//! kernel's `/proc/schedstat`.
//!
//! **What it holds.** Data only: no clock, no atomics, no OS call. The crate is `#![no_std]`
//! with `alloc` and has no dependency; the `std` feature (on by default) adds writing the
//! JSON to an `io::Write` or a file ([`Trace::write_json`], [`Trace::save`]). Timestamps are
//! whatever clock the driver records (the runtime's monotonic clock, the simulator's virtual
//! one), in nanoseconds.
//!
//! ```
//! use lagom_trace::{SwitchReason, Trace, TraceEvent, TraceEventKind, TrackTrace};
//! let run = |ts_ns, prev, next, reason| TraceEvent {
//!     ts_ns,
//!     kind: TraceEventKind::Switch { prev, next, reason },
//! };
//! let cpu0 = TrackTrace {
//!     cpu: Some(0),
//!     events: vec![
//!         run(1_000, None, Some(1), SwitchReason::Idle),
//!         run(5_000, Some(1), None, SwitchReason::Exit),
//!     ],
//!     dropped: 0,
//! };
//! let names = [(1, String::from("worker"))].into_iter().collect();
//! let trace = Trace::new((0, 6_000), vec![cpu0], TrackTrace::default(), names, 0);
//! let json = trace.json().to_string();
//! assert!(json.starts_with("{\"traceEvents\":["));
//! assert!(json.contains("\"name\":\"worker\""));
//! ```
//!
//! ## The export
//!
//! [`Trace::json`] formats the Chrome trace event format (the format is described on [`ChromeJson`]): one track (`tid`) per
//! worker, named after it and its CPU, plus an "outside threads" track if outside wakers
//! recorded events; each run of a task is a complete (`"X"`) slice named by the task's name;
//! wakeups and migrations are instant (`"i"`) events, and a flow (`"s"` → `"f"`) links each
//! wakeup to the wakee's next run.

#![no_std]
#![deny(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

mod counters;
mod json;

pub use json::ChromeJson;

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;

/// Why a worker switched from one context to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SwitchReason {
    /// The previous task called `schedule()` to block (park, join, sleep, a lock); if a
    /// waker made it runnable again before the switch, it stays queued, as if preempted.
    Block,
    /// The previous task yielded (`yield_now`).
    Yield,
    /// The previous task was preempted (need-resched or the tick, at `cond_resched` or a
    /// runtime call).
    Preempt,
    /// The previous task ended; the worker is back in its idle loop.
    Exit,
    /// The previous context was the worker's idle loop, which picked the next task.
    Idle,
}

/// Which path of `try_to_wake_up` a wakeup took (the wakeup counters of
/// lagom's `WorkerStats` and of the simulator's counters, one each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WakePath {
    /// Enqueued on the waker's own worker (`wakeups_local`).
    Local,
    /// Pushed on the target's wakelist (TTWU_QUEUE, `wakeups_queued`).
    Queued,
    /// Enqueued under the target's runqueue lock by another thread (NO_TTWU_QUEUE,
    /// `wakeups_remote`).
    Remote,
    /// The task was still queued: requeued in place (`runnable_in_place`).
    RunnableInPlace,
    /// A delayed task on another worker, handed to that worker's wakelist
    /// (TTWU_QUEUE_DELAYED, `runnable_queued`).
    DelayedQueued,
    /// Handed to the worker still switching away from the task (TTWU_QUEUE_ON_CPU,
    /// `wakeups_on_cpu`).
    OnCpu,
}

/// Why a task moved to another worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MigrateCause {
    /// Newly idle balance pulled it (`balance_pulls`).
    Balance,
    /// Periodic (load) balance pulled it (`balance_periodic`).
    PeriodicBalance,
    /// A wakeup's CPU selection chose a worker other than its previous one.
    Wakeup,
}

/// Declares [`Syscall`] with its names.
macro_rules! syscalls {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal ),* $(,)?) => {
        /// A system call a stalled worker's thread can be blocked in, by its Linux name: the
        /// calls the threaded runtime's stall monitor names (others it reports by number).
        /// Architecture-neutral: the runtime maps its architecture's numbers onto these.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Syscall {
            $( $(#[$doc])* $variant, )*
        }

        impl Syscall {
            /// Every named call.
            pub const ALL: &'static [Syscall] = &[$( Syscall::$variant ),*];

            /// The call's Linux name, e.g. `"clock_nanosleep"`.
            pub const fn name(self) -> &'static str {
                match self {
                    $( Syscall::$variant => $name, )*
                }
            }
        }
    };
}

syscalls! {
    /// A futex wait: a `std::sync` lock, `Condvar`, channel, `thread::park`, or another
    /// library's lock.
    Futex = "futex",
    /// `std::thread::sleep`.
    ClockNanosleep = "clock_nanosleep",
    /// A sleep.
    Nanosleep = "nanosleep",
    /// A read (a file, pipe, socket, terminal).
    Read = "read",
    /// A write.
    Write = "write",
    /// A positioned read.
    Pread64 = "pread64",
    /// A positioned write.
    Pwrite64 = "pwrite64",
    /// A vectored read.
    Readv = "readv",
    /// A vectored write.
    Writev = "writev",
    /// A file's data and metadata to the disk.
    Fsync = "fsync",
    /// A file's data to the disk.
    Fdatasync = "fdatasync",
    /// A file range to the disk.
    SyncFileRange = "sync_file_range",
    /// Opening a file.
    Openat = "openat",
    /// Closing a file descriptor.
    Close = "close",
    /// Waiting on file descriptors.
    Ppoll = "ppoll",
    /// Waiting on file descriptors.
    Pselect6 = "pselect6",
    /// Waiting on an epoll set.
    EpollPwait = "epoll_pwait",
    /// Accepting a connection.
    Accept4 = "accept4",
    /// Connecting a socket.
    Connect = "connect",
    /// Receiving from a socket.
    Recvfrom = "recvfrom",
    /// Receiving from a socket.
    Recvmsg = "recvmsg",
    /// Sending on a socket.
    Sendto = "sendto",
    /// Sending on a socket.
    Sendmsg = "sendmsg",
    /// Waiting for a child process.
    Wait4 = "wait4",
    /// Waiting for a child process.
    Waitid = "waitid",
    /// A file lock.
    Flock = "flock",
    /// A file control call (a record lock).
    Fcntl = "fcntl",
    /// A device control call.
    Ioctl = "ioctl",
    /// Waiting for io_uring completions.
    IoUringEnter = "io_uring_enter",
    /// Waiting for a signal.
    RtSigtimedwait = "rt_sigtimedwait",
    /// Waiting for a signal.
    RtSigsuspend = "rt_sigsuspend",
    /// Random bytes (blocks until the kernel's pool is ready).
    Getrandom = "getrandom",
    /// A yield of the OS thread.
    SchedYield = "sched_yield",
    /// A memory-mapped file to the disk.
    Msync = "msync",
    /// Allocating file space.
    Fallocate = "fallocate",
    /// Truncating a file.
    Ftruncate = "ftruncate",
    /// Waiting on file descriptors (x86_64).
    Poll = "poll",
    /// Waiting on file descriptors (x86_64).
    Select = "select",
    /// Waiting on an epoll set (x86_64).
    EpollWait = "epoll_wait",
    /// Accepting a connection (x86_64).
    Accept = "accept",
    /// Waiting for a signal (x86_64).
    Pause = "pause",
}

/// The operation of a futex call ([`StallCause::Syscall`]), without its private and clock
/// flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FutexOp {
    /// `FUTEX_WAIT`.
    Wait,
    /// `FUTEX_WAIT_BITSET`: std's lock, `Condvar` and parker waits.
    WaitBitset,
    /// `FUTEX_LOCK_PI`: a priority-inheriting lock.
    LockPi,
    /// `FUTEX_LOCK_PI2`.
    LockPi2,
    /// `FUTEX_WAIT_REQUEUE_PI`: a priority-inheriting condition variable.
    WaitRequeuePi,
    /// A wait of the threaded runtime's own (`FUTEX_WAIT_BITSET` with lagom's bitset): one of
    /// its internal locks, whose holder is running elsewhere or was kept off its CPU.
    Lagom,
    /// Another operation.
    Other,
}

impl FutexOp {
    /// The operation's name, e.g. `"FUTEX_WAIT_BITSET"`.
    pub const fn name(self) -> &'static str {
        match self {
            FutexOp::Wait => "FUTEX_WAIT",
            FutexOp::WaitBitset => "FUTEX_WAIT_BITSET",
            FutexOp::LockPi => "FUTEX_LOCK_PI",
            FutexOp::LockPi2 => "FUTEX_LOCK_PI2",
            FutexOp::WaitRequeuePi => "FUTEX_WAIT_REQUEUE_PI",
            FutexOp::Lagom => "one of lagom's own locks",
            FutexOp::Other => "another operation",
        }
    }
}

/// What a stalled worker's OS thread was doing when the threaded runtime's stall monitor
/// looked at it (its report and its [`TraceEventKind::Stall`] event): what the kernel said of
/// the thread (`/proc/self/task/TID/stat` and `syscall` on Linux). The simulator never
/// records stalls: its tasks make no system calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StallCause {
    /// Blocked in a system call.
    Syscall {
        /// The kernel's state letter: `S` (an interruptible sleep: a futex, a sleep, a pipe or
        /// socket read) or `D` (uninterruptible: disk I/O).
        state: char,
        /// The call, if the runtime names it (see `nr`).
        call: Option<Syscall>,
        /// The call's number on the runtime's architecture.
        nr: i32,
        /// For `futex`, its operation.
        futex_op: Option<FutexOp>,
    },
    /// Blocked in the kernel outside any system call: in state `D` a page fault waiting for
    /// the disk (a memory-mapped file, swap).
    OutsideSyscall {
        /// The kernel's state letter.
        state: char,
    },
    /// Blocked (state `state`), but which call could not be read.
    Blocked {
        /// The kernel's state letter.
        state: char,
    },
    /// Running user code (or computing in the kernel) without a scheduling call: the thread
    /// was runnable and used CPU.
    Running {
        /// Of the time since the monitor began to watch the episode, the share the thread
        /// spent on a CPU, in percent.
        on_cpu_percent: u8,
    },
    /// What the thread was doing could not be read (no procfs).
    Unknown,
    /// The task unwinds from a panic and one of its destructors blocked in lagom: no other
    /// task may run on the worker's thread until it has unwound (std counts panics per OS
    /// thread), so its block waits on the thread, and the tasks queued there wait with it.
    Unwinding,
}

impl StallCause {
    /// The system call, if the thread was blocked in one the runtime names.
    pub fn call(&self) -> Option<Syscall> {
        match *self {
            StallCause::Syscall { call, .. } => call,
            _ => None,
        }
    }

    /// A short name of the kind of cause, for exports and grouping: `"syscall"`,
    /// `"outside_syscall"`, `"blocked"`, `"running"`, `"unknown"`, `"unwinding"`.
    pub fn kind(&self) -> &'static str {
        match self {
            StallCause::Syscall { .. } => "syscall",
            StallCause::OutsideSyscall { .. } => "outside_syscall",
            StallCause::Blocked { .. } => "blocked",
            StallCause::Running { .. } => "running",
            StallCause::Unknown => "unknown",
            StallCause::Unwinding => "unwinding",
        }
    }
}

impl core::fmt::Display for StallCause {
    /// One phrase: "blocked in the OS in futex (FUTEX_WAIT_BITSET), state S", "running user
    /// code without a scheduling call (on its CPU 98% of the time)", ….
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            StallCause::Syscall {
                state,
                call,
                nr,
                futex_op,
            } => {
                match call {
                    Some(c) => write!(f, "blocked in the OS in {}", c.name())?,
                    None => write!(f, "blocked in the OS in system call {nr}")?,
                }
                if let Some(op) = futex_op {
                    write!(f, " ({})", op.name())?;
                }
                write!(f, ", state {state}")
            }
            StallCause::OutsideSyscall { state: 'D' } => write!(
                f,
                "blocked in the OS outside a system call, state D (a page fault waiting for \
                 the disk: a memory-mapped file or swap)"
            ),
            StallCause::OutsideSyscall { state } => {
                write!(f, "blocked in the OS outside a system call, state {state}")
            }
            StallCause::Blocked { state } => write!(
                f,
                "blocked in the OS, state {state} (its system call could not be read)"
            ),
            StallCause::Running { on_cpu_percent } => write!(
                f,
                "running user code without a scheduling call (on its CPU {on_cpu_percent}% \
                 of the time)"
            ),
            StallCause::Unknown => write!(f, "doing what could not be read (no procfs)"),
            StallCause::Unwinding => write!(
                f,
                "unwinding from a panic, blocked in lagom in a destructor: no other task may run \
                 on its worker's thread until it has unwound (std counts panics per OS thread)"
            ),
        }
    }
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceEventKind {
    /// The worker switched from `prev` to `next` (`None`: its idle loop).
    Switch {
        /// The task switched away from.
        prev: Option<u64>,
        /// The task switched to.
        next: Option<u64>,
        /// Why (module doc).
        reason: SwitchReason,
    },
    /// A blocked task was made runnable.
    Wakeup {
        /// The wakee's id.
        task: u64,
        /// The waker's worker index (`None`: a thread that is no worker of this runtime).
        waker: Option<usize>,
        /// The worker index the task was made runnable on (or handed to).
        target: usize,
        /// The path taken.
        path: WakePath,
    },
    /// A task moved between workers.
    Migrate {
        /// The task's id.
        task: u64,
        /// The worker index it left.
        from: usize,
        /// The worker index it moved to.
        to: usize,
        /// Why.
        cause: MigrateCause,
    },
    /// The threaded runtime's stall monitor found worker `worker`'s running task `task`
    /// without a scheduling call for `stalled_ns` while other tasks waited there (one event
    /// per episode, when it is reported). Recorded by the monitor's thread, which is no
    /// worker (so into the outside log); the export draws it on the worker's track.
    Stall {
        /// The stalled task's id.
        task: u64,
        /// How long the worker had gone without a scheduling call when it was reported.
        stalled_ns: u64,
        /// The worker index it holds (32 bits, so that the event is no larger than the
        /// others).
        worker: u32,
        /// How many runnable tasks waited behind it.
        waiting: u32,
        /// What the worker's thread was doing.
        cause: StallCause,
    },
}

/// One recorded event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceEvent {
    /// The monotonic clock when it was recorded, in nanoseconds.
    pub ts_ns: u64,
    /// What happened.
    pub kind: TraceEventKind,
}

/// The events of one log: a worker's, or the outside threads'.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrackTrace {
    /// The OS CPU of the worker (`None` for the outside log).
    pub cpu: Option<usize>,
    /// The events kept, in the order recorded (timestamps non-decreasing).
    pub events: Vec<TraceEvent>,
    /// Events not kept because the log was full (module doc).
    pub dropped: u64,
}

/// A snapshot of the runtime's trace (module doc).
///
/// `Trace::default()` is the trace of a driver that recorded nothing (tracing off):
/// [`enabled`](Trace::enabled) is false and it has no tracks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    enabled: bool,
    start_ns: u64,
    end_ns: u64,
    workers: Vec<TrackTrace>,
    outside: TrackTrace,
    names: BTreeMap<u64, String>,
    names_dropped: u64,
}

impl Trace {
    /// A recorded trace: `span_ns` is (start, end) of the recording (the JSON's timestamps
    /// count from the start), `workers` one track per CPU in CPU order, `outside` the events
    /// of threads that are no CPU of the driver, `names` the task names by id, and
    /// `names_dropped` the names not kept (those tasks are shown as `task-<id>`). Each
    /// track's events must be in time order (timestamps non-decreasing), as a driver records
    /// them.
    pub fn new(
        span_ns: (u64, u64),
        workers: Vec<TrackTrace>,
        outside: TrackTrace,
        names: BTreeMap<u64, String>,
        names_dropped: u64,
    ) -> Trace {
        Trace {
            enabled: true,
            start_ns: span_ns.0,
            end_ns: span_ns.1,
            workers,
            outside,
            names,
            names_dropped,
        }
    }

    /// Whether the runtime was built with tracing on.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// One track per worker, in worker order (empty when tracing is off).
    pub fn workers(&self) -> &[TrackTrace] {
        &self.workers
    }

    /// The events recorded by threads that are no worker of the runtime.
    pub fn outside(&self) -> &TrackTrace {
        &self.outside
    }

    /// The name of task `id`, if it was recorded at spawn.
    pub fn task_name(&self, id: u64) -> Option<&str> {
        self.names.get(&id).map(String::as_str)
    }

    /// Every event kept, over all tracks.
    pub fn len(&self) -> usize {
        self.tracks().map(|t| t.events.len()).sum()
    }

    /// Whether no event was kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Events dropped because a log was full, over all tracks.
    pub fn dropped(&self) -> u64 {
        self.tracks().map(|t| t.dropped).sum()
    }

    /// Task names not kept because the name table was full (those tasks are shown as
    /// `task-<id>`).
    pub fn names_dropped(&self) -> u64 {
        self.names_dropped
    }

    /// When the recording started and when the snapshot was taken (the driver's clock, ns).
    pub fn span_ns(&self) -> (u64, u64) {
        (self.start_ns, self.end_ns)
    }

    /// The trace in Chrome trace event format (`Display`; see [`ChromeJson`] and the crate's
    /// example).
    pub fn json(&self) -> ChromeJson<'_> {
        ChromeJson(self)
    }

    /// Writes [`Trace::json`] to `out`.
    ///
    /// # Errors
    /// Those of `out`.
    #[cfg(feature = "std")]
    pub fn write_json(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        write!(out, "{}", self.json())
    }

    /// Writes [`Trace::json`] to the file `path` (created or truncated); open it in
    /// ui.perfetto.dev or `chrome://tracing`.
    ///
    /// # Errors
    /// [`SaveError`], naming the path and the OS error, if the file cannot be written.
    #[cfg(feature = "std")]
    pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<(), SaveError> {
        use std::io::Write;
        let path = path.as_ref();
        let err = |e: std::io::Error| SaveError {
            path: alloc::format!("{}", path.display()),
            os_error: alloc::format!("{e}"),
        };
        let file = std::fs::File::create(path).map_err(err)?;
        let mut out = std::io::BufWriter::new(file);
        self.write_json(&mut out).map_err(err)?;
        out.flush().map_err(err)
    }

    fn tracks(&self) -> impl Iterator<Item = &TrackTrace> {
        self.workers.iter().chain(core::iter::once(&self.outside))
    }
}

/// A trace could not be written to its file ([`Trace::save`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaveError {
    /// The file's path.
    pub path: String,
    /// The OS error, as text.
    pub os_error: String,
}

impl core::fmt::Display for SaveError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "cannot write the trace to `{}`: {}; check that its directory exists and is \
             writable",
            self.path, self.os_error
        )
    }
}

impl core::error::Error for SaveError {}
