//! [`CpuQuota`]: the CPU bandwidth limit of the process's cgroup, read by the rules of std's
//! `std::thread::available_parallelism`, so that a runtime sized by it gets the number std
//! would report.
//!
//! 1. **The process's cgroup**: `/proc/self/cgroup`, one line `id:controllers:path` per
//!    hierarchy. A line with no controllers is cgroup v2; a line whose controllers include
//!    `cpu` is v1's CPU controller, and wins over a v2 line, since it names its controller
//!    (of several v1 lines the last wins).
//! 2. **The mount**: for v2, `/sys/fs/cgroup` when the group's directory there holds
//!    `cgroup.controllers`, else the first `cgroup2` mount of `/proc/self/mountinfo` whose
//!    group directory does; for v1, `/sys/fs/cgroup/cpu`, then `/sys/fs/cgroup/cpu,cpuacct`,
//!    then the `cgroup` mounts of `/proc/self/mountinfo` with the `cpu` option, the first whose
//!    group directory exists. A mount whose root (mountinfo's fourth field: a bind mount of a
//!    sub-hierarchy, as in a container) is a prefix of the group's path stands for that
//!    prefix, which is taken off the path; one whose root is not is skipped. mountinfo's
//!    octal escapes (`\040` for a space) are decoded. (std takes v2 at `/sys/fs/cgroup` only
//!    and does not decode escapes: lagom finds strictly more, never a different limit.)
//! 3. **The limit**: from the group's directory up to the mount, each level's limit, the
//!    smallest winning (a parent's limit bounds its children): v2's `cpu.max` (`<quota>
//!    <period>`, `max` meaning none), v1's `cpu.cfs_quota_us` over `cpu.cfs_period_us` (`-1`
//!    meaning none); a level's limit is `quota / period` CPUs rounded **down**, as std rounds
//!    it, and a period of 0 or a file that does not parse is no limit.
//!
//! [`CpuQuota::cpus`] is at least 1 (std's `max(1)`): a quota below one CPU still runs one
//! worker. Nothing found along the way (no cgroup file, no mount, no limit) means no quota:
//! `None`, as std then reports the affinity mask alone.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::source::Sysfs;

/// Which cgroup version the limit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CgroupVersion {
    /// cgroup v1's `cpu` controller: `cpu.cfs_quota_us` / `cpu.cfs_period_us`.
    V1,
    /// cgroup v2: `cpu.max`.
    V2,
}

/// The CPU bandwidth limit of the process's cgroup (module doc): how many CPUs' worth of
/// time it may use per period, as `std::thread::available_parallelism` counts it.
///
/// ```
/// use lagom_topology::{CgroupVersion, Topology};
/// let files = [
///     ("proc/self/cgroup", "0::/jobs/build\n"),
///     ("sys/fs/cgroup/jobs/build/cgroup.controllers", "cpu memory\n"),
///     ("sys/fs/cgroup/jobs/build/cpu.max", "250000 100000\n"),
///     ("sys/fs/cgroup/jobs/cpu.max", "max 100000\n"),
/// ];
/// let files = files.map(|(p, c)| (p.to_string(), c.to_string()));
/// let q = lagom_topology::cpu_quota_from_files("job", files).unwrap();
/// assert_eq!((q.cpus, q.version), (2, CgroupVersion::V2), "2.5 CPUs round down, as std's");
/// assert_eq!(q.file, "job/sys/fs/cgroup/jobs/build/cpu.max");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuQuota {
    /// The CPUs it allows: the smallest `quota / period` of the group and its ancestors,
    /// rounded down, at least 1.
    pub cpus: usize,
    /// The quota of the level that set [`cpus`](Self::cpus), in µs per period.
    pub quota_us: u64,
    /// That level's period, in µs.
    pub period_us: u64,
    /// The file it came from (`…/cpu.max`, or `…/cpu.cfs_quota_us` for v1), below the root
    /// it was read from.
    pub file: String,
    /// The cgroup version.
    pub version: CgroupVersion,
}

impl CpuQuota {
    /// The quota as CPUs, unrounded (`quota / period`: 1.5 for `150000 100000`).
    pub fn exact(&self) -> f64 {
        self.quota_us as f64 / self.period_us as f64
    }
}

