//! Verdicts of scx_nest as a scheduler people can run: a
//! process tree's placement against the default scheduler's, CPU-time
//! shares by weight, migrations and work conservation of hogs, hackbench
//! throughput, wake-up latency, partial mode beside fair tasks, and a
//! migration-disabled stress. Each limit is next to its constant with why.
//! The guest scripts (`tests/vm/sched.sh`, `tests/vm/partial.sh`) only
//! report facts and traces.

use std::collections::{BTreeMap, BTreeSet};

use nest_trace::metrics::{TasksPlacement, percentile, tasks_placement};
use nest_trace::timeline::{Timeline, Wait};
use nest_trace::{Cpu, EventKind, Pid, Trace};

use crate::Report;
use crate::placement::BatchFigures;

/// The placement of the process tree rooted at `root` over `[from, to)`
/// in 100 ms intervals.
pub fn tree_placement(
    trace: &Trace,
    tl: &Timeline,
    root: Pid,
    from: u64,
    to: u64,
) -> TasksPlacement {
    tasks_placement(trace, tl, &trace.descendants(root), from, to, 100_000_000)
}

/// `(name, value)` rows of a [`TasksPlacement`], for printing side by side.
pub fn tree_rows(p: &TasksPlacement) -> Vec<(&'static str, String)> {
    vec![
        ("window (ms)", format!("{:.1}", p.window_ns as f64 / 1e6)),
        ("tasks", p.tasks.to_string()),
        ("distinct CPUs / 100 ms", format!("{:.2}", p.mean_cpus)),
        ("sockets / 100 ms", format!("{:.2}", p.mean_sockets)),
        ("physical cores / 100 ms", format!("{:.2}", p.mean_cores)),
        ("migrations", p.migrations.to_string()),
        (
            "cross-socket migrations",
            p.cross_socket_migrations.to_string(),
        ),
        ("CPUs used", p.cpus_used.to_string()),
        (
            "wake-ups on their CPU",
            format!("{} / {}", p.wakeups_on_prev_cpu, p.wakeups),
        ),
        (
            "exiting: wake-ups on their CPU",
            format!("{} / {}", p.exiting_wakeups_on_prev_cpu, p.exiting_wakeups),
        ),
        (
            "exiting, CPU free: wake-ups on it",
            format!(
                "{} / {}",
                p.exiting_wakeups_prev_free_on_prev_cpu, p.exiting_wakeups_prev_free
            ),
        ),
    ]
}

/// Nest may migrate at most this many times as often as the default
/// scheduler (the suite's criterion: "at most 2x the default's migrations").
pub const MAX_MIGRATIONS_FACTOR: u64 = 2;
/// Below this many migrations the default scheduler's count is taken as
/// this many, so that a default run with none does not demand none.
pub const MIGRATIONS_FLOOR: u64 = 1;

/// The most migrations allowed given the default scheduler's.
pub fn migrations_limit(default: u64) -> u64 {
    MAX_MIGRATIONS_FACTOR * default.max(MIGRATIONS_FLOOR)
}

// A process tree's placement under Nest against the default scheduler's
// (for a configure script and for the fork/wait chain): one
// check per function, each the problem found or None.

const EPS: f64 = 1e-9;

/// How many more distinct CPUs per 100 ms than the default scheduler a
/// tree may use: one more CPU in one interval of ten. Two means near the
/// floor (a forking parent and its child overlap, so a fork/wait chain
/// needs two CPUs per interval under any scheduler) differ by which few
/// intervals catch a third CPU; "no more than the default" with no slack
/// fails on a tie at 2.10 about half the time. A dispersing placement is
/// far above it (the spread control: 14 against 2).
pub const TREE_CPU_SLACK: f64 = 0.1;

/// Nest must use no more distinct CPUs per 100 ms than the default, up to
/// [`TREE_CPU_SLACK`].
pub fn tree_cpu_problem(nest: &TasksPlacement, default: &TasksPlacement) -> Option<String> {
    (nest.mean_cpus > default.mean_cpus + TREE_CPU_SLACK + EPS).then(|| {
        format!(
            "distinct CPUs per 100 ms: {:.2} > the default scheduler's {:.2}",
            nest.mean_cpus, default.mean_cpus
        )
    })
}

/// Nest must use fewer sockets per 100 ms than the default; equal is
/// accepted only when both are at most one socket (one cannot do better).
pub fn tree_socket_problem(nest: &TasksPlacement, default: &TasksPlacement) -> Option<String> {
    let one_socket = nest.mean_sockets <= 1.0 + EPS && default.mean_sockets <= 1.0 + EPS;
    (nest.mean_sockets >= default.mean_sockets - EPS && !one_socket).then(|| {
        format!(
            "sockets per 100 ms: {:.2}, not fewer than the default scheduler's {:.2}",
            nest.mean_sockets, default.mean_sockets
        )
    })
}

/// A process tree under Nest may migrate up to this share of its
/// placements (forks and wake-ups), if that is more than
/// [`MAX_MIGRATIONS_FACTOR`] times the default scheduler's migrations: a
/// ratio of counts near zero says nothing. The placement test's 500-child
/// fork/wait chain makes about 1000 placements; in ten runs
/// (six with two host hogs) the default scheduler moved it 0-5
/// times and Nest 0-5, while the spread control moved it at nearly every
/// fork (483-500), and Nest with the published 8 ms P_remove under a
/// starved emulator about once per two children (101 and 108 moves in
/// 200). A configure script's tree migrates hundreds of times under both
/// schedulers, where the ratio decides. Why not 1%: with two host
/// hogs, CI's clean-clone run of ce529f6 failed with Nest's 14 moves in
/// 980 placements (6 across sockets, 8 wake-ups off their CPU) against
/// the default's 5, while Nest kept 1.06 sockets and 2.15 CPUs per 100 ms
/// (default 2.00 and 2.36). 3% still fails both broken placements above
/// by a factor of eight or more.
pub const MAX_TREE_MIGRATION_SHARE: f64 = 0.03;

