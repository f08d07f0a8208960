//! `JoinHandle`: the joiner's side of a task's join packet (`tcb/packet.rs`, which holds the
//! protocol and its loom model).

use alloc::sync::Arc;
use core::ptr::NonNull;
use core::time::Duration;

use super::park::{current_waiter, park, park_until};
use crate::JoinError;
use crate::tcb::Outcome;
use crate::worker::{Packet, TaskRef};

/// The handle of a spawned task: [`join`](Self::join) waits for its end and returns its value,
/// or the panic that ended it as a [`JoinError`].
pub struct JoinHandle<T> {
    /// The task's packet, kept alive by `task`, whose `completion` owns it (`tcb/completion.rs`):
    /// an `Arc` here would cost two more locked read-modify-writes per spawn.
    pub(crate) packet: NonNull<Packet<T>>,
    pub(crate) id: u64,
    pub(crate) task: TaskRef,
    /// Set when a [`join_timeout`](Self::join_timeout) timed out: the waiter it left
    /// registered in the packet, which keeps it until the task ends (`tcb/packet.rs`). A
    /// later join from another task or thread cannot register itself, so it polls.
    pub(crate) registered: Option<crate::worker::Waiter>,
}

// SAFETY: as if it held an `Arc<Packet<T>>` (which it reaches through its task): the packet
// is Send and Sync for `T: Send`, and the task reference is.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: as for Send.
unsafe impl<T: Send> Sync for JoinHandle<T> {}

impl<T> core::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("JoinHandle").field("id", &self.id).finish()
    }
}

impl<T> JoinHandle<T> {
    /// The handle of `task`, whose completion is `packet`.
    #[cfg(loom)]
    pub(crate) fn new(packet: &Arc<Packet<T>>, id: u64, task: TaskRef) -> Self {
        JoinHandle {
            packet: Self::packet_of(packet),
            id,
            task,
            registered: None,
        }
    }

    /// The pointer a handle keeps to `packet`, which its task's completion must hold.
    #[cfg(loom)]
    pub(crate) fn packet_of(packet: &Arc<Packet<T>>) -> NonNull<Packet<T>> {
        NonNull::from(&**packet)
    }

    /// The packet.
    fn packet(&self) -> &Packet<T> {
        // SAFETY: `self.task` keeps the task alive, and its completion keeps the packet alive
        // (the task drops it only when it is freed).
        unsafe { self.packet.as_ref() }
    }

    /// The task's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The task's unparker: makes its current or next [`park`] return.
    pub fn unparker(&self) -> super::Unparker {
        super::Unparker::for_task(Arc::clone(&self.task))
    }

    /// Whether the task has ended (its outcome is ready). Inside a task, a `false` is also a
    /// preemption point (as a `cond_resched` without its cancellation), so a task that
    /// polls `is_finished` in a loop lets the task it waits for run, even on its own worker.
    pub fn is_finished(&self) -> bool {
        let done = self.packet().is_done();
        if !done {
            super::current::try_point();
        }
        done
    }

    /// Waits for the task to end; from a task (it blocks, the worker runs others) or from a
    /// plain OS thread (it sleeps on a futex).
    ///
    /// # Errors
    /// The task's panic, as [`JoinError`]; or, if the runtime shut down before the task
    /// ended, a [`JoinError`] whose [`is_cancelled`](JoinError::is_cancelled) is true (see
    /// [`crate::Runtime::shutdown_timeout`]). It never panics. A joining task that is
    /// itself cancelled unwinds from here.
    pub fn join(self) -> Result<T, JoinError> {
        if self.registered_elsewhere() {
            return self
                .join_polling(None)
                .unwrap_or_else(|_| unreachable!("no deadline"));
        }
        self.join_with(current_waiter, park, crate::worker::local)
    }

