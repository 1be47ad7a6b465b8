//! Pictures as SVG text, drawn by hand from the [`Timeline`] and metric
//! tables, and PNG rendering of them with `resvg`.
//!
//! - [`run_queue_heatmap`]: CPUs (rows, grouped by socket) x time; colour is
//!   the run-queue length that lasted longest in each time bin: 0 (idle,
//!   light grey), 1 (green), more than 1 (red); white while unknown.
//! - [`frequency_heatmap`]: the same grid, colour is the time-weighted mean
//!   frequency of the bin from blue (lowest seen) to red (highest seen).
//! - [`cpus_vs_concurrency`]: CPUs used and average concurrency per
//!   interval; the gap between the lines is the underload.
//! - [`residency_bars`]: share of busy time per frequency band.
//! - [`nest_heatmap`]: primary / reserve nest membership of each CPU.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use anyhow::Context;

use crate::metrics::IntervalStats;
use crate::model::Cpu;
use crate::table::{Table, escape};
use crate::timeline::{Step, Timeline};

const LEFT: f64 = 110.0;
const TOP: f64 = 30.0;
const PLOT_W: f64 = 900.0;
const BINS: usize = 450;
const IDLE: &str = "#e6e6e6";
const ONE: &str = "#4c9f70";
const MANY: &str = "#d1495b";

/// A duration in ns, written for people (`850 ns`, `12.5 ms`, `3.20 s`).
pub fn fmt_ns(ns: u64) -> String {
    let v = ns as f64;
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.1} µs", v / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} ms", v / 1e6),
        _ => format!("{:.2} s", v / 1e9),
    }
}

fn open_svg(w: f64, h: f64, title: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n\
         <text x=\"{LEFT}\" y=\"18\" font-size=\"13\" font-weight=\"bold\">{}</text>\n",
        escape(title)
    )
}

fn text(s: &mut String, x: f64, y: f64, anchor: &str, t: &str) {
    let _ = writeln!(
        s,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\">{}</text>",
        escape(t)
    );
}

fn rect(s: &mut String, x: f64, y: f64, w: f64, h: f64, fill: &str) {
    let _ = writeln!(
        s,
        "<rect x=\"{x:.2}\" y=\"{y:.2}\" width=\"{w:.2}\" height=\"{h:.2}\" fill=\"{fill}\"/>"
    );
}

/// CPUs ordered by socket, then number.
fn cpu_rows(tl: &Timeline) -> Vec<Cpu> {
    let mut cpus: Vec<Cpu> = (0..tl.nr_cpus as Cpu).collect();
    cpus.sort_by_key(|&c| (tl.socket(c), c));
    cpus
}

/// Walk a step function over `[0, end)` cut into `bins` equal bins, calling
/// `f(bin, value, duration)` for every piece (`None` before the first step).
fn walk_bins(steps: &[Step], end: u64, bins: usize, mut f: impl FnMut(usize, Option<u32>, u64)) {
    if end == 0 {
        return;
    }
    let edge = |k: usize| (k as u128 * end as u128 / bins as u128) as u64;
    let mut segments: Vec<(u64, u64, Option<u32>)> = Vec::new();
    let first = steps.first().map_or(end, |s| s.ts.min(end));
    segments.push((0, first, None));
    for (i, s) in steps.iter().enumerate() {
        let stop = steps.get(i + 1).map_or(end, |n| n.ts).min(end);
        segments.push((s.ts.min(end), stop, Some(s.value)));
    }
    for (a, b, v) in segments.into_iter().filter(|(a, b, _)| b > a) {
        let mut k = ((a as u128 * bins as u128) / end as u128) as usize;
        while k < bins && edge(k) < b {
            let overlap = b.min(edge(k + 1)).saturating_sub(a.max(edge(k)));
            if overlap > 0 {
                f(k, v, overlap);
            }
            k += 1;
        }
    }
}

/// Grid rows: one per CPU, grouped by socket, with labels and separators.
struct Grid {
    svg: String,
    row_h: f64,
    bin_w: f64,
}

impl Grid {
    fn new(tl: &Timeline, title: &str) -> Self {
        let rows = tl.nr_cpus.max(1) as f64;
        let row_h = (480.0 / rows).clamp(3.0, 22.0);
        let h = TOP + rows * row_h + 60.0;
        Self {
            svg: open_svg(LEFT + PLOT_W + 20.0, h, title),
            row_h,
            bin_w: PLOT_W / BINS as f64,
        }
    }

