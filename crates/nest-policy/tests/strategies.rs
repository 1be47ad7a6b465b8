//! S_local and S_move (policy/smove_policy.c), driven through the real C
//! code on a 2 sockets x 4 cores x 2 threads machine.

use nest_policy::{Deferred, NestPolicy, Params, Platform, SMOVE_DELAY_NS, Stat, TaskState};
use nest_topology::Topology;

const US: u64 = 1_000;

/// A platform whose default placement is a fixed CPU and whose CPUs are at
/// their minimum frequency unless listed in `above_min`.
struct Plat {
    now: u64,
    default: u32,
    above_min: Vec<u32>,
    allowed: Option<Vec<u32>>,
}

impl Plat {
    fn new(now: u64, default: u32) -> Self {
        Self {
            now,
            default,
            above_min: Vec::new(),
            allowed: None,
        }
    }
}

impl Platform for Plat {
    fn claim_idle(&mut self, _cpu: u32) -> bool {
        true
    }

    fn task_allowed(&self, cpu: u32) -> bool {
        self.allowed.as_ref().is_none_or(|a| a.contains(&cpu))
    }

    fn default_cpu(&mut self, _prev: u32, _whole_core: bool) -> (u32, bool) {
        (self.default, true)
    }

    fn pick_any_idle(&mut self) -> Option<u32> {
        None
    }

    fn now_ns(&self) -> u64 {
        self.now
    }

    fn cpu_above_min(&self, cpu: u32) -> bool {
        self.above_min.contains(&cpu)
    }

    /// Every CPU can be claimed.
    fn cpu_idle(&self, _cpu: u32) -> bool {
        true
    }
}

fn policy() -> NestPolicy {
    NestPolicy::new(&Topology::regular(2, 4, 2), 0, &Params::default()).unwrap()
}

#[test]
fn slocal_picks_the_wakers_cpu() {
    let p = policy();
    let choice = p.slocal_select(&mut Plat::new(0, 5), Some(3), 7);
    assert_eq!(
        (choice.cpu, choice.idle, choice.how),
        (3, false, Stat::Local)
    );
    assert_eq!(choice.deferred, None);
    assert_eq!(p.stat(Stat::Local), 1);
}

#[test]
fn slocal_without_a_usable_waker_keeps_the_previous_cpu() {
    let p = policy();
    assert_eq!(p.slocal_select(&mut Plat::new(0, 5), None, 7).cpu, 7);
    let mut plat = Plat::new(0, 5);
    plat.allowed = Some(vec![7]);
    assert_eq!(p.slocal_select(&mut plat, Some(3), 7).cpu, 7);
}

#[test]
fn smove_uses_the_default_cpu_when_it_runs_above_min() {
    let p = policy();
    let mut plat = Plat::new(0, 5);
    plat.above_min = vec![5];
    let mut t = TaskState::new();
    let choice = p.smove_select(&mut plat, &mut t, Some(3), 7);
    assert_eq!(
        (choice.cpu, choice.idle, choice.how),
        (5, true, Stat::Default)
    );
    assert_eq!(choice.deferred, None);
    assert_eq!(p.stat(Stat::FreqAboveMin), 1);
    assert_eq!(p.stat(Stat::TimerArmed), 0);
    // No timer was asked for: a call anyway moves nothing.
    assert_eq!(
        p.smove_timer(&mut Plat::new(SMOVE_DELAY_NS, 5), &mut t),
        None
    );
}

#[test]
fn smove_at_min_picks_the_wakers_cpu_and_asks_for_a_timer_of_d() {
    let p = policy();
    let mut t = TaskState::new();
    let choice = p.smove_select(&mut Plat::new(0, 5), &mut t, Some(3), 7);
    assert_eq!(
        (choice.cpu, choice.idle, choice.how),
        (3, false, Stat::Local)
    );
    let expected = Deferred {
        cpu: 5,
        delay_ns: SMOVE_DELAY_NS,
    };
    assert_eq!(choice.deferred, Some(expected));
    assert_eq!(p.stat(Stat::FreqAtMin), 1);
    assert_eq!(p.stat(Stat::TimerArmed), 1);
}

