//! Per-core frequency dynamics and the Linux frequency governors.
//!
//! The engine calls [`CoreFreq::step`] for every physical core at a fixed
//! period (1 ms by default) with the share of that period the core was
//! active. The model (see docs/sim.md, "Frequency dynamics"):
//!
//! - *hardware-managed* (`powersave` with HWP, and `performance` with a floor
//!   at nominal): an active core climbs at `(max - min) / ramp_up` per unit of
//!   active time; an idle core, once idle for longer than `down_hold`, falls at
//!   `(max - min) / ramp_down` until it reaches the settling band, then
//!   oscillates with decaying amplitude for `settle` before sitting at min;
//! - `schedutil`: the OS imposes `1.25 * f_max * util / capacity` where util
//!   is a PELT-like average with a 32 ms half-life, re-evaluated at most once
//!   per rate limit (5 ms, intel_pstate with HWP), as Linux 5.11 and later
//!   do; `schedutil-hint` (before 5.11) makes that request a floor under the
//!   hardware-managed dynamics;
//! - every core is capped by its socket's turbo ceiling for the number of
//!   active cores, and runs at a multiple of the P-state step.

use serde::{Deserialize, Serialize};

use crate::machine::Machine;

/// PELT half-life (Linux: 32 periods of 1024 us; we use 32 ms).
pub const PELT_HALF_LIFE_NS: f64 = 32_000_000.0;
/// schedutil's headroom factor.
pub const SCHEDUTIL_MARGIN: f64 = 1.25;
/// intel_pstate's request rate limit with HWP.
pub const SCHEDUTIL_RATE_LIMIT_NS: u64 = 5_000_000;

/// A Linux cpufreq governor (with intel_pstate semantics where they differ).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Governor {
    /// The OS asks for at least nominal; the hardware picks up to turbo.
    Performance,
    /// The hardware picks from its own activity estimate (HWP).
    Powersave,
    /// The OS imposes a frequency from the scheduler's utilisation (HWP
    /// range, Linux 5.11 and later).
    Schedutil,
    /// schedutil before Linux 5.11: the request is only a floor; the
    /// hardware still climbs on its own (HWP) above it.
    SchedutilHint,
}

impl Governor {
    pub const ALL: [Governor; 4] = [
        Governor::Performance,
        Governor::Powersave,
        Governor::Schedutil,
        Governor::SchedutilHint,
    ];

    /// Does it read the scheduler's utilisation (schedutil)?
    fn uses_util(self) -> bool {
        matches!(self, Governor::Schedutil | Governor::SchedutilHint)
    }

    pub fn name(self) -> &'static str {
        match self {
            Governor::Performance => "performance",
            Governor::Powersave => "powersave",
            Governor::Schedutil => "schedutil",
            Governor::SchedutilHint => "schedutil-hint",
        }
    }
}

/// What the engine observed of one physical core over one step.
#[derive(Clone, Copy, Debug)]
pub struct CoreActivity {
    /// Share of the step during which any thread of the core was active
    /// (running a task or warm-spinning), in [0, 1].
    pub active: f64,
    /// How long the core has been continuously idle at the end of the step.
    pub idle_for_ns: u64,
    /// Utilisation (PELT) of the busiest thread of the core, in [0, 1].
    pub util: f64,
    /// Turbo ceiling of the socket for its current active-core count.
    pub ceiling_mhz: u32,
}

/// Frequency state of one physical core (SMT siblings share it).
#[derive(Clone, Debug)]
pub struct CoreFreq {
    /// Internal, continuous frequency the hardware is heading through.
    mhz: f64,
    /// Time spent oscillating in the settling band while idle (0: not).
    settle_ns: u64,
    /// Amplitude (MHz above min) of the current settling oscillation.
    settle_cap: f64,
    /// Time since schedutil last re-evaluated its request.
    since_request_ns: u64,
    /// schedutil's current request, MHz.
    request_mhz: f64,
    /// The effective (quantised, capped) frequency.
    effective_mhz: u32,
    /// Idle and settled: further idle steps change nothing.
    quiet: bool,
    /// Idle and settling under a hardware-managed governor, with an
    /// amplitude too small to reach another P-state: further idle steps
    /// only move `settle_ns` ([`CoreFreq::coast`]), and `mhz` is left
    /// behind until a step needs it.
    coasting: bool,
}

