//! The simulator's Nest host: the scheduler around the placement, run as
//! `scx_nest` runs it (LLC queues in virtual-time order, slices, wakeup
//! preemption, kicks), with every decision taken by the shared C policy.

use nest_sim::policy::Policy;
use nest_sim::policy::baseline::Baseline;
use nest_sim::policy::nest::Nest;
use nest_sim::workload::{Workload, rtapp};
use nest_sim::{Governor, Machine, RunResult, SimConfig};
use nest_trace::{EventKind, PrevState};

const MS: u64 = 1_000_000;

/// The 2 sockets x 4 cores x 2 threads guest: 16 CPUs, one LLC per socket.
fn guest() -> Machine {
    Machine::builtin("test-guest-2s").unwrap()
}

fn nest(m: &Machine, params: nest_policy::Params) -> Nest {
    Nest::new(&m.topology(), params).unwrap()
}

fn run(m: &Machine, w: &Workload, p: &mut dyn Policy) -> RunResult {
    let mut cfg = SimConfig::new(m.clone(), Governor::Performance, 1);
    cfg.record_trace = true;
    nest_sim::run(cfg, w, p).unwrap()
}

/// `n` CPU-bound tasks of `run_us` each, started together.
fn hogs(n: u32, run_us: u64) -> Workload {
    let text =
        format!(r#"{{"tasks": {{"hog": {{"instance": {n}, "loop": 1, "run": {run_us}}}}}}}"#);
    rtapp::parse(&text, "inline").unwrap()
}

/// When each task named `comm` ended, ns.
fn end_times(r: &RunResult, comm: &str) -> Vec<u64> {
    r.tasks
        .iter()
        .filter(|t| t.comm == comm)
        .map(|t| t.end_ns.expect("every task ends"))
        .collect()
}

/// How long each wakeup of the task named `comm` waited to run, from the
/// trace: wakeup to switch-in.
fn wakeup_waits(r: &RunResult, comm: &str) -> Vec<u64> {
    let pid = r.tasks.iter().find(|t| t.comm == comm).unwrap().pid;
    let mut woken_at = None;
    let mut waits = Vec::new();
    for e in &r.trace.as_ref().unwrap().events {
        match e.kind {
            EventKind::Wakeup { pid: p, .. } if p == pid => woken_at = Some(e.ts_ns),
            EventKind::Switch { next, .. } if next == pid => {
                if let Some(at) = woken_at.take() {
                    waits.push(e.ts_ns - at);
                }
            }
            _ => {}
        }
    }
    waits
}

#[test]
fn overloaded_cpus_share_time_fairly_and_none_idles_while_tasks_wait() {
    let m = guest();
    // Three 60 ms hogs per CPU. Run to completion one after the other,
    // they would end in three waves (60, 120, 180 ms); in virtual-time
    // order with slices they all end in the last few slices.
    let w = hogs(48, 60_000);
    let r = run(&m, &w, &mut nest(&m, Default::default()));
    let mut ends = end_times(&r, "hog");
    assert_eq!(ends.len(), 48);
    ends.sort_unstable();
    let (first, median, last) = (ends[0], ends[24], ends[47]);
    // Not exactly equal: a hog alone on its core runs faster than one
    // beside a busy SMT sibling, and a CPU keeps its task up to eight
    // slices ahead of its LLC's queue (nest_prev_keeps_cpu()).
    assert!(
        first > last / 2 && median as f64 > 0.9 * last as f64,
        "hogs ended at {:?} ms: not a fair share",
        ends.iter().map(|e| e / MS).collect::<Vec<_>>()
    );
    // Work conservation: every interval but the last ones (tasks ending)
    // runs all 16 CPUs.
    let full = r.intervals.iter().take_while(|i| i.cpus == 16).count();
    let busy_until = first / (4 * MS);
    assert!(
        full as u64 + 1 >= busy_until,
        "only the first {full} of {busy_until} intervals before any hog ended used every CPU: {:?}",
        r.intervals.iter().map(|i| i.cpus).collect::<Vec<_>>()
    );
}

#[test]
fn a_woken_task_preempts_hogs_that_have_run_longer() {
    let m = guest();
    // 32 hogs on 16 CPUs, and a task that runs 100 us every 5 ms: when it
    // wakes, its virtual time is earlier than the running hog's by more
    // than half a slice, so it runs at once instead of waiting for a slice
    // to end (up to a tick, 4 ms).
    let text = r#"{"tasks": {
        "hog": {"instance": 32, "loop": 1, "run": 400000},
        "sleeper": {"instance": 1, "loop": 60, "run": 100, "sleep": 5000}
    }}"#;
    let w = rtapp::parse(text, "inline").unwrap();
    let r = run(&m, &w, &mut nest(&m, Default::default()));
    let waits = wakeup_waits(&r, "sleeper");
    assert_eq!(waits.len(), 61, "its fork and 60 wakeups");
    // The fork waits its turn: a new task gets no credit. Its lead over
    // the hogs then grows by about 2.4 ms of virtual time per wakeup (a
    // hog's half CPU over 5 ms, less its 100 us), past half a slice (2 ms)
    // from the first wakeups on: those may still wait for a slice to end,
    // at most a tick; the others run at once.
    let waits_us: Vec<u64> = waits.iter().map(|w| w / 1000).collect();
    assert!(
        waits[1..].iter().all(|&w| w <= 4 * MS),
        "a wakeup waited longer than a tick: {waits_us:?} us"
    );
    let settled = &waits[4..];
    let mean_wait_us = settled.iter().sum::<u64>() as f64 / settled.len() as f64 / 1000.0;
    assert!(
        mean_wait_us < 100.0,
        "the sleeper waited {mean_wait_us:.0} us per wakeup after its third: {waits_us:?} us"
    );
    let hogs_waited = r
        .tasks
        .iter()
        .filter(|t| t.comm == "hog")
        .all(|t| t.wait_ns > 0);
    assert!(hogs_waited, "the hogs should have queued");
}

