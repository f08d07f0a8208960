//! The `Once` of `lagom::sync` (`runtime/src/sync/once.rs`), over the real code — the public
//! `lagom::sync::OnceLock`, which runs its initialiser through `Once::call_once_force`, on
//! loom threads: the race of a caller that finds the initialiser running, marks `QUEUED`
//! and registers on the waiter queue, against the runner ending its run, which wakes the
//! queue only if the word it swaps out has `QUEUED`.
//!
//! * `get_or_init_races_the_runner`: two threads call `get_or_init` on one empty cell. One
//!   runs the initialiser, the other returns the same value — at once, or after waiting for
//!   the run. Checked: one run; both see the value, which the initialiser wrote into a loom
//!   cell, so loom also checks that the run's end (Release) and the waiter's look (Acquire)
//!   order the write before the read. A waiter never woken is a loom deadlock.
//! * `wait_races_set`: one thread `wait`s for the value while the other `set`s it: `wait`
//!   queues on an incomplete `Once` that nobody runs yet, and the run that comes keeps its
//!   `QUEUED`.
//!
//! Mutant (`loom-tests/mutants.sh`): `once_no_queued_bit` queues without setting `QUEUED`:
//! the runner swaps out a word without it, wakes nobody, and the waiter sleeps forever
//! (caught by both models).
#![cfg(loom)]

use lagom::sync::OnceLock;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

/// A value that only the `Once` orders: loom checks its accesses.
struct Value(UnsafeCell<u32>);

// SAFETY: written once, by the initialiser, before the `Once` completes; read only after a
// caller saw it complete. The models check exactly that ordering.
unsafe impl Sync for Value {}

fn read(v: &Value) -> u32 {
    // SAFETY: `v` came out of a completed `OnceLock` (see `Value`).
    v.0.with(|p| unsafe { *p })
}

#[test]
fn get_or_init_races_the_runner() {
    loom::model(|| {
        let cell = Arc::new(OnceLock::<Value>::new());
        let runs = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
        let init = |runs: &loom::sync::atomic::AtomicUsize| {
            runs.fetch_add(1, loom::sync::atomic::Ordering::Relaxed);
            Value(UnsafeCell::new(7))
        };
        let (c2, r2) = (Arc::clone(&cell), Arc::clone(&runs));
        let other = thread::spawn(move || read(c2.get_or_init(|| init(&r2))));
        assert_eq!(read(cell.get_or_init(|| init(&runs))), 7);
        assert_eq!(other.join().unwrap(), 7);
        assert_eq!(runs.load(loom::sync::atomic::Ordering::Relaxed), 1);
    });
}

#[test]
fn wait_races_set() {
    loom::model(|| {
        let cell = Arc::new(OnceLock::<Value>::new());
        let c2 = Arc::clone(&cell);
        let setter = thread::spawn(move || {
            assert!(c2.set(Value(UnsafeCell::new(9))).is_ok());
        });
        assert_eq!(read(cell.wait()), 9);
        setter.join().unwrap();
    });
}
