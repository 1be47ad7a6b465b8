//! `nest bench` in a real sched_ext kernel under QEMU (tests/vm/bench.sh):
//! the quick suite's results and report, schedulers that fail to attach or
//! get ejected reported FAILED and never as results, the partial-mode
//! variant (`nest run`), and the refusals.
//! Ignored by default: it boots a QEMU guest; scripts/test.sh runs it.

use std::path::Path;
use std::time::Duration;

use nest_vm::{VmSpec, shell_quote};
use serde_json::Value;
use vm_tests::{Report, bin_dir, kernel_problems, repo_root, run_ok};

fn results(dir: &Path) -> Value {
    let path = dir.join("results.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `workload / scheduler` of each cell.
fn cell_ids(results: &Value) -> Vec<String> {
    results["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|c| {
            format!(
                "{} / {}",
                c["workload"]["name"].as_str().unwrap(),
                c["scheduler"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

/// The runs of cell `cell`: (warmup, status, metric, reason).
fn runs_of(results: &Value, cell: usize) -> Vec<(bool, String, Option<f64>, String)> {
    results["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter(|r| r["cell"].as_u64() == Some(cell as u64))
        .map(|r| {
            (
                r["warmup"].as_bool().unwrap(),
                r["status"].as_str().unwrap().to_string(),
                r["metric"].as_f64(),
                r["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn check_quick(out: &Path, report: &Report) {
    assert_eq!(report.get("quick_exit"), Some("0"), "quick suite");
    assert_eq!(report.get("state_after_quick"), Some("disabled"));
    let quick = out.join("quick");
    let results = results(&quick);
    assert_eq!(
        cell_ids(&results),
        [
            "chain / default",
            "chain / scx_nest",
            "pipe / default",
            "pipe / scx_nest"
        ]
    );
    assert_eq!(results["machine"]["emulated"], Value::Bool(true));
    for cell in 0..4 {
        let runs = runs_of(&results, cell);
        let measured: Vec<_> = runs.iter().filter(|r| !r.0).collect();
        assert_eq!(runs.len(), 3, "cell {cell}: 1 warm-up + 2 runs: {runs:?}");
        assert_eq!(measured.len(), 2, "cell {cell}: {runs:?}");
        for run in &runs {
            assert_eq!(run.1, "OK", "cell {cell}: {runs:?}");
            assert!(run.2.is_some_and(|m| m > 0.0), "cell {cell}: {runs:?}");
        }
    }
    let csv = std::fs::read_to_string(quick.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 12, "{csv}");
    let html = std::fs::read_to_string(quick.join("report.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 2, "a figure per workload");
    assert_eq!(html.matches("class=\"bar\"").count(), 2, "scx_nest's bars");
    assert!(html.contains("under emulation: times measure placement, not speed"));
    assert!(html.contains("<h2>Summary</h2>") && html.contains("<td>baseline</td>"));
    let table = report.output.join("\n");
    assert!(table.contains("under emulation"), "{table}");
    assert!(
        report
            .output
            .iter()
            .any(|l| l.starts_with("chain") && l.contains("scx_nest") && l.contains("2/2")),
        "{table}"
    );
    let progress = std::fs::read_to_string(out.join("quick.progress")).unwrap();
    assert!(
        progress.contains("[cell 4/4, run 2/2, ETA "),
        "progress on stderr: {progress}"
    );
}

fn check_failing(out: &Path, report: &Report) {
    // 3: the check failed (a FAILED run), not 1: nest bench could not run.
    assert_eq!(report.get("failing_exit"), Some("3"), "failed runs exit 3");
    assert_eq!(report.get("state_after_failing"), Some("disabled"));
    let results = results(&out.join("failing"));
    assert_eq!(
        cell_ids(&results),
        ["pipe / default", "pipe / bad-flag", "pipe / starving"]
    );
    let default = runs_of(&results, 0);
    assert_eq!(default.len(), 1);
    assert_eq!(default[0].1, "OK", "{default:?}");
    let bad = runs_of(&results, 1);
    assert_eq!((bad[0].1.as_str(), bad[0].2), ("FAILED", None), "{bad:?}");
    assert!(
        bad[0].3.starts_with("did not attach: exited with status")
            && bad[0].3.contains("--no-such-flag"),
        "{bad:?}"
    );
    let starving = runs_of(&results, 2);
    assert_eq!(
        (starving[0].1.as_str(), starving[0].2),
        ("FAILED", None),
        "{starving:?}"
    );
    assert!(
        starving[0].3.starts_with("ejected") && starving[0].3.contains("stall"),
        "{starving:?}"
    );
    assert!(
        report
            .output
            .iter()
            .any(|l| l.starts_with("pipe") && l.contains("starving") && l.contains("FAILED")),
        "{:#?}",
        report.output
    );
    assert!(
        report
            .output
            .iter()
            .any(|l| l.starts_with("FAILED pipe / starving, run 1: ejected")),
        "{:#?}",
        report.output
    );
}

/// The failing suite's traced runs: a trace of the default cell's run,
/// the reasons for the others.
fn check_traces(out: &Path) {
    let failing = out.join("failing");
    let results = results(&failing);
    let traces = results["traces"].as_array().expect("traces");
    assert_eq!(traces.len(), 3, "{traces:#?}");
    let default = &traces[0];
    assert_eq!(default["error"], Value::Null, "{default:#?}");
    assert!(
        default["mean_cpus_used"].as_f64().is_some_and(|n| n > 0.0),
        "{default:#?}"
    );
    assert!(
        default["mean_sockets_used"]
            .as_f64()
            .is_some_and(|n| n > 0.0 && n <= 2.0),
        "the guest has two sockets: {default:#?}"
    );
    let file = default["file"].as_str().unwrap();
    assert!(Path::new(file).exists(), "{file}");
    // The guests have no cpufreq: no frequency events, no residency.
    assert_eq!(default["residency"], serde_json::json!([]), "{default:#?}");
    assert!(
        traces[1]["error"]
            .as_str()
            .unwrap()
            .starts_with("did not attach")
    );
    assert!(traces[2]["error"].as_str().unwrap().starts_with("ejected"));
    assert_eq!(
        results["runs"].as_array().unwrap().len(),
        3,
        "traced runs are no runs"
    );
    let html = std::fs::read_to_string(failing.join("report.html")).unwrap();
    assert!(html.contains("Where the work ran"));
    assert!(html.contains("<p>pipe: no cpufreq events in the trace</p>"));
    assert_eq!(
        html.matches("<svg").count(),
        2,
        "the speedup figure and one trace's"
    );
}

/// scx_nest in partial mode ran the workload through `nest run`: in
/// SCHED_EXT, where the default scheduler's cell ran it in SCHED_OTHER.
fn check_partial(out: &Path, report: &Report) {
    assert_eq!(report.get("partial_exit"), Some("0"), "partial suite");
    assert_eq!(report.get("state_after_partial"), Some("disabled"));
    let partial = out.join("partial");
    let results = results(&partial);
    assert_eq!(
        cell_ids(&results),
        [
            "policy / default",
            "policy / nest-partial",
            "chain / default",
            "chain / nest-partial"
        ]
    );
    for cell in 0..4 {
        let runs = runs_of(&results, cell);
        assert!(
            runs.len() == 1 && runs[0].1 == "OK",
            "cell {cell}: {runs:?}"
        );
    }
    let policy = |scheduler: &str| {
        let log = partial.join(format!("logs/policy-{scheduler}-r1.log"));
        std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()))
    };
    assert_eq!(policy("default"), "policy=0\n", "SCHED_OTHER");
    assert_eq!(policy("nest-partial"), "policy=7\n", "SCHED_EXT");
}

fn check_refusals(report: &Report) {
    let fact = |key: &str| report.get(key).unwrap_or_default().to_string();
    assert_eq!(fact("nonroot_exit"), "1");
    assert!(
        fact("nonroot_message").contains("needs root"),
        "{}",
        fact("nonroot_message")
    );
    assert_eq!(fact("other_attached_exit"), "1");
    assert!(
        fact("other_attached_message").contains("another sched_ext scheduler is attached"),
        "{}",
        fact("other_attached_message")
    );
    assert_eq!(
        fact("other_unchanged"),
        "yes",
        "the attached scheduler was left alone"
    );
    assert_eq!(
        fact("other_results_written"),
        "no",
        "a refusal writes nothing"
    );
    assert_eq!(fact("other_exit"), "0");
}

#[test]
#[ignore = "boots a QEMU guest; run via scripts/test.sh"]
fn nest_bench_reports_the_quick_suite_and_never_counts_failed_schedulers() {
    // NEST_VM_OUT keeps the guest's results and report for reading.
    let temp = tempfile::Builder::new()
        .prefix("nest-vm-bench-")
        .tempdir()
        .expect("temporary directory");
    let dir = std::env::var_os("NEST_VM_OUT").map_or_else(|| temp.path().to_path_buf(), Into::into);
    let out = nest_vm::output_dir(&dir).unwrap_or_else(|e| panic!("{e:#}"));
    let spec = VmSpec {
        numa: true,
        // Hangs only: 3x the longest run seen (577-600 s, a slow host).
        timeout: Duration::from_secs(1800),
        workdir: Some(repo_root()),
        output_dir: Some(out.clone()),
        ..VmSpec::with_topology(2, 2, 1)
    };
    let command = format!(
        "NEST_BIN={} tests/vm/bench.sh {}",
        shell_quote(&bin_dir().to_string_lossy()),
        shell_quote(&out.to_string_lossy())
    );
    let outcome = run_ok(&spec, "bench.sh", &command);
    let report = Report::parse(&outcome.stdout);
    for line in &report.output {
        eprintln!("  {line}");
    }
    eprintln!(
        "quick suite: {} s in the guest",
        report.get("quick_seconds").unwrap_or("?")
    );
    check_quick(&out, &report);
    check_failing(&out, &report);
    check_traces(&out);
    check_partial(&out, &report);
    check_refusals(&report);
    // The starving scheduler's stall is expected; nothing else may be.
    let problems: Vec<String> = kernel_problems(&report.dmesg)
        .into_iter()
        .filter(|p| !p.starts_with("SchedExtStall") && !p.starts_with("SchedExtError"))
        .collect();
    assert_eq!(problems, Vec::<String>::new());
}
