//! The bounded event log: one writer, any number of concurrent readers, no locks.
//!
//! Invariant: *slot `i` is written once, by the log's one writer, before `len` becomes greater
//! than `i`; a reader copies only slots below the `len` it loaded, which are never written
//! again.*
//!
//! * **push** (the writer): load `len` (Relaxed: only this thread stores it); if the log is
//!   full, count the event as dropped and return; else write slot `len`, then store `len + 1`
//!   with **Release**, publishing the slot.
//! * **snapshot** (any thread): load `len` with **Acquire**, pairing with the push that stored
//!   it, and copy the slots below it.
//!
//! No slot is ever reused (recording stops when the log is full), so a reader never races a
//! write. The `dropped` counter has the same one writer (load + store, no read-modify-write);
//! a reader's value may lag behind.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::mem::MaybeUninit;

use super::TraceEvent;
use crate::locking::atomic::{AtomicU64, AtomicUsize, Ordering};
use crate::locking::cell::UnsafeCell;

/// A fixed-capacity append-only log of events (module doc).
pub(crate) struct EventLog {
    slots: Box<[UnsafeCell<MaybeUninit<TraceEvent>>]>,
    len: AtomicUsize,
    dropped: AtomicU64,
}

// SAFETY: the slots are shared between the one writer and readers under the protocol of the
// module doc (a slot is read only after its Release-published write, and never written again).
unsafe impl Sync for EventLog {}
// SAFETY: the events are plain data; moving the log moves owned memory.
unsafe impl Send for EventLog {}

impl EventLog {
    /// A log of `capacity` events, or `None` if the memory cannot be allocated.
    pub(crate) fn new(capacity: usize) -> Option<EventLog> {
        let mut slots = Vec::new();
        slots.try_reserve_exact(capacity).ok()?;
        slots.extend((0..capacity).map(|_| UnsafeCell::new(MaybeUninit::uninit())));
        Some(EventLog {
            slots: slots.into_boxed_slice(),
            len: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
        })
    }

    /// Appends `ev`, or counts it as dropped if the log is full.
    ///
    /// # Safety
    /// The caller is the log's one writer: no other `push` on this log runs concurrently
    /// (a worker's own thread for its log, or the holder of the lock around the log).
    pub(crate) unsafe fn push(&self, ev: TraceEvent) {
        let n = self.len.load(Ordering::Relaxed);
        let Some(slot) = self.slots.get(n) else {
            let d = self.dropped.load(Ordering::Relaxed);
            self.dropped.store(d + 1, Ordering::Relaxed);
            return;
        };
        // SAFETY: slot `n` is not yet published (`len == n`), so no reader copies it, and the
        // caller is the only writer.
        slot.with_mut(|p| unsafe { (*p).write(ev) });
        self.len.store(n + 1, Ordering::Release);
    }

    /// The events published so far and the number dropped.
    pub(crate) fn snapshot(&self) -> (Vec<TraceEvent>, u64) {
        let n = self.len.load(Ordering::Acquire);
        let events = self.slots[..n]
            .iter()
            // SAFETY: every slot below the `len` loaded with Acquire was written before that
            // `len` was stored with Release, and is never written again.
            .map(|s| s.with(|p| unsafe { (*p).assume_init() }))
            .collect();
        (events, self.dropped.load(Ordering::Relaxed))
    }
}

// Not under loom: these threads use the shim's atomics outside a loom model.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::trace::{SwitchReason, TraceEventKind};

    fn ev(i: u64) -> TraceEvent {
        TraceEvent {
            ts_ns: i,
            kind: TraceEventKind::Switch {
                prev: None,
                next: Some(i),
                reason: SwitchReason::Idle,
            },
        }
    }

    #[test]
    fn keeps_the_first_capacity_events_and_counts_the_rest() {
        let log = EventLog::new(4).unwrap();
        for i in 0..10 {
            // SAFETY: this test is the only writer.
            unsafe { log.push(ev(i)) };
        }
        let (events, dropped) = log.snapshot();
        assert_eq!(events, (0..4).map(ev).collect::<Vec<_>>());
        assert_eq!(dropped, 6);
    }

    #[test]
    fn a_reader_sees_a_prefix_while_the_writer_pushes() {
        let log = std::sync::Arc::new(EventLog::new(100_000).unwrap());
        let w = std::sync::Arc::clone(&log);
        let writer = std::thread::spawn(move || {
            for i in 0..100_000 {
                // SAFETY: this thread is the log's only writer.
                unsafe { w.push(ev(i)) };
            }
        });
        let mut last = 0;
        while last < 100_000 {
            let (events, dropped) = log.snapshot();
            assert_eq!(dropped, 0);
            assert!(events.len() >= last, "the published length went back");
            for (i, e) in events.iter().enumerate() {
                assert_eq!(*e, ev(i as u64), "slot {i} of {}", events.len());
            }
            last = events.len();
        }
        writer.join().unwrap();
    }
}
