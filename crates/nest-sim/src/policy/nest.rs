//! Nest in the simulator: an adapter from the engine's [`Policy`] hooks to
//! the shared C policy (`policy/nest_policy.c`, built natively by the
//! `nest-policy` crate). Every placement decision is the C code's; this file
//! only supplies the platform (idle claims, the default placement = the
//! baseline model, the clock) and forwards the engine's notifications.
//!
//! Warm spinning: whether and how long an idle CPU spins is the C policy's
//! decision (`nest_cpu_idle`); the engine carries the spin out and ends it
//! when work arrives, its SMT sibling runs or S_max passes, as the kernel
//! scheduler does through `nest_spin_continue`. The C policy's own spin
//! counters are therefore not used here; the engine measures spin time.
//!
//! Frequency requests (`policy/nest_perf.c`, `--perf`): the adapter calls
//! the C code where scx_nest's ops.running/stopping/tick do, with the
//! core's current frequency as the performance level, and hands the
//! engine each CPU's last request as [`Policy::perf_target`] (the kernel's
//! SCX_CPUPERF_ONE before the first), which the `schedutil` governor then
//! uses instead of the engine's PELT-like utilisation.

use nest_policy::{
    Mechanism, NestPolicy, PERF_ONE, Params, Platform, Queue, Resume, Stat, TaskState,
    WEIGHT_NICE_0,
};
use nest_trace::{Cpu, Nest as NestKind, PrevState};

use super::baseline;
use super::dsq::LlcQueues;
use super::ext_idle::{ExtIdle, core_free};
use super::{Ctx, Dispatch, Enqueue, Policy, Queued, Spin, TaskId, Wake};
use crate::workload::Nests;

/// The Nest policy, driven by the shared C code.
pub struct Nest {
    policy: NestPolicy,
    params: Params,
    /// Per-task C state, indexed by task id.
    tasks: Vec<TaskState>,
    /// Nest membership last reported to the trace, per CPU.
    reported: Vec<NestKind>,
    /// Nest membership per CPU, as of `version`.
    nests: Vec<NestKind>,
    version: Option<u64>,
    /// The task running on each CPU (for the tick's frequency request).
    curr: Vec<Option<TaskId>>,
    /// sched_ext's idle selection, the fallback.
    ext_idle: ExtIdle,
    /// The LLC queues of the tasks waiting for a CPU.
    queues: LlcQueues,
    /// What the host keeps per task, indexed by task id.
    hosted: Vec<Hosted>,
}

/// What `scx_nest` keeps of a task beside the policy's state (its
/// `struct task_ctx`).
#[derive(Clone, Copy, Debug, Default)]
struct Hosted {
    /// When it was queued (0: not queued), for the starvation guard.
    queued_ns: u64,
    /// Its slice was ended to move it off a shared core (tick unpairing).
    unpair: bool,
}

/// Every simulated task has the weight of nice 0.
const WEIGHT: u32 = WEIGHT_NICE_0;

/// The C policy's counters of nest membership changes: their sum changes
/// exactly when a CPU joins or leaves a nest.
const MEMBERSHIP_STATS: [Stat; 5] = [
    Stat::Promoted,
    Stat::JoinedReserve,
    Stat::JoinedPrimary,
    Stat::Compacted,
    Stat::ExitDemoted,
];

impl Nest {
    /// Nest for a machine with `topo`, started on CPU 0.
    pub fn new(topo: &nest_trace::Topology, params: Params) -> anyhow::Result<Self> {
        let policy = NestPolicy::new(topo, 0, &params).map_err(|e| anyhow::anyhow!("nest: {e}"))?;
        policy.perf_init();
        Ok(Self {
            policy,
            params,
            tasks: Vec::new(),
            reported: vec![NestKind::None; topo.nr_cpus()],
            nests: vec![NestKind::None; topo.nr_cpus()],
            version: None,
            curr: vec![None; topo.nr_cpus()],
            ext_idle: ExtIdle::new(topo),
            queues: LlcQueues::new(nest_policy::MAX_LLCS + 2 * nest_policy::MAX_CPUS),
            hosted: Vec::new(),
        })
    }

    /// Nest membership of every CPU, re-read from the C policy only when
    /// its membership counters moved.
    fn nests(&mut self) -> &[NestKind] {
        let version = MEMBERSHIP_STATS.iter().map(|&s| self.policy.stat(s)).sum();
        if self.version != Some(version) {
            self.version = Some(version);
            self.nests.iter_mut().for_each(|n| *n = NestKind::None);
            for c in self.policy.reserve() {
                self.nests[c as usize] = NestKind::Reserve;
            }
            for c in self.policy.primary() {
                self.nests[c as usize] = NestKind::Primary;
            }
        }
        &self.nests
    }

    /// How many times the C policy counted `stat`.
    pub fn stat(&self, stat: Stat) -> u64 {
        self.policy.stat(stat)
    }

    /// Emits trace events for nest membership changes (only when tracing:
    /// inlined, the check costs a test where a call cost 17 instructions
    /// at each placement and idle CPU).
    #[inline]
    fn report_nests(&mut self, cx: &mut Ctx) {
        if cx.k.cfg.record_trace {
            self.report_nest_changes(cx);
        }
    }

