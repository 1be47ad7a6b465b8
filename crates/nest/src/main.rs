//! `nest`: one command line for the Nest tools. Each subcommand lives in
//! its own module with its own clap `Args` and a `run` function.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod run;
mod source;
mod trace;
mod validate;
mod vm;

/// What every subcommand's exit status means (docs/reference/conventions.md).
const EXIT_STATUS: &str = "\
Exit status (every subcommand):
  0  success: the command ran and its checks passed
  1  the command could not run (a missing file, a guest that did not boot)
  2  usage error
  3  the command ran and its check failed (nest validate: figures outside
     their bands; nest bench: FAILED runs; nest sim calibrate: a case
     outside its tolerance)
`nest vm run` exits with the guest command's status (124: timeout, 125: the
guest ended without one); `nest run` with the command's.";

#[derive(Debug, Parser)]
#[command(name = "nest", version = env!("NEST_VERSION"), about = "Nest scheduler tools",
          after_long_help = EXIT_STATUS)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Simulate placement policies (Linux, Nest, ...) on modelled
    /// multi-socket machines with frequency dynamics and energy.
    Sim(nest_sim::cli::SimArgs),
    /// Record real schedules, measure placement, draw, export and replay
    /// them.
    Trace(trace::TraceArgs),
    /// Boot a QEMU guest with a sched_ext kernel and run commands in it.
    Vm(vm::VmArgs),
    /// Run a command (and its descendants) under scx_nest in partial mode
    /// (`scx_nest --partial`), leaving other tasks alone.
    Run(run::RunArgs),
    /// Run workloads under several schedulers (and governors), repeatedly
    /// and interleaved, and report each one's improvement over the first.
    Bench(bench::BenchArgs),
    /// Compare the simulator's Linux and Nest models with real kernels and
    /// scx_nest: record workloads in the guest, replay them in the
    /// simulator, print both.
    Validate(validate::ValidateArgs),
    /// Write the man pages of nest and of each subcommand (nest.1,
    /// nest-sim.1, nest-trace-record.1...) into a directory.
    Man(ManArgs),
}

#[derive(Debug, clap::Args)]
struct ManArgs {
    /// Directory of the pages (created if missing).
    #[arg(short, long, default_value = "out/man")]
    out: PathBuf,
}

/// The man pages, from the same clap definitions as `--help`.
fn write_man_pages(args: ManArgs) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    clap_mangen::generate_to(<Cli as clap::CommandFactory>::command(), &args.out)
        .with_context(|| format!("cannot write the man pages into {}", args.out.display()))?;
    eprintln!("nest man: wrote the pages into {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(args) => nest_sim::cli::run(args).map(|()| ExitCode::SUCCESS),
        Command::Trace(args) => trace::run(args).map(|()| ExitCode::SUCCESS),
        Command::Vm(args) => vm::run(args),
        Command::Run(args) => run::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Man(args) => write_man_pages(args),
    };
    result.unwrap_or_else(failure)
}

/// The exit status of a command that ran to its end but whose check
/// failed: `nest validate` with figures outside their bands, `nest bench`
/// with FAILED runs, `nest sim calibrate` with a case outside its
/// tolerance. Distinct from 1, the tool could not run (a guest that did
/// not boot, a missing file), and 2, a usage error.
pub(crate) fn check_failed() -> ExitCode {
    ExitCode::from(3)
}

/// A usage error: exit status 2, like clap's own.
pub(crate) fn usage(message: impl std::fmt::Display) -> anyhow::Error {
    clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{message}\n")).into()
}

/// The status of a command that ended in an error: 0 when its output went
/// into a pipe whose reader stopped (`nest sim -f json | head -1`), 2 for
/// a usage error (as clap's own), 3 for a failed check, 1 otherwise (the
/// command could not run).
fn failure(err: anyhow::Error) -> ExitCode {
    let broken_pipe = err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    });
    if broken_pipe {
        return ExitCode::SUCCESS;
    }
    if let Some(usage) = err.downcast_ref::<clap::Error>() {
        usage.exit();
    }
    eprintln!("nest: error: {err:#}");
    if err.downcast_ref::<nest_sim::cli::CheckFailed>().is_some() {
        return check_failed();
    }
    ExitCode::FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every command and subcommand, with its path (`nest bench compare`).
    fn commands() -> Vec<(String, clap::Command)> {
        fn walk(path: String, command: &clap::Command, all: &mut Vec<(String, clap::Command)>) {
            for sub in command.get_subcommands() {
                walk(format!("{path} {}", sub.get_name()), sub, all);
            }
            all.push((path, command.clone()));
        }
        let mut all = Vec::new();
        walk("nest".into(), &Cli::command(), &mut all);
        all
    }

    /// The conventions of docs/reference/conventions.md that clap's
    /// definitions can show.
    #[test]
    fn every_option_has_help_and_follows_the_conventions() {
        let mut broken = Vec::new();
        for (path, command) in commands() {
            if path != "nest" && command.get_about().is_none() {
                broken.push(format!("{path}: no description"));
            }
            for arg in command.get_arguments() {
                let name = arg.get_id().as_str();
                if arg.is_hide_set() || name == "help" || name == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    broken.push(format!("{path} {name}: no help text"));
                }
                if arg.get_short() == Some('o') && arg.get_long() != Some("out") {
                    broken.push(format!("{path} {name}: -o is --out everywhere"));
                }
            }
        }
        assert!(broken.is_empty(), "{}", broken.join("\n"));
    }

    #[test]
    fn a_failed_check_exits_3_and_a_command_that_could_not_run_1() {
        let check = nest_sim::cli::CheckFailed("calibration cases failed: x".into());
        assert_eq!(failure(check.into()), ExitCode::from(3));
        let could_not_run = anyhow::anyhow!("cannot read machines/x.json");
        assert_eq!(failure(could_not_run), ExitCode::FAILURE);
    }
}
