//! Whole cores first, in the kernel: one CPU-bound thread per physical
//! core of a 2 sockets x 4 cores x 2 threads NUMA guest (8 threads on 16
//! vCPUs), recorded by tests/vm/compare.sh under the default scheduler,
//! under Nest and under Nest with `--disable whole-cores` (the published,
//! SMT-blind placement: the negative control). From the kernel's
//! tracepoints, `needless_share` (nest-trace's `smt_sharing`) is the share
//! of running time spent on a core whose other thread also ran a task while
//! some core ran nothing at all.
//!
//! QEMU numbers a core's two threads as neighbouring CPUs, so the published
//! primary scan (from the previous CPU onwards, in CPU order) takes the
//! parent's sibling first, and the threads never sleep, so a pair formed at
//! their creation stays unless the scheduler moves a running task (Nest's
//! tick unpairing, `nest_tick`). Nest must not pair threads. The SMT-blind
//! control is printed, not asserted: over 10 runs it paired 0.195-0.690 of
//! the time in 9 and 0.013 in one (whether the parent's core is taken at
//! creation is a race), so a per-run assertion on it would be flaky; the
//! host tests show the mechanism can fail (`--disable whole-cores`).
//! `--disable warm-spin` as in every placement test (a spinning vCPU takes
//! the single emulation thread from the others).
//!
//! Ignored by default (boots a guest); scripts/test.sh runs it. Needs
//! `cargo build -p nest -p scx_nest -p nest-load` first and fails, not
//! skips, when something is missing. `NEST_VM_OUT=DIR` keeps the traces.

use std::time::Duration;

use nest_trace::metrics::smt_sharing;
use nest_trace::table::Cell;
use nest_trace::timeline::Timeline;
use vm_tests::compare::{Comparison, guest_bin};
use vm_tests::kernel_problems;
use vm_tests::trace::compare_problems;

/// The scx_nest runs after the default scheduler's: name, options.
const RUNS: [(&str, &str); 2] = [
    ("nest", "--disable warm-spin"),
    ("blind", "--disable warm-spin,whole-cores"),
];
/// Largest needless share Nest may show (kernel threads and the recorder
/// run beside the workload now and then): measured 0.002-0.021 with tick
/// unpairing, against 0.195-0.690 for the SMT-blind control in 9 of 10 runs.
const NEST_MAX: f64 = 0.10;

/// `needless_share` of run `name`'s trace.
fn needless_share(cmp: &Comparison, name: &str) -> f64 {
    let table = smt_sharing(&Timeline::build(&cmp.trace(name)));
    table
        .get(0, "needless_share")
        .and_then(Cell::as_f64)
        .expect("smt_sharing has a needless_share")
}

#[test]
#[ignore = "boots a QEMU guest; run via scripts/test.sh"]
fn nest_puts_one_thread_per_core_while_cores_are_idle() {
    let cmp = Comparison::new("nest-vm-smt-");
    let runs = RUNS.map(|(name, options)| (name, options.to_string()));
    let workload = format!("{}/nest-load batch --tasks 8 --work-ms 500", guest_bin());
    let (outcome, report) = cmp.run(
        "compare.sh (smt)",
        // Hangs only: 3x the longest run seen (253 s, a slow host).
        Duration::from_secs(800),
        &runs,
        &workload,
    );
    let names: Vec<&str> = RUNS.iter().map(|(name, _)| *name).collect();
    let mut problems = compare_problems(&report, &names);
    problems.extend(kernel_problems(&outcome.console_log));

    let [default, nest, blind] = ["default", "nest", "blind"].map(|n| needless_share(&cmp, n));
    eprintln!(
        "share of running time on a needlessly shared core: default {default:.3}, \
         nest {nest:.3}, SMT-blind nest {blind:.3}"
    );
    if nest > NEST_MAX {
        problems.push(format!("nest: needless share {nest:.3} > {NEST_MAX}"));
    }
    assert!(problems.is_empty(), "problems: {problems:#?}");
}
