//! Helpers shared by the topology tests: finding and extracting the recorded sysfs fixtures,
//! and writing synthetic sysfs trees.

#![allow(dead_code)]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The fixture directory: `$LAGOM_FIXTURES`, else `shared/fixtures/sysfs` beside the
/// repository's root (found from any of its crates, which sit at different depths, by walking
/// up from the crate's directory). `None` (after printing why) when it is
/// missing outside CI; under `CI=true` a missing directory fails the test.
pub fn fixtures_dir() -> Option<PathBuf> {
    let beside = |a: &Path| a.join("shared/fixtures/sysfs");
    let dir = match std::env::var_os("LAGOM_FIXTURES") {
        Some(d) => PathBuf::from(d),
        None => {
            let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
            // The repository's root is the first ancestor with the workspace's Cargo.lock.
            let root = crate_dir
                .ancestors()
                .find(|a| a.join("Cargo.lock").is_file())
                .unwrap_or(crate_dir);
            beside(root.parent().unwrap_or(root))
        }
    };
    if dir.join("README.md").is_file() {
        return Some(dir);
    }
    let msg = format!(
        "sysfs fixtures not found at {} (set LAGOM_FIXTURES to their directory)",
        dir.display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{msg}; under CI=true the fixtures are required");
    }
    // Written to the stderr handle itself, which the test harness does not capture, so that
    // the skip shows in a plain `cargo test`.
    let _ = writeln!(std::io::stderr(), "SKIPPED: {msg}");
    None
}

/// Extracts `tarball` (bzip2 or gzip; GNU tar detects which) into `into`.
pub fn extract(tarball: &Path, into: &Path) {
    let out = Command::new("tar")
        .arg("-xf")
        .arg(tarball)
        .arg("-C")
        .arg(into)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `tar` to extract {}: {e}", tarball.display()));
    assert!(
        out.status.success(),
        "tar -xf {} failed: {}",
        tarball.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A temporary directory for extracted trees: in `/dev/shm` when it is writable, because
/// creating the ~16,000 small files of a 256-CPU tree costs seconds on some disk
/// filesystems and milliseconds in tmpfs; else in the system's temporary directory.
pub fn scratch_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("lagom-sysfs-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

/// A fixture: its expected answer and the extracted root.
pub struct Fixture {
    pub name: String,
    pub expected: serde_json::Value,
    pub root: PathBuf,
    _tmp: tempfile::TempDir,
}

/// Every fixture in `dir`, extracted into its own temporary directory.
pub fn all_fixtures(dir: &Path) -> Vec<Fixture> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("fixture directory is readable")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            Some(name.strip_suffix(".expected.json")?.to_string())
        })
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no *.expected.json in {}", dir.display());
    names.into_iter().map(|n| fixture(dir, &n)).collect()
}

/// One fixture by name.
pub fn fixture(dir: &Path, name: &str) -> Fixture {
    let json = fs::read_to_string(dir.join(format!("{name}.expected.json"))).unwrap();
    let expected: serde_json::Value = serde_json::from_str(&json).unwrap();
    let tarball = expected["tarball_file"]
        .as_str()
        .map_or_else(|| format!("{name}.tar.bz2"), str::to_string);
    let tmp = scratch_dir();
    extract(&dir.join(tarball), tmp.path());
    let root = tmp.path().join(expected["sysfs_root"].as_str().unwrap());
    Fixture {
        name: name.to_string(),
        expected,
        root,
        _tmp: tmp,
    }
}

/// Writes a synthetic sysfs tree file by file.
pub struct Tree {
    pub tmp: tempfile::TempDir,
}

impl Tree {
    pub fn new() -> Tree {
        Tree { tmp: scratch_dir() }
    }

    pub fn root(&self) -> &str {
        self.tmp.path().to_str().unwrap()
    }

    /// Writes `content` plus a newline to `rel` (relative to the root), creating directories.
    pub fn file(&self, rel: &str, content: &str) -> &Tree {
        let path = self.tmp.path().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, format!("{content}\n")).unwrap();
        self
    }

    /// Creates a relative symlink at `rel` pointing to `target`.
    pub fn symlink(&self, rel: &str, target: &str) -> &Tree {
        let path = self.tmp.path().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, path).unwrap();
        self
    }

    pub fn dir(&self, rel: &str) -> &Tree {
        fs::create_dir_all(self.tmp.path().join(rel)).unwrap();
        self
    }

    /// The files of a modern kernel's `cpuN/topology/`.
    pub fn topology(&self, cpu: usize, core: &str, package: &str, core_id: usize, pkg_id: usize) {
        let d = format!("sys/devices/system/cpu/cpu{cpu}/topology");
        self.file(&format!("{d}/core_cpus_list"), core);
        self.file(&format!("{d}/thread_siblings_list"), core);
        self.file(&format!("{d}/package_cpus_list"), package);
        self.file(&format!("{d}/core_siblings_list"), package);
        self.file(&format!("{d}/core_id"), &core_id.to_string());
        self.file(&format!("{d}/physical_package_id"), &pkg_id.to_string());
    }

    /// One `cpuN/cache/indexK/`.
    pub fn cache(&self, cpu: usize, index: usize, level: u8, kind: &str, shared: &str, size: &str) {
        let d = format!("sys/devices/system/cpu/cpu{cpu}/cache/index{index}");
        self.file(&format!("{d}/level"), &level.to_string());
        self.file(&format!("{d}/type"), kind);
        self.file(&format!("{d}/shared_cpu_list"), shared);
        self.file(&format!("{d}/size"), size);
    }
}
pub mod synthetic;

/// `n` single-thread CPUs in one package sharing one L3.
pub fn one_llc(n: usize) -> lagom_topology::Topology {
    let t = Tree::new();
    let all = format!("0-{}", n - 1);
    t.file("sys/devices/system/cpu/online", &all);
    t.file("sys/devices/system/cpu/possible", &all);
    for cpu in 0..n {
        t.topology(cpu, &cpu.to_string(), &all, cpu, 0);
        t.cache(cpu, 0, 1, "Data", &cpu.to_string(), "32K");
        t.cache(cpu, 1, 3, "Unified", &all, "8192K");
    }
    lagom_topology::Topology::from_sysfs(t.root()).unwrap()
}
