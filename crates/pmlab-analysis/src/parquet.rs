//! Parquet export of flat tables (pandas, polars, DuckDB, Arrow), written by the `parquet`
//! crate of arrow-rs.
//!
//! One row group; columns are INT64, DOUBLE, BYTE_ARRAY annotated as strings, or BOOLEAN;
//! a column is REQUIRED when it has no null, else OPTIONAL. Uncompressed, so the file is
//! written without any codec built in.

use parquet::basic::{LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// One column's values; `None` is a null.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    /// 64-bit integers.
    Int64(Vec<Option<i64>>),
    /// 64-bit floats.
    Double(Vec<Option<f64>>),
    /// UTF-8 text.
    Utf8(Vec<Option<String>>),
    /// Booleans.
    Bool(Vec<Option<bool>>),
}

impl Column {
    /// Non-null integers.
    pub fn int64(v: impl IntoIterator<Item = i64>) -> Column {
        Column::Int64(v.into_iter().map(Some).collect())
    }
    /// Non-null doubles.
    pub fn double(v: impl IntoIterator<Item = f64>) -> Column {
        Column::Double(v.into_iter().map(Some).collect())
    }
    /// Non-null strings.
    pub fn utf8<S: Into<String>>(v: impl IntoIterator<Item = S>) -> Column {
        Column::Utf8(v.into_iter().map(|s| Some(s.into())).collect())
    }
    /// Non-null booleans.
    pub fn bool(v: impl IntoIterator<Item = bool>) -> Column {
        Column::Bool(v.into_iter().map(Some).collect())
    }

    /// Number of rows (nulls included).
    pub fn len(&self) -> usize {
        match self {
            Column::Int64(v) => v.len(),
            Column::Double(v) => v.len(),
            Column::Utf8(v) => v.len(),
            Column::Bool(v) => v.len(),
        }
    }

    /// True when the column has no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn has_null(&self) -> bool {
        match self {
            Column::Int64(v) => v.iter().any(Option::is_none),
            Column::Double(v) => v.iter().any(Option::is_none),
            Column::Utf8(v) => v.iter().any(Option::is_none),
            Column::Bool(v) => v.iter().any(Option::is_none),
        }
    }

    /// The column's schema node.
    fn schema(&self, name: &str) -> Result<Type, ParquetError> {
        let (physical, logical) = match self {
            Column::Int64(_) => (PhysicalType::INT64, None),
            Column::Double(_) => (PhysicalType::DOUBLE, None),
            Column::Utf8(_) => (PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
            Column::Bool(_) => (PhysicalType::BOOLEAN, None),
        };
        let repetition = if self.has_null() {
            Repetition::OPTIONAL
        } else {
            Repetition::REQUIRED
        };
        Type::primitive_type_builder(name, physical)
            .with_repetition(repetition)
            .with_logical_type(logical)
            .build()
    }
}

/// The non-null values of a column and, for an OPTIONAL one, its definition levels.
fn values_and_levels<T: Clone>(v: &[Option<T>], optional: bool) -> (Vec<T>, Option<Vec<i16>>) {
    let values = v.iter().flatten().cloned().collect();
    let levels = optional.then(|| v.iter().map(|x| i16::from(x.is_some())).collect());
    (values, levels)
}

/// A flat table: named columns of equal length.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// (name, values) pairs, in column order.
    pub columns: Vec<(String, Column)>,
}

impl Table {
    /// A table with no columns.
    pub fn new() -> Table {
        Table::default()
    }

    /// Append a column (builder style).
    pub fn with(mut self, name: impl Into<String>, column: Column) -> Table {
        self.columns.push((name.into(), column));
        self
    }

    /// Append a column.
    pub fn push(&mut self, name: impl Into<String>, column: Column) {
        self.columns.push((name.into(), column));
    }

    /// Number of rows (of the first column; [`to_bytes`] checks they agree).
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |(_, c)| c.len())
    }
}

