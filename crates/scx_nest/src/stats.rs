//! Live statistics through scx_stats: `scx_nest --stats 1` prints them while
//! scheduling, `scx_nest --monitor 1` from another shell.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Result;
use scx_stats::prelude::*;
use scx_stats_derive::{Stats, stat_doc};
use serde::{Deserialize, Serialize};

/// Counters are totals since the scheduler started; the monitor prints the
/// change over each interval.
#[stat_doc]
#[derive(Clone, Debug, Default, Serialize, Deserialize, Stats)]
#[stat(top)]
pub struct Metrics {
    #[stat(desc = "CPUs in the primary nest")]
    pub primary_cpus: u64,
    #[stat(desc = "CPUs in the reserve nest")]
    pub reserve_cpus: u64,
    #[stat(desc = "Placements on the task's attached CPU")]
    pub attached: u64,
    #[stat(desc = "Placements on the previous CPU, found in the primary nest")]
    pub prev: u64,
    #[stat(desc = "Placements on another idle primary CPU")]
    pub primary: u64,
    #[stat(desc = "Placements on an idle reserve CPU (promoted)")]
    pub reserve: u64,
    #[stat(desc = "Placements by the default idle-CPU selection")]
    pub fallback: u64,
    #[stat(desc = "Placements on an idle CPU found on any socket")]
    pub fallback_wide: u64,
    #[stat(desc = "Placements that found no idle CPU (task queued)")]
    pub no_idle: u64,
    #[stat(desc = "Reserve CPUs promoted to the primary nest")]
    pub promoted: u64,
    #[stat(desc = "Fallback CPUs that joined the reserve nest")]
    pub joined_reserve: u64,
    #[stat(desc = "Fallback CPUs that joined the primary nest directly")]
    pub joined_primary: u64,
    #[stat(desc = "Primary CPUs demoted after idling longer than P_remove")]
    pub compacted: u64,
    #[stat(desc = "Primary CPUs demoted when their task exited")]
    pub exit_demoted: u64,
    #[stat(desc = "CPUs that could not join the full reserve")]
    pub reserve_full: u64,
    #[stat(desc = "Placements of impatient tasks")]
    pub impatient: u64,
    #[stat(desc = "Tasks queued in their LLC's virtual-time queue")]
    pub queued: u64,
    #[stat(desc = "Tasks queued in their only CPU's queue (pinned or migration disabled)")]
    pub pinned: u64,
    #[stat(desc = "Tasks queued without a placement sent straight to an idle CPU")]
    pub direct: u64,
    #[stat(desc = "Idle CPUs woken to look at the queues")]
    pub kicked: u64,
    #[stat(desc = "Tasks held back by --debug-stall-comm")]
    pub stalled: u64,
    #[stat(desc = "Idle primary CPUs that started warm spinning")]
    pub spin_started: u64,
    #[stat(desc = "Warm spins ended by a task arriving")]
    pub spin_work: u64,
    #[stat(desc = "Warm spins that lasted S_max")]
    pub spin_expired: u64,
    #[stat(desc = "Warm spins ended because the SMT sibling ran a task")]
    pub spin_sibling: u64,
    #[stat(desc = "Warm spins ended because the CPU left the primary nest")]
    pub spin_demoted: u64,
    #[stat(desc = "Time spent warm spinning (ns)")]
    pub spin_ns: u64,
    #[stat(desc = "Placements on a warm-spinning CPU")]
    pub spin_wakes: u64,
    #[stat(desc = "Total delay from placement to running, on warm-spinning CPUs (ns)")]
    pub spin_wake_ns: u64,
    #[stat(desc = "Placements on a really idle CPU")]
    pub idle_wakes: u64,
    #[stat(desc = "Total delay from placement to running, on really idle CPUs (ns)")]
    pub idle_wake_ns: u64,
    #[stat(desc = "S_local/S_move: placements on the waker's CPU")]
    pub waker_cpu: u64,
    #[stat(desc = "S_move: placements on the default CPU")]
    pub default_cpu: u64,
    #[stat(desc = "S_move: default CPU above its minimum frequency")]
    pub freq_above_min: u64,
    #[stat(desc = "S_move: default CPU at its minimum frequency")]
    pub freq_at_min: u64,
    #[stat(desc = "S_move: deferred moves asked for (timers armed)")]
    pub timers_armed: u64,
    #[stat(desc = "S_move: tasks still waiting when their delay passed")]
    pub timers_fired: u64,
    #[stat(desc = "S_move: tasks moved to the default CPU after the delay")]
    pub migrated: u64,
    #[stat(desc = "S_move: moves the kernel refused (task already gone)")]
    pub move_failed: u64,
    #[stat(desc = "Tasks moved at a tick from a shared core to a whole idle one")]
    pub unpaired: u64,
    #[stat(desc = "Running tasks preempted by a woken task with an earlier virtual time")]
    pub preempted: u64,
    #[stat(desc = "Tasks taken from another LLC's queue")]
    pub stolen: u64,
    #[stat(desc = "Tasks taken ahead of their queue's first because they last ran on that CPU")]
    pub kept_local: u64,
    #[stat(desc = "Idle CPUs woken at a tick because tasks waited in the LLC queue")]
    pub tick_kicked: u64,
    #[stat(desc = "CPUs taken by a higher scheduling class (tasks re-enqueued)")]
    pub released: u64,
    #[stat(desc = "Frequency requests (--perf): util, nest or max (no requests)")]
    pub perf_mode: String,
    #[stat(desc = "Frequency requests made (scx_bpf_cpuperf_set calls)")]
    pub perf_requests: u64,
    #[stat(desc = "CPUs that made a frequency request (the others stay at the kernel's 1024)")]
    pub perf_cpus: u64,
    #[stat(desc = "Mean of the CPUs' last requested performance targets (1024 = maximum)")]
    pub perf_mean: f64,
    #[stat(desc = "Lowest last requested performance target of a CPU")]
    pub perf_min: u64,
    #[stat(desc = "Highest last requested performance target of a CPU")]
    pub perf_max: u64,
    #[stat(desc = "Last requested performance target of each CPU, in CPU order ('-': none yet)")]
    pub perf_targets: String,
}

