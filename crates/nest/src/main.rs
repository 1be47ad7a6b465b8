//! `nest`: one command line for the Nest tools. Each subcommand lives in
//! its own module with its own clap `Args` and a `run` function.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod run;
mod source;
mod trace;
mod validate;
mod vm;

#[derive(Debug, Parser)]
#[command(name = "nest", version, about = "Nest scheduler tools")]
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
    };
    result.unwrap_or_else(failure)
}

/// A usage error: exit status 2, like clap's own.
pub(crate) fn usage(message: impl std::fmt::Display) -> anyhow::Error {
    clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{message}\n")).into()
}

/// The status of a command that failed: 0 when its output went into a
/// pipe whose reader stopped (`nest sim -f json | head -1`), 2 for a usage
/// error (as clap's own), 1 otherwise.
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
    ExitCode::FAILURE
}
