//! Machine models: topology, frequency table, frequency dynamics and power
//! parameters, loaded from JSON files (see `machines/` at the top of the
//! repository). Every published number carries its source in the file.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use nest_trace::Topology;
use serde::{Deserialize, Serialize};

/// One turbo bin: with at most `up_to_active_cores` active physical cores on
/// a socket, no core of that socket runs above `max_mhz`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurboBin {
    pub up_to_active_cores: u32,
    pub max_mhz: u32,
}

/// Frequency range and turbo ceilings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Frequency {
    pub min_mhz: u32,
    pub nominal_mhz: u32,
    pub max_mhz: u32,
    /// P-state granularity (the bus clock multiplier step).
    pub step_mhz: u32,
    /// Ascending by `up_to_active_cores`; the last bin covers every core.
    pub turbo_by_active_cores: Vec<TurboBin>,
}

/// How fast the hardware moves a core's frequency (see docs/sim.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dynamics {
    /// Time to climb from min to max frequency under full activity.
    pub ramp_up_us: u64,
    /// Time to fall from max to the settling band once idle.
    pub ramp_down_us: u64,
    /// Idle time the hardware tolerates before it starts lowering frequency.
    pub down_hold_us: u64,
    /// Top of the band (above min) in which an idle core oscillates.
    pub settle_above_min_mhz: u32,
    /// How long the oscillation lasts before the core sits at min.
    pub settle_us: u64,
    pub oscillation_period_us: u64,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

/// One idle state (C-state) of a core, as the kernel's cpuidle driver
/// describes it (`struct cpuidle_state` in drivers/idle/intel_idle.c).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdleState {
    pub name: String,
    /// Time from a wake-up to the core running again.
    pub exit_latency_us: u64,
    /// Shortest idle period for which the state saves energy.
    pub target_residency_us: u64,
    /// Power of one core in this state.
    pub core_w: f64,
}

/// Parameters of the per-socket power model (see docs/sim.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Power {
    pub tdp_w: f64,
    /// A socket's power while no core of the whole machine is active.
    pub package_idle_w: f64,
    /// Uncore power of every socket while any core of the machine is active.
    pub uncore_active_w: f64,
    /// A core's idle states, shallowest first.
    pub idle_states: Vec<IdleState>,
    pub core_static_w: f64,
    /// Dynamic power of one fully active core at nominal frequency and voltage.
    pub core_dynamic_w_at_nominal: f64,
    /// Share of that dynamic power a core draws while warm-spinning (a
    /// `pause` loop issues few instructions).
    pub spin_dynamic_share: f64,
    pub voltage_at_min_v: f64,
    pub voltage_at_max_v: f64,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

/// A whole machine model, as stored in a machine file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    /// Speed of one thread, relative to its core, while its SMT sibling is
    /// also busy.
    pub smt_thread_throughput: f64,
    pub frequency: Frequency,
    pub dynamics: Dynamics,
    pub power: Power,
}

/// The built-in machine files, embedded at build time.
const BUILTIN: &[(&str, &str)] = &[
    (
        "xeon-gold-5218-2s",
        include_str!("../../../machines/xeon-gold-5218-2s.json"),
    ),
    (
        "xeon-gold-6130-2s",
        include_str!("../../../machines/xeon-gold-6130-2s.json"),
    ),
    (
        "xeon-gold-6130-4s",
        include_str!("../../../machines/xeon-gold-6130-4s.json"),
    ),
    (
        "xeon-e7-8870-v4-4s",
        include_str!("../../../machines/xeon-e7-8870-v4-4s.json"),
    ),
    (
        "test-guest-2s",
        include_str!("../../../machines/test-guest-2s.json"),
    ),
];

impl Power {
    fn validate(&self) -> Result<()> {
        let states = &self.idle_states;
        if states.is_empty() {
            bail!("power.idle_states: expected at least one idle state");
        }
        if states.windows(2).any(|w| {
            w[0].exit_latency_us > w[1].exit_latency_us
                || w[0].target_residency_us > w[1].target_residency_us
                || w[0].core_w < w[1].core_w
        }) {
            bail!(
                "power.idle_states: expected shallowest first (exit latency and target residency ascending, power descending)"
            );
        }
        if !(0.0..=1.0).contains(&self.spin_dynamic_share) {
            bail!("power.spin_dynamic_share: expected a value in [0, 1]");
        }
        Ok(())
    }

    /// Index in `idle_states` of the deepest state, where a core idle for
    /// long sits.
    pub fn deepest_idle_index(&self) -> usize {
        self.idle_states.len() - 1
    }

    /// The deepest idle state.
    pub fn deepest_idle(&self) -> &IdleState {
        &self.idle_states[self.deepest_idle_index()]
    }
}

