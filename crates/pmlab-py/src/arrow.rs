//! Arrow tables for Python: decoded event columns, analysis and store tables as Arrow
//! record batches, handed out through the Arrow C stream interface (`__arrow_c_stream__`)
//! and written to Parquet.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::ffi::FFI_ArrowSchema;
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::types::Int32Type;
use arrow_array::{
    Array, ArrayRef, BooleanArray, DictionaryArray, Float64Array, Int16Array, Int32Array,
    Int64Array, Int8Array, LargeListArray, RecordBatch, RecordBatchIterator, StringArray,
    StringViewArray, UInt16Array, UInt32Array, UInt64Array, UInt8Array,
};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field, Schema};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};

use pmlab_analysis::parquet as pq;
use pmlab_trace::columns::Values;

/// An Arrow table (one record batch) that pyarrow, polars, pandas and DuckDB read through
/// `__arrow_c_stream__` without a copy.
#[pyclass(frozen, module = "pmlab")]
pub struct Table {
    schema: arrow_schema::SchemaRef,
    /// The rows in chunks (one per part of the trace a thread read), in time order.
    batches: Vec<RecordBatch>,
}

impl Table {
    fn new(batch: RecordBatch) -> Table {
        Table {
            schema: batch.schema(),
            batches: vec![batch],
        }
    }

    /// A table of several chunks with one schema; empty chunks are dropped (one stays).
    fn of_chunks(mut batches: Vec<RecordBatch>) -> Table {
        let schema = batches[0].schema();
        let first = batches[0].clone();
        batches.retain(|b| b.num_rows() > 0);
        if batches.is_empty() {
            batches.push(first);
        }
        Table { schema, batches }
    }

    fn rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }

    pub fn to_polars<'py>(t: &Bound<'py, Table>) -> PyResult<Bound<'py, PyAny>> {
        let pl = t.py().import("polars").map_err(|e| missing("polars", e))?;
        pl.call_method1("DataFrame", (t,))
    }

    pub fn to_pandas<'py>(t: &Bound<'py, Table>) -> PyResult<Bound<'py, PyAny>> {
        let pa = t
            .py()
            .import("pyarrow")
            .map_err(|e| missing("pyarrow", e))?;
        t.py().import("pandas").map_err(|e| missing("pandas", e))?;
        pa.call_method1("table", (t,))?.call_method0("to_pandas")
    }
}

fn missing(lib: &str, e: PyErr) -> PyErr {
    pyo3::exceptions::PyImportError::new_err(format!("this needs {lib} (pip install {lib}): {e}"))
}

#[pymethods]
impl Table {
    /// The Arrow C stream of this table (PyCapsule `arrow_array_stream`).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        // The schema is the table's own; a consumer casts if it asked for another.
        let _ = requested_schema;
        let reader = RecordBatchIterator::new(
            self.batches.clone().into_iter().map(Ok),
            self.schema.clone(),
        );
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// The Arrow C schema of this table (PyCapsule `arrow_schema`).
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let schema = FFI_ArrowSchema::try_from(self.schema.as_ref())
            .map_err(|e| crate::PmlabError::new_err(e.to_string()))?;
        PyCapsule::new_with_value(py, schema, c"arrow_schema")
    }

    #[getter]
    fn num_rows(&self) -> usize {
        self.rows()
    }

    #[getter]
    fn column_names(&self) -> Vec<String> {
        self.schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }

    /// Column names and Arrow types.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for f in self.schema.fields() {
            d.set_item(f.name(), f.data_type().to_string())?;
        }
        Ok(d)
    }

    fn __len__(&self) -> usize {
        self.rows()
    }

    fn __repr__(&self) -> String {
        format!(
            "<pmlab.Table {} rows: {}>",
            self.rows(),
            self.column_names().join(", ")
        )
    }

    /// As a pyarrow Table (needs pyarrow).
    fn to_pyarrow<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let pa = slf
            .py()
            .import("pyarrow")
            .map_err(|e| missing("pyarrow", e))?;
        pa.call_method1("table", (slf,))
    }

    /// As a polars DataFrame (needs polars).
    #[pyo3(name = "to_polars")]
    fn py_to_polars<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Table::to_polars(slf)
    }

    /// As a pandas DataFrame (needs pandas and pyarrow).
    #[pyo3(name = "to_pandas")]
    fn py_to_pandas<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Table::to_pandas(slf)
    }
}

