//! CPU affinity (rt-app `cpus`) and late starts (rt-app `delay`) in the
//! engine and its policies, and the replay of a trace's other tasks that
//! uses them.

use std::collections::{BTreeMap, BTreeSet};

use nest_sim::policy::Policy;
use nest_sim::policy::baseline::Baseline;
use nest_sim::policy::fork_balance::LinuxVersion;
use nest_sim::policy::nest::Nest;
use nest_sim::workload::replay::{ReplayOp, ReplayOptions, per_cpu_kthread_cpu, replay};
use nest_sim::workload::{Workload, rtapp};
use nest_sim::{Governor, Machine, RunResult, SimConfig};
use nest_trace::{Cpu, Event, EventKind, Nest as NestKind, Pid, PrevState, Trace, Waker};

const MS: u64 = 1_000_000;

/// 2 sockets x 4 cores x 2 threads: CPUs 0-3 and 8-11 on socket 0.
fn guest() -> Machine {
    Machine::builtin("test-guest-2s").unwrap()
}

fn run_with(w: &Workload, version: LinuxVersion, policy: &mut dyn Policy) -> RunResult {
    let mut cfg = SimConfig::new(guest(), Governor::Performance, 1);
    cfg.record_trace = true;
    cfg.linux = version;
    let r = nest_sim::run(cfg, w, policy).unwrap();
    assert!(!r.deadlocked);
    r
}

/// The policies that must honour affinity: the Linux model of both
/// generations (its own queues and balancing) and Nest (scx_nest's
/// queues), with and without warm spinning.
fn runs(w: &Workload) -> Vec<(String, RunResult)> {
    let m = guest();
    let mut out = Vec::new();
    for v in [LinuxVersion::Linux510, LinuxVersion::Linux7] {
        out.push((format!("{v:?}"), run_with(w, v, &mut Baseline)));
    }
    for params in [
        nest_policy::Params::default(),
        nest_policy::Params::default().in_virtual_machine(),
    ] {
        let mut nest = Nest::new(&m.topology(), params).unwrap();
        let name = nest.name();
        out.push((name, run_with(w, LinuxVersion::Linux7, &mut nest)));
    }
    out
}

/// Pid of every task by name (`comm`) in a simulated trace.
fn pids_by_comm(t: &Trace) -> BTreeMap<String, Vec<Pid>> {
    let mut by = BTreeMap::<String, Vec<Pid>>::new();
    for e in &t.events {
        if let EventKind::NewTask { child, comm, .. } = &e.kind {
            by.entry(comm.clone()).or_default().push(*child);
        }
    }
    by
}

/// The CPUs each task ran on.
fn cpus_run_on(t: &Trace) -> BTreeMap<Pid, BTreeSet<Cpu>> {
    let mut on = BTreeMap::<Pid, BTreeSet<Cpu>>::new();
    for e in &t.events {
        if let EventKind::Switch { next, .. } = e.kind
            && next != 0
        {
            on.entry(next).or_default().insert(e.cpu);
        }
    }
    on
}

/// The CPUs the tasks named `comm` ran on, together.
fn cpus_of(r: &RunResult, comm: &str) -> BTreeSet<Cpu> {
    let t = r.trace.as_ref().unwrap();
    let on = cpus_run_on(t);
    pids_by_comm(t)[comm]
        .iter()
        .flat_map(|p| on.get(p).cloned().unwrap_or_default())
        .collect()
}

/// Hogs that keep every CPU busy beside a sleeper pinned to CPU 3, one
/// allowed CPUs 12 and 13, and a free twin of theirs, whose placement the
/// load moves around.
const CROWD: &str = r#"{ "tasks": {
    "hog": { "instance": 24, "loop": 15, "run": 3000, "sleep": 300 },
    "pinned": { "cpus": [3], "loop": 40, "run": 800, "sleep": 400 },
    "pair": { "cpus": [13, 12], "loop": 40, "run": 800, "sleep": 400 },
    "free": { "loop": 40, "run": 800, "sleep": 400 }
} }"#;

