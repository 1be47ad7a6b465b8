//! `nest validate`: the simulator's models against real kernels.
//!
//! For each kernel generation (Debian's sched_ext kernel for `linux-7`,
//! Debian 11's for `linux-5.10`), boots the 2x4x2 NUMA guest and records
//! each workload with `nest trace record` under each scheduler asked for:
//! the kernel's default scheduler, and `scx_nest` (its default options,
//! attached system-wide, reporting its nests to the trace with
//! `--trace-nests`; `linux-7` only, 5.10 has no sched_ext). Replays
//! every recorded command in the simulator on the guest's model
//! (`test-guest-2s-tcg`, with the vCPU wake-up delays measured in the same
//! recording: docs/design/simulator.md, "Guest vCPU wake-up"; `--seeds` times, each
//! with its own draws of those delays) under the scheduler's model
//! ([`Model`]): the Linux
//! model of the same generation for the default scheduler, the
//! simulator's Nest (the same C policy as scx_nest) for scx_nest; and
//! prints the recorded command's placement in both, side by side (the
//! median of the replays'), with whether each figure agrees within its
//! band ([`BANDS`]). Exits non-zero
//! when a figure leaves its band.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use nest_policy::duration_within;
use nest_sim::machine::VcpuWakeup;
use nest_sim::policy::Policy;
use nest_sim::policy::baseline::Baseline;
use nest_sim::policy::fork_balance::LinuxVersion;
use nest_sim::policy::nest::Nest;
use nest_sim::workload::{replay, rtapp};
use nest_sim::{Governor, Machine, SimConfig};
use nest_trace::Trace;
use nest_trace::metrics::{
    self, IdleCpuWakeup, IntervalStats, TasksPlacement, interval_stats, tree_placement_in,
};
use nest_trace::svg;
use nest_trace::table::{Cell as TableCell, Table, escape};
use nest_trace::timeline::Timeline;
use nest_vm::{GuestClock, VmSpec, shell_quote};

use crate::source;
use crate::usage;
use crate::vm::{ensure_kernel, find_repo_file};

/// The simulator's model of the guest (2 sockets x 4 cores x 2 threads,
/// emulated: one speed, so that each replayed run lasts as long as the
/// guest recorded it).
const GUEST_MACHINE: &str = "test-guest-2s-tcg";

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Kernel generations to record under [default: linux-7,linux-5.10].
    #[arg(long, value_enum, value_delimiter = ',', value_name = "KERNELS")]
    kernels: Option<Vec<LinuxVersion>>,
    /// Schedulers to record under, each compared with its model: `default`
    /// (the kernel's own) with the Linux model of the kernel's generation,
    /// `scx_nest` (its default options, for every task; linux-7 only) with
    /// the simulator's Nest [default: default,scx_nest].
    #[arg(long, value_enum, value_delimiter = ',', value_name = "SCHEDULERS")]
    schedulers: Option<Vec<Scheduler>>,
    /// Workloads to record and replay (nest-load programs, and a real
    /// configure script).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "chain,pingpong,batch,overload,configure"
    )]
    workloads: Vec<Workload>,
    /// Directory for the recorded traces and figures.csv.
    #[arg(short, long, default_value = "out/validate")]
    out: PathBuf,
    /// Compare the traces already in --out instead of booting guests.
    #[arg(long)]
    from_traces: bool,
    /// Longest a guest may run (it is killed after).
    #[arg(long, default_value = "900s", value_parser = duration_within(1_000_000_000..=u64::MAX))]
    timeout: Duration,
    /// What the guest's time follows while it records: `host` (QEMU's
    /// default: an emulated instruction is 10-50x slower than on hardware,
    /// the timers are not) or QEMU's instruction counter, `icount` (1 ns
    /// per guest instruction) or `icount:N` (2^N ns). Written into each
    /// trace's meta (`guest_clock`) and beside every figure; see
    /// docs/design/decisions/guest-clock.md.
    #[arg(long, default_value = "host", value_name = "CLOCK")]
    guest_clock: GuestClock,
    /// Which recordings are replayed with the guest's other tasks (kernel
    /// threads, the recorder, scx_nest's own process) beside the recorded
    /// command's task tree (`nest trace replay --others`): `scx_nest`'s
    /// (Nest's nests are machine-wide, and those tasks move them), `all`
    /// or `none`. Figures are the tree's either way.
    #[arg(long, value_enum, default_value = "scx_nest", value_name = "WHICH")]
    others: Others,
    /// How many times each recording is replayed, with seeds 1 to N of the
    /// vCPU wake-up draws. A simulated figure is their median (its range
    /// beside it): one replay's figures move with the draws
    /// (docs/design/decisions/medians-in-validation.md).
    #[arg(long, default_value_t = 21, value_parser = clap::value_parser!(u64).range(1..=99))]
    seeds: u64,
    /// How many times the guest records each workload, in the same boot
    /// (every workload, then every workload again). A real figure is the
    /// median of the runs (their range beside it), the simulated one the
    /// median of all their replays: one run of the guest is one draw, and
    /// its fork bursts' nests and CPUs move by more than their bands from
    /// run to run (docs/design/decisions/medians-in-validation.md). With
    /// --from-traces, the first N recorded runs are compared [default: 5;
    /// with --from-traces, every run recorded].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=20))]
    runs: Option<u32>,
}

/// Runs per workload when `--runs` is not given.
const DEFAULT_RUNS: u32 = 5;

/// Which recordings `nest validate` replays with the guest's other tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Others {
    /// None: the recorded command's tree alone.
    None,
    /// Those recorded under scx_nest.
    #[value(name = "scx_nest")]
    ScxNest,
    /// Every recording, under either scheduler.
    All,
}

impl Others {
    /// Are the other tasks replayed for a recording under `scheduler`?
    fn replayed_for(self, scheduler: Scheduler) -> bool {
        match self {
            Others::None => false,
            Others::ScxNest => scheduler == Scheduler::ScxNest,
            Others::All => true,
        }
    }
}

const ALL_KERNELS: [LinuxVersion; 2] = [LinuxVersion::Linux7, LinuxVersion::Linux510];

/// What a workload is recorded under in the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Scheduler {
    /// The kernel's own scheduler (EEVDF in 7.x, CFS in 5.10).
    Default,
    /// scx_nest with its default options, attached for every task.
    #[value(name = "scx_nest")]
    ScxNest,
}

/// scx_nest's options in the guest: its defaults, and its nests and
/// placements written to the trace, for the primary nest's size and how
/// placements were decided.
const SCX_NEST_OPTIONS: &str = "--trace-nests --trace-placements";

const ALL_SCHEDULERS: [Scheduler; 2] = [Scheduler::Default, Scheduler::ScxNest];

impl Scheduler {
    /// The simulator's model of this scheduler.
    fn model(self) -> Model {
        match self {
            Scheduler::Default => Model::Linux,
            Scheduler::ScxNest => Model::Nest,
        }
    }

    /// Can it run under `kernel`? scx_nest needs sched_ext, which of the
    /// guest kernels only Debian's 7.x has.
    fn runs_under(self, kernel: LinuxVersion) -> bool {
        match self {
            Scheduler::Default => true,
            Scheduler::ScxNest => kernel == LinuxVersion::Linux7,
        }
    }
}

/// A simulator policy a real scheduler is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Model {
    /// The Linux model (`nest sim -p linux`), of the recorded kernel's
    /// generation.
    Linux,
    /// The simulator's Nest with scx_nest's defaults in a virtual machine,
    /// where warm spinning is off (`nest sim -p nest-nospin`).
    Nest,
}

impl Model {
    /// Its name in figures.csv: the policy's name in `nest sim -p`.
    fn name(self) -> &'static str {
        match self {
            Model::Linux => "linux",
            Model::Nest => "nest-nospin",
        }
    }

    /// Its name in titles.
    fn title(self) -> &'static str {
        match self {
            Model::Linux => "Linux model",
            Model::Nest => "Nest model",
        }
    }

    /// The policy, for a machine with `machine`'s topology. Nest gets
    /// scx_nest's defaults as scx_nest applies them in the guest, a
    /// virtual machine (warm spinning off).
    fn policy(self, machine: &Machine) -> Result<Box<dyn Policy>> {
        Ok(match self {
            Model::Linux => Box::new(Baseline),
            Model::Nest => {
                let params = nest_policy::Params::default().in_virtual_machine();
                Box::new(Nest::new(&machine.topology(), params)?)
            }
        })
    }
}

/// One kernel and scheduler the workloads are recorded under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Recording {
    kernel: LinuxVersion,
    scheduler: Scheduler,
}

impl Recording {
    /// `linux-7 scx_nest vs Nest model`.
    fn title(self) -> String {
        format!(
            "{} {} vs {}",
            value_name(self.kernel),
            value_name(self.scheduler),
            self.scheduler.model().title()
        )
    }

    /// The trace of `workload`'s `run` (from 1): `OUT/linux-7-chain.nest.jsonl`
    /// under the default scheduler (the name traces had before scx_nest
    /// was recorded too), `OUT/linux-7-scx_nest-chain.nest.jsonl` under
    /// scx_nest; from the second run on, `OUT/linux-7-chain-run2.nest.jsonl`.
    fn trace_path(self, out: &Path, workload: Workload, run: u32) -> PathBuf {
        let scheduler = match self.scheduler {
            Scheduler::Default => String::new(),
            other => format!("{}-", value_name(other)),
        };
        let run = match run {
            1 => String::new(),
            n => format!("-run{n}"),
        };
        out.join(format!(
            "{}-{scheduler}{}{run}.nest.jsonl",
            value_name(self.kernel),
            value_name(workload)
        ))
    }

