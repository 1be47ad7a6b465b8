//! Per-task utilisation as the fair scheduler tracks it (PELT,
//! kernel/sched/pelt.c and fair.c), in the simulator's units: a share of
//! one CPU at its highest frequency, in [0, 1] (the kernel's 0..1024).
//!
//! The engine updates every live task's averages at each 1 ms step
//! (engine/step.rs) and sums them on the CPU the task was last placed on;
//! schedutil reads the sums (engine/sugov.rs). What is modelled:
//!
//! - geometric averages with a 32 ms half-life (the kernel's 32 periods of
//!   1024 us, 32.8 ms), of running time (`util_avg`) and of runnable time,
//!   running or waiting (`runnable_avg`);
//! - frequency invariance through the PELT clock (`update_rq_clock_pelt()`,
//!   Linux 5.1 and later): while a CPU runs, its clock advances at
//!   `f / f_max`, so a CPU busy without a break converges to full
//!   utilisation at any frequency; when it goes idle the clock catches up
//!   with wall time ([`PeltClock`]);
//! - a new task's utilisation: half its CPU's spare capacity
//!   (`post_init_entity_util_avg()`, [`post_init_util`]);
//! - migration: a task's averages go with it to its new CPU
//!   (`attach_entity_load_avg()`), and leave its old CPU's sum
//!   (`remove_entity_load_avg()`) at that CPU's next update;
//! - `util_est`: what a task's utilisation was when it last went to sleep,
//!   smoothed ([`UtilEst`]), counted for the tasks on a CPU's run queue.

use crate::policy::fork_balance::LinuxVersion;

/// Half-life of the averages.
pub const HALF_LIFE_NS: f64 = 32_000_000.0;

/// `UTIL_EST_MARGIN` (kernel/sched/fair.c): `SCHED_CAPACITY_SCALE / 100`,
/// 10 of 1024.
pub const UTIL_EST_MARGIN: f64 = 10.0 / 1024.0;

/// The factor by which an average decays over `pelt_ns` of PELT time.
/// Not inlined: the compiler would compute the libm call ahead of the
/// branches that cache it ([`PeltClock::step`]), for every CPU.
#[inline(never)]
pub fn decay(pelt_ns: f64) -> f64 {
    (-pelt_ns * std::f64::consts::LN_2 / HALF_LIFE_NS).exp()
}

/// One update of an average towards `contrib` (the share of the period the
/// signal was on, in PELT time) over a period whose decay is `decay`.
pub fn update(avg: f64, contrib: f64, decay: f64) -> f64 {
    avg * decay + (1.0 - decay) * contrib
}

/// A new task's utilisation on a CPU whose utilisation is `cpu_util`
/// (`post_init_entity_util_avg()`): half the spare capacity, `(1024 -
/// util) / 2`. The kernel gives the task the CPU's utilisation per unit of
/// load times its weight, capped there; with nice-0 tasks that do not
/// wait, that share is at least the cap, which is what is modelled.
pub fn post_init_util(cpu_util: f64) -> f64 {
    (1.0 - cpu_util).max(0.0) / 2.0
}

/// How a CPU's PELT clock advanced over one engine step
/// (`update_rq_clock_pelt()`, `update_idle_rq_clock_pelt()`,
/// kernel/sched/pelt.h): at `f / f_max` while the CPU runs; when it goes
/// idle the clock catches up with wall time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PeltClock {
    /// Wall time the clock is behind, released at the next idle period.
    pub lag_ns: f64,
    /// The last step the CPU ran throughout: most such steps repeat it
    /// (same length, same frequency), and [`decay`] is a libm call.
    last_busy: PeltStep,
}

/// The PELT time of one step on one CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PeltStep {
    /// PELT time that passed.
    pub pelt_ns: f64,
    /// PELT time per ns of running (or waiting) time: `f / f_max`.
    pub scale: f64,
    /// [`decay`] of `pelt_ns`.
    pub decay: f64,
}

impl PeltStep {
    /// A step of `dt_ns` of an idle CPU with no lag: wall time.
    pub fn idle(dt_ns: f64) -> Self {
        Self {
            pelt_ns: dt_ns,
            scale: 1.0,
            decay: decay(dt_ns),
        }
    }

