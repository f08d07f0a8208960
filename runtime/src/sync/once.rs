//! [`Once`]: run an initialiser exactly once, however many tasks and threads ask; the others
//! wait for it, blocking the calling *task* (its worker runs others, the initialiser among
//! them) or, on a plain OS thread, the thread. `std::sync::Once`'s API and poisoning; the
//! ground of [`OnceLock`](super::OnceLock) and [`LazyLock`](super::LazyLock).
//!
//! Invariant: *at most one initialiser runs at a time and, once one has returned normally,
//! none runs again; every waiter is woken when a run ends, and what the run wrote happens
//! before whatever a caller does after it saw the `Once` complete.*
//!
//! ## The protocol
//!
//! The state word: `INCOMPLETE`, `POISONED` (a run panicked, or `OnceLock`'s failed), `RUNNING`
//! or `COMPLETE` in its low bits, and `QUEUED` (someone is, or is about to be, on the waiter
//! queue, `waiters.rs`) above them.
//!
//! * **call**: `COMPLETE` returns at once (an Acquire load: the fast path). From
//!   `INCOMPLETE` (or `POISONED`, for `call_once_force`) a compare-exchange to `RUNNING`
//!   (keeping `QUEUED`) elects the runner, which records who it is (`owner`), runs the
//!   closure, and at its end — normal or unwinding, in a drop guard — clears `owner` and
//!   swaps in `COMPLETE` (or `POISONED`; Release). If the word it swapped out had `QUEUED`,
//!   it wakes every waiter (`wake_all`).
//! * **wait** (a caller that finds `RUNNING`, or `wait` that finds no completion yet): set
//!   `QUEUED` with a compare-exchange, then queue with `validate` = "the word is still what I
//!   saw, with `QUEUED`". A word that moved on fails the validation and the caller looks
//!   again. Woken, it looks again: `COMPLETE` returns, `POISONED` panics (`call_once`,
//!   `wait`) or runs (`call_once_force`), `RUNNING` waits again.
//!
//! No lost wakeup, for the reason the mutex has none (`mutex.rs`): the waiter's `validate`
//! and the runner's wake-up are serialised by the queue's lock. Either the end-of-run swap
//! comes first, and the validation (under the queue's lock, after it) sees the changed word;
//! or the validation saw `QUEUED` set, so the swap — the only thing that clears `QUEUED` —
//! comes after it, returns a word with `QUEUED`, and the runner's `wake_all` pops the waiter
//! queued under the same lock. (Loom model `once` in `loom-tests/`; mutant
//! `once_no_queued_bit` queues without setting `QUEUED`: the runner sees no waiter and the
//! waiter sleeps forever.)
//!
//! **Why a task's wait cannot deadlock its worker.** std's `Once` blocks the OS thread: a
//! task waiting for an initialiser that another task of the same worker runs (and that
//! blocks, or is preempted) stops the worker, so the initialiser never finishes. Here the
//! waiter parks as a task, and its worker runs the initialiser.
//!
//! **An initialiser that waits for itself** (calls `call_once` or `wait` on its own `Once`,
//! directly or through a `OnceLock`'s or `LazyLock`'s initialiser that reads itself) would
//! wait forever; std leaves the outcome unspecified ("a panic or a deadlock") and deadlocks.
//! Here a waiter first compares `owner` with itself (`waiters::whoami`: its task, or its
//! thread's parker) and panics with a message that says what happened. A false alarm is
//! impossible: only the runner writes its own identity, it clears it before the run ends,
//! and a caller reads its own earlier writes in order, so it never sees its own identity
//! from a run that is over.

use core::cell::Cell;
use core::fmt;

use super::waiters::{WaitQueue, whoami};
use crate::locking::atomic::{AtomicU32, AtomicUsize, Ordering};

