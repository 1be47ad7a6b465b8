//! `nest bench`: run a suite of workloads under several schedulers (and
//! governors), repeatedly and interleaved, and report each scheduler's
//! improvement over the first one the way the Nest paper does.
//! `nest bench compare A.json B.json` compares two result files.
//! The method is described in docs/reference/bench.md.

mod dryrun;
mod energy;
mod exec;
mod governor;
mod machine;
mod plan;
mod process;
mod report;
mod residency;
mod results;
mod sched;
mod stats;
mod suite;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use nest_policy::parse_duration;

use crate::{source, usage};
use results::{Baseline, Cell, Method, Results};
use stats::Center;
use suite::{INSTALLED, Scheduler, Suite, Workload};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: Option<BenchCommand>,
    /// A built-in suite (quick, default, guest, paper, paper-guest,
    /// peers, peers-guest) or a TOML suite file.
    #[arg(long, default_value = "default")]
    suite: String,
    /// Only these of the suite's schedulers, in this order (comma-separated).
    /// A name not in the suite may be a built-in one (default, scx_nest),
    /// an installed `scx_*` program, or `installed` for all of those.
    #[arg(long, value_name = "NAMES")]
    schedulers: Option<String>,
    /// Only these of the suite's workloads (comma-separated).
    #[arg(long, value_name = "NAMES")]
    workloads: Option<String>,
    /// Unmeasured runs of each cell before the measured ones (default:
    /// the suite's, else 1).
    #[arg(long)]
    warmup: Option<usize>,
    /// Measured runs of each cell (default: the suite's, else 5).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    runs: Option<u16>,
    /// Measured runs of each cell for its energy, where RAPL exists: the
    /// rounds beyond --runs count for energy only (default: the suite's,
    /// else --runs).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    power_runs: Option<u16>,
    /// A workload still running after this is killed and its run FAILED
    /// (default: the suite's, else 300s).
    #[arg(long, value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// A scheduler not attached after this is FAILED (only catches hangs:
    /// loading BPF under emulation takes seconds).
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    attach_timeout: Duration,
    /// Run every cell under each of these cpufreq governors
    /// (comma-separated; GOVERNOR or GOVERNOR@MODE to pin the intel_pstate
    /// or amd-pstate mode), switching the driver's mode where the governor
    /// needs it and restoring everything afterwards; ignored, with a note,
    /// where there is no cpufreq (default: the suite's). `--governor` is
    /// an older spelling, still taken.
    #[arg(
        long = "governors",
        alias = "governor",
        value_delimiter = ',',
        value_name = "GOVERNORS"
    )]
    governor: Vec<String>,
    /// The one cell every other cell of a workload is compared with:
    /// SCHEDULER or SCHEDULER/GOVERNOR (default: the suite's, else the
    /// first scheduler under schedutil if it is run, else under the first
    /// governor).
    #[arg(long, value_name = "CELL")]
    baseline: Option<String>,
    /// Compare the cells' means (the paper's) or medians (default: the
    /// suite's, else mean).
    #[arg(long, value_enum)]
    center: Option<Center>,
    /// Directory for results.json, results.csv, report.html, figures/ and
    /// logs/.
    #[arg(short, long, default_value = "out/bench", value_name = "DIR")]
    out: PathBuf,
    /// After the measured runs, one more run of each cell under
    /// `nest trace record` (needs root and tracefs): the CPUs and sockets
    /// its work used and its frequencies, in the tables and report.html.
    /// Not a measurement (default: the suite's, else no).
    #[arg(long)]
    trace: bool,
    /// List the built-in suites, workloads and schedulers, then exit.
    #[arg(long)]
    list: bool,
    /// Print the whole plan (cells, runs, governors and driver modes,
    /// what is missing here and how to get it) and exit; changes nothing.
    #[arg(long)]
    dry_run: bool,
    /// The CPUs' sysfs directory (a fake tree in tests).
    #[arg(long, hide = true, default_value = governor::CPUS)]
    cpufreq_root: PathBuf,
    /// Benchmark this command (after `--`) instead of the suite's
    /// workloads; its metric is wall time.
    #[arg(last = true, value_name = "CMD", conflicts_with = "workloads")]
    run: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Per cell: B's mean against A's, and B's improvement over A.
    Compare {
        /// The results.json taken as the reference.
        a: PathBuf,
        /// The results.json compared with it.
        b: PathBuf,
    },
    /// Fetch Debian source packages into the cache, as workloads with a
    /// `source` do before they run (needs the network; a guest sees the
    /// host's cache).
    Fetch {
        /// Source package names (`hello`).
        #[arg(required = true)]
        packages: Vec<String>,
    },
}

