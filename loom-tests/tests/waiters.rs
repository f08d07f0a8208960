//! The waiter queue of `lagom::sync` (`runtime/src/sync/waiters.rs`): the lost-wakeup race
//! of a waiter registering while a releaser hands off, over the real code — the public
//! `lagom::sync::mpsc` channel and `lagom::sync::Mutex` themselves, run on loom threads.
//!
//! A loom model cannot switch stacks, so the waiters here are OS-thread waiters: each loom
//! thread parks on a futex parker of its own (`sync/waiters.rs`'s `current` under loom; the
//! futex is the loom stand-in of `locking/futex.rs`), which is the same `WaitQueue::wait` /
//! `wake_*` code a task runs, with `park` of the thread parker in place of `task::park`
//! (whose own race with `unpark` is model 1, `ttwu.rs`). A waiter never woken is a loom
//! deadlock.
//!
//! * `channel_recv_races_send`: a receiver finds the channel empty and registers while a
//!   sender pushes and looks for a waiter to wake. Checked: the receiver gets the message
//!   (a second sender stays alive, so only the send's own wakeup can end the wait).
//! * `mutex_lock_races_unlock`: a locker finds the mutex held, marks it `PARKED` and
//!   registers while the holder unlocks and hands off. Checked: both get the lock, the
//!   counter (in a loom cell, so loom checks the hand-off's ordering) reaches 2.
//!
//! Mutants (`loom-tests/mutants.sh`):
//! * `waiters_validate_unlocked` runs the waiter's `validate` before taking the queue's
//!   lock: the releaser's state change and its pop can both fall between the waiter's
//!   `validate` and its push, and the waiter sleeps forever (caught by both models).
//! * `waiters_count_late` counts the waiter in `len` after `validate` instead of before:
//!   a sender's lock-free look at `len` can miss a receiver that already validated "empty",
//!   and skips the wakeup (caught by the channel model).
#![cfg(loom)]

use lagom::sync::Mutex;
use lagom::sync::mpsc;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

#[test]
fn channel_recv_races_send() {
    loom::model(|| {
        let (tx, rx) = mpsc::channel::<u32>();
        // A second sender stays alive until the end: the sending thread's drop of its own
        // would otherwise wake the receiver (disconnection wakes every waiter) and hide a
        // lost wakeup of the send.
        let keep = tx.clone();
        let sender = thread::spawn(move || tx.send(7).unwrap());
        assert_eq!(rx.recv(), Ok(7));
        sender.join().unwrap();
        drop(keep);
    });
}

/// A counter that only the mutex orders: loom checks every access to it.
struct Counter(UnsafeCell<u32>);

// SAFETY: accessed only under the `Mutex` of the model, whose ordering loom checks.
unsafe impl Sync for Counter {}

#[test]
fn mutex_lock_races_unlock() {
    loom::model(|| {
        let m = Arc::new(Mutex::new(()));
        let c = Arc::new(Counter(UnsafeCell::new(0)));
        let bump = |m: &Mutex<()>, c: &Counter| {
            let g = m.lock().unwrap();
            // SAFETY: under the lock.
            c.0.with_mut(|p| unsafe { *p += 1 });
            drop(g);
        };
        let (m2, c2) = (Arc::clone(&m), Arc::clone(&c));
        let other = thread::spawn(move || bump(&m2, &c2));
        bump(&m, &c);
        other.join().unwrap();
        let g = m.lock().unwrap();
        // SAFETY: under the lock.
        assert_eq!(c.0.with(|p| unsafe { *p }), 2);
        drop(g);
    });
}
