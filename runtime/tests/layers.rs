//! The layering of lagom's crates, checked from their source.
//!
//! **Between crates** Cargo enforces the order: `lagom-policy` depends on nothing,
//! `lagom-topology` on the policy, `lagom-trace` on nothing, `lagom-sim` on those three, and
//! the runtime (`lagom`) on the policy, the topology and the trace; no lab crate depends on
//! the runtime, so neither driver can name the other.
//!
//! **Inside the runtime** every module of `runtime/src/` belongs to one layer of [`LAYERS`]
//! (`ARCHITECTURE.md` explains each), and a module may name another module of the crate
//! (`use crate::…`, a `crate::…` path in code, `super::` up to the crate root, a root
//! re-export such as `crate::Error`, or a crate macro) only if that module sits in a *lower*
//! layer. Two modules of one layer are peers and name each other not at all, so the picture
//! has no loop by construction. The check fails on a module that [`LAYERS`] does not place, so
//! a new folder cannot slip in unplaced.
//!
//! **Inside every crate** [`CRATES`] lists what its code may not name outside the modules
//! allowed to: the policy, the trace types and the simulator no atomics, no clock and no
//! `libc` (time is an argument, the mechanism the driver's); the topology and the runtime
//! `libc` only in their `sys/`.
//!
//! The check reads the code with its comments removed (doc links that name a higher layer are
//! documentation, not imports) and its strings emptied. `layering_catches_an_upward_import`
//! and `forbidden_names_are_caught` run the same checkers on small made-up crates with one
//! violation each and require it to be reported, so the checks are shown to be able to fail.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The layers, bottom first, with the top-level modules (files or folders of `src/`) in each.
/// Keep in step with `ARCHITECTURE.md`.
const LAYERS: &[(&str, &[&str])] = &[
    ("OS access", &["sys"]),
    ("error types and time", &["error", "join_error", "time"]),
    ("mechanisms", &["locking", "arch"]),
    ("trace recording", &["trace"]),
    ("task data", &["tcb"]),
    ("per-CPU state", &["worker"]),
    ("wakeup protocol", &["wake"]),
    ("scheduling loop", &["sched"]),
    ("user API: tasks", &["task"]),
    (
        "user API: the runtime and blocking primitives",
        &["runtime", "sync"],
    ),
    ("user API: task graphs", &["graph"]),
    ("loom seams", &["model"]),
];

/// The threaded driver's folders, whose edges the closing picture lists.
const DRIVER: &[&str] = &[
    "tcb", "worker", "wake", "sched", "task", "runtime", "sync", "graph", "model",
];

/// What a crate's code may not name: a word (a path segment or identifier prefix), the
/// top-level modules that may name it anyway, and why.
struct Forbidden {
    word: &'static str,
    except_in: &'static [&'static str],
    why: &'static str,
}

/// No atomics, no clock, no OS: the pure crates' rule.
const PURE: &[Forbidden] = &[
    Forbidden {
        word: "atomic",
        except_in: &[],
        why: "it is pure: no atomics (the driver brings the mechanism)",
    },
    Forbidden {
        word: "Atomic",
        except_in: &[],
        why: "it is pure: no atomics (the driver brings the mechanism)",
    },
    Forbidden {
        word: "libc",
        except_in: &[],
        why: "it is pure: no OS calls",
    },
    Forbidden {
        word: "Instant",
        except_in: &[],
        why: "it is pure: no clock reads (time is an argument)",
    },
    Forbidden {
        word: "SystemTime",
        except_in: &[],
        why: "it is pure: no clock reads (time is an argument)",
    },
    Forbidden {
        word: "_rdtsc",
        except_in: &[],
        why: "it is pure: no clock reads (time is an argument)",
    },
];

/// `libc` from `sys/` only.
const LIBC_IN_SYS: &[Forbidden] = &[Forbidden {
    word: "libc",
    except_in: &["sys"],
    why: "`sys/` is the crate's only caller of libc",
}];

/// Each crate of the workspace (its folder, relative to the repository's root) and what its
/// code may not name.
const CRATES: &[(&str, &[Forbidden])] = &[
    ("runtime", LIBC_IN_SYS),
    ("lab/policy", PURE),
    ("lab/topology", LIBC_IN_SYS),
    ("lab/trace", PURE),
    ("lab/sim", PURE),
];

/// One module's reference to another.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    from: String,
    to: String,
    file: String,
    line: usize,
}

/// The source of a crate: path relative to `src/` → text.
type Tree = BTreeMap<String, String>;

