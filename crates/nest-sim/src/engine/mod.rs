//! The discrete-event engine.
//!
//! Time is in nanoseconds. Events are kept in a binary heap ordered by
//! (time, sequence number), so simultaneous events run in the order they
//! were created and a run is a pure function of its inputs and seed.
//!
//! Split by concern: `kernel` holds the simulated machine and task state
//! that policies may read; `task` interprets task programs; `cpu` does
//! context switches, idling and warm spinning; `balance` the kernel's load
//! balancing; `fair` the fair scheduler's virtual runtime and wakeup
//! preemption (`linux-5.10`); `idle` the cores' idle states; `step` runs
//! the periodic frequency step, tick and accounting; `sugov` schedutil's
//! frequency requests.

mod balance;
mod cpu;
mod fair;
mod idle;
mod kernel;
mod queue;
mod step;
mod sugov;
mod task;
mod vcpu;

use anyhow::{Result, bail};
use nest_trace::{Event, EventKind, Trace};

use balance::Balancer;
pub use kernel::{Action, Interval, Kernel, TaskPhase, TaskStats};
use queue::{Key, key_time};

use crate::governor::Governor;
use crate::machine::Machine;
use crate::policy::fork_balance::LinuxVersion;
use crate::policy::{Ctx, Policy};
use crate::results::RunResult;
use crate::workload::Workload;

/// Everything that parametrises one run besides the policy.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub machine: Machine,
    pub governor: Governor,
    pub seed: u64,
    /// Scheduler tick frequency (Linux HZ).
    pub tick_hz: u32,
    /// Period of the frequency/power/accounting step.
    pub dvfs_step_ns: u64,
    /// Time slice before a task with queued competitors is preempted at a tick.
    pub slice_ns: u64,
    /// Stop after this much simulated time even if tasks remain.
    pub max_time_ns: u64,
    /// Run the kernel's periodic and newly-idle load balancing.
    pub load_balance: bool,
    /// The generation of the fair scheduler the Linux model follows.
    pub linux: LinuxVersion,
    /// Record the schedule as a nest-trace [`Trace`].
    pub record_trace: bool,
    /// Report progress on stderr (about once a second of wall time).
    pub progress: bool,
}

impl SimConfig {
    /// Defaults: 250 Hz tick, 1 ms frequency step, 3 ms slice (EEVDF base
    /// slice on machines with 8 or more CPUs), load balancing on.
    pub fn new(machine: Machine, governor: Governor, seed: u64) -> Self {
        Self {
            machine,
            governor,
            seed,
            tick_hz: 250,
            dvfs_step_ns: 1_000_000,
            slice_ns: 3_000_000,
            max_time_ns: 600_000_000_000,
            load_balance: true,
            linux: LinuxVersion::default(),
            record_trace: false,
            progress: false,
        }
    }

    pub fn tick_ns(&self) -> u64 {
        1_000_000_000 / u64::from(self.tick_hz.max(1))
    }
}

/// Kinds of scheduled events. Ties in time are broken by creation order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ev {
    /// The current run segment of `cpu` ends (stale if `epoch` differs).
    Done { cpu: u32, epoch: u32 },
    /// A sleeping task's sleep ends.
    WakeTask { task: u32 },
    /// An initial task of `program` starts late (rt-app `delay`).
    Start { program: usize },
    /// A warm spin of `cpu` reaches its maximum length.
    SpinEnd { cpu: u32, epoch: u32 },
    /// A policy timer.
    Timer { token: u64 },
    /// The scheduler tick (all CPUs).
    Tick,
    /// The frequency/accounting step (all cores).
    Step,
    /// A guest's idle vCPU, woken for a task, runs again (engine/vcpu.rs).
    VcpuUp { cpu: u32 },
    /// A kick to preempt reaches a guest's busy vCPU (engine/vcpu.rs).
    VcpuKicked { cpu: u32, task: u32 },
}

/// A simulation: kernel state plus the policy deciding placements.
pub struct Sim<'p> {
    pub(crate) k: Kernel,
    pub(crate) policy: &'p mut dyn Policy,
    /// The policy keeps its own queues ([`Policy::owns_queues`]).
    pub(crate) owns_queues: bool,
    /// The policy has a tick ([`Policy::ticks`]).
    pub(crate) policy_ticks: bool,
    /// The kernel's load balancing state (empty when the engine does not
    /// balance).
    pub(crate) lb: Balancer,
}

impl<'p> Sim<'p> {
    pub fn new(cfg: SimConfig, workload: &Workload, policy: &'p mut dyn Policy) -> Result<Self> {
        if workload.nr_initial_tasks() == 0 {
            bail!("workload `{}` starts no task", workload.name);
        }
        check_cpus(workload, cfg.machine.nr_cpus())?;
        let mut k = Kernel::new(cfg, workload);
        let owns_queues = policy.owns_queues();
        // CFS's wakeup preemption, for the kernel's run queues under 5.10.
        if k.cfg.linux == LinuxVersion::Linux510 && !owns_queues {
            k.cfs = Some(fair::CfsTunables::for_cpus(k.cpus.len()));
        }
        let policy_ticks = policy.ticks();
        let lb = if k.cfg.load_balance && !owns_queues {
            let hz = k.cfg.tick_hz;
            Balancer::new(&Ctx { k: &mut k }, hz)
        } else {
            Balancer::default()
        };
        Ok(Self {
            k,
            owns_queues,
            policy_ticks,
            policy,
            lb,
        })
    }

