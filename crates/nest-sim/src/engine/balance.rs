//! The kernel's load balancing in the engine: when it runs and how tasks
//! move (the rules it applies are `policy/load_balance.rs`). Only for
//! policies that use the engine's run queues ([`Sim::balances`]).
//!
//! - At each tick (`sched_tick()` calls `sched_balance_trigger()`, called
//!   `trigger_load_balance()` before 6.10), a busy CPU whose
//!   `rq->next_balance` has come balances its domains
//!   (`sched_balance_domains()`, `rebalance_domains()` before 6.10).
//! - Idle CPUs are tickless (NOHZ): when a busy CPU's tick finds work to
//!   spread (`nohz_balancer_kick()`: it runs two tasks, or its LLC has two
//!   busy CPUs), the first idle CPU balances on behalf of every idle CPU
//!   whose `next_balance` has come, in CPU order after itself, itself last
//!   (`kick_ilb()`, `_nohz_idle_balance()`). An idle CPU whose tick still
//!   runs would balance itself at the same jiffies; without a kick there
//!   is nothing it could pull.
//! - A CPU about to idle balances at once (`sched_balance_newidle()`,
//!   `newidle_balance()` before 6.10).
//! - Idle CPUs' PELT averages are brought up to date (their blocked load
//!   decays, departed tasks' utilisation is taken out) with every balance
//!   kick, and otherwise every 32 ms (`LOAD_AVG_PERIOD`,
//!   `nohz.next_blocked`), by a busy CPU's tick or a CPU going idle
//!   (`NOHZ_STATS_KICK`); a CPU with a tick updates its own at the tick and
//!   whenever a task is enqueued on it.

use nest_trace::{Cpu, PrevState};

use super::Sim;
use super::kernel::TaskPhase;
use crate::cpuset::CpuSet;
use crate::policy::Ctx;
use crate::policy::fork_balance::LinuxVersion;
use crate::policy::load_balance::{self as lb, CpuIdle, Domain, Imbalance};

/// Each CPU's scheduling domains and when it balances next.
#[derive(Debug, Default)]
pub(crate) struct Balancer {
    /// Every CPU's domains (`rq->sd` and its parents, bottom up), CPU
    /// after CPU: CPU `c`'s are `domains[first[c]..first[c + 1]]`.
    domains: Vec<Domain>,
    first: Vec<usize>,
    /// `rq->next_balance` per CPU, jiffies.
    next_balance: Vec<u64>,
    /// `jiffies`: ticks so far.
    jiffies: u64,
    /// `nohz.next_blocked`: when idle CPUs' PELT averages are next updated.
    next_blocked: u64,
    /// `msecs_to_jiffies(LOAD_AVG_PERIOD)`: 32 ms in jiffies, rounded up.
    blocked_period: u64,
    /// The CPUs that may have `removed_util`.
    removed_on: CpuSet,
}

impl Balancer {
    /// The domains of every CPU, with `hz` ticks a second.
    pub(crate) fn new(cx: &Ctx, hz: u32) -> Self {
        let n = cx.nr_cpus();
        let mut domains = Vec::new();
        let mut first = vec![0];
        for cpu_domains in lb::build_domains(cx, hz) {
            domains.extend(cpu_domains);
            first.push(domains.len());
        }
        Self {
            domains,
            first,
            next_balance: vec![0; n as usize],
            jiffies: 0,
            next_blocked: 0,
            blocked_period: (32 * u64::from(hz)).div_ceil(1000),
            removed_on: CpuSet::empty(n as usize),
        }
    }

    /// A tick: `jiffies` advances (`do_timer()`, before the scheduler's
    /// tick work).
    pub(crate) fn tick(&mut self) {
        self.jiffies += 1;
    }

    /// How many domains `cpu` has.
    fn levels(&self, cpu: Cpu) -> usize {
        self.first[cpu as usize + 1] - self.first[cpu as usize]
    }

