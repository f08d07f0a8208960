//! The simulator's random numbers: SplitMix64, and the distributions a script's durations are
//! drawn from.
//!
//! Invariant: *the numbers depend on the seed alone*. There is one generator per simulation,
//! drawn from in event order (which is itself deterministic), and every draw is integer
//! arithmetic or IEEE-754 double operations without fused or platform-specific steps, so the
//! same seed gives the same draws on every machine.
//!
//! SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
//! OOPSLA 2014) passes BigCrush, needs one word of state and four operations per draw.

/// A SplitMix64 generator.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform draw from `lo..=hi` (`lo ≤ hi`), by Lemire's multiply-shift (the bias is
    /// below 2^-64 · (hi − lo + 1), far below anything a simulation can see).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        debug_assert!(lo <= hi);
        let span = (hi - lo) as u128 + 1;
        lo + ((u128::from(self.next_u64()) * span) >> 64) as u64
    }

    /// A uniform draw from the open interval (0, 1).
    pub fn unit_open(&mut self) -> f64 {
        // 53 random bits, offset by half a step so that neither end is reached.
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
}

/// How a duration is drawn (nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dist {
    /// Always this long.
    Fixed(u64),
    /// Uniform over `lo..=hi`.
    Uniform {
        /// The shortest value.
        lo: u64,
        /// The longest value.
        hi: u64,
    },
    /// Exponential with this mean (memoryless gaps: a Poisson process), capped at 1000 times
    /// the mean so that one draw cannot stall a run.
    Exp {
        /// The mean.
        mean: u64,
    },
}

impl Dist {
    /// One draw. A fixed duration draws nothing from `rng`.
    pub fn sample(self, rng: &mut Rng) -> u64 {
        match self {
            Dist::Fixed(d) => d,
            Dist::Uniform { lo, hi } => rng.range(lo, hi),
            Dist::Exp { mean } => {
                let x = -ln(rng.unit_open()) * mean as f64;
                (x as u64).min(mean.saturating_mul(1000))
            }
        }
    }

    /// The mean of the distribution (ns).
    pub fn mean(self) -> u64 {
        match self {
            Dist::Fixed(d) => d,
            Dist::Uniform { lo, hi } => lo + (hi - lo) / 2,
            Dist::Exp { mean } => mean,
        }
    }
}

/// The natural logarithm of `x > 0`, without `std` (core has no `ln`): `x = m · 2^e` with
/// `m ∈ [1, 2)`, and `ln m = 2 atanh(s)`, `s = (m − 1)/(m + 1) ≤ 1/3`, whose series converges
/// to below 1e-15 relative error in 16 terms.
fn ln(x: f64) -> f64 {
    debug_assert!(x > 0.0 && x.is_finite());
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut mbits = (bits & ((1u64 << 52) - 1)) | (1023u64 << 52);
    if e == -1023 {
        // Subnormal: normalise first.
        let y = x * (1u64 << 54) as f64;
        let b = y.to_bits();
        e = ((b >> 52) & 0x7ff) as i64 - 1023 - 54;
        mbits = (b & ((1u64 << 52) - 1)) | (1023u64 << 52);
    }
    let m = f64::from_bits(mbits);
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let (mut term, mut sum) = (s, 0.0);
    let mut k = 1.0;
    for _ in 0..16 {
        sum += term / k;
        term *= s2;
        k += 2.0;
    }
    2.0 * sum + e as f64 * core::f64::consts::LN_2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference_values() {
        // The first outputs for seed 0 (as published with the algorithm).
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(r.next_u64(), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn ln_matches_std() {
        for &x in &[
            1e-300, 1e-10, 0.001, 0.25, 0.5, 0.7, 0.999_999, 1.0, 2.0, 1e10,
        ] {
            let (a, b) = (ln(x), x.ln());
            assert!(
                (a - b).abs() <= 1e-13 * b.abs().max(1.0),
                "ln({x}) = {a}, std {b}"
            );
        }
    }

    #[test]
    fn draws_stay_in_range_and_exp_has_its_mean() {
        let mut r = Rng::new(7);
        for _ in 0..10_000 {
            let v = Dist::Uniform { lo: 10, hi: 20 }.sample(&mut r);
            assert!((10..=20).contains(&v));
        }
        let n = 200_000;
        let sum: u64 = (0..n)
            .map(|_| Dist::Exp { mean: 1000 }.sample(&mut r))
            .sum();
        let mean = sum as f64 / n as f64;
        // The mean of a truncated draw is mean − 0.5 (the cast floors); 200 000 draws put
        // the sample mean within 1 % with overwhelming probability.
        assert!((mean - 999.5).abs() < 10.0, "exp mean {mean}");
    }
}
