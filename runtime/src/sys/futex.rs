//! `futex(2)` wait and wake on a 32-bit word, process-private.
//!
//! lagom's waits are `FUTEX_WAIT_BITSET` with a bitset of their own, [`LAGOM_BITSET`]: a
//! `FUTEX_WAKE` wakes them as any wait (it matches every bitset), and whoever reads the call's
//! arguments in `/proc/self/task/TID/syscall` — the stall monitor — can tell a worker thread
//! waiting in one of lagom's own locks from one waiting in the program's (std's waits carry
//! the bitset of all ones, `FUTEX_BITSET_MATCH_ANY`).

use core::sync::atomic::AtomicU32;

/// The bitset of lagom's futex waits (`'lagm'`, module doc).
pub(crate) const LAGOM_BITSET: u32 = 0x6c61_676d;

/// Sleeps while `*word == expected`, for at most `timeout_ns` nanoseconds (`None`: no limit).
///
/// Returns when woken, when the word no longer holds `expected` at the time of the call, on
/// timeout, or spuriously (a signal): callers re-check their condition in a loop.
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: Option<u64>) {
    // FUTEX_WAIT_BITSET's timeout is a deadline on CLOCK_MONOTONIC.
    let ts = timeout_ns.map(|ns| {
        let at = super::time::monotonic_ns().saturating_add(ns);
        libc::timespec {
            tv_sec: (at / 1_000_000_000).min(libc::time_t::MAX as u64) as libc::time_t,
            tv_nsec: (at % 1_000_000_000) as libc::c_long,
        }
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(core::ptr::null(), |ts| ts as *const libc::timespec);
    // SAFETY: `word` is a valid, aligned 32-bit atomic for the duration of the call and
    // `ts_ptr` is null or points to a timespec that outlives it. The kernel only reads both;
    // the second address is unused by this operation. The result (0, EAGAIN, ETIMEDOUT,
    // EINTR) needs no handling: callers re-check.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG,
            expected,
            ts_ptr,
            core::ptr::null::<u32>(),
            // A full 64-bit argument: `syscall` is variadic, and on x86_64 its sixth argument
            // is read from a stack slot of 8 bytes, whose upper half a `u32` leaves as it
            // was; the kernel reads 32 bits, but `/proc/…/syscall` shows all 64.
            u64::from(LAGOM_BITSET),
        );
    }
}

/// Wakes at most `count` threads sleeping in [`futex_wait`] on `word`; returns how many woke.
pub(crate) fn futex_wake(word: &AtomicU32, count: u32) -> usize {
    let count = count.min(i32::MAX as u32) as libc::c_int;
    // SAFETY: `word` is a valid, aligned 32-bit atomic; FUTEX_WAKE only uses its address.
    let woken = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            count,
        )
    };
    woken.max(0) as usize
}