impl CoreFreq {
    /// A core that has been idle for long: at its lowest frequency.
    pub fn new(m: &Machine, gov: Governor) -> Self {
        let floor = floor_mhz(m, gov);
        Self {
            mhz: f64::from(floor),
            settle_ns: u64::MAX / 2,
            settle_cap: 0.0,
            since_request_ns: SCHEDUTIL_RATE_LIMIT_NS,
            request_mhz: 0.0,
            effective_mhz: floor,
            quiet: false,
            coasting: false,
        }
    }

    /// Idle and settled at its floor: idle steps change nothing.
    pub fn is_quiet(&self) -> bool {
        self.quiet
    }

    /// The frequency the core runs at now, in MHz.
    pub fn mhz(&self) -> u32 {
        self.effective_mhz
    }

    /// Advances the core by `dt_ns`; returns the new effective frequency.
    /// Inlined for the idle steps that change nothing or only coast, most
    /// steps of most cores; the others call [`CoreFreq::move_step`].
    #[inline]
    pub fn step(&mut self, m: &Machine, gov: Governor, dt_ns: u64, act: CoreActivity) -> u32 {
        let idle = act.active == 0.0 && (!gov.uses_util() || act.util < 1e-9);
        if idle && (self.quiet || self.coasting && self.coast(m, dt_ns, act)) {
            return self.effective_mhz;
        }
        self.move_step(m, gov, dt_ns, act, idle)
    }

    #[inline(never)]
    fn move_step(
        &mut self,
        m: &Machine,
        gov: Governor,
        dt_ns: u64,
        act: CoreActivity,
        idle: bool,
    ) -> u32 {
        let floor = f64::from(floor_mhz(m, gov));
        if self.coasting {
            // Where the coasting steps would have left it.
            self.mhz = self
                .settling_mhz(m)
                .clamp(floor, f64::from(m.frequency.max_mhz));
        }
        match gov {
            Governor::Performance | Governor::Powersave => self.hardware_step(m, dt_ns, act),
            Governor::Schedutil => {
                self.schedutil_request(m, dt_ns, act);
                self.mhz = self.request_mhz;
            }
            Governor::SchedutilHint => {
                self.schedutil_request(m, dt_ns, act);
                self.hardware_step(m, dt_ns, act);
                self.mhz = self.mhz.max(self.request_mhz);
            }
        }
        let ceiling = f64::from(act.ceiling_mhz.max(floor_mhz(m, gov)));
        self.mhz = self.mhz.clamp(floor, f64::from(m.frequency.max_mhz));
        let f = self.mhz.clamp(floor, ceiling);
        self.effective_mhz = p_state(m, floor, f);
        let settled = match gov {
            Governor::Schedutil => self.mhz <= floor,
            Governor::SchedutilHint => self.request_mhz <= floor && self.hw_settled(m, floor),
            _ => self.hw_settled(m, floor),
        };
        self.quiet = idle && settled;
        // The settling frequency stays within [min, min + settle_cap]
        // (clamped to [floor, ..]): if its top is at the floor's P-state,
        // so is every point of it (p_state() is monotonic).
        let min = f64::from(m.frequency.min_mhz);
        self.coasting = idle
            && !gov.uses_util()
            && self.settle_ns > 0
            && p_state(m, floor, min + self.settle_cap) <= p_state(m, floor, floor);
        self.effective_mhz
    }

