//! `Sysfs`: file access below a root directory, with the error and fallback rules every
//! reader of the topology shares.
//!
//! * A missing optional file (`ENOENT`, `ENOTDIR`, or unreadable for lack of permission) is
//!   `None`: old kernels and containers lack many files, and the caller falls back and records
//!   a [`Fallback`].
//! * A per-CPU or per-node file (`cpu/cpuN/…`, `node/nodeN/…`) that exists but cannot be read
//!   or is empty is treated as missing too, and recorded as a [`Fallback`]: a real machine can
//!   have such files (a CPU whose cache attributes the firmware left blank), and recorded
//!   trees do; its reader then falls back as for a missing file, and one bad file is never a
//!   refusal to start.
//! * Any other failure of a file that exists (a machine-wide file: `online`, `possible`, the
//!   cpuset) is an [`TopologyError::Unreadable`] naming the path and the OS error.
//! * File contents are trimmed of trailing newlines, spaces and NUL bytes (some arm64 kernels
//!   end files in `"\n\0"`).
//!
//! The files come from the file system below the root, or from a tree held in memory
//! ([`Sysfs::in_memory`]: path → content), so that a machine can be described in code and
//! read by the same reader, also without `std` (the simulator's built-in machines).

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::cpuset::{CpuSet, trim_sysfs};
use crate::TopologyError;
use crate::sys::fs;

/// Something the topology reader did not find, and what it used instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fallback {
    /// The file or directory that was missing, as a pattern (`cpuN/topology/core_cpus_list`).
    pub missing: &'static str,
    /// What was used in its place.
    pub used: &'static str,
}

/// Where the files of a [`Sysfs`] come from.
enum Backend {
    /// The file system below the root.
    Os,
    /// A tree held in memory: path below the root, without a leading `/` → content.
    Memory(BTreeMap<String, String>),
}

/// Reads files below one root, remembering which fallbacks were used.
pub(crate) struct Sysfs {
    /// The root without a trailing `/` (`""` for the live system); for a tree in memory, its
    /// name, which error messages show in front of the path.
    root: String,
    backend: Backend,
    /// Fallbacks used so far, each once.
    pub(crate) fallbacks: Vec<Fallback>,
    /// For each list of alternative names (keyed by its address), which one the last lookup
    /// found (`None`: none of them).
    hints: Vec<(usize, Option<usize>)>,
    /// Whether a per-CPU file was read as missing because it was unreadable or empty (the
    /// reader's methods take `&self`; recorded as a fallback by [`Sysfs::take_soft`]).
    soft: core::cell::Cell<bool>,
}

impl Sysfs {
    pub(crate) fn new(root: &str) -> Sysfs {
        Sysfs {
            root: String::from(root.trim_end_matches('/')),
            backend: Backend::Os,
            fallbacks: Vec::new(),
            hints: Vec::new(),
            soft: core::cell::Cell::new(false),
        }
    }

    /// A tree held in memory, called `name` in messages: `files` maps paths below the root
    /// (`sys/devices/system/cpu/online`; a leading `/` is ignored) to their contents.
    /// Directories are implied by the paths below them.
    pub(crate) fn in_memory(
        name: &str,
        files: impl IntoIterator<Item = (String, String)>,
    ) -> Sysfs {
        let files = files
            .into_iter()
            .map(|(p, c)| (String::from(p.trim_start_matches('/')), c))
            .collect();
        Sysfs {
            root: String::from(name.trim_end_matches('/')),
            backend: Backend::Memory(files),
            fallbacks: Vec::new(),
            hints: Vec::new(),
            soft: core::cell::Cell::new(false),
        }
    }

    /// Records, once, that some per-CPU file was unreadable or empty and read as missing.
    pub(crate) fn take_soft(&mut self) {
        if self.soft.replace(false) {
            self.fall_back(
                "a per-CPU file (cpuN/…, nodeN/…) that was unreadable or empty",
                "the file treated as missing (its reader's own fallback)",
            );
        }
    }

