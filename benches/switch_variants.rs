//! Alternatives to lagom's x86_64 switch, for measurement only (bench-local, no CFI): the
//! `variant/*` entries of `switch.rs`.

use criterion::{BenchmarkGroup, measurement::WallTime};
use lagom::arch::{DefaultStack, Stack};

/// The variants' context: just the saved stack pointer.
#[repr(C)]
pub struct Context {
    sp: *mut u64,
}

impl Context {
    const fn new() -> Self {
        Context {
            sp: std::ptr::null_mut(),
        }
    }
}

core::arch::global_asm!(
    // Explicit saves: an out-of-line function entered with `call`, saving all six
    // callee-saved registers and the FP control words, leaving with `ret`; the FP control
    // words are reloaded only when they differ, as in lagom's switch.
    ".p2align 4",
    ".globl lagom_bench_switch_explicit",
    "lagom_bench_switch_explicit:",
    "push rbp", // the six callee-saved registers
    "push rbx",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    "sub rsp, 8",               // FP control slot
    "stmxcsr [rsp]",            // MXCSR
    "fnstcw [rsp + 4]",         // x87 control word
    "mov rdx, rsp",             // our words, to compare with theirs
    "mov [rdi], rsp",           // save our sp
    "mov rsp, [rsi]",           // load theirs
    "mov eax, dword ptr [rsp]", // their MXCSR...
    "xor eax, dword ptr [rdx]", // ...against ours
    "test eax, -64",            // control bits differ?
    "jnz 3f",
    "movzx eax, word ptr [rsp + 4]", // their x87 control word...
    "cmp ax, word ptr [rdx + 4]",    // ...against ours
    "jne 3f",
    "4:",
    "add rsp, 8", // drop the slot
    "pop r15",    // their registers
    "pop r14",
    "pop r13",
    "pop r12",
    "pop rbx",
    "pop rbp",
    "ret", // into their call site
    "3:",
    "ldmxcsr [rsp]",   // their MXCSR
    "fldcw [rsp + 4]", // their x87 control word
    "jmp 4b",
    ".p2align 4",
    ".globl lagom_bench_tramp_explicit",
    "lagom_bench_tramp_explicit:",
    "mov rdi, r13", // argument
    "call r12",     // entry, never returns
    "ud2",
    // Trampoline for the inline variant without FP control: entry and argument on the stack.
    ".p2align 4",
    ".globl lagom_bench_tramp_nofp",
    "lagom_bench_tramp_nofp:",
    "pop rax",  // entry
    "pop rdi",  // argument
    "push rax", // any return address: entry never returns
    "jmp rax",
    // Trampoline for the always-reload variant: load the FP control words, then as above.
    ".p2align 4",
    ".globl lagom_bench_tramp_fp",
    "lagom_bench_tramp_fp:",
    "ldmxcsr [rsp]",   // the default MXCSR
    "fldcw [rsp + 4]", // the default x87 control word
    "add rsp, 8",      // drop the slot
    "pop rax",         // entry
    "pop rdi",         // argument
    "push rax",        // any return address: entry never returns
    "jmp rax",
);

unsafe extern "sysv64" {
    fn lagom_bench_switch_explicit(from: *mut Context, to: *const Context);
    fn lagom_bench_tramp_explicit();
    fn lagom_bench_tramp_nofp();
    fn lagom_bench_tramp_fp();
}

/// lagom's switch before it compared: stores and loads MXCSR and the x87 control word on
/// every switch.
///
/// # Safety
/// The contract of `lagom::arch::switch`: `from` is valid for a write; `to` holds a context
/// saved by a switch or made by `init`, not running, whose stack is still mapped.
#[inline(always)]
unsafe fn switch_reload_always(from: *mut Context, to: *const Context) {
    // SAFETY: as lagom's switch.
    unsafe {
        core::arch::asm!(
            "push rbp",
            "push rbx",
            "sub rsp, 8",
            "stmxcsr [rsp]",
            "fnstcw [rsp + 4]",
            "lea rax, [rip + 2f]",
            "push rax",
            "mov [rdi], rsp",
            "mov rsp, [rsi]",
            "pop rax",
            "jmp rax",
            "2:",
            "ldmxcsr [rsp]",
            "fldcw [rsp + 4]",
            "add rsp, 8",
            "pop rbx",
            "pop rbp",
            in("rdi") from, in("rsi") to,
            out("r12") _, out("r13") _, out("r14") _, out("r15") _,
            clobber_abi("sysv64"),
        )
    }
}

