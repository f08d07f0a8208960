//! `topo`: prints the machine as lagom sees it, in the manner of `lstopo-no-graphics`.
//!
//! ```text
//! cargo run --example topo -- [ROOT] [--json] [--time[=RUNS]] [--features SPEC]
//! ```
//!
//! Without ROOT it reads the live system (`Topology::detect`); with ROOT, a recorded sysfs
//! tree (the directory holding `sys/`). The tree is Package / Die / L3 / L2 / Core / PU, each
//! PU with its priority and capacity, followed by the sched-domain levels, the priority
//! sources and the fallbacks used, and the workers a runtime on every allowed CPU would
//! have (worker order, priority, domains over worker indices). `--json` prints instead the summary other tools compare:
//! `{pus, packages, numa_nodes, l3, l2, cores, smt, allowed_cpus, priorities, …}`
//! (`priorities` is `{}` when the machine publishes no priority source).
//! `--time` parses the tree RUNS times (default 50) and prints the parse time on stderr.
//! `--features SPEC` also prints the scheduler features a runtime given SPEC would run with
//! (SPEC applied on the defaults), as `ITMT` decides whether the priorities above are used.

use lagom_examples::{Timings, cpus_json, features_arg, print_json, usage_error};
use lagom_topology::{CpuSet, LevelKind, PrioritySource, Topology};
use serde_json::json;

const USAGE: &str = "usage: topo [ROOT] [--json] [--time[=RUNS]] [--features SPEC]

  ROOT             a recorded sysfs tree (the directory holding sys/); default: this machine
  --json           print the JSON summary instead of the tree
  --time           parse RUNS times (default 50) and print the parse time on stderr
  --features SPEC  print the scheduler features a runtime would use with SPEC applied on
                   the defaults, e.g. NO_ITMT (`features` in the JSON summary)";

