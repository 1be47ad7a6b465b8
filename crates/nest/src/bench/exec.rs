//! Running the plan: one run at a time, the scheduler attached around the
//! workload, progress on stderr, results written after every run so that
//! an interrupted bench keeps what it finished.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::governor::Governors;
use super::plan::PlannedRun;
use super::process::{Child, Waited, describe, with_program_path};
use super::results::{Cell, Results, Run, Status, Traced};
use super::sched;
use super::suite::Combine;
use crate::source;

pub struct Options {
    pub out: PathBuf,
    /// A workload still running then is killed and its run FAILED.
    pub timeout: Duration,
    /// A scheduler not attached by then is FAILED (a hang catcher).
    pub attach_timeout: Duration,
}

/// SIGINT and SIGTERM set a flag instead of killing `nest bench`, so that
/// it can stop the workload and the scheduler and keep its results.
pub fn stop_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&flag))?;
    }
    Ok(flag)
}

/// The numbers after each occurrence of `after` in `output`, combined
/// (`Time: 0.412` -> 0.412, `round_trips=5120` -> 5120; cyclictest's
/// `Avg:` of every thread -> their mean). Occurrences without a number
/// are skipped.
pub fn parse_metric(output: &str, after: &str, combine: Combine) -> Option<f64> {
    let values: Vec<f64> = output
        .split(after)
        .skip(1)
        .filter_map(|rest| {
            let number: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'))
                .collect();
            number.parse().ok().filter(|v: &f64| v.is_finite())
        })
        .collect();
    combine.apply(&values)
}

/// `{cpus}` and `{Ncpus}` (N times the CPUs: `{2cpus}`, `{200cpus}`) in
/// a command, replaced.
pub fn expand(command: &[String], cpus: usize) -> Vec<String> {
    command.iter().map(|arg| expand_arg(arg, cpus)).collect()
}

fn expand_arg(arg: &str, cpus: usize) -> String {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let inside = &rest[open + 1..];
        let factor = inside
            .find("cpus}")
            .map(|end| (end, &inside[..end]))
            .filter(|(_, n)| n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|(end, n)| Some((end, if n.is_empty() { 1 } else { n.parse().ok()? })));
        match factor {
            Some((end, n)) => {
                out.push_str(&(n * cpus).to_string());
                rest = &inside[end + "cpus}".len()..];
            }
            None => {
                out.push('{');
                rest = inside;
            }
        }
    }
    out.push_str(rest);
    out
}

pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// Where a trace says which figure its frequencies are.
const FREQUENCY_SOURCE_META: &str = nest_trace::record::FREQUENCY_SOURCE_META;

/// 100 ms: the interval of the project's placement checks.
const TRACE_INTERVAL_NS: u64 = 100_000_000;

/// `command` under `nest trace record` (this very binary), into `file`.
fn traced(command: &[String], file: &Path) -> Vec<String> {
    let nest = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "nest".into());
    let mut wrapped = vec![nest, "trace".into(), "record".into(), "--out".into()];
    wrapped.push(file.display().to_string());
    wrapped.push("--".into());
    wrapped.extend_from_slice(command);
    wrapped
}

/// The timeline of a traced run with only the workload's runs: the
/// recorded command and what it forked.
pub fn workload_timeline(trace: &nest_trace::Trace) -> nest_trace::timeline::Timeline {
    match trace.command_pid() {
        Some(pid) => nest_trace::timeline::Timeline::of_tree(trace, pid),
        None => nest_trace::timeline::Timeline::build(trace),
    }
}

/// A file name part from a free name.
pub fn slug(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `2m05s`, `40s`.
pub fn fmt_eta(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// A run's working directory: a fresh copy of its workload's source
/// tree, removed when dropped.
struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        if let Err(err) = std::fs::remove_dir_all(&self.0) {
            eprintln!("nest bench: cannot remove {}: {err}", self.0.display());
        }
    }
}

/// Where the runs' working directories go: the temporary directory
/// (a tmpfs in the guests), not the output directory.
fn work_dirs() -> PathBuf {
    std::env::temp_dir().join(format!("nest-bench-{}", std::process::id()))
}

