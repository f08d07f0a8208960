//! A task that unwinds keeps its worker's thread (`sched/unwind.rs`): std counts panics in
//! flight per OS thread, so no other task may run there while one unwinds. A destructor that
//! blocks during a panic then waits on the worker's thread; no other task of that worker sees
//! `std::thread::panicking()`, and none of its unlocks poisons; a shutdown never raises its
//! cancellation inside such a destructor (which would abort the process); a destructor that
//! waits for a task of its own worker is reported and ended by the shutdown; and a scope's
//! cancellation on one worker still unwinds the owner only after its children.
mod child_util;
mod panic_util;
mod runtime_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::sync::{Mutex, mpsc};
use lagom::task;

/// The child scenarios' variable (`child_util`).
const ENV: &str = "LAGOM_UNWIND_CHILD";

/// A runtime with one worker.
fn one_worker() -> Runtime {
    let cpu = runtime_util::two_cpus()[0];
    Runtime::builder()
        .worker_cpus([cpu])
        .build()
        .expect("a runtime on one worker")
}

/// Waits (generously) until `flag` is set.
fn wait_for(flag: &AtomicBool, what: &str) {
    let t0 = Instant::now();
    while !flag.load(Ordering::Acquire) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{what} never happened"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Wakes `wake` and then blocks in a `sleep`, while its task unwinds.
struct WakeThenSleep(mpsc::Sender<()>);

impl Drop for WakeThenSleep {
    fn drop(&mut self) {
        self.0.send(()).unwrap();
        task::sleep(Duration::from_millis(5));
    }
}

/// On one worker, task A panics and its destructor wakes task B and then sleeps. Before the
/// fix the worker switched to B during A's sleep, with the thread's panic count still raised
/// by A: B saw `std::thread::panicking() == true`, and its ordinary unlocks poisoned a lagom
/// mutex and a std one.
#[test]
fn no_task_sees_another_tasks_unwinding() {
    panic_util::quiet();
    let rt = one_worker();
    let lagom_m = Arc::new(Mutex::new(0u32));
    let std_m = Arc::new(std::sync::Mutex::new(0u32));
    let (lm, sm) = (Arc::clone(&lagom_m), Arc::clone(&std_m));
    let (a, saw) = rt.block_on(move || {
        let (tx, rx) = mpsc::channel::<()>();
        let b = task::spawn(move || {
            rx.recv().unwrap();
            let saw = std::thread::panicking();
            *lm.lock().unwrap() += 1;
            *sm.lock().unwrap() += 1;
            saw
        });
        let a = task::spawn(move || {
            let _d = WakeThenSleep(tx);
            panic!("deliberate: a panic whose destructor blocks");
        });
        let a = a.join();
        (a, b.join().unwrap())
    });
    assert!(a.unwrap_err().is_panic());
    assert!(!saw, "a task saw another task's unwinding as its own");
    assert!(
        !lagom_m.is_poisoned(),
        "an ordinary unlock poisoned a lagom mutex"
    );
    assert!(
        !std_m.is_poisoned(),
        "an ordinary unlock poisoned a std mutex"
    );
}

/// A task that unwinds and blocks still sleeps and wakes: its `sleep` ends on the worker's
/// timer, a `recv` ends with the message another worker's task sends, and its panic reaches
/// its joiner.
#[test]
fn a_destructor_that_blocks_during_a_panic_still_waits_and_wakes() {
    panic_util::quiet();
    let Some(cpus) = runtime_util::two_cpus_or_skip("a_destructor_that_blocks_during_a_panic")
    else {
        return;
    };
    let rt = Runtime::builder()
        .worker_cpus(cpus.clone())
        .build()
        .unwrap();
    /// Receives one message, then sleeps, while its task unwinds.
    struct RecvThenSleep(mpsc::Receiver<u32>, Arc<AtomicUsize>);
    impl Drop for RecvThenSleep {
        fn drop(&mut self) {
            let v = self.0.recv().unwrap();
            let t0 = Instant::now();
            task::sleep(Duration::from_millis(20));
            assert!(t0.elapsed() >= Duration::from_millis(20));
            self.1.store(v as usize, Ordering::Release);
        }
    }
    let got = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let g2 = Arc::clone(&got);
    let a = rt
        .spawn_with(task::Builder::new().cpus([cpus[0]]), move || {
            let _d = RecvThenSleep(rx, g2);
            panic!("deliberate: unwinding through a blocking destructor");
        })
        .unwrap();
    let b = rt
        .spawn_with(task::Builder::new().cpus([cpus[1]]), move || {
            task::sleep(Duration::from_millis(10));
            tx.send(7).unwrap();
        })
        .unwrap();
    b.join().unwrap();
    let e = a.join().unwrap_err();
    assert!(e.is_panic(), "{e}");
    assert_eq!(
        got.load(Ordering::Acquire),
        7,
        "the destructor ran to its end"
    );
}

/// A destructor that never returns while its task unwinds from its own panic: it yields and
/// sleeps in turn, so it meets the shutdown's cancellation points of `yield_now` (at once,
/// from FORCE on) and of `park`.
struct BlockForGood(Arc<AtomicBool>);

impl Drop for BlockForGood {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
        loop {
            task::yield_now();
            task::park_timeout(Duration::from_millis(1));
        }
    }
}

