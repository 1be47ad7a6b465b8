//! Judging the traces of tests/vm/compare.sh: the same workload recorded
//! with `nest trace record` under the default scheduler and under scx_nest.
//!
//! [`trace_problems`] checks that a recorded trace is self-consistent;
//! [`compare_problems`] checks the facts the guest script reported;
//! [`Figures`] are the placement figures printed side by side.

use std::collections::{BTreeMap, BTreeSet};

use nest_trace::metrics::{interval_stats_between, percentile};
use nest_trace::timeline::Timeline;
use nest_trace::{EventKind, Pid, PrevState, Trace};

use crate::{Report, kernel_problems};

/// What a trace of the workload must show.
#[derive(Clone, Copy, Debug)]
pub struct Expect {
    pub cpus: usize,
    pub sockets: usize,
    /// Children the workload forks (`nest-load churn --count N`: N).
    pub children: usize,
}

/// The workload in a recorded trace: the recorded command's process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    pub pid: Pid,
    /// From the command's exec (or first event) to its exit (or the end).
    pub start_ns: u64,
    pub end_ns: u64,
    /// When it forked its first task (`start_ns` if it forked none).
    pub first_fork_ns: u64,
    pub children: Vec<Pid>,
}

impl Workload {
    /// Finds the recorded command (meta `command_pid`) in `trace`.
    pub fn find(trace: &Trace) -> Option<Self> {
        let pid: Pid = trace.meta_get("command_pid")?.parse().ok()?;
        Some(Self::of(trace, pid))
    }

    /// Process `pid` of `trace`: from its first exec (or the start) to its
    /// exit (or the end), with the tasks it forked (processes and threads).
    pub fn of(trace: &Trace, pid: Pid) -> Self {
        let mut start = None;
        let mut end = None;
        let mut first_fork = None;
        let mut children = Vec::new();
        for e in &trace.events {
            match &e.kind {
                EventKind::Exec { pid: p, .. } if *p == pid => {
                    start.get_or_insert(e.ts_ns);
                }
                EventKind::Exit { pid: p } if *p == pid => end = Some(e.ts_ns),
                EventKind::NewTask { parent, child, .. } if *parent == pid => {
                    first_fork.get_or_insert(e.ts_ns);
                    children.push(*child);
                }
                _ => {}
            }
        }
        let start_ns = start.unwrap_or(0);
        Self {
            pid,
            start_ns,
            end_ns: end.unwrap_or(trace.end_ns()),
            first_fork_ns: first_fork.unwrap_or(start_ns),
            children,
        }
    }

    /// The process and the tasks it forked.
    pub fn pids(&self) -> BTreeSet<Pid> {
        let mut pids: BTreeSet<Pid> = self.children.iter().copied().collect();
        pids.insert(self.pid);
        pids
    }
}

