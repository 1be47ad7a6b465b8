//! The fair scheduler's load balancing: the rules of kernel/sched/fair.c
//! that decide whether a CPU balances a scheduling domain, which group and
//! run queue it pulls from, how much, and which tasks may move, per
//! [`LinuxVersion`] where they differ (read from v5.10 and v6.19;
//! `load_balance()`, `find_busiest_group()`, `find_busiest_queue()` and
//! `rebalance_domains()` were renamed `sched_balance_rq()`,
//! `sched_balance_find_src_group()`, `sched_balance_find_src_rq()` and
//! `sched_balance_domains()` in 6.10). When balancing runs and how tasks
//! move is the engine's (`engine/balance.rs`).
//!
//! Simplifications, all because the simulator has no such state: every
//! task is a nice-0 fair task without CPU affinity or NUMA faults, and
//! every CPU has the full capacity (no RT or IRQ pressure, no asymmetric
//! capacities), so misfit, asym-packing and imbalanced groups, pinned
//! tasks, `migrate_degrades_locality()` and `check_cpu_capacity()` never
//! apply. PELT's load and runnable averages are approximated as the
//! engine's utilisation plus one task's worth per waiting task
//! ([`runnable_load`]).

use std::collections::BTreeMap;
use std::rc::Rc;

use nest_trace::Cpu;

use super::fork_balance::{GroupType, LEVELS, Level, LinuxVersion, classify, imb_numa_nr};
use super::wakeup::runnable_load;
use super::{Ctx, TaskId};

/// `sysctl_sched_migration_cost`: a task that ran less than this long ago
/// is cache-hot (`task_hot()`), ns.
pub const MIGRATION_COST_NS: u64 = 500_000;

/// `sd->busy_factor` (`sd_init()`): a busy CPU balances this many times
/// less often.
const BUSY_FACTOR: u64 = 16;

/// `sysctl_sched_nr_migrate`: tasks `detach_tasks()` looks at per pass.
pub const NR_MIGRATE: usize = 32;

/// Cost of a newly-idle balance of a domain per CPU it spans, ns. The
/// kernel measures it (`sd->max_newidle_lb_cost`); this constant is a
/// simulator assumption (docs/design/simulator.md, "Load balancing").
const NEWIDLE_COST_NS_PER_CPU: u64 = 1_000;

/// The load of a task waiting in a run queue, in CPUs: runnable all the
/// time, its load average tends to a whole nice-0 task's.
pub const WAITING_TASK_LOAD: f64 = 1.0;

/// `enum cpu_idle_type`: why a CPU balances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuIdle {
    /// Periodic balancing of an idle CPU (by itself or, tickless, by the
    /// NOHZ idle balancer on its behalf).
    Idle,
    /// Periodic balancing of a busy CPU at its tick.
    NotIdle,
    /// A CPU about to go idle (`sched_balance_newidle()`).
    NewlyIdle,
}

/// How an imbalance is measured (`enum migration_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Migration {
    /// Load, in CPUs.
    Load,
    /// Utilisation, in CPUs.
    Util,
    /// Tasks.
    Task,
}

/// What `find_busiest_group()` found: move `amount` from the domain's
/// group `group`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Imbalance {
    pub group: usize,
    pub migration: Migration,
    pub amount: f64,
}

/// One CPU's scheduling domain at one level (`struct sched_domain`): what
/// `sd_init()` and `build_sched_domains()` give it and its balancing
/// state.
#[derive(Clone, Debug)]
pub struct Domain {
    pub level: Level,
    /// The level below, whose domain spans each group (`sd->child`).
    child: Option<Level>,
    /// The groups (`sd->groups`): `span`'s groups from `first_group` on,
    /// the local one first.
    span: Rc<Span>,
    first_group: usize,
    /// CPUs spanned (`sd->span_weight`).
    weight: u32,
    /// `sd->imb_numa_nr` (NUMA level, 5.19+).
    imb_numa_nr: u32,
    /// `sd->balance_interval`, ms.
    balance_interval: u64,
    /// `get_sd_balance_interval()` of the current `balance_interval`, for
    /// an idle CPU and a busy one, jiffies.
    idle_jiffies: u64,
    busy_jiffies: u64,
    /// The tick frequency (`HZ`) and `max_load_balance_interval`
    /// (jiffies), for `get_sd_balance_interval()`.
    hz: u32,
    max_jiffies: u64,
    /// `sd->last_balance`, jiffies.
    pub last_balance: u64,
    /// `sd->nr_balance_failed`.
    pub nr_balance_failed: u32,
}

impl Domain {
    /// `sd_min_interval`: the domain's weight in ms (`sd_init()`).
    fn min_interval(&self) -> u64 {
        u64::from(self.weight)
    }

    /// `sd->max_interval`: twice the weight.
    fn max_interval(&self) -> u64 {
        2 * u64::from(self.weight)
    }

    /// `sd->balance_interval`, ms.
    #[cfg(test)]
    pub fn balance_interval(&self) -> u64 {
        self.balance_interval
    }

    /// The domain was unbalanced: `balance_interval` back to its minimum.
    pub fn reset_interval(&mut self) {
        self.set_interval(self.min_interval());
    }

