//! `nest validate`: the simulator's models against real kernels.
//!
//! For each kernel generation (Debian's sched_ext kernel for `linux-7`,
//! Debian 11's for `linux-5.10`), boots the 2x4x2 NUMA guest and records
//! each workload with `nest trace record` under each scheduler asked for:
//! the kernel's default scheduler, and `scx_nest` (its default options,
//! attached system-wide, reporting its nests and placements to the trace;
//! `linux-7` only, 5.10 has no sched_ext). Everything from the traces on,
//! the replays in the simulator and the comparison figure by figure, is
//! the library's: `nest_sim::validate`. Exits 3 when a figure leaves its
//! band, 1 when a guest could not record.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use nest_policy::duration_within;
use nest_sim::policy::fork_balance::LinuxVersion;
use nest_sim::validate::{
    self as compare, ALL_KERNELS, GUEST_CLOCK_META, Options, Others, Recording, Scheduler,
    Workload, names, value_name,
};
use nest_vm::{GuestClock, VmSpec, shell_quote};

use crate::source;
use crate::usage;
use crate::vm::{KernelChoice, ensure_kernel, find_repo_file};

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Kernel generations to record under [default: linux-7,linux-5.10].
    #[arg(long, value_enum, value_delimiter = ',', value_name = "KERNELS")]
    kernels: Option<Vec<LinuxVersion>>,
    /// Schedulers to record under, each compared with its model: `default`
    /// (the kernel's own) with the Linux model of the kernel's generation,
    /// `scx_nest` (its default options, for every task; linux-7 only) with
    /// the simulator's Nest [default: default,scx_nest].
    #[arg(long, value_enum, value_delimiter = ',', value_name = "SCHEDULERS")]
    schedulers: Option<Vec<Scheduler>>,
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
    /// What the guest's time follows while it records: `host` (QEMU's
    /// default: an emulated instruction is 10-50x slower than on hardware,
    /// the timers are not) or QEMU's instruction counter, `icount` (1 ns
    /// per guest instruction) or `icount:N` (2^N ns). Written into each
    /// trace's meta (`guest_clock`) and beside every figure; see
    /// docs/design/decisions/guest-clock.md.
    #[arg(long, default_value = "host", value_name = "CLOCK")]
    guest_clock: GuestClock,
    /// Which recordings are replayed with the guest's other tasks (kernel
    /// threads, the recorder, scx_nest's own process) beside the recorded
    /// command's task tree (`nest trace replay --others`): `scx_nest`'s
    /// (Nest's nests are machine-wide, and those tasks move them), `all`
    /// or `none`. Figures are the tree's either way.
    #[arg(long, value_enum, default_value = "scx_nest", value_name = "WHICH")]
    others: Others,
    /// How many times each recording is replayed, with seeds 1 to N of the
    /// vCPU wake-up draws. A simulated figure is their median (its range
    /// beside it): one replay's figures move with the draws
    /// (docs/design/decisions/medians-in-validation.md). `--seeds` is an
    /// older spelling, still taken (`nest sim --seeds` counts runs per
    /// configuration, another thing).
    #[arg(long = "replays", alias = "seeds", default_value_t = 21,
          value_parser = clap::value_parser!(u64).range(1..=99))]
    replays: u64,
    /// How many times the guest records each workload, in the same boot
    /// (every workload, then every workload again). A real figure is the
    /// median of the runs (their range beside it), the simulated one the
    /// median of all their replays: one run of the guest is one draw, and
    /// its fork bursts' nests and CPUs move by more than their bands from
    /// run to run (docs/design/decisions/medians-in-validation.md). With
    /// --from-traces, the first N recorded runs are compared [default: 5;
    /// with --from-traces, every run recorded].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=20))]
    runs: Option<u32>,
}

/// Runs per workload when `--runs` is not given.
const DEFAULT_RUNS: u32 = 5;

/// scx_nest's options in the guest: its defaults, and its nests and
/// placements written to the trace, for the primary nest's size and how
/// placements were decided.
const SCX_NEST_OPTIONS: &str = "--trace-nests --trace-placements";

