//! Machine models: topology, frequency table, frequency dynamics and power
//! parameters, loaded from JSON files (see `machines/` at the top of the
//! repository). Every published number carries its source in the file.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use nest_trace::Topology;
use nest_trace::metrics::IdleCpuWakeup;
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

/// Who picks a core's P-state (docs/design/simulator.md, "Frequency model").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PStateControl {
    /// Hardware P-states (Speed Shift, HWP): the core picks its own
    /// frequency within the bounds the OS writes to `IA32_HWP_REQUEST`.
    Hwp,
    /// Enhanced SpeedStep: the OS writes a P-state to `IA32_PERF_CTL`;
    /// above nominal the hardware picks the turbo frequency.
    Os,
}

impl PStateControl {
    /// schedutil's rate limit on this machine: the `transition_delay_us`
    /// intel_cpufreq gives its policies (drivers/cpufreq/intel_pstate.c,
    /// `INTEL_CPUFREQ_TRANSITION_DELAY_HWP` 5000 us with HWP since 5.9,
    /// `INTEL_CPUFREQ_TRANSITION_DELAY` 500 us without).
    pub fn rate_limit_ns(self) -> u64 {
        match self {
            PStateControl::Hwp => 5_000_000,
            PStateControl::Os => 500_000,
        }
    }
}

/// How a core's frequency moves (see docs/design/simulator.md, "Frequency model").
/// The ramp, hold and settling fields describe the frequency the hardware
/// (HWP) or intel_pstate's own controller (without HWP) picks under
/// `powersave`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dynamics {
    pub control: PStateControl,
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
    /// Where in the turbo range a core runs when the OS asks for a
    /// frequency above nominal: the share of the way from the request to
    /// the socket's turbo ceiling (0: the request, 1: the ceiling).
    pub turbo_request_grant: f64,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

/// The plausible range of a parameter that no measurement fixes, with the
/// reasoning behind it (`nest sim --sensitivity` runs both ends).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assumption {
    pub low: f64,
    pub high: f64,
    pub why: String,
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

/// Parameters of the per-socket power model (see docs/design/simulator.md).
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

/// A virtual machine's vCPUs (host threads) take time to start a task
/// placed on an idle vCPU: the host must wake and schedule the vCPU's
/// thread. Only machines modelling a guest have it (see docs/design/simulator.md,
/// "Guest vCPU wake-up").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VcpuWakeup {
    /// One delay distribution per number of other busy vCPUs and how long
    /// the vCPU has been idle, ascending by `idle_from_us`, then by
    /// `busy_from`: a class holds from its `busy_from` to the next's of the
    /// same `idle_from_us`, each such group from its `idle_from_us` to the
    /// next group's, and each group starts at `busy_from` 0.
    pub classes: Vec<WakeupClass>,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

/// The delay distribution of one class of [`VcpuWakeup`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WakeupClass {
    /// Shortest time the woken vCPU has been idle that the class covers
    /// (0 when absent).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub idle_from_us: u64,
    /// Fewest other busy vCPUs (running a task) the class covers.
    pub busy_from: u32,
    /// The measured distribution as `[probability, microseconds]` points,
    /// both ascending, from probability 0 to 1; a delay is drawn between
    /// them by linear interpolation.
    pub quantiles_us: Vec<[f64; 2]>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Fewest wake-ups a class of a measured [`VcpuWakeup`] holds.
pub const MIN_CLASS_SAMPLES: usize = 20;

/// How long a vCPU has been idle from which [`VcpuWakeup::measured`]
/// measures its wake-ups apart: in the guest's traces, a vCPU
/// idle for less than 1 ms woke with no other vCPU busy after 52-58 us
/// (median; 90th percentile 107-190 us), one idle for longer after 126-307
/// us (90th percentile 0.5-2.4 ms).
pub const LONG_IDLE_US: u64 = 1000;

/// Probabilities at which [`VcpuWakeup::measured`] keeps the delays: the
/// last repeats the 99th percentile, cutting the tail.
const MEASURED_QUANTILES: [f64; 9] = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0];

