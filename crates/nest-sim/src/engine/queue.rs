//! The event queue: events pop in (time, sequence number) order. Sequence
//! numbers are unique, so the order is total and events with the same time
//! pop in creation order.
//!
//! Run-segment ends (`Ev::Done`) are kept apart from the other events: a
//! CPU has at most one pending, kept in a heap where it can be moved. Every
//! frequency change re-times the running segments; moving the end is
//! cheaper than leaving the old end in a heap to be popped later as a
//! no-op. The replaced ends are still remembered as *superseded*: they used
//! to be such no-op events, they still count as (stale) events, and at the
//! end of a run one of them may be the last event processed, which sets
//! the final time (see `Sim::run`).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use nest_trace::Cpu;

use super::Ev;

/// Time in the high 64 bits, sequence number in the low ones.
pub(crate) type Key = u128;

/// The time of a key.
pub(crate) fn key_time(key: Key) -> u64 {
    (key >> 64) as u64
}

struct Entry {
    key: Key,
    ev: Ev,
}

impl Ord for Entry {
    /// Reversed: `BinaryHeap` is a max-heap and the earliest event must
    /// come out first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key.cmp(&self.key)
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for Entry {}

pub(crate) struct EventQueue {
    /// Every pending event but the segment ends.
    heap: BinaryHeap<Entry>,
    ends: Ends,
    /// Keys of replaced segment ends, not yet counted.
    superseded: Vec<Key>,
    /// Prune `superseded` when it grows beyond this.
    prune_at: usize,
    seq: u64,
}

impl EventQueue {
    pub(crate) fn new(nr_cpus: usize) -> Self {
        Self {
            heap: BinaryHeap::new(),
            ends: Ends::new(nr_cpus),
            superseded: Vec::new(),
            prune_at: 1024,
            seq: 0,
        }
    }

    fn next_key(&mut self, at: u64) -> Key {
        self.seq += 1;
        (Key::from(at) << 64) | Key::from(self.seq)
    }

    /// Schedules `ev` (not a segment end) at time `at`, after the events
    /// already scheduled then.
    pub(crate) fn push(&mut self, at: u64, ev: Ev) {
        debug_assert!(!matches!(ev, Ev::Done { .. }), "use set_end");
        let key = self.next_key(at);
        self.heap.push(Entry { key, ev });
    }

    /// Schedules the end of `cpu`'s current segment (`Ev::Done`) at `at`,
    /// replacing the pending one, if any.
    pub(crate) fn set_end(&mut self, cpu: Cpu, at: u64, epoch: u32) {
        let key = self.next_key(at);
        if let Some(old) = self.ends.set(cpu as usize, key, epoch) {
            self.superseded.push(old);
        }
    }

    /// The earliest event and its key.
    pub(crate) fn pop(&mut self) -> Option<(Key, Ev)> {
        let heap_key = self.heap.peek().map_or(Key::MAX, |e| e.key);
        match self.ends.first() {
            Some((cpu, key)) if key < heap_key => {
                let epoch = self.ends.clear(cpu);
                let cpu = cpu as Cpu;
                Some((key, Ev::Done { cpu, epoch }))
            }
            _ => self.heap.pop().map(|e| (e.key, e.ev)),
        }
    }

    /// Whether any pending event other than a segment end satisfies `f`.
    pub(crate) fn any(&self, f: impl Fn(&Ev) -> bool) -> bool {
        self.heap.iter().any(|e| f(&e.ev))
    }

    /// Forgets the superseded ends before `key` and returns how many there
    /// were; only every so often unless `now` (the memory stays bounded).
    pub(crate) fn count_superseded_before(&mut self, key: Key, now: bool) -> u64 {
        if !now && self.superseded.len() < self.prune_at {
            return 0;
        }
        let before = self.superseded.len();
        self.superseded.retain(|&k| k >= key);
        self.prune_at = self.prune_at.max(2 * self.superseded.len());
        (before - self.superseded.len()) as u64
    }

    /// Removes and returns the superseded ends before `key`, in order.
    pub(crate) fn take_superseded_before(&mut self, key: Key) -> Vec<Key> {
        let mut taken: Vec<Key> = self
            .superseded
            .iter()
            .copied()
            .filter(|&k| k < key)
            .collect();
        self.superseded.retain(|&k| k >= key);
        taken.sort_unstable();
        taken
    }
}

/// One pending segment end per CPU, in a binary min-heap of CPUs that knows
/// where each CPU is, so that a CPU's end can be moved in place. Its size
/// is the number of CPUs running a task, not the number of CPUs.
struct Ends {
    /// CPUs with a pending end, a min-heap on their keys.
    heap: Vec<u32>,
    /// Per CPU: its index in `heap` (`ABSENT` if none), key and epoch.
    pos: Vec<u32>,
    keys: Vec<Key>,
    epochs: Vec<u32>,
}

const ABSENT: u32 = u32::MAX;

impl Ends {
    fn new(nr_cpus: usize) -> Self {
        Self {
            heap: Vec::with_capacity(nr_cpus),
            pos: vec![ABSENT; nr_cpus],
            keys: vec![Key::MAX; nr_cpus],
            epochs: vec![0; nr_cpus],
        }
    }

