//! Clocks, in nanoseconds.
//!
//! * [`monotonic_ns`] — `clock_gettime(CLOCK_MONOTONIC)`: the exact clock, for deadlines that
//!   users see (`sleep`, the timers, the idle sleep's timeout).
//! * [`thread_cpu_ns`] — the calling thread's CPU time, for the task clock (`worker/clock.rs`).
//! * [`sched_clock`] — the scheduler's clock, as the kernel's `sched_clock()`: what runqueues
//!   charge run time with (`update_curr`, placement, slices). It must be cheap, since every
//!   runtime call reads it, and monotonic, but its rate may be off by some parts per million.
//!   On x86_64, when the kernel itself trusts the TSC (its clocksource is `tsc`, which it
//!   keeps only while the TSC is invariant — `constant_tsc`, `nonstop_tsc` — and synchronised
//!   across CPUs), it is the TSC scaled to nanoseconds: one `rdtsc` and a multiply, about a
//!   third of a `clock_gettime` through the vDSO. Elsewhere, and until [`calibrate`] has run,
//!   it is [`monotonic_ns`].
//!
//! Calibration (once per process, at the first `Runtime` build): read the TSC and
//! `CLOCK_MONOTONIC` together, spin for 2 ms, read both again; the ratio is the
//! rate (each pair bracketed by TSC reads, keeping the tightest of a few tries, so the error
//! is a few tens of ns over the window: about 10 ppm). The scale is anchored at the first
//! pair, so the two clocks agree there and drift apart only by that error.
//!
//! Under loom both clocks stand still at `LOOM_NOW` (a constant compiled only under loom).

/// Nanoseconds on the monotonic clock (since an arbitrary point, the same for every thread).
#[cfg(not(loom))]
pub(crate) fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `clock_gettime(clock)` in nanoseconds, for a clock every Linux thread has.
#[cfg(not(loom))]
#[inline]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is writable; the callers pass CLOCK_MONOTONIC or the calling thread's
    // CPU clock, which always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds the calling thread has spent on a CPU (`CLOCK_THREAD_CPUTIME_ID`): a system
/// call (no vDSO path), read only by the task clock's stall meter (`worker/clock.rs`).
#[cfg(not(loom))]
pub(crate) fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Under loom a thread's CPU clock stands still at [`LOOM_NOW`], as the other clocks do.
#[cfg(loom)]
pub(crate) fn thread_cpu_ns() -> u64 {
    LOOM_NOW
}

/// Under loom the clock stands still at [`LOOM_NOW`]: loom replays a model many times and
/// needs every execution to take the same decisions, which a real clock would not give.
#[cfg(loom)]
pub(crate) fn monotonic_ns() -> u64 {
    LOOM_NOW
}

/// The scheduler's clock under loom: as [`monotonic_ns`].
#[cfg(loom)]
pub(crate) fn sched_clock() -> u64 {
    LOOM_NOW
}

/// Under loom there is nothing to calibrate.
#[cfg(loom)]
pub(crate) fn calibrate() {}

/// The loom clock: one second, later than every time a model's seams pass explicitly.
#[cfg(loom)]
pub(crate) const LOOM_NOW: u64 = 1_000_000_000;

#[cfg(not(loom))]
pub(crate) use real::{calibrate, sched_clock};

#[cfg(all(not(loom), target_arch = "x86_64"))]
mod real {
    use core::sync::atomic::{AtomicU8, AtomicU64, Ordering};

    use super::monotonic_ns;

    /// How long calibration watches both clocks.
    const CALIBRATION_NS: u64 = 2_000_000;

    /// Not calibrated yet: [`sched_clock`] reads `CLOCK_MONOTONIC`.
    const UNCALIBRATED: u8 = 0;
    /// One thread is calibrating.
    const CALIBRATING: u8 = 1;
    /// The TSC scale is published.
    const TSC: u8 = 2;
    /// The TSC is not trusted here: `CLOCK_MONOTONIC` for good.
    const FALLBACK: u8 = 3;

    /// The scale: `ns = BASE_NS + ((tsc − BASE_TSC) · MULT) >> 32`. Written once, before `MODE`
    /// is set to [`TSC`] with Release; read after an Acquire load of `MODE` that saw it.
    static MODE: AtomicU8 = AtomicU8::new(UNCALIBRATED);
    static BASE_TSC: AtomicU64 = AtomicU64::new(0);
    static BASE_NS: AtomicU64 = AtomicU64::new(0);
    static MULT: AtomicU64 = AtomicU64::new(0);

