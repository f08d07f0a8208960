//! The `interpose` feature's hooks: lagom's definitions of `clock_nanosleep`, `nanosleep`,
//! `usleep` and `sleep` (why, and what they cannot do: `task/interpose.rs`). Each reads its
//! arguments as the C function does — a `timespec` with `tv_nsec` outside 0..1e9 or a
//! negative `tv_sec` is `EINVAL`, through the function's own error convention — turns them
//! into a deadline on the monotonic clock, and hands it to the task layer's sleep, which a
//! runtime's opt-in installs ([`install`]); when that declines (not a task of a runtime that
//! opted in), or nothing is installed, or the call is not one it takes (a null `req`, a CPU
//! clock), the hook calls the C library's function.
//!
//! That function is the one the hook stands in front of, found once with
//! `dlsym(RTLD_NEXT, name)` — the next definition in the dynamic linker's search order after
//! the object that defines the hook (the program), so the C library's, with its own behaviour
//! (a thread cancellation point included). A program where `dlsym` finds nothing (linked
//! statically) gets the system call itself, with the C function's error convention.

use core::ffi::{c_char, c_int, c_uint, c_void};
use core::sync::atomic::{AtomicPtr, Ordering};

/// The task layer's sleep (`task::interpose::sleep_task_until`): sleeps the calling task until
/// a monotonic deadline and returns `true`, or returns `false` for a caller it does not
/// sleep.
pub(crate) type TaskSleep = fn(u64) -> bool;

/// The installed [`TaskSleep`] (null: none yet; every call goes to the C library).
static TASK_SLEEP: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

/// Installs the task layer's sleep (a runtime's opt-in; the same function every time).
pub(crate) fn install(f: TaskSleep) {
    TASK_SLEEP.store(f as *mut (), Ordering::Release);
}

/// Sleeps the calling task until `deadline` if the installed sleep takes the call.
fn task_sleep(deadline: u64) -> bool {
    let p = TASK_SLEEP.load(Ordering::Acquire);
    if p.is_null() {
        return false;
    }
    // SAFETY: a non-null value was stored by `install` from a `TaskSleep`.
    let f = unsafe { core::mem::transmute::<*mut (), TaskSleep>(p) };
    f(deadline)
}

/// Whether the installed sleep may take a call now: something is installed. (The task
/// layer's own test follows; this spares a thread that no runtime could sleep the look.)
fn installed() -> bool {
    !TASK_SLEEP.load(Ordering::Relaxed).is_null()
}

/// What the hook of `clock_nanosleep` returns for [`PROBE_CLOCK`]: no error number is this
/// large.
const PROBE_ANSWER: c_int = 0x4c61_676d;

/// A clock id no kernel has (`'lagm'`): the C library refuses it with `EINVAL`, the hook
/// answers [`PROBE_ANSWER`] ([`check`]).
const PROBE_CLOCK: libc::clockid_t = 0x6c61_676d;