/// Can `kernel` boot under `clock`? Debian 11's 5.10 stops in its SMP
/// bring-up under QEMU 7.2's instruction counter: its clock stood still
/// at 0.42 s ("x86: Booting SMP configuration:") for 9.5 minutes of host
/// time (docs/design/decisions/guest-clock.md).
fn boots_under(kernel: LinuxVersion, clock: GuestClock) -> bool {
    clock == GuestClock::Host || kernel != LinuxVersion::Linux510
}

/// The kernels to record under with `clock` (`None`: `--kernels` not
/// given): without `--kernels`, those that boot under it, with a note
/// for the others; a kernel named explicitly that cannot is a usage
/// error. Traces already recorded (`from_traces`) are compared whatever
/// the clock.
fn kernels_for_clock(
    kernels: Option<&[LinuxVersion]>,
    clock: GuestClock,
    from_traces: bool,
) -> Result<(Option<Vec<LinuxVersion>>, Option<String>)> {
    if from_traces {
        return Ok((kernels.map(<[_]>::to_vec), None));
    }
    match kernels {
        Some(kernels) => match kernels.iter().find(|&&k| !boots_under(k, clock)) {
            Some(&kernel) => Err(usage(format!(
                "--kernels names {k}, which does not boot under --guest-clock {clock} (its SMP \
                 bring-up stops under QEMU's instruction counter, docs/design/decisions/guest-clock.md); record it with \
                 --guest-clock host",
                k = value_name(kernel)
            ))),
            None => Ok((Some(kernels.to_vec()), None)),
        },
        None => {
            let (boot, skip): (Vec<LinuxVersion>, Vec<LinuxVersion>) =
                ALL_KERNELS.iter().partition(|&&k| boots_under(k, clock));
            let note = (!skip.is_empty()).then(|| {
                format!(
                    "{}: skipped, does not boot under --guest-clock {clock} (docs/design/decisions/guest-clock.md)",
                    names(&skip)
                )
            });
            // Every kernel boots: leave them unnamed, as asked.
            Ok((note.is_some().then_some(boot), note))
        }
    }
}

/// The Debian source package whose configure script is recorded: bc's is
/// the shortest of the bench's (2 s natively, about a minute emulated).
const CONFIGURE_PACKAGE: &str = "bc";