    /// A periodic balance found the domain balanced: `balance_interval`
    /// doubles, up to `max_interval`.
    pub fn back_off(&mut self) {
        if self.balance_interval < self.max_interval() {
            self.set_interval(self.balance_interval * 2);
        }
    }

    /// `sched_balance_rq()`'s `out_balanced`: no failure, and a periodic
    /// balance backs off.
    pub fn balanced(&mut self, idle: CpuIdle) {
        self.nr_balance_failed = 0;
        if idle != CpuIdle::NewlyIdle {
            self.back_off();
        }
    }

    fn set_interval(&mut self, ms: u64) {
        self.balance_interval = ms;
        self.idle_jiffies = self.jiffies_for(false);
        self.busy_jiffies = self.jiffies_for(true);
    }

    /// Jiffies between two balances of this domain by a busy CPU or an
    /// idle one (`get_sd_balance_interval()`).
    pub fn interval(&self, busy: bool) -> u64 {
        if busy {
            self.busy_jiffies
        } else {
            self.idle_jiffies
        }
    }

    /// `get_sd_balance_interval()`: `balance_interval`, `busy_factor`
    /// times longer for a busy CPU less one jiffy (so that levels do not
    /// align), in jiffies, at most `max_load_balance_interval`.
    fn jiffies_for(&self, busy: bool) -> u64 {
        let ms = self.balance_interval * if busy { BUSY_FACTOR } else { 1 };
        let mut jiffies = msecs_to_jiffies(ms, self.hz);
        if busy {
            jiffies = jiffies.saturating_sub(1);
        }
        jiffies.clamp(1, self.max_jiffies)
    }

    /// The newly-idle balance's cost of this domain, ns (see
    /// [`NEWIDLE_COST_NS_PER_CPU`]).
    pub fn newidle_cost_ns(&self) -> u64 {
        u64::from(self.weight) * NEWIDLE_COST_NS_PER_CPU
    }

    /// How many groups the domain has.
    pub fn nr_groups(&self) -> usize {
        self.span.nr_groups
    }

    /// The CPUs of group `group` (0: the local group).
    pub fn group(&self, group: usize) -> &[Cpu] {
        let size = self.span.group_size;
        let start = (self.first_group + group) * size;
        &self.span.cpus[start..start + size]
    }

    /// The CPUs of the groups other than the local one.
    fn others(&self) -> &[Cpu] {
        let size = self.span.group_size;
        let start = (self.first_group + 1) * size;
        &self.span.cpus[start..start + (self.span.nr_groups - 1) * size]
    }

    /// The groups are single CPUs.
    pub fn single_cpu_groups(&self) -> bool {
        self.span.group_size == 1
    }

    /// `SD_PREFER_SIBLING` of the groups (their child domain's flag, set
    /// by `sd_init()` at every level but NUMA): spread tasks evenly over
    /// the groups. Groups without a child domain (single CPUs) have none.
    fn prefer_sibling(&self) -> bool {
        self.child.is_some()
    }

    /// `SD_SHARE_CPUCAPACITY` of the groups: they are SMT cores.
    fn smt_groups(&self) -> bool {
        self.child == Some(Level::Smt)
    }
}

/// `msecs_to_jiffies()`, rounding up.
fn msecs_to_jiffies(ms: u64, hz: u32) -> u64 {
    (ms * u64::from(hz)).div_ceil(1000)
}

/// The groups of the domains spanning the same CPUs at one level (a
/// core, an LLC, a socket, the machine), in the order the kernel links
/// them from the span's first CPU (`Level::groups()`), twice over. From
/// any other CPU of the span the kernel's order is a rotation of it (CPUs
/// are numbered thread by thread, then core by core: tested on every
/// built-in machine), so each CPU's groups are one slice of it.
#[derive(Debug)]
pub struct Span {
    cpus: Vec<Cpu>,
    group_size: usize,
    nr_groups: usize,
}

impl Span {
    fn of(cx: &Ctx, level: Level, first: Cpu) -> Self {
        let groups = level.groups(cx, first);
        let group_size = groups[0].len();
        assert!(
            groups.iter().all(|g| g.len() == group_size),
            "groups of unequal sizes"
        );
        let once = groups.concat();
        Self {
            cpus: [once.as_slice(), once.as_slice()].concat(),
            group_size,
            nr_groups: groups.len(),
        }
    }

    /// The index of the group holding `cpu`.
    fn group_of(&self, cpu: Cpu) -> usize {
        let at = self.cpus.iter().position(|&c| c == cpu).unwrap_or(0);
        at / self.group_size
    }
}

/// The first CPU of the span of `cpu`'s domain at `level`.
fn span_first(cx: &Ctx, level: Level, cpu: Cpu) -> Cpu {
    match level {
        Level::Numa => 0,
        Level::Package => cx.socket_cpus(cx.socket(cpu))[0],
        Level::Cache => cx.llc_cpus(cx.llc(cpu))[0],
        Level::Smt => cx.smt_siblings(cpu)[0],
    }
}