    /// Where the replay (seed 1) of the first run's trace in the simulator
    /// goes: `OUT/linux-7-scx_nest-chain.sim.nest.jsonl`.
    fn simulated_trace_path(self, out: &Path, workload: Workload) -> PathBuf {
        let real = self.trace_path(out, workload, 1);
        let name = real.file_name().unwrap_or_default().to_string_lossy();
        real.with_file_name(name.replace(".nest.jsonl", ".sim.nest.jsonl"))
    }
}

/// The recordings `--kernels` and `--schedulers` ask for (`None`: not
/// given, all of them), kernel by kernel, and a note for each pair left
/// out because the scheduler cannot run under the kernel. A kernel or
/// scheduler named explicitly that would have no recording at all is a
/// usage error.
fn recordings(
    kernels: Option<&[LinuxVersion]>,
    schedulers: Option<&[Scheduler]>,
) -> Result<(Vec<Recording>, Vec<String>)> {
    let mut chosen = Vec::new();
    let mut notes = Vec::new();
    for &kernel in kernels.unwrap_or(&ALL_KERNELS) {
        for &scheduler in schedulers.unwrap_or(&ALL_SCHEDULERS) {
            if scheduler.runs_under(kernel) {
                chosen.push(Recording { kernel, scheduler });
            } else {
                notes.push(format!(
                    "{} under {}: skipped, {} has no sched_ext",
                    value_name(scheduler),
                    value_name(kernel),
                    value_name(kernel)
                ));
            }
        }
    }
    refuse_unrecorded(kernels, schedulers, &chosen)?;
    Ok((chosen, notes))
}

/// Can `kernel` boot under `clock`? Debian 11's 5.10 stops in its SMP
/// bring-up under QEMU 7.2's instruction counter: its clock stood still
/// at 0.42 s ("x86: Booting SMP configuration:") for 9.5 minutes of host
/// time (docs/guides/guest-vm.md, "Guest timing").
fn boots_under(kernel: LinuxVersion, clock: GuestClock) -> bool {
    clock == GuestClock::Host || kernel != LinuxVersion::Linux510
}

/// The kernels to record under with `clock` (`None`: `--kernels` not
/// given): without `--kernels`, those that boot under it, with a note
/// for the others; a kernel named explicitly that cannot is a usage
/// error. Traces already recorded (`from_traces`) are compared whatever
/// the clock.
fn kernels_for_clock(
    kernels: Option<&[LinuxVersion]>,
    clock: GuestClock,
    from_traces: bool,
) -> Result<(Option<Vec<LinuxVersion>>, Option<String>)> {
    if from_traces {
        return Ok((kernels.map(<[_]>::to_vec), None));
    }
    match kernels {
        Some(kernels) => match kernels.iter().find(|&&k| !boots_under(k, clock)) {
            Some(&kernel) => Err(usage(format!(
                "--kernels names {k}, which does not boot under --guest-clock {clock} (its SMP \
                 bring-up stops under QEMU's instruction counter, docs/guides/guest-vm.md); record it with \
                 --guest-clock host",
                k = value_name(kernel)
            ))),
            None => Ok((Some(kernels.to_vec()), None)),
        },
        None => {
            let (boot, skip): (Vec<LinuxVersion>, Vec<LinuxVersion>) =
                ALL_KERNELS.iter().partition(|&&k| boots_under(k, clock));
            let note = (!skip.is_empty()).then(|| {
                format!(
                    "{}: skipped, does not boot under --guest-clock {clock} (docs/guides/guest-vm.md)",
                    names(&skip)
                )
            });
            // Every kernel boots: leave them unnamed, as asked.
            Ok((note.is_some().then_some(boot), note))
        }
    }
}

/// A usage error when a kernel or scheduler named explicitly has no
/// recording in `chosen`.
fn refuse_unrecorded(
    kernels: Option<&[LinuxVersion]>,
    schedulers: Option<&[Scheduler]>,
    chosen: &[Recording],
) -> Result<()> {
    let asked_kernels = names(kernels.unwrap_or(&ALL_KERNELS));
    let asked_schedulers = names(schedulers.unwrap_or(&ALL_SCHEDULERS));
    let kernels = kernels.unwrap_or_default();
    if let Some(&kernel) = kernels
        .iter()
        .find(|&&k| !chosen.iter().any(|r| r.kernel == k))
    {
        return Err(usage(format!(
            "--kernels names {k}, but no scheduler of --schedulers {asked_schedulers} runs \
             under it: {k} has no sched_ext; add default to --schedulers",
            k = value_name(kernel)
        )));
    }
    let schedulers = schedulers.unwrap_or_default();
    if let Some(&scheduler) = schedulers
        .iter()
        .find(|&&s| !chosen.iter().any(|r| r.scheduler == s))
    {
        return Err(usage(format!(
            "--schedulers names {s}, but no kernel of --kernels {asked_kernels} can run it: \
             {s} needs sched_ext, which of the guest kernels only linux-7 has; add linux-7 \
             to --kernels",
            s = value_name(scheduler)
        )));
    }
    Ok(())
}

/// `linux-7,linux-5.10`.
fn names<T: ValueEnum + Copy>(values: &[T]) -> String {
    values
        .iter()
        .map(|&v| value_name(v))
        .collect::<Vec<_>>()
        .join(",")
}

/// A workload, recorded from its start to its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Workload {
    /// A serial fork/wait chain (40 children of 20 ms), like configure.
    Chain,
    /// Two processes bouncing a byte through pipes for 1 s.
    Pingpong,
    /// One CPU-bound thread per CPU, 200 ms of CPU time each.
    Batch,
    /// Three CPU-bound threads per CPU, 50 ms each.
    Overload,
    /// GNU bc's real configure script (Debian's source package, fetched
    /// into the cache once), in a fresh copy of the tree.
    Configure,
}

/// The Debian source package whose configure script is recorded: bc's is
/// the shortest of the bench's (2 s natively, about a minute emulated).
const CONFIGURE_PACKAGE: &str = "bc";

impl Workload {
    /// The guest's shell command that records this workload into `trace`
    /// (`bin`: where nest and nest-load are).
    fn record_command(self, bin: &Path, trace: &Path, clock: GuestClock) -> String {
        let nest = shell_quote(&bin.join("nest").to_string_lossy());
        let trace = shell_quote(&trace.to_string_lossy());
        let load = shell_quote(&bin.join("nest-load").to_string_lossy());
        let record = |buffer_kb: u32, command: &str| {
            format!(
                "{nest} trace record --buffer-kb {buffer_kb} --meta {GUEST_CLOCK_META}={clock} \
                 --out {trace} -- {command} >&2"
            )
        };
        match self {
            Workload::Chain => record(8192, &format!("{load} churn --count 40 --work-us 20000")),
            Workload::Pingpong => record(8192, &format!("{load} pingpong --seconds 1")),
            Workload::Batch => record(8192, &format!("{load} batch --tasks 16 --work-ms 200")),
            Workload::Overload => record(8192, &format!("{load} batch --tasks 48 --work-ms 50")),
            Workload::Configure => {
                // Thousands of short processes: a larger buffer per CPU.
                let tree = shell_quote(&source::tree(CONFIGURE_PACKAGE).to_string_lossy());
                format!(
                    "rm -rf /tmp/validate-src && cp -a {tree} /tmp/validate-src && \
                     (cd /tmp/validate-src && {})",
                    record(32768, "./configure")
                )
            }
        }
    }
}

/// The trace meta entry saying what the guest's time followed
/// ([`GuestClock`]'s name); traces without it were recorded before it
/// existed, under the host's clock.
const GUEST_CLOCK_META: &str = "guest_clock";

/// The guest clock a trace was recorded under.
fn guest_clock_of(trace: &Trace) -> String {
    trace
        .meta_get(GUEST_CLOCK_META)
        .unwrap_or("host")
        .to_string()
}

/// The name a value has on the command line (`linux-5.10`, `chain`).
fn value_name(value: impl ValueEnum) -> String {
    value
        .to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_string())
}

/// The placement checks' interval.
const INTERVAL_NS: u64 = 100_000_000;

/// The recorded command is the replay's first task, pid 1 in the
/// simulator's trace (pid = task id + 1).
const SIMULATED_ROOT: u32 = 1;

/// One figure of the recorded command's placement.
struct Figure {
    name: &'static str,
    /// Compared for scx_nest's recordings only (the nests).
    nest_only: bool,
    value: fn(&TasksPlacement) -> Option<f64>,
    /// How many events the figure counts (for the bands' floors).
    events: fn(&TasksPlacement) -> u64,
    band: Band,
}

/// How far real and simulated may differ and still agree.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Band {
    /// By at most this much.
    Absolute(f64),
    /// A share that differs by at most `band`, or when neither side counts
    /// more than `rare` events: a share of a few events is all chance.
    Share { band: f64, rare: u64 },
    /// By at most this factor, or when neither side counts more than
    /// `rare` events: a rate of a few events says little (a count of 3
    /// has a Poisson spread of +-1.7).
    Factor { factor: f64, rare: u64 },
}

impl Band {
    /// Whether `real` and `simulated` agree, each a value and the number of
    /// events it counts.
    fn agrees(self, real: (f64, u64), simulated: (f64, u64)) -> bool {
        match self {
            Band::Absolute(band) => (real.0 - simulated.0).abs() <= band,
            Band::Share { band, rare } => {
                real.1.max(simulated.1) <= rare || (real.0 - simulated.0).abs() <= band
            }
            Band::Factor { factor, rare } => {
                let (low, high) = (real.0.min(simulated.0), real.0.max(simulated.0));
                real.1.max(simulated.1) <= rare || high <= low * factor
            }
        }
    }

