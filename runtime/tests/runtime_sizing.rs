//! Sizing a runtime: `worker_threads` (the count, its errors, which CPUs a smaller count
//! takes), the default bounded by the cgroup's CPU quota (synthetic quota files given to the
//! builder, a given topology's own files, and a real cgroup with a quota where this machine
//! lets the test make one), and two runtimes on the same CPUs (said once, silenced by
//! `share_cpus`, nothing said once the first is gone).

mod child_util;

use std::path::Path;

use lagom::{Error, Runtime};
use lagom_topology::{CgroupVersion, Topology};

/// The live process's allowed CPUs.
fn allowed() -> Vec<usize> {
    lagom_topology::process_affinity().unwrap().iter().collect()
}

/// A machine of two packages, two cores each, two SMT siblings per core: CPUs 0-7, core
/// `c` = {2c, 2c+1}, package `p` = {4p..4p+3}; plus `extra` files (a cgroup tree).
fn two_packages(extra: &[(&str, &str)]) -> Topology {
    let mut files = vec![(
        "sys/devices/system/cpu/online".to_string(),
        "0-7\n".to_string(),
    )];
    for cpu in 0..8 {
        let d = format!("sys/devices/system/cpu/cpu{cpu}/topology");
        let core = cpu / 2 * 2;
        files.push((
            format!("{d}/core_cpus_list"),
            format!("{core}-{}", core + 1),
        ));
        let pkg = cpu / 4 * 4;
        files.push((
            format!("{d}/package_cpus_list"),
            format!("{pkg}-{}", pkg + 3),
        ));
    }
    files.extend(extra.iter().map(|(p, c)| (p.to_string(), c.to_string())));
    Topology::from_files("2p2c2t", files).unwrap()
}

/// Writes `files` (path below `root` → content) to disk.
fn write_tree(root: &Path, files: &[(&str, &str)]) {
    for (p, c) in files {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, c).unwrap();
    }
}

/// A cgroup v2 tree whose group `/job` has `cpu.max` = `max`.
fn v2_quota(max: &str) -> Vec<(&'static str, String)> {
    vec![
        ("proc/self/cgroup", "0::/job\n".to_string()),
        (
            "sys/fs/cgroup/job/cgroup.controllers",
            "cpu memory\n".to_string(),
        ),
        ("sys/fs/cgroup/job/cpu.max", format!("{max}\n")),
    ]
}

#[test]
fn worker_threads_sets_the_count() {
    let cpus = allowed();
    let rt = Runtime::builder().worker_threads(1).build().unwrap();
    assert_eq!(rt.worker_cpus().len(), 1);
    drop(rt);
    let rt = Runtime::builder()
        .worker_threads(cpus.len())
        .share_cpus(true)
        .build()
        .unwrap();
    let mut got = rt.worker_cpus();
    got.sort_unstable();
    assert_eq!(got, cpus);
}

