//! Record a real schedule through tracefs.
//!
//! The recorder works in a private tracefs instance
//! (`<tracefs>/instances/nest-<pid>`), so other tracing users are not
//! disturbed, and removes it afterwards, also on errors and on Ctrl-C
//! (SIGINT/SIGTERM are caught while recording; the command, which gets the
//! terminal's SIGINT itself, is waited for). It enables the scheduler
//! tracepoints (sched_switch, sched_wakeup, sched_wakeup_new,
//! sched_migrate_task, sched_process_fork, sched_process_exec,
//! sched_process_exit) and, where the kernel has them, sched_waking (who
//! woke whom), a kprobe on `try_to_wake_up()` for the wake flags (whether
//! a wakeup was `WF_SYNC`; removed afterwards), power:cpu_frequency and
//! power:cpu_idle, and bpf_trace:bpf_trace_printk (where `scx_nest
//! --trace-nests` reports its nests); sets the per-CPU buffer size and the `mono` trace
//! clock; runs a command (or waits a duration, system-wide: all tasks of the
//! machine are recorded either way); then reads the instance's `trace` text
//! with the tracefs reader. Meanwhile it reads each CPU's frequency from
//! the best source the machine has ([`crate::freq`]: APERF/MPERF counters
//! every 4 ms, else the cpu_frequency tracepoint, else `scaling_cur_freq`
//! polled) as `Frequency` events on the same monotonic clock, and names
//! the source in the trace's `frequency_source`.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

pub use crate::freq::FREQUENCY_SOURCE_META;
use crate::freq::{self, Sampler};
use crate::model::{Cpu, KERNEL_THREADS_META, Pid, Trace};
use crate::readers::{WAKE_FLAGS_EVENT, read_tracefs};
use nest_topology::read_sysfs_topology;

/// Required tracepoints.
pub const SCHED_EVENTS: &[&str] = &[
    "sched_switch",
    "sched_wakeup",
    "sched_wakeup_new",
    "sched_migrate_task",
    "sched_process_fork",
    "sched_process_exec",
    "sched_process_exit",
];
/// Tracepoints used when the kernel has them.
pub const POWER_EVENTS: &[&str] = &["cpu_frequency", "cpu_idle"];
/// Fired in the waker's context, so it names who woke whom (`sched_wakeup`
/// may fire on the wakee's CPU instead).
pub const WAKER_EVENT: &str = "sched_waking";
/// BPF programs' `bpf_printk()`: `scx_nest --trace-nests` reports its
/// nests there.
pub const BPF_PRINT_EVENT: (&str, &str) = ("bpf_trace", "bpf_trace_printk");

/// What to record.
#[derive(Clone, Debug)]
pub enum Workload {
    /// Run this command (program and arguments) and record until it exits.
    Command(Vec<String>),
    /// Record the whole machine for this long.
    Duration(Duration),
}

/// How to record.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// tracefs mount point; `None` finds it (/sys/kernel/tracing, then
    /// /sys/kernel/debug/tracing).
    pub tracefs: Option<PathBuf>,
    /// Per-CPU ring buffer size in KiB.
    pub buffer_kb: u32,
    /// Period of the cpufreq sampling.
    pub freq_period: Duration,
    /// Filesystem root for sysfs (topology and cpufreq): `/` normally.
    pub sysfs_root: PathBuf,
    /// Probe `try_to_wake_up()` for the wake flags (`WF_SYNC`).
    pub wake_flags: bool,
}

impl Default for RecordOptions {
    fn default() -> Self {
        Self {
            tracefs: None,
            buffer_kb: 32 * 1024,
            freq_period: Duration::from_millis(10),
            sysfs_root: PathBuf::from("/"),
            wake_flags: true,
        }
    }
}

