//! Binary traces recorded for real: trace-cmd's trace.dat and perf's
//! perf.data, read through `trace-cmd report` and `perf script` and told
//! apart by content (the files are given names that say nothing). These
//! need root, tracefs, trace-cmd and perf (scripts/setup.sh installs them);
//! they are ignored by default and run by scripts/test.sh, and they fail
//! (do not skip) when something is missing. The error for a missing tool
//! is tested without the tools in crates/nest/tests/cli.rs.

use std::path::{Path, PathBuf};
use std::process::Command;

use nest_trace::{EventKind, Trace, input};

const WORKLOAD: &str = "for i in 1 2 3; do /bin/true; done";

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nest-trace-bin-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(command: &mut Command) {
    let output = command.output().expect("the tool is installed");
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn execs_of_true(trace: &Trace) -> usize {
    let is_true = |k: &EventKind| matches!(k, EventKind::Exec { comm, .. } if comm == "true");
    trace.events.iter().filter(|e| is_true(&e.kind)).count()
}

#[test]
#[ignore = "needs root, tracefs and trace-cmd; run by scripts/test.sh"]
fn reads_a_trace_dat_recorded_with_trace_cmd() {
    // `trace-cmd record` writes /proc/sys/kernel/ftrace_enabled, which a
    // container refuses; recording into a tracefs instance and saving it
    // with `trace-cmd extract` works everywhere tracefs does.
    let name = format!("nest-tc-{}", std::process::id());
    let instance = Path::new("/sys/kernel/tracing/instances").join(&name);
    std::fs::create_dir(&instance).expect("root and tracefs at /sys/kernel/tracing");
    let write = |file: &str, value: &str| std::fs::write(instance.join(file), value).unwrap();
    for event in ["sched_switch", "sched_process_fork", "sched_process_exec"] {
        write(&format!("events/sched/{event}/enable"), "1");
    }
    write("tracing_on", "1");
    run(Command::new("sh").args(["-c", WORKLOAD]));
    write("tracing_on", "0");
    let dir = tempdir("dat");
    let dat = dir.join("recording");
    let extracted = Command::new("trace-cmd")
        .args(["extract", "-B", &name, "-o"])
        .arg(&dat)
        .output();
    // `trace-cmd extract -B` removes the instance; make sure it is gone.
    let _ = std::fs::remove_dir(&instance);
    let extracted = extracted.expect("trace-cmd is installed");
    assert!(extracted.status.success(), "{extracted:?}");
    assert_reads_back(&dat, input::TRACE_CMD_MAGIC, "trace-cmd report");

    // The damaged file is refused with trace-cmd's reason, naming the file.
    let bad = dir.join("damaged");
    let mut bytes = std::fs::read(&dat).unwrap();
    bytes.truncate(64);
    std::fs::write(&bad, bytes).unwrap();
    let err = format!("{:#}", input::load(&bad).unwrap_err());
    assert!(
        err.contains(&format!("{} is a trace-cmd trace.dat file", bad.display())),
        "{err}"
    );
    assert!(err.contains("trace-cmd report -i"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[ignore = "needs root and perf; run by scripts/test.sh"]
fn reads_a_perf_data_recorded_with_perf() {
    let dir = tempdir("perf");
    let data = dir.join("recording");
    run(Command::new("perf")
        .args(["record", "-q", "-a", "-o"])
        .arg(&data)
        .args(["-e", "sched:sched_switch", "-e", "sched:sched_process_exec"])
        .args(["--", "sh", "-c", WORKLOAD]));
    assert_reads_back(&data, input::PERF_DATA_MAGIC, "perf script");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `file` starts with `magic` and reads back, through `source`, as the
/// recorded workload: three execs of `true` and context switches.
fn assert_reads_back(file: &std::path::Path, magic: &[u8], source: &str) {
    assert!(std::fs::read(file).unwrap().starts_with(magic));
    let trace = input::load(file).unwrap();
    assert_eq!(trace.meta_get("source"), Some(source));
    assert_eq!(execs_of_true(&trace), 3);
    assert!(
        trace
            .events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Switch { .. }))
    );
}
