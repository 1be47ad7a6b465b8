//! A virtual machine's vCPU wake-up (the machine file's `vcpu_wakeup`):
//! a task placed on an idle vCPU starts only once the host has woken and
//! scheduled the vCPU's thread, after a delay drawn from the distribution
//! measured in the guest for as many other busy vCPUs.
//!
//! Meanwhile the task waits in the vCPU's run queue and the vCPU is
//! between two tasks (`switching`): it is not idle for placements (as
//! sched_ext's idle mask no longer holds a CPU claimed for a task), later
//! wakeups aimed at it queue behind the task, and kicks find it busy.

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
        if self.k.cpus[cpu as usize].spin.is_some() {
            return false;
        }
        let busy = self.k.cpus.iter().filter(|c| c.curr.is_some()).count() as u32;
        let at = self.k.now + model.delay_ns(busy, self.k.vcpu_rng.unit());
        let c = &mut self.k.cpus[cpu as usize];
        c.switching = true;
        c.queue.push_back(task);
        self.k.nr_queued += 1;
        self.k.push(at, Ev::VcpuUp { cpu });
        true
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
