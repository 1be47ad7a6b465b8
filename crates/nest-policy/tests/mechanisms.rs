//! Each Nest mechanism, driven through the real C policy on a modelled
//! 2 sockets x 4 cores x 2 threads machine (CPUs 0-3 and 8-11 on socket 0,
//! 4-7 and 12-15 on socket 1).
//!
//! Not here: sync wakeups. The kernel's default placement may answer a
//! WAKE_SYNC wakeup with the busy waker's CPU as if it were idle; only the
//! BPF host has that default placement, and it never passes the flag on
//! (`default_wake_flags()` in crates/scx_nest/src/bpf/platform.bpf.h). The
//! native platform interface has no wake flags.

use std::sync::atomic::{AtomicBool, Ordering};

use nest_policy::{Mechanism, NestPolicy, Params, Platform, Stat, TaskState};
use nest_topology::Topology;

const MS: u64 = 1_000_000;

/// A machine whose CPUs are all idle at first; idle states are atomics so
/// several threads can race for them.
struct Machine {
    topo: Topology,
    idle: Vec<AtomicBool>,
    online: Vec<AtomicBool>,
}

impl Machine {
    fn new() -> Self {
        Self::with(Topology::regular(2, 4, 2))
    }

    fn with(topo: Topology) -> Self {
        let idle = (0..topo.nr_cpus()).map(|_| AtomicBool::new(true)).collect();
        let online = (0..topo.nr_cpus()).map(|_| AtomicBool::new(true)).collect();
        Self { topo, idle, online }
    }

    /// Take `cpu` offline or bring it back. Its idle flag is left as it
    /// was: the policy must not rely on an offline CPU looking busy.
    fn set_online(&self, cpu: u32, online: bool) {
        self.online[cpu as usize].store(online, Ordering::SeqCst);
    }

    fn is_online(&self, cpu: u32) -> bool {
        self.online[cpu as usize].load(Ordering::SeqCst)
    }

    fn set_busy(&self, cpus: &[u32]) {
        for &cpu in cpus {
            self.idle[cpu as usize].store(false, Ordering::SeqCst);
        }
    }

    fn set_idle(&self, cpus: &[u32]) {
        for &cpu in cpus {
            self.idle[cpu as usize].store(true, Ordering::SeqCst);
        }
    }

    fn socket(&self, cpu: u32) -> u32 {
        self.topo.place(cpu).unwrap().socket
    }

    /// Are all SMT threads of `cpu`'s core idle?
    fn core_idle(&self, cpu: u32) -> bool {
        let core = self.topo.place(cpu).unwrap().core;
        (0..self.topo.nr_cpus() as u32)
            .filter(|&c| self.topo.place(c).unwrap().core == core)
            .all(|c| self.idle[c as usize].load(Ordering::SeqCst))
    }
}

/// The platform seen by one placement: the default placement looks only at
/// the previous CPU's socket, like a per-node idle search.
struct Plat<'a> {
    machine: &'a Machine,
    now: u64,
    allowed: Option<Vec<u32>>,
    /// The placement is a fork.
    fork: bool,
}

impl<'a> Plat<'a> {
    fn new(machine: &'a Machine, now: u64) -> Self {
        Self {
            machine,
            now,
            allowed: None,
            fork: false,
        }
    }

    fn fork(machine: &'a Machine, now: u64) -> Self {
        Self {
            fork: true,
            ..Self::new(machine, now)
        }
    }
}

impl Platform for Plat<'_> {
    fn claim_idle(&mut self, cpu: u32) -> bool {
        self.machine.idle[cpu as usize].swap(false, Ordering::SeqCst)
    }

    fn task_allowed(&self, cpu: u32) -> bool {
        self.allowed.as_ref().is_none_or(|a| a.contains(&cpu))
    }

    fn default_cpu(&mut self, prev: u32, whole_core: bool) -> (u32, bool) {
        let socket = self.machine.socket(prev);
        let candidates: Vec<u32> = (0..self.machine.topo.nr_cpus() as u32)
            .filter(|&c| self.machine.socket(c) == socket)
            .filter(|&c| !whole_core || self.machine.core_idle(c))
            .collect();
        for cpu in candidates {
            if self.machine.is_online(cpu) && self.task_allowed(cpu) && self.claim_idle(cpu) {
                return (cpu, true);
            }
        }
        (prev, false)
    }

    fn pick_any_idle(&mut self) -> Option<u32> {
        (0..self.machine.topo.nr_cpus() as u32)
            .find(|&c| self.machine.is_online(c) && self.task_allowed(c) && self.claim_idle(c))
    }

    fn now_ns(&self) -> u64 {
        self.now
    }

    fn is_fork(&self) -> bool {
        self.fork
    }

    fn cpu_idle(&self, cpu: u32) -> bool {
        self.machine.idle[cpu as usize].load(Ordering::SeqCst)
    }
}

fn policy(machine: &Machine, params: Params) -> NestPolicy {
    NestPolicy::new(&machine.topo, 0, &params).unwrap()
}

/// The policy with the default parameters but for one mechanism.
fn policy_without(machine: &Machine, mechanism: Mechanism) -> NestPolicy {
    let params = Params {
        disabled: vec![mechanism],
        ..Params::default()
    };
    policy(machine, params)
}

/// Place a task, run it on the chosen CPU, and return the CPU.
fn place_and_run(p: &NestPolicy, m: &Machine, task: &mut TaskState, prev: u32, now: u64) -> u32 {
    let choice = p.select_cpu(&mut Plat::new(m, now), task, prev);
    assert!(choice.idle, "expected an idle CPU, got {choice:?}");
    p.task_running(task, choice.cpu, now);
    choice.cpu
}

/// The task on `cpu` blocks at `now`: the CPU goes idle.
fn block(p: &NestPolicy, m: &Machine, cpu: u32, now: u64) {
    m.set_idle(&[cpu]);
    p.cpu_idle(cpu, now);
}

#[test]
fn a_fallback_cpu_joins_the_reserve_then_is_promoted_when_found_there() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    let mut task = TaskState::new();

    let cpu = place_and_run(&p, &m, &mut task, 2, 0);
    assert_eq!(
        cpu, 0,
        "the default placement gives the first idle CPU of the socket"
    );
    assert_eq!(p.stat(Stat::Fallback), 1);
    assert_eq!(p.reserve(), vec![0]);
    assert!(p.primary().is_empty());

    block(&p, &m, cpu, MS);
    // Another task, from elsewhere: the reserve search finds CPU 0 (the
    // first task would take it back as its warm previous CPU).
    let mut other = TaskState::new();
    place_and_run(&p, &m, &mut other, 2, 2 * MS);
    assert_eq!(p.stat(Stat::Reserve), 1);
    assert_eq!(p.stat(Stat::Promoted), 1);
    assert_eq!(p.primary(), vec![0]);
    assert!(p.reserve().is_empty());
}