impl VcpuWakeup {
    fn validate(&self) -> Result<()> {
        let classes = &self.classes;
        let key = |c: &WakeupClass| (c.idle_from_us, c.busy_from);
        if classes.first().is_none_or(|c| key(c) != (0, 0)) {
            bail!(
                "vcpu_wakeup.classes: expected a first class with idle_from_us 0 and busy_from 0"
            );
        }
        if classes.windows(2).any(|w| key(&w[0]) >= key(&w[1])) {
            bail!("vcpu_wakeup.classes: expected ascending idle_from_us, then busy_from");
        }
        if classes
            .windows(2)
            .any(|w| w[0].idle_from_us < w[1].idle_from_us && w[1].busy_from != 0)
        {
            bail!("vcpu_wakeup.classes: expected each idle_from_us to start at busy_from 0");
        }
        for c in classes {
            let q = &c.quantiles_us;
            let ends = q.first().map(|p| p[0]) == Some(0.0) && q.last().map(|p| p[0]) == Some(1.0);
            let ascending = q
                .windows(2)
                .all(|w| w[0][0] < w[1][0] && w[0][1] <= w[1][1]);
            if !ends || !ascending || q.iter().any(|p| p[1] < 0.0) {
                bail!(
                    "vcpu_wakeup.classes (busy_from {}): expected quantiles_us from probability 0 to 1, both columns ascending, delays not negative",
                    c.busy_from
                );
            }
        }
        Ok(())
    }

    /// The distribution of the wake-ups measured in a guest's trace
    /// ([`nest_trace::metrics::idle_cpu_wakeups`]), apart for vCPUs idle for
    /// less than [`LONG_IDLE_US`] and longer, each by 0, 1, 2, 3-5 and 6 or
    /// more other busy vCPUs. A class with fewer than [`MIN_CLASS_SAMPLES`]
    /// wake-ups takes those of `more` in its class instead if they are
    /// more (the same guest's recordings, its own among them), and with
    /// still too few is merged into the one below. With too few for either
    /// idle length, the two are measured together; `None` with too few in
    /// all.
    pub fn measured(wakeups: &[IdleCpuWakeup], more: &[IdleCpuWakeup]) -> Option<Self> {
        let idle_for = |set: &[IdleCpuWakeup], long: bool| -> Vec<IdleCpuWakeup> {
            set.iter()
                .filter(|w| (w.idle_ns >= LONG_IDLE_US * 1000) == long)
                .copied()
                .collect()
        };
        let short = busy_classes(&idle_for(wakeups, false), &idle_for(more, false), 0);
        let long = busy_classes(
            &idle_for(wakeups, true),
            &idle_for(more, true),
            LONG_IDLE_US,
        );
        let classes = match (short, long) {
            (Some(short), Some(long)) => [short, long].concat(),
            _ => busy_classes(wakeups, more, 0)?,
        };
        let measured = Self {
            classes,
            sources: BTreeMap::new(),
        };
        debug_assert!(measured.validate().is_ok(), "{measured:?}");
        Some(measured)
    }

    /// The delay (ns) at probability `u` in [0, 1) with `busy` other busy
    /// vCPUs, of a vCPU idle for `idle_ns` (0 for a busy one).
    pub fn delay_ns(&self, busy: u32, idle_ns: u64, u: f64) -> u64 {
        let group = self
            .classes
            .iter()
            .rev()
            .find(|c| c.idle_from_us * 1000 <= idle_ns)
            .map_or(0, |c| c.idle_from_us);
        let class = self
            .classes
            .iter()
            .rev()
            .find(|c| c.idle_from_us == group && c.busy_from <= busy)
            .unwrap_or(&self.classes[0]);
        let q = &class.quantiles_us;
        let i = q.partition_point(|p| p[0] <= u).clamp(1, q.len() - 1);
        let ([p0, d0], [p1, d1]) = (q[i - 1], q[i]);
        let us = d0 + (d1 - d0) * (u - p0) / (p1 - p0);
        (us * 1000.0).round() as u64
    }

