//! What a core's frequency does with what the cpufreq governor asks
//! (docs/design/simulator.md, "Frequency model").
//!
//! The engine calls [`CoreFreq::step`] for every physical core at a fixed
//! period (1 ms by default) with the share of that period the core was
//! active, how long it has been idle, the highest schedutil request of its
//! threads (engine/sugov.rs) and its socket's turbo ceiling for the number
//! of active cores. Per governor, as Linux's intel_pstate drives Intel
//! servers (drivers/cpufreq/intel_pstate.c):
//!
//! - `performance`: the OS asks for the highest P-state (active mode with
//!   HWP: `intel_pstate_hwp_set()` sets HWP's minimum to its maximum;
//!   without HWP the generic governor asks for the policy's maximum): every
//!   core runs at its socket's turbo ceiling;
//! - `powersave`: the frequency the hardware (HWP) or, without HWP,
//!   intel_pstate's own controller picks, modelled by the machine file's
//!   ramps: an active core climbs at `(max - min) / ramp_up` per unit of
//!   active time; an idle core, once idle for longer than `down_hold`,
//!   falls at `(max - min) / ramp_down` until it reaches the settling band,
//!   then oscillates with decaying amplitude for `settle` before sitting at
//!   min;
//! - `schedutil` (Linux 5.11 and later): the request is imposed (HWP:
//!   `intel_cpufreq_adjust_perf()` writes it as HWP's desired level, which
//!   disables the hardware's own choice; without HWP it is the P-state);
//! - `schedutil-hint` (5.9 and 5.10): with HWP the request is HWP's minimum
//!   (`intel_cpufreq_adjust_hwp()` writes the minimum and maximum, not the
//!   desired level) and the hardware's own choice runs above it; without
//!   HWP it is the P-state, as under `schedutil`;
//! - a request above nominal lies in the turbo range, where the hardware
//!   picks the frequency (HWP as without it): the core runs at the request
//!   plus `turbo_request_grant` of the way to the ceiling;
//! - every core is capped by its socket's turbo ceiling and runs at a
//!   multiple of the P-state step.

use serde::{Deserialize, Serialize};

use crate::machine::{Machine, PStateControl};

/// schedutil's headroom: it asks for 1.25 times the utilisation
/// (`map_util_freq()`/`map_util_perf()`: `util + util / 4`).
pub const SCHEDUTIL_MARGIN: f64 = 1.25;

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
    /// The OS asks for the highest P-state; cores run at their turbo
    /// ceiling.
    Performance,
    /// The hardware picks from its own activity estimate (HWP), or
    /// intel_pstate's own controller without HWP.
    Powersave,
    /// The OS imposes a frequency from the scheduler's utilisation (HWP's
    /// desired level, Linux 5.11 and later).
    Schedutil,
    /// schedutil before Linux 5.11: with HWP the request is only a floor;
    /// the hardware still climbs on its own above it.
    SchedutilHint,
}

impl Governor {
    pub const ALL: [Governor; 4] = [
        Governor::Performance,
        Governor::Powersave,
        Governor::Schedutil,
        Governor::SchedutilHint,
    ];

