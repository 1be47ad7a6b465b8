//! The kernel's load balancing in the engine (the Linux model's, also
//! S_local's and S_move's): when it runs and what it moves, under both
//! generations of the fair scheduler. Rules that need a hand-built state
//! are tested in `policy/load_balance.rs`.

use std::collections::BTreeMap;

use nest_sim::policy::fork_balance::LinuxVersion;
use nest_sim::policy::{Ctx, Policy, TaskId, Wake};
use nest_sim::workload::{Workload, rtapp};
use nest_sim::{Governor, Machine, RunResult, SimConfig};
use nest_trace::{Cpu, EventKind, Trace};

const MS: u64 = 1_000_000;

const BOTH: [LinuxVersion; 2] = [LinuxVersion::Linux510, LinuxVersion::Linux7];

/// Places task `i` on `cpus[i]` when it starts (CPU 0 past the end) and
/// wakes every task where it last ran: only balancing moves them.
struct Pinned {
    cpus: Vec<Cpu>,
}

impl Policy for Pinned {
    fn name(&self) -> String {
        "pinned".into()
    }

    fn select_cpu(
        &mut self,
        _cx: &mut Ctx,
        task: TaskId,
        prev: Cpu,
        _waker: Option<Cpu>,
        why: Wake,
    ) -> Cpu {
        match why {
            Wake::Fork => self.cpus.get(task as usize).copied().unwrap_or(0),
            Wake::Wakeup { .. } => prev,
        }
    }
}

/// The 2 sockets x 4 cores x 2 threads guest: socket 0 holds CPUs 0-3 and
/// their SMT siblings 8-11, socket 1 CPUs 4-7 and 12-15.
fn guest() -> Machine {
    Machine::builtin("test-guest-2s").unwrap()
}

fn run(w: &str, cpus: Vec<Cpu>, version: LinuxVersion) -> RunResult {
    let w: Workload = rtapp::parse(w, "inline").unwrap();
    let mut cfg = SimConfig::new(guest(), Governor::Performance, 1);
    cfg.record_trace = true;
    cfg.linux = version;
    nest_sim::run(cfg, &w, &mut Pinned { cpus }).unwrap()
}

/// When each CPU first ran a task, ns.
fn first_run(t: &Trace) -> BTreeMap<Cpu, u64> {
    let mut first = BTreeMap::new();
    for e in &t.events {
        if let EventKind::Switch { next, .. } = e.kind
            && next != 0
        {
            first.entry(e.cpu).or_insert(e.ts_ns);
        }
    }
    first
}

#[test]
fn periodic_balancing_waits_for_each_domains_interval() {
    // Eight CPU hogs start on CPU 0. Idle CPUs balance their SMT domain
    // every 2 ms (a jiffy at 250 Hz), their LLC every 8 ms, their NUMA
    // domain every 16 ms: CPU 0's sibling pulls at the first tick, the
    // other cores of the socket at the second. A task waiting behind
    // another has just been preempted at each tick, so it is cache-hot
    // when the idle CPUs balance: the other socket gets nothing before its
    // NUMA balance has failed more than cache_nice_tries = 2 times (its
    // fourth, at 64 ms, may take a hot task; with none left waiting, its
    // fifth pushes a running one).
    let hogs = r#"{"tasks": {"hog": {"instance": 8, "loop": 1, "run": 100000}}}"#;
    for v in BOTH {
        let r = run(hogs, vec![0; 8], v);
        let first = first_run(r.trace.as_ref().unwrap());
        assert_eq!(first.get(&8), Some(&(4 * MS)), "{v:?}: {first:?}");
        for cpu in [1, 2, 3, 9, 10, 11] {
            let t = first.get(&cpu).copied().unwrap_or(u64::MAX);
            assert!(
                t >= 8 * MS,
                "{v:?}: CPU {cpu} at {t} ns, LLC balanced too early"
            );
        }
        let socket_1 = first.iter().filter(|&(&c, _)| c / 4 % 2 == 1);
        let earliest = socket_1.map(|(_, &t)| t).min().unwrap_or(u64::MAX);
        assert!(
            [64 * MS, 80 * MS].contains(&earliest),
            "{v:?}: socket 1 at {earliest} ns"
        );
    }
}

