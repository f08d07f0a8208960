//! A task's panic message names the task, as std's names the thread, at the location of the
//! user's code, with `RUST_BACKTRACE` honoured; a panic hook the user installed before the
//! runtime keeps every panic, and one installed after that chains gets the task's report.
//!
//! Each scenario runs in a child process (the hook is process-wide and installed once), which
//! prints `LOCATION=<file:line:col>` of the panic it raises before raising it.

mod child_util;

use lagom::{Runtime, task};

const ENV: &str = "LAGOM_PANIC_CHILD";

fn runtime() -> Runtime {
    Runtime::builder()
        .worker_cpus([first_cpu()])
        .build()
        .unwrap()
}

fn first_cpu() -> usize {
    lagom_topology::process_affinity()
        .unwrap()
        .iter()
        .next()
        .unwrap()
}

/// Spawns a task named `name` (unnamed for `None`) that panics with "boom <n>" at a line it
/// prints first; waits for it and checks that the join saw the panic.
fn panicking_task(rt: &Runtime, name: Option<&str>, n: u32) {
    let b = match name {
        Some(name) => task::Builder::new().name(name),
        None => task::Builder::new(),
    };
    let h = rt
        .spawn_with(b, move || {
            let id = task::current().unwrap().id;
            eprintln!("ID={id}");
            eprintln!("LOCATION={}:{}:{}", file!(), line!() + 1, 13);
            panic!("boom {n}");
        })
        .unwrap();
    assert!(h.join().unwrap_err().is_panic());
}

/// Where `Option::unwrap` on `None` in a task reports itself: at the caller's `unwrap`
/// (`#[track_caller]`), as under std.
fn track_caller_task(rt: &Runtime) {
    let h = rt
        .spawn_with(task::Builder::new().name("unwrapper"), || {
            let none: Option<u8> = std::hint::black_box(None);
            eprintln!("LOCATION={}:{}:{}", file!(), line!() + 1, 18);
            none.unwrap()
        })
        .unwrap();
    assert!(h.join().unwrap_err().is_panic());
}

#[test]
fn child() {
    let Ok(scenario) = std::env::var(ENV) else {
        return;
    };
    match scenario.as_str() {
        "default-hook" => {
            let rt = runtime();
            panicking_task(&rt, Some("cruncher"), 1);
            panicking_task(&rt, None, 2);
            track_caller_task(&rt);
            // Not a task: std's report, naming the thread.
            let t = std::thread::Builder::new()
                .name("plain".into())
                .spawn(|| panic!("boom on a thread"))
                .unwrap();
            assert!(t.join().is_err());
        }
        "backtrace" => {
            let rt = runtime();
            panicking_task(&rt, Some("cruncher"), 3);
        }
        "user-hook-before" => {
            std::panic::set_hook(Box::new(|info| {
                let name = task::current().map(|t| t.name);
                eprintln!("USER HOOK: {info} in {name:?}");
            }));
            let rt = runtime();
            panicking_task(&rt, Some("cruncher"), 4);
        }
        "user-hook-after" => {
            let rt = runtime();
            let prev = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                eprintln!("USER HOOK FIRST");
                prev(info);
            }));
            panicking_task(&rt, Some("cruncher"), 5);
        }
        other => panic!("unknown scenario {other}"),
    }
}

fn run(scenario: &str, backtrace: Option<&str>) -> String {
    let run = child_util::run_child_with(
        ENV,
        scenario,
        &[("RUST_BACKTRACE", backtrace), ("RUST_LIB_BACKTRACE", None)],
    );
    assert_eq!(run.code, Some(0), "child failed; stderr: {}", run.stderr);
    run.stderr
}

/// The `KEY=` lines the child printed, in order.
fn values(stderr: &str, key: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix(key))
        .map(String::from)
        .collect()
}

#[test]
fn a_task_panic_names_the_task_at_the_users_location() {
    let err = run("default-hook", None);
    let ids = values(&err, "ID=");
    let locs = values(&err, "LOCATION=");
    assert_eq!((ids.len(), locs.len()), (2, 3), "{err}");
    let named = format!(
        "task 'cruncher' (id {}) panicked at {}:\nboom 1\n",
        ids[0], locs[0]
    );
    assert!(err.contains(&named), "expected {named:?} in:\n{err}");
    let unnamed = format!(
        "task 'task-{0}' (id {0}) panicked at {1}:\nboom 2\n",
        ids[1], locs[1]
    );
    assert!(err.contains(&unnamed), "expected {unnamed:?} in:\n{err}");
    let caller = "task 'unwrapper' (id ";
    let at = err.find(caller).unwrap_or_else(|| panic!("{err}"));
    assert!(
        err[at..].contains(&format!(
            ") panicked at {}:\ncalled `Option::unwrap()`",
            locs[2]
        )),
        "{err}"
    );
    assert!(
        !err.contains("lagom-worker"),
        "the worker thread named:\n{err}"
    );
    // The note once, as std prints it once per process (std's own report of the plain
    // thread's panic may add its own).
    let note = "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace";
    assert!(err.contains(note), "{err}");
    assert!(err.matches(note).count() <= 2, "{err}");
    assert!(
        err.contains("thread 'plain'") && err.contains("boom on a thread"),
        "{err}"
    );
}

#[test]
fn rust_backtrace_prints_a_backtrace() {
    for (value, full) in [("1", false), ("full", true)] {
        let err = run("backtrace", Some(value));
        let at = err
            .find("task 'cruncher' (id ")
            .unwrap_or_else(|| panic!("{err}"));
        let rest = &err[at..];
        assert!(
            rest.contains("boom 3\nstack backtrace:\n"),
            "{value}: {err}"
        );
        assert!(
            !rest.contains("run with `RUST_BACKTRACE=1`"),
            "{value}: {err}"
        );
        assert_eq!(
            rest.contains("run with `RUST_BACKTRACE=full`"),
            !full,
            "{value}: {err}"
        );
    }
    let err = run("backtrace", Some("0"));
    assert!(!err.contains("stack backtrace"), "{err}");
}

#[test]
fn a_hook_installed_before_the_runtime_gets_every_panic_unchanged() {
    let err = run("user-hook-before", None);
    assert!(err.contains("USER HOOK: "), "{err}");
    assert!(err.contains("boom 4 in Some(\"cruncher\")"), "{err}");
    assert!(
        !err.contains("task 'cruncher'"),
        "lagom reported over the user's hook:\n{err}"
    );
    assert!(!err.contains("thread '"), "{err}");
}

#[test]
fn a_hook_installed_after_that_chains_gets_the_task_report() {
    let err = run("user-hook-after", None);
    let first = err
        .find("USER HOOK FIRST")
        .unwrap_or_else(|| panic!("{err}"));
    let report = err
        .find("task 'cruncher' (id ")
        .unwrap_or_else(|| panic!("{err}"));
    assert!(first < report, "{err}");
    assert!(err[report..].contains("boom 5"), "{err}");
}
