//! The schedule replayed from events: who ran where and when, who waited,
//! run-queue lengths, frequencies, and work-conservation violations.
//!
//! Every metric and picture reads a [`Timeline`]. Rules of the replay:
//!
//! - A CPU's state is unknown until its first `Switch`; that switch says
//!   its `prev` task ran since the start of the trace.
//! - A task is *waiting* (runnable, not running) from a `Wakeup` (on the
//!   target CPU) or from being switched out `Runnable` (on that CPU) until it
//!   is switched in; a `Migrate` moves a waiting task to the new CPU.
//! - A CPU's run-queue length is 1 if it runs a task, plus its waiting tasks.
//! - Runs and waits still open at the end of the trace end there.
//! - `NestChange` and `WarmSpin` (Nest's own events) are kept per CPU; they
//!   do not change whether a CPU counts as idle.
//! - A task switched in on one CPU while still running on another (lost
//!   events) ends its run there; that CPU becomes idle.

use std::collections::{BTreeMap, HashMap};

use crate::model::{Cpu, EventKind, Nest, Pid, PrevState, Topology, Trace};

/// A task running on a CPU from `start` to `end` (ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub cpu: Cpu,
    pub pid: Pid,
    pub start: u64,
    pub end: u64,
}

/// A task runnable but not running, queued on `cpu` (the CPU it was on when
/// the wait ended), from `start` to `end`. `woken` is set when the wait began
/// with a wakeup (not a preemption).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wait {
    pub cpu: Cpu,
    pub pid: Pid,
    pub start: u64,
    pub end: u64,
    pub woken: bool,
}

/// A value that holds from `ts` until the next step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub ts: u64,
    pub value: u32,
}

/// Each step's value and how long it held within `[from, to)` (the last
/// step holds until `to`).
pub fn step_spans(steps: &[Step], from: u64, to: u64) -> impl Iterator<Item = (u32, u64)> + '_ {
    steps.iter().enumerate().map(move |(i, step)| {
        let end = steps.get(i + 1).map_or(to, |next| next.ts).min(to);
        (step.value, end.saturating_sub(step.ts.max(from)))
    })
}

/// A time when some CPU was idle (nothing running, nothing queued) while
/// another CPU ran a task and had at least one more task waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Violation {
    pub start: u64,
    pub end: u64,
    /// Largest number of idle CPUs during the violation.
    pub idle_cpus: u32,
    /// Largest number of tasks queued behind a running task (of those
    /// that count, see [`Timeline::build_counting`]).
    pub queued_tasks: u32,
}

/// The replayed schedule. See the module documentation for the rules.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    pub topology: Topology,
    /// Time of the last event (the trace starts at 0).
    pub end_ns: u64,
    /// Number of CPUs: the topology's, or more if events name more.
    pub nr_cpus: usize,
    /// Runs of positive length, in the order they ended.
    pub runs: Vec<Run>,
    /// Waits, in the order they ended.
    pub waits: Vec<Wait>,
    /// `(pid, ns)` from each wakeup to the switch-in that followed it.
    pub wakeup_latencies: Vec<(Pid, u64)>,
    /// Migrate events per task.
    pub migrations: BTreeMap<Pid, u64>,
    /// Last known name of each task.
    pub names: BTreeMap<Pid, String>,
    /// Run-queue length steps per CPU (empty while the CPU is unknown).
    pub rq_len: Vec<Vec<Step>>,
    /// Number of CPUs running a task, over time.
    pub running: Vec<Step>,
    /// Frequency (kHz) steps per CPU.
    pub freq: Vec<Vec<Step>>,
    /// All violations of work conservation, however short.
    pub violations: Vec<Violation>,
    /// Nest membership steps per CPU (0 none, 1 reserve, 2 primary), from
    /// `NestChange` events.
    pub nest: Vec<Vec<Step>>,
    /// `(cpu, duration_ns, interrupted)` of each `WarmSpin` event.
    pub warm_spins: Vec<(Cpu, u64, bool)>,
}

#[derive(Clone, Copy)]
enum TaskState {
    Running(Cpu),
    Waiting { cpu: Cpu, since: u64, woken: bool },
    Sleeping,
}

#[derive(Clone, Copy, Default)]
struct CpuState {
    known: bool,
    current: Pid,
    since: u64,
    queued: u32,
    /// Queued tasks that count for work conservation.
    queued_counted: u32,
}

impl Timeline {
    /// Replay `trace`.
    pub fn build(trace: &Trace) -> Self {
        Self::build_counting(trace, |_| true)
    }

    /// Replay `trace`, keeping only the runs of `root` and the tasks it
    /// forked (a recorded command's work, without the rest of the machine).
    pub fn of_tree(trace: &Trace, root: Pid) -> Self {
        let mut timeline = Self::build(trace);
        timeline.keep_tree(trace, root);
        timeline
    }

