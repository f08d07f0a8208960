//! A cache prefetch hint: no effect on results, only on when memory is fetched.

/// Asks the CPU to start loading `*x` (all cache lines of it, up to 128 bytes) into the cache.
/// A no-op where no stable prefetch instruction is available.
#[inline(always)]
pub(crate) fn prefetch<X>(x: &X) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p = x as *const X as *const i8;
        // SAFETY: SSE is part of the x86_64 baseline, so the instruction exists; a prefetch
        // never faults and does not access memory architecturally, whatever the address.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p);
            if size_of::<X>() > 64 {
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64));
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}
