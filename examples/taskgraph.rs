//! `taskgraph`: a build-system-like DAG of blocking closures on a `lagom::TaskGraph` — some
//! nodes compute, some wait on a channel for a reply from a "device" (an OS thread that answers
//! each request after the node's cost, as a disk or a compiler server would), some take a
//! shared `lagom::sync::Mutex` and compute while holding it (a lock on a shared cache). It
//! shows live progress, then the critical path against the makespan and the parallelism
//! achieved.
//!
//! ```text
//! cargo run --release -p lagom-examples --example taskgraph -- [--width W] [--depth D]
//!     [--fan-in F] [--cost-us C] [--blocking PCT] [--seed N] [--file FILE] [--dump]
//!     [--workers N] [--features SPEC] [--json]
//! ```
//!
//! The graph file format (`--file`, and what `--dump` prints): one node a line,
//!
//! ```text
//! # comment; blank lines are skipped
//! NAME COST [DEPENDENCY ...]
//! ```
//!
//! where NAME is any word without spaces (unique), COST is `cpu:DUR` (compute for DUR),
//! `chan:DUR` (send a request to the device and block on the channel until its reply, DUR
//! later) or `lock:DUR` (lock the shared mutex and compute for DUR holding it), DUR a number
//! with `us` or `ms`, and each DEPENDENCY the NAME of a node declared anywhere in the file.
//! An unknown dependency, a repeated name, a malformed line or an edge that closes a cycle is
//! an error naming the file's line (exit status 1).

use std::collections::{BinaryHeap, HashMap};
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use lagom::graph::{GraphError, NodeId};
use lagom::sync::{Mutex, mpsc};
use lagom::{Runtime, TaskGraph, task};
use lagom_examples::usage_error;

const USAGE: &str = "usage: taskgraph [--width W] [--depth D] [--fan-in F] [--cost-us C]
                 [--blocking PCT] [--seed N] [--file FILE] [--dump] [--workers N]
                 [--features SPEC] [--json] [--trace FILE]

Runs a build-system-like DAG on a lagom TaskGraph and reports the critical path against
the makespan and the parallelism achieved. Live progress on a terminal, plain lines
otherwise.
  --width W     nodes per level of the generated graph (default 100)
  --depth D     levels (default 100: 10 000 nodes)
  --fan-in F    dependencies of each node on the level before (default 3)
  --cost-us C   mean cost of a node in µs, uniform in [C/2, 3C/2] (default 50)
  --blocking PCT  share of nodes that block (default 20): half wait on a channel for the
                device's reply, half compute holding a shared lagom::sync::Mutex
  --seed N      the generator's seed (default 1)
  --file FILE   read the graph instead: one node a line, `NAME COST [DEP ...]`, COST
                `cpu:DUR`, `chan:DUR` or `lock:DUR`, DUR like `200us` or `2ms`; `#` comments
  --dump        print the graph in that format and exit
  --workers N   run N workers (Builder::worker_threads: spread over the machine as the
                kernel spreads busy threads; default: one per allowed CPU, within the
                CPU quota)
  --features SPEC  scheduler features on top of the defaults (default: $LAGOM_FEATURES)
  --json        print the summary as one JSON line
  --trace FILE  record the run's trace and save it as Chrome trace JSON to FILE (open it
                in ui.perfetto.dev or speedscope: a slice per node run, named after it)";

/// The most nodes a generated graph may have (`--width` x `--depth`).
const MAX_NODES: usize = 10_000_000;

/// The largest mean cost of a node, in µs (`--cost-us`): ten seconds.
const MAX_COST_US: u64 = 10_000_000;

/// What a node does for its cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Cpu,
    Chan,
    Lock,
}

/// One node of the graph as declared.
#[derive(Debug, Clone)]
struct Spec {
    name: String,
    kind: Kind,
    cost: Duration,
    deps: Vec<usize>,
    /// The file's line (0 for a generated node).
    line: usize,
}

