//! Simulator throughput: engine events per second and wall time to simulate
//! 10 s of a configure-like workload and of a one-thread-per-core barrier
//! workload on the 160-CPU Xeon E7-8870 v4 model, under Linux and Nest.
//!
//! "engine events" are the events the engine's queue delivered in time
//! order (run segment ends, sleep ends, spin ends, policy timers, ticks,
//! 1 ms frequency steps); "stale" counts those among them that had nothing
//! left to do (a segment end superseded by a re-timed segment, which the
//! queue counts without popping it; a spin end after an interrupted spin).
//! "sched
//! events" are the schedule events produced (what a trace would record:
//! switches, wakeups, forks, exits, migrations, frequency changes, idle
//! enter/exit, warm spins); they are not queue events and are in no rate.
//! "ev/s" is engine events per second of wall time, "useful ev/s" the same
//! without the stale ones.
//!
//! `cargo run --release -p nest-sim --example bench [-- SECONDS [RUNS [FILTER [KERNEL]]]]`
//! (defaults 10 s, 5 runs; FILTER keeps the rows whose "workload policy"
//! contains it, e.g. `configure nest`; KERNEL is the Linux model's
//! generation, `linux-7` (the default) or `linux-5.10`). The wall time is
//! the minimum and median over the runs; the rate uses the minimum.

use std::time::Instant;

use anyhow::Result;
use nest_sim::policy::Policy;
use nest_sim::policy::baseline::Baseline;
use nest_sim::policy::fork_balance::LinuxVersion;
use nest_sim::policy::nest::Nest;
use nest_sim::{Governor, Machine, RunResult, SimConfig, workload};

const WORKLOADS: [(&str, &str); 2] = [
    ("configure", "configure:steps=1000000"),
    ("barrier-1/core", "barrier:phases=1000000,run_us=2000"),
];

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let secs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    let runs: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let filter = args.next().unwrap_or_default();
    let kernel = match args.next().as_deref() {
        None | Some("linux-7") => LinuxVersion::Linux7,
        Some("linux-5.10") => LinuxVersion::Linux510,
        Some(other) => anyhow::bail!("unknown kernel `{other}` (linux-7 or linux-5.10)"),
    };
    let machine = Machine::builtin("xeon-e7-8870-v4-4s")?;
    println!(
        "machine {} ({} CPUs), governor powersave, seed 1, {secs} s simulated, \
         kernel {kernel:?}, wall time min/median of {runs} runs",
        machine.name,
        machine.nr_cpus()
    );
    println!(
        "engine ev = events delivered by the engine's queue in time order; \
         stale = those of them that had nothing left to do"
    );
    println!(
        "{:<15} {:<6} {:>10} {:>8} {:>10} {:>9} {:>9} {:>8} {:>11} {:>8}",
        "workload",
        "policy",
        "engine ev",
        "stale",
        "sched ev",
        "wall min",
        "wall med",
        "ev/s",
        "useful ev/s",
        "sim/wall"
    );
    for (label, spec) in WORKLOADS {
        let w = workload::builtin::build(spec, machine.nr_cores())?;
        for policy in ["linux", "nest"] {
            if !format!("{label} {policy}").contains(&filter) {
                continue;
            }
            let mut walls = Vec::new();
            let mut result = None;
            for _ in 0..runs.max(1) {
                let (r, wall) = run_once(&machine, &w, policy, secs, kernel)?;
                walls.push(wall);
                result = Some(r);
            }
            walls.sort_by(f64::total_cmp);
            let (min, median) = (walls[0], walls[walls.len() / 2]);
            let Some(r) = result else { continue };
            println!(
                "{:<15} {:<6} {:>10} {:>8} {:>10} {:>7.1}ms {:>7.1}ms {:>7.2}M {:>10.2}M {:>7.0}x",
                label,
                policy,
                r.events,
                r.stale_events,
                r.sched_events,
                min * 1e3,
                median * 1e3,
                r.events as f64 / min / 1e6,
                (r.events - r.stale_events) as f64 / min / 1e6,
                r.completion_ns as f64 / 1e9 / min
            );
        }
    }
    Ok(())
}

/// One run; returns its result and wall time in seconds.
fn run_once(
    machine: &Machine,
    w: &workload::Workload,
    policy: &str,
    secs: u64,
    kernel: LinuxVersion,
) -> Result<(RunResult, f64)> {
    let mut policy: Box<dyn Policy> = match policy {
        "linux" => Box::new(Baseline),
        _ => Box::new(Nest::new(&machine.topology(), Default::default())?),
    };
    let mut cfg = SimConfig::new(machine.clone(), Governor::Powersave, 1);
    cfg.max_time_ns = secs * 1_000_000_000;
    cfg.linux = kernel;
    let start = Instant::now();
    let r = nest_sim::run(cfg, w, policy.as_mut())?;
    Ok((r, start.elapsed().as_secs_f64()))
}
