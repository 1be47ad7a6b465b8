//! The `nest sim` command: run workloads on machine models under several
//! policies and governors, over several seeds, and compare them with the
//! first configuration (the baseline).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use nest_policy::{Mechanism, ParamsArgs};

use crate::engine::SimConfig;
use crate::governor::Governor;
use crate::machine::Machine;
use crate::policy::Policy;
use crate::policy::baseline::Baseline;
use crate::policy::fork_balance::LinuxVersion;
use crate::policy::nest::Nest;
use crate::policy::smove::{SLocal, SMove};
use crate::results::{self, Comparison, RunResult};
use crate::workload::{Workload, builtin, rtapp};

const OUTPUT: &str = "Output";

/// Simulate placement policies on modelled DVFS hardware.
///
/// With no arguments: compares the default Linux placement and Nest under
/// the powersave, performance and schedutil governors, on a configure-like
/// workload on a 2-socket Xeon Gold 5218 model, over 5 seeds. Improvements
/// are relative to the first policy with the first governor (0 = same,
/// positive = better). Durations take a unit: ns, us, ms or s.
#[derive(Debug, Clone, Parser)]
#[command(name = "sim")]
pub struct SimArgs {
    /// Machine: a built-in model name or a machine JSON file.
    #[arg(short, long, default_value = "xeon-gold-5218-2s")]
    pub machine: String,

    /// Workload: a built-in family (configure, sleepers, barrier,
    /// hackbench; parameters as `family:key=value,...`) or an rt-app JSON
    /// file.
    #[arg(short, long, default_value = "configure")]
    pub workload: String,

    /// Policies to compare; the first is the baseline.
    #[arg(
        short,
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "linux,nest"
    )]
    pub policies: Vec<PolicyName>,

    /// Governors; the first is the baseline's.
    #[arg(
        short,
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "powersave,performance,schedutil"
    )]
    pub governors: Vec<Governor>,

    /// Number of seeds (runs per configuration).
    #[arg(short, long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub seeds: u64,

    /// First seed.
    #[arg(long, default_value_t = 1)]
    pub seed_base: u64,

    /// Scheduler tick frequency (Hz).
    #[arg(long, default_value_t = 250, value_parser = clap::value_parser!(u32).range(1..))]
    pub tick_hz: u32,

    /// Turn off the kernel's periodic and newly-idle load balancing (of the
    /// Linux model, S_local and S_move; Nest balances through its queues).
    #[arg(long)]
    pub no_load_balance: bool,

    /// The fair scheduler the Linux model follows where generations differ
    /// (fork placement's NUMA rule; wakeups' idle-CPU scans and
    /// recent_used_cpu).
    #[arg(long, value_enum, default_value_t = LinuxVersion::Linux7)]
    pub kernel: LinuxVersion,

    #[command(flatten)]
    pub nest: ParamsArgs,

    /// Output format on stdout.
    #[arg(short, long, value_enum, default_value_t = Format::Table, help_heading = OUTPUT)]
    pub format: Format,

    /// Also write the tables as CSV files into this directory: runs.csv
    /// (one line per run), tasks.csv (per-task run and wait times) and
    /// timeline.csv (CPUs and sockets used, concurrency and underload per
    /// tick).
    #[arg(long, value_name = "DIR", help_heading = OUTPUT)]
    pub csv: Option<PathBuf>,

    /// Write each run's schedule as a nest trace into this directory:
    /// POLICY-GOVERNOR-SEED.nest.jsonl, read by every `nest trace` command.
    #[arg(long, value_name = "DIR", help_heading = OUTPUT)]
    pub trace_dir: Option<PathBuf>,

    /// Run every built-in machine with every built-in workload family and
    /// print one summary table (--machine and --workload are ignored).
    #[arg(long, conflicts_with_all = ["format", "csv"], help_heading = OUTPUT)]
    pub sweep: bool,

    /// Rerun the comparison with each assumption of the machine file (its
    /// `assumptions`: parameters no measurement fixes, with their ranges)
    /// at both ends of its range, one at a time, then all at their low and
    /// all at their high ends, and report each gain as median [low, high]
    /// with the assumption that moves it most: with several policies, each
    /// against the first under each governor; with one, each governor
    /// against the first. With --csv, also writes sensitivity.csv beside
    /// the central model's runs; --trace-dir keeps the central model's.
    #[arg(long, conflicts_with = "sweep")]
    pub sensitivity: bool,

    /// List built-in machines and workloads, then exit.
    #[arg(long, help_heading = OUTPUT)]
    pub list: bool,

    /// No progress on stderr.
    #[arg(short, long, help_heading = OUTPUT)]
    pub quiet: bool,

    #[command(subcommand)]
    pub command: Option<SimCommand>,
}