/// Every CPU's domains, bottom up (`build_sched_domains()`; a level with
/// one group is degenerate and left out, as `cpu_attach_domain()` does),
/// with `hz` ticks a second. Balancing intervals start at the weight and
/// the last balance at jiffy 0 (`sd_init()`).
pub fn build_domains(cx: &Ctx, hz: u32) -> Vec<Vec<Domain>> {
    // update_max_interval()
    let max_jiffies = (u64::from(hz) * u64::from(cx.nr_cpus()) / 10).max(1);
    let mut spans: BTreeMap<(usize, Cpu), Rc<Span>> = BTreeMap::new();
    let mut cpu_domains = |cpu: Cpu| {
        let mut domains: Vec<Domain> = Vec::new();
        for &level in LEVELS.iter().rev() {
            let first = span_first(cx, level, cpu);
            let span = spans
                .entry((level as usize, first))
                .or_insert_with(|| Rc::new(Span::of(cx, level, first)));
            if span.nr_groups <= 1 {
                continue;
            }
            let mut d = Domain {
                level,
                child: domains.last().map(|d| d.level),
                first_group: span.group_of(cpu),
                weight: (span.nr_groups * span.group_size) as u32,
                span: Rc::clone(span),
                imb_numa_nr: imb_numa_nr(cx, cpu),
                balance_interval: 0,
                idle_jiffies: 0,
                busy_jiffies: 0,
                hz,
                max_jiffies,
                last_balance: 0,
                nr_balance_failed: 0,
            };
            d.reset_interval();
            domains.push(d);
        }
        domains
    };
    (0..cx.nr_cpus()).map(&mut cpu_domains).collect()
}

/// `struct sg_lb_stats` as `update_sg_lb_stats()` fills it, in CPUs
/// (1.0 = `SCHED_CAPACITY_SCALE`; each CPU's capacity is 1).
#[derive(Clone, Copy, Debug)]
struct LbStats {
    /// Load per CPU; computed only for an overloaded group.
    avg_load: f64,
    /// `group_load`, also taken as `group_runnable`.
    load: f64,
    util: f64,
    /// `sum_nr_running` (also `sum_h_nr_running`: every task is fair).
    nr_running: u32,
    idle_cpus: u32,
    /// `group_weight`, also the group's capacity.
    weight: u32,
    kind: GroupType,
}

impl LbStats {
    /// `init_sd_lb_stats()`'s `busiest_stat`: no busiest group yet.
    const NONE: Self = Self {
        avg_load: 0.0,
        load: 0.0,
        util: 0.0,
        nr_running: 0,
        idle_cpus: u32::MAX,
        weight: 0,
        kind: GroupType::HasSpare,
    };

    /// `update_sg_lb_stats()` of `cpus`, a group of `d`. Inlined into the
    /// loop over a domain's groups: 1% of the barrier benchmark's
    /// instructions on the E7 (examples/bench.rs).
    #[inline(always)]
    fn of(cx: &Ctx, d: &Domain, cpus: &[Cpu], local: bool, idle: CpuIdle) -> Self {
        let version = cx.linux_version();
        let (mut util, mut nr_running, mut idle_cpus) = (0.0, 0, 0);
        for &c in cpus {
            let nr = cx.nr_running(c);
            nr_running += nr;
            idle_cpus += u32::from(nr == 0);
            util += cx.util(c);
        }
        let weight = cpus.len() as u32;
        // The sum of the CPUs' `runnable_load()`: one task runs on each
        // CPU that is not idle, the others wait.
        let waiting = nr_running + idle_cpus - weight;
        let load = util + f64::from(waiting);
        let w = f64::from(weight);
        let mut kind = classify(nr_running, w, util, load, d.level.imbalance_pct());
        if kind < GroupType::SmtBalance && !local && smt_balance(version, d, idle, nr_running) {
            kind = GroupType::SmtBalance;
        }
        let avg_load = if kind == GroupType::Overloaded {
            load / w
        } else {
            0.0
        };
        Self {
            avg_load,
            load,
            util,
            nr_running,
            idle_cpus,
            weight,
            kind,
        }
    }
}

/// `smt_balance()` (not in 5.10): for an idle CPU, a core running more than one
/// task is worth relieving.
fn smt_balance(version: LinuxVersion, d: &Domain, idle: CpuIdle, nr_running: u32) -> bool {
    version == LinuxVersion::Linux7 && idle != CpuIdle::NotIdle && d.smt_groups() && nr_running > 1
}

/// `update_sd_pick_busiest()`: is `sgs` busier than `busiest`?
fn busier(version: LinuxVersion, d: &Domain, sgs: &LbStats, busiest: &LbStats) -> bool {
    if sgs.nr_running == 0 {
        return false;
    }
    if sgs.kind != busiest.kind {
        return sgs.kind > busiest.kind;
    }
    let has_spare = || {
        sgs.idle_cpus < busiest.idle_cpus
            || (sgs.idle_cpus == busiest.idle_cpus && sgs.nr_running > busiest.nr_running)
    };
    match sgs.kind {
        GroupType::Overloaded => sgs.avg_load > busiest.avg_load,
        GroupType::SmtBalance if sgs.idle_cpus != 0 || busiest.idle_cpus != 0 => has_spare(),
        // avg_load is not computed (0) below overloaded: 5.10 keeps the
        // first group met, 6.19 the last unless the groups are SMT cores.
        GroupType::SmtBalance | GroupType::FullyBusy => match version {
            LinuxVersion::Linux510 => sgs.avg_load > busiest.avg_load,
            LinuxVersion::Linux7 => {
                sgs.avg_load > busiest.avg_load
                    || (sgs.avg_load == busiest.avg_load && !d.smt_groups())
            }
        },
        GroupType::HasSpare => has_spare(),
    }
}

