//! `sim_check`: the same 2-CPU scenarios in the threaded runtime and in the simulator, side by
//! side (the cross-check of the two drivers): the pipe on one worker and across two, and four
//! CPU-bound hogs at nice 0, 0, 5, −5 free on two workers.
//!
//! ```text
//! cargo run --release -p lagom-examples --example sim_check -- [-n ROUND_TRIPS] [--seconds S]
//!     [--features SPEC]
//! ```
//!
//! `--features SPEC` (default: `$LAGOM_FEATURES`) sets the scheduler features of both sides,
//! on top of the defaults, so that the two always run the same policy.
//!
//! For each scenario it prints what the threaded runtime measured on this machine, what the
//! simulator computes for the built-in scenario of the same name on `cpus-2` (two CPUs, one
//! LLC, as this guest), and whether they agree within the stated tolerance: switches per
//! round trip, wakeups on the CPU (local or in place) and through the wakelist (queued or
//! on-CPU hand-off) per round trip within 10 %, kicks within 0.1 per trip, CPU shares within
//! 2 percentage points of one CPU, involuntary switches per second within 25 %. How the
//! wakeups split inside each pair (in place against local, queued against on-CPU) and the
//! times are shown, not judged: they hang on nanosecond races the simulator's fixed costs
//! (`lagom_sim::Costs`, medians measured here) do not reproduce, and a loaded host makes the
//! runtime's vary run to run.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::runtime::WorkerStats;
use lagom::task::{Builder, Unparker};
use lagom_examples::usage_error;
use lagom_sim::{Machine, Options, Report, Sim, builtin, parse};

const USAGE: &str = "usage: sim_check [-n ROUND_TRIPS] [--seconds S] [--features SPEC]

Runs the pipe (one worker, two workers) and four hogs of mixed nice in the threaded runtime
and in the simulator, and compares them.
  -n ROUND_TRIPS   round trips of each pipe (default 200000)
  --seconds S      measured seconds of the hogs (default 2)
  --features SPEC  scheduler features of both sides, on top of the defaults, e.g.
                   NO_DELAY_DEQUEUE (default: $LAGOM_FEATURES)";

struct Args {
    n: u64,
    seconds: f64,
    /// The features of both sides (`--features`, else `LAGOM_FEATURES`, else none).
    features: String,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        n: 200_000,
        seconds: 2.0,
        features: String::new(),
    };
    let mut features = None;
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Short('n') => a.n = parser.value()?.parse()?,
            Long("seconds") => {
                a.seconds = lagom_examples::seconds_arg("--seconds", parser.value()?)?
            }
            Long("features") => features = Some(lagom_examples::features_arg(parser.value()?)?),
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    a.features = match features {
        Some(f) => f,
        None => match std::env::var("LAGOM_FEATURES") {
            Ok(f) => match lagom_policy::Features::parse(&f) {
                Ok(_) => f,
                Err(e) => return Err(format!("LAGOM_FEATURES: {e}").into()),
            },
            Err(_) => String::new(),
        },
    };
    Ok(a)
}

/// One compared quantity: runtime, simulator, and the tolerance it is judged by.
struct Row {
    case: &'static str,
    what: String,
    runtime: f64,
    sim: f64,
    tolerance: Tolerance,
}

#[derive(Clone, Copy)]
enum Tolerance {
    /// Relative, as a fraction (and at least 0.02 absolute, for quantities near zero).
    Rel(f64),
    /// Absolute.
    Abs(f64),
    /// Shown, not judged.
    None,
}

impl Row {
    fn verdict(&self) -> &'static str {
        let ok = match self.tolerance {
            Tolerance::Rel(r) => {
                let scale = self.runtime.abs().max(self.sim.abs());
                (self.runtime - self.sim).abs() <= (r * scale).max(0.02)
            }
            Tolerance::Abs(a) => (self.runtime - self.sim).abs() <= a,
            Tolerance::None => return "-",
        };
        if ok { "agree" } else { "DIFFER" }
    }
}

/// The built-in scenario `name` on `cpus-2`, its own features (if any) then `features`.
fn sim(name: &str, features: &str) -> Report {
    let s = parse(builtin(name).expect("built-in")).expect("parses");
    let mut opts = Options::of(&s).expect("features");
    opts.features = opts
        .features
        .apply(features)
        .expect("checked by parse_args");
    let mut sim = Sim::new(&s, Machine::named("cpus-2").expect("known"), opts).expect("builds");
    sim.run();
    Report::of(&sim)
}

fn delta(a: &WorkerStats, b: &WorkerStats, f: fn(&WorkerStats) -> u64) -> f64 {
    (f(b) - f(a)) as f64
}

