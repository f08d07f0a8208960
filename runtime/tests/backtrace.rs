//! A backtrace captured inside a task names the task's own functions and continues past the
//! switch into the frames of the driver that resumed the task (DWARF CFI of the trampoline),
//! in both FP control modes.

mod fiber_util;

use std::sync::{Arc, Mutex};

use lagom::FpControl;
use lagom::arch::{DefaultStack, Fiber};

#[inline(never)]
fn task_outer_frame(out: &Mutex<String>) {
    task_inner_frame(out);
    std::hint::black_box(());
}

#[inline(never)]
fn task_inner_frame(out: &Mutex<String>) {
    let bt = std::backtrace::Backtrace::force_capture();
    *out.lock().unwrap() = format!("{bt}");
    std::hint::black_box(());
}

#[inline(never)]
fn driver_frame_below_the_switch(fp: FpControl, fibers: &mut [Fiber]) {
    fiber_util::run_round_robin_in(fp, fibers, None);
    std::hint::black_box(());
}

#[test]
fn backtrace_inside_a_task_crosses_the_switch() {
    backtrace_crosses_the_switch_in(FpControl::Preserve);
}

/// The `AssumeDefault` switch leaves a frame of the same shape, which the trampoline's CFI
/// reads.
#[test]
fn backtrace_crosses_an_assume_default_switch() {
    backtrace_crosses_the_switch_in(FpControl::AssumeDefault);
}

#[inline(never)]
fn backtrace_crosses_the_switch_in(fp: FpControl) {
    let out = Arc::new(Mutex::new(String::new()));
    let o = out.clone();
    let mut fibers = vec![Fiber::new(
        "bt",
        1,
        DefaultStack::with_default_size().unwrap(),
        move || {
            // Run after one yield, so the capture happens on a resumed (not fresh) context too.
            fiber_util::yield_now();
            task_outer_frame(&o);
        },
    )];
    driver_frame_below_the_switch(fp, &mut fibers);
    assert!(fibers[0].take_outcome().unwrap().is_ok());
    let bt = out.lock().unwrap().clone();
    // Frame names in order, innermost first ("  12: path::name" lines).
    let frames: Vec<&str> = bt
        .lines()
        .filter_map(|l| {
            l.trim_start()
                .split_once(": ")
                .filter(|(n, _)| n.parse::<u32>().is_ok())
        })
        .map(|(_, name)| name.trim())
        .collect();
    let pos = |name: &str| {
        frames
            .iter()
            .position(|f| *f == name || f.ends_with(&format!("::{name}")))
            .unwrap_or_else(|| panic!("frame `{name}` missing from backtrace:\n{bt}"))
    };
    // The task's own frames, innermost first...
    let inner = pos("task_inner_frame");
    let outer = pos("task_outer_frame");
    // ...the fiber's entry and the trampoline on the task's stack...
    let entry = pos("fiber_main");
    let trampoline = pos("lagom_fiber_trampoline");
    // ...and past the switch: the driver's frames on the thread's own stack.
    let resume = pos("resume");
    let driver = pos("driver_frame_below_the_switch");
    let test = pos("backtrace_crosses_the_switch_in");
    assert!(inner < outer && outer < entry && entry < trampoline, "{bt}");
    assert!(
        trampoline < resume && resume < driver && driver < test,
        "{bt}"
    );
}
