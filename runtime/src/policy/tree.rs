//! The runqueue's timeline: an augmented AVL tree ordered by virtual deadline.
//!
//! Each node also keeps, for its whole subtree, the minimum vruntime (a heap property that
//! lets a pick skip subtrees without an eligible entity), and the minimum and maximum slice
//! (for RUN_TO_PARITY's protection and the lag clamp). Nodes live in a `Vec` indexed like the
//! runqueue's slab, linked by `u32` indices with parent links, so insertion, removal by index
//! and the pick descent are O(log n) with no recursion and no allocation (the vector grows
//! only when the slab does).
//!
//! The tree stores its own copy of each entity's deadline, vruntime and slice, taken at
//! insertion: an entity's keys must not change while it is in the tree (remove, change,
//! re-insert), which is also what keeps the runqueue's weighted sums right.
//!
//! Equal deadlines go to the right of existing ones ("after existing equals").

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::prefetch::prefetch;
use super::vtime::{vbefore, vmin};

/// "No node".
pub(crate) const NIL: u32 = u32::MAX;

/// One tree node: links, the entity's keys, and the subtree augmentation (one cache line).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(crate) struct Link {
    left: u32,
    right: u32,
    parent: u32,
    height: u8,
    /// Height of the left subtree minus height of the right one (kept so that a rebalance
    /// decides on a child without touching the grandchildren).
    bal: i8,
    /// The entity is delayed (kept here so that a pick need not touch the entity).
    pub delayed: bool,
    /// The entity's virtual deadline (the key).
    pub deadline: u64,
    /// The entity's vruntime.
    pub vruntime: u64,
    slice: u64,
    /// Minimum vruntime over the subtree.
    pub min_vruntime: u64,
    /// Minimum slice over the subtree.
    pub min_slice: u64,
    /// Maximum slice over the subtree.
    pub max_slice: u64,
}

const EMPTY: Link = Link {
    left: NIL,
    right: NIL,
    parent: NIL,
    height: 0,
    bal: 0,
    delayed: false,
    deadline: 0,
    vruntime: 0,
    slice: 0,
    min_vruntime: 0,
    min_slice: 0,
    max_slice: 0,
};

/// The augmented tree over node indices.
#[derive(Debug, Default)]
pub(crate) struct Tree {
    links: Vec<Link>,
    root: u32,
    leftmost: u32,
    /// The last node: a runnable entity that used up its request usually goes there, so an
    /// insertion checks it before descending.
    rightmost: u32,
    len: usize,
}

impl Tree {
    pub(crate) fn new() -> Tree {
        Tree {
            links: Vec::new(),
            root: NIL,
            leftmost: NIL,
            rightmost: NIL,
            len: 0,
        }
    }

    /// Makes room for node indices below `n` (called when the slab grows).
    pub(crate) fn reserve_index(&mut self, n: usize) {
        if self.links.len() < n {
            self.links.resize(n, EMPTY);
        }
    }

    /// Reserves memory for node indices below `n` without creating them.
    pub(crate) fn reserve_capacity(&mut self, n: usize) {
        self.links.reserve(n.saturating_sub(self.links.len()));
    }

    pub(crate) fn root(&self) -> Option<&Link> {
        (self.root != NIL).then(|| &self.links[self.root as usize])
    }

    pub(crate) fn leftmost(&self) -> u32 {
        self.leftmost
    }

    /// The in-order successor of the leftmost node, or [`NIL`]. The leftmost node has no left
    /// child, so by AVL balance its right subtree is at most one leaf: the successor is that
    /// leaf or else the parent, found without reading any other node.
    pub(crate) fn leftmost_successor(&self) -> u32 {
        if self.leftmost == NIL {
            return NIL;
        }
        let n = &self.links[self.leftmost as usize];
        if n.right != NIL { n.right } else { n.parent }
    }

