//! CPUs: enqueueing, context switches, run segments, idling and warm
//! spinning.

use nest_trace::{Cpu, EventKind, PrevState};

use super::kernel::{Kernel, Remaining, TaskPhase};
use super::task::Outcome;
use super::{Ev, Sim};
use crate::governor::Governor;
use crate::policy::Ctx;
use crate::policy::{Dispatch, Enqueue, Queued};

impl Sim<'_> {
    /// Makes `task` (new or woken: `why`) runnable on `cpu`, the
    /// placement's choice: it runs at once if `cpu` is idle; otherwise the
    /// policy says where it waits ([`Policy::enqueue`]; by default `cpu`'s
    /// run queue).
    pub(crate) fn enqueue(&mut self, task: u32, cpu: Cpu, why: Enqueue) {
        let c = &self.k.cpus[cpu as usize];
        if c.curr.is_none() && !c.switching {
            return self.enqueue_since(task, cpu, self.k.now);
        }
        self.hand_to_policy(task, cpu, why);
        if self.k.cfs.is_some() {
            self.check_preempt_wakeup(task);
        }
    }

    /// Asks the policy where `task`, which cannot run at once on `cpu`,
    /// waits, and puts it there.
    fn hand_to_policy(&mut self, task: u32, cpu: Cpu, why: Enqueue) {
        let queued = self
            .policy
            .enqueue(&mut Ctx { k: &mut self.k }, task, cpu, why);
        match queued {
            // Never where the task may not run (sched_ext would move it to
            // its global queue): `cpu` is one it may run on.
            Queued::OnCpu(target)
                if (target as usize) < self.k.cpus.len() && self.k.allowed(task, target) =>
            {
                self.enqueue_since(task, target, self.k.now);
            }
            Queued::OnCpu(_) => self.enqueue_since(task, cpu, self.k.now),
            Queued::Held => {
                let t = &mut self.k.tasks[task as usize];
                t.phase = TaskPhase::Held;
                t.enqueued_at = self.k.now;
                self.k.nr_held += 1;
            }
        }
        self.apply_actions();
    }

    /// Enqueues `task`, runnable since `since` (earlier than now when it is
    /// moved from another run queue).
    pub(super) fn enqueue_since(&mut self, task: u32, cpu: Cpu, since: u64) {
        // enqueue_entity() updates the CPU's PELT averages.
        self.update_blocked(cpu);
        if self.k.cfs.is_some() {
            self.cfs_enqueue(task, cpu);
        }
        let t = &mut self.k.tasks[task as usize];
        t.phase = TaskPhase::Queued(cpu);
        t.enqueued_at = since;
        let c = &self.k.cpus[cpu as usize];
        if c.curr.is_none() && !c.switching {
            if !self.delay_vcpu_start(cpu, task) {
                self.switch_to(cpu, task, None);
            }
        } else {
            self.k.cpus[cpu as usize].queue.push_back(task);
            self.k.nr_queued += 1;
        }
    }

    /// Asks a policy that owns its queues what `cpu` runs next (`prev`:
    /// the task whose slice ended there). A task it hands out leaves its
    /// queues.
    fn ask_dispatch(&mut self, cpu: Cpu, prev: Option<u32>) -> Dispatch {
        if !self.owns_queues || (self.k.nr_held == 0 && prev.is_none()) {
            return Dispatch::Nothing;
        }
        let d = self.policy.dispatch(&mut Ctx { k: &mut self.k }, cpu, prev);
        match d {
            Dispatch::Run(task) if self.k.task_phase(task) == TaskPhase::Held => {
                debug_assert!(
                    self.k.allowed(task, cpu),
                    "dispatch of task {task} to CPU {cpu}, where it may not run"
                );
                self.k.nr_held -= 1;
                d
            }
            Dispatch::Run(task) => {
                // A policy may only dispatch a task it holds; in a release
                // build the CPU then stays as if nothing was dispatched.
                debug_assert!(
                    false,
                    "dispatch of task {task}, which the policy does not hold"
                );
                Dispatch::Nothing
            }
            Dispatch::KeepPrev if prev.is_none() => Dispatch::Nothing,
            _ => d,
        }
    }

    /// A kick (`scx_bpf_kick_cpu()`): an idle `cpu` takes work from the
    /// policy's queues; with `preempt`, a busy one ends its task's slice.
    /// A CPU between two tasks is about to look for work anyway.
    pub(crate) fn kick(&mut self, cpu: Cpu, preempt: bool) {
        let c = &self.k.cpus[cpu as usize];
        if c.switching {
            return;
        }
        if c.curr.is_some() {
            if preempt && !self.delay_vcpu_kick(cpu) {
                self.end_slice(cpu);
            }
            return;
        }
        if let Dispatch::Run(task) = self.ask_dispatch(cpu, None) {
            self.enqueue_since(task, cpu, self.k.tasks[task as usize].enqueued_at);
        }
        self.apply_actions();
    }

    /// The slice of `cpu`'s current task ended (or a kick preempted it):
    /// its run queue's next task runs; for a policy owning its queues,
    /// what its dispatch says.
    pub(crate) fn end_slice(&mut self, cpu: Cpu) {
        if self.k.cpus[cpu as usize].curr.is_none() {
            return;
        }
        if !self.owns_queues {
            return self.preempt(cpu);
        }
        if let Some(why) = self.dispatch_at_slice_end(cpu) {
            self.switch_out(cpu, why);
        }
        self.apply_actions();
    }

    /// For a policy owning its queues: what `cpu` runs once its current
    /// task's slice ended, decided before that task goes back, as
    /// `balance_one()` calls ops.dispatch() before `put_prev_task_scx()`
    /// enqueues it. A task already in the run queue goes first; otherwise
    /// the dispatched task is put at the run queue's front. Returns how the
    /// current task goes back to the policy ([`Sim::switch_out`]), or None
    /// when it keeps the CPU with a new slice.
    pub(super) fn dispatch_at_slice_end(&mut self, cpu: Cpu) -> Option<Enqueue> {
        let c = &self.k.cpus[cpu as usize];
        let prev = c.curr?;
        if !c.queue.is_empty() {
            return Some(Enqueue::Preempted);
        }
        match self.ask_dispatch(cpu, Some(prev)) {
            Dispatch::KeepPrev => {
                self.new_slice(cpu);
                None
            }
            Dispatch::Run(next) => {
                let t = &mut self.k.tasks[next as usize];
                t.phase = TaskPhase::Queued(cpu);
                self.k.cpus[cpu as usize].queue.push_front(next);
                self.k.nr_queued += 1;
                Some(Enqueue::Preempted)
            }
            Dispatch::Nothing => Some(Enqueue::Last),
        }
    }

    /// Starts a new slice for `cpu`'s current task.
    fn new_slice(&mut self, cpu: Cpu) {
        let slice = self.policy.slice_ns(&mut Ctx { k: &mut self.k }, cpu);
        let c = &mut self.k.cpus[cpu as usize];
        c.slice_start = self.k.now;
        c.slice_ns = slice.unwrap_or(self.k.cfg.slice_ns);
    }

    /// Switches `cpu`'s current task out, still runnable: it goes back to
    /// the policy (`why`), and `cpu` runs its next task.
    pub(super) fn switch_out(&mut self, cpu: Cpu, why: Enqueue) {
        self.settle(cpu);
        self.k.cpus[cpu as usize].requeue = Some(why);
        self.put_prev(cpu, PrevState::Runnable);
    }

    /// Starts running `task` on `cpu`; `prev` is what `cpu` ran before.
    pub(super) fn switch_to(&mut self, cpu: Cpu, task: u32, prev: Option<(u32, PrevState)>) {
        let now = self.k.now;
        let was_idle = prev.is_none();
        if was_idle {
            self.end_spin(cpu, true);
            self.k.emit(cpu, EventKind::IdleExit);
            self.set_active(cpu, true);
        }
        let (prev_pid, prev_state) =
            prev.map_or((0, PrevState::Runnable), |(p, s)| (Kernel::pid(p), s));
        self.k.emit(
            cpu,
            EventKind::Switch {
                prev: prev_pid,
                prev_state,
                next: Kernel::pid(task),
            },
        );
        self.note_migration(task, cpu);
        let step_start = self.k.stats.accounted_to;
        let t = &mut self.k.tasks[task as usize];
        t.phase = TaskPhase::Running(cpu);
        t.next_vcpu_wakeup_ns = None;
        t.stats.wait_ns += now - t.enqueued_at;
        t.wait_in_step += now - t.enqueued_at.max(step_start);
        self.k.cpus[cpu as usize].curr = Some(task);
        self.new_slice(cpu);
        self.set_running(cpu, true);
        if was_idle {
            self.policy.cpu_busy(&mut Ctx { k: &mut self.k }, cpu);
        }
        self.policy
            .task_running(&mut Ctx { k: &mut self.k }, task, cpu);
        self.apply_actions();
        if self.k.cfg.governor == Governor::Schedutil && self.policy.perf_target(cpu).is_some() {
            // scx_bpf_cpuperf_set() from ops.running().
            self.sugov_update(cpu);
        }
        self.siblings_changed(cpu);
        self.resume(cpu, task);
    }

    /// Counts a migration when a task runs on a CPU other than its last.
    fn note_migration(&mut self, task: u32, cpu: Cpu) {
        let t = &mut self.k.tasks[task as usize];
        let from = t.cpu;
        let moved = t.has_run && from != cpu;
        t.has_run = true;
        t.cpu = cpu;
        if from != cpu {
            self.k.util_stale.push(from);
        }
        if moved {
            t.stats.migrations += 1;
            self.k.stats.migrations += 1;
            let pid = Kernel::pid(task);
            self.k.emit(cpu, EventKind::Migrate { pid, from, to: cpu });
        }
    }

    /// Continues `task` (current on `cpu`) from where it stands.
    fn resume(&mut self, cpu: Cpu, task: u32) {
        if self.k.tasks[task as usize].remaining == Remaining::Nothing {
            let cfs = self.k.cfs.is_some();
            if cfs {
                self.k.cpus[cpu as usize].advancing = true;
            }
            let outcome = self.advance(task, cpu);
            let resched = cfs && {
                let c = &mut self.k.cpus[cpu as usize];
                c.advancing = false;
                std::mem::take(&mut c.need_resched)
            };
            match outcome {
                Outcome::Compute => {}
                Outcome::Block => return self.put_prev(cpu, PrevState::Blocked),
                Outcome::Exit => return self.put_prev(cpu, PrevState::Dead),
            }
            if resched {
                // A task it woke preempts it now (engine/fair.rs).
                self.start_segment(cpu);
                return self.preempt(cpu);
            }
        }
        self.start_segment(cpu);
    }

    /// Schedules the end of the current task's operation at current speed.
    pub(crate) fn start_segment(&mut self, cpu: Cpu) {
        let now = self.k.now;
        let rate = self.k.rate(cpu);
        // A core waking from an idle state makes no progress before it is up.
        let start = now.max(self.k.core_ready_at(self.k.core_of(cpu)));
        let c = &mut self.k.cpus[cpu as usize];
        let Some(task) = c.curr else { return };
        c.epoch = c.epoch.wrapping_add(1);
        c.seg_start = start;
        c.rate = rate;
        let epoch = c.epoch;
        let left = match self.k.tasks[task as usize].remaining {
            Remaining::Work(cycles) => cycles / rate,
            Remaining::Time(ns) => ns,
            Remaining::Nothing => 0.0,
        };
        let at = start + ceil_ns(left);
        self.k.queue.set_end(cpu, at, epoch);
    }

    /// Accounts the progress of `cpu`'s current task up to now.
    pub(crate) fn settle(&mut self, cpu: Cpu) {
        let now = self.k.now;
        let c = &mut self.k.cpus[cpu as usize];
        let Some(task) = c.curr else { return };
        let dt = now.saturating_sub(c.seg_start) as f64;
        let rate = c.rate;
        c.seg_start = now.max(c.seg_start);
        let r = &mut self.k.tasks[task as usize].remaining;
        *r = match *r {
            Remaining::Work(cycles) => Remaining::Work((cycles - dt * rate).max(0.0)),
            Remaining::Time(ns) => Remaining::Time((ns - dt).max(0.0)),
            Remaining::Nothing => Remaining::Nothing,
        };
    }

    /// Re-times `cpu`'s segment after a speed change.
    pub(crate) fn retime(&mut self, cpu: Cpu) {
        if self.k.cpus[cpu as usize].curr.is_some() {
            self.settle(cpu);
            self.start_segment(cpu);
        }
    }

    /// The current operation of `cpu`'s task completed.
    pub(crate) fn segment_done(&mut self, cpu: Cpu) {
        let Some(task) = self.k.cpus[cpu as usize].curr else {
            return;
        };
        self.k.tasks[task as usize].remaining = Remaining::Nothing;
        self.resume(cpu, task);
    }

    /// The current task of `cpu` stops running (blocked, dead or
    /// preempted); run the next queued task or go idle.
    pub(crate) fn put_prev(&mut self, cpu: Cpu, state: PrevState) {
        let c = &mut self.k.cpus[cpu as usize];
        let Some(task) = c.curr else { return };
        c.epoch = c.epoch.wrapping_add(1);
        if self.k.cfs.is_some() {
            // dequeue_entity() / put_prev_entity(): update_curr().
            self.k.update_min_vruntime(cpu);
        }
        let c = &mut self.k.cpus[cpu as usize];
        // Tasks woken meanwhile (e.g. the parent of an exiting task) queue up.
        c.switching = true;
        self.set_running(cpu, false);
        self.policy
            .task_stopping(&mut Ctx { k: &mut self.k }, task, cpu, state);
        self.apply_actions();
        self.k.cpus[cpu as usize].curr = None;
        if state == PrevState::Blocked {
            self.util_est_update(task);
        }
        // The dequeue's PELT update (its util_est gone, its utilisation
        // still the CPU's).
        self.sugov_update(cpu);
        if self.balances() {
            self.k.tasks[task as usize].fair.exec_start = Some(self.k.now);
        }
        match state {
            PrevState::Blocked => self.k.tasks[task as usize].phase = TaskPhase::Blocked,
            PrevState::Dead => self.exit(task, cpu),
            PrevState::Runnable => {
                if let Some(why) = self.k.cpus[cpu as usize].requeue.take() {
                    self.hand_to_policy(task, cpu, why);
                }
            }
        }
        self.siblings_changed(cpu);
        self.k.cpus[cpu as usize].switching = false;
        if let Some(next) = self.k.cpus[cpu as usize].queue.pop_front() {
            self.k.nr_queued -= 1;
            return self.switch_to(cpu, next, Some((task, state)));
        }
        if let Dispatch::Run(next) = self.ask_dispatch(cpu, None) {
            self.k.tasks[next as usize].phase = TaskPhase::Queued(cpu);
            return self.switch_to(cpu, next, Some((task, state)));
        }
        if self.newidle_balance(cpu)
            && let Some(next) = self.k.cpus[cpu as usize].queue.pop_front()
        {
            self.k.nr_queued -= 1;
            return self.switch_to(cpu, next, Some((task, state)));
        }
        let pid = Kernel::pid(task);
        self.k.emit(
            cpu,
            EventKind::Switch {
                prev: pid,
                prev_state: state,
                next: 0,
            },
        );
        self.go_idle(cpu);
    }

    /// `task` goes to sleep: its `util_est` takes a sample of its
    /// utilisation, unless that has not moved since the last sample
    /// (`util_est_update()`, `UTIL_AVG_UNCHANGED`).
    fn util_est_update(&mut self, task: u32) {
        let kernel = self.k.cfg.linux;
        let t = &mut self.k.tasks[task as usize];
        if t.util != t.util_at_sleep {
            t.util_at_sleep = t.util;
            t.util_est.update(kernel, t.util, t.runnable);
        }
    }

    /// `cpu` has nothing to run: idle, or warm-spin if the policy asks.
    fn go_idle(&mut self, cpu: Cpu) {
        let now = self.k.now;
        self.k.cpus[cpu as usize].idle_since = now;
        self.k.cpus[cpu as usize].sugov.idle_since_update = true;
        self.k.update_idle_core(cpu);
        self.set_active(cpu, false);
        self.k.emit(cpu, EventKind::IdleEnter);
        let spin = self.policy.cpu_idle(&mut Ctx { k: &mut self.k }, cpu);
        self.apply_actions();
        // The policy's actions may have given the CPU work already.
        if let Some(s) = spin.filter(|s| s.max_ns > 0 && self.k.is_idle(cpu)) {
            let sibling_busy = self
                .k
                .siblings(cpu)
                .any(|x| self.k.cpus[x as usize].curr.is_some());
            if s.until_sibling_busy && sibling_busy {
                return;
            }
            let c = &mut self.k.cpus[cpu as usize];
            c.spin = Some((now, s.until_sibling_busy));
            c.epoch = c.epoch.wrapping_add(1);
            let epoch = c.epoch;
            self.set_active(cpu, true);
            self.k.push(now + s.max_ns, Ev::SpinEnd { cpu, epoch });
        }
    }

    /// Stops `cpu`'s warm spin, if any.
    pub(crate) fn end_spin(&mut self, cpu: Cpu, interrupted: bool) {
        let Some((start, _)) = self.k.cpus[cpu as usize].spin.take() else {
            return;
        };
        let duration_ns = self.k.now - start;
        self.k.stats.spin_ns += duration_ns;
        self.set_active(cpu, false);
        self.k.emit(
            cpu,
            EventKind::WarmSpin {
                duration_ns,
                interrupted,
            },
        );
    }

    /// A thread of `cpu`'s core started or stopped running: siblings'
    /// speeds change, and their warm spins may end.
    fn siblings_changed(&mut self, cpu: Cpu) {
        let busy = self.k.cpus[cpu as usize].curr.is_some();
        let core = self.k.core_of(cpu);
        for i in 0..self.k.core_cpus[core].len() {
            let s = self.k.core_cpus[core][i];
            if s == cpu {
                continue;
            }
            if busy && self.k.cpus[s as usize].spin.is_some_and(|(_, until)| until) {
                self.end_spin(s, true);
            }
            self.retime(s);
        }
    }

    /// Tracks whether `cpu` is active (running or spinning) for DVFS/power.
    fn set_active(&mut self, cpu: Cpu, on: bool) {
        let now = self.k.now;
        if on {
            self.k.mark_hot(cpu);
        }
        let core = self.k.core_of(cpu);
        let c = &mut self.k.cpus[cpu as usize];
        match (c.active_since, on) {
            (None, true) => {
                c.active_since = Some(now);
                self.core_wakes(core);
            }
            (Some(s), false) => {
                c.active_ns += now - s;
                c.active_since = None;
                c.inactive_since = now;
                self.core_may_sleep(core);
            }
            _ => {}
        }
    }

    /// Tracks whether `cpu` runs a task, for accounting.
    fn set_running(&mut self, cpu: Cpu, on: bool) {
        let now = self.k.now;
        let c = &mut self.k.cpus[cpu as usize];
        match (c.run_since, on) {
            (None, true) => {
                c.run_since = Some(now);
                if let Some(t) = c.curr {
                    self.k.tasks[t as usize].run_start = Some(now);
                }
                self.k.mark_used(cpu);
                if self.balances() {
                    self.k.note_running(cpu, true);
                }
                let s = &mut self.k.stats;
                s.running_now += 1;
                s.max_running_in_interval = s.max_running_in_interval.max(s.running_now);
            }
            (Some(start), false) => {
                c.run_ns += now - start;
                c.run_since = None;
                if let Some(t) = c.curr {
                    stop_task_clock(&mut self.k.tasks[t as usize], now);
                }
                if self.balances() {
                    self.k.note_running(cpu, false);
                }
                self.k.stats.running_now -= 1;
            }
            _ => {}
        }
    }

    /// Preempts `cpu`'s current task in favour of its first queued task.
    pub(crate) fn preempt(&mut self, cpu: Cpu) {
        let Some(task) = self.k.cpus[cpu as usize].curr else {
            return;
        };
        if self.k.cpus[cpu as usize].queue.is_empty() {
            return;
        }
        self.settle(cpu);
        let now = self.k.now;
        let t = &mut self.k.tasks[task as usize];
        t.phase = TaskPhase::Queued(cpu);
        t.enqueued_at = now;
        self.k.cpus[cpu as usize].queue.push_back(task);
        self.k.nr_queued += 1;
        self.put_prev(cpu, PrevState::Runnable);
    }

    /// Moves a queued `task` to `cpu` (policy request or balancing).
    pub(crate) fn migrate_queued(&mut self, task: u32, cpu: Cpu) {
        let TaskPhase::Queued(from) = self.k.task_phase(task) else {
            return;
        };
        if from == cpu || cpu as usize >= self.k.cpus.len() {
            return;
        }
        // Balancing and policies move a task only where it may run; in a
        // release build a move elsewhere is dropped.
        let allowed = self.k.allowed(task, cpu);
        debug_assert!(
            allowed,
            "move of task {task} to CPU {cpu}, where it may not run"
        );
        if !allowed {
            return;
        }
        if self.k.cfs.is_some() {
            // dequeue_entity(): update_curr(), then the lag is kept.
            self.k.update_min_vruntime(from);
        }
        let q = &mut self.k.cpus[from as usize].queue;
        let Some(i) = q.iter().position(|&t| t == task) else {
            return;
        };
        q.remove(i);
        self.k.nr_queued -= 1;
        self.enqueue_moved(task, cpu);
    }

    /// Enqueues a task taken off another queue, keeping its wait time.
    fn enqueue_moved(&mut self, task: u32, cpu: Cpu) {
        let since = self.k.tasks[task as usize].enqueued_at;
        self.enqueue_since(task, cpu, since);
    }
}

