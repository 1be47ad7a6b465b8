//! A virtual machine's vCPU wake-up (the machine file's `vcpu_wakeup`):
//! a task placed on an idle vCPU starts only once the host has woken and
//! scheduled the vCPU's thread, after a delay drawn from the distribution
//! measured in the guest for as many other busy vCPUs and a vCPU idle
//! about as long (a thread asleep for longer wakes later), or the delay
//! the workload gives for the task's start (a replay's, recorded at the
//! same wakeup in the guest: `Op::VcpuWakeup`). The vCPU that
//! raised the wakeup (a timer or interrupt ending a sleep there) is
//! awake: the guest measures only wake-ups of other vCPUs, and the host's
//! waking of this one lies within the recorded sleep.
//!
//! Meanwhile the task waits in the vCPU's run queue and the vCPU is
//! between two tasks (`switching`): it is not idle for placements (as
//! sched_ext's idle mask no longer holds a CPU claimed for a task), later
//! wakeups aimed at it queue behind the task, and kicks find it busy.
//!
//! A busy vCPU learns of a kick to preempt its task (`scx_bpf_kick_cpu()`
//! with `SCX_KICK_PREEMPT`; in kernel/sched/ext.c, `kick_one_cpu()` zeroes
//! the task's slice and calls `resched_curr()`, whose IPI makes the vCPU
//! schedule) only when the host runs its thread again, so the task runs on
//! until then, after a delay drawn from the same distribution: with more vCPUs
//! busy than host CPUs, the thread waits for a host CPU as a woken one
//! does. Meanwhile other CPUs may take the queued task that asked for the
//! preemption. If the task was switched out meanwhile, the kick preempts
//! nothing (`resched_curr()` flags the task, not the CPU).

use nest_trace::Cpu;

use super::{Ev, Sim};
use crate::rng::Rng;

/// Salt of the wake-up delays' random stream (apart from the tasks').
const VCPU_RNG_SALT: u64 = u64::MAX;

/// The random stream of vCPU wake-up delays of a run with `seed`.
pub(crate) fn vcpu_rng(seed: u64) -> Rng {
    Rng::derive(seed, VCPU_RNG_SALT)
}

impl Sim<'_> {
    /// Starts waking idle `cpu` for `task` if the machine is a guest whose
    /// vCPUs take time to wake; returns false if `task` may start at once
    /// (no such model, or a warm-spinning vCPU, which is running).
    pub(super) fn delay_vcpu_start(&mut self, cpu: Cpu, task: u32) -> bool {
        let Some(model) = &self.k.machine.vcpu_wakeup else {
            return false;
        };
        let c = &self.k.cpus[cpu as usize];
        // The vCPU that raised the wakeup is running: in the guest the
        // host woke it for the timer or interrupt before the kernel traced
        // the wakeup there (`sched_wakeup`, from `ttwu_do_activate()` in
        // kernel/sched/core.c), within the recorded sleep. A
        // warm-spinning vCPU is running too.
        if c.spin.is_some() || self.k.waking_cpu == Some(cpu) {
            return false;
        }
        let idle_ns = self.k.now.saturating_sub(c.idle_since);
        let delay_ns = match self.k.tasks[task as usize].next_vcpu_wakeup_ns.take() {
            Some(recorded) => recorded,
            None => model.delay_ns(self.busy_cpus(), idle_ns, self.k.vcpu_rng.unit()),
        };
        let at = self.k.now + delay_ns;
        let c = &mut self.k.cpus[cpu as usize];
        c.switching = true;
        c.queue.push_back(task);
        self.k.nr_queued += 1;
        self.k.push(at, Ev::VcpuUp { cpu });
        true
    }

    /// Starts kicking busy `cpu` to preempt its task if the machine is a
    /// guest whose vCPUs take time to notice; returns false if the kick
    /// preempts at once (no such model). A kick already on its way to the
    /// same task covers this one.
    pub(super) fn delay_vcpu_kick(&mut self, cpu: Cpu) -> bool {
        let Some(model) = &self.k.machine.vcpu_wakeup else {
            return false;
        };
        let c = &self.k.cpus[cpu as usize];
        let Some(task) = c.curr else {
            return false;
        };
        if c.kicked_to_preempt == Some(task) {
            return true;
        }
        // A busy vCPU's thread is awake: the short idle classes.
        let at = self.k.now + model.delay_ns(self.busy_cpus(), 0, self.k.vcpu_rng.unit());
        self.k.cpus[cpu as usize].kicked_to_preempt = Some(task);
        self.k.push(at, Ev::VcpuKicked { cpu, task });
        true
    }

    /// A kick to preempt `task` reaches `cpu`: it ends the task's slice if
    /// the task still runs there.
    pub(super) fn vcpu_kicked(&mut self, cpu: Cpu, task: u32) {
        let c = &mut self.k.cpus[cpu as usize];
        if c.kicked_to_preempt != Some(task) {
            return;
        }
        c.kicked_to_preempt = None;
        if c.curr == Some(task) {
            self.end_slice(cpu);
        }
    }

    /// How many vCPUs run a task (the delay distribution's classes).
    fn busy_cpus(&self) -> u32 {
        self.k.cpus.iter().filter(|c| c.curr.is_some()).count() as u32
    }

    /// `cpu`'s thread runs again: it starts the first task of its run
    /// queue, or, if that task was moved meanwhile, looks for work as a
    /// kicked CPU does.
    pub(super) fn vcpu_up(&mut self, cpu: Cpu) {
        let c = &mut self.k.cpus[cpu as usize];
        c.switching = false;
        match c.queue.pop_front() {
            Some(task) => {
                self.k.nr_queued -= 1;
                self.switch_to(cpu, task, None);
            }
            None => self.kick(cpu, false),
        }
    }
}
