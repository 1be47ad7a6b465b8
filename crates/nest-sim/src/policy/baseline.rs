//! A model of default Linux (CFS/EEVDF) task placement (see docs/sim.md,
//! "Baseline placement"), following kernel/sched/fair.c (Linux 6.x):
//!
//! - **fork** (`find_idlest_cpu`): see [`super::fork_balance`], which
//!   follows the kernel function by function, per [`fork_balance::LinuxVersion`].
//! - **wakeup** (`wake_affine` + `select_idle_sibling`): choose a target
//!   between the waker's CPU and `prev`, then take the target if idle, else
//!   `prev` if idle and sharing its LLC, else the first fully idle core found
//!   scanning the target's LLC from target+1, else an idle CPU within a
//!   utilisation-limited scan (`SIS_UTIL`), else the target itself.
//!
//! Load balancing (periodic and newly-idle) is the engine's, since it is the
//! kernel's and applies under every placement policy.

use nest_trace::Cpu;

use super::fork_balance;
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
        _task: TaskId,
        prev: Cpu,
        waker: Option<Cpu>,
        why: Wake,
    ) -> Cpu {
        select(cx, prev, waker, why)
    }
}

/// Default placement: the CPU Linux would choose.
pub fn select(cx: &Ctx, prev: Cpu, waker: Option<Cpu>, why: Wake) -> Cpu {
    match why {
        Wake::Fork => fork_balance::select_fork(cx, prev, cx.linux_version()),
        Wake::Wakeup => select_wakeup(cx, prev, waker.unwrap_or(prev)),
    }
}

fn core_is_idle(cx: &Ctx, cpu: Cpu) -> bool {
    cx.smt_siblings(cpu).iter().all(|&c| cx.is_idle(c))
}

/// `wake_affine`: choose between the waker's CPU and `prev`.
fn wake_affine(cx: &Ctx, prev: Cpu, waker: Cpu) -> Cpu {
    if waker == prev {
        return prev;
    }
    if cx.is_idle(waker) && cx.llc(waker) == cx.llc(prev) {
        return if cx.is_idle(prev) { prev } else { waker };
    }
    if cx.is_idle(prev) {
        return prev;
    }
    if cx.nr_running(waker) < cx.nr_running(prev) {
        waker
    } else {
        prev
    }
}

/// `select_idle_sibling`-like wakeup placement.
pub fn select_wakeup(cx: &Ctx, prev: Cpu, waker: Cpu) -> Cpu {
    let target = wake_affine(cx, prev, waker);
    if cx.is_idle(target) {
        return target;
    }
    if prev != target && cx.llc(prev) == cx.llc(target) && cx.is_idle(prev) {
        return prev;
    }
    let llc = cx.llc_cpus(cx.llc(target));
    let start = llc.iter().position(|&c| c == target).unwrap_or(0);
    let scan = (1..=llc.len()).map(|i| llc[(start + i) % llc.len()]);
    if let Some(c) = scan.clone().find(|&c| core_is_idle(cx, c)) {
        return c;
    }
    // SIS_UTIL: the busier the LLC, the shorter the scan (at least 4).
    let util: f64 = llc.iter().map(|&c| cx.util(c)).sum::<f64>() / llc.len() as f64;
    let nr = ((llc.len() as f64 * (1.0 - util)).round() as usize).max(4);
    scan.take(nr).find(|&c| cx.is_idle(c)).unwrap_or(target)
}
