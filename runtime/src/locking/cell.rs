//! `UnsafeCell` with loom's access API.
//!
//! loom's `UnsafeCell` does not hand out raw pointers directly; access goes through
//! [`UnsafeCell::with`] (shared) and [`UnsafeCell::with_mut`] (exclusive) so that loom can
//! record each access and report two that are not ordered by a happens-before edge. Outside
//! loom this is a zero-cost wrapper around [`core::cell::UnsafeCell`] with the same API.

#[cfg(loom)]
pub use loom::cell::UnsafeCell;

/// A [`core::cell::UnsafeCell`] with loom's closure-based access API.
#[cfg(not(loom))]
#[derive(Debug, Default)]
pub struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    /// Wraps `value`.
    pub const fn new(value: T) -> Self {
        UnsafeCell(core::cell::UnsafeCell::new(value))
    }

    /// Calls `f` with a pointer for reading. Dereferencing it is the caller's unsafe
    /// obligation: no writer may run concurrently.
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Calls `f` with a pointer for writing. Dereferencing it is the caller's unsafe
    /// obligation: no other access may run concurrently.
    #[inline(always)]
    pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
