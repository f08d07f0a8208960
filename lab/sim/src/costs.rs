//! The costs of the mechanism that the simulator charges in virtual time, and where each
//! default comes from.

/// Mechanism costs in virtual nanoseconds.
///
/// The policy's decisions cost nothing in virtual time (they are what is simulated); the
/// mechanism around them costs what the threaded runtime measured on this project's 2-vCPU
/// KVM guest (Intel Xeon, Sapphire Rapids, both vCPUs sharing one L3; shared with two other
/// builds while measuring, so the figures are medians of loaded runs, not best cases):
///
/// | cost | default | what it is | measured with |
/// |---|---|---|---|
/// | `switch` | 115 ns | from a task's `schedule()` to the next task running on that CPU: the pick and the context switch, charged to the task switched to (as the runtime's clock does) | `cargo run --release -p lagom-examples --example pipe -- --json -n 300000`: `round_trip_cpu_ns` 410–470 (three runs) is two hand-offs of 205 ns, each a `wake` and a `switch`; a traced run (`pipe -n 20000 --trace FILE`) puts the wakeup event 55 % into a hand-off, so 115 ns before it and 90 ns after |
/// | `wake` | 90 ns | a waker's own time in an unpark that wakes a task, after the wakee is made runnable (the rest of the call and the way back), before it goes on | the same split of the pipe's hand-off |
/// | `wakelist` | 480 ns | a remote wakeup reaching a *spinning* idle CPU: the push, the spinner's look, its drain | `cargo run --release -p lagom-examples --example idle_spin -- --spins-us 30 --intervals-us 20 -n 2000 --seed 1`: p50 0.6 µs from `unpark` to the wakee running, minus one `switch` |
/// | `kick` | 30 µs | a wakeup (or a timer) reaching a *sleeping* idle CPU: the futex wake and the thread's return | the same with `--spins-us 0`: p50 26.2 µs (I = 20 µs) and 33.0 µs (I = 500 µs) |
/// | `migrate` | 0 | extra run time on a task's first run after it moved to another CPU (cache refill) | not measured: the examples' tasks carry no working set that a move would cost, and both vCPUs here share every cache the guest sees beyond L2; set it per scenario |
///
/// A busy CPU acts on a remote wakeup at its running task's next scheduling point (the
/// `resched` interval, [`Params`](super::Params)): that wait is simulated, not a cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Costs {
    /// A switch to another task (or to the idle loop) on one CPU.
    pub switch: u64,
    /// The waker's own time in a wakeup call that woke a task, after the wakee is runnable.
    pub wake: u64,
    /// From a wakelist push (or a remote enqueue) to a spinning idle CPU acting on it.
    pub wakelist: u64,
    /// From a kick (or a timer expiry) to a sleeping idle CPU acting on it.
    pub kick: u64,
    /// Extra run time of a task's first run on a CPU other than the one it last ran on.
    pub migrate: u64,
}

impl Default for Costs {
    fn default() -> Costs {
        Costs {
            switch: 115,
            wake: 90,
            wakelist: 480,
            kick: 30_000,
            migrate: 0,
        }
    }
}
