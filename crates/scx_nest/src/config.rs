//! Command-line options, their validation, and the BPF configuration built
//! from them. Everything here is checked before the scheduler is loaded.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use nest_policy::{
    LlcLayout, Mechanism, Params, ParamsArgs, PerfMode, duration_ns_within, format_duration_ns,
    interval_within, parse_duration_ns,
};
use scx_utils::{NR_CPU_IDS, Topology, compat};

use crate::bpf_intf;

/// What scx_nest's exit status means (docs/reference/conventions.md).
const EXIT_STATUS: &str = "\
Exit status:
  0  detached cleanly on SIGINT or SIGTERM (or --help-stats, --monitor ended)
  1  could not load or attach, or the kernel ejected the scheduler
  2  usage error";

const TUNABLES: &str = "Nest tunables";
const PLACEMENT: &str = "Placement";
const STATISTICS: &str = "Statistics";
const KERNEL: &str = "Kernel and debugging";

/// scx_nest: the Nest scheduler (EuroSys 2022) on sched_ext.
///
/// Places forked and woken tasks on a small, self-sizing nest of recently
/// used cores, so that work runs on warm cores at high frequency instead of
/// being spread over cold idle cores. Runs until SIGINT or SIGTERM.
///
/// Needs Linux 6.12 or later with sched_ext (CONFIG_SCHED_CLASS_EXT);
/// tested in guests on 6.12, 7.2 and 7.3, and loaded on 6.16 to 6.18.
///
/// Durations take a unit: ns, us, ms or s; the intervals of --stats and --monitor may also be a bare
/// number of seconds, as in scx's other schedulers.
#[derive(Debug, Parser)]
#[command(version = env!("NEST_VERSION"), after_long_help = EXIT_STATUS)]
pub struct Opts {
    #[command(flatten)]
    pub nest: ParamsArgs,

    /// Time slice of a task (100us to 1s).
    #[arg(long, default_value = "4ms", value_name = "DURATION",
          value_parser = duration_ns_within(100_000..=1_000_000_000), help_heading = TUNABLES)]
    pub slice: u64,

    /// Placement policy: nest; builtin (sched_ext's default idle-CPU
    /// selection only, the minimal baseline for comparisons); slocal (the
    /// waker's CPU); smove (the default CPU if it runs above its minimum
    /// frequency, else the waker's CPU with a move after --smove-delay);
    /// spread (the next idle CPU in a round robin alternating sockets: a
    /// negative control for placement tests, not for real use).
    #[arg(long, value_enum, default_value_t = Policy::Nest, help_heading = PLACEMENT)]
    pub policy: Policy,

    /// Schedule only tasks whose policy is SCHED_EXT (and their children),
    /// leaving every other task to the default scheduler.
    #[arg(long, help_heading = PLACEMENT)]
    pub partial: bool,

    /// Keep warm spinning in a virtual machine. It is off there by default:
    /// a vCPU cannot keep a physical core's frequency up (the host decides
    /// that), and a spinning vCPU takes host time from the guest's other
    /// vCPUs (under QEMU's emulation, a pipe ping-pong ran 86 round trips a
    /// second with spinning and 2449 without).
    #[arg(long, help_heading = PLACEMENT)]
    pub warm_spin_in_vm: bool,

    /// Print statistics every INTERVAL while scheduling (seconds, e.g. 1
    /// or 0.5, or a duration with its unit, e.g. 500ms).
    #[arg(long, value_name = "INTERVAL", value_parser = interval_within(MIN_INTERVAL_NS..=u64::MAX),
          help_heading = STATISTICS)]
    pub stats: Option<Duration>,

    /// Print the statistics of a running scx_nest every INTERVAL (seconds,
    /// e.g. 1, or with a unit, e.g. 500ms); does not start a scheduler.
    #[arg(long, value_name = "INTERVAL", value_parser = interval_within(MIN_INTERVAL_NS..=u64::MAX),
          help_heading = STATISTICS)]
    pub monitor: Option<Duration>,

    /// Describe the statistics and exit.
    #[arg(long, help_heading = STATISTICS)]
    pub help_stats: bool,

    /// Print this help as a man page (roff) and exit: `scx_nest
    /// --help-man > scx_nest.8`.
    #[arg(long, help_heading = KERNEL)]
    pub help_man: bool,

    /// Write each change of a CPU's nest to the kernel's trace
    /// (`bpf_printk()`, tracepoint bpf_trace:bpf_trace_printk), where `nest
    /// trace record` reads it: recorded schedules then show the nests.
    #[arg(long, help_heading = STATISTICS)]
    pub trace_nests: bool,

    /// Write each placement to the kernel's trace with the step of the
    /// policy that decided it (prev, primary, reserve, fallback...), where
    /// `nest trace record` reads it as `Placement` events.
    #[arg(long, help_heading = STATISTICS)]
    pub trace_placements: bool,

    /// Measure each BPF callback's run time (kernel BPF statistics) and
    /// print the totals at exit as `prog-stats:` lines, with the verifier's
    /// instruction count of each program.
    #[arg(long, help_heading = STATISTICS)]
    pub prog_stats: bool,

    /// How long a runnable task may wait before the kernel ejects the
    /// scheduler (2s, twice the starvation guard's wait, to 30s; default:
    /// the kernel's, 30s).
    #[arg(long, value_name = "DURATION", value_parser = watchdog, help_heading = KERNEL)]
    pub watchdog: Option<u64>,

    /// Bytes of the kernel's debug dump when the scheduler is ejected (0:
    /// the kernel's default).
    #[arg(long, default_value_t = 0, value_name = "BYTES", help_heading = KERNEL)]
    pub exit_dump_len: u32,

    /// Print libbpf's messages while loading, debug ones included (by
    /// default only its warnings).
    #[arg(short, long, help_heading = KERNEL)]
    pub verbose: bool,

    /// Testing only: S_move counts every CPU as at its minimum frequency,
    /// so that every placement away from the waker's CPU is deferred.
    #[arg(long, hide = true)]
    pub debug_smove_at_min: bool,

    /// Testing only: never run tasks with this command name, so that the
    /// kernel's watchdog ejects the scheduler.
    #[arg(long, hide = true, value_name = "COMM", value_parser = stall_comm)]
    pub debug_stall_comm: Option<String>,
}

