//! # lagom-trace
//!
//! The scheduler's timeline as plain data: which task ran where and why it stopped
//! ([`SwitchReason`]), which wakeup took which path ([`WakePath`]), which task moved between
//! CPUs and why ([`MigrateCause`]), one [`TrackTrace`] per CPU, gathered in a [`Trace`]; and
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
