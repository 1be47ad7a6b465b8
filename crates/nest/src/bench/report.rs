//! The results for people: a table per cell (mean, standard deviation,
//! improvement over the baseline), `report.html` with speedup bars, and
//! `nest bench compare`.

use std::fmt::Write as _;

use nest_trace::table::{Cell as TableCell, Table, escape};

use super::exec::slug;
use super::residency::BandShare;
use super::results::{Results, Status};
use super::stats::{Improvement, Summary, improvement};

/// A value with up to 4 significant digits.
fn num(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 6) as usize;
    format!("{v:.digits$}")
}

fn percent(p: f64) -> String {
    format!("{p:+.1}%")
}

/// An improvement and its standard deviation, for a table (`-` when
/// there is none).
fn improvement_cells(imp: Option<Improvement>) -> [String; 2] {
    [
        imp.map(|i| percent(i.percent))
            .unwrap_or_else(|| "-".into()),
        imp.and_then(|i| i.stddev)
            .map(|sd| format!("{sd:.1}%"))
            .unwrap_or_else(|| "-".into()),
    ]
}

/// Cell `i`'s improvement columns: `baseline` for the baseline cell,
/// with its own runs' spread around its center.
fn vs_baseline_cells(results: &Results, i: usize, imp: Option<Improvement>) -> [String; 2] {
    let [percent, sd] = improvement_cells(imp);
    if results.baseline_of(i) == Some(i) {
        ["baseline".into(), sd]
    } else {
        [percent, sd]
    }
}

/// The summary table: one row per cell.
pub fn summary_table(results: &Results) -> Table {
    let with_governor = results.cells.iter().any(|c| c.governor.is_some());
    let with_energy = results.has_energy();
    let mut columns = vec!["workload", "scheduler"];
    if with_governor {
        columns.push("governor");
    }
    columns.extend([
        "runs ok",
        "mean",
        "median",
        "stddev",
        "unit",
        "vs baseline",
        "+-",
    ]);
    if with_energy {
        columns.extend(["energy J", "energy vs baseline", "energy +-"]);
    }
    let mut table = Table::new("summary", &columns);
    for (i, cell) in results.cells.iter().enumerate() {
        let summary = results.summarize(i);
        let mut row = vec![cell.workload.name.clone(), cell.scheduler.name.clone()];
        if with_governor {
            row.push(cell.governor.clone().unwrap_or_default());
        }
        row.push(format!("{}/{}", summary.ok, summary.ok + summary.failed));
        match (&summary.failure, summary.result()) {
            // The reasons are listed under the table: too long for it.
            (Some(_), _) => row.push("FAILED".into()),
            (None, Some(s)) => {
                row.push(num(s.mean));
                row.push(num(s.median));
                row.push(s.stddev.map(num).unwrap_or_else(|| "-".into()));
                row.push(cell.workload.metric.unit.clone());
                row.extend(vs_baseline_cells(results, i, results.improvement(i)));
                if with_energy {
                    let energy = summary.energy.as_ref();
                    row.push(energy.map_or_else(|| "-".into(), |e| num(e.mean)));
                    row.extend(vs_baseline_cells(results, i, results.energy_improvement(i)));
                }
            }
            (None, None) => {}
        }
        let empty = if summary.failure.is_some() { "" } else { "-" };
        row.resize(columns.len(), empty.into());
        table.push(row.into_iter().map(TableCell::Text).collect());
    }
    table
}

/// The text printed at the end of a bench.
pub fn text(results: &Results) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "machine: {}", results.machine.describe());
    if let Some(label) = results.machine.label() {
        let _ = writeln!(s, "{label}");
    }
    let m = &results.method;
    let center = m.center.name();
    let power = if m.power_runs > m.runs {
        format!(" (+ power runs up to {} for energy)", m.power_runs)
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "suite {}: {} warm-up + {} measured runs per cell{power}, interleaved; vs baseline: \
         the {center}'s improvement over {} in % (+ = better); +-: the standard deviation of \
         each run's improvement over the baseline's {center}",
        m.suite,
        m.warmup,
        m.runs,
        results.baseline_name()
    );
    for note in &results.notes {
        let _ = writeln!(s, "note: {note}");
    }
    if results.interrupted {
        let _ = writeln!(
            s,
            "INTERRUPTED: only the runs finished before the signal are counted"
        );
    }
    s.push_str(&summary_table(results).to_text());
    for line in failures(results) {
        let _ = writeln!(s, "{line}");
    }
    if !results.traces.is_empty() {
        s.push_str(
            "\ntime beside placement (traced runs: the workload's tasks, per 100 ms of its life):\n",
        );
        s.push_str(&traces_table(results).to_text());
    }
    s
}

