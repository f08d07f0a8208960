//! `asym_stall`: the preferred-core stall, reproduced and measured.
//!
//! Two tasks each run a calibrated 1 ms CPU burst, then block (`park`). A waker — one plain
//! OS thread per task, sleeping in the kernel — wakes each task 10 µs after its burst ended
//! (it sleeps until then; the OS's sleep granularity makes that "at least 10 µs": the
//! measured delay is printed). The *handoff* of a wakeup is the time from the wake call to
//! the task running again; a handoff of 0.5 ms or more is a **stall**: the task was woken
//! but waited behind another task while a CPU it may use sat idle.
//!
//! The mechanism: ITMT asym packing brings both tasks onto the preferred CPU; one
//! blocks while the other is runnable there, so DELAY_DEQUEUE keeps it queued (delayed);
//! its wakeup is a runnable wakeup, requeued in place behind the running burst, and the
//! other CPU stays idle. DELAYED_WAKE_IDLE (lagom's) dequeues such a wakee when an idle
//! allowed CPU can take it at once; TTWU_DEQUEUE always does; TTWU_QUEUE_DELAYED lets the
//! owner reselect. How the two tasks come to share the preferred CPU is ITMT's active
//! balance: the idle preferred CPU asks for a running task, a wakeup lands there before the
//! task's next schedule point, and the move, which the kernel does not re-check, puts the two
//! together; ACTIVE_BALANCE_RECHECK (lagom's) drops such a request instead.
//!
//! ```text
//! cargo run --release -p lagom-examples --example asym_stall -- [--features SPEC]
//!     [--rank CPU:RANK,...] [--seconds S] [--preemptible] [--json]
//! ```
//!
//! `--preemptible`: the kernel can preempt a burst anywhere, and its ITMT active balance
//! does (the stopper takes the running task off its CPU at once). A lagom task is preempted
//! only at its scheduling calls, so by default a burst is 1 ms unbroken and an active
//! balance request waits for the burst's end, where the task blocks; with the flag the burst
//! calls `cond_resched` every 4096 iterations (a few µs), and the request takes the task
//! mid-burst, as in the kernel.
//!
//! `--rank` overrides the CPUs' preferred-core rankings (a machine without rankings — most
//! VMs — needs it for ITMT to prefer anything: `--rank 0:200,1:100` makes CPU 0 the
//! preferred core). The tasks may migrate (the runtime opts in: they hold nothing
//! thread-local), as the kernel's threads do. `--json` prints one line:
//! `{"features": "...", "wakeups": N, "stalls": N, "handoff_p50_us": X, "handoff_p99_us": X,
//! "handoff_max_us": X}`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::task::{self, Unparker};
use lagom_examples::{features_arg, usage_error};
use serde_json::json;

const USAGE: &str =
    "usage: asym_stall [--features SPEC] [--rank CPU:RANK,...] [--seconds S] [--preemptible]
                  [--json]

  --features SPEC     scheduler features applied on the defaults, e.g. DELAYED_WAKE_IDLE
  --rank CPU:RANK,..  override the CPUs' preferred-core rankings (higher is preferred)
  --seconds S         how long to run (default 30)
  --preemptible       the bursts call cond_resched (every 4096 iterations, a few µs), so a
                      preferred CPU's active balance takes a task mid-burst, as the kernel's
                      stopper preempts it; without, a burst runs its 1 ms unbroken
  --json              print one JSON line instead of the report";

/// A handoff this long or longer is a stall.
const STALL_NS: u64 = 500_000;
/// How long after a burst ends the waker wakes the task.
const WAKE_AFTER: Duration = Duration::from_micros(10);
/// The burst.
const BURST: Duration = Duration::from_millis(1);

struct Args {
    features: String,
    ranks: Vec<(usize, u32)>,
    seconds: f64,
    preemptible: bool,
    json: bool,
}

