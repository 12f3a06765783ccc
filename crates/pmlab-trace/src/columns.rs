//! Typed columns of one event for a selection of its rows: the rows of an event id in a
//! time and CPU window, and each format field read into a vector of its own type
//! (integers by size and sign, `char` arrays and strings as text, other arrays and
//! `__data_loc` arrays as lists). What the Python tables (`pmlab.open(...).arrow`) are built from.

use std::ops::Range;

use crate::model::{field_bytes, uint, Field, FieldKind, LocKind, Trace};

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
    Int { size: u8, signed: bool },
    /// Text: a `char` array or `__data_loc char[]` string, cut at the first NUL.
    Str,
}

/// The type of one field's column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Scalar(Scalar),
    /// A list of integers per row (fixed arrays, `__data_loc` arrays, odd-sized fields as bytes).
    List {
        size: u8,
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

/// One column's values. Strings and lists use offsets (`len + 1` of them) into their data,
/// as Arrow lays them out.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    /// UTF-8 text (invalid bytes replaced).
    Str {
        offsets: Vec<i64>,
        data: Vec<u8>,
    },
    /// Integer lists: row `r` holds `values[offsets[r] .. offsets[r + 1]]`.
    List {
        offsets: Vec<i64>,
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
            Values::Str { offsets, .. } | Values::List { offsets, .. } => {
                offsets.len().saturating_sub(1)
            }
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One event's columns over a part of the trace ([`Trace::columns_of_each`]): the common
/// ones, then its fields' in the order asked.
#[derive(Debug, Clone, PartialEq)]
pub struct EventColumns {
    pub ts: Vec<u64>,
    pub cpu: Vec<u32>,
    pub pid: Vec<i32>,
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
    /// records (each record is read from memory once, for all its fields).
    pub fn columns(&self, fields: &[&Field], rows: &[u32]) -> Vec<Values> {
        let big = self.endian == crate::model::Endian::Big;
        let mut builders: Vec<Builder> = fields
            .iter()
            .map(|f| Builder::new(f, self.long_size, rows.len()))
            .collect();
        let ev = &self.events;
        for (k, &i) in rows.iter().enumerate() {
            if let Some(&ahead) = rows.get(k + crate::model::PREFETCH_AHEAD) {
                ev.prefetch(ahead as usize);
            }
            let rec = ev.record(i as usize);
            for b in builders.iter_mut() {
                b.push(rec, big);
            }
        }
        builders.into_iter().map(Builder::finish).collect()
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
            ts: Vec<u64>,
            cpu: Vec<u32>,
            pid: Vec<i32>,
            builders: Vec<Builder>,
        }
        let mut parts: Vec<Part> = events
            .iter()
            .zip(&counts)
            .map(|((_, fields), &n)| Part {
                ts: crate::dat::huge_vec(n),
                cpu: crate::dat::huge_vec(n),
                pid: crate::dat::huge_vec(n),
                builders: fields
                    .iter()
                    .map(|f| Builder::new(f, self.long_size, n))
                    .collect(),
            })
            .collect();
        for i in range {
            let Some(p) = parts.get_mut(slot[ev.id[i] as usize] as usize) else {
                continue;
            };
            p.ts.push(ev.ts[i]);
            p.cpu.push(u32::from(ev.cpu[i]));
            p.pid.push(ev.pid[i]);
            let rec = ev.record(i);
            for b in p.builders.iter_mut() {
                b.push(rec, big);
            }
        }
        parts
            .into_iter()
            .map(|p| EventColumns {
                ts: p.ts,
                cpu: p.cpu,
                pid: p.pid,
                fields: p.builders.into_iter().map(Builder::finish).collect(),
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
        offsets: Vec<i64>,
        data: Vec<u8>,
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
        let mut offsets = crate::dat::huge_vec(rows + 1);
        offsets.push(0i64);
        match ColumnType::of(field, long_size) {
            ColumnType::Scalar(Scalar::Int { size, signed }) => Builder::Int {
                at,
                out: int_values(size, signed, rows),
            },
            ColumnType::Scalar(Scalar::Str) => Builder::Str {
                at,
                offsets,
                data: crate::dat::huge_vec(rows * 16),
            },
            ColumnType::List { size, signed } => Builder::List {
                at,
                elem: size as usize,
                offsets,
                out: int_values(size, signed, 0),
            },
        }
    }

    #[inline(always)]
    fn push(&mut self, rec: &[u8], big: bool) {
        match self {
            Builder::Int { at, out } => {
                let v = rec
                    .get(at.offset..at.offset + at.size)
                    .map_or(0, |b| uint(b, big));
                out.push_int(v);
            }
            Builder::Str { at, offsets, data } => {
                let b = at.bytes(rec, big);
                let b = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
                // Task names are ASCII: an inlined check before the general UTF-8 one.
                if b.is_ascii() || std::str::from_utf8(b).is_ok() {
                    data.extend_from_slice(b);
                } else {
                    data.extend_from_slice(String::from_utf8_lossy(b).as_bytes());
                }
                offsets.push(data.len() as i64);
            }
            Builder::List {
                at,
                elem,
                offsets,
                out,
            } => {
                for chunk in at.bytes(rec, big).chunks_exact(*elem) {
                    out.push_int(uint(chunk, big));
                }
                offsets.push(out.len() as i64);
            }
        }
    }

    fn finish(self) -> Values {
        match self {
            Builder::Int { out, .. } => out,
            Builder::Str { offsets, data, .. } => Values::Str { offsets, data },
            Builder::List { offsets, out, .. } => Values::List {
                offsets,
                values: Box::new(out),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut b = Builder::new(&f, 8, 1);
        b.push(&rec, false);
        match b.finish() {
            Values::Str { offsets, data } => {
                assert_eq!(offsets, vec![0, data.len() as i64]);
                assert_eq!(data, b"pmlab: recording CPU 0\n");
            }
            _ => panic!("a char array is a string column"),
        }
        // past the record: empty, not a panic
        f.offset = 64;
        assert!(field_bytes(&rec, (64, 0, LocKind::Inline), false, true).is_empty());
    }
}
