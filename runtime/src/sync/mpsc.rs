//! Channels: `lagom::sync::mpsc`, with the names and signatures of `std::sync::mpsc`
//! ([`channel`], [`sync_channel`], [`Sender`], [`SyncSender`], [`Receiver`] and their
//! errors), blocking the calling task (or thread), not its worker.
//!
//! **Multi-producer, multi-consumer.** Unlike std's, [`Receiver`] is `Clone` (and `Sync`):
//! several tasks may receive from one channel, each message going to exactly one of them.
//! The channel disconnects for senders when the last receiver is dropped, as std's does when
//! its one receiver is; what is still buffered then is dropped with it.
//!
//! Invariant: *every message sent is received at most once, in the order its sender sent it
//! (FIFO per sender; one buffer, so FIFO overall); a bounded channel never holds more than
//! its bound; a receiver blocked on an empty channel is woken by the next send or by the
//! last sender's drop.*
//!
//! ## The protocol
//!
//! The buffer (a `VecDeque`), the bound, and the sender and receiver counts sit behind one
//! short internal lock. Two waiter queues (the one kind every primitive of `lagom::sync` blocks
//! on) hold the blocked: receivers waiting for a message, senders waiting for room.
//!
//! * **send**: under the lock, push (or, full, go to wait for room with `validate` =
//!   "still full and still a receiver", taken under the buffer's lock); after the lock, if a
//!   receiver waits, wake one. A rendezvous channel (`sync_channel(0)`) holds one message at
//!   a time and its sender then waits until that message is taken.
//! * **recv**: under the lock, pop (or, empty, wait for a message with `validate` = "still
//!   empty and still a sender"); after the lock, if a sender waits for room, wake one (a
//!   rendezvous channel: wake every waiting sender, one of which waits for this message).
//! * **drop of the last sender / receiver**: wakes every waiter on the other side, who
//!   re-check and see the disconnection.
//!
//! The look at "does anyone wait?" skips the waiter queue's lock: right because `validate`
//! takes the buffer's lock, which the sender's push also holds (the queue's `len`, read after
//! taking that lock). A woken waiter that finds its condition false again (another receiver
//! took the message first, as `try_recv` may) waits again; every push wakes one waiter, so a
//! message never sits in the buffer while every receiver sleeps.
//!
//! The rendezvous sender's wakeup of the receiver is the one `sync` hand-off (`WF_SYNC`): it
//! blocks right after. Every other wakeup is plain.

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use core::fmt;
use core::time::Duration;

use super::waiters::{Wait, WaitQueue};
use crate::locking::lock::Lock;
use crate::time::Instant;

/// The shared channel.
struct Chan<T> {
    state: Lock<State<T>>,
    /// Receivers waiting for a message.
    recv_q: WaitQueue,
    /// Senders waiting for room, or (rendezvous) for their message to be taken.
    send_q: WaitQueue,
}

struct State<T> {
    buf: VecDeque<T>,
    /// `None`: unbounded; `Some(0)`: rendezvous.
    cap: Option<usize>,
    senders: usize,
    receivers: usize,
    /// Messages taken so far (a rendezvous sender waits until its message is).
    taken: u64,
    /// Messages pushed so far.
    pushed: u64,
}

impl<T> State<T> {
    fn full(&self) -> bool {
        self.cap.is_some_and(|c| self.buf.len() >= c.max(1))
    }
}

/// Where a deadline comes from.
fn deadline(d: Duration) -> u64 {
    Instant::now().add_saturating(d).as_nanos()
}

impl<T> Chan<T> {
    fn new(cap: Option<usize>) -> Arc<Chan<T>> {
        Arc::new(Chan {
            state: Lock::new(State {
                buf: VecDeque::new(),
                cap,
                senders: 1,
                receivers: 1,
                taken: 0,
                pushed: 0,
            }),
            recv_q: WaitQueue::new(),
            send_q: WaitQueue::new(),
        })
    }

