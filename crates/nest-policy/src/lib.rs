//! The Nest placement policy, natively.
//!
//! The decisions live in C under `policy/` and are compiled both into the
//! BPF scheduler (`scx_nest`) and, by this crate, into native code for host
//! tests and the simulator. This crate adds only the native platform: the
//! host (a test, the simulator) implements [`Platform`] and calls
//! [`NestPolicy`] at the same points where the kernel calls the scheduler.

mod duration;
mod ffi;
mod llc;
mod params_args;

pub use duration::{
    duration_ns_within, duration_within, format_duration_ns, interval_within, parse_duration,
    parse_duration_ns,
};
pub use llc::{LlcLayout, MAX_LLCS};
pub use params_args::ParamsArgs;

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

pub use ffi::MAX_CPUS;

/// Weight of a nice-0 task in sched_ext's scale (`p->scx.weight`).
pub const WEIGHT_NICE_0: u32 = ffi::NEST_WEIGHT_DFL;
/// The starvation guard: how long a queued task may wait before it runs
/// next, whatever its virtual time.
pub const STARVE_NS: u64 = ffi::NEST_STARVE_NS as u64;
/// How often a host looks through a queue for a task that waited
/// [`STARVE_NS`]: such a task may wait up to the sum of both.
pub const STARVE_SWEEP_NS: u64 = ffi::NEST_STARVE_SWEEP_NS as u64;
use nest_topology::Topology;

/// What the policy needs from its host. Mirrors the platform interface in
/// `policy/nest_policy.h`.
pub trait Platform {
    /// Atomically take `cpu`'s idle state: true if it was idle and now is
    /// ours. Two claims of one idle CPU must never both succeed.
    fn claim_idle(&mut self, cpu: u32) -> bool;
    /// May the task being placed run on `cpu`?
    fn task_allowed(&self, cpu: u32) -> bool;
    /// The host's default placement for a task whose previous CPU is
    /// `prev`: the CPU, and whether it was idle and has been claimed. With
    /// `whole_core`, only a CPU whose SMT siblings are all idle may be
    /// claimed.
    fn default_cpu(&mut self, prev: u32, whole_core: bool) -> (u32, bool);
    /// Claim any idle CPU the task may use, on any socket.
    fn pick_any_idle(&mut self) -> Option<u32>;
    /// Monotonic time in ns (read once per placement).
    fn now_ns(&self) -> u64;
    /// Did `cpu` run above its minimum frequency at its last tick? Only
    /// S_move asks; a host that cannot tell answers true.
    fn cpu_above_min(&self, _cpu: u32) -> bool {
        true
    }
    /// Number of tasks waiting in LLC `llc`'s queue (the scheduler around
    /// the placement, `policy/nest_sched.c`). A host without queues has
    /// none.
    fn llc_queued(&self, _llc: u32) -> u32 {
        0
    }
    /// Virtual time of the first task waiting in `queue`, if any.
    fn queue_head(&self, _queue: Queue) -> Option<u64> {
        None
    }
    /// Is the task being placed a new one (a fork), whose previous CPU is
    /// its parent's? Forks do not count for impatience.
    fn is_fork(&self) -> bool {
        false
    }
    /// Is `cpu` idle now (nothing is claimed)? Impatience asks whether a
    /// placement found the task's previous CPU busy.
    fn cpu_idle(&self, cpu: u32) -> bool;
    /// Is any CPU the task being placed may use idle now? The placement
    /// skips its searches when none is; a host that cannot tell cheaply
    /// answers true, and the searches find out.
    fn any_idle(&self) -> bool {
        true
    }
}

/// How a task that a woken task preempted resumes
/// ([`NestPolicy::woken_preempts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// Not preempted by a wake-up: queued as any other task.
    Queued,
    /// On its CPU's local queue, right after the pinned task that preempted it.
    Local,
    /// First in line in its CPU's front queue.
    Front,
}

/// A run queue of the scheduler around the placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Queue {
    /// The queue of an LLC, by dense index.
    Llc(u32),
    /// A CPU's own queue of tasks that may run only there.
    Pinned(u32),
    /// A CPU's front queue: the task queued on it that it takes back
    /// first, unless the LLC queue's first is much earlier.
    Front(u32),
}

impl Queue {
    fn to_c(self) -> i32 {
        match self {
            Queue::Llc(llc) => llc as i32,
            Queue::Pinned(cpu) => ffi::NEST_QUEUE_PINNED - cpu as i32,
            Queue::Front(cpu) => ffi::NEST_QUEUE_FRONT - cpu as i32,
        }
    }

    /// The C encoding (`NEST_QUEUE_*` in `nest_policy.h`); `None` for
    /// `NEST_QUEUE_NONE`.
    fn from_c(queue: i32) -> Option<Self> {
        match queue {
            q if q >= 0 => Some(Queue::Llc(q as u32)),
            ffi::NEST_QUEUE_NONE => None,
            q if q > ffi::NEST_QUEUE_FRONT => {
                Some(Queue::Pinned((ffi::NEST_QUEUE_PINNED - q) as u32))
            }
            q => Some(Queue::Front((ffi::NEST_QUEUE_FRONT - q) as u32)),
        }
    }
}

/// The weight a task of weight `weight` runs with in a cgroup (not the
/// root: `cg_weight` 0) of cpu.weight `cg_weight` whose runnable tasks
/// weigh `cg_runnable` in all: its share of the cgroup's weight.
pub fn task_weight(weight: u32, cg_weight: u32, cg_runnable: u64) -> u32 {
    // SAFETY: a pure function of its arguments.
    unsafe { ffi::nest_native_task_weight(weight, cg_weight, cg_runnable) }
}

/// The shortest slice when tasks wait: a quarter of the slice, at least
/// 100 us.
pub fn slice_min_ns(slice_ns: u64) -> u64 {
    (slice_ns / 4).max(100_000)
}

