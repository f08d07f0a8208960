//! The x86_64 (System V) context switch.
//!
//! `switch` is an `asm!` block inlined at its call site. Following corosensei, it lets the
//! compiler save the callee-saved registers r12–r15 (declared clobbered, together with every
//! caller-saved register through `clobber_abi("sysv64")`), so only the registers live across
//! the switch are saved, and only once per function even when it switches at several points.
//! rbx and rbp are reserved by LLVM and cannot be declared clobbered, so the block pushes them
//! itself, with a slot for the FP control state (MXCSR and the x87 control word, callee-saved
//! in the ABI) and the address at which this context resumes.
//!
//! The switch is symmetric (any context to any other), so there is no `call` whose `ret`
//! could land in the resumed context: it resumes the other context with `jmp` to its saved
//! resume address. The jump is predicted by the branch target buffer; the switch neither
//! pushes nor pops a return-stack-buffer entry, so calls and returns stay paired on both
//! sides and the predictor stays in step. (An out-of-line `call switch` / `ret` would pair
//! counts too, but its `ret` goes to the *other* context's call site, which mispredicts unless
//! both sides switch from the same site: measured in `benches/switch.rs`.) The trampoline
//! enters the entry function with a pushed return address and `jmp`, so it does not leave an
//! unmatched `call` either.
//!
//! # FP control: two paths, chosen per context
//!
//! `switch_preserve` ([`super::FpControl::Preserve`], the default) stores the outgoing
//! context's MXCSR and x87 control word in its frame and passes the address of those words
//! (rdx) to the context it resumes. The resumed side compares them with its own saved words
//! and executes `ldmxcsr` / `fldcw` only when a control bit differs — on a path out of line,
//! taken only by switches between contexts whose FP environments differ (a task that set its
//! own rounding mode, FTZ or DAZ, say). Otherwise the registers already hold exactly the
//! resumed context's control state. The six MXCSR status flags (bits 0–5) are caller-saved in
//! the ABI, like the x87 status word: they are not compared and flow on with the registers
//! when the control bits match.
//!
//! `switch_assume_default` ([`super::FpControl::AssumeDefault`]) neither reads nor writes the
//! registers: it passes the resumed context the address of a read-only copy of the *default*
//! words (`lagom_default_fp_control`: MXCSR 0x1F80, x87 CW 0x037F), which is what the promise
//! says the registers hold, and leaves its own slot unwritten. A fresh context (the
//! trampoline) or one suspended by `switch_preserve` compares with them as above and gets its
//! own state back; a context suspended by `switch_assume_default` compares nothing when
//! resumed. The frame keeps the same shape in both paths, so the trampoline's CFI holds for
//! either. With `debug_assertions`, the path first reads the registers to check the promise.
//! (Writing the default words into the slot instead, two immediate stores, costs a
//! noticeable share of a round trip; the constant is a hidden symbol, so code that inlines
//! the switch must be linked into the same executable or shared object as lagom, as Rust
//! code statically linked is.)
//!
//! Why two paths: the loads are what is slow on Intel when the control state really changes,
//! so they must not run when nothing changed; reading (`stmxcsr`) is what is slow on AMD Zen,
//! where the loads are nearly free. Reading cannot be avoided without giving up exactness: a
//! context may change MXCSR at any time, and nothing but `stmxcsr` tells the switch what it
//! is now — hence the opt-in promise, with which a round trip costs what corosensei's does.
//! The round trips of each variant (`benches/switch.rs`) are in the book,
//! `docs/src/lab/mechanism.md`.
//!
//! Rust itself assumes the default FP environment wherever Rust code runs (`_mm_setcsr`
//! documents changing it as undefined behaviour), so in a program that keeps to that rule
//! every context is suspended with the default words and the reload never runs; the
//! preservation is for programs that change the environment anyway (foreign code, inline
//! asm), which must get their own state back and must not leak it to other contexts.
//!
//! A suspended context, at its saved stack pointer (addresses grow upwards):
//!
//! ```text
//!   sp + 32  +------------------------+  <- CFA: the stack pointer before the asm block
//!   sp + 24  | rbp                    |
//!   sp + 16  | rbx                    |
//!   sp +  8  | MXCSR | x87 CW | (pad) |  4 + 2 + 2 bytes (the pad is not initialised);
//!            |                        |  not written at all by an AssumeDefault switch
//!   sp +  0  | resume address         |  label `2:` inside the switch's asm block
//!            +------------------------+  <- Context::sp
//! ```
//!
//! A fresh stack made by `init` (entered by the first switch, which pops the trampoline's
//! address and jumps there):
//!
//! ```text
//!   base      +------------------------+  (16-aligned top of the stack)
//!   base - 8  | 0                      |  padding, keeps the link 16-aligned
//!   base - 16 | parent link            |  *const Context of the worker's idle context
//!   base - 24 | arg                    |
//!   base - 32 | entry                  |
//!   base - 40 | MXCSR  | x87 CW        |  the creator's (status flags cleared)
//!   base - 48 | lagom_fiber_trampoline |
//!             +------------------------+  <- Context::sp
//! ```
//!
//! The trampoline's CFI defines its caller frame as the idle context's suspended switch:
//! `CFA = *(*(link)) + 32` (the link points at the idle `Context`, whose first word is its
//! saved stack pointer), with the resume address at `CFA - 32` and rbx, rbp above it. The
//! resume address lies inside the function that switched, whose own CFI describes the stack
//! as it was before the asm block, which is exactly the CFA: the unwinder continues there.