    /// The average a signal that was on for `on_ns` of the step moves to.
    pub fn update(&self, avg: f64, on_ns: f64) -> f64 {
        let contrib = (on_ns * self.scale / self.pelt_ns).min(1.0);
        update(avg, contrib, self.decay)
    }
}

impl PeltClock {
    /// Advances over a step in which the CPU ran without a break (`busy`)
    /// or not, its core at `scale` = f / f_max; `idle` is the step of an
    /// idle CPU ([`PeltStep::idle`] of the step's length).
    pub fn step(&mut self, idle: &PeltStep, scale: f64, busy: bool) -> PeltStep {
        let dt_ns = idle.pelt_ns;
        if busy {
            self.lag_ns += (1.0 - scale) * dt_ns;
            let pelt_ns = scale * dt_ns;
            if self.last_busy.pelt_ns != pelt_ns || self.last_busy.scale != scale {
                self.last_busy = PeltStep {
                    pelt_ns,
                    scale,
                    decay: decay(pelt_ns),
                };
            }
            return self.last_busy;
        }
        if self.lag_ns == 0.0 {
            return PeltStep { scale, ..*idle };
        }
        let pelt_ns = dt_ns + self.lag_ns;
        self.lag_ns = 0.0;
        PeltStep {
            pelt_ns,
            scale,
            decay: decay(pelt_ns),
        }
    }
}

/// A task's `util_est` (kernel/sched/fair.c, `util_est_update()`; 5.9's
/// `util_est_dequeue()`): updated each time the task goes to sleep with
/// its utilisation then, `dequeued`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UtilEst {
    /// The utilisation the task had when it last went to sleep (5.9 and
    /// 5.10's `util_est.enqueued`; gone since 6.8).
    pub last: f64,
    /// Exponentially weighted average of those, weight 1/4 per sample,
    /// raised at once when the task grows (`UTIL_EST_FASTUP`, a feature
    /// from 5.5, unconditional since 6.8).
    pub ewma: f64,
}

impl UtilEst {
    /// The estimate counted on a CPU while the task is queued there
    /// (`_task_util_est()`).
    pub fn estimate(&self, kernel: LinuxVersion) -> f64 {
        match kernel {
            LinuxVersion::Linux510 => self.ewma.max(self.last),
            LinuxVersion::Linux7 => self.ewma,
        }
    }

    /// The task went to sleep with utilisation `dequeued` and runnable
    /// average `runnable`.
    pub fn update(&mut self, kernel: LinuxVersion, dequeued: f64, runnable: f64) {
        match kernel {
            LinuxVersion::Linux510 => self.update_5_9(dequeued),
            LinuxVersion::Linux7 => self.update_6_8(dequeued, runnable),
        }
    }

    /// 5.9's `util_est_dequeue()` (5.10's `util_est_update()`).
    fn update_5_9(&mut self, dequeued: f64) {
        self.last = dequeued;
        if self.ewma < dequeued {
            self.ewma = dequeued;
            return;
        }
        let diff = dequeued - self.ewma;
        if diff.abs() < UTIL_EST_MARGIN {
            return;
        }
        self.ewma += diff / 4.0;
    }

