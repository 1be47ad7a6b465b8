//! Where the fair scheduler puts a task that wakes up: the wakeup half of
//! `select_task_rq_fair()` in kernel/sched/fair.c, function by function,
//! per [`LinuxVersion`] where 5.10 and current kernels differ.
//!
//! `record_wakee()` and `wake_wide()` decide whether the waker's CPU is a
//! candidate at all (`want_affine`); if so and it is not `prev`,
//! `wake_affine()` picks the target between the two; then
//! `select_idle_sibling()` looks for an idle CPU in the target's LLC. No
//! domain has `SD_BALANCE_WAKE`, so a wakeup never takes the slow path
//! (`find_idlest_cpu()`): a `wake_wide()` wakeup stays with `prev`'s LLC
//! (`select_idle_sibling(p, prev, prev)`).
//!
//! Left out, as the simulator has none of it: energy-aware placement and
//! the asymmetric-capacity paths (`find_energy_efficient_cpu()`,
//! `select_idle_capacity()`, `asym_fits_cpu()`: the machines are
//! symmetric), `SCHED_IDLE` tasks (`sched_idle_cpu()`), per-CPU kthreads
//! (the kworker stacking rule), clusters
//! (`cpus_share_resources()`), `WF_CURRENT_CPU`, delayed dequeue (6.12+:
//! no task is ever delayed here) and NUMA distances beyond
//! `node_reclaim_distance` (every domain has `SD_WAKE_AFFINE`).
//!
//! CPU affinity: the waker's CPU is a candidate only if the task may run
//! there (`want_affine`), and every scan looks at the CPUs it may run on
//! (`p->cpus_ptr`); `prev` is always one of them.

use nest_trace::Cpu;

use super::ext_idle::core_free;
use super::fork_balance::LinuxVersion;
use super::{Ctx, TaskId};

/// What the fair scheduler keeps per task for wakeups and load balancing
/// (`task_struct`, `sched_entity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FairTask {
    /// `wakee_flips`: how often this task, waking others, changed wakee;
    /// halved once a second.
    pub wakee_flips: u32,
    /// `wakee_flip_decay_ts`, ns.
    pub wakee_flip_decay_ts: u64,
    /// `last_wakee`: the task this one woke last.
    pub last_wakee: Option<TaskId>,
    /// `recent_used_cpu`: a CPU the task used recently, tried when idle.
    pub recent_used_cpu: Cpu,
    /// `se.exec_start` of a task not running: when it last stopped
    /// running, ns (`None`: never ran, the kernel's 0). Kept only when the
    /// engine balances load, its one reader.
    pub exec_start: Option<u64>,
}

impl FairTask {
    /// A new task forked on `cpu` (`wake_up_new_task()` sets
    /// `recent_used_cpu` to the parent's CPU).
    pub fn new(cpu: Cpu) -> Self {
        Self {
            wakee_flips: 0,
            wakee_flip_decay_ts: 0,
            last_wakee: None,
            recent_used_cpu: cpu,
            exec_start: None,
        }
    }
}

/// One wakeup: `task` last ran on `prev`; `waker` is the CPU it is woken
/// from (`smp_processor_id()`), `None` for a timer (taken as `prev`, where
/// the task armed it); `sync` is `WF_SYNC`.
#[derive(Clone, Copy, Debug)]
pub struct Wakeup {
    pub task: TaskId,
    pub prev: Cpu,
    pub waker: Option<Cpu>,
    pub sync: bool,
}

/// `HZ` jiffies: the period of the `wakee_flips` decay.
const FLIP_DECAY_NS: u64 = 1_000_000_000;

/// `select_task_rq_fair()` for a wakeup (`WF_TTWU`).
pub fn select_task_rq_fair(cx: &mut Ctx, w: Wakeup, version: LinuxVersion) -> Cpu {
    let this = w.waker.unwrap_or(w.prev);
    // `current`: the task running on the waker's CPU (none for a timer).
    let current = w.waker.and_then(|c| cx.current(c));
    let mut want_affine = true;
    if let Some(curr) = current {
        record_wakee(cx, curr, w.task);
        want_affine = !wake_wide(cx, curr, w.task, this);
    }
    want_affine &= cx.task_allowed(w.task, this);
    let mut target = w.prev;
    if want_affine && this != w.prev {
        target = wake_affine(cx, w, current, this);
    }
    let cpu = select_idle_sibling(cx, w, target, version);
    // 5.10 only (removed in 5.12, which sets `p->recent_used_cpu = prev`
    // in select_idle_sibling() instead): the waker remembers its CPU.
    if let (LinuxVersion::Linux510, true, Some(curr)) = (version, want_affine, current) {
        cx.fair_task(curr).recent_used_cpu = this;
    }
    cpu
}

