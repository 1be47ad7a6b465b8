//! Command-line options, their validation, and the BPF configuration built
//! from them. Everything here is checked before the scheduler is loaded.

use anyhow::{Context, Result, bail};
use clap::Parser;
use nest_policy::{LlcLayout, Mechanism, Params, PerfMode, parse_duration_ns};
use scx_utils::{NR_CPU_IDS, Topology, compat};

use crate::bpf_intf;

/// scx_nest: the Nest scheduler (EuroSys 2022) on sched_ext.
///
/// Places forked and woken tasks on a small, self-sizing nest of recently
/// used cores, so that work runs on warm cores at high frequency instead of
/// being spread over cold idle cores. Runs until SIGINT or SIGTERM.
///
/// Durations take a unit: ns, us, ms, s, or tick(s) (4 ms, the published
/// 250 Hz). Published defaults: P_remove 2 ticks, S_max 2 ticks, R_max 5,
/// R_impatient 2.
#[derive(Debug, Parser)]
#[command(version)]
pub struct Opts {
    /// Idle time after which a primary-nest CPU is demoted (P_remove).
    #[arg(long, default_value = "2ticks", value_name = "DURATION")]
    pub p_remove: String,

    /// Longest warm spin of an idle primary-nest CPU (S_max).
    #[arg(long, default_value = "2ticks", value_name = "DURATION")]
    pub s_max: String,

    /// Capacity of the reserve nest, in CPUs (R_max).
    #[arg(long, default_value_t = 5)]
    pub r_max: u32,

    /// Times a task may find its previous CPU busy before it becomes
    /// impatient (R_impatient, at least 1).
    #[arg(long, default_value_t = 2)]
    pub r_impatient: u32,

    /// Switch mechanisms off for ablation studies, comma-separated: attach,
    /// reserve, impatience, compaction, exit-demotion, wide-fallback,
    /// warm-spin, whole-cores (off: the published, SMT-blind placement).
    #[arg(long, value_delimiter = ',', value_name = "MECHANISMS")]
    pub disable: Vec<String>,

    /// Placement policy: nest; builtin (sched_ext's default idle-CPU
    /// selection only, the minimal baseline for comparisons); slocal (the
    /// waker's CPU); smove (the default CPU if it runs above its minimum
    /// frequency, else the waker's CPU with a move after --smove-delay);
    /// spread (the next idle CPU in a round robin alternating sockets: a
    /// negative control for placement tests, not for real use).
    #[arg(long, value_enum, default_value_t = Policy::Nest)]
    pub policy: Policy,

    /// Frequency requests (scx_bpf_cpuperf_set, read by the schedutil
    /// governor): util (each CPU asks for its utilisation, tracked as the
    /// fair scheduler's PELT does; schedutil adds its 25% headroom, so
    /// frequencies follow schedutil's usual rule); nest (util, but CPUs of
    /// the primary nest ask for the maximum, so the cores Nest keeps warm
    /// also run fast); max (no requests: the kernel's default, every CPU
    /// at full speed under schedutil).
    #[arg(long, default_value = "util", value_name = "MODE", value_parser = PerfMode::parse)]
    pub perf: PerfMode,

    /// S_move: how long a task may wait on the waker's CPU before it moves
    /// to the default CPU (D; 1us to 100ms).
    #[arg(long, default_value = "50us", value_name = "DURATION")]
    pub smove_delay: String,

    /// Measure each BPF callback's run time (kernel BPF statistics) and
    /// print the totals at exit as `prog-stats:` lines.
    #[arg(long)]
    pub prog_stats: bool,

    /// Time slice of a task (100us to 1s).
    #[arg(long, default_value = "4ms", value_name = "DURATION")]
    pub slice: String,

    /// Schedule only tasks whose policy is SCHED_EXT (and their children),
    /// leaving every other task to the default scheduler.
    #[arg(long)]
    pub partial: bool,

