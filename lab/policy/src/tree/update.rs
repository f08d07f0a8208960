//! The node pool, moving items between nodes, and carrying a change of a node's summary up
//! to the root.

use super::super::vtime::{vbefore, vmin};
use super::node::{Item, NO_ITEM, Node};
use super::{B, NIL, Tree};

impl Tree {
    /// Takes a node from the pool: an empty leaf (`leaf`) or inner node without a parent.
    ///
    /// A recycled node gets only its header written: items and suffix minima at and beyond
    /// `len` are never read, and a node is about 1 KiB, so rewriting all of it would be most
    /// of the cost of the common "tree goes from empty to one entity" insertion.
    pub(super) fn alloc(&mut self, leaf: bool) -> u32 {
        match self.spare.pop() {
            Some(x) => {
                let n = &mut self.nodes[x as usize];
                debug_assert_eq!(n.len, 0, "spare node holds items");
                (n.parent, n.len, n.leaf) = (NIL, 0, leaf);
                x
            }
            None => self.alloc_new(leaf),
        }
    }

    /// [`alloc`](Self::alloc) with no spare: a new node at the end of the pool. Out of line:
    /// the node is built on the stack before it is moved into the pool, and inlined into
    /// `insert` or `remove` those ~1 KiB would be part of their frames, which every pick and
    /// enqueue pushes onto the running task's stack (a block of cold cache lines per switch
    /// when thousands of tasks each have their own stack).
    #[cold]
    #[inline(never)]
    fn alloc_new(&mut self, leaf: bool) -> u32 {
        debug_assert!(
            self.nodes.len() < self.nodes.capacity(),
            "pool not reserved"
        );
        self.nodes.push(Node {
            items: [NO_ITEM; B],
            sufv: [0; B],
            parent: NIL,
            len: 0,
            leaf,
        });
        (self.nodes.len() - 1) as u32
    }

    pub(super) fn release(&mut self, x: u32) {
        self.nodes[x as usize].len = 0;
        self.spare.push(x);
    }

    /// Records that item `j` of node `x` now lives in `x`.
    #[inline]
    pub(super) fn adopt(&mut self, x: u32, j: usize) {
        let n = &self.nodes[x as usize];
        let id = n.items[j].id;
        if n.leaf {
            self.leaf_of[id as usize] = x;
        } else {
            self.nodes[id as usize].parent = x;
        }
    }

    /// Inserts `item` at position `j` of node `x`, which has room.
    #[inline]
    pub(super) fn put(&mut self, x: u32, j: usize, item: Item) {
        self.nodes[x as usize].insert(j, item);
        self.adopt(x, j);
    }

    /// Removes and returns item `j` of node `x`.
    #[inline]
    pub(super) fn take(&mut self, x: u32, j: usize) -> Item {
        self.nodes[x as usize].remove(j)
    }

    /// Replaces the tree's only entity, `old`, by entity `i` with the given keys: what
    /// removing `old` and inserting `i` would leave, without freeing and taking back the
    /// root leaf (a switch between the two entities of a two-entity queue).
    pub(crate) fn replace_only(
        &mut self,
        old: u32,
        i: u32,
        deadline: u64,
        vruntime: u64,
        slice: u64,
        delayed: bool,
    ) {
        debug_assert_eq!(
            self.len, 1,
            "replace_only on a tree of {} entities",
            self.len
        );
        let x = self.root;
        let item = Item::entity(i, deadline, vruntime, slice, delayed);
        let n = &mut self.nodes[x as usize];
        debug_assert_eq!(n.items[0].id, old);
        (n.items[0], n.sufv[0]) = (item, vruntime);
        self.leaf_of[old as usize] = NIL;
        self.leaf_of[i as usize] = x;
        self.finger = x;
        self.top = Item {
            id: x,
            delayed: false,
            ..item
        };
    }

    /// Recomputes the summaries from node `x` up, stopping at the first one that did not
    /// change (a summary depends only on the node's items).
    pub(super) fn refresh_up(&mut self, mut x: u32) {
        loop {
            let n = &self.nodes[x as usize];
            let s = n.summary(x);
            let p = n.parent;
            if p == NIL {
                self.top = s;
                return;
            }
            let pn = &mut self.nodes[p as usize];
            let j = pn.find_child(x);
            if pn.items[j] == s {
                return;
            }
            pn.set(j, s);
            x = p;
        }
    }

    /// Propagates a change in node `x` upwards: its item `old` was replaced by `new`, or
    /// removed (`new` is `None`). At each level the node's summary is redone from the one
    /// stored above it, rescanning an aggregate only if `old` held its extreme and `new` does
    /// not; the walk stops at the first summary that did not change.
    pub(super) fn update_up(&mut self, mut x: u32, mut old: Item, mut new: Option<Item>) {
        loop {
            let p = self.nodes[x as usize].parent;
            let (s, j) = if p == NIL {
                (self.top, 0)
            } else {
                let j = self.nodes[p as usize].find_child(x);
                (self.nodes[p as usize].items[j], j)
            };
            let r = self.nodes[x as usize].resummary(&s, &old, new.as_ref());
            if p == NIL {
                self.top = r;
                return;
            }
            if r == s {
                return;
            }
            self.nodes[p as usize].set(j, r);
            (x, old, new) = (p, s, Some(r));
        }
    }

    /// Folds `item`, just put into node `x`, into the summaries from `x` up, stopping at
    /// the first one that did not change: an insertion can only lower a minimum, raise a
    /// maximum or give a subtree an earlier first key, so no node needs a rescan.
    pub(super) fn fold_up(&mut self, mut x: u32, item: &Item) {
        loop {
            let p = self.nodes[x as usize].parent;
            if p == NIL {
                self.top = fold(self.top, item);
                return;
            }
            let pn = &mut self.nodes[p as usize];
            let j = pn.find_child(x);
            let s = fold(pn.items[j], item);
            if pn.items[j] == s {
                return;
            }
            pn.set(j, s);
            x = p;
        }
    }
}

/// A subtree's summary `s` after `item` joined the subtree.
#[inline]
pub(super) fn fold(s: Item, item: &Item) -> Item {
    Item {
        key: if vbefore(item.key, s.key) {
            item.key
        } else {
            s.key
        },
        minv: vmin(s.minv, item.minv),
        mins: s.mins.min(item.mins),
        maxs: s.maxs.max(item.maxs),
        ..s
    }
}