/// Mean of `total_ns` over `count`, in microseconds.
fn mean_us(total_ns: u64, count: u64) -> f64 {
    if count == 0 {
        0.0
    } else {
        total_ns as f64 / count as f64 / 1000.0
    }
}

macro_rules! counter_delta {
    ($cur:expr, $prev:expr, $($field:ident),+) => {
        Metrics {
            $($field: $cur.$field.wrapping_sub($prev.$field),)+
            ..$cur.clone()
        }
    };
}

impl Metrics {
    /// The counters' change since `prev`; gauges keep their current value.
    fn delta(&self, prev: &Self) -> Self {
        counter_delta!(
            self,
            prev,
            attached,
            prev,
            primary,
            reserve,
            fallback,
            fallback_wide,
            no_idle,
            promoted,
            joined_reserve,
            joined_primary,
            compacted,
            exit_demoted,
            reserve_full,
            impatient,
            queued,
            pinned,
            direct,
            kicked,
            stalled,
            spin_started,
            spin_work,
            spin_expired,
            spin_sibling,
            spin_demoted,
            spin_ns,
            spin_wakes,
            spin_wake_ns,
            idle_wakes,
            idle_wake_ns,
            waker_cpu,
            default_cpu,
            freq_above_min,
            freq_at_min,
            timers_armed,
            timers_fired,
            migrated,
            move_failed,
            unpaired,
            preempted,
            stolen,
            kept_local,
            tick_kicked,
            released,
            perf_requests
        )
    }