    /// The idle lengths of the classes from `idle_from_us`: `idle < 1 ms`,
    /// `idle 1 ms+`, or `any idle` when all classes share them.
    fn idle_group_label(&self, idle_from_us: u64) -> String {
        let next = self
            .classes
            .iter()
            .find(|c| c.idle_from_us > idle_from_us)
            .map(|c| c.idle_from_us);
        match (idle_from_us, next) {
            (0, None) => "any idle".to_string(),
            (0, Some(to)) => format!("idle < {}", duration_us(to)),
            (from, Some(to)) => format!("idle {}-{}", duration_us(from), duration_us(to)),
            (from, None) => format!("idle {}+", duration_us(from)),
        }
    }
}

/// The classes of [`VcpuWakeup::measured`] for one idle length (from
/// `idle_from_us`) by 0, 1, 2, 3-5 and 6 or more other busy vCPUs.
fn busy_classes(
    wakeups: &[IdleCpuWakeup],
    more: &[IdleCpuWakeup],
    idle_from_us: u64,
) -> Option<Vec<WakeupClass>> {
    const BUSY_FROM: [u32; 5] = [0, 1, 2, 3, 6];
    let mut classes: Vec<(u32, Vec<u64>)> = Vec::new();
    for (i, &from) in BUSY_FROM.iter().enumerate() {
        let to = BUSY_FROM.get(i + 1).copied().unwrap_or(u32::MAX);
        let in_class = |set: &[IdleCpuWakeup]| -> Vec<u64> {
            set.iter()
                .filter(|w| (from..to).contains(&w.busy_cpus))
                .map(|w| w.delay_ns)
                .collect()
        };
        let mut delays = in_class(wakeups);
        if delays.len() < MIN_CLASS_SAMPLES {
            let instead = in_class(more);
            if instead.len() > delays.len() {
                delays = instead;
            }
        }
        match classes.last_mut() {
            Some((_, below)) if delays.len() < MIN_CLASS_SAMPLES => below.extend(delays),
            _ => classes.push((from, delays)),
        }
    }
    // A small first class takes the next one in (it must start at 0).
    if classes.len() > 1 && classes[0].1.len() < MIN_CLASS_SAMPLES {
        let (_, next) = classes.remove(1);
        classes[0].1.extend(next);
    }
    if classes.iter().any(|(_, d)| d.len() < MIN_CLASS_SAMPLES) {
        return None;
    }
    let classes = classes
        .into_iter()
        .map(|(busy_from, mut delays)| {
            delays.sort_unstable();
            let quantiles_us = MEASURED_QUANTILES
                .iter()
                .map(|&p| {
                    let p_kept = p.min(0.99);
                    let rank = ((p_kept * delays.len() as f64) as usize).min(delays.len() - 1);
                    [p, delays[rank] as f64 / 1000.0]
                })
                .collect();
            WakeupClass {
                idle_from_us,
                busy_from,
                quantiles_us,
            }
        })
        .collect();
    Some(classes)
}

/// Each class's median by idle length: `idle < 1 ms: 0: 33 us, 1+: 182 us;
/// idle 1 ms+: 0-5: 924 us, 6+: 1.7 ms` (`any idle: ...` for one length).
impl std::fmt::Display for VcpuWakeup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, class) in self.classes.iter().enumerate() {
            let same_group = self
                .classes
                .get(i + 1)
                .filter(|n| n.idle_from_us == class.idle_from_us);
            let busy = match same_group.map(|n| n.busy_from - 1) {
                Some(last) if last == class.busy_from => class.busy_from.to_string(),
                Some(last) => format!("{}-{last}", class.busy_from),
                None => format!("{}+", class.busy_from),
            };
            if class.busy_from == 0 {
                if i > 0 {
                    write!(f, "; ")?;
                }
                write!(f, "{}: ", self.idle_group_label(class.idle_from_us))?;
            } else {
                write!(f, ", ")?;
            }
            let median_ns = self.delay_ns(class.busy_from, class.idle_from_us * 1000, 0.5);
            if median_ns < 1_000_000 {
                write!(f, "{busy}: {} us", median_ns / 1000)?;
            } else {
                write!(f, "{busy}: {:.1} ms", median_ns as f64 / 1e6)?;
            }
        }
        Ok(())
    }
}