    /// Hints the CPU to fetch the nodes that removing the leftmost node will read besides
    /// itself and its parent (both warm from the last removal): its successor (which becomes
    /// the leftmost) and its sibling (which the parent's fix-up and a rotation there read).
    /// Returns the successor.
    #[inline]
    pub(crate) fn prefetch_leftmost_removal(&self) -> u32 {
        let s = self.leftmost_successor();
        if s != NIL {
            prefetch(&self.links[s as usize]);
            let p = self.links[self.leftmost as usize].parent;
            if p != NIL && self.links[p as usize].right != NIL {
                prefetch(&self.links[self.links[p as usize].right as usize]);
            }
        }
        s
    }

    pub(crate) fn link(&self, i: u32) -> &Link {
        &self.links[i as usize]
    }

    #[inline]
    fn h(&self, i: u32) -> u32 {
        if i == NIL {
            0
        } else {
            self.links[i as usize].height as u32
        }
    }

    /// Recomputes height, balance and augmentation of `i` from its children; returns whether
    /// the height changed and whether the augmentation changed (what `i`'s parent reads).
    #[inline(always)]
    fn update(&mut self, i: u32) -> (bool, bool) {
        let links = &mut self.links[..];
        let n = &links[i as usize];
        let (l, r) = (n.left, n.right);
        let (mut minv, mut mins, mut maxs) = (n.vruntime, n.slice, n.slice);
        let (mut hl, mut hr) = (0u8, 0u8);
        if l != NIL {
            let c = &links[l as usize];
            minv = vmin(minv, c.min_vruntime);
            mins = mins.min(c.min_slice);
            maxs = maxs.max(c.max_slice);
            hl = c.height;
        }
        if r != NIL {
            let c = &links[r as usize];
            minv = vmin(minv, c.min_vruntime);
            mins = mins.min(c.min_slice);
            maxs = maxs.max(c.max_slice);
            hr = c.height;
        }
        let height = hl.max(hr) + 1;
        let n = &mut links[i as usize];
        let height_changed = n.height != height;
        let aug_changed = (n.min_vruntime != minv) | (n.min_slice != mins) | (n.max_slice != maxs);
        n.min_vruntime = minv;
        n.min_slice = mins;
        n.max_slice = maxs;
        n.height = height;
        n.bal = hl as i8 - hr as i8;
        (height_changed, aug_changed)
    }

    /// Recomputes only the augmentation of `i` (its children kept their heights); returns
    /// whether it changed.
    #[inline(always)]
    fn update_aug(&mut self, i: u32) -> bool {
        let links = &mut self.links[..];
        let n = &links[i as usize];
        let (l, r) = (n.left, n.right);
        let (mut minv, mut mins, mut maxs) = (n.vruntime, n.slice, n.slice);
        for c in [l, r] {
            if c != NIL {
                let c = &links[c as usize];
                minv = vmin(minv, c.min_vruntime);
                mins = mins.min(c.min_slice);
                maxs = maxs.max(c.max_slice);
            }
        }
        let n = &mut links[i as usize];
        if (n.min_vruntime, n.min_slice, n.max_slice) == (minv, mins, maxs) {
            return false;
        }
        n.min_vruntime = minv;
        n.min_slice = mins;
        n.max_slice = maxs;
        true
    }

    /// Points `parent`'s child link (or the root) that held `old` at `new`.
    #[inline]
    fn replace_child(&mut self, parent: u32, old: u32, new: u32) {
        if parent == NIL {
            self.root = new;
        } else if self.links[parent as usize].left == old {
            self.links[parent as usize].left = new;
        } else {
            self.links[parent as usize].right = new;
        }
        if new != NIL {
            self.links[new as usize].parent = parent;
        }
    }

    fn rotate_left(&mut self, x: u32) -> u32 {
        let y = self.links[x as usize].right;
        let yl = self.links[y as usize].left;
        let xp = self.links[x as usize].parent;
        self.links[x as usize].right = yl;
        if yl != NIL {
            self.links[yl as usize].parent = x;
        }
        self.replace_child(xp, x, y);
        self.links[y as usize].left = x;
        self.links[x as usize].parent = y;
        self.update(x);
        self.update(y);
        y
    }

