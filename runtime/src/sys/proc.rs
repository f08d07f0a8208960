//! What the kernel says a thread of this process is doing, for the stall monitor
//! (`sched/monitor.rs`): its scheduler state (`/proc/self/task/TID/stat`, the field after the
//! command name), the system call it is blocked in (`/proc/self/task/TID/syscall`), and its
//! CPU time (its CPU-time clock).
//!
//! `syscall` needs the kernel's arch tracehook (x86_64 and arm64 have it); reading it for a
//! thread of one's own process is always allowed (the ptrace access check passes within a
//! thread group). Its text is `NR ARG1 … ARG6 SP PC` for a thread blocked in a system call,
//! `-1 SP PC` for one blocked outside any (a page fault), and `running` for one that runs.
//! The two files are read one after the other, so the thread may have moved on in between:
//! a `running` after a blocked state says so ([`SyscallText::Running`]), and the monitor looks
//! again later instead of reporting a state that no longer holds.

use alloc::format;

use lagom_trace::{FutexOp, Syscall};

/// What `syscall` said of a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyscallText {
    /// Blocked in system call `nr`, with the arguments the monitor reads.
    In {
        /// The call's number on this architecture.
        nr: i64,
        /// Its second argument (a futex call's operation).
        arg1: u64,
        /// Its sixth argument (a futex wait's bitset).
        arg5: u64,
    },
    /// Blocked outside any system call (`-1`).
    Outside,
    /// Running: the thread woke between the two reads (or its state was `R`).
    Running,
    /// The file could not be read or parsed (no tracehook, no procfs, or the thread ended).
    Unreadable,
}

/// A thread's state as the kernel reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ThreadState {
    /// The state letter of `stat`: `R` running or runnable, `S` asleep (interruptible), `D`
    /// uninterruptible (I/O), `T`/`t` stopped or traced, …
    pub(crate) state: u8,
    /// What `syscall` said (read only when the state is not `R`; `Running` for `R`).
    pub(crate) syscall: SyscallText,
}

