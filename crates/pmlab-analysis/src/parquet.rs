//! A minimal, dependency-free Parquet writer for flat tables (pandas, polars, DuckDB, Arrow).
//!
//! One row group, one data page (v1) per column, PLAIN encoding, no compression, no
//! statistics. Columns are INT64, DOUBLE, BYTE_ARRAY annotated UTF8 (strings) or BOOLEAN;
//! a column is REQUIRED when it has no null, else OPTIONAL with definition levels
//! (RLE/bit-packing hybrid, bit width 1). The footer (FileMetaData) is written with the
//! Thrift compact protocol, following apache/parquet-format `parquet.thrift`.

use std::io;
use std::path::Path;

/// One column's values; `None` is a null.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    Int64(Vec<Option<i64>>),
    Double(Vec<Option<f64>>),
    Utf8(Vec<Option<String>>),
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

    /// Presence of each row's value.
    fn present(&self) -> Vec<bool> {
        match self {
            Column::Int64(v) => v.iter().map(Option::is_some).collect(),
            Column::Double(v) => v.iter().map(Option::is_some).collect(),
            Column::Utf8(v) => v.iter().map(Option::is_some).collect(),
            Column::Bool(v) => v.iter().map(Option::is_some).collect(),
        }
    }

    /// Parquet physical type (`Type` enum of parquet.thrift).
    fn physical(&self) -> i32 {
        match self {
            Column::Bool(_) => 0,
            Column::Int64(_) => 2,
            Column::Double(_) => 5,
            Column::Utf8(_) => 6,
        }
    }

    /// PLAIN encoding of the non-null values.
    fn plain(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Column::Int64(v) => v.iter().flatten().for_each(|x| out.extend(x.to_le_bytes())),
            Column::Double(v) => v.iter().flatten().for_each(|x| out.extend(x.to_le_bytes())),
            Column::Utf8(v) => v.iter().flatten().for_each(|s| {
                out.extend((s.len() as u32).to_le_bytes());
                out.extend(s.as_bytes());
            }),
            Column::Bool(v) => {
                let bits: Vec<bool> = v.iter().flatten().copied().collect();
                out = pack_bits(&bits);
            }
        }
        out
    }
}

/// A flat table: named columns of equal length.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    pub columns: Vec<(String, Column)>,
}

impl Table {
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
    let mut file = b"PAR1".to_vec();
    let mut chunks = Vec::new();
    for (name, c) in &table.columns {
        let present = c.present();
        let optional = present.iter().any(|p| !p);
        let mut page = Vec::new();
        if optional {
            let levels = rle_levels(&present);
            page.extend((levels.len() as u32).to_le_bytes());
            page.extend(levels);
        }
        page.extend(c.plain());
        let size = i32::try_from(page.len())
            .map_err(|_| invalid(format!("parquet: column `{name}` is over 2 GiB")))?;
        let header = page_header(rows as i32, size);
        let offset = file.len() as i64;
        let total = (header.len() + page.len()) as i64;
        file.extend(header);
        file.extend(page);
        chunks.push(Chunk {
            name: name.clone(),
            physical: c.physical(),
            utf8: matches!(c, Column::Utf8(_)),
            optional,
            offset,
            total,
        });
    }
    let footer = file_metadata(&chunks, rows as i64);
    file.extend(&footer);
    file.extend((footer.len() as u32).to_le_bytes());
    file.extend(b"PAR1");
    Ok(file)
}

/// Where one column chunk went, for the footer.
struct Chunk {
    name: String,
    physical: i32,
    utf8: bool,
    optional: bool,
    offset: i64,
    total: i64,
}

/// Bits packed least significant first, as PLAIN booleans and bit-packed runs want.
fn pack_bits(bits: &[bool]) -> Vec<u8> {
    let mut out = vec![0u8; bits.len().div_ceil(8)];
    for (i, _) in bits.iter().enumerate().filter(|(_, b)| **b) {
        out[i / 8] |= 1 << (i % 8);
    }
    out
}