struct Args {
    root: Option<String>,
    json: bool,
    time: Option<usize>,
    features: Option<String>,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut args = Args {
        root: None,
        json: false,
        time: None,
        features: None,
    };
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("json") => args.json = true,
            Long("features") => args.features = Some(features_arg(parser.value()?)?),
            Long("time") => {
                args.time = Some(match parser.optional_value() {
                    Some(v) => v.parse()?,
                    None => 50,
                })
            }
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            Value(v) if args.root.is_none() => args.root = Some(v.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(args)
}

fn read(root: Option<&str>) -> Result<Topology, lagom_topology::TopologyError> {
    match root {
        Some(r) => Topology::from_sysfs(r),
        None => Topology::detect(),
    }
}

fn main() {
    lagom_examples::default_sigpipe();
    let args = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    let root = args.root.as_deref();
    let (timings, result) = Timings::measure(args.time.unwrap_or(1), || read(root));
    let topo = result.unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    if args.time.is_some() {
        eprintln!(
            "parsed {} ({} PUs): {timings}",
            topo.root(),
            topo.online_cpus().len()
        );
    }
    // Checked by `features_arg`.
    let features = args
        .features
        .as_deref()
        .map(|f| lagom_policy::Features::parse(f).expect("checked spec"));
    if args.json {
        let mut v = summary(&topo);
        if let (Some(f), serde_json::Value::Object(m)) = (features, &mut v) {
            m.insert("features".into(), json!(f.to_string()));
        }
        print_json(&v);
    } else {
        print_tree(&topo);
        if let Some(f) = features {
            println!("scheduler features: {f}");
        }
    }
}

/// The JSON summary, in the field names of the fixtures' `expected.json`.
fn summary(topo: &Topology) -> serde_json::Value {
    let spans = |level| {
        topo.cache_spans(level)
            .into_iter()
            .map(cpus_json)
            .collect::<Vec<_>>()
    };
    let priorities: serde_json::Map<String, serde_json::Value> =
        if topo.priority_source() == PrioritySource::None {
            serde_json::Map::new()
        } else {
            topo.cpus()
                .iter()
                .map(|c| (c.id.to_string(), json!(c.priority)))
                .collect()
        };
    json!({
        "root": topo.root(),
        "pus": topo.online_cpus().len(),
        "online_cpus": topo.online_cpus().to_string(),
        "packages": topo.packages().len(),
        "numa_nodes": topo.numa_nodes().len(),
        "l3": spans(3),
        "l2": spans(2),
        "cores": topo.cores().len(),
        "smt": topo.smt_width(),
        "allowed_cpus": topo.allowed_cpus().to_string(),
        "priorities": priorities,
        "priority_source": format!("{:?}", topo.priority_source()),
        "capacities": topo.cpus().iter().map(|c| (c.id.to_string(), json!(c.capacity)))
            .collect::<serde_json::Map<_, _>>(),
        "capacity_source": format!("{:?}", topo.capacity_source()),
        "itmt_enabled": topo.itmt_enabled(),
        "levels": topo.levels().iter().map(|l| json!({
            "name": l.kind.name(),
            "spans": l.spans.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Package,
    Die,
    L3,
    L2,
    Core,
}

fn groups(topo: &Topology, kind: Kind) -> Vec<(CpuSet, String)> {
    let mut v: Vec<(CpuSet, String)> = match kind {
        Kind::Package => topo
            .packages()
            .iter()
            .map(|s| (s.clone(), String::new()))
            .collect(),
        // Dies equal to their package add nothing.
        Kind::Die => topo
            .dies()
            .iter()
            .filter(|d| !topo.packages().contains(d))
            .map(|s| (s.clone(), String::new()))
            .collect(),
        Kind::L3 | Kind::L2 => {
            let level = if kind == Kind::L3 { 3 } else { 2 };
            let mut seen: Vec<(CpuSet, String)> = Vec::new();
            for c in topo.caches().iter().filter(|c| c.level == level) {
                if seen.iter().all(|(s, _)| *s != c.span) {
                    let size = c
                        .size
                        .map_or(String::new(), |b| format!(" ({}KB)", b / 1024));
                    seen.push((c.span.clone(), size));
                }
            }
            seen
        }
        Kind::Core => topo
            .cores()
            .iter()
            .map(|s| (s.clone(), String::new()))
            .collect(),
    };
    v.sort_by_key(|(s, _)| s.first());
    v
}

struct Printer<'a> {
    topo: &'a Topology,
    counters: [usize; 6],
}

impl Printer<'_> {
    fn print(&mut self, parent: &CpuSet, kinds: &[Kind], depth: usize) {
        let Some((&kind, rest)) = kinds.split_first() else {
            for cpu in parent {
                self.pu(cpu, depth);
            }
            return;
        };
        let mut covered = CpuSet::new();
        for (set, extra) in groups(self.topo, kind) {
            let mine = &set & parent;
            if mine.is_empty() {
                continue;
            }
            covered.union_with(&mine);
            let name = match kind {
                Kind::Package => "Package",
                Kind::Die => "Die",
                Kind::L3 => "L3",
                Kind::L2 => "L2",
                Kind::Core => "Core",
            };
            let l = &mut self.counters[kind as usize];
            println!("{}{name} L#{l}{extra} cpus {mine}", "  ".repeat(depth));
            *l += 1;
            self.print(&mine, rest, depth + 1);
        }
        let rest_cpus = parent - &covered;
        if !rest_cpus.is_empty() {
            self.print(&rest_cpus, rest, depth);
        }
    }

    fn pu(&mut self, cpu: usize, depth: usize) {
        let l = &mut self.counters[5];
        let c = self.topo.cpu(cpu).expect("online CPU");
        let node = c.numa_node.map_or(String::from("-"), |n| n.to_string());
        let allowed = if self.topo.allowed_cpus().contains(cpu) {
            ""
        } else {
            " (disallowed)"
        };
        let kind = c.core_type.map_or(String::new(), |t| format!(" {t:?}"));
        println!(
            "{}PU L#{l} (P#{cpu}) node {node} prio {} cap {}{kind}{allowed}",
            "  ".repeat(depth),
            c.priority,
            c.capacity
        );
        *l += 1;
    }
}

fn print_tree(topo: &Topology) {
    println!(
        "Machine {} ({} PUs online: {}; allowed: {}; possible: {})",
        topo.root(),
        topo.online_cpus().len(),
        topo.online_cpus(),
        topo.allowed_cpus(),
        topo.possible_cpus()
    );
    for node in topo.numa_nodes() {
        let implicit = if topo.numa_implicit() {
            " (implicit)"
        } else {
            ""
        };
        println!("  NUMANode P#{} cpus {}{implicit}", node.id, node.cpus);
    }
    let mut printer = Printer {
        topo,
        counters: [0; 6],
    };
    printer.print(
        topo.online_cpus(),
        &[Kind::Package, Kind::Die, Kind::L3, Kind::L2, Kind::Core],
        1,
    );

    println!("Sched domains (bottom-up):");
    for level in topo.levels() {
        let f = level.flags;
        let mut flags = Vec::new();
        if f.share_cpucapacity {
            flags.push("SHARE_CPUCAPACITY".to_string());
        }
        if f.share_llc {
            flags.push("SHARE_LLC".to_string());
        }
        if f.share_pkg {
            flags.push("SHARE_PKG".to_string());
        }
        if f.asym_cpucapacity {
            flags.push("ASYM_CPUCAPACITY".to_string());
        }
        if level.kind == LevelKind::Numa {
            flags.push(match f.numa_distance {
                Some(d) => format!("distance<={d}"),
                None => "distance unknown".to_string(),
            });
        }
        let shown: Vec<String> = level.spans.iter().take(8).map(|s| s.to_string()).collect();
        let more = if level.spans.len() > 8 { " …" } else { "" };
        println!(
            "  {:<4} [{}] {} spans: {}{more}",
            level.kind.name(),
            flags.join(","),
            level.spans.len(),
            shown.join(" | ")
        );
    }
    if let Some(first) = topo.allowed_cpus().first() {
        let walk: Vec<String> = topo
            .domains(first)
            .map(|d| format!("{} {}", d.level.kind.name(), d.span))
            .collect();
        println!("  CPU {first}: {}", walk.join(" -> "));
    }
    let itmt = match topo.itmt_enabled() {
        Some(true) => "enabled",
        Some(false) => "disabled",
        None => "unknown",
    };
    println!(
        "Priorities: {:?} ({}); capacities: {:?}; ITMT {itmt}",
        topo.priority_source(),
        if topo.has_preferred_cpus() {
            "preferred CPUs exist"
        } else {
            "no preference"
        },
        topo.capacity_source()
    );
    for f in topo.fallbacks() {
        println!("Fallback: {} missing, used {}", f.missing, f.used);
    }
    // The workers a runtime on every allowed CPU would have: their order (SMT siblings and
    // LLC members adjacent) and the domains over worker indices that placement and
    // balancing use (`lagom_topology::layout`, as the runtime builds them).
    let cpus: Vec<usize> = topo.allowed_cpus().iter().collect();
    let lagom_topology::Layout {
        cpus: order, map, ..
    } = lagom_topology::layout(topo, &cpus, &[]);
    println!("Workers (a runtime on every allowed CPU):");
    for (w, cpu) in order.iter().enumerate() {
        let domains: Vec<String> = map
            .levels()
            .iter()
            .enumerate()
            .map(|(l, lv)| {
                let s = map.span(l, w);
                format!("{} {}..{}", lv.name, s.start, s.end)
            })
            .collect();
        println!(
            "  worker {w}: cpu {cpu}, priority {}, {}",
            map.priority(w),
            domains.join(" ")
        );
    }
}
