//! The Nest placement policy, natively.
//!
//! The decisions live in C under `policy/` and are compiled both into the
//! BPF scheduler (`scx_nest`) and, by this crate, into native code for host
//! tests and the simulator. This crate adds only the native platform: the
//! host (a test, the simulator) implements [`Platform`] and calls
//! [`NestPolicy`] at the same points where the kernel calls the scheduler.

mod duration;
mod ffi;

pub use duration::parse_duration_ns;

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

pub use ffi::MAX_CPUS;
use nest_trace::Topology;

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
    /// Is the task being placed a new one (a fork), whose previous CPU is
    /// its parent's? Forks do not count for impatience.
    fn is_fork(&self) -> bool {
        false
    }
    /// Is `cpu` idle now (nothing is claimed)? Impatience asks whether a
    /// placement found the task's previous CPU busy.
    fn cpu_idle(&self, cpu: u32) -> bool;
}

/// A mechanism of Nest that can be switched off (ablation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Attach,
    Reserve,
    Impatience,
    Compaction,
    ExitDemotion,
    WideFallback,
    WarmSpin,
    /// Not in the published design: prefer CPUs whose SMT sibling is idle
    /// while the default placement can find a whole idle core.
    WholeCores,
}

impl Mechanism {
    pub const ALL: [Mechanism; 8] = [
        Mechanism::Attach,
        Mechanism::Reserve,
        Mechanism::Impatience,
        Mechanism::Compaction,
        Mechanism::ExitDemotion,
        Mechanism::WideFallback,
        Mechanism::WarmSpin,
        Mechanism::WholeCores,
    ];

    /// The bit of `enum nest_mechanism`.
    pub fn bit(self) -> u32 {
        1 << (self as u32)
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
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
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
        }
    }
}

/// S_move's published default delay D.
pub const SMOVE_DELAY_NS: u64 = 50_000;

/// How a placement was decided, and other countable policy events
/// (`enum nest_stat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stat {
    Attached,
    Prev,
    Primary,
    Reserve,
    Fallback,
    FallbackWide,
    NoIdle,
    Promoted,
    JoinedReserve,
    JoinedPrimary,
    Compacted,
    ExitDemoted,
    ReserveFull,
    Impatient,
    SpinStarted,
    SpinWork,
    SpinExpired,
    SpinSibling,
    SpinDemoted,
    /// Total time spent spinning, in ns.
    SpinNs,
    /// Placed on the waker's CPU (S_local, S_move).
    Local,
    /// S_move: placed on the default CPU.
    DefaultCpu,
    /// S_move: the default CPU ran above its minimum frequency.
    FreqAboveMin,
    /// S_move: the default CPU ran at its minimum frequency.
    FreqAtMin,
    /// S_move: deferred migrations asked for (timers armed).
    TimerArmed,
    /// S_move: timers handled by [`NestPolicy::smove_timer`].
    TimerFired,
    /// S_move: timers that moved a task still waiting.
    Migrated,
}

impl Stat {
    pub const ALL: [Stat; ffi::NR_STATS] = [
        Stat::Attached,
        Stat::Prev,
        Stat::Primary,
        Stat::Reserve,
        Stat::Fallback,
        Stat::FallbackWide,
        Stat::NoIdle,
        Stat::Promoted,
        Stat::JoinedReserve,
        Stat::JoinedPrimary,
        Stat::Compacted,
        Stat::ExitDemoted,
        Stat::ReserveFull,
        Stat::Impatient,
        Stat::SpinStarted,
        Stat::SpinWork,
        Stat::SpinExpired,
        Stat::SpinSibling,
        Stat::SpinDemoted,
        Stat::SpinNs,
        Stat::Local,
        Stat::DefaultCpu,
        Stat::FreqAboveMin,
        Stat::FreqAtMin,
        Stat::TimerArmed,
        Stat::TimerFired,
        Stat::Migrated,
    ];

    fn from_raw(raw: u32) -> Stat {
        Self::ALL[raw as usize]
    }
}

/// Per-task policy state; one per task, owned by the host.
#[derive(Clone, Debug)]
pub struct TaskState(ffi::NestTask);

impl TaskState {
    pub fn new() -> Self {
        let mut t = ffi::NestTask::default();
        // SAFETY: `t` is a valid, exclusively borrowed nest_task.
        unsafe { ffi::nest_native_task_init(&mut t) };
        Self(t)
    }

    /// The last two CPUs the task ran on, most recent first.
    pub fn recent_cpus(&self) -> [Option<u32>; 2] {
        self.0.recent_cpu.map(|c| u32::try_from(c).ok())
    }

    /// Consecutive placements that missed the previous CPU.
    pub fn prev_misses(&self) -> u32 {
        self.0.prev_misses
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

impl From<&ffi::NestChoice> for Choice {
    fn from(out: &ffi::NestChoice) -> Self {
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
    cfg: Box<ffi::NestConfig>,
    state: Box<UnsafeCell<ffi::NestState>>,
    stats: [AtomicU64; ffi::NR_STATS],
}

// SAFETY: the C policy only touches shared state through atomic operations
// and READ_ONCE/WRITE_ONCE, as it must in the kernel.
unsafe impl Sync for NestPolicy {}
unsafe impl Send for NestPolicy {}

/// What the C code's `nest_env_t` points to natively.
struct Env<'a> {
    plat: Option<&'a mut dyn Platform>,
    stats: &'a [AtomicU64; ffi::NR_STATS],
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
        let cfg = Box::new(ffi::NestConfig::new(topo, reserve_start, params));
        Ok(Self {
            cfg,
            state: Box::new(UnsafeCell::new(ffi::NestState::default())),
            stats: std::array::from_fn(|_| AtomicU64::new(0)),
        })
    }

    fn state_ptr(&self) -> *mut ffi::NestState {
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
        let mut out = ffi::NestChoice::default();
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
        let mut out = ffi::NestChoice::default();
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
        let mut out = ffi::NestChoice::default();
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
        let mut env = self.env(None);
        // SAFETY: valid pointers; see select_cpu.
        unsafe {
            ffi::nest_native_task_running(
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
extern "C" fn nest_plat_is_fork(env: *mut c_void) -> bool {
    plat_of(env).is_fork()
}

#[unsafe(no_mangle)]
extern "C" fn nest_plat_cpu_idle(env: *mut c_void, cpu: i32) -> bool {
    plat_of(env).cpu_idle(cpu as u32)
}
