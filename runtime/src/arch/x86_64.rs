//! The x86_64 (System V) context switch.
//!
//! `lagom_switch` is an ordinary function entered with `call`: the caller has already
//! treated every caller-saved register as clobbered, so the switch pushes the six
//! callee-saved registers and one word of FP control state, stores the stack pointer,
//! loads the other context's, pops the same shape and returns with `ret`. The MXCSR control
//! bits and the x87 control word are callee-saved in the ABI; they are reloaded only when they
//! differ between the two contexts (`ldmxcsr` and `fldcw` are slow; the compare is not).
//! The MXCSR exception flags (bits 0–5) are status, not state, and are not carried over.
//!
//! A suspended context, at its saved stack pointer (addresses grow upwards):
//!
//! ```text
//!   sp + 64  +------------------------+  <- CFA of the frame that called switch
//!   sp + 56  | return address         |  pushed by `call lagom_switch`
//!   sp + 48  | rbp                    |
//!   sp + 40  | rbx                    |
//!   sp + 32  | r12                    |
//!   sp + 24  | r13                    |
//!   sp + 16  | r14                    |
//!   sp +  8  | r15                    |
//!   sp +  0  | MXCSR (lo) | x87 CW (hi)|  the FP control word pair, 8 bytes
//!            +------------------------+  <- Context::sp
//! ```
//!
//! A fresh stack made by `init`:
//!
//! ```text
//!   base      +------------------------+  (16-aligned top of the stack)
//!   base - 8  | 0                      |  padding, keeps the link 16-aligned
//!   base - 16 | parent link            |  *const Context of the worker's idle context
//!             +------------------------+  <- rsp when the trampoline starts
//!   base - 24 | lagom_fiber_trampoline |  "return address" of the first switch
//!   base - 32 | rbp = 0                |  ends the frame-pointer chain
//!   base - 40 | rbx = 0                |
//!   base - 48 | r12 = entry            |
//!   base - 56 | r13 = arg              |
//!   base - 64 | r14 = 0                |
//!   base - 72 | r15 = 0                |
//!   base - 80 | 0x1F80 | 0x037F        |  default MXCSR and x87 control word
//!             +------------------------+  <- Context::sp
//! ```
//!
//! The trampoline's CFI defines its caller frame as the idle context's switch frame:
//! `CFA = *(*(rsp)) + 64` (the link at `[rsp]` points at the idle `Context`, whose first
//! word is its saved stack pointer), and finds the return address and the six registers at
//! the offsets of the first diagram.

use core::arch::global_asm;

use super::{Context, EntryFn};