/// The shortest interval of --stats and --monitor.
const MIN_INTERVAL_NS: u64 = 1_000_000;

/// The shortest --watchdog. The starvation guard runs a task that waited
/// `STARVE_NS` at its queue's next sweep, up to `STARVE_SWEEP_NS` later, so
/// the watchdog of a scheduler that works may see a task wait that long;
/// twice the guard's wait leaves room for a late tick or a stopped vCPU.
const MIN_WATCHDOG_NS: u64 = 2 * nest_policy::STARVE_NS;
/// The longest --watchdog: the kernel's default and its upper bound.
const MAX_WATCHDOG_NS: u64 = 30_000_000_000;
const _: () = assert!(MIN_WATCHDOG_NS > nest_policy::STARVE_NS + nest_policy::STARVE_SWEEP_NS);

/// --watchdog's parser: a timeout a starving task could outlast is refused
/// with the reason.
fn watchdog(text: &str) -> Result<u64, String> {
    let ns = parse_duration_ns(text)?;
    if ns < MIN_WATCHDOG_NS {
        return Err(format!(
            "must be at least {}, twice the starvation guard's wait of {} (a task may wait that \
             long, plus up to {} until the guard looks, before it runs), not {text}",
            format_duration_ns(MIN_WATCHDOG_NS),
            format_duration_ns(nest_policy::STARVE_NS),
            format_duration_ns(nest_policy::STARVE_SWEEP_NS)
        ));
    }
    duration_ns_within(MIN_WATCHDOG_NS..=MAX_WATCHDOG_NS)(text)
}

fn stall_comm(comm: &str) -> Result<String, String> {
    if comm.is_empty() || comm.len() >= bpf_intf::scx_nest_consts_COMM_LEN as usize {
        return Err("must be 1 to 15 bytes long".into());
    }
    Ok(comm.to_string())
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
    partial: bool,
    watchdog_ms: Option<u32>,
    exit_dump_len: u32,
    stall_comm: Option<Vec<u8>>,
    smove_at_min: bool,
    trace_nests: bool,
    trace_placements: bool,
    /// Warm spinning was switched off because this is a virtual machine.
    spin_off_in_vm: bool,
    /// Frequency requests were switched off because no governor reads them.
    perf_off_unread: bool,
}

/// What the machine scx_nest runs on decides about its defaults.
#[derive(Clone, Copy, Debug)]
pub struct Host {
    /// A virtual machine ([`in_virtual_machine`]): no warm spinning.
    pub in_vm: bool,
    /// Some CPU's cpufreq governor is schedutil ([`schedutil_governs`]):
    /// frequency requests are read.
    pub schedutil: bool,
}