    /// Does it request frequencies from the scheduler's utilisation?
    pub fn is_schedutil(self) -> bool {
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

    /// Does the frequency the hardware picks itself (the ramps) matter on
    /// machine `m` under this governor?
    fn autonomous(self, m: &Machine) -> bool {
        match self {
            Governor::Powersave => true,
            Governor::SchedutilHint => m.dynamics.control == PStateControl::Hwp,
            Governor::Performance | Governor::Schedutil => false,
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
    /// The highest schedutil request of the core's threads, MHz (0 under
    /// other governors).
    pub request_mhz: f64,
    /// Turbo ceiling of the socket for its current active-core count.
    pub ceiling_mhz: u32,
}

/// Frequency state of one physical core (SMT siblings share it).
#[derive(Clone, Debug)]
pub struct CoreFreq {
    /// The frequency the hardware heads through on its own (the ramps).
    mhz: f64,
    /// Time spent oscillating in the settling band while idle (0: not).
    settle_ns: u64,
    /// Amplitude (MHz above min) of the current settling oscillation.
    settle_cap: f64,
    /// The effective (quantised, capped) frequency.
    effective_mhz: u32,
    /// Idle and settled: further idle steps change nothing.
    quiet: bool,
    /// Idle and settling with an amplitude too small to reach another
    /// P-state: further idle steps only move `settle_ns`
    /// ([`CoreFreq::coast`]), and `mhz` is left behind until a step needs
    /// it.
    coasting: bool,
}

impl CoreFreq {
    /// A core that has been idle for long: at its lowest frequency, or at
    /// the highest under `performance`.
    pub fn new(m: &Machine, gov: Governor) -> Self {
        let min = m.frequency.min_mhz;
        let start = match gov {
            Governor::Performance => m.turbo_ceiling_mhz(1),
            _ => min,
        };
        Self {
            mhz: f64::from(min),
            settle_ns: u64::MAX / 2,
            settle_cap: 0.0,
            effective_mhz: start,
            quiet: false,
            coasting: false,
        }
    }

    /// Idle and settled: idle steps change nothing.
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
        let idle = act.active == 0.0;
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
        let min = f64::from(m.frequency.min_mhz);
        let ceiling = f64::from(act.ceiling_mhz.max(m.frequency.min_mhz));
        let autonomous = gov.autonomous(m);
        if autonomous {
            if self.coasting {
                // Where the coasting steps would have left it.
                self.mhz = self.settling_mhz(m);
            }
            self.hardware_step(m, dt_ns, act);
            self.mhz = self.mhz.clamp(min, f64::from(m.frequency.max_mhz));
        }
        let target = match gov {
            Governor::Performance => ceiling,
            Governor::Powersave => self.mhz,
            Governor::Schedutil => granted(m, act.request_mhz, ceiling),
            Governor::SchedutilHint if autonomous => {
                granted(m, act.request_mhz, ceiling).max(self.mhz)
            }
            Governor::SchedutilHint => granted(m, act.request_mhz, ceiling),
        };
        self.effective_mhz = p_state(m, min, target.clamp(min, ceiling));
        self.quiet = idle && (!autonomous || self.hw_settled(m, min));
        // The settling frequency stays within [min, min + settle_cap]: if
        // its top is at min's P-state, so is every point of it (p_state()
        // is monotonic), and under schedutil-hint the request, fixed while
        // the core idles, is unchanged.
        self.coasting = idle
            && autonomous
            && self.settle_ns > 0
            && p_state(m, min, min + self.settle_cap) <= p_state(m, min, min);
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

    fn hw_settled(&self, m: &Machine, min: f64) -> bool {
        self.settle_ns >= m.dynamics.settle_us * 1000 && self.mhz <= min
    }
}

/// What a core runs at when the OS asks for `request` MHz, its socket's
/// ceiling being `ceiling`: the request, but above nominal (the turbo
/// range, where the hardware chooses: the kernel's "Implement passive mode
/// with HWP enabled", 5.9, says so of the HWP floor as of a non-HWP
/// P-state) `turbo_request_grant` of the way to the ceiling.
fn granted(m: &Machine, request: f64, ceiling: f64) -> f64 {
    let nominal = f64::from(m.frequency.nominal_mhz);
    if request <= nominal || request >= ceiling {
        return request.min(ceiling);
    }
    request + m.dynamics.turbo_request_grant * (ceiling - request)
}

/// schedutil's request for a CPU with utilisation `util` (a share of the
/// CPU at f_max, frequency-invariant): `1.25 * f_max * util`
/// (`get_next_freq()`), rounded up to a P-state as intel_cpufreq does
/// (`DIV_ROUND_UP(target_freq, scaling)`), within [min, max].
pub fn schedutil_request_mhz(m: &Machine, util: f64) -> f64 {
    let f = &m.frequency;
    let target = SCHEDUTIL_MARGIN * f64::from(f.max_mhz) * util.clamp(0.0, 1.0);
    let step = f64::from(f.step_mhz);
    ((target / step).ceil() * step).clamp(f64::from(f.min_mhz), f64::from(f.max_mhz))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn act(active: f64, idle_for_ns: u64, ceiling_mhz: u32) -> CoreActivity {
        CoreActivity {
            active,
            idle_for_ns,
            request_mhz: 0.0,
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
        let mut m = Machine::builtin("xeon-e7-8870-v4-4s").unwrap();
        // The dynamics the scenario is built for.
        m.dynamics.ramp_down_us = 10_000;
        m.dynamics.settle_us = 98_000;
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
    fn performance_runs_every_active_core_at_its_ceiling() {
        let m = Machine::builtin("xeon-gold-5218-2s").unwrap();
        let mut c = CoreFreq::new(&m, Governor::Performance);
        assert_eq!(c.mhz(), 3900);
        assert_eq!(
            c.step(&m, Governor::Performance, 1_000_000, act(1.0, 0, 2800)),
            2800
        );
        assert_eq!(
            c.step(&m, Governor::Performance, 1_000_000, act(0.5, 0, 3600)),
            3600
        );
        // Idle, it stays where it was: nothing to move.
        c.step(
            &m,
            Governor::Performance,
            1_000_000,
            act(0.0, 1_000_000, 3900),
        );
        assert!(c.is_quiet());
    }

    #[test]
    fn schedutil_asks_for_a_quarter_more_than_the_utilisation_rounded_up() {
        let m = Machine::builtin("xeon-gold-5218-2s").unwrap();
        // 1.25 * 3900 * 0.5 = 2437.5 -> 2500 MHz.
        assert_eq!(schedutil_request_mhz(&m, 0.5), 2500.0);
        // 1.25 * 3900 * 0.1 = 487.5 -> the minimum, 1000 MHz.
        assert_eq!(schedutil_request_mhz(&m, 0.1), 1000.0);
        assert_eq!(schedutil_request_mhz(&m, 0.9), 3900.0);
    }

    #[test]
    fn a_request_below_nominal_is_imposed_and_one_above_is_granted_towards_the_ceiling() {
        let mut m = Machine::builtin("xeon-gold-5218-2s").unwrap();
        let step = |m: &Machine, gov, request_mhz, ceiling_mhz| {
            let mut c = CoreFreq::new(m, gov);
            let a = CoreActivity {
                request_mhz,
                ..act(1.0, 0, ceiling_mhz)
            };
            c.step(m, gov, 1_000_000, a)
        };
        m.dynamics.turbo_request_grant = 1.0;
        assert_eq!(step(&m, Governor::Schedutil, 1800.0, 3600), 1800);
        assert_eq!(step(&m, Governor::Schedutil, 2500.0, 3600), 3600);
        m.dynamics.turbo_request_grant = 0.5;
        assert_eq!(step(&m, Governor::Schedutil, 2500.0, 3500), 3000);
        // Capped by the ceiling whatever the grant.
        assert_eq!(step(&m, Governor::Schedutil, 3900.0, 2800), 2800);
        // schedutil-hint with HWP: the request is a floor under the
        // hardware's own choice, which starts at min after a long idle
        // and climbs above it.
        assert_eq!(step(&m, Governor::SchedutilHint, 1800.0, 3600), 1800);
        let busy_60_ms = |m: &Machine, ceiling_mhz| {
            let mut c = CoreFreq::new(m, Governor::SchedutilHint);
            let a = CoreActivity {
                request_mhz: 1800.0,
                ..act(1.0, 0, ceiling_mhz)
            };
            (0..60).fold(0, |_, _| c.step(m, Governor::SchedutilHint, 1_000_000, a))
        };
        assert_eq!(busy_60_ms(&m, 3900), 3900);
        // Without HWP the request is the P-state itself.
        let e7 = Machine::builtin("xeon-e7-8870-v4-4s").unwrap();
        assert_eq!(busy_60_ms(&e7, 2600), 1800);
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
