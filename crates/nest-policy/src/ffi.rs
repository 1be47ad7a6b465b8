//! Rust mirrors of the structures in `policy/nest_policy.h` and the native
//! entry points of `csrc/native.c`. The layouts are checked against the C
//! compiler's in the tests below.

use crate::{LlcLayout, MAX_LLCS, Params, Topology};

pub const MAX_CPUS: usize = 512;
const MASK_WORDS: usize = MAX_CPUS / 64;
pub const NR_STATS: usize = 27;

#[repr(C)]
pub struct NestConfig {
    pub p_remove_ns: u64,
    pub s_max_ns: u64,
    pub smove_delay_ns: u64,
    pub r_max: u32,
    pub r_impatient: u32,
    pub nr_cpus: u32,
    pub reserve_start: i32,
    pub disabled: u32,
    pub cpu_llc: [u32; MAX_CPUS],
    pub cpu_sibling: [i32; MAX_CPUS],
    pub slice_ns: u64,
    pub slice_min_ns: u64,
    pub nr_llcs: u32,
    pub llc_nr_cpus: [u32; MAX_LLCS],
    pub llc_order: [[u32; MAX_LLCS]; MAX_LLCS],
    pub perf_mode: u32,
    pub perf_floor: u32,
}

impl NestConfig {
    pub fn new(
        topo: &Topology,
        reserve_start: u32,
        params: &Params,
    ) -> Result<Self, crate::ConfigError> {
        let llcs = LlcLayout::new(
            topo.cpus
                .iter()
                .map(|place| (place.llc as usize, place.node as usize)),
        )?;
        let mut cpu_llc = [0; MAX_CPUS];
        let mut cpu_sibling = [-1; MAX_CPUS];
        let mut llc_nr_cpus = [0; MAX_LLCS];
        let mut llc_order = [[0; MAX_LLCS]; MAX_LLCS];
        llc_nr_cpus[..llcs.len()].copy_from_slice(llcs.nr_cpus());
        for (row, order) in llc_order.iter_mut().zip(llcs.orders()) {
            row[..order.len()].copy_from_slice(&order);
        }
        for place in &topo.cpus {
            cpu_llc[place.cpu as usize] = llcs.index_of(place.llc as usize);
            cpu_sibling[place.cpu as usize] = topo
                .cpus
                .iter()
                .find(|other| other.core == place.core && other.cpu != place.cpu)
                .map_or(-1, |other| other.cpu as i32);
        }
        Ok(Self {
            p_remove_ns: params.p_remove_ns,
            s_max_ns: params.s_max_ns,
            smove_delay_ns: params.smove_delay_ns,
            r_max: params.r_max,
            r_impatient: params.r_impatient,
            nr_cpus: topo.nr_cpus() as u32,
            reserve_start: reserve_start as i32,
            disabled: params.disabled.iter().fold(0, |bits, m| bits | m.bit()),
            cpu_llc,
            cpu_sibling,
            slice_ns: params.slice_ns,
            slice_min_ns: crate::slice_min_ns(params.slice_ns),
            nr_llcs: llcs.len() as u32,
            llc_nr_cpus,
            llc_order,
            perf_mode: params.perf.bpf_value(),
            perf_floor: params.perf_floor,
        })
    }
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct NestCpu {
    pub idle_since: u64,
    pub spin_until: u64,
    pub task_exited: u32,
    pub running: u32,
    pub offline: u32,
    pub paired_ticks: u32,
    pub curr_vtime: u64,
    pub curr_started: u64,
    pub curr_weight: u32,
    pub pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct NestPelt {
    pub period_start: u64,
    pub last: u64,
    pub run: u32,
    pub avg: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct NestPerfCpu {
    pub util: NestPelt,
    pub removed: u32,
    pub running: u32,
    pub target: u32,
    pub nr_requests: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct NestPerfTask {
    pub util: NestPelt,
    pub cpu: i32,
    pub attached: u32,
}

#[repr(C)]
pub struct NestState {
    pub primary: [u64; MASK_WORDS],
    pub reserve: [u64; MASK_WORDS],
    pub nr_reserve: i32,
    pub pad: u32,
    pub cpus: [NestCpu; MAX_CPUS],
    pub llc_vtime: [u64; MAX_LLCS],
    pub perf: [NestPerfCpu; MAX_CPUS],
}

impl Default for NestState {
    fn default() -> Self {
        Self {
            primary: [0; MASK_WORDS],
            reserve: [0; MASK_WORDS],
            nr_reserve: 0,
            pad: 0,
            cpus: [NestCpu::default(); MAX_CPUS],
            llc_vtime: [0; MAX_LLCS],
            perf: [NestPerfCpu::default(); MAX_CPUS],
        }
    }
}

#[repr(C)]
#[derive(Clone, Debug, Default)]
pub struct NestTask {
    pub recent_cpu: [i32; 2],
    pub prev_misses: u32,
    pub move_to: i32,
    pub move_at: u64,
    pub vtime: u64,
    pub run_start: u64,
    pub vtime_llc: u32,
    pub pad: u32,
    pub perf: NestPerfTask,
}

#[repr(C)]
#[derive(Default)]
pub struct NestChoice {
    pub cpu: i32,
    pub idle: u32,
    pub how: u32,
    pub defer_cpu: i32,
    pub defer_ns: u64,
}

unsafe extern "C" {
    pub fn nest_native_select_cpu(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        now: u64,
        t: *mut NestTask,
        prev_cpu: i32,
        out: *mut NestChoice,
    );
    pub fn nest_native_claim_for_queued(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        now: u64,
        t: *mut NestTask,
        prev_cpu: i32,
    ) -> i32;
    pub fn nest_native_task_init(t: *mut NestTask);
    pub fn nest_native_task_running(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        now: u64,
        t: *mut NestTask,
        cpu: i32,
    );
    pub fn nest_native_task_exiting(st: *mut NestState, cpu: i32);
    pub fn nest_native_cpu_idle(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        cpu: i32,
        now: u64,
    ) -> bool;
    pub fn nest_native_spin_continue(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        cpu: i32,
        now: u64,
    ) -> bool;
    pub fn nest_native_tick_unpair(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        cpu: i32,
    ) -> bool;
    pub fn nest_native_cpu_spinning(st: *mut NestState, cpu: i32) -> bool;
    pub fn nest_native_cpu_offline(st: *mut NestState, cpu: i32);
    pub fn nest_native_cpu_online(st: *mut NestState, cpu: i32);
    pub fn nest_native_slocal_select(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        waker_cpu: i32,
        prev_cpu: i32,
        out: *mut NestChoice,
    );
    #[allow(clippy::too_many_arguments)]
    pub fn nest_native_smove_select(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        now: u64,
        t: *mut NestTask,
        waker_cpu: i32,
        prev_cpu: i32,
        out: *mut NestChoice,
    );
    pub fn nest_native_smove_timer(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        now: u64,
        t: *mut NestTask,
    ) -> i32;
    pub fn nest_native_smove_task_running(t: *mut NestTask);
    pub fn nest_native_task_weight(weight: u32, cg_weight: u32, cg_runnable: u64) -> u32;
    pub fn nest_native_queue_llc(cfg: *const NestConfig, prev_cpu: i32) -> u32;
    pub fn nest_native_task_woken(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        now: u64,
        t: *mut NestTask,
        queue: i32,
        weight: u32,
    );
    pub fn nest_native_queue_vtime(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        t: *mut NestTask,
        queue: i32,
    ) -> u64;
    pub fn nest_native_slice(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        llc: u32,
    ) -> u64;
    pub fn nest_native_sched_running(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        now: u64,
        t: *mut NestTask,
        cpu: i32,
        weight: u32,
    );
    pub fn nest_native_sched_stopping(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        now: u64,
        t: *mut NestTask,
        cpu: i32,
        weight: u32,
    );
    pub fn nest_native_wakeup_preempts(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        now: u64,
        cpu: i32,
        vtime: u64,
    ) -> bool;
    pub fn nest_native_queue_to_consume(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        cpu: i32,
    ) -> i32;
    pub fn nest_native_prefer_queued(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        cpu: i32,
        head_vtime: u64,
        t: *const NestTask,
    ) -> bool;
    pub fn nest_native_prev_keeps_cpu(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        now: u64,
        cpu: i32,
        t: *const NestTask,
        weight: u32,
        head_vtime: u64,
        others_preempted_only: bool,
    ) -> bool;
    pub fn nest_native_tick_kick(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        cpu: i32,
    ) -> bool;
    pub fn nest_native_cpu_busy(
        st: *mut NestState,
        cfg: *const NestConfig,
        env: *mut std::ffi::c_void,
        cpu: i32,
        now: u64,
    );
    pub fn nest_native_perf_init_cpu(st: *mut NestState, cfg: *const NestConfig, cpu: i32) -> i32;
    pub fn nest_native_perf_running(
        st: *mut NestState,
        cfg: *const NestConfig,
        now: u64,
        t: *mut NestTask,
        cpu: i32,
        level: u32,
    ) -> i32;
    pub fn nest_native_perf_stopping(
        st: *mut NestState,
        cfg: *const NestConfig,
        now: u64,
        t: *mut NestTask,
        cpu: i32,
        level: u32,
        exiting: bool,
    ) -> i32;
    pub fn nest_native_perf_tick(
        st: *mut NestState,
        cfg: *const NestConfig,
        now: u64,
        t: *mut NestTask,
        cpu: i32,
        level: u32,
    ) -> i32;
    pub fn nest_native_perf_util(st: *mut NestState, cpu: i32) -> u32;
    pub fn nest_native_perf_task_util(t: *const NestTask) -> u32;
    pub fn nest_native_perf_freq(level: u32) -> u32;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    unsafe extern "C" {
        fn nest_native_sizeof(which: u32) -> usize;
    }

    #[test]
    fn rust_mirrors_have_the_c_layouts() {
        // SAFETY: nest_native_sizeof only returns sizeof() values.
        let c_size = |which| unsafe { nest_native_sizeof(which) };
        assert_eq!(c_size(0), size_of::<NestConfig>());
        assert_eq!(c_size(1), size_of::<NestState>());
        assert_eq!(c_size(2), size_of::<NestTask>());
        assert_eq!(c_size(3), size_of::<NestChoice>());
        assert_eq!(c_size(5), size_of::<NestPerfCpu>());
        assert_eq!(c_size(6), size_of::<NestPerfTask>());
    }

    #[test]
    fn stat_count_matches_c_enum() {
        assert_eq!(crate::Stat::ALL.len(), NR_STATS);
        // SAFETY: as above.
        assert_eq!(unsafe { nest_native_sizeof(4) }, NR_STATS);
    }
}
