//! Where the fair scheduler puts a forked task: `find_idlest_cpu()` in
//! kernel/sched/fair.c (`sched_balance_find_dst_cpu()` since 6.10), which
//! `select_task_rq_fair()` calls for `SD_BALANCE_FORK` from the highest
//! domain that has the flag (every level below a distant NUMA one).
//!
//! From the top of the parent CPU's domain hierarchy down, at each level:
//! `find_idlest_group()` compares the level's groups (the local one, which
//! holds the current CPU, and the others) and either keeps the local group
//! (go down a level) or names the idlest other group, whose
//! `find_idlest_group_cpu()` becomes the current CPU (then go on below the
//! level just decided). Levels with one group are degenerate and skipped,
//! as `cpu_attach_domain()` removes them.
//!
//! Simplifications, all because the simulator has no such state: every task
//! has nice 0, so a group's load is its number of tasks; PELT's runnable
//! average is the utilisation; no task has a preferred NUMA node
//! (`numa_preferred_nid` is unset for a new task); idle CPUs have no idle
//! states, so the shallowest idle CPU is the most recently idled one
//! (`rq->idle_stamp`). Affinity: groups without a CPU the task may run on
//! are skipped, and only such CPUs are chosen.

use nest_trace::Cpu;

use super::wakeup::runnable_of;
use super::{Ctx, TaskId};

/// Which generation of the fair scheduler's rules to follow where they
/// differ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LinuxVersion {
    /// Linux 5.9-5.10, the fair scheduler Nest was compared with (5.9):
    /// fork's NUMA rule as in 5.10 (5.11 changed it), wakeups as in 5.10
    /// (`select_idle_sibling()` was reworked in 5.12).
    #[value(name = "linux-5.10")]
    Linux510,
    /// Linux 5.19 and later (EEVDF from 6.6): the NUMA rule of
    /// `imb_numa_nr`; wakeups with `SIS_UTIL` (6.0+).
    #[default]
    #[value(name = "linux-7")]
    Linux7,
}

/// A level of the scheduling-domain hierarchy, top down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    /// The machine; groups are sockets (NUMA nodes).
    Numa,
    /// A socket; groups are its last-level caches.
    Package,
    /// A last-level cache; groups are physical cores.
    Cache,
    /// A physical core; groups are its hardware threads.
    Smt,
}

/// The levels, top down.
pub(crate) const LEVELS: [Level; 4] = [Level::Numa, Level::Package, Level::Cache, Level::Smt];

impl Level {
    /// `sd->imbalance_pct` (`sd_init()` in kernel/sched/topology.c).
    pub(crate) fn imbalance_pct(self) -> f64 {
        match self {
            Level::Smt => 110.0,
            _ => 117.0,
        }
    }

    /// `sd->cache_nice_tries` (`sd_init()`): failed balances after which a
    /// cache-hot task may be moved anyway; 0 between SMT siblings, 1 in
    /// an LLC (`SD_SHARE_LLC`) and at the package level, 2 across NUMA
    /// nodes.
    pub(crate) fn cache_nice_tries(self) -> u32 {
        match self {
            Level::Smt => 0,
            Level::Cache | Level::Package => 1,
            Level::Numa => 2,
        }
    }

    /// Does the domain share a last-level cache (`SD_SHARE_LLC`, called
    /// `SD_SHARE_PKG_RESOURCES` before 6.10)? The SMT and LLC levels do.
    pub(crate) fn shares_llc(self) -> bool {
        matches!(self, Level::Smt | Level::Cache)
    }