/// `struct sd_lb_stats`: the local and busiest groups' statistics and the
/// domain's load per CPU (`total_load / total_capacity`).
struct DomainStats {
    local: LbStats,
    busiest: LbStats,
    avg_load: f64,
}

/// `find_busiest_group()` of `d` for its CPU, balancing because of
/// `idle`: the group to pull from and how much, or `None` when the domain
/// is balanced.
pub fn find_busiest_group(cx: &Ctx, d: &Domain, idle: CpuIdle) -> Option<Imbalance> {
    if nothing_to_pull(cx, d) {
        return None;
    }
    find_busiest_group_stats(cx, d, idle)
}

/// Does `find_busiest_group()` find nothing in `d` without computing its
/// statistics? When no group but the local one runs more than one task
/// (then the busiest runs one, and `worth_balancing()` says no whatever
/// the CPUs' utilisation): that group is not overloaded, nor an SMT core
/// to relieve (both need more than one task); a sibling spread needs it
/// to run two tasks more than the local group (5.10) or
/// `sibling_imbalance()` above one (6.19); a busy CPU only pulls from an
/// overloaded group; and an idle one does not pull a group's only task
/// (`busiest->sum_nr_running == 1` in `find_busiest_group()`).
#[inline]
pub fn nothing_to_pull(cx: &Ctx, d: &Domain) -> bool {
    // Without waiting tasks, no CPU runs more than one (a quick answer
    // for groups of one CPU).
    if d.single_cpu_groups() && !cx.tasks_wait() {
        return true;
    }
    let runs_one = |g: &[Cpu]| g.iter().map(|&c| cx.nr_running(c)).sum::<u32>() <= 1;
    d.others().chunks_exact(d.span.group_size).all(runs_one)
}

/// `find_busiest_group()` from the groups' statistics.
fn find_busiest_group_stats(cx: &Ctx, d: &Domain, idle: CpuIdle) -> Option<Imbalance> {
    let version = cx.linux_version();
    let local = LbStats::of(cx, d, d.group(0), true, idle);
    let (mut total_load, mut total_capacity) = (local.load, local.weight);
    let mut busiest = LbStats::NONE;
    let mut group = None;
    for i in 1..d.nr_groups() {
        let sgs = LbStats::of(cx, d, d.group(i), false, idle);
        if busier(version, d, &sgs, &busiest) {
            busiest = sgs;
            group = Some(i);
        }
        total_load += sgs.load;
        total_capacity += sgs.weight;
    }
    let group = group?;
    let sds = DomainStats {
        local,
        busiest,
        avg_load: total_load / f64::from(total_capacity),
    };
    if !worth_balancing(version, d, idle, &sds) {
        return None;
    }
    let (migration, amount) = calculate_imbalance(version, d, idle, &sds);
    (amount > 0.0).then_some(Imbalance {
        group,
        migration,
        amount,
    })
}

/// The checks of `find_busiest_group()` between the statistics and
/// `calculate_imbalance()` (its `out_balanced` and `force_balance`
/// exits).
fn worth_balancing(version: LinuxVersion, d: &Domain, idle: CpuIdle, s: &DomainStats) -> bool {
    let (local, busiest) = (&s.local, &s.busiest);
    if local.kind > busiest.kind {
        return false;
    }
    if local.kind == GroupType::Overloaded
        && (local.avg_load >= busiest.avg_load
            || local.avg_load >= s.avg_load
            || 100.0 * busiest.avg_load <= d.level.imbalance_pct() * local.avg_load)
    {
        return false;
    }
    if spread_to_sibling(version, d, idle, s) || busiest.kind == GroupType::Overloaded {
        return true;
    }
    if idle == CpuIdle::NotIdle {
        // Let an idle CPU pull from a group that is not overloaded.
        return false;
    }
    // Fewer than two more idle CPUs here: moving would only move the
    // imbalance; nor is anything waiting in a busiest group of one task.
    let idle_gap = busiest.weight > 1 && local.idle_cpus <= busiest.idle_cpus.saturating_add(1);
    !idle_gap && busiest.nr_running != 1
}

/// "Try to move all excess tasks to a sibling domain of the busiest
/// group's child domain": with `SD_PREFER_SIBLING`, a local group with
/// spare capacity pulls when the busiest runs at least two tasks more
/// (5.10), or when `sibling_imbalance()` exceeds 1 (6.19; only an idle
/// CPU).
fn spread_to_sibling(version: LinuxVersion, d: &Domain, idle: CpuIdle, s: &DomainStats) -> bool {
    if !d.prefer_sibling() || s.local.kind != GroupType::HasSpare {
        return false;
    }
    match version {
        LinuxVersion::Linux510 => s.busiest.nr_running > s.local.nr_running + 1,
        LinuxVersion::Linux7 => sibling_imbalance(idle, s) > 1,
    }
}

/// `sibling_imbalance()` (not in 5.10) between groups of as many cores (every
/// group of a level has as many in the simulator's machines): the
/// busiest group's excess of tasks, for an idle CPU only.
fn sibling_imbalance(idle: CpuIdle, s: &DomainStats) -> u32 {
    if idle == CpuIdle::NotIdle {
        return 0;
    }
    s.busiest.nr_running.saturating_sub(s.local.nr_running)
}

