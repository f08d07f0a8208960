//! The per-worker stack pool.
//!
//! One pool per worker, used only by that worker (so it is a plain struct: no atomics, no
//! locks). Spawning takes a stack from the pool and finishing a task gives it back.
//!
//! * **Grows to the high-water mark.** The pool keeps every stack of its size that comes back
//!   (from a task that ended on its worker, whoever spawned it), so it holds as many stacks as
//!   were ever out at once on its worker — the high-water mark — and a later burst of that
//!   size maps nothing and a task's end unmaps nothing (past a fixed pool of 64
//!   every spawn was an `mmap` and an `mprotect` and every end a `munmap`).
//! * **Batched mappings.** When it is empty it maps a batch of stacks at once
//!   ([`DefaultStack::batch`]: one `mmap`, one guard per stack), the batch growing with the
//!   pool — half the stacks it has mapped so far, at least 1 and at most [`MAX_BATCH`] — so a
//!   small program maps little and a spawn storm few times. With the kernel's guard regions
//!   a batch is one kernel mapping, so the pool does not run into `vm.max_map_count`.
//! * **Prefetches the next stack.** [`get`](StackPool::get) hints the CPU to fetch the top
//!   lines of the stack the following `get` will hand out, where the new fiber writes its
//!   closure and first frame: in a burst of spawns from a deep pool every stack is cold (not
//!   in the caches, its page not in the TLB), and the miss then overlaps the rest of one
//!   spawn instead of stalling the next (`sleepers --phases` shows it on 10 000 spawns from
//!   one task: `docs/src/lab/mechanism.md`).
//! * **Returns memory when idle.** [`trim`](StackPool::trim), which the worker calls once it
//!   has been idle for a while (`sched/idle.rs`: [`TRIM_AFTER`]), unmaps the idle stacks
//!   beyond the pool's `capacity` (the floor it keeps however long it idles) and gives the
//!   memory of the ones it keeps back to the OS with `madvise(MADV_DONTNEED)`: they stay
//!   mapped, read as zeros and cost nothing until touched again.
//!
//! Dropping the pool (worker shutdown) unmaps every stack it holds, and a trim the ones beyond
//! its capacity, each run of neighbouring stacks (a batch) in one `munmap`
//! ([`DefaultStack::unmap_all`]): one call per stack, each flushing the other threads' TLBs,
//! made dropping a runtime whose pools held 15 000 idle stacks take a third of a second.

use alloc::vec::Vec;
use core::time::Duration;

use super::stack::{DefaultStack, Stack};
use super::valgrind;
use crate::Error;

/// The most stacks one batch maps.
pub const MAX_BATCH: usize = 64;

/// Cache lines at the top of the next stack that [`StackPool::get`] prefetches: a new fiber's
/// closure, its bookkeeping and its first frame (`fiber.rs`) take a few hundred bytes.
const PREFETCH_LINES: usize = 4;

/// How long a worker stays idle before its pool gives memory back ([`StackPool::trim`]).
pub const TRIM_AFTER: Duration = Duration::from_secs(1);

/// A cache of [`DefaultStack`]s of one size (module doc).
#[derive(Debug)]
pub struct StackPool {
    size: usize,
    /// `size` rounded up to whole pages: the usable size of the stacks this pool maps.
    rounded: usize,
    capacity: usize,
    free: Vec<DefaultStack>,
    /// Stacks mapped since the pool was made.
    mapped: u64,
    /// Batches mapped (`mmap` calls) since the pool was made.
    batches: u64,
    /// Idle stacks unmapped by [`trim`](Self::trim) since the pool was made.
    trimmed: u64,
    /// A stack came back (its pages may be touched) since the last trim.
    dirty: bool,
}

impl StackPool {
    /// A pool of stacks with `size` usable bytes, keeping at least `capacity` idle ones when
    /// trimmed (and, between trims, every one that comes back).
    ///
    /// # Errors
    /// [`Error::StackTooSmall`] if `size` is below [`super::MIN_STACK_SIZE`].
    pub fn new(size: usize, capacity: usize) -> Result<Self, Error> {
        if size < super::MIN_STACK_SIZE {
            return Err(Error::StackTooSmall {
                requested: size,
                minimum: super::MIN_STACK_SIZE,
            });
        }
        let page = crate::sys::mem::page_size();
        let rounded = size.div_ceil(page) * page;
        Ok(StackPool {
            size,
            rounded,
            capacity,
            free: Vec::with_capacity(capacity),
            mapped: 0,
            batches: 0,
            trimmed: 0,
            dirty: false,
        })
    }

    /// The usable size of the stacks this pool hands out (as requested, before rounding).
    pub fn stack_size(&self) -> usize {
        self.size
    }

    /// A stack: an idle one if any, else one of a freshly mapped batch (module doc).
    ///
    /// # Errors
    /// [`Error::StackMap`] if a new batch is needed and the kernel refuses it.
    #[inline]
    pub fn get(&mut self) -> Result<DefaultStack, Error> {
        match self.free.pop() {
            Some(stack) => {
                self.prefetch_next();
                // Its bytes are its last task's: the new owner writes before it reads.
                valgrind::make_undefined(stack.limit().as_ptr() as usize, stack.size());
                Ok(stack)
            }
            None => self.map_batch(),
        }
    }