/// A `timespec` as nanoseconds, `None` if it is not one (`tv_nsec` outside 0..1e9, or a
/// negative `tv_sec`).
fn ts_ns(ts: &libc::timespec) -> Option<u64> {
    if !(0..1_000_000_000).contains(&ts.tv_nsec) || ts.tv_sec < 0 {
        return None;
    }
    Some((ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64)
}

/// `clock_nanosleep` (module doc): a relative sleep, or one to an absolute time
/// (`TIMER_ABSTIME`), on `CLOCK_MONOTONIC`, `CLOCK_REALTIME`, `CLOCK_BOOTTIME` or
/// `CLOCK_TAI` may sleep the task (an absolute time is measured against its clock once, at
/// the call: a later change of `CLOCK_REALTIME` does not move the wakeup), returning 0; an
/// invalid `timespec` returns `EINVAL` (unless the call goes to the C library, which says the
/// same).
///
/// # Safety
/// As the C function's: `req` null or readable, `rem` null or writable.
#[unsafe(no_mangle)]
unsafe extern "C" fn clock_nanosleep(
    clock: libc::clockid_t,
    flags: c_int,
    req: *const libc::timespec,
    rem: *mut libc::timespec,
) -> c_int {
    if clock == PROBE_CLOCK {
        return PROBE_ANSWER;
    }
    let ours = installed()
        && !req.is_null()
        && matches!(
            clock,
            libc::CLOCK_MONOTONIC | libc::CLOCK_REALTIME | libc::CLOCK_BOOTTIME | libc::CLOCK_TAI
        );
    if ours {
        // SAFETY: `req` is not null and, by the caller's contract, readable.
        let Some(want) = ts_ns(unsafe { &*req }) else {
            return libc::EINVAL;
        };
        let now = super::time::monotonic_ns();
        let deadline = if flags & libc::TIMER_ABSTIME != 0 {
            match clock_ns(clock) {
                Some(on_clock) => now.saturating_add(want.saturating_sub(on_clock)),
                None => return libc::EINVAL,
            }
        } else {
            now.saturating_add(want)
        };
        if task_sleep(deadline) {
            return 0;
        }
    }
    // SAFETY: the caller's arguments, under the C function's contract (ours).
    unsafe { real_clock_nanosleep(clock, flags, req, rem) }
}

/// `nanosleep` (module doc): a relative sleep that may sleep the task, returning 0; an
/// invalid `timespec` is -1 with `EINVAL`.
///
/// # Safety
/// As the C function's: `req` null or readable, `rem` null or writable.
#[unsafe(no_mangle)]
unsafe extern "C" fn nanosleep(req: *const libc::timespec, rem: *mut libc::timespec) -> c_int {
    if installed() && !req.is_null() {
        // SAFETY: `req` is not null and, by the caller's contract, readable.
        let Some(want) = ts_ns(unsafe { &*req }) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        if task_sleep(super::time::monotonic_ns().saturating_add(want)) {
            return 0;
        }
    }
    // SAFETY: the caller's arguments, under the C function's contract (ours).
    unsafe { real_nanosleep(req, rem) }
}

/// `usleep` (module doc): may sleep the task, returning 0.
#[unsafe(no_mangle)]
extern "C" fn usleep(us: libc::useconds_t) -> c_int {
    if installed() && task_sleep(super::time::monotonic_ns().saturating_add(u64::from(us) * 1000)) {
        return 0;
    }
    real_usleep(us)
}

/// `sleep` (module doc): may sleep the task, returning 0 (no time left).
#[unsafe(no_mangle)]
extern "C" fn sleep(secs: c_uint) -> c_uint {
    let ns = u64::from(secs) * 1_000_000_000;
    if installed() && task_sleep(super::time::monotonic_ns().saturating_add(ns)) {
        return 0;
    }
    real_sleep(secs)
}

/// The four hooks, as function pointers: never called through, only named (their
/// references are what keep them in the link).
#[allow(dead_code)]
pub(crate) struct Hooks {
    clock_nanosleep: unsafe extern "C" fn(
        libc::clockid_t,
        c_int,
        *const libc::timespec,
        *mut libc::timespec,
    ) -> c_int,
    nanosleep: unsafe extern "C" fn(*const libc::timespec, *mut libc::timespec) -> c_int,
    usleep: extern "C" fn(libc::useconds_t) -> c_int,
    sleep: extern "C" fn(c_uint) -> c_uint,
}

/// The hooks, named so that a program that opts in links them whatever the linker would
/// otherwise keep (`task/interpose.rs`).
pub(crate) static HOOKS: Hooks = Hooks {
    clock_nanosleep,
    nanosleep,
    usleep,
    sleep,
};

/// Whether a call of `clock_nanosleep` made in this program reaches the hook: the probe
/// clock, which the C library refuses, gets the hook's own answer. Also looks up the C
/// library's functions now, so that no sleep has to.
pub(crate) fn check() -> bool {
    core::hint::black_box(&HOOKS);
    resolve_all();
    let zero = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `zero` is readable; no remainder is asked for; the clock is refused by the C
    // library (EINVAL, no sleep) and answered by the hook.
    unsafe { libc::clock_nanosleep(PROBE_CLOCK, 0, &zero, core::ptr::null_mut()) == PROBE_ANSWER }
}

/// `clock_nanosleep`'s signature.
type ClockNanosleep = unsafe extern "C" fn(
    libc::clockid_t,
    c_int,
    *const libc::timespec,
    *mut libc::timespec,
) -> c_int;
/// `nanosleep`'s signature.
type Nanosleep = unsafe extern "C" fn(*const libc::timespec, *mut libc::timespec) -> c_int;
/// `usleep`'s signature.
type Usleep = unsafe extern "C" fn(libc::useconds_t) -> c_int;
/// `sleep`'s signature.
type Sleep = unsafe extern "C" fn(c_uint) -> c_uint;

/// Not looked up yet (null means "looked up, not found").
const UNRESOLVED: *mut c_void = core::ptr::dangling_mut::<c_void>();

static CLOCK_NANOSLEEP: AtomicPtr<c_void> = AtomicPtr::new(UNRESOLVED);
static NANOSLEEP: AtomicPtr<c_void> = AtomicPtr::new(UNRESOLVED);
static USLEEP: AtomicPtr<c_void> = AtomicPtr::new(UNRESOLVED);
static SLEEP: AtomicPtr<c_void> = AtomicPtr::new(UNRESOLVED);

/// The next definition of `name` (NUL-terminated) after the program's, cached in `slot`;
/// `None` if there is none. A race between two first calls looks it up twice, to the same
/// answer.
fn next(slot: &AtomicPtr<c_void>, name: &'static [u8]) -> Option<*mut c_void> {
    let mut p = slot.load(Ordering::Acquire);
    if p == UNRESOLVED {
        // SAFETY: `name` is NUL-terminated (every caller passes a literal ending in \0);
        // RTLD_NEXT is a valid pseudo-handle.
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast::<c_char>()) };
        slot.store(p, Ordering::Release);
    }
    (!p.is_null()).then_some(p)
}