/// lagom's switch without the MXCSR / x87 control word handling.
#[inline(always)]
unsafe fn switch_no_fp(from: *mut Context, to: *const Context) {
    // SAFETY: as lagom's switch, minus the FP control words.
    unsafe {
        core::arch::asm!(
            "push rbp",
            "push rbx",
            "lea rax, [rip + 2f]",
            "push rax",
            "mov [rdi], rsp",
            "mov rsp, [rsi]",
            "pop rax",
            "jmp rax",
            "2:",
            "pop rbx",
            "pop rbp",
            in("rdi") from, in("rsi") to,
            out("r12") _, out("r13") _, out("r14") _, out("r15") _,
            clobber_abi("sysv64"),
        )
    }
}

static mut MAIN: Context = Context::new();
static mut OTHER: Context = Context::new();

unsafe extern "C" fn explicit_side(_: *mut u8) -> ! {
    loop {
        // SAFETY: single-threaded bench, contexts set up before the first switch.
        unsafe { lagom_bench_switch_explicit(&raw mut OTHER, &raw const MAIN) };
    }
}

unsafe extern "C" fn reload_always_side(_: *mut u8) -> ! {
    loop {
        // SAFETY: as above.
        unsafe { switch_reload_always(&raw mut OTHER, &raw const MAIN) };
    }
}

unsafe extern "C" fn nofp_side(_: *mut u8) -> ! {
    loop {
        // SAFETY: as above.
        unsafe { switch_no_fp(&raw mut OTHER, &raw const MAIN) };
    }
}

/// Writes `words` (lowest address first) below the stack's base; returns the new sp.
fn frame(stack: &DefaultStack, words: &[u64]) -> Context {
    let top = (stack.base().as_ptr() as usize & !15) - 16;
    let sp = (top - words.len() * 8) as *mut u64;
    // SAFETY: the words fit far inside the fresh stack.
    unsafe { sp.copy_from_nonoverlapping(words.as_ptr(), words.len()) };
    Context { sp }
}

/// The ABI's default MXCSR and x87 control word, as lagom's frames hold them.
const DEFAULT_FP: u64 = 0x1F80 | 0x037F << 32;

pub fn bench(g: &mut BenchmarkGroup<'_, WallTime>) {
    let stack = DefaultStack::with_default_size().unwrap();
    // resume -> trampoline, FP control, entry, arg.
    let words = [
        lagom_bench_tramp_fp as *const () as u64,
        DEFAULT_FP,
        reload_always_side as *const () as u64,
        0,
    ];
    // SAFETY: single-threaded bench.
    unsafe { OTHER = frame(&stack, &words) };
    g.bench_function("variant/reload_always", |b| {
        // SAFETY: MAIN is this thread, OTHER suspended.
        b.iter(|| unsafe { switch_reload_always(&raw mut MAIN, &raw const OTHER) })
    });
    std::mem::forget(stack);

    let round_trip = no_fp_control_pair();
    g.bench_function("variant/no_fp_control", |b| b.iter(round_trip));

    let stack = DefaultStack::with_default_size().unwrap();
    // FP control, r15, r14, r13 = arg, r12 = entry, rbx, rbp, return -> trampoline.
    let words = [
        DEFAULT_FP,
        0,
        0,
        0,
        explicit_side as *const () as u64,
        0,
        0,
        lagom_bench_tramp_explicit as *const () as u64,
    ];
    // SAFETY: single-threaded bench.
    unsafe { OTHER = frame(&stack, &words) };
    g.bench_function("variant/explicit_call_ret", |b| {
        // SAFETY: as above.
        b.iter(|| unsafe { lagom_bench_switch_explicit(&raw mut MAIN, &raw const OTHER) })
    });
    std::mem::forget(stack);
}

/// Sets up the `no_fp_control` pair (replacing any earlier variant's partner) and returns one
/// round trip with it.
pub fn no_fp_control_pair() -> fn() {
    let stack = DefaultStack::with_default_size().unwrap();
    // resume -> trampoline, entry, arg, pad.
    let words = [
        lagom_bench_tramp_nofp as *const () as u64,
        nofp_side as *const () as u64,
        0,
        0,
    ];
    // SAFETY: single-threaded bench.
    unsafe { OTHER = frame(&stack, &words) };
    std::mem::forget(stack); // the partner stays suspended on it: never unmap
    || {
        // SAFETY: MAIN is this thread's context, OTHER the suspended partner.
        unsafe { switch_no_fp(&raw mut MAIN, &raw const OTHER) }
    }
}
