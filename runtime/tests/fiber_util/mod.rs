//! A tiny round-robin driver over fibers, standing in for the threaded runtime
//! in these tests: one thread, its own stack as the idle context, tasks yield back to it.
#![allow(dead_code)]

use std::cell::Cell;

use lagom::FpControl;
use lagom::arch::{Context, Fiber, SignalStack, Stack, switch};

thread_local! {
    /// The running fiber's context (null on the idle context).
    static CURRENT: Cell<*mut Context> = const { Cell::new(std::ptr::null_mut()) };
    /// The idle context of this thread's driver.
    static IDLE: Cell<*mut Context> = const { Cell::new(std::ptr::null_mut()) };
}

/// Switches from the running fiber back to the driver.
pub fn yield_now() {
    let (me, idle) = (CURRENT.get(), IDLE.get());
    assert!(!me.is_null(), "yield_now called outside a fiber");
    // SAFETY: `me` is the running fiber's context and `idle` the suspended driver.
    unsafe { switch(me, idle) }
}

/// Runs every fiber round-robin (each runs until it yields or finishes) until all are
/// finished. Returns the number of switches into fibers.
#[inline(never)]
pub fn run_round_robin<S: Stack>(fibers: &mut [Fiber<S>], signals: Option<&SignalStack>) -> u64 {
    run_round_robin_in(FpControl::Preserve, fibers, signals)
}

/// [`run_round_robin`] with the driver's context and every fiber in FP control mode `fp`.
#[inline(never)]
pub fn run_round_robin_in<S: Stack>(
    fp: FpControl,
    fibers: &mut [Fiber<S>],
    signals: Option<&SignalStack>,
) -> u64 {
    for f in fibers.iter_mut() {
        f.set_fp_control(fp);
    }
    let mut idle = Box::new(Context::with_fp_control(fp));
    let idle_ptr: *mut Context = &mut *idle;
    IDLE.set(idle_ptr);
    for f in fibers.iter_mut() {
        // SAFETY: the fibers are not running; `idle` outlives the loop below.
        unsafe { f.set_parent(idle_ptr) };
    }
    let mut switches = 0;
    loop {
        let mut ran = false;
        for f in fibers.iter_mut().filter(|f| !f.is_finished()) {
            ran = true;
            switches += 1;
            resume(f, idle_ptr, signals);
        }
        if !ran {
            break;
        }
    }
    IDLE.set(std::ptr::null_mut());
    switches
}

/// Switches from the driver into one fiber; a frame of its own so backtraces can name it.
#[inline(never)]
pub fn resume<S: Stack>(f: &mut Fiber<S>, idle: *mut Context, signals: Option<&SignalStack>) {
    CURRENT.set(f.context());
    IDLE.set(idle);
    if let Some(s) = signals {
        // SAFETY: the info lives as long as the fiber, which outlives this switch.
        unsafe { s.set_current(f.info()) };
    }
    // SAFETY: idle is the driver's own context; the fiber is suspended, not running.
    unsafe { switch(idle, f.context()) };
    if let Some(s) = signals {
        // SAFETY: null is always allowed.
        unsafe { s.set_current(std::ptr::null()) };
    }
    CURRENT.set(std::ptr::null_mut());
}
