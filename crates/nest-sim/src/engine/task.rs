//! Task life: creation, wakeup, the program interpreter, exit.

use nest_trace::{Cpu, EventKind};

use super::kernel::{Kernel, Remaining, Task, TaskPhase, TaskStats};
use super::{Ev, Sim};
use crate::cpuset::CpuSet;
use crate::policy::{Ctx, Enqueue, Wake};
use crate::rng::Rng;
use crate::workload::{Amount, Op};

/// How a new task starts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    /// Forked: placed by the policy as a fork.
    Fork,
    /// On the given CPU itself, placed as a task allowed on that CPU alone
    /// is (`select_task_rq()` does not ask the scheduler), its own CPUs
    /// applying from its first wakeup on.
    Stay,
    /// As a task that existed before, woken with the given CPU as its
    /// previous one: placed by the policy as a wakeup.
    Woken,
}

/// What the running task does after interpreting its next operations.
pub(crate) enum Outcome {
    /// Computes or busy-waits: `remaining` is set.
    Compute,
    /// Blocked (sleep, barrier, lock, channel, children).
    Block,
    Exit,
}

impl Sim<'_> {
    /// Creates an initial task of `program`: on its `start_cpu`, woken
    /// from its `prev_cpu`, else forked from CPU 0.
    pub(crate) fn spawn_initial(&mut self, program: usize) {
        let p = &self.k.workload.programs[program];
        match (p.start_cpu, p.prev_cpu) {
            (Some(cpu), _) => self.spawn_on(program, None, cpu, Start::Stay),
            (None, Some(prev)) => self.spawn_on(program, None, prev, Start::Woken),
            (None, None) => self.spawn(program, None, 0),
        }
    }

    /// Creates a task running `program`, forked by `parent` on `cpu`.
    pub(crate) fn spawn(&mut self, program: usize, parent: Option<u32>, cpu: Cpu) {
        self.spawn_on(program, parent, cpu, Start::Fork);
    }

    /// [`Self::spawn`], started as `start` says ([`Start::Stay`], on `cpu`
    /// itself; [`Start::Woken`], woken with `cpu` as its previous CPU).
    fn spawn_on(&mut self, program: usize, parent: Option<u32>, cpu: Cpu, start: Start) {
        let stay = start == Start::Stay;
        let k = &mut self.k;
        let id = k.tasks.len() as u32;
        let comm = k.workload.programs[program].name.clone();
        let stats = TaskStats {
            pid: Kernel::pid(id),
            comm,
            start_ns: k.now,
            ..TaskStats::default()
        };
        let rng = Rng::derive(k.cfg.seed, u64::from(id));
        let cpus = match &k.workload.programs[program].cpus {
            Some(cpus) => Some(CpuSet::of(cpus)),
            None => parent.and_then(|p| k.tasks[p as usize].cpus.clone()),
        };
        let mut task = Task::new(program, parent, cpu, rng, cpus, stats);
        task.next_vcpu_wakeup_ns = k.workload.programs[program].first_vcpu_wakeup_ns;
        let own_cpus = stay.then(|| task.cpus.replace(CpuSet::of(&[cpu])));
        k.tasks.push(task);
        k.live_tasks += 1;
        k.live.push(id);
        if let Some(p) = parent {
            k.tasks[p as usize].live_children += 1;
        }
        let parent_pid = parent.map_or(0, Kernel::pid);
        k.emit_with(cpu, |k| EventKind::NewTask {
            parent: parent_pid,
            child: Kernel::pid(id),
            comm: k.tasks[id as usize].stats.comm.clone(),
        });
        // sched_fork() -> task_fork_fair(), before the placement.
        self.place_new(id, parent, cpu);
        let target = match start {
            Start::Woken => self.select(id, cpu, None, Wake::Wakeup { sync: false }),
            Start::Fork | Start::Stay => self.select(id, cpu, parent.map(|_| cpu), Wake::Fork),
        };
        let util = crate::pelt::post_init_util(self.k.cpus[target as usize].util);
        let t = &mut self.k.tasks[id as usize];
        if let Some(own) = own_cpus {
            t.cpus = own;
        }
        t.util = util;
        t.cpu = target;
        self.k.cpus[target as usize].util += util;
        // As Linux's sched_wakeup_new: where the new task was placed.
        self.k.emit(
            cpu,
            EventKind::Wakeup {
                pid: Kernel::pid(id),
                target_cpu: target,
                waker: None,
            },
        );
        let why = match start {
            Start::Fork | Start::Stay => Enqueue::New,
            Start::Woken => Enqueue::Wakeup,
        };
        self.enqueue_raised_on(id, target, cpu, why);
    }

    /// Wakes a blocked task; `waker` is the CPU that caused it, if any;
    /// `sync`: the waker is about to sleep (`WF_SYNC`).
    pub(crate) fn wake(&mut self, task: u32, waker: Option<Cpu>, sync: bool) {
        if self.k.tasks[task as usize].phase != TaskPhase::Blocked {
            return;
        }
        let prev = self.k.tasks[task as usize].cpu;
        let target = self.select(task, prev, waker, Wake::Wakeup { sync });
        if target != prev {
            self.remove_util(prev, self.k.tasks[task as usize].util);
        }
        self.k.update_avg_idle(target);
        self.k.place_woken(task, target);
        let from = waker.unwrap_or(prev);
        let pid = Kernel::pid(task);
        self.k.emit(
            from,
            EventKind::Wakeup {
                pid,
                target_cpu: target,
                waker: None,
            },
        );
        self.enqueue_raised_on(task, target, from, Enqueue::Wakeup);
    }

    /// Enqueues a woken or new `task` (`why`) on `target`, the wakeup
    /// raised on CPU `raised_on` ([`Kernel::waking_cpu`] while it is
    /// placed).
    fn enqueue_raised_on(&mut self, task: u32, target: Cpu, raised_on: Cpu, why: Enqueue) {
        self.k.waking_cpu = Some(raised_on);
        self.enqueue(task, target, why);
        self.k.waking_cpu = None;
        if raised_on == target {
            // The enqueue's PELT update runs on the CPU itself.
            self.sugov_update(target);
        }
    }

    /// `select_task_rq()` (kernel/sched/core.c): the policy's choice only
    /// for a task that may run on more than one CPU (`p->nr_cpus_allowed >
    /// 1`), else its one CPU; a choice out of range, or one the task may
    /// not run on, falls back (`select_fallback_rq()`). Then the policy
    /// learns where the task becomes runnable ([`Policy::runnable`]).
    fn select(&mut self, task: u32, prev: Cpu, waker: Option<Cpu>, why: Wake) -> Cpu {
        let cpu = match self.k.only_cpu(task) {
            Some(cpu) => cpu,
            None => {
                let cx = &mut Ctx { k: &mut self.k };
                let cpu = self.policy.select_cpu(cx, task, prev, waker, why);
                let cpu = if (cpu as usize) < self.k.cpus.len() {
                    cpu
                } else {
                    prev
                };
                if self.k.allowed(task, cpu) {
                    cpu
                } else {
                    self.k.fallback_cpu(task, cpu)
                }
            }
        };
        self.policy.runnable(&mut Ctx { k: &mut self.k }, task, cpu);
        self.apply_actions();
        cpu
    }

    /// Interprets `task`'s program (it runs on `cpu`) until it computes,
    /// blocks or exits.
    pub(crate) fn advance(&mut self, task: u32, cpu: Cpu) -> Outcome {
        loop {
            let t = &mut self.k.tasks[task as usize];
            let ops = &self.k.workload.programs[t.program].ops;
            let Some(op) = ops.get(t.pc).cloned() else {
                return Outcome::Exit;
            };
            t.pc += 1;
            if let Some(outcome) = self.exec(task, cpu, op) {
                return outcome;
            }
        }
    }

    /// Executes one operation; `None` means "go on with the next one".
    fn exec(&mut self, task: u32, cpu: Cpu, op: Op) -> Option<Outcome> {
        let now = self.k.now;
        let nominal_ghz = f64::from(self.k.machine.frequency.nominal_mhz) / 1000.0;
        let t = &mut self.k.tasks[task as usize];
        match op {
            Op::Run(a) => {
                t.remaining = Remaining::Work(draw(&mut t.rng, a) as f64 * nominal_ghz);
                Some(Outcome::Compute)
            }
            Op::RunTime(a) => {
                t.remaining = Remaining::Time(draw(&mut t.rng, a) as f64);
                Some(Outcome::Compute)
            }
            Op::Sleep(a) => {
                let d = draw(&mut t.rng, a);
                self.k.push(now + d, Ev::WakeTask { task });
                Some(Outcome::Block)
            }
            Op::Timer { id, period_ns } => self.timer(task, id, period_ns),
            Op::LoopStart { count } => {
                t.loops.push(if count == 0 { u64::MAX } else { count });
                None
            }
            Op::LoopEnd { start } => {
                if let Some(n) = t.loops.last_mut() {
                    *n = n.saturating_sub(1);
                    if *n > 0 {
                        t.pc = start + 1;
                    } else {
                        t.loops.pop();
                    }
                }
                None
            }
            Op::Fork { program } => {
                self.spawn(program, Some(task), cpu);
                None
            }
            Op::WaitChildren => {
                if t.live_children == 0 {
                    return None;
                }
                t.waiting_children = true;
                Some(Outcome::Block)
            }
            Op::Barrier(b) => self.barrier(task, cpu, b),
            Op::Lock(l) => self.lock(task, l),
            Op::Unlock(l) => {
                self.unlock(l, cpu);
                None
            }
            Op::Send { chan, sync } => {
                self.send(chan, cpu, sync);
                None
            }
            Op::Recv(c) => self.recv(task, c),
            Op::VcpuWakeup(ns) => {
                t.next_vcpu_wakeup_ns = Some(ns);
                None
            }
        }
    }

    fn timer(&mut self, task: u32, id: usize, period_ns: u64) -> Option<Outcome> {
        let now = self.k.now;
        let t = &mut self.k.tasks[task as usize];
        if t.timers.len() <= id {
            t.timers.resize(id + 1, 0);
        }
        if t.timers[id] == 0 {
            t.timers[id] = now;
        }
        t.timers[id] += period_ns;
        let at = t.timers[id];
        if at <= now {
            return None; // late: rt-app runs the next activation at once
        }
        self.k.push(at, Ev::WakeTask { task });
        Some(Outcome::Block)
    }

    fn barrier(&mut self, task: u32, cpu: Cpu, b: usize) -> Option<Outcome> {
        let need = self.k.workload.barriers[b];
        let bar = &mut self.k.barriers[b];
        bar.arrived += 1;
        if bar.arrived < need {
            bar.waiters.push(task);
            return Some(Outcome::Block);
        }
        bar.arrived = 0;
        let mut waiters = std::mem::take(&mut bar.waiters);
        for &w in &waiters {
            self.wake(w, Some(cpu), false);
        }
        // Give the buffer back (no allocation at the next phase) unless a
        // woken task already arrived at the barrier again.
        waiters.clear();
        let bar = &mut self.k.barriers[b];
        if bar.waiters.is_empty() {
            bar.waiters = waiters;
        }
        None
    }

    fn lock(&mut self, task: u32, l: usize) -> Option<Outcome> {
        let lock = &mut self.k.locks[l];
        if lock.owner.is_none() {
            lock.owner = Some(task);
            return None;
        }
        lock.waiters.push_back(task);
        Some(Outcome::Block)
    }

    /// Releases lock `l`, handing it to the first waiter.
    fn unlock(&mut self, l: usize, cpu: Cpu) {
        let lock = &mut self.k.locks[l];
        lock.owner = lock.waiters.pop_front();
        if let Some(next) = lock.owner {
            self.wake(next, Some(cpu), false);
        }
    }

    fn send(&mut self, c: usize, cpu: Cpu, sync: bool) {
        let ch = &mut self.k.channels[c];
        match ch.waiters.pop_front() {
            Some(r) => self.wake(r, Some(cpu), sync),
            None => ch.messages += 1,
        }
    }

    fn recv(&mut self, task: u32, c: usize) -> Option<Outcome> {
        let ch = &mut self.k.channels[c];
        if ch.messages > 0 {
            ch.messages -= 1;
            return None;
        }
        ch.waiters.push_back(task);
        Some(Outcome::Block)
    }

    /// Marks `task` dead and notifies its parent (on `cpu`).
    pub(crate) fn exit(&mut self, task: u32, cpu: Cpu) {
        let now = self.k.now;
        let t = &mut self.k.tasks[task as usize];
        t.phase = TaskPhase::Dead;
        t.stats.end_ns = Some(now);
        let parent = t.parent;
        let (util_cpu, util) = (t.cpu, t.util);
        self.k.util_stale.push(util_cpu);
        self.remove_util(util_cpu, util);
        self.k.live_tasks -= 1;
        if let Some(i) = self.k.live.iter().position(|&x| x == task) {
            self.k.live.remove(i);
        }
        self.k.emit(
            cpu,
            EventKind::Exit {
                pid: Kernel::pid(task),
            },
        );
        self.policy
            .task_exit(&mut Ctx { k: &mut self.k }, task, cpu);
        self.apply_actions();
        let Some(p) = parent else { return };
        let pt = &mut self.k.tasks[p as usize];
        pt.live_children -= 1;
        if pt.live_children == 0 && pt.waiting_children {
            pt.waiting_children = false;
            self.wake(p, Some(cpu), false);
        }
    }
}

fn draw(rng: &mut Rng, a: Amount) -> u64 {
    match a {
        Amount::Fixed(v) => v,
        Amount::Uniform(lo, hi) => rng.range(lo, hi),
    }
}
