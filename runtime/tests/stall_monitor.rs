//! The stall monitor (`Builder::stall_monitor`, `sched/monitor.rs`): a task that holds its
//! worker without a scheduling call while others wait — blocked in the OS, or computing — is
//! reported once per episode, by name, with what its thread was doing; a task that blocks in
//! lagom never is; tasks that may move are taken by an idle worker, which the monitor kicks;
//! the reports are counted, traced, rate-limited on stderr; a panicking callback does not end
//! the monitoring; a task that unwinds and holds its worker is reported through the same
//! path; an idle runtime's monitor sleeps.
//!
//! Every test waits for what it assumes (a report, through the callback) instead of sleeping a
//! fixed time, so a loaded host only makes it slower: a stalling task keeps stalling until its
//! report has come, bounded by `GIVE_UP`, past which the test fails instead of hanging.

mod child_util;
mod panic_util;
mod runtime_util;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use lagom::runtime::{OnStall, StallCause, StallReport, Syscall};
use lagom::task;

/// How long a stalling task waits for its report before the test fails.
const GIVE_UP: Duration = Duration::from_secs(20);

/// The threshold of the tests' monitors.
const THRESHOLD: Duration = Duration::from_millis(5);

/// The reports a runtime's monitor delivered, and a way to wait for them.
#[derive(Default)]
struct Reports {
    list: Mutex<Vec<StallReport>>,
    changed: Condvar,
}

impl Reports {
    fn push(&self, r: &StallReport) {
        self.list.lock().unwrap().push(r.clone());
        self.changed.notify_all();
    }

    fn len(&self) -> usize {
        self.list.lock().unwrap().len()
    }

    /// Waits (from a task: it blocks its worker, which is the point) until `n` reports have
    /// come or `GIVE_UP` has passed; returns whether they came.
    fn wait_for(&self, n: usize) -> bool {
        let t0 = Instant::now();
        let mut l = self.list.lock().unwrap();
        while l.len() < n {
            let left = GIVE_UP.saturating_sub(t0.elapsed());
            if left.is_zero() {
                return false;
            }
            l = self.changed.wait_timeout(l, left).unwrap().0;
        }
        true
    }

    fn all(&self) -> Vec<StallReport> {
        self.list.lock().unwrap().clone()
    }
}

/// Whether the tests run under an emulator, whose procfs shows the host's system calls (the
/// cause's kind is checked there, not the call's name).
fn emulated() -> bool {
    std::env::var("LAGOM_TEST_RUNNER").is_ok_and(|r| !r.trim().is_empty())
}

/// A runtime on `cpus` whose monitor (threshold [`THRESHOLD`]) hands its reports to the
/// returned [`Reports`].
fn runtime_on(cpus: &[usize], tracing: bool) -> (lagom::Runtime, Arc<Reports>) {
    let reports = Arc::new(Reports::default());
    let r = Arc::clone(&reports);
    let rt = lagom::Runtime::builder()
        .worker_cpus(cpus.iter().copied())
        .tracing(tracing)
        .stall_threshold(THRESHOLD)
        .on_stall(OnStall::call(move |rep: &StallReport| r.push(rep)))
        .build()
        .unwrap();
    (rt, reports)
}

/// [`runtime_on`] one worker.
fn one_worker() -> (lagom::Runtime, Arc<Reports>) {
    runtime_on(&runtime_util::two_cpus()[..1], false)
}

/// The sum of a counter over the workers.
fn counter(rt: &lagom::Runtime, name: &str) -> u64 {
    rt.stats()
        .workers
        .iter()
        .map(|w| w.counters().find(|c| c.0 == name).unwrap().1)
        .sum()
}

