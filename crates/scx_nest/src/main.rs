//! scx_nest: Nest (EuroSys 2022) as a sched_ext scheduler.
//!
//! User space checks the system and the options, fills in the BPF
//! scheduler's configuration, attaches it, serves statistics, and detaches
//! it on SIGINT/SIGTERM or reports why the kernel ejected it. All placement
//! decisions are made in BPF (src/bpf/main.bpf.c and policy/).

mod bpf_skel;
pub use bpf_skel::*;
#[allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
mod bpf_intf;
mod config;
mod preflight;
mod progstats;
mod stats;

use std::io::IsTerminal;
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use crossbeam::channel::Receiver;
use libbpf_rs::skel::Skel;
use libbpf_rs::{MapCore, MapFlags, OpenObject};
use log::{info, warn};
use scx_stats::prelude::*;
use scx_utils::{UserExitInfo, scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report};

use config::{Opts, SchedConfig};
use stats::Metrics;

struct Scheduler<'a> {
    skel: BpfSkel<'a>,
    perf_mode: nest_policy::PerfMode,
    struct_ops: Option<libbpf_rs::Link>,
    stats_server: StatsServer<(), Metrics>,
}

impl<'a> Scheduler<'a> {
    fn init(cfg: &SchedConfig, open_object: &'a mut MaybeUninit<OpenObject>) -> Result<Self> {
        let skel_builder = BpfSkelBuilder::default();
        let mut skel = scx_ops_open!(
            skel_builder,
            open_object,
            nest_ops,
            None::<libbpf_rs::libbpf_sys::bpf_object_open_opts>
        )?;
        cfg.apply(&mut skel)?;
        let mut skel = scx_ops_load!(skel, nest_ops, uei)?;
        let struct_ops = Some(scx_ops_attach!(skel, nest_ops)?);
        let stats_server = StatsServer::new(stats::server_data()).launch()?;
        Ok(Self {
            skel,
            perf_mode: cfg.perf_mode(),
            struct_ops,
            stats_server,
        })
    }

    fn metrics(&self) -> Metrics {
        let (policy, events) = self.counters();
        let state = &self
            .skel
            .maps
            .bss_data
            .as_ref()
            .expect("the BPF object has a .bss")
            .nest_state;
        let ones = |mask: &[u64]| mask.iter().map(|w| w.count_ones() as u64).sum();
        let bss = self
            .skel
            .maps
            .bss_data
            .as_ref()
            .expect("the BPF object has a .bss");
        let nr_cpus = (bss.nest_cfg.nr_cpus as usize).min(state.perf.len());
        let perf = stats::PerfTargets::new(
            state.perf[..nr_cpus]
                .iter()
                .map(|c| (c.nr_requests > 0).then_some(c.target)),
        );
        let perf_requests = state.perf[..nr_cpus]
            .iter()
            .map(|c| u64::from(c.nr_requests))
            .sum();
        let gauges = stats::Gauges {
            primary_cpus: ones(&state.primary),
            reserve_cpus: ones(&state.reserve),
            perf_mode: self.perf_mode.name().to_string(),
            perf_requests,
            perf_cpus: perf.cpus,
            perf_mean: perf.mean,
            perf_min: perf.min,
            perf_max: perf.max,
            perf_targets: perf.line,
        };
        Metrics::new(gauges, &policy, &events)
    }

    /// The per-CPU counters, summed over CPUs: (policy, events).
    fn counters(&self) -> (Vec<u64>, Vec<u64>) {
        let mut policy = vec![0u64; bpf_intf::nest_stat_NEST_NR_STATS as usize];
        let mut events = vec![0u64; bpf_intf::scx_nest_event_NEST_NR_EVENTS as usize];
        let key = 0u32.to_ne_bytes();
        let per_cpu = match self.skel.maps.counters.lookup_percpu(&key, MapFlags::ANY) {
            Ok(Some(values)) => values,
            Ok(None) => return (policy, events),
            Err(err) => {
                warn!("cannot read the counters: {err}");
                return (policy, events);
            }
        };
        for bytes in per_cpu {
            if bytes.len() < std::mem::size_of::<bpf_intf::nest_counters>() {
                continue;
            }
            // SAFETY: the map value is a struct nest_counters; the size was
            // checked and read_unaligned copes with the Vec's alignment.
            let c: bpf_intf::nest_counters =
                unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
            policy
                .iter_mut()
                .zip(c.policy)
                .for_each(|(sum, v)| *sum += v);
            events
                .iter_mut()
                .zip(c.events)
                .for_each(|(sum, v)| *sum += v);
        }
        (policy, events)
    }

    fn exited(&mut self) -> bool {
        uei_exited!(&self.skel, uei)
    }

    /// Serve statistics until a signal or until the kernel ejects us,
    /// looking for either once a second (as the scx schedulers do): each
    /// wake-up of this thread is a task the machine's schedule did not ask
    /// for, and in an emulated guest, waking five times a second, it took
    /// the idle CPUs of the tasks being measured (24 and 38 times in two
    /// runs of a configure script). A signal or a statistics request wakes
    /// it at once (`unpark()`).
    ///
    /// It sleeps in `park_timeout()`, not in the statistics channel's
    /// `recv_timeout()`: crossbeam spins up to 127 `pause` instructions
    /// and four `sched_yield()`s each time it looks at an empty channel,
    /// twice a call. Under QEMU's emulation each `pause` hands the host
    /// thread to the other vCPUs, so with every vCPU busy that spin took
    /// 62% of a vCPU, in runs of up to 478 ms, and moved the tasks it
    /// displaced to other CPUs (docs/design/scheduler.md, "The scheduler's own
    /// process"). Requests are now waited for on a thread of their own,
    /// which spins once per request and sleeps between them.
    fn run(&mut self, shutdown: &AtomicBool) -> Result<UserExitInfo> {
        let (res_ch, req_ch) = self.stats_server.channels();
        let requests = wait_for_requests(req_ch, std::thread::current());
        while !shutdown.load(Ordering::Relaxed) && !self.exited() {
            std::thread::park_timeout(Duration::from_secs(1));
            while take_request(&requests) {
                res_ch.send(self.metrics())?;
            }
        }
        // Dropping the link detaches the scheduler.
        self.struct_ops.take();
        uei_report!(&self.skel, uei)
    }
}

