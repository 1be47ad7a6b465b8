//! `scx_nest`'s shared dispatch queues, as the simulator's Nest host keeps
//! them: one queue per LLC (`LLC_DSQ_BASE + llc` in
//! crates/scx_nest/src/bpf/main.bpf.c), ordered by virtual time as a
//! sched_ext DSQ filled with `scx_bpf_dsq_insert_vtime()` is (ties in
//! insertion order). Only the storage is here; which queue a task joins,
//! with which virtual time, and which task a CPU takes are the shared C
//! policy's decisions (policy/nest_sched.c), asked by `policy/nest.rs`.
//!
//! The per-CPU queues of pinned tasks (`PINNED_DSQ_BASE + cpu`) and front
//! queues (`FRONT_DSQ_BASE + cpu`) are kept here too, after the LLCs'
//! (`policy/nest.rs` numbers them).

use std::collections::BTreeMap;

use super::TaskId;

/// A place in a queue: virtual time, then insertion order.
type Slot = (u64, u64);

/// The LLC queues, then the CPUs' queues of pinned tasks and front queues.
#[derive(Clone, Debug, Default)]
pub(super) struct LlcQueues {
    queues: Vec<BTreeMap<Slot, TaskId>>,
    /// Insertion counter (ties in virtual time).
    seq: u64,
    /// Per task: its LLC and slot while queued.
    slots: Vec<Option<(u32, Slot)>>,
    /// Per LLC: when the starvation guard next looks at the whole queue
    /// (`nest_state.starve_sweep_at`).
    pub sweep_at: Vec<u64>,
}

impl LlcQueues {
    pub fn new(nr_llcs: usize) -> Self {
        Self {
            queues: vec![BTreeMap::new(); nr_llcs],
            sweep_at: vec![0; nr_llcs],
            ..Self::default()
        }
    }

    /// Queues `task` in `llc`'s queue with virtual time `vtime`.
    pub fn insert(&mut self, llc: u32, task: TaskId, vtime: u64) {
        self.seq += 1;
        let slot = (vtime, self.seq);
        self.queues[llc as usize].insert(slot, task);
        let i = task as usize;
        if self.slots.len() <= i {
            self.slots.resize(i + 1, None);
        }
        self.slots[i] = Some((llc, slot));
    }

    /// Takes `task` out of its queue; false if it was not queued.
    pub fn remove(&mut self, task: TaskId) -> bool {
        let Some((llc, slot)) = self.slots.get_mut(task as usize).and_then(Option::take) else {
            return false;
        };
        self.queues[llc as usize].remove(&slot).is_some()
    }

    /// Number of tasks in `llc`'s queue.
    pub fn len(&self, llc: u32) -> u32 {
        self.queues.get(llc as usize).map_or(0, |q| q.len() as u32)
    }

    /// Virtual time of the first task of `llc`'s queue.
    pub fn head(&self, llc: u32) -> Option<u64> {
        let queue = self.queues.get(llc as usize)?;
        queue.first_key_value().map(|(&(vtime, _), _)| vtime)
    }

    /// `llc`'s queue from its first task on: (virtual time, task).
    pub fn front(&self, llc: u32) -> impl Iterator<Item = (u64, TaskId)> + '_ {
        self.queues
            .get(llc as usize)
            .into_iter()
            .flat_map(|q| q.iter().map(|(&(vtime, _), &task)| (vtime, task)))
    }

    /// The queue `task` waits in, if it does.
    #[cfg(test)]
    pub fn queue_of(&self, task: TaskId) -> Option<u32> {
        self.slots
            .get(task as usize)
            .copied()
            .flatten()
            .map(|(llc, _)| llc)
    }

    /// `llc`'s queue from its last task back.
    pub fn back(&self, llc: u32) -> impl Iterator<Item = TaskId> + '_ {
        self.queues
            .get(llc as usize)
            .into_iter()
            .flat_map(|q| q.values().rev().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::LlcQueues;

    #[test]
    fn virtual_time_order_then_insertion_order() {
        let mut q = LlcQueues::new(2);
        q.insert(0, 7, 300);
        q.insert(0, 8, 100);
        q.insert(0, 9, 100);
        q.insert(1, 3, 50);
        assert_eq!(q.front(0).map(|(_, t)| t).collect::<Vec<_>>(), [8, 9, 7]);
        assert_eq!(q.back(0).collect::<Vec<_>>(), [7, 9, 8]);
        assert_eq!((q.len(0), q.head(0), q.head(1)), (3, Some(100), Some(50)));
        assert!(q.remove(9));
        assert!(!q.remove(9), "already out");
        assert_eq!(q.front(0).map(|(_, t)| t).collect::<Vec<_>>(), [8, 7]);
        assert_eq!((q.len(1), q.head(2)), (1, None));
    }
}
