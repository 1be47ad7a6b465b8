//! `nest bench --dry-run`: the whole plan (cells, runs, governors and the
//! driver mode each needs) and what this machine lacks for it, with how
//! to get it; nothing is run, fetched or changed.

use std::fmt::Write as _;
use std::path::Path;

use super::exec::{expand, online_cpus};
use super::governor;
use super::suite::{Scheduler, Workload};
use super::{BenchArgs, Resolved, process, sched};
use crate::source;

/// The plan as text.
pub fn plan(
    args: &BenchArgs,
    method: &Resolved,
    schedulers: &[Scheduler],
    workloads: &[Workload],
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "nest bench --suite {}: dry run (nothing is run, fetched or changed)",
        args.suite
    );
    let cpus = &args.cpufreq_root;
    let (governor_lines, specs) = governors(cpus, &method.governors);
    let rapl = super::energy::Rapl::find(Path::new(super::energy::POWERCAP));
    s.push_str(&method_text(method, schedulers, &rapl));
    s.push_str("\nschedulers:\n");
    s.push_str(&schedulers_text(schedulers));
    s.push_str("\ngovernors:\n");
    s.push_str(&governor_lines);
    s.push_str("\nworkloads (on this machine's CPUs):\n");
    let (workload_lines, missing) = workloads_text(workloads);
    s.push_str(&workload_lines);
    let measured = if rapl.measures() {
        method.power_runs.max(method.runs)
    } else {
        method.runs
    };
    let per_cell = method.warmup + measured + usize::from(method.trace);
    s.push_str(&cells_text(schedulers, workloads, &specs, per_cell));
    if specs.len() < method.governors.len() {
        let _ = writeln!(
            s,
            "(on a machine with cpufreq, every cell above runs under each of the {} governors: \
             {} cells)",
            method.governors.len(),
            super::cells(workloads, schedulers, &method.governors).len()
        );
    }
    if missing > 0 {
        let _ = writeln!(
            s,
            "\n{missing} workload(s) cannot run here yet: see MISSING above for how to get them"
        );
    }
    s
}

fn method_text(method: &Resolved, schedulers: &[Scheduler], rapl: &super::energy::Rapl) -> String {
    let mut s = String::new();
    let baseline = super::baseline(
        method.baseline_spec(schedulers),
        schedulers,
        &method.governors,
    )
    .map_or_else(|err| format!("INVALID: {err}"), |b| b.id());
    let _ = writeln!(
        s,
        "method: {} warm-up + {} measured runs per cell, in interleaved rounds (every cell once \
         per round, in the order below)",
        method.warmup, method.runs
    );
    let here = if rapl.measures() {
        format!("here: RAPL {}", rapl.names().join(", "))
    } else {
        "here: no readable RAPL, so no energy and no power runs".to_string()
    };
    let _ = writeln!(
        s,
        "energy: RAPL package energy of every run; {} measured runs per cell for it ({here})",
        method.power_runs.max(method.runs)
    );
    let center = method.center.name();
    let _ = writeln!(
        s,
        "improvement: each cell's {center} over the baseline {baseline}'s, in % (0 = same, + = \
         better); error bar: the sample standard deviation of each run's improvement over the \
         baseline's {center}"
    );
    if method.trace {
        let _ = writeln!(
            s,
            "traced: one more run of each cell under `nest trace record` (not measured)"
        );
    }
    s
}

/// Each scheduler's command, or that it is missing and how to get it.
fn schedulers_text(schedulers: &[Scheduler]) -> String {
    let mut s = String::new();
    for scheduler in schedulers {
        let Some(program) = scheduler.command.first() else {
            let _ = writeln!(s, "  {:<16} the kernel's own scheduler", scheduler.name);
            continue;
        };
        let line = match process::resolve(program) {
            Some(path) => format!("$ {} {}", path.display(), scheduler.command[1..].join(" ")),
            None => format!("MISSING: {program} ({})", scheduler_hint(program)),
        };
        let _ = writeln!(s, "  {:<16} {}", scheduler.name, line.trim_end());
    }
    let status = sched::status();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let sysfs = Path::new(crate::run::SYSFS).exists();
    if schedulers.iter().any(|s| !s.is_default())
        && let Some(why) = sched::refusal(root, sysfs, &status)
    {
        let _ = writeln!(s, "  here the sched_ext cells would be refused: {why}");
    }
    s
}

fn scheduler_hint(program: &str) -> String {
    if program == "scx_nest" {
        "build it beside nest: `cargo build --release -p scx_nest`".into()
    } else if program.starts_with("scx_") {
        format!(
            "`scripts/peers.sh {program}` installs it from crates.io into {}",
            process::peers_dir().display()
        )
    } else {
        "install it or give its path".into()
    }
}

