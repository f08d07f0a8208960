//! Optional tracing of switch / wakeup / migrate events, exported as Chrome trace event JSON
//! (DESIGN.md "Observability", issue #5).
//!
//! Turned on with [`Builder::tracing`](crate::Builder::tracing); read with
//! [`Runtime::trace`](crate::Runtime::trace) (a snapshot, at any time) or
//! [`Runtime::shutdown_with_trace`](crate::Runtime::shutdown_with_trace) (complete, after the
//! workers stopped). The [`Trace`] it returns holds the raw events per worker and writes
//! them as the `"traceEvents"` JSON that ui.perfetto.dev and `chrome://tracing` open.
//!
//! ## Recording
//!
//! Invariant: *each worker's event log has exactly one writer, the worker's own OS thread.*
//!
//! Every event is recorded by the thread that performs it, into the log of the worker that
//! thread runs (`local()`), or, for a thread that is no worker of this runtime, into one shared
//! "outside" log behind a lock (wakeups from plain threads are rare; no worker ever takes that
//! lock for its own events). Hence:
//!
//! * **switch** (prev → next, reason): by the switching worker, in `schedule()` (the reason is
//!   why the task called it: block, yield, preempt), in the idle loop when it switches to a
//!   task (reason `idle`: the previous context is the idle loop) and when a task ended
//!   (`exit`);
//! * **wakeup** (task, waker's worker, target worker, path): by the **waker**, at the point of
//!   `try_to_wake_up` where the path is decided and before the task is published to its
//!   target, so a wakeup's timestamp precedes the wakee's next switch-in. There is exactly one
//!   wakeup event per increment of the wakeup counters of [`Stats`](crate::Stats) (`wakeups()`
//!   and its six parts); spawns are no wakeups;
//! * **migrate** (task, from, to, cause): by the worker that pulls a task in newly idle balance,
//!   and by the waker when `select_task_rq` chooses a worker other than the task's previous
//!   one (or the worker draining a delayed wakeup forwards it).
//!
//! Each log is a fixed array allocated when the runtime is built
//! ([`Builder::trace_capacity`](crate::Builder::trace_capacity) events per worker, and as many
//! for the outside log). When it is full, recording **stops** and further events are only
//! counted ([`TrackTrace::dropped`]): the trace keeps the beginning of the run. Overwriting the
//! oldest events instead would let the writer reuse a slot that a concurrent reader is copying;
//! stopping keeps every published slot immutable, so [`Runtime::trace`](crate::Runtime::trace)
//! reads the logs while the workers run, without locks: the writer stores the event, then the
//! new length with Release; a reader loads the length with Acquire and copies the slots below
//! it. Task names are kept in one table filled at spawn, bounded by the same capacity.
//!
//! When tracing is off, no log exists and each hook costs one well-predicted branch on a
//! plain field of the runtime (`Shared::trace`, an `Option`): no atomic, no allocation, no
//! clock read. When it is on, an event costs a clock read and a slot write.
//!
//! Timestamps are the runtime's monotonic clock (`CLOCK_MONOTONIC`, the clock of the
//! scheduler), in nanoseconds; the JSON gives them in microseconds since the runtime started.
//!
//! ## Export
//!
//! [`Trace::json`] formats the Chrome trace event format (see `json.rs`): one track (`tid`) per
//! worker, named after it and its CPU, plus an "outside threads" track if outside wakers
//! recorded events; each run of a task is a complete (`"X"`) slice named by the task's name;
//! wakeups and migrations are instant (`"i"`) events, and a flow (`"s"` → `"f"`) links each
//! wakeup to the wakee's next run.

mod json;
mod log;
mod record;

pub use json::ChromeJson;
pub(crate) use record::Recorder;

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;

/// The default capacity of each worker's trace log, in events (about 12 MiB per worker, of
/// which only the pages written are touched).
pub const DEFAULT_TRACE_CAPACITY: usize = 1 << 18;

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
/// [`WorkerStats`](crate::WorkerStats), one each).
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

// `Error::TraceCapacity`'s message quotes this size (`error.rs`, which sits below this module).
const _: () = assert!(core::mem::size_of::<TraceEvent>() == crate::error::TRACE_EVENT_BYTES);

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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    pub(crate) enabled: bool,
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    pub(crate) workers: Vec<TrackTrace>,
    pub(crate) outside: TrackTrace,
    pub(crate) names: BTreeMap<u64, String>,
    pub(crate) names_dropped: u64,
}

impl Trace {
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

    /// When the runtime started and when the snapshot was taken (monotonic ns).
    pub fn span_ns(&self) -> (u64, u64) {
        (self.start_ns, self.end_ns)
    }

    /// The trace in Chrome trace event format (`Display`; see [`ChromeJson`]).
    ///
    /// ```
    /// let rt = lagom::Runtime::builder().tracing(true).build()?;
    /// rt.block_on(|| lagom::task::spawn(|| ()).join().unwrap());
    /// let (_, trace) = rt.shutdown_with_trace();
    /// let json = trace.json().to_string();
    /// assert!(json.starts_with("{\"traceEvents\":["));
    /// # Ok::<(), lagom::Error>(())
    /// ```
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
    /// [`Error::TraceWrite`](crate::Error::TraceWrite) if the file cannot be written.
    #[cfg(feature = "std")]
    pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<(), crate::Error> {
        use std::io::Write;
        let path = path.as_ref();
        let err = |e: std::io::Error| crate::Error::TraceWrite {
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
