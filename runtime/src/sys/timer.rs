//! A thread's own one-shot timer: `timer_create(CLOCK_MONOTONIC)` with `SIGEV_THREAD_ID`,
//! whose expiry sends a signal to the thread that created it (the workers' tick,
//! `worker/tick.rs`), and that signal's process-wide handler. The system calls are made directly, not through the C library's
//! wrappers: the kernel's timer id is all lagom needs, and no C library version or `librt`
//! is involved.

use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use super::mem::errno;

/// A POSIX timer of the calling thread (module doc), deleted on drop. Not `Send`: its signal
/// goes to the thread that created it, and only that thread arms it.
#[derive(Debug)]
pub(crate) struct ThreadTimer {
    /// The kernel's timer id.
    id: libc::c_int,
    _thread: core::marker::PhantomData<*const ()>,
}

impl ThreadTimer {
    /// A disarmed timer on `CLOCK_MONOTONIC` whose expiry sends `signo` to the calling thread,
    /// with `token` as the signal's `si_value` (its handler tells the timer's signals from
    /// others by it, and by `si_code == SI_TIMER`). Returns the `errno` of a refusal (`EAGAIN`
    /// past the process's limits, `ENOSYS` or `EPERM` under a sandbox that forbids it).
    pub(crate) fn for_calling_thread(signo: libc::c_int, token: *mut c_void) -> Result<Self, i32> {
        // SAFETY: `gettid` takes no arguments and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::c_int;
        // SAFETY: an all-zero sigevent is a valid value (its padding included) to fill in.
        let mut ev: libc::sigevent = unsafe { core::mem::zeroed() };
        ev.sigev_value = libc::sigval { sival_ptr: token };
        ev.sigev_signo = signo;
        ev.sigev_notify = libc::SIGEV_THREAD_ID;
        ev.sigev_notify_thread_id = tid;
        let mut id: libc::c_int = 0;
        // SAFETY: `ev` is an initialised sigevent of the kernel's size (64 bytes) and `id` a
        // writable int, the kernel's `timer_t`; both outlive the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_timer_create,
                libc::CLOCK_MONOTONIC,
                &mut ev as *mut libc::sigevent,
                &mut id as *mut libc::c_int,
            )
        };
        if rc != 0 {
            return Err(errno());
        }
        Ok(ThreadTimer {
            id,
            _thread: core::marker::PhantomData,
        })
    }

    /// Arms the timer to expire once at `deadline_ns` on `CLOCK_MONOTONIC` (replacing any
    /// earlier arming; a deadline already past expires at once).
    pub(crate) fn arm_at(&self, deadline_ns: u64) -> Result<(), i32> {
        // Zero would disarm: the earliest deadline is 1 ns.
        let ns = deadline_ns.max(1);
        self.set(
            libc::TIMER_ABSTIME,
            libc::timespec {
                tv_sec: (ns / 1_000_000_000).min(libc::time_t::MAX as u64) as libc::time_t,
                tv_nsec: (ns % 1_000_000_000) as libc::c_long,
            },
        )
    }

    /// Disarms the timer (an expiry already signalled stays pending).
    pub(crate) fn disarm(&self) -> Result<(), i32> {
        self.set(
            0,
            libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
        )
    }

    fn set(&self, flags: libc::c_int, value: libc::timespec) -> Result<(), i32> {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        // SAFETY: `self.id` is a live timer of this process; `spec` is a valid itimerspec that
        // outlives the call; no old value is asked for.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_timer_settime,
                self.id,
                flags,
                &spec as *const libc::itimerspec,
                core::ptr::null_mut::<libc::itimerspec>(),
            )
        };
        if rc != 0 {
            return Err(errno());
        }
        Ok(())
    }
}

impl Drop for ThreadTimer {
    fn drop(&mut self) {
        // SAFETY: `self.id` is a live timer of this process, deleted once.
        unsafe { libc::syscall(libc::SYS_timer_delete, self.id) };
    }
}

/// The signal of the workers' tick timers (`worker/tick.rs`): `SIGURG`, as the Go runtime
/// chose for its preemption signal, because its default disposition is to ignore it (a
/// stray one, say pending across an `exec`, harms nothing), programs seldom handle it (it
/// reports out-of-band data on a socket whose owner was set with `F_SETOWN`), and a debugger
/// passes it through. Signals of it that are not a tick go to whatever handler was installed
/// before lagom's ([`install_tick_handler`]).
pub(crate) const TICK_SIGNAL: libc::c_int = libc::SIGURG;

/// The hook called, on the interrupted thread, for each tick signal: it must be
/// async-signal-safe (it stores a flag).
pub(crate) type TickHook = fn();

/// [`install_tick_handler`]'s state: 0 not installed, 1 installing, 2 installed, 3 refused.
static TICK_STATE: AtomicU8 = AtomicU8::new(0);
/// The tick hook, as a `fn` pointer cast to `usize`.
static TICK_HOOK: AtomicUsize = AtomicUsize::new(0);
/// The action that was installed for [`TICK_SIGNAL`] before lagom's.
static TICK_PREVIOUS: Previous1 = Previous1(UnsafeCell::new(MaybeUninit::uninit()));

/// The saved action, written once by the installer and read after it is published.
struct Previous1(UnsafeCell<MaybeUninit<libc::sigaction>>);
// SAFETY: as for the fault handler's saved actions (`signal.rs`): written once by the installer before TICK_STATE = 2 (Release),
// read after an Acquire load that saw 2, or by the handler, live only after the write.
unsafe impl Sync for Previous1 {}

