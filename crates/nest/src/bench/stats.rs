//! Means, standard deviations and the paper's improvement figure.

/// Mean and sample standard deviation (n - 1; `None` below two values).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub stddev: Option<f64>,
}

pub fn summarize(values: &[f64]) -> Option<Summary> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let stddev = (n > 1).then(|| {
        let squares: f64 = values.iter().map(|v| (v - mean).powi(2)).sum();
        (squares / (n - 1) as f64).sqrt()
    });
    Some(Summary { n, mean, stddev })
}

/// Improvement of `candidate` over `baseline` in %, as the Nest paper
/// plots it: 0 = same, + = better, - = worse.
///
/// For a time (lower is better) it is `baseline / candidate - 1`: +25%
/// means the baseline took 1.25 times as long. For a rate (higher is
/// better) it is `candidate / baseline - 1`. Its standard deviation
/// propagates both relative deviations through the ratio
/// (`sd(r) = r * sqrt((sd_a/a)^2 + (sd_b/b)^2)`), and is `None` when either
/// side has fewer than two runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Improvement {
    pub percent: f64,
    pub stddev: Option<f64>,
}

pub fn improvement(
    baseline: &Summary,
    candidate: &Summary,
    higher_is_better: bool,
) -> Option<Improvement> {
    let (num, den) = if higher_is_better {
        (candidate, baseline)
    } else {
        (baseline, candidate)
    };
    if den.mean == 0.0 || !num.mean.is_finite() || !den.mean.is_finite() {
        return None;
    }
    let ratio = num.mean / den.mean;
    let relative = |s: &Summary| s.stddev.map(|sd| sd / s.mean);
    let stddev = match (relative(num), relative(den)) {
        (Some(a), Some(b)) if num.mean != 0.0 => Some(100.0 * ratio.abs() * a.hypot(b)),
        _ => None,
    };
    Some(Improvement {
        percent: 100.0 * (ratio - 1.0),
        stddev,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn mean_and_sample_stddev() {
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.n, 8);
        assert!(close(s.mean, 5.0));
        assert!(close(s.stddev.unwrap(), (32.0f64 / 7.0).sqrt()));
        let one = summarize(&[3.0]).unwrap();
        assert_eq!(one.stddev, None);
        assert_eq!(summarize(&[]), None);
    }

    #[test]
    fn faster_time_and_higher_rate_are_positive() {
        let base = summarize(&[10.0, 10.0]).unwrap();
        let fast = summarize(&[8.0, 8.0]).unwrap();
        let time = improvement(&base, &fast, false).unwrap();
        assert!(close(time.percent, 25.0), "{time:?}");
        assert!(close(time.stddev.unwrap(), 0.0));
        let rate = improvement(&base, &fast, true).unwrap();
        assert!(close(rate.percent, -20.0), "{rate:?}");
        let same = improvement(&base, &base, false).unwrap();
        assert!(close(same.percent, 0.0));
    }

    #[test]
    fn improvement_stddev_propagates_both_sides() {
        // a = 10 +- 1 (10%), b = 5 +- 0.5 (10%): ratio 2, sd 2 * sqrt(2) * 10%.
        let a = Summary {
            n: 3,
            mean: 10.0,
            stddev: Some(1.0),
        };
        let b = Summary {
            n: 3,
            mean: 5.0,
            stddev: Some(0.5),
        };
        let imp = improvement(&a, &b, false).unwrap();
        assert!(close(imp.percent, 100.0));
        assert!(close(imp.stddev.unwrap(), 100.0 * 2.0 * 0.02f64.sqrt()));
        let single = Summary {
            n: 1,
            mean: 5.0,
            stddev: None,
        };
        assert_eq!(improvement(&a, &single, false).unwrap().stddev, None);
    }

    #[test]
    fn a_zero_baseline_has_no_improvement() {
        let zero = Summary {
            n: 2,
            mean: 0.0,
            stddev: Some(0.0),
        };
        let one = Summary {
            n: 2,
            mean: 1.0,
            stddev: Some(0.0),
        };
        assert_eq!(improvement(&zero, &one, true), None);
    }
}
