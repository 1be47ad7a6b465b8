//! Placement policies and the view of the simulated kernel they get.
//!
//! The engine calls a [`Policy`] at the points where a scheduler decides or
//! learns something: a task becomes runnable (fork or wakeup), a CPU goes
//! idle or busy, a task starts running or exits, a tick, a timer the policy
//! armed fires. Everything a policy may read or ask for goes through [`Ctx`],
//! so new policies (Nest, S_move, S_local...) need no engine change.

pub mod baseline;
mod dsq;
pub mod ext_idle;
pub mod fork_balance;
pub(crate) mod load_balance;
pub mod nest;
pub mod smove;
#[cfg(test)]
mod testkit;
pub mod wakeup;

use nest_trace::{Cpu, Nest, PrevState, Topology};

use crate::engine::{Action, Kernel, TaskPhase};
use crate::machine::Machine;
use crate::workload::Nests;

/// A task id; equal to the task's pid in traces.
pub type TaskId = u32;

/// Why a task is being placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// A new task (fork, including exec: it stays where it is forked).
    Fork,
    /// A sleeping task woke up. `sync`: its waker is about to sleep
    /// (`WF_SYNC`: a pipe or socket handoff).
    Wakeup { sync: bool },
}

/// Ask the engine to keep an idle CPU busy (warm) instead of idling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spin {
    /// Longest spin; work arriving on the CPU always ends it at once.
    pub max_ns: u64,
    /// Also stop when the CPU's SMT sibling starts running a task.
    pub until_sibling_busy: bool,
}

/// Why a task that does not start running at once is handed to
/// [`Policy::enqueue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueue {
    /// Woken: the placement chose a busy CPU.
    Wakeup,
    /// New (forked), and the placement chose a busy CPU. Not a wakeup to
    /// sched_ext: `wake_up_new_task()` (kernel/sched/core.c) activates the
    /// task with `ENQUEUE_INITIAL`, without `ENQUEUE_WAKEUP`, so
    /// `ops.enqueue()` sees no `SCX_ENQ_WAKEUP`.
    New,
    /// Still runnable at the end of its slice, or preempted.
    Preempted,
    /// Still runnable, but its CPU's dispatch left it nothing to run and
    /// did not keep it either (sched_ext's `SCX_ENQ_LAST`).
    Last,
}

/// Where a task handed to [`Policy::enqueue`] waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queued {
    /// In this CPU's run queue (it runs at once if the CPU is idle).
    OnCpu(Cpu),
    /// In the policy's own queues; it comes out through
    /// [`Policy::dispatch`].
    Held,
}

/// What a CPU looking for work runs next ([`Policy::dispatch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// This task, taken out of the policy's queues.
    Run(TaskId),
    /// The task whose slice ended keeps the CPU, with a new slice.
    KeepPrev,
    /// Nothing: the CPU idles, or the task whose slice ended goes back to
    /// [`Policy::enqueue`] ([`Enqueue::Last`]).
    Nothing,
}

/// A placement policy. Only `select_cpu` is mandatory.
///
/// A policy that keeps its own run queues, as a sched_ext scheduler keeps
/// dispatch queues, says so with [`Policy::owns_queues`]: the engine then
/// runs no load balancing of its own, hands it every task that cannot run
/// at once ([`Policy::enqueue`]), asks it for work whenever a CPU runs out
/// or a slice ends ([`Policy::dispatch`]), and wakes CPUs it kicks
/// ([`Ctx::kick`]).
pub trait Policy {
    /// Short name for tables.
    fn name(&self) -> String;

    /// The CPU on which `task` becomes runnable. `prev` is its last CPU (on
    /// fork: the parent's), `waker` the CPU of the task that woke it, if any.
    fn select_cpu(
        &mut self,
        cx: &mut Ctx,
        task: TaskId,
        prev: Cpu,
        waker: Option<Cpu>,
        why: Wake,
    ) -> Cpu;

