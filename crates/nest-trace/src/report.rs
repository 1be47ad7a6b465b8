//! Self-contained HTML reports: one trace, or two side by side.
//!
//! A report holds the trace's meta entries, a summary table, the pictures of
//! [`crate::svg`] inline, and the metric tables (long ones folded).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;

use crate::metrics::{self, FreqBands, IntervalStats};
use crate::model::{EventKind, Trace};
use crate::svg;
use crate::table::{Cell, Table, escape};
use crate::timeline::Timeline;

/// Knobs of an analysis.
#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// Interval length of the interval metrics (default 4 ms, one tick at
    /// 250 Hz, the Nest paper's time unit).
    pub interval_ns: u64,
    /// Shortest work-conservation violation counted (default 1 ms).
    pub wc_min_ns: u64,
    /// Frequency bands; `None` means [`FreqBands::for_trace`].
    pub bands: Option<FreqBands>,
}

impl Default for ReportOptions {
    fn default() -> Self {
        Self {
            interval_ns: 4_000_000,
            wc_min_ns: 1_000_000,
            bands: None,
        }
    }
}

/// What a metric table says instead of zeros when the trace lacks the
/// events it is computed from.
const NO_SWITCH: &str = "no sched_switch events in this trace (record sched:sched_switch)";
const NO_WAKEUP: &str =
    "no sched_wakeup or sched_waking events in this trace (record sched:sched_wakeup)";
const NO_MIGRATE: &str =
    "no sched_migrate_task events in this trace (record sched:sched_migrate_task)";
const NO_FREQUENCY: &str = "no cpu_frequency events in this trace (record on a machine with \
     cpufreq: nest trace record samples it every --freq-period; QEMU guests have none)";
const NO_NEST: &str = "no NestChange or WarmSpin events in this trace (`nest sim` traces have \
     them; a recording has the nests when `scx_nest --trace-nests` ran)";

const NO_PLACEMENT: &str = "no Placement events in this trace (`nest sim` traces of Nest have \
     them; a recording has them when `scx_nest --trace-placements` ran)";

/// Everything a report shows about one trace.
pub struct Analysis {
    pub name: String,
    pub meta: Vec<(String, String)>,
    pub stats: Vec<IntervalStats>,
    /// Headline numbers: columns `metric, value`.
    pub summary: Table,
    /// All metric tables.
    pub tables: Vec<Table>,
    /// `(file stem, SVG text)` of each picture.
    pub pictures: Vec<(String, String)>,
}

/// Compute every metric and picture of `trace`.
pub fn analyse(trace: &Trace, name: &str, opts: &ReportOptions) -> Analysis {
    let tl = Timeline::build(trace);
    let bands = opts
        .bands
        .clone()
        .unwrap_or_else(|| FreqBands::for_trace(trace));
    let stats = metrics::interval_stats(&tl, opts.interval_ns);
    let has = |wanted: fn(&EventKind) -> bool| trace.events.iter().any(|e| wanted(&e.kind));
    let switches = has(|k| matches!(k, EventKind::Switch { .. }));
    let wakeups = has(|k| matches!(k, EventKind::Wakeup { .. }));
    let migrations = has(|k| matches!(k, EventKind::Migrate { .. }));
    let frequencies = has(|k| matches!(k, EventKind::Frequency { .. }));
    let nest_events =
        has(|k| matches!(k, EventKind::NestChange { .. } | EventKind::WarmSpin { .. }));
    let placements = has(|k| matches!(k, EventKind::Placement { .. }));
    let residency = metrics::frequency_residency(&tl, &bands).requiring(frequencies, NO_FREQUENCY);
    let tables = vec![
        metrics::work_conservation_summary(&tl, opts.wc_min_ns).requiring(switches, NO_SWITCH),
        metrics::wakeup_latency(&tl).requiring(wakeups, NO_WAKEUP),
        residency.clone(),
        metrics::underload(&tl, opts.interval_ns).requiring(switches, NO_SWITCH),
        metrics::cpus_used(&tl, opts.interval_ns).requiring(switches, NO_SWITCH),
        metrics::concurrency(&tl, opts.interval_ns).requiring(switches, NO_SWITCH),
        metrics::work_conservation(&tl, opts.wc_min_ns).requiring(switches, NO_SWITCH),
        metrics::task_times(&tl).requiring(switches, NO_SWITCH),
        metrics::migrations(&tl).requiring(migrations, NO_MIGRATE),
        metrics::smt_sharing(&tl).requiring(switches, NO_SWITCH),
        metrics::nest_activity(&tl).requiring(nest_events, NO_NEST),
        metrics::placement_steps_table(trace).requiring(placements, NO_PLACEMENT),
    ];
    let mut pictures = vec![
        ("run_queue_heatmap".to_string(), svg::run_queue_heatmap(&tl)),
        (
            "cpus_vs_concurrency".to_string(),
            svg::cpus_vs_concurrency(&stats, "CPUs used and tasks running at once"),
        ),
    ];
    if let Some(freq) = svg::frequency_heatmap(&tl) {
        pictures.push(("frequency_heatmap".to_string(), freq));
        let bars = svg::residency_bars(&residency, "Share of busy time per frequency band");
        pictures.push(("frequency_residency".to_string(), bars));
    }
    if let Some(nest) = svg::nest_heatmap(&tl) {
        pictures.push(("nest_heatmap".to_string(), nest));
    }
    Analysis {
        name: name.to_string(),
        meta: trace.meta.clone(),
        summary: summary(trace, &tl, &stats, &tables),
        stats,
        tables,
        pictures,
    }
}

