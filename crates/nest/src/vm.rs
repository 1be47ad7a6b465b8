//! `nest vm`: fetch the guest kernel and run commands in a QEMU guest.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use nest_policy::duration_within;
use nest_vm::{
    GuestKernel, VmOutcome, VmSpec, default_kernel_dir, linux_510_kernel_dir, shell_join,
};

#[derive(Debug, Args)]
pub struct VmArgs {
    #[command(subcommand)]
    command: VmCommand,
}

#[derive(Debug, Subcommand)]
enum VmCommand {
    /// Print the cached guest kernel directory, fetching the kernel first
    /// (scripts/guest-kernel.sh) if none is cached or --refresh is given.
    Kernel {
        /// Look for a newer kernel even if one is cached.
        #[arg(long)]
        refresh: bool,
        /// The newest kernel of this series (6.12, 6.18, 7.2, ...): Debian's
        /// package, or built from Debian's linux-source package where no
        /// package has sched_ext (6.12).
        #[arg(long, value_name = "X.Y", conflicts_with = "linux_510")]
        version: Option<String>,
        /// Debian 11's 5.10 kernel instead (no sched_ext: the default
        /// scheduler of the generation Nest was compared with), for
        /// `nest vm run --kernel DIR`.
        #[arg(long = "linux-5.10")]
        linux_510: bool,
        /// List the cached sched_ext kernels instead, newest first.
        #[arg(long, conflicts_with_all = ["refresh", "version", "linux_510"])]
        list: bool,
    },
    /// Boot a guest, run CMD as root in it and exit with its status.
    Run(RunArgs),
}

#[derive(Debug, Args)]
struct RunArgs {
    /// CPU sockets (one NUMA node each with --numa).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    sockets: u32,
    /// Cores per socket.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    cores: u32,
    /// SMT threads per core.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    threads: u32,
    /// Total vCPUs, checked against sockets x cores x threads.
    #[arg(long)]
    cpus: Option<u32>,
    /// One NUMA node per socket.
    #[arg(long)]
    numa: bool,
    /// Guest memory in MiB (`--mem` is an older spelling, still taken).
    #[arg(
        long = "mem-mib",
        alias = "mem",
        value_name = "MIB",
        default_value_t = 1024
    )]
    mem: u32,
    /// How long before the guest is killed (boot included).
    #[arg(long, default_value = "300s", value_name = "DURATION",
          value_parser = duration_within(1_000_000_000..=u64::MAX))]
    timeout: Duration,
    /// QEMU CPU model.
    #[arg(long, default_value = nest_vm::DEFAULT_CPU_MODEL)]
    cpu: String,
    /// One host thread per vCPU (MTTCG); can crash the guest with
    /// `Oops: int3` during kernel code patching, see docs/guides/guest-vm.md.
    #[arg(long)]
    mttcg: bool,
    /// What the guest's time follows: `host` (QEMU's default) or QEMU's
    /// instruction counter, `icount` (1 ns per guest instruction) or
    /// `icount:N` (2^N ns); see docs/guides/guest-vm.md, "Guest timing".
    #[arg(long, default_value = "host", value_name = "CLOCK")]
    guest_clock: nest_vm::GuestClock,
    /// Guest kernel directory (default: $NEST_GUEST_KERNEL, else
    /// $NEST_CACHE/kernel/current).
    #[arg(long)]
    kernel: Option<PathBuf>,
    /// The newest kernel of this series instead (6.12, 7.2, ...), fetched
    /// or built first if none is cached (as `nest vm kernel --version`).
    #[arg(long, value_name = "X.Y", conflicts_with = "kernel")]
    kernel_version: Option<String>,
    /// Extra kernel command-line argument (repeatable).
    #[arg(long = "append", value_name = "ARG")]
    append: Vec<String>,
    /// Host directory the guest can write, mounted in the guest at the same
    /// absolute path (also in `$NEST_OUT`); created if missing.
    #[arg(long, short, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Write the guest's serial console log to this file.
    #[arg(long, value_name = "FILE")]
    console: Option<PathBuf>,
    /// Command and arguments to run in the guest (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

pub fn run(args: VmArgs) -> Result<ExitCode> {
    match args.command {
        VmCommand::Kernel {
            refresh,
            version,
            linux_510,
            list,
        } => {
            if list {
                return list_kernels();
            }
            let which = match (version, linux_510) {
                (Some(series), _) => KernelChoice::Series(series),
                (None, true) => KernelChoice::Linux510,
                (None, false) => KernelChoice::Newest,
            };
            kernel(refresh, &which)
        }
        VmCommand::Run(args) => run_guest(args),
    }
}