    /// One more idle step of a coasting core, if it is past the hold
    /// period and does not end its settling: what [`CoreFreq::step`] would
    /// do then but for `mhz` (the effective frequency stays). Returns false
    /// (nothing done) otherwise.
    fn coast(&mut self, m: &Machine, dt_ns: u64, act: CoreActivity) -> bool {
        let settle_ns = self.settle_ns.saturating_add(dt_ns);
        if idle_part(m, dt_ns, act) <= 0.0 || settle_ns >= m.dynamics.settle_us * 1000 {
            return false;
        }
        self.settle_ns = settle_ns;
        true
    }

    /// The internal frequency `settle_ns` into the settling oscillation.
    fn settling_mhz(&self, m: &Machine) -> f64 {
        f64::from(m.frequency.min_mhz) + self.settle_cap * settle_shape(m, self.settle_ns)
    }

    fn hardware_step(&mut self, m: &Machine, dt_ns: u64, act: CoreActivity) {
        let d = &m.dynamics;
        let f = &m.frequency;
        let range = f64::from(f.max_mhz - f.min_mhz);
        let up = range / (d.ramp_up_us as f64 * 1000.0);
        let down = range / (d.ramp_down_us as f64 * 1000.0);
        let dt = dt_ns as f64;
        let idle_part = idle_part(m, dt_ns, act);
        if act.active > 0.0 {
            self.settle_ns = 0;
            // The hardware climbs only towards the ceiling it may reach.
            if self.mhz < f64::from(act.ceiling_mhz) {
                self.mhz = (self.mhz + up * dt * act.active).min(f64::from(act.ceiling_mhz));
            }
            self.mhz -= down * idle_part;
            return;
        }
        if idle_part <= 0.0 {
            return; // still within the hold period
        }
        let min = f64::from(f.min_mhz);
        let band_top = min + f64::from(d.settle_above_min_mhz);
        if self.settle_ns == 0 && self.mhz > band_top {
            self.mhz = (self.mhz - down * idle_part).max(band_top);
            if self.mhz > band_top {
                return;
            }
        }
        if self.settle_ns == 0 {
            self.settle_cap = self.mhz - min;
        }
        self.settle_ns = self.settle_ns.saturating_add(dt_ns);
        self.mhz = self.settling_mhz(m);
    }

    /// Re-evaluates schedutil's request, at most once per rate limit.
    fn schedutil_request(&mut self, m: &Machine, dt_ns: u64, act: CoreActivity) {
        self.since_request_ns += dt_ns;
        if self.since_request_ns < SCHEDUTIL_RATE_LIMIT_NS {
            return;
        }
        self.since_request_ns = 0;
        let max = f64::from(m.frequency.max_mhz);
        self.request_mhz = SCHEDUTIL_MARGIN * max * act.util.clamp(0.0, 1.0);
    }

    fn hw_settled(&self, m: &Machine, floor: f64) -> bool {
        self.settle_ns >= m.dynamics.settle_us * 1000 && self.mhz <= floor
    }
}

/// Idle time of a step of `dt_ns` that lies beyond the hold period, ns.
fn idle_part(m: &Machine, dt_ns: u64, act: CoreActivity) -> f64 {
    let dt = dt_ns as f64;
    let hold_ns = m.dynamics.down_hold_us * 1000;
    if hold_ns == 0 {
        dt * (1.0 - act.active)
    } else {
        (act.idle_for_ns.saturating_sub(hold_ns) as f64).min(dt)
    }
}

/// `f` MHz rounded down to a P-state, at least `floor`: f / step is
/// positive, so the truncating cast is floor() (which is a libm call on
/// x86-64).
fn p_state(m: &Machine, floor: f64, f: f64) -> u32 {
    let step = m.frequency.step_mhz;
    ((f / f64::from(step)) as u32 * step).max(floor as u32)
}

