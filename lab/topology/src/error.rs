//! [`TopologyError`]: what went wrong reading a machine's topology.
//!
//! Every message says what was wrong and what to do about it: an unreadable sysfs file names
//! its path and the OS error, a malformed one its content.

use alloc::string::String;
use core::fmt;

/// Everything that can go wrong when reading a topology.
///
/// A missing optional file is no error (the reader falls back and records a
/// [`Fallback`](crate::Fallback)); a malformed one, or a machine-wide file that cannot be
/// read, is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TopologyError {
    /// A file the topology reader needs could not be read.
    Unreadable {
        /// The full path of the file or directory.
        path: String,
        /// The OS error, as text.
        os_error: String,
    },
    /// A sysfs root lacks what every Linux sysfs holds.
    Missing {
        /// The path that was looked at.
        path: String,
        /// What was expected there.
        expected: &'static str,
    },
    /// A CPU list or CPU mask is malformed.
    MalformedCpuList {
        /// The file it came from (or a description of the argument).
        path: String,
        /// The content as read, with trailing newlines and NULs removed.
        content: String,
    },
    /// A file that should hold a number holds something else.
    MalformedNumber {
        /// The file it came from.
        path: String,
        /// The content as read, with trailing newlines and NULs removed.
        content: String,
    },
    /// A cache's `shared_cpu_list` / `shared_cpu_map` names CPUs that do not exist.
    CacheSpansUnknownCpus {
        /// The file naming them.
        path: String,
        /// The CPUs it names that have no `cpuN` directory and are not `possible`.
        unknown: String,
    },
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::Unreadable { path, os_error } => write!(
                f,
                "cannot read `{path}`: {os_error}; check that it exists and is readable, or pass \
                 a recorded sysfs root that holds it"
            ),
            TopologyError::Missing { path, expected } => write!(
                f,
                "`{path}` has no {expected}; pass the directory that holds `sys/` (and usually \
                 `proc/`) of a Linux system, such as `/`"
            ),
            TopologyError::MalformedCpuList { path, content } => write!(
                f,
                "`{path}` holds `{content}`, which is not a CPU list such as `0-3,8` nor a hex \
                 mask such as `000000ff,00000f0f`; fix or remove the file"
            ),
            TopologyError::MalformedNumber { path, content } => write!(
                f,
                "`{path}` holds `{content}` where a number was expected; fix or remove the file"
            ),
            TopologyError::CacheSpansUnknownCpus { path, unknown } => write!(
                f,
                "`{path}` names CPUs {unknown}, which have no cpu directory and are not in \
                 `possible`; the recorded tree is inconsistent: fix the file or record the \
                 missing CPUs"
            ),
        }
    }
}

impl core::error::Error for TopologyError {}
