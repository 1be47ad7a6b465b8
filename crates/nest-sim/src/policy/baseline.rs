//! A model of default Linux (CFS/EEVDF) task placement (see docs/design/simulator.md,
//! "Baseline placement"), following kernel/sched/fair.c function by
//! function, per [`fork_balance::LinuxVersion`]:
//!
//! - **fork** (`find_idlest_cpu`): [`super::fork_balance`];
//! - **wakeup** (`wake_wide`, `wake_affine`, `select_idle_sibling`):
//!   [`super::wakeup`].
//!
//! Load balancing (periodic and newly-idle): the rules are
//! `policy/load_balance.rs`; the engine runs them (`engine/balance.rs`)
//! under every placement policy that uses its run queues, since they are
//! the kernel's.

use nest_trace::Cpu;

use super::fork_balance;
use super::wakeup::{self, Wakeup};
use super::{Ctx, Policy, TaskId, Wake};

/// The default Linux placement as a policy.
#[derive(Debug, Default)]
pub struct Baseline;

impl Policy for Baseline {
    fn name(&self) -> String {
        "linux".into()
    }

    fn select_cpu(
        &mut self,
        cx: &mut Ctx,
        task: TaskId,
        prev: Cpu,
        waker: Option<Cpu>,
        why: Wake,
    ) -> Cpu {
        select(cx, task, prev, waker, why)
    }
}

/// Default placement: the CPU Linux would choose for `task`.
pub fn select(cx: &mut Ctx, task: TaskId, prev: Cpu, waker: Option<Cpu>, why: Wake) -> Cpu {
    let version = cx.linux_version();
    match why {
        Wake::Fork => fork_balance::select_fork(cx, task, prev, version),
        Wake::Wakeup { sync } => {
            let w = Wakeup {
                task,
                prev,
                waker,
                sync,
            };
            wakeup::select_task_rq_fair(cx, w, version)
        }
    }
}
