//! NUMA nodes from `node/nodeN/{cpulist|cpumap,distance}`.
//!
//! Without a `node/` directory (s390, some containers) there is one implicit node holding
//! every CPU, with unknown distances. Node ids may be sparse (POWER: 0,1,4,5,…), nodes may
//! hold no CPU, and a CPU may belong to no node (an offline node). A node's CPUs come from
//! `cpulist`, else from the `cpumap` mask (old kernels, util-linux dumps).
//!
//! `distance` holds one value per node in ascending id order; the kernel writes one per
//! *online* node, some edited trees one per *possible* node. A row as long as the list of
//! node directories is read by position; a longer row is read by node id; anything else, or
//! a missing file, leaves the distances unknown rather than invented.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::cpuset::CpuSet;
use super::source::{Sysfs, numbered};
use crate::TopologyError;

const NODE_DIR: &str = "/sys/devices/system/node";
const NODE_CPUS: &[&str] = &["cpulist", "cpumap"];

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaNode {
    /// The kernel's node number (the `N` of `nodeN`).
    pub id: usize,
    /// Its online CPUs (possibly none).
    pub cpus: CpuSet,
}

/// The NUMA part of the topology.
pub(crate) struct Numa {
    pub(crate) nodes: Vec<NumaNode>,
    /// True when there is no `node/` directory and one node was assumed.
    pub(crate) implicit: bool,
    /// `distances[i][j]` between `nodes[i]` and `nodes[j]`, when known.
    pub(crate) distances: Option<Vec<Vec<u32>>>,
}

pub(crate) fn scan(fs: &mut Sysfs, online: &CpuSet) -> Result<Numa, TopologyError> {
    let ids = match fs.list(NODE_DIR)? {
        Some(entries) => numbered(&entries, "node"),
        None => Vec::new(),
    };
    if ids.is_empty() {
        fs.fall_back("node/nodeN", "one implicit NUMA node holding every CPU");
        return Ok(Numa {
            nodes: alloc::vec![NumaNode {
                id: 0,
                cpus: online.clone(),
            }],
            implicit: true,
            distances: None,
        });
    }
    let mut nodes = Vec::with_capacity(ids.len());
    let mut rows: Vec<Option<Vec<u32>>> = Vec::with_capacity(ids.len());
    for &id in &ids {
        let dir = format!("{NODE_DIR}/node{id}");
        let cpus = match fs.read_first_set(&dir, NODE_CPUS)? {
            Some((i, set)) => {
                if i > 0 {
                    fs.fall_back("node/nodeN/cpulist", "nodeN/cpumap");
                }
                &set & online
            }
            None => {
                fs.fall_back("node/nodeN/cpulist", "a node without CPUs");
                CpuSet::new()
            }
        };
        nodes.push(NumaNode { id, cpus });
        let rel = format!("{dir}/distance");
        rows.push(match fs.read(&rel)? {
            Some(text) => Some(
                parse_row(&text).ok_or_else(|| TopologyError::MalformedNumber {
                    path: fs.path(&rel),
                    content: String::from(&*text),
                })?,
            ),
            None => None,
        });
    }
    let max_id = *ids.last().unwrap_or(&0);
    let mut matrix = Vec::with_capacity(ids.len());
    for row in &rows {
        let Some(row) = row else {
            fs.fall_back("node/nodeN/distance", "unknown NUMA distances");
            return Ok(Numa {
                nodes,
                implicit: false,
                distances: None,
            });
        };
        let mapped: Vec<u32> = if row.len() == ids.len() {
            row.clone()
        } else if row.len() > max_id {
            ids.iter().map(|&j| row[j]).collect()
        } else {
            fs.fall_back(
                "node/nodeN/distance (one value per node)",
                "unknown NUMA distances",
            );
            return Ok(Numa {
                nodes,
                implicit: false,
                distances: None,
            });
        };
        matrix.push(mapped);
    }
    Ok(Numa {
        nodes,
        implicit: false,
        distances: Some(matrix),
    })
}

fn parse_row(text: &str) -> Option<Vec<u32>> {
    text.split_ascii_whitespace()
        .map(|v| v.parse().ok())
        .collect()
}
