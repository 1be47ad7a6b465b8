//! Judging the placement test (tests/placement.rs): the workloads of
//! tests/vm/placement-load.sh recorded by tests/vm/compare.sh under the
//! default scheduler, under Nest and under `--policy spread` (the negative
//! control), all measured from the kernel's tracepoints.
//!
//! [`launched`] finds the workloads in a trace, [`BatchFigures`] measures a
//! batch of CPU-bound threads (the chain is measured with [`Figures`]),
//! and the `*_problems` functions are the verdicts, with limits chosen from
//! repeated guest runs (the measured ranges are next to each limit).

use std::collections::BTreeMap;

use nest_trace::timeline::Timeline;
use nest_trace::{Cpu, EventKind, Pid, PrevState, Trace};

use crate::trace::{Figures, Workload};

/// The processes named `comm` (after their exec) that the recorded
/// command (meta `command_pid`) forked, in the order they were forked.
pub fn launched(trace: &Trace, comm: &str) -> Vec<Workload> {
    let Some(command) = trace
        .meta_get("command_pid")
        .and_then(|pid| pid.parse::<Pid>().ok())
    else {
        return Vec::new();
    };
    let named = |pid: Pid| {
        trace.events.iter().any(
            |e| matches!(&e.kind, EventKind::Exec { pid: p, comm: c } if *p == pid && c == comm),
        )
    };
    Workload::of(trace, command)
        .children
        .into_iter()
        .filter(|&pid| named(pid))
        .map(|pid| Workload::of(trace, pid))
        .collect()
}

/// Work-conservation violations (a CPU idle while a task waits behind a
/// running one elsewhere) of at least a minimum length in a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Violations {
    pub count: usize,
    pub longest_ns: u64,
    pub total_ns: u64,
}

impl Violations {
    /// The violations of `tl` within `[start, end)` (cut at its edges)
    /// lasting at least `min_ns`.
    pub fn of(tl: &Timeline, start: u64, end: u64, min_ns: u64) -> Self {
        let lengths: Vec<u64> = tl
            .violations
            .iter()
            .map(|v| v.end.min(end).saturating_sub(v.start.max(start)))
            .filter(|&d| d > 0 && d >= min_ns)
            .collect();
        Self {
            count: lengths.len(),
            longest_ns: lengths.iter().copied().max().unwrap_or(0),
            total_ns: lengths.iter().sum(),
        }
    }

    fn row(&self) -> String {
        format!(
            "{}/{}/{}",
            self.count,
            ms(self.longest_ns),
            ms(self.total_ns)
        )
    }
}

fn ms(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e6)
}

/// Violations of work conservation shorter than this (a 4 ms tick) are
/// not counted in the figures: a task woken onto a busy CPU while another
/// is about to take it is not a problem.
pub const TICK_NS: u64 = 4_000_000;

/// A batch of CPU-bound threads (`nest-load batch`), measured from the
/// creation of its first thread (`start_ns`) to the exit of its last one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BatchFigures {
    /// Threads the batch created.
    pub tasks: usize,
    /// When its first thread was created (ns into the trace).
    pub start_ns: u64,
    /// From `start_ns` until each CPU of the machine had run one of the
    /// threads; `None` if some CPU never did.
    pub every_cpu_ns: Option<u64>,
    /// CPUs that ran one of the threads.
    pub cpus_used: usize,
    /// From `start_ns` to the exit of the last thread.
    pub completion_ns: u64,
    /// Migrations of the threads.
    pub migrations: u64,
    /// Migrations of the threads while all of them were alive (from the
    /// creation of the last to the exit of the first): the overload's
    /// steady state, without the spreading at the start and the reshuffle
    /// of the ragged end.
    pub steady_migrations: u64,
    /// Preemptions of the threads (switched out still runnable) in the
    /// same window: the chances to migrate.
    pub steady_preemptions: u64,
    /// Violations of work conservation (lasting at least [`TICK_NS`]) by
    /// any waiting task. The trace does not say which CPUs a task may use,
    /// so this includes per-CPU kernel threads waiting on their own CPU,
    /// which no idle CPU could have run.
    pub any_task: Violations,
    /// Violations by the batch's own threads, which may run on every CPU:
    /// an idle CPU could have run them.
    pub batch_task: Violations,
}

