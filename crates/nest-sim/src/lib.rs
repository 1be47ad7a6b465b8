//! nest-sim: a deterministic, DVFS-aware multicore simulator that runs
//! placement policies (the default Linux model, Nest...) on models of
//! multi-socket machines, and reports completion time, frequencies, energy
//! and the schedule itself (as a nest-trace [`nest_trace::Trace`]).
//!
//! ```no_run
//! use nest_sim::{Governor, Machine, SimConfig, policy::baseline::Baseline, workload};
//! let machine = Machine::builtin("xeon-gold-5218-2s").unwrap();
//! let w = workload::builtin::build("configure:steps=50", machine.nr_cores()).unwrap();
//! let cfg = SimConfig::new(machine, Governor::Powersave, 1);
//! let r = nest_sim::run(cfg, &w, &mut Baseline).unwrap();
//! println!("{} ms", r.completion_ns / 1_000_000);
//! ```

pub mod calibrate;
pub mod cli;
pub mod cpuset;
pub mod engine;
pub mod governor;
pub mod machine;
pub mod pelt;
pub mod policy;
pub mod power;
pub mod results;
pub mod rng;
pub mod sensitivity;
pub mod validate;
pub mod workload;

pub use engine::{Sim, SimConfig};
pub use governor::Governor;
pub use machine::Machine;
pub use results::RunResult;

/// Runs `workload` under `policy` with `cfg` and returns the measurements.
pub fn run(
    cfg: SimConfig,
    workload: &workload::Workload,
    policy: &mut dyn policy::Policy,
) -> anyhow::Result<RunResult> {
    Ok(Sim::new(cfg, workload, policy)?.run())
}
