//! LISA's Parquet layout: the directory `trace-dump parquet` (ARM-software/lisa,
//! tools/trace-parser) writes for LISA's trace loader (`TraceDumpTraceParser` in
//! lisa/trace.py), learnt from their source at commit
//! bb5ff50d0ff5f5e3620634dc3342103dcfa1d6d2. One `EVENT.parquet` per event that occurs:
//! `common_ts` (ns, u64) and `common_cpu` (u32), never null, then every field of the
//! event's format in file order, the common ones included (`common_type`, `common_flags`,
//! `common_preempt_count`, `common_pid`), nullable. No `comm` column: `meta.json` beside
//! the files maps pids to names (`pid-comms`), with `cpus-count`, `symbols-address`,
//! `events-info` (each file's event, path, row count, errors), `time-range` and
//! `trace-clock`. Timestamps are made unique as LISA asks trace-dump to
//! (`--unique-timestamps`: each at least 2 ns after the one before, in file order).
//!
//! Column types follow trace-dump's: integers by their C type, `bool` as booleans,
//! `char` arrays and strings as UTF-8 (`Utf8`), `char *` pointers as the string they point
//! to in the file's printk formats (as `bprint`'s `fmt`), `u8`/`uint8_t` arrays as
//! `Binary`, other integer arrays as `List`, `cpumask_t` as a `List` of booleans (one per
//! CPU). Unlike trace-dump, `print` and `bprint` of old kernels are kept, and a `bprint`
//! stays one table (trace-dump also splits `trace_printk@NAME` tables off it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Int16Array, Int32Array, Int64Array, Int8Array, ListArray,
    RecordBatch, StringArray, StringViewArray, UInt16Array, UInt32Array, UInt64Array, UInt8Array,
};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field as AField, Schema};
use parquet::errors::ParquetError;
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use crate::columns::{ColumnType, Scalar, Values};
use crate::model::{Field, FieldKind, Trace};
use pmlab_trace::Kallsyms;

/// Why the directory could not be written.
#[derive(Debug, thiserror::Error)]
pub enum LisaError {
    /// A file or directory could not be written.
    #[error("{path}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        err: std::io::Error,
    },
    /// An event's columns did not make an Arrow table.
    #[error("building the Arrow table of {event}")]
    Arrow {
        /// The event (`system:name`).
        event: String,
        /// Arrow's error.
        #[source]
        err: ArrowError,
    },
    /// An event's Parquet file could not be written.
    #[error("writing {path}")]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The Parquet writer's error.
        #[source]
        err: ParquetError,
    },
    /// `meta.json` could not be serialised.
    #[error("writing meta.json")]
    Json(#[from] serde_json::Error),
}

/// The Arrow type trace-dump gives a field, as pmlab reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lisa {
    /// An integer column as pmlab types it ([`ColumnType`]).
    Int(Scalar),
    Bool,
    Text,
    /// A `char *`: the string at that address in the printk formats.
    PtrText,
    Binary,
    List {
        size: u8,
        signed: bool,
    },
    CpuMask,
    /// An old kernel's `char buf` of size 0 (`print`): the text to the end of the record.
    TailText,
    /// An old kernel's `u32 buf` of size 0 (`bprint`): elements to the end of the record.
    TailList {
        size: u8,
        signed: bool,
    },
}

/// The element or scalar type of a declaration: `__data_loc`, array bounds, `const` and
/// `volatile` dropped.
fn base_type(type_name: &str) -> String {
    let t = type_name
        .trim_start_matches("__data_loc")
        .trim_start_matches("__rel_loc")
        .split('[')
        .next()
        .unwrap_or("");
    t.split_whitespace()
        .filter(|w| *w != "const" && *w != "volatile")
        .collect::<Vec<_>>()
        .join(" ")
}