/// A task ran on CPU 0, which joined the reserve through the fallback,
/// while CPU 4 is in the primary nest; the task blocked at 1 ms.
fn prev_in_reserve(p: &NestPolicy, m: &Machine) -> TaskState {
    grow_primary(p, m, &[4], 0);
    let mut task = TaskState::new();
    m.set_busy(&[4]);
    assert_eq!(place_and_run(p, m, &mut task, 2, 0), 0);
    m.set_idle(&[4]);
    p.cpu_idle(4, 0);
    assert_eq!(p.reserve(), vec![0]);
    block(p, m, 0, MS);
    task
}

#[test]
fn a_woken_task_takes_back_its_warm_previous_cpu_from_the_reserve() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    let mut task = prev_in_reserve(&p, &m);
    let before = p.stat(Stat::WarmPrev);
    let choice = p.select_cpu(&mut Plat::new(&m, 2 * MS), &mut task, 0);
    assert_eq!(choice.cpu, 0, "{choice:?}");
    assert_eq!(p.stat(Stat::WarmPrev), before + 1);
    assert_eq!(p.primary(), vec![0, 4], "promoted");
    assert!(p.reserve().is_empty());
}

#[test]
fn without_warm_prev_a_woken_task_leaves_its_reserve_cpu_for_the_primary_nest() {
    let m = Machine::new();
    let p = policy_without(&m, Mechanism::WarmPrev);
    let mut task = prev_in_reserve(&p, &m);
    let choice = p.select_cpu(&mut Plat::new(&m, 2 * MS), &mut task, 0);
    assert_eq!(choice.cpu, 4, "the published primary search: {choice:?}");
    assert_eq!(p.stat(Stat::WarmPrev), 0);
}

#[test]
fn a_previous_cpu_idle_longer_than_p_remove_is_not_taken_back() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    let mut task = prev_in_reserve(&p, &m);
    let before = p.stat(Stat::WarmPrev);
    let late = MS + Params::default().p_remove_ns + 1;
    // CPU 4 went idle at 0: the primary search demotes it as stale, and
    // the reserve search finds one of the two in the reserve.
    let choice = p.select_cpu(&mut Plat::new(&m, late), &mut task, 0);
    assert!(choice.idle, "{choice:?}");
    assert_eq!(p.stat(Stat::WarmPrev), before);
}

#[test]
fn forks_and_impatient_tasks_do_not_take_back_a_warm_previous_cpu() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    let mut task = prev_in_reserve(&p, &m);
    let before = p.stat(Stat::WarmPrev);
    // A fork from CPU 0 (its parent's CPU): the primary nest first.
    let choice = p.select_cpu(&mut Plat::fork(&m, 2 * MS), &mut TaskState::new(), 0);
    assert_eq!(choice.cpu, 4, "{choice:?}");
    // Two placements that find CPU 0 busy make the task impatient for its
    // next one, which skips the nests' primary search and this rule.
    m.set_busy(&[0]);
    for _ in 0..Params::default().r_impatient {
        p.select_cpu(&mut Plat::new(&m, 2 * MS), &mut task, 0);
    }
    assert_eq!(task.prev_misses(), Params::default().r_impatient);
    m.set_idle(&[0]);
    let choice = p.select_cpu(&mut Plat::new(&m, 3 * MS), &mut task, 0);
    assert_eq!(p.stat(Stat::Impatient), 1, "{choice:?}");
    assert_eq!(p.stat(Stat::WarmPrev), before);
}

#[test]
fn a_task_returns_to_its_idle_previous_cpu_in_the_primary_nest() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    let mut task = TaskState::new();
    let first = place_and_run(&p, &m, &mut task, 5, 0);
    block(&p, &m, first, MS);
    place_and_run(&p, &m, &mut task, first, 2 * MS); // promoted
    block(&p, &m, first, 3 * MS);
    let mut other = TaskState::new(); // never ran: not attached
    let cpu = place_and_run(&p, &m, &mut other, first, 4 * MS);
    assert_eq!(cpu, first);
    assert_eq!(p.stat(Stat::Prev), 1);
}

/// Fill the primary nest with `cpus` by placing a task on each twice.
fn grow_primary(p: &NestPolicy, m: &Machine, cpus: &[u32], now: u64) {
    for &cpu in cpus {
        // Only `cpu` idle: the fallback must take it, then the reserve
        // search promotes it.
        let others: Vec<u32> = (0..16).filter(|&c| c != cpu).collect();
        m.set_busy(&others);
        let mut t = TaskState::new();
        let got = place_and_run(p, m, &mut t, cpu, now);
        assert_eq!(got, cpu);
        block(p, m, cpu, now);
        let got = place_and_run(p, m, &mut t, cpu, now);
        assert_eq!(got, cpu);
        block(p, m, cpu, now);
        m.set_idle(&others);
    }
    let mut primary = p.primary();
    primary.sort();
    let mut want = cpus.to_vec();
    want.sort();
    assert_eq!(primary, want);
}

#[test]
fn the_primary_scan_visits_the_previous_cpus_socket_first() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[1, 6], 0);
    // prev = 5 (socket 1) is busy; the scan from 5 would reach 6 before
    // wrapping to 1, and 6 is also the socket-1 CPU: make the wrap matter by
    // starting at 7, whose next CPUs in number order are 8.. then 0, 1.
    m.set_busy(&[7]);
    let mut t = TaskState::new();
    let cpu = place_and_run(&p, &m, &mut t, 7, 0);
    assert_eq!(cpu, 6, "socket 1's primary CPU comes before socket 0's");
    assert_eq!(p.stat(Stat::Primary), 1);

    // From socket 0, the socket-0 primary CPU is preferred.
    block(&p, &m, 6, 0);
    m.set_busy(&[2]);
    let mut t = TaskState::new();
    assert_eq!(place_and_run(&p, &m, &mut t, 2, 0), 1);
}

/// The policy with CPUs 1 and 2 in the primary nest, CPU 1 idle since 0
/// and CPU 2 since P_remove (returned).
fn primary_idle_since_0_and_p_remove(m: &Machine) -> (NestPolicy, u64) {
    let params = Params::default();
    let p_remove = params.p_remove_ns;
    let p = policy(m, params);
    grow_primary(&p, m, &[1, 2], 0);
    p.task_running(&mut TaskState::new(), 2, p_remove - MS);
    p.cpu_idle(2, p_remove);
    (p, p_remove)
}

#[test]
fn an_idle_primary_cpu_is_compacted_after_p_remove() {
    let m = Machine::new();
    let (p, p_remove) = primary_idle_since_0_and_p_remove(&m);
    // At P_remove + 1 ms a scan that meets CPU 1 demotes it to the
    // reserve, and CPU 2 (idle only briefly) is used.
    m.set_busy(&[0]);
    let mut t = TaskState::new();
    let cpu = place_and_run(&p, &m, &mut t, 0, p_remove + MS);
    assert_eq!(cpu, 2);
    assert_eq!(p.stat(Stat::Compacted), 1);
    assert_eq!(p.primary(), vec![2]);
    assert!(p.reserve().contains(&1));
}

