//! The event model shared by real traces (tracefs, perf, trace-cmd) and
//! simulator runs.
//!
//! A schedule is a time-ordered list of [`Event`]s, each on one CPU of a known
//! [`Topology`]. Everything downstream (metrics, pictures, exports) reads only
//! this model, so a simulated run and a recorded one can be compared side by
//! side. Times are nanoseconds from the start of the trace.

use serde::{Deserialize, Serialize};

/// A thread id (the kernel's `pid` of a task).
pub type Pid = u32;

pub use nest_topology::{Cpu, CpuPlace, Topology};

/// State of the task leaving the CPU at a context switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PrevState {
    /// Preempted or yielded: still runnable.
    Runnable,
    /// Went to sleep (waiting for I/O, a lock, a child, a timer...).
    Blocked,
    /// Exiting.
    Dead,
}

/// Which nest a CPU belongs to (Nest's own events).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Nest {
    None,
    Primary,
    Reserve,
}

/// What happened. The CPU it happened on is in [`Event::cpu`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum EventKind {
    /// Context switch from `prev` to `next` (pid 0 is the idle task).
    Switch {
        prev: Pid,
        prev_state: PrevState,
        next: Pid,
    },
    /// `pid` became runnable and was placed on `target_cpu`. The event's CPU
    /// is where the wakeup was traced: usually the waker's, the target's
    /// when the kernel queued the wakeup there (`ttwu_queue_wakelist()`).
    /// `waker` is the task that woke it, when the trace says (see
    /// [`Waker`]).
    Wakeup {
        pid: Pid,
        target_cpu: Cpu,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        waker: Option<Waker>,
    },
    /// `child` was forked by `parent`; the event's CPU is the parent's.
    NewTask {
        parent: Pid,
        child: Pid,
        comm: String,
    },
    /// `pid` ran `exec` and is now called `comm`.
    Exec { pid: Pid, comm: String },
    /// `pid` exited.
    Exit { pid: Pid },
    /// `pid` moved from `from` to `to` (the event's CPU is where the move was
    /// decided).
    Migrate { pid: Pid, from: Cpu, to: Cpu },
    /// The event's CPU now runs at `khz`.
    Frequency { khz: u32 },
    /// The CPU entered its idle loop.
    IdleEnter,
    /// The CPU left its idle loop.
    IdleExit,
    /// The CPU joined or left a Nest nest.
    NestChange { nest: Nest },
    /// Nest's policy placed `pid` on `target_cpu` (before the `Wakeup`
    /// that shows it), decided by the step `how` names: the policy's
    /// placement statistic (`attached`, `prev`, `primary`, `reserve`,
    /// `fork_reuse`, `warm_prev`, `fallback`, `fallback_wide`; `no_idle`
    /// when it found no idle CPU and the task waits, `target_cpu` then
    /// being its previous CPU). From `scx_nest --trace-placements` or a
    /// simulated Nest; the event's CPU is where the decision ran.
    Placement {
        pid: Pid,
        target_cpu: Cpu,
        how: String,
    },
    /// The CPU kept spinning to stay warm for `duration_ns`, until the end of
    /// the spin (interrupted early when `interrupted`).
    WarmSpin { duration_ns: u64, interrupted: bool },
    /// `pid` is known to be called `comm` (real traces name tasks on every
    /// switch; readers emit this when a name is first seen or changes).
    TaskName { pid: Pid, comm: String },
}

/// Who woke a task: the task running where `sched_waking` fired, when it
/// fired in task context (not in an interrupt, nor from the idle task).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waker {
    pub pid: Pid,
    /// The waker's `WF_SYNC` hint ("the waker goes to sleep after this
    /// wakeup": pipes, unix sockets), when the trace recorded the wake
    /// flags (`nest trace record`'s probe on `try_to_wake_up()`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub ts_ns: u64,
    pub cpu: Cpu,
    pub kind: EventKind,
}

/// The meta entry saying from when (ns, on the trace's clock) a recording
/// of `scx_nest --trace-nests` knows every CPU's nest: its first full
/// report. Before that, CPUs whose nest did not change are not known.
/// Traces without it know the nests from the start (`nest sim`'s), or
/// have none.
pub const NESTS_COMPLETE_META: &str = "nests_complete_from_ns";

/// The meta entry in which `nest trace record` lists the kernel threads
/// (`PF_KTHREAD` in /proc/PID/stat) alive when it started or stopped:
/// comma-separated pids.
pub const KERNEL_THREADS_META: &str = "kernel_threads";

/// The kernel threads of one trace ([`Trace::kernel_threads`]).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelThreads(Option<std::collections::BTreeSet<Pid>>);

impl KernelThreads {
    /// Is task `pid`, last named `comm`, a kernel thread?
    pub fn contains(&self, pid: Pid, comm: &str) -> bool {
        match &self.0 {
            Some(pids) => pids.contains(&pid),
            None => kernel_thread_name(comm),
        }
    }
}

/// Does `comm` look like the name of a kernel thread? Names with a `/`
/// (`kworker/u16:1`, `ksoftirqd/3`, `jbd2/vda1-8`, `irq/24-virtio0`: a
/// program's name is its file's, without one) and the kernel's own
/// singletons (`rcu_preempt`, `kcompactd0`, `kswapd0`, `khugepaged`...).
/// A user thread may still name itself so (`prctl(PR_SET_NAME)`): the
/// recorder's /proc list, when a trace has it, is exact.
pub fn kernel_thread_name(comm: &str) -> bool {
    const SINGLETONS: &[&str] = &[
        "kthreadd",
        "rcu_",
        "kcompactd",
        "kswapd",
        "khugepaged",
        "khungtaskd",
        "kdamond",
        "ksmd",
        "oom_reaper",
        "kauditd",
        "kdevtmpfs",
        "watchdogd",
    ];
    comm.contains('/') || SINGLETONS.iter().any(|s| comm.starts_with(s))
}

