//! A new context starts with its creator's FP control state (as a new thread inherits its
//! parent's), with the status flags cleared; switching back restores the creator's own.
//! In both FP control modes.
#![cfg(target_arch = "x86_64")]

mod fiber_util;

use std::arch::asm;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use lagom::arch::{DefaultStack, Fiber};

fn mxcsr() -> u32 {
    let mut v: u32 = 0;
    // SAFETY: stmxcsr stores MXCSR to the local variable.
    unsafe { asm!("stmxcsr [{0}]", in(reg) &raw mut v, options(nostack, preserves_flags)) };
    v
}

fn set_mxcsr(v: u32) {
    // SAFETY: ldmxcsr loads MXCSR from the local variable; no floating-point work runs while
    // the test's non-default value is in force.
    unsafe { asm!("ldmxcsr [{0}]", in(reg) &raw const v, options(nostack, preserves_flags)) };
}

/// Round toward zero (RC = 11), all exceptions masked, and the precision flag (a status bit).
const CREATOR: u32 = 0x7F80 | 0x20;

#[test]
fn new_context_inherits_creator_fp_control() {
    let original = mxcsr();
    set_mxcsr(CREATOR);
    let seen = Arc::new(AtomicU32::new(0));
    let seen_in_task = Arc::clone(&seen);
    let mut fibers = vec![Fiber::new(
        "inherits",
        1,
        DefaultStack::with_default_size().unwrap(),
        move || seen_in_task.store(mxcsr(), Ordering::Relaxed),
    )];
    // The creator goes back to the default before running the fiber: the fiber must still
    // start with the value in force when it was created.
    set_mxcsr(original);
    fiber_util::run_round_robin(&mut fibers, None);
    let after = mxcsr();
    assert_eq!(
        seen.load(Ordering::Relaxed) & !0x3F,
        CREATOR & !0x3F,
        "the fiber starts with its creator's control bits"
    );
    assert_eq!(
        after & !0x3F,
        original & !0x3F,
        "the creator gets its own back"
    );
}

/// The same through an `AssumeDefault` switch, which does not read MXCSR: the fresh context
/// still starts with its creator's control bits (the switch hands it the default words to
/// compare with, and they differ), and restores the default before it ends, as the promise
/// of its mode requires.
#[test]
fn new_context_inherits_creator_fp_control_under_assume_default() {
    use lagom::FpControl;
    use lagom::arch::{Context, switch};

    let original = mxcsr();
    set_mxcsr(CREATOR);
    let seen = Arc::new(AtomicU32::new(0));
    let seen_in_task = Arc::clone(&seen);
    let mut fiber = Fiber::new(
        "inherits",
        1,
        DefaultStack::with_default_size().unwrap(),
        move || {
            seen_in_task.store(mxcsr(), Ordering::Relaxed);
            set_mxcsr(0x1F80); // keep the promise: switch away in the default environment
        },
    );
    fiber.set_fp_control(FpControl::AssumeDefault);
    set_mxcsr(original);
    let mut idle = Box::new(Context::with_fp_control(FpControl::AssumeDefault));
    let idle_ptr: *mut Context = &mut *idle;
    // SAFETY: the fiber is fresh; `idle` is this thread's context and outlives it. The fiber
    // runs to its end and switches back to its parent, `idle`.
    unsafe {
        fiber.set_parent(idle_ptr);
        switch(idle_ptr, fiber.context());
    }
    assert!(fiber.is_finished());
    assert_eq!(
        seen.load(Ordering::Relaxed) & !0x3F,
        CREATOR & !0x3F,
        "the fiber starts with its creator's control bits"
    );
    assert_eq!(mxcsr() & !0x3F, 0x1F80, "the default is in force again");
}