#[test]
fn a_cpu_claimed_for_a_task_is_not_compacted_before_the_task_runs() {
    let m = Machine::new();
    let (p, p_remove) = primary_idle_since_0_and_p_remove(&m);
    // A task woken on CPU 1 claims it just before P_remove; under
    // emulation its vCPU may take milliseconds to run it.
    let mut woken = TaskState::new();
    let choice = p.select_cpu(&mut Plat::new(&m, p_remove - MS), &mut woken, 1);
    assert_eq!(choice.cpu, 1);
    // Meanwhile a scan meets CPU 1, idle by its timestamp for longer than
    // P_remove but claimed: it passes over it without demoting it.
    m.set_busy(&[0]);
    let mut t = TaskState::new();
    assert_eq!(place_and_run(&p, &m, &mut t, 0, p_remove + MS), 2);
    assert_eq!(p.stat(Stat::Compacted), 0);
    assert_eq!(p.stat(Stat::StaleClaimed), 1);
    assert_eq!(p.stat(Stat::StaleSpared), 0);
    assert_eq!(p.primary(), vec![1, 2]);
}

#[test]
fn compaction_can_be_switched_off() {
    let m = Machine::new();
    let p = policy_without(&m, Mechanism::Compaction);
    grow_primary(&p, &m, &[1, 2], 0);
    m.set_busy(&[0]);
    let mut t = TaskState::new();
    let cpu = place_and_run(&p, &m, &mut t, 0, 100 * MS);
    assert_eq!(cpu, 1);
    assert_eq!(p.stat(Stat::Compacted), 0);
}

#[test]
fn an_attached_task_reclaims_its_compaction_eligible_core() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[3, 1], 0);
    // The task ran on CPU 3 twice: it is attached to CPU 3.
    let mut task = TaskState::new();
    p.task_running(&mut task, 3, 0);
    p.task_running(&mut task, 3, 0);
    assert_eq!(task.recent_cpus(), [Some(3), Some(3)]);
    // CPU 3 has been idle far longer than P_remove; prev is busy CPU 0.
    m.set_busy(&[0]);
    let cpu = place_and_run(&p, &m, &mut task, 0, 50 * MS);
    assert_eq!(cpu, 3);
    assert_eq!(p.stat(Stat::Attached), 1);
    assert_eq!(p.stat(Stat::Compacted), 0);
}

/// `task` runs twice on `cpu` (so it is attached there), then sleeps there
/// at `now`: the CPU goes idle, kept for it.
fn sleep_attached(p: &NestPolicy, m: &Machine, task: &mut TaskState, cpu: u32, now: u64) {
    p.task_running(task, cpu, now);
    p.task_running(task, cpu, now);
    p.task_sleeping(task, cpu, now);
    block(p, m, cpu, now);
}

#[test]
fn another_task_passes_over_the_cpu_a_sleeping_attached_task_keeps() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[1, 2], 0);
    let mut shell = TaskState::new();
    sleep_attached(&p, &m, &mut shell, 1, MS);
    // A stranger whose previous CPU is 1: the published scan starts there.
    let mut stranger = TaskState::new();
    assert_eq!(place_and_run(&p, &m, &mut stranger, 1, 2 * MS), 2);
    assert_eq!(p.stat(Stat::KeptSpared), 1);
    // The shell wakes and finds its CPU.
    assert_eq!(place_and_run(&p, &m, &mut shell, 1, 3 * MS), 1);
    assert_eq!(p.stat(Stat::Attached), 1);
}

#[test]
fn without_keep_attached_the_scan_takes_a_sleeping_tasks_cpu() {
    let m = Machine::new();
    let p = policy_without(&m, Mechanism::KeepAttached);
    grow_primary(&p, &m, &[1, 2], 0);
    let mut shell = TaskState::new();
    sleep_attached(&p, &m, &mut shell, 1, MS);
    let mut stranger = TaskState::new();
    assert_eq!(place_and_run(&p, &m, &mut stranger, 1, 2 * MS), 1);
    assert_eq!(p.stat(Stat::KeptSpared), 0);
}

#[test]
fn a_kept_cpu_is_taken_only_when_the_nests_have_no_other_idle_cpu() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[1, 6], 0);
    let mut shell = TaskState::new();
    sleep_attached(&p, &m, &mut shell, 1, MS);
    // A primary CPU of the other socket comes before the kept one...
    assert_eq!(place_and_run(&p, &m, &mut TaskState::new(), 1, 2 * MS), 6);
    // ...and so does a reserve CPU: CPU 0 joins the reserve through the
    // fallback (CPU 1 busy for a moment), and its task sleeps.
    m.set_busy(&[1]);
    let mut worker = TaskState::new();
    assert_eq!(place_and_run(&p, &m, &mut worker, 2, 3 * MS), 0);
    assert_eq!(p.reserve(), vec![0]);
    m.set_idle(&[1]);
    block(&p, &m, 0, 4 * MS);
    assert_eq!(place_and_run(&p, &m, &mut TaskState::new(), 2, 5 * MS), 0);
    assert_eq!(p.stat(Stat::KeptSpared), 2);
    // Nothing else idle in the nests: the kept CPU, rather than a CPU
    // outside them.
    assert_eq!(place_and_run(&p, &m, &mut TaskState::new(), 2, 6 * MS), 1);
    assert_eq!(p.stat(Stat::KeptTaken), 1);
}

#[test]
fn a_keep_ends_after_p_remove_or_when_its_task_runs_elsewhere() {
    let m = Machine::new();
    let params = Params::default();
    let p_remove = params.p_remove_ns;
    let p = policy(&m, params);
    grow_primary(&p, &m, &[1, 2], 0);
    let mut shell = TaskState::new();
    sleep_attached(&p, &m, &mut shell, 1, MS);
    // A worker runs on CPU 1 and sleeps there (not attached): CPU 1 is idle
    // only briefly, but the keep is older than P_remove.
    m.set_busy(&[1]);
    p.task_running(&mut TaskState::new(), 1, p_remove);
    block(&p, &m, 1, p_remove + MS);
    let mut stranger = TaskState::new();
    assert_eq!(
        place_and_run(&p, &m, &mut stranger, 1, p_remove + 2 * MS),
        1
    );
    assert_eq!(p.stat(Stat::KeptSpared), 0);

    // A fresh keep, ended by its task running on CPU 2.
    block(&p, &m, 1, p_remove + 3 * MS);
    let now = p_remove + 4 * MS;
    sleep_attached(&p, &m, &mut shell, 1, now);
    m.set_busy(&[2]);
    p.task_running(&mut shell, 2, now + MS);
    let mut stranger = TaskState::new();
    assert_eq!(place_and_run(&p, &m, &mut stranger, 1, now + 2 * MS), 1);
    assert_eq!(p.stat(Stat::KeptSpared), 0);
    assert_eq!(p.stat(Stat::KeptTaken), 0);
}

#[test]
fn a_fork_takes_a_kept_cpu_like_any_idle_one() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[1, 2], 0);
    let mut shell = TaskState::new();
    sleep_attached(&p, &m, &mut shell, 1, MS);
    let choice = p.select_cpu(&mut Plat::fork(&m, 2 * MS), &mut TaskState::new(), 1);
    assert_eq!((choice.cpu, choice.idle), (1, true));
    assert_eq!(p.stat(Stat::KeptSpared), 0);
}

