//! Periodic work: the frequency/power/accounting step and the scheduler
//! tick (preemption, periodic balancing, policy ticks, interval metrics).

use nest_trace::{Cpu, EventKind};

use super::kernel::{TaskPhase, band_of};
use super::{Ev, Interval, Sim};
use crate::governor::CoreActivity;
use crate::pelt::PeltStep;
use crate::policy::Ctx;
use crate::power::{CoreSample, socket_power_w};

impl Sim<'_> {
    pub(crate) fn step(&mut self) {
        let now = self.k.now;
        self.account_until(now);
        if self.k.tasks_remain() {
            let next = now + self.k.cfg.dvfs_step_ns;
            self.k.push(next, Ev::Step);
        }
    }

    /// Accounts activity, residency, utilisation and energy since the last
    /// step, then moves the cores' frequencies. Only *hot* cores (active
    /// during the step, or whose frequency is still moving) are visited;
    /// the others are idle at a settled frequency and cost only idle power.
    pub(crate) fn account_until(&mut self, now: u64) {
        let dt = now.saturating_sub(self.k.stats.accounted_to);
        if dt == 0 {
            return;
        }
        self.k.stats.accounted_to = now;
        let mut hot = std::mem::take(&mut self.k.hot_list);
        hot.sort_unstable();
        let mut samples = std::mem::take(&mut self.k.scratch);
        samples.clear();
        let idle = PeltStep::idle(dt as f64);
        for &core in &hot {
            let sample = self.sample_core(core, now, dt, &idle);
            samples.push(sample);
        }
        self.account_energy(&hot, &samples, dt);
        self.update_util(dt, now, &idle);
        self.move_frequencies(&hot, &samples, dt, now);
        self.cool_down(&mut hot);
        hot.append(&mut self.k.hot_list);
        self.k.hot_list = hot;
        self.k.scratch = samples;
    }

    /// Closes `core`'s activity and run-time accumulators of the step
    /// (adding its busy time to the frequency residency) and returns the
    /// shares of the step it was active and ran a task (its busiest
    /// thread's), the frequency it ran at and its idle state's power.
    fn sample_core(&mut self, core: usize, now: u64, dt: u64, idle: &PeltStep) -> CoreSample {
        let k = &mut self.k;
        let mut active_ns = 0;
        let mut run_ns = 0;
        let mut busiest_run_ns = 0;
        let mhz = k.cores[core].freq.mhz();
        let scale = f64::from(mhz) / f64::from(k.machine.frequency.max_mhz);
        for &cpu in &k.core_cpus[core] {
            let c = &mut k.cpus[cpu as usize];
            if let Some(s) = c.active_since {
                c.active_ns += now - s;
                c.active_since = Some(now);
            }
            if let Some(s) = c.run_since {
                c.run_ns += now - s;
                c.run_since = Some(now);
            }
            active_ns = active_ns.max(c.active_ns);
            busiest_run_ns = busiest_run_ns.max(c.run_ns);
            run_ns += c.run_ns;
            c.pelt_step = c.pelt.step(idle, scale, c.run_ns >= dt);
            c.pelt_stamp = now;
            c.active_ns = 0;
            c.run_ns = 0;
        }
        if run_ns > 0 {
            k.stats.residency_ns[k.cores[core].band] += run_ns;
        }
        // The busiest thread's shares. (One division: the largest quotient
        // is the quotient of the largest, as rounding is monotonic.)
        let active = (active_ns as f64 / dt as f64).min(1.0);
        CoreSample {
            active,
            running: (busiest_run_ns as f64 / dt as f64).min(active),
            mhz,
            idle_w: k.idle_power_w(core),
        }
    }

    fn account_energy(&mut self, hot: &[usize], samples: &[CoreSample], dt: u64) {
        let k = &mut self.k;
        let machine_active = samples.iter().any(|s| s.active > 0.0);
        // Cores are numbered socket by socket and `hot` is sorted.
        let per_socket = k.machine.cores_per_socket as usize;
        let mut watts = 0.0;
        let mut i = 0;
        for socket in 0..k.machine.sockets as usize {
            let first = i;
            let end = (socket + 1) * per_socket;
            while i < hot.len() && hot[i] < end {
                i += 1;
            }
            watts += if first == i {
                k.cold_socket_w[usize::from(machine_active)]
            } else {
                let cold = per_socket - (i - first);
                socket_power_w(&k.machine, &samples[first..i], cold, machine_active)
            };
        }
        k.stats.energy_j += watts * dt as f64 * 1e-9;
    }

    /// Drops from `hot` the cores that are idle and settled (as
    /// [`Sim::move_frequencies`] found them).
    fn cool_down(&mut self, hot: &mut Vec<usize>) {
        hot.retain(|&core| self.k.hot[core]);
    }

    /// Updates every live task's PELT averages (crate::pelt), on the PELT
    /// clock of its CPU, then each CPU's sums: those of the tasks whose
    /// run queue it is, running, waiting or blocked (utilisation capped at
    /// 1).
    fn update_util(&mut self, dt: u64, now: u64, idle: &PeltStep) {
        let k = &mut self.k;
        k.for_util_cpus(|c| {
            c.util = 0.0;
            c.runnable = 0.0;
        });
        let step_start = now - dt;
        for &id in &k.live {
            let t = &mut k.tasks[id as usize];
            if let Some(s) = t.run_start {
                t.run_in_step += now - s;
                t.stats.run_ns += now - s;
                t.run_start = Some(now);
            }
            if matches!(t.phase, TaskPhase::Queued(_) | TaskPhase::Held) {
                t.wait_in_step += now - t.enqueued_at.max(step_start);
            }
            let c = &mut k.cpus[t.cpu as usize];
            let step = if c.pelt_stamp == now {
                c.pelt_step
            } else {
                *idle
            };
            t.util = step.update(t.util, t.run_in_step as f64);
            t.runnable = step.update(t.runnable, (t.run_in_step + t.wait_in_step) as f64);
            t.run_in_step = 0;
            t.wait_in_step = 0;
            c.util += t.util;
            c.runnable += t.runnable;
        }
        k.for_util_cpus(|c| c.util = c.util.min(1.0));
        k.util_stale.clear();
    }

    fn move_frequencies(&mut self, hot: &[usize], samples: &[CoreSample], dt: u64, now: u64) {
        // Active cores per socket, then the socket's turbo ceiling.
        let mut ceilings = std::mem::take(&mut self.k.socket_scratch);
        ceilings.clear();
        ceilings.resize(self.k.machine.sockets as usize, 0);
        for (&core, s) in hot.iter().zip(samples) {
            if s.active > 0.0 {
                ceilings[self.k.cores[core].socket as usize] += 1;
            }
        }
        for c in &mut ceilings {
            *c = self.k.machine.turbo_ceiling_mhz(*c);
        }
        for (&core, sample) in hot.iter().zip(samples) {
            let ceiling_mhz = ceilings[self.k.cores[core].socket as usize];
            let (act, active_now) = self.core_inputs(core, sample.active, ceiling_mhz, now);
            let k = &mut self.k;
            let before = k.cores[core].freq.mhz();
            let after = k.cores[core].freq.step(&k.machine, k.cfg.governor, dt, act);
            // Stays hot unless idle and settled (re-timing segments below
            // changes no CPU's activity).
            k.hot[core] = active_now || !k.cores[core].freq.is_quiet();
            if after != before {
                self.frequency_moved(core, after);
            }
        }
        self.k.socket_scratch = ceilings;
    }

    /// `core` now runs at `mhz`: trace it, and re-time its CPUs' segments.
    fn frequency_moved(&mut self, core: usize, mhz: u32) {
        let state = &mut self.k.cores[core];
        state.band = band_of(&self.k.band_edges, mhz);
        if !state.freq_moved {
            state.freq_moved = true;
            self.k.retick.push(core);
        }
        for i in 0..self.k.core_cpus[core].len() {
            let c = self.k.core_cpus[core][i];
            self.k.emit(c, EventKind::Frequency { khz: mhz * 1000 });
            self.retime(c);
        }
    }

    /// What the governor of `core` sees at the end of a step, and whether
    /// a thread of it is active now. Its schedutil request is its threads'
    /// highest (SMT siblings share the frequency; HWP resolves their
    /// requests to the highest).
    fn core_inputs(
        &self,
        core: usize,
        active: f64,
        ceiling_mhz: u32,
        now: u64,
    ) -> (CoreActivity, bool) {
        let mut any_active = false;
        let mut inactive_since = 0;
        let mut request_mhz: f64 = 0.0;
        for &cpu in &self.k.core_cpus[core] {
            let c = &self.k.cpus[cpu as usize];
            any_active |= c.active_since.is_some();
            inactive_since = inactive_since.max(c.inactive_since);
            request_mhz = request_mhz.max(c.sugov.request_mhz);
        }
        let act = CoreActivity {
            active,
            idle_for_ns: if any_active { 0 } else { now - inactive_since },
            request_mhz,
            ceiling_mhz,
        };
        (act, any_active)
    }

    /// The scheduler tick on every CPU.
    pub(crate) fn tick(&mut self) {
        let now = self.k.now;
        self.lb.tick();
        self.close_interval();
        if self.k.deadlocked() {
            self.k.deadlock = true;
            self.k.stop_at = Some(now);
            return;
        }
        if self.owns_queues {
            self.end_used_up_slices();
        } else if self.k.nr_queued > 0 {
            self.tick_preempt();
        }
        self.refresh_tick_mhz();
        self.tick_balance();
        if self.policy_ticks {
            self.policy_tick();
        }
        self.sugov_tick();
        if self.k.tasks_remain() {
            let next = now + self.k.cfg.tick_ns();
            self.k.push(next, Ev::Tick);
        }
    }

    /// schedutil at the tick of every CPU running a task (`entity_tick()`
    /// updates its PELT averages, which calls `cpufreq_update_util()`; a
    /// sched_ext scheduler's `ops.tick` may set its performance target
    /// first).
    fn sugov_tick(&mut self) {
        if !self.k.cfg.governor.is_schedutil() {
            return;
        }
        for cpu in 0..self.k.cpus.len() as Cpu {
            if self.k.cpus[cpu as usize].curr.is_some() {
                self.sugov_update(cpu);
            }
        }
    }

    /// The policy's tick on each CPU running a task, in CPU order.
    fn policy_tick(&mut self) {
        for cpu in 0..self.k.cpus.len() as Cpu {
            // A kick applied after one CPU's tick may switch another's
            // task before its turn: `curr` is read at each.
            if self.k.cpus[cpu as usize].curr.is_some() {
                self.policy.tick(&mut Ctx { k: &mut self.k }, cpu);
                self.apply_actions();
            }
        }
    }

    /// Under the fair models: ends, in CPU order, the slice of each task
    /// that used it up while others wait on its CPU. Frequencies are
    /// observed as they go, since the policy hooks called on the way may
    /// read them.
    fn tick_preempt(&mut self) {
        let now = self.k.now;
        for cpu in 0..self.k.cpus.len() as Cpu {
            let mhz = self.k.cpu_mhz(cpu);
            let c = &mut self.k.cpus[cpu as usize];
            c.last_tick_mhz = mhz;
            if c.curr.is_some() && !c.queue.is_empty() && now - c.slice_start >= c.slice_ns {
                self.end_slice(cpu);
            }
        }
    }

    /// Under a policy owning the queues, as sched_ext: a slice ends at
    /// the tick once used up, whoever waits (`task_tick_scx()` reschedules
    /// once `p->scx.slice` is 0; the dispatch that follows renews it when
    /// nothing else runs: `nest_dispatch()`). Its run time is charged from
    /// the switch after the tick (`update_curr_scx()`), so a slice that the
    /// tick's dispatch renewed is one tick long only a moment after the
    /// next tick: it ends at the tick after that. Every CPU's tick comes at
    /// the same time (one grid for all: `tick_setup_sched_timer()`,
    /// without `skew_tick`), and each CPU dispatches before putting its own
    /// task back (`balance_one()` before `put_prev_task_scx()`): all
    /// dispatch first, then the tasks that lost their CPUs go back to the
    /// policy, so no CPU takes a task that another preempted at that tick.
    /// (Ending slices only for waiting tasks, one CPU after the other, left
    /// every long-running CPU with a used-up slice whenever a task came to
    /// wait, and at the next tick each CPU in turn took the task the one
    /// before had just preempted: cascades of 4-6 migrations in a replayed
    /// batch of 16 threads.)
    fn end_used_up_slices(&mut self) {
        let now = self.k.now;
        let mut switching_out = Vec::new();
        for cpu in 0..self.k.cpus.len() as Cpu {
            let Some(task) = self.k.cpus[cpu as usize].curr else {
                continue;
            };
            let mhz = self.k.cpu_mhz(cpu);
            let c = &mut self.k.cpus[cpu as usize];
            c.last_tick_mhz = mhz;
            if now - c.slice_start > c.slice_ns {
                if let Some(why) = self.dispatch_at_slice_end(cpu) {
                    switching_out.push((cpu, task, why));
                }
                self.apply_actions();
            }
        }
        for (cpu, task, why) in switching_out {
            // A kick meanwhile may have switched it out already.
            if self.k.cpus[cpu as usize].curr == Some(task) {
                self.switch_out(cpu, why);
                self.apply_actions();
            }
        }
    }

    /// Every CPU observes its frequency at the tick. Only the cores whose
    /// frequency moved since the last tick need visiting.
    fn refresh_tick_mhz(&mut self) {
        let k = &mut self.k;
        for core in k.retick.drain(..) {
            k.cores[core].freq_moved = false;
            let mhz = k.cores[core].freq.mhz();
            for &cpu in &k.core_cpus[core] {
                k.cpus[cpu as usize].last_tick_mhz = mhz;
            }
        }
    }

    /// Records CPUs and sockets used and peak concurrency of the interval
    /// that ends now, and starts the next one. A CPU running a task has
    /// `used_in_interval` set, so `used_cpus` lists every CPU used.
    fn close_interval(&mut self) {
        let k = &mut self.k;
        let mut sockets = vec![false; k.machine.sockets as usize];
        let mut cores = vec![false; k.machine.nr_cores()];
        let used = k.used_cpus.len() as u32;
        for &cpu in &k.used_cpus {
            let place = &k.topo.cpus[cpu as usize];
            sockets[place.socket as usize] = true;
            cores[place.core as usize] = true;
            let c = &mut k.cpus[cpu as usize];
            c.used_in_interval = c.curr.is_some();
        }
        k.used_cpus
            .retain(|&cpu| k.cpus[cpu as usize].used_in_interval);
        let count = |v: &[bool]| v.iter().filter(|&&b| b).count() as u32;
        let s = &mut k.stats;
        s.intervals.push(Interval {
            cpus: used,
            sockets: count(&sockets),
            cores: count(&cores),
            concurrency: s.max_running_in_interval,
        });
        s.max_running_in_interval = s.running_now;
    }
}
