//! Every metric on a small hand-built schedule with known answers.
//!
//! Two CPUs on two sockets (`Topology::regular(2, 1, 1)`), times in ns:
//!
//! ```text
//! t=0   cpu0: idle -> task 1          cpu1: task 9 blocks -> idle
//!       cpu0 runs at 2.0 GHz
//! t=10  task 2 woken onto cpu0, queued behind task 1 (cpu1 idle: violation)
//! t=30  cpu0: task 1 preempted (R) -> task 2; task 1 queued on cpu0
//! t=40  task 1 migrated cpu0 -> cpu1 (violation ends: 10..40)
//! t=45  cpu1: idle -> task 1;  cpu0: task 2 blocks -> idle
//! t=60  cpu0 now at 3.0 GHz
//! t=70  task 2 woken onto cpu0 (idle: no violation)
//! t=72  cpu0: idle -> task 2 (latency 2)
//! t=80  cpu1: task 1 exits -> idle
//! t=90  cpu0: task 2 blocks -> idle
//! ```

mod common;

use common::scenario;
use nest_trace::metrics::{self, FreqBands};
use nest_trace::table::{Cell, Table};
use nest_trace::timeline::Timeline;
use nest_trace::{Event, EventKind, PrevState, Topology, Trace};

fn int(t: &Table, row: usize, col: &str) -> i64 {
    t.get(row, col)
        .and_then(Cell::as_i64)
        .unwrap_or_else(|| panic!("{col}"))
}

fn float(t: &Table, row: usize, col: &str) -> f64 {
    t.get(row, col).and_then(Cell::as_f64).unwrap()
}

/// A switch on `cpu` at `ts_ns` from `prev` (which blocks) to `next`.
fn sw(ts_ns: u64, cpu: u32, prev: u32, next: u32) -> Event {
    Event {
        ts_ns,
        cpu,
        kind: EventKind::Switch {
            prev,
            prev_state: PrevState::Blocked,
            next,
        },
    }
}

#[test]
fn cpus_and_sockets_used_per_interval() {
    let tl = Timeline::build(&scenario());
    let t = metrics::cpus_used(&tl, 30);
    assert_eq!(t.rows.len(), 3);
    assert_eq!(t.numbers("cpus_used"), vec![1.0, 2.0, 2.0]);
    assert_eq!(t.numbers("sockets_used"), vec![1.0, 2.0, 2.0]);
    // One thread per core: every CPU is a core of its own.
    assert_eq!(t.numbers("cores_used"), vec![1.0, 2.0, 2.0]);
    assert_eq!(t.numbers("end_ns"), vec![30.0, 60.0, 90.0]);
}

#[test]
fn smt_siblings_count_as_one_physical_core() {
    // One socket, two cores of two threads (Linux numbering: CPUs 0 and 2
    // share core 0). [0,10): CPUs 0 and 2 run; [10,20): CPUs 0 and 1.
    let trace = Trace {
        topology: Topology::regular(1, 2, 2),
        meta: vec![],
        events: vec![
            sw(0, 0, 0, 1),
            sw(0, 2, 0, 2),
            sw(10, 2, 2, 0),
            sw(10, 1, 0, 3),
            sw(20, 0, 1, 0),
            sw(20, 1, 3, 0),
        ],
    };
    let t = metrics::cpus_used(&Timeline::build(&trace), 10);
    assert_eq!(t.numbers("cpus_used"), vec![2.0, 2.0]);
    assert_eq!(t.numbers("cores_used"), vec![1.0, 2.0]);
}

#[test]
fn interval_statistics_of_a_window() {
    let tl = Timeline::build(&scenario());
    // [20,50): cpu0 20..45, cpu1 45..50; [50,80): cpu0 72..80, cpu1 50..80.
    let s = metrics::interval_stats_between(&tl, 20, 80, 30);
    let got: Vec<_> = s
        .iter()
        .map(|i| {
            (
                i.start_ns,
                i.end_ns,
                i.cpus_used,
                i.sockets_used,
                i.underload,
            )
        })
        .collect();
    assert_eq!(got, vec![(20, 50, 2, 2, 1), (50, 80, 2, 2, 0)]);
    assert_eq!(s[0].avg_concurrency, 1.0);
    assert_eq!(s[1].avg_concurrency, 38.0 / 30.0);
    // One interval over the window; cpu0 is idle from 45 to 72.
    let one = metrics::interval_stats_between(&tl, 46, 70, 0);
    assert_eq!(one.len(), 1);
    assert_eq!((one[0].cpus_used, one[0].avg_concurrency), (1, 1.0));
    // The window is clamped to the trace; the whole trace is the default.
    assert_eq!(
        metrics::interval_stats_between(&tl, 0, u64::MAX, 30),
        metrics::interval_stats(&tl, 30)
    );
}

