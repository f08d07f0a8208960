//! Signals: the process-wide SIGSEGV/SIGBUS handler, alternate signal stacks, and the
//! async-signal-safe output the handler uses.
//!
//! The handler is installed once per process with `SA_SIGINFO | SA_ONSTACK`. It hands the fault
//! address to a hook (the overflow check in `arch::overflow`); if the hook returns, the fault
//! was not a task overflow and goes to the handler that was installed before ours, unchanged:
//! an `SA_SIGINFO` handler gets `(sig, info, ucontext)`, a plain handler gets `(sig)`, and for
//! `SIG_DFL` / `SIG_IGN` the default disposition is restored and the handler returns, so the
//! faulting instruction runs again and the kernel delivers the default action (core dump).

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use super::mem::errno;

/// The hook called with the fault address; returns only if the fault is not handled.
pub(crate) type FaultHook = fn(fault_addr: usize);

/// 0: not installed, 1: installing, 2: installed (previous actions and hook readable).
static STATE: AtomicU8 = AtomicU8::new(0);
/// The hook, as a `fn` pointer cast to `usize`.
static HOOK: AtomicUsize = AtomicUsize::new(0);

/// The actions that were installed before ours, for SIGSEGV and SIGBUS.
struct Previous(UnsafeCell<[MaybeUninit<libc::sigaction>; 2]>);
// SAFETY: written once by the thread that wins STATE 0→1, before it publishes STATE=2 with
// Release; read only after observing STATE=2 with Acquire (or from the handler, which can only
// run after our sigaction call, itself after the write).
unsafe impl Sync for Previous {}
static PREVIOUS: Previous = Previous(UnsafeCell::new([MaybeUninit::uninit(); 2]));

const SIGNALS: [libc::c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

/// Installs the fault handler for SIGSEGV and SIGBUS once per process. Later calls (any
/// thread) wait for the first to finish and return its result; `hook` of later calls is ignored.
pub(crate) fn install_fault_handler(hook: FaultHook) -> Result<(), i32> {
    match STATE.compare_exchange(0, 1, Ordering::Acquire, Ordering::Acquire) {
        Ok(_) => {}
        Err(2) => return Ok(()),
        Err(_) => {
            // Another thread is installing: wait (installation is two syscalls long).
            while STATE.load(Ordering::Acquire) != 2 {
                core::hint::spin_loop();
            }
            return Ok(());
        }
    }
    HOOK.store(hook as usize, Ordering::Relaxed);
    for (i, &sig) in SIGNALS.iter().enumerate() {
        // SAFETY: sigaction is plain old data; all-zero is a valid (empty) value.
        let mut action: libc::sigaction = unsafe { core::mem::zeroed() };
        action.sa_sigaction = fault_handler as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: sa_mask is a valid sigset_t to empty.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: we hold the installer role (STATE == 1): nobody reads PREVIOUS[i] until
        // the sigaction below has made our handler live, and the slot is a valid target.
        let prev = unsafe { (*PREVIOUS.0.get())[i].as_mut_ptr() };
        // SAFETY: action is initialised; prev points to writable storage for the old action.
        if unsafe { libc::sigaction(sig, &action, prev) } != 0 {
            let err = errno();
            STATE.store(0, Ordering::Release);
            return Err(err);
        }
    }
    STATE.store(2, Ordering::Release);
    Ok(())
}

/// The SIGSEGV/SIGBUS handler: asks the hook, then chains to the previous action.
extern "C" fn fault_handler(
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    ucontext: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler; si_addr is the
    // faulting address for SIGSEGV and SIGBUS.
    let addr = unsafe { (*info).si_addr() } as usize;
    let hook = HOOK.load(Ordering::Relaxed);
    if hook != 0 {
        // SAFETY: HOOK only ever holds a `FaultHook` cast to usize.
        let hook: FaultHook = unsafe { core::mem::transmute::<usize, FaultHook>(hook) };
        hook(addr);
    }
    let i = if sig == libc::SIGSEGV { 0 } else { 1 };
    // SAFETY: our handler is live only after PREVIOUS[i] was written by sigaction.
    let prev = unsafe { (*PREVIOUS.0.get())[i].assume_init_ref() };
    let handler = prev.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // Restore the default action and return: the instruction faults again and the kernel
        // applies the default action (a hardware fault cannot be ignored).
        // SAFETY: a zeroed sigaction with SIG_DFL is a valid action.
        let mut dfl: libc::sigaction = unsafe { core::mem::zeroed() };
        dfl.sa_sigaction = libc::SIG_DFL;
        // SAFETY: sigaction is async-signal-safe; dfl is initialised.
        unsafe { libc::sigaction(sig, &dfl, core::ptr::null_mut()) };
    } else if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous owner installed this value as an SA_SIGINFO handler.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { core::mem::transmute(handler) };
        f(sig, info, ucontext);
    } else {
        // SAFETY: the previous owner installed this value as a plain handler.
        let f: extern "C" fn(libc::c_int) = unsafe { core::mem::transmute(handler) };
        f(sig);
    }
}