#[test]
fn a_parent_woken_by_its_exiting_child_resumes_on_its_own_idle_cpu() {
    // A fork/wait chain: the parent forks a 20 ms child, waits for it and
    // runs 10 ms, ten times. The exiting child wakes the parent while it
    // still runs on its CPU (exit_notify(), before its last schedule()):
    // that CPU is not in sched_ext's idle mask, so the placement cannot
    // claim it and the parent goes back to the CPU it slept on (from the
    // reserve, where its wait of over P_remove left it), idle all along.
    // When the engine's exiting CPU, already without its task, counted as
    // idle, the placement claimed it, the parent was queued behind the
    // exit instead and a kicked idle CPU of the LLC took it: 9 of its 10
    // wakeups moved the parent.
    let m = guest();
    let text = r#"{"tasks": {
        "parent": {"start_cpu": 2, "loop": 10, "fork": "child", "wait_children": true, "run": 10000},
        "child": {"instance": 0, "run": 20000}
    }}"#;
    let w = rtapp::parse(text, "inline").unwrap();
    for params in [
        nest_policy::Params::default(),
        nest_policy::Params::default().in_virtual_machine(),
    ] {
        let r = run(&m, &w, &mut nest(&m, params));
        let parent = r.tasks.iter().find(|t| t.comm == "parent").unwrap();
        assert_eq!(parent.migrations, 0, "the parent moved");
        // Each wakeup ran where it was placed.
        let mut placed = None;
        for e in &r.trace.as_ref().unwrap().events {
            match e.kind {
                EventKind::Wakeup {
                    pid, target_cpu, ..
                } if pid == parent.pid => {
                    placed = Some(target_cpu);
                }
                EventKind::Switch { next, .. } if next == parent.pid => {
                    if let Some(cpu) = placed.take() {
                        assert_eq!(
                            cpu, e.cpu,
                            "placed on {cpu}, ran on {} at {} ns",
                            e.cpu, e.ts_ns
                        );
                    }
                }
                _ => {}
            }
        }
    }
}