/// `record_wakee()`: `waker` woke `wakee`; count a flip when it wakes
/// another task than last time, halving the count once a second.
fn record_wakee(cx: &mut Ctx, waker: TaskId, wakee: TaskId) {
    let now = cx.now();
    let f = cx.fair_task(waker);
    if now > f.wakee_flip_decay_ts + FLIP_DECAY_NS {
        f.wakee_flips >>= 1;
        f.wakee_flip_decay_ts = now;
    }
    if f.last_wakee != Some(wakee) {
        f.last_wakee = Some(wakee);
        f.wakee_flips += 1;
    }
}

/// `wake_wide()`: is this a one-to-many wakeup pattern (the waker and the
/// wakee switch partners often, by more than the LLC size) that should
/// spread rather than pull the wakee to the waker?
fn wake_wide(cx: &mut Ctx, waker: TaskId, wakee: TaskId, this: Cpu) -> bool {
    let factor = cx.llc_cpus(cx.llc(this)).len() as u32; // sd_llc_size
    let a = cx.fair_task(waker).wakee_flips;
    let b = cx.fair_task(wakee).wakee_flips;
    let (master, slave) = (a.max(b), a.min(b));
    !(slave < factor || master < slave * factor)
}

/// `wake_affine()`: the waker's CPU `this` if `wake_affine_idle()` or
/// else `wake_affine_weight()` choose it, else `prev`.
fn wake_affine(cx: &Ctx, w: Wakeup, current: Option<TaskId>, this: Cpu) -> Cpu {
    // `sync`: WF_SYNC from a waker task (an exiting one never passes it).
    let sync_waker = current.filter(|_| w.sync);
    let target = wake_affine_idle(cx, this, w.prev, sync_waker.is_some())
        .or_else(|| wake_affine_weight(cx, w, this, sync_waker));
    if target == Some(this) { this } else { w.prev }
}

/// `cpus_share_cache()`.
fn share_cache(cx: &Ctx, a: Cpu, b: Cpu) -> bool {
    cx.llc(a) == cx.llc(b)
}

/// `wake_affine_idle()`: an idle waker CPU sharing `prev`'s cache (then
/// `prev` if idle too); the sync rule (the waker, about to sleep, is alone
/// on its CPU: take its CPU); an idle `prev`; else no opinion.
fn wake_affine_idle(cx: &Ctx, this: Cpu, prev: Cpu, sync: bool) -> Option<Cpu> {
    if cx.is_idle(this) && share_cache(cx, this, prev) {
        return Some(if cx.is_idle(prev) { prev } else { this });
    }
    if sync && cx.nr_running(this) == 1 {
        return Some(this);
    }
    cx.is_idle(prev).then_some(prev)
}

/// PELT load in the kernel's fixed point (`SCHED_CAPACITY_SCALE` = 1024
/// for a nice-0 task always runnable).
const LOAD_SCALE: f64 = 1024.0;

/// The CPU's PELT load (`cpu_load()`), also taken as its runnable average
/// (`cpu_runnable()`), in CPUs: the engine's utilisation (running time,
/// blocked tasks included) plus a full task's load for each task waiting
/// in the run queue (runnable, not running).
pub(crate) fn runnable_load(cx: &Ctx, cpu: Cpu) -> f64 {
    runnable_of(cx.util(cpu), cx.nr_running(cpu))
}

/// [`runnable_load`] of a CPU of utilisation `util` with `nr_running`
/// tasks.
pub(crate) fn runnable_of(util: f64, nr_running: u32) -> f64 {
    util + f64::from(nr_running.saturating_sub(1))
}

/// `cpu_load()` in the kernel's fixed point.
fn cpu_load(cx: &Ctx, cpu: Cpu) -> i64 {
    (runnable_load(cx, cpu) * LOAD_SCALE).round() as i64
}

/// `task_h_load()`: the task's load, approximated by its utilisation
/// (no cgroups, nice 0).
fn task_load(cx: &Ctx, task: TaskId) -> i64 {
    (cx.task_util(task) * LOAD_SCALE).round() as i64
}

