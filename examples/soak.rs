//! `soak`: the threaded runtime for a chosen time under a random, seeded mix of everything it
//! offers, with invariants checked as it goes.
//!
//! ```text
//! cargo run --release -p lagom-examples --example soak -- [--seconds S] [--workers W] [--seed N]
//! ```
//!
//! Rounds follow each other until the time is up. A round builds a runtime (on `--workers`
//! workers, with scheduler features and the migration opt-in drawn at random), lets a driver
//! task keep up to 24 operations in flight for `--round-seconds`, each drawn from the mix
//! below, then leaves tasks blocked for good (parked, on a channel, a mutex, a condvar, a
//! semaphore, a barrier, a `OnceLock`'s initialiser, asleep) and shuts the runtime down,
//! which must cancel every one of them. The operations: spawns and joins (at random nice
//! levels and slices), sleeps, every `lagom::sync` primitive (`Mutex`, `Condvar`, `RwLock`,
//! `Semaphore`, `Barrier`, `mpsc` channels bounded and not, `oneshot`, `Once`, `OnceLock`,
//! `LazyLock`), the timeouts of each, `join_timeout`, `park`/`unpark`, `park_timeout`,
//! scopes, task graphs (some with a failing node), the blocking pool, panicking tasks,
//! yields.
//!
//! Invariants, each checked as the run goes (a failure prints what failed with the seed and
//! the command that replays the mix, and exits 1):
//!
//! * **every join returns and no wakeup is lost**: each operation, and each round's shutdown,
//!   is registered with a watchdog thread while it runs; one that has not finished after
//!   `--watchdog-seconds` is reported as a hang or a lost wakeup;
//! * **every result is right**: each operation checks what it computed (counts under a
//!   mutex, the order of every sender's messages, a graph's outputs, a semaphore's permits in
//!   use never above its count, one leader per barrier generation, timeouts that did not end
//!   early, …);
//! * **no task runs twice at once**: each task's code marks itself running between two
//!   blocking calls (an atomic flag per task) and fails if it finds itself marked already;
//! * **memory returns to its baseline**: after each shutdown the runtime's own counters say
//!   no task and no stack is left and nothing was abandoned, every task left blocked for the
//!   shutdown joins as cancelled, and the process's resident memory is back within
//!   `--rss-slack-mib` of what it was after the first round (the first round's shutdown
//!   leaves the blocking pool's threads and the allocator's caches warm: the baseline).
//!
//! `--inject lost-wakeup` adds a task that parks with no one to unpark it, once, to show
//! that the watchdog reports it (the self-test of the checks: the run must fail).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex, OnceLock as StdOnceLock};
use std::time::{Duration, Instant};

use lagom::graph::NodeId;
use lagom::sync::{
    Barrier, Condvar, LazyLock, Mutex, Once, OnceLock, RwLock, Semaphore, mpsc, oneshot,
};
use lagom::task::{self, JoinHandle};
use lagom::{GraphError, Runtime, TaskGraph};
use lagom_examples::usage_error;

const USAGE: &str = "usage: soak [--seconds S] [--workers W] [--seed N] [--round-seconds S]
            [--watchdog-seconds S] [--rss-slack-mib M] [--json] [--inject lost-wakeup]

Runs the threaded runtime for S seconds (default 30) under a random, seeded mix of spawns,
joins, sleeps, every lagom::sync primitive, timeouts, scopes, task graphs, the blocking pool,
nice levels and shutdowns, one runtime after another, checking invariants as it goes; prints
the operations per kind and the memory figures, and exits 1 on the first failure (with the
seed that replays the mix).
  --workers W           workers per runtime (default 2; at most the allowed CPUs)
  --seed N              the mix's seed (default: from the clock; printed)
  --round-seconds S     how long each runtime runs before its shutdown (default 3)
  --watchdog-seconds S  an operation unfinished after S seconds fails the run (default 60)
  --rss-slack-mib M     resident memory after a shutdown may exceed the baseline by M MiB
                        (default 64)
  --json                print the figures as one JSON object
  --inject lost-wakeup  a task parks with no one to unpark it: the watchdog must fail the run";

/// The command-line options.
#[derive(Debug, Clone)]
struct Opts {
    seconds: f64,
    workers: usize,
    seed: u64,
    round: f64,
    watchdog: f64,
    rss_slack_mib: u64,
    json: bool,
    inject_lost_wakeup: bool,
}