/// Record `workload`. Needs root (or write access to tracefs).
pub fn record(workload: &Workload, opts: &RecordOptions) -> anyhow::Result<Trace> {
    let tracefs = find_tracefs(opts.tracefs.as_deref())?;
    // Created before the instance, so removed after it (locals drop in
    // reverse order): a probe cannot be removed while an instance uses it.
    let probe = opts
        .wake_flags
        .then(|| WakeFlagsProbe::create(&tracefs))
        .flatten();
    let instance = Instance::create(&tracefs)?;
    let mut missing = instance.configure(opts.buffer_kb)?;
    // Without the probe (refused by the kernel, or not enabled in the
    // instance) wakeups still name their wakers, without the sync flag.
    let probed = probe
        .as_ref()
        .is_some_and(|p| instance.write(&p.enable_file(), "1").is_ok());
    if opts.wake_flags && !probed {
        missing.push("kprobe:try_to_wake_up".to_string());
    }
    let interrupted = Arc::new(AtomicBool::new(false));
    let _signals = Signals::catch(&interrupted)?;
    let topology = read_sysfs_topology(&opts.sysfs_root).ok();
    let cpus: Vec<Cpu> = (0..topology.as_ref().map_or(0, |t| t.nr_cpus() as Cpu)).collect();
    let mut sampler = Sampler::new(&opts.sysfs_root, &cpus);
    let kernel_threads_at_start = kernel_thread_pids(&opts.sysfs_root);
    instance.write("tracing_on", "1")?;
    let started = mono_ns();
    let outcome = run_workload(workload, opts, &interrupted, &mut sampler);
    instance.write("tracing_on", "0")?;
    let outcome = outcome?;
    // Those alive at either end: kworkers come and go.
    let kernel_threads = kernel_threads_at_start.map(|mut pids| {
        pids.extend(kernel_thread_pids(&opts.sysfs_root).unwrap_or_default());
        pids
    });
    let text = instance.read_trace()?;
    let overrun = instance.overrun();
    drop(instance);
    let mut trace = read_tracefs(&text).context("cannot parse the recorded trace")?;
    sampler.merge_into(&mut trace, started, opts.freq_period);
    freq::bands_meta(&mut trace, &opts.sysfs_root);
    if let Some(topology) = topology
        && topology.nr_cpus() >= trace.topology.nr_cpus()
    {
        trace.topology = topology;
    }
    describe(
        &mut trace,
        workload,
        opts,
        &outcome,
        &missing,
        overrun,
        interrupted.load(Ordering::SeqCst),
    );
    trace.meta_set("wake_flags_probed", probed.to_string());
    if let Some(pids) = kernel_threads {
        let list: Vec<String> = pids.iter().map(u32::to_string).collect();
        trace.meta_set(KERNEL_THREADS_META, list.join(","));
    }
    Ok(trace)
}

/// `PF_KTHREAD` (include/linux/sched.h): the task is a kernel thread.
const PF_KTHREAD: u64 = 0x0020_0000;

/// The pids of the kernel threads alive now, from `root`/proc/PID/stat
/// (its ninth field, `flags`); `None` if /proc cannot be read. A task
/// that exits while it is read is left out.
fn kernel_thread_pids(root: &Path) -> Option<BTreeSet<Pid>> {
    let entries = fs::read_dir(root.join("proc")).ok()?;
    let pids = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<Pid>().ok())
        .filter(|pid| {
            fs::read_to_string(root.join(format!("proc/{pid}/stat")))
                .ok()
                .and_then(|stat| stat_flags(&stat))
                .is_some_and(|flags| flags & PF_KTHREAD != 0)
        })
        .collect();
    Some(pids)
}

/// The `flags` field of a /proc/PID/stat line: the seventh field after the
/// `(comm)` (which may itself hold spaces and parentheses).
fn stat_flags(stat: &str) -> Option<u64> {
    let (_, after_comm) = stat.rsplit_once(')')?;
    after_comm.split_whitespace().nth(6)?.parse().ok()
}