    #[inline(never)]
    fn report_nest_changes(&mut self, cx: &mut Ctx) {
        self.nests();
        for (cpu, (&new, old)) in self.nests.iter().zip(self.reported.iter_mut()).enumerate() {
            if new != *old {
                *old = new;
                cx.nest_changed(cpu as Cpu, new);
            }
        }
    }
}

/// The C policy's state of `task`, created on first use. Borrows only the
/// task table, so the policy itself stays usable beside it.
pub(super) fn task_state(tasks: &mut Vec<TaskState>, task: TaskId) -> &mut TaskState {
    per_task(tasks, task, TaskState::new)
}

/// The traits of `task` that scx_nest's `nest_stopping()` reads from
/// `p->flags` (a kernel thread) and its affinity (pinned) whenever it
/// sleeps.
fn set_traits(cx: &Ctx, task: TaskId, state: &mut TaskState) {
    state.set_traits(cx.task_kernel_thread(task), cx.task_pinned(task));
}

/// `task`'s entry of a table indexed by task id, created with `new` (with
/// those of the ids before it) on first use.
fn per_task<T>(table: &mut Vec<T>, task: TaskId, new: impl FnMut() -> T) -> &mut T {
    let i = task as usize;
    if table.len() <= i {
        table.resize_with(i + 1, new);
    }
    &mut table[i]
}

/// The default placement a C policy's host falls back to.
pub(super) enum DefaultPlacement<'a> {
    /// The Linux model ([`baseline`]) placing this task: S_local and
    /// S_move, which the paper built into the fair scheduler.
    Linux(TaskId),
    /// sched_ext's built-in idle selection ([`ExtIdle`]), as `scx_nest`
    /// runs Nest.
    SchedExt(&'a mut ExtIdle),
}

/// The simulator as the C policy's platform, for one placement (or one
/// S_move timer).
pub(super) struct SimPlatform<'a, 'b> {
    cx: &'a mut Ctx<'b>,
    /// The task decided for, if any (`plat_task_allowed()` answers from
    /// its CPUs).
    task: Option<TaskId>,
    waker: Option<Cpu>,
    why: Wake,
    default: DefaultPlacement<'a>,
    /// CPUs claimed during this placement (claims are exclusive).
    claimed: Claimed,
    /// The host's queues, for the scheduler around the placement.
    queues: Option<&'a LlcQueues>,
}

impl<'a, 'b> SimPlatform<'a, 'b> {
    pub(super) fn new(
        cx: &'a mut Ctx<'b>,
        task: Option<TaskId>,
        waker: Option<Cpu>,
        why: Wake,
        default: DefaultPlacement<'a>,
    ) -> Self {
        Self {
            cx,
            task,
            waker,
            why,
            default,
            claimed: Claimed::default(),
            queues: None,
        }
    }

    /// The same platform, answering for `queues`.
    pub(super) fn with_queues(mut self, queues: &'a LlcQueues) -> Self {
        self.queues = Some(queues);
        self
    }
}

/// The CPUs claimed during one placement. A placement claims one CPU or
/// none (at most a few): they are kept in place, as a vector allocated for
/// the first claim cost a tenth of the placement.
#[derive(Default)]
struct Claimed {
    first: [Cpu; 2],
    len: usize,
    more: Vec<Cpu>,
}

impl Claimed {
    fn contains(&self, cpu: Cpu) -> bool {
        self.first[..self.len].contains(&cpu) || self.more.contains(&cpu)
    }

    fn push(&mut self, cpu: Cpu) {
        if self.len < self.first.len() {
            self.first[self.len] = cpu;
            self.len += 1;
        } else {
            self.more.push(cpu);
        }
    }
}

/// Is `cpu` idle and not among the CPUs `claimed` by this placement? For
/// sched_ext (`sched_ext`: the host is `scx_nest`'s), idle as its idle
/// mask says ([`idle_for_kick`]): not a CPU whose task is still being
/// switched out. The engine has cleared such a CPU's current task when
/// the task, exiting, wakes its parent; in the kernel the child still runs
/// there then (`exit_notify()` wakes the parent before the child's last
/// `schedule()`), so `scx_bpf_test_and_clear_cpu_idle()` fails on it.
/// (Claimed, the CPU would have had the parent inserted into its local
/// queue; the engine instead handed it to `ops.enqueue()`, which queued it
/// and kicked whichever idle CPU of the LLC came next: 19 of the 40 waits
/// of a guest chain replayed with the guest's other tasks.)
fn free_cpu(cx: &Ctx, claimed: &Claimed, cpu: u32, sched_ext: bool) -> bool {
    cpu < cx.nr_cpus()
        && if sched_ext {
            idle_for_kick(cx, cpu)
        } else {
            cx.is_idle(cpu)
        }
        && !claimed.contains(cpu)
}

impl SimPlatform<'_, '_> {
    /// Does the placement follow sched_ext's idle mask (see [`free_cpu`])?
    fn sched_ext(&self) -> bool {
        matches!(self.default, DefaultPlacement::SchedExt(_))
    }

