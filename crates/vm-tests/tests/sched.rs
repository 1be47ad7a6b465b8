//! scx_nest as a scheduler people can run: fairness by weight,
//! migrations and work conservation under overload, hackbench throughput
//! and wake-up latency, against the kernel's default scheduler in the same
//! boot of a 2 sockets x 4 cores x 2 threads NUMA guest (16 vCPUs).
//! tests/vm/sched.sh runs every phase under the default scheduler, then
//! under `scx_nest --disable warm-spin` (a spinning vCPU takes the single
//! emulation thread from the others), and reports facts and traces; the
//! verdicts are in `vm_tests::sched` (unit-tested). Asserted for Nest:
//!
//! - weights, two CPU hogs pinned to one CPU, CPU time from
//!   /proc/PID/schedstat over 4 s after a 1 s warm-up: nice 0 vs nice 10
//!   within 15% of the weights' ratio (1024/110 = 9.31), nice 0 vs nice 0
//!   within 10% of 1, a cgroup with cpu.weight 400 vs one with 100 within
//!   15% of 4 (the bounds; a 4 s window holds hundreds of 4 ms
//!   ticks, so rounding is not the limit);
//! - 32 CPU hogs (`nest-load hogs`) on the 16 vCPUs for 5 s, from the
//!   trace: while all 32 are alive (the overload's steady state), the hogs
//!   migrate at most at a tenth of their preemptions (a regression bound:
//!   one shared FIFO queue moved a task at nearly every preemption), and
//!   at most 2x as often as the default scheduler's or 2% of their
//!   preemptions if that is more (some boots' default hardly migrates).
//!   Two per CPU, each CPU's pair alternates between the CPU and its front
//!   queue and nothing moves; what moves is a task more than two per CPU
//!   in one LLC (passed from CPU to CPU every few slices, unless a CPU of
//!   the other LLC with one task takes it) and a task preempted by a
//!   wake-up (it resumes in its CPU's front queue); see
//!   docs/design/scheduler.md, "Which queue a CPU takes from". Also: no
//!   CPU idle for more than 12 ms (two 4 ms ticks and one for the emulated
//!   vCPU's wake-up, `vm_tests::placement::MAX_IDLE_WHILE_WAITING_NS`, or
//!   1.5x the default scheduler's longest in the same boot, or twice that
//!   if such periods add up to no more than the default's:
//!   `work_conservation_problems`) while one of the hogs waited; and
//!   scx_nest's own process used at most 2% of a CPU meanwhile
//!   (`MAX_OWN_CPU_SHARE`: a user-space loop that spins displaces the
//!   hogs). Migrations over the whole run are printed: most come when the
//!   first hogs exit and the rest spread over the CPUs left;
//! - hackbench (rt-tests, processes, 2 groups of 5 fds, 200 loops: small,
//!   emulation is slow), median of 3: throughput at least 90% of the
//!   default's is printed, not asserted: it is a speed, and the host's
//!   pace moves hackbench's time by up to 1.6x between rounds of one boot,
//!   more than the bound (measured 0.833 s against the default's 0.723 s,
//!   host busy: 87%; with half a slice of wakeup
//!   granularity, host idle: 0.820 s against 0.796 s, 97%,
//!   and medians of 28 runs in results/2026-11-27-fair-scheduler-measurements, "Half a slice of wakeup
//!   granularity");
//! - cyclictest (no -p: SCHED_OTHER, so it goes through sched_ext; 2 ms
//!   interval, 1500 loops) pinned beside a CPU hog on CPU 5: p99 of its
//!   measuring thread's wake-up latency (wakeup to switch-in, from the
//!   trace) at most 1.5x the default scheduler's, over at least 200
//!   wake-ups in each round. Three rounds per scheduler, in the order
//!   default, nest, nest, default, default, nest (scx_nest attached a
//!   second time for the last); the p99 of each scheduler's best round
//!   is judged, the pooled figures printed. With the host busy the
//!   emulator has slow phases lasting seconds (two hogs and QEMU's one
//!   emulation thread share the host's two CPUs): a round in one gets a
//!   p99 of 1.4-5.5 ms under either scheduler, and one phase can spoil
//!   two rounds of one scheduler and none of the other's. Judged on the median round, that failed one
//!   busy run in three to five (Nest 370, 4366 and 3963 us
//!   against the default's 846, 583 and 1230; Nest 344, 2332 and 2389
//!   against 329, 1663 and 1401), and the default's slow rounds showed
//!   it too (one of six rounds at 4068 us beside Nest's 215-269). A
//!   stall only adds latency, so the best round is closest to what each
//!   scheduler does; a tail of the scheduler's own shows in every round,
//!   its best included. The one found so far did, on a busy host: with
//!   one slice of wake-up credit, a sleeper charged for a host stop no
//!   longer preempted the hog (two rounds each, Nest 6196 and 6300 us
//!   against the default's 5247 and 603 us; docs/design/testing.md). The main
//!   thread (which wakes for other reasons) is left out;
//! - starvation guard: a SCHED_IDLE hog pinned beside 8 nice -20 hogs
//!   never goes more than 10 s without running, sampled every 2 s over
//!   40 s after a 15 s warm-up (by weights alone its waits grow past
//!   sched_ext's 30 s watchdog, which ejects the scheduler; before the
//!   guard it went 18 s without running in this sampling, 25 s and more
//!   in a longer run);
//! - no ejection: enabled from before the first phase to after the last
//!   (enable_seq unchanged), exit 0 on SIGINT, no kernel problem.
//!
//! The default scheduler's figures are printed, not asserted. Ignored by
//! default (boots a guest); scripts/test.sh runs it. Fails, never skips,
//! when a binary, the kernel, QEMU, hackbench or cyclictest is missing.
//! `NEST_VM_OUT=DIR` keeps the traces.