    fn bottom(&self, tl: &Timeline) -> f64 {
        TOP + tl.nr_cpus as f64 * self.row_h
    }

    /// Draw one CPU row from per-bin colours, merging equal neighbours.
    fn row(&mut self, i: usize, colours: &[Option<String>]) {
        let y = TOP + i as f64 * self.row_h;
        let mut k = 0;
        while k < colours.len() {
            let run = colours[k..]
                .iter()
                .take_while(|c| **c == colours[k])
                .count();
            if let Some(c) = &colours[k] {
                let x = LEFT + k as f64 * self.bin_w;
                rect(&mut self.svg, x, y, run as f64 * self.bin_w, self.row_h, c);
            }
            k += run;
        }
    }

    fn labels(&mut self, tl: &Timeline, rows: &[Cpu]) {
        let every = (12.0 / self.row_h).ceil().max(1.0) as usize;
        for (i, &cpu) in rows.iter().enumerate() {
            let y = TOP + (i as f64 + 0.8) * self.row_h;
            let new_socket = i == 0 || tl.socket(rows[i - 1]) != tl.socket(cpu);
            if new_socket {
                let y0 = TOP + i as f64 * self.row_h;
                let _ = writeln!(
                    self.svg,
                    "<line x1=\"4\" y1=\"{y0:.1}\" x2=\"{:.1}\" y2=\"{y0:.1}\" stroke=\"black\" stroke-width=\"0.6\"/>",
                    LEFT + PLOT_W
                );
                text(
                    &mut self.svg,
                    4.0,
                    y0 + 10.0,
                    "start",
                    &format!("socket {}", tl.socket(cpu)),
                );
            }
            if i % every == 0 && !(new_socket && self.row_h < 12.0) {
                text(&mut self.svg, LEFT - 4.0, y, "end", &format!("cpu {cpu}"));
            }
        }
        self.time_axis(tl.end_ns, self.bottom(tl));
    }

    fn time_axis(&mut self, end: u64, y: f64) {
        time_axis(&mut self.svg, end, y);
    }

    fn legend(&mut self, y: f64, items: &[(&str, &str)]) {
        let mut x = LEFT;
        for (colour, label) in items {
            rect(&mut self.svg, x, y - 9.0, 10.0, 10.0, colour);
            text(&mut self.svg, x + 14.0, y, "start", label);
            x += 24.0 + 7.0 * label.len() as f64;
        }
    }

    fn finish(mut self) -> String {
        self.svg.push_str("</svg>\n");
        self.svg
    }
}

fn time_axis(svg: &mut String, end: u64, y: f64) {
    let _ = writeln!(
        svg,
        "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"black\"/>",
        LEFT + PLOT_W
    );
    for i in 0..=5 {
        let x = LEFT + PLOT_W * i as f64 / 5.0;
        let t = (end as u128 * i as u128 / 5) as u64;
        let anchor = if i == 5 { "end" } else { "middle" };
        text(svg, x, y + 14.0, anchor, &fmt_ns(t));
    }
}

/// Run-queue heatmap: CPUs x time, colour = run-queue length class that
/// lasted longest in each bin (0 / 1 / >1).
pub fn run_queue_heatmap(tl: &Timeline) -> String {
    let mut g = Grid::new(tl, "Run-queue length per CPU over time");
    let rows = cpu_rows(tl);
    for (i, &cpu) in rows.iter().enumerate() {
        let mut time = vec![[0u64; 3]; BINS];
        walk_bins(&tl.rq_len[cpu as usize], tl.end_ns, BINS, |k, v, d| {
            if let Some(v) = v {
                time[k][v.min(2) as usize] += d;
            }
        });
        let colours: Vec<Option<String>> = time
            .iter()
            .map(|t| {
                let best = (0..3).max_by_key(|&c| (t[c], c))?;
                (t[best] > 0).then(|| [IDLE, ONE, MANY][best].to_string())
            })
            .collect();
        g.row(i, &colours);
    }
    g.labels(tl, &rows);
    let y = g.bottom(tl) + 40.0;
    g.legend(
        y,
        &[
            (IDLE, "idle"),
            (ONE, "1 task"),
            (MANY, "more than 1 (tasks waiting)"),
        ],
    );
    g.finish()
}

