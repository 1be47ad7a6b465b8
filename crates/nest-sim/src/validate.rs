//! The simulator's models against real kernels: what `nest validate`
//! computes from the traces it recorded.
//!
//! Each recording is a workload recorded in the 2x4x2 NUMA guest under a
//! kernel generation and a scheduler ([`Recording`]): the kernel's default
//! scheduler, or `scx_nest`. Every recorded command is replayed in the
//! simulator on the guest's model ([`GUEST_MACHINE`], its vCPUs waking as
//! late as the recording's did) under the scheduler's model ([`Model`]):
//! the Linux model of the same generation for the default scheduler, the
//! simulator's Nest (the same C policy as scx_nest) for scx_nest. Each
//! figure of the command's placement, the median over the recorded runs,
//! is compared with its median over the replays, and agrees when the two
//! are within the figure's band ([`BANDS`]). Booting the guest and
//! recording are the `nest` command's; everything from the traces on is
//! here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::ValueEnum;
use nest_trace::Trace;
use nest_trace::metrics::{
    self, IdleCpuWakeup, IntervalStats, TasksPlacement, interval_stats, tree_placement_in,
};
use nest_trace::svg;
use nest_trace::table::{Cell as TableCell, Table, escape};
use nest_trace::timeline::Timeline;

use crate::machine::VcpuWakeup;
use crate::policy::Policy;
use crate::policy::baseline::Baseline;
use crate::policy::fork_balance::LinuxVersion;
use crate::policy::nest::Nest;
use crate::workload::{replay, rtapp};
use crate::{Governor, Machine, SimConfig};

/// The simulator's model of the guest (2 sockets x 4 cores x 2 threads,
/// emulated: one speed, so that each replayed run lasts as long as the
/// guest recorded it).
pub const GUEST_MACHINE: &str = "test-guest-2s-tcg";

/// Which recordings `nest validate` replays with the guest's other tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Others {
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
    pub fn replayed_for(self, scheduler: Scheduler) -> bool {
        match self {
            Others::None => false,
            Others::ScxNest => scheduler == Scheduler::ScxNest,
            Others::All => true,
        }
    }
}

/// Every kernel generation the guest boots.
pub const ALL_KERNELS: [LinuxVersion; 2] = [LinuxVersion::Linux7, LinuxVersion::Linux510];

/// What a workload is recorded under in the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scheduler {
    /// The kernel's own scheduler (EEVDF in 7.x, CFS in 5.10).
    Default,
    /// scx_nest with its default options, attached for every task.
    #[value(name = "scx_nest")]
    ScxNest,
}

/// Every scheduler a workload can be recorded under.
pub const ALL_SCHEDULERS: [Scheduler; 2] = [Scheduler::Default, Scheduler::ScxNest];

impl Scheduler {
    /// The simulator's model of this scheduler.
    pub fn model(self) -> Model {
        match self {
            Scheduler::Default => Model::Linux,
            Scheduler::ScxNest => Model::Nest,
        }
    }

    /// Can it run under `kernel`? scx_nest needs sched_ext, which of the
    /// guest kernels only Debian's 7.x has.
    pub fn runs_under(self, kernel: LinuxVersion) -> bool {
        match self {
            Scheduler::Default => true,
            Scheduler::ScxNest => kernel == LinuxVersion::Linux7,
        }
    }
}

/// A simulator policy a real scheduler is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// The Linux model (`nest sim -p linux`), of the recorded kernel's
    /// generation.
    Linux,
    /// The simulator's Nest with scx_nest's defaults in a virtual machine,
    /// where warm spinning is off (`nest sim -p nest-nospin`).
    Nest,
}