#[test]
fn kernel_threads_and_pinned_tasks_keep_no_cpu() {
    for (kernel_thread, pinned) in [(true, false), (false, true)] {
        let m = Machine::new();
        let p = policy(&m, Params::default());
        grow_primary(&p, &m, &[1, 2], 0);
        let mut kworker = TaskState::new();
        kworker.set_traits(kernel_thread, pinned);
        sleep_attached(&p, &m, &mut kworker, 1, MS);
        let mut task = TaskState::new();
        assert_eq!(place_and_run(&p, &m, &mut task, 1, 2 * MS), 1);
        assert_eq!(p.stat(Stat::KeptSpared), 0);
    }
}

#[test]
fn a_kernel_thread_never_takes_a_kept_cpu_in_the_nests() {
    for kernel_thread in [false, true] {
        let m = Machine::new();
        let p = policy(&m, Params::default());
        grow_primary(&p, &m, &[1], 0);
        let mut shell = TaskState::new();
        sleep_attached(&p, &m, &mut shell, 1, MS);
        // The kept CPU is the nests' only idle one.
        let mut task = TaskState::new();
        task.set_traits(kernel_thread, false);
        let choice = p.select_cpu(&mut Plat::new(&m, 2 * MS), &mut task, 3);
        let cpu = choice.cpu;
        if kernel_thread {
            assert_eq!(choice.how, Stat::Fallback, "{choice:?}");
            assert_ne!(cpu, 1);
            assert_eq!(p.stat(Stat::KeptTaken), 0);
        } else {
            assert_eq!(cpu, 1, "a user task takes the kept CPU");
            assert_eq!(p.stat(Stat::KeptTaken), 1);
        }
    }
}

#[test]
fn a_kernel_thread_leaves_the_exit_cpu_to_the_next_fork() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    first_child_exits(&p, &m);
    // rcu_preempt, last run on CPU 1, wakes: a user task would take CPU 1
    // back (warm previous CPU); the kernel thread takes CPU 2.
    let mut rcu = TaskState::new();
    rcu.set_traits(true, false);
    assert_eq!(place_and_run(&p, &m, &mut rcu, 1, 2 * MS), 2);
    assert_eq!(next_fork(&p, &m, 3 * MS), 1);
    assert_eq!(p.stat(Stat::ForkReuse), 1);
}

#[test]
fn without_fork_reuse_a_kernel_thread_may_take_the_exit_cpu() {
    let m = Machine::new();
    let p = policy_without(&m, Mechanism::ForkReuse);
    first_child_exits(&p, &m);
    let mut rcu = TaskState::new();
    rcu.set_traits(true, false);
    assert_eq!(place_and_run(&p, &m, &mut rcu, 1, 2 * MS), 1);
}

#[test]
fn a_task_running_on_a_kept_cpu_ends_the_keep() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[1, 2], 0);
    let mut shell = TaskState::new();
    sleep_attached(&p, &m, &mut shell, 1, MS);
    // Another task runs on CPU 1 (placed there for lack of another, say)
    // and sleeps there: the CPU is now its own, and it gets it back
    // (before, the shell's keep sent it away from its own idle CPU).
    let mut worker = TaskState::new();
    m.set_busy(&[1]);
    sleep_attached(&p, &m, &mut worker, 1, 2 * MS);
    assert_eq!(place_and_run(&p, &m, &mut worker, 1, 3 * MS), 1);
    assert_eq!(p.stat(Stat::KeptSpared), 0);
    // A task that only ran there, and sleeps unattached, keeps nothing.
    block(&p, &m, 1, 4 * MS);
    let mut stranger = TaskState::new();
    assert_eq!(place_and_run(&p, &m, &mut stranger, 1, 5 * MS), 1);
    assert_eq!(p.stat(Stat::KeptSpared), 0);
}

#[test]
fn a_task_that_keeps_missing_its_cpu_becomes_impatient_and_grows_the_primary() {
    let m = Machine::new();
    let params = Params::default();
    let r_impatient = params.r_impatient;
    let p = policy(&m, params);
    grow_primary(&p, &m, &[1], 0);
    let mut task = TaskState::new();
    // The previous CPU (5, on the other socket) is busy every time; the
    // task gets CPU 1, the primary nest's only CPU, until it is impatient.
    m.set_busy(&[5]);
    for _ in 0..r_impatient {
        let choice = p.select_cpu(&mut Plat::new(&m, 0), &mut task, 5);
        assert_eq!((choice.cpu, choice.how), (1, Stat::Primary));
        m.set_idle(&[1]);
    }
    assert_eq!(task.prev_misses(), r_impatient);
    // Now impatient: the primary search is skipped although CPU 1 is idle,
    // and the CPU found by the fallback joins the primary nest directly.
    let choice = p.select_cpu(&mut Plat::new(&m, 0), &mut task, 5);
    assert_eq!(p.stat(Stat::Impatient), 1);
    assert_eq!((choice.cpu, choice.how), (4, Stat::Fallback));
    assert_eq!(p.primary(), vec![1, 4]);
    assert_eq!(p.stat(Stat::JoinedPrimary), 1);

    // Impatient for that one placement only: the count starts again, and
    // the next placement searches the primary nest.
    assert_eq!(task.prev_misses(), 0);
    let choice = p.select_cpu(&mut Plat::new(&m, 0), &mut task, 5);
    assert_eq!((choice.cpu, choice.how), (1, Stat::Primary));
    assert_eq!(p.stat(Stat::Impatient), 1);
    assert_eq!(task.prev_misses(), 1);

    // Getting the previous CPU back resets the count (1 and 4 are busy).
    m.set_idle(&[5]);
    let choice = p.select_cpu(&mut Plat::new(&m, 0), &mut task, 5);
    assert_eq!(choice.cpu, 5);
    assert_eq!(task.prev_misses(), 0);
}

#[test]
fn a_fork_is_not_a_miss() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[1], 0);
    // The parent runs on CPU 5; its children are placed elsewhere, which
    // never counts: CPU 5 is the parent's, not theirs. (One task state for
    // every fork, so that a count would show.)
    m.set_busy(&[5]);
    let mut child = TaskState::new();
    for _ in 0..3 {
        let choice = p.select_cpu(&mut Plat::fork(&m, 0), &mut child, 5);
        assert!(choice.idle && choice.cpu != 5, "{choice:?}");
        m.set_idle(&[choice.cpu]);
    }
    assert_eq!(child.prev_misses(), 0);
    assert_eq!(p.stat(Stat::Impatient), 0);
    // The same placement as a wakeup found the previous CPU busy.
    p.select_cpu(&mut Plat::new(&m, 0), &mut child, 5);
    assert_eq!(child.prev_misses(), 1);
}

#[test]
fn only_a_busy_previous_cpu_is_a_miss_not_an_idle_one_whose_sibling_runs() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[1, 9, 2], 0);
    // CPU 9 is idle, but its sibling runs: whole cores first gives CPU 2.
    run_on(&p, &m, &[sibling(9)], MS);
    let mut task = TaskState::new();
    let choice = p.select_cpu(&mut Plat::new(&m, MS), &mut task, 9);
    assert_eq!(choice.cpu, 2);
    assert_eq!(task.prev_misses(), 0, "the previous CPU was idle");
    m.set_idle(&[2]);
    // CPU 9 busy: a miss.
    m.set_busy(&[9]);
    let choice = p.select_cpu(&mut Plat::new(&m, MS), &mut task, 9);
    assert_eq!(choice.cpu, 2);
    assert_eq!(task.prev_misses(), 1, "the previous CPU was busy");
}

