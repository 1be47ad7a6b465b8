//! The `nest` command line as users meet it: the built binary, its exit
//! statuses and what it prints on stderr.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn nest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nest"))
        .args(args)
        .output()
        .expect("cannot run nest")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A small simulation that still prints several hundred lines of JSON.
const SMALL_SIM: [&str; 10] = [
    "sim",
    "-m",
    "test-guest-2s",
    "-w",
    "configure:steps=5",
    "-s",
    "1",
    "-q",
    "-f",
    "json",
];

/// Runs nest with its stdout a pipe whose reader is gone before nest
/// writes: every write fails with EPIPE.
fn nest_into_closed_pipe(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nest"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run nest");
    drop(child.stdout.take());
    child.wait_with_output().expect("nest did not finish")
}

#[test]
fn a_closed_pipe_ends_quietly_with_status_0() {
    let output = nest_into_closed_pipe(&SMALL_SIM);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stderr(&output), "");

    let dir = std::env::temp_dir().join(format!("nest-cli-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("t.nest.jsonl").display().to_string();
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../nest-trace/tests/fixtures/tracefs.txt"
    );
    let import = nest(&["trace", "import", fixture, "-o", &trace]);
    assert!(import.status.success(), "{}", stderr(&import));
    let output = nest_into_closed_pipe(&["trace", "metrics", &trace]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stderr(&output), "");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn head_sees_the_first_line_and_nothing_complains() {
    let command = format!(
        "'{}' {} | head -1",
        env!("CARGO_BIN_EXE_nest"),
        SMALL_SIM.join(" ")
    );
    let output = Command::new("sh").args(["-c", &command]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), "[\n");
    assert_eq!(stderr(&output), "");
    assert!(output.status.success());
}

