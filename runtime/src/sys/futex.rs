//! `futex(2)` wait and wake on a 32-bit word, process-private.

use core::sync::atomic::AtomicU32;

/// Sleeps while `*word == expected`, for at most `timeout_ns` nanoseconds (`None`: no limit).
///
/// Returns when woken, when the word no longer holds `expected` at the time of the call, on
/// timeout, or spuriously (a signal): callers re-check their condition in a loop.
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: Option<u64>) {
    let ts = timeout_ns.map(|ns| libc::timespec {
        tv_sec: (ns / 1_000_000_000).min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(core::ptr::null(), |ts| ts as *const libc::timespec);
    // SAFETY: `word` is a valid, aligned 32-bit atomic for the duration of the call and
    // `ts_ptr` is null or points to a timespec that outlives it. The kernel only reads both.
    // The result (0, EAGAIN, ETIMEDOUT, EINTR) needs no handling: callers re-check.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            ts_ptr,
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
