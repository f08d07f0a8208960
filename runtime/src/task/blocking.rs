//! `spawn_blocking` (tokio's name): a closure that may block in the OS runs on the blocking
//! pool (`pool.rs`), and its [`BlockingHandle`] is joined as a task's `JoinHandle` is — the
//! joining task parks, so its worker runs other tasks meanwhile.
//!
//! The result travels through a join packet (`tcb/packet.rs`, the protocol and its loom model
//! `join`), with the pool thread as its one finisher: it stores the value and completes the
//! packet on its own thread, in program order, as a task's fiber and exit hook do on theirs,
//! then wakes the registered joiner (a task, through the wakeup path; a plain thread, through
//! its futex). Loom model `blocking` (`loom-tests/tests/blocking.rs`, mutant
//! `blocking_no_unpark`) races the job's `run_job` on a pool thread against a task's join
//! parking on a worker.

use alloc::sync::Arc;
use core::time::Duration;

use super::park::{current_waiter, park};
use super::pool::{MAX_BLOCKING_THREADS, pool};
use crate::tcb::{Complete, Outcome};
use crate::worker::Packet;
use crate::{Error, JoinError};

/// The handle of a closure given to [`spawn_blocking`]: [`join`](Self::join) waits for its
/// value.
pub struct BlockingHandle<T> {
    packet: Arc<Packet<T>>,
    id: u64,
}

impl<T> core::fmt::Debug for BlockingHandle<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BlockingHandle")
            .field("id", &self.id)
            .finish()
    }
}

/// Runs `f` on the process's blocking pool of plain OS threads and returns its handle; the
/// caller goes on at once. Use it for work that blocks in the OS — a `read`, a
/// `std::thread::sleep`, a library's lock — which would otherwise hold a whole worker (and
/// every task queued on it) in the system call. The pool grows a thread when a job finds none
/// idle, up to a bound (512 by default), and a thread idle for the keep-alive (10 s by
/// default) ends; [`configure_blocking_pool`] sets both, [`blocking_pool_stats`] shows them.
///
/// Works from tasks and from plain threads alike, and [`BlockingHandle::join`] from either:
/// a task parks (its worker runs other tasks meanwhile), a thread sleeps on a futex. The job
/// is not a task: it runs to its end even if the runtime shuts down (a joiner that is
/// cancelled meanwhile unwinds, and the value is dropped).
///
/// ```
/// use std::time::{Duration, Instant};
/// let rt = lagom::Runtime::builder().build()?;
/// let t0 = Instant::now();
/// rt.block_on(|| {
///     let sleepers: Vec<_> = (0..4)
///         .map(|_| lagom::task::spawn(|| {
///             lagom::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(20)))
///                 .join()
///                 .unwrap()
///         }))
///         .collect();
///     for s in sleepers {
///         s.join().unwrap();
///     }
/// });
/// assert!(t0.elapsed() < Duration::from_millis(80), "the sleeps overlapped");
/// # Ok::<(), lagom::Error>(())
/// ```
pub fn spawn_blocking<F, T>(f: F) -> BlockingHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let packet = Packet::<T>::new();
    let id = crate::tcb::next_id();
    let finisher = Arc::clone(&packet);
    pool().submit(alloc::boxed::Box::new(move || run_job(f, &finisher, id)));
    BlockingHandle { packet, id }
}

/// A pool thread runs the job `f` of the [`BlockingHandle`] with id `id` and delivers its
/// outcome through `finisher`, its one finisher: the value's store (or the panic), the
/// completion, and the wakeup of a joiner that registered. A loom model runs it on a thread
/// of its own against the joiner's park (`lagom::model`).
pub(crate) fn run_job<T: Send, F: FnOnce() -> T>(f: F, finisher: &Packet<T>, id: u64) {
    let panic = match catching(f) {
        Ok(v) => {
            // SAFETY: the packet's one value store, made by its one finisher (this job)
            // just before it completes the packet below, on this same thread.
            unsafe { finisher.set_value(v) };
            None
        }
        Err(payload) => Some(JoinError::panicked(
            alloc::format!("blocking-{id}"),
            id,
            payload,
        )),
    };
    if let Some(joiner) = finisher.complete(panic) {
        // Mutant `blocking_no_unpark` (loom model `blocking`): the registered joiner
        // is never woken.
        #[cfg(not(lagom_mutant = "blocking_no_unpark"))]
        crate::wake::unpark(&joiner, lagom_policy::WakeFlags::NONE);
        #[cfg(lagom_mutant = "blocking_no_unpark")]
        drop(joiner);
    }
}