    /// The CPU with the earliest pending end, and that end's key.
    fn first(&self) -> Option<(usize, Key)> {
        let cpu = *self.heap.first()? as usize;
        Some((cpu, self.keys[cpu]))
    }

    /// Sets `cpu`'s end; returns the key of the one it replaces.
    fn set(&mut self, cpu: usize, key: Key, epoch: u32) -> Option<Key> {
        let old = std::mem::replace(&mut self.keys[cpu], key);
        self.epochs[cpu] = epoch;
        let i = self.pos[cpu];
        if i == ABSENT {
            self.heap.push(cpu as u32);
            self.sift_up(self.heap.len() - 1);
            return None;
        }
        if key < old {
            self.sift_up(i as usize);
        } else {
            self.sift_down(i as usize);
        }
        Some(old)
    }

    /// Removes `cpu`'s end; returns its epoch.
    fn clear(&mut self, cpu: usize) -> u32 {
        let i = self.pos[cpu] as usize;
        self.keys[cpu] = Key::MAX;
        self.pos[cpu] = ABSENT;
        let last = self.heap.pop().expect("a pending end");
        if i < self.heap.len() {
            // `last` fills the hole, and may belong above or below it.
            self.heap[i] = last;
            self.sift_down(i);
            self.sift_up(self.pos[last as usize] as usize);
        }
        self.epochs[cpu]
    }

    fn key_at(&self, i: usize) -> Key {
        self.keys[self.heap[i] as usize]
    }

    fn place(&mut self, i: usize, cpu: u32) {
        self.heap[i] = cpu;
        self.pos[cpu as usize] = i as u32;
    }

    fn sift_up(&mut self, mut i: usize) {
        let cpu = self.heap[i];
        let key = self.keys[cpu as usize];
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.key_at(parent) < key {
                break;
            }
            self.place(i, self.heap[parent]);
            i = parent;
        }
        self.place(i, cpu);
    }

    fn sift_down(&mut self, mut i: usize) {
        let cpu = self.heap[i];
        let key = self.keys[cpu as usize];
        let n = self.heap.len();
        loop {
            let mut child = 2 * i + 1;
            if child >= n {
                break;
            }
            if child + 1 < n && self.key_at(child + 1) < self.key_at(child) {
                child += 1;
            }
            if key < self.key_at(child) {
                break;
            }
            self.place(i, self.heap[child]);
            i = child;
        }
        self.place(i, cpu);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pops everything, as (time, event).
    fn drain(q: &mut EventQueue) -> Vec<(u64, Ev)> {
        std::iter::from_fn(|| q.pop().map(|(k, ev)| (key_time(k), ev))).collect()
    }

    #[test]
    fn ends_and_events_pop_in_time_then_creation_order() {
        for nr_cpus in [3, 4, 160] {
            let mut q = EventQueue::new(nr_cpus);
            let last = nr_cpus as Cpu - 1;
            q.push(10, Ev::Tick);
            q.set_end(last, 10, 7);
            q.push(5, Ev::Step);
            q.set_end(0, 20, 1);
            q.set_end(0, 3, 2); // replaces the end at 20
            q.push(10, Ev::WakeTask { task: 4 });
            let want = [
                (3, Ev::Done { cpu: 0, epoch: 2 }),
                (5, Ev::Step),
                (10, Ev::Tick),
                (
                    10,
                    Ev::Done {
                        cpu: last,
                        epoch: 7,
                    },
                ),
                (10, Ev::WakeTask { task: 4 }),
            ];
            assert_eq!(drain(&mut q), want, "{nr_cpus} CPUs");
        }
    }

    #[test]
    fn one_cpu() {
        let mut q = EventQueue::new(1);
        q.push(10, Ev::Tick);
        q.set_end(0, 10, 7);
        q.set_end(0, 12, 8);
        let want = [(10, Ev::Tick), (12, Ev::Done { cpu: 0, epoch: 8 })];
        assert_eq!(drain(&mut q), want);
    }

    #[test]
    fn replaced_ends_are_remembered_until_counted() {
        let mut q = EventQueue::new(4);
        q.set_end(1, 50, 1);
        q.set_end(1, 30, 2); // supersedes 50
        q.set_end(2, 10, 1);
        q.set_end(2, 40, 2); // supersedes 10
        let key_at = |t: u64| Key::from(t) << 64;
        assert_eq!(q.count_superseded_before(key_at(20), false), 0, "not yet");
        assert_eq!(q.count_superseded_before(key_at(20), true), 1);
        let rest = q.take_superseded_before(Key::MAX);
        assert_eq!(rest.iter().map(|&k| key_time(k)).collect::<Vec<_>>(), [50]);
    }
}
