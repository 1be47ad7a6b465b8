//! Frequency requests (`policy/nest_perf.c`), driven through the real C
//! code: the PELT-like utilisation, the request rule and its modes, on a
//! modelled 2 sockets x 4 cores x 2 threads machine.

use nest_policy::{NestPolicy, PERF_ONE, Params, PerfMode, Platform, TaskState, perf_freq};
use nest_topology::Topology;

const MS: u64 = 1_000_000;
/// The published 250 Hz tick.
const TICK: u64 = 4 * MS;

fn policy(mode: PerfMode) -> NestPolicy {
    let params = Params {
        perf: mode,
        ..Params::default()
    };
    NestPolicy::new(&Topology::regular(2, 4, 2), 0, &params).unwrap()
}

/// `task` runs on `cpu` at performance `level` from `from` to `to` (ns),
/// with a tick every 4 ms meanwhile, as the host calls the policy. Returns
/// the request made when it stopped.
fn run(p: &NestPolicy, task: &mut TaskState, cpu: u32, from: u64, to: u64, level: u32) -> u32 {
    p.perf_running(task, cpu, from, level).unwrap();
    let mut t = from + TICK;
    while t < to {
        p.perf_tick(task, cpu, t, level).unwrap();
        t += TICK;
    }
    p.perf_stopping(task, cpu, to, level, false).unwrap()
}

#[test]
fn a_cpu_always_busy_asks_for_the_maximum() {
    let p = policy(PerfMode::Util);
    let mut task = TaskState::new();
    let req = run(&p, &mut task, 3, MS, 400 * MS, PERF_ONE);
    assert!(req >= PERF_ONE - 8, "request {req}");
    assert_eq!(p.perf_target(3), req);
    assert!(task.perf_util() >= PERF_ONE - 8, "{}", task.perf_util());
    assert_eq!(perf_freq(req), PERF_ONE);
}

#[test]
fn a_busy_cpu_whose_frequency_follows_its_request_climbs_to_the_maximum() {
    // Frequency invariance: running at half speed counts half. With
    // schedutil's 1.25 headroom the frequency still climbs to the top.
    let p = policy(PerfMode::Util);
    let mut task = TaskState::new();
    let mut level = PERF_ONE / 4;
    let mut req = p.perf_running(&mut task, 0, MS, level).unwrap();
    for i in 1..200 {
        level = perf_freq(req).max(PERF_ONE / 4);
        req = p.perf_tick(&mut task, 0, MS + i * TICK, level).unwrap();
    }
    assert_eq!(perf_freq(req), PERF_ONE, "request {req}");
}

#[test]
fn a_cpu_busy_a_quarter_of_the_time_runs_at_about_320() {
    // 1 ms of every 4 ms, at maximum frequency (no invariance effect).
    let p = policy(PerfMode::Util);
    let mut task = TaskState::new();
    let mut req = 0;
    for i in 0..250 {
        let start = MS + i * TICK;
        req = run(&p, &mut task, 5, start, start + MS, PERF_ONE);
    }
    // Sampled when it stops (the top of its sawtooth) and when it starts
    // (the bottom): both within a band around 256, 1.25 x 256 = 320.
    let low = p.perf_running(&mut task, 5, 1001 * MS, PERF_ONE).unwrap();
    for r in [req, low] {
        assert!((230..=290).contains(&r), "request {r}");
        let f = perf_freq(r);
        assert!((288..=362).contains(&f), "frequency share {f}");
    }
    assert!(low < req);
}

#[test]
fn blocked_utilisation_stays_on_the_cpu_and_halves_in_32_ms() {
    let p = policy(PerfMode::Util);
    let mut task = TaskState::new();
    let busy = run(&p, &mut task, 2, MS, 300 * MS, PERF_ONE);
    // The task sleeps: its share stays on CPU 2, decaying there. It comes
    // back to CPU 2 after 32 ms: nothing moves, CPU 2 has aged.
    let back = p.perf_running(&mut task, 2, 332 * MS, PERF_ONE).unwrap();
    let half = busy / 2;
    assert!(back.abs_diff(half) <= half / 20, "{busy} -> {back}");
    assert!(task.perf_util().abs_diff(half) <= half / 20);
    // 64 ms after it stopped: a quarter.
    p.perf_stopping(&mut task, 2, 332 * MS, PERF_ONE, false);
    let later = p.perf_running(&mut task, 2, 364 * MS, PERF_ONE).unwrap();
    assert!(later.abs_diff(busy / 4) <= busy / 40, "{busy} -> {later}");
}