/// Reads the procfs file `path` into `buf`; returns the bytes read, `None` if it cannot be
/// opened or read. One `read`: these files are a line of well under `buf`'s length.
fn read_into<'b>(path: &str, buf: &'b mut [u8]) -> Option<&'b [u8]> {
    let mut c = alloc::vec::Vec::with_capacity(path.len() + 1);
    c.extend_from_slice(path.as_bytes());
    c.push(0);
    // SAFETY: `c` is a NUL-terminated path; the flags are valid.
    let fd = unsafe { libc::open(c.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `buf` is writable for its length; `fd` is open (above) and closed once below.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: as above.
    unsafe { libc::close(fd) };
    let n = usize::try_from(n).ok()?;
    Some(&buf[..n])
}

/// The state of thread `tid` of this process, `None` if procfs cannot be read.
pub(crate) fn thread_state(tid: u32) -> Option<ThreadState> {
    let mut buf = [0u8; 512];
    let stat = read_into(&format!("/proc/self/task/{tid}/stat"), &mut buf)?;
    // `TID (COMM) S …`: the name may hold spaces and parentheses, so the state is the first
    // letter after the last `)`.
    let close = stat.iter().rposition(|&b| b == b')')?;
    let state = *stat.get(close + 2)?;
    if state == b'R' {
        return Some(ThreadState {
            state,
            syscall: SyscallText::Running,
        });
    }
    let syscall = match read_into(&format!("/proc/self/task/{tid}/syscall"), &mut buf) {
        Some(text) => parse_syscall(text),
        None => SyscallText::Unreadable,
    };
    Some(ThreadState { state, syscall })
}

/// Parses the text of `/proc/…/syscall` (module doc).
fn parse_syscall(text: &[u8]) -> SyscallText {
    let Ok(text) = core::str::from_utf8(text) else {
        return SyscallText::Unreadable;
    };
    let mut f = text.split_ascii_whitespace();
    let first = f.next();
    if first == Some("running") {
        return SyscallText::Running;
    }
    let hex = |s: Option<&str>| {
        s.and_then(|s| s.strip_prefix("0x"))
            .and_then(|s| u64::from_str_radix(s, 16).ok())
    };
    match first.and_then(|s| s.parse::<i64>().ok()) {
        Some(-1) => SyscallText::Outside,
        Some(nr) if nr >= 0 => {
            let args: [u64; 6] = core::array::from_fn(|_| hex(f.next()).unwrap_or(0));
            SyscallText::In {
                nr,
                arg1: args[1],
                arg5: args[5],
            }
        }
        _ => SyscallText::Unreadable,
    }
}

/// System call `nr` of this architecture, for the calls a blocked task is likely to be in;
/// `None` for the others (reported by number).
pub(crate) fn syscall_name(nr: i64) -> Option<Syscall> {
    use lagom_trace::Syscall as S;
    use libc as l;
    let table: &[(i64, S)] = &[
        (l::SYS_futex, S::Futex),
        (l::SYS_clock_nanosleep, S::ClockNanosleep),
        (l::SYS_nanosleep, S::Nanosleep),
        (l::SYS_read, S::Read),
        (l::SYS_write, S::Write),
        (l::SYS_pread64, S::Pread64),
        (l::SYS_pwrite64, S::Pwrite64),
        (l::SYS_readv, S::Readv),
        (l::SYS_writev, S::Writev),
        (l::SYS_fsync, S::Fsync),
        (l::SYS_fdatasync, S::Fdatasync),
        (l::SYS_sync_file_range, S::SyncFileRange),
        (l::SYS_openat, S::Openat),
        (l::SYS_close, S::Close),
        (l::SYS_ppoll, S::Ppoll),
        (l::SYS_pselect6, S::Pselect6),
        (l::SYS_epoll_pwait, S::EpollPwait),
        (l::SYS_accept4, S::Accept4),
        (l::SYS_connect, S::Connect),
        (l::SYS_recvfrom, S::Recvfrom),
        (l::SYS_recvmsg, S::Recvmsg),
        (l::SYS_sendto, S::Sendto),
        (l::SYS_sendmsg, S::Sendmsg),
        (l::SYS_wait4, S::Wait4),
        (l::SYS_waitid, S::Waitid),
        (l::SYS_flock, S::Flock),
        (l::SYS_fcntl, S::Fcntl),
        (l::SYS_ioctl, S::Ioctl),
        (l::SYS_io_uring_enter, S::IoUringEnter),
        (l::SYS_rt_sigtimedwait, S::RtSigtimedwait),
        (l::SYS_rt_sigsuspend, S::RtSigsuspend),
        (l::SYS_getrandom, S::Getrandom),
        (l::SYS_sched_yield, S::SchedYield),
        (l::SYS_msync, S::Msync),
        (l::SYS_fallocate, S::Fallocate),
        (l::SYS_ftruncate, S::Ftruncate),
        #[cfg(target_arch = "x86_64")]
        (l::SYS_poll, S::Poll),
        #[cfg(target_arch = "x86_64")]
        (l::SYS_select, S::Select),
        #[cfg(target_arch = "x86_64")]
        (l::SYS_epoll_wait, S::EpollWait),
        #[cfg(target_arch = "x86_64")]
        (l::SYS_accept, S::Accept),
        #[cfg(target_arch = "x86_64")]
        (l::SYS_pause, S::Pause),
    ];
    table.iter().find(|(n, _)| *n == nr).map(|(_, s)| *s)
}

/// A futex call's operation (its second argument, `op`), without the private and clock
/// flags; a `FUTEX_WAIT_BITSET` whose bitset (its sixth, `val3`) is lagom's own is
/// [`FutexOp::Lagom`] (`sys/futex.rs`).
pub(crate) fn futex_op(op: u64, val3: u64) -> FutexOp {
    let cmd = op as i32 & !(libc::FUTEX_PRIVATE_FLAG | libc::FUTEX_CLOCK_REALTIME);
    // The kernel reads the bitset's 32 bits; a caller of the variadic `syscall` may leave the
    // register's upper half as it was, so only the lower one is compared.
    match cmd {
        libc::FUTEX_WAIT => FutexOp::Wait,
        libc::FUTEX_WAIT_BITSET if val3 as u32 == super::futex::LAGOM_BITSET => FutexOp::Lagom,
        libc::FUTEX_WAIT_BITSET => FutexOp::WaitBitset,
        libc::FUTEX_LOCK_PI => FutexOp::LockPi,
        libc::FUTEX_LOCK_PI2 => FutexOp::LockPi2,
        libc::FUTEX_WAIT_REQUEUE_PI => FutexOp::WaitRequeuePi,
        _ => FutexOp::Other,
    }
}

/// Thread `tid`'s CPU time in nanoseconds, read through its CPU-time clock (the kernel's
/// `MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`, what `pthread_getcpuclockid` returns): exact
/// even while it runs, unlike `schedstat`, which a running thread updates only at its tick.
/// `None` once the thread has ended (the kernel refuses the clock).
pub(crate) fn thread_cpu_ns(tid: u32) -> Option<u64> {
    // The encoding of a thread CPU clock id: `(~tid << 3) | CPUCLOCK_PERTHREAD | SCHED`.
    let clock: libc::clockid_t = (!(tid as i32) << 3) | 6;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is writable; a clock id of a thread that exited is refused with EINVAL.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn syscall_text_is_parsed() {
        assert_eq!(
            parse_syscall(b"202 0x7f00 0x189 0x0 0x0 0x0 0xffffffff 0x7ffd 0x7f12\n"),
            SyscallText::In {
                nr: 202,
                arg1: 0x189,
                arg5: 0xffff_ffff
            }
        );
        assert_eq!(parse_syscall(b"-1 0x7ffd 0x7f12\n"), SyscallText::Outside);
        assert_eq!(parse_syscall(b"running\n"), SyscallText::Running);
        assert_eq!(parse_syscall(b""), SyscallText::Unreadable);
    }

    #[test]
    fn futex_ops_are_named_without_their_flags() {
        let op = (libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG | libc::FUTEX_CLOCK_REALTIME)
            as u64;
        assert_eq!(futex_op(op, 0xffff_ffff), FutexOp::WaitBitset);
        assert_eq!(futex_op(op, 0x6c61_676d), FutexOp::Lagom);
        // The upper half of the register is not the kernel's to read.
        assert_eq!(futex_op(op, 0x7ffd_0000_6c61_676d), FutexOp::Lagom);
        assert_eq!(futex_op(op, 0x7ffd_0000_ffff_ffff), FutexOp::WaitBitset);
        assert_eq!(futex_op(libc::FUTEX_WAIT as u64, 0), FutexOp::Wait);
    }

    /// A thread blocked in a futex wait is seen so, with the call named.
    #[test]
    fn a_thread_blocked_in_futex_is_seen_in_futex() {
        // Under an emulator (CI's aarch64 step sets LAGOM_TEST_RUNNER) procfs shows the
        // host's system calls; the test runs natively in CI's test step.
        if let Some(runner) = std::env::var_os("LAGOM_TEST_RUNNER").filter(|r| !r.is_empty()) {
            std::eprintln!("SKIPPED a_thread_blocked_in_futex_is_seen_in_futex under {runner:?}");
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel::<u32>();
        let t = std::thread::spawn(move || {
            tid_tx.send(crate::sys::thread::gettid()).unwrap();
            rx.recv().unwrap();
        });
        let tid = tid_rx.recv().unwrap();
        // Wait for what is assumed: the thread asleep in its receive.
        let st = loop {
            let st = thread_state(tid).expect("procfs");
            if st.state == b'S' && matches!(st.syscall, SyscallText::In { .. }) {
                break st;
            }
            std::thread::yield_now();
        };
        let SyscallText::In { nr, .. } = st.syscall else {
            unreachable!()
        };
        assert_eq!(syscall_name(nr), Some(Syscall::Futex));
        assert!(thread_cpu_ns(tid).is_some());
        tx.send(()).unwrap();
        t.join().unwrap();
    }

    /// A thread waiting in lagom's own futex wait is told from one waiting in std's.
    #[test]
    fn lagom_s_own_futex_waits_are_told_apart() {
        use core::sync::atomic::{AtomicU32, Ordering};
        if std::env::var_os("LAGOM_TEST_RUNNER").is_some_and(|r| !r.is_empty()) {
            std::eprintln!("SKIPPED lagom_s_own_futex_waits_are_told_apart under an emulator");
            return;
        }
        let word = std::sync::Arc::new(AtomicU32::new(0));
        let (tid_tx, tid_rx) = std::sync::mpsc::channel::<u32>();
        let w = std::sync::Arc::clone(&word);
        let t = std::thread::spawn(move || {
            tid_tx.send(crate::sys::thread::gettid()).unwrap();
            while w.load(Ordering::Acquire) == 0 {
                super::super::futex::futex_wait(&w, 0, None);
            }
        });
        let tid = tid_rx.recv().unwrap();
        // Until it waits in lagom's futex wait: on its way there the thread may wait in one of
        // std's (a lock of the test harness's), which reads as what it is, `WaitBitset`, and
        // is passed over. A lagom wait that read as std's would never be seen: the bound.
        let t0 = std::time::Instant::now();
        let mut seen = alloc::vec::Vec::new();
        loop {
            if let Some(ThreadState {
                syscall: SyscallText::In { nr, arg1, arg5 },
                ..
            }) = thread_state(tid)
                && syscall_name(nr) == Some(Syscall::Futex)
            {
                let op = futex_op(arg1, arg5);
                if op == FutexOp::Lagom {
                    break;
                }
                if !seen.contains(&op) {
                    seen.push(op);
                }
            }
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(20),
                "lagom's futex wait never read as lagom's (seen: {seen:?})"
            );
            std::thread::yield_now();
        }
        word.store(1, Ordering::Release);
        super::super::futex::futex_wake(&word, 1);
        t.join().unwrap();
    }
}
