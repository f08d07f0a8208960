//! The only place that calls `libc`. Each file wraps one family of system calls in small safe
//! or narrowly `unsafe` functions; the layers above never name `libc`.

// Only the loom coverage probes write files.
#[cfg(loom)]
pub(crate) mod fs;
// Under loom, `sync::futex` stands in for the real futex.
#[cfg(not(loom))]
pub(crate) mod futex;
// The C library's sleep functions behind the `interpose` feature's hooks.
#[cfg(feature = "interpose")]
pub(crate) mod interpose;
pub(crate) mod mem;
// The stall monitor's look at its workers' threads (not under loom: the models never start it).
#[cfg(not(loom))]
pub(crate) mod proc;
pub(crate) mod sched;
pub(crate) mod signal;
pub(crate) mod thread;
pub(crate) mod time;
// Under loom no worker thread runs, so none has a tick timer.
#[cfg(not(loom))]
pub(crate) mod timer;
