//! sysfs trees against hostile input: a tree written file by file
//! (`topology_util::Tree`, the writer of the synthetic trees), broken at random — a file's
//! content replaced by garbage, emptied, cut, removed, turned into a directory, a symlink loop
//! or a link out of the tree, a directory of CPUs added — is read by the same reader as the
//! recorded fixtures (`Topology::from_sysfs`, `from_sysfs_with_affinity`), which must return
//! within a bound and without a panic: a topology whose every accessor and the CPU layout
//! work, or an error that is one line. CPU lists themselves (`CpuSet`'s parser) get any text.
//!
//! Shapes that once broke the reader are kept in `tests/corpus/sysfs/`: each file lists
//! edits of `small_machine(4)` (`PATH = CONTENT`, `rm PATH`, `dir PATH`, `link PATH -> TARGET`;
//! `\n` in CONTENT is a newline) and, on its first line, what the read must give
//! (`# expect: ok` or `# expect: error <text the message has>`).

mod topology_util;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use lagom_topology::{CpuSet, Topology, layout};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use topology_util::{Tree, synthetic};

const CASES: u32 = 192;

fn config() -> Config {
    Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(CASES),
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    }
}

/// Runs `f`; past `limit`, prints `what` and aborts the process (a hang must fail).
fn within<T>(limit: Duration, what: &str, f: impl FnOnce() -> T) -> T {
    let (done, wait) = mpsc::channel::<()>();
    let what = what.to_string();
    let watchdog = std::thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(limit) {
            eprintln!("hang: still running after {limit:?} on: {what}");
            std::process::abort();
        }
    });
    let v = f();
    drop(done);
    watchdog.join().expect("the watchdog thread");
    v
}

/// An error must be one non-empty line.
fn one_line(msg: &str, what: &str) -> String {
    assert!(
        !msg.is_empty() && !msg.contains(['\n', '\r']),
        "not one line: {msg:?}\nafter: {what}"
    );
    msg.to_string()
}

/// Reads the tree at `root` every way the runtime does and uses what it gets.
fn read(root: &str, allowed: &CpuSet, what: &str) -> Result<(), String> {
    within(Duration::from_secs(20), what, || {
        let t = Topology::from_sysfs(root).map_err(|e| one_line(&e.to_string(), what))?;
        for c in t.cpus() {
            let _ = t.domains(c.id).count();
            let _ = t.llc(c.id);
        }
        let _ = (t.levels().len(), t.caches().len(), t.fallbacks().len());
        let _ = (t.online_cpus().len(), t.cores().len(), t.smt_width());
        let ids: Vec<usize> = t.cpus().iter().map(|c| c.id).collect();
        let _ = layout(&t, &ids, &[]);
        match Topology::from_sysfs_with_affinity(root, allowed) {
            Ok(a) => {
                let ids: Vec<usize> = a.allowed_cpus().iter().collect();
                let _ = layout(&a, &ids, &[]);
            }
            Err(e) => {
                one_line(&e.to_string(), what);
            }
        }
        Ok(())
    })
}