    /// Drop the runs of every task but `root` and what it forked.
    pub fn keep_tree(&mut self, trace: &Trace, root: Pid) {
        let tree = trace.descendants(root);
        self.runs.retain(|r| tree.contains(&r.pid));
    }

    /// Replay `trace`, counting only the waiting tasks for which `counts`
    /// is true in work-conservation [`violations`](Self::violations): the
    /// trace does not say which CPUs a task may use, so a task pinned to
    /// its CPU (a per-CPU kernel thread) waiting there beside an idle CPU
    /// looks like a violation; leave such tasks out when they are known.
    /// Everything else is as in [`build`](Self::build).
    pub fn build_counting(trace: &Trace, counts: impl Fn(Pid) -> bool) -> Self {
        let max_cpu = trace.events.iter().map(|e| e.cpu + 1).max().unwrap_or(0) as usize;
        let nr_cpus = trace.topology.nr_cpus().max(max_cpu);
        let mut b = Builder {
            tl: Timeline {
                topology: trace.topology.clone(),
                end_ns: trace.end_ns(),
                nr_cpus,
                rq_len: vec![Vec::new(); nr_cpus],
                freq: vec![Vec::new(); nr_cpus],
                nest: vec![Vec::new(); nr_cpus],
                ..Default::default()
            },
            cpus: vec![CpuState::default(); nr_cpus],
            tasks: HashMap::new(),
            open: None,
            last_ts: 0,
            counts: &counts,
        };
        for e in &trace.events {
            if e.ts_ns > b.last_ts {
                b.settle();
                b.last_ts = e.ts_ns;
            }
            b.event(e.ts_ns, e.cpu, &e.kind);
        }
        b.finish()
    }

    /// The socket of `cpu` (0 when the topology does not know it).
    pub fn socket(&self, cpu: Cpu) -> u32 {
        self.topology.place(cpu).map_or(0, |p| p.socket)
    }

    /// The physical core of `cpu` (SMT siblings share it; unique across
    /// the machine). Without a topology every CPU is its own core.
    pub fn core(&self, cpu: Cpu) -> u32 {
        self.topology.place(cpu).map_or(cpu, |p| p.core)
    }

    /// The name of `pid`, or empty.
    pub fn name(&self, pid: Pid) -> &str {
        self.names.get(&pid).map_or("", String::as_str)
    }
}

struct Builder<'a> {
    tl: Timeline,
    cpus: Vec<CpuState>,
    tasks: HashMap<Pid, TaskState>,
    /// The violation in progress.
    open: Option<Violation>,
    last_ts: u64,
    /// Does a waiting task count for work conservation?
    counts: &'a dyn Fn(Pid) -> bool,
}

