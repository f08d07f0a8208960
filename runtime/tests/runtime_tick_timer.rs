//! The workers' tick timer (`Builder::tick_timer`): the one-shot timer whose signal makes
//! `cond_resched` take its tick, so that a task that never blocks still gives up its worker
//! at the end of its slice; and what its signal does to a system call a task blocks in.
//! Without the timer the same happens by reading the clock at every call.
mod runtime_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::task::Builder;

/// The first CPU this process may run on, for a one-worker runtime.
fn one_cpu() -> usize {
    runtime_util::two_cpus()[0]
}

/// Spawns a task pinned to `cpu` that counts its loop's rounds into `rounds`, calling
/// `cond_resched` in each, until `stop`.
fn counting_hog(
    rt: &Runtime,
    cpu: usize,
    rounds: &Arc<AtomicU64>,
    stop: &Arc<AtomicBool>,
) -> lagom::task::JoinHandle<()> {
    let (rounds, stop) = (Arc::clone(rounds), Arc::clone(stop));
    rt.spawn_with(Builder::new().cpus([cpu]), move || {
        while !stop.load(Ordering::Acquire) {
            rounds.fetch_add(1, Ordering::Relaxed);
            lagom::task::cond_resched();
        }
    })
    .unwrap()
}

/// Two hogs on one worker, neither of which ever blocks: each runs only while the other's
/// `cond_resched` gives the worker up at the end of its slice, which takes the tick timer's
/// signal (or, without the timer, a clock read at each call). Both make progress, many
/// times over, in either mode; the counters say which mechanism did it.
#[test]
fn hogs_on_one_worker_take_turns_with_and_without_the_timer() {
    for timer in [true, false] {
        let cpu = one_cpu();
        let rt = Runtime::builder()
            .worker_cpus([cpu])
            .tick_timer(timer)
            .build()
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (a, b) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let ha = counting_hog(&rt, cpu, &a, &stop);
        let hb = counting_hog(&rt, cpu, &b, &stop);
        // Each hog's count stops while the other runs: wait until each has moved on after
        // the other did, a few times.
        let t0 = Instant::now();
        let mut turns = 0;
        let mut last = (0, 0);
        while turns < 10 {
            let now = (a.load(Ordering::Relaxed), b.load(Ordering::Relaxed));
            if now.0 > last.0 && now.1 > last.1 {
                turns += 1;
                last = now;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "timer {timer}: the hogs took {turns} turns in 20 s (counts {now:?})"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::Release);
        ha.join().unwrap();
        hb.join().unwrap();
        let w = rt.stats().workers[0];
        if timer {
            assert!(
                w.tick_timer_arms > 0 && w.tick_timer_fires > 0,
                "with the timer: {} arms, {} fires",
                w.tick_timer_arms,
                w.tick_timer_fires
            );
        } else {
            assert_eq!(
                (w.tick_timer_arms, w.tick_timer_fires),
                (0, 0),
                "tick_timer(false) armed a timer"
            );
        }
        let st = rt.shutdown();
        assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{st}");
    }
}

/// A task that blocks its worker in `read(2)` on a pipe while another task waits for the
/// worker: the tick timer is armed for the end of the reader's slice and fires while it
/// waits in the kernel. The signal's handler is installed with `SA_RESTART`, so the read
/// restarts and returns the byte written 50 ms later instead of failing with `EINTR`; the
/// tick the signal asked for is taken at the reader's next `cond_resched`.
#[test]
fn a_read_interrupted_by_the_tick_signal_restarts() {
    let cpu = one_cpu();
    let rt = Runtime::builder().worker_cpus([cpu]).build().unwrap();
    let mut fds = [0; 2];
    // SAFETY: `fds` is a writable array of two ints.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let [rfd, wfd] = fds;
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let hog = counting_hog(&rt, cpu, &rounds, &stop);
    while rounds.load(Ordering::Relaxed) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let reading = Arc::new(AtomicBool::new(false));
    let r = Arc::clone(&reading);
    let reader = rt
        .spawn_with(Builder::new().cpus([cpu]), move || {
            r.store(true, Ordering::Release);
            let mut byte = 0u8;
            // SAFETY: `rfd` is the pipe's open read end; `byte` is one writable byte.
            let n = unsafe { libc::read(rfd, (&raw mut byte).cast(), 1) };
            let err = std::io::Error::last_os_error();
            lagom::task::cond_resched();
            (n, byte, err)
        })
        .unwrap();
    while !reading.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(50));
    // SAFETY: `wfd` is the pipe's open write end; one readable byte.
    assert_eq!(unsafe { libc::write(wfd, [7u8].as_ptr().cast(), 1) }, 1);
    let (n, byte, err) = reader.join().unwrap();
    assert_eq!((n, byte), (1, 7), "the read failed: {err}");
    stop.store(true, Ordering::Release);
    hog.join().unwrap();
    let w = rt.stats().workers[0];
    assert!(
        w.tick_timer_fires > 0,
        "the tick timer never fired: {} arms",
        w.tick_timer_arms
    );
    // SAFETY: both ends are open and closed once.
    unsafe {
        libc::close(rfd);
        libc::close(wfd);
    }
    rt.shutdown();
}