/// Nest may migrate at most [`MAX_MIGRATIONS_FACTOR`] times as often, or
/// [`MAX_TREE_MIGRATION_SHARE`] of its placements.
pub fn tree_migration_problem(nest: &TasksPlacement, default: &TasksPlacement) -> Option<String> {
    let placements = nest.tasks as u64 + nest.wakeups;
    let by_share = (placements as f64 * MAX_TREE_MIGRATION_SHARE) as u64;
    let limit = migrations_limit(default.migrations).max(by_share);
    (nest.migrations > limit).then(|| {
        format!(
            "migrations: {} > {limit} ({MAX_MIGRATIONS_FACTOR} x the default scheduler's {}, \
             or {:.0}% of {placements} placements)",
            nest.migrations,
            default.migrations,
            MAX_TREE_MIGRATION_SHARE * 100.0
        )
    })
}

/// Wake-ups of tasks that have exited (a task may sleep in `do_exit()`,
/// e.g. closing files on the guest's virtio-fs), while the CPU they slept
/// on ran nothing, that may run elsewhere than where the task slept: this
/// many, plus [`EXITING_WAKEUPS_OFF_PREV_SHARE`] of them. An exit is the
/// final switch: before 8c06f44 scx_nest took `PF_EXITING` for it,
/// demoted the CPU at the first sleep in `do_exit()`, and the next wake-up
/// went elsewhere: 13 of 18 and 16 of 20 such wake-ups (all counted then)
/// in two runs of the placement test's command (the default scheduler: 0
/// of 19; after the fix Nest 0 of 18). Wake-ups whose CPU was busy are
/// left out: with two host hogs, threads of the placement test's
/// overload, exiting while the CPUs ran other threads of it, rightly woke
/// elsewhere (the test then failed with 12 of 39 such wake-ups off their
/// CPU; `nest trace tree` on that trace: all 17 whose CPU ran nothing at
/// the wake-up ran on it).
pub const EXITING_WAKEUPS_OFF_PREV_FLOOR: u64 = 2;
pub const EXITING_WAKEUPS_OFF_PREV_SHARE: f64 = 0.25;

/// Everything wrong with where the exiting tasks of `run` woke up.
pub fn exiting_wakeup_problems(run: &TasksPlacement) -> Vec<String> {
    let woken = run.exiting_wakeups_prev_free;
    let off_prev = woken - run.exiting_wakeups_prev_free_on_prev_cpu;
    let limit =
        EXITING_WAKEUPS_OFF_PREV_FLOOR + (woken as f64 * EXITING_WAKEUPS_OFF_PREV_SHARE) as u64;
    if off_prev <= limit {
        return Vec::new();
    }
    vec![format!(
        "{off_prev} of {woken} wake-ups of exiting tasks whose CPU was free ran elsewhere \
         than where they slept (limit {limit})"
    )]
}

/// Under overload, Nest's hogs may migrate at most
/// [`MAX_MIGRATIONS_FACTOR`] times as often as the default scheduler's
/// while all of them are alive, or this share of their preemptions if
/// that is more: some boots' default hardly migrates at all (34 in five
/// seconds in one CI run), and a scheduler keeping its tasks local moves a
/// few of them whenever a kernel thread takes a CPU for a moment. Measured:
/// Nest 161 of 17142 preemptions, default 151 of 19974;
/// the one shared FIFO queue moved a task at nearly every preemption.
pub const MAX_STEADY_MIGRATION_SHARE: f64 = 0.02;

/// Under overload, the most migrations Nest's hogs may make per preemption
/// in the steady state whatever the default scheduler did: a regression
/// bound, not the criterion ([`overload_migration_problems`]).
/// Measured: 0.9%; 3.0%, 5.3% and 5.6% with
/// host hogs (236 of 7812, 183 of 3451, 269 of 4765), nearly all within an
/// LLC; the one shared FIFO queue before moved a task at nearly every
/// preemption (691 of 692 on the configure tree).
pub const MAX_STEADY_MIGRATION_SHARE_REGRESSION: f64 = 0.10;

/// `share` of the preemptions of Nest's overload batch in the steady state,
/// as a number of migrations; an error if there were none (no overload).
fn preemption_share(nest: &BatchFigures, share: f64) -> Result<u64, String> {
    if nest.steady_preemptions == 0 {
        return Err("no preemption while all the hogs were alive: no overload".into());
    }
    Ok((nest.steady_preemptions as f64 * share) as u64)
}

/// Everything wrong with the migrations of Nest's overload batch against
/// [`MAX_STEADY_MIGRATION_SHARE_REGRESSION`].
pub fn overload_migration_regression(nest: &BatchFigures) -> Vec<String> {
    let limit = match preemption_share(nest, MAX_STEADY_MIGRATION_SHARE_REGRESSION) {
        Ok(limit) => limit,
        Err(problem) => return vec![problem],
    };
    if nest.steady_migrations <= limit {
        return Vec::new();
    }
    vec![format!(
        "{} migrations in {} preemptions while all the hogs were alive, more than {limit} ({:.0}%)",
        nest.steady_migrations,
        nest.steady_preemptions,
        MAX_STEADY_MIGRATION_SHARE_REGRESSION * 100.0
    )]
}