    /// Runs to completion (or `max_time_ns`) and returns the results.
    pub fn run(mut self) -> RunResult {
        self.start();
        let mut progress = Progress::new(self.k.cfg.progress);
        loop {
            let next = self.k.queue.pop();
            let key = next.as_ref().map_or(Key::MAX, |&(key, _)| key);
            if self.ends_run(key) && self.replay_superseded(key) {
                break;
            }
            let Some((key, ev)) = next else { break };
            let t = key_time(key);
            if t > self.k.cfg.max_time_ns {
                break;
            }
            self.k.now = t;
            self.k.nr_events += 1;
            self.dispatch(ev);
            progress.tick(&self.k);
            let last = !self.k.tasks_remain() || self.k.stop_at.is_some_and(|s| t >= s);
            self.count_superseded(key, last);
            if last {
                break;
            }
        }
        progress.done();
        self.finish()
    }

    /// Whether the run stops at an event with `key` (before or after
    /// processing it; `Key::MAX`: no event left).
    fn ends_run(&self, key: Key) -> bool {
        let t = key_time(key);
        key == Key::MAX || t > self.k.cfg.max_time_ns || self.k.stop_at.is_some_and(|s| t >= s)
    }

    /// Before the event that ends the run (`key`): processes the superseded
    /// segment ends before it, in order, as the no-op events they are,
    /// until one ends the run; returns whether one did. A superseded end
    /// can only end the run if the next real event would, since it comes
    /// no later; otherwise it only counts (`count_superseded`).
    fn replay_superseded(&mut self, key: Key) -> bool {
        for k in self.k.queue.take_superseded_before(key) {
            let t = key_time(k);
            if t > self.k.cfg.max_time_ns {
                return true;
            }
            self.k.now = t;
            self.k.nr_events += 1;
            self.k.nr_stale_events += 1;
            if self.k.stop_at.is_some_and(|s| t >= s) {
                return true;
            }
        }
        false
    }

    /// Counts the superseded segment ends before `key` as stale events:
    /// every so often, or `now` (at the end of the run).
    fn count_superseded(&mut self, key: Key, now: bool) {
        let n = self.k.queue.count_superseded_before(key, now);
        self.k.nr_events += n;
        self.k.nr_stale_events += n;
    }

    fn start(&mut self) {
        let k = &mut self.k;
        let meta = [
            ("simulator", "nest-sim".to_owned()),
            ("machine", k.machine.name.clone()),
            ("governor", k.cfg.governor.name().to_owned()),
            ("policy", self.policy.name()),
            ("workload", k.workload.name.clone()),
            ("seed", k.cfg.seed.to_string()),
        ];
        k.trace.meta = meta
            .iter()
            .map(|(a, b)| ((*a).to_owned(), b.clone()))
            .collect();
        for cpu in 0..k.cpus.len() as u32 {
            k.cpus[cpu as usize].last_tick_mhz = k.cpu_mhz(cpu);
            let khz = k.cpu_mhz(cpu) * 1000;
            k.emit(cpu, EventKind::Frequency { khz });
        }
        k.push(k.cfg.dvfs_step_ns, Ev::Step);
        let tick = k.cfg.tick_ns();
        k.push(tick, Ev::Tick);
        if let Some(nests) = self.k.workload.initial_nests.clone() {
            self.policy.seed_nests(&mut Ctx { k: &mut self.k }, &nests);
        }
        let initial = self.k.workload.initial.clone();
        for (program, instances) in initial {
            let delay_ns = self.k.workload.programs[program].delay_ns;
            for _ in 0..instances {
                if delay_ns == 0 {
                    self.spawn_initial(program);
                } else {
                    self.k.unstarted += 1;
                    self.k.push(delay_ns, Ev::Start { program });
                }
            }
        }
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Done { cpu, epoch } if self.k.cpus[cpu as usize].epoch == epoch => {
                self.segment_done(cpu);
            }
            Ev::WakeTask { task } => self.wake(task, None, false),
            Ev::Start { program } => {
                self.k.unstarted -= 1;
                self.spawn_initial(program);
            }
            Ev::SpinEnd { cpu, epoch } if self.k.cpus[cpu as usize].epoch == epoch => {
                self.end_spin(cpu, false);
            }
            // Superseded by a later segment or spin of the CPU.
            Ev::Done { .. } | Ev::SpinEnd { .. } => self.k.nr_stale_events += 1,
            Ev::Timer { token } => {
                self.policy.timer(&mut Ctx { k: &mut self.k }, token);
                self.apply_actions();
            }
            Ev::Tick => self.tick(),
            Ev::Step => self.step(),
            Ev::VcpuUp { cpu } => self.vcpu_up(cpu),
            Ev::VcpuKicked { cpu, task } => self.vcpu_kicked(cpu, task),
        }
    }

    /// Applies what the policy asked for during its last call. Usually
    /// nothing: this check is inlined into the callers (the engine calls
    /// it after every policy hook, e.g. 160 times per tick on the E7).
    #[inline]
    pub(crate) fn apply_actions(&mut self) {
        if !self.k.actions.is_empty() {
            self.apply_pending_actions();
        }
    }

    #[inline(never)]
    fn apply_pending_actions(&mut self) {
        while !self.k.actions.is_empty() {
            let actions = std::mem::take(&mut self.k.actions);
            for a in actions {
                match a {
                    Action::Migrate { task, cpu } => self.migrate_queued(task, cpu),
                    Action::Kick { cpu, preempt } => self.kick(cpu, preempt),
                    Action::EndSlice { cpu } => self.end_slice(cpu),
                }
            }
        }
    }

    fn finish(mut self) -> RunResult {
        let now = self.k.now;
        self.account_until(now);
        let trace = self.k.cfg.record_trace.then(|| Trace {
            topology: self.k.topo.clone(),
            meta: std::mem::take(&mut self.k.trace.meta),
            events: std::mem::take(&mut self.k.trace.events),
        });
        RunResult::collect(&self.k, self.policy.name(), trace)
    }
}