impl core::fmt::Display for CpuQuota {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} µs per {} µs ({:.2} CPUs, counted as {}) from `{}`",
            self.quota_us,
            self.period_us,
            self.exact(),
            self.cpus,
            self.file
        )
    }
}

/// One `/proc/self/mountinfo` line's fields that matter here.
struct Mount {
    /// The root of the mount within its filesystem (fourth field).
    root: String,
    /// Where it is mounted (fifth field).
    point: String,
    /// The filesystem type (first field after ` - `).
    fstype: String,
    /// The super-block options (third field after ` - `).
    options: String,
}

/// Decodes mountinfo's octal escapes (`\040` space, `\011` tab, `\012` newline, `\134`
/// backslash); anything else is kept as it is.
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            if let Ok(byte) = u8::try_from(v) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn mounts(fs: &Sysfs) -> Vec<Mount> {
    let Ok(Some(text)) = fs.read("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let dash = fields.iter().position(|f| *f == "-")?;
            if dash < 5 || fields.len() < dash + 4 {
                return None;
            }
            Some(Mount {
                root: unescape(fields[3]),
                point: unescape(fields[4]),
                fstype: String::from(fields[dash + 1]),
                options: String::from(fields[dash + 3]),
            })
        })
        .collect()
}

/// The group path relative to `mount`'s root, if the mount holds it.
fn below_root<'a>(mount_root: &str, group: &'a str) -> Option<&'a str> {
    let root = mount_root.trim_matches('/');
    if root.is_empty() {
        return Some(group);
    }
    let rest = group.strip_prefix(root)?;
    // Component-wise: `/a/bc` is not below `/a/b`.
    match rest.as_bytes().first() {
        None => Some(""),
        Some(b'/') => Some(rest.trim_start_matches('/')),
        Some(_) => None,
    }
}

fn join(dir: &str, rel: &str) -> String {
    match rel.is_empty() {
        true => String::from(dir.trim_end_matches('/')),
        false => format!("{}/{}", dir.trim_end_matches('/'), rel),
    }
}

/// The process's cgroup path (without its leading `/`) and version (module doc, step 1).
fn process_group(fs: &Sysfs) -> Option<(String, CgroupVersion)> {
    let Ok(Some(text)) = fs.read("/proc/self/cgroup") else {
        return None;
    };
    let mut found: Option<(String, CgroupVersion)> = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let version = if controllers.is_empty() {
            CgroupVersion::V2
        } else if controllers.split(',').any(|c| c == "cpu") {
            CgroupVersion::V1
        } else {
            continue;
        };
        if version == CgroupVersion::V2 && found.is_some() {
            continue;
        }
        found = Some((String::from(path.trim_start_matches('/')), version));
    }
    found
}

/// The directories to look in, from the group's up to the mount's (module doc, step 3).
fn levels(mount: &str, group: &str) -> Vec<String> {
    let mut out = alloc::vec![join(mount, group)];
    let mut rel = group.trim_end_matches('/');
    while !rel.is_empty() {
        rel = rel.rfind('/').map_or("", |i| &rel[..i]);
        out.push(join(mount, rel));
    }
    out
}

/// A level's limit from `quota` and `period` (µs), if both parse and the period is not 0.
fn limit(quota: Option<String>, period: Option<String>) -> Option<(u64, u64)> {
    let quota: u64 = quota?.trim().parse().ok()?;
    let period: u64 = period?.trim().parse().ok()?;
    (period > 0).then_some((quota, period))
}

/// The smallest limit over `dirs`, as a quota.
fn smallest(fs: &Sysfs, dirs: &[String], version: CgroupVersion) -> Option<CpuQuota> {
    let read = |p: &str| fs.read(p).ok().flatten();
    let mut best: Option<CpuQuota> = None;
    for dir in dirs {
        let (file, lim) = match version {
            CgroupVersion::V2 => {
                let file = format!("{dir}/cpu.max");
                let text = read(&file);
                let lim = text.and_then(|t| {
                    let mut w = t.lines().next()?.split(' ');
                    limit(w.next().map(String::from), w.next().map(String::from))
                });
                (file, lim)
            }
            CgroupVersion::V1 => {
                let file = format!("{dir}/cpu.cfs_quota_us");
                let lim = limit(read(&file), read(&format!("{dir}/cpu.cfs_period_us")));
                (file, lim)
            }
        };
        let Some((quota_us, period_us)) = lim else {
            continue;
        };
        let cpus = usize::try_from(quota_us / period_us).unwrap_or(usize::MAX);
        if best.as_ref().is_none_or(|b| cpus < b.cpus) {
            best = Some(CpuQuota {
                cpus,
                quota_us,
                period_us,
                file: fs.path(&file),
                version,
            });
        }
    }
    best.map(|mut q| {
        q.cpus = q.cpus.max(1);
        q
    })
}