use std::time::Duration;

use nest_trace::timeline::Timeline;
use nest_vm::{VmSpec, shell_quote};
use vm_tests::compare::{Comparison, guest_bin};
use vm_tests::placement::{BatchFigures, work_conservation_problems};
use vm_tests::sched::{
    Latency, Weights, best_round, busiest_wakeups, hackbench_median, hackbench_problems,
    latency_problems, no_ejection_problems, overload_migration_problems,
    overload_migration_regression, own_cpu_problem, tree_of_comm, weight_problems,
};
use vm_tests::trace::{Workload, columns};
use vm_tests::{Report, kernel_problems, repo_root, run_ok};

/// scx_nest's options (see the module documentation).
const SCX_ARGS: &str = "--disable warm-spin";

/// The cyclictest recordings of each scheduler, in the order default,
/// nest, nest, default, default, nest (sched.sh): pooled, they bracket
/// each other in time.
const CYCLIC_ROUNDS: [&str; 3] = ["cyclic", "cyclic2", "cyclic3"];

/// Longest a SCHED_IDLE hog beside nice -20 hogs may go without running:
/// the guard runs a task that waited a second; 2 s samples, and a margin
/// for the emulated machine. Before the guard (old binary):
/// 18 s with this phase's sampling (1x8x1 guest), and no run from 30 s to
/// 55 s in a 1x2x1 guest; with the guard 0 s.
const STARVE_MAX_WAIT_S: u64 = 10;

fn hogs(cmp: &Comparison, name: &str, problems: &mut Vec<String>) -> BatchFigures {
    let trace = cmp.trace(&format!("{name}-hogs"));
    if trace.meta_get("exit_status") != Some("exit status: 0") {
        problems.push(format!(
            "{name}: the hogs exited with {:?}",
            trace.meta_get("exit_status")
        ));
    }
    let tl = Timeline::build(&trace);
    let w = Workload::find(&trace).expect("the hogs trace names its command");
    BatchFigures::of(&trace, &tl, &w)
}

/// The wake-up latencies of cyclictest's measuring thread in each round of
/// scheduler `name` (see the module documentation), and over all of them.
fn latency(cmp: &Comparison, name: &str, problems: &mut Vec<String>) -> (Vec<Latency>, Latency) {
    let mut rounds = Vec::new();
    let mut pooled = Vec::new();
    for round in CYCLIC_ROUNDS {
        let trace = cmp.trace(&format!("{name}-{round}"));
        if trace.meta_get("exit_status") != Some("exit status: 0") {
            problems.push(format!(
                "{name}-{round}: cyclictest exited with {:?}",
                trace.meta_get("exit_status")
            ));
        }
        let Some(pids) = tree_of_comm(&trace, "cyclictest") else {
            problems.push(format!("{name}-{round}: no cyclictest in the trace"));
            continue;
        };
        let lat = busiest_wakeups(&Timeline::build(&trace), &pids);
        let round_figures = Latency::of_samples(lat.clone());
        eprintln!(
            "{name}-{round}: {} wake-ups, p50 {} us, p99 {} us",
            round_figures.wakeups,
            round_figures.p50_ns / 1000,
            round_figures.p99_ns / 1000
        );
        rounds.push(round_figures);
        pooled.extend(lat);
    }
    (rounds, Latency::of_samples(pooled))
}

