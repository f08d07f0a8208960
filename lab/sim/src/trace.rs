//! The simulator's timeline, in the threaded runtime's trace types, so that
//! `lagom-trace`'s exporter writes it as Chrome trace JSON (ui.perfetto.dev): one track per
//! virtual CPU, a slice per task run, wakeups and migrations as instants with flow arrows.
//!
//! Events are recorded where the threaded runtime records them — a switch on the switching
//! CPU, a wakeup on the waker's CPU (or the outside track), a migration on the CPU that
//! decided it — with virtual nanoseconds as timestamps. Since the simulation handles events
//! in time order, each track is in time order, as the exporter requires. A track that is
//! full stops recording and counts what it drops, as the runtime's logs do.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;

use super::engine::Sim;
use lagom_trace::{
    MigrateCause, SwitchReason, Trace, TraceEvent, TraceEventKind, TrackTrace, WakePath,
};

/// Per-CPU event logs and the outside log.
pub(super) struct TraceBuf {
    tracks: Vec<TrackTrace>,
    outside: TrackTrace,
    capacity: usize,
    names: BTreeMap<u64, String>,
}

/// The trace id of task `t` (ids start at 1, as the runtime's).
fn id(t: u32) -> u64 {
    u64::from(t) + 1
}

impl TraceBuf {
    pub(super) fn new(
        cpus: usize,
        capacity: usize,
        names: impl Iterator<Item = String>,
    ) -> TraceBuf {
        TraceBuf {
            tracks: (0..cpus).map(|_| TrackTrace::default()).collect(),
            outside: TrackTrace::default(),
            capacity,
            names: names.enumerate().map(|(i, n)| (id(i as u32), n)).collect(),
        }
    }

    fn record(&mut self, cpu: Option<usize>, ts_ns: u64, kind: TraceEventKind) {
        let track = match cpu {
            Some(c) => &mut self.tracks[c],
            None => &mut self.outside,
        };
        if track.events.len() < self.capacity {
            track.events.push(TraceEvent { ts_ns, kind });
        } else {
            track.dropped += 1;
        }
    }
}

impl Sim {
    pub(super) fn trace_switch(
        &mut self,
        c: usize,
        prev: Option<u32>,
        next: Option<u32>,
        reason: SwitchReason,
    ) {
        let now = self.now;
        if let Some(tr) = &mut self.trace {
            let kind = TraceEventKind::Switch {
                prev: prev.map(id),
                next: next.map(id),
                reason,
            };
            tr.record(Some(c), now, kind);
        }
    }

    pub(super) fn trace_wakeup(
        &mut self,
        waker: Option<usize>,
        t: u32,
        target: usize,
        path: WakePath,
    ) {
        let now = self.now;
        if let Some(tr) = &mut self.trace {
            let kind = TraceEventKind::Wakeup {
                task: id(t),
                waker,
                target,
                path,
            };
            tr.record(waker, now, kind);
        }
    }

    /// Records a migration on the track of `by`, the CPU that decided it (the waker, the
    /// draining CPU, the puller; `None`: outside).
    pub(super) fn trace_migrate(
        &mut self,
        by: Option<usize>,
        t: u32,
        from: usize,
        to: usize,
        cause: MigrateCause,
    ) {
        let now = self.now;
        if let Some(tr) = &mut self.trace {
            let kind = TraceEventKind::Migrate {
                task: id(t),
                from,
                to,
                cause,
            };
            tr.record(by, now, kind);
        }
    }

    /// The timeline recorded so far (`None` if the run was not asked to record one). Worker
    /// `i` of the trace is virtual CPU `i`, shown with its OS CPU id.
    pub fn trace(&self) -> Option<Trace> {
        let tr = self.trace.as_ref()?;
        let workers = tr
            .tracks
            .iter()
            .enumerate()
            .map(|(i, t)| TrackTrace {
                cpu: Some(self.machine.os_id(i)),
                events: t.events.clone(),
                dropped: t.dropped,
            })
            .collect();
        Some(Trace::new(
            (0, self.now),
            workers,
            tr.outside.clone(),
            tr.names.clone(),
            0,
        ))
    }
}
