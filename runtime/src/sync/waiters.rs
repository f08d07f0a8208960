//! The waiter queue every primitive of `lagom::sync` blocks on: a FIFO of parked tasks and
//! OS threads behind a short internal lock (`locking::lock::Lock`), with the one function
//! that wakes them ([`wake`]).
//!
//! Invariant: *a waiter that found its condition false and registered is woken by the next
//! release that changes the condition after the registration; a waiter never sleeps on a
//! condition that was already true when it registered.*
//!
//! ## The protocol
//!
//! Each primitive keeps its own state (a lock word, a buffer, a permit count) and a
//! [`WaitQueue`]. The queue knows nothing of the state; the primitive hands it closures.
//!
//! * **The waiter** ([`WaitQueue::wait`]) takes the queue's lock, counts itself in `len`,
//!   then runs the primitive's `validate` *under the queue's lock*: "is my condition still
//!   false?" (the lock still held, the buffer still empty). If it is now true, it uncounts
//!   itself and returns [`Wait::Invalid`]: the caller retries its fast path. Otherwise it
//!   pushes its node (its [`Unparker`] and a `notified` flag) and releases the queue's lock.
//!   Then it runs `before_sleep` (a condvar unlocks its mutex here, after it is queued) and
//!   parks until `notified` is set, re-checking the flag after every return of `park`.
//! * **The releaser** changes the state first (unlock, push, add permits), then calls
//!   [`WaitQueue::wake_front_while`] / [`wake_one`](WaitQueue::wake_one) /
//!   [`wake_all`](WaitQueue::wake_all): under the queue's lock it pops the waiters it wakes,
//!   lets the primitive update its state knowing how many it took and whether more remain (a
//!   mutex hands its lock to the one it woke and keeps its `PARKED` bit only if more wait),
//!   sets each popped node's `notified` (Release), releases the queue's lock, and only then
//!   unparks each one through [`wake`].
//!
//! **What re-checks what.** The race is a waiter registering while a releaser hands off. The
//! waiter's `validate` and the releaser's pop are serialised by the queue's lock: either the
//! releaser's pop comes first — then the releaser's state change came before the waiter's
//! `validate`, which sees it and returns `Invalid` — or the waiter's push comes first, and
//! the pop finds it. (Loom model `waiters` in `loom-tests/`; mutant `waiters_validate_unlocked`
//! runs `validate` before taking the queue's lock, which opens the window: the waiter sleeps
//! forever.)
//!
//! **`len`, the lock-free look.** A releaser with nobody to wake should not take the queue's
//! lock (a channel's `send`, a condvar's `notify_one` with no waiter). `len` is written only
//! under the queue's lock, *before* `validate` runs, and read without it by
//! [`has_waiters`](WaitQueue::has_waiters). That look is right only when the primitive's
//! state change and its `validate` go through one lock of the primitive's own (a channel's
//! buffer lock; a condvar's mutex): the waiter's count, sequenced before its `validate`'s
//! unlock of that lock, then happens before the releaser's look, which comes after its lock
//! of it; or the releaser's change came first and `validate` sees it. (Mutant
//! `waiters_count_late` counts the waiter after `validate`: loom finds the lost wakeup.)
//!
//! **Spurious returns are harmless.** `park` may return with no unpark (`task/park.rs`): a
//! timer armed by an earlier timed wait firing late, an `Unparker` the user holds, a token
//! left from an earlier wakeup. The waiter only trusts `notified`, set by the releaser under
//! the queue's lock before it unparks, so it parks again. Conversely a waiter that returns
//! leaves at most one stray token behind (its releaser's unpark may land after it saw
//! `notified`), which the next park absorbs as one more spurious return.
//!
//! **Timeouts and cancellation.** A timed waiter that reaches its deadline takes the queue's
//! lock and removes its node. If the node is gone, a releaser popped it (and set `notified`
//! under that lock, so the waiter sees it): the wakeup was given, and the wait counts as
//! woken — a handed-off mutex or permit is the waiter's. If the node was still there, the
//! waiter is out and the primitive's `timed_out` closure runs under the queue's lock with
//! whether the queue is now empty (a mutex clears `PARKED`). A task cancelled by a shutdown
//! unwinds out of `park`: a drop guard does the same removal, and if it was woken already it
//! passes what it was handed on (`undo`: unlock the mutex, return the permits), so a
//! cancelled waiter never swallows a release that another waiter needs.
//!
//! **A timed wait that never slept** (its deadline had passed when it looked: a zero
//! timeout) returns `TimedOut` through `task::try_point`, the preemption point of a call that
//! did not block (`sync`'s module doc), so that a loop of such waits gives its worker up.
//!
//! **Why nobody unparks under the queue's lock.** Nothing that can block or switch runs under
//! the queue's lock: `validate`, the state update and the list operations are a few loads and
//! stores. So a task holding it is never switched away while a task of the same worker spins
//! on it, and an OS thread holding it is at worst preempted (the lock then sleeps on a futex,
//! as the runqueue lock does). An unpark is the exception: waking a task may take another
//! worker's runqueue lock and wait for that worker to finish switching the task out, waking
//! a thread is a `futex` system call. Done under the queue's lock, a wakeup would make every
//! other waiter and releaser of the primitive wait for another worker's scheduler, and the
//! woken waiter would often run at once only to find the queue's lock still held. So the
//! nodes are popped and marked under the lock and unparked after it, the node's own
//! reference keeping its unparker alive.
//!
//! **Who parks.** A task parks with `task::park` (it blocks, its worker runs others); an OS
//! thread — a plain thread, `block_on`'s caller, a thread of `spawn_blocking`'s pool — parks
//! on its futex parker (`tcb/waiter.rs`). Both are an [`Unparker`], so one queue holds both,
//! and tasks and threads share every primitive. Under loom, where threads share one OS
//! thread, each loom thread parks on a parker of its own ([`current`]).