/// Everything wrong with one recorded trace of the workload. Empty: sane.
pub fn trace_problems(trace: &Trace, expect: Expect) -> Vec<String> {
    let mut problems = Vec::new();
    let mut expect_that = |what: &str, ok: bool, got: String| {
        if !ok {
            problems.push(format!("{what} (got {got})"));
        }
    };
    let topo = &trace.topology;
    expect_that(
        &format!("{} CPUs in the topology", expect.cpus),
        topo.nr_cpus() == expect.cpus,
        topo.nr_cpus().to_string(),
    );
    expect_that(
        &format!("{} sockets in the topology", expect.sockets),
        topo.nr_sockets() == expect.sockets,
        topo.nr_sockets().to_string(),
    );
    let meta = |key: &str| trace.meta_get(key).unwrap_or("nothing").to_string();
    expect_that(
        "the workload exits with status 0",
        trace.meta_get("exit_status") == Some("exit status: 0"),
        meta("exit_status"),
    );
    for key in ["lost_events", "overrun_events"] {
        expect_that(
            &format!("no {key}"),
            trace.meta_get(key) == Some("0"),
            meta(key),
        );
    }
    expect_that(
        "events in the trace",
        trace.events.len() > 100,
        trace.events.len().to_string(),
    );
    // The recorder's list of kernel threads, read from the guest's /proc:
    // kthreadd (pid 2) is one, the recorded command is not.
    let listed = trace
        .kernel_threads()
        .ok()
        .filter(|_| trace.meta_get(nest_trace::KERNEL_THREADS_META).is_some());
    let command = trace.command_pid();
    expect_that(
        "kthreadd listed as a kernel thread, the command not",
        listed
            .as_ref()
            .is_some_and(|k| k.contains(2, "") && command.is_some_and(|pid| !k.contains(pid, ""))),
        meta(nest_trace::KERNEL_THREADS_META),
    );

    let tl = Timeline::build(trace);
    let length = tl.end_ns;
    expect_that(
        "events name only CPUs of the topology",
        tl.nr_cpus == topo.nr_cpus(),
        format!("{} CPUs", tl.nr_cpus),
    );
    let max_running = tl.running.iter().map(|s| s.value).max().unwrap_or(0);
    expect_that(
        "concurrency never exceeds the number of CPUs",
        max_running as usize <= topo.nr_cpus(),
        format!("{max_running} tasks running at once"),
    );
    let mut per_task = std::collections::BTreeMap::<Pid, u64>::new();
    for run in &tl.runs {
        *per_task.entry(run.pid).or_default() += run.end - run.start;
    }
    let too_long: Vec<_> = per_task
        .iter()
        .filter(|&(_, &ns)| ns > length)
        .map(|(pid, ns)| format!("{pid} ({}) ran {ns} ns", tl.name(*pid)))
        .collect();
    expect_that(
        &format!("every task runs at most the trace length ({length} ns)"),
        too_long.is_empty(),
        too_long.join(", "),
    );
    let total: u64 = per_task.values().sum();
    let capacity = length.saturating_mul(topo.nr_cpus() as u64);
    expect_that(
        "run time over all tasks <= CPUs x trace length",
        total <= capacity,
        format!("{total} ns > {capacity} ns"),
    );

    match Workload::find(trace) {
        None => problems.push("no command_pid in the trace's meta".into()),
        Some(w) => {
            if w.children.len() != expect.children {
                problems.push(format!(
                    "the workload (pid {}) forks {} children (got {})",
                    w.pid,
                    expect.children,
                    w.children.len()
                ));
            }
            problems.extend(exit_wakeup_problems(trace, &w));
            if w.start_ns >= w.end_ns {
                problems.push(format!(
                    "the workload's exec..exit window is empty ({}..{})",
                    w.start_ns, w.end_ns
                ));
            }
        }
    }
    problems
}

/// What is wrong with the wakeups the children's exits send the workload.
/// An exit wakes a parent blocked in `waitpid()` through
/// `__wake_up_parent()`, a sync wakeup, so a recorder that names wakers
/// and probes the wake flags names the child, with `WF_SYNC`. A child that
/// exits before the parent blocks (a host that deschedules the parent's
/// vCPU for milliseconds makes that common) wakes nothing, so only exits
/// while the parent was blocked are owed a wakeup; 1 in 10 of those may
/// miss it, for a parent blocked on something else (a page fault).
fn exit_wakeup_problems(trace: &Trace, w: &Workload) -> Vec<String> {
    let children: BTreeSet<Pid> = w.children.iter().copied().collect();
    let mut parent_blocked = false;
    let mut owed = Vec::new();
    let mut woke_by = BTreeMap::<Pid, Option<bool>>::new();
    for e in &trace.events {
        match e.kind {
            EventKind::Switch {
                prev, prev_state, ..
            } if prev == w.pid => parent_blocked = prev_state == PrevState::Blocked,
            EventKind::Wakeup { pid, waker, .. } if pid == w.pid => {
                parent_blocked = false;
                if let Some(waker) = waker.filter(|k| children.contains(&k.pid)) {
                    woke_by.insert(waker.pid, waker.sync);
                }
            }
            EventKind::Exit { pid } if parent_blocked && children.contains(&pid) => owed.push(pid),
            _ => {}
        }
    }
    let mut problems = Vec::new();
    let not_sync = woke_by.values().filter(|&&sync| sync != Some(true)).count();
    if woke_by.is_empty() || not_sync > 0 {
        problems.push(format!(
            "children's exits wake the workload (pid {}) with the child named as a \
             WF_SYNC waker (got {} such wakeups, {} of them not WF_SYNC)",
            w.pid,
            woke_by.len(),
            not_sync
        ));
    }
    let missed = owed.iter().filter(|c| !woke_by.contains_key(c)).count();
    if missed * 10 > owed.len() {
        problems.push(format!(
            "at least 9 in 10 children that exit while the workload (pid {}) is blocked \
             wake it, naming the child (got {} of {})",
            w.pid,
            owed.len() - missed,
            owed.len()
        ));
    }
    problems
}

