//! The runtime's own synchronization, and the loom shim under it (internal: the user-facing
//! blocking primitives are `lagom::sync`; this is what the scheduler itself synchronizes with,
//! as the kernel's `kernel/locking/` is to its drivers).
//!
//! Every atomic and every cell that the runtime shares between threads comes from here.
//! Normally these are `core`'s types; compiled with `RUSTFLAGS="--cfg loom"` they are loom's,
//! so the models in `loom-tests/` run the runtime's *real* functions under loom's exhaustive
//! scheduler rather than a copy of them (the approach of tokio's `loom/` module).
//!
//! * [`atomic`] — atomics and fences, `core`'s or loom's.
//! * [`cell`] — an `UnsafeCell` with loom's closure-based API, so that loom can check every
//!   access for data races.
//! * [`llist`] — the intrusive lock-free wakelist: push one entry, take all entries.
//! * [`futex`] — a word to sleep on: `futex(2)`, or a loom-visible stand-in under loom.
//! * [`kick`] — the idle/kick protocol between an idle worker and the waker that gives it work.
//! * [`lock`] — the runqueue lock: spins up to 20 µs, then sleeps on a futex.
//! * [`resched`] — a worker's resched word: the bits that say a scheduling decision is due
//!   for its running task (need-resched, the tick, a pending wakelist), one load to test.
//! * [`spin_loop`] — the spin hint, which loom must see.
//! * [`probe`] — the loom models' coverage probes (`probe!`), nothing outside `cfg(loom)`.
//! * `loom_const_fn!` — a constructor that is `const fn` normally and a plain `fn` under
//!   loom, whose atomics and mutexes cannot be built in a constant.
//!
//! The module is private; under `cfg(loom)` it is public (hidden) and re-exported as
//! `lagom::model::locking`, so that the loom models reach the real code. Its items are building
//! blocks of the runtime, documented for that reader.
//!
//! ## Mutants
//!
//! Each loom model names a one-line mutation that breaks the protocol it checks (a weakened
//! ordering, a dropped re-check). The mutated line is selected at compile time with
//! `--cfg lagom_mutant="<name>"`, so `loom-tests/mutants.sh` can show loom catching every one.
//! A normal build never has that cfg set.

pub mod atomic;
pub mod cell;
pub mod futex;
pub mod kick;
pub mod llist;
pub mod lock;
pub mod probe;
pub mod resched;

/// Declares a function `const fn` normally and a plain `fn` under `cfg(loom)`.
///
/// loom's atomics, mutexes and condvars register with the model when they are built, so their
/// `new` is not `const`; core's are. The constructors of the shim's types and of everything
/// built from them (the waiter queue, every `lagom::sync` primitive) are declared through this
/// macro, so `static M: lagom::sync::Mutex<_> = Mutex::new(..)` compiles as with std's, and the
/// same body still builds under loom (where a model creates its primitives at run time).
macro_rules! loom_const_fn {
    ($(#[$attr:meta])* $vis:vis fn $($rest:tt)*) => {
        #[cfg(not(loom))]
        $(#[$attr])*
        $vis const fn $($rest)*
        #[cfg(loom)]
        $(#[$attr])*
        $vis fn $($rest)*
    };
}
pub(crate) use loom_const_fn;

/// A hint that the caller is spinning: `core::hint::spin_loop` normally; under loom a yield,
/// so that loom's scheduler lets the thread being waited for make progress.
#[inline]
pub fn spin_loop() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}