/// Each cell's time (its center, and against the baseline) beside where
/// its traced run ran its work: CPUs and sockets per 100 ms.
pub fn traces_table(results: &Results) -> Table {
    let center = results.method.center.name();
    let columns = [
        "cell",
        center,
        "unit",
        "vs baseline",
        "CPUs/100ms",
        "sockets/100ms",
        "distinct CPUs",
        "concurrency",
        "trace",
    ];
    let mut table = Table::new("traces", &columns);
    for traced in &results.traces {
        let value = |v: Option<f64>| v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into());
        // Short: the full reason is in results.json and was on stderr.
        let file = match &traced.error {
            Some(err) => format!(
                "none: {}",
                err.split([':', '(']).next().unwrap_or(err).trim()
            ),
            None => format!(
                "logs/{}",
                traced.file.rsplit('/').next().unwrap_or_default()
            ),
        };
        let cell = &results.cells[traced.cell];
        let summary = results.summarize(traced.cell);
        let time = summary
            .result()
            .map_or_else(|| "FAILED".into(), |s| num(results.method.center.of(s)));
        let [vs, _] = vs_baseline_cells(results, traced.cell, results.improvement(traced.cell));
        table.push(vec![
            cell.id().into(),
            time.into(),
            cell.workload.metric.unit.as_str().into(),
            vs.into(),
            value(traced.mean_cpus_used).into(),
            value(traced.mean_sockets_used).into(),
            traced
                .distinct_cpus
                .map_or_else(|| "-".into(), |n| n.to_string())
                .into(),
            value(traced.mean_concurrency).into(),
            file.into(),
        ]);
    }
    table
}

/// One line per failed run: which, and why.
pub fn failures(results: &Results) -> Vec<String> {
    results
        .runs
        .iter()
        .filter(|r| r.status == Status::Failed)
        .map(|r| {
            let kind = if r.warmup { "warm-up" } else { "run" };
            format!(
                "FAILED {}, {kind} {}: {}",
                results.cells[r.cell].id(),
                r.run,
                r.reason.as_deref().unwrap_or("no reason recorded")
            )
        })
        .collect()
}

const BAR_H: f64 = 22.0;
const LABEL_W: f64 = 170.0;
const PLOT_W: f64 = 420.0;

/// A figure's opening tag and title.
fn svg_start(width: f64, height: f64, title: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n\
         <text x=\"4\" y=\"16\" font-weight=\"bold\">{}</text>\n",
        escape(title)
    )
}

/// The label of the bar at `y`, left of the plot.
fn bar_label(s: &mut String, y: f64, label: &str) {
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
        LABEL_W - 6.0,
        y + 14.0,
        escape(label)
    );
}