/// `us` microseconds as text, in ms from 1 ms.
fn duration_us(us: u64) -> String {
    if us >= 1000 && us.is_multiple_of(1000) {
        format!("{} ms", us / 1000)
    } else {
        format!("{us} us")
    }
}

/// The JSON pointer of a parameter path: `power.idle_states.2.core_w` is
/// `/power/idle_states/2/core_w`.
fn json_pointer(path: &str) -> String {
    path.split('.')
        .fold(String::new(), |p, part| p + "/" + part)
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
    /// Only for a virtual machine: its vCPUs' wake-up delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpu_wakeup: Option<VcpuWakeup>,
    /// Parameters that are assumptions, by path (`dynamics.ramp_up_us`,
    /// `power.idle_states.2.exit_latency_us`), with their ranges.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub assumptions: BTreeMap<String, Assumption>,
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
    (
        "test-guest-2s-tcg",
        include_str!("../../../machines/test-guest-2s-tcg.json"),
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
                "{origin}:{}:{}: {e} (expected a machine model, see docs/design/simulator.md)",
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
        if !(0.0..=1.0).contains(&self.dynamics.turbo_request_grant) {
            bail!("dynamics.turbo_request_grant: expected a value in [0, 1]");
        }
        self.validate_assumptions()?;
        if !(0.0..=1.0).contains(&self.smt_thread_throughput) {
            bail!("smt_thread_throughput: expected a value in [0, 1]");
        }
        if let Some(v) = &self.vcpu_wakeup {
            v.validate()?;
        }
        self.power.validate()
    }

    /// Every assumption names a numeric parameter of the file and brackets
    /// its value.
    fn validate_assumptions(&self) -> Result<()> {
        for (path, a) in &self.assumptions {
            let current = self.parameter(path).context("assumptions")?;
            if !(a.low <= current && current <= a.high) {
                bail!(
                    "assumptions: `{path}` is {current}, outside its range [{}, {}]",
                    a.low,
                    a.high
                );
            }
        }
        Ok(())
    }

    /// The value of a numeric parameter by path (as in `assumptions`).
    pub fn parameter(&self, path: &str) -> Result<f64> {
        let value = serde_json::to_value(self)?;
        value
            .pointer(&json_pointer(path))
            .and_then(|v| v.as_f64())
            .with_context(|| format!("`{path}` names no numeric parameter of the machine"))
    }

    /// This machine with the parameter at `path` set to `value` (rounded
    /// for an integer parameter), validated.
    pub fn with_parameter(&self, path: &str, value: f64) -> Result<Self> {
        let mut tree = serde_json::to_value(self)?;
        let Some(slot) = tree.pointer_mut(&json_pointer(path)) else {
            bail!("`{path}` names no parameter of the machine");
        };
        *slot = if slot.is_u64() {
            serde_json::Value::from(value.round().max(0.0) as u64)
        } else if slot.is_f64() {
            serde_json::Value::from(value)
        } else {
            bail!("`{path}` is not a numeric parameter");
        };
        let m: Machine = serde_json::from_value(tree)?;
        m.validate()
            .with_context(|| format!("{}: with {path} = {value}", self.name))?;
        Ok(m)
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

    /// Every frequency, dynamics and power parameter of every built-in
    /// machine has a source; one whose source calls it an assumption has a
    /// range in `assumptions`.
    #[test]
    fn every_builtin_parameter_cites_a_source_or_states_its_range() {
        for name in Machine::builtin_names() {
            let m = Machine::builtin(name).unwrap();
            let tree = serde_json::to_value(&m).unwrap();
            let mut cited: Vec<(String, String, Vec<String>)> = Vec::new();
            for key in [
                "topology",
                "frequency",
                "step_mhz",
                "turbo_by_active_cores",
                "smt_thread_throughput",
            ] {
                let source = m.sources.get(key).cloned().unwrap_or_default();
                let paths = (key == "smt_thread_throughput").then(|| key.to_owned());
                cited.push((key.to_owned(), source, paths.into_iter().collect()));
            }
            for section in ["dynamics", "power"] {
                let fields = tree[section].as_object().unwrap();
                let sources = &tree[section]["sources"];
                let mut keys: Vec<&str> = fields
                    .keys()
                    .map(String::as_str)
                    .filter(|k| *k != "sources")
                    .collect();
                if section == "power" {
                    keys.push("idle_state_power");
                }
                for key in keys {
                    let source = sources[key].as_str().unwrap_or_default().to_owned();
                    let paths = if key == "idle_state_power" {
                        (0..m.power.idle_states.len())
                            .map(|i| format!("power.idle_states.{i}.core_w"))
                            .collect()
                    } else {
                        vec![format!("{section}.{key}")]
                    };
                    cited.push((format!("{section}.{key}"), source, paths));
                }
            }
            for (key, source, paths) in cited {
                assert!(!source.is_empty(), "{name}: {key} has no source");
                if source.contains("Assumption") {
                    for path in paths {
                        assert!(
                            m.assumptions.contains_key(&path),
                            "{name}: {key} is an assumption without a range for {path}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn an_assumption_must_bracket_a_parameter_of_the_file() {
        let mut m = Machine::builtin("xeon-gold-5218-2s").unwrap();
        let ramp = m.assumptions["dynamics.ramp_up_us"].clone();
        assert!(m.with_parameter("dynamics.ramp_up_us", ramp.high).is_ok());
        assert!(
            m.with_parameter("dynamics.ramp_up_us", ramp.high + 1.0)
                .is_err()
        );
        m.assumptions.insert(
            "dynamics.no_such_field".into(),
            Assumption {
                low: 0.0,
                high: 1.0,
                why: String::new(),
            },
        );
        let err = Machine::from_json(&serde_json::to_string(&m).unwrap(), "m.json").unwrap_err();
        assert!(format!("{err:#}").contains("no_such_field"), "{err:#}");
    }

    #[test]
    fn builtins_load_and_validate() {
        for name in Machine::builtin_names() {
            let m = Machine::builtin(name).unwrap();
            assert_eq!(m.topology().nr_cpus(), m.nr_cpus(), "{name}");
        }
    }

    /// `n` wake-ups with `busy` other busy vCPUs, taking 1..=n us.
    fn wakeups(busy: u32, n: u64) -> impl Iterator<Item = IdleCpuWakeup> {
        (1..=n).map(move |us| IdleCpuWakeup {
            busy_cpus: busy,
            idle_ns: 0,
            delay_ns: us * 1000,
        })
    }

    /// `w` with its delay times `factor`, after `idle_ns` of idleness.
    fn scaled(w: IdleCpuWakeup, factor: u64, idle_ns: u64) -> IdleCpuWakeup {
        IdleCpuWakeup {
            delay_ns: w.delay_ns * factor,
            idle_ns,
            ..w
        }
    }

    #[test]
    fn measured_vcpu_wakeups_keep_their_distribution_by_busy_vcpus() {
        let mut all: Vec<_> = wakeups(0, 100).collect();
        all.extend(wakeups(1, 200).map(|w| IdleCpuWakeup {
            delay_ns: w.delay_ns * 10,
            ..w
        }));
        // Too few with 2 busy vCPUs for a class of their own.
        all.extend(wakeups(2, 5));
        all.extend(wakeups(7, 50).map(|w| IdleCpuWakeup {
            delay_ns: w.delay_ns * 100,
            ..w
        }));
        let model = VcpuWakeup::measured(&all, &[]).unwrap();
        let from: Vec<_> = model.classes.iter().map(|c| c.busy_from).collect();
        assert_eq!(from, [0, 1, 6]);
        assert_eq!(model.delay_ns(0, 0, 0.5), 51_000);
        assert_eq!(model.delay_ns(1, 0, 0.5), 980_000);
        assert_eq!(model.delay_ns(3, 0, 0.5), 980_000);
        assert_eq!(model.delay_ns(9, 0, 0.5), 2_600_000);
        assert_eq!(model.delay_ns(0, 0, 0.0), 1_000);
        // The tail is cut at the 99th percentile.
        assert_eq!(model.delay_ns(0, 0, 0.999_999), 100_000);
        // Between two points, a straight line.
        assert_eq!(model.delay_ns(0, 0, 0.375), 38_500);
        // Too few wake-ups of long-idle vCPUs: one model for every idle length.
        assert_eq!(model.delay_ns(0, 50_000_000, 0.5), 51_000);
        assert!(VcpuWakeup::measured(&all[..19], &[]).is_none());
        assert_eq!(
            model.to_string(),
            "any idle: 0: 51 us, 1-5: 980 us, 6+: 2.6 ms"
        );
    }

    #[test]
    fn measured_vcpu_wakeups_part_long_idle_vcpus_and_fill_sparse_classes_from_the_boot() {
        const LONG: u64 = LONG_IDLE_US * 1000;
        let mut own: Vec<_> = wakeups(0, 40).map(|w| scaled(w, 1, LONG - 1)).collect();
        own.extend(wakeups(0, 30).map(|w| scaled(w, 100, LONG)));
        // Too few with a busy vCPU: the boot's 25 stand for them.
        own.extend(wakeups(1, 5));
        let mut boot: Vec<_> = wakeups(1, 25).map(|w| scaled(w, 10, 0)).collect();
        boot.extend(wakeups(7, 50).map(|w| scaled(w, 1000, 2 * LONG)));
        let model = VcpuWakeup::measured(&own, &boot).unwrap();
        let keys: Vec<_> = model
            .classes
            .iter()
            .map(|c| (c.idle_from_us, c.busy_from))
            .collect();
        assert_eq!(keys, [(0, 0), (0, 1), (LONG_IDLE_US, 0), (LONG_IDLE_US, 6)]);
        assert_eq!(model.delay_ns(0, LONG - 1, 0.5), 21_000);
        assert_eq!(model.delay_ns(0, LONG, 0.5), 1_600_000);
        assert_eq!(model.delay_ns(1, 0, 0.5), 130_000);
        assert_eq!(model.delay_ns(8, 2 * LONG, 0.5), 26_000_000);
        assert_eq!(
            model.to_string(),
            "idle < 1 ms: 0: 21 us, 1+: 130 us; idle 1 ms+: 0-5: 1.6 ms, 6+: 26.0 ms"
        );
        let text = serde_json::to_string(&model).unwrap();
        assert_eq!(serde_json::from_str::<VcpuWakeup>(&text).unwrap(), model);
        assert!(model.validate().is_ok());
    }

    #[test]
    fn a_vcpu_wakeup_model_must_be_a_distribution() {
        let mut m = Machine::builtin("test-guest-2s").unwrap();
        let model = VcpuWakeup::measured(
            &wakeups(0, 40).chain(wakeups(1, 40)).collect::<Vec<_>>(),
            &[],
        );
        m.vcpu_wakeup = model;
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(Machine::from_json(&text, "g.json").unwrap(), m);
        m.vcpu_wakeup.as_mut().unwrap().classes[1].quantiles_us[2][1] = 0.5;
        let err = Machine::from_json(&serde_json::to_string(&m).unwrap(), "g.json").unwrap_err();
        assert!(format!("{err:#}").contains("busy_from 1"), "{err:#}");
        m.vcpu_wakeup.as_mut().unwrap().classes.remove(0);
        let err = Machine::from_json(&serde_json::to_string(&m).unwrap(), "g.json").unwrap_err();
        assert!(format!("{err:#}").contains("busy_from 0"), "{err:#}");
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