struct Options {
    width: usize,
    depth: usize,
    fan_in: usize,
    cost_us: u64,
    blocking: u64,
    seed: u64,
    file: Option<String>,
    dump: bool,
    workers: Option<usize>,
    features: Option<String>,
    json: bool,
    trace: Option<String>,
}

fn parse_args() -> Options {
    let mut o = Options {
        width: 100,
        depth: 100,
        fan_in: 3,
        cost_us: 50,
        blocking: 20,
        seed: 1,
        file: None,
        dump: false,
        workers: None,
        features: None,
        json: false,
        trace: None,
    };
    let mut parser = lexopt::Parser::from_env();
    let parsed: Result<(), lexopt::Error> = (|| {
        use lexopt::prelude::*;
        while let Some(arg) = parser.next()? {
            match arg {
                Long("width") => o.width = parser.value()?.parse()?,
                Long("depth") => o.depth = parser.value()?.parse()?,
                Long("fan-in") => o.fan_in = parser.value()?.parse()?,
                Long("cost-us") => o.cost_us = parser.value()?.parse()?,
                Long("blocking") => o.blocking = parser.value()?.parse()?,
                Long("seed") => o.seed = parser.value()?.parse()?,
                Long("file") => o.file = Some(parser.value()?.string()?),
                Long("dump") => o.dump = true,
                Long("workers") => o.workers = Some(parser.value()?.parse()?),
                Long("features") => {
                    o.features = Some(lagom_examples::features_arg(parser.value()?)?)
                }
                Long("json") => o.json = true,
                Long("trace") => o.trace = Some(parser.value()?.string()?),
                Short('h') | Long("help") => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                _ => return Err(arg.unexpected()),
            }
        }
        if o.width == 0 || o.depth == 0 || o.workers == Some(0) {
            return Err("--width, --depth and --workers must be at least 1".into());
        }
        if o.width.checked_mul(o.depth).is_none_or(|n| n > MAX_NODES) {
            return Err(format!(
                "--width {} x --depth {} nodes: at most {MAX_NODES} nodes",
                o.width, o.depth
            )
            .into());
        }
        if o.cost_us > MAX_COST_US {
            return Err(format!(
                "--cost-us {}: at most {MAX_COST_US} (a node's mean cost, in µs)",
                o.cost_us
            )
            .into());
        }
        if o.blocking > 100 {
            return Err(
                format!("--blocking {} is a share in percent: 0 to 100", o.blocking).into(),
            );
        }
        Ok(())
    })();
    if let Err(e) = parsed {
        usage_error(e, USAGE);
    }
    o
}

/// The generated graph: `depth` levels of `width` nodes, each depending on `fan_in` distinct
/// nodes of the level before (fewer if the level is narrower).
fn generate(o: &Options) -> Vec<Spec> {
    let mut rng = fastrand::Rng::with_seed(o.seed);
    let mut specs = Vec::with_capacity(o.width * o.depth);
    for level in 0..o.depth {
        for k in 0..o.width {
            let mut deps = Vec::new();
            if level > 0 {
                let base = (level - 1) * o.width;
                while deps.len() < o.fan_in.min(o.width) {
                    let d = base + rng.usize(0..o.width);
                    if !deps.contains(&d) {
                        deps.push(d);
                    }
                }
            }
            let roll = rng.u64(0..200);
            let kind = match roll {
                r if r < o.blocking => Kind::Chan,
                r if r < 2 * o.blocking => Kind::Lock,
                _ => Kind::Cpu,
            };
            let cost = Duration::from_micros(rng.u64(o.cost_us / 2..=o.cost_us * 3 / 2));
            specs.push(Spec {
                name: format!("l{level}n{k}"),
                kind,
                cost,
                deps,
                line: 0,
            });
        }
    }
    specs
}

/// A line of the graph file that cannot be used: what is wrong with it.
fn line_error(file: &str, line: usize, what: impl std::fmt::Display) -> ! {
    eprintln!("error: {file}:{line}: {what}");
    std::process::exit(1)
}

/// `200us`, `2ms`.
fn parse_duration(s: &str) -> Option<Duration> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = num.parse().ok()?;
    match unit {
        "us" => Some(Duration::from_micros(n)),
        "ms" => Some(Duration::from_millis(n)),
        _ => None,
    }
}