    /// As in the table: `0.35`, `0.25 or <= 3 events`, `x2 or <= 5 events`.
    fn cell(self) -> TableCell {
        match self {
            Band::Absolute(band) => band.into(),
            Band::Share { band, rare } => format!("{band} or <= {rare} events").into(),
            Band::Factor { factor, rare } => format!("x{factor} or <= {rare} events").into(),
        }
    }
}

fn share(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// The figures compared and their bands. CPUs per 100 ms gets a whole
/// CPU: in the guest, kernel threads and the recorder move idle CPUs'
/// idle stamps, so a child may start on another idle CPU of the same
/// kind, which the simulator (no other tasks) never sees. Shares get 0.25:
/// which class of CPU a fork or wakeup takes is the decision being
/// checked, and a model that gets it right agrees far closer than that.
/// A share of n events has a standard error of up to 0.5 / sqrt(n), as
/// large as the band below 4 events: a share of at most 3 events on both
/// sides agrees whatever its value (7.x pingpong's single fork went to the
/// other socket in one boot and stayed in the next).
/// Migrations per second (the command's tasks starting to run on another
/// CPU than they last ran on: at wakeup, by balancing) agree within a
/// factor of 2, or when neither run counts more than 5: the runs last
/// 0.3-50 s and a handful of migrations decide the rate of a short one.
/// (Earlier the floor was a rate, 5 a second: 1.5 migrations in
/// a 0.3 s run, 250 in a 50 s configure.) The primary nest's mean size
/// (scx_nest only, from its `--trace-nests` reports) gets a whole CPU, as
/// CPUs per 100 ms: the guest's other tasks share the nests.
const SHARE: Band = Band::Share {
    band: 0.25,
    rare: 3,
};

const BANDS: [Figure; 7] = [
    Figure {
        name: "CPUs / 100 ms",
        nest_only: false,
        value: |p| Some(p.mean_cpus),
        events: |p| p.intervals as u64,
        band: Band::Absolute(1.0),
    },
    Figure {
        name: "primary nest CPUs",
        nest_only: true,
        value: |p| p.mean_primary_cpus,
        events: |p| p.intervals as u64,
        band: Band::Absolute(1.0),
    },
    Figure {
        name: "sockets / 100 ms",
        nest_only: false,
        value: |p| Some(p.mean_sockets),
        events: |p| p.intervals as u64,
        band: Band::Absolute(0.35),
    },
    Figure {
        name: "forks to another socket",
        nest_only: false,
        value: |p| share(p.forks.other_socket, p.forks.total()),
        events: |p| p.forks.total(),
        band: SHARE,
    },
    Figure {
        name: "forks to the parent's LLC",
        nest_only: false,
        value: |p| {
            share(
                p.forks.same_cpu + p.forks.same_core + p.forks.same_llc,
                p.forks.total(),
            )
        },
        events: |p| p.forks.total(),
        band: SHARE,
    },
    Figure {
        name: "wakeups on the previous CPU",
        nest_only: false,
        value: |p| share(p.wakeups_on_prev_cpu, p.wakeups),
        events: |p| p.wakeups,
        band: SHARE,
    },
    Figure {
        name: "migrations / s",
        nest_only: false,
        value: |p| (p.window_ns > 0).then(|| p.migrations as f64 * 1e9 / p.window_ns as f64),
        events: |p| p.migrations,
        band: Band::Factor {
            factor: 2.0,
            rare: 5,
        },
    },
];

pub fn run(args: ValidateArgs) -> Result<ExitCode> {
    let (kernels, clock_note) =
        kernels_for_clock(args.kernels.as_deref(), args.guest_clock, args.from_traces)?;
    let (recordings, notes) = recordings(kernels.as_deref(), args.schedulers.as_deref())?;
    for note in clock_note.into_iter().chain(notes) {
        eprintln!("nest validate: note: {note}");
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let out = nest_vm::output_dir(&args.out)?;
    // The runs compared: those recorded now, or those asked for (else all)
    // of an earlier recording; never an earlier recording's extra runs.
    let recorded_runs = args.runs.unwrap_or(DEFAULT_RUNS);
    let runs = if args.from_traces {
        args.runs
    } else {
        Some(recorded_runs)
    };
    if !args.from_traces {
        for kernel in kernels_of(&recordings) {
            let schedulers: Vec<Scheduler> = recordings
                .iter()
                .filter(|r| r.kernel == kernel)
                .map(|r| r.scheduler)
                .collect();
            let guest = Guest {
                timeout: args.timeout,
                clock: args.guest_clock,
                runs: recorded_runs,
            };
            record_in_guest(&out, kernel, &schedulers, &args.workloads, guest)?;
        }
    }
    let machine = Machine::builtin(GUEST_MACHINE)?;
    let mut rows = Vec::new();
    let mut pairs = Vec::new();
    for &recording in &recordings {
        let traces = recorded_traces(&out, recording, &args.workloads, runs)?;
        let wakeups: Vec<Vec<Vec<IdleCpuWakeup>>> = traces
            .iter()
            .map(|(_, runs)| runs.iter().map(metrics::idle_cpu_wakeups).collect())
            .collect();
        let boot_wakeups = wakeups.concat().concat();
        let sim = Simulation {
            machine: &machine,
            others: args.others.replayed_for(recording.scheduler),
            boot_wakeups: &boot_wakeups,
            seeds: args.seeds,
        };
        for ((workload, runs), own) in traces.into_iter().zip(&wakeups) {
            let (row, pair) = compare_recorded(&out, sim, recording, workload, runs, own)?;
            rows.extend(row);
            pairs.push(pair);
        }
    }
    let table = figures_table(&rows);
    let write = |name: &str, text: String| {
        let path = out.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    };
    write("figures.csv", table.to_csv())?;
    write("validate.html", html(&table, &pairs))?;
    print!("{}", table.to_text());
    let outside = rows.iter().filter(|r| r.agrees == Some(false)).count();
    eprintln!(
        "nest validate: {} figures, {outside} outside their band; wrote figures.csv, \
         validate.html and the replays (*.sim.nest.jsonl) in {}",
        rows.len(),
        out.display()
    );
    Ok(if outside == 0 {
        ExitCode::SUCCESS
    } else {
        crate::check_failed()
    })
}

/// The kernels of `recordings`, each once, in order.
fn kernels_of(recordings: &[Recording]) -> Vec<LinuxVersion> {
    let mut kernels: Vec<LinuxVersion> = Vec::new();
    for r in recordings {
        if !kernels.contains(&r.kernel) {
            kernels.push(r.kernel);
        }
    }
    kernels
}

/// How recordings are replayed: on which machine, with the guest's other
/// tasks or not.
#[derive(Clone, Copy)]
struct Simulation<'a> {
    machine: &'a Machine,
    others: bool,
    /// The idle vCPU wake-ups of the workloads replayed for the same
    /// kernel and scheduler (one guest boot recorded them): the vCPU
    /// model's classes that one recording holds too few of come from
    /// these (a fork burst has a handful of wake-ups with no other vCPU
    /// busy, which would else be merged into the busy classes' far longer
    /// delays).
    boot_wakeups: &'a [IdleCpuWakeup],
    /// Replays per recording, seeds 1 to `seeds`.
    seeds: u64,
}

/// The recorded traces of `recording`, per workload its first `runs`
/// (`None`: every run recorded, as many as follow the first without a
/// gap).
fn recorded_traces(
    out: &Path,
    recording: Recording,
    workloads: &[Workload],
    runs: Option<u32>,
) -> Result<Vec<(Workload, Vec<Trace>)>> {
    let load = |workload: Workload, run: u32| -> Result<Trace> {
        let path = recording.trace_path(out, workload, run);
        let with_runs = runs.map_or_else(String::new, |n| format!(" with --runs {n}"));
        nest_trace::input::load(&path).with_context(|| {
            format!(
                "{}: no recorded trace (record it: run without --from-traces{with_runs}, or \
                 leave {} {} out with --kernels and --schedulers)",
                path.display(),
                value_name(recording.kernel),
                value_name(recording.scheduler)
            )
        })
    };
    let recorded = |workload: Workload| {
        (1..)
            .take_while(|&run| recording.trace_path(out, workload, run).is_file())
            .count() as u32
    };
    workloads
        .iter()
        .map(|&workload| {
            let count = runs.unwrap_or_else(|| recorded(workload).max(1));
            let traces: Result<Vec<Trace>> = (1..=count).map(|run| load(workload, run)).collect();
            Ok((workload, traces?))
        })
        .collect()
}

/// One recorded workload's figures, the median of its `runs` against the
/// median of all their replays under the scheduler's model, and the pair
/// of its page's figures, the first run's (`runs_wakeups`: each run's idle
/// vCPU wake-ups).
fn compare_recorded(
    out: &Path,
    sim: Simulation,
    recording: Recording,
    workload: Workload,
    runs: Vec<Trace>,
    runs_wakeups: &[Vec<IdleCpuWakeup>],
) -> Result<(Vec<Row>, Pair)> {
    let clock = runs.first().map(guest_clock_of).unwrap_or_default();
    let title = format!(
        "{}: {} (guest clock {clock}, replay {})",
        recording.title(),
        value_name(workload),
        replay_name(sim.others)
    );
    let count = runs.len();
    let mut real_placements = Vec::new();
    let mut simulated = Vec::new();
    let mut pair = None;
    for (run, (real, wakeups)) in (1..).zip(runs.into_iter().zip(runs_wakeups)) {
        let path = recording.trace_path(out, workload, run);
        let run_title = match count {
            1 => title.clone(),
            _ => format!("{title}: run {run} of {count}"),
        };
        let (real, replays) = replay_run(&run_title, sim, recording, &real, wakeups)
            .with_context(|| format!("{}: cannot replay in the simulator", path.display()))?;
        if run == 1 {
            let first = &replays.first.trace;
            nest_trace::format::save(first, &recording.simulated_trace_path(out, workload))?;
            pair = Some(Pair {
                title: title.clone(),
                real: real.intervals,
                simulated: replays.first.figures.intervals,
            });
        }
        real_placements.push(real.placement);
        simulated.extend(replays.placements);
    }
    let rows = compare(
        recording,
        &clock,
        sim.others,
        workload,
        &real_placements,
        &simulated,
    );
    Ok((rows, pair.context("no recorded run")?))
}

/// One recorded run's figures and its replays (the vCPUs waking as late
/// as the host let them in this run, `wakeups`), with what the replays
/// say of it on stderr under `title`.
fn replay_run(
    title: &str,
    sim: Simulation,
    recording: Recording,
    real: &Trace,
    wakeups: &[IdleCpuWakeup],
) -> Result<(CommandFigures, Replays)> {
    let vcpus = VcpuWakeup::measured(wakeups, sim.boot_wakeups);
    let mut machine = sim.machine.clone();
    machine.vcpu_wakeup = vcpus.clone();
    let replays = replays(real, &machine, recording, sim)?;
    let steps = placement_steps(real, &replays.first.trace);
    let figures = command_figures(real, None)?;
    eprintln!("nest validate: {title}: root {}", figures.root);
    if let Some(vcpus) = &vcpus {
        eprintln!("nest validate: {title}: vCPU wake-ups (median by CPUs running) {vcpus}");
    }
    if let Some(steps) = steps {
        eprintln!("nest validate: {title}: placements (seed 1; real / simulated) {steps}");
    }
    Ok((figures, replays))
}

/// How the policy decided the placements of the command's tasks and of
/// the other tasks, in the guest (`scx_nest --trace-placements`) and in
/// the replay: each step's share, real / simulated. `None` when either
/// trace has no placements (the default scheduler, an older recording).
fn placement_steps(real: &Trace, simulated: &Trace) -> Option<String> {
    let real_tree = real.descendants(real.command_pid()?);
    let simulated_tree = simulated.descendants(SIMULATED_ROOT);
    let mut parts = Vec::new();
    for (tasks, in_tree) in [("the command's tasks", true), ("the others", false)] {
        let r = metrics::placement_steps(real, |pid| real_tree.contains(&pid) == in_tree);
        let s = metrics::placement_steps(simulated, |pid| simulated_tree.contains(&pid) == in_tree);
        let (r_total, s_total) = (r.values().sum::<u64>(), s.values().sum::<u64>());
        if r_total == 0 || s_total == 0 {
            return None;
        }
        let steps: BTreeSet<&str> = r.keys().chain(s.keys()).copied().collect();
        let shares: Vec<String> = steps
            .into_iter()
            .map(|step| {
                let share = |m: &BTreeMap<&str, u64>, total| {
                    100.0 * m.get(step).copied().unwrap_or(0) as f64 / total as f64
                };
                format!(
                    "{step} {:.0}/{:.0}%",
                    share(&r, r_total),
                    share(&s, s_total)
                )
            })
            .collect();
        parts.push(format!(
            "{tasks}, {r_total} / {s_total}: {}",
            shares.join(", ")
        ));
    }
    Some(parts.join("; "))
}

/// Where nest is, and nest-load and scx_nest beside it.
fn programs_dir() -> Result<PathBuf> {
    std::env::current_exe()
        .context("cannot find the nest binary")?
        .parent()
        .map(Path::to_path_buf)
        .context("the nest binary has no directory")
}

/// The programs the guest will run are beside nest, or the error says
/// how to build them.
fn check_programs(bin: &Path, schedulers: &[Scheduler]) -> Result<()> {
    let mut needed = vec!["nest-load"];
    if schedulers.contains(&Scheduler::ScxNest) {
        needed.push("scx_nest");
    }
    for program in needed {
        if !bin.join(program).is_file() {
            bail!(
                "{} has no {program}: build it next to nest (cargo build -p {program}, or \
                 --release for a release nest)",
                bin.display()
            );
        }
    }
    Ok(())
}

/// How the guest is run: its deadline, its clock, and how many times it
/// records each workload.
#[derive(Clone, Copy, Debug)]
struct Guest {
    timeout: Duration,
    clock: GuestClock,
    runs: u32,
}

/// Boots the guest on `kernel` and records every workload under each of
/// `schedulers`.
fn record_in_guest(
    out: &Path,
    kernel: LinuxVersion,
    schedulers: &[Scheduler],
    workloads: &[Workload],
    guest: Guest,
) -> Result<()> {
    let kernel_dir = ensure_kernel(false, kernel == LinuxVersion::Linux510)?;
    let bin = programs_dir()?;
    check_programs(&bin, schedulers)?;
    if workloads.contains(&Workload::Configure) {
        // The guest has no network: fetch on the host, which it mounts.
        source::fetch(CONFIGURE_PACKAGE)?;
    }
    let recordings: Vec<Recording> = schedulers
        .iter()
        .map(|&scheduler| Recording { kernel, scheduler })
        .collect();
    let lib = if schedulers.contains(&Scheduler::ScxNest) {
        Some(guest_lib()?)
    } else {
        None
    };
    let script = guest_script(out, &bin, lib.as_deref(), &recordings, workloads, guest);
    let spec = VmSpec {
        numa: true,
        timeout: guest.timeout,
        guest_clock: guest.clock,
        kernel_dir,
        // Shared at the same path even under /tmp, where the guest mounts
        // its own tmpfs (a clone in /tmp: the binaries would be hidden).
        workdir: Some(bin.clone()),
        output_dir: Some(out.to_path_buf()),
        // The configure trace: 16 x 32 MB of ftrace buffers, then the
        // recorder's events in memory (1 GB was OOM-killed under 5.10).
        memory_mb: 3072,
        ..VmSpec::with_topology(2, 4, 2)
    };
    eprintln!(
        "nest validate: recording {} workload(s) {} time(s) under {} ({}) in the 2x4x2 guest, \
         guest clock {}",
        workloads.len(),
        guest.runs,
        value_name(kernel),
        names(schedulers),
        guest.clock
    );
    // The guest runs its command with sh; the library is bash's.
    let traces: Vec<PathBuf> = recordings
        .iter()
        .flat_map(|r| {
            recording_order(workloads, guest.runs).map(|(w, run)| r.trace_path(out, w, run))
        })
        .collect();
    let finished = AtomicBool::new(false);
    let outcome = std::thread::scope(|s| {
        s.spawn(|| report_recordings(&traces, &finished));
        let outcome = nest_vm::run(&spec, &format!("exec bash -c {}", shell_quote(&script)));
        finished.store(true, Ordering::Relaxed);
        outcome
    })?;
    if let Some(failure) = outcome.failure() {
        bail!(
            "the {} guest failed: {failure}\n{}",
            value_name(kernel),
            outcome.stderr
        );
    }
    Ok(())
}

/// Progress while the guest records: a line as each of `traces` is
/// written (the recorder writes its trace when its command ends), until
/// `finished`. A trace older than the guest's start is an earlier run's.
fn report_recordings(traces: &[PathBuf], finished: &AtomicBool) {
    let start = std::time::SystemTime::now();
    let mut reported = vec![false; traces.len()];
    while !finished.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(500));
        for i in newly_written(traces, start, &mut reported) {
            let name = traces[i].file_name().unwrap_or_default().to_string_lossy();
            let done = reported.iter().filter(|&&r| r).count();
            eprintln!(
                "nest validate: recorded {name} ({done} of {}, {} s)",
                traces.len(),
                start.elapsed().unwrap_or_default().as_secs()
            );
        }
    }
}

