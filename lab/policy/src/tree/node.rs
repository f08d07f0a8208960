//! The tree's nodes: sorted runs of items, each an entity (in a leaf) or the summary of a
//! child subtree (in an inner node), and how a node's summary is recomputed.
//!
//! Each node also keeps the suffix minima of its items' vruntimes: `sufv[j]` is the earliest
//! vruntime among items `j..len`, so the node's own minimum is `sufv[0]`. The runqueue's
//! common traffic takes the first item out of the leftmost leaf, which holds the earliest
//! vruntime of that leaf and of every ancestor's first child: without the suffix minima each
//! of those nodes would rescan all its items for the new minimum; with them the new minimum
//! is the next suffix, already there. A change at position `j` only recomputes the suffixes
//! at and before `j`, from `j` down, and stops at the first one that comes out unchanged
//! (those before it depend on items before it and on it alone); an append of a later
//! vruntime (the other common change) stops at once.

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

impl Item {
    /// The leaf item of entity `id`.
    #[inline]
    pub(super) fn entity(id: u32, deadline: u64, vruntime: u64, slice: u64, delayed: bool) -> Item {
        Item {
            key: deadline,
            minv: vruntime,
            mins: slice,
            maxs: slice,
            id,
            delayed,
        }
    }
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
    /// `sufv[j]`: the earliest `minv` among `items[j..len]` (valid below `len`).
    pub(super) sufv: [u64; B],
    pub(super) parent: u32,
    pub(super) len: u8,
    pub(super) leaf: bool,
}

impl Node {
    #[inline]
    pub(super) fn items(&self) -> &[Item] {
        &self.items[..self.len as usize]
    }

    /// Overwrites item `j` (below `len`).
    #[inline]
    pub(super) fn set(&mut self, j: usize, x: Item) {
        self.items[j] = x;
        self.resuffix(j);
    }

    /// Inserts `x` at position `j`; the node must have room.
    #[inline(always)]
    pub(super) fn insert(&mut self, j: usize, x: Item) {
        let len = self.len as usize;
        debug_assert!(len < B && j <= len);
        // One block move each (not an item at a time: a full leaf holds about a dozen items),
        // and no call at all for an append (every insertion into a tiny queue's lone leaf).
        if j < len {
            self.items.copy_within(j..len, j + 1);
            self.sufv.copy_within(j..len, j + 1);
        }
        self.items[j] = x;
        self.len += 1;
        self.resuffix(j);
    }

    /// Removes and returns item `j`. The suffixes after `j` move with their items; only
    /// those before `j` can change (none when the first item leaves).
    #[inline]
    pub(super) fn remove(&mut self, j: usize) -> Item {
        let len = self.len as usize;
        let x = self.items[j];
        if j + 1 < len {
            self.items.copy_within(j + 1..len, j);
            self.sufv.copy_within(j + 1..len, j);
        }
        self.len -= 1;
        if j > 0 {
            self.resuffix(j - 1);
        }
        x
    }

    /// Appends items `from..to` of `src` (the node must have room).
    pub(super) fn append(&mut self, src: &Node, from: usize, to: usize) {
        let (at, n) = (self.len as usize, to - from);
        self.items[at..at + n].copy_from_slice(&src.items[from..to]);
        self.truncate(at + n);
    }

    /// Keeps the first `len` items (`len >= 1`; at most `B`, with any past the old length
    /// just written, as `append` does) and recomputes all their suffix minima.
    pub(super) fn truncate(&mut self, len: usize) {
        debug_assert!((1..=B).contains(&len));
        self.len = len as u8;
        let mut m = self.items[len - 1].minv;
        for k in (0..len).rev() {
            m = vmin(self.items[k].minv, m);
            self.sufv[k] = m;
        }
    }

    /// Recomputes `sufv[j]` from item `j` and `sufv[j + 1]`, then the suffixes before it
    /// until one comes out unchanged.
    #[inline]
    fn resuffix(&mut self, j: usize) {
        let len = self.len as usize;
        let mut m = self.items[j].minv;
        if j + 1 < len {
            m = vmin(m, self.sufv[j + 1]);
        }
        self.sufv[j] = m;
        for k in (0..j).rev() {
            m = vmin(self.items[k].minv, m);
            if self.sufv[k] == m {
                return;
            }
            self.sufv[k] = m;
        }
    }

    /// The node's summary as its parent stores it (`id` is the node's own index).
    #[inline]
    pub(super) fn summary(&self, id: u32) -> Item {
        let it = self.items();
        let mut s = Item {
            id,
            delayed: false,
            minv: self.sufv[0],
            ..it[0]
        };
        for x in &it[1..] {
            s.mins = s.mins.min(x.mins);
            s.maxs = s.maxs.max(x.maxs);
        }
        s
    }

    /// The summary after item `old` was replaced by `new` (or removed), given the summary
    /// `s` from before (the minimum vruntime is `sufv[0]`; the slices are redone) (see [`Tree::update_up`](super::Tree::update_up)).
    #[inline]
    pub(super) fn resummary(&self, s: &Item, old: &Item, new: Option<&Item>) -> Item {
        let it = self.items();
        Item {
            key: it[0].key,
            minv: self.sufv[0],
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

    /// Position of child `id` in this inner node (which must hold it), trying the first and
    /// the last item before a scan: the common traffic changes the leftmost leaf (a pick)
    /// and the rightmost one (an append), whose ancestors are first, respectively last,
    /// children all the way up, so the walk up from either finds each position at once.
    #[inline]
    pub(super) fn find_child(&self, id: u32) -> usize {
        let last = self.len as usize - 1;
        if self.items[0].id == id {
            0
        } else if self.items[last].id == id {
            last
        } else {
            self.find(id)
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
