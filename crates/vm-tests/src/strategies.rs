//! Where forked children first ran, relative to their parent: the
//! observable difference between S_local (children on the waker's CPU) and
//! S_move (children moved away when the waker keeps running).

use nest_trace::{EventKind, Pid, Trace};

/// For the children forked by `parent`: how many first ran on the CPU the
/// parent forked them from, how many elsewhere, and how long each waited
/// from its fork to its first run.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FirstRuns {
    pub on_parent_cpu: usize,
    pub elsewhere: usize,
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

/// Count, for every child of `parent` in `trace`, whether its first run
/// was on the CPU of its fork event (the parent's CPU at that moment).
pub fn first_runs(trace: &Trace, parent: Pid) -> FirstRuns {
    let mut forked_on = std::collections::HashMap::new();
    let mut runs = FirstRuns::default();
    for event in &trace.events {
        match &event.kind {
            EventKind::NewTask {
                parent: p, child, ..
            } if *p == parent => {
                forked_on.insert(*child, (event.cpu, event.ts_ns));
            }
            EventKind::Switch { next, .. } => {
                if let Some((cpu, forked_at)) = forked_on.remove(next) {
                    runs.fork_to_run_ns
                        .push(event.ts_ns.saturating_sub(forked_at));
                    if cpu == event.cpu {
                        runs.on_parent_cpu += 1;
                    } else {
                        runs.elsewhere += 1;
                    }
                }
            }
            _ => {}
        }
    }
    runs
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
                elsewhere: 1,
                fork_to_run_ns: vec![1, 1],
            }
        );
        assert_eq!(runs.children(), 2);
        assert_eq!(runs.median_delay_ns(), 1);
    }
}
