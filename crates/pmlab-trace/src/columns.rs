//! Typed columns of one event for a selection of its rows: the rows of an event id in a
//! time and CPU window, and each format field read into a vector of its own type
//! (integers by size and sign, `char` arrays and strings as text, other arrays and
//! `__data_loc` arrays as lists). What the Python tables (`pmlab.open(...).arrow`) are built from.

use std::ops::Range;

use crate::model::{field_bytes, uint, Events, Field, FieldKind, LocKind, Trace};
use arrow_array::builder::make_view;

/// Events handled together by the column builders: their records (~40-70 bytes each) stay
/// in the L2 cache while each field of each event is read.
const CHUNK: usize = 2048;

/// Which rows of an event to take: a CPU set and a `[start, end)` timestamp window.
#[derive(Debug, Clone, Default)]
pub struct Window {
    /// Only these CPUs (None: all).
    pub cpus: Option<Vec<u32>>,
    /// First timestamp kept (inclusive), in the trace clock's unit.
    pub start: Option<u64>,
    /// Timestamps from here on are dropped (exclusive).
    pub end: Option<u64>,
}

/// The element type of a field's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    /// An integer of 1, 2, 4 or 8 bytes.
    Int {
        /// Bytes per value.
        size: u8,
        /// Two's-complement signed (the format file's `signed:1`).
        signed: bool,
    },
    /// Text: a `char` array or `__data_loc char[]` string, cut at the first NUL.
    Str,
}

/// The type of one field's column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// One value per row.
    Scalar(Scalar),
    /// A list of integers per row (fixed arrays, `__data_loc` arrays, odd-sized fields as bytes).
    List {
        /// Bytes per element.
        size: u8,
        /// Signed elements.
        signed: bool,
    },
}

/// Integer sizes a column holds; anything else is read as bytes.
fn int_size(size: u32) -> Option<u8> {
    matches!(size, 1 | 2 | 4 | 8).then_some(size as u8)
}

/// The element type named in a C declaration (`unsigned long[]`, `__u8[]`), for
/// dynamic arrays whose format gives no element size.
fn elem_size_of(type_name: &str, long_size: u32) -> u32 {
    let base = type_name
        .trim_start_matches("__data_loc")
        .trim_start_matches("__rel_loc")
        .split('[')
        .next()
        .unwrap_or("")
        .trim();
    if base.contains("long long") {
        return 8;
    }
    if base.ends_with("long") || base.ends_with('*') {
        return long_size;
    }
    match base.rsplit(' ').next().unwrap_or("") {
        "u16" | "s16" | "short" | "__u16" | "__s16" => 2,
        "u32" | "s32" | "int" | "__u32" | "__s32" | "unsigned" | "pid_t" => 4,
        "u64" | "s64" | "__u64" | "__s64" => 8,
        _ => 1,
    }
}

/// Whether a declaration's element type is plain `char` (text), not `unsigned char` or `u8`.
fn is_text(type_name: &str) -> bool {
    let base = type_name
        .trim_start_matches("__data_loc")
        .trim_start_matches("__rel_loc")
        .split('[')
        .next()
        .unwrap_or("")
        .trim();
    matches!(base, "char" | "const char" | "signed char")
}

impl ColumnType {
    /// The column type of `field` in a trace whose `long` is `long_size` bytes.
    pub fn of(field: &Field, long_size: u32) -> ColumnType {
        match field.kind {
            // Kernels before 3.15 or so write print's flexible `char buf[]` as `char buf;`
            // of size 0: the text to the record's end, as the bracketed form.
            FieldKind::Int if field.size == 0 && is_text(&field.type_name) => {
                ColumnType::Scalar(Scalar::Str)
            }
            FieldKind::Int => match int_size(field.size) {
                Some(size) => ColumnType::Scalar(Scalar::Int {
                    size,
                    signed: field.signed,
                }),
                None => ColumnType::List {
                    size: 1,
                    signed: false,
                },
            },
            FieldKind::Array { elem_size, .. } => {
                if is_text(&field.type_name) {
                    return ColumnType::Scalar(Scalar::Str);
                }
                match int_size(elem_size) {
                    Some(size) => ColumnType::List {
                        size,
                        signed: field.signed,
                    },
                    None => ColumnType::List {
                        size: 1,
                        signed: false,
                    },
                }
            }
            FieldKind::DataLoc { .. } | FieldKind::RelLoc { .. } => {
                if is_text(&field.type_name) {
                    return ColumnType::Scalar(Scalar::Str);
                }
                let size = elem_size_of(&field.type_name, long_size);
                ColumnType::List {
                    size: int_size(size).unwrap_or(1),
                    signed: field.signed && size > 1,
                }
            }
        }
    }
}