/// Which guest kernel to provide.
pub(crate) enum KernelChoice {
    /// The newest sched_ext kernel (`kernel/current`).
    Newest,
    /// The newest of one series, such as `6.12`.
    Series(String),
    /// Debian 11's 5.10 (no sched_ext).
    Linux510,
}

fn kernel(refresh: bool, which: &KernelChoice) -> Result<ExitCode> {
    let dir = ensure_kernel(refresh, which)?;
    writeln!(std::io::stdout(), "{}", dir.display())?;
    Ok(ExitCode::SUCCESS)
}

fn list_kernels() -> Result<ExitCode> {
    let status = guest_kernel_script()?
        .arg("--list")
        .status()
        .context("cannot run scripts/guest-kernel.sh")?;
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn guest_kernel_script() -> Result<Command> {
    Ok(Command::new(find_repo_file("scripts/guest-kernel.sh")?))
}

/// The directory of the guest kernel `which`, fetched or built first by
/// scripts/guest-kernel.sh, whose progress goes to stderr, if none is
/// cached or `refresh` is given. Which cached kernel of a series is the
/// newest is the script's to say (it answers from the cache).
pub(crate) fn ensure_kernel(refresh: bool, which: &KernelChoice) -> Result<PathBuf> {
    let cached = match which {
        KernelChoice::Newest => Some(default_kernel_dir()),
        KernelChoice::Series(_) => None,
        KernelChoice::Linux510 => Some(linux_510_kernel_dir()),
    };
    if let Some(dir) = &cached
        && !refresh
        && GuestKernel::locate(dir).is_ok()
    {
        return Ok(resolve(dir));
    }
    let mut cmd = guest_kernel_script()?;
    if refresh {
        cmd.arg("--refresh");
    }
    match which {
        KernelChoice::Newest => {}
        KernelChoice::Series(series) => {
            cmd.args(["--version", series]);
        }
        KernelChoice::Linux510 => {
            cmd.arg("--linux-5.10");
        }
    }
    let output = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("cannot run scripts/guest-kernel.sh")?;
    if !output.status.success() {
        bail!("scripts/guest-kernel.sh could not provide a guest kernel");
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let Some(dir) = stdout.lines().last().map(PathBuf::from) else {
        bail!("scripts/guest-kernel.sh named no kernel directory");
    };
    GuestKernel::locate(&dir)?;
    Ok(resolve(&dir))
}

/// The real directory behind the `current` link, for stable paths.
fn resolve(dir: &Path) -> PathBuf {
    dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf())
}

/// Finds a file of this repository (`scripts/guest-kernel.sh`): in the
/// sources this binary was built from, else under the current directory.
/// The path is absolute, so that a guest, which sees the host's files at
/// the same paths, can use it too.
pub(crate) fn find_repo_file(path: &str) -> Result<PathBuf> {
    let from_build = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path);
    let candidates = [from_build, PathBuf::from(path)];
    match candidates.iter().find(|p| p.is_file()) {
        Some(found) => found
            .canonicalize()
            .with_context(|| format!("cannot resolve {}", found.display())),
        None => bail!("cannot find {path}; run it from the Nest repository"),
    }
}

fn spec_from(args: &RunArgs) -> Result<VmSpec> {
    let spec = VmSpec {
        sockets: args.sockets,
        cores_per_socket: args.cores,
        threads_per_core: args.threads,
        numa: args.numa,
        memory_mb: args.mem,
        timeout: args.timeout,
        kernel_dir: match (&args.kernel, &args.kernel_version) {
            (Some(dir), _) => dir.clone(),
            (None, Some(series)) => ensure_kernel(false, &KernelChoice::Series(series.clone()))?,
            (None, None) => default_kernel_dir(),
        },
        workdir: None,
        output_dir: args.out.clone(),
        extra_cmdline: args.append.clone(),
        cpu_model: args.cpu.clone(),
        multi_threaded_tcg: args.mttcg,
        guest_clock: args.guest_clock,
    };
    if let Some(cpus) = args.cpus
        && cpus != spec.cpus()
    {
        let message = format!(
            "--cpus {cpus} does not match --sockets {} x --cores {} x --threads {} = {}\n",
            spec.sockets,
            spec.cores_per_socket,
            spec.threads_per_core,
            spec.cpus()
        );
        return Err(clap::Error::raw(clap::error::ErrorKind::ArgumentConflict, message).into());
    }
    if args.mttcg && args.guest_clock != nest_vm::GuestClock::Host {
        let message = format!(
            "--guest-clock {} counts instructions on one host thread: it cannot go with --mttcg\n",
            args.guest_clock
        );
        return Err(clap::Error::raw(clap::error::ErrorKind::ArgumentConflict, message).into());
    }
    spec.validate()?;
    Ok(spec)
}

