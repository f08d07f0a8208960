//! The runqueue's timeline: an augmented B-tree ordered by virtual deadline.
//!
//! Each node holds up to [`B`] items in deadline order. In a leaf an item is one queued
//! entity (its deadline, vruntime, slice, slab index and delayed flag); in an inner node an
//! item summarises one child subtree: its first deadline (the separator), and over the whole
//! subtree the minimum vruntime (a heap property that lets a pick skip subtrees without an
//! eligible entity) and the minimum and maximum slice (for RUN_TO_PARITY's protection and the
//! lag clamp). Every node but the root holds at least [`MIN`] items, and all leaves are at
//! the same depth, so the height is at most `1 + log_MIN(n)`; in the runqueue's steady state
//! nodes hold about 13 items, five levels at 100 000 entities, where a binary tree has
//! seventeen to twenty.
//!
//! Why a B-tree: the common runqueue traffic is "take the leftmost, put the used-up entity
//! back at the end". A binary tree does that with a left-spine removal and a right-spine
//! insertion, each rebalancing with rotations that read nodes the walk last touched about n
//! operations ago: on a large runqueue those are cache misses that no prefetch predicts.
//! Here the entities about to be picked sit next to each other in the leftmost leaf (the next
//! picks are known, so their entities can be prefetched early), the leftmost leaf stays hot
//! until it is used up, and a structural change (merge, borrow, split) happens about once
//! every ten operations, on a sibling that can be prefetched before it is needed.
//!
//! Two things keep the common operations short. Taking the leftmost entity raises the
//! minimum vruntime of every node on the left spine; each node keeps the suffix minima of
//! its items' vruntimes (see [`node`]), so the new minimum is read, not rescanned. And when
//! vruntimes are spread over more than a slice, a requeued entity's new deadline lands
//! among the others' rather than at the end, but successive ones land in the same leaf: an
//! insertion first tries the leaf of the previous one (the finger) before descending from
//! the root.
//!
//! Nodes live in a pool indexed by `u32`, with a parent link each; a slab-indexed side array
//! (`leaf_of`) maps an entity to its leaf, so removal by index is O(log n) (plus a scan of at
//! most [`B`] items per level) with no recursion. The pool is reserved for the largest tree
//! the slab can hold whenever the slab grows, so insertion and removal never allocate.
//!
//! The tree stores its own copy of each entity's deadline, vruntime and slice, taken at
//! insertion: an entity's keys must not change while it is in the tree (remove, change,
//! re-insert), which is also what keeps the runqueue's weighted sums right.
//!
//! Equal deadlines go to the right of existing ones ("after existing equals").

use alloc::vec::Vec;

use super::vtime::vbefore;
use crate::hint::prefetch;

mod check;
mod node;
mod update;

use node::{Item, NO_ITEM, Node};
use update::fold;

/// "No node" / "no entity".
pub(crate) const NIL: u32 = u32::MAX;

/// Items per node at most.
pub(super) const B: usize = 16;
/// Items per node at least, except in the root.
pub(super) const MIN: usize = B / 4;

/// Nodes `a` and `b` (distinct) of the pool, both mutable: a split or a merge moves items
/// from one to the other in place. (A copy of the source node instead puts ~1 KiB on the
/// stack, in the frame of every `insert` and `remove`, and so on the running task's stack at
/// every enqueue and pick.)
fn pair_mut(nodes: &mut [Node], a: u32, b: u32) -> (&mut Node, &mut Node) {
    let (a, b) = (a as usize, b as usize);
    assert_ne!(a, b, "one node twice");
    if a < b {
        let (lo, hi) = nodes.split_at_mut(b);
        (&mut lo[a], &mut hi[0])
    } else {
        let (lo, hi) = nodes.split_at_mut(a);
        (&mut hi[0], &mut lo[b])
    }
}

/// What the tree knows of one queued entity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Slab index.
    pub index: u32,
    /// Deadline (the key).
    pub deadline: u64,
    /// Vruntime.
    pub vruntime: u64,
    /// Delayed flag.
    pub delayed: bool,
}

impl Entry {
    fn of(x: &Item) -> Entry {
        Entry {
            index: x.id,
            deadline: x.key,
            vruntime: x.minv,
            delayed: x.delayed,
        }
    }
}

/// The augmented tree over slab indices.
#[derive(Debug)]
pub(crate) struct Tree {
    pub(super) nodes: Vec<Node>,
    /// Pool nodes not in use.
    pub(super) spare: Vec<u32>,
    /// Entity index → its leaf (or [`NIL`]).
    pub(super) leaf_of: Vec<u32>,
    pub(super) root: u32,
    /// The leftmost leaf (holds the earliest deadlines).
    pub(super) first_leaf: u32,
    /// The rightmost leaf: a runnable entity that used up its request usually goes there,
    /// so an insertion checks it before descending.
    pub(super) last_leaf: u32,
    /// The node the last insertion went to (a finger; possibly no longer a leaf of this
    /// tree): see [`Tree::in_finger`].
    pub(super) finger: u32,
    /// The root's summary (valid while the tree is not empty).
    pub(super) top: Item,
    pub(super) len: usize,
}