impl Model {
    /// Its name in figures.csv: the policy's name in `nest sim -p`.
    pub fn name(self) -> &'static str {
        match self {
            Model::Linux => "linux",
            Model::Nest => "nest-nospin",
        }
    }

    /// Its name in titles.
    pub fn title(self) -> &'static str {
        match self {
            Model::Linux => "Linux model",
            Model::Nest => "Nest model",
        }
    }

    /// The policy, for a machine with `machine`'s topology. Nest gets
    /// scx_nest's defaults as scx_nest applies them in the guest, a
    /// virtual machine (warm spinning off).
    pub fn policy(self, machine: &Machine) -> Result<Box<dyn Policy>> {
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
pub struct Recording {
    pub kernel: LinuxVersion,
    pub scheduler: Scheduler,
}

impl Recording {
    /// `linux-7 scx_nest vs Nest model`.
    pub fn title(self) -> String {
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
    pub fn trace_path(self, out: &Path, workload: Workload, run: u32) -> PathBuf {
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
    pub fn simulated_trace_path(self, out: &Path, workload: Workload) -> PathBuf {
        let real = self.trace_path(out, workload, 1);
        let name = real.file_name().unwrap_or_default().to_string_lossy();
        real.with_file_name(name.replace(".nest.jsonl", ".sim.nest.jsonl"))
    }
}

/// The recordings `kernels` and `schedulers` ask for (`None`: not given,
/// all of them), kernel by kernel, and a note for each pair left out
/// because the scheduler cannot run under the kernel. A kernel or
/// scheduler named explicitly that would have no recording at all is
/// refused: the error says what to ask for instead (a usage error of
/// `--kernels` or `--schedulers`).
pub fn recordings(
    kernels: Option<&[LinuxVersion]>,
    schedulers: Option<&[Scheduler]>,
) -> Result<(Vec<Recording>, Vec<String>), String> {
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

/// Refuses a kernel or scheduler named explicitly that has no recording
/// in `chosen`.
fn refuse_unrecorded(
    kernels: Option<&[LinuxVersion]>,
    schedulers: Option<&[Scheduler]>,
    chosen: &[Recording],
) -> Result<(), String> {
    let asked_kernels = names(kernels.unwrap_or(&ALL_KERNELS));
    let asked_schedulers = names(schedulers.unwrap_or(&ALL_SCHEDULERS));
    let kernels = kernels.unwrap_or_default();
    if let Some(&kernel) = kernels
        .iter()
        .find(|&&k| !chosen.iter().any(|r| r.kernel == k))
    {
        return Err(format!(
            "--kernels names {k}, but no scheduler of --schedulers {asked_schedulers} runs \
             under it: {k} has no sched_ext; add default to --schedulers",
            k = value_name(kernel)
        ));
    }
    let schedulers = schedulers.unwrap_or_default();
    if let Some(&scheduler) = schedulers
        .iter()
        .find(|&&s| !chosen.iter().any(|r| r.scheduler == s))
    {
        return Err(format!(
            "--schedulers names {s}, but no kernel of --kernels {asked_kernels} can run it: \
             {s} needs sched_ext, which of the guest kernels only linux-7 has; add linux-7 \
             to --kernels",
            s = value_name(scheduler)
        ));
    }
    Ok(())
}

/// `linux-7,linux-5.10`.
pub fn names<T: ValueEnum + Copy>(values: &[T]) -> String {
    values
        .iter()
        .map(|&v| value_name(v))
        .collect::<Vec<_>>()
        .join(",")
}

/// A workload, recorded from its start to its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
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

/// The trace meta entry saying what the guest's time followed (`host`, or
/// `icount:N` for QEMU's instruction counter); traces without it were
/// recorded under the host's clock.
pub const GUEST_CLOCK_META: &str = "guest_clock";

/// The guest clock a trace was recorded under.
pub fn guest_clock_of(trace: &Trace) -> String {
    trace
        .meta_get(GUEST_CLOCK_META)
        .unwrap_or("host")
        .to_string()
}

/// The name a value has on the command line (`linux-5.10`, `chain`).
pub fn value_name(value: impl ValueEnum) -> String {
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
/// (A floor in migrations a second would mean 1.5 migrations in a 0.3 s
/// run and 250 in a 50 s configure.) The primary nest's mean size
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

/// How recordings are replayed and compared.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Which recordings are replayed with the guest's other tasks.
    pub others: Others,
    /// How many times each recorded run is replayed, with seeds 1 to N of
    /// the vCPU wake-up draws: a simulated figure is the median of them.
    pub replays: u64,
    /// The recorded runs compared per workload: the first `runs` (`None`:
    /// every run recorded). A real figure is the median of them.
    pub runs: Option<u32>,
}

/// What the comparison found: a row per figure, and per recording and
/// workload the command's CPUs over time, real beside simulated.
pub struct Report {
    rows: Vec<Row>,
    pairs: Vec<Pair>,
}

impl Report {
    /// The figures as a table: printed, `figures.csv`, in `validate.html`.
    pub fn table(&self) -> Table {
        figures_table(&self.rows)
    }

    /// How many figures there are.
    pub fn figures(&self) -> usize {
        self.rows.len()
    }

    /// How many figures are outside their band.
    pub fn outside(&self) -> usize {
        self.rows.iter().filter(|r| r.agrees == Some(false)).count()
    }

    /// Writes `figures.csv` and `validate.html` into `out`.
    pub fn write(&self, out: &Path) -> Result<()> {
        let table = self.table();
        let write = |name: &str, text: String| {
            let path = out.join(name);
            std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
        };
        write("figures.csv", table.to_csv())?;
        write("validate.html", html(&table, &self.pairs))
    }
}

/// Compares every workload's traces recorded in `out` under each of
/// `recordings` with its replays under the scheduler's model, keeping
/// the first run's replay (seed 1) beside its trace. What the replays say
/// of each run (its root, the vCPU wake-ups, how placements were decided)
/// goes to `log`, a line at a time.
pub fn compare_recordings(
    out: &Path,
    recordings: &[Recording],
    workloads: &[Workload],
    options: Options,
    log: &dyn Fn(&str),
) -> Result<Report> {
    let machine = Machine::builtin(GUEST_MACHINE)?;
    let mut rows = Vec::new();
    let mut pairs = Vec::new();
    for &recording in recordings {
        let traces = recorded_traces(out, recording, workloads, options.runs)?;
        let wakeups: Vec<Vec<Vec<IdleCpuWakeup>>> = traces
            .iter()
            .map(|(_, runs)| runs.iter().map(metrics::idle_cpu_wakeups).collect())
            .collect();
        let boot_wakeups = wakeups.concat().concat();
        let sim = Simulation {
            machine: &machine,
            others: options.others.replayed_for(recording.scheduler),
            boot_wakeups: &boot_wakeups,
            seeds: options.replays,
            log,
        };
        for ((workload, runs), own) in traces.into_iter().zip(&wakeups) {
            let (row, pair) = compare_recorded(out, sim, recording, workload, runs, own)?;
            rows.extend(row);
            pairs.push(pair);
        }
    }
    Ok(Report { rows, pairs })
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
    /// Where what the replays say goes.
    log: &'a dyn Fn(&str),
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
/// say of it logged under `title`.
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
    (sim.log)(&format!("{title}: root {}", figures.root));
    if let Some(vcpus) = &vcpus {
        (sim.log)(&format!(
            "{title}: vCPU wake-ups (median by CPUs running) {vcpus}"
        ));
    }
    if let Some(steps) = steps {
        (sim.log)(&format!(
            "{title}: placements (seed 1; real / simulated) {steps}"
        ));
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
    workload: &crate::workload::Workload,
    machine: &Machine,
    recording: Recording,
    seed: u64,
) -> Result<Trace> {
    let mut cfg = SimConfig::new(machine.clone(), Governor::Performance, seed);
    cfg.record_trace = true;
    cfg.linux = recording.kernel;
    let mut policy = recording.scheduler.model().policy(machine)?;
    let result = crate::run(cfg, workload, policy.as_mut())?;
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
         counter, 2^N ns per instruction; docs/design/decisions/guest-clock.md).</p>\n"
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

    /// The recordings `kernels` and `schedulers` ask for, as `kernel
    /// scheduler` strings, and the notes; or why they are refused.
    fn chosen(
        kernels: Option<&[LinuxVersion]>,
        schedulers: Option<&[Scheduler]>,
    ) -> Result<(Vec<String>, Vec<String>), String> {
        let (chosen, notes) = recordings(kernels, schedulers)?;
        let names = chosen
            .iter()
            .map(|r| format!("{} {}", value_name(r.kernel), value_name(r.scheduler)))
            .collect();
        Ok((names, notes))
    }

    const SCX_NEST: [Scheduler; 1] = [Scheduler::ScxNest];
    const LINUX_7: [LinuxVersion; 1] = [LinuxVersion::Linux7];
    const LINUX_510: [LinuxVersion; 1] = [LinuxVersion::Linux510];

    #[test]
    fn by_default_every_kernel_runs_every_scheduler_it_can() {
        let (names, notes) = chosen(None, None).unwrap();
        assert_eq!(
            names,
            ["linux-7 default", "linux-7 scx_nest", "linux-5.10 default"]
        );
        assert_eq!(
            notes,
            ["scx_nest under linux-5.10: skipped, linux-5.10 has no sched_ext"]
        );
        // Both named in full: the same, with the same note.
        let full = chosen(Some(&ALL_KERNELS), Some(&ALL_SCHEDULERS)).unwrap();
        assert_eq!(full, (names, notes));
    }

    #[test]
    fn a_pair_nobody_asked_for_is_skipped_with_a_note() {
        let (names, notes) = chosen(None, Some(&SCX_NEST)).unwrap();
        assert_eq!(names, ["linux-7 scx_nest"]);
        assert_eq!(notes.len(), 1);
        let (names, notes) = chosen(Some(&LINUX_510), None).unwrap();
        assert_eq!(names, ["linux-5.10 default"]);
        assert_eq!(notes.len(), 1);
        let (names, notes) = chosen(Some(&LINUX_7), Some(&SCX_NEST)).unwrap();
        assert_eq!(names, ["linux-7 scx_nest"]);
        assert!(notes.is_empty());
    }

    #[test]
    fn scx_nest_under_5_10_alone_is_refused_with_what_to_do() {
        let err = chosen(Some(&LINUX_510), Some(&SCX_NEST)).unwrap_err();
        assert!(
            err.contains(
                "--kernels names linux-5.10, but no scheduler of --schedulers scx_nest runs under it"
            ),
            "{err}"
        );
        assert!(err.contains("add default to --schedulers"), "{err}");
        let err = chosen(Some(&ALL_KERNELS), Some(&SCX_NEST)).unwrap_err();
        assert!(err.contains("--kernels names linux-5.10"), "{err}");
        // The value's name is scx_nest, as the program's.
        assert_eq!(value_name(Scheduler::ScxNest), "scx_nest");
        assert!(Scheduler::from_str("scx-nest", false).is_err());
    }

    /// The options of the comparisons below: `runs` runs, `replays`
    /// replays, the guest's other tasks for scx_nest's recordings.
    fn options(runs: Option<u32>, replays: u64) -> Options {
        Options {
            others: Others::ScxNest,
            replays,
            runs,
        }
    }

    /// Compares the recordings in `out` and writes the report there.
    fn compare_in(
        out: &Path,
        recordings: &[Recording],
        workloads: &[Workload],
        options: Options,
    ) -> Result<Report> {
        let report = compare_recordings(out, recordings, workloads, options, &|_| {})?;
        report.write(out)?;
        Ok(report)
    }

    /// A schedule of a fork/wait chain of `steps` forks simulated under
    /// Nest, saved as a recorded trace of it at `path` (its shell as the
    /// command), recorded under `clock` (`None`: no meta, the host's).
    fn save_simulated_chain(path: &Path, clock: Option<&str>, steps: u32) {
        let machine = Machine::builtin(GUEST_MACHINE).unwrap();
        let spec = format!("configure:steps={steps}");
        let workload = crate::cli::load_workload(&spec, &machine).unwrap();
        let mut cfg = SimConfig::new(machine.clone(), Governor::Performance, 1);
        cfg.record_trace = true;
        let mut policy = Model::Nest.policy(&machine).unwrap();
        let result = crate::run(cfg, &workload, policy.as_mut()).unwrap();
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
            Some("icount:0"),
            20,
        );
        let both = [LINUX_7_DEFAULT, LINUX_7_SCX_NEST];
        let report = compare_in(dir.path(), &both, &[Workload::Chain], options(None, 3)).unwrap();
        assert_eq!(report.figures(), 2 * BANDS.len() - 1);
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
        let with_510 = [LINUX_7_DEFAULT, LINUX_510_DEFAULT];
        let err = compare_in(dir.path(), &with_510, &[Workload::Chain], options(None, 1));
        let err = format!("{:#}", err.err().unwrap());
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
        let compare_runs = |runs: Option<u32>| {
            compare_in(
                dir.path(),
                &[LINUX_7_SCX_NEST],
                &[Workload::Chain],
                options(runs, 1),
            )
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
        compare_runs(None).unwrap();
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
        compare_runs(Some(1)).unwrap();
        assert!(figures().iter().all(|r| r[1] == r[2]), "{:?}", figures());
        // A run not recorded: which one, and how to record it.
        let err = format!("{:#}", compare_runs(Some(3)).err().unwrap());
        assert!(
            err.contains("linux-7-scx_nest-chain-run3.nest.jsonl: no recorded trace"),
            "{err}"
        );
        assert!(err.contains("with --runs 3"), "{err}");
    }

    #[test]
    fn the_guest_s_other_tasks_are_replayed_for_scx_nest_unless_asked_otherwise() {
        let replayed = |others: Others| ALL_SCHEDULERS.map(|s| others.replayed_for(s));
        // [default, scx_nest]
        assert_eq!(replayed(Others::ScxNest), [false, true]);
        assert_eq!(replayed(Others::All), [true, true]);
        assert_eq!(replayed(Others::None), [false, false]);
        assert_eq!(value_name(Others::ScxNest), "scx_nest");
    }
}
