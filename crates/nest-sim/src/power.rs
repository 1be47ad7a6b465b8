//! Per-socket power model (see docs/design/simulator.md, "Power model").
//!
//! - While no core of the whole machine is active, each socket draws
//!   `package_idle_w` (package C-state).
//! - Otherwise every socket draws `uncore_active_w` (all sockets stay in a
//!   high-availability state so that their memory is reachable), plus, for
//!   each core, the power of its idle state (`idle_states`, see
//!   `engine/idle.rs`) while idle, `core_static_w + dynamic` while running
//!   a task and `core_static_w + spin_dynamic_share * dynamic` while
//!   warm-spinning, where `dynamic = core_dynamic_w_at_nominal * f/f_nom *
//!   (V/V_nom)^2`.
//! - The voltage V is shared by the socket and follows its fastest active
//!   core ("package power follows the highest-frequency core"); V is linear
//!   in f between `voltage_at_min_v` and `voltage_at_max_v`.
//! - No RAPL/TDP limiting is modelled.

use crate::machine::Machine;

/// What one physical core did during an accounting step.
#[derive(Clone, Copy, Debug)]
pub struct CoreSample {
    /// Share of the step the core was active (running a task or
    /// warm-spinning), in [0, 1].
    pub active: f64,
    /// Share of the step it ran a task, at most `active`: the rest of
    /// `active` it spun.
    pub running: f64,
    pub mhz: u32,
    /// Power of its idle state, for the rest of the step.
    pub idle_w: f64,
}

/// Supply voltage needed to run at `mhz`.
pub fn voltage(m: &Machine, mhz: u32) -> f64 {
    let f = &m.frequency;
    let p = &m.power;
    let span = f64::from(f.max_mhz.saturating_sub(f.min_mhz)).max(1.0);
    let x = (f64::from(mhz.saturating_sub(f.min_mhz)) / span).clamp(0.0, 1.0);
    p.voltage_at_min_v + (p.voltage_at_max_v - p.voltage_at_min_v) * x
}

/// Power (W) of one socket whose cores behaved as `cores` during a step,
/// plus `idle_cores` more cores idle all along. `machine_active` tells
/// whether any core of the machine was active.
pub fn socket_power_w(
    m: &Machine,
    cores: &[CoreSample],
    idle_cores: usize,
    machine_active: bool,
) -> f64 {
    let p = &m.power;
    if !machine_active {
        return p.package_idle_w;
    }
    let socket_mhz = cores
        .iter()
        .filter(|c| c.active > 0.0)
        .map(|c| c.mhz)
        .max()
        .unwrap_or(m.frequency.min_mhz);
    let v_ratio = voltage(m, socket_mhz) / voltage(m, m.frequency.nominal_mhz);
    let nominal = f64::from(m.frequency.nominal_mhz);
    // A core idle all along draws its idle state's power: its other terms
    // are exact zeros (0 times a finite power), not worth computing for
    // the many idle cores a step visits.
    let finite = v_ratio.is_finite();
    let core_w = |c: &CoreSample| {
        if c.active == 0.0 && finite {
            return c.idle_w;
        }
        let dynamic = p.core_dynamic_w_at_nominal * f64::from(c.mhz) / nominal * v_ratio * v_ratio;
        let spinning = c.active - c.running;
        c.active * p.core_static_w
            + (c.running + spinning * p.spin_dynamic_share) * dynamic
            + (1.0 - c.active) * c.idle_w
    };
    p.uncore_active_w
        + cores.iter().map(core_w).sum::<f64>()
        + idle_cores as f64 * p.deepest_idle().core_w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_cores_at_nominal_draw_tdp() {
        for name in Machine::builtin_names() {
            let m = Machine::builtin(name).unwrap();
            let mhz = m.frequency.nominal_mhz;
            let deep_w = m.power.deepest_idle().core_w;
            let sample = |active, running| CoreSample {
                active,
                running,
                mhz,
                idle_w: deep_w,
            };
            let n = m.cores_per_socket as usize;
            let w = socket_power_w(&m, &vec![sample(1.0, 1.0); n], 0, true);
            if name.starts_with("xeon") {
                assert!((w - m.power.tdp_w).abs() < 0.1, "{name}: {w} W");
            }
            let spinning = socket_power_w(&m, &vec![sample(1.0, 0.0); n], 0, true);
            assert!(spinning < w, "{name}: spinning {spinning} W, running {w} W");
            let idle = vec![sample(0.0, 0.0); n];
            assert!(socket_power_w(&m, &idle, 0, true) < w);
            assert!(socket_power_w(&m, &idle, 0, false) < socket_power_w(&m, &idle, 0, true));
            let n = idle.len();
            let all_cold = socket_power_w(&m, &[], n, true);
            assert!((all_cold - socket_power_w(&m, &idle, 0, true)).abs() < 1e-9);
        }
    }
}