/// The one of `all` called `name`, or an error naming the valid names.
fn find_by_name<T: Copy>(
    all: &[T],
    name_of: fn(T) -> &'static str,
    what: &str,
    name: &str,
) -> Result<T, String> {
    all.iter()
        .copied()
        .find(|&item| name_of(item) == name)
        .ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|&item| name_of(item)).collect();
            format!("unknown {what} '{name}'; valid: {}", names.join(", "))
        })
}

/// A mechanism of Nest that can be switched off (ablation).
/// The values are the bits of `enum nest_mechanism`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Mechanism {
    Attach = ffi::NEST_MECH_ATTACH,
    Reserve = ffi::NEST_MECH_RESERVE,
    Impatience = ffi::NEST_MECH_IMPATIENCE,
    Compaction = ffi::NEST_MECH_COMPACTION,
    ExitDemotion = ffi::NEST_MECH_EXIT_DEMOTION,
    WideFallback = ffi::NEST_MECH_WIDE_FALLBACK,
    WarmSpin = ffi::NEST_MECH_WARM_SPIN,
    /// Not in the published design: prefer CPUs whose SMT sibling is idle
    /// while the default placement can find a whole idle core.
    WholeCores = ffi::NEST_MECH_WHOLE_CORES,
    /// Not in the published design: a fork first takes the CPU the last
    /// exiting task of its parent's LLC left, while it is idle and went
    /// idle at most P_remove ago.
    ForkReuse = ffi::NEST_MECH_FORK_REUSE,
    /// Not in the published design: a woken task takes back its idle
    /// previous CPU, used within P_remove, even from outside the primary
    /// nest.
    WarmPrev = ffi::NEST_MECH_WARM_PREV,
    /// Not in the published design: while an attached task sleeps, other
    /// placements take its CPU only when the nests have no other idle CPU.
    KeepAttached = ffi::NEST_MECH_KEEP_ATTACHED,
}

impl Mechanism {
    pub const ALL: [Mechanism; 11] = [
        Mechanism::Attach,
        Mechanism::Reserve,
        Mechanism::Impatience,
        Mechanism::Compaction,
        Mechanism::ExitDemotion,
        Mechanism::WideFallback,
        Mechanism::WarmSpin,
        Mechanism::WholeCores,
        Mechanism::ForkReuse,
        Mechanism::WarmPrev,
        Mechanism::KeepAttached,
    ];

    /// The bit of `enum nest_mechanism`.
    pub fn bit(self) -> u32 {
        self as u32
    }

    /// The name users type, e.g. in `--disable compaction`.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Attach => "attach",
            Mechanism::Reserve => "reserve",
            Mechanism::Impatience => "impatience",
            Mechanism::Compaction => "compaction",
            Mechanism::ExitDemotion => "exit-demotion",
            Mechanism::WideFallback => "wide-fallback",
            Mechanism::WarmSpin => "warm-spin",
            Mechanism::WholeCores => "whole-cores",
            Mechanism::ForkReuse => "fork-reuse",
            Mechanism::WarmPrev => "warm-prev",
            Mechanism::KeepAttached => "keep-attached",
        }
    }

    /// The mechanism called `name`, or an error listing the valid names.
    pub fn parse(name: &str) -> Result<Self, String> {
        find_by_name(&Self::ALL, Self::name, "mechanism", name)
    }
}

/// The policy's tunables, with the published defaults (at 250 Hz).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// Idle time before a primary CPU is demoted (P_remove).
    pub p_remove_ns: u64,
    /// Longest warm spin of an idle primary CPU (S_max).
    pub s_max_ns: u64,
    /// Reserve nest capacity (R_max).
    pub r_max: u32,
    /// Previous-CPU misses before a task is impatient (R_impatient).
    pub r_impatient: u32,
    /// Switched-off mechanisms.
    pub disabled: Vec<Mechanism>,
    /// S_move: how long a task may wait on the waker's CPU (D).
    pub smove_delay_ns: u64,
    /// Time slice while no task waits (shorter when tasks wait, down to
    /// [`slice_min_ns`]).
    pub slice_ns: u64,
    /// Frequency requests (`policy/nest_perf.c`).
    pub perf: PerfMode,
    /// [`PerfMode::Nest`]: the least request of a primary-nest CPU.
    pub perf_floor: u32,
}

/// The maximum performance level of a frequency request (SCX_CPUPERF_ONE).
pub const PERF_ONE: u32 = ffi::NEST_PERF_ONE;

/// [`PerfMode::Nest`]'s floor: primary-nest CPUs ask for the maximum, the
/// level every CPU asks for without requests (see docs/design/scheduler.md,
/// "Frequency requests").
pub const PERF_NEST_FLOOR: u32 = PERF_ONE;

/// What frequency requests the policy makes; the values are those of `enum
/// nest_perf_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u32)]
pub enum PerfMode {
    /// Each CPU asks for its PELT-like utilisation; schedutil adds its 25%
    /// headroom (schedutil's rule, as under the fair scheduler).
    #[default]
    Util = ffi::NEST_PERF_UTIL,
    /// As `Util`, with a floor under the requests of primary-nest CPUs.
    Nest = ffi::NEST_PERF_NEST,
    /// No requests: the kernel's default, every CPU at the maximum.
    Max = ffi::NEST_PERF_MAX,
}

impl PerfMode {
    pub const ALL: [PerfMode; 3] = [PerfMode::Util, PerfMode::Nest, PerfMode::Max];

    /// The name users type (`--perf util`).
    pub fn name(self) -> &'static str {
        match self {
            PerfMode::Util => "util",
            PerfMode::Nest => "nest",
            PerfMode::Max => "max",
        }
    }

    /// The mode called `name`, or an error listing the valid names.
    pub fn parse(name: &str) -> Result<Self, String> {
        find_by_name(&Self::ALL, Self::name, "frequency-request mode", name)
    }

    /// The value of `enum nest_perf_mode`.
    pub fn bpf_value(self) -> u32 {
        self as u32
    }
}

/// The CPU frequency, as a share of the maximum ([`PERF_ONE`]), that
/// schedutil picks for a request of `level`: 1.25 x `level`, capped.
pub fn perf_freq(level: u32) -> u32 {
    // SAFETY: a pure function of its argument.
    unsafe { ffi::nest_native_perf_freq(level) }
}