fn parse_args() -> Opts {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let mut o = Opts {
        seconds: 30.0,
        workers: 2,
        seed,
        round: 3.0,
        watchdog: 60.0,
        rss_slack_mib: 64,
        json: false,
        inject_lost_wakeup: false,
    };
    let mut parser = lexopt::Parser::from_env();
    let parsed: Result<(), lexopt::Error> = (|| {
        use lexopt::prelude::*;
        let positive = |name: &str, v: f64| -> Result<f64, lexopt::Error> {
            if v.is_finite() && v > 0.0 && v < 1e9 {
                Ok(v)
            } else {
                Err(format!("{name} must be a positive number of seconds, not {v}").into())
            }
        };
        while let Some(arg) = parser.next()? {
            match arg {
                Long("seconds") => o.seconds = positive("--seconds", parser.value()?.parse()?)?,
                Long("workers") => o.workers = parser.value()?.parse()?,
                Long("seed") => o.seed = parser.value()?.parse()?,
                Long("round-seconds") => {
                    o.round = positive("--round-seconds", parser.value()?.parse()?)?;
                }
                Long("watchdog-seconds") => {
                    o.watchdog = positive("--watchdog-seconds", parser.value()?.parse()?)?;
                }
                Long("rss-slack-mib") => o.rss_slack_mib = parser.value()?.parse()?,
                Long("json") => o.json = true,
                Long("inject") => {
                    let what: String = parser.value()?.parse()?;
                    match what.as_str() {
                        "lost-wakeup" => o.inject_lost_wakeup = true,
                        other => {
                            return Err(format!(
                                "--inject: unknown fault '{other}' (the one known: lost-wakeup)"
                            )
                            .into());
                        }
                    }
                }
                Short('h') | Long("help") => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                _ => return Err(arg.unexpected()),
            }
        }
        if o.workers == 0 {
            return Err("--workers must be at least 1".into());
        }
        Ok(())
    })();
    if let Err(e) = parsed {
        usage_error(e, USAGE);
    }
    o
}

// ---------------------------------------------------------------------------------------
// Failure reports and the watchdog.
// ---------------------------------------------------------------------------------------

/// What a failure report needs to say how to replay the run.
struct Run {
    opts: Opts,
    round: AtomicUsize,
}

static RUN: StdOnceLock<Run> = StdOnceLock::new();

/// Reports an invariant failure and ends the process with status 1.
fn fail(what: &str, msg: &str) -> ! {
    let run = RUN.get().expect("the run is set up first");
    let o = &run.opts;
    eprintln!(
        "soak: FAILED in round {} ({what}): {msg}\n\
         soak: 1 invariant failure; replay the mix with:\n  \
         cargo run --release -p lagom-examples --example soak -- --seed {} --workers {} \
         --seconds {} --round-seconds {}",
        run.round.load(Ordering::Relaxed),
        o.seed,
        o.workers,
        o.seconds,
        o.round
    );
    std::process::exit(1)
}

/// Checks `cond`, failing the run with `msg` otherwise.
macro_rules! check {
    ($what:expr, $cond:expr, $($msg:tt)+) => {
        if !$cond {
            fail($what, &format!($($msg)+));
        }
    };
}

/// The operations in flight, each with its kind and start, watched by a thread of its own.
#[derive(Default)]
struct Watchdog {
    ops: StdMutex<BTreeMap<u64, (&'static str, Instant)>>,
    next: AtomicU64,
}

impl Watchdog {
    fn global() -> &'static Watchdog {
        static W: StdOnceLock<Watchdog> = StdOnceLock::new();
        W.get_or_init(Watchdog::default)
    }

    /// Registers an operation of kind `kind` until the returned guard is dropped.
    fn watch(kind: &'static str) -> Watched {
        let w = Watchdog::global();
        let id = w.next.fetch_add(1, Ordering::Relaxed);
        w.ops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, (kind, Instant::now()));
        Watched(id)
    }

    /// The watchdog's thread: fails the run when an operation is older than `limit`.
    fn start(limit: Duration) {
        std::thread::Builder::new()
            .name("soak-watchdog".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(Duration::from_millis(200));
                    let oldest = {
                        let ops = Watchdog::global()
                            .ops
                            .lock()
                            .unwrap_or_else(|e| e.into_inner());
                        ops.iter()
                            .map(|(&id, &(kind, t0))| (t0.elapsed(), id, kind))
                            .max()
                    };
                    if let Some((age, id, kind)) = oldest
                        && age > limit
                    {
                        fail(
                            kind,
                            &format!(
                                "operation #{id} ({kind}) has not finished after {age:.1?}: a \
                                 join that does not return, a lost wakeup or a hang"
                            ),
                        );
                    }
                }
            })
            .expect("start the watchdog thread");
    }
}

/// An operation registered with the watchdog; dropping it unregisters it.
struct Watched(u64);

impl Drop for Watched {
    fn drop(&mut self) {
        Watchdog::global()
            .ops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.0);
    }
}

/// A task's "running" mark (no task runs twice at once): set from each resume to the next
/// blocking call, checked when it is set.
#[derive(Clone, Default)]
struct Running(Arc<AtomicBool>);

impl Running {
    /// The task runs: it must not have been running already.
    fn enter(&self, what: &'static str) {
        check!(
            what,
            !self.0.swap(true, Ordering::AcqRel),
            "a task runs twice at once (it resumed while marked running)"
        );
    }

    /// The task is about to block.
    fn leave(&self) {
        self.0.store(false, Ordering::Release);
    }

    /// Runs the blocking call `f` with the mark cleared around it.
    fn block<T>(&self, what: &'static str, f: impl FnOnce() -> T) -> T {
        self.leave();
        let v = f();
        self.enter(what);
        v
    }
}

// ---------------------------------------------------------------------------------------
// The operations.
// ---------------------------------------------------------------------------------------