/// `sd->imbalance_pct` of the lowest domain spanning `a` and `b`
/// (`sd_init()`): 110 between SMT siblings, else 117.
fn imbalance_pct(cx: &Ctx, a: Cpu, b: Cpu) -> i64 {
    if cx.core(a) == cx.core(b) { 110 } else { 117 }
}

/// `wake_affine_weight()`: the waker's CPU when its load with the wakee
/// (without the waker itself on a sync wakeup) is below `prev`'s load
/// without the wakee, `prev` favoured by half the domain's imbalance
/// (`WA_BIAS`). Capacities are equal (symmetric machines) and cancel.
fn wake_affine_weight(cx: &Ctx, w: Wakeup, this: Cpu, sync_waker: Option<TaskId>) -> Option<Cpu> {
    let mut this_eff = cpu_load(cx, this);
    if let Some(waker) = sync_waker {
        let current_load = task_load(cx, waker);
        if current_load > this_eff {
            return Some(this);
        }
        this_eff -= current_load;
    }
    let load = task_load(cx, w.task);
    this_eff = (this_eff + load) * 100;
    let bias = 100 + (imbalance_pct(cx, this, w.prev) - 100) / 2;
    let mut prev_eff = (cpu_load(cx, w.prev) - load) * bias;
    if sync_waker.is_some() {
        // A tie stacks the wakee on the waker.
        prev_eff += 1;
    }
    (this_eff < prev_eff).then_some(this)
}

/// `sched_smt_active()`: the machine has SMT siblings.
fn smt_active(cx: &Ctx) -> bool {
    cx.smt_siblings(0).len() > 1
}

/// `select_idle_sibling()`: the target if idle; `prev` if idle and sharing
/// the target's LLC; the task's recently used CPU under the same
/// conditions; else the scans of the target's LLC; else the target.
fn select_idle_sibling(cx: &mut Ctx, w: Wakeup, target: Cpu, version: LinuxVersion) -> Cpu {
    let (task, prev) = (w.task, w.prev);
    if cx.is_idle(target) {
        return target;
    }
    if prev != target && share_cache(cx, prev, target) && cx.is_idle(prev) {
        return prev;
    }
    if let Some(cpu) = recent_used_cpu(cx, task, prev, target, version) {
        return cpu;
    }
    let found = match version {
        LinuxVersion::Linux510 => scan_510(cx, task, w.waker.unwrap_or(prev), target),
        LinuxVersion::Linux7 => scan_7(cx, task, prev, target),
    };
    found.unwrap_or(target)
}

/// The `recent_used_cpu` rule: the task's recently used CPU, if it is
/// neither `prev` nor the target, shares the target's LLC and is idle.
/// 5.10 then replaces it with `prev`; since 5.12 `prev` replaces it at
/// every check, taken or not.
fn recent_used_cpu(
    cx: &mut Ctx,
    task: TaskId,
    prev: Cpu,
    target: Cpu,
    version: LinuxVersion,
) -> Option<Cpu> {
    let recent = cx.fair_task(task).recent_used_cpu;
    let usable = recent != prev
        && recent != target
        && share_cache(cx, recent, target)
        && cx.is_idle(recent)
        && cx.task_allowed(task, recent);
    if version == LinuxVersion::Linux7 || usable {
        cx.fair_task(task).recent_used_cpu = prev;
    }
    usable.then_some(recent)
}

/// Linux 5.10's scans: `select_idle_core()`, `select_idle_cpu()` (on
/// behalf of the waking CPU `this`), then `select_idle_smt()` on the
/// target.
fn scan_510(cx: &mut Ctx, task: TaskId, this: Cpu, target: Cpu) -> Option<Cpu> {
    select_idle_core_510(cx, task, target)
        .or_else(|| select_idle_cpu_510(cx, task, this, target))
        .or_else(|| select_idle_smt(cx, task, target))
}

