//! `schbench_ab`: schbench's figure matrix. Runs the built `schbench` as a child process on the
//! rows `-m 1 -t 2`, `-m 2 -t 4`, `-m 1 -t 8`, `-L -m 2 -t 16 -n 0`, in os mode and in lagom
//! mode with the feature sets the kernel threads argue about (defaults, `NO_DELAY_DEQUEUE`,
//! `TTWU_QUEUE_DELAYED`, `NO_DELAY_ZERO`), reads each run's JSON (`-j -`) and prints two
//! markdown tables of medians: lagom against os (wakeup and request p50/p99, average RPS,
//! ratios), and the feature A/B with the lagom counters that explain it, per 1000 requests.
//!
//! Runs are interleaved (run 1 of every row and configuration, then run 2, …) so that a
//! change in the machine's load spreads over all of them.
//!
//! `--features SPEC` applies a base feature set under every lagom configuration's own (the
//! "lagom" row then shows SPEC alone, and each feature set's row SPEC with its set on top).
//!
//! ```text
//! cargo build --release --example schbench
//! cargo run --release --example schbench_ab -- [-r SECS] [--runs N] [--bin PATH] [--features SPEC]
//! ```

use std::path::PathBuf;
use std::process::Command;

use lagom_examples::usage_error;

const USAGE: &str = "usage: schbench_ab [-r SECS] [--runs N] [--bin PATH] [--features SPEC]

Runs schbench's figure matrix in os and lagom mode and prints medians as markdown tables.
  -r SECS          seconds per run (default 10)
  --runs N         runs per row and configuration (default 3)
  --bin PATH       the schbench binary (default: beside this program, i.e. the one
                   `cargo build --release --example schbench` built)
  --features SPEC  scheduler features applied under every lagom configuration's own,
                   e.g. TTWU_QUEUE_DELAYED (default: none; $LAGOM_FEATURES is not read,
                   since each run names its features)";

/// The rows of the figure.
const ROWS: &[&str] = &["-m 1 -t 2", "-m 2 -t 4", "-m 1 -t 8", "-L -m 2 -t 16 -n 0"];

/// The configurations: a label, the runtime, the feature string.
const CONFIGS: &[(&str, &str, Option<&str>)] = &[
    ("os", "os", None),
    ("lagom", "lagom", Some("")),
    ("NO_DELAY_DEQUEUE", "lagom", Some("NO_DELAY_DEQUEUE")),
    ("TTWU_QUEUE_DELAYED", "lagom", Some("TTWU_QUEUE_DELAYED")),
    ("NO_DELAY_ZERO", "lagom", Some("NO_DELAY_ZERO")),
];

/// The counters shown in the A/B table.
const COUNTERS: &[&str] = &[
    "runnable_in_place",
    "runnable_queued",
    "wakeups_queued",
    "delayed_dequeues",
    "switches_involuntary",
    "idle_sleeps",
];

struct Args {
    secs: u64,
    runs: usize,
    bin: PathBuf,
    /// The base feature set under every lagom configuration's own (`--features`).
    features: String,
}

/// The most runs `--runs` asks for (each runs every row under every configuration).
const MAX_RUNS: usize = 10_000;

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let here = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut a = Args {
        secs: 10,
        runs: 3,
        bin: here.with_file_name("schbench"),
        features: String::new(),
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Short('r') => a.secs = p.value()?.parse()?,
            Long("runs") => {
                a.runs = p.value()?.parse()?;
                if a.runs == 0 || a.runs > MAX_RUNS {
                    return Err(format!("--runs {}: from 1 to {MAX_RUNS}", a.runs).into());
                }
            }
            Long("bin") => a.bin = p.value()?.into(),
            Long("features") => a.features = lagom_examples::features_arg(p.value()?)?,
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if a.secs == 0 || a.runs == 0 {
        return Err("-r and --runs must be at least 1".into());
    }
    Ok(a)
}

/// What one run measured.
#[derive(Clone, Default)]
struct Sample {
    wake50: f64,
    wake99: f64,
    req50: f64,
    req99: f64,
    rps: f64,
    /// Each of [`COUNTERS`] per 1000 requests (lagom only).
    counters: Vec<f64>,
}