/// The kinds of operation, in the order of the report.
const KINDS: &[&str] = &[
    "spawn_join",
    "sleep",
    "mutex",
    "condvar",
    "rwlock",
    "semaphore",
    "barrier",
    "mpsc",
    "sync_channel",
    "oneshot",
    "once",
    "once_lock",
    "lazy_lock",
    "timeouts",
    "join_timeout",
    "park_unpark",
    "scope",
    "graph",
    "graph_failing",
    "blocking_pool",
    "panic",
    "yield",
];

/// Counts per kind, and of the things the rounds do.
struct Counts {
    ops: Vec<AtomicU64>,
    tasks: AtomicU64,
}

impl Counts {
    fn global() -> &'static Counts {
        static C: StdOnceLock<Counts> = StdOnceLock::new();
        C.get_or_init(|| Counts {
            ops: KINDS.iter().map(|_| AtomicU64::new(0)).collect(),
            tasks: AtomicU64::new(0),
        })
    }
    fn spawned(n: usize) {
        Counts::global()
            .tasks
            .fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// Spawns `f` as a task with a random nice level and, sometimes, slice; counts it.
fn spawn<T: Send + 'static>(
    rng: &mut fastrand::Rng,
    f: impl FnOnce() -> T + Send + 'static,
) -> JoinHandle<T> {
    let mut b = task::Builder::new().nice(rng.i32(-20..=19));
    if rng.u8(..4) == 0 {
        b = b.slice(Duration::from_micros(rng.u64(100..=6000)));
    }
    Counts::spawned(1);
    match b.spawn(f) {
        Ok(h) => h,
        Err(e) => fail("spawn", &format!("spawn failed: {e}")),
    }
}

/// Joins `h`, which must return a value.
fn join<T>(what: &'static str, me: &Running, h: JoinHandle<T>) -> T {
    match me.block(what, || h.join()) {
        Ok(v) => v,
        Err(e) => fail(what, &format!("a join returned an error: {e}")),
    }
}