/// The column names of an event's table (Python's `t.arrow(event)`, `pmlab dump --json`):
/// `ts`, `cpu`, `pid`, `comm`, then the format's fields. A field named like a common
/// column keeps its name; the common one becomes `common_*`.
pub fn table_column_names(fields: &[&Field]) -> Vec<String> {
    let mut names: Vec<String> = ["ts", "cpu", "pid", "comm"]
        .iter()
        .map(|c| {
            if fields.iter().any(|f| f.name == *c) {
                format!("common_{c}")
            } else {
                c.to_string()
            }
        })
        .collect();
    names.extend(fields.iter().map(|f| f.name.clone()));
    names
}

/// One column's values, as Arrow lays them out: strings as string views, lists with offsets
/// (`len + 1` of them) into their values.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// Unsigned 1-byte values.
    U8(Vec<u8>),
    /// Signed 1-byte values.
    I8(Vec<i8>),
    /// Unsigned 2-byte values.
    U16(Vec<u16>),
    /// Signed 2-byte values.
    I16(Vec<i16>),
    /// Unsigned 4-byte values.
    U32(Vec<u32>),
    /// Signed 4-byte values.
    I32(Vec<i32>),
    /// Unsigned 8-byte values.
    U64(Vec<u64>),
    /// Signed 8-byte values.
    I64(Vec<i64>),
    /// UTF-8 text (invalid bytes replaced) in Arrow's string-view layout: a 16-byte view per
    /// row, its length in the low 4 bytes, then the text itself when it fits in 12 bytes
    /// (task names do), else a 4-byte prefix, an index into `buffers` and an offset there.
    Str {
        /// One 16-byte view per row.
        views: Vec<u128>,
        /// Text longer than 12 bytes, referenced by the views.
        buffers: Vec<Vec<u8>>,
    },
    /// Integer lists: row `r` holds `values[offsets[r] .. offsets[r + 1]]`.
    List {
        /// `len + 1` offsets into `values`.
        offsets: Vec<i64>,
        /// All rows' elements, concatenated.
        values: Box<Values>,
    },
}