/// Improvement bars with +-1 stddev error bars for one workload's
/// non-baseline cells: `(label, percent, stddev, failed)`.
pub fn speedup_svg(title: &str, bars: &[(String, Option<f64>, Option<f64>)]) -> String {
    let extent = bars
        .iter()
        .filter_map(|(_, p, sd)| p.map(|p| p.abs() + sd.unwrap_or(0.0)))
        .fold(5.0f64, f64::max)
        * 1.1;
    let width = LABEL_W + PLOT_W + 70.0;
    let height = 40.0 + BAR_H * bars.len() as f64 + 20.0;
    let zero = LABEL_W + PLOT_W / 2.0;
    let x = |p: f64| zero + p / extent * (PLOT_W / 2.0);
    let mut s = svg_start(width, height, title);
    for (i, (label, p, sd)) in bars.iter().enumerate() {
        let y = 30.0 + BAR_H * i as f64;
        bar_label(&mut s, y, label);
        let Some(p) = p else {
            let _ = writeln!(
                s,
                "<text x=\"{zero:.1}\" y=\"{:.1}\" fill=\"#d1495b\">FAILED</text>",
                y + 14.0
            );
            continue;
        };
        let (left, right) = (x(p.min(0.0)), x(p.max(0.0)));
        let colour = if *p >= 0.0 { "#4c9f70" } else { "#d1495b" };
        let _ = writeln!(
            s,
            "<rect class=\"bar\" x=\"{left:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\"/>",
            y + 3.0,
            (right - left).max(0.5),
            BAR_H - 6.0
        );
        if let Some(sd) = sd {
            let mid = y + BAR_H / 2.0;
            let _ = writeln!(
                s,
                "<path class=\"error\" d=\"M{:.1} {mid:.1}H{:.1}M{:.1} {:.1}V{:.1}M{:.1} {:.1}V{:.1}\" stroke=\"black\"/>",
                x(p - sd),
                x(p + sd),
                x(p - sd),
                mid - 5.0,
                mid + 5.0,
                x(p + sd),
                mid - 5.0,
                mid + 5.0
            );
        }
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            LABEL_W + PLOT_W + 6.0,
            y + 14.0,
            percent(*p)
        );
    }
    let bottom = 30.0 + BAR_H * bars.len() as f64;
    let _ = writeln!(
        s,
        "<line x1=\"{zero:.1}\" y1=\"26\" x2=\"{zero:.1}\" y2=\"{bottom:.1}\" stroke=\"#555\"/>\n\
         <text x=\"{zero:.1}\" y=\"{:.1}\" text-anchor=\"middle\">0 (same as baseline); axis +-{:.0}%</text>\n</svg>",
        bottom + 14.0,
        extent
    );
    s
}

/// What a traced run without frequency events shows instead of a bar.
const NO_CPUFREQ: &str = "no cpufreq events in the trace";

/// Frequency residency of one workload's traced runs: a bar per
/// scheduler, stacked by band from the lowest (blue) to the highest (red)
/// frequency, `unknown` (before a CPU's first frequency event) in grey.
pub fn residency_svg(title: &str, rows: &[(String, &[BandShare])]) -> String {
    // The bands of every row, in order (the same on one machine).
    let mut bands: Vec<&str> = Vec::new();
    for share in rows.iter().flat_map(|(_, shares)| shares.iter()) {
        if !bands.contains(&share.band.as_str()) {
            bands.push(&share.band);
        }
    }
    // The last band is `unknown`: the one before it is the highest.
    let top = bands.len().saturating_sub(2) as u32;
    let colour = |band: &str| {
        let i = bands.iter().position(|b| *b == band).unwrap_or(0);
        if band == "unknown" {
            "#bbbbbb".to_string()
        } else {
            nest_trace::svg::heat(i as f64, 0, top)
        }
    };
    let width = LABEL_W + PLOT_W + 70.0;
    let (legend, height) = residency_legend(&bands, rows, width, colour);
    let mut s = svg_start(width, height, title);
    for (i, (label, shares)) in rows.iter().enumerate() {
        let y = 30.0 + BAR_H * i as f64;
        bar_label(&mut s, y, label);
        if shares.is_empty() {
            let _ = writeln!(
                s,
                "<text x=\"{LABEL_W}\" y=\"{:.1}\">{NO_CPUFREQ}</text>",
                y + 14.0
            );
        }
        let mut x = LABEL_W;
        for share in shares.iter().filter(|b| b.share > 0.0) {
            let (w, percent) = (share.share * PLOT_W, 100.0 * share.share);
            let _ = writeln!(
                s,
                "<rect class=\"band\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" \
                 fill=\"{}\"><title>{}: {percent:.1}%</title></rect>",
                y + 3.0,
                BAR_H - 6.0,
                colour(&share.band),
                escape(&share.band),
            );
            // Only where the number fits inside its part of the bar.
            if share.share >= 0.08 {
                let _ = writeln!(
                    s,
                    "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{percent:.0}%</text>",
                    x + w / 2.0,
                    y + 14.0,
                );
            }
            x += w;
        }
    }
    s.push_str(&legend);
    s.push_str("</svg>\n");
    s
}