impl BatchFigures {
    /// The figures of batch `w` of `trace` (replayed as `tl`).
    pub fn of(trace: &Trace, tl: &Timeline, w: &Workload) -> Self {
        let threads = &w.children;
        let start = trace
            .events
            .iter()
            .find_map(|e| match e.kind {
                EventKind::NewTask { child, .. } if threads.contains(&child) => Some(e.ts_ns),
                _ => None,
            })
            .unwrap_or(w.start_ns);
        let end = trace
            .events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Exit { pid } if threads.contains(&pid) => Some(e.ts_ns),
                _ => None,
            })
            .max()
            .unwrap_or(w.end_ns);
        let mut first_run = BTreeMap::<Cpu, u64>::new();
        for r in tl.runs.iter().filter(|r| threads.contains(&r.pid)) {
            let first = first_run.entry(r.cpu).or_insert(r.start);
            *first = (*first).min(r.start);
        }
        let every_cpu_ns = (first_run.len() >= tl.nr_cpus).then(|| {
            first_run
                .values()
                .max()
                .map_or(0, |t| t.saturating_sub(start))
        });
        let own = Timeline::build_counting(trace, |pid| threads.contains(&pid));
        let (steady_migrations, steady_preemptions) = steady_state_counts(trace, threads);
        Self {
            tasks: threads.len(),
            start_ns: start,
            every_cpu_ns,
            cpus_used: first_run.len(),
            completion_ns: end.saturating_sub(start),
            migrations: threads.iter().filter_map(|p| tl.migrations.get(p)).sum(),
            steady_migrations,
            steady_preemptions,
            any_task: Violations::of(tl, start, end, TICK_NS),
            batch_task: Violations::of(&own, start, end, TICK_NS),
        }
    }

    /// The figures as (name, value) rows, for printing side by side.
    pub fn rows(&self) -> Vec<(&'static str, String)> {
        vec![
            ("threads", self.tasks.to_string()),
            ("CPUs used", self.cpus_used.to_string()),
            (
                "every CPU used after (ms)",
                self.every_cpu_ns.map_or("never".into(), ms),
            ),
            ("completion (ms)", ms(self.completion_ns)),
            ("migrations", self.migrations.to_string()),
            (
                "all alive: migrations / preemptions",
                format!("{} / {}", self.steady_migrations, self.steady_preemptions),
            ),
            (
                "idle >= 4 ms, any task waits (n/max/sum ms)",
                self.any_task.row(),
            ),
            (
                "idle >= 4 ms, a thread waits (n/max/sum ms)",
                self.batch_task.row(),
            ),
        ]
    }
}

/// Migrations and preemptions of `threads` while all of them were alive
/// (see [`BatchFigures::steady_migrations`]); zero if they never were.
fn steady_state_counts(trace: &Trace, threads: &[Pid]) -> (u64, u64) {
    let ours = |pid: &Pid| threads.contains(pid);
    let last_created = trace.events.iter().filter_map(|e| match &e.kind {
        EventKind::NewTask { child, .. } if ours(child) => Some(e.ts_ns),
        _ => None,
    });
    let first_exit = trace.events.iter().filter_map(|e| match &e.kind {
        EventKind::Exit { pid } if ours(pid) => Some(e.ts_ns),
        _ => None,
    });
    let (Some(start), Some(end)) = (last_created.max(), first_exit.min()) else {
        return (0, 0);
    };
    let window = trace
        .events
        .iter()
        .filter(|e| (start..end).contains(&e.ts_ns));
    let (mut migrations, mut preemptions) = (0, 0);
    for e in window {
        match &e.kind {
            EventKind::Migrate { pid, .. } if ours(pid) => migrations += 1,
            EventKind::Switch {
                prev,
                prev_state: PrevState::Runnable,
                ..
            } if ours(prev) => preemptions += 1,
            _ => {}
        }
    }
    (migrations, preemptions)
}

