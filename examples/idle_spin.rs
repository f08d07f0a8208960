//! `idle_spin`: the idle spin's trade-off — remote wake latency against the CPU an
//! idle worker burns, for a list of spin lengths.
//!
//! Pattern, per spin length and wake interval `I`: a 2-worker runtime; the wakee task B is
//! pinned to worker 1 and parks; the waker task A, pinned to worker 0, waits until B has
//! acknowledged the previous wake, then computes for a gap drawn uniformly from
//! `[I/2, 3I/2]` (seeded), stamps the time and unparks B. B stamps the time when it runs
//! again. Worker 1 has nothing else, so every wake finds it idle: still in its spin if the
//! gap was shorter than the spin, asleep on its futex otherwise.
//!
//! Per row: the wake latency from just before `unpark` to B running (CLOCK_MONOTONIC on both
//! CPUs: mean, p50, p99), the time A spent inside `unpark` (a `futex_wake` when B's worker
//! slept), worker 1's own thread CPU time (`pthread_getcpuclockid`) over the wall time of the
//! run, in % of one CPU, and per wake (the per-wake figure holds up better on a loaded
//! machine, where the OS takes the thread away for part of the wall time), and worker 1's
//! `idle_sleeps` and `kicks` per wake.
//!
//! What it showed, and the choice of `DEFAULT_IDLE_SPIN` from it: the module doc of
//! `runtime/src/sched/idle.rs`.
//!
//! ```text
//! cargo run --release -p lagom-examples --example idle_spin --
//!     [--spins-us 0,1,5,10,20,30,50,100,200] [--intervals-us 20,50,100,500] [-n 2000]
//!     [--seed S] [--json]
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use lagom::Runtime;
use lagom::task::{Builder, Unparker};
use lagom_examples::{features_arg, usage_error};

const USAGE: &str =
    "usage: idle_spin [--spins-us LIST] [--intervals-us LIST] [-n N] [--seed S] [--json]
                 [--features SPEC]

Task A on worker 0 wakes task B, parked on worker 1, N times per row (default 2000), each
after a gap drawn uniformly from [I/2, 3I/2] once B acknowledged the previous wake; one row
per wake interval I and idle spin length.
  --spins-us LIST      idle spin lengths in µs (default 0,1,5,10,20,30,50,100,200)
  --intervals-us LIST  mean gaps I between wakes in µs (default 20,50,100,500)
  -n N                 wakes per row
  --seed S             seed of the gaps (default: from the clock; printed)
  --json               one JSON object per row, one per line
  --features SPEC      scheduler features on top of the defaults, e.g. NO_TTWU_QUEUE
                       (default: $LAGOM_FEATURES)";

struct Args {
    spins_us: Vec<u64>,
    intervals_us: Vec<u64>,
    n: usize,
    seed: Option<u64>,
    json: bool,
    features: Option<String>,
}

fn list(s: std::ffi::OsString) -> Result<Vec<u64>, lexopt::Error> {
    let s = s.into_string().map_err(lexopt::Error::NonUnicodeValue)?;
    s.split(',')
        .map(|v| v.trim().parse().map_err(|e| format!("`{v}`: {e}").into()))
        .collect()
}

/// The most wakes `-n` asks for per setting (each keeps a word of figures).
const MAX_WAKES: usize = 100_000_000;

/// The longest mean gap between wakes `--intervals-us` takes: one second.
const MAX_INTERVAL_US: u64 = 1_000_000;

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        spins_us: vec![0, 1, 5, 10, 20, 30, 50, 100, 200],
        intervals_us: vec![20, 50, 100, 500],
        n: 2000,
        seed: None,
        json: false,
        features: None,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Long("spins-us") => a.spins_us = list(p.value()?)?,
            Long("intervals-us") => a.intervals_us = list(p.value()?)?,
            Short('n') => a.n = p.value()?.parse()?,
            Long("seed") => a.seed = Some(p.value()?.parse()?),
            Long("json") => a.json = true,
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
    if let Some(&us) = a.intervals_us.iter().find(|&&us| us > MAX_INTERVAL_US) {
        return Err(format!(
            "--intervals-us: {us} µs is longer than the longest mean gap, {MAX_INTERVAL_US} µs"
        )
        .into());
    }
    if let Some(&us) = a
        .spins_us
        .iter()
        .find(|&&us| Duration::from_micros(us) > lagom::runtime::MAX_IDLE_SPIN)
    {
        return Err(format!(
            "--spins-us: {us} µs is longer than the maximum idle spin of {:?}",
            lagom::runtime::MAX_IDLE_SPIN
        )
        .into());
    }
    Ok(a)
}