/// Blocks the calling task's worker in the OS, in 1 ms `std::thread::sleep`s, until `n`
/// reports have come (or `GIVE_UP`): one episode, since it makes no scheduling call.
fn os_sleep_until_reported(reports: &Reports, n: usize) -> bool {
    let t0 = Instant::now();
    while reports.len() < n {
        if t0.elapsed() > GIVE_UP {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

#[test]
fn a_task_blocked_in_the_os_is_reported_once_by_name() {
    let (rt, reports) = one_worker();
    let r = Arc::clone(&reports);
    let came = rt.block_on(move || {
        let sleeper = task::Builder::new()
            .name("os-sleeper")
            .spawn(move || os_sleep_until_reported(&r, 1))
            .unwrap();
        let behind = task::spawn(|| ());
        let came = sleeper.join().unwrap();
        behind.join().unwrap();
        came
    });
    assert!(came, "no report within {GIVE_UP:?}");
    let all = reports.all();
    assert_eq!(all.len(), 1, "{all:#?}");
    let r = &all[0];
    assert_eq!(r.task_name, "os-sleeper");
    assert_eq!((r.worker, r.cpu), (0, rt.worker_cpus()[0]));
    assert!(r.stalled_for >= THRESHOLD, "{r:?}");
    assert!(r.runnable >= 1, "{r:?}");
    if emulated() {
        assert!(matches!(r.cause, StallCause::Syscall { .. }), "{r:?}");
    } else {
        assert_eq!(r.cause.call(), Some(Syscall::ClockNanosleep), "{r:?}");
        let text = r.to_string();
        assert!(
            text.contains("\"os-sleeper\"")
                && text.contains("clock_nanosleep")
                && text.contains("lagom::task::sleep"),
            "{text}"
        );
    }
    assert_eq!(counter(&rt, "stalls"), 1);
    // The episode ended at the sleeper's exit; its length is counted at the monitor's next
    // look.
    let t0 = Instant::now();
    while counter(&rt, "stall_ns") == 0 && t0.elapsed() < GIVE_UP {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(counter(&rt, "stall_ns") >= THRESHOLD.as_nanos() as u64);
}

#[test]
fn a_spinning_task_is_reported_once_by_name() {
    let (rt, reports) = one_worker();
    let r = Arc::clone(&reports);
    let came = rt.block_on(move || {
        let spinner = task::Builder::new()
            .name("spinner")
            .spawn(move || {
                let t0 = Instant::now();
                while r.len() < 1 && t0.elapsed() < GIVE_UP {
                    std::hint::spin_loop();
                }
                r.len() == 1
            })
            .unwrap();
        let behind = task::spawn(|| ());
        let came = spinner.join().unwrap();
        behind.join().unwrap();
        came
    });
    assert!(came, "no report within {GIVE_UP:?}");
    let all = reports.all();
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].task_name, "spinner");
    assert!(
        matches!(all[0].cause, StallCause::Running { .. }),
        "{:?}",
        all[0]
    );
    assert!(all[0].to_string().contains("cond_resched"), "{}", all[0]);
    assert_eq!(counter(&rt, "stalls"), 1);
}

/// Tasks that block in lagom (a ping-pong over `lagom::sync::mpsc`, a `lagom::task::sleep`, a
/// `lagom::sync::Mutex` held across a sleep) and one that computes with `cond_resched` keep
/// making scheduling calls: never reported, however long they run. (A host that keeps the
/// worker's thread off its CPU is no reason either: the CPU-time rule.)
#[test]
fn tasks_that_block_in_lagom_are_never_reported() {
    let (rt, reports) = one_worker();
    rt.block_on(|| {
        let (tx, rx) = lagom::sync::mpsc::channel::<u32>();
        let (back, back_rx) = lagom::sync::mpsc::channel::<u32>();
        let echo = task::spawn(move || {
            for v in rx {
                back.send(v).unwrap();
            }
        });
        let sleeper = task::spawn(|| task::sleep(Duration::from_millis(100)));
        let m = Arc::new(lagom::sync::Mutex::new(0));
        let lockers: Vec<_> = (0..2)
            .map(|_| {
                let m = Arc::clone(&m);
                task::spawn(move || {
                    for _ in 0..20 {
                        let mut g = m.lock().unwrap();
                        *g += 1;
                        task::sleep(Duration::from_millis(1));
                    }
                })
            })
            .collect();
        let computer = task::spawn(|| {
            let t0 = Instant::now();
            let mut x = 0u64;
            while t0.elapsed() < Duration::from_millis(100) {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                task::cond_resched();
            }
        });
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(300) {
            tx.send(1).unwrap();
            back_rx.recv().unwrap();
        }
        drop(tx);
        echo.join().unwrap();
        sleeper.join().unwrap();
        lockers.into_iter().for_each(|h| h.join().unwrap());
        computer.join().unwrap();
    });
    assert!(reports.all().is_empty(), "{:#?}", reports.all());
    assert_eq!(counter(&rt, "stalls"), 0);
}

/// Tasks that only yield to one another switch at every call, and each switch is a
/// `schedule()` and nothing else — no `cond_resched` tick, no failing `try_*`, no idle
/// round — so only `schedule()`'s store of its time shows the worker making progress: never
/// reported (without the store, mutant `monitor_no_last_point`, the worker looks held by
/// whichever task runs, with the others queued behind it).
#[test]
fn tasks_that_yield_to_each_other_are_never_reported() {
    let (rt, reports) = one_worker();
    rt.block_on(|| {
        let yielders: Vec<_> = (0..3)
            .map(|_| {
                task::spawn(|| {
                    let t0 = Instant::now();
                    while t0.elapsed() < Duration::from_millis(300) {
                        task::yield_now();
                    }
                })
            })
            .collect();
        yielders.into_iter().for_each(|h| h.join().unwrap());
    });
    assert!(reports.all().is_empty(), "{:#?}", reports.all());
    assert_eq!(counter(&rt, "stalls"), 0);
}

/// A task blocks its worker in the OS while another task of the worker sleeps in lagom:
/// nothing is runnable behind it, only the sleeper's overdue timer — the shape of a
/// `std::sync::Mutex` held across `lagom::task::sleep`, a deadlock. Here the report's callback
/// is what ends the wait.
#[test]
fn a_worker_blocked_while_a_sleeper_s_timer_is_overdue_is_reported() {
    // Under qemu-user (CI's aarch64 step) the emulator's translation pauses hold a worker
    // past the threshold where the scenario has none, and procfs describes the emulator's
    // host threads: the episodes these tests count are not the ones they build.
    if runtime_util::emulated_skip(
        "a_worker_blocked_while_a_sleeper_s_timer_is_overdue_is_reported",
    ) {
        return;
    }
    let (rt, reports) = one_worker();
    let r = Arc::clone(&reports);
    let came = rt.block_on(move || {
        let sleeper = task::Builder::new()
            .name("sleeper")
            .spawn(|| task::sleep(Duration::from_millis(1)))
            .unwrap();
        let waiter = task::Builder::new()
            .name("os-waiter")
            .spawn(move || {
                // Blocks the worker in futex until the report has come.
                r.wait_for(1)
            })
            .unwrap();
        let came = waiter.join().unwrap();
        sleeper.join().unwrap();
        came
    });
    assert!(came, "no report within {GIVE_UP:?}");
    let all = reports.all();
    assert_eq!(all.len(), 1, "{all:#?}");
    let r = &all[0];
    assert_eq!(r.task_name, "os-waiter");
    assert!(r.timer_overdue.is_some(), "{r:?}");
    if !emulated() {
        assert_eq!(r.cause.call(), Some(Syscall::Futex), "{r:?}");
        assert!(r.to_string().contains("lagom::sync"), "{r}");
    }
}

/// A timer whose task was woken early is no waiter: a task's `park_timeout` is cut short by
/// an unpark, the task then blocks its worker in the OS with nothing else there, and its
/// old timer's deadline passes meanwhile. Before the heap dropped such entries, the monitor
/// took that deadline for a sleeper waiting behind the stuck task and reported a stall.
#[test]
fn a_timer_of_a_task_woken_early_is_no_waiter() {
    let (rt, reports) = one_worker();
    let stale_after = Duration::from_millis(20);
    rt.block_on(move || {
        let me = task::current_unparker();
        // Unparked before it parks: the park returns at once, its timer armed.
        me.unpark();
        task::park_timeout(stale_after);
        // Past the stale deadline by many monitor periods, blocked in the OS, nobody else
        // here (this is the only task).
        std::thread::sleep(stale_after + THRESHOLD * 20);
    });
    assert!(reports.all().is_empty(), "{:#?}", reports.all());
    assert_eq!(counter(&rt, "stalls"), 0);
}

/// While a worker is stuck, the monitor kicks a worker that went to sleep before the work
/// piled up, and its newly idle balance takes the tasks that may move.
///
/// The scene: worker 1 is loaded with tasks pinned to it; the driver, on worker 0, queues 40
/// tasks pinned to worker 0 behind itself, then spawns `movable`, which CPU selection puts on
/// worker 0 (worker 1 is the busier), 41st in its queue. Worker 1's tasks end; going idle, its
/// newly idle balance examines one pass of worker 0's queue (32 entries, the kernel's
/// `nr_migrate` bound), finds nothing it may take, and it sleeps with no timer (it spawned no
/// task, so its stack pool has nothing to trim). The driver then blocks worker 0 in the OS
/// until `movable` has run. Nothing but the monitor wakes worker 1: the nohz kick comes from
/// a busy worker's tick, and worker 0's does not run. Kicked, worker 1's next pass reaches
/// `movable`.
#[test]
fn the_monitor_kicks_an_idle_worker_for_tasks_that_may_move() {
    // Under qemu-user (CI's aarch64 step) the emulator's translation pauses hold a worker
    // past the threshold where the scenario has none, and procfs describes the emulator's
    // host threads: the episodes these tests count are not the ones they build.
    if runtime_util::emulated_skip("the_monitor_kicks_an_idle_worker_for_tasks_that_may_move") {
        return;
    }
    const LOADERS: usize = 60;
    const PINNED: usize = 40;
    let Some(cpus) = runtime_util::two_cpus_or_skip("the_monitor_kicks_an_idle_worker") else {
        return;
    };
    let (a, b) = (cpus[0], cpus[1]);
    let (rt, reports) = runtime_on(&[a, b], false);
    let go = Arc::new(AtomicBool::new(false));
    let release = Arc::new(AtomicBool::new(false));
    let ran_on = Arc::new(AtomicUsize::new(usize::MAX));
    let driver = {
        let (go, release, ran_on) = (Arc::clone(&go), Arc::clone(&release), Arc::clone(&ran_on));
        rt.spawn_with(task::Builder::new().name("driver").cpus([a]), move || {
            let wait = |flag: Arc<AtomicBool>| {
                move || {
                    while !flag.load(Ordering::Acquire) {
                        task::yield_now();
                    }
                }
            };
            let started = Arc::new(AtomicUsize::new(0));
            let loaders: Vec<_> = (0..LOADERS)
                .map(|_| {
                    let w = wait(Arc::clone(&go));
                    let started = Arc::clone(&started);
                    task::Builder::new()
                        .cpus([b])
                        .spawn(move || {
                            started.fetch_add(1, Ordering::AcqRel);
                            w()
                        })
                        .unwrap()
                })
                .collect();
            // Worker 1 has taken them all in (its published count is what CPU selection
            // reads).
            while started.load(Ordering::Acquire) < LOADERS {
                task::yield_now();
            }
            let pinned: Vec<_> = (0..PINNED)
                .map(|_| {
                    let w = wait(Arc::clone(&release));
                    task::Builder::new().cpus([a]).spawn(w).unwrap()
                })
                .collect();
            let (done, has_run) = std::sync::mpsc::channel::<()>();
            let r = Arc::clone(&ran_on);
            let movable = task::Builder::new()
                .name("movable")
                .spawn(move || {
                    r.store(task::current().unwrap().cpu, Ordering::Release);
                    done.send(()).unwrap();
                })
                .unwrap();
            go.store(true, Ordering::Release);
            // Blocked in the OS (a futex wait) until `movable` has run somewhere.
            let _ = has_run.recv_timeout(GIVE_UP);
            let ran = ran_on.load(Ordering::Acquire);
            release.store(true, Ordering::Release);
            loaders.into_iter().for_each(|h| h.join().unwrap());
            pinned.into_iter().for_each(|h| h.join().unwrap());
            movable.join().unwrap();
            ran
        })
        .unwrap()
    };
    let ran = driver.join().unwrap();
    assert_eq!(
        ran,
        b,
        "`movable` did not run on the other worker while the driver held worker 0 (ran on \
         {ran}; usize::MAX: not within {GIVE_UP:?}); reports: {:#?}",
        reports.all()
    );
    let all = reports.all();
    let r = all
        .iter()
        .find(|r| r.task_name == "driver")
        .unwrap_or_else(|| panic!("the driver's stall was not reported: {}", rt.stats()));
    assert_eq!((r.movable, r.affinity_bound), (1, PINNED), "{r:?}");
    assert!(
        r.to_string().contains("1 may move to another worker"),
        "{r}"
    );
    assert!(counter(&rt, "stall_kicks") >= 1);
}

/// A task that unwinds and whose destructor blocks holds its worker's thread (no other task
/// may run there while it unwinds, `sched/unwind.rs`): a hold that lasts while another task
/// waits there is a stall like any other, reported once through the same `on_stall`, with
/// the cause `Unwinding` (not the futex wait of lagom's in which the thread waits). Here the
/// report is what ends the destructor's wait.
#[test]
fn a_task_that_unwinds_and_holds_its_worker_is_reported_through_on_stall() {
    panic_util::quiet();
    let reports = Arc::new(Reports::default());
    let (release, released) = lagom::sync::mpsc::channel::<()>();
    let release = Mutex::new(release);
    let r = Arc::clone(&reports);
    let rt = lagom::Runtime::builder()
        .worker_cpus(runtime_util::two_cpus().into_iter().take(1))
        .stall_threshold(THRESHOLD)
        .on_stall(OnStall::call(move |rep: &StallReport| {
            r.push(rep);
            let _ = release.lock().unwrap().send(());
        }))
        .build()
        .unwrap();
    /// Queues a task behind its own and waits for the release, while its task unwinds.
    struct WaitInDrop(lagom::sync::mpsc::Receiver<()>);
    impl Drop for WaitInDrop {
        fn drop(&mut self) {
            // A spawn while unwinding does not switch: `behind` waits in the queue.
            drop(task::spawn(|| ()));
            let _ = self.0.recv_timeout(GIVE_UP);
        }
    }
    let h = rt
        .spawn_with(task::Builder::new().name("unwinder"), move || {
            let _w = WaitInDrop(released);
            panic!("deliberate: a panic whose destructor blocks");
        })
        .unwrap();
    assert!(h.join().is_err());
    let all = reports.all();
    assert_eq!(all.len(), 1, "{all:#?}");
    let r = &all[0];
    assert_eq!(r.task_name, "unwinder");
    assert_eq!(r.cause, StallCause::Unwinding, "{r:?}");
    assert_eq!(r.runnable, 1, "{r:?}");
    let text = r.to_string();
    assert!(
        text.contains("without letting another task run: unwinding from a panic")
            && text.contains("the same worker"),
        "{text}"
    );
    assert_eq!(counter(&rt, "stalls"), 1);
}

/// A callback that panics is caught: the monitor goes on and reports the next episode.
#[test]
fn a_panicking_callback_does_not_end_the_monitoring() {
    // Under qemu-user (CI's aarch64 step) the emulator's translation pauses hold a worker
    // past the threshold where the scenario has none, and procfs describes the emulator's
    // host threads: the episodes these tests count are not the ones they build.
    if runtime_util::emulated_skip("a_panicking_callback_does_not_end_the_monitoring") {
        return;
    }
    let reports = Arc::new(Reports::default());
    let r = Arc::clone(&reports);
    let rt = lagom::Runtime::builder()
        .worker_cpus(runtime_util::two_cpus().into_iter().take(1))
        .stall_threshold(THRESHOLD)
        .on_stall(OnStall::call(move |rep: &StallReport| {
            r.push(rep);
            panic!("a stall callback that panics (expected by the test)");
        }))
        .build()
        .unwrap();
    let r = Arc::clone(&reports);
    let came = rt.block_on(move || {
        let staller = task::Builder::new()
            .name("twice")
            .spawn(move || {
                let first = os_sleep_until_reported(&r, 1);
                // A scheduling call ends the episode (the first task behind runs and ends);
                // the next one, with another task behind, is a new stall.
                task::yield_now();
                let behind = task::spawn(|| ());
                let second = os_sleep_until_reported(&r, 2);
                behind.join().unwrap();
                first && second
            })
            .unwrap();
        let behind = task::spawn(|| ());
        let came = staller.join().unwrap();
        behind.join().unwrap();
        came
    });
    assert!(came, "a report did not come within {GIVE_UP:?}");
    assert_eq!(reports.len(), 2);
    assert_eq!(counter(&rt, "stalls"), 2);
    // The runtime is as good as before.
    assert_eq!(rt.block_on(|| task::spawn(|| 6 * 7).join().unwrap()), 42);
}

/// A report is a `Stall` event of the trace, on the stalled worker's track of the JSON.
#[test]
fn a_stall_is_traced() {
    let (rt, reports) = runtime_on(&runtime_util::two_cpus()[..1], true);
    let r = Arc::clone(&reports);
    let id = rt.block_on(move || {
        let sleeper = task::Builder::new()
            .name("traced-sleeper")
            .spawn(move || {
                assert!(os_sleep_until_reported(&r, 1));
                task::current().unwrap().id
            })
            .unwrap();
        let behind = task::spawn(|| ());
        behind.join().unwrap();
        sleeper.join().unwrap()
    });
    let (_, trace) = rt.shutdown_with_trace();
    let stalls: Vec<_> = trace
        .outside()
        .events
        .iter()
        .filter_map(|e| match e.kind {
            lagom::trace::TraceEventKind::Stall {
                task,
                worker,
                stalled_ns,
                ..
            } => Some((task, worker, stalled_ns)),
            _ => None,
        })
        .collect();
    assert_eq!(stalls.len(), 1, "{stalls:?}");
    assert_eq!((stalls[0].0, stalls[0].1), (id, 0));
    assert!(stalls[0].2 >= THRESHOLD.as_nanos() as u64);
    let json: serde_json::Value = serde_json::from_str(&trace.json().to_string()).unwrap();
    let ev = json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["cat"] == "stall")
        .expect("a stall event in the JSON");
    assert_eq!(ev["name"], "stall traced-sleeper");
    assert_eq!(ev["tid"], 1, "drawn on worker 0's track: {ev}");
    assert_eq!(ev["args"]["task"], id);
    assert!(ev["args"]["stalled_us"].as_f64().unwrap() >= 5000.0, "{ev}");
}

#[test]
fn a_threshold_below_a_millisecond_is_refused() {
    let err = lagom::Runtime::builder()
        .stall_threshold(Duration::from_micros(999))
        .build()
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("Builder::stall_threshold") && text.contains("1 ms"),
        "{text}"
    );
}