/// Everything wrong with the migrations of Nest's overload batch (`nest`)
/// against the default scheduler's (`default`), in the steady state (see
/// [`BatchFigures::steady_migrations`]).
pub fn overload_migration_problems(nest: &BatchFigures, default: &BatchFigures) -> Vec<String> {
    let by_share = match preemption_share(nest, MAX_STEADY_MIGRATION_SHARE) {
        Ok(limit) => limit,
        Err(problem) => return vec![problem],
    };
    let limit = migrations_limit(default.steady_migrations).max(by_share);
    if nest.steady_migrations <= limit {
        return Vec::new();
    }
    vec![format!(
        "{} migrations while all the hogs were alive, more than {limit} \
         ({MAX_MIGRATIONS_FACTOR}x the default's {}, or {:.0}% of {} preemptions)",
        nest.steady_migrations,
        default.steady_migrations,
        MAX_STEADY_MIGRATION_SHARE * 100.0,
        nest.steady_preemptions
    )]
}

/// The largest share of one CPU that scx_nest's own process may use while
/// the machine is overloaded and nobody asks for its statistics: it has
/// nothing to do then but look for a signal or an ejection once a second.
/// Measured in the 2x4x2 guest with two host hogs, while the 32
/// hogs ran: 11.0 s in 17.7 s (62%) when its loop waited in crossbeam's
/// `recv_timeout()` (its spin of `pause` instructions hands the emulator to
/// the other vCPUs), 0.02 s in 11.0 s (0.2%) since.
pub const MAX_OWN_CPU_SHARE: f64 = 0.02;

/// What is wrong with scx_nest's own CPU time, `cpu_ms` over a phase of
/// `phase_ms` (see [`MAX_OWN_CPU_SHARE`]).
pub fn own_cpu_problem(cpu_ms: u64, phase_ms: u64) -> Option<String> {
    let limit = (phase_ms as f64 * MAX_OWN_CPU_SHARE) as u64;
    (cpu_ms > limit).then(|| {
        format!(
            "scx_nest's own process ran {cpu_ms} ms in {phase_ms} ms, more than {limit} ms \
             ({:.0}% of a CPU)",
            MAX_OWN_CPU_SHARE * 100.0
        )
    })
}

/// Weight of a nice 0 task (the kernel's `sched_prio_to_weight`).
pub const WEIGHT_NICE_0: f64 = 1024.0;
/// Weight of a nice 10 task.
pub const WEIGHT_NICE_10: f64 = 110.0;
/// The CPU-time ratio of two hogs sharing one CPU must be within
/// 15% of their weights' ratio (nice 0 vs 10: 9.31, so 7.91-10.71;
/// cpu.weight 400 vs 100: 4, so 3.4-4.6) ...
pub const WEIGHT_TOLERANCE: f64 = 0.15;
/// ... and within 10% of 1 for two equal hogs (0.9-1.1).
pub const EQUAL_TOLERANCE: f64 = 0.10;

/// CPU time (ns) of the six hogs of the weight phase, from facts
/// `{prefix}_ns_{nice0,nice10,same_a,same_b,cg100,cg400}`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Weights {
    pub nice0: u64,
    pub nice10: u64,
    pub same_a: u64,
    pub same_b: u64,
    pub cg100: u64,
    pub cg400: u64,
}

impl Weights {
    /// The figures of run `prefix`, or `None` if a fact is missing.
    pub fn of(report: &Report, prefix: &str) -> Option<Self> {
        let ns = |key: &str| {
            report
                .get(&format!("{prefix}_ns_{key}"))?
                .parse::<u64>()
                .ok()
        };
        Some(Self {
            nice0: ns("nice0")?,
            nice10: ns("nice10")?,
            same_a: ns("same_a")?,
            same_b: ns("same_b")?,
            cg100: ns("cg100")?,
            cg400: ns("cg400")?,
        })
    }

    pub fn nice_ratio(&self) -> f64 {
        ratio(self.nice0, self.nice10)
    }
    pub fn same_ratio(&self) -> f64 {
        ratio(self.same_a, self.same_b)
    }
    pub fn cgroup_ratio(&self) -> f64 {
        ratio(self.cg400, self.cg100)
    }

    pub fn rows(&self) -> Vec<(&'static str, String)> {
        let ms = |ns: u64| format!("{:.0}", ns as f64 / 1e6);
        vec![
            (
                "nice 0 / nice 10 CPU ms",
                format!("{} / {}", ms(self.nice0), ms(self.nice10)),
            ),
            (
                "  ratio (weights: 9.31)",
                format!("{:.2}", self.nice_ratio()),
            ),
            (
                "nice 0 / nice 0 CPU ms",
                format!("{} / {}", ms(self.same_a), ms(self.same_b)),
            ),
            ("  ratio (1)", format!("{:.2}", self.same_ratio())),
            (
                "cpu.weight 400 / 100 CPU ms",
                format!("{} / {}", ms(self.cg400), ms(self.cg100)),
            ),
            (
                "  ratio (weights: 4)",
                format!("{:.2}", self.cgroup_ratio()),
            ),
        ]
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        f64::INFINITY
    } else {
        a as f64 / b as f64
    }
}

