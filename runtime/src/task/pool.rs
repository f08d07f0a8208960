//! The blocking pool behind [`spawn_blocking`](super::spawn_blocking): plain OS threads, shared
//! by the whole process, that run closures which may block in the OS (a `read`, a
//! `std::thread::sleep`, a lock held by a foreign library) so that no worker sits in a system
//! call on a task's behalf.
//!
//! Invariant: *a submitted job is run exactly once, by one pool thread, and is never left
//! queued while the pool could run it: a thread is idle only while the queue is empty, and a
//! submission that finds no idle thread left to wake starts one unless the pool is at its
//! bound.*
//!
//! ## The protocol
//!
//! One lock (`locking/lock.rs`) guards the queue of jobs and four counts — threads, idle
//! threads, wakeups sent to idle threads and not yet taken, and the bound — and a futex word
//! `seq` sits beside it.
//!
//! * **submit**: under the lock, push the job; if more threads are idle than have been sent
//!   a wakeup, count one more wakeup, bump `seq` and, after unlocking, `futex_wake` one
//!   sleeper; else, if below the bound, count a new thread and, after unlocking, start it (it
//!   takes the job from the queue like any other). At the bound, the job waits for the next
//!   thread to finish its own. (Counting the wakeups matters: a burst of submissions comes
//!   faster than woken threads get the lock to uncount themselves, and each would otherwise
//!   see the same idle thread and wake nobody new, so the burst would queue behind it.)
//! * **pool thread**: under the lock, pop a job and run it unlocked; with the queue empty, count
//!   itself idle, read `seq`, unlock and `futex_wait` while `seq` holds that value, for at most
//!   the keep-alive; then, under the lock, uncount itself idle (and one wakeup, if any is
//!   outstanding: if it woke by its timeout and took another's, that one looks too and finds
//!   the queue empty, or a submission counts a sleeper too few and starts a spare thread)
//!   and look again. A thread that
//!   finds the queue empty after a whole keep-alive of waiting retires (uncounts itself and
//!   ends). Reading `seq` under the lock that the submitter bumps it under means a submission
//!   after the read changes the word, so `futex_wait` returns at once: no wakeup is lost. A
//!   wakeup may find the job taken by a thread that finished its own first; it waits again.
//!
//! A thread that cannot be started (the OS refuses) is uncounted again; if the pool then has no
//! thread at all, the submitter runs the job itself, so that it is never lost.
//!
//! The pool is made on first use and lives as long as the process: its threads are detached,
//! and a runtime's shutdown does not wait for them (a job cannot be interrupted; its result is
//! dropped if its joiner is gone).

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use core::time::Duration;

use crate::locking::futex::Futex;
use crate::locking::lock::Lock;

/// A job: the closure and the delivery of its outcome.
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

/// The default bound on the pool's threads (tokio's default for its blocking pool).
pub const DEFAULT_MAX_BLOCKING_THREADS: usize = 512;

/// The largest bound [`configure_blocking_pool`](super::configure_blocking_pool) accepts.
pub const MAX_BLOCKING_THREADS: usize = 10_000;

/// How long an idle pool thread waits for a job before it retires, by default (tokio's
/// default keep-alive).
pub const DEFAULT_BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(10);

/// What the pool holds under its lock.
struct State {
    jobs: VecDeque<Job>,
    threads: usize,
    idle: usize,
    /// Wakeups sent to idle threads that no thread has taken yet.
    notified: usize,
    max_threads: usize,
    keep_alive: Duration,
    /// Threads started since the pool was made (for the statistics).
    started: u64,
}

/// The process's blocking pool (module doc).
pub(crate) struct Pool {
    state: Lock<State>,
    seq: Futex,
}

/// A snapshot of the blocking pool ([`blocking_pool_stats`](super::blocking_pool_stats)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockingPoolStats {
    /// Pool threads alive (running a job or idle).
    pub threads: usize,
    /// Of those, threads waiting for a job.
    pub idle: usize,
    /// Jobs waiting for a thread (the pool is at its bound).
    pub queued: usize,
    /// Threads started since the process began (each start is an OS thread creation).
    pub started: u64,
    /// The bound on `threads`.
    pub max_threads: usize,
    /// How long an idle thread waits for a job before it retires.
    pub keep_alive: Duration,
}

