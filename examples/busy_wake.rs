//! `busy_wake`: why does a remote wake to a busy worker sometimes stall?
//!
//! The scenario of `benches/wake.rs`'s `lagom/remote_busy`: task A on worker 0 and task B on
//! worker 1 pass a turn back and forth through park/unpark, while on each worker a CPU-bound
//! "hog" loops on `cond_resched()`. The probe records, without touching the runtime:
//!
//! * per wake: the time the waker stored the turn (just before `unpark`) and the time the
//!   wakee saw it (CLOCK_MONOTONIC on both sides, so cross-CPU differences are meaningful);
//! * per hog: every hole in its loop longer than `--gap-us` — either *inside*
//!   `cond_resched()` (the worker ran something else, or the OS descheduled the thread there)
//!   or *between* two calls (only the OS can take the CPU there: the loop body is one load);
//! * per worker thread: `/proc/self/task/<tid>/schedstat` (time runnable but waiting for a
//!   CPU) and `getrusage(RUSAGE_THREAD)` involuntary context switches, before and after.
//!
//! Each stalled wake (latency above `--stall-us`) is then explained by the wakee worker's hog
//! timeline over the stall window: **os** if the hog thread lost the CPU to Linux for most of
//! it (a hole between calls, or a hole inside `cond_resched` that no lagom switch explains),
//! **hog** if the hog kept running — the runtime chose it over the queued wakee. For `hog`
//! stalls the probe prints how long the hog had been running since it was last switched in
//! (its *stint*): EEVDF with RUN_TO_PARITY protects the running request up to its deadline,
//! at most one slice (1.4 ms for two CPUs) after the pick.
//!
//! What it showed, and why those waits are EEVDF's own: the book's `docs/src/lab/peers.md`
//! ("Remote wakes to a busy worker").
//!
//! `--hog-yield` makes the hogs loop on lagom's `yield_now()` as tokio's do: each yield gives
//! up the rest of the hog's request, so the wakee runs at the hog's next yield.
//!
//! ```text
//! cargo run --release -p lagom-examples --example busy_wake -- [-n N] [--slice-us S]
//!     [--hog-nice K] [--hog-yield] [--stats] [--trace FILE]
//! cargo run --release -p lagom-examples --example busy_wake -- --features NO_RUN_TO_PARITY
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::task::{Builder, Unparker};
use lagom_examples::{features_arg, micros_arg, usage_error};

/// The most ping-pong turns `-n` asks for (each keeps a few words of figures).
const MAX_WAKES: usize = 100_000_000;

const USAGE: &str =
    "usage: busy_wake [-n N] [--slice-us S] [--hog-nice K] [--hog-yield] [--stall-us T]
                 [--gap-us G] [--list K] [--raw] [--stats] [--trace FILE] [--features SPEC]

Tasks A (worker 0) and B (worker 1) ping-pong N times (default 20000) through park/unpark
while a hog loops on cond_resched() on each worker.
  --slice-us S   custom slice for A and B (default: the runtime's base slice)
  --hog-nice K   nice level of the two hogs (default 0, as A and B)
  --hog-yield    the hogs loop on yield_now() instead, as tokio's busy tasks do: each
                 yield gives up the rest of the hog's request
  --stall-us T   a wake slower than T µs is a stall and gets explained (default 50)
  --gap-us G     record hog loop holes longer than G µs (default 3)
  --list K       print the first K stalls one per line (default 20)
  --raw          print every stall with its absolute CLOCK_MONOTONIC stamps (ns), to
                 line it up with other traces: raw <turn> <worker> <sent> <pushed> <seen> <cause>
  --stats        print the runtime's per-worker counters (which wakeup paths were taken)
  --trace FILE   record the runtime's switch / wakeup / migrate events and write them to
                 FILE as Chrome trace JSON (open it in ui.perfetto.dev)
  --features SPEC  scheduler features on top of the defaults, e.g. NO_RUN_TO_PARITY
                 (default: $LAGOM_FEATURES)";

struct Args {
    n: usize,
    slice_us: Option<u64>,
    hog_nice: i32,
    hog_yield: bool,
    stall_ns: u64,
    gap_ns: u64,
    list: usize,
    raw: bool,
    stats: bool,
    trace: Option<std::path::PathBuf>,
    features: Option<String>,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        n: 20_000,
        slice_us: None,
        hog_nice: 0,
        hog_yield: false,
        stall_ns: 50_000,
        gap_ns: 3_000,
        list: 20,
        raw: false,
        stats: false,
        trace: None,
        features: None,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Short('n') => a.n = p.value()?.parse()?,
            Long("slice-us") => a.slice_us = Some(p.value()?.parse()?),
            Long("hog-nice") => a.hog_nice = p.value()?.parse()?,
            Long("hog-yield") => a.hog_yield = true,
            Long("stall-us") => a.stall_ns = micros_arg("--stall-us", p.value()?)?,
            Long("gap-us") => a.gap_ns = micros_arg("--gap-us", p.value()?)?,
            Long("list") => a.list = p.value()?.parse()?,
            Long("raw") => a.raw = true,
            Long("stats") => a.stats = true,
            Long("trace") => a.trace = Some(p.value()?.into()),
            Long("features") => a.features = Some(features_arg(p.value()?)?),
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if a.n == 0 || a.n > MAX_WAKES {
        return Err(format!("-n {}: from 1 to {MAX_WAKES} wakes", a.n).into());
    }
    Ok(a)
}

/// CLOCK_MONOTONIC in ns (the runtime's own clock, comparable across CPUs).
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is writable and CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A hole in a hog's loop: from `start` to `end`; `inside`: within `cond_resched()`.
#[derive(Clone, Copy)]
struct Gap {
    start: u64,
    end: u64,
    inside: bool,
}

/// What a hog saw: its holes, its thread's OS counters before and after.
struct HogLog {
    gaps: Vec<Gap>,
    calls: u64,
    os: [ThreadOs; 2],
}

/// One worker thread's OS view: ns waiting runnable for a CPU, involuntary switches.
#[derive(Clone, Copy, Default)]
struct ThreadOs {
    wait_ns: u64,
    nivcsw: u64,
}

fn thread_os() -> ThreadOs {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let wait_ns = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    // SAFETY: an all-zero rusage is valid for getrusage to overwrite.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is writable; RUSAGE_THREAD is valid on Linux.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    ThreadOs {
        wait_ns,
        nivcsw: ru.ru_nivcsw as u64,
    }
}

