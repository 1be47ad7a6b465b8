//! Live statistics through scx_stats: `scx_nest --stats 1` prints them while
//! scheduling, `scx_nest --monitor 1` from another shell.
//!
//! The counters are defined once, in C: the policy's NEST_STATS list
//! (policy/nest_policy.h, [`Stat`]) and the scheduler's SCX_NEST_EVENTS
//! list (src/bpf/intf.h, [`Event`]). Each entry's name, group and
//! description, generated into Rust at build time, drive the BPF counters,
//! the statistics served, `--help-stats` and the monitor's lines; only the
//! [`Gauges`] are defined here.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Result;
use nest_policy::Stat;
use scx_stats::prelude::*;
use scx_stats_derive::{Stats, stat_doc};
use serde::{Deserialize, Serialize};

use crate::bpf_intf;

/// The scheduler's events (`enum scx_nest_event`), generated from the
/// SCX_NEST_EVENTS list of src/bpf/intf.h by build.rs.
mod event {
    include!(concat!(env!("OUT_DIR"), "/event.rs"));
}
pub use event::Event;

const _: () = assert!(Event::ALL.len() == bpf_intf::scx_nest_event_NEST_NR_EVENTS as usize);
const _: () = assert!(Stat::ALL.len() == bpf_intf::nest_stat_NEST_NR_STATS as usize);

/// One BPF counter: a statistic of the policy or an event of the scheduler.
#[derive(Clone, Copy, Debug)]
pub enum Counter {
    Policy(Stat),
    Event(Event),
}

impl Counter {
    /// Every counter: the policy's, then the scheduler's, in C order.
    pub fn all() -> impl Iterator<Item = Counter> {
        Stat::ALL
            .into_iter()
            .map(Counter::Policy)
            .chain(Event::ALL.into_iter().map(Counter::Event))
    }

    pub fn name(self) -> &'static str {
        match self {
            Counter::Policy(stat) => stat.name(),
            Counter::Event(event) => event.name(),
        }
    }

    pub fn group(self) -> &'static str {
        match self {
            Counter::Policy(stat) => stat.group(),
            Counter::Event(event) => event.group(),
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Counter::Policy(stat) => stat.description(),
            Counter::Event(event) => event.description(),
        }
    }
}

/// What the counters do not cover: the nests' sizes and the frequency
/// requests, read from the scheduler's state.
#[stat_doc]
#[derive(Clone, Debug, Default, Serialize, Deserialize, Stats)]
#[stat(top)]
pub struct Gauges {
    #[stat(desc = "CPUs in the primary nest")]
    pub primary_cpus: u64,
    #[stat(desc = "CPUs in the reserve nest")]
    pub reserve_cpus: u64,
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

/// Counters are totals since the scheduler started; the monitor prints the
/// change over each interval. Served as one flat object: the gauges' fields
/// and one field per counter.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Metrics {
    #[serde(flatten)]
    pub gauges: Gauges,
    /// Each counter's value, by [`Counter::name`].
    #[serde(flatten)]
    pub counters: BTreeMap<String, u64>,
}

impl Meta for Metrics {
    fn meta() -> StatsMeta {
        let mut meta = Gauges::meta();
        meta.name = "Metrics".into();
        for counter in Counter::all() {
            let attrs = StatsFieldAttrs {
                desc: Some(counter.description().into()),
                user: BTreeMap::from([("_group".into(), counter.group().into())]),
            };
            let field = StatsField {
                data: StatsData::Datum(StatsKind::U64),
                attrs,
            };
            meta.fields.insert(counter.name().into(), field);
        }
        meta
    }
}

/// The group of the monitor's first line: the nests' sizes are printed
/// before the counters of the group.
const NEST_GROUP: &str = "nest";

impl Metrics {
    /// From the per-CPU counters summed over CPUs, indexed by the C enums.
    pub fn new(gauges: Gauges, policy: &[u64], events: &[u64]) -> Self {
        let counters = Counter::all()
            .map(|counter| {
                let value = match counter {
                    Counter::Policy(stat) => policy[stat as usize],
                    Counter::Event(event) => events[event as usize],
                };
                (counter.name().to_string(), value)
            })
            .collect();
        Self { gauges, counters }
    }

    fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    /// The counters' change since `prev`; gauges keep their current value.
    fn delta(&self, prev: &Self) -> Self {
        let counters = self
            .counters
            .iter()
            .map(|(name, value)| (name.clone(), value.wrapping_sub(prev.counter(name))))
            .collect();
        let gauges = Gauges {
            perf_requests: self
                .gauges
                .perf_requests
                .wrapping_sub(prev.gauges.perf_requests),
            ..self.gauges.clone()
        };
        Self { gauges, counters }
    }

