//! The `interpose` feature (`Builder::interpose_sleep`, `task/interpose.rs`): in a task of a
//! runtime that opted in, `std::thread::sleep` and the C library's sleep functions sleep the
//! task, not its worker; everywhere else they are the C library's; a shutdown never unwinds
//! through them; a task that unwinds sleeps its thread; and the hazard the opt-in's safety
//! section names — a std lock held across a sleep — is a deadlock the stall monitor reports.
//!
//! Run with `cargo test -p lagom --features interpose --test interpose` (CI's `interpose` step).
#![cfg(feature = "interpose")]

mod runtime_util;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lagom::runtime::{OnStall, StallReport, Syscall};
use lagom::task;

/// How long a test waits for what it assumes before it fails.
const GIVE_UP: Duration = Duration::from_secs(20);

/// A runtime on the first `n` allowed CPUs, opted in to the hooks or not.
fn runtime(n: usize, hooks: bool) -> lagom::Runtime {
    let b = lagom::Runtime::builder().worker_cpus(runtime_util::two_cpus().into_iter().take(n));
    let b = if hooks {
        // SAFETY: the tests' tasks hold no thread-local borrow or thread-keyed lock across
        // a sleep, and install no signal handler; the one that holds a std lock across a
        // sleep does so to show the deadlock, on a runtime of its own.
        unsafe { b.interpose_sleep() }
    } else {
        b
    };
    b.build().unwrap()
}

/// `n` tasks on two workers each enter, then sleep with `std::thread::sleep` until all have
/// entered: possible only if a sleeping task lets the others run (without the hooks the
/// first two block both workers for good). Returns whether all entered, and the time taken.
fn all_enter(rt: &lagom::Runtime, n: usize) -> (bool, Duration) {
    let entered = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    // One deadline for all: without the hooks the tasks run one after another, each until
    // it gives up, and a deadline per task would add up to minutes.
    let give_up = t0 + GIVE_UP;
    let all = rt.block_on(move || {
        let hs: Vec<_> = (0..n)
            .map(|_| {
                let entered = Arc::clone(&entered);
                task::spawn(move || {
                    entered.fetch_add(1, Ordering::AcqRel);
                    while entered.load(Ordering::Acquire) < n && Instant::now() < give_up {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    entered.load(Ordering::Acquire) == n
                })
            })
            .collect();
        hs.into_iter().all(|h| h.join().unwrap())
    });
    (all, t0.elapsed())
}

#[test]
fn std_sleeps_in_tasks_let_the_other_tasks_run() {
    let rt = runtime(2, true);
    let (all, took) = all_enter(&rt, 20);
    assert!(
        all,
        "a task's std::thread::sleep held its worker ({took:?})"
    );
    // 20 tasks × `std::thread::sleep(20 ms)` on two workers: about one sleep, not ten.
    let t0 = Instant::now();
    rt.block_on(|| {
        let hs: Vec<_> = (0..20)
            .map(|_| task::spawn(|| std::thread::sleep(Duration::from_millis(20))))
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
    });
    eprintln!(
        "20 × std::thread::sleep(20 ms) on 2 workers: {:?}",
        t0.elapsed()
    );
    assert!(t0.elapsed() >= Duration::from_millis(20));
    let switches: u64 = rt
        .stats()
        .workers
        .iter()
        .map(|w| w.switches_voluntary)
        .sum();
    assert!(switches >= 40, "{switches} voluntary switches");
}

/// On a runtime that did not opt in, and outside tasks, a sleep is the C library's: the
/// worker sleeps (a task queued behind the sleeper starts only after its sleep), and a plain
/// thread sleeps its time. With the opt-in, the task behind starts during the sleep.
#[test]
fn without_the_opt_in_and_outside_tasks_a_sleep_is_the_c_library_s() {
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(20));
    assert!(t0.elapsed() >= Duration::from_millis(20));
    for hooks in [false, true] {
        let rt = runtime(1, hooks);
        let (slept_until, behind_started) = rt.block_on(|| {
            let sleeper = task::spawn(|| {
                std::thread::sleep(Duration::from_millis(30));
                Instant::now()
            });
            let behind = task::spawn(Instant::now);
            (sleeper.join().unwrap(), behind.join().unwrap())
        });
        assert_eq!(
            behind_started < slept_until,
            hooks,
            "with the hooks {hooks}: the task behind started {} the sleep ended",
            if behind_started < slept_until {
                "before"
            } else {
                "after"
            }
        );
    }
}