/// The chain (a serial fork/wait chain, one process at a time) may use at
/// most this many distinct CPUs per ten children on average, counting its
/// own tasks: half the 16-CPU guest. Measured in three runs
/// (one with two host hogs): default 2.8-4.6, Nest 3.5-4.5, the spread
/// control 12.9-13.1. Windows of children, not of time:
/// per 100 ms the spread control measured 12.3-14.7 in 9 earlier runs,
/// then 7.75-7.78 in two runs whose spread chain ran
/// about half as fast as the default's (1794 against 936 ms), under this
/// limit.
pub const CHAIN_MAX_CPUS: f64 = 8.0;
/// At most this much underload per 100 ms (CPUs used by any task beyond
/// the fewest that could have carried the work). Measured: Nest 1.8-4.4
/// (exploring: up to 4.5), default 4.0-5.5, spread 12.4-14.2.
pub const CHAIN_MAX_UNDERLOAD: f64 = 8.0;
/// Nest may use at most this many more CPUs per ten children for the chain
/// than the default scheduler did in the same boot. Measured: Nest -1.1
/// to +1.7, spread +8.4 to +10.3 (per 100 ms: Nest -0.2 to +2.2, spread +4.4 to +12.7).
pub const CHAIN_MAX_CPUS_OVER_DEFAULT: f64 = 4.5;
/// ... and at most this much more underload. Measured Nest - default:
/// -2.6 to +0.2; spread - default: +7.1 to +9.9.
pub const CHAIN_MAX_UNDERLOAD_OVER_DEFAULT: f64 = 1.5;

/// Everything wrong with the chain's placement under a scheduler (`run`),
/// given the figures of the default scheduler in the same boot, both over
/// 100 ms intervals. Empty: it kept the chain on few CPUs.
pub fn chain_problems(run: &Figures, default: &Figures) -> Vec<String> {
    let mut problems = Vec::new();
    let mut at_most = |what: &str, value: f64, limit: f64| {
        if value > limit {
            problems.push(format!("{what}: {value:.2} > {limit:.2}"));
        }
    };
    at_most(
        "chain CPUs per 10 children",
        run.mean_workload_cpus_per_children,
        CHAIN_MAX_CPUS,
    );
    at_most(
        "underload per 100 ms",
        run.mean_underload,
        CHAIN_MAX_UNDERLOAD,
    );
    at_most(
        "chain CPUs per 10 children above the default scheduler's",
        run.mean_workload_cpus_per_children - default.mean_workload_cpus_per_children,
        CHAIN_MAX_CPUS_OVER_DEFAULT,
    );
    at_most(
        "underload per 100 ms above the default scheduler's",
        run.mean_underload - default.mean_underload,
        CHAIN_MAX_UNDERLOAD_OVER_DEFAULT,
    );
    problems
}

/// As many CPU-bound threads as CPUs must have run on every CPU within
/// this time of the first thread's creation (the issue's "within a
/// second"), or within [`BATCH_EVERY_CPU_FACTOR`] times the default
/// scheduler's time in the same boot if that is longer. Measured: Nest
/// 25-61 ms, default 59-148 ms, spread 28-49 ms. It is
/// emulated time, which stretches with the host's load: in the clean-clone
/// runs the default took 460 ms (two host hogs) and 375 ms
/// (builds beside), Nest 556 and 1004 ms (the test failed at 1 s).
pub const BATCH_EVERY_CPU_NS: u64 = 1_000_000_000;
/// See [`BATCH_EVERY_CPU_NS`].
pub const BATCH_EVERY_CPU_FACTOR: u64 = 3;
/// No CPU may stay idle while a thread of a batch waits for longer than
/// this: two 4 ms ticks (the placement criterion's bound), plus one for the emulated
/// machine, where a kicked idle vCPU runs only when the single emulation
/// thread gets to it: on a busy host a trace showed a task sent to an idle
/// vCPU at 5733.0 ms and running there at 5742.5 ms. Measured for Nest
/// (clean-clone runs): 0 in most runs, 8.2 ms once (48-thread
/// overload, CI), 11.1 ms once on a host running two other guests; the
/// default scheduler in the same boots up to 26.5 ms, and 34 ms before
/// (threads queued on one NUMA node while CPUs of the other idle).
pub const MAX_IDLE_WHILE_WAITING_NS: u64 = 12_000_000;