    /// Sends `t`, waiting for room until `deadline` (`None`: no limit; `Some(0)`: no wait).
    fn send(&self, t: T, deadline: Option<u64>) -> Result<(), SendTimeoutError<T>> {
        loop {
            let ticket = {
                let mut s = self.state.lock();
                if s.receivers == 0 {
                    return Err(SendTimeoutError::Disconnected(t));
                }
                if !s.full() {
                    s.buf.push_back(t);
                    s.pushed += 1;
                    (s.cap == Some(0)).then_some(s.pushed)
                } else {
                    drop(s);
                    let r = self.send_q.wait(
                        0,
                        deadline,
                        || {
                            let s = self.state.lock();
                            s.receivers > 0 && s.full()
                        },
                        || {},
                        |_| {},
                        // Woken for room, then cancelled: the room is another sender's.
                        |_| {
                            self.send_q.wake_one(false, |_| {});
                        },
                    );
                    if r == Wait::TimedOut {
                        return Err(SendTimeoutError::Timeout(t));
                    }
                    continue;
                }
            };
            // Pushed. A rendezvous sender blocks right after: the `sync` hand-off.
            if self.recv_q.has_waiters() {
                self.recv_q.wake_one(ticket.is_some(), |_| {});
            }
            return match ticket {
                None => Ok(()),
                Some(n) => self.wait_taken(n, deadline),
            };
        }
    }

    /// A rendezvous sender's wait until its message (the `n`-th pushed) is taken. If the
    /// last receiver leaves first, or the deadline passes, the message is taken back when it
    /// is still there.
    fn wait_taken(&self, n: u64, deadline: Option<u64>) -> Result<(), SendTimeoutError<T>> {
        loop {
            let r = self.send_q.wait(
                0,
                deadline,
                || {
                    let s = self.state.lock();
                    s.taken < n && s.receivers > 0
                },
                || {},
                |_| {},
                |_| {},
            );
            let mut s = self.state.lock();
            if s.taken >= n {
                return Ok(());
            }
            if s.receivers == 0 || r == Wait::TimedOut {
                // Not taken: it is the one message in the buffer (bound 1), at the back.
                let t = s.buf.pop_back().expect("an untaken rendezvous message");
                s.pushed -= 1;
                drop(s);
                // Room again for another sender.
                if self.send_q.has_waiters() {
                    self.send_q.wake_all(|_| {});
                }
                return Err(if r == Wait::TimedOut {
                    SendTimeoutError::Timeout(t)
                } else {
                    SendTimeoutError::Disconnected(t)
                });
            }
        }
    }

    /// `try_send`: never waits (a rendezvous channel accepts only with a receiver waiting).
    fn try_send(&self, t: T) -> Result<(), TrySendError<T>> {
        {
            let mut s = self.state.lock();
            if s.receivers == 0 {
                return Err(TrySendError::Disconnected(t));
            }
            let room = match s.cap {
                Some(0) => s.buf.is_empty() && self.recv_q.has_waiters(),
                _ => !s.full(),
            };
            if !room {
                return Err(TrySendError::Full(t));
            }
            s.buf.push_back(t);
            s.pushed += 1;
        }
        if self.recv_q.has_waiters() {
            self.recv_q.wake_one(false, |_| {});
        }
        Ok(())
    }

    /// Takes a message if there is one: `Ok(Some)`, `Ok(None)` (empty) or `Err` (empty and
    /// no sender left).
    fn take(&self) -> Result<Option<T>, RecvError> {
        let (t, rendezvous) = {
            let mut s = self.state.lock();
            match s.buf.pop_front() {
                Some(t) => {
                    s.taken += 1;
                    (t, s.cap == Some(0))
                }
                None if s.senders == 0 => return Err(RecvError),
                None => return Ok(None),
            }
        };
        if self.send_q.has_waiters() {
            if rendezvous {
                // One of them waits for this message to be taken.
                self.send_q.wake_all(|_| {});
            } else {
                self.send_q.wake_one(false, |_| {});
            }
        }
        Ok(Some(t))
    }