/// One tick at the published 250 Hz.
pub const TICK_NS: u64 = 4_000_000;

impl Default for Params {
    fn default() -> Self {
        Self {
            p_remove_ns: 2 * TICK_NS,
            s_max_ns: 2 * TICK_NS,
            r_max: 5,
            r_impatient: 2,
            disabled: Vec::new(),
            smove_delay_ns: SMOVE_DELAY_NS,
            slice_ns: TICK_NS,
            perf: PerfMode::default(),
            perf_floor: PERF_NEST_FLOOR,
        }
    }
}

impl Params {
    /// These parameters as scx_nest runs them in a virtual machine by
    /// default (without `--warm-spin-in-vm`): warm spinning off, since a
    /// vCPU cannot keep a physical core's frequency up and a spinning vCPU
    /// takes host time from the guest's other vCPUs. `nest validate`
    /// simulates scx_nest's guest runs with the same.
    pub fn in_virtual_machine(mut self) -> Self {
        if !self.disabled.contains(&Mechanism::WarmSpin) {
            self.disabled.push(Mechanism::WarmSpin);
        }
        self
    }
}

/// S_move's published default delay D.
pub const SMOVE_DELAY_NS: u64 = 50_000;

/// How a placement was decided, and other countable policy events: `enum
/// nest_stat`, generated with its names, groups and descriptions from the
/// NEST_STATS list of `policy/nest_policy.h` (build.rs).
mod stat {
    include!(concat!(env!("OUT_DIR"), "/stat.rs"));
}
pub use stat::Stat;

/// Number of statistics (`NEST_NR_STATS`).
const NR_STATS: usize = ffi::NEST_NR_STATS as usize;
const _: () = assert!(Stat::ALL.len() == NR_STATS);

impl Stat {
    fn from_raw(raw: u32) -> Stat {
        Self::ALL[raw as usize]
    }
}

/// Per-task policy state; one per task, owned by the host.
#[derive(Clone, Debug)]
pub struct TaskState(ffi::nest_task);

impl TaskState {
    /// Tell the policy what only the host knows: whether the task is a
    /// kernel thread, and whether it may run on one CPU only.
    pub fn set_traits(&mut self, kernel_thread: bool, pinned: bool) {
        self.0.traits = if kernel_thread {
            ffi::NEST_TASK_KTHREAD
        } else {
            0
        } | if pinned { ffi::NEST_TASK_PINNED } else { 0 };
    }

    pub fn new() -> Self {
        let mut t = ffi::nest_task::default();
        // SAFETY: `t` is a valid, exclusively borrowed nest_task.
        unsafe { ffi::nest_native_task_init(&mut t) };
        Self(t)
    }

    /// The last two CPUs the task ran on, most recent first.
    pub fn recent_cpus(&self) -> [Option<u32>; 2] {
        self.0.recent_cpu.map(|c| u32::try_from(c).ok())
    }

    /// Consecutive placements that missed the previous CPU.
    /// Weighted virtual time (`policy/nest_sched.c`).
    pub fn vtime(&self) -> u64 {
        self.0.vtime
    }

    pub fn prev_misses(&self) -> u32 {
        self.0.prev_misses
    }

    /// The task's PELT-like utilisation (frequency requests), 0 to
    /// [`PERF_ONE`].
    pub fn perf_util(&self) -> u32 {
        // SAFETY: `self.0` is a valid nest_task.
        unsafe { ffi::nest_native_perf_task_util(&self.0) }
    }
}

impl Default for TaskState {
    fn default() -> Self {
        Self::new()
    }
}

/// The outcome of one placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    /// Where to run (the previous CPU when nothing idle was found).
    pub cpu: u32,
    /// The CPU was idle and has been claimed for the task.
    pub idle: bool,
    /// Which step decided.
    pub how: Stat,
    /// S_move: arm a timer for this move (see [`NestPolicy::smove_timer`]).
    pub deferred: Option<Deferred>,
}

/// A move S_move asks the host to make later, if the task has not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deferred {
    /// Where to move the task.
    pub cpu: u32,
    /// After how long, in ns.
    pub delay_ns: u64,
}

impl From<&ffi::nest_choice> for Choice {
    fn from(out: &ffi::nest_choice) -> Self {
        Choice {
            cpu: out.cpu as u32,
            idle: out.idle != 0,
            how: Stat::from_raw(out.how),
            deferred: u32::try_from(out.defer_cpu).ok().map(|cpu| Deferred {
                cpu,
                delay_ns: out.defer_ns,
            }),
        }
    }
}

/// A configuration the policy cannot run with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// The Nest policy for one machine: the nests and the counters.
///
/// Methods take `&self` because, as in the kernel, placements on different
/// CPUs may run at the same time; the C code updates shared state with
/// atomic operations.
pub struct NestPolicy {
    cfg: Box<ffi::nest_config>,
    state: Box<UnsafeCell<ffi::nest_state>>,
    stats: [AtomicU64; NR_STATS],
}

// SAFETY: the C policy only touches shared state through atomic operations
// and READ_ONCE/WRITE_ONCE, as it must in the kernel.
unsafe impl Sync for NestPolicy {}
unsafe impl Send for NestPolicy {}

/// What the C code's `nest_env_t` points to natively.
struct Env<'a> {
    plat: Option<&'a mut dyn Platform>,
    stats: &'a [AtomicU64; NR_STATS],
}

impl NestPolicy {
    /// A policy for `topo`, whose reserve searches start at `reserve_start`
    /// (the CPU where Nest was started).
    pub fn new(topo: &Topology, reserve_start: u32, params: &Params) -> Result<Self, ConfigError> {
        let nr_cpus = topo.nr_cpus();
        if nr_cpus == 0 || nr_cpus > MAX_CPUS {
            return Err(ConfigError(format!(
                "the policy supports 1 to {MAX_CPUS} CPUs, the topology has {nr_cpus}"
            )));
        }
        if reserve_start as usize >= nr_cpus {
            return Err(ConfigError(format!(
                "reserve start CPU {reserve_start} is not one of the {nr_cpus} CPUs"
            )));
        }
        let cfg = Box::new(ffi::nest_config::new(topo, reserve_start, params)?);
        Ok(Self {
            cfg,
            state: Box::new(UnsafeCell::new(ffi::nest_state::default())),
            stats: std::array::from_fn(|_| AtomicU64::new(0)),
        })
    }