/// CLOCK_MONOTONIC in ns: the runtime's clock, comparable across CPUs.
fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// The time of clock `clk` in ns.
fn clock_ns(clk: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is writable; `clk` is CLOCK_MONOTONIC or the CPU clock of a live thread.
    let rc = unsafe { libc::clock_gettime(clk, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({clk})");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The CPU-time clock of the calling OS thread (in a task: its worker's thread).
fn own_cpu_clock() -> libc::clockid_t {
    let mut clk: libc::clockid_t = 0;
    // SAFETY: `clk` is writable; pthread_self() is the calling, live thread.
    let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clk) };
    assert_eq!(rc, 0, "pthread_getcpuclockid");
    clk
}

/// The figures of one row.
struct Row {
    interval_us: u64,
    spin_us: u64,
    /// Wake latencies in ns, sorted.
    lat: Vec<u64>,
    /// Mean ns inside `unpark`.
    unpark_ns: f64,
    /// Worker 1's CPU time over the wall time of the run, in % of one CPU.
    cpu_pct: f64,
    /// Worker 1's CPU time per wake, in ns.
    cpu_per_wake_ns: f64,
    idle_sleeps: u64,
    kicks: u64,
}

impl Row {
    fn pct(&self, p: usize) -> f64 {
        self.lat[(self.lat.len() - 1) * p / 100] as f64 / 1e3
    }

    fn mean(&self) -> f64 {
        self.lat.iter().sum::<u64>() as f64 / self.lat.len() as f64 / 1e3
    }

    fn per_wake(&self, c: u64) -> f64 {
        c as f64 / self.lat.len() as f64
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "interval_us": self.interval_us,
            "spin_us": self.spin_us,
            "wakes": self.lat.len(),
            "lat_mean_us": self.mean(),
            "lat_p50_us": self.pct(50),
            "lat_p99_us": self.pct(99),
            "unpark_us": self.unpark_ns / 1e3,
            "idle_cpu_pct": self.cpu_pct,
            "idle_cpu_us_per_wake": self.cpu_per_wake_ns / 1e3,
            "idle_sleeps": self.idle_sleeps,
            "kicks": self.kicks,
        })
    }
}

