//! `lagom::time`: [`Instant`], a point on the monotonic clock, for deadlines
//! ([`crate::task::sleep_until`], the `*_timeout` waits of [`crate::sync`]).
//!
//! The crate is `no_std`, where `std::time::Instant` does not exist, so it brings its own: a
//! count of nanoseconds on `CLOCK_MONOTONIC` (the clock `std::time::Instant` reads on Linux
//! too, and the one the workers' timers fire on), since an arbitrary point the same for
//! every thread of the process. With the `std` feature a `std::time::Instant` converts into
//! it (`From`), so code that computes deadlines with std's type passes them on unchanged.

use core::ops::{Add, AddAssign, Sub, SubAssign};
use core::time::Duration;

/// A point on the monotonic clock (module doc). Ordered, copyable, 8 bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Instant {
    ns: u64,
}

/// `d` in nanoseconds, saturating at `u64::MAX` (584 years).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Instant {
    /// Now.
    pub fn now() -> Instant {
        Instant {
            ns: crate::sys::time::monotonic_ns(),
        }
    }

    /// The time from `earlier` to `self`; zero if `earlier` is later (as std's since 1.60).
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.ns.saturating_sub(earlier.ns))
    }

    /// As [`duration_since`](Self::duration_since) (which saturates too); std's name.
    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        self.duration_since(earlier)
    }

    /// The time from `earlier` to `self`, or `None` if `earlier` is later.
    pub fn checked_duration_since(&self, earlier: Instant) -> Option<Duration> {
        self.ns.checked_sub(earlier.ns).map(Duration::from_nanos)
    }

    /// The time since `self`.
    pub fn elapsed(&self) -> Duration {
        Instant::now().duration_since(*self)
    }

    /// `self + d`, or `None` past the clock's range.
    pub fn checked_add(&self, d: Duration) -> Option<Instant> {
        let d = u64::try_from(d.as_nanos()).ok()?;
        self.ns.checked_add(d).map(|ns| Instant { ns })
    }

    /// `self - d`, or `None` before the clock's origin.
    pub fn checked_sub(&self, d: Duration) -> Option<Instant> {
        let d = u64::try_from(d.as_nanos()).ok()?;
        self.ns.checked_sub(d).map(|ns| Instant { ns })
    }

    /// `self + d`, at most the clock's last instant (a deadline that never comes).
    pub(crate) fn add_saturating(self, d: Duration) -> Instant {
        Instant {
            ns: self.ns.saturating_add(nanos(d)),
        }
    }

    /// The nanoseconds on the monotonic clock (`sys::time::monotonic_ns`'s unit).
    pub(crate) fn as_nanos(self) -> u64 {
        self.ns
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// # Panics
    /// Past the clock's range (as std's).
    fn add(self, d: Duration) -> Instant {
        self.checked_add(d)
            .expect("overflow when adding a Duration to a lagom::time::Instant")
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    /// # Panics
    /// Before the clock's origin (as std's).
    fn sub(self, d: Duration) -> Instant {
        self.checked_sub(d)
            .expect("overflow when subtracting a Duration from a lagom::time::Instant")
    }
}

impl SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, d: Duration) {
        *self = *self - d;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating, as [`Instant::duration_since`].
    fn sub(self, earlier: Instant) -> Duration {
        self.duration_since(earlier)
    }
}

#[cfg(feature = "std")]
impl From<std::time::Instant> for Instant {
    /// The same point on the monotonic clock, found through the distance from
    /// `std::time::Instant::now()` to it (two clock reads: exact to about their gap).
    fn from(t: std::time::Instant) -> Instant {
        let (std_now, now) = (std::time::Instant::now(), Instant::now());
        match t.checked_duration_since(std_now) {
            Some(ahead) => now.add_saturating(ahead),
            None => Instant {
                ns: now.ns.saturating_sub(nanos(std_now - t)),
            },
        }
    }
}