/// The graph of the file at `path` (module doc's format); exits 1 naming the line of an error.
fn read_file(path: &str) -> Vec<Spec> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("error: cannot read {path}: {e}");
        std::process::exit(1)
    });
    let mut specs = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut names_of_deps: Vec<Vec<String>> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let mut words = content.split_whitespace();
        let name = words.next().unwrap_or_default().to_string();
        let Some(cost) = words.next() else {
            line_error(
                path,
                line,
                format!(
                    "node `{name}` has no cost: write `NAME COST [DEP ...]`, COST like cpu:200us"
                ),
            )
        };
        let (kind, dur) = cost.split_once(':').unwrap_or((cost, ""));
        let kind = match kind {
            "cpu" => Kind::Cpu,
            "chan" => Kind::Chan,
            "lock" => Kind::Lock,
            _ => line_error(
                path,
                line,
                format!("cost `{cost}` of `{name}` is not cpu:DUR, chan:DUR or lock:DUR"),
            ),
        };
        let Some(cost) = parse_duration(dur) else {
            line_error(
                path,
                line,
                format!(
                    "duration `{dur}` of `{name}` is not a number with `us` or `ms`, such as 200us"
                ),
            )
        };
        if index.insert(name.clone(), specs.len()).is_some() {
            line_error(path, line, format!("node `{name}` is declared twice"));
        }
        names_of_deps.push(words.map(String::from).collect());
        specs.push(Spec {
            name,
            kind,
            cost,
            deps: Vec::new(),
            line,
        });
    }
    for (k, deps) in names_of_deps.into_iter().enumerate() {
        for d in deps {
            match index.get(&d) {
                Some(&j) => specs[k].deps.push(j),
                None => line_error(
                    path,
                    specs[k].line,
                    format!(
                        "`{}` depends on `{d}`, which no line declares",
                        specs[k].name
                    ),
                ),
            }
        }
    }
    specs
}

/// Prints the graph in the file format.
fn dump(specs: &[Spec]) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "# NAME COST [DEPENDENCY ...]");
    for s in specs {
        let kind = match s.kind {
            Kind::Cpu => "cpu",
            Kind::Chan => "chan",
            Kind::Lock => "lock",
        };
        let _ = write!(out, "{} {kind}:{}us", s.name, s.cost.as_micros());
        for &d in &s.deps {
            let _ = write!(out, " {}", specs[d].name);
        }
        let _ = writeln!(out);
    }
}

/// The longest path by cost (each node's cost counted, dependencies first): the makespan no
/// number of workers can beat.
fn critical_path(specs: &[Spec], order: &[usize]) -> Duration {
    let mut finish = vec![Duration::ZERO; specs.len()];
    for &k in order {
        let start = specs[k]
            .deps
            .iter()
            .map(|&d| finish[d])
            .max()
            .unwrap_or_default();
        finish[k] = start + specs[k].cost;
    }
    finish.into_iter().max().unwrap_or_default()
}

/// Rounds of the work loop per µs on this machine: the best of five timed runs (so that a
/// moment of host load does not lower it).
fn calibrate() -> f64 {
    (0..5)
        .map(|_| {
            let t0 = Instant::now();
            std::hint::black_box(work(std::hint::black_box(20_000)));
            20_000.0 / t0.elapsed().as_secs_f64() / 1e6
        })
        .fold(0.0, f64::max)
}

/// `rounds` rounds of a dependent multiply chain (about 20 ns each).
fn work(rounds: u64) -> u64 {
    let mut x = 0x9e37_79b9u64;
    for _ in 0..rounds {
        for _ in 0..16 {
            x = std::hint::black_box(
                x.wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407),
            );
        }
    }
    x
}

