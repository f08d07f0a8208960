//! `JoinHandle`: the joiner's side of a task's join packet (`tcb/packet.rs`, which holds the
//! protocol and its loom model).

use alloc::sync::Arc;
use core::ptr::NonNull;

use super::park::{current_waiter, park};
use crate::JoinError;
use crate::tcb::Outcome;
use crate::worker::{Packet, TaskRef};

/// The handle of a spawned task: [`join`](Self::join) waits for its end and returns its value,
/// or the panic that ended it as a [`JoinError`].
pub struct JoinHandle<T> {
    /// The task's packet, kept alive by `task`, whose `completion` owns it (`tcb/completion.rs`):
    /// an `Arc` here would cost two more locked read-modify-writes per spawn (issue #5).
    pub(crate) packet: NonNull<Packet<T>>,
    pub(crate) id: u64,
    pub(crate) task: TaskRef,
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

    /// Whether the task has ended (its outcome is ready).
    pub fn is_finished(&self) -> bool {
        self.packet().is_done()
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
        let r = loop {
            if let Some(r) = self.try_take(current_waiter) {
                break r;
            }
            park();
        };
        // The outcome is out of the packet: the task's allocation may serve the next spawn.
        super::recycle::recycle(self.task);
        r
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
