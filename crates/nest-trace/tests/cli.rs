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
        &fixture("tracefs.txt"),
        "--out",
        &p("a.nest.jsonl"),
    ])
    .unwrap();
    nest(&[
        "import",
        &fixture("perf-script.txt"),
        "-o",
        &p("b.nest.jsonl"),
        "--topology-root",
        "/",
    ])
    .unwrap();
    nest(&[
        "import",
        &fixture("trace-cmd.txt"),
        "-o",
        &p("c.nest.jsonl"),
    ])
    .unwrap();
    let a = nest_trace::format::load(&dir.join("a.nest.jsonl")).unwrap();
    let c = nest_trace::format::load(&dir.join("c.nest.jsonl")).unwrap();
    assert_eq!(a.events, c.events);
    nest(&[
        "metrics",
        &p("a.nest.jsonl"),
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
        &p("a.nest.jsonl"),
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
    nest(&["export", &p("a.nest.jsonl"), "-o", &p("a.pftrace")]).unwrap();
    assert!(std::fs::metadata(dir.join("a.pftrace")).unwrap().len() > 100);
    nest(&[
        "compare",
        &p("a.nest.jsonl"),
        &p("b.nest.jsonl"),
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
    let both = nest(&["import", "a", "b"]);
    assert!(both.is_err(), "one input only");
    let err = nest(&["record", "--out", "/nonexistent/x"]).unwrap_err();
    assert!(err.to_string().contains("--duration <DURATION>"), "{err}");
    let err = nest(&["record", "--duration", "10s", "--", "true"]).unwrap_err();
    assert!(err.to_string().contains("cannot be used with"), "{err}");
    let err = nest(&["record", "--duration", "10"]).unwrap_err();
    assert!(err.to_string().contains("no unit"), "{err}");
    let dir = tempdir("usage");
    let t = dir.join("t.nest.jsonl").display().to_string();
    nest(&["import", &fixture("tracefs.txt"), "-o", &t]).unwrap();
    let err = nest(&["metrics", &t, "--interval", "0.1ns"]).unwrap_err();
    assert!(err.to_string().contains("at least 1ns"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
    let err = nest(&["report", "/nonexistent/t.nest.jsonl"]).unwrap_err();
    assert!(
        format!("{err:#}").contains("cannot open /nonexistent/t.nest.jsonl"),
        "{err:#}"
    );
}

#[test]
fn truncated_trace_file_is_reported_with_its_line() {
    let dir = tempdir("trunc");
    let path = dir.join("t.nest.jsonl");
    nest(&[
        "import",
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

#[test]
fn text_and_nest_traces_are_told_by_content_not_name() {
    let dir = tempdir("detect");
    for (fixture_name, source) in [
        ("tracefs.txt", "tracefs"),
        ("perf-script.txt", "perf script"),
        ("trace-cmd.txt", "trace-cmd report"),
        ("real/trace-cmd.txt", "trace-cmd report"),
    ] {
        let copy = dir.join("input.dat");
        std::fs::copy(fixture(fixture_name), &copy).unwrap();
        let trace = nest_trace::input::load(&copy).unwrap();
        assert_eq!(trace.meta_get("source"), Some(source), "{fixture_name}");
        let saved = dir.join("saved.perfetto");
        nest_trace::format::save(&trace, &saved).unwrap();
        assert_eq!(nest_trace::input::load(&saved).unwrap(), trace);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn malformed_files_are_refused_naming_the_file_and_line() {
    let dir = tempdir("malformed");
    let good = dir.join("good.nest.jsonl");
    nest(&[
        "import",
        &fixture("tracefs.txt"),
        "-o",
        &good.display().to_string(),
    ])
    .unwrap();
    let good_text = std::fs::read_to_string(&good).unwrap();
    let bad_event = good_text.replacen("\"Switch\"", "\"Swich\"", 1);
    let bad_line = bad_event.lines().position(|l| l.contains("Swich")).unwrap() + 1;
    let cases: Vec<(&str, Vec<u8>, String)> = vec![
        ("empty", vec![], "empty file, not a trace".into()),
        (
            "event",
            bad_event.into_bytes(),
            format!("line {bad_line}: expected an event object: unknown variant `Swich`"),
        ),
        (
            "header",
            b"{\"format\":\"perfetto\"}\n".to_vec(),
            "line 1: expected a nest-trace header object".into(),
        ),
        (
            "version",
            good_text
                .replacen("\"version\":1", "\"version\":2", 1)
                .into_bytes(),
            "line 1: expected version 1, found 2".into(),
        ),
        (
            "binary",
            vec![0xff, 0x00, 0x13, 0x37, b'\n', 0x80],
            "line 1: expected a [CPU] column".into(),
        ),
        (
            "text",
            std::fs::read_to_string(fixture("tracefs.txt"))
                .unwrap()
                .replacen("target_cpu=001", "target_cpu=x", 1)
                .into_bytes(),
            "line 14: sched_wakeup_new: expected a number for target_cpu=, found \"x\"".into(),
        ),
    ];
    for (name, bytes, expected) in cases {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let err = format!(
            "{:#}",
            nest(&["metrics", &path.display().to_string()]).unwrap_err()
        );
        assert!(err.contains(&path.display().to_string()), "{name}: {err}");
        assert!(err.contains(&expected), "{name}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn metrics_lacking_their_events_say_which_instead_of_zeros() {
    use nest_trace::report::{ReportOptions, all_tables};
    let table = |fixture_name: &str, name: &str| {
        let trace = nest_trace::input::load(std::path::Path::new(&fixture(fixture_name))).unwrap();
        let tables = all_tables(&trace, &ReportOptions::default());
        tables.into_iter().find(|t| t.name == name).unwrap()
    };
    let no_freq = table("real/perf-script.txt", "frequency_residency");
    assert!(no_freq.rows.is_empty());
    let reason = no_freq.missing.unwrap();
    assert!(
        reason.starts_with("no cpu_frequency events in this trace"),
        "{reason}"
    );
    assert!(
        table("tracefs.txt", "frequency_residency")
            .missing
            .is_none()
    );
    let no_nest = table("tracefs.txt", "nest_activity");
    assert!(
        no_nest
            .missing
            .unwrap()
            .starts_with("no NestChange or WarmSpin events")
    );
    let summary = table("real/perf-script.txt", "summary");
    let p50 = summary
        .rows
        .iter()
        .find(|r| r[0] == "wakeup_p50_ns".into())
        .unwrap();
    assert_ne!(
        p50[1],
        nest_trace::table::Cell::Text("n/a".into()),
        "the fixture has wakeups"
    );
}