fn lisa_type(f: &Field, long_size: u32) -> Lisa {
    let base = base_type(&f.type_name);
    let array = !matches!(f.kind, FieldKind::Int);
    if base.contains("cpumask_t") {
        return Lisa::CpuMask;
    }
    if !array && f.size == 0 {
        // Old kernels declare `print`'s and `bprint`'s buffers without brackets.
        if base == "char" {
            return Lisa::TailText;
        }
        let size = match base.as_str() {
            "u16" | "s16" | "short" | "unsigned short" => 2,
            "u32" | "s32" | "int" | "unsigned int" | "unsigned" => 4,
            "u64" | "s64" | "long long" | "unsigned long long" => 8,
            "long" | "unsigned long" => long_size as u8,
            _ => 1,
        };
        return Lisa::TailList {
            size,
            signed: f.signed,
        };
    }
    if !array {
        if let Some(pointee) = base.strip_suffix('*') {
            if pointee.trim() == "char" {
                return Lisa::PtrText;
            }
        }
        if base == "bool" || base == "_Bool" {
            return Lisa::Bool;
        }
    } else if matches!(base.as_str(), "u8" | "uint8_t") {
        return Lisa::Binary;
    }
    match ColumnType::of(f, long_size) {
        ColumnType::Scalar(Scalar::Str) => Lisa::Text,
        ColumnType::Scalar(s) => Lisa::Int(s),
        ColumnType::List { size, signed } => {
            if !array {
                // An integer of an odd size: its bytes.
                Lisa::Binary
            } else {
                Lisa::List { size, signed }
            }
        }
    }
}

fn int_type(size: u8, signed: bool) -> DataType {
    match (size, signed) {
        (1, false) => DataType::UInt8,
        (1, true) => DataType::Int8,
        (2, false) => DataType::UInt16,
        (2, true) => DataType::Int16,
        (4, false) => DataType::UInt32,
        (4, true) => DataType::Int32,
        (_, false) => DataType::UInt64,
        (_, true) => DataType::Int64,
    }
}

impl Lisa {
    fn data_type(self) -> DataType {
        match self {
            Lisa::Int(Scalar::Int { size, signed }) => int_type(size, signed),
            Lisa::Int(Scalar::Str) | Lisa::Text | Lisa::PtrText | Lisa::TailText => DataType::Utf8,
            Lisa::Bool => DataType::Boolean,
            Lisa::Binary => DataType::Binary,
            Lisa::List { size, signed } | Lisa::TailList { size, signed } => {
                DataType::new_list(int_type(size, signed), true)
            }
            Lisa::CpuMask => DataType::new_list(DataType::Boolean, true),
        }
    }
}

/// The Arrow schema of event `id`'s file: `common_ts`, `common_cpu`, then every field.
pub fn schema(trace: &Trace, id: u16) -> Schema {
    let mut fields = vec![
        AField::new("common_ts", DataType::UInt64, false),
        AField::new("common_cpu", DataType::UInt32, false),
    ];
    if let Some(f) = trace.formats.get(&id) {
        for x in &f.fields {
            let t = lisa_type(x, trace.long_size);
            fields.push(AField::new(x.name.clone(), t.data_type(), true));
        }
    }
    Schema::new(fields)
}

fn i32_offsets(o: &[i64]) -> OffsetBuffer<i32> {
    OffsetBuffer::new(ScalarBuffer::from(
        o.iter().map(|&x| x as i32).collect::<Vec<i32>>(),
    ))
}

/// A list column's values as one flat u64 vector (each element zero-extended).
fn flat_u64(v: &Values) -> Vec<u64> {
    match v {
        Values::U8(x) => x.iter().map(|&a| a as u64).collect(),
        Values::I8(x) => x.iter().map(|&a| a as u8 as u64).collect(),
        Values::U16(x) => x.iter().map(|&a| a as u64).collect(),
        Values::I16(x) => x.iter().map(|&a| a as u16 as u64).collect(),
        Values::U32(x) => x.iter().map(|&a| a as u64).collect(),
        Values::I32(x) => x.iter().map(|&a| a as u32 as u64).collect(),
        Values::U64(x) => x.clone(),
        Values::I64(x) => x.iter().map(|&a| a as u64).collect(),
        Values::Str { .. } | Values::List { .. } => Vec::new(),
    }
}

