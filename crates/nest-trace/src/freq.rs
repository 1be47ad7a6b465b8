//! Where a recording's CPU frequencies come from, best first:
//!
//! 1. **The CPUs' own counters.** APERF counts cycles at the actual
//!    frequency, MPERF at a constant (the TSC's) rate, both only while the
//!    CPU is not idle; `tsc_rate * dAPERF / dMPERF` is the CPU's average
//!    frequency over its busy time in an interval (turbostat's `Bzy_MHz`,
//!    and how the kernel computes `scaling_cur_freq` on x86 at each tick).
//!    Read every 4 ms (the published experiments' 250 Hz tick) through the
//!    perf `msr` PMU, one counter group per CPU: each reading is a system
//!    call and an interrupt on that CPU, which is why a traced run is
//!    never a measurement.
//! 2. **The `power:cpu_frequency` tracepoint**: each frequency cpufreq
//!    sets, in the trace itself (not fired by drivers that let the
//!    hardware choose, such as intel_pstate in active mode).
//! 3. **Polling** `scaling_cur_freq` every 10 ms: the fallback.
//!
//! The trace says which in its `frequency_source` meta entry.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use perf_event::events::Dynamic;
use perf_event::{Builder, Counter, Group};

use crate::model::{Cpu, Event, EventKind, Trace};

/// The trace meta entry naming the frequencies' source.
pub const FREQUENCY_SOURCE_META: &str = "frequency_source";
/// How often the counters are read: a tick of the published 250 Hz.
pub const COUNTER_PERIOD: Duration = Duration::from_millis(4);

/// One CPU's counters at one moment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reading {
    pub at_ns: u64,
    pub aperf: u64,
    pub mperf: u64,
    pub tsc: u64,
}

/// The CPU's average frequency while busy between two readings, kHz, at
/// `tsc_khz`; `None` when it was idle throughout (MPERF did not move).
pub fn busy_khz(tsc_khz: f64, before: &Reading, after: &Reading) -> Option<u32> {
    let mperf = after.mperf.checked_sub(before.mperf)?;
    let aperf = after.aperf.checked_sub(before.aperf)?;
    (mperf > 0).then(|| (tsc_khz * aperf as f64 / mperf as f64).round() as u32)
}

/// The TSC's rate in kHz from the first and last readings of a CPU.
pub fn tsc_khz(first: &Reading, last: &Reading) -> Option<f64> {
    let ns = last.at_ns.checked_sub(first.at_ns)?;
    let ticks = last.tsc.checked_sub(first.tsc)?;
    (ns > 0 && ticks > 0).then(|| ticks as f64 * 1e6 / ns as f64)
}

/// The frequency events of one CPU's readings: at each reading after the
/// first, the busy frequency of the interval it closes (stamped at the
/// interval's start, when that frequency began to hold).
pub fn counter_events(cpu: Cpu, readings: &[Reading], tsc_khz: f64) -> Vec<Event> {
    readings
        .windows(2)
        .filter_map(|pair| {
            let khz = busy_khz(tsc_khz, &pair[0], &pair[1])?;
            Some(Event {
                ts_ns: pair[0].at_ns,
                cpu,
                kind: EventKind::Frequency { khz },
            })
        })
        .collect()
}

/// One CPU's counter group.
struct CpuCounters {
    cpu: Cpu,
    group: Group,
    aperf: Counter,
    mperf: Counter,
    tsc: Counter,
    readings: Vec<Reading>,
}

/// The APERF/MPERF/TSC counters of every CPU.
pub struct Counters {
    cpus: Vec<CpuCounters>,
}

fn msr_event(name: &str) -> std::io::Result<Builder<'static>> {
    let event = Dynamic::builder("msr")?
        .event(name)?
        .build()
        .map_err(std::io::Error::other)?;
    let mut builder = Builder::new(event);
    // The msr PMU counts everything: asking it to exclude is refused.
    builder.exclude_kernel(false).exclude_hv(false);
    Ok(builder)
}

