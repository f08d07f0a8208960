//! The `interpose` feature: lagom's own definitions of the C library's sleep functions —
//! `clock_nanosleep` (what `std::thread::sleep` calls on Linux), `nanosleep`, `usleep` and
//! `sleep` — so that a task of a runtime that opted in
//! ([`Builder::interpose_sleep`](crate::runtime::Builder::interpose_sleep)) that calls them,
//! directly or through `std::thread::sleep` or a C library in the program, sleeps as
//! [`task::sleep`](crate::task::sleep) does: the task blocks on its worker's timer and the
//! worker runs the others. Everywhere else — plain threads, the blocking pool, tasks of a
//! runtime that did not opt in, a task that is unwinding — the hook calls the C library's
//! function (`sys/interpose.rs`: the next definition after the program's, `dlsym(RTLD_NEXT)`),
//! one thread-local read later.
//!
//! ## How the calls reach the hooks
//!
//! A `#[no_mangle]` definition in the program binds the program's calls of that name at link
//! time: std's `thread::sleep` calls `clock_nanosleep` through the program's global offset
//! table, which the static linker fills with the definition linked into the program, and the
//! linker also exports it, so that shared libraries that call it through their PLT bind to it
//! too. Only calls the C library makes to itself are out of reach (glibc's `sleep` and
//! `usleep` call an internal `clock_nanosleep`, which is why those two have hooks of their
//! own). A definition in a library is linked only if the program names the library's crate;
//! lagom always is, and [`Builder::interpose_sleep`](crate::runtime::Builder::interpose_sleep)
//! names the hooks themselves (`sys::interpose::HOOKS`) and, at `build`, checks that a call of
//! `clock_nanosleep` from this program reaches them (`sys::interpose::check`), so that a
//! program that asked for them cannot silently run without them.
//!
//! The hooks themselves, with the C side — the `timespec`s, `errno`, the clocks, the C
//! library's functions — are `sys/interpose.rs`'s; what a hook asks of this module is
//! [`sleep_task_until`], through a function pointer the opt-in installs (the layers point
//! down only).
//!
//! ## A shutdown, and unwinding
//!
//! A hook is an `extern "C"` function, and its caller (std, a C library) is compiled on the
//! assumption that it does not unwind, so a shutdown's cancellation is never raised inside
//! one: the hook's sleep has no cancellation point (`park_uncancelled`). A task that a
//! shutdown cancels while it sleeps in a hook sleeps its full time, as the C function would
//! have, and meets the cancellation at its next call into lagom; a sleep that outlasts the
//! shutdown's timeout leaves the task blocked, and it is abandoned as a task blocked in lagom
//! is (freed without unwinding, `lagom::runtime`'s module doc). Nor does a hook return early
//! with `EINTR`: std's `thread::sleep` calls again with the time left, so a hook that did
//! would spin. A task that is unwinding (a destructor that sleeps) sleeps through the C
//! library: it may not let another task run on its thread while its panic count is raised.
//!
//! ## What this cannot do, and why there are no other hooks
//!
//! * **`std::sync` waits** (locks, `Condvar`, `Once`, channels, `thread::park`) wait on
//!   futexes; a futex hook could make a task wait on a lock's word instead of its thread, but
//!   std's channels and everything built on `thread::park` wait on the *thread's* parker
//!   word, one per OS thread, which std changes before it calls the kernel: two tasks of one
//!   worker parked there would share it and corrupt it (the second's wait finds the word
//!   already "parked", returns at once and spins for ever — a livelock at full CPU where the
//!   worker used to block). So std's channels can never yield a task; only `lagom::sync`'s
//!   can. Hooking the lock words alone would also widen the `unsafe` promise below to every
//!   lock of every crate, and glibc's own waits (pthread mutexes in C libraries) are out of
//!   reach anyway. Not done: the stall monitor names these waits (`futex`) and what to use.
//! * **Blocking file I/O**: `O_NONBLOCK` has no effect on regular files, so a `read`, `write`
//!   or `fsync` on one always blocks its thread; a hook could only hand each call to the
//!   blocking pool (a thread hand-off on every call, where most reads and writes take a
//!   microsecond in the page cache) and would have to tell files from pipes, sockets and
//!   terminals, which need other treatment. Not done: use
//!   [`spawn_blocking`](crate::task::spawn_blocking) for slow file work; the monitor names
//!   the call.
//! * **Signal handlers**: a handler that interrupts a task runs on the task's stack and looks
//!   like the task; if it called a hooked sleep (`nanosleep` is async-signal-safe), the hook
//!   would switch tasks inside the handler. Nothing can tell the two apart, so the opt-in's
//!   `# Safety` section forbids it.

use crate::worker;

/// Whether a call made now may sleep the calling task: in a task (not a worker's idle loop)
/// of a runtime that opted in, which is not unwinding.
fn in_opted_task() -> bool {
    // Mutant `interpose_passes_through` (runtime/tests/mutants.sh): every call goes to the C
    // library, as without the feature.
    if cfg!(lagom_mutant = "interpose_passes_through") {
        return false;
    }
    let Some(wt) = worker::local() else {
        return false;
    };
    if !wt.shared.interpose_sleep || wt.curr.get().is_null() {
        return false;
    }
    #[cfg(feature = "std")]
    if std::thread::panicking() {
        return false;
    }
    true
}

/// A hook's sleep until `deadline` (monotonic ns): if the caller is a task of a runtime that
/// opted in and not unwinding, sleeps the task there without a cancellation point (module
/// doc; a deadline already past is a preemption point) and returns `true`; else returns
/// `false` at once, and the hook calls the C library.
pub(crate) fn sleep_task_until(deadline: u64) -> bool {
    if !in_opted_task() {
        return false;
    }
    let mut slept = false;
    loop {
        if crate::sys::time::monotonic_ns() >= deadline {
            if !slept {
                super::current::try_point();
            }
            return true;
        }
        slept = true;
        let (Some(wt), Some(t)) = (worker::local(), worker::current_task()) else {
            return true;
        };
        let _timer = super::park::TimerGuard(super::park::arm_timer(wt, deadline, t));
        super::park::park_uncancelled();
    }
}
