//! sched_ext's built-in idle CPU selection, which `scx_nest` uses as Nest's
//! fallback (step 4) and wide fallback: `scx_select_cpu_dfl()` and
//! `scx_pick_idle_cpu()` in kernel/sched/ext_idle.c (Linux 6.15 and later;
//! ext.c before), as reached through `scx_bpf_select_cpu_dfl()`,
//! `scx_bpf_select_cpu_and(..., SCX_PICK_IDLE_CORE)` and
//! `scx_bpf_pick_idle_cpu(..., 0)` (crates/scx_nest/src/bpf/platform.bpf.h).
//!
//! `scx_select_cpu_dfl()`, without per-node idle masks (scx_nest does not
//! set `SCX_OPS_BUILTIN_IDLE_PER_NODE`) and without `SCX_WAKE_SYNC` (which
//! scx_nest clears, so its wake-affine shortcut never applies):
//!
//! 1. with SMT: `prev` if its whole core is idle; else a whole idle core in
//!    `prev`'s LLC, then in its NUMA node, then anywhere; with
//!    `SCX_PICK_IDLE_CORE` nothing else;
//! 2. `prev` if idle; else an idle CPU in `prev`'s LLC, then in its NUMA
//!    node, then anywhere.
//!
//! The LLC steps run only when an LLC holds fewer CPUs than the machine, the
//! NUMA steps only when NUMA nodes do too and differ from the LLCs
//! (`scx_idle_update_selcpu_topology()`).
//!
//! Each "pick" is `pick_idle_cpu_in_node()`: `cpumask_any_and_distribute()`
//! over the idle-core mask (with SMT), then over the idle mask. That
//! function (lib/cpumask.c) returns the first candidate *after* the one the
//! calling CPU returned last (`distribute_cpu_mask_prev`, per CPU), so
//! repeated picks from one CPU rotate over the candidates instead of always
//! taking the lowest-numbered one. The calling CPU is the waker's (the
//! parent's on fork).

use nest_trace::{Cpu, CpuPlace, Topology};

use super::Ctx;

/// The built-in idle selection's state: per calling CPU, the CPU that
/// `cpumask_any_and_distribute()` returned last; and what the kernel
/// decides once per topology.
#[derive(Debug, Clone)]
pub struct ExtIdle {
    last_pick: Vec<Cpu>,
    /// `sched_smt_active()`: some core has more than one CPU.
    smt: bool,
    /// The spans searched in order: LLC and NUMA node when enabled, then
    /// the whole machine.
    spans: Vec<Span>,
    /// CPUs of each NUMA node, ascending.
    node_cpus: Vec<Vec<Cpu>>,
}

/// Where a pick may look.
#[derive(Clone, Copy, Debug)]
enum Span {
    Llc,
    Node,
    All,
}

impl ExtIdle {
    /// For the machine `topo`; every cursor starts at CPU 0 (the per-CPU
    /// variable is zero-initialised, so a first pick skips CPU 0).
    pub fn new(topo: &Topology) -> Self {
        let n = topo.nr_cpus();
        let weight =
            |same: &dyn Fn(&CpuPlace) -> bool| topo.cpus.iter().filter(|c| same(c)).count();
        let llc_weight = |cpu: &CpuPlace| weight(&|c: &CpuPlace| c.llc == cpu.llc);
        let node_weight = |cpu: &CpuPlace| weight(&|c: &CpuPlace| c.node == cpu.node);
        let mut spans = Vec::with_capacity(3);
        if let Some(first) = topo.cpus.first() {
            if llc_weight(first) < n {
                spans.push(Span::Llc);
            }
            let mismatch = topo.cpus.iter().any(|c| llc_weight(c) != node_weight(c));
            if node_weight(first) < n && mismatch {
                spans.push(Span::Node);
            }
        }
        spans.push(Span::All);
        let core_weight = |cpu: &CpuPlace| weight(&|c: &CpuPlace| c.core == cpu.core);
        let nodes = topo
            .cpus
            .iter()
            .map(|c| c.node as usize + 1)
            .max()
            .unwrap_or(0);
        let mut node_cpus = vec![Vec::new(); nodes];
        for c in &topo.cpus {
            node_cpus[c.node as usize].push(c.cpu);
        }
        node_cpus.iter_mut().for_each(|cpus| cpus.sort_unstable());
        Self {
            last_pick: vec![0; n],
            smt: topo.cpus.iter().any(|c| core_weight(c) > 1),
            spans,
            node_cpus,
        }
    }