    /// The groups of this level's domain around `cpu`, in the order
    /// `build_sched_groups()` links them: walking the domain's CPUs from
    /// `cpu` on, wrapping (`for_each_cpu_wrap`), each group where its first
    /// CPU is met, so the local group comes first. Borrowed from the
    /// kernel's precomputed CPU lists: forks are frequent and must not
    /// allocate per CPU.
    pub(crate) fn groups<'a>(self, cx: &'a Ctx, cpu: Cpu) -> Vec<&'a [Cpu]> {
        // How far after `cpu` the walk meets the group: its first CPU at or
        // after `cpu` (the CPU lists are ascending), else its first after
        // wrapping. Computed once per group, beside it.
        let nr_cpus = cx.nr_cpus();
        let met = |g: &'a [Cpu]| {
            let i = g.partition_point(|&c| c < cpu);
            (g.get(i).map_or(g[0] + nr_cpus - cpu, |&c| c - cpu), g)
        };
        let mut groups: Vec<(Cpu, &[Cpu])> = match self {
            Level::Numa => (0..cx.nr_sockets())
                .map(|s| met(cx.socket_cpus(s)))
                .collect(),
            Level::Package => {
                let llc = |c| cx.llc_cpus(cx.llc(c));
                firsts(cx.socket_cpus(cx.socket(cpu)), llc, met)
            }
            Level::Cache => firsts(cx.llc_cpus(cx.llc(cpu)), |c| cx.smt_siblings(c), met),
            Level::Smt => cx.smt_siblings(cpu).chunks(1).map(met).collect(),
        };
        // The keys are distinct: each CPU is in one group.
        groups.sort_unstable_by_key(|&(after, _)| after);
        groups.into_iter().map(|(_, g)| g).collect()
    }
}

/// Every CPU's groups at every level, as [`Level::groups`] orders them:
/// computed once, as the kernel builds its domains at boot, since forks
/// are frequent and the topology does not change.
#[derive(Debug)]
pub(crate) struct ForkGroups([LevelGroups; 4]);

/// One level's groups, and their order around each CPU.
#[derive(Debug)]
struct LevelGroups {
    /// The groups' CPUs (each CPU is in one group).
    cpus: Vec<Vec<Cpu>>,
    /// Per CPU, the indices in `cpus` of its groups, local first.
    order: Vec<Vec<u32>>,
}

impl ForkGroups {
    pub(crate) fn new(cx: &Ctx) -> Self {
        Self(LEVELS.map(|level| LevelGroups::new(cx, level)))
    }

    /// `level.groups(cx, cpu)`.
    fn around(&self, level: Level, cpu: Cpu) -> Groups<'_> {
        let l = &self.0[level as usize];
        Groups {
            cpus: &l.cpus,
            order: &l.order[cpu as usize],
        }
    }
}

impl LevelGroups {
    fn new(cx: &Ctx, level: Level) -> Self {
        // Each group's index, by its first CPU.
        let mut index = vec![None; cx.nr_cpus() as usize];
        let mut cpus = Vec::new();
        let order = (0..cx.nr_cpus())
            .map(|cpu| {
                let mut id = |g: &[Cpu]| {
                    *index[g[0] as usize].get_or_insert_with(|| {
                        cpus.push(g.to_vec());
                        cpus.len() as u32 - 1
                    })
                };
                level.groups(cx, cpu).into_iter().map(&mut id).collect()
            })
            .collect();
        Self { cpus, order }
    }
}

/// One level's groups around a CPU, local first.
#[derive(Clone, Copy)]
struct Groups<'a> {
    cpus: &'a [Vec<Cpu>],
    order: &'a [u32],
}

impl<'a> Groups<'a> {
    fn len(self) -> usize {
        self.order.len()
    }

    fn get(self, i: usize) -> &'a [Cpu] {
        &self.cpus[self.order[i] as usize]
    }

    fn iter(self) -> impl Iterator<Item = &'a [Cpu]> {
        self.order
            .iter()
            .map(move |&g| self.cpus[g as usize].as_slice())
    }
}