/// The indices of `traces` written since `start` and not yet `reported`,
/// marked reported.
fn newly_written(
    traces: &[PathBuf],
    start: std::time::SystemTime,
    reported: &mut [bool],
) -> Vec<usize> {
    let written = |path: &PathBuf| {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t >= start)
    };
    let new: Vec<usize> = (0..traces.len())
        .filter(|&i| !reported[i] && written(&traces[i]))
        .collect();
    for &i in &new {
        reported[i] = true;
    }
    new
}

/// The guest scripts' shell library: `with_scx_nest` starts scx_nest,
/// waits until it is attached, and stops it, as the VM tests do.
const GUEST_LIB: &str = "tests/vm/lib.sh";

/// The text of [`GUEST_LIB`]. The script carries it rather than sourcing
/// it: the guest sees the repository only if it is on a path the guest
/// shares (a clone under /tmp is hidden by the guest's own tmpfs).
fn guest_lib() -> Result<String> {
    let path = find_repo_file(GUEST_LIB)?;
    std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))
}

/// The order the guest records in under one scheduler: every workload of
/// the first run, then every workload again for each further run.
fn recording_order(workloads: &[Workload], runs: u32) -> impl Iterator<Item = (Workload, u32)> {
    (1..=runs).flat_map(move |run| workloads.iter().map(move |&w| (w, run)))
}

/// The guest's bash script: records every workload under each recording's
/// scheduler, in order, into its trace, then all of them again for each
/// further run; stops at the first failure (`bin`: where nest, nest-load
/// and scx_nest are; `lib`: the text of [`GUEST_LIB`], needed for
/// scx_nest).
fn guest_script(
    out: &Path,
    bin: &Path,
    lib: Option<&str>,
    recordings: &[Recording],
    workloads: &[Workload],
    guest: Guest,
) -> String {
    let mut script = format!("set -u\nbin={}\n", shell_quote(&bin.to_string_lossy()));
    if let Some(lib) = lib {
        script.push_str(&format!("# {GUEST_LIB}\n{lib}\n"));
    }
    for &recording in recordings {
        let records: Vec<String> = recording_order(workloads, guest.runs)
            .map(|(w, run)| w.record_command(bin, &recording.trace_path(out, w, run), guest.clock))
            .collect();
        match recording.scheduler {
            Scheduler::Default => {
                for record in records {
                    script.push_str(&format!("{record} || exit 1\n"));
                }
            }
            Scheduler::ScxNest => {
                // One attach for all the workloads: the recordings run in
                // a function with_scx_nest calls once scx_nest is attached.
                script.push_str(&format!(
                    "record_under_scx_nest() {{\n{}\n}}\n\
                     with_scx_nest {SCX_NEST_OPTIONS} -- record_under_scx_nest || exit 1\n",
                    records.join(" &&\n")
                ));
            }
        }
    }
    script
}

