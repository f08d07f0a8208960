//! The one interface the workload is written against: spawn a thread, block on a word, wake
//! it, sleep, relax between lock attempts, offer a preemption point, read the clock.
//!
//! Two implementations: [`crate::lagom_rt::Lagom`] (tasks on pinned lagom workers, parking)
//! and [`crate::os::Os`] (std threads blocking in futex waits). The workload code in
//! `workload.rs` and `rps.rs` is the same for both.

use std::sync::atomic::AtomicU32;

/// A scheduler the workload runs on.
pub trait Sched: Send + Sync + 'static {
    /// Wakes one thread blocked in [`Sched::block`]; each thread registers its own with
    /// [`Sched::current_waker`] before it first blocks.
    type Waker: Send + Sync + 'static;
    /// The handle to join a spawned thread.
    type Join: Send + 'static;

    /// Starts `f` as a thread (a task for lagom) named `name`, restricted to `cpus` (an
    /// empty slice: unrestricted). Called from inside the workload (a message thread
    /// starting its workers).
    fn spawn(
        name: &'static str,
        cpus: &[usize],
        f: impl FnOnce() + Send + 'static,
    ) -> Result<Self::Join, String>;

    /// Waits for a spawned thread to end.
    fn join(j: Self::Join) -> Result<(), String>;

    /// The calling thread's waker.
    fn current_waker() -> Self::Waker;

    /// Blocks while `word` holds `expected`; may return spuriously (callers re-check).
    fn block(word: &AtomicU32, expected: u32);

    /// Wakes the thread blocked on `word`, whose waker is `waker`.
    fn wake(word: &AtomicU32, waker: &Self::Waker);

    /// Sleeps for `us` microseconds (schbench's `usleep`).
    fn usleep(us: u64);

    /// Between two attempts at a lock another thread holds (a `pause`, or letting the holder
    /// run).
    fn relax();

    /// A preemption point inside long computations.
    fn tick();

    /// The calling thread's kernel thread id, when it is a thread of its own (for its
    /// `/proc` schedstat); `None` for lagom tasks, which share their worker's thread.
    fn os_tid() -> Option<i32>;

    /// The calling thread's CPU (`sched_getcpu`).
    fn cpu() -> usize {
        // SAFETY: sched_getcpu has no preconditions.
        let c = unsafe { libc::sched_getcpu() };
        usize::try_from(c).unwrap_or(0)
    }

    /// The clock every latency is measured with, in µs.
    fn now_us() -> u64 {
        now_us()
    }
}

/// CLOCK_MONOTONIC in µs (schbench reads gettimeofday; a monotonic clock cannot jump).
pub fn now_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is writable and CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}