    fn state_ptr(&self) -> *mut ffi::nest_state {
        self.state.get()
    }

    fn env<'a>(&'a self, plat: Option<&'a mut dyn Platform>) -> Env<'a> {
        Env {
            plat,
            stats: &self.stats,
        }
    }

    /// Place a forked or woken task whose previous CPU (on fork: the
    /// parent's) is `prev_cpu`. The platform says which
    /// ([`Platform::is_fork`]).
    pub fn select_cpu(
        &self,
        plat: &mut dyn Platform,
        task: &mut TaskState,
        prev_cpu: u32,
    ) -> Choice {
        let now = plat.now_ns();
        let mut env = self.env(Some(plat));
        let mut out = ffi::nest_choice::default();
        // SAFETY: all pointers are valid for the call; shared state is
        // accessed atomically by the C code.
        unsafe {
            ffi::nest_native_select_cpu(
                self.state_ptr(),
                &*self.cfg,
                &mut env as *mut Env as *mut c_void,
                now,
                &mut task.0,
                prev_cpu as i32,
                &mut out,
            )
        };
        Choice::from(&out)
    }

    /// S_local: place a task on the waker's CPU (`None`, or a CPU the task
    /// may not use: its previous CPU). Nothing is claimed.
    pub fn slocal_select(
        &self,
        plat: &mut dyn Platform,
        waker: Option<u32>,
        prev_cpu: u32,
    ) -> Choice {
        let mut env = self.env(Some(plat));
        let mut out = ffi::nest_choice::default();
        // SAFETY: valid pointers; see select_cpu.
        unsafe {
            ffi::nest_native_slocal_select(
                self.state_ptr(),
                &*self.cfg,
                &mut env as *mut Env as *mut c_void,
                cpu_arg(waker),
                prev_cpu as i32,
                &mut out,
            )
        };
        Choice::from(&out)
    }

    /// S_move: the default CPU if it ran above its minimum frequency at
    /// its last tick; otherwise the waker's CPU, with a [`Deferred`] move
    /// for the host to make after D unless the task ran meanwhile.
    pub fn smove_select(
        &self,
        plat: &mut dyn Platform,
        task: &mut TaskState,
        waker: Option<u32>,
        prev_cpu: u32,
    ) -> Choice {
        let now = plat.now_ns();
        let mut env = self.env(Some(plat));
        let mut out = ffi::nest_choice::default();
        // SAFETY: valid pointers; see select_cpu.
        unsafe {
            ffi::nest_native_smove_select(
                self.state_ptr(),
                &*self.cfg,
                &mut env as *mut Env as *mut c_void,
                now,
                &mut task.0,
                cpu_arg(waker),
                prev_cpu as i32,
                &mut out,
            )
        };
        Choice::from(&out)
    }

    /// The timer of a [`Deferred`] move fired: the CPU to move the task
    /// to, or `None` if it ran meanwhile (or the timer is stale, or it may
    /// no longer use the CPU).
    pub fn smove_timer(&self, plat: &mut dyn Platform, task: &mut TaskState) -> Option<u32> {
        let now = plat.now_ns();
        let mut env = self.env(Some(plat));
        // SAFETY: valid pointers; see select_cpu.
        let cpu = unsafe {
            ffi::nest_native_smove_timer(
                self.state_ptr(),
                &*self.cfg,
                &mut env as *mut Env as *mut c_void,
                now,
                &mut task.0,
            )
        };
        u32::try_from(cpu).ok()
    }

    /// S_move: the task started running (its pending move is void).
    pub fn smove_task_running(&self, task: &mut TaskState) {
        // SAFETY: `task` is a valid, exclusively borrowed nest_task.
        unsafe { ffi::nest_native_smove_task_running(&mut task.0) };
    }

    /// Claim an idle CPU for a task queued without a placement, e.g. after
    /// preemption: whole idle cores of the nests, then a whole idle core
    /// of the default placement, then any idle CPU of the nests (never the
    /// default placement's other CPUs; the host decides beyond that).
    pub fn claim_for_queued(
        &self,
        plat: &mut dyn Platform,
        task: &mut TaskState,
        prev_cpu: u32,
    ) -> Option<u32> {
        let now = plat.now_ns();
        let mut env = self.env(Some(plat));
        // SAFETY: valid pointers; see select_cpu.
        let cpu = unsafe {
            ffi::nest_native_claim_for_queued(
                self.state_ptr(),
                &*self.cfg,
                &mut env as *mut Env as *mut c_void,
                now,
                &mut task.0,
                prev_cpu as i32,
            )
        };
        u32::try_from(cpu).ok()
    }

    /// The task started running on `cpu` at `now_ns` (this ends a warm
    /// spin there).
    pub fn task_running(&self, task: &mut TaskState, cpu: u32, now_ns: u64) {
        self.task_event(ffi::nest_native_task_running, task, cpu, now_ns);
    }

    /// The task went to sleep on `cpu` at `now_ns` (it blocked: not
    /// preempted, not exiting).
    pub fn task_sleeping(&self, task: &mut TaskState, cpu: u32, now_ns: u64) {
        self.task_event(ffi::nest_native_task_sleeping, task, cpu, now_ns);
    }

    /// Call `entry`, a native entry point for something `task` did on
    /// `cpu` at `now_ns`.
    fn task_event(
        &self,
        entry: unsafe extern "C" fn(
            *mut ffi::nest_state,
            *const ffi::nest_config,
            ffi::nest_env_t,
            u64,
            *mut ffi::nest_task,
            i32,
        ),
        task: &mut TaskState,
        cpu: u32,
        now_ns: u64,
    ) {
        let mut env = self.env(None);
        // SAFETY: valid pointers; see select_cpu.
        unsafe {
            entry(
                self.state_ptr(),
                &*self.cfg,
                &mut env as *mut Env as *mut c_void,
                now_ns,
                &mut task.0,
                cpu as i32,
            )
        };
    }