impl Default for Tree {
    fn default() -> Tree {
        Tree::new()
    }
}

/// The most nodes a tree of `n` entities can use: at most `n / MIN` leaves (one if fewer),
/// at most a `1 / MIN` share of the level below on each inner level (together at most
/// `leaves / (MIN - 1)`), plus one per level for rounding (fewer than 32 levels for any `n`
/// below 2^64). A tree operation never holds more nodes midway than at its end: insertion
/// only adds nodes, removal only frees them.
pub(super) fn max_nodes(n: usize) -> usize {
    let leaves = (n / MIN).max(1);
    leaves + leaves / (MIN - 1) + 32
}

impl Tree {
    pub(crate) fn new() -> Tree {
        Tree {
            nodes: Vec::new(),
            spare: Vec::new(),
            leaf_of: Vec::new(),
            root: NIL,
            first_leaf: NIL,
            last_leaf: NIL,
            finger: NIL,
            top: NO_ITEM,
            len: 0,
        }
    }

    /// Makes room for entity indices below `n` (called when the slab grows), and reserves
    /// the node pool for the largest tree of `n` entities so that no tree operation
    /// allocates.
    pub(crate) fn reserve_index(&mut self, n: usize) {
        if self.leaf_of.len() < n {
            self.leaf_of.resize(n, NIL);
        }
        self.nodes
            .reserve(max_nodes(n).saturating_sub(self.nodes.len()));
    }

    /// Reserves memory for entity indices below `n` without creating them.
    pub(crate) fn reserve_capacity(&mut self, n: usize) {
        self.leaf_of.reserve(n.saturating_sub(self.leaf_of.len()));
        self.nodes
            .reserve(max_nodes(n).saturating_sub(self.nodes.len()));
    }

    /// Entities in the tree.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether the tree is empty or all of it is one leaf (the root).
    #[inline]
    pub(crate) fn single_leaf(&self) -> bool {
        self.root == self.last_leaf
    }

    /// Smallest slice in the tree, `u64::MAX` if empty.
    #[inline]
    pub(crate) fn min_slice(&self) -> u64 {
        if self.root == NIL {
            u64::MAX
        } else {
            self.top.mins
        }
    }

    /// Largest slice in the tree, 0 if empty.
    #[inline]
    pub(crate) fn max_slice(&self) -> u64 {
        if self.root == NIL { 0 } else { self.top.maxs }
    }

    /// The entity with the earliest deadline, or [`NIL`].
    #[inline]
    pub(crate) fn leftmost(&self) -> u32 {
        self.upcoming(0)
    }

    /// The entity `k` places after the leftmost one if it is in the leftmost leaf, else
    /// [`NIL`]. Every leaf but a lone root holds at least [`MIN`] entities.
    #[inline]
    pub(crate) fn upcoming(&self, k: usize) -> u32 {
        match self.nodes.get(self.first_leaf as usize) {
            Some(n) if k < n.len as usize => n.items[k].id,
            _ => NIL,
        }
    }

    /// Hints the CPU to fetch the leaf that removals from the left will merge with or borrow
    /// from once the leftmost leaf runs short (its right sibling), a few removals early.
    #[inline]
    pub(crate) fn prefetch_left_sibling_leaf(&self) {
        let Some(f) = self.nodes.get(self.first_leaf as usize) else {
            return;
        };
        if f.len as usize > MIN + 1 {
            return;
        }
        if let Some(p) = self.nodes.get(f.parent as usize)
            && p.len > 1
            && let Some(s) = self.nodes.get(p.items[1].id as usize)
        {
            prefetch(s);
        }
    }

    /// The tree's entry for entity `i`, which must be in the tree.
    #[inline]
    pub(crate) fn get(&self, i: u32) -> Entry {
        if let Some(f) = self.nodes.get(self.first_leaf as usize)
            && f.items[0].id == i
        {
            return Entry::of(&f.items[0]);
        }
        let n = &self.nodes[self.leaf_of[i as usize] as usize];
        Entry::of(&n.items[n.find(i)])
    }

    /// Marks entity `i` (in the tree) delayed or not.
    pub(crate) fn set_delayed(&mut self, i: u32, delayed: bool) {
        let n = &mut self.nodes[self.leaf_of[i as usize] as usize];
        // The first item of its leaf (every entity of a small tree's lone leaf is often that
        // one) is found without a scan.
        let j = if n.items[0].id == i { 0 } else { n.find(i) };
        n.items[j].delayed = delayed;
    }