/// Linux 5.12 and later: with no idle core hinted, an idle SMT sibling of
/// `prev` if `prev` shares the target's LLC (`select_idle_smt()`, back
/// since 5.13); then `select_idle_cpu()`, which looks for idle cores
/// itself when the hint says there are some (merged in 5.12).
fn scan_7(cx: &mut Ctx, task: TaskId, prev: Cpu, target: Cpu) -> Option<Cpu> {
    let has_idle_core = smt_active(cx) && cx.has_idle_cores(cx.llc(target));
    if smt_active(cx)
        && !has_idle_core
        && share_cache(cx, prev, target)
        && let Some(cpu) = select_idle_smt(cx, task, prev)
    {
        return Some(cpu);
    }
    select_idle_cpu_7(cx, task, target, has_idle_core)
}

/// `select_idle_smt()`: the first idle SMT sibling of `cpu` the task may
/// run on (5.10: of the target; since 5.13: of `prev`, skipping `prev`,
/// which is busy here).
fn select_idle_smt(cx: &Ctx, task: TaskId, cpu: Cpu) -> Option<Cpu> {
    cx.smt_siblings(cpu)
        .iter()
        .copied()
        .find(|&c| c != cpu && cx.is_idle(c) && cx.task_allowed(task, c))
}

/// The CPUs of `cpu`'s LLC that `task` may run on (`cpumask_and(cpus,
/// sched_domain_span(sd), p->cpus_ptr)`) in `for_each_cpu_wrap(cpu, cpus,
/// start)` order: ascending from `start`, wrapping.
fn llc_from<'a>(cx: &'a Ctx, task: TaskId, cpu: Cpu, start: Cpu) -> impl Iterator<Item = Cpu> + 'a {
    let llc = cx.llc_cpus(cx.llc(cpu));
    let split = llc.partition_point(|&c| c < start);
    llc[split..]
        .iter()
        .chain(&llc[..split])
        .copied()
        .filter(move |&c| cx.task_allowed(task, c))
}

/// Was a sibling of `cpu` that `task` may run on met before it in a
/// wrapping scan from `start` (the kernel then removed the whole core from
/// the scan's mask)?
fn core_seen(cx: &Ctx, task: TaskId, cpu: Cpu, start: Cpu) -> bool {
    let n = cx.nr_cpus();
    let dist = |c: Cpu| (c + n - start % n) % n;
    cx.smt_siblings(cpu)
        .iter()
        .any(|&s| dist(s) < dist(cpu) && cx.task_allowed(task, s))
}

/// Are all SMT threads of `cpu`'s core idle?
fn core_idle(cx: &Ctx, cpu: Cpu) -> bool {
    core_free(cx, cpu, &|c| cx.is_idle(c))
}

/// 5.10's `select_idle_core()`: when the LLC's hint says it may have an
/// idle core, the first fully idle core from the target on (its CPU met
/// first); finding none clears the hint.
fn select_idle_core_510(cx: &mut Ctx, task: TaskId, target: Cpu) -> Option<Cpu> {
    let llc = cx.llc(target);
    if !smt_active(cx) || !cx.has_idle_cores(llc) {
        return None;
    }
    let found = llc_from(cx, task, target, target)
        .find(|&c| !core_seen(cx, task, c, target) && core_idle(cx, c));
    if found.is_none() {
        cx.clear_idle_cores(llc);
    }
    found
}

/// `sd->avg_scan_cost` of 5.10's `SIS_PROP`, which the kernel measures
/// (the time of a scan); assumed constant here.
const AVG_SCAN_COST_NS: u64 = 1000;

/// 5.10's `select_idle_cpu()` with `SIS_PROP`: scan the LLC from the
/// target for an idle CPU, at most `nr - 1` CPUs where `nr` is the LLC
/// size times the waking CPU's (`this_rq()`) average idle time over 512,
/// divided by the average scan cost, and at least 4.
fn select_idle_cpu_510(cx: &Ctx, task: TaskId, this: Cpu, target: Cpu) -> Option<Cpu> {
    let avg_idle = cx.avg_idle(this) / 512;
    let avg_cost = AVG_SCAN_COST_NS + 1;
    let span_avg = cx.llc_cpus(cx.llc(target)).len() as u64 * avg_idle;
    let nr = if span_avg > 4 * avg_cost {
        span_avg / avg_cost
    } else {
        4
    };
    let limit = usize::try_from(nr - 1).unwrap_or(usize::MAX);
    llc_from(cx, task, target, target)
        .take(limit)
        .find(|&c| cx.is_idle(c))
}