/// Offsets that are valid by construction (start at 0, never decrease).
fn offsets(v: Vec<i64>) -> OffsetBuffer<i64> {
    // SAFETY: the decoder pushes 0 first and then running lengths only.
    unsafe { OffsetBuffer::new_unchecked(ScalarBuffer::from(v)) }
}

/// A decoded column as an Arrow array (the vectors move in; no copy).
fn array_of(v: Values) -> (DataType, ArrayRef) {
    fn arr<A: arrow_array::Array + 'static>(a: A) -> (DataType, ArrayRef) {
        (a.data_type().clone(), Arc::new(a))
    }
    match v {
        Values::U8(v) => arr(UInt8Array::new(v.into(), None)),
        Values::I8(v) => arr(Int8Array::new(v.into(), None)),
        Values::U16(v) => arr(UInt16Array::new(v.into(), None)),
        Values::I16(v) => arr(Int16Array::new(v.into(), None)),
        Values::U32(v) => arr(UInt32Array::new(v.into(), None)),
        Values::I32(v) => arr(Int32Array::new(v.into(), None)),
        Values::U64(v) => arr(UInt64Array::new(v.into(), None)),
        Values::I64(v) => arr(Int64Array::new(v.into(), None)),
        // SAFETY: pmlab-trace makes each view, Arrow's layout, over valid UTF-8 in its buffers.
        Values::Str { views, buffers } => arr(unsafe {
            StringViewArray::new_unchecked(
                ScalarBuffer::from(views),
                buffers.into_iter().map(Buffer::from_vec).collect(),
                None,
            )
        }),
        Values::List { offsets: o, values } => {
            let (dt, values) = array_of(*values);
            let item = Arc::new(Field::new("item", dt, false));
            arr(LargeListArray::new(item, offsets(o), values, None))
        }
    }
}

/// `comm` of each row's pid from the trace's saved cmdlines (`<idle>` for pid 0, null
/// where unknown), dictionary-encoded.
fn comm_column(trace: &pmlab_trace::Trace, pids: &[i32]) -> DictionaryArray<Int32Type> {
    let mut by_pid: HashMap<i32, Option<i32>> = HashMap::new();
    let mut by_name: HashMap<&str, i32> = HashMap::new();
    let mut names: Vec<&str> = Vec::new();
    // Keys with -1 for a pid without a name; those become nulls at the end.
    let mut keys: Vec<i32> = Vec::with_capacity(pids.len());
    // Most rows repeat a recent pid: a small direct-mapped cache before the map.
    let mut cache: Vec<(i32, i32)> = vec![(-1, -1); 1024];
    for &pid in pids {
        let slot = &mut cache[(pid as usize) & 1023];
        if slot.0 == pid {
            keys.push(slot.1);
            continue;
        }
        let k = *by_pid.entry(pid).or_insert_with(|| {
            let name = if pid == 0 {
                Some("<idle>")
            } else {
                trace.comm(pid)
            };
            name.map(|n| {
                *by_name.entry(n).or_insert_with(|| {
                    names.push(n);
                    names.len() as i32 - 1
                })
            })
        });
        let k = k.unwrap_or(-1);
        *slot = (pid, k);
        keys.push(k);
    }
    let nulls = keys
        .contains(&-1)
        .then(|| arrow_buffer::NullBuffer::from_iter(keys.iter().map(|&k| k >= 0)));
    let keys: Vec<i32> = match nulls {
        Some(_) => keys.into_iter().map(|k| k.max(0)).collect(),
        None => keys,
    };
    let values = StringArray::from(names);
    DictionaryArray::new(Int32Array::new(keys.into(), nulls), Arc::new(values))
}

/// The column names of an event's table (the rule is pmlab-trace's, shared with `pmlab dump --json`).
fn column_names(fields: &[&pmlab_trace::Field]) -> Vec<String> {
    pmlab_trace::columns::table_column_names(fields)
}

