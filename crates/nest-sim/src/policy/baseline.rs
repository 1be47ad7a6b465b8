//! A model of default Linux (CFS/EEVDF) task placement (see docs/sim.md,
//! "Baseline placement"), following kernel/sched/fair.c (Linux 6.x):
//!
//! - **fork** (`find_idlest_cpu`): at the NUMA level stay on the parent's
//!   socket while it runs fewer tasks than a quarter of its CPUs
//!   (`imb_numa_nr`), else take the socket with the most idle CPUs; within
//!   the socket take the physical core with the most idle CPUs (the local
//!   core on ties with it, else the last one met scanning from the local
//!   core), and within it the most recently idled CPU (shallowest C-state).
//! - **wakeup** (`wake_affine` + `select_idle_sibling`): choose a target
//!   between the waker's CPU and `prev`, then take the target if idle, else
//!   `prev` if idle and sharing its LLC, else the first fully idle core found
//!   scanning the target's LLC from target+1, else an idle CPU within a
//!   utilisation-limited scan (`SIS_UTIL`), else the target itself.
//!
//! Load balancing (periodic and newly-idle) is the engine's, since it is the
//! kernel's and applies under every placement policy.

use nest_trace::Cpu;

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
        Wake::Fork => select_fork(cx, prev),
        Wake::Wakeup => select_wakeup(cx, prev, waker.unwrap_or(prev)),
    }
}

/// CPUs of `socket`, in CPU number order.
fn socket_cpus<'a>(cx: &'a Ctx<'a>, socket: u32) -> impl Iterator<Item = Cpu> + Clone + 'a {
    cx.socket_cpus(socket).iter().copied()
}

fn idle_count(cx: &Ctx, cpus: impl Iterator<Item = Cpu>) -> (u32, u32) {
    cpus.fold((0, 0), |(idle, running), c| {
        (idle + u32::from(cx.is_idle(c)), running + cx.nr_running(c))
    })
}

/// `find_idlest_cpu`-like fork placement from the parent's CPU.
pub fn select_fork(cx: &Ctx, parent: Cpu) -> Cpu {
    let socket = idlest_socket(cx, parent);
    let core_cpu = idlest_core(cx, parent, socket);
    idlest_cpu_of_core(cx, core_cpu)
}

fn idlest_socket(cx: &Ctx, parent: Cpu) -> u32 {
    let local = cx.socket(parent);
    let nr_sockets = cx.topology().nr_sockets() as u32;
    let (local_idle, local_running) = idle_count(cx, socket_cpus(cx, local));
    let local_size = socket_cpus(cx, local).count() as u32;
    let imb_numa_nr = (local_size / 4).max(1);
    if local_idle > 0 && local_running < imb_numa_nr {
        return local;
    }
    let mut best = (local, local_idle, local_running);
    for s in (0..nr_sockets).filter(|&s| s != local) {
        let (idle, running) = idle_count(cx, socket_cpus(cx, s));
        if idle > best.1 || (idle == best.1 && idle == 0 && running < best.2) {
            best = (s, idle, running);
        }
    }
    best.0
}

/// The idlest physical core of `socket`; returns one of its CPUs.
fn idlest_core(cx: &Ctx, parent: Cpu, socket: u32) -> Cpu {
    let cores: Vec<Cpu> = socket_cpus(cx, socket)
        .filter(|&c| cx.smt_siblings(c).first() == Some(&c))
        .collect();
    if cores.is_empty() {
        return parent;
    }
    let score = |c: Cpu| idle_count(cx, cx.smt_siblings(c).iter().copied());
    let local_core = cx.smt_siblings(parent).first().copied().unwrap_or(parent);
    let start = cores.iter().position(|&c| c == local_core).unwrap_or(0);
    let mut best: Option<(Cpu, (u32, u32))> = None;
    for i in 1..=cores.len() {
        let c = cores[(start + i) % cores.len()];
        let s = score(c);
        let better = best.is_none_or(|(_, b)| s.0 > b.0 || (s.0 == b.0 && s.1 <= b.1));
        if better {
            best = Some((c, s));
        }
    }
    let Some((c, s)) = best else { return parent };
    if cx.socket(parent) == socket {
        let l = score(local_core);
        if l.0 >= s.0 && l.0 > 0 {
            return local_core;
        }
    }
    c
}

/// The most recently idled CPU of `core_cpu`'s core, else its least loaded.
fn idlest_cpu_of_core(cx: &Ctx, core_cpu: Cpu) -> Cpu {
    let sibs = cx.smt_siblings(core_cpu);
    let idle = sibs
        .iter()
        .copied()
        .filter(|&c| cx.is_idle(c))
        .max_by_key(|&c| (cx.idle_since(c), std::cmp::Reverse(c)));
    idle.unwrap_or_else(|| {
        sibs.iter()
            .copied()
            .min_by_key(|&c| (cx.nr_running(c), c))
            .unwrap_or(core_cpu)
    })
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
