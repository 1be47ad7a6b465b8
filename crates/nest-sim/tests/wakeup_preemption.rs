//! Wakeup preemption in the Linux model (engine/fair.rs): under
//! `linux-5.10` a long sleeper woken on a CPU running a hog runs at once
//! (`check_preempt_wakeup()`); a task that slept briefly waits for the
//! hog's slice to end; `linux-7` has no wakeup preemption.

use nest_sim::policy::baseline::Baseline;
use nest_sim::policy::fork_balance::LinuxVersion;
use nest_sim::workload::rtapp;
use nest_sim::{Governor, Machine, RunResult, SimConfig};
use nest_trace::EventKind;

fn run(json: &str, version: LinuxVersion) -> RunResult {
    let w = rtapp::parse(json, "w.json").unwrap();
    let m = Machine::builtin("test-guest-2s").unwrap();
    let mut cfg = SimConfig::new(m, Governor::Performance, 1);
    cfg.record_trace = true;
    cfg.linux = version;
    let r = nest_sim::run(cfg, &w, &mut Baseline).unwrap();
    assert!(!r.deadlocked);
    r
}

/// For each wakeup of the task named `comm` but its first (its fork), the
/// time until it ran, ns.
fn wakeup_latencies(r: &RunResult, comm: &str) -> Vec<u64> {
    let t = r.trace.as_ref().unwrap();
    let pid = r.tasks.iter().find(|s| s.comm == comm).unwrap().pid;
    let mut woken = None;
    let mut out = Vec::new();
    for e in &t.events {
        match e.kind {
            EventKind::Wakeup { pid: p, .. } if p == pid => woken = Some(e.ts_ns),
            EventKind::Switch { next, .. } if next == pid => {
                if let Some(at) = woken.take() {
                    out.push(e.ts_ns - at);
                }
            }
            _ => {}
        }
    }
    out.remove(0);
    out
}

/// A hog and a task on CPU 2 only; the task sleeps `sleep_us` between
/// runs of 1 ms.
fn hog_and(sleep_us: u64) -> String {
    format!(
        r#"{{ "tasks": {{
            "hog": {{ "instance": 1, "cpus": [2], "run": 400000 }},
            "sleeper": {{ "instance": 1, "cpus": [2], "loop": 8,
                          "sleep": {sleep_us}, "run": 1000 }}
        }} }}"#
    )
}

#[test]
fn a_long_sleeper_preempts_a_hog_at_once_under_5_10() {
    let w = hog_and(30_000);
    let lat = wakeup_latencies(&run(&w, LinuxVersion::Linux510), "sleeper");
    assert_eq!(lat.len(), 8);
    assert!(lat.iter().all(|&l| l == 0), "{lat:?}");
    // Without wakeup preemption it waits for the hog's slice to end (but
    // the last time: the hog is done).
    let lat = wakeup_latencies(&run(&w, LinuxVersion::Linux7), "sleeper");
    assert!(lat[..7].iter().all(|&l| l > 1_000_000), "{lat:?}");
}

#[test]
fn a_brief_sleeper_waits_for_the_hogs_slice() {
    // The sleeper ran 1 ms of every 1.3 ms: not behind the hog by more
    // than the wakeup granularity (4 ms on 16 CPUs).
    let lat = wakeup_latencies(&run(&hog_and(300), LinuxVersion::Linux510), "sleeper");
    assert!(lat.iter().filter(|&&l| l > 0).count() >= 6, "{lat:?}");
}
