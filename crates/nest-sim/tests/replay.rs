//! End to end: a real recorded trace (nest-trace's fixture of
//! `sh -c 'for i in 1 2 3 4 5; do /bin/true; done'`) imported, saved and
//! loaded as a trace file, replayed as a workload, parsed by the rt-app
//! parser and simulated.

use nest_sim::policy::baseline::Baseline;
use nest_sim::workload::replay::{ReplayOptions, replay};
use nest_sim::workload::{Amount, Op, rtapp};
use nest_sim::{Governor, Machine, SimConfig};
use nest_trace::metrics::task_times;
use nest_trace::readers::{TextFormat, read_text};
use nest_trace::table::Cell;
use nest_trace::timeline::Timeline;
use nest_trace::{Trace, format};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../nest-trace/tests/fixtures/real/tracefs.txt"
);

/// Running time of `pids` by nest-trace's own timeline replay.
fn recorded_run_ns(trace: &Trace, pids: &[u32]) -> u64 {
    let table = task_times(&Timeline::build(trace));
    let col = |name: &str| table.columns.iter().position(|c| c == name).unwrap();
    let (pid, run) = (col("pid"), col("run_ns"));
    table
        .rows
        .iter()
        .filter_map(|r| match (&r[pid], &r[run]) {
            (Cell::Int(p), Cell::Int(ns)) if pids.contains(&(*p as u32)) => Some(*ns as u64),
            _ => None,
        })
        .sum()
}

#[test]
fn a_recorded_shell_loop_replays_and_simulates() {
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    let trace = read_text(&text, TextFormat::Tracefs).unwrap();
    let dir = std::env::temp_dir().join(format!("nest-sim-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("real.nest.jsonl");
    format::save(&trace, &path).unwrap();
    let trace = format::load(&path).unwrap();

    let r = replay(&trace, &ReplayOptions::default()).unwrap();
    let names: Vec<String> = r.tasks.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "sh-27683",
            "true-27684",
            "true-27685",
            "true-27686",
            "true-27687",
            "true-27688"
        ]
    );
    // The shell waits for each /bin/true (vfork waits become sleeps).
    assert_eq!((r.waits, r.sleeps), (5, 5));
    let pids: Vec<u32> = r.tasks.iter().map(|t| t.pid).collect();
    let recorded = recorded_run_ns(&trace, &pids);
    let work = r.total_work_ns();
    // No cpufreq in the capture: work is run time at nominal. The capture
    // lacks the idle -> sh switch after each of the shell's wakeups; the
    // timeline counts no run there, the replay counts one from the wakeup
    // (the shell forks and switches out on that CPU), 290 us in all.
    assert!(
        recorded <= work && work as f64 <= recorded as f64 * 1.08,
        "work {work} ns vs recorded run time {recorded} ns"
    );

    let file = dir.join("replay.json");
    std::fs::write(&file, r.to_json_string()).unwrap();
    let w = rtapp::parse(&std::fs::read_to_string(&file).unwrap(), "replay.json").unwrap();
    assert_eq!(w.programs.len(), 6);
    let parsed: u64 = w
        .programs
        .iter()
        .flat_map(|p| &p.ops)
        .map(|op| match op {
            Op::Run(Amount::Fixed(ns)) => *ns,
            _ => 0,
        })
        .sum();
    assert_eq!(parsed, work);

    let m = Machine::builtin("xeon-gold-5218-2s").unwrap();
    let res = nest_sim::run(
        SimConfig::new(m, Governor::Performance, 1),
        &w,
        &mut Baseline,
    )
    .unwrap();
    assert!(!res.deadlocked);
    assert_eq!(res.tasks.len(), 6);
    assert!(res.tasks.iter().all(|t| t.end_ns.is_some()));
    println!(
        "replay: {} tasks, work {:.3} ms (recorded run time {:.3} ms), recorded {:.3} ms, \
         simulated {:.3} ms",
        res.tasks.len(),
        work as f64 / 1e6,
        recorded as f64 / 1e6,
        r.recorded_ns as f64 / 1e6,
        res.completion_ns as f64 / 1e6
    );
    std::fs::remove_dir_all(&dir).ok();
}
