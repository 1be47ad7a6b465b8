//! What a bench produced: every run, the cells, the machine; stored as
//! `results.json` (read back by `nest bench compare`) and `results.csv`.

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::machine::Machine;
use super::residency::BandShare;
use super::stats::{Center, Improvement, Summary, improvement, summarize};
use super::suite::{Scheduler, Workload};

/// One workload under one scheduler (and governor).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub workload: Workload,
    pub scheduler: Scheduler,
    /// The cpufreq governor of every CPU during its runs; `None` when left
    /// as it was.
    pub governor: Option<String>,
}

impl Cell {
    /// `workload / scheduler [/ governor]`: how tables and files name it.
    pub fn id(&self) -> String {
        match &self.governor {
            Some(g) => format!("{} / {} / {g}", self.workload.name, self.scheduler.name),
            None => format!("{} / {}", self.workload.name, self.scheduler.name),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Ok,
    Failed,
}

/// One run of a cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub cell: usize,
    /// 1-based, among the cell's warm-up or measured runs.
    pub run: usize,
    pub warmup: bool,
    /// A run beyond `--runs`, made to reach `--power-runs` energy
    /// measurements: its energy counts, its metric does not.
    #[serde(default)]
    pub power: bool,
    pub status: Status,
    /// The cell's metric; `None` for a failed run.
    pub metric: Option<f64>,
    /// Wall time of the workload, s.
    pub wall_s: f64,
    /// Energy of the CPU packages (RAPL) over the same time, J; `None`
    /// without RAPL or readable counters (and in results from before it).
    #[serde(default)]
    pub energy_j: Option<f64>,
    /// Why it failed (the scheduler's exit reason for an ejection).
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Method {
    pub suite: String,
    pub warmup: usize,
    pub runs: usize,
    /// Measured runs of each cell for its energy, where RAPL exists (at
    /// least `runs`).
    #[serde(default)]
    pub power_runs: usize,
    pub timeout_s: f64,
    /// The cell every other cell of a workload is compared with; `None`
    /// in results from before it (then each governor's first scheduler).
    #[serde(default)]
    pub baseline: Option<Baseline>,
    /// What is compared: the cells' means (the paper's) or medians.
    #[serde(default)]
    pub center: Center,
}

/// The one baseline of every comparison: a scheduler under a governor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    pub scheduler: String,
    /// `None` when the bench switched no governors.
    pub governor: Option<String>,
}

impl Baseline {
    /// `default / schedutil`, or `default`.
    pub fn id(&self) -> String {
        match &self.governor {
            Some(g) => format!("{} / {g}", self.scheduler),
            None => self.scheduler.clone(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub machine: Machine,
    pub method: Method,
    pub cells: Vec<Cell>,
    pub runs: Vec<Run>,
    /// Stopped by SIGINT/SIGTERM before every run was done.
    pub interrupted: bool,
    /// Things the reader should know (skipped workloads, ignored options).
    pub notes: Vec<String>,
    /// The traced run of each cell (`--trace`).
    #[serde(default)]
    pub traces: Vec<Traced>,
}

/// Where a cell's work ran, from a `nest trace record` of one extra run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Traced {
    pub cell: usize,
    /// The trace file, for `nest trace report`.
    pub file: String,
    /// CPUs that ran one of the workload's tasks (the recorded command and
    /// its descendants), per 100 ms interval of the command's life,
    /// averaged.
    pub mean_cpus_used: Option<f64>,
    /// Sockets with such a CPU, per 100 ms interval, averaged.
    #[serde(default)]
    pub mean_sockets_used: Option<f64>,
    /// Distinct CPUs that ran one of the workload's tasks.
    #[serde(default)]
    pub distinct_cpus: Option<usize>,
    /// The workload's tasks running at once, on average over the
    /// command's life.
    pub mean_concurrency: Option<f64>,
    /// Where the trace's frequencies come from (`aperf/mperf every 4 ms`,
    /// `cpu_frequency tracepoint`, `scaling_cur_freq polled every 10
    /// ms`); `None` without frequencies.
    #[serde(default)]
    pub frequency_source: Option<String>,
    /// The share of the workload's busy CPU time in each frequency band;
    /// empty when the trace has no frequency events (no cpufreq).
    #[serde(default)]
    pub residency: Vec<BandShare>,
    /// Why there is no trace (a failed run, no tracefs, not root).
    pub error: Option<String>,
    /// CPUs used and concurrency over time, for report.html.
    #[serde(skip)]
    pub svg: Option<String>,
}

/// A cell's measured runs, summarized.
#[derive(Clone, Debug, PartialEq)]
pub struct CellSummary {
    /// Over the measured runs that succeeded; `None` if none did.
    pub summary: Option<Summary>,
    /// Their energy, J; `None` if none has one.
    pub energy: Option<Summary>,
    pub ok: usize,
    pub failed: usize,
    /// The first failure's reason: the cell is FAILED, not a result.
    pub failure: Option<String>,
}

impl CellSummary {
    /// The summary, only if no measured run failed.
    pub fn result(&self) -> Option<&Summary> {
        self.summary.as_ref().filter(|_| self.failure.is_none())
    }

    /// The energy summary, only if no measured run failed.
    pub fn energy_result(&self) -> Option<&Summary> {
        self.energy.as_ref().filter(|_| self.failure.is_none())
    }
}

impl Results {
    pub fn summarize(&self, cell: usize) -> CellSummary {
        let measured: Vec<&Run> = self
            .runs
            .iter()
            .filter(|r| r.cell == cell && !r.warmup)
            .collect();
        let succeeded = || measured.iter().filter(|r| r.status == Status::Ok);
        let ok: Vec<f64> = succeeded()
            .filter(|r| !r.power)
            .filter_map(|r| r.metric)
            .collect();
        let energy: Vec<f64> = succeeded().filter_map(|r| r.energy_j).collect();
        let failures: Vec<&&Run> = measured
            .iter()
            .filter(|r| r.status == Status::Failed)
            .collect();
        CellSummary {
            summary: summarize(&ok),
            energy: summarize(&energy),
            ok: ok.len(),
            failed: failures.iter().filter(|r| !r.power).count(),
            failure: failures
                .first()
                .map(|r| r.reason.clone().unwrap_or_else(|| "failed".into())),
        }
    }

    /// The cell `cell` is compared with: the same workload under the
    /// method's baseline scheduler and governor (in results from before
    /// the method named one: the first scheduler under the same governor).
    pub fn baseline_of(&self, cell: usize) -> Option<usize> {
        let this = &self.cells[cell];
        let (scheduler, governor) = match &self.method.baseline {
            Some(b) => (&b.scheduler, &b.governor),
            None => (&self.cells.first()?.scheduler.name, &this.governor),
        };
        self.cells.iter().position(|c| {
            &c.scheduler.name == scheduler
                && c.workload.name == this.workload.name
                && &c.governor == governor
        })
    }

    /// What the improvements are against: `default / schedutil`.
    pub fn baseline_name(&self) -> String {
        match &self.method.baseline {
            Some(b) => b.id(),
            None => self
                .cells
                .first()
                .map(|c| c.scheduler.name.clone())
                .unwrap_or_default(),
        }
    }

    /// The improvement of `cell` over its baseline, if both are results.
    pub fn improvement(&self, cell: usize) -> Option<Improvement> {
        let higher_is_better = self.cells[cell].workload.metric.higher_is_better;
        self.versus_baseline(cell, CellSummary::result, higher_is_better)
    }

    /// The energy improvement of `cell` over its baseline (less is
    /// better), if both are results with an energy.
    pub fn energy_improvement(&self, cell: usize) -> Option<Improvement> {
        self.versus_baseline(cell, CellSummary::energy_result, false)
    }

    fn versus_baseline(
        &self,
        cell: usize,
        value: fn(&CellSummary) -> Option<&Summary>,
        higher_is_better: bool,
    ) -> Option<Improvement> {
        let base = self.summarize(self.baseline_of(cell)?);
        let this = self.summarize(cell);
        improvement(
            value(&base)?,
            value(&this)?,
            higher_is_better,
            self.method.center,
        )
    }

    /// Whether any run measured an energy: the tables and figures then
    /// show it.
    pub fn has_energy(&self) -> bool {
        self.runs.iter().any(|r| r.energy_j.is_some())
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("results serialize")
    }

    pub fn from_json(text: &str) -> Result<Self> {
        Ok(serde_json::from_str(text)?)
    }

    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Self::from_json(&text)
            .with_context(|| format!("{} is not a nest bench results.json", path.display()))
    }

    /// One line per run.
    pub fn to_csv(&self) -> String {
        let mut table = nest_trace::table::Table::new(
            "results",
            &[
                "workload",
                "scheduler",
                "governor",
                "run",
                "warmup",
                "power",
                "status",
                "metric",
                "unit",
                "wall_s",
                "energy_j",
                "reason",
            ],
        );
        for run in &self.runs {
            let cell = &self.cells[run.cell];
            table.push(vec![
                cell.workload.name.as_str().into(),
                cell.scheduler.name.as_str().into(),
                cell.governor.clone().unwrap_or_default().into(),
                run.run.into(),
                run.warmup.to_string().into(),
                run.power.to_string().into(),
                format!("{:?}", run.status).to_uppercase().into(),
                run.metric.map(|m| m.to_string()).unwrap_or_default().into(),
                cell.workload.metric.unit.as_str().into(),
                run.wall_s.into(),
                run.energy_j
                    .map(|e| e.to_string())
                    .unwrap_or_default()
                    .into(),
                run.reason.clone().unwrap_or_default().into(),
            ]);
        }
        table.to_csv()
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::bench::suite::{builtin_scheduler, builtin_workload};

    pub fn run(cell: usize, run: usize, metric: Option<f64>) -> Run {
        Run {
            cell,
            run,
            warmup: false,
            power: false,
            status: if metric.is_some() {
                Status::Ok
            } else {
                Status::Failed
            },
            metric,
            wall_s: metric.unwrap_or(1.0),
            energy_j: None,
            reason: metric
                .is_none()
                .then(|| "ejected: runnable task stall".to_string()),
        }
    }

    /// One band of a traced run's residency.
    pub fn band_share(band: &str, share: f64) -> BandShare {
        BandShare {
            band: band.into(),
            share,
        }
    }

    /// A run of `cell` that used `joules`.
    fn with_energy(cell: usize, run_index: usize, metric: f64, joules: f64) -> Run {
        Run {
            energy_j: Some(joules),
            ..run(cell, run_index, Some(metric))
        }
    }

    /// chain and pipe, each under default and scx_nest; chain's runs
    /// measured energy.
    pub fn sample() -> Results {
        let cells = ["chain", "pipe"]
            .into_iter()
            .flat_map(|w| {
                ["default", "scx_nest"].into_iter().map(move |s| Cell {
                    workload: builtin_workload(w).unwrap(),
                    scheduler: builtin_scheduler(s).unwrap(),
                    governor: None,
                })
            })
            .collect();
        Results {
            machine: Machine::default(),
            method: Method {
                suite: "quick".into(),
                warmup: 1,
                runs: 2,
                power_runs: 2,
                timeout_s: 300.0,
                baseline: Some(Baseline {
                    scheduler: "default".into(),
                    governor: None,
                }),
                center: Center::Mean,
            },
            cells,
            runs: vec![
                Run {
                    warmup: true,
                    ..run(0, 1, Some(100.0))
                },
                with_energy(0, 1, 2.0, 30.0),
                with_energy(0, 2, 2.0, 30.0),
                with_energy(1, 1, 1.0, 15.0),
                with_energy(1, 2, 1.0, 25.0),
                run(2, 1, Some(100.0)),
                run(2, 2, Some(100.0)),
                run(3, 1, Some(50.0)),
                run(3, 2, None),
            ],
            interrupted: false,
            notes: vec![],
            traces: vec![Traced {
                cell: 1,
                file: "logs/chain-scx_nest-t1.nest.jsonl".into(),
                mean_cpus_used: Some(2.5),
                mean_sockets_used: Some(1.25),
                distinct_cpus: Some(4),
                mean_concurrency: Some(1.0),
                frequency_source: Some("cpu_frequency tracepoint".into()),
                residency: vec![
                    band_share("< 2.0 GHz", 0.25),
                    band_share(">= 2.0 GHz", 0.75),
                    band_share("unknown", 0.0),
                ],
                error: None,
                svg: None,
            }],
        }
    }

    #[test]
    fn json_round_trips() {
        let results = sample();
        assert_eq!(Results::from_json(&results.to_json()).unwrap(), results);
    }

    #[test]
    fn warmups_and_failed_runs_never_enter_a_mean() {
        let results = sample();
        let chain = results.summarize(0);
        assert_eq!(
            chain.summary.as_ref().unwrap().mean,
            2.0,
            "the 100 s warm-up is left out"
        );
        let failed = results.summarize(3);
        assert_eq!((failed.ok, failed.failed), (1, 1));
        assert_eq!(failed.summary.as_ref().unwrap().mean, 50.0);
        assert_eq!(
            failed.result(),
            None,
            "a cell with a failed run is no result"
        );
        assert_eq!(
            failed.failure.as_deref(),
            Some("ejected: runnable task stall")
        );
        assert_eq!(results.improvement(3), None);
    }

    #[test]
    fn improvement_is_against_the_first_scheduler_of_the_same_workload() {
        let results = sample();
        assert_eq!(results.baseline_of(1), Some(0));
        assert_eq!(results.baseline_of(3), Some(2));
        assert_eq!(results.improvement(1).unwrap().percent, 100.0);
        assert_eq!(results.improvement(0).unwrap().percent, 0.0);
    }

    /// One workload (chain) under default and scx_nest, each under
    /// performance and schedutil, against default / schedutil, with the
    /// runs of the example below.
    pub fn across_governors() -> Results {
        let workload = builtin_workload("chain").unwrap();
        let cell = |scheduler: &str, governor: &str| Cell {
            workload: workload.clone(),
            scheduler: builtin_scheduler(scheduler).unwrap(),
            governor: Some(governor.into()),
        };
        let mut results = sample();
        results.cells = vec![
            cell("default", "performance"),
            cell("scx_nest", "performance"),
            cell("default", "schedutil"),
            cell("scx_nest", "schedutil"),
        ];
        results.method.baseline = Some(Baseline {
            scheduler: "default".into(),
            governor: Some("schedutil".into()),
        });
        let times = [[8.0, 12.0], [11.0, 11.0], [10.0, 12.0], [9.0, 11.0]];
        results.runs = times
            .iter()
            .enumerate()
            .flat_map(|(c, t)| [run(c, 1, Some(t[0])), run(c, 2, Some(t[1]))])
            .collect();
        results.traces.clear();
        results
    }

    /// One workload under default and scx_nest, each under schedutil and
    /// performance, every cell against the one baseline default /
    /// schedutil (runs 10 s and 12 s, mean 11 s), by hand:
    /// - scx_nest / schedutil, 9 and 11 s: 11/10 - 1 = +10%; runs
    ///   11/9 - 1 = +22.22% and 11/11 - 1 = 0%: sd 22.22/sqrt(2) = 15.71%;
    /// - default / performance, 8 and 12 s: +10%; runs +37.5% and -8.33%:
    ///   sd 45.83/sqrt(2) = 32.41%;
    /// - scx_nest / performance, 11 and 11 s: 0%, sd 0;
    /// - the baseline itself: 0%, runs 11/10 - 1 = +10% and 11/12 - 1 =
    ///   -8.33%: sd 18.33/sqrt(2) = 12.96%.
    #[test]
    fn every_cell_is_compared_with_one_baseline_across_governors() {
        let mut results = across_governors();
        for c in 0..4 {
            assert_eq!(results.baseline_of(c), Some(2), "cell {c}");
        }
        assert_eq!(results.baseline_name(), "default / schedutil");
        let expect = [(10.0, 32.41), (0.0, 0.0), (0.0, 12.96), (10.0, 15.71)];
        for (c, (percent, sd)) in expect.into_iter().enumerate() {
            let imp = results.improvement(c).unwrap();
            assert!((imp.percent - percent).abs() < 1e-9, "cell {c}: {imp:?}");
            assert!(
                (imp.stddev.unwrap() - sd).abs() < 0.005,
                "cell {c}: {imp:?}"
            );
        }
        // Results from before the method named a baseline: each
        // governor's first scheduler.
        results.method.baseline = None;
        assert_eq!(results.baseline_of(3), Some(2));
        assert_eq!(results.baseline_of(1), Some(0));
    }

    #[test]
    fn power_runs_count_for_energy_only() {
        let mut results = sample();
        results.runs.push(Run {
            power: true,
            ..with_energy(1, 3, 100.0, 20.0)
        });
        let nest = results.summarize(1);
        assert_eq!(nest.summary.as_ref().unwrap().n, 2, "the metric's runs");
        assert_eq!(
            nest.energy.as_ref().unwrap().n,
            3,
            "and one more for energy"
        );
        assert_eq!(nest.summary.unwrap().mean, 1.0);
    }

    #[test]
    fn energy_is_summarized_and_lower_is_better() {
        let results = sample();
        assert!(results.has_energy());
        let energy = results.summarize(1).energy.unwrap();
        assert_eq!((energy.n, energy.mean), (2, 20.0));
        // The baseline used 30 J, scx_nest 20 J: 1.5 times less; its runs
        // 15 J (+100%) and 25 J (+20%): a spread of 80 / sqrt(2).
        let saved = results.energy_improvement(1).unwrap();
        assert!((saved.percent - 50.0).abs() < 1e-9, "{saved:?}");
        let sd = 80.0 / 2.0f64.sqrt();
        assert!((saved.stddev.unwrap() - sd).abs() < 1e-9, "{saved:?}");
        assert_eq!(results.energy_improvement(2), None, "pipe has no energy");
        let mut failed = sample();
        failed.runs[4] = run(1, 2, None);
        assert_eq!(failed.summarize(1).energy.unwrap().n, 1);
        assert_eq!(failed.energy_improvement(1), None, "a FAILED cell");
    }

    #[test]
    fn results_from_before_energy_residency_and_the_one_baseline_still_load() {
        let mut json: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        json["machine"].as_object_mut().unwrap().remove("rapl");
        for run in json["runs"].as_array_mut().unwrap() {
            run.as_object_mut().unwrap().remove("energy_j");
        }
        let trace = json["traces"][0].as_object_mut().unwrap();
        for field in ["residency", "distinct_cpus", "frequency_source"] {
            trace.remove(field);
        }
        // And from before the one baseline, power runs and medians.
        let method = json["method"].as_object_mut().unwrap();
        for field in ["power_runs", "baseline", "center"] {
            method.remove(field);
        }
        for run in json["runs"].as_array_mut().unwrap() {
            run.as_object_mut().unwrap().remove("power");
        }
        for cell in json["cells"].as_array_mut().unwrap() {
            cell["workload"].as_object_mut().unwrap().remove("install");
        }
        let old = Results::from_json(&json.to_string()).unwrap();
        assert!(old.traces[0].residency.is_empty());
        assert!(old.machine.rapl.is_empty());
        assert!(!old.has_energy());
        assert_eq!(old.summarize(0).summary, sample().summarize(0).summary);
        assert_eq!(old.method.baseline, None);
        assert_eq!(old.baseline_of(3), Some(2), "the first scheduler");
        assert_eq!(old.improvement(1), sample().improvement(1));
    }

    #[test]
    fn csv_has_a_line_per_run() {
        let csv = sample().to_csv();
        assert_eq!(csv.lines().count(), 1 + 9);
        assert!(
            csv.lines()
                .next()
                .unwrap()
                .starts_with("workload,scheduler,governor,run")
        );
        assert!(
            csv.contains(
                "pipe,scx_nest,,2,false,false,FAILED,,round trips,1,,ejected: runnable task stall"
            ),
            "{csv}"
        );
        assert!(
            csv.contains("chain,scx_nest,,1,false,false,OK,1,s,1,15,\n"),
            "{csv}"
        );
    }
}
