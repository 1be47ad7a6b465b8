//! The `nest trace` command: record, import, report, compare, export and
//! print metrics of schedules. The `nest` binary embeds [`TraceArgs`] as a
//! subcommand and calls [`run`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use crate::format;
use crate::input;
use crate::metrics::FreqBands;
use crate::model::Trace;
use crate::perfetto;
use crate::record::{self, RecordOptions, Workload};
use crate::report::{self, ReportOptions};
use nest_policy::{duration_ns_within, duration_within, format_duration_ns, parse_duration_ns};
use nest_topology::read_sysfs_topology;

/// Record real schedules, measure placement and work conservation, draw
/// them, export them to Perfetto.
#[derive(Debug, Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    pub command: TraceCommand,
}

#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Record the machine's schedule with tracefs while a command runs (or
    /// for a duration). Needs root.
    Record(RecordArgs),
    /// Turn trace.dat, perf.data, or the text of tracefs, perf script or
    /// trace-cmd report into a nest trace file.
    Import(ImportArgs),
    /// Summarise a trace; write an HTML report and/or pictures.
    Report(ReportArgs),
    /// Compare two traces side by side (e.g. default vs Nest) in HTML.
    Compare(CompareArgs),
    /// Export a trace for ui.perfetto.dev.
    Export(ExportArgs),
    /// Print every metric table, or write them as CSV files.
    Metrics(MetricsArgs),
    /// Placement of one process tree (the recorded command and everything
    /// it started, by default) over its lifetime, as key=value lines:
    /// CPUs and sockets per interval, migrations, cross-socket migrations.
    Tree(TreeArgs),
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Record the whole machine for this long (e.g. 10s) instead of
    /// running a command.
    #[arg(long, value_name = "DURATION", conflicts_with = "command",
          required_unless_present = "command", value_parser = duration_within(1..=u64::MAX))]
    pub duration: Option<Duration>,
    /// Nest trace file to write.
    #[arg(long, short, default_value = "trace.nest.jsonl")]
    pub out: PathBuf,
    /// Per-CPU trace buffer size in KiB.
    #[arg(long, default_value_t = 32 * 1024)]
    pub buffer_kb: u32,
    /// Period of cpufreq sampling. Without cpufreq (e.g. in a virtual
    /// machine) the recorder wakes every 100 ms instead, only to see
    /// whether the command exited.
    #[arg(long, default_value = "10ms", value_name = "DURATION",
          value_parser = duration_within(1_000_000..=u64::MAX))]
    pub freq_period: Duration,
    /// tracefs mount point (default: /sys/kernel/tracing).
    #[arg(long)]
    pub tracefs: Option<PathBuf>,
    /// Do not probe try_to_wake_up() for the wake flags (wakeups then name
    /// their waker without saying whether it was WF_SYNC): a kprobe costs
    /// every wakeup a trap.
    #[arg(long)]
    pub no_wake_flags: bool,
    /// Extra entry for the trace's meta (repeatable), e.g. how the
    /// machine's clock ran: `--meta guest_clock=icount:0`.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_meta)]
    pub meta: Vec<(String, String)>,
    /// The command to run, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The file to import, recognised by its content: trace-cmd's
    /// trace.dat (read with `trace-cmd report`), perf.data (read with
    /// `perf script`), the text of tracefs, `perf script` or
    /// `trace-cmd report`, or a nest trace.
    pub input: PathBuf,
    /// Nest trace file to write.
    #[arg(long, short, default_value = "trace.nest.jsonl")]
    pub out: PathBuf,
    /// Take the topology from the sysfs under this root (e.g. `/` when the
    /// trace was recorded on this machine); default: one flat socket.
    #[arg(long, value_name = "ROOT")]
    pub topology_root: Option<PathBuf>,
}

/// Options of the analyses.
#[derive(Debug, Args, Clone)]
pub struct AnalysisArgs {
    /// Interval length of the interval metrics.
    #[arg(long, default_value = "4ms", value_name = "DURATION",
          value_parser = duration_ns_within(1..=u64::MAX))]
    pub interval: u64,
    /// Shortest work-conservation violation counted.
    #[arg(long, default_value = "1ms", value_name = "DURATION", value_parser = parse_duration_ns)]
    pub wc_min: u64,
    /// Frequency band edges in kHz, comma-separated (default: from the
    /// trace's meta, else 0.5 GHz steps).
    #[arg(long, value_delimiter = ',', value_name = "KHZ,..")]
    pub bands_khz: Vec<u32>,
}

/// More intervals than this is a mistake (e.g. `--interval 1ns`).
const MAX_INTERVALS: u64 = 2_000_000;

impl AnalysisArgs {
    /// The options for `trace`, refusing interval lengths that would cut it
    /// into an unreasonable number of intervals.
    fn options_for(&self, trace: &Trace) -> anyhow::Result<ReportOptions> {
        check_intervals(trace, self.interval)?;
        Ok(self.options())
    }