/// Everything wrong with the facts compare.sh reported: every recording
/// succeeded, the default one without sched_ext, each scx_nest run (`runs`:
/// the names given with `--scx`) with scx_nest enabled from before to
/// after it (same `enable_seq`, so never ejected and re-enabled), a clean
/// SIGINT exit, and a quiet kernel log.
pub fn compare_problems(report: &Report, runs: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut expect = |what: &str, ok: bool, got: String| {
        if !ok {
            problems.push(format!("{what} (got {got})"));
        }
    };
    let fact = |key: &str| report.get(key).unwrap_or("nothing").to_string();
    let is = |key: &str, value: &str| report.get(key) == Some(value);
    for run in std::iter::once(&"default").chain(runs) {
        let key = format!("{run}_record_exit");
        expect(
            &format!("the {run} recording exits with status 0"),
            is(&key, "0"),
            fact(&key),
        );
        for leftover in ["instances", "kprobes"] {
            let key = format!("{run}_{leftover}_after");
            expect(
                &format!("no tracefs {leftover} left after the {run} recording"),
                report.get(&key).is_some_and(|v| v.trim().is_empty()),
                fact(&key),
            );
        }
    }
    for key in ["default_state_before", "default_state_after"] {
        expect(
            &format!("{key}: sched_ext disabled"),
            is(key, "disabled"),
            fact(key),
        );
    }
    for run in runs {
        for when in ["state_after_attach", "state_before", "state_after"] {
            let key = format!("{run}_{when}");
            expect(
                &format!("{key}: sched_ext enabled"),
                is(&key, "enabled"),
                fact(&key),
            );
        }
        let (before, after) = (
            fact(&format!("{run}_enable_seq_before")),
            fact(&format!("{run}_enable_seq_after")),
        );
        expect(
            &format!("scx_nest stays enabled through the {run} recording (enable_seq unchanged)"),
            before == after && before.parse::<u64>().is_ok(),
            format!("{before} -> {after}"),
        );
        let key = format!("{run}_ops");
        expect(
            &format!("the ops attached for {run} are scx_nest's"),
            report.get(&key).is_some_and(|ops| ops.starts_with("nest")),
            fact(&key),
        );
        let key = format!("{run}_sched_exit");
        expect(
            &format!("scx_nest ({run}) exits with status 0 after SIGINT"),
            is(&key, "0"),
            fact(&key),
        );
        let key = format!("{run}_state_after_exit");
        expect(
            &format!("sched_ext disabled after scx_nest ({run}) exits"),
            is(&key, "disabled"),
            fact(&key),
        );
    }
    for problem in kernel_problems(&report.dmesg) {
        problems.push(format!("kernel log: {problem}"));
    }
    problems
}

/// Children per window of [`Figures::mean_workload_cpus_per_children`].
pub const CHILDREN_PER_WINDOW: usize = 10;

/// Distinct CPUs that tasks of `pids` ran on between `start` and `end`.
fn cpus_between(tl: &Timeline, pids: &BTreeSet<Pid>, start: u64, end: u64) -> usize {
    tl.runs
        .iter()
        .filter(|r| pids.contains(&r.pid) && r.start < end && r.end > start)
        .map(|r| r.cpu)
        .collect::<BTreeSet<_>>()
        .len()
}

