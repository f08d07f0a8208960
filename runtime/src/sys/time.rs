//! The monotonic clock (`clock_gettime(CLOCK_MONOTONIC)`), in nanoseconds.

/// Nanoseconds on the monotonic clock (since an arbitrary point, the same for every thread).
#[cfg(not(loom))]
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is writable; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Under loom the clock stands still at [`LOOM_NOW`]: loom replays a model many times and
/// needs every execution to take the same decisions, which a real clock would not give.
#[cfg(loom)]
pub(crate) fn monotonic_ns() -> u64 {
    LOOM_NOW
}

/// The loom clock: one second, later than every time a model's seams pass explicitly.
#[cfg(loom)]
pub(crate) const LOOM_NOW: u64 = 1_000_000_000;
