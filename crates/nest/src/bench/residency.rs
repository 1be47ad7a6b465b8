//! Frequency residency of a traced run: the share of the workload's busy
//! CPU time spent in each frequency band (the trace's `cpu_frequency`
//! events, where cpufreq exists). Nest's claim is that fewer, busier cores
//! run faster; this is where a report can show it.

use nest_trace::metrics::{FreqBands, frequency_residency};
use nest_trace::model::Trace;
use nest_trace::timeline::Timeline;
use serde::{Deserialize, Serialize};

/// One frequency band's share of the busy time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BandShare {
    /// `1.5-2.0 GHz`, `>= 4.0 GHz`, or `unknown` (busy time on a CPU
    /// before its first frequency event).
    pub band: String,
    /// Of all the busy time, from 0 to 1; the bands' shares sum to 1.
    pub share: f64,
}

/// The share of `timeline`'s busy time in each of `trace`'s frequency
/// bands ([`FreqBands::for_trace`]), lowest band first; empty when the
/// trace has no frequency events (no cpufreq, as in QEMU guests).
/// `timeline` holds the runs to count: the workload's only, in the bench.
pub fn shares(trace: &Trace, timeline: &Timeline) -> Vec<BandShare> {
    if timeline.freq.iter().all(Vec::is_empty) {
        return Vec::new();
    }
    let table = frequency_residency(timeline, &FreqBands::for_trace(trace));
    let band = table.column("band").expect("residency has a band column");
    table
        .rows
        .iter()
        .zip(table.numbers("share"))
        .map(|(row, share)| BandShare {
            band: row[band].to_string(),
            share,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::exec::workload_timeline;
    use nest_trace::model::{Event, EventKind, PrevState, Topology};

    const MS: u64 = 1_000_000;

    fn ev(ms: u64, cpu: u32, kind: EventKind) -> Event {
        Event {
            ts_ns: ms * MS,
            cpu,
            kind,
        }
    }

    fn switch(prev: u32, next: u32) -> EventKind {
        EventKind::Switch {
            prev,
            prev_state: PrevState::Blocked,
            next,
        }
    }

    fn freq(khz: u32) -> EventKind {
        EventKind::Frequency { khz }
    }

    /// The workload (pid 10, command_pid, and its child 11) runs 30 ms on
    /// CPU 0, 10 of them at 1.2 GHz and 20 at 3.1 GHz, and 10 ms on CPU 1
    /// before CPU 1's first frequency event; pid 99, not the workload, runs
    /// 50 ms at 2.2 GHz on CPU 2.
    fn trace(with_frequencies: bool) -> Trace {
        let mut events = vec![
            ev(0, 0, freq(1_200_000)),
            ev(0, 2, freq(2_200_000)),
            ev(0, 0, switch(0, 10)),
            ev(0, 2, switch(0, 99)),
            ev(
                1,
                0,
                EventKind::NewTask {
                    parent: 10,
                    child: 11,
                    comm: "child".into(),
                },
            ),
            ev(1, 1, switch(0, 11)),
            ev(10, 0, freq(3_100_000)),
            ev(11, 1, switch(11, 0)),
            ev(20, 1, freq(1_200_000)),
            ev(30, 0, switch(10, 0)),
            ev(50, 2, switch(99, 0)),
        ];
        if !with_frequencies {
            events.retain(|e| !matches!(e.kind, EventKind::Frequency { .. }));
        }
        Trace {
            topology: Topology::regular(1, 3, 1),
            meta: vec![("command_pid".into(), "10".into())],
            events,
        }
    }

    fn share_of(shares: &[BandShare], band: &str) -> f64 {
        shares
            .iter()
            .find(|s| s.band == band)
            .unwrap_or_else(|| panic!("no band {band} in {shares:?}"))
            .share
    }

    #[test]
    fn the_workloads_busy_time_is_shared_among_the_bands() {
        let trace = trace(true);
        let shares = shares(&trace, &workload_timeline(&trace));
        // The default bands: < 1.0 GHz, 0.5 GHz steps, >= 4.0 GHz, unknown.
        assert_eq!(shares.len(), 9, "{shares:?}");
        assert_eq!(shares[0].band, "< 1.0 GHz");
        assert_eq!(shares[8].band, "unknown");
        assert_eq!(share_of(&shares, "1.0-1.5 GHz"), 0.25);
        assert_eq!(share_of(&shares, "3.0-3.5 GHz"), 0.5);
        assert_eq!(share_of(&shares, "unknown"), 0.25);
        assert_eq!(share_of(&shares, "2.0-2.5 GHz"), 0.0, "pid 99's time");
        assert!((shares.iter().map(|s| s.share).sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_trace_without_frequency_events_has_no_residency() {
        let trace = trace(false);
        assert!(shares(&trace, &workload_timeline(&trace)).is_empty());
    }

    #[test]
    fn the_traces_nominal_frequency_splits_the_bands() {
        let mut trace = trace(true);
        trace.meta_set("nominal_khz", "2000000");
        let shares = shares(&trace, &workload_timeline(&trace));
        let bands: Vec<&str> = shares.iter().map(|s| s.band.as_str()).collect();
        assert_eq!(bands, ["< 2.0 GHz", ">= 2.0 GHz", "unknown"]);
        assert_eq!(share_of(&shares, ">= 2.0 GHz"), 0.5);
    }
}
