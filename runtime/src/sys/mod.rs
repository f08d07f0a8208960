//! The only callers of `libc`: every OS service the crate uses goes through a function here.

pub(crate) mod affinity;
pub(crate) mod fs;
// Under loom, `sync::futex` stands in for the real futex.
#[cfg(not(loom))]
pub(crate) mod futex;
