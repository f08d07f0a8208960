//! The timeline's own consistency check, recomputed from scratch (O(n)), and its tests.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use super::super::vtime::{vbefore, vmin};
use super::{B, MIN, NIL, Tree};

impl Tree {
    /// Checks links, order, fill, depth, summaries (the augmentation), the leaf map, the
    /// leftmost/rightmost leaf caches, the root summary, the count and the node pool.
    /// Returns the entity indices in deadline order.
    pub(crate) fn check(&self) -> Result<Vec<u32>, String> {
        let mut order = Vec::with_capacity(self.len);
        let mapped = self.leaf_of.iter().filter(|&&x| x != NIL).count();
        if self.root == NIL {
            if self.len != 0 || mapped != 0 || self.first_leaf != NIL || self.last_leaf != NIL {
                return Err(format!(
                    "empty tree with len {} / {mapped} mapped",
                    self.len
                ));
            }
            return Ok(order);
        }
        if self.nodes[self.root as usize].parent != NIL {
            return Err(format!("root {} has a parent", self.root));
        }
        // Depth-first, children pushed in reverse so that leaves come out in order.
        let mut stack = vec![(self.root, 0usize)];
        let (mut leaves, mut leaf_depth, mut visited) = (Vec::new(), None, 0usize);
        while let Some((x, depth)) = stack.pop() {
            visited += 1;
            if visited > self.nodes.len() {
                return Err(String::from("more nodes reachable than exist (cycle?)"));
            }
            let n = &self.nodes[x as usize];
            let len = n.len as usize;
            let least = match (x == self.root, n.leaf) {
                (true, true) => 1,
                (true, false) => 2,
                (false, _) => MIN,
            };
            if len < least || len > B {
                return Err(format!("node {x} holds {len} items (at least {least})"));
            }
            for k in 0..len {
                let m = n.items[k..len].iter().map(|it| it.minv).reduce(vmin);
                if m != Some(n.sufv[k]) {
                    return Err(format!("node {x}: suffix minimum {k} is stale"));
                }
            }
            if n.leaf {
                if *leaf_depth.get_or_insert(depth) != depth {
                    return Err(format!("leaf {x} at depth {depth}, not {leaf_depth:?}"));
                }
                leaves.push(x);
                for it in n.items() {
                    if self.leaf_of.get(it.id as usize) != Some(&x) {
                        return Err(format!("entity {} is in leaf {x}, not mapped there", it.id));
                    }
                    if it.mins != it.maxs {
                        return Err(format!("entity {} has two slices", it.id));
                    }
                    order.push(it.id);
                }
                continue;
            }
            for it in n.items().iter().rev() {
                let c = &self.nodes[it.id as usize];
                if c.parent != x {
                    return Err(format!("node {} has parent {} not {x}", it.id, c.parent));
                }
                if c.len == 0 || *it != c.summary(it.id) {
                    return Err(format!(
                        "node {x}'s summary of child {} is {it:?}, should be {:?}",
                        it.id,
                        (c.len > 0).then(|| c.summary(it.id))
                    ));
                }
                stack.push((it.id, depth + 1));
            }
        }
        if visited + self.spare.len() != self.nodes.len() {
            return Err(format!(
                "{visited} nodes in the tree and {} spare, of {} in the pool",
                self.spare.len(),
                self.nodes.len()
            ));
        }
        if order.len() != self.len || mapped != self.len {
            return Err(format!(
                "{} entities reachable, {mapped} mapped, {} counted",
                order.len(),
                self.len
            ));
        }
        if leaves.first() != Some(&self.first_leaf) || leaves.last() != Some(&self.last_leaf) {
            return Err(format!(
                "leaf caches ({}, {}) are not the first and last leaves",
                self.first_leaf, self.last_leaf
            ));
        }
        if self.top != self.nodes[self.root as usize].summary(self.root) {
            return Err(format!("root summary {:?} is stale", self.top));
        }
        for w in order.windows(2) {
            let (a, b) = (self.get(w[0]), self.get(w[1]));
            if vbefore(b.deadline, a.deadline) {
                return Err(format!(
                    "deadline order broken between {} and {}",
                    w[0], w[1]
                ));
            }
        }
        Ok(order)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Entry, max_nodes};
    use super::*;

