//! The runqueue lock (`lagom::model::locking::lock::Lock`): mutual exclusion and the hand-over of what
//! one holder wrote to the next, including through the contended path that sleeps on the
//! futex and the unlock that wakes it.
//!
//! Three threads increment a counter under the lock; the counter lives in the lock's own cell,
//! which loom tracks, so any two accesses not ordered by the lock fail the model, and a lost
//! update fails the final assertion. A sleeper never woken is a loom deadlock.
//!
//! Mutant: `--cfg lagom_mutant="lock_relaxed_unlock"` makes the unlocking swap Relaxed; the
//! next holder's read of the counter is then unordered after the last holder's write.
#![cfg(loom)]

use lagom::model::locking::lock::Lock;
use loom::sync::Arc;
use loom::thread;

#[test]
fn rq_lock_mutual_exclusion() {
    loom::model(|| {
        let lock = Arc::new(Lock::new(0u32));
        let others: Vec<_> = (0..2)
            .map(|_| {
                let lock = Arc::clone(&lock);
                thread::spawn(move || *lock.lock() += 1)
            })
            .collect();
        *lock.lock() += 1;
        for t in others {
            t.join().unwrap();
        }
        assert_eq!(*lock.lock(), 3);
    });
}