#[test]
fn the_reserve_never_exceeds_r_max() {
    let m = Machine::new();
    let params = Params {
        r_max: 3,
        ..Params::default()
    };
    let p = policy(&m, params);
    // Twelve tasks placed at once, each through the fallback.
    for i in 0..12 {
        let mut t = TaskState::new();
        let choice = p.select_cpu(&mut Plat::new(&m, 0), &mut t, i % 16);
        assert!(choice.idle);
        assert!(p.reserve().len() <= 3, "reserve {:?}", p.reserve());
    }
    assert_eq!(p.reserve().len(), 3);
    assert!(p.stat(Stat::ReserveFull) > 0);
}

#[test]
fn exit_demotes_the_cpu_at_once() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[2], 0);
    let mut t = TaskState::new();
    let cpu = place_and_run(&p, &m, &mut t, 2, 0);
    p.task_exiting(cpu);
    block(&p, &m, cpu, MS);
    assert!(p.primary().is_empty());
    assert_eq!(p.reserve(), vec![2]);
    assert_eq!(p.stat(Stat::ExitDemoted), 1);
}

/// The parent runs on CPU 0 with CPUs 1 and 2 in the primary nest too; its
/// first child runs on CPU 1, exits there at 1 ms, and CPU 1 goes idle.
fn first_child_exits(p: &NestPolicy, m: &Machine) {
    grow_primary(p, m, &[0, 1, 2], 0);
    m.set_busy(&[0]);
    let mut child = TaskState::new();
    let choice = p.select_cpu(&mut Plat::fork(m, 0), &mut child, 0);
    assert_eq!(choice.cpu, 1, "{choice:?}");
    p.task_running(&mut child, 1, 0);
    p.task_exiting(1);
    block(p, m, 1, MS);
    assert_eq!(p.stat(Stat::ExitDemoted), 1);
}

/// The next fork of the parent on CPU 0, at `now`.
fn next_fork(p: &NestPolicy, m: &Machine, now: u64) -> u32 {
    let choice = p.select_cpu(&mut Plat::fork(m, now), &mut TaskState::new(), 0);
    assert!(choice.idle, "{choice:?}");
    choice.cpu
}

#[test]
fn a_fork_takes_the_cpu_the_last_child_left_and_promotes_it() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    first_child_exits(&p, &m);
    assert_eq!(next_fork(&p, &m, 2 * MS), 1);
    assert_eq!(p.stat(Stat::ForkReuse), 1);
    assert!(p.primary().contains(&1), "promoted back: {:?}", p.primary());
}

#[test]
fn without_fork_reuse_the_children_rotate_over_the_primary_nest() {
    let m = Machine::new();
    let p = policy_without(&m, Mechanism::ForkReuse);
    first_child_exits(&p, &m);
    assert_eq!(next_fork(&p, &m, 2 * MS), 2, "CPU 1 left the primary nest");
    assert_eq!(p.stat(Stat::ForkReuse), 0);
}

#[test]
fn a_fork_reuses_a_warm_exit_cpu_even_after_another_task_ran_there() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    first_child_exits(&p, &m);
    // A kernel worker ran on CPU 1 after the exit and went to sleep.
    m.set_busy(&[1]);
    p.task_running(&mut TaskState::new(), 1, 2 * MS);
    block(&p, &m, 1, 3 * MS);
    assert_eq!(next_fork(&p, &m, 4 * MS), 1);
    assert_eq!(p.stat(Stat::ForkReuse), 1);
}

#[test]
fn a_fork_does_not_reuse_an_exit_cpu_that_is_busy_again() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    first_child_exits(&p, &m);
    m.set_busy(&[1]);
    p.task_running(&mut TaskState::new(), 1, 2 * MS);
    assert_eq!(next_fork(&p, &m, 3 * MS), 2);
    assert_eq!(p.stat(Stat::ForkReuse), 0);
}

#[test]
fn a_fork_does_not_reuse_an_exit_cpu_idle_longer_than_p_remove() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    first_child_exits(&p, &m);
    // (The reserve search may still find CPU 1: not as a reuse.)
    next_fork(&p, &m, MS + Params::default().p_remove_ns + 1);
    assert_eq!(p.stat(Stat::ForkReuse), 0);
}

#[test]
fn a_wakeup_does_not_reuse_the_exit_cpu() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    first_child_exits(&p, &m);
    let choice = p.select_cpu(&mut Plat::new(&m, 2 * MS), &mut TaskState::new(), 0);
    assert_eq!(choice.cpu, 2, "{choice:?}");
}

#[test]
fn the_fallback_looks_at_every_socket_before_giving_up() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    // Socket 0 is fully busy; the default placement only looks there.
    m.set_busy(&[0, 1, 2, 3, 8, 9, 10, 11]);
    let mut t = TaskState::new();
    let choice = p.select_cpu(&mut Plat::new(&m, 0), &mut t, 1);
    assert!(choice.idle);
    assert_eq!(m.socket(choice.cpu), 1);
    assert_eq!(choice.how, Stat::FallbackWide);

    // Switched off, the task is queued on its previous CPU.
    let p = policy_without(&m, Mechanism::WideFallback);
    let choice = p.select_cpu(&mut Plat::new(&m, 0), &mut t, 1);
    assert!(!choice.idle);
    assert_eq!(choice.cpu, 1);
    assert_eq!(choice.how, Stat::NoIdle);
}

#[test]
fn affinity_is_respected_in_every_step() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[0, 1], 0);
    let mut t = TaskState::new();
    let mut plat = Plat::new(&m, 0);
    plat.allowed = Some(vec![13]);
    let choice = p.select_cpu(&mut plat, &mut t, 0);
    assert_eq!(choice.cpu, 13);
    assert!(choice.idle);
}

#[test]
fn without_a_reserve_fallback_cpus_join_the_primary() {
    let m = Machine::new();
    let p = policy_without(&m, Mechanism::Reserve);
    let mut t = TaskState::new();
    let cpu = place_and_run(&p, &m, &mut t, 4, 0);
    assert_eq!(p.primary(), vec![cpu]);
    assert!(p.reserve().is_empty());
}

#[test]
fn racing_placements_never_get_the_same_idle_cpu() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    for round in 0..2000 {
        // One idle CPU left, in the primary nest; two tasks race for it.
        let last = round % 16;
        let busy: Vec<u32> = (0..16).filter(|&c| c != last).collect();
        m.set_busy(&busy);
        m.set_idle(&[last]);
        let results: Vec<bool> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let mut t = TaskState::new();
                        p.select_cpu(&mut Plat::new(&m, 0), &mut t, last).idle
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners = results.iter().filter(|&&idle| idle).count();
        assert_eq!(winners, 1, "round {round}: {results:?}");
    }
}

/// Take `cpu` offline on the machine and in the policy.
fn offline(p: &NestPolicy, m: &Machine, cpu: u32) {
    m.set_online(cpu, false);
    p.cpu_offline(cpu);
}

