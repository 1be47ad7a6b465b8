//! Workloads: what tasks do, as small programs of operations.
//!
//! A task's CPU demand is work (`Run`, in nanoseconds *at the machine's
//! nominal frequency*, i.e. cycles); its run time therefore depends on the
//! frequency of the core it runs on. `RunTime`, `Sleep` and timers are plain
//! time. Workloads come from rt-app JSON files ([`rtapp`]) or from the
//! built-in parametrised families ([`builtin`]).

pub mod builtin;
pub mod replay;
pub mod rtapp;

use serde::Serialize;

/// An amount, fixed or drawn uniformly (inclusive) from the task's PRNG.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Amount {
    Fixed(u64),
    Uniform(u64, u64),
}

/// One operation of a task program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Op {
    /// Compute: work worth this many ns at nominal frequency.
    Run(Amount),
    /// Busy for this many ns whatever the frequency.
    RunTime(Amount),
    /// Sleep for this many ns.
    Sleep(Amount),
    /// Sleep until the next activation of periodic timer `id` (per task).
    Timer {
        id: usize,
        period_ns: u64,
    },
    /// Wait until every participant reached barrier `id`.
    Barrier(usize),
    Lock(usize),
    Unlock(usize),
    /// Start a new task running program `program`.
    Fork {
        program: usize,
    },
    /// Block until every child of this task has exited.
    WaitChildren,
    /// Post one message on channel `chan`, waking a receiver. `sync`: the
    /// wakeup is synchronous (`WF_SYNC`), as a pipe or socket write's, not
    /// a condition variable's.
    Send {
        chan: usize,
        sync: bool,
    },
    /// Take one message from channel `id`, blocking while there is none.
    Recv(usize),
    /// Start of a loop body repeated `count` times (0: forever).
    LoopStart {
        count: u64,
    },
    /// End of the loop body starting at op index `start`.
    LoopEnd {
        start: usize,
    },
    /// On a guest's model, the task's next start on an idle vCPU waits this
    /// many ns for the vCPU (a replay's: the guest's delay at that wakeup)
    /// instead of a drawn delay.
    VcpuWakeup(u64),
}

/// A named program: what one kind of task does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Program {
    pub name: String,
    pub ops: Vec<Op>,
    /// The CPUs its tasks may run on (rt-app `cpus`), ascending; `None`:
    /// every CPU, or for a forked task its parent's (a fork inherits the
    /// parent's `cpus_ptr`: `dup_task_struct()`).
    pub cpus: Option<Vec<u32>>,
    /// Its initial instances start this long after time 0 (rt-app
    /// `delay`), ns.
    pub delay_ns: u64,
    /// Its initial instances start on this CPU (`start_cpu`: a replayed
    /// command's first CPU), without asking the policy; `None`: forked from
    /// CPU 0 and placed by the policy.
    pub start_cpu: Option<u32>,
    /// Its initial instances start as tasks woken from this CPU, their
    /// previous one (`prev_cpu`: a replayed other task, which existed
    /// before the workload), placed by the policy as a wakeup; `None`:
    /// as `start_cpu` says.
    pub prev_cpu: Option<u32>,
    /// Its tasks are kernel threads (`kernel_thread`: a replayed kernel
    /// thread, `PF_KTHREAD`), which Nest places by rules of their own.
    pub kernel_thread: bool,
    /// On a guest's model, its tasks' first start on an idle vCPU waits
    /// this many ns (`first_vcpu_wakeup`: a replay's, as [`Op::VcpuWakeup`]).
    pub first_vcpu_wakeup_ns: Option<u64>,
}

impl Program {
    /// A program of `ops`, free to run anywhere, started at time 0.
    pub fn new(name: &str, ops: Vec<Op>) -> Self {
        Self {
            name: name.to_owned(),
            ops,
            cpus: None,
            delay_ns: 0,
            start_cpu: None,
            prev_cpu: None,
            kernel_thread: false,
            first_vcpu_wakeup_ns: None,
        }
    }
}

/// The CPUs in Nest's nests when a workload starts (rt-app extension
/// `global.nests`: a replay of a recording of `scx_nest --trace-nests`
/// starts from the nests the guest had). Policies without nests ignore it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Nests {
    pub primary: Vec<u32>,
    pub reserve: Vec<u32>,
    /// How long each CPU had been idle at time 0, ns (`idle_us`); CPUs
    /// left out had just gone idle (or were running).
    pub idle_ns: std::collections::BTreeMap<u32, u64>,
}

impl Nests {
    /// How long `cpu` had been idle at time 0.
    pub fn idle_ns(&self, cpu: u32) -> u64 {
        self.idle_ns.get(&cpu).copied().unwrap_or(0)
    }
}

/// A complete workload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Workload {
    pub name: String,
    pub programs: Vec<Program>,
    /// Programs started at time 0, with their number of instances.
    pub initial: Vec<(usize, u32)>,
    /// Number of participants of each barrier.
    pub barriers: Vec<u32>,
    pub nr_locks: usize,
    pub nr_channels: usize,
    /// Stop the run after this long even if tasks remain.
    pub duration_ns: Option<u64>,
    /// Nest's nests at time 0; `None`: empty.
    pub initial_nests: Option<Nests>,
}

impl Workload {
    /// Total number of tasks started at time 0.
    pub fn nr_initial_tasks(&self) -> u32 {
        self.initial.iter().map(|&(_, n)| n).sum()
    }
}