/// Every CPU a program may run on (rt-app `cpus`) or start on
/// (`start_cpu`, `prev_cpu`) is one of the machine's `nr_cpus`.
fn check_cpus(workload: &Workload, nr_cpus: usize) -> Result<()> {
    for p in &workload.programs {
        let bad_cpus = p.cpus.iter().flatten().find(|&&c| c as usize >= nr_cpus);
        let bad = |c: Option<u32>| c.filter(|&c| c as usize >= nr_cpus);
        for (key, cpu) in [
            ("cpus", bad_cpus.copied()),
            ("start_cpu", bad(p.start_cpu)),
            ("prev_cpu", bad(p.prev_cpu)),
        ] {
            if let Some(cpu) = cpu {
                bail!(
                    "workload `{}`: task `{}`: {key}: CPU {cpu} is not on the machine (CPUs 0-{})",
                    workload.name,
                    p.name,
                    nr_cpus.saturating_sub(1)
                );
            }
        }
    }
    let nests = workload.initial_nests.iter();
    if let Some(cpu) = nests
        .flat_map(|n| n.primary.iter().chain(&n.reserve))
        .find(|&&c| c as usize >= nr_cpus)
    {
        bail!(
            "workload `{}`: nests: CPU {cpu} is not on the machine (CPUs 0-{})",
            workload.name,
            nr_cpus.saturating_sub(1)
        );
    }
    Ok(())
}

impl Kernel {
    pub(crate) fn push(&mut self, at: u64, ev: Ev) {
        self.queue.push(at, ev);
    }

    /// Records a trace event at the current time (if recording).
    pub(crate) fn emit(&mut self, cpu: u32, kind: EventKind) {
        self.emit_with(cpu, |_| kind);
    }

    /// As [`Kernel::emit`], building the event only when recording (for
    /// events that allocate, such as a new task's name).
    pub(crate) fn emit_with(&mut self, cpu: u32, kind: impl FnOnce(&Self) -> EventKind) {
        self.nr_sched_events += 1;
        self.annotate(cpu, kind);
    }

    /// Records a trace event that explains another one rather than being a
    /// scheduling event itself (a policy's reasons): not counted in
    /// `sched_events`.
    pub(crate) fn annotate(&mut self, cpu: u32, kind: impl FnOnce(&Self) -> EventKind) {
        if self.cfg.record_trace {
            let kind = kind(self);
            self.trace.events.push(Event {
                ts_ns: self.now,
                cpu,
                kind,
            });
        }
    }

    pub(crate) fn arm_timer(&mut self, delay_ns: u64, token: u64) {
        let at = self.now + delay_ns;
        self.push(at, Ev::Timer { token });
    }
}

/// Progress of one long run on stderr; never affects the simulation.
struct Progress {
    on: bool,
    last: std::time::Instant,
    printed: bool,
}

impl Progress {
    fn new(on: bool) -> Self {
        Self {
            on,
            last: std::time::Instant::now(),
            printed: false,
        }
    }

    fn tick(&mut self, k: &Kernel) {
        if !self.on || !k.nr_events.is_multiple_of(65_536) || self.last.elapsed().as_secs() < 1 {
            return;
        }
        self.last = std::time::Instant::now();
        self.printed = true;
        eprint!(
            "\r\x1b[K  simulated {:.3} s, {} tasks alive, {} events",
            k.now as f64 / 1e9,
            k.live_tasks,
            k.nr_events
        );
    }

    fn done(&self) {
        if self.printed {
            eprint!("\r\x1b[K");
        }
    }
}