    /// `scx_select_cpu_dfl(p, prev, 0, flags)` called on `caller`: an idle
    /// CPU (`free`), restricted to whole idle cores when `whole_core`
    /// (`SCX_PICK_IDLE_CORE`), or `None`.
    pub fn select_cpu_dfl(
        &mut self,
        cx: &Ctx,
        prev: Cpu,
        caller: Cpu,
        whole_core: bool,
        free: impl Fn(Cpu) -> bool,
    ) -> Option<Cpu> {
        if self.smt {
            if core_free(cx, prev, &free) {
                return Some(prev);
            }
            for i in 0..self.spans.len() {
                if let Some(cpu) = self.pick(cx, caller, self.spans[i], prev, true, &free) {
                    return Some(cpu);
                }
            }
            if whole_core {
                return None;
            }
        }
        if free(prev) {
            return Some(prev);
        }
        (0..self.spans.len()).find_map(|i| self.pick(cx, caller, self.spans[i], prev, false, &free))
    }

    /// `scx_pick_idle_cpu(cpus_allowed, NUMA_NO_NODE, 0)` called on
    /// `caller`: a whole idle core, else any idle CPU, anywhere.
    pub fn pick_idle_cpu(
        &mut self,
        cx: &Ctx,
        caller: Cpu,
        free: impl Fn(Cpu) -> bool,
    ) -> Option<Cpu> {
        self.pick(cx, caller, Span::All, caller, false, &free)
    }

    /// `bpf_cpumask_any_and_distribute()` called on `caller` over the idle
    /// CPUs (`idle`) of `near`'s LLC, then, if none or one the task may
    /// not run on (`allowed`), over the idle CPUs of the machine it may
    /// run on: the CPU `scx_nest`'s `kick_idle_near()` kicks.
    pub fn any_idle_near(
        &mut self,
        cx: &Ctx,
        near: Cpu,
        idle: impl Fn(Cpu) -> bool,
        allowed: impl Fn(Cpu) -> bool,
    ) -> Option<Cpu> {
        let caller = near;
        let usable = |c: Cpu| idle(c) && allowed(c);
        self.distribute(cx, caller, Span::Llc, near, &idle)
            .filter(|&c| allowed(c))
            .or_else(|| self.distribute(cx, caller, Span::All, near, usable))
    }

    /// `pick_idle_cpu_in_node()` over `span` (around `prev`): a whole idle
    /// core first when SMT is active, then (unless `core_only`) any idle CPU.
    fn pick(
        &mut self,
        cx: &Ctx,
        caller: Cpu,
        span: Span,
        prev: Cpu,
        core_only: bool,
        free: &impl Fn(Cpu) -> bool,
    ) -> Option<Cpu> {
        if self.smt {
            let whole = |cpu: Cpu| core_free(cx, cpu, free);
            if let Some(cpu) = self.distribute(cx, caller, span, prev, whole) {
                return Some(cpu);
            }
            if core_only {
                return None;
            }
        }
        self.distribute(cx, caller, span, prev, free)
    }

    /// `cpumask_any_and_distribute()`: the first CPU of `span` after
    /// `caller`'s last pick (wrapping) that is `wanted`; remembered as the
    /// new last pick.
    fn distribute(
        &mut self,
        cx: &Ctx,
        caller: Cpu,
        span: Span,
        prev: Cpu,
        wanted: impl Fn(Cpu) -> bool,
    ) -> Option<Cpu> {
        let cpus: &[Cpu] = match span {
            Span::Llc => cx.llc_cpus(cx.llc(prev)),
            Span::Node => &self.node_cpus[cx.topology().cpus[prev as usize].node as usize],
            Span::All => &[],
        };
        let last = self.last_pick[caller as usize];
        let found = if cpus.is_empty() {
            let n = cx.nr_cpus();
            (1..=n).map(|i| (last + i) % n).find(|&c| wanted(c))
        } else {
            let start = cpus.partition_point(|&c| c <= last);
            (0..cpus.len())
                .map(|i| cpus[(start + i) % cpus.len()])
                .find(|&c| wanted(c))
        };
        if let Some(cpu) = found {
            self.last_pick[caller as usize] = cpu;
        }
        found
    }
}