/// Everything wrong with a batch of as many threads as CPUs (`run`),
/// given the default scheduler's figures of the same batch.
///
/// The batch's completion time is printed, not judged: it is wall-clock
/// time under emulation, where every vCPU shares one host thread and the
/// host's load changes during the boot. Measured Nest / default: 0.79-1.05
/// with the host idle, 1.115 and 1.56 with two CPU hogs on
/// the host, the work-conservation check passing in both
/// loaded runs (in the second: 2 idle periods of at most 6.3 ms beside a
/// waiting thread). What a scheduler can lose there, a CPU left idle while a thread
/// waits (threads serialised, a queue left unserved), is what the
/// work-conservation check counts, from events.
pub fn batch_problems(run: &BatchFigures, default: &BatchFigures) -> Vec<String> {
    let mut problems = Vec::new();
    let by_default = default
        .every_cpu_ns
        .map_or(0, |ns| BATCH_EVERY_CPU_FACTOR * ns);
    let limit = BATCH_EVERY_CPU_NS.max(by_default);
    match run.every_cpu_ns {
        Some(ns) if ns <= limit => {}
        Some(ns) => problems.push(format!(
            "every CPU ran a batch thread only after {} ms (limit {} ms: 1 s or \
             {BATCH_EVERY_CPU_FACTOR} x the default scheduler's)",
            ns / 1_000_000,
            limit / 1_000_000
        )),
        None => problems.push(format!(
            "only {} CPUs ever ran a batch thread",
            run.cpus_used
        )),
    }
    problems.extend(work_conservation_problems(run, default));
    problems
}

