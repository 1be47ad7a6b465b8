//! How much a comparison's gains rest on the machine model's assumptions
//! (`nest sim --sensitivity`): the comparison is rerun with each
//! assumption of the machine file (its `assumptions`: parameters no
//! measurement fixes, each with a range) at its low and at its high end,
//! one at a time, then with all of them at their low ends and all at
//! their high ends; each gain is reported as the median over those
//! variants and the central model, with the lowest and highest, and the
//! assumption whose range moves it most.

use std::fmt::Write as _;

use anyhow::Result;
use serde::Serialize;

use crate::machine::Machine;
use crate::results::{Comparison, improvement, mean_std};

/// A machine with its assumptions moved.
pub struct Variant {
    /// `central`, `PATH=low`, `PATH=high`, `all low`, `all high`.
    pub label: String,
    /// The assumption moved alone, and to which end (`false`: low).
    pub moved: Option<(String, bool)>,
    pub machine: Machine,
}

/// The central machine, each assumption at each end of its range, and all
/// at their low and all at their high ends.
pub fn variants(m: &Machine) -> Result<Vec<Variant>> {
    let mut out = vec![Variant {
        label: "central".into(),
        moved: None,
        machine: m.clone(),
    }];
    for (path, a) in &m.assumptions {
        for (high, value) in [(false, a.low), (true, a.high)] {
            out.push(Variant {
                label: format!("{path}={value}"),
                moved: Some((path.clone(), high)),
                machine: m.with_parameter(path, value)?,
            });
        }
    }
    if !m.assumptions.is_empty() {
        for high in [false, true] {
            let mut all = m.clone();
            for (path, a) in &m.assumptions {
                all = all.with_parameter(path, if high { a.high } else { a.low })?;
            }
            out.push(Variant {
                label: if high { "all high" } else { "all low" }.into(),
                moved: None,
                machine: all,
            });
        }
    }
    Ok(out)
}

/// What one gain compares: `policy` under `governor` against `against`
/// (a policy under the same governor, or the same policy under another
/// governor).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GainKey {
    pub policy: String,
    pub governor: String,
    pub against: String,
}

/// The gains a comparison reports: with several policies, each policy
/// against the first under each governor; with one policy, each governor
/// against the first. Improvements of the means over seeds (0 = same,
/// positive = better), in time and in energy.
pub fn gains(cmps: &[Comparison]) -> Vec<(GainKey, f64, f64)> {
    let mean = |c: &Comparison, f: fn(&crate::results::RunResult) -> f64| {
        mean_std(&c.runs.iter().map(f).collect::<Vec<_>>()).0
    };
    let time = |c: &Comparison| mean(c, |r| r.completion_ns as f64);
    let energy = |c: &Comparison| mean(c, |r| r.energy_j);
    let Some(first) = cmps.first() else {
        return Vec::new();
    };
    let one_policy = cmps.iter().all(|c| c.policy == first.policy);
    let mut out = Vec::new();
    for c in cmps {
        let base = if one_policy {
            (c.governor != first.governor).then_some(first)
        } else {
            cmps.iter()
                .find(|b| b.policy == first.policy && b.governor == c.governor)
                .filter(|_| c.policy != first.policy)
        };
        let Some(base) = base else { continue };
        let key = GainKey {
            policy: c.policy.clone(),
            governor: c.governor.clone(),
            against: if one_policy {
                base.governor.clone()
            } else {
                base.policy.clone()
            },
        };
        out.push((
            key,
            improvement(time(base), time(c)),
            improvement(energy(base), energy(c)),
        ));
    }
    out
}

/// One gain over the variants.
#[derive(Clone, Debug, Serialize)]
pub struct Spread {
    pub central: f64,
    pub median: f64,
    pub low: f64,
    pub high: f64,
    /// The assumption whose two ends move the gain most, and by how much
    /// (the difference of the gain at its two ends, in points of
    /// improvement); none when no assumption moves it.
    pub moved_most_by: Option<String>,
    pub moved_by: f64,
}

/// A gain in time and in energy over the variants.
#[derive(Clone, Debug, Serialize)]
pub struct GainSpread {
    #[serde(flatten)]
    pub key: GainKey,
    pub time: Spread,
    pub energy: Spread,
}

/// Summarises the gains of every variant (`per_variant[i]` is
/// [`gains`] of `variants[i]`'s comparison).
pub fn spreads(variants: &[Variant], per_variant: &[Vec<(GainKey, f64, f64)>]) -> Vec<GainSpread> {
    let Some(central) = per_variant.first() else {
        return Vec::new();
    };
    central
        .iter()
        .enumerate()
        .map(|(row, (key, _, _))| {
            let values = |metric: fn(&(GainKey, f64, f64)) -> f64| -> Vec<f64> {
                per_variant.iter().map(|g| metric(&g[row])).collect()
            };
            GainSpread {
                key: key.clone(),
                time: spread(variants, &values(|g| g.1)),
                energy: spread(variants, &values(|g| g.2)),
            }
        })
        .collect()
}