/// The guest's shell command that records `workload` into `trace` (`bin`:
/// where nest and nest-load are).
fn record_command(workload: Workload, bin: &Path, trace: &Path, clock: GuestClock) -> String {
    let nest = shell_quote(&bin.join("nest").to_string_lossy());
    let trace = shell_quote(&trace.to_string_lossy());
    let load = shell_quote(&bin.join("nest-load").to_string_lossy());
    let record = |buffer_kb: u32, command: &str| {
        format!(
            "{nest} trace record --buffer-kb {buffer_kb} --meta {GUEST_CLOCK_META}={clock} \
             --out {trace} -- {command} >&2"
        )
    };
    match workload {
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

pub fn run(args: ValidateArgs) -> Result<ExitCode> {
    let (kernels, clock_note) =
        kernels_for_clock(args.kernels.as_deref(), args.guest_clock, args.from_traces)?;
    let (recordings, notes) = recordings_asked(kernels.as_deref(), &args)?;
    for note in clock_note.into_iter().chain(notes) {
        eprintln!("nest validate: note: {note}");
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let out = nest_vm::output_dir(&args.out)?;
    // The runs compared: those recorded now, or those asked for (else all)
    // of an earlier recording; never an earlier recording's extra runs.
    let recorded_runs = args.runs.unwrap_or(DEFAULT_RUNS);
    let runs = if args.from_traces {
        args.runs
    } else {
        Some(recorded_runs)
    };
    if !args.from_traces {
        for kernel in kernels_of(&recordings) {
            let schedulers: Vec<Scheduler> = recordings
                .iter()
                .filter(|r| r.kernel == kernel)
                .map(|r| r.scheduler)
                .collect();
            let guest = Guest {
                timeout: args.timeout,
                clock: args.guest_clock,
                runs: recorded_runs,
            };
            record_in_guest(&out, kernel, &schedulers, &args.workloads, guest)?;
        }
    }
    let options = Options {
        others: args.others,
        replays: args.replays,
        runs,
    };
    let log = |line: &str| eprintln!("nest validate: {line}");
    let report = compare::compare_recordings(&out, &recordings, &args.workloads, options, &log)?;
    report.write(&out)?;
    print!("{}", report.table().to_text());
    let outside = report.outside();
    eprintln!(
        "nest validate: {} figures, {outside} outside their band; wrote figures.csv, \
         validate.html and the replays (*.sim.nest.jsonl) in {}",
        report.figures(),
        out.display()
    );
    Ok(if outside == 0 {
        ExitCode::SUCCESS
    } else {
        crate::check_failed()
    })
}

/// The recordings of `kernels` (those that boot under the guest's clock)
/// and `--schedulers`, and a note for each pair left out; a kernel or
/// scheduler named explicitly that would have no recording is a usage
/// error.
fn recordings_asked(
    kernels: Option<&[LinuxVersion]>,
    args: &ValidateArgs,
) -> Result<(Vec<Recording>, Vec<String>)> {
    compare::recordings(kernels, args.schedulers.as_deref()).map_err(usage)
}

/// The kernels of `recordings`, each once, in order.
fn kernels_of(recordings: &[Recording]) -> Vec<LinuxVersion> {
    let mut kernels: Vec<LinuxVersion> = Vec::new();
    for r in recordings {
        if !kernels.contains(&r.kernel) {
            kernels.push(r.kernel);
        }
    }
    kernels
}

/// Where nest is, and nest-load and scx_nest beside it.
fn programs_dir() -> Result<PathBuf> {
    std::env::current_exe()
        .context("cannot find the nest binary")?
        .parent()
        .map(Path::to_path_buf)
        .context("the nest binary has no directory")
}

/// The programs the guest will run are beside nest, or the error says
/// how to build them.
fn check_programs(bin: &Path, schedulers: &[Scheduler]) -> Result<()> {
    let mut needed = vec!["nest-load"];
    if schedulers.contains(&Scheduler::ScxNest) {
        needed.push("scx_nest");
    }
    for program in needed {
        if !bin.join(program).is_file() {
            bail!(
                "{} has no {program}: build it next to nest (cargo build -p {program}, or \
                 --release for a release nest)",
                bin.display()
            );
        }
    }
    Ok(())
}

/// How the guest is run: its deadline, its clock, and how many times it
/// records each workload.
#[derive(Clone, Copy, Debug)]
struct Guest {
    timeout: Duration,
    clock: GuestClock,
    runs: u32,
}

/// Boots the guest on `kernel` and records every workload under each of
/// `schedulers`.
fn record_in_guest(
    out: &Path,
    kernel: LinuxVersion,
    schedulers: &[Scheduler],
    workloads: &[Workload],
    guest: Guest,
) -> Result<()> {
    let choice = if kernel == LinuxVersion::Linux510 {
        KernelChoice::Linux510
    } else {
        KernelChoice::Newest
    };
    let kernel_dir = ensure_kernel(false, &choice)?;
    let bin = programs_dir()?;
    check_programs(&bin, schedulers)?;
    if workloads.contains(&Workload::Configure) {
        // The guest has no network: fetch on the host, which it mounts.
        source::fetch(CONFIGURE_PACKAGE)?;
    }
    let recordings: Vec<Recording> = schedulers
        .iter()
        .map(|&scheduler| Recording { kernel, scheduler })
        .collect();
    let lib = if schedulers.contains(&Scheduler::ScxNest) {
        Some(guest_lib()?)
    } else {
        None
    };
    let script = guest_script(out, &bin, lib.as_deref(), &recordings, workloads, guest);
    let spec = VmSpec {
        numa: true,
        timeout: guest.timeout,
        guest_clock: guest.clock,
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
        "nest validate: recording {} workload(s) {} time(s) under {} ({}) in the 2x4x2 guest, \
         guest clock {}",
        workloads.len(),
        guest.runs,
        value_name(kernel),
        names(schedulers),
        guest.clock
    );
    // The guest runs its command with sh; the library is bash's.
    let traces: Vec<PathBuf> = recordings
        .iter()
        .flat_map(|r| {
            recording_order(workloads, guest.runs).map(|(w, run)| r.trace_path(out, w, run))
        })
        .collect();
    let finished = AtomicBool::new(false);
    let outcome = std::thread::scope(|s| {
        s.spawn(|| report_recordings(&traces, &finished));
        let outcome = nest_vm::run(&spec, &format!("exec bash -c {}", shell_quote(&script)));
        finished.store(true, Ordering::Relaxed);
        outcome
    })?;
    if let Some(failure) = outcome.failure() {
        bail!(
            "the {} guest failed: {failure}\n{}",
            value_name(kernel),
            outcome.stderr
        );
    }
    Ok(())
}

/// Progress while the guest records: a line as each of `traces` is
/// written (the recorder writes its trace when its command ends), until
/// `finished`. A trace older than the guest's start is an earlier run's.
fn report_recordings(traces: &[PathBuf], finished: &AtomicBool) {
    let start = std::time::SystemTime::now();
    let mut reported = vec![false; traces.len()];
    while !finished.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(500));
        for i in newly_written(traces, start, &mut reported) {
            let name = traces[i].file_name().unwrap_or_default().to_string_lossy();
            let done = reported.iter().filter(|&&r| r).count();
            eprintln!(
                "nest validate: recorded {name} ({done} of {}, {} s)",
                traces.len(),
                start.elapsed().unwrap_or_default().as_secs()
            );
        }
    }
}

/// The indices of `traces` written since `start` and not yet `reported`,
/// marked reported.
fn newly_written(
    traces: &[PathBuf],
    start: std::time::SystemTime,
    reported: &mut [bool],
) -> Vec<usize> {
    let written = |path: &PathBuf| {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t >= start)
    };
    let new: Vec<usize> = (0..traces.len())
        .filter(|&i| !reported[i] && written(&traces[i]))
        .collect();
    for &i in &new {
        reported[i] = true;
    }
    new
}

