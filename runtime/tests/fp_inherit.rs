//! A new context starts with its creator's FP control state (as a new thread inherits its
//! parent's), with the status flags cleared; switching back restores the creator's own.
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
