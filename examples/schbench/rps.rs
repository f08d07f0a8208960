//! Requests-per-second mode (`-R`, `-A`): each message thread issues its
//! share of requests once a second, round-robin over its workers; a worker serves all that
//! queued up, and the control loop may retune the rate to a CPU busy target (auto-RPS).
//!
//! schbench queues a heap-allocated request per post whose content is never read; here a
//! worker's queue is a counter (`queued`) that the worker takes whole with one swap, the
//! same take-all.

use std::sync::atomic::Ordering;

use crate::matrix::Matrix;
use crate::sched::Sched;
use crate::workload::{Shared, positive};

/// A worker with more than this many requests posted since it last looked is skipped.
const MAX_PENDING: u64 = 128;

/// The generator of message thread `msg`.
pub fn generator<S: Sched>(sh: &Shared<S>, msg: usize) {
    let workers = &sh.recs[msg + 1..msg + 1 + sh.cfg.workers];
    if workers.is_empty() {
        return;
    }
    while !sh.stopping() {
        let burst = S::now_us();
        let rps = sh.rps_per_thread.load(Ordering::Relaxed);
        for i in 0..rps {
            if sh.stopping() {
                return;
            }
            let w = &workers[i as usize % workers.len()];
            if w.pending.load(Ordering::Relaxed) > MAX_PENDING {
                // Dropped: the worker is that far behind.
                S::usleep(100);
                continue;
            }
            w.pending.fetch_add(1, Ordering::Relaxed);
            w.queued.fetch_add(1, Ordering::Release);
            w.wake_time.store(S::now_us(), Ordering::Relaxed);
            w.post();
        }
        let elapsed = S::now_us().saturating_sub(burst);
        if elapsed < 1_000_000 && !sh.stopping() {
            S::usleep(1_000_000 - elapsed);
        }
    }
}

/// A worker in RPS mode: serve every queued request; with none, wait for a post.
pub fn worker<S: Sched>(sh: &Shared<S>, msg: usize, me: usize, private: &Matrix) {
    let rec = &sh.recs[me];
    let start = S::now_us();
    while !sh.stopping() {
        rec.set_blocked();
        rec.wake_time.store(S::now_us(), Ordering::Relaxed);
        rec.pending.store(0, Ordering::Relaxed);
        let n = rec.queued.swap(0, Ordering::Acquire);
        if n > 0 {
            rec.set_running();
            for _ in 0..n {
                sh.request(rec, private, start);
            }
            continue;
        }
        sh.recs[msg].post();
        if !sh.stopping() {
            rec.wait();
        }
        if let Some(d) = positive(S::now_us(), rec.wake_time.load(Ordering::Relaxed)) {
            rec.wakeup.add(d);
        }
    }
}

/// Auto-RPS: the next per-thread rate for a measured busy% against the target, and whether
/// this step counts as reaching the target.
pub fn adjust(rps: u64, busy: f64, target: f64) -> (u64, bool) {
    if busy == target {
        return (rps, true);
    }
    let mut ratio = target / busy;
    if busy < target {
        ratio = ratio.min(3.0);
        if ratio < 1.2 {
            ratio = 1.0 + (ratio - 1.0) / 8.0;
        } else if ratio < 1.5 {
            ratio = 1.0 + (ratio - 1.0) / 4.0;
        }
        ((rps as f64 * ratio).ceil() as u64, ratio < 1.05)
    } else {
        ratio = ratio.max(0.3);
        if ratio > 0.9 {
            ratio += (1.0 - ratio) / 8.0;
        } else if ratio > 0.8 {
            ratio += (1.0 - ratio) / 4.0;
        }
        ((rps as f64 * ratio).floor() as u64, ratio > 0.95)
    }
}

#[cfg(test)]
mod tests {
    use super::adjust;

    #[test]
    fn auto_rps_steps() {
        // Far under target: capped at 3×.
        assert_eq!(adjust(10, 10.0, 50.0), (30, false));
        // 1.25×, damped by a quarter: 1.0625 → ceil(106.25).
        assert_eq!(adjust(100, 40.0, 50.0), (107, false));
        // Close under: damped by an eighth, target hit.
        assert_eq!(adjust(100, 48.0, 50.0), (101, true));
        // Far over: floor at 0.3×.
        assert_eq!(adjust(100, 100.0, 20.0), (30, false));
        // Close over: 50/52 = 0.9615 → 0.9663, hit.
        assert_eq!(adjust(100, 52.0, 50.0), (96, true));
        // 50/56 = 0.893 → 0.919, not hit.
        assert_eq!(adjust(100, 56.0, 50.0), (91, false));
        assert_eq!(adjust(100, 50.0, 50.0), (100, true));
    }
}
