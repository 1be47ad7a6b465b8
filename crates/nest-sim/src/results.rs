//! Results of runs, and comparisons of configurations against a baseline.
//!
//! Definitions (docs/design/simulator.md, "Results"):
//! - *completion time*: time at which the last task exited;
//! - per task *run* time (running) and *wait* time (runnable, queued);
//! - *frequency residency*: share of busy (task running) time per band;
//! - per interval (one tick): *CPUs used* (distinct CPUs that ran a task),
//!   *sockets used*, *cores used* (physical cores: SMT siblings count
//!   once, as turbo bins count active cores), *concurrency* (most tasks
//!   running at once), and *underload* = CPUs used - concurrency;
//! - *migrations*: times a task ran on another CPU than the previous time;
//! - *energy*: the power model integrated over the run;
//! - *improvement* of a run over a baseline: `(base - x) / base` for
//!   lower-is-better metrics, so 0 = same and positive = better.

use std::fmt::Write as _;

use nest_trace::Trace;
use serde::Serialize;

use crate::engine::Kernel;
pub use crate::engine::{Interval, TaskStats};

/// Everything measured in one run.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    pub policy: String,
    pub governor: String,
    pub machine: String,
    pub workload: String,
    pub seed: u64,
    pub completion_ns: u64,
    /// The run stopped because every remaining task waited forever.
    pub deadlocked: bool,
    pub energy_j: f64,
    pub migrations: u64,
    /// Total warm-spin time over all CPUs.
    pub spin_ns: u64,
    /// The machine's idle states, shallowest first, and how many times a
    /// core woke from each to run a task.
    pub idle_states: Vec<String>,
    pub core_wakeups: Vec<u64>,
    /// Time cores spent waking up (exit latencies) before running a task.
    pub exit_latency_ns: u64,
    pub band_labels: Vec<String>,
    /// Share of busy time per frequency band (sums to 1 when anything ran).
    pub residency: Vec<f64>,
    pub mean_cpus_used: f64,
    pub mean_sockets_used: f64,
    /// Physical cores that ran a task, per interval: the active cores of
    /// the turbo bins.
    pub mean_cores_used: f64,
    pub mean_underload: f64,
    pub intervals: Vec<Interval>,
    pub tasks: Vec<TaskStats>,
    /// Engine events processed in time order, stale ones included.
    pub events: u64,
    /// Of `events`, those that were stale (a superseded run segment end or
    /// spin end) and did nothing. Not serialised (outputs predate it).
    #[serde(skip)]
    pub stale_events: u64,
    /// Schedule events produced (switches, wakeups, forks, exits,
    /// migrations, frequency changes, idle enter/exit, spins).
    pub sched_events: u64,
    #[serde(skip)]
    pub trace: Option<Trace>,
}

impl RunResult {
    pub(crate) fn collect(k: &Kernel, policy: String, trace: Option<Trace>) -> Self {
        let s = &k.stats;
        let busy: u64 = s.residency_ns.iter().sum();
        let residency = s
            .residency_ns
            .iter()
            .map(|&r| {
                if busy == 0 {
                    0.0
                } else {
                    r as f64 / busy as f64
                }
            })
            .collect();
        let active: Vec<_> = s.intervals.iter().filter(|i| i.cpus > 0).collect();
        let mean = |f: &dyn Fn(&Interval) -> f64| {
            if active.is_empty() {
                0.0
            } else {
                active.iter().map(|i| f(i)).sum::<f64>() / active.len() as f64
            }
        };
        let completion_ns = k
            .tasks
            .iter()
            .filter_map(|t| t.stats.end_ns)
            .max()
            .unwrap_or(k.now);
        Self {
            policy,
            governor: k.cfg.governor.name().to_owned(),
            machine: k.machine.name.clone(),
            workload: k.workload.name.clone(),
            seed: k.cfg.seed,
            completion_ns: if k.tasks_remain() {
                k.now
            } else {
                completion_ns
            },
            deadlocked: k.deadlock,
            energy_j: s.energy_j,
            migrations: s.migrations,
            spin_ns: s.spin_ns,
            idle_states: k
                .machine
                .power
                .idle_states
                .iter()
                .map(|i| i.name.clone())
                .collect(),
            core_wakeups: s.core_wakeups.clone(),
            exit_latency_ns: s.exit_latency_ns,
            band_labels: k.machine.band_labels(),
            residency,
            mean_cpus_used: mean(&|i| f64::from(i.cpus)),
            mean_sockets_used: mean(&|i| f64::from(i.sockets)),
            mean_cores_used: mean(&|i| f64::from(i.cores)),
            mean_underload: mean(&|i| f64::from(i.cpus) - f64::from(i.concurrency)),
            intervals: s.intervals.clone(),
            tasks: k.tasks.iter().map(|t| t.stats.clone()).collect(),
            events: k.nr_events,
            stale_events: k.nr_stale_events,
            sched_events: k.nr_sched_events,
            trace,
        }
    }