/// Runs one operation of kind `KINDS[k]`, which checks its own results; `rt` is its runtime
/// (for the task graphs).
fn run_op(k: usize, seed: u64, rt: &Runtime) {
    let kind = KINDS[k];
    let mut rng = fastrand::Rng::with_seed(seed);
    let me = Running::default();
    me.enter(kind);
    match kind {
        "spawn_join" => {
            let n = rng.usize(1..=8);
            let hs: Vec<_> = (0..n as u64)
                .map(|i| {
                    let yields = rng.usize(0..4);
                    spawn(&mut rng, move || {
                        let mut acc = i;
                        for _ in 0..yields {
                            task::yield_now();
                            acc = acc.wrapping_mul(3).wrapping_add(1);
                        }
                        (i, acc, yields)
                    })
                })
                .collect();
            for (i, h) in hs.into_iter().enumerate() {
                let (got, acc, yields) = join(kind, &me, h);
                let mut want = i as u64;
                for _ in 0..yields {
                    want = want.wrapping_mul(3).wrapping_add(1);
                }
                check!(
                    kind,
                    got == i as u64 && acc == want,
                    "task {i} returned ({got}, {acc})"
                );
            }
        }
        "sleep" => {
            let d = Duration::from_micros(rng.u64(0..2000));
            let t0 = Instant::now();
            me.block(kind, || task::sleep(d));
            check!(
                kind,
                t0.elapsed() >= d,
                "sleep({d:?}) returned after {:?}",
                t0.elapsed()
            );
        }
        "mutex" => {
            let (tasks, each) = (rng.usize(2..=6), rng.usize(1..=50));
            let m = Arc::new(Mutex::new(0usize));
            let hs: Vec<_> = (0..tasks)
                .map(|_| {
                    let m = Arc::clone(&m);
                    let yield_inside = rng.bool();
                    spawn(&mut rng, move || {
                        let me = Running::default();
                        me.enter("mutex");
                        for _ in 0..each {
                            let mut g = me.block("mutex", || m.lock().unwrap());
                            let v = *g;
                            if yield_inside {
                                me.block("mutex", task::yield_now);
                            }
                            *g = v + 1;
                        }
                        me.leave();
                    })
                })
                .collect();
            for h in hs {
                join(kind, &me, h);
            }
            let total = *m.lock().unwrap();
            check!(
                kind,
                total == tasks * each,
                "{tasks} x {each} increments made {total}"
            );
        }
        "condvar" => {
            let n = rng.usize(1..=64);
            let q = Arc::new((Mutex::new(VecDeque::new()), Condvar::new()));
            let q2 = Arc::clone(&q);
            let producer = spawn(&mut rng, move || {
                let me = Running::default();
                me.enter("condvar");
                for i in 0..n {
                    me.block("condvar", || q2.0.lock().unwrap()).push_back(i);
                    q2.1.notify_one();
                    if i % 7 == 3 {
                        me.block("condvar", task::yield_now);
                    }
                }
                me.leave();
            });
            let mut got = Vec::with_capacity(n);
            while got.len() < n {
                let g = me.block(kind, || {
                    q.1.wait_while(q.0.lock().unwrap(), |d| d.is_empty())
                        .unwrap()
                });
                let mut g = g;
                got.extend(g.drain(..));
            }
            join(kind, &me, producer);
            check!(kind, got == (0..n).collect::<Vec<_>>(), "received {got:?}");
        }
        "rwlock" => {
            let l = Arc::new(RwLock::new((0u64, 0u64)));
            let hs: Vec<_> = (0..rng.usize(2..=6))
                .map(|i| {
                    let l = Arc::clone(&l);
                    let rounds = rng.usize(1..=20);
                    spawn(&mut rng, move || {
                        let me = Running::default();
                        me.enter("rwlock");
                        for _ in 0..rounds {
                            if i % 2 == 0 {
                                let mut w = me.block("rwlock", || l.write().unwrap());
                                w.0 += 1;
                                me.block("rwlock", task::yield_now);
                                w.1 += 1;
                            } else {
                                let r = me.block("rwlock", || l.read().unwrap());
                                check!(
                                    "rwlock",
                                    r.0 == r.1,
                                    "a reader saw a half-done write {:?}",
                                    *r
                                );
                            }
                        }
                        me.leave();
                    })
                })
                .collect();
            for h in hs {
                join(kind, &me, h);
            }
            let v = *l.read().unwrap();
            check!(kind, v.0 == v.1, "the writes ended unequal: {v:?}");
        }
        "semaphore" => {
            let permits = rng.usize(1..=3);
            let s = Arc::new(Semaphore::new(permits));
            let in_use = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..rng.usize(2..=8))
                .map(|_| {
                    let (s, in_use) = (Arc::clone(&s), Arc::clone(&in_use));
                    spawn(&mut rng, move || {
                        let me = Running::default();
                        me.enter("semaphore");
                        let p = me.block("semaphore", || s.acquire());
                        let now = in_use.fetch_add(1, Ordering::AcqRel) + 1;
                        check!(
                            "semaphore",
                            now <= permits,
                            "{now} permits in use of {permits}"
                        );
                        me.block("semaphore", task::yield_now);
                        in_use.fetch_sub(1, Ordering::AcqRel);
                        drop(p);
                        me.leave();
                    })
                })
                .collect();
            for h in hs {
                join(kind, &me, h);
            }
            check!(
                kind,
                s.available_permits() == permits,
                "permits not given back"
            );
        }
        "barrier" => {
            let n = rng.usize(1..=6);
            let b = Arc::new(Barrier::new(n));
            let hs: Vec<_> = (0..n)
                .map(|_| {
                    let b = Arc::clone(&b);
                    spawn(&mut rng, move || b.wait().is_leader())
                })
                .collect();
            let leaders = hs.into_iter().map(|h| join(kind, &me, h));
            let leaders = leaders.filter(|&l| l).count();
            check!(
                kind,
                leaders == 1,
                "{leaders} leaders in one barrier generation of {n}"
            );
        }
        "mpsc" => {
            let (senders, each) = (rng.usize(1..=4), rng.usize(1..=40));
            let (tx, rx) = mpsc::channel::<(usize, usize)>();
            let hs: Vec<_> = (0..senders)
                .map(|s| {
                    let tx = tx.clone();
                    spawn(&mut rng, move || {
                        for i in 0..each {
                            tx.send((s, i)).expect("the receiver lives");
                        }
                    })
                })
                .collect();
            drop(tx);
            let mut next = vec![0usize; senders];
            while let Ok((s, i)) = me.block(kind, || rx.recv()) {
                check!(
                    kind,
                    i == next[s],
                    "sender {s}: message {i} came when {} was due",
                    next[s]
                );
                next[s] += 1;
            }
            check!(
                kind,
                next.iter().all(|&n| n == each),
                "messages lost: {next:?} of {each}"
            );
            for h in hs {
                join(kind, &me, h);
            }
        }
        "sync_channel" => {
            let (bound, n) = (rng.usize(0..=3), rng.usize(1..=40));
            let (tx, rx) = mpsc::sync_channel::<usize>(bound);
            let h = spawn(&mut rng, move || {
                for i in 0..n {
                    tx.send(i).expect("the receiver lives");
                }
            });
            for want in 0..n {
                let got = me.block(kind, || rx.recv());
                check!(
                    kind,
                    got == Ok(want),
                    "received {got:?}, {want} was due (bound {bound})"
                );
            }
            join(kind, &me, h);
            check!(
                kind,
                me.block(kind, || rx.recv()).is_err(),
                "a message after the last"
            );
        }
        "oneshot" => {
            let (tx, rx) = oneshot::channel::<u64>();
            let v = rng.u64(..);
            let drop_it = rng.bool();
            let h = spawn(&mut rng, move || {
                if drop_it {
                    drop(tx);
                } else {
                    tx.send(v).expect("the receiver lives");
                }
            });
            let got = me.block(kind, || rx.recv());
            join(kind, &me, h);
            check!(
                kind,
                if drop_it {
                    got.is_err()
                } else {
                    got.as_ref().ok() == Some(&v)
                },
                "received {got:?} (sender dropped: {drop_it})"
            );
        }
        "once" => {
            // Racing callers: one initialiser runs, the others wait for it and see its write.
            let once = Arc::new(Once::new());
            let runs = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..rng.usize(2..=6))
                .map(|_| {
                    let (once, runs) = (Arc::clone(&once), Arc::clone(&runs));
                    let slow = rng.bool();
                    spawn(&mut rng, move || {
                        once.call_once(|| {
                            if slow {
                                task::yield_now();
                            }
                            runs.fetch_add(1, Ordering::Relaxed);
                        });
                        runs.load(Ordering::Relaxed)
                    })
                })
                .collect();
            for h in hs {
                let seen = join(kind, &me, h);
                check!(
                    kind,
                    seen == 1,
                    "a caller returned having seen {seen} initialisations"
                );
            }
        }
        "once_lock" => {
            let cell = Arc::new(OnceLock::<u64>::new());
            let hs: Vec<_> = (0..rng.usize(2..=6))
                .map(|i| {
                    let cell = Arc::clone(&cell);
                    spawn(&mut rng, move || {
                        if i % 2 == 0 {
                            *cell.get_or_init(|| {
                                task::yield_now();
                                i as u64 + 1
                            })
                        } else {
                            *cell.wait()
                        }
                    })
                })
                .collect();
            let mut seen = Vec::new();
            for h in hs {
                seen.push(join(kind, &me, h));
            }
            let v = *cell.get().unwrap_or(&0);
            check!(
                kind,
                v != 0 && seen.iter().all(|&s| s == v),
                "callers saw {seen:?}, the cell holds {v}"
            );
        }
        "lazy_lock" => {
            let runs = Arc::new(AtomicUsize::new(0));
            let r2 = Arc::clone(&runs);
            let lazy = Arc::new(LazyLock::new(move || {
                r2.fetch_add(1, Ordering::Relaxed);
                task::yield_now();
                42u64
            }));
            let hs: Vec<_> = (0..rng.usize(1..=5))
                .map(|_| {
                    let lazy = Arc::clone(&lazy);
                    spawn(&mut rng, move || *LazyLock::force(&lazy))
                })
                .collect();
            for h in hs {
                let v = join(kind, &me, h);
                check!(kind, v == 42, "a LazyLock gave {v}");
            }
            let n = runs.load(Ordering::Relaxed);
            check!(kind, n == 1, "the LazyLock's function ran {n} times");
        }
        "timeouts" => {
            let d = Duration::from_micros(rng.u64(50..1500));
            let t0 = Instant::now();
            let which = rng.u8(..5);
            match which {
                0 => {
                    let (_tx, rx) = mpsc::channel::<()>();
                    let r = me.block(kind, || rx.recv_timeout(d));
                    check!(
                        kind,
                        r == Err(mpsc::RecvTimeoutError::Timeout),
                        "recv_timeout: {r:?}"
                    );
                }
                1 => {
                    let (m, cv) = (Mutex::new(()), Condvar::new());
                    let g = me.block(kind, || m.lock().unwrap());
                    let (_g, r) = me.block(kind, || cv.wait_timeout(g, d).unwrap());
                    check!(kind, r.timed_out(), "wait_timeout did not time out");
                }
                2 => {
                    let s = Semaphore::new(0);
                    let p = me.block(kind, || s.acquire_timeout(d));
                    check!(kind, p.is_none(), "acquire_timeout got a permit of none");
                }
                3 => {
                    let (_tx, rx) = oneshot::channel::<()>();
                    let r = me.block(kind, || rx.recv_timeout(d));
                    check!(kind, r.is_err(), "oneshot recv_timeout: {r:?}");
                }
                _ => me.block(kind, || task::park_timeout(d)),
            }
            // A park_timeout may return early (a token left by an earlier unpark), so it is
            // not held to the bound; the others wait their whole timeout.
            check!(
                kind,
                which == 4 || t0.elapsed() >= d,
                "timeout {which} of {d:?} ended after {:?}",
                t0.elapsed()
            );
        }
        "join_timeout" => {
            let (tx, rx) = oneshot::channel::<()>();
            let h = spawn(&mut rng, move || rx.recv().is_ok());
            let d = Duration::from_micros(rng.u64(50..1000));
            let t0 = Instant::now();
            let h = match me.block(kind, || h.join_timeout(d)) {
                Err(h) => h,
                Ok(r) => fail(
                    kind,
                    &format!("join_timeout returned {r:?} before the task could end"),
                ),
            };
            check!(
                kind,
                t0.elapsed() >= d,
                "join_timeout({d:?}) gave up after {:?}",
                t0.elapsed()
            );
            tx.send(()).expect("the task waits");
            check!(kind, join(kind, &me, h), "the task's receive failed");
        }
        "park_unpark" => {
            let flag = Arc::new(AtomicBool::new(false));
            let f2 = Arc::clone(&flag);
            let h = spawn(&mut rng, move || {
                while !f2.load(Ordering::Acquire) {
                    task::park();
                }
            });
            let u = h.unparker();
            if rng.bool() {
                me.block(kind, task::yield_now);
            }
            flag.store(true, Ordering::Release);
            u.unpark();
            join(kind, &me, h);
        }
        "scope" => {
            let data: Vec<u64> = (0..rng.u64(1..200)).collect();
            let parts = rng.usize(1..=4);
            let want: u64 = data.iter().sum();
            let got: u64 = me.block(kind, || {
                lagom::scope(|s| {
                    let hs: Vec<_> = data
                        .chunks(data.len().div_ceil(parts))
                        .map(|c| s.spawn(move || c.iter().sum::<u64>()))
                        .collect();
                    hs.into_iter().map(|h| h.join().unwrap()).sum()
                })
            });
            Counts::spawned(parts);
            check!(
                kind,
                got == want,
                "the scope's tasks summed {got}, not {want}"
            );
        }
        "graph" | "graph_failing" => {
            let n = rng.usize(1..=24);
            let mut g: TaskGraph<'_, u64> = TaskGraph::new();
            let ids: Vec<NodeId> = (0..n)
                .map(|_| g.add(|inp| 1 + inp.iter().sum::<u64>()))
                .collect();
            let mut preds = vec![Vec::new(); n];
            for (to, p) in preds.iter_mut().enumerate().skip(1) {
                for from in 0..to {
                    if rng.u8(..4) == 0 {
                        g.add_edge(ids[from], ids[to])
                            .expect("an edge forward is no cycle");
                        p.push(from);
                    }
                }
            }
            let failing = kind == "graph_failing";
            let bad = rng.usize(0..n);
            let mut g = g;
            if failing {
                // One more node that panics, before `bad`.
                let boom = g.add(|_| panic!("soak: the failing node"));
                g.add_edge(boom, ids[bad])
                    .expect("a new node makes no cycle");
            }
            Counts::spawned(n + usize::from(failing));
            let mut want = vec![0u64; n];
            for i in 0..n {
                want[i] = 1 + preds[i].iter().map(|&p| want[p]).sum::<u64>();
            }
            match me.block(kind, || g.run(rt)) {
                Ok(out) if !failing => {
                    for (i, id) in ids.iter().enumerate() {
                        check!(
                            kind,
                            out.get(*id) == Some(&want[i]),
                            "node {i}: {:?}, not {}",
                            out.get(*id),
                            want[i]
                        );
                    }
                }
                Err(e) if failing => {
                    match e.error() {
                        GraphError::Failed { failed, total, .. } => check!(
                            kind,
                            failed.len() == 1 && *total == n + 1,
                            "{} failed of {total}",
                            failed.len()
                        ),
                        other => fail(kind, &format!("the failing graph ran to {other:?}")),
                    }
                    // The nodes that finished before the failure keep their outputs.
                    for (i, id) in ids.iter().enumerate() {
                        if let Some(got) = e.outputs().get(*id) {
                            check!(
                                kind,
                                *got == want[i],
                                "partial output of node {i}: {got}, not {}",
                                want[i]
                            );
                        }
                    }
                }
                other => fail(
                    kind,
                    &format!(
                        "the graph ran to {:?} (failing node: {failing})",
                        other.map(|o| o.len())
                    ),
                ),
            }
        }
        "blocking_pool" => {
            let d = Duration::from_micros(rng.u64(0..500));
            let v = rng.u64(..);
            let h = task::spawn_blocking(move || {
                std::thread::sleep(d);
                v
            });
            let got = me.block(kind, || h.join());
            check!(
                kind,
                got.as_ref().ok() == Some(&v),
                "spawn_blocking returned {got:?}"
            );
        }
        "panic" => {
            let h = spawn(&mut rng, || -> u8 { panic!("soak: a task's panic") });
            let r = me.block(kind, || h.join());
            check!(
                kind,
                r.as_ref().is_err_and(|e| e.is_panic()),
                "a panicking task joined as {:?}",
                r.map(|_| ())
            );
        }
        "yield" => {
            for _ in 0..rng.usize(1..50) {
                me.block(kind, task::yield_now);
                task::cond_resched();
            }
        }
        other => unreachable!("no operation {other}"),
    }
    me.leave();
    Counts::global().ops[k].fetch_add(1, Ordering::Relaxed);
}