use core::arch::{asm, global_asm};

use super::{Context, EntryFn};

global_asm!(
    // The default FP control words (MXCSR, x87 control word, pad), in the frame slot's
    // layout: what switch_assume_default hands the context it resumes. Hidden: linked into
    // the same executable or shared object as the code that inlines the switch.
    ".pushsection .rodata.lagom_default_fp_control, \"a\", @progbits",
    ".p2align 3",
    ".globl lagom_default_fp_control",
    ".hidden lagom_default_fp_control",
    "lagom_default_fp_control:",
    ".long 0x1F80",
    ".short 0x037F",
    ".short 0",
    ".popsection",
    "",
    ".text",
    ".p2align 4",
    ".globl lagom_fiber_trampoline",
    ".type lagom_fiber_trampoline, @function",
    "lagom_fiber_trampoline:",
    ".cfi_startproc",
    // CFA = *(*(rsp + k)) + 32, with k the distance from rsp to the parent link, which
    // changes as the trampoline pops. Each escape is DW_CFA_def_cfa_expression, 6 bytes:
    // DW_OP_breg7 (rsp) k; DW_OP_deref (the link); DW_OP_deref (the idle context's saved sp);
    // DW_OP_plus_uconst 32 (its saved words).
    ".cfi_escape 0x0f, 6, 0x77, 24, 0x06, 0x06, 0x23, 32", // link at rsp + 24
    ".cfi_offset rip, -32",                                // the idle context's resume address
    ".cfi_offset rbx, -16",                                // its rbx
    ".cfi_offset rbp, -8",                                 // its rbp
    // rsp points at the new context's FP control words (its creator's), rdx at those of
    // the context that switched here: load ours only if a control bit differs.
    "mov eax, dword ptr [rsp]",                            // our MXCSR
    "xor eax, dword ptr [rdx]",                            // against the one in the register now
    "test eax, -64",                                       // a control bit (6-31) differs?
    "jnz 4f",                                              // yes: load both words
    "movzx eax, word ptr [rsp + 4]",                       // our x87 control word
    "cmp ax, word ptr [rdx + 4]",                          // against the one in the register now
    "je 5f",                                               // equal: nothing to load
    "4:",                                                  // the FP environment differs:
    "ldmxcsr [rsp]",                                       // load our MXCSR
    "fldcw [rsp + 4]",                                     // and x87 control word
    "5:",                                                  // the FP control state is ours
    "add rsp, 8",                                          // drop the FP control word pair
    ".cfi_escape 0x0f, 6, 0x77, 16, 0x06, 0x06, 0x23, 32", // link at rsp + 16
    "pop rax",                                             // rax = entry
    ".cfi_escape 0x0f, 6, 0x77, 8, 0x06, 0x06, 0x23, 32",  // link at rsp + 8
    "pop rdi", // first argument = arg; rsp = the link, 16-aligned
    ".cfi_escape 0x0f, 6, 0x77, 0, 0x06, 0x06, 0x23, 32", // link at rsp
    "lea rcx, [rip + 3f]", // a return address inside this function...
    // ...pushed as `call` would (rsp = 8 mod 16 at entry). No CFI update: as for a real
    // call, the unwinder sees this frame with rsp = the callee's CFA, i.e. before the push.
    "push rcx",
    "jmp rax", // entry(arg): a call without a return-stack entry
    "3:",      // entry never returns: this address only names the frame
    "ud2",     // (unwinders look up return address - 1: the jmp above)
    ".cfi_endproc",
    ".size lagom_fiber_trampoline, . - lagom_fiber_trampoline",
);