/// `calculate_imbalance()`: what to move, and how much.
fn calculate_imbalance(
    version: LinuxVersion,
    d: &Domain,
    idle: CpuIdle,
    s: &DomainStats,
) -> (Migration, f64) {
    let (local, busiest) = (&s.local, &s.busiest);
    if busiest.kind == GroupType::SmtBalance {
        // Reduce the number of tasks sharing a core.
        return (Migration::Task, 1.0);
    }
    if local.kind == GroupType::HasSpare {
        return spare_capacity_imbalance(version, d, idle, s);
    }
    let local_avg = if local.kind == GroupType::Overloaded {
        local.avg_load
    } else {
        // The local group will become overloaded: its load per CPU counts.
        let avg = local.load / f64::from(local.weight);
        let above_average = version == LinuxVersion::Linux7 && avg >= s.avg_load;
        if avg >= busiest.avg_load || above_average {
            return (Migration::Load, 0.0);
        }
        avg
    };
    // Bring both to the domain's average, no further (the kernel's
    // unsigned differences: a negative one never limits).
    let surplus = (busiest.avg_load - s.avg_load) * f64::from(busiest.weight);
    let room = (s.avg_load - local_avg) * f64::from(local.weight);
    let limit = |x: f64| if x < 0.0 { f64::INFINITY } else { x };
    (Migration::Load, limit(surplus).min(limit(room)))
}

/// `calculate_imbalance()` when the local group has spare capacity: fill
/// it from an overloaded group outside the LLC, else even out the tasks
/// (`SD_PREFER_SIBLING`, or groups of one CPU) or the idle CPUs, with the
/// NUMA allowance.
fn spare_capacity_imbalance(
    version: LinuxVersion,
    d: &Domain,
    idle: CpuIdle,
    s: &DomainStats,
) -> (Migration, f64) {
    let (local, busiest) = (&s.local, &s.busiest);
    if busiest.kind > GroupType::FullyBusy && !d.level.shares_llc() {
        let room = f64::from(local.weight).max(local.util) - local.util;
        if idle != CpuIdle::NotIdle && room == 0.0 {
            // Utilisation says full, but this CPU is idle: pull one task.
            return (Migration::Task, 1.0);
        }
        return (Migration::Util, room);
    }
    let even_tasks = busiest.weight == 1 || d.prefer_sibling();
    let mut imbalance = match (version, even_tasks) {
        (LinuxVersion::Linux510, true) => busiest.nr_running.saturating_sub(local.nr_running) >> 1,
        (LinuxVersion::Linux510, false) => local.idle_cpus.saturating_sub(busiest.idle_cpus) >> 1,
        (LinuxVersion::Linux7, true) => sibling_imbalance(idle, s),
        (LinuxVersion::Linux7, false) => local.idle_cpus.saturating_sub(busiest.idle_cpus),
    };
    if d.level == Level::Numa {
        imbalance = adjust_numa_imbalance(version, imbalance, d, s);
    }
    if version == LinuxVersion::Linux7 {
        imbalance >>= 1;
    }
    (Migration::Task, f64::from(imbalance))
}

/// `adjust_numa_imbalance()`: a small imbalance between NUMA nodes is
/// allowed. 5.10: none is corrected while the busiest node runs at most 2
/// tasks (a communicating pair stays together). 5.19+: an imbalance of at
/// most 2 is allowed while the local node, with one more task, would run
/// at most `imb_numa_nr` (one per LLC it spans).
fn adjust_numa_imbalance(
    version: LinuxVersion,
    imbalance: u32,
    d: &Domain,
    s: &DomainStats,
) -> u32 {
    const NUMA_IMBALANCE_MIN: u32 = 2;
    let allowed = match version {
        LinuxVersion::Linux510 => s.busiest.nr_running <= NUMA_IMBALANCE_MIN,
        LinuxVersion::Linux7 => {
            // dst_running = local + 1 <= imb_numa_nr
            s.local.nr_running < d.imb_numa_nr && imbalance <= NUMA_IMBALANCE_MIN
        }
    };
    if allowed { 0 } else { imbalance }
}

/// `find_busiest_queue()`: the CPU of the busiest group to pull from.
pub fn find_busiest_queue(cx: &Ctx, d: &Domain, imbalance: &Imbalance) -> Option<Cpu> {
    let mut busiest = None;
    let mut most = 0.0;
    for &c in d.group(imbalance.group) {
        let nr = cx.nr_running(c);
        let amount = match imbalance.migration {
            Migration::Load => {
                let load = runnable_load(cx, c);
                // A lone task heavier than the imbalance stays.
                if nr == 1 && load > imbalance.amount {
                    continue;
                }
                load
            }
            // Nothing to detach from a CPU with one task.
            Migration::Util if nr <= 1 => continue,
            Migration::Util => cx.util(c),
            Migration::Task => f64::from(nr),
        };
        if nr > 0 && amount > most {
            most = amount;
            busiest = Some(c);
        }
    }
    busiest
}

