//! The aarch64 (AAPCS64, Linux) context switch.
//!
//! `lagom_switch` is entered with `bl`/`blr` (return address in x30) and left with `ret`, so
//! calls and returns stay paired. It saves the callee-saved registers x19–x28, the frame
//! pointer x29, the link register x30, the low halves d8–d15 of v8–v15 and FPCR (the FP
//! control register, callee-saved state; reloaded only when it differs — `msr fpcr` is slow).
//! The comparison runs on the switching side: it compares its own FPCR with the one in the
//! resumed context's frame.
//!
//! `lagom_switch_no_fp` is the [`super::FpControl::AssumeDefault`] path: a second entry into
//! the same body that does not read FPCR (`mrs`) but takes 0, the default, which is what the
//! promise says the register holds; the frame records it. The resumed context's saved FPCR
//! is still compared with it, so a `Preserve` or fresh context resumed from it gets its own
//! state back (as on x86_64); a context suspended here resumed by a `Preserve` switch gets 0
//! loaded if the switcher's FPCR is not 0.
//!
//! A suspended context, at its saved stack pointer (addresses grow upwards):
//!
//! ```text
//!   sp + 176 +--------------------+  <- CFA of the frame that called switch
//!   sp + 160 | x29 | x30          |
//!   sp + 144 | x27 | x28          |
//!   sp + 128 | x25 | x26          |
//!   sp + 112 | x23 | x24          |
//!   sp +  96 | x21 | x22          |
//!   sp +  80 | x19 | x20          |
//!   sp +  64 | d14 | d15          |
//!   sp +  48 | d12 | d13          |
//!   sp +  32 | d10 | d11          |
//!   sp +  16 | d8  | d9           |
//!   sp +   0 | FPCR | 0           |  FPCR: read (Preserve), or 0, the default (AssumeDefault)
//!            +--------------------+  <- Context::sp
//! ```
//!
//! A fresh stack holds, below its base, the padding word and the parent link (as on x86_64),
//! then a frame of this shape with x19 = entry, x20 = arg, x29 = 0, x30 =
//! `lagom_fiber_trampoline` and the creator's FPCR. The trampoline's CFI computes
//! `CFA = *(*(sp)) + 176` and restores the registers above from the idle context's frame.

use core::arch::{asm, global_asm};

use super::{Context, EntryFn};

global_asm!(
    ".text",
    ".p2align 4",
    ".globl lagom_switch",
    ".type lagom_switch, %function",
    ".globl lagom_switch_no_fp",
    ".type lagom_switch_no_fp, %function",
    "lagom_switch:",
    ".cfi_startproc", // CFA = sp, return address in x30 (both entries)
    "mrs x9, fpcr",   // x9 = our FP control register (Preserve)
    "b 3f",           // to the common body
    "lagom_switch_no_fp:",
    "mov x9, xzr",      // x9 = 0, the default: not read (AssumeDefault promises it)
    "3:",               // common body: x9 = the FPCR this context suspends with
    "sub sp, sp, #176", // room for the whole frame
    ".cfi_def_cfa_offset 176", // CFA = sp + 176
    "stp x29, x30, [sp, #160]", // frame pointer and return address
    ".cfi_offset x29, -16", // x29 at CFA - 16
    ".cfi_offset x30, -8", // x30 at CFA - 8
    "stp x27, x28, [sp, #144]", // x27, x28
    ".cfi_offset x27, -32", // x27 at CFA - 32
    ".cfi_offset x28, -24", // x28 at CFA - 24
    "stp x25, x26, [sp, #128]", // x25, x26
    ".cfi_offset x25, -48", // x25 at CFA - 48
    ".cfi_offset x26, -40", // x26 at CFA - 40
    "stp x23, x24, [sp, #112]", // x23, x24
    ".cfi_offset x23, -64", // x23 at CFA - 64
    ".cfi_offset x24, -56", // x24 at CFA - 56
    "stp x21, x22, [sp, #96]", // x21, x22
    ".cfi_offset x21, -80", // x21 at CFA - 80
    ".cfi_offset x22, -72", // x22 at CFA - 72
    "stp x19, x20, [sp, #80]", // x19, x20
    ".cfi_offset x19, -96", // x19 at CFA - 96
    ".cfi_offset x20, -88", // x20 at CFA - 88
    "stp d14, d15, [sp, #64]", // d14, d15
    ".cfi_offset 78, -112", // d14 (DWARF 78) at CFA - 112
    ".cfi_offset 79, -104", // d15 (DWARF 79) at CFA - 104
    "stp d12, d13, [sp, #48]", // d12, d13
    ".cfi_offset 76, -128", // d12 at CFA - 128
    ".cfi_offset 77, -120", // d13 at CFA - 120
    "stp d10, d11, [sp, #32]", // d10, d11
    ".cfi_offset 74, -144", // d10 at CFA - 144
    ".cfi_offset 75, -136", // d11 at CFA - 136
    "stp d8, d9, [sp, #16]", // d8, d9
    ".cfi_offset 72, -160", // d8 at CFA - 160
    ".cfi_offset 73, -152", // d9 at CFA - 152
    "stp x9, xzr, [sp]", // store x9, with a zero pad word
    "mov x10, sp",      // sp cannot be stored directly
    "str x10, [x0]",    // from->sp = sp: this context is now suspended
    "ldr x10, [x1]",    // x10 = to->sp
    "mov sp, x10",      // we now run on the other stack
    "ldr x10, [sp]",    // the resumed context's FPCR
    "cmp x9, x10",      // same as ours?
    "b.ne 2f",          // no: reload it (out of line)
    "1:",               // the resumed context's frame has our shape
    ".cfi_remember_state", // the slow path resumes with this CFI state
    "ldp d8, d9, [sp, #16]", // restore d8, d9
    "ldp d10, d11, [sp, #32]", // d10, d11
    "ldp d12, d13, [sp, #48]", // d12, d13
    "ldp d14, d15, [sp, #64]", // d14, d15
    "ldp x19, x20, [sp, #80]", // x19, x20
    "ldp x21, x22, [sp, #96]", // x21, x22
    "ldp x23, x24, [sp, #112]", // x23, x24
    "ldp x25, x26, [sp, #128]", // x25, x26
    "ldp x27, x28, [sp, #144]", // x27, x28
    "ldp x29, x30, [sp, #160]", // frame pointer and return address
    "add sp, sp, #176", // drop the frame
    ".cfi_def_cfa_offset 0", // CFA = sp
    "ret",              // return into the resumed context (x30)
    "2:",               // slow path: FPCR differs
    ".cfi_restore_state", // CFA = sp + 176 again
    "msr fpcr, x10",    // load the resumed context's FPCR
    "b 1b",             // continue restoring
    ".cfi_endproc",
    ".size lagom_switch, . - lagom_switch",
    ".size lagom_switch_no_fp, . - lagom_switch_no_fp",
    "",
    ".p2align 4",
    ".globl lagom_fiber_trampoline",
    ".type lagom_fiber_trampoline, %function",
    "lagom_fiber_trampoline:",
    ".cfi_startproc",
    // DW_CFA_def_cfa_expression, 7 bytes: DW_OP_breg31 (sp) 0; DW_OP_deref (the parent link);
    // DW_OP_deref (the idle context's saved sp); DW_OP_plus_uconst 176 (its switch frame).
    ".cfi_escape 0x0f, 7, 0x8f, 0x00, 0x06, 0x06, 0x23, 0xb0, 0x01",
    ".cfi_offset x29, -16", // the idle context's frame pointer
    ".cfi_offset x30, -8",  // and return address (the return-address column)
    ".cfi_offset x19, -96", // x19
    ".cfi_offset x20, -88", // x20
    "mov x0, x20",          // first argument: arg (restored from the initial frame)
    "blr x19",              // entry(arg); sp is 16-aligned
    "brk #1",               // entry never returns
    ".cfi_endproc",
    ".size lagom_fiber_trampoline, . - lagom_fiber_trampoline",
);