    /// Sum of the tasks' waiting times.
    pub fn total_wait_ns(&self) -> u64 {
        self.tasks.iter().map(|t| t.wait_ns).sum()
    }

    /// Share of busy time at or above the nominal frequency.
    pub fn share_at_or_above_nominal(&self) -> f64 {
        self.residency.iter().skip(1).sum()
    }
}

/// Mean and (population) standard deviation.
pub fn mean_std(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n;
    (m, v.sqrt())
}

/// Improvement of `x` over `base` for a lower-is-better metric.
pub fn improvement(base: f64, x: f64) -> f64 {
    if base == 0.0 { 0.0 } else { (base - x) / base }
}

/// One configuration (policy x governor) run over several seeds, compared
/// with the baseline configuration.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub policy: String,
    pub governor: String,
    pub runs: Vec<RunResult>,
    /// Mean and std dev over seeds of each run's improvement against the
    /// baseline configuration's mean.
    pub time_improvement: (f64, f64),
    pub energy_improvement: (f64, f64),
}

/// Compares every configuration's runs against `configs[0]`'s mean.
pub fn compare(configs: Vec<(String, String, Vec<RunResult>)>) -> Vec<Comparison> {
    let base = configs.first().map(|c| c.2.clone()).unwrap_or_default();
    let base_time = mean_std(
        &base
            .iter()
            .map(|r| r.completion_ns as f64)
            .collect::<Vec<_>>(),
    )
    .0;
    let base_energy = mean_std(&base.iter().map(|r| r.energy_j).collect::<Vec<_>>()).0;
    configs
        .into_iter()
        .map(|(policy, governor, runs)| {
            let t: Vec<f64> = runs
                .iter()
                .map(|r| improvement(base_time, r.completion_ns as f64))
                .collect();
            let e: Vec<f64> = runs
                .iter()
                .map(|r| improvement(base_energy, r.energy_j))
                .collect();
            Comparison {
                policy,
                governor,
                time_improvement: mean_std(&t),
                energy_improvement: mean_std(&e),
                runs,
            }
        })
        .collect()
}

fn avg(c: &Comparison, f: impl Fn(&RunResult) -> f64) -> f64 {
    mean_std(&c.runs.iter().map(f).collect::<Vec<_>>()).0
}

/// A readable table, one row per configuration.
pub fn table(cmps: &[Comparison]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<12} {:<14} {:>10} {:>15} {:<13} {:>9} {:>15} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8}",
        "policy",
        "governor",
        "time(ms)",
        "time impr",
        "verdict",
        "energy(J)",
        "energy impr",
        ">=nom",
        "cpus",
        "cores",
        "under",
        "migr",
        "wait(ms)"
    );
    for c in cmps {
        let pct = |(m, sd): (f64, f64)| format!("{:+.1}%±{:.1}", m * 100.0, sd * 100.0);
        let _ = writeln!(
            s,
            "{:<12} {:<14} {:>10.1} {:>15} {:<13} {:>9.2} {:>15} {:>6.0}% {:>7.2} {:>7.2} {:>7.2} {:>8.0} {:>8.1}",
            c.policy,
            c.governor,
            avg(c, |r| r.completion_ns as f64 / 1e6),
            pct(c.time_improvement),
            bucket(c.time_improvement.0),
            avg(c, |r| r.energy_j),
            pct(c.energy_improvement),
            avg(c, |r| r.share_at_or_above_nominal() * 100.0),
            avg(c, |r| r.mean_cpus_used),
            avg(c, |r| r.mean_cores_used),
            avg(c, |r| r.mean_underload),
            avg(c, |r| r.migrations as f64),
            avg(c, |r| r.total_wait_ns() as f64 / 1e6),
        );
    }
    s
}

/// One summary table over several machines and workloads: rows of
/// (machine, workload, comparisons of that pair).
pub fn sweep_table(rows: &[(&str, &str, Vec<Comparison>)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<20} {:<10} {:<12} {:<14} {:>10} {:>15} {:<13} {:>15} {:>7}",
        "machine",
        "workload",
        "policy",
        "governor",
        "time(ms)",
        "time impr",
        "verdict",
        "energy impr",
        "cpus"
    );
    for (machine, workload, cmps) in rows {
        for c in cmps {
            let pct = |(m, sd): (f64, f64)| format!("{:+.1}%±{:.1}", m * 100.0, sd * 100.0);
            let _ = writeln!(
                s,
                "{:<20} {:<10} {:<12} {:<14} {:>10.1} {:>15} {:<13} {:>15} {:>7.2}",
                machine,
                workload,
                c.policy,
                c.governor,
                avg(c, |r| r.completion_ns as f64 / 1e6),
                pct(c.time_improvement),
                bucket(c.time_improvement.0),
                pct(c.energy_improvement),
                avg(c, |r| r.mean_cpus_used),
            );
        }
    }
    s
}

