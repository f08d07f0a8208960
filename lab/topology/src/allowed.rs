//! The CPUs this process may use: the online CPUs, intersected with the cgroup cpuset and,
//! for the live system, with the affinity mask (`sched_getaffinity`).
//!
//! The cpuset is found as hwloc finds it, so that a recorded tree's own cpuset files stand in
//! for the live process's:
//!
//! 1. the mount: `/sys/fs/cgroup` when it holds `cpuset.cpus.effective` (cgroup v2),
//!    `/sys/fs/cgroup/cpuset` when it holds `cpuset.cpus` (v1), `/dev/cpuset` when it holds
//!    `cpus` (the legacy cpuset filesystem), else the first fitting line of `/proc/mounts`: a
//!    `cgroup2` mount whose `cgroup.controllers` lists `cpuset`, a `cpuset` mount, or a
//!    `cgroup` mount with the `cpuset` option (`noprefix` meaning legacy file names);
//! 2. the process's path in it: `/proc/self/cpuset`, else the `0::` (v2) or `:cpuset:` (v1)
//!    line of `/proc/self/cgroup`;
//! 3. the file: `cpuset.cpus.effective` (v2), `cpuset.effective_cpus` then `cpuset.cpus`
//!    (v1), `cpus` (legacy) in that directory.
//!
//! Anything missing along the way means "no cpuset restriction" and is recorded as a
//! fallback. A cpuset that leaves no online CPU is ignored (recorded too): workers need at
//! least one CPU, and such a file can only be stale.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::cpuset::CpuSet;
use super::source::Sysfs;
use crate::TopologyError;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavour {
    V2,
    V1,
    Legacy,
}

impl Flavour {
    fn files(self) -> &'static [&'static str] {
        match self {
            Flavour::V2 => &["cpuset.cpus.effective"],
            Flavour::V1 => &["cpuset.effective_cpus", "cpuset.cpus"],
            Flavour::Legacy => &["cpus"],
        }
    }
}

/// The cpuset mount point and its flavour.
fn find_mount(fs: &Sysfs) -> Result<Option<(String, Flavour)>, TopologyError> {
    if fs.exists("/sys/fs/cgroup/cpuset.cpus.effective") {
        return Ok(Some((String::from("/sys/fs/cgroup"), Flavour::V2)));
    }
    if fs.exists("/sys/fs/cgroup/cpuset/cpuset.cpus") {
        return Ok(Some((String::from("/sys/fs/cgroup/cpuset"), Flavour::V1)));
    }
    if fs.exists("/dev/cpuset/cpus") {
        return Ok(Some((String::from("/dev/cpuset"), Flavour::Legacy)));
    }
    let Some(mounts) = fs.read("/proc/mounts")? else {
        return Ok(None);
    };
    for line in mounts.lines() {
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        let [_, dir, fstype, options, ..] = fields[..] else {
            continue;
        };
        let flavour = match fstype {
            "cgroup2" => {
                let controllers = fs.read(&format!("{dir}/cgroup.controllers"))?;
                if !controllers.is_some_and(|c| c.split_ascii_whitespace().any(|w| w == "cpuset")) {
                    continue;
                }
                Flavour::V2
            }
            "cpuset" => Flavour::Legacy,
            "cgroup" => {
                let opts: Vec<&str> = options.split(',').collect();
                if !opts.contains(&"cpuset") {
                    continue;
                }
                if opts.contains(&"noprefix") {
                    Flavour::Legacy
                } else {
                    Flavour::V1
                }
            }
            _ => continue,
        };
        return Ok(Some((String::from(dir), flavour)));
    }
    Ok(None)
}

/// The process's cpuset path (starting with `/`).
fn find_path(fs: &Sysfs, flavour: Flavour) -> Result<Option<String>, TopologyError> {
    if let Some(p) = fs.read("/proc/self/cpuset")?
        && p.starts_with('/')
    {
        return Ok(Some(p));
    }
    let Some(cgroup) = fs.read("/proc/self/cgroup")? else {
        return Ok(None);
    };
    for line in cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let fits = match flavour {
            Flavour::V2 => controllers.is_empty(),
            _ => controllers.split(',').any(|c| c == "cpuset"),
        };
        if fits {
            return Ok(Some(String::from(path)));
        }
    }
    Ok(None)
}

/// The cpuset's CPUs, or `None` when there is no readable cpuset.
pub(crate) fn cpuset(fs: &mut Sysfs) -> Result<Option<CpuSet>, TopologyError> {
    let Some((mount, flavour)) = find_mount(fs)? else {
        fs.fall_back("cgroup cpuset mount", "no cpuset restriction");
        return Ok(None);
    };
    let Some(path) = find_path(fs, flavour)? else {
        fs.fall_back(
            "/proc/self/cpuset and /proc/self/cgroup",
            "no cpuset restriction",
        );
        return Ok(None);
    };
    let dir = format!(
        "{}/{}",
        mount.trim_end_matches('/'),
        path.trim_start_matches('/')
    );
    for file in flavour.files() {
        if let Some(set) = fs.read_list(&format!("{}/{file}", dir.trim_end_matches('/')))? {
            return Ok(Some(set));
        }
    }
    fs.fall_back(
        "the cgroup's cpuset.cpus(.effective)",
        "no cpuset restriction",
    );
    Ok(None)
}

/// `online ∩ cpuset ∩ affinity`, ignoring a restriction that would leave nothing.
pub(crate) fn allowed(
    fs: &mut Sysfs,
    online: &CpuSet,
    affinity: Option<&CpuSet>,
) -> Result<CpuSet, TopologyError> {
    let mut allowed = online.clone();
    if let Some(set) = cpuset(fs)? {
        let restricted = &allowed & &set;
        if restricted.is_empty() {
            fs.fall_back("a cpuset holding an online CPU", "the online CPUs");
        } else {
            allowed = restricted;
        }
    }
    if let Some(aff) = affinity {
        let restricted = &allowed & aff;
        if restricted.is_empty() {
            fs.fall_back(
                "an affinity mask holding an allowed CPU",
                "the cpuset's CPUs",
            );
        } else {
            allowed = restricted;
        }
    }
    Ok(allowed)
}
