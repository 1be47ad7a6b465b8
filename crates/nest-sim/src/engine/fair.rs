//! The fair scheduler's virtual runtime and wakeup preemption, for the
//! `linux-5.10` model (CFS, kernel/sched/fair.c of v5.10), under every
//! policy that uses the engine's run queues (the Linux model, S_local,
//! S_move; not a policy that owns its queues).
//!
//! Every task is nice 0: its `vruntime` advances 1:1 with the time it runs
//! (`update_curr()`, `calc_delta_fair()` of weight 1024). It is kept as an
//! offset from the task's total run time, so running costs nothing to
//! account; each CPU's `min_vruntime` is brought up to date
//! (`update_min_vruntime()`) only before its set of tasks changes (a task
//! joins it, or its current task stops), and read lazily otherwise.
//!
//! - A task that wakes on another CPU than the one whose run queue it last
//!   joined keeps its lag: the old CPU's `min_vruntime` is taken off
//!   (`migrate_task_rq_fair()`) and the new one's added
//!   (`enqueue_entity()`); then `place_entity()` (not initial) lifts a long
//!   sleeper to `min_vruntime - sysctl_sched_latency / 2`
//!   (`GENTLE_FAIR_SLEEPERS`). A task moved while waiting (load
//!   balancing) keeps its lag the same way (`dequeue_entity()`,
//!   `enqueue_entity()`).
//! - A new task (`task_fork_fair()`) starts at the parent's `vruntime`, or
//!   later at `min_vruntime + sched_vslice()` of the parent's CPU
//!   (`place_entity()` initial, `START_DEBIT`), relative to that CPU's
//!   `min_vruntime`, and is renormalised on the CPU it is placed on.
//! - A task woken or forked onto a busy CPU preempts its current task
//!   (`check_preempt_wakeup()`) when the current task's `vruntime` exceeds
//!   its own by more than `sysctl_sched_wakeup_granularity`
//!   (`wakeup_preempt_entity()`): it goes to the head of the run queue
//!   (`set_next_buddy()`, and it is the leftmost entity) and the current
//!   task to its tail, as the tick's preemption puts it. When the current
//!   task is the waker itself, in the middle of its program's operations,
//!   the preemption waits until it next computes (`resched_curr()` sets
//!   `TIF_NEED_RESCHED`, acted on when the waker returns to user space).
//!
//! The run queue stays FIFO otherwise (`pick_next_entity()` would take
//! the leftmost `vruntime`): the engine's tick preemption (a fixed slice,
//! then the tail of the queue) already shares a CPU equally between
//! nice-0 tasks, as `vruntime` order does, and ordering the queue by
//! `vruntime` without 5.10's tick rule (`check_preempt_tick()`, a slice of
//! `sched_slice()`) would mix two models. What wakeup preemption changes
//! and FIFO misses is who runs first after a wakeup, which this rule
//! gives.
//!
//! Left out: group scheduling (`find_matching_se()`: every task is in the
//! root group), `NEXT_BUDDY`/`LAST_BUDDY` (off, or only with 8+ tasks on a
//! CPU), `sysctl_sched_child_runs_first` (0), SCHED_IDLE/BATCH tasks, and
//! the staleness of a remote CPU's `min_vruntime` at a remote wakeup (read
//! here as of now; the kernel's is at most a tick old).

use nest_trace::Cpu;

use super::Sim;
use super::kernel::{Kernel, TaskPhase};

/// `sysctl_sched_latency`, `sysctl_sched_min_granularity` and
/// `sysctl_sched_wakeup_granularity` before scaling, ns.
const LATENCY_NS: i64 = 6_000_000;
const MIN_GRANULARITY_NS: i64 = 750_000;
const WAKEUP_GRANULARITY_NS: i64 = 1_000_000;
/// `sched_nr_latency`: `LATENCY_NS / MIN_GRANULARITY_NS`, rounded up.
const NR_LATENCY: i64 = 8;

