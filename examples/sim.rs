//! `sim`: runs a scenario in lagom's deterministic simulator (`lagom-sim`) and prints its
//! report, or one JSON line.
//!
//! ```text
//! cargo run --release -p lagom-examples --example sim -- <SCENARIO|FILE> [--topology ROOT|NAME]
//!     [--features STRING] [--seed N] [--wakeups N] [--duration DUR]
//!     [--preempt cooperative|kernel[:LATENCY]] [--trace FILE] [--json]
//! ```
//!
//! SCENARIO is a built-in scenario (`--list` names them) or a scenario file (format in the
//! book, `docs/src/tools/simulator.md`). The machine is `--topology`, else the scenario's
//! `topology` line: a machine the simulator knows (`ryzen-7950x`, `cpus-N`,
//! `cpus-N-llcs-L`), `live` (this machine), a sysfs root directory, or the name of a
//! recorded tree in the fixtures directory (`$LAGOM_FIXTURES`, else `shared/fixtures/sysfs`
//! beside the repository's root), extracted to a temporary directory for the run.
//!
//! The report is deterministic (same scenario, machine, features and seed: same bytes); the
//! closing "wall" line and the JSON line's `events_per_sec` are this machine's speed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use lagom_examples::usage_error;
use lagom_sim::{BUILTIN, Machine, Options, Preempt, Report, Scenario, Sim, builtin, parse};
use lagom_topology::Topology;

const USAGE: &str =
    "usage: sim <SCENARIO|FILE> [--topology ROOT|NAME] [--features STRING] [--seed N]
           [--wakeups N] [--duration DUR] [--preempt MODE] [--trace FILE] [--json] [--list]

