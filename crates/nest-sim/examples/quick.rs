use nest_sim::{Governor, Machine, SimConfig, policy::baseline::Baseline, workload};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let m = Machine::builtin(args.get(1).map_or("xeon-gold-5218-2s", |s| s)).unwrap();
    let w = workload::builtin::build(
        args.get(2).map_or("configure:steps=50", |s| s),
        m.nr_cores(),
    )
    .unwrap();
    for g in Governor::ALL {
        let t = std::time::Instant::now();
        let r = nest_sim::run(SimConfig::new(m.clone(), g, 1), &w, &mut Baseline).unwrap();
        println!(
            "{:?} {} ms, {:.2} J, migr {}, cpus {:.2} under {:.2} res {:?} events {} wall {:?}",
            g,
            r.completion_ns / 1_000_000,
            r.energy_j,
            r.migrations,
            r.mean_cpus_used,
            r.mean_underload,
            r.residency
                .iter()
                .map(|x| (x * 100.0).round())
                .collect::<Vec<_>>(),
            r.events,
            t.elapsed()
        );
    }
}
