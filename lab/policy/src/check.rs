//! Consistency checks of a runqueue against its definition, recomputed from scratch (for
//! property tests, the simulator and debugging; O(n)).

use alloc::format;
use alloc::string::String;

use super::runqueue::RunQueue;
use super::tree::NIL;
use super::vtime::{vadd, vdiff};

impl<T> RunQueue<T> {
    /// Checks every invariant of the runqueue and its tree: tree order, balance and
    /// augmentation; tree ∪ {curr} = the occupied slots, all `on_rq`; counts and load; the
    /// weighted sums; the next buddy is neither current nor delayed; each tree node's keys
    /// equal its entity's; and conservation of lag: with V the floor of the exact weighted
    /// mean, `Σ w·(V − v)` lies in `(−W, 0]`.
    pub fn check_invariants(&self) -> Result<(), String> {
        let order = self.tree.check()?;
        let mut count = 0usize;
        let (mut load, mut delayed) = (0u64, 0usize);
        for (i, slot) in self.slots.iter().enumerate() {
            let (se, Some(_)) = (&slot.se, &slot.payload) else {
                continue;
            };
            count += 1;
            load += se.weight;
            delayed += se.sched_delayed as usize;
            if !se.on_rq {
                return Err(format!("slot {i} is occupied but not on_rq"));
            }
            if se.rel_deadline {
                return Err(format!("slot {i} is queued with a relative deadline"));
            }
        }
        if count != order.len() + (self.curr != NIL) as usize {
            return Err(format!(
                "{count} entities held, {} in the tree, curr {}",
                order.len(),
                self.curr != NIL
            ));
        }
        if count != self.nr_queued || load != self.load_weight || delayed != self.nr_delayed {
            return Err(format!(
                "counters nr_queued {} load {} delayed {} but found {count} {load} {delayed}",
                self.nr_queued, self.load_weight, self.nr_delayed
            ));
        }
        let (mut s, mut w) = (0i128, 0u64);
        for &i in &order {
            if i == self.curr {
                return Err(format!("curr {i} is in the tree"));
            }
            let se = self.se(i);
            let l = self.tree.get(i);
            if l.deadline != se.deadline
                || l.vruntime != se.vruntime
                || l.delayed != se.sched_delayed
            {
                return Err(format!("node {i}'s keys changed while in the tree"));
            }
            s += vdiff(se.vruntime, self.zero_vruntime) as i128 * se.weight as i128;
            w += se.weight;
        }
        if s != self.sum_w_vruntime || w != self.sum_weight {
            return Err(format!(
                "sums (S {}, W {}) should be ({s}, {w})",
                self.sum_w_vruntime, self.sum_weight
            ));
        }
        if self.next != NIL && (self.next == self.curr || self.se(self.next).sched_delayed) {
            return Err(format!("next buddy {} is current or delayed", self.next));
        }
        // Conservation of lag around the floor of the exact mean.
        let (s_all, w_all) = self.sums_with_curr();
        if w_all > 0 {
            let v_floor = vadd(self.zero_vruntime, s_all.div_euclid(w_all) as i64);
            let mut lag_sum = 0i128;
            for (_, se, _) in self.iter() {
                lag_sum += vdiff(v_floor, se.vruntime) as i128 * se.weight as i128;
            }
            if lag_sum > 0 || lag_sum <= -w_all {
                return Err(format!("Σ w·lag = {lag_sum} outside (−{w_all}, 0]"));
            }
        }
        Ok(())
    }
}