/// Frequency heatmap: CPUs x time, colour = mean frequency of the bin.
/// `None` when the trace has no frequency events.
pub fn frequency_heatmap(tl: &Timeline) -> Option<String> {
    let all = tl.freq.iter().flatten().map(|s| s.value);
    let (lo, hi) = all.fold(None, |acc: Option<(u32, u32)>, v| {
        Some(acc.map_or((v, v), |(a, b)| (a.min(v), b.max(v))))
    })?;
    let mut g = Grid::new(tl, "CPU frequency over time");
    let rows = cpu_rows(tl);
    for (i, &cpu) in rows.iter().enumerate() {
        let mut acc = vec![(0f64, 0u64); BINS];
        walk_bins(&tl.freq[cpu as usize], tl.end_ns, BINS, |k, v, d| {
            if let Some(v) = v {
                acc[k].0 += f64::from(v) * d as f64;
                acc[k].1 += d;
            }
        });
        let colours: Vec<Option<String>> = acc
            .iter()
            .map(|&(sum, d)| (d > 0).then(|| heat(sum / d as f64, lo, hi)))
            .collect();
        g.row(i, &colours);
    }
    g.labels(tl, &rows);
    let y = g.bottom(tl) + 40.0;
    let (l, h) = (
        format!("{:.2} GHz", f64::from(lo) / 1e6),
        format!("{:.2} GHz", f64::from(hi) / 1e6),
    );
    g.legend(
        y,
        &[
            (&heat(f64::from(lo), lo, hi), &l),
            (&heat(f64::from(hi), lo, hi), &h),
        ],
    );
    Some(g.finish())
}

/// Nest membership heatmap: CPUs x time, colour = the nest a CPU was in
/// longest in each bin (primary dark blue, reserve light blue, none white).
/// `None` when the trace has no `NestChange` events.
pub fn nest_heatmap(tl: &Timeline) -> Option<String> {
    if tl.nest.iter().all(Vec::is_empty) {
        return None;
    }
    const COLOURS: [&str; 3] = ["#ffffff", "#9ecae1", "#08519c"];
    let mut g = Grid::new(tl, "Nest membership per CPU over time");
    let rows = cpu_rows(tl);
    for (i, &cpu) in rows.iter().enumerate() {
        let mut time = vec![[0u64; 3]; BINS];
        walk_bins(&tl.nest[cpu as usize], tl.end_ns, BINS, |k, v, d| {
            time[k][v.unwrap_or(0).min(2) as usize] += d;
        });
        let colours: Vec<Option<String>> = time
            .iter()
            .map(|t| {
                let best = (0..3).max_by_key(|&c| (t[c], c))?;
                (best > 0 && t[best] > 0).then(|| COLOURS[best].to_string())
            })
            .collect();
        g.row(i, &colours);
    }
    g.labels(tl, &rows);
    let y = g.bottom(tl) + 40.0;
    g.legend(
        y,
        &[(COLOURS[2], "primary nest"), (COLOURS[1], "reserve nest")],
    );
    Some(g.finish())
}