    /// Is `cpu` idle and not claimed by this placement?
    fn free(&self, cpu: u32) -> bool {
        free_cpu(self.cx, &self.claimed, cpu, self.sched_ext())
    }

    /// Are all SMT threads of `cpu`'s core free?
    fn core_idle(&self, cpu: u32) -> bool {
        core_free(self.cx, cpu, &|c| self.free(c))
    }

    /// The Linux model's choice; restricted to whole idle cores, its CPU if
    /// its core is idle, else an idle core of `prev`'s LLC, else of any LLC.
    fn linux_default_cpu(&mut self, task: TaskId, prev: u32, whole_core: bool) -> (u32, bool) {
        let cpu = baseline::select(self.cx, task, prev, self.waker, self.why);
        if !whole_core || self.core_idle(cpu) {
            return (cpu, self.claim_idle(cpu));
        }
        let llc = self.cx.llc(prev);
        let in_llc = self.cx.llc_cpus(llc).iter().copied();
        let core = in_llc
            .chain(0..self.cx.nr_cpus())
            .find(|&c| self.core_idle(c) && self.task_allowed(c));
        match core {
            Some(c) => (c, self.claim_idle(c)),
            None => (cpu, false),
        }
    }
}

impl Platform for SimPlatform<'_, '_> {
    fn claim_idle(&mut self, cpu: u32) -> bool {
        if !self.free(cpu) {
            return false;
        }
        self.claimed.push(cpu);
        true
    }

    fn task_allowed(&self, cpu: u32) -> bool {
        cpu < self.cx.nr_cpus() && self.task.is_none_or(|t| self.cx.task_allowed(t, cpu))
    }

    /// sched_ext's `scx_bpf_select_cpu_dfl()` (`SCX_PICK_IDLE_CORE` for a
    /// whole core) called on the waker's CPU, for Nest; the Linux model
    /// for the others.
    fn default_cpu(&mut self, prev: u32, whole_core: bool) -> (u32, bool) {
        let caller = self.waker.unwrap_or(prev);
        let idle_mask = self.sched_ext();
        let (cx, claimed, task) = (&*self.cx, &self.claimed, self.task);
        // `p->cpus_ptr` limits sched_ext's idle selection.
        let free = |c: u32| {
            free_cpu(cx, claimed, c, idle_mask) && task.is_none_or(|t| cx.task_allowed(t, c))
        };
        let found = match &mut self.default {
            &mut DefaultPlacement::Linux(task) => {
                return self.linux_default_cpu(task, prev, whole_core);
            }
            DefaultPlacement::SchedExt(ext) => {
                ext.select_cpu_dfl(cx, prev, caller, whole_core, free)
            }
        };
        match found {
            Some(cpu) => (cpu, self.claim_idle(cpu)),
            None => (prev, false),
        }
    }

    /// sched_ext's `scx_bpf_pick_idle_cpu()` called on the waker's CPU, for
    /// Nest; for the others a whole idle core, else any idle CPU, from CPU 0.
    fn pick_any_idle(&mut self) -> Option<u32> {
        let caller = self.waker.unwrap_or(0);
        let idle_mask = self.sched_ext();
        let (cx, claimed, task) = (&*self.cx, &self.claimed, self.task);
        let free = |c: u32| {
            free_cpu(cx, claimed, c, idle_mask) && task.is_none_or(|t| cx.task_allowed(t, c))
        };
        let found = match &mut self.default {
            DefaultPlacement::SchedExt(ext) => ext.pick_idle_cpu(cx, caller, free),
            DefaultPlacement::Linux(_) => {
                let n = cx.nr_cpus();
                (0..n)
                    .find(|&c| core_free(cx, c, &free))
                    .or_else(|| (0..n).find(|&c| free(c)))
            }
        };
        found.filter(|&cpu| self.claim_idle(cpu))
    }

    fn now_ns(&self) -> u64 {
        self.cx.now()
    }

    /// sched_ext's idle mask against `p->cpus_ptr`, as the BPF host asks.
    fn any_idle(&self) -> bool {
        (0..self.cx.nr_cpus()).any(|c| self.free(c) && self.task_allowed(c))
    }

    /// The frequency the engine observed at `cpu`'s last tick.
    fn cpu_above_min(&self, cpu: u32) -> bool {
        self.cx.last_tick_mhz(cpu) > self.cx.machine().frequency.min_mhz
    }

    fn is_fork(&self) -> bool {
        self.why == Wake::Fork
    }

    fn cpu_idle(&self, cpu: u32) -> bool {
        self.free(cpu)
    }

    fn llc_queued(&self, llc: u32) -> u32 {
        self.queues.map_or(0, |q| q.len(llc))
    }

    /// The heads of the LLC queues and of the CPUs' queues of pinned tasks.
    fn queue_head(&self, queue: Queue) -> Option<u64> {
        self.queues?.head(dsq(queue))
    }
}

/// The host's index of `queue`: an LLC's, or after them a CPU's queue of
/// pinned tasks, then its front queue (`LLC_DSQ_BASE + llc`,
/// `PINNED_DSQ_BASE + cpu`, `FRONT_DSQ_BASE + cpu`).
fn dsq(queue: Queue) -> u32 {
    const PINNED_BASE: u32 = nest_policy::MAX_LLCS as u32;
    const FRONT_BASE: u32 = PINNED_BASE + nest_policy::MAX_CPUS as u32;
    match queue {
        Queue::Llc(llc) => llc,
        Queue::Pinned(cpu) => PINNED_BASE + cpu,
        Queue::Front(cpu) => FRONT_BASE + cpu,
    }
}