/// Everything wrong with the CPU-time shares of the weight phase.
pub fn weight_problems(w: &Weights) -> Vec<String> {
    let mut problems = Vec::new();
    let mut within = |what: &str, got: f64, want: f64, tolerance: f64| {
        let deviation = (got / want - 1.0).abs();
        if deviation.is_nan() || deviation > tolerance {
            problems.push(format!(
                "{what}: CPU-time ratio {got:.2}, not within {:.0}% of {want:.2}",
                tolerance * 100.0
            ));
        }
    };
    within(
        "nice 0 vs nice 10",
        w.nice_ratio(),
        WEIGHT_NICE_0 / WEIGHT_NICE_10,
        WEIGHT_TOLERANCE,
    );
    within("nice 0 vs nice 0", w.same_ratio(), 1.0, EQUAL_TOLERANCE);
    within(
        "cpu.weight 400 vs 100",
        w.cgroup_ratio(),
        4.0,
        WEIGHT_TOLERANCE,
    );
    problems
}

/// Hackbench's throughput under Nest must be at least this share
/// of the default scheduler's ("within 10%"): Nest's median time at most
/// the default's divided by it.
pub const HACKBENCH_MIN_THROUGHPUT: f64 = 0.90;

/// The median of the times hackbench reported under run `prefix` (facts
/// `{prefix}_hackbench_s`), with a problem if a run failed or none ran.
pub fn hackbench_median(report: &Report, prefix: &str) -> Result<f64, String> {
    let exit_key = format!("{prefix}_hackbench_exit");
    let time_key = format!("{prefix}_hackbench_s");
    let exits: Vec<&str> = report.all(&exit_key).collect();
    if exits.is_empty() || exits.iter().any(|e| *e != "0") {
        return Err(format!("{prefix}: hackbench exit statuses {exits:?}"));
    }
    let mut times: Vec<f64> = report
        .all(&time_key)
        .filter_map(|t| t.parse().ok())
        .collect();
    if times.len() != exits.len() {
        return Err(format!(
            "{prefix}: hackbench reported {} times for {} runs",
            times.len(),
            exits.len()
        ));
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// Everything wrong with Nest's hackbench time against the default's.
pub fn hackbench_problems(nest_s: f64, default_s: f64) -> Vec<String> {
    let limit = default_s / HACKBENCH_MIN_THROUGHPUT;
    if nest_s <= limit {
        return Vec::new();
    }
    vec![format!(
        "hackbench: median {nest_s:.3} s > {limit:.3} s (throughput below {:.0}% of the default scheduler's {default_s:.3} s)",
        HACKBENCH_MIN_THROUGHPUT * 100.0
    )]
}

/// Wake-up latency p99 under Nest at most this factor of the
/// default scheduler's.
pub const MAX_WAKEUP_P99_FACTOR: f64 = 1.5;
/// Fewer measured wake-ups than this cannot give a p99.
pub const MIN_WAKEUPS: usize = 200;

/// Wake-ups of a process tree in a trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Latency {
    pub wakeups: usize,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

impl Latency {
    /// Percentiles of wake-up latencies (wakeup to switch-in, ns), given
    /// in any order.
    pub fn of_samples(mut lat: Vec<u64>) -> Self {
        lat.sort_unstable();
        Self {
            wakeups: lat.len(),
            p50_ns: percentile(&lat, 50),
            p99_ns: percentile(&lat, 99),
            max_ns: lat.last().copied().unwrap_or(0),
        }
    }

    pub fn rows(&self) -> Vec<(&'static str, String)> {
        let us = |ns: u64| format!("{:.0}", ns as f64 / 1e3);
        vec![
            ("wake-ups", self.wakeups.to_string()),
            ("p50 (us)", us(self.p50_ns)),
            ("p99 (us)", us(self.p99_ns)),
            ("max (us)", us(self.max_ns)),
        ]
    }
}

/// The wake-up latencies (ns) of the task of `pids` woken most often:
/// cyclictest's measuring thread, not its main thread, which wakes for
/// other reasons on any CPU.
pub fn busiest_wakeups(tl: &Timeline, pids: &BTreeSet<Pid>) -> Vec<u64> {
    let mut wakeups: BTreeMap<Pid, Vec<u64>> = BTreeMap::new();
    for &(pid, ns) in &tl.wakeup_latencies {
        if pids.contains(&pid) {
            wakeups.entry(pid).or_default().push(ns);
        }
    }
    wakeups
        .into_values()
        .max_by_key(Vec::len)
        .unwrap_or_default()
}

/// The first process that exec'd `comm` in `trace`, and its tree.
pub fn tree_of_comm(trace: &Trace, comm: &str) -> Option<BTreeSet<Pid>> {
    let pid = trace.events.iter().find_map(|e| match &e.kind {
        EventKind::Exec { pid, comm: c } if c == comm => Some(*pid),
        _ => None,
    })?;
    Some(trace.descendants(pid))
}

/// The round with the lowest p99 of `rounds`, or `None` if there are none.
pub fn best_round(rounds: &[Latency]) -> Option<Latency> {
    rounds.iter().min_by_key(|l| l.p99_ns).copied()
}

/// Everything wrong with Nest's wake-up latency against the default's,
/// given the rounds of each (at least [`MIN_WAKEUPS`] wake-ups in every
/// one). The p99 of each scheduler's best round is compared: a host that
/// stalls the emulator only ever adds latency, and its slow phases last
/// seconds, long enough to spoil two rounds of three of one scheduler and
/// none of the other's; a tail of the scheduler's own shows in every
/// round, its best included (see tests/sched.rs).
pub fn latency_problems(nest: &[Latency], default: &[Latency]) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, rounds) in [("nest", nest), ("default", default)] {
        if rounds.is_empty() {
            problems.push(format!("{name}: no cyclictest round measured"));
        }
        for (i, l) in rounds.iter().enumerate() {
            if l.wakeups < MIN_WAKEUPS {
                problems.push(format!(
                    "{name}, round {}: only {} wake-ups measured (at least {MIN_WAKEUPS})",
                    i + 1,
                    l.wakeups
                ));
            }
        }
    }
    let (Some(nest), Some(default)) = (best_round(nest), best_round(default)) else {
        return problems;
    };
    let limit = default.p99_ns as f64 * MAX_WAKEUP_P99_FACTOR;
    if nest.p99_ns as f64 > limit {
        problems.push(format!(
            "wake-up latency p99 of the best round {:.0} us > {MAX_WAKEUP_P99_FACTOR} x the default scheduler's {:.0} us",
            nest.p99_ns as f64 / 1e3,
            default.p99_ns as f64 / 1e3
        ));
    }
    problems
}

