//! Task stacks: the [`Stack`] contract and the default mmap-backed stack.

use core::ops::Range;
use core::ptr::NonNull;

use crate::Error;
use crate::sys::mem;

/// Default usable size of a task stack: 2 MiB, std's for a thread, so that code that runs on
/// a std thread runs in a task without a stack overflow.
///
/// Chosen by measurement against 256 KiB, 512 KiB and 1 MiB (the book's lab page "std's
/// habits" has the table): pages are committed on first touch, so a task's resident memory
/// does not depend on the size; what the size costs is one page-table page per stack (a
/// 256 KiB stack shares one with seven others), spawn time where tens of thousands of tasks
/// live, and address space (free under the kernel's default overcommit, as `MAP_NORESERVE`;
/// charged in full under strict overcommit, as a std thread's stack is). A program of very
/// many small tasks takes that back with `Builder::stack_size(256 * 1024)`.
pub const DEFAULT_STACK_SIZE: usize = 2 * 1024 * 1024;

/// Smallest usable stack size accepted: 16 KiB (a backtrace or a formatted panic message
/// alone needs several KiB).
pub const MIN_STACK_SIZE: usize = 16 * 1024;

/// Memory a task runs on.
///
/// # Safety
/// An implementation promises that, for as long as the value exists:
/// * `[limit(), base())` is readable and writable, owned by this value alone, and `base()` is
///   16-byte aligned and above `limit()` by at least [`MIN_STACK_SIZE`];
/// * `guard()` is non-empty, ends exactly at `limit()`, and faults on any access (a
///   `PROT_NONE` mapping, or a guard region installed with `MADV_GUARD_INSTALL`), so that
///   running off the end of the stack is caught rather than silently corrupting whatever lies
///   below;
/// * the three methods always return the same values.
pub unsafe trait Stack {
    /// The highest address of the stack (stacks grow down), exclusive.
    fn base(&self) -> NonNull<u8>;
    /// The lowest usable address.
    fn limit(&self) -> NonNull<u8>;
    /// The guard region just below [`limit`](Stack::limit).
    fn guard(&self) -> Range<usize>;
    /// Usable bytes: `base - limit`.
    fn size(&self) -> usize {
        self.base().as_ptr() as usize - self.limit().as_ptr() as usize
    }
}

/// The default stack: an area of an anonymous private mapping made with `MAP_NORESERVE` (its
/// own, or one shared by a batch of stacks, [`DefaultStack::batch`]), whose lowest page is a
/// guard. Pages are committed by the kernel on first touch, so a task that uses 8 KiB of a
/// 256 KiB stack costs 8 KiB of memory. Unmapped on drop (an area of a batch on its own).
///
/// The guard is a guard region (`MADV_GUARD_INSTALL`) where the kernel has them (Linux 6.13
/// and later): a batch of stacks is then one kernel mapping, and the kernel's
/// `vm.max_map_count` (65 530 by default) is no bound on the number of live stacks. On older
/// kernels the guard is a `PROT_NONE` page, a mapping of its own, so each stack takes two and
/// about 32 000 live stacks is the bound unless `vm.max_map_count` is raised
/// ([`Error::StackMap`] says so when the kernel refuses).
#[derive(Debug)]
pub struct DefaultStack {
    /// Start of the mapping (the guard page).
    map: NonNull<u8>,
    /// Length of the whole mapping, guard included.
    len: usize,
}

// SAFETY: the stack is plain memory exclusively owned by this value.
unsafe impl Send for DefaultStack {}

impl DefaultStack {
    /// Maps a stack with `size` usable bytes (rounded up to whole pages) and a guard page.
    ///
    /// # Errors
    /// [`Error::StackTooSmall`] below [`MIN_STACK_SIZE`]; [`Error::StackMap`] if the kernel
    /// refuses the mapping.
    pub fn new(size: usize) -> Result<Self, Error> {
        if size < MIN_STACK_SIZE {
            return Err(Error::StackTooSmall {
                requested: size,
                minimum: MIN_STACK_SIZE,
            });
        }
        let page = mem::page_size();
        let len = match size
            .checked_next_multiple_of(page)
            .and_then(|u| u.checked_add(page))
        {
            Some(len) => len,
            None => {
                return Err(Error::StackMap {
                    size,
                    errno: mem::ENOMEM,
                });
            }
        };
        match mem::map_guarded(len, page) {
            Ok(map) => Ok(DefaultStack { map, len }),
            Err(errno) => Err(Error::StackMap { size, errno }),
        }
    }

    /// A stack of [`DEFAULT_STACK_SIZE`].
    ///
    /// # Errors
    /// As [`DefaultStack::new`].
    pub fn with_default_size() -> Result<Self, Error> {
        Self::new(DEFAULT_STACK_SIZE)
    }

    /// `count` stacks of `size` usable bytes each (rounded up to whole pages), each with its
    /// guard page, carved out of one mapping: one `mmap` and, per stack, the call that
    /// installs its guard, instead of two or three system calls per stack. Each is unmapped
    /// on its own when dropped.
    ///
    /// # Errors
    /// As [`DefaultStack::new`]; nothing is mapped then.
    pub fn batch(size: usize, count: usize) -> Result<alloc::vec::Vec<Self>, Error> {
        if size < MIN_STACK_SIZE {
            return Err(Error::StackTooSmall {
                requested: size,
                minimum: MIN_STACK_SIZE,
            });
        }
        let page = mem::page_size();
        let Some(len) = size
            .checked_next_multiple_of(page)
            .and_then(|u| u.checked_add(page))
        else {
            return Err(Error::StackMap {
                size,
                errno: mem::ENOMEM,
            });
        };
        let count = count.max(1);
        match mem::map_guarded_batch(len, page, count) {
            Ok(map) => Ok((0..count)
                .map(|i| DefaultStack {
                    // SAFETY: area `i` of the batch, inside the mapping.
                    map: unsafe { map.add(i * len) },
                    len,
                })
                .collect()),
            Err(errno) => Err(Error::StackMap { size, errno }),
        }
    }

