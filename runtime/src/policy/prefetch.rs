//! A cache prefetch hint: no effect on results, only on when memory is fetched.

/// Asks the CPU to start loading every cache line of `*x` into the cache. A no-op where no
/// stable prefetch instruction is available.
#[inline(always)]
pub(crate) fn prefetch<X>(x: &X) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p = x as *const X as *const i8;
        let size = size_of::<X>();
        // SAFETY: SSE is part of the x86_64 baseline, so the instruction exists; a prefetch
        // never faults and does not access memory architecturally, whatever the address.
        unsafe {
            let mut off = 0;
            while off < size {
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off));
                off += 64;
            }
            // `*x` need not start on a line: its last byte may lie one line further.
            if size > 1 {
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(size - 1));
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}