#[test]
fn an_offline_cpu_leaves_both_nests_and_is_never_chosen_until_online() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[1, 2], 0);
    // CPU 3 joins the reserve through the fallback.
    let others: Vec<u32> = (0..16).filter(|&c| c != 3).collect();
    m.set_busy(&others);
    place_and_run(&p, &m, &mut TaskState::new(), 3, 0);
    block(&p, &m, 3, 0);
    m.set_idle(&others);
    assert!(p.reserve().contains(&3));
    // A task attached to CPU 1.
    let mut task = TaskState::new();
    p.task_running(&mut task, 1, 0);
    p.task_running(&mut task, 1, 0);

    offline(&p, &m, 1);
    offline(&p, &m, 3);
    assert_eq!(p.primary(), vec![2]);
    assert!(!p.reserve().contains(&3), "reserve {:?}", p.reserve());

    // From every previous CPU, with the offline CPUs still flagged idle,
    // the attached task never gets them and they never rejoin a nest.
    for prev in 0..16 {
        let cpu = place_and_run(&p, &m, &mut task, prev, MS);
        assert!(cpu != 1 && cpu != 3, "offline CPU {cpu} chosen");
        block(&p, &m, cpu, MS);
        let nests = [p.primary(), p.reserve()].concat();
        assert!(!nests.contains(&1) && !nests.contains(&3), "{nests:?}");
    }
    // Only the offline CPUs idle: nothing is claimed, the task is queued.
    let busy: Vec<u32> = (0..16).filter(|&c| c != 1 && c != 3).collect();
    m.set_busy(&busy);
    let choice = p.select_cpu(&mut Plat::new(&m, 2 * MS), &mut task, 1);
    assert!(!choice.idle, "{choice:?}");
    assert_eq!(choice.how, Stat::NoIdle);

    // Back online, CPU 1 is found again and earns a nest place anew.
    m.set_online(1, true);
    p.cpu_online(1);
    let cpu = place_and_run(&p, &m, &mut TaskState::new(), 1, 3 * MS);
    assert_eq!(cpu, 1);
    assert!(p.reserve().contains(&1), "reserve {:?}", p.reserve());
}

#[test]
fn offlining_reserve_cpus_frees_their_reserve_places() {
    let m = Machine::new();
    let params = Params {
        r_max: 2,
        ..Params::default()
    };
    let p = policy(&m, params);
    for prev in [0, 4] {
        let choice = p.select_cpu(&mut Plat::new(&m, 0), &mut TaskState::new(), prev);
        assert!(choice.idle);
    }
    let full = p.reserve();
    assert_eq!(full.len(), 2);
    for &cpu in &full {
        offline(&p, &m, cpu);
    }
    assert!(p.reserve().is_empty());
    // Two new fallback CPUs fit again: the count followed the removals.
    for prev in [8, 12] {
        let choice = p.select_cpu(&mut Plat::new(&m, 0), &mut TaskState::new(), prev);
        assert!(choice.idle && !full.contains(&choice.cpu), "{choice:?}");
    }
    assert_eq!(p.reserve().len(), 2, "reserve {:?}", p.reserve());
}

const S_MAX: u64 = 8 * MS;

#[test]
fn an_idle_primary_cpu_spins_for_s_max_then_stops() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[2], 0);
    let mut t = TaskState::new();
    place_and_run(&p, &m, &mut t, 2, 10 * MS);
    let (expired, spun) = (p.stat(Stat::SpinExpired), p.stat(Stat::SpinNs));
    let until = p
        .cpu_idle(2, 11 * MS)
        .expect("a primary CPU going idle spins");
    assert_eq!(until, 11 * MS + S_MAX);
    assert!(p.spinning(2));
    // Reporting idle again while spinning changes nothing.
    assert_eq!(p.cpu_idle(2, 12 * MS), None);
    assert!(p.spin_continue(2, 18 * MS));
    assert!(!p.spin_continue(2, 19 * MS));
    assert!(!p.spinning(2));
    assert_eq!(p.stat(Stat::SpinExpired) - expired, 1);
    assert_eq!(p.stat(Stat::SpinNs) - spun, S_MAX);
}

#[test]
fn arriving_work_ends_a_spin_at_once() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[2], 0);
    let mut t = TaskState::new();
    place_and_run(&p, &m, &mut t, 2, 10 * MS);
    m.set_idle(&[2]);
    let (work, spun) = (p.stat(Stat::SpinWork), p.stat(Stat::SpinNs));
    assert!(p.cpu_idle(2, 11 * MS).is_some());
    // A task placed while the CPU spins finds it idle and claims it.
    let mut other = TaskState::new();
    let choice = p.select_cpu(&mut Plat::new(&m, 12 * MS), &mut other, 2);
    assert_eq!((choice.cpu, choice.idle), (2, true));
    p.task_running(&mut other, 2, 12 * MS);
    assert!(!p.spinning(2));
    assert_eq!(p.stat(Stat::SpinWork) - work, 1);
    assert_eq!(p.stat(Stat::SpinNs) - spun, MS);
}

#[test]
fn a_cpu_whose_sibling_runs_does_not_spin_or_stops_spinning() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[2], 0);
    // CPU 10 is CPU 2's SMT sibling.
    let mut t = TaskState::new();
    place_and_run(&p, &m, &mut t, 2, 10 * MS);
    assert!(p.cpu_idle(2, 11 * MS).is_some());
    let mut sibling_task = TaskState::new();
    p.task_running(&mut sibling_task, 10, 12 * MS);
    assert!(!p.spin_continue(2, 12 * MS));
    assert_eq!(p.stat(Stat::SpinSibling), 1);

    place_and_run(&p, &m, &mut t, 2, 13 * MS);
    assert_eq!(p.cpu_idle(2, 14 * MS), None, "sibling busy: no spin");
}

#[test]
fn only_primary_cpus_spin_and_spinning_can_be_switched_off() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    let mut t = TaskState::new();
    let cpu = place_and_run(&p, &m, &mut t, 5, 0); // a fallback CPU: reserve
    assert_eq!(p.cpu_idle(cpu, MS), None);

    let p = policy_without(&m, Mechanism::WarmSpin);
    grow_primary(&p, &m, &[2], 0);
    place_and_run(&p, &m, &mut t, 2, 10 * MS);
    assert_eq!(p.cpu_idle(2, 11 * MS), None);
    assert_eq!(p.stat(Stat::SpinStarted), 0);
}

#[test]
fn a_spinning_cpu_that_leaves_the_primary_nest_stops() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[2, 3], 0);
    let mut t = TaskState::new();
    place_and_run(&p, &m, &mut t, 2, MS);
    m.set_idle(&[2]);
    assert!(p.cpu_idle(2, 2 * MS).is_some());
    // CPU 3 ran a task just before the scan.
    p.task_running(&mut TaskState::new(), 3, 9 * MS);
    p.cpu_idle(3, 10 * MS);
    // A scan more than P_remove after CPU 2 went idle demotes it (it is
    // idle, not attached) and takes CPU 3.
    m.set_busy(&[0]);
    let mut other = TaskState::new();
    let choice = p.select_cpu(&mut Plat::new(&m, 11 * MS), &mut other, 0);
    assert_eq!(choice.cpu, 3);
    assert!(!p.primary().contains(&2));
    assert!(!p.spin_continue(2, 11 * MS));
    assert_eq!(p.stat(Stat::SpinDemoted), 1);
}