    /// Unmaps `stacks` with as few `munmap` calls as their addresses allow: sorted by
    /// address, each run of stacks that lie end to end (as the stacks of one batch do) goes in
    /// one call. Dropping them one by one costs a call each, and each call from a process
    /// with other threads running also flushes their TLBs (an IPI per call): unmapping a
    /// pool of 15 000 idle stacks took a third of a second that way. Returns the calls made.
    pub fn unmap_all(stacks: alloc::vec::Vec<Self>) -> usize {
        let mut areas: alloc::vec::Vec<(NonNull<u8>, usize)> = stacks
            .into_iter()
            .map(|s| {
                let area = (s.map, s.len);
                // Its area is unmapped below, with its neighbours'.
                core::mem::forget(s);
                area
            })
            .collect();
        areas.sort_unstable();
        let mut calls = 0;
        let mut i = 0;
        while i < areas.len() {
            let (start, mut len) = areas[i];
            i += 1;
            while i < areas.len() && areas[i].0.as_ptr() as usize == start.as_ptr() as usize + len {
                len += areas[i].1;
                i += 1;
            }
            // SAFETY: `[start, start + len)` is the union of areas that lie end to end, each a
            // whole mapping or batch area owned by a stack given to us by value and forgotten
            // above, so nothing else unmaps or uses it.
            unsafe { mem::unmap(start, len) };
            calls += 1;
        }
        calls
    }

    /// Gives the memory of the usable part back to the OS (`MADV_DONTNEED`) while keeping the
    /// stack mapped: it reads as zeros again and costs nothing until touched. For a stack no
    /// task runs on (a pool's idle stacks, `pool.rs`).
    pub fn release_memory(&mut self) {
        // SAFETY: `[limit, base)` is ours, and `&mut self` with no task on it (a stack in use
        // is owned by its fiber) means nobody needs its contents.
        unsafe { mem::release(self.limit(), self.size()) }
    }
}

// SAFETY: [map + page, map + len) is read-write and ours, [map, map + page) is PROT_NONE
// (map_guarded), the base is page-aligned, and the usable part is at least MIN_STACK_SIZE.
unsafe impl Stack for DefaultStack {
    fn base(&self) -> NonNull<u8> {
        // SAFETY: one past the end of our mapping, not null.
        unsafe { self.map.add(self.len) }
    }

    fn limit(&self) -> NonNull<u8> {
        // SAFETY: inside our mapping.
        unsafe { self.map.add(mem::page_size()) }
    }

    fn guard(&self) -> Range<usize> {
        let start = self.map.as_ptr() as usize;
        start..start + mem::page_size()
    }
}

impl Drop for DefaultStack {
    fn drop(&mut self) {
        // SAFETY: we own the mapping, and nothing runs on a stack once its owner drops it
        // (Fiber leaks the stack of a task suspended mid-run instead of dropping it).
        unsafe { mem::unmap(self.map, self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_small_is_an_error_naming_the_minimum() {
        let err = DefaultStack::new(4096).unwrap_err();
        assert_eq!(
            err,
            Error::StackTooSmall {
                requested: 4096,
                minimum: MIN_STACK_SIZE
            }
        );
        let msg = alloc::format!("{err}");
        assert!(msg.contains("16 KiB"), "{msg}");
    }

    /// Whether every page of the usable part of `s` is mapped (its guard left out:
    /// qemu-user reports a `PROT_NONE` page as unmapped).
    fn usable_mapped(s: &DefaultStack) -> bool {
        let limit = s.limit().as_ptr() as usize;
        mem::all_mapped(limit, s.base().as_ptr() as usize - limit)
    }

    /// The calls `unmap_all` makes. (That the ranges are unmapped is `tests/stack_unmap.rs`'s:
    /// here, other tests' threads may map memory into a hole as soon as it opens.)
    #[test]
    fn unmap_all_unmaps_each_run_of_neighbours_in_one_call() {
        let mut batch = DefaultStack::batch(MIN_STACK_SIZE, 8).unwrap();
        assert!(batch.iter().all(usable_mapped));
        // Out of order, with a gap: areas 0..3 and 4..8 are two runs.
        let kept = batch.remove(3);
        batch.reverse();
        assert_eq!(DefaultStack::unmap_all(batch), 2);
        assert!(usable_mapped(&kept), "a stack not given stays mapped");
        // SAFETY: [limit, base) of the kept stack is ours and writable.
        unsafe { kept.limit().as_ptr().write(1) };
        assert_eq!(DefaultStack::unmap_all(alloc::vec![kept]), 1);
        assert_eq!(DefaultStack::unmap_all(alloc::vec::Vec::new()), 0);
    }

    #[test]
    fn layout_rounds_to_pages_and_guard_is_below_limit() {
        let s = DefaultStack::new(MIN_STACK_SIZE + 1).unwrap();
        let page = mem::page_size();
        assert_eq!(s.size(), MIN_STACK_SIZE + page);
        assert_eq!(s.guard().end, s.limit().as_ptr() as usize);
        assert_eq!(s.guard().len(), page);
        assert_eq!(s.base().as_ptr() as usize % 16, 0);
        // The usable part is writable end to end.
        // SAFETY: [limit, base) is ours and writable.
        unsafe {
            s.limit().as_ptr().write(1);
            s.base().as_ptr().sub(1).write(2);
        }
    }
}
