//! Remote wake to a busy worker, lagom beside tokio, in adjacent pairs: the like-for-like
//! ping-pongs of `benches/wake.rs` (`pingpong.rs`), but each lagom sample runs right next to a
//! tokio sample, in alternating order, and the figure is the median over pairs of the ratio
//! tokio ÷ lagom.
//!
//! Why pairs: on a shared VM the cost of moving a cache line between the two vCPUs changes
//! several-fold from minute to minute (the host places them nearer or further apart), and
//! criterion's case-after-case runs can put lagom and tokio in different phases. A pair of
//! samples a few milliseconds apart shares the phase. After each pair the program times a bare
//! cache-line round trip between two threads on the same CPUs, and reports the pairs of each
//! phase apart: "near" (within twice the cheapest line cost seen in the run) and "far".
//!
//! Each lagom kind is set against the same tokio case (two current-thread runtimes on the two
//! CPUs, each with a task looping on `yield_now().await` beside its player):
//!
//! * `yield` — lagom's busy tasks loop on `yield_now()`, as tokio's do: each yield gives up
//!   the rest of the busy task's request, so the woken player runs at the next yield. This is
//!   the like-for-like case: both runtimes' busy tasks hand over the CPU at every turn.
//! * `bg` — they loop on `cond_resched()` at nice 19: a background job, which keeps its
//!   (small) fair share; a wake now and then waits for the busy task's protected slice
//!   (RUN_TO_PARITY), and a weight that is not a power of two costs the placement a division.
//! * `bg-short` — as `bg`, and the players ask for a 0.1 ms slice (`task::Builder::slice`), as
//!   a latency-sensitive task would: a wakee with the shorter slice cuts the busy task's
//!   protection (PREEMPT_SHORT).
//! * `fair` — they loop on `cond_resched()` at nice 0: at equal weights EEVDF makes the woken
//!   player wait, on average, about as long as it runs per wake (the policy test
//!   `wakee_against_a_hog_waits_its_run_time_times_the_weight_ratio`), a wait that tokio,
//!   without fairness, never imposes.
//!
//! ```text
//! cargo run --release -p lagom-benches --example remote_wake -- [-n N] [-r PAIRS]
//!     [--busy yield|bg|bg-short|fair|all] [--json]
//! ```

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom_benches::pingpong::{Busy, lagom_pingpong, tokio_remote};

const USAGE: &str =
    "usage: remote_wake [-n N] [-r PAIRS] [--busy yield|bg|bg-short|fair|all] [--json]
                   [--features SPEC]

Remote wakes to a busy worker, lagom beside tokio in adjacent pairs of samples.
  -n N         timed round trips per sample (default 5000; 100 more run untimed first)
  -r PAIRS     pairs of samples per lagom kind (default 40)
  --busy KIND  lagom's busy tasks: yield (yield_now, as tokio's), bg (cond_resched at nice 19),
               bg-short (bg, and the players ask for a 0.1 ms slice), fair (cond_resched at
               nice 0), or all (default)
  --json       one JSON object per kind and phase, one per line, instead of the table
  --features SPEC  lagom's scheduler features on top of the defaults, e.g. NO_TTWU_QUEUE
               (default: $LAGOM_FEATURES)

Each pair is followed by a bare cache-line round trip between the two CPUs; pairs within
twice the cheapest line cost seen are reported as the near phase, the others as far.";

/// Untimed round trips before each sample's timed ones.
const WARMUP: u64 = 100;

/// Round trips of the cache-line reference measured after each pair.
const LINE_ROUND_TRIPS: u64 = 20_000;

/// One pair of samples and the machine's line cost right after it, in ns per round trip.
struct Pair {
    lagom: f64,
    tokio: f64,
    line: f64,
}

struct Args {
    n: u64,
    pairs: usize,
    kinds: Vec<Kind>,
    json: bool,
    features: Option<String>,
}

#[derive(Clone, Copy)]
struct Kind {
    name: &'static str,
    busy: Busy,
    /// The players' custom slice (`task::Builder::slice`), if any.
    slice: Option<Duration>,
}

const KINDS: [Kind; 4] = [
    Kind {
        name: "yield",
        busy: Busy::Yield,
        slice: None,
    },
    Kind {
        name: "bg",
        busy: Busy::CondResched(19),
        slice: None,
    },
    Kind {
        name: "bg-short",
        busy: Busy::CondResched(19),
        slice: Some(Duration::from_micros(100)),
    },
    Kind {
        name: "fair",
        busy: Busy::CondResched(0),
        slice: None,
    },
];

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        n: 5000,
        pairs: 40,
        kinds: KINDS.to_vec(),
        json: false,
        features: None,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Short('n') => a.n = p.value()?.parse()?,
            Short('r') => a.pairs = p.value()?.parse()?,
            Long("busy") => {
                let v: String = p.value()?.parse()?;
                a.kinds = match v.as_str() {
                    "all" => KINDS.to_vec(),
                    k => match KINDS.iter().find(|x| x.name == k) {
                        Some(x) => vec![*x],
                        None => {
                            return Err(format!(
                                "unknown busy kind {k:?}: use yield, bg, bg-short, fair or all"
                            )
                            .into());
                        }
                    },
                };
            }
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
    if a.n == 0 || a.pairs == 0 {
        return Err("-n and -r must be at least 1".into());
    }
    Ok(a)
}