/// All metric tables of an analysis of `trace` (for `nest trace metrics`).
pub fn all_tables(trace: &Trace, opts: &ReportOptions) -> Vec<Table> {
    let a = analyse(trace, "", opts);
    let mut tables = vec![a.summary];
    tables.extend(a.tables);
    tables
}

fn summary(trace: &Trace, tl: &Timeline, stats: &[IntervalStats], tables: &[Table]) -> Table {
    let mut t = Table::new("summary", &["metric", "value"]);
    let mean = |f: &dyn Fn(&IntervalStats) -> f64| {
        stats.iter().map(f).sum::<f64>() / stats.len().max(1) as f64
    };
    let cell = |name: &str, col: &str| {
        tables
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.get(0, col).cloned())
            .unwrap_or_else(|| Cell::Text("n/a".to_string()))
    };
    let busy: u64 = tl.runs.iter().map(|r| r.end - r.start).sum();
    let rows: Vec<(&str, Cell)> = vec![
        ("duration_ns", tl.end_ns.into()),
        ("events", trace.events.len().into()),
        ("cpus", tl.nr_cpus.into()),
        (
            "tasks_run",
            tl.runs
                .iter()
                .map(|r| r.pid)
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                .into(),
        ),
        ("busy_ns", busy.into()),
        ("mean_cpus_used", mean(&|s| f64::from(s.cpus_used)).into()),
        ("mean_cores_used", mean(&|s| f64::from(s.cores_used)).into()),
        (
            "mean_sockets_used",
            mean(&|s| f64::from(s.sockets_used)).into(),
        ),
        ("mean_concurrency", mean(&|s| s.avg_concurrency).into()),
        (
            "max_concurrency",
            stats
                .iter()
                .map(|s| s.max_concurrency)
                .max()
                .unwrap_or(0)
                .into(),
        ),
        ("mean_underload", mean(&|s| f64::from(s.underload)).into()),
        (
            "wc_violations",
            cell("work_conservation_summary", "violations"),
        ),
        ("wc_total_ns", cell("work_conservation_summary", "total_ns")),
        (
            "wc_longest_ns",
            cell("work_conservation_summary", "longest_ns"),
        ),
        ("wakeups", cell("wakeup_latency", "count")),
        ("wakeup_p50_ns", cell("wakeup_latency", "p50_ns")),
        ("wakeup_p99_ns", cell("wakeup_latency", "p99_ns")),
        ("wakeup_max_ns", cell("wakeup_latency", "max_ns")),
        ("migrations", tl.migrations.values().sum::<u64>().into()),
        ("smt_needless_share", cell("smt_sharing", "needless_share")),
    ];
    for (k, v) in rows {
        t.push(vec![k.into(), v]);
    }
    t
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;max-width:1900px}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;\
text-align:right}th{background:#f0f0f0}td:first-child{text-align:left}\
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em}svg{max-width:100%;height:auto}";

/// An HTML page of the project's reports: `title` as its heading, then
/// `body`, with the reports' style (tables, `.pair` for figures side by
/// side).
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>{STYLE}</style></head><body>\n<h1>{t}</h1>\n{body}</body></html>\n",
        t = escape(title)
    )
}