/// The task's host state, created on first use.
fn hosted(hosted: &mut Vec<Hosted>, task: TaskId) -> &mut Hosted {
    per_task(hosted, task, Hosted::default)
}

/// The task's host state as it stands (all unset before first use).
fn hosted_now(hosted: &[Hosted], task: TaskId) -> Hosted {
    hosted.get(task as usize).copied().unwrap_or_default()
}

/// Is `cpu` idle for sched_ext (in its idle mask: not between two tasks)?
fn idle_for_kick(cx: &Ctx, cpu: Cpu) -> bool {
    cx.is_idle(cpu) && !cx.switching(cpu)
}

/// The scheduler around the placement, as `scx_nest`'s ops.enqueue,
/// ops.dispatch and ops.tick run it (crates/scx_nest/src/bpf/main.bpf.c,
/// function named on each method): every decision is the C policy's
/// (policy/nest_sched.c); these methods keep the queues and the order of
/// the calls.
impl Nest {
    /// A platform for `cx` that answers for the queues, deciding for
    /// `task` if any; the calling CPU is `caller` (for the built-in idle
    /// selection's rotation).
    fn platform<'a, 'b>(
        ext_idle: &'a mut ExtIdle,
        queues: &'a LlcQueues,
        cx: &'a mut Ctx<'b>,
        task: Option<TaskId>,
        caller: Cpu,
    ) -> SimPlatform<'a, 'b> {
        let why = Wake::Wakeup { sync: false };
        let default = DefaultPlacement::SchedExt(ext_idle);
        SimPlatform::new(cx, task, Some(caller), why, default).with_queues(queues)
    }

    /// `kick_idle_near()`: kick an idle CPU of `cpu`'s LLC, else any that
    /// `task` (if any) may run on, rotating as
    /// `bpf_cpumask_any_and_distribute()` called on `cpu`.
    fn kick_idle_near(&mut self, cx: &mut Ctx, cpu: Cpu, task: Option<TaskId>) {
        let idle = |c: Cpu| idle_for_kick(cx, c);
        let allowed = |c: Cpu| task.is_none_or(|t| cx.task_allowed(t, c));
        if let Some(target) = self.ext_idle.any_idle_near(cx, cpu, idle, allowed) {
            cx.kick(target, false);
        }
    }

    /// `claim_cpu_for_queued()`: an idle CPU for `task`, queued without a
    /// placement, claimed: one of the nests first, then any.
    fn claim_for_queued(&mut self, cx: &mut Ctx, task: TaskId, cpu: Cpu) -> Option<Cpu> {
        let mut plat = Self::platform(&mut self.ext_idle, &self.queues, cx, Some(task), cpu);
        let state = task_state(&mut self.tasks, task);
        self.policy
            .claim_for_queued(&mut plat, state, cpu)
            .or_else(|| plat.pick_any_idle())
    }

    /// The queue whose virtual-time frame `task`, on `cpu`, waits in:
    /// `cpu`'s queue of pinned tasks if it may run there only
    /// (`task_pinned()`), else its LLC's (`cpu`'s front queue is in it).
    fn frame_of(&self, cx: &Ctx, task: TaskId, cpu: Cpu) -> Queue {
        if cx.task_pinned(task) {
            Queue::Pinned(cpu)
        } else {
            Queue::Llc(self.policy.queue_llc(cpu))
        }
    }

    /// `queue_task()`: `task` joins the queue the policy names
    /// (`nest_queue_of()`; `cpu`'s front queue if `home`: a woken task
    /// preempted it there) with its virtual time. A woken task may preempt
    /// `cpu`'s, which then resumes there (`nest_woken_preempts()`; one that
    /// `cpu` would take next goes straight to `cpu`:
    /// `nest_woken_runs_next()`); otherwise `cpu` (pinned) or an idle CPU
    /// near it is kicked to take it.
    fn queue_task(
        &mut self,
        cx: &mut Ctx,
        task: TaskId,
        cpu: Cpu,
        woken: bool,
        home: bool,
    ) -> Queued {
        let pinned = cx.task_pinned(task);
        let frame = self.frame_of(cx, task, cpu);
        let mut plat = Self::platform(&mut self.ext_idle, &self.queues, cx, Some(task), cpu);
        let state = task_state(&mut self.tasks, task);
        let vtime = self.policy.queue_vtime(&mut plat, state, frame, WEIGHT);
        let preempt =
            woken && plat.task_allowed(cpu) && self.policy.wakeup_preempts(cpu, vtime, cx.now());
        let h = hosted(&mut self.hosted, task);
        if h.queued_ns == 0 {
            h.queued_ns = cx.now().max(1);
        }
        let mut plat = Self::platform(&mut self.ext_idle, &self.queues, cx, Some(task), cpu);
        if preempt && self.policy.woken_runs_next(&mut plat, cpu, vtime) {
            self.policy.woken_preempts(cpu, pinned);
            cx.kick(cpu, true);
            return Queued::OnCpu(cpu);
        }
        let queue = self
            .policy
            .queue_of(&mut plat, cpu, pinned, preempt || home);
        self.queues.insert(dsq(queue), task, vtime);
        self.policy
            .task_queued(task_state(&mut self.tasks, task), queue);
        if preempt {
            self.policy.woken_preempts(cpu, false);
            cx.kick(cpu, true);
        } else if pinned {
            // kick_pinned_cpu(): an idle `cpu` takes it.
            cx.kick(cpu, false);
        } else {
            self.kick_idle_near(cx, cpu, Some(task));
        }
        Queued::Held
    }