    /// `task` becomes runnable on `cpu` (after [`Policy::select_cpu`], or
    /// without it for a task that may run on `cpu` only): sched_ext's
    /// `ops.runnable()`.
    fn runnable(&mut self, _cx: &mut Ctx, _task: TaskId, _cpu: Cpu) {}

    /// The workload starts with these nests (a replay of a recording's),
    /// before its first task; policies without nests ignore them.
    fn seed_nests(&mut self, _cx: &mut Ctx, _nests: &Nests) {}

    /// Whether the policy keeps its own queues (see the trait's
    /// documentation). Asked once, at the start of a run.
    fn owns_queues(&self) -> bool {
        false
    }

    /// `task` cannot run at once on `cpu` (the CPU the placement chose, or
    /// the one it ran on): where does it wait?
    fn enqueue(&mut self, _cx: &mut Ctx, _task: TaskId, cpu: Cpu, _why: Enqueue) -> Queued {
        Queued::OnCpu(cpu)
    }

    /// `cpu`'s run queue is empty: what does it run? `prev` is the task
    /// whose slice just ended there, still runnable, if any. Only asked
    /// of policies that own their queues.
    fn dispatch(&mut self, _cx: &mut Ctx, _cpu: Cpu, _prev: Option<TaskId>) -> Dispatch {
        Dispatch::Nothing
    }

    /// The slice of the task starting on `cpu`; `None`: the configured one.
    fn slice_ns(&mut self, _cx: &mut Ctx, _cpu: Cpu) -> Option<u64> {
        None
    }

    /// `cpu` has nothing left to run. Return a spin request to keep it warm.
    fn cpu_idle(&mut self, _cx: &mut Ctx, _cpu: Cpu) -> Option<Spin> {
        None
    }

    /// `cpu` was idle (or spinning) and now runs a task.
    fn cpu_busy(&mut self, _cx: &mut Ctx, _cpu: Cpu) {}

    /// `task` started (or resumed) running on `cpu`.
    fn task_running(&mut self, _cx: &mut Ctx, _task: TaskId, _cpu: Cpu) {}

    /// `task` stops running on `cpu`: `why` says whether it was preempted,
    /// blocks, or exits (then [`Policy::task_exit`] follows).
    fn task_stopping(&mut self, _cx: &mut Ctx, _task: TaskId, _cpu: Cpu, _why: PrevState) {}

    /// `task` exited on `cpu`.
    fn task_exit(&mut self, _cx: &mut Ctx, _task: TaskId, _cpu: Cpu) {}

    /// Does the policy have a tick ([`Policy::tick`])? The engine calls
    /// none otherwise. Asked once, when the simulation starts.
    fn ticks(&self) -> bool {
        false
    }

    /// The periodic scheduler tick, once per CPU running a task (in CPU
    /// order; not on idle CPUs, where no policy has anything to do). Only
    /// called if [`Policy::ticks`].
    fn tick(&mut self, _cx: &mut Ctx, _cpu: Cpu) {}

    /// A timer armed with [`Ctx::arm_timer`] fired.
    fn timer(&mut self, _cx: &mut Ctx, _token: u64) {}

    /// The performance target `cpu` asks the `schedutil` governor for, as
    /// a sched_ext scheduler does with `scx_bpf_cpuperf_set()` (0 to
    /// 1024; schedutil adds its 25% headroom). `None`: the policy makes no
    /// requests and the governor reads the engine's PELT-like utilisation,
    /// as schedutil reads the fair scheduler's.
    fn perf_target(&self, _cpu: Cpu) -> Option<u32> {
        None
    }
}

/// What a policy may see of, and ask from, the simulated kernel.
pub struct Ctx<'a> {
    pub(crate) k: &'a mut Kernel,
}

