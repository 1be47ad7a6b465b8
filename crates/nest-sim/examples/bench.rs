//! Simulator throughput: simulated events per second and wall time to
//! simulate 10 s of a configure-like workload and of a one-thread-per-core
//! barrier workload on the 160-CPU Xeon E7-8870 v4 model.
//!
//! `cargo run --release -p nest-sim --example bench [-- <seconds>]`

use std::time::Instant;

use anyhow::Result;
use nest_sim::policy::Policy;
use nest_sim::policy::baseline::Baseline;
use nest_sim::policy::nest::Nest;
use nest_sim::{Governor, Machine, SimConfig, workload};

fn main() -> Result<()> {
    let secs: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let machine = Machine::builtin("xeon-e7-8870-v4-4s")?;
    let cores = machine.nr_cores();
    let workloads = [
        ("configure", "configure:steps=1000000"),
        ("barrier, 1 thread/core", "barrier:phases=1000000,run_us=2000"),
    ];
    println!("machine {} ({} CPUs), {secs} s simulated per run", machine.name, machine.nr_cpus());
    println!("{:<24} {:<8} {:>12} {:>10} {:>14}", "workload", "policy", "events", "wall (s)", "events/s");
    for (label, spec) in workloads {
        let w = workload::builtin::build(spec, cores)?;
        for name in ["linux", "nest"] {
            let mut policy: Box<dyn Policy> = match name {
                "linux" => Box::new(Baseline),
                _ => Box::new(Nest::new(&machine.topology(), Default::default(), true)?),
            };
            let mut cfg = SimConfig::new(machine.clone(), Governor::Powersave, 1);
            cfg.max_time_ns = secs * 1_000_000_000;
            let start = Instant::now();
            let r = nest_sim::run(cfg, &w, policy.as_mut())?;
            let wall = start.elapsed().as_secs_f64();
            println!(
                "{:<24} {:<8} {:>12} {:>10.3} {:>14.0}",
                label,
                name,
                r.events,
                wall,
                r.events as f64 / wall
            );
        }
    }
    Ok(())
}