/// `SIS_UTIL`'s `sd_llc_shared->nr_idle_scan` as `update_idle_cpu_scan()`
/// computes it (6.0+) from the LLC's summed utilisation: the LLC size
/// times `1 - (x * 117 / 100)^2`, `x` the LLC's average utilisation, so
/// nothing at all from 85% on. The kernel refreshes it at the LLC
/// domain's periodic load balance; the model computes it at each wakeup.
fn nr_idle_scan(cx: &Ctx, llc: u32) -> u64 {
    const SCALE: u64 = 1024; // SCHED_CAPACITY_SCALE
    const PCT: u64 = 117; // the LLC domain's imbalance_pct
    let cpus = cx.llc_cpus(llc);
    let weight = cpus.len() as u64;
    let sum_util: u64 = cpus
        .iter()
        .map(|&c| ((cx.util(c) * SCALE as f64) as u64).min(SCALE))
        .sum();
    let x = sum_util / weight;
    let tmp = (x * x * PCT * PCT / (10_000 * SCALE)).min(SCALE);
    (SCALE - tmp) * weight / SCALE
}

/// Linux 6.0+'s `select_idle_cpu()`: nothing if `SIS_UTIL` allows no
/// scan; with the idle-core hint, every core of the LLC from target+1
/// (`select_idle_core()`: the first fully idle core, else the first idle
/// CPU met; finding no idle core clears the hint); without it, at most
/// `nr_idle_scan` CPUs from target+1 for an idle one.
fn select_idle_cpu_7(cx: &mut Ctx, task: TaskId, target: Cpu, has_idle_core: bool) -> Option<Cpu> {
    let llc = cx.llc(target);
    let nr = nr_idle_scan(cx, llc);
    if nr == 0 {
        return None;
    }
    let start = target + 1;
    if !has_idle_core {
        let limit = usize::try_from(nr).unwrap_or(usize::MAX);
        return llc_from(cx, task, target, start)
            .take(limit)
            .find(|&c| cx.is_idle(c));
    }
    let mut idle_cpu = None;
    for c in llc_from(cx, task, target, start) {
        if core_seen(cx, task, c, start) {
            continue;
        }
        if core_idle(cx, c) {
            return Some(c);
        }
        idle_cpu = idle_cpu.or_else(|| first_idle_thread(cx, task, c));
    }
    cx.clear_idle_cores(llc);
    idle_cpu
}