/// Mean distinct CPUs of `pids` per window of [`CHILDREN_PER_WINDOW`]
/// children of `w`: the windows are cut where every tenth child first
/// runs, from the workload's start; a last window with fewer children is
/// left out. 0 with fewer children than one window.
fn cpus_per_children(tl: &Timeline, w: &Workload, pids: &BTreeSet<Pid>) -> f64 {
    let children: BTreeSet<Pid> = w.children.iter().copied().collect();
    let mut first_run: BTreeMap<Pid, u64> = BTreeMap::new();
    for r in tl.runs.iter().filter(|r| children.contains(&r.pid)) {
        let start = first_run.entry(r.pid).or_insert(r.start);
        *start = (*start).min(r.start);
    }
    let mut starts: Vec<u64> = first_run.into_values().collect();
    starts.sort_unstable();
    let mut bounds: Vec<u64> = std::iter::once(w.start_ns)
        .chain(
            starts
                .iter()
                .copied()
                .skip(CHILDREN_PER_WINDOW)
                .step_by(CHILDREN_PER_WINDOW),
        )
        .collect();
    if !starts.is_empty() && starts.len().is_multiple_of(CHILDREN_PER_WINDOW) {
        bounds.push(w.end_ns);
    }
    let windows: Vec<f64> = bounds
        .windows(2)
        .map(|b| cpus_between(tl, pids, b[0], b[1]) as f64)
        .collect();
    if windows.is_empty() {
        0.0
    } else {
        windows.iter().sum::<f64>() / windows.len() as f64
    }
}

/// Placement figures of one trace, over the workload's exec..exit window
/// cut into intervals of `interval_ns` (all tasks of the machine count).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    pub window_ns: u64,
    pub intervals: usize,
    /// Mean distinct CPUs that ran a task per interval.
    pub mean_cpus: f64,
    pub mean_sockets: f64,
    /// Mean of `cpus_used - ceil(average concurrency)` per interval.
    pub mean_underload: f64,
    pub mean_concurrency: f64,
    /// Migrations of the workload's own tasks, and of all tasks.
    pub workload_migrations: u64,
    pub all_migrations: u64,
    /// Wake-up latencies of the workload's tasks (nearest rank).
    pub wakeups: usize,
    pub wakeup_p50_ns: u64,
    pub wakeup_p99_ns: u64,
    /// Distinct CPUs the workload's tasks ran on.
    pub workload_cpus: usize,
    /// Mean distinct CPUs the workload's own tasks ran on per interval
    /// (other tasks of the machine left out).
    pub mean_workload_cpus: f64,
    /// Mean distinct CPUs the workload's own tasks ran on per window of
    /// [`CHILDREN_PER_WINDOW`] children started. Counted in events, not in
    /// time: how many children fit in 100 ms depends on the emulator's and
    /// the host's speed, how many CPUs a chain of ten children used does not.
    pub mean_workload_cpus_per_children: f64,
    /// Share of the workload's run time spent on the socket where most of
    /// it ran.
    pub main_socket_share: f64,
}

impl Figures {
    pub fn of(trace: &Trace, interval_ns: u64) -> Option<Self> {
        let w = Workload::find(trace)?;
        Some(Self::of_workload(&Timeline::build(trace), &w, interval_ns))
    }