fn run_guest(args: RunArgs) -> Result<ExitCode> {
    let spec = spec_from(&args)?;
    let outcome = nest_vm::run(&spec, &shell_join(&args.command))?;
    if let Some(path) = &args.console {
        std::fs::write(path, &outcome.console_log)
            .with_context(|| format!("cannot write the console log to {}", path.display()))?;
    }
    print_outcome(&outcome)?;
    Ok(exit_code(&outcome))
}

fn print_outcome(outcome: &VmOutcome) -> Result<()> {
    std::io::stdout().write_all(outcome.stdout.as_bytes())?;
    std::io::stderr().write_all(outcome.stderr.as_bytes())?;
    for issue in outcome.console_issues() {
        eprintln!(
            "nest: guest console line {}: {}",
            issue.line_number, issue.line
        );
    }
    if let Some(boot) = outcome.boot_time {
        eprintln!(
            "nest: guest booted in {:.1} s, ran {:.1} s in all",
            boot.as_secs_f64(),
            outcome.elapsed.as_secs_f64()
        );
    }
    if let Some(failure) = outcome.failure() {
        eprintln!("nest: {failure}");
    }
    Ok(())
}

/// The command's status; 124 (like timeout(1)) on a timeout, 125 if the
/// guest ended without a status.
fn exit_code(outcome: &VmOutcome) -> ExitCode {
    match (outcome.timed_out, outcome.exit_status) {
        (true, _) => ExitCode::from(124),
        (false, Some(code)) => ExitCode::from(code.clamp(0, 255) as u8),
        (false, None) => ExitCode::from(125),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Test {
        #[command(subcommand)]
        command: VmCommand,
    }

    fn parse(args: &[&str]) -> RunArgs {
        match Test::try_parse_from(args).unwrap().command {
            VmCommand::Run(run) => run,
            other => panic!("not run: {other:?}"),
        }
    }

    #[test]
    fn parses_topology_and_command() {
        let args = parse(&[
            "vm",
            "run",
            "--sockets",
            "2",
            "--cores",
            "4",
            "--threads",
            "2",
            "--numa",
            "--mem-mib",
            "2048",
            "--timeout",
            "60s",
            "--out",
            "/tmp/results",
            "--",
            "sh",
            "-c",
            "echo hi",
        ]);
        let spec = spec_from(&args).unwrap();
        assert_eq!(spec.cpus(), 16);
        assert!(spec.numa);
        assert_eq!(spec.memory_mb, 2048);
        assert_eq!(spec.timeout, Duration::from_secs(60));
        assert_eq!(spec.output_dir, Some(PathBuf::from("/tmp/results")));
        assert_eq!(shell_join(&args.command), "sh -c 'echo hi'");
        // The older spelling, without the unit, still works.
        let older = parse(&["vm", "run", "--mem", "3072", "--", "true"]);
        assert_eq!(spec_from(&older).unwrap().memory_mb, 3072);
    }

    #[test]
    fn refuses_mismatched_cpu_count() {
        let args = parse(&["vm", "run", "--sockets", "2", "--cpus", "4", "--", "true"]);
        let err = spec_from(&args).unwrap_err().to_string();
        assert!(err.contains("does not match"), "{err}");
    }

    #[test]
    fn refuses_zero_cores_and_timeouts_without_a_unit() {
        let zero = Test::try_parse_from(["vm", "run", "--cores", "0", "--", "true"]);
        assert_eq!(zero.unwrap_err().exit_code(), 2);
        let bare = Test::try_parse_from(["vm", "run", "--timeout", "60", "--", "true"]);
        let err = bare.unwrap_err();
        assert!(err.to_string().contains("no unit"), "{err}");
    }

    #[test]
    fn guest_clock_is_host_unless_asked_and_bad_values_are_usage_errors() {
        let spec = spec_from(&parse(&["vm", "run", "--", "true"])).unwrap();
        assert_eq!(spec.guest_clock, nest_vm::GuestClock::Host);
        let args = parse(&["vm", "run", "--guest-clock", "icount", "--", "true"]);
        let spec = spec_from(&args).unwrap();
        assert_eq!(spec.guest_clock, nest_vm::GuestClock::Icount { shift: 0 });
        let bad = Test::try_parse_from(["vm", "run", "--guest-clock", "icount:auto", "--", "true"]);
        assert_eq!(bad.unwrap_err().exit_code(), 2);
        let args = parse(&[
            "vm",
            "run",
            "--mttcg",
            "--guest-clock",
            "icount:1",
            "--",
            "true",
        ]);
        let err = spec_from(&args).unwrap_err();
        let err = err.downcast_ref::<clap::Error>().expect("a usage error");
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("cannot go with --mttcg"), "{err}");
    }

    #[test]
    fn requires_a_command() {
        assert!(Test::try_parse_from(["vm", "run"]).is_err());
    }
}
