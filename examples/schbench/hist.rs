//! The latency histogram (fio's "plat" scheme) and its percentile walk.
//!
//! 19 groups of 256 buckets. Values below 512 have a bucket each; above, group `e + 1`
//! holds the values whose highest set bit is `e + 8`, in 256 buckets of width `2^e`, so the
//! relative error stays below 1/256. A bucket reads back as its midpoint.
//!
//! A [`Hist`] has one writer (its thread) and is read and zeroed by the control loop, as in
//! schbench, without a lock: Relaxed loads and stores, no read-modify-write on the hot path.
//! A zeroing that races with a sample may lose that one sample, as schbench's does.

use std::sync::atomic::{AtomicU32, Ordering};

/// Buckets per group.
const GROUP: usize = 256;
/// Number of buckets: 19 groups.
pub const NR_BUCKETS: usize = 19 * GROUP;
/// The percentiles computed, in order (the tables print a subset).
pub const PERCENTILES: [f64; 5] = [20.0, 50.0, 90.0, 99.0, 99.9];

/// The bucket index of `value`.
pub fn value_to_index(value: u32) -> usize {
    // msb: the index of the highest set bit (0 for 0).
    let msb = 31 - (value | 1).leading_zeros() as usize;
    if msb <= 8 {
        return value as usize;
    }
    let e = msb - 8;
    let index = (e + 1) * GROUP + ((value >> e) as usize & (GROUP - 1));
    index.min(NR_BUCKETS - 1)
}

/// The value a bucket index stands for: the index itself below 512, the bucket's midpoint
/// above (truncated).
pub fn index_to_value(index: usize) -> u32 {
    if index < 2 * GROUP {
        return index as u32;
    }
    let e = (index / GROUP) - 1;
    let k = (index % GROUP) as u32;
    // 2^(e+8) + (k + 0.5)·2^e, exact in integers since e ≥ 1.
    (1 << (e + 8)) + (k << e) + (1 << (e - 1))
}

/// One thread's live histogram.
pub struct Hist {
    buckets: Box<[AtomicU32]>,
    min: AtomicU32,
    max: AtomicU32,
}

impl Default for Hist {
    fn default() -> Hist {
        Hist {
            buckets: (0..NR_BUCKETS).map(|_| AtomicU32::new(0)).collect(),
            min: AtomicU32::new(0),
            max: AtomicU32::new(0),
        }
    }
}

impl Hist {
    /// Records one sample (only the owning thread calls this).
    pub fn add(&self, value: u32) {
        let b = &self.buckets[value_to_index(value)];
        b.store(b.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        // min treats 0 as "unset", as schbench's does.
        let min = self.min.load(Ordering::Relaxed);
        if min == 0 || value < min {
            self.min.store(value, Ordering::Relaxed);
        }
        if value > self.max.load(Ordering::Relaxed) {
            self.max.store(value, Ordering::Relaxed);
        }
    }

    /// Forgets every sample.
    pub fn zero(&self) {
        for b in self.buckets.iter() {
            b.store(0, Ordering::Relaxed);
        }
        self.min.store(0, Ordering::Relaxed);
        self.max.store(0, Ordering::Relaxed);
    }

    /// Adds this histogram's current content to `sum`.
    pub fn add_to(&self, sum: &mut Summary) {
        for (s, b) in sum.buckets.iter_mut().zip(self.buckets.iter()) {
            *s += u64::from(b.load(Ordering::Relaxed));
        }
        sum.merge_min_max(
            self.min.load(Ordering::Relaxed),
            self.max.load(Ordering::Relaxed),
        );
    }
}

/// A histogram's content summed over threads, ready for the percentile walk.
#[derive(Clone, Debug)]
pub struct Summary {
    buckets: Vec<u64>,
    /// The smallest sample (0: none, or only zeros).
    pub min: u32,
    /// The largest sample.
    pub max: u32,
}

impl Default for Summary {
    fn default() -> Summary {
        Summary {
            buckets: vec![0; NR_BUCKETS],
            min: 0,
            max: 0,
        }
    }
}

/// One percentile of a [`Summary`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pct {
    /// The bucket's value.
    pub value: u32,
    /// Samples between the previous percentile's bucket (exclusive) and this one's
    /// (inclusive); for the first, from the start.
    pub samples: u64,
}

impl Summary {
    fn merge_min_max(&mut self, min: u32, max: u32) {
        if min != 0 && (self.min == 0 || min < self.min) {
            self.min = min;
        }
        self.max = self.max.max(max);
    }

    /// Records one sample directly (tests, and sums built without live histograms).
    pub fn add(&mut self, value: u32) {
        self.buckets[value_to_index(value)] += 1;
        if self.min == 0 || value < self.min {
            self.min = value;
        }
        self.max = self.max.max(value);
    }