impl Values {
    /// Number of rows.
    pub fn len(&self) -> usize {
        match self {
            Values::U8(v) => v.len(),
            Values::I8(v) => v.len(),
            Values::U16(v) => v.len(),
            Values::I16(v) => v.len(),
            Values::U32(v) => v.len(),
            Values::I32(v) => v.len(),
            Values::U64(v) => v.len(),
            Values::I64(v) => v.len(),
            Values::Str { views, .. } => views.len(),
            Values::List { offsets, .. } => offsets.len().saturating_sub(1),
        }
    }
    /// No rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The string view of a 16-byte char array (`comm` fields, most of a trace's strings) when
/// its text is ASCII and at most 12 bytes: found in one register, without a byte loop.
#[inline(always)]
fn short_ascii_of_16(b: &[u8]) -> Option<u128> {
    const ONES: u128 = u128::MAX / 255; // 0x0101…01
    const HIGH: u128 = ONES << 7; // 0x8080…80
    let x = u128::from_le_bytes(b.try_into().ok()?);
    // The lowest set bit of this marks the first NUL byte (higher ones may be false).
    let zeros = x.wrapping_sub(ONES) & !x & HIGH;
    let len = (zeros.trailing_zeros() / 8) as usize; // 16 when there is no NUL
    if len > 12 {
        return None;
    }
    let text = x & ((1u128 << (8 * len)) - 1);
    (text & HIGH == 0).then_some(len as u128 | text << 32)
}

/// The string view of `b` (see [`Values::Str`], made by Arrow's own `make_view`), its text
/// appended to the last of `buffers` when longer than 12 bytes.
fn view_of(b: &[u8], buffers: &mut Vec<Vec<u8>>) -> u128 {
    if b.len() <= 12 {
        return make_view(b, 0, 0);
    }
    if buffers
        .last()
        .is_none_or(|d| d.len() + b.len() > u32::MAX as usize)
    {
        buffers.push(Vec::new());
    }
    let index = buffers.len() - 1;
    let data = &mut buffers[index];
    let offset = data.len();
    data.extend_from_slice(b);
    make_view(b, index as u32, offset as u32)
}

/// One event's columns over a part of the trace ([`Trace::columns_of_each`]): the common
/// ones, then its fields' in the order asked.
#[derive(Debug, Clone, PartialEq)]
pub struct EventColumns {
    /// Timestamps, in the trace clock's unit (ns for the usual clocks).
    pub ts: Vec<u64>,
    /// CPU of each event (kernel numbering).
    pub cpu: Vec<u32>,
    /// `common_pid` of each event (0 for the idle task).
    pub pid: Vec<i32>,
    /// The asked fields' columns, in the order asked.
    pub fields: Vec<Values>,
}

impl Trace {
    /// The rows (event indices, in time order) of event `id` inside `window`.
    pub fn rows(&self, id: u16, window: &Window) -> Vec<u32> {
        let ts = &self.events.ts;
        let lo = window.start.map_or(0, |s| ts.partition_point(|&t| t < s));
        let hi = window
            .end
            .map_or(ts.len(), |e| ts.partition_point(|&t| t < e))
            .max(lo);
        let mut cpu_ok = [true; 1 << 16];
        if let Some(cpus) = &window.cpus {
            cpu_ok = [false; 1 << 16];
            for &c in cpus {
                if let Some(x) = cpu_ok.get_mut(c as usize) {
                    *x = true;
                }
            }
        }
        self.rows_in(id, lo..hi, &cpu_ok)
    }

    /// The rows of each of `ids` over the whole trace, in one pass (`out[k]` for `ids[k]`).
    pub fn rows_of_each(&self, ids: &[u16]) -> Vec<Vec<u32>> {
        let mut slot = vec![u16::MAX; 1 << 16];
        for (k, &id) in ids.iter().enumerate() {
            slot[id as usize] = k as u16;
        }
        let mut out: Vec<Vec<u32>> = vec![Vec::new(); ids.len()];
        for (i, &id) in self.events.id.iter().enumerate() {
            let s = slot[id as usize];
            if s != u16::MAX {
                out[s as usize].push(i as u32);
            }
        }
        out
    }

    fn rows_in(&self, id: u16, range: Range<usize>, cpu_ok: &[bool; 1 << 16]) -> Vec<u32> {
        let ev = &self.events;
        let base = range.start;
        let mut out = Vec::new();
        let ids = &ev.id[range.clone()];
        let cpus = &ev.cpu[range];
        for (k, (&x, &c)) in ids.iter().zip(cpus).enumerate() {
            if x == id && cpu_ok[c as usize] {
                out.push((base + k) as u32);
            }
        }
        out
    }

    /// The values of `field` (of the event the rows belong to) at each of `rows`, typed by
    /// [`ColumnType::of`]. A field that runs past a record reads as 0 or empty.
    pub fn column(&self, field: &Field, rows: &[u32]) -> Values {
        self.columns(&[field], rows).pop().expect("one column")
    }

    /// The values of several fields of one event at each of `rows`, in one pass over the
    /// records (each record is read from memory once, for all its fields). One event's rows
    /// lie apart in the trace: filling a column at a time over a chunk of them, as
    /// [`Trace::columns_of_each`] does, ran slower (figure in `bench/python-vs-text`).
    pub fn columns(&self, fields: &[&Field], rows: &[u32]) -> Vec<Values> {
        let big = self.endian == crate::model::Endian::Big;
        let mut builders: Vec<Builder> = fields
            .iter()
            .map(|f| Builder::new(f, self.long_size, rows.len()))
            .collect();
        let ev = &self.events;
        for k in 0..rows.len() {
            if let Some(&ahead) = rows.get(k + crate::model::PREFETCH_AHEAD) {
                ev.prefetch(ahead as usize);
            }
            for b in builders.iter_mut() {
                // SAFETY: k < rows.len(), the rows each builder was made for, once each.
                unsafe { b.put_rows(ev, &rows[k..k + 1], big, k) };
            }
        }
        // SAFETY: every row was written above.
        builders
            .into_iter()
            .map(|b| unsafe { b.finish(rows.len()) })
            .collect()
    }

