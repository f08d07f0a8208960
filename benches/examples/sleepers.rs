//! Many short sleepers, side by side: N tasks that each sleep 1 ms, spawned from one task and
//! joined, on lagom (`task::spawn` + `task::sleep`), on tokio (`tokio::spawn` +
//! `tokio::time::sleep`, a multi-thread runtime with as many workers) and as std threads
//! (`thread::spawn` + `thread::sleep`). The three sides alternate round by round, so that a
//! loaded machine disturbs them alike.
//!
//! Each timed round of lagom and tokio follows an untimed round of the same side, so that
//! neither is timed just after another side's idle stretch. The std threads round leaves the
//! CPUs mostly idle for about a second (10 000 threads asleep), and the first ~20 ms of work
//! after an idle stretch run markedly slower on a virtual machine (the host's CPU state, not
//! the runtime's). Without the untimed rounds, the side that ran right after the std threads
//! round (lagom) paid that alone (the figures: the book's `docs/src/lab/peers.md`).
//!
//! ```text
//! cargo run --release -p lagom-benches --example sleepers -- [-n N] [-r ROUNDS] [--json]
//!     [--only lagom|tokio|std_threads] [--phases]
//! ```

use std::process::ExitCode;
use std::time::{Duration, Instant};

use lagom::Runtime;

const USAGE: &str = "usage: sleepers [-n N] [-r ROUNDS] [--sleep-us US] [--no-threads] [--json]
                [--only lagom|tokio|std_threads] [--phases] [--features SPEC]