    // ----- insertion ------------------------------------------------------------------------

    /// Inserts entity `i` with the given keys. `i` must not be in the tree.
    pub(crate) fn insert(
        &mut self,
        i: u32,
        deadline: u64,
        vruntime: u64,
        slice: u64,
        delayed: bool,
    ) {
        let item = Item::entity(i, deadline, vruntime, slice, delayed);
        self.len += 1;
        if self.root == NIL {
            // Empty to one entity (every other operation on a tiny queue): the new root
            // leaf holds just this item, and its summary is the item itself.
            let x = self.alloc(true);
            let n = &mut self.nodes[x as usize];
            (n.items[0], n.sufv[0], n.len) = (item, vruntime, 1);
            self.leaf_of[i as usize] = x;
            (self.root, self.first_leaf, self.last_leaf) = (x, x, x);
            self.top = Item {
                id: x,
                delayed: false,
                ..item
            };
            return;
        }
        if self.root == self.last_leaf {
            // The root is the only leaf (up to B entities, every tiny queue): find the place
            // in it directly; no finger, no descent, no parent to update.
            let x = self.root;
            let n = &mut self.nodes[x as usize];
            let len = n.len as usize;
            if len < B {
                // At or after the last key (a used-up request, the common case): append.
                let j = if !vbefore(deadline, n.items[len - 1].key) {
                    len
                } else {
                    n.upper_bound(deadline)
                };
                n.insert(j, item);
                self.leaf_of[i as usize] = x;
                self.finger = x;
                self.top = fold(self.top, &item);
                return;
            }
        }
        // At or after the last key: the end of the last leaf.
        let last = &self.nodes[self.last_leaf as usize];
        let (x, j) = if !vbefore(deadline, last.items[last.len as usize - 1].key) {
            (self.last_leaf, last.len as usize)
        } else if let Some(j) = self.in_finger(deadline) {
            (self.finger, j)
        } else {
            let mut x = self.root;
            loop {
                let n = &self.nodes[x as usize];
                let j = n.upper_bound(deadline);
                if n.leaf {
                    break (x, j);
                }
                x = n.items[j.saturating_sub(1)].id;
            }
        };
        self.finger = x;
        self.insert_at(x, j, item);
    }

    /// Where an entity with this deadline goes in the finger leaf, if it goes there.
    ///
    /// Requeued entities with similar vruntimes get similar deadlines, so successive
    /// insertions that do not go to the end of the tree tend to go to the same leaf: the
    /// finger saves the descent from the root. It needs no upkeep when nodes split, merge
    /// or are freed, because the test is self-contained: a deadline at or after a live
    /// leaf's first key and before its last one belongs in that leaf (every leaf before it
    /// ends at or before its first key, every leaf after it starts at or after its last
    /// key), at the same position the descent would find. A freed node has no items, and
    /// an inner node is no leaf, so neither passes.
    #[inline]
    fn in_finger(&self, deadline: u64) -> Option<usize> {
        let n = self.nodes.get(self.finger as usize)?;
        let len = n.len as usize;
        if !n.leaf
            || len == 0
            || vbefore(deadline, n.items[0].key)
            || !vbefore(deadline, n.items[len - 1].key)
        {
            return None;
        }
        Some(n.upper_bound(deadline))
    }

    /// Puts `item` at position `j` of node `x`, splitting full nodes on the way up.
    fn insert_at(&mut self, mut x: u32, mut j: usize, mut item: Item) {
        // Splits only re-partition items: above the last node changed, the one new entity is
        // what the summaries gain.
        let entity = item;
        loop {
            if (self.nodes[x as usize].len as usize) < B {
                self.put(x, j, item);
                self.fold_up(x, &entity);
                return;
            }
            // An append (the common case: a used-up request goes to the end) leaves the
            // node as full as the new one allows, so that steady appends fill nodes to
            // (B - MIN + 1) / B rather than half; any other insertion splits in the middle.
            let at = if j == B { B - MIN + 1 } else { B / 2 };
            let y = self.split(x, at);
            if j > at {
                self.put(y, j - at, item);
            } else {
                self.put(x, j, item);
            }
            let sx = self.nodes[x as usize].summary(x);
            let sy = self.nodes[y as usize].summary(y);
            let p = self.nodes[x as usize].parent;
            if p == NIL {
                let r = self.alloc(false);
                self.put(r, 0, sx);
                self.put(r, 1, sy);
                self.root = r;
                self.top = self.nodes[r as usize].summary(r);
                return;
            }
            let pj = self.nodes[p as usize].find_child(x);
            self.nodes[p as usize].set(pj, sx);
            (x, j, item) = (p, pj + 1, sy);
        }
    }