/// The published summary buckets of an improvement: within 5% is "same".
pub fn bucket(improvement: f64) -> &'static str {
    match improvement {
        x if x > 0.20 => "faster >20%",
        x if x > 0.05 => "faster 5-20%",
        x if x >= -0.05 => "same",
        x if x >= -0.20 => "slower 5-20%",
        _ => "slower >20%",
    }
}

/// Frequency residency per configuration (mean over seeds).
pub fn residency_table(cmps: &[Comparison]) -> String {
    let mut s = String::new();
    let Some(labels) = cmps
        .first()
        .and_then(|c| c.runs.first())
        .map(|r| r.band_labels.clone())
    else {
        return s;
    };
    let _ = write!(s, "{:<12} {:<14}", "policy", "governor");
    for l in &labels {
        let _ = write!(s, " {:>9}", l);
    }
    s.push('\n');
    for c in cmps {
        let _ = write!(s, "{:<12} {:<14}", c.policy, c.governor);
        for b in 0..labels.len() {
            let share = avg(c, |r| r.residency.get(b).copied().unwrap_or(0.0));
            let _ = write!(s, " {:>8.1}%", share * 100.0);
        }
        s.push('\n');
    }
    s
}

/// CSV, one row per run.
pub fn csv(cmps: &[Comparison]) -> String {
    let mut s = String::from(
        "policy,governor,seed,machine,workload,completion_ms,energy_j,time_improvement,\
         energy_improvement,share_at_or_above_nominal,mean_cpus_used,mean_sockets_used,\
         mean_underload,migrations,total_wait_ms,spin_ms,events,mean_cores_used,exit_latency_ms\n",
    );
    let base = cmps.first();
    let bt = base.map_or(0.0, |b| avg(b, |r| r.completion_ns as f64));
    let be = base.map_or(0.0, |b| avg(b, |r| r.energy_j));
    for c in cmps {
        for r in &c.runs {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{:.3},{:.4},{:.5},{:.5},{:.4},{:.3},{:.3},{:.3},{},{:.3},{:.3},{},{:.3},{:.3}",
                c.policy,
                c.governor,
                r.seed,
                r.machine,
                r.workload,
                r.completion_ns as f64 / 1e6,
                r.energy_j,
                improvement(bt, r.completion_ns as f64),
                improvement(be, r.energy_j),
                r.share_at_or_above_nominal(),
                r.mean_cpus_used,
                r.mean_sockets_used,
                r.mean_underload,
                r.migrations,
                r.total_wait_ns() as f64 / 1e6,
                r.spin_ns as f64 / 1e6,
                r.events,
                r.mean_cores_used,
                r.exit_latency_ns as f64 / 1e6
            );
        }
    }
    s
}

/// Per-task CSV: one row per task of every run.
pub fn tasks_csv(cmps: &[Comparison]) -> String {
    let mut s =
        String::from("policy,governor,seed,pid,comm,start_ms,end_ms,run_ms,wait_ms,migrations\n");
    for c in cmps {
        for r in &c.runs {
            for t in &r.tasks {
                let end = t
                    .end_ns
                    .map_or(String::new(), |e| format!("{:.4}", e as f64 / 1e6));
                let _ = writeln!(
                    s,
                    "{},{},{},{},{},{:.4},{},{:.4},{:.4},{}",
                    c.policy,
                    c.governor,
                    r.seed,
                    t.pid,
                    t.comm,
                    t.start_ns as f64 / 1e6,
                    end,
                    t.run_ns as f64 / 1e6,
                    t.wait_ns as f64 / 1e6,
                    t.migrations
                );
            }
        }
    }
    s
}

/// Per-interval CSV (one tick each): CPUs and sockets used, concurrency
/// and underload over time, for every run.
pub fn timeline_csv(cmps: &[Comparison], interval_ns: u64) -> String {
    let mut s = String::from(
        "policy,governor,seed,start_ms,cpus_used,sockets_used,concurrency,underload,cores_used\n",
    );
    for c in cmps {
        for r in &c.runs {
            for (i, v) in r.intervals.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "{},{},{},{:.3},{},{},{},{},{}",
                    c.policy,
                    c.governor,
                    r.seed,
                    (i as u64 * interval_ns) as f64 / 1e6,
                    v.cpus,
                    v.sockets,
                    v.concurrency,
                    i64::from(v.cpus) - i64::from(v.concurrency),
                    v.cores
                );
            }
        }
    }
    s
}
