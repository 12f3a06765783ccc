//! `Table`: the tabular form every analysis report offers, for terminal rendering, CSV
//! export and `--baseline` differences. The first `keys` columns identify a row.

use serde::Serialize;

/// One table cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Cell {
    /// Text.
    Str(String),
    /// A whole number.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// No value (printed empty, null in JSON).
    Empty,
}

impl Cell {
    /// The number in the cell (integers as floats); None for text and empty cells.
    pub fn num(&self) -> Option<f64> {
        match self {
            Cell::Int(v) => Some(*v as f64),
            Cell::Float(v) => Some(*v),
            _ => None,
        }
    }
    /// Text for people: floats with `prec` decimals.
    pub fn text(&self, prec: usize) -> String {
        match self {
            Cell::Str(s) => s.clone(),
            Cell::Int(v) => v.to_string(),
            Cell::Float(v) if v.is_finite() => format!("{v:.prec$}"),
            Cell::Float(v) => v.to_string(),
            Cell::Empty => String::new(),
        }
    }
    /// Text for CSV: full precision, empty for Empty.
    pub fn csv(&self) -> String {
        match self {
            Cell::Float(v) => v.to_string(),
            c => c.text(0),
        }
    }
}

impl From<&str> for Cell {
    fn from(s: &str) -> Cell {
        Cell::Str(s.to_string())
    }
}
impl From<String> for Cell {
    fn from(s: String) -> Cell {
        Cell::Str(s)
    }
}
impl From<u64> for Cell {
    fn from(v: u64) -> Cell {
        Cell::Int(v as i64)
    }
}
impl From<u32> for Cell {
    fn from(v: u32) -> Cell {
        Cell::Int(v as i64)
    }
}
impl From<i64> for Cell {
    fn from(v: i64) -> Cell {
        Cell::Int(v)
    }
}
impl From<usize> for Cell {
    fn from(v: usize) -> Cell {
        Cell::Int(v as i64)
    }
}
impl From<f64> for Cell {
    fn from(v: f64) -> Cell {
        Cell::Float(v)
    }
}
impl<T: Into<Cell>> From<Option<T>> for Cell {
    fn from(v: Option<T>) -> Cell {
        v.map(Into::into).unwrap_or(Cell::Empty)
    }
}

/// A table of an analysis report: named columns, rows of cells.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Table {
    /// File-name-safe identifier (`idle_states`), unique within one `pmlab analyze` run.
    pub name: String,
    /// Title for people.
    pub title: String,
    /// Column names.
    pub columns: Vec<String>,
    /// The first `keys` columns identify a row (for `--baseline`).
    pub keys: usize,
    /// The rows, each with one cell per column.
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    /// An empty table with these columns; the first `keys` identify a row.
    pub fn new(name: &str, title: &str, columns: &[&str], keys: usize) -> Table {
        Table {
            name: name.into(),
            title: title.into(),
            columns: columns.iter().map(|s| s.to_string()).collect(),
            keys,
            rows: Vec::new(),
        }
    }
    /// Append a row (one cell per column).
    pub fn row(&mut self, cells: Vec<Cell>) {
        debug_assert_eq!(cells.len(), self.columns.len(), "{}", self.name);
        self.rows.push(cells);
    }
    /// The column index of `name`.
    pub fn col(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }
    /// The row whose key cells render as `key` (joined with '/').
    pub fn find(&self, key: &[&str]) -> Option<&Vec<Cell>> {
        self.rows.iter().find(|r| {
            r.iter()
                .take(self.keys)
                .map(|c| c.text(0))
                .eq(key.iter().map(|s| s.to_string()))
        })
    }
    /// CSV text (RFC 4180 quoting, by the `csv` crate): a header line, then one line per row.
    pub fn to_csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        let rows = std::iter::once(self.columns.clone())
            .chain(self.rows.iter().map(|r| r.iter().map(Cell::csv).collect()));
        for r in rows {
            w.write_record(&r).expect("writing to memory does not fail");
        }
        let bytes = w.into_inner().expect("writing to memory does not fail");
        String::from_utf8(bytes).expect("the cells are text")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn csv_quotes_and_finds_rows() {
        let mut t = Table::new("t", "T", &["cpu", "name", "v"], 2);
        t.row(vec![0u32.into(), "a,b".into(), 1.5.into()]);
        t.row(vec![1u32.into(), "c".into(), Cell::Empty]);
        t.row(vec![
            2u32.into(),
            "say \"hi\"\nthere".into(),
            Cell::Float(-0.25),
        ]);
        assert_eq!(
            t.to_csv(),
            "cpu,name,v\n0,\"a,b\",1.5\n1,c,\n2,\"say \"\"hi\"\"\nthere\",-0.25\n"
        );
        assert_eq!(t.find(&["1", "c"]).unwrap()[2], Cell::Empty);
        assert!(t.find(&["2", "c"]).is_none());
    }
}