#[test]
fn a_kernel_thread_leaves_the_exit_cpu_to_the_next_fork() {
    // A parent forks a 1 ms child, waits for it, runs 0.5 ms and forks
    // again. Between the first child's exit and the second fork, a task
    // last run on CPU 15 (the other socket) wakes, runs 0.1 ms and sleeps.
    // A user task finds the exited child's CPU in the reserve and takes
    // it; a kernel thread leaves it to the next fork (fork reuse) and goes
    // to the default placement: its own idle CPU. scx_nest tells kernel
    // threads by `PF_KTHREAD`, the simulator by the workload's
    // `kernel_thread`.
    let m = guest();
    let workload = |kernel_thread: bool| {
        let text = format!(
            r#"{{"tasks": {{
            "parent": {{"start_cpu": 0, "fork0": "child", "wait_children1": true,
                        "runtime2": 500, "fork3": "child", "wait_children4": true}},
            "child": {{"instance": 0, "runtime": 1000}},
            "waker": {{"prev_cpu": 15, "delay": 1150, "kernel_thread": {kernel_thread},
                      "runtime0": 100, "sleep1": 50000}}
        }}}}"#
        );
        rtapp::parse(&text, "inline").unwrap()
    };
    // The CPUs the tasks named `comm` were switched in on, in order.
    let ran_on = |r: &RunResult, comm: &str| -> Vec<u32> {
        let pids: Vec<u32> = r
            .tasks
            .iter()
            .filter(|t| t.comm == comm)
            .map(|t| t.pid)
            .collect();
        let events = &r.trace.as_ref().unwrap().events;
        events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Switch { next, .. } if pids.contains(&next) => Some(e.cpu),
                _ => None,
            })
            .collect()
    };
    let r = run(&m, &workload(false), &mut nest(&m, Default::default()));
    let exit_cpu = ran_on(&r, "child")[0];
    // (Its wakeup after the sleep, to exit, does not matter here.)
    assert_eq!(
        ran_on(&r, "waker")[0],
        exit_cpu,
        "the user task takes the exit CPU"
    );

    let mut policy = nest(&m, Default::default());
    let r = run(&m, &workload(true), &mut policy);
    assert_eq!(
        ran_on(&r, "waker")[0],
        15,
        "the kernel thread stays on its CPU"
    );
    assert_eq!(ran_on(&r, "child"), [exit_cpu, exit_cpu]);
    assert_eq!(policy.stat(nest_policy::Stat::ForkReuse), 1);
}

#[test]
fn slices_are_the_c_policys_shorter_as_more_tasks_wait() {
    let m = guest();
    // 32 hogs on 16 CPUs, for long enough that slices decide the switches:
    // nest_slice() gives slice x CPUs / (CPUs + waiting), at least
    // slice_min_ns; doubling the configured slice must cut the switches,
    // which it could not if the host used a slice of its own.
    let w = hogs(32, 200_000);
    let switches = |slice_ns: u64| {
        let params = nest_policy::Params {
            slice_ns,
            ..Default::default()
        };
        let r = run(&m, &w, &mut nest(&m, params));
        let trace = r.trace.unwrap();
        trace
            .events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Switch { prev, next, .. } if prev != 0 && next != 0))
            .count()
    };
    let (short, long) = (switches(8 * MS), switches(20 * MS));
    assert!(
        (long as f64) < 0.7 * short as f64,
        "{short} switches with 8 ms slices, {long} with 20 ms"
    );
}

#[test]
fn the_linux_model_keeps_its_per_cpu_queues_and_balancing() {
    // The hooks of policies that own their queues leave the others alone:
    // under the Linux model overloaded tasks wait on CPUs and migrate by
    // load balancing, as before.
    let m = guest();
    let r = run(&m, &hogs(48, 20_000), &mut Baseline);
    assert_eq!(end_times(&r, "hog").len(), 48);
    assert!(r.total_wait_ns() > 0);
}

