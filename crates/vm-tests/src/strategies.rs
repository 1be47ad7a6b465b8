//! Where forked children first ran, relative to their parent: the
//! observable difference between S_local (children on the waker's CPU) and
//! S_move (children moved away when the waker keeps running).

use std::collections::HashMap;

use nest_trace::{EventKind, Pid, Trace};

/// The pid of the idle task in switch events.
const IDLE_PID: Pid = 0;

/// For the children forked by `parent`: how many first ran on the CPU the
/// parent forked them from, how many elsewhere, and how long each waited
/// from its fork to its first run.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FirstRuns {
    pub on_parent_cpu: usize,
    pub elsewhere: usize,
    /// Children forked while another CPU ran nothing (as the trace's
    /// switches show): the ones S_move has somewhere to send.
    pub beside_idle: usize,
    /// How many of those first ran elsewhere.
    pub beside_idle_elsewhere: usize,
    pub fork_to_run_ns: Vec<u64>,
}

impl FirstRuns {
    pub fn children(&self) -> usize {
        self.on_parent_cpu + self.elsewhere
    }

    /// Median fork-to-first-run delay (0 with no children).
    pub fn median_delay_ns(&self) -> u64 {
        let mut delays = self.fork_to_run_ns.clone();
        delays.sort_unstable();
        delays.get(delays.len() / 2).copied().unwrap_or(0)
    }
}

/// Where a child was forked.
struct Fork {
    cpu: u32,
    ts_ns: u64,
    beside_idle: bool,
}

/// Count, for every child of `parent` in `trace`, whether its first run
/// was on the CPU of its fork event (the parent's CPU at that moment), and
/// whether another CPU was idle when it was forked.
pub fn first_runs(trace: &Trace, parent: Pid) -> FirstRuns {
    let mut forked = HashMap::new();
    // What each CPU runs, from its last switch (CPUs not seen yet: unknown).
    let mut running: HashMap<u32, Pid> = HashMap::new();
    let mut runs = FirstRuns::default();
    for event in &trace.events {
        match &event.kind {
            EventKind::NewTask {
                parent: p, child, ..
            } if *p == parent => {
                let beside_idle = running
                    .iter()
                    .any(|(&cpu, &pid)| cpu != event.cpu && pid == IDLE_PID);
                let fork = Fork {
                    cpu: event.cpu,
                    ts_ns: event.ts_ns,
                    beside_idle,
                };
                forked.insert(*child, fork);
            }
            EventKind::Switch { next, .. } => {
                running.insert(event.cpu, *next);
                if let Some(fork) = forked.remove(next) {
                    runs.count(&fork, event.cpu, event.ts_ns);
                }
            }
            _ => {}
        }
    }
    runs
}

impl FirstRuns {
    fn count(&mut self, fork: &Fork, first_cpu: u32, first_ts_ns: u64) {
        self.fork_to_run_ns
            .push(first_ts_ns.saturating_sub(fork.ts_ns));
        let elsewhere = first_cpu != fork.cpu;
        if elsewhere {
            self.elsewhere += 1;
        } else {
            self.on_parent_cpu += 1;
        }
        if fork.beside_idle {
            self.beside_idle += 1;
            self.beside_idle_elsewhere += usize::from(elsewhere);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nest_trace::{Event, PrevState, Topology};

    fn event(ts_ns: u64, cpu: u32, kind: EventKind) -> Event {
        Event { ts_ns, cpu, kind }
    }

    #[test]
    fn children_are_sorted_by_where_they_first_ran() {
        let switch = |next| EventKind::Switch {
            prev: 0,
            prev_state: PrevState::Runnable,
            next,
        };
        let fork = |child| EventKind::NewTask {
            parent: 10,
            child,
            comm: "c".into(),
        };
        let trace = Trace {
            topology: Topology::regular(1, 2, 1),
            meta: Vec::new(),
            events: vec![
                event(1, 0, fork(11)),
                event(2, 1, switch(11)), // elsewhere
                event(3, 0, fork(12)),
                event(4, 0, switch(12)), // on the parent's CPU
                event(5, 0, switch(12)), // later runs do not count
                event(5, 1, switch(0)),  // CPU 1 idles
                event(6, 0, fork(14)),   // beside an idle CPU
                event(6, 1, switch(14)), // elsewhere
                event(
                    6,
                    1,
                    EventKind::NewTask {
                        parent: 99,
                        child: 13,
                        comm: "other".into(),
                    },
                ),
                event(7, 0, switch(13)), // not a child of 10
            ],
        };
        let runs = first_runs(&trace, 10);
        assert_eq!(
            runs,
            FirstRuns {
                on_parent_cpu: 1,
                elsewhere: 2,
                beside_idle: 1,
                beside_idle_elsewhere: 1,
                fork_to_run_ns: vec![1, 1, 0],
            }
        );
        assert_eq!(runs.children(), 3);
        assert_eq!(runs.median_delay_ns(), 1);
    }
}
