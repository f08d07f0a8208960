//! The only callers of `libc`: every OS service the crate uses goes through a function here.

pub(crate) mod affinity;
pub(crate) mod fs;