#[test]
#[ignore = "boots a QEMU guest; run via scripts/test.sh"]
fn nest_shares_by_weight_conserves_work_and_keeps_throughput_and_latency() {
    let cmp = Comparison::new("nest-vm-sched-");
    let spec = VmSpec {
        numa: true,
        memory_mb: 2048,
        // Hangs only: 3x the longest run seen (366 s, a slow host).
        timeout: Duration::from_secs(1100),
        workdir: Some(repo_root()),
        output_dir: Some(cmp.out.clone()),
        ..VmSpec::with_topology(2, 4, 2)
    };
    let command = format!(
        "NEST_BIN={} tests/vm/sched.sh {} {SCX_ARGS}",
        guest_bin(),
        shell_quote(&cmp.out.to_string_lossy())
    );
    let outcome = run_ok(&spec, "sched.sh", &command);
    let report = Report::parse(&outcome.stdout);
    for line in report
        .output
        .iter()
        .filter(|l| l.contains("T: 0") || l.starts_with("record "))
    {
        eprintln!("  {line}");
    }
    // scx_nest is attached twice: for the phases, and for the last
    // cyclictest round.
    let mut problems = no_ejection_problems(&report, "nest");
    problems.extend(no_ejection_problems(&report, "nest3"));
    problems.extend(kernel_problems(&outcome.console_log));
    problems.extend(
        kernel_problems(&report.dmesg)
            .into_iter()
            .map(|p| format!("dmesg: {p}")),
    );
    let recordings = ["hogs"].into_iter().chain(CYCLIC_ROUNDS);
    for key in recordings.flat_map(|r| ["default", "nest"].map(|n| format!("{n}_{r}_record_exit")))
    {
        if report.get(&key) != Some("0") {
            problems.push(format!("{key} = {:?}", report.get(&key)));
        }
    }
    eprintln!(
        "cgroup controllers: {:?}; cpu.weight {:?} / {:?}",
        report.get("cgroup_controllers"),
        report.get("cgroup_w100_weight"),
        report.get("cgroup_w400_weight")
    );

    let headers = ["default", "nest"];
    // Weights.
    let weights = ["default", "nest"].map(|n| {
        Weights::of(&report, n).unwrap_or_else(|| panic!("{n}: weight facts missing: {report:?}"))
    });
    eprintln!(
        "weights, CPU time over 4 s:\n{}",
        columns(&headers, &weights.map(|w| w.rows()))
    );
    problems.extend(
        weight_problems(&weights[1])
            .into_iter()
            .map(|p| format!("nest: {p}")),
    );
    let default_weights = weight_problems(&weights[0]);
    eprintln!("the default scheduler's weight checks (not asserted): {default_weights:?}");

    // 32 hogs.
    let batches = ["default", "nest"].map(|n| hogs(&cmp, n, &mut problems));
    eprintln!(
        "32 hogs, 5 s:\n{}",
        columns(&headers, &batches.each_ref().map(|b| b.rows()))
    );
    problems.extend(
        overload_migration_problems(&batches[1], &batches[0])
            .into_iter()
            .chain(overload_migration_regression(&batches[1]))
            .map(|p| format!("nest: 32 hogs: {p}")),
    );
    problems.extend(
        work_conservation_problems(&batches[1], &batches[0])
            .into_iter()
            .map(|p| format!("nest: 32 hogs: {p}")),
    );
    match (
        report.get("nest_hogs_sched_cpu_ms").map(str::parse::<u64>),
        report.get("nest_hogs_ms").map(str::parse::<u64>),
    ) {
        (Some(Ok(cpu_ms)), Some(Ok(phase_ms))) => {
            eprintln!("scx_nest's own CPU time during the 32 hogs: {cpu_ms} ms in {phase_ms} ms");
            problems
                .extend(own_cpu_problem(cpu_ms, phase_ms).map(|p| format!("nest: 32 hogs: {p}")));
        }
        other => problems.push(format!(
            "nest: 32 hogs: scx_nest's CPU time missing: {other:?}"
        )),
    }

    // hackbench.
    match (
        hackbench_median(&report, "default"),
        hackbench_median(&report, "nest"),
    ) {
        (Ok(d), Ok(n)) => {
            eprintln!("hackbench median (s): default {d:.3}, nest {n:.3}");
            eprintln!(
                "hackbench check (not asserted yet, see the module documentation): {:?}",
                hackbench_problems(n, d)
            );
        }
        (d, n) => problems.push(format!("hackbench: default {d:?}, nest {n:?}")),
    }

    // Wake-up latency.
    let [(default_rounds, default_pooled), (nest_rounds, nest_pooled)] =
        ["default", "nest"].map(|n| latency(&cmp, n, &mut problems));
    let best = |rounds: &[Latency]| best_round(rounds).unwrap_or_default().rows();
    eprintln!(
        "cyclictest beside a hog, wake-up latency from the trace, best round (judged):\n{}\nall rounds pooled:\n{}",
        columns(&headers, &[best(&default_rounds), best(&nest_rounds)]),
        columns(&headers, &[default_pooled.rows(), nest_pooled.rows()])
    );
    problems.extend(latency_problems(&nest_rounds, &default_rounds));

    // Starvation guard.
    let waited = report.get("nest_starve_longest_wait_s");
    eprintln!(
        "SCHED_IDLE hog beside 8 nice -20 hogs, longest time without running (2 s samples over 40 s): {waited:?} s"
    );
    match waited.and_then(|s| s.parse::<u64>().ok()) {
        Some(s) if s <= STARVE_MAX_WAIT_S => {}
        _ => problems.push(format!(
            "nest: the SCHED_IDLE hog went {waited:?} s without running (limit {STARVE_MAX_WAIT_S} s)"
        )),
    }

    assert!(problems.is_empty(), "problems: {problems:#?}");
}
