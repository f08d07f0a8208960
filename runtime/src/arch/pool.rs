//! The per-worker stack pool.
//!
//! One pool per worker, used only by that worker (so it is a plain struct: no atomics, no
//! locks). Spawning takes a stack from the pool and finishing a task gives it back; only when
//! the pool is empty does spawning map a new stack. The pool keeps at most `capacity` idle
//! stacks and unmaps any stack returned beyond that, so its memory is bounded; dropping the
//! pool (worker shutdown) unmaps every stack it holds.

use alloc::vec::Vec;

use super::stack::{DefaultStack, Stack};
use crate::Error;

/// A bounded cache of [`DefaultStack`]s of one size.
#[derive(Debug)]
pub struct StackPool {
    size: usize,
    /// `size` rounded up to whole pages: the usable size of the stacks this pool maps.
    rounded: usize,
    capacity: usize,
    free: Vec<DefaultStack>,
    mmaps: u64,
}

impl StackPool {
    /// A pool of stacks with `size` usable bytes, keeping at most `capacity` idle ones.
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
            mmaps: 0,
        })
    }

    /// The usable size of the stacks this pool hands out (as requested, before rounding).
    pub fn stack_size(&self) -> usize {
        self.size
    }

    /// A stack: a recycled one if any is idle, else a freshly mapped one.
    ///
    /// # Errors
    /// [`Error::StackMap`] if a new mapping is needed and the kernel refuses it.
    pub fn get(&mut self) -> Result<DefaultStack, Error> {
        if let Some(stack) = self.free.pop() {
            return Ok(stack);
        }
        let stack = DefaultStack::new(self.size)?;
        self.mmaps += 1;
        Ok(stack)
    }

    /// Returns a stack that no task runs on any more. It is kept if the pool has room and the
    /// stack has the pool's size, else unmapped.
    pub fn put(&mut self, stack: DefaultStack) {
        if self.free.len() < self.capacity && stack.size() == self.rounded {
            self.free.push(stack);
        }
    }

    /// Idle stacks held now.
    pub fn idle(&self) -> usize {
        self.free.len()
    }

    /// Stacks this pool has mapped since it was made.
    pub fn mmaps(&self) -> u64 {
        self.mmaps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycles_and_bounds_idle_stacks() {
        let mut pool = StackPool::new(super::super::MIN_STACK_SIZE, 2).unwrap();
        let a = pool.get().unwrap();
        let b = pool.get().unwrap();
        let c = pool.get().unwrap();
        assert_eq!(pool.mmaps(), 3);
        pool.put(a);
        pool.put(b);
        pool.put(c); // over capacity: unmapped
        assert_eq!(pool.idle(), 2);
        pool.put(DefaultStack::new(2 * super::super::MIN_STACK_SIZE).unwrap()); // other size
        assert_eq!(pool.idle(), 2);
        let again = pool.get().unwrap();
        let _ = pool.get().unwrap();
        assert_eq!(pool.mmaps(), 3, "recycled stacks must not be mapped again");
        assert!(pool.get().is_ok());
        assert_eq!(pool.mmaps(), 4);
        drop(again);
    }
}