#[test]
fn a_bad_duration_is_a_usage_error_naming_the_valid_forms() {
    for args in [
        &["sim", "--p-remove", "8"][..],
        &["trace", "tree", "t.trace", "--interval", "fast"],
        &["vm", "run", "--timeout", "60", "--", "true"],
    ] {
        let output = nest(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let err = stderr(&output);
        assert!(
            err.contains("ns, us, ms or s") && err.contains("e.g. 500us, 8ms"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn a_bad_value_of_a_list_is_a_usage_error_listing_the_valid_ones() {
    for (args, valid) in [
        (
            &["sim", "-f", "yaml"][..],
            "[possible values: table, csv, json]",
        ),
        (
            &["sim", "-g", "ondemand"],
            "[possible values: performance, powersave, schedutil, schedutil-hint]",
        ),
        (
            &["sim", "-p", "linux,eevdf"],
            "[possible values: linux, nest, nest-nospin, s-local, s-move]",
        ),
        (
            &["sim", "--disable", "spin"],
            "valid: attach, reserve, impatience,",
        ),
        (&["sim", "--perf", "turbo"], "valid: util, nest, max"),
    ] {
        let output = nest(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let err = stderr(&output);
        assert!(err.contains(valid), "{args:?}: {err}");
    }
}

#[test]
fn conflicting_options_are_usage_errors() {
    let output = nest(&["vm", "run", "--sockets", "2", "--cpus", "3", "--", "true"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("does not match"),
        "{}",
        stderr(&output)
    );
    let output = nest(&["sim", "--sweep", "-f", "json"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("cannot be used with"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn csv_writes_every_table_into_the_directory() {
    let dir: PathBuf = std::env::temp_dir().join(format!("nest-cli-csv-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut args = SMALL_SIM.to_vec();
    args.extend(["--csv", dir.to_str().unwrap()]);
    let output = nest(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    for (file, column) in [
        ("runs.csv", ",completion_ms,"),
        ("tasks.csv", ",pid,comm,"),
        ("timeline.csv", ",cpus_used,"),
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let header = text.lines().next().unwrap_or_default();
        assert!(header.contains(column), "{file}: {header}");
        assert!(text.lines().count() > 2, "{file} has rows");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Binary traces are told by their first bytes, whatever their name, and
/// without the tool that reads them the error names the Debian package.
/// PATH is emptied so the tools are missing even where they are installed.
#[test]
fn a_binary_trace_without_its_tool_says_which_package_to_install() {
    let dir = std::env::temp_dir().join(format!("nest-cli-tools-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("empty-path")).unwrap();
    let cases = [
        (
            "a.nest.jsonl",
            &b"\x17\x08\x44tracing6\0\0\0"[..],
            "trace-cmd trace.dat",
            "`trace-cmd`",
            "apt-get install trace-cmd",
        ),
        (
            "b.dat",
            &b"PERFILE2\0\0\0\0"[..],
            "perf.data",
            "`perf`",
            "apt-get install linux-perf",
        ),
    ];
    for (name, bytes, what, tool, install) in cases {
        let file = dir.join(name);
        std::fs::write(&file, bytes).unwrap();
        let out = ["-o", "/nonexistent/out"];
        let commands: [(&str, &[&str]); 6] = [
            ("import", &out),
            ("report", &[]),
            ("metrics", &[]),
            ("tree", &[]),
            ("export", &out),
            ("replay", &out),
        ];
        for (command, options) in commands {
            let output = Command::new(env!("CARGO_BIN_EXE_nest"))
                .env("PATH", dir.join("empty-path"))
                .args(["trace", command])
                .arg(&file)
                .args(options)
                .output()
                .unwrap();
            let err = stderr(&output);
            assert_eq!(output.status.code(), Some(1), "{command} {name}: {err}");
            assert!(err.contains(&file.display().to_string()), "{err}");
            assert!(
                err.contains(what) && err.contains(tool) && err.contains(install),
                "{command}: {err}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sensitivity_reports_each_gain_as_a_range_over_the_assumptions() {
    let dir = tempfile::tempdir().unwrap();
    let csv_dir = dir.path().display().to_string();
    let output = nest(&[
        "sim",
        "--sensitivity",
        "-m",
        "xeon-gold-5218-2s",
        "-w",
        "configure:steps=20",
        "-g",
        "performance,schedutil",
        "-s",
        "1",
        "-q",
        "--csv",
        &csv_dir,
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("median [low, high]"), "{table}");
    let machine = nest_sim::Machine::builtin("xeon-gold-5218-2s").unwrap();
    let csv = std::fs::read_to_string(dir.path().join("sensitivity.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    // Nest against Linux under each governor, in time and energy.
    assert_eq!(rows.len(), 4, "{csv}");
    for row in &rows {
        assert_eq!((row[0], row[2]), ("nest", "linux"), "{csv}");
        let value = |i: usize| row[i].parse::<f64>().unwrap();
        let (central, median, low, high) = (value(4), value(5), value(6), value(7));
        assert!(low <= median && median <= high, "{csv}");
        assert!(low <= central && central <= high, "{csv}");
        assert!(machine.assumptions.contains_key(row[8]), "{csv}");
    }
    assert!(dir.path().join("runs.csv").exists());
}

#[test]
fn version_names_the_git_revision() {
    for flag in ["-V", "--version"] {
        let output = nest(&[flag]);
        assert!(output.status.success(), "{}", stderr(&output));
        let text = String::from_utf8_lossy(&output.stdout);
        let prefix = format!("nest {} (git ", env!("CARGO_PKG_VERSION"));
        assert!(text.starts_with(&prefix) && text.ends_with(")\n"), "{text}");
    }
}

#[test]
fn man_writes_a_page_per_command_with_its_options_and_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man");
    let output = nest(&["man", "-o", out.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let page = |name: &str| {
        std::fs::read_to_string(out.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    for name in [
        "nest.1",
        "nest-sim.1",
        "nest-bench-compare.1",
        "nest-trace-record.1",
    ] {
        assert!(page(name).contains(".SH SYNOPSIS"), "{name}");
    }
    assert!(page("nest.1").contains("the command ran and its check failed"));
    assert!(page("nest-validate.1").contains("\\-\\-kernels"));
}
