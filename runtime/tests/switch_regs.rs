//! Asm-level check that a switch preserves every callee-saved register and the FP control
//! state of each context: three contexts (the test thread and two fibers) in a ring, each
//! loading its own known values, switching to the next, and checking its values when
//! resumed — millions of times, task to task directly. Both FP control modes: `Preserve`
//! with distinct, shared and default states; `AssumeDefault` with the default state (its
//! promise), and, with `debug_assertions`, a context that breaks the promise aborts the
//! process naming itself (checked in a child process).
#![cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]

mod child_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use lagom::FpControl;
use lagom::arch::{Context, DefaultStack, Fiber, switch};

/// `lagom::arch::switch` behind a plain call: a function must preserve the callee-saved
/// registers and FP control for its caller, whatever the inlined switch (and the
/// compiler-generated saves it relies on, through `clobber_abi`) does inside.
#[inline(never)]
extern "C" fn switch_fn(from: *mut Context, to: *const Context) {
    // SAFETY: forwarded from load_switch_store's contract.
    unsafe { switch(from, to) }
}

/// Offset (in words) of the values read back after the switch, in the exchange buffer.
const GOT: usize = 32;

#[cfg(target_arch = "x86_64")]
mod regs {
    use super::*;

    /// rbx, rbp, r12, r13, r14, r15; then MXCSR | x87 control word << 32.
    pub const N: usize = 6;

    /// Per-context MXCSR (rounding mode, FTZ, DAZ) and x87 control word (precision,
    /// rounding), all exceptions masked; see [`super::Mode`] for which one a round uses. In
    /// the ring 0 → 1 → 2 → 0 the distinct states differ in the x87 word only (0 → 1), in
    /// MXCSR only (1 → 2) and in both (2 → 0), so a switch that compares or reloads only one
    /// of them fails.
    pub fn fp_control(who: usize, round: u64) -> u64 {
        const FP: [u64; 3] = [
            0x3F80 | 0x037F << 32, // round down; extended precision
            0x3F80 | 0x027F << 32, // round down; double precision
            0xFFC0 | 0x027F << 32, // toward zero, FTZ, DAZ; double precision
        ];
        match super::Mode::of(round) {
            super::Mode::Default => DEFAULT_FP,
            super::Mode::Distinct => FP[who],
            super::Mode::Shared => 0x9FC0 | 0x0B7F << 32, // FTZ + DAZ; x87 round up
        }
    }

    pub const DEFAULT_FP: u64 = 0x1F80 | 0x037F << 32;

    /// The FP control state now: MXCSR | x87 control word << 32.
    pub fn fp_now() -> u64 {
        let mut v = [0u32; 2];
        // SAFETY: stores MXCSR and the x87 control word into the local array.
        unsafe { core::arch::asm!("stmxcsr [{0}]", "fnstcw [{0} + 4]", in(reg) v.as_mut_ptr()) };
        u64::from(v[0]) | u64::from(v[1] & 0xFFFF) << 32
    }

    /// Drops what is status rather than state: the MXCSR exception flags (bits 0-5).
    pub fn fp_state(v: u64) -> u64 {
        v & !0x3F
    }

    /// Loads `buf[..=N]` into the registers, calls the switch, stores the registers into
    /// `buf[GOT..=GOT + N]` when resumed.
    ///
    /// # Safety
    /// As for `lagom::arch::switch`.
    #[inline(never)]
    pub unsafe fn load_switch_store(buf: &mut [u64; 64], from: *mut Context, to: *const Context) {
        buf[GOT + N] = 0;
        // SAFETY: the asm saves and restores rbx and rbp itself, declares every other
        // register it (or the switch) clobbers, and keeps the stack balanced.
        unsafe {
            core::arch::asm!(
                "push rbp",              // rbp and rbx cannot be declared clobbered
                "push rbx",
                "push rax",              // keep the buffer address across the switch
                "mov rbx, [rax]",        // load the known values
                "mov rbp, [rax + 8]",
                "mov r12, [rax + 16]",
                "mov r13, [rax + 24]",
                "mov r14, [rax + 32]",
                "mov r15, [rax + 40]",
                "ldmxcsr [rax + 48]",    // and the FP control state
                "fldcw [rax + 52]",
                "call {switch}",         // switch away; returns when resumed
                "mov rax, [rsp]",        // the buffer address again
                "mov [rax + 256], rbx",  // store what we got back
                "mov [rax + 264], rbp",
                "mov [rax + 272], r12",
                "mov [rax + 280], r13",
                "mov [rax + 288], r14",
                "mov [rax + 296], r15",
                "stmxcsr [rax + 304]",
                "fnstcw [rax + 308]",
                "pop rax",
                "pop rbx",
                "pop rbp",
                switch = sym switch_fn,
                in("rax") buf.as_mut_ptr(),
                in("rdi") from,
                in("rsi") to,
                out("r12") _, out("r13") _, out("r14") _, out("r15") _,
                clobber_abi("sysv64"),
            );
        }
    }