/// An alternate signal stack as the kernel reports it.
pub(crate) struct AltStack {
    /// Lowest address of the alternate stack.
    pub(crate) sp: *mut u8,
    /// Its size in bytes.
    pub(crate) size: usize,
    /// The kernel's flags (`SS_DISABLE`, `SS_ONSTACK`).
    pub(crate) flags: i32,
}

/// Makes `[sp, sp + size)` the calling thread's alternate signal stack and returns the one it
/// replaces.
///
/// # Safety
/// The memory must stay mapped and unused by anything else until it is replaced again.
pub(crate) unsafe fn set_alt_stack(sp: *mut u8, size: usize) -> Result<AltStack, i32> {
    let new = libc::stack_t {
        ss_sp: sp.cast(),
        ss_flags: 0,
        ss_size: size,
    };
    // SAFETY: zeroed stack_t is valid storage for the old value.
    let mut old: libc::stack_t = unsafe { core::mem::zeroed() };
    // SAFETY: new describes memory the caller guarantees; old is writable.
    if unsafe { libc::sigaltstack(&new, &mut old) } != 0 {
        return Err(errno());
    }
    Ok(AltStack {
        sp: old.ss_sp.cast(),
        size: old.ss_size,
        flags: old.ss_flags,
    })
}

/// Reinstates an alternate stack returned by [`set_alt_stack`] (or disables it).
///
/// # Safety
/// `old` must still describe mapped memory (or carry `SS_DISABLE`).
pub(crate) unsafe fn restore_alt_stack(old: &AltStack) {
    let st = libc::stack_t {
        ss_sp: old.sp.cast(),
        ss_flags: old.flags & libc::SS_DISABLE,
        ss_size: old.size,
    };
    // SAFETY: per the contract, st describes valid memory or disables the alternate stack.
    unsafe { libc::sigaltstack(&st, core::ptr::null_mut()) };
}

/// The calling thread's alternate signal stack, if one is set. Async-signal-safe (one syscall).
pub(crate) fn current_alt_stack() -> Option<AltStack> {
    // SAFETY: zeroed stack_t is valid storage for the result.
    let mut cur: libc::stack_t = unsafe { core::mem::zeroed() };
    // SAFETY: a null new stack only queries; cur is writable.
    if unsafe { libc::sigaltstack(core::ptr::null(), &mut cur) } != 0 {
        return None;
    }
    if cur.ss_flags & libc::SS_DISABLE != 0 || cur.ss_sp.is_null() {
        return None;
    }
    Some(AltStack {
        sp: cur.ss_sp.cast(),
        size: cur.ss_size,
        flags: cur.ss_flags,
    })
}

/// Writes all of `bytes` to stderr with `write(2)` (async-signal-safe), ignoring errors.
pub(crate) fn write_stderr(mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: bytes is a valid readable buffer of the given length.
        let n = unsafe { libc::write(libc::STDERR_FILENO, bytes.as_ptr().cast(), bytes.len()) };
        if n <= 0 {
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

/// Aborts the process (SIGABRT), as std does after a stack overflow. Async-signal-safe.
pub(crate) fn abort() -> ! {
    // SAFETY: abort has no preconditions and does not return.
    unsafe { libc::abort() }
}
