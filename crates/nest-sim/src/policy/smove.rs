//! S_local and S_move (Gouicem et al., "Fewer Cores, More Hertz", USENIX
//! ATC 2020) in the simulator: adapters from the engine's [`Policy`] hooks
//! to the shared C policy (`policy/smove_policy.c`, built natively by the
//! `nest-policy` crate). The decisions are the C code's; the engine supplies
//! the platform (the baseline model as the default placement, the frequency
//! observed at the last tick) and S_move's timers.

use nest_policy::{NestPolicy, Params, Stat, TaskState};
use nest_trace::{Cpu, Topology};

use super::nest::{DefaultPlacement, SimPlatform, task_state};
use super::{Ctx, Policy, TaskId, Wake};
use crate::engine::TaskPhase;

fn c_policy(topo: &Topology, params: &Params) -> anyhow::Result<NestPolicy> {
    NestPolicy::new(topo, 0, params).map_err(|e| anyhow::anyhow!("{e}"))
}

/// S_local: a forked or woken task goes on the waker's (parent's) CPU.
pub struct SLocal {
    policy: NestPolicy,
}

impl SLocal {
    pub fn new(topo: &Topology) -> anyhow::Result<Self> {
        Ok(Self {
            policy: c_policy(topo, &Params::default())?,
        })
    }
}

impl Policy for SLocal {
    fn name(&self) -> String {
        "s-local".into()
    }

    fn select_cpu(
        &mut self,
        cx: &mut Ctx,
        task: TaskId,
        prev: Cpu,
        waker: Option<Cpu>,
        why: Wake,
    ) -> Cpu {
        let mut plat = SimPlatform::new(cx, Some(task), waker, why, DefaultPlacement::Linux(task));
        self.policy.slocal_select(&mut plat, waker, prev).cpu
    }
}

/// S_move: use the default CPU `c` if it runs above its minimum frequency
/// (as seen at the last tick); otherwise queue on the waker's CPU and, if
/// the task has not started running there after the delay, move it to `c`.
/// Timer tokens are task ids.
pub struct SMove {
    policy: NestPolicy,
    /// Per-task C state, indexed by task id.
    tasks: Vec<TaskState>,
}

impl SMove {
    /// S_move with delay `delay_ns` (published default: 50 us).
    pub fn new(topo: &Topology, delay_ns: u64) -> anyhow::Result<Self> {
        let params = Params {
            smove_delay_ns: delay_ns,
            ..Params::default()
        };
        Ok(Self {
            policy: c_policy(topo, &params)?,
            tasks: Vec::new(),
        })
    }

    /// How many times the C policy counted `stat`.
    pub fn stat(&self, stat: Stat) -> u64 {
        self.policy.stat(stat)
    }
}

impl Policy for SMove {
    fn name(&self) -> String {
        "s-move".into()
    }

    fn select_cpu(
        &mut self,
        cx: &mut Ctx,
        task: TaskId,
        prev: Cpu,
        waker: Option<Cpu>,
        why: Wake,
    ) -> Cpu {
        let state = task_state(&mut self.tasks, task);
        let mut plat = SimPlatform::new(cx, Some(task), waker, why, DefaultPlacement::Linux(task));
        let choice = self.policy.smove_select(&mut plat, state, waker, prev);
        if let Some(deferred) = choice.deferred {
            cx.arm_timer(deferred.delay_ns, task as u64);
        }
        choice.cpu
    }

    fn task_running(&mut self, _cx: &mut Ctx, task: TaskId, _cpu: Cpu) {
        let state = task_state(&mut self.tasks, task);
        self.policy.smove_task_running(state);
    }

    fn timer(&mut self, cx: &mut Ctx, token: u64) {
        let Ok(task) = TaskId::try_from(token) else {
            return;
        };
        let state = task_state(&mut self.tasks, task);
        let why = Wake::Wakeup { sync: false };
        let mut plat = SimPlatform::new(cx, Some(task), None, why, DefaultPlacement::Linux(task));
        let target = self.policy.smove_timer(&mut plat, state);
        if let (Some(cpu), TaskPhase::Queued(_)) = (target, cx.task_phase(task)) {
            cx.migrate(task, cpu);
        }
    }
}