/// The tracefs mount point, or an error saying how to mount it.
pub fn find_tracefs(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    let candidates: Vec<PathBuf> = match given {
        Some(p) => vec![p.to_path_buf()],
        None => vec![
            "/sys/kernel/tracing".into(),
            "/sys/kernel/debug/tracing".into(),
        ],
    };
    for dir in &candidates {
        if dir.join("instances").is_dir() && dir.join("events").is_dir() {
            return Ok(dir.clone());
        }
    }
    bail!(
        "tracefs is not mounted at {}: mount it with `mount -t tracefs nodev /sys/kernel/tracing` (as root)",
        candidates[0].display()
    )
}

/// A private tracefs instance, removed when dropped.
struct Instance {
    path: PathBuf,
}

impl Instance {
    fn create(tracefs: &Path) -> anyhow::Result<Self> {
        let path = tracefs.join(format!("instances/nest-{}", std::process::id()));
        match fs::create_dir(&path) {
            Ok(()) => Ok(Self { path }),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => bail!(
                "cannot create tracefs instance {}: permission denied; recording needs root",
                path.display()
            ),
            Err(e) => {
                Err(e).with_context(|| format!("cannot create tracefs instance {}", path.display()))
            }
        }
    }

    fn write(&self, file: &str, value: &str) -> anyhow::Result<()> {
        let path = self.path.join(file);
        fs::write(&path, value)
            .with_context(|| format!("cannot write \"{value}\" to {}", path.display()))
    }

    /// Set buffer, clock and events; returns the optional events missing.
    fn configure(&self, buffer_kb: u32) -> anyhow::Result<Vec<String>> {
        self.write("buffer_size_kb", &buffer_kb.to_string())?;
        self.write("trace_clock", "mono")?;
        for event in SCHED_EVENTS {
            let enable = format!("events/sched/{event}/enable");
            if !self.path.join(&enable).exists() {
                bail!("the kernel has no sched:{event} tracepoint");
            }
            self.write(&enable, "1")?;
        }
        let mut missing = Vec::new();
        self.enable_if_present("sched", WAKER_EVENT, &mut missing)?;
        for event in POWER_EVENTS {
            self.enable_if_present("power", event, &mut missing)?;
        }
        let (system, event) = BPF_PRINT_EVENT;
        self.enable_if_present(system, event, &mut missing)?;
        Ok(missing)
    }

    /// Enables tracepoint `system:event`, or adds it to `missing` when the
    /// kernel has none.
    fn enable_if_present(
        &self,
        system: &str,
        event: &str,
        missing: &mut Vec<String>,
    ) -> anyhow::Result<()> {
        let enable = format!("events/{system}/{event}/enable");
        if self.path.join(&enable).exists() {
            self.write(&enable, "1")
        } else {
            missing.push(format!("{system}:{event}"));
            Ok(())
        }
    }