/// Count the statistics requests that arrive on `req_ch`, waking `server`
/// for each, on a thread of their own that ends with the channel.
fn wait_for_requests(req_ch: Receiver<()>, server: std::thread::Thread) -> Arc<AtomicUsize> {
    let pending = Arc::new(AtomicUsize::new(0));
    let counted = pending.clone();
    std::thread::spawn(move || {
        for () in req_ch.iter() {
            counted.fetch_add(1, Ordering::Release);
            server.unpark();
        }
    });
    pending
}

/// Take one pending request, if any.
fn take_request(pending: &AtomicUsize) -> bool {
    pending
        .fetch_update(Ordering::Acquire, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

fn init_logging() -> Result<()> {
    let config = simplelog::ConfigBuilder::new()
        .set_time_level(simplelog::LevelFilter::Off)
        .set_target_level(simplelog::LevelFilter::Off)
        .set_thread_level(simplelog::LevelFilter::Off)
        .set_location_level(simplelog::LevelFilter::Off)
        .build();
    // Colours only for a person: logs captured to a file or pipe stay plain.
    let colour = if std::io::stderr().is_terminal() {
        simplelog::ColorChoice::Auto
    } else {
        simplelog::ColorChoice::Never
    };
    simplelog::TermLogger::init(
        simplelog::LevelFilter::Info,
        config,
        simplelog::TerminalMode::Stderr,
        colour,
    )?;
    Ok(())
}

/// libbpf's messages go to stderr: with --verbose all of them, otherwise
/// its warnings only (its notes on struct_ops members this kernel lacks
/// are informational), less one it gives on every start (below), which
/// scx_utils' `init_libbpf_logging()` would pass on.
fn init_libbpf_messages(verbose: bool) {
    let print: (libbpf_rs::PrintLevel, libbpf_rs::PrintCallback) = if verbose {
        (libbpf_rs::PrintLevel::Debug, |_, message| {
            eprint!("{message}")
        })
    } else {
        (libbpf_rs::PrintLevel::Warn, print_libbpf_warning)
    };
    libbpf_rs::set_print(Some(print));
}

fn print_libbpf_warning(_: libbpf_rs::PrintLevel, message: String) {
    // scx_ops_attach! attaches the whole skeleton before the struct_ops
    // map; libbpf-rs skeletons give libbpf no link slot for that map, so
    // libbpf warns on every start although the macro attaches it next.
    if !message.contains("BPF map skeleton link is uninitialized") {
        eprint!("{message}");
    }
}

fn spawn_monitor(interval: Duration, shutdown: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        // A reader that stopped (`--monitor 1s | head`) ends the monitor
        // quietly; the scheduler, if attached, keeps running.
        if let Err(err) = stats::monitor(interval, shutdown)
            && !is_broken_pipe(&err)
        {
            warn!("statistics monitor stopped: {err}");
        }
    })
}

/// The output went into a pipe whose reader stopped.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn main() -> std::process::ExitCode {
    match run(Opts::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) if is_broken_pipe(&err) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("scx_nest: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(opts: Opts) -> Result<()> {
    if opts.help_stats {
        stats::server_data().describe_meta(&mut std::io::stdout(), None)?;
        return Ok(());
    }
    if opts.help_man {
        use clap::CommandFactory;
        // Section 8: a system administration command.
        clap_mangen::Man::new(Opts::command())
            .section("8")
            .render(&mut std::io::stdout())?;
        return Ok(());
    }
    init_logging()?;
    init_libbpf_messages(opts.verbose);

    let shutdown = Arc::new(AtomicBool::new(false));
    let on_signal = shutdown.clone();
    let main_thread = std::thread::current();
    ctrlc::set_handler(move || {
        on_signal.store(true, Ordering::Relaxed);
        main_thread.unpark();
    })
    .context("cannot install the SIGINT/SIGTERM handler")?;

    if let Some(interval) = opts.monitor {
        spawn_monitor(interval, shutdown.clone())
            .join()
            .map_err(|_| anyhow::anyhow!("the statistics monitor panicked"))?;
        return Ok(());
    }

    // Everything that can be refused is checked before anything is loaded.
    let cfg = SchedConfig::from_opts(&opts, &config::Host::probe());
    preflight::check(cfg.policy == config::Policy::Smove)?;
    if let Some(interval) = opts.stats {
        spawn_monitor(interval, shutdown.clone());
    }

    let run_time_stats = match opts.prog_stats {
        true => Some(progstats::RunTimeStats::enable()?),
        false => None,
    };
    let mut open_object = MaybeUninit::uninit();
    loop {
        let mut sched = Scheduler::init(&cfg, &mut open_object)?;
        info!("scx_nest attached ({})", cfg.describe());
        let exit = sched.run(&shutdown);
        info!("scx_nest detached");
        if run_time_stats.is_some() {
            progstats::print(&progstats::read(sched.skel.object()));
        }
        if !exit?.should_restart() || shutdown.load(Ordering::Relaxed) {
            return Ok(());
        }
        // The kernel asks for a restart when the CPUs changed while the
        // scheduler was being loaded (its hotplug sequence number moved).
        info!("the kernel asked for a restart (CPU hotplug): restarting");
    }
}
