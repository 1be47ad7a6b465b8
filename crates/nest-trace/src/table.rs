//! The one table type every metric returns: named columns, typed cells, CSV
//! and HTML output.

use std::fmt;
use std::io::Write;

/// One value of a table.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Int(i64),
    Float(f64),
    Text(String),
}

impl Cell {
    /// The value as a number (text is `None`).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Cell::Int(v) => Some(*v as f64),
            Cell::Float(v) => Some(*v),
            Cell::Text(_) => None,
        }
    }

    /// The value as an integer (floats and text are `None`).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Cell::Int(v) => Some(*v),
            _ => None,
        }
    }
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cell::Int(v) => write!(f, "{v}"),
            Cell::Float(v) => write!(f, "{v}"),
            Cell::Text(v) => write!(f, "{v}"),
        }
    }
}

impl From<u64> for Cell {
    fn from(v: u64) -> Self {
        Cell::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<u32> for Cell {
    fn from(v: u32) -> Self {
        Cell::Int(v.into())
    }
}

impl From<usize> for Cell {
    fn from(v: usize) -> Self {
        Cell::from(v as u64)
    }
}

impl From<i64> for Cell {
    fn from(v: i64) -> Self {
        Cell::Int(v)
    }
}

impl From<f64> for Cell {
    fn from(v: f64) -> Self {
        Cell::Float(v)
    }
}

impl From<&str> for Cell {
    fn from(v: &str) -> Self {
        Cell::Text(v.to_string())
    }
}

impl From<String> for Cell {
    fn from(v: String) -> Self {
        Cell::Text(v)
    }
}

/// Rows under named columns. A column (or, in `metric, value` tables, a
/// row) whose name ends in `_ns` holds times in ns: CSV writes them
/// exactly, text and HTML in human units ([`human_ns`]) under the name
/// without `_ns`.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Short name, also the CSV file stem (`underload` -> `underload.csv`).
    pub name: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
    /// Why the table has no rows when the trace lacks the events it needs
    /// (e.g. "no Frequency events ..."); text and HTML show it instead.
    pub missing: Option<String>,
}

impl Table {
    /// An empty table called `name` with `columns`.
    pub fn new(name: &str, columns: &[&str]) -> Self {
        Self {
            name: name.to_string(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: Vec::new(),
            missing: None,
        }
    }

    /// This table emptied, with `reason` saying which events the trace
    /// lacks, unless `present`.
    pub fn requiring(mut self, present: bool, reason: &str) -> Self {
        if !present {
            self.rows.clear();
            self.missing = Some(reason.to_string());
        }
        self
    }

    /// Append a row; it must have one cell per column.
    pub fn push(&mut self, row: Vec<Cell>) {
        debug_assert_eq!(row.len(), self.columns.len(), "row width in {}", self.name);
        self.rows.push(row);
    }

    /// Index of the column called `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    /// The cell of row `row` in the column called `column`.
    pub fn get(&self, row: usize, column: &str) -> Option<&Cell> {
        self.rows.get(row)?.get(self.column(column)?)
    }

    /// All values of the column called `column`, as numbers (text as NaN).
    pub fn numbers(&self, column: &str) -> Vec<f64> {
        let Some(i) = self.column(column) else {
            return Vec::new();
        };
        self.rows
            .iter()
            .map(|r| r[i].as_f64().unwrap_or(f64::NAN))
            .collect()
    }

    /// Write the table as CSV (RFC 4180 quoting).
    pub fn write_csv(&self, mut out: impl Write) -> std::io::Result<()> {
        writeln!(out, "{}", csv_line(self.columns.iter().map(String::as_str)))?;
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(Cell::to_string).collect();
            writeln!(out, "{}", csv_line(cells.iter().map(String::as_str)))?;
        }
        Ok(())
    }

