//! The stall monitor's cost, as a program: loops for callgrind's instruction
//! counts, and the CPU time of an idle or a busy runtime, per thread.
//!
//! ```text
//! cargo run --release -p lagom-benches --example monitor_cost -- CASE [N|SECS] [options]
//! valgrind --tool=callgrind ./target/release/examples/monitor_cost park-unpark 100000
//! ```

use std::time::{Duration, Instant};

use lagom::Runtime;

const USAGE: &str = "usage: monitor_cost CASE [N|SECS] [--no-monitor] [--threshold MS]

  park-unpark N    N same-worker park/unpark round trips (two tasks pass a turn) [100000]
  cond-resched N   N calls of cond_resched with nothing due [10000000]
  idle SECS        an empty runtime (one worker per allowed CPU) left alone for twice SECS
                   [10]: the process's CPU time over the first SECS after the build and over
                   the next (getrusage), and each thread's CPU time and voluntary switches
  busy SECS        a task that computes for SECS with cond_resched on one worker [5]: the
                   stall monitor thread's CPU time and wakeups over that span
Options:
  --no-monitor     Builder::stall_monitor(false)
  --threshold MS   the monitor's threshold (default 10; it looks once per threshold)";

struct Args {
    case: String,
    n: Option<f64>,
    monitor: bool,
    threshold: Duration,
}

fn parse() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        case: String::new(),
        n: None,
        monitor: true,
        threshold: lagom::runtime::DEFAULT_STALL_THRESHOLD,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Long("no-monitor") => a.monitor = false,
            Long("threshold") => {
                let ms = p.value()?.parse::<f64>()?;
                a.threshold = Duration::try_from_secs_f64(ms / 1e3)
                    .map_err(|_| format!("--threshold takes milliseconds, not {ms}"))?;
            }
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            Value(v) if a.case.is_empty() => a.case = v.string()?,
            Value(v) if a.n.is_none() => a.n = Some(v.parse()?),
            _ => return Err(arg.unexpected()),
        }
    }
    if a.case.is_empty() {
        return Err("no case given".into());
    }
    if let Some(n) = a.n
        && !(n.is_finite() && (0.0..1e12).contains(&n))
    {
        return Err(format!("N|SECS takes a number from 0 to 10^12, not {n}").into());
    }
    Ok(a)
}

fn usage_error(e: impl std::fmt::Display) -> ! {
    eprintln!("error: {e}\n\n{USAGE}");
    std::process::exit(2)
}

fn builder(a: &Args) -> lagom::runtime::Builder {
    Runtime::builder()
        .stall_monitor(a.monitor)
        .stall_threshold(a.threshold)
}

/// A one-worker runtime on the first allowed CPU.
fn one_worker(a: &Args) -> Runtime {
    let cpu = Runtime::builder()
        .stall_monitor(false)
        .build()
        .unwrap_or_else(|e| usage_error(e))
        .worker_cpus()[0];
    builder(a)
        .worker_cpus([cpu])
        .build()
        .unwrap_or_else(|e| usage_error(e))
}

fn main() {
    let a = parse().unwrap_or_else(|e| usage_error(e));
    match a.case.as_str() {
        "park-unpark" => {
            let n = a.n.unwrap_or(100_000.0) as u64;
            let rt = one_worker(&a);
            let t = lagom_benches::workloads::park_unpark(&rt, n);
            println!(
                "{:.1} ns per round trip ({n})",
                t.as_nanos() as f64 / n as f64
            );
        }
        "cond-resched" => {
            let n = a.n.unwrap_or(10_000_000.0) as u64;
            let rt = one_worker(&a);
            let t = rt.block_on(move || {
                let t0 = Instant::now();
                for _ in 0..n {
                    lagom::task::cond_resched();
                }
                t0.elapsed()
            });
            println!("{:.2} ns per call ({n})", t.as_nanos() as f64 / n as f64);
        }
        "idle" => {
            let secs = a.n.unwrap_or(10.0);
            let rt = builder(&a).build().unwrap_or_else(|e| usage_error(e));
            // The span right after the build (the monitor samples for its first second,
            // then sleeps), and the next one.
            for span in ["the first", "the next"] {
                let (r0, th0) = (rusage(), threads());
                std::thread::sleep(Duration::from_secs_f64(secs));
                let (r1, th1) = (rusage(), threads());
                println!(
                    "{span} {secs} s idle, {} workers, {}: process CPU {:.3} ms (user {:.3}, \
                     system {:.3})",
                    rt.worker_cpus().len(),
                    if a.monitor {
                        "monitor on"
                    } else {
                        "monitor off"
                    },
                    (r1.0 + r1.1 - r0.0 - r0.1) as f64 / 1e3,
                    (r1.0 - r0.0) as f64 / 1e3,
                    (r1.1 - r0.1) as f64 / 1e3
                );
                print_threads(&th0, &th1);
            }
            drop(rt);
        }
        "busy" => {
            let secs = a.n.unwrap_or(5.0);
            let rt = one_worker(&a);
            let th0 = threads();
            rt.block_on(move || {
                let t0 = Instant::now();
                let mut x = 0u64;
                while t0.elapsed().as_secs_f64() < secs {
                    for _ in 0..1000 {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                    lagom::task::cond_resched();
                }
            });
            let th1 = threads();
            println!(
                "busy {secs} s on one worker, monitor {}, threshold {:?}:",
                if a.monitor { "on" } else { "off" },
                a.threshold
            );
            print_threads(&th0, &th1);
        }
        other => usage_error(format!("unknown case {other:?}")),
    }
}

fn rusage() -> (i64, i64) {
    // SAFETY: `ru` is plain data, written whole by getrusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is writable.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec * 1_000_000 + t.tv_usec;
    (us(ru.ru_utime), us(ru.ru_stime))
}

/// Every thread of the process: (tid, name, ns on a CPU, voluntary switches).
fn threads() -> Vec<(String, String, u64, u64)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc/self/task").expect("procfs") {
        let d = e.expect("task entry").path();
        let tid = d.file_name().unwrap().to_string_lossy().into_owned();
        let comm = std::fs::read_to_string(d.join("comm")).unwrap_or_default();
        let ns = std::fs::read_to_string(d.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        let vol = std::fs::read_to_string(d.join("status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                    .and_then(|v| v.trim().parse().ok())
            })
            .unwrap_or(0);
        v.push((tid, comm.trim().to_owned(), ns, vol));
    }
    v
}

/// Each thread's CPU time and voluntary switches between two snapshots.
fn print_threads(before: &[(String, String, u64, u64)], after: &[(String, String, u64, u64)]) {
    for (tid, name, ns, vol) in after {
        let (ns0, vol0) = before
            .iter()
            .find(|b| b.0 == *tid)
            .map_or((0, 0), |b| (b.2, b.3));
        println!(
            "  {name:<16} CPU {:>9.3} ms, {:>6} voluntary switches",
            (ns - ns0) as f64 / 1e6,
            vol - vol0
        );
    }
}
