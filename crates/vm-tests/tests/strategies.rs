//! S_local and S_move placement in a real sched_ext kernel, from the
//! kernel's own tracepoints (tests/vm/strategies.sh records the traces).
//! Ignored by default: it boots a QEMU guest; scripts/test.sh runs it.

use std::path::Path;
use std::time::Duration;

use nest_vm::{VmSpec, shell_quote};
use vm_tests::compare::load_trace;
use vm_tests::strategies::{FirstRuns, first_runs};
use vm_tests::{Report, bin_dir, kernel_problems, repo_root, run_ok};

const CHILDREN: usize = 40;

fn children_first_runs(path: &Path) -> FirstRuns {
    let trace = load_trace(path);
    let parent: u32 = trace
        .meta_get("command_pid")
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("{} has no command_pid", path.display()));
    first_runs(&trace, parent)
}

#[test]
#[ignore = "boots a QEMU guest; run via scripts/test.sh"]
fn slocal_keeps_children_on_the_parents_cpu_and_smove_moves_them_off_a_busy_waker() {
    let out = tempfile::Builder::new()
        .prefix("nest-vm-strategies-")
        .tempdir()
        .expect("temporary directory");
    let out = nest_vm::output_dir(out.path()).unwrap_or_else(|e| panic!("{e:#}"));
    let spec = VmSpec {
        numa: true,
        timeout: Duration::from_secs(400),
        workdir: Some(repo_root()),
        output_dir: Some(out.clone()),
        ..VmSpec::with_topology(2, 4, 1)
    };
    let command = format!(
        "NEST_BIN={} tests/vm/strategies.sh {} {CHILDREN}",
        shell_quote(&bin_dir().to_string_lossy()),
        shell_quote(&out.to_string_lossy())
    );
    let outcome = run_ok(&spec, "strategies.sh", &command);
    let report = Report::parse(&outcome.stdout);
    for line in &report.output {
        eprintln!("  {line}");
    }
    for name in ["slocal", "smove"] {
        assert_eq!(
            report.get(&format!("{name}_state")),
            Some("enabled"),
            "{name}"
        );
        assert_eq!(
            report.get(&format!("{name}_state_after")),
            Some("enabled"),
            "{name}"
        );
        assert_eq!(
            report.get(&format!("{name}_record_exit")),
            Some("0"),
            "{name}"
        );
    }
    assert!(report.all("sched_exit").all(|status| status == "0"));
    assert_eq!(kernel_problems(&report.dmesg), Vec::<String>::new());

    // S_local: a child of a fork/wait chain runs where its parent forked it.
    let slocal = children_first_runs(&out.join("slocal.nest.jsonl"));
    // S_move with every CPU "at its minimum": each child is put on the
    // parent's CPU, the parent keeps running, and the timer moves the
    // child to the default CPU after D (50 us).
    let smove = children_first_runs(&out.join("smove.nest.jsonl"));
    eprintln!(
        "{CHILDREN} children: S_local {} on the parent's CPU, {} elsewhere, median fork-to-run {} us; \
         S_move {} on the parent's CPU, {} elsewhere ({} of {} forked beside an idle CPU), median fork-to-run {} us",
        slocal.on_parent_cpu,
        slocal.elsewhere,
        slocal.median_delay_ns() / 1000,
        smove.on_parent_cpu,
        smove.elsewhere,
        smove.beside_idle_elsewhere,
        smove.beside_idle,
        smove.median_delay_ns() / 1000
    );
    assert_eq!(slocal.children(), CHILDREN, "every child of the chain ran");
    assert_eq!(smove.children(), CHILDREN, "every child ran");
    assert!(
        slocal.on_parent_cpu * 10 >= CHILDREN * 9,
        "S_local should keep at least 90% of the chain on the parent's CPU: {slocal:?}"
    );
    // S_move has somewhere to send a child only while another CPU is idle;
    // on a busy host the guest's children pile up and the default CPU is
    // often the parent's own. Judge it on the children forked beside an
    // idle CPU, and make sure there were enough of them to judge.
    assert!(
        smove.beside_idle * 4 >= CHILDREN,
        "too few children were forked while another CPU was idle to judge S_move: {smove:?}"
    );
    assert!(
        smove.beside_idle_elsewhere * 2 >= smove.beside_idle,
        "S_move should move at least half the children forked beside an idle CPU off the busy parent's CPU: {smove:?}"
    );
}
