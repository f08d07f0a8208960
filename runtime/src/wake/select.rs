//! CPU selection for a wakeup or a spawn: the policy's `select_task_rq` (`policy/select.rs`)
//! over the workers' published runnable counts.

use crate::policy::{CpuView, select_task_rq};
use crate::sync::atomic::Ordering;
use crate::worker::{Shared, TaskRef};

/// `select_task_rq` over the workers' published state.
pub(crate) fn select_cpu(shared: &Shared, t: &TaskRef, prev: usize, waker: Option<usize>) -> usize {
    let n = shared.workers.len();
    let view = |i: usize| {
        let nr = shared.workers[i].nr_running.load(Ordering::Relaxed);
        CpuView {
            idle: nr == 0,
            nr_running: nr,
        }
    };
    select_task_rq(n, view, prev, waker, |i| t.allowed(i))
}