/// The idle CPU `select_idle_core()` remembers from a busy core: its
/// first idle thread in CPU order that the task may run on.
fn first_idle_thread(cx: &Ctx, task: TaskId, cpu: Cpu) -> Option<Cpu> {
    cx.smt_siblings(cpu)
        .iter()
        .copied()
        .find(|&c| cx.is_idle(c) && cx.task_allowed(task, c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Kernel;
    use crate::policy::testkit::{busy, guest, guest_busy_but};
    use LinuxVersion::{Linux7, Linux510};

    const BOTH: [LinuxVersion; 2] = [Linux510, Linux7];

    /// Where `task`, last on `prev`, goes when woken from `waker`.
    fn wake(
        k: &mut Kernel,
        v: LinuxVersion,
        task: TaskId,
        prev: Cpu,
        waker: Option<Cpu>,
        sync: bool,
    ) -> Cpu {
        let w = Wakeup {
            task,
            prev,
            waker,
            sync,
        };
        select_task_rq_fair(&mut Ctx { k }, w, v)
    }

    #[test]
    fn a_sync_wakeup_from_a_waker_alone_on_its_cpu_stacks_there() {
        for v in BOTH {
            // Every CPU busy; the wakee last ran on CPU 4 (other socket).
            let mut k = guest_busy_but(&[], 1.0);
            let wakee = k.test_task(4, 0.2);
            // wake_affine_idle(): sync and one task on the waker's CPU.
            assert_eq!(wake(&mut k, v, wakee, 4, Some(0), true), 0, "{v:?}");
            // Not sync: wake_affine_weight() finds prev no busier: prev.
            assert_eq!(wake(&mut k, v, wakee, 4, Some(0), false), 4, "{v:?}");
            // Sync, but another task waits on the waker's CPU: its load
            // without the waker still outweighs prev's: prev.
            let other = k.test_task(0, 1.0);
            k.cpus[0].queue.push_back(other);
            assert_eq!(wake(&mut k, v, wakee, 4, Some(0), true), 4, "{v:?}");
        }
    }

    #[test]
    fn wake_affine_weight_moves_the_wakee_when_prev_is_more_loaded() {
        for v in BOTH {
            // Equal loads: prev, favoured by WA_BIAS.
            let mut k = guest_busy_but(&[], 1.0);
            let wakee = k.test_task(4, 0.2);
            assert_eq!(wake(&mut k, v, wakee, 4, Some(0), false), 4, "{v:?}");
            // Two more tasks wait on prev: its load (3 CPUs' worth) is
            // above the waker CPU's with the wakee.
            for _ in 0..2 {
                let t = k.test_task(4, 1.0);
                k.cpus[4].queue.push_back(t);
            }
            assert_eq!(wake(&mut k, v, wakee, 4, Some(0), false), 0, "{v:?}");
        }
    }

    #[test]
    fn wake_wide_leaves_a_task_that_flips_wakees_often_on_prevs_side() {
        for v in BOTH {
            let mut k = guest_busy_but(&[], 1.0);
            let wakee = k.test_task(4, 0.2);
            let waker = k.cpus[0].curr.unwrap();
            // The waker switched wakees 80 times, the wakee 7 times: the
            // LLC size (8) is above the smaller count; not wide: sync rule.
            k.tasks[waker as usize].fair.wakee_flips = 80;
            k.tasks[wakee as usize].fair.wakee_flips = 7;
            assert_eq!(wake(&mut k, v, wakee, 4, Some(0), true), 0, "{v:?}");
            // 8 flips for the wakee and 81 > 8 * 8 for the waker: wide, so
            // no wake_affine(): prev's LLC.
            k.tasks[wakee as usize].fair.wakee_flips = 8;
            k.tasks[waker as usize].fair.last_wakee = None;
            assert_eq!(wake(&mut k, v, wakee, 4, Some(0), true), 4, "{v:?}");
        }
    }

    #[test]
    fn record_wakee_counts_changes_of_wakee_and_halves_them_each_second() {
        let mut k = guest();
        let (waker, a, b) = (
            k.test_task(0, 0.5),
            k.test_task(1, 0.5),
            k.test_task(2, 0.5),
        );
        k.tasks[waker as usize].fair.wakee_flips = 80;
        k.now = 1_500_000_000;
        let mut cx = Ctx { k: &mut k };
        record_wakee(&mut cx, waker, a); // 1.5 s after the last decay
        assert_eq!(cx.fair_task(waker).wakee_flips, 41);
        record_wakee(&mut cx, waker, a); // same wakee: no flip
        assert_eq!(cx.fair_task(waker).wakee_flips, 41);
        record_wakee(&mut cx, waker, b);
        assert_eq!(cx.fair_task(waker).wakee_flips, 42);
        assert_eq!(cx.fair_task(waker).last_wakee, Some(b));
    }

    #[test]
    fn an_idle_target_or_an_idle_prev_in_its_llc_is_taken() {
        for v in BOTH {
            let mut k = guest_busy_but(&[1, 5], 1.0);
            let wakee = k.test_task(1, 0.2);
            // A timer wakeup: the target is prev, idle.
            assert_eq!(wake(&mut k, v, wakee, 1, None, false), 1, "{v:?}");
            // Sync from CPU 0: target 0 (busy); prev 1 is idle and shares
            // its LLC: prev.
            assert_eq!(wake(&mut k, v, wakee, 1, Some(0), true), 1, "{v:?}");
        }
    }

    #[test]
    fn the_recently_used_cpu_is_taken_when_idle_and_replaced_by_prev() {
        for v in BOTH {
            // LLC 0 half busy: CPUs 2 and 3 idle; a timer wakeup on busy
            // prev 1 would scan from 1 or 2 and take 2.
            let mut k = guest_busy_but(&[2, 3], 0.5);
            k.has_idle_cores[0] = false;
            let wakee = k.test_task(1, 0.2);
            k.tasks[wakee as usize].fair.recent_used_cpu = 3;
            assert_eq!(wake(&mut k, v, wakee, 1, None, false), 3, "{v:?}");
            assert_eq!(k.tasks[wakee as usize].fair.recent_used_cpu, 1);
            // A busy recently used CPU: the scan decides. Linux 5.10 keeps
            // the recent CPU, 5.12+ replaces it with prev all the same.
            k.tasks[wakee as usize].fair.recent_used_cpu = 9;
            assert_eq!(wake(&mut k, v, wakee, 1, None, false), 2, "{v:?}");
            let recent = if v == Linux510 { 9 } else { 1 };
            assert_eq!(k.tasks[wakee as usize].fair.recent_used_cpu, recent);
        }
    }

    #[test]
    fn the_idle_core_hint_makes_the_scan_prefer_a_whole_idle_core() {
        for v in BOTH {
            // LLC 0: CPU 2 idle (its sibling 10 busy), core 3/11 idle.
            let mut k = guest_busy_but(&[2, 3, 11], 0.5);
            let wakee = k.test_task(1, 0.2);
            assert!(k.has_idle_cores[0]);
            assert_eq!(wake(&mut k, v, wakee, 1, None, false), 3, "{v:?}");
            // Without the hint: the first idle CPU from the target (5.10)
            // or after it (5.12+).
            k.has_idle_cores[0] = false;
            assert_eq!(wake(&mut k, v, wakee, 1, None, false), 2, "{v:?}");
            // A scan that finds no idle core clears the hint.
            busy(&mut k, &[11], 0.5);
            k.has_idle_cores[0] = true;
            assert_eq!(wake(&mut k, v, wakee, 1, None, false), 2, "{v:?}");
            assert!(!k.has_idle_cores[0], "{v:?}");
        }
    }

    #[test]
    fn a_core_going_fully_idle_sets_the_hint() {
        let mut k = guest_busy_but(&[1], 0.5);
        k.has_idle_cores = vec![false; 2];
        k.update_idle_core(1); // its sibling 9 is busy
        assert!(!k.has_idle_cores[0]);
        k.cpus[9].curr = None;
        k.update_idle_core(9);
        assert!(k.has_idle_cores[0]);
        assert!(!k.has_idle_cores[1]);
    }

    #[test]
    fn an_idle_sibling_of_prev_goes_first_since_5_13_not_in_5_10() {
        // Sync from CPU 0: target 0. prev 2 busy, its sibling 10 idle;
        // CPU 1 idle too. No idle core hinted.
        let idle = [1, 10];
        for (v, want) in [(Linux7, 10), (Linux510, 1)] {
            let mut k = guest_busy_but(&idle, 0.5);
            k.has_idle_cores[0] = false;
            let wakee = k.test_task(2, 0.2);
            assert_eq!(wake(&mut k, v, wakee, 2, Some(0), true), want, "{v:?}");
        }
    }

    #[test]
    fn sis_util_scans_fewer_cpus_as_the_llc_fills_and_none_from_85_percent() {
        let at = |util: f64| {
            let mut k = guest_busy_but(&[], util);
            nr_idle_scan(&Ctx { k: &mut k }, 0)
        };
        // 8 * (1 - (x * 1.17)^2), rounded down, x in 1/1024.
        assert_eq!(
            [at(0.0), at(0.25), at(0.5), at(0.75), at(0.85)],
            [8, 7, 5, 1, 0]
        );
        // CPU 3 idle in an LLC at 7/8 utilisation: linux-7 does not scan
        // and keeps the target; 5.10's SIS_PROP (long idle periods) finds 3.
        for (v, want) in [(Linux7, 1), (Linux510, 3)] {
            let mut k = guest_busy_but(&[3], 1.0);
            k.has_idle_cores[0] = false;
            let wakee = k.test_task(1, 0.2);
            assert_eq!(wake(&mut k, v, wakee, 1, None, false), want, "{v:?}");
        }
    }

    #[test]
    fn sis_prop_scans_three_cpus_after_short_idle_periods_in_5_10() {
        // Sync from CPU 0 (target 0); CPUs 1-2 and 8 busy, 3 idle.
        let mut k = guest_busy_but(&[3, 9, 10, 11], 0.1);
        k.has_idle_cores[0] = false;
        let wakee = k.test_task(4, 0.2);
        assert_eq!(wake(&mut k, Linux510, wakee, 4, Some(0), true), 3);
        // The waker's CPU idled 10 us on average: nr = 4, so CPUs 0, 1, 2
        // only; then select_idle_smt() on the target: none idle.
        k.cpus[0].avg_idle = 10_000;
        assert_eq!(wake(&mut k, Linux510, wakee, 4, Some(0), true), 0);
        // The target's sibling idle: select_idle_smt() takes it.
        k.cpus[8].curr = None;
        assert_eq!(wake(&mut k, Linux510, wakee, 4, Some(0), true), 8);
    }
}
