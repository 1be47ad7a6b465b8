//! The order of runs: warm-up rounds, then measured rounds, each round
//! one run of every cell in turn. Interleaving spreads slow drift (a
//! warming room, a background job) over every cell alike, where running a
//! cell's runs back to back would charge it all to one cell.

/// One run to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedRun {
    /// Index of the cell (workload x scheduler x governor).
    pub cell: usize,
    /// 1-based index among the cell's warm-up or measured runs.
    pub run: usize,
    pub warmup: bool,
    /// Beyond `--runs`, up to `--power-runs`: measured for its energy.
    pub power: bool,
    /// Recorded with `nest trace record`, after the measured runs: where
    /// the work ran, not a measurement (tracing costs time).
    pub traced: bool,
}

/// How many runs of each kind every cell gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rounds {
    pub warmup: usize,
    pub runs: usize,
    /// Measured runs for energy: rounds beyond `runs` up to this many.
    pub power_runs: usize,
    pub traced: bool,
}

/// Every run of `cells` cells: the warm-up rounds, the measured rounds,
/// the power rounds, then a traced round.
pub fn interleaved(cells: usize, rounds: Rounds) -> Vec<PlannedRun> {
    let round = move |run: usize, warmup: bool, power: bool, traced: bool| {
        (0..cells).map(move |cell| PlannedRun {
            cell,
            run,
            warmup,
            power,
            traced,
        })
    };
    let warmups = (1..=rounds.warmup).flat_map(|run| round(run, true, false, false));
    let measured = (1..=rounds.runs).flat_map(|run| round(run, false, false, false));
    let power =
        (rounds.runs + 1..=rounds.power_runs).flat_map(|run| round(run, false, true, false));
    let trace = (1..=usize::from(rounds.traced)).flat_map(|run| round(run, false, false, true));
    warmups.chain(measured).chain(power).chain(trace).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(warmup: usize, runs: usize, power_runs: usize, traced: bool) -> Rounds {
        Rounds {
            warmup,
            runs,
            power_runs,
            traced,
        }
    }

    #[test]
    fn power_rounds_follow_the_measured_ones_up_to_the_power_runs() {
        let plan = interleaved(2, rounds(0, 2, 3, true));
        let order: Vec<(usize, usize, bool, bool)> = plan
            .iter()
            .map(|r| (r.cell, r.run, r.power, r.traced))
            .collect();
        assert_eq!(
            order,
            [
                (0, 1, false, false),
                (1, 1, false, false),
                (0, 2, false, false),
                (1, 2, false, false),
                (0, 3, true, false),
                (1, 3, true, false),
                (0, 1, false, true),
                (1, 1, false, true),
            ]
        );
        assert_eq!(
            interleaved(1, rounds(0, 10, 5, false)).len(),
            10,
            "power <= runs"
        );
    }

    #[test]
    fn rounds_visit_every_cell_before_any_cell_runs_again() {
        let plan = interleaved(3, rounds(1, 2, 0, false));
        let order: Vec<(usize, usize, bool)> =
            plan.iter().map(|r| (r.cell, r.run, r.warmup)).collect();
        assert_eq!(
            order,
            [
                (0, 1, true),
                (1, 1, true),
                (2, 1, true),
                (0, 1, false),
                (1, 1, false),
                (2, 1, false),
                (0, 2, false),
                (1, 2, false),
                (2, 2, false),
            ]
        );
    }

    #[test]
    fn no_warmup_or_no_cells_plan_only_what_is_asked() {
        assert_eq!(interleaved(2, rounds(0, 1, 0, false)).len(), 2);
        assert!(interleaved(0, rounds(1, 5, 30, true)).is_empty());
        assert!(interleaved(4, rounds(0, 0, 0, false)).is_empty());
    }

    #[test]
    fn the_traced_round_comes_last() {
        let plan = interleaved(2, rounds(1, 1, 0, true));
        let traced: Vec<(usize, bool)> = plan.iter().map(|r| (r.cell, r.traced)).collect();
        assert_eq!(
            traced,
            [
                (0, false),
                (1, false),
                (0, false),
                (1, false),
                (0, true),
                (1, true)
            ]
        );
        assert!(plan[4..].iter().all(|r| !r.warmup && r.run == 1));
    }
}
