//! State of the simulated kernel and machine.

use std::cell::OnceCell;
use std::collections::VecDeque;

use nest_trace::{Cpu, Topology, Trace};

use super::idle::CoreIdle;
use super::queue::EventQueue;
use super::sugov::SugovCpu;
use super::{Ev, SimConfig};
use crate::cpuset::CpuSet;
use crate::governor::CoreFreq;
use crate::machine::Machine;
use crate::pelt::{PeltClock, PeltStep, UtilEst};
use crate::policy::fork_balance::ForkGroups;
use crate::policy::wakeup::FairTask;
use crate::power::socket_power_w;
use crate::rng::Rng;
use crate::workload::Workload;

/// Something a policy asked for, applied after its call returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Migrate {
        task: u32,
        cpu: Cpu,
    },
    /// `scx_bpf_kick_cpu()`: an idle `cpu` looks at the policy's queues
    /// ([`crate::policy::Policy::dispatch`]); with `preempt`, a busy one
    /// ends its current task's slice now.
    Kick {
        cpu: Cpu,
        preempt: bool,
    },
    /// `scx_bpf_task_set_slice(p, 0)` for the task running on `cpu`, from
    /// `cpu`'s own tick: it ends the slice at once, no kick involved.
    EndSlice {
        cpu: Cpu,
    },
}

/// Where a task is in its life, as policies see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskPhase {
    /// Waiting in `cpu`'s run queue.
    Queued(Cpu),
    /// Waiting in the policy's own queues (a sched_ext scheduler's
    /// dispatch queues), until it hands the task to a CPU.
    Held,
    Running(Cpu),
    /// Sleeping or waiting for an event.
    Blocked,
    Dead,
}

/// What is left of the task's current operation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Remaining {
    /// Nothing: interpret the next operation.
    Nothing,
    /// Cycles of work (a CPU at f GHz does f cycles per ns).
    Work(f64),
    /// Busy time.
    Time(f64),
}

/// Cap of `rq->avg_idle`: `2 * rq->max_idle_balance_cost`, taken at its
/// initial value `sysctl_sched_migration_cost` (500 us).
const AVG_IDLE_MAX_NS: u64 = 1_000_000;

/// `update_avg()` (kernel/sched/sched.h): a moving average, 1/8 weight.
fn update_avg(avg: u64, sample: u64) -> u64 {
    let diff = sample as i64 - avg as i64;
    (avg as i64 + diff / 8) as u64
}

/// One simulated task.
#[derive(Clone, Debug)]
pub(crate) struct Task {
    pub program: usize,
    pub pc: usize,
    /// Remaining iterations of the enclosing loops, innermost last.
    pub loops: Vec<u64>,
    pub phase: TaskPhase,
    /// Last CPU the task was placed on.
    pub cpu: Cpu,
    /// Whether the task has run yet (no migration counted before).
    pub has_run: bool,
    pub remaining: Remaining,
    pub parent: Option<u32>,
    pub live_children: u32,
    pub waiting_children: bool,
    pub rng: Rng,
    /// Next activation of each rt-app timer (0: not started).
    pub timers: Vec<u64>,
    pub enqueued_at: u64,
    /// PELT utilisation (`util_avg`) in [0, 1]; counts on `cpu`'s run
    /// queue even while the task sleeps (Linux keeps blocked utilisation).
    pub util: f64,
    /// PELT runnable average (`runnable_avg`): running or waiting.
    pub runnable: f64,
    /// `util_est`, updated each time the task goes to sleep.
    pub util_est: UtilEst,
    /// `util` when the task last went to sleep: one whose `util` has not
    /// moved since leaves `util_est` alone (`UTIL_AVG_UNCHANGED`).
    pub util_at_sleep: f64,
    /// Running since (None when not running).
    pub run_start: Option<u64>,
    /// Running time during the current frequency step.
    pub run_in_step: u64,
    /// Time spent waiting for a CPU during the current frequency step, up
    /// to the last time it was accounted.
    pub wait_in_step: u64,
    /// What the fair scheduler keeps per task for wakeups.
    pub fair: FairTask,
    /// `se.vruntime` minus the task's running time (`sum_exec_runtime`),
    /// on the timeline of CPU `vruntime_rq`, the run queue it last joined
    /// (`linux-5.10` only; engine/fair.rs).
    pub vruntime: i64,
    pub vruntime_rq: Cpu,
    /// The CPUs it may run on (`p->cpus_ptr`); `None`: every CPU.
    pub cpus: Option<CpuSet>,
    /// How long its next start on an idle vCPU waits, if the workload
    /// says ([`crate::workload::Op::VcpuWakeup`]); until it next runs.
    pub next_vcpu_wakeup_ns: Option<u64>,
    pub stats: TaskStats,
}