    /// Takes `task` out of the queues.
    fn take(&mut self, task: TaskId) -> TaskId {
        self.queues.remove(task);
        task
    }

    /// `scx_bpf_dsq_move_to_local()`: the first task of queue `dsq` that
    /// may run on `cpu` (sched_ext skips the others).
    fn take_first(&mut self, cx: &Ctx, cpu: Cpu, dsq: u32) -> Option<TaskId> {
        let (_, task) = self
            .queues
            .front(dsq)
            .find(|&(_, t)| cx.task_allowed(t, cpu))?;
        Some(self.take(task))
    }

    /// `consume_starving()`: a task of queue `dsq` that has waited too
    /// long and may run on `cpu`, looked for when the queue's sweep is due.
    fn take_starving(&mut self, cx: &Ctx, cpu: Cpu, dsq: u32) -> Option<TaskId> {
        let now = cx.now();
        if !self
            .policy
            .starve_sweep_due(&mut self.queues.sweep_at[dsq as usize], now)
            || self.queues.len(dsq) == 0
        {
            return None;
        }
        let hosted = &self.hosted;
        let starving = self.queues.back(dsq).find(|&task| {
            let queued_ns = hosted_now(hosted, task).queued_ns;
            self.policy.starving(queued_ns, now) && cx.task_allowed(task, cpu)
        })?;
        self.policy
            .starve_rescued(&mut self.queues.sweep_at[dsq as usize], now);
        Some(self.take(starving))
    }

    /// `prev_keeps_cpu()`: should `prev`, at the end of its slice on `cpu`,
    /// keep the CPU rather than give it to the next task of `queue`?
    fn prev_keeps_cpu(&mut self, cx: &mut Ctx, cpu: Cpu, prev: TaskId, queue: Queue) -> bool {
        if hosted_now(&self.hosted, prev).unpair {
            return false;
        }
        let now = cx.now();
        let mut plat = Self::platform(&mut self.ext_idle, &self.queues, cx, Some(prev), cpu);
        let state = task_state(&mut self.tasks, prev);
        self.policy
            .prev_keeps_cpu(&mut plat, cpu, state, WEIGHT, queue, now)
    }

    /// `consume_starving_near()`: the starvation guard's sweep of `cpu`'s
    /// pinned and front queues and of its LLC's.
    fn take_starving_near(&mut self, cx: &Ctx, cpu: Cpu) -> Option<TaskId> {
        let own = self.policy.queue_llc(cpu);
        [Queue::Pinned(cpu), Queue::Front(cpu), Queue::Llc(own)]
            .into_iter()
            .find_map(|queue| self.take_starving(cx, cpu, dsq(queue)))
    }

    /// `consume()`: what `cpu` takes from the queue the policy names; when
    /// that holds nothing `cpu` may run, its pinned queue, its front queue,
    /// then its LLC's.
    fn consume(&mut self, cx: &mut Ctx, cpu: Cpu, prev: Option<TaskId>, queue: Queue) -> Dispatch {
        if let Some(task) = self.take_starving_near(cx, cpu) {
            return Dispatch::Run(task);
        }
        if prev.is_some_and(|prev| self.prev_keeps_cpu(cx, cpu, prev, queue)) {
            return Dispatch::KeepPrev;
        }
        let own = Queue::Llc(self.policy.queue_llc(cpu));
        let task = [queue, Queue::Pinned(cpu), Queue::Front(cpu), own]
            .into_iter()
            .find_map(|q| self.take_first(cx, cpu, dsq(q)));
        task.map_or(Dispatch::Nothing, Dispatch::Run)
    }

    /// `tick_unpair()`: a task that shared its core with a busy SMT
    /// sibling for two ticks, while a whole core is idle, ends its slice
    /// at this tick (a slice set to 0, no kick) and is marked to take an
    /// idle core at its enqueue.
    /// Not a pinned task, and only for a whole core it may run on.
    fn tick_unpair(&mut self, cx: &mut Ctx, task: TaskId, cpu: Cpu) {
        if cx.task_pinned(task) || !self.policy.tick_unpair(cpu) {
            return;
        }
        let idle = |c: Cpu| idle_for_kick(cx, c);
        let whole = |c: Cpu| cx.task_allowed(task, c) && core_free(cx, c, &idle);
        if (0..cx.nr_cpus()).any(whole) {
            hosted(&mut self.hosted, task).unpair = true;
            cx.end_slice(cpu);
        }
    }
}