/// The pool, made on first use (a leaked allocation behind a process-wide pointer: a plain
/// `core` atomic, like the task-id counter, since it is written once and no protocol hangs
/// on it but its publication, which the compare-exchange's AcqRel makes).
pub(crate) fn pool() -> &'static Pool {
    use core::sync::atomic::{AtomicPtr, Ordering};
    static POOL: AtomicPtr<Pool> = AtomicPtr::new(core::ptr::null_mut());
    let p = POOL.load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: published below from a leaked box, never freed.
        return unsafe { &*p };
    }
    let new = Box::into_raw(Box::new(Pool {
        state: Lock::new(State {
            jobs: VecDeque::new(),
            threads: 0,
            idle: 0,
            notified: 0,
            max_threads: DEFAULT_MAX_BLOCKING_THREADS,
            keep_alive: DEFAULT_BLOCKING_KEEP_ALIVE,
            started: 0,
        }),
        seq: Futex::new(0),
    }));
    match POOL.compare_exchange(
        core::ptr::null_mut(),
        new,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        // SAFETY: just leaked, never freed.
        Ok(_) => unsafe { &*new },
        Err(other) => {
            // SAFETY: `new` lost the race and was never shared: ours to free.
            drop(unsafe { Box::from_raw(new) });
            // SAFETY: the winner's leaked box, never freed.
            unsafe { &*other }
        }
    }
}

impl Pool {
    /// Submits `job` (module doc).
    pub(crate) fn submit(&'static self, job: Job) {
        enum Then {
            Wake,
            Start,
            Nothing,
        }
        let then = {
            let mut st = self.state.lock();
            st.jobs.push_back(job);
            if st.idle > st.notified {
                st.notified += 1;
                let w = self.seq.word();
                w.store(
                    w.load(crate::locking::atomic::Ordering::Relaxed)
                        .wrapping_add(1),
                    crate::locking::atomic::Ordering::Relaxed,
                );
                Then::Wake
            } else if st.threads < st.max_threads {
                st.threads += 1;
                st.started += 1;
                Then::Start
            } else {
                Then::Nothing
            }
        };
        match then {
            Then::Wake => self.seq.wake_one(),
            Then::Start => self.start_thread(),
            Then::Nothing => {}
        }
    }

    /// Starts a pool thread counted already; if the OS refuses, uncounts it and, with no
    /// thread left, runs the queue on the calling thread (module doc).
    fn start_thread(&'static self) {
        let name = alloc::string::String::from("lagom-blocking");
        match crate::sys::thread::spawn(name, move || self.thread_main()) {
            Ok(t) => t.detach(),
            Err(_) => {
                let orphaned = {
                    let mut st = self.state.lock();
                    st.threads -= 1;
                    st.threads == 0
                };
                if orphaned {
                    while let Some(job) = self.pop() {
                        job();
                    }
                }
            }
        }
    }

    fn pop(&self) -> Option<Job> {
        self.state.lock().jobs.pop_front()
    }

    /// A pool thread's life (module doc).
    fn thread_main(&'static self) {
        let mut waited_since: Option<u64> = None;
        loop {
            let (seq, keep_alive) = {
                let mut st = self.state.lock();
                if let Some(job) = st.jobs.pop_front() {
                    drop(st);
                    waited_since = None;
                    job();
                    continue;
                }
                let now = crate::sys::time::monotonic_ns();
                let keep = u64::try_from(st.keep_alive.as_nanos()).unwrap_or(u64::MAX);
                let since = *waited_since.get_or_insert(now);
                if now.saturating_sub(since) >= keep {
                    st.threads -= 1;
                    return;
                }
                st.idle += 1;
                let seq = self
                    .seq
                    .word()
                    .load(crate::locking::atomic::Ordering::Relaxed);
                (seq, keep - now.saturating_sub(since))
            };
            self.seq.wait(seq, Some(keep_alive));
            let mut st = self.state.lock();
            st.idle -= 1;
            st.notified = st.notified.saturating_sub(1);
        }
    }

    /// Sets the bound and the keep-alive (checked by the caller); idle threads look again.
    pub(crate) fn configure(&self, max_threads: usize, keep_alive: Duration) {
        {
            let mut st = self.state.lock();
            st.max_threads = max_threads;
            st.keep_alive = keep_alive;
            let w = self.seq.word();
            w.store(
                w.load(crate::locking::atomic::Ordering::Relaxed)
                    .wrapping_add(1),
                crate::locking::atomic::Ordering::Relaxed,
            );
        }
        self.seq.wake_all();
    }

    /// A snapshot.
    pub(crate) fn stats(&self) -> BlockingPoolStats {
        let st = self.state.lock();
        BlockingPoolStats {
            threads: st.threads,
            idle: st.idle,
            queued: st.jobs.len(),
            started: st.started,
            max_threads: st.max_threads,
            keep_alive: st.keep_alive,
        }
    }
}