    /// Moves the items of full node `x` from position `at` on into a new right sibling,
    /// which it returns (not yet linked into the parent).
    fn split(&mut self, x: u32, at: usize) -> u32 {
        let y = self.alloc(self.nodes[x as usize].leaf);
        let (xn, yn) = pair_mut(&mut self.nodes, x, y);
        yn.append(xn, at, B);
        // The first `at` suffixes do not cover the moved items any more.
        xn.truncate(at);
        for j in 0..B - at {
            self.adopt(y, j);
        }
        if self.last_leaf == x {
            self.last_leaf = y;
        }
        y
    }

    // ----- removal --------------------------------------------------------------------------

    /// Removes entity `i`, which must be in the tree.
    pub(crate) fn remove(&mut self, i: u32) {
        if self.len == 1 {
            // One entity to none: it is the root leaf's only item.
            debug_assert_eq!(self.nodes[self.root as usize].items[0].id, i);
            self.leaf_of[i as usize] = NIL;
            self.len = 0;
            self.release(self.root);
            (self.root, self.first_leaf, self.last_leaf) = (NIL, NIL, NIL);
            return;
        }
        let f = self.first_leaf;
        let (mut x, j) = if self.nodes[f as usize].items[0].id == i {
            (f, 0)
        } else {
            let x = self.leaf_of[i as usize];
            (x, self.nodes[x as usize].find(i))
        };
        // What left node `x`, until a merge makes its parent the node that changed.
        let mut removed = Some(self.take(x, j));
        self.leaf_of[i as usize] = NIL;
        self.len -= 1;
        loop {
            let n = &self.nodes[x as usize];
            let (len, p) = (n.len as usize, n.parent);
            if p == NIL {
                if len == 0 {
                    self.release(x);
                    (self.root, self.first_leaf, self.last_leaf) = (NIL, NIL, NIL);
                } else if !n.leaf && len == 1 {
                    // The root kept one child: the child becomes the root.
                    let c = n.items[0].id;
                    self.release(x);
                    self.root = c;
                    self.nodes[c as usize].parent = NIL;
                    self.top = self.nodes[c as usize].summary(c);
                } else {
                    self.top = n.summary(x);
                }
                return;
            }
            if len >= MIN {
                match removed {
                    Some(old) => self.update_up(x, old, None),
                    None => self.refresh_up(x),
                }
                return;
            }
            // Too short: merge with a sibling (the right one if there is one), or borrow
            // one item from it if both do not fit one node.
            let pn = &self.nodes[p as usize];
            let pj = pn.find_child(x);
            let (jl, l, r) = if pj + 1 < pn.len as usize {
                (pj, x, pn.items[pj + 1].id)
            } else {
                (pj - 1, pn.items[pj - 1].id, x)
            };
            let (ll, rl) = (
                self.nodes[l as usize].len as usize,
                self.nodes[r as usize].len as usize,
            );
            if ll + rl <= B {
                let (ln, rn) = pair_mut(&mut self.nodes, l, r);
                ln.append(rn, 0, rl);
                for k in ll..ll + rl {
                    self.adopt(l, k);
                }
                self.release(r);
                if self.last_leaf == r {
                    self.last_leaf = l;
                }
                let sl = self.nodes[l as usize].summary(l);
                self.nodes[p as usize].set(jl, sl);
                self.take(p, jl + 1);
                (x, removed) = (p, None);
                continue;
            }
            if x == l {
                let item = self.take(r, 0);
                self.put(l, ll, item);
            } else {
                let item = self.take(l, ll - 1);
                self.put(r, 0, item);
            }
            let (sl, sr) = (
                self.nodes[l as usize].summary(l),
                self.nodes[r as usize].summary(r),
            );
            self.nodes[p as usize].set(jl + 1, sr);
            self.nodes[p as usize].set(jl, sl);
            self.refresh_up(p);
            return;
        }
    }

    // ----- pick -----------------------------------------------------------------------------

    /// The eligible entity with the earliest deadline (`pick_eevdf` steps 5–6), if any.
    ///
    /// `eligible(v)` must be monotone: if it holds for v, it holds for every earlier v. Then
    /// the first item (in deadline order) whose subtree minimum vruntime is eligible holds an
    /// eligible entity, and every entity there has an earlier deadline than anything after.
    #[inline]
    pub(crate) fn pick(&self, eligible: impl Fn(u64) -> bool) -> Option<Entry> {
        let f = self.nodes.get(self.first_leaf as usize)?;
        if eligible(f.items[0].minv) {
            return Some(Entry::of(&f.items[0]));
        }
        let mut x = self.root;
        loop {
            let n = &self.nodes[x as usize];
            let item = n.items().iter().find(|x| eligible(x.minv))?;
            if n.leaf {
                return Some(Entry::of(item));
            }
            x = item.id;
        }
    }
}