#[test]
fn zero_or_too_many_workers_is_an_error_that_says_what_to_do() {
    let cpus = allowed();
    let err = Runtime::builder().worker_threads(0).build().unwrap_err();
    assert!(
        matches!(err, Error::WorkerThreads { requested: 0, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("at least one worker"), "{err}");
    let n = cpus.len() + 1;
    let err = Runtime::builder().worker_threads(n).build().unwrap_err();
    let Error::WorkerThreads {
        requested,
        cpus: listed_cpus,
        listed,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!((*requested, listed_cpus, *listed), (n, &cpus, false));
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("worker_threads({n})"))
            && msg.contains(&format!("ask for at most {}", cpus.len()))
            && msg.contains("one worker to each CPU")
            && msg.contains("Builder::topology"),
        "{msg}"
    );
    // Counted against worker_cpus where it is given.
    let err = Runtime::builder()
        .worker_cpus([cpus[0]])
        .worker_threads(2)
        .build()
        .unwrap_err();
    assert!(
        matches!(err, Error::WorkerThreads { listed: true, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("list more CPUs in worker_cpus"),
        "{err}"
    );
}

#[test]
fn fewer_workers_than_cpus_spread_as_the_kernel_spreads_busy_threads() {
    let topo = two_packages(&[]);
    let workers = |n: usize| {
        let rt = Runtime::builder()
            .topology(topo.clone())
            .worker_threads(n)
            .share_cpus(true)
            .build()
            .unwrap();
        let mut c = rt.worker_cpus();
        c.sort_unstable();
        c
    };
    assert_eq!(workers(1), [0]);
    assert_eq!(workers(2), [0, 4], "one per package first");
    assert_eq!(workers(4), [0, 2, 4, 6], "then one per core");
    assert_eq!(workers(6), [0, 1, 2, 4, 5, 6], "SMT siblings last");
    assert_eq!(workers(8), (0..8).collect::<Vec<_>>());
    // From a worker_cpus list: spread within it.
    let rt = Runtime::builder()
        .topology(topo.clone())
        .worker_cpus([0, 1, 2, 3, 4, 5])
        .worker_threads(3)
        .share_cpus(true)
        .build()
        .unwrap();
    let mut c = rt.worker_cpus();
    c.sort_unstable();
    assert_eq!(c, [0, 2, 4]);
}

#[test]
fn the_default_count_honours_a_quota_given_as_files() {
    let dir = tempfile::tempdir().unwrap();
    let files = v2_quota("350000 100000");
    let files: Vec<(&str, &str)> = files.iter().map(|(p, c)| (*p, c.as_str())).collect();
    write_tree(dir.path(), &files);
    let root = dir.path().to_str().unwrap().to_string();
    // 3.5 CPUs' worth: 3 workers on the 8-CPU machine, spread.
    let rt = Runtime::builder()
        .topology(two_packages(&[]))
        .cgroup_files(root.clone())
        .share_cpus(true)
        .build()
        .unwrap();
    let mut c = rt.worker_cpus();
    c.sort_unstable();
    assert_eq!(c, [0, 2, 4]);
    let q = rt.cpu_quota().unwrap();
    assert_eq!(
        (q.cpus, q.quota_us, q.period_us, q.version),
        (3, 350000, 100000, CgroupVersion::V2)
    );
    assert!(q.file.ends_with("sys/fs/cgroup/job/cpu.max"), "{}", q.file);
    drop(rt);
    // An explicit count or CPU list is taken as given.
    for b in [
        Runtime::builder().worker_threads(5),
        Runtime::builder().worker_cpus(0..8),
    ] {
        let rt = b
            .topology(two_packages(&[]))
            .cgroup_files(root.clone())
            .share_cpus(true)
            .build()
            .unwrap();
        assert!(rt.worker_cpus().len() >= 5);
    }
    // Below one CPU: one worker, as std counts it.
    let small = tempfile::tempdir().unwrap();
    let files = v2_quota("5000 100000");
    let files: Vec<(&str, &str)> = files.iter().map(|(p, c)| (*p, c.as_str())).collect();
    write_tree(small.path(), &files);
    let rt = Runtime::builder()
        .topology(two_packages(&[]))
        .cgroup_files(small.path().to_str().unwrap())
        .share_cpus(true)
        .build()
        .unwrap();
    assert_eq!(rt.worker_cpus().len(), 1);
    // On the live machine with no topology given: min(allowed, quota).
    let rt = Runtime::builder()
        .cgroup_files(root.clone())
        .share_cpus(true)
        .build()
        .unwrap();
    assert_eq!(rt.worker_cpus().len(), allowed().len().min(3));
    // A root that is not there is an error naming it.
    let err = Runtime::builder()
        .cgroup_files("/no/such/root")
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::Topology(_)), "{err:?}");
    assert!(err.to_string().contains("/no/such/root"), "{err}");
}

#[test]
fn a_given_topologys_own_cgroup_files_bound_the_default() {
    // cgroup v1, the quota on the parent group: 2 CPUs.
    let topo = two_packages(&[
        ("proc/self/cgroup", "4:cpu,cpuacct:/batch/7\n0::/\n"),
        ("sys/fs/cgroup/cpu,cpuacct/batch/7/cpu.cfs_quota_us", "-1\n"),
        (
            "sys/fs/cgroup/cpu,cpuacct/batch/7/cpu.cfs_period_us",
            "100000\n",
        ),
        (
            "sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_quota_us",
            "200000\n",
        ),
        (
            "sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_period_us",
            "100000\n",
        ),
    ]);
    assert_eq!(topo.cpu_quota().map(|q| q.cpus), Some(2));
    let rt = Runtime::builder()
        .topology(topo)
        .share_cpus(true)
        .build()
        .unwrap();
    let mut c = rt.worker_cpus();
    c.sort_unstable();
    assert_eq!(c, [0, 4]);
    assert_eq!(rt.cpu_quota().unwrap().version, CgroupVersion::V1);
}

const ENV: &str = "LAGOM_SIZING_CHILD";

#[test]
fn child() {
    let Ok(scenario) = std::env::var(ENV) else {
        return;
    };
    let cpu = allowed()[0];
    let one = || Runtime::builder().worker_cpus([cpu]);
    match scenario.as_str() {
        "quota" => {
            let rt = Runtime::builder().build().unwrap();
            let std_count = std::thread::available_parallelism().unwrap().get();
            eprintln!(
                "WORKERS={} STD={std_count} QUOTA={:?}",
                rt.worker_cpus().len(),
                rt.cpu_quota().map(|q| q.cpus)
            );
        }
        "two-runtimes" => {
            let a = one().build().unwrap();
            assert!(a.shared_cpus().is_empty());
            let b = one().build().unwrap();
            assert_eq!(b.shared_cpus(), [cpu]);
            let c = one().build().unwrap();
            assert_eq!(c.shared_cpus(), [cpu]);
            eprintln!("BUILT=3");
            drop((a, b, c));
        }
        "shared-on-purpose" => {
            let a = one().build().unwrap();
            let b = one().share_cpus(true).build().unwrap();
            assert_eq!(b.shared_cpus(), [cpu]);
            eprintln!("BUILT=2");
            drop((a, b));
        }
        "one-after-the-other" => {
            drop(one().build().unwrap());
            let b = one().build().unwrap();
            assert!(b.shared_cpus().is_empty());
            eprintln!("BUILT=2");
        }
        other => panic!("unknown scenario {other}"),
    }
}

#[test]
fn a_second_runtime_on_the_same_cpus_is_reported_once() {
    let warning = "where another runtime of this process already runs workers";
    let run = child_util::run_child(ENV, "two-runtimes");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.stderr.contains("BUILT=3"), "{}", run.stderr);
    assert_eq!(run.stderr.matches(warning).count(), 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("Builder::worker_cpus") && run.stderr.contains("share_cpus(true)"),
        "{}",
        run.stderr
    );
    for quiet in ["shared-on-purpose", "one-after-the-other"] {
        let run = child_util::run_child(ENV, quiet);
        assert_eq!(run.code, Some(0), "{quiet}: {}", run.stderr);
        assert!(run.stderr.contains("BUILT=2"), "{quiet}: {}", run.stderr);
        assert!(!run.stderr.contains(warning), "{quiet}: {}", run.stderr);
    }
}