    fn rotate_right(&mut self, x: u32) -> u32 {
        let y = self.links[x as usize].left;
        let yr = self.links[y as usize].right;
        let xp = self.links[x as usize].parent;
        self.links[x as usize].left = yr;
        if yr != NIL {
            self.links[yr as usize].parent = x;
        }
        self.replace_child(xp, x, y);
        self.links[y as usize].right = x;
        self.links[x as usize].parent = y;
        self.update(x);
        self.update(y);
        y
    }

    /// Walks from `i` towards the root, restoring AVL balance and the augmentation. A node's
    /// height and augmentation depend only on its children, so the walk stops at the first
    /// node whose values did not change (and that was not rotated), once it has passed
    /// `force` (a node whose stored values are known to be stale, or [`NIL`]). Above the first
    /// node (past `force`) that was not rotated and kept its height, no node can need a
    /// rotation or a new height, so the rest of the walk recomputes the augmentation alone:
    /// after removing the leftmost entity that is usually the minimum vruntime, up to the root.
    fn fix_up(&mut self, mut i: u32, mut force: u32) {
        while i != NIL {
            let (height_changed, aug_changed) = self.update(i);
            let n = &self.links[i as usize];
            let (l, r, bf) = (n.left, n.right, n.bal);
            let rotated = if bf > 1 {
                if self.links[l as usize].bal < 0 {
                    self.rotate_left(l);
                }
                i = self.rotate_right(i);
                true
            } else if bf < -1 {
                if self.links[r as usize].bal > 0 {
                    self.rotate_right(r);
                }
                i = self.rotate_left(i);
                true
            } else {
                false
            };
            if i == force {
                force = NIL;
            }
            if !rotated && !height_changed && force == NIL {
                if !aug_changed {
                    return;
                }
                i = self.links[i as usize].parent;
                break;
            }
            i = self.links[i as usize].parent;
        }
        while i != NIL && self.update_aug(i) {
            i = self.links[i as usize].parent;
        }
    }

    /// Marks node `i` (in the tree) delayed or not.
    pub(crate) fn set_delayed(&mut self, i: u32, delayed: bool) {
        self.links[i as usize].delayed = delayed;
    }

    /// Inserts node `i` with the given keys. `i` must not be in the tree.
    pub(crate) fn insert(
        &mut self,
        i: u32,
        deadline: u64,
        vruntime: u64,
        slice: u64,
        delayed: bool,
    ) {
        self.links[i as usize] = Link {
            delayed,
            deadline,
            vruntime,
            slice,
            min_vruntime: vruntime,
            min_slice: slice,
            max_slice: slice,
            height: 1,
            ..EMPTY
        };
        self.len += 1;
        let mut parent = NIL;
        let mut cur = self.root;
        let mut go_left = false;
        let mut leftmost = true;
        if self.rightmost != NIL && !vbefore(deadline, self.links[self.rightmost as usize].deadline)
        {
            // At or after the last key: the new node is the right child of the last node.
            parent = self.rightmost;
            cur = NIL;
            leftmost = false;
        }
        let mut rightmost = true;
        while cur != NIL {
            parent = cur;
            let n = &self.links[cur as usize];
            go_left = vbefore(deadline, n.deadline);
            if go_left {
                cur = n.left;
                rightmost = false;
            } else {
                cur = n.right;
                leftmost = false;
            }
        }
        self.links[i as usize].parent = parent;
        if parent == NIL {
            self.root = i;
        } else if go_left {
            self.links[parent as usize].left = i;
        } else {
            self.links[parent as usize].right = i;
        }
        if leftmost {
            self.leftmost = i;
        }
        if rightmost {
            self.rightmost = i;
        }
        self.fix_up(parent, NIL);
    }

    fn min_of(&self, mut i: u32) -> u32 {
        while self.links[i as usize].left != NIL {
            i = self.links[i as usize].left;
        }
        i
    }