impl Host {
    pub fn probe() -> Self {
        Self {
            in_vm: in_virtual_machine(),
            schedutil: schedutil_governs(),
        }
    }
}

/// Is schedutil the cpufreq governor of some CPU? It is the one governor
/// that reads sched_ext's performance targets (sugov_get_util() ->
/// scx_cpuperf_target()); under any other, or with no cpufreq driver (most
/// virtual machines), a request is work for nothing at every switch.
pub fn schedutil_governs() -> bool {
    std::fs::read_dir("/sys/devices/system/cpu/cpufreq").is_ok_and(|policies| {
        policies.flatten().any(|policy| {
            std::fs::read_to_string(policy.path().join("scaling_governor"))
                .is_ok_and(|governor| governor.trim() == "schedutil")
        })
    })
}

/// Is this a virtual machine? The CPU says so (the `hypervisor` flag of
/// /proc/cpuinfo, CPUID leaf 1 ECX bit 31, which KVM and QEMU set).
pub fn in_virtual_machine() -> bool {
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|info| {
        info.lines()
            .filter(|line| line.starts_with("flags"))
            .any(|line| line.split_whitespace().any(|flag| flag == "hypervisor"))
    })
}

impl SchedConfig {
    /// The configuration of `opts` on `host`: in a virtual machine warm
    /// spinning is off unless `--warm-spin-in-vm` asks for it, and where
    /// no governor reads frequency requests none are made unless `--perf`
    /// asks for them.
    pub fn from_opts(opts: &Opts, host: &Host) -> Self {
        let mut params = Params {
            slice_ns: opts.slice,
            ..opts.nest.params()
        };
        let spin_off_in_vm =
            host.in_vm && !opts.warm_spin_in_vm && !params.disabled.contains(&Mechanism::WarmSpin);
        if spin_off_in_vm {
            params = params.in_virtual_machine();
        }
        let perf_off_unread = !host.schedutil && opts.nest.perf.is_none();
        if perf_off_unread {
            params.perf = PerfMode::Max;
        }
        Self {
            spin_off_in_vm,
            perf_off_unread,
            policy: opts.policy,
            params,
            partial: opts.partial,
            watchdog_ms: opts.watchdog.map(|ns| (ns / 1_000_000) as u32),
            exit_dump_len: opts.exit_dump_len,
            stall_comm: opts
                .debug_stall_comm
                .as_ref()
                .map(|c| c.as_bytes().to_vec()),
            smove_at_min: opts.debug_smove_at_min,
            trace_nests: opts.trace_nests,
            trace_placements: opts.trace_placements,
        }
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
             frequency requests {}, {}{}{}{}",
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
            self.params.slice_ns / 1000,
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
            },
            if self.spin_off_in_vm {
                " (warm-spin off in a virtual machine; --warm-spin-in-vm keeps it)"
            } else {
                ""
            },
            if self.perf_off_unread {
                " (no frequency requests: no CPU's governor is schedutil; --perf util makes them)"
            } else {
                ""
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
        cfg.slice_ns = self.params.slice_ns;
        cfg.slice_min_ns = nest_policy::slice_min_ns(self.params.slice_ns);
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
        for cpu in topo.all_cpus.keys() {
            rodata.cpu_in_topology[*cpu] = true;
        }
        rodata.trace_nests = self.trace_nests;
        rodata.trace_placements = self.trace_placements;
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
        // ENQ_MIGRATION_DISABLED: a task preempted or woken inside a
        // migrate_disable() section goes through ops.enqueue() too, to its
        // CPU's pinned queue (task_pinned()), in virtual-time order. By
        // default the kernel puts it on the local queue with a 20 ms slice,
        // outside the queues the policy orders; kernels without the flag
        // (0 here) still do that.
        ops.flags = *compat::SCX_OPS_KEEP_BUILTIN_IDLE
            | *compat::SCX_OPS_ENQ_EXITING
            | *compat::SCX_OPS_ENQ_LAST
            | *compat::SCX_OPS_ENQ_MIGRATION_DISABLED
            | if self.partial {
                *compat::SCX_OPS_SWITCH_PARTIAL
            } else {
                0
            };
        if let Some(ms) = self.watchdog_ms {
            ops.timeout_ms = ms;
        }
        ops.exit_dump_len = self.exit_dump_len;
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
/// nothing: such CPUs count as above their minimum. The hardware's range,
/// not scx_utils' `Topology` frequencies, which are the policy's
/// `scaling_min_freq`/`scaling_max_freq` that an administrator may narrow.
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

    /// A machine with schedutil, not virtual.
    const BARE_METAL: Host = Host {
        in_vm: false,
        schedutil: true,
    };
    /// A virtual machine with no cpufreq.
    const VM: Host = Host {
        in_vm: true,
        schedutil: false,
    };

    fn try_opts(args: &[&str]) -> Result<Opts, clap::Error> {
        Opts::try_parse_from(std::iter::once("scx_nest").chain(args.iter().copied()))
    }

    fn opts(args: &[&str]) -> Opts {
        try_opts(args).unwrap()
    }

    fn config(args: &[&str]) -> Result<SchedConfig, clap::Error> {
        Ok(SchedConfig::from_opts(&try_opts(args)?, &BARE_METAL))
    }

    /// The message of a refused command line; clap exits 2 for these.
    fn usage_error(args: &[&str]) -> String {
        let err = config(args).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{err}");
        err.to_string()
    }

    #[test]
    fn frequency_requests_are_off_where_no_governor_reads_them_unless_asked_for() {
        let no_schedutil = Host {
            in_vm: false,
            schedutil: false,
        };
        assert_eq!(
            SchedConfig::from_opts(&opts(&[]), &BARE_METAL).perf_mode(),
            PerfMode::Util
        );
        let unread = SchedConfig::from_opts(&opts(&[]), &no_schedutil);
        assert_eq!(unread.perf_mode(), PerfMode::Max);
        assert!(unread.describe().contains("no CPU's governor is schedutil"));
        for mode in [PerfMode::Util, PerfMode::Nest] {
            let asked = SchedConfig::from_opts(&opts(&["--perf", mode.name()]), &no_schedutil);
            assert_eq!(asked.perf_mode(), mode);
            assert!(!asked.describe().contains("schedutil"));
        }
    }

    #[test]
    fn warm_spinning_is_off_in_a_virtual_machine_unless_asked_for() {
        let spinning = |cfg: &SchedConfig| !cfg.params.disabled.contains(&Mechanism::WarmSpin);
        assert!(spinning(&SchedConfig::from_opts(&opts(&[]), &BARE_METAL)));
        let vm = SchedConfig::from_opts(&opts(&[]), &VM);
        assert!(!spinning(&vm));
        assert!(
            vm.describe()
                .contains("a virtual machine; --warm-spin-in-vm keeps it")
        );
        assert!(spinning(&SchedConfig::from_opts(
            &opts(&["--warm-spin-in-vm"]),
            &VM
        )));
        // Switched off by hand: nothing to say about the machine.
        let by_hand = SchedConfig::from_opts(&opts(&["--disable", "warm-spin"]), &VM);
        assert!(!spinning(&by_hand));
        assert!(!by_hand.describe().contains("virtual machine"));
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
        let err = usage_error(&["--policy", "fast"]);
        assert!(
            err.contains("[possible values: nest, builtin, slocal, smove, spread]"),
            "{err}"
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
        let err = usage_error(&["--perf", "turbo"]);
        assert!(err.contains("valid: util, nest, max"), "{err}");
    }

    #[test]
    fn durations_need_units_except_intervals_and_stay_in_their_ranges() {
        let cfg = config(&["--policy", "smove", "--smove-delay", "200us"]).unwrap();
        assert_eq!(cfg.params.smove_delay_ns, 200_000);
        for bad in ["0us", "500ns", "1s"] {
            let err = usage_error(&["--smove-delay", bad]);
            assert!(
                err.contains("--smove-delay") && err.contains("between 1us and 100ms"),
                "{bad}: {err}"
            );
        }
        let err = usage_error(&["--slice", "fast"]);
        assert!(err.contains("ns, us, ms or s"), "{err}");
        let err = usage_error(&["--stats", "1ns"]);
        assert!(
            err.contains("--stats") && err.contains("at least 1ms"),
            "{err}"
        );
        let opts = Opts::try_parse_from(["scx_nest", "--stats", "500ms", "--watchdog", "2s"]);
        let opts = opts.unwrap();
        assert_eq!(opts.stats, Some(Duration::from_millis(500)));
        assert_eq!(
            SchedConfig::from_opts(&opts, &BARE_METAL).watchdog_ms,
            Some(2000)
        );
        // Bare seconds, as scx's schedulers take them.
        let opts = Opts::try_parse_from(["scx_nest", "--stats", "1"]).unwrap();
        assert_eq!(opts.stats, Some(Duration::from_secs(1)));
        let opts = Opts::try_parse_from(["scx_nest", "--monitor", "0.5"]).unwrap();
        assert_eq!(opts.monitor, Some(Duration::from_millis(500)));
        let err = usage_error(&["--watchdog", "2"]);
        assert!(err.contains("no unit"), "{err}");
        let err = usage_error(&["--watchdog", "31s"]);
        assert!(err.contains("between 2s and 30s"), "{err}");
    }

    #[test]
    fn a_watchdog_a_starving_task_could_outlast_is_refused() {
        assert_eq!(nest_policy::STARVE_NS, 1_000_000_000);
        for bad in ["100ms", "1s", "1.999s"] {
            let err = usage_error(&["--watchdog", bad]);
            assert!(
                err.contains("--watchdog")
                    && err.contains("must be at least 2s, twice the starvation guard's wait of 1s")
                    && err.contains(&format!("not {bad}")),
                "{bad}: {err}"
            );
        }
        let cfg = |arg: &str| config(&["--watchdog", arg]).unwrap().watchdog_ms;
        assert_eq!(cfg("2s"), Some(2000));
        assert_eq!(cfg("30s"), Some(30_000));
        // The help names the same bound.
        use clap::CommandFactory;
        let help = Opts::command().render_long_help().to_string();
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        let bound = format!(
            "({}, twice the starvation guard's wait",
            format_duration_ns(MIN_WATCHDOG_NS)
        );
        assert!(help.contains(&bound), "{help}");
    }

    #[test]
    fn other_bad_values_are_usage_errors_that_say_what_is_valid() {
        let cfg = config(&["--disable", "reserve,warm-spin"]).unwrap();
        assert_eq!(
            cfg.params.disabled,
            vec![Mechanism::Reserve, Mechanism::WarmSpin]
        );
        let err = usage_error(&["--disable", "spinning"]);
        assert!(err.contains("valid: attach, reserve,"), "{err}");
        let err = usage_error(&["--r-impatient", "0"]);
        assert!(err.contains("--r-impatient"), "{err}");
        let err = usage_error(&["--debug-stall-comm", "a-name-of-16-byte"]);
        assert!(err.contains("1 to 15 bytes"), "{err}");
    }

    #[test]
    fn exit_dump_len_and_verbose_are_taken() {
        let opts = Opts::try_parse_from(["scx_nest", "-v", "--exit-dump-len", "65536"]).unwrap();
        assert!(opts.verbose);
        assert_eq!(
            SchedConfig::from_opts(&opts, &BARE_METAL).exit_dump_len,
            65536
        );
        assert!(!Opts::try_parse_from(["scx_nest"]).unwrap().verbose);
    }

    #[test]
    fn the_version_names_the_git_revision() {
        let err = Opts::try_parse_from(["scx_nest", "-V"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayVersion);
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("scx_nest {} (git ", env!("CARGO_PKG_VERSION"))),
            "{text}"
        );
    }

    /// docs/reference/conventions.md: every option says what it does.
    #[test]
    fn every_option_has_help() {
        use clap::CommandFactory;
        let command = Opts::command();
        let silent: Vec<_> = command
            .get_arguments()
            .filter(|a| !a.is_hide_set() && a.get_help().is_none() && a.get_long_help().is_none())
            .map(|a| a.get_id().to_string())
            .filter(|id| id != "help" && id != "version")
            .collect();
        assert!(silent.is_empty(), "options without help: {silent:?}");
    }

    #[test]
    fn help_groups_the_options_by_topic() {
        use clap::CommandFactory;
        let help = Opts::command().render_help().to_string();
        let position = |text: &str| help.find(text).unwrap_or_else(|| panic!("{text}: {help}"));
        assert!(position("Nest tunables:") < position("--p-remove"));
        assert!(position("--disable") < position("--slice"));
        assert!(position("--slice") < position("Placement:"));
        assert!(position("Placement:") < position("--partial"));
        assert!(position("Statistics:") < position("--monitor"));
        assert!(position("Kernel and debugging:") < position("--exit-dump-len"));
    }
}