/// Computes for about `d` of CPU time (a fixed amount of work, calibrated: on a loaded
/// machine it takes longer, as a real build step would), calling `cond_resched` every ~10 µs
/// of it (preemption is cooperative).
fn compute(d: Duration, per_us: f64) -> u64 {
    let mut left = (d.as_secs_f64() * 1e6 * per_us) as u64;
    let step = (10.0 * per_us).max(1.0) as u64;
    let mut x = 0;
    while left > 0 {
        let n = left.min(step);
        x ^= work(n);
        left -= n;
        task::cond_resched();
    }
    x
}

/// A request to the device: reply on `reply` at `due`.
struct Request {
    due: Instant,
    reply: mpsc::Sender<u64>,
}

impl PartialEq for Request {
    fn eq(&self, o: &Self) -> bool {
        self.due == o.due
    }
}
impl Eq for Request {}
impl PartialOrd for Request {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Request {
    /// Earliest first in a max-heap.
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        o.due.cmp(&self.due)
    }
}

/// The device: an OS thread answering each request when it is due (a disk, a remote
/// compiler); ends when every sender is gone.
fn device(rx: mpsc::Receiver<Request>) {
    let mut pending = BinaryHeap::new();
    loop {
        let now = Instant::now();
        while pending.peek().is_some_and(|r: &Request| r.due <= now) {
            let r = pending.pop().expect("peeked");
            let _ = r.reply.send(1);
        }
        let next = match pending.peek() {
            Some(r) => rx.recv_timeout(r.due.saturating_duration_since(now)),
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match next {
            Ok(r) => pending.push(r),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) if pending.is_empty() => return,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let due = pending.peek().expect("not empty").due;
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            }
        }
    }
}