#[test]
fn concurrency_per_interval() {
    let tl = Timeline::build(&scenario());
    let t = metrics::concurrency(&tl, 30);
    // Busy time: [0,30) cpu0 30; [30,60) cpu0 15 + cpu1 15; [60,90) cpu0 18 + cpu1 20.
    assert_eq!(float(&t, 0, "avg_concurrency"), 1.0);
    assert_eq!(float(&t, 1, "avg_concurrency"), 1.0);
    assert_eq!(float(&t, 2, "avg_concurrency"), 38.0 / 30.0);
    // At t=45 both switches happen at once: never two tasks running.
    assert_eq!(t.numbers("max_concurrency"), vec![1.0, 1.0, 2.0]);
}

#[test]
fn underload_per_interval() {
    let tl = Timeline::build(&scenario());
    let t = metrics::underload(&tl, 30);
    // [30,60): two CPUs used for one task's worth of running.
    assert_eq!(t.numbers("underload"), vec![0.0, 1.0, 0.0]);
    let whole = metrics::underload(&tl, 0);
    assert_eq!(whole.rows.len(), 1);
    // 98 ns busy in 90 ns: ceil(1.09) = 2 CPUs needed, 2 used.
    assert_eq!(int(&whole, 0, "underload"), 0);
}

#[test]
fn work_conservation_violations() {
    let tl = Timeline::build(&scenario());
    let t = metrics::work_conservation(&tl, 0);
    assert_eq!(t.rows.len(), 1);
    assert_eq!(int(&t, 0, "start_ns"), 10);
    assert_eq!(int(&t, 0, "end_ns"), 40);
    assert_eq!(int(&t, 0, "idle_cpus"), 1);
    assert_eq!(int(&t, 0, "queued_tasks"), 1);
    let s = metrics::work_conservation_summary(&tl, 30);
    assert_eq!(int(&s, 0, "violations"), 1);
    assert_eq!(int(&s, 0, "total_ns"), 30);
    assert_eq!(int(&s, 0, "longest_ns"), 30);
    assert_eq!(float(&s, 0, "share"), 30.0 / 90.0);
    let s = metrics::work_conservation_summary(&tl, 31);
    assert_eq!(int(&s, 0, "violations"), 0);
    assert_eq!(int(&s, 0, "total_ns"), 0);
}

#[test]
fn migrations_per_task() {
    let tl = Timeline::build(&scenario());
    let t = metrics::migrations(&tl);
    assert_eq!(
        t.rows,
        vec![vec![Cell::Int(1), Cell::Text(String::new()), Cell::Int(1)]]
    );
}

#[test]
fn wakeup_latency_percentiles() {
    let tl = Timeline::build(&scenario());
    let t = metrics::wakeup_latency(&tl);
    // Latencies 20 (t=10 -> 30) and 2 (t=70 -> 72); the preemption of
    // task 1 at t=30 is a wait, not a wakeup.
    assert_eq!(int(&t, 0, "count"), 2);
    assert_eq!(int(&t, 0, "p50_ns"), 2);
    assert_eq!(int(&t, 0, "p90_ns"), 20);
    assert_eq!(int(&t, 0, "p99_ns"), 20);
    assert_eq!(int(&t, 0, "max_ns"), 20);
}

#[test]
fn run_and_wait_time_per_task() {
    let tl = Timeline::build(&scenario());
    let t = metrics::task_times(&tl);
    assert_eq!(t.numbers("pid"), vec![1.0, 2.0]);
    assert_eq!(t.numbers("run_ns"), vec![30.0 + 35.0, 15.0 + 18.0]);
    assert_eq!(t.numbers("wait_ns"), vec![15.0, 20.0 + 2.0]);
    assert_eq!(t.numbers("runs"), vec![2.0, 2.0]);
    assert_eq!(t.numbers("migrations"), vec![1.0, 0.0]);
}

#[test]
fn frequency_residency_per_band() {
    let tl = Timeline::build(&scenario());
    let t = metrics::frequency_residency(&tl, &FreqBands::from_edges(vec![2_500_000]));
    assert_eq!(t.rows.len(), 3);
    assert_eq!(t.get(0, "band"), Some(&Cell::Text("< 2.5 GHz".into())));
    assert_eq!(t.get(2, "band"), Some(&Cell::Text("unknown".into())));
    // cpu0 at 2.0 GHz for 45 ns, at 3.0 GHz for 18 ns; cpu1 unknown 35 ns.
    assert_eq!(t.numbers("busy_ns"), vec![45.0, 18.0, 35.0]);
    assert_eq!(
        t.numbers("share"),
        vec![45.0 / 98.0, 18.0 / 98.0, 35.0 / 98.0]
    );
    assert_eq!(t.numbers("hi_khz"), vec![2_500_000.0, -1.0, -1.0]);
}