/// The fair scheduler's tunables on a machine (`update_sysctl()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CfsTunables {
    pub latency_ns: i64,
    pub min_granularity_ns: i64,
    pub wakeup_granularity_ns: i64,
}

impl CfsTunables {
    /// The tunables scaled for `nr_cpus` online CPUs.
    pub(crate) fn for_cpus(nr_cpus: usize) -> Self {
        let factor = sysctl_factor(nr_cpus);
        Self {
            latency_ns: LATENCY_NS * factor,
            min_granularity_ns: MIN_GRANULARITY_NS * factor,
            wakeup_granularity_ns: WAKEUP_GRANULARITY_NS * factor,
        }
    }

    /// `__sched_period()`: the period over which `nr_running` tasks each
    /// run once.
    fn period(&self, nr_running: i64) -> i64 {
        if nr_running > NR_LATENCY {
            nr_running * self.min_granularity_ns
        } else {
            self.latency_ns
        }
    }

    /// `sched_vslice()` of a nice-0 task joining a run queue of
    /// `nr_running` nice-0 tasks (`sched_slice()` with `!se->on_rq`).
    fn vslice(&self, nr_running: i64) -> i64 {
        let nr = nr_running + 1;
        self.period(nr) / nr
    }
}

/// `get_update_sysctl_factor()` under the default
/// `SCHED_TUNABLESCALING_LOG`: `1 + ilog2(min(nr_cpus, 8))`.
pub(crate) fn sysctl_factor(nr_cpus: usize) -> i64 {
    let cpus = nr_cpus.clamp(1, 8) as u32;
    1 + i64::from(cpus.ilog2())
}

impl Kernel {
    /// `sum_exec_runtime` of `task`: its running time up to now.
    fn sum_exec(&self, task: u32) -> i64 {
        let t = &self.tasks[task as usize];
        let running = t.run_start.map_or(0, |s| self.now - s);
        (t.stats.run_ns + running) as i64
    }

    /// `se.vruntime` of `task` now.
    pub(crate) fn vruntime(&self, task: u32) -> i64 {
        self.tasks[task as usize].vruntime + self.sum_exec(task)
    }

    /// Sets `se.vruntime` of `task` now, on `cpu`'s timeline.
    fn set_vruntime(&mut self, task: u32, vruntime: i64, cpu: Cpu) {
        let base = vruntime - self.sum_exec(task);
        let t = &mut self.tasks[task as usize];
        t.vruntime = base;
        t.vruntime_rq = cpu;
    }

    /// `cfs_rq->min_vruntime` of `cpu` as `update_min_vruntime()` would
    /// leave it now: never backwards, else the least of the current
    /// task's and the waiting tasks' `vruntime`.
    pub(crate) fn min_vruntime(&self, cpu: Cpu) -> i64 {
        let c = &self.cpus[cpu as usize];
        let curr = c.curr.map(|t| self.vruntime(t));
        let left = c.queue.iter().map(|&t| self.vruntime(t)).min();
        match curr.into_iter().chain(left).min() {
            Some(v) => c.min_vruntime.max(v),
            None => c.min_vruntime,
        }
    }

    /// `update_min_vruntime()` on `cpu`: before its tasks change.
    pub(crate) fn update_min_vruntime(&mut self, cpu: Cpu) {
        self.cpus[cpu as usize].min_vruntime = self.min_vruntime(cpu);
    }

    /// A blocked `task` wakes up on `cpu`: `migrate_task_rq_fair()` if it
    /// changes CPU, then `place_entity(cfs_rq, se, 0)`.
    pub(crate) fn place_woken(&mut self, task: u32, cpu: Cpu) {
        let Some(cfs) = self.cfs else { return };
        let min = self.min_vruntime(cpu);
        let from = self.tasks[task as usize].vruntime_rq;
        let mut v = self.vruntime(task);
        if from != cpu {
            v += min - self.min_vruntime(from);
        }
        // Sleeps up to half a latency do not count (GENTLE_FAIR_SLEEPERS).
        v = v.max(min - cfs.latency_ns / 2);
        self.set_vruntime(task, v, cpu);
    }

