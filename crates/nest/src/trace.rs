//! `nest trace`: the trace tools of nest-trace plus `replay`, which needs
//! the simulator's workload conversion (nest-trace cannot depend on
//! nest-sim, which depends on it).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use nest_sim::Machine;
use nest_sim::workload::replay::{self, ReplayOptions, Root};

/// Record real schedules, measure placement and work conservation, draw
/// them, export them to Perfetto, replay them in the simulator.
#[derive(Debug, Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(Debug, Subcommand)]
enum TraceCommand {
    #[command(flatten)]
    Tools(nest_trace::cli::TraceCommand),
    /// Turn a recorded command's task tree into an rt-app workload for
    /// `nest sim -w FILE` (see docs/reference/trace.md, "Replay in the simulator").
    Replay(ReplayArgs),
}

#[derive(Debug, Args)]
struct ReplayArgs {
    /// Trace file: a nest trace, trace.dat, perf.data or trace text
    /// (recognised by content).
    trace: PathBuf,
    /// Workload file to write.
    #[arg(long, short, value_name = "WORKLOAD.json")]
    out: PathBuf,
    /// Root task: this pid (default: meta command_pid, else the first
    /// forked task).
    #[arg(long, conflicts_with = "comm")]
    pid: Option<u32>,
    /// Root task: the first task with this name.
    #[arg(long)]
    comm: Option<String>,
    /// Nominal frequency of the work, in MHz (default: meta nominal_khz,
    /// else 2300).
    #[arg(long, value_name = "MHZ", value_parser = clap::value_parser!(u32).range(1..))]
    nominal_mhz: Option<u32>,
    /// Also replay the tasks outside the command's tree that woke while it
    /// ran (kernel threads, the recorder), each from its first wakeup, a
    /// per-CPU kernel thread (`ksoftirqd/3`) pinned to its CPU.
    #[arg(long)]
    others: bool,
    /// Number the CPUs the workload names (the one the command first ran
    /// on, and with --others the per-CPU kernel threads') as this machine
    /// (a built-in model name or a machine JSON file) numbers the CPUs at
    /// their places (default: the trace's numbers).
    #[arg(long, value_name = "MACHINE")]
    machine: Option<String>,
}

/// Runs a `nest trace` subcommand.
pub fn run(args: TraceArgs) -> Result<()> {
    match args.command {
        TraceCommand::Tools(command) => nest_trace::run(nest_trace::TraceArgs { command }),
        TraceCommand::Replay(a) => run_replay(a),
    }
}

fn run_replay(a: ReplayArgs) -> Result<()> {
    let trace = nest_trace::input::load(&a.trace)?;
    let root = match (a.pid, a.comm) {
        (Some(pid), _) => Root::Pid(pid),
        (_, Some(comm)) => Root::Comm(comm),
        _ => Root::Auto,
    };
    let nominal_khz = a.nominal_mhz.map(|mhz| mhz.saturating_mul(1000));
    let target = match &a.machine {
        Some(m) => Some(Machine::load(m)?.topology()),
        None => None,
    };
    let opts = ReplayOptions {
        root,
        nominal_khz,
        others: a.others,
        target,
    };
    let r = replay::replay(&trace, &opts)
        .with_context(|| format!("{}: cannot replay", a.trace.display()))?;
    std::fs::write(&a.out, r.to_json_string() + "\n")
        .with_context(|| format!("cannot write {}", a.out.display()))?;
    eprintln!(
        "replayed pid {} as {} tasks: {:.3} ms of work at {} MHz over {:.3} ms recorded, \
         {} waits for children, {} waits for a replayed task's wake, {} sleeps, to {}",
        r.root_pid,
        r.tasks.len(),
        r.total_work_ns() as f64 / 1e6,
        r.nominal_khz / 1000,
        r.recorded_ns as f64 / 1e6,
        r.waits,
        r.woken,
        r.sleeps,
        a.out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        trace: TraceArgs,
    }

    fn nest_trace(args: &[&str]) -> Result<()> {
        let mut argv = vec!["trace"];
        argv.extend_from_slice(args);
        run(Cli::try_parse_from(argv)?.trace)
    }

    #[test]
    fn replay_writes_a_workload_the_simulator_parses() {
        let dir = std::env::temp_dir().join(format!("nest-cli-replay-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = |f: &str| dir.join(f).display().to_string();
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../nest-trace/tests/fixtures/real/tracefs.txt"
        );
        nest_trace(&["import", fixture, "--out", &p("t.nest.jsonl")]).unwrap();
        nest_trace(&[
            "replay",
            &p("t.nest.jsonl"),
            "--out",
            &p("w.json"),
            "--comm",
            "sh",
        ])
        .unwrap();
        let text = std::fs::read_to_string(dir.join("w.json")).unwrap();
        let w = nest_sim::workload::rtapp::parse(&text, "w.json").unwrap();
        assert_eq!(w.programs.len(), 6);
        let e = nest_trace(&[
            "replay",
            &p("t.nest.jsonl"),
            "--out",
            &p("x.json"),
            "--pid",
            "1",
        ])
        .unwrap_err();
        assert!(
            format!("{e:#}").ends_with("pid 1 does not appear in the trace"),
            "{e:#}"
        );
        assert!(nest_trace(&["replay", &p("t.nest.jsonl"), "--pid", "1", "--comm", "sh"]).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
