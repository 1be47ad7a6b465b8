//! Replay a recorded command in the simulator: turn the task tree of a
//! [`Trace`] into an rt-app workload ([`rtapp`](super::rtapp) format) that
//! `nest sim -w FILE` runs.
//!
//! The replayed tasks are the *root* (the recorded command) and every task
//! it forked, directly or not. Each becomes one rt-app task (the root with
//! `"instance": 1`, the others as templates with `"instance": 0`, started by
//! their parent's `fork`), named `<comm>-<pid>` (its last name in the trace),
//! whose events follow what the task did in the trace:
//!
//! - **run**: time running on a CPU, from switch-in to the next blocking
//!   switch-out, a fork or its exit. Preemptions (switch-out while runnable)
//!   do not split a burst, and time waiting in a run queue is dropped: the
//!   simulated scheduler makes its own queueing. Work is in ns at the
//!   nominal frequency (what rt-app's `run` means in the simulator):
//!   `work = sum(dt x f_cpu / f_nominal)` over the pieces of the burst,
//!   `f_cpu` = the CPU's last `Frequency` event, or `f_nominal` when the CPU
//!   has none yet (no cpufreq, e.g. in QEMU: run time is taken as time at
//!   nominal). `f_nominal` = [`ReplayOptions::nominal_khz`], else the
//!   trace's meta `nominal_khz`, else [`DEFAULT_NOMINAL_KHZ`] (2.3 GHz, the
//!   nominal frequency of the simulator's default machine).
//! - **fork**: a `NewTask` whose parent is replayed, placed in the
//!   parent's work where it wakes the child (its first `Wakeup`).
//! - **wait_children**: a blocked period during which at least one child of
//!   the task exited and after which no child forked so far is alive (a
//!   shell waiting for its command).
//! - **wake** and **wait for a wake**: a blocked period ended by a wakeup
//!   whose [`Waker`](nest_trace::Waker) is another replayed task, running
//!   then or since the wakee blocked (a pipe write, a futex wake, a child's
//!   exec ending its parent's vfork; a wakeup is recorded where it
//!   completes, which can be after the waker blocked), except a child's
//!   exit, which ends a wait for children, and an other task's wake of a
//!   task of the tree (a sleep, see `wake_by()`): the waker `send`s (with
//!   `WF_SYNC`, when the trace says the wakeup had it) or `resume`s
//!   (without) at that point of its run (or its last burst's end), and the wakee
//!   `suspend`s on its own channel `wake-<name>`, counting, so a wake that
//!   comes first in the simulation is not lost. The simulated scheduler
//!   then sees the waker and the sync flag, as the kernel's `wake_affine()`
//!   does.
//! - **sleep**: any other blocked period, from the blocking switch-out to
//!   the `Wakeup` (or the switch-in when the wakeup was not recorded).
//! - **vcpu_wakeup**: a blocked period whose wakeup was recorded on one
//!   CPU and aimed at another, idle, one gets the time that CPU took to
//!   leave idle (`vcpu_wakeup` before the blocking event; a task's first
//!   wakeup, `first_vcpu_wakeup` on the task): in a guest, the host
//!   waking the vCPU, which a guest's model then replays for that wakeup.
//!
//! Approximations (the simulator's format cannot express more):
//!
//! - Wakeups by tasks outside the tree (replayed or not), from interrupts
//!   (timers, I/O completions) or with no recorded waker (traces without
//!   `sched_waking`) become plain sleeps of the recorded length; waiting
//!   for one of several children, or for a child plus something else, too.
//! - Tasks outside the root's tree (other processes, kernel threads, the
//!   recorder) are not replayed unless asked ([`ReplayOptions::others`]),
//!   nor is what the root did before the first event naming it; the root
//!   starts at time 0 of the simulation on the CPU it first ran on
//!   (`start_cpu`, numbered as [`ReplayOptions::target`] numbers the CPU
//!   at its place): where the kernel placed the command is the
//!   recording's starting point, not one of the decisions compared.
//!
//! **Other tasks** ([`ReplayOptions::others`]): every task outside the
//! tree woken while the command runs (from the root's first event to the
//! tree's last) becomes a task of its own, started (`delay`) at its first
//! wakeup after the root's first event, as a task woken from its previous
//! CPU (`prev_cpu`: where that wakeup moved it from, else where it woke;
//! numbered as the root's CPU) and placed by the simulated scheduler, then
//! running and blocking as recorded, with the same conversion (its wakes
//! by replayed tasks included; its wakes of the tree's tasks left out).
//! The task existed before the command:
//! forked from the simulator's CPU 0 instead, its first placement searched
//! from there, and Nest's fallback took CPU 0 into the nests. A per-CPU
//! kernel thread, named `name/N` or `name/N:M` with N a CPU of the trace
//! (`kworker/0:0`, `ksoftirqd/3`, `migration/2`; not the unbound
//! `kworker/u16:1`), may run on CPU N only (`cpus`), as the kernel binds
//! it (`kthread_bind()`); the others run anywhere. Kernel threads are
//! marked (`kernel_thread`, from [`Trace::kernel_threads`]: the recorder's
//! /proc list, else their names), since scx_nest places them by rules of
//! their own (`NEST_TASK_KTHREAD` in policy/nest_policy.c).
//!
//! **Nests**: when the trace has `NestChange` events (a recording of
//! `scx_nest --trace-nests`, or a simulated Nest's trace), the workload
//! starts with the nests the trace had when the command started
//! (`global.nests`, numbered as the root's CPU), so the simulated Nest
//! does not start empty where scx_nest had the CPUs of the guest's other
//! tasks in its nests. A recording knows every CPU's nest only from its
//! first full report (meta `nests_complete_from_ns`); a command that
//! started before it starts from the nests as they were then. Each CPU
//! of the nests comes with how long it had been idle when the command
//! started (`idle_us`: since its last switch to idle in the trace, or
//! since the trace's start).
//! - A task still running when the trace ends stops there; one blocked
//!   then sleeps until the trace's end, and stops there (it had not
//!   exited when the recording stopped).
//! - Threads are tasks like processes (the trace has no thread groups);
//!   exec only renames a task; priorities and scheduling classes are not
//!   recorded, nor affinities other than the per-CPU kernel threads' (told
//!   by their names).

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use nest_trace::{Cpu, EventKind, Nest, Pid, PrevState, Topology, Trace, Waker, metrics};
use serde::ser::{Serialize, SerializeMap, Serializer};

use super::Nests;

/// Nominal frequency assumed when neither the options nor the trace give
/// one: 2.3 GHz, the simulator's default machine (`xeon-gold-5218-2s`).
pub const DEFAULT_NOMINAL_KHZ: u32 = 2_300_000;