fn primitive(v: Values) -> ArrayRef {
    match v {
        Values::U8(v) => Arc::new(UInt8Array::from(v)),
        Values::I8(v) => Arc::new(Int8Array::from(v)),
        Values::U16(v) => Arc::new(UInt16Array::from(v)),
        Values::I16(v) => Arc::new(Int16Array::from(v)),
        Values::U32(v) => Arc::new(UInt32Array::from(v)),
        Values::I32(v) => Arc::new(Int32Array::from(v)),
        Values::U64(v) => Arc::new(UInt64Array::from(v)),
        Values::I64(v) => Arc::new(Int64Array::from(v)),
        Values::Str { views, buffers } => {
            // SAFETY: pmlab-trace makes each view, Arrow's layout, over valid UTF-8.
            let a = unsafe {
                StringViewArray::new_unchecked(
                    ScalarBuffer::from(views),
                    buffers.into_iter().map(Buffer::from_vec).collect(),
                    None,
                )
            };
            Arc::new(a.iter().collect::<StringArray>())
        }
        Values::List { .. } => unreachable!("lists are handled by their caller"),
    }
}

/// A decoded column in trace-dump's type.
fn array_of(trace: &Trace, t: Lisa, v: Values) -> ArrayRef {
    match (t, v) {
        (Lisa::Bool, v) => Arc::new(
            flat_u64(&v)
                .into_iter()
                .map(|x| Some(x != 0))
                .collect::<BooleanArray>(),
        ),
        (Lisa::PtrText, v) => Arc::new(
            flat_u64(&v)
                .into_iter()
                .map(|a| trace.printk_formats.get(&a).map(|s| s.as_str()))
                .collect::<StringArray>(),
        ),
        (Lisa::Binary, Values::List { offsets, values }) => {
            let bytes: Vec<u8> = flat_u64(&values).into_iter().map(|x| x as u8).collect();
            Arc::new(BinaryArray::new(
                i32_offsets(&offsets),
                Buffer::from_vec(bytes),
                None,
            ))
        }
        (Lisa::CpuMask, Values::List { offsets, values }) => {
            // Element k's bit b is CPU k * bits + b.
            let bits = match &*values {
                Values::U8(_) | Values::I8(_) => 8,
                Values::U16(_) | Values::I16(_) => 16,
                Values::U32(_) | Values::I32(_) => 32,
                _ => 64,
            };
            let flat = flat_u64(&values);
            let mut o = Vec::with_capacity(offsets.len());
            let mut cpus = Vec::new();
            o.push(0i32);
            for w in offsets.windows(2) {
                for &x in &flat[w[0] as usize..w[1] as usize] {
                    cpus.extend((0..bits).map(|b| Some(x >> b & 1 == 1)));
                }
                o.push(cpus.len() as i32);
            }
            Arc::new(ListArray::new(
                Arc::new(AField::new("item", DataType::Boolean, true)),
                OffsetBuffer::new(ScalarBuffer::from(o)),
                Arc::new(cpus.into_iter().collect::<BooleanArray>()),
                None,
            ))
        }
        (Lisa::List { size, signed }, Values::List { offsets, values }) => {
            Arc::new(ListArray::new(
                Arc::new(AField::new("item", int_type(size, signed), true)),
                i32_offsets(&offsets),
                primitive(*values),
                None,
            ))
        }
        (_, Values::List { offsets, values }) => {
            // Not reached (types match the values); bytes are the fallback.
            let bytes: Vec<u8> = flat_u64(&values).into_iter().map(|x| x as u8).collect();
            Arc::new(BinaryArray::new(
                i32_offsets(&offsets),
                Buffer::from_vec(bytes),
                None,
            ))
        }
        (_, v) => primitive(v),
    }
}