impl Task {
    /// A task about to start `program` on `cpu`, forked by `parent`.
    pub(crate) fn new(
        program: usize,
        parent: Option<u32>,
        cpu: Cpu,
        rng: Rng,
        cpus: Option<CpuSet>,
        stats: TaskStats,
    ) -> Self {
        Self {
            program,
            pc: 0,
            loops: Vec::new(),
            phase: TaskPhase::Blocked,
            cpu,
            has_run: false,
            remaining: Remaining::Nothing,
            parent,
            live_children: 0,
            waiting_children: false,
            rng,
            timers: Vec::new(),
            enqueued_at: stats.start_ns,
            util: 0.0,
            runnable: 0.0,
            util_est: UtilEst::default(),
            util_at_sleep: 0.0,
            run_start: None,
            run_in_step: 0,
            wait_in_step: 0,
            // wake_up_new_task(): recent_used_cpu = the parent's CPU.
            fair: FairTask::new(cpu),
            vruntime: 0,
            vruntime_rq: cpu,
            cpus,
            next_vcpu_wakeup_ns: None,
            stats,
        }
    }
}

/// Per-task measurements.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct TaskStats {
    pub pid: u32,
    pub comm: String,
    pub start_ns: u64,
    pub end_ns: Option<u64>,
    /// Time spent running.
    pub run_ns: u64,
    /// Time spent runnable but waiting in a run queue.
    pub wait_ns: u64,
    pub migrations: u64,
}

/// One logical CPU.
#[derive(Clone, Debug, Default)]
pub(crate) struct CpuState {
    pub curr: Option<u32>,
    pub queue: VecDeque<u32>,
    /// Between two tasks: wakeups queue instead of switching in.
    pub switching: bool,
    /// Warm spin in progress: (start, stop when a sibling gets busy).
    pub spin: Option<(u64, bool)>,
    /// Invalidates stale Done/SpinEnd events.
    pub epoch: u32,
    /// Start of the current run segment (progress accounted up to here).
    pub seg_start: u64,
    /// Speed of the current segment, cycles per ns.
    pub rate: f64,
    pub slice_start: u64,
    /// Length of the current task's slice (the policy's, else the
    /// configuration's).
    pub slice_ns: u64,
    /// The current task, still runnable, is being switched out and goes
    /// back to the policy (`Policy::enqueue`) for this reason.
    pub requeue: Option<crate::policy::Enqueue>,
    pub idle_since: u64,
    /// `rq->avg_idle`: average length of the idle periods a wakeup ended.
    pub avg_idle: u64,
    /// Active (running or spinning) since, and active time this step.
    pub active_since: Option<u64>,
    pub active_ns: u64,
    /// Running a task since, and running time this step.
    pub run_since: Option<u64>,
    pub run_ns: u64,
    /// When the CPU last stopped being active.
    pub inactive_since: u64,
    /// Sum of its tasks' utilisation (running, waiting or blocked), capped
    /// at 1: PELT's `cfs_rq->avg.util_avg`.
    pub util: f64,
    /// Sum of its tasks' runnable averages (`cfs_rq->avg.runnable_avg`).
    pub runnable: f64,
    /// Its PELT clock (frequency invariance).
    pub pelt: PeltClock,
    /// How that clock advanced over the step that ended at `pelt_stamp`
    /// (steps of idle cores, which the frequency step does not visit,
    /// advance it by wall time).
    pub pelt_step: PeltStep,
    pub pelt_stamp: u64,
    /// schedutil's state for this CPU (engine/sugov.rs).
    pub sugov: SugovCpu,
    /// Utilisation of tasks that left this CPU while not on its run queue
    /// (they exited, or woke up elsewhere): the kernel defers taking it out
    /// of `util_avg` (`remove_entity_load_avg()`) to the CPU's next PELT
    /// update (`update_cfs_rq_load_avg()`), so placement still sees it
    /// until then ([`crate::policy::Ctx::util`]). Only kept for the fair
    /// scheduler's model, with its load balancing (`Sim::balances`).
    pub removed_util: f64,
    pub last_tick_mhz: u32,
    /// Ran a task during the current accounting interval.
    pub used_in_interval: bool,
    /// `cfs_rq->min_vruntime` as last updated (`linux-5.10` only;
    /// engine/fair.rs).
    pub min_vruntime: i64,
    /// The current task is interpreting its program's operations (a wakeup
    /// it causes cannot switch it out before it is done).
    pub advancing: bool,
    /// A wakeup preempts the current task once it is done with its
    /// operations (`TIF_NEED_RESCHED`).
    pub need_resched: bool,
    /// A guest's busy vCPU was kicked to preempt this task; the kick
    /// reaches it later (engine/vcpu.rs).
    pub kicked_to_preempt: Option<u32>,
}

