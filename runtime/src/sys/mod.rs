//! The only module that calls `libc`: every system call lagom makes goes through here.

// Under loom, `sync::futex` stands in for the real futex.
#[cfg(not(loom))]
pub(crate) mod futex;