/// A size-0 field of an old kernel read to the end of each record: text up to the first
/// NUL, or elements of the declared size.
fn tail_array(trace: &Trace, id: u16, f: &Field, t: Lisa, rows: &[u32]) -> ArrayRef {
    let Some(at) = trace.field(id, &f.name) else {
        return arrow_array::new_null_array(&t.data_type(), rows.len());
    };
    let big = trace.endian == crate::model::Endian::Big;
    match t {
        Lisa::TailText => Arc::new(
            rows.iter()
                .map(|&i| {
                    let b = trace.flexible_bytes_at(i as usize, at);
                    let b = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
                    Some(String::from_utf8_lossy(b).into_owned())
                })
                .collect::<StringArray>(),
        ),
        Lisa::TailList { size, signed } => {
            let mut offsets = vec![0i64];
            let mut flat = Vec::new();
            for &i in rows {
                let b = trace.flexible_bytes_at(i as usize, at);
                flat.extend(
                    b.chunks_exact(size as usize)
                        .map(|c| crate::model::uint(c, big)),
                );
                offsets.push(flat.len() as i64);
            }
            let values = match (size, signed) {
                (1, false) => Values::U8(flat.iter().map(|&x| x as u8).collect()),
                (1, true) => Values::I8(flat.iter().map(|&x| x as i8).collect()),
                (2, false) => Values::U16(flat.iter().map(|&x| x as u16).collect()),
                (2, true) => Values::I16(flat.iter().map(|&x| x as i16).collect()),
                (4, false) => Values::U32(flat.iter().map(|&x| x as u32).collect()),
                (4, true) => Values::I32(flat.iter().map(|&x| x as i32).collect()),
                (_, false) => Values::U64(flat),
                (_, true) => Values::I64(flat.iter().map(|&x| x as i64).collect()),
            };
            Arc::new(ListArray::new(
                Arc::new(AField::new("item", int_type(size, signed), true)),
                i32_offsets(&offsets),
                primitive(values),
                None,
            ))
        }
        _ => arrow_array::new_null_array(&t.data_type(), rows.len()),
    }
}

/// The timestamps LISA's loader gets (`trace-dump parquet --unique-timestamps`): each at
/// least 2 ns after the one before it in file order.
pub fn unique_timestamps(ts: &[u64]) -> Vec<u64> {
    let mut prev = 0u64;
    ts.iter()
        .map(|&t| {
            prev = t.max(prev + 2);
            prev
        })
        .collect()
}

/// The record batch of event `id` at `rows`, with `ts` the (unique) timestamps of every event.
pub fn batch(trace: &Trace, id: u16, rows: &[u32], ts: &[u64]) -> Result<RecordBatch, ArrowError> {
    let schema = Arc::new(schema(trace, id));
    let ev = &trace.events;
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(UInt64Array::from(
            rows.iter().map(|&i| ts[i as usize]).collect::<Vec<_>>(),
        )),
        Arc::new(UInt32Array::from(
            rows.iter()
                .map(|&i| u32::from(ev.cpu[i as usize]))
                .collect::<Vec<_>>(),
        )),
    ];
    if let Some(f) = trace.formats.get(&id) {
        let fields: Vec<&Field> = f.fields.iter().collect();
        let values = trace.columns(&fields, rows);
        for (x, v) in fields.iter().zip(values) {
            let t = lisa_type(x, trace.long_size);
            cols.push(match t {
                Lisa::TailText | Lisa::TailList { .. } => tail_array(trace, id, x, t, rows),
                _ => array_of(trace, t, v),
            });
        }
    }
    RecordBatch::try_new(schema, cols)
}

/// What [`write_dir`] wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// The Parquet files, one per event, in the order of `events`.
    pub files: Vec<PathBuf>,
    /// `meta.json`.
    pub meta: PathBuf,
}

/// The file name an event's table gets (`NAME.parquet`; `SYSTEM:NAME` where two systems
/// share a name is written `SYSTEM-NAME.parquet`).
pub fn file_name(event: &str) -> String {
    format!("{}.parquet", event.replace([':', '/'], "-"))
}