/// `should_we_balance()`: does `dst` balance `d` for its local group? A
/// newly idle CPU always (6.19: unless it has a task already); otherwise
/// only the first idle CPU of the group (6.19: preferring one on an idle
/// core outside the SMT level, then the first idle one with busy
/// siblings), or the group's first CPU when none is idle.
pub fn should_we_balance(cx: &Ctx, d: &Domain, dst: Cpu, idle: CpuIdle) -> bool {
    let version = cx.linux_version();
    if idle == CpuIdle::NewlyIdle {
        return version == LinuxVersion::Linux510 || cx.nr_running(dst) == 0;
    }
    // A group of one CPU: it is its first idle CPU, or busy, its first.
    d.single_cpu_groups() || first_balancing_cpu(cx, d, version) == dst
}

/// The CPU of `d`'s local group that balances for it periodically.
fn first_balancing_cpu(cx: &Ctx, d: &Domain, version: LinuxVersion) -> Cpu {
    let group = d.group(0);
    let mut first_idle = None;
    for &c in group.iter().filter(|&&c| cx.is_idle(c)) {
        let on_idle_core = d.level == Level::Smt || is_core_idle(cx, c);
        if version == LinuxVersion::Linux510 || on_idle_core {
            return c;
        }
        first_idle.get_or_insert(c);
    }
    first_idle.unwrap_or(group[0])
}

/// `is_core_idle()`: are `cpu`'s SMT siblings idle?
fn is_core_idle(cx: &Ctx, cpu: Cpu) -> bool {
    cx.smt_siblings(cpu)
        .iter()
        .all(|&s| s == cpu || cx.is_idle(s))
}

/// `task_hot()`: did `task` stop running less than
/// `sysctl_sched_migration_cost` ago? Never between SMT siblings, which
/// share their caches; never for a task that has not run yet
/// (`exec_start` is 0).
pub fn task_hot(cx: &Ctx, d: &Domain, task: TaskId) -> bool {
    d.level != Level::Smt
        && cx
            .exec_start(task)
            .is_some_and(|t| cx.now().saturating_sub(t) < MIGRATION_COST_NS)
}

/// `can_migrate_task()` for a waiting task moving to `dst`: never where it
/// may not run (`!cpumask_test_cpu(env->dst_cpu, p->cpus_ptr)`; the
/// kernel's retries with another CPU of the group, `LBF_DST_PINNED`, and
/// without the busiest CPU, `LBF_ALL_PINNED`, are left out); a cache-hot
/// one only once the domain failed to balance more than
/// `cache_nice_tries` times.
pub fn can_migrate_task(cx: &Ctx, d: &Domain, task: TaskId, dst: Cpu) -> bool {
    cx.task_allowed(task, dst)
        && (!task_hot(cx, d, task) || d.nr_balance_failed > d.level.cache_nice_tries())
}

/// The load or utilisation `detach_tasks()` counts for moving `task`,
/// relaxed by half per failed balance (`shr_bound()`; 5.10 relaxes only
/// the load), or `None` when it is more than is left to move.
pub fn detach_amount(
    cx: &Ctx,
    d: &Domain,
    migration: Migration,
    task: TaskId,
    left: f64,
) -> Option<f64> {
    let relaxed = |x: f64| x / 2f64.powi(d.nr_balance_failed.min(63) as i32);
    let (counted, compared) = match migration {
        Migration::Task => return Some(1.0),
        Migration::Load => (WAITING_TASK_LOAD, relaxed(WAITING_TASK_LOAD)),
        Migration::Util => {
            let util = cx.task_util(task);
            match cx.linux_version() {
                LinuxVersion::Linux510 => (util, util),
                LinuxVersion::Linux7 => (util, relaxed(util)),
            }
        }
    };
    (compared <= left).then_some(counted)
}

/// `need_active_balance()` after a failed balance: push the running task
/// once the domain failed more than `cache_nice_tries + 2` times (6.19:
/// only when counting tasks, `imbalanced_active_balance()`).
pub fn need_active_balance(version: LinuxVersion, d: &Domain, imbalance: &Imbalance) -> bool {
    let failed = d.nr_balance_failed > d.level.cache_nice_tries() + 2;
    match version {
        LinuxVersion::Linux510 => failed,
        LinuxVersion::Linux7 => failed && imbalance.migration == Migration::Task,
    }
}

/// Does a CPU about to idle look for a task (`sched_balance_newidle()`)?
/// Only when some CPU has one waiting (`rd->overload`), and when its
/// average idle period (`rq->avg_idle`) covers the cost of balancing its
/// lowest domain (5.10: is at least `sysctl_sched_migration_cost`).
pub fn newidle_allowed(
    version: LinuxVersion,
    overloaded: bool,
    avg_idle: u64,
    lowest: &Domain,
) -> bool {
    let floor = match version {
        LinuxVersion::Linux510 => MIGRATION_COST_NS,
        LinuxVersion::Linux7 => lowest.newidle_cost_ns(),
    };
    overloaded && avg_idle >= floor
}

/// Does a CPU about to idle, having pulled nothing, update the other idle
/// CPUs' blocked averages when due (`nohz_newidle_balance()`)? In 6.19
/// whenever it pulled nothing; in 5.10 only when it did not look for a
/// task (`allowed`: [`newidle_allowed`]).
pub fn newidle_updates_idle_cpus(version: LinuxVersion, allowed: bool) -> bool {
    version == LinuxVersion::Linux7 || !allowed
}

