//! S_local and S_move (Gouicem et al., "Fewer Cores, More Hertz", USENIX
//! ATC 2020), as restated in NEST-SPEC.md. They live here until the shared
//! C policy (policy/) grows them; they use only the generic hooks (timers,
//! last-tick frequency), which is what they are here to exercise.

use nest_trace::Cpu;

use super::baseline;
use super::{Ctx, Policy, TaskId, Wake};
use crate::engine::TaskPhase;

/// S_local: a forked or woken task goes on the waker's (parent's) CPU.
#[derive(Debug, Default)]
pub struct SLocal;

impl Policy for SLocal {
    fn name(&self) -> String {
        "s-local".into()
    }

    fn select_cpu(
        &mut self,
        _cx: &mut Ctx,
        _task: TaskId,
        prev: Cpu,
        waker: Option<Cpu>,
        _why: Wake,
    ) -> Cpu {
        waker.unwrap_or(prev)
    }
}

/// S_move: use the default CPU `c` if it runs above its minimum frequency
/// (as seen at the last tick); otherwise queue on the waker's CPU and, if
/// the task has not started running there after `delay_ns`, move it to `c`.
#[derive(Debug)]
pub struct SMove {
    pub delay_ns: u64,
    /// Pending moves: (task, waker CPU it was queued on, target), by token.
    pending: Vec<Option<(TaskId, Cpu, Cpu)>>,
}

impl SMove {
    /// The published default delay is 50 us.
    pub fn new(delay_ns: u64) -> Self {
        Self {
            delay_ns,
            pending: Vec::new(),
        }
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
        let c = baseline::select(cx, prev, waker, why);
        let Some(w) = waker.filter(|&w| w != c) else {
            return c;
        };
        if cx.last_tick_mhz(c) > cx.machine().frequency.min_mhz {
            return c;
        }
        let token = self
            .pending
            .iter()
            .position(Option::is_none)
            .unwrap_or(self.pending.len());
        if token == self.pending.len() {
            self.pending.push(None);
        }
        self.pending[token] = Some((task, w, c));
        cx.arm_timer(self.delay_ns, token as u64);
        w
    }

    fn timer(&mut self, cx: &mut Ctx, token: u64) {
        let Some((task, w, c)) = self.pending.get_mut(token as usize).and_then(Option::take) else {
            return;
        };
        if cx.task_phase(task) == TaskPhase::Queued(w) {
            cx.migrate(task, c);
        }
    }
}
