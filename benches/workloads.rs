//! The runtime's scheduling-call workloads that several benchmarks and programs time: the
//! same code wherever a figure is compared (criterion benches `sched_call`, `stall_monitor`,
//! the `monitor_cost` program).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use lagom::Runtime;

/// `iters` calls of `cond_resched` with nothing due, in a task of `rt`: their time.
pub fn cond_resched(rt: &Runtime, iters: u64) -> Duration {
    rt.block_on(move || {
        let t = Instant::now();
        for _ in 0..iters {
            lagom::task::cond_resched();
        }
        t.elapsed()
    })
}

/// `iters` `yield_now`s of a task while a second task of `rt` yields back: their time.
pub fn yield_pair(rt: &Runtime, iters: u64) -> Duration {
    rt.block_on(move || {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let other = lagom::task::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                lagom::task::yield_now();
            }
        });
        // Let the other task start, so that every timed yield finds it runnable.
        lagom::task::yield_now();
        let t = Instant::now();
        for _ in 0..iters {
            lagom::task::yield_now();
        }
        let e = t.elapsed();
        stop.store(true, Ordering::Relaxed);
        other.join().expect("yielder");
        e
    })
}

/// `iters` park/unpark round trips between two tasks of `rt` (one worker: the same-worker
/// hand-off): their time.
pub fn park_unpark(rt: &Runtime, iters: u64) -> Duration {
    rt.block_on(move || {
        let turn = Arc::new(AtomicU64::new(0));
        let peer: Arc<OnceLock<lagom::task::Unparker>> = Arc::new(OnceLock::new());
        let me = lagom::task::current_unparker();
        let (t2, p2) = (Arc::clone(&turn), Arc::clone(&peer));
        let b = lagom::task::spawn(move || {
            p2.set(lagom::task::current_unparker()).expect("once");
            for i in 0..iters {
                while t2.load(Ordering::Acquire) != 2 * i + 1 {
                    lagom::task::park();
                }
                t2.store(2 * i + 2, Ordering::Release);
                me.unpark();
            }
        });
        let other = loop {
            if let Some(o) = peer.get() {
                break o.clone();
            }
            lagom::task::yield_now();
        };
        let t = Instant::now();
        for i in 0..iters {
            turn.store(2 * i + 1, Ordering::Release);
            other.unpark();
            while turn.load(Ordering::Acquire) != 2 * i + 2 {
                lagom::task::park();
            }
        }
        let e = t.elapsed();
        b.join().expect("B");
        e
    })
}