    /// The task running on `cpu` is exiting.
    pub fn task_exiting(&self, cpu: u32) {
        // SAFETY: valid pointer; see select_cpu.
        unsafe { ffi::nest_native_task_exiting(self.state_ptr(), cpu as i32) };
    }

    /// `cpu` went idle at `now_ns`. Returns the time until which it should
    /// keep warm by spinning (the host calls [`NestPolicy::spin_continue`]
    /// while it spins and ends the spin when a task arrives), or `None`.
    pub fn cpu_idle(&self, cpu: u32, now_ns: u64) -> Option<u64> {
        let mut env = self.env(None);
        // SAFETY: valid pointers; the idle path only counts through env.
        let spin = unsafe {
            ffi::nest_native_cpu_idle(
                self.state_ptr(),
                &*self.cfg,
                &mut env as *mut Env as *mut c_void,
                cpu as i32,
                now_ns,
            )
        };
        spin.then(|| now_ns + self.cfg.s_max_ns)
    }

    /// `cpu` is spinning and found no work at `now_ns`: should it go on?
    pub fn spin_continue(&self, cpu: u32, now_ns: u64) -> bool {
        let mut env = self.env(None);
        // SAFETY: valid pointers; see cpu_idle.
        unsafe {
            ffi::nest_native_spin_continue(
                self.state_ptr(),
                &*self.cfg,
                &mut env as *mut Env as *mut c_void,
                cpu as i32,
                now_ns,
            )
        }
    }

    /// Scheduler tick of `cpu`, which runs a task: should the task be
    /// re-placed because it has shared its core with a busy SMT sibling for
    /// two ticks in a row?
    pub fn tick_unpair(&self, cpu: u32) -> bool {
        let mut env = self.env(None);
        // SAFETY: valid pointers; see cpu_idle.
        unsafe {
            ffi::nest_native_tick_unpair(
                self.state_ptr(),
                &*self.cfg,
                &mut env as *mut Env as *mut c_void,
                cpu as i32,
            )
        }
    }

    /// Is `cpu` warm spinning?
    pub fn spinning(&self, cpu: u32) -> bool {
        // SAFETY: valid pointer; see select_cpu.
        unsafe { ffi::nest_native_cpu_spinning(self.state_ptr(), cpu as i32) }
    }

    /// `cpu` went offline (CPU hotplug): it leaves both nests and is never
    /// chosen until [`NestPolicy::cpu_online`].
    pub fn cpu_offline(&self, cpu: u32) {
        // SAFETY: valid pointer; see select_cpu.
        unsafe { ffi::nest_native_cpu_offline(self.state_ptr(), cpu as i32) };
    }

    /// `cpu` came back online.
    pub fn cpu_online(&self, cpu: u32) {
        // SAFETY: valid pointer; see select_cpu.
        unsafe { ffi::nest_native_cpu_online(self.state_ptr(), cpu as i32) };
    }

    /// Start with idle `cpu` in the primary nest (`primary`) or the
    /// reserve, idle from `now_ns` on, after `idle_ns` of idleness (a
    /// primary CPU idle over P_remove is compacted at once): a replay
    /// starting from the nests a recording had.
    pub fn seed_cpu(&self, now_ns: u64, cpu: u32, primary: bool, idle_ns: u64) {
        // SAFETY: valid pointers; see select_cpu.
        unsafe {
            ffi::nest_native_seed_cpu(
                self.state_ptr(),
                &*self.cfg,
                now_ns,
                cpu as i32,
                primary,
                idle_ns,
            )
        };
    }

    fn env_ptr(env: &mut Env) -> *mut c_void {
        env as *mut Env as *mut c_void
    }

    /// The LLC queue a task whose previous CPU is `prev_cpu` joins.
    pub fn queue_llc(&self, prev_cpu: u32) -> u32 {
        // SAFETY: a valid config pointer.
        unsafe { ffi::nest_native_queue_llc(&*self.cfg, prev_cpu as i32) }
    }

    /// The host put `task` into `queue`: the policy counts the tasks of
    /// each queue (a task leaves its queue when it runs).
    pub fn task_queued(&self, task: &mut TaskState, queue: Queue) {
        self.report_queue(task, queue.to_c());
    }

    /// `task` left its queue other than to run (it left the scheduler).
    pub fn task_dequeued(&self, task: &mut TaskState) {
        self.report_queue(task, ffi::NEST_QUEUE_NONE);
    }

    fn report_queue(&self, task: &mut TaskState, queue: i32) {
        // SAFETY: valid pointers; see select_cpu.
        unsafe { ffi::nest_native_task_queued(self.state_ptr(), &*self.cfg, &mut task.0, queue) }
    }

    /// The queue a task queued on `cpu` waits in: `cpu`'s queue of pinned
    /// tasks if it may run there only (`pinned`), else `cpu`'s front queue
    /// if free or if the task belongs there anyway (`front`: it preempts
    /// `cpu`'s task, or a woken task preempted it there), else `cpu`'s LLC
    /// queue.
    pub fn queue_of(&self, plat: &mut dyn Platform, cpu: u32, pinned: bool, front: bool) -> Queue {
        let mut env = self.env(Some(plat));
        // SAFETY: valid pointers; see select_cpu.
        let queue = unsafe {
            ffi::nest_native_queue_of(
                self.state_ptr(),
                &*self.cfg,
                Self::env_ptr(&mut env),
                cpu as i32,
                pinned,
                front,
            )
        };
        Queue::from_c(queue).expect("a task always has a queue")
    }

    /// `task`, of weight `weight` (100: nice 0), woke up (or is new) at
    /// `now_ns` and would wait in `queue`: its virtual time is placed,
    /// with at most two slices (scaled by its weight) of credit or debt.
    pub fn task_woken(
        &self,
        plat: &mut dyn Platform,
        task: &mut TaskState,
        queue: Queue,
        weight: u32,
        now_ns: u64,
    ) {
        let mut env = self.env(Some(plat));
        // SAFETY: valid pointers; see select_cpu.
        unsafe {
            ffi::nest_native_task_woken(
                self.state_ptr(),
                &*self.cfg,
                Self::env_ptr(&mut env),
                now_ns,
                &mut task.0,
                queue.to_c(),
                weight,
            )
        }
    }