    /// The root as given (`/` for the live system).
    pub(crate) fn root(&self) -> &str {
        if self.root.is_empty() {
            "/"
        } else {
            &self.root
        }
    }

    /// Fails with the OS error when the root directory cannot be listed.
    pub(crate) fn check_root(&self) -> Result<(), TopologyError> {
        if let Backend::Memory(_) = self.backend {
            return Ok(());
        }
        fs::list_dir(self.root())
            .map(|_| ())
            .map_err(|e| TopologyError::Unreadable {
                path: String::from(self.root()),
                os_error: format!("{e}"),
            })
    }

    /// The full path of `rel`, which starts with `/`.
    pub(crate) fn path(&self, rel: &str) -> String {
        format!("{}{rel}", self.root)
    }

    /// Records that `missing` was absent and `used` stood in for it.
    pub(crate) fn fall_back(&mut self, missing: &'static str, used: &'static str) {
        let f = Fallback { missing, used };
        if !self.fallbacks.contains(&f) {
            self.fallbacks.push(f);
        }
    }

    /// The trimmed content of `rel`, or `None` when the file is missing (or, per CPU or
    /// node, unreadable or empty: module doc).
    pub(crate) fn read(&self, rel: &str) -> Result<Option<String>, TopologyError> {
        let per_cpu = per_cpu(rel);
        let soft = |r: Result<Option<String>, TopologyError>| match r {
            Ok(Some(t)) if t.is_empty() && per_cpu => {
                self.soft.set(true);
                Ok(None)
            }
            Err(_) if per_cpu => {
                self.soft.set(true);
                Ok(None)
            }
            r => r,
        };
        if let Backend::Memory(files) = &self.backend {
            let text = files.get(rel.trim_start_matches('/'));
            return soft(Ok(text.map(|t| String::from(trim_sysfs(t)))));
        }
        let path = self.path(rel);
        soft(match fs::read(&path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => Ok(Some(String::from(trim_sysfs(&text)))),
                Err(e) => Err(TopologyError::Unreadable {
                    path,
                    os_error: format!("not UTF-8 text ({e})"),
                }),
            },
            Err(e) if e.is_not_found() || e.is_denied() => Ok(None),
            Err(e) => Err(TopologyError::Unreadable {
                path,
                os_error: format!("{e}"),
            }),
        })
    }

    /// `rel` parsed as a cpulist, or `None` when the file is missing.
    pub(crate) fn read_list(&self, rel: &str) -> Result<Option<CpuSet>, TopologyError> {
        self.read_set(rel, CpuSet::parse_list)
    }

    /// `rel` parsed as a hex mask, or `None` when the file is missing.
    pub(crate) fn read_mask(&self, rel: &str) -> Result<Option<CpuSet>, TopologyError> {
        self.read_set(rel, CpuSet::parse_mask)
    }

    fn read_set(
        &self,
        rel: &str,
        parse: fn(&str) -> Option<CpuSet>,
    ) -> Result<Option<CpuSet>, TopologyError> {
        let Some(text) = self.read(rel)? else {
            return Ok(None);
        };
        match parse(&text) {
            Some(set) => Ok(Some(set)),
            None => Err(TopologyError::MalformedCpuList {
                path: self.path(rel),
                content: text,
            }),
        }
    }

    /// The first of `names` (relative to `dir`) that exists, each `_list`/`cpulist` name read
    /// as a cpulist and every other name as a mask, with the index of the name.
    ///
    /// The kernel publishes the same files for every CPU (and node), so the name an earlier
    /// lookup of the same `names` found is tried first, and when the first lookup found none,
    /// none is looked for again: on an old kernel this saves several failed `open`s per CPU.
    /// A hinted name that is missing falls back to the full probe.
    pub(crate) fn read_first_set(
        &mut self,
        dir: &str,
        names: &'static [&'static str],
    ) -> Result<Option<(usize, CpuSet)>, TopologyError> {
        let key = names.as_ptr() as usize;
        let hint = self.hints.iter().find(|h| h.0 == key).map(|h| h.1);
        let found = match hint {
            Some(None) => None,
            Some(Some(i)) => match self.read_named(dir, names[i])? {
                Some(set) => Some((i, set)),
                None => self.probe(dir, names)?,
            },
            None => self.probe(dir, names)?,
        };
        // A name once found stays the hint: one CPU lacking a file does not stop the others
        // from being probed.
        match (self.hints.iter_mut().find(|h| h.0 == key), &found) {
            (Some(h), Some((i, _))) => h.1 = Some(*i),
            (Some(_), None) => {}
            (None, found) => self.hints.push((key, found.as_ref().map(|f| f.0))),
        }
        Ok(found)
    }

    fn probe(&self, dir: &str, names: &[&str]) -> Result<Option<(usize, CpuSet)>, TopologyError> {
        for (i, name) in names.iter().enumerate() {
            if let Some(set) = self.read_named(dir, name)? {
                return Ok(Some((i, set)));
            }
        }
        Ok(None)
    }

    fn read_named(&self, dir: &str, name: &str) -> Result<Option<CpuSet>, TopologyError> {
        let rel = format!("{dir}/{name}");
        if name.ends_with("_list") || name.ends_with("cpulist") {
            self.read_list(&rel)
        } else {
            self.read_mask(&rel)
        }
    }

    /// `rel` parsed as a signed integer, or `None` when the file is missing.
    pub(crate) fn read_i64(&self, rel: &str) -> Result<Option<i64>, TopologyError> {
        let Some(text) = self.read(rel)? else {
            return Ok(None);
        };
        match text.parse() {
            Ok(v) => Ok(Some(v)),
            Err(_) => Err(TopologyError::MalformedNumber {
                path: self.path(rel),
                content: text,
            }),
        }
    }

    /// The entries of directory `rel`, or `None` when it does not exist.
    pub(crate) fn list(&self, rel: &str) -> Result<Option<Vec<String>>, TopologyError> {
        if let Backend::Memory(files) = &self.backend {
            let dir = format!("{}/", rel.trim_start_matches('/').trim_end_matches('/'));
            let names: BTreeSet<&str> = files
                .range(dir.clone()..)
                .map(|(p, _)| p)
                .take_while(|p| p.starts_with(&dir))
                .filter_map(|p| p[dir.len()..].split('/').next())
                .filter(|n| !n.is_empty())
                .collect();
            return Ok((!names.is_empty()).then(|| names.into_iter().map(String::from).collect()));
        }
        let path = self.path(rel);
        match fs::list_dir(&path) {
            Ok(names) => Ok(Some(names)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(TopologyError::Unreadable {
                path,
                os_error: format!("{e}"),
            }),
        }
    }

    /// True when `rel` exists.
    pub(crate) fn exists(&self, rel: &str) -> bool {
        if let Backend::Memory(files) = &self.backend {
            let rel = rel.trim_start_matches('/').trim_end_matches('/');
            let dir = format!("{rel}/");
            return files.contains_key(rel)
                || files
                    .range(dir.clone()..)
                    .next()
                    .is_some_and(|(p, _)| p.starts_with(&dir));
        }
        fs::exists(&self.path(rel))
    }
}

/// Whether `rel` is a file of one CPU's or one node's directory (`…/cpu/cpu3/…`,
/// `…/node/node1/…`).
fn per_cpu(rel: &str) -> bool {
    let numbered_dir = |marker: &str| {
        rel.match_indices(marker).any(|(i, m)| {
            let rest = &rel[i + m.len()..];
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            digits > 0 && rest[digits..].starts_with('/')
        })
    };
    numbered_dir("/cpu/cpu") || numbered_dir("/node/node")
}

/// The numeric suffixes of the entries named `prefix<N>`, sorted (`cpu0`, `cpu12` → 0, 12).
pub(crate) fn numbered(names: &[String], prefix: &str) -> Vec<usize> {
    let mut ids: Vec<usize> = names
        .iter()
        .filter_map(|n| n.strip_prefix(prefix))
        .filter(|d| !d.is_empty() && d.len() <= 7 && d.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|d| d.parse().ok())
        .collect();
    ids.sort_unstable();
    ids
}