/// Which task is the recorded command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Root {
    /// Meta `command_pid` (stored by `nest trace record`), else the first
    /// task forked in the trace.
    #[default]
    Auto,
    /// This pid.
    Pid(Pid),
    /// The first task known by this name (fork, exec or rename).
    Comm(String),
}

/// Options of [`replay`].
#[derive(Clone, Debug, Default)]
pub struct ReplayOptions {
    pub root: Root,
    /// Nominal frequency the work is expressed at (see the module docs).
    pub nominal_khz: Option<u32>,
    /// Also replay the tasks outside the command's tree (see the module
    /// docs, "Other tasks").
    pub others: bool,
    /// The machine the workload is for: the CPUs the workload names (the
    /// root's parent's, other tasks' pins) are its CPUs at the same places
    /// as the trace's (a guest may number its CPUs otherwise than the
    /// simulator's model of it); `None`: the trace's numbers.
    pub target: Option<Topology>,
}

/// One operation of a replayed task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplayOp {
    /// Work worth this many ns at the nominal frequency.
    Run(u64),
    /// Blocked for this many ns.
    Sleep(u64),
    /// Fork the task with this pid.
    Fork(Pid),
    /// Block until every child forked so far has exited.
    WaitChildren,
    /// Wake the replayed task with this pid (`sync`: `WF_SYNC`).
    Wake { pid: Pid, sync: bool },
    /// Block until another replayed task wakes this one.
    WaitWake,
    /// The next blocked period's wakeup found an idle vCPU, which took
    /// this many ns to run the task (`vcpu_wakeup` in
    /// [`rtapp`](super::rtapp)).
    VcpuWakeup(u64),
}

/// One replayed task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayTask {
    pub pid: Pid,
    /// The task's last name in the trace.
    pub comm: String,
    /// The replayed task that forked it (`None` for the root and the
    /// other tasks).
    pub parent: Option<Pid>,
    /// An other task's start after the root's first event, ns.
    pub delay_ns: Option<u64>,
    /// The one CPU a per-CPU kernel thread may run on.
    pub cpu: Option<Cpu>,
    /// The CPU the root first ran on.
    pub start_cpu: Option<Cpu>,
    /// An other task's CPU before its first wakeup in the command's
    /// window (a per-CPU kernel thread's: its own).
    pub prev_cpu: Option<Cpu>,
    /// An other task that is a kernel thread ([`Trace::kernel_threads`]).
    pub kernel_thread: bool,
    /// Its first wakeup (a fork's, or an other task's first in the
    /// command's window) found an idle vCPU, which took this many ns.
    pub first_vcpu_wakeup_ns: Option<u64>,
    pub ops: Vec<ReplayOp>,
}

impl ReplayTask {
    /// The rt-app task name: `<comm>-<pid>` (`task-<pid>` if unnamed).
    pub fn name(&self) -> String {
        let comm = if self.comm.is_empty() {
            "task"
        } else {
            &self.comm
        };
        format!("{comm}-{}", self.pid)
    }
}

/// A trace's task tree as a workload; serialises to the rt-app document
/// (see [`Replay::to_json_string`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    /// The root first, then the others of its tree in the order they were
    /// forked, then the other tasks in the order they started.
    pub tasks: Vec<ReplayTask>,
    pub root_pid: Pid,
    pub nominal_khz: u32,
    /// From the root's first event to the last event of the tree's tasks.
    pub recorded_ns: u64,
    /// Blocked periods replayed as `wait_children`, as a wait for another
    /// replayed task's wake, and as `sleep`.
    pub waits: usize,
    pub woken: usize,
    pub sleeps: usize,
    /// Tasks outside the tree replayed ([`ReplayOptions::others`]).
    pub others: usize,
    /// The nests when the command started, from the trace's `NestChange`
    /// events (see the module docs, "Nests"); `None` without them.
    pub nests: Option<Nests>,
}

impl Replay {
    /// Total work of all tasks, in ns at the nominal frequency.
    pub fn total_work_ns(&self) -> u64 {
        self.tasks
            .iter()
            .flat_map(|t| &t.ops)
            .map(|op| match op {
                ReplayOp::Run(ns) => *ns,
                _ => 0,
            })
            .sum()
    }

