//! The one error type of the crate.
//!
//! Every message says what was wrong and what to do about it: an unknown feature name lists
//! the valid ones, a CPU outside the allowed set names the allowed ones, an unreadable sysfs
//! file names its path.

use alloc::string::String;
use core::fmt;

/// Everything that can go wrong when configuring or starting lagom.
///
/// Bad input is reported through this type; it never panics the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A feature string named a feature that does not exist.
    UnknownFeature {
        /// The name as given (without any `NO_` prefix).
        name: String,
        /// Every valid feature name, in the kernel's order.
        valid: &'static [&'static str],
    },
    /// A task stack size below the minimum was requested.
    StackTooSmall {
        /// The size asked for, in bytes.
        requested: usize,
        /// The smallest size accepted, in bytes.
        minimum: usize,
    },
    /// The kernel refused to map a task stack.
    StackMap {
        /// The usable size asked for, in bytes.
        size: usize,
        /// The `errno` of the failed `mmap`/`mprotect`.
        errno: i32,
    },
    /// Setting up stack-overflow reporting (signal handler or alternate signal stack) failed.
    SignalSetup {
        /// The `errno` of the failed call.
        errno: i32,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownFeature { name, valid } => {
                write!(f, "unknown scheduler feature `{name}`; valid names are ")?;
                for (i, v) in valid.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(v)?;
                }
                f.write_str(" (prefix a name with NO_ to turn it off)")
            }
            Error::StackTooSmall { requested, minimum } => write!(
                f,
                "task stack size {requested} bytes is below the minimum of {} KiB; \
                 ask for at least {minimum} bytes",
                minimum / 1024
            ),
            Error::StackMap { size, errno } => write!(
                f,
                "could not map a task stack of {} KiB: errno {errno} ({}); lower the stack \
                 size or the number of live tasks, or raise vm.max_map_count (each stack \
                 takes two mappings)",
                size / 1024,
                crate::sys::mem::errno_name(*errno)
            ),
            Error::SignalSetup { errno } => write!(
                f,
                "could not set up stack-overflow reporting (sigaction/sigaltstack/mmap): \
                 errno {errno} ({}); check the signal mask and memory limits of the thread",
                crate::sys::mem::errno_name(*errno)
            ),
        }
    }
}

impl core::error::Error for Error {}