    /// The columns of each of `events` (an id and the fields to read) over the events in
    /// `range`, in one pass in file order: each record is read once, where it lies, so the
    /// reads stream through memory instead of jumping from one event's record to the next.
    /// `out[k]` is `events[k]`'s.
    pub fn columns_of_each(
        &self,
        events: &[(u16, Vec<&Field>)],
        range: Range<usize>,
    ) -> Vec<EventColumns> {
        let big = self.endian == crate::model::Endian::Big;
        let ev = &self.events;
        let mut slot = vec![u16::MAX; 1 << 16];
        for (k, (id, _)) in events.iter().enumerate() {
            slot[*id as usize] = k as u16;
        }
        // Exact sizes first: no vector grows (and copies) during the pass.
        let mut counts = vec![0usize; events.len()];
        for &id in &ev.id[range.clone()] {
            if let Some(c) = counts.get_mut(slot[id as usize] as usize) {
                *c += 1;
            }
        }
        struct Part {
            /// Rows written so far, of `n` counted.
            k: usize,
            n: usize,
            ts: Vec<u64>,
            cpu: Vec<u32>,
            pid: Vec<i32>,
            builders: Vec<Builder>,
        }
        let mut parts: Vec<Part> = events
            .iter()
            .zip(&counts)
            .map(|((_, fields), &n)| Part {
                k: 0,
                n,
                ts: crate::dat::huge_vec(n),
                cpu: crate::dat::huge_vec(n),
                pid: crate::dat::huge_vec(n),
                builders: fields
                    .iter()
                    .map(|f| Builder::new(f, self.long_size, n))
                    .collect(),
            })
            .collect();
        // CHUNK events at a time in file order: their rows sorted by event, then each event's
        // columns filled over its rows in the chunk. The chunk's records stay in cache
        // between one event's fields and the next event's, so memory is read in one pass,
        // and each column's loop has one type (rows of events alternating row by row made
        // every value a branch the CPU could not predict).
        let mut local: Vec<Vec<u32>> = vec![Vec::with_capacity(CHUNK); events.len()];
        let mut start = range.start;
        while start < range.end {
            let end = (start + CHUNK).min(range.end);
            for l in local.iter_mut() {
                l.clear();
            }
            for i in start..end {
                ev.prefetch_ahead(i);
                if let Some(l) = local.get_mut(slot[ev.id[i] as usize] as usize) {
                    l.push(i as u32);
                }
            }
            for (p, rows) in parts.iter_mut().zip(&local) {
                if rows.is_empty() {
                    continue;
                }
                let k0 = p.k;
                // The counts above make this hold; checked, as the writes below rely on it.
                assert!(k0 + rows.len() <= p.n, "more rows than counted");
                p.k += rows.len();
                for (j, &i) in rows.iter().enumerate() {
                    let i = i as usize;
                    // SAFETY: k0 + j < n, the capacity of each vector (huge_vec(n)), each
                    // row once.
                    unsafe {
                        p.ts.as_mut_ptr().add(k0 + j).write(ev.ts[i]);
                        p.cpu.as_mut_ptr().add(k0 + j).write(u32::from(ev.cpu[i]));
                        p.pid.as_mut_ptr().add(k0 + j).write(ev.pid[i]);
                    }
                }
                for b in p.builders.iter_mut() {
                    // SAFETY: as above; the builders were made for n rows.
                    unsafe { b.put_rows(ev, rows, big, k0) };
                }
            }
            start = end;
        }
        parts
            .into_iter()
            .map(|mut p| {
                assert_eq!(p.k, p.n, "fewer rows than counted");
                // SAFETY: rows 0..n were written above, within capacity n.
                unsafe {
                    p.ts.set_len(p.n);
                    p.cpu.set_len(p.n);
                    p.pid.set_len(p.n);
                }
                let n = p.n;
                EventColumns {
                    ts: p.ts,
                    cpu: p.cpu,
                    pid: p.pid,
                    // SAFETY: every row was written.
                    fields: p
                        .builders
                        .into_iter()
                        .map(|b| unsafe { b.finish(n) })
                        .collect(),
                }
            })
            .collect()
    }