/// One physical core (its SMT threads share the frequency).
#[derive(Clone, Debug)]
pub(crate) struct CoreState {
    pub freq: CoreFreq,
    pub socket: u32,
    /// The frequency changed since the last tick (listed in `Kernel::retick`).
    pub freq_moved: bool,
    /// The residency band of its frequency ([`band_of`]), kept as the
    /// frequency moves rather than looked up at every step.
    pub band: usize,
}

/// The residency band of `mhz`: how many of the (ascending) `edges` it
/// reaches.
pub(crate) fn band_of(edges: &[u32], mhz: u32) -> usize {
    edges.iter().take_while(|&&e| mhz >= e).count()
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Barrier {
    pub arrived: u32,
    pub waiters: Vec<u32>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Lock {
    pub owner: Option<u32>,
    pub waiters: VecDeque<u32>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Channel {
    pub messages: u64,
    pub waiters: VecDeque<u32>,
}

/// What one accounting interval (tick) used.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Interval {
    /// CPUs that ran a task.
    pub cpus: u32,
    /// Sockets of those CPUs.
    pub sockets: u32,
    /// Physical cores of those CPUs (SMT siblings count once): what a
    /// socket's turbo bins count.
    pub cores: u32,
    /// Most tasks running at once.
    pub concurrency: u32,
}

/// Accumulated measurements of the run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stats {
    pub energy_j: f64,
    /// Busy (task running) time per frequency band, ns.
    pub residency_ns: Vec<u64>,
    pub spin_ns: u64,
    /// Wake-ups of a sleeping core to run something, per idle state.
    pub core_wakeups: Vec<u64>,
    /// Their exit latencies, summed.
    pub exit_latency_ns: u64,
    pub migrations: u64,
    /// One entry per accounting interval (tick).
    pub intervals: Vec<Interval>,
    pub running_now: u32,
    pub max_running_in_interval: u32,
    /// Time up to which steps have been accounted.
    pub accounted_to: u64,
}

/// The simulated machine and tasks, as the engine and policies see them.
pub struct Kernel {
    pub(crate) cfg: SimConfig,
    pub(crate) machine: Machine,
    pub(crate) topo: Topology,
    pub(crate) workload: Workload,
    pub(crate) now: u64,
    pub(crate) queue: EventQueue,
    pub(crate) cpus: Vec<CpuState>,
    pub(crate) cores: Vec<CoreState>,
    pub(crate) core_idle: Vec<CoreIdle>,
    /// CPUs of each physical core, ascending.
    pub(crate) core_cpus: Vec<Vec<Cpu>>,
    /// CPUs of each LLC and of each socket, ascending.
    pub(crate) llc_cpus: Vec<Vec<Cpu>>,
    pub(crate) socket_cpus: Vec<Vec<Cpu>>,
    pub(crate) tasks: Vec<Task>,
    pub(crate) live_tasks: u32,
    /// Initial tasks not started yet (rt-app `delay`).
    pub(crate) unstarted: u32,
    /// Ids of the tasks not yet dead, in creation order.
    pub(crate) live: Vec<u32>,
    pub(crate) barriers: Vec<Barrier>,
    pub(crate) locks: Vec<Lock>,
    pub(crate) channels: Vec<Channel>,
    pub(crate) actions: Vec<Action>,
    pub(crate) trace: Trace,
    pub(crate) nr_events: u64,
    /// Of those, events that found nothing to do (a run segment or spin
    /// that a later one replaced).
    pub(crate) nr_stale_events: u64,
    /// Schedule events produced (trace events, recorded or not).
    pub(crate) nr_sched_events: u64,
    pub(crate) stop_at: Option<u64>,
    /// Every live task waits for something nothing will ever do.
    pub(crate) deadlock: bool,
    /// Tasks waiting in run queues (not running), for quick balance checks.
    pub(crate) nr_queued: u32,
    /// Tasks waiting in the policy's own queues ([`TaskPhase::Held`]).
    pub(crate) nr_held: u32,
    pub(crate) stats: Stats,
    /// Frequency band edges (MHz) for residency.
    pub(crate) band_edges: Vec<u32>,
    /// Reused per-core buffer of the frequency step.
    pub(crate) scratch: Vec<crate::power::CoreSample>,
    /// Power of a socket without hot cores, while the machine is idle
    /// ([0]) or active ([1]).
    pub(crate) cold_socket_w: [f64; 2],
    /// Reused per-socket buffer of the frequency step.
    pub(crate) socket_scratch: Vec<u32>,
    /// Cores the frequency step must visit (active, or frequency moving).
    pub(crate) hot: Vec<bool>,
    pub(crate) hot_list: Vec<usize>,
    /// CPUs that may still hold the utilisation of a task that has left
    /// them (moved or dead) since the last step. With the live tasks' CPUs
    /// they are the only CPUs whose utilisation can be non-zero.
    pub(crate) util_stale: Vec<Cpu>,
    /// Cores whose CPUs' `last_tick_mhz` the next tick must refresh.
    pub(crate) retick: Vec<usize>,
    /// CPUs that ran a task during the current interval (`used_in_interval`).
    pub(crate) used_cpus: Vec<Cpu>,
    /// Per LLC, `sd_llc_shared->has_idle_cores`: set when a core goes
    /// fully idle, cleared by a wakeup's scan that finds no idle core.
    pub(crate) has_idle_cores: Vec<bool>,
    /// CPUs running a task, as a bit set (bit `cpu % 64` of word
    /// `cpu / 64`), for the tick's load balancing (kept only when the
    /// engine balances, as is `llc_running`).
    pub(crate) running_cpus: Vec<u64>,
    /// Per LLC, how many of its CPUs run a task (`nr_busy_cpus`).
    pub(crate) llc_running: Vec<u32>,
    /// The fair scheduler's tunables when the engine models its wakeup
    /// preemption (`linux-5.10`, a policy using the engine's run queues).
    pub(crate) cfs: Option<super::fair::CfsTunables>,
    /// Every CPU's groups for fork balancing (built at the first fork).
    pub(crate) fork_groups: OnceCell<ForkGroups>,
    /// Draws of a guest's vCPU wake-up delays (engine/vcpu.rs).
    pub(crate) vcpu_rng: Rng,
    /// While a wakeup is placed: the CPU that raised it (the waker's, or
    /// for a timer or interrupt the woken task's previous one). A guest's
    /// vCPU that raised a wakeup is awake (engine/vcpu.rs).
    pub(crate) waking_cpu: Option<Cpu>,
}

impl Kernel {
    pub(crate) fn new(cfg: SimConfig, workload: &Workload) -> Self {
        let machine = cfg.machine.clone();
        let nr_cores = machine.nr_cores();
        let topo = machine.topology();
        let mut core_cpus = vec![Vec::new(); machine.nr_cores()];
        for p in &topo.cpus {
            core_cpus[p.core as usize].push(p.cpu);
        }
        core_cpus.iter_mut().for_each(|v| v.sort_unstable());
        let group = |key: fn(&nest_trace::CpuPlace) -> u32| {
            let n = topo
                .cpus
                .iter()
                .map(key)
                .max()
                .map_or(0, |m| m as usize + 1);
            let mut v = vec![Vec::new(); n];
            for p in &topo.cpus {
                v[key(p) as usize].push(p.cpu);
            }
            v.iter_mut().for_each(|g| g.sort_unstable());
            v
        };
        let llc_cpus = group(|p| p.llc);
        let socket_cpus = group(|p| p.socket);
        let band_edges = machine.band_edges_mhz();
        let cores = (0..machine.nr_cores())
            .map(|c| {
                let freq = CoreFreq::new(&machine, cfg.governor);
                CoreState {
                    band: band_of(&band_edges, freq.mhz()),
                    freq,
                    socket: c as u32 / machine.cores_per_socket,
                    freq_moved: false,
                }
            })
            .collect();
        let cpu = CpuState {
            avg_idle: AVG_IDLE_MAX_NS, // sched_init(): 2 * sysctl_sched_migration_cost
            ..CpuState::default()
        };
        let cpus = vec![cpu; topo.nr_cpus()];
        let has_idle_cores = vec![true; llc_cpus.len()];
        let llc_running = vec![0; llc_cpus.len()];
        let running_cpus = vec![0; topo.nr_cpus().div_ceil(64)];
        let core_idle = vec![CoreIdle::new(machine.power.deepest_idle_index()); nr_cores];
        let per_socket = machine.cores_per_socket as usize;
        let cold_socket_w = [false, true].map(|on| socket_power_w(&machine, &[], per_socket, on));
        let stats = Stats {
            residency_ns: vec![0; band_edges.len() + 1],
            core_wakeups: vec![0; machine.power.idle_states.len()],
            ..Stats::default()
        };
        Self {
            stop_at: workload.duration_ns,
            deadlock: false,
            machine,
            topo,
            workload: workload.clone(),
            now: 0,
            queue: EventQueue::new(cpus.len()),
            cpus,
            cores,
            core_idle,
            core_cpus,
            llc_cpus,
            socket_cpus,
            tasks: Vec::new(),
            live_tasks: 0,
            unstarted: 0,
            live: Vec::new(),
            barriers: vec![Barrier::default(); workload.barriers.len()],
            locks: vec![Lock::default(); workload.nr_locks],
            channels: vec![Channel::default(); workload.nr_channels],
            actions: Vec::new(),
            trace: Trace::default(),
            nr_events: 0,
            nr_stale_events: 0,
            nr_sched_events: 0,
            nr_queued: 0,
            nr_held: 0,
            stats,
            band_edges,
            scratch: Vec::new(),
            socket_scratch: Vec::new(),
            cold_socket_w,
            // Every core starts hot: the frequency model decides when it
            // has settled.
            hot: vec![true; nr_cores],
            hot_list: (0..nr_cores).collect(),
            util_stale: Vec::new(),
            retick: Vec::new(),
            used_cpus: Vec::new(),
            has_idle_cores,
            running_cpus,
            llc_running,
            cfs: None,
            fork_groups: OnceCell::new(),
            vcpu_rng: super::vcpu::vcpu_rng(cfg.seed),
            waking_cpu: None,
            cfg,
        }
    }

    /// Tasks live, or are still to start.
    pub(crate) fn tasks_remain(&self) -> bool {
        self.live_tasks > 0 || self.unstarted > 0
    }

    /// Tasks remain, none runs or waits to run, and no pending event (sleep
    /// end, timer, spin end) can change that.
    pub(crate) fn deadlocked(&self) -> bool {
        self.live_tasks > 0
            && self.stats.running_now == 0
            && self.nr_queued == 0
            && self.nr_held == 0
            && !self.queue.any(|ev| {
                matches!(
                    ev,
                    Ev::WakeTask { .. } | Ev::Timer { .. } | Ev::SpinEnd { .. } | Ev::Start { .. }
                )
            })
    }

    /// `cpu` starts (`on`) or stops running a task.
    pub(crate) fn note_running(&mut self, cpu: Cpu, on: bool) {
        let bit = 1u64 << (cpu % 64);
        let word = &mut self.running_cpus[cpu as usize / 64];
        let llc = &mut self.llc_running[self.topo.cpus[cpu as usize].llc as usize];
        if on {
            *word |= bit;
            *llc += 1;
        } else {
            *word &= !bit;
            *llc -= 1;
        }
    }

    /// The first CPU after `after` (from 0 with `None`) whose bit in
    /// `running_cpus` is `running`.
    pub(crate) fn next_cpu(&self, after: Option<Cpu>, running: bool) -> Option<Cpu> {
        let n = self.cpus.len() as u32;
        let mut from = after.map_or(0, |c| c + 1);
        while from < n {
            let word = self.running_cpus[from as usize / 64];
            let word = if running { word } else { !word };
            let rest = word >> (from % 64);
            if rest != 0 {
                let cpu = from + rest.trailing_zeros();
                return (cpu < n).then_some(cpu);
            }
            from = (from / 64 + 1) * 64;
        }
        None
    }

    /// Makes the frequency step visit `cpu`'s core.
    pub(crate) fn mark_hot(&mut self, cpu: Cpu) {
        let core = self.core_of(cpu);
        if !self.hot[core] {
            self.hot[core] = true;
            self.hot_list.push(core);
        }
    }

    /// Notes that `cpu` runs a task in the current interval.
    pub(crate) fn mark_used(&mut self, cpu: Cpu) {
        let c = &mut self.cpus[cpu as usize];
        if !c.used_in_interval {
            c.used_in_interval = true;
            self.used_cpus.push(cpu);
        }
    }

    /// Applies `f` to every CPU whose utilisation may be non-zero. With
    /// few live tasks, that is only their CPUs and `util_stale` (instead of
    /// all CPUs, which are cheaper to walk when many tasks live).
    pub(crate) fn for_util_cpus(&mut self, f: impl Fn(&mut CpuState)) {
        if self.live.len() * 4 >= self.cpus.len() {
            self.cpus.iter_mut().for_each(f);
            return;
        }
        for &cpu in &self.util_stale {
            f(&mut self.cpus[cpu as usize]);
        }
        for &id in &self.live {
            f(&mut self.cpus[self.tasks[id as usize].cpu as usize]);
        }
    }

    pub(crate) fn core_of(&self, cpu: Cpu) -> usize {
        self.topo.cpus[cpu as usize].core as usize
    }

    pub(crate) fn cpu_mhz(&self, cpu: Cpu) -> u32 {
        self.cores[self.core_of(cpu)].freq.mhz()
    }

    pub(crate) fn is_idle(&self, cpu: Cpu) -> bool {
        let c = &self.cpus[cpu as usize];
        c.curr.is_none() && c.queue.is_empty()
    }

    pub(crate) fn nr_running(&self, cpu: Cpu) -> u32 {
        let c = &self.cpus[cpu as usize];
        u32::from(c.curr.is_some()) + c.queue.len() as u32
    }

    /// A wakeup puts a task on `cpu`: an idle `cpu` samples the length of
    /// its idle period into `rq->avg_idle` (`ttwu_do_activate()`, kernel/sched/core.c).
    pub(crate) fn update_avg_idle(&mut self, cpu: Cpu) {
        if !self.is_idle(cpu) {
            return;
        }
        let c = &mut self.cpus[cpu as usize];
        let sample = self.now.saturating_sub(c.idle_since);
        c.avg_idle = update_avg(c.avg_idle, sample).min(AVG_IDLE_MAX_NS);
    }

    /// A CPU goes idle: when its whole core is idle, its LLC has an idle
    /// core again (`__update_idle_core()`, kernel/sched/fair.c).
    pub(crate) fn update_idle_core(&mut self, cpu: Cpu) {
        if self.siblings(cpu).all(|c| self.is_idle(c)) {
            let llc = self.topo.cpus[cpu as usize].llc as usize;
            self.has_idle_cores[llc] = true;
        }
    }

    /// May `task` run on `cpu` (`cpumask_test_cpu(cpu, p->cpus_ptr)`)?
    pub(crate) fn allowed(&self, task: u32, cpu: Cpu) -> bool {
        let cpus = &self.tasks[task as usize].cpus;
        cpus.as_ref().is_none_or(|s| s.contains(cpu))
    }

    /// The one CPU `task` may run on, if it may run on one only
    /// (`p->nr_cpus_allowed == 1`).
    pub(crate) fn only_cpu(&self, task: u32) -> Option<Cpu> {
        self.tasks[task as usize].cpus.as_ref()?.single()
    }

    /// `select_fallback_rq()` (kernel/sched/core.c) for `task`, which may
    /// not run on `cpu`: the first CPU it may run on in `cpu`'s NUMA node
    /// (socket), else the first it may run on.
    pub(crate) fn fallback_cpu(&self, task: u32, cpu: Cpu) -> Cpu {
        let socket = &self.socket_cpus[self.topo.cpus[cpu as usize].socket as usize];
        let cpus = self.tasks[task as usize].cpus.as_ref();
        let first = cpus.and_then(|s| s.iter().next()).unwrap_or(cpu);
        socket
            .iter()
            .copied()
            .find(|&c| self.allowed(task, c))
            .unwrap_or(first)
    }

    pub(crate) fn task_phase(&self, task: u32) -> TaskPhase {
        self.tasks
            .get(task as usize)
            .map_or(TaskPhase::Dead, |t| t.phase)
    }

    /// Pid of a task in traces (pid 0 is the idle task).
    pub(crate) fn pid(task: u32) -> u32 {
        task + 1
    }

    /// The other CPUs of `cpu`'s core.
    pub(crate) fn siblings(&self, cpu: Cpu) -> impl Iterator<Item = Cpu> + '_ {
        self.core_cpus[self.core_of(cpu)]
            .iter()
            .copied()
            .filter(move |&c| c != cpu)
    }

    /// Speed (cycles per ns) of a task running on `cpu` now.
    pub(crate) fn rate(&self, cpu: Cpu) -> f64 {
        let ghz = f64::from(self.cpu_mhz(cpu)) / 1000.0;
        let sibling_busy = self
            .siblings(cpu)
            .any(|s| self.cpus[s as usize].curr.is_some());
        if sibling_busy {
            ghz * self.machine.smt_thread_throughput
        } else {
            ghz
        }
    }
}

#[cfg(test)]
impl Kernel {
    /// A blocked task that last ran on `cpu`, with utilisation `util`, for
    /// tests that set up a machine state by hand.
    pub(crate) fn test_task(&mut self, cpu: Cpu, util: f64) -> u32 {
        let id = self.tasks.len() as u32;
        let mut task = Task::new(
            0,
            None,
            cpu,
            Rng::derive(0, u64::from(id)),
            None,
            TaskStats::default(),
        );
        task.util = util;
        self.tasks.push(task);
        id
    }
}