/// Relative height (in [0, 1]) of an idle core `s_ns` into its settling
/// oscillation: a triangle wave whose amplitude decays linearly to 0 over
/// `settle_us`.
fn settle_shape(m: &Machine, s_ns: u64) -> f64 {
    let d = &m.dynamics;
    let settle = d.settle_us as f64 * 1000.0;
    let s = s_ns as f64;
    if s >= settle || d.oscillation_period_us == 0 {
        return 0.0;
    }
    let period_ns = d.oscillation_period_us * 1000;
    let period = period_ns as f64;
    // `s % period` without the libm call `fmod`: both are integers that
    // f64 holds exactly, and fmod is exact, so the results are the same.
    let phase = (s_ns % period_ns) as f64 / period;
    let tri = 1.0 - (2.0 * phase - 1.0).abs();
    // Starts at the top of the band (phase 0 => tri 0 would jump: shift).
    let tri = 1.0 - tri;
    (1.0 - s / settle) * tri
}

/// The lowest frequency a governor lets a core run at.
pub fn floor_mhz(m: &Machine, gov: Governor) -> u32 {
    match gov {
        Governor::Performance => m.frequency.nominal_mhz,
        Governor::Powersave | Governor::Schedutil | Governor::SchedutilHint => m.frequency.min_mhz,
    }
}

/// One PELT-like utilisation update: `util` decays with a 32 ms half-life
/// towards `contrib` (the share of the period spent running, scaled by
/// frequency for invariance).
pub fn pelt_update(util: f64, contrib: f64, dt_ns: u64) -> f64 {
    let decay = (-(dt_ns as f64) * std::f64::consts::LN_2 / PELT_HALF_LIFE_NS).exp();
    util * decay + (1.0 - decay) * contrib
}

#[cfg(test)]
mod tests {
    use super::*;

    fn act(active: f64, idle_for_ns: u64, ceiling_mhz: u32) -> CoreActivity {
        CoreActivity {
            active,
            idle_for_ns,
            util: active,
            ceiling_mhz,
        }
    }

    /// Time (ms) for a fully busy core to go from min to `target`.
    fn ramp_up_ms(m: &Machine, target: u32) -> u64 {
        let mut c = CoreFreq::new(m, Governor::Powersave);
        let ceiling = m.turbo_ceiling_mhz(1);
        (1..1000)
            .find(|_| c.step(m, Governor::Powersave, 1_000_000, act(1.0, 0, ceiling)) >= target)
            .unwrap()
    }

    #[test]
    fn e7_ramps_up_in_about_29_ms_and_down_in_about_10_ms() {
        let m = Machine::builtin("xeon-e7-8870-v4-4s").unwrap();
        let up = ramp_up_ms(&m, 3000);
        assert!((27..=31).contains(&up), "ramp up took {up} ms");
        let mut c = CoreFreq::new(&m, Governor::Powersave);
        for _ in 0..100 {
            c.step(&m, Governor::Powersave, 1_000_000, act(1.0, 0, 3000));
        }
        let band = m.frequency.min_mhz + m.dynamics.settle_above_min_mhz;
        let down = (1..1000u64)
            .find(|ms| {
                c.step(
                    &m,
                    Governor::Powersave,
                    1_000_000,
                    act(0.0, ms * 1_000_000, 3000),
                ) <= band
            })
            .unwrap();
        assert!((7..=12).contains(&down), "ramp down took {down} ms");
        // Oscillates, then settles at the minimum within ~100 ms more.
        let mut seen = std::collections::BTreeSet::new();
        for ms in down..down + 120 {
            seen.insert(c.step(
                &m,
                Governor::Powersave,
                1_000_000,
                act(0.0, ms * 1_000_000, 3000),
            ));
        }
        assert!(seen.len() > 2, "no oscillation: {seen:?}");
        assert_eq!(c.mhz(), m.frequency.min_mhz);
    }