    fn options(&self) -> ReportOptions {
        ReportOptions {
            interval_ns: self.interval,
            wc_min_ns: self.wc_min,
            bands: (!self.bands_khz.is_empty())
                .then(|| FreqBands::from_edges(self.bands_khz.clone())),
        }
    }
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Trace file: a nest trace, trace.dat, perf.data or trace text
    /// (recognised by content).
    pub trace: PathBuf,
    /// Write a self-contained HTML report to this file.
    #[arg(long, short, value_name = "REPORT.html")]
    pub out: Option<PathBuf>,
    /// Write the pictures as SVG files into this directory.
    #[arg(long, value_name = "D")]
    pub svg_dir: Option<PathBuf>,
    /// With --svg-dir, also write PNG renderings.
    #[arg(long)]
    pub png: bool,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// First trace (e.g. the default scheduler).
    pub a: PathBuf,
    /// Second trace (e.g. Nest).
    pub b: PathBuf,
    /// Write the HTML comparison to this file.
    #[arg(long, short, value_name = "COMPARE.html")]
    pub out: PathBuf,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Trace file: a nest trace, trace.dat, perf.data or trace text
    /// (recognised by content).
    pub trace: PathBuf,
    /// Write the Perfetto protobuf trace to this file.
    #[arg(long, short, value_name = "TRACE.perfetto")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// Trace file: a nest trace, trace.dat, perf.data or trace text
    /// (recognised by content).
    pub trace: PathBuf,
    /// Write one CSV file per metric into this directory.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

#[derive(Debug, Args)]
pub struct TreeArgs {
    /// Trace file: a nest trace, trace.dat, perf.data or trace text
    /// (recognised by content).
    pub trace: PathBuf,
    /// Root of the process tree (default: the recorded command, meta
    /// `command_pid`).
    #[arg(long)]
    pub pid: Option<u32>,
    /// Interval length.
    #[arg(long, default_value = "100ms", value_name = "DURATION",
          value_parser = duration_ns_within(1..=u64::MAX))]
    pub interval: u64,
}

/// Run a `nest trace` subcommand.
pub fn run(args: TraceArgs) -> anyhow::Result<()> {
    match args.command {
        TraceCommand::Record(a) => run_record(a),
        TraceCommand::Import(a) => run_import(a),
        TraceCommand::Report(a) => run_report(a),
        TraceCommand::Compare(a) => run_compare(a),
        TraceCommand::Export(a) => run_export(a),
        TraceCommand::Metrics(a) => run_metrics(a),
        TraceCommand::Tree(a) => run_tree(a),
    }
}

/// Refuses an interval length that would cut `trace` into an
/// unreasonable number of intervals.
fn check_intervals(trace: &Trace, interval_ns: u64) -> anyhow::Result<()> {
    if trace.end_ns() / interval_ns > MAX_INTERVALS {
        bail!(
            "--interval {} cuts the {:.3} s trace into more than {MAX_INTERVALS} intervals",
            format_duration_ns(interval_ns),
            trace.end_ns() as f64 / 1e9
        );
    }
    Ok(())
}

/// `KEY=VALUE` of `--meta`: a non-empty key of letters, digits and `_`.
fn parse_meta(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((key, value))
            if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
        {
            Ok((key.to_string(), value.to_string()))
        }
        _ => Err(format!(
            "invalid meta entry '{s}': expected KEY=VALUE, KEY of letters, digits and _"
        )),
    }
}

fn run_record(a: RecordArgs) -> anyhow::Result<()> {
    // clap makes sure exactly one of the two is given.
    let workload = match a.duration {
        Some(duration) => Workload::Duration(duration),
        None => Workload::Command(a.command),
    };
    let opts = RecordOptions {
        tracefs: a.tracefs,
        buffer_kb: a.buffer_kb,
        freq_period: a.freq_period,
        wake_flags: !a.no_wake_flags,
        ..Default::default()
    };
    let mut trace = record::record(&workload, &opts)?;
    for (key, value) in a.meta {
        trace.meta_set(&key, value);
    }
    format::save(&trace, &a.out)?;
    eprintln!(
        "recorded {} events on {} CPUs ({} lost) to {}",
        trace.events.len(),
        trace.topology.nr_cpus(),
        trace.meta_get("overrun_events").unwrap_or("0"),
        a.out.display()
    );
    Ok(())
}

fn run_import(a: ImportArgs) -> anyhow::Result<()> {
    let mut trace = input::load(&a.input)?;
    if let Some(root) = &a.topology_root {
        trace.topology = read_sysfs_topology(root)?;
    }
    trace.meta_set("imported_from", a.input.display().to_string());
    format::save(&trace, &a.out)?;
    eprintln!(
        "imported {} events to {}",
        trace.events.len(),
        a.out.display()
    );
    Ok(())
}

/// The name of a trace in reports: its file name without `.nest.jsonl`
/// (or its last extension).
fn stem(path: &Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    match name {
        Some(name) => match name.strip_suffix(&format!(".{}", format::FILE_EXTENSION)) {
            Some(stem) => stem.to_string(),
            None => path
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
        },
        None => path.display().to_string(),
    }
}

