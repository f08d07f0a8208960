//! Model 4, **idle vs kick**: a worker publishing idle, re-checking and sleeping, against
//! wakers that push work on its wakelist and kick it.
//!
//! The race: the worker's "publish idle, re-check the wakelist" against a waker's "push, check
//! whether the worker is idle" — a store-buffering handshake (`lagom::model::locking::kick`). The worker
//! here is the real `Kick::idle_wait` with the real `LList` as its source of work; it stops
//! once it has taken every entry. If a wakeup were lost, the worker would sleep forever on the
//! futex stand-in and loom would report a deadlock.
//!
//! Mutants: `--cfg lagom_mutant="kick_no_recheck"` drops the worker's re-check after
//! publishing idle (it sleeps with work pending when the waker saw it active);
//! `--cfg lagom_mutant="kick_no_fence"` drops the waker's SeqCst fence between its push and
//! its look at the idle word (both sides then miss each other's write).
#![cfg(loom)]

use std::ptr::NonNull;

use lagom::model::locking::kick::{Idle, Kick};
use lagom::model::locking::llist::{LList, LListNode};
use loom::sync::Arc;
use loom::thread;
use loom_tests::SendPtr;

struct Entry {
    link: LListNode,
}

lagom::impl_linked!(Entry, link);

struct Worker {
    wakelist: LList<Entry>,
    kick: Kick,
}

#[test]
fn idle_kick_no_lost_wakeup() {
    loom::model(|| {
        const WAKERS: usize = 2;
        let worker = Arc::new(Worker {
            wakelist: LList::new(),
            kick: Kick::new(),
        });
        let wakers: Vec<_> = (0..WAKERS)
            .map(|_| {
                let worker = Arc::clone(&worker);
                let entry = SendPtr(NonNull::from(Box::leak(Box::new(Entry {
                    link: LListNode::new(),
                }))));
                thread::spawn(move || {
                    // SAFETY: a fresh entry on no list; the worker frees it after taking it.
                    unsafe { worker.wakelist.push(entry.0) };
                    worker.kick.kick();
                })
            })
            .collect();

        let mut taken = 0;
        loop {
            for e in worker.wakelist.take_all() {
                // SAFETY: leaked by a waker, taken by this thread exactly once.
                drop(unsafe { Box::from_raw(e.as_ptr()) });
                taken += 1;
            }
            if taken == WAKERS {
                break;
            }
            // Without a timeout, `Idle::Timeout` still happens: a kick from an earlier round
            // whose `futex_wake` arrives after the worker went back to sleep is a spurious
            // wakeup. A lost wakeup is a worker asleep for good, which loom reports as a
            // deadlock.
            let _: Idle = worker.kick.idle_wait(|| !worker.wakelist.is_empty(), None);
        }
        for w in wakers {
            w.join().unwrap();
        }
    });
}