#[test]
fn pinned_tasks_run_only_on_their_cpus_under_every_policy() {
    let w = rtapp::parse(CROWD, "crowd.json").unwrap();
    for (name, r) in runs(&w) {
        assert!(r.tasks.iter().all(|t| t.end_ns.is_some()), "{name}");
        assert_eq!(cpus_of(&r, "pinned"), BTreeSet::from([3]), "{name}");
        let pair = cpus_of(&r, "pair");
        assert!(
            pair.is_subset(&BTreeSet::from([12, 13])),
            "{name}: {pair:?}"
        );
        // The same program without `cpus` moves: the checks above could
        // fail.
        let free = cpus_of(&r, "free");
        assert!(free.len() > 2, "{name}: the free twin ran on {free:?}");
    }
}

#[test]
fn load_balancing_never_moves_a_pinned_task() {
    // Three tasks pinned to CPU 5, all runnable at once, beside idle
    // CPUs: balancing would spread them (the free triple shows it), but
    // may not.
    let w = rtapp::parse(
        r#"{ "tasks": {
            "stuck": { "instance": 3, "cpus": [5], "run": 60000 },
            "loose": { "instance": 3, "run": 60000, "delay": 100000 }
        } }"#,
        "stuck.json",
    )
    .unwrap();
    for v in [LinuxVersion::Linux510, LinuxVersion::Linux7] {
        let r = run_with(&w, v, &mut Baseline);
        assert_eq!(cpus_of(&r, "stuck"), BTreeSet::from([5]), "{v:?}");
        assert!(cpus_of(&r, "loose").len() >= 3, "{v:?}");
    }
}

#[test]
fn forked_children_inherit_their_parents_cpus() {
    let w = rtapp::parse(
        r#"{ "tasks": {
            "parent": { "cpus": [6], "loop": 10, "run": 100, "fork": "child", "wait_children": true },
            "child": { "instance": 0, "run": 500 },
            "own": { "cpus": [2], "loop": 10, "run": 100, "fork": "kid", "wait_children": true },
            "kid": { "instance": 0, "cpus": [9], "run": 500 }
        } }"#,
        "fork.json",
    )
    .unwrap();
    for (name, r) in runs(&w) {
        assert_eq!(cpus_of(&r, "child"), BTreeSet::from([6]), "{name}");
        assert_eq!(cpus_of(&r, "kid"), BTreeSet::from([9]), "{name}");
    }
}

#[test]
fn a_delayed_task_starts_after_its_delay() {
    let w = rtapp::parse(
        r#"{ "tasks": {
            "now": { "run": 1000 },
            "late": { "instance": 2, "delay": 50000, "run": 1000 }
        } }"#,
        "delay.json",
    )
    .unwrap();
    assert_eq!(w.programs[1].delay_ns, 50 * MS);
    let r = run_with(&w, LinuxVersion::Linux7, &mut Baseline);
    let starts: Vec<(String, u64)> = r
        .tasks
        .iter()
        .map(|t| (t.comm.clone(), t.start_ns))
        .collect();
    assert_eq!(
        starts,
        [
            ("now".into(), 0),
            ("late".into(), 50 * MS),
            ("late".into(), 50 * MS)
        ]
    );
    // The run does not end while tasks are still to start, even with
    // every started one gone.
    assert!(r.tasks.iter().all(|t| t.end_ns.is_some_and(|e| e > 0)));
    assert!(r.completion_ns > 50 * MS, "{}", r.completion_ns);
}

