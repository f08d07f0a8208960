//! What a simulation measures: latency histograms, and per-CPU counters with the names of the
//! threaded runtime's (`lagom::runtime::WorkerStats`, the spirit of `/proc/schedstat`).

use alloc::vec::Vec;

/// Sub-buckets per power of two (2^6).
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;

/// A histogram of nanosecond values.
///
/// It keeps exact counts in log-linear buckets: values below 128 ns each have a bucket, and
/// every power of two above is split in 64, so a percentile is within 1/64 (1.6 %) of the
/// exact one, with a few kilobytes per histogram and no allocation per sample once the range
/// is covered. The minimum, maximum and sum are exact.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Histogram {
    counts: Vec<u32>,
    n: u64,
    sum: u128,
    min: u64,
    max: u64,
}

fn bucket(v: u64) -> usize {
    if v < 2 * SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros() - SUB_BITS;
    (SUB as usize) * e as usize + (v >> e) as usize
}

/// The smallest value of bucket `i` and its width.
fn bucket_range(i: usize) -> (u64, u64) {
    if (i as u64) < 2 * SUB {
        return (i as u64, 1);
    }
    let e = (i as u64 / SUB) - 1;
    let m = i as u64 % SUB + SUB;
    (m << e, 1 << e)
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        Histogram::default()
    }

    /// Records one value.
    pub fn record(&mut self, v: u64) {
        let b = bucket(v);
        if b >= self.counts.len() {
            self.counts.resize(b + 1, 0);
        }
        self.counts[b] += 1;
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.n += 1;
        self.sum += u128::from(v);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        if other.n == 0 {
            return;
        }
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.min = if self.n == 0 {
            other.min
        } else {
            self.min.min(other.min)
        };
        self.max = self.max.max(other.max);
        self.n += other.n;
        self.sum += other.sum;
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The smallest value (0 when empty).
    pub fn min(&self) -> u64 {
        self.min
    }

    /// The largest value (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The sum of the values.
    pub fn sum(&self) -> u128 {
        self.sum
    }

    /// The mean, rounded down (0 when empty).
    pub fn mean(&self) -> u64 {
        if self.n == 0 {
            0
        } else {
            (self.sum / u128::from(self.n)) as u64
        }
    }

    /// The `q`-quantile for `q` = `num / den` (the smallest value with at least that share of
    /// values at or below it), as its bucket's midpoint, within the exact min and max (which
    /// `q` = 0 and `q` = 1 give exactly); 0 when empty.
    pub fn quantile(&self, num: u64, den: u64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        if num == 0 {
            return self.min;
        }
        if num >= den {
            return self.max;
        }
        let rank = (u128::from(self.n) * u128::from(num))
            .div_ceil(u128::from(den))
            .max(1);
        let mut seen = 0u128;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += u128::from(c);
            if seen >= rank {
                let (lo, w) = bucket_range(i);
                return (lo + (w - 1) / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// Values at or above `threshold` (exact when `threshold` is a bucket boundary, which
    /// every value below 128 and every power of two is; otherwise within its bucket).
    pub fn at_least(&self, threshold: u64) -> u64 {
        let b = bucket(threshold);
        self.counts.iter().skip(b).map(|&c| u64::from(c)).sum()
    }
}

macro_rules! counters {
    ($( $(#[$doc:meta])* $name:ident ),* $(,)?) => {
        /// One virtual CPU's counters, named as the threaded runtime's `WorkerStats`.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct Counters {
            $( $(#[$doc])* pub $name: u64, )*
        }

        impl Counters {
            /// Counter names, in table order.
            pub const NAMES: &'static [&'static str] = &[$( stringify!($name) ),*];

            /// The values, in [`Counters::NAMES`] order.
            pub fn values(&self) -> [u64; Counters::NAMES.len()] {
                [$( self.$name ),*]
            }

            /// Adds every counter of `other`.
            pub fn accumulate(&mut self, other: &Counters) {
                $( self.$name += other.$name; )*
            }
        }
    };
}

// The counters are named once, for both drivers (`lagom_trace::sched_counters!`).
lagom_trace::sched_counters!(counters! {});

impl Counters {
    /// Every wakeup that made a blocked task runnable here (the runtime's
    /// `WorkerStats::wakeups`).
    pub fn wakeups(&self) -> u64 {
        self.wakeups_local
            + self.wakeups_remote
            + self.wakeups_queued
            + self.wakeups_on_cpu
            + self.runnable_in_place
            + self.runnable_queued
    }
}

/// What one task's run measured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskStats {
    /// Length of each stint on a CPU (switch-in to switch-out).
    pub run: Histogram,
    /// Each wait while runnable (made runnable or preempted, to switched in).
    pub wait: Histogram,
    /// Each handoff: from the wakeup call to the task running again.
    pub handoff: Histogram,
    /// CPU time (ns), switch-in costs included.
    pub cpu_time: u64,
    /// CPU time since measuring began (the scenario's `warmup`).
    pub measured_cpu_time: u64,
    /// Wakeups that made it runnable.
    pub wakeups: u64,
    /// Handoffs at or above the scenario's stall threshold (counted exactly, not from the
    /// histogram's buckets).
    pub stalls: u64,
    /// Loop iterations it completed after the warm-up (its script's throughput: schbench's
    /// requests, a pipe's round trips).
    pub loops: u64,
    /// Times it moved to another CPU (wakeup selection, balancing).
    pub migrations: u64,
    /// Switches away from it that were preemptions.
    pub preempted: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_tight() {
        let mut prev = 0;
        for v in (0..100_000u64).chain([1 << 40, u64::MAX]) {
            let b = bucket(v);
            assert!(b == prev || b == prev + 1 || v >= 1 << 40, "gap at {v}");
            prev = b;
            let (lo, w) = bucket_range(b);
            assert!(lo <= v && v - lo < w, "{v} not in bucket {b} ({lo}, {w})");
            assert!(
                w == 1 || w * SUB <= lo,
                "bucket {b} wider than 1/64 of its values"
            );
        }
    }

    #[test]
    fn quantiles() {
        let mut h = Histogram::new();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(1, 2);
        assert!((p50 as f64 / 500_000.0 - 1.0).abs() < 1.0 / 64.0, "{p50}");
        assert_eq!(h.quantile(1, 1), 1_000_000);
        assert_eq!(h.quantile(0, 1), 1000);
        assert_eq!(h.count(), 1000);
        assert_eq!(h.at_least(1 << 19), 1000 - 524);
    }
}
