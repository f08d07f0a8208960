//! The remote-wake ping-pongs that `benches/wake.rs` and `examples/remote_wake.rs` time:
//! lagom's (two tasks pinned to two workers, passing a turn through park / `Unparker::unpark`)
//! and tokio's like-for-like (two current-thread runtimes on pinned OS threads, passing it
//! through `Notify`), each optionally beside a CPU-bound task on both CPUs.
//!
//! Every run first plays `warmup` round trips untimed: the first wakes after a spawn are not
//! the steady state (tokio's second runtime may still be starting; a lagom task's first wake
//! against a busy task that ran alone waits for that task's protected slice, RUN_TO_PARITY).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::task::{Builder, Unparker};

/// One player of a lagom ping-pong: waits for its turns (`2i + me`) by parking, passes the
/// turn and unparks the partner; after `warmup` round trips, player 0 times the next `iters`
/// and returns that time.
fn player(
    me: u64,
    warmup: u64,
    iters: u64,
    turn: Arc<AtomicU64>,
    peers: Arc<[OnceLock<Unparker>; 2]>,
) -> impl FnOnce() -> Duration + Send + 'static {
    move || {
        peers[me as usize]
            .set(lagom::task::current_unparker())
            .expect("set once");
        let other = loop {
            if let Some(o) = peers[1 - me as usize].get() {
                break o.clone();
            }
            lagom::task::yield_now();
        };
        let mut t = Instant::now();
        for i in 0..warmup + iters {
            if i == warmup {
                t = Instant::now();
            }
            let mine = 2 * i + me;
            while turn.load(Ordering::Acquire) != mine {
                lagom::task::park();
            }
            turn.store(mine + 1, Ordering::Release);
            other.unpark();
        }
        t.elapsed()
    }
}

/// What the CPU-bound task beside each player does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Busy {
    /// Loops on `cond_resched()` at this nice level: it keeps its fair share.
    CondResched(i32),
    /// Loops on `yield_now()` at nice 0, as tokio's busy task does: each yield gives up the
    /// rest of its request.
    Yield,
}

/// `warmup` then `iters` timed round trips between a task on worker `a` of `rt` and one on
/// worker `b` (with `slice`, both ask for that request length); with `busy`, a CPU-bound task
/// runs on each of the two workers meanwhile. Returns the time of the `iters` round trips.
pub fn lagom_pingpong(
    rt: &Runtime,
    a: usize,
    b: usize,
    busy: Option<Busy>,
    slice: Option<Duration>,
    warmup: u64,
    iters: u64,
) -> Duration {
    let cpus = rt.worker_cpus();
    let (cpu_a, cpu_b) = (cpus[a], cpus[b]);
    rt.block_on(move || {
        let stop = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = if let Some(kind) = busy {
            [cpu_a, cpu_b]
                .into_iter()
                .map(|cpu| {
                    let stop = Arc::clone(&stop);
                    let nice = match kind {
                        Busy::CondResched(nice) => nice,
                        Busy::Yield => 0,
                    };
                    Builder::new()
                        .name("busy")
                        .nice(nice)
                        .cpus([cpu])
                        .spawn(move || {
                            while !stop.load(Ordering::Relaxed) {
                                match kind {
                                    Busy::CondResched(_) => lagom::task::cond_resched(),
                                    Busy::Yield => lagom::task::yield_now(),
                                }
                            }
                        })
                        .expect("spawn busy")
                })
                .collect()
        } else {
            Vec::new()
        };
        let turn = Arc::new(AtomicU64::new(0));
        let peers: Arc<[OnceLock<Unparker>; 2]> = Arc::new(Default::default());
        let with_slice = |b: Builder| match slice {
            Some(s) => b.slice(s),
            None => b,
        };
        let pa = with_slice(Builder::new().name("A").cpus([cpu_a]));
        let pb = with_slice(Builder::new().name("B").cpus([cpu_b]));
        let ha = pa
            .spawn(player(
                0,
                warmup,
                iters,
                Arc::clone(&turn),
                Arc::clone(&peers),
            ))
            .expect("spawn A");
        let hb = pb
            .spawn(player(1, warmup, iters, turn, peers))
            .expect("spawn B");
        let elapsed = ha.join().expect("A");
        hb.join().expect("B");
        stop.store(true, Ordering::Relaxed);
        for s in spinners {
            s.join().expect("busy");
        }
        elapsed
    })
}

/// `warmup` then `iters` timed `Notify` round trips between two current-thread tokio
/// runtimes on their own OS threads, pinned to `cpus` (A's runtime first); with `busy`, each
/// runtime also runs a task that loops on `yield_now` until both players are done. Returns the
/// time of the `iters` round trips, as A sees it.
pub fn tokio_remote(cpus: [usize; 2], busy: bool, warmup: u64, iters: u64) -> Duration {
    use std::sync::atomic::AtomicUsize;
    use tokio::sync::Notify;
    let to = [Arc::new(Notify::new()), Arc::new(Notify::new())];
    let done = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..2)
        .map(|me| {
            let cpu = cpus[me];
            let (mine, other) = (Arc::clone(&to[me]), Arc::clone(&to[1 - me]));
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                assert!(
                    core_affinity::set_for_current(core_affinity::CoreId { id: cpu }),
                    "pin to CPU {cpu}"
                );
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .expect("tokio current-thread runtime");
                rt.block_on(async move {
                    let spinner = busy.then(|| {
                        let done = Arc::clone(&done);
                        tokio::spawn(async move {
                            while done.load(Ordering::Relaxed) < 2 {
                                tokio::task::yield_now().await;
                            }
                        })
                    });
                    let player = tokio::spawn(async move {
                        let mut t = Instant::now();
                        for i in 0..warmup + iters {
                            if i == warmup {
                                t = Instant::now();
                            }
                            if me == 0 {
                                other.notify_one();
                                mine.notified().await;
                            } else {
                                mine.notified().await;
                                other.notify_one();
                            }
                        }
                        t.elapsed()
                    });
                    let elapsed = player.await.expect("player");
                    done.fetch_add(1, Ordering::Relaxed);
                    if let Some(s) = spinner {
                        s.await.expect("busy");
                    }
                    elapsed
                })
            })
        })
        .collect();
    let mut times = threads.into_iter().map(|t| t.join().expect("tokio thread"));
    let a = times.next().expect("A's time");
    times.for_each(drop);
    a
}
