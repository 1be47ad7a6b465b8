//! The `nest trace` subcommands end to end, through clap as the `nest`
//! binary will call them.

use std::path::PathBuf;

use clap::Parser;
use nest_trace::{TraceArgs, run};

#[derive(Parser)]
struct Nest {
    #[command(flatten)]
    trace: TraceArgs,
}

fn nest(args: &[&str]) -> anyhow::Result<()> {
    let mut argv = vec!["nest-trace"];
    argv.extend_from_slice(args);
    run(Nest::try_parse_from(argv)?.trace)
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nest-trace-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn import_report_metrics_export_compare() {
    let dir = tempdir("all");
    let p = |f: &str| dir.join(f).display().to_string();
    nest(&[
        "import",
        "--tracefs",
        &fixture("tracefs.txt"),
        "--out",
        &p("a.trace"),
    ])
    .unwrap();
    nest(&[
        "import",
        "--perf-script",
        &fixture("perf-script.txt"),
        "-o",
        &p("b.trace"),
        "--topology-root",
        "/",
    ])
    .unwrap();
    nest(&[
        "import",
        "--trace-cmd",
        &fixture("trace-cmd.txt"),
        "-o",
        &p("c.trace"),
    ])
    .unwrap();
    let a = nest_trace::format::load(&dir.join("a.trace")).unwrap();
    let c = nest_trace::format::load(&dir.join("c.trace")).unwrap();
    assert_eq!(a.events, c.events);
    nest(&[
        "metrics",
        &p("a.trace"),
        "--csv",
        &p("csv"),
        "--interval",
        "100us",
    ])
    .unwrap();
    let underload = std::fs::read_to_string(dir.join("csv/underload.csv")).unwrap();
    assert!(underload.starts_with("start_ns,end_ns,cpus_used,avg_concurrency,underload\n"));
    assert_eq!(
        underload.lines().count(),
        1 + 3,
        "300 us in 100 us intervals"
    );
    nest(&[
        "report",
        &p("a.trace"),
        "--out",
        &p("a.html"),
        "--svg-dir",
        &p("svg"),
        "--png",
    ])
    .unwrap();
    assert!(
        std::fs::read_to_string(dir.join("a.html"))
            .unwrap()
            .contains("<svg")
    );
    assert!(dir.join("svg/run_queue_heatmap.png").is_file());
    assert!(dir.join("svg/frequency_heatmap.svg").is_file());
    nest(&["export", &p("a.trace"), "-o", &p("a.pftrace")]).unwrap();
    assert!(std::fs::metadata(dir.join("a.pftrace")).unwrap().len() > 100);
    nest(&[
        "compare",
        &p("a.trace"),
        &p("b.trace"),
        "-o",
        &p("cmp.html"),
        "--bands-khz",
        "2000000,3000000",
    ])
    .unwrap();
    assert!(
        std::fs::read_to_string(dir.join("cmp.html"))
            .unwrap()
            .contains("a vs b")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn usage_errors_are_clear() {
    assert!(
        nest(&["import", "--out", "x"]).is_err(),
        "an input is required"
    );
    let both = nest(&["import", "--tracefs", "a", "--perf-script", "b"]);
    assert!(both.is_err());
    let err = nest(&["record", "--out", "/nonexistent/x"]).unwrap_err();
    assert!(err.to_string().contains("--duration <DURATION>"), "{err}");
    let err = nest(&["record", "--duration", "10s", "--", "true"]).unwrap_err();
    assert!(err.to_string().contains("cannot be used with"), "{err}");
    let err = nest(&["record", "--duration", "10"]).unwrap_err();
    assert!(err.to_string().contains("no unit"), "{err}");
    let dir = tempdir("usage");
    let t = dir.join("t.trace").display().to_string();
    nest(&["import", "--tracefs", &fixture("tracefs.txt"), "-o", &t]).unwrap();
    let err = nest(&["metrics", &t, "--interval", "0.1ns"]).unwrap_err();
    assert!(err.to_string().contains("at least 1ns"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
    let err = nest(&["report", "/nonexistent/t.trace"]).unwrap_err();
    assert!(
        format!("{err:#}").contains("cannot open /nonexistent/t.trace"),
        "{err:#}"
    );
}

#[test]
fn truncated_trace_file_is_reported_with_its_line() {
    let dir = tempdir("trunc");
    let path = dir.join("t.trace");
    nest(&[
        "import",
        "--tracefs",
        &fixture("tracefs.txt"),
        "-o",
        &path.display().to_string(),
    ])
    .unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let cut: String = text.lines().take(5).map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, cut).unwrap();
    let err = nest(&["metrics", &path.display().to_string()]).unwrap_err();
    assert!(
        format!("{err:#}").contains("line 6: file ends after 4 of 20 events"),
        "{err:#}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