impl Policy for Nest {
    fn name(&self) -> String {
        if self.params.disabled.contains(&Mechanism::WarmSpin) {
            "nest-nospin".into()
        } else {
            "nest".into()
        }
    }

    fn owns_queues(&self) -> bool {
        true
    }

    /// `nest_select_cpu_op()` (never asked for a task that may run on one
    /// CPU only: the kernel does not call it then).
    fn select_cpu(
        &mut self,
        cx: &mut Ctx,
        task: TaskId,
        prev: Cpu,
        waker: Option<Cpu>,
        why: Wake,
    ) -> Cpu {
        let default = DefaultPlacement::SchedExt(&mut self.ext_idle);
        let mut plat =
            SimPlatform::new(cx, Some(task), waker, why, default).with_queues(&self.queues);
        let state = task_state(&mut self.tasks, task);
        if why != Wake::Fork {
            // A task woken has slept before, under scx_nest: a replayed
            // other task too, which existed before the workload started.
            set_traits(plat.cx, task, state);
        }
        let choice = self.policy.select_cpu(&mut plat, state, prev);
        cx.placed(waker.unwrap_or(prev), task, choice.cpu, choice.how.name());
        choice.cpu
    }

    /// `nest_runnable()`: the task's virtual time is placed against the
    /// queue it would wait in on `cpu`.
    fn runnable(&mut self, cx: &mut Ctx, task: TaskId, cpu: Cpu) {
        let now = cx.now();
        let queue = self.frame_of(cx, task, cpu);
        let mut plat = Self::platform(&mut self.ext_idle, &self.queues, cx, Some(task), cpu);
        let state = task_state(&mut self.tasks, task);
        self.policy.task_woken(&mut plat, state, queue, WEIGHT, now);
        self.report_nests(cx);
    }

    /// `nest_enqueue()`: a pinned task waits in its CPU's queue; a task
    /// that a woken one preempted resumes on its CPU; a task leaving a
    /// shared core takes an idle CPU if there is one; the last task of a
    /// CPU stays there; every other waits in its LLC queue. Only a woken
    /// task is one (`SCX_ENQ_WAKEUP`): a new one neither asks to preempt
    /// nor counts as woken at the queue's front ([`Enqueue::New`]).
    fn enqueue(&mut self, cx: &mut Ctx, task: TaskId, cpu: Cpu, why: Enqueue) -> Queued {
        let unpair = std::mem::take(&mut hosted(&mut self.hosted, task).unpair);
        let woken = why == Enqueue::Wakeup;
        if cx.task_pinned(task) {
            return self.queue_task(cx, task, cpu, woken, false);
        }
        // preempted_resumes()
        let resume = if !woken && cx.task_allowed(task, cpu) {
            self.policy.preempted_resumes(cpu)
        } else {
            Resume::Queued
        };
        if resume == Resume::Local {
            return Queued::OnCpu(cpu);
        }
        if unpair
            && why != Enqueue::Wakeup
            && let Some(idle) = self.claim_for_queued(cx, task, cpu)
        {
            return Queued::OnCpu(idle);
        }
        if why == Enqueue::Last {
            return Queued::OnCpu(cpu);
        }
        self.queue_task(cx, task, cpu, woken, resume == Resume::Front)
    }

    /// `nest_dispatch()`: the queue the policy names, else `prev` keeps
    /// the CPU (unless it is leaving a shared core).
    fn dispatch(&mut self, cx: &mut Ctx, cpu: Cpu, prev: Option<TaskId>) -> Dispatch {
        let mut plat = Self::platform(&mut self.ext_idle, &self.queues, cx, None, cpu);
        let queue = self.policy.queue_to_consume(&mut plat, cpu);
        let d = queue.map_or(Dispatch::Nothing, |q| self.consume(cx, cpu, prev, q));
        match (d, prev) {
            (Dispatch::Nothing, Some(p)) if !hosted_now(&self.hosted, p).unpair => {
                Dispatch::KeepPrev
            }
            _ => d,
        }
    }

    /// `slice_on()`.
    fn slice_ns(&mut self, cx: &mut Ctx, cpu: Cpu) -> Option<u64> {
        let mut plat = Self::platform(&mut self.ext_idle, &self.queues, cx, None, cpu);
        Some(self.policy.slice(&mut plat, cpu))
    }

    fn cpu_idle(&mut self, cx: &mut Ctx, cpu: Cpu) -> Option<Spin> {
        let now = cx.now();
        let spin_until = self.policy.cpu_idle(cpu, now);
        self.report_nests(cx);
        spin_until.map(|until| Spin {
            max_ns: until - now,
            until_sibling_busy: true,
        })
    }

    /// `nest_running()`.
    fn task_running(&mut self, cx: &mut Ctx, task: TaskId, cpu: Cpu) {
        let now = cx.now();
        hosted(&mut self.hosted, task).queued_ns = 0;
        let mut plat = Self::platform(&mut self.ext_idle, &self.queues, cx, Some(task), cpu);
        let state = task_state(&mut self.tasks, task);
        self.policy
            .perf_running(state, cpu, now, perf_level(plat.cx, cpu));
        self.policy
            .sched_running(&mut plat, state, cpu, WEIGHT, now);
        self.policy.task_running(state, cpu, now);
        self.curr[cpu as usize] = Some(task);
    }