/// Does a newly-idle balance stop after one task? With
/// `CONFIG_PREEMPTION` (`detach_tasks()`): Debian's kernels since 5.12
/// (`PREEMPT_DYNAMIC`), not Debian 11's 5.10 (`PREEMPT_VOLUNTARY`).
pub fn newidle_pulls_one(version: LinuxVersion) -> bool {
    version == LinuxVersion::Linux7
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Machine;
    use crate::engine::Kernel;
    use crate::policy::testkit::{busy, guest, kernel, waiting};
    use LinuxVersion::{Linux7, Linux510};

    const BOTH: [LinuxVersion; 2] = [Linux510, Linux7];

    /// `cpu`'s domains.
    fn domains(k: &mut Kernel, cpu: Cpu) -> Vec<Domain> {
        build_domains(&Ctx { k }, 250).swap_remove(cpu as usize)
    }

    /// `cpu`'s domain at `level`.
    fn domain(k: &mut Kernel, cpu: Cpu, level: Level) -> Domain {
        let domains = domains(k, cpu);
        domains.into_iter().find(|d| d.level == level).unwrap()
    }

    #[test]
    fn every_cpus_groups_are_those_the_kernel_links_from_it() {
        for machine in Machine::builtin_names() {
            let mut k = kernel(machine);
            let all = build_domains(&Ctx { k: &mut k }, 250);
            let cx = Ctx { k: &mut k };
            for (cpu, domains) in (0..).zip(&all) {
                for d in domains {
                    let linked: Vec<&[Cpu]> = (0..d.nr_groups()).map(|i| d.group(i)).collect();
                    assert_eq!(
                        linked,
                        d.level.groups(&cx, cpu),
                        "{machine} {cpu} {:?}",
                        d.level
                    );
                }
            }
        }
    }

    #[test]
    fn groups_come_in_the_order_build_sched_groups_links_them() {
        // From CPU 9 (core 1's second thread), for_each_cpu_wrap() meets
        // CPUs 10, 11, ... 15, then 0: cores 2 and 3 before core 0.
        let mut k = guest();
        let mc = domain(&mut k, 9, Level::Cache);
        let groups: Vec<&[Cpu]> = (0..mc.nr_groups()).map(|i| mc.group(i)).collect();
        assert_eq!(groups, [&[1, 9], &[2, 10], &[3, 11], &[0, 8]]);
        let numa = domain(&mut k, 9, Level::Numa);
        assert_eq!(numa.group(0), [0, 1, 2, 3, 8, 9, 10, 11]);
    }

    #[test]
    fn intervals_start_at_the_weight_double_while_balanced_and_stretch_when_busy() {
        let mut k = guest();
        let domains = domains(&mut k, 0);
        let levels: Vec<Level> = domains.iter().map(|d| d.level).collect();
        assert_eq!(levels, [Level::Smt, Level::Cache, Level::Numa]);
        // 2, 8 and 16 ms at 250 Hz; 16 times longer, less a jiffy, busy.
        let jiffies = |busy| domains.iter().map(|d| d.interval(busy)).collect::<Vec<_>>();
        assert_eq!(jiffies(false), [1, 2, 4]);
        assert_eq!(jiffies(true), [7, 31, 63]);
        let mut numa = domains[2].clone();
        // Newly-idle balances leave the interval alone.
        numa.balanced(CpuIdle::NewlyIdle);
        assert_eq!(numa.balance_interval(), 16);
        // Balanced periodically: up to max_interval (32 ms), no further.
        for _ in 0..3 {
            numa.balanced(CpuIdle::Idle);
        }
        assert_eq!((numa.balance_interval(), numa.interval(false)), (32, 8));
        assert_eq!(numa.interval(true), 127);
        numa.reset_interval();
        assert_eq!(numa.interval(false), 4);
    }

    #[test]
    fn only_the_first_idle_cpu_of_its_group_balances_a_domain() {
        for v in BOTH {
            // Node 0: CPU 0 busy, CPU 1 idle beside a busy sibling (9),
            // CPU 2 idle on an idle core.
            let mut k = guest();
            k.cfg.linux = v;
            busy(&mut k, &[0, 9], 1.0);
            let balances = |k: &mut Kernel, cpu, idle| {
                let numa = domain(k, cpu, Level::Numa);
                should_we_balance(&Ctx { k }, &numa, cpu, idle)
            };
            // 5.10: the first idle CPU; 6.19: the first on an idle core.
            let first = if v == Linux510 { 1 } else { 2 };
            for cpu in [1, 2, 3] {
                assert_eq!(
                    balances(&mut k, cpu, CpuIdle::Idle),
                    cpu == first,
                    "{v:?} {cpu}"
                );
            }
            // Newly idle, every CPU balances.
            assert!(balances(&mut k, 3, CpuIdle::NewlyIdle), "{v:?}");
            // No idle CPU: the group's first CPU.
            busy(&mut k, &[1, 2, 3, 8, 10, 11], 1.0);
            assert!(balances(&mut k, 0, CpuIdle::NotIdle), "{v:?}");
            assert!(!balances(&mut k, 1, CpuIdle::NotIdle), "{v:?}");
        }
    }

    #[test]
    fn overloaded_nodes_within_imbalance_pct_are_left_alone() {
        for v in BOTH {
            // Every CPU runs a task; node 0 has 8 more waiting (2 tasks per
            // CPU), node 1 10 more (2.25 per CPU: within 117%).
            let mut k = guest();
            k.cfg.linux = v;
            busy(&mut k, &(0..16).collect::<Vec<_>>(), 1.0);
            for cpu in 0..16 {
                waiting(&mut k, cpu, 0.5, None);
            }
            for cpu in [4, 5] {
                waiting(&mut k, cpu, 0.5, None);
            }
            let numa = domain(&mut k, 0, Level::Numa);
            let found = |k: &mut Kernel| find_busiest_group(&Ctx { k }, &numa, CpuIdle::NotIdle);
            assert_eq!(found(&mut k), None, "{v:?}");
            // One more (2.375 per CPU): bring both to the average (2.1875).
            waiting(&mut k, 6, 0.5, None);
            let pull = Imbalance {
                group: 1,
                migration: Migration::Load,
                amount: 1.5,
            };
            assert_eq!(found(&mut k), Some(pull), "{v:?}");
        }
    }

    #[test]
    fn a_small_numa_imbalance_is_allowed_more_widely_since_5_19() {
        // Gold 5218: node 0 is CPUs 0-15 and 32-47, imb_numa_nr 4. An idle
        // CPU of node 0 running 2 tasks, node 1 running 4: 5.10 evens them
        // out (node 1 runs more than 2); 5.19+ allows it (node 0 would run
        // 3, at most imb_numa_nr, and they differ by 2).
        for (v, pull) in [(Linux510, Some(1.0)), (Linux7, None)] {
            let mut k = kernel("xeon-gold-5218-2s");
            k.cfg.linux = v;
            busy(&mut k, &[1, 2, 16, 17, 18, 19], 1.0);
            let numa = domain(&mut k, 0, Level::Numa);
            let found = find_busiest_group(&Ctx { k: &mut k }, &numa, CpuIdle::Idle);
            let expected = pull.map(|amount| Imbalance {
                group: 1,
                migration: Migration::Task,
                amount,
            });
            assert_eq!(found, expected, "{v:?}");
        }
        for v in BOTH {
            // A pair alone on node 1 stays there.
            let mut k = kernel("xeon-gold-5218-2s");
            k.cfg.linux = v;
            busy(&mut k, &[16, 17], 1.0);
            let numa = domain(&mut k, 0, Level::Numa);
            let found = find_busiest_group(&Ctx { k: &mut k }, &numa, CpuIdle::Idle);
            assert_eq!(found, None, "{v:?}");
        }
    }

    #[test]
    fn a_task_that_ran_within_500_us_stays_until_the_domain_failed_enough() {
        let mut k = guest();
        k.now = 10_000_000;
        let hot = waiting(&mut k, 0, 0.5, Some(100_000));
        let cold = waiting(&mut k, 0, 0.5, Some(600_000));
        let new = waiting(&mut k, 0, 0.5, None);
        let domains = domains(&mut k, 8);
        let cx = Ctx { k: &mut k };
        for d in &domains {
            // SMT siblings share their caches.
            assert_eq!(
                task_hot(&cx, d, hot),
                d.level != Level::Smt,
                "{:?}",
                d.level
            );
            assert!(!task_hot(&cx, d, cold) && !task_hot(&cx, d, new));
        }
        let mut mc = domains[1].clone();
        for failed in 0..=2 {
            mc.nr_balance_failed = failed;
            // Moved anyway after more than cache_nice_tries (1) failures.
            assert_eq!(can_migrate_task(&cx, &mc, hot, 0), failed > 1);
        }
    }

    #[test]
    fn newly_idle_balancing_needs_a_waiting_task_and_a_long_enough_idle() {
        let mut k = guest();
        let smt = domain(&mut k, 0, Level::Smt);
        // 5.10: at least sysctl_sched_migration_cost (500 us) on average.
        assert!(newidle_allowed(Linux510, true, 500_000, &smt));
        assert!(!newidle_allowed(Linux510, true, 499_999, &smt));
        // 6.19: at least the lowest domain's cost (2 us for 2 CPUs here).
        assert!(newidle_allowed(Linux7, true, 2_000, &smt));
        assert!(!newidle_allowed(Linux7, true, 1_999, &smt));
        for v in BOTH {
            assert!(!newidle_allowed(v, false, 1_000_000, &smt));
        }
    }

    #[test]
    fn active_balance_follows_repeated_failures() {
        let mut k = guest();
        let mut numa = domain(&mut k, 0, Level::Numa);
        let imbalance = |migration| Imbalance {
            group: 1,
            migration,
            amount: 1.0,
        };
        for failed in 0..=5 {
            numa.nr_balance_failed = failed;
            // More than cache_nice_tries + 2 = 4 failures.
            let push = failed > 4;
            assert_eq!(
                need_active_balance(Linux510, &numa, &imbalance(Migration::Task)),
                push
            );
            assert_eq!(
                need_active_balance(Linux510, &numa, &imbalance(Migration::Load)),
                push
            );
            assert_eq!(
                need_active_balance(Linux7, &numa, &imbalance(Migration::Task)),
                push
            );
            // 6.19 pushes only to even out the number of tasks.
            assert!(!need_active_balance(
                Linux7,
                &numa,
                &imbalance(Migration::Load)
            ));
        }
    }
}