/// The groups `group` puts the CPUs of `span` in, each once (where its
/// first CPU is met), in `span`'s order, through `f`.
fn firsts<'a, T>(
    span: &'a [Cpu],
    group: impl Fn(Cpu) -> &'a [Cpu],
    f: impl Fn(&'a [Cpu]) -> T,
) -> Vec<T> {
    let mut groups = Vec::with_capacity(span.len());
    groups.extend(
        span.iter()
            .filter(|&&c| group(c)[0] == c)
            .map(|&c| f(group(c))),
    );
    groups
}

/// `enum group_type`, in the kernel's order: lower is less busy. The types
/// the simulator cannot produce (misfit, asym packing, imbalanced) are left
/// out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum GroupType {
    HasSpare,
    FullyBusy,
    /// A core whose SMT threads both run tasks, seen by an idle CPU's
    /// load balancing (6.19, not 5.10; never at fork).
    SmtBalance,
    Overloaded,
}

/// `struct sg_lb_stats` as `update_sg_wakeup_stats()` fills it.
#[derive(Clone, Copy, Debug)]
struct GroupStats {
    idle_cpus: u32,
    nr_running: u32,
    /// Sum of the CPUs' utilisation, in CPUs (1.0 = one CPU's capacity).
    util: f64,
    /// Load per CPU of capacity: tasks per CPU (every task has nice 0).
    avg_load: f64,
    kind: GroupType,
}

impl GroupStats {
    fn of(cx: &Ctx, cpus: &[Cpu], imbalance_pct: f64) -> Self {
        let (mut idle_cpus, mut nr_running, mut util, mut runnable) = (0, 0, 0.0, 0.0);
        // Each CPU's state read once: forks are frequent and the NUMA
        // level reads every CPU.
        for &c in cpus {
            let (nr, cpu_util) = (cx.nr_running(c), cx.util(c));
            nr_running += nr;
            idle_cpus += u32::from(nr == 0);
            util += cpu_util;
            runnable += runnable_of(cpu_util, nr);
        }
        let weight = cpus.len() as f64;
        Self {
            idle_cpus,
            nr_running,
            util,
            avg_load: f64::from(nr_running) / weight,
            // `group_runnable` (`cpu_runnable_without()`), as load
            // balancing estimates it: tasks waiting in a run queue make a
            // group overloaded before its utilisation is high, as threads
            // just forked onto busy CPUs do.
            kind: classify(nr_running, weight, util, runnable, imbalance_pct),
        }
    }
}

/// `group_classify()`, with `group_is_overloaded()` and
/// `group_has_capacity()`: `weight` CPUs of capacity 1 running
/// `nr_running` tasks, with utilisation and runnable average in CPUs.
pub(crate) fn classify(
    nr_running: u32,
    weight: f64,
    util: f64,
    runnable: f64,
    imbalance_pct: f64,
) -> GroupType {
    let nr = f64::from(nr_running);
    if nr < weight {
        return GroupType::HasSpare;
    }
    let util_high = weight * 100.0 < util * imbalance_pct;
    let runnable_high = weight * imbalance_pct < runnable * 100.0;
    if nr > weight && (util_high || runnable_high) {
        return GroupType::Overloaded;
    }
    if !runnable_high && weight * 100.0 > util * imbalance_pct {
        return GroupType::HasSpare;
    }
    GroupType::FullyBusy
}

/// `update_pick_idlest()`: is `candidate` idler than `idlest`?
fn idler(candidate: &GroupStats, idlest: &GroupStats) -> bool {
    if candidate.kind != idlest.kind {
        return candidate.kind < idlest.kind;
    }
    match candidate.kind {
        // (No SmtBalance at fork: `update_sg_wakeup_stats()` never sets it.)
        GroupType::Overloaded | GroupType::FullyBusy | GroupType::SmtBalance => {
            candidate.avg_load < idlest.avg_load
        }
        // Most idle CPUs, then the lowest utilisation (since v5.9).
        GroupType::HasSpare => {
            candidate.idle_cpus > idlest.idle_cpus
                || (candidate.idle_cpus == idlest.idle_cpus && candidate.util < idlest.util)
        }
    }
}