    /// Hints the CPU to fetch the top [`PREFETCH_LINES`] cache lines of the stack the next
    /// [`get`](Self::get) will hand out, where a new fiber writes its closure and first frame.
    /// A burst of spawns takes stacks last touched long ago (a pool as deep as 10 000 live
    /// tasks is far larger than the caches and the TLB): each would stall on that write;
    /// fetched one spawn early, the miss overlaps the rest of the spawn instead. No effect on
    /// results: a prefetch never faults (a page given back to the OS is simply not fetched).
    #[inline(always)]
    fn prefetch_next(&self) {
        if let Some(next) = self.free.last() {
            lagom_policy::hint::prefetch_lines_below(
                next.base().as_ptr().cast_const(),
                PREFETCH_LINES,
            );
        }
    }

    #[cold]
    #[inline(never)]
    fn map_batch(&mut self) -> Result<DefaultStack, Error> {
        let count = usize::try_from(self.mapped / 2)
            .unwrap_or(MAX_BATCH)
            .clamp(1, MAX_BATCH);
        // A batch the kernel refuses may still fit as a single stack.
        let mut batch = match DefaultStack::batch(self.size, count) {
            Ok(b) => b,
            Err(_) if count > 1 => DefaultStack::batch(self.size, 1)?,
            Err(e) => return Err(e),
        };
        self.batches += 1;
        self.mapped += batch.len() as u64;
        let stack = batch.pop().expect("a batch holds at least one stack");
        self.free.append(&mut batch);
        Ok(stack)
    }

    /// Returns a stack that no task runs on any more. It is kept if it has the pool's size
    /// (module doc), else unmapped.
    #[inline]
    pub fn put(&mut self, stack: DefaultStack) {
        if stack.size() == self.rounded {
            // Idle, no task's: memcheck reports any access until `get` hands it out again
            // (a pointer that outlived its task's stack), a no-op without the feature.
            valgrind::make_noaccess(stack.limit().as_ptr() as usize, stack.size());
            self.free.push(stack);
            self.dirty = true;
        }
    }

    /// Whether [`trim`](Self::trim) has anything to do: idle stacks beyond the capacity, or
    /// stacks that came back since the last trim (their touched pages).
    pub fn needs_trim(&self) -> bool {
        self.dirty || self.free.len() > self.capacity
    }

    /// Gives memory back (module doc): unmaps the idle stacks beyond the capacity and releases
    /// the pages of the others (`MADV_DONTNEED`). Returns how many stacks it unmapped.
    pub fn trim(&mut self) -> usize {
        let beyond = self.free.len().saturating_sub(self.capacity);
        // The most recently returned (warmest) stacks are at the end: unmap the older ones.
        DefaultStack::unmap_all(self.free.drain(..beyond).collect());
        self.trimmed += beyond as u64;
        if self.dirty {
            for s in &mut self.free {
                s.release_memory();
            }
            self.dirty = false;
        }
        beyond
    }

    /// Idle stacks held now.
    pub fn idle(&self) -> usize {
        self.free.len()
    }

    /// Stacks this pool has mapped since it was made.
    pub fn mmaps(&self) -> u64 {
        self.mapped
    }

    /// Batches this pool has mapped (its `mmap` calls) since it was made.
    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// Idle stacks [`trim`](Self::trim) has unmapped since the pool was made.
    pub fn trimmed(&self) -> u64 {
        self.trimmed
    }
}

impl Drop for StackPool {
    /// Unmaps the idle stacks, a run of neighbours per call ([`DefaultStack::unmap_all`]).
    fn drop(&mut self) {
        DefaultStack::unmap_all(core::mem::take(&mut self.free));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_what_comes_back_and_trims_to_its_capacity() {
        let min = super::super::MIN_STACK_SIZE;
        let mut pool = StackPool::new(min, 2).unwrap();
        let a = pool.get().unwrap();
        let b = pool.get().unwrap();
        let c = pool.get().unwrap();
        assert_eq!(pool.mmaps(), 3);
        pool.put(a);
        pool.put(b);
        pool.put(c); // over capacity: kept until a trim (the high-water mark)
        assert_eq!(pool.idle(), 3);
        pool.put(DefaultStack::new(2 * min).unwrap()); // other size: unmapped
        assert_eq!(pool.idle(), 3);
        let again: Vec<_> = (0..3).map(|_| pool.get().unwrap()).collect();
        assert_eq!(pool.mmaps(), 3, "recycled stacks must not be mapped again");
        for s in again {
            pool.put(s);
        }
        assert!(pool.needs_trim());
        assert_eq!(pool.trim(), 1, "trimmed to its capacity");
        assert_eq!((pool.idle(), pool.trimmed()), (2, 1));
        assert!(!pool.needs_trim());
        // A released stack reads as zeros and works again.
        let mut s = pool.get().unwrap();
        // SAFETY: [limit, base) is ours and writable.
        unsafe {
            assert_eq!(s.limit().as_ptr().read(), 0);
            s.limit().as_ptr().write(7);
        }
        s.release_memory();
        // SAFETY: as above.
        let after = unsafe { s.limit().as_ptr().read() };
        assert_eq!(after, 0, "released pages read as zero");
    }

    #[test]
    fn batches_grow_with_the_pool() {
        let mut pool = StackPool::new(super::super::MIN_STACK_SIZE, 0).unwrap();
        let held: Vec<_> = (0..1000).map(|_| pool.get().unwrap()).collect();
        assert!(pool.mmaps() >= 1000);
        assert!(
            pool.batches() < 40,
            "{} batches for 1000 stacks",
            pool.batches()
        );
        drop(held);
    }
}
