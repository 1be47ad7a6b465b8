//! Cost of one placement (`nest_select_cpu`, the C policy built natively)
//! on machines of 16, 160 and 512 CPUs.
//!
//! Run with `cargo run --release -p nest-policy --example select_bench`.
//!
//! Every machine has 2 threads per core and one LLC per socket; the primary
//! nest holds CPUs 0-3 (socket 0) and the reserve the last 5 CPUs.
//! The platform answers its own questions (default placement, wide
//! fallback) in constant time, so the figures are the policy's own cost:
//! mostly the nest scans. Scenarios:
//!
//! - `prev-idle`: the previous CPU (3) is idle in the primary nest, on a
//!   whole idle core (found at once);
//! - `wrap`: only the primary CPU just below the previous CPU (2) is idle,
//!   on a whole idle core, so a scan from the previous CPU reaches it last,
//!   after wrapping around;
//! - `none-idle`: nothing is idle: every pass of every nest scan runs to
//!   its end and the task is queued.
//!
//! Each figure is the best of 5 runs of about 100 ms, in ns per call.

use std::time::{Duration, Instant};

use nest_policy::{NestPolicy, Params, Platform, TaskState};
use nest_topology::Topology;

/// Idle states and a switch between set-up (a real default placement) and
/// measurement (constant-time answers).
struct BenchPlat {
    idle: Vec<bool>,
    now: u64,
    measuring: bool,
}

impl BenchPlat {
    fn first_idle(&mut self) -> Option<u32> {
        let cpu = self.idle.iter().position(|&i| i)? as u32;
        self.idle[cpu as usize] = false;
        Some(cpu)
    }
}

impl Platform for BenchPlat {
    fn claim_idle(&mut self, cpu: u32) -> bool {
        std::mem::replace(&mut self.idle[cpu as usize], false)
    }

    fn task_allowed(&self, _cpu: u32) -> bool {
        true
    }

    fn default_cpu(&mut self, prev: u32, whole_core: bool) -> (u32, bool) {
        if self.measuring || whole_core {
            return (prev, false);
        }
        self.first_idle().map_or((prev, false), |cpu| (cpu, true))
    }

    fn pick_any_idle(&mut self) -> Option<u32> {
        if self.measuring {
            return None;
        }
        self.first_idle()
    }

    fn now_ns(&self) -> u64 {
        self.now
    }

    fn cpu_idle(&self, cpu: u32) -> bool {
        self.idle[cpu as usize]
    }
}

struct Bench {
    policy: NestPolicy,
    plat: BenchPlat,
    nr_cpus: u32,
}

impl Bench {
    fn new(topo: &Topology) -> Self {
        let nr_cpus = topo.nr_cpus() as u32;
        let policy = NestPolicy::new(topo, 0, &Params::default()).expect("valid topology");
        let plat = BenchPlat {
            idle: vec![false; nr_cpus as usize],
            now: 0,
            measuring: false,
        };
        let mut bench = Self {
            policy,
            plat,
            nr_cpus,
        };
        // The primary nest: the first 4 cores' first threads (socket 0),
        // each found by the fallback (reserve), then found again (promoted).
        for cpu in 0..4 {
            bench.place_only_idle(cpu);
            bench.place_only_idle(cpu);
        }
        // The reserve: the last 5 CPUs, found by the fallback.
        for cpu in nr_cpus - 5..nr_cpus {
            bench.place_only_idle(cpu);
        }
        assert_eq!(bench.policy.primary().len(), 4);
        assert_eq!(bench.policy.reserve().len(), 5);
        bench
    }

    /// Place a task while only `cpu` is idle; it must get `cpu`.
    fn place_only_idle(&mut self, cpu: u32) {
        self.plat.idle.iter_mut().for_each(|i| *i = false);
        self.plat.idle[cpu as usize] = true;
        let choice = self
            .policy
            .select_cpu(&mut self.plat, &mut TaskState::new(), cpu);
        assert_eq!((choice.cpu, choice.idle), (cpu, true));
    }

    /// Only `idle` CPUs are idle, for the platform and the policy (the
    /// others run a task since time 0, the idle ones went idle at 1 ns).
    fn set_idle(&mut self, idle: &[u32]) {
        for cpu in 0..self.nr_cpus {
            let is_idle = idle.contains(&cpu);
            self.plat.idle[cpu as usize] = is_idle;
            self.policy.task_running(&mut TaskState::new(), cpu, 0);
            if is_idle {
                self.policy.cpu_idle(cpu, 1);
            }
        }
        // Well within P_remove: nothing is compacted while measuring.
        self.plat.now = 1_000;
        self.plat.measuring = true;
    }

    /// Best of 5 runs, in ns per placement. A claimed CPU is made idle
    /// again after each call, so every call takes the same path.
    fn measure(&mut self, prev: u32) -> f64 {
        let template = TaskState::new();
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let start = Instant::now();
            let mut calls = 0u64;
            while start.elapsed() < Duration::from_millis(100) {
                for _ in 0..1000 {
                    let mut task = template.clone();
                    let choice = self.policy.select_cpu(&mut self.plat, &mut task, prev);
                    if choice.idle {
                        self.plat.idle[choice.cpu as usize] = true;
                    }
                    std::hint::black_box(choice);
                }
                calls += 1000;
            }
            best = best.min(start.elapsed().as_nanos() as f64 / calls as f64);
        }
        best
    }
}

fn main() {
    println!(
        "{:>5}  {:>10}  {:>6}  {:>10}",
        "cpus", "scenario", "got", "ns/call"
    );
    for (sockets, cores) in [(2, 4), (4, 20), (8, 32)] {
        let topo = Topology::regular(sockets, cores, 2);
        let prev = 3;
        // An idle CPU's SMT sibling is idle too: a whole idle core.
        let sibling = topo.nr_cpus() as u32 / 2;
        let scenarios: [(&str, Vec<u32>); 3] = [
            ("prev-idle", vec![prev, prev + sibling]),
            ("wrap", vec![prev - 1, prev - 1 + sibling]),
            ("none-idle", vec![]),
        ];
        for (name, idle) in scenarios {
            let mut bench = Bench::new(&topo);
            bench.set_idle(&idle);
            let choice = bench
                .policy
                .select_cpu(&mut bench.plat, &mut TaskState::new(), prev);
            let got = if choice.idle {
                bench.plat.idle[choice.cpu as usize] = true;
                choice.cpu.to_string()
            } else {
                "queued".to_string()
            };
            let ns = bench.measure(prev);
            println!(
                "{:>5}  {:>10}  {:>6}  {:>10.1}",
                topo.nr_cpus(),
                name,
                got,
                ns
            );
        }
    }
}
