//! Virtual memory: page size, anonymous mappings, protection changes.
//!
//! Task stacks are the only user: they are mapped with `MAP_NORESERVE` (no swap or overcommit
//! reservation is taken for the whole stack, pages are committed lazily on first touch) and get
//! a `PROT_NONE` guard page at their low end.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};

/// `errno` for "out of memory", for callers that report it without calling the kernel.
pub(crate) const ENOMEM: i32 = libc::ENOMEM;

/// Cached page size; 0 until the first call to [`page_size`].
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

/// The system page size in bytes.
pub(crate) fn page_size() -> usize {
    let cached = PAGE_SIZE.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    // SAFETY: sysconf has no memory-safety preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let size = if size > 0 { size as usize } else { 4096 };
    // Relaxed: every thread computes the same value, so a race only repeats the call.
    PAGE_SIZE.store(size, Ordering::Relaxed);
    size
}

/// The calling thread's `errno`.
pub(crate) fn errno() -> i32 {
    // SAFETY: __errno_location returns a valid pointer to the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Maps `len` bytes of private anonymous read-write memory, lazily committed, with its lowest
/// `guard` bytes made inaccessible. `len` and `guard` must be multiples of the page size and
/// `guard < len`. Returns the start of the whole mapping (the guard page), or `errno`.
pub(crate) fn map_guarded(len: usize, guard: usize) -> Result<NonNull<u8>, i32> {
    debug_assert!(
        guard < len && len.is_multiple_of(page_size()) && guard.is_multiple_of(page_size())
    );
    // SAFETY: a fresh anonymous mapping at an address the kernel chooses aliases nothing.
    let ptr = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(errno());
    }
    if guard > 0 {
        // SAFETY: [ptr, ptr + guard) lies inside the mapping created above, owned by us.
        if unsafe { libc::mprotect(ptr, guard, libc::PROT_NONE) } != 0 {
            let err = errno();
            // SAFETY: unmapping the mapping we just created; nothing refers to it yet.
            unsafe { libc::munmap(ptr, len) };
            return Err(err);
        }
    }
    // SAFETY: mmap never returns null for a successful non-fixed mapping.
    Ok(unsafe { NonNull::new_unchecked(ptr.cast()) })
}

/// Unmaps a mapping made by [`map_guarded`].
///
/// # Safety
/// `ptr`/`len` must be exactly a mapping returned by this module that is not used afterwards.
pub(crate) unsafe fn unmap(ptr: NonNull<u8>, len: usize) {
    // SAFETY: the caller hands over a mapping it owns and no longer uses.
    let rc = unsafe { libc::munmap(ptr.as_ptr().cast(), len) };
    debug_assert_eq!(rc, 0, "munmap failed: errno {}", errno());
}

/// Writes the short description of an `errno` value (for error messages).
pub(crate) fn errno_name(err: i32) -> &'static str {
    match err {
        libc::ENOMEM => "ENOMEM (out of memory or too many mappings)",
        libc::EINVAL => "EINVAL (invalid argument)",
        libc::EAGAIN => "EAGAIN (resource temporarily unavailable)",
        libc::EPERM => "EPERM (operation not permitted)",
        _ => "see errno(3)",
    }
}