/// A recording's replays: the command's placement in each, and the first
/// (seed 1) whole, for its trace, placements and the page's figure.
struct Replays {
    first: Replay,
    placements: Vec<TasksPlacement>,
}

struct Replay {
    trace: Trace,
    figures: CommandFigures,
}

/// Replays the recorded command of `real` on `machine` under the model
/// of the recording's scheduler (the Linux model of the recording's
/// kernel, or Nest), with the guest's other tasks if `sim.others`, once
/// per seed from 1 to `sim.seeds`, as many at once as there are CPUs.
fn replays(
    real: &Trace,
    machine: &Machine,
    recording: Recording,
    sim: Simulation,
) -> Result<Replays> {
    let opts = replay::ReplayOptions {
        others: sim.others,
        target: Some(machine.topology()),
        ..Default::default()
    };
    let workload = replay::replay(real, &opts)?;
    let workload = rtapp::parse(&workload.to_json_string(), "replay")?;
    let one = |seed: u64| -> Result<Replay> {
        let trace = simulate(&workload, machine, recording, seed)?;
        let figures = command_figures(&trace, Some(SIMULATED_ROOT))?;
        Ok(Replay { trace, figures })
    };
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let seeds: Vec<u64> = (1..=sim.seeds).collect();
    let mut placements = Vec::new();
    let mut first = None;
    for batch in seeds.chunks(workers) {
        let done: Vec<Result<Replay>> = std::thread::scope(|scope| {
            let running: Vec<_> = batch
                .iter()
                .map(|&seed| scope.spawn(move || one(seed)))
                .collect();
            running
                .into_iter()
                .map(|r| r.join().expect("a replay panicked"))
                .collect()
        });
        for replay in done {
            let replay = replay?;
            placements.push(replay.figures.placement.clone());
            first.get_or_insert(replay);
        }
    }
    Ok(Replays {
        first: first.context("no replay")?,
        placements,
    })
}

/// One replay: `workload` on `machine` under the recording's model, the
/// vCPU wake-up delays drawn from `seed`'s stream; the simulated schedule.
fn simulate(
    workload: &nest_sim::workload::Workload,
    machine: &Machine,
    recording: Recording,
    seed: u64,
) -> Result<Trace> {
    let mut cfg = SimConfig::new(machine.clone(), Governor::Performance, seed);
    cfg.record_trace = true;
    cfg.linux = recording.kernel;
    let mut policy = recording.scheduler.model().policy(machine)?;
    let result = nest_sim::run(cfg, workload, policy.as_mut())?;
    result.trace.context("the simulator recorded no trace")
}

/// The recorded command's tree in one trace.
struct CommandFigures {
    root: u32,
    /// Its placement over its lifetime, in 100 ms intervals.
    placement: TasksPlacement,
    /// Its CPUs and concurrency per 100 ms, for the page's figure.
    intervals: Vec<IntervalStats>,
}

/// The figures of the recorded command's tree (root: `root`, else the
/// trace's `command_pid`), from one replay of the trace.
fn command_figures(trace: &Trace, root: Option<u32>) -> Result<CommandFigures> {
    let root = match root {
        Some(pid) => pid,
        None => trace
            .command_pid()
            .context("the trace has no command_pid (record it with `nest trace record -- CMD`)")?,
    };
    let mut timeline = Timeline::build(trace);
    let placement = tree_placement_in(trace, &timeline, root, INTERVAL_NS);
    timeline.keep_tree(trace, root);
    Ok(CommandFigures {
        root,
        placement,
        intervals: interval_stats(&timeline, INTERVAL_NS),
    })
}

struct Row {
    recording: Recording,
    /// What the guest's time followed ([`GuestClock`]'s name).
    guest_clock: String,
    /// The replay had the guest's other tasks beside the command's tree.
    others: bool,
    workload: Workload,
    figure: &'static str,
    /// The median of the recorded runs' values.
    real: Option<f64>,
    /// The lowest and highest of the recorded runs' values.
    real_range: Option<(f64, f64)>,
    /// The median of the replays' values.
    simulated: Option<f64>,
    /// The lowest and highest of the replays' values.
    simulated_range: Option<(f64, f64)>,
    band: Band,
    /// None when either side has no value (e.g. no forks).
    agrees: Option<bool>,
}

/// Each figure's median over the recorded runs of `real` against its
/// median over the `simulated` replays (and on each side the median of
/// the events it counts, for the band's floor).
fn compare(
    recording: Recording,
    guest_clock: &str,
    others: bool,
    workload: Workload,
    real: &[TasksPlacement],
    simulated: &[TasksPlacement],
) -> Vec<Row> {
    BANDS
        .iter()
        .filter(|f| !f.nest_only || recording.scheduler == Scheduler::ScxNest)
        .map(|f| {
            let (r, real_range, r_events) = f.summary(real);
            let (s, simulated_range, s_events) = f.summary(simulated);
            Row {
                recording,
                guest_clock: guest_clock.to_string(),
                others,
                workload,
                figure: f.name,
                real: r,
                real_range,
                simulated: s,
                simulated_range,
                band: f.band,
                agrees: r
                    .zip(s)
                    .map(|(r, s)| f.band.agrees((r, r_events), (s, s_events))),
            }
        })
        .collect()
}

impl Figure {
    /// The figure over several runs: the median of their values, the
    /// lowest and highest, and the median of the events it counts.
    fn summary(&self, runs: &[TasksPlacement]) -> (Option<f64>, Option<(f64, f64)>, u64) {
        let values: Vec<f64> = runs.iter().filter_map(self.value).collect();
        let events: Vec<f64> = runs.iter().map(|p| (self.events)(p) as f64).collect();
        let range = values.iter().copied().fold(None, |range, v| match range {
            None => Some((v, v)),
            Some((low, high)) => Some((v.min(low), v.max(high))),
        });
        let events = median(&events).unwrap_or(0.0).round() as u64;
        (median(&values), range, events)
    }
}

/// The middle value (the mean of the two middle ones for an even count).
fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// What a replay contained, in figures.csv and the page's titles.
fn replay_name(others: bool) -> &'static str {
    if others { "tree+others" } else { "tree" }
}

fn verdict(row: &Row) -> &'static str {
    match row.agrees {
        Some(true) => "agrees",
        Some(false) => "OUTSIDE",
        None => "-",
    }
}

/// The rows as a table: printed, `figures.csv`, and in `validate.html`.
/// Columns: the recording's kernel and scheduler, the guest clock it was
/// recorded under (`host`, `icount:N`), the simulator's model
/// it is compared with (its name in `nest sim -p`: `linux`,
/// `nest-nospin`), the workload, the figure, the median of its recorded
/// runs' values and their range, the median of its replays' values and
/// their range, its band, the verdict (on the medians), and what the
/// replay contained (`tree`:
/// the command's task tree; `tree+others`: with the guest's other tasks).
fn figures_table(rows: &[Row]) -> Table {
    let columns = [
        "kernel",
        "scheduler",
        "guest_clock",
        "model",
        "workload",
        "figure",
        "real",
        "real_min",
        "real_max",
        "simulated",
        "simulated_min",
        "simulated_max",
        "band",
        "verdict",
        "replay",
    ];
    let mut table = Table::new("validate", &columns);
    let number = |v: Option<f64>| v.map_or_else(|| TableCell::from("-"), TableCell::from);
    for r in rows {
        table.push(vec![
            value_name(r.recording.kernel).into(),
            value_name(r.recording.scheduler).into(),
            r.guest_clock.as_str().into(),
            r.recording.scheduler.model().name().into(),
            value_name(r.workload).into(),
            r.figure.into(),
            number(r.real),
            number(r.real_range.map(|(low, _)| low)),
            number(r.real_range.map(|(_, high)| high)),
            number(r.simulated),
            number(r.simulated_range.map(|(low, _)| low)),
            number(r.simulated_range.map(|(_, high)| high)),
            r.band.cell(),
            verdict(r).into(),
            replay_name(r.others).into(),
        ]);
    }
    table
}

/// One recorded workload and its replay, for the page's figures.
struct Pair {
    title: String,
    real: Vec<IntervalStats>,
    simulated: Vec<IntervalStats>,
}

