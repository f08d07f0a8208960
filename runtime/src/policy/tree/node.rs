//! The tree's nodes: sorted runs of items, each an entity (in a leaf) or the summary of a
//! child subtree (in an inner node), and how a node's summary is recomputed.

use super::super::vtime::{vbefore, vmin};
use super::{B, NIL};

/// An entity (in a leaf) or the summary of a child subtree (in an inner node).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Item {
    /// Deadline of the entity, or the first deadline of the subtree.
    pub(super) key: u64,
    /// Vruntime of the entity, or the minimum over the subtree.
    pub(super) minv: u64,
    /// Slice of the entity, or the minimum over the subtree.
    pub(super) mins: u64,
    /// Slice of the entity, or the maximum over the subtree.
    pub(super) maxs: u64,
    /// Slab index of the entity, or the child node.
    pub(super) id: u32,
    /// The entity is delayed (kept here so that a pick need not touch the entity).
    pub(super) delayed: bool,
}

pub(super) const NO_ITEM: Item = Item {
    key: 0,
    minv: 0,
    mins: 0,
    maxs: 0,
    id: NIL,
    delayed: false,
};

/// One node: a sorted run of items.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub(crate) struct Node {
    pub(super) items: [Item; B],
    pub(super) parent: u32,
    pub(super) len: u8,
    pub(super) leaf: bool,
}

impl Node {
    #[inline]
    pub(super) fn items(&self) -> &[Item] {
        &self.items[..self.len as usize]
    }

    /// The node's summary as its parent stores it (`id` is the node's own index).
    #[inline]
    pub(super) fn summary(&self, id: u32) -> Item {
        let it = self.items();
        let mut s = Item {
            id,
            delayed: false,
            ..it[0]
        };
        for x in &it[1..] {
            s.minv = vmin(s.minv, x.minv);
            s.mins = s.mins.min(x.mins);
            s.maxs = s.maxs.max(x.maxs);
        }
        s
    }

    /// The summary after item `old` was replaced by `new` (or removed), given the summary
    /// `s` from before (see [`Tree::update_up`](super::Tree::update_up)).
    #[inline]
    pub(super) fn resummary(&self, s: &Item, old: &Item, new: Option<&Item>) -> Item {
        let it = self.items();
        Item {
            key: it[0].key,
            minv: redo(it, s.minv, old.minv, new.map(|n| n.minv), |x| x.minv, vmin),
            mins: redo(
                it,
                s.mins,
                old.mins,
                new.map(|n| n.mins),
                |x| x.mins,
                u64::min,
            ),
            maxs: redo(
                it,
                s.maxs,
                old.maxs,
                new.map(|n| n.maxs),
                |x| x.maxs,
                u64::max,
            ),
            ..*s
        }
    }

    /// Position of the item with index `id` (which must be here).
    #[inline]
    pub(super) fn find(&self, id: u32) -> usize {
        match self.items().iter().position(|x| x.id == id) {
            Some(j) => j,
            None => unreachable!("item {id} is not in its node"),
        }
    }

    /// Number of items with a key at or before `key`: where an item with that key goes
    /// (after existing equals).
    #[inline]
    pub(super) fn upper_bound(&self, key: u64) -> usize {
        self.items()
            .iter()
            .position(|x| vbefore(key, x.key))
            .unwrap_or(self.len as usize)
    }
}

/// One aggregate (`ext` is min or max) after a value `old` was replaced by `new` or
/// removed, given the aggregate `s` from before and the items now: unchanged unless `old`
/// held it and `new` does not reach it; then a scan, which stops early at an item that still
/// holds it.
#[inline(always)]
fn redo(
    it: &[Item],
    s: u64,
    old: u64,
    new: Option<u64>,
    get: impl Fn(&Item) -> u64,
    ext: impl Fn(u64, u64) -> u64,
) -> u64 {
    match new {
        Some(n) if old != s || ext(s, n) == n => ext(s, n),
        None if old != s => s,
        _ => {
            let mut m = get(&it[0]);
            for x in it {
                let v = get(x);
                if v == s {
                    return s;
                }
                m = ext(m, v);
            }
            m
        }
    }
}
