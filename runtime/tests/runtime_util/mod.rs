//! Helpers of the runtime tests: a watchdog, the feature combinations, a seeded generator.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Fails the test process if `progress` stops moving for `limit` while the guard lives.
pub struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    pub fn new(what: &'static str, progress: Arc<AtomicU64>, limit: Duration) -> Watchdog {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut last = progress.load(Ordering::Relaxed);
            let mut since = Instant::now();
            while !s.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
                let now = progress.load(Ordering::Relaxed);
                if now != last {
                    last = now;
                    since = Instant::now();
                } else if since.elapsed() > limit {
                    eprintln!(
                        "watchdog: {what}: no progress for {limit:?} (stuck at {now}): lost wakeup"
                    );
                    std::process::exit(99);
                }
            }
        });
        Watchdog {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Every combination of the wakeup features the runtime implements, as feature strings.
pub fn feature_combinations() -> Vec<String> {
    let names = [
        "DELAY_DEQUEUE",
        "TTWU_QUEUE",
        "TTWU_QUEUE_ON_CPU",
        "TTWU_QUEUE_DELAYED",
        "TTWU_DEQUEUE",
    ];
    (0..1u32 << names.len())
        .map(|bits| {
            names
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    if bits & (1 << i) != 0 {
                        n.to_string()
                    } else {
                        format!("NO_{n}")
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect()
}

/// The CPUs to run two workers on: the first two allowed CPUs (or one, twice not allowed).
pub fn two_cpus() -> Vec<usize> {
    let rt = lagom::Runtime::builder().build().expect("default runtime");
    let cpus = rt.worker_cpus();
    drop(rt);
    cpus.into_iter().take(2).collect()
}

/// xorshift64*, seeded.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A seed from the environment (`LAGOM_SEED`) or the clock; printed by the caller on failure.
pub fn seed() -> u64 {
    std::env::var("LAGOM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        })
}

/// Two tasks, "ping" pinned to the runtime's first worker and "pong" to its last, pass a
/// turn back and forth `n` times through park/unpark; a watchdog fails the process if the
/// turn stops moving for 5 s (a lost wakeup).
pub fn pinned_ping_pong(rt: &lagom::Runtime, n: u64) {
    use lagom::task::{Builder, Unparker};
    use std::sync::OnceLock;
    let cpus = rt.worker_cpus();
    let turn = Arc::new(AtomicU64::new(0));
    let _dog = Watchdog::new("ping-pong", Arc::clone(&turn), Duration::from_secs(5));
    let peer: Arc<[OnceLock<Unparker>; 2]> = Arc::new(Default::default());
    let player = |me: u64| {
        let (turn, peer) = (Arc::clone(&turn), Arc::clone(&peer));
        move || {
            peer[me as usize]
                .set(lagom::task::current_unparker())
                .unwrap();
            let other = loop {
                if let Some(o) = peer[1 - me as usize].get() {
                    break o.clone();
                }
                lagom::task::yield_now();
            };
            for i in 0..n {
                let mine = 2 * i + me;
                while turn.load(Ordering::Acquire) != mine {
                    lagom::task::park();
                }
                turn.store(mine + 1, Ordering::Release);
                other.unpark();
            }
        }
    };
    let last = *cpus.last().unwrap();
    let a = rt
        .spawn_with(Builder::new().name("ping").cpus([cpus[0]]), player(0))
        .unwrap();
    let b = rt
        .spawn_with(Builder::new().name("pong").cpus([last]), player(1))
        .unwrap();
    a.join().unwrap();
    b.join().unwrap();
    assert_eq!(turn.load(Ordering::Relaxed), 2 * n);
}

/// When the tasks of a [`storm`] stop.
#[derive(Clone, Copy, Debug)]
pub enum Stop {
    /// After this long (the calling thread then tells them).
    After(Duration),
    /// Each after this many rounds.
    Rounds(u64),
}

/// `tasks` tasks wake up to `fanout` random others (unpark) each round and then park, yield
/// or call `cond_resched` at random, seeded by `seed`, until `stop`; the calling thread (an
/// outside waker) then unparks them until all have ended. A watchdog fails the process if
/// no task makes progress for 5 s. Returns the rounds run, summed over the tasks.
pub fn storm(rt: &lagom::Runtime, seed: u64, tasks: usize, fanout: u64, stop: Stop) -> u64 {
    use lagom::task::Unparker;
    use std::sync::OnceLock;
    let stopped = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(AtomicU64::new(0));
    let _dog = Watchdog::new("storm", Arc::clone(&progress), Duration::from_secs(5));
    let peers: Arc<Vec<OnceLock<Unparker>>> =
        Arc::new((0..tasks).map(|_| OnceLock::new()).collect());
    let handles: Vec<_> = (0..tasks)
        .map(|i| {
            let (stopped, peers, progress) = (
                Arc::clone(&stopped),
                Arc::clone(&peers),
                Arc::clone(&progress),
            );
            rt.spawn(move || {
                peers[i].set(lagom::task::current_unparker()).unwrap();
                let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9));
                let mut rounds = 0u64;
                while !stopped.load(Ordering::Relaxed)
                    && !matches!(stop, Stop::Rounds(r) if rounds >= r)
                {
                    for _ in 0..=rng.below(fanout) {
                        if let Some(u) = peers[rng.below(tasks as u64) as usize].get() {
                            u.unpark();
                        }
                    }
                    match rng.below(4) {
                        0 => lagom::task::yield_now(),
                        1 => lagom::task::cond_resched(),
                        _ => lagom::task::park(),
                    }
                    rounds += 1;
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                rounds
            })
        })
        .collect();
    if let Stop::After(d) = stop {
        let t0 = Instant::now();
        while t0.elapsed() < d {
            std::thread::sleep(Duration::from_millis(10));
        }
        stopped.store(true, Ordering::Relaxed);
    }
    let unparkers: Vec<Unparker> = handles.iter().map(|h| h.unparker()).collect();
    while !handles.iter().all(|h| h.is_finished()) {
        for u in &unparkers {
            u.unpark();
        }
        std::thread::sleep(Duration::from_millis(1));
        progress.fetch_add(1, Ordering::Relaxed);
    }
    handles.into_iter().map(|h| h.join().unwrap()).sum()
}