    /// Receives, waiting until `deadline` (`None`: no limit).
    fn recv(&self, deadline: Option<u64>) -> Result<T, RecvTimeoutError> {
        loop {
            match self.take() {
                Ok(Some(t)) => return Ok(t),
                Err(RecvError) => return Err(RecvTimeoutError::Disconnected),
                Ok(None) => {}
            }
            let r = self.recv_q.wait(
                0,
                deadline,
                || {
                    let s = self.state.lock();
                    s.buf.is_empty() && s.senders > 0
                },
                || {},
                |_| {},
                // Woken for a message, then cancelled: it is another receiver's.
                |_| {
                    self.recv_q.wake_one(false, |_| {});
                },
            );
            if r == Wait::TimedOut {
                // A last look: a message that came with the timeout is taken.
                return match self.take() {
                    Ok(Some(t)) => Ok(t),
                    Ok(None) => Err(RecvTimeoutError::Timeout),
                    Err(RecvError) => Err(RecvTimeoutError::Disconnected),
                };
            }
        }
    }

    fn add_sender(&self) {
        self.state.lock().senders += 1;
    }

    fn drop_sender(&self) {
        let last = {
            let mut s = self.state.lock();
            s.senders -= 1;
            s.senders == 0
        };
        if last {
            self.recv_q.wake_all(|_| {});
        }
    }

    fn add_receiver(&self) {
        self.state.lock().receivers += 1;
    }

    fn drop_receiver(&self) {
        let rest = {
            let mut s = self.state.lock();
            s.receivers -= 1;
            if s.receivers > 0 {
                return;
            }
            // A rendezvous message stays: its sender, waiting for it to be taken, takes it
            // back (`wait_taken`).
            if s.cap == Some(0) {
                VecDeque::new()
            } else {
                core::mem::take(&mut s.buf)
            }
        };
        self.send_q.wake_all(|_| {});
        // The messages nobody will receive, dropped outside the lock.
        drop(rest);
    }
}

/// Makes an unbounded channel: [`Sender::send`] never blocks (as `std::sync::mpsc::channel`).
///
/// ```
/// let rt = lagom::Runtime::builder().build().unwrap();
/// let (tx, rx) = lagom::sync::mpsc::channel();
/// let h = rt.spawn(move || (0..10).for_each(|i| tx.send(i).unwrap()));
/// let got: Vec<i32> = rt.block_on(move || rx.iter().collect());
/// h.join().unwrap();
/// assert_eq!(got, (0..10).collect::<Vec<_>>());
/// ```
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let c = Chan::new(None);
    (
        Sender {
            chan: Arc::clone(&c),
        },
        Receiver { chan: c },
    )
}

/// Makes a channel that buffers at most `bound` messages: [`SyncSender::send`] blocks while
/// it is full; with `bound == 0` each send waits until its message is received (a
/// rendezvous), as `std::sync::mpsc::sync_channel`.
pub fn sync_channel<T>(bound: usize) -> (SyncSender<T>, Receiver<T>) {
    let c = Chan::new(Some(bound));
    (
        SyncSender {
            chan: Arc::clone(&c),
        },
        Receiver { chan: c },
    )
}

/// The sending half of an unbounded [`channel`]; `Clone` for more producers.
pub struct Sender<T> {
    chan: Arc<Chan<T>>,
}

/// The sending half of a bounded [`sync_channel`]; `Clone` for more producers.
pub struct SyncSender<T> {
    chan: Arc<Chan<T>>,
}

/// The receiving half of a channel. Unlike std's, `Clone` and `Sync`: receivers share the
/// messages, each going to one of them (module doc).
pub struct Receiver<T> {
    chan: Arc<Chan<T>>,
}

// As std's, whatever `T`: the channel's state changes only under its lock, in a few moves
// that cannot panic (no message is dropped, no user code runs, under it), so a panic never
// leaves a half-changed channel behind for the code that catches it.
impl<T> core::panic::UnwindSafe for Sender<T> {}
impl<T> core::panic::RefUnwindSafe for Sender<T> {}
impl<T> core::panic::UnwindSafe for SyncSender<T> {}
impl<T> core::panic::RefUnwindSafe for SyncSender<T> {}
impl<T> core::panic::UnwindSafe for Receiver<T> {}
impl<T> core::panic::RefUnwindSafe for Receiver<T> {}

