//! Wrapping-safe virtual-time arithmetic.
//!
//! Virtual times (vruntime, deadline, vprot, the zero point) are `u64` values that may wrap
//! around: the runqueue's zero point even starts just below 2^64 so that wrapping is exercised
//! from the first tick. Two virtual times are therefore only ever compared through their
//! signed wrapping difference, never as raw integers: `a` is before `b` iff
//! `(a − b) as i64 < 0`. This is exact while the two values are less than 2^63 apart, which
//! holds for any two entities of one runqueue.

/// The signed distance `a − b` between two virtual times.
#[inline]
pub const fn vdiff(a: u64, b: u64) -> i64 {
    a.wrapping_sub(b) as i64
}

/// Whether virtual time `a` is strictly before `b`.
///
/// ```
/// use lagom_policy::vtime::vbefore;
/// assert!(vbefore(u64::MAX - 5, 3)); // 3 lies just past the wrap point
/// assert!(!vbefore(3, u64::MAX - 5));
/// ```
#[inline]
pub const fn vbefore(a: u64, b: u64) -> bool {
    vdiff(a, b) < 0
}

/// The earlier of two virtual times.
#[inline]
pub const fn vmin(a: u64, b: u64) -> u64 {
    if vbefore(a, b) { a } else { b }
}

/// The later of two virtual times.
#[inline]
pub const fn vmax(a: u64, b: u64) -> u64 {
    if vbefore(b, a) { a } else { b }
}

/// `base + delta` for a signed delta, wrapping.
#[inline]
pub const fn vadd(base: u64, delta: i64) -> u64 {
    base.wrapping_add(delta as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_survive_the_wrap() {
        let a = u64::MAX - 10;
        let b = a.wrapping_add(20);
        assert!(vbefore(a, b));
        assert_eq!(vmin(a, b), a);
        assert_eq!(vmax(a, b), b);
        assert_eq!(vdiff(b, a), 20);
        assert_eq!(vadd(a, 20), b);
        assert_eq!(vadd(b, -20), a);
        assert!(!vbefore(a, a));
    }
}