    /// Print statistics every SECONDS while scheduling.
    #[arg(long, value_name = "SECONDS")]
    pub stats: Option<f64>,

    /// Print the statistics of a running scx_nest every SECONDS; does not
    /// start a scheduler.
    #[arg(long, value_name = "SECONDS")]
    pub monitor: Option<f64>,

    /// Describe the statistics and exit.
    #[arg(long)]
    pub help_stats: bool,

    /// How long a runnable task may wait before the kernel ejects the
    /// scheduler (default: the kernel's, 30 s).
    #[arg(long, value_name = "DURATION")]
    pub watchdog: Option<String>,

    /// Testing only: S_move counts every CPU as at its minimum frequency,
    /// so that every placement away from the waker's CPU is deferred.
    #[arg(long, hide = true)]
    pub debug_smove_at_min: bool,

    /// Testing only: never run tasks with this command name, so that the
    /// kernel's watchdog ejects the scheduler.
    #[arg(long, hide = true, value_name = "COMM")]
    pub debug_stall_comm: Option<String>,
}

/// A placement policy scx_nest can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Policy {
    Nest,
    Builtin,
    Slocal,
    Smove,
    Spread,
}

impl Policy {
    fn bpf_value(self) -> u32 {
        match self {
            Policy::Nest => bpf_intf::scx_nest_policy_POLICY_NEST,
            Policy::Builtin => bpf_intf::scx_nest_policy_POLICY_BUILTIN,
            Policy::Slocal => bpf_intf::scx_nest_policy_POLICY_SLOCAL,
            Policy::Smove => bpf_intf::scx_nest_policy_POLICY_SMOVE,
            Policy::Spread => bpf_intf::scx_nest_policy_POLICY_SPREAD,
        }
    }
}

/// Validated configuration, ready to be written into the BPF object.
#[derive(Debug)]
pub struct SchedConfig {
    pub policy: Policy,
    params: Params,
    slice_ns: u64,
    partial: bool,
    watchdog_ms: Option<u32>,
    stall_comm: Option<Vec<u8>>,
    smove_at_min: bool,
}

fn duration_opt(name: &str, text: &str) -> Result<u64> {
    parse_duration_ns(text).map_err(|e| anyhow::anyhow!("--{name}: {e}"))
}

fn mechanisms(names: &[String]) -> Result<Vec<Mechanism>> {
    names
        .iter()
        .map(|name| {
            Mechanism::from_name(name.trim()).with_context(|| {
                let known: Vec<&str> = Mechanism::ALL.iter().map(|m| m.name()).collect();
                format!(
                    "--disable: unknown mechanism '{name}'; known: {}",
                    known.join(", ")
                )
            })
        })
        .collect()
}

fn smove_delay(text: &str) -> Result<u64> {
    let ns = duration_opt("smove-delay", text)?;
    if !(1_000..=100_000_000).contains(&ns) {
        bail!("--smove-delay must be between 1us and 100ms, not {text}");
    }
    Ok(ns)
}

impl SchedConfig {
    pub fn from_opts(opts: &Opts) -> Result<Self> {
        if opts.r_impatient == 0 {
            bail!(
                "--r-impatient must be at least 1 (to switch impatience off: --disable impatience)"
            );
        }
        let slice_ns = duration_opt("slice", &opts.slice)?;
        if !(100_000..=1_000_000_000).contains(&slice_ns) {
            bail!("--slice must be between 100us and 1s, not {}", opts.slice);
        }
        let watchdog_ms = match &opts.watchdog {
            Some(text) => {
                let ms = duration_opt("watchdog", text)? / 1_000_000;
                if !(100..=30_000).contains(&ms) {
                    bail!("--watchdog must be between 100ms and 30s, not {text}");
                }
                Some(ms as u32)
            }
            None => None,
        };
        let stall_comm = match &opts.debug_stall_comm {
            Some(comm)
                if comm.is_empty() || comm.len() >= bpf_intf::scx_nest_consts_COMM_LEN as usize =>
            {
                bail!("--debug-stall-comm must be 1 to 15 bytes long");
            }
            Some(comm) => Some(comm.as_bytes().to_vec()),
            None => None,
        };
        let params = Params {
            p_remove_ns: duration_opt("p-remove", &opts.p_remove)?,
            s_max_ns: duration_opt("s-max", &opts.s_max)?,
            r_max: opts.r_max,
            r_impatient: opts.r_impatient,
            disabled: mechanisms(&opts.disable)?,
            smove_delay_ns: smove_delay(&opts.smove_delay)?,
            slice_ns,
            perf: opts.perf,
            ..Params::default()
        };
        Ok(Self {
            policy: opts.policy,
            params,
            slice_ns,
            partial: opts.partial,
            watchdog_ms,
            stall_comm,
            smove_at_min: opts.debug_smove_at_min,
        })
    }