    /// The table as CSV text.
    pub fn to_csv(&self) -> String {
        let mut buf = Vec::new();
        self.write_csv(&mut buf).expect("writing to memory");
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// Column names and cells as people read them: times in ns in human
    /// units under names without `_ns`, floats with 3 decimals.
    fn human(&self) -> (Vec<String>, Vec<Vec<String>>) {
        let columns = self
            .columns
            .iter()
            .map(|c| unitless(c).to_string())
            .collect();
        let rows = self
            .rows
            .iter()
            .map(|row| {
                let row_label_ns = matches!(row.first(), Some(Cell::Text(t)) if t.ends_with("_ns"));
                row.iter()
                    .zip(&self.columns)
                    .enumerate()
                    .map(|(i, (cell, column))| match cell {
                        Cell::Int(v) if row_label_ns || column.ends_with("_ns") => human_ns(*v),
                        Cell::Float(v) => format!("{v:.3}"),
                        Cell::Text(t) if i == 0 && row_label_ns => unitless(t).to_string(),
                        other => other.to_string(),
                    })
                    .collect()
            })
            .collect();
        (columns, rows)
    }

    /// The table as an HTML `<table>` for people ([`Table::human`]), or
    /// the reason it is empty.
    pub fn to_html(&self) -> String {
        if let Some(reason) = &self.missing {
            return format!("<p class=\"missing\">{}</p>\n", escape(reason));
        }
        let (columns, rows) = self.human();
        let mut s = String::from("<table>\n<tr>");
        for c in &columns {
            s.push_str(&format!("<th>{}</th>", escape(c)));
        }
        s.push_str("</tr>\n");
        for row in &rows {
            s.push_str("<tr>");
            for text in row {
                s.push_str(&format!("<td>{}</td>", escape(text)));
            }
            s.push_str("</tr>\n");
        }
        s.push_str("</table>\n");
        s
    }

    /// The table as aligned text for people ([`Table::human`]): the first
    /// column left, the others right; or the reason it is empty.
    pub fn to_text(&self) -> String {
        if let Some(reason) = &self.missing {
            return format!("{reason}\n");
        }
        let (columns, rows) = self.human();
        let mut widths: Vec<usize> = columns.iter().map(|c| c.chars().count()).collect();
        for row in &rows {
            for (w, text) in widths.iter_mut().zip(row) {
                *w = (*w).max(text.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (text, &w))| {
                    if i > 0 {
                        format!("{text:>w$}")
                    } else {
                        format!("{text:<w$}")
                    }
                })
                .collect();
            padded.join("  ").trim_end().to_string() + "\n"
        };
        let mut s = line(&columns);
        for row in &rows {
            s.push_str(&line(row));
        }
        s
    }
}

/// `name` without a trailing `_ns`.
fn unitless(name: &str) -> &str {
    name.strip_suffix("_ns").unwrap_or(name)
}

/// A time in ns for people: `950 ns`, `12.500 us`, `3.042 ms`, `1.250 s`.
pub fn human_ns(ns: i64) -> String {
    let size = ns.unsigned_abs();
    let (scale, unit) = match size {
        0..1_000 => return format!("{ns} ns"),
        1_000..1_000_000 => (1e3, "us"),
        1_000_000..1_000_000_000 => (1e6, "ms"),
        _ => (1e9, "s"),
    };
    format!("{:.3} {unit}", ns as f64 / scale)
}

fn csv_line<'a>(cells: impl Iterator<Item = &'a str>) -> String {
    cells
        .map(|c| {
            if c.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", c.replace('"', "\"\""))
            } else {
                c.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Escape text for HTML and SVG.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_what_needs_quoting() {
        let mut t = Table::new("t", &["pid", "comm", "share"]);
        t.push(vec![1u32.into(), "a,\"b\"".into(), 0.5.into()]);
        assert_eq!(t.to_csv(), "pid,comm,share\n1,\"a,\"\"b\"\"\",0.5\n");
        assert_eq!(t.get(0, "share"), Some(&Cell::Float(0.5)));
        assert_eq!(t.numbers("pid"), vec![1.0]);
        assert!(t.to_html().contains("<td>a,&quot;b&quot;</td>"));
    }

    #[test]
    fn people_read_times_in_human_units_and_csv_keeps_ns() {
        let mut t = Table::new("latency", &["count", "p50_ns"]);
        t.push(vec![3u32.into(), 12_500u64.into()]);
        assert_eq!(t.to_csv(), "count,p50_ns\n3,12500\n");
        assert_eq!(t.to_text(), "count        p50\n3      12.500 us\n");
        assert!(
            t.to_html()
                .contains("<th>p50</th></tr>\n<tr><td>3</td><td>12.500 us</td>")
        );
        let mut summary = Table::new("summary", &["metric", "value"]);
        summary.push(vec!["busy_ns".into(), 3_042_000u64.into()]);
        summary.push(vec!["cpus".into(), 2u32.into()]);
        assert_eq!(
            summary.to_text(),
            "metric     value\nbusy    3.042 ms\ncpus           2\n"
        );
        assert_eq!(human_ns(950), "950 ns");
        assert_eq!(human_ns(-1_250_000_000), "-1.250 s");
    }

    #[test]
    fn a_table_lacking_its_events_says_so_instead_of_zeros() {
        let mut t = Table::new("wakeup_latency", &["count", "p50_ns"]);
        t.push(vec![0u32.into(), 0u64.into()]);
        let t = t.requiring(false, "no Wakeup events in this trace");
        assert!(t.rows.is_empty());
        assert_eq!(t.to_text(), "no Wakeup events in this trace\n");
        assert_eq!(t.to_csv(), "count,p50_ns\n");
        assert!(t.to_html().contains("no Wakeup events in this trace"));
    }
}
