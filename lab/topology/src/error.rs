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
                "cannot read `{}`: {os_error}; check that it exists and is readable, or pass \
                 a recorded sysfs root that holds it",
                Shown::path(path)
            ),
            TopologyError::Missing { path, expected } => write!(
                f,
                "`{}` has no {expected}; pass the directory that holds `sys/` (and usually \
                 `proc/`) of a Linux system, such as `/`",
                Shown::path(path)
            ),
            TopologyError::MalformedCpuList { path, content } => write!(
                f,
                "`{}` holds `{}`, which is not a CPU list such as `0-3,8` nor a hex mask such as \
                 `000000ff,00000f0f`; fix or remove the file",
                Shown::path(path),
                Shown::content(content)
            ),
            TopologyError::MalformedNumber { path, content } => write!(
                f,
                "`{}` holds `{}` where a number was expected; fix or remove the file",
                Shown::path(path),
                Shown::content(content)
            ),
            TopologyError::CacheSpansUnknownCpus { path, unknown } => write!(
                f,
                "`{}` names CPUs {unknown}, which have no cpu directory and are not in \
                 `possible`; the recorded tree is inconsistent: fix the file or record the \
                 missing CPUs",
                Shown::path(path)
            ),
        }
    }
}

/// Text from a file or a path, shown in a message on one line: control characters (a newline
/// inside a file, say) are escaped as Rust escapes them (`\n`), and a content longer than
/// [`Shown::MAX_CHARS`] is cut there with a note of its length, so that a garbage file gives a
/// one-line error of readable size.
struct Shown<'a> {
    text: &'a str,
    cut: bool,
}

impl<'a> Shown<'a> {
    /// The characters of a file's content shown before it is cut.
    const MAX_CHARS: usize = 64;

    fn path(text: &'a str) -> Shown<'a> {
        Shown { text, cut: false }
    }

    fn content(text: &'a str) -> Shown<'a> {
        Shown { text, cut: true }
    }
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (shown, c) in self.text.chars().enumerate() {
            if self.cut && shown == Shown::MAX_CHARS {
                return write!(f, "… ({} bytes in all)", self.text.len());
            }
            if c.is_control() {
                write!(f, "{}", c.escape_debug())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

impl core::error::Error for TopologyError {}