    fn max_of(&self, mut i: u32) -> u32 {
        while self.links[i as usize].right != NIL {
            i = self.links[i as usize].right;
        }
        i
    }

    /// Removes node `i`, which must be in the tree.
    pub(crate) fn remove(&mut self, i: u32) {
        let n = self.links[i as usize];
        if self.leftmost == i {
            // The leftmost node has no left child: its successor is the minimum of its right
            // subtree, or else its parent.
            self.leftmost = if n.right != NIL {
                self.min_of(n.right)
            } else {
                n.parent
            };
        }
        if self.rightmost == i {
            // Mirror image: the predecessor of the last node.
            self.rightmost = if n.left != NIL {
                self.max_of(n.left)
            } else {
                n.parent
            };
        }
        self.len -= 1;
        let start;
        let mut force = NIL;
        if n.left == NIL || n.right == NIL {
            let child = if n.left != NIL { n.left } else { n.right };
            self.replace_child(n.parent, i, child);
            start = n.parent;
        } else {
            let s = self.min_of(n.right);
            if s == n.right {
                start = s;
            } else {
                let sp = self.links[s as usize].parent;
                let sr = self.links[s as usize].right;
                self.links[sp as usize].left = sr;
                if sr != NIL {
                    self.links[sr as usize].parent = sp;
                }
                self.links[s as usize].right = n.right;
                self.links[n.right as usize].parent = s;
                start = sp;
            }
            self.links[s as usize].left = n.left;
            self.links[n.left as usize].parent = s;
            self.replace_child(n.parent, i, s);
            // `s` now sits where `i` was: give it `i`'s values (what its parent saw), and
            // recompute at least up to it.
            let sl = &mut self.links[s as usize];
            sl.height = n.height;
            sl.bal = n.bal;
            sl.min_vruntime = n.min_vruntime;
            sl.min_slice = n.min_slice;
            sl.max_slice = n.max_slice;
            force = s;
        }
        self.links[i as usize] = EMPTY;
        self.fix_up(start, force);
    }

    /// The eligible node with the earliest deadline (`pick_eevdf` steps 5–6), or [`NIL`].
    ///
    /// `eligible(v)` must be monotone: if it holds for v, it holds for every earlier v. Then a
    /// left subtree whose minimum vruntime is eligible holds an eligible node, and every node
    /// there has an earlier deadline than anything to the right.
    #[inline]
    pub(crate) fn pick(&self, eligible: impl Fn(u64) -> bool) -> u32 {
        if self.leftmost != NIL && eligible(self.links[self.leftmost as usize].vruntime) {
            return self.leftmost;
        }
        let mut i = self.root;
        while i != NIL {
            let n = &self.links[i as usize];
            if n.left != NIL && eligible(self.links[n.left as usize].min_vruntime) {
                i = n.left;
                continue;
            }
            if eligible(n.vruntime) {
                return i;
            }
            i = n.right;
        }
        NIL
    }