/// Two 20 ms hogs (tasks 0 and 1) and a 1.5 ms task (task 2).
const TWO_HOGS_AND_A_SHORT_TASK: &str = r#"{"tasks": {
    "hog": {"instance": 2, "loop": 1, "run": 20000},
    "short": {"instance": 1, "loop": 1, "run": 1500}}}"#;

#[test]
fn a_cpu_going_idle_pulls_a_waiting_task_at_once() {
    // Two hogs on CPU 0; CPU 1 runs a short task. When it ends, CPU 1
    // balances newly idle and takes the hog that has not run yet (cache
    // cold), before any tick.
    for v in BOTH {
        let r = run(TWO_HOGS_AND_A_SHORT_TASK, vec![0, 0, 1], v);
        let t = r.trace.as_ref().unwrap();
        let short_end = r.tasks[2].end_ns.unwrap();
        assert!(short_end < 4 * MS, "{v:?}: {short_end}");
        let pulled = t
            .events
            .iter()
            .find(|e| e.cpu == 1 && matches!(e.kind, EventKind::Switch { next: 2, .. }));
        assert_eq!(pulled.map(|e| e.ts_ns), Some(short_end), "{v:?}");
    }
}

#[test]
fn a_pair_stays_on_its_node_when_the_other_node_goes_idle() {
    // As above, but the short task runs on the other socket (CPU 4). When
    // it ends, CPU 4 balances newly idle up to its NUMA domain, which
    // allows a node to keep a pair of tasks (adjust_numa_imbalance()):
    // the hogs stay on socket 0, and one of them moves to CPU 0's idle
    // sibling at the first tick.
    for v in BOTH {
        let r = run(TWO_HOGS_AND_A_SHORT_TASK, vec![0, 0, 4], v);
        let t = r.trace.as_ref().unwrap();
        let hog_moved = t
            .events
            .iter()
            .find(|e| e.cpu != 0 && matches!(e.kind, EventKind::Switch { next: 1 | 2, .. }));
        assert_eq!(
            hog_moved.map(|e| (e.cpu, e.ts_ns)),
            Some((8, 4 * MS)),
            "{v:?}"
        );
    }
}

#[test]
fn a_fork_chain_avoids_the_core_its_last_child_left() {
    // A parent forks six 20 ms children one after the other, waiting for
    // each. Linux 5.10 keeps them in the parent's LLC and, among its idle
    // cores, takes the least utilised (update_pick_idlest()). An exited
    // child's utilisation stays in its CPU's until that CPU's next PELT
    // update (remove_entity_load_avg()), which for an idle CPU comes from
    // the idle CPUs' periodic blocked-load update, at most every 32 ms: so
    // the next child goes to another core, not back to the one just left.
    let chain = r#"{"tasks": {
        "parent": {"instance": 1, "loop": 6,
                   "fork0": "child", "wait_children1": true, "run2": 2000},
        "child": {"instance": 0, "run": 20000}}}"#;
    let w: Workload = rtapp::parse(chain, "inline").unwrap();
    // At one speed (2.3 GHz), so that no blocked-load update falls between
    // a child's exit and the next fork.
    let machine = Machine::builtin("test-guest-2s-tcg").unwrap();
    let mut cfg = SimConfig::new(machine, Governor::Performance, 1);
    cfg.record_trace = true;
    cfg.linux = LinuxVersion::Linux510;
    let r = nest_sim::run(cfg, &w, &mut nest_sim::policy::baseline::Baseline).unwrap();
    let core = |cpu: Cpu| cpu % 8;
    let children: Vec<Cpu> =
        r.tasks[1..]
            .iter()
            .map(|t| {
                let first =
                    r.trace.as_ref().unwrap().events.iter().find(
                        |e| matches!(e.kind, EventKind::Switch { next, .. } if next == t.pid),
                    );
                first.unwrap().cpu
            })
            .collect();
    assert_eq!(children.len(), 6);
    for pair in children.windows(2) {
        assert_ne!(core(pair[0]), core(pair[1]), "children on {children:?}");
    }
}