/// `sd->imb_numa_nr` of the NUMA domain (`build_sched_domains()` in
/// kernel/sched/topology.c, 5.19+): the domain just above the LLC allows
/// one task per LLC it spans, or an eighth of its CPUs when it spans one
/// LLC (`span_weight >> 3`), at least 1. One NUMA level: factor 1.
pub(crate) fn imb_numa_nr(cx: &Ctx, cpu: Cpu) -> u32 {
    let socket = cx.socket_cpus(cx.socket(cpu)).len() as u32;
    let llc = cx.llc_cpus(cx.llc(cpu)).len() as u32;
    let nr_llcs = socket / llc.max(1);
    if nr_llcs <= 1 {
        (socket >> 3).max(1)
    } else {
        nr_llcs
    }
}

/// Does the NUMA rule keep the task on the local node? `local` and
/// `idlest` both have spare capacity.
fn numa_keeps_local(
    cx: &Ctx,
    cpu: Cpu,
    version: LinuxVersion,
    local: &GroupStats,
    idlest: &GroupStats,
) -> bool {
    match version {
        // v5.10 find_idlest_group(), group_has_spare, SD_NUMA: "keep the
        // task on this node" while it has an idle CPU,
        // `if (local_sgs.idle_cpus) return NULL;` (the NUMA-balancing
        // checks before it look at numa_preferred_nid, NUMA_NO_NODE for a
        // new process). allow_numa_imbalance()'s quarter of the CPUs came
        // in 5.11 (Mel Gorman's "Revisit NUMA imbalance tolerance and fork
        // balancing" series, November 2020).
        LinuxVersion::Linux510 => local.idle_cpus > 0,
        // adjust_numa_imbalance(imbalance, local_sgs.sum_nr_running + 1,
        // sd->imb_numa_nr) == 0: with the child, the local node would run
        // at most imb_numa_nr tasks, and the idle-CPU difference is at most
        // NUMA_IMBALANCE_MIN (2).
        LinuxVersion::Linux7 => {
            let imbalance = local.idle_cpus.abs_diff(idlest.idle_cpus);
            local.nr_running < imb_numa_nr(cx, cpu) && imbalance <= 2
        }
    }
}

/// `find_idlest_group()` for `task`: the group to move to, or `None` to
/// stay in the local group (`groups[0]`). Groups without a CPU the task
/// may run on are skipped (`cpumask_intersects(sched_group_span(group),
/// p->cpus_ptr)`); their statistics still cover every CPU
/// (`update_sg_wakeup_stats()`).
fn find_idlest_group(
    cx: &Ctx,
    task: TaskId,
    level: Level,
    cpu: Cpu,
    version: LinuxVersion,
    groups: Groups,
) -> Option<usize> {
    let usable = |g: &[Cpu]| g.iter().any(|&c| cx.task_allowed(task, c));
    let pct = level.imbalance_pct();
    let mut idlest: Option<(usize, GroupStats)> = None;
    for (i, cpus) in groups.iter().enumerate().skip(1) {
        if !usable(cpus) {
            continue;
        }
        let stats = GroupStats::of(cx, cpus, pct);
        if idlest.as_ref().is_none_or(|(_, best)| idler(&stats, best)) {
            idlest = Some((i, stats));
        }
    }
    let (index, idlest) = idlest?;
    // "The local group has been skipped because of CPU affinity".
    if !usable(groups.get(0)) {
        return Some(index);
    }
    let local = GroupStats::of(cx, groups.get(0), pct);
    if local.kind != idlest.kind {
        return (local.kind > idlest.kind).then_some(index);
    }
    let stay = match local.kind {
        GroupType::Overloaded | GroupType::FullyBusy | GroupType::SmtBalance => {
            let imbalance = (pct - 100.0) / 100.0;
            // Across nodes the imbalance is added to the remote group's
            // load: "consider staying local" (5.10 and 6.19 alike).
            (level == Level::Numa && idlest.avg_load + imbalance >= local.avg_load)
                || idlest.avg_load >= local.avg_load + imbalance
                || 100.0 * local.avg_load <= pct * idlest.avg_load
        }
        GroupType::HasSpare => {
            (level == Level::Numa && numa_keeps_local(cx, cpu, version, &local, &idlest))
                || local.idle_cpus >= idlest.idle_cpus
        }
    };
    (!stay).then_some(index)
}