#[test]
fn a_spinning_cpu_taken_offline_stops_spinning_and_comes_back_cold() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[2], 0);
    let mut t = TaskState::new();
    place_and_run(&p, &m, &mut t, 2, 10 * MS);
    assert!(p.cpu_idle(2, 11 * MS).is_some(), "a primary CPU spins");
    offline(&p, &m, 2);
    assert!(!p.spin_continue(2, 12 * MS));
    assert_eq!(p.stat(Stat::SpinOffline), 1);
    assert_eq!(p.stat(Stat::SpinDemoted), 0);
    m.set_online(2, true);
    p.cpu_online(2);
    assert!(!p.spinning(2));
    assert!(p.primary().is_empty());
}

#[test]
fn a_queued_task_gets_a_whole_idle_core_then_an_idle_nest_cpu() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    let claim = |prev| p.claim_for_queued(&mut Plat::new(&m, MS), &mut TaskState::new(), prev);
    grow_primary(&p, &m, &[9], 0);
    // CPU 9's sibling runs: a whole idle core of the default placement
    // comes first.
    run_on(&p, &m, &[sibling(9)], MS);
    let cpu = claim(9).expect("an idle CPU");
    assert_ne!(cpu, 9);
    assert!(m.idle[sibling(cpu) as usize].load(Ordering::SeqCst));
    // No whole idle core left: the nest's CPU, half busy as it is.
    run_on(&p, &m, &(0..8).collect::<Vec<_>>(), MS);
    assert_eq!(claim(9), Some(9));
    // Nothing idle in the nests nor a whole core: the host decides.
    assert_eq!(claim(9), None);
    assert_eq!(
        p.stat(Stat::Fallback),
        1,
        "only grow_primary counted a fallback: claims are not placements"
    );
}

/// Params with `whole-cores` off: the published placement, blind to SMT.
fn smt_blind() -> Params {
    Params {
        disabled: vec![Mechanism::WholeCores],
        ..Params::default()
    }
}

#[test]
fn whole_cores_first_skips_a_primary_cpu_whose_sibling_runs() {
    for (params, want) in [(Params::default(), 2), (smt_blind(), 9)] {
        let m = Machine::new();
        let p = policy(&m, params);
        grow_primary(&p, &m, &[1, 9, 2], 0);
        run_on(&p, &m, &[sibling(9)], MS);
        let mut t = TaskState::new();
        let cpu = place_and_run(&p, &m, &mut t, 9, MS);
        assert_eq!(cpu, want, "primary {:?}", p.primary());
    }
}

/// The other SMT thread of `cpu`'s core on the modelled machine.
fn sibling(cpu: u32) -> u32 {
    cpu ^ 8
}

/// Some task starts running on each of `cpus`.
fn run_on(p: &NestPolicy, m: &Machine, cpus: &[u32], now: u64) {
    m.set_busy(cpus);
    for &cpu in cpus {
        p.task_running(&mut TaskState::new(), cpu, now);
    }
}

#[test]
fn whole_cores_first_leaves_an_attached_cpu_whose_sibling_runs() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[9, 2], 0);
    let mut t = TaskState::new();
    for now in [MS, 2 * MS] {
        assert_eq!(place_and_run(&p, &m, &mut t, 9, now), 9);
        block(&p, &m, 9, now);
    }
    // Attached to CPU 9 now; its sibling starts running a task.
    run_on(&p, &m, &[sibling(9)], 3 * MS);
    assert_eq!(place_and_run(&p, &m, &mut t, 9, 3 * MS), 2);
    assert_eq!(p.stat(Stat::Attached), 0);
}

#[test]
fn whole_cores_first_prefers_an_idle_core_outside_the_nests_to_a_half_busy_nest_cpu() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[9], 0);
    run_on(&p, &m, &[sibling(9)], MS);
    let mut t = TaskState::new();
    let cpu = place_and_run(&p, &m, &mut t, 9, MS);
    assert_ne!(cpu, 9);
    assert!(m.idle[sibling(cpu) as usize].load(Ordering::SeqCst));
    assert_eq!(p.stat(Stat::Fallback), 2, "grow_primary's and this one");
}

#[test]
fn without_a_whole_idle_core_the_nest_still_takes_a_half_busy_cpu() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[9], 0);
    // One thread of every core runs: no whole idle core anywhere.
    run_on(&p, &m, &(0..8).collect::<Vec<_>>(), MS);
    let mut t = TaskState::new();
    assert_eq!(place_and_run(&p, &m, &mut t, 9, MS), 9);
    assert_eq!(p.stat(Stat::Prev), 1);
}

#[test]
fn whole_cores_first_sees_a_sibling_claimed_a_moment_ago_as_busy() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[1, 9, 2], 0);
    // A burst of wakeups: the first task is placed but not running yet.
    let first = p.select_cpu(&mut Plat::new(&m, MS), &mut TaskState::new(), 1);
    assert_eq!(first.cpu, 1);
    let second = p.select_cpu(&mut Plat::new(&m, MS), &mut TaskState::new(), 9);
    assert_eq!(second.cpu, 2, "CPU 9 shares a core with the claimed CPU 1");
}

#[test]
fn cpus_above_64_join_the_nests_and_are_found_again() {
    // 4 sockets x 20 cores x 2 threads: the E7-8870 v4's 160 CPUs.
    let m = Machine::with(Topology::regular(4, 20, 2));
    let p = policy(&m, Params::default());
    let busy: Vec<u32> = (0..160).filter(|&c| c != 150).collect();
    m.set_busy(&busy);
    let mut t = TaskState::new();
    assert_eq!(place_and_run(&p, &m, &mut t, 149, 0), 150, "the fallback");
    assert_eq!(p.reserve(), vec![150]);
    block(&p, &m, 150, MS);
    assert_eq!(place_and_run(&p, &m, &mut t, 150, 2 * MS), 150);
    assert_eq!(p.primary(), vec![150], "promoted from the reserve");
    block(&p, &m, 150, 3 * MS);
    assert_eq!(place_and_run(&p, &m, &mut t, 150, 4 * MS), 150);
    assert_eq!(p.stat(Stat::Attached), 1);
}

/// `cpus` ran a task until `now` and went idle then: not due for
/// compaction before `now` + P_remove.
fn ran_until(p: &NestPolicy, cpus: &[u32], now: u64) {
    for &cpu in cpus {
        p.task_running(&mut TaskState::new(), cpu, now);
        p.cpu_idle(cpu, now);
    }
}