/// Everything wrong with the work conservation of a batch (`run`): a CPU
/// idle while one of its threads waited for longer than
/// [`MAX_IDLE_WHILE_WAITING_NS`] or than 1.5 times the default scheduler's
/// longest in the same boot (`default`), whichever is more: on a loaded
/// host an emulated vCPU wakes later under every scheduler, at random
/// (runs with two host hogs, Nest / default: 12.5 / 30.4 ms, 15.7 / 14.4
/// ms). A longer one, up to twice that limit, is accepted when such idle
/// periods add up to no more than under the default scheduler: a
/// scheduler that leaves CPUs idle beside waiting threads does so in
/// all, while the host's stops give one long period to either. Measured
/// in the 48-thread overload of 16 placement runs, Nest's sum never
/// reached the default's (0-40 ms against 10-147 ms); the two busy runs
/// whose longest failed had 2 periods, 15.7 ms at most and 22.0 ms in
/// all, against the default's 6, 8.9 and 34.5 ms, and 4, 23.1 and 40.0
/// ms against 20, 9.9 and 147.3 ms.
pub fn work_conservation_problems(run: &BatchFigures, default: &BatchFigures) -> Vec<String> {
    let limit = MAX_IDLE_WHILE_WAITING_NS.max(default.batch_task.longest_ns * 3 / 2);
    let (v, d) = (run.batch_task, default.batch_task);
    if v.longest_ns <= limit || (v.longest_ns <= 2 * limit && v.total_ns <= d.total_ns) {
        return Vec::new();
    }
    vec![format!(
        "a CPU stayed idle for {:.1} ms while a batch thread waited (limit {:.1} ms, or {:.1} ms if such periods add up to no more than the default scheduler's: {:.1} ms in all against {:.1} ms)",
        v.longest_ns as f64 / 1e6,
        limit as f64 / 1e6,
        2.0 * limit as f64 / 1e6,
        v.total_ns as f64 / 1e6,
        d.total_ns as f64 / 1e6
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use nest_trace::{Event, PrevState, Topology};

    const MS: u64 = 1_000_000;

    /// Command 1 starts nest-load 10, a sleep 11 and nest-load 12 on a
    /// 2-CPU machine. 12 creates threads 20 (CPU 1 from 11 ms, exits at
    /// 41) and 21 (CPU 0 from 30 ms; preempted at 50 by kworker 30, which
    /// was queued there since 40, back at 60; exits at 70). CPU 1 is idle
    /// from 41: a violation from 41 to 60 for any task, 50 to 60 for the
    /// batch's threads.
    fn trace() -> Trace {
        use EventKind::*;
        let ev = |ms: f64, cpu, kind| Event {
            ts_ns: (ms * MS as f64) as u64,
            cpu,
            kind,
        };
        let sw = |prev, prev_state, next| Switch {
            prev,
            prev_state,
            next,
        };
        let fork = |parent, child| NewTask {
            parent,
            child,
            comm: "x".into(),
        };
        let exec = |pid, comm: &str| Exec {
            pid,
            comm: comm.into(),
        };
        let wake = |pid, target_cpu| Wakeup {
            pid,
            target_cpu,
            waker: None,
        };
        let events = vec![
            ev(0.0, 0, sw(0, PrevState::Runnable, 5)),
            ev(0.0, 1, sw(9, PrevState::Blocked, 0)),
            ev(0.5, 0, fork(1, 10)),
            ev(1.0, 0, exec(10, "nest-load")),
            ev(2.0, 0, fork(1, 11)),
            ev(2.5, 0, exec(11, "sleep")),
            ev(3.0, 0, fork(1, 12)),
            ev(4.0, 0, exec(12, "nest-load")),
            ev(10.0, 0, fork(12, 20)),
            ev(10.0, 0, wake(20, 1)),
            ev(11.0, 1, sw(0, PrevState::Runnable, 20)),
            ev(12.0, 0, fork(12, 21)),
            ev(12.0, 0, wake(21, 0)),
            ev(30.0, 0, sw(5, PrevState::Blocked, 21)),
            ev(40.0, 0, wake(30, 0)),
            ev(41.0, 1, Exit { pid: 20 }),
            ev(41.0, 1, sw(20, PrevState::Dead, 0)),
            ev(50.0, 0, sw(21, PrevState::Runnable, 30)),
            ev(60.0, 0, sw(30, PrevState::Blocked, 21)),
            ev(70.0, 0, Exit { pid: 21 }),
            ev(70.0, 0, sw(21, PrevState::Dead, 0)),
            ev(80.0, 0, Exit { pid: 12 }),
        ];
        Trace {
            topology: Topology::regular(1, 2, 1),
            meta: vec![("command_pid".into(), "1".into())],
            events,
        }
    }

    #[test]
    fn the_nest_load_processes_of_the_command_are_found_in_order() {
        let loads = launched(&trace(), "nest-load");
        let pids: Vec<Pid> = loads.iter().map(|w| w.pid).collect();
        assert_eq!(pids, vec![10, 12]);
        assert_eq!(loads[1].children, vec![20, 21]);
        assert_eq!((loads[1].start_ns, loads[1].end_ns), (4 * MS, 80 * MS));
        let mut no_command = trace();
        no_command.meta.clear();
        assert!(launched(&no_command, "nest-load").is_empty());
    }

    #[test]
    fn a_batch_is_measured_from_its_first_thread_to_its_last_exit() {
        let t = trace();
        let tl = Timeline::build(&t);
        let f = BatchFigures::of(&t, &tl, &launched(&t, "nest-load")[1]);
        assert_eq!(
            (f.tasks, f.start_ns, f.completion_ns),
            (2, 10 * MS, 60 * MS)
        );
        assert_eq!((f.cpus_used, f.every_cpu_ns), (2, Some(20 * MS)));
        // The kworker counts for "any task", not for the batch's threads.
        assert_eq!(
            f.any_task,
            Violations {
                count: 1,
                longest_ns: 19 * MS,
                total_ns: 19 * MS
            }
        );
        assert_eq!(f.batch_task.longest_ns, 10 * MS);
        assert!(f.rows().iter().any(|(_, v)| v == "1/10.0/10.0"));
        // The first workload (no threads) never ran on both CPUs.
        let chain = BatchFigures::of(&t, &tl, &launched(&t, "nest-load")[0]);
        assert_eq!(chain.every_cpu_ns, None);
    }

    fn chain(cpus: f64, underload: f64) -> Figures {
        Figures {
            mean_workload_cpus_per_children: cpus,
            mean_underload: underload,
            ..Figures::default()
        }
    }

    #[test]
    fn a_dispersed_chain_fails_and_a_compact_one_passes() {
        let default = chain(2.5, 5.0);
        assert_eq!(
            chain_problems(&chain(5.0, 4.0), &default),
            Vec::<String>::new()
        );
        let spread = chain_problems(&chain(13.0, 13.0), &default);
        assert_eq!(spread.len(), 4, "{spread:?}");
        // Within the absolute limits, but far above the default scheduler.
        let above = chain_problems(&chain(7.5, 7.0), &default);
        assert_eq!(above.len(), 2, "{above:?}");
        assert!(above.iter().all(|p| p.contains("above the default")));
    }

    fn batch(every_cpu_ms: Option<u64>, completion_ms: u64, idle_ms: u64) -> BatchFigures {
        BatchFigures {
            tasks: 16,
            start_ns: 0,
            every_cpu_ns: every_cpu_ms.map(|ms| ms * MS),
            cpus_used: if every_cpu_ms.is_some() { 16 } else { 12 },
            completion_ns: completion_ms * MS,
            migrations: 0,
            steady_migrations: 0,
            steady_preemptions: 0,
            any_task: Violations::default(),
            batch_task: Violations {
                count: usize::from(idle_ms > 0),
                longest_ns: idle_ms * MS,
                total_ns: idle_ms * MS,
            },
        }
    }

    #[test]
    fn a_batch_must_use_every_cpu_soon_and_conserve_work() {
        let default = batch(Some(100), 400, 20);
        // Slower than the default scheduler but work-conserving: fine.
        let ok = batch(Some(40), 700, 12);
        assert_eq!(batch_problems(&ok, &default), Vec::<String>::new());
        let bad = batch_problems(&batch(Some(1500), 501, 35), &default);
        assert_eq!(bad.len(), 2, "{bad:?}");
        let never = batch_problems(&batch(None, 400, 0), &default);
        assert!(never[0].contains("only 12 CPUs"), "{never:?}");
        // On a slowed emulator: 1 s, or 3 x the default scheduler's.
        let slow_default = batch(Some(400), 700, 0);
        assert!(batch_problems(&batch(Some(1200), 1300, 0), &slow_default).is_empty());
        let late = batch_problems(&batch(Some(1201), 1300, 0), &slow_default);
        assert!(late[0].contains("limit 1200 ms"), "{late:?}");
        // The limit is 12 ms or 1.5 x the default scheduler's longest (20 ms).
        assert!(work_conservation_problems(&batch(Some(40), 400, 30), &default).is_empty());
        assert_eq!(
            work_conservation_problems(&batch(Some(40), 400, 31), &default).len(),
            1
        );
        assert_eq!(work_conservation_problems(&default, &ok).len(), 1);
        // Longer than the limit but less in all than the default
        // scheduler's (one busy run), up to twice
        // the limit.
        let busy = |longest_ms: u64, count: usize, total_ms: u64| BatchFigures {
            batch_task: Violations {
                count,
                longest_ns: longest_ms * MS,
                total_ns: total_ms * MS,
            },
            ..batch(Some(40), 400, 0)
        };
        let busy_default = busy(9, 6, 35);
        assert!(work_conservation_problems(&busy(16, 2, 22), &busy_default).is_empty());
        assert_eq!(
            work_conservation_problems(&busy(16, 3, 36), &busy_default).len(),
            1
        );
        assert_eq!(
            work_conservation_problems(&busy(28, 1, 28), &busy_default).len(),
            1
        );
    }
}