/// Everything wrong with the facts of a scx_nest run `prefix` that must
/// not have been ejected: enabled under our ops before and after (same
/// `enable_seq`), exit 0 on SIGINT, disabled afterwards.
pub fn no_ejection_problems(report: &Report, prefix: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let fact = |key: &str| {
        report
            .get(&format!("{prefix}_{key}"))
            .unwrap_or("nothing")
            .to_string()
    };
    let mut expect = |what: &str, ok: bool, got: String| {
        if !ok {
            problems.push(format!("{prefix}: {what} (got {got})"));
        }
    };
    expect(
        "enabled before the load",
        fact("state_before") == "enabled",
        fact("state_before"),
    );
    expect(
        "enabled after the load",
        fact("state_after") == "enabled",
        fact("state_after"),
    );
    expect(
        "scx_nest's ops attached",
        fact("ops").starts_with("nest"),
        fact("ops"),
    );
    let (before, after) = (fact("enable_seq_before"), fact("enable_seq_after"));
    expect(
        "never ejected nor re-enabled (enable_seq unchanged)",
        before == after && before.parse::<u64>().is_ok(),
        format!("{before} -> {after}"),
    );
    expect(
        "scx_nest exits 0 on SIGINT",
        fact("sched_exit") == "0",
        fact("sched_exit"),
    );
    expect(
        "disabled after scx_nest exits",
        fact("state_after_exit") == "disabled",
        fact("state_after_exit"),
    );
    problems
}

/// The count of sched_ext event `name` in `events`, the kernel's
/// `/sys/kernel/sched_ext/root/events` with its lines joined (`NAME COUNT
/// NAME COUNT ...`); None where the kernel does not count it.
pub fn sched_ext_event(events: &str, name: &str) -> Option<u64> {
    let words: Vec<&str> = events.split_whitespace().collect();
    words
        .chunks(2)
        .find(|pair| pair[0] == name)
        .and_then(|pair| pair.get(1)?.parse().ok())
}

/// What is wrong with sched_ext's event counters `events` (as
/// [`sched_ext_event`] reads them) of a scx_nest run: a migration-disabled
/// task the kernel put on a local queue without asking ops.enqueue()
/// (`SCX_EV_ENQ_SKIP_MIGRATION_DISABLED`), which scx_nest's
/// `SCX_OPS_ENQ_MIGRATION_DISABLED` rules out. Nothing to say where the
/// kernel does not count them.
pub fn event_problems(events: &str) -> Vec<String> {
    match sched_ext_event(events, "SCX_EV_ENQ_SKIP_MIGRATION_DISABLED") {
        Some(skipped) if skipped > 0 => vec![format!(
            "{skipped} migration-disabled tasks queued without ops.enqueue() \
             (SCX_EV_ENQ_SKIP_MIGRATION_DISABLED)"
        )],
        _ => Vec::new(),
    }
}

/// The longest a task may wait, runnable but not running, in the mixed
/// stress of `tests/vm/partial.sh`: a task left queued (a stall path)
/// waits until an unrelated event or the watchdog (30 s), far beyond this.
/// scx_nest's starvation guard runs a task that waited a second
/// (`NEST_STARVE_NS`) at its queue's next sweep, at most 100 ms later
/// (`NEST_STARVE_SWEEP_NS`), once the run in progress on the CPU ends: on
/// hardware, about 1.1 s. The emulated guest stretches that: a run lasts
/// up to 280 ms where the slice is 4 ms (its vCPU was not executing while
/// the guest's clock ran on), more on a loaded host, and scx_nest's
/// longest waits in the stress were 1.5 to 1.9 s with the host idle, 2.8 s
/// with another guest beside it. The default scheduler, which has no such
/// guard, let tasks wait 3.8, 6.9 and 7.6 s in three runs. A bound in
/// guest seconds is a bound on the emulation's speed too, hence the
/// margin, as for the SCHED_IDLE hog of the VM scheduler test.
pub const STRESS_LONGEST_WAIT_NS: u64 = 10_000_000_000;

/// The `n` longest waits of `tl`, longest first.
pub fn longest_waits(tl: &Timeline, n: usize) -> Vec<Wait> {
    let mut waits = tl.waits.clone();
    waits.sort_by_key(|w| std::cmp::Reverse(w.end - w.start));
    waits.truncate(n);
    waits
}

/// One line about wait `w` of `tl`: how long, which task, where, when.
pub fn describe_wait(tl: &Timeline, w: &Wait) -> String {
    format!(
        "{:.2} s: task {} ({}), until it ran on CPU {} at {:.2} s",
        (w.end - w.start) as f64 / 1e9,
        w.pid,
        tl.names.get(&w.pid).map_or("?", String::as_str),
        w.cpu,
        w.end as f64 / 1e9
    )
}