    /// The figures of workload `w` of the replayed trace `tl`.
    pub fn of_workload(tl: &Timeline, w: &Workload, interval_ns: u64) -> Self {
        let stats = interval_stats_between(tl, w.start_ns, w.end_ns, interval_ns);
        let n = stats.len().max(1) as f64;
        let mean = |f: &dyn Fn(&nest_trace::metrics::IntervalStats) -> f64| {
            stats.iter().map(f).sum::<f64>() / n
        };
        let pids = w.pids();
        let mut lat: Vec<u64> = tl
            .wakeup_latencies
            .iter()
            .filter(|(pid, _)| pids.contains(pid))
            .map(|&(_, ns)| ns)
            .collect();
        lat.sort_unstable();
        let workload_cpus: BTreeSet<_> = tl
            .runs
            .iter()
            .filter(|r| pids.contains(&r.pid))
            .map(|r| r.cpu)
            .collect();
        let mean_workload_cpus = if stats.is_empty() {
            0.0
        } else {
            stats
                .iter()
                .map(|s| cpus_between(tl, &pids, s.start_ns, s.end_ns) as f64)
                .sum::<f64>()
                / n
        };
        Self {
            window_ns: w.end_ns - w.start_ns,
            intervals: stats.len(),
            mean_cpus: mean(&|s| f64::from(s.cpus_used)),
            mean_sockets: mean(&|s| f64::from(s.sockets_used)),
            mean_underload: mean(&|s| f64::from(s.underload)),
            mean_concurrency: mean(&|s| s.avg_concurrency),
            workload_migrations: pids.iter().filter_map(|p| tl.migrations.get(p)).sum(),
            all_migrations: tl.migrations.values().sum(),
            wakeups: lat.len(),
            wakeup_p50_ns: percentile(&lat, 50),
            wakeup_p99_ns: percentile(&lat, 99),
            workload_cpus: workload_cpus.len(),
            mean_workload_cpus,
            mean_workload_cpus_per_children: cpus_per_children(tl, w, &pids),
            main_socket_share: main_socket_share(tl, &pids),
        }
    }

    /// The figures as (name, value) rows, for printing side by side.
    pub fn rows(&self) -> Vec<(&'static str, String)> {
        vec![
            ("workload window (ms)", ms(self.window_ns)),
            ("intervals", self.intervals.to_string()),
            (
                "mean CPUs used / interval",
                format!("{:.2}", self.mean_cpus),
            ),
            (
                "mean sockets used / interval",
                format!("{:.2}", self.mean_sockets),
            ),
            ("mean underload", format!("{:.2}", self.mean_underload)),
            ("mean concurrency", format!("{:.2}", self.mean_concurrency)),
            (
                "mean workload CPUs / interval",
                format!("{:.2}", self.mean_workload_cpus),
            ),
            (
                "mean workload CPUs / 10 children",
                format!("{:.2}", self.mean_workload_cpus_per_children),
            ),
            ("CPUs the workload ran on", self.workload_cpus.to_string()),
            (
                "migrations (workload)",
                self.workload_migrations.to_string(),
            ),
            ("migrations (all tasks)", self.all_migrations.to_string()),
            (
                "workload run time on main socket",
                format!("{:.0}%", self.main_socket_share * 100.0),
            ),
            ("wake-ups (workload)", self.wakeups.to_string()),
            ("wake-up p50 (us)", us(self.wakeup_p50_ns)),
            ("wake-up p99 (us)", us(self.wakeup_p99_ns)),
        ]
    }
}

/// Share of the run time of `pids` spent on the socket where most of it
/// ran (1 when they did not run).
fn main_socket_share(tl: &Timeline, pids: &BTreeSet<Pid>) -> f64 {
    let mut per_socket = std::collections::BTreeMap::<u32, u64>::new();
    for r in tl.runs.iter().filter(|r| pids.contains(&r.pid)) {
        *per_socket.entry(tl.socket(r.cpu)).or_default() += r.end - r.start;
    }
    let total: u64 = per_socket.values().sum();
    let main = per_socket.values().copied().max().unwrap_or(0);
    if total == 0 {
        1.0
    } else {
        main as f64 / total as f64
    }
}

fn ms(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e6)
}

fn us(ns: u64) -> String {
    format!("{:.0}", ns as f64 / 1e3)
}

/// `a` and `b` side by side under the headers `ha` and `hb`.
pub fn side_by_side(ha: &str, a: &Figures, hb: &str, b: &Figures) -> String {
    columns(&[ha, hb], &[a.rows(), b.rows()])
}