    /// One line per group, in the order the groups first appear in the C
    /// lists, then the frequency requests.
    fn format<W: Write>(&self, w: &mut W) -> Result<()> {
        let mut lines: Vec<(&str, Vec<String>)> = vec![(
            NEST_GROUP,
            vec![
                format!("primary_cpus={}", self.gauges.primary_cpus),
                format!("reserve_cpus={}", self.gauges.reserve_cpus),
            ],
        )];
        for counter in Counter::all() {
            let item = format!("{}={}", counter.name(), self.counter(counter.name()));
            match lines
                .iter_mut()
                .find(|(group, _)| *group == counter.group())
            {
                Some((_, items)) => items.push(item),
                None => lines.push((counter.group(), vec![item])),
            }
        }
        let perf = &self.gauges;
        let perf_line = if perf.perf_mode == "max" {
            "max: no requests (every CPU at 1024)".to_string()
        } else {
            format!(
                "{}: requests={} cpus={} target mean={:.0} min={} max={} | {}",
                perf.perf_mode,
                perf.perf_requests,
                perf.perf_cpus,
                perf.perf_mean,
                perf.perf_min,
                perf.perf_max,
                perf.perf_targets
            )
        };
        lines.push(("perf", vec![perf_line]));
        let width = lines
            .iter()
            .map(|(group, _)| group.len())
            .max()
            .unwrap_or(0);
        for (group, items) in lines {
            writeln!(w, "[scx_nest] {group:width$} {}", items.join(" "))?;
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
        let m = Metrics {
            gauges: Gauges {
                perf_mode: "util".into(),
                perf_targets: p.line,
                ..Gauges::default()
            },
            ..Metrics::default()
        };
        let text = monitor_text(&m);
        assert!(text.contains("perf  util:"), "{text}");
        assert!(text.contains("| 512 - 1024 0"), "{text}");
    }

    fn monitor_text(metrics: &Metrics) -> String {
        let mut out = Vec::new();
        metrics.format(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Metrics whose counter `i` (in [`Counter::all`] order) is 1000 + i.
    fn numbered_metrics() -> Metrics {
        let policy: Vec<u64> = (0..Stat::ALL.len() as u64).map(|i| 1000 + i).collect();
        let events: Vec<u64> = (0..Event::ALL.len() as u64)
            .map(|i| 1000 + policy.len() as u64 + i)
            .collect();
        Metrics::new(Gauges::default(), &policy, &events)
    }

    #[test]
    fn counter_names_are_unique_across_the_two_c_lists() {
        let mut names = std::collections::HashSet::new();
        for counter in Counter::all() {
            assert!(names.insert(counter.name()), "{} twice", counter.name());
            assert!(!counter.description().is_empty(), "{counter:?}");
        }
        assert_eq!(numbered_metrics().counters.len(), names.len());
    }

    #[test]
    fn counters_read_their_own_c_index() {
        let metrics = numbered_metrics();
        let nr_policy = Stat::ALL.len() as u64;
        assert_eq!(metrics.counter("attached"), 1000 + Stat::Attached as u64);
        assert_eq!(metrics.counter("migrated"), 1000 + Stat::Migrated as u64);
        assert_eq!(
            metrics.counter("released"),
            1000 + nr_policy + Event::Released as u64
        );
    }

    #[test]
    fn every_counter_is_described_and_served() {
        let meta = Metrics::meta();
        let json = numbered_metrics().to_json().unwrap();
        for counter in Counter::all() {
            let field = &meta.fields[counter.name()];
            assert_eq!(field.attrs.desc.as_deref(), Some(counter.description()));
            assert_eq!(field.attrs.user["_group"], counter.group());
            assert!(json[counter.name()].is_u64(), "{}", counter.name());
        }
        assert!(meta.fields.contains_key("primary_cpus"));
        let back: Metrics = serde_json::from_value(json).unwrap();
        assert_eq!(back.counters, numbered_metrics().counters);
    }

    #[test]
    fn the_monitor_prints_each_counter_once_on_its_groups_aligned_line() {
        let metrics = numbered_metrics();
        let text = monitor_text(&metrics);
        let lines: Vec<&str> = text.lines().collect();
        for counter in Counter::all() {
            let item = format!(" {}={}", counter.name(), metrics.counter(counter.name()));
            let holders: Vec<&&str> = lines.iter().filter(|l| l.contains(&item)).collect();
            assert_eq!(holders.len(), 1, "{item}: {text}");
            let label = format!("[scx_nest] {} ", counter.group());
            assert!(holders[0].starts_with(&label), "{item}: {text}");
        }
        // Every line's values start in one column, after the widest group.
        let columns: std::collections::HashSet<usize> = lines
            .iter()
            .map(|l| {
                let after_group = l["[scx_nest] ".len()..].trim_start_matches(|c| c != ' ');
                l.len() - after_group.trim_start().len()
            })
            .collect();
        assert_eq!(columns.len(), 1, "{text}");
        assert!(lines.iter().all(|l| l.len() <= 200), "{text}");
    }

    #[test]
    fn the_delta_subtracts_counters_and_keeps_gauges() {
        let mut prev = numbered_metrics();
        prev.gauges.perf_requests = 5;
        let mut cur = numbered_metrics();
        *cur.counters.get_mut("queued").unwrap() += 7;
        cur.gauges.perf_requests = 8;
        cur.gauges.primary_cpus = 3;
        let delta = cur.delta(&prev);
        assert_eq!(delta.counter("queued"), 7);
        assert_eq!(delta.counter("attached"), 0);
        assert_eq!(delta.gauges.perf_requests, 3);
        assert_eq!(delta.gauges.primary_cpus, 3);
    }
}
