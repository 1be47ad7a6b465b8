//! Shared test schedules.
#![allow(dead_code)]

use nest_trace::{Event, EventKind, PrevState, Topology, Trace};

/// The hand-built schedule described in tests/metrics.rs.
pub fn scenario() -> Trace {
    use EventKind::*;
    use PrevState::*;
    let ev = |ts_ns, cpu, kind| Event { ts_ns, cpu, kind };
    let sw = |prev, prev_state, next| Switch {
        prev,
        prev_state,
        next,
    };
    Trace {
        topology: Topology::regular(2, 1, 1),
        meta: vec![],
        events: vec![
            ev(0, 0, sw(0, Runnable, 1)),
            ev(0, 1, sw(9, Blocked, 0)),
            ev(0, 0, Frequency { khz: 2_000_000 }),
            ev(
                10,
                0,
                Wakeup {
                    pid: 2,
                    target_cpu: 0,
                    waker: None,
                },
            ),
            ev(30, 0, sw(1, Runnable, 2)),
            ev(
                40,
                0,
                Migrate {
                    pid: 1,
                    from: 0,
                    to: 1,
                },
            ),
            ev(45, 1, sw(0, Runnable, 1)),
            ev(45, 0, sw(2, Blocked, 0)),
            ev(60, 0, Frequency { khz: 3_000_000 }),
            ev(
                70,
                1,
                Wakeup {
                    pid: 2,
                    target_cpu: 0,
                    waker: None,
                },
            ),
            ev(72, 0, sw(0, Runnable, 2)),
            ev(80, 1, Exit { pid: 1 }),
            ev(80, 1, sw(1, Dead, 0)),
            ev(90, 0, sw(2, Blocked, 0)),
        ],
    }
}

/// A long, valid, deterministic schedule on `cpus` CPUs (two sockets) with
/// `tasks` tasks: wakeups, switches (blocking and preemption), migrations of
/// waiting tasks, exits and frequency changes. About `steps * 2.5` events.
pub fn synthetic(cpus: u32, tasks: u32, steps: usize) -> Trace {
    use EventKind::*;
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n.max(1)
    };
    let mut events = Vec::new();
    let mut current = vec![0u32; cpus as usize];
    let mut sleeping: Vec<u32> = (1..=tasks).collect();
    let mut ts = 0u64;
    let ev = |ts_ns, cpu, kind| Event { ts_ns, cpu, kind };
    for pid in 1..=tasks {
        events.push(ev(
            0,
            0,
            TaskName {
                pid,
                comm: format!("worker-{pid}"),
            },
        ));
    }
    for step in 0..steps {
        ts += 1 + rand(40_000);
        let cpu = rand(u64::from(cpus)) as u32;
        if step % 50 == 0 {
            let khz = 1_000_000 + 100_000 * rand(25) as u32;
            events.push(ev(ts, cpu, Frequency { khz }));
        }
        let c = cpu as usize;
        let prev = current[c];
        let next = if sleeping.is_empty() || rand(4) == 0 {
            0
        } else {
            let i = rand(sleeping.len() as u64) as usize;
            let pid = sleeping.swap_remove(i);
            let target = if rand(3) == 0 { (cpu + 1) % cpus } else { cpu };
            events.push(ev(
                ts,
                cpu,
                Wakeup {
                    pid,
                    target_cpu: target,
                    waker: None,
                },
            ));
            if target != cpu {
                events.push(ev(
                    ts + 1,
                    target,
                    Migrate {
                        pid,
                        from: target,
                        to: cpu,
                    },
                ));
            }
            ts += 2 + rand(2_000);
            pid
        };
        if prev == 0 && next == 0 {
            continue;
        }
        let prev_state = if prev != 0 && rand(3) == 0 {
            PrevState::Runnable
        } else {
            PrevState::Blocked
        };
        events.push(ev(
            ts,
            cpu,
            Switch {
                prev,
                prev_state,
                next,
            },
        ));
        if prev != 0 {
            sleeping.push(prev);
        }
        current[c] = next;
    }
    Trace {
        topology: Topology::regular(2, cpus / 2, 1),
        meta: vec![("workload".into(), "synthetic".into())],
        events,
    }
}

/// `trace` printed the way tracefs prints it (µs timestamps, so event times
/// must be whole µs to round-trip; this helper is for speed tests).
pub fn to_tracefs_text(trace: &Trace) -> String {
    use std::fmt::Write;
    let mut s = String::from("# tracer: nop\n#\n");
    let comm = |pid: u32| {
        if pid == 0 {
            "swapper".to_string()
        } else {
            format!("worker-{pid}")
        }
    };
    for e in &trace.events {
        let ts = 1000.0 + e.ts_ns as f64 / 1e9;
        let body = match &e.kind {
            EventKind::Switch {
                prev,
                prev_state,
                next,
            } => {
                let st = match prev_state {
                    PrevState::Runnable => "R+",
                    PrevState::Blocked => "S",
                    PrevState::Dead => "X",
                };
                format!(
                    "sched_switch: prev_comm={} prev_pid={prev} prev_prio=120 prev_state={st} ==> next_comm={} next_pid={next} next_prio=120",
                    comm(*prev),
                    comm(*next)
                )
            }
            EventKind::Wakeup {
                pid, target_cpu, ..
            } => format!(
                "sched_wakeup: comm={} pid={pid} prio=120 target_cpu={target_cpu:03}",
                comm(*pid)
            ),
            EventKind::Migrate { pid, from, to } => format!(
                "sched_migrate_task: comm={} pid={pid} prio=120 orig_cpu={from} dest_cpu={to}",
                comm(*pid)
            ),
            EventKind::Frequency { khz } => format!("cpu_frequency: state={khz} cpu_id={}", e.cpu),
            _ => continue,
        };
        let _ = writeln!(
            s,
            "           task-1     [{:03}] d..2. {ts:.6}: {body}",
            e.cpu
        );
    }
    s
}