impl Counters {
    /// The counters of `cpus`; `None` where the machine has no APERF and
    /// MPERF in its msr PMU (virtual machines) or perf refuses them (not
    /// root, `perf_event_paranoid`).
    pub fn open(cpus: &[Cpu]) -> Option<Self> {
        let open_one = |cpu: Cpu| -> std::io::Result<CpuCounters> {
            let mut group = Group::builder()
                .one_cpu(cpu as usize)
                .any_pid()
                .exclude_kernel(false)
                .exclude_hv(false)
                .build_group()?;
            let mut member = |name: &str| {
                let mut builder = msr_event(name)?;
                group.add(builder.one_cpu(cpu as usize).any_pid())
            };
            let (aperf, mperf, tsc) = (member("aperf")?, member("mperf")?, member("tsc")?);
            group.enable()?;
            Ok(CpuCounters {
                cpu,
                group,
                aperf,
                mperf,
                tsc,
                readings: Vec::new(),
            })
        };
        let opened: Vec<CpuCounters> = cpus.iter().filter_map(|&c| open_one(c).ok()).collect();
        (!opened.is_empty()).then_some(Self { cpus: opened })
    }

    /// Read every CPU's group (at once per CPU: one consistent reading).
    pub fn sample(&mut self, now_ns: impl Fn() -> u64) {
        for c in &mut self.cpus {
            if let Ok(data) = c.group.read() {
                c.readings.push(Reading {
                    at_ns: now_ns(),
                    aperf: data[&c.aperf],
                    mperf: data[&c.mperf],
                    tsc: data[&c.tsc],
                });
            }
        }
    }

    /// Every CPU's frequency events, with times relative to `origin_ns`.
    pub fn events(&self, origin_ns: u64) -> Vec<Event> {
        let rate = self
            .cpus
            .iter()
            .find_map(|c| tsc_khz(c.readings.first()?, c.readings.last()?));
        let Some(rate) = rate else {
            return Vec::new();
        };
        let mut events: Vec<Event> = self
            .cpus
            .iter()
            .flat_map(|c| counter_events(c.cpu, &c.readings, rate))
            .collect();
        for e in &mut events {
            e.ts_ns = e.ts_ns.saturating_sub(origin_ns);
        }
        events
    }
}

/// The CPUs with a cpufreq directory under `root` (a sysfs root: `/`).
fn cpufreq_files(root: &Path, file: &str) -> Vec<(Cpu, PathBuf)> {
    let dir = root.join("sys/devices/system/cpu");
    let mut files: Vec<(Cpu, PathBuf)> = fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let e = e.ok()?;
            let cpu: Cpu = e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok()?;
            let file = e.path().join("cpufreq").join(file);
            file.exists().then_some((cpu, file))
        })
        .collect();
    files.sort();
    files
}

/// Periodic samples of `scaling_cur_freq`: the fallback.
pub struct Polled {
    files: Vec<(Cpu, PathBuf)>,
    last: Vec<Option<u32>>,
    /// `(time, cpu, kHz)` of each change.
    samples: Vec<(u64, Cpu, u32)>,
}