/// A whole schedule: where it ran, what ran, and what happened.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub topology: Topology,
    /// Free-form facts about the run: scheduler, kernel, machine model,
    /// workload, seed...
    pub meta: Vec<(String, String)>,
    /// Events in time order (ties keep the order they were produced in).
    pub events: Vec<Event>,
}

impl Trace {
    /// Time of the last event, or 0 for an empty trace.
    pub fn end_ns(&self) -> u64 {
        self.events.last().map_or(0, |e| e.ts_ns)
    }

    /// The value of the first meta entry called `key`.
    pub fn meta_get(&self, key: &str) -> Option<&str> {
        self.meta
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The pid of the command `nest trace record -- CMD` ran (meta
    /// `command_pid`), if recorded and a number.
    pub fn command_pid(&self) -> Option<Pid> {
        self.meta_get("command_pid").and_then(|p| p.parse().ok())
    }

    /// From when the trace knows every CPU's nest (meta
    /// [`NESTS_COMPLETE_META`]; 0 without it).
    pub fn nests_complete_from_ns(&self) -> u64 {
        self.meta_get(NESTS_COMPLETE_META)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// Which tasks are kernel threads: those `nest trace record` found in
    /// /proc (meta [`KERNEL_THREADS_META`]), else, in traces without that
    /// entry (imported, or recorded before it existed), those with a name
    /// the kernel gives its threads ([`kernel_thread_name`]). An error if
    /// the entry is not a list of pids.
    pub fn kernel_threads(&self) -> anyhow::Result<KernelThreads> {
        let Some(list) = self.meta_get(KERNEL_THREADS_META) else {
            return Ok(KernelThreads(None));
        };
        let pids = list
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| {
                p.trim().parse().map_err(|_| {
                    anyhow::anyhow!(
                        "meta `{KERNEL_THREADS_META}`: `{p}` is not a pid \
                         (expected comma-separated pids)"
                    )
                })
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(KernelThreads(Some(pids)))
    }

    /// Set meta entry `key` to `value`, replacing an existing entry.
    pub fn meta_set(&mut self, key: &str, value: impl Into<String>) {
        let value = value.into();
        match self.meta.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value,
            None => self.meta.push((key.to_string(), value)),
        }
    }

    /// The process tree of `root`: `root` and every task it or one of its
    /// descendants forked (processes and threads), transitively, from the
    /// trace's `NewTask` events. A pid reused after an exit is followed
    /// only while it belongs to the tree (forks seen after its exit are
    /// not counted).
    pub fn descendants(&self, root: Pid) -> std::collections::BTreeSet<Pid> {
        let mut tree = std::collections::BTreeSet::from([root]);
        let mut exited = std::collections::BTreeSet::new();
        for e in &self.events {
            match &e.kind {
                EventKind::NewTask { parent, child, .. }
                    if tree.contains(parent) && !exited.contains(parent) =>
                {
                    tree.insert(*child);
                    exited.remove(child);
                }
                EventKind::Exit { pid } if tree.contains(pid) => {
                    exited.insert(*pid);
                }
                _ => {}
            }
        }
        tree
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_follow_forks_transitively_and_stop_at_exits() {
        let ev = |ts_ns, kind| Event {
            ts_ns,
            cpu: 0,
            kind,
        };
        let fork = |parent, child| EventKind::NewTask {
            parent,
            child,
            comm: "x".into(),
        };
        let trace = Trace {
            topology: Topology::regular(1, 1, 1),
            meta: Vec::new(),
            events: vec![
                ev(1, fork(1, 2)), // outside the tree
                ev(2, fork(10, 11)),
                ev(3, fork(11, 12)), // grandchild
                ev(4, fork(12, 13)), // great-grandchild (a thread, say)
                ev(5, EventKind::Exit { pid: 11 }),
                ev(6, fork(11, 14)), // pid 11 reused outside the tree
                ev(7, fork(2, 15)),
            ],
        };
        let tree: Vec<Pid> = trace.descendants(10).into_iter().collect();
        assert_eq!(tree, vec![10, 11, 12, 13]);
        assert_eq!(
            trace.descendants(2).into_iter().collect::<Vec<_>>(),
            vec![2, 15]
        );
        assert_eq!(trace.descendants(99).len(), 1);
    }

    #[test]
    fn kernel_threads_come_from_the_recorders_list_else_from_names() {
        let mut trace = Trace::default();
        let by_name = trace.kernel_threads().unwrap();
        for comm in ["rcu_preempt", "kworker/u16:1", "ksoftirqd/3", "kcompactd0"] {
            assert!(by_name.contains(1, comm), "{comm}");
        }
        for comm in ["bash", "cc1", "kworkerish", ""] {
            assert!(!by_name.contains(1, comm), "{comm}");
        }
        // The recorder's list is exact: a user thread named like a kernel
        // thread is not one, a kernel thread of any name is.
        trace.meta_set(KERNEL_THREADS_META, "2,16");
        let listed = trace.kernel_threads().unwrap();
        assert!(listed.contains(16, "renamed"));
        assert!(!listed.contains(300, "rcu_preempt"));
        trace.meta_set(KERNEL_THREADS_META, "");
        assert!(!trace.kernel_threads().unwrap().contains(16, "rcu_preempt"));
        trace.meta_set(KERNEL_THREADS_META, "2,x");
        let err = trace.kernel_threads().unwrap_err().to_string();
        assert!(err.contains("`x` is not a pid"), "{err}");
    }
}
