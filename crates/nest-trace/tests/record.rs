//! The tracefs recorder. The real recording needs root and a mounted
//! tracefs; it is ignored by default and run by scripts/test.sh, and it
//! fails (does not skip) when tracefs is unavailable.

use std::path::Path;
use std::time::Duration;

use nest_trace::EventKind;
use nest_trace::record::{RecordOptions, Workload, find_tracefs, record};

#[test]
fn missing_tracefs_says_how_to_mount_it() {
    let err = find_tracefs(Some(Path::new("/nonexistent/tracing"))).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("mount -t tracefs nodev /sys/kernel/tracing"),
        "{msg}"
    );
    let opts = RecordOptions {
        tracefs: Some("/nonexistent/tracing".into()),
        ..Default::default()
    };
    assert!(record(&Workload::Duration(Duration::from_millis(1)), &opts).is_err());
}

#[test]
#[ignore = "needs root and tracefs; run by scripts/test.sh"]
fn records_a_fork_exec_workload_for_real() {
    let argv: Vec<String> = ["sh", "-c", "for i in 1 2 3 4 5; do /bin/true; done"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let opts = RecordOptions {
        buffer_kb: 4096,
        ..Default::default()
    };
    let trace = record(&Workload::Command(argv), &opts).expect("recording works (root, tracefs)");
    let shell: u32 = trace.meta_get("command_pid").unwrap().parse().unwrap();
    let count = |f: &dyn Fn(&EventKind) -> bool| trace.events.iter().filter(|e| f(&e.kind)).count();
    let forks = count(&|k| matches!(k, EventKind::NewTask { parent, .. } if *parent == shell));
    let execs = count(&|k| matches!(k, EventKind::Exec { comm, .. } if comm == "true"));
    let exits = count(&|k| matches!(k, EventKind::Exit { .. }));
    let switches = count(&|k| matches!(k, EventKind::Switch { .. }));
    assert_eq!(forks, 5, "the shell forks 5 times");
    assert_eq!(execs, 5, "5 execs of /bin/true");
    assert!(exits >= 6, "5 children and the shell exit, got {exits}");
    assert!(switches > 10);
    assert!(trace.events.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
    assert_eq!(trace.meta_get("exit_status"), Some("exit status: 0"));
    let host = nest_topology::read_sysfs_topology(Path::new("/")).unwrap();
    assert_eq!(trace.topology, host);
    let tracefs = find_tracefs(None).unwrap();
    let instance = tracefs.join(format!("instances/nest-{}", std::process::id()));
    assert!(!instance.exists(), "instance removed");
    // Every wakeup of a child is followed by its switch-in.
    let tl = nest_trace::timeline::Timeline::build(&trace);
    assert!(!tl.wakeup_latencies.is_empty());
}
