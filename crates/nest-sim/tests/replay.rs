//! End to end: a real recorded trace (nest-trace's fixture of
//! `sh -c 'for i in 1 2 3 4 5; do /bin/true; done'`) imported, saved and
//! loaded as a trace file, replayed as a workload, parsed by the rt-app
//! parser and simulated.

use nest_sim::policy::baseline::Baseline;
use nest_sim::workload::replay::{ReplayOp, ReplayOptions, replay};
use nest_sim::workload::{Amount, Op, rtapp};
use nest_sim::{Governor, Machine, SimConfig};
use nest_trace::metrics::task_times;
use nest_trace::readers::{TextFormat, read_text};
use nest_trace::table::Cell;
use nest_trace::timeline::Timeline;
use nest_trace::{Event, EventKind, Pid, PrevState, Trace, Waker, format};

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
    // The shell waits for each /bin/true, and before that for its exec
    // (vfork): the child's sched_waking names it as the waker, so the
    // vfork wait becomes a wait for the child's wake, not a sleep.
    assert_eq!((r.waits, r.woken, r.sleeps), (5, 5, 0));
    for child in &r.tasks[1..] {
        let wakes = child.ops.iter().filter(|op| {
            **op == ReplayOp::Wake {
                pid: 27683,
                sync: false,
            }
        });
        assert_eq!(wakes.count(), 1, "{}: {:?}", child.name(), child.ops);
    }
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

/// A recorded pipe pair: `pp` (pid 10, CPU 0) forks its partner (pid 11)
/// onto CPU 8, the other socket of the 2x4x2 guest, and they exchange 2000
/// messages, each side running 20 us then waking the other (with
/// `waker`'s flags) and blocking. `remote`: each wakeup completes on the
/// wakee's CPU after the waker blocked (`sched_wakeup` after the
/// `sched_waking` that named the waker, as in an emulated guest), else in
/// the waker's burst.
fn recorded_pipe_pair(waker: impl Fn(Pid) -> Option<Waker>, remote: bool) -> Trace {
    use EventKind::*;
    use PrevState::*;
    let us = 1000;
    let ev = |ts_ns, cpu, kind| Event { ts_ns, cpu, kind };
    let sw = |prev, prev_state, next| Switch {
        prev,
        prev_state,
        next,
    };
    let mut events = vec![
        ev(
            0,
            0,
            TaskName {
                pid: 10,
                comm: "pp".into(),
            },
        ),
        ev(0, 0, sw(0, Runnable, 10)),
        ev(
            10 * us,
            0,
            NewTask {
                parent: 10,
                child: 11,
                comm: "pp".into(),
            },
        ),
        ev(
            10 * us,
            0,
            Wakeup {
                pid: 11,
                target_cpu: 8,
                waker: None,
            },
        ),
        ev(15 * us, 8, sw(0, Runnable, 11)),
        ev(16 * us, 8, sw(11, Blocked, 0)),
    ];
    let mut t = 20 * us;
    for _ in 0..2000 {
        for (me, my_cpu, other, other_cpu) in [(10, 0, 11, 8), (11, 8, 10, 0)] {
            t += 20 * us;
            let wakeup = Wakeup {
                pid: other,
                target_cpu: other_cpu,
                waker: waker(me),
            };
            if remote {
                events.push(ev(t + us, my_cpu, sw(me, Blocked, 0)));
                events.push(ev(t + 3 * us, other_cpu, wakeup));
            } else {
                events.push(ev(t, my_cpu, wakeup));
                events.push(ev(t + us, my_cpu, sw(me, Blocked, 0)));
            }
            events.push(ev(t + 5 * us, other_cpu, sw(0, Runnable, other)));
            t += 5 * us;
        }
    }
    Trace {
        topology: nest_trace::Topology::flat(16),
        meta: vec![("command_pid".into(), "10".into())],
        events,
    }
}

/// Distinct sockets per 100 ms the replayed pair used in the simulated
/// guest under the linux-7 model.
fn replayed_pair_sockets(trace: &Trace) -> f64 {
    let r = replay(trace, &ReplayOptions::default()).unwrap();
    let w = rtapp::parse(&r.to_json_string(), "pair.json").unwrap();
    let m = Machine::builtin("test-guest-2s").unwrap();
    let mut cfg = SimConfig::new(m, Governor::Performance, 1);
    cfg.record_trace = true;
    let res = nest_sim::run(cfg, &w, &mut Baseline).unwrap();
    assert!(!res.deadlocked);
    assert!(res.tasks.iter().all(|t| t.end_ns.is_some()));
    let trace = res.trace.unwrap();
    nest_trace::metrics::tree_placement(&trace, 1, 10_000_000).mean_sockets
}

#[test]
fn a_replayed_pipe_pair_carries_its_wakers_and_their_sync_flag() {
    // The kernel's sync rule (wake_affine_idle()) pulls a pipe pair forked
    // apart onto one socket; the replay has to say who woke whom, with
    // WF_SYNC, for the model to apply it.
    let sync_waker = |pid| {
        Some(Waker {
            pid,
            sync: Some(true),
        })
    };
    let sync = recorded_pipe_pair(sync_waker, false);
    let r = replay(&sync, &ReplayOptions::default()).unwrap();
    // The last block, cut by the trace's end, sleeps to it.
    assert_eq!((r.woken, r.sleeps), (4000, 1));
    assert!(
        r.to_json_string().contains("\"send"),
        "a sync wake is a send"
    );
    let s = replayed_pair_sockets(&sync);
    assert!(s <= 1.2, "{s}");
    // The same wakes completed on the wakee's CPU after the waker blocked
    // are still the waker's, at the end of its burst.
    let remote = recorded_pipe_pair(sync_waker, true);
    let r = replay(&remote, &ReplayOptions::default()).unwrap();
    assert_eq!((r.woken, r.sleeps), (4000, 1));
    let s = replayed_pair_sockets(&remote);
    assert!(s <= 1.2, "{s}");
    // Without the flag (a futex), or without wakers (sleeps of the
    // recorded length), the idle previous CPUs keep them apart.
    let not_sync = recorded_pipe_pair(
        |pid| {
            Some(Waker {
                pid,
                sync: Some(false),
            })
        },
        false,
    );
    assert!(replayed_pair_sockets(&not_sync) > 1.9);
    let no_wakers = recorded_pipe_pair(|_| None, false);
    assert_eq!(
        replay(&no_wakers, &ReplayOptions::default())
            .unwrap()
            .sleeps,
        4001
    );
    assert!(replayed_pair_sockets(&no_wakers) > 1.9);
}