    /// Round toward zero in MXCSR, and the state as lagom's abort message prints it.
    pub fn set_non_default_fp() -> &'static str {
        let v: u32 = 0x7F80;
        // SAFETY: a valid MXCSR (all exceptions masked); the caller does no FP arithmetic.
        unsafe { core::arch::asm!("ldmxcsr [{0}]", in(reg) &v) };
        "0x37f00007f80"
    }

    /// Puts the ABI default FP control back on this thread.
    pub fn reset_fp() {
        let v = DEFAULT_FP;
        // SAFETY: loading valid default MXCSR and x87 control values from a local.
        unsafe { core::arch::asm!("ldmxcsr [{0}]", "fldcw [{0} + 4]", in(reg) &v) };
    }
}

#[cfg(target_arch = "aarch64")]
mod regs {
    use super::*;

    /// x19..x28, x29, d8..d15; then FPCR.
    pub const N: usize = 19;

    pub const DEFAULT_FP: u64 = 0;

    /// Per-context FPCR: rounding mode (bits 22-23) and flush-to-zero (bit 24); see
    /// [`super::Mode`] for which one a round uses.
    pub fn fp_control(who: usize, round: u64) -> u64 {
        const FP: [u64; 3] = [1 << 22, 2 << 22, 3 << 22 | 1 << 24];
        match super::Mode::of(round) {
            super::Mode::Default => DEFAULT_FP,
            super::Mode::Distinct => FP[who],
            super::Mode::Shared => 1 << 24 | 1 << 22,
        }
    }

    /// The FP control state now: FPCR.
    pub fn fp_now() -> u64 {
        let v: u64;
        // SAFETY: reading FPCR has no side effects.
        unsafe { core::arch::asm!("mrs {0}, fpcr", out(reg) v) };
        v
    }

    /// FPCR has no status bits.
    pub fn fp_state(v: u64) -> u64 {
        v
    }

    /// Loads `buf[..=N]` into the registers, calls the switch, stores the registers into
    /// `buf[GOT..=GOT + N]` when resumed.
    ///
    /// # Safety
    /// As for `lagom::arch::switch`.
    #[inline(never)]
    pub unsafe fn load_switch_store(buf: &mut [u64; 64], from: *mut Context, to: *const Context) {
        // SAFETY: the asm saves and restores x19, x29 and x30 itself (LLVM reserves them),
        // declares every other register it (or the switch) clobbers, keeps sp balanced.
        unsafe {
            core::arch::asm!(
                "stp x29, x30, [sp, #-32]!", // reserved registers, saved by hand
                "stp x19, x9, [sp, #16]",    // x19, and the buffer address (x9)
                "ldp x19, x20, [x9]",        // load the known values
                "ldp x21, x22, [x9, #16]",
                "ldp x23, x24, [x9, #32]",
                "ldp x25, x26, [x9, #48]",
                "ldp x27, x28, [x9, #64]",
                "ldr x29, [x9, #80]",
                "ldp d8, d9, [x9, #88]",
                "ldp d10, d11, [x9, #104]",
                "ldp d12, d13, [x9, #120]",
                "ldp d14, d15, [x9, #136]",
                "ldr x10, [x9, #152]",       // and the FP control register
                "msr fpcr, x10",
                "bl {switch}",               // switch away (x0 = from, x1 = to)
                "ldr x9, [sp, #24]",         // the buffer address again
                "stp x19, x20, [x9, #256]",  // store what we got back
                "stp x21, x22, [x9, #272]",
                "stp x23, x24, [x9, #288]",
                "stp x25, x26, [x9, #304]",
                "stp x27, x28, [x9, #320]",
                "str x29, [x9, #336]",
                "stp d8, d9, [x9, #344]",
                "stp d10, d11, [x9, #360]",
                "stp d12, d13, [x9, #376]",
                "stp d14, d15, [x9, #392]",
                "mrs x10, fpcr",
                "str x10, [x9, #408]",
                "ldr x19, [sp, #16]",
                "ldp x29, x30, [sp], #32",
                switch = sym switch_fn,
                in("x9") buf.as_mut_ptr(),
                in("x0") from,
                in("x1") to,
                out("x20") _, out("x21") _, out("x22") _, out("x23") _, out("x24") _,
                out("x25") _, out("x26") _, out("x27") _, out("x28") _,
                out("v8") _, out("v9") _, out("v10") _, out("v11") _,
                out("v12") _, out("v13") _, out("v14") _, out("v15") _,
                clobber_abi("C"),
            );
        }
    }