// ---------------------------------------------------------------------------------------
// Rounds.
// ---------------------------------------------------------------------------------------

/// Feature sets a round may run with (on top of the defaults).
const FEATURES: &[&str] = &[
    "",
    "NO_DELAY_DEQUEUE",
    "NO_TTWU_QUEUE",
    "TTWU_QUEUE_DELAYED",
    "TTWU_QUEUE_ON_CPU",
    "NO_PLACE_LAG,NO_RUN_TO_PARITY",
];

/// Resident memory of the process now and at its peak (`/proc/self/status`), in KiB.
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// What the rounds measured.
#[derive(Default)]
struct Figures {
    rounds: usize,
    cancelled: usize,
    baseline_kib: u64,
    after_max_kib: u64,
    after_last_kib: u64,
    during_max_kib: u64,
}

/// Tasks left blocked for good at the end of a round, of each kind of wait, each with its
/// kind and whether it may end otherwise than cancelled: the shutdown cancels every blocked
/// task, but the waiters of the mutex whose holder the shutdown cancels may be woken by its
/// unlock first, and a runnable task runs on.
fn leave_blocked(
    rt: &Runtime,
    rng: &mut fastrand::Rng,
) -> Vec<(&'static str, bool, JoinHandle<()>)> {
    let mut hs = Vec::new();
    let hold = Arc::new(Mutex::new(()));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    // One task holds the mutex, parked, while others wait for it.
    {
        let (hold, ready) = (Arc::clone(&hold), ready_tx.clone());
        hs.push((
            "mutex holder",
            false,
            rt.spawn(move || {
                let _g = hold.lock().unwrap();
                ready.send(()).ok();
                loop {
                    task::park();
                }
            }),
        ));
    }
    ready_rx.recv().expect("the holder started");
    for i in 0..rng.usize(6..24) {
        let h = match i % 8 {
            0 => (
                "park",
                false,
                rt.spawn(|| {
                    loop {
                        task::park();
                    }
                }),
            ),
            1 => {
                let (tx, rx) = mpsc::channel::<()>();
                let h = rt.spawn(move || {
                    let _keep = tx;
                    let _ = rx.recv();
                });
                ("mpsc recv", false, h)
            }
            2 => {
                let hold = Arc::clone(&hold);
                ("mutex waiter", true, rt.spawn(move || drop(hold.lock())))
            }
            3 => {
                let h = rt.spawn(|| {
                    let (m, cv) = (Mutex::new(()), Condvar::new());
                    let g = m.lock().unwrap();
                    let _ = cv.wait(g);
                });
                ("condvar wait", false, h)
            }
            4 => (
                "semaphore",
                false,
                rt.spawn(|| drop(Semaphore::new(0).acquire())),
            ),
            5 => {
                let h = rt.spawn(|| {
                    let _ = Barrier::new(2).wait();
                });
                ("barrier", false, h)
            }
            6 => (
                "sleep",
                false,
                rt.spawn(|| task::sleep(Duration::from_secs(3600))),
            ),
            _ => {
                // A `OnceLock` whose initialiser never ends: its waiter is blocked too.
                let cell = Arc::new(OnceLock::<()>::new());
                let c2 = Arc::clone(&cell);
                let init = rt.spawn(move || {
                    c2.get_or_init(|| {
                        loop {
                            task::park();
                        }
                    });
                });
                hs.push(("once_lock initialiser", false, init));
                (
                    "once_lock waiter",
                    false,
                    rt.spawn(move || {
                        let _ = cell.wait();
                    }),
                )
            }
        };
        hs.push(h);
    }
    Counts::spawned(hs.len());
    hs
}

