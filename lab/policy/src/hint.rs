//! Cache prefetch hints: no effect on results, only on when memory is fetched. Pure (no
//! memory is read: an address is never dereferenced), so the policy's tree uses them, and
//! so do the drivers (lagom's stack pool and schedule path), from here: one definition.

/// Asks the CPU to start loading the cache line that holds the byte at `p` (any address:
/// it is never dereferenced). A no-op where no stable prefetch instruction is available.
#[inline(always)]
pub fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: SSE is part of the x86_64 baseline, so the instruction exists; a prefetch
        // never faults and does not access memory architecturally, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// [`prefetch_line`] for the `lines` cache lines below `top` (a stack's top: it grows
/// down), `top` itself excluded.
#[inline(always)]
pub fn prefetch_lines_below(top: *const u8, lines: usize) {
    for k in 1..=lines {
        prefetch_line(top.wrapping_sub(64 * k));
    }
}

/// Asks the CPU to start loading every cache line of `*x` into the cache.
#[inline(always)]
pub fn prefetch<X>(x: &X) {
    let p = (x as *const X).cast::<u8>();
    let size = size_of::<X>();
    let mut off = 0;
    while off < size {
        prefetch_line(p.wrapping_add(off));
        off += 64;
    }
    // `*x` need not start on a line: its last byte may lie one line further.
    if size > 1 {
        prefetch_line(p.wrapping_add(size - 1));
    }
}