    /// The rt-app JSON document (pretty-printed; events in order).
    pub fn to_json_string(&self) -> String {
        // Serialising plain maps of strings and numbers cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// The channel a replayed task waits on for its wakers.
fn wake_channel(task_name: &str) -> String {
    format!("wake-{task_name}")
}

/// Microseconds as rt-app writes them; the parser rounds back to the ns.
fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

impl Serialize for Replay {
    /// `{"replay": {facts}, "tasks": {name: {events in order}}}`; the
    /// simulator's parser ignores the `replay` object.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Facts<'a>(&'a Replay);
        impl Serialize for Facts<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let r = self.0;
                let mut m = s.serialize_map(None)?;
                m.serialize_entry("generator", "nest trace replay")?;
                m.serialize_entry("root_pid", &r.root_pid)?;
                m.serialize_entry("nominal_khz", &r.nominal_khz)?;
                m.serialize_entry("recorded_us", &us(r.recorded_ns))?;
                m.serialize_entry("work_us", &us(r.total_work_ns()))?;
                m.serialize_entry("tasks", &r.tasks.len())?;
                m.serialize_entry("waits", &r.waits)?;
                m.serialize_entry("woken", &r.woken)?;
                m.serialize_entry("sleeps", &r.sleeps)?;
                if r.others > 0 {
                    m.serialize_entry("others", &r.others)?;
                }
                m.end()
            }
        }
        struct Tasks<'a>(&'a Replay);
        impl Serialize for Tasks<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let names: BTreeMap<Pid, String> =
                    self.0.tasks.iter().map(|t| (t.pid, t.name())).collect();
                let mut m = s.serialize_map(Some(self.0.tasks.len()))?;
                for t in &self.0.tasks {
                    m.serialize_entry(&t.name(), &TaskEvents(t, &names))?;
                }
                m.end()
            }
        }
        struct TaskEvents<'a>(&'a ReplayTask, &'a BTreeMap<Pid, String>);
        impl Serialize for TaskEvents<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let (t, names) = (self.0, self.1);
                let mut m = s.serialize_map(None)?;
                if t.parent.is_some() {
                    m.serialize_entry("instance", &0)?;
                }
                if let Some(ns) = t.delay_ns {
                    m.serialize_entry("delay", &us(ns))?;
                }
                if let Some(cpu) = t.cpu {
                    m.serialize_entry("cpus", &[cpu])?;
                }
                if let Some(cpu) = t.start_cpu {
                    m.serialize_entry("start_cpu", &cpu)?;
                }
                if let Some(cpu) = t.prev_cpu {
                    m.serialize_entry("prev_cpu", &cpu)?;
                }
                if t.kernel_thread {
                    m.serialize_entry("kernel_thread", &true)?;
                }
                if let Some(ns) = t.first_vcpu_wakeup_ns {
                    m.serialize_entry("first_vcpu_wakeup", &us(ns))?;
                }
                for (i, op) in t.ops.iter().enumerate() {
                    match op {
                        ReplayOp::Run(ns) => m.serialize_entry(&format!("run{i}"), &us(*ns))?,
                        ReplayOp::Sleep(ns) => m.serialize_entry(&format!("sleep{i}"), &us(*ns))?,
                        ReplayOp::Fork(pid) => {
                            let name = names.get(pid).map_or("", String::as_str);
                            m.serialize_entry(&format!("fork{i}"), name)?
                        }
                        ReplayOp::WaitChildren => {
                            m.serialize_entry(&format!("wait_children{i}"), &true)?
                        }
                        ReplayOp::Wake { pid, sync } => {
                            let name = names.get(pid).map_or("", String::as_str);
                            let op = if *sync { "send" } else { "resume" };
                            m.serialize_entry(&format!("{op}{i}"), &wake_channel(name))?
                        }
                        ReplayOp::WaitWake => {
                            m.serialize_entry(&format!("suspend{i}"), &wake_channel(&t.name()))?
                        }
                        ReplayOp::VcpuWakeup(ns) => {
                            m.serialize_entry(&format!("vcpu_wakeup{i}"), &us(*ns))?
                        }
                    }
                }
                m.end()
            }
        }
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("replay", &Facts(self))?;
        if let Some(nests) = &self.nests {
            let idle_us: BTreeMap<String, f64> = nests
                .idle_ns
                .iter()
                .map(|(cpu, &ns)| (cpu.to_string(), us(ns)))
                .collect();
            let nests = serde_json::json!({
                "primary": nests.primary,
                "reserve": nests.reserve,
                "idle_us": idle_us,
            });
            m.serialize_entry("global", &serde_json::json!({ "nests": nests }))?;
        }
        m.serialize_entry("tasks", &Tasks(self))?;
        m.end()
    }
}

/// What a replayed task is doing while the trace is read.
#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    /// Forked (or first seen) and not yet run, or preempted.
    Runnable,
    /// Running on `cpu` since `since` (work accounted up to `since`).
    Running {
        cpu: Cpu,
        since: u64,
    },
    /// Blocked since `since`; woken at `woken` if the wakeup was seen,
    /// by another replayed task if `by_task`, onto an idle vCPU that took
    /// `vcpu_ns` to run it if that was measured.
    Blocked {
        since: u64,
        woken: Option<u64>,
        by_task: bool,
        vcpu_ns: Option<u64>,
    },
    Dead,
}

struct Builder {
    task: ReplayTask,
    state: State,
    /// Work of the current burst not yet emitted, ns at nominal.
    work: f64,
    /// Forked children: pid and exit time once exited.
    children: Vec<(Pid, Option<u64>)>,
    /// The CPU the task first ran on, numbered as the trace's.
    first_cpu: Option<Cpu>,
    /// Outside the root's tree ([`ReplayOptions::others`]), or forked by
    /// such a task.
    other: bool,
}

impl Builder {
    fn new(pid: Pid, comm: String, parent: Option<Pid>) -> Self {
        Self {
            task: ReplayTask {
                pid,
                comm,
                parent,
                delay_ns: None,
                cpu: None,
                start_cpu: None,
                prev_cpu: None,
                kernel_thread: false,
                first_vcpu_wakeup_ns: None,
                ops: Vec::new(),
            },
            state: State::Runnable,
            work: 0.0,
            children: Vec::new(),
            first_cpu: None,
            other: false,
        }
    }

    /// Appends `op`, merging it into the previous run or sleep.
    fn push(&mut self, op: ReplayOp) {
        match (self.task.ops.last_mut(), &op) {
            (_, ReplayOp::Run(0) | ReplayOp::Sleep(0)) => {}
            (Some(ReplayOp::Run(a)), ReplayOp::Run(b)) => *a += b,
            (Some(ReplayOp::Sleep(a)), ReplayOp::Sleep(b)) => *a += b,
            _ => self.task.ops.push(op),
        }
    }

    /// The task starts running on `cpu` at `since` (seen at `now`): a
    /// blocked period before it becomes a wait for another replayed task's
    /// wake, a wait for children or a sleep.
    fn switch_in(&mut self, cpu: Cpu, since: u64, now: u64, counts: &mut Counts) {
        if let State::Blocked {
            since: from,
            woken,
            by_task,
            vcpu_ns,
        } = self.state
        {
            let end = woken.unwrap_or(now);
            let child_exited = self
                .children
                .iter()
                .any(|c| c.1.is_some_and(|x| from <= x && x <= end));
            let child_alive = self.children.iter().any(|c| c.1.is_none_or(|x| x > end));
            let block = if by_task {
                counts.woken += 1;
                ReplayOp::WaitWake
            } else if child_exited && !child_alive {
                counts.waits += 1;
                ReplayOp::WaitChildren
            } else {
                counts.sleeps += 1;
                ReplayOp::Sleep(end.saturating_sub(from))
            };
            // A sleep that merges into the previous one, or of 0 ns, has
            // no wakeup of its own.
            let wakes = !matches!(
                (self.task.ops.last(), &block),
                (_, ReplayOp::Sleep(0)) | (Some(ReplayOp::Sleep(_)), ReplayOp::Sleep(_))
            );
            if let Some(ns) = vcpu_ns.filter(|_| wakes) {
                self.push(ReplayOp::VcpuWakeup(ns));
            }
            self.push(block);
        }
        if self.state != State::Dead {
            self.state = State::Running { cpu, since };
            self.first_cpu.get_or_insert(cpu);
        }
    }

    /// Ends the current burst at `now` (the task runs on), so that `op`
    /// happens at this point of its work.
    fn act(&mut self, now: u64, op: ReplayOp, freqs: &Freqs) {
        if let State::Running { cpu, since } = self.state {
            self.work += freqs.work(cpu, now - since);
            self.state = State::Running { cpu, since: now };
        }
        self.flush_work();
        self.push(op);
    }

    /// Whether `pid` is a child of this task that has exited.
    fn exited_child(&self, pid: Pid) -> bool {
        self.children.iter().any(|c| c.0 == pid && c.1.is_some())
    }

