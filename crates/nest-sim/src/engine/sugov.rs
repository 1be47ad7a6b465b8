//! schedutil (kernel/sched/cpufreq_schedutil.c) driving intel_pstate in
//! passive mode (intel_cpufreq), one policy per CPU: when a CPU's
//! frequency request is re-evaluated, and from what.
//!
//! - The request is re-evaluated only by events on the CPU itself
//!   (`cpufreq_update_util()` from a PELT update of its run queue, run on
//!   that CPU: intel_cpufreq writes its own CPU's MSR, so
//!   `cpufreq_this_cpu_can_update()` drops the updates other CPUs raise):
//!   its tick while it runs a task, a task leaving it (blocking, exiting,
//!   preempted), a task enqueued on it by itself (a wakeup or fork raised
//!   on that CPU), and, under a sched_ext scheduler, the scheduler setting
//!   its performance target as a task starts (`scx_bpf_cpuperf_set()`).
//!   An idle CPU keeps its last request: a task placed on it from
//!   elsewhere starts at that request until the CPU's first tick.
//! - At most once per rate limit (`sugov_should_update_freq()`;
//!   intel_cpufreq's `transition_delay_us`, [`PStateControl::rate_limit_ns`]),
//!   counted from the last change of the request (`sugov_update_next_freq()`),
//!   or from every evaluation on the HWP path of 5.11 and later
//!   (`sugov_update_single_perf()`).
//! - A CPU that has not been idle since the last evaluation keeps a
//!   higher earlier request (`sugov_cpu_is_busy()`, `sugov_hold_freq()`).
//! - The utilisation read (`sugov_get_util()`, `cpu_util_cfs()`): the
//!   larger of the CPU's PELT utilisation (its tasks', blocked ones
//!   included) and the `util_est` of the tasks on its run queue; from 6.5
//!   on also its runnable average (`cpu_util_cfs_boost()`). Under a
//!   sched_ext scheduler, the scheduler's performance target instead
//!   (`scx_cpuperf_target()`). The sums are those of the last 1 ms step.

use nest_trace::Cpu;

use super::Sim;
use crate::governor::{Governor, schedutil_request_mhz};
use crate::machine::PStateControl;
use crate::policy::fork_balance::LinuxVersion;

/// schedutil's state for one CPU.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SugovCpu {
    /// The CPU's request, MHz (0 until the first evaluation: the lowest).
    pub request_mhz: f64,
    /// When the rate limit started counting (`last_freq_update_time`).
    last_update_ns: Option<u64>,
    /// The CPU went idle since the last evaluation.
    pub idle_since_update: bool,
}

impl Sim<'_> {
    /// `sugov_update_single_*()` on `cpu`, for an event on `cpu` itself.
    pub(crate) fn sugov_update(&mut self, cpu: Cpu) {
        let gov = self.k.cfg.governor;
        if !gov.is_schedutil() {
            return;
        }
        let now = self.k.now;
        let control = self.k.machine.dynamics.control;
        let s = self.k.cpus[cpu as usize].sugov;
        if s.last_update_ns
            .is_some_and(|last| now - last < control.rate_limit_ns())
        {
            return;
        }
        let util = self.sugov_util(cpu);
        let mut request = schedutil_request_mhz(&self.k.machine, util);
        if !s.idle_since_update && request < s.request_mhz {
            request = s.request_mhz;
        }
        // adjust_perf exists only with HWP, from 5.11 (the `schedutil`
        // governor's kernels).
        let perf_path = gov == Governor::Schedutil && control == PStateControl::Hwp;
        let s = &mut self.k.cpus[cpu as usize].sugov;
        if perf_path || request != s.request_mhz {
            s.last_update_ns = Some(now);
        }
        s.request_mhz = request;
        s.idle_since_update = false;
    }

    /// The utilisation schedutil reads for `cpu`, in [0, 1].
    fn sugov_util(&self, cpu: Cpu) -> f64 {
        if self.k.cfg.governor == Governor::Schedutil
            && let Some(target) = self.policy.perf_target(cpu)
        {
            return f64::from(target) / f64::from(nest_policy::PERF_ONE);
        }
        let k = &self.k;
        let kernel = k.cfg.linux;
        let c = &k.cpus[cpu as usize];
        let queued: f64 = c
            .curr
            .iter()
            .chain(&c.queue)
            .map(|&t| k.tasks[t as usize].util_est.estimate(kernel))
            .sum();
        let util = match kernel {
            LinuxVersion::Linux510 => c.util.max(queued),
            LinuxVersion::Linux7 => c.util.max(c.runnable).max(queued),
        };
        util.min(1.0)
    }
}