/// Write `events` (names and ids, as [`Trace::event_names`] gives them; all with events when
/// None) of `trace` into `dir` in LISA's layout, with `meta.json`. `symbols` are the
/// kernel's (the trace's kallsyms; `trace.kallsyms` when it was loaded with them).
pub fn write_dir(
    trace: &Trace,
    symbols: &Kallsyms,
    dir: &Path,
    events: Option<&[(String, u16)]>,
) -> Result<Written, LisaError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |err| LisaError::Io { path, err }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let named = trace.event_names();
    let wanted: Vec<(String, u16)> = match events {
        Some(e) => e.to_vec(),
        None => named.iter().map(|(n, id, _)| (n.clone(), *id)).collect(),
    };
    let ts = unique_timestamps(&trace.events.ts);
    let ids: Vec<u16> = wanted.iter().map(|(_, id)| *id).collect();
    let rows = trace.rows_of_each(&ids);
    let clock = trace.meta.clock.clone();
    let monotonic = matches!(
        clock.as_deref(),
        Some("local" | "global" | "uptime" | "x86-tsc" | "mono" | "mono_raw" | "counter")
    );
    let mut files = Vec::new();
    let mut info = Vec::new();
    for ((name, id), rows) in wanted.iter().zip(&rows) {
        let b = batch(trace, *id, rows, &ts).map_err(|err| LisaError::Arrow {
            event: name.clone(),
            err,
        })?;
        let file = file_name(name);
        let path = dir.join(&file);
        let mut props = WriterProperties::builder()
            .set_created_by(format!("pmlab {}", env!("CARGO_PKG_VERSION")))
            .set_dictionary_enabled(false)
            .set_key_value_metadata(Some(vec![
                KeyValue::new("FTRACE:event".into(), name.clone()),
                KeyValue::new("FTRACE:clock".into(), clock.clone()),
            ]));
        if monotonic {
            props = props.set_sorting_columns(Some(vec![SortingColumn {
                column_idx: 0,
                descending: false,
                nulls_first: false,
            }]));
        }
        // Task names and the like repeat: strings are dictionary-encoded, as trace-dump does.
        for f in b.schema().fields() {
            if f.data_type() == &DataType::Utf8 {
                props =
                    props.set_column_dictionary_enabled(ColumnPath::from(f.name().as_str()), true);
            }
        }
        let pq = |err| LisaError::Parquet {
            path: path.clone(),
            err,
        };
        let out = std::fs::File::create(&path).map_err(io(&path))?;
        let mut w = parquet::arrow::ArrowWriter::try_new(out, b.schema(), Some(props.build()))
            .map_err(pq)?;
        w.write(&b).map_err(pq)?;
        w.close().map_err(pq)?;
        info.push(serde_json::json!({
            "event": name,
            "errors": [],
            "nr-rows": b.num_rows(),
            "path": file,
            "format": "parquet",
        }));
        files.push(path);
    }
    // Every address with the names at it, as trace-dump lists them.
    let mut syms: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (a, n) in symbols.iter() {
        syms.entry(a).or_default().push(n);
    }
    let mut pid_comms: Vec<(i32, &str)> = trace
        .cmdlines
        .iter()
        .map(|(p, c)| (*p, c.as_str()))
        .collect();
    pid_comms.sort_unstable();
    let range = match (ts.first(), ts.last()) {
        (Some(&a), Some(&b)) => (a, b),
        _ => (0, 0),
    };
    let mut meta = serde_json::json!({
        "pid-comms": pid_comms,
        "cpus-count": trace.cpus,
        "symbols-address": syms.into_iter().collect::<Vec<_>>(),
        "events-info": info,
        "time-range": [range.0, range.1],
    });
    if let Some(c) = &clock {
        meta["trace-clock"] = c.as_str().into();
    }
    let meta_path = dir.join("meta.json");
    let f = std::fs::File::create(&meta_path).map_err(io(&meta_path))?;
    serde_json::to_writer(std::io::BufWriter::new(f), &meta)?;
    Ok(Written {
        files,
        meta: meta_path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_made_unique_as_trace_dump_does() {
        assert_eq!(
            unique_timestamps(&[5, 5, 6, 100, 100]),
            vec![5, 7, 9, 100, 102]
        );
        assert_eq!(unique_timestamps(&[0, 1]), vec![2, 4]);
    }

    #[test]
    fn base_types_drop_qualifiers_and_bounds() {
        assert_eq!(base_type("const char *"), "char *");
        assert_eq!(base_type("__data_loc char[]"), "char");
        assert_eq!(base_type("u8[34]"), "u8");
        assert_eq!(base_type("volatile unsigned long"), "unsigned long");
    }
}