impl<T> Sender<T> {
    /// Sends `t` (never blocks). Inside a task every send is also a preemption point (as a
    /// `cond_resched` without its cancellation: `sync`'s module doc): a loop that only sends
    /// would otherwise never give its worker up, and the receivers queued behind it on that
    /// worker would never run while the buffer grows (std's channel tests spin so).
    ///
    /// # Errors
    /// `t` back if every receiver is gone.
    pub fn send(&self, t: T) -> Result<(), SendError<T>> {
        let r = self
            .chan
            .send(t, None)
            .map_err(|e| SendError(e.into_inner()));
        crate::task::try_point();
        r
    }
}

impl<T> SyncSender<T> {
    /// Sends `t`, blocking while the channel is full (a rendezvous: until it is received).
    ///
    /// # Errors
    /// `t` back if every receiver is gone.
    pub fn send(&self, t: T) -> Result<(), SendError<T>> {
        self.chan
            .send(t, None)
            .map_err(|e| SendError(e.into_inner()))
    }

    /// Sends `t` if there is room now (a rendezvous: if a receiver waits). Inside a task, an
    /// error is also a preemption point (`sync`'s module doc).
    ///
    /// # Errors
    /// `Full(t)` or `Disconnected(t)`.
    pub fn try_send(&self, t: T) -> Result<(), TrySendError<T>> {
        let r = self.chan.try_send(t);
        if r.is_err() {
            crate::task::try_point();
        }
        r
    }

    /// As [`send`](Self::send), giving up after `timeout` (std has it unstable).
    ///
    /// # Errors
    /// `Timeout(t)` or `Disconnected(t)`.
    pub fn send_timeout(&self, t: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        self.chan.send(t, Some(deadline(timeout)))
    }
}

impl<T> Receiver<T> {
    /// Receives a message, blocking while the channel is empty.
    ///
    /// # Errors
    /// [`RecvError`] once the channel is empty and every sender is gone.
    pub fn recv(&self) -> Result<T, RecvError> {
        self.chan.recv(None).map_err(|_| RecvError)
    }

    /// Receives a message if one is there now. Inside a task, an error is also a preemption
    /// point (`sync`'s module doc), so a task that spins on `try_recv` (or on `try_iter`,
    /// which ends with one) lets the senders run, even on its own worker.
    ///
    /// # Errors
    /// `Empty`, or `Disconnected` once empty with every sender gone.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let e = match self.chan.take() {
            Ok(Some(t)) => return Ok(t),
            Ok(None) => TryRecvError::Empty,
            Err(RecvError) => TryRecvError::Disconnected,
        };
        crate::task::try_point();
        Err(e)
    }

    /// As [`recv`](Self::recv), giving up after `timeout` (on the worker's timer in a task).
    ///
    /// # Errors
    /// `Timeout`, or `Disconnected`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.chan.recv(Some(deadline(timeout)))
    }

    /// As [`recv`](Self::recv), giving up at `deadline`: a `std::time::Instant`, as std's
    /// (with the `std` feature), or a [`lagom::time::Instant`](crate::time::Instant) (always;
    /// the only kind without `std`). Both are points on the monotonic clock.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use lagom::sync::mpsc::{RecvTimeoutError, channel};
    ///
    /// let (tx, rx) = channel::<u32>();
    /// let deadline = Instant::now() + Duration::from_millis(5);
    /// assert_eq!(rx.recv_deadline(deadline), Err(RecvTimeoutError::Timeout));
    /// assert!(Instant::now() >= deadline);
    /// tx.send(1).unwrap();
    /// let soon = lagom::time::Instant::now() + Duration::from_millis(5);
    /// assert_eq!(rx.recv_deadline(soon), Ok(1));
    /// ```
    ///
    /// # Errors
    /// `Timeout`, or `Disconnected`.
    pub fn recv_deadline(&self, deadline: impl Into<Instant>) -> Result<T, RecvTimeoutError> {
        self.chan.recv(Some(deadline.into().as_nanos()))
    }

    /// The messages, blocking for each, until every sender is gone.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { rx: self }
    }

    /// The messages there now, without blocking.
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { rx: self }
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.chan.add_sender();
        Sender {
            chan: Arc::clone(&self.chan),
        }
    }
}

