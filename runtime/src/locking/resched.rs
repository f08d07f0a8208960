//! The resched word: one 32-bit word per worker that says a scheduling decision is due for
//! its running task — the userspace stand-in for the kernel's `TIF_NEED_RESCHED` and for the
//! pending work of an interrupt (the tick, the reschedule IPI). The running task's
//! `cond_resched` loads it once and returns when it is zero: no clock read, no lock.
//!
//! ## Bits
//!
//! | bit | set by | cleared by | meaning |
//! |---|---|---|---|
//! | [`NEED_RESCHED`] | the wakeup-preemption check, a charge that used up the request, an active-balance request (all under the worker's runqueue lock); a shutdown's cancellation phase (no lock) | the pick (under the lock) | switch at the next scheduling point |
//! | [`TICK_FIRED`] | the tick timer's signal handler, on the worker's own thread | the tick (`cond_resched`'s full check) | the worker's tick timer expired: charge, fire timers, balance |
//! | [`TICK_CHECK`] | an enqueue onto the worker that moved its running task's resched time before the armed timer (under the lock) | the tick, and the re-arm after a pick (under the lock) | look again at the running task's charge and re-arm |
//! | [`WAKE_PENDING`] | a wakelist push, after the push | the drain, **before** it takes the list | the wakelist has entries (the IPI of `TTWU_QUEUE`) |
//! | [`TICK_BY_CLOCK`] | the worker, once, when it has no tick timer | nobody | every call reads the clock (no timer sets [`TICK_FIRED`]) |
//!
//! ## Why no request is lost
//!
//! Every bit is set with `fetch_or` and cleared with `fetch_and` of that bit alone, never
//! with a store of the whole word: the owner clearing its tick bits races with other threads
//! setting [`NEED_RESCHED`] or [`WAKE_PENDING`], and a store would wipe what they set.
//!
//! [`WAKE_PENDING`] pairs with the wakelist as a message with its flag: the waker pushes the
//! entry (Release) and then sets the bit (Release); the drain clears the bit (Acquire) and
//! then takes the list. If the clear reads the waker's set, the push happens before the take,
//! which therefore finds the entry; if the set comes after the clear, the bit stays set and
//! the next `cond_resched` drains. Either way a wakelist that holds an entry has its bit set
//! or a drain coming: a running task never runs on past a wakeup queued for its worker
//! (loom model `resched_word`, mutants `wake_pending_cleared_late` and
//! `tick_cleared_by_store`).
//!
//! The bits set under the runqueue lock are cleared under it, so they need no ordering of
//! their own; [`TICK_FIRED`] is set and cleared by one thread (the handler interrupts it).

use super::atomic::{AtomicU32, Ordering};

/// A switch is asked for: the next scheduling point switches (`TIF_NEED_RESCHED`).
pub const NEED_RESCHED: u32 = 1 << 0;
/// The worker's tick timer expired (set by its signal handler).
pub const TICK_FIRED: u32 = 1 << 1;
/// The running task's resched time may now be earlier than the armed timer.
pub const TICK_CHECK: u32 = 1 << 2;
/// The worker's wakelist has entries to drain.
pub const WAKE_PENDING: u32 = 1 << 3;
/// The worker has no tick timer: every scheduling point reads the clock.
pub const TICK_BY_CLOCK: u32 = 1 << 4;

/// A worker's resched word (module doc).
#[derive(Debug)]
pub struct Resched {
    word: AtomicU32,
}

impl Default for Resched {
    fn default() -> Self {
        Self::new()
    }
}

impl Resched {
    /// A word with no bit set.
    pub fn new() -> Resched {
        Resched {
            word: AtomicU32::new(0),
        }
    }

    /// The bits set now (Relaxed): what `cond_resched` tests, one load.
    #[inline(always)]
    pub fn load(&self) -> u32 {
        self.word.load(Ordering::Relaxed)
    }

    /// Sets `bits` (Relaxed: the bits set under the runqueue lock, and the handler's).
    #[inline]
    pub fn set(&self, bits: u32) {
        self.word.fetch_or(bits, Ordering::Relaxed);
    }

    /// Whether a switch is asked for.
    #[inline]
    pub fn need_resched(&self) -> bool {
        self.load() & NEED_RESCHED != 0
    }

    /// Asks for a switch at the next scheduling point (a look first: most calls find it set
    /// already or are made once, and the look saves a locked instruction when it is set).
    #[inline]
    pub fn set_need_resched(&self) {
        if !self.need_resched() {
            self.set(NEED_RESCHED);
        }
    }

    /// Clears `bits` if any of them is set, returning the word as it was (a look first, so
    /// that a word without them costs no locked instruction). Acquire: a drain that clears
    /// [`WAKE_PENDING`] sees the push that set it (module doc).
    #[inline]
    pub fn take(&self, bits: u32) -> u32 {
        let w = self.load();
        if w & bits == 0 {
            return w;
        }
        #[cfg(not(lagom_mutant = "tick_cleared_by_store"))]
        return self.word.fetch_and(!bits, Ordering::Acquire);
        // Mutant `tick_cleared_by_store` (loom model `resched_word`): the bits are cleared
        // with a store of what was read, wiping a bit that another thread set meanwhile.
        #[cfg(lagom_mutant = "tick_cleared_by_store")]
        {
            self.word.store(w & !bits, Ordering::Release);
            w
        }
    }

    /// A wakelist push has published its entry: sets [`WAKE_PENDING`] (Release, after the
    /// push; module doc).
    #[inline]
    pub fn set_wake_pending(&self) {
        self.word.fetch_or(WAKE_PENDING, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn bits_set_and_taken_separately() {
        let r = Resched::new();
        assert_eq!(r.load(), 0);
        r.set_need_resched();
        r.set(TICK_FIRED);
        r.set_wake_pending();
        assert!(r.need_resched());
        assert_eq!(
            r.take(TICK_FIRED | TICK_CHECK),
            NEED_RESCHED | TICK_FIRED | WAKE_PENDING
        );
        assert_eq!(r.load(), NEED_RESCHED | WAKE_PENDING);
        assert_eq!(
            r.take(TICK_CHECK),
            NEED_RESCHED | WAKE_PENDING,
            "nothing to take"
        );
        r.take(NEED_RESCHED | WAKE_PENDING);
        assert_eq!(r.load(), 0);
    }
}