    /// The fields a table of event `id` has: every field of its format but the common ones.
    pub fn payload_fields(&self, id: u16) -> Vec<&Field> {
        self.formats
            .get(&id)
            .map(|f| f.fields.iter().filter(|x| !x.common).collect())
            .unwrap_or_default()
    }
}

/// Where a field's bytes are in a record.
#[derive(Clone, Copy)]
struct Place {
    offset: usize,
    size: usize,
    loc: LocKind,
    /// A size-0 char array (`print`'s `char buf[]`) is the rest of the record.
    flexible: bool,
}

impl Place {
    /// The field's bytes, as [`field_bytes`] reads them.
    #[inline(always)]
    fn bytes<'r>(&self, rec: &'r [u8], big: bool) -> &'r [u8] {
        field_bytes(rec, (self.offset, self.size, self.loc), big, self.flexible)
    }
}

/// A column being filled row by row.
enum Builder {
    Int {
        at: Place,
        out: Values,
    },
    Str {
        at: Place,
        views: Vec<u128>,
        buffers: Vec<Vec<u8>>,
    },
    List {
        at: Place,
        elem: usize,
        offsets: Vec<i64>,
        out: Values,
    },
}

/// An empty integer column with room for `cap` rows (large ones on huge pages: fewer faults).
fn int_values(size: u8, signed: bool, cap: usize) -> Values {
    use crate::dat::huge_vec;
    match (size, signed) {
        (1, false) => Values::U8(huge_vec(cap)),
        (1, true) => Values::I8(huge_vec(cap)),
        (2, false) => Values::U16(huge_vec(cap)),
        (2, true) => Values::I16(huge_vec(cap)),
        (4, false) => Values::U32(huge_vec(cap)),
        (4, true) => Values::I32(huge_vec(cap)),
        (_, false) => Values::U64(huge_vec(cap)),
        (_, true) => Values::I64(huge_vec(cap)),
    }
}

impl Values {
    #[inline(always)]
    fn push_int(&mut self, v: u64) {
        match self {
            Values::U8(x) => x.push(v as u8),
            Values::I8(x) => x.push(v as u8 as i8),
            Values::U16(x) => x.push(v as u16),
            Values::I16(x) => x.push(v as u16 as i16),
            Values::U32(x) => x.push(v as u32),
            Values::I32(x) => x.push(v as u32 as i32),
            Values::U64(x) => x.push(v),
            Values::I64(x) => x.push(v as i64),
            Values::Str { .. } | Values::List { .. } => unreachable!("integer columns only"),
        }
    }
}

impl Builder {
    fn new(field: &Field, long_size: u32, rows: usize) -> Builder {
        let at = Place {
            offset: field.offset as usize,
            size: field.size as usize,
            loc: match field.kind {
                FieldKind::DataLoc { .. } => LocKind::DataLoc,
                FieldKind::RelLoc { .. } => LocKind::RelLoc,
                _ => LocKind::Inline,
            },
            flexible: field.size == 0
                && ColumnType::of(field, long_size) == ColumnType::Scalar(Scalar::Str),
        };
        match ColumnType::of(field, long_size) {
            ColumnType::Scalar(Scalar::Int { size, signed }) => Builder::Int {
                at,
                out: int_values(size, signed, rows),
            },
            ColumnType::Scalar(Scalar::Str) => Builder::Str {
                at,
                views: crate::dat::huge_vec(rows),
                buffers: Vec::new(),
            },
            ColumnType::List { size, signed } => Builder::List {
                at,
                elem: size as usize,
                offsets: {
                    let mut o = crate::dat::huge_vec(rows + 1);
                    o.push(0i64);
                    o
                },
                out: int_values(size, signed, 0),
            },
        }
    }