/// The hog: loops on `cond_resched()` (or `yield_now()`) until `stop`, logging holes longer
/// than `gap_ns`.
fn hog(stop: Arc<AtomicBool>, gap_ns: u64, yields: bool) -> HogLog {
    let before = thread_os();
    let mut gaps = Vec::with_capacity(1 << 16);
    let mut calls = 0;
    let mut last = now_ns();
    while !stop.load(Ordering::Relaxed) {
        let t0 = now_ns();
        if t0 - last > gap_ns {
            gaps.push(Gap {
                start: last,
                end: t0,
                inside: false,
            });
        }
        if yields {
            lagom::task::yield_now();
        } else {
            lagom::task::cond_resched();
        }
        calls += 1;
        last = now_ns();
        if last - t0 > gap_ns {
            gaps.push(Gap {
                start: t0,
                end: last,
                inside: true,
            });
        }
    }
    HogLog {
        gaps,
        calls,
        os: [before, thread_os()],
    }
}

/// The time stamps of one wake, indexed by the turn it hands over.
struct Stamps {
    sent: Vec<AtomicU64>,
    pushed: Vec<AtomicU64>,
    seen: Vec<AtomicU64>,
}

/// One player: waits for turns `2i + me` (parks), stamps, passes the turn, unparks the other.
fn player(
    me: usize,
    n: usize,
    turn: Arc<AtomicU64>,
    st: Arc<Stamps>,
    peers: Arc<[OnceLock<Unparker>; 2]>,
) -> impl FnOnce() + Send + 'static {
    move || {
        peers[me]
            .set(lagom::task::current_unparker())
            .expect("once");
        let other = loop {
            if let Some(o) = peers[1 - me].get() {
                break o.clone();
            }
            lagom::task::yield_now();
        };
        for i in 0..n {
            let mine = (2 * i + me) as u64;
            while turn.load(Ordering::Acquire) != mine {
                lagom::task::park();
            }
            st.seen[mine as usize].store(now_ns(), Ordering::Relaxed);
            st.sent[mine as usize + 1].store(now_ns(), Ordering::Relaxed);
            turn.store(mine + 1, Ordering::Release);
            other.unpark();
            st.pushed[mine as usize + 1].store(now_ns(), Ordering::Relaxed);
        }
    }
}

/// Why one stall happened.
struct Stall {
    turn: usize,
    worker: usize,
    latency: u64,
    /// Time the waker spent in `unpark` (its thread may lose the CPU before the push).
    waker_ns: u64,
    /// The stamps (ns): before the waker's unpark, after it, when the wakee ran.
    stamps: [u64; 3],
    /// Time of the window in which the wakee worker's hog was not executing its loop.
    holes_ns: u64,
    /// CPU time the hog's loop got since it was last switched in, up to the wakee's run.
    stint: Option<u64>,
}