/// Each governor's needs on this machine (or on the drivers that have
/// modes, where there is no cpufreq), and the governors the cells get.
fn governors(cpus: &Path, asked: &[String]) -> (String, Vec<String>) {
    let mut s = String::new();
    if asked.is_empty() {
        let _ = writeln!(
            s,
            "  none switched: the machine's own ({})",
            governor::describe(cpus)
        );
        return (s, Vec::new());
    }
    if !governor::cpufreq_present(cpus) {
        let _ = writeln!(
            s,
            "  here: no cpufreq, so {} are ignored and the cells have no governor",
            asked.join(", ")
        );
        let _ = writeln!(
            s,
            "  on a machine with cpufreq: schedutil, ondemand and the other generic governors \
             need intel_pstate or amd-pstate in passive mode (amd-pstate: or guided), \
             performance and powersave are the drivers' own in active mode; nest bench \
             switches the mode for their runs and restores it, with every CPU's governor, \
             limits and energy-performance preference, at the end (also after a failure or \
             Ctrl-C); other drivers have no modes"
        );
        return (s, Vec::new());
    }
    let (_, mode_now) = governor::driver(cpus);
    let _ = writeln!(s, "  now: {}", governor::describe(cpus));
    let mut specs = Vec::new();
    for spec in asked {
        match governor::setting(cpus, spec) {
            Ok(setting) => {
                let switch = match (&setting.mode, &mode_now) {
                    (Some(m), Some(now)) if m != now => {
                        format!(": switched from {now} for its runs, restored after")
                    }
                    (Some(_), Some(_)) => ": the driver's mode as it is".into(),
                    _ => String::new(),
                };
                let _ = writeln!(s, "  {:<16} {}{switch}", spec, setting.describe(cpus));
                specs.push(spec.clone());
            }
            Err(err) => {
                let _ = writeln!(s, "  {spec:<16} INVALID: {err}");
            }
        }
    }
    (s, specs)
}

/// Each workload's command and whether it can run here; and how many
/// cannot.
fn workloads_text(workloads: &[Workload]) -> (String, usize) {
    let mut s = String::new();
    let mut missing = 0;
    let cpus = online_cpus();
    for w in workloads {
        let mut problems = Vec::new();
        if let Some(package) = &w.source
            && !source::is_cached(package)
        {
            problems.push(format!(
                "the Debian source {package} is not in {}: `nest bench fetch {package}` \
                 (needs the network; a guest sees the host's cache)",
                source::tree(package).display()
            ));
        }
        for command in [&w.command, &w.setup] {
            let Some(program) = command.first() else {
                continue;
            };
            let in_tree = program.contains('/') && w.source.is_some();
            if !in_tree && process::resolve(program).is_none() {
                let how = w
                    .install
                    .clone()
                    .unwrap_or_else(|| format!("install {program}"));
                problems.push(format!("{program} is not installed: {how}"));
            }
        }
        let mut line = format!("  {:<20} $ {}", w.name, expand(&w.command, cpus).join(" "));
        if !w.setup.is_empty() {
            let _ = write!(
                line,
                "  (after an untimed `{}`)",
                expand(&w.setup, cpus).join(" ")
            );
        }
        if let Some(package) = &w.source {
            let _ = write!(line, "  in a fresh copy of Debian's {package} source");
        }
        let metric = match &w.metric.after {
            Some(after) => format!("the number after '{after}'"),
            None => "wall time".into(),
        };
        let better = if w.metric.higher_is_better {
            "higher"
        } else {
            "lower"
        };
        let _ = writeln!(
            s,
            "{line}\n  {:<20} metric: {metric}, {} ({better} is better)",
            "", w.metric.unit
        );
        for problem in &problems {
            let skipped = if w.optional {
                " (optional: skipped)"
            } else {
                ""
            };
            let _ = writeln!(s, "  {:<20} MISSING{skipped}: {problem}", "");
        }
        missing += usize::from(!problems.is_empty());
    }
    (s, missing)
}

fn cells_text(
    schedulers: &[Scheduler],
    workloads: &[Workload],
    specs: &[String],
    per_cell: usize,
) -> String {
    let cells = super::cells(workloads, schedulers, specs);
    let mut s = format!(
        "\ncells: {} = {} workload(s) x {} scheduler(s){}; {} runs in all ({per_cell} per cell)\n\
         one round (each round runs every cell once, in this order):\n",
        cells.len(),
        workloads.len(),
        schedulers.len(),
        if specs.is_empty() {
            String::new()
        } else {
            format!(" x {} governor(s)", specs.len())
        },
        cells.len() * per_cell,
    );
    for (i, cell) in cells.iter().enumerate() {
        let _ = writeln!(s, "  {:>4}. {}", i + 1, cell.id());
    }
    s
}
