//! Virtual memory: page size, anonymous mappings, protection changes.
//!
//! Task stacks are the only user: they are mapped with `MAP_NORESERVE` (no swap or overcommit
//! reservation is taken for the whole stack, pages are committed lazily on first touch), in
//! batches, and get a guard page at their low end: a guard region (`MADV_GUARD_INSTALL`,
//! Linux 6.13), which keeps a batch one kernel mapping, or a `PROT_NONE` page (a mapping of
//! its own) on older kernels.

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

/// `madvise` advice that installs guard regions (Linux 6.13, `include/uapi/asm-generic/
/// mman-common.h`; not in the `libc` crate yet): pages that fault on any access, as
/// `PROT_NONE` pages do, but kept as markers in the page tables of one mapping instead of a
/// mapping of their own, so a run of guarded stacks is one kernel mapping (VMA), not two per
/// stack.
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// Whether the kernel takes [`MADV_GUARD_INSTALL`]: 0 not known yet, 1 yes, 2 no (then guards
/// are `PROT_NONE` mappings). Relaxed: every thread finds the same answer.
static GUARD_REGIONS: AtomicUsize = AtomicUsize::new(0);

/// Whether guard pages are guard regions (one mapping per batch of stacks) rather than
/// `PROT_NONE` mappings (two mappings per stack); known after the first stack was mapped.
pub(crate) fn guard_regions() -> bool {
    GUARD_REGIONS.load(Ordering::Relaxed) == 1
}

/// Whether the page at `ptr`, just made a guard region, faults on access: the kernel reading
/// it for a `write` to a pipe must fail with `EFAULT`, as it does for any page that faults (a
/// read of our own would kill the process instead). `false` also when the check cannot be
/// made (no pipe), so that the caller falls back to `PROT_NONE`.
///
/// # Safety
/// `ptr` is page-aligned and lies in a mapping the caller owns.
unsafe fn guard_faults(ptr: *mut libc::c_void) -> bool {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return false;
    }
    // SAFETY: `write` only reads one byte at `ptr` (the caller's page) through the kernel,
    // which reports a fault as `EFAULT` rather than raising a signal.
    let n = unsafe { libc::write(fds[1], ptr.cast_const(), 1) };
    let faulted = n == -1 && errno() == libc::EFAULT;
    // SAFETY: closing the two descriptors made above, used by nothing else.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    faulted
}

/// Makes the `guard` bytes at `ptr` (page-aligned, inside a private anonymous mapping of
/// ours) fault on any access: a guard region, or, where the kernel has none, `PROT_NONE`.
///
/// # Safety
/// `[ptr, ptr + guard)` lies in a mapping the caller owns, and nothing uses those bytes.
unsafe fn install_guard(ptr: *mut libc::c_void, guard: usize) -> Result<(), i32> {
    let known = GUARD_REGIONS.load(Ordering::Relaxed);
    if known != 2 {
        // SAFETY: per contract; the advice only changes how the range faults.
        if unsafe { libc::madvise(ptr, guard, MADV_GUARD_INSTALL) } == 0
            // The first time, check that the advice took effect: an emulator may accept it
            // and do nothing (qemu-user returns 0 for advice it does not know), and a stack
            // whose guard does not fault would overflow into its neighbour unnoticed.
            // SAFETY: `ptr` starts the range just advised, owned by the caller (contract).
            && (known == 1 || unsafe { guard_faults(ptr) })
        {
            GUARD_REGIONS.store(1, Ordering::Relaxed);
            return Ok(());
        }
        // EINVAL: a kernel before 6.13 (or a filter that refuses the advice), or advice that
        // was accepted and ignored; fall back to `PROT_NONE` for good.
        GUARD_REGIONS.store(2, Ordering::Relaxed);
    }
    // SAFETY: per contract.
    if unsafe { libc::mprotect(ptr, guard, libc::PROT_NONE) } != 0 {
        return Err(errno());
    }
    Ok(())
}

/// Maps `count` consecutive areas of `len` bytes each in one private anonymous read-write
/// mapping, lazily committed, with the lowest `guard` bytes of each area made inaccessible
/// (guard regions where the kernel has them, else `PROT_NONE`). `len` and `guard` must be
/// multiples of the page size, `guard < len`, `count >= 1`. Returns the start of the whole
/// mapping (the first area's guard), or `errno`. Each area may later be unmapped on its own
/// ([`unmap`]).
pub(crate) fn map_guarded_batch(
    len: usize,
    guard: usize,
    count: usize,
) -> Result<NonNull<u8>, i32> {
    debug_assert!(
        guard < len
            && count >= 1
            && len.is_multiple_of(page_size())
            && guard.is_multiple_of(page_size())
    );
    let Some(total) = len.checked_mul(count) else {
        return Err(ENOMEM);
    };
    // SAFETY: a fresh anonymous mapping at an address the kernel chooses aliases nothing.
    let ptr = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            total,
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
        for i in 0..count {
            // SAFETY: area `i` lies inside the mapping created above, owned by us and unused.
            if let Err(err) = unsafe { install_guard(ptr.cast::<u8>().add(i * len).cast(), guard) }
            {
                // SAFETY: unmapping the mapping we just created; nothing refers to it yet.
                unsafe { libc::munmap(ptr, total) };
                return Err(err);
            }
        }
    }
    // SAFETY: mmap never returns null for a successful non-fixed mapping.
    Ok(unsafe { NonNull::new_unchecked(ptr.cast()) })
}

/// Maps `len` bytes of private anonymous read-write memory, lazily committed, with its lowest
/// `guard` bytes made inaccessible ([`map_guarded_batch`] of one area). Returns the start of
/// the whole mapping (the guard page), or `errno`.
pub(crate) fn map_guarded(len: usize, guard: usize) -> Result<NonNull<u8>, i32> {
    map_guarded_batch(len, guard, 1)
}

/// Gives the pages of `[ptr, ptr + len)` back to the OS (`MADV_DONTNEED`): the range stays
/// mapped, and reads as zeros, committed afresh on first touch.
///
/// # Safety
/// The range lies in a private anonymous mapping of ours whose contents nobody needs.
pub(crate) unsafe fn release(ptr: NonNull<u8>, len: usize) {
    // SAFETY: per contract.
    let rc = unsafe { libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_DONTNEED) };
    debug_assert_eq!(rc, 0, "madvise(MADV_DONTNEED) failed: errno {}", errno());
}

/// Whether every page of `[ptr, ptr + len)` (page-aligned) is mapped: `mincore` fails with
/// `ENOMEM` where one is not. For tests of unmapping; it reads no memory of the range.
#[cfg(test)]
pub(crate) fn all_mapped(ptr: usize, len: usize) -> bool {
    let mut vec = alloc::vec![0u8; len.div_ceil(page_size())];
    // SAFETY: `mincore` only writes one byte per page of the range to `vec`, which has room.
    unsafe { libc::mincore(ptr as *mut libc::c_void, len, vec.as_mut_ptr()) == 0 }
}

/// Unmaps a mapping made by [`map_guarded`], or one area of [`map_guarded_batch`]'s.
///
/// # Safety
/// `ptr`/`len` must be exactly a mapping (or batch area) returned by this module that is not
/// used afterwards.
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
