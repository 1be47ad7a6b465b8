//! Means, medians, standard deviations and the paper's improvement
//! figure with its error bar.

use serde::{Deserialize, Serialize};

/// The runs of one cell, summarized.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    /// Sample standard deviation (n - 1); `None` below two values.
    pub stddev: Option<f64>,
    /// The values themselves, in run order: each run's improvement is
    /// computed from them.
    pub values: Vec<f64>,
}

pub fn summarize(values: &[f64]) -> Option<Summary> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    Some(Summary {
        n,
        mean,
        median,
        stddev: sample_stddev(values),
        values: values.to_vec(),
    })
}

/// Sample standard deviation (n - 1); `None` below two values.
fn sample_stddev(values: &[f64]) -> Option<f64> {
    let n = values.len();
    (n > 1).then(|| {
        let mean = values.iter().sum::<f64>() / n as f64;
        let squares: f64 = values.iter().map(|v| (v - mean).powi(2)).sum();
        (squares / (n - 1) as f64).sqrt()
    })
}

/// Which middle of a cell's runs is compared: the paper's mean, or the
/// median (robust to a run disturbed by something else on the machine).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Center {
    #[default]
    Mean,
    Median,
}

impl Center {
    pub fn of(self, summary: &Summary) -> f64 {
        match self {
            Center::Mean => summary.mean,
            Center::Median => summary.median,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Center::Mean => "mean",
            Center::Median => "median",
        }
    }
}

/// Improvement over a baseline in %, as the Nest paper plots it: 0 = same,
/// + = better, - = worse.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Improvement {
    /// Of the candidate's center (mean or median) over the baseline's.
    pub percent: f64,
    /// The error bar: the sample standard deviation of each of the
    /// candidate's runs' improvement over the baseline's center (the
    /// paper's); `None` below two runs.
    pub stddev: Option<f64>,
}

/// The improvement of `value` over `baseline` in %. For a time (lower is
/// better) `baseline / value - 1`: +25% means the baseline took 1.25 times
/// as long. For a rate (higher is better) `value / baseline - 1`.
fn percent_better(baseline: f64, value: f64, higher_is_better: bool) -> Option<f64> {
    let (num, den) = if higher_is_better {
        (value, baseline)
    } else {
        (baseline, value)
    };
    (den != 0.0 && num.is_finite() && den.is_finite()).then(|| 100.0 * (num / den - 1.0))
}

/// `candidate`'s improvement over `baseline`, both taken at `center`,
/// with the paper's error bar: every candidate run compared with the
/// baseline's center, and their standard deviation.
pub fn improvement(
    baseline: &Summary,
    candidate: &Summary,
    higher_is_better: bool,
    center: Center,
) -> Option<Improvement> {
    let base = center.of(baseline);
    let percent = percent_better(base, center.of(candidate), higher_is_better)?;
    let per_run: Option<Vec<f64>> = candidate
        .values
        .iter()
        .map(|&v| percent_better(base, v, higher_is_better))
        .collect();
    Some(Improvement {
        percent,
        stddev: per_run.as_deref().and_then(sample_stddev),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn mean_median_and_sample_stddev() {
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.n, 8);
        assert!(close(s.mean, 5.0));
        assert!(close(s.median, 4.5));
        assert!(close(s.stddev.unwrap(), (32.0f64 / 7.0).sqrt()));
        let odd = summarize(&[9.0, 1.0, 5.0]).unwrap();
        assert!(close(odd.median, 5.0));
        assert_eq!(odd.values, [9.0, 1.0, 5.0], "run order is kept");
        let one = summarize(&[3.0]).unwrap();
        assert_eq!(one.stddev, None);
        assert_eq!(summarize(&[]), None);
    }

    #[test]
    fn faster_time_and_higher_rate_are_positive() {
        let base = summarize(&[10.0, 10.0]).unwrap();
        let fast = summarize(&[8.0, 8.0]).unwrap();
        let time = improvement(&base, &fast, false, Center::Mean).unwrap();
        assert!(close(time.percent, 25.0), "{time:?}");
        assert!(close(time.stddev.unwrap(), 0.0));
        let rate = improvement(&base, &fast, true, Center::Mean).unwrap();
        assert!(close(rate.percent, -20.0), "{rate:?}");
        let same = improvement(&base, &base, false, Center::Mean).unwrap();
        assert!(close(same.percent, 0.0));
    }

    /// The paper's error bar, by hand: baseline runs 10, 12 (mean 11);
    /// candidate runs 9, 11, 13 (mean 11, median 11). Each run's
    /// improvement over 11 (a time): 11/9 - 1 = +22.22%, 11/11 - 1 = 0%,
    /// 11/13 - 1 = -15.38%. Their mean is 2.28%, their sample standard
    /// deviation sqrt(((22.22-2.28)^2 + (0-2.28)^2 + (-15.38-2.28)^2) / 2)
    /// = 18.91%. The baseline's own spread does not enter it.
    #[test]
    fn the_error_bar_is_the_spread_of_each_runs_improvement_over_the_baselines_mean() {
        let base = summarize(&[10.0, 12.0]).unwrap();
        let cand = summarize(&[9.0, 11.0, 13.0]).unwrap();
        let imp = improvement(&base, &cand, false, Center::Mean).unwrap();
        assert!(close(imp.percent, 0.0), "means are equal: {imp:?}");
        let runs = [100.0 * (11.0 / 9.0 - 1.0), 0.0, 100.0 * (11.0 / 13.0 - 1.0)];
        let mean = runs.iter().sum::<f64>() / 3.0;
        let sd = (runs.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
        assert!((sd - 18.91).abs() < 0.005, "hand value {sd}");
        assert!(close(imp.stddev.unwrap(), sd), "{imp:?} vs {sd}");
        // A wider baseline changes nothing in the error bar.
        let wide = summarize(&[2.0, 20.0]).unwrap();
        let imp = improvement(&wide, &cand, false, Center::Mean).unwrap();
        assert!(close(imp.stddev.unwrap(), sd));
        // One run: no error bar.
        let single = summarize(&[11.0]).unwrap();
        assert_eq!(
            improvement(&base, &single, false, Center::Mean)
                .unwrap()
                .stddev,
            None
        );
    }

    #[test]
    fn the_median_is_compared_when_asked() {
        let base = summarize(&[10.0, 10.0, 40.0]).unwrap();
        let cand = summarize(&[5.0, 5.0, 5.0]).unwrap();
        let by_median = improvement(&base, &cand, false, Center::Median).unwrap();
        assert!(close(by_median.percent, 100.0), "{by_median:?}");
        let by_mean = improvement(&base, &cand, false, Center::Mean).unwrap();
        assert!(close(by_mean.percent, 300.0), "{by_mean:?}");
    }

    #[test]
    fn a_zero_baseline_has_no_improvement() {
        let zero = summarize(&[0.0, 0.0]).unwrap();
        let one = summarize(&[1.0, 1.0]).unwrap();
        assert_eq!(improvement(&zero, &one, true, Center::Mean), None);
    }
}