impl Stall {
    fn cause(&self) -> &'static str {
        if 2 * self.waker_ns >= self.latency {
            "waker"
        } else if 2 * self.holes_ns >= self.latency {
            "os"
        } else {
            "hog"
        }
    }
}

/// Time of `[from, to]` covered by `gaps`.
fn covered(gaps: &[Gap], from: u64, to: u64) -> u64 {
    gaps.iter()
        .filter(|g| g.end > from && g.start < to)
        .map(|g| g.end.min(to) - g.start.max(from))
        .sum()
}

/// Explains the wake of turn `k` (stamped `sent` before the waker's unpark, `pushed` after
/// it returned, `seen` when the wakee ran) from the hog log of the wakee's worker: while the
/// wakee waited, that worker either ran the hog's loop (stamps every ~0.1 µs), or was inside
/// `cond_resched()` — a lagom reschedule takes about a microsecond, so a longer hole there
/// means Linux had taken the thread's CPU — or lost the CPU between two calls.
fn explain(k: usize, sent: u64, pushed: u64, seen: u64, log: &HogLog, worker: usize) -> Stall {
    let last_in = log
        .gaps
        .iter()
        .filter(|g| g.inside && g.end <= sent)
        .map(|g| g.end)
        .next_back();
    Stall {
        turn: k,
        worker,
        latency: seen - sent,
        waker_ns: pushed.min(seen).saturating_sub(sent),
        stamps: [sent, pushed, seen],
        holes_ns: covered(&log.gaps, sent, seen),
        stint: last_in.map(|t| (seen - t) - covered(&log.gaps, t, seen)),
    }
}

