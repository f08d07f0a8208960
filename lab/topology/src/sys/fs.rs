//! Reading files and listing directories by path, through `open`/`read`/`close` and
//! `opendir`/`readdir`/`closedir`.
//!
//! This is all the file access the topology reader needs (sysfs, procfs, cgroup files),
//! available without `std`; with `affinity.rs`, the crate's only use of `libc`. Paths are plain `&str`; a path holding a NUL byte cannot name a
//! file and is reported as `EINVAL`.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// An OS error number (`errno`) from a failed call, printed with the C library's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OsError(pub(crate) i32);

impl OsError {
    /// The calling thread's current `errno`.
    pub(crate) fn last() -> OsError {
        // SAFETY: `__errno_location` returns a valid pointer to the calling thread's errno.
        OsError(unsafe { *libc::__errno_location() })
    }

    /// True when the path (or a directory on it) does not exist.
    pub(crate) fn is_not_found(self) -> bool {
        self.0 == libc::ENOENT || self.0 == libc::ENOTDIR
    }

    /// True when the caller lacks the permission (`EACCES`, `EPERM`).
    pub(crate) fn is_denied(self) -> bool {
        self.0 == libc::EACCES || self.0 == libc::EPERM
    }
}

impl fmt::Display for OsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 128];
        // SAFETY: `buf` is writable for `buf.len()` bytes; the XSI `strerror_r` writes at most
        // that many bytes, NUL included, and returns non-zero when it wrote nothing usable.
        let rc = unsafe { libc::strerror_r(self.0, buf.as_mut_ptr().cast(), buf.len()) };
        let text = if rc == 0 {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            core::str::from_utf8(&buf[..end]).unwrap_or("unknown error")
        } else {
            "unknown error"
        };
        write!(f, "{text} (os error {})", self.0)
    }
}

/// `path` as a NUL-terminated byte string, or `EINVAL` when it holds a NUL byte.
fn c_path(path: &str) -> Result<Vec<u8>, OsError> {
    if path.as_bytes().contains(&0) {
        return Err(OsError(libc::EINVAL));
    }
    let mut c = Vec::with_capacity(path.len() + 1);
    c.extend_from_slice(path.as_bytes());
    c.push(0);
    Ok(c)
}

/// Reads the whole file at `path` (following symlinks), for files that end at the first
/// short read (sysfs, procfs, cgroupfs, and small files on local filesystems).
pub(crate) fn read(path: &str) -> Result<Vec<u8>, OsError> {
    let c = c_path(path)?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let fd = unsafe { libc::open(c.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(OsError::last());
    }
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    let result = loop {
        // SAFETY: `fd` is open and `chunk` is writable for `chunk.len()` bytes.
        let n = unsafe { libc::read(fd, chunk.as_mut_ptr().cast(), chunk.len()) };
        if n < 0 {
            let err = OsError::last();
            if err.0 == libc::EINTR {
                continue;
            }
            break Err(err);
        }
        if n == 0 {
            break Ok(());
        }
        out.extend_from_slice(&chunk[..n as usize]);
        // A short read is the end of the file: sysfs and procfs hand out a whole attribute
        // in one read, and local filesystems return less than asked only at the end. This
        // saves the second `read` per file, a third of the syscalls of a topology scan.
        if (n as usize) < chunk.len() {
            break Ok(());
        }
    };
    // SAFETY: `fd` was opened above and is closed exactly once, here.
    unsafe { libc::close(fd) };
    result.map(|()| out)
}

/// The names in the directory at `path`, without `.` and `..`, in no particular order.
pub(crate) fn list_dir(path: &str) -> Result<Vec<String>, OsError> {
    let c = c_path(path)?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let dir = unsafe { libc::opendir(c.as_ptr().cast()) };
    if dir.is_null() {
        return Err(OsError::last());
    }
    let mut names = Vec::new();
    loop {
        // SAFETY: `dir` is an open directory stream, used by this thread only.
        let entry = unsafe { libc::readdir(dir) };
        if entry.is_null() {
            break;
        }
        // SAFETY: a non-null `readdir` result points to a valid `dirent` whose `d_name` is
        // NUL-terminated; it stays valid until the next `readdir`/`closedir` on `dir`.
        let name = unsafe { core::ffi::CStr::from_ptr((*entry).d_name.as_ptr()) };
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        if let Ok(s) = core::str::from_utf8(bytes) {
            names.push(String::from(s));
        }
    }
    // SAFETY: `dir` was opened above and is closed exactly once, here.
    unsafe { libc::closedir(dir) };
    Ok(names)
}

/// True when `path` names an existing file or directory (symlinks followed).
pub(crate) fn exists(path: &str) -> bool {
    let Ok(c) = c_path(path) else { return false };
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    unsafe { libc::access(c.as_ptr().cast(), libc::F_OK) == 0 }
}