    /// Emits the pending work as one run.
    fn flush_work(&mut self) {
        let ns = self.work.round() as u64;
        self.work = 0.0;
        self.push(ReplayOp::Run(ns));
    }
}

/// How the blocked periods were replayed (see [`Replay`]).
#[derive(Default)]
struct Counts {
    waits: usize,
    woken: usize,
    sleeps: usize,
}

/// Frequencies: the CPU's last `Frequency` and the nominal one.
struct Freqs {
    khz: BTreeMap<Cpu, u32>,
    nominal_khz: f64,
}

impl Freqs {
    /// Work in ns at nominal of `dt` ns on `cpu`.
    fn work(&self, cpu: Cpu, dt: u64) -> f64 {
        match self.khz.get(&cpu) {
            Some(&khz) => dt as f64 * f64::from(khz) / self.nominal_khz,
            None => dt as f64,
        }
    }
}

/// The CPU a per-CPU kernel thread named `comm` is bound to: `name/N` or
/// `name/N:M`, N one of the trace's `nr_cpus` CPUs (`kworker/0:0`,
/// `ksoftirqd/3`); `None` for any other name (`kworker/u16:1`,
/// `rcu_preempt`).
pub fn per_cpu_kthread_cpu(comm: &str, nr_cpus: usize) -> Option<Cpu> {
    let (_, tail) = comm.rsplit_once('/')?;
    let n = tail.split_once(':').map_or(tail, |(n, _)| n);
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok().filter(|&cpu: &Cpu| (cpu as usize) < nr_cpus)
}

/// The CPU a task named `comm` is pinned to when it is a per-CPU kernel
/// thread, numbered as `opts.target`'s.
fn pinned_cpu(trace: &Trace, opts: &ReplayOptions, comm: &str) -> Result<Option<Cpu>> {
    per_cpu_kthread_cpu(comm, trace.topology.nr_cpus())
        .map(|cpu| target_cpu(trace, opts, cpu, &format!("`{comm}` is bound to")))
        .transpose()
}

/// The nests when the command started (`start`), numbered as `opts.target`
/// numbers the CPUs, with how long each of their CPUs had been idle then
/// (since its last switch to idle; one idle since the trace's start counts
/// from there); `None` when the trace has no `NestChange` events. A
/// recording that knows the nests in full only later (meta
/// `nests_complete_from_ns`) gives them as they were then.
fn nests_at_start(trace: &Trace, opts: &ReplayOptions, start: u64) -> Result<Option<Nests>> {
    let at = start.max(trace.nests_complete_from_ns());
    let mut nests: BTreeMap<Cpu, Nest> = BTreeMap::new();
    // When each CPU last went idle (None: running), up to `start`.
    let mut idle_since: BTreeMap<Cpu, Option<u64>> = BTreeMap::new();
    let mut any = false;
    for e in &trace.events {
        match e.kind {
            EventKind::NestChange { nest } => {
                any = true;
                if e.ts_ns <= at {
                    nests.insert(e.cpu, nest);
                }
            }
            EventKind::Switch { next, .. } if e.ts_ns <= start => {
                idle_since.insert(e.cpu, (next == 0).then_some(e.ts_ns));
            }
            _ => {}
        }
    }
    if !any {
        return Ok(None);
    }
    let mut out = Nests::default();
    for (cpu, nest) in nests {
        let list = match nest {
            Nest::Primary => &mut out.primary,
            Nest::Reserve => &mut out.reserve,
            Nest::None => continue,
        };
        let target = target_cpu(trace, opts, cpu, "the nests held")?;
        list.push(target);
        let idle_ns = match idle_since.get(&cpu) {
            Some(Some(since)) => start - since,
            Some(None) => 0,
            None => start,
        };
        if idle_ns > 0 {
            out.idle_ns.insert(target, idle_ns);
        }
    }
    out.primary.sort_unstable();
    out.reserve.sort_unstable();
    Ok(Some(out))
}

/// The trace's CPU `cpu` numbered as `opts.target` numbers the CPU at its
/// place (socket, core, thread); an error saying what `what` the CPU when
/// that machine has none.
fn target_cpu(trace: &Trace, opts: &ReplayOptions, cpu: Cpu, what: &str) -> Result<Cpu> {
    let Some(target) = &opts.target else {
        return Ok(cpu);
    };
    match trace.topology.same_place_in(cpu, target) {
        Some(c) => Ok(c),
        None => bail!("{what} CPU {cpu}, which has no CPU at its place on the target machine"),
    }
}

/// Finds the root task's pid, or explains why there is none.
fn find_root(trace: &Trace, root: &Root) -> Result<Pid> {
    let names = || {
        trace.events.iter().filter_map(|e| match &e.kind {
            EventKind::NewTask { child, comm, .. } => Some((*child, comm)),
            EventKind::Exec { pid, comm } | EventKind::TaskName { pid, comm } => Some((*pid, comm)),
            _ => None,
        })
    };
    match root {
        Root::Pid(pid) => {
            if trace.events.iter().any(|e| mentions(e, *pid)) {
                Ok(*pid)
            } else {
                bail!("pid {pid} does not appear in the trace")
            }
        }
        Root::Comm(name) => match names().find(|(_, c)| *c == name) {
            Some((pid, _)) => Ok(pid),
            None => bail!("no task called `{name}` in the trace"),
        },
        Root::Auto => {
            if let Some(v) = trace.meta_get("command_pid") {
                return v
                    .parse()
                    .map_err(|_| anyhow::anyhow!("meta command_pid: expected a pid, found `{v}`"));
            }
            trace
                .events
                .iter()
                .find_map(|e| match e.kind {
                    EventKind::NewTask { child, .. } => Some(child),
                    _ => None,
                })
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "the trace has no meta command_pid and forks no task: give --pid or --comm"
                    )
                })
        }
    }
}

/// The forks (child, parent) of `unwoken` that happen at event `e`, taken
/// out of it: the parent forks when it wakes the child up
/// (`wake_up_new_task()`), which `sched_process_fork` precedes by
/// `sched_ext`'s task initialisation and any preemption of the parent in
/// between (up to 8 ms in the emulated guest under scx_nest). Should the
/// wakeup be missing, the fork happens when the child is first seen
/// running or the parent stops running, whichever comes first.
fn forks_done(e: &nest_trace::Event, unwoken: &mut BTreeMap<Pid, Pid>) -> Vec<(Pid, Pid)> {
    if unwoken.is_empty() {
        return Vec::new();
    }
    let done = |child: Pid, parent: Pid| match &e.kind {
        EventKind::Wakeup { pid, .. } => *pid == child,
        EventKind::Switch { prev, next, .. } => *next == child || *prev == parent,
        EventKind::Exit { pid } => *pid == parent,
        _ => running_pid(e) == Some(child),
    };
    let due: Vec<(Pid, Pid)> = unwoken
        .iter()
        .filter(|&(&c, &p)| done(c, p))
        .map(|(&c, &p)| (c, p))
        .collect();
    for (child, _) in &due {
        unwoken.remove(child);
    }
    due
}

