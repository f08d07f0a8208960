//! Stack-overflow reporting.
//!
//! Invariant: a fault inside the guard page of the task that is current on the faulting
//! thread is reported as that task's overflow; every other fault reaches the handler that was
//! installed before lagom's, unchanged.
//!
//! A stack overflow faults on the stack that overflowed, so the handler must run elsewhere:
//! each worker thread installs a [`SignalStack`], an alternate signal stack of its own, and
//! the process-wide SIGSEGV/SIGBUS handler (installed by the first `SignalStack`, see
//! `sys::signal`) runs on it (`SA_ONSTACK`).
//!
//! # Finding the current task without thread-locals
//!
//! The crate is `no_std`, and stable Rust has no `#[thread_local]` there; a handler also must
//! not call anything that is not async-signal-safe. So the per-thread state lives *in the
//! alternate signal stack itself*: its lowest 16 bytes hold a header — a magic word and an
//! atomic pointer to the [`TaskInfo`] of the task the thread is running. The handler asks the
//! kernel for the thread's alternate stack (`sigaltstack(NULL, &cur)`, a plain system call),
//! reads the header at `cur.ss_sp`, and checks the magic: an alternate stack installed by
//! someone else (std installs one per thread) has readable memory there but no magic, and the
//! fault is passed on. The worker stores the next task's info with [`SignalStack::set_current`]
//! before each switch (one relaxed store; the handler runs on the same thread, so program
//! order is all it needs, enforced by a compiler fence).
//!
//! The header sits at the far end of the alternate stack from where the handler's frames
//! begin (stacks grow down), and a guard page below it catches an overflow of the alternate
//! stack itself.
//!
//! When the fault address lies in the current task's guard range, the handler writes
//! `task '<name>' (id N) has overflowed its stack (S KiB)` to stderr with `write(2)` (S:
//! [`TaskInfo::stack_size`], the bytes below the fiber's top, to the nearest KiB), then a note
//! saying how to give the task more (`task::Builder::stack_size` for one task,
//! `runtime::Builder::stack_size` for every task, and the default's size), and aborts with
//! SIGABRT, as std does for a thread. It formats numbers into a buffer on its own stack: no
//! allocation, no locks.

use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering, compiler_fence};

use super::fiber::TaskInfo;
use crate::Error;
use crate::sys::{mem, signal};

/// The line after an overflow report, up to the default size in KiB: how to give a task a
/// larger stack.
const OVERFLOW_NOTE: &str = "note: give this task a larger stack with \
     lagom::task::Builder::stack_size, or every task of its runtime with \
     lagom::runtime::Builder::stack_size (the default is ";

/// Marks an alternate signal stack as lagom's ("lagom_ss").
const MAGIC: usize = 0x6c61_676f_6d5f_7373;

/// Usable size of the alternate signal stack.
const ALT_STACK_SIZE: usize = 64 * 1024;

/// The per-thread header at the lowest address of the alternate signal stack.
#[repr(C)]
struct Header {
    magic: AtomicUsize,
    current: AtomicPtr<TaskInfo>,
}

/// A worker thread's alternate signal stack, through which stack overflows of its tasks are
/// reported. Create one at the start of each worker thread with [`SignalStack::install`];
/// dropping it (on the same thread) restores the previous alternate stack and unmaps its own.
#[derive(Debug)]
pub struct SignalStack {
    map: NonNull<u8>,
    len: usize,
    prev_sp: *mut u8,
    prev_size: usize,
    prev_flags: i32,
    /// Per-thread: neither Send nor Sync.
    _thread: PhantomData<*const ()>,
}

