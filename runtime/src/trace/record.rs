//! The recorder behind [`Runtime::trace`](crate::Runtime::trace): one [`EventLog`] per worker,
//! the outside log and the task names. The hooks that the scheduler calls where events happen
//! are the per-CPU layer's (`worker/trace.rs`): they know which worker the calling thread is,
//! and record through [`Recorder::record`] and [`Recorder::name`].

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

use super::log::EventLog;
use super::{Trace, TraceEvent, TraceEventKind, TrackTrace};
use crate::Error;
use crate::locking::lock::Lock;

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
        Trace::new(
            (self.start_ns, crate::sys::time::monotonic_ns()),
            workers,
            TrackTrace {
                cpu: None,
                events,
                dropped,
            },
            names,
            names_dropped,
        )
    }

    /// Records `kind` now, from the calling thread (module doc of `trace`): into worker
    /// `worker`'s log, or the locked outside log if `None`.
    ///
    /// # Safety
    /// With `Some(i)`, the calling thread is worker `i`'s own thread (the only writer of its
    /// log).
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn record(&self, worker: Option<usize>, kind: TraceEventKind) {
        let ev = TraceEvent {
            ts_ns: crate::sys::time::monotonic_ns(),
            kind,
        };
        match worker {
            // SAFETY: the caller's contract: this thread is worker `i`'s, the only writer of
            // its log.
            Some(i) => unsafe { self.workers[i].push(ev) },
            // SAFETY: the lock makes its holder the outside log's only writer.
            None => unsafe { self.outside.lock().push(ev) },
        }
    }

    /// Keeps task `id`'s name for the export (bounded).
    #[cold]
    #[inline(never)]
    pub(crate) fn name(&self, id: u64, name: &str) {
        let mut n = self.names.lock();
        if n.list.len() < n.capacity {
            n.list.push((id, String::from(name)));
        } else {
            n.dropped += 1;
        }
    }
}