    /// `nest_stopping()`.
    fn task_stopping(&mut self, cx: &mut Ctx, task: TaskId, cpu: Cpu, why: PrevState) {
        let state = task_state(&mut self.tasks, task);
        let exiting = why == PrevState::Dead;
        self.policy.sched_stopping(state, cpu, WEIGHT, cx.now());
        self.policy
            .perf_stopping(state, cpu, cx.now(), perf_level(cx, cpu), exiting);
        if why == PrevState::Blocked {
            set_traits(cx, task, state);
            self.policy.task_sleeping(state, cpu, cx.now());
        }
        self.curr[cpu as usize] = None;
    }

    fn task_exit(&mut self, _cx: &mut Ctx, _task: TaskId, cpu: Cpu) {
        self.policy.task_exiting(cpu);
    }

    fn seed_nests(&mut self, cx: &mut Ctx, nests: &Nests) {
        let now = cx.now();
        for (cpus, primary) in [(&nests.primary, true), (&nests.reserve, false)] {
            for &cpu in cpus {
                self.policy.seed_cpu(now, cpu, primary, nests.idle_ns(cpu));
            }
        }
        // Seeding counts no membership change: re-read the nests.
        self.version = None;
        self.report_nests(cx);
    }

    fn ticks(&self) -> bool {
        true
    }

    /// `nest_tick()`, on CPUs running a task.
    fn tick(&mut self, cx: &mut Ctx, cpu: Cpu) {
        let Some(task) = self.curr[cpu as usize] else {
            return;
        };
        let state = task_state(&mut self.tasks, task);
        self.policy
            .perf_tick(state, cpu, cx.now(), perf_level(cx, cpu));
        self.tick_unpair(cx, task, cpu);
        let mut plat = Self::platform(&mut self.ext_idle, &self.queues, cx, None, cpu);
        if self.policy.tick_kick(&mut plat, cpu) {
            self.kick_idle_near(cx, cpu, None);
        }
    }

    fn perf_target(&self, cpu: Cpu) -> Option<u32> {
        Some(self.policy.perf_requested(cpu).unwrap_or(PERF_ONE))
    }
}

/// `cpu`'s performance level now, as scx_bpf_cpuperf_cur() reports it:
/// its frequency relative to the maximum, [`PERF_ONE`] = maximum.
fn perf_level(cx: &Ctx, cpu: Cpu) -> u32 {
    let max = cx.machine().frequency.max_mhz.max(1);
    (u64::from(cx.cur_mhz(cpu)) * u64::from(PERF_ONE) / u64::from(max)) as u32
}

/// One rule of each kind (fallback, queue choice, frequency request, warm
/// spin), given the same situation through the simulator's host (as the
/// engine calls it) and through the native policy called directly (as
/// `scx_nest` calls it): the answers must be the same, so the host adds no
/// rule of its own.
#[cfg(test)]
mod tests {
    use nest_policy::{NestPolicy, Params, PerfMode, Platform, Queue, TaskState};

    use super::*;
    use crate::engine::Kernel;
    use crate::policy::ext_idle::ExtIdle;
    use crate::policy::testkit::{busy, guest};

    fn params() -> Params {
        Params {
            perf: PerfMode::Util,
            ..Params::default()
        }
    }

    fn host(k: &Kernel) -> Nest {
        Nest::new(&k.topo, params()).unwrap()
    }

    fn native(k: &Kernel) -> NestPolicy {
        NestPolicy::new(&k.topo, 0, &params()).unwrap()
    }

