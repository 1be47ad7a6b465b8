//! Metrics over a [`Timeline`], each returning a [`Table`].
//!
//! Interval metrics cut the trace into intervals `[k*L, (k+1)*L)` of length
//! `L = interval_ns` (the last one ends at the end of the trace) and report
//! one row per interval. Times are nanoseconds.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::model::{Cpu, EventKind, Pid, PrevState, Trace};
use crate::table::{Cell, Table};
use crate::timeline::{Step, Timeline, step_spans, value_at};

/// Statistics of one interval; the rows of the interval tables.
#[derive(Clone, Debug, PartialEq)]
pub struct IntervalStats {
    pub start_ns: u64,
    pub end_ns: u64,
    /// CPUs that ran a task for some time in the interval.
    pub cpus_used: u32,
    /// Sockets of those CPUs.
    pub sockets_used: u32,
    /// Physical cores of those CPUs (SMT siblings count once): the active
    /// cores that a socket's turbo bins count.
    pub cores_used: u32,
    /// Total task running time in the interval divided by its length: the
    /// average number of tasks running at once.
    pub avg_concurrency: f64,
    /// Largest number of tasks running at once (instants where only the
    /// order of simultaneous events makes a difference do not count).
    pub max_concurrency: u32,
    /// `cpus_used - ceil(avg_concurrency)`.
    pub underload: u32,
}

/// Per-interval statistics; see [`IntervalStats`]. `interval_ns` of 0 is
/// taken as one interval over the whole trace.
pub fn interval_stats(tl: &Timeline, interval_ns: u64) -> Vec<IntervalStats> {
    interval_stats_between(tl, 0, tl.end_ns, interval_ns)
}

/// [`interval_stats`] of the window `[from, to)` only (e.g. while one
/// workload ran), cut into intervals `[from + k*L, from + (k+1)*L)`; the
/// last one ends at `to` (clamped to the end of the trace). `interval_ns`
/// of 0 is one interval over the window.
pub fn interval_stats_between(
    tl: &Timeline,
    from: u64,
    to: u64,
    interval_ns: u64,
) -> Vec<IntervalStats> {
    let end = to.min(tl.end_ns).max(from);
    let span = end - from;
    let len = if interval_ns == 0 {
        span.max(1)
    } else {
        interval_ns
    };
    let count = span.div_ceil(len).max(1) as usize;
    let mut busy = vec![BTreeMap::<Cpu, u64>::new(); count];
    for run in &tl.runs {
        let (start, stop) = (run.start.max(from), run.end.min(end));
        if start >= stop {
            continue;
        }
        let mut k = ((start - from) / len) as usize;
        while k < count && from + k as u64 * len < stop {
            let (a, b) = (from + k as u64 * len, from + (k as u64 + 1) * len);
            let overlap = stop.min(b).saturating_sub(start.max(a));
            if overlap > 0 {
                *busy[k].entry(run.cpu).or_default() += overlap;
            }
            k += 1;
        }
    }
    busy.iter()
        .enumerate()
        .map(|(k, cpus)| {
            let start = from + k as u64 * len;
            let stop = (from + (k as u64 + 1) * len).min(end).max(start + 1);
            one_interval(tl, start, stop, cpus)
        })
        .collect()
}

fn one_interval(tl: &Timeline, start: u64, end: u64, busy: &BTreeMap<Cpu, u64>) -> IntervalStats {
    let cpus_used = busy.len() as u32;
    let sockets: BTreeSet<u32> = busy.keys().map(|&c| tl.socket(c)).collect();
    let cores: BTreeSet<u32> = busy.keys().map(|&c| tl.core(c)).collect();
    let total: u64 = busy.values().sum();
    let avg = total as f64 / (end - start) as f64;
    let ceil = (avg - 1e-9).ceil().max(0.0) as u32;
    IntervalStats {
        start_ns: start,
        end_ns: end,
        cpus_used,
        sockets_used: sockets.len() as u32,
        cores_used: cores.len() as u32,
        avg_concurrency: avg,
        max_concurrency: max_in(&tl.running, start, end),
        underload: cpus_used.saturating_sub(ceil),
    }
}

/// Largest value of `steps` that holds for some time within `[start, end)`.
fn max_in(steps: &[Step], start: u64, end: u64) -> u32 {
    let first = value_at(steps, start).unwrap_or(0);
    steps
        .iter()
        .filter(|s| s.ts > start && s.ts < end)
        .map(|s| s.value)
        .fold(first, u32::max)
}

fn interval_table(tl: &Timeline, interval_ns: u64, name: &str, cols: &[&str]) -> Table {
    let mut columns = vec!["start_ns", "end_ns"];
    columns.extend_from_slice(cols);
    let mut t = Table::new(name, &columns);
    for s in interval_stats(tl, interval_ns) {
        let mut row: Vec<Cell> = vec![s.start_ns.into(), s.end_ns.into()];
        for c in cols {
            row.push(match *c {
                "cpus_used" => s.cpus_used.into(),
                "sockets_used" => s.sockets_used.into(),
                "cores_used" => s.cores_used.into(),
                "avg_concurrency" => s.avg_concurrency.into(),
                "max_concurrency" => s.max_concurrency.into(),
                _ => s.underload.into(),
            });
        }
        t.push(row);
    }
    t
}

/// Distinct CPUs, sockets and physical cores that ran a task in each
/// interval. Columns: `start_ns, end_ns, cpus_used, sockets_used,
/// cores_used`.
pub fn cpus_used(tl: &Timeline, interval_ns: u64) -> Table {
    let cols = ["cpus_used", "sockets_used", "cores_used"];
    interval_table(tl, interval_ns, "cpus_used", &cols)
}

/// Average and largest number of tasks running at once in each interval
/// (from switch events). Columns: `start_ns, end_ns, avg_concurrency,
/// max_concurrency`.
pub fn concurrency(tl: &Timeline, interval_ns: u64) -> Table {
    let cols = ["avg_concurrency", "max_concurrency"];
    interval_table(tl, interval_ns, "concurrency", &cols)
}