fn read_tree(root: &Path) -> Tree {
    fn walk(dir: &Path, root: &Path, out: &mut Tree) {
        let mut entries: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
            .map(|e| e.expect("directory entry").path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, root, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(root).expect("under root");
                let text = fs::read_to_string(&p)
                    .unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
                out.insert(rel.to_string_lossy().replace('\\', "/"), text);
            }
        }
    }
    let mut out = Tree::new();
    walk(root, root, &mut out);
    out
}

/// `text` with `//` and `/* */` comments blanked out (lines kept, so line numbers hold) and
/// string and char literals emptied, so that neither yields a path.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
        } else if c == b'\'' && b.get(i + 1) == Some(&b'\\') {
            // An escaped char literal ('\'', '\\', '\n', '\u{..}'): skip the quote, the
            // backslash and the escaped character, then to the closing quote.
            i += 3;
            while i < b.len() && b[i] != b'\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c == b'\'' && b.get(i + 2) == Some(&b'\'') {
            // A one-byte char literal ('"' included); anything else is a lifetime.
            i += 3;
            out.push_str("' '");
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                } else if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            out.push(c as char);
            i += 1;
        }
    }
    out
}

/// The module path of a file: `tcb/mod.rs` → `[tcb]`, `wake/ttwu.rs` → `[wake, ttwu]`,
/// `lib.rs` → `[]`.
fn module_path(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The first path segments named right after `at` in `code` (an identifier, or the items of a
/// `{…}` group, nested groups included).
fn segments_after(code: &str, at: usize) -> Vec<String> {
    let b = code.as_bytes();
    let mut i = at;
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    if b.get(i) == Some(&b'{') {
        // Top-level items of the group: the identifier that starts each.
        let mut out = Vec::new();
        let mut depth = 0;
        let mut expect_item = true;
        while i < b.len() {
            match b[i] {
                b'{' => {
                    depth += 1;
                    if depth == 1 {
                        expect_item = true;
                    }
                }
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                b',' if depth == 1 => expect_item = true,
                c if depth == 1 && expect_item && is_ident(c) => {
                    let s = i;
                    while i < b.len() && is_ident(b[i]) {
                        i += 1;
                    }
                    out.push(code[s..i].to_string());
                    expect_item = false;
                    continue;
                }
                c if !c.is_ascii_whitespace() && depth == 1 => expect_item = false,
                _ => {}
            }
            i += 1;
        }
        return out;
    }
    let s = i;
    while i < b.len() && is_ident(b[i]) {
        i += 1;
    }
    if i > s {
        vec![code[s..i].to_string()]
    } else {
        Vec::new()
    }
}

/// Every reference from a file to a crate-level name: `(line, name)`.
fn crate_refs(file: &str, code: &str) -> Vec<(usize, String)> {
    let file_depth = module_path(file).len();
    let b = code.as_bytes();
    let line_of = |i: usize| code[..i].bytes().filter(|&c| c == b'\n').count() + 1;
    let mut out = Vec::new();
    // Inline modules (`mod tests { … }`) deepen `super::`: the brace depth at which each open
    // one started.
    let mut braces = 0usize;
    let mut inline_mods: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts_word = i == 0 || !is_ident(b[i - 1]);
        match b[i] {
            b'{' => braces += 1,
            b'}' => {
                braces = braces.saturating_sub(1);
                if inline_mods.last() == Some(&braces) {
                    inline_mods.pop();
                }
            }
            _ => {}
        }
        if starts_word && code[i..].starts_with("mod ") {
            let rest = &code[i + 4..];
            let name_len = rest.bytes().take_while(|&c| is_ident(c)).count();
            if rest[name_len..].trim_start().starts_with('{') {
                inline_mods.push(braces);
            }
        }
        if starts_word && code[i..].starts_with("crate::") {
            for s in segments_after(code, i + "crate::".len()) {
                out.push((line_of(i), s));
            }
            i += "crate::".len();
            continue;
        }
        if starts_word && code[i..].starts_with("super::") {
            // `super::` repeated as often as the module is deep (or more) is the crate root.
            let mut j = i;
            let mut k = 0;
            while code[j..].starts_with("super::") {
                j += "super::".len();
                k += 1;
            }
            if k >= file_depth + inline_mods.len() {
                for s in segments_after(code, j) {
                    out.push((line_of(i), s));
                }
            }
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// What each crate-root name belongs to: the modules declared in `lib.rs`, the names it
/// re-exports (`pub use module::…`), and the crate's macros (by the module defining them).
fn root_names(tree: &Tree) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let lib = code_only(tree.get("lib.rs").expect("src/lib.rs"));
    let mut modules = BTreeSet::new();
    let mut names = BTreeMap::new();
    // One statement at a time (a `pub use` may span lines), attributes dropped.
    for stmt in lib.split(';') {
        let joined: Vec<&str> = stmt
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("#"))
            .collect();
        let joined = joined.join(" ");
        let l = joined.as_str();
        let l = l.strip_prefix("pub ").unwrap_or(l);
        // `mod name { … }` inline in the root is its own test module (which, as the root,
        // is in no layer), not a layered module; its body uses full paths, no `use`.
        if let Some(m) = l.strip_prefix("mod ")
            && !m.contains('{')
        {
            modules.insert(m.trim().to_string());
        }
        if let Some(rest) = l.strip_prefix("use ") {
            let Some((module, items)) = rest.split_once("::") else {
                continue;
            };
            let items = items.trim_start_matches('{').trim_end_matches('}');
            for item in items.split(',') {
                let item = item.trim();
                let name = item
                    .rsplit(" as ")
                    .next()
                    .unwrap_or(item)
                    .rsplit("::")
                    .next()
                    .unwrap_or(item);
                if !name.is_empty() {
                    names.insert(name.trim().to_string(), module.to_string());
                }
            }
        }
    }
    for (file, text) in tree {
        let code = code_only(text);
        let mut rest = code.as_str();
        while let Some(at) = rest.find("macro_rules!") {
            rest = &rest[at + "macro_rules!".len()..];
            if let Some(name) = segments_after(rest, 0).first() {
                let top = module_path(file).first().cloned().unwrap_or_default();
                names.insert(name.clone(), top);
            }
        }
    }
    (modules, names)
}

/// The edges between top-level modules, and the problems: upward or sideways references,
/// unplaced modules, names that resolve to nothing.
fn check(tree: &Tree) -> (Vec<Edge>, Vec<String>) {
    let rank: BTreeMap<&str, usize> = LAYERS
        .iter()
        .enumerate()
        .flat_map(|(r, (_, ms))| ms.iter().map(move |m| (*m, r)))
        .collect();
    let (modules, names) = root_names(tree);
    let mut problems = Vec::new();
    for m in &modules {
        if !rank.contains_key(m.as_str()) {
            problems.push(format!(
                "module `{m}` is in no layer: add it to LAYERS in tests/layers.rs and to ARCHITECTURE.md"
            ));
        }
    }
    let mut edges = Vec::new();
    for (file, text) in tree {
        let Some(from) = module_path(file).first().cloned() else {
            continue;
        };
        let code = code_only(text);
        for (line, name) in crate_refs(file, &code) {
            let to = if modules.contains(&name) {
                name.clone()
            } else if let Some(m) = names.get(&name) {
                m.clone()
            } else {
                problems.push(format!(
                    "{file}:{line}: `crate::{name}` is neither a module of lib.rs nor one of its re-exports"
                ));
                continue;
            };
            if to == from {
                continue;
            }
            let (Some(&rf), Some(&rt)) = (rank.get(from.as_str()), rank.get(to.as_str())) else {
                continue;
            };
            if rt >= rf {
                let how = if rt == rf {
                    "a peer in the same layer"
                } else {
                    "a higher layer"
                };
                problems.push(format!(
                    "{file}:{line}: `{from}` ({}) names `{to}` ({}), {how}",
                    LAYERS[rf].0, LAYERS[rt].0
                ));
            }
            edges.push(Edge {
                from: from.clone(),
                to,
                file: file.clone(),
                line,
            });
        }
    }
    (edges, problems)
}

/// Every place where `tree`'s code (comments and strings excluded) names a forbidden word
/// outside the modules allowed to: a whole identifier that is the word or starts with it
/// (`Atomic` catches `AtomicU64`, `atomic` catches `core::sync::atomic`).
fn forbidden_uses(tree: &Tree, rules: &[Forbidden]) -> Vec<String> {
    let mut problems = Vec::new();
    for (file, text) in tree {
        let top = module_path(file).first().cloned().unwrap_or_default();
        let code = code_only(text);
        let b = code.as_bytes();
        for rule in rules
            .iter()
            .filter(|r| !r.except_in.contains(&top.as_str()))
        {
            let mut from = 0;
            while let Some(at) = code[from..].find(rule.word) {
                let i = from + at;
                from = i + rule.word.len();
                if i > 0 && is_ident(b[i - 1]) {
                    continue;
                }
                let line = code[..i].bytes().filter(|&c| c == b'\n').count() + 1;
                problems.push(format!(
                    "{file}:{line}: names `{}`: {}",
                    rule.word, rule.why
                ));
            }
        }
    }
    problems
}

/// The module-to-module edges with their counts, for the picture.
fn picture(edges: &[Edge], only: &[&str]) -> BTreeMap<(String, String), usize> {
    let mut m = BTreeMap::new();
    for e in edges
        .iter()
        .filter(|e| only.contains(&e.from.as_str()) && only.contains(&e.to.as_str()))
    {
        *m.entry((e.from.clone(), e.to.clone())).or_insert(0) += 1;
    }
    m
}

#[test]
fn every_module_imports_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let tree = read_tree(&src);
    let (edges, problems) = check(&tree);
    println!("references between the driver's folders (from -> to: count):");
    for ((from, to), n) in picture(&edges, DRIVER) {
        println!("  {from} -> {to}: {n}");
    }
    assert!(
        edges.len() > 50,
        "the checker found only {} references: is it reading the source?",
        edges.len()
    );
    assert!(
        problems.is_empty(),
        "layering broken:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn layering_catches_an_upward_import() {
    let mut tree = Tree::new();
    tree.insert(
        "lib.rs".into(),
        "mod sys;\nmod tcb;\nmod worker;\npub use worker::Stats;\n".into(),
    );
    tree.insert("sys/mod.rs".into(), "pub(crate) fn f() {}\n".into());
    tree.insert(
        "worker/mod.rs".into(),
        "use crate::tcb::Task; // fine\npub struct Stats;\n".into(),
    );
    // The task layer naming the per-CPU layer, in a group and through a root re-export.
    tree.insert(
        "tcb/mod.rs".into(),
        "use crate::{sys::f, worker::Shared};\n/// [`crate::worker`] in a comment is no import\nfn g() -> super::Stats { todo!() }\n".into(),
    );
    let (_, problems) = check(&tree);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].contains("tcb/mod.rs:1: `tcb` (task data) names `worker`"),
        "{problems:#?}"
    );
    assert!(problems[1].contains("tcb/mod.rs:3"), "{problems:#?}");
    // A module that no layer places is reported too.
    tree.insert("extra.rs".into(), String::new());
    tree.insert("lib.rs".into(), "mod sys;\nmod extra;\n".into());
    let (_, problems) = check(&tree);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("module `extra` is in no layer")),
        "{problems:#?}"
    );
}