pub fn run(args: BenchArgs) -> Result<ExitCode> {
    match &args.command {
        Some(BenchCommand::Compare { a, b }) => {
            let (a, b) = (Results::load(a)?, Results::load(b)?);
            print!("{}", report::compare(&a, &b).to_text());
            return Ok(ExitCode::SUCCESS);
        }
        Some(BenchCommand::Fetch { packages }) => {
            for package in packages {
                println!("{}", source::fetch(package)?.display());
            }
            return Ok(ExitCode::SUCCESS);
        }
        None => {}
    }
    if args.list {
        print!("{}", list());
        return Ok(ExitCode::SUCCESS);
    }
    let suite: Suite = suite::load(&args.suite).map_err(usage)?;
    let (schedulers, workloads) = choose(&args, &suite)?;
    let method = Resolved::of(&args, &suite);
    // A baseline outside the cells is refused before anything else.
    baseline(
        method.baseline_spec(&schedulers),
        &schedulers,
        &method.governors,
    )?;
    if args.dry_run {
        print!("{}", dryrun::plan(&args, &method, &schedulers, &workloads));
        return Ok(ExitCode::SUCCESS);
    }
    let mut notes = Vec::new();
    let workloads = installed_workloads(workloads, &mut notes);
    fetch_sources(&workloads)?;
    check_programs(&schedulers, &workloads)?;
    preflight(&schedulers)?;
    let cpus = &args.cpufreq_root;
    let settings = governors(cpus, &method.governors, &mut notes)?;
    let specs: Vec<String> = settings.iter().map(|(spec, _)| spec.clone()).collect();
    let baseline = baseline(method.baseline_spec(&schedulers), &schedulers, &specs)?;
    let cells = cells(&workloads, &schedulers, &specs);
    let rapl = rapl(&mut notes);
    let power_runs = if !rapl.measures() {
        if method.power_runs > method.runs {
            notes.push(format!(
                "no RAPL: the {} power runs per cell are not run",
                method.power_runs
            ));
        }
        method.runs
    } else {
        method.power_runs.max(method.runs)
    };
    let results = Results {
        machine: machine::describe(&rapl),
        method: Method {
            suite: suite_name(&args),
            warmup: method.warmup,
            runs: method.runs,
            power_runs,
            timeout_s: method.timeout.as_secs_f64(),
            baseline: Some(baseline),
            center: method.center,
        },
        cells,
        runs: Vec::new(),
        interrupted: false,
        notes,
        traces: Vec::new(),
    };
    bench(&args, results, rapl, settings, method.trace)
}

/// The method: the command line's options, else the suite's, else the
/// defaults.
pub struct Resolved {
    pub warmup: usize,
    pub runs: usize,
    pub power_runs: usize,
    pub governors: Vec<String>,
    baseline: Option<String>,
    /// The baseline was asked for on the command line, not by the suite.
    baseline_asked: bool,
    pub center: Center,
    /// One traced run of each cell after the measured ones.
    pub trace: bool,
    /// A workload still running then is killed and its run FAILED.
    pub timeout: Duration,
}

/// A workload's deadline where neither the command line nor the suite
/// sets one (only catches hangs).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

impl Resolved {
    fn of(args: &BenchArgs, suite: &Suite) -> Self {
        let m = &suite.method;
        let runs = args.runs.or(m.runs).map_or(5, usize::from);
        Self {
            warmup: args.warmup.or(m.warmup).unwrap_or(1),
            runs,
            power_runs: args.power_runs.or(m.power_runs).map_or(runs, usize::from),
            governors: if args.governor.is_empty() {
                m.governors.clone()
            } else {
                args.governor.clone()
            },
            baseline: args.baseline.clone().or_else(|| m.baseline.clone()),
            baseline_asked: args.baseline.is_some(),
            center: args.center.or(m.center).unwrap_or_default(),
            trace: args.trace || m.trace,
            timeout: args.timeout.or(m.timeout).unwrap_or(DEFAULT_TIMEOUT),
        }
    }