    #[test]
    fn a_coasting_core_steps_as_if_it_did_not_coast() {
        // Runs of 1 ms every 60 ms leave an E7 core settling within its
        // lowest P-state (it coasts), then woken mid-settling; then it
        // settles. Stepped without coasting, a copy must agree on every
        // effective frequency and, whenever the core runs or is settled,
        // on its state.
        let m = Machine::builtin("xeon-e7-8870-v4-4s").unwrap();
        let gov = Governor::Powersave;
        let mut c = CoreFreq::new(&m, gov);
        let mut r = c.clone();
        let (mut coasted, mut woken) = (0, 0);
        for ms in 0..400u64 {
            let runs = ms < 300 && ms % 60 == 0;
            let a = act(if runs { 1.0 } else { 0.0 }, (ms % 60) * 1_000_000, 3000);
            coasted += u32::from(c.coasting);
            woken += u32::from(c.coasting && runs);
            r.coasting = false;
            let (mhz, reference) = (c.step(&m, gov, 1_000_000, a), r.step(&m, gov, 1_000_000, a));
            assert_eq!(mhz, reference, "{ms} ms");
            if runs || c.quiet {
                assert_eq!(c.mhz.to_bits(), r.mhz.to_bits(), "{ms} ms");
                assert_eq!(c.settle_ns, r.settle_ns, "{ms} ms");
            }
        }
        assert!(
            coasted > 200 && woken >= 4,
            "coasted {coasted}, woken {woken}"
        );
        assert!(c.quiet && r.quiet);
    }

    #[test]
    fn ceiling_caps_and_performance_floors_at_nominal() {
        let m = Machine::builtin("xeon-gold-5218-2s").unwrap();
        let mut c = CoreFreq::new(&m, Governor::Performance);
        assert_eq!(c.mhz(), 2300);
        for _ in 0..100 {
            c.step(&m, Governor::Performance, 1_000_000, act(1.0, 0, 2800));
        }
        assert_eq!(c.mhz(), 2800);
        for ms in 1..300 {
            c.step(
                &m,
                Governor::Performance,
                1_000_000,
                act(0.0, ms * 1_000_000, 2800),
            );
        }
        assert_eq!(c.mhz(), 2300);
    }

    #[test]
    fn schedutil_follows_utilisation() {
        let m = Machine::builtin("xeon-gold-5218-2s").unwrap();
        let mut c = CoreFreq::new(&m, Governor::Schedutil);
        let mut u = 0.0;
        for _ in 0..200 {
            u = pelt_update(u, 1.0, 1_000_000);
            let a = CoreActivity {
                util: u,
                ..act(1.0, 0, 3900)
            };
            c.step(&m, Governor::Schedutil, 1_000_000, a);
        }
        assert_eq!(c.mhz(), 3900);
        // Half-life: after 32 ms idle, util halves.
        let half = (0..32).fold(1.0, |u, _| pelt_update(u, 0.0, 1_000_000));
        assert!((half - 0.5f64).abs() < 1e-9);
    }

    #[test]
    fn turbo_ceilings_match_published_tables() {
        let table: &[(&str, &[(u32, u32)])] = &[
            (
                "xeon-e7-8870-v4-4s",
                &[
                    (1, 3000),
                    (2, 3000),
                    (3, 2800),
                    (4, 2700),
                    (5, 2600),
                    (20, 2600),
                ],
            ),
            (
                "xeon-gold-6130-2s",
                &[
                    (1, 3700),
                    (2, 3700),
                    (3, 3500),
                    (4, 3500),
                    (8, 3400),
                    (12, 3100),
                    (16, 2800),
                ],
            ),
            ("xeon-gold-6130-4s", &[(1, 3700), (9, 3100), (13, 2800)]),
            (
                "xeon-gold-5218-2s",
                &[
                    (1, 3900),
                    (2, 3900),
                    (3, 3700),
                    (5, 3600),
                    (8, 3600),
                    (9, 3100),
                    (12, 3100),
                    (16, 2800),
                ],
            ),
        ];
        for (name, bins) in table {
            let m = Machine::builtin(name).unwrap();
            for &(active, mhz) in *bins {
                assert_eq!(
                    m.turbo_ceiling_mhz(active),
                    mhz,
                    "{name} with {active} active"
                );
            }
        }
    }
}