/// The tasks event `e` is about (idle, pid 0, included).
fn pids(e: &nest_trace::Event) -> [Option<Pid>; 2] {
    match &e.kind {
        EventKind::Switch { prev, next, .. } => [Some(*prev), Some(*next)],
        EventKind::NewTask { parent, child, .. } => [Some(*parent), Some(*child)],
        EventKind::Wakeup { pid, .. }
        | EventKind::Exit { pid }
        | EventKind::Migrate { pid, .. }
        | EventKind::Exec { pid, .. }
        | EventKind::TaskName { pid, .. } => [Some(*pid), None],
        _ => [None, None],
    }
}

/// The task event `e` shows running on the event's CPU, if any.
fn running_pid(e: &nest_trace::Event) -> Option<Pid> {
    match &e.kind {
        EventKind::Switch { prev, .. } => Some(*prev),
        EventKind::NewTask { parent, .. } => Some(*parent),
        EventKind::Exec { pid, .. } | EventKind::Exit { pid } => Some(*pid),
        _ => None,
    }
    .filter(|&p| p != 0)
}

/// Whether event `e` is about task `pid`.
fn mentions(e: &nest_trace::Event, pid: Pid) -> bool {
    pids(e).contains(&Some(pid))
}

/// Turns the task tree of `trace` rooted at the recorded command into a
/// workload (see the module docs for the conversion and what it
/// approximates). Fails when the root cannot be found.
pub fn replay(trace: &Trace, opts: &ReplayOptions) -> Result<Replay> {
    let root = find_root(trace, &opts.root)?;
    let nominal_khz = match opts.nominal_khz {
        Some(k) => k,
        None => match trace.meta_get("nominal_khz") {
            Some(v) => v
                .parse()
                .map_err(|_| anyhow::anyhow!("meta nominal_khz: expected kHz, found `{v}`"))?,
            None => DEFAULT_NOMINAL_KHZ,
        },
    };
    if nominal_khz == 0 {
        bail!("the nominal frequency must be > 0 kHz");
    }
    let mut freqs = Freqs {
        khz: BTreeMap::new(),
        nominal_khz: f64::from(nominal_khz),
    };
    let mut tasks: BTreeMap<Pid, Builder> = BTreeMap::new();
    // Replayed tasks in fork order.
    let mut order: Vec<Pid> = Vec::new();
    // Latest name of every task, for tasks named before they are replayed.
    let mut comms: BTreeMap<Pid, String> = BTreeMap::new();
    let mut start: Option<u64> = None;
    let mut counts = Counts::default();
    // Last event about a task of the tree.
    let mut last = 0;
    // Tasks outside the tree, in the order they started.
    let mut others: Vec<Pid> = Vec::new();
    // Where each task was since its last switch-in, when it has been
    // moved since (by its wakeup, `set_task_cpu()`).
    let mut moved_from: BTreeMap<Pid, Cpu> = BTreeMap::new();
    // Children whose fork has been seen but not their first wakeup, and
    // their parents.
    let mut unwoken: BTreeMap<Pid, Pid> = BTreeMap::new();
    // How long each wakeup onto an idle CPU took to run its task, by task
    // and wakeup time: a guest's vCPU wake-ups.
    let vcpu_wakeups: BTreeMap<(Pid, u64), u64> = metrics::idle_cpu_wakeups_of_tasks(trace)
        .into_iter()
        .map(|(pid, at, wakeup)| ((pid, at), wakeup.delay_ns))
        .collect();

    for e in &trace.events {
        let ts = e.ts_ns;
        for (child, parent) in forks_done(e, &mut unwoken) {
            if let Some(p) = tasks.get_mut(&parent) {
                p.act(ts, ReplayOp::Fork(child), &freqs);
            }
        }
        if start.is_none() && mentions(e, root) {
            start = Some(ts);
            let comm = comms.get(&root).cloned().unwrap_or_default();
            tasks.insert(root, Builder::new(root, comm, None));
            order.push(root);
        }
        // Tasks seen running although their switch-in was not recorded (it
        // happens in real traces): running since their wakeup, or now.
        if let Some(pid) = running_pid(e)
            && let Some(t) = tasks.get_mut(&pid)
        {
            let since = match t.state {
                State::Blocked { woken: Some(w), .. } => w,
                _ => ts,
            };
            if matches!(t.state, State::Runnable | State::Blocked { .. }) {
                t.switch_in(e.cpu, since, ts, &mut counts);
            }
        }
        match &e.kind {
            EventKind::NewTask {
                parent,
                child,
                comm,
            } => {
                comms.insert(*child, comm.clone());
                if let Some(t) = tasks.get_mut(child) {
                    t.task.comm = comm.clone();
                }
                if *child != root
                    && let Some(p) = tasks.get_mut(parent)
                {
                    unwoken.insert(*child, *parent);
                    p.children.push((*child, None));
                    let mut c = Builder::new(*child, comm.clone(), Some(*parent));
                    // A child of an other task (kthreadd's kworkers) is
                    // outside the tree too.
                    c.other = p.other;
                    tasks.insert(*child, c);
                    order.push(*child);
                }
            }
            EventKind::Exec { pid, comm } | EventKind::TaskName { pid, comm } => {
                comms.insert(*pid, comm.clone());
                if let Some(t) = tasks.get_mut(pid) {
                    t.task.comm = comm.clone();
                }
            }
            EventKind::Frequency { khz } => {
                for t in tasks.values_mut() {
                    if let State::Running { cpu, since } = t.state
                        && cpu == e.cpu
                    {
                        t.work += freqs.work(cpu, ts - since);
                        t.state = State::Running { cpu, since: ts };
                    }
                }
                freqs.khz.insert(e.cpu, *khz);
            }
            EventKind::Wakeup {
                pid,
                target_cpu: woken_cpu,
                waker,
            } => {
                if opts.others
                    && let Some(start) = start
                    && *pid != 0
                    && !tasks.contains_key(pid)
                {
                    let comm = comms.get(pid).cloned().unwrap_or_default();
                    let mut t = Builder::new(*pid, comm, None);
                    t.other = true;
                    t.task.delay_ns = Some(ts - start);
                    t.task.cpu = pinned_cpu(trace, opts, &t.task.comm)?;
                    // Its previous CPU: where its wakeup moved it from,
                    // else where it was woken (it stayed).
                    let prev = moved_from.get(pid).copied().unwrap_or(*woken_cpu);
                    t.task.prev_cpu = Some(prev);
                    tasks.insert(*pid, t);
                    others.push(*pid);
                }
                let vcpu_ns = vcpu_wakeups.get(&(*pid, ts)).copied();
                if let Some(t) = tasks.get_mut(pid)
                    && t.first_cpu.is_none()
                    && t.state == State::Runnable
                {
                    t.task.first_vcpu_wakeup_ns = t.task.first_vcpu_wakeup_ns.or(vcpu_ns);
                }
                if let Some(t) = tasks.get(pid)
                    && let State::Blocked {
                        since, woken: None, ..
                    } = t.state
                {
                    let by_task =
                        waker.is_some_and(|w| wake_by(&mut tasks, w, *pid, since, ts, &freqs));
                    if let Some(t) = tasks.get_mut(pid) {
                        t.state = State::Blocked {
                            since,
                            woken: Some(ts),
                            by_task,
                            vcpu_ns,
                        };
                    }
                }
            }
            EventKind::Migrate { pid, from, .. } => {
                moved_from.entry(*pid).or_insert(*from);
            }
            EventKind::Exit { pid } => {
                let parent = tasks.get(pid).and_then(|t| t.task.parent);
                if let Some(p) = parent.and_then(|p| tasks.get_mut(&p))
                    && let Some(c) = p.children.iter_mut().find(|c| c.0 == *pid)
                {
                    c.1 = Some(ts);
                }
            }
            EventKind::Switch {
                prev,
                prev_state,
                next,
            } => {
                if let Some(t) = tasks.get_mut(prev)
                    && let State::Running { cpu, since } = t.state
                {
                    t.work += freqs.work(cpu, ts - since);
                    t.state = match prev_state {
                        PrevState::Runnable => State::Runnable,
                        PrevState::Blocked => {
                            t.flush_work();
                            State::Blocked {
                                since: ts,
                                woken: None,
                                by_task: false,
                                vcpu_ns: None,
                            }
                        }
                        PrevState::Dead => {
                            t.flush_work();
                            State::Dead
                        }
                    };
                }
                moved_from.remove(next);
                if let Some(t) = tasks.get_mut(next) {
                    t.switch_in(e.cpu, ts, ts, &mut counts);
                }
            }
            _ => {}
        }
        if pids(e)
            .into_iter()
            .flatten()
            .any(|p| tasks.get(&p).is_some_and(|t| t.task.delay_ns.is_none()))
        {
            last = ts;
        }
    }
    let Some(start) = start else {
        bail!("task {root} does not appear in the trace");
    };
    let root_task = tasks.get_mut(&root).expect("the root is replayed");
    if let Some(cpu) = root_task.first_cpu {
        root_task.task.start_cpu = Some(target_cpu(trace, opts, cpu, "the command first ran on")?);
    }
    // Other tasks existed before the command: their first placement in
    // it is a wakeup from their previous CPU (a per-CPU kernel thread's:
    // its own), not a fork from the simulator's CPU 0.
    let kernel_threads = trace.kernel_threads()?;
    for pid in &others {
        let t = tasks.get_mut(pid).expect("other tasks are replayed");
        t.task.kernel_thread = kernel_threads.contains(*pid, &t.task.comm);
        t.task.prev_cpu = match (t.task.cpu, t.task.prev_cpu) {
            (Some(pin), _) => Some(pin),
            (None, Some(cpu)) => Some(target_cpu(trace, opts, cpu, "an other task last ran on")?),
            (None, None) => None,
        };
    }
    // Tasks running (or preempted) when the trace ends: their burst ends
    // there, and forks whose child was not woken yet happen there. Tasks
    // blocked then had not exited: they sleep to its end. (A task whose
    // ops end exits, and an exit the kernel did not see changes the
    // simulated scheduler's state: Nest's exit demotion and fork reuse
    // take the CPU it left.)
    let end = trace.end_ns();
    for (child, parent) in std::mem::take(&mut unwoken) {
        if let Some(p) = tasks.get_mut(&parent) {
            p.act(end, ReplayOp::Fork(child), &freqs);
        }
    }
    for t in tasks.values_mut() {
        if let State::Running { cpu, since } = t.state {
            t.work += freqs.work(cpu, end - since);
        }
        t.flush_work();
        if let State::Blocked { since, .. } = t.state
            && end > since
        {
            t.push(ReplayOp::Sleep(end - since));
            counts.sleeps += 1;
        }
    }
    // Other tasks that started after the command's last event never ran
    // beside it.
    let during = |p: &Pid| tasks[p].task.delay_ns.is_some_and(|d| start + d <= last);
    others.retain(during);
    let nr_others = others.len();
    let nests = nests_at_start(trace, opts, start)?;
    let tasks = order
        .iter()
        .chain(&others)
        .filter_map(|p| tasks.remove(p))
        .map(|b| b.task)
        .collect();
    Ok(Replay {
        tasks,
        root_pid: root,
        nominal_khz,
        recorded_ns: last - start,
        waits: counts.waits,
        woken: counts.woken,
        sleeps: counts.sleeps,
        others: nr_others,
        nests,
    })
}

