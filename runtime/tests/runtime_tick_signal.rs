//! The tick timer's signal (`SIGURG`) beside a program's own handler for it: lagom installs
//! its handler over the program's and passes on every `SIGURG` that is not one of its
//! timers' (a test binary of its own: signal dispositions are process-wide).
mod runtime_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::task::Builder;

/// The `SIGURG`s the program's own handler received.
static THEIRS: AtomicU64 = AtomicU64::new(0);

extern "C" fn their_handler(_sig: libc::c_int) {
    THEIRS.fetch_add(1, Ordering::Relaxed);
}

/// The program's handler, installed before the runtime, still receives the `SIGURG`s sent
/// to the process (here with `raise`), while the workers' tick timers, whose signals lagom
/// keeps, make two hogs on one worker take turns; none of the timers' signals reach it.
#[test]
fn a_programs_own_sigurg_handler_is_passed_other_signals() {
    // SAFETY: a plain handler installed for SIGURG; the action is fully initialised.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = their_handler as *const () as usize;
        libc::sigemptyset(&mut act.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGURG, &act, std::ptr::null_mut()), 0);
    }
    let cpu = runtime_util::two_cpus()[0];
    let rt = Runtime::builder().worker_cpus([cpu]).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let counts: Vec<Arc<AtomicU64>> = (0..2).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let hogs: Vec<_> = counts
        .iter()
        .map(|c| {
            let (c, stop) = (Arc::clone(c), Arc::clone(&stop));
            rt.spawn_with(Builder::new().cpus([cpu]), move || {
                while !stop.load(Ordering::Acquire) {
                    c.fetch_add(1, Ordering::Relaxed);
                    lagom::task::cond_resched();
                }
            })
            .unwrap()
        })
        .collect();
    let t0 = Instant::now();
    while rt.stats().workers[0].tick_timer_fires < 20
        || counts.iter().any(|c| c.load(Ordering::Relaxed) == 0)
    {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no turns by the tick timer in 20 s: {:?}",
            rt.stats().workers[0]
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(
        THEIRS.load(Ordering::Relaxed),
        0,
        "a tick reached the program's handler"
    );
    for k in 1..=3 {
        // SAFETY: raise has no preconditions.
        assert_eq!(unsafe { libc::raise(libc::SIGURG) }, 0);
        assert_eq!(
            THEIRS.load(Ordering::Relaxed),
            k,
            "a SIGURG was not passed on"
        );
    }
    stop.store(true, Ordering::Release);
    for h in hogs {
        h.join().unwrap();
    }
    rt.shutdown();
}