/// What `nest sim` does instead of a comparison.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum SimCommand {
    /// Run the calibration suite: published behaviour of the modelled
    /// hardware and of the default scheduler on it, reproduced by the
    /// built-in models; prints each case's source, expected and simulated
    /// figures and verdict, and fails if a case fails.
    Calibrate,
}

/// A placement policy the simulator runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PolicyName {
    /// Linux's placement (the fair scheduler's).
    #[value(alias = "baseline", alias = "cfs")]
    Linux,
    Nest,
    /// Nest without warm spinning.
    NestNospin,
    SLocal,
    SMove,
}

impl PolicyName {
    /// The name users type and the results show.
    pub fn name(self) -> String {
        self.to_possible_value()
            .expect("no policy is skipped")
            .get_name()
            .to_string()
    }
}

/// What `nest sim` prints on stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
}

impl Default for SimArgs {
    fn default() -> Self {
        Self::parse_from(["sim"])
    }
}

/// Loads a workload: a built-in family or an rt-app file.
pub fn load_workload(spec: &str, machine: &Machine) -> Result<Workload> {
    if builtin::is_builtin(spec) {
        return builtin::build(spec, machine.nr_cores());
    }
    let path = std::path::Path::new(spec);
    if !path.exists() {
        bail!(
            "workload `{spec}` is neither a file nor a built-in family ({})",
            builtin::FAMILIES.join(", ")
        );
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {spec}"))?;
    rtapp::parse(&text, spec)
}

/// Builds the policy `name` for `machine`.
fn make_policy(name: PolicyName, args: &SimArgs, machine: &Machine) -> Result<Box<dyn Policy>> {
    Ok(match name {
        PolicyName::Linux => Box::new(Baseline),
        PolicyName::Nest => Box::new(Nest::new(&machine.topology(), args.nest.params())?),
        PolicyName::NestNospin => {
            let mut params = args.nest.params();
            params.disabled.push(Mechanism::WarmSpin);
            Box::new(Nest::new(&machine.topology(), params)?)
        }
        PolicyName::SLocal => Box::new(SLocal::new(&machine.topology())?),
        PolicyName::SMove => Box::new(SMove::new(&machine.topology(), args.nest.smove_delay)?),
    })
}

fn list() -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "machines:")?;
    for n in Machine::builtin_names() {
        if let Ok(m) = Machine::builtin(n) {
            writeln!(out, "  {n:<20} {}", m.description)?;
        }
    }
    writeln!(out, "workloads (or an rt-app JSON file):")?;
    for f in builtin::FAMILIES {
        writeln!(out, "  {f}")?;
    }
    Ok(())
}

/// Runs the `nest sim` command.
pub fn run(args: SimArgs) -> Result<()> {
    if args.list {
        return list();
    }
    if let Some(SimCommand::Calibrate) = args.command {
        return calibrate();
    }
    if args.sweep {
        return sweep(&args);
    }
    let machine = Machine::load(&args.machine)?;
    let workload = load_workload(&args.workload, &machine)?;
    if args.sensitivity {
        return sensitivity(&args, &machine, &workload);
    }
    let configs = run_all(&args, &machine, &workload)?;
    let cmps = results::compare(configs);
    print_results(&args, &machine, &workload, &cmps)
}

