//! Context round trip (switch to another context and back), lagom beside its peers in one run:
//!
//! * `lagom/switch` — the main context switches into a fiber from one call site, the fiber
//!   switches back from another (the shape of corosensei's resume/yield);
//! * `lagom/switch_same_site` — both sides switch from the same call site, as every task of a
//!   worker does from `schedule()`; every `ret` is then predicted;
//! * `corosensei/resume_yield` — the bare-switch reference;
//! * `may/yield_now` — a coroutine yielding to may's scheduler (one worker) and being resumed;
//! * `variant/*` (x86_64) — the alternatives the issue asks to measure against lagom's switch:
//!   `clobber_abi` (inline asm that declares the callee-saved registers clobbered, so the
//!   compiler saves only the live ones, and pushes rbx/rbp itself) and `explicit_no_fp`
//!   (lagom's explicit saves without the MXCSR/x87 control word handling).
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
    let mut fiber = Fiber::new("bench", 1, DefaultStack::with_default_size().unwrap(), move || {
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
    });
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
    //! Two alternative x86_64 switches, for measurement only (no CFI, bench-local).

    use criterion::{BenchmarkGroup, measurement::WallTime};
    use lagom::arch::{Context, DefaultStack, Stack};

    core::arch::global_asm!(
        // clobber_abi variant, inner part: the inline asm at the call site pushed rbp and rbx
        // and declared r12-r15 clobbered; this saves the FP control pair and swaps stacks.
        ".p2align 4",
        ".globl lagom_bench_switch_clobber",
        "lagom_bench_switch_clobber:",
        "push 0",                 // FP control slot
        "stmxcsr [rsp]",          // MXCSR
        "fnstcw [rsp + 4]",       // x87 control word
        "mov rax, [rsp]",         // rax = pair
        "and rax, -64",           // drop MXCSR flags
        "mov [rsp], rax",         // store cleaned
        "mov [rdi], rsp",         // save our sp
        "mov rsp, [rsi]",         // load theirs
        "cmp rax, [rsp]",         // FP control differs?
        "jne 2f",                 // then reload
        "1:",
        "add rsp, 8",             // pop the slot
        "ret",                    // back into the inline asm of the resumed side
        "2:",
        "ldmxcsr [rsp]",          // reload MXCSR
        "fldcw [rsp + 4]",        // reload x87 CW
        "jmp 1b",
        // Its trampoline: the initial frame holds the entry and its argument.
        ".p2align 4",
        ".globl lagom_bench_tramp_clobber",
        "lagom_bench_tramp_clobber:",
        "pop rax",                // entry
        "pop rdi",                // argument
        "call rax",               // never returns
        "ud2",
        // Explicit saves without FP control.
        ".p2align 4",
        ".globl lagom_bench_switch_nofp",
        "lagom_bench_switch_nofp:",
        "push rbp",
        "push rbx",
        "push r12",
        "push r13",
        "push r14",
        "push r15",
        "mov [rdi], rsp",         // save our sp
        "mov rsp, [rsi]",         // load theirs
        "pop r15",
        "pop r14",
        "pop r13",
        "pop r12",
        "pop rbx",
        "pop rbp",
        "ret",
        ".p2align 4",
        ".globl lagom_bench_tramp_nofp",
        "lagom_bench_tramp_nofp:",
        "mov rdi, r13",           // argument
        "call r12",               // entry, never returns
        "ud2",
    );

    unsafe extern "sysv64" {
        fn lagom_bench_switch_clobber();
        fn lagom_bench_tramp_clobber();
        fn lagom_bench_switch_nofp(from: *mut Context, to: *const Context);
        fn lagom_bench_tramp_nofp();
    }

    #[inline(always)]
    unsafe fn switch_clobber(from: *mut Context, to: *const Context) {
        // SAFETY: the inner routine swaps stacks; everything it or the other side may change
        // is declared clobbered, rbx and rbp are saved here.
        unsafe {
            core::arch::asm!(
                "push rbp",
                "push rbx",
                "call {inner}",
                "pop rbx",
                "pop rbp",
                inner = sym lagom_bench_switch_clobber,
                in("rdi") from, in("rsi") to,
                out("r12") _, out("r13") _, out("r14") _, out("r15") _,
                clobber_abi("sysv64"),
            )
        }
    }

    static mut MAIN: Context = Context::new();
    static mut OTHER: Context = Context::new();

    unsafe extern "C" fn clobber_side(_: *mut u8) -> ! {
        loop {
            // SAFETY: single-threaded bench, contexts set up before the first switch.
            unsafe { switch_clobber(&raw mut OTHER, &raw const MAIN) };
        }
    }

    unsafe extern "C" fn nofp_side(_: *mut u8) -> ! {
        loop {
            // SAFETY: as above.
            unsafe { lagom_bench_switch_nofp(&raw mut OTHER, &raw const MAIN) };
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
        let entry = clobber_side as *const () as u64;
        // fp pair, ret -> trampoline, entry, arg, pad (keeps rsp 16-aligned at the call).
        let words = [0x1F80 | 0x037F << 32, lagom_bench_tramp_clobber as *const () as u64, entry, 0, 0, 0];
        // SAFETY: single-threaded bench.
        unsafe { OTHER = frame(&stack, &words[..5]) };
        g.bench_function("variant/clobber_abi", |b| {
            // SAFETY: MAIN is this thread, OTHER suspended.
            b.iter(|| unsafe { switch_clobber(&raw mut MAIN, &raw const OTHER) })
        });
        std::mem::forget(stack);

        let stack = DefaultStack::with_default_size().unwrap();
        // r15, r14, r13 = arg, r12 = entry, rbx, rbp, ret -> trampoline
        let words = [0, 0, 0, nofp_side as *const () as u64, 0, 0, lagom_bench_tramp_nofp as *const () as u64, 0];
        // SAFETY: single-threaded bench.
        unsafe { OTHER = frame(&stack, &words[..7]) };
        g.bench_function("variant/explicit_no_fp", |b| {
            // SAFETY: as above.
            b.iter(|| unsafe { lagom_bench_switch_nofp(&raw mut MAIN, &raw const OTHER) })
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