/// Runs `f`, catching a panic (with `std`; without it a panic aborts the process, as a
/// task's does).
#[cfg(feature = "std")]
fn catching<T>(f: impl FnOnce() -> T) -> Result<T, alloc::boxed::Box<dyn core::any::Any + Send>> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
}

#[cfg(not(feature = "std"))]
fn catching<T>(f: impl FnOnce() -> T) -> Result<T, alloc::boxed::Box<dyn core::any::Any + Send>> {
    Ok(f())
}

impl<T> BlockingHandle<T> {
    /// An id unique in the process (task ids and these share one counter).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether the closure has ended. Inside a task, a `false` is also a preemption point
    /// (as [`JoinHandle::is_finished`](super::JoinHandle::is_finished)).
    pub fn is_finished(&self) -> bool {
        let done = self.packet.is_done();
        if !done {
            super::current::try_point();
        }
        done
    }

    /// Waits for the closure's value; from a task (it parks) or a plain thread (it sleeps).
    ///
    /// # Errors
    /// The closure's panic, as [`JoinError`] (named `blocking-<id>`). A joining task that a
    /// shutdown cancels unwinds from here.
    pub fn join(self) -> Result<T, JoinError> {
        self.join_with(current_waiter, park)
    }

    /// The loop of [`join`](Self::join), registering `waiter()` and parking with `park` (a
    /// loom model passes its own task and worker thread: `lagom::model`).
    #[inline(always)]
    pub(crate) fn join_with(
        self,
        waiter: impl Fn() -> crate::worker::Waiter,
        mut park: impl FnMut(),
    ) -> Result<T, JoinError> {
        loop {
            // SAFETY: this handle is the packet's one joiner (not Clone, and `join` consumes
            // it), and it stops asking once it got the outcome.
            match unsafe { self.packet.try_take(&waiter) } {
                Some(Outcome::Ended(r)) => return r,
                Some(Outcome::Cancelled) => {
                    unreachable!("lagom: a blocking job's packet is never cancelled")
                }
                None => park(),
            }
        }
    }

    /// A handle for a job that a loom model runs itself (`lagom::model`): its packet (the
    /// job's finisher, for [`run_job`]) and the handle.
    #[cfg(loom)]
    pub(crate) fn for_model() -> (Arc<Packet<T>>, BlockingHandle<T>) {
        let packet = Packet::<T>::new();
        let id = crate::tcb::next_id();
        (Arc::clone(&packet), BlockingHandle { packet, id })
    }
}

/// Sets the blocking pool's bound on threads (`max_threads`, 1 to
/// [`MAX_BLOCKING_THREADS`]; default [`DEFAULT_MAX_BLOCKING_THREADS`](super::DEFAULT_MAX_BLOCKING_THREADS))
/// and how long an idle pool thread waits for a job before it ends (`keep_alive`, any
/// duration; default [`DEFAULT_BLOCKING_KEEP_ALIVE`](super::DEFAULT_BLOCKING_KEEP_ALIVE)).
/// The pool is the process's, so this applies to every runtime. A lower bound stops new
/// threads from starting; threads beyond it end once idle for the keep-alive.
///
/// # Errors
/// [`Error::OutOfRange`] for a `max_threads` outside its range; nothing changes then.
pub fn configure_blocking_pool(max_threads: usize, keep_alive: Duration) -> Result<(), Error> {
    if !(1..=MAX_BLOCKING_THREADS).contains(&max_threads) {
        return Err(Error::OutOfRange {
            setting: "task::configure_blocking_pool (max_threads)",
            value: alloc::format!("{max_threads}"),
            valid: "1 to 10000 threads",
        });
    }
    pool().configure(max_threads, keep_alive);
    Ok(())
}

/// A snapshot of the blocking pool: its threads, idle ones, queued jobs and settings.
pub fn blocking_pool_stats() -> super::BlockingPoolStats {
    pool().stats()
}