/// `nest sim --sensitivity`.
fn sensitivity(args: &SimArgs, machine: &Machine, workload: &Workload) -> Result<()> {
    let variants = crate::sensitivity::variants(machine)?;
    let mut central = Vec::new();
    let mut per_variant = Vec::new();
    for (i, v) in variants.iter().enumerate() {
        if !args.quiet {
            eprintln!("[{}/{}] {}", i + 1, variants.len(), v.label);
        }
        // Traces (--trace-dir) of the central model only.
        let variant_args = SimArgs {
            quiet: true,
            trace_dir: args.trace_dir.clone().filter(|_| i == 0),
            ..args.clone()
        };
        let cmps = results::compare(run_all(&variant_args, &v.machine, workload)?);
        per_variant.push(crate::sensitivity::gains(&cmps));
        if i == 0 {
            central = cmps;
        }
    }
    let spreads = crate::sensitivity::spreads(&variants, &per_variant);
    if let Some(dir) = &args.csv {
        write_csv_dir(args, dir, &central)?;
        let path = dir.join("sensitivity.csv");
        std::fs::write(&path, crate::sensitivity::csv(&spreads))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Csv => write!(out, "{}", crate::sensitivity::csv(&spreads))?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &spreads).map_err(std::io::Error::from)?
        }
        Format::Table => {
            writeln!(
                out,
                "machine {} ({}), workload {}, {} seed(s); gains as improvements (0 = same, + = better): \
                 the machine file's values (central), then the median [low, high] over {} variants: \
                 each of its {} assumptions at the low and at the high end of its range, all at their \
                 low ends, all at their high ends, and the central values\n",
                machine.name,
                machine.description,
                workload.name,
                args.seeds,
                variants.len(),
                machine.assumptions.len()
            )?;
            write!(out, "{}", crate::sensitivity::table(&spreads))?;
        }
    }
    Ok(())
}

/// `nest sim calibrate`.
fn calibrate() -> Result<()> {
    let results = crate::calibrate::run_all()?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "calibration: published behaviour of the hardware and of the default scheduler, \
         simulated on the built-in models\n"
    )?;
    write!(out, "{}", crate::calibrate::table(&results))?;
    let failed: Vec<_> = results
        .iter()
        .filter(|(_, o)| !o.pass)
        .map(|(c, _)| c.id)
        .collect();
    if !failed.is_empty() {
        return Err(CheckFailed(format!("calibration cases failed: {}", failed.join(", "))).into());
    }
    Ok(())
}

/// The command ran to its end and its check failed (a calibration case
/// outside its tolerance), as opposed to a command that could not run:
/// `nest` exits 3 for it, 1 for the other.
#[derive(Debug)]
pub struct CheckFailed(pub String);

impl std::fmt::Display for CheckFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CheckFailed {}

type Config = (String, String, Vec<RunResult>);

/// Every built-in machine with every built-in workload family, in one
/// table: improvements are against the first policy and governor of the
/// same machine and workload.
fn sweep(args: &SimArgs) -> Result<()> {
    let mut rows = Vec::new();
    for name in Machine::builtin_names() {
        let machine = Machine::builtin(name)?;
        for family in builtin::FAMILIES {
            let workload = builtin::build(family, machine.nr_cores())?;
            let cmps = results::compare(run_all(args, &machine, &workload)?);
            rows.push((name, family, cmps));
        }
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} seed(s); improvements vs {} {} on the same machine and workload (0 = same, + = better)\n",
        args.seeds,
        args.policies[0].name(),
        args.governors[0].name()
    )?;
    write!(out, "{}", results::sweep_table(&rows))?;
    Ok(())
}