    fn rdtsc() -> u64 {
        // SAFETY: `rdtsc` exists on every x86_64 CPU and has no memory effects.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    /// The scheduler's clock (module doc).
    #[inline]
    pub(crate) fn sched_clock() -> u64 {
        if MODE.load(Ordering::Acquire) != TSC {
            return monotonic_ns();
        }
        let base = BASE_TSC.load(Ordering::Relaxed);
        let delta = rdtsc().saturating_sub(base);
        let ns = (u128::from(delta) * u128::from(MULT.load(Ordering::Relaxed))) >> 32;
        BASE_NS.load(Ordering::Relaxed) + ns as u64
    }

    /// Whether the kernel's clocksource is the TSC.
    fn kernel_trusts_tsc() -> bool {
        lagom_topology::current_clocksource().is_ok_and(|c| c == "tsc")
    }

    /// A (tsc, ns) pair read as close together as this thread manages: the ns read bracketed
    /// by two TSC reads, the tightest bracket of a few tries, its TSC midpoint.
    fn pair() -> (u64, u64) {
        let mut best = (u64::MAX, 0, 0);
        for _ in 0..8 {
            let a = rdtsc();
            let ns = monotonic_ns();
            let b = rdtsc();
            if b > a && b - a < best.0 {
                best = (b - a, a + (b - a) / 2, ns);
            }
        }
        (best.1, best.2)
    }

    /// Measures the TSC rate once per process (module doc); later calls return at once.
    /// Concurrent callers do not wait: they use `CLOCK_MONOTONIC` until the scale is
    /// published.
    pub(crate) fn calibrate() {
        if MODE
            .compare_exchange(
                UNCALIBRATED,
                CALIBRATING,
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return;
        }
        if !kernel_trusts_tsc() {
            MODE.store(FALLBACK, Ordering::Relaxed);
            return;
        }
        let (t0, n0) = pair();
        while monotonic_ns().saturating_sub(n0) < CALIBRATION_NS {
            core::hint::spin_loop();
        }
        let (t1, n1) = pair();
        if t1 <= t0 || n1 <= n0 {
            MODE.store(FALLBACK, Ordering::Relaxed);
            return;
        }
        let mult = ((u128::from(n1 - n0) << 32) / u128::from(t1 - t0)) as u64;
        BASE_TSC.store(t0, Ordering::Relaxed);
        BASE_NS.store(n0, Ordering::Relaxed);
        MULT.store(mult, Ordering::Relaxed);
        // Release: a reader whose Acquire load sees TSC sees the scale above.
        MODE.store(TSC, Ordering::Release);
    }
}

#[cfg(all(not(loom), not(target_arch = "x86_64")))]
mod real {
    /// The scheduler's clock: `CLOCK_MONOTONIC` on this architecture.
    #[inline]
    pub(crate) fn sched_clock() -> u64 {
        super::monotonic_ns()
    }

    /// Nothing to calibrate on this architecture.
    pub(crate) fn calibrate() {}
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A (sched_clock, monotonic) pair: the monotonic read bracketed by two scheduler-clock
    /// reads, the tightest bracket of 16 tries (a preemption between the reads of a loaded
    /// machine would otherwise skew the pair by a whole time slice).
    fn pair() -> (u64, u64) {
        let mut best = (u64::MAX, 0, 0);
        for _ in 0..16 {
            let a = sched_clock();
            let m = monotonic_ns();
            let b = sched_clock();
            if b - a < best.0 {
                best = (b - a, a + (b - a) / 2, m);
            }
        }
        (best.1, best.2)
    }

    /// After calibration the scheduler's clock never runs backwards on one thread and keeps
    /// the monotonic clock's rate: over 50 ms both advance by the same amount within 0.1 %
    /// (calibration promises about 10 ppm).
    #[test]
    fn sched_clock_tracks_the_monotonic_clock() {
        calibrate();
        let (s0, m0) = pair();
        let mut last = s0;
        while monotonic_ns() - m0 < 50_000_000 {
            let s = sched_clock();
            assert!(s >= last, "sched_clock went back from {last} to {s}");
            last = s;
        }
        let (s1, m1) = pair();
        let (ds, dm) = ((s1 - s0) as f64, (m1 - m0) as f64);
        assert!(
            (ds - dm).abs() < dm * 1e-3,
            "sched_clock advanced {ds} ns while CLOCK_MONOTONIC advanced {dm} ns"
        );
        // Both clocks share their origin: they agree now to well within a millisecond.
        assert!(
            s1.abs_diff(m1) < 1_000_000,
            "sched_clock {s1} vs monotonic {m1}"
        );
    }
}
