//! [`sched_counters!`]: the names of the per-CPU scheduler counters, written once for both
//! drivers.

/// Calls `$callback! { … }` with every per-CPU scheduler counter that both of lagom's drivers
/// keep — the threaded runtime's `WorkerStats` and the simulator's `Counters` — each as its
/// doc comment and its name, comma-separated, followed by the caller's own tokens (the
/// counters that only that driver has). Each driver defines its own `$callback` (atomic
/// counters and their snapshot, or plain ones) and fills the same named counters, in the
/// spirit of the kernel's `/proc/schedstat`; a table of either driver reads the same.
///
/// "This CPU" is a worker of the runtime or a virtual CPU of the simulator. The first eight
/// counters are the ones that wakers and spawners on *other* CPUs bump (a wakeup queued
/// here, a kick sent here): the runtime keeps them on a cache line of their own.
///
/// ```
/// macro_rules! names {
///     ($( $(#[$doc:meta])* $name:ident ),* $(,)?) => {
///         const NAMES: &[&str] = &[$( stringify!($name) ),*];
///     };
/// }
/// lagom_trace::sched_counters!(names! {
///     /// A counter of this driver only.
///     mine,
/// });
/// assert_eq!(NAMES[0], "wakeups_remote");
/// assert!(NAMES.contains(&"balance_pulls"));
/// assert_eq!(NAMES.last(), Some(&"mine"));
/// ```
#[macro_export]
macro_rules! sched_counters {
    ($callback:ident ! { $($extra:tt)* }) => {
        $callback! {
            /// Wakeups enqueued on this CPU by another CPU under this CPU's runqueue lock
            /// (NO_TTWU_QUEUE, or TTWU_QUEUE's lock path within an LLC).
            wakeups_remote,
            /// Wakeups (and spawns) queued on this CPU's wakelist (TTWU_QUEUE).
            wakeups_queued,
            /// Wakeups queued here because the task was still switching away
            /// (TTWU_QUEUE_ON_CPU).
            wakeups_on_cpu,
            /// Runnable wakeups of delayed tasks handed to this CPU's wakelist
            /// (TTWU_QUEUE_DELAYED).
            runnable_queued,
            /// Kicks (futex wakes) sent to this CPU to end its idle sleep.
            kicks,
            /// Sleeping idle CPUs this CPU woke to pull its waiting tasks (nohz balance
            /// kick).
            nohz_kicks,
            /// Delayed wakeups that found their task moved by balancing and were forwarded
            /// to the CPU that now owns it (the drain's chase, TTWU_QUEUE_DELAYED).
            wakeups_chased,
            /// Tasks spawned onto this CPU.
            spawns,
            /// Wakeups enqueued on this CPU by a waker running on it.
            wakeups_local,
            /// Runnable wakeups handled in place (the task was still queued here).
            runnable_in_place,
            /// Delayed wakees that this CPU dequeued and sent elsewhere after CPU selection
            /// (TTWU_QUEUE_DELAYED; with TTWU_DEQUEUE they count as ordinary wakeups instead).
            runnable_migrated,
            /// Tasks that blocked (announced a sleep and switched away) on this CPU.
            blocks,
            /// Sleeps that left the task queued as delayed (DELAY_DEQUEUE).
            delayed_dequeues,
            /// Delayed entities whose dequeue completed (picked, or finished on a wakeup
            /// check).
            delayed_finished,
            /// Switches away from a task that blocked or yielded (to another task or the
            /// idle context; a reschedule that picks the same task again is no switch).
            switches_voluntary,
            /// Switches away from a task that was preempted (need-resched or tick; a
            /// reschedule that picks the same task again is no switch).
            switches_involuntary,
            /// Idle sleeps of this CPU (futex sleeps of an idle worker).
            idle_sleeps,
            /// Tasks pulled here by newly idle balancing.
            balance_pulls,
            /// Of the newly idle pulls, tasks pulled by ITMT asym packing (this CPU is
            /// preferred to the source).
            balance_asym,
            /// Running tasks of a less preferred CPU moved here by ITMT active balance (at
            /// their next schedule point, or their next wakeup if they block first).
            balance_active,
            /// Tasks pulled here by periodic (load) balancing.
            balance_periodic,
            /// Of those, tasks that were delayed (asleep, still queued) when they moved.
            balance_delayed,
            /// Balance attempts (newly idle or periodic) that found an imbalance here, a
            /// candidate that may come, and moved nothing (it was running, cache hot or too
            /// heavy): the attempts that raise `nr_balance_failed` (`policy::failed_after`).
            /// An attempt whose sources were all pinned is not counted.
            balance_failed,
            /// Of the candidates those attempts examined, the cache-hot ones left in place
            /// (`task_hot`: ran within the migration cost, or the next buddy, while fewer
            /// than `cache_nice_tries` attempts had failed).
            balance_hot_skipped,
            /// Tasks that ended on this CPU.
            exits,
            /// CPU selections made here (by a waker or spawner running on this CPU; from
            /// outside, counted on the chosen CPU) that chose the waker's CPU
            /// (`wake_affine`).
            place_affine,
            /// … that chose an idle CPU of the target's LLC other than the target and the
            /// previous CPU (`select_idle_sibling`: the recently used CPU, an idle core or
            /// CPU of the scan).
            place_idle_sibling,
            /// … that chose the task's previous CPU (also every selection for a started
            /// task that may not migrate).
            place_prev,
            /// … of a spawn, by the idlest-group descent (`WF_FORK`).
            place_fork_idlest,
            /// Of the wakeups counted above, those `wake_wide` found wide (the waker and the
            /// wakee each switch between many partners: the waker's CPU was not considered,
            /// `wake_affine` was skipped).
            place_wide,
            /// Runnable wakeups of delayed tasks whose dequeue this CPU finished so that
            /// they go through CPU selection (TTWU_DEQUEUE, or DELAYED_WAKE_IDLE with an
            /// idle allowed CPU).
            runnable_dequeued,
            $($extra)*
        }
    };
}
