//! What schbench reads from the OS besides the clock: `/proc/stat` (auto-RPS), per-thread
//! schedstat (sched delay), the kernel release, host name and sched_ext state (JSON); and
//! Ctrl-C, which ends the run early with the tables so far.
//!
//! Ctrl-C: SIGINT is blocked before any thread starts (threads inherit the mask), so only
//! the control thread, which unblocks it, receives it; the handler sets a flag and, without
//! `SA_RESTART`, cuts the control loop's one-second sleep short. `SA_RESETHAND` makes a
//! second Ctrl-C end the process at once.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

fn sigint_mask(how: libc::c_int) {
    // SAFETY: an all-zero sigset_t is a valid value for sigemptyset to initialise.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid sigset_t; SIGINT is a valid signal; the old mask is not read.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(how, &set, std::ptr::null_mut());
    }
}

/// Installs the Ctrl-C handler and blocks SIGINT in the calling thread (and so in every
/// thread it starts from now on). Call first in `main`.
pub fn catch_sigint() {
    sigint_mask(libc::SIG_BLOCK);
    // SAFETY: an all-zero sigaction is valid to fill in; the handler only stores to an atomic
    // (async-signal-safe), and its signature is the one sa_sigaction expects without
    // SA_SIGINFO.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESETHAND;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
    }
}

/// Lets SIGINT reach the calling thread (the control loop's).
pub fn unblock_sigint() {
    sigint_mask(libc::SIG_UNBLOCK);
}

/// Whether Ctrl-C was pressed.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Sleeps `us` µs, or less if a signal arrives.
pub fn sleep_interruptible(us: u64) {
    let ts = libc::timespec {
        tv_sec: (us / 1_000_000) as libc::time_t,
        tv_nsec: ((us % 1_000_000) * 1000) as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; the remainder is not asked for.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

/// The aggregate `cpu` line of `/proc/stat`: (idle, total) jiffies.
pub fn cpu_times() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    Some((*v.get(3)?, v.iter().sum()))
}

/// A thread's average wait for a CPU per timeslice, in ns, from its schedstat; `None` when
/// the thread is gone.
pub fn sched_delay_ns(tid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    let v: Vec<u64> = text
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    let (wait, slices) = (*v.get(1)?, *v.get(2)?);
    Some(wait.checked_div(slices).unwrap_or(0))
}

/// The kernel release (`uname -r`).
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The host name.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its length.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The sched_ext state: `disabled` when there is none, else the state and the loaded
/// scheduler's name.
pub fn sched_ext() -> String {
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string());
    match read("/sys/kernel/sched_ext/state") {
        Ok(state) if state != "disabled" => match read("/sys/kernel/sched_ext/root/ops") {
            Ok(ops) if !ops.is_empty() => format!("{state} {ops}"),
            _ => state,
        },
        _ => "disabled".to_string(),
    }
}
