//! Asm-level check that a switch preserves every callee-saved register and the FP control
//! state of each context: three contexts (the test thread and two fibers) in a ring, each
//! loading its own known values, switching to the next, and checking its values when
//! resumed — millions of times, task to task directly.
#![cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]

use std::sync::atomic::{AtomicU64, Ordering};

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

/// One context's part of the ring: `ROUNDS` times load, switch to `to`, check.
fn ring_side(who: usize, from: *mut Context, to: *const Context, failures: &AtomicU64) {
    let mut buf = [0u64; 64];
    for round in 0..ROUNDS {
        for (r, slot) in buf[..N].iter_mut().enumerate() {
            // Distinct in every register, context and round; never 0.
            *slot = ((who as u64 + 1) << 56)
                | ((r as u64 + 1) << 48)
                | (round.wrapping_mul(0x9E37_79B9) & 0xFFFF_FFFF_FFFF);
        }
        buf[N] = regs::fp_control(who, round);
        // SAFETY: `from` is this context, `to` the suspended next one in the ring.
        unsafe { regs::load_switch_store(&mut buf, from, to) };
        let wrong = buf[GOT..GOT + N] != buf[..N] || regs::fp_state(buf[GOT + N]) != buf[N];
        // Report the first mismatch only (counting all of them).
        if wrong && failures.fetch_add(1, Ordering::Relaxed) == 0 {
            eprintln!(
                "context {who} round {round}: expected {:x?}, got {:x?}",
                &buf[..=N],
                &buf[GOT..=GOT + N]
            );
        }
    }
}

#[test]
fn callee_saved_registers_and_fp_control_survive_millions_of_switches() {
    static FAILURES: AtomicU64 = AtomicU64::new(0);
    let mut main_ctx = Box::new(Context::new());
    let main_ptr: *mut Context = &mut *main_ctx;
    // The fibers' contexts are known only once both exist: pass them through cells.
    static F1: AtomicU64 = AtomicU64::new(0);
    static F2: AtomicU64 = AtomicU64::new(0);
    let main_addr = main_ptr as usize;
    let mut f1 = Fiber::new(
        "ring-1",
        1,
        DefaultStack::with_default_size().unwrap(),
        || {
            let (me, next) = (
                F1.load(Ordering::Relaxed) as *mut Context,
                F2.load(Ordering::Relaxed) as *mut Context,
            );
            ring_side(1, me, next, &FAILURES);
        },
    );
    let mut f2 = Fiber::new(
        "ring-2",
        2,
        DefaultStack::with_default_size().unwrap(),
        move || {
            let me = F2.load(Ordering::Relaxed) as *mut Context;
            ring_side(2, me, main_addr as *mut Context, &FAILURES);
        },
    );
    F1.store(f1.context() as u64, Ordering::Relaxed);
    F2.store(f2.context() as u64, Ordering::Relaxed);
    // SAFETY: neither fiber runs yet; main_ctx outlives them.
    unsafe {
        f1.set_parent(main_ptr);
        f2.set_parent(main_ptr);
    }
    ring_side(0, main_ptr, f1.context(), &FAILURES);
    // Both fibers are suspended inside their last switch; let each finish.
    for f in [&mut f1, &mut f2] {
        assert!(!f.is_finished());
        // SAFETY: the fiber is suspended; it switches back to main_ctx (its parent) when done.
        unsafe { switch(main_ptr, f.context()) };
        assert!(f.take_outcome().unwrap().is_ok());
    }
    assert_eq!(
        FAILURES.load(Ordering::Relaxed),
        0,
        "registers or FP control were not preserved"
    );
    // The last round may have left this thread on a non-default FP control; restore it.
    regs::reset_fp();
}
