//! The built-in scenarios, written in the scenario file format (so each is also an example of
//! it): the seeds' experiments and the cross-checks against the threaded runtime.
//!
//! | name | what | machine |
//! |---|---|---|
//! | `asym_stall` | seed 001: two tasks with 1 ms bursts on CPUs 4–7, woken 10 µs after each burst from a busy-polling waker on CPU 2; a handoff ≥ 0.5 ms is a stall | `ryzen-7950x` |
//! | `schbench` | seeds 000/004: schbench's message/worker pattern (`-m 2`, 9 workers each, `-n 0`: the request is the 100 µs sleep), RPS = workers' loops per second | recorded `20em64t-hybrid-1p6c2t+2ca4co1t` (20 CPUs, one LLC) |
//! | `schbench_server` | the same on a multi-LLC server (`-m 4`, 23 workers each) | recorded `x86_64-epyc_7451` (96 CPUs, 16 LLCs) |
//! | `delay_zero` | seed 003: 15 pipe pairs (will-it-scale `context_switch1_threads -t 15`) with 2 µs of work per message, handoffs per second and the share of involuntary switches | `cpus-16` |
//! | `pipe` | the threaded runtime's `pipe` example: two tasks ping-pong on one CPU | `cpus-2` |
//! | `pipe_cross` | `pipe --cross`: one task on each CPU | `cpus-2` |
//! | `hogs` | four CPU-bound tasks at nice 0, 0, 5, −5 on two CPUs (`runtime/tests/runtime_fair.rs`) | `cpus-2` |

/// The built-in scenarios' names.
pub const BUILTIN: &[&str] = &[
    "asym_stall",
    "schbench",
    "schbench_server",
    "delay_zero",
    "pipe",
    "pipe_cross",
    "hogs",
];

/// The text of built-in scenario `name` (module doc), or `None`; parse it with
/// [`parse`](super::parse).
///
/// ```
/// for name in lagom::sim::BUILTIN {
///     let s = lagom::sim::parse(lagom::sim::builtin(name).unwrap()).unwrap();
///     assert_eq!(s.name, *name);
/// }
/// ```
pub fn builtin(name: &str) -> Option<&'static str> {
    Some(match name {
        "asym_stall" => ASYM_STALL,
        "schbench" => SCHBENCH,
        "schbench_server" => SCHBENCH_SERVER,
        "delay_zero" => DELAY_ZERO,
        "pipe" => PIPE,
        "pipe_cross" => PIPE_CROSS,
        "hogs" => HOGS,
        _ => return None,
    })
}

const ASYM_STALL: &str = "\
# Seed 001: with preferred-core rankings and DELAY_DEQUEUE, a woken task waits a whole burst
# behind the other task on one CPU while other allowed CPUs are idle. Two tasks run 1 ms
# bursts and block; a busy-polling waker thread on CPU 2 (outside the runtime's tasks: only
# its CPU matters, as the waker's CPU that selection and the wakelist rules see) wakes each
# 10 us after its burst ends. A handoff (wake call to running) of 0.5 ms or more is a stall.
scenario asym_stall
topology ryzen-7950x
duration 1000s
wakeups 300000
stall 500us
resched 10us

task worker count=2 cpus=4-7
  loop
    run 1ms
    wake self after 10us from 2
    block
  end
end
";

const SCHBENCH: &str = "\
# schbench -m 2 -t 9 -n 0 -s 100 (seeds 000 and 004): each worker tells its message thread
# it is ready and waits; the message thread wakes every worker that posted; the worker's
# request is the 100 us sleep (-n 0: no matrix work). RPS = the workers' loops per second.
scenario schbench
topology 20em64t-hybrid-1p6c2t+2ca4co1t
duration 2s
warmup 200ms
resched 10us

task msg count=2 cpu=i measure=no
  loop
    block
    wake_posted
  end
end

task worker count=18 cpus=2-19
  loop
    post msg[i/9]
    block
    sleep 100us
    run 2us
  end
end
";

const SCHBENCH_SERVER: &str = "\
# schbench -m 4 -t 23 -n 0 on a multi-LLC server (96 CPUs, 16 LLCs): message threads pinned
# to CPUs 0-3, workers on the others.
scenario schbench_server
topology x86_64-epyc_7451
duration 1s
warmup 100ms
resched 10us

task msg count=4 cpu=i measure=no
  loop
    block
    wake_posted
  end
end

task worker count=92 cpus=4-95
  loop
    post msg[i/23]
    block
    sleep 100us
    run 2us
  end
end
";

const DELAY_ZERO: &str = "\
# Seed 003: will-it-scale context_switch1_threads -t 15, 15 pairs of threads passing a token
# through a pipe, on the 16 CPUs of eight SMT cores. Each message costs 2 us of work (the
# write and the read); scheduling points every 1 us stand in for the kernel's preemption
# at the return from the wakeup's system call. Handoffs per second and the share of
# involuntary switches, DELAY_ZERO on and off.
scenario delay_zero
topology cpus-16
duration 500ms
warmup 50ms
resched 1us

task ping count=15
  loop
    run 2us
    wake pong[i]
    block
  end
end

task pong count=15
  loop
    block
    run 2us
    wake ping[i]
  end
end
";

const PIPE: &str = "\
# The threaded runtime's `pipe` example: two tasks pass a turn back and forth through
# park/unpark, both on one CPU (worker). Compare with
# `cargo run --release -p lagom-examples --example pipe`.
scenario pipe
topology cpus-2
duration 100ms

task a cpus=0
  loop
    wake b
    block
  end
end

task b cpus=0
  loop
    block
    wake a
  end
end
";

const PIPE_CROSS: &str = "\
# `pipe --cross`: one task on each of two CPUs.
scenario pipe_cross
topology cpus-2
duration 100ms

task a cpus=0
  loop
    wake b
    block
  end
end

task b cpus=1
  loop
    block
    wake a
  end
end
";

const HOGS: &str = "\
# Four CPU-bound tasks at nice 0, 0, 5 and -5 on two CPUs, free to run anywhere: the
# periodic balance must find the fair feasible split (the -5 task alone on one CPU, the
# other three sharing the other by weight: 1 : 0.43 : 0.43 : 0.14 of a CPU; see
# runtime/tests/runtime_fair.rs).
scenario hogs
topology cpus-2
duration 2200ms
warmup 200ms
resched 20us

task n0a nice=0
  run 1000s
end
task n0b nice=0
  run 1000s
end
task n5 nice=5
  run 1000s
end
task nm5 nice=-5
  run 1000s
end
";