/// Are all SMT threads of `cpu`'s core `free`? (The idle-core mask.)
pub(super) fn core_free(cx: &Ctx, cpu: Cpu, free: &impl Fn(Cpu) -> bool) -> bool {
    cx.smt_siblings(cpu).iter().all(|&s| free(s))
}

#[cfg(test)]
mod tests {
    use super::ExtIdle;
    use crate::policy::Ctx;
    use crate::policy::testkit::guest;

    fn idle_except(busy: &[u32]) -> impl Fn(u32) -> bool + '_ {
        move |c| !busy.contains(&c)
    }

    #[test]
    fn whole_idle_cores_come_first_then_prev_then_its_llc() {
        let mut k = guest();
        let cx = Ctx { k: &mut k };
        let mut ext = ExtIdle::new(cx.topology());
        assert_eq!(cx.smt_siblings(1), &[1, 9]);
        // prev's whole core is idle: prev.
        assert_eq!(
            ext.select_cpu_dfl(&cx, 1, 1, false, idle_except(&[])),
            Some(1)
        );
        // prev idle but its sibling busy: a whole idle core of prev's LLC.
        let got = ext
            .select_cpu_dfl(&cx, 1, 1, false, idle_except(&[9]))
            .unwrap();
        assert!([0, 2, 3, 8, 10, 11].contains(&got), "{got}");
        // Socket 0 has no whole idle core: one of socket 1 before prev.
        let half = [8, 9, 10, 11];
        let got = ext
            .select_cpu_dfl(&cx, 1, 1, false, idle_except(&half))
            .unwrap();
        assert_eq!(cx.socket(got), 1, "{got}");
        // No whole idle core anywhere: prev, and nothing for a whole core.
        let all_half: Vec<u32> = (8..16).collect();
        assert_eq!(
            ext.select_cpu_dfl(&cx, 1, 1, false, idle_except(&all_half)),
            Some(1)
        );
        assert_eq!(
            ext.select_cpu_dfl(&cx, 1, 1, true, idle_except(&all_half)),
            None
        );
        // ... and prev busy: an idle CPU of prev's LLC, not of the other one.
        let mut busy = all_half.clone();
        busy.push(1);
        let got = ext
            .select_cpu_dfl(&cx, 1, 1, false, idle_except(&busy))
            .unwrap();
        assert!([0, 2, 3].contains(&got), "{got}");
        // Nothing idle: none.
        let everything: Vec<u32> = (0..16).collect();
        assert_eq!(
            ext.select_cpu_dfl(&cx, 1, 1, false, idle_except(&everything)),
            None
        );
    }

    #[test]
    fn picks_rotate_per_calling_cpu() {
        let mut k = guest();
        let cx = Ctx { k: &mut k };
        let mut ext = ExtIdle::new(cx.topology());
        let all_half: Vec<u32> = (8..16).collect();
        let mut busy = all_half.clone();
        busy.push(1);
        // cpumask_any_and_distribute(): each pick starts after the caller's
        // last one, so picks from CPU 1 rotate over 2, 3, 0 (the first skips
        // CPU 0); another calling CPU has its own cursor.
        let picks: Vec<_> = (0..4)
            .map(|_| {
                ext.select_cpu_dfl(&cx, 1, 1, false, idle_except(&busy))
                    .unwrap()
            })
            .collect();
        assert_eq!(picks, [2, 3, 0, 2]);
        assert_eq!(
            ext.select_cpu_dfl(&cx, 1, 5, false, idle_except(&busy)),
            Some(2)
        );
        // pick_idle_cpu: whole idle cores first, anywhere, rotating too.
        let got = ext.pick_idle_cpu(&cx, 6, idle_except(&[1, 9, 2])).unwrap();
        assert_eq!(got, 3);
        let got = ext.pick_idle_cpu(&cx, 6, idle_except(&[1, 9, 2])).unwrap();
        assert_eq!(got, 4);
    }
}