fn value<'a>(column: &'a [(&'static str, String)], row: usize) -> &'a str {
    column.get(row).map_or("", |(_, v)| v.as_str())
}

/// Rows of (name, value) figures, one column per run under `headers`
/// (the names are taken from the first column), aligned.
pub fn columns(headers: &[&str], columns: &[Vec<(&'static str, String)>]) -> String {
    let names: Vec<&str> = columns
        .first()
        .map(|c| c.iter().map(|(name, _)| *name).collect())
        .unwrap_or_default();
    let name_width = names.iter().map(|n| n.len()).max().unwrap_or(0);
    let widths: Vec<usize> = headers
        .iter()
        .zip(columns)
        .map(|(h, c)| {
            (0..names.len())
                .map(|i| value(c, i).len())
                .fold(h.len().max(10), usize::max)
        })
        .collect();
    let mut out = format!("{:<name_width$}", "");
    for (h, w) in headers.iter().zip(&widths) {
        out.push_str(&format!(" {h:>w$}"));
    }
    out.push('\n');
    for (i, name) in names.iter().enumerate() {
        out.push_str(&format!("{name:<name_width$}"));
        for (c, w) in columns.iter().zip(&widths) {
            out.push_str(&format!(" {:>w$}", value(c, i)));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nest_trace::{Event, Topology};

    /// 4 CPUs on 2 sockets. Workload pid 10 execs at 0, forks 11 and 12,
    /// which run on CPUs 1 and 2; exits at 300.
    fn trace() -> Trace {
        use EventKind::*;
        let ev = |ts_ns, cpu, kind| Event { ts_ns, cpu, kind };
        let sw = |prev, next| Switch {
            prev,
            prev_state: PrevState::Blocked,
            next,
        };
        let fork = |child| NewTask {
            parent: 10,
            child,
            comm: "nest-load".into(),
        };
        let wake = |pid, target_cpu| Wakeup {
            pid,
            target_cpu,
            waker: None,
        };
        // A child's exit wakes the parent, with WF_SYNC.
        let exit_wake = |child| Wakeup {
            pid: 10,
            target_cpu: 0,
            waker: Some(nest_trace::Waker {
                pid: child,
                sync: Some(true),
            }),
        };
        let mut events = vec![
            ev(
                0,
                0,
                Exec {
                    pid: 10,
                    comm: "nest-load".into(),
                },
            ),
            ev(0, 0, sw(0, 10)),
            ev(10, 0, fork(11)),
            ev(10, 0, wake(11, 1)),
            ev(20, 1, sw(0, 11)),
            ev(100, 1, Exit { pid: 11 }),
            ev(100, 1, exit_wake(11)),
            ev(100, 1, sw(11, 0)),
            ev(110, 0, fork(12)),
            ev(110, 0, wake(12, 2)),
            ev(130, 2, sw(0, 12)),
            ev(200, 2, Exit { pid: 12 }),
            ev(200, 2, exit_wake(12)),
            ev(200, 2, sw(12, 0)),
            ev(300, 0, Exit { pid: 10 }),
            ev(300, 0, sw(10, 0)),
        ];
        events.extend((0..100).map(|i| ev(300 + i, 3, IdleEnter)));
        Trace {
            topology: Topology::regular(2, 2, 1),
            meta: vec![
                ("command_pid".into(), "10".into()),
                ("exit_status".into(), "exit status: 0".into()),
                ("lost_events".into(), "0".into()),
                ("overrun_events".into(), "0".into()),
                ("kernel_threads".into(), "2,3".into()),
            ],
            events,
        }
    }

    const EXPECT: Expect = Expect {
        cpus: 4,
        sockets: 2,
        children: 2,
    };

    #[test]
    fn a_sane_trace_passes() {
        assert_eq!(trace_problems(&trace(), EXPECT), Vec::<String>::new());
        let w = Workload::find(&trace()).unwrap();
        assert_eq!((w.pid, w.start_ns, w.end_ns), (10, 0, 300));
        assert_eq!(w.first_fork_ns, 10);
        assert_eq!(w.children, vec![11, 12]);
        assert_eq!(Workload::of(&trace(), 11).first_fork_ns, 0, "no fork");
    }

    #[test]
    fn wrong_topology_children_and_status_fail() {
        let mut t = trace();
        t.meta_set("exit_status", "exit status: 1");
        let problems = trace_problems(
            &t,
            Expect {
                cpus: 16,
                sockets: 1,
                children: 100,
            },
        );
        for needle in ["16 CPUs", "1 sockets", "100 children", "status 0"] {
            assert!(
                problems.iter().any(|p| p.contains(needle)),
                "{needle}: {problems:?}"
            );
        }
    }

    #[test]
    fn a_missing_or_wrong_kernel_thread_list_fails() {
        for list in [None, Some("3"), Some("2,10")] {
            let mut t = trace();
            t.meta.retain(|(k, _)| k != "kernel_threads");
            if let Some(list) = list {
                t.meta_set("kernel_threads", list);
            }
            let problems = trace_problems(&t, EXPECT);
            assert!(
                problems.iter().any(|p| p.contains("kthreadd listed")),
                "{list:?}: {problems:?}"
            );
        }
    }

    #[test]
    fn events_on_unknown_cpus_fail() {
        let mut t = trace();
        t.events.push(Event {
            ts_ns: 500,
            cpu: 7,
            kind: EventKind::IdleEnter,
        });
        let problems = trace_problems(&t, EXPECT);
        assert!(
            problems.iter().any(|p| p.contains("only CPUs")),
            "{problems:?}"
        );
    }

    #[test]
    fn exits_without_sync_wakers_fail() {
        let mut t = trace();
        for e in &mut t.events {
            if let EventKind::Wakeup { waker, .. } = &mut e.kind {
                *waker = waker.map(|w| nest_trace::Waker { sync: None, ..w });
            }
        }
        let problems = trace_problems(&t, EXPECT);
        assert!(
            problems.iter().any(|p| p.contains("WF_SYNC waker")),
            "{problems:?}"
        );
    }

    /// The trace with child 11's exit wakeup removed, and the parent
    /// blocked (if `blocked`) from 15 until that exit.
    fn trace_without_the_first_exit_wakeup(blocked: bool) -> Trace {
        let mut t = trace();
        t.events
            .retain(|e| !matches!(e.kind, EventKind::Wakeup { waker: Some(w), .. } if w.pid == 11));
        if blocked {
            let block = Event {
                ts_ns: 15,
                cpu: 0,
                kind: EventKind::Switch {
                    prev: 10,
                    prev_state: PrevState::Blocked,
                    next: 0,
                },
            };
            t.events.push(block);
            t.events.sort_by_key(|e| e.ts_ns);
        }
        t
    }

    #[test]
    fn an_exit_owes_the_parent_a_wakeup_only_if_it_was_blocked() {
        let running = trace_without_the_first_exit_wakeup(false);
        assert_eq!(trace_problems(&running, EXPECT), Vec::<String>::new());
        let blocked = trace_without_the_first_exit_wakeup(true);
        let problems = trace_problems(&blocked, EXPECT);
        assert!(
            problems.iter().any(|p| p.contains("(got 1 of 2)")),
            "{problems:?}"
        );
    }

    #[test]
    fn figures_cover_the_workload_window() {
        let f = Figures::of(&trace(), 150).unwrap();
        assert_eq!((f.window_ns, f.intervals), (300, 2));
        // [0,150): CPUs 0, 1, 2; [150,300): CPUs 0, 2.
        assert_eq!(f.mean_cpus, 2.5);
        assert_eq!(f.mean_sockets, 2.0);
        assert_eq!(f.workload_cpus, 3);
        // Workload tasks: [0,150) on CPUs 0, 1, 2; [150,300) on 0, 2.
        assert_eq!(f.mean_workload_cpus, 2.5);
        // 300 ns on socket 0 (CPUs 0, 1: 300 + 80), 70 on socket 1.
        assert_eq!(f.main_socket_share, 380.0 / 450.0);
        assert_eq!((f.wakeups, f.wakeup_p50_ns, f.wakeup_p99_ns), (2, 10, 20));
        let table = side_by_side("default", &f, "nest", &f);
        assert!(table.contains("mean CPUs used / interval"), "{table}");
    }

    /// A chain of `children` children of the parent (pid 10, CPU 0), child
    /// `i` running 10 ns on CPU `cpu_of(i)`, one after the other.
    fn chain(children: u32, cpu_of: impl Fn(u32) -> u32) -> Trace {
        use EventKind::*;
        let ev = |ts_ns, cpu, kind| Event { ts_ns, cpu, kind };
        let sw = |prev, next| Switch {
            prev,
            prev_state: PrevState::Blocked,
            next,
        };
        let exec = Exec {
            pid: 10,
            comm: "nest-load".into(),
        };
        let mut events = vec![ev(0, 0, exec), ev(0, 0, sw(0, 10))];
        for i in 0..children {
            let (child, cpu, t) = (100 + i, cpu_of(i), 100 * u64::from(i) + 10);
            let fork = NewTask {
                parent: 10,
                child,
                comm: "nest-load".into(),
            };
            events.extend([
                ev(t, 0, fork),
                ev(t, 0, sw(10, 0)),
                ev(t + 10, cpu, sw(0, child)),
                ev(t + 20, cpu, Exit { pid: child }),
                ev(t + 20, cpu, sw(child, 0)),
                ev(t + 30, 0, sw(0, 10)),
            ]);
        }
        let end = 100 * u64::from(children) + 50;
        events.extend([ev(end, 0, Exit { pid: 10 }), ev(end, 0, sw(10, 0))]);
        Trace {
            topology: Topology::regular(2, 8, 1),
            meta: vec![("command_pid".into(), "10".into())],
            events,
        }
    }

    #[test]
    fn cpus_per_children_count_windows_of_ten_children_whatever_their_pace() {
        // Children alternate between CPUs 1 and 2; the parent stays on 0.
        let f = Figures::of(&chain(20, |i| 1 + i % 2), 1_000_000).unwrap();
        assert_eq!(f.mean_workload_cpus_per_children, 3.0);
        // Spread over 16 CPUs: each window of ten sees ten CPUs + the parent's.
        let f = Figures::of(&chain(20, |i| 1 + i % 15), 1_000_000).unwrap();
        assert_eq!(f.mean_workload_cpus_per_children, 11.0);
        // Five children more, on CPU 9: a window with fewer than ten is left out.
        let f = Figures::of(
            &chain(25, |i| if i < 20 { 1 + i % 2 } else { 9 }),
            1_000_000,
        )
        .unwrap();
        assert_eq!(f.mean_workload_cpus_per_children, 3.0);
        // Fewer children than one window: nothing to count.
        let f = Figures::of(&chain(9, |_| 1), 1_000_000).unwrap();
        assert_eq!(f.mean_workload_cpus_per_children, 0.0);
    }

    #[test]
    fn compare_facts_are_judged() {
        let good = "\
default_state_before=disabled
default_record_exit=0
default_state_after=disabled
nest_state_after_attach=enabled
nest_ops=nest_0.1.0_x86_64
nest_state_before=enabled
nest_enable_seq_before=1
nest_record_exit=0
nest_state_after=enabled
nest_enable_seq_after=1
nest_sched_exit=0
nest_state_after_exit=disabled
default_instances_after=
default_kprobes_after=
nest_instances_after=
nest_kprobes_after=
--- dmesg
";
        let nest = ["nest"];
        assert_eq!(
            compare_problems(&Report::parse(good), &nest),
            Vec::<String>::new()
        );
        let reenabled = good.replace("nest_enable_seq_after=1", "nest_enable_seq_after=2");
        let problems = compare_problems(&Report::parse(&reenabled), &nest);
        assert!(
            problems.iter().any(|p| p.contains("enable_seq")),
            "{problems:?}"
        );
        let kprobe_left = good.replace(
            "nest_kprobes_after=",
            "nest_kprobes_after=p:nest_7/nest_wake_flags try_to_wake_up",
        );
        let problems = compare_problems(&Report::parse(&kprobe_left), &nest);
        assert!(
            problems.iter().any(|p| p.contains("no tracefs kprobes")),
            "{problems:?}"
        );
        assert!(compare_problems(&Report::parse(""), &nest).len() >= 13);
        // A second run must report its own facts.
        let problems = compare_problems(&Report::parse(good), &["nest", "spread"]);
        assert_eq!(problems.len(), 10, "{problems:?}");
        assert!(
            problems.iter().all(|p| p.contains("spread")),
            "{problems:?}"
        );
    }
}
