//! The three text readers on hand-written fixtures that follow the kernel's
//! TP_printk formats (include/trace/events/sched.h, power.h) and the tools'
//! line layouts. All three describe the same schedule.

use nest_trace::readers::{read_perf_script, read_trace_cmd, read_tracefs};
use nest_trace::{Event, EventKind, PrevState, Trace};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).unwrap()
}

fn ev(ts_us: u64, cpu: u32, kind: EventKind) -> Event {
    Event {
        ts_ns: ts_us * 1000,
        cpu,
        kind,
    }
}

fn name(pid: u32, comm: &str) -> EventKind {
    EventKind::TaskName {
        pid,
        comm: comm.into(),
    }
}

fn switch(prev: u32, prev_state: PrevState, next: u32) -> EventKind {
    EventKind::Switch {
        prev,
        prev_state,
        next,
    }
}

/// The schedule the fixtures describe, times in µs from the first event.
fn expected() -> Vec<Event> {
    use EventKind::*;
    use PrevState::*;
    vec![
        ev(0, 0, name(1200, "sh")),
        ev(
            0,
            0,
            NewTask {
                parent: 1200,
                child: 1201,
                comm: "sh".into(),
            },
        ),
        ev(
            5,
            0,
            Wakeup {
                pid: 1201,
                target_cpu: 1,
                waker: None,
            },
        ),
        ev(8, 1, IdleExit),
        ev(10, 1, switch(0, Runnable, 1201)),
        ev(20, 0, switch(1200, Blocked, 0)),
        ev(21, 0, IdleEnter),
        ev(
            100,
            1,
            Exec {
                pid: 1201,
                comm: "true".into(),
            },
        ),
        ev(120, 1, Frequency { khz: 2_100_000 }),
        ev(150, 0, name(4242, "Web Content")),
        ev(
            150,
            0,
            Wakeup {
                pid: 4242,
                target_cpu: 0,
                waker: None,
            },
        ),
        ev(155, 0, IdleExit),
        ev(160, 0, switch(0, Runnable, 4242)),
        ev(180, 0, name(88, "kworker/1:2")),
        ev(
            180,
            0,
            Migrate {
                pid: 88,
                from: 1,
                to: 0,
            },
        ),
        ev(200, 1, Exit { pid: 1201 }),
        ev(
            210,
            1,
            Wakeup {
                pid: 1200,
                target_cpu: 0,
                waker: None,
            },
        ),
        ev(220, 1, switch(1201, Dead, 0)),
        ev(230, 0, switch(4242, Runnable, 1200)),
        ev(300, 0, switch(1200, Blocked, 4242)),
    ]
}

fn check(trace: &Trace, source: &str) {
    assert_eq!(trace.events, expected(), "{source}");
    assert_eq!(trace.topology.nr_cpus(), 2);
    assert_eq!(trace.meta_get("source"), Some(source));
    assert_eq!(trace.meta_get("time_origin_ns"), Some("5000000100000"));
}

#[test]
fn tracefs_text() {
    let trace = read_tracefs(&fixture("tracefs.txt")).unwrap();
    check(&trace, "tracefs");
    assert_eq!(trace.meta_get("ignored_events"), Some("1"));
    assert_eq!(trace.meta_get("lost_events"), Some("3"));
}

#[test]
fn perf_script_text() {
    check(
        &read_perf_script(&fixture("perf-script.txt")).unwrap(),
        "perf script",
    );
}

#[test]
fn trace_cmd_text_with_plugin_formats() {
    check(
        &read_trace_cmd(&fixture("trace-cmd.txt")).unwrap(),
        "trace-cmd report",
    );
}

#[test]
fn broken_fixture_line_is_named() {
    let text = fixture("perf-script.txt").replace("child_pid=1201", "child_pid=x");
    let err = read_perf_script(&text).unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 1: sched_process_fork: expected a number for child_pid=, found \"x\" in \"comm=sh pid=1200 child_comm=sh child_pid=x\""
    );
}

fn real(name: &str) -> String {
    fixture(&format!("real/{name}"))
}

fn without_wakers(trace: &Trace) -> Vec<Event> {
    let mut events = trace.events.clone();
    for e in &mut events {
        if let EventKind::Wakeup { waker, .. } = &mut e.kind {
            *waker = None;
        }
    }
    events
}

fn count(trace: &Trace, f: impl Fn(&EventKind) -> bool) -> usize {
    trace.events.iter().filter(|e| f(&e.kind)).count()
}

#[test]
fn real_tracefs_and_trace_cmd_captures_of_one_buffer_agree() {
    let a = read_tracefs(&real("tracefs.txt")).unwrap();
    let b = read_trace_cmd(&real("trace-cmd.txt")).unwrap();
    // trace-cmd prints no flags column, so its wakeups name no waker.
    assert_eq!(without_wakers(&a), b.events);
    // In task context, as the flags say: each of the five children wakes
    // migration/1 (to move it at exec) and its parent sh twice (out of
    // vfork, then at its exit); sh's exit wakes bash. The wakeups made in
    // interrupts (memfd:sealed-91, rcu_preempt) name no waker.
    let woken = |pid, waker| {
        count(
            &a,
            |k| matches!(k, EventKind::Wakeup { pid: p, waker: Some(w), .. } if *p == pid && w.pid == waker),
        )
    };
    for child in 27684..=27688 {
        assert_eq!((woken(21, child), woken(27683, child)), (1, 2), "{child}");
    }
    assert_eq!(woken(27680, 27683), 1);
    assert_eq!(
        count(&a, |k| matches!(
            k,
            EventKind::Wakeup { waker: Some(_), .. }
        )),
        16
    );
    assert_eq!(count(&a, |k| matches!(k, EventKind::Switch { .. })), 34);
    // sched_wakeup (18) and sched_wakeup_new (6); sched_waking is ignored
    // when sched_wakeup is present.
    assert_eq!(count(&a, |k| matches!(k, EventKind::Wakeup { .. })), 24);
    assert_eq!(a.meta_get("ignored_events"), Some("18"));
    assert_eq!(
        count(
            &a,
            |k| matches!(k, EventKind::Exec { comm, .. } if comm == "true")
        ),
        5
    );
    assert_eq!(count(&a, |k| matches!(k, EventKind::NewTask { .. })), 6);
    assert_eq!(count(&a, |k| matches!(k, EventKind::Exit { .. })), 6);
    assert_eq!(count(&a, |k| matches!(k, EventKind::Migrate { .. })), 5);
    assert_eq!(
        count(&a, |k| matches!(
            k,
            EventKind::IdleEnter | EventKind::IdleExit
        )),
        12
    );
}

#[test]
fn real_perf_sched_record_uses_sched_waking() {
    let t = read_perf_script(&real("perf-script.txt")).unwrap();
    assert_eq!(count(&t, |k| matches!(k, EventKind::Switch { .. })), 70);
    // 32 sched_waking + 6 sched_wakeup_new.
    assert_eq!(count(&t, |k| matches!(k, EventKind::Wakeup { .. })), 38);
    assert_eq!(count(&t, |k| matches!(k, EventKind::NewTask { .. })), 6);
    assert_eq!(count(&t, |k| matches!(k, EventKind::Migrate { .. })), 5);
    assert_eq!(
        t.meta_get("ignored_events"),
        Some("94"),
        "sched_stat_runtime"
    );
    let tl = nest_trace::timeline::Timeline::build(&t);
    assert!(tl.wakeup_latencies.len() >= 30);
}