unsafe extern "C" {
    /// See [`switch_preserve`].
    fn lagom_switch(from: *mut Context, to: *const Context);
    /// See [`switch_assume_default`].
    fn lagom_switch_no_fp(from: *mut Context, to: *const Context);
    /// Entered by the first `ret` into a fresh context; calls `x19(x20)`. Not callable.
    fn lagom_fiber_trampoline();
}

/// The default FP control state: FPCR = 0 (round to nearest, no flush-to-zero, default NaN
/// off, no traps), Linux's initial value.
#[cfg(debug_assertions)]
pub(super) const DEFAULT_FP_CONTROL: u64 = 0;

/// How [`fp_control_now`] encodes the state, for messages.
#[cfg(debug_assertions)]
pub(super) const FP_CONTROL_LAYOUT: &str = "FPCR";

/// Saves the running context into `from` and resumes `to`, preserving FPCR exactly
/// ([`super::FpControl::Preserve`]).
///
/// # Safety
/// See [`super::switch`].
#[inline(always)]
pub(super) unsafe fn switch_preserve(from: *mut Context, to: *const Context) {
    // SAFETY: forwarded contract; lagom_switch follows AAPCS64 for its caller.
    unsafe { lagom_switch(from, to) }
}

/// Saves the running context into `from` and resumes `to` without reading FPCR
/// ([`super::FpControl::AssumeDefault`]). With `debug_assertions`, first checks the promise
/// and aborts if it is broken.
///
/// # Safety
/// See [`super::switch`].
#[inline(always)]
pub(super) unsafe fn switch_assume_default(from: *mut Context, to: *const Context) {
    #[cfg(debug_assertions)]
    {
        let now = fp_control_now();
        if now != DEFAULT_FP_CONTROL {
            super::fp::broken_promise(from, now);
        }
    }
    // SAFETY: forwarded contract; lagom_switch_no_fp follows AAPCS64 for its caller.
    unsafe { lagom_switch_no_fp(from, to) }
}

/// The calling thread's FP control register (FPCR). A new context starts with its creator's,
/// as a new thread inherits its parent's; usually that is every context's value (0 in the
/// default environment), so no switch has to reload it.
fn fp_control_now() -> u64 {
    let fpcr: u64;
    // SAFETY: reading FPCR has no side effects.
    unsafe { asm!("mrs {0}, fpcr", out(reg) fpcr, options(nomem, nostack, preserves_flags)) };
    fpcr
}

/// Writes the initial frame below `top` (the 16-aligned address of the parent link) and
/// returns the stack pointer to store in the new context.
///
/// # Safety
/// The 176 bytes below `top` must be writable and unused.
pub(super) unsafe fn initial_frame(top: usize, entry: EntryFn, arg: *mut u8) -> *mut u8 {
    let mut frame = [0u64; 22];
    frame[0] = fp_control_now(); // sp + 0: FPCR, the creator's, as a new thread inherits it
    frame[10] = entry as usize as u64; // sp + 80: x19 = entry
    frame[11] = arg as u64; // sp + 88: x20 = arg
    frame[20] = 0; // sp + 160: x29 = 0 ends the frame chain
    frame[21] = lagom_fiber_trampoline as *const () as usize as u64; // sp + 168: x30
    let sp = (top - frame.len() * 8) as *mut u64;
    // SAFETY: per contract the 176 bytes below top are ours; top is 16-aligned so sp is too.
    unsafe { sp.copy_from_nonoverlapping(frame.as_ptr(), frame.len()) };
    sp.cast()
}
