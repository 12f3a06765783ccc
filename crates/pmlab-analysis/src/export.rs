//! Export: one CSV and one Parquet file per table into a directory
//! (`pmlab analyze FILE --export DIR`), for pandas, polars and DuckDB.

use crate::parquet;
use crate::table::{Cell, Table};
use std::path::{Path, PathBuf};

/// Write `DIR/<table>.csv` for each table; returns the paths written.
pub fn write_csv(dir: &Path, tables: &[Table]) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut out = Vec::new();
    for t in tables {
        let p = dir.join(format!("{}.csv", t.name));
        std::fs::write(&p, t.to_csv())?;
        out.push(p);
    }
    Ok(out)
}

/// Write `DIR/<table>.parquet` for each table; returns the paths written.
pub fn write_parquet(dir: &Path, tables: &[Table]) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut out = Vec::new();
    for t in tables {
        let p = dir.join(format!("{}.parquet", t.name));
        parquet::write(&p, &to_parquet(t))?;
        out.push(p);
    }
    Ok(out)
}

/// The type of an exported column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// Whole numbers.
    Int64,
    /// Floating-point numbers.
    Double,
    /// Text.
    Utf8,
}

/// Column `i`'s type from its cells: integers stay INT64, any float makes it DOUBLE, any
/// string (or no value at all) makes it UTF8 (numbers then written as text); empty cells
/// are nulls. Parquet and the Python tables (`pmlab.analyze`) both follow it.
pub fn column_type(t: &Table, i: usize) -> ColumnType {
    let cells = || t.rows.iter().map(|r| r.get(i).unwrap_or(&Cell::Empty));
    let has = |f: fn(&Cell) -> bool| cells().any(f);
    if has(|c| matches!(c, Cell::Str(_))) || !has(|c| !matches!(c, Cell::Empty)) {
        ColumnType::Utf8
    } else if has(|c| matches!(c, Cell::Float(_))) {
        ColumnType::Double
    } else {
        ColumnType::Int64
    }
}

/// A table as Parquet columns, typed by [`column_type`].
pub fn to_parquet(t: &Table) -> parquet::Table {
    let mut pt = parquet::Table::new();
    for (i, name) in t.columns.iter().enumerate() {
        let cells: Vec<&Cell> = t
            .rows
            .iter()
            .map(|r| r.get(i).unwrap_or(&Cell::Empty))
            .collect();
        let column = match column_type(t, i) {
            ColumnType::Utf8 => parquet::Column::Utf8(
                cells
                    .iter()
                    .map(|c| (!matches!(c, Cell::Empty)).then(|| c.csv()))
                    .collect(),
            ),
            ColumnType::Double => parquet::Column::Double(cells.iter().map(|c| c.num()).collect()),
            ColumnType::Int64 => parquet::Column::Int64(
                cells
                    .iter()
                    .map(|c| match c {
                        Cell::Int(v) => Some(*v),
                        _ => None,
                    })
                    .collect(),
            ),
        };
        pt.push(name.clone(), column);
    }
    pt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_types_follow_the_cells() {
        let mut t = Table::new("t", "T", &["cpu", "state", "ms", "gap"], 2);
        t.rows.push(vec![
            Cell::Int(0),
            Cell::Str("C1".into()),
            Cell::Float(1.5),
            Cell::Empty,
        ]);
        t.rows.push(vec![
            Cell::Int(1),
            Cell::Str("C1".into()),
            Cell::Int(2),
            Cell::Empty,
        ]);
        let p = to_parquet(&t);
        assert_eq!(p.rows(), 2);
        let bytes = parquet::to_bytes(&p).unwrap();
        assert_eq!(&bytes[..4], b"PAR1");
        let dir = tempfile::tempdir().unwrap();
        let files = write_parquet(dir.path(), &[t]).unwrap();
        assert_eq!(files.len(), 1);
        assert!(files[0].ends_with("t.parquet"));
    }
}
