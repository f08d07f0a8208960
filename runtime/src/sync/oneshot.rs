//! `lagom::sync::oneshot`: a channel for exactly one value — a task's reply, a result handed
//! from a thread to a task.
//!
//! Invariant: *the value sent is received at most once; a receiver blocked in `recv` is
//! woken by the send or by the sender's drop without sending.*
//!
//! ## The protocol
//!
//! The slot (the value, whether the sender or receiver is gone) sits behind a short internal
//! lock, the blocked receiver on a waiter queue (the kind every primitive of `lagom::sync`
//! blocks on). **send** fills the slot under the lock and, after it, wakes the receiver if it
//! waits; **recv** takes the value under the lock or queues with `validate` = "still empty and
//! the sender still there" (which takes the slot's lock, so the send either comes before it and
//! is seen, or after it and wakes the queued receiver). The sender's drop without a send marks
//! the slot and wakes the receiver.

use alloc::sync::Arc;
use core::fmt;
use core::time::Duration;

use super::mpsc::{RecvError, RecvTimeoutError, TryRecvError};
use super::waiters::{Wait, WaitQueue};
use crate::locking::lock::Lock;
use crate::time::Instant;

struct Slot<T> {
    value: Option<T>,
    sender_gone: bool,
    receiver_gone: bool,
}

struct Inner<T> {
    slot: Lock<Slot<T>>,
    recv_q: WaitQueue,
}

/// Makes a one-shot channel.
///
/// ```
/// let rt = lagom::Runtime::builder().build().unwrap();
/// let (tx, rx) = lagom::sync::oneshot::channel();
/// rt.spawn(move || tx.send(6 * 7).unwrap());
/// assert_eq!(rx.recv(), Ok(42));
/// ```
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let inner = Arc::new(Inner {
        slot: Lock::new(Slot {
            value: None,
            sender_gone: false,
            receiver_gone: false,
        }),
        recv_q: WaitQueue::new(),
    });
    (
        Sender {
            inner: Some(Arc::clone(&inner)),
        },
        Receiver { inner },
    )
}

/// The sending half: [`send`](Self::send) consumes it.
pub struct Sender<T> {
    inner: Option<Arc<Inner<T>>>,
}

/// The receiving half.
pub struct Receiver<T> {
    inner: Arc<Inner<T>>,
}

// As `mpsc`'s halves (and std's): no panic can leave the channel half-changed.
impl<T> core::panic::UnwindSafe for Sender<T> {}
impl<T> core::panic::RefUnwindSafe for Sender<T> {}
impl<T> core::panic::UnwindSafe for Receiver<T> {}
impl<T> core::panic::RefUnwindSafe for Receiver<T> {}

impl<T> Sender<T> {
    /// Sends `t`.
    ///
    /// # Errors
    /// `t` back if the receiver is gone.
    pub fn send(mut self, t: T) -> Result<(), T> {
        let inner = self.inner.take().expect("a sender sends once");
        {
            let mut s = inner.slot.lock();
            s.sender_gone = true;
            if s.receiver_gone {
                return Err(t);
            }
            s.value = Some(t);
        }
        inner.recv_q.wake_all(|_| {});
        Ok(())
    }

    /// Whether the receiver is gone (a send would fail).
    pub fn is_closed(&self) -> bool {
        self.inner
            .as_ref()
            .is_none_or(|i| i.slot.lock().receiver_gone)
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            inner.slot.lock().sender_gone = true;
            inner.recv_q.wake_all(|_| {});
        }
    }
}

impl<T> Receiver<T> {
    fn take(&self) -> Result<Option<T>, RecvError> {
        let mut s = self.inner.slot.lock();
        match s.value.take() {
            Some(t) => Ok(Some(t)),
            None if s.sender_gone => Err(RecvError),
            None => Ok(None),
        }
    }

    fn recv_until(&self, deadline: Option<u64>) -> Result<T, RecvTimeoutError> {
        loop {
            match self.take() {
                Ok(Some(t)) => return Ok(t),
                Err(RecvError) => return Err(RecvTimeoutError::Disconnected),
                Ok(None) => {}
            }
            let r = self.inner.recv_q.wait(
                0,
                deadline,
                || {
                    let s = self.inner.slot.lock();
                    s.value.is_none() && !s.sender_gone
                },
                || {},
                |_| {},
                |_| {},
            );
            if r == Wait::TimedOut {
                return match self.take() {
                    Ok(Some(t)) => Ok(t),
                    Ok(None) => Err(RecvTimeoutError::Timeout),
                    Err(RecvError) => Err(RecvTimeoutError::Disconnected),
                };
            }
        }
    }

    /// Waits for the value.
    ///
    /// # Errors
    /// [`RecvError`] if the sender was dropped without sending (or the value was taken
    /// already by `try_recv`).
    pub fn recv(self) -> Result<T, RecvError> {
        self.recv_until(None).map_err(|_| RecvError)
    }

    /// The value if it is there now. Inside a task, an error is also a preemption point
    /// (`sync`'s module doc), so a task that spins on `try_recv` lets the sender run.
    ///
    /// # Errors
    /// `Empty`, or `Disconnected` if the sender is gone without a value for it.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let r = match self.take() {
            Ok(Some(t)) => return Ok(t),
            Ok(None) => TryRecvError::Empty,
            Err(RecvError) => TryRecvError::Disconnected,
        };
        crate::task::try_point();
        Err(r)
    }

    /// Waits for the value for at most `timeout`.
    ///
    /// # Errors
    /// `Timeout`, or `Disconnected`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_until(Some(Instant::now().add_saturating(timeout).as_nanos()))
    }

    /// As [`recv_timeout`](Self::recv_timeout), giving up at `deadline`: a
    /// `std::time::Instant` (with the `std` feature) or a
    /// [`lagom::time::Instant`](crate::time::Instant), as `mpsc::Receiver::recv_deadline`.
    ///
    /// # Errors
    /// As [`recv_timeout`](Self::recv_timeout).
    pub fn recv_deadline(&self, deadline: impl Into<Instant>) -> Result<T, RecvTimeoutError> {
        self.recv_until(Some(deadline.into().as_nanos()))
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let v = {
            let mut s = self.inner.slot.lock();
            s.receiver_gone = true;
            s.value.take()
        };
        drop(v);
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("oneshot::Sender { .. }")
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("oneshot::Receiver { .. }")
    }
}