    /// The virtual time with which `task`, of weight `weight`, joins
    /// `queue`.
    pub fn queue_vtime(
        &self,
        plat: &mut dyn Platform,
        task: &mut TaskState,
        queue: Queue,
        weight: u32,
    ) -> u64 {
        let mut env = self.env(Some(plat));
        // SAFETY: valid pointers; see select_cpu.
        unsafe {
            ffi::nest_native_queue_vtime(
                self.state_ptr(),
                &*self.cfg,
                Self::env_ptr(&mut env),
                &mut task.0,
                queue.to_c(),
                weight,
            )
        }
    }

    /// The slice of a task starting on `cpu`.
    pub fn slice(&self, plat: &mut dyn Platform, cpu: u32) -> u64 {
        let mut env = self.env(Some(plat));
        // SAFETY: valid pointers; see select_cpu.
        unsafe {
            ffi::nest_native_slice(
                self.state_ptr(),
                &*self.cfg,
                Self::env_ptr(&mut env),
                cpu as i32,
            )
        }
    }

    /// `task`, of weight `weight`, starts running on `cpu` at `now_ns`
    /// (virtual time and wakeup preemption; see also `task_running`).
    pub fn sched_running(
        &self,
        plat: &mut dyn Platform,
        task: &mut TaskState,
        cpu: u32,
        weight: u32,
        now_ns: u64,
    ) {
        let mut env = self.env(Some(plat));
        // SAFETY: valid pointers; see select_cpu.
        unsafe {
            ffi::nest_native_sched_running(
                self.state_ptr(),
                &*self.cfg,
                Self::env_ptr(&mut env),
                now_ns,
                &mut task.0,
                cpu as i32,
                weight,
            )
        }
    }

    /// `task`, of weight `weight`, stops running on `cpu` at `now_ns`.
    pub fn sched_stopping(&self, task: &mut TaskState, cpu: u32, weight: u32, now_ns: u64) {
        let mut env = self.env(None);
        // SAFETY: valid pointers; see select_cpu.
        unsafe {
            ffi::nest_native_sched_stopping(
                self.state_ptr(),
                &*self.cfg,
                Self::env_ptr(&mut env),
                now_ns,
                &mut task.0,
                cpu as i32,
                weight,
            )
        }
    }

    /// Should the task running on `cpu` give way, at `now_ns`, to a woken
    /// task of virtual time `vtime` queued in `cpu`'s LLC?
    pub fn wakeup_preempts(&self, cpu: u32, vtime: u64, now_ns: u64) -> bool {
        let mut env = self.env(None);
        // SAFETY: valid pointers; see select_cpu.
        unsafe {
            ffi::nest_native_wakeup_preempts(
                self.state_ptr(),
                &*self.cfg,
                Self::env_ptr(&mut env),
                now_ns,
                cpu as i32,
                vtime,
            )
        }
    }

    /// Would a task woken on `cpu`, of virtual time `vtime`, be the next
    /// task `cpu` takes from its queues?
    pub fn woken_runs_next(&self, plat: &mut dyn Platform, cpu: u32, vtime: u64) -> bool {
        let mut env = self.env(Some(plat));
        // SAFETY: valid pointers; see select_cpu.
        unsafe {
            ffi::nest_native_woken_runs_next(
                self.state_ptr(),
                &*self.cfg,
                Self::env_ptr(&mut env),
                cpu as i32,
                vtime,
            )
        }
    }

    /// A woken task (`pinned` or not) preempts the task running on `cpu`,
    /// which is to resume on `cpu`.
    pub fn woken_preempts(&self, cpu: u32, pinned: bool) {
        // SAFETY: valid pointers; see select_cpu.
        unsafe { ffi::nest_native_woken_preempts(self.state_ptr(), &*self.cfg, cpu as i32, pinned) }
    }

    /// How the task being queued from `cpu` resumes: the one a woken task
    /// preempted there resumes there (answered once).
    pub fn preempted_resumes(&self, cpu: u32) -> Resume {
        // SAFETY: valid pointers; see select_cpu.
        match unsafe {
            ffi::nest_native_preempted_resumes(self.state_ptr(), &*self.cfg, cpu as i32)
        } {
            ffi::NEST_RESUME_LOCAL => Resume::Local,
            ffi::NEST_RESUME_FRONT => Resume::Front,
            _ => Resume::Queued,
        }
    }

    /// `cpu` is out of work: the queue to take its next task from.
    pub fn queue_to_consume(&self, plat: &mut dyn Platform, cpu: u32) -> Option<Queue> {
        let mut env = self.env(Some(plat));
        // SAFETY: valid pointers; see select_cpu.
        let queue = unsafe {
            ffi::nest_native_queue_to_consume(
                self.state_ptr(),
                &*self.cfg,
                Self::env_ptr(&mut env),
                cpu as i32,
            )
        };
        Queue::from_c(queue)
    }

    /// Starvation guard: must a task queued at `queued_ns` (0: not queued)
    /// run next at `now_ns`, whatever its virtual time?
    pub fn starving(&self, queued_ns: u64, now_ns: u64) -> bool {
        // SAFETY: plain values.
        unsafe { ffi::nest_native_starving(now_ns, queued_ns) }
    }

    /// Starvation guard: should the host look through a queue at `now_ns`,
    /// given the queue's next sweep time `sweep_at` (set to the next one
    /// when this call gets the sweep)?
    pub fn starve_sweep_due(&self, sweep_at: &mut u64, now_ns: u64) -> bool {
        // SAFETY: sweep_at is a valid, exclusive u64.
        unsafe { ffi::nest_native_starve_sweep_due(now_ns, sweep_at) }
    }