impl Polled {
    pub fn new(root: &Path) -> Self {
        let files = cpufreq_files(root, "scaling_cur_freq");
        let last = vec![None; files.len()];
        Self {
            files,
            last,
            samples: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    pub fn sample(&mut self, now_ns: u64) {
        for (i, (cpu, file)) in self.files.iter().enumerate() {
            let Some(khz) = fs::read_to_string(file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            else {
                continue;
            };
            if self.last[i] != Some(khz) {
                self.last[i] = Some(khz);
                self.samples.push((now_ns, *cpu, khz));
            }
        }
    }
}

/// How a recording gets its frequencies.
pub enum Sampler {
    Counters(Counters),
    Polled(Polled),
}

impl Sampler {
    /// The counters where the machine has them, else polling (which
    /// samples nothing on a machine without cpufreq).
    pub fn new(root: &Path, cpus: &[Cpu]) -> Self {
        match Counters::open(cpus) {
            Some(counters) => Sampler::Counters(counters),
            None => Sampler::Polled(Polled::new(root)),
        }
    }

    /// How often to sample; `None` when there is nothing to sample.
    pub fn period(&self, poll: Duration) -> Option<Duration> {
        match self {
            Sampler::Counters(_) => Some(COUNTER_PERIOD),
            Sampler::Polled(p) if p.is_empty() => None,
            Sampler::Polled(_) => Some(poll.max(Duration::from_millis(1))),
        }
    }

    pub fn sample(&mut self, now_ns: impl Fn() -> u64) {
        match self {
            Sampler::Counters(c) => c.sample(now_ns),
            Sampler::Polled(p) => p.sample(now_ns()),
        }
    }

    /// Put the frequencies into `trace` (recorded from `started`, on the
    /// trace's clock) from the best source that has some, and name it.
    pub fn merge_into(&self, trace: &mut Trace, started: u64, poll: Duration) {
        let origin = trace
            .meta_get("time_origin_ns")
            .and_then(|v| v.parse().ok())
            .filter(|_| !trace.events.is_empty())
            .unwrap_or(started);
        let traced = trace
            .events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Frequency { .. }));
        let source = match self {
            Sampler::Counters(counters) => {
                let events = counters.events(origin);
                if events.is_empty() {
                    None
                } else {
                    trace
                        .events
                        .retain(|e| !matches!(e.kind, EventKind::Frequency { .. }));
                    trace.events.extend(events);
                    Some(format!(
                        "aperf/mperf every {} ms",
                        COUNTER_PERIOD.as_millis()
                    ))
                }
            }
            Sampler::Polled(polled) if traced => {
                // Each CPU's value before its first event.
                let first_event = |cpu: Cpu| {
                    trace
                        .events
                        .iter()
                        .find(|e| e.cpu == cpu && matches!(e.kind, EventKind::Frequency { .. }))
                        .map(|e| e.ts_ns)
                };
                let initial: Vec<Event> = polled
                    .samples
                    .iter()
                    .filter(|(ts, cpu, _)| {
                        first_event(*cpu).is_none_or(|first| ts.saturating_sub(origin) < first)
                    })
                    .map(|&(ts, cpu, khz)| Event {
                        ts_ns: ts.saturating_sub(origin),
                        cpu,
                        kind: EventKind::Frequency { khz },
                    })
                    .collect();
                let mut seen = std::collections::BTreeSet::new();
                let initial: Vec<Event> =
                    initial.into_iter().filter(|e| seen.insert(e.cpu)).collect();
                trace.events.extend(initial);
                Some("cpu_frequency tracepoint".to_string())
            }
            Sampler::Polled(polled) => {
                trace
                    .events
                    .extend(polled.samples.iter().map(|&(ts, cpu, khz)| Event {
                        ts_ns: ts.saturating_sub(origin),
                        cpu,
                        kind: EventKind::Frequency { khz },
                    }));
                trace.meta_set("cpufreq_samples", polled.samples.len().to_string());
                (!polled.samples.is_empty())
                    .then(|| format!("scaling_cur_freq polled every {} ms", poll.as_millis()))
            }
        };
        trace.events.sort_by_key(|e| e.ts_ns);
        if let Some(source) = source {
            trace.meta_set(FREQUENCY_SOURCE_META, source);
        }
    }
}

/// The frequency bands of the Nest paper's figures, where cpufreq says
/// the nominal (base) frequency: below nominal, then the turbo range from
/// nominal to the highest frequency in three equal bands; recorded as the
/// trace's `nominal_khz` and `freq_band_edges_khz`.
pub fn bands_meta(trace: &mut Trace, root: &Path) {
    let read = |file: &str| -> Option<u32> {
        fs::read_to_string(root.join("sys/devices/system/cpu/cpu0/cpufreq").join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let (Some(nominal), Some(max)) = (read("base_frequency"), read("cpuinfo_max_freq")) else {
        return;
    };
    trace.meta_set("nominal_khz", nominal.to_string());
    trace.meta_set("max_khz", max.to_string());
    let edges = paper_band_edges(nominal, max);
    let list: Vec<String> = edges.iter().map(u32::to_string).collect();
    trace.meta_set("freq_band_edges_khz", list.join(","));
}

/// Below nominal, then `[nominal, max]` in three equal turbo bands (just
/// nominal when there is no turbo range).
pub fn paper_band_edges(nominal_khz: u32, max_khz: u32) -> Vec<u32> {
    if max_khz <= nominal_khz {
        return vec![nominal_khz];
    }
    let step = (max_khz - nominal_khz) / 3;
    vec![nominal_khz, nominal_khz + step, nominal_khz + 2 * step]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(ms: u64, aperf: u64, mperf: u64) -> Reading {
        // A 2.0 GHz TSC: 2,000,000 ticks a millisecond.
        Reading {
            at_ns: ms * 1_000_000,
            aperf,
            mperf,
            tsc: ms * 2_000_000,
        }
    }

    /// A CPU busy all of 0-4 ms at 3.0 GHz (APERF 1.5 times MPERF), idle
    /// 4-8 ms (neither moves), busy a quarter of 8-12 ms at 1.0 GHz.
    #[test]
    fn the_busy_frequency_comes_from_aperf_over_mperf_at_the_tsc_rate() {
        let readings = [
            reading(0, 0, 0),
            reading(4, 12_000_000, 8_000_000),
            reading(8, 12_000_000, 8_000_000),
            reading(12, 13_000_000, 10_000_000),
        ];
        let rate = tsc_khz(&readings[0], &readings[3]).unwrap();
        assert!((rate - 2_000_000.0).abs() < 1e-6, "{rate}");
        let events = counter_events(3, &readings, rate);
        let got: Vec<(u64, u32)> = events
            .iter()
            .map(|e| match e.kind {
                EventKind::Frequency { khz } => (e.ts_ns / 1_000_000, khz),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(
            got,
            [(0, 3_000_000), (8, 1_000_000)],
            "nothing for the idle interval"
        );
        assert!(events.iter().all(|e| e.cpu == 3));
        assert_eq!(
            busy_khz(rate, &readings[1], &readings[0]),
            None,
            "backwards"
        );
    }

    #[test]
    fn the_papers_bands_split_the_turbo_range_in_three() {
        assert_eq!(
            paper_band_edges(2_300_000, 3_900_000),
            [2_300_000, 2_833_333, 3_366_666]
        );
        assert_eq!(paper_band_edges(2_000_000, 2_000_000), [2_000_000]);
    }

    fn freq_events(trace: &Trace) -> Vec<(u64, Cpu, u32)> {
        trace
            .events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Frequency { khz } => Some((e.ts_ns, e.cpu, khz)),
                _ => None,
            })
            .collect()
    }

    fn polled(samples: &[(u64, Cpu, u32)]) -> Sampler {
        Sampler::Polled(Polled {
            files: Vec::new(),
            last: Vec::new(),
            samples: samples.to_vec(),
        })
    }

    #[test]
    fn polled_samples_are_the_labelled_fallback() {
        let mut trace = Trace::default();
        polled(&[(100, 0, 1_200_000), (130, 0, 3_000_000)]).merge_into(
            &mut trace,
            100,
            Duration::from_millis(10),
        );
        assert_eq!(freq_events(&trace), [(0, 0, 1_200_000), (30, 0, 3_000_000)]);
        assert_eq!(
            trace.meta_get(FREQUENCY_SOURCE_META),
            Some("scaling_cur_freq polled every 10 ms")
        );
        let mut none = Trace::default();
        polled(&[]).merge_into(&mut none, 0, Duration::from_millis(10));
        assert_eq!(none.meta_get(FREQUENCY_SOURCE_META), None);
    }

    /// With tracepoint events the polls only give each CPU its value
    /// before its first event.
    #[test]
    fn tracepoint_events_win_over_polls() {
        let mut trace = Trace::default();
        trace.events.push(Event {
            ts_ns: 50,
            cpu: 0,
            kind: EventKind::Frequency { khz: 2_000_000 },
        });
        polled(&[
            (0, 0, 1_000_000),
            (0, 1, 1_500_000),
            (60, 0, 2_000_000),
            (70, 1, 1_600_000),
        ])
        .merge_into(&mut trace, 0, Duration::from_millis(10));
        assert_eq!(
            freq_events(&trace),
            [(0, 0, 1_000_000), (0, 1, 1_500_000), (50, 0, 2_000_000)]
        );
        assert_eq!(
            trace.meta_get(FREQUENCY_SOURCE_META),
            Some("cpu_frequency tracepoint")
        );
    }
}