/// No crate names what it may not: the pure crates no atomics, clock or libc; the others
/// libc outside `sys/` never.
#[test]
fn every_crate_keeps_its_forbidden_names_out() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut problems = Vec::new();
    for (dir, rules) in CRATES {
        let tree = read_tree(&root.join(dir).join("src"));
        assert!(
            tree.contains_key("lib.rs"),
            "{dir}/src has no lib.rs: is the checker reading the source?"
        );
        for p in forbidden_uses(&tree, rules) {
            problems.push(format!("{dir}/src/{p}"));
        }
    }
    assert!(
        problems.is_empty(),
        "forbidden names:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn forbidden_names_are_caught() {
    let mut tree = Tree::new();
    tree.insert(
        "lib.rs".into(),
        "mod tree;\n/// An AtomicU64 in a comment is no use.\nfn s() -> &'static str { \"libc\" }\n"
            .into(),
    );
    tree.insert(
        "tree/mod.rs".into(),
        "use core::sync::atomic::Ordering;\nstatic N: AtomicU64 = AtomicU64::new(0);\nfn non_atomic() {}\n"
            .into(),
    );
    let problems = forbidden_uses(&tree, PURE);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(
        problems[0].starts_with("tree/mod.rs:1: names `atomic`"),
        "{problems:#?}"
    );
    assert!(
        problems[1].starts_with("tree/mod.rs:2: names `Atomic`"),
        "{problems:#?}"
    );
    // `libc` from `sys/` is allowed where LIBC_IN_SYS applies, from elsewhere it is not.
    let mut tree = Tree::new();
    tree.insert(
        "sys/fs.rs".into(),
        "fn f() { unsafe { libc::close(0) }; }\n".into(),
    );
    tree.insert(
        "lib.rs".into(),
        "mod sys;\nfn g() { libc::abort() }\n".into(),
    );
    let problems = forbidden_uses(&tree, LIBC_IN_SYS);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].starts_with("lib.rs:2: names `libc`"),
        "{problems:#?}"
    );
}

#[test]
fn comments_and_strings_yield_no_paths() {
    let code = code_only(
        "let s = \"crate::x\"; // crate::y\n/* crate::z */ crate::w::f(); let q = '\"';\nlet e = '\\''; crate::v::g::<'a>();\n",
    );
    assert_eq!(
        crate_refs("a/b.rs", &code),
        vec![(2, "w".to_string()), (3, "v".to_string())]
    );
    assert_eq!(
        segments_after("{ a::b, c as d, e::{f, g} }", 0),
        vec!["a", "c", "e"]
    );
    // `super::super::` from an inline module of `a/b.rs` is `a`, not the crate root; from
    // the file itself it is the root.
    let code = "mod tests { use super::super::X; }\nfn f() { super::super::Y }\n";
    assert_eq!(crate_refs("a/b.rs", code), vec![(2, "Y".to_string())]);
}
