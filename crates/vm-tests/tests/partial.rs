//! Partial mode beside fair tasks, and a mixed stress with
//! migration-disabled sections, in one boot of a 2 sockets x 4 cores x 2
//! threads NUMA guest (16 vCPUs) with `preempt=full` (tests/vm/partial.sh;
//! verdicts in `vm_tests::sched`, unit-tested). Asserted:
//!
//! - partial mode (`scx_nest --partial --disable warm-spin`), with fair
//!   CPU hogs pinned on CPUs 0-7 and a `nest run` fork/wait chain of 100
//!   children (SCHED_EXT, checked: policy 7; the hogs: policy 0) recorded
//!   with `nest trace record`: no wake-up of the chain's tasks onto a CPU
//!   that was running another (fair) task while some CPU ran nothing. The
//!   trace does not carry Nest's nests, so "an idle CPU in its nests" is
//!   checked as "an idle CPU anywhere", which is stricter only when Nest
//!   would rather queue behind a fair task than grow its nest. The issue
//!   says "never"; the bound is 1% of the wake-ups, since a fair task may
//!   take a CPU between Nest's claim and the switch, which the trace
//!   cannot tell apart (0-1 of 335-342 wake-ups in 7 runs; a Nest blind to
//!   fair tasks lands beside the hogs on most);
//! - the mixed stress (stress-ng seccomp, whose BPF filters run with
//!   migration disabled, switch, race-sched, affinity and yield, plus
//!   `nest-load affinity`, two periodic SCHED_FIFO threads (cyclictest),
//!   CPUs going offline and online in a loop (every CPU back at the end) and
//!   stress-ng's processes moved between two cgroups of different weight,
//!   each at least once during the stress (their counts, which depend on
//!   the machine's speed, are printed), 60 s, full mode):
//!   sched_ext enabled at every state sample
//!   (about one a second; their number depends on the machine's speed and
//!   is not judged) and at both ends with enable_seq unchanged (no
//!   ejection), every load
//!   exits 0, scx_nest exits 0 on SIGINT, no kernel problem, and, where
//!   the kernel counts it (`/sys/kernel/sched_ext/root/events`), no
//!   migration-disabled task queued without ops.enqueue()
//!   (`SCX_EV_ENQ_SKIP_MIGRATION_DISABLED` 0: scx_nest sets
//!   `SCX_OPS_ENQ_MIGRATION_DISABLED`). The event counters are printed,
//!   and how many tasks scx_nest's starvation guard ran (waited over 1 s).
//!   stress-ng runs under `nest trace record`: no task of the machine
//!   waits, runnable but not running, longer than
//!   `vm_tests::sched::STRESS_LONGEST_WAIT_NS` (10 s: a stall, not the
//!   guard's second, which emulation stretches, see there); the five
//!   longest waits are printed.
//!   On a failure the scheduler's whole log (the kernel's dump of every
//!   CPU's tasks if it was ejected) is printed.
//!
//! Ignored by default (boots a guest); scripts/test.sh runs it. Fails,
//! never skips, when a binary, the kernel, QEMU or stress-ng is missing.
//! `NEST_VM_OUT=DIR` keeps the trace.

use std::time::Duration;

use nest_trace::timeline::Timeline;
use nest_vm::{VmSpec, shell_quote};
use vm_tests::compare::{Comparison, guest_bin};
use vm_tests::sched::{
    BusyPlacements, STRESS_LONGEST_WAIT_NS, describe_wait, event_problems, longest_waits,
    no_ejection_problems, tree_placement, tree_rows, wait_problems,
};
use vm_tests::trace::{Workload, columns};
use vm_tests::{Report, kernel_problems, repo_root, run_ok, stat_total};

const SCX_ARGS: &str = "--disable warm-spin";
/// Length of the stress, in seconds (the suite's criterion: 60 s).
const STRESS_S: usize = 60;