    /// What `scx_nest` tells the policy: idle CPUs, queue lengths and
    /// heads; its fallback is the simulator's sched_ext selection.
    struct Bpf<'a> {
        cx: &'a Ctx<'a>,
        ext: ExtIdle,
        queues: &'a LlcQueues,
    }

    impl Platform for Bpf<'_> {
        fn claim_idle(&mut self, cpu: u32) -> bool {
            self.cx.is_idle(cpu)
        }
        fn task_allowed(&self, _cpu: u32) -> bool {
            true
        }
        fn default_cpu(&mut self, prev: u32, whole_core: bool) -> (u32, bool) {
            let cx = self.cx;
            match self
                .ext
                .select_cpu_dfl(cx, prev, prev, whole_core, |c| cx.is_idle(c))
            {
                Some(cpu) => (cpu, true),
                None => (prev, false),
            }
        }
        fn pick_any_idle(&mut self) -> Option<u32> {
            None
        }
        fn now_ns(&self) -> u64 {
            self.cx.now()
        }
        fn cpu_idle(&self, cpu: u32) -> bool {
            self.cx.is_idle(cpu)
        }
        fn llc_queued(&self, llc: u32) -> u32 {
            self.queues.len(llc)
        }
        fn queue_head(&self, queue: Queue) -> Option<u64> {
            self.queues.head(dsq(queue))
        }
    }

    #[test]
    fn fallback_is_sched_ext_default_idle_selection() {
        // Nothing in the nests yet: a new task forked on CPU 1, whose
        // sibling 9 is busy, takes a whole idle core of CPU 1's LLC.
        let mut k = guest();
        busy(&mut k, &[9], 1.0);
        let task = k.test_task(1, 0.0);
        let mut nest = host(&k);
        let mut cx = Ctx { k: &mut k };
        let in_sim = nest.select_cpu(&mut cx, task, 1, Some(1), Wake::Fork);
        let cx = Ctx { k: &mut k };
        let mut bpf = Bpf {
            ext: ExtIdle::new(cx.topology()),
            cx: &cx,
            queues: &LlcQueues::default(),
        };
        let direct = native(cx.k).select_cpu(&mut bpf, &mut TaskState::new(), 1);
        assert_eq!(in_sim, direct.cpu);
        assert!([0, 2, 3].contains(&in_sim), "{in_sim}");
    }

    #[test]
    fn a_cpu_out_of_work_takes_from_the_queue_the_policy_names() {
        // Every CPU busy but CPU 0. Preempted: `own` tasks on CPU 1 (LLC
        // 0) and `other` on CPU 4 (LLC 1); the first of each waits in its
        // CPU's front queue, the others in the LLC's. The C policy says
        // which queue CPU 0 takes from: its LLC's, another CPU's front
        // task of its LLC, another LLC's queue only when overloaded or
        // when nothing else waits, and another LLC's front task last.
        let front = Queue::Front;
        for (own, other, expected) in [
            (0, 3, Queue::Llc(1)),
            (1, 2, front(1)),
            (1, 4, Queue::Llc(1)),
            (2, 0, Queue::Llc(0)),
            (0, 2, Queue::Llc(1)),
            (0, 1, front(4)),
        ] {
            let mut k = guest();
            let all_but_0: Vec<Cpu> = (1..16).collect();
            busy(&mut k, &all_but_0, 1.0);
            let mut nest = host(&k);
            let mut cx = Ctx { k: &mut k };
            for (n, on) in [(own, 1), (other, 4)] {
                for _ in 0..n {
                    let t = cx.k.test_task(on, 1.0);
                    nest.select_cpu(&mut cx, t, on, None, Wake::Wakeup { sync: false });
                    nest.enqueue(&mut cx, t, on, Enqueue::Preempted);
                }
            }
            let before = nest.queues.clone();
            let Dispatch::Run(taken) = nest.dispatch(&mut cx, 0, None) else {
                panic!("{own}+{other} waiting: CPU 0 took nothing");
            };
            let bpf = &mut Bpf {
                ext: ExtIdle::new(cx.topology()),
                cx: &cx,
                queues: &before,
            };
            // The host's policy: its state counts the front tasks.
            let named = nest.policy.queue_to_consume(bpf, 0);
            assert_eq!(named, Some(expected), "{own}+{other} waiting");
            assert_eq!(
                before.queue_of(taken),
                Some(dsq(expected)),
                "{own}+{other} waiting: taken from the named queue"
            );
        }
    }

    #[test]
    fn frequency_requests_and_warm_spins_are_the_c_policys() {
        let mut k = guest();
        let task = k.test_task(2, 0.0);
        let mut nest = host(&k);
        let direct = native(&k);
        let mut state = TaskState::new();
        let level = |cx: &Ctx| perf_level(cx, 2);
        let mut cx = Ctx { k: &mut k };
        // Twice: the task wakes on CPU 2 (the second time, CPU 2 is in the
        // nests), runs 12 ms with three ticks, then sleeps 10 ms.
        let mut spins = Vec::new();
        for round in 0..2 {
            let start = round * 22_000_000;
            cx.k.now = start;
            nest.select_cpu(&mut cx, task, 2, None, Wake::Wakeup { sync: false });
            let bpf = &mut Bpf {
                ext: ExtIdle::new(cx.topology()),
                cx: &cx,
                queues: &LlcQueues::default(),
            };
            assert_eq!(direct.select_cpu(bpf, &mut state, 2).cpu, 2);
            nest.task_running(&mut cx, task, 2);
            direct.perf_running(&mut state, 2, start, level(&cx));
            direct.task_running(&mut state, 2, start);
            for tick in 1..=3 {
                cx.k.now = start + tick * 4_000_000;
                nest.tick(&mut cx, 2);
                direct.perf_tick(&mut state, 2, cx.now(), level(&cx));
                assert_eq!(
                    nest.perf_target(2),
                    Some(direct.perf_requested(2).unwrap_or(PERF_ONE)),
                    "round {round}, tick {tick}"
                );
            }
            cx.k.now = start + 12_000_000;
            nest.task_stopping(&mut cx, task, 2, PrevState::Blocked);
            direct.perf_stopping(&mut state, 2, cx.now(), level(&cx), false);
            direct.task_sleeping(&mut state, 2, cx.now());
            assert_eq!(nest.perf_target(2), direct.perf_requested(2));
            let spin = nest.cpu_idle(&mut cx, 2).map(|s| s.max_ns);
            let direct_spin = direct.cpu_idle(2, cx.now()).map(|until| until - cx.now());
            assert_eq!(spin, direct_spin, "round {round}");
            spins.push(spin);
        }
        assert!(spins[1].is_some(), "CPU 2 is in the nest: it spins");
    }
}