    /// The frequency-request mode (--perf).
    pub fn perf_mode(&self) -> PerfMode {
        self.params.perf
    }

    /// One line for the log.
    pub fn describe(&self) -> String {
        let disabled: Vec<&str> = self.params.disabled.iter().map(|m| m.name()).collect();
        format!(
            "policy {:?}{}, P_remove {} us, S_max {} us, R_max {}, R_impatient {}, slice {} us, \
             frequency requests {}, {}{}",
            self.policy,
            if self.policy == Policy::Smove {
                format!(" (D {} us)", self.params.smove_delay_ns / 1000)
            } else {
                String::new()
            },
            self.params.p_remove_ns / 1000,
            self.params.s_max_ns / 1000,
            self.params.r_max,
            self.params.r_impatient,
            self.slice_ns / 1000,
            self.params.perf.name(),
            if self.partial {
                "SCHED_EXT tasks only"
            } else {
                "all tasks"
            },
            if disabled.is_empty() {
                String::new()
            } else {
                format!(", disabled: {}", disabled.join(","))
            }
        )
    }

    /// Write the configuration into the opened (not yet loaded) skeleton.
    pub fn apply(&self, skel: &mut crate::OpenBpfSkel) -> Result<()> {
        let nr_cpus = *NR_CPU_IDS;
        if nr_cpus > nest_policy::MAX_CPUS {
            bail!(
                "this machine has {nr_cpus} CPUs; scx_nest supports up to {}",
                nest_policy::MAX_CPUS
            );
        }
        let topo = read_topology()?;
        let bss = skel
            .maps
            .bss_data
            .as_mut()
            .context("the BPF object has no .bss")?;
        let cfg = &mut bss.nest_cfg;
        cfg.p_remove_ns = self.params.p_remove_ns;
        cfg.s_max_ns = self.params.s_max_ns;
        cfg.smove_delay_ns = self.params.smove_delay_ns;
        cfg.r_max = self.params.r_max;
        cfg.r_impatient = self.params.r_impatient;
        cfg.nr_cpus = nr_cpus as u32;
        cfg.reserve_start = current_cpu();
        cfg.perf_mode = self.params.perf.bpf_value();
        cfg.perf_floor = self.params.perf_floor;
        cfg.disabled = self
            .params
            .disabled
            .iter()
            .fold(0, |bits, m| bits | m.bit());
        cfg.slice_ns = self.slice_ns;
        cfg.slice_min_ns = nest_policy::slice_min_ns(self.slice_ns);
        let llcs = LlcLayout::new(topo.all_cpus.values().map(|cpu| (cpu.llc_id, cpu.node_id)))?;
        for cpu in topo.all_cpus.values() {
            cfg.cpu_llc[cpu.id] = llcs.index_of(cpu.llc_id);
        }
        cfg.nr_llcs = llcs.len() as u32;
        for (llc, order) in llcs.orders().into_iter().enumerate() {
            cfg.llc_nr_cpus[llc] = llcs.nr_cpus()[llc];
            cfg.llc_order[llc][..order.len()].copy_from_slice(&order);
        }
        for (cpu, sibling) in topo.sibling_cpus().into_iter().enumerate().take(nr_cpus) {
            cfg.cpu_sibling[cpu] = sibling;
        }
        // CPUs offline now (the topology lists online CPUs only); later
        // changes arrive through ops.cpu_online/cpu_offline.
        for cpu in (0..nr_cpus).filter(|cpu| !topo.all_cpus.contains_key(cpu)) {
            bss.nest_state.cpus[cpu].offline = 1;
        }
        let places: Vec<(usize, usize)> = topo
            .all_cpus
            .values()
            .map(|cpu| (cpu.id, cpu.package_id))
            .collect();
        for (slot, cpu) in bss
            .spread_order
            .iter_mut()
            .zip(spread_order(&places, nr_cpus))
        {
            *slot = cpu as u32;
        }
        if self.smove_at_min {
            bss.min_perf[..nr_cpus].fill(CPUPERF_ONE as u32);
        } else if self.policy == Policy::Smove {
            fill_min_perf(&mut bss.min_perf[..nr_cpus]);
        }
        let rodata = skel
            .maps
            .rodata_data
            .as_mut()
            .context("the BPF object has no .rodata")?;
        rodata.switch_partial = self.partial;
        rodata.policy_kind = self.policy.bpf_value();
        if let Some(comm) = &self.stall_comm {
            for (dst, &src) in rodata.stall_comm.iter_mut().zip(comm) {
                *dst = src as _;
            }
        }

        let ops = skel.struct_ops.nest_ops_mut();
        // ENQ_EXITING: exiting tasks go through ops.enqueue() like any
        // other, to their LLC queue when nothing is idle. By default the
        // kernel puts them on their previous CPU's local queue, where they
        // wait behind its task even when another CPU goes idle. (The flag
        // exists for schedulers that look tasks up by pid; we do not.)
        ops.flags = *compat::SCX_OPS_KEEP_BUILTIN_IDLE
            | *compat::SCX_OPS_ENQ_EXITING
            | *compat::SCX_OPS_ENQ_LAST
            | if self.partial {
                *compat::SCX_OPS_SWITCH_PARTIAL
            } else {
                0
            };
        if let Some(ms) = self.watchdog_ms {
            ops.timeout_ms = ms;
        }
        Ok(())
    }
}

