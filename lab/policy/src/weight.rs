//! Load weights: the nice → weight table, its inverse, and `calc_delta_fair`.
//!
//! Each nice step changes the weight by about 1.25×, so that a task that is one nice level
//! "nicer" than a competitor gets about 10 % less CPU. Weights are kept at the kernel's full
//! resolution on 64-bit machines: the table value shifted left by
//! [`SCHED_FIXEDPOINT_SHIFT`] bits, so that [`NICE_0_LOAD`] is `1024 << 10`. Every product of
//! a time and a weight is computed in 128 bits, so nothing here can overflow and there is no
//! "paranoid" fallback path.

/// Bits of fixed-point resolution added to the table weights (the kernel's
/// `SCHED_FIXEDPOINT_SHIFT` on 64-bit).
pub const SCHED_FIXEDPOINT_SHIFT: u32 = 10;

/// The weight of a nice-0 entity at full resolution (`1024 << 10`).
pub const NICE_0_LOAD: u64 = 1024 << SCHED_FIXEDPOINT_SHIFT;

/// Lowest (most favoured) nice value.
pub const MIN_NICE: i32 = -20;

/// Highest (least favoured) nice value.
pub const MAX_NICE: i32 = 19;

/// Table weights for nice −20 … 19 (the kernel's `sched_prio_to_weight`), index `nice + 20`.
pub const SCHED_PRIO_TO_WEIGHT: [u32; 40] = [
    88761, 71755, 56483, 46273, 36291, // −20 … −16
    29154, 23254, 18705, 14949, 11916, // −15 … −11
    9548, 7620, 6100, 4904, 3906, // −10 … −6
    3121, 2501, 1991, 1586, 1277, // −5 … −1
    1024, 820, 655, 526, 423, // 0 … 4
    335, 272, 215, 172, 137, // 5 … 9
    110, 87, 70, 56, 45, // 10 … 14
    36, 29, 23, 18, 15, // 15 … 19
];

/// Inverse table weights, about `2^32 / weight` (the kernel's `sched_prio_to_wmult`), index
/// `nice + 20`. Kept for bit-exact 32-bit style arithmetic; lagom itself divides in 128 bits.
pub const SCHED_PRIO_TO_WMULT: [u32; 40] = [
    48388, 59856, 76040, 92818, 118348, // −20 … −16
    147320, 184698, 229616, 287308, 360437, // −15 … −11
    449829, 563644, 704093, 875809, 1099582, // −10 … −6
    1376151, 1717300, 2157191, 2708050, 3363326, // −5 … −1
    4194304, 5237765, 6557202, 8165337, 10153587, // 0 … 4
    12820798, 15790321, 19976592, 24970740, 31350126, // 5 … 9
    39045157, 49367440, 61356676, 76695844, 95443717, // 10 … 14
    119304647, 148102320, 186737708, 238609294, 286331153, // 15 … 19
];

/// Clamps a nice value into −20 … 19, as `setpriority(2)` does.
pub const fn clamp_nice(nice: i32) -> i32 {
    if nice < MIN_NICE {
        MIN_NICE
    } else if nice > MAX_NICE {
        MAX_NICE
    } else {
        nice
    }
}

/// The full-resolution weight of a nice level (clamped into −20 … 19).
///
/// ```
/// use lagom_policy::{weight_of_nice, NICE_0_LOAD};
/// assert_eq!(weight_of_nice(0), NICE_0_LOAD);
/// assert_eq!(weight_of_nice(-20), 88761 << 10);
/// ```
pub const fn weight_of_nice(nice: i32) -> u64 {
    (SCHED_PRIO_TO_WEIGHT[(clamp_nice(nice) - MIN_NICE) as usize] as u64) << SCHED_FIXEDPOINT_SHIFT
}

/// The inverse table weight (`sched_prio_to_wmult`) of a nice level (clamped into −20 … 19).
pub const fn inv_weight_of_nice(nice: i32) -> u32 {
    SCHED_PRIO_TO_WMULT[(clamp_nice(nice) - MIN_NICE) as usize]
}

/// Converts `delta` real nanoseconds into virtual nanoseconds for an entity of `weight`:
/// `delta × NICE_0_LOAD / weight`, computed in 128 bits (the identity for a nice-0 entity).
///
/// Used both to charge run time (`update_curr`) and to turn a slice into a virtual request
/// length. A result beyond `u64::MAX` (only possible for a delta of centuries) saturates.
///
/// ```
/// use lagom_policy::{calc_delta_fair, weight_of_nice, NICE_0_LOAD};
/// assert_eq!(calc_delta_fair(1000, NICE_0_LOAD), 1000);
/// // A nice −20 entity's virtual time runs about 86.7 times slower.
/// assert_eq!(calc_delta_fair(887_610, weight_of_nice(-20)), 10_240);
/// ```
#[inline]
pub fn calc_delta_fair(delta: u64, weight: u64) -> u64 {
    // Below 2^44 ns (about 4.9 hours) the product fits 64 bits, where the division is several
    // times cheaper; the quotient is the same.
    match calc_delta_fair_narrow(delta, weight) {
        Some(v) => v,
        None => calc_delta_fair_wide(delta, weight),
    }
}

