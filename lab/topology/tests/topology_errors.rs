//! Each way a sysfs tree can be unusable gives a `TopologyError` that names what was wrong where.

mod topology_util;

use lagom_topology::{Topology, TopologyError};
use topology_util::{Tree, synthetic};

#[test]
fn missing_root_names_it_with_the_os_error() {
    let tree = Tree::new();
    let root = format!("{}/does-not-exist", tree.root());
    let err = Topology::from_sysfs(&root).unwrap_err();
    let TopologyError::Unreadable { path, os_error } = &err else {
        panic!("wrong error: {err:?}");
    };
    assert_eq!(path, &root);
    assert!(os_error.contains("os error 2"), "{os_error}");
    assert!(err.to_string().contains(&root));
}

#[test]
fn empty_root_says_what_was_expected() {
    let tree = Tree::new();
    let err = Topology::from_sysfs(tree.root()).unwrap_err();
    assert_eq!(
        err,
        TopologyError::Missing {
            path: tree.root().to_string(),
            expected: "`sys/devices/system/cpu` directory",
        }
    );
    let msg = err.to_string();
    assert!(
        msg.contains(tree.root()) && msg.contains("sys/devices/system/cpu"),
        "{msg}"
    );
}

#[test]
fn no_cpu_directories() {
    let tree = Tree::new();
    tree.file("sys/devices/system/cpu/online", "0-3");
    tree.dir("sys/devices/system/cpu/cpufreq");
    tree.dir("sys/devices/system/cpu/cpuidle");
    let err = Topology::from_sysfs(tree.root()).unwrap_err();
    let TopologyError::Missing { path, expected } = &err else {
        panic!("wrong error: {err:?}");
    };
    assert_eq!(path, &format!("{}/sys/devices/system/cpu", tree.root()));
    assert!(expected.contains("cpuN"));
}

#[test]
fn malformed_cpulist_names_the_file_and_its_content() {
    let tree = synthetic::small_machine(4);
    assert!(
        Topology::from_sysfs(tree.root()).is_ok(),
        "the base tree is valid"
    );
    tree.file("sys/devices/system/cpu/online", "0-3,x");
    let err = Topology::from_sysfs(tree.root()).unwrap_err();
    assert_eq!(
        err,
        TopologyError::MalformedCpuList {
            path: format!("{}/sys/devices/system/cpu/online", tree.root()),
            content: "0-3,x".to_string(),
        }
    );
    assert!(err.to_string().contains("`0-3,x`"));

    // A malformed mask, in a file found through the fallback chain.
    let tree = synthetic::small_machine(2);
    let topo = "sys/devices/system/cpu/cpu1/topology";
    std::fs::remove_file(tree.tmp.path().join(topo).join("core_cpus_list")).unwrap();
    std::fs::remove_file(tree.tmp.path().join(topo).join("thread_siblings_list")).unwrap();
    tree.file(&format!("{topo}/core_cpus"), "0000000g");
    let err = Topology::from_sysfs(tree.root()).unwrap_err();
    assert_eq!(
        err,
        TopologyError::MalformedCpuList {
            path: format!("{}/{topo}/core_cpus", tree.root()),
            content: "0000000g".to_string(),
        }
    );
}

#[test]
fn cache_naming_nonexistent_cpus_names_the_file() {
    let tree = synthetic::small_machine(4);
    tree.cache(0, 0, 1, "Data", "0", "32K");
    tree.cache(0, 1, 3, "Unified", "0-63", "8192K");
    let err = Topology::from_sysfs(tree.root()).unwrap_err();
    assert_eq!(
        err,
        TopologyError::CacheSpansUnknownCpus {
            path: format!(
                "{}/sys/devices/system/cpu/cpu0/cache/index1/shared_cpu_list",
                tree.root()
            ),
            unknown: "4-63".to_string(),
        }
    );
    assert!(err.to_string().contains("index1/shared_cpu_list"));
}

/// One empty and one unreadable per-CPU file are read as missing, with a fallback recorded:
/// the topology still reads, and the CPU keeps what its other files say.
#[test]
fn empty_or_unreadable_per_cpu_file_is_a_fallback() {
    let tree = synthetic::small_machine(4);
    let topo = "sys/devices/system/cpu/cpu2/topology";
    tree.file(&format!("{topo}/core_cpus_list"), "");
    // A directory where a file should be: `read` fails with EISDIR, not ENOENT.
    std::fs::remove_file(tree.tmp.path().join(topo).join("physical_package_id")).unwrap();
    tree.dir(&format!("{topo}/physical_package_id"));
    let t = Topology::from_sysfs(tree.root()).expect("one bad per-CPU file is no refusal");
    assert_eq!(t.cpus().len(), 4);
    assert!(
        t.fallbacks()
            .iter()
            .any(|f| f.missing.contains("unreadable or empty")),
        "{:?}",
        t.fallbacks()
    );
    // A machine-wide file stays an error.
    tree.file("sys/devices/system/cpu/online", "");
    assert!(Topology::from_sysfs(tree.root()).is_err());
}