impl Builder<'_> {
    fn event(&mut self, ts: u64, cpu: Cpu, kind: &EventKind) {
        match kind {
            EventKind::Switch {
                prev,
                prev_state,
                next,
            } => self.switch(ts, cpu, *prev, *prev_state, *next),
            EventKind::Wakeup {
                pid, target_cpu, ..
            } => self.wakeup(ts, *pid, *target_cpu),
            EventKind::Migrate { pid, to, .. } => self.migrate(ts, *pid, *to),
            EventKind::NewTask { child, comm, .. } => self.name(*child, comm),
            EventKind::Exec { pid, comm } | EventKind::TaskName { pid, comm } => {
                self.name(*pid, comm)
            }
            EventKind::Frequency { khz } => push_step(&mut self.tl.freq[cpu as usize], ts, *khz),
            EventKind::NestChange { nest } => {
                let v = match nest {
                    Nest::None => 0,
                    Nest::Reserve => 1,
                    Nest::Primary => 2,
                };
                push_step(&mut self.tl.nest[cpu as usize], ts, v);
            }
            EventKind::WarmSpin {
                duration_ns,
                interrupted,
            } => self.tl.warm_spins.push((cpu, *duration_ns, *interrupted)),
            _ => {}
        }
    }

    fn name(&mut self, pid: Pid, comm: &str) {
        self.tl.names.insert(pid, comm.to_string());
    }

    fn switch(&mut self, ts: u64, cpu: Cpu, prev: Pid, prev_state: PrevState, next: Pid) {
        let c = cpu as usize;
        if !self.cpus[c].known {
            self.cpus[c] = CpuState {
                known: true,
                current: prev,
                since: 0,
                ..self.cpus[c]
            };
        }
        let cur = self.cpus[c];
        if cur.current != 0 && ts > cur.since {
            self.tl.runs.push(Run {
                cpu,
                pid: cur.current,
                start: cur.since,
                end: ts,
            });
        }
        if prev != 0 {
            let state = match prev_state {
                PrevState::Runnable => TaskState::Waiting {
                    cpu,
                    since: ts,
                    woken: false,
                },
                _ => TaskState::Sleeping,
            };
            self.set_task(ts, prev, state);
        }
        self.cpus[c].current = next;
        self.cpus[c].since = ts;
        if next != 0 {
            self.leave_other_cpu(ts, next, cpu);
            self.set_task(ts, next, TaskState::Running(cpu));
        }
        self.update_rq(ts, cpu);
        let running = self.cpus.iter().filter(|s| s.current != 0).count() as u32;
        push_step(&mut self.tl.running, ts, running);
    }

    /// After lost events a task can be switched in while still running
    /// elsewhere: end that run and leave that CPU idle.
    fn leave_other_cpu(&mut self, ts: u64, pid: Pid, cpu: Cpu) {
        let Some(&TaskState::Running(other)) = self.tasks.get(&pid) else {
            return;
        };
        let o = &mut self.cpus[other as usize];
        if other == cpu || o.current != pid {
            return;
        }
        if ts > o.since {
            let run = Run {
                cpu: other,
                pid,
                start: o.since,
                end: ts,
            };
            self.tl.runs.push(run);
        }
        o.current = 0;
        o.since = ts;
        self.update_rq(ts, other);
    }

    fn wakeup(&mut self, ts: u64, pid: Pid, target: Cpu) {
        let state = match self.tasks.get(&pid) {
            Some(TaskState::Running(_)) => return,
            Some(TaskState::Waiting { since, woken, .. }) => TaskState::Waiting {
                cpu: target,
                since: *since,
                woken: *woken,
            },
            _ => TaskState::Waiting {
                cpu: target,
                since: ts,
                woken: true,
            },
        };
        self.set_task(ts, pid, state);
    }

    fn migrate(&mut self, ts: u64, pid: Pid, to: Cpu) {
        *self.tl.migrations.entry(pid).or_default() += 1;
        if let Some(&TaskState::Waiting { since, woken, .. }) = self.tasks.get(&pid) {
            let state = TaskState::Waiting {
                cpu: to,
                since,
                woken,
            };
            self.set_task(ts, pid, state);
        }
    }

    /// Change a task's state, keeping queues, waits and latencies in step.
    fn set_task(&mut self, ts: u64, pid: Pid, new: TaskState) {
        let counted = u32::from((self.counts)(pid));
        if let Some(TaskState::Waiting { cpu, since, woken }) = self.tasks.get(&pid).copied() {
            self.cpus[cpu as usize].queued -= 1;
            self.cpus[cpu as usize].queued_counted -= counted;
            self.update_rq(ts, cpu);
            if let TaskState::Running(_) | TaskState::Sleeping = new {
                self.end_wait(
                    ts,
                    pid,
                    cpu,
                    since,
                    woken,
                    matches!(new, TaskState::Running(_)),
                );
            }
        }
        if let TaskState::Waiting { cpu, .. } = new {
            self.ensure_cpu(cpu);
            self.cpus[cpu as usize].queued += 1;
            self.cpus[cpu as usize].queued_counted += counted;
            self.update_rq(ts, cpu);
        }
        self.tasks.insert(pid, new);
    }

    fn end_wait(&mut self, ts: u64, pid: Pid, cpu: Cpu, since: u64, woken: bool, ran: bool) {
        self.tl.waits.push(Wait {
            cpu,
            pid,
            start: since,
            end: ts,
            woken,
        });
        if woken && ran {
            self.tl.wakeup_latencies.push((pid, ts - since));
        }
    }

    /// Grow per-CPU vectors for CPUs named only as wakeup or migration
    /// targets beyond the ones events happened on.
    fn ensure_cpu(&mut self, cpu: Cpu) {
        let n = cpu as usize + 1;
        if self.cpus.len() < n {
            self.cpus.resize(n, CpuState::default());
            self.tl.rq_len.resize(n, Vec::new());
            self.tl.freq.resize(n, Vec::new());
            self.tl.nest.resize(n, Vec::new());
            self.tl.nr_cpus = n;
        }
    }

    fn update_rq(&mut self, ts: u64, cpu: Cpu) {
        let s = self.cpus[cpu as usize];
        if s.known {
            let len = u32::from(s.current != 0) + s.queued;
            push_step(&mut self.tl.rq_len[cpu as usize], ts, len);
        }
    }

    /// Evaluate work conservation for the state holding from `last_ts`.
    fn settle(&mut self) {
        let idle = self
            .cpus
            .iter()
            .filter(|s| s.known && s.current == 0 && s.queued == 0)
            .count() as u32;
        let queued: u32 = self
            .cpus
            .iter()
            .filter(|s| s.known && s.current != 0)
            .map(|s| s.queued_counted)
            .sum();
        let ts = self.last_ts;
        match (&mut self.open, idle > 0 && queued > 0) {
            (Some(v), true) => {
                v.idle_cpus = v.idle_cpus.max(idle);
                v.queued_tasks = v.queued_tasks.max(queued);
            }
            (Some(_), false) => self.close_violation(ts),
            (None, true) => {
                self.open = Some(Violation {
                    start: ts,
                    end: ts,
                    idle_cpus: idle,
                    queued_tasks: queued,
                })
            }
            (None, false) => {}
        }
    }

    fn close_violation(&mut self, ts: u64) {
        if let Some(mut v) = self.open.take() {
            v.end = ts;
            if v.end > v.start {
                self.tl.violations.push(v);
            }
        }
    }

    fn finish(mut self) -> Timeline {
        let end = self.tl.end_ns;
        self.settle();
        self.close_violation(end);
        for (c, s) in self.cpus.iter().enumerate() {
            if s.known && s.current != 0 && end > s.since {
                self.tl.runs.push(Run {
                    cpu: c as Cpu,
                    pid: s.current,
                    start: s.since,
                    end,
                });
            }
        }
        let mut open: Vec<(Pid, TaskState)> = self.tasks.iter().map(|(p, s)| (*p, *s)).collect();
        open.sort_by_key(|(p, _)| *p);
        for (pid, state) in open {
            if let TaskState::Waiting { cpu, since, woken } = state
                && end > since
            {
                self.end_wait(end, pid, cpu, since, woken, false);
            }
        }
        self.tl
    }
}