#[test]
fn whole_cores_first_compacts_no_more_than_the_published_scan() {
    let p_remove = Params::default().p_remove_ns;
    let now = p_remove + MS;
    // The scan from busy CPU 0 meets CPUs 1, 2, 3 in that order. `stale`
    // has been idle since 0; of the others, `paired` is idle with a busy
    // sibling and `whole` is a whole idle core. The published scan stops
    // at the first idle CPU, so it compacts `stale` only when it comes
    // before `paired`; the restricted pass takes `whole` either way.
    for (stale, paired, whole, compacted) in [(1, 2, 3, 1), (2, 1, 3, 0)] {
        let m = Machine::new();
        let p = policy(&m, Params::default());
        grow_primary(&p, &m, &[1, 2, 3], 0);
        ran_until(&p, &[paired, whole], now - MS);
        run_on(&p, &m, &[0, sibling(paired)], now);
        let mut t = TaskState::new();
        let cpu = place_and_run(&p, &m, &mut t, 0, now);
        assert_eq!(cpu, whole);
        assert_eq!(p.stat(Stat::Compacted), compacted, "stale CPU {stale}");
        assert_eq!(
            p.stat(Stat::StaleSpared),
            1 - compacted,
            "stale CPU {stale}"
        );
        assert_eq!(p.stat(Stat::StaleClaimed), 0);
        assert_eq!(p.primary().contains(&stale), compacted == 0);
    }
}

#[test]
fn a_task_sharing_its_core_for_two_ticks_is_moved_then_counting_restarts() {
    for (params, moves) in [(Params::default(), true), (smt_blind(), false)] {
        let m = Machine::new();
        let p = policy(&m, params);
        run_on(&p, &m, &[3], 0);
        assert!(!p.tick_unpair(3), "sibling idle");
        run_on(&p, &m, &[sibling(3)], MS);
        assert!(!p.tick_unpair(3), "first shared tick");
        assert_eq!(p.tick_unpair(3), moves, "second shared tick");
        assert!(!p.tick_unpair(3), "counting restarts after a move");
    }
    // A new task on the CPU starts the count again.
    let m = Machine::new();
    let p = policy(&m, Params::default());
    run_on(&p, &m, &[3, sibling(3)], 0);
    assert!(!p.tick_unpair(3));
    run_on(&p, &m, &[3], MS);
    assert!(!p.tick_unpair(3));
    assert!(p.tick_unpair(3));
}

/// Records the CPUs a placement tries to claim, in order; nothing is idle.
struct Recorder {
    tried: Vec<u32>,
}

impl Platform for Recorder {
    fn claim_idle(&mut self, cpu: u32) -> bool {
        self.tried.push(cpu);
        false
    }

    fn task_allowed(&self, _cpu: u32) -> bool {
        true
    }

    fn default_cpu(&mut self, prev: u32, _whole_core: bool) -> (u32, bool) {
        (prev, false)
    }

    fn pick_any_idle(&mut self) -> Option<u32> {
        None
    }

    fn now_ns(&self) -> u64 {
        0
    }

    fn cpu_idle(&self, _cpu: u32) -> bool {
        false
    }
}

#[test]
fn nest_scans_visit_members_from_the_start_cpu_wrapping_its_llc_first() {
    // 4 sockets x 20 cores x 2 threads: 160 CPUs, 3 mask words, 4 LLCs.
    let topo = Topology::regular(4, 20, 2);
    let m = Machine::with(topo.clone());
    let p = policy(&m, smt_blind());
    let n = topo.nr_cpus() as u32;
    let primary: Vec<u32> = (0..n).filter(|c| c * 37 % 11 < 3).collect();
    let reserve: Vec<u32> = (0..n)
        .filter(|c| !primary.contains(c))
        .step_by(31)
        .collect();
    let only_idle = |cpu: u32| {
        let others: Vec<u32> = (0..n).filter(|&c| c != cpu).collect();
        m.set_busy(&others);
        m.set_idle(&[cpu]);
        let choice = p.select_cpu(&mut Plat::new(&m, 0), &mut TaskState::new(), cpu);
        assert_eq!((choice.cpu, choice.idle), (cpu, true));
    };
    for &cpu in &primary {
        only_idle(cpu); // the fallback: reserve
        only_idle(cpu); // found in the reserve: promoted
    }
    for &cpu in &reserve {
        only_idle(cpu);
    }
    assert_eq!(p.primary(), primary);
    assert_eq!(p.reserve(), reserve);

    // From `start`, wrapping: `llc`'s members first, then the others.
    let order = |members: &[u32], start: u32, llc: u32| -> Vec<u32> {
        let from_start = (0..n)
            .map(|i| (start + i) % n)
            .filter(|c| members.contains(c));
        let in_llc = |&c: &u32| topo.place(c).unwrap().llc == llc;
        let (mut first, rest): (Vec<u32>, Vec<u32>) = from_start.partition(in_llc);
        first.extend(rest);
        first
    };
    for prev in [0, 5, 63, 64, 65, 100, 127, 128, 159] {
        let mut rec = Recorder { tried: Vec::new() };
        let choice = p.select_cpu(&mut rec, &mut TaskState::new(), prev);
        assert!(!choice.idle);
        let llc = topo.place(prev).unwrap().llc;
        let mut want = order(&primary, prev, llc);
        want.extend(order(&reserve, 0, llc));
        assert_eq!(rec.tried, want, "prev {prev}");
    }
}

#[test]
fn mechanism_names_parse_and_unknown_ones_list_the_valid_ones() {
    for m in Mechanism::ALL {
        assert_eq!(Mechanism::parse(m.name()), Ok(m));
    }
    let err = Mechanism::parse("spinning").unwrap_err();
    assert_eq!(
        err,
        "unknown mechanism 'spinning'; valid: attach, reserve, impatience, compaction, \
         exit-demotion, wide-fallback, warm-spin, whole-cores, fork-reuse, warm-prev, \
         keep-attached"
    );
}

/// A host on which nothing is idle, and which fails the test if the
/// placement searches anyway.
struct Overloaded;

impl Platform for Overloaded {
    fn claim_idle(&mut self, cpu: u32) -> bool {
        panic!("claimed CPU {cpu} with nothing idle")
    }

    fn task_allowed(&self, _cpu: u32) -> bool {
        true
    }

    fn default_cpu(&mut self, prev: u32, _whole_core: bool) -> (u32, bool) {
        panic!("asked the default placement (previous CPU {prev}) with nothing idle")
    }

    fn pick_any_idle(&mut self) -> Option<u32> {
        panic!("searched every CPU with nothing idle")
    }

    fn now_ns(&self) -> u64 {
        10 * MS
    }

    fn cpu_idle(&self, _cpu: u32) -> bool {
        false
    }

    fn any_idle(&self) -> bool {
        false
    }
}

#[test]
fn with_nothing_idle_a_placement_searches_nothing() {
    let m = Machine::new();
    let p = policy(&m, Params::default());
    grow_primary(&p, &m, &[0, 1, 4], 0);
    let primary = p.primary();
    let mut task = TaskState::new();
    let choice = p.select_cpu(&mut Overloaded, &mut task, 1);
    assert!(!choice.idle, "{choice:?}");
    assert_eq!(choice.cpu, 1, "the task stays with its previous CPU");
    assert_eq!(p.stat(Stat::NoIdle), 1);
    assert_eq!(p.primary(), primary, "the nests are left alone");
    assert_eq!(p.claim_for_queued(&mut Overloaded, &mut task, 1), None);
}