/// One row: a fresh runtime with `spin_us`, `n` wakes at gaps around `interval_us`.
fn run(cpus: &[usize], (interval_us, spin_us): (u64, u64), n: usize, a: &Args, seed: u64) -> Row {
    let mut b = Runtime::builder()
        .worker_cpus(cpus.iter().copied())
        .idle_spin(Duration::from_micros(spin_us));
    if let Some(f) = &a.features {
        b = b.features(f.as_str());
    }
    // The lab measures the kernel's wakeup path, migrations included.
    // SAFETY: the tasks below park, unpark, sleep and read clocks: they hold nothing
    // thread-local across a blocking call and never ask which thread they run on.
    let rt = unsafe { b.allow_migration() }.build().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    let cpus = rt.worker_cpus();
    let on = |w: usize| Builder::new().cpus([cpus[w]]);
    let turn = Arc::new(AtomicU64::new(0));
    let ack = Arc::new(AtomicU64::new(0));
    let seen: Arc<Vec<AtomicU64>> = Arc::new((0..=n).map(|_| AtomicU64::new(0)).collect());
    let b_un: Arc<OnceLock<(Unparker, libc::clockid_t)>> = Arc::new(OnceLock::new());
    let before = rt.stats().workers[1];
    let b = {
        let (turn, ack, seen, b_un) = (
            Arc::clone(&turn),
            Arc::clone(&ack),
            Arc::clone(&seen),
            Arc::clone(&b_un),
        );
        rt.spawn_with(on(1).name("wakee"), move || {
            let _ = b_un.set((lagom::task::current_unparker(), own_cpu_clock()));
            for k in 1..=n as u64 {
                while turn.load(Ordering::Acquire) != k {
                    lagom::task::park();
                }
                seen[k as usize].store(now_ns(), Ordering::Relaxed);
                ack.store(k, Ordering::Release);
            }
        })
        .expect("spawn wakee")
    };
    let a = {
        let (turn, ack, b_un) = (Arc::clone(&turn), Arc::clone(&ack), Arc::clone(&b_un));
        rt.spawn_with(on(0).name("waker"), move || {
            let (un, clk) = loop {
                if let Some(x) = b_un.get() {
                    break x.clone();
                }
                lagom::task::yield_now();
            };
            let mut rng = fastrand::Rng::with_seed(seed);
            let (lo, hi) = (interval_us * 500, interval_us * 1500);
            let mut sent = vec![0u64; n + 1];
            let mut in_unpark = 0u64;
            let (wall0, cpu0) = (now_ns(), clock_ns(clk));
            for k in 1..=n as u64 {
                while ack.load(Ordering::Acquire) != k - 1 {
                    std::hint::spin_loop();
                }
                let until = now_ns() + rng.u64(lo..=hi);
                while now_ns() < until {
                    std::hint::spin_loop();
                }
                let t0 = now_ns();
                turn.store(k, Ordering::Release);
                un.unpark();
                in_unpark += now_ns() - t0;
                sent[k as usize] = t0;
            }
            while ack.load(Ordering::Acquire) != n as u64 {
                std::hint::spin_loop();
            }
            let (wall, cpu) = (now_ns() - wall0, clock_ns(clk) - cpu0);
            (sent, in_unpark, cpu, 100.0 * cpu as f64 / wall as f64)
        })
        .expect("spawn waker")
    };
    let (sent, in_unpark, cpu, cpu_pct) = a.join().expect("waker");
    b.join().expect("wakee");
    let after = rt.stats().workers[1];
    drop(rt);
    let mut lat: Vec<u64> = (1..=n)
        .map(|k| seen[k].load(Ordering::Relaxed).saturating_sub(sent[k]))
        .collect();
    lat.sort_unstable();
    Row {
        interval_us,
        spin_us,
        lat,
        unpark_ns: in_unpark as f64 / n as f64,
        cpu_pct,
        cpu_per_wake_ns: cpu as f64 / n as f64,
        idle_sleeps: after.idle_sleeps - before.idle_sleeps,
        kicks: after.kicks - before.kicks,
    }
}

/// The first two CPUs this process may use.
fn two_cpus() -> Vec<usize> {
    let all = Runtime::builder()
        .build()
        .map(|rt| rt.worker_cpus())
        .unwrap_or_default();
    if all.len() < 2 {
        eprintln!("error: idle_spin needs two allowed CPUs, has {all:?}");
        std::process::exit(1);
    }
    all[..2].to_vec()
}

fn main() {
    lagom_examples::default_sigpipe();
    let args = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    let seed = args.seed.unwrap_or_else(now_ns);
    let cpus = two_cpus();
    if !args.json {
        println!(
            "idle_spin: {} wakes per row, gaps uniform in [I/2, 3I/2], seed {seed}",
            args.n
        );
        println!(
            "{:>5} {:>7} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>8} {:>7}",
            "I_us",
            "spin_us",
            "mean_us",
            "p50_us",
            "p99_us",
            "unpark_us",
            "idle_cpu%",
            "cpu_us/w",
            "sleeps/w",
            "kicks/w"
        );
    }
    for &i in &args.intervals_us {
        for &s in &args.spins_us {
            let r = run(&cpus, (i, s), args.n, &args, seed);
            if args.json {
                println!("{}", r.json());
            } else {
                println!(
                    "{:>5} {:>7} {:>8.1} {:>8.1} {:>8.1} {:>9.2} {:>9.1} {:>9.1} {:>8.2} {:>7.2}",
                    r.interval_us,
                    r.spin_us,
                    r.mean(),
                    r.pct(50),
                    r.pct(99),
                    r.unpark_ns / 1e3,
                    r.cpu_pct,
                    r.cpu_per_wake_ns / 1e3,
                    r.per_wake(r.idle_sleeps),
                    r.per_wake(r.kicks)
                );
            }
        }
    }
}