/// The CPU the task named `comm` first ran on.
fn first_cpu(r: &RunResult, comm: &str) -> u32 {
    let pid = r.tasks.iter().find(|t| t.comm == comm).unwrap().pid;
    let trace = r.trace.as_ref().unwrap();
    trace
        .events
        .iter()
        .find(|e| matches!(e.kind, EventKind::Switch { next, .. } if next == pid))
        .map(|e| e.cpu)
        .unwrap()
}

#[test]
fn a_workload_started_from_recorded_nests_places_its_first_task_in_them() {
    // A replay of a recording of `scx_nest --trace-nests` starts with the
    // guest's nests: here CPU 13 in the primary nest and CPU 3 in the
    // reserve. The first task, forked from CPU 0, takes the primary
    // nest's idle CPU; started with empty nests it stays on CPU 0, its
    // idle previous CPU, which the fallback finds first.
    let m = guest();
    let workload = |global: &str| {
        let text = format!(r#"{{ {global} "tasks": {{ "a": {{ "run": 1000 }} }} }}"#);
        rtapp::parse(&text, "nests.json").unwrap()
    };
    let seeded = workload(r#""global": { "nests": { "primary": [13], "reserve": [3] } },"#);
    let params = nest_policy::Params::default().in_virtual_machine();
    let r = run(&m, &seeded, &mut nest(&m, params.clone()));
    assert_eq!(first_cpu(&r, "a"), 13);
    // The trace shows the nests from time 0.
    let at_start: Vec<(u32, nest_trace::Nest)> = r
        .trace
        .as_ref()
        .unwrap()
        .events
        .iter()
        .filter(|e| e.ts_ns == 0)
        .filter_map(|e| match e.kind {
            EventKind::NestChange { nest } => Some((e.cpu, nest)),
            _ => None,
        })
        .collect();
    assert_eq!(
        at_start,
        [
            (3, nest_trace::Nest::Reserve),
            (13, nest_trace::Nest::Primary)
        ]
    );
    // Idle for longer than P_remove when the recording's command started:
    // compacted at once, into the reserve, as the next scan would.
    let stale = workload(r#""global": { "nests": { "primary": [13], "idle_us": {"13": 9000} } },"#);
    let r = run(&m, &stale, &mut nest(&m, params.clone()));
    let first = r
        .trace
        .as_ref()
        .unwrap()
        .events
        .iter()
        .find_map(|e| match e.kind {
            EventKind::NestChange { nest } => Some((e.ts_ns, e.cpu, nest)),
            _ => None,
        });
    assert_eq!(first, Some((0, 13, nest_trace::Nest::Reserve)));
    let empty = run(&m, &workload(""), &mut nest(&m, params));
    assert_eq!(first_cpu(&empty, "a"), 0);
    // The Linux model has no nests and ignores them.
    let linux = run(&m, &seeded, &mut Baseline);
    assert_eq!(
        first_cpu(&linux, "a"),
        first_cpu(&run(&m, &workload(""), &mut Baseline), "a")
    );
    // A nest CPU the machine lacks is refused.
    let bad = workload(r#""global": { "nests": { "primary": [16] } },"#);
    let cfg = SimConfig::new(m.clone(), Governor::Performance, 1);
    let err = nest_sim::run(cfg, &bad, &mut Baseline)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("nests: CPU 16 is not on the machine (CPUs 0-15)"),
        "{err}"
    );
}

#[test]
fn every_placement_is_in_the_trace_with_the_step_that_decided_it() {
    let m = guest();
    // Forks, wakeups onto idle CPUs, and more tasks than CPUs (queued).
    let text = r#"{"tasks": {
        "hog": {"instance": 20, "loop": 1, "run": 20000},
        "sleeper": {"instance": 4, "loop": 20, "run": 100, "sleep": 2000}
    }}"#;
    let w = rtapp::parse(text, "inline").unwrap();
    let r = run(&m, &w, &mut nest(&m, Default::default()));
    let events = &r.trace.as_ref().unwrap().events;
    let mut steps = std::collections::BTreeMap::new();
    let mut wakeups = 0;
    for (i, e) in events.iter().enumerate() {
        let EventKind::Wakeup {
            pid, target_cpu, ..
        } = e.kind
        else {
            continue;
        };
        wakeups += 1;
        // The placement comes right before its wakeup, from the same CPU.
        let placement = events[..i].iter().rev().find_map(|p| match &p.kind {
            EventKind::Placement {
                pid: placed,
                target_cpu: on,
                how,
            } if *placed == pid => Some((p.ts_ns, p.cpu, *on, how.as_str())),
            _ => None,
        });
        let (ts, cpu, on, how) = placement.expect("a wakeup without its placement");
        assert_eq!((ts, cpu), (e.ts_ns, e.cpu), "{how}");
        assert_eq!(on, target_cpu, "{how}");
        *steps.entry(how).or_insert(0) += 1;
    }
    let placements = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Placement { .. }))
        .count();
    assert_eq!(placements, wakeups);
    // The 24 forks and the sleepers' 80 wakeups, some queued behind hogs.
    assert_eq!(wakeups, 104, "{steps:?}");
    assert!(steps.contains_key("no_idle"), "{steps:?}");
    assert!(
        ["prev", "primary", "attached", "warm_prev"]
            .iter()
            .any(|step| steps.contains_key(step)),
        "a step of the nests: {steps:?}"
    );
}

