//! Atomics and fences: `core::sync::atomic` normally, `loom::sync::atomic` under `cfg(loom)`.
//!
//! Only the types the runtime uses are re-exported; add one here before using it elsewhere,
//! so that nothing bypasses the shim.

#[cfg(not(loom))]
pub use core::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

#[cfg(loom)]
pub use loom::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
