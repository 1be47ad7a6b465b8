//! Kernel states built by hand for the policies' unit tests.

use nest_trace::Cpu;

use super::TaskId;
use crate::engine::{Kernel, TaskPhase};
use crate::workload::builtin;
use crate::{Governor, Machine, SimConfig};

/// A machine model's kernel before anything ran.
pub fn kernel(machine: &str) -> Kernel {
    let m = Machine::builtin(machine).unwrap();
    let w = builtin::build("configure", m.nr_cores()).unwrap();
    Kernel::new(SimConfig::new(m, Governor::Performance, 1), &w)
}

/// The 2 sockets x 4 cores x 2 threads guest: LLC 0 (socket 0) holds
/// CPUs 0-3 and their SMT siblings 8-11, LLC 1 CPUs 4-7 and 12-15.
pub fn guest() -> Kernel {
    kernel("test-guest-2s")
}

/// Runs a new task of utilisation `util` on each of `cpus`.
pub fn busy(k: &mut Kernel, cpus: &[Cpu], util: f64) {
    for &c in cpus {
        let t = k.test_task(c, util);
        k.cpus[c as usize].curr = Some(t);
        k.cpus[c as usize].util = util;
    }
}

/// A guest whose CPUs all run a task of utilisation `util` but `idle`.
pub fn guest_busy_but(idle: &[Cpu], util: f64) -> Kernel {
    let mut k = guest();
    let cpus: Vec<Cpu> = (0..16).filter(|c| !idle.contains(c)).collect();
    busy(&mut k, &cpus, util);
    k
}

/// A task of utilisation `util` waiting on `cpu`, which last ran `ran_ago`
/// ns ago (`None`: never).
pub fn waiting(k: &mut Kernel, cpu: Cpu, util: f64, ran_ago: Option<u64>) -> TaskId {
    let t = k.test_task(cpu, util);
    let task = &mut k.tasks[t as usize];
    task.phase = TaskPhase::Queued(cpu);
    task.fair.exec_start = ran_ago.map(|ago| k.now - ago);
    k.cpus[cpu as usize].queue.push_back(t);
    k.nr_queued += 1;
    t
}