/// The legend of a residency figure under its `rows`: the bands some run
/// was busy in, on as many lines as `width` needs; and the figure's
/// height with it.
fn residency_legend(
    bands: &[&str],
    rows: &[(String, &[BandShare])],
    width: f64,
    colour: impl Fn(&str) -> String,
) -> (String, f64) {
    let busy = |band: &str| {
        rows.iter()
            .flat_map(|(_, shares)| shares.iter())
            .any(|b| b.band == band && b.share > 0.0)
    };
    let mut legend = String::new();
    let (mut x, mut y) = (4.0, 30.0 + BAR_H * rows.len() as f64 + 16.0);
    for band in bands.iter().filter(|band| busy(band)) {
        let w = 24.0 + 7.0 * band.len() as f64;
        if x + w > width {
            (x, y) = (4.0, y + 16.0);
        }
        let _ = writeln!(
            legend,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/>\n\
             <text x=\"{:.1}\" y=\"{y:.1}\">{}</text>",
            y - 9.0,
            colour(band),
            x + 14.0,
            escape(band)
        );
        x += w;
    }
    (legend, y + 12.0)
}

/// The cells of each workload, in order: what one figure shows (every
/// scheduler under every governor, against the one baseline).
fn groups(results: &Results) -> Vec<(String, Vec<usize>)> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, cell) in results.cells.iter().enumerate() {
        let key = &cell.workload.name;
        match groups.iter_mut().find(|(k, _)| k == key) {
            Some((_, cells)) => cells.push(i),
            None => groups.push((key.clone(), vec![i])),
        }
    }
    groups
}

/// A cell's label in a figure: `scx_nest`, or `scx_nest / performance`.
fn bar_name(results: &Results, i: usize) -> String {
    let cell = &results.cells[i];
    match &cell.governor {
        Some(g) => format!("{} / {g}", cell.scheduler.name),
        None => cell.scheduler.name.clone(),
    }
}

/// A bar per cell: its label, and its improvement.
fn bars(
    results: &Results,
    cells: &[usize],
    imp: impl Fn(usize) -> Option<Improvement>,
) -> Vec<(String, Option<f64>, Option<f64>)> {
    cells
        .iter()
        .map(|&i| {
            let imp = imp(i);
            (
                bar_name(results, i),
                imp.map(|i| i.percent),
                imp.and_then(|i| i.stddev),
            )
        })
        .collect()
}

/// One of the paper's figures: `name` is its file name stem.
pub struct Figure {
    pub name: String,
    pub svg: String,
}

/// Each workload's speedup bars (every cell but the baseline), and its
/// energy bars when its runs measured energy.
pub fn speedup_figures(results: &Results) -> Vec<(Figure, Option<Figure>)> {
    let baseline = results.baseline_name();
    let center = results.method.center.name();
    let mut figures = Vec::new();
    for (key, cells) in groups(results) {
        let has_energy = cells.iter().any(|&i| results.summarize(i).energy.is_some());
        let cells: Vec<usize> = cells
            .into_iter()
            .filter(|&i| results.baseline_of(i) != Some(i))
            .collect();
        let title = format!("{key}: improvement of the {center} over {baseline} (%)");
        let speedup = Figure {
            name: format!("{}-speedup", slug(&key)),
            svg: speedup_svg(&title, &bars(results, &cells, |i| results.improvement(i))),
        };
        let energy = has_energy.then(|| {
            // A cell with a time but no energy (a counter that could not
            // be read) has no bar; without a time it is FAILED, as above.
            let measured: Vec<usize> = cells
                .into_iter()
                .filter(|&i| {
                    results.energy_improvement(i).is_some() || results.improvement(i).is_none()
                })
                .collect();
            let title = format!("{key}: energy improvement over {baseline} (%)");
            Figure {
                name: format!("{}-energy", slug(&key)),
                svg: speedup_svg(
                    &title,
                    &bars(results, &measured, |i| results.energy_improvement(i)),
                ),
            }
        });
        figures.push((speedup, energy));
    }
    figures
}