    /// `util_est_update()` from 6.8 on: no `enqueued`, and no update from
    /// an activation in which the task waited for a CPU (its runnable
    /// average above its utilisation).
    fn update_6_8(&mut self, dequeued: f64, runnable: f64) {
        if self.ewma <= dequeued {
            self.ewma = dequeued;
            return;
        }
        let diff = self.ewma - dequeued;
        if diff < UTIL_EST_MARGIN || dequeued + UTIL_EST_MARGIN < runnable {
            return;
        }
        self.ewma -= diff / 4.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: f64 = 1_000_000.0;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn an_average_halves_in_a_half_life_and_converges_to_its_duty_cycle() {
        // y^32 = 1/2 per 1 ms: after 32 ms idle, half.
        let mut u = 0.8;
        for _ in 0..32 {
            u = PeltStep::idle(MS).update(u, 0.0);
        }
        assert!(close(u, 0.4), "{u}");
        // Running 1 ms in every 4 at f_max: converges to 1/4.
        let mut u = 0.0;
        for ms in 0..2000 {
            let on = if ms % 4 == 0 { MS } else { 0.0 };
            u = PeltStep::idle(MS).update(u, on);
        }
        assert!((u - 0.25).abs() < 0.01, "{u}");
    }

    #[test]
    fn a_cpu_busy_without_a_break_reaches_full_utilisation_at_any_frequency() {
        // Hand computation: at f = f_max / 2 the PELT clock runs at half
        // speed, so 64 ms of running are one half-life: 0 -> 1/2.
        let mut clock = PeltClock::default();
        let mut u = 0.0;
        for _ in 0..64 {
            let step = clock.step(&PeltStep::idle(MS), 0.5, true);
            u = step.update(u, MS);
        }
        assert!(close(u, 0.5), "{u}");
        assert!(close(clock.lag_ns, 32.0 * MS));
        // It then idles 1 ms: the clock catches up the 32 ms it lagged,
        // plus the 1 ms itself: a decay of 2^(-33/32).
        let step = clock.step(&PeltStep::idle(MS), 0.5, false);
        assert!(close(step.pelt_ns, 33.0 * MS));
        assert!(close(step.update(u, 0.0), 0.5 * 0.5f64.powf(33.0 / 32.0)));
        assert_eq!(clock.lag_ns, 0.0);
    }

    #[test]
    fn with_idle_time_utilisation_is_frequency_invariant() {
        // Half the time running at f_max / 2: the work of a quarter of the
        // CPU at f_max, and utilisation 1/4 (no lag: the CPU idles in
        // every step).
        let mut clock = PeltClock::default();
        let mut u = 0.0;
        for _ in 0..3000 {
            u = clock
                .step(&PeltStep::idle(MS), 0.5, false)
                .update(u, 0.5 * MS);
        }
        assert!((u - 0.25).abs() < 1e-6, "{u}");
    }

    #[test]
    fn a_new_task_gets_half_its_cpus_spare_capacity() {
        // (1024 - 0) / 2 = 512 on an idle CPU; (1024 - 768) / 2 = 128.
        assert_eq!(post_init_util(0.0), 0.5);
        assert_eq!(post_init_util(0.75), 0.125);
        assert_eq!(post_init_util(1.0), 0.0);
    }

    #[test]
    fn util_est_5_9_keeps_the_last_sleep_and_an_average_that_rises_at_once() {
        let k = LinuxVersion::Linux510;
        let mut e = UtilEst::default();
        // 0 -> 0.6: fast up.
        e.update(k, 0.6, 0.6);
        assert_eq!((e.last, e.ewma), (0.6, 0.6));
        // 0.6 -> 0.2: ewma += (0.2 - 0.6) / 4 = 0.5; the estimate is the
        // larger of ewma and the last sample.
        e.update(k, 0.2, 0.2);
        assert!(close(e.ewma, 0.5) && e.last == 0.2);
        assert!(close(e.estimate(k), 0.5));
        // Within 1% (10/1024) of the ewma: no change of the ewma.
        e.update(k, 0.495, 0.495);
        assert!(close(e.ewma, 0.5) && e.last == 0.495);
        // A sleeping task's estimate does not decay.
        assert!(close(e.estimate(k), 0.5));
    }

    #[test]
    fn util_est_6_8_skips_activations_that_waited() {
        let k = LinuxVersion::Linux7;
        let mut e = UtilEst::default();
        e.update(k, 0.8, 0.8);
        assert_eq!(e.ewma, 0.8);
        // Waited (runnable 0.6 > 0.4 + 10/1024): kept.
        e.update(k, 0.4, 0.6);
        assert_eq!(e.ewma, 0.8);
        // Did not wait: ewma -= (0.8 - 0.4) / 4 = 0.7.
        e.update(k, 0.4, 0.4);
        assert!(close(e.ewma, 0.7));
        assert!(close(e.estimate(k), 0.7));
    }
}