fn parse_ranks(text: &str) -> Result<Vec<(usize, u32)>, String> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|item| {
            let (c, r) = item
                .split_once(':')
                .ok_or_else(|| format!("--rank: {item:?} is not CPU:RANK"))?;
            let c = c
                .trim()
                .parse()
                .map_err(|_| format!("--rank: bad CPU {c:?}"))?;
            let r = r
                .trim()
                .parse()
                .map_err(|_| format!("--rank: bad rank {r:?}"))?;
            Ok((c, r))
        })
        .collect()
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        features: String::new(),
        ranks: Vec::new(),
        seconds: 30.0,
        preemptible: false,
        json: false,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Long("features") => a.features = features_arg(p.value()?)?,
            Long("rank") => {
                a.ranks = parse_ranks(&p.value()?.string()?).map_err(lexopt::Error::from)?
            }
            Long("seconds") => a.seconds = lagom_examples::seconds_arg("--seconds", p.value()?)?,
            Long("preemptible") => a.preemptible = true,
            Long("json") => a.json = true,
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if a.seconds.is_nan() || a.seconds <= 0.0 {
        return Err("--seconds must be positive".into());
    }
    Ok(a)
}

/// Nanoseconds of CLOCK_MONOTONIC since the first call (comparable across threads).
fn now_ns() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Spin iterations that take about `BURST` on this CPU, measured before the runtime starts
/// (the median of five tries).
fn calibrate() -> u64 {
    let spin = |n: u64| {
        let mut x = 0u64;
        for i in 0..n {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        x
    };
    let mut per = Vec::new();
    for _ in 0..5 {
        let n = 200_000;
        let t = Instant::now();
        spin(n);
        per.push(t.elapsed().as_nanos() as f64 / n as f64);
    }
    per.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (BURST.as_nanos() as f64 / per[2]).max(1.0) as u64
}

/// One task's rendezvous with its waker.
#[derive(Default)]
struct Pair {
    /// The end of the task's last burst (ns), or 0 while it runs one.
    ended: Mutex<u64>,
    cv: Condvar,
    /// When the waker called `unpark` (ns).
    woke_at: AtomicU64,
    /// Bumped by the waker with each wake; the task parks until it moves.
    turn: AtomicU64,
    unparker: OnceLock<Unparker>,
    /// The waker's actual delay after the burst's end, summed (ns), and the count.
    delay_sum: AtomicU64,
    delays: AtomicU64,
}

fn main() {
    lagom_examples::default_sigpipe();
    let args = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    let spins = calibrate();
    let b = Runtime::builder()
        .features(args.features.clone())
        .cpu_priorities(args.ranks.clone());
    // SAFETY: the two tasks keep nothing thread-local across their parks (they touch only
    // the `Arc`s they were given and the clock).
    let rt = unsafe { b.allow_migration() }
        .build()
        .unwrap_or_else(|e| usage_error(e, USAGE));
    let stop = Arc::new(AtomicBool::new(false));
    let pairs: Vec<Arc<Pair>> = (0..2).map(|_| Arc::new(Pair::default())).collect();
    let tasks: Vec<_> = pairs
        .iter()
        .map(|p| {
            let (p, stop) = (Arc::clone(p), Arc::clone(&stop));
            let preemptible = args.preemptible;
            rt.spawn(move || {
                p.unparker.set(task::current_unparker()).ok();
                let mut handoffs = Vec::new();
                let mut seen = 0;
                while !stop.load(Ordering::Relaxed) {
                    let mut x = 0u64;
                    for i in 0..spins {
                        x = std::hint::black_box(x.wrapping_add(i));
                        if preemptible && i % 4096 == 0 {
                            task::cond_resched();
                        }
                    }
                    *p.ended.lock().unwrap() = now_ns().max(1);
                    p.cv.notify_one();
                    seen += 1;
                    while p.turn.load(Ordering::Acquire) < seen {
                        task::park();
                    }
                    let ran = now_ns();
                    handoffs.push(ran.saturating_sub(p.woke_at.load(Ordering::Acquire)));
                }
                handoffs
            })
        })
        .collect();
    let wakers: Vec<_> = pairs
        .iter()
        .map(|p| {
            let (p, stop) = (Arc::clone(p), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let end = {
                        let mut g = p.ended.lock().unwrap();
                        while *g == 0 && !stop.load(Ordering::Relaxed) {
                            g = p.cv.wait_timeout(g, Duration::from_millis(50)).unwrap().0;
                        }
                        std::mem::take(&mut *g)
                    };
                    let due = end + WAKE_AFTER.as_nanos() as u64;
                    let now = now_ns();
                    if due > now {
                        std::thread::sleep(Duration::from_nanos(due - now));
                    }
                    let at = now_ns();
                    if end > 0 {
                        p.delay_sum.fetch_add(at - end, Ordering::Relaxed);
                        p.delays.fetch_add(1, Ordering::Relaxed);
                    }
                    p.woke_at.store(at, Ordering::Release);
                    p.turn.fetch_add(1, Ordering::Release);
                    if let Some(u) = p.unparker.get() {
                        u.unpark();
                    }
                }
                // Let the task see `stop` and end.
                p.turn.fetch_add(1 << 40, Ordering::Release);
                if let Some(u) = p.unparker.get() {
                    u.unpark();
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(args.seconds));
    stop.store(true, Ordering::Relaxed);
    for w in wakers {
        w.join().unwrap();
    }
    let mut all: Vec<u64> = Vec::new();
    for t in tasks {
        let mut h = t.join().unwrap();
        // The last handoff is the stop's.
        h.pop();
        all.extend(h);
    }
    let stats = rt.shutdown();
    all.sort_unstable();
    let q = |p: f64| -> f64 {
        if all.is_empty() {
            return 0.0;
        }
        let i = ((all.len() as f64 * p).ceil() as usize).clamp(1, all.len()) - 1;
        all[i] as f64 / 1000.0
    };
    let stalls = all.iter().filter(|&&h| h >= STALL_NS).count();
    let features = if args.features.is_empty() {
        "default".to_string()
    } else {
        args.features.clone()
    };
    if args.json {
        // One line, the members in this order (a `json!` map would sort them).
        println!(
            "{{\"features\": {}, \"wakeups\": {}, \"stalls\": {stalls}, \"handoff_p50_us\": {:.1}, \"handoff_p99_us\": {:.1}, \"handoff_max_us\": {:.1}}}",
            json!(features),
            all.len(),
            q(0.5),
            q(0.99),
            q(1.0)
        );
        return;
    }
    let (ds, dn) = pairs.iter().fold((0, 0), |(s, n), p| {
        (
            s + p.delay_sum.load(Ordering::Relaxed),
            n + p.delays.load(Ordering::Relaxed),
        )
    });
    let t = stats.total();
    println!("features: {features}");
    if args.preemptible {
        println!("bursts: preemptible (cond_resched every 4096 iterations)");
    }
    println!(
        "wakeups {}, stalls (handoff >= 0.5 ms) {stalls}; handoff p50 {:.1} us, p99 {:.1} us, max {:.1} us",
        all.len(),
        q(0.5),
        q(0.99),
        q(1.0)
    );
    println!(
        "waker delay after the burst: mean {:.1} us (asked {} us)",
        ds as f64 / dn.max(1) as f64 / 1000.0,
        WAKE_AFTER.as_micros()
    );
    println!(
        "runnable in place {}, dequeued {}, queued to owner {}, migrated {}; asym pulls {}, active {}",
        t.runnable_in_place,
        t.runnable_dequeued,
        t.runnable_queued,
        t.runnable_migrated,
        t.balance_asym,
        t.balance_active
    );
    for p in &stats.layout {
        println!("{p}");
    }
}