/// The `si_value` that marks a signal as a tick of one of lagom's timers: the address of a
/// static of this module, which no other timer of the process can carry by accident.
pub(crate) fn tick_token() -> *mut core::ffi::c_void {
    (&TICK_HOOK as *const AtomicUsize).cast_mut().cast()
}

/// Installs the tick handler for [`TICK_SIGNAL`] once per process (`SA_SIGINFO | SA_ONSTACK |
/// SA_RESTART`): a signal from a timer whose value is [`tick_token`] calls `hook`; any other
/// goes to the action installed before, as the fault handler (`signal.rs`) chains. `SA_RESTART` makes the
/// system calls that the kernel can restart (`read`, `write`, `futex`, `wait`, …) restart
/// after the handler instead of failing with `EINTR`; `SA_ONSTACK` puts the signal's frame
/// on the thread's alternate stack, not on a task's. Later calls return the first one's
/// result (`hook` ignored).
pub(crate) fn install_tick_handler(hook: TickHook) -> Result<(), i32> {
    loop {
        match TICK_STATE.compare_exchange(0, 1, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => break,
            Err(2) => return Ok(()),
            Err(3) => return Err(libc::EPERM),
            // Another thread is installing (one system call): wait for it.
            Err(_) => core::hint::spin_loop(),
        }
    }
    TICK_HOOK.store(hook as usize, Ordering::Relaxed);
    // SAFETY: sigaction is plain old data; all-zero is a valid (empty) value.
    let mut action: libc::sigaction = unsafe { core::mem::zeroed() };
    action.sa_sigaction = tick_handler as *const () as usize;
    action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
    // SAFETY: sa_mask is a valid sigset_t to empty.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    // SAFETY: we hold the installer role (TICK_STATE == 1), so nobody reads TICK_PREVIOUS
    // until our handler is live; `action` is initialised and the slot writable.
    let rc =
        unsafe { libc::sigaction(TICK_SIGNAL, &action, (*TICK_PREVIOUS.0.get()).as_mut_ptr()) };
    if rc != 0 {
        let err = errno();
        TICK_STATE.store(3, Ordering::Release);
        return Err(err);
    }
    TICK_STATE.store(2, Ordering::Release);
    Ok(())
}

/// Unblocks [`TICK_SIGNAL`] on the calling thread (a thread inherits its creator's mask, and
/// a program may have blocked it there).
pub(crate) fn unblock_tick_signal() {
    // SAFETY: plain sigset manipulation; a mask change of the calling thread alone.
    unsafe {
        let mut set: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, TICK_SIGNAL);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, core::ptr::null_mut());
    }
}

/// The [`TICK_SIGNAL`] handler: a tick calls the hook; anything else goes to the previous
/// action. The hook stores a flag, which touches no `errno`.
extern "C" fn tick_handler(
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    ucontext: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler; a timer's carries
    // its sigval (read only when `si_code` says it is a timer's).
    let ours = unsafe {
        (*info).si_code == libc::SI_TIMER && (*info).si_value().sival_ptr == tick_token()
    };
    if ours {
        let hook = TICK_HOOK.load(Ordering::Relaxed);
        if hook != 0 {
            // SAFETY: TICK_HOOK only ever holds a `TickHook` cast to usize.
            let hook: TickHook = unsafe { core::mem::transmute::<usize, TickHook>(hook) };
            hook();
        }
        return;
    }
    // SAFETY: our handler is live only after TICK_PREVIOUS was written by sigaction.
    let prev = unsafe { (*TICK_PREVIOUS.0.get()).assume_init_ref() };
    let handler = prev.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // SIGURG's default is to ignore it.
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The timer signals the thread that made it, once per arming, and not after a disarm:
    /// checked with the signal blocked and taken with `sigtimedwait`, so no handler is
    /// involved and the test leaves the process's dispositions alone.
    #[test]
    fn a_timer_signals_its_own_thread_once() {
        std::thread::spawn(|| {
            let sig = libc::SIGRTMIN() + 3;
            // SAFETY: plain sigset manipulation and a mask change of this thread alone.
            let set = unsafe {
                let mut set: libc::sigset_t = core::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, sig);
                assert_eq!(
                    libc::pthread_sigmask(libc::SIG_BLOCK, &set, core::ptr::null_mut()),
                    0
                );
                set
            };
            let token = 0x1a90_usize as *mut c_void;
            let t = ThreadTimer::for_calling_thread(sig, token).expect("timer_create");
            let wait = |ms: i64| {
                let ts = libc::timespec {
                    tv_sec: (ms / 1_000) as libc::time_t,
                    tv_nsec: ((ms % 1_000) * 1_000_000) as libc::c_long,
                };
                // SAFETY: an all-zero siginfo is valid storage for the kernel to fill.
                let mut info: libc::siginfo_t = unsafe { core::mem::zeroed() };
                // SAFETY: `set`, `info` and `ts` are valid for the call.
                let got = unsafe { libc::sigtimedwait(&set, &mut info, &ts) };
                // SAFETY: a timer's siginfo carries its sigval.
                (got, info.si_code, unsafe { info.si_value().sival_ptr })
            };
            let now = crate::sys::time::monotonic_ns();
            t.arm_at(now + 2_000_000).expect("arm");
            assert_eq!(
                wait(2_000),
                (sig, libc::SI_TIMER, token),
                "armed: one signal"
            );
            assert_eq!(wait(20).0, -1, "one-shot: no second signal");
            t.arm_at(crate::sys::time::monotonic_ns() + 50_000_000)
                .expect("arm");
            t.disarm().expect("disarm");
            assert_eq!(wait(100).0, -1, "disarmed: no signal");
            drop(t);
        })
        .join()
        .unwrap();
    }
}