    /// Starvation guard: a sweep of the queue whose next sweep time is
    /// `sweep_at` found a starving task at `now_ns`; the next look sweeps
    /// again.
    pub fn starve_rescued(&self, sweep_at: &mut u64, now_ns: u64) {
        // SAFETY: sweep_at is a valid, exclusive u64.
        unsafe { ffi::nest_native_starve_rescued(now_ns, sweep_at) }
    }

    /// `task`, of weight `weight`, reached the end of its slice on `cpu` at
    /// `now_ns` and is still runnable: should it keep its CPU rather than
    /// give it to the next task of `queue`, the one `cpu` would take from?
    pub fn prev_keeps_cpu(
        &self,
        plat: &mut dyn Platform,
        cpu: u32,
        task: &TaskState,
        weight: u32,
        queue: Queue,
        now_ns: u64,
    ) -> bool {
        let mut env = self.env(Some(plat));
        // SAFETY: valid pointers; see select_cpu.
        unsafe {
            ffi::nest_native_prev_keeps_cpu(
                self.state_ptr(),
                &*self.cfg,
                Self::env_ptr(&mut env),
                now_ns,
                cpu as i32,
                &task.0,
                weight,
                queue.to_c(),
            )
        }
    }

    /// A tick on `cpu`: should the host wake an idle CPU for the tasks
    /// waiting in its LLC queue or its front queue?
    pub fn tick_kick(&self, plat: &mut dyn Platform, cpu: u32) -> bool {
        let mut env = self.env(Some(plat));
        // SAFETY: valid pointers; see select_cpu.
        unsafe {
            ffi::nest_native_tick_kick(
                self.state_ptr(),
                &*self.cfg,
                Self::env_ptr(&mut env),
                cpu as i32,
            )
        }
    }

    /// A task of another scheduling class took `cpu` at `now_ns`.
    pub fn cpu_busy(&self, cpu: u32, now_ns: u64) {
        let mut env = self.env(None);
        // SAFETY: valid pointers; see select_cpu.
        unsafe {
            ffi::nest_native_cpu_busy(
                self.state_ptr(),
                &*self.cfg,
                Self::env_ptr(&mut env),
                cpu as i32,
                now_ns,
            )
        }
    }

    fn mask_cpus(&self, mask: &[u64]) -> Vec<u32> {
        (0..self.cfg.nr_cpus)
            .filter(|&cpu| {
                // Atomic read: other threads may be placing tasks.
                let word = &mask[cpu as usize / 64] as *const u64 as *const AtomicU64;
                // SAFETY: AtomicU64 has the layout of u64; the word lives as
                // long as self.
                let bits = unsafe { (*word).load(Ordering::Relaxed) };
                bits & (1 << (cpu % 64)) != 0
            })
            .collect()
    }

    /// CPUs of the primary nest.
    pub fn primary(&self) -> Vec<u32> {
        // SAFETY: only the address of the mask is taken; words are read
        // atomically.
        let st = unsafe { &*self.state_ptr() };
        self.mask_cpus(&st.primary)
    }

    /// CPUs of the reserve nest.
    pub fn reserve(&self) -> Vec<u32> {
        // SAFETY: as in primary().
        let st = unsafe { &*self.state_ptr() };
        self.mask_cpus(&st.reserve)
    }

    /// Frequency requests: the scheduler starts (the kernel has every CPU
    /// at [`PERF_ONE`]). Returns the request to make for each CPU, if any:
    /// its utilisation, 0.
    pub fn perf_init(&self) -> Vec<Option<u32>> {
        (0..self.cfg.nr_cpus)
            .map(|cpu| {
                // SAFETY: valid pointers; see select_cpu.
                let r = unsafe {
                    ffi::nest_native_perf_init_cpu(self.state_ptr(), &*self.cfg, cpu as i32)
                };
                u32::try_from(r).ok()
            })
            .collect()
    }

    /// Frequency requests: `task` starts running on `cpu`, whose
    /// performance level is `level` ([`PERF_ONE`]: maximum). Returns the
    /// request to make for `cpu` (`None`: none, [`PerfMode::Max`]).
    pub fn perf_running(
        &self,
        task: &mut TaskState,
        cpu: u32,
        now_ns: u64,
        level: u32,
    ) -> Option<u32> {
        // SAFETY: valid pointers; see select_cpu.
        let r = unsafe {
            ffi::nest_native_perf_running(
                self.state_ptr(),
                &*self.cfg,
                now_ns,
                &mut task.0,
                cpu as i32,
                level,
            )
        };
        u32::try_from(r).ok()
    }

    /// Frequency requests: `task` stops running on `cpu` (`exiting`: for
    /// good). Returns the request to make for `cpu`, if any.
    pub fn perf_stopping(
        &self,
        task: &mut TaskState,
        cpu: u32,
        now_ns: u64,
        level: u32,
        exiting: bool,
    ) -> Option<u32> {
        // SAFETY: valid pointers; see select_cpu.
        let r = unsafe {
            ffi::nest_native_perf_stopping(
                self.state_ptr(),
                &*self.cfg,
                now_ns,
                &mut task.0,
                cpu as i32,
                level,
                exiting,
            )
        };
        u32::try_from(r).ok()
    }

    /// Frequency requests: the tick of `cpu`, which runs `task`. Returns
    /// the request to make for `cpu`, if any.
    pub fn perf_tick(
        &self,
        task: &mut TaskState,
        cpu: u32,
        now_ns: u64,
        level: u32,
    ) -> Option<u32> {
        // SAFETY: valid pointers; see select_cpu.
        let r = unsafe {
            ffi::nest_native_perf_tick(
                self.state_ptr(),
                &*self.cfg,
                now_ns,
                &mut task.0,
                cpu as i32,
                level,
            )
        };
        u32::try_from(r).ok()
    }

    /// The last frequency request made for `cpu` (0 before any).
    pub fn perf_target(&self, cpu: u32) -> u32 {
        self.perf_requested(cpu).unwrap_or(0)
    }

