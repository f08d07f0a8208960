//! `spawn_blocking` (tokio's name): a closure that may block in the OS runs on the blocking
//! pool (`pool.rs`), and its [`BlockingHandle`] is joined as a task's `JoinHandle` is — the
//! joining task parks, so its worker runs other tasks meanwhile. [`blocking`] is the form
//! whose closure may borrow from the calling task, which waits for it (below, "Blocking that
//! borrows").
//!
//! The result travels through a join packet (`tcb/packet.rs`, the protocol and its loom model
//! `join`), with the pool thread as its one finisher: it stores the value and completes the
//! packet on its own thread, in program order, as a task's fiber and exit hook do on theirs,
//! then wakes the registered joiner (a task, through the wakeup path; a plain thread, through
//! its futex). Loom model `blocking` (`loom-tests/tests/blocking.rs`, mutant
//! `blocking_no_unpark`) races the job's `run_job` on a pool thread against a task's join
//! parking on a worker.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::time::Duration;

use super::park::{current_waiter, park, park_uncancelled};
use super::pool::{MAX_BLOCKING_THREADS, pool};
use crate::locking::atomic::Ordering;
use crate::locking::cell::UnsafeCell;
use crate::tcb::{Complete, Outcome};
use crate::worker::{Packet, Shared};
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

/// Runs `f` on the process's blocking pool and returns its value: the calling task blocks —
/// not its worker, which runs other tasks meanwhile — until `f` has returned on a pool
/// thread. Unlike [`spawn_blocking`]'s, `f` may borrow from the caller (it must be `Send`,
/// not `'static`), as a closure given to `std::thread::scope` may: the caller does not go on,
/// return or unwind before `f` is done with what it borrows.
///
/// Use it for the blocking system call in the middle of a task's work — a `read` into a
/// buffer on the task's stack, an `fsync`, a lookup in a library that blocks — that would
/// otherwise hold the whole worker (and every task queued on it) in the OS.
///
/// ```
/// use std::io::Read;
/// let rt = lagom::Runtime::builder().build()?;
/// let n = rt.block_on(|| {
///     let mut buf = [0u8; 64];
///     let mut file = std::fs::File::open("Cargo.toml").unwrap();
///     // `buf` and `file` live on this task's stack; the read runs on a pool thread.
///     let n = lagom::task::blocking(|| file.read(&mut buf)).unwrap();
///     assert!(buf[..n].starts_with(b"["));
///     n
/// });
/// assert!(n > 0);
/// # Ok::<(), lagom::Error>(())
/// ```
///
/// **The name.** tokio's `block_in_place` runs its closure on the calling thread and moves
/// the worker's other tasks to another thread; lagom cannot move them (a started task resumes
/// only where it last ran), so the closure runs on a pool thread and the task waits for it,
/// as a `spawn_blocking` followed by its `join` does — except for the borrow. So it is not
/// named after the thread it runs on: its thread-locals are a pool thread's, not the worker's
/// (the rustdoc search finds it under `block_in_place` and `spawn_blocking_scoped` too).
///
/// **Panics.** A panic in `f` is caught on the pool thread and resumed in the caller (its
/// message is printed by the panic hook on the pool thread, as any thread's).
///
/// **Shutdown.** The wait is no cancellation point: a shutdown that would cancel the task
/// lets `f` run to its end first (lagom cannot interrupt it), and the task then returns the
/// value and meets the cancellation at its next call into lagom. If `f` is still running
/// when the shutdown gives up (its timeout), the task is abandoned without unwinding, as a
/// task that caught its cancellation is, and no task's stack is unmapped, since `f` may still
/// use one: they are leaked, which the shutdown reports (on stderr and in
/// [`ShutdownStats::blocking_borrows`](crate::runtime::ShutdownStats::blocking_borrows)).
/// The shutdown itself does not wait for `f`.
///
/// Outside a task (a plain thread, a pool thread) `f` simply runs on the calling thread,
/// which blocks in it either way.
#[doc(alias = "block_in_place")]
#[doc(alias = "spawn_blocking_scoped")]
pub fn blocking<F, T>(f: F) -> T
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    let Some(shared) = crate::worker::with_current(|wt, _| Arc::clone(&wt.shared)) else {
        return f();
    };
    let job = Lent {
        f: UnsafeCell::new(Some(f)),
        result: UnsafeCell::new(None),
    };
    let packet = Packet::<()>::new();
    let lent = LentRef {
        job: (&raw const job).cast(),
        run: run_lent::<F, T>,
        packet: Arc::clone(&packet),
        shared,
    };
    // Counted before the pool can run it, so that a shutdown that finds the count at zero
    // knows no closure of its tasks runs (`worker/mod.rs`, `Shared::blocking_borrows`).
    lent.shared.blocking_borrows.fetch_add(1, Ordering::AcqRel);
    // SAFETY: `job` lives in this frame, which waits below until the packet is complete —
    // without a cancellation point, and again in `LentWait`'s drop if anything unwinds out of
    // the wait — and the pool thread touches `job` only before it completes the packet.
    // Past a shutdown's give-up point this task may be abandoned mid-wait, never to resume:
    // its stack, and every other task's, then stays mapped while the count is non-zero
    // (`Runtime::free_leftovers`), so `job` outlives the closure in every path.
    pool().submit(Box::new(move || unsafe { lent.run() }));
    let wait = LentWait { packet: &packet };
    wait.wait();
    core::mem::forget(wait);
    // SAFETY: the packet is complete: the pool thread wrote the result before it completed
    // the packet (Release), which the wait read (Acquire), and it touches `job` no more.
    let r = job.result.with_mut(|c| unsafe { (*c).take() });
    match r.expect("lagom: a blocking closure completed without a result") {
        Ok(v) => v,
        #[cfg(feature = "std")]
        Err(payload) => std::panic::resume_unwind(payload),
        #[cfg(not(feature = "std"))]
        Err(_) => unreachable!("lagom: a panic caught without std"),
    }
}

