//! The `nest sim` command: run workloads on machine models under several
//! policies and governors, over several seeds, and compare them with the
//! first configuration (the baseline).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Parser;
use nest_policy::{Mechanism, Params, PerfMode, parse_duration_ns};

use crate::engine::SimConfig;
use crate::governor::Governor;
use crate::machine::Machine;
use crate::policy::Policy;
use crate::policy::baseline::Baseline;
use crate::policy::nest::Nest;
use crate::policy::smove::{SLocal, SMove};
use crate::results::{self, Comparison, RunResult};
use crate::workload::{Workload, builtin, rtapp};

/// Simulate placement policies on modelled DVFS hardware.
///
/// With no arguments: compares the default Linux placement and Nest under
/// the powersave, performance and schedutil governors, on a configure-like
/// workload on a 2-socket Xeon Gold 5218 model, over 5 seeds. Improvements
/// are relative to the first policy with the first governor (0 = same,
/// positive = better).
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

    /// Policies to compare (linux, nest, nest-nospin, s-local, s-move); the
    /// first is the baseline.
    #[arg(short, long, value_delimiter = ',', default_value = "linux,nest")]
    pub policies: Vec<String>,

    /// Governors (powersave, performance, schedutil, schedutil-hint); the first is the
    /// baseline's.
    #[arg(
        short,
        long,
        value_delimiter = ',',
        default_value = "powersave,performance,schedutil"
    )]
    pub governors: Vec<String>,

    /// Number of seeds (runs per configuration).
    #[arg(short, long, default_value_t = 5)]
    pub seeds: u64,

    /// First seed.
    #[arg(long, default_value_t = 1)]
    pub seed_base: u64,

    /// Nest: idle time before a primary CPU is demoted (e.g. 8ms, 2ticks).
    #[arg(long, default_value = "2ticks")]
    pub p_remove: String,

    /// Nest: reserve nest capacity.
    #[arg(long, default_value_t = 5)]
    pub r_max: u32,

    /// Nest: previous-CPU misses before a task is impatient.
    #[arg(long, default_value_t = 2)]
    pub r_impatient: u32,

    /// Nest: longest warm spin of an idle primary CPU.
    #[arg(long, default_value = "2ticks")]
    pub s_max: String,

    /// Nest ablations: mechanisms to switch off (attach, reserve,
    /// impatience, compaction, exit-demotion, wide-fallback, warm-spin,
    /// whole-cores).
    #[arg(long, value_delimiter = ',')]
    pub disable: Vec<String>,

    /// Nest under schedutil: frequency requests, as scx_nest --perf: util
    /// (each CPU asks for its utilisation), nest (primary-nest CPUs ask
    /// for the maximum), max (no requests: every CPU at full speed, the
    /// kernel's default with a sched_ext scheduler).
    #[arg(long, default_value = "util", value_parser = PerfMode::parse)]
    pub perf: PerfMode,

    /// S_move: delay before a task still queued on the waker's CPU moves.
    #[arg(long, default_value = "50us")]
    pub smove_delay: String,

    /// Scheduler tick frequency (Hz).
    #[arg(long, default_value_t = 250)]
    pub tick_hz: u32,

    /// Turn off the kernel's periodic and newly-idle load balancing.
    #[arg(long)]
    pub no_load_balance: bool,

    /// Output format on stdout.
    #[arg(short, long, default_value = "table", value_parser = ["table", "csv", "json"])]
    pub format: String,

    /// Also write the per-run CSV to this file.
    #[arg(long)]
    pub csv: Option<PathBuf>,

    /// Also write per-task run/wait times (CSV) to this file.
    #[arg(long)]
    pub tasks_csv: Option<PathBuf>,

    /// Also write CPUs/sockets used, concurrency and underload per tick
    /// (CSV) to this file.
    #[arg(long)]
    pub timeline_csv: Option<PathBuf>,

    /// Write each run's schedule (nest-trace model, JSON) into this
    /// directory as POLICY-GOVERNOR-SEED.json.
    #[arg(long)]
    pub trace_dir: Option<PathBuf>,

    /// Run every built-in machine with every built-in workload family and
    /// print one summary table (--machine and --workload are ignored).
    #[arg(long)]
    pub sweep: bool,

    /// List built-in machines and workloads, then exit.
    #[arg(long)]
    pub list: bool,

    /// No progress on stderr.
    #[arg(short, long)]
    pub quiet: bool,
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

/// Nest's parameters from the command line.
fn nest_params(args: &SimArgs) -> Result<Params> {
    let dur =
        |what: &str, s: &str| parse_duration_ns(s).map_err(|e| anyhow::anyhow!("--{what}: {e}"));
    let mut params = Params {
        p_remove_ns: dur("p-remove", &args.p_remove)?,
        s_max_ns: dur("s-max", &args.s_max)?,
        r_max: args.r_max,
        r_impatient: args.r_impatient,
        disabled: Vec::new(),
        smove_delay_ns: dur("smove-delay", &args.smove_delay)?,
        perf: args.perf,
        ..Params::default()
    };
    for d in &args.disable {
        match Mechanism::from_name(d) {
            Some(m) => params.disabled.push(m),
            None => bail!("--disable: unknown mechanism `{d}`"),
        }
    }
    Ok(params)
}

