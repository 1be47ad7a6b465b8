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

/// Rows under named columns.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Short name, also the CSV file stem (`underload` -> `underload.csv`).
    pub name: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    /// An empty table called `name` with `columns`.
    pub fn new(name: &str, columns: &[&str]) -> Self {
        Self {
            name: name.to_string(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: Vec::new(),
        }
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

    /// The table as an HTML `<table>` (floats with 3 decimals).
    pub fn to_html(&self) -> String {
        let mut s = String::from("<table>\n<tr>");
        for c in &self.columns {
            s.push_str(&format!("<th>{}</th>", escape(c)));
        }
        s.push_str("</tr>\n");
        for row in &self.rows {
            s.push_str("<tr>");
            for cell in row {
                let text = match cell {
                    Cell::Float(v) => format!("{v:.3}"),
                    other => other.to_string(),
                };
                s.push_str(&format!("<td>{}</td>", escape(&text)));
            }
            s.push_str("</tr>\n");
        }
        s.push_str("</table>\n");
        s
    }
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
}