/// [`calc_delta_fair`] where it needs no 128-bit arithmetic (a nice-0 weight, or a product
/// that fits 64 bits: below 2^44 ns), else `None`. A caller that handles `None` out of line
/// makes no call on its usual path.
#[inline]
pub(crate) fn calc_delta_fair_narrow(delta: u64, weight: u64) -> Option<u64> {
    if weight == NICE_0_LOAD {
        return Some(delta);
    }
    debug_assert!(weight > 0, "an entity has a positive weight");
    delta.checked_mul(NICE_0_LOAD).map(|p| p / weight.max(1))
}

/// [`calc_delta_fair`] for a product beyond 64 bits: out of line, so that the callers' hot
/// paths make no call (a call there costs them register saves on every run).
#[cold]
#[inline(never)]
fn calc_delta_fair_wide(delta: u64, weight: u64) -> u64 {
    let v = (delta as u128 * NICE_0_LOAD as u128) / weight.max(1) as u128;
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Signed variant of [`calc_delta_fair`] for lags and relative deadlines: `x × from / to`,
/// truncated toward zero like the kernel's `div_s64`.
#[inline]
pub(crate) fn scale_signed(x: i64, from: u64, to: u64) -> i64 {
    // In 64 bits when the product fits: truncating division gives the same quotient, and
    // it fits as the product does (the divisor is at least 1).
    if let (Ok(f), Ok(t)) = (i64::try_from(from), i64::try_from(to.max(1)))
        && let Some(p) = x.checked_mul(f)
    {
        return p / t;
    }
    let v = (x as i128 * from as i128) / to.max(1) as i128;
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_nice_step_is_about_a_quarter() {
        for w in SCHED_PRIO_TO_WEIGHT.windows(2) {
            let r = w[0] as f64 / w[1] as f64;
            assert!((1.18..1.32).contains(&r), "ratio {r}");
        }
    }

    #[test]
    fn inverse_is_two_to_the_32_over_weight_within_one() {
        for (w, m) in SCHED_PRIO_TO_WEIGHT.iter().zip(SCHED_PRIO_TO_WMULT) {
            let exact = (1u64 << 32) as f64 / *w as f64;
            assert!((exact - m as f64).abs() <= 1.0, "{w}: {m} vs {exact}");
        }
    }

    #[test]
    fn out_of_range_nice_is_clamped() {
        assert_eq!(weight_of_nice(-100), weight_of_nice(-20));
        assert_eq!(weight_of_nice(100), weight_of_nice(19));
        assert_eq!(inv_weight_of_nice(0), 4194304);
    }

    /// The 64-bit paths give the 128-bit quotients, on both sides of the overflow bound
    /// and at the extremes (seeded; the failing values are printed).
    #[test]
    fn fast_paths_match_128_bit_arithmetic() {
        let mut s = 0x243f_6a88_85a3_08d3_u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let edges = [
            0,
            1,
            2,
            (1 << 44) - 1,
            1 << 44,
            (1 << 44) + 1,
            i64::MAX as u64,
            u64::MAX,
        ];
        for k in 0..200_000 {
            let r = next();
            let delta = if k < 64 { edges[k % 8] } else { r >> (r % 64) };
            let weight = if k < 64 {
                [1, 2, 15 << 10, NICE_0_LOAD + 1, u64::MAX, 88761 << 10, 3, 7][k / 8]
            } else {
                (next() >> (next() % 64)).max(1)
            };
            let want = u64::try_from((delta as u128 * NICE_0_LOAD as u128) / weight as u128);
            assert_eq!(
                calc_delta_fair(delta, weight),
                want.unwrap_or(u64::MAX),
                "calc_delta_fair({delta}, {weight})"
            );
            let x = next() as i64 >> (next() % 64);
            let x = if k < 8 {
                [0, 1, -1, i64::MIN, i64::MAX, -7, 7, i64::MIN + 1][k]
            } else {
                x
            };
            let (from, to) = (weight, delta);
            let want = ((x as i128 * from as i128) / to.max(1) as i128)
                .clamp(i64::MIN as i128, i64::MAX as i128) as i64;
            assert_eq!(
                scale_signed(x, from, to),
                want,
                "scale_signed({x}, {from}, {to})"
            );
        }
    }

    #[test]
    fn calc_delta_fair_is_exact_in_128_bits() {
        let w = weight_of_nice(19);
        // 2^40 ns × 2^20 overflows 64 bits; 128-bit math must still be exact.
        let d = 1u64 << 40;
        assert_eq!(
            calc_delta_fair(d, w) as u128,
            (d as u128 * NICE_0_LOAD as u128) / w as u128
        );
        assert_eq!(scale_signed(-10, 3, 2), -15);
        assert_eq!(scale_signed(-7, 1, 2), -3);
    }
}