fn run_report(a: ReportArgs) -> anyhow::Result<()> {
    let trace = input::load(&a.trace)?;
    let analysis = report::analyse(&trace, &stem(&a.trace), &a.analysis.options_for(&trace)?);
    if let Some(html) = &a.out {
        write(html, &report::html_report(&analysis))?;
    }
    if let Some(dir) = &a.svg_dir {
        report::write_pictures(&analysis, dir, a.png)?;
    }
    print(&analysis.summary.to_text())
}

fn run_compare(a: CompareArgs) -> anyhow::Result<()> {
    let load = |p: &Path| -> anyhow::Result<report::Analysis> {
        let trace: Trace = input::load(p)?;
        Ok(report::analyse(
            &trace,
            &stem(p),
            &a.analysis.options_for(&trace)?,
        ))
    };
    let (x, y) = (load(&a.a)?, load(&a.b)?);
    write(&a.out, &report::html_compare(&x, &y))?;
    print(&report::compare_table(&x, &y).to_text())
}

fn run_export(a: ExportArgs) -> anyhow::Result<()> {
    let trace = input::load(&a.trace)?;
    perfetto::write_perfetto(&trace, &a.out)
}

fn run_metrics(a: MetricsArgs) -> anyhow::Result<()> {
    let trace = input::load(&a.trace)?;
    let tables = report::all_tables(&trace, &a.analysis.options_for(&trace)?);
    match &a.csv {
        Some(dir) => report::write_csvs(&tables, dir),
        None => {
            let text: Vec<String> = tables
                .iter()
                .map(|t| format!("# {}\n{}", t.name, t.to_text()))
                .collect();
            print(&text.join("\n"))
        }
    }
}

fn run_tree(a: TreeArgs) -> anyhow::Result<()> {
    let trace = input::load(&a.trace)?;
    let root = match a.pid {
        Some(pid) => pid,
        None => trace
            .command_pid()
            .context("the trace has no command_pid: give the root with --pid")?,
    };
    let interval_ns = a.interval;
    check_intervals(&trace, interval_ns)?;
    let p = crate::metrics::tree_placement(&trace, root, interval_ns);
    let meta = |key: &str| trace.meta_get(key).unwrap_or("unknown").to_string();
    let lines = [
        format!("root={root}"),
        format!("tasks={}", p.tasks),
        format!("seconds={:.3}", p.window_ns as f64 / 1e9),
        format!("intervals={}", p.intervals),
        format!("cpus_per_interval={:.3}", p.mean_cpus),
        format!("sockets_per_interval={:.3}", p.mean_sockets),
        format!("cores_per_interval={:.3}", p.mean_cores),
        format!(
            "primary_nest_cpus={}",
            p.mean_primary_cpus
                .map_or_else(|| "n/a".to_string(), |n| format!("{n:.3}"))
        ),
        format!("migrations={}", p.migrations),
        format!("cross_socket_migrations={}", p.cross_socket_migrations),
        format!("cpus_used={}", p.cpus_used),
        format!("run_seconds={:.3}", p.run_ns as f64 / 1e9),
        format!("forks={}", p.forks.total()),
        format!("forks_same_cpu={}", p.forks.same_cpu),
        format!("forks_same_core={}", p.forks.same_core),
        format!("forks_same_llc={}", p.forks.same_llc),
        format!("forks_same_socket={}", p.forks.same_socket),
        format!("forks_other_socket={}", p.forks.other_socket),
        format!("wakeups={}", p.wakeups),
        format!("wakeups_on_prev_cpu={}", p.wakeups_on_prev_cpu),
        format!("exiting_wakeups={}", p.exiting_wakeups),
        format!(
            "exiting_wakeups_on_prev_cpu={}",
            p.exiting_wakeups_on_prev_cpu
        ),
        format!("exiting_wakeups_prev_free={}", p.exiting_wakeups_prev_free),
        format!(
            "exiting_wakeups_prev_free_on_prev_cpu={}",
            p.exiting_wakeups_prev_free_on_prev_cpu
        ),
        format!("lost_events={}", meta("lost_events")),
        format!("overrun_events={}", meta("overrun_events")),
    ];
    print(&(lines.join("\n") + "\n"))
}

/// Print to stdout. A closed pipe (`| head`) comes back as an error of
/// kind BrokenPipe, which the `nest` command ends on quietly.
fn print(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    Ok(std::io::stdout().lock().write_all(text.as_bytes())?)
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_entries_are_key_value_pairs() {
        assert_eq!(
            parse_meta("guest_clock=icount:0"),
            Ok(("guest_clock".into(), "icount:0".into()))
        );
        assert_eq!(parse_meta("note=a=b"), Ok(("note".into(), "a=b".into())));
        for bad in ["noequals", "=v", "a b=c"] {
            assert!(parse_meta(bad).is_err(), "{bad}");
        }
    }
}
