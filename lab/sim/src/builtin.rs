//! The built-in scenarios, written in the scenario file format (so each is also an example of
//! it): the experiments of the kernel mailing-list reports the lab studies (the book's
//! `docs/src/lab/index.md` names them) and the cross-checks against the threaded runtime.

/// The built-in scenarios' names.
pub const BUILTIN: &[&str] = &[
    "asym_stall",
    "asym_stall_drift",
    "schbench",
    "schbench_server",
    "delay_zero",
    "pipe",
    "pipe_cross",
    "hogs",
    "scale",
    "scale_wake",
];

/// The text of built-in scenario `name`, or `None`; parse it with
/// [`parse`](super::parse).
///
/// | name | what | machine |
/// |---|---|---|
/// | `asym_stall` | the preferred-core stall: two tasks with 1 ms bursts on CPUs 4–7, woken 10 µs after each burst from a busy-polling waker on CPU 2; a handoff ≥ 0.5 ms is a stall | `ryzen-7950x` |
/// | `asym_stall_drift` | `asym_stall` with bursts uniform in 990–1010 µs, so the tasks drift apart and the reported sequence (an active-balance move onto a CPU a wakeup just reached) can happen | `ryzen-7950x` |
/// | `schbench` | the schbench regression with DELAY_DEQUEUE: schbench's message/worker pattern (`-m 2 -t 64 -n 0`: the request is the 100 µs sleep), RPS = workers' loops per second | recorded `20em64t-hybrid-1p6c2t+2ca4co1t` (20 CPUs, one LLC) |
/// | `schbench_server` | Chris Mason's `-m 4 -t 128 -n 0` on a multi-LLC server | recorded `x86_64-epyc_7451` (96 CPUs, 16 LLCs) |
/// | `delay_zero` | DELAY_ZERO and pipe hand-offs: 15 pipe pairs (will-it-scale `context_switch1_threads -t 15`), 1 µs of work before and after each wakeup, handoffs per second and the share of involuntary switches | `cpus-16` |
/// | `pipe` | the threaded runtime's `pipe` example: two tasks ping-pong on one CPU | `cpus-2` |
/// | `pipe_cross` | `pipe --cross`: one task on each CPU | `cpus-2` |
/// | `hogs` | four CPU-bound tasks at nice 0, 0, 5, −5 on two CPUs (`runtime/tests/runtime_fair.rs`) | `cpus-2` |
/// | `scale` | one task per CPU computing and sleeping in exponential gaps (each wakes on its own idle CPU): the cost per event as the CPU count grows | any (`--topology cpus-N`) |
/// | `scale_wake` | per CPU a waker that computes, wakes its partner and sleeps, and the partner that runs a while and blocks, about 75 % busy: wakeups whose previous CPU is often busy, so `select_idle_sibling` scans the LLC | any (`--topology cpus-N`) |
///
/// ```
/// for name in lagom_sim::BUILTIN {
///     let s = lagom_sim::parse(lagom_sim::builtin(name).unwrap()).unwrap();
///     assert_eq!(s.name, *name);
/// }
/// ```
pub fn builtin(name: &str) -> Option<&'static str> {
    Some(match name {
        "asym_stall" => ASYM_STALL,
        "asym_stall_drift" => ASYM_STALL_DRIFT,
        "schbench" => SCHBENCH,
        "schbench_server" => SCHBENCH_SERVER,
        "delay_zero" => DELAY_ZERO,
        "pipe" => PIPE,
        "pipe_cross" => PIPE_CROSS,
        "hogs" => HOGS,
        "scale" => SCALE,
        "scale_wake" => SCALE_WAKE,
        _ => return None,
    })
}

const ASYM_STALL: &str = "\
# The preferred-core stall: with preferred-core rankings and DELAY_DEQUEUE, a woken task waits a
# whole burst behind the other task on one CPU while other allowed CPUs are idle. Two tasks run
# 1 ms bursts and block; a busy-polling waker thread on CPU 2 (outside the runtime's tasks: only
# its CPU matters, as the waker's CPU that selection and the wakelist rules see) wakes each 10
# us after its burst ends. A handoff (wake call to running) of 0.5 ms or more is a stall. Fork
# placement starts the tasks on the idlest allowed CPUs (4 and 5); with ITMT the busy CPUs'
# ticks kick the idle preferred CPUs 6 and 7 (nohz_kick_target), whose newly idle balance asks
# for each task by active balance, carried out at its next schedule point.
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