Spawns N tasks (default 10000) that each sleep US µs (default 1000) from one task and joins
them, ROUNDS times (default 7) on each side in turn: lagom, tokio, std threads, each timed
lagom and tokio round right after an untimed one of its side (so that neither is timed just
after the std threads' idle second). Prints the fastest and the median timed round per side,
and lagom's ratio to tokio.
  --no-threads     leave std threads out (N threads at once may exceed the thread limit)
  --only SIDE      run that side alone (to profile it)
  --phases         lagom: also print the median time to spawn all N, the stacks mapped, and
                   per task the switches, delayed dequeues, placements and balance pulls
  --json           one JSON object per side, one per line
  --features SPEC  lagom's scheduler features on top of the defaults (default: $LAGOM_FEATURES)";

struct Args {
    n: usize,
    rounds: usize,
    sleep: Duration,
    threads: bool,
    only: Option<usize>,
    phases: bool,
    json: bool,
    features: Option<String>,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        n: 10_000,
        rounds: 7,
        sleep: Duration::from_millis(1),
        threads: true,
        only: None,
        phases: false,
        json: false,
        features: None,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Short('n') => a.n = p.value()?.parse()?,
            Short('r') => a.rounds = p.value()?.parse()?,
            Long("sleep-us") => a.sleep = Duration::from_micros(p.value()?.parse()?),
            Long("no-threads") => a.threads = false,
            Long("only") => {
                let v = p.value()?.string()?;
                a.only = Some(
                    NAMES
                        .iter()
                        .position(|n| *n == v)
                        .ok_or_else(|| format!("--only: {v:?} is not one of {NAMES:?}"))?,
                );
            }
            Long("phases") => a.phases = true,
            Long("json") => a.json = true,
            Long("features") => {
                a.features = Some(lagom_benches::features_arg(p.value()?.parse()?)?);
            }
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if a.n == 0 || a.rounds == 0 {
        return Err("-n and -r must be at least 1".into());
    }
    Ok(a)
}

/// The sides, in the order they run.
const NAMES: [&str; 3] = ["lagom", "tokio", "std_threads"];

/// One lagom round: the whole round, and the part of it spent spawning.
fn lagom_round(rt: &Runtime, n: usize, d: Duration) -> (Duration, Duration) {
    rt.block_on(move || {
        let t0 = Instant::now();
        let hs: Vec<_> = (0..n)
            .map(|_| lagom::task::spawn(move || lagom::task::sleep(d)))
            .collect();
        let spawned = t0.elapsed();
        for h in hs {
            h.join().unwrap();
        }
        (t0.elapsed(), spawned)
    })
}

fn tokio_round(rt: &tokio::runtime::Runtime, n: usize, d: Duration) -> Duration {
    rt.block_on(async move {
        tokio::spawn(async move {
            let t0 = Instant::now();
            let hs: Vec<_> = (0..n)
                .map(|_| tokio::spawn(tokio::time::sleep(d)))
                .collect();
            for h in hs {
                h.await.unwrap();
            }
            t0.elapsed()
        })
        .await
        .unwrap()
    })
}

fn threads_round(n: usize, d: Duration) -> Result<Duration, std::io::Error> {
    let t0 = Instant::now();
    let mut hs = Vec::with_capacity(n);
    for _ in 0..n {
        hs.push(std::thread::Builder::new().spawn(move || std::thread::sleep(d))?);
    }
    for h in hs {
        h.join().unwrap();
    }
    Ok(t0.elapsed())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() -> ExitCode {
    lagom_benches::default_sigpipe();
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("sleepers: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut b = Runtime::builder();
    if let Some(f) = &args.features {
        b = b.features(f.as_str());
    }
    // Beside tokio's work-stealing runtime, lagom's with the kernel's freedom to move tasks.
    // SAFETY: the tasks sleep and return: they hold nothing thread-local across a blocking
    // call and never ask which thread they run on.
    let rt = match unsafe { b.allow_migration() }.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sleepers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let workers = rt.worker_cpus().len();
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_time()
        .build()
        .expect("tokio runtime");
    let (n, d) = (args.n, args.sleep);
    // One untimed round each: stacks, pools and tokio's timer wheel warm.
    let on = |side: usize| args.only.is_none_or(|o| o == side);
    if on(0) {
        lagom_round(&rt, n, d);
    }
    if on(1) {
        tokio_round(&tokio, n, d);
    }
    let mut threads_ok = args.threads && on(2);
    let mut sides: [Vec<Duration>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    let mut spawn_phase = Vec::new();
    for _ in 0..args.rounds {
        // Each timed round after an untimed one of its side (module doc).
        if on(0) {
            lagom_round(&rt, n, d);
            let (all, spawned) = lagom_round(&rt, n, d);
            sides[0].push(all);
            spawn_phase.push(spawned);
        }
        if on(1) {
            tokio_round(&tokio, n, d);
            sides[1].push(tokio_round(&tokio, n, d));
        }
        if threads_ok {
            match threads_round(n, d) {
                Ok(t) => sides[2].push(t),
                Err(e) => {
                    eprintln!("sleepers: std threads left out: {e}");
                    threads_ok = false;
                }
            }
        }
    }
    for s in &mut sides {
        s.sort();
    }
    let stat = |s: &[Duration]| (s.first().copied(), s.get(s.len() / 2).copied());
    let (_, tokio_med) = stat(&sides[1]);
    if args.phases && !spawn_phase.is_empty() {
        spawn_phase.sort();
        let st = rt.stats();
        let sum =
            |f: fn(&lagom::runtime::WorkerStats) -> u64| st.workers.iter().map(f).sum::<u64>();
        let mapped = sum(|w| w.stacks_mapped);
        eprintln!(
            "lagom phases: spawning {n} tasks took {:.1} ms (median); stacks mapped so far {mapped}",
            ms(spawn_phase[spawn_phase.len() / 2])
        );
        // What each task cost the schedulers, over every round so far (the untimed ones too).
        let tasks = sum(|w| w.exits).max(1) as f64;
        eprintln!(
            "lagom per task: {:.2} voluntary + {:.2} involuntary switches, {:.2} idle sleeps, \
             {:.2} delayed dequeues, {:.2} fork-idlest / {:.2} affine / {:.2} prev placements, \
             {:.3} newly idle pulls",
            sum(|w| w.switches_voluntary) as f64 / tasks,
            sum(|w| w.switches_involuntary) as f64 / tasks,
            sum(|w| w.idle_sleeps) as f64 / tasks,
            sum(|w| w.delayed_dequeues) as f64 / tasks,
            sum(|w| w.place_fork_idlest) as f64 / tasks,
            sum(|w| w.place_affine) as f64 / tasks,
            sum(|w| w.place_prev) as f64 / tasks,
            sum(|w| w.balance_pulls) as f64 / tasks,
        );
    }
    for (name, s) in NAMES.iter().zip(&sides) {
        let (Some(min), Some(med)) = stat(s) else {
            continue;
        };
        if args.json {
            println!(
                "{{\"side\":\"{name}\",\"n\":{n},\"sleep_us\":{},\"workers\":{workers},\
                 \"min_ms\":{:.3},\"median_ms\":{:.3}}}",
                d.as_micros(),
                ms(min),
                ms(med)
            );
        } else {
            let ratio = tokio_med.map_or(String::new(), |t| {
                format!(
                    " ({:.2}x tokio's median)",
                    med.as_secs_f64() / t.as_secs_f64()
                )
            });
            println!(
                "{name:<12} {n} tasks sleeping {} µs on {workers} workers: min {:.1} ms, median \
                 {:.1} ms over {} rounds{ratio}",
                d.as_micros(),
                ms(min),
                ms(med),
                s.len()
            );
        }
    }
    ExitCode::SUCCESS
}