/// `ns.max(0.0).ceil() as u64` without the libm call `ceil` is on x86-64
/// (this runs for every run segment). Exact: below 2^53 the truncation is
/// exact and is corrected up when `ns` has a fraction; above, `ns` is an
/// integer; beyond u64, both saturate.
fn ceil_ns(ns: f64) -> u64 {
    let ns = ns.max(0.0);
    let t = ns as u64;
    if (t as f64) < ns {
        t.saturating_add(1)
    } else {
        t
    }
}

/// Accounts a task's running time up to `now` and stops its clock.
fn stop_task_clock(t: &mut super::kernel::Task, now: u64) {
    if let Some(s) = t.run_start.take() {
        t.run_in_step += now - s;
        t.stats.run_ns += now - s;
    }
}

#[cfg(test)]
mod tests {
    use super::ceil_ns;

    #[test]
    fn ceil_ns_is_ceil() {
        let cases = [
            -3.5,
            -0.0,
            0.0,
            1e-300,
            0.5,
            1.0,
            1.0000001,
            2_000_000.4,
            4503599627370495.5,
            9007199254740993.0,
            1.8e19,
            1e30,
            f64::INFINITY,
            f64::NAN,
        ];
        for x in cases {
            assert_eq!(ceil_ns(x), x.max(0.0).ceil() as u64, "{x}");
        }
    }
}