/// The waits of the mixed stress (replayed as `tl`) longer than
/// [`STRESS_LONGEST_WAIT_NS`], the five longest.
pub fn wait_problems(tl: &Timeline) -> Vec<String> {
    let mut over: Vec<&Wait> = tl
        .waits
        .iter()
        .filter(|w| w.end - w.start > STRESS_LONGEST_WAIT_NS)
        .collect();
    over.sort_by_key(|w| std::cmp::Reverse(w.end - w.start));
    over.iter()
        .take(5)
        .map(|w| {
            format!(
                "a task waited over {} s: {}",
                STRESS_LONGEST_WAIT_NS / 1_000_000_000,
                describe_wait(tl, w)
            )
        })
        .collect()
}

/// Placements (wake-ups) of tasks of a set onto a CPU that was running a
/// task outside the set while some CPU ran nothing (partial mode: a
/// SCHED_EXT task put behind a fair task although a CPU was idle).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BusyPlacements {
    /// Wake-ups of the set's tasks in the window.
    pub wakeups: usize,
    /// Those onto a CPU busy with another task while a CPU was idle.
    pub onto_busy: usize,
    /// Examples: (ts, pid, target CPU, the other task running there).
    pub examples: Vec<(u64, Pid, Cpu, Pid)>,
}