    fn read_trace(&self) -> anyhow::Result<String> {
        let path = self.path.join("trace");
        let bytes = fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Events lost to full buffers (sum of per-CPU `overrun:`).
    fn overrun(&self) -> u64 {
        let Ok(cpus) = fs::read_dir(self.path.join("per_cpu")) else {
            return 0;
        };
        cpus.filter_map(|e| fs::read_to_string(e.ok()?.path().join("stats")).ok())
            .flat_map(|s| {
                s.lines()
                    .filter_map(|l| l.strip_prefix("overrun:")?.trim().parse::<u64>().ok())
                    .collect::<Vec<_>>()
            })
            .sum()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = fs::write(self.path.join("tracing_on"), "0");
        for _ in 0..50 {
            if fs::remove_dir(&self.path).is_ok() || !self.path.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!(
            "warning: could not remove tracefs instance {}",
            self.path.display()
        );
    }
}

/// A kprobe on `try_to_wake_up()`'s entry printing the caller's wake flags
/// (its third argument) as event [`WAKE_FLAGS_EVENT`], in a group of our
/// own; removed when dropped. Dynamic events are global, so the file is
/// only ever appended to: a plain write would delete everyone's probes.
struct WakeFlagsProbe {
    events_file: PathBuf,
    group: String,
}

impl WakeFlagsProbe {
    /// `None` when the kernel cannot make it (no kprobe events, lockdown,
    /// `$argN` unsupported): the trace then has wakers without sync flags.
    fn create(tracefs: &Path) -> Option<Self> {
        let probe = Self {
            events_file: tracefs.join("kprobe_events"),
            group: format!("nest_{}", std::process::id()),
        };
        let definition = format!(
            "p:{}/{WAKE_FLAGS_EVENT} try_to_wake_up wake_flags=$arg3:u32",
            probe.group
        );
        probe.append(&definition).ok().map(|()| probe)
    }

    /// The probe's `enable` file, relative to a tracefs instance.
    fn enable_file(&self) -> String {
        format!("events/{}/{WAKE_FLAGS_EVENT}/enable", self.group)
    }

    fn append(&self, line: &str) -> std::io::Result<()> {
        let mut file = fs::OpenOptions::new()
            .append(true)
            .open(&self.events_file)?;
        file.write_all(format!("{line}\n").as_bytes())
    }
}

impl Drop for WakeFlagsProbe {
    fn drop(&mut self) {
        let removal = format!("-:{}/{WAKE_FLAGS_EVENT}", self.group);
        if let Err(e) = self.append(&removal) {
            eprintln!(
                "warning: could not remove kprobe {}/{WAKE_FLAGS_EVENT} ({e}): remove it with \
                 `echo '{removal}' >> {}`",
                self.group,
                self.events_file.display()
            );
        }
    }
}

/// SIGINT and SIGTERM set a flag instead of killing us, until dropped.
struct Signals(Vec<signal_hook::SigId>);

impl Signals {
    fn catch(flag: &Arc<AtomicBool>) -> anyhow::Result<Self> {
        let mut ids = Vec::new();
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            ids.push(
                signal_hook::flag::register(sig, Arc::clone(flag))
                    .context("cannot catch signals")?,
            );
        }
        Ok(Self(ids))
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        for id in self.0.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// What happened to the workload.
struct Outcome {
    status: Option<std::process::ExitStatus>,
    pid: Option<u32>,
}

fn run_workload(
    workload: &Workload,
    opts: &RecordOptions,
    interrupted: &AtomicBool,
    sampler: &mut Sampler,
) -> anyhow::Result<Outcome> {
    let tick = sampler.period(opts.freq_period).unwrap_or(IDLE_POLL);
    match workload {
        Workload::Duration(d) => {
            let start = Instant::now();
            while start.elapsed() < *d && !interrupted.load(Ordering::SeqCst) {
                sampler.sample(mono_ns);
                std::thread::sleep(tick.min(d.saturating_sub(start.elapsed())));
            }
            Ok(Outcome {
                status: None,
                pid: None,
            })
        }
        Workload::Command(argv) => {
            let (program, args) = argv.split_first().context("no command to run")?;
            let mut child = Command::new(program)
                .args(args)
                .spawn()
                .with_context(|| format!("cannot run {program}"))?;
            let pid = child.id();
            let mut killed = false;
            let status = loop {
                if let Some(status) = child.try_wait().context("cannot wait for the command")? {
                    break status;
                }
                if interrupted.load(Ordering::SeqCst) && !killed {
                    std::thread::sleep(Duration::from_millis(200));
                    let _ = child.kill();
                    killed = true;
                }
                sampler.sample(mono_ns);
                std::thread::sleep(tick);
            };
            Ok(Outcome {
                status: Some(status),
                pid: Some(pid),
            })
        }
    }
}

/// The recorder's wake-up period when there is no frequency to sample
/// (a virtual machine): then the wake-ups only look for the command's
/// exit, and each is a task the recorded schedule did not ask for (in an
/// emulated guest, 502 of the 1162 times a configure task found its idle
/// previous CPU claimed by another task's wake-up, the taker was the
/// recorder waking every 10 ms).
const IDLE_POLL: Duration = Duration::from_millis(100);

fn describe(
    trace: &mut Trace,
    workload: &Workload,
    opts: &RecordOptions,
    outcome: &Outcome,
    missing: &[String],
    overrun: u64,
    interrupted: bool,
) {
    trace.meta_set(
        "recorder",
        "nest trace record (tracefs instance, trace_clock=mono)",
    );
    match workload {
        Workload::Command(argv) => trace.meta_set("command", argv.join(" ")),
        Workload::Duration(d) => trace.meta_set("duration_s", format!("{}", d.as_secs_f64())),
    }
    if let Some(pid) = outcome.pid {
        trace.meta_set("command_pid", pid.to_string());
    }
    if let Some(status) = outcome.status {
        trace.meta_set("exit_status", status.to_string());
    }
    let read = |p: &str| fs::read_to_string(opts.sysfs_root.join(p)).map(|s| s.trim().to_string());
    if let Ok(release) = read("proc/sys/kernel/osrelease") {
        trace.meta_set("kernel", release);
    }
    if let Ok(host) = read("proc/sys/kernel/hostname") {
        trace.meta_set("hostname", host);
    }
    trace.meta_set("buffer_kb", opts.buffer_kb.to_string());
    trace.meta_set("overrun_events", overrun.to_string());
    trace.meta_set("missing_events", missing.join(","));
    trace.meta_set("interrupted", interrupted.to_string());
}

/// CLOCK_MONOTONIC in ns: tracefs' `mono` clock.
fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpufreq_samples_become_frequency_events_on_changes() {
        let root = std::env::temp_dir().join(format!("nest-trace-freq-{}", std::process::id()));
        let file = |cpu: u32| {
            root.join(format!(
                "sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq"
            ))
        };
        for cpu in 0..2 {
            fs::create_dir_all(file(cpu).parent().unwrap()).unwrap();
            fs::write(file(cpu), "1200000\n").unwrap();
        }
        let mut sampler = Sampler::Polled(freq::Polled::new(&root));
        let period = Duration::from_millis(10);
        assert_eq!(sampler.period(period), Some(period));
        let started = mono_ns();
        sampler.sample(mono_ns);
        sampler.sample(mono_ns);
        fs::write(file(1), "3000000\n").unwrap();
        sampler.sample(mono_ns);
        let mut trace = Trace::default();
        sampler.merge_into(&mut trace, started, period);
        let got: Vec<(Cpu, u32)> = trace
            .events
            .iter()
            .map(|e| match e.kind {
                crate::model::EventKind::Frequency { khz } => (e.cpu, khz),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(got, vec![(0, 1_200_000), (1, 1_200_000), (1, 3_000_000)]);
        assert_eq!(trace.meta_get("cpufreq_samples"), Some("3"));
        fs::remove_dir_all(&root).unwrap();
        let none = Sampler::Polled(freq::Polled::new(Path::new("/nonexistent")));
        assert_eq!(
            none.period(period),
            None,
            "nothing to sample: the idle period"
        );
    }

    #[test]
    fn kernel_threads_are_found_by_their_pf_kthread_flag() {
        let root = std::env::temp_dir().join(format!("nest-trace-kthreads-{}", std::process::id()));
        let stats = [
            // A user task whose name has spaces and a parenthesis.
            (1, "1 (sh (x) y) S 0 1 1 0 -1 4194560 100 0 0 0"),
            (2, "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0"),
            (16, "16 (rcu_preempt) I 2 0 0 0 -1 2129984 0 0 0 0"),
            (
                17,
                "17 (kworker/u16:1-events) I 2 0 0 0 -1 69238880 0 0 0 0",
            ),
        ];
        for (pid, stat) in stats {
            fs::create_dir_all(root.join(format!("proc/{pid}"))).unwrap();
            fs::write(root.join(format!("proc/{pid}/stat")), stat).unwrap();
        }
        // Not a task's directory, and a task that exited mid-read.
        fs::create_dir_all(root.join("proc/sys")).unwrap();
        fs::create_dir_all(root.join("proc/99")).unwrap();
        let pids = kernel_thread_pids(&root).unwrap();
        assert_eq!(pids, BTreeSet::from([2, 16, 17]));
        assert_eq!(kernel_thread_pids(&root.join("none")), None);
        fs::remove_dir_all(&root).unwrap();
    }
}