/// One round: a runtime, its mix for `o.round` seconds, the tasks left blocked, the shutdown
/// and its checks.
fn round(o: &Opts, r: usize, rng: &mut fastrand::Rng, cpus: &[usize], fig: &mut Figures) {
    RUN.get().expect("set").round.store(r, Ordering::Relaxed);
    let features = FEATURES[rng.usize(..FEATURES.len())];
    let migrate = rng.bool();
    let mut b = Runtime::builder()
        .worker_cpus(cpus.iter().copied())
        .features(features);
    if migrate {
        // SAFETY: the soak's tasks hold nothing thread-local across a blocking call (each
        // operation's RNG is its own value, and the std mutex of the watchdog is never held
        // across one) and never ask which thread they run on.
        b = unsafe { b.allow_migration() };
    }
    let rt = Arc::new(b.build().unwrap_or_else(|e| fail("build", &format!("{e}"))));
    let until = Instant::now() + Duration::from_secs_f64(o.round);
    let seed = rng.u64(..);
    let inject = o.inject_lost_wakeup && r == 1;
    let rt2 = Arc::clone(&rt);
    let sample = Arc::new(AtomicU64::new(0));
    let sample2 = Arc::clone(&sample);
    rt.block_on(move || {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut inflight: VecDeque<(Watched, JoinHandle<()>)> = VecDeque::new();
        if inject {
            let w = Watchdog::watch("injected lost wakeup");
            // Parks with no one to unpark it: the watchdog must report it.
            inflight.push_back((w, task::spawn(task::park)));
        }
        while Instant::now() < until {
            while inflight.len() >= 24 {
                let (w, h) = inflight.pop_front().expect("non-empty");
                if let Err(e) = h.join() {
                    fail("join", &format!("an operation's task failed: {e}"));
                }
                drop(w);
            }
            let k = rng.usize(..KINDS.len());
            let op_seed = rng.u64(..);
            let rt = Arc::clone(&rt2);
            let w = Watchdog::watch(KINDS[k]);
            Counts::spawned(1);
            inflight.push_back((w, task::spawn(move || run_op(k, op_seed, &rt))));
            if rng.u8(..16) == 0 {
                sample2.fetch_max(rss_kib().0, Ordering::Relaxed);
            }
        }
        for (w, h) in inflight {
            if let Err(e) = h.join() {
                fail("join", &format!("an operation's task failed: {e}"));
            }
            drop(w);
        }
    });
    fig.during_max_kib = fig.during_max_kib.max(sample.load(Ordering::Relaxed));
    let blocked = leave_blocked(&rt, rng);
    let rt =
        Arc::try_unwrap(rt).unwrap_or_else(|_| fail("shutdown", "the runtime is still shared"));
    let st = {
        let _w = Watchdog::watch("shutdown");
        rt.shutdown()
    };
    check!(
        "shutdown",
        st.live_tasks == 0 && st.live_stacks == 0,
        "after the shutdown {} task(s) and {} stack(s) are left",
        st.live_tasks,
        st.live_stacks
    );
    check!(
        "shutdown",
        st.shutdown.abandoned == 0 && st.shutdown.stuck_workers == 0,
        "the shutdown abandoned {} task(s) and left {} worker(s) stuck",
        st.shutdown.abandoned,
        st.shutdown.stuck_workers
    );
    for (what, may_finish, h) in blocked {
        let _w = Watchdog::watch("join after shutdown");
        match h.join() {
            Err(e) if e.is_cancelled() => fig.cancelled += 1,
            Ok(()) if may_finish => {}
            other => fail(
                "cancellation",
                &format!(
                    "a task blocked at the shutdown ({what}) joined as {:?}",
                    other.map_err(|e| e.to_string())
                ),
            ),
        }
    }
    let (now, _) = rss_kib();
    if r == 0 {
        fig.baseline_kib = now;
    }
    let slack = o.rss_slack_mib * 1024;
    check!(
        "memory",
        now <= fig.baseline_kib + slack,
        "resident memory after the shutdown is {now} KiB, more than the baseline {} KiB + {slack} KiB",
        fig.baseline_kib
    );
    fig.after_max_kib = fig.after_max_kib.max(now);
    fig.after_last_kib = now;
    fig.rounds += 1;
}