global_asm!(
    ".text",
    ".p2align 4",
    ".globl lagom_switch",
    ".type lagom_switch, @function",
    "lagom_switch:",
    ".cfi_startproc",                   // CFA = rsp + 8, return address at CFA - 8
    "push rbp",                         // save the frame pointer
    ".cfi_adjust_cfa_offset 8",         // CFA = rsp + 16
    ".cfi_offset rbp, -16",             // rbp saved at CFA - 16
    "push rbx",                         // save rbx
    ".cfi_adjust_cfa_offset 8",         // CFA = rsp + 24
    ".cfi_offset rbx, -24",             // rbx saved at CFA - 24
    "push r12",                         // save r12
    ".cfi_adjust_cfa_offset 8",         // CFA = rsp + 32
    ".cfi_offset r12, -32",             // r12 saved at CFA - 32
    "push r13",                         // save r13
    ".cfi_adjust_cfa_offset 8",         // CFA = rsp + 40
    ".cfi_offset r13, -40",             // r13 saved at CFA - 40
    "push r14",                         // save r14
    ".cfi_adjust_cfa_offset 8",         // CFA = rsp + 48
    ".cfi_offset r14, -48",             // r14 saved at CFA - 48
    "push r15",                         // save r15
    ".cfi_adjust_cfa_offset 8",         // CFA = rsp + 56
    ".cfi_offset r15, -56",             // r15 saved at CFA - 56
    "push 0",                           // zeroed slot for the FP control words
    ".cfi_adjust_cfa_offset 8",         // CFA = rsp + 64
    "stmxcsr [rsp]",                    // MXCSR into the low 4 bytes
    "fnstcw [rsp + 4]",                 // x87 control word into the next 2 bytes
    "mov rax, [rsp]",                   // rax = our FP control pair
    "and rax, -64",                     // drop the MXCSR exception flags (status, bits 0-5)
    "mov [rsp], rax",                   // store the cleaned pair
    "mov [rdi], rsp",                   // from->sp = rsp: this context is now suspended
    "mov rsp, [rsi]",                   // rsp = to->sp: we now run on the other stack
    "cmp rax, [rsp]",                   // same FP control state as the resumed context?
    "jne 2f",                           // no: reload it (out of line)
    "1:",                               // the resumed context's frame has our shape
    ".cfi_remember_state",              // the slow path below resumes with this CFI state
    "add rsp, 8",                       // pop the FP control slot
    ".cfi_adjust_cfa_offset -8",        // CFA = rsp + 56
    "pop r15",                          // restore r15
    ".cfi_adjust_cfa_offset -8",        // CFA = rsp + 48
    "pop r14",                          // restore r14
    ".cfi_adjust_cfa_offset -8",        // CFA = rsp + 40
    "pop r13",                          // restore r13
    ".cfi_adjust_cfa_offset -8",        // CFA = rsp + 32
    "pop r12",                          // restore r12
    ".cfi_adjust_cfa_offset -8",        // CFA = rsp + 24
    "pop rbx",                          // restore rbx
    ".cfi_adjust_cfa_offset -8",        // CFA = rsp + 16
    "pop rbp",                          // restore the frame pointer
    ".cfi_adjust_cfa_offset -8",        // CFA = rsp + 8
    "ret",                              // return into the resumed context (paired with its call)
    "2:",                               // slow path: FP control state differs
    ".cfi_restore_state",               // CFA = rsp + 64 again, as at label 1
    "ldmxcsr [rsp]",                    // load the resumed context's MXCSR
    "fldcw [rsp + 4]",                  // load its x87 control word
    "jmp 1b",                           // continue popping
    ".cfi_endproc",
    ".size lagom_switch, . - lagom_switch",
    "",
    ".p2align 4",
    ".globl lagom_fiber_trampoline",
    ".type lagom_fiber_trampoline, @function",
    "lagom_fiber_trampoline:",
    ".cfi_startproc",
    // DW_CFA_def_cfa_expression, 6 bytes: DW_OP_breg7 (rsp) 0; DW_OP_deref (the parent link);
    // DW_OP_deref (the idle context's saved sp); DW_OP_plus_uconst 64 (its switch frame).
    ".cfi_escape 0x0f, 6, 0x77, 0x00, 0x06, 0x06, 0x23, 0x40",
    ".cfi_offset rip, -8",              // return address of the idle context's switch call
    ".cfi_offset rbp, -16",             // its saved registers, as pushed by lagom_switch
    ".cfi_offset rbx, -24",             // rbx
    ".cfi_offset r12, -32",             // r12
    ".cfi_offset r13, -40",             // r13
    ".cfi_offset r14, -48",             // r14
    ".cfi_offset r15, -56",             // r15
    "mov rdi, r13",                     // first argument: arg (restored from the initial frame)
    "call r12",                         // entry(arg); rsp is 16-aligned here, as the ABI wants
    "ud2",                              // entry never returns
    ".cfi_endproc",
    ".size lagom_fiber_trampoline, . - lagom_fiber_trampoline",
);

unsafe extern "sysv64" {
    /// See [`switch`].
    fn lagom_switch(from: *mut Context, to: *const Context);
    /// Entered by the first `ret` into a fresh context; calls `r12(r13)`. Not callable.
    fn lagom_fiber_trampoline();
}

/// Default MXCSR (all exceptions masked, round to nearest) and x87 control word
/// (extended precision, all exceptions masked), as the ABI specifies at process start.
const DEFAULT_FP_CONTROL: u64 = 0x1F80 | (0x037F << 32);

/// Saves the running context into `from` and resumes `to`.
///
/// # Safety
/// See [`super::switch`].
#[inline(always)]
pub(super) unsafe fn switch(from: *mut Context, to: *const Context) {
    // SAFETY: forwarded contract; lagom_switch follows the sysv64 ABI for its caller.
    unsafe { lagom_switch(from, to) }
}

/// Writes the initial frame below `top` (the 16-aligned address of the parent link) and
/// returns the stack pointer to store in the new context.
///
/// # Safety
/// The 64 bytes below `top` must be writable and unused.
pub(super) unsafe fn initial_frame(top: usize, entry: EntryFn, arg: *mut u8) -> *mut u8 {
    let frame: [u64; 8] = [
        DEFAULT_FP_CONTROL,                    // sp + 0: FP control
        0,                                     // sp + 8: r15
        0,                                     // sp + 16: r14
        arg as u64,                            // sp + 24: r13 = arg
        entry as usize as u64,                 // sp + 32: r12 = entry
        0,                                     // sp + 40: rbx
        0,                                     // sp + 48: rbp
        lagom_fiber_trampoline as *const () as usize as u64, // sp + 56: return address
    ];
    let sp = (top - frame.len() * 8) as *mut u64;
    // SAFETY: per contract the 64 bytes below top are ours; top is 16-aligned so sp is too.
    unsafe { sp.copy_from_nonoverlapping(frame.as_ptr(), frame.len()) };
    sp.cast()
}
