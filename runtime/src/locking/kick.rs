//! The idle/kick protocol: how a worker with nothing to run sleeps, and how a waker that gave it
//! work wakes it — the userspace stand-in for the kernel's idle loop and reschedule IPI.
//!
//! Invariant: *a worker never sleeps while work that was published for it before it slept is
//! pending.*
//!
//! ## States of the kick word
//!
//! | state | meaning |
//! |---|---|
//! | `ACTIVE` | the worker is running, or spinning before it publishes idle |
//! | `IDLE` | the worker published idle; it is re-checking for work or sleeping in `futex_wait` |
//! | `KICKED` | a waker claimed the wakeup of an idle worker and will call `futex_wake` |
//!
//! ## Protocol
//!
//! The worker ([`Kick::idle_wait`]):
//! 1. stores `IDLE`, then **`fence(SeqCst)`** (fence *A*);
//! 2. re-checks for work (its wakelist and runqueue, through the caller's closure); if there
//!    is some, stores `ACTIVE` and returns [`Idle::Work`] without sleeping;
//! 3. sleeps in `futex_wait(word, IDLE)`, which returns at once if the word is no longer `IDLE`;
//! 4. on return swaps the word back to `ACTIVE`; `KICKED` means a waker woke it.
//!
//! The waker ([`Kick::kick`]), after publishing work with a Release operation (a wakelist push):
//! 1. **`fence(SeqCst)`** (fence *B*);
//! 2. loads the word; if it is `IDLE`, claims the wakeup with `compare_exchange(IDLE, KICKED)`
//!    and, if that succeeds, calls `futex_wake`.
//!
//! ## Why no wakeup is lost
//!
//! This is a store-buffering (Dekker) handshake: the worker writes the word then reads the work
//! queue; the waker writes the work queue then reads the word. Fences A and B are SeqCst, so one
//! is ordered before the other. If A comes first, the waker's load after B sees `IDLE` (or a
//! later value) and kicks; if B comes first, the worker's re-check after A sees the work. In
//! the first case the kick cannot be lost either: `futex_wait` sleeps only if the word still
//! holds `IDLE`, and the waker changes it to `KICKED` before `futex_wake`; the kernel checks the
//! word and queues the sleeper atomically with respect to the wake. Only one waker wins the
//! `IDLE → KICKED` exchange, so a burst of wakeups costs one `futex_wake`, not one each.
//!
//! Plain SeqCst loads and stores would not do under loom (it does not model them as
//! sequentially consistent), and in real memory models the worker's store and the waker's
//! Release push may both sit in store buffers; hence explicit fences.
//!
//! Checked by the loom model `idle_kick` in `loom-tests/`. Mutants: `kick_no_recheck` drops
//! step 2 of the worker, `kick_no_fence` drops fence B.

use super::atomic::{AtomicU64, Ordering, fence};
use super::futex::Futex;

/// The worker is running (or spinning before it publishes idle).
const ACTIVE: u32 = 0;
/// The worker published idle and is re-checking or sleeping.
const IDLE: u32 = 1;
/// A waker claimed the wakeup and will call `futex_wake`.
const KICKED: u32 = 2;

/// Why [`Kick::idle_wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Idle {
    /// The re-check after publishing idle found work: the worker never slept.
    Work,
    /// A waker kicked the worker awake.
    Kicked,
    /// The sleep ended by timeout or spuriously (for instance a late `futex_wake` of an
    /// earlier kick); the worker should look for work and timers.
    Timeout,
}

/// One worker's kick word.
#[derive(Debug)]
pub struct Kick {
    futex: Futex,
    /// The scheduler-clock time of the last kick of the idle worker (written by a kicker
    /// that saw `IDLE`, before its claim; read by the worker after it was kicked, for how
    /// long it was idle: the adaptive idle spin, `sched/idle.rs`).
    kicked_at: AtomicU64,
}

impl Default for Kick {
    fn default() -> Self {
        Self::new()
    }
}

impl Kick {
    /// A kick word for a running worker.
    pub fn new() -> Self {
        Kick {
            futex: Futex::new(ACTIVE),
            kicked_at: AtomicU64::new(0),
        }
    }