impl Ctx<'_> {
    /// Simulated time, ns.
    pub fn now(&self) -> u64 {
        self.k.now
    }

    pub fn machine(&self) -> &Machine {
        &self.k.machine
    }

    pub fn topology(&self) -> &Topology {
        &self.k.topo
    }

    pub fn nr_cpus(&self) -> u32 {
        self.k.cpus.len() as u32
    }

    /// No task running or queued (a warm-spinning CPU is idle).
    pub fn is_idle(&self, cpu: Cpu) -> bool {
        self.k.is_idle(cpu)
    }

    /// Does a task wait in a run queue? (Otherwise no CPU runs more than
    /// one task.)
    pub fn tasks_wait(&self) -> bool {
        self.k.nr_queued > 0
    }

    /// Tasks running or queued on `cpu`.
    pub fn nr_running(&self, cpu: Cpu) -> u32 {
        self.k.nr_running(cpu)
    }

    /// The task running on `cpu` (the kernel's `rq->curr`), if any.
    pub fn current(&self, cpu: Cpu) -> Option<TaskId> {
        self.k.cpus[cpu as usize].curr
    }

    /// PELT-like utilisation of `task` in [0, 1].
    pub fn task_util(&self, task: TaskId) -> f64 {
        self.k.tasks[task as usize].util
    }

    /// May `task` run on `cpu` (`cpumask_test_cpu(cpu, p->cpus_ptr)`)?
    pub fn task_allowed(&self, task: TaskId, cpu: Cpu) -> bool {
        self.k.allowed(task, cpu)
    }

    /// Is `task` a kernel thread (`PF_KTHREAD`; its program's
    /// `kernel_thread`)?
    pub fn task_kernel_thread(&self, task: TaskId) -> bool {
        let program = self.k.tasks[task as usize].program;
        self.k.workload.programs[program].kernel_thread
    }

    /// Does `task` run on one CPU only (`p->nr_cpus_allowed == 1`)?
    pub fn task_pinned(&self, task: TaskId) -> bool {
        self.k.only_cpu(task).is_some()
    }

    /// What the fair scheduler keeps of `task` for wakeups.
    pub fn fair_task(&mut self, task: TaskId) -> &mut wakeup::FairTask {
        &mut self.k.tasks[task as usize].fair
    }

    /// When `task` last stopped running (`se.exec_start`), ns; `None` if
    /// it never ran.
    pub fn exec_start(&self, task: TaskId) -> Option<u64> {
        self.k.tasks[task as usize].fair.exec_start
    }

    /// `test_idle_cores()`: may LLC `llc` have a fully idle core?
    pub fn has_idle_cores(&self, llc: u32) -> bool {
        self.k.has_idle_cores[llc as usize]
    }

    /// `set_idle_cores(.., 0)`: a scan found no idle core in LLC `llc`.
    pub fn clear_idle_cores(&mut self, llc: u32) {
        self.k.has_idle_cores[llc as usize] = false;
    }

    /// `rq->avg_idle` of `cpu`, ns.
    pub fn avg_idle(&self, cpu: Cpu) -> u64 {
        self.k.cpus[cpu as usize].avg_idle
    }

    /// When `cpu` last became idle (meaningful when idle).
    pub fn idle_since(&self, cpu: Cpu) -> u64 {
        self.k.cpus[cpu as usize].idle_since
    }

    /// Which generation of the fair scheduler the Linux model follows.
    pub fn linux_version(&self) -> fork_balance::LinuxVersion {
        self.k.cfg.linux
    }

    /// PELT-like utilisation of `cpu` in [0, 1] as the fair scheduler's
    /// placement reads it (`cpu_util()`): its tasks' at the last frequency
    /// step, plus what departed tasks left until the CPU's next PELT update.
    pub fn util(&self, cpu: Cpu) -> f64 {
        let c = &self.k.cpus[cpu as usize];
        (c.util + c.removed_util).min(1.0)
    }

    /// All hardware threads of `cpu`'s physical core (`cpu` included),
    /// ascending.
    pub fn smt_siblings(&self, cpu: Cpu) -> &[Cpu] {
        &self.k.core_cpus[self.k.topo.cpus[cpu as usize].core as usize]
    }

    /// CPUs sharing last-level cache `llc`, ascending.
    pub fn llc_cpus(&self, llc: u32) -> &[Cpu] {
        &self.k.llc_cpus[llc as usize]
    }

    /// Number of sockets.
    pub fn nr_sockets(&self) -> u32 {
        self.k.socket_cpus.len() as u32
    }

    /// CPUs of socket `socket`, ascending.
    pub fn socket_cpus(&self, socket: u32) -> &[Cpu] {
        &self.k.socket_cpus[socket as usize]
    }

    pub fn socket(&self, cpu: Cpu) -> u32 {
        self.k.topo.cpus[cpu as usize].socket
    }

    pub fn llc(&self, cpu: Cpu) -> u32 {
        self.k.topo.cpus[cpu as usize].llc
    }

    pub fn core(&self, cpu: Cpu) -> u32 {
        self.k.topo.cpus[cpu as usize].core
    }

    /// Every CPU's groups for fork balancing, computed at the first fork.
    pub(crate) fn fork_groups(&self) -> &fork_balance::ForkGroups {
        self.k
            .fork_groups
            .get_or_init(|| fork_balance::ForkGroups::new(self))
    }

    /// Frequency of `cpu` observed at the last tick, MHz.
    pub fn last_tick_mhz(&self, cpu: Cpu) -> u32 {
        self.k.cpus[cpu as usize].last_tick_mhz
    }

    /// Frequency `cpu` runs at now, MHz.
    pub fn cur_mhz(&self, cpu: Cpu) -> u32 {
        self.k.cpu_mhz(cpu)
    }

    /// Where `task` is in its life.
    pub fn task_phase(&self, task: TaskId) -> TaskPhase {
        self.k.task_phase(task)
    }

    /// Calls [`Policy::timer`] with `token` after `delay_ns`.
    pub fn arm_timer(&mut self, delay_ns: u64, token: u64) {
        self.k.arm_timer(delay_ns, token);
    }

    /// Moves `task` to `cpu` if it is still waiting in a run queue (applied
    /// right after the current policy call returns).
    pub fn migrate(&mut self, task: TaskId, cpu: Cpu) {
        self.k.actions.push(Action::Migrate { task, cpu });
    }

    /// `scx_bpf_kick_cpu()`: an idle `cpu` looks for work
    /// ([`Policy::dispatch`]); with `preempt`, the task running on a busy
    /// one ends its slice (applied right after the current policy call).
    pub fn kick(&mut self, cpu: Cpu, preempt: bool) {
        self.k.actions.push(Action::Kick { cpu, preempt });
    }

    /// `scx_bpf_task_set_slice(p, 0)` from `cpu`'s tick for its running
    /// task: the kernel reschedules `cpu` as the tick returns
    /// (`task_tick_scx()` in kernel/sched/ext.c), so unlike a kick this
    /// takes no vCPU wake-up (applied right after the current policy call).
    pub fn end_slice(&mut self, cpu: Cpu) {
        self.k.actions.push(Action::EndSlice { cpu });
    }

    /// Is `cpu` between two tasks (its previous one is being switched out)?
    pub fn switching(&self, cpu: Cpu) -> bool {
        self.k.cpus[cpu as usize].switching
    }

    /// Records a nest membership change in the trace.
    pub fn nest_changed(&mut self, cpu: Cpu, nest: Nest) {
        self.k.emit(cpu, nest_trace::EventKind::NestChange { nest });
    }

    /// Records in the trace that the policy, deciding on CPU `at`, placed
    /// `task` on `target` by the step `how` names (not a scheduling event:
    /// the wakeup that follows is).
    pub fn placed(&mut self, at: Cpu, task: TaskId, target: Cpu, how: &str) {
        self.k.annotate(at, |_| nest_trace::EventKind::Placement {
            pid: Kernel::pid(task),
            target_cpu: target,
            how: how.to_string(),
        });
    }
}