/// Gives the replayed task `waker` the wake of `wakee` (blocked since
/// `wakee_since`) at `now`, and says whether it did: not when the waker is
/// not replayed, nor when it is the wakee's exited child (its exit ends a
/// wait for children), nor when the waker is outside the tree (an other
/// task, or one forked by such a task) and the wakee in it.
///
/// The other tasks keep the guest's clock (their blocks end as recorded,
/// most by interrupts), while the tree runs at the model's speed: a tree
/// task waiting for another's wake would wait for the guest's clock. The
/// model's test guest runs work at up to 3.9 GHz turbo that the trace gives
/// at its nominal 2.3 GHz, so a replayed configure ran ahead and then sat
/// idle until a kworker's recorded wake: 129 of its 755 intervals of
/// 100 ms had none of its tasks running (the guest's: 5 of 815). Such a
/// block is a sleep of its recorded length instead.
///
/// The wakeup is recorded when it completes (`sched_wakeup`, on the
/// wakee's CPU), its waker when it began (`sched_waking`, in the waker's
/// context). A wakeup of a task on another CPU is queued to that CPU
/// (`ttwu_queue_wakelist()`) and completes there after an interrupt, by
/// which time the waker may have been preempted or may have blocked: 99%
/// of a pipe pair's wakeups in an emulated guest. The waking then fired
/// in the waker's last burst, which ran after the wakee blocked: the wake
/// goes at that burst's end.
fn wake_by(
    tasks: &mut BTreeMap<Pid, Builder>,
    waker: Waker,
    wakee: Pid,
    wakee_since: u64,
    now: u64,
    freqs: &Freqs,
) -> bool {
    let wakee_task = tasks.get(&wakee);
    if wakee_task.is_some_and(|t| t.exited_child(waker.pid)) {
        return false;
    }
    let wakee_in_tree = wakee_task.is_some_and(|t| !t.other);
    let Some(w) = tasks.get_mut(&waker.pid) else {
        return false;
    };
    if w.other && wakee_in_tree {
        return false;
    }
    let waking_in_last_burst = match w.state {
        State::Running { .. } | State::Runnable => true,
        State::Blocked { since, .. } => since >= wakee_since,
        State::Dead => false,
    };
    if waking_in_last_burst {
        let sync = waker.sync.unwrap_or(false);
        w.act(now, ReplayOp::Wake { pid: wakee, sync }, freqs);
    }
    waking_in_last_burst
}