    /// `wakeup_preempt_entity(curr, se) == 1` for `cpu`'s current task and
    /// `task`: the current task's `vruntime` exceeds `task`'s by more than
    /// the wakeup granularity.
    pub(crate) fn wakeup_preempts(&self, task: u32, cpu: Cpu) -> bool {
        let (Some(cfs), Some(curr)) = (self.cfs, self.cpus[cpu as usize].curr) else {
            return false;
        };
        self.vruntime(curr) - self.vruntime(task) > cfs.wakeup_granularity_ns
    }
}

impl Sim<'_> {
    /// `enqueue_entity()`'s renormalisation: `task` joins `cpu`'s run
    /// queue (or runs there at once), coming from another CPU's timeline
    /// (a move while waiting, or a new task placed elsewhere), whose
    /// `min_vruntime` its caller brought up to date.
    pub(super) fn cfs_enqueue(&mut self, task: u32, cpu: Cpu) {
        // update_curr(): the CPU's min_vruntime as of now, before it changes.
        self.k.update_min_vruntime(cpu);
        let from = self.k.tasks[task as usize].vruntime_rq;
        if from != cpu {
            let lag = self.k.vruntime(task) - self.k.cpus[from as usize].min_vruntime;
            let v = lag + self.k.cpus[cpu as usize].min_vruntime;
            self.k.set_vruntime(task, v, cpu);
        }
    }

    /// `task_fork_fair()`: a new `task` forked by `parent` on `cpu`.
    pub(super) fn place_new(&mut self, task: u32, parent: Option<u32>, cpu: Cpu) {
        let Some(cfs) = self.k.cfs else { return };
        self.k.update_min_vruntime(cpu);
        let nr_running = i64::from(self.k.nr_running(cpu));
        let mut v = self.k.cpus[cpu as usize].min_vruntime + cfs.vslice(nr_running);
        // The parent is `cfs_rq->curr` when it forks from a program.
        if let Some(p) = parent.filter(|&p| self.k.cpus[cpu as usize].curr == Some(p)) {
            v = v.max(self.k.vruntime(p));
        }
        self.k.set_vruntime(task, v, cpu);
    }

    /// `check_preempt_wakeup()`: `task`, just woken or forked into a run
    /// queue, preempts the CPU's current task if that one's `vruntime`
    /// exceeds its own by more than the wakeup granularity.
    pub(super) fn check_preempt_wakeup(&mut self, task: u32) {
        let TaskPhase::Queued(cpu) = self.k.task_phase(task) else {
            return;
        };
        let c = &self.k.cpus[cpu as usize];
        // test_tsk_need_resched(curr): a preemption is already pending.
        if c.switching || c.need_resched || !self.k.wakeup_preempts(task, cpu) {
            return;
        }
        // set_next_buddy(): the woken task runs next.
        let c = &mut self.k.cpus[cpu as usize];
        if let Some(i) = c.queue.iter().rposition(|&t| t == task) {
            c.queue.remove(i);
            c.queue.push_front(task);
        }
        if c.advancing {
            c.need_resched = true;
        } else {
            self.preempt(cpu);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::SimConfig;
    use crate::policy::fork_balance::LinuxVersion;
    use crate::workload::builtin;
    use crate::{Governor, Machine};

    const MS: i64 = 1_000_000;

    /// The 16-CPU guest's kernel (tunables x4) under `version`, with a hog
    /// on CPU 2 that has run 100 ms (its vruntime, and CPU 2's
    /// min_vruntime) and a blocked task that last ran on CPU 2 with
    /// vruntime `sleeper_vruntime`; returns the kernel and the sleeper.
    fn hog_and_sleeper(version: LinuxVersion, sleeper_vruntime: i64) -> (Kernel, u32) {
        let m = Machine::builtin("test-guest-2s").unwrap();
        let w = builtin::build("configure", m.nr_cores()).unwrap();
        let mut cfg = SimConfig::new(m, Governor::Performance, 1);
        cfg.linux = version;
        let mut k = Kernel::new(cfg, &w);
        if version == LinuxVersion::Linux510 {
            k.cfs = Some(CfsTunables::for_cpus(16));
        }
        k.now = 200 * MS as u64;
        let hog = k.test_task(2, 1.0);
        k.tasks[hog as usize].stats.run_ns = 100 * MS as u64;
        k.tasks[hog as usize].phase = TaskPhase::Running(2);
        k.cpus[2].curr = Some(hog);
        k.update_min_vruntime(2);
        let sleeper = k.test_task(2, 0.1);
        k.tasks[sleeper as usize].vruntime = sleeper_vruntime;
        (k, sleeper)
    }

    #[test]
    fn a_long_sleeper_preempts_a_hog() {
        let (mut k, sleeper) = hog_and_sleeper(LinuxVersion::Linux510, 20 * MS);
        assert_eq!(k.min_vruntime(2), 100 * MS);
        k.place_woken(sleeper, 2);
        // Lifted to min_vruntime - latency / 2: 12 ms behind the hog.
        assert_eq!(k.vruntime(sleeper), 88 * MS);
        assert!(k.wakeup_preempts(sleeper, 2));
    }

    #[test]
    fn a_brief_sleeper_that_ran_a_lot_does_not_preempt() {
        // 1 ms behind the hog: within the wakeup granularity (4 ms).
        let (mut k, sleeper) = hog_and_sleeper(LinuxVersion::Linux510, 99 * MS);
        k.place_woken(sleeper, 2);
        assert_eq!(k.vruntime(sleeper), 99 * MS);
        assert!(!k.wakeup_preempts(sleeper, 2));
        // 5 ms behind: beyond it.
        let (mut k, sleeper) = hog_and_sleeper(LinuxVersion::Linux510, 95 * MS);
        k.place_woken(sleeper, 2);
        assert!(k.wakeup_preempts(sleeper, 2));
    }

    #[test]
    fn a_wakeup_on_another_cpu_keeps_the_lag() {
        let (mut k, sleeper) = hog_and_sleeper(LinuxVersion::Linux510, 97 * MS);
        // CPU 5 idle, its min_vruntime far ahead.
        k.cpus[5].min_vruntime = 1_000 * MS;
        k.place_woken(sleeper, 5);
        assert_eq!(k.vruntime(sleeper), 997 * MS);
        assert_eq!(k.tasks[sleeper as usize].vruntime_rq, 5);
    }

    #[test]
    fn linux_7_has_no_wakeup_preemption() {
        let (mut k, sleeper) = hog_and_sleeper(LinuxVersion::Linux7, 20 * MS);
        k.place_woken(sleeper, 2);
        assert_eq!(k.vruntime(sleeper), 20 * MS);
        assert!(!k.wakeup_preempts(sleeper, 2));
    }

    #[test]
    fn tunables_scale_with_log_of_cpus() {
        let factors: Vec<i64> = [1, 2, 3, 4, 7, 8, 16, 160]
            .iter()
            .map(|&n| sysctl_factor(n))
            .collect();
        assert_eq!(factors, [1, 2, 2, 3, 3, 4, 4, 4]);
        let t = CfsTunables::for_cpus(16);
        assert_eq!(t.latency_ns, 24_000_000);
        assert_eq!(t.min_granularity_ns, 3_000_000);
        assert_eq!(t.wakeup_granularity_ns, 4_000_000);
        // Alone on a CPU: a whole latency; beyond sched_nr_latency tasks,
        // the minimum granularity.
        assert_eq!(t.vslice(0), 24_000_000);
        assert_eq!(t.vslice(3), 6_000_000);
        assert_eq!(t.vslice(20), 3_000_000);
    }
}
