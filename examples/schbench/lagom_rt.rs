//! The `--runtime lagom` backend: every schbench thread is a lagom task; blocking is
//! `park`, waking is the task's `Unparker`, the lock spin yields to the holder and the
//! matrix loops call `cond_resched`.

use std::sync::atomic::AtomicU32;

use lagom::task::{self, Unparker};

use crate::sched::Sched;

/// lagom tasks.
pub struct Lagom;

impl Sched for Lagom {
    type Waker = Unparker;
    type Join = task::JoinHandle<()>;

    fn spawn(
        name: &'static str,
        cpus: &[usize],
        f: impl FnOnce() + Send + 'static,
    ) -> Result<Self::Join, String> {
        let mut b = task::Builder::new().name(name);
        if !cpus.is_empty() {
            b = b.cpus(cpus.iter().copied());
        }
        b.spawn(f).map_err(|e| format!("schbench: {e}"))
    }

    fn join(j: Self::Join) -> Result<(), String> {
        j.join()
            .map_err(|e| format!("schbench: a task failed: {e}"))
    }

    fn current_waker() -> Unparker {
        task::current_unparker()
    }

    fn block(_word: &AtomicU32, _expected: u32) {
        // The caller re-checks the word: an unpark after its check leaves the token that
        // makes this park return at once.
        task::park();
    }

    fn wake(_word: &AtomicU32, waker: &Unparker) {
        waker.unpark();
    }

    fn usleep(us: u64) {
        task::sleep(std::time::Duration::from_micros(us));
    }

    fn relax() {
        // The holder may be a task of this worker: let it run.
        task::yield_now();
    }

    fn tick() {
        task::cond_resched();
    }

    fn os_tid() -> Option<i32> {
        None
    }
}