    /// Read the records of `rows` (event indices) into rows `k0..k0 + rows.len()`.
    ///
    /// # Safety
    /// Those rows are below the row count the builder was made for ([`Builder::new`]);
    /// [`finish`] with `rows` follows once rows `0..rows` are each written once, in order.
    ///
    /// [`finish`]: Builder::finish
    #[inline(always)]
    unsafe fn put_rows(&mut self, ev: &Events, rows: &[u32], big: bool, k0: usize) {
        // A row's place is known: no length update and no capacity check per value.
        match self {
            Builder::Int { at: place, out } => {
                // The column's width is the field's (`int_size`): a fixed-size read per
                // variant. Past the record's end it reads 0.
                let o = place.offset;
                macro_rules! fill {
                    ($v:expr, $t:ty) => {{
                        const N: usize = std::mem::size_of::<$t>();
                        // SAFETY: the caller's rows are within the capacity `new` reserved.
                        let dst = unsafe { $v.as_mut_ptr().add(k0) };
                        for (j, &i) in rows.iter().enumerate() {
                            let x = ev
                                .record(i as usize)
                                .get(o..)
                                .and_then(|r| r.first_chunk::<N>())
                                .map_or(0, |b| {
                                    if big {
                                        <$t>::from_be_bytes(*b)
                                    } else {
                                        <$t>::from_le_bytes(*b)
                                    }
                                });
                            // SAFETY: as above.
                            unsafe { dst.add(j).write(x) }
                        }
                    }};
                }
                match out {
                    Values::U8(v) => fill!(v, u8),
                    Values::I8(v) => fill!(v, i8),
                    Values::U16(v) => fill!(v, u16),
                    Values::I16(v) => fill!(v, i16),
                    Values::U32(v) => fill!(v, u32),
                    Values::I32(v) => fill!(v, i32),
                    Values::U64(v) => fill!(v, u64),
                    Values::I64(v) => fill!(v, i64),
                    Values::Str { .. } | Values::List { .. } => {
                        unreachable!("integer columns only")
                    }
                }
            }
            Builder::Str {
                at: place,
                views,
                buffers,
            } => {
                // SAFETY: the caller's rows are within the capacity `new` reserved.
                let dst = unsafe { views.as_mut_ptr().add(k0) };
                for (j, &i) in rows.iter().enumerate() {
                    let b = place.bytes(ev.record(i as usize), big);
                    let v = match short_ascii_of_16(b) {
                        Some(v) => v,
                        None => string_view(b, buffers),
                    };
                    // SAFETY: as above.
                    unsafe { dst.add(j).write(v) }
                }
            }
            Builder::List {
                at: place,
                elem,
                offsets,
                out,
            } => {
                for &i in rows {
                    for chunk in place.bytes(ev.record(i as usize), big).chunks_exact(*elem) {
                        out.push_int(uint(chunk, big));
                    }
                    offsets.push(out.len() as i64);
                }
            }
        }
    }

    /// The column of rows `0..rows`, each written by [`Builder::put`].
    ///
    /// # Safety
    /// Every row below `rows` was written.
    unsafe fn finish(mut self, rows: usize) -> Values {
        // SAFETY: rows 0..rows are initialised (the caller's promise) within the capacity.
        unsafe {
            match &mut self {
                Builder::Int { out, .. } => match out {
                    Values::U8(v) => v.set_len(rows),
                    Values::I8(v) => v.set_len(rows),
                    Values::U16(v) => v.set_len(rows),
                    Values::I16(v) => v.set_len(rows),
                    Values::U32(v) => v.set_len(rows),
                    Values::I32(v) => v.set_len(rows),
                    Values::U64(v) => v.set_len(rows),
                    Values::I64(v) => v.set_len(rows),
                    Values::Str { .. } | Values::List { .. } => {}
                },
                Builder::Str { views, .. } => views.set_len(rows),
                Builder::List { .. } => {}
            }
        }
        match self {
            Builder::Int { out, .. } => out,
            Builder::Str { views, buffers, .. } => Values::Str { views, buffers },
            Builder::List { offsets, out, .. } => Values::List {
                offsets,
                values: Box::new(out),
            },
        }
    }
}