#[cfg(test)]
mod tests {
    use nest_trace::{Event, Topology};

    use super::*;
    use crate::policy::baseline::Baseline;
    use crate::workload::{Amount, Op, rtapp};
    use crate::{Governor, Machine, SimConfig};

    const US: u64 = 1000;
    const MS: u64 = 1_000_000;

    fn ev(ts_ns: u64, cpu: Cpu, kind: EventKind) -> Event {
        Event { ts_ns, cpu, kind }
    }

    fn switch(prev: Pid, prev_state: PrevState, next: Pid) -> EventKind {
        EventKind::Switch {
            prev,
            prev_state,
            next,
        }
    }

    /// A shell (pid 10, CPU 0) forks three children (11-13, CPU 1) in
    /// sequence; each runs 1 ms and exits while the shell waits for it. The
    /// shell runs 150 us per child (fork after 100 us) and 50 us at the end.
    /// An unrelated task (pid 99) runs on CPU 1 between children.
    pub(super) fn shell_trace() -> Trace {
        use PrevState::*;
        let mut events = vec![
            ev(
                0,
                0,
                EventKind::TaskName {
                    pid: 10,
                    comm: "sh".into(),
                },
            ),
            ev(0, 0, switch(0, Runnable, 10)),
        ];
        let mut s = 0;
        for child in 11..=13 {
            let fork = s + 100 * US;
            let exit = fork + MS;
            events.extend([
                ev(
                    fork,
                    0,
                    EventKind::NewTask {
                        parent: 10,
                        child,
                        comm: "sh".into(),
                    },
                ),
                ev(
                    fork,
                    0,
                    EventKind::Wakeup {
                        pid: child,
                        target_cpu: 1,
                        waker: None,
                    },
                ),
                ev(fork + 5 * US, 1, switch(99, Runnable, child)),
                ev(
                    fork + 10 * US,
                    1,
                    EventKind::Exec {
                        pid: child,
                        comm: "cc".into(),
                    },
                ),
                ev(fork + 50 * US, 0, switch(10, Blocked, 0)),
                ev(exit + 5 * US, 1, EventKind::Exit { pid: child }),
                ev(
                    exit + 5 * US,
                    1,
                    EventKind::Wakeup {
                        pid: 10,
                        target_cpu: 0,
                        waker: None,
                    },
                ),
                ev(exit + 5 * US, 1, switch(child, Dead, 99)),
                ev(exit + 20 * US, 0, switch(0, Runnable, 10)),
            ]);
            s = exit + 20 * US;
        }
        events.extend([
            ev(s + 50 * US, 0, EventKind::Exit { pid: 10 }),
            ev(s + 50 * US, 0, switch(10, Dead, 0)),
            ev(s + 60 * US, 1, switch(99, Blocked, 0)),
        ]);
        Trace {
            topology: Topology::flat(2),
            meta: vec![("command_pid".into(), "10".into())],
            events,
        }
    }

    /// Running time of `pids` in `trace`, from its switches.
    pub(super) fn run_time(trace: &Trace, pids: &[Pid]) -> u64 {
        let mut since = BTreeMap::new();
        let mut total = 0;
        for e in &trace.events {
            if let EventKind::Switch { prev, next, .. } = e.kind {
                if let Some(t) = since.remove(&prev) {
                    total += e.ts_ns - t;
                }
                if pids.contains(&next) {
                    since.insert(next, e.ts_ns);
                }
            }
        }
        total
    }

    /// Sum of the fixed `run` amounts of a parsed workload.
    fn parsed_work(w: &crate::workload::Workload) -> u64 {
        w.programs
            .iter()
            .flat_map(|p| &p.ops)
            .map(|op| match op {
                Op::Run(Amount::Fixed(ns)) => *ns,
                _ => 0,
            })
            .sum()
    }

    #[test]
    fn three_children_in_sequence_become_fork_and_wait() {
        let trace = shell_trace();
        let r = replay(&trace, &ReplayOptions::default()).unwrap();
        assert_eq!(r.root_pid, 10);
        let names: Vec<String> = r.tasks.iter().map(ReplayTask::name).collect();
        assert_eq!(names, ["sh-10", "cc-11", "cc-12", "cc-13"]);
        use ReplayOp::*;
        assert_eq!(
            r.tasks[0].ops,
            [
                Run(100 * US),
                Fork(11),
                Run(50 * US),
                WaitChildren,
                Run(100 * US),
                Fork(12),
                Run(50 * US),
                WaitChildren,
                Run(100 * US),
                Fork(13),
                Run(50 * US),
                WaitChildren,
                Run(50 * US),
            ]
        );
        for t in &r.tasks[1..] {
            assert_eq!(t.parent, Some(10));
            assert_eq!(t.ops, [Run(MS)]);
        }
        assert_eq!((r.waits, r.sleeps), (3, 0));
        let recorded = run_time(&trace, &[10, 11, 12, 13]);
        assert_eq!(recorded, 3 * MS + 500 * US);
        assert_eq!(r.total_work_ns(), recorded);

        // The file parses and simulates to completion.
        let w = rtapp::parse(&r.to_json_string(), "replay.json").unwrap();
        assert_eq!(w.programs.len(), 4);
        assert_eq!(w.initial, [(0, 1)]);
        let work = parsed_work(&w);
        assert!(
            (work as f64 - recorded as f64).abs() <= 0.01 * recorded as f64,
            "{work} vs {recorded}"
        );
        let m = Machine::builtin("xeon-gold-5218-2s").unwrap();
        let res = crate::run(
            SimConfig::new(m, Governor::Performance, 1),
            &w,
            &mut Baseline,
        )
        .unwrap();
        assert!(!res.deadlocked);
        assert_eq!(res.tasks.len(), 4);
        assert!(res.tasks.iter().all(|t| t.end_ns.is_some()));
        // At or above nominal, the serial chain takes at most its work plus
        // scheduling slack, and at least its work at the highest turbo.
        let c = res.completion_ns as f64;
        assert!(c <= recorded as f64 * 1.2, "{c}");
        assert!(c >= recorded as f64 * 2.3 / 3.9, "{c}");
    }

