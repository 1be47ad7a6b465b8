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
    #[stat(desc = "Tasks queued on the shared queue")]
    pub queued: u64,
    #[stat(desc = "Single-CPU tasks inserted into their CPU's queue")]
    pub local: u64,
    #[stat(desc = "Idle CPUs woken for queued tasks")]
    pub kicked: u64,
    #[stat(desc = "Tasks held back by --debug-stall-comm")]
    pub stalled: u64,
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
            local,
            kicked,
            stalled
        )
    }

    fn format<W: Write>(&self, w: &mut W) -> Result<()> {
        writeln!(
            w,
            "[scx_nest] nest primary={} reserve={} | place attached={} prev={} primary={} \
             reserve={} fallback={} wide={} none={} | promote={} compact={} exit-demote={} \
             impatient={} | queued={} kicked={}",
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
            self.queued,
            self.kicked
        )?;
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