use alloc::collections::VecDeque;
use alloc::sync::Arc;

use crate::locking::atomic::{AtomicU32, AtomicUsize, Ordering};
use crate::locking::lock::Lock;
use crate::task::Unparker;
use crate::worker::Waiter;

/// The one function through which every primitive of `lagom::sync` wakes a waiter.
///
/// `sync` is true where the waker is about to block itself right after the hand-off (a
/// `send` followed by the sender's `recv` on the reply channel, a rendezvous `send`): the
/// kernel's `WF_SYNC` hint, which lets placement keep the wakee on the waker's CPU
/// (`Unparker::unpark_sync`: sync wake_affine, `preempt_sync`).
#[inline]
pub(crate) fn wake(u: &Unparker, sync: bool) {
    if sync {
        u.unpark_sync();
    } else {
        u.unpark();
    }
}

/// The calling task or thread's unparker (module doc, "Who parks").
#[cfg(not(loom))]
fn current() -> Unparker {
    crate::task::current_unparker()
}

/// Under loom: a parker per loom thread (loom threads share one OS thread, so the OS thread's
/// parker would be shared by all of them).
#[cfg(loom)]
fn current() -> Unparker {
    loom::thread_local! {
        static ME: Unparker = Unparker::from_waiter(Waiter::Thread(Arc::new(
            crate::tcb::ThreadParker::new(),
        )));
    }
    ME.with(Unparker::clone)
}

/// Who the caller is: the address of its task, or of its OS thread's parker (under loom, of
/// its loom thread's parker), which nobody else has while the caller is alive. Nonzero. A
/// `Once` keeps its runner's, so that an initialiser that waits for itself is told so.
pub(crate) fn whoami() -> usize {
    match current().waiter() {
        Waiter::Task(t) => Arc::as_ptr(t).cast::<()>() as usize,
        Waiter::Thread(p) => Arc::as_ptr(p).cast::<()>() as usize,
    }
}

/// Parks the caller, whose unparker is `me`, at most until `deadline` (monotonic ns).
fn park_as(me: &Unparker, deadline: Option<u64>) {
    match (me.waiter(), deadline) {
        (Waiter::Thread(p), None) => p.park(),
        (Waiter::Thread(p), Some(d)) => p.park_until(d),
        (Waiter::Task(_), None) => crate::task::park(),
        (Waiter::Task(_), Some(d)) => crate::task::park_until(d),
    }
}

/// One waiting task or thread.
struct Node {
    unparker: Unparker,
    /// Set (Release) by the releaser that popped the node, under the queue's lock: [`WOKEN`]
    /// or [`HANDED`]; 0 before.
    notified: AtomicU32,
    /// The primitive's word about the waiter (a semaphore: the permits it wants; a rwlock:
    /// reader or writer), which the releaser's pick reads.
    tag: usize,
}

/// `Node::notified`: popped and woken.
const WOKEN: u32 = 1;
/// `Node::notified`: popped, woken, and handed what it waited for ([`WaitQueue::wake_one_handing`]).
const HANDED: u32 = 2;

/// What the waiter reads from its node's `notified`.
fn outcome(n: u32) -> Wait {
    if n == HANDED {
        Wait::Handed
    } else {
        Wait::Woken
    }
}