#[test]
fn child() {
    let Ok(scenario) = std::env::var(ENV) else {
        return;
    };
    panic_util::quiet();
    match scenario.as_str() {
        // A task panics and its destructor never returns; the runtime shuts down. Before the
        // fix the shutdown's cancellation was raised inside that destructor (at its park, by
        // the sweep, or at its yield once FORCE came): a second unwind out of a destructor
        // during unwinding, which aborts the process.
        "shutdown-during-a-blocking-destructor" => {
            let rt = one_worker();
            let blocked = Arc::new(AtomicBool::new(false));
            let b2 = Arc::clone(&blocked);
            let h = rt.spawn(move || {
                let _d = BlockForGood(b2);
                panic!("deliberate: a panic whose destructor never returns");
            });
            wait_for(&blocked, "the destructor's block");
            let t0 = Instant::now();
            let stats = rt.shutdown_timeout(Duration::from_millis(400));
            eprintln!(
                "shutdown returned after {} ms; abandoned {}",
                t0.elapsed().as_millis(),
                stats.shutdown.abandoned
            );
            assert!(h.join().unwrap_err().is_cancelled());
        }
        // A task panics and its destructor waits for a task that can only run on the same
        // worker: it never can while the first unwinds. Reported, then ended by the shutdown.
        "destructor-waits-for-its-own-worker" => {
            let rt = one_worker();
            let blocked = Arc::new(AtomicBool::new(false));
            let b2 = Arc::clone(&blocked);
            let h = rt
                .spawn_with(task::Builder::new().name("unwinder"), move || {
                    let (go_tx, go_rx) = mpsc::channel::<()>();
                    let (done_tx, done_rx) = mpsc::channel::<()>();
                    // Started here, so it resumes only here (the migration contract).
                    let helper = task::spawn(move || {
                        go_rx.recv().unwrap();
                        done_tx.send(()).unwrap();
                    });
                    task::yield_now();
                    /// Wakes the helper and waits for it, while its task unwinds.
                    struct WaitForHelper(
                        mpsc::Sender<()>,
                        mpsc::Receiver<()>,
                        Arc<AtomicBool>,
                        Option<task::JoinHandle<()>>,
                    );
                    impl Drop for WaitForHelper {
                        fn drop(&mut self) {
                            self.0.send(()).unwrap();
                            self.2.store(true, Ordering::Release);
                            let _ = self.1.recv();
                            drop(self.3.take());
                        }
                    }
                    let _d = WaitForHelper(go_tx, done_rx, b2, Some(helper));
                    panic!("deliberate: a panic whose destructor waits for its own worker");
                })
                .unwrap();
            wait_for(&blocked, "the destructor's wait");
            // The stall monitor reports the hold once it has lasted its threshold (10 ms):
            // counted before its line is written, which the shutdown's end of the monitor
            // lets finish.
            let stalls = || -> u64 {
                rt.stats()
                    .workers
                    .iter()
                    .map(|w| w.counters().find(|c| c.0 == "stalls").unwrap().1)
                    .sum()
            };
            let t0 = Instant::now();
            while stalls() == 0 {
                assert!(t0.elapsed() < Duration::from_secs(20), "no stall reported");
                std::thread::sleep(Duration::from_millis(1));
            }
            let t0 = Instant::now();
            let stats = rt.shutdown_timeout(Duration::from_millis(400));
            eprintln!(
                "shutdown returned after {} ms; abandoned {}",
                t0.elapsed().as_millis(),
                stats.shutdown.abandoned
            );
            assert!(h.join().unwrap_err().is_cancelled());
        }
        other => panic!("unknown scenario {other}"),
    }
}

/// Before the fix: the process aborted ("panic in a destructor during cleanup"). After: the
/// task is abandoned at the shutdown's give-up point and the process goes on.
#[test]
fn a_shutdown_never_raises_inside_a_destructor_that_runs_during_a_panic() {
    let run = child_util::run_child(ENV, "shutdown-during-a-blocking-destructor");
    assert_eq!(
        (run.code, run.signal),
        (Some(0), None),
        "stderr was: {}",
        run.stderr
    );
    assert!(
        run.stderr.contains("abandoned 1"),
        "stderr was: {}",
        run.stderr
    );
}

/// The cost named in `sched/unwind.rs`: a destructor that, during a panic, waits for a task
/// of its own worker waits for good — not silently: the stall monitor reports it once on
/// stderr (its one reporting path), naming the task, the cause and what waits, and the
/// shutdown ends it within its timeout.
#[test]
fn a_destructor_waiting_for_its_own_worker_is_reported_and_ended_by_the_shutdown() {
    let run = child_util::run_child(ENV, "destructor-waits-for-its-own-worker");
    assert_eq!(
        (run.code, run.signal),
        (Some(0), None),
        "stderr was: {}",
        run.stderr
    );
    let reports: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("lagom: task ") && l.contains("\"unwinder\""))
        .collect();
    assert_eq!(
        reports.len(),
        1,
        "reported once; stderr was: {}",
        run.stderr
    );
    assert!(
        reports[0].contains("without letting another task run: unwinding from a panic")
            && reports[0].contains("Waiting behind it: 1 runnable task")
            && reports[0].contains("never for a task that runs on the same worker"),
        "stderr was: {}",
        run.stderr
    );
    // Nothing else said it: one reporting path.
    assert_eq!(
        run.stderr.matches("unwinding from a panic").count(),
        1,
        "stderr was: {}",
        run.stderr
    );
    assert!(
        run.stderr.contains("abandoned 2"),
        "stderr was: {}",
        run.stderr
    );
}
