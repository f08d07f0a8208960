//! The costs of the mechanism that the simulator charges in virtual time.

/// Mechanism costs in virtual nanoseconds.
///
/// The policy's decisions cost nothing in virtual time (they are what is simulated); each
/// step of the mechanism around them costs, by default, what the threaded runtime measured
/// for that step (the commands and figures behind each default are in the book,
/// `docs/src/lab/simulator.md`):
///
/// | cost | default | what it is |
/// |---|---|---|
/// | `switch` | 115 ns | from a task's `schedule()` to the next task running on that CPU: the pick and the context switch, charged to the task switched to (as the runtime's clock does) |
/// | `wake` | 90 ns | a waker's own time in an unpark that wakes a task, after the wakee is made runnable (the rest of the call and the way back), before it goes on |
/// | `wakelist` | 480 ns | a remote wakeup reaching a *spinning* idle CPU: the push, the spinner's look, its drain |
/// | `kick` | 30 µs | a wakeup (or a timer) reaching a *sleeping* idle CPU: the futex wake and the thread's return |
/// | `migrate` | 0 | extra run time on a task's first run after it moved to another CPU (cache refill); set it per scenario |
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