/// The machine's own floor: ns per round trip of one cache line between two OS threads pinned
/// to `cpus`, each spinning until the line holds its turn (`iters` round trips after 1000
/// untimed). A remote wake moves a handful of lines one way and back; this is what one costs
/// right now.
fn line_round_trip(cpus: [usize; 2], iters: u64) -> f64 {
    let turn = Arc::new(AtomicU64::new(0));
    let players: Vec<_> = (0..2u64)
        .map(|me| {
            let (turn, cpu) = (Arc::clone(&turn), cpus[me as usize]);
            std::thread::spawn(move || {
                assert!(
                    core_affinity::set_for_current(core_affinity::CoreId { id: cpu }),
                    "pin to CPU {cpu}"
                );
                let mut t = Instant::now();
                for i in 0..1000 + iters {
                    if i == 1000 {
                        t = Instant::now();
                    }
                    let mine = 2 * i + me;
                    while turn.load(Ordering::Acquire) != mine {
                        std::hint::spin_loop();
                    }
                    turn.store(mine + 1, Ordering::Release);
                }
                t.elapsed()
            })
        })
        .collect();
    let mut times = players.into_iter().map(|p| p.join().expect("line player"));
    let a = times.next().expect("player 0");
    times.for_each(drop);
    a.as_nanos() as f64 / iters as f64
}

/// The median of `v` (sorted in place); the mean of the two middle values for an even count.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    }
}

fn main() -> ExitCode {
    lagom_benches::default_sigpipe();
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("remote_wake: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut b = Runtime::builder();
    if let Some(f) = &args.features {
        b = b.features(f.as_str());
    }
    // The bench measures the kernel's wakeup path, migrations included.
    // SAFETY: the ping-pong and busy tasks park, unpark, yield and read clocks: they hold
    // nothing thread-local across a blocking call and never ask which thread they run on.
    let rt = match unsafe { b.allow_migration() }.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("remote_wake: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cpus = rt.worker_cpus();
    if cpus.len() < 2 {
        eprintln!(
            "remote_wake: a remote wake needs two workers; this process may run on CPU {:?} only",
            cpus
        );
        return ExitCode::FAILURE;
    }
    let tokio_cpus = [cpus[0], cpus[1]];
    let per_rt = |d: Duration| d.as_nanos() as f64 / args.n as f64;
    // Per kind, per pair: (lagom, tokio, line) ns per round trip.
    let mut samples: Vec<Vec<Pair>> = Vec::new();
    for kind in &args.kinds {
        let mut pairs = Vec::with_capacity(args.pairs);
        for k in 0..args.pairs {
            let run_lagom = || {
                let d = lagom_pingpong(&rt, 0, 1, Some(kind.busy), kind.slice, WARMUP, args.n);
                per_rt(d)
            };
            let run_tokio = || per_rt(tokio_remote(tokio_cpus, true, WARMUP, args.n));
            // Alternate which side goes first, so that a drift within a pair favours neither.
            let (lagom, tokio) = if k.is_multiple_of(2) {
                let l = run_lagom();
                (l, run_tokio())
            } else {
                let t = run_tokio();
                (run_lagom(), t)
            };
            let line = line_round_trip(tokio_cpus, LINE_ROUND_TRIPS);
            pairs.push(Pair { lagom, tokio, line });
        }
        samples.push(pairs);
    }
    // The host places the two vCPUs closer or further apart from time to time; a line round
    // trip then costs several times more. Pairs within twice the cheapest line cost seen are
    // the "near" phase, the others "far".
    let cheapest = samples
        .iter()
        .flatten()
        .map(|p| p.line)
        .fold(f64::INFINITY, f64::min);
    if !args.json {
        println!(
            "{} pairs of {} round trips per kind, on CPUs {} and {}; ns per round trip \
             (2 wakes), medians",
            args.pairs, args.n, tokio_cpus[0], tokio_cpus[1]
        );
        println!(
            "{:<6} {:<5} {:>6} {:>9} {:>10} {:>10} {:>12} {:>14} {:>12}",
            "busy",
            "phase",
            "pairs",
            "line rt",
            "lagom",
            "tokio",
            "tokio÷lagom",
            "ratio p25–p75",
            "lagom ahead"
        );
    }
    for (kind, pairs) in args.kinds.iter().zip(&samples) {
        for phase in ["near", "far"] {
            let sel: Vec<&Pair> = pairs
                .iter()
                .filter(|p| (p.line <= 2.0 * cheapest) == (phase == "near"))
                .collect();
            if sel.is_empty() {
                continue;
            }
            let col = |f: fn(&Pair) -> f64| sel.iter().map(|p| f(p)).collect::<Vec<f64>>();
            let mut ratio = col(|p| p.tokio / p.lagom);
            let ahead = ratio.iter().filter(|&&r| r > 1.0).count();
            let r50 = median(&mut ratio);
            let (r25, r75) = (ratio[ratio.len() / 4], ratio[(ratio.len() * 3) / 4]);
            let line = median(&mut col(|p| p.line));
            let (l50, t50) = (median(&mut col(|p| p.lagom)), median(&mut col(|p| p.tokio)));
            if args.json {
                println!(
                    "{}",
                    serde_json::json!({
                        "busy": kind.name,
                        "phase": phase,
                        "pairs": sel.len(),
                        "round_trips": args.n,
                        "line_round_trip_ns": line,
                        "lagom_round_trip_ns": l50,
                        "tokio_round_trip_ns": t50,
                        "tokio_over_lagom": r50,
                        "ratio_p25": r25,
                        "ratio_p75": r75,
                        "lagom_ahead": ahead,
                    })
                );
            } else {
                println!(
                    "{:<6} {:<5} {:>6} {:>9.0} {:>10.1} {:>10.1} {:>12.3} {:>14} {:>12}",
                    kind.name,
                    phase,
                    sel.len(),
                    line,
                    l50,
                    t50,
                    r50,
                    format!("{r25:.3}–{r75:.3}"),
                    format!("{ahead}/{}", sel.len())
                );
            }
        }
    }
    ExitCode::SUCCESS
}