fn main() {
    lagom_examples::default_sigpipe();
    let o = parse_args();
    let _ = RUN.set(Run {
        opts: o.clone(),
        round: AtomicUsize::new(0),
    });
    // Panics in the soak's own tasks are expected ("panic", "graph_failing"): keep them quiet.
    std::panic::set_hook(Box::new(|info| {
        let msg = info.to_string();
        if !msg.contains("soak: ") {
            eprintln!("{msg}");
        }
    }));
    let allowed = Runtime::builder()
        .build()
        .unwrap_or_else(|e| fail("build", &format!("{e}")))
        .worker_cpus();
    if o.workers > allowed.len() {
        usage_error(
            format!(
                "--workers {} but only {} CPUs are allowed",
                o.workers,
                allowed.len()
            ),
            USAGE,
        );
    }
    let cpus: Vec<usize> = allowed.into_iter().take(o.workers).collect();
    Watchdog::start(Duration::from_secs_f64(o.watchdog));
    if !o.json {
        println!(
            "soak: seed {}, {} worker(s), {} s, rounds of {} s",
            o.seed, o.workers, o.seconds, o.round
        );
    }
    let mut rng = fastrand::Rng::with_seed(o.seed);
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(o.seconds);
    let mut fig = Figures::default();
    let mut r = 0;
    while r == 0 || Instant::now() < end {
        round(&o, r, &mut rng, &cpus, &mut fig);
        r += 1;
    }
    let (_, peak) = rss_kib();
    let c = Counts::global();
    let ops: Vec<(&str, u64)> = KINDS
        .iter()
        .zip(&c.ops)
        .map(|(k, n)| (*k, n.load(Ordering::Relaxed)))
        .collect();
    let total: u64 = ops.iter().map(|o| o.1).sum();
    let tasks = c.tasks.load(Ordering::Relaxed);
    if o.json {
        let mut per = serde_json::Map::new();
        for (k, n) in &ops {
            per.insert((*k).to_string(), (*n).into());
        }
        let v = serde_json::json!({
            "seed": o.seed, "workers": o.workers, "seconds": t0.elapsed().as_secs_f64(),
            "rounds": fig.rounds, "operations": total, "per_kind": per, "tasks": tasks,
            "cancelled_at_shutdown": fig.cancelled,
            "rss_baseline_kib": fig.baseline_kib, "rss_after_shutdown_max_kib": fig.after_max_kib,
            "rss_after_shutdown_last_kib": fig.after_last_kib, "rss_during_max_kib": fig.during_max_kib,
            "rss_peak_kib": peak, "invariant_failures": 0,
        });
        println!("{v}");
    } else {
        println!(
            "soak: {} rounds (runtimes) in {:.1?}, {total} operations, {tasks} tasks, {} cancelled at shutdowns",
            fig.rounds,
            t0.elapsed(),
            fig.cancelled
        );
        for (k, n) in &ops {
            println!("  {k:<14} {n}");
        }
        println!(
            "soak: resident memory: baseline {} KiB (after the first shutdown), after each \
             shutdown at most {} KiB, last {} KiB; while running at most {} KiB sampled, peak {} KiB",
            fig.baseline_kib, fig.after_max_kib, fig.after_last_kib, fig.during_max_kib, peak
        );
        println!("soak: 0 invariant failures");
    }
}