/// One finished run, or why the bench must stop.
enum Outcome {
    Done(Run),
    /// Stopped by SIGINT/SIGTERM: not a run.
    Interrupted,
    /// The machine is no longer in a state to measure (a scheduler that
    /// would not detach): the run, and the reason to stop.
    Fatal(Run, String),
}

pub struct Bench<'a> {
    pub options: &'a Options,
    pub results: Results,
    pub stop: Arc<AtomicBool>,
    /// Measures each run's energy (when the machine has RAPL).
    pub rapl: super::energy::Rapl,
    pub governors: Option<Governors>,
}

impl Bench<'_> {
    /// Run `plan`; the results so far are in `self.results`, written to
    /// the output directory after every run.
    pub fn run(&mut self, plan: &[PlannedRun]) -> Result<()> {
        let logs = self.options.out.join("logs");
        std::fs::create_dir_all(&logs)?;
        let started = Instant::now();
        for (done, planned) in plan.iter().enumerate() {
            self.progress(planned, done, plan.len(), started.elapsed());
            let outcome = self.one_run(planned, &logs)?;
            match outcome {
                Outcome::Done(run) if planned.traced => {
                    let file = logs.join(format!("{}.nest.jsonl", self.stem(planned)));
                    self.record_trace(run, &file)?
                }
                Outcome::Done(run) => self.record(run)?,
                Outcome::Interrupted => {
                    self.results.interrupted = true;
                    break;
                }
                Outcome::Fatal(run, why) => {
                    self.record(run)?;
                    self.results.notes.push(format!("stopped early: {why}"));
                    anyhow::bail!("{why}");
                }
            }
            if self.stop.load(Ordering::Relaxed) {
                self.results.interrupted = true;
                break;
            }
        }
        Ok(())
    }

    fn record(&mut self, run: Run) -> Result<()> {
        if run.status == Status::Failed {
            let cell = &self.results.cells[run.cell];
            eprintln!(
                "nest bench: FAILED {}: {}",
                cell.id(),
                run.reason.as_deref().unwrap_or("")
            );
        }
        self.results.runs.push(run);
        super::write_data(&self.results, &self.options.out)
    }

    /// Summarize the traced run's trace (or say why there is none).
    fn record_trace(&mut self, run: Run, file: &Path) -> Result<()> {
        let mut traced = Traced {
            cell: run.cell,
            file: file.display().to_string(),
            ..Traced::default()
        };
        match (&run.reason, nest_trace::input::load(file)) {
            (Some(reason), _) => traced.error = Some(reason.clone()),
            (None, Err(err)) => traced.error = Some(format!("{err:#}")),
            (None, Ok(trace)) => {
                let timeline = workload_timeline(&trace);
                traced.residency = super::residency::shares(&trace, &timeline);
                traced.frequency_source = trace.meta_get(FREQUENCY_SOURCE_META).map(String::from);
                if let Some(root) = trace.command_pid() {
                    let all = nest_trace::timeline::Timeline::build(&trace);
                    let p = nest_trace::metrics::tree_placement_in(
                        &trace,
                        &all,
                        root,
                        TRACE_INTERVAL_NS,
                    );
                    traced.mean_cpus_used = Some(p.mean_cpus);
                    traced.mean_sockets_used = Some(p.mean_sockets);
                    traced.distinct_cpus = Some(p.cpus_used);
                    traced.mean_concurrency =
                        (p.window_ns > 0).then(|| p.run_ns as f64 / p.window_ns as f64);
                }
                let stats = nest_trace::metrics::interval_stats(&timeline, TRACE_INTERVAL_NS);
                let title = format!(
                    "{}: CPUs used per 100 ms (traced run)",
                    self.results.cells[run.cell].id()
                );
                traced.svg = Some(nest_trace::svg::cpus_vs_concurrency(&stats, &title));
            }
        }
        if let Some(err) = &traced.error {
            eprintln!(
                "nest bench: no trace of {}: {err}",
                self.results.cells[run.cell].id()
            );
        }
        self.results.traces.push(traced);
        super::write_data(&self.results, &self.options.out)
    }

    /// The file name stem of a run's logs: `chain-scx_nest-r2`.
    fn stem(&self, planned: &PlannedRun) -> String {
        let cell = &self.results.cells[planned.cell];
        let kind = match (planned.warmup, planned.traced) {
            (true, _) => "w",
            (_, true) => "t",
            _ => "r",
        };
        format!(
            "{}-{}{}-{kind}{}",
            slug(&cell.workload.name),
            slug(&cell.scheduler.name),
            cell.governor
                .as_deref()
                .map(|g| format!("-{}", slug(g)))
                .unwrap_or_default(),
            planned.run
        )
    }

    fn progress(&self, planned: &PlannedRun, done: usize, total: usize, elapsed: Duration) {
        let cells = self.results.cells.len();
        let cell = &self.results.cells[planned.cell];
        let method = &self.results.method;
        let (kind, of) = if planned.warmup {
            ("warm-up", method.warmup)
        } else if planned.traced {
            ("traced run", 1)
        } else if planned.power {
            ("power run", method.power_runs)
        } else {
            ("run", method.runs)
        };
        let eta = if done == 0 {
            "ETA ?".to_string()
        } else {
            let left = elapsed.mul_f64((total - done) as f64 / done as f64);
            format!("ETA {}", fmt_eta(left))
        };
        let governor = cell
            .governor
            .as_deref()
            .map(|g| format!(" ({g})"))
            .unwrap_or_default();
        eprintln!(
            "[cell {}/{cells}, {kind} {}/{of}, {eta}] {} under {}{governor}",
            planned.cell + 1,
            planned.run,
            cell.workload.name,
            cell.scheduler.name
        );
    }

    fn one_run(&mut self, planned: &PlannedRun, logs: &Path) -> Result<Outcome> {
        let cell = self.results.cells[planned.cell].clone();
        let stem = self.stem(planned);
        let failed = |reason: String| Run {
            cell: planned.cell,
            run: planned.run,
            warmup: planned.warmup,
            power: planned.power,
            status: Status::Failed,
            metric: None,
            wall_s: 0.0,
            energy_j: None,
            reason: Some(reason),
        };
        if let (Some(governors), Some(governor)) = (&self.governors, &cell.governor)
            && let Err(err) = governors.set(governor)
        {
            return Ok(Outcome::Done(failed(format!("{err:#}"))));
        }
        // Set up before the scheduler attaches: setup is not measured.
        let work_dir = match self.prepare(&cell, logs, &stem, &failed) {
            Ok(work_dir) => work_dir,
            Err(outcome) => return Ok(outcome),
        };
        let dir = work_dir.as_ref().map(|w| w.0.as_path());
        if cell.scheduler.is_default() {
            let now = sched::status();
            if now.state.as_deref().is_some_and(|s| s != "disabled") {
                let ops = now.ops.unwrap_or_default();
                return Ok(Outcome::Fatal(
                    failed(format!("a sched_ext scheduler ({ops}) is attached")),
                    format!("a sched_ext scheduler ({ops}) got attached behind nest bench's back"),
                ));
            }
            return Ok(self.workload(&cell, planned, logs, &stem, dir, failed));
        }
        let log = logs.join(format!("{stem}.scheduler.log"));
        let attached = sched::attach(
            &cell.scheduler,
            log,
            self.options.attach_timeout,
            &self.stop,
        );
        let mut attached = match attached {
            Ok(attached) => attached,
            Err(_) if self.stop.load(Ordering::Relaxed) => return Ok(Outcome::Interrupted),
            Err(err) => return Ok(Outcome::Done(failed(format!("did not attach: {err:#}")))),
        };
        let outcome = self.workload(&cell, planned, logs, &stem, dir, failed);
        let ejected = attached.still_attached();
        let log = attached.log.clone();
        let kernel_log_from = attached.kernel_log_from;
        let detached = attached.detach();
        let outcome = match (outcome, ejected) {
            (Outcome::Done(_), Some(seen)) => {
                let why = sched::ejection_reason(
                    &sched::read(&log),
                    &sched::dmesg_since(kernel_log_from),
                );
                Outcome::Done(failed(format!("ejected ({seen}): {why}")))
            }
            (outcome, _) => outcome,
        };
        Ok(match (outcome, detached) {
            (Outcome::Done(run), Err(err)) => Outcome::Fatal(run, format!("{err:#}")),
            (outcome, _) => outcome,
        })
    }

    /// The run's own directory (a fresh copy of the workload's source
    /// tree, or an empty one for a setup), with its setup command run in
    /// it; `None` (the current directory) for a workload without either.
    fn prepare(
        &self,
        cell: &Cell,
        logs: &Path,
        stem: &str,
        failed: &impl Fn(String) -> Run,
    ) -> Result<Option<WorkDir>, Outcome> {
        let setup = &cell.workload.setup;
        let work_dir = match &cell.workload.source {
            Some(package) => {
                let dir = WorkDir(work_dirs().join(stem));
                let _ = std::fs::remove_dir_all(&dir.0);
                source::copy_tree(&source::tree(package), &dir.0)
                    .map_err(|err| Outcome::Done(failed(format!("{err:#}"))))?;
                Some(dir)
            }
            // What the setup makes (an input file) stays in the run's own
            // directory too.
            None if !setup.is_empty() => {
                let dir = WorkDir(work_dirs().join(stem));
                let _ = std::fs::remove_dir_all(&dir.0);
                std::fs::create_dir_all(&dir.0).map_err(|err| {
                    Outcome::Done(failed(format!("cannot create {}: {err}", dir.0.display())))
                })?;
                Some(dir)
            }
            None => None,
        };
        if !setup.is_empty() {
            let dir = work_dir.as_ref().map(|w| w.0.as_path());
            let log = logs.join(format!("{stem}.setup.log"));
            let (status, _) = self.run_to_end(&expand(setup, online_cpus()), &log, dir, failed)?;
            if !status.success() {
                let why = sched::last_lines(&sched::read(&log), 2);
                return Err(Outcome::Done(failed(format!(
                    "setup `{}` exited with {}: {why}",
                    setup.join(" "),
                    describe(status)
                ))));
            }
        }
        Ok(work_dir)
    }

    /// Run `command` until it exits: its status and wall time (s); a
    /// timeout is a failed run, a stop an interrupted bench.
    fn run_to_end(
        &self,
        command: &[String],
        log: &Path,
        dir: Option<&Path>,
        failed: &impl Fn(String) -> Run,
    ) -> Result<(std::process::ExitStatus, f64), Outcome> {
        let mut child = Child::spawn(command, log, dir)
            .map_err(|err| Outcome::Done(failed(format!("{err:#}"))))?;
        let deadline = child.started + self.options.timeout;
        match child.wait_until(deadline, &self.stop) {
            Waited::Exited(status, at) => Ok((status, (at - child.started).as_secs_f64())),
            Waited::Interrupted => {
                child.stop(libc::SIGTERM, Duration::from_secs(5));
                Err(Outcome::Interrupted)
            }
            Waited::TimedOut => {
                child.stop(libc::SIGTERM, Duration::from_secs(5));
                Err(Outcome::Done(failed(format!(
                    "timed out after {:?}",
                    self.options.timeout
                ))))
            }
        }
    }

    /// Run the cell's workload once, in `dir` if given, and judge it (the
    /// scheduler, if any, is judged by the caller).
    fn workload(
        &self,
        cell: &Cell,
        planned: &PlannedRun,
        logs: &Path,
        stem: &str,
        dir: Option<&Path>,
        failed: impl Fn(String) -> Run,
    ) -> Outcome {
        let log = logs.join(format!("{stem}.log"));
        // Programs as paths: `nest run` and `nest trace record` search
        // only PATH, not beside nest (nest-load) or the work directory.
        let cpus = online_cpus();
        let mut command = with_program_path(expand(&cell.scheduler.run_with, cpus), None);
        command.extend(with_program_path(expand(&cell.workload.command, cpus), dir));
        if planned.traced {
            command = traced(&command, &logs.join(format!("{stem}.nest.jsonl")));
        }
        let energy = self.rapl.start();
        let (status, wall_s) = match self.run_to_end(&command, &log, dir, &failed) {
            Ok(ended) => ended,
            Err(outcome) => return outcome,
        };
        let energy_j = energy.and_then(|e| e.joules());
        let output = sched::read(&log);
        if !status.success() {
            let why = sched::last_lines(&output, 2);
            return Outcome::Done(failed(format!(
                "workload exited with {}: {why}",
                describe(status)
            )));
        }
        // A traced run is no measurement: its metric is not needed.
        let metric = &cell.workload.metric;
        let value = match &metric.after {
            Some(after) if !planned.traced => parse_metric(&output, after, metric.combine),
            _ => Some(wall_s),
        };
        Outcome::Done(match value {
            Some(value) => Run {
                cell: planned.cell,
                run: planned.run,
                warmup: planned.warmup,
                power: planned.power,
                status: Status::Ok,
                metric: Some(value),
                wall_s,
                energy_j,
                reason: None,
            },
            None => failed(format!(
                "no number after '{}' in its output",
                metric.after.as_deref().unwrap_or_default()
            )),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_the_number_after_the_text() {
        let last = Combine::Last;
        assert_eq!(
            parse_metric("Running...\nTime: 0.412\n", "Time:", last),
            Some(0.412)
        );
        assert_eq!(
            parse_metric("pingpong: round_trips=5120\n", "round_trips=", last),
            Some(5120.0)
        );
        assert_eq!(parse_metric("Time: 1\nTime: 2\n", "Time:", last), Some(2.0));
        assert_eq!(parse_metric("Time: n/a", "Time:", last), None);
        assert_eq!(parse_metric("nothing", "Time:", last), None);
    }

    #[test]
    fn a_metric_printed_per_thread_combines() {
        // cyclictest -q, two threads.
        let out = "T: 0 ( 7) P: 0 I:1000 C: 2000 Min: 33 Act: 64 Avg: 60 Max: 561\n\
                   T: 1 ( 8) P: 0 I:1500 C: 1333 Min: 17 Act: 63 Avg: 70 Max: 1865\n";
        assert_eq!(parse_metric(out, "Avg:", Combine::Mean), Some(65.0));
        assert_eq!(parse_metric(out, "Max:", Combine::Max), Some(1865.0));
        assert_eq!(parse_metric(out, "Min:", Combine::Min), Some(17.0));
        assert_eq!(parse_metric(out, "C:", Combine::Sum), Some(3333.0));
        assert_eq!(parse_metric(out, "Avg:", Combine::Last), Some(70.0));
    }

    #[test]
    fn commands_get_the_cpu_count() {
        let cmd = ["batch", "--tasks", "{2cpus}", "-g", "{cpus}"].map(String::from);
        assert_eq!(expand(&cmd, 4), ["batch", "--tasks", "8", "-g", "4"]);
        let cmd = ["--ops", "{200cpus}", "x{cpus}y{", "{n}", "{2cpu}"].map(String::from);
        assert_eq!(expand(&cmd, 3), ["--ops", "600", "x3y{", "{n}", "{2cpu}"]);
    }

    #[test]
    fn a_traced_run_wraps_the_command_in_nest_trace_record() {
        let cmd = ["/bin/sh", "-c", "true"].map(String::from);
        let wrapped = traced(&cmd, Path::new("/o/x.nest.jsonl"));
        let expected = [
            "trace",
            "record",
            "--out",
            "/o/x.nest.jsonl",
            "--",
            "/bin/sh",
            "-c",
            "true",
        ];
        assert_eq!(wrapped[1..], expected);
    }

    #[test]
    fn etas_and_slugs_read_well() {
        assert_eq!(fmt_eta(Duration::from_secs(80)), "1m20s");
        assert_eq!(fmt_eta(Duration::from_secs(9)), "9s");
        assert_eq!(slug("nest slocal/2"), "nest_slocal_2");
    }
}
