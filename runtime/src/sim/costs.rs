//! The costs of the mechanism that the simulator charges in virtual time, and where each
//! default comes from.
//!
//! The policy's decisions cost nothing in virtual time (they are what is simulated); the
//! mechanism around them costs what the threaded runtime measured on this project's 2-vCPU
//! KVM guest (Intel Xeon, Sapphire Rapids, both vCPUs sharing one L3; shared with two other
//! builds while measuring, so the figures are medians of loaded runs, not best cases):
//!
//! | cost | default | what it is | measured with |
//! |---|---|---|---|
//! | `switch` | 205 ns | a task blocks and another one on the same CPU runs: the park, the pick and the context switch, charged to the task switched to (as the runtime's clock does) | `cargo run --release -p lagom-examples --example pipe -- --json -n 300000`: `round_trip_cpu_ns` 410–470 (three runs) is two hand-offs |
//! | `wakelist` | 400 ns | a remote wakeup reaching a *spinning* idle CPU: the push, the spinner's look, its drain | `cargo run --release -p lagom-examples --example idle_spin -- --spins-us 30 --intervals-us 20 -n 2000 --seed 1`: p50 0.6 µs from `unpark` to the wakee running, minus one `switch` |
//! | `kick` | 30 µs | a wakeup (or a timer) reaching a *sleeping* idle CPU: the futex wake and the thread's return | the same with `--spins-us 0`: p50 26.2 µs (I = 20 µs) and 33.0 µs (I = 500 µs) |
//! | `migrate` | 0 | extra run time on a task's first run after it moved to another CPU (cache refill) | not measured: the examples' tasks carry no working set that a move would cost, and both vCPUs here share every cache the guest sees beyond L2; set it per scenario |
//!
//! A busy CPU acts on a remote wakeup at its running task's next scheduling point (the
//! `resched` interval, [`Params`](super::Params)): that wait is simulated, not a cost.

/// Mechanism costs in virtual nanoseconds (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Costs {
    /// A switch to another task (or to the idle loop) on one CPU.
    pub switch: u64,
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
            switch: 205,
            wakelist: 400,
            kick: 30_000,
            migrate: 0,
        }
    }
}