/// Underload per interval: the Nest paper's "number of distinct CPUs used
/// minus the number of tasks really running concurrently", made exact as
/// `cpus_used - ceil(avg_concurrency)`: the CPUs that ran a task in the
/// interval beyond the fewest CPUs that could have carried the same running
/// time. 0 when every CPU used was needed; lower is better. Columns:
/// `start_ns, end_ns, cpus_used, avg_concurrency, underload`.
pub fn underload(tl: &Timeline, interval_ns: u64) -> Table {
    let cols = ["cpus_used", "avg_concurrency", "underload"];
    interval_table(tl, interval_ns, "underload", &cols)
}

/// Work-conservation violations lasting at least `min_ns`: times when a CPU
/// is idle (runs nothing, has nothing queued) while another CPU runs a task
/// and has at least one more runnable task queued behind it. Task affinity
/// is not in the trace, so any CPU is assumed allowed. Shorter violations
/// are transients (a wakeup about to be served) and are dropped. Columns:
/// `start_ns, end_ns, duration_ns, idle_cpus, queued_tasks` (the largest
/// numbers of idle CPUs and of queued tasks during the violation).
pub fn work_conservation(tl: &Timeline, min_ns: u64) -> Table {
    let cols = [
        "start_ns",
        "end_ns",
        "duration_ns",
        "idle_cpus",
        "queued_tasks",
    ];
    let mut t = Table::new("work_conservation", &cols);
    for v in tl.violations.iter().filter(|v| v.end - v.start >= min_ns) {
        t.push(vec![
            v.start.into(),
            v.end.into(),
            (v.end - v.start).into(),
            v.idle_cpus.into(),
            v.queued_tasks.into(),
        ]);
    }
    t
}

/// Totals of [`work_conservation`]: one row with `violations, total_ns,
/// longest_ns, share` (share = total violating time / trace length).
pub fn work_conservation_summary(tl: &Timeline, min_ns: u64) -> Table {
    let durations: Vec<u64> = tl
        .violations
        .iter()
        .map(|v| v.end - v.start)
        .filter(|&d| d >= min_ns)
        .collect();
    let total: u64 = durations.iter().sum();
    let share = if tl.end_ns == 0 {
        0.0
    } else {
        total as f64 / tl.end_ns as f64
    };
    let cols = ["violations", "total_ns", "longest_ns", "share"];
    let mut t = Table::new("work_conservation_summary", &cols);
    let longest = durations.iter().copied().max().unwrap_or(0);
    t.push(vec![
        durations.len().into(),
        total.into(),
        longest.into(),
        share.into(),
    ]);
    t
}

/// SMT sharing: how long tasks ran on both threads of a core while another
/// core of the machine ran nothing at all, so that each of them got only
/// part of a core for no reason. One row: `paired_core_ns` (sum over cores
/// of the time two or more of its threads ran tasks),
/// `paired_while_idle_core_ns` (the same, counted only while some core was
/// entirely idle), `busy_ns` (total task running time) and
/// `needless_share` = the share of running time spent on such a needlessly
/// shared core (each paired core-ns holds two task-ns). CPUs missing from
/// the topology count as cores of their own.
pub fn smt_sharing(tl: &Timeline) -> Table {
    let core_of = |cpu: Cpu| tl.topology.place(cpu).map_or(u32::MAX - cpu, |p| p.core);
    let mut threads: BTreeMap<u32, u32> = BTreeMap::new();
    for cpu in 0..tl.nr_cpus as Cpu {
        *threads.entry(core_of(cpu)).or_default() += 1;
    }
    // +1/-1 at the start/end of every run; ends first at equal times.
    let mut edges: Vec<(u64, i32, u32)> = Vec::with_capacity(2 * tl.runs.len());
    for r in &tl.runs {
        edges.push((r.start, 1, core_of(r.cpu)));
        edges.push((r.end, -1, core_of(r.cpu)));
    }
    edges.sort_unstable();
    let mut running: BTreeMap<u32, u32> = BTreeMap::new();
    let (mut idle_cores, mut paired) = (threads.len() as u64, 0u64);
    let (mut paired_ns, mut wasted_ns, mut last) = (0u64, 0u64, 0u64);
    for (ts, delta, core) in edges {
        let dt = ts - last;
        paired_ns += paired * dt;
        if idle_cores > 0 {
            wasted_ns += paired * dt;
        }
        last = ts;
        let n = running.entry(core).or_default();
        let before = *n;
        *n = n.saturating_add_signed(delta);
        idle_cores = idle_cores + u64::from(*n == 0) - u64::from(before == 0);
        paired = paired + u64::from(*n >= 2) - u64::from(before >= 2);
    }
    let busy: u64 = tl.runs.iter().map(|r| r.end - r.start).sum();
    let share = if busy == 0 {
        0.0
    } else {
        2.0 * wasted_ns as f64 / busy as f64
    };
    let cols = [
        "paired_core_ns",
        "paired_while_idle_core_ns",
        "busy_ns",
        "needless_share",
    ];
    let mut t = Table::new("smt_sharing", &cols);
    t.push(vec![
        paired_ns.into(),
        wasted_ns.into(),
        busy.into(),
        share.into(),
    ]);
    t
}

/// Migrate events per task (the kernel's `sched_migrate_task`, which fires
/// for every change of a task's CPU, at wakeup placement or by load
/// balancing). Columns: `pid, comm, migrations`; tasks without migrations
/// are left out.
pub fn migrations(tl: &Timeline) -> Table {
    let mut t = Table::new("migrations", &["pid", "comm", "migrations"]);
    for (&pid, &n) in &tl.migrations {
        t.push(vec![pid.into(), tl.name(pid).into(), n.into()]);
    }
    t
}