/// The guest scripts' shell library: `with_scx_nest` starts scx_nest,
/// waits until it is attached, and stops it, as the VM tests do.
const GUEST_LIB: &str = "tests/vm/lib.sh";

/// The text of [`GUEST_LIB`]. The script carries it rather than sourcing
/// it: the guest sees the repository only if it is on a path the guest
/// shares (a clone under /tmp is hidden by the guest's own tmpfs).
fn guest_lib() -> Result<String> {
    let path = find_repo_file(GUEST_LIB)?;
    std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))
}

/// The order the guest records in under one scheduler: every workload of
/// the first run, then every workload again for each further run.
fn recording_order(workloads: &[Workload], runs: u32) -> impl Iterator<Item = (Workload, u32)> {
    (1..=runs).flat_map(move |run| workloads.iter().map(move |&w| (w, run)))
}

/// The guest's bash script: records every workload under each recording's
/// scheduler, in order, into its trace, then all of them again for each
/// further run; stops at the first failure (`bin`: where nest, nest-load
/// and scx_nest are; `lib`: the text of [`GUEST_LIB`], needed for
/// scx_nest).
fn guest_script(
    out: &Path,
    bin: &Path,
    lib: Option<&str>,
    recordings: &[Recording],
    workloads: &[Workload],
    guest: Guest,
) -> String {
    let mut script = format!("set -u\nbin={}\n", shell_quote(&bin.to_string_lossy()));
    if let Some(lib) = lib {
        script.push_str(&format!("# {GUEST_LIB}\n{lib}\n"));
    }
    for &recording in recordings {
        let records: Vec<String> = recording_order(workloads, guest.runs)
            .map(|(w, run)| record_command(w, bin, &recording.trace_path(out, w, run), guest.clock))
            .collect();
        match recording.scheduler {
            Scheduler::Default => {
                for record in records {
                    script.push_str(&format!("{record} || exit 1\n"));
                }
            }
            Scheduler::ScxNest => {
                // One attach for all the workloads: the recordings run in
                // a function with_scx_nest calls once scx_nest is attached.
                script.push_str(&format!(
                    "record_under_scx_nest() {{\n{}\n}}\n\
                     with_scx_nest {SCX_NEST_OPTIONS} -- record_under_scx_nest || exit 1\n",
                    records.join(" &&\n")
                ));
            }
        }
    }
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_reports_each_trace_written_since_the_start_once() {
        let dir = tempfile::tempdir().unwrap();
        let traces: Vec<PathBuf> = ["a", "b", "old"]
            .iter()
            .map(|n| dir.path().join(format!("{n}.nest.jsonl")))
            .collect();
        std::fs::write(&traces[2], "an earlier run's").unwrap();
        let old = std::time::SystemTime::now() - Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&traces[2])
            .unwrap()
            .set_modified(old)
            .unwrap();
        let start = std::time::SystemTime::now() - Duration::from_secs(1);
        let mut reported = vec![false; 3];
        assert!(newly_written(&traces, start, &mut reported).is_empty());
        std::fs::write(&traces[1], "b").unwrap();
        assert_eq!(newly_written(&traces, start, &mut reported), [1]);
        std::fs::write(&traces[0], "a").unwrap();
        assert_eq!(newly_written(&traces, start, &mut reported), [0]);
        assert!(newly_written(&traces, start, &mut reported).is_empty());
        assert_eq!(reported, [true, true, false]);
    }

    #[test]
    fn configure_is_recorded_in_a_fresh_copy_of_its_source_tree() {
        let command = record_command(
            Workload::Configure,
            Path::new("/b"),
            Path::new("/o/c.nest.jsonl"),
            GuestClock::Host,
        );
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
                "/b/nest trace record --buffer-kb 32768 --meta guest_clock=host --out \
                 /o/c.nest.jsonl -- ./configure >&2)"
            ),
            "{command}"
        );
        let chain = record_command(
            Workload::Chain,
            Path::new("/b"),
            Path::new("/o/t"),
            GuestClock::Icount { shift: 0 },
        );
        assert_eq!(
            chain,
            "/b/nest trace record --buffer-kb 8192 --meta guest_clock=icount:0 --out /o/t -- \
             /b/nest-load churn --count 40 --work-us 20000 >&2"
        );
    }

    fn recording(kernel: LinuxVersion, scheduler: Scheduler) -> Recording {
        Recording { kernel, scheduler }
    }

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: ValidateArgs,
    }

    fn parse(argv: &[&str]) -> Result<ValidateArgs, clap::Error> {
        use clap::Parser;
        Cli::try_parse_from(std::iter::once("validate").chain(argv.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn a_recording_nobody_can_make_is_a_usage_error() {
        let args = parse(&["--kernels", "linux-5.10", "--schedulers", "scx_nest"]).unwrap();
        let err = recordings_asked(args.kernels.as_deref(), &args).unwrap_err();
        let usage = err.downcast_ref::<clap::Error>().expect("a usage error");
        assert_eq!(usage.exit_code(), 2);
        // The message is the library's, saying what to ask for instead.
        assert!(
            err.to_string().contains("add default to --schedulers"),
            "{err}"
        );
        // The value's name is scx_nest, as the program's.
        assert!(parse(&["--schedulers", "scx-nest"]).is_err());
    }

    #[test]
    fn the_guest_script_records_under_scx_nest_while_it_is_attached() {
        let script = guest_script(
            Path::new("/o"),
            Path::new("/b"),
            Some("with_scx_nest() { :; }"),
            &[
                recording(LinuxVersion::Linux7, Scheduler::Default),
                recording(LinuxVersion::Linux7, Scheduler::ScxNest),
            ],
            &[Workload::Chain, Workload::Batch],
            guest(1),
        );
        let record = |trace: &str, load: &str| {
            format!(
                "/b/nest trace record --buffer-kb 8192 --meta guest_clock=host --out \
                 /o/{trace}.nest.jsonl -- /b/nest-load {load} >&2"
            )
        };
        let chain = "churn --count 40 --work-us 20000";
        let batch = "batch --tasks 16 --work-ms 200";
        let expected = format!(
            "set -u\nbin=/b\n# tests/vm/lib.sh\nwith_scx_nest() {{ :; }}\n\
             {} || exit 1\n{} || exit 1\n\
             record_under_scx_nest() {{\n{} &&\n{}\n}}\n\
             with_scx_nest --trace-nests --trace-placements -- record_under_scx_nest || exit 1\n",
            record("linux-7-chain", chain),
            record("linux-7-batch", batch),
            record("linux-7-scx_nest-chain", chain),
            record("linux-7-scx_nest-batch", batch),
        );
        assert_eq!(script, expected);
        // The default scheduler alone needs no library.
        let script = guest_script(
            Path::new("/o"),
            Path::new("/b"),
            None,
            &[recording(LinuxVersion::Linux510, Scheduler::Default)],
            &[Workload::Chain],
            guest(1),
        );
        assert_eq!(
            script,
            format!(
                "set -u\nbin=/b\n{} || exit 1\n",
                record("linux-5.10-chain", chain)
            )
        );
        // Several runs: every workload, then every workload again.
        let script = guest_script(
            Path::new("/o"),
            Path::new("/b"),
            None,
            &[recording(LinuxVersion::Linux510, Scheduler::Default)],
            &[Workload::Chain, Workload::Batch],
            guest(2),
        );
        let runs = [
            record("linux-5.10-chain", chain),
            record("linux-5.10-batch", batch),
            record("linux-5.10-chain-run2", chain),
            record("linux-5.10-batch-run2", batch),
        ];
        assert_eq!(
            script,
            format!("set -u\nbin=/b\n{} || exit 1\n", runs.join(" || exit 1\n"))
        );
    }

    /// The guest of the script tests: the host's clock, `runs` runs.
    fn guest(runs: u32) -> Guest {
        Guest {
            timeout: Duration::from_secs(60),
            clock: GuestClock::Host,
            runs,
        }
    }

    #[test]
    fn replays_are_21_unless_asked_and_seeds_is_their_older_spelling() {
        assert_eq!(parse(&[]).unwrap().replays, 21);
        assert_eq!(parse(&["--replays", "3"]).unwrap().replays, 3);
        assert_eq!(parse(&["--seeds", "5"]).unwrap().replays, 5);
        assert_eq!(parse(&["--replays", "0"]).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn the_guest_clock_is_host_unless_asked_and_a_bad_one_is_a_usage_error() {
        assert_eq!(parse(&[]).unwrap().guest_clock, GuestClock::Host);
        let args = parse(&["--guest-clock", "icount:3"]).unwrap();
        assert_eq!(args.guest_clock, GuestClock::Icount { shift: 3 });
        for bad in ["icount:11", "auto", "icount:x"] {
            let err = parse(&["--guest-clock", bad]).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad}");
            assert!(err.to_string().contains("expected host, icount"), "{err}");
        }
    }

    #[test]
    fn under_icount_5_10_is_skipped_unless_named_and_refused_if_named() {
        let icount = GuestClock::Icount { shift: 0 };
        let (kernels, note) = kernels_for_clock(None, icount, false).unwrap();
        assert_eq!(kernels, Some(vec![LinuxVersion::Linux7]));
        assert!(note.unwrap().starts_with("linux-5.10: skipped"));
        let err = kernels_for_clock(Some(&ALL_KERNELS), icount, false).unwrap_err();
        let err = err.downcast_ref::<clap::Error>().expect("a usage error");
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("--guest-clock host"), "{err}");
        // The host's clock boots both; recorded traces are compared anyway.
        let (kernels, note) = kernels_for_clock(None, GuestClock::Host, false).unwrap();
        assert_eq!((kernels, note), (None, None));
        let both = kernels_for_clock(Some(&ALL_KERNELS), icount, true).unwrap();
        assert_eq!(both, (Some(ALL_KERNELS.to_vec()), None));
    }

    #[test]
    fn the_guest_library_defines_what_the_script_calls() {
        let text = guest_lib().unwrap();
        assert!(
            text.contains("\nwith_scx_nest() {\n"),
            "no with_scx_nest in {GUEST_LIB}"
        );
    }

    #[test]
    fn programs_missing_beside_nest_are_named_with_how_to_build_them() {
        let dir = tempfile::tempdir().unwrap();
        let err = check_programs(dir.path(), &[Scheduler::Default]).unwrap_err();
        assert!(
            err.to_string().contains("has no nest-load: build it"),
            "{err}"
        );
        std::fs::write(dir.path().join("nest-load"), "").unwrap();
        check_programs(dir.path(), &[Scheduler::Default]).unwrap();
        let err =
            check_programs(dir.path(), &[Scheduler::Default, Scheduler::ScxNest]).unwrap_err();
        assert!(
            err.to_string()
                .contains("has no scx_nest: build it next to nest (cargo build -p scx_nest"),
            "{err}"
        );
    }
}