/// One record batch of an event's table from its columns: `picked` indexes `names`; the
/// common columns are taken from `common` (`ts`, `cpu`, `pid`) when picked, and `fields`
/// holds the picked format fields' values in order.
fn batch_of(
    trace: &pmlab_trace::Trace,
    names: &[String],
    picked: &[usize],
    common: (Vec<u64>, Vec<u32>, Vec<i32>),
    fields: Vec<Values>,
    rows: usize,
) -> Result<RecordBatch, ArrowError> {
    let (ts, cpu, pid) = common;
    // The names first: then the pid column moves into its array instead of being copied.
    let mut comm = picked.contains(&3).then(|| comm_column(trace, &pid));
    let (mut ts, mut cpu, mut pid) = (Some(ts), Some(cpu), Some(pid));
    let mut fields = fields.into_iter();
    let mut schema = Vec::with_capacity(picked.len());
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(picked.len());
    for &k in picked {
        let (dt, a): (DataType, ArrayRef) = match k {
            0 => array_of(Values::U64(ts.take().unwrap_or_default())),
            1 => array_of(Values::U32(cpu.take().unwrap_or_default())),
            2 => array_of(Values::I32(pid.take().unwrap_or_default())),
            3 => {
                let a = comm.take().expect("made above, picked once");
                (a.data_type().clone(), Arc::new(a) as ArrayRef)
            }
            _ => array_of(fields.next().expect("one column per picked field")),
        };
        schema.push(Field::new(names[k].clone(), dt, k == 3));
        arrays.push(a);
    }
    RecordBatch::try_new_with_options(
        Arc::new(Schema::new(schema)),
        arrays,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows)),
    )
}