#[test]
#[ignore = "boots a QEMU guest; run via scripts/test.sh"]
fn partial_nest_avoids_fair_busy_cpus_and_survives_migration_disabled_stress() {
    let cmp = Comparison::new("nest-vm-partial-");
    let spec = VmSpec {
        numa: true,
        memory_mb: 2048,
        // Hangs only: 3x the longest run seen (464 s, a slow host).
        timeout: Duration::from_secs(1400),
        workdir: Some(repo_root()),
        output_dir: Some(cmp.out.clone()),
        extra_cmdline: vec!["preempt=full".into()],
        ..VmSpec::with_topology(2, 4, 2)
    };
    let command = format!(
        "NEST_BIN={} STRESS_S={STRESS_S} tests/vm/partial.sh {} {SCX_ARGS}",
        guest_bin(),
        shell_quote(&cmp.out.to_string_lossy())
    );
    let outcome = run_ok(&spec, "partial.sh", &command);
    let report = Report::parse(&outcome.stdout);
    for line in report
        .output
        .iter()
        .filter(|l| !l.starts_with("scx_nest: "))
    {
        eprintln!("  {line}");
    }
    let fact = |key: &str| report.get(key).unwrap_or("nothing").to_string();
    let mut problems = Vec::new();
    let mut expect = |what: &str, ok: bool, got: String| {
        if !ok {
            problems.push(format!("{what} (got {got})"));
        }
    };
    expect(
        "partial mode: switch_all 0",
        fact("partial_switch_all") == "0",
        fact("partial_switch_all"),
    );
    expect(
        "the hogs are fair tasks (policy 0)",
        fact("hog_policy") == "0",
        fact("hog_policy"),
    );
    expect(
        "the chain is SCHED_EXT (policy 7)",
        fact("chain_policy") == "7",
        fact("chain_policy"),
    );
    expect(
        "the chain's recording exits 0",
        fact("partial_record_exit") == "0",
        fact("partial_record_exit"),
    );
    let samples: Vec<&str> = report.all("stress_sample").collect();
    expect(
        "sched_ext enabled at every sample of the stress",
        samples.iter().all(|s| *s == "enabled"),
        format!("{} samples: {}", samples.len(), samples.join(",")),
    );
    for key in [
        "stress_record_exit",
        "stress_affinity_exit",
        "stress_rt_exit",
    ] {
        expect(&format!("{key} 0"), fact(key) == "0", fact(key));
    }
    expect(
        "cyclictest runs SCHED_FIFO",
        fact("stress_rt_policy").contains("SCHED_FIFO"),
        fact("stress_rt_policy"),
    );
    let hotplug: Vec<u64> = fact("stress_hotplug")
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    // How many transitions and moves fit in the 60 s depends on the
    // machine's speed (cgroup moves: 2 in one run on a loaded host, at
    // least 20 in others): that they happened, during the stress, is what
    // is asserted.
    expect(
        "CPUs went offline and online during the stress, without a failed write",
        matches!(hotplug[..], [off, on, 0] if off >= 1 && on >= 1),
        fact("stress_hotplug"),
    );
    expect(
        "every CPU online after the stress",
        fact("stress_cpus_online") == "0-15",
        fact("stress_cpus_online"),
    );
    expect(
        "stress-ng's processes moved between cgroups during the stress",
        fact("stress_cgroup_moves")
            .parse::<u64>()
            .is_ok_and(|n| n >= 1),
        fact("stress_cgroup_moves"),
    );
    eprintln!(
        "during the stress: CPUs offline, online, failed writes: {}; cgroup moves: {}",
        fact("stress_hotplug"),
        fact("stress_cgroup_moves")
    );
    problems.extend(no_ejection_problems(&report, "partial"));
    problems.extend(no_ejection_problems(&report, "stress"));
    problems.extend(kernel_problems(&outcome.console_log));
    problems.extend(event_problems(&fact("stress_events_after")));
    eprintln!("preemption: {}", fact("preempt"));
    eprintln!(
        "sched_ext events before the stress: {}",
        fact("stress_events_before")
    );
    eprintln!(
        "sched_ext events after the stress:  {}",
        fact("stress_events_after")
    );
    eprintln!(
        "tasks run by the starvation guard (waited over 1 s) during the stress: {}",
        stat_total(&report, "starved")
    );

    let trace = cmp.trace("partial");
    let stress = cmp.trace("stress");
    for (name, recorded) in [("partial", &trace), ("stress", &stress)] {
        for key in ["lost_events", "overrun_events"] {
            if recorded.meta_get(key) != Some("0") {
                problems.push(format!(
                    "{name}.nest.jsonl: {key} {:?}",
                    recorded.meta_get(key)
                ));
            }
        }
    }
    if stress.meta_get("exit_status") != Some("exit status: 0") {
        problems.push(format!(
            "stress-ng exits 0 (got {:?})",
            stress.meta_get("exit_status")
        ));
    }
    let stress_tl = Timeline::build(&stress);
    eprintln!(
        "the longest waits (runnable, not running) of the stress, limit {} s:",
        STRESS_LONGEST_WAIT_NS / 1_000_000_000
    );
    for w in longest_waits(&stress_tl, 5) {
        eprintln!("  {}", describe_wait(&stress_tl, &w));
    }
    problems.extend(wait_problems(&stress_tl));
    let tl = Timeline::build(&trace);
    let chain = Workload::find(&trace).expect("the trace names its command");
    let pids = trace.descendants(chain.pid);
    let placed = BusyPlacements::of(&trace, &tl, &pids, chain.start_ns, chain.end_ns);
    let tree = tree_placement(&trace, &tl, chain.pid, chain.start_ns, chain.end_ns);
    eprintln!(
        "partial mode, the chain beside fair hogs on CPUs {}:\n{}wake-ups of the chain: {}, onto a CPU busy with another task while a CPU idled: {} (examples: ts, pid, CPU, task there: {:?})",
        fact("hog_cpus"),
        columns(&["nest --partial"], &[tree_rows(&tree)]),
        placed.wakeups,
        placed.onto_busy,
        placed.examples
    );
    if placed.wakeups < 100 {
        problems.push(format!(
            "only {} wake-ups of the chain in the trace",
            placed.wakeups
        ));
    }
    // A fair task may take a CPU between Nest's claim and the wake-up's
    // switch, which the trace cannot tell from a wrong choice: 0-1 of
    // 335-342 wake-ups in 7 runs (before and after the
    // scheduler's rewrite; the one seen was the recorder, a fair task).
    // Nest ignoring fair tasks puts the chain beside the hogs on most.
    let allowed = placed.wakeups / 100;
    if placed.onto_busy > allowed {
        problems.push(format!(
            "partial mode: {} of {} wake-ups of the chain went onto a CPU busy with a fair task while a CPU was idle (at most {allowed}: 1%)",
            placed.onto_busy, placed.wakeups
        ));
    }
    if !problems.is_empty() {
        // The scheduler's whole log, with the kernel's dump of every CPU's
        // queues and tasks when it was ejected.
        let log = std::fs::read_to_string(cmp.out.join("scx_nest.log")).unwrap_or_default();
        eprintln!("--- scx_nest.log\n{log}");
    }
    assert!(problems.is_empty(), "problems: {problems:#?}");
}