/// Write `table` as a Parquet file at `path`.
pub fn write(path: impl AsRef<Path>, table: &Table) -> io::Result<()> {
    std::fs::write(path, to_bytes(table)?)
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn parquet_err(e: ParquetError) -> io::Error {
    io::Error::other(e)
}

/// The Parquet file of `table`, in memory.
pub fn to_bytes(table: &Table) -> io::Result<Vec<u8>> {
    let rows = table.rows();
    if table.columns.is_empty() {
        return Err(invalid("parquet: a table needs at least one column".into()));
    }
    for (name, c) in &table.columns {
        if c.len() != rows {
            return Err(invalid(format!(
                "parquet: column `{name}` has {} rows, the first column {rows}",
                c.len()
            )));
        }
        if table.columns.iter().filter(|(n, _)| n == name).count() > 1 {
            return Err(invalid(format!("parquet: column `{name}` appears twice")));
        }
    }
    let fields = table
        .columns
        .iter()
        .map(|(name, c)| c.schema(name).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()
        .map_err(parquet_err)?;
    let schema = Type::group_type_builder("schema")
        .with_fields(fields)
        .build()
        .map_err(parquet_err)?;
    let props = WriterProperties::builder()
        .set_created_by("pmlab".into())
        .build();
    let mut out = Vec::new();
    let mut writer = SerializedFileWriter::new(&mut out, Arc::new(schema), Arc::new(props))
        .map_err(parquet_err)?;
    let mut group = writer.next_row_group().map_err(parquet_err)?;
    for (_, c) in &table.columns {
        let mut col = group
            .next_column()
            .map_err(parquet_err)?
            .ok_or_else(|| invalid("parquet: more columns than the schema".into()))?;
        let optional = c.has_null();
        match c {
            Column::Int64(v) => {
                let (values, levels) = values_and_levels(v, optional);
                col.typed::<Int64Type>()
                    .write_batch(&values, levels.as_deref(), None)
            }
            Column::Double(v) => {
                let (values, levels) = values_and_levels(v, optional);
                col.typed::<DoubleType>()
                    .write_batch(&values, levels.as_deref(), None)
            }
            Column::Utf8(v) => {
                let (values, levels) = values_and_levels(v, optional);
                let values: Vec<ByteArray> = values
                    .into_iter()
                    .map(|s| ByteArray::from(s.into_bytes()))
                    .collect();
                col.typed::<ByteArrayType>()
                    .write_batch(&values, levels.as_deref(), None)
            }
            Column::Bool(v) => {
                let (values, levels) = values_and_levels(v, optional);
                col.typed::<BoolType>()
                    .write_batch(&values, levels.as_deref(), None)
            }
        }
        .map_err(parquet_err)?;
        col.close().map_err(parquet_err)?;
    }
    group.close().map_err(parquet_err)?;
    writer.close().map_err(parquet_err)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_frame_and_footer_length() {
        let t = Table::new().with("n", Column::int64([1, 2, 3])).with(
            "s",
            Column::Utf8(vec![Some("x".into()), None, Some("z".into())]),
        );
        let b = to_bytes(&t).unwrap();
        assert_eq!(&b[..4], b"PAR1");
        assert_eq!(&b[b.len() - 4..], b"PAR1");
        let n = u32::from_le_bytes(b[b.len() - 8..b.len() - 4].try_into().unwrap()) as usize;
        assert!(n < b.len() - 12);
        assert_eq!(*b.iter().rev().nth(8).unwrap(), 0, "footer ends with STOP");
    }

    #[test]
    fn mismatched_or_duplicate_columns_are_refused() {
        let t = Table::new()
            .with("a", Column::int64([1]))
            .with("b", Column::int64([1, 2]));
        assert!(to_bytes(&t)
            .unwrap_err()
            .to_string()
            .contains("`b` has 2 rows"));
        let t = Table::new()
            .with("a", Column::int64([1]))
            .with("a", Column::int64([2]));
        assert!(to_bytes(&t).unwrap_err().to_string().contains("twice"));
        assert!(to_bytes(&Table::new()).is_err());
    }

    /// An independent reader (pyarrow and DuckDB, from scripts/setup.sh) reads every type,
    /// nulls, more than 15 columns (long list headers) and non-ASCII strings back.
    #[test]
    fn pyarrow_and_duckdb_read_it_back() {
        let mut t = Table::new()
            .with("i", Column::int64([0, -1, i64::MAX, i64::MIN, 300]))
            .with(
                "d",
                Column::double([0.5, -2.25, 1e300, f64::MIN_POSITIVE, 3.0]),
            )
            .with("s", Column::utf8(["a", "", "µs/op", "x y", "€"]))
            .with("b", Column::bool([true, false, true, true, false]))
            .with(
                "oi",
                Column::Int64(vec![None, Some(7), None, None, Some(-9)]),
            )
            .with(
                "od",
                Column::Double(vec![Some(1.5), None, None, Some(2.5), None]),
            )
            .with(
                "os",
                Column::Utf8(vec![None, Some("q".into()), None, Some("r".into()), None]),
            )
            .with(
                "ob",
                Column::Bool(vec![Some(false), None, Some(true), None, None]),
            );
        for k in 0..10 {
            t.push(format!("c{k}"), Column::int64((0..5).map(|r| r * k)));
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        write(&path, &t).unwrap();
        let expect = serde_json::json!({
            "i": [0, -1, i64::MAX, i64::MIN, 300],
            "d": [0.5, -2.25, 1e300, f64::MIN_POSITIVE, 3.0],
            "s": ["a", "", "µs/op", "x y", "€"],
            "b": [true, false, true, true, false],
            "oi": [null, 7, null, null, -9],
            "od": [1.5, null, null, 2.5, null],
            "os": [null, "q", null, "r", null],
            "ob": [false, null, true, null, null],
            "c9": [0, 9, 18, 27, 36],
        });
        let script = r#"
import sys, json, pyarrow.parquet as pq, duckdb
path, want = sys.argv[1], json.loads(sys.argv[2])
t = pq.read_table(path).to_pydict()
assert len(t) == 18, list(t)
for k, v in want.items():
    assert t[k] == v, (k, t[k], v)
assert pq.read_table(path).schema.field("s").type == "string"
rows = duckdb.sql(f"SELECT i, s, oi, ob FROM read_parquet('{path}') ORDER BY d").fetchall()
assert rows[0] == (-1, "", 7, None), rows
assert duckdb.sql(f"SELECT count(*), sum(c9) FROM '{path}'").fetchall() == [(5, 90)]
print("ok")
"#;
        let out = std::process::Command::new("python3")
            .args(["-c", script, path.to_str().unwrap(), &expect.to_string()])
            .output()
            .expect("python3 (run scripts/setup.sh)");
        assert!(
            out.status.success(),
            "pyarrow/duckdb could not read the file (scripts/setup.sh installs them): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
    }
}
