//! `nest validate`: the simulator's Linux model against real kernels.
//!
//! For each kernel generation (Debian's sched_ext kernel for `linux-7`,
//! Debian 11's for `linux-5.10`), boots the 2x4x2 NUMA guest and records
//! each workload with `nest trace record` under the kernel's default
//! scheduler; replays every recorded command in the simulator on the
//! guest's model (`test-guest-2s`) under the Linux model of the same
//! generation; and prints the recorded command's placement in both, side
//! by side, with whether each figure agrees within its band ([`BANDS`]).
//! Exits non-zero when a figure leaves its band.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use nest_policy::duration_within;
use nest_sim::policy::baseline::Baseline;
use nest_sim::policy::fork_balance::LinuxVersion;
use nest_sim::workload::{replay, rtapp};
use nest_sim::{Governor, Machine, SimConfig};
use nest_trace::Trace;
use nest_trace::metrics::{IntervalStats, TasksPlacement, interval_stats, tree_placement_in};
use nest_trace::svg;
use nest_trace::table::{Cell as TableCell, Table, escape};
use nest_trace::timeline::Timeline;
use nest_vm::{VmSpec, shell_quote};

use crate::source;
use crate::vm::ensure_kernel;

/// The simulator's model of the guest (2 sockets x 4 cores x 2 threads).
const GUEST_MACHINE: &str = "test-guest-2s";

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Kernel generations to compare with their models.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "linux-7,linux-5.10"
    )]
    kernels: Vec<LinuxVersion>,
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
    fn record_command(self, bin: &Path, trace: &Path) -> String {
        let nest = shell_quote(&bin.join("nest").to_string_lossy());
        let trace = shell_quote(&trace.to_string_lossy());
        let load = shell_quote(&bin.join("nest-load").to_string_lossy());
        let record = |buffer_kb: u32, command: &str| {
            format!("{nest} trace record --buffer-kb {buffer_kb} --out {trace} -- {command} >&2")
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

fn trace_path(out: &Path, version: LinuxVersion, workload: Workload) -> PathBuf {
    out.join(format!(
        "{}-{}.nest.jsonl",
        value_name(version),
        value_name(workload)
    ))
}

/// One figure of the recorded command's placement.
struct Figure {
    name: &'static str,
    value: fn(&TasksPlacement) -> Option<f64>,
    /// Largest difference, real vs simulated, that counts as agreement.
    band: f64,
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
const BANDS: [Figure; 5] = [
    Figure {
        name: "CPUs / 100 ms",
        value: |p| Some(p.mean_cpus),
        band: 1.0,
    },
    Figure {
        name: "sockets / 100 ms",
        value: |p| Some(p.mean_sockets),
        band: 0.35,
    },
    Figure {
        name: "forks to another socket",
        value: |p| share(p.forks.other_socket, p.forks.total()),
        band: 0.25,
    },
    Figure {
        name: "forks to the parent's LLC",
        value: |p| {
            share(
                p.forks.same_cpu + p.forks.same_core + p.forks.same_llc,
                p.forks.total(),
            )
        },
        band: 0.25,
    },
    Figure {
        name: "wakeups on the previous CPU",
        value: |p| share(p.wakeups_on_prev_cpu, p.wakeups),
        band: 0.25,
    },
];

pub fn run(args: ValidateArgs) -> Result<ExitCode> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let out = nest_vm::output_dir(&args.out)?;
    if !args.from_traces {
        for &version in &args.kernels {
            record_in_guest(&out, version, &args.workloads, args.timeout)?;
        }
    }
    let machine = Machine::builtin(GUEST_MACHINE)?;
    let mut rows = Vec::new();
    let mut pairs = Vec::new();
    for &version in &args.kernels {
        for &workload in &args.workloads {
            let path = trace_path(&out, version, workload);
            let real = nest_trace::input::load(&path).with_context(|| {
                format!(
                    "{}: no recorded trace (run without --from-traces)",
                    path.display()
                )
            })?;
            let simulated = simulate(&real, &machine, version)
                .with_context(|| format!("{}: cannot replay in the simulator", path.display()))?;
            let real = command_figures(&real, None)?;
            let simulated = command_figures(&simulated, Some(SIMULATED_ROOT))?;
            let title = format!("{} {}", value_name(version), value_name(workload));
            eprintln!("nest validate: {title}: root {}", real.root);
            rows.extend(compare(
                version,
                workload,
                &real.placement,
                &simulated.placement,
            ));
            pairs.push(Pair {
                title,
                real: real.intervals,
                simulated: simulated.intervals,
            });
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
        "nest validate: {} figures, {outside} outside their band; wrote figures.csv and \
         validate.html in {}",
        rows.len(),
        out.display()
    );
    Ok(if outside == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Boots the guest on `version`'s kernel and records every workload.
fn record_in_guest(
    out: &Path,
    version: LinuxVersion,
    workloads: &[Workload],
    timeout: Duration,
) -> Result<()> {
    let kernel_dir = ensure_kernel(false, version == LinuxVersion::Linux510)?;
    let bin = std::env::current_exe()
        .context("cannot find the nest binary")?
        .parent()
        .map(Path::to_path_buf)
        .context("the nest binary has no directory")?;
    if !bin.join("nest-load").is_file() {
        bail!(
            "{} has no nest-load: build it next to nest (cargo build -p nest-load, or --release for a release nest)",
            bin.display()
        );
    }
    if workloads.contains(&Workload::Configure) {
        // The guest has no network: fetch on the host, which it mounts.
        source::fetch(CONFIGURE_PACKAGE)?;
    }
    let script = workloads
        .iter()
        .map(|&w| {
            let record = w.record_command(&bin, &trace_path(out, version, w));
            format!("{record} || exit 1")
        })
        .collect::<Vec<_>>()
        .join("\n");
    let spec = VmSpec {
        numa: true,
        timeout,
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
        "nest validate: recording {} workload(s) under {} in the 2x4x2 guest",
        workloads.len(),
        value_name(version)
    );
    let outcome = nest_vm::run(&spec, &format!("set -u\n{script}"))?;
    if let Some(failure) = outcome.failure() {
        bail!(
            "the {} guest failed: {failure}\n{}",
            value_name(version),
            outcome.stderr
        );
    }
    Ok(())
}

/// Replays the recorded command of `real` on `machine` under the Linux
/// model of `version`; returns the simulated schedule.
fn simulate(real: &Trace, machine: &Machine, version: LinuxVersion) -> Result<Trace> {
    let workload = replay::replay(real, &Default::default())?;
    let workload = rtapp::parse(&workload.to_json_string(), "replay")?;
    let mut cfg = SimConfig::new(machine.clone(), Governor::Performance, 1);
    cfg.record_trace = true;
    cfg.linux = version;
    let result = nest_sim::run(cfg, &workload, &mut Baseline)?;
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
    kernel: String,
    workload: String,
    figure: &'static str,
    real: Option<f64>,
    simulated: Option<f64>,
    band: f64,
    /// None when either side has no value (e.g. no forks).
    agrees: Option<bool>,
}

fn compare(
    version: LinuxVersion,
    workload: Workload,
    real: &TasksPlacement,
    simulated: &TasksPlacement,
) -> Vec<Row> {
    BANDS
        .iter()
        .map(|f| {
            let (r, s) = ((f.value)(real), (f.value)(simulated));
            Row {
                kernel: value_name(version),
                workload: value_name(workload),
                figure: f.name,
                real: r,
                simulated: s,
                band: f.band,
                agrees: r.zip(s).map(|(r, s)| (r - s).abs() <= f.band),
            }
        })
        .collect()
}

fn verdict(row: &Row) -> &'static str {
    match row.agrees {
        Some(true) => "agrees",
        Some(false) => "OUTSIDE",
        None => "-",
    }
}

/// The rows as a table: printed, `figures.csv`, and in `validate.html`.
fn figures_table(rows: &[Row]) -> Table {
    let columns = [
        "kernel",
        "workload",
        "figure",
        "real",
        "simulated",
        "band",
        "verdict",
    ];
    let mut table = Table::new("validate", &columns);
    let number = |v: Option<f64>| v.map_or_else(|| TableCell::from("-"), TableCell::from);
    for r in rows {
        table.push(vec![
            r.kernel.clone().into(),
            r.workload.clone().into(),
            r.figure.into(),
            number(r.real),
            number(r.simulated),
            r.band.into(),
            verdict(r).into(),
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

/// `validate.html`: the table, then per kernel and workload the CPUs the
/// recorded command's tree used per 100 ms, real beside simulated.
fn html(table: &Table, pairs: &[Pair]) -> String {
    let mut s = format!(
        "<p>Real kernels in the 2x4x2 guest against the simulator's Linux model on \
         {GUEST_MACHINE}: the recorded command's tree over its lifetime, 100 ms \
         intervals. A figure agrees when real and simulated differ by at most its band.</p>\n"
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
            LinuxVersion::Linux7,
            Workload::Chain,
            &real,
            &placement(1.9, 40, 0),
        );
        assert_eq!(rows.len(), BANDS.len());
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
            LinuxVersion::Linux7,
            Workload::Chain,
            &real,
            &placement(1.9, 0, 40),
        );
        assert_eq!(verdict_of(&rows, "forks to another socket"), "OUTSIDE");
        assert_eq!(verdict_of(&rows, "forks to the parent's LLC"), "OUTSIDE");
        let table = figures_table(&rows);
        let csv = table.to_csv();
        assert!(csv.starts_with("kernel,workload,figure,real,simulated,band,verdict\n"));
        assert!(
            csv.contains("linux-7,chain,forks to another socket,0.975,0,0.25,OUTSIDE\n"),
            "{csv}"
        );
        let text = table.to_text();
        assert!(
            text.lines().any(|l| l.starts_with("linux-7")
                && l.ends_with("forks to another socket  0.975      0.000  0.250  OUTSIDE")),
            "{text}"
        );
        let page = html(&table, &[]);
        assert!(page.contains("<td>OUTSIDE</td>"), "{page}");
    }

    #[test]
    fn configure_is_recorded_in_a_fresh_copy_of_its_source_tree() {
        let command =
            Workload::Configure.record_command(Path::new("/b"), Path::new("/o/c.nest.jsonl"));
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
                "/b/nest trace record --buffer-kb 32768 --out /o/c.nest.jsonl -- ./configure >&2)"
            ),
            "{command}"
        );
        let chain = Workload::Chain.record_command(Path::new("/b"), Path::new("/o/t"));
        assert_eq!(
            chain,
            "/b/nest trace record --buffer-kb 8192 --out /o/t -- /b/nest-load churn --count 40 --work-us 20000 >&2"
        );
    }

    #[test]
    fn traces_are_named_by_kernel_and_workload() {
        let path = trace_path(Path::new("/o"), LinuxVersion::Linux510, Workload::Overload);
        assert_eq!(path, PathBuf::from("/o/linux-5.10-overload.nest.jsonl"));
    }
}
