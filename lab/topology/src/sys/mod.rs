//! The only place in this crate that calls `libc`: reading files and listing directories
//! (`fs.rs`), and the calling thread's affinity mask (`affinity.rs`). The reader above never
//! names `libc`.

pub(crate) mod affinity;
pub(crate) mod fs;