    /// The last frequency request made for `cpu`, `None` before any (the
    /// kernel then keeps its default, [`PERF_ONE`]).
    pub fn perf_requested(&self, cpu: u32) -> Option<u32> {
        let i = (cpu as usize).min(MAX_CPUS - 1);
        // SAFETY: in bounds; plain reads of u32s the C code writes with
        // WRITE_ONCE (placements on other threads never write them).
        let (target, made) = unsafe {
            let c = std::ptr::addr_of!((*self.state_ptr()).perf[i]);
            (
                std::ptr::addr_of!((*c).target).read_volatile(),
                std::ptr::addr_of!((*c).nr_requests).read_volatile(),
            )
        };
        (made > 0).then_some(target)
    }

    /// `cpu`'s PELT-like utilisation (frequency requests), 0 to
    /// [`PERF_ONE`], as of its last update.
    pub fn perf_util(&self, cpu: u32) -> u32 {
        // SAFETY: valid pointer; see select_cpu.
        unsafe { ffi::nest_native_perf_util(self.state_ptr(), cpu as i32) }
    }

    /// The frequency-request mode.
    pub fn perf_mode(&self) -> PerfMode {
        PerfMode::ALL
            .into_iter()
            .find(|m| m.bpf_value() == self.cfg.perf_mode)
            .unwrap_or_default()
    }

    /// How many times `stat` happened.
    pub fn stat(&self, stat: Stat) -> u64 {
        self.stats[stat as usize].load(Ordering::Relaxed)
    }
}

/// An optional CPU as the C code takes it (-1: none).
fn cpu_arg(cpu: Option<u32>) -> i32 {
    cpu.map_or(-1, |c| c as i32)
}

fn env_of<'a>(env: *mut c_void) -> &'a mut Env<'a> {
    // SAFETY: the C policy passes back the pointer it was given by a
    // NestPolicy method, which outlives the call.
    unsafe { &mut *(env as *mut Env) }
}

fn plat_of<'a>(env: *mut c_void) -> &'a mut dyn Platform {
    env_of(env)
        .plat
        .as_deref_mut()
        .expect("the policy asked the platform for placement outside select_cpu")
}

#[unsafe(no_mangle)]
extern "C" fn nest_plat_claim_idle(env: *mut c_void, cpu: i32) -> bool {
    plat_of(env).claim_idle(cpu as u32)
}

#[unsafe(no_mangle)]
extern "C" fn nest_plat_task_allowed(env: *mut c_void, cpu: i32) -> bool {
    plat_of(env).task_allowed(cpu as u32)
}

#[unsafe(no_mangle)]
extern "C" fn nest_plat_default_cpu(
    env: *mut c_void,
    prev_cpu: i32,
    whole_core: bool,
    idle: *mut bool,
) -> i32 {
    let (cpu, was_idle) = plat_of(env).default_cpu(prev_cpu as u32, whole_core);
    // SAFETY: the C caller passes a valid bool pointer.
    unsafe { *idle = was_idle };
    cpu as i32
}

#[unsafe(no_mangle)]
extern "C" fn nest_plat_pick_any_idle(env: *mut c_void) -> i32 {
    plat_of(env).pick_any_idle().map_or(-1, |cpu| cpu as i32)
}

#[unsafe(no_mangle)]
extern "C" fn nest_plat_count(env: *mut c_void, stat: u32, amount: u64) {
    env_of(env).stats[stat as usize].fetch_add(amount, Ordering::Relaxed);
}

#[unsafe(no_mangle)]
extern "C" fn nest_plat_cpu_above_min(env: *mut c_void, cpu: i32) -> bool {
    plat_of(env).cpu_above_min(cpu as u32)
}

#[unsafe(no_mangle)]
extern "C" fn nest_plat_llc_queued(env: *mut c_void, llc: u32) -> u32 {
    plat_of(env).llc_queued(llc)
}

#[unsafe(no_mangle)]
extern "C" fn nest_plat_queue_head(env: *mut c_void, queue: i32, vtime: *mut u64) -> bool {
    let Some(queue) = Queue::from_c(queue) else {
        return false;
    };
    match plat_of(env).queue_head(queue) {
        Some(head) => {
            // SAFETY: the C caller passes a valid u64 pointer.
            unsafe { *vtime = head };
            true
        }
        None => false,
    }
}

#[unsafe(no_mangle)]
extern "C" fn nest_plat_is_fork(env: *mut c_void) -> bool {
    plat_of(env).is_fork()
}

#[unsafe(no_mangle)]
extern "C" fn nest_plat_cpu_idle(env: *mut c_void, cpu: i32) -> bool {
    plat_of(env).cpu_idle(cpu as u32)
}

#[unsafe(no_mangle)]
extern "C" fn nest_plat_any_idle(env: *mut c_void) -> bool {
    plat_of(env).any_idle()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_a_virtual_machine_warm_spinning_is_off_once() {
        let vm = Params::default().in_virtual_machine();
        assert_eq!(vm.disabled, [Mechanism::WarmSpin]);
        assert_eq!(vm.clone().in_virtual_machine(), vm);
        assert_eq!(vm.p_remove_ns, Params::default().p_remove_ns);
    }

    #[test]
    fn stats_number_the_c_enum_densely_under_unique_names() {
        let mut names = std::collections::HashSet::new();
        for (index, stat) in Stat::ALL.into_iter().enumerate() {
            assert_eq!(stat as usize, index, "{stat:?}");
            assert_eq!(Stat::from_raw(index as u32), stat);
            assert!(names.insert(stat.name()), "{} twice", stat.name());
            assert!(!stat.description().is_empty(), "{stat:?}");
        }
        assert_eq!(Stat::FallbackWide.name(), "fallback_wide");
        assert_eq!(Stat::FallbackWide.group(), "place");
    }

    #[test]
    fn mechanism_bits_are_distinct_single_bits() {
        let all = Mechanism::ALL.iter().fold(0, |bits, m| {
            assert_eq!(m.bit().count_ones(), 1, "{m:?}");
            assert_eq!(bits & m.bit(), 0, "{m:?} shares a bit");
            bits | m.bit()
        });
        assert_eq!(all.count_ones() as usize, Mechanism::ALL.len());
    }
}
