//! nest-load: small real workloads to exercise a scheduler.
//!
//! Each load runs for a fixed time, checks what it can (a child that did
//! not exit cleanly, a thread running outside its affinity mask) and prints
//! one summary line. The process exits non-zero if any check failed. It
//! forks but never execs, so it stays fast when its binary lives on a slow
//! filesystem (9p in the test guest).

mod affinity;
mod batch;
mod churn;
mod cpus;
mod data;
mod hogs;
mod pingpong;
mod process;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Result;
use churn::Stop;
use clap::{Parser, Subcommand};

/// Work of each churn child in the mixed load.
const CHURN_WORK: Duration = Duration::from_micros(200);

#[derive(Debug, Parser)]
#[command(version = env!("NEST_VERSION"), about = "Small real workloads to exercise a scheduler")]
struct Cli {
    #[command(subcommand)]
    load: Load,
}

#[derive(Debug, Subcommand)]
enum Load {
    /// All of hogs, churn, ping-pong and affinity at once.
    Mixed {
        /// How long to run.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// CPU-bound threads (default: half the CPUs).
        #[arg(long)]
        hogs: Option<usize>,
    },
    /// CPU-bound threads spinning until the deadline.
    Hogs {
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Number of threads (default: one per CPU).
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Fork a child that works briefly and exits, wait, repeat: a serial
    /// fork/wait chain like a configure script.
    Churn {
        /// How long to run (unless --count is given).
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Stop after this many children instead.
        #[arg(long)]
        count: Option<u64>,
        /// Work of each child, in microseconds of spinning.
        #[arg(long, default_value_t = 200)]
        work_us: u64,
        /// Do not wait for each child: keep running beside it.
        #[arg(long)]
        overlap: bool,
    },
    /// CPU-bound threads started at once, each running until it used
    /// --work-ms of CPU time; reports when the last one finished.
    Batch {
        /// Number of threads (default: one per CPU).
        #[arg(long)]
        tasks: Option<usize>,
        /// CPU time each thread needs, in milliseconds.
        #[arg(long, default_value_t = 300)]
        work_ms: u64,
    },
    /// Two processes bouncing a byte through pipes.
    Pingpong {
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
    },
    /// A thread moving itself between CPU subsets, checking where it runs.
    Affinity {
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
    },
    /// Write compressible input for compression workloads: the same bytes
    /// on every machine, half repeats and half literals.
    Data {
        /// Size in MiB.
        #[arg(long)]
        mib: usize,
        /// The file to write.
        #[arg(long)]
        out: std::path::PathBuf,
    },
}

/// The time a load stops at.
fn deadline(seconds: f64) -> Result<Instant> {
    if !(seconds > 0.0 && seconds.is_finite() && seconds < 86_400.0) {
        anyhow::bail!("--seconds must be a positive number below one day, not {seconds}");
    }
    Ok(Instant::now() + Duration::from_secs_f64(seconds))
}

/// Spin on the CPU for `work`.
pub fn spin_for(work: Duration) {
    let start = Instant::now();
    while start.elapsed() < work {
        std::hint::spin_loop();
    }
}

/// Run `load` in a child process that prints its summary line: separate
/// processes keep one load's forks (and their TLB shootdowns, very slow
/// under emulation) from slowing another's threads.
fn in_child(load: impl FnOnce() -> Result<String>) -> Result<libc::pid_t> {
    process::fork(|| match load() {
        Ok(line) => {
            println!("{line}");
            0
        }
        Err(err) => {
            eprintln!("nest-load: {err:#}");
            1
        }
    })
}

fn mixed(seconds: f64, hogs: Option<usize>) -> Result<Vec<String>> {
    let until = deadline(seconds)?;
    let nr_hogs = match hogs {
        Some(n) => n,
        None => cpus::allowed()?.len().div_ceil(2),
    };
    let children = [
        in_child(move || hogs::run(until, nr_hogs))?,
        in_child(move || churn::run(Stop::At(until), CHURN_WORK, false))?,
        in_child(move || pingpong::run(until))?,
        in_child(move || affinity::run(until))?,
    ];
    for pid in children {
        process::wait_ok(pid)?;
    }
    Ok(Vec::new())
}

/// `count`, or one per CPU this process may use.
fn one_per_cpu(count: Option<usize>) -> Result<usize> {
    match count {
        Some(n) => Ok(n),
        None => Ok(cpus::allowed()?.len()),
    }
}

fn run(cli: Cli) -> Result<Vec<String>> {
    Ok(match cli.load {
        Load::Mixed { seconds, hogs } => mixed(seconds, hogs)?,
        Load::Hogs { seconds, threads } => {
            vec![hogs::run(deadline(seconds)?, one_per_cpu(threads)?)?]
        }
        Load::Batch { tasks, work_ms } => {
            vec![batch::run(
                one_per_cpu(tasks)?,
                Duration::from_millis(work_ms),
            )?]
        }
        Load::Churn {
            seconds,
            count,
            work_us,
            overlap,
        } => {
            let stop = match count {
                Some(n) => Stop::After(n),
                None => Stop::At(deadline(seconds)?),
            };
            vec![churn::run(stop, Duration::from_micros(work_us), overlap)?]
        }
        Load::Pingpong { seconds } => vec![pingpong::run(deadline(seconds)?)?],
        Load::Affinity { seconds } => vec![affinity::run(deadline(seconds)?)?],
        Load::Data { mib, out } => vec![data::run(mib, &out)?],
    })
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(lines) => {
            lines.iter().for_each(|line| println!("{line}"));
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("nest-load: {err:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_names_the_git_revision() {
        let err = Cli::try_parse_from(["nest-load", "-V"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayVersion);
        let text = err.to_string();
        let prefix = format!("nest-load {} (git ", env!("CARGO_PKG_VERSION"));
        assert!(text.starts_with(&prefix), "{text}");
    }
}