/// A real cgroup with a CPU quota of 1.5 CPUs, made for the test where this machine lets it
/// (root, a writable cgroup v2 hierarchy with the cpu controller, or v1's cpu controller);
/// the child runs inside it and must size its runtime as `available_parallelism` does. Says
/// why when it cannot, and passes then.
#[test]
fn a_real_cgroup_quota_bounds_the_default() {
    if std::env::var_os("LAGOM_TEST_RUNNER").is_some() {
        eprintln!("skipped: under an emulator the child's cgroup is the emulator's");
        return;
    }
    let name = format!("lagom-sizing-test-{}", std::process::id());
    let v2 = Path::new("/sys/fs/cgroup");
    let v1 = Path::new("/sys/fs/cgroup/cpu");
    let controllers = std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
    let made = if controllers.split_whitespace().any(|c| c == "cpu") {
        let dir = v2.join(&name);
        let ok = std::fs::write(v2.join("cgroup.subtree_control"), "+cpu").is_ok()
            && std::fs::create_dir(&dir).is_ok()
            && std::fs::write(dir.join("cpu.max"), "150000 100000").is_ok();
        ok.then_some(dir)
    } else if v1.join("cpu.cfs_quota_us").exists() {
        let dir = v1.join(&name);
        let ok = std::fs::create_dir(&dir).is_ok()
            && std::fs::write(dir.join("cpu.cfs_period_us"), "100000").is_ok()
            && std::fs::write(dir.join("cpu.cfs_quota_us"), "150000").is_ok();
        ok.then_some(dir)
    } else {
        None
    };
    let Some(dir) = made else {
        eprintln!(
            "skipped: could not make a cgroup with a CPU quota here (not root, or no writable cpu controller)"
        );
        return;
    };
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("echo $$ > \"$1/cgroup.procs\" && shift && exec \"$@\"")
        .arg("sh")
        .arg(&dir)
        .arg(&exe)
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(ENV, "quota")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("WORKERS="))
        .unwrap_or_else(|| panic!("{stderr}"));
    // 1.5 CPUs: one worker, as std counts one.
    assert_eq!(line, "WORKERS=1 STD=1 QUOTA=Some(1)", "{stderr}");
}