#[test]
fn bad_cpus_start_cpus_and_delays_are_refused_with_where_and_why() {
    let err = |text: &str| format!("{:#}", rtapp::parse(text, "w.json").unwrap_err());
    assert_eq!(
        err(r#"{"tasks": {"a": {"cpus": 3, "run": 1}}}"#),
        "w.json: $.tasks.a.cpus: expected a list of CPU numbers, e.g. [0, 2]"
    );
    assert!(err(r#"{"tasks": {"a": {"cpus": [], "run": 1}}}"#).contains("non-empty list"));
    assert!(err(r#"{"tasks": {"a": {"cpus": [1.5], "run": 1}}}"#).contains("CPU numbers"));
    assert!(
        err(r#"{"tasks": {"a": {"cpus": [2, 2], "run": 1}}}"#).contains("CPU 2 is listed twice")
    );
    assert!(
        err(r#"{"tasks": {"a": {"delay": [1, 2], "run": 1}}}"#)
            .contains("$.tasks.a.delay: expected fixed")
    );
    assert!(
        err(r#"{"tasks": {"a": {"fork": "b", "run": 1}, "b": {"instance": 0, "delay": 5, "run": 1}}}"#)
            .contains("$.tasks.b.delay: only for tasks started at time 0")
    );
    // `cpus` belongs to the task, not to a phase.
    assert!(
        err(r#"{"tasks": {"a": {"phases": {"p": {"cpus": [1], "run": 1}}}}}"#)
            .contains("unknown event `cpus`")
    );
    assert_eq!(
        err(r#"{"tasks": {"a": {"start_cpu": [3], "run": 1}}}"#),
        "w.json: $.tasks.a.start_cpu: expected a CPU number, e.g. 3"
    );
    assert!(
        err(r#"{"tasks": {"a": {"fork": "b", "run": 1}, "b": {"instance": 0, "start_cpu": 5, "run": 1}}}"#)
            .contains("$.tasks.b.start_cpu: only for tasks started at time 0")
    );
    assert_eq!(
        err(r#"{"tasks": {"a": {"start_cpu": 3, "cpus": [0, 1], "run": 1}}}"#),
        "w.json: $.tasks.a.start_cpu: CPU 3 is not one of its cpus [0, 1]"
    );
    assert_eq!(
        err(r#"{"tasks": {"a": {"prev_cpu": 3, "cpus": [0, 1], "run": 1}}}"#),
        "w.json: $.tasks.a.prev_cpu: CPU 3 is not one of its cpus [0, 1]"
    );
    assert_eq!(
        err(r#"{"tasks": {"a": {"prev_cpu": 3, "start_cpu": 3, "run": 1}}}"#),
        "w.json: $.tasks.a: `start_cpu` and `prev_cpu` exclude each other"
    );
    // The nests at time 0 (extension `global.nests`).
    let nests = |nests: &str| {
        err(&format!(
            r#"{{"global": {{"nests": {nests}}}, "tasks": {{"a": {{"run": 1}}}}}}"#
        ))
    };
    assert_eq!(
        nests(r#"{"primary": [1, 2], "reserve": [2]}"#),
        "w.json: $.global.nests: CPU 2 is in both the primary nest and the reserve"
    );
    assert_eq!(
        nests(r#"{"primary": [1], "spare": [2]}"#),
        "w.json: $.global.nests.spare: expected only \"primary\", \"reserve\" and \"idle_us\""
    );
    assert_eq!(
        nests(r#"{"primary": 1}"#),
        "w.json: $.global.nests.primary: expected a list of CPU numbers, e.g. [0, 2]"
    );
    assert_eq!(nests("[1]"), "w.json: $.global.nests: expected an object");
    assert_eq!(
        nests(r#"{"primary": [1], "idle_us": {"2": 10}}"#),
        "w.json: $.global.nests.idle_us.2: CPU 2 is in neither nest"
    );
    assert_eq!(
        nests(r#"{"primary": [1], "idle_us": {"one": 10}}"#),
        "w.json: $.global.nests.idle_us.one: expected a CPU number as the key"
    );
    assert!(
        nests(r#"{"primary": [1], "idle_us": {"1": -1}}"#)
            .starts_with("w.json: $.global.nests.idle_us.1: expected")
    );
    // CPUs the machine lacks: refused when the machine is known.
    for (key, value) in [("cpus", "[1, 16]"), ("start_cpu", "16"), ("prev_cpu", "16")] {
        let text = format!(r#"{{"tasks": {{"a": {{"{key}": {value}, "run": 1}}}}}}"#);
        let w = rtapp::parse(&text, "w.json").unwrap();
        let cfg = SimConfig::new(guest(), Governor::Performance, 1);
        let e = nest_sim::run(cfg, &w, &mut Baseline).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("workload `w.json`: task `a`: {key}: CPU 16 is not on the machine (CPUs 0-15)")
        );
    }
}

#[test]
fn per_cpu_kernel_threads_are_told_by_their_names() {
    let cpu = |name| per_cpu_kthread_cpu(name, 16);
    assert_eq!(cpu("kworker/0:0"), Some(0));
    assert_eq!(cpu("kworker/3:1H"), Some(3));
    assert_eq!(cpu("ksoftirqd/3"), Some(3));
    assert_eq!(cpu("migration/2"), Some(2));
    assert_eq!(cpu("cpuhp/15"), Some(15));
    for free in [
        "kworker/u16:1",
        "rcu_preempt",
        "cpuhp/16",
        "kworker/R-rcu_g",
        "irq/24-virtio0",
        "sh",
    ] {
        assert_eq!(cpu(free), None, "{free}");
    }
}

fn ev(ts_ns: u64, cpu: Cpu, kind: EventKind) -> Event {
    Event { ts_ns, cpu, kind }
}

fn sw(prev: Pid, prev_state: PrevState, next: Pid) -> EventKind {
    EventKind::Switch {
        prev,
        prev_state,
        next,
    }
}

fn name(pid: Pid, comm: &str) -> EventKind {
    EventKind::TaskName {
        pid,
        comm: comm.into(),
    }
}

fn wake(pid: Pid, target_cpu: Cpu, waker: Option<Pid>) -> EventKind {
    EventKind::Wakeup {
        pid,
        target_cpu,
        waker: waker.map(|pid| Waker { pid, sync: None }),
    }
}

/// A command (pid 10) running from 1 to 21 ms on CPU 1 beside
/// `kworker/2:1` (pid 50), woken every 2 ms on CPU 2 from 3 ms, and the
/// unbound `kworker/u16:1` (pid 51), woken at 5 ms, then by the command at
/// 10 ms; `rcu_preempt` (pid 52) ran before the command and `late` (pid
/// 53) only after it.
fn trace_with_others() -> Trace {
    use PrevState::{Blocked, Dead};
    let mut events = vec![
        ev(0, 0, name(50, "kworker/2:1")),
        ev(0, 0, name(51, "kworker/u16:1")),
        ev(0, 0, name(52, "rcu_preempt")),
        ev(0, 0, name(53, "late")),
        ev(MS / 2, 4, wake(52, 4, None)),
        ev(MS / 2, 4, sw(0, Blocked, 52)),
        ev(MS * 3 / 4, 4, sw(52, Blocked, 0)),
        ev(MS, 1, name(10, "cmd")),
        ev(MS, 1, sw(0, Blocked, 10)),
        ev(5 * MS, 7, wake(51, 7, None)),
        ev(5 * MS, 7, sw(0, Blocked, 51)),
        ev(6 * MS, 7, sw(51, Blocked, 0)),
        ev(10 * MS, 1, wake(51, 7, Some(10))),
        ev(10 * MS, 7, sw(0, Blocked, 51)),
        ev(11 * MS, 7, sw(51, Dead, 0)),
    ];
    for i in 1..10 {
        let t = MS + i * 2 * MS;
        events.push(ev(t, 2, wake(50, 2, None)));
        events.push(ev(t, 2, sw(0, Blocked, 50)));
        events.push(ev(t + MS / 2, 2, sw(50, Blocked, 0)));
    }
    events.push(ev(21 * MS, 1, sw(10, Dead, 0)));
    events.push(ev(22 * MS, 3, wake(53, 3, None)));
    events.push(ev(22 * MS, 3, sw(0, Blocked, 53)));
    events.push(ev(23 * MS, 3, sw(53, Blocked, 0)));
    events.sort_by_key(|e| e.ts_ns);
    Trace {
        topology: nest_trace::Topology::flat(16),
        meta: vec![("command_pid".into(), "10".into())],
        events,
    }
}

#[test]
fn a_replay_with_others_adds_the_tasks_that_ran_beside_the_command() {
    let trace = trace_with_others();
    let alone = replay(&trace, &ReplayOptions::default()).unwrap();
    assert_eq!(alone.tasks.len(), 1);
    let opts = ReplayOptions {
        others: true,
        ..ReplayOptions::default()
    };
    let r = replay(&trace, &opts).unwrap();
    let tasks: Vec<(String, Option<u64>, Option<Cpu>)> = r
        .tasks
        .iter()
        .map(|t| (t.name(), t.delay_ns, t.cpu))
        .collect();
    // Started at their first wakeup after the command's first event (1
    // ms); the per-CPU kworker pinned; rcu_preempt (before) and `late`
    // (after) left out.
    assert_eq!(
        tasks,
        [
            ("cmd-10".into(), None, None),
            ("kworker/2:1-50".into(), Some(2 * MS), Some(2)),
            ("kworker/u16:1-51".into(), Some(4 * MS), None),
        ]
    );
    assert_eq!((r.others, r.recorded_ns), (2, 20 * MS));
    // The command wakes the unbound kworker, as recorded.
    let json = r.to_json_string();
    assert!(json.contains("\"resume"), "{json}");
    // Simulated: the kworker stays on CPU 2, the command's tree is still
    // pid 1, and the kworker starts at its delay.
    let w = rtapp::parse(&json, "others.json").unwrap();
    for (name, res) in runs(&w) {
        assert_eq!(
            cpus_of(&res, "kworker/2:1-50"),
            BTreeSet::from([2]),
            "{name}"
        );
        let starts: Vec<(u32, &str, u64)> = res
            .tasks
            .iter()
            .map(|t| (t.pid, t.comm.as_str(), t.start_ns))
            .collect();
        assert_eq!(starts[0], (1, "cmd-10", 0), "{name}");
        assert_eq!(starts[1], (2, "kworker/2:1-50", 2 * MS), "{name}");
    }
}

#[test]
fn an_other_task_blocked_when_the_trace_ends_sleeps_to_its_end_instead_of_exiting() {
    let trace = trace_with_others();
    let opts = ReplayOptions {
        others: true,
        ..ReplayOptions::default()
    };
    let r = replay(&trace, &opts).unwrap();
    let ops = |pid| &r.tasks.iter().find(|t| t.pid == pid).unwrap().ops;
    // The per-CPU kworker last blocks at 19.5 ms and the trace ends at 23
    // ms: it had not exited, so it sleeps the 3.5 ms (an exit would have
    // the simulated Nest demote its CPU and hold it for a fork).
    assert_eq!(ops(50).last(), Some(&ReplayOp::Sleep(3 * MS + MS / 2)));
    // The unbound one exited (11 ms): its ops end with its last run.
    assert!(
        matches!(ops(51).last(), Some(ReplayOp::Run(_))),
        "{:?}",
        ops(51)
    );
}

#[test]
fn a_command_woken_by_an_other_task_sleeps_as_recorded_instead_of_waiting_for_it() {
    use PrevState::Blocked;
    let mut trace = trace_with_others();
    // The command blocks at 12 ms, and the per-CPU kworker (running
    // 13-13.5 ms) wakes it at 13.2 ms; it blocks again at 15 ms, and a
    // thread the kworker forked (11.2 ms) wakes it at 16.2 ms.
    trace
        .events
        .retain(|e| !matches!(e.kind, EventKind::Switch { prev: 10, .. }));
    let fork = EventKind::NewTask {
        parent: 50,
        child: 60,
        comm: "kworker/u16:2".into(),
    };
    trace.events.extend([
        ev(11 * MS + MS / 5, 2, fork),
        ev(11 * MS + MS / 5, 2, wake(60, 3, Some(50))),
        ev(11 * MS + MS / 4, 3, sw(0, Blocked, 60)),
        ev(11 * MS + MS / 2, 3, sw(60, Blocked, 0)),
        ev(12 * MS, 1, sw(10, Blocked, 0)),
        ev(13 * MS + MS / 5, 2, wake(10, 1, Some(50))),
        ev(13 * MS + MS * 3 / 10, 1, sw(0, Blocked, 10)),
        ev(15 * MS, 1, sw(10, Blocked, 0)),
        ev(16 * MS, 3, wake(60, 3, None)),
        ev(16 * MS, 3, sw(0, Blocked, 60)),
        ev(16 * MS + MS / 5, 3, wake(10, 1, Some(60))),
        ev(16 * MS + MS * 3 / 10, 1, sw(0, Blocked, 10)),
        ev(16 * MS + MS * 2 / 5, 3, sw(60, Blocked, 0)),
        ev(21 * MS, 1, sw(10, PrevState::Dead, 0)),
    ]);
    trace.events.sort_by_key(|e| e.ts_ns);
    let opts = ReplayOptions {
        others: true,
        ..ReplayOptions::default()
    };
    let r = replay(&trace, &opts).unwrap();
    let ops = |pid| &r.tasks.iter().find(|t| t.pid == pid).unwrap().ops;
    // The kworkers keep the guest's clock, the command the model's: the
    // command sleeps the 1.2 ms it slept each time, and they wake nobody.
    let slept = ops(10)
        .iter()
        .filter(|&op| *op == ReplayOp::Sleep(MS + MS / 5));
    assert_eq!(slept.count(), 2, "{:?}", ops(10));
    assert!(!ops(10).contains(&ReplayOp::WaitWake), "{:?}", ops(10));
    for kworker in [50, 60] {
        let wakes = ops(kworker)
            .iter()
            .filter(|op| matches!(op, ReplayOp::Wake { .. }));
        assert_eq!(wakes.count(), 0, "{:?}", ops(kworker));
    }
    // The command still wakes the unbound kworker (10 ms), which waits
    // for it.
    assert!(ops(10).contains(&ReplayOp::Wake {
        pid: 51,
        sync: false
    }));
    assert!(ops(51).contains(&ReplayOp::WaitWake), "{:?}", ops(51));
}

#[test]
fn replayed_kernel_threads_are_marked_from_the_recorders_list_else_by_name() {
    let mut trace = trace_with_others();
    let opts = ReplayOptions {
        others: true,
        ..ReplayOptions::default()
    };
    let marked = |trace: &Trace| -> Vec<(String, bool)> {
        let r = replay(trace, &opts).unwrap();
        let w = rtapp::parse(&r.to_json_string(), "others.json").unwrap();
        w.programs
            .iter()
            .map(|p| (p.name.clone(), p.kernel_thread))
            .collect()
    };
    let both = |cmd, kworker| {
        vec![
            ("cmd-10".to_string(), cmd),
            ("kworker/2:1-50".to_string(), kworker),
            ("kworker/u16:1-51".to_string(), kworker),
        ]
    };
    assert_eq!(marked(&trace), both(false, true), "by name");
    // The recorder listed pid 50 only (51 exited before it looked, say).
    trace.meta_set(nest_trace::KERNEL_THREADS_META, "2,50");
    let mut listed = both(false, true);
    listed[2].1 = false;
    assert_eq!(marked(&trace), listed, "by the list");
    trace.meta_set(nest_trace::KERNEL_THREADS_META, "2,fifty");
    let e = replay(&trace, &opts).unwrap_err().to_string();
    assert!(e.contains("`fifty` is not a pid"), "{e}");
}

#[test]
fn pinned_cpus_are_numbered_as_the_target_machine_numbers_their_places() {
    // The guest numbers SMT siblings next to each other (CPU 2: socket 0,
    // second core, first thread); the model numbers them a socket apart
    // (that place is its CPU 1).
    let mut trace = trace_with_others();
    trace.topology = nest_trace::Topology::siblings_adjacent(2, 4, 2);
    let opts = |target| ReplayOptions {
        others: true,
        target,
        ..ReplayOptions::default()
    };
    let pinned = |r: &nest_sim::workload::replay::Replay| r.tasks.iter().find_map(|t| t.cpu);
    let r = replay(&trace, &opts(None)).unwrap();
    assert_eq!(pinned(&r), Some(2), "the trace's own numbers");
    let r = replay(&trace, &opts(Some(guest().topology()))).unwrap();
    assert_eq!(pinned(&r), Some(1), "the model's number of that place");
    // One core of two threads: the command's CPU 1 has its place there, CPU 2 not.
    let e = replay(&trace, &opts(Some(nest_trace::Topology::regular(1, 1, 2)))).unwrap_err();
    assert_eq!(
        e.to_string(),
        "`kworker/2:1` is bound to CPU 2, which has no CPU at its place on the target machine"
    );
}

#[test]
fn the_replayed_command_starts_on_the_cpu_it_first_ran_on() {
    // The command first runs on the guest's CPU 13 (socket 1, core 6,
    // second thread): the model's CPU 14.
    let mut trace = trace_with_others();
    trace.topology = nest_trace::Topology::siblings_adjacent(2, 4, 2);
    for e in &mut trace.events {
        if e.cpu == 1 {
            e.cpu = 13;
        }
    }
    let opts = ReplayOptions {
        target: Some(guest().topology()),
        ..ReplayOptions::default()
    };
    let r = replay(&trace, &opts).unwrap();
    assert_eq!(r.tasks[0].start_cpu, Some(14));
    let json = r.to_json_string();
    assert!(json.contains("\"start_cpu\": 14"), "{json}");
    let w = rtapp::parse(&json, "cmd.json").unwrap();
    for (name, res) in runs(&w) {
        assert_eq!(cpus_of(&res, "cmd-10"), BTreeSet::from([14]), "{name}");
    }
}

#[test]
fn other_tasks_start_woken_from_their_previous_cpu_not_forked_from_cpu_0() {
    // A chain's first fork in the guest (2x4x2, siblings adjacent), all on
    // socket 1: the command runs on CPU 12 from 1 ms and forks a child at
    // 20 ms, which runs on CPU 14; meanwhile `rcu_preempt` (unbound), last
    // on CPU 12, is woken onto CPU 10 at 3 ms, the recorder on CPU 8 at 5
    // ms, the per-CPU `kworker/0:1` on CPU 0 at 7 ms. Forked from the
    // simulator's CPU 0 instead, Nest's fallback placed rcu_preempt on CPU
    // 0 (joining the reserve), the recorder took it from there into the
    // primary nest, and the child forked onto it, on the other socket (in one
    // replay of a guest's scx_nest chain, half its forks crossed).
    use PrevState::{Blocked, Dead};
    let fork = |parent, child, comm: &str| EventKind::NewTask {
        parent,
        child,
        comm: comm.into(),
    };
    let mut events = vec![
        ev(0, 12, name(15, "rcu_preempt")),
        ev(0, 8, name(1565, "nest")),
        ev(0, 0, name(11, "kworker/0:1")),
        ev(MS / 2, 12, wake(15, 12, None)),
        ev(MS / 2, 12, sw(0, Blocked, 15)),
        ev(MS * 3 / 4, 12, sw(15, Blocked, 0)),
        ev(MS, 12, name(10, "cmd")),
        ev(MS, 12, sw(0, Blocked, 10)),
        ev(
            3 * MS,
            12,
            EventKind::Migrate {
                pid: 15,
                from: 12,
                to: 10,
            },
        ),
        ev(3 * MS, 12, wake(15, 10, None)),
        ev(3 * MS, 10, sw(0, Blocked, 15)),
        ev(3 * MS + MS / 4, 10, sw(15, Blocked, 0)),
        ev(5 * MS, 12, wake(1565, 8, None)),
        ev(5 * MS, 8, sw(0, Blocked, 1565)),
        ev(6 * MS, 8, sw(1565, Blocked, 0)),
        ev(7 * MS, 0, wake(11, 0, None)),
        ev(7 * MS, 0, sw(0, Blocked, 11)),
        ev(7 * MS + MS / 4, 0, sw(11, Blocked, 0)),
        ev(20 * MS, 12, fork(10, 20, "child")),
        ev(20 * MS, 12, wake(20, 14, None)),
        ev(20 * MS, 12, sw(10, Blocked, 0)),
        ev(20 * MS, 14, sw(0, Blocked, 20)),
        ev(30 * MS, 14, EventKind::Exit { pid: 20 }),
        ev(30 * MS, 14, wake(10, 12, Some(20))),
        ev(30 * MS, 14, sw(20, Dead, 0)),
        ev(30 * MS, 12, sw(0, Blocked, 10)),
        ev(31 * MS, 12, EventKind::Exit { pid: 10 }),
        ev(31 * MS, 12, sw(10, Dead, 0)),
    ];
    events.sort_by_key(|e| e.ts_ns);
    let trace = Trace {
        topology: nest_trace::Topology::siblings_adjacent(2, 4, 2),
        meta: vec![("command_pid".into(), "10".into())],
        events,
    };
    let opts = ReplayOptions {
        others: true,
        target: Some(guest().topology()),
        ..ReplayOptions::default()
    };
    let r = replay(&trace, &opts).unwrap();
    let starts: Vec<(String, Option<Cpu>, Option<Cpu>)> = r
        .tasks
        .iter()
        .map(|t| (t.name(), t.start_cpu, t.prev_cpu))
        .collect();
    // The guest's CPUs 12, 8 and 0 are the model's 6, 4 and 0.
    assert_eq!(
        starts,
        [
            ("cmd-10".into(), Some(6), None),
            ("child-20".into(), None, None),
            ("rcu_preempt-15".into(), None, Some(6)),
            ("nest-1565".into(), None, Some(4)),
            ("kworker/0:1-11".into(), None, Some(0)),
        ]
    );
    let w = rtapp::parse(&r.to_json_string(), "others.json").unwrap();
    for (name, res) in runs(&w) {
        if !name.starts_with("nest") {
            continue;
        }
        let socket1 = (4..8).chain(12..16).collect::<BTreeSet<Cpu>>();
        for comm in ["child-20", "rcu_preempt-15", "nest-1565"] {
            let on = cpus_of(&res, comm);
            assert!(on.is_subset(&socket1), "{name}: {comm} ran on {on:?}");
        }
    }
}

#[test]
fn a_task_leaves_its_start_cpu_when_its_own_cpus_allow() {
    // `a` starts on CPU 5; a task bound to CPU 5 takes it while `a`
    // sleeps, so `a` wakes elsewhere: it was placed on CPU 5, not bound.
    let w = rtapp::parse(
        r#"{ "tasks": {
            "a": { "start_cpu": 5, "run": 1000, "sleep": 2000, "run1": 1000 },
            "hog": { "cpus": [5], "delay": 1500, "run": 10000 }
        } }"#,
        "start.json",
    )
    .unwrap();
    for (name, res) in runs(&w) {
        let cpus = cpus_of(&res, "a");
        assert!(cpus.contains(&5) && cpus.len() > 1, "{name}: {cpus:?}");
    }
}

#[test]
fn a_replay_starts_from_the_nests_the_recording_had_when_the_command_started() {
    // A recording of `scx_nest --trace-nests` in the guest (2x4x2,
    // siblings adjacent): CPU 12 joined the primary nest at 1 ms, CPU 2
    // the reserve at 2 ms, CPU 4 the primary at 3 ms and left it at 4 ms;
    // the command starts at 5 ms; CPU 8 joins after it started.
    let nest = |nest| EventKind::NestChange { nest };
    let events = vec![
        ev(MS, 12, nest(NestKind::Primary)),
        ev(2 * MS, 2, nest(NestKind::Reserve)),
        ev(3 * MS, 4, nest(NestKind::Primary)),
        ev(4 * MS, 4, nest(NestKind::None)),
        ev(5 * MS, 12, name(10, "cmd")),
        ev(5 * MS, 12, sw(0, PrevState::Blocked, 10)),
        ev(6 * MS, 8, nest(NestKind::Primary)),
        ev(7 * MS, 12, EventKind::Exit { pid: 10 }),
        ev(7 * MS, 12, sw(10, PrevState::Dead, 0)),
    ];
    let mut trace = Trace {
        topology: nest_trace::Topology::siblings_adjacent(2, 4, 2),
        meta: vec![("command_pid".into(), "10".into())],
        events,
    };
    let opts = ReplayOptions {
        target: Some(guest().topology()),
        ..ReplayOptions::default()
    };
    let nests = |trace: &Trace| {
        let r = replay(trace, &opts).unwrap();
        let w = rtapp::parse(&r.to_json_string(), "nests.json").unwrap();
        assert_eq!(w.initial_nests, r.nests);
        w.initial_nests.map(|n| {
            (
                n.primary,
                n.reserve,
                n.idle_ns.into_iter().collect::<Vec<_>>(),
            )
        })
    };
    // The guest's CPUs 12 and 2 are the model's 6 and 1. CPU 12 runs the
    // command; CPU 2 ran nothing since the trace started, 5 ms before.
    assert_eq!(nests(&trace), Some((vec![6], vec![1], vec![(1, 5 * MS)])));
    // Known in full only from 6 ms on: the nests as they were then.
    trace
        .meta
        .push(("nests_complete_from_ns".into(), (6 * MS).to_string()));
    assert_eq!(
        nests(&trace),
        Some((vec![4, 6], vec![1], vec![(1, 5 * MS), (4, 5 * MS)]))
    );
    // No nest reports (the default scheduler's recordings): no nests.
    trace
        .events
        .retain(|e| !matches!(e.kind, EventKind::NestChange { .. }));
    assert_eq!(nests(&trace), None);
}