fn pct(v: &[u64], p: f64) -> u64 {
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    lagom_examples::default_sigpipe();
    let args = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    let mut b = Runtime::builder().tracing(args.trace.is_some());
    if let Some(f) = &args.features {
        b = b.features(f.as_str());
    }
    // The lab measures the kernel's wakeup path, migrations included.
    // SAFETY: the tasks below spin, park, unpark and read clocks: they hold nothing
    // thread-local across a blocking call and never ask which thread they run on.
    let rt = unsafe { b.allow_migration() }.build();
    let rt = rt.unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    let cpus = rt.worker_cpus();
    if cpus.len() < 2 {
        eprintln!("error: busy_wake needs two allowed CPUs");
        std::process::exit(1);
    }
    let n = args.n;
    let st = Arc::new(Stamps {
        sent: (0..2 * n + 1).map(|_| AtomicU64::new(0)).collect(),
        pushed: (0..2 * n + 1).map(|_| AtomicU64::new(0)).collect(),
        seen: (0..2 * n + 1).map(|_| AtomicU64::new(0)).collect(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let logs: Arc<Mutex<Vec<(usize, HogLog)>>> = Arc::default();
    let hogs: Vec<_> = (0..2)
        .map(|w| {
            let (stop, logs, gap) = (Arc::clone(&stop), Arc::clone(&logs), args.gap_ns);
            let yields = args.hog_yield;
            let b = Builder::new()
                .name("hog")
                .cpus([cpus[w]])
                .nice(args.hog_nice);
            rt.spawn_with(b, move || {
                let log = hog(stop, gap, yields);
                logs.lock().unwrap().push((w, log));
            })
            .expect("spawn hog")
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    let turn = Arc::new(AtomicU64::new(0));
    let peers: Arc<[OnceLock<Unparker>; 2]> = Arc::default();
    let t = Instant::now();
    let players: Vec<_> = (0..2)
        .map(|me| {
            let mut b = Builder::new().name(["A", "B"][me]).cpus([cpus[me]]);
            if let Some(s) = args.slice_us {
                b = b.slice(Duration::from_micros(s));
            }
            let f = player(
                me,
                n,
                Arc::clone(&turn),
                Arc::clone(&st),
                Arc::clone(&peers),
            );
            rt.spawn_with(b, f).expect("spawn player")
        })
        .collect();
    for p in players {
        p.join().expect("player");
    }
    let elapsed = t.elapsed();
    stop.store(true, Ordering::Relaxed);
    for h in hogs {
        h.join().expect("hog");
    }
    let (stats, trace) = rt.shutdown_with_trace();
    if let Some(path) = &args.trace {
        trace.save(path).unwrap_or_else(|e| {
            eprintln!("error: {e}");
            std::process::exit(1)
        });
        eprintln!(
            "trace: {} events ({} dropped) written to {} (open it in ui.perfetto.dev)",
            trace.len(),
            trace.dropped(),
            path.display()
        );
    }
    let mut logs = Arc::try_unwrap(logs).ok().unwrap().into_inner().unwrap();
    logs.sort_by_key(|l| l.0);

    // Turn k (k ≥ 1) is a wake of player k % 2, i.e. on worker k % 2.
    let mut lat = Vec::with_capacity(2 * n);
    let mut unpark_ns = Vec::with_capacity(2 * n);
    let mut stalls = Vec::new();
    for k in 1..2 * n {
        let sent = st.sent[k].load(Ordering::Relaxed);
        let seen = st.seen[k].load(Ordering::Relaxed);
        let pushed = st.pushed[k].load(Ordering::Relaxed);
        let l = seen.saturating_sub(sent);
        lat.push(l);
        unpark_ns.push(pushed.saturating_sub(sent));
        if l > args.stall_ns {
            stalls.push(explain(k, sent, pushed, seen, &logs[k % 2].1, k % 2));
        }
    }
    let total: u64 = lat.iter().sum();
    lat.sort_unstable();
    unpark_ns.sort_unstable();
    let stall_total: u64 = stalls.iter().map(|s| s.latency).sum();
    println!(
        "{} wakes in {elapsed:?} (features {:?}, A/B slice {}, hog nice {}{}): wake latency p50 {} ns, p99 {} ns, \
         p99.9 {} ns, max {} µs; mean {} ns",
        lat.len(),
        args.features
            .clone()
            .or_else(|| std::env::var("LAGOM_FEATURES").ok())
            .unwrap_or_default(),
        args.slice_us
            .map_or("base".to_string(), |s| format!("{s} µs")),
        args.hog_nice,
        if args.hog_yield { ", yielding" } else { "" },
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        pct(&lat, 0.999),
        lat[lat.len() - 1] / 1000,
        total / lat.len() as u64,
    );
    let by = |c: &str| -> Vec<&Stall> { stalls.iter().filter(|s| s.cause() == c).collect() };
    println!(
        "waker side (the unpark call, stamp to stamp): p50 {} ns, p99 {} ns",
        pct(&unpark_ns, 0.5),
        pct(&unpark_ns, 0.99)
    );
    let (waker, os, hog) = (by("waker"), by("os"), by("hog"));
    println!(
        "stalls > {} µs: {} ({:.3} % of wakes, {:.1} % of all wake time); waker: {}, os: {}, \
         hog: {}",
        args.stall_ns / 1000,
        stalls.len(),
        100.0 * stalls.len() as f64 / lat.len() as f64,
        100.0 * stall_total as f64 / total as f64,
        waker.len(),
        os.len(),
        hog.len()
    );
    for (name, set) in [("waker", &waker), ("os", &os), ("hog", &hog)] {
        let mut l: Vec<u64> = set.iter().map(|s| s.latency).collect();
        let mut st: Vec<u64> = set.iter().filter_map(|s| s.stint).collect();
        if l.is_empty() {
            continue;
        }
        l.sort_unstable();
        st.sort_unstable();
        println!(
            "  {name} stalls: latency p50 {} µs, max {} µs; hog CPU since its switch-in p50 {} \
             µs, max {} µs",
            pct(&l, 0.5) / 1000,
            l[l.len() - 1] / 1000,
            st.first().map_or(0, |_| pct(&st, 0.5) / 1000),
            st.last().map_or(0, |v| v / 1000),
        );
    }
    for (w, l) in &logs {
        let [b, a] = l.os;
        println!(
            "worker {w}: hog {} calls {}, holes {} (between calls {}), thread waited \
             runnable {} µs, involuntary OS switches {}",
            if args.hog_yield {
                "yield_now"
            } else {
                "cond_resched"
            },
            l.calls,
            l.gaps.len(),
            l.gaps.iter().filter(|g| !g.inside).count(),
            (a.wait_ns - b.wait_ns) / 1000,
            a.nivcsw - b.nivcsw
        );
    }
    for s in stalls.iter().take(args.list) {
        println!(
            "  turn {} to worker {}: {} µs [{}]: waker in unpark {} µs, hog not looping {} µs, \
             hog CPU since switch-in {}",
            s.turn,
            s.worker,
            s.latency / 1000,
            s.cause(),
            s.waker_ns / 1000,
            s.holes_ns / 1000,
            s.stint
                .map_or("?".to_string(), |v| format!("{} µs", v / 1000))
        );
    }
    if args.raw {
        for s in &stalls {
            let [a, b, c] = s.stamps;
            println!("raw {} {} {a} {b} {c} {}", s.turn, s.worker, s.cause());
        }
    }
    let t = stats.total();
    println!(
        "runtime: involuntary switches {}, voluntary {}, wakeups {}",
        t.switches_involuntary,
        t.switches_voluntary,
        t.wakeups()
    );
    if args.stats {
        print!("{stats}");
    }
}