/// Definition levels (0 = null, 1 = present) as RLE runs of the hybrid encoding, bit width 1.
fn rle_levels(present: &[bool]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < present.len() {
        let v = present[i];
        let run = present[i..].iter().take_while(|p| **p == v).count();
        varint(&mut out, (run as u64) << 1);
        out.push(v as u8);
        i += run;
    }
    out
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Thrift compact protocol type ids.
mod ty {
    pub const I32: u8 = 5;
    pub const I64: u8 = 6;
    pub const BINARY: u8 = 8;
    pub const LIST: u8 = 9;
    pub const STRUCT: u8 = 12;
}

/// A Thrift compact-protocol encoder for the few shapes the footer needs.
struct Compact {
    buf: Vec<u8>,
    /// Last field id written, per open struct.
    last: Vec<i16>,
}

impl Compact {
    fn new() -> Compact {
        Compact {
            buf: Vec::new(),
            last: vec![0],
        }
    }

    fn field(&mut self, id: i16, t: u8) {
        let last = self.last.last_mut().expect("inside a struct");
        let delta = id - *last;
        if (1..=15).contains(&delta) {
            self.buf.push(((delta as u8) << 4) | t);
        } else {
            self.buf.push(t);
            varint(&mut self.buf, zigzag(id as i64));
        }
        *last = id;
    }

    fn i32(&mut self, id: i16, v: i32) {
        self.field(id, ty::I32);
        varint(&mut self.buf, zigzag(v as i64));
    }

    fn i64(&mut self, id: i16, v: i64) {
        self.field(id, ty::I64);
        varint(&mut self.buf, zigzag(v));
    }

    fn string(&mut self, id: i16, s: &str) {
        self.field(id, ty::BINARY);
        self.raw_string(s);
    }

    fn raw_string(&mut self, s: &str) {
        varint(&mut self.buf, s.len() as u64);
        self.buf.extend(s.as_bytes());
    }

    /// A list field header; the caller writes `n` elements of type `elem`.
    fn list(&mut self, id: i16, elem: u8, n: usize) {
        self.field(id, ty::LIST);
        if n < 15 {
            self.buf.push(((n as u8) << 4) | elem);
        } else {
            self.buf.push(0xf0 | elem);
            varint(&mut self.buf, n as u64);
        }
    }

    /// Start a struct-typed field.
    fn begin(&mut self, id: i16) {
        self.field(id, ty::STRUCT);
        self.last.push(0);
    }

    /// Start a struct that is a list element.
    fn begin_element(&mut self) {
        self.last.push(0);
    }

    /// Close the innermost struct (STOP).
    fn end(&mut self) {
        self.buf.push(0);
        self.last.pop();
    }

    fn finish(mut self) -> Vec<u8> {
        self.buf.push(0);
        self.buf
    }
}

/// PageHeader { type DATA_PAGE, sizes, DataPageHeader { num_values, PLAIN, RLE, RLE } }.
fn page_header(num_values: i32, size: i32) -> Vec<u8> {
    let mut t = Compact::new();
    t.i32(1, 0);
    t.i32(2, size);
    t.i32(3, size);
    t.begin(5);
    t.i32(1, num_values);
    t.i32(2, 0);
    t.i32(3, 3);
    t.i32(4, 3);
    t.end();
    t.finish()
}

/// FileMetaData: version, schema (root + leaves), num_rows, one row group, created_by.
fn file_metadata(chunks: &[Chunk], rows: i64) -> Vec<u8> {
    let mut t = Compact::new();
    t.i32(1, 1);
    t.list(2, ty::STRUCT, chunks.len() + 1);
    t.begin_element();
    t.string(4, "schema");
    t.i32(5, chunks.len() as i32);
    t.end();
    for c in chunks {
        t.begin_element();
        t.i32(1, c.physical);
        t.i32(3, c.optional as i32);
        t.string(4, &c.name);
        if c.utf8 {
            t.i32(6, 0); // ConvertedType UTF8
            t.begin(10); // LogicalType
            t.begin(1); // STRING
            t.end();
            t.end();
        }
        t.end();
    }
    t.i64(3, rows);
    t.list(4, ty::STRUCT, 1);
    t.begin_element();
    t.list(1, ty::STRUCT, chunks.len());
    for c in chunks {
        t.begin_element();
        t.i64(2, c.offset);
        t.begin(3);
        t.i32(1, c.physical);
        let encodings: &[i32] = if c.optional { &[0, 3] } else { &[0] };
        t.list(2, ty::I32, encodings.len());
        for e in encodings {
            varint(&mut t.buf, zigzag(*e as i64));
        }
        t.list(3, ty::BINARY, 1);
        t.raw_string(&c.name);
        t.i32(4, 0);
        t.i64(5, rows);
        t.i64(6, c.total);
        t.i64(7, c.total);
        t.i64(9, c.offset);
        t.end();
        t.end();
    }
    t.i64(2, chunks.iter().map(|c| c.total).sum());
    t.i64(3, rows);
    t.end();
    t.string(6, concat!("pmlab version ", env!("CARGO_PKG_VERSION")));
    t.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_field_headers_and_varints() {
        let mut t = Compact::new();
        t.i32(1, 1); // delta 1, i32, zigzag(1)=2
        t.i64(17, -1); // long form: type, zigzag(17)=34, zigzag(-1)=1
        t.string(18, "ab");
        assert_eq!(
            t.finish(),
            vec![0x15, 2, 0x06, 34, 1, 0x18, 2, b'a', b'b', 0]
        );
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, vec![0xac, 0x02]);
    }

    #[test]
    fn levels_and_bits() {
        assert_eq!(rle_levels(&[true, true, false]), vec![4, 1, 2, 0]);
        assert_eq!(pack_bits(&[true, false, true, true]), vec![0b1101]);
        assert_eq!(pack_bits(&[true; 9]), vec![0xff, 1], "9 bits need 2 bytes");
    }

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