/// Nobody ran the initialiser yet (or `OnceLock::take` reset it).
const INCOMPLETE: u32 = 0;
/// An initialiser panicked (or a `OnceLock`'s failed, `OnceState::poison`).
const POISONED: u32 = 1;
/// An initialiser runs.
const RUNNING: u32 = 2;
/// An initialiser returned normally: final.
const COMPLETE: u32 = 3;
/// The state bits of the word.
const STATE: u32 = 3;
/// Someone is, or is about to be, queued.
const QUEUED: u32 = 4;

/// What a call does on a poisoned `Once`: panic with std's message for the type (word for
/// word, a `&'static str` as std's, so code that matches on it moves over), or run
/// (`call_once_force`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnPoison {
    /// `Once::call_once`: "Once instance has previously been poisoned".
    PanicOnce,
    /// `LazyLock`: "LazyLock instance has previously been poisoned".
    PanicLazyLock,
    /// `call_once_force` (and `OnceLock`, which initialises through it).
    Run,
}

impl OnPoison {
    #[track_caller]
    fn panic(self) -> ! {
        match self {
            OnPoison::PanicLazyLock => panic!("LazyLock instance has previously been poisoned"),
            _ => panic!("Once instance has previously been poisoned"),
        }
    }
}

/// A waiter that is the runner itself (module doc, "An initialiser that waits for itself").
#[cold]
#[track_caller]
fn reentrant() -> ! {
    panic!(
        "a Once (or OnceLock, LazyLock) was asked for its value from inside its own \
         initialiser, which would wait for itself forever: compute what the initialiser \
         needs without reading the cell it initialises"
    )
}

/// A primitive for one-time initialisation, as `std::sync::Once`, with its poisoning: at most
/// one initialiser runs at a time and, once one has returned normally, none runs again. Waiters
/// block the calling task, not its worker (the initialiser among the tasks it runs); an
/// initialiser that waits for its own `Once` panics, saying so, where std's deadlocks.
///
/// ```
/// use lagom::sync::Once;
/// use std::sync::atomic::{AtomicU32, Ordering};
///
/// static INIT: Once = Once::new();
/// static RUNS: AtomicU32 = AtomicU32::new(0);
///
/// let rt = lagom::Runtime::builder().build().unwrap();
/// let hs: Vec<_> = (0..8)
///     .map(|_| {
///         rt.spawn(|| {
///             INIT.call_once(|| {
///                 // A blocking initialiser: the tasks that wait for it park, and their
///                 // workers run it.
///                 lagom::task::sleep(std::time::Duration::from_millis(1));
///                 RUNS.fetch_add(1, Ordering::Relaxed);
///             })
///         })
///     })
///     .collect();
/// for h in hs {
///     h.join().unwrap();
/// }
/// assert!(INIT.is_completed());
/// assert_eq!(RUNS.load(Ordering::Relaxed), 1);
/// ```
pub struct Once {
    state: AtomicU32,
    /// The runner's identity (`waiters::whoami`) while it runs; 0 otherwise.
    owner: AtomicUsize,
    queue: WaitQueue,
}

/// What [`Once::call_once_force`]'s closure is told: whether the `Once` was poisoned (as
/// `std::sync::OnceState`).
pub struct OnceState {
    poisoned: bool,
    /// What the run's end stores: `COMPLETE`, or `POISONED` after [`poison`](Self::poison).
    set_state_to: Cell<u32>,
}

/// The state of a `Once` seen through `&mut` (no run can be under way): for `OnceLock` and
/// `LazyLock`, which then reach their data without atomics' ceremony.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exclusive {
    Incomplete,
    Poisoned,
    Complete,
}

/// Ends a run, normally or unwinding: clears `owner`, stores the outcome, wakes the waiters
/// if any queued (module doc).
struct Completion<'a> {
    once: &'a Once,
    /// `POISONED` unless the closure returned (then what its `OnceState` says).
    set_to: u32,
}

