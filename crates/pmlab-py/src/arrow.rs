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
    Int64Array, Int8Array, LargeListArray, LargeStringArray, RecordBatch, RecordBatchIterator,
    StringArray, UInt16Array, UInt32Array, UInt64Array, UInt8Array,
};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field, Schema};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};

use pmlab_analysis::parquet as pq;
use pmlab_trace::columns::{Values, Window};

/// An Arrow table (one record batch) that pyarrow, polars, pandas and DuckDB read through
/// `__arrow_c_stream__` without a copy.
#[pyclass(frozen, module = "pmlab")]
pub struct Table {
    batch: RecordBatch,
}

impl Table {
    fn new(batch: RecordBatch) -> Table {
        Table { batch }
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
        let reader =
            RecordBatchIterator::new([Ok(self.batch.clone())], self.batch.schema().clone());
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// The Arrow C schema of this table (PyCapsule `arrow_schema`).
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let schema = FFI_ArrowSchema::try_from(self.batch.schema().as_ref())
            .map_err(|e| crate::PmlabError::new_err(e.to_string()))?;
        PyCapsule::new_with_value(py, schema, c"arrow_schema")
    }

    #[getter]
    fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }

    #[getter]
    fn column_names(&self) -> Vec<String> {
        self.batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }

    /// Column names and Arrow types.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for f in self.batch.schema().fields() {
            d.set_item(f.name(), f.data_type().to_string())?;
        }
        Ok(d)
    }

    fn __len__(&self) -> usize {
        self.batch.num_rows()
    }

    fn __repr__(&self) -> String {
        format!(
            "<pmlab.Table {} rows: {}>",
            self.batch.num_rows(),
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
        Values::Str { offsets: o, data } => {
            // SAFETY: the decoder writes valid UTF-8 (lossy) between valid offsets.
            let a = unsafe {
                LargeStringArray::new_unchecked(offsets(o), Buffer::from_vec(data), None)
            };
            arr(a)
        }
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
    let mut keys: Vec<Option<i32>> = Vec::with_capacity(pids.len());
    for &pid in pids {
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
        keys.push(k);
    }
    let values = StringArray::from(names);
    DictionaryArray::new(Int32Array::from(keys), Arc::new(values))
}

/// The table of event `id`: common columns, then the format's fields, `columns` picked.
pub fn event_table(
    trace: &pmlab_trace::Trace,
    id: u16,
    columns: Option<&[String]>,
    win: &Window,
) -> Result<crate::arrow::Table, String> {
    let rows = trace.rows(id, win);
    let fields = trace.payload_fields(id);
    // A format field named like a common column keeps its name; the common one becomes `common_*`.
    let common = |c: &str| {
        if fields.iter().any(|f| f.name == c) {
            format!("common_{c}")
        } else {
            c.to_string()
        }
    };
    let mut names: Vec<String> = ["ts", "cpu", "pid", "comm"]
        .iter()
        .map(|c| common(c))
        .collect();
    names.extend(fields.iter().map(|f| f.name.clone()));
    let picked: Vec<usize> = match columns {
        None => (0..names.len()).collect(),
        Some(cols) => cols
            .iter()
            .map(|c| {
                names.iter().position(|n| n == c).ok_or_else(|| {
                    format!(
                        "no column {c:?} in this event (its columns: {})",
                        names.join(", ")
                    )
                })
            })
            .collect::<Result<_, _>>()?,
    };
    let ev = &trace.events;
    let mut schema = Vec::with_capacity(picked.len());
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(picked.len());
    let mut pids: Option<Vec<i32>> = None;
    for &k in &picked {
        let (dt, a): (DataType, ArrayRef) = match k {
            0 => array_of(Values::U64(
                rows.iter().map(|&i| ev.ts[i as usize]).collect(),
            )),
            1 => array_of(Values::U32(
                rows.iter()
                    .map(|&i| u32::from(ev.cpu[i as usize]))
                    .collect(),
            )),
            2 => {
                let p: Vec<i32> = rows.iter().map(|&i| ev.pid[i as usize]).collect();
                pids = Some(p.clone());
                array_of(Values::I32(p))
            }
            3 => {
                let p =
                    pids.get_or_insert_with(|| rows.iter().map(|&i| ev.pid[i as usize]).collect());
                let a = comm_column(trace, p);
                (a.data_type().clone(), Arc::new(a) as ArrayRef)
            }
            _ => array_of(trace.column(fields[k - 4], &rows)),
        };
        let nullable = k == 3;
        schema.push(Field::new(names[k].clone(), dt, nullable));
        arrays.push(a);
    }
    let schema = Arc::new(Schema::new(schema));
    let batch = RecordBatch::try_new_with_options(
        schema,
        arrays,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows.len())),
    )
    .map_err(|e| e.to_string())?;
    Ok(Table::new(batch))
}

/// Tables of several events, built on as many threads as the machine has cores.
pub fn event_tables(
    trace: &pmlab_trace::Trace,
    wanted: &[(String, u16)],
) -> Result<Vec<(String, Table)>, String> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let all = Window::default();
    let mut out: Vec<Option<Result<Table, String>>> = Vec::new();
    out.resize_with(wanted.len(), || None);
    let results = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads.min(wanted.len()))
            .map(|_| {
                sc.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((_, id)) = wanted.get(k) else { break };
                        mine.push((k, event_table(trace, *id, None, &all)));
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect::<Vec<_>>()
    });
    for (k, r) in results {
        out[k] = Some(r);
    }
    wanted
        .iter()
        .zip(out)
        .map(|((name, _), r)| Ok((name.clone(), r.expect("every event built")?)))
        .collect()
}

/// Write a table as one Parquet file.
pub fn write_parquet(
    path: &Path,
    t: &Table,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut w = parquet::arrow::ArrowWriter::try_new(f, t.batch.schema(), None)?;
    w.write(&t.batch)?;
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