/// Placement of a set of tasks (e.g. a process tree, see
/// [`Trace::descendants`]) over the window `[from, to)`, cut into intervals
/// as in [`interval_stats_between`]. Only the set's own tasks count: other
/// tasks of the machine are left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TasksPlacement {
    pub window_ns: u64,
    pub intervals: usize,
    /// Distinct CPUs that ran one of the tasks, per interval, averaged
    /// over the intervals weighted by their length in the window (the last
    /// one may be shorter; intervals where none ran count as 0).
    pub mean_cpus: f64,
    /// Distinct sockets of those CPUs, per interval, averaged likewise.
    pub mean_sockets: f64,
    /// Distinct physical cores of those CPUs (SMT siblings count once),
    /// per interval, averaged likewise.
    pub mean_cores: f64,
    /// `sched_migrate_task` events of the tasks within the window (at
    /// wakeup placement or by load balancing).
    pub migrations: u64,
    /// Those between CPUs of different sockets.
    pub cross_socket_migrations: u64,
    /// Nest's primary nest: its mean size over the window (time-weighted),
    /// from `NestChange` events; `None` without them. A recording of
    /// `scx_nest --trace-nests` counts only from its first full report
    /// ([`NESTS_COMPLETE_META`](crate::model::NESTS_COMPLETE_META)) on.
    pub mean_primary_cpus: Option<f64>,
    /// Distinct CPUs that ran one of the tasks in the window.
    pub cpus_used: usize,
    /// Tasks of the set that ran in the window.
    pub tasks: usize,
    /// Their total running time in the window.
    pub run_ns: u64,
    /// Where the tasks forked in the window by tasks of the set first ran.
    pub forks: ForkPlacement,
    /// Times one of the tasks ran again after sleeping, in the window...
    pub wakeups: u64,
    /// ...and, of those, times it ran on the CPU it had slept on.
    pub wakeups_on_prev_cpu: u64,
    /// Of the wake-ups, those of tasks that had exited already
    /// (`sched_process_exit`): a task may sleep in `do_exit()` after it,
    /// e.g. closing files on a network or FUSE file system...
    pub exiting_wakeups: u64,
    /// ...and, of those, times it ran on the CPU it had slept on.
    pub exiting_wakeups_on_prev_cpu: u64,
    /// Of the wake-ups of exited tasks, those whose CPU ran nothing when
    /// they were woken (it was free to take them back)...
    pub exiting_wakeups_prev_free: u64,
    /// ...and, of those, times it ran on the CPU it had slept on.
    pub exiting_wakeups_prev_free_on_prev_cpu: u64,
}

/// Where forked tasks first ran, relative to the CPU that forked them
/// (the parent's at that moment): each fork counts in the closest class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForkPlacement {
    pub same_cpu: u64,
    /// The other hardware thread of the parent's core.
    pub same_core: u64,
    /// Another core sharing the parent's last-level cache.
    pub same_llc: u64,
    /// Another last-level cache of the parent's socket.
    pub same_socket: u64,
    pub other_socket: u64,
}

impl ForkPlacement {
    pub fn total(&self) -> u64 {
        self.same_cpu + self.same_core + self.same_llc + self.same_socket + self.other_socket
    }

    fn count(&mut self, tl: &Timeline, forked_on: Cpu, first_ran_on: Cpu) {
        let (a, b) = (
            tl.topology.place(forked_on),
            tl.topology.place(first_ran_on),
        );
        // CPUs the topology does not know share nothing.
        let share = |level: fn(&nest_topology::CpuPlace) -> u32| {
            a.zip(b).is_some_and(|(a, b)| level(a) == level(b))
        };
        let class = if forked_on == first_ran_on {
            &mut self.same_cpu
        } else if share(|p| p.core) {
            &mut self.same_core
        } else if share(|p| p.llc) {
            &mut self.same_llc
        } else if share(|p| p.socket) {
            &mut self.same_socket
        } else {
            &mut self.other_socket
        };
        *class += 1;
    }
}