/// The view of a string field's bytes `b`: its text up to the first NUL, invalid UTF-8
/// replaced.
#[inline]
fn string_view(b: &[u8], buffers: &mut Vec<Vec<u8>>) -> u128 {
    let b = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
    // Task names are ASCII: an inlined check before the general UTF-8 one.
    if b.is_ascii() || std::str::from_utf8(b).is_ok() {
        view_of(b, buffers)
    } else {
        view_of(String::from_utf8_lossy(b).as_bytes(), buffers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Row `r` of a string column, decoded from its view (None for another type or past the
    /// end).
    fn str_at(v: &Values, r: usize) -> Option<String> {
        let Values::Str { views, buffers } = v else {
            return None;
        };
        let view = *views.get(r)?;
        let len = (view as u32) as usize;
        let bytes = if len <= 12 {
            view.to_le_bytes()[4..4 + len].to_vec()
        } else {
            let (buf, off) = ((view >> 64) as u32 as usize, (view >> 96) as u32 as usize);
            buffers.get(buf)?.get(off..off + len)?.to_vec()
        };
        String::from_utf8(bytes).ok()
    }

    fn field(decl_type: &str, size: u32, signed: bool, kind: FieldKind) -> Field {
        Field {
            name: "f".into(),
            type_name: decl_type.into(),
            offset: 0,
            size,
            signed,
            kind,
            common: false,
        }
    }

    #[test]
    fn one_pass_over_parts_equals_each_event_read_by_its_rows() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/haltpoll_pipe_off.dat"
        );
        let t = crate::open(std::path::Path::new(path)).unwrap();
        let n = t.events.len();
        let mut ids: Vec<u16> = t.events.id.clone();
        ids.sort_unstable();
        ids.dedup();
        assert!(
            ids.len() > 5 && n > 10_000,
            "{} events of {} kinds",
            n,
            ids.len()
        );
        let events: Vec<(u16, Vec<&Field>)> =
            ids.iter().map(|&id| (id, t.payload_fields(id))).collect();
        let parts = [0..n / 3, n / 3..n].map(|r| t.columns_of_each(&events, r));
        let rows = t.rows_of_each(&ids);
        for (k, (_, fields)) in events.iter().enumerate() {
            let (a, b) = (&parts[0][k], &parts[1][k]);
            let r = &rows[k];
            let ts: Vec<u64> = r.iter().map(|&i| t.events.ts[i as usize]).collect();
            assert_eq!([a.ts.clone(), b.ts.clone()].concat(), ts);
            let pid: Vec<i32> = r.iter().map(|&i| t.events.pid[i as usize]).collect();
            assert_eq!([a.pid.clone(), b.pid.clone()].concat(), pid);
            assert_eq!(a.cpu.len() + b.cpu.len(), r.len());
            let whole = t.columns(fields, r);
            for (f, w) in whole.iter().enumerate() {
                assert_eq!(a.fields[f].len() + b.fields[f].len(), w.len());
                let tail = t.columns(&[fields[f]], &r[a.ts.len()..]);
                assert_eq!(&b.fields[f], &tail[0], "{}", fields[f].name);
            }
        }
    }

    #[test]
    fn column_types_follow_the_declaration() {
        let int = field("int", 4, true, FieldKind::Int);
        assert_eq!(
            ColumnType::of(&int, 8),
            ColumnType::Scalar(Scalar::Int {
                size: 4,
                signed: true
            })
        );
        let comm = field(
            "char[16]",
            16,
            true,
            FieldKind::Array {
                elem_size: 1,
                count: 16,
                is_char: true,
            },
        );
        assert_eq!(ColumnType::of(&comm, 8), ColumnType::Scalar(Scalar::Str));
        let buf = field(
            "__u8[34]",
            34,
            false,
            FieldKind::Array {
                elem_size: 1,
                count: 34,
                is_char: true,
            },
        );
        assert_eq!(
            ColumnType::of(&buf, 8),
            ColumnType::List {
                size: 1,
                signed: false
            }
        );
        let mask = field(
            "__data_loc unsigned long[]",
            4,
            false,
            FieldKind::DataLoc { is_char: false },
        );
        assert_eq!(
            ColumnType::of(&mask, 4),
            ColumnType::List {
                size: 4,
                signed: false
            }
        );
        let name = field(
            "__data_loc char[]",
            4,
            true,
            FieldKind::DataLoc { is_char: true },
        );
        assert_eq!(ColumnType::of(&name, 8), ColumnType::Scalar(Scalar::Str));
    }

    #[test]
    fn sixteen_byte_names_take_the_register_path_or_the_general_one_alike() {
        let mut names: Vec<[u8; 16]> = Vec::new();
        for t in [
            "",
            "a",
            "swapper/1",
            "kworker/1:0H",
            "kworker/1:0HXY",
            "fifteen-chars!!",
        ] {
            let mut w = [0u8; 16];
            w[..t.len()].copy_from_slice(t.as_bytes());
            names.push(w);
        }
        names.push(*b"sixteen-chars!!!");
        let mut w = [0u8; 16];
        w[..6].copy_from_slice("caf\u{e9}!".as_bytes());
        names.push(w);
        w = [0u8; 16];
        w[..5].copy_from_slice(b"ab\0cd");
        names.push(w);
        for w in &names {
            let text = &w[..w.iter().position(|&c| c == 0).unwrap_or(16)];
            let general = view_of(text, &mut Vec::new());
            match short_ascii_of_16(w) {
                Some(v) => assert_eq!(v, general, "{w:?}"),
                None => assert!(text.len() > 12 || !text.is_ascii(), "{w:?}"),
            }
        }
        assert!(short_ascii_of_16(b"short").is_none(), "only 16-byte arrays");
    }

    #[test]
    fn string_views_hold_short_text_inline_and_point_at_long_text() {
        let mut buffers = Vec::new();
        let texts = ["", "swapper/1", "kworker/1:0H", "kworker/u4:12-events", "x"];
        let views: Vec<u128> = texts
            .iter()
            .map(|t| view_of(t.as_bytes(), &mut buffers))
            .collect();
        // Only the one longer than 12 bytes went into a buffer.
        assert_eq!(buffers, vec![b"kworker/u4:12-events".to_vec()]);
        let v = Values::Str { views, buffers };
        for (r, t) in texts.iter().enumerate() {
            assert_eq!(str_at(&v, r).as_deref(), Some(*t));
        }
        assert_eq!(str_at(&v, texts.len()), None);
    }

    #[test]
    fn a_flexible_char_array_runs_to_the_end_of_the_record() {
        // `print`'s `char buf[]`: size 0 at offset 16, the text after it, NUL-terminated.
        let mut f = field(
            "char[]",
            0,
            true,
            FieldKind::Array {
                elem_size: 1,
                count: 0,
                is_char: true,
            },
        );
        f.offset = 16;
        let mut rec = vec![0u8; 16];
        rec.extend_from_slice(b"pmlab: recording CPU 0\n\0\0");
        let mut ev = Events::default();
        ev.raw.extend_from_slice(&rec);
        ev.push(1, 0, 1, 1, 0, rec.len());
        let mut b = Builder::new(&f, 8, 1);
        // SAFETY: one row, written once.
        let v = unsafe {
            b.put_rows(&ev, &[0], false, 0);
            b.finish(1)
        };
        assert_eq!(str_at(&v, 0).as_deref(), Some("pmlab: recording CPU 0\n"));
        assert_eq!(v.len(), 1);
        // older kernels' `char buf;` of size 0 (tests/fixtures/wild/cr2_arm_*): the same text
        let mut old = field("char", 0, true, FieldKind::Int);
        old.offset = 16;
        assert_eq!(ColumnType::of(&old, 4), ColumnType::Scalar(Scalar::Str));
        let mut b = Builder::new(&old, 4, 1);
        // SAFETY: one row, written once.
        let v = unsafe {
            b.put_rows(&ev, &[0], false, 0);
            b.finish(1)
        };
        assert_eq!(str_at(&v, 0).as_deref(), Some("pmlab: recording CPU 0\n"));
        // past the record: empty, not a panic
        f.offset = 64;
        assert!(field_bytes(&rec, (64, 0, LocKind::Inline), false, true).is_empty());
    }
}