    /// The number of samples.
    pub fn total(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The [`PERCENTILES`]: for each, the first bucket at which the cumulative count
    /// reaches `p / 100 · N`; all zero when there are no samples.
    pub fn percentiles(&self) -> [Pct; 5] {
        let mut out = [Pct {
            value: 0,
            samples: 0,
        }; 5];
        let n = self.total();
        if n == 0 {
            return out;
        }
        let thresholds = PERCENTILES.map(|p| p / 100.0 * n as f64);
        let (mut cum, mut prev, mut j) = (0u64, 0u64, 0usize);
        for (i, &b) in self.buckets.iter().enumerate() {
            cum += b;
            while j < out.len() && cum as f64 >= thresholds[j] {
                out[j] = Pct {
                    value: index_to_value(i),
                    samples: cum - prev,
                };
                prev = cum;
                j += 1;
            }
            if j == out.len() {
                break;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_have_a_bucket_each() {
        for v in [0, 1, 2, 255, 256, 510, 511] {
            assert_eq!(value_to_index(v), v as usize);
            assert_eq!(index_to_value(v as usize), v);
        }
    }

    #[test]
    fn bucket_edges_hand_computed() {
        // 512 = 2^9: e = 1, width 2: [512, 513] → index 512, midpoint 513.
        assert_eq!(value_to_index(512), 512);
        assert_eq!(value_to_index(513), 512);
        assert_eq!(value_to_index(514), 513);
        assert_eq!(index_to_value(512), 513);
        // 1023: last bucket of group 2; 1024 starts group 3 (width 4, midpoint +2).
        assert_eq!(value_to_index(1023), 767);
        assert_eq!(index_to_value(767), 1023);
        assert_eq!(value_to_index(1024), 768);
        assert_eq!(value_to_index(1027), 768);
        assert_eq!(value_to_index(1028), 769);
        assert_eq!(index_to_value(768), 1026);
        // 717 and 703 (schbench's odd RPS values) are midpoints of width-2 buckets.
        assert_eq!(index_to_value(value_to_index(716)), 717);
        assert_eq!(index_to_value(value_to_index(702)), 703);
        // The last group: msb 25 (e = 17); 2^26 and beyond clamp to the last bucket.
        assert_eq!(value_to_index((1 << 26) - 1), NR_BUCKETS - 1);
        assert_eq!(value_to_index(1 << 26), NR_BUCKETS - 1);
        assert_eq!(value_to_index(u32::MAX), NR_BUCKETS - 1);
        assert_eq!(
            index_to_value(NR_BUCKETS - 1),
            (1 << 25) + (255 << 17) + (1 << 16)
        );
    }

    #[test]
    fn every_value_lands_in_the_bucket_of_its_midpoint() {
        let mut v = 0u32;
        while v < 1 << 26 {
            let i = value_to_index(v);
            assert_eq!(value_to_index(index_to_value(i)), i, "value {v}");
            // Within 1/256 of the value (the scheme's resolution).
            let mid = f64::from(index_to_value(i));
            assert!(
                (mid - f64::from(v)).abs() <= f64::from(v) / 256.0 + 0.5,
                "value {v}"
            );
            v = v + 1 + v / 97;
        }
    }

    #[test]
    fn percentile_walk_hand_computed() {
        // 1..=10 once each: thresholds 2, 5, 9, 9.9, 9.99.
        let mut s = Summary::default();
        for v in 1..=10 {
            s.add(v);
        }
        let p = s.percentiles();
        let got: Vec<(u32, u64)> = p.iter().map(|p| (p.value, p.samples)).collect();
        assert_eq!(got, [(2, 2), (5, 3), (9, 4), (10, 1), (10, 0)]);
        assert_eq!((s.min, s.max, s.total()), (1, 10, 10));
    }

    #[test]
    fn percentile_walk_counts_from_the_previous_entry_and_uses_midpoints() {
        // 100 samples: 80 of 3, 15 of 600 (bucket 556, midpoint 601), 5 of 2000.
        let mut s = Summary::default();
        (0..80).for_each(|_| s.add(3));
        (0..15).for_each(|_| s.add(600));
        (0..5).for_each(|_| s.add(2000));
        let p = s.percentiles();
        // p20 and p50 both at 3: the 50th row counts 0 more samples.
        assert_eq!(
            p[0],
            Pct {
                value: 3,
                samples: 80
            }
        );
        assert_eq!(
            p[1],
            Pct {
                value: 3,
                samples: 0
            }
        );
        assert_eq!(
            p[2],
            Pct {
                value: 601,
                samples: 15
            }
        );
        // 2000: e = 2, (2000 >> 2) & 255 = 244 → index 1012, midpoint 1024 + 976 + 2.
        assert_eq!(
            p[3],
            Pct {
                value: 2002,
                samples: 5
            }
        );
        assert_eq!(
            p[4],
            Pct {
                value: 2002,
                samples: 0
            }
        );
    }

    #[test]
    fn exact_threshold_is_reached_at_its_bucket() {
        // N = 100: the 99th threshold is exactly 99.0, reached by the 99th sample's bucket;
        // the 99.9th (99.9) needs the last one.
        let mut s = Summary::default();
        (0..99).for_each(|_| s.add(10));
        s.add(50);
        let p = s.percentiles();
        assert_eq!(
            p[3],
            Pct {
                value: 10,
                samples: 0
            }
        );
        assert_eq!(
            p[4],
            Pct {
                value: 50,
                samples: 1
            }
        );
        // N = 1000: 99.9 / 100 · 1000 is 999.0000000000001 in doubles (as in C), so the
        // 999th sample does not reach it.
        let mut s = Summary::default();
        (0..999).for_each(|_| s.add(10));
        s.add(50);
        assert_eq!(s.percentiles()[4].value, 50);
    }

    #[test]
    fn empty_prints_zeros_and_min_skips_zero() {
        let s = Summary::default();
        assert!(
            s.percentiles()
                .iter()
                .all(|p| p.value == 0 && p.samples == 0)
        );
        let h = Hist::default();
        h.add(0);
        h.add(700);
        h.add(690);
        let mut sum = Summary::default();
        h.add_to(&mut sum);
        assert_eq!((sum.min, sum.max, sum.total()), (690, 700, 3));
        h.zero();
        let mut sum = Summary::default();
        h.add_to(&mut sum);
        assert_eq!((sum.min, sum.max, sum.total()), (0, 0, 0));
    }
}
