//! `build_graph`: a small build as a `TaskGraph` — each source file is parsed by a task of its
//! own, a type check waits for every parse, each module's code generation waits for the
//! check, and a link waits for all of them. Nodes borrow the sources from `main`'s stack and
//! get their predecessors' outputs by reference. `--fail NODE` makes one node panic: the run
//! then reports it and the nodes cancelled because they depend on it, and every other node
//! still runs. `--cycle` tries to add an edge that would close a cycle, which is refused.
//!
//! ```text
//! cargo run --release --example build_graph -- [--fail NODE] [--cycle]
//! ```

use lagom::{Runtime, TaskGraph, task};
use lagom_examples::usage_error;

const USAGE: &str = "usage: build_graph [--fail NODE] [--cycle]
Runs a small build (parse each file -> check -> codegen each module -> link) as a
lagom::TaskGraph and prints what each step produced.
  --fail NODE  make NODE panic (a node's name, e.g. parse:b.rs or check); the others run
  --cycle      also try to add the edge link -> check, which a task graph refuses";

const SOURCES: [(&str, &str); 3] = [
    ("a.rs", "fn a() -> u32 { 1 }"),
    ("b.rs", "fn b() -> u32 { a() + 1 }"),
    ("c.rs", "fn c() -> u32 { b() * 2 }"),
];

fn parse_args() -> Result<(Option<String>, bool), lexopt::Error> {
    use lexopt::prelude::*;
    let (mut fail, mut cycle) = (None, false);
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Long("fail") => fail = Some(p.value()?.string()?),
            Long("cycle") => cycle = true,
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    let names = SOURCES
        .iter()
        .flat_map(|(f, _)| [format!("parse:{f}"), format!("codegen:{f}")]);
    let mut names: Vec<String> = names.chain(["check".into(), "link".into()]).collect();
    if let Some(f) = &fail
        && !names.contains(f)
    {
        names.sort();
        return Err(format!("--fail: no node `{f}`; the nodes are {}", names.join(", ")).into());
    }
    Ok((fail, cycle))
}

fn main() {
    let (fail, cycle) = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    let rt = Runtime::builder()
        .build()
        .unwrap_or_else(|e| usage_error(e, USAGE));
    let sources = SOURCES; // borrowed by the nodes below
    let fail = fail.as_deref();
    // Each node's task options (its name) and the check that makes it fail under --fail; the
    // names are kept by id for the report.
    let mut names = Vec::new();
    let mut node = |name: String| {
        names.push(name.clone());
        let b = task::Builder::new().name(name.clone());
        (b, move || {
            assert_ne!(Some(name.as_str()), fail, "{name} failed (--fail)")
        })
    };
    let mut g = TaskGraph::new();
    let parses: Vec<_> = sources
        .iter()
        .map(|(file, text)| {
            let (b, check_fail) = node(format!("parse:{file}"));
            g.add_with(b, move |_| {
                check_fail();
                format!("{file}: {} tokens", text.split_whitespace().count())
            })
        })
        .collect();
    let (b, check_fail) = node("check".into());
    let check = g.add_with(b, move |parsed| {
        check_fail();
        format!("checked {} files", parsed.len())
    });
    let (b, check_fail) = node("link".into());
    let link = g.add_with(b, move |objects| {
        check_fail();
        format!("linked {} objects", objects.len())
    });
    for (&p, (file, _)) in parses.iter().zip(&sources) {
        g.add_edge(p, check).unwrap();
        let (b, check_fail) = node(format!("codegen:{file}"));
        let codegen = g.add_with(b, move |checked| {
            check_fail();
            format!("{file}.o after {}", checked.iter().next().unwrap())
        });
        g.add_edge(check, codegen).unwrap();
        g.add_edge(codegen, link).unwrap();
    }
    if cycle {
        println!(
            "adding link -> check: {}",
            g.add_edge(link, check).unwrap_err()
        );
    }
    match g.run(&rt) {
        Ok(out) => out
            .iter()
            .for_each(|(id, v)| println!("{:>12}: {v}", names[id.index()])),
        Err(e) => {
            eprintln!("build failed: {e}");
            std::process::exit(1);
        }
    }
}