impl BusyPlacements {
    /// The placements of `pids` in `[from, to)` of `trace` (replayed as
    /// `tl`).
    pub fn of(trace: &Trace, tl: &Timeline, pids: &BTreeSet<Pid>, from: u64, to: u64) -> Self {
        let mut per_cpu = vec![Vec::new(); tl.nr_cpus];
        for r in &tl.runs {
            if let Some(v) = per_cpu.get_mut(r.cpu as usize) {
                v.push(*r);
            }
        }
        for v in &mut per_cpu {
            v.sort_by_key(|r| r.start);
        }
        // The task running on `cpu` at `ts`, if any.
        let running = |cpu: usize, ts: u64| -> Option<Pid> {
            let runs = per_cpu.get(cpu)?;
            let i = runs.partition_point(|r| r.start <= ts);
            runs[..i].last().filter(|r| r.end > ts).map(|r| r.pid)
        };
        let mut out = Self::default();
        for e in &trace.events {
            let EventKind::Wakeup {
                pid, target_cpu, ..
            } = e.kind
            else {
                continue;
            };
            if e.ts_ns < from || e.ts_ns >= to || !pids.contains(&pid) {
                continue;
            }
            out.wakeups += 1;
            let Some(other) = running(target_cpu as usize, e.ts_ns) else {
                continue;
            };
            if pids.contains(&other) {
                continue;
            }
            let idle_exists = (0..tl.nr_cpus).any(|c| running(c, e.ts_ns).is_none());
            if idle_exists {
                out.onto_busy += 1;
                if out.examples.len() < 5 {
                    out.examples.push((e.ts_ns, pid, target_cpu, other));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement(cpus: f64, sockets: f64, migrations: u64) -> TasksPlacement {
        TasksPlacement {
            mean_cpus: cpus,
            mean_sockets: sockets,
            migrations,
            ..TasksPlacement::default()
        }
    }

    #[test]
    fn a_migration_disabled_task_queued_without_ops_enqueue_is_a_problem() {
        let events = "SCX_EV_SELECT_CPU_FALLBACK 3 SCX_EV_ENQ_SKIP_EXITING 0 \
                      SCX_EV_ENQ_SKIP_MIGRATION_DISABLED 7 SCX_EV_BYPASS_DURATION 0";
        assert_eq!(
            sched_ext_event(events, "SCX_EV_SELECT_CPU_FALLBACK"),
            Some(3)
        );
        assert_eq!(sched_ext_event(events, "SCX_EV_NO_SUCH"), None);
        let problems = event_problems(events);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("7 migration-disabled"),
            "{problems:?}"
        );
        let fine = events.replace("DISABLED 7", "DISABLED 0");
        assert_eq!(event_problems(&fine), Vec::<String>::new());
        // A kernel without the counters (`none`, or an older list).
        assert_eq!(event_problems("none"), Vec::<String>::new());
        assert_eq!(
            event_problems("SCX_EV_SELECT_CPU_FALLBACK 3"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn scx_nest_itself_may_use_two_percent_of_a_cpu() {
        assert_eq!(own_cpu_problem(0, 5000), None);
        assert_eq!(own_cpu_problem(100, 5000), None);
        assert!(own_cpu_problem(110, 5000).is_some());
        assert!(own_cpu_problem(9400, 11000).is_some());
    }

    #[test]
    fn a_tree_must_use_no_more_cpus_fewer_sockets_and_few_migrations() {
        let default = placement(3.0, 1.6, 10);
        let good = placement(2.0, 1.1, 20);
        assert_eq!(tree_cpu_problem(&good, &default), None);
        assert_eq!(tree_socket_problem(&good, &default), None);
        assert_eq!(tree_migration_problem(&good, &default), None);
        // A tie near the floor, or one more CPU in one interval of ten.
        assert_eq!(
            tree_cpu_problem(&placement(2.1, 1.1, 2), &placement(2.0, 1.6, 1)),
            None
        );
        assert!(tree_cpu_problem(&placement(2.15, 1.1, 2), &placement(2.0, 1.6, 1)).is_some());
        let bad = placement(3.5, 1.6, 21);
        assert!(tree_cpu_problem(&bad, &default).is_some());
        assert!(tree_socket_problem(&bad, &default).is_some());
        assert!(tree_migration_problem(&bad, &default).is_some());
        // One socket against one socket cannot be fewer: accepted.
        let one = placement(1.0, 1.0, 0);
        assert_eq!(tree_socket_problem(&placement(1.0, 1.0, 2), &one), None);
        // A default without migrations allows two.
        assert_eq!(tree_migration_problem(&placement(1.0, 1.0, 2), &one), None);
        let three = placement(1.0, 1.0, 3);
        assert!(tree_migration_problem(&three, &one).is_some());
        assert_eq!(tree_cpu_problem(&three, &one), None);
        assert_eq!(tree_socket_problem(&three, &one), None);
    }

    #[test]
    fn a_tree_may_migrate_three_percent_of_its_placements_whatever_the_default() {
        let chain = |migrations| TasksPlacement {
            tasks: 501,
            wakeups: 499,
            ..placement(2.0, 1.0, migrations)
        };
        let default = chain(1);
        // 3% of 1000 placements: 30, more than twice the default's 1.
        assert_eq!(tree_migration_problem(&chain(30), &default), None);
        let problem = tree_migration_problem(&chain(31), &default).expect("31 > 30");
        assert!(problem.contains("3% of 1000 placements"), "{problem}");
        // Twice the default's, when that is more.
        assert_eq!(tree_migration_problem(&chain(80), &chain(40)), None);
        assert!(tree_migration_problem(&chain(81), &chain(40)).is_some());
    }

    fn steady(migrations: u64, preemptions: u64) -> BatchFigures {
        BatchFigures {
            steady_migrations: migrations,
            steady_preemptions: preemptions,
            ..BatchFigures::default()
        }
    }

    #[test]
    fn exiting_tasks_must_mostly_wake_where_they_slept() {
        let exiting = |wakeups, on_prev| TasksPlacement {
            exiting_wakeups_prev_free: wakeups,
            exiting_wakeups_prev_free_on_prev_cpu: on_prev,
            ..TasksPlacement::default()
        };
        // Measured: the fix 0 of 18 off; before it 13 of 18 and 16 of 20.
        assert!(exiting_wakeup_problems(&exiting(18, 18)).is_empty());
        assert_eq!(exiting_wakeup_problems(&exiting(18, 5)).len(), 1);
        assert_eq!(exiting_wakeup_problems(&exiting(20, 4)).len(), 1);
        // Two plus a quarter may move: 7 of 20.
        assert!(exiting_wakeup_problems(&exiting(20, 13)).is_empty());
        assert_eq!(exiting_wakeup_problems(&exiting(20, 12)).len(), 1);
        assert!(exiting_wakeup_problems(&exiting(0, 0)).is_empty());
    }

    #[test]
    fn overload_migrations_regress_past_a_tenth_of_preemptions() {
        assert!(overload_migration_regression(&steady(269, 4765)).is_empty());
        assert!(overload_migration_regression(&steady(476, 4765)).is_empty());
        assert_eq!(overload_migration_regression(&steady(477, 4765)).len(), 1);
        assert_eq!(overload_migration_regression(&steady(691, 692)).len(), 1);
        assert_eq!(overload_migration_regression(&steady(0, 0)).len(), 1);
    }

    #[test]
    fn overload_migrations_are_bounded_by_the_default_or_a_share_of_preemptions() {
        let default = steady(150, 20_000);
        assert!(overload_migration_problems(&steady(300, 17_000), &default).is_empty());
        assert_eq!(
            overload_migration_problems(&steady(400, 17_000), &default).len(),
            1
        );
        // A default that hardly migrates: 2% of Nest's preemptions.
        let still = steady(10, 20_000);
        assert!(overload_migration_problems(&steady(340, 17_000), &still).is_empty());
        assert_eq!(
            overload_migration_problems(&steady(341, 17_000), &still).len(),
            1
        );
        // One shared FIFO queue: a migration at most preemptions.
        assert_eq!(
            overload_migration_problems(&steady(7000, 17_000), &default).len(),
            1
        );
        // No overload at all is a failed experiment, not a pass.
        assert_eq!(
            overload_migration_problems(&steady(0, 0), &default).len(),
            1
        );
    }

    #[test]
    fn weights_are_judged_by_their_ratios() {
        let report = Report::parse(
            "nest_ns_nice0=930\nnest_ns_nice10=100\nnest_ns_same_a=105\nnest_ns_same_b=100\n\
             nest_ns_cg100=100\nnest_ns_cg400=420\n",
        );
        let w = Weights::of(&report, "nest").unwrap();
        assert!(weight_problems(&w).is_empty(), "{:?}", weight_problems(&w));
        assert!(Weights::of(&report, "default").is_none());
        let fifo = Weights {
            nice0: 500,
            nice10: 500,
            same_a: 500,
            same_b: 300,
            cg100: 1,
            cg400: 0,
        };
        assert_eq!(weight_problems(&fifo).len(), 3);
    }

    #[test]
    fn hackbench_uses_the_median_and_allows_ten_percent() {
        let report = Report::parse(
            "d_hackbench_exit=0\nd_hackbench_s=1.0\nd_hackbench_exit=0\nd_hackbench_s=9.0\n\
             d_hackbench_exit=0\nd_hackbench_s=1.2\nn_hackbench_exit=1\n",
        );
        assert_eq!(hackbench_median(&report, "d"), Ok(1.2));
        assert!(hackbench_median(&report, "n").is_err());
        assert!(hackbench_problems(1.3, 1.2).is_empty());
        assert_eq!(hackbench_problems(1.4, 1.2).len(), 1);
    }

    #[test]
    fn latency_is_the_busiest_waker_of_the_tree() {
        let tl = Timeline {
            wakeup_latencies: vec![(7, 900), (8, 10), (8, 30), (9, 5), (8, 20)],
            ..Timeline::default()
        };
        let tree: BTreeSet<Pid> = [7, 8].into();
        let mut lat = busiest_wakeups(&tl, &tree);
        lat.sort_unstable();
        assert_eq!(lat, [10, 20, 30]);
        let l = Latency::of_samples(lat);
        assert_eq!((l.wakeups, l.p50_ns, l.max_ns), (3, 20, 30));
    }

    #[test]
    fn latency_allows_half_again_the_default_p99_in_the_best_round() {
        let l = |p99_ns| Latency {
            wakeups: 1000,
            p50_ns: 1,
            p99_ns,
            max_ns: p99_ns,
        };
        let default = [l(100), l(300), l(90)];
        assert!(latency_problems(&[l(150), l(135), l(200)], &default).is_empty());
        assert_eq!(
            latency_problems(&[l(151), l(160), l(136)], &default).len(),
            1
        );
        // Slow phases of a busy host that spoil two rounds of one
        // scheduler do not decide (978d07f: Nest 370, 4366
        // and 3963 us against the default's 846, 583 and 1230; another:
        // Nest 6675, 759 and 364 us against 2302, 2123 and 1380); a tail
        // in every round does (two rounds each: 6196 and
        // 6300 us against 5247 and 603, here with a third of 3000).
        assert!(
            latency_problems(&[l(370), l(4366), l(3963)], &[l(846), l(583), l(1230)]).is_empty()
        );
        assert!(
            latency_problems(&[l(6675), l(759), l(364)], &[l(2302), l(2123), l(1380)]).is_empty()
        );
        let tail_default = [l(5247), l(603), l(2000)];
        assert_eq!(
            latency_problems(&[l(6196), l(6300), l(3000)], &tail_default).len(),
            1
        );
        let few = Latency {
            wakeups: 10,
            ..l(1)
        };
        assert_eq!(latency_problems(&[l(1), few, l(1)], &default).len(), 1);
        assert_eq!(latency_problems(&[], &default).len(), 1);
        assert_eq!(best_round(&[l(3), l(1), l(2)]), Some(l(1)));
    }

    #[test]
    fn an_ejection_is_seen_in_the_facts() {
        let good = "x_state_before=enabled\nx_state_after=enabled\nx_ops=nest_1\n\
                    x_enable_seq_before=1\nx_enable_seq_after=1\nx_sched_exit=0\n\
                    x_state_after_exit=disabled\n";
        assert!(no_ejection_problems(&Report::parse(good), "x").is_empty());
        let ejected = good.replace("x_enable_seq_after=1", "x_enable_seq_after=2");
        assert_eq!(no_ejection_problems(&Report::parse(&ejected), "x").len(), 1);
    }

    #[test]
    fn a_task_waiting_past_the_limit_in_the_stress_is_a_problem() {
        use nest_trace::{Event, PrevState, Topology};
        let s = 1_000_000_000;
        let ev = |ts_ns, prev, next| Event {
            ts_ns,
            cpu: 0,
            kind: EventKind::Switch {
                prev,
                prev_state: PrevState::Runnable,
                next,
            },
        };
        // Tasks 10 and 11 take turns on CPU 0: 10 waits 2 s, then 11 waits
        // `long`.
        let waited = |long| {
            let trace = Trace {
                topology: Topology::regular(1, 1, 1),
                meta: Vec::new(),
                events: vec![ev(0, 10, 11), ev(2 * s, 11, 10), ev(2 * s + long, 10, 11)],
            };
            wait_problems(&Timeline::build(&trace))
        };
        let limit = STRESS_LONGEST_WAIT_NS;
        assert_eq!(waited(s), Vec::<String>::new());
        assert_eq!(waited(limit), Vec::<String>::new());
        let problems = waited(limit + 1);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("task 11"), "{problems:?}");
    }

    #[test]
    fn a_wakeup_behind_another_task_while_a_cpu_idles_counts() {
        use nest_trace::{Event, PrevState, Topology};
        let ev = |ts_ns, cpu, kind| Event { ts_ns, cpu, kind };
        let sw = |prev, next| EventKind::Switch {
            prev,
            prev_state: PrevState::Blocked,
            next,
        };
        let wake = |pid, target_cpu| EventKind::Wakeup {
            pid,
            target_cpu,
            waker: None,
        };
        // CPU 0 runs fair task 50 throughout; CPU 1 runs the set's task 10
        // from 10 to 20, then idles. Task 11 (in the set) is woken onto
        // CPU 0 at 5 (CPU 1 idle: counts), at 15 (CPU 1 busy: no idle
        // CPU, does not count), onto CPU 1 at 25 (idle: fine), and task 10
        // wakes onto CPU 0 at 30 (counts).
        let trace = Trace {
            topology: Topology::regular(1, 2, 1),
            meta: Vec::new(),
            events: vec![
                ev(0, 0, sw(0, 50)),
                ev(5, 0, wake(11, 0)),
                ev(10, 1, sw(0, 10)),
                ev(15, 1, wake(11, 0)),
                ev(20, 1, sw(10, 0)),
                ev(25, 1, wake(11, 1)),
                ev(30, 1, wake(10, 0)),
                ev(40, 0, sw(50, 0)),
            ],
        };
        let tl = Timeline::build(&trace);
        let b = BusyPlacements::of(&trace, &tl, &BTreeSet::from([10, 11]), 0, 100);
        assert_eq!((b.wakeups, b.onto_busy), (4, 2), "{b:?}");
        assert_eq!(b.examples[0], (5, 11, 0, 50));
    }
}