/// The scenarios that need a process of their own (the threads of one runtime alone, or
/// stderr): run by [`child`] in a child process.
const SCENARIO: &str = "LAGOM_STALL_MONITOR_SCENARIO";

/// The threads named `name` of this process, by kernel id.
fn threads_named(name: &str) -> Vec<u32> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            (comm.trim() == name).then(|| e.file_name().to_str()?.parse().ok())?
        })
        .collect()
}

/// A thread's voluntary context switches so far.
fn voluntary_switches(tid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn child() {
    let Ok(scenario) = std::env::var(SCENARIO) else {
        return;
    };
    match scenario.as_str() {
        "deep" => {
            let (rt, reports) = one_worker();
            // std names a thread from the thread itself: wait for it.
            let t0 = Instant::now();
            let mut monitor = threads_named("lagom-monitor");
            while monitor.is_empty() && t0.elapsed() < GIVE_UP {
                std::thread::yield_now();
                monitor = threads_named("lagom-monitor");
            }
            assert_eq!(monitor.len(), 1, "{monitor:?}");
            // Idle past the monitor's `DEEP_AFTER` (1 s), it sleeps without a timeout: a window
            // of 300 ms in which it never woke (its period is 5 ms, so a monitor that still
            // samples wakes dozens of times in one; a host that keeps it off its CPU for a
            // whole window only makes this wait longer). Past `GIVE_UP`, it never slept.
            std::thread::sleep(Duration::from_millis(1000));
            let t0 = Instant::now();
            let mut wakeups = u64::MAX;
            while wakeups != 0 && t0.elapsed() < GIVE_UP {
                let before = voluntary_switches(monitor[0]);
                std::thread::sleep(Duration::from_millis(300));
                wakeups = voluntary_switches(monitor[0]) - before;
            }
            eprintln!("MONITOR_WAKEUPS {wakeups}");
            // A stall after the deep sleep is still reported: the waking worker woke it.
            let r = Arc::clone(&reports);
            let came = rt.block_on(move || {
                let s = task::spawn(move || os_sleep_until_reported(&r, 1));
                let behind = task::spawn(|| ());
                behind.join().unwrap();
                s.join().unwrap()
            });
            eprintln!("REPORTED {came}");
        }
        "off" => {
            let rt = lagom::Runtime::builder()
                .stall_monitor(false)
                .build()
                .unwrap();
            eprintln!("MONITORS {}", threads_named("lagom-monitor").len());
            drop(rt);
        }
        "stderr" => {
            // 20 unnamed tasks each hold the only worker in a `std::thread::sleep` of four
            // thresholds while the others wait: up to 20 episodes of one (name, call) key.
            let t0 = Instant::now();
            let rt = lagom::Runtime::builder()
                .worker_cpus(runtime_util::two_cpus().into_iter().take(1))
                .stall_threshold(THRESHOLD)
                .build()
                .unwrap();
            rt.block_on(move || {
                let hs: Vec<_> = (0..20)
                    .map(|_| task::spawn(|| std::thread::sleep(THRESHOLD * 4)))
                    .collect();
                hs.into_iter().for_each(|h| h.join().unwrap());
            });
            let stalls = counter(&rt, "stalls");
            drop(rt);
            eprintln!("STALLS {stalls}");
            eprintln!("SECONDS {}", t0.elapsed().as_secs());
        }
        other => panic!("unknown scenario {other}"),
    }
}

#[test]
fn an_idle_runtime_s_monitor_sleeps_until_a_worker_wakes() {
    let out = child_util::run_child(SCENARIO, "deep");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("MONITOR_WAKEUPS 0"), "{}", out.stderr);
    assert!(out.stderr.contains("REPORTED true"), "{}", out.stderr);
}

