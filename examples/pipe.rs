//! `pipe`: two tasks ping-pong N times through park/unpark — lagom's counterpart of
//! `perf bench sched pipe`. Prints nanoseconds per round trip.
//!
//! ```text
//! cargo run --release -p lagom-examples --example pipe -- [--cross] [--json] [-n N]
//!     [--trace FILE [--trace-capacity EVENTS]]
//! ```
//!
//! `--trace FILE` runs with tracing on and writes a Chrome/Perfetto trace (open it in
//! ui.perfetto.dev); keep `-n` small, each round trip records about four events.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use lagom::Runtime;
use lagom::task::{Builder, Unparker};
use lagom_examples::{features_arg, thread_cpu_time, usage_error};

const USAGE: &str =
    "usage: pipe [--cross] [--json] [-n N] [--idle-spin-us S] [--gap-us G] [--trace FILE]
            [--trace-capacity EVENTS] [--features SPEC]

Two tasks pass a turn back and forth N times (default 1000000) through park/unpark.
  --cross           one task on each of two workers (default: both on one worker)
  --json            print {\"mode\", \"round_trips\", \"round_trip_ns\", \"round_trip_cpu_ns\"}
                    on one line (cpu: the first task's worker thread's CPU time; in
                    same-worker mode it covers both tasks and is not inflated by other
                    processes taking the CPU away)
  --idle-spin-us S  how long (µs) an idle worker spins before it sleeps on its futex
  --gap-us G        the first task computes G µs before each hand-off, so the other
                    worker goes idle (the idle-spin trade-off: wake latency vs idle CPU)
  -n N              round trips
  --trace FILE      record a trace and write it to FILE as Chrome trace JSON (opens in
                    ui.perfetto.dev); each round trip records about four events
  --trace-capacity EVENTS
                    events kept per worker (default: the runtime's); the rest are counted
  --features SPEC   scheduler features on top of the defaults, e.g. NO_DELAY_DEQUEUE
                    (default: $LAGOM_FEATURES)";

struct Args {
    cross: bool,
    json: bool,
    n: u64,
    idle_spin_us: Option<u64>,
    gap_us: u64,
    trace: Option<std::path::PathBuf>,
    trace_capacity: Option<usize>,
    features: Option<String>,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut args = Args {
        cross: false,
        json: false,
        n: 1_000_000,
        idle_spin_us: None,
        gap_us: 0,
        trace: None,
        trace_capacity: None,
        features: None,
    };
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("cross") => args.cross = true,
            Long("json") => args.json = true,
            Short('n') => args.n = parser.value()?.parse()?,
            Long("idle-spin-us") => args.idle_spin_us = Some(parser.value()?.parse()?),
            Long("gap-us") => args.gap_us = parser.value()?.parse()?,
            Long("trace") => args.trace = Some(parser.value()?.into()),
            Long("trace-capacity") => args.trace_capacity = Some(parser.value()?.parse()?),
            Long("features") => args.features = Some(features_arg(parser.value()?)?),
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if args.n == 0 || args.trace_capacity == Some(0) {
        return Err("-n and --trace-capacity must be at least 1".into());
    }
    if let Some(us) = args.idle_spin_us
        && std::time::Duration::from_micros(us) > lagom::runtime::MAX_IDLE_SPIN
    {
        return Err(format!(
            "--idle-spin-us {us} is longer than the maximum of {:?}",
            lagom::runtime::MAX_IDLE_SPIN
        )
        .into());
    }
    Ok(args)
}

fn main() {
    lagom_examples::default_sigpipe();
    let args = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    let mut b = Runtime::builder();
    if let Some(f) = &args.features {
        b = b.features(f.as_str());
    }
    if let Some(us) = args.idle_spin_us {
        b = b.idle_spin(std::time::Duration::from_micros(us));
    }
    b = b.tracing(args.trace.is_some());
    if let Some(c) = args.trace_capacity {
        b = b.trace_capacity(c);
    }
    // The lab measures the kernel's wakeup path, migrations included.
    // SAFETY: the two players park, unpark and count: they hold nothing thread-local across
    // a blocking call and never ask which thread they run on.
    let rt = unsafe { b.allow_migration() }.build().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    let cpus = rt.worker_cpus();
    if args.cross && cpus.len() < 2 {
        eprintln!("error: --cross needs two allowed CPUs");
        std::process::exit(1);
    }
    let (cpu_a, cpu_b) = if args.cross {
        (cpus[0], cpus[1])
    } else {
        (cpus[0], cpus[0])
    };
    let n = args.n;
    let gap = std::time::Duration::from_micros(args.gap_us);
    let turn = Arc::new(AtomicU64::new(0));
    let peers: Arc<[OnceLock<Unparker>; 2]> = Arc::new(Default::default());
    let start: Arc<OnceLock<(Instant, std::time::Duration)>> = Arc::new(OnceLock::new());
    let player = |me: u64| {
        let (turn, peers, start) = (Arc::clone(&turn), Arc::clone(&peers), Arc::clone(&start));
        move || {
            peers[me as usize]
                .set(lagom::task::current_unparker())
                .expect("set once");
            let other = loop {
                if let Some(o) = peers[1 - me as usize].get() {
                    break o.clone();
                }
                lagom::task::yield_now();
            };
            if me == 0 {
                let _ = start.set((Instant::now(), thread_cpu_time()));
            }
            for i in 0..n {
                let mine = 2 * i + me;
                while turn.load(Ordering::Acquire) != mine {
                    lagom::task::park();
                }
                if me == 0 && !gap.is_zero() {
                    let t = Instant::now();
                    while t.elapsed() < gap {
                        std::hint::spin_loop();
                    }
                }
                turn.store(mine + 1, Ordering::Release);
                other.unpark();
            }
            // The first task's worker thread's CPU time over the round trips (all but the
            // partner's last half turn).
            (me == 0).then(|| thread_cpu_time() - start.get().expect("started").1)
        }
    };
    let cpu0 = process_cpu_time();
    let a = rt
        .spawn_with(Builder::new().name("ping").cpus([cpu_a]), player(0))
        .expect("spawn");
    let b = rt
        .spawn_with(Builder::new().name("pong").cpus([cpu_b]), player(1))
        .expect("spawn");
    let worker_cpu = a.join().expect("ping").expect("the first task measures");
    b.join().expect("pong");
    let elapsed = start.get().expect("started").0.elapsed();
    let cpu = process_cpu_time() - cpu0;
    let ns = elapsed.as_nanos() as f64 / n as f64;
    let cpu_ns = worker_cpu.as_nanos() as f64 / n as f64;
    let mode = if args.cross {
        "cross-worker"
    } else {
        "same-worker"
    };
    let (stats, trace) = rt.shutdown_with_trace();
    if let Some(path) = &args.trace {
        if let Err(e) = trace.save(path) {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
        eprintln!(
            "trace: {} events written to {} (open it in ui.perfetto.dev)",
            trace.len(),
            path.display()
        );
        if trace.dropped() > 0 {
            eprintln!(
                "trace: {} events dropped (logs full): raise --trace-capacity or lower -n",
                trace.dropped()
            );
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::json!({"mode": mode, "round_trips": n, "round_trip_ns": ns,
                               "round_trip_cpu_ns": cpu_ns})
        );
    } else {
        println!(
            "{mode}: {n} round trips, {ns:.1} ns per round trip ({elapsed:?} total), \
             {cpu_ns:.1} ns of the first task's worker thread's CPU time per round trip"
        );
        if !gap.is_zero() {
            let busy = gap.as_secs_f64() * n as f64;
            println!(
                "gap {gap:?}: wake overhead {:.1} ns per round trip, idle CPU {:.3} s \
                 (CPU time beyond the gaps' busy work)",
                ns - gap.as_nanos() as f64,
                cpu.as_secs_f64() - busy
            );
        }
        // Every worker burns CPU while idle-spinning: CPU time over wall time, summed over
        // the runtime's workers (this process runs nothing else meanwhile).
        println!(
            "process CPU time {cpu:?}: {:.2} CPUs busy on average",
            cpu.as_secs_f64() / elapsed.as_secs_f64()
        );
        println!("{stats}");
    }
}

/// User + system CPU time of the whole process so far.
fn process_cpu_time() -> std::time::Duration {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is writable; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| {
        std::time::Duration::from_secs(t.tv_sec as u64)
            + std::time::Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}