/// The [`TasksPlacement`] of `pids` in `trace` (replayed as `tl`).
pub fn tasks_placement(
    trace: &Trace,
    tl: &Timeline,
    pids: &BTreeSet<Pid>,
    from: u64,
    to: u64,
    interval_ns: u64,
) -> TasksPlacement {
    let end = to.min(tl.end_ns).max(from);
    let span = end - from;
    let len = if interval_ns == 0 {
        span.max(1)
    } else {
        interval_ns
    };
    let count = span.div_ceil(len).max(1) as usize;
    let mut per_interval = vec![BTreeSet::<Cpu>::new(); count];
    let mut cpus = BTreeSet::new();
    let mut tasks = BTreeSet::new();
    let mut run_ns = 0;
    for run in tl.runs.iter().filter(|r| pids.contains(&r.pid)) {
        let (start, stop) = (run.start.max(from), run.end.min(end));
        if start >= stop {
            continue;
        }
        cpus.insert(run.cpu);
        tasks.insert(run.pid);
        run_ns += stop - start;
        let first = ((start - from) / len) as usize;
        let last = (((stop - 1 - from) / len) as usize).min(count - 1);
        for set in &mut per_interval[first..=last] {
            set.insert(run.cpu);
        }
    }
    let (mut migrations, mut cross_socket_migrations) = (0, 0);
    let mut forks = ForkPlacement::default();
    // Forked children not yet seen running, with the CPU they were forked on.
    let mut unstarted = HashMap::new();
    // Tasks of the set asleep, with the CPU they went to sleep on.
    let mut asleep = HashMap::new();
    let (mut wakeups, mut wakeups_on_prev_cpu) = (0, 0);
    let mut exited = HashSet::new();
    let (mut exiting_wakeups, mut exiting_wakeups_on_prev_cpu) = (0, 0);
    // The task each CPU runs (0: idle), as far as the window has shown.
    let mut running = HashMap::new();
    // Exited tasks woken while the CPU they slept on ran nothing.
    let mut woken_prev_free = HashSet::new();
    let (mut exiting_wakeups_prev_free, mut exiting_prev_free_on_prev) = (0, 0);
    for e in &trace.events {
        if e.ts_ns < from || e.ts_ns >= end.max(from + 1) {
            continue;
        }
        match e.kind {
            EventKind::Migrate {
                pid,
                from: a,
                to: b,
            } if pids.contains(&pid) => {
                migrations += 1;
                if tl.socket(a) != tl.socket(b) {
                    cross_socket_migrations += 1;
                }
            }
            // Forks within the set: the root's own creation is not one.
            EventKind::NewTask { parent, child, .. }
                if pids.contains(&parent) && pids.contains(&child) =>
            {
                unstarted.insert(child, e.cpu);
            }
            EventKind::Wakeup { pid, .. }
                if exited.contains(&pid)
                    && asleep
                        .get(&pid)
                        .is_some_and(|cpu| running.get(cpu) == Some(&0)) =>
            {
                woken_prev_free.insert(pid);
            }
            EventKind::Switch {
                prev,
                prev_state,
                next,
            } => {
                running.insert(e.cpu, next);
                if prev_state == PrevState::Blocked && pids.contains(&prev) {
                    asleep.insert(prev, e.cpu);
                }
                if let Some(forked_on) = unstarted.remove(&next) {
                    forks.count(tl, forked_on, e.cpu);
                }
                if let Some(slept_on) = asleep.remove(&next) {
                    let on_prev = u64::from(slept_on == e.cpu);
                    wakeups += 1;
                    wakeups_on_prev_cpu += on_prev;
                    if exited.contains(&next) {
                        exiting_wakeups += 1;
                        exiting_wakeups_on_prev_cpu += on_prev;
                    }
                    if woken_prev_free.remove(&next) {
                        exiting_wakeups_prev_free += 1;
                        exiting_prev_free_on_prev += on_prev;
                    }
                }
            }
            EventKind::Exit { pid } if pids.contains(&pid) => {
                exited.insert(pid);
            }
            _ => {}
        }
    }
    // Each interval weighs its length in the window: the last one is cut
    // where the window ends, and a short run's last few milliseconds (one
    // thread finishing) would otherwise count as a whole interval.
    let weight = |i: usize| (span - i as u64 * len).min(len).max(1) as f64;
    let total: f64 = (0..count).map(weight).sum();
    let mean_distinct = |of: &dyn Fn(Cpu) -> u32| {
        per_interval
            .iter()
            .enumerate()
            .map(|(i, s)| {
                weight(i) * s.iter().map(|&c| of(c)).collect::<BTreeSet<_>>().len() as f64
            })
            .sum::<f64>()
            / total
    };
    TasksPlacement {
        window_ns: span,
        intervals: count,
        mean_cpus: mean_distinct(&|c| c),
        mean_sockets: mean_distinct(&|c| tl.socket(c)),
        mean_cores: mean_distinct(&|c| tl.core(c)),
        mean_primary_cpus: mean_primary_cpus(trace, tl, from, end),
        migrations,
        cross_socket_migrations,
        cpus_used: cpus.len(),
        tasks: tasks.len(),
        run_ns,
        forks,
        wakeups,
        wakeups_on_prev_cpu,
        exiting_wakeups,
        exiting_wakeups_on_prev_cpu,
        exiting_wakeups_prev_free,
        exiting_wakeups_prev_free_on_prev_cpu: exiting_prev_free_on_prev,
    }
}

/// The primary nest's mean size over `from..to`, from the first moment the
/// trace knows every CPU's nest; `None` when it has no nests, or knows them
/// only after `to`.
fn mean_primary_cpus(trace: &Trace, tl: &Timeline, from: u64, to: u64) -> Option<f64> {
    if tl.nest.iter().all(Vec::is_empty) {
        return None;
    }
    let from = from.max(trace.nests_complete_from_ns());
    if from >= to {
        return None;
    }
    let primary_ns: u64 = tl
        .nest
        .iter()
        .flat_map(|steps| step_spans(steps, from, to))
        .filter(|&(value, _)| value == 2)
        .map(|(_, ns)| ns)
        .sum();
    Some(primary_ns as f64 / (to - from) as f64)
}

/// The [`TasksPlacement`] of `root`'s process tree over `root`'s
/// lifetime: from its first exec (or the trace's start) to its exit (or
/// the trace's end).
pub fn tree_placement(trace: &Trace, root: Pid, interval_ns: u64) -> TasksPlacement {
    tree_placement_in(trace, &Timeline::build(trace), root, interval_ns)
}

/// [`tree_placement`] with the trace's timeline already built.
pub fn tree_placement_in(
    trace: &Trace,
    tl: &Timeline,
    root: Pid,
    interval_ns: u64,
) -> TasksPlacement {
    let mut from = None;
    let mut to = trace.end_ns();
    for e in &trace.events {
        match &e.kind {
            EventKind::Exec { pid, .. } if *pid == root => {
                from.get_or_insert(e.ts_ns);
            }
            EventKind::Exit { pid } if *pid == root => to = e.ts_ns,
            _ => {}
        }
    }
    tasks_placement(
        trace,
        tl,
        &trace.descendants(root),
        from.unwrap_or(0),
        to,
        interval_ns,
    )
}

/// Nearest-rank percentile of sorted values: the smallest value with at
/// least `p`% of the values at or below it.
pub fn percentile(sorted: &[u64], p: u32) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (u64::from(p) * sorted.len() as u64).div_ceil(100).max(1) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// Wake-up latency: from a task's wakeup (`sched_wakeup` or
/// `sched_wakeup_new`) to its switch-in, over all wakeups that were served
/// in the trace. One row: `count, p50_ns, p90_ns, p99_ns, max_ns`
/// (nearest-rank percentiles, see [`percentile`]).
pub fn wakeup_latency(tl: &Timeline) -> Table {
    let mut lat: Vec<u64> = tl.wakeup_latencies.iter().map(|(_, l)| *l).collect();
    lat.sort_unstable();
    let cols = ["count", "p50_ns", "p90_ns", "p99_ns", "max_ns"];
    let mut t = Table::new("wakeup_latency", &cols);
    t.push(vec![
        lat.len().into(),
        percentile(&lat, 50).into(),
        percentile(&lat, 90).into(),
        percentile(&lat, 99).into(),
        lat.last().copied().unwrap_or(0).into(),
    ]);
    t
}

