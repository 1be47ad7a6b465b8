//! Idle states (C-states) of cores: which one a core enters when its last
//! thread stops being active, what it draws there, and how long a wake-up
//! takes to get it running again (the machine file's `power.idle_states`).
//!
//! The choice follows the kernel's menu governor (drivers/cpuidle/
//! governors/menu.c, `menu_select()`) in a simplified form: the predicted
//! idle time is the core's previous idle period (menu's
//! `get_typical_interval()` over one sample), and the core enters the
//! deepest state whose target residency that prediction covers. A core
//! that predicted a short idle keeps its tick (menu does not stop the tick
//! when the prediction is shorter than TICK_NSEC), and the tick's wake-up
//! re-selects: a core still idle one tick later is in the deepest state.
//! A warm-spinning core is active, in no idle state: a task placed on it
//! starts at once. Only whole cores sleep: a thread whose SMT sibling is
//! active wakes without latency (thread-level states are not modelled).

use super::Sim;
use super::kernel::Kernel;

/// One core's idle state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CoreIdle {
    /// Idle (no thread active) since, or `None` while active.
    pub since: Option<u64>,
    /// Index in `idle_states` of the state entered (while idle) or left
    /// (since the core woke).
    pub state: usize,
    /// Length of the core's last idle period: the prediction for the next.
    pub last_idle_ns: u64,
    /// A wake-up from `state` completes at this time: the core runs nothing
    /// before.
    pub ready_at: u64,
}

impl CoreIdle {
    /// A core idle since before the run: in the deepest state.
    pub(crate) fn new(deepest: usize) -> Self {
        Self {
            since: Some(0),
            state: deepest,
            last_idle_ns: u64::MAX,
            ready_at: 0,
        }
    }
}

impl Kernel {
    /// The deepest idle state whose target residency `predicted_ns` covers
    /// (the shallowest if none).
    fn idle_state_for(&self, predicted_ns: u64) -> usize {
        let states = &self.machine.power.idle_states;
        states
            .iter()
            .rposition(|s| s.target_residency_us.saturating_mul(1000) <= predicted_ns)
            .unwrap_or(0)
    }

    /// The state of idle `core` at time `at` (see the module documentation
    /// for the tick's re-selection).
    fn idle_state_at(&self, core: usize, at: u64) -> usize {
        let idle = &self.core_idle[core];
        match idle.since {
            Some(since) if at.saturating_sub(since) >= self.cfg.tick_ns() => {
                self.machine.power.deepest_idle_index()
            }
            _ => idle.state,
        }
    }

    /// Power of `core`'s idle state now (the one it last left, if it is
    /// active): what it draws while not active.
    pub(crate) fn idle_power_w(&self, core: usize) -> f64 {
        let state = self.idle_state_at(core, self.now);
        self.machine.power.idle_states[state].core_w
    }

    /// When `core`'s last wake-up completes.
    pub(crate) fn core_ready_at(&self, core: usize) -> u64 {
        self.core_idle[core].ready_at
    }

    fn core_active(&self, core: usize) -> bool {
        self.core_cpus[core]
            .iter()
            .any(|&c| self.cpus[c as usize].active_since.is_some())
    }
}

impl Sim<'_> {
    /// A thread of `core` stopped being active: the core goes idle if it
    /// was the last.
    pub(crate) fn core_may_sleep(&mut self, core: usize) {
        if self.k.core_active(core) {
            return;
        }
        let predicted = self.k.core_idle[core].last_idle_ns;
        let state = self.k.idle_state_for(predicted);
        let idle = &mut self.k.core_idle[core];
        idle.since = Some(self.k.now);
        idle.state = state;
    }

    /// A thread of `core` becomes active: if the core was idle it wakes,
    /// and runs nothing before its state's exit latency has passed.
    pub(crate) fn core_wakes(&mut self, core: usize) {
        let now = self.k.now;
        let Some(since) = self.k.core_idle[core].since else {
            return;
        };
        let state = self.k.idle_state_at(core, now);
        let exit_ns = self.k.machine.power.idle_states[state].exit_latency_us * 1000;
        let idle = &mut self.k.core_idle[core];
        idle.since = None;
        idle.state = state;
        // A spin started as its CPU went idle: the core never slept.
        if now > since {
            idle.last_idle_ns = now - since;
            idle.ready_at = now + exit_ns;
            self.k.stats.core_wakeups[state] += 1;
            self.k.stats.exit_latency_ns += exit_ns;
        }
    }
}
