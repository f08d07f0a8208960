//! CPU caches from `cpuN/cache/indexK/{level,type,shared_cpu_list|shared_cpu_map,size,id}`.
//!
//! The shared set is read from `shared_cpu_map` first, as hwloc does: on some kernels the
//! list disagrees with the map (AMD Bulldozer's L2 lists only the CPU itself while the map
//! holds the compute unit), and the map is the one that is right.
//!
//! Instruction caches are skipped: the scheduler cares where data is shared. A cache's span
//! is its shared set intersected with the online CPUs (and always holds the CPU it was read
//! from); an all-zero map means "private to this core" (seen on ia64). A shared set that
//! names CPUs which do not exist at all (no `cpuN` directory and not `possible`) is an error:
//! the tree is inconsistent, and guessing would build wrong domains.
//!
//! The last-level cache (LLC) of a CPU is the highest-level cache that holds it, as the
//! kernel's `sd_llc`.

use alloc::format;
use alloc::string::ToString;
use alloc::vec::Vec;

use super::cpus::{CPU_DIR, CpuTopology};
use super::cpuset::CpuSet;
use super::source::Sysfs;
use crate::TopologyError;

const SHARED: &[&str] = &["shared_cpu_map", "shared_cpu_list"];

/// What a cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CacheKind {
    /// Data only.
    Data,
    /// Data and instructions.
    Unified,
}

/// One cache, shared by the CPUs of its span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    /// 1 for L1, 2 for L2, ….
    pub level: u8,
    /// Data or unified.
    pub kind: CacheKind,
    /// The online CPUs that share it.
    pub span: CpuSet,
    /// Its size in bytes, when `size` was readable.
    pub size: Option<u64>,
    /// The kernel's `id` for it, when present.
    pub id: Option<i64>,
}

/// Per-CPU indices into the cache list.
pub(crate) struct CpuCaches {
    pub(crate) l2: Option<usize>,
    pub(crate) llc: Option<usize>,
}

/// Reads every online CPU's caches; returns the distinct caches and, per CPU (in the order of
/// `topo.cpus`), its L2 and LLC.
pub(crate) fn scan(
    fs: &mut Sysfs,
    topo: &CpuTopology,
) -> Result<(Vec<Cache>, Vec<CpuCaches>), TopologyError> {
    let mut caches: Vec<Cache> = Vec::new();
    let mut per_cpu = Vec::with_capacity(topo.cpus.len());
    // (index K, span, cache) of every cache read so far.
    let mut seen: Vec<(usize, CpuSet, usize)> = Vec::new();
    for cpu in &topo.cpus {
        let n = cpu.id;
        let dir = format!("{CPU_DIR}/cpu{n}/cache");
        let mut mine: Vec<usize> = Vec::new();
        // The kernel numbers a CPU's caches index0, index1, … without gaps: probe them in
        // order until one is missing, which costs one failed open per CPU where listing the
        // directory would cost five syscalls.
        for k in 0.. {
            // A cache already read through a CPU whose shared set holds this one is the same
            // cache, seen at the same index: skip its files.
            if let Some(&(_, _, i)) = seen
                .iter()
                .find(|(index, shared, _)| *index == k && shared.contains(n))
            {
                if i != usize::MAX {
                    mine.push(i);
                }
                continue;
            }
            let idx = format!("{dir}/index{k}");
            let kind = match fs.read(&format!("{idx}/type"))?.as_deref() {
                None => break,
                Some("Data") => CacheKind::Data,
                Some("Unified") => CacheKind::Unified,
                Some("Instruction") => {
                    // Skipped, but remembered so that its sharers skip it too.
                    if let Some((_, set)) = fs.read_first_set(&idx, SHARED)? {
                        seen.push((k, &set & &topo.online, usize::MAX));
                    }
                    continue;
                }
                _ => continue,
            };
            let Some(level) = fs.read_i64(&format!("{idx}/level"))? else {
                continue;
            };
            let (shared, file) = match fs.read_first_set(&idx, SHARED)? {
                Some((i, s)) => (s, SHARED[i]),
                None => {
                    fs.fall_back("cpuN/cache/indexK/shared_cpu_map", "private to the core");
                    (CpuSet::new(), "")
                }
            };
            let unknown = &shared - &topo.known;
            if !unknown.is_empty() {
                return Err(TopologyError::CacheSpansUnknownCpus {
                    path: fs.path(&format!("{idx}/{file}")),
                    unknown: unknown.to_string(),
                });
            }
            let mut span = &shared & &topo.online;
            if shared.is_empty() {
                span = topo.cores[cpu.core].clone();
            }
            span.insert(n);
            let level = u8::try_from(level).unwrap_or(u8::MAX);
            let i = match caches
                .iter()
                .position(|c| c.level == level && c.kind == kind && c.span == span)
            {
                Some(i) => i,
                None => {
                    caches.push(Cache {
                        level,
                        kind,
                        span: span.clone(),
                        size: fs
                            .read(&format!("{idx}/size"))?
                            .as_deref()
                            .and_then(parse_size),
                        id: fs.read_i64(&format!("{idx}/id")).ok().flatten(),
                    });
                    caches.len() - 1
                }
            };
            seen.push((k, span, i));
            mine.push(i);
        }
        if mine.is_empty() {
            fs.fall_back("cpuN/cache", "no caches (LLC taken as the package)");
        }
        per_cpu.push(CpuCaches {
            l2: mine.iter().copied().find(|&i| caches[i].level == 2),
            llc: mine.iter().copied().max_by_key(|&i| caches[i].level),
        });
    }
    Ok((caches, per_cpu))
}

/// Parses `"32K"`, `"8192K"`, `"1M"` or a plain byte count.
fn parse_size(text: &str) -> Option<u64> {
    let (digits, unit) = match text.as_bytes().last()? {
        b'K' => (&text[..text.len() - 1], 1 << 10),
        b'M' => (&text[..text.len() - 1], 1 << 20),
        b'G' => (&text[..text.len() - 1], 1 << 30),
        _ => (text, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

/// The distinct caches of `level` as CPU sets, sorted by first CPU.
pub(crate) fn spans_of_level(caches: &[Cache], level: u8) -> Vec<&CpuSet> {
    let mut v: Vec<&CpuSet> = caches
        .iter()
        .filter(|c| c.level == level)
        .map(|c| &c.span)
        .collect();
    v.sort_by_key(|s| s.first());
    v.dedup();
    v
}
