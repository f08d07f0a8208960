//! Appending a line to a file named by an environment variable, for the loom coverage
//! probes (`cfg(loom)` only). Reading sysfs files and listing directories is the topology
//! crate's (`lagom-topology`, its own `sys/`).

use alloc::vec::Vec;

/// Appends `line` and a newline to the file named by the environment variable `var`
/// (created if missing); nothing if `var` is unset or the file cannot be opened. For the
/// loom coverage probes (`locking/probe.rs`): one `write` with `O_APPEND`, so that test
/// processes writing at once do not mix their lines.
pub(crate) fn append_line_to_env_file(var: &core::ffi::CStr, line: &str) {
    // SAFETY: `var` is NUL-terminated; `getenv` returns null or a NUL-terminated string that
    // stays valid while nothing changes the environment (the test harness does not).
    let path = unsafe { libc::getenv(var.as_ptr()) };
    if path.is_null() {
        return;
    }
    // SAFETY: `path` is a NUL-terminated path (above); the flags and mode are valid.
    let fd = unsafe {
        libc::open(
            path,
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC,
            0o644,
        )
    };
    if fd < 0 {
        return;
    }
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    // SAFETY: `buf` is readable for `buf.len()` bytes; `fd` is open (above), closed once.
    unsafe {
        libc::write(fd, buf.as_ptr().cast(), buf.len());
        libc::close(fd);
    }
}