impl<T> Clone for SyncSender<T> {
    fn clone(&self) -> Self {
        self.chan.add_sender();
        SyncSender {
            chan: Arc::clone(&self.chan),
        }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.chan.add_receiver();
        Receiver {
            chan: Arc::clone(&self.chan),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.chan.drop_sender();
    }
}

impl<T> Drop for SyncSender<T> {
    fn drop(&mut self) {
        self.chan.drop_sender();
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.chan.drop_receiver();
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sender { .. }")
    }
}

impl<T> fmt::Debug for SyncSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SyncSender { .. }")
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Receiver { .. }")
    }
}

/// The blocking iterator of [`Receiver::iter`].
#[derive(Debug)]
pub struct Iter<'a, T> {
    rx: &'a Receiver<T>,
}

/// The non-blocking iterator of [`Receiver::try_iter`].
#[derive(Debug)]
pub struct TryIter<'a, T> {
    rx: &'a Receiver<T>,
}

/// The owning blocking iterator of a [`Receiver`].
#[derive(Debug)]
pub struct IntoIter<T> {
    rx: Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.try_recv().ok()
    }
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;
    fn into_iter(self) -> IntoIter<T> {
        IntoIter { rx: self }
    }
}

/// `send` failed: every receiver is gone; the message is inside (as std's).
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

/// `recv` failed: the channel is empty and every sender is gone.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct RecvError;

/// Why `try_recv` returned nothing.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub enum TryRecvError {
    /// No message now; senders remain.
    Empty,
    /// Empty and every sender is gone.
    Disconnected,
}

/// Why `recv_timeout` returned nothing.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub enum RecvTimeoutError {
    /// No message came in time; senders remain.
    Timeout,
    /// Empty and every sender is gone.
    Disconnected,
}

/// Why `try_send` failed; the message is inside.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<T> {
    /// The channel is full (a rendezvous: no receiver waits).
    Full(T),
    /// Every receiver is gone.
    Disconnected(T),
}

/// Why `send_timeout` failed; the message is inside.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum SendTimeoutError<T> {
    /// No room came in time.
    Timeout(T),
    /// Every receiver is gone.
    Disconnected(T),
}

impl<T> SendTimeoutError<T> {
    fn into_inner(self) -> T {
        match self {
            SendTimeoutError::Timeout(t) | SendTimeoutError::Disconnected(t) => t,
        }
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError { .. }")
    }
}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

impl<T> fmt::Debug for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => f.write_str("Timeout(..)"),
            SendTimeoutError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a closed channel: every receiver was dropped")
    }
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on a closed channel: it is empty and every sender was dropped")
    }
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("receiving on an empty channel"),
            TryRecvError::Disconnected => RecvError.fmt(f),
        }
    }
}

impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvTimeoutError::Timeout => f.write_str("timed out waiting on a channel"),
            RecvTimeoutError::Disconnected => RecvError.fmt(f),
        }
    }
}

impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("sending on a full channel"),
            TrySendError::Disconnected(_) => SendError(()).fmt(f),
        }
    }
}

impl<T> fmt::Display for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => f.write_str("timed out waiting for room on a channel"),
            SendTimeoutError::Disconnected(_) => SendError(()).fmt(f),
        }
    }
}

impl<T> From<SendError<T>> for TrySendError<T> {
    fn from(e: SendError<T>) -> Self {
        TrySendError::Disconnected(e.0)
    }
}

impl<T> From<SendError<T>> for SendTimeoutError<T> {
    fn from(e: SendError<T>) -> Self {
        SendTimeoutError::Disconnected(e.0)
    }
}

impl From<RecvError> for TryRecvError {
    fn from(_: RecvError) -> Self {
        TryRecvError::Disconnected
    }
}

impl From<RecvError> for RecvTimeoutError {
    fn from(_: RecvError) -> Self {
        RecvTimeoutError::Disconnected
    }
}

#[cfg(feature = "std")]
impl<T> std::error::Error for SendError<T> {}
#[cfg(feature = "std")]
impl std::error::Error for RecvError {}
#[cfg(feature = "std")]
impl std::error::Error for TryRecvError {}
#[cfg(feature = "std")]
impl std::error::Error for RecvTimeoutError {}
#[cfg(feature = "std")]
impl<T> std::error::Error for TrySendError<T> {}
#[cfg(feature = "std")]
impl<T> std::error::Error for SendTimeoutError<T> {}
