//! Context round trip (switch to another context and back), lagom beside its peers in one run:
//!
//! * `lagom/switch` — lagom's switch as shipped, in its default mode `FpControl::Preserve`:
//!   the main context switches into a fiber from one call site, the fiber switches back from
//!   another (the shape of corosensei's resume/yield); both have the default FP environment,
//!   so the FP control words are read and compared but not reloaded;
//! * `lagom/switch_assume_default` — the same with both contexts in
//!   `FpControl::AssumeDefault`: the FP control registers are neither read nor written;
//! * `lagom/direct_preserve`, `lagom/direct_assume_default` — the same two paths called
//!   directly (`switch_preserve_fp`, `switch_assume_default_fp`) instead of through `switch`,
//!   which branches on the context's mode: the cost of that branch;
//! * `lagom/switch_fp_differs` — as `lagom/switch`, but the fiber runs with its own MXCSR
//!   (round toward zero), so every switch takes the reload path (the cost a task that changes
//!   its FP environment pays);
//! * `lagom/switch_same_site` — both sides switch from the same call site, as every task of a
//!   worker does from `schedule()`; every `ret` is then predicted;
//! * `corosensei/resume_yield` — the bare-switch reference (it does not preserve FP control);
//! * `may/yield_now` — a coroutine yielding to may's scheduler (one worker) and being resumed;
//! * `variant/*` (x86_64) — alternatives to lagom's switch (an inline `asm!` block with
//!   `clobber_abi`, resuming by `jmp`): `reload_always` (lagom's switch before it compared:
//!   `ldmxcsr` + `fldcw` on every switch), `no_fp_control` (no FP control handling at all and
//!   no FP slot: the floor), and `explicit_call_ret` (an out-of-line function that saves all
//!   six callee-saved registers itself, entered by `call`, left by `ret`, FP control as
//!   lagom's `Preserve`).
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use lagom::FpControl;
use lagom::arch::{
    Context, DefaultStack, Fiber, switch, switch_assume_default_fp, switch_preserve_fp,
};

/// Contexts of the lagom pair, reachable from the fiber's side.
static mut MAIN: Context = Context::new();
static mut FIB: *mut Context = std::ptr::null_mut();

/// Switches `from` → `to` `n` times; the one call site both sides of `switch_same_site` use.
#[inline(never)]
fn ping(from: *mut Context, to: *const Context, n: u64) {
    for _ in 0..n {
        // SAFETY: from is the running context, to the suspended partner.
        unsafe { switch(from, to) };
    }
}

/// How the fiber of a lagom pair switches back.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// With `switch`, from its own call site, in the default FP environment.
    OwnSite,
    /// Through `ping`, the site the main side uses too.
    SameSite,
    /// From its own call site, with a non-default MXCSR (round toward zero).
    FpDiffers,
    /// With `switch_preserve_fp` / `switch_assume_default_fp` (by the mode), own call site.
    Direct,
}

fn lagom_pair(shape: Shape, mode: FpControl) -> Fiber {
    let mut fiber = Fiber::new(
        "bench",
        1,
        DefaultStack::with_default_size().unwrap(),
        move || {
            // SAFETY: single-threaded bench; the statics are set before the first switch.
            let (me, main) = unsafe { (FIB, &raw mut MAIN) };
            if shape == Shape::SameSite {
                ping(me, main, u64::MAX);
            }
            #[cfg(target_arch = "x86_64")]
            if shape == Shape::FpDiffers {
                let mxcsr: u32 = 0x7F80; // all exceptions masked, round toward zero
                // SAFETY: a valid MXCSR; this fiber does no floating-point arithmetic.
                unsafe { core::arch::asm!("ldmxcsr [{}]", in(reg) &mxcsr) };
            }
            if shape == Shape::Direct {
                // One loop per mode, so that neither branches on the mode.
                if mode == FpControl::Preserve {
                    loop {
                        // SAFETY: as above.
                        unsafe { switch_preserve_fp(me, main) };
                    }
                }
                loop {
                    // SAFETY: as above.
                    unsafe { switch_assume_default_fp(me, main) };
                }
            }
            loop {
                // SAFETY: as above.
                unsafe { switch(me, main) };
            }
        },
    );
    fiber.set_fp_control(mode);
    // SAFETY: the fiber is not running; MAIN is a static, this thread's context.
    unsafe {
        (*&raw mut MAIN).set_fp_control(mode);
        FIB = fiber.context();
        fiber.set_parent(&raw const MAIN);
    }
    fiber
}