    /// The baseline cell as asked for: the command line's, or the
    /// suite's unless `--schedulers` left its scheduler out (then the
    /// default rule: the first scheduler).
    pub fn baseline_spec(&self, schedulers: &[Scheduler]) -> Option<&str> {
        let spec = self.baseline.as_deref()?;
        let scheduler = spec.split('/').next().unwrap_or(spec);
        let chosen = schedulers.iter().any(|s| s.name == scheduler);
        (self.baseline_asked || chosen).then_some(spec)
    }
}

/// The workloads whose programs are here; a note for each optional one
/// that is skipped.
fn installed_workloads(mut workloads: Vec<Workload>, notes: &mut Vec<String>) -> Vec<Workload> {
    workloads.retain(|w| {
        let program = &w.command[0];
        let found = process::resolve(program).is_some();
        if !found && w.optional {
            notes.push(format!("{}: skipped, {program} is not installed", w.name));
        }
        found || !w.optional
    });
    workloads
}

fn suite_name(args: &BenchArgs) -> String {
    if args.run.is_empty() {
        args.suite.clone()
    } else {
        format!("{} (command)", args.suite)
    }
}

/// The schedulers and workloads the arguments ask for.
fn choose(args: &BenchArgs, suite: &Suite) -> Result<(Vec<Scheduler>, Vec<Workload>)> {
    let schedulers = match &args.schedulers {
        None => suite_schedulers(suite),
        Some(names) => pick(names, |name| schedulers_named(suite, name))?
            .into_iter()
            .flatten()
            .collect(),
    };
    if schedulers.is_empty() {
        return Err(usage("--schedulers names no scheduler"));
    }
    let mut names: Vec<&str> = schedulers.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    if let Some(twice) = names.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(usage(format!("--schedulers names '{}' twice", twice[0])));
    }
    let workloads = if !args.run.is_empty() {
        vec![command_workload(&args.run)]
    } else if let Some(names) = &args.workloads {
        pick(names, |name| workload_named(suite, name))?
    } else {
        suite.workloads.clone()
    };
    if workloads.is_empty() {
        return Err(usage("--workloads names no workload"));
    }
    Ok((schedulers, workloads))
}