/// `clock_nanosleep` through the C declaration (the hook, in this program).
fn clock_nanosleep(clock: libc::clockid_t, flags: i32, ts: &libc::timespec) -> i32 {
    // SAFETY: `ts` is readable; no remainder is asked for.
    unsafe { libc::clock_nanosleep(clock, flags, ts, std::ptr::null_mut()) }
}

/// `nanosleep` through the C declaration.
fn nanosleep(ts: &libc::timespec) -> i32 {
    // SAFETY: `ts` is readable; no remainder is asked for.
    unsafe { libc::nanosleep(ts, std::ptr::null_mut()) }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds.
fn monotonic_ns() -> u128 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is writable.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u128 * 1_000_000_000 + now.tv_nsec as u128
}

/// A `timespec` of `ns` nanoseconds.
fn ts(ns: u128) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// The other C functions, an absolute deadline, and the C functions' errors.
#[test]
fn the_c_sleep_functions_sleep_the_task() {
    let rt = runtime(1, true);
    rt.block_on(|| {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&ran);
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let behind = task::spawn(move || {
            while !s.load(Ordering::Acquire) {
                r.fetch_add(1, Ordering::AcqRel);
                task::sleep(Duration::from_micros(200));
            }
        });
        // Whether the task behind ran while `f` slept.
        let during = |f: &dyn Fn() -> i64| {
            let before = ran.load(Ordering::Acquire);
            assert_eq!(f(), 0);
            ran.load(Ordering::Acquire) > before
        };
        // SAFETY: usleep and sleep take any value.
        assert!(during(&|| i64::from(unsafe { libc::usleep(5_000) })));
        // SAFETY: as above.
        assert!(during(&|| i64::from(unsafe { libc::sleep(1) })));
        assert!(during(&|| i64::from(nanosleep(&ts(5_000_000)))));
        // TIMER_ABSTIME on CLOCK_MONOTONIC: until 5 ms from now.
        let until = monotonic_ns() + 5_000_000;
        let abs = libc::TIMER_ABSTIME;
        assert!(during(&|| i64::from(clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            abs,
            &ts(until)
        ))));
        assert!(monotonic_ns() >= until);
        // A time in the past (the epoch on CLOCK_REALTIME) returns at once.
        assert_eq!(clock_nanosleep(libc::CLOCK_REALTIME, abs, &ts(0)), 0);
        // Invalid times: EINVAL, as from the C library.
        let bad = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000_000,
        };
        assert_eq!(
            clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &bad),
            libc::EINVAL
        );
        assert_eq!(nanosleep(&bad), -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EINVAL)
        );
        stop.store(true, Ordering::Release);
        behind.join().unwrap();
    });
}

/// The hazard of the opt-in's `# Safety` point 2: two tasks on one worker take a
/// `std::sync::Mutex`, the holder sleeps with its guard (in a hook: the task parks), the
/// other blocks the worker's thread in the lock's futex, and the holder's timer, which only
/// that worker fires, never fires. Without the hooks this is slow but finishes; with them it
/// is a deadlock — which the stall monitor reports: blocked in futex, a sleeper's timer
/// overdue. The runtime is then shut down with its worker stuck (detached, as documented).
#[test]
fn a_std_mutex_held_across_a_hooked_sleep_deadlocks_and_is_reported() {
    let reports: Arc<Mutex<Vec<StallReport>>> = Arc::default();
    let r = Arc::clone(&reports);
    let b = lagom::Runtime::builder()
        .worker_cpus(runtime_util::two_cpus().into_iter().take(1))
        .stall_threshold(Duration::from_millis(5))
        .on_stall(OnStall::call(move |rep: &StallReport| {
            r.lock().unwrap().push(rep.clone())
        }));
    // SAFETY: this runtime's tasks break point 2 on purpose; they touch nothing
    // thread-local, and the deadlock only leaks the runtime (its worker is detached).
    let rt = unsafe { b.interpose_sleep() }.build().unwrap();
    let m = Arc::new(Mutex::new(0u32));
    let locked = Arc::new(AtomicBool::new(false));
    let (m2, l2) = (Arc::clone(&m), Arc::clone(&locked));
    let _holder = rt.spawn_with(task::Builder::new().name("holder"), move || {
        let mut g = m2.lock().unwrap();
        l2.store(true, Ordering::Release);
        std::thread::sleep(Duration::from_millis(2));
        *g += 1;
    });
    let _waiter = rt.spawn_with(task::Builder::new().name("waiter"), move || {
        while !locked.load(Ordering::Acquire) {
            task::yield_now();
        }
        *m.lock().unwrap() += 1;
    });
    let t0 = Instant::now();
    while reports.lock().unwrap().is_empty() && t0.elapsed() < GIVE_UP {
        std::thread::sleep(Duration::from_millis(1));
    }
    let r = reports
        .lock()
        .unwrap()
        .first()
        .cloned()
        .expect("the deadlock was reported");
    assert_eq!(r.task_name, "waiter");
    assert!(r.timer_overdue.is_some(), "{r:?}");
    if std::env::var("LAGOM_TEST_RUNNER").map_or(true, |v| v.trim().is_empty()) {
        assert_eq!(r.cause.call(), Some(Syscall::Futex), "{r:?}");
    }
    let stats = rt.shutdown_timeout(Duration::from_millis(100));
    assert_eq!(stats.shutdown.stuck_workers, 1);
}