    /// Round toward zero in FPCR, and the state as lagom's abort message prints it.
    pub fn set_non_default_fp() -> &'static str {
        // SAFETY: a valid FPCR (no traps enabled); the caller does no FP arithmetic.
        unsafe { core::arch::asm!("msr fpcr, {0}", in(reg) 3u64 << 22) };
        "0xc00000"
    }

    /// Puts the default FPCR back on this thread.
    pub fn reset_fp() {
        // SAFETY: writing the Linux default FPCR.
        unsafe { core::arch::asm!("msr fpcr, xzr") };
    }
}

use regs::N;

/// Which FP control state the contexts load in a round. A context resumed in round `r`
/// compares its words of round `r - 1` with those the previous context loaded in round `r`;
/// each mode lasts two rounds, so the ring runs through every path of the switch: equal
/// default words (no reload), distinct words (reload), and equal non-default words (no
/// reload, the non-default state must stay in the register), plus the transitions between
/// them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// The ABI default in every context.
    Default,
    /// A different non-default state in each context.
    Distinct,
    /// The same non-default state in every context.
    Shared,
}

impl Mode {
    fn of(round: u64) -> Mode {
        match (round / 2) % 3 {
            0 => Mode::Default,
            1 => Mode::Distinct,
            _ => Mode::Shared,
        }
    }
}

/// Round trips of the ring: each is three switches.
const ROUNDS: u64 = 1_000_000;

/// One context's part of the ring: `rounds` times load, switch to `to`, check. In
/// `AssumeDefault` the contexts keep the promise: they load the default FP control only.
fn ring_side(who: usize, fp: FpControl, rounds: u64, ends: (usize, usize), failures: &AtomicU64) {
    let (from, to) = (ends.0 as *mut Context, ends.1 as *const Context);
    let mut buf = [0u64; 64];
    for round in 0..rounds {
        for (r, slot) in buf[..N].iter_mut().enumerate() {
            // Distinct in every register, context and round; never 0.
            *slot = ((who as u64 + 1) << 56)
                | ((r as u64 + 1) << 48)
                | (round.wrapping_mul(0x9E37_79B9) & 0xFFFF_FFFF_FFFF);
        }
        buf[N] = match fp {
            FpControl::AssumeDefault => regs::DEFAULT_FP,
            _ => regs::fp_control(who, round),
        };
        // SAFETY: `from` is this context, `to` the suspended next one in the ring.
        unsafe { regs::load_switch_store(&mut buf, from, to) };
        let wrong = buf[GOT..GOT + N] != buf[..N] || regs::fp_state(buf[GOT + N]) != buf[N];
        // Report the first mismatch only (counting all of them).
        if wrong && failures.fetch_add(1, Ordering::Relaxed) == 0 {
            eprintln!(
                "{fp:?}: context {who} round {round}: expected {:x?}, got {:x?}",
                &buf[..=N],
                &buf[GOT..=GOT + N]
            );
        }
    }
}

/// Runs the ring (this thread and two fibers, every context in mode `fp`) for `rounds`
/// round trips; returns the number of rounds in which some context found a register or its
/// FP control state changed.
fn ring(fp: FpControl, rounds: u64) -> u64 {
    let failures = Arc::new(AtomicU64::new(0));
    let mut main_ctx = Box::new(Context::with_fp_control(fp));
    let main_ptr: *mut Context = &mut *main_ctx;
    let main_addr = main_ptr as usize;
    // The fibers' contexts are known only once both exist: pass them through cells.
    let ctxs = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let side = |who: usize| {
        let (ctxs, failures) = (Arc::clone(&ctxs), Arc::clone(&failures));
        move || {
            let me = ctxs[who - 1].load(Ordering::Relaxed);
            let next = if who == 1 {
                ctxs[1].load(Ordering::Relaxed)
            } else {
                main_addr
            };
            ring_side(who, fp, rounds, (me, next), &failures);
        }
    };
    let stack = || DefaultStack::with_default_size().unwrap();
    let mut f1 = Fiber::new("ring-1", 1, stack(), side(1));
    let mut f2 = Fiber::new("ring-2", 2, stack(), side(2));
    f1.set_fp_control(fp);
    f2.set_fp_control(fp);
    ctxs[0].store(f1.context() as usize, Ordering::Relaxed);
    ctxs[1].store(f2.context() as usize, Ordering::Relaxed);
    // SAFETY: neither fiber runs yet; main_ctx outlives them.
    unsafe {
        f1.set_parent(main_ptr);
        f2.set_parent(main_ptr);
    }
    ring_side(0, fp, rounds, (main_addr, f1.context() as usize), &failures);
    // Both fibers are suspended inside their last switch; let each finish.
    for f in [&mut f1, &mut f2] {
        assert!(!f.is_finished());
        // SAFETY: the fiber is suspended; it switches back to main_ctx (its parent) when done.
        unsafe { switch(main_ptr, f.context()) };
        assert!(f.take_outcome().unwrap().is_ok());
    }
    // The last round may have left this thread on a non-default FP control; restore it.
    regs::reset_fp();
    failures.load(Ordering::Relaxed)
}