fn bench_round_trip(c: &mut Criterion) {
    let mut g = c.benchmark_group("context_round_trip");

    let pairs = [
        ("lagom/switch", Shape::OwnSite, FpControl::Preserve),
        (
            "lagom/switch_assume_default",
            Shape::OwnSite,
            FpControl::AssumeDefault,
        ),
        ("lagom/direct_preserve", Shape::Direct, FpControl::Preserve),
        (
            "lagom/direct_assume_default",
            Shape::Direct,
            FpControl::AssumeDefault,
        ),
        (
            "lagom/switch_fp_differs",
            Shape::FpDiffers,
            FpControl::Preserve,
        ),
    ];
    for (name, shape, mode) in pairs {
        if shape == Shape::FpDiffers && !cfg!(target_arch = "x86_64") {
            continue; // sets MXCSR
        }
        let fiber = lagom_pair(shape, mode);
        match (shape, mode) {
            (Shape::Direct, FpControl::Preserve) => g.bench_function(name, |b| {
                // SAFETY: MAIN is this thread's context, the fiber is suspended.
                b.iter(|| unsafe { switch_preserve_fp(&raw mut MAIN, fiber.context()) })
            }),
            (Shape::Direct, _) => g.bench_function(name, |b| {
                // SAFETY: as above.
                b.iter(|| unsafe { switch_assume_default_fp(&raw mut MAIN, fiber.context()) })
            }),
            _ => g.bench_function(name, |b| {
                // SAFETY: as above.
                b.iter(|| unsafe { switch(&raw mut MAIN, fiber.context()) })
            }),
        };
        std::mem::forget(fiber); // suspended forever: leak rather than unmap under it
    }
    {
        let fiber = lagom_pair(Shape::SameSite, FpControl::Preserve);
        g.bench_function("lagom/switch_same_site", |b| {
            b.iter_custom(|iters| {
                let t = Instant::now();
                ping(&raw mut MAIN, fiber.context(), iters);
                t.elapsed()
            })
        });
        std::mem::forget(fiber);
    }
    {
        use corosensei::{Coroutine, CoroutineResult};
        let mut co: Coroutine<(), (), ()> = Coroutine::new(|y, ()| {
            loop {
                y.suspend(());
            }
        });
        g.bench_function("corosensei/resume_yield", |b| {
            b.iter(|| black_box(matches!(co.resume(()), CoroutineResult::Yield(()))))
        });
        std::mem::forget(co);
    }
    {
        may::config().set_workers(1);
        g.bench_function("may/yield_now", |b| {
            b.iter_custom(|iters| {
                // SAFETY: the coroutine uses no thread-local storage across yields.
                let h = unsafe {
                    may::coroutine::spawn(move || {
                        let t = Instant::now();
                        for _ in 0..iters {
                            may::coroutine::yield_now();
                        }
                        t.elapsed()
                    })
                };
                h.join().unwrap_or(Duration::ZERO)
            })
        });
    }
    #[cfg(target_arch = "x86_64")]
    variants::bench(&mut g);
    g.finish();
}

#[cfg(target_arch = "x86_64")]
mod variants {
    //! Alternatives to lagom's x86_64 switch, for measurement only (bench-local, no CFI).

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
        g.bench_function("variant/no_fp_control", |b| {
            // SAFETY: as above.
            b.iter(|| unsafe { switch_no_fp(&raw mut MAIN, &raw const OTHER) })
        });
        std::mem::forget(stack);

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
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! { name = benches; config = config(); targets = bench_round_trip }
criterion_main!(benches);
