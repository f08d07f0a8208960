//! `pipeline`: a pipeline of tasks over `lagom::sync::mpsc` — a producer, a chain of stages
//! and a consumer, each a task that simply blocks on its channels. The channels are bounded,
//! so a stage that runs ahead blocks on a full channel (back-pressure); a blocked task gives
//! its worker to the others, which is why this runs on one worker as well as on many (with
//! `std::sync::mpsc` in the tasks it would hang).
//!
//! ```text
//! cargo run --release --example pipeline -- [--items N] [--stages N] [--bound N] [--workers N]
//! ```

use std::time::Instant;

use lagom::sync::mpsc;
use lagom::{Runtime, task};
use lagom_examples::usage_error;

const USAGE: &str = "usage: pipeline [--items N] [--stages N] [--bound N] [--workers N]
A producer -> N stages -> a consumer, each a lagom task, over bounded lagom::sync::mpsc
channels; prints the checksum and the time.
  --items N    items sent through (default 100000)
  --stages N   stages between producer and consumer, each adding 1 (default 4)
  --bound N    each channel's capacity, at least 1 (default 16)
  --workers N  worker threads, at least 1 (default: one per allowed CPU)";

/// The most stages `--stages` asks for: each is a task with a channel.
const MAX_STAGES: u64 = 100_000;
/// The most items `--items` sends: the checksum, about items² / 2, stays within 64 bits.
const MAX_ITEMS: u64 = 1_000_000_000;
/// The largest channel capacity `--bound` asks for.
const MAX_BOUND: usize = 1 << 24;

struct Args {
    items: u64,
    stages: u64,
    bound: usize,
    workers: Option<usize>,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        items: 100_000,
        stages: 4,
        bound: 16,
        workers: None,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Long("items") => a.items = p.value()?.parse()?,
            Long("stages") => a.stages = p.value()?.parse()?,
            Long("bound") => a.bound = p.value()?.parse()?,
            Long("workers") => a.workers = Some(p.value()?.parse()?),
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if a.bound == 0 || a.bound > MAX_BOUND {
        return Err(format!(
            "--bound {}: a channel's room, from 1 to {MAX_BOUND} items",
            a.bound
        )
        .into());
    }
    if a.stages > MAX_STAGES || a.items > MAX_ITEMS {
        return Err(format!(
            "--stages {} --items {}: at most {MAX_STAGES} stages (a task each) and {MAX_ITEMS} \
             items (their checksum must fit 64 bits)",
            a.stages, a.items
        )
        .into());
    }
    if a.workers == Some(0) {
        return Err("--workers: at least 1".into());
    }
    Ok(a)
}

fn main() {
    let args = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    let mut builder = Runtime::builder();
    if let Some(n) = args.workers {
        // The first `n` allowed CPUs, one pinned worker each.
        let topo = lagom_topology::Topology::detect().unwrap_or_else(|e| usage_error(e, USAGE));
        let cpus: Vec<usize> = topo.allowed_cpus().iter().take(n).collect();
        if cpus.len() < n {
            let m = cpus.len();
            usage_error(
                format!("--workers: {n}, but this process may use {m} CPUs"),
                USAGE,
            );
        }
        builder = builder.worker_cpus(cpus);
    }
    let rt = builder.build().unwrap_or_else(|e| usage_error(e, USAGE));
    let (items, n_stages, bound) = (args.items, args.stages, args.bound);
    let t0 = Instant::now();
    // ANCHOR: pipeline
    let sum = rt.block_on(move || {
        let (tx, mut rx) = mpsc::sync_channel::<u64>(bound);
        let producer = task::spawn(move || (0..items).for_each(|i| tx.send(i).unwrap()));
        // Each stage receives from the previous channel and sends into a new one.
        let stages: Vec<_> = (0..n_stages)
            .map(|_| {
                let (tx, next) = mpsc::sync_channel::<u64>(bound);
                let input = std::mem::replace(&mut rx, next);
                task::spawn(move || input.iter().for_each(|v| tx.send(v + 1).unwrap()))
            })
            .collect();
        let sum = task::spawn(move || rx.iter().sum::<u64>()).join().unwrap();
        producer.join().unwrap();
        stages.into_iter().for_each(|s| s.join().unwrap());
        sum
    });
    // ANCHOR_END: pipeline
    let expected = args.items * args.items.saturating_sub(1) / 2 + args.items * args.stages;
    assert_eq!(
        sum, expected,
        "every item arrives once, each stage adding 1"
    );
    println!(
        "{} items through {} stages on {} worker(s): checksum {sum}, {:.1} ms",
        args.items,
        args.stages,
        rt.worker_cpus().len(),
        t0.elapsed().as_secs_f64() * 1e3
    );
}
