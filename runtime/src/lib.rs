//! # lagom
//!
//! Green threads ("tasks") on pinned worker OS threads, scheduled by the Linux kernel's EEVDF
//! fair scheduler and wakeup path rebuilt in userspace.
//!
//! The crate is built in layers (see `DESIGN.md` in the repository); arrows point down only:
//!
//! * `policy` — the pure EEVDF runqueue and placement decisions: no atomics, no OS calls,
//!   no clock reads (time is an argument). The threaded runtime and the simulator both call it.
//! * `arch` — the green-thread mechanism: context switch (x86_64, aarch64) with unwind info,
//!   task stacks (mmap + guard page, per-worker pool), stack-overflow reports, the `Fiber`.
//! * `sys` — the only caller of libc (memory mappings, signals).
//!
//! The crate is `#![no_std]` + `alloc`; the `std` feature (on by default) adds conveniences
//! only. All OS access goes through `libc` in `sys/`.
#![no_std]
#![deny(missing_docs)]

extern crate alloc;
#[cfg(any(feature = "std", test))]
extern crate std;

pub mod arch;
mod error;
mod join_error;
mod sys;

pub use error::Error;
pub use join_error::JoinError;
