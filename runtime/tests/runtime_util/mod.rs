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