impl Machine {
    /// Names of the built-in models.
    pub fn builtin_names() -> impl Iterator<Item = &'static str> {
        BUILTIN.iter().map(|(n, _)| *n)
    }

    /// A built-in model by name.
    pub fn builtin(name: &str) -> Result<Self> {
        let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name) else {
            let names: Vec<_> = Self::builtin_names().collect();
            bail!(
                "unknown machine `{name}`; built-in models: {}",
                names.join(", ")
            );
        };
        Self::from_json(text, &format!("<built-in {name}>"))
    }

    /// A built-in name, or else a path to a machine file.
    pub fn load(name_or_path: &str) -> Result<Self> {
        if BUILTIN.iter().any(|(n, _)| *n == name_or_path) {
            return Self::builtin(name_or_path);
        }
        let path = Path::new(name_or_path);
        if !path.exists() {
            return Self::builtin(name_or_path);
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading machine file {}", path.display()))?;
        Self::from_json(&text, &path.display().to_string())
    }

    /// Parses and validates a machine file; `origin` names it in errors.
    pub fn from_json(text: &str, origin: &str) -> Result<Self> {
        let m: Machine = serde_json::from_str(text).map_err(|e| {
            anyhow::anyhow!(
                "{origin}:{}:{}: {e} (expected a machine model, see docs/sim.md)",
                e.line(),
                e.column()
            )
        })?;
        m.validate()
            .with_context(|| format!("{origin}: invalid machine model"))?;
        Ok(m)
    }

    fn validate(&self) -> Result<()> {
        let f = &self.frequency;
        if self.sockets == 0 || self.cores_per_socket == 0 || self.threads_per_core == 0 {
            bail!("sockets, cores_per_socket and threads_per_core must be positive");
        }
        if !(f.min_mhz <= f.nominal_mhz && f.nominal_mhz <= f.max_mhz) || f.min_mhz == 0 {
            bail!("frequency: expected 0 < min_mhz <= nominal_mhz <= max_mhz");
        }
        if f.step_mhz == 0 {
            bail!("frequency.step_mhz: expected a positive step");
        }
        let bins = &f.turbo_by_active_cores;
        if bins
            .last()
            .is_none_or(|b| b.up_to_active_cores < self.cores_per_socket)
        {
            bail!("frequency.turbo_by_active_cores: the last bin must cover every core");
        }
        if bins
            .windows(2)
            .any(|w| w[0].up_to_active_cores >= w[1].up_to_active_cores)
        {
            bail!("frequency.turbo_by_active_cores: expected ascending up_to_active_cores");
        }
        if self.dynamics.ramp_up_us == 0 || self.dynamics.ramp_down_us == 0 {
            bail!("dynamics: ramp times must be positive");
        }
        if !(0.0..=1.0).contains(&self.smt_thread_throughput) {
            bail!("smt_thread_throughput: expected a value in [0, 1]");
        }
        self.power.validate()
    }

    pub fn nr_cpus(&self) -> usize {
        (self.sockets * self.cores_per_socket * self.threads_per_core) as usize
    }

    pub fn nr_cores(&self) -> usize {
        (self.sockets * self.cores_per_socket) as usize
    }

    /// The topology in the shared event model (Linux x86 numbering).
    pub fn topology(&self) -> Topology {
        Topology::regular(self.sockets, self.cores_per_socket, self.threads_per_core)
    }

    /// The turbo ceiling of a socket with `active` active physical cores.
    pub fn turbo_ceiling_mhz(&self, active: u32) -> u32 {
        let bins = &self.frequency.turbo_by_active_cores;
        bins.iter()
            .find(|b| active <= b.up_to_active_cores)
            .or(bins.last())
            .map_or(self.frequency.max_mhz, |b| b.max_mhz)
            .min(self.frequency.max_mhz)
    }

    /// Frequency band edges (MHz) for residency reports: nominal, then every
    /// distinct turbo ceiling. Band 0 is "below nominal".
    pub fn band_edges_mhz(&self) -> Vec<u32> {
        let mut edges = vec![self.frequency.nominal_mhz];
        let mut turbo: Vec<u32> = self
            .frequency
            .turbo_by_active_cores
            .iter()
            .map(|b| b.max_mhz)
            .filter(|&m| m > self.frequency.nominal_mhz)
            .collect();
        turbo.sort_unstable();
        turbo.dedup();
        edges.extend(turbo);
        edges
    }

    /// Human label of each band of [`Machine::band_edges_mhz`].
    pub fn band_labels(&self) -> Vec<String> {
        let edges = self.band_edges_mhz();
        let ghz = |m: u32| format!("{:.1}", f64::from(m) / 1000.0);
        let mut labels = vec![format!("<{}", ghz(edges[0]))];
        for w in edges.windows(2) {
            labels.push(format!("{}-{}", ghz(w[0]), ghz(w[1])));
        }
        if let Some(&top) = edges.last() {
            labels.push(format!(">={}", ghz(top)));
        }
        labels
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_load_and_validate() {
        for name in Machine::builtin_names() {
            let m = Machine::builtin(name).unwrap();
            assert_eq!(m.topology().nr_cpus(), m.nr_cpus(), "{name}");
        }
    }

    #[test]
    fn users_load_their_own_files() {
        let m = Machine::builtin("test-guest-2s").unwrap();
        let mut custom = m.clone();
        custom.name = "custom".into();
        custom.sockets = 1;
        let path =
            std::env::temp_dir().join(format!("nest-sim-machine-{}.json", std::process::id()));
        std::fs::write(&path, serde_json::to_string(&custom).unwrap()).unwrap();
        let loaded = Machine::load(path.to_str().unwrap()).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(loaded, custom);
        assert_eq!(loaded.nr_cpus(), 8);
        assert!(Machine::load("no-such-machine").is_err());
    }

    #[test]
    fn malformed_machine_names_origin_and_place() {
        let err = Machine::from_json("{\n \"name\": 3 }", "m.json").unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.starts_with("m.json:2:"), "{msg}");
        assert!(msg.contains("expected"), "{msg}");
    }
}