    fn format<W: Write>(&self, w: &mut W) -> Result<()> {
        writeln!(
            w,
            "[scx_nest] nest primary={} reserve={} | place attached={} prev={} primary={} \
             reserve={} fallback={} wide={} none={} | promote={} compact={} exit-demote={} \
             impatient={} unpaired={} | spin={} ({:.1} ms, ended: work={} \
             expired={} sibling={}) | wake delay: spinning {:.1} us x{}, idle {:.1} us x{} | \
             waker={} default={} freq above/at min={}/{} timers armed={} fired={} \
             migrated={} failed={}",
            self.primary_cpus,
            self.reserve_cpus,
            self.attached,
            self.prev,
            self.primary,
            self.reserve,
            self.fallback,
            self.fallback_wide,
            self.no_idle,
            self.promoted,
            self.compacted,
            self.exit_demoted,
            self.impatient,
            self.unpaired,
            self.spin_started,
            self.spin_ns as f64 / 1e6,
            self.spin_work,
            self.spin_expired,
            self.spin_sibling,
            mean_us(self.spin_wake_ns, self.spin_wakes),
            self.spin_wakes,
            mean_us(self.idle_wake_ns, self.idle_wakes),
            self.idle_wakes,
            self.waker_cpu,
            self.default_cpu,
            self.freq_above_min,
            self.freq_at_min,
            self.timers_armed,
            self.timers_fired,
            self.migrated,
            self.move_failed
        )?;
        writeln!(
            w,
            "[scx_nest] queues queued={} pinned={} direct={} kicked={} tick-kicked={} \
             preempted={} stolen={} kept-local={} released={}",
            self.queued,
            self.pinned,
            self.direct,
            self.kicked,
            self.tick_kicked,
            self.preempted,
            self.stolen,
            self.kept_local,
            self.released
        )?;
        if self.perf_mode == "max" {
            writeln!(w, "[scx_nest] perf max: no requests (every CPU at 1024)")?;
        } else {
            writeln!(
                w,
                "[scx_nest] perf {}: requests={} cpus={} target mean={:.0} min={} max={} | {}",
                self.perf_mode,
                self.perf_requests,
                self.perf_cpus,
                self.perf_mean,
                self.perf_min,
                self.perf_max,
                self.perf_targets
            )?;
        }
        Ok(())
    }
}

pub fn server_data() -> StatsServerData<(), Metrics> {
    let open: Box<dyn StatsOpener<(), Metrics>> = Box::new(move |(req_ch, res_ch)| {
        req_ch.send(())?;
        let mut prev = res_ch.recv()?;
        let read: Box<dyn StatsReader<(), Metrics>> = Box::new(move |_args, (req_ch, res_ch)| {
            req_ch.send(())?;
            let cur = res_ch.recv()?;
            let delta = cur.delta(&prev);
            prev = cur;
            delta.to_json()
        });
        Ok(read)
    });
    StatsServerData::new()
        .add_meta(Metrics::meta())
        .add_ops("top", StatsOps { open, close: None })
}

/// Print the statistics every `interval` until `shutdown`.
pub fn monitor(interval: Duration, shutdown: Arc<AtomicBool>) -> Result<()> {
    scx_utils::monitor_stats::<Metrics>(
        &[],
        interval,
        || shutdown.load(Ordering::Relaxed),
        |metrics| metrics.format(&mut std::io::stdout()),
    )
}

/// A summary of the CPUs' last requested performance targets.
#[derive(Debug, PartialEq)]
pub struct PerfTargets {
    /// CPUs that made a request.
    pub cpus: u64,
    pub mean: f64,
    pub min: u64,
    pub max: u64,
    /// Each CPU's target in CPU order, '-' for CPUs without a request.
    pub line: String,
}

impl PerfTargets {
    /// From each CPU's last request, in CPU order (`None`: none yet).
    pub fn new(targets: impl Iterator<Item = Option<u32>>) -> Self {
        let targets: Vec<Option<u32>> = targets.collect();
        let made: Vec<u64> = targets.iter().flatten().map(|&t| u64::from(t)).collect();
        let line = targets
            .iter()
            .map(|t| t.map_or_else(|| "-".to_string(), |t| t.to_string()))
            .collect::<Vec<_>>()
            .join(" ");
        Self {
            cpus: made.len() as u64,
            mean: if made.is_empty() {
                0.0
            } else {
                made.iter().sum::<u64>() as f64 / made.len() as f64
            },
            min: made.iter().copied().min().unwrap_or(0),
            max: made.iter().copied().max().unwrap_or(0),
            line,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_targets_summarise_the_cpus_that_made_requests() {
        let p = PerfTargets::new([Some(512), None, Some(1024), Some(0)].into_iter());
        assert_eq!(
            p,
            PerfTargets {
                cpus: 3,
                mean: 512.0,
                min: 0,
                max: 1024,
                line: "512 - 1024 0".into()
            }
        );
        let mut out = Vec::new();
        let m = Metrics {
            perf_mode: "util".into(),
            perf_targets: p.line,
            ..Metrics::default()
        };
        m.format(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("perf util:"), "{text}");
        assert!(text.contains("| 512 - 1024 0"), "{text}");
    }
}