/// The order in which `--policy spread` hands out CPUs: the online CPUs
/// (`(cpu, socket)` pairs) of each socket in increasing order, the sockets
/// interleaved (so consecutive placements alternate sockets), then the
/// CPUs below `nr_cpus` not listed (offline now), so that every CPU appears
/// once.
fn spread_order(places: &[(usize, usize)], nr_cpus: usize) -> Vec<usize> {
    let mut sockets = std::collections::BTreeMap::<usize, Vec<usize>>::new();
    for &(cpu, socket) in places {
        sockets.entry(socket).or_default().push(cpu);
    }
    sockets.values_mut().for_each(|cpus| cpus.sort_unstable());
    let longest = sockets.values().map(Vec::len).max().unwrap_or(0);
    let mut order: Vec<usize> = (0..longest)
        .flat_map(|i| {
            sockets
                .values()
                .filter_map(move |cpus| cpus.get(i).copied())
        })
        .filter(|&cpu| cpu < nr_cpus)
        .collect();
    let missing: Vec<usize> = (0..nr_cpus).filter(|cpu| !order.contains(cpu)).collect();
    order.extend(missing);
    order
}

/// scx_bpf_cpuperf_cur() scale: the maximum performance level.
const CPUPERF_ONE: u64 = 1024;

/// S_move's frequency test: per CPU, the highest performance level that
/// still counts as the minimum frequency, from cpufreq's cpuinfo_min_freq
/// and cpuinfo_max_freq, plus 1/32 of the scale for measurement noise
/// (the level is measured over the last tick). 0 where cpufreq says
/// nothing: such CPUs count as above their minimum.
fn fill_min_perf(min_perf: &mut [u32]) {
    let mut unknown = 0;
    for (cpu, slot) in min_perf.iter_mut().enumerate() {
        *slot = cpu_min_perf(cpu).unwrap_or(0);
        unknown += usize::from(*slot == 0);
    }
    if unknown > 0 {
        log::warn!(
            "S_move: no cpufreq minimum/maximum frequency for {unknown} of {} CPUs; \
             they always count as above their minimum frequency (no deferred moves there)",
            min_perf.len()
        );
    }
}