unsafe extern "sysv64" {
    /// Entered by the first switch into a fresh context. Not callable.
    fn lagom_fiber_trampoline();
}

/// The default FP control state, as [`fp_control_now`] encodes it: MXCSR `0x1F80` (all
/// exceptions masked, round to nearest, no FTZ/DAZ) and the x87 control word `0x037F`.
#[cfg(debug_assertions)]
pub(super) const DEFAULT_FP_CONTROL: u64 = 0x1F80 | 0x037F << 32;

/// How [`fp_control_now`] encodes the state, for messages.
#[cfg(debug_assertions)]
pub(super) const FP_CONTROL_LAYOUT: &str = "x87 control word << 32 | MXCSR without status flags";

/// The calling thread's FP control state as the frame stores it: MXCSR in the low half with
/// its six status flags cleared (they are caller-saved), the x87 control word above it.
///
/// A new context starts with its creator's control state, as a new thread inherits its
/// parent's; in the usual case (Rust code runs in the default environment) it then equals
/// every other context's and no switch has to reload it.
fn fp_control_now() -> u64 {
    let mut mxcsr: u32 = 0;
    let mut cw: u16 = 0;
    // SAFETY: stmxcsr and fnstcw store the control registers to the two local variables,
    // whose addresses are valid and writable; nothing else is touched.
    unsafe {
        asm!(
            "stmxcsr [{mxcsr}]",
            "fnstcw [{cw}]",
            mxcsr = in(reg) &raw mut mxcsr,
            cw = in(reg) &raw mut cw,
            options(nostack, preserves_flags),
        );
    }
    u64::from(mxcsr & !0x3F) | (u64::from(cw) << 32)
}