    /// The loop of [`join`](Self::join): rounds of `try_take` registering `waiter()`, with
    /// `park` between them, then the recycle of the task's allocation on the worker thread
    /// that `here` finds once the outcome is in (looked up after the last park: the joiner may
    /// have moved). A loom model runs it with its own worker thread (`lagom::model`).
    #[inline(always)]
    pub(crate) fn join_with<'a>(
        self,
        waiter: impl Fn() -> crate::worker::Waiter,
        mut park: impl FnMut(),
        here: impl FnOnce() -> Option<&'a crate::worker::WorkerThread>,
    ) -> Result<T, JoinError> {
        let r = loop {
            if let Some(r) = self.try_take(&waiter) {
                break r;
            }
            park();
        };
        // The outcome is out of the packet: the task's allocation may serve the next spawn.
        super::recycle::recycle_on(here(), self.task);
        r
    }

    /// As [`join`](Self::join), giving up after `timeout` (inside a task, on its worker's
    /// timer): `Ok` with the task's outcome, or `Err` with the handle back, to join again
    /// later.
    ///
    /// The packet keeps the first waiter that registered in it; a handle that timed out here
    /// and is then joined from *another* task or thread has no way to register that one, so
    /// that join waits by looking every millisecond instead of being woken (from the same
    /// task or thread it is woken as usual).
    ///
    /// # Errors
    /// The handle, if the task has not ended in time.
    pub fn join_timeout(
        mut self,
        timeout: Duration,
    ) -> Result<Result<T, JoinError>, JoinHandle<T>> {
        let deadline = crate::time::Instant::now()
            .add_saturating(timeout)
            .as_nanos();
        if self.registered_elsewhere() {
            return self.join_polling(Some(deadline));
        }
        loop {
            if let Some(r) = self.try_take(current_waiter) {
                super::recycle::recycle(self.task);
                return Ok(r);
            }
            if crate::sys::time::monotonic_ns() >= deadline {
                self.registered = Some(current_waiter());
                return Err(self);
            }
            park_until(deadline);
        }
    }

    /// Whether a timed-out `join_timeout` left a waiter other than the caller registered.
    fn registered_elsewhere(&self) -> bool {
        use crate::worker::Waiter;
        match (&self.registered, current_waiter()) {
            (None, _) => false,
            (Some(Waiter::Task(a)), Waiter::Task(b)) => !Arc::ptr_eq(a, &b),
            (Some(Waiter::Thread(a)), Waiter::Thread(b)) => !Arc::ptr_eq(a, &b),
            (Some(_), _) => true,
        }
    }

    /// A join that looks every millisecond (see [`join_timeout`](Self::join_timeout)),
    /// until `deadline` if one is given.
    fn join_polling(self, deadline: Option<u64>) -> Result<Result<T, JoinError>, JoinHandle<T>> {
        const POLL_NS: u64 = 1_000_000;
        loop {
            if self.is_finished() {
                // DONE: `try_take` takes the outcome without touching the waiter.
                let r = self
                    .try_take(current_waiter)
                    .expect("a finished task's outcome");
                super::recycle::recycle(self.task);
                return Ok(r);
            }
            let now = crate::sys::time::monotonic_ns();
            if deadline.is_some_and(|d| now >= d) {
                return Err(self);
            }
            let next = now.saturating_add(POLL_NS);
            park_until(deadline.map_or(next, |d| d.min(next)));
        }
    }

    /// One round of [`join`](Self::join): take the outcome if it is there, else register
    /// `waiter()` (once) to be woken when it arrives ([`Packet::try_take`]).
    #[inline]
    pub(crate) fn try_take(
        &self,
        waiter: impl FnOnce() -> crate::worker::Waiter,
    ) -> Option<Result<T, JoinError>> {
        // SAFETY: this handle is the packet's one joiner (it is not Clone, and `join` consumes
        // it), and it stops asking once it got the outcome.
        match unsafe { self.packet().try_take(waiter) }? {
            Outcome::Ended(r) => Some(r),
            Outcome::Cancelled => {
                let name = match self.task.name.as_str() {
                    "" => alloc::format!("task-{}", self.id),
                    n => alloc::string::String::from(n),
                };
                Some(Err(JoinError::cancelled(name, self.id)))
            }
        }
    }
}