/// One wake-up of an idle CPU by another: how long the CPU took to leave
/// idle, how many other CPUs were busy (not idle) when it was woken, and
/// how long it had been idle then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleCpuWakeup {
    pub busy_cpus: u32,
    pub idle_ns: u64,
    pub delay_ns: u64,
}

/// The wake-ups of idle CPUs in `trace`: from a wakeup recorded on one CPU
/// and aimed at another, idle, CPU to that CPU's idle exit. In a guest this
/// is mostly the host waking the vCPU's thread (docs/design/simulator.md, "Guest vCPU
/// wake-up"). A CPU counts as idle between its idle entry and exit, and
/// only once it has entered idle in the trace.
pub fn idle_cpu_wakeups(trace: &Trace) -> Vec<IdleCpuWakeup> {
    idle_cpu_wakeups_of_tasks(trace)
        .into_iter()
        .map(|(_, _, wakeup)| wakeup)
        .collect()
}

/// [`idle_cpu_wakeups`], each with the woken task and when its wakeup was
/// recorded.
pub fn idle_cpu_wakeups_of_tasks(trace: &Trace) -> Vec<(Pid, u64, IdleCpuWakeup)> {
    let n = trace.topology.nr_cpus();
    let mut idle = vec![None::<bool>; n];
    let mut idle_since = vec![0u64; n];
    // Per CPU: the wakeup aimed at it: the task, when, its other figures.
    let mut pending = vec![None::<(Pid, u64, IdleCpuWakeup)>; n];
    let mut out = Vec::new();
    for e in &trace.events {
        let cpu = e.cpu as usize;
        match &e.kind {
            EventKind::IdleEnter if cpu < n => {
                idle[cpu] = Some(true);
                idle_since[cpu] = e.ts_ns;
            }
            EventKind::IdleExit if cpu < n => {
                idle[cpu] = Some(false);
                if let Some((pid, at, wakeup)) = pending[cpu].take() {
                    let delay_ns = e.ts_ns.saturating_sub(at);
                    out.push((pid, at, IdleCpuWakeup { delay_ns, ..wakeup }));
                }
            }
            &EventKind::Wakeup {
                pid, target_cpu, ..
            } => {
                let target = target_cpu as usize;
                if target != cpu
                    && target < n
                    && idle[target] == Some(true)
                    && pending[target].is_none()
                {
                    let busy_cpus = idle.iter().filter(|&&i| i == Some(false)).count() as u32;
                    let idle_ns = e.ts_ns.saturating_sub(idle_since[target]);
                    let wakeup = IdleCpuWakeup {
                        busy_cpus,
                        idle_ns,
                        delay_ns: 0,
                    };
                    pending[target] = Some((pid, e.ts_ns, wakeup));
                }
            }
            _ => {}
        }
    }
    out
}

/// Per-task running time, waiting time (runnable but not running: after a
/// wakeup or a preemption), number of runs (switch-ins) and migrations.
/// Columns: `pid, comm, run_ns, wait_ns, runs, migrations`.
pub fn task_times(tl: &Timeline) -> Table {
    #[derive(Default)]
    struct Acc {
        run: u64,
        wait: u64,
        runs: u64,
    }
    let mut acc: BTreeMap<Pid, Acc> = BTreeMap::new();
    for r in &tl.runs {
        let a = acc.entry(r.pid).or_default();
        a.run += r.end - r.start;
        a.runs += 1;
    }
    for w in &tl.waits {
        acc.entry(w.pid).or_default().wait += w.end - w.start;
    }
    let cols = ["pid", "comm", "run_ns", "wait_ns", "runs", "migrations"];
    let mut t = Table::new("task_times", &cols);
    for (pid, a) in acc {
        let migr = tl.migrations.get(&pid).copied().unwrap_or(0);
        t.push(vec![
            pid.into(),
            tl.name(pid).into(),
            a.run.into(),
            a.wait.into(),
            a.runs.into(),
            migr.into(),
        ]);
    }
    t
}

/// Frequency bands, from ascending edges in kHz: edges `[e1, .., en]` give
/// bands `[0, e1)`, `[e1, e2)`, ..., `[en, inf)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FreqBands {
    pub edges_khz: Vec<u32>,
}

impl FreqBands {
    /// Bands from edges in kHz (sorted and deduplicated here).
    pub fn from_edges(mut edges_khz: Vec<u32>) -> Self {
        edges_khz.sort_unstable();
        edges_khz.dedup();
        Self { edges_khz }
    }

    /// The bands for a trace: the edges in the `freq_band_edges_khz` meta
    /// entry (comma-separated kHz), else one edge at `nominal_khz`
    /// (below nominal / nominal and above), else 0.5 GHz steps from 1 to
    /// 4 GHz.
    pub fn for_trace(trace: &Trace) -> Self {
        let parse =
            |s: &str| -> Vec<u32> { s.split(',').filter_map(|v| v.trim().parse().ok()).collect() };
        if let Some(edges) = trace.meta_get("freq_band_edges_khz").map(parse)
            && !edges.is_empty()
        {
            return Self::from_edges(edges);
        }
        if let Some(nominal) = trace.meta_get("nominal_khz").and_then(|v| v.parse().ok()) {
            return Self::from_edges(vec![nominal]);
        }
        Self::from_edges((2..=8).map(|i| i * 500_000).collect())
    }

    /// Number of bands (one more than edges).
    pub fn len(&self) -> usize {
        self.edges_khz.len() + 1
    }

    /// Never empty: there is always at least one band.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The band holding `khz`.
    pub fn band_of(&self, khz: u32) -> usize {
        self.edges_khz.partition_point(|&e| e <= khz)
    }

    /// Bounds `[lo, hi)` of band `i` in kHz (`hi` is `None` for the last).
    pub fn bounds(&self, i: usize) -> (u32, Option<u32>) {
        let lo = if i == 0 { 0 } else { self.edges_khz[i - 1] };
        (lo, self.edges_khz.get(i).copied())
    }

