//! The recorder behind [`Runtime::trace`](crate::Runtime::trace): one [`EventLog`] per worker,
//! the outside log, the task names, and the hooks that the scheduler calls where events happen.
//!
//! Each hook is `#[inline]` and starts with the only test that runs when tracing is off: is
//! `Shared::trace` `Some`? The recording itself is out of line and `#[cold]`, so the hot paths
//! keep their shape. Which thread records which event, and into which log, is the module doc
//! of `trace`: the hooks find the calling thread's worker with `local()` and fall back to the
//! locked outside log.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

use super::log::EventLog;
use super::{MigrateCause, SwitchReason, Trace, TraceEvent, TraceEventKind, TrackTrace, WakePath};
use crate::Error;
use crate::policy::Feature;
use crate::sync::lock::Lock;
use crate::task::Task;
use crate::worker::{Reason, Shared, WorkerThread, local};

/// The task names recorded at spawn, bounded.
struct Names {
    list: Vec<(u64, String)>,
    capacity: usize,
    dropped: u64,
}

/// The logs of one runtime (module doc).
pub(crate) struct Recorder {
    workers: Box<[EventLog]>,
    outside: Lock<EventLog>,
    names: Lock<Names>,
    start_ns: u64,
}

impl Recorder {
    /// Logs of `capacity` events for `workers` workers and the outside threads.
    ///
    /// # Errors
    /// [`Error::TraceCapacity`] if `capacity` is zero or the logs cannot be allocated.
    pub(crate) fn new(workers: usize, capacity: usize) -> Result<Recorder, Error> {
        let err = Error::TraceCapacity {
            events: capacity,
            workers,
        };
        if capacity == 0 {
            return Err(err);
        }
        let logs: Option<Vec<EventLog>> = (0..workers).map(|_| EventLog::new(capacity)).collect();
        let outside = EventLog::new(capacity).ok_or_else(|| err.clone())?;
        Ok(Recorder {
            workers: logs.ok_or(err)?.into_boxed_slice(),
            outside: Lock::new(outside),
            names: Lock::new(Names {
                list: Vec::new(),
                capacity,
                dropped: 0,
            }),
            start_ns: crate::sys::time::monotonic_ns(),
        })
    }

    /// A snapshot of every log; `cpus` are the workers' OS CPUs.
    pub(crate) fn snapshot(&self, cpus: impl Iterator<Item = usize>) -> Trace {
        let workers = self
            .workers
            .iter()
            .zip(cpus)
            .map(|(log, cpu)| {
                let (events, dropped) = log.snapshot();
                TrackTrace {
                    cpu: Some(cpu),
                    events,
                    dropped,
                }
            })
            .collect();
        let (events, dropped) = self.outside.lock().snapshot();
        let (names, names_dropped) = {
            let n = self.names.lock();
            (n.list.iter().cloned().collect(), n.dropped)
        };
        Trace {
            enabled: true,
            start_ns: self.start_ns,
            end_ns: crate::sys::time::monotonic_ns(),
            workers,
            outside: TrackTrace {
                cpu: None,
                events,
                dropped,
            },
            names,
            names_dropped,
        }
    }

    /// Records `kind` now, from the calling thread (module doc of `trace`).
    #[cold]
    #[inline(never)]
    fn record(&self, shared: &Shared, kind: TraceEventKind) {
        let ev = TraceEvent {
            ts_ns: crate::sys::time::monotonic_ns(),
            kind,
        };
        match my_worker(shared) {
            // SAFETY: the calling thread is worker `i`'s own thread, the only writer of its log.
            Some(i) => unsafe { self.workers[i].push(ev) },
            // SAFETY: the lock makes its holder the outside log's only writer.
            None => unsafe { self.outside.lock().push(ev) },
        }
    }

    #[cold]
    #[inline(never)]
    fn name(&self, t: &Task) {
        let mut n = self.names.lock();
        if n.list.len() < n.capacity {
            n.list.push((t.id, t.name.clone()));
        } else {
            n.dropped += 1;
        }
    }
}

/// The calling thread's worker index, if it is a worker of `shared`'s runtime.
fn my_worker(shared: &Shared) -> Option<usize> {
    local()
        .filter(|wt| core::ptr::eq(&*wt.shared, shared))
        .map(|wt| wt.index)
}

impl From<Reason> for SwitchReason {
    fn from(r: Reason) -> SwitchReason {
        match r {
            Reason::Block => SwitchReason::Block,
            Reason::Yield => SwitchReason::Yield,
            Reason::Preempt => SwitchReason::Preempt,
        }
    }
}

/// Hook: worker `wt` switches from `prev` to `next` (`None`: its idle loop).
#[inline]
pub(crate) fn switch(
    wt: &WorkerThread,
    prev: Option<&Task>,
    next: Option<&Task>,
    reason: impl Into<SwitchReason>,
) {
    if let Some(r) = &wt.shared.trace {
        let kind = TraceEventKind::Switch {
            prev: prev.map(|t| t.id),
            next: next.map(|t| t.id),
            reason: reason.into(),
        };
        r.record(&wt.shared, kind);
    }
}

/// Hook: the calling thread woke `t` onto (or handed it to) worker `target` by `path`.
#[inline]
pub(crate) fn wakeup(shared: &Shared, t: &Task, target: usize, path: WakePath) {
    if let Some(r) = &shared.trace {
        let waker = my_worker(shared);
        let kind = TraceEventKind::Wakeup {
            task: t.id,
            waker,
            target,
            path,
        };
        r.record(shared, kind);
    }
}

/// Hook at the top of `wake::enqueue_on`: a wakeup (not a spawn) of `t` onto `target`; the path
/// follows `enqueue_on`'s branches (own worker, else TTWU_QUEUE's wakelist, else the lock).
#[inline]
pub(crate) fn enqueue(shared: &Shared, t: &Task, local: Option<usize>, target: usize, spawn: bool) {
    if shared.trace.is_some() && !spawn {
        let path = if Some(target) == local {
            WakePath::Local
        } else if shared.features.is_enabled(Feature::TtwuQueue) {
            WakePath::Queued
        } else {
            WakePath::Remote
        };
        wakeup(shared, t, target, path);
    }
}

/// Hook: `t` moves from worker `from` to `to` (nothing if they are the same).
#[inline]
pub(crate) fn migrate(shared: &Shared, t: &Task, from: usize, to: usize, cause: MigrateCause) {
    if let Some(r) = &shared.trace
        && from != to
    {
        let kind = TraceEventKind::Migrate {
            task: t.id,
            from,
            to,
            cause,
        };
        r.record(shared, kind);
    }
}

/// Hook: `t` was spawned; keep its name for the export.
#[inline]
pub(crate) fn spawn(shared: &Shared, t: &Task) {
    if let Some(r) = &shared.trace {
        r.name(t);
    }
}
