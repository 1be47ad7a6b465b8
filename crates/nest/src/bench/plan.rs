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
    /// Recorded with `nest trace record`, after the measured runs: where
    /// the work ran, not a measurement (tracing costs time).
    pub traced: bool,
}

/// Every run of `cells` cells: `warmup` rounds, then `runs` rounds, then
/// a traced round if `traced`.
pub fn interleaved(cells: usize, warmup: usize, runs: usize, traced: bool) -> Vec<PlannedRun> {
    let round = move |run: usize, warmup: bool, traced: bool| {
        (0..cells).map(move |cell| PlannedRun {
            cell,
            run,
            warmup,
            traced,
        })
    };
    let warmups = (1..=warmup).flat_map(|run| round(run, true, false));
    let measured = (1..=runs).flat_map(|run| round(run, false, false));
    let trace = (1..=usize::from(traced)).flat_map(|run| round(run, false, true));
    warmups.chain(measured).chain(trace).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_visit_every_cell_before_any_cell_runs_again() {
        let plan = interleaved(3, 1, 2, false);
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
        assert_eq!(interleaved(2, 0, 1, false).len(), 2);
        assert!(interleaved(0, 1, 5, true).is_empty());
        assert!(interleaved(4, 0, 0, false).is_empty());
    }

    #[test]
    fn the_traced_round_comes_last() {
        let plan = interleaved(2, 1, 1, true);
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