    /// Checks links, order, balance, heights, augmentation, the leftmost cache and the count.
    /// Returns the in-order node list.
    pub(crate) fn check(&self) -> Result<Vec<u32>, String> {
        let mut order = Vec::with_capacity(self.len);
        if self.root != NIL && self.links[self.root as usize].parent != NIL {
            return Err(format!("root {} has a parent", self.root));
        }
        // Iterative in-order walk.
        let mut stack = Vec::new();
        let mut cur = self.root;
        while cur != NIL || !stack.is_empty() {
            while cur != NIL {
                stack.push(cur);
                cur = self.links[cur as usize].left;
            }
            let i = stack.pop().unwrap_or(NIL);
            order.push(i);
            cur = self.links[i as usize].right;
            if order.len() > self.len {
                return Err(format!("more than {} nodes reachable (cycle?)", self.len));
            }
        }
        if order.len() != self.len {
            return Err(format!(
                "{} nodes reachable, {} counted",
                order.len(),
                self.len
            ));
        }
        if self.leftmost != order.first().copied().unwrap_or(NIL) {
            return Err(format!(
                "leftmost cache {} is not the first node",
                self.leftmost
            ));
        }
        if self.rightmost != order.last().copied().unwrap_or(NIL) {
            return Err(format!(
                "rightmost cache {} is not the last node",
                self.rightmost
            ));
        }
        if self.leftmost_successor() != order.get(1).copied().unwrap_or(NIL) {
            return Err(format!(
                "leftmost successor {} is not the second node",
                self.leftmost_successor()
            ));
        }
        for w in order.windows(2) {
            let (a, b) = (&self.links[w[0] as usize], &self.links[w[1] as usize]);
            if vbefore(b.deadline, a.deadline) {
                return Err(format!(
                    "deadline order broken between {} and {}",
                    w[0], w[1]
                ));
            }
        }
        for &i in &order {
            let n = &self.links[i as usize];
            let (mut minv, mut mins, mut maxs, mut hh) = (n.vruntime, n.slice, n.slice, 0);
            for c in [n.left, n.right] {
                if c == NIL {
                    continue;
                }
                let cn = &self.links[c as usize];
                if cn.parent != i {
                    return Err(format!("node {c} has parent {} not {i}", cn.parent));
                }
                minv = vmin(minv, cn.min_vruntime);
                mins = mins.min(cn.min_slice);
                maxs = maxs.max(cn.max_slice);
                hh = hh.max(cn.height);
            }
            if n.height as u32 != hh as u32 + 1 {
                return Err(format!("node {i} height {} != {}", n.height, hh + 1));
            }
            let bf = self.h(n.left) as i64 - self.h(n.right) as i64;
            if bf != n.bal as i64 {
                return Err(format!("node {i} balance {} should be {bf}", n.bal));
            }
            if bf.abs() > 1 {
                return Err(format!("node {i} balance factor {bf}"));
            }
            if n.min_vruntime != minv || n.min_slice != mins || n.max_slice != maxs {
                return Err(format!(
                    "node {i} augmentation (min_v {}, min_s {}, max_s {}) should be ({minv}, {mins}, {maxs})",
                    n.min_vruntime, n.min_slice, n.max_slice
                ));
            }
        }
        Ok(order)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn xorshift(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    /// Random inserts and removals (with duplicate keys and wrapped virtual times), the tree
    /// checked after every operation against its definition.
    #[test]
    fn random_operations_keep_order_balance_and_augmentation() {
        let mut s = 0x2545_f491_4f6c_dd1d_u64;
        let mut t = Tree::new();
        let n = 300;
        t.reserve_index(n);
        let mut inside = vec![false; n];
        for op in 0..20_000 {
            let i = (xorshift(&mut s) % n as u64) as u32;
            if inside[i as usize] {
                t.remove(i);
            } else {
                let base = u64::MAX - 5_000;
                let d = base.wrapping_add(xorshift(&mut s) % 10_000);
                let v = base.wrapping_add(xorshift(&mut s) % 10_000);
                t.insert(i, d, v, xorshift(&mut s) % 7, false);
            }
            inside[i as usize] ^= true;
            if let Err(e) = t.check() {
                panic!("after op {op} on node {i}: {e}");
            }
        }
    }

    /// A million sequential inserts stay within the AVL height bound (no recursion anywhere).
    #[test]
    fn a_million_nodes_stay_shallow() {
        let n = 1_000_000u32;
        let mut t = Tree::new();
        t.reserve_index(n as usize);
        for i in 0..n {
            t.insert(i, i as u64, (n - i) as u64, 1, false);
        }
        let h = t.root().map_or(0, |r| r.height);
        // AVL: height < 1.45 log2(n + 2).
        assert!((h as f64) < 1.45 * ((n + 2) as f64).log2(), "height {h}");
        assert_eq!(t.root().map(|r| r.min_vruntime), Some(1));
        for i in (0..n).step_by(2) {
            t.remove(i);
        }
        assert_eq!(t.len, n as usize / 2);
        assert_eq!(t.link(t.leftmost()).deadline, 1);
    }
}