    /// `cpu`'s domain at `level` (an index into its domains, bottom up).
    fn domain(&self, cpu: Cpu, level: usize) -> &Domain {
        &self.domains[self.first[cpu as usize] + level]
    }

    fn domain_mut(&mut self, cpu: Cpu, level: usize) -> &mut Domain {
        &mut self.domains[self.first[cpu as usize] + level]
    }
}

impl Sim<'_> {
    /// Does the engine balance load? Not for a policy that owns its
    /// queues: it balances through them, as sched_ext schedulers do.
    pub(crate) fn balances(&self) -> bool {
        self.k.cfg.load_balance && !self.owns_queues
    }

    /// `sched_balance_trigger()` at every CPU's tick: busy CPUs whose
    /// balance is due balance, in CPU order; then, if one of them kicks
    /// it, the NOHZ idle balancer.
    pub(crate) fn tick_balance(&mut self) {
        if !self.balances() {
            return;
        }
        let now = self.lb.jiffies;
        let mut cpu = None;
        while let Some(c) = self.k.next_cpu(cpu, true) {
            // entity_tick() updates the running task's and its CPU's PELT.
            self.update_blocked(c);
            if now >= self.lb.next_balance[c as usize] {
                self.balance_domains(c, CpuIdle::NotIdle, now);
            }
            cpu = Some(c);
        }
        if cpu.is_none() {
            return; // no tick ran to kick anything
        }
        // Every balance kick is a stats kick too; there is always blocked
        // load to update (`nohz.has_blocked`) while tasks live.
        let balance = self.nohz_kick();
        if balance || now > self.lb.next_blocked {
            if balance {
                self.nohz_idle_balance(now);
            }
            self.nohz_stats(None);
        }
    }

    /// A task with utilisation `util` left `cpu` while off its run queue:
    /// its utilisation stays in the CPU's until the CPU's next PELT update
    /// (`remove_entity_load_avg()`, from `task_dead_fair()` at exit and
    /// `migrate_task_rq_fair()` when it wakes up on another CPU).
    pub(crate) fn remove_util(&mut self, cpu: Cpu, util: f64) {
        if !self.balances() {
            return;
        }
        self.k.cpus[cpu as usize].removed_util += util;
        self.lb.removed_on.insert(cpu);
    }

    /// `update_cfs_rq_load_avg()` on `cpu`: what departed tasks left is
    /// taken out (their `cfs_rq->removed`).
    pub(crate) fn update_blocked(&mut self, cpu: Cpu) {
        self.k.cpus[cpu as usize].removed_util = 0.0;
    }

    /// The `NOHZ_STATS_KICK` part of `_nohz_idle_balance()`: every idle CPU
    /// but `newly_idle` (a CPU that goes idle and runs it itself) updates
    /// its blocked averages; the next such update is due 32 ms later.
    fn nohz_stats(&mut self, newly_idle: Option<Cpu>) {
        let k = &mut self.k;
        self.lb.removed_on.retain(|c| {
            if k.is_idle(c) && Some(c) != newly_idle {
                k.cpus[c as usize].removed_util = 0.0;
            }
            k.cpus[c as usize].removed_util != 0.0
        });
        self.lb.next_blocked = self.lb.jiffies + self.lb.blocked_period;
    }

    /// `nohz_balancer_kick()`: does a busy CPU's tick kick the idle
    /// balancer? When one runs two tasks or more (a task waits, as only
    /// busy CPUs have waiting tasks), or an LLC has two busy CPUs
    /// (`sds->nr_busy_cpus > 1`).
    fn nohz_kick(&self) -> bool {
        self.k.nr_queued > 0 || self.k.llc_running.iter().any(|&n| n > 1)
    }

    /// `_nohz_idle_balance()` at jiffy `now`: the first idle CPU
    /// (`find_new_ilb()`) balances each idle CPU whose balance is due, the
    /// others in CPU order, then itself.
    fn nohz_idle_balance(&mut self, now: u64) {
        let Some(ilb) = self.k.next_cpu(None, false) else {
            return;
        };
        let mut cpu = Some(ilb);
        while let Some(c) = self.k.next_cpu(cpu, false) {
            self.balance_idle(c, now);
            cpu = Some(c);
        }
        self.balance_idle(ilb, now);
    }

    /// An idle CPU balances if its balance is due.
    fn balance_idle(&mut self, cpu: Cpu, now: u64) {
        if now >= self.lb.next_balance[cpu as usize] && self.k.is_idle(cpu) {
            self.balance_domains(cpu, CpuIdle::Idle, now);
        }
    }

    /// `sched_balance_domains()` at jiffy `now`: `cpu` balances each of
    /// its domains whose interval has passed, bottom up, until one says
    /// another CPU balances for its group (`should_we_balance()`); then its
    /// next balance is the earliest one due.
    fn balance_domains(&mut self, cpu: Cpu, mut idle: CpuIdle, now: u64) {
        let mut continue_balancing = true;
        let mut next = now + 60 * u64::from(self.k.cfg.tick_hz);
        let first = self.lb.first[cpu as usize];
        for i in first..self.lb.first[cpu as usize + 1] {
            if !continue_balancing {
                break;
            }
            let d = &self.lb.domains[i];
            let due = d.last_balance + d.interval(idle == CpuIdle::NotIdle);
            if now < due {
                next = next.min(due);
                continue;
            }
            // The common case of the SMT level, settled without the rest of
            // sched_balance_rq(): a CPU balances its own group of one CPU
            // (should_we_balance()), and find_busiest_group() finds nothing.
            if d.single_cpu_groups() && lb::nothing_to_pull(&Ctx { k: &mut self.k }, d) {
                self.lb.domains[i].balanced(idle);
            } else if self.balance_rq(cpu, i - first, idle, &mut continue_balancing) > 0 {
                idle = if self.k.is_idle(cpu) {
                    CpuIdle::Idle
                } else {
                    CpuIdle::NotIdle
                };
            }
            let d = &mut self.lb.domains[i];
            d.last_balance = now;
            next = next.min(now + d.interval(idle == CpuIdle::NotIdle));
        }
        self.lb.next_balance[cpu as usize] = next;
    }

    /// `sched_balance_rq()` (`load_balance()` before 6.10): `cpu` balances
    /// its domain `level`; returns how many tasks it pulled. Clears
    /// `continue_balancing` when another CPU balances for its group.
    fn balance_rq(
        &mut self,
        cpu: Cpu,
        level: usize,
        idle: CpuIdle,
        continue_balancing: &mut bool,
    ) -> u32 {
        let cx = Ctx { k: &mut self.k };
        let d = self.lb.domain(cpu, level);
        if !lb::should_we_balance(&cx, d, cpu, idle) {
            *continue_balancing = false;
            return self.balanced(cpu, level, idle);
        }
        match lb::find_busiest_group(&cx, d, idle) {
            Some(imbalance) => self.pull(cpu, level, imbalance, idle),
            None => self.balanced(cpu, level, idle),
        }
    }

    /// The rest of `sched_balance_rq()` once `find_busiest_group()` found
    /// an imbalance: pull from the busiest run queue of its group.
    fn pull(&mut self, cpu: Cpu, level: usize, imbalance: Imbalance, idle: CpuIdle) -> u32 {
        let cx = Ctx { k: &mut self.k };
        let d = self.lb.domain(cpu, level);
        let Some(src) = lb::find_busiest_queue(&cx, d, &imbalance) else {
            return self.balanced(cpu, level, idle);
        };
        let moved = self.detach_tasks(src, cpu, level, imbalance, idle);
        if moved == 0 {
            self.balance_failed(cpu, level, src, imbalance, idle);
        } else {
            let d = self.lb.domain_mut(cpu, level);
            d.nr_balance_failed = 0;
            d.reset_interval();
        }
        moved
    }

    /// `sched_balance_rq()`'s `out_balanced` ([`Domain::balanced`]).
    fn balanced(&mut self, cpu: Cpu, level: usize, idle: CpuIdle) -> u32 {
        self.lb.domain_mut(cpu, level).balanced(idle);
        0
    }

    /// An imbalance was found but nothing moved (every waiting task
    /// cache-hot, or `src` runs one task): a periodic balance counts a
    /// failure; enough failures push `src`'s task
    /// (`need_active_balance()`). The interval restarts from its minimum,
    /// except that 5.10 doubles it when it pushes.
    fn balance_failed(
        &mut self,
        cpu: Cpu,
        level: usize,
        src: Cpu,
        imbalance: Imbalance,
        idle: CpuIdle,
    ) {
        let version = self.k.cfg.linux;
        let d = self.lb.domain_mut(cpu, level);
        if idle != CpuIdle::NewlyIdle {
            d.nr_balance_failed += 1;
        }
        let active = lb::need_active_balance(version, d, &imbalance);
        if active && version == LinuxVersion::Linux510 {
            d.back_off();
            d.nr_balance_failed = d.level.cache_nice_tries() + 1;
        } else {
            d.reset_interval();
        }
        if active {
            self.active_balance(src, cpu, level);
        }
    }

    /// `detach_tasks()` and `attach_tasks()`: moves waiting tasks from
    /// `src` to `cpu`, oldest first (the tail of `cfs_tasks`), skipping
    /// those `can_migrate_task()` refuses or that exceed what is left of
    /// the imbalance; returns how many moved.
    fn detach_tasks(
        &mut self,
        src: Cpu,
        cpu: Cpu,
        level: usize,
        imbalance: Imbalance,
        idle: CpuIdle,
    ) -> u32 {
        let mut nr_running = self.k.nr_running(src);
        if nr_running <= 1 {
            return 0;
        }
        let pulls_one = idle == CpuIdle::NewlyIdle && lb::newidle_pulls_one(self.k.cfg.linux);
        let cx = Ctx { k: &mut self.k };
        let d = self.lb.domain(cpu, level);
        let mut left = imbalance.amount;
        let mut detached = Vec::new();
        for &task in cx.k.cpus[src as usize].queue.iter().take(lb::NR_MIGRATE) {
            // Do not leave `src` without a task: it would pull back.
            if idle != CpuIdle::NotIdle && nr_running <= 1 {
                break;
            }
            if !lb::can_migrate_task(&cx, d, task, cpu) {
                continue;
            }
            let Some(amount) = lb::detach_amount(&cx, d, imbalance.migration, task, left) else {
                continue;
            };
            left -= amount;
            nr_running -= 1;
            detached.push(task);
            if pulls_one || left <= 0.0 {
                break;
            }
        }
        for &task in &detached {
            self.migrate_queued(task, cpu);
        }
        detached.len() as u32
    }

    /// `active_load_balance_cpu_stop()`: `src`'s stopper pushes a task to
    /// `cpu`, its oldest waiting one or else the one it was running, and
    /// the domain's failures are forgotten. Not a task that may not run on
    /// `cpu`: `sched_balance_rq()` gives up on a running one
    /// (`out_one_pinned`), `detach_one_task()` skips a waiting one.
    fn active_balance(&mut self, src: Cpu, cpu: Cpu, level: usize) {
        let c = &self.k.cpus[src as usize];
        let allowed = |t: &u32| self.k.allowed(*t, cpu);
        if let Some(&task) = c.queue.iter().find(|t| allowed(t)) {
            self.migrate_queued(task, cpu);
        } else if c.curr.is_some_and(|t| allowed(&t)) {
            self.push_running(src, cpu);
        } else {
            return;
        }
        self.lb.domain_mut(cpu, level).nr_balance_failed = 0;
    }

    /// Moves the task running on `src` to `cpu`: preempted by the stopper,
    /// detached and attached to `cpu`'s run queue.
    fn push_running(&mut self, src: Cpu, cpu: Cpu) {
        let Some(task) = self.k.cpus[src as usize].curr else {
            return;
        };
        self.settle(src);
        let now = self.k.now;
        let t = &mut self.k.tasks[task as usize];
        t.phase = TaskPhase::Queued(src);
        t.enqueued_at = now;
        self.put_prev(src, PrevState::Runnable);
        self.enqueue_since(task, cpu, now);
    }

    /// When `cpu`'s domain `level` is due next for an idle CPU
    /// (`update_next_balance()`).
    fn idle_due(&self, cpu: Cpu, level: usize) -> u64 {
        let d = self.lb.domain(cpu, level);
        d.last_balance + d.interval(false)
    }

    /// `sched_balance_newidle()` (`newidle_balance()` before 6.10): `cpu`,
    /// about to idle, pulls waiting tasks into its run queue, domain by
    /// domain bottom up while its average idle period covers the cost
    /// ([`lb::newidle_allowed`]); its next periodic balance comes no later
    /// than an idle CPU's. Returns whether a task waits on `cpu` now.
    pub(crate) fn newidle_balance(&mut self, cpu: Cpu) -> bool {
        if !self.balances() || self.lb.levels(cpu) == 0 {
            return false;
        }
        let avg_idle = self.k.cpus[cpu as usize].avg_idle;
        let overloaded = self.k.nr_queued > 0;
        let lowest = self.lb.domain(cpu, 0);
        let next = self.lb.jiffies + u64::from(self.k.cfg.tick_hz);
        let allowed = lb::newidle_allowed(self.k.cfg.linux, overloaded, avg_idle, lowest);
        let next = if allowed {
            self.update_blocked(cpu);
            self.newidle_domains(cpu, avg_idle, next)
        } else {
            next.min(self.idle_due(cpu, 0))
        };
        let rq_next = &mut self.lb.next_balance[cpu as usize];
        *rq_next = (*rq_next).min(next);
        let pulled = !self.k.cpus[cpu as usize].queue.is_empty();
        if !pulled && lb::newidle_updates_idle_cpus(self.k.cfg.linux, allowed) {
            self.nohz_newidle_stats(cpu);
        }
        pulled
    }

    /// `nohz_newidle_balance()`: `cpu`, about to idle for a while, updates
    /// the other idle CPUs' blocked averages when they are due.
    fn nohz_newidle_stats(&mut self, cpu: Cpu) {
        let avg_idle = self.k.cpus[cpu as usize].avg_idle;
        if self.lb.jiffies >= self.lb.next_blocked && avg_idle >= lb::MIGRATION_COST_NS {
            self.nohz_stats(Some(cpu));
        }
    }

    /// The domain walk of `sched_balance_newidle()`; returns the next
    /// balance due (from `next`) over the domains visited.
    fn newidle_domains(&mut self, cpu: Cpu, avg_idle: u64, mut next: u64) -> u64 {
        // Between two tasks: pulled tasks wait in the run queue.
        self.k.cpus[cpu as usize].switching = true;
        let mut cost = 0;
        for level in 0..self.lb.levels(cpu) {
            next = next.min(self.idle_due(cpu, level));
            let domain_cost = self.lb.domain(cpu, level).newidle_cost_ns();
            if avg_idle < cost + domain_cost {
                break;
            }
            let mut continue_balancing = true;
            let pulled = self.balance_rq(cpu, level, CpuIdle::NewlyIdle, &mut continue_balancing);
            cost += domain_cost;
            let has_task = !self.k.cpus[cpu as usize].queue.is_empty();
            if pulled > 0 || has_task || !continue_balancing {
                break;
            }
        }
        self.k.cpus[cpu as usize].switching = false;
        next
    }
}