/// A shutdown never unwinds through a hook: a task cancelled while it sleeps in one sleeps
/// its full time and is cancelled at its next call into lagom; one whose sleep outlasts the
/// shutdown is abandoned, and the process goes on.
#[test]
fn a_shutdown_cancels_a_hooked_sleeper_after_its_sleep() {
    let rt = runtime(1, true);
    let entered = Arc::new(AtomicBool::new(false));
    let slept = Arc::new(AtomicBool::new(false));
    let (e, s) = (Arc::clone(&entered), Arc::clone(&slept));
    let h = rt.spawn(move || {
        e.store(true, Ordering::Release);
        std::thread::sleep(Duration::from_millis(50));
        s.store(true, Ordering::Release);
        task::yield_now();
        unreachable!("the shutdown cancels the task at its yield");
    });
    while !entered.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    let stats = rt.shutdown_timeout(Duration::from_secs(5));
    assert!(slept.load(Ordering::Acquire), "the sleep was cut short");
    assert!(h.join().unwrap_err().is_cancelled());
    assert_eq!(stats.shutdown.abandoned, 0);

    let rt = runtime(1, true);
    let entered = Arc::new(AtomicBool::new(false));
    let e = Arc::clone(&entered);
    let _long = rt.spawn(move || {
        e.store(true, Ordering::Release);
        std::thread::sleep(Duration::from_secs(60));
    });
    while !entered.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    let t0 = Instant::now();
    let stats = rt.shutdown_timeout(Duration::from_millis(200));
    assert!(t0.elapsed() < Duration::from_secs(30));
    assert_eq!(
        (stats.shutdown.abandoned, stats.shutdown.stuck_workers),
        (1, 0)
    );
}

/// A task that unwinds sleeps through the C library: no other task runs on its thread while
/// its panic count is raised.
#[test]
fn a_task_that_unwinds_sleeps_its_thread() {
    type Log = Arc<Mutex<Vec<&'static str>>>;
    struct SleepOnDrop(Log);
    impl Drop for SleepOnDrop {
        fn drop(&mut self) {
            self.0.lock().unwrap().push("sleep begins");
            std::thread::sleep(Duration::from_millis(30));
            self.0.lock().unwrap().push("sleep ends");
        }
    }
    let rt = runtime(1, true);
    let log: Log = Arc::default();
    let l = Arc::clone(&log);
    rt.block_on(move || {
        let l2 = Arc::clone(&l);
        let panicker = task::spawn(move || {
            let _g = SleepOnDrop(l2);
            std::panic::panic_any("a panic whose destructor sleeps (expected by the test)");
        });
        let other = task::spawn(move || l.lock().unwrap().push("other runs"));
        assert!(panicker.join().unwrap_err().is_panic());
        other.join().unwrap();
    });
    let log = log.lock().unwrap().clone();
    let begins = log.iter().position(|e| *e == "sleep begins").unwrap();
    let other = log.iter().position(|e| *e == "other runs").unwrap();
    assert!(other < begins || other > begins + 1, "{log:?}");
}