/// The process's CPU quota as the files below `fs`'s root say (module doc); `None` where
/// there is none.
pub(crate) fn cpu_quota(fs: &Sysfs) -> Option<CpuQuota> {
    let (group, version) = process_group(fs)?;
    let all = mounts(fs);
    let (fixed, fstype, option): (&[&str], &str, Option<&str>) = match version {
        CgroupVersion::V2 => (&["/sys/fs/cgroup"], "cgroup2", None),
        CgroupVersion::V1 => (
            &["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"],
            "cgroup",
            Some("cpu"),
        ),
    };
    let mut candidates: Vec<(String, String)> = fixed
        .iter()
        .map(|m| (String::from(*m), group.clone()))
        .collect();
    for m in &all {
        if m.fstype != fstype || option.is_some_and(|o| !m.options.split(',').any(|x| x == o)) {
            continue;
        }
        if let Some(rel) = below_root(&m.root, &group) {
            candidates.push((m.point.clone(), String::from(rel)));
        }
    }
    for (mount, rel) in candidates {
        let dir = join(&mount, &rel);
        let found = match version {
            CgroupVersion::V2 => fs.exists(&format!("{dir}/cgroup.controllers")),
            CgroupVersion::V1 => fs.exists(&dir),
        };
        if found {
            return smallest(fs, &levels(&mount, &rel), version);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> Sysfs {
        Sysfs::in_memory(
            "t",
            files
                .iter()
                .map(|(p, c)| (String::from(*p), String::from(*c))),
        )
    }

    #[test]
    fn v2_takes_the_smallest_level_rounded_down() {
        let fs = tree(&[
            ("proc/self/cgroup", "0::/a/b/c\n"),
            ("sys/fs/cgroup/a/b/c/cgroup.controllers", "cpu\n"),
            ("sys/fs/cgroup/a/b/c/cpu.max", "max 100000\n"),
            ("sys/fs/cgroup/a/b/cpu.max", "350000 100000\n"),
            ("sys/fs/cgroup/a/cpu.max", "50000 10000\n"),
        ]);
        let q = cpu_quota(&fs).unwrap();
        assert_eq!((q.cpus, q.quota_us, q.period_us), (3, 350000, 100000));
        assert_eq!(q.file, "t/sys/fs/cgroup/a/b/cpu.max");
        assert!((q.exact() - 3.5).abs() < 1e-9);
    }

    #[test]
    fn below_one_cpu_counts_one_and_max_is_none() {
        let fs = tree(&[
            ("proc/self/cgroup", "0::/x\n"),
            ("sys/fs/cgroup/x/cgroup.controllers", "cpu\n"),
            ("sys/fs/cgroup/x/cpu.max", "20000 100000\n"),
        ]);
        assert_eq!(cpu_quota(&fs).unwrap().cpus, 1);
        let fs = tree(&[
            ("proc/self/cgroup", "0::/x\n"),
            ("sys/fs/cgroup/x/cgroup.controllers", "cpu\n"),
            ("sys/fs/cgroup/x/cpu.max", "max 100000\n"),
        ]);
        assert_eq!(cpu_quota(&fs), None);
        // A period of 0, or garbage, is no limit.
        let fs = tree(&[
            ("proc/self/cgroup", "0::/x\n"),
            ("sys/fs/cgroup/x/cgroup.controllers", "cpu\n"),
            ("sys/fs/cgroup/x/cpu.max", "100000 0\n"),
            ("sys/fs/cgroup/cpu.max", "lots\n"),
        ]);
        assert_eq!(cpu_quota(&fs), None);
    }

    #[test]
    fn v2_needs_the_group_directory() {
        // No cgroup.controllers where the group should be: not a cgroup2 mount.
        let fs = tree(&[
            ("proc/self/cgroup", "0::/x\n"),
            ("sys/fs/cgroup/x/cpu.max", "100000 100000\n"),
        ]);
        assert_eq!(cpu_quota(&fs), None);
    }

    #[test]
    fn v2_at_another_mount_from_mountinfo() {
        let fs = tree(&[
            ("proc/self/cgroup", "0::/svc\n"),
            (
                "proc/self/mountinfo",
                "24 1 0:21 / /sys rw - sysfs sysfs rw\n\
                 41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
            ),
            ("sys/fs/cgroup/unified/svc/cgroup.controllers", "cpu\n"),
            ("sys/fs/cgroup/unified/svc/cpu.max", "200000 100000\n"),
        ]);
        let q = cpu_quota(&fs).unwrap();
        assert_eq!((q.cpus, q.version), (2, CgroupVersion::V2));
    }

    #[test]
    fn v1_cpu_controller_wins_over_v2_and_walks_up() {
        let fs = tree(&[
            (
                "proc/self/cgroup",
                "12:memory:/m\n4:cpu,cpuacct:/jobs/7\n0::/\n",
            ),
            ("sys/fs/cgroup/cpu,cpuacct/jobs/7/cpu.cfs_quota_us", "-1\n"),
            (
                "sys/fs/cgroup/cpu,cpuacct/jobs/7/cpu.cfs_period_us",
                "100000\n",
            ),
            (
                "sys/fs/cgroup/cpu,cpuacct/jobs/cpu.cfs_quota_us",
                "400000\n",
            ),
            (
                "sys/fs/cgroup/cpu,cpuacct/jobs/cpu.cfs_period_us",
                "100000\n",
            ),
            ("sys/fs/cgroup/cgroup.controllers", "cpu\n"),
            ("sys/fs/cgroup/cpu.max", "100000 100000\n"),
        ]);
        let q = cpu_quota(&fs).unwrap();
        assert_eq!((q.cpus, q.version), (4, CgroupVersion::V1));
        assert_eq!(q.file, "t/sys/fs/cgroup/cpu,cpuacct/jobs/cpu.cfs_quota_us");
    }

    #[test]
    fn v1_bind_mount_from_mountinfo_strips_its_root() {
        // A container: the host's /docker/abc hierarchy bind-mounted at /mnt/cg cpu (with a
        // space, escaped), the process in /docker/abc/inner.
        let fs = tree(&[
            ("proc/self/cgroup", "3:cpu:/docker/abc/inner\n"),
            (
                "proc/self/mountinfo",
                "50 40 0:44 /docker/abc /mnt/cg\\040cpu ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n\
                 51 40 0:45 /other /mnt/x rw - cgroup cgroup rw,cpu\n",
            ),
            ("mnt/cg cpu/inner/cpu.cfs_quota_us", "150000\n"),
            ("mnt/cg cpu/inner/cpu.cfs_period_us", "100000\n"),
            ("mnt/cg cpu/cpu.cfs_quota_us", "-1\n"),
            ("mnt/cg cpu/cpu.cfs_period_us", "100000\n"),
        ]);
        let q = cpu_quota(&fs).unwrap();
        assert_eq!((q.cpus, q.quota_us), (1, 150000));
        assert_eq!(q.file, "t/mnt/cg cpu/inner/cpu.cfs_quota_us");
    }

    #[test]
    fn nothing_to_read_is_no_quota() {
        assert_eq!(cpu_quota(&tree(&[])), None);
        assert_eq!(
            cpu_quota(&tree(&[("proc/self/cgroup", "5:memory:/m\n")])),
            None
        );
    }

    #[test]
    fn helpers() {
        assert_eq!(unescape("a\\040b\\134c\\9"), "a b\\c\\9");
        assert_eq!(below_root("/", "a/b"), Some("a/b"));
        assert_eq!(below_root("/a", "a/b"), Some("b"));
        assert_eq!(below_root("/a/b", "a/b"), Some(""));
        assert_eq!(below_root("/a/b", "a/bc"), None);
        assert_eq!(
            levels("/m", "a/b"),
            ["/m/a/b", "/m/a", "/m"].map(String::from)
        );
        assert_eq!(levels("/m", ""), ["/m"].map(String::from));
    }
}