/// Each workload's frequency residency figure, or why there is none.
fn residency_figures(results: &Results) -> Vec<Result<Figure, String>> {
    let mut figures = Vec::new();
    for (key, cells) in groups(results) {
        // The cells with a trace (a failed traced run has its reason in
        // the table above).
        let rows: Vec<(String, &[BandShare])> = cells
            .iter()
            .filter_map(|&i| {
                let traced = results.traces.iter().find(|t| t.cell == i)?;
                traced
                    .error
                    .is_none()
                    .then(|| (bar_name(results, i), traced.residency.as_slice()))
            })
            .collect();
        if rows.is_empty() {
            continue;
        }
        if rows.iter().all(|(_, shares)| shares.is_empty()) {
            figures.push(Err(format!("{key}: {NO_CPUFREQ}")));
            continue;
        }
        let source = cells
            .iter()
            .filter_map(|&i| results.traces.iter().find(|t| t.cell == i))
            .find_map(|t| t.frequency_source.clone())
            .unwrap_or_else(|| "unknown source".into());
        let title =
            format!("{key}: the workload's busy time per CPU frequency (traced run; {source})");
        figures.push(Ok(Figure {
            name: format!("{}-frequency", slug(&key)),
            svg: residency_svg(&title, &rows),
        }));
    }
    figures
}

/// The paper's figures as PNG files in `dir`: speedup, energy and
/// frequency residency of each workload. Returns the files written.
pub fn write_pngs(
    results: &Results,
    dir: &std::path::Path,
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut figures: Vec<Figure> = Vec::new();
    for (speedup, energy) in speedup_figures(results) {
        figures.push(speedup);
        figures.extend(energy);
    }
    figures.extend(residency_figures(results).into_iter().flatten());
    let mut written = Vec::new();
    for figure in figures {
        let path = dir.join(format!("{}.png", figure.name));
        nest_trace::svg::write_png(&figure.svg, &path)?;
        written.push(path);
    }
    Ok(written)
}

/// Every run, for the report's last table.
fn runs_table(results: &Results) -> Table {
    let with_energy = results.has_energy();
    let mut columns = vec!["workload", "scheduler", "run", "status", "metric", "wall s"];
    if with_energy {
        columns.push("energy J");
    }
    columns.push("reason");
    let mut table = Table::new("runs", &columns);
    for run in &results.runs {
        let cell = &results.cells[run.cell];
        let label = if run.warmup {
            format!("warm-up {}", run.run)
        } else {
            run.run.to_string()
        };
        let mut row: Vec<TableCell> = vec![
            cell.workload.name.as_str().into(),
            cell.scheduler.name.as_str().into(),
            label.into(),
            format!("{:?}", run.status).to_uppercase().into(),
            run.metric.map(num).unwrap_or_default().into(),
            num(run.wall_s).into(),
        ];
        if with_energy {
            row.push(run.energy_j.map(num).unwrap_or_default().into());
        }
        row.push(run.reason.clone().unwrap_or_default().into());
        table.push(row);
    }
    table
}