    /// A label such as `2.1-3.0 GHz`, `< 1.0 GHz` or `>= 3.5 GHz`.
    pub fn label(&self, i: usize) -> String {
        let ghz = |k: u32| format!("{:.1}", f64::from(k) / 1e6);
        match self.bounds(i) {
            (0, Some(hi)) => format!("< {} GHz", ghz(hi)),
            (lo, None) => format!(">= {} GHz", ghz(lo)),
            (lo, Some(hi)) => format!("{}-{} GHz", ghz(lo), ghz(hi)),
        }
    }
}

/// Frequency residency: the share of busy time (time a CPU runs a task)
/// spent in each frequency band, taking each CPU's frequency from its last
/// `Frequency` event. Busy time before a CPU's first frequency event is
/// counted in a final `unknown` row. Columns: `band, lo_khz, hi_khz,
/// busy_ns, share` (`hi_khz` is -1 for the open top band; shares are of all
/// busy time, unknown included, and sum to 1).
pub fn frequency_residency(tl: &Timeline, bands: &FreqBands) -> Table {
    let mut busy = vec![0u64; bands.len() + 1];
    for run in &tl.runs {
        let steps = &tl.freq[run.cpu as usize];
        let mut t = run.start;
        while t < run.end {
            let i = steps.partition_point(|s| s.ts <= t);
            let next = steps.get(i).map_or(run.end, |s| s.ts.min(run.end));
            let band = value_at(steps, t).map_or(bands.len(), |khz| bands.band_of(khz));
            busy[band] += next - t;
            t = next;
        }
    }
    let total: u64 = busy.iter().sum();
    let cols = ["band", "lo_khz", "hi_khz", "busy_ns", "share"];
    let mut table = Table::new("frequency_residency", &cols);
    for (i, &ns) in busy.iter().enumerate() {
        let (label, lo, hi) = if i < bands.len() {
            let (lo, hi) = bands.bounds(i);
            (bands.label(i), i64::from(lo), hi.map_or(-1, i64::from))
        } else {
            ("unknown".to_string(), -1, -1)
        };
        let share = if total == 0 {
            0.0
        } else {
            ns as f64 / total as f64
        };
        table.push(vec![
            label.into(),
            lo.into(),
            hi.into(),
            ns.into(),
            share.into(),
        ]);
    }
    table
}

/// Nest's own activity per CPU, from `NestChange` and `WarmSpin` events:
/// time in the primary and in the reserve nest, number of warm spins, their
/// total length and how many were interrupted by arriving work. Columns:
/// `cpu, primary_ns, reserve_ns, warm_spins, warm_spin_ns,
/// interrupted_spins`; CPUs without any of these events are left out.
pub fn nest_activity(tl: &Timeline) -> Table {
    let cols = [
        "cpu",
        "primary_ns",
        "reserve_ns",
        "warm_spins",
        "warm_spin_ns",
        "interrupted_spins",
    ];
    let mut t = Table::new("nest_activity", &cols);
    for cpu in 0..tl.nr_cpus {
        let mut time = [0u64; 3];
        let steps = &tl.nest[cpu];
        for (value, ns) in step_spans(steps, 0, tl.end_ns) {
            time[value.min(2) as usize] += ns;
        }
        let spins: Vec<_> = tl
            .warm_spins
            .iter()
            .filter(|w| w.0 as usize == cpu)
            .collect();
        if steps.is_empty() && spins.is_empty() {
            continue;
        }
        let spin_ns: u64 = spins.iter().map(|w| w.1).sum();
        let interrupted = spins.iter().filter(|w| w.2).count();
        t.push(vec![
            cpu.into(),
            time[2].into(),
            time[1].into(),
            spins.len().into(),
            spin_ns.into(),
            interrupted.into(),
        ]);
    }
    t
}

/// How Nest's policy decided the placements of the tasks for which
/// `counts` holds, from the trace's `Placement` events: placements per
/// step (`prev`, `primary`, `reserve`, ..., `no_idle`). Empty when the
/// trace has none.
pub fn placement_steps(trace: &Trace, counts: impl Fn(Pid) -> bool) -> BTreeMap<&str, u64> {
    let mut steps = BTreeMap::new();
    for e in &trace.events {
        if let EventKind::Placement { pid, how, .. } = &e.kind
            && counts(*pid)
        {
            *steps.entry(how.as_str()).or_insert(0) += 1;
        }
    }
    steps
}