/// Every file (and link) of the tree, relative to its root, sorted.
fn files(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let ft = e.file_type().expect("a file type");
            if ft.is_dir() {
                walk(&p, root, out);
            } else {
                out.push(p.strip_prefix(root).expect("under the root").to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// Hostile contents for a sysfs file.
fn content() -> impl Strategy<Value = String> {
    let fixed = prop::sample::select(vec![
        "",
        " ",
        "\n",
        "0",
        "-1",
        "1-0",
        "0-",
        "-",
        ",",
        ",,",
        "0,,1",
        "0-3,",
        "0-4294967295",
        "4294967295",
        "18446744073709551615",
        "99999999999999999999999",
        "0-8191",
        "8192",
        "0-99999",
        "ffffffff",
        "ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff",
        "0000000g",
        "1,",
        "00000000,00000000",
        "x",
        "32K",
        "32",
        "K",
        "999999999999K",
        "18446744073709551615K",
        "-32K",
        "Data",
        "Unified",
        "Instruction",
        "Other",
        "enabled",
        "disabled",
        "10 20",
        "10 20 30 40",
        "255",
        "0x10",
        "1e3",
        "0-3\n4-5",
        "\u{0}",
        "é",
        "0-3\r",
        "0 - 3",
        "3-3",
        "0-0,0-0",
    ])
    .prop_map(String::from);
    prop_oneof![
        6 => fixed,
        2 => "[0-9,\\-a-fK x]{0,24}",
        1 => any::<String>(),
        1 => (any::<u32>(), any::<u32>()).prop_map(|(a, b)| format!("{a}-{b}")),
    ]
}

/// One edit of a tree.
#[derive(Debug, Clone)]
enum Edit {
    /// Replace the content of the `n`th file.
    Write(prop::sample::Index, String),
    /// Remove the `n`th file.
    Remove(prop::sample::Index),
    /// Replace the `n`th file with a directory.
    Dir(prop::sample::Index),
    /// Replace the `n`th file with a link to itself (a loop), or out of the tree.
    Link(prop::sample::Index, bool),
    /// Add `cpu<N>/topology` files for a CPU number of our choosing.
    AddCpu(u32, String),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        8 => (any::<prop::sample::Index>(), content()).prop_map(|(i, c)| Edit::Write(i, c)),
        2 => any::<prop::sample::Index>().prop_map(Edit::Remove),
        1 => any::<prop::sample::Index>().prop_map(Edit::Dir),
        1 => (any::<prop::sample::Index>(), any::<bool>()).prop_map(|(i, b)| Edit::Link(i, b)),
        1 => (prop_oneof![0..16u32, Just(8191u32), Just(8192u32), any::<u32>()], content())
            .prop_map(|(n, c)| Edit::AddCpu(n, c)),
    ]
}

/// Applies `e` to `tree`; returns what it did, for the report.
fn apply(tree: &Tree, e: &Edit) -> String {
    let root = tree.tmp.path();
    let all = files(root);
    let pick = |i: &prop::sample::Index| (!all.is_empty()).then(|| all[i.index(all.len())].clone());
    let put = |rel: &Path, f: &dyn Fn(&Path)| {
        let p = root.join(rel);
        let _ = std::fs::remove_file(&p);
        let _ = std::fs::remove_dir_all(&p);
        f(&p);
    };
    match e {
        Edit::Write(i, c) => {
            let Some(rel) = pick(i) else {
                return String::from("nothing");
            };
            put(&rel, &|p| std::fs::write(p, c).expect("write"));
            format!("{} = {c:?}", rel.display())
        }
        Edit::Remove(i) => {
            let Some(rel) = pick(i) else {
                return String::from("nothing");
            };
            put(&rel, &|_| {});
            format!("rm {}", rel.display())
        }
        Edit::Dir(i) => {
            let Some(rel) = pick(i) else {
                return String::from("nothing");
            };
            put(&rel, &|p| std::fs::create_dir(p).expect("mkdir"));
            format!("dir {}", rel.display())
        }
        Edit::Link(i, out) => {
            let Some(rel) = pick(i) else {
                return String::from("nothing");
            };
            let target = if *out {
                PathBuf::from("/proc/self/cwd")
            } else {
                root.join(&rel)
            };
            put(&rel, &|p| {
                std::os::unix::fs::symlink(&target, p).expect("symlink")
            });
            format!("link {} -> {}", rel.display(), target.display())
        }
        Edit::AddCpu(n, c) => {
            // Best effort: an earlier edit may have made a file of a directory on the way.
            let d = root.join(format!("sys/devices/system/cpu/cpu{n}/topology"));
            let _ = std::fs::create_dir_all(&d);
            for (f, text) in [
                ("core_cpus_list", c.as_str()),
                ("package_cpus_list", c),
                ("physical_package_id", "0"),
            ] {
                let _ = std::fs::remove_dir_all(d.join(f));
                let _ = std::fs::write(d.join(f), text);
            }
            format!("add cpu{n} with lists {c:?}")
        }
    }
}

/// The base trees: the synthetic machines of `topology_util::synthetic`.
fn base(which: u8) -> Tree {
    match which % 5 {
        0 => synthetic::small_machine(1),
        1 => synthetic::small_machine(4),
        2 => synthetic::ryzen_7950x(),
        3 => synthetic::container("/lagom.slice", "1-3,5"),
        _ => synthetic::intel_hybrid(),
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn broken_trees_fail_cleanly(
        which in any::<u8>(),
        edits in prop::collection::vec(edit(), 1..6),
        allowed in prop_oneof![Just(String::from("0-63")), "[0-9]{1,2}(-[0-9]{1,2})?"],
    ) {
        let tree = base(which);
        let done: Vec<String> = edits.iter().map(|e| apply(&tree, e)).collect();
        let what = format!("base {}, edits {done:?}", which % 5);
        let allowed: CpuSet = allowed.parse().unwrap_or_else(|_| "0".parse().unwrap());
        let _ = read(tree.root(), &allowed, &what);
    }

    #[test]
    fn cpu_lists_parse_or_fail_cleanly(text in prop_oneof![
        any::<String>(),
        "[0-9,\\- ]{0,30}",
        (any::<u32>(), any::<u32>()).prop_map(|(a, b)| format!("{a}-{b}")),
    ]) {
        let got = within(Duration::from_secs(10), &text, || text.parse::<CpuSet>());
        match got {
            Ok(set) => {
                // What it prints reads back as the same set.
                let again: CpuSet = set.to_string().parse().expect("its own text parses");
                prop_assert_eq!(again, set);
            }
            Err(e) => {
                one_line(&e.to_string(), &text);
            }
        }
    }
}

/// The corpus of broken trees (module doc).
#[test]
fn corpus_trees_fail_cleanly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/sysfs");
    let mut list: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    list.sort();
    assert!(!list.is_empty(), "the corpus is empty");
    for f in list {
        let text = std::fs::read_to_string(&f).expect("a corpus file");
        let mut lines = text.lines();
        let expect = lines
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{}: the first line says `# expect: ...`", f.display()));
        let tree = synthetic::small_machine(4);
        for l in lines.filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
            let root = tree.tmp.path();
            if let Some(p) = l.strip_prefix("rm ") {
                std::fs::remove_file(root.join(p)).expect("rm");
            } else if let Some(p) = l.strip_prefix("dir ") {
                let _ = std::fs::remove_file(root.join(p));
                std::fs::create_dir_all(root.join(p)).expect("mkdir");
            } else if let Some(rest) = l.strip_prefix("link ") {
                let (p, target) = rest.split_once(" -> ").expect("link PATH -> TARGET");
                let _ = std::fs::remove_file(root.join(p));
                let target = target.replace("$ROOT", tree.root());
                std::os::unix::fs::symlink(target, root.join(p)).expect("symlink");
            } else {
                let (p, c) = l.split_once(" = ").expect("PATH = CONTENT");
                let path = root.join(p);
                std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
                std::fs::write(path, c.replace("\\n", "\n")).expect("write");
            }
        }
        let got = read(
            tree.root(),
            &"0-63".parse().unwrap(),
            &f.display().to_string(),
        );
        match (expect.strip_prefix("error "), &got) {
            (None, Ok(())) if expect == "ok" => {}
            (Some(want), Err(msg)) if msg.contains(want) => {}
            _ => panic!("{}: expected {expect}, got {got:?}", f.display()),
        }
    }
}