pub fn html(results: &Results) -> String {
    let mut s = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>nest bench</title>\n\
         <style>body{font-family:sans-serif;max-width:84em;margin:1em auto}\
         table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}\
         .label{color:#b00;font-weight:bold}.pair{display:flex;gap:1em}</style></head><body>\n<h1>nest bench</h1>\n",
    );
    let _ = writeln!(s, "<p>{}</p>", escape(&results.machine.describe()));
    if let Some(label) = results.machine.label() {
        let _ = writeln!(s, "<p class=\"label\">{}</p>", escape(label));
    }
    for line in text(results).lines().filter(|l| {
        l.starts_with("suite ") || l.starts_with("note: ") || l.starts_with("INTERRUPTED")
    }) {
        let _ = writeln!(s, "<p>{}</p>", escape(line));
    }
    s.push_str("<h2>Summary</h2>\n");
    s.push_str(&summary_table(results).to_html());
    for line in failures(results) {
        let _ = writeln!(s, "<p class=\"label\">{}</p>", escape(&line));
    }
    s.push_str("<h2>Improvement over the baseline</h2>\n");
    for (speedup, energy) in speedup_figures(results) {
        match energy {
            Some(energy) => {
                let _ = write!(
                    s,
                    "<div class=\"pair\">\n{}{}</div>\n",
                    speedup.svg, energy.svg
                );
            }
            None => s.push_str(&speedup.svg),
        }
    }
    if !results.traces.is_empty() {
        s.push_str("<h2>Where the work ran (one traced run per cell)</h2>\n");
        s.push_str(&traces_table(results).to_html());
        for svg in results.traces.iter().filter_map(|t| t.svg.as_deref()) {
            s.push_str(svg);
        }
        for figure in residency_figures(results) {
            match figure {
                Ok(figure) => s.push_str(&figure.svg),
                Err(why) => {
                    let _ = writeln!(s, "<p>{}</p>", escape(&why));
                }
            }
        }
    }
    s.push_str("<h2>Every run</h2>\n");
    s.push_str(&runs_table(results).to_html());
    s.push_str("</body></html>\n");
    s
}

