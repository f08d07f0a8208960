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
//! * `variant/*` (x86_64, `switch_variants.rs`) — alternatives to lagom's switch (an inline
//!   `asm!` block with `clobber_abi`, resuming by `jmp`): `reload_always` (lagom's switch
//!   before it compared: `ldmxcsr` + `fldcw` on every switch), `no_fp_control` (no FP control
//!   handling at all and no FP slot: the floor), and `explicit_call_ret` (an out-of-line
//!   function that saves all six callee-saved registers itself, entered by `call`, left by
//!   `ret`, FP control as lagom's `Preserve`).
//!
//! After the criterion group, the three contenders (`lagom/switch`,
//! `lagom/switch_assume_default`, `corosensei/resume_yield`) are timed once more, interleaved
//! round by round, and each one's fastest round is printed with its ratio to corosensei: on a
//! shared, loaded machine those ratios are the steadier figures.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
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

/// Sets the FP control mode of `MAIN`, this thread's context in every lagom pair: a fiber is
/// resumed only by a switch of its own mode.
fn set_main_mode(mode: FpControl) {
    let main = &raw mut MAIN;
    // SAFETY: single-threaded bench; nothing else borrows MAIN.
    unsafe { (*main).set_fp_control(mode) };
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
    set_main_mode(mode);
    // SAFETY: the fiber is not running; MAIN is a static, this thread's context.
    unsafe {
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
#[path = "switch_variants.rs"]
mod variants;

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

/// Rounds of the interleaved comparison, and round trips per round.
const ROUNDS: usize = 400;
const PER_ROUND: u64 = 20_000;

/// The three contenders measured interleaved, round after round, keeping each
/// one's fastest round: on a loaded machine a round that no other process interrupted shows
/// the real cost, and the contenders see the same load, so their ratios hold where
/// criterion's one-after-another estimates drift with the load.
fn interleaved() {
    use corosensei::{Coroutine, CoroutineResult};
    // Each pair runs once right after it is made: its fiber reads FIB on its first run.
    let preserve = lagom_pair(Shape::OwnSite, FpControl::Preserve);
    // SAFETY: MAIN is this thread's context (in the pair's mode), the fiber is fresh.
    unsafe { switch(&raw mut MAIN, preserve.context()) };
    let assume = lagom_pair(Shape::OwnSite, FpControl::AssumeDefault);
    // SAFETY: as above.
    unsafe { switch(&raw mut MAIN, assume.context()) };
    let mut co: Coroutine<(), (), ()> = Coroutine::new(|y, ()| {
        loop {
            y.suspend(());
        }
    });
    let direct = lagom_pair(Shape::Direct, FpControl::AssumeDefault);
    // SAFETY: as above.
    unsafe { switch_assume_default_fp(&raw mut MAIN, direct.context()) };
    #[cfg(target_arch = "x86_64")]
    let floor = Some(variants::no_fp_control_pair());
    #[cfg(not(target_arch = "x86_64"))]
    let floor: Option<fn()> = None;
    let mut best = [f64::MAX; 5];
    let time = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        for _ in 0..PER_ROUND {
            f();
        }
        t.elapsed().as_nanos() as f64 / PER_ROUND as f64
    };
    for _ in 0..ROUNDS {
        set_main_mode(FpControl::Preserve);
        let ns = time(&mut || {
            // SAFETY: MAIN is this thread's context (in the pair's mode), the fiber suspended.
            unsafe { switch(&raw mut MAIN, preserve.context()) }
        });
        best[0] = best[0].min(ns);
        set_main_mode(FpControl::AssumeDefault);
        let ns = time(&mut || {
            // SAFETY: as above.
            unsafe { switch(&raw mut MAIN, assume.context()) }
        });
        best[1] = best[1].min(ns);
        let ns = time(&mut || {
            // SAFETY: as above (the direct path does not look at the mode).
            unsafe { switch_assume_default_fp(&raw mut MAIN, direct.context()) }
        });
        best[2] = best[2].min(ns);
        if let Some(f) = floor {
            best[3] = best[3].min(time(&mut || f()));
        }
        let ns = time(&mut || {
            black_box(matches!(co.resume(()), CoroutineResult::Yield(())));
        });
        best[4] = best[4].min(ns);
    }
    println!("interleaved: fastest of {ROUNDS} rounds of {PER_ROUND} round trips each");
    for (name, ns) in [
        ("lagom/switch (Preserve)", best[0]),
        ("lagom/switch_assume_default", best[1]),
        ("lagom/direct_assume_default", best[2]),
        ("variant/no_fp_control", best[3]),
        ("corosensei/resume_yield", best[4]),
    ] {
        if ns < f64::MAX {
            println!("  {name:30} {ns:6.2} ns  {:4.2}x corosensei", ns / best[4]);
        }
    }
    std::mem::forget((preserve, assume, direct, co)); // suspended forever: leak, never unmap
}

criterion_group! { name = benches; config = config(); targets = bench_round_trip }

fn main() {
    benches();
    // `--list` and criterion's test mode (`cargo test --benches`) only want the names.
    if !std::env::args().any(|a| a == "--list" || a == "--test") {
        interleaved();
    }
    Criterion::default().configure_from_args().final_summary();
}