/// How a [`WaitQueue::wait`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) enum Wait {
    /// A releaser popped and woke the waiter.
    Woken,
    /// A releaser popped and woke the waiter, handing it what it waited for (a mutex's lock:
    /// [`WaitQueue::wake_one_handing`]); the other wakes of this queue hand off implicitly
    /// and say [`Woken`](Wait::Woken).
    Handed,
    /// `validate` found the condition true: nothing was queued; retry.
    Invalid,
    /// The deadline passed first; the waiter is out of the queue.
    TimedOut,
}

/// What a releaser's pick took, for its state update under the queue's lock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Woke {
    /// How many waiters it pops.
    pub(crate) count: usize,
    /// Whether waiters remain queued.
    pub(crate) more: bool,
}

/// The waiter queue (module doc).
pub(crate) struct WaitQueue {
    q: Lock<VecDeque<Arc<Node>>>,
    /// The queued waiters plus one being validated; written under `q`'s lock (module doc).
    len: AtomicUsize,
}

impl core::fmt::Debug for WaitQueue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WaitQueue")
            .field("len", &self.len.load(Ordering::Relaxed))
            .finish()
    }
}

// The queue's lock guards only the list of waiters, which no code that can panic touches
// while the lock is held, so an unwind never leaves it half-changed: as std's primitives
// (whose waiters are a futex word), every primitive holding a queue is unwind-safe.
impl core::panic::UnwindSafe for WaitQueue {}
impl core::panic::RefUnwindSafe for WaitQueue {}

impl Default for WaitQueue {
    fn default() -> Self {
        WaitQueue::new()
    }
}

/// Takes the node out of the queue if it is still there, on a timeout or a cancellation.
/// Returns `Some(now empty)` if it was there, `None` if a releaser popped it.
fn remove(wq: &WaitQueue, q: &mut VecDeque<Arc<Node>>, node: &Arc<Node>) -> Option<bool> {
    let i = q.iter().position(|n| Arc::ptr_eq(n, node))?;
    drop(q.remove(i));
    wq.len.store(q.len(), Ordering::Release);
    Some(q.is_empty())
}

/// Removes the node of a waiter that unwinds out of its park (a shutdown's cancellation),
/// or passes on the wakeup it was given (module doc, "Timeouts and cancellation").
struct Abandon<'a, T: FnOnce(bool), U: FnOnce(Wait)> {
    wq: &'a WaitQueue,
    node: &'a Arc<Node>,
    timed_out: Option<T>,
    undo: Option<U>,
    /// Cleared once the wait ended normally: nothing to remove or pass on.
    armed: bool,
}

impl<T: FnOnce(bool), U: FnOnce(Wait)> Drop for Abandon<'_, T, U> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut q = self.wq.q.lock();
        match remove(self.wq, &mut q, self.node) {
            Some(empty) => {
                if let Some(f) = self.timed_out.take() {
                    f(empty);
                }
            }
            None => {
                drop(q);
                if let Some(f) = self.undo.take() {
                    f(outcome(self.node.notified.load(Ordering::Acquire)));
                }
            }
        }
    }
}

impl WaitQueue {
    crate::locking::loom_const_fn! {
        /// An empty queue.
        pub(crate) fn new() -> WaitQueue {
            WaitQueue {
                q: Lock::new(VecDeque::new()),
                len: AtomicUsize::new(0),
            }
        }
    }

    /// How many waiters are queued or being validated (for tests that wait until theirs
    /// are queued).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn queued(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Whether a waiter is queued or being validated: a look without the queue's lock, right
    /// only for the primitives whose state change and `validate` share a lock of their own
    /// (module doc, "`len`").
    #[inline]
    pub(crate) fn has_waiters(&self) -> bool {
        self.len.load(Ordering::Acquire) != 0
    }