/// Saves the running context into `from` and resumes `to`, preserving the FP control state
/// exactly ([`super::FpControl::Preserve`]).
///
/// # Safety
/// See [`super::switch`].
#[inline(always)]
pub(super) unsafe fn switch_preserve(from: *mut Context, to: *const Context) {
    // SAFETY: the block restores rsp, rbx and rbp before it ends in this context, declares
    // every other register clobbered (rax and rdx, which it uses, through clobber_abi), and
    // only touches the stack below rsp, the words rdx points at (in the frame of the context
    // that switched here, suspended and mapped) and the two contexts, which the caller
    // vouches for.
    unsafe {
        asm!(
            "push rbp",                      // LLVM-reserved: saved by hand
            "push rbx",                      // likewise
            "sub rsp, 8",                    // slot for the FP control words
            "stmxcsr [rsp]",                 // MXCSR
            "fnstcw [rsp + 4]",              // x87 control word
            "mov rdx, rsp",                  // their address, for the context we resume
            "lea rax, [rip + 2f]",           // where this context resumes...
            "push rax",                      // ...on top of its saved words
            "mov [rdi], rsp",                // from->sp = rsp: this context is now suspended
            "mov rsp, [rsi]",                // rsp = to->sp: we run on the other stack
            "pop rax",                       // its resume address (label 2 of its switch, or
            "jmp rax",                       // the trampoline): go there
            "3:",                            // slow path, out of the fall-through line:
            "ldmxcsr [rsp]",                 // load our MXCSR
            "fldcw [rsp + 4]",               // and x87 control word
            "jmp 4f",                        // and rejoin
            "2:",                            // resumed by a switch; rdx = the switcher's words
            "mov eax, dword ptr [rsp]",      // our saved MXCSR
            "xor eax, dword ptr [rdx]",      // against the one in the register now
            "test eax, -64",                 // a control bit (6-31) differs?
            "jnz 3b",                        // yes: load ours
            "movzx eax, word ptr [rsp + 4]", // our saved x87 control word
            "cmp ax, word ptr [rdx + 4]",    // against the one in the register now
            "jne 3b",                        // differs: load ours
            "4:",                            // the FP control state is ours
            "add rsp, 8",                    // drop the slot
            "pop rbx",                       // restore rbx
            "pop rbp",                       // restore rbp; rsp is as before the block
            in("rdi") from,
            in("rsi") to,
            out("r12") _,
            out("r13") _,
            out("r14") _,
            out("r15") _,
            clobber_abi("sysv64"),
        )
    }
}

/// Saves the running context into `from` and resumes `to` without reading or writing MXCSR
/// or the x87 control word ([`super::FpControl::AssumeDefault`]): the frame records the
/// default words instead, which is what the promise says the registers hold. With
/// `debug_assertions`, first checks that promise and aborts if it is broken.
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
    // SAFETY: as in switch_preserve; the block keeps the same frame shape (the trampoline's
    // CFI relies on it) and never touches the FP control registers.
    unsafe {
        asm!(
            "push rbp",                          // LLVM-reserved: saved by hand
            "push rbx",                          // likewise
            "sub rsp, 8",                        // the FP control slot, unused: same shape
            "lea rdx, [rip + lagom_default_fp_control]", // the default words, for the resumed
            "lea rax, [rip + 2f]",               // where this context resumes...
            "push rax",                          // ...on top of its saved words
            "mov [rdi], rsp",                    // from->sp = rsp: this context is now suspended
            "mov rsp, [rsi]",                    // rsp = to->sp: we run on the other stack
            "pop rax",                           // its resume address (label 2 of its switch, or
            "jmp rax",                           // the trampoline): go there
            "2:",                                // resumed; the FP control state is assumed ours
            "add rsp, 8",                        // drop the slot
            "pop rbx",                           // restore rbx
            "pop rbp",                           // restore rbp; rsp is as before the block
            in("rdi") from,
            in("rsi") to,
            out("r12") _,
            out("r13") _,
            out("r14") _,
            out("r15") _,
            clobber_abi("sysv64"),
        )
    }
}

/// Writes the initial frame below `top` (the 16-aligned address of the parent link) and
/// returns the stack pointer to store in the new context.
///
/// # Safety
/// The 32 bytes below `top` must be writable and unused.
pub(super) unsafe fn initial_frame(top: usize, entry: EntryFn, arg: *mut u8) -> *mut u8 {
    let frame: [u64; 4] = [
        lagom_fiber_trampoline as *const () as usize as u64, // sp + 0: resume address
        fp_control_now(),                                    // sp + 8: FP control
        entry as usize as u64,                               // sp + 16: entry
        arg as u64,                                          // sp + 24: arg
    ];
    let sp = (top - frame.len() * 8) as *mut u64;
    // SAFETY: per contract the 32 bytes below top are ours; top is 16-aligned so sp is too.
    unsafe { sp.copy_from_nonoverlapping(frame.as_ptr(), frame.len()) };
    sp.cast()
}
