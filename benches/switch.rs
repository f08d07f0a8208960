//! Context round trip (switch to another context and back), lagom beside its peers in one run:
//!
//! * `lagom/switch` — the main context switches into a fiber from one call site, the fiber
//!   switches back from another (the shape of corosensei's resume/yield);
//! * `lagom/switch_same_site` — both sides switch from the same call site, as every task of a
//!   worker does from `schedule()`; every `ret` is then predicted;
//! * `corosensei/resume_yield` — the bare-switch reference;
//! * `may/yield_now` — a coroutine yielding to may's scheduler (one worker) and being resumed;
//! * `variant/*` (x86_64) — alternatives to lagom's switch (an inline `asm!` block with
//!   `clobber_abi`, resuming by `jmp`): `explicit_call_ret` (an out-of-line function that saves
//!   all six callee-saved registers itself, entered by `call`, left by `ret`) and
//!   `no_mxcsr` (lagom's switch without MXCSR, keeping the x87 control word) and
//!   `no_fp_control` (without either).
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use lagom::arch::{Context, DefaultStack, Fiber, switch};

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

fn lagom_pair(same_site: bool) -> Fiber {
    let mut fiber = Fiber::new(
        "bench",
        1,
        DefaultStack::with_default_size().unwrap(),
        move || {
            // SAFETY: single-threaded bench; the statics are set before the first switch.
            let (me, main) = unsafe { (FIB, &raw mut MAIN) };
            if same_site {
                ping(me, main, u64::MAX);
            } else {
                loop {
                    // SAFETY: as above.
                    unsafe { switch(me, main) };
                }
            }
        },
    );
    // SAFETY: the fiber is not running; MAIN is a static.
    unsafe {
        FIB = fiber.context();
        fiber.set_parent(&raw const MAIN);
    }
    fiber
}

fn bench_round_trip(c: &mut Criterion) {
    let mut g = c.benchmark_group("context_round_trip");

    {
        let fiber = lagom_pair(false);
        g.bench_function("lagom/switch", |b| {
            // SAFETY: MAIN is this thread's context, the fiber is suspended.
            b.iter(|| unsafe { switch(&raw mut MAIN, fiber.context()) })
        });
        std::mem::forget(fiber); // suspended forever: leak rather than unmap under it
    }
    {
        let fiber = lagom_pair(true);
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
    use lagom::arch::{Context, DefaultStack, Stack};

    core::arch::global_asm!(
        // Explicit saves: an out-of-line function entered with `call`, saving all six
        // callee-saved registers and the FP control words, leaving with `ret`.
        ".p2align 4",
        ".globl lagom_bench_switch_explicit",
        "lagom_bench_switch_explicit:",
        "push rbp", // the six callee-saved registers
        "push rbx",
        "push r12",
        "push r13",
        "push r14",
        "push r15",
        "sub rsp, 8",       // FP control slot
        "stmxcsr [rsp]",    // MXCSR
        "fnstcw [rsp + 4]", // x87 control word
        "mov [rdi], rsp",   // save our sp
        "mov rsp, [rsi]",   // load theirs
        "ldmxcsr [rsp]",    // their MXCSR
        "fldcw [rsp + 4]",  // their x87 control word
        "add rsp, 8",       // drop the slot
        "pop r15",          // their registers
        "pop r14",
        "pop r13",
        "pop r12",
        "pop rbx",
        "pop rbp",
        "ret", // into their call site
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
        // Trampoline for the x87-only variant: load the control word, then as above.
        ".p2align 4",
        ".globl lagom_bench_tramp_x87",
        "lagom_bench_tramp_x87:",
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
        fn lagom_bench_tramp_x87();
    }

    /// lagom's switch without MXCSR (keeps the x87 control word).
    #[inline(always)]
    unsafe fn switch_no_mxcsr(from: *mut Context, to: *const Context) {
        // SAFETY: as lagom's switch, minus MXCSR.
        unsafe {
            core::arch::asm!(
                "push rbp",
                "push rbx",
                "sub rsp, 8",
                "fnstcw [rsp + 4]",
                "lea rax, [rip + 2f]",
                "push rax",
                "mov [rdi], rsp",
                "mov rsp, [rsi]",
                "pop rax",
                "jmp rax",
                "2:",
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

    unsafe extern "C" fn no_mxcsr_side(_: *mut u8) -> ! {
        loop {
            // SAFETY: as above.
            unsafe { switch_no_mxcsr(&raw mut OTHER, &raw const MAIN) };
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
        // SAFETY: Context is one pointer (repr(C)).
        unsafe { std::mem::transmute::<*mut u64, Context>(sp) }
    }

    pub fn bench(g: &mut BenchmarkGroup<'_, WallTime>) {
        let stack = DefaultStack::with_default_size().unwrap();
        // FP control, r15, r14, r13 = arg, r12 = entry, rbx, rbp, return -> trampoline.
        let words = [
            0x1F80 | 0x037F << 32,
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
            // SAFETY: MAIN is this thread, OTHER suspended.
            b.iter(|| unsafe { lagom_bench_switch_explicit(&raw mut MAIN, &raw const OTHER) })
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
        // resume -> lagom's trampoline shape is not needed: x87 CW slot, then as no_fp.
        let words = [
            lagom_bench_tramp_x87 as *const () as u64,
            0x037F << 32,
            no_mxcsr_side as *const () as u64,
            0,
        ];
        // SAFETY: single-threaded bench.
        unsafe { OTHER = frame(&stack, &words) };
        g.bench_function("variant/no_mxcsr", |b| {
            // SAFETY: as above.
            b.iter(|| unsafe { switch_no_mxcsr(&raw mut MAIN, &raw const OTHER) })
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
