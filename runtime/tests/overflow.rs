//! Stack overflow in a task is reported as one; other faults reach the previous handler.
//!
//! Each scenario runs in a child process: the test re-executes this test binary with
//! `LAGOM_FAULT_CHILD=<scenario>` set and only the `child` test selected, then checks the
//! child's stderr and the signal that killed it.

mod child_util;
mod fiber_util;

use lagom::arch::{DefaultStack, Fiber, SignalStack};

const ENV: &str = "LAGOM_FAULT_CHILD";

/// Recurses until the stack runs out; the frame is kept alive by `black_box`.
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth; 64]);
    if depth == u64::MAX {
        return 0;
    }
    recurse(depth + 1) + std::hint::black_box(frame[7])
}

/// The child side: runs the scenario named in the environment (and never returns normally).
#[test]
fn child() {
    let Ok(scenario) = std::env::var(ENV) else {
        return;
    };
    let signals = SignalStack::install().expect("alternate signal stack");
    match scenario.as_str() {
        "task-overflow" => {
            let mut fibers = vec![Fiber::new(
                "deep-recursion",
                42,
                DefaultStack::new(64 * 1024).unwrap(),
                || {
                    std::hint::black_box(recurse(0));
                },
            )];
            fiber_util::run_round_robin(&mut fibers, Some(&signals));
        }
        "null-write-in-task" => {
            let mut fibers = vec![Fiber::new(
                "null-writer",
                7,
                DefaultStack::new(64 * 1024).unwrap(),
                || {
                    let p = std::hint::black_box(16usize) as *mut u64;
                    // SAFETY: not safe at all: the point is to fault outside any guard page.
                    unsafe { p.write_volatile(1) };
                },
            )];
            fiber_util::run_round_robin(&mut fibers, Some(&signals));
        }
        "runtime-task-overflow" => {
            let rt = lagom::Runtime::builder().worker_threads(1).build().unwrap();
            let h = rt
                .spawn_with(
                    lagom::task::Builder::new()
                        .name("parser")
                        .stack_size(48 * 1024),
                    || std::hint::black_box(recurse(0)),
                )
                .unwrap();
            let _ = h.join();
        }
        "thread-overflow" => {
            // Not in a task: std's own guard-page report must still work through our handler.
            std::hint::black_box(recurse(0));
        }
        other => panic!("unknown scenario {other}"),
    }
    eprintln!("child scenario {scenario} returned without faulting");
}

/// Runs one scenario in a child; returns (stderr, terminating signal).
fn run_child(scenario: &str) -> (String, Option<i32>) {
    let run = child_util::run_child(ENV, scenario);
    (run.stderr, run.signal)
}

#[test]
fn task_overflow_prints_name_id_size_and_aborts() {
    let (stderr, signal) = run_child("task-overflow");
    assert!(
        stderr.contains("task 'deep-recursion' (id 42) has overflowed its stack (64 KiB)\n"),
        "stderr was: {stderr}"
    );
    // And how to raise it: for the task, for the runtime, and the default.
    let note = format!(
        "note: give this task a larger stack with lagom::task::Builder::stack_size, or every \
         task of its runtime with lagom::runtime::Builder::stack_size (the default is {} \
         KiB)\n",
        lagom::runtime::DEFAULT_STACK_SIZE / 1024
    );
    assert!(stderr.contains(&note), "stderr was: {stderr}");
    assert_eq!(signal, Some(libc::SIGABRT), "stderr was: {stderr}");
}

#[test]
fn other_faults_in_a_task_reach_the_previous_handler() {
    let (stderr, signal) = run_child("null-write-in-task");
    assert!(!stderr.contains("overflowed"), "stderr was: {stderr}");
    // std's handler is the previous one: not its guard page, so it restores SIG_DFL and the
    // fault kills the process with SIGSEGV.
    assert_eq!(signal, Some(libc::SIGSEGV), "stderr was: {stderr}");
}

#[test]
fn thread_overflow_outside_tasks_is_still_reported_by_std() {
    let (stderr, signal) = run_child("thread-overflow");
    assert!(
        stderr.contains("has overflowed its stack"),
        "stderr was: {stderr}"
    );
    assert!(
        stderr.contains("thread '"),
        "std's thread report expected; stderr was: {stderr}"
    );
    assert!(!stderr.contains("task '"), "stderr was: {stderr}");
    assert_eq!(signal, Some(libc::SIGABRT), "stderr was: {stderr}");
}

#[test]
fn a_runtime_task_overflow_names_it_and_says_how_to_raise_the_size() {
    let (stderr, signal) = run_child("runtime-task-overflow");
    assert!(
        stderr.contains("task 'parser' (id ")
            && stderr.contains(") has overflowed its stack (48 KiB)\n"),
        "stderr was: {stderr}"
    );
    assert!(
        stderr.contains("lagom::task::Builder::stack_size")
            && stderr.contains("lagom::runtime::Builder::stack_size (the default is "),
        "stderr was: {stderr}"
    );
    assert_eq!(signal, Some(libc::SIGABRT), "stderr was: {stderr}");
}
