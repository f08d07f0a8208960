//! Asm-level check that a switch preserves every callee-saved register and the FP control
//! state of each context: three contexts (the test thread and two fibers) in a ring, each
//! loading its own known values, switching to the next, and checking its values when
//! resumed — millions of times, task to task directly.
#![cfg(target_arch = "x86_64")]

use std::sync::atomic::{AtomicU64, Ordering};

use lagom::arch::{Context, DefaultStack, Fiber, switch};

/// `lagom::arch::switch` behind a plain call: a function must preserve the callee-saved
/// registers and FP control words for its caller, whatever the inlined switch (and the
/// compiler-generated saves it relies on, through `clobber_abi`) does inside.
#[inline(never)]
extern "sysv64" fn switch_fn(from: *mut Context, to: *const Context) {
    // SAFETY: forwarded from load_switch_store's contract.
    unsafe { switch(from, to) }
}

/// Round trips of the ring: each is three switches.
const ROUNDS: u64 = 1_000_000;

/// Per-context MXCSR (rounding mode, FTZ) and x87 control word (precision), all exceptions
/// masked; different in each context so that a switch that forgot to restore them shows.
const FP: [(u32, u16); 3] = [(0x3F80, 0x037F), (0x5F80, 0x027F), (0xFF80, 0x007F)];
/// The ABI defaults: used by every context on even rounds (the no-reload fast path).
const FP_DEFAULT: (u32, u16) = (0x1F80, 0x037F);

/// Loads the expected values from `buf[0..7]`, switches `from` → `to`, and when resumed
/// stores what the registers hold into `buf[8..15]`.
///
/// # Safety
/// As for `lagom::arch::switch`.
#[inline(never)]
unsafe fn load_switch_store(buf: &mut [u64; 16], from: *mut Context, to: *const Context) {
    buf[14] = 0;
    // SAFETY: the asm saves and restores rbx and rbp itself, declares every other register
    // it (or the switch) clobbers, and keeps the stack balanced.
    unsafe {
        core::arch::asm!(
            "push rbp",              // rbp and rbx cannot be declared clobbered: save them
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
            "mov [rax + 64], rbx",   // store what we got back
            "mov [rax + 72], rbp",
            "mov [rax + 80], r12",
            "mov [rax + 88], r13",
            "mov [rax + 96], r14",
            "mov [rax + 104], r15",
            "stmxcsr [rax + 112]",
            "fnstcw [rax + 116]",
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

/// One context's part of the ring: `ROUNDS` times load, switch to `to`, check.
fn ring_side(who: usize, from: *mut Context, to: *const Context, failures: &AtomicU64) {
    let mut buf = [0u64; 16];
    for round in 0..ROUNDS {
        for (r, slot) in buf[..6].iter_mut().enumerate() {
            // Distinct in every register, context and round; never 0.
            *slot = ((who as u64 + 1) << 56)
                | ((r as u64 + 1) << 48)
                | (round.wrapping_mul(0x9E37_79B9) & 0xFFFF_FFFF_FFFF);
        }
        let (mxcsr, fpcw) = if round % 2 == 0 { FP_DEFAULT } else { FP[who] };
        buf[6] = mxcsr as u64 | (fpcw as u64) << 32;
        // SAFETY: `from` is this context, `to` the suspended next one in the ring.
        unsafe { load_switch_store(&mut buf, from, to) };
        // MXCSR exception flags (bits 0-5) are status, not preserved state.
        let got_fp = buf[14] & !0x3F;
        let wrong = buf[8..14] != buf[0..6] || got_fp != buf[6];
        // Report the first mismatch only (counting all of them).
        if wrong && failures.fetch_add(1, Ordering::Relaxed) == 0 {
            eprintln!(
                "context {who} round {round}: expected {:x?}, got {:x?}",
                &buf[0..7],
                &buf[8..15]
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
    // The last round (odd) left this thread on FP[0]; put the ABI defaults back.
    let defaults: u64 = FP_DEFAULT.0 as u64 | (FP_DEFAULT.1 as u64) << 32;
    // SAFETY: loading valid default MXCSR and x87 control values from a local.
    unsafe { core::arch::asm!("ldmxcsr [{0}]", "fldcw [{0} + 4]", in(reg) &defaults) };
}