impl SignalStack {
    /// Installs the process-wide fault handler (once) and a fresh alternate signal stack for
    /// the calling thread, with no current task.
    ///
    /// # Errors
    /// [`Error::SignalSetup`] if a mapping, `sigaction` or `sigaltstack` fails.
    pub fn install() -> Result<Self, Error> {
        signal::install_fault_handler(on_fault).map_err(|errno| Error::SignalSetup { errno })?;
        let page = mem::page_size();
        let len = page + ALT_STACK_SIZE;
        let map = mem::map_guarded(len, page).map_err(|errno| Error::SignalSetup { errno })?;
        // SAFETY: the alternate stack starts right after the guard page, inside the mapping.
        let sp = unsafe { map.as_ptr().add(page) };
        // SAFETY: the mapping is fresh, writable and aligned; a zeroed header is valid.
        unsafe {
            let header = sp.cast::<Header>();
            header.write(Header {
                magic: AtomicUsize::new(MAGIC),
                current: AtomicPtr::new(core::ptr::null_mut()),
            });
        }
        // SAFETY: the mapping lives until drop, which first reinstates the previous stack.
        match unsafe { signal::set_alt_stack(sp, ALT_STACK_SIZE) } {
            Ok(prev) => Ok(SignalStack {
                map,
                len,
                prev_sp: prev.sp,
                prev_size: prev.size,
                prev_flags: prev.flags,
                _thread: PhantomData,
            }),
            Err(errno) => {
                // SAFETY: the mapping was never handed to the kernel.
                unsafe { mem::unmap(map, len) };
                Err(Error::SignalSetup { errno })
            }
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: install wrote a Header at the start of the alternate stack, which stays
        // mapped as long as self.
        unsafe { &*self.map.as_ptr().add(mem::page_size()).cast::<Header>() }
    }

    /// Publishes the task this thread is about to run (null: none, e.g. the idle task).
    ///
    /// # Safety
    /// `info` must be null or stay valid until it is replaced by another call.
    pub unsafe fn set_current(&self, info: *const TaskInfo) {
        self.header()
            .current
            .store(info.cast_mut(), Ordering::Relaxed);
        // The handler runs on this thread: keep the store before the switch that follows.
        compiler_fence(Ordering::SeqCst);
    }

    /// The task published by the last [`set_current`](Self::set_current).
    pub fn current(&self) -> *const TaskInfo {
        self.header().current.load(Ordering::Relaxed)
    }
}

impl Drop for SignalStack {
    fn drop(&mut self) {
        let prev = signal::AltStack {
            sp: self.prev_sp,
            size: self.prev_size,
            flags: self.prev_flags,
        };
        // SAFETY: the previous alternate stack belongs to whoever installed it before us
        // (std's per-thread one, or none); it outlives us by construction of the thread.
        unsafe { signal::restore_alt_stack(&prev) };
        // SAFETY: our mapping is no longer the alternate stack of this thread.
        unsafe { mem::unmap(self.map, self.len) };
    }
}

/// The fault hook: reports and aborts if `addr` is in the current task's guard page.
/// Async-signal-safe: one `sigaltstack` query, loads, `write`, `abort`.
fn on_fault(addr: usize) {
    let Some(alt) = signal::current_alt_stack() else {
        return;
    };
    if alt.size < core::mem::size_of::<Header>() || !(alt.sp as usize).is_multiple_of(8) {
        return;
    }
    // SAFETY: [ss_sp, ss_sp + ss_size) is mapped memory by sigaltstack's contract, whoever
    // installed it; we only read the first two words, as atomics (they may not be ours).
    let header = unsafe { &*alt.sp.cast::<Header>() };
    if header.magic.load(Ordering::Relaxed) != MAGIC {
        return;
    }
    let info = header.current.load(Ordering::Relaxed);
    if info.is_null() {
        return;
    }
    // SAFETY: set_current's contract keeps the published info valid while it is current.
    let info = unsafe { &*info };
    if !info.guard().contains(&addr) {
        return;
    }
    let mut buf = [0u8; 20];
    signal::write_stderr(b"task '");
    write_name(info, &mut buf);
    signal::write_stderr(b"' (id ");
    signal::write_stderr(fmt_u64(info.id(), &mut buf));
    signal::write_stderr(b") has overflowed its stack (");
    // Rounded to the nearest KiB: the fiber's header at the top of the stack takes a few
    // hundred bytes of it (`fiber.rs`), and the report names the size the task asked for.
    signal::write_stderr(fmt_u64(
        info.stack_size().saturating_add(512) as u64 / 1024,
        &mut buf,
    ));
    signal::write_stderr(b" KiB)\n");
    signal::write_stderr(OVERFLOW_NOTE.as_bytes());
    signal::write_stderr(fmt_u64((super::DEFAULT_STACK_SIZE / 1024) as u64, &mut buf));
    signal::write_stderr(b" KiB)\n");
    signal::abort();
}

/// Writes the task's name to stderr, `task-<id>` for an unnamed task, without allocating.
pub(crate) fn write_name(info: &TaskInfo, buf: &mut [u8; 20]) {
    if info.name().is_empty() {
        signal::write_stderr(b"task-");
        signal::write_stderr(fmt_u64(info.id(), buf));
    } else {
        signal::write_stderr(info.name().as_bytes());
    }
}

/// Formats `n` in decimal into `buf`, without allocating.
pub(crate) fn fmt_u64(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_numbers() {
        let mut buf = [0u8; 20];
        assert_eq!(fmt_u64(0, &mut buf), b"0");
        assert_eq!(fmt_u64(256, &mut buf), b"256");
        assert_eq!(fmt_u64(u64::MAX, &mut buf), b"18446744073709551615");
    }

    #[test]
    fn install_publish_and_restore() {
        let before = signal::current_alt_stack().map(|a| a.sp);
        let ss = SignalStack::install().unwrap();
        let now = signal::current_alt_stack().unwrap();
        assert_eq!(now.sp as usize, ss.map.as_ptr() as usize + mem::page_size());
        assert!(ss.current().is_null());
        drop(ss);
        assert_eq!(signal::current_alt_stack().map(|a| a.sp), before);
    }
}
