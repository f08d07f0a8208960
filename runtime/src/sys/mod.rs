//! The only place that calls `libc`. Each file wraps one family of system calls in small safe
//! or narrowly `unsafe` functions; the layers above never name `libc`.

// Only the loom coverage probes write files.
#[cfg(loom)]
pub(crate) mod fs;
// Under loom, `sync::futex` stands in for the real futex.
#[cfg(not(loom))]
pub(crate) mod futex;
pub(crate) mod mem;
pub(crate) mod signal;
pub(crate) mod thread;
pub(crate) mod time;