/// The items `names` (comma-separated) call, in that order.
fn pick<T>(names: &str, named: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>> {
    names
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(named)
        .collect::<Result<_, _>>()
        .map_err(usage)
}

/// What `installed` stands for: every sched_ext scheduler found beside
/// nest, on PATH or in the peers' directory but scx_nest (scx_bpfland,
/// scx_lavd, ...).
fn installed_peers() -> Vec<String> {
    let mut peers = process::programs_starting_with("scx_");
    peers.retain(|p| p != "scx_nest");
    peers
}

/// The scheduler of an installed peer program.
fn peer(program: &str) -> Scheduler {
    suite::scheduler_for_command(program, vec![program.to_string()])
}

/// The suite's schedulers, with every installed peer where its
/// `installed` entry stands.
fn suite_schedulers(suite: &Suite) -> Vec<Scheduler> {
    let mut schedulers = suite.schedulers.clone();
    if let Some(at) = suite.installed_at {
        let named = |p: &String| schedulers.iter().any(|s| &s.name == p);
        let peers: Vec<Scheduler> = installed_peers()
            .iter()
            .filter(|p| !named(p))
            .map(|p| peer(p))
            .collect();
        schedulers.splice(at.min(schedulers.len())..at.min(schedulers.len()), peers);
    }
    schedulers
}

/// A scheduler of the suite, a built-in one, or an installed `scx_*`
/// (`installed`: all of those).
fn schedulers_named(suite: &Suite, name: &str) -> Result<Vec<Scheduler>, String> {
    if let Some(s) = suite.schedulers.iter().find(|s| s.name == name) {
        return Ok(vec![s.clone()]);
    }
    if let Some(s) = suite::builtin_scheduler(name) {
        return Ok(vec![s]);
    }
    if name == INSTALLED {
        let peers = installed_peers();
        if peers.is_empty() {
            return Err(format!(
                "--schedulers installed: no sched_ext scheduler but scx_nest is installed \
                 (scx_* beside nest, on PATH or in {}: `scripts/peers.sh` builds \
                 scx_bpfland, scx_cosmos and scx_lavd there)",
                process::peers_dir().display()
            ));
        }
        return Ok(peers.iter().map(|p| peer(p)).collect());
    }
    if name.starts_with("scx_") && process::resolve(name).is_some() {
        return Ok(vec![peer(name)]);
    }
    let in_suite: Vec<&str> = suite.schedulers.iter().map(|s| s.name.as_str()).collect();
    Err(format!(
        "unknown scheduler '{name}': valid are the suite's ({}), the built-in ones ({}), \
         installed scx_* programs ({}) and `{INSTALLED}` for all of those",
        in_suite.join(", "),
        suite::valid_scheduler_names(),
        installed_peers().join(", ")
    ))
}

/// A workload of the suite or a built-in one.
fn workload_named(suite: &Suite, name: &str) -> Result<Workload, String> {
    if let Some(w) = suite.workloads.iter().find(|w| w.name == name) {
        return Ok(w.clone());
    }
    suite::builtin_workload(name).ok_or_else(|| {
        let in_suite: Vec<&str> = suite.workloads.iter().map(|w| w.name.as_str()).collect();
        format!(
            "unknown workload '{name}': valid are the suite's ({}) and the built-in ones ({})",
            in_suite.join(", "),
            suite::valid_workload_names()
        )
    })
}

/// The workload `nest bench -- CMD ARGS` runs: wall time of the command.
fn command_workload(command: &[String]) -> Workload {
    let program = &command[0];
    Workload {
        name: program.rsplit('/').next().unwrap_or(program).to_string(),
        command: command.to_vec(),
        metric: suite::Metric::wall_time(),
        optional: false,
        source: None,
        setup: Vec::new(),
        install: None,
    }
}

/// The source tree of every workload that has one, fetched if needed.
fn fetch_sources(workloads: &[Workload]) -> Result<()> {
    let mut packages: Vec<&str> = workloads
        .iter()
        .filter_map(|w| w.source.as_deref())
        .collect();
    packages.sort_unstable();
    packages.dedup();
    for package in packages {
        source::fetch(package)?;
    }
    Ok(())
}

/// Every program the bench will start exists (or it refuses to begin);
/// `./configure` is looked for in the workload's source tree.
fn check_programs(schedulers: &[Scheduler], workloads: &[Workload]) -> Result<()> {
    let sched_ext = schedulers.iter().filter(|s| !s.is_default());
    let commands = sched_ext
        .clone()
        .map(|s| (&s.name, &s.command, None))
        .chain(sched_ext.map(|s| (&s.name, &s.run_with, None)))
        .chain(workloads.iter().flat_map(|w| {
            let tree = w.source.as_deref().map(source::tree);
            [
                (&w.name, &w.command, tree.clone()),
                (&w.name, &w.setup, tree),
            ]
        }));
    for (name, command, tree) in commands {
        let Some(program) = command.first() else {
            continue;
        };
        if process::resolve_in(program, tree.as_deref()).is_none() {
            let place = match tree {
                Some(tree) if program.contains('/') => format!("in {}", tree.display()),
                _ => "beside nest or on PATH".to_string(),
            };
            return Err(usage(format!(
                "{name}: cannot find program '{program}' ({place})"
            )));
        }
    }
    Ok(())
}

/// Refuse, before changing anything, what cannot give sched_ext results.
fn preflight(schedulers: &[Scheduler]) -> Result<()> {
    if schedulers.iter().all(Scheduler::is_default) {
        return Ok(());
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let sysfs = Path::new(crate::run::SYSFS).exists();
    match sched::refusal(root, sysfs, &sched::status()) {
        Some(why) => anyhow::bail!("{why}"),
        None => Ok(()),
    }
}

/// The governors to run under, each as asked and what it needs here;
/// empty to leave the machine's alone.
fn governors(
    cpus: &Path,
    asked: &[String],
    notes: &mut Vec<String>,
) -> Result<Vec<(String, governor::Setting)>> {
    if asked.is_empty() {
        return Ok(Vec::new());
    }
    if !governor::cpufreq_present(cpus) {
        notes.push(format!(
            "no cpufreq on this machine: governors {} ignored",
            asked.join(",")
        ));
        return Ok(Vec::new());
    }
    let mut settings = Vec::new();
    for spec in asked {
        if settings.iter().any(|(s, _)| s == spec) {
            return Err(usage(format!("governor '{spec}' is named twice")));
        }
        let setting = governor::setting(cpus, spec).map_err(usage)?;
        notes.push(format!("governor {spec}: {}", setting.describe(cpus)));
        settings.push((spec.clone(), setting));
    }
    Ok(settings)
}

/// The baseline cell: `spec` (`SCHEDULER[/GOVERNOR]`), or the first
/// scheduler under schedutil if it is run, else under the first governor.
fn baseline(
    spec: Option<&str>,
    schedulers: &[Scheduler],
    governors: &[String],
) -> Result<Baseline> {
    let (scheduler, governor) = match spec.map(|s| s.split_once('/').unwrap_or((s, ""))) {
        Some((scheduler, governor)) => (scheduler.to_string(), governor.to_string()),
        None => (schedulers[0].name.clone(), String::new()),
    };
    if !schedulers.iter().any(|s| s.name == scheduler) {
        let names: Vec<&str> = schedulers.iter().map(|s| s.name.as_str()).collect();
        return Err(usage(format!(
            "baseline '{scheduler}' is not one of the schedulers run ({})",
            names.join(", ")
        )));
    }
    let governor = if governors.is_empty() {
        None
    } else if governor.is_empty() {
        let schedutil = governors
            .iter()
            .find(|g| g.split('@').next() == Some("schedutil"));
        Some(schedutil.unwrap_or(&governors[0]).clone())
    } else if governors.contains(&governor) {
        Some(governor)
    } else {
        return Err(usage(format!(
            "baseline governor '{governor}' is not one of the governors run ({})",
            governors.join(", ")
        )));
    };
    Ok(Baseline {
        scheduler,
        governor,
    })
}

/// The RAPL domains that measure each run's energy; a note if their
/// counters cannot be read (then no run has an energy).
fn rapl(notes: &mut Vec<String>) -> energy::Rapl {
    let rapl = energy::Rapl::find(Path::new(energy::POWERCAP));
    if let Err(err) = rapl.read() {
        notes.push(format!("energy not measured: {err:#}"));
    }
    rapl
}

/// Every workload under every scheduler (under every governor), workload
/// by workload: the first scheduler's cell first, as the baseline.
fn cells(workloads: &[Workload], schedulers: &[Scheduler], governors: &[String]) -> Vec<Cell> {
    let governors: Vec<Option<String>> = if governors.is_empty() {
        vec![None]
    } else {
        governors.iter().cloned().map(Some).collect()
    };
    let mut cells = Vec::new();
    for workload in workloads {
        for governor in &governors {
            for scheduler in schedulers {
                cells.push(Cell {
                    workload: workload.clone(),
                    scheduler: scheduler.clone(),
                    governor: governor.clone(),
                });
            }
        }
    }
    cells
}

fn bench(
    args: &BenchArgs,
    results: Results,
    rapl: energy::Rapl,
    settings: Vec<(String, governor::Setting)>,
    trace: bool,
) -> Result<ExitCode> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let options = exec::Options {
        out: args.out.clone(),
        timeout: Duration::from_secs_f64(results.method.timeout_s),
        attach_timeout: args.attach_timeout,
    };
    let m = &results.method;
    let plan = plan::interleaved(
        results.cells.len(),
        plan::Rounds {
            warmup: m.warmup,
            runs: m.runs,
            power_runs: m.power_runs,
            traced: trace,
        },
    );
    let cpus = &args.cpufreq_root;
    let governors = if settings.is_empty() {
        None
    } else {
        let before = governor::describe(cpus);
        eprintln!("nest bench: cpufreq before: {before}");
        Some((governor::Governors::save(cpus, settings)?, before))
    };
    let (governors, before) = governors.unzip();
    let mut bench = exec::Bench {
        options: &options,
        results,
        stop: exec::stop_flag()?,
        rapl,
        governors,
    };
    let outcome = bench.run(&plan);
    // Governors go back before the reports are written.
    if bench.governors.take().is_some() {
        let after = governor::describe(cpus);
        eprintln!("nest bench: cpufreq after: {after}");
        let before = before.unwrap_or_default();
        bench
            .results
            .notes
            .push(format!("cpufreq before: {before}"));
        bench.results.notes.push(format!("cpufreq after: {after}"));
        if after != before {
            bench
                .results
                .notes
                .push("cpufreq NOT restored as it was: see above".into());
        }
    }
    let results = bench.results;
    write_all(&results, &args.out)?;
    print!("{}", report::text(&results));
    eprintln!("nest bench: results in {}", args.out.display());
    outcome?;
    Ok(if results.interrupted {
        eprintln!("nest bench: interrupted; the runs finished so far are kept");
        ExitCode::from(130)
    } else if results
        .runs
        .iter()
        .any(|r| r.status == results::Status::Failed)
    {
        crate::check_failed()
    } else {
        ExitCode::SUCCESS
    })
}

/// results.json and results.csv (after every run).
fn write_data(results: &Results, out: &Path) -> Result<()> {
    let write = |name: &str, text: String| {
        std::fs::write(out.join(name), text)
            .with_context(|| format!("cannot write {}", out.join(name).display()))
    };
    write("results.json", results.to_json())?;
    write("results.csv", results.to_csv())
}

/// Everything, at the end: the data, report.html and the figures as PNG
/// in figures/ (a figure that cannot be drawn loses nothing else).
fn write_all(results: &Results, out: &Path) -> Result<()> {
    write_data(results, out)?;
    std::fs::write(out.join("report.html"), report::html(results))
        .with_context(|| format!("cannot write {}", out.join("report.html").display()))?;
    if let Err(err) = report::write_pngs(results, &out.join("figures")) {
        eprintln!("nest bench: figures not drawn as PNG: {err:#}");
    }
    Ok(())
}

fn list() -> String {
    let mut s = String::from("suites:\n");
    for (name, _) in suite::BUILTIN_SUITES {
        s.push_str(&format!("  {name}\n"));
    }
    let (schedulers, workloads) = suite::builtins();
    for (title, items) in [("workloads", workloads), ("schedulers", schedulers)] {
        s.push_str(&format!("{title}:\n"));
        for [name, about, how] in items {
            s.push_str(&format!("  {name:<16} {about}\n"));
            if !how.is_empty() {
                s.push_str(&format!("  {:<16} {how}\n", ""));
            }
        }
    }
    let peers = installed_peers();
    s.push_str(&format!(
        "installed sched_ext schedulers (--schedulers NAME, or `{INSTALLED}` for all; \
         `scripts/peers.sh` builds scx_bpfland, scx_cosmos and scx_lavd into {}):\n",
        process::peers_dir().display()
    ));
    if peers.is_empty() {
        s.push_str("  none but scx_nest\n");
    }
    for peer in peers {
        let path = process::resolve(&peer).unwrap_or_default();
        s.push_str(&format!("  {peer:<16} {}\n", path.display()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Test {
        #[command(flatten)]
        args: BenchArgs,
    }

    fn parse(argv: &[&str]) -> BenchArgs {
        Test::try_parse_from(std::iter::once("bench").chain(argv.iter().copied()))
            .unwrap()
            .args
    }

    /// The suite's schedulers and workloads the arguments choose.
    fn chosen(args: &BenchArgs) -> Result<(Vec<Scheduler>, Vec<Workload>)> {
        let suite = suite::load(&args.suite).map_err(usage)?;
        choose(args, &suite)
    }

    fn exit_code(err: anyhow::Error) -> i32 {
        err.downcast_ref::<clap::Error>()
            .map_or(1, |e| e.exit_code())
    }

    #[test]
    fn the_quick_suite_makes_four_cells_baseline_first() {
        let (schedulers, workloads) = chosen(&parse(&["--suite", "quick"])).unwrap();
        let cells = cells(&workloads, &schedulers, &[]);
        let ids: Vec<String> = cells.iter().map(Cell::id).collect();
        assert_eq!(
            ids,
            [
                "chain / default",
                "chain / scx_nest",
                "pipe / default",
                "pipe / scx_nest"
            ]
        );
    }

    #[test]
    fn a_builtin_workload_can_be_asked_for_outside_the_suite() {
        let (_, workloads) = chosen(&parse(&[
            "--suite",
            "quick",
            "--workloads",
            "pipe,make-hello",
        ]))
        .unwrap();
        assert_eq!(workloads[0].command[3], "0.5", "the quick suite's pipe");
        assert_eq!(workloads[1].source.as_deref(), Some("hello"));
        assert_eq!(workloads[1].setup, ["./configure"]);
    }

    #[test]
    fn unknown_names_are_usage_errors_listing_the_valid_ones() {
        let err = chosen(&parse(&["--suite", "quick", "--workloads", "chain,pipes"])).unwrap_err();
        assert!(
            err.to_string()
                .contains("unknown workload 'pipes': valid are the suite's (chain, pipe)"),
            "{err}"
        );
        assert_eq!(exit_code(err), 2);
        let err = chosen(&parse(&[
            "--suite",
            "quick",
            "--schedulers",
            "default,scx_nsst",
        ]))
        .unwrap_err();
        assert!(
            err.to_string().contains("unknown scheduler 'scx_nsst'"),
            "{err}"
        );
        assert!(err.to_string().contains("(default, scx_nest)"), "{err}");
        assert_eq!(exit_code(err), 2);
    }

    #[test]
    fn a_suite_file_with_a_typo_is_a_usage_error_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        std::fs::write(
            &path,
            "[[scheduler]]\nname = \"default\"\n[[workload]]\nnmae = \"chain\"\n",
        )
        .unwrap();
        let err = chosen(&parse(&["--suite", path.to_str().unwrap()])).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&format!("{}:4: unknown field `nmae`", path.display())),
            "{text}"
        );
        assert_eq!(exit_code(err), 2);
    }

    #[test]
    fn a_command_after_the_dashes_is_the_only_workload() {
        let args = parse(&["--suite", "quick", "--", "make", "-j8"]);
        let (_, workloads) = chosen(&args).unwrap();
        assert_eq!(workloads.len(), 1);
        assert_eq!(workloads[0].name, "make");
        assert_eq!(workloads[0].command, ["make", "-j8"]);
    }

    #[test]
    fn compare_is_a_subcommand_and_durations_need_units() {
        let both = Test::try_parse_from(["bench", "--workloads", "chain", "--", "true"]);
        assert_eq!(both.unwrap_err().exit_code(), 2);
        let args = parse(&["compare", "a.json", "b.json"]);
        assert!(matches!(args.command, Some(BenchCommand::Compare { .. })));
        let bare = Test::try_parse_from(["bench", "--timeout", "300"]);
        assert_eq!(bare.unwrap_err().exit_code(), 2);
        let zero = Test::try_parse_from(["bench", "--runs", "0"]);
        assert_eq!(zero.unwrap_err().exit_code(), 2);
    }

    #[test]
    fn the_baseline_is_the_first_scheduler_under_schedutil_unless_asked() {
        let (schedulers, _) = chosen(&parse(&["--suite", "quick"])).unwrap();
        let governors = |g: &[&str]| g.iter().map(|g| g.to_string()).collect::<Vec<_>>();
        let id = |spec, g: &[&str]| baseline(spec, &schedulers, &governors(g)).map(|b| b.id());
        assert_eq!(
            id(None, &["performance", "schedutil"]).unwrap(),
            "default / schedutil"
        );
        assert_eq!(
            id(None, &["performance", "schedutil@passive"]).unwrap(),
            "default / schedutil@passive"
        );
        assert_eq!(id(None, &["performance"]).unwrap(), "default / performance");
        assert_eq!(id(Some("scx_nest"), &[]).unwrap(), "scx_nest");
        assert_eq!(
            id(Some("scx_nest/performance"), &["schedutil", "performance"]).unwrap(),
            "scx_nest / performance"
        );
        let err = id(Some("default/ondemand"), &["schedutil"]).unwrap_err();
        assert!(
            err.to_string()
                .contains("baseline governor 'ondemand' is not one of"),
            "{err}"
        );
        assert_eq!(exit_code(err), 2);
        // The paper suite's baseline gives way when --schedulers leaves
        // its scheduler out, unless it was asked for.
        let args = parse(&["--suite", "paper", "--schedulers", "scx_nest,smove"]);
        let (schedulers, _) = chosen(&args).unwrap();
        let suite = suite::load("paper").unwrap();
        assert_eq!(Resolved::of(&args, &suite).baseline_spec(&schedulers), None);
        let args = parse(&["--suite", "paper", "--schedulers", "smove,default"]);
        let (schedulers, _) = chosen(&args).unwrap();
        let spec = Resolved::of(&args, &suite)
            .baseline_spec(&schedulers)
            .map(String::from);
        assert_eq!(spec.as_deref(), Some("default/schedutil"));
    }

    #[test]
    fn governors_multiply_the_cells() {
        let (schedulers, workloads) = chosen(&parse(&["--suite", "quick"])).unwrap();
        let governors = ["performance".to_string(), "schedutil".to_string()];
        let cells = cells(&workloads[..1], &schedulers, &governors);
        let ids: Vec<String> = cells.iter().map(Cell::id).collect();
        assert_eq!(
            ids,
            [
                "chain / default / performance",
                "chain / scx_nest / performance",
                "chain / default / schedutil",
                "chain / scx_nest / schedutil"
            ]
        );
    }
}