/// The closure of a [`blocking`] call and its result, in the calling task's frame.
struct Lent<F, T> {
    f: UnsafeCell<Option<F>>,
    result: UnsafeCell<Option<Result<T, Box<dyn core::any::Any + Send>>>>,
}

/// What the pool thread gets of a [`blocking`] call: a pointer to its [`Lent`] and the
/// function that runs it, the packet that tells the caller it is done, and the runtime whose
/// count of running borrowing closures it holds.
struct LentRef {
    job: *const (),
    run: unsafe fn(*const ()),
    packet: Arc<Packet<()>>,
    shared: Arc<Shared>,
}

// SAFETY: made only from a `Lent` of a `Send` closure with a `Send` value, which one pool
// thread runs while the task that owns it waits (`blocking`).
unsafe impl Send for LentRef {}

impl LentRef {
    /// Runs the closure on the calling pool thread, completes the packet and wakes the
    /// caller, then uncounts the closure.
    ///
    /// # Safety
    /// `job` points to a live `Lent` of the types `run` was made for, which nothing else
    /// touches until the packet is complete.
    unsafe fn run(self) {
        // Mutant `blocking_uncounted_early` (runtime/tests/mutants.sh): uncounted before it
        // runs, the closure may outlive a shutdown that unmaps the stack it borrows from.
        #[cfg(lagom_mutant = "blocking_uncounted_early")]
        self.shared.blocking_borrows.fetch_sub(1, Ordering::Release);
        // SAFETY: per contract.
        unsafe { (self.run)(self.job) };
        // The last touch of the caller's frame is above: from here on it may be gone.
        // SAFETY: `complete`'s value comes from `set_value`, on this thread, just before.
        unsafe { self.packet.set_value(()) };
        if let Some(joiner) = self.packet.complete(None) {
            crate::wake::unpark(&joiner, lagom_policy::WakeFlags::NONE);
        }
        drop(self.packet);
        #[cfg(not(lagom_mutant = "blocking_uncounted_early"))]
        self.shared.blocking_borrows.fetch_sub(1, Ordering::Release);
    }
}

/// Takes the closure out of the [`Lent`] at `p`, runs it catching a panic, and stores the
/// outcome there.
///
/// # Safety
/// As for [`LentRef::run`], with `F` and `T` the `Lent`'s.
unsafe fn run_lent<F: FnOnce() -> T, T>(p: *const ()) {
    // SAFETY: per contract.
    let job = unsafe { &*p.cast::<Lent<F, T>>() };
    // SAFETY: per contract: the caller waits and touches neither cell until the packet is
    // complete.
    let f = job.f.with_mut(|c| unsafe { (*c).take() });
    let r = catching(f.expect("lagom: a blocking closure runs once"));
    // SAFETY: as above.
    job.result.with_mut(|c| unsafe { *c = Some(r) });
}

/// The caller's wait for its [`blocking`] closure: without a cancellation point, and again in
/// its drop if the wait unwinds (a bug of lagom's: nothing in it raises), so that the
/// caller's frame never goes before the closure is done with it.
struct LentWait<'a> {
    packet: &'a Packet<()>,
}

impl LentWait<'_> {
    /// Parks until the packet is complete.
    fn wait(&self) {
        loop {
            // SAFETY: this wait is the packet's one joiner, and stops asking once complete.
            match unsafe { self.packet.try_take(current_waiter) } {
                Some(_) => return,
                // Mutant `blocking_wait_cancellable` (runtime/tests/mutants.sh): a shutdown
                // unwinds the caller out of its wait (this guard's drop then waits again), so
                // the closure's value is lost and the caller unwinds instead of returning.
                #[cfg(lagom_mutant = "blocking_wait_cancellable")]
                None => park(),
                #[cfg(not(lagom_mutant = "blocking_wait_cancellable"))]
                None => park_uncancelled(),
            }
        }
    }
}

impl Drop for LentWait<'_> {
    fn drop(&mut self) {
        if !self.packet.is_done() {
            self.wait();
        }
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