fn meta_table(meta: &[(String, String)]) -> String {
    let mut t = Table::new("meta", &["key", "value"]);
    for (k, v) in meta {
        t.push(vec![k.as_str().into(), v.as_str().into()]);
    }
    t.to_html()
}

fn tables_html(tables: &[Table]) -> String {
    let mut s = String::new();
    for t in tables {
        let _ = writeln!(s, "<h3>{}</h3>", escape(&t.name));
        if t.rows.len() > 20 {
            let _ = writeln!(
                s,
                "<details><summary>{} rows</summary>{}</details>",
                t.rows.len(),
                t.to_html()
            );
        } else {
            s.push_str(&t.to_html());
        }
    }
    s
}

/// A self-contained HTML report of one analysis.
pub fn html_report(a: &Analysis) -> String {
    let mut body = String::new();
    let _ = write!(body, "<h2>Run</h2>\n{}", meta_table(&a.meta));
    let _ = write!(body, "<h2>Summary</h2>\n{}", a.summary.to_html());
    body.push_str("<h2>Pictures</h2>\n");
    for (_, svg) in &a.pictures {
        let _ = writeln!(body, "<div>{svg}</div>");
    }
    let _ = write!(body, "<h2>Metrics</h2>\n{}", tables_html(&a.tables));
    page(&format!("nest trace report: {}", a.name), &body)
}

/// A side-by-side HTML comparison of two analyses (e.g. default vs Nest):
/// summaries in one table with the difference `b - a`, pictures in two
/// columns.
pub fn html_compare(a: &Analysis, b: &Analysis) -> String {
    let mut body = String::new();
    let _ = write!(body, "<h2>Summary</h2>\n{}", compare_table(a, b).to_html());
    body.push_str("<h2>Pictures</h2>\n");
    let _ = writeln!(
        body,
        "<div class=\"pair\"><h3>{}</h3><h3>{}</h3>",
        escape(&a.name),
        escape(&b.name)
    );
    for (stem, svg_a) in &a.pictures {
        let svg_b = b
            .pictures
            .iter()
            .find(|(s, _)| s == stem)
            .map_or("", |(_, s)| s);
        let _ = writeln!(body, "<div>{svg_a}</div><div>{svg_b}</div>");
    }
    body.push_str("</div>\n<h2>Runs</h2>\n<div class=\"pair\">");
    let _ = writeln!(
        body,
        "<div>{}</div><div>{}</div></div>",
        meta_table(&a.meta),
        meta_table(&b.meta)
    );
    body.push_str("<h2>Metrics</h2>\n<div class=\"pair\">");
    let _ = writeln!(
        body,
        "<div>{}</div><div>{}</div></div>",
        tables_html(&a.tables),
        tables_html(&b.tables)
    );
    page(&format!("nest trace: {} vs {}", a.name, b.name), &body)
}

/// Summary rows of two analyses side by side: `metric, <a>, <b>, diff`.
pub fn compare_table(a: &Analysis, b: &Analysis) -> Table {
    let mut t = Table::new("compare", &["metric", &a.name, &b.name, "diff"]);
    for (i, row) in a.summary.rows.iter().enumerate() {
        let va = &row[1];
        let vb = b
            .summary
            .rows
            .get(i)
            .map_or(Cell::Text(String::new()), |r| r[1].clone());
        let diff = match (va, &vb) {
            (Cell::Int(x), Cell::Int(y)) => Cell::Int(y - x),
            _ => match (va.as_f64(), vb.as_f64()) {
                (Some(x), Some(y)) => Cell::Float(y - x),
                _ => Cell::Text(String::new()),
            },
        };
        t.push(vec![row[0].clone(), va.clone(), vb, diff]);
    }
    t
}

/// Write every picture of `a` as `<dir>/<stem>.svg`, and as PNG too when
/// `png` is set.
pub fn write_pictures(a: &Analysis, dir: &Path, png: bool) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (stem, text) in &a.pictures {
        let path = dir.join(format!("{stem}.svg"));
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        if png {
            svg::write_png(text, &dir.join(format!("{stem}.png")))?;
        }
    }
    Ok(())
}

/// Write each table as `<dir>/<name>.csv`.
pub fn write_csvs(tables: &[Table], dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for t in tables {
        let path = dir.join(format!("{}.csv", t.name));
        let file = std::fs::File::create(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        t.write_csv(std::io::BufWriter::new(file))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