fn run_one(a: &Args, row: &str, runtime: &str, features: Option<&str>) -> Sample {
    let mut cmd = Command::new(&a.bin);
    cmd.args(row.split_whitespace()).args([
        "-r",
        &a.secs.to_string(),
        "-j",
        "-",
        "--runtime",
        runtime,
    ]);
    if let Some(f) = features {
        // The base set, then the configuration's own; an empty string applies nothing: the
        // defaults, even with LAGOM_FEATURES set.
        cmd.args(["--features", &combine(&a.features, f)]);
    }
    let out = cmd.output().unwrap_or_else(|e| {
        eprintln!("schbench_ab: cannot run {}: {e}", a.bin.display());
        std::process::exit(1)
    });
    if !out.status.success() {
        eprintln!(
            "schbench_ab: `{cmd:?}` failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        std::process::exit(1);
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        eprintln!("schbench_ab: `{cmd:?}` printed no JSON line ({e})");
        std::process::exit(1)
    });
    let int = |k: &str| v["int"][k].as_f64().unwrap_or(f64::NAN);
    let requests: f64 = v["lagom"]["worker_requests"]
        .as_array()
        .map(|a| a.iter().filter_map(|n| n.as_f64()).sum())
        .unwrap_or(f64::NAN);
    let runtime_s = int("runtime");
    let per_k = |c: &str| v["lagom"]["stats"][c].as_f64().unwrap_or(f64::NAN) * 1000.0 / requests;
    Sample {
        wake50: int("wakeup_latency_pct50.0"),
        wake99: int("wakeup_latency_pct99.0"),
        req50: int("request_latency_pct50.0"),
        req99: int("request_latency_pct99.0"),
        rps: requests / runtime_s,
        counters: COUNTERS.iter().map(|c| per_k(c)).collect(),
    }
}

/// `base` then `own`, as one feature string (`Features::apply` takes the items in order, so
/// `own` wins where the two name the same feature).
fn combine(base: &str, own: &str) -> String {
    match (base.is_empty(), own.is_empty()) {
        (true, _) => own.to_string(),
        (false, true) => base.to_string(),
        (false, false) => format!("{base},{own}"),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The per-field medians of `samples`.
fn medians(samples: &[Sample]) -> Sample {
    let m = |f: fn(&Sample) -> f64| median(samples.iter().map(f).collect());
    Sample {
        wake50: m(|s| s.wake50),
        wake99: m(|s| s.wake99),
        req50: m(|s| s.req50),
        req99: m(|s| s.req99),
        rps: m(|s| s.rps),
        counters: (0..COUNTERS.len())
            .map(|i| median(samples.iter().map(|s| s.counters[i]).collect()))
            .collect(),
    }
}

fn main() {
    let a = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    if !a.bin.exists() {
        eprintln!(
            "schbench_ab: {} does not exist; build it first: \
             cargo build --release --example schbench (or pass --bin)",
            a.bin.display()
        );
        std::process::exit(1);
    }
    // samples[row][config] = one Sample per run.
    let mut samples = vec![vec![Vec::new(); CONFIGS.len()]; ROWS.len()];
    let total = a.runs * ROWS.len() * CONFIGS.len();
    let mut done = 0;
    for _ in 0..a.runs {
        for (r, row) in ROWS.iter().enumerate() {
            for (c, (label, runtime, features)) in CONFIGS.iter().enumerate() {
                done += 1;
                eprintln!("[{done}/{total}] {row} -r {} {label}", a.secs);
                samples[r][c].push(run_one(&a, row, runtime, *features));
            }
        }
    }
    let med: Vec<Vec<Sample>> = samples
        .iter()
        .map(|row| row.iter().map(|s| medians(s)).collect())
        .collect();
    let base = if a.features.is_empty() {
        String::new()
    } else {
        format!(
            "; every lagom configuration on top of --features {}",
            a.features
        )
    };
    println!(
        "lagom vs os: medians of {} runs of {} s each (latencies in µs; ratio = lagom / os{base})\n",
        a.runs, a.secs
    );
    println!(
        "| row | wake p50 os | wake p50 lagom | wake p99 os | wake p99 lagom | p99 ratio \
         | req p50 os | req p50 lagom | req p99 os | req p99 lagom | rps os | rps lagom \
         | rps ratio |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (r, row) in ROWS.iter().enumerate() {
        let (o, l) = (&med[r][0], &med[r][1]);
        println!(
            "| `{row}` | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.0} | {:.0} | {:.0} | {:.0} \
             | {:.1} | {:.1} | {:.2} |",
            o.wake50,
            l.wake50,
            o.wake99,
            l.wake99,
            l.wake99 / o.wake99,
            o.req50,
            l.req50,
            o.req99,
            l.req99,
            o.rps,
            l.rps,
            l.rps / o.rps
        );
    }
    println!(
        "\nlagom feature A/B: medians of {} runs; counters per 1000 requests{base}\n",
        a.runs
    );
    print!("| row | features | wake p50 | wake p99 | req p50 | req p99 | rps |");
    for c in COUNTERS {
        print!(" {c} |");
    }
    println!();
    println!("|---|---|{}", "---:|".repeat(5 + COUNTERS.len()));
    for (r, row) in ROWS.iter().enumerate() {
        for (c, (label, _, _)) in CONFIGS.iter().enumerate().skip(1) {
            let s = &med[r][c];
            print!(
                "| `{row}` | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} |",
                if c == 1 { "defaults" } else { label },
                s.wake50,
                s.wake99,
                s.req50,
                s.req99,
                s.rps
            );
            for v in &s.counters {
                print!(" {v:.1} |");
            }
            println!();
        }
    }
}