    /// The worker's side: publishes idle, re-checks for work with `has_work`, and sleeps for
    /// at most `timeout_ns` (`None`: until kicked) only if there is none.
    ///
    /// `has_work` must observe every source of work that wakers publish before calling
    /// [`kick`](Self::kick) (the wakelist and the runqueue).
    pub fn idle_wait(&self, has_work: impl FnOnce() -> bool, timeout_ns: Option<u64>) -> Idle {
        let word = self.futex.word();
        word.store(IDLE, Ordering::Relaxed);
        // Fence A: orders the IDLE store before the re-check (see the module doc).
        fence(Ordering::SeqCst);
        #[cfg(not(lagom_mutant = "kick_no_recheck"))]
        if has_work() {
            super::probe::probe!("locking/kick: the idle re-check finds work");
            // A waker may have kicked meanwhile; its futex_wake then finds no sleeper, which
            // is harmless.
            word.store(ACTIVE, Ordering::Relaxed);
            return Idle::Work;
        }
        #[cfg(lagom_mutant = "kick_no_recheck")]
        let _ = has_work;
        super::probe::probe!("locking/kick: the idle worker sleeps");
        self.futex.wait(IDLE, timeout_ns);
        // Acquire: pairs with nothing the protocol needs (work is published through its own
        // Release/Acquire), but makes "kicked" imply the kicker's earlier writes are visible.
        match word.swap(ACTIVE, Ordering::Acquire) {
            KICKED => Idle::Kicked,
            _ => Idle::Timeout,
        }
    }

    /// The waker's side, after it published work for this worker: wakes the worker if it is
    /// idle. Returns whether this call issued the `futex_wake`.
    pub fn kick(&self) -> bool {
        // Fence B: orders the caller's publication of work before the load of the word.
        #[cfg(not(lagom_mutant = "kick_no_fence"))]
        fence(Ordering::SeqCst);
        let word = self.futex.word();
        if word.load(Ordering::Relaxed) != IDLE {
            return false;
        }
        // Before the claim, whose Release publishes it to the worker's Acquire swap.
        self.kicked_at
            .store(crate::sys::time::sched_clock(), Ordering::Relaxed);
        if word
            .compare_exchange(IDLE, KICKED, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        super::probe::probe!("locking/kick: a kick wakes the idle worker");
        self.futex.wake_all();
        true
    }

    /// The scheduler-clock time of the last kick of the idle worker (0: none yet); read by
    /// the worker after [`idle_wait`](Self::idle_wait) returned [`Idle::Kicked`] (the
    /// claim's Release and the worker's Acquire order it). A hint: a later kick may have
    /// overwritten it.
    pub fn kicked_at(&self) -> u64 {
        self.kicked_at.load(Ordering::Relaxed)
    }

    /// Whether the worker has published idle (and not yet been kicked or found work): a
    /// snapshot, for the stall monitor (which leaves idle workers alone and sleeps when all
    /// are, `sched/monitor.rs`), tests and models.
    pub fn is_idle(&self) -> bool {
        self.futex.word().load(Ordering::Relaxed) == IDLE
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn recheck_finds_work_without_sleeping() {
        let kick = Kick::new();
        assert_eq!(kick.idle_wait(|| true, None), Idle::Work);
        assert!(!kick.is_idle());
        // Nobody is idle, so a kick issues no futex_wake.
        assert!(!kick.kick());
    }

    #[test]
    fn timeout_returns_without_kick() {
        let kick = Kick::new();
        assert_eq!(kick.idle_wait(|| false, Some(1_000_000)), Idle::Timeout);
        assert!(!kick.is_idle());
    }

    #[test]
    fn kick_wakes_a_sleeping_worker() {
        let kick = Arc::new(Kick::new());
        let work = Arc::new(AtomicBool::new(false));
        let worker = {
            let (kick, work) = (Arc::clone(&kick), Arc::clone(&work));
            std::thread::spawn(move || {
                let mut kicked = 0;
                while !work.load(Ordering::Acquire) {
                    if kick.idle_wait(|| work.load(Ordering::Acquire), None) == Idle::Kicked {
                        kicked += 1;
                    }
                }
                kicked
            })
        };
        while !kick.is_idle() {
            std::thread::yield_now();
        }
        work.store(true, Ordering::Release);
        kick.kick();
        // With no timeout, the worker can only have left its sleep through the kick (or the
        // re-check, if it had not gone to sleep yet): it must terminate either way.
        let kicked = worker.join().unwrap();
        assert!(kicked <= 1);
    }
}