    fn xorshift(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    /// Random inserts, removals and delayed flags (duplicate keys, wrapped virtual times),
    /// the tree checked after every operation against its definition and a model, and a pick
    /// at a random eligibility bound against brute force (the first eligible entity in
    /// deadline order), including its root summary. The pool never grows past its
    /// reservation.
    #[test]
    fn random_operations_keep_order_balance_and_augmentation() {
        let mut s = 0x2545_f491_4f6c_dd1d_u64;
        let mut t = Tree::new();
        let n = 700;
        t.reserve_index(n);
        let cap = t.nodes.capacity();
        let mut model: Vec<Option<Entry>> = vec![None; n];
        let mut slices = vec![0u64; n];
        let base = u64::MAX - 5_000;
        for op in 0..40_000 {
            // Phases that favour inserts, then removals, so that the tree grows and shrinks
            // through several heights.
            let grow = (op / 4_000u32).is_multiple_of(2);
            let i = (xorshift(&mut s) % n as u64) as u32;
            let r = xorshift(&mut s) % 100;
            match model[i as usize] {
                Some(e) if !grow || r < 30 => {
                    if r.is_multiple_of(7) {
                        t.set_delayed(i, !e.delayed);
                        model[i as usize] = Some(Entry {
                            delayed: !e.delayed,
                            ..e
                        });
                    } else {
                        t.remove(i);
                        model[i as usize] = None;
                    }
                }
                Some(_) => {}
                None if !grow && r >= 2 => {}
                None => {
                    let e = Entry {
                        index: i,
                        deadline: base.wrapping_add(xorshift(&mut s) % 10_000),
                        vruntime: base.wrapping_add(xorshift(&mut s) % 10_000),
                        delayed: r.is_multiple_of(5),
                    };
                    slices[i as usize] = 1 + xorshift(&mut s) % 7;
                    t.insert(i, e.deadline, e.vruntime, slices[i as usize], e.delayed);
                    model[i as usize] = Some(e);
                }
            }
            let order = match t.check() {
                Ok(o) => o,
                Err(e) => panic!("after op {op} on entity {i}: {e}"),
            };
            let inside: Vec<Entry> = model.iter().flatten().copied().collect();
            assert_eq!(order.len(), inside.len(), "op {op}");
            for e in &inside {
                assert_eq!(t.get(e.index), *e, "op {op}");
            }
            let bound = base.wrapping_add(xorshift(&mut s) % 10_000);
            let eligible = |v: u64| !vbefore(bound, v);
            let brute = order
                .iter()
                .map(|&i| t.get(i))
                .find(|e| eligible(e.vruntime));
            assert_eq!(t.pick(eligible), brute, "op {op}: pick at bound {bound}");
            assert_eq!(t.leftmost(), order.first().copied().unwrap_or(NIL));
            let minv = inside.iter().map(|e| e.vruntime).reduce(vmin);
            let ss = inside.iter().map(|e| slices[e.index as usize]);
            assert_eq!(t.min_slice(), ss.clone().min().unwrap_or(u64::MAX));
            assert_eq!(t.max_slice(), ss.max().unwrap_or(0));
            if let Some(v) = minv {
                assert_eq!(t.top.minv, v, "op {op}: root minimum vruntime");
            }
        }
        assert_eq!(t.nodes.capacity(), cap, "the node pool grew");
    }

    /// The runqueue's steady state, a queue (take the leftmost, put it back at the end),
    /// keeps the tree valid and within its reserved pool.
    #[test]
    fn queue_traffic_stays_valid() {
        let n = 5_000u32;
        let mut t = Tree::new();
        t.reserve_index(n as usize);
        let cap = t.nodes.capacity();
        for i in 0..n {
            t.insert(i, i as u64 * 3, i as u64, 1, false);
        }
        let mut key = n as u64 * 3;
        for round in 0..3 * n {
            let e = t.pick(|_| true).expect("non-empty");
            assert_eq!(e.index, round % n, "FIFO order");
            t.remove(e.index);
            t.insert(e.index, key, key / 3, 1, false);
            key += 3;
            if round % 997 == 0 {
                t.check().unwrap();
            }
        }
        t.check().unwrap();
        assert_eq!(t.nodes.capacity(), cap, "the node pool grew");
        assert!(t.nodes.len() <= max_nodes(n as usize));
    }

    /// The bench's steady state: take the leftmost, put it back about an eighth of the way
    /// in (its new deadline lands among the others'), so that insertions keep going to a
    /// slowly moving leaf, the finger's case, with equal keys on leaf boundaries. The tree
    /// stays valid and in order, and every entity comes back in deadline order.
    #[test]
    fn frontier_traffic_stays_valid() {
        let n = 3_000u32;
        let mut t = Tree::new();
        t.reserve_index(n as usize);
        let mut s = 0x9e37_79b9_7f4a_7c15_u64;
        // Keys in steps of 4 with random gaps of 0..2 steps, many equal.
        let mut keys = vec![0u64; n as usize];
        for i in 0..n {
            keys[i as usize] = (i as u64 / 2) * 4 + xorshift(&mut s) % 3 * 4;
            t.insert(i, keys[i as usize], keys[i as usize], 1, false);
        }
        let mut hits = 0u32;
        for round in 0..20 * n {
            let e = t.pick(|_| true).expect("non-empty");
            assert_eq!(e.index, t.leftmost());
            t.remove(e.index);
            // About n/8 keys further on, in steps of 4 (so equals are common).
            let key = e.deadline + (n as u64 / 8 / 2) * 4 + xorshift(&mut s) % 3 * 4;
            if t.in_finger(key).is_some() {
                hits += 1;
            }
            t.insert(e.index, key, key, 1, false);
            if round % 331 == 0 {
                t.check().unwrap();
            }
        }
        t.check().unwrap();
        assert!(hits > 2 * n, "finger used {hits} times");
    }

    /// A million sequential inserts stay within the B-tree height bound (no recursion
    /// anywhere), and removing every other one keeps the summaries right.
    #[test]
    fn a_million_nodes_stay_shallow() {
        let n = 1_000_000u32;
        let mut t = Tree::new();
        t.reserve_index(n as usize);
        for i in 0..n {
            let slice = if i % 2 == 0 { 1 } else { 2 + (i % 3) as u64 };
            t.insert(i, i as u64, (n - i) as u64, slice, false);
        }
        let mut height = 1;
        let mut x = t.root;
        while !t.nodes[x as usize].leaf {
            x = t.nodes[x as usize].items[0].id;
            height += 1;
        }
        // Every node but the root holds at least MIN items.
        assert!(
            (height as f64) <= 1.0 + (n as f64).log(MIN as f64),
            "height {height}"
        );
        assert_eq!((t.top.minv, t.min_slice(), t.max_slice()), (1, 1, 4));
        for i in (0..n).step_by(2) {
            t.remove(i);
        }
        assert_eq!(t.len, n as usize / 2);
        assert_eq!(t.get(t.leftmost()).deadline, 1);
        assert_eq!((t.top.minv, t.min_slice(), t.max_slice()), (1, 2, 4));
        t.check().unwrap();
    }
}