#[test]
fn a_task_takes_its_utilisation_along_and_an_exiting_task_takes_it_away() {
    let p = policy(PerfMode::Util);
    let mut task = TaskState::new();
    let busy = run(&p, &mut task, 1, MS, 300 * MS, PERF_ONE);
    assert!(busy > 1000);
    // It wakes up on CPU 6 right away: CPU 6 asks for its share at once.
    let moved = p.perf_running(&mut task, 6, 301 * MS, PERF_ONE).unwrap();
    assert!(moved > 950, "{moved}");
    // CPU 1 drops it at its next update: a new task, 1 ms later, which
    // starts with half the spare capacity CPU 1 had before that update
    // (post_init_entity_util_avg()): next to nothing.
    let mut other = TaskState::new();
    let left = p.perf_running(&mut other, 1, 302 * MS, PERF_ONE).unwrap();
    assert!(left <= 24, "{left}");
    assert!(other.perf_util() <= 8, "{}", other.perf_util());
    p.perf_stopping(&mut other, 1, 303 * MS, PERF_ONE, false);
    // The first task exits on CPU 6: its share leaves with it, at CPU 6's
    // next update (the other task running there).
    let exit = p
        .perf_stopping(&mut task, 6, 303 * MS, PERF_ONE, true)
        .unwrap();
    assert!(exit > 950, "{exit}");
    let gone = p.perf_running(&mut other, 6, 304 * MS, PERF_ONE).unwrap();
    assert!(gone <= 24, "{gone}");
}

#[test]
fn a_new_task_starts_with_half_the_spare_capacity() {
    let p = policy(PerfMode::Util);
    let mut task = TaskState::new();
    let req = p.perf_running(&mut task, 0, 10 * MS, PERF_ONE).unwrap();
    assert_eq!(req, PERF_ONE / 2);
    assert_eq!(task.perf_util(), PERF_ONE / 2);
}

/// Places tasks until CPU 0 is in the primary nest (the first placement
/// adds it to the reserve, the next one promotes it).
fn cpu0_in_primary(p: &NestPolicy) {
    struct Plat(Vec<bool>);
    impl Platform for Plat {
        fn claim_idle(&mut self, cpu: u32) -> bool {
            std::mem::replace(&mut self.0[cpu as usize], false)
        }
        fn task_allowed(&self, cpu: u32) -> bool {
            cpu == 0
        }
        fn default_cpu(&mut self, _prev: u32, _whole_core: bool) -> (u32, bool) {
            (0, self.claim_idle(0))
        }
        fn pick_any_idle(&mut self) -> Option<u32> {
            self.claim_idle(0).then_some(0)
        }
        fn now_ns(&self) -> u64 {
            MS
        }
        fn cpu_idle(&self, cpu: u32) -> bool {
            self.0[cpu as usize]
        }
    }
    let mut task = TaskState::new();
    for _ in 0..2 {
        p.select_cpu(&mut Plat(vec![true; 16]), &mut task, 0);
    }
    assert_eq!(p.primary(), vec![0]);
}

#[test]
fn the_nest_floor_applies_to_primary_nest_cpus_only() {
    for mode in [PerfMode::Nest, PerfMode::Util] {
        let p = policy(mode);
        cpu0_in_primary(&p);
        // The same light task (1 ms every 16 ms) on CPU 0 (primary) and on
        // CPU 9 (in no nest).
        let (mut a, mut b) = (TaskState::new(), TaskState::new());
        let (mut on_primary, mut outside) = (0, 0);
        for i in 0..40 {
            let start = 2 * MS + i * 16 * MS;
            on_primary = run(&p, &mut a, 0, start, start + MS, PERF_ONE);
            outside = run(&p, &mut b, 9, start, start + MS, PERF_ONE);
        }
        assert!(outside < 200, "{mode:?}: {outside}");
        if mode == PerfMode::Nest {
            assert_eq!(on_primary, nest_policy::PERF_NEST_FLOOR);
        } else {
            assert_eq!(on_primary, outside);
        }
    }
}

#[test]
fn max_mode_never_requests() {
    let p = policy(PerfMode::Max);
    let mut task = TaskState::new();
    assert_eq!(p.perf_running(&mut task, 0, MS, PERF_ONE), None);
    assert_eq!(p.perf_tick(&mut task, 0, 5 * MS, PERF_ONE), None);
    assert_eq!(p.perf_stopping(&mut task, 0, 9 * MS, PERF_ONE, true), None);
    assert_eq!(p.perf_target(0), 0);
    assert_eq!(p.perf_util(0), 0);
}

#[test]
fn mode_names_parse_and_unknown_ones_list_the_valid_ones() {
    for m in PerfMode::ALL {
        assert_eq!(PerfMode::parse(m.name()), Ok(m));
    }
    let err = PerfMode::parse("fast").unwrap_err();
    assert!(err.contains("util, nest, max"), "{err}");
    assert_eq!(PerfMode::default(), PerfMode::Util);
}