fn spread(variants: &[Variant], values: &[f64]) -> Spread {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    // The two ends of each assumption moved alone.
    let mut moved_most_by = None;
    let mut moved_by: f64 = 0.0;
    for (i, v) in variants.iter().enumerate() {
        let Some((path, true)) = &v.moved else {
            continue;
        };
        let low = variants
            .iter()
            .position(|w| w.moved.as_ref() == Some(&(path.clone(), false)))
            .map_or(values[0], |j| values[j]);
        let by = values[i] - low;
        if by.abs() > moved_by.abs() {
            moved_by = by;
            moved_most_by = Some(path.clone());
        }
    }
    Spread {
        central: values[0],
        median,
        low: sorted[0],
        high: sorted[n - 1],
        moved_most_by,
        moved_by,
    }
}

/// `+12.3%`: an improvement in percent.
fn pct(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

/// `+12.3% [+10.1, +14.0]`: a gain as median [low, high].
pub fn range(s: &Spread) -> String {
    format!(
        "{} [{:+.1}, {:+.1}]",
        pct(s.median),
        s.low * 100.0,
        s.high * 100.0
    )
}

/// The table `nest sim --sensitivity` prints.
pub fn table(spreads: &[GainSpread]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<12} {:<14} {:<14} {:>8} {:>24} {:<42} {:>8} {:>24} moved most by",
        "policy",
        "governor",
        "against",
        "time",
        "median [low, high]",
        "moved most by (points between its ends)",
        "energy",
        "median [low, high]",
    );
    let by = |s: &Spread| match &s.moved_most_by {
        Some(path) => format!("{path} ({:+.1})", s.moved_by * 100.0),
        None => "-".into(),
    };
    for g in spreads {
        let _ = writeln!(
            s,
            "{:<12} {:<14} {:<14} {:>8} {:>24} {:<42} {:>8} {:>24} {}",
            g.key.policy,
            g.key.governor,
            g.key.against,
            pct(g.time.central),
            range(&g.time),
            by(&g.time),
            pct(g.energy.central),
            range(&g.energy),
            by(&g.energy),
        );
    }
    s
}

/// CSV, one row per gain and metric.
pub fn csv(spreads: &[GainSpread]) -> String {
    let mut s = String::from(
        "policy,governor,against,metric,central,median,low,high,moved_most_by,moved_by\n",
    );
    for g in spreads {
        for (metric, x) in [("time", &g.time), ("energy", &g.energy)] {
            let _ = writeln!(
                s,
                "{},{},{},{metric},{:.5},{:.5},{:.5},{:.5},{},{:.5}",
                g.key.policy,
                g.key.governor,
                g.key.against,
                x.central,
                x.median,
                x.low,
                x.high,
                x.moved_most_by.as_deref().unwrap_or(""),
                x.moved_by
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_assumption_is_moved_to_both_ends_then_all_together() {
        let m = Machine::builtin("xeon-gold-5218-2s").unwrap();
        let v = variants(&m).unwrap();
        assert_eq!(v.len(), 1 + 2 * m.assumptions.len() + 2);
        let (path, a) = m.assumptions.iter().next().unwrap();
        assert_eq!(v[1].machine.parameter(path).unwrap(), a.low);
        assert_eq!(v[2].machine.parameter(path).unwrap(), a.high);
        let all_high = &v.last().unwrap().machine;
        for (path, a) in &m.assumptions {
            assert_eq!(all_high.parameter(path).unwrap(), a.high, "{path}");
        }
    }

    fn variant(moved: Option<(&str, bool)>) -> Variant {
        Variant {
            label: String::new(),
            moved: moved.map(|(p, h)| (p.to_owned(), h)),
            machine: Machine::builtin("test-guest-2s-tcg").unwrap(),
        }
    }

    #[test]
    fn a_spread_names_the_assumption_whose_ends_differ_most() {
        let vs = [
            variant(None),
            variant(Some(("a", false))),
            variant(Some(("a", true))),
            variant(Some(("b", false))),
            variant(Some(("b", true))),
            variant(None),
        ];
        let s = spread(&vs, &[0.30, 0.28, 0.33, 0.40, 0.20, 0.31]);
        assert_eq!(s.central, 0.30);
        assert_eq!((s.low, s.high), (0.20, 0.40));
        // Sorted: .20 .28 .30 .31 .33 .40: median (.30 + .31) / 2.
        assert!((s.median - 0.305).abs() < 1e-12);
        assert_eq!(s.moved_most_by.as_deref(), Some("b"));
        assert!((s.moved_by + 0.20).abs() < 1e-12);
        assert_eq!(range(&s), "+30.5% [+20.0, +40.0]");
    }
}