/// Blue (lo) to yellow to red (hi): the colour of `v` in the scale of the
/// frequency heatmap.
pub fn heat(v: f64, lo: u32, hi: u32) -> String {
    let t = if hi > lo {
        ((v - f64::from(lo)) / f64::from(hi - lo)).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let (a, b, u) = if t < 0.5 {
        ([44.0, 123.0, 182.0], [255.0, 255.0, 191.0], t * 2.0)
    } else {
        ([255.0, 255.0, 191.0], [215.0, 25.0, 28.0], t * 2.0 - 1.0)
    };
    let c: Vec<u8> = (0..3)
        .map(|i| (a[i] + (b[i] - a[i]) * u).round() as u8)
        .collect();
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// One series of the line plot.
type Value = fn(&IntervalStats) -> f64;

/// Line plot of CPUs used and average concurrency per interval.
pub fn cpus_vs_concurrency(stats: &[IntervalStats], title: &str) -> String {
    let h = 300.0;
    let mut svg = open_svg(LEFT + PLOT_W + 20.0, h + TOP + 60.0, title);
    let ymax = stats.iter().map(|s| s.cpus_used).max().unwrap_or(0).max(1) as f64;
    let end = stats.last().map_or(0, |s| s.end_ns);
    let x_of = |t: u64| LEFT + PLOT_W * t as f64 / end.max(1) as f64;
    let y_of = |v: f64| TOP + h - h * v / ymax;
    for i in 0..=4 {
        let v = ymax * i as f64 / 4.0;
        let y = y_of(v);
        let _ = writeln!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#dddddd\"/>",
            LEFT + PLOT_W
        );
        text(&mut svg, LEFT - 4.0, y + 4.0, "end", &format!("{v:.1}"));
    }
    let series: [(&str, &str, Value); 2] = [
        ("#d1495b", "CPUs used", |s| f64::from(s.cpus_used)),
        ("#2c7bb6", "average concurrency", |s| s.avg_concurrency),
    ];
    for (colour, _, value) in &series {
        let mut points = String::new();
        for s in stats {
            let y = y_of(value(s));
            let _ = write!(
                points,
                "{:.1},{y:.1} {:.1},{y:.1} ",
                x_of(s.start_ns),
                x_of(s.end_ns)
            );
        }
        let _ = writeln!(
            svg,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\"/>",
            points.trim_end()
        );
    }
    time_axis(&mut svg, end, TOP + h);
    let mut x = LEFT;
    for (colour, label, _) in &series {
        rect(&mut svg, x, TOP + h + 40.0, 10.0, 10.0, colour);
        text(&mut svg, x + 14.0, TOP + h + 49.0, "start", label);
        x += 160.0;
    }
    svg.push_str("</svg>\n");
    svg
}

/// Horizontal bars of the `share` column of a frequency residency table
/// (the largest share spans the plot).
pub fn residency_bars(table: &Table, title: &str) -> String {
    let bar_h = 20.0;
    let h = TOP + table.rows.len() as f64 * (bar_h + 6.0) + 20.0;
    let mut svg = open_svg(LEFT + PLOT_W + 20.0, h, title);
    let shares = table.numbers("share");
    let top = shares.iter().copied().fold(0.0, f64::max).max(1e-9);
    let band = table.column("band");
    for (i, row) in table.rows.iter().enumerate() {
        let y = TOP + i as f64 * (bar_h + 6.0);
        let label = band.map_or(String::new(), |b| row[b].to_string());
        let share = shares.get(i).copied().unwrap_or(0.0);
        text(&mut svg, LEFT - 4.0, y + 14.0, "end", &label);
        let w = PLOT_W * 0.85 * share / top;
        rect(&mut svg, LEFT, y, w, bar_h, "#2c7bb6");
        let x = LEFT + w + 4.0;
        text(
            &mut svg,
            x,
            y + 14.0,
            "start",
            &format!("{:.1} %", share * 100.0),
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// Render SVG text to a PNG file at its own size, with the system's fonts
/// (from /usr/share/fonts) for labels.
pub fn write_png(svg: &str, path: &Path) -> anyhow::Result<()> {
    let png = render_png(svg)?;
    std::fs::write(path, png).with_context(|| format!("cannot write {}", path.display()))
}

/// Render SVG text to PNG bytes.
pub fn render_png(svg: &str) -> anyhow::Result<Vec<u8>> {
    use resvg::{tiny_skia, usvg};
    static FONTS: OnceLock<Arc<usvg::fontdb::Database>> = OnceLock::new();
    let fontdb = FONTS
        .get_or_init(|| {
            let mut db = usvg::fontdb::Database::new();
            load_fonts(&mut db);
            Arc::new(db)
        })
        .clone();
    let opt = usvg::Options {
        fontdb,
        ..Default::default()
    };
    let tree = usvg::Tree::from_str(svg, &opt).context("cannot parse SVG")?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
        .context("cannot allocate the PNG image")?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.encode_png().context("cannot encode PNG")
}

fn load_fonts(db: &mut resvg::usvg::fontdb::Database) {
    for dir in ["/usr/share/fonts", "/usr/local/share/fonts"] {
        load_font_dir(db, Path::new(dir), 4);
    }
    let sans = db
        .faces()
        .flat_map(|f| f.families.iter().map(|(name, _)| name.clone()))
        .find(|n| n.contains("Sans") && !n.contains("Mono"));
    if let Some(name) = sans {
        db.set_sans_serif_family(name);
    }
}

fn load_font_dir(db: &mut resvg::usvg::fontdb::Database, dir: &Path, depth: u32) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.filter_map(|e| e.ok()).map(|e| e.path()) {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if path.is_dir() && depth > 0 {
            load_font_dir(db, &path, depth - 1);
        } else if matches!(ext, "ttf" | "otf" | "ttc")
            && let Ok(data) = std::fs::read(&path)
        {
            db.load_font_data(data);
        }
    }
}
