//! The control loop: one tick a second for the warmup, the RPS sample,
//! the interval tables, the zerotime reset and auto-RPS, until the run length has passed or
//! Ctrl-C.

use std::sync::atomic::Ordering;

use crate::hist::Summary;
use crate::opts::Opts;
use crate::report;
use crate::sched::{Sched, now_us};
use crate::sys;
use crate::workload::Shared;

/// How the loop ended.
pub struct Outcome {
    /// The RPS samples.
    pub rps: Summary,
    /// µs from the first tick to the last.
    pub elapsed_us: u64,
    /// Ended by Ctrl-C.
    pub interrupted: bool,
}

/// The wakeup and request histograms summed over workers.
pub fn sums<S: Sched>(sh: &Shared<S>) -> (Summary, Summary) {
    let (mut w, mut r) = (Summary::default(), Summary::default());
    for rec in sh.workers() {
        rec.wakeup.add_to(&mut w);
        rec.request.add_to(&mut r);
    }
    (w, r)
}

/// Average sched delay over the message threads and over the workers, in µs (0 where the
/// threads have no schedstat: lagom tasks, or threads already gone).
pub fn sched_delay<S: Sched>(sh: &Shared<S>) -> (u64, u64) {
    fn avg<'a, S: Sched>(recs: impl Iterator<Item = &'a crate::workload::Rec<S>>) -> u64 {
        let v: Vec<u64> = recs
            .filter_map(|r| match r.tid.load(Ordering::Relaxed) {
                0 => None,
                tid => sys::sched_delay_ns(tid),
            })
            .collect();
        if v.is_empty() {
            0
        } else {
            v.iter().sum::<u64>() / v.len() as u64 / 1000
        }
    }
    (avg(sh.messages()), avg(sh.workers()))
}

/// Total requests so far.
pub fn total_requests<S: Sched>(sh: &Shared<S>) -> u64 {
    sh.workers()
        .map(|r| r.loop_count.load(Ordering::Relaxed))
        .sum()
}

fn zero<S: Sched>(sh: &Shared<S>, rps: &mut Summary) {
    *rps = Summary::default();
    for rec in sh.workers() {
        rec.wakeup.zero();
        rec.request.zero();
    }
}

/// Runs the ticks.
pub fn run<S: Sched>(sh: &Shared<S>, o: &Opts) -> Outcome {
    const SEC: u64 = 1_000_000;
    let rps_mode = o.rps > 0 || o.auto_rps > 0;
    let start = now_us();
    let mut rps = Summary::default();
    let (mut last_print, mut last_zero) = (start, start);
    let (mut last_sample, mut last_loops) = (start, 0u64);
    let mut warmup_done = false;
    let mut target_hit = false;
    let mut cpu = sys::cpu_times();
    let mut elapsed;
    loop {
        let now = now_us();
        elapsed = now - start;
        let done = (o.runtime > 0 && elapsed >= o.runtime * SEC) || sys::interrupted();
        if o.warmup > 0 && !rps_mode && o.pipe == 0 && !warmup_done && elapsed > o.warmup * SEC {
            eprintln!("warmup done, zeroing stats");
            zero(sh, &mut rps);
            warmup_done = true;
        } else if o.pipe == 0 {
            let loops = total_requests(sh);
            let rate = (loops - last_loops) as f64 * 1e6 / (now - last_sample) as f64;
            let rate = if rate.is_finite() { rate } else { 0.0 };
            (last_loops, last_sample) = (loops, now);
            if o.auto_rps == 0 || target_hit {
                rps.add(rate as u32);
            }
            if now - last_print >= o.interval * SEC {
                let (w, r) = sums(sh);
                let (dm, dw) = sched_delay(sh);
                let mut out = String::new();
                report::tables(&mut out, elapsed / SEC, &w, &r, &rps);
                report::sched_delay(&mut out, dm, dw);
                out.push_str(&format!("current rps: {rate:.2}\n"));
                crate::eprint_all(&out);
                last_print = now;
            }
        }
        if o.zerotime > 0 && now - last_zero > o.zerotime * SEC {
            zero(sh, &mut rps);
            last_zero = now;
        }
        if o.auto_rps > 0 {
            let next = sys::cpu_times();
            if let (Some((i0, t0)), Some((i1, t1))) = (cpu, next)
                && t1 > t0
            {
                let busy = 100.0 - (i1 - i0) as f64 / (t1 - t0) as f64 * 100.0;
                let cur = sh.rps_per_thread.load(Ordering::Relaxed);
                let (new, hit) = crate::rps::adjust(cur, busy, o.auto_rps as f64);
                if hit && !target_hit {
                    target_hit = true;
                    rps = Summary::default();
                }
                sh.rps_per_thread.store(new.max(1), Ordering::Relaxed);
            }
            cpu = next;
        }
        if done {
            break;
        }
        sys::sleep_interruptible(SEC);
    }
    Outcome {
        rps,
        elapsed_us: elapsed,
        interrupted: sys::interrupted(),
    }
}