/// `nest bench compare A B`: each cell present in both, B against A
/// (and their energy, when either measured it).
pub fn compare(a: &Results, b: &Results) -> Table {
    let with_energy = a.has_energy() || b.has_energy();
    let mut columns = vec!["cell", "A mean", "B mean", "unit", "B/A", "B vs A", "+-"];
    if with_energy {
        columns.extend(["A J", "B J", "energy B vs A", "energy +-"]);
    }
    let mut table = Table::new("compare", &columns);
    let center = a.method.center;
    let versus = |x: Option<&Summary>, y: Option<&Summary>, higher_is_better| {
        improvement_cells(
            x.zip(y)
                .and_then(|(x, y)| improvement(x, y, higher_is_better, center)),
        )
    };
    for (i, cell) in a.cells.iter().enumerate() {
        let id = cell.id();
        let Some(j) = b.cells.iter().position(|c| c.id() == id) else {
            continue;
        };
        let (sa, sb) = (a.summarize(i), b.summarize(j));
        let mean = |s: Option<&Summary>, none: &str| s.map_or_else(|| none.into(), |s| num(s.mean));
        let ratio = sa.result().zip(sb.result());
        let mut row = vec![
            id,
            mean(sa.result(), "FAILED"),
            mean(sb.result(), "FAILED"),
            cell.workload.metric.unit.clone(),
            ratio.map_or_else(|| "-".into(), |(x, y)| format!("{:.3}", y.mean / x.mean)),
        ];
        let higher_is_better = cell.workload.metric.higher_is_better;
        row.extend(versus(sa.result(), sb.result(), higher_is_better));
        if with_energy {
            row.push(mean(sa.energy_result(), "-"));
            row.push(mean(sb.energy_result(), "-"));
            row.extend(versus(sa.energy_result(), sb.energy_result(), false));
        }
        table.push(row.into_iter().map(TableCell::Text).collect());
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::results::tests::sample;

    #[test]
    fn the_table_shows_improvements_and_failures() {
        let text = summary_table(&sample()).to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("workload"), "{text}");
        assert!(
            lines[1].contains("chain") && lines[1].contains("baseline"),
            "{text}"
        );
        assert!(
            lines[2].contains("scx_nest") && lines[2].contains("+100.0%"),
            "{text}"
        );
        assert!(
            lines[4].contains("FAILED") && lines[4].contains("1/2"),
            "{text}"
        );
        let failed = failures(&sample());
        assert_eq!(
            failed,
            ["FAILED pipe / scx_nest, run 2: ejected: runnable task stall"]
        );
    }

    /// The sample without energy, as measured without RAPL.
    fn without_energy() -> Results {
        let mut results = sample();
        results.runs.iter_mut().for_each(|r| r.energy_j = None);
        results
    }

    #[test]
    fn the_table_shows_energy_only_when_measured() {
        let table = summary_table(&sample());
        let at = |row: usize, column: &str| table.get(row, column).unwrap().to_string();
        assert_eq!(at(0, "energy J"), "30.00");
        assert_eq!(at(0, "energy vs baseline"), "baseline");
        assert_eq!(at(1, "energy J"), "20.00");
        assert_eq!(at(1, "energy vs baseline"), "+50.0%");
        assert_eq!(at(1, "energy +-"), "56.6%", "runs +100% and +20%");
        assert_eq!(at(2, "energy J"), "-", "pipe measured none");
        assert_eq!(
            (at(3, "mean"), at(3, "energy J")),
            ("FAILED".into(), "".into())
        );
        let table = summary_table(&without_energy());
        assert_eq!(table.column("energy J"), None);
        assert_eq!(table.columns.last().unwrap(), "+-");
    }

    /// The report's improvement figures.
    fn improvement_section(results: &Results) -> String {
        let page = html(results);
        let at = page.find("<h2>Improvement over the baseline</h2>").unwrap();
        let end = page[at + 4..].find("<h2>").unwrap() + at + 4;
        page[at..end].to_string()
    }

    #[test]
    fn the_report_has_a_figure_per_workload_with_error_bars() {
        let html = improvement_section(&without_energy());
        assert_eq!(html.matches("<svg").count(), 2, "chain and pipe");
        assert!(!html.contains("energy"));
        assert!(html.contains("class=\"bar\""));
        assert!(
            html.contains("class=\"error\""),
            "chain's nest bar has an error bar"
        );
        assert!(html.contains(">FAILED<"), "pipe's nest cell failed");
        assert!(!super::html(&sample()).contains("under emulation"));
    }

    #[test]
    fn workloads_that_measured_energy_get_energy_bars_beside() {
        let html = improvement_section(&sample());
        assert_eq!(html.matches("<svg").count(), 3, "chain twice, pipe once");
        assert_eq!(html.matches("<div class=\"pair\">").count(), 1);
        let pair = &html[html.find("<div class=\"pair\">").unwrap()..];
        let energy = &pair[pair.find("energy improvement over default").unwrap()..];
        assert!(energy.contains(">scx_nest<") && energy.contains(">+50.0%<"));
        let runs = runs_table(&sample());
        assert_eq!(runs.get(3, "energy J").unwrap().to_string(), "15.00");
        assert_eq!(runs_table(&without_energy()).column("energy J"), None);
    }

    #[test]
    fn traced_runs_get_their_own_table() {
        let out = text(&sample());
        let at = out.find("traced runs").expect("a traces section");
        let line = out[at..].lines().nth(2).unwrap();
        assert!(
            line.starts_with("chain / scx_nest") && line.contains("2.50") && line.contains("1.25"),
            "{out}"
        );
        assert!(line.ends_with("logs/chain-scx_nest-t1.nest.jsonl"), "{out}");
        let mut failed = sample();
        failed.traces[0].error = Some("ejected (state disabled): kernel: stall".into());
        let out = text(&failed);
        assert!(out.contains("none: ejected\n"), "{out}");
        assert!(html(&sample()).contains("Where the work ran"));
    }

    #[test]
    fn traced_runs_show_their_frequency_residency() {
        let html = html(&sample());
        let at = html
            .find("chain: the workload's busy time per CPU frequency")
            .unwrap();
        let figure = &html[at..html[at..].find("</svg>").unwrap() + at];
        assert_eq!(figure.matches("class=\"band\"").count(), 2, "unknown is 0");
        assert!(
            figure.contains(">25%<") && figure.contains(">75%<"),
            "{figure}"
        );
        // The lowest band blue, the highest red, as in nest trace's heatmap.
        assert!(figure.contains("fill=\"#2c7bb6\"><title>&lt; 2.0 GHz: 25.0%"));
        assert!(figure.contains("fill=\"#d7191c\"><title>&gt;= 2.0 GHz: 75.0%"));
        assert!(figure.contains(">&gt;= 2.0 GHz</text>"), "in the legend");
        assert!(!figure.contains(">unknown</text>"), "no busy time unknown");
        assert!(!html.contains(NO_CPUFREQ));
    }

    #[test]
    fn traced_runs_without_frequency_events_say_so() {
        let mut results = sample();
        results.traces[0].residency.clear();
        let page = html(&results);
        assert!(page.contains("<p>chain: no cpufreq events in the trace</p>"));
        assert!(!page.contains("class=\"band\""));
        // Beside a run that has them, a row says it instead of a bar.
        let mut other = results.traces[0].clone();
        other.cell = 0;
        other.residency = sample().traces[0].residency.clone();
        results.traces.push(other);
        let page = html(&results);
        let at = page.find("busy time per CPU frequency").unwrap();
        assert!(page[at..].contains(NO_CPUFREQ));
        assert_eq!(page.matches("class=\"band\"").count(), 2);
        // A traced run that failed has its reason in the table, no figure.
        results
            .traces
            .iter_mut()
            .for_each(|t| t.error = Some("ejected".into()));
        let page = html(&results);
        assert!(!page.contains("busy time per CPU frequency") && !page.contains(NO_CPUFREQ));
    }

    #[test]
    fn compare_gives_ratio_and_improvement_per_shared_cell() {
        let a = sample();
        let mut b = sample();
        for run in &mut b.runs {
            if run.cell == 0 {
                run.metric = run.metric.map(|m| m / 2.0);
            }
        }
        b.cells.truncate(3);
        b.runs.retain(|r| r.cell < 3);
        let text = compare(&a, &b).to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 3, "{text}");
        assert!(lines[1].starts_with("chain / default"), "{text}");
        assert!(
            lines[1].contains("0.500") && lines[1].contains("+100.0%"),
            "{text}"
        );
        assert!(
            lines[2].contains("1.000") && lines[2].contains("+0.0%"),
            "{text}"
        );
    }

    #[test]
    fn compare_gives_energy_when_either_side_measured_it() {
        let a = sample();
        let mut b = without_energy();
        b.runs[3].energy_j = Some(10.0);
        b.runs[4].energy_j = Some(10.0);
        let table = compare(&a, &b);
        let at = |row: usize, column: &str| table.get(row, column).unwrap().to_string();
        assert_eq!(
            (at(1, "A J"), at(1, "B J")),
            ("20.00".into(), "10.00".into())
        );
        assert_eq!(at(1, "energy B vs A"), "+100.0%");
        assert_eq!(
            (at(0, "B J"), at(0, "energy B vs A")),
            ("-".into(), "-".into())
        );
        let old = compare(&without_energy(), &without_energy());
        assert_eq!(old.column("A J"), None);
    }

    #[test]
    fn one_figure_per_workload_shows_every_governor_against_the_one_baseline() {
        let results = crate::bench::results::tests::across_governors();
        let figures = speedup_figures(&results);
        assert_eq!(figures.len(), 1, "one workload");
        let (speedup, energy) = &figures[0];
        assert!(energy.is_none());
        assert_eq!(speedup.name, "chain-speedup");
        let svg = &speedup.svg;
        assert!(
            svg.contains("chain: improvement of the mean over default / schedutil (%)"),
            "{svg}"
        );
        for label in [
            ">default / performance<",
            ">scx_nest / performance<",
            ">scx_nest / schedutil<",
        ] {
            assert!(svg.contains(label), "{label} in {svg}");
        }
        assert!(
            !svg.contains(">default / schedutil<"),
            "the baseline has no bar"
        );
        assert_eq!(
            svg.matches("class=\"error\"").count(),
            3,
            "an error bar each"
        );
        assert!(svg.contains(">+10.0%<") && svg.contains(">+0.0%<"), "{svg}");
    }

    #[test]
    fn the_figures_are_also_written_as_png() {
        let dir = tempfile::tempdir().unwrap();
        let written = write_pngs(&sample(), dir.path()).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "chain-speedup.png",
                "chain-energy.png",
                "pipe-speedup.png",
                "chain-frequency.png"
            ]
        );
        for path in &written {
            let bytes = std::fs::read(path).unwrap();
            assert!(
                bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
                "{}",
                path.display()
            );
        }
    }

    #[test]
    fn numbers_keep_four_significant_digits() {
        assert_eq!(num(0.41234), "0.4123");
        assert_eq!(num(12.3456), "12.35");
        assert_eq!(num(51200.0), "51200");
    }
}