/// [`placement_steps`] of every task, most frequent first. Columns: `step,
/// placements, share`.
pub fn placement_steps_table(trace: &Trace) -> Table {
    let steps = placement_steps(trace, |_| true);
    let total: u64 = steps.values().sum();
    let mut rows: Vec<(&str, u64)> = steps.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut t = Table::new("placement_steps", &["step", "placements", "share"]);
    for (step, n) in rows {
        t.push(vec![
            step.into(),
            n.into(),
            (n as f64 / total as f64).into(),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, Nest, Topology};

    const MS: u64 = 1_000_000;

    fn ev(ms: u64, cpu: Cpu, kind: EventKind) -> Event {
        Event {
            ts_ns: ms * MS,
            cpu,
            kind,
        }
    }

    fn sw(prev: Pid, next: Pid) -> EventKind {
        EventKind::Switch {
            prev,
            prev_state: PrevState::Blocked,
            next,
        }
    }

    /// A wakeup of `pid` onto `target_cpu`, its waker not said.
    fn wake(pid: Pid, target_cpu: Cpu) -> EventKind {
        EventKind::Wakeup {
            pid,
            target_cpu,
            waker: None,
        }
    }

    #[test]
    fn placement_steps_count_each_step_of_the_chosen_tasks() {
        let placed = |pid, how: &str| EventKind::Placement {
            pid,
            target_cpu: 1,
            how: how.to_string(),
        };
        let events = vec![
            ev(0, 0, placed(5, "prev")),
            ev(1, 0, wake(5, 1)),
            ev(2, 0, placed(5, "prev")),
            ev(3, 0, placed(6, "reserve")),
            ev(4, 0, placed(7, "primary")),
        ];
        let trace = Trace {
            topology: Topology::regular(1, 2, 1),
            meta: vec![],
            events,
        };
        let steps = placement_steps(&trace, |pid| pid != 7);
        assert_eq!(
            steps.into_iter().collect::<Vec<_>>(),
            [("prev", 2), ("reserve", 1)]
        );
        let table = placement_steps_table(&trace);
        let rows: Vec<String> = (0..table.rows.len())
            .map(|r| {
                let cell = |col| table.get(r, col).unwrap().to_string();
                format!("{} {}", cell("step"), cell("placements"))
            })
            .collect();
        assert_eq!(rows, ["prev 2", "primary 1", "reserve 1"]);
        assert_eq!(table.get(0, "share"), Some(&Cell::Float(0.5)));
    }

    #[test]
    fn idle_cpu_wakeups_time_a_woken_cpu_until_it_leaves_idle() {
        let events = vec![
            ev(0, 1, EventKind::IdleEnter),
            ev(0, 2, EventKind::IdleEnter),
            ev(0, 0, EventKind::IdleEnter),
            ev(1, 0, EventKind::IdleExit),
            // CPU 0 runs; it wakes a task onto idle CPU 1, twice: the
            // second finds it already woken.
            ev(2, 0, wake(5, 1)),
            ev(3, 0, wake(6, 1)),
            ev(5, 1, EventKind::IdleExit),
            // A wakeup onto its own CPU, or onto a CPU the trace never
            // saw idle (CPU 3), is not one.
            ev(6, 1, wake(7, 1)),
            ev(6, 1, wake(8, 3)),
            // CPUs 0 and 1 run when CPU 2 is woken.
            ev(7, 1, wake(9, 2)),
            ev(8, 2, EventKind::IdleExit),
        ];
        let trace = Trace {
            topology: Topology::regular(1, 2, 2),
            meta: vec![],
            events,
        };
        let by_task: Vec<(Pid, u64)> = idle_cpu_wakeups_of_tasks(&trace)
            .iter()
            .map(|&(pid, at, _)| (pid, at))
            .collect();
        assert_eq!(
            by_task,
            [(5, 2 * MS), (9, 7 * MS)],
            "the woken task and when"
        );
        let got = idle_cpu_wakeups(&trace);
        // Woken after 2 and 7 ms of idleness.
        let want = [(1, 2 * MS, 3 * MS), (2, 7 * MS, MS)].map(|(busy_cpus, idle_ns, delay_ns)| {
            IdleCpuWakeup {
                busy_cpus,
                idle_ns,
                delay_ns,
            }
        });
        assert_eq!(got, want);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=10).collect();
        assert_eq!(percentile(&v, 50), 5);
        assert_eq!(percentile(&v, 90), 9);
        assert_eq!(percentile(&v, 99), 10);
        assert_eq!(percentile(&[7], 1), 7);
        assert_eq!(percentile(&[], 50), 0);
    }

    #[test]
    fn tasks_placement_counts_only_the_set_per_interval() {
        // 2 sockets x 2 CPUs (CPUs 0, 1 on socket 0; 2, 3 on socket 1).
        // Task 10 runs on CPU 0 for 0-5 ms, migrates to CPU 2 (another
        // socket), runs there 12-15 ms; task 11 runs on CPU 1 2-4 ms, moves
        // to CPU 0 (same socket); task 99 (not in the set) runs on CPU 3.
        let events = vec![
            ev(0, 0, sw(0, 10)),
            ev(1, 3, sw(0, 99)),
            ev(2, 1, sw(0, 11)),
            ev(4, 1, sw(11, 0)),
            ev(5, 0, sw(10, 0)),
            ev(
                6,
                0,
                EventKind::Migrate {
                    pid: 10,
                    from: 0,
                    to: 2,
                },
            ),
            ev(
                7,
                0,
                EventKind::Migrate {
                    pid: 11,
                    from: 1,
                    to: 0,
                },
            ),
            ev(
                8,
                0,
                EventKind::Migrate {
                    pid: 99,
                    from: 3,
                    to: 1,
                },
            ),
            ev(12, 2, sw(0, 10)),
            ev(15, 2, sw(10, 0)),
            ev(20, 3, sw(99, 0)),
        ];
        let trace = Trace {
            topology: Topology::regular(2, 2, 1),
            meta: Vec::new(),
            events,
        };
        let tl = Timeline::build(&trace);
        let pids = BTreeSet::from([10, 11]);
        let p = tasks_placement(&trace, &tl, &pids, 0, 20 * MS, 10 * MS);
        assert_eq!((p.intervals, p.window_ns), (2, 20 * MS));
        // Interval 0: CPUs 0 and 1 (socket 0); interval 1: CPU 2 (socket 1).
        assert!((p.mean_cpus - 1.5).abs() < 1e-9, "{p:?}");
        assert!((p.mean_sockets - 1.0).abs() < 1e-9, "{p:?}");
        // One thread per core: as many cores as CPUs.
        assert!((p.mean_cores - 1.5).abs() < 1e-9, "{p:?}");
        assert_eq!((p.migrations, p.cross_socket_migrations), (2, 1));
        assert_eq!((p.cpus_used, p.tasks, p.run_ns), (3, 2, 10 * MS));
        // A window that leaves out the second interval and the moves.
        let early = tasks_placement(&trace, &tl, &pids, 0, 5 * MS, 0);
        assert_eq!((early.intervals, early.migrations), (1, 0));
        assert!((early.mean_cpus - 2.0).abs() < 1e-9, "{early:?}");
        // A window ending 3 ms into the second interval: that interval
        // (CPU 2) weighs 3 ms against the first's 10 ms, not as much.
        let cut = tasks_placement(&trace, &tl, &pids, 0, 13 * MS, 10 * MS);
        assert_eq!(cut.intervals, 2);
        let weighted = (2.0 * 10.0 + 1.0 * 3.0) / 13.0;
        assert!((cut.mean_cpus - weighted).abs() < 1e-9, "{cut:?}");
    }

    #[test]
    fn the_primary_nest_size_is_time_weighted_from_when_the_nests_are_known() {
        let nest = |nest| EventKind::NestChange { nest };
        let events = vec![
            ev(0, 0, nest(Nest::Primary)),
            ev(0, 0, sw(0, 10)),
            ev(5, 1, nest(Nest::Primary)),
            ev(6, 2, nest(Nest::Reserve)),
            ev(10, 0, nest(Nest::None)),
            ev(20, 0, sw(10, 0)),
        ];
        let mut trace = Trace {
            topology: Topology::regular(1, 4, 1),
            meta: Vec::new(),
            events,
        };
        let tl = Timeline::build(&trace);
        let pids = BTreeSet::from([10]);
        let primary = |trace: &Trace, from, to| {
            tasks_placement(trace, &tl, &pids, from * MS, to * MS, 10 * MS).mean_primary_cpus
        };
        // CPU 0 for 10 ms, CPU 1 for 15 ms, over 20 ms; the reserve does
        // not count.
        assert_eq!(primary(&trace, 0, 20), Some(25.0 / 20.0));
        assert_eq!(primary(&trace, 5, 10), Some(10.0 / 5.0));
        // Known in full from 4 ms on: CPU 0 for 6 ms, CPU 1 for 15 ms.
        trace.meta_set(crate::model::NESTS_COMPLETE_META, (4 * MS).to_string());
        assert_eq!(primary(&trace, 0, 20), Some(21.0 / 16.0));
        assert_eq!(primary(&trace, 0, 3), None);
        // No nests at all.
        trace
            .events
            .retain(|e| !matches!(e.kind, EventKind::NestChange { .. }));
        let tl = Timeline::build(&trace);
        let p = tasks_placement(&trace, &tl, &pids, 0, 20 * MS, 10 * MS);
        assert_eq!(p.mean_primary_cpus, None);
    }

    #[test]
    fn forks_are_classed_by_where_the_child_first_ran() {
        // 2 sockets x 2 cores x 2 threads: CPU 0's sibling is 4, CPU 2 is
        // on socket 0's other core, CPU 1 on socket 1.
        let fork = |child| EventKind::NewTask {
            parent: 10,
            child,
            comm: "c".into(),
        };
        let events = vec![
            ev(0, 0, sw(0, 10)),
            ev(1, 0, fork(11)),
            ev(2, 0, fork(12)),
            ev(3, 0, fork(13)),
            ev(4, 0, fork(14)),
            ev(5, 4, sw(0, 11)),  // same core
            ev(6, 2, sw(0, 12)),  // same LLC
            ev(7, 1, sw(0, 13)),  // other socket
            ev(8, 0, sw(10, 14)), // same CPU; 10 sleeps on CPU 0
            ev(9, 1, sw(13, 14)), // a later run does not count
            ev(9, 0, sw(14, 10)), // 10 wakes where it slept
            ev(9, 0, sw(10, 11)), // 10 sleeps on CPU 0 again
            ev(9, 2, sw(12, 10)), // and wakes on CPU 2
            ev(9, 2, EventKind::Exit { pid: 10 }),
            ev(9, 2, sw(10, 0)),  // 10, exiting, sleeps on CPU 2
            ev(9, 3, sw(0, 10)),  // and wakes on CPU 3
            ev(9, 3, sw(10, 0)),  // sleeps there
            ev(9, 3, sw(0, 10)),  // and wakes there
            ev(10, 3, sw(0, 99)), // the trace's end
        ];
        let trace = Trace {
            topology: Topology::regular(2, 2, 2),
            meta: Vec::new(),
            events,
        };
        let tl = Timeline::build(&trace);
        let pids = BTreeSet::from([10, 11, 12, 13, 14]);
        let p = tasks_placement(&trace, &tl, &pids, 0, 10 * MS, 0);
        let expected = ForkPlacement {
            same_cpu: 1,
            same_core: 1,
            same_llc: 1,
            same_socket: 0,
            other_socket: 1,
        };
        assert_eq!(p.forks, expected);
        assert_eq!(p.forks.total(), 4);
        assert_eq!((p.wakeups, p.wakeups_on_prev_cpu), (4, 2));
        assert_eq!((p.exiting_wakeups, p.exiting_wakeups_on_prev_cpu), (2, 1));
    }

    #[test]
    fn exiting_wakeups_count_apart_when_their_cpu_was_free() {
        let events = vec![
            ev(0, 0, sw(0, 10)),
            ev(1, 0, EventKind::Exit { pid: 10 }),
            ev(2, 0, sw(10, 0)),   // 10, exiting, sleeps on CPU 0
            ev(3, 2, wake(10, 1)), // while CPU 0 runs nothing
            ev(4, 1, sw(0, 10)),   // and runs on CPU 1
            ev(5, 1, sw(10, 0)),   // sleeps there
            ev(6, 1, sw(0, 99)),   // CPU 1 runs another task
            ev(7, 2, wake(10, 2)), // 10 is woken while CPU 1 is busy
            ev(8, 2, sw(0, 10)),   // and runs on CPU 2
            ev(9, 2, sw(10, 0)),
        ];
        let trace = Trace {
            topology: Topology::regular(2, 2, 1),
            meta: Vec::new(),
            events,
        };
        let tl = Timeline::build(&trace);
        let p = tasks_placement(&trace, &tl, &BTreeSet::from([10]), 0, 10 * MS, 0);
        assert_eq!((p.exiting_wakeups, p.exiting_wakeups_on_prev_cpu), (2, 0));
        assert_eq!(
            (
                p.exiting_wakeups_prev_free,
                p.exiting_wakeups_prev_free_on_prev_cpu
            ),
            (1, 0)
        );
    }

    #[test]
    fn bands_from_edges() {
        let b = FreqBands::from_edges(vec![3_000_000, 2_100_000]);
        assert_eq!(b.len(), 3);
        assert_eq!(b.band_of(1_200_000), 0);
        assert_eq!(b.band_of(2_100_000), 1);
        assert_eq!(b.band_of(3_700_000), 2);
        assert_eq!(b.label(0), "< 2.1 GHz");
        assert_eq!(b.label(1), "2.1-3.0 GHz");
        assert_eq!(b.label(2), ">= 3.0 GHz");
    }
}
