//! Tracing of switch / wakeup / migrate events, exported as Chrome trace event JSON.
//!
//! Turned on with [`Builder::tracing`](crate::runtime::Builder::tracing); read with
//! [`Runtime::trace`](crate::Runtime::trace) (a snapshot, at any time) or
//! [`Runtime::shutdown_with_trace`](crate::Runtime::shutdown_with_trace) (complete, after the
//! workers stopped). The [`Trace`] it returns holds the raw events per worker and writes
//! them as the `"traceEvents"` JSON that ui.perfetto.dev and `chrome://tracing` open
//! ([`Trace::json`], [`Trace::save`]).
//!
//! The trace's types are the `lagom-trace` crate's, re-exported here, which the simulator
//! (`lagom-sim`) writes too; what this module adds is the runtime's recording.
//!
//! ```
//! let rt = lagom::Runtime::builder().tracing(true).build()?;
//! rt.block_on(|| lagom::task::spawn(|| ()).join().unwrap());
//! let (_, trace) = rt.shutdown_with_trace();
//! let json = trace.json().to_string();
//! assert!(json.starts_with("{\"traceEvents\":["));
//! # Ok::<(), lagom::Error>(())
//! ```
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
//!   wakeup event per increment of the wakeup counters of [`Stats`](crate::runtime::Stats) (`wakeups()`
//!   and its six parts); spawns are no wakeups;
//! * **migrate** (task, from, to, cause): by the worker that pulls a task in newly idle balance,
//!   and by the waker when `select_task_rq` chooses a worker other than the task's previous
//!   one (or the worker draining a delayed wakeup forwards it);
//! * **stall** (task, worker, how long, what its thread was doing, how many waited): by the
//!   stall monitor's thread ([`Builder::stall_threshold`](crate::runtime::Builder::stall_threshold)),
//!   which is no worker, into the outside log, once per reported episode; the JSON draws it
//!   on the stalled worker's track.
//!
//! Each log is a fixed array allocated when the runtime is built
//! ([`Builder::trace_capacity`](crate::runtime::Builder::trace_capacity) events per worker, and as many
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

mod log;
mod record;

pub(crate) use record::Recorder;

pub use lagom_trace::{
    ChromeJson, FutexOp, MigrateCause, SaveError, StallCause, SwitchReason, Syscall, Trace,
    TraceEvent, TraceEventKind, TrackTrace, WakePath,
};

/// The default capacity of each worker's trace log, in events (about 12 MiB per worker, of
/// which only the pages written are touched).
pub const DEFAULT_TRACE_CAPACITY: usize = 1 << 18;
