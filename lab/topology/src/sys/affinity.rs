//! The calling process's CPU affinity mask (`sched_getaffinity`).

use alloc::vec;
use alloc::vec::Vec;

use super::fs::OsError;

/// The CPUs the calling thread may run on, as 64-bit words (bit `n % 64` of word `n / 64` is
/// CPU `n`).
///
/// The kernel rejects a buffer smaller than its own mask (`EINVAL`), so the buffer doubles
/// from 1024 bits until the call succeeds or reaches 2^20 bits.
pub(crate) fn process_affinity() -> Result<Vec<u64>, OsError> {
    let mut words = 16usize;
    loop {
        let mut buf: Vec<u64> = vec![0; words];
        let bytes = words * 8;
        // SAFETY: `buf` is writable for `bytes` bytes; the kernel writes at most that many.
        // pid 0 means the calling thread.
        let rc = unsafe { libc::sched_getaffinity(0, bytes, buf.as_mut_ptr().cast()) };
        if rc == 0 {
            return Ok(buf);
        }
        let err = OsError::last();
        if err.0 != libc::EINVAL || words >= (1 << 14) {
            return Err(err);
        }
        words *= 2;
    }
}
