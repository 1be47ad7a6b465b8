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

use nest_policy::{Mechanism, NestPolicy, PERF_ONE, Params, Platform, Stat, TaskState};
use nest_trace::{Cpu, Nest as NestKind, PrevState};

use super::baseline;
use super::ext_idle::{ExtIdle, core_free};
use super::{Ctx, Policy, Spin, TaskId, Wake};

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
}

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

    /// Emits trace events for nest membership changes (only when tracing).
    fn report_nests(&mut self, cx: &mut Ctx) {
        if !cx.k.cfg.record_trace {
            return;
        }
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
    let i = task as usize;
    if tasks.len() <= i {
        tasks.resize_with(i + 1, TaskState::new);
    }
    &mut tasks[i]
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
    waker: Option<Cpu>,
    why: Wake,
    default: DefaultPlacement<'a>,
    /// CPUs claimed during this placement (claims are exclusive).
    claimed: Vec<Cpu>,
}

impl<'a, 'b> SimPlatform<'a, 'b> {
    pub(super) fn new(
        cx: &'a mut Ctx<'b>,
        waker: Option<Cpu>,
        why: Wake,
        default: DefaultPlacement<'a>,
    ) -> Self {
        Self {
            cx,
            waker,
            why,
            default,
            claimed: Vec::new(),
        }
    }
}

/// Is `cpu` idle and not among the CPUs `claimed` by this placement?
fn free_cpu(cx: &Ctx, claimed: &[Cpu], cpu: u32) -> bool {
    cpu < cx.nr_cpus() && cx.is_idle(cpu) && !claimed.contains(&cpu)
}

impl SimPlatform<'_, '_> {
    /// Is `cpu` idle and not claimed by this placement?
    fn free(&self, cpu: u32) -> bool {
        free_cpu(self.cx, &self.claimed, cpu)
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
            .find(|&c| self.core_idle(c));
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
        cpu < self.cx.nr_cpus()
    }

    /// sched_ext's `scx_bpf_select_cpu_dfl()` (`SCX_PICK_IDLE_CORE` for a
    /// whole core) called on the waker's CPU, for Nest; the Linux model
    /// for the others.
    fn default_cpu(&mut self, prev: u32, whole_core: bool) -> (u32, bool) {
        let caller = self.waker.unwrap_or(prev);
        let (cx, claimed) = (&*self.cx, &self.claimed);
        let free = |c: u32| free_cpu(cx, claimed, c);
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
        let (cx, claimed) = (&*self.cx, &self.claimed);
        let free = |c: u32| free_cpu(cx, claimed, c);
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
}

impl Policy for Nest {
    fn name(&self) -> String {
        if self.params.disabled.contains(&Mechanism::WarmSpin) {
            "nest-nospin".into()
        } else {
            "nest".into()
        }
    }

    fn select_cpu(
        &mut self,
        cx: &mut Ctx,
        task: TaskId,
        prev: Cpu,
        waker: Option<Cpu>,
        why: Wake,
    ) -> Cpu {
        let default = DefaultPlacement::SchedExt(&mut self.ext_idle);
        let mut plat = SimPlatform::new(cx, waker, why, default);
        let state = task_state(&mut self.tasks, task);
        let choice = self.policy.select_cpu(&mut plat, state, prev);
        self.report_nests(cx);
        choice.cpu
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

    fn task_running(&mut self, cx: &mut Ctx, task: TaskId, cpu: Cpu) {
        let state = task_state(&mut self.tasks, task);
        self.policy.task_running(state, cpu, cx.now());
        self.policy
            .perf_running(state, cpu, cx.now(), perf_level(cx, cpu));
        self.curr[cpu as usize] = Some(task);
    }

    fn task_stopping(&mut self, cx: &mut Ctx, task: TaskId, cpu: Cpu, why: PrevState) {
        let state = task_state(&mut self.tasks, task);
        let exiting = why == PrevState::Dead;
        self.policy
            .perf_stopping(state, cpu, cx.now(), perf_level(cx, cpu), exiting);
        if why == PrevState::Blocked {
            self.policy.task_sleeping(state, cpu, cx.now());
        }
        self.curr[cpu as usize] = None;
    }

    fn task_exit(&mut self, _cx: &mut Ctx, _task: TaskId, cpu: Cpu) {
        self.policy.task_exiting(cpu);
    }

    fn tick(&mut self, cx: &mut Ctx, cpu: Cpu) {
        if let Some(task) = self.curr[cpu as usize] {
            let state = task_state(&mut self.tasks, task);
            self.policy
                .perf_tick(state, cpu, cx.now(), perf_level(cx, cpu));
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
