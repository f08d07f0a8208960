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
        }
    }
}

impl core::error::Error for Error {}