#[test]
fn run_queue_lengths() {
    let tl = Timeline::build(&scenario());
    let steps: Vec<(u64, u32)> = tl.rq_len[0].iter().map(|s| (s.ts, s.value)).collect();
    assert_eq!(
        steps,
        vec![(0, 1), (10, 2), (40, 1), (45, 0), (70, 1), (90, 0)]
    );
    let steps: Vec<(u64, u32)> = tl.rq_len[1].iter().map(|s| (s.ts, s.value)).collect();
    assert_eq!(steps, vec![(0, 0), (40, 1), (80, 0)]);
}

#[test]
fn metrics_on_an_empty_trace_do_not_fail() {
    let tl = Timeline::build(&Trace::default());
    assert_eq!(metrics::underload(&tl, 10).rows.len(), 1);
    assert_eq!(int(&metrics::wakeup_latency(&tl), 0, "count"), 0);
    assert!(metrics::work_conservation(&tl, 0).rows.is_empty());
}

#[test]
fn nest_membership_and_warm_spins_per_cpu() {
    use nest_trace::{Event, EventKind, Nest};
    let mut trace = scenario();
    let ev = |ts_ns, cpu, kind| Event { ts_ns, cpu, kind };
    let extra = [
        ev(
            0,
            1,
            EventKind::NestChange {
                nest: Nest::Primary,
            },
        ),
        ev(
            45,
            1,
            EventKind::NestChange {
                nest: Nest::Reserve,
            },
        ),
        ev(
            60,
            1,
            EventKind::WarmSpin {
                duration_ns: 4,
                interrupted: true,
            },
        ),
        ev(
            85,
            1,
            EventKind::WarmSpin {
                duration_ns: 5,
                interrupted: false,
            },
        ),
        ev(88, 1, EventKind::NestChange { nest: Nest::None }),
    ];
    trace.events.extend(extra);
    trace.events.sort_by_key(|e| e.ts_ns);
    let tl = Timeline::build(&trace);
    let t = metrics::nest_activity(&tl);
    assert_eq!(t.rows.len(), 1);
    assert_eq!(int(&t, 0, "cpu"), 1);
    assert_eq!(int(&t, 0, "primary_ns"), 45);
    assert_eq!(int(&t, 0, "reserve_ns"), 43);
    assert_eq!(int(&t, 0, "warm_spins"), 2);
    assert_eq!(int(&t, 0, "warm_spin_ns"), 9);
    assert_eq!(int(&t, 0, "interrupted_spins"), 1);
    let svg = nest_trace::svg::nest_heatmap(&tl).unwrap();
    assert!(roxmltree::Document::parse(&svg).is_ok());
    assert!(nest_trace::svg::nest_heatmap(&Timeline::build(&scenario())).is_none());
    // Nest events do not change the placement metrics.
    assert_eq!(
        metrics::underload(&tl, 30),
        metrics::underload(&Timeline::build(&scenario()), 30)
    );
}

#[test]
fn smt_sharing_counts_paired_threads_while_a_core_idles() {
    // One socket, two cores of two threads: CPUs 0 and 2 share core 0,
    // CPUs 1 and 3 share core 1. Task 1 runs on CPU 0 over 0..100, task 2
    // beside it on CPU 2 over 20..60, task 3 on core 1 over 50..100: the
    // pairing lasts 40 ns, 30 of them while core 1 was idle.
    let trace = Trace {
        topology: Topology::regular(1, 2, 2),
        meta: vec![],
        events: vec![
            sw(0, 0, 0, 1),
            sw(0, 1, 0, 0),
            sw(0, 2, 0, 0),
            sw(0, 3, 0, 0),
            sw(20, 2, 0, 2),
            sw(50, 1, 0, 3),
            sw(60, 2, 2, 0),
            sw(100, 0, 1, 0),
            sw(100, 1, 3, 0),
        ],
    };
    let t = metrics::smt_sharing(&Timeline::build(&trace));
    assert_eq!(int(&t, 0, "paired_core_ns"), 40);
    assert_eq!(int(&t, 0, "paired_while_idle_core_ns"), 30);
    assert_eq!(int(&t, 0, "busy_ns"), 190);
    assert!((float(&t, 0, "needless_share") - 60.0 / 190.0).abs() < 1e-9);
}