/// Why an event's table could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// A column the event's table does not have: its columns, close matches first.
    #[error(transparent)]
    NoColumn(#[from] pmlab_trace::names::Unknown),
    #[error("building the Arrow table")]
    Arrow(#[from] ArrowError),
}

/// The table of event `id` at `rows`: common columns, then the format's fields, `columns` picked.
pub fn event_table(
    trace: &pmlab_trace::Trace,
    id: u16,
    columns: Option<&[String]>,
    rows: &[u32],
) -> Result<crate::arrow::Table, TableError> {
    let fields = trace.payload_fields(id);
    let names = column_names(&fields);
    let picked: Vec<usize> = match columns {
        None => (0..names.len()).collect(),
        Some(cols) => cols
            .iter()
            .map(|c| {
                names.iter().position(|n| n == c).ok_or_else(|| {
                    use pmlab_trace::names::{Known, NameKind, Unknown};
                    let event = trace.formats.get(&id).map_or("", |f| f.name.as_str());
                    TableError::NoColumn(Unknown::new(
                        NameKind::Column,
                        c.clone(),
                        format!("in {event}"),
                        names.iter().map(Known::new).collect(),
                    ))
                })
            })
            .collect::<Result<_, _>>()?,
    };
    let ev = &trace.events;
    let wants = |k: usize| picked.contains(&k);
    let ts = if wants(0) {
        rows.iter().map(|&i| ev.ts[i as usize]).collect()
    } else {
        Vec::new()
    };
    let cpu = if wants(1) {
        rows.iter()
            .map(|&i| u32::from(ev.cpu[i as usize]))
            .collect()
    } else {
        Vec::new()
    };
    let pid = if wants(2) || wants(3) {
        rows.iter().map(|&i| ev.pid[i as usize]).collect()
    } else {
        Vec::new()
    };
    // Every picked field in one pass over the records.
    let picked_fields: Vec<&pmlab_trace::Field> = picked
        .iter()
        .filter(|&&k| k >= 4)
        .map(|&k| fields[k - 4])
        .collect();
    let values = trace.columns(&picked_fields, rows);
    let batch = batch_of(trace, &names, &picked, (ts, cpu, pid), values, rows.len())?;
    Ok(Table::new(batch))
}

/// Tables of several events, every column: the trace cut in as many parts as the machine
/// has cores, each read in one pass in file order on a thread of its own
/// ([`pmlab_trace::Trace::columns_of_each`]); a table holds one chunk per part.
pub fn event_tables(
    trace: &pmlab_trace::Trace,
    wanted: &[(String, u16)],
) -> Result<Vec<(String, Table)>, TableError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = trace.events.len();
    let parts = threads.clamp(1, n.div_ceil(100_000).max(1));
    let events: Vec<(u16, Vec<&pmlab_trace::Field>)> = wanted
        .iter()
        .map(|(_, id)| (*id, trace.payload_fields(*id)))
        .collect();
    let names: Vec<Vec<String>> = events.iter().map(|(_, f)| column_names(f)).collect();
    let chunks: Vec<Vec<Result<RecordBatch, ArrowError>>> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..parts)
            .map(|p| {
                let range = n * p / parts..n * (p + 1) / parts;
                let (events, names) = (&events, &names);
                sc.spawn(move || {
                    let cols = trace.columns_of_each(events, range);
                    cols.into_iter()
                        .zip(names)
                        .map(|(c, names)| {
                            let picked: Vec<usize> = (0..names.len()).collect();
                            let rows = c.ts.len();
                            batch_of(trace, names, &picked, (c.ts, c.cpu, c.pid), c.fields, rows)
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let mut by_event: Vec<Vec<RecordBatch>> = vec![Vec::new(); wanted.len()];
    for part in chunks {
        for (k, b) in part.into_iter().enumerate() {
            by_event[k].push(b?);
        }
    }
    Ok(wanted
        .iter()
        .zip(by_event)
        .map(|((name, _), batches)| (name.clone(), Table::of_chunks(batches)))
        .collect())
}

/// Write a table as one Parquet file.
pub fn write_parquet(
    path: &Path,
    t: &Table,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut w = parquet::arrow::ArrowWriter::try_new(f, t.schema.clone(), None)?;
    for b in &t.batches {
        w.write(b)?;
    }
    w.close()?;
    Ok(())
}

/// Parquet-style columns (the store's and the analyses' export tables) of several parts with
/// the same columns, concatenated, as one Arrow table.
fn concat_columns(parts: &[pq::Table]) -> Result<Table, ArrowError> {
    let Some(first) = parts.first() else {
        return Ok(Table::new(RecordBatch::new_empty(
            Arc::new(Schema::empty()),
        )));
    };
    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for (ci, (name, col)) in first.columns.iter().enumerate() {
        let all = parts.iter().filter_map(|p| p.columns.get(ci).map(|c| &c.1));
        let a: ArrayRef = match col {
            pq::Column::Int64(_) => Arc::new(Int64Array::from(
                all.flat_map(|c| match c {
                    pq::Column::Int64(v) => v.clone(),
                    _ => Vec::new(),
                })
                .collect::<Vec<_>>(),
            )),
            pq::Column::Double(_) => Arc::new(Float64Array::from(
                all.flat_map(|c| match c {
                    pq::Column::Double(v) => v.clone(),
                    _ => Vec::new(),
                })
                .collect::<Vec<_>>(),
            )),
            pq::Column::Utf8(_) => Arc::new(StringArray::from(
                all.flat_map(|c| match c {
                    pq::Column::Utf8(v) => v.clone(),
                    _ => Vec::new(),
                })
                .collect::<Vec<_>>(),
            )),
            pq::Column::Bool(_) => Arc::new(BooleanArray::from(
                all.flat_map(|c| match c {
                    pq::Column::Bool(v) => v.clone(),
                    _ => Vec::new(),
                })
                .collect::<Vec<_>>(),
            )),
        };
        fields.push(Field::new(name, a.data_type().clone(), a.null_count() > 0));
        arrays.push(a);
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?;
    Ok(Table::new(batch))
}

/// One table of `pmlab analyze --export`, typed as its Parquet file is.
pub fn analysis_table(t: &pmlab_analysis::Table) -> Result<Table, ArrowError> {
    concat_columns(&[pmlab_analysis::export::to_parquet(t)])
}

/// One table of the result store over every experiment (the parts of each experiment).
pub fn store_table(parts: &[pq::Table]) -> Result<Table, ArrowError> {
    concat_columns(parts)
}
