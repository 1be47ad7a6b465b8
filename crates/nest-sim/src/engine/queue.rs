//! The event queue: a binary min-heap on (time, sequence number).
//!
//! Sequence numbers are unique, so the order is total and events with the
//! same time pop in creation order. Only the key is compared (deriving
//! `Ord` on the whole tuple made every heap step compare the event too).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::Ev;

struct Entry {
    at: u64,
    seq: u64,
    ev: Ev,
}

impl Ord for Entry {
    /// Reversed: `BinaryHeap` is a max-heap and the earliest event must
    /// come out first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

#[derive(Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl EventQueue {
    /// Schedules `ev` at time `at`, after the events already scheduled then.
    pub(crate) fn push(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            ev,
        });
    }

    /// The earliest event and its time.
    pub(crate) fn pop(&mut self) -> Option<(u64, Ev)> {
        self.heap.pop().map(|e| (e.at, e.ev))
    }

    /// Whether any pending event satisfies `f`.
    pub(crate) fn any(&self, f: impl Fn(&Ev) -> bool) -> bool {
        self.heap.iter().any(|e| f(&e.ev))
    }
}