/// The runtime's pipe: `n` round trips between two tasks on `cpus`; returns the nanoseconds
/// per round trip and the counters' change over them.
fn runtime_pipe(rt: &Runtime, cpus: [usize; 2], n: u64) -> (f64, WorkerStats, WorkerStats) {
    let turn = Arc::new(AtomicU64::new(0));
    let peers: Arc<[OnceLock<Unparker>; 2]> = Arc::new(Default::default());
    let ready = Arc::new(AtomicU64::new(0));
    let player = |me: u64| {
        let (turn, peers, ready) = (Arc::clone(&turn), Arc::clone(&peers), Arc::clone(&ready));
        move || {
            peers[me as usize]
                .set(lagom::task::current_unparker())
                .expect("once");
            let other = loop {
                if let Some(o) = peers[1 - me as usize].get() {
                    break o.clone();
                }
                lagom::task::yield_now();
            };
            ready.fetch_add(1, Ordering::AcqRel);
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
    let before = rt.stats().total();
    let start = Instant::now();
    let a = rt
        .spawn_with(Builder::new().cpus([cpus[0]]), player(0))
        .expect("spawn");
    let b = rt
        .spawn_with(Builder::new().cpus([cpus[1]]), player(1))
        .expect("spawn");
    a.join().expect("ping");
    b.join().expect("pong");
    let ns = start.elapsed().as_nanos() as f64 / n as f64;
    (ns, before, rt.stats().total())
}

/// About `us` µs of arithmetic the optimiser cannot remove, `iters` iterations per µs.
fn chunk(seed: u64, iters: u64) -> u64 {
    let mut x = seed;
    for _ in 0..iters {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x ^= x >> 17;
    }
    std::hint::black_box(x)
}

/// Iterations of `chunk` per 20 µs on this machine.
fn calibrate() -> u64 {
    let n = 2_000_000;
    let t = Instant::now();
    chunk(1, n);
    let ns = t.elapsed().as_nanos().max(1) as u64;
    (n * 20_000 / ns).max(1)
}

/// The calling thread's time on a CPU and waiting for one (ns), from
/// `/proc/thread-self/schedstat` (zeros where it cannot be read).
fn thread_sched() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let mut f = text.split_whitespace().map(|v| v.parse().unwrap_or(0));
    (f.next().unwrap_or(0), f.next().unwrap_or(0))
}

/// What one hog measured: its run time as the runtime charged it, and its worker thread's
/// time on a CPU and waiting for one (the host's steal), over the measured window.
struct Hog {
    ran: Duration,
    on_cpu_ns: u64,
    waiting_ns: u64,
}

/// The runtime's hogs at `nices`, free on both workers, calling `cond_resched` every ~20 µs;
/// after 200 ms, what each measured over `dur`, and the counters' change.
fn runtime_hogs(
    rt: &Runtime,
    nices: &[i32],
    dur: Duration,
) -> (Vec<Hog>, WorkerStats, WorkerStats) {
    let iters = calibrate();
    let stop = Arc::new(AtomicBool::new(false));
    let measure = Arc::new(AtomicBool::new(false));
    let hs: Vec<_> = nices
        .iter()
        .enumerate()
        .map(|(i, &nice)| {
            let (stop, measure) = (Arc::clone(&stop), Arc::clone(&measure));
            rt.spawn_with(Builder::new().nice(nice), move || {
                let mut start = None;
                let mut x = i as u64;
                while !stop.load(Ordering::Relaxed) {
                    x = chunk(x, iters);
                    if start.is_none() && measure.load(Ordering::Relaxed) {
                        start = Some((lagom::task::cpu_time(), thread_sched()));
                    }
                    lagom::task::cond_resched();
                }
                let (run0, (on0, wait0)) = start.expect("measured");
                let (on1, wait1) = thread_sched();
                Hog {
                    ran: lagom::task::cpu_time().expect("in a task") - run0.expect("in a task"),
                    on_cpu_ns: on1.saturating_sub(on0),
                    waiting_ns: wait1.saturating_sub(wait0),
                }
            })
            .expect("spawn")
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let before = rt.stats().total();
    measure.store(true, Ordering::Relaxed);
    std::thread::sleep(dur);
    let after = rt.stats().total();
    stop.store(true, Ordering::Relaxed);
    (
        hs.into_iter().map(|h| h.join().expect("hog")).collect(),
        before,
        after,
    )
}

fn main() {
    lagom_examples::default_sigpipe();
    let args = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    // SAFETY: the cross-check compares the kernel-faithful runtime with the simulator, which
    // moves started tasks as the kernel does; its pipe tasks and hogs hold nothing
    // thread-local and nothing thread-affine across a blocking call, and never ask which
    // thread they run on.
    let rt = unsafe { Runtime::builder().allow_migration() }
        .features(args.features.as_str())
        .build()
        .unwrap_or_else(|e| {
            eprintln!("error: {e}");
            std::process::exit(1)
        });
    let cpus = rt.worker_cpus();
    if cpus.len() < 2 {
        eprintln!("error: the cross-check needs two allowed CPUs (it compares 2-CPU scenarios)");
        std::process::exit(1);
    }
    let mut rows = Vec::new();
    let per = |x: f64, n: u64| x / n as f64;

    for (case, pair) in [
        ("pipe", [cpus[0], cpus[0]]),
        ("pipe_cross", [cpus[0], cpus[1]]),
    ] {
        let (ns, a, b) = runtime_pipe(&rt, pair, args.n);
        let r = sim(case, &args.features);
        let trips = r.tasks[0].stats.loops;
        let t = r.total();
        let st = |f: fn(&WorkerStats) -> u64| per(delta(&a, &b, f), args.n);
        let sm = |v: u64| per(v as f64, trips);
        let mut row = |what: &str, runtime: f64, sim: f64, tolerance| {
            rows.push(Row {
                case,
                what: what.to_string(),
                runtime,
                sim,
                tolerance,
            })
        };
        row(
            "ns per round trip",
            ns,
            r.measured as f64 / trips as f64,
            Tolerance::None,
        );
        row(
            "voluntary switches per trip",
            st(|s| s.switches_voluntary),
            sm(t.switches_voluntary),
            Tolerance::Rel(0.1),
        );
        row(
            "involuntary switches per trip",
            st(|s| s.switches_involuntary),
            sm(t.switches_involuntary),
            Tolerance::Abs(0.05),
        );
        row(
            "local wakeups per trip",
            st(|s| s.wakeups_local),
            sm(t.wakeups_local),
            Tolerance::None,
        );
        row(
            "in-place wakeups per trip",
            st(|s| s.runnable_in_place),
            sm(t.runnable_in_place),
            Tolerance::None,
        );
        row(
            "wakeups on the CPU per trip",
            st(|s| s.wakeups_local + s.runnable_in_place),
            sm(t.wakeups_local + t.runnable_in_place),
            Tolerance::Rel(0.1),
        );
        row(
            "queued wakeups per trip",
            st(|s| s.wakeups_queued),
            sm(t.wakeups_queued),
            Tolerance::None,
        );
        row(
            "on-CPU hand-offs per trip",
            st(|s| s.wakeups_on_cpu),
            sm(t.wakeups_on_cpu),
            Tolerance::None,
        );
        row(
            "wakelist wakeups per trip",
            st(|s| s.wakeups_queued + s.wakeups_on_cpu),
            sm(t.wakeups_queued + t.wakeups_on_cpu),
            Tolerance::Rel(0.1),
        );
        row(
            "kicks per trip",
            st(|s| s.kicks),
            sm(t.kicks),
            Tolerance::Abs(0.1),
        );
    }

    let nices = [0, 0, 5, -5];
    let names = ["n0a", "n0b", "n5", "nm5"];
    let (hogs, a, b) = runtime_hogs(&rt, &nices, Duration::from_secs_f64(args.seconds));
    let r = sim("hogs", &args.features);
    let total: f64 = hogs.iter().map(|h| h.ran.as_secs_f64()).sum();
    for (k, name) in names.iter().enumerate() {
        let runtime = 2.0 * hogs[k].ran.as_secs_f64() / total;
        let t = r.tasks.iter().find(|t| t.name == *name).expect("task");
        let sim = t.stats.measured_cpu_time as f64 / r.measured as f64;
        rows.push(Row {
            case: "hogs",
            what: format!("share of one CPU, nice {}", nices[k]),
            runtime,
            sim,
            tolerance: Tolerance::Abs(0.02),
        });
    }
    let secs = args.seconds;
    // The simulator's counters run from its start (2.2 s, of which 2 s are measured).
    let sim_rate = r.total().switches_involuntary as f64 / (r.elapsed as f64 / 1e9);
    let invol = delta(&a, &b, |s| s.switches_involuntary);
    rows.push(Row {
        case: "hogs",
        what: "involuntary switches per second".into(),
        runtime: invol / secs,
        sim: sim_rate,
        tolerance: Tolerance::None,
    });
    // The three hogs that share a worker switch there; the host takes that worker thread's
    // CPU away for part of the time (its schedstat wait), and a task current meanwhile is
    // charged the lost wall time, so the runtime's switches per second of wall time fall
    // with the steal. Per second the thread was on its CPU they should match the simulator.
    let shared = &hogs[0];
    let wall = secs * 1e9;
    rows.push(Row {
        case: "hogs",
        what: "host steal of the 3-hog worker, %".into(),
        runtime: 100.0 * shared.waiting_ns as f64 / wall,
        sim: 0.0,
        tolerance: Tolerance::None,
    });
    rows.push(Row {
        case: "hogs",
        what: "involuntary switches per CPU second".into(),
        runtime: invol / (shared.on_cpu_ns.max(1) as f64 / 1e9),
        sim: sim_rate,
        tolerance: Tolerance::Rel(0.25),
    });
    rt.shutdown();

    let label = if args.features.is_empty() {
        "default"
    } else {
        args.features.as_str()
    };
    println!("features (both sides): {label}");
    println!(
        "{:<11} {:<34} {:>12} {:>12}  verdict",
        "case", "quantity", "runtime", "simulator"
    );
    for row in &rows {
        println!(
            "{:<11} {:<34} {:>12.3} {:>12.3}  {}",
            row.case,
            row.what,
            row.runtime,
            row.sim,
            row.verdict()
        );
    }
}