#[test]
fn a_new_task_does_not_preempt_the_busy_cpu_it_queues_for() {
    let m = guest();
    // A parent forks 40 CPU-bound children 1 ms of its own work apart:
    // from the 16th on every CPU is busy and each child queues. In
    // sched_ext a new task is enqueued without SCX_ENQ_WAKEUP
    // (wake_up_new_task() activates it with ENQUEUE_INITIAL), so
    // nest_enqueue() asks no preemption for it (nor counts it as woken at
    // the queue's front, nest_prev_keeps_cpu()): in the 2x4x2 guest under
    // scx_nest, 48 threads' parent ran 11-22 ms at a time while it forked
    // (results/2026-12-06-validate-investigations, "One replay is one draw"). The parent leaves its CPU
    // at slice ends only.
    let text = r#"{"tasks": {
        "parent": {"instance": 1, "loop": 40, "run": 1000, "fork": "child"},
        "child": {"instance": 0, "run": 50000}
    }}"#;
    let w = rtapp::parse(text, "inline").unwrap();
    let r = run(&m, &w, &mut nest(&m, Default::default()));
    let trace = r.trace.as_ref().unwrap();
    let parent = r.tasks.iter().find(|t| t.comm == "parent").unwrap().pid;
    let children: Vec<u32> = r
        .tasks
        .iter()
        .filter(|t| t.comm == "child")
        .map(|t| t.pid)
        .collect();
    assert_eq!(children.len(), 40);
    // The parent's switch-outs while runnable, and those right at one of
    // its forks (a preemption the new child asked for).
    let forks: Vec<u64> = trace
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::NewTask { parent: p, .. } if p == parent))
        .map(|e| e.ts_ns)
        .collect();
    assert_eq!(forks.len(), 40);
    let preempted: Vec<u64> = trace
        .events
        .iter()
        .filter(|e| {
            matches!(e.kind, EventKind::Switch { prev, prev_state: PrevState::Runnable, .. }
                if prev == parent)
        })
        .map(|e| e.ts_ns)
        .collect();
    let at_a_fork = preempted
        .iter()
        .filter(|&&t| forks.iter().any(|&f| t >= f && t - f < 10_000))
        .count();
    assert_eq!(
        at_a_fork, 0,
        "preempted at its forks: {preempted:?} (forks {forks:?})"
    );
}