impl Drop for Completion<'_> {
    fn drop(&mut self) {
        self.once.owner.store(0, Ordering::Relaxed);
        let prev = self.once.state.swap(self.set_to, Ordering::Release);
        if prev & QUEUED != 0 {
            self.once.queue.wake_all(|_| {});
        }
    }
}

impl Once {
    crate::locking::loom_const_fn! {
        /// A `Once` whose initialiser has not run. A `const fn`, as std's: `static` holds
        /// one (not under `cfg(loom)`, whose atomics are not `const`).
        #[must_use]
        // std's `Once` has no `Default` (a defaulted one would be a second way to make an
        // incomplete `Once`, which std chose not to have); clippy asks only where `new` is
        // not `const` (loom).
        #[allow(clippy::new_without_default)]
        pub fn new() -> Once {
            Once {
                state: AtomicU32::new(INCOMPLETE),
                owner: AtomicUsize::new(0),
                queue: WaitQueue::new(),
            }
        }
    }

    /// Runs `f` if no initialiser has completed yet, and returns once one has: blocks the
    /// calling task (or thread) while another caller's initialiser runs. What the
    /// initialiser wrote is visible after the return.
    ///
    /// # Panics
    /// If an initialiser panicked before (the `Once` is poisoned), or `f` panics now (which
    /// poisons it); if called from its own initialiser (which std's leaves unspecified: it
    /// deadlocks), since that would wait for itself forever.
    #[track_caller]
    pub fn call_once<F: FnOnce()>(&self, f: F) {
        if self.completed() {
            return;
        }
        let mut f = Some(f);
        self.call(OnPoison::PanicOnce, &mut |_| {
            if let Some(f) = f.take() {
                f();
            }
        });
    }

    /// As [`call_once`](Self::call_once), but runs on a poisoned `Once` too, telling `f`
    /// so ([`OnceState::is_poisoned`]); if `f` returns, the `Once` is complete.
    ///
    /// # Panics
    /// If `f` panics (the `Once` stays, or becomes, poisoned); if called from its own
    /// initialiser.
    #[track_caller]
    pub fn call_once_force<F: FnOnce(&OnceState)>(&self, f: F) {
        if self.completed() {
            return;
        }
        let mut f = Some(f);
        self.call(OnPoison::Run, &mut |st| {
            if let Some(f) = f.take() {
                f(st);
            }
        });
    }

    /// Whether an initialiser has completed (not: started, or panicked). After `true`, what
    /// it wrote is visible. Inside a task, a `false` is also a preemption point (as a
    /// `cond_resched` without its cancellation: `sync`'s module doc), so a task that polls it
    /// lets the initialiser run, even on its own worker; [`wait`](Self::wait) blocks instead.
    #[inline]
    pub fn is_completed(&self) -> bool {
        let done = self.completed();
        if !done {
            crate::task::try_point();
        }
        done
    }

    /// [`is_completed`](Self::is_completed) without its preemption point, for the fast paths
    /// of the `Once`, `OnceLock` and `LazyLock` (and `Debug`).
    #[inline]
    pub(crate) fn completed(&self) -> bool {
        self.state.load(Ordering::Acquire) == COMPLETE
    }

    /// Blocks the calling task (or thread) until an initialiser has completed, without
    /// running one (as std's, stable since Rust 1.86).
    ///
    /// # Panics
    /// If the `Once` is, or becomes, poisoned ([`wait_force`](Self::wait_force) waits on);
    /// if called from its own initialiser.
    #[track_caller]
    pub fn wait(&self) {
        if !self.completed() {
            self.wait_inner(false);
        }
    }

    /// As [`wait`](Self::wait), ignoring poisoning: waits until an initialiser completes.
    ///
    /// # Panics
    /// If called from its own initialiser.
    #[track_caller]
    pub fn wait_force(&self) {
        if !self.completed() {
            self.wait_inner(true);
        }
    }