/// Builds the named policy for `machine`.
fn make_policy(name: &str, args: &SimArgs, machine: &Machine) -> Result<Box<dyn Policy>> {
    Ok(match name {
        "linux" | "baseline" | "cfs" => Box::new(Baseline),
        "nest" | "nest-nospin" => {
            let mut params = nest_params(args)?;
            if name == "nest-nospin" {
                params.disabled.push(Mechanism::WarmSpin);
            }
            Box::new(Nest::new(&machine.topology(), params)?)
        }
        "s-local" => Box::new(SLocal::new(&machine.topology())?),
        "s-move" => {
            let d = parse_duration_ns(&args.smove_delay)
                .map_err(|e| anyhow::anyhow!("--smove-delay: {e}"))?;
            Box::new(SMove::new(&machine.topology(), d)?)
        }
        _ => bail!("unknown policy `{name}`: expected linux, nest, nest-nospin, s-local or s-move"),
    })
}

fn list() {
    println!("machines:");
    for n in Machine::builtin_names() {
        if let Ok(m) = Machine::builtin(n) {
            println!("  {n:<20} {}", m.description);
        }
    }
    println!("workloads (or an rt-app JSON file):");
    for f in builtin::FAMILIES {
        println!("  {f}");
    }
}

/// Runs the `nest sim` command.
pub fn run(args: SimArgs) -> Result<()> {
    if args.list {
        list();
        return Ok(());
    }
    let machine = Machine::load(&args.machine)?;
    let workload = load_workload(&args.workload, &machine)?;
    let governors = args
        .governors
        .iter()
        .map(|g| Governor::parse(g).with_context(|| format!("unknown governor `{g}`")))
        .collect::<Result<Vec<_>>>()?;
    if args.seeds == 0 || args.policies.is_empty() || governors.is_empty() {
        bail!("need at least one seed, policy and governor");
    }
    if args.sweep {
        return sweep(&args, &governors);
    }
    let configs = run_all(&args, &machine, &workload, &governors)?;
    let cmps = results::compare(configs);
    print_results(&args, &machine, &workload, &cmps)
}

type Config = (String, String, Vec<RunResult>);

/// Every built-in machine with every built-in workload family, in one
/// table: improvements are against the first policy and governor of the
/// same machine and workload.
fn sweep(args: &SimArgs, governors: &[Governor]) -> Result<()> {
    if args.format != "table" || args.csv.is_some() || args.tasks_csv.is_some() {
        bail!(
            "--sweep prints one table; for CSV or JSON run one --machine and --workload at a time"
        );
    }
    let mut rows = Vec::new();
    for name in Machine::builtin_names() {
        let machine = Machine::builtin(name)?;
        for family in builtin::FAMILIES {
            let workload = builtin::build(family, machine.nr_cores())?;
            let cmps = results::compare(run_all(args, &machine, &workload, governors)?);
            rows.push((name, family, cmps));
        }
    }
    println!(
        "{} seed(s); improvements vs {} {} on the same machine and workload (0 = same, + = better)\n",
        args.seeds, args.policies[0], args.governors[0]
    );
    print!("{}", results::sweep_table(&rows));
    Ok(())
}

fn run_all(
    args: &SimArgs,
    machine: &Machine,
    workload: &Workload,
    governors: &[Governor],
) -> Result<Vec<Config>> {
    let total = args.policies.len() * governors.len() * args.seeds as usize;
    let mut progress = Progress::new(total, args.quiet);
    let mut configs = Vec::new();
    for p in &args.policies {
        for &g in governors {
            let mut runs = Vec::new();
            for seed in args.seed_base..args.seed_base + args.seeds {
                let mut policy = make_policy(p, args, machine)?;
                let mut cfg = SimConfig::new(machine.clone(), g, seed);
                cfg.tick_hz = args.tick_hz;
                cfg.load_balance = !args.no_load_balance;
                cfg.record_trace = args.trace_dir.is_some();
                cfg.progress = !args.quiet && std::io::stderr().is_terminal();
                let start = Instant::now();
                let mut r = crate::run(cfg, workload, policy.as_mut())?;
                if r.deadlocked {
                    eprintln!(
                        "warning: {p} {} seed {seed}: every remaining task waits forever (deadlock) at {:.3} ms",
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
            configs.push((policy_label(p), g.name().to_owned(), runs));
        }
    }
    progress.finish();
    Ok(configs)
}

fn policy_label(p: &str) -> String {
    if p == "baseline" || p == "cfs" {
        "linux".into()
    } else {
        p.to_owned()
    }
}

fn write_trace(dir: &std::path::Path, r: &mut RunResult) -> Result<()> {
    let Some(trace) = r.trace.take() else {
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("{}-{}-{}.trace", r.policy, r.governor, r.seed));
    nest_trace::format::save(&trace, &path)
}

fn print_results(
    args: &SimArgs,
    machine: &Machine,
    workload: &Workload,
    cmps: &[Comparison],
) -> Result<()> {
    let csv = results::csv(cmps);
    let write = |path: &Option<PathBuf>, text: &dyn Fn() -> String| -> Result<()> {
        match path {
            Some(p) => {
                std::fs::write(p, text()).with_context(|| format!("writing {}", p.display()))
            }
            None => Ok(()),
        }
    };
    write(&args.csv, &|| csv.clone())?;
    write(&args.tasks_csv, &|| results::tasks_csv(cmps))?;
    let tick_ns = 1_000_000_000 / u64::from(args.tick_hz.max(1));
    write(&args.timeline_csv, &|| results::timeline_csv(cmps, tick_ns))?;
    let mut out = std::io::stdout().lock();
    match args.format.as_str() {
        "csv" => write!(out, "{csv}")?,
        "json" => serde_json::to_writer_pretty(&mut out, cmps)?,
        _ => {
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
                "\n>=nom: busy time at or above nominal; cpus: CPUs used per tick; under: underload \
                 (CPUs used - tasks running at once); migr: migrations; wait: total run-queue wait."
            )?;
        }
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