Runs a scenario (built-in name or scenario file) in the deterministic simulator.
  --topology ROOT|NAME  the machine: ryzen-7950x, cpus-N, cpus-N-llcs-L, live, a sysfs
                        root, or a recorded tree's name (default: the scenario's)
  --features STRING     scheduler features, e.g. NO_DELAY_DEQUEUE,TTWU_QUEUE_DELAYED
                        (default: the scenario's, else the defaults)
  --seed N              the seed (default: the scenario's)
  --wakeups N           stop after N wakeups of measured tasks (default: the scenario's)
  --duration DUR        virtual time to simulate, e.g. 500ms (default: the scenario's)
  --preempt MODE        when a busy CPU acts on a wakeup preemption, a remote wakeup or an
                        active balance: `cooperative` (lagom's: at the running task's next
                        scheduling point) or `kernel[:LATENCY]` (the kernel's resched IPI and
                        stopper, within LATENCY, default 2us) (default: the scenario's, else
                        cooperative)
  --trace FILE          write a Chrome trace JSON timeline (ui.perfetto.dev) to FILE
  --json                print one JSON line: scenario, features, preempt, seed, wakeups, stalls,
                        handoff_p50_us, handoff_p99_us, events, events_per_sec
  --list                list the built-in scenarios and machines";

struct Args {
    scenario: String,
    topology: Option<String>,
    features: Option<String>,
    seed: Option<u64>,
    wakeups: Option<u64>,
    duration: Option<String>,
    preempt: Option<String>,
    trace: Option<PathBuf>,
    json: bool,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut scenario = None;
    let mut a = Args {
        scenario: String::new(),
        topology: None,
        features: None,
        seed: None,
        wakeups: None,
        duration: None,
        preempt: None,
        trace: None,
        json: false,
    };
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("topology") => a.topology = Some(parser.value()?.string()?),
            Long("features") => a.features = Some(parser.value()?.string()?),
            Long("seed") => a.seed = Some(parser.value()?.parse()?),
            Long("wakeups") => a.wakeups = Some(parser.value()?.parse()?),
            Long("duration") => a.duration = Some(parser.value()?.string()?),
            Long("preempt") => a.preempt = Some(parser.value()?.string()?),
            Long("trace") => a.trace = Some(parser.value()?.into()),
            Long("json") => a.json = true,
            Long("list") => {
                println!("built-in scenarios: {}", BUILTIN.join(", "));
                println!(
                    "machines: {}, live, a sysfs root, or a recorded tree's name",
                    Machine::NAMES.join(", ")
                );
                std::process::exit(0);
            }
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            Value(v) if scenario.is_none() => scenario = Some(v.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    a.scenario = scenario.ok_or("missing the scenario (a built-in name or a file)")?;
    Ok(a)
}

/// Exits with `message` (status 1: the input is wrong, not the command line).
fn fail(message: impl std::fmt::Display) -> ! {
    eprintln!("sim: {message}");
    std::process::exit(1)
}

fn load_scenario(name: &str) -> Scenario {
    let (text, what) = match builtin(name) {
        Some(t) => (t.to_string(), format!("built-in scenario `{name}`")),
        None => match std::fs::read_to_string(name) {
            Ok(t) => (t, format!("`{name}`")),
            // A name that is no scenario and no file is a bad argument (status 2, with the
            // usage); a file that exists but cannot be read is bad input (status 1).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => usage_error(
                format!(
                    "`{name}` is neither a built-in scenario ({}) nor a file",
                    BUILTIN.join(", ")
                ),
                USAGE,
            ),
            Err(e) => fail(format!(
                "`{name}`: not a built-in scenario, and unreadable: {e}"
            )),
        },
    };
    parse(&text).unwrap_or_else(|e| fail(format!("{what}: {e}")))
}

/// A temporary directory removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fixtures_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("LAGOM_FIXTURES") {
        return PathBuf::from(d);
    }
    // The repository's root is the first ancestor with the workspace's Cargo.lock.
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = crate_dir
        .ancestors()
        .find(|a| a.join("Cargo.lock").is_file())
        .unwrap_or(crate_dir);
    root.parent().unwrap_or(root).join("shared/fixtures/sysfs")
}

/// The machine `name` (module doc); the scratch directory of an extracted recording lives as
/// long as the run needs it.
fn load_machine(name: &str) -> (Machine, Option<Scratch>) {
    if let Some(m) = Machine::named(name) {
        return (m, None);
    }
    let topo = |r: Result<Topology, lagom_topology::TopologyError>| {
        r.unwrap_or_else(|e| fail(format!("topology `{name}`: {e}")))
    };
    let machine = |t: Topology| {
        Machine::new(name, t).unwrap_or_else(|e| fail(format!("topology `{name}`: {e}")))
    };
    if name == "live" {
        return (machine(topo(Topology::detect())), None);
    }
    if Path::new(name).is_dir() {
        return (machine(topo(Topology::from_sysfs(name))), None);
    }
    let dir = fixtures_dir();
    let expected = dir.join(format!("{name}.expected.json"));
    let Ok(json) = std::fs::read_to_string(&expected) else {
        fail(format!(
            "topology `{name}` is not a known machine ({}), `live`, a directory, nor a recorded \
             tree in {} (set LAGOM_FIXTURES to the fixtures directory)",
            Machine::NAMES.join(", "),
            dir.display()
        ));
    };
    let meta: serde_json::Value = serde_json::from_str(&json)
        .unwrap_or_else(|e| fail(format!("{}: {e}", expected.display())));
    let tarball = meta["tarball_file"]
        .as_str()
        .map_or_else(|| format!("{name}.tar.bz2"), str::to_string);
    let root = meta["sysfs_root"].as_str().unwrap_or(name).to_string();
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let scratch = Scratch(base.join(format!("lagom-sim-{}-{name}", std::process::id())));
    std::fs::create_dir_all(&scratch.0)
        .unwrap_or_else(|e| fail(format!("{}: {e}", scratch.0.display())));
    let out = Command::new("tar")
        .arg("-xf")
        .arg(dir.join(&tarball))
        .arg("-C")
        .arg(&scratch.0)
        .output()
        .unwrap_or_else(|e| fail(format!("cannot run `tar`: {e}")));
    if !out.status.success() {
        fail(format!(
            "tar -xf {tarball}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let root = scratch.0.join(root);
    let t = topo(Topology::from_sysfs(
        root.to_str().unwrap_or_else(|| fail("non-UTF-8 path")),
    ));
    (machine(t), Some(scratch))
}

fn main() {
    lagom_examples::default_sigpipe();
    let args = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    let scenario = load_scenario(&args.scenario);
    let topo_name = args
        .topology
        .clone()
        .or_else(|| scenario.topology.clone())
        .unwrap_or_else(|| String::from("live"));
    let (machine, _scratch) = load_machine(&topo_name);
    let mut opts =
        Options::of(&scenario).unwrap_or_else(|e| fail(format!("the scenario's features: {e}")));
    if let Some(f) = &args.features {
        opts.features = lagom_policy::Features::parse(f).unwrap_or_else(|e| usage_error(e, USAGE));
        opts.features_label = if f.is_empty() {
            String::from("default")
        } else {
            f.clone()
        };
    }
    if let Some(s) = args.seed {
        opts.seed = s;
    }
    if let Some(w) = args.wakeups {
        opts.wakeups = Some(w);
    }
    if let Some(d) = &args.duration {
        let probe = format!("duration {d}\ntask x\nend\n");
        opts.duration = parse(&probe)
            .map(|s| s.duration)
            .unwrap_or_else(|e| usage_error(format!("--duration: {}", e.message), USAGE));
    }
    if let Some(p) = &args.preempt {
        opts.preempt =
            Preempt::parse(p).unwrap_or_else(|e| usage_error(format!("--preempt: {e}"), USAGE));
    }
    if args.trace.is_some() {
        opts.trace_capacity = Some(lagom::trace::DEFAULT_TRACE_CAPACITY);
    }
    let mut sim = Sim::new(&scenario, machine, opts)
        .unwrap_or_else(|e| fail(format!("{}: {e}", args.scenario)));
    let start = Instant::now();
    sim.run();
    let wall = start.elapsed().as_secs_f64();
    let report = Report::of(&sim);
    let eps = report.events as f64 / wall.max(1e-9);
    if let Some(path) = &args.trace
        && let Some(trace) = sim.trace()
    {
        trace.save(path).unwrap_or_else(|e| fail(e));
    }
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        writeln!(out, "{}", report.json_line(eps))
    } else {
        write!(out, "{report}").and_then(|_| {
            writeln!(
                out,
                "\nwall {wall:.3} s, {:.2} M events/s ({:.1} ns per event)",
                eps / 1e6,
                1e9 / eps
            )
        })
    };
    if written.is_err() {
        std::process::exit(0);
    }
}