/// `validate.html`: the table, then per recording and workload the CPUs
/// the recorded command's tree used per 100 ms, real beside simulated.
fn html(table: &Table, pairs: &[Pair]) -> String {
    let mut s = format!(
        "<p>Real kernels in the 2x4x2 guest against the simulator's models on \
         {GUEST_MACHINE} (its vCPUs waking as late as the recording's did), each recording \
         replayed with several seeds of the vCPU wake-up draws (real: the median of the \
         recorded runs, real_min and real_max their range; simulated: the median of all \
         their replays, simulated_min and simulated_max their range): the kernel's default scheduler against the Linux model of its \
         generation, scx_nest against the simulator's Nest (the same C policy). The \
         recorded command's tree over its lifetime, 100 ms intervals. A figure agrees when \
         real and simulated differ by at most its band (x2: by at most a factor of 2, or \
         neither side counts more than the events given). The \
         guest_clock column says what the guest's time followed while it recorded: \
         <code>host</code> (the host's clock, under emulation 10-50x less guest work per \
         millisecond than on hardware) or <code>icount:N</code> (QEMU's instruction \
         counter, 2^N ns per instruction; docs/guides/guest-vm.md, \"Guest timing\").</p>\n"
    );
    s.push_str(&table.to_html());
    for pair in pairs {
        s.push_str(&format!(
            "<h2>{}</h2>\n<div class=\"pair\">",
            escape(&pair.title)
        ));
        s.push_str(&svg::cpus_vs_concurrency(&pair.real, "real kernel"));
        s.push_str(&svg::cpus_vs_concurrency(&pair.simulated, "simulated"));
        s.push_str("</div>\n");
    }
    nest_trace::report::page("nest validate", &s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nest_trace::EventKind;
    use nest_trace::metrics::ForkPlacement;

    fn placement(cpus: f64, forks_away: u64, forks_local: u64) -> TasksPlacement {
        TasksPlacement {
            mean_cpus: cpus,
            mean_sockets: 1.0,
            forks: ForkPlacement {
                other_socket: forks_away,
                same_llc: forks_local,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn figures_agree_within_their_band_and_say_when_they_cannot_be_compared() {
        let real = placement(2.7, 39, 1);
        let rows = compare(
            LINUX_7_DEFAULT,
            "host",
            false,
            Workload::Chain,
            std::slice::from_ref(&real),
            &[placement(1.9, 40, 0)],
        );
        // The nest's size is compared for scx_nest only.
        assert_eq!(rows.len(), BANDS.len() - 1);
        assert!(rows.iter().all(|r| r.figure != "primary nest CPUs"));
        let verdict_of = |rows: &[Row], figure: &str| {
            rows.iter()
                .find(|r| r.figure == figure)
                .map(verdict)
                .unwrap()
        };
        assert_eq!(verdict_of(&rows, "CPUs / 100 ms"), "agrees");
        assert_eq!(verdict_of(&rows, "forks to another socket"), "agrees");
        // No wakeups on either side: nothing to compare.
        assert_eq!(verdict_of(&rows, "wakeups on the previous CPU"), "-");
        // A model that kept the chain on the parent's LLC.
        let rows = compare(
            LINUX_7_DEFAULT,
            "host",
            false,
            Workload::Chain,
            std::slice::from_ref(&real),
            &[placement(1.9, 0, 40)],
        );
        assert_eq!(verdict_of(&rows, "forks to another socket"), "OUTSIDE");
        assert_eq!(verdict_of(&rows, "forks to the parent's LLC"), "OUTSIDE");
        let table = figures_table(&rows);
        let csv = table.to_csv();
        assert!(csv.starts_with(
            "kernel,scheduler,guest_clock,model,workload,figure,real,real_min,real_max,simulated,\
             simulated_min,simulated_max,band,verdict,replay\n"
        ));
        assert!(
            csv.contains(
                "linux-7,default,host,linux,chain,forks to another socket,0.975,0.975,0.975,0,0,0,\
                 0.25 or <= 3 events,OUTSIDE,tree\n"
            ),
            "{csv}"
        );
        let text = table.to_text();
        assert!(
            text.lines().any(|l| l.starts_with("linux-7")
                && l.split_whitespace().rev().take(8).eq([
                    "tree", "OUTSIDE", "events", "3", "<=", "or", "0.25", "0.000"
                ])
                && l.contains("forks to another socket")),
            "{text}"
        );
        let page = html(&table, &[]);
        assert!(page.contains("<td>OUTSIDE</td>"), "{page}");
    }

    #[test]
    fn the_simulated_figure_is_the_median_of_the_replays_and_the_verdict_is_on_it() {
        // The CPUs per 100 ms row of a batch of `real` CPUs against
        // `replays`: median, range, verdict.
        let cpus = |real: f64, replays: &[TasksPlacement]| {
            let rows = compare(
                LINUX_7_DEFAULT,
                "host",
                false,
                Workload::Batch,
                &[placement(real, 0, 1)],
                replays,
            );
            let row = rows.iter().find(|r| r.figure == "CPUs / 100 ms").unwrap();
            (row.simulated, row.simulated_range, verdict(row))
        };
        let replays = [2.0, 9.0, 5.5].map(|c| placement(c, 0, 1));
        // One replay at 2 or at 9 would be outside; their median is not.
        assert_eq!(cpus(5.0, &replays), (Some(5.5), Some((2.0, 9.0)), "agrees"));
        assert_eq!(
            cpus(5.0, &replays[..2]).0,
            Some(5.5),
            "an even count: the middle two's mean"
        );
        assert_eq!(
            cpus(7.0, &replays).2,
            "OUTSIDE",
            "inside the range is not enough"
        );
        assert_eq!(median(&[]), None);
        assert_eq!(parse(&[]).unwrap().seeds, 21);
        assert!(parse(&["--seeds", "0"]).is_err(), "at least one replay");
    }

    #[test]
    fn progress_reports_each_trace_written_since_the_start_once() {
        let dir = tempfile::tempdir().unwrap();
        let traces: Vec<PathBuf> = ["a", "b", "old"]
            .iter()
            .map(|n| dir.path().join(format!("{n}.nest.jsonl")))
            .collect();
        std::fs::write(&traces[2], "an earlier run's").unwrap();
        let old = std::time::SystemTime::now() - Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&traces[2])
            .unwrap()
            .set_modified(old)
            .unwrap();
        let start = std::time::SystemTime::now() - Duration::from_secs(1);
        let mut reported = vec![false; 3];
        assert!(newly_written(&traces, start, &mut reported).is_empty());
        std::fs::write(&traces[1], "b").unwrap();
        assert_eq!(newly_written(&traces, start, &mut reported), [1]);
        std::fs::write(&traces[0], "a").unwrap();
        assert_eq!(newly_written(&traces, start, &mut reported), [0]);
        assert!(newly_written(&traces, start, &mut reported).is_empty());
        assert_eq!(reported, [true, true, false]);
    }

    #[test]
    fn a_share_of_three_events_or_fewer_agrees_whatever_its_value() {
        let verdict_of = |real: &TasksPlacement, simulated: &TasksPlacement| {
            compare(
                LINUX_7_DEFAULT,
                "host",
                false,
                Workload::Pingpong,
                std::slice::from_ref(real),
                std::slice::from_ref(simulated),
            )
            .iter()
            .find(|r| r.figure == "forks to another socket")
            .map(verdict)
            .unwrap()
        };
        // (forks kept local, sent away) on each side, and the verdict: one
        // fork kept local against one sent away agrees.
        for (real, simulated, expected) in [
            ((1, 0), (0, 1), "agrees"),
            ((3, 0), (0, 3), "agrees"),
            ((4, 0), (0, 3), "OUTSIDE"),
            ((3, 0), (0, 4), "OUTSIDE"),
        ] {
            let side = |(local, away)| placement(2.0, away, local);
            assert_eq!(
                verdict_of(&side(real), &side(simulated)),
                expected,
                "{real:?} against {simulated:?}"
            );
        }
    }

    #[test]
    fn migration_rates_agree_within_a_factor_of_two_or_when_both_runs_count_few() {
        let band = BANDS
            .iter()
            .find(|f| f.name == "migrations / s")
            .unwrap()
            .band;
        assert!(band.agrees((134.0, 40), (183.0, 55)));
        assert!(!band.agrees((17.6, 6), (3.7, 1)));
        assert!(!band.agrees((9.6, 14), (0.0, 0)));
        assert!(
            band.agrees((8.4, 3), (3.0, 1)),
            "neither counts more than 5"
        );
        assert!(
            !band.agrees((4.4, 220), (1.1, 55)),
            "a low rate of a long run"
        );
        let rows = compare(
            LINUX_7_DEFAULT,
            "host",
            false,
            Workload::Chain,
            &[TasksPlacement {
                migrations: 10,
                window_ns: 1_000_000_000,
                ..Default::default()
            }],
            &[TasksPlacement {
                migrations: 3,
                window_ns: 500_000_000,
                ..Default::default()
            }],
        );
        let csv = figures_table(&rows).to_csv();
        assert!(
            csv.contains(
                "linux-7,default,host,linux,chain,migrations / s,10,10,10,6,6,6,x2 or <= 5 events,agrees,\
                 tree\n"
            ),
            "{csv}"
        );
    }

    #[test]
    fn configure_is_recorded_in_a_fresh_copy_of_its_source_tree() {
        let command = Workload::Configure.record_command(
            Path::new("/b"),
            Path::new("/o/c.nest.jsonl"),
            GuestClock::Host,
        );
        let tree = source::tree(CONFIGURE_PACKAGE);
        assert!(
            command.starts_with(&format!(
                "rm -rf /tmp/validate-src && cp -a {} /tmp/validate-src && (cd /tmp/validate-src && ",
                tree.display()
            )),
            "{command}"
        );
        assert!(
            command.ends_with(
                "/b/nest trace record --buffer-kb 32768 --meta guest_clock=host --out \
                 /o/c.nest.jsonl -- ./configure >&2)"
            ),
            "{command}"
        );
        let chain = Workload::Chain.record_command(
            Path::new("/b"),
            Path::new("/o/t"),
            GuestClock::Icount { shift: 0 },
        );
        assert_eq!(
            chain,
            "/b/nest trace record --buffer-kb 8192 --meta guest_clock=icount:0 --out /o/t -- \
             /b/nest-load churn --count 40 --work-us 20000 >&2"
        );
    }

    const LINUX_7_DEFAULT: Recording = Recording {
        kernel: LinuxVersion::Linux7,
        scheduler: Scheduler::Default,
    };
    const LINUX_7_SCX_NEST: Recording = Recording {
        kernel: LinuxVersion::Linux7,
        scheduler: Scheduler::ScxNest,
    };
    const LINUX_510_DEFAULT: Recording = Recording {
        kernel: LinuxVersion::Linux510,
        scheduler: Scheduler::Default,
    };

    #[test]
    fn traces_are_named_by_kernel_scheduler_and_workload_without_collisions() {
        let path = LINUX_510_DEFAULT.trace_path(Path::new("/o"), Workload::Overload, 1);
        assert_eq!(path, PathBuf::from("/o/linux-5.10-overload.nest.jsonl"));
        let path = LINUX_7_SCX_NEST.trace_path(Path::new("/o"), Workload::Chain, 1);
        assert_eq!(path, PathBuf::from("/o/linux-7-scx_nest-chain.nest.jsonl"));
        let path = LINUX_7_SCX_NEST.trace_path(Path::new("/o"), Workload::Chain, 2);
        assert_eq!(
            path,
            PathBuf::from("/o/linux-7-scx_nest-chain-run2.nest.jsonl")
        );
        let mut paths = Vec::new();
        for kernel in ALL_KERNELS {
            for scheduler in ALL_SCHEDULERS {
                for workload in Workload::value_variants() {
                    let recording = Recording { kernel, scheduler };
                    for run in [1, 2, 10] {
                        paths.push(recording.trace_path(Path::new("/o"), *workload, run));
                    }
                }
            }
        }
        let count = paths.len();
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), count, "two recordings share a trace name");
    }

    #[test]
    fn each_scheduler_is_compared_with_its_model() {
        assert_eq!(Scheduler::Default.model(), Model::Linux);
        assert_eq!(Scheduler::ScxNest.model(), Model::Nest);
        assert_eq!(LINUX_7_DEFAULT.title(), "linux-7 default vs Linux model");
        assert_eq!(LINUX_7_SCX_NEST.title(), "linux-7 scx_nest vs Nest model");
        assert_eq!(
            LINUX_510_DEFAULT.title(),
            "linux-5.10 default vs Linux model"
        );
        let machine = Machine::builtin(GUEST_MACHINE).unwrap();
        for model in [Model::Linux, Model::Nest] {
            assert!(model.policy(&machine).is_ok(), "{model:?}");
        }
        let rows = compare(
            LINUX_7_SCX_NEST,
            "icount:0",
            true,
            Workload::Batch,
            &[placement(2.0, 1, 0)],
            &[placement(2.0, 1, 0)],
        );
        let csv = figures_table(&rows).to_csv();
        assert!(
            csv.contains(
                "\nlinux-7,scx_nest,icount:0,nest-nospin,batch,CPUs / 100 ms,2,2,2,2,2,2,1,agrees,\
                 tree+others\n"
            ),
            "{csv}"
        );
    }

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: ValidateArgs,
    }

    fn parse(argv: &[&str]) -> Result<ValidateArgs, clap::Error> {
        use clap::Parser;
        Cli::try_parse_from(std::iter::once("validate").chain(argv.iter().copied())).map(|c| c.args)
    }

    /// The recordings asked for, as `kernel scheduler` strings, and the
    /// notes; or the usage error.
    fn chosen(argv: &[&str]) -> Result<(Vec<String>, Vec<String>), String> {
        let args = parse(argv).map_err(|e| e.to_string())?;
        let (chosen, notes) = recordings(args.kernels.as_deref(), args.schedulers.as_deref())
            .map_err(|e| {
                let code = e.downcast_ref::<clap::Error>().map(clap::Error::exit_code);
                assert_eq!(code, Some(2), "a usage error: {e}");
                e.to_string()
            })?;
        let names = chosen
            .iter()
            .map(|r| format!("{} {}", value_name(r.kernel), value_name(r.scheduler)))
            .collect();
        Ok((names, notes))
    }

    #[test]
    fn by_default_every_kernel_runs_every_scheduler_it_can() {
        let (names, notes) = chosen(&[]).unwrap();
        assert_eq!(
            names,
            ["linux-7 default", "linux-7 scx_nest", "linux-5.10 default"]
        );
        assert_eq!(
            notes,
            ["scx_nest under linux-5.10: skipped, linux-5.10 has no sched_ext"]
        );
        // Both named in full: the same, with the same note.
        let full = chosen(&[
            "--kernels",
            "linux-7,linux-5.10",
            "--schedulers",
            "default,scx_nest",
        ])
        .unwrap();
        assert_eq!(full, (names, notes));
    }

    #[test]
    fn a_pair_nobody_asked_for_is_skipped_with_a_note() {
        let (names, notes) = chosen(&["--schedulers", "scx_nest"]).unwrap();
        assert_eq!(names, ["linux-7 scx_nest"]);
        assert_eq!(notes.len(), 1);
        let (names, notes) = chosen(&["--kernels", "linux-5.10"]).unwrap();
        assert_eq!(names, ["linux-5.10 default"]);
        assert_eq!(notes.len(), 1);
        let (names, notes) = chosen(&["--kernels", "linux-7", "--schedulers", "scx_nest"]).unwrap();
        assert_eq!(names, ["linux-7 scx_nest"]);
        assert!(notes.is_empty());
    }

    #[test]
    fn scx_nest_under_5_10_alone_is_refused_with_what_to_do() {
        let err = chosen(&["--kernels", "linux-5.10", "--schedulers", "scx_nest"]).unwrap_err();
        assert!(
            err.contains("--kernels names linux-5.10, but no scheduler of --schedulers scx_nest runs under it"),
            "{err}"
        );
        assert!(err.contains("add default to --schedulers"), "{err}");
        let err = chosen(&[
            "--kernels",
            "linux-7,linux-5.10",
            "--schedulers",
            "scx_nest",
        ])
        .unwrap_err();
        assert!(err.contains("--kernels names linux-5.10"), "{err}");
        // The value's name is scx_nest, as the program's.
        assert!(parse(&["--schedulers", "scx-nest"]).is_err());
    }

    #[test]
    fn the_guest_script_records_under_scx_nest_while_it_is_attached() {
        let script = guest_script(
            Path::new("/o"),
            Path::new("/b"),
            Some("with_scx_nest() { :; }"),
            &[LINUX_7_DEFAULT, LINUX_7_SCX_NEST],
            &[Workload::Chain, Workload::Batch],
            guest(1),
        );
        let record = |trace: &str, load: &str| {
            format!(
                "/b/nest trace record --buffer-kb 8192 --meta guest_clock=host --out \
                 /o/{trace}.nest.jsonl -- /b/nest-load {load} >&2"
            )
        };
        let chain = "churn --count 40 --work-us 20000";
        let batch = "batch --tasks 16 --work-ms 200";
        let expected = format!(
            "set -u\nbin=/b\n# tests/vm/lib.sh\nwith_scx_nest() {{ :; }}\n\
             {} || exit 1\n{} || exit 1\n\
             record_under_scx_nest() {{\n{} &&\n{}\n}}\n\
             with_scx_nest --trace-nests --trace-placements -- record_under_scx_nest || exit 1\n",
            record("linux-7-chain", chain),
            record("linux-7-batch", batch),
            record("linux-7-scx_nest-chain", chain),
            record("linux-7-scx_nest-batch", batch),
        );
        assert_eq!(script, expected);
        // The default scheduler alone needs no library.
        let script = guest_script(
            Path::new("/o"),
            Path::new("/b"),
            None,
            &[LINUX_510_DEFAULT],
            &[Workload::Chain],
            guest(1),
        );
        assert_eq!(
            script,
            format!(
                "set -u\nbin=/b\n{} || exit 1\n",
                record("linux-5.10-chain", chain)
            )
        );
        // Several runs: every workload, then every workload again.
        let script = guest_script(
            Path::new("/o"),
            Path::new("/b"),
            None,
            &[LINUX_510_DEFAULT],
            &[Workload::Chain, Workload::Batch],
            guest(2),
        );
        let runs = [
            record("linux-5.10-chain", chain),
            record("linux-5.10-batch", batch),
            record("linux-5.10-chain-run2", chain),
            record("linux-5.10-batch-run2", batch),
        ];
        assert_eq!(
            script,
            format!("set -u\nbin=/b\n{} || exit 1\n", runs.join(" || exit 1\n"))
        );
    }

    /// The guest of the script tests: the host's clock, `runs` runs.
    fn guest(runs: u32) -> Guest {
        Guest {
            timeout: Duration::from_secs(60),
            clock: GuestClock::Host,
            runs,
        }
    }

    /// A schedule of a fork/wait chain of `steps` forks simulated under
    /// Nest, saved as a recorded trace of it at `path` (its shell as the
    /// command).
    fn save_simulated_chain(path: &Path, clock: Option<GuestClock>, steps: u32) {
        let machine = Machine::builtin(GUEST_MACHINE).unwrap();
        let spec = format!("configure:steps={steps}");
        let workload = nest_sim::cli::load_workload(&spec, &machine).unwrap();
        let mut cfg = SimConfig::new(machine.clone(), Governor::Performance, 1);
        cfg.record_trace = true;
        let mut policy = Model::Nest.policy(&machine).unwrap();
        let result = nest_sim::run(cfg, &workload, policy.as_mut()).unwrap();
        let mut trace = result.trace.unwrap();
        trace.meta_set("command_pid", SIMULATED_ROOT.to_string());
        if let Some(clock) = clock {
            trace.meta_set(GUEST_CLOCK_META, clock.to_string());
        }
        nest_trace::format::save(&trace, path).unwrap();
    }

    #[test]
    fn from_traces_compares_each_scheduler_with_its_model() {
        let dir = tempfile::tempdir().unwrap();
        // A trace from before the guest_clock meta (the host's clock),
        // and one recorded under icount.
        save_simulated_chain(
            &LINUX_7_DEFAULT.trace_path(dir.path(), Workload::Chain, 1),
            None,
            20,
        );
        save_simulated_chain(
            &LINUX_7_SCX_NEST.trace_path(dir.path(), Workload::Chain, 1),
            Some(GuestClock::Icount { shift: 0 }),
            20,
        );
        let out = dir.path().to_str().unwrap();
        let argv = [
            "--from-traces",
            "--kernels",
            "linux-7",
            "--workloads",
            "chain",
            "--seeds",
            "3",
            "--out",
            out,
        ];
        run(parse(&argv).unwrap()).unwrap();
        let csv = std::fs::read_to_string(dir.path().join("figures.csv")).unwrap();
        let rows: Vec<Vec<&str>> = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect())
            .collect();
        // The default scheduler's rows leave out the nest's size.
        let nest_rows = BANDS.len() - 1;
        assert_eq!(rows.len(), nest_rows + BANDS.len(), "{csv}");
        assert!(
            rows[..nest_rows]
                .iter()
                .all(|r| r[..5] == ["linux-7", "default", "host", "linux", "chain"])
        );
        assert!(
            rows[nest_rows..]
                .iter()
                .all(|r| r[..5] == ["linux-7", "scx_nest", "icount:0", "nest-nospin", "chain"])
        );
        // Nest's own schedule, replayed under Nest, agrees with itself
        // (its nests included); under the Linux model of 7.x the chain's
        // forks go to the other socket: each recording was replayed under
        // its own model.
        for r in &rows[nest_rows..] {
            assert_eq!(r[13], "agrees", "{r:?}");
        }
        // The simulated value is the median of the three replays'.
        for r in rows.iter().filter(|r| r[9] != "-") {
            let [median, low, high] = [r[9], r[10], r[11]].map(|v| v.parse::<f64>().unwrap());
            assert!(low <= median && median <= high, "{r:?}");
        }
        let primary = rows.iter().find(|r| r[5] == "primary nest CPUs").unwrap();
        assert!(primary[6].parse::<f64>().unwrap() >= 1.0, "{primary:?}");
        let linux_forks = rows
            .iter()
            .find(|r| r[1] == "default" && r[5] == "forks to another socket");
        let linux_forks = linux_forks.unwrap();
        assert_eq!([linux_forks[6], linux_forks[9]], ["0", "1"], "{csv}");
        let page = std::fs::read_to_string(dir.path().join("validate.html")).unwrap();
        // The guest's other tasks are replayed for scx_nest's recordings.
        assert!(page.contains(
            "<h2>linux-7 default vs Linux model: chain (guest clock host, replay tree)</h2>"
        ));
        assert!(page.contains(
            "<h2>linux-7 scx_nest vs Nest model: chain (guest clock icount:0, replay tree+others)</h2>"
        ));
        assert_eq!(rows[0][14], "tree");
        assert_eq!(rows[nest_rows][14], "tree+others");
        // Each replay is kept beside its recording, for the trace tools.
        let replay = LINUX_7_SCX_NEST.simulated_trace_path(dir.path(), Workload::Chain);
        assert!(replay.ends_with("linux-7-scx_nest-chain.sim.nest.jsonl"));
        let replayed = nest_trace::input::load(&replay).unwrap();
        assert!(
            replayed
                .events
                .iter()
                .any(|e| matches!(e.kind, EventKind::NestChange { .. }))
        );
        // A recording without its trace: which file, and how to go on.
        let argv = ["--from-traces", "--workloads", "chain", "--out", out];
        let err = format!("{:#}", run(parse(&argv).unwrap()).unwrap_err());
        assert!(
            err.contains("linux-5.10-chain.nest.jsonl: no recorded trace"),
            "{err}"
        );
        assert!(err.contains("leave linux-5.10 default out"), "{err}");
    }

    #[test]
    fn a_workload_s_runs_are_compared_by_their_median() {
        let dir = tempfile::tempdir().unwrap();
        // Two runs of unequal chains: the first run's figures differ from
        // the second's.
        for (run, steps) in [(1, 20), (2, 6)] {
            let path = LINUX_7_SCX_NEST.trace_path(dir.path(), Workload::Chain, run);
            save_simulated_chain(&path, None, steps);
        }
        let out = dir.path().to_str().unwrap();
        let compare_runs = |runs: &[&str]| {
            let mut argv = vec![
                "--from-traces",
                "--kernels",
                "linux-7",
                "--schedulers",
                "scx_nest",
                "--workloads",
                "chain",
                "--seeds",
                "1",
                "--out",
                out,
            ];
            argv.extend(runs);
            run(parse(&argv).unwrap())
        };
        // real, real_min, real_max, simulated, simulated_min, simulated_max
        let figures = || -> Vec<Vec<f64>> {
            let csv = std::fs::read_to_string(dir.path().join("figures.csv")).unwrap();
            csv.lines()
                .skip(1)
                .map(|l| {
                    l.split(',')
                        .skip(6)
                        .take(6)
                        .map(|v| v.parse().unwrap())
                        .collect()
                })
                .collect()
        };
        // Without --runs, every run recorded.
        compare_runs(&[]).unwrap();
        let rows = figures();
        assert_eq!(rows.len(), BANDS.len(), "{rows:?}");
        // Real and simulated: the median of two runs is their mean.
        for r in &rows {
            for side in [&r[..3], &r[3..]] {
                let (median, low, high) = (side[0], side[1], side[2]);
                assert!((median - (low + high) / 2.0).abs() < 1e-9, "{rows:?}");
            }
        }
        assert!(
            rows.iter().any(|r| r[1] < r[2]),
            "the runs differ: {rows:?}"
        );
        assert!(
            rows.iter().any(|r| r[4] < r[5]),
            "so do their replays: {rows:?}"
        );
        // One replay kept and one figure on the page: the first run's.
        let kept: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sim.nest.jsonl"))
            .collect();
        assert_eq!(kept, ["linux-7-scx_nest-chain.sim.nest.jsonl"]);
        let page = std::fs::read_to_string(dir.path().join("validate.html")).unwrap();
        assert_eq!(page.matches("<h2>").count(), 1, "{page}");
        // The first run alone.
        compare_runs(&["--runs", "1"]).unwrap();
        assert!(figures().iter().all(|r| r[1] == r[2]), "{:?}", figures());
        // A run not recorded: which one, and how to record it.
        let err = format!("{:#}", compare_runs(&["--runs", "3"]).unwrap_err());
        assert!(
            err.contains("linux-7-scx_nest-chain-run3.nest.jsonl: no recorded trace"),
            "{err}"
        );
        assert!(err.contains("with --runs 3"), "{err}");
        assert!(parse(&["--runs", "0"]).is_err(), "at least one run");
        assert_eq!(parse(&[]).unwrap().runs, None, "5 when recording");
    }

    #[test]
    fn the_guest_s_other_tasks_are_replayed_for_scx_nest_unless_asked_otherwise() {
        let replayed = |argv: &[&str]| {
            let others = parse(argv).unwrap().others;
            ALL_SCHEDULERS.map(|s| others.replayed_for(s))
        };
        // [default, scx_nest]
        assert_eq!(replayed(&[]), [false, true]);
        assert_eq!(replayed(&["--others", "all"]), [true, true]);
        assert_eq!(replayed(&["--others", "none"]), [false, false]);
        let err = parse(&["--others", "some"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue);
        assert!(err.to_string().contains("scx_nest"), "{err}");
    }

    #[test]
    fn the_guest_clock_is_host_unless_asked_and_a_bad_one_is_a_usage_error() {
        assert_eq!(parse(&[]).unwrap().guest_clock, GuestClock::Host);
        let args = parse(&["--guest-clock", "icount:3"]).unwrap();
        assert_eq!(args.guest_clock, GuestClock::Icount { shift: 3 });
        for bad in ["icount:11", "auto", "icount:x"] {
            let err = parse(&["--guest-clock", bad]).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad}");
            assert!(err.to_string().contains("expected host, icount"), "{err}");
        }
    }

    #[test]
    fn under_icount_5_10_is_skipped_unless_named_and_refused_if_named() {
        let icount = GuestClock::Icount { shift: 0 };
        let (kernels, note) = kernels_for_clock(None, icount, false).unwrap();
        assert_eq!(kernels, Some(vec![LinuxVersion::Linux7]));
        assert!(note.unwrap().starts_with("linux-5.10: skipped"));
        let err = kernels_for_clock(Some(&ALL_KERNELS), icount, false).unwrap_err();
        let err = err.downcast_ref::<clap::Error>().expect("a usage error");
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("--guest-clock host"), "{err}");
        // The host's clock boots both; recorded traces are compared anyway.
        let (kernels, note) = kernels_for_clock(None, GuestClock::Host, false).unwrap();
        assert_eq!((kernels, note), (None, None));
        let both = kernels_for_clock(Some(&ALL_KERNELS), icount, true).unwrap();
        assert_eq!(both, (Some(ALL_KERNELS.to_vec()), None));
    }

    #[test]
    fn the_guest_library_defines_what_the_script_calls() {
        let text = guest_lib().unwrap();
        assert!(
            text.contains("\nwith_scx_nest() {\n"),
            "no with_scx_nest in {GUEST_LIB}"
        );
    }

    #[test]
    fn programs_missing_beside_nest_are_named_with_how_to_build_them() {
        let dir = tempfile::tempdir().unwrap();
        let err = check_programs(dir.path(), &[Scheduler::Default]).unwrap_err();
        assert!(
            err.to_string().contains("has no nest-load: build it"),
            "{err}"
        );
        std::fs::write(dir.path().join("nest-load"), "").unwrap();
        check_programs(dir.path(), &[Scheduler::Default]).unwrap();
        let err =
            check_programs(dir.path(), &[Scheduler::Default, Scheduler::ScxNest]).unwrap_err();
        assert!(
            err.to_string()
                .contains("has no scx_nest: build it next to nest (cargo build -p scx_nest"),
            "{err}"
        );
    }
}