fn main() {
    lagom_examples::default_sigpipe();
    let o = parse_args();
    let specs = match &o.file {
        Some(f) => read_file(f),
        None => generate(&o),
    };
    if o.dump {
        dump(&specs);
        return;
    }
    let fail = |e: &dyn std::fmt::Display| -> ! {
        eprintln!("error: {e}");
        std::process::exit(1)
    };
    let mut b = Runtime::builder();
    if let Some(f) = &o.features {
        b = b.features(f.as_str());
    }
    if let Some(w) = o.workers {
        b = b.worker_threads(w);
    }
    if o.trace.is_some() {
        b = b.tracing(true);
    }
    let rt = b.build().unwrap_or_else(|e| fail(&e));
    let workers = rt.worker_cpus().len();

    let (dev_tx, dev_rx) = mpsc::channel::<Request>();
    let dev = std::thread::spawn(move || device(dev_rx));
    let lock = Mutex::new(0u64);
    let lock = &lock;
    let per_us = calibrate();

    let mut g = TaskGraph::new();
    let mut ids_so_far = 0usize;
    let ids: Vec<NodeId> = specs
        .iter()
        .map(|s| {
            let (kind, cost) = (s.kind, s.cost);
            let dev_tx = dev_tx.clone();
            let k = ids_so_far;
            ids_so_far += 1;
            g.add_with(task::Builder::new().name(s.name.as_str()), move |inputs| {
                match kind {
                    Kind::Cpu => {
                        std::hint::black_box(compute(cost, per_us));
                    }
                    Kind::Chan => {
                        let (tx, rx) = mpsc::channel();
                        let _ = dev_tx.send(Request {
                            due: Instant::now() + cost,
                            reply: tx,
                        });
                        let _ = rx.recv();
                    }
                    Kind::Lock => {
                        let mut held = lock.lock().unwrap_or_else(|p| p.into_inner());
                        *held += 1;
                        std::hint::black_box(compute(cost, per_us));
                    }
                }
                // A value that depends on every input, the same on every run.
                inputs.iter().fold(k as u64 + 1, |a, &v: &u64| {
                    a.wrapping_mul(0x100_0000_01b3) ^ v
                })
            })
        })
        .collect();
    drop(dev_tx);
    for (k, s) in specs.iter().enumerate() {
        for &d in &s.deps {
            if let Err(e) = g.add_edge(ids[d], ids[k]) {
                match (&o.file, &e) {
                    (Some(f), GraphError::Cycle { .. }) => line_error(f, s.line, e),
                    _ => fail(&e),
                }
            }
        }
    }
    // Dependencies first, for the critical path (the file may declare them in any order).
    let order = topo_order(&specs);
    let critical = critical_path(&specs, &order);
    let total_cost: Duration = specs.iter().map(|s| s.cost).sum();

    let progress = g.progress();
    let tty = std::io::stdout().is_terminal() && !o.json;
    let t0 = Instant::now();
    let result = std::thread::scope(|s| {
        let run = s.spawn(|| g.run(&rt));
        let mut last_line = Instant::now();
        while !run.is_finished() {
            std::thread::sleep(Duration::from_millis(if tty { 100 } else { 20 }));
            let (done, total) = (progress.done(), progress.total());
            let el = t0.elapsed().as_secs_f64();
            let rate = done as f64 / el.max(1e-9);
            let eta = (total - done.min(total)) as f64 / rate.max(1e-9);
            if tty {
                print!("\r{done}/{total} nodes  {rate:.0}/s  ETA {eta:.1} s   ");
                let _ = std::io::stdout().flush();
            } else if !o.json && last_line.elapsed() >= Duration::from_secs(1) {
                last_line = Instant::now();
                println!("progress: {done}/{total} nodes, {rate:.0}/s, ETA {eta:.1} s");
            }
        }
        run.join().expect("the run thread")
    });
    let makespan = t0.elapsed();
    if let Some(path) = &o.trace {
        rt.trace().save(path).unwrap_or_else(|e| fail(&e));
    }
    if tty {
        println!();
    }
    let _ = dev.join();
    let outputs = match result {
        Ok(out) => out,
        Err(e) => fail(&e),
    };
    let checksum = outputs.iter().fold(0u64, |a, (_, &v)| a ^ v);
    // The nodes' cost (compute and waits) that progressed at once, on average.
    let parallelism = total_cost.as_secs_f64() / makespan.as_secs_f64();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let bound = critical.max(total_cost / workers as u32);
    if o.json {
        println!(
            "{}",
            serde_json::json!({
                "nodes": specs.len(),
                "edges": specs.iter().map(|s| s.deps.len()).sum::<usize>(),
                "workers": workers,
                "critical_path_ms": ms(critical),
                "total_cost_ms": ms(total_cost),
                "makespan_ms": ms(makespan),
                "lower_bound_ms": ms(bound),
                "parallelism": parallelism,
                "done": progress.done(),
                "checksum": checksum,
            })
        );
        return;
    }
    println!(
        "{} nodes, {} edges on {workers} workers: makespan {:.1} ms",
        specs.len(),
        specs.iter().map(|s| s.deps.len()).sum::<usize>(),
        ms(makespan)
    );
    println!(
        "critical path {:.1} ms ({:.0}% of the makespan); total cost {:.1} ms; lower bound \
         max(critical path, cost / workers) {:.1} ms: makespan is {:.2}× it",
        ms(critical),
        100.0 * critical.as_secs_f64() / makespan.as_secs_f64(),
        ms(total_cost),
        ms(bound),
        makespan.as_secs_f64() / bound.as_secs_f64().max(1e-9)
    );
    println!(
        "achieved parallelism {parallelism:.2} (total cost over the makespan: waits overlap \
         compute, so it may exceed the {workers} workers)"
    );
}

/// A topological order of `specs` (Kahn's); the graph was already checked acyclic.
fn topo_order(specs: &[Spec]) -> Vec<usize> {
    let mut indeg: Vec<usize> = specs.iter().map(|s| s.deps.len()).collect();
    let mut succs = vec![Vec::new(); specs.len()];
    for (k, s) in specs.iter().enumerate() {
        for &d in &s.deps {
            succs[d].push(k);
        }
    }
    let mut ready: Vec<usize> = (0..specs.len()).filter(|&k| indeg[k] == 0).collect();
    let mut order = Vec::with_capacity(specs.len());
    while let Some(k) = ready.pop() {
        order.push(k);
        for &j in &succs[k] {
            indeg[j] -= 1;
            if indeg[j] == 0 {
                ready.push(j);
            }
        }
    }
    order
}