    /// The slow path of `call_once` and `call_once_force`: run, or wait for the runner
    /// (module doc); `on_poison` says what a poisoned `Once` does.
    #[cold]
    #[track_caller]
    pub(crate) fn call(&self, on_poison: OnPoison, f: &mut dyn FnMut(&OnceState)) {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            match s & STATE {
                COMPLETE => return,
                POISONED if on_poison != OnPoison::Run => on_poison.panic(),
                INCOMPLETE | POISONED => {
                    let run = (s & QUEUED) | RUNNING;
                    if let Err(now) = self.state.compare_exchange_weak(
                        s,
                        run,
                        Ordering::Acquire,
                        Ordering::Acquire,
                    ) {
                        s = now;
                        continue;
                    }
                    self.owner.store(whoami(), Ordering::Relaxed);
                    let mut done = Completion {
                        once: self,
                        set_to: POISONED,
                    };
                    let st = OnceState {
                        poisoned: s & STATE == POISONED,
                        set_state_to: Cell::new(COMPLETE),
                    };
                    f(&st);
                    done.set_to = st.set_state_to.get();
                    return;
                }
                _ => s = self.sleep(s),
            }
        }
    }

    /// The slow path of `wait` (`force`: `wait_force`).
    #[cold]
    #[track_caller]
    fn wait_inner(&self, force: bool) {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            match s & STATE {
                COMPLETE => return,
                POISONED if !force => OnPoison::PanicOnce.panic(),
                _ => s = self.sleep(s),
            }
        }
    }

    /// Waits until the word, `s` when last seen, may have moved on: marks `QUEUED` and
    /// queues (module doc). Returns the word as it is now.
    #[track_caller]
    fn sleep(&self, s: u32) -> u32 {
        if s & STATE == RUNNING && self.owner.load(Ordering::Relaxed) == whoami() {
            reentrant();
        }
        #[cfg(not(lagom_mutant = "once_no_queued_bit"))]
        let queued = s | QUEUED;
        // Mutant: queue without telling the runner.
        #[cfg(lagom_mutant = "once_no_queued_bit")]
        let queued = s;
        if queued != s
            && let Err(now) =
                self.state
                    .compare_exchange_weak(s, queued, Ordering::Relaxed, Ordering::Acquire)
        {
            return now;
        }
        // Any outcome means "look again"; a waiter cancelled by a shutdown owes nobody a
        // wakeup (the runner wakes everyone).
        let _ = self.queue.wait(
            0,
            None,
            || self.state.load(Ordering::Relaxed) == queued,
            || {},
            |_| {},
            |_| {},
        );
        self.state.load(Ordering::Acquire)
    }

    /// The state through `&mut`: no run is under way.
    pub(crate) fn exclusive(&mut self) -> Exclusive {
        match self.state.load(Ordering::Relaxed) & STATE {
            INCOMPLETE => Exclusive::Incomplete,
            POISONED => Exclusive::Poisoned,
            _ => Exclusive::Complete,
        }
    }

    /// Sets the state through `&mut` (`LazyLock`'s `DerefMut` runs its initialiser so).
    pub(crate) fn set_exclusive(&mut self, to: Exclusive) {
        let s = match to {
            Exclusive::Incomplete => INCOMPLETE,
            Exclusive::Poisoned => POISONED,
            Exclusive::Complete => COMPLETE,
        };
        self.state.store(s, Ordering::Relaxed);
    }
}

impl fmt::Debug for Once {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Once").finish_non_exhaustive()
    }
}

impl OnceState {
    /// Whether the `Once` was poisoned when this call began (a previous initialiser
    /// panicked).
    #[inline]
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// Ends the run poisoned instead of complete, without a panic (`OnceLock`'s failed
    /// initialiser, which leaves the cell empty for the next caller).
    pub(crate) fn poison(&self) {
        self.set_state_to.set(POISONED);
    }
}

impl fmt::Debug for OnceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnceState")
            .field("poisoned", &self.is_poisoned())
            .finish()
    }
}
