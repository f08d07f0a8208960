//! [`Barrier`]: `n` tasks (or threads) wait until all `n` have arrived, then all go on; one of
//! them is told it is the leader. `std::sync::Barrier`'s API.
//!
//! Invariant: *each generation releases exactly `n` waiters, once, and exactly one of them
//! leads.*
//!
//! ## The protocol
//!
//! A [`Mutex`] over (arrived, generation) and a [`Condvar`]: an arrival counts itself; the
//! `n`-th resets the count, starts the next generation, wakes every waiter and leads; the
//! others wait until the generation they arrived in is over. The generation, not the count,
//! is what a waiter re-checks, so a spurious wakeup, or the next generation's arrivals, cannot
//! release it early or twice.
//!
//! A waiter that a shutdown cancels unwinds out of the condvar wait without the lock (the
//! condvar's "Cancellation") and stays counted as arrived: taking the lock again to uncount
//! itself could wait for a task that cannot run while it unwinds.

use super::{Condvar, Mutex};

/// A barrier for `n` tasks or threads, with `std::sync::Barrier`'s API: each generation
/// releases exactly `n` waiters, once, and exactly one of them leads.
pub struct Barrier {
    n: usize,
    state: Mutex<(usize, u64)>,
    cv: Condvar,
}

/// What [`Barrier::wait`] returns: whether this waiter leads its generation.
#[derive(Debug, Clone, Copy)]
pub struct BarrierWaitResult(bool);

impl BarrierWaitResult {
    /// Whether this waiter was the one of its generation that is told so (the last to
    /// arrive).
    pub fn is_leader(&self) -> bool {
        self.0
    }
}

impl Barrier {
    crate::locking::loom_const_fn! {
        /// A barrier that releases its waiters `n` at a time (`0` is treated as `1`, as std).
        /// A `const fn`, as std's (not under `cfg(loom)`).
        pub fn new(n: usize) -> Barrier {
            Barrier {
                n: if n == 0 { 1 } else { n },
                state: Mutex::new((0, 0)),
                cv: Condvar::new(),
            }
        }
    }

    /// Blocks until `n` callers are waiting, then releases them all.
    pub fn wait(&self) -> BarrierWaitResult {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let generation = g.1;
        g.0 += 1;
        if g.0 < self.n {
            let _g = self
                .cv
                .wait_while(g, |s| s.1 == generation)
                .unwrap_or_else(|e| e.into_inner());
            BarrierWaitResult(false)
        } else {
            g.0 = 0;
            g.1 = g.1.wrapping_add(1);
            drop(g);
            self.cv.notify_all();
            BarrierWaitResult(true)
        }
    }
}

impl core::fmt::Debug for Barrier {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Barrier")
            .field("n", &self.n)
            .finish_non_exhaustive()
    }
}

impl Barrier {
    /// The lock over (arrived, generation), for the crate's root tests (`lib.rs`), which
    /// hold it from outside while a waiter is cancelled.
    #[cfg(all(test, feature = "std", not(loom)))]
    pub(crate) fn lock_for_test(&self) -> &Mutex<(usize, u64)> {
        &self.state
    }
}