/// Looks the four functions up now, so that a first sleep does not (`dlsym` may allocate and
/// take the dynamic linker's lock: not where a program expects a sleep to).
fn resolve_all() {
    let _ = next(&CLOCK_NANOSLEEP, b"clock_nanosleep\0");
    let _ = next(&NANOSLEEP, b"nanosleep\0");
    let _ = next(&USLEEP, b"usleep\0");
    let _ = next(&SLEEP, b"sleep\0");
}

/// The C library's `clock_nanosleep`: returns 0 or an error number (not through `errno`).
///
/// # Safety
/// As the C function's: `req` readable, `rem` null or writable.
unsafe fn real_clock_nanosleep(
    clock: libc::clockid_t,
    flags: c_int,
    req: *const libc::timespec,
    rem: *mut libc::timespec,
) -> c_int {
    match next(&CLOCK_NANOSLEEP, b"clock_nanosleep\0") {
        Some(f) => {
            // SAFETY: `f` is the C library's `clock_nanosleep`, of this signature; the
            // arguments are the caller's, under its contract.
            unsafe {
                core::mem::transmute::<*mut c_void, ClockNanosleep>(f)(clock, flags, req, rem)
            }
        }
        None => {
            // SAFETY: as above, the system call with the caller's arguments.
            let r = unsafe { libc::syscall(libc::SYS_clock_nanosleep, clock, flags, req, rem) };
            if r == 0 { 0 } else { super::mem::errno() }
        }
    }
}

/// The C library's `nanosleep`: 0, or -1 with `errno`.
///
/// # Safety
/// As the C function's: `req` readable, `rem` null or writable.
unsafe fn real_nanosleep(req: *const libc::timespec, rem: *mut libc::timespec) -> c_int {
    match next(&NANOSLEEP, b"nanosleep\0") {
        // SAFETY: the C library's `nanosleep`, of this signature; the caller's arguments.
        Some(f) => unsafe { core::mem::transmute::<*mut c_void, Nanosleep>(f)(req, rem) },
        None => {
            // SAFETY: as above, the system call (which sets errno through `syscall`).
            unsafe { libc::syscall(libc::SYS_nanosleep, req, rem) as c_int }
        }
    }
}

/// The C library's `usleep`: 0, or -1 with `errno`.
fn real_usleep(us: libc::useconds_t) -> c_int {
    match next(&USLEEP, b"usleep\0") {
        // SAFETY: the C library's `usleep`, of this signature.
        Some(f) => unsafe { core::mem::transmute::<*mut c_void, Usleep>(f)(us) },
        None => {
            let ts = libc::timespec {
                tv_sec: (us / 1_000_000) as libc::time_t,
                tv_nsec: (us % 1_000_000) as libc::c_long * 1000,
            };
            // SAFETY: `ts` is readable; no remainder is asked for.
            unsafe { real_nanosleep(&ts, core::ptr::null_mut()) }
        }
    }
}

/// The C library's `sleep`: the seconds left unslept (0 when it slept them all).
fn real_sleep(secs: c_uint) -> c_uint {
    match next(&SLEEP, b"sleep\0") {
        // SAFETY: the C library's `sleep`, of this signature.
        Some(f) => unsafe { core::mem::transmute::<*mut c_void, Sleep>(f)(secs) },
        None => {
            let ts = libc::timespec {
                tv_sec: secs as libc::time_t,
                tv_nsec: 0,
            };
            let mut rem = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` readable, `rem` writable.
            if unsafe { real_nanosleep(&ts, &mut rem) } == 0 {
                0
            } else {
                rem.tv_sec as c_uint + c_uint::from(rem.tv_nsec > 0)
            }
        }
    }
}

/// `clock_gettime(clock)` in nanoseconds, `None` for a clock the kernel does not have.
fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is writable; an unknown clock is refused with EINVAL.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Sets the calling thread's `errno`.
fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns a valid pointer to the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
}