    #[test]
    fn a_fork_happens_where_the_parent_wakes_its_child() {
        let mut trace = shell_trace();
        let first_wakeup =
            |pid| move |e: &Event| matches!(e.kind, EventKind::Wakeup { pid: p, .. } if p == pid);
        // Child 11 is woken 3 us after its fork (sched_ext's task
        // initialisation; up to 8 ms in the guest); child 12's wakeup is
        // not recorded: it forks when first seen running, 5 us after.
        let i = trace.events.iter().position(first_wakeup(11)).unwrap();
        trace.events[i].ts_ns += 3 * US;
        trace.events.sort_by_key(|e| e.ts_ns);
        let i = trace.events.iter().position(first_wakeup(12)).unwrap();
        trace.events.remove(i);
        let r = replay(&trace, &ReplayOptions::default()).unwrap();
        use ReplayOp::*;
        assert_eq!(
            r.tasks[0].ops[..8],
            [
                Run(103 * US),
                Fork(11),
                Run(47 * US),
                WaitChildren,
                Run(105 * US),
                Fork(12),
                Run(45 * US),
                WaitChildren,
            ]
        );
    }

    #[test]
    fn a_wakeup_onto_an_idle_cpu_replays_the_delay_it_took_there() {
        let mut trace = shell_trace();
        // CPU 1 idles until 4 us after child 11's fork woke it; CPU 0
        // idles while the shell waits for that child, until 15 us after
        // the child's exit woke the shell.
        trace.events.extend([
            ev(0, 1, EventKind::IdleEnter),
            ev(104 * US, 1, EventKind::IdleExit),
            ev(150 * US, 0, EventKind::IdleEnter),
            ev(1120 * US, 0, EventKind::IdleExit),
        ]);
        trace.events.sort_by_key(|e| e.ts_ns);
        let r = replay(&trace, &ReplayOptions::default()).unwrap();
        use ReplayOp::*;
        assert_eq!(
            r.tasks[0].ops[..6],
            [
                Run(100 * US),
                Fork(11),
                Run(50 * US),
                VcpuWakeup(15 * US),
                WaitChildren,
                Run(100 * US),
            ]
        );
        assert_eq!(
            r.tasks[0].ops.len(),
            14,
            "one delay: the other CPUs were busy"
        );
        let firsts: Vec<Option<u64>> = r.tasks.iter().map(|t| t.first_vcpu_wakeup_ns).collect();
        assert_eq!(firsts, [None, Some(4 * US), None, None]);
        let w = rtapp::parse(&r.to_json_string(), "replay.json").unwrap();
        assert_eq!(w.programs[0].ops[3], Op::VcpuWakeup(15 * US));
        assert_eq!(w.programs[1].first_vcpu_wakeup_ns, Some(4 * US));
    }

    #[test]
    fn frequencies_scale_work_and_other_blocks_become_sleeps() {
        use PrevState::*;
        let trace = Trace {
            topology: Topology::flat(1),
            meta: vec![("nominal_khz".into(), "2000000".into())],
            events: vec![
                ev(0, 0, switch(0, Runnable, 5)),
                // 1 ms at nominal, then 1 ms at twice nominal: 3 ms of work.
                ev(MS, 0, EventKind::Frequency { khz: 4_000_000 }),
                ev(2 * MS, 0, switch(5, Blocked, 0)),
                // Woken by someone else (a pipe, a timer) 3 ms later.
                ev(
                    5 * MS,
                    0,
                    EventKind::Wakeup {
                        pid: 5,
                        target_cpu: 0,
                        waker: None,
                    },
                ),
                ev(5 * MS + 10 * US, 0, switch(0, Runnable, 5)),
                // Preempted: the burst goes on after the queueing.
                ev(6 * MS, 0, switch(5, Runnable, 7)),
                ev(7 * MS, 0, switch(7, Blocked, 5)),
                ev(8 * MS, 0, switch(5, Dead, 0)),
            ],
        };
        let r = replay(
            &trace,
            &ReplayOptions {
                root: Root::Pid(5),
                nominal_khz: None,
                ..ReplayOptions::default()
            },
        )
        .unwrap();
        use ReplayOp::*;
        assert_eq!(r.tasks.len(), 1);
        // The second burst: 1.99 ms, still at twice nominal.
        let second = 2 * (2 * MS - 10 * US);
        assert_eq!(r.tasks[0].ops, [Run(3 * MS), Sleep(3 * MS), Run(second)]);
        assert_eq!(r.tasks[0].name(), "task-5");
        assert_eq!((r.waits, r.sleeps), (0, 1));
        assert_eq!(r.recorded_ns, 8 * MS);
        // Another nominal frequency rescales the work at known frequencies.
        let opts = ReplayOptions {
            root: Root::Pid(5),
            nominal_khz: Some(4_000_000),
            ..ReplayOptions::default()
        };
        let r = replay(&trace, &opts).unwrap();
        assert_eq!(r.tasks[0].ops[0], Run(2 * MS));
    }

    #[test]
    fn roots_by_pid_name_meta_or_first_fork() {
        let mut trace = shell_trace();
        let root = |t: &Trace, root| {
            replay(
                t,
                &ReplayOptions {
                    root,
                    nominal_khz: None,
                    ..ReplayOptions::default()
                },
            )
        };
        assert_eq!(root(&trace, Root::Pid(12)).unwrap().tasks.len(), 1);
        let cc = root(&trace, Root::Comm("cc".into())).unwrap();
        assert_eq!((cc.root_pid, cc.tasks[0].parent), (11, None));
        trace.meta.clear();
        // Without meta, the first forked task.
        assert_eq!(root(&trace, Root::Auto).unwrap().root_pid, 11);
        let e = root(&trace, Root::Pid(4242)).unwrap_err().to_string();
        assert_eq!(e, "pid 4242 does not appear in the trace");
        let e = root(&trace, Root::Comm("make".into()))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "no task called `make` in the trace");
    }
}
