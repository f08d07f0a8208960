//! `select_task_rq`: where a waking task should run, decided over a read-only view of the
//! workers' state (the simple rule of this stage; a topology-aware search replaces its body
//! later, behind the same signature).
//!
//! The rule: the task's previous CPU if it is allowed and idle (cache-warm and free); else the
//! waker's CPU if it is allowed (the wakee probably shares data with the waker); else the
//! allowed CPU with the fewest runnable entities (ties: the lowest index). CPUs are worker
//! indices here, not OS CPU numbers.

/// What `select_task_rq` knows about one CPU (a snapshot; it may be stale by the time the
/// choice is acted on, which only costs balance, never correctness).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuView {
    /// The CPU runs nothing and has nothing queued.
    pub idle: bool,
    /// Runnable entities queued there (the running one included).
    pub nr_running: usize,
}

/// Chooses the CPU (an index below `n`) for a waking task that last ran on `prev`, woken
/// from `waker` (`None`: from outside the runtime). `view(i)` describes CPU `i`;
/// `allowed(i)` says whether the task may run there; at least one CPU must be allowed. A
/// task that must resume where it last ran (lagom's migration contract) is passed an
/// affinity of one, `prev`, and is placed there.
///
/// ```
/// use lagom::policy::{CpuView, select_task_rq};
/// let busy = CpuView { idle: false, nr_running: 3 };
/// let idle = CpuView { idle: true, nr_running: 0 };
/// let light = CpuView { idle: false, nr_running: 1 };
/// let cpus = [busy, idle, busy, light];
/// let view = |i: usize| cpus[i];
/// // The previous CPU wins when it is idle.
/// assert_eq!(select_task_rq(4, view, 1, Some(0), |_| true), 1);
/// // Else the waker's CPU.
/// assert_eq!(select_task_rq(4, view, 2, Some(0), |_| true), 0);
/// // Else the least loaded allowed CPU.
/// assert_eq!(select_task_rq(4, view, 0, Some(0), |i| i != 0 && i != 1), 3);
/// // From outside the runtime, a busy previous CPU loses to the least loaded one.
/// assert_eq!(select_task_rq(4, view, 2, None, |_| true), 1);
/// ```
#[track_caller]
pub fn select_task_rq(
    n: usize,
    view: impl Fn(usize) -> CpuView,
    prev: usize,
    waker: Option<usize>,
    allowed: impl Fn(usize) -> bool,
) -> usize {
    if prev < n && allowed(prev) && view(prev).idle {
        return prev;
    }
    if let Some(w) = waker.filter(|&w| w < n && allowed(w)) {
        return w;
    }
    (0..n)
        .filter(|&i| allowed(i))
        .min_by_key(|&i| (view(i).nr_running, i != prev))
        .expect("select_task_rq: the task is allowed on no CPU")
}