#[test]
fn smove_delay_comes_from_the_parameters() {
    let params = Params {
        smove_delay_ns: 200 * US,
        ..Params::default()
    };
    let p = NestPolicy::new(&Topology::regular(2, 4, 2), 0, &params).unwrap();
    let choice = p.smove_select(&mut Plat::new(0, 5), &mut TaskState::new(), Some(3), 7);
    assert_eq!(choice.deferred.map(|d| d.delay_ns), Some(200 * US));
}

#[test]
fn the_timer_migrates_a_task_that_did_not_run() {
    let p = policy();
    let mut t = TaskState::new();
    p.smove_select(&mut Plat::new(0, 5), &mut t, Some(3), 7);
    assert_eq!(
        p.smove_timer(&mut Plat::new(SMOVE_DELAY_NS, 5), &mut t),
        Some(5)
    );
    assert_eq!(p.stat(Stat::TimerFired), 1);
    assert_eq!(p.stat(Stat::Migrated), 1);
    // Once only.
    assert_eq!(
        p.smove_timer(&mut Plat::new(SMOVE_DELAY_NS, 5), &mut t),
        None
    );
    assert_eq!(p.stat(Stat::Migrated), 1);
}

#[test]
fn the_timer_leaves_a_task_that_ran() {
    let p = policy();
    let mut t = TaskState::new();
    p.smove_select(&mut Plat::new(0, 5), &mut t, Some(3), 7);
    p.smove_task_running(&mut t);
    assert_eq!(
        p.smove_timer(&mut Plat::new(SMOVE_DELAY_NS, 5), &mut t),
        None
    );
    assert_eq!(p.stat(Stat::TimerFired), 1);
    assert_eq!(p.stat(Stat::Migrated), 0);
}

#[test]
fn a_stale_timer_does_not_move_the_task_early() {
    let p = policy();
    let mut t = TaskState::new();
    p.smove_select(&mut Plat::new(0, 5), &mut t, Some(3), 7);
    p.smove_task_running(&mut t);
    // Woken again later: a new deferred move, due at 30 us + D.
    p.smove_select(&mut Plat::new(30 * US, 6), &mut t, Some(3), 7);
    // The first timer fires at D: too early for the second move.
    assert_eq!(
        p.smove_timer(&mut Plat::new(SMOVE_DELAY_NS, 6), &mut t),
        None
    );
    let due = 30 * US + SMOVE_DELAY_NS;
    assert_eq!(p.smove_timer(&mut Plat::new(due, 6), &mut t), Some(6));
}

#[test]
fn the_timer_does_not_move_a_task_to_a_cpu_it_may_no_longer_use() {
    let p = policy();
    let mut t = TaskState::new();
    p.smove_select(&mut Plat::new(0, 5), &mut t, Some(3), 7);
    let mut plat = Plat::new(SMOVE_DELAY_NS, 5);
    plat.allowed = Some(vec![3]);
    assert_eq!(p.smove_timer(&mut plat, &mut t), None);
    assert_eq!(p.stat(Stat::Migrated), 0);
}

#[test]
fn smove_when_the_default_is_the_wakers_cpu_or_there_is_no_waker() {
    let p = policy();
    let mut t = TaskState::new();
    let choice = p.smove_select(&mut Plat::new(0, 3), &mut t, Some(3), 7);
    assert_eq!(
        (choice.cpu, choice.how, choice.deferred),
        (3, Stat::Local, None)
    );
    let choice = p.smove_select(&mut Plat::new(0, 5), &mut t, None, 7);
    assert_eq!(
        (choice.cpu, choice.how, choice.deferred),
        (5, Stat::Default, None)
    );
    // Neither needed the frequency test.
    assert_eq!(p.stat(Stat::FreqAtMin) + p.stat(Stat::FreqAboveMin), 0);
}

#[test]
fn nest_placements_never_ask_for_a_timer() {
    let p = policy();
    let choice = p.select_cpu(&mut Plat::new(0, 5), &mut TaskState::new(), 7);
    assert_eq!(choice.deferred, None);
}