/// `find_idlest_group_cpu()`: of the group's CPUs `task` may run on, the
/// shallowest idle one (here: the most recently idled), else the least
/// loaded one; a one-CPU group's CPU.
fn find_idlest_group_cpu(cx: &Ctx, task: TaskId, group: &[Cpu]) -> Cpu {
    if group.len() == 1 {
        return group[0];
    }
    let allowed = || group.iter().copied().filter(|&c| cx.task_allowed(task, c));
    if let Some(idle) = allowed()
        .filter(|&c| cx.is_idle(c))
        .fold(None, |best: Option<Cpu>, c| match best {
            Some(b) if cx.idle_since(b) >= cx.idle_since(c) => Some(b),
            _ => Some(c),
        })
    {
        return idle;
    }
    allowed()
        .fold(None, |best: Option<Cpu>, c| match best {
            Some(b) if cx.nr_running(b) <= cx.nr_running(c) => Some(b),
            _ => Some(c),
        })
        .unwrap_or(group[0])
}

/// `find_idlest_cpu()`: the CPU `task`, forked on `parent`, starts on.
pub fn select_fork(cx: &Ctx, task: TaskId, parent: Cpu, version: LinuxVersion) -> Cpu {
    let all = cx.fork_groups();
    let mut cpu = parent;
    for level in LEVELS {
        let groups = all.around(level, cpu);
        if groups.len() <= 1 {
            continue;
        }
        if let Some(index) = find_idlest_group(cx, task, level, cpu, version, groups) {
            // The chosen CPU's own domains below this level decide next;
            // in a symmetric topology they are the next levels.
            cpu = find_idlest_group_cpu(cx, task, groups.get(index));
        }
    }
    cpu
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testkit::{guest_busy_but, kernel, waiting};

    #[test]
    fn the_groups_kept_for_forks_are_each_levels_groups() {
        for machine in crate::Machine::builtin_names() {
            let mut k = kernel(machine);
            let cx = Ctx { k: &mut k };
            let all = ForkGroups::new(&cx);
            for cpu in 0..cx.nr_cpus() {
                for level in LEVELS {
                    let kept: Vec<&[Cpu]> = all.around(level, cpu).iter().collect();
                    assert_eq!(kept, level.groups(&cx, cpu), "{machine} {cpu} {level:?}");
                }
            }
        }
    }

    #[test]
    fn a_fork_leaves_a_node_whose_run_queues_hold_waiting_tasks() {
        // Every CPU runs a thread at half utilisation; socket 0's (CPUs
        // 0-3, 8-11) also hold 6 threads waiting. Their runnable average
        // makes socket 0 overloaded (group_is_overloaded()) although its
        // utilisation is low, so the fork goes to socket 1, only busy.
        for version in [LinuxVersion::Linux510, LinuxVersion::Linux7] {
            let mut k = guest_busy_but(&[], 0.5);
            for cpu in [0, 1, 2, 3, 8, 9] {
                waiting(&mut k, cpu, 0.5, None);
            }
            let child = k.test_task(0, 0.0);
            let cx = Ctx { k: &mut k };
            let cpu = select_fork(&cx, child, 0, version);
            assert_eq!(cx.socket(cpu), 1, "{version:?}: CPU {cpu}");
        }
    }
}