/// Append a step, replacing one at the same time (only the last value at a
/// time counts) and skipping repeats.
fn push_step(steps: &mut Vec<Step>, ts: u64, value: u32) {
    if let Some(last) = steps.last_mut()
        && last.ts == ts
    {
        last.value = value;
        let n = steps.len();
        if n >= 2 && steps[n - 2].value == value {
            steps.pop();
        }
        return;
    }
    if steps.last().is_some_and(|s| s.value == value) {
        return;
    }
    steps.push(Step { ts, value });
}

/// The value of `steps` at time `ts` (`None` before the first step).
pub fn value_at(steps: &[Step], ts: u64) -> Option<u32> {
    let i = steps.partition_point(|s| s.ts <= ts);
    (i > 0).then(|| steps[i - 1].value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Event;

    #[test]
    fn a_task_never_runs_on_two_cpus_after_lost_events() {
        let sw = |ts_ns, cpu, prev, next| Event {
            ts_ns,
            cpu,
            kind: EventKind::Switch {
                prev,
                prev_state: PrevState::Blocked,
                next,
            },
        };
        // Task 5 starts on cpu0; its switch-out there was lost; it shows up
        // on cpu1 at 10 and blocks at 20.
        let trace = Trace {
            topology: Topology::flat(2),
            meta: vec![],
            events: vec![
                sw(0, 0, 0, 5),
                sw(0, 1, 9, 0),
                sw(10, 1, 0, 5),
                sw(20, 1, 5, 0),
            ],
        };
        let tl = Timeline::build(&trace);
        let runs: Vec<(Cpu, u64, u64)> = tl.runs.iter().map(|r| (r.cpu, r.start, r.end)).collect();
        assert_eq!(runs, vec![(0, 0, 10), (1, 10, 20)]);
        assert_eq!(value_at(&tl.running, 15), Some(1));
    }

    #[test]
    fn only_counted_waiting_tasks_make_violations() {
        let ev = |ts_ns, cpu, kind| Event { ts_ns, cpu, kind };
        let sw = |prev, next| EventKind::Switch {
            prev,
            prev_state: PrevState::Blocked,
            next,
        };
        // CPU 1 idle from 0; task 5 runs on CPU 0 while 6 (10..20) and
        // then 7 (30..40) wait there.
        let trace = Trace {
            topology: Topology::flat(2),
            meta: vec![],
            events: vec![
                ev(0, 0, sw(0, 5)),
                ev(0, 1, sw(9, 0)),
                ev(
                    10,
                    0,
                    EventKind::Wakeup {
                        pid: 6,
                        target_cpu: 0,
                        waker: None,
                    },
                ),
                ev(20, 0, sw(5, 6)),
                ev(25, 0, sw(6, 5)),
                ev(
                    30,
                    0,
                    EventKind::Wakeup {
                        pid: 7,
                        target_cpu: 0,
                        waker: None,
                    },
                ),
                ev(40, 0, sw(5, 7)),
            ],
        };
        let spans = |tl: Timeline| -> Vec<(u64, u64)> {
            tl.violations.iter().map(|v| (v.start, v.end)).collect()
        };
        assert_eq!(spans(Timeline::build(&trace)), vec![(10, 20), (30, 40)]);
        let tl = Timeline::build_counting(&trace, |pid| pid != 6);
        assert_eq!(spans(tl), vec![(30, 40)]);
    }
}
