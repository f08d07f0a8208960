//! Helpers of the runtime tests: a watchdog, the feature combinations, a seeded generator.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Fails the test process if `progress` stops moving for `limit` while the guard lives,
/// printing `what` (which should name the seed to replay, where there is one).
pub struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    pub fn new(what: impl Into<String>, progress: Arc<AtomicU64>, limit: Duration) -> Watchdog {
        let what = what.into();
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut last = progress.load(Ordering::Relaxed);
            let mut since = Instant::now();
            while !s.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
                let now = progress.load(Ordering::Relaxed);
                if now != last {
                    last = now;
                    since = Instant::now();
                } else if since.elapsed() > limit {
                    fail(&format!(
                        "watchdog: {what}: no progress for {limit:?} (stuck at {now}): lost wakeup"
                    ));
                }
            }
        });
        Watchdog {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Fails the whole test process with `msg`, for a hang that a panic could not end (the
/// runtime's shutdown might wait on the stuck task). Written to the process's stderr itself:
/// the test harness's capture, which `eprintln!` goes to, is lost on `exit`.
pub fn fail(msg: &str) -> ! {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{msg}");
    std::process::exit(99);
}

/// Every combination of the wakeup features the runtime implements, as feature strings.
pub fn feature_combinations() -> Vec<String> {
    let names = [
        "DELAY_DEQUEUE",
        "TTWU_QUEUE",
        "TTWU_QUEUE_ON_CPU",
        "TTWU_QUEUE_DELAYED",
        "TTWU_DEQUEUE",
    ];
    (0..1u32 << names.len())
        .map(|bits| {
            names
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    if bits & (1 << i) != 0 {
                        n.to_string()
                    } else {
                        format!("NO_{n}")
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect()
}

/// The CPUs to run two workers on: the first two allowed CPUs (or one, twice not allowed).
pub fn two_cpus() -> Vec<usize> {
    let rt = lagom::Runtime::builder().build().expect("default runtime");
    let cpus = rt.worker_cpus();
    drop(rt);
    cpus.into_iter().take(2).collect()
}

/// [`two_cpus`] for a test that needs two: `None` (after saying so) when only one CPU is
/// allowed, but a failure under `CI=true`, where a skip would pass silently.
pub fn two_cpus_or_skip(test: &str) -> Option<Vec<usize>> {
    let cpus = two_cpus();
    if cpus.len() >= 2 {
        return Some(cpus);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test} needs two allowed CPUs, and under CI=true it may not be skipped");
    }
    eprintln!("SKIPPED {test}: needs two allowed CPUs");
    None
}

/// Whether the tests run under an emulator (`LAGOM_TEST_RUNNER` set, as CI's aarch64 step
/// sets it to `qemu-aarch64`): then `test`, whose outcome depends on how much run time the
/// tasks are charged between their scheduling points, says `SKIPPED` and returns. An
/// emulator's pauses to translate code are charged to whichever task runs, in stretches
/// that decide such a scenario; these tests run natively in CI's `test` step.
pub fn emulated_skip(test: &str) -> bool {
    let runner = std::env::var("LAGOM_TEST_RUNNER").unwrap_or_default();
    if runner.trim().is_empty() {
        return false;
    }
    eprintln!(
        "SKIPPED {test}: its outcome hangs on charged run time, which the emulator ({runner}) distorts"
    );
    true
}

/// xorshift64*, seeded.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The seed of test `test`: from `LAGOM_SEED_<TEST>` (the test's name in capitals, printed
/// by the test with the seed; one variable per test, so that replaying one test leaves the
/// others as they are), else from the clock.
pub fn seed(test: &str) -> u64 {
    std::env::var(seed_var(test))
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        })
}

/// How to replay test `test` with `seed`, for failure messages.
pub fn replay(test: &str, seed: u64) -> String {
    format!("seed {seed} (replay with {}={seed})", seed_var(test))
}

/// The variable that replays test `test`'s seed: `LAGOM_SEED_<TEST>`.
pub fn seed_var(test: &str) -> String {
    format!("LAGOM_SEED_{}", test.to_uppercase())
}

/// Two tasks, "ping" pinned to the runtime's first worker and "pong" to its last, pass a
/// turn back and forth `n` times through park/unpark; a watchdog fails the process if the
/// turn stops moving for 5 s (a lost wakeup).
pub fn pinned_ping_pong(rt: &lagom::Runtime, n: u64) {
    use lagom::task::{Builder, Unparker};
    use std::sync::OnceLock;
    let cpus = rt.worker_cpus();
    let turn = Arc::new(AtomicU64::new(0));
    let _dog = Watchdog::new("ping-pong", Arc::clone(&turn), Duration::from_secs(5));
    let peer: Arc<[OnceLock<Unparker>; 2]> = Arc::new(Default::default());
    let player = |me: u64| {
        let (turn, peer) = (Arc::clone(&turn), Arc::clone(&peer));
        move || {
            peer[me as usize]
                .set(lagom::task::current_unparker())
                .unwrap();
            let other = loop {
                if let Some(o) = peer[1 - me as usize].get() {
                    break o.clone();
                }
                lagom::task::yield_now();
            };
            for i in 0..n {
                let mine = 2 * i + me;
                while turn.load(Ordering::Acquire) != mine {
                    lagom::task::park();
                }
                turn.store(mine + 1, Ordering::Release);
                other.unpark();
            }
        }
    };
    let last = *cpus.last().unwrap();
    let a = rt
        .spawn_with(Builder::new().name("ping").cpus([cpus[0]]), player(0))
        .unwrap();
    let b = rt
        .spawn_with(Builder::new().name("pong").cpus([last]), player(1))
        .unwrap();
    a.join().unwrap();
    b.join().unwrap();
    assert_eq!(turn.load(Ordering::Relaxed), 2 * n);
}

/// When the tasks of a [`storm`] stop.
#[derive(Clone, Copy, Debug)]
pub enum Stop {
    /// After this long.
    After(Duration),
    /// Once the tasks have run this many rounds each, on average.
    Rounds(u64),
}

/// How long the tasks of a [`storm`] may take to end once each was unparked the last time.
pub const STORM_END: Duration = Duration::from_secs(10);

/// `tasks` tasks wake up to `fanout` random others (unpark) each round and then park, yield
/// or call `cond_resched` at random, seeded by `seed`, until `stop`. The storm never stalls by
/// itself: a task unparks a peer (maybe itself) before it parks, so one is always runnable or
/// holds a token. A watchdog counting only the tasks' rounds fails the process if none makes
/// progress for 5 s. When the storm stops, the calling thread unparks each task exactly once,
/// after the stop flag is set, so that each sees it at its next return from `park` at the
/// latest; every task must then end within [`STORM_END`]. A task that does not lost a wakeup
/// (the last unpark found a token set that no wakeup followed, or the wakeup went nowhere):
/// the process fails, naming the tasks and `what` (the seed and how to replay it). Returns
/// the rounds run, summed over the tasks.
pub fn storm(
    rt: &lagom::Runtime,
    seed: u64,
    what: &str,
    tasks: usize,
    fanout: u64,
    stop: Stop,
) -> u64 {
    use lagom::task::Unparker;
    use std::sync::OnceLock;
    let stopped = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(AtomicU64::new(0));
    let dog = Watchdog::new(
        format!("storm, {what}"),
        Arc::clone(&progress),
        Duration::from_secs(5),
    );
    let peers: Arc<Vec<OnceLock<Unparker>>> =
        Arc::new((0..tasks).map(|_| OnceLock::new()).collect());
    let handles: Vec<_> = (0..tasks)
        .map(|i| {
            let (stopped, peers, progress) = (
                Arc::clone(&stopped),
                Arc::clone(&peers),
                Arc::clone(&progress),
            );
            rt.spawn(move || {
                peers[i].set(lagom::task::current_unparker()).unwrap();
                let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9));
                let mut rounds = 0u64;
                while !stopped.load(Ordering::Relaxed) {
                    for _ in 0..=rng.below(fanout) {
                        if let Some(u) = peers[rng.below(tasks as u64) as usize].get() {
                            u.unpark();
                        }
                    }
                    match rng.below(4) {
                        0 => lagom::task::yield_now(),
                        1 => lagom::task::cond_resched(),
                        _ => lagom::task::park(),
                    }
                    rounds += 1;
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                rounds
            })
        })
        .collect();
    match stop {
        Stop::After(d) => std::thread::sleep(d),
        Stop::Rounds(r) => {
            while progress.load(Ordering::Relaxed) < r * tasks as u64 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    stopped.store(true, Ordering::Relaxed);
    // From here on the tasks make no more rounds that count: the bound below is the check.
    drop(dog);
    // The stop flag is published by these unparks (their token's Release, the parks'
    // Acquire); a task still in its round sees the flag or consumes a token set after it.
    for h in &handles {
        h.unparker().unpark();
    }
    let t0 = Instant::now();
    while !handles.iter().all(|h| h.is_finished()) {
        if t0.elapsed() > STORM_END {
            let stuck: Vec<usize> = (0..tasks).filter(|&i| !handles[i].is_finished()).collect();
            fail(&format!(
                "storm, {what}: tasks {stuck:?} did not end within {STORM_END:?} of their last unpark: lost wakeup"
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    handles.into_iter().map(|h| h.join().unwrap()).sum()
}

/// A task pinned to one worker that spins (calling `cond_resched`) until told to stop
/// ([`pinned_spinner`]): it keeps that worker busy, and its end makes it newly idle.
pub struct Spinner {
    /// The task.
    pub handle: lagom::task::JoinHandle<()>,
    /// Set once the task runs.
    pub running: Arc<AtomicBool>,
    /// Set it to end the task.
    pub stop: Arc<AtomicBool>,
}

impl Spinner {
    /// Waits (up to 20 s, then fails) until the task runs.
    pub fn wait_running(&self) {
        wait_ran(&self.running, "a spinner");
    }

    /// Ends the task and joins it.
    pub fn end(self) {
        self.stop.store(true, Ordering::Release);
        self.handle.join().unwrap();
    }
}

/// Spawns a [`Spinner`] named `name` on `rt`, pinned to the worker of OS CPU `cpu`.
pub fn pinned_spinner(rt: &lagom::Runtime, name: &str, cpu: usize) -> Spinner {
    pinned_spinner_nice(rt, name, cpu, 0)
}

/// [`pinned_spinner`] at nice `nice`.
pub fn pinned_spinner_nice(rt: &lagom::Runtime, name: &str, cpu: usize, nice: i32) -> Spinner {
    let stop = Arc::new(AtomicBool::new(false));
    let (handle, running) = spawn_spinning(rt, name, cpu, nice, &stop);
    Spinner {
        handle,
        running,
        stop,
    }
}

/// Spawns a CPU-bound task named "hog" on `rt`, pinned to the worker of OS CPU `cpu`, at nice
/// `nice`, that calls `cond_resched` until `stop` (one flag may stop many hogs); returns once
/// the hog has run: a hog still on its worker's wakelist is not in that worker's published
/// count, and a loaded host can keep it there for milliseconds.
pub fn pinned_hog(
    rt: &lagom::Runtime,
    cpu: usize,
    nice: i32,
    stop: &Arc<AtomicBool>,
) -> lagom::task::JoinHandle<()> {
    let (handle, running) = spawn_spinning(rt, "hog", cpu, nice, stop);
    wait_ran(&running, "a hog");
    handle
}

/// The task of [`pinned_spinner`] and [`pinned_hog`], and the flag it sets once it runs.
fn spawn_spinning(
    rt: &lagom::Runtime,
    name: &str,
    cpu: usize,
    nice: i32,
    stop: &Arc<AtomicBool>,
) -> (lagom::task::JoinHandle<()>, Arc<AtomicBool>) {
    let running = Arc::new(AtomicBool::new(false));
    let (r, stop) = (Arc::clone(&running), Arc::clone(stop));
    let b = lagom::task::Builder::new()
        .name(name)
        .cpus([cpu])
        .nice(nice);
    let handle = rt
        .spawn_with(b, move || {
            r.store(true, Ordering::Release);
            while !stop.load(Ordering::Acquire) {
                lagom::task::cond_resched();
            }
        })
        .unwrap();
    (handle, running)
}

/// Waits (up to 20 s, then fails) until `running`, the flag of a task named `what`.
fn wait_ran(running: &AtomicBool, what: &str) {
    let t0 = Instant::now();
    while !running.load(Ordering::Acquire) {
        assert!(t0.elapsed() < Duration::from_secs(20), "{what} never ran");
        std::thread::sleep(Duration::from_millis(1));
    }
}