fn cpu_min_perf(cpu: usize) -> Option<u32> {
    let read = |name: &str| -> Option<u64> {
        let path = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/{name}");
        std::fs::read_to_string(path).ok()?.trim().parse().ok()
    };
    let (min, max) = (read("cpuinfo_min_freq")?, read("cpuinfo_max_freq")?);
    if max == 0 || min >= max {
        return None;
    }
    let level = min * CPUPERF_ONE / max + CPUPERF_ONE / 32;
    Some(level.clamp(1, CPUPERF_ONE - 1) as u32)
}

/// The CPU topology from sysfs. A CPU going offline or online meanwhile
/// makes its files vanish or appear mid-read, so a failed read is retried
/// for a while (this is also how a restart after hotplug starts).
fn read_topology() -> Result<Topology> {
    let mut attempts = 0;
    loop {
        match Topology::new() {
            Ok(topo) => return Ok(topo),
            Err(_) if attempts < 50 => {
                attempts += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(err) => return Err(err).context("cannot read the CPU topology from sysfs"),
        }
    }
}

/// The CPU this thread runs on: where Nest starts, and so where reserve
/// searches begin.
fn current_cpu() -> i32 {
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    cpu.max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(args: &[&str]) -> Result<SchedConfig> {
        let argv = std::iter::once("scx_nest").chain(args.iter().copied());
        SchedConfig::from_opts(&Opts::parse_from(argv))
    }

    #[test]
    fn smove_and_slocal_are_policies_with_a_50us_default_delay() {
        let cfg = config(&["--policy", "smove"]).unwrap();
        assert_eq!(cfg.policy, Policy::Smove);
        assert_eq!(cfg.params.smove_delay_ns, nest_policy::SMOVE_DELAY_NS);
        assert!(cfg.describe().contains("D 50 us"));
        assert_eq!(
            config(&["--policy", "slocal"]).unwrap().policy,
            Policy::Slocal
        );
    }

    #[test]
    fn spread_alternates_sockets_and_lists_every_cpu_once() {
        let places = [(0, 0), (1, 0), (2, 1), (3, 1), (5, 0)];
        assert_eq!(spread_order(&places, 6), vec![0, 2, 1, 3, 5, 4]);
        assert_eq!(
            config(&["--policy", "spread"]).unwrap().policy,
            Policy::Spread
        );
    }

    #[test]
    fn perf_modes_default_to_util_and_bad_ones_are_refused() {
        assert_eq!(config(&[]).unwrap().params.perf, PerfMode::Util);
        assert!(
            config(&[])
                .unwrap()
                .describe()
                .contains("frequency requests util")
        );
        for mode in PerfMode::ALL {
            let cfg = config(&["--perf", mode.name()]).unwrap();
            assert_eq!(cfg.params.perf, mode);
        }
        let argv = ["scx_nest", "--perf", "turbo"];
        let err = Opts::try_parse_from(argv).unwrap_err().to_string();
        assert!(err.contains("valid: util, nest, max"), "{err}");
    }

    #[test]
    fn the_smove_delay_is_validated() {
        let cfg = config(&["--policy", "smove", "--smove-delay", "200us"]).unwrap();
        assert_eq!(cfg.params.smove_delay_ns, 200_000);
        for bad in ["0us", "500ns", "1s", "fast"] {
            let err = config(&["--smove-delay", bad]).unwrap_err().to_string();
            assert!(err.contains("--smove-delay"), "{bad}: {err}");
        }
    }
}