    /// Blocks the caller until a releaser pops it (module doc). Under the queue's lock:
    /// `validate()` (false: return [`Wait::Invalid`] at once); after queueing:
    /// `before_sleep()`; when `deadline` (monotonic ns) passes first: `timed_out(empty)`
    /// under the queue's lock; when the caller unwinds after it was woken: `undo(how)`, with
    /// [`Wait::Woken`] or [`Wait::Handed`].
    pub(crate) fn wait(
        &self,
        tag: usize,
        deadline: Option<u64>,
        validate: impl FnOnce() -> bool,
        before_sleep: impl FnOnce(),
        timed_out: impl FnOnce(bool),
        undo: impl FnOnce(Wait),
    ) -> Wait {
        let node = Arc::new(Node {
            unparker: current(),
            notified: AtomicU32::new(0),
            tag,
        });
        #[cfg(lagom_mutant = "waiters_validate_unlocked")]
        let valid = validate();
        {
            let mut q = self.q.lock();
            #[cfg(not(lagom_mutant = "waiters_count_late"))]
            self.len.store(q.len() + 1, Ordering::Release);
            #[cfg(not(lagom_mutant = "waiters_validate_unlocked"))]
            let valid = validate();
            if !valid {
                self.len.store(q.len(), Ordering::Release);
                return Wait::Invalid;
            }
            #[cfg(lagom_mutant = "waiters_count_late")]
            self.len.store(q.len() + 1, Ordering::Release);
            q.push_back(Arc::clone(&node));
        }
        let mut guard = Abandon {
            wq: self,
            node: &node,
            timed_out: Some(timed_out),
            undo: Some(undo),
            armed: true,
        };
        before_sleep();
        let mut parked = false;
        loop {
            let n = node.notified.load(Ordering::Acquire);
            if n != 0 {
                guard.armed = false;
                return outcome(n);
            }
            if let Some(d) = deadline
                && crate::sys::time::monotonic_ns() >= d
                && !cfg!(loom)
            {
                break;
            }
            park_as(&node.unparker, deadline);
            parked = true;
        }
        // The deadline passed: take the node out unless a releaser took it first.
        guard.armed = false;
        let mut q = self.q.lock();
        let r = match remove(self, &mut q, &node) {
            Some(empty) => {
                if let Some(f) = guard.timed_out.take() {
                    f(empty);
                }
                Wait::TimedOut
            }
            // Popped, so `notified` was set under the lock just taken: woken after all.
            None => outcome(node.notified.load(Ordering::Acquire)),
        };
        drop(q);
        if r == Wait::TimedOut && !parked {
            // A timed wait that was over before it slept (a zero or past timeout) is a
            // spin's step: the preemption point of a call that did not block (module doc).
            crate::task::try_point();
        }
        r
    }

    /// Pops waiters from the front while `pick(tag)` says yes (it sees each front waiter's
    /// tag in turn and stops the pops at the first no), then runs `update` with what was
    /// taken, all under the queue's lock; marks the popped waiters and wakes them after
    /// releasing it (module doc). Returns how many it woke.
    pub(crate) fn wake_front_while(
        &self,
        sync: bool,
        mut pick: impl FnMut(usize) -> bool,
        update: impl FnOnce(Woke),
    ) -> usize {
        let mut taken: VecDeque<Arc<Node>> = VecDeque::new();
        {
            let mut q = self.q.lock();
            while let Some(n) = q.front() {
                if !pick(n.tag) {
                    break;
                }
                taken.extend(q.pop_front());
            }
            self.len.store(q.len(), Ordering::Release);
            update(Woke {
                count: taken.len(),
                more: !q.is_empty(),
            });
            for n in &taken {
                n.notified.store(WOKEN, Ordering::Release);
            }
        }
        for n in &taken {
            wake(&n.unparker, sync);
        }
        taken.len()
    }

    /// Wakes the front waiter, if any, running `update` under the queue's lock.
    /// (As `wake_front_while` taking one, without its list of taken nodes.)
    pub(crate) fn wake_one(&self, sync: bool, update: impl FnOnce(Woke)) -> bool {
        self.wake_one_handing(sync, |w, _| {
            update(w);
            false
        })
    }

    /// As [`wake_one`](Self::wake_one), where `update` also sees the front waiter's tag and
    /// returns whether it hands the waiter what it waits for: its `wait` then returns
    /// [`Wait::Handed`] instead of [`Wait::Woken`] (a mutex's hand-off).
    pub(crate) fn wake_one_handing(
        &self,
        sync: bool,
        update: impl FnOnce(Woke, usize) -> bool,
    ) -> bool {
        let n = {
            let mut q = self.q.lock();
            let n = q.pop_front();
            self.len.store(q.len(), Ordering::Release);
            let woke = Woke {
                count: usize::from(n.is_some()),
                more: !q.is_empty(),
            };
            let handed = update(woke, n.as_ref().map_or(0, |n| n.tag));
            if let Some(n) = &n {
                let how = if handed { HANDED } else { WOKEN };
                n.notified.store(how, Ordering::Release);
            }
            n
        };
        match n {
            Some(n) => {
                wake(&n.unparker, sync);
                true
            }
            None => false,
        }
    }

    /// Wakes every waiter, running `update` under the queue's lock.
    pub(crate) fn wake_all(&self, update: impl FnOnce(Woke)) -> usize {
        self.wake_front_while(false, |_| true, update)
    }
}
