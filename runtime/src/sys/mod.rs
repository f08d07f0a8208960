//! The only place that calls libc. Each file wraps one family of system calls in small safe
//! or narrowly `unsafe` functions; the layers above never name `libc`.

pub(crate) mod mem;
pub(crate) mod signal;