fn run_all(args: &SimArgs, machine: &Machine, workload: &Workload) -> Result<Vec<Config>> {
    let total = args.policies.len() * args.governors.len() * args.seeds as usize;
    let mut progress = Progress::new(total, args.quiet);
    let mut configs = Vec::new();
    for &p in &args.policies {
        for &g in &args.governors {
            let mut runs = Vec::new();
            for seed in args.seed_base..args.seed_base + args.seeds {
                let mut policy = make_policy(p, args, machine)?;
                let mut cfg = SimConfig::new(machine.clone(), g, seed);
                cfg.tick_hz = args.tick_hz;
                cfg.load_balance = !args.no_load_balance;
                cfg.linux = args.kernel;
                cfg.record_trace = args.trace_dir.is_some();
                cfg.progress = !args.quiet && std::io::stderr().is_terminal();
                let start = Instant::now();
                let mut r = crate::run(cfg, workload, policy.as_mut())?;
                if r.deadlocked {
                    eprintln!(
                        "warning: {} {} seed {seed}: every remaining task waits forever (deadlock) at {:.3} ms",
                        p.name(),
                        g.name(),
                        r.completion_ns as f64 / 1e6
                    );
                }
                progress.done(&r, start.elapsed().as_secs_f64());
                if let Some(dir) = &args.trace_dir {
                    write_trace(dir, &mut r)?;
                }
                runs.push(r);
            }
            configs.push((p.name(), g.name().to_owned(), runs));
        }
    }
    progress.finish();
    Ok(configs)
}

fn write_trace(dir: &std::path::Path, r: &mut RunResult) -> Result<()> {
    let Some(trace) = r.trace.take() else {
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("{}-{}-{}.nest.jsonl", r.policy, r.governor, r.seed));
    nest_trace::format::save(&trace, &path)
}

fn print_results(
    args: &SimArgs,
    machine: &Machine,
    workload: &Workload,
    cmps: &[Comparison],
) -> Result<()> {
    let csv = results::csv(cmps);
    if let Some(dir) = &args.csv {
        write_csv_dir(args, dir, cmps)?;
    }
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Csv => write!(out, "{csv}")?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, cmps).map_err(std::io::Error::from)?
        }
        Format::Table => {
            writeln!(
                out,
                "machine {} ({}), workload {}, {} seed(s); improvements vs {} {} (0 = same, + = better)\n",
                machine.name,
                machine.description,
                workload.name,
                args.seeds,
                cmps[0].policy,
                cmps[0].governor
            )?;
            write!(out, "{}", results::table(cmps))?;
            writeln!(out, "\nshare of busy time per frequency band (GHz):")?;
            write!(out, "{}", results::residency_table(cmps))?;
            writeln!(
                out,
                "\n>=nom: busy time at or above nominal; cpus: CPUs used per tick; cores: physical \
                 cores used per tick (the active cores turbo bins count); under: underload (CPUs \
                 used - tasks running at once); migr: migrations; wait: total run-queue wait."
            )?;
        }
    }
    Ok(())
}

/// `--csv DIR`: runs.csv, tasks.csv and timeline.csv.
fn write_csv_dir(args: &SimArgs, dir: &std::path::Path, cmps: &[Comparison]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tick_ns = 1_000_000_000 / u64::from(args.tick_hz);
    for (name, text) in [
        ("runs.csv", results::csv(cmps)),
        ("tasks.csv", results::tasks_csv(cmps)),
        ("timeline.csv", results::timeline_csv(cmps, tick_ns)),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Progress of the runs on stderr.
struct Progress {
    total: usize,
    done: usize,
    tty: bool,
    quiet: bool,
    start: Instant,
}

impl Progress {
    fn new(total: usize, quiet: bool) -> Self {
        Self {
            total,
            done: 0,
            tty: std::io::stderr().is_terminal(),
            quiet,
            start: Instant::now(),
        }
    }

    fn done(&mut self, r: &RunResult, wall_s: f64) {
        self.done += 1;
        if self.quiet || (!self.tty && wall_s < 2.0) {
            return;
        }
        let line = format!(
            "[{}/{}] {} {} seed {}: {:.1} ms simulated, {} events in {:.2} s",
            self.done,
            self.total,
            r.policy,
            r.governor,
            r.seed,
            r.completion_ns as f64 / 1e6,
            r.events,
            wall_s
        );
        if self.tty {
            eprint!("\r\x1b[K{line}");
        } else {
            eprintln!("{line}");
        }
    }

    fn finish(&self) {
        if self.tty && !self.quiet {
            eprintln!(
                "\r\x1b[K{} runs in {:.1} s",
                self.total,
                self.start.elapsed().as_secs_f64()
            );
        }
    }
}