#[test]
fn preserve_keeps_registers_and_each_contexts_fp_control_over_millions_of_switches() {
    let failures = ring(FpControl::Preserve, ROUNDS);
    assert_eq!(failures, 0, "registers or FP control were not preserved");
}

#[test]
fn assume_default_keeps_registers_and_the_default_fp_control() {
    let failures = ring(FpControl::AssumeDefault, ROUNDS / 2);
    assert_eq!(
        failures, 0,
        "registers or the default FP control were not kept"
    );
}

/// The environment variable that selects a child scenario of the promise test.
const CHILD_ENV: &str = "LAGOM_FP_PROMISE_CHILD";

/// The child side of the promise tests: a context in the scenario's mode changes its FP
/// control state and switches away (scenario `fiber-<mode>`: a fiber does it; `thread`: this
/// thread's own context, in `AssumeDefault`, does it).
#[test]
fn child() {
    let Ok(scenario) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mode = match scenario.as_str() {
        "fiber-preserve" => FpControl::Preserve,
        _ => FpControl::AssumeDefault,
    };
    let mut main_ctx = Box::new(Context::with_fp_control(mode));
    let main_ptr: *mut Context = &mut *main_ctx;
    let main_addr = main_ptr as usize;
    let me = Arc::new(AtomicUsize::new(0));
    let me_in_fiber = Arc::clone(&me);
    let in_fiber = scenario.starts_with("fiber");
    let mut f = Fiber::new(
        "fp-breaker",
        9,
        DefaultStack::with_default_size().unwrap(),
        move || {
            if in_fiber {
                regs::set_non_default_fp();
                let me = me_in_fiber.load(Ordering::Relaxed) as *mut Context;
                // SAFETY: `me` is this fiber's context, main_addr the suspended test thread.
                unsafe { switch(me, main_addr as *mut Context) };
                regs::reset_fp();
            }
        },
    );
    f.set_fp_control(mode);
    me.store(f.context() as usize, Ordering::Relaxed);
    // SAFETY: the fiber is not running; main_ctx outlives it.
    unsafe { f.set_parent(main_ptr) };
    if !in_fiber {
        regs::set_non_default_fp();
    }
    // SAFETY: main_ptr is this thread's context, the fiber is suspended (or fresh).
    unsafe { switch(main_ptr, f.context()) };
    let back = regs::fp_state(regs::fp_now());
    // SAFETY: as above; the fiber ends and switches back.
    unsafe { switch(main_ptr, f.context()) };
    assert!(f.is_finished());
    regs::reset_fp();
    eprintln!(
        "child scenario {scenario} returned; FP control after the first switch back: {back:#x}"
    );
}

/// Runs a child scenario; returns (stderr, exit code, terminating signal).
fn run_child(scenario: &str) -> (String, Option<i32>, Option<i32>) {
    let run = child_util::run_child(CHILD_ENV, scenario);
    (run.stderr, run.code, run.signal)
}

#[test]
#[cfg(debug_assertions)]
fn assume_default_aborts_naming_the_task_that_changed_its_fp_control() {
    let found = regs::set_non_default_fp();
    regs::reset_fp();
    let (stderr, _, signal) = run_child("fiber-assume-default");
    let expected =
        format!("lagom: task 'fp-breaker' (id 9) switched away with FP control state {found} (");
    assert!(stderr.contains(&expected), "stderr was: {stderr}");
    assert!(
        stderr.contains("under FpControl::AssumeDefault"),
        "stderr was: {stderr}"
    );
    assert_eq!(signal, Some(libc::SIGABRT), "stderr was: {stderr}");
}

#[test]
#[cfg(debug_assertions)]
fn assume_default_aborts_for_a_thread_context_too() {
    let (stderr, _, signal) = run_child("thread");
    assert!(
        stderr.contains("lagom: a context that is not a task's"),
        "stderr was: {stderr}"
    );
    assert_eq!(signal, Some(libc::SIGABRT), "stderr was: {stderr}");
}

/// The control of the two tests above: in `Preserve` the same fiber runs to its end, and the
/// thread gets its own (default) state back while the fiber is suspended with its own.
#[test]
fn preserve_lets_a_context_change_its_fp_control() {
    let (stderr, code, _) = run_child("fiber-preserve");
    assert_eq!(code, Some(0), "stderr was: {stderr}");
    let default = format!("{:#x}", regs::DEFAULT_FP);
    assert!(
        stderr.contains(&format!("after the first switch back: {default}\n")),
        "stderr was: {stderr}"
    );
}