const ASYM_STALL_DRIFT: &str = "\
# asym_stall with bursts that drift apart, as a calibrated burst does on real hardware: each
# burst is uniform in 990-1010 us. With exactly 1 ms bursts the two tasks run in lockstep on
# CPUs 6 and 7 and nothing asks for either; with drift, CPU 6 goes idle while CPU 7 runs its
# task alone, asks for it, and a wakeup onto CPU 6 can land before the move (the reported sequence).
scenario asym_stall_drift
topology ryzen-7950x
duration 1000s
wakeups 300000
stall 500us
resched 10us

task worker count=2 cpus=4-7
  loop
    run uniform(990us, 1010us)
    wake self after 10us from 2
    block
  end
end
";

const SCHBENCH: &str = "\
# schbench -L -m 2 -M auto -t 64 -n 0 (Chris Mason's DELAY_DEQUEUE regression command
# scaled from 4 x 128 workers on a 40-CPU LLC to 2 x 64 on 20 CPUs): each worker tells its
# message thread it is ready and waits; the message thread wakes every worker that posted;
# the request is the 100 us usleep (-n 0: no matrix work). -M auto pins the message threads
# to CPUs 0-1 and, through the port's shadowed loop, leaves the workers every CPU.
# RPS = the workers' loops per second; their handoffs are schbench's wakeup latencies.
scenario schbench
topology 20em64t-hybrid-1p6c2t+2ca4co1t
duration 1s
warmup 100ms
resched 10us

task msg count=2 cpu=i measure=no
  loop
    block
    wake_posted
  end
end

task worker count=128
  loop
    post msg[i/64]
    block
    sleep 100us
  end
end
";

const SCHBENCH_SERVER: &str = "\
# schbench -L -m 4 -M auto -t 128 -n 0 (Chris Mason's command as given) on a multi-LLC
# server: 96 CPUs in 16 LLCs, message threads pinned to CPUs 0-3 (all in the first LLCs, the
# placement Peter Zijlstra calls exactly wrong for many-L3 machines), workers everywhere.
scenario schbench_server
topology x86_64-epyc_7451
duration 500ms
warmup 50ms
resched 10us

task msg count=4 cpu=i measure=no
  loop
    block
    wake_posted
  end
end

task worker count=512
  loop
    post msg[i/128]
    block
    sleep 100us
  end
end
";

const DELAY_ZERO: &str = "\
# DELAY_ZERO's pipe hand-offs: will-it-scale context_switch1_threads -t 15, 15 pairs of threads
# passing a token through a pipe, on the 16 CPUs of eight SMT cores. A message costs 1 us of
# work before the wakeup (the write) and 1 us after it (the write's return and the read);
# scheduling points every 250 ns inside that work stand in for the kernel's preemption at the
# return from the wakeup's system call, so a wakee that wins the wakeup-preemption check takes
# the CPU before its waker blocks (an involuntary switch). Handoffs per second (the pairs'
# loops) and the involuntary share, DELAY_ZERO on and off.
scenario delay_zero
topology cpus-16
duration 500ms
warmup 50ms
resched 250ns

task ping count=15
  loop
    run 1us
    wake pong[i]
    run 1us
    block
  end
end

task pong count=15
  loop
    block
    run 1us
    wake ping[i]
    run 1us
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

const SCALE: &str = "\
# Cost per event as the machine grows: per CPU, one task that computes and sleeps in
# exponential gaps (wakeups through CPU selection, idle loops with newly idle balance, ticks
# with periodic balance), free to run anywhere.
scenario scale
duration 200ms
resched 20us

task t count=cpus
  loop
    run exp(200us)
    sleep exp(100us)
  end
end
";

const SCALE_WAKE: &str = "\
# Cost per event with real CPU selection: per CPU a waker that computes, wakes its partner
# and sleeps, and the partner, which runs a while and blocks. About 75 % of the CPUs are
# busy, so a partner's previous CPU is often taken and select_idle_sibling scans the LLC
# (bounded by SIS_UTIL); wake_affine weighs the waker's CPU against the previous one.
scenario scale_wake
duration 200ms
resched 20us

task w count=cpus
  loop
    run exp(100us)
    wake s[i]
    sleep exp(100us)
  end
end

task s count=cpus
  loop
    block
    run exp(50us)
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