#[test]
fn stall_monitor_false_starts_no_monitor() {
    let out = child_util::run_child(SCENARIO, "off");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("MONITORS 0"), "{}", out.stderr);
}

/// On stderr, repeats of one task name and call are held back and counted: one full line,
/// then one line that says how many more there were, whose counts add up to the stalls.
#[test]
fn stderr_reports_are_rate_limited() {
    let out = child_util::run_child(SCENARIO, "stderr");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let stalls: u64 = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("STALLS "))
        .expect("the child's count")
        .parse()
        .unwrap();
    let full = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("lagom: task "))
        .count() as u64;
    let held_back: u64 = out
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("lagom: "))
        .filter_map(|l| l.split_once(" more stall report(s) not printed"))
        .map(|(n, _)| n.parse::<u64>().unwrap())
        .sum();
    assert_eq!(full, stalls.min(1), "{}", out.stderr);
    assert_eq!(full + held_back, stalls, "{}", out.stderr);
    // At most one summary a second while it runs (a loaded host can stretch the run past
    // one), and one at the end.
    let seconds: usize = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("SECONDS "))
        .expect("the child's run time")
        .parse()
        .unwrap();
    let summaries = out
        .stderr
        .lines()
        .filter(|l| l.contains("more stall report(s) not printed"))
        .count();
    assert!(summaries <= 1 + seconds, "{}", out.stderr);
}

/// Two tasks with a 100 ms slice (the longest) that call `cond_resched` in their loops share
/// one worker: each runs up to its whole slice before the other, longer than the threshold,
/// and never holds the worker without a scheduling call. The tick timer, which asks for a
/// tick only when something is due, must still let their `cond_resched` show progress.
#[test]
fn long_slices_that_call_cond_resched_are_never_reported() {
    let (rt, reports) = one_worker();
    rt.block_on(|| {
        let hogs: Vec<_> = (0..2)
            .map(|_| {
                task::Builder::new()
                    .slice(Duration::from_millis(100))
                    .spawn(|| {
                        let t0 = Instant::now();
                        while t0.elapsed() < Duration::from_millis(400) {
                            task::cond_resched();
                        }
                    })
                    .unwrap()
            })
            .collect();
        hogs.into_iter().for_each(|h| h.join().unwrap());
    });
    assert!(reports.all().is_empty(), "{:#?}", reports.all());
    assert_eq!(counter(&rt, "stalls"), 0);
}
