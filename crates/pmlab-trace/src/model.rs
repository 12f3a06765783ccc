//! The decoded-trace model: event formats and columnar event storage shared by
//! every reader and by the analyses.

use serde::Serialize;
use std::collections::HashMap;

/// Byte order of the traced machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub enum Endian {
    /// Little-endian (x86, arm64).
    #[default]
    Little,
    /// Big-endian.
    Big,
}

/// How a field's bytes are to be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum FieldKind {
    /// An integer (or pointer) of `size` bytes.
    Int,
    /// A fixed array: `count` elements of `elem_size` bytes (`char comm[16]` is a string).
    Array {
        /// Bytes per element.
        elem_size: u32,
        /// Number of elements.
        count: u32,
        /// A `char` array: read as a string up to the first NUL.
        is_char: bool,
    },
    /// `__data_loc`: a u32 holding (len << 16 | offset) into the record; char strings or other arrays.
    DataLoc {
        /// A string (`__data_loc char[]`) rather than an array of integers.
        is_char: bool,
    },
    /// `__rel_loc`: like DataLoc, offset relative to the end of the field.
    RelLoc {
        /// A string rather than an array of integers.
        is_char: bool,
    },
}

/// One field of an event format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Field {
    /// Field name (`prev_pid`, `common_pid`).
    pub name: String,
    /// The C type as written in the format file (`unsigned int`, `__data_loc char[]`, ...).
    pub type_name: String,
    /// Offset in the record, bytes.
    pub offset: u32,
    /// Size in the record, bytes (4 for a `__data_loc` word).
    pub size: u32,
    /// Signed integer (the format file's `signed:1`).
    pub signed: bool,
    /// Scalar, fixed array, or dynamic array.
    pub kind: FieldKind,
    /// True for `common_*` fields.
    pub common: bool,
}

/// An event's format, parsed from `events/SYSTEM/NAME/format`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventFormat {
    /// Event id: what records carry to name their format.
    pub id: u16,
    /// System (the `events/` directory): `sched`, `power`, `irq`.
    pub system: String,
    /// Event name: `sched_switch`.
    pub name: String,
    /// All fields, common ones first, in file order.
    pub fields: Vec<Field>,
    /// The `print fmt:` line, as written.
    pub print_fmt: String,
}

impl EventFormat {
    /// The field called `name`, if any.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// The bytes events point into: an owned buffer, or a read-only map of the trace file
/// (uncompressed trace.dat data is decoded in place, without a copy).
/// Reads like a `[u8]`; the Vec-style writers turn a mapped buffer into an owned one first.
#[derive(Clone, Default)]
pub struct Raw(RawInner);

#[derive(Clone)]
enum RawInner {
    Owned(Vec<u8>),
    Mapped(std::sync::Arc<memmap2::Mmap>),
}

impl Default for RawInner {
    fn default() -> Self {
        RawInner::Owned(Vec::new())
    }
}

impl Raw {
    /// An empty owned buffer.
    pub fn new() -> Raw {
        Raw::default()
    }
    /// A map of a whole file.
    pub fn mapped(map: std::sync::Arc<memmap2::Mmap>) -> Raw {
        Raw(RawInner::Mapped(map))
    }
    /// The bytes.
    #[inline(always)]
    pub fn as_slice(&self) -> &[u8] {
        match &self.0 {
            RawInner::Owned(v) => v,
            RawInner::Mapped(m) => m,
        }
    }
    /// The bytes as an owned, growable Vec (copies a mapped buffer once).
    pub fn to_mut(&mut self) -> &mut Vec<u8> {
        if let RawInner::Mapped(m) = &self.0 {
            self.0 = RawInner::Owned(m.to_vec());
        }
        match &mut self.0 {
            RawInner::Owned(v) => v,
            RawInner::Mapped(_) => unreachable!(),
        }
    }
    /// Append one byte (copies a mapped buffer first).
    pub fn push(&mut self, b: u8) {
        self.to_mut().push(b)
    }
    /// Append bytes (copies a mapped buffer first).
    pub fn extend_from_slice(&mut self, s: &[u8]) {
        self.to_mut().extend_from_slice(s)
    }
    /// Resize, filling with `v` (copies a mapped buffer first).
    pub fn resize(&mut self, n: usize, v: u8) {
        self.to_mut().resize(n, v)
    }
    /// Empty it (an owned empty buffer; a map is dropped).
    pub fn clear(&mut self) {
        self.0 = RawInner::Owned(Vec::new());
    }
}

impl std::ops::Deref for Raw {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl From<Vec<u8>> for Raw {
    fn from(v: Vec<u8>) -> Raw {
        Raw(RawInner::Owned(v))
    }
}

impl std::fmt::Debug for Raw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Raw({} bytes)", self.len())
    }
}

impl PartialEq for Raw {
    fn eq(&self, other: &Raw) -> bool {
        self.as_slice() == other.as_slice()
    }
}

/// Events in columns, sorted by timestamp. Event `i`'s record (the payload that
/// starts with the common fields) is `raw[off .. off + len]`, both packed in `loc[i]`.
#[derive(Debug, Clone, Default)]
pub struct Events {
    /// Timestamps, in the trace clock's unit (ns for the usual clocks), non-decreasing.
    pub ts: Vec<u64>,
    /// CPU of each event (kernel numbering).
    pub cpu: Vec<u16>,
    /// `common_pid` of each event (0 for the idle task).
    pub pid: Vec<i32>,
    /// Event id of each event (a key of [`Trace::formats`]).
    pub id: Vec<u16>,
    /// `off << LOC_LEN_BITS | len` (see [`Events::loc`]): one 8-byte column instead of 12 bytes.
    pub loc: Vec<u64>,
    /// The records' bytes that `loc` points into.
    pub raw: Raw,
}

/// How many events ahead [`Events::prefetch_ahead`] asks for a record (the analyses ran
/// faster with 16 than without; other distances were not tried).
pub const PREFETCH_AHEAD: usize = 16;

/// Events per block that [`Events::for_each_of`] tests at once for its id.
const ID_BLOCK: usize = 256;

/// Bits of a record length in [`Events::loc`]; offsets get the other 40 (1 TiB).
pub const LOC_LEN_BITS: u32 = 24;
/// The largest record offset [`Events::loc`] holds, plus one.
pub const LOC_MAX_OFF: u64 = 1 << (64 - LOC_LEN_BITS);
const LOC_LEN_MASK: u64 = (1 << LOC_LEN_BITS) - 1;

impl Events {
    /// Number of events.
    pub fn len(&self) -> usize {
        self.ts.len()
    }
    /// No events.
    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }
    /// Packs a record's offset in `raw` and its length (below 2^24) into a `loc` entry.
    #[inline(always)]
    pub fn loc(off: usize, len: usize) -> u64 {
        debug_assert!((len as u64) <= LOC_LEN_MASK && (off as u64) < LOC_MAX_OFF);
        ((off as u64) << LOC_LEN_BITS) | len as u64
    }
    /// Offset in `raw` of event `i`'s record.
    #[inline]
    pub fn off(&self, i: usize) -> usize {
        (self.loc[i] >> LOC_LEN_BITS) as usize
    }
    /// Length of event `i`'s record.
    #[inline]
    pub fn rec_len(&self, i: usize) -> usize {
        (self.loc[i] & LOC_LEN_MASK) as usize
    }
    /// Appends an event whose record is `raw[off .. off + len]`.
    pub fn push(&mut self, ts: u64, cpu: u16, pid: i32, id: u16, off: usize, len: usize) {
        self.ts.push(ts);
        self.cpu.push(cpu);
        self.pid.push(pid);
        self.id.push(id);
        self.loc.push(Events::loc(off, len));
    }
    /// Hint that a loop at event `i` will soon read the record [`PREFETCH_AHEAD`] events
    /// on (if in range): analyses walk the records of a file far larger than the caches,
    /// and a load issued ahead overlaps its cache and TLB miss with the work in between.
    #[inline(always)]
    pub fn prefetch_ahead(&self, i: usize) {
        self.prefetch(i + PREFETCH_AHEAD);
    }
    /// Hint that event `i`'s record will be read soon (see [`Events::prefetch_ahead`]).
    #[inline(always)]
    pub fn prefetch(&self, i: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Some(&l) = self.loc.get(i) {
            let p = self
                .raw
                .as_slice()
                .as_ptr()
                .wrapping_add((l >> LOC_LEN_BITS) as usize);
            // The record's last byte too: one of 40-70 bytes often spans two cache lines.
            let end = p.wrapping_add(((l & LOC_LEN_MASK) as usize).saturating_sub(1));
            // SAFETY: a prefetch is a hint; it never faults, whatever the address.
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch(p as *const i8, _MM_HINT_T0);
                _mm_prefetch(end as *const i8, _MM_HINT_T0);
            };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = i;
    }
    /// One more than the largest CPU number of any event (0 without events).
    pub fn cpu_slots(&self) -> usize {
        self.cpu.iter().max().map_or(0, |&c| usize::from(c) + 1)
    }
    /// Calls `f(i)` for each event `i` whose id is `id`, in order. Blocks of events without
    /// one are skipped at memory speed: most analyses look for a rare event.
    pub fn for_each_of(&self, id: u16, mut f: impl FnMut(usize)) {
        for (b, block) in self.id.chunks(ID_BLOCK).enumerate() {
            if block.iter().fold(false, |hit, &x| hit | (x == id)) {
                for (k, _) in block.iter().enumerate().filter(|(_, &x)| x == id) {
                    f(b * ID_BLOCK + k);
                }
            }
        }
    }
    /// Whether any event has one of `ids`.
    pub fn has_any(&self, ids: &[u16]) -> bool {
        self.id.chunks(ID_BLOCK).any(|block| {
            ids.iter()
                .any(|&id| block.iter().fold(false, |hit, &x| hit | (x == id)))
        })
    }
    /// The record bytes of event `i`.
    #[inline(always)]
    pub fn record(&self, i: usize) -> &[u8] {
        let l = self.loc[i];
        let o = (l >> LOC_LEN_BITS) as usize;
        &self.raw[o..o + (l & LOC_LEN_MASK) as usize]
    }
}

/// A resolved field: what an analysis looks up once and then reads per event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldRef {
    /// Offset in the record, bytes.
    pub offset: u32,
    /// Size in the record, bytes.
    pub size: u32,
    /// Signed integer.
    pub signed: bool,
    /// Inline, or where a dynamic array's (offset, length) word points.
    pub loc: LocKind,
}

/// An integer of `b.len()` bytes (at most 8) in the trace's byte order.
#[inline(always)]
pub fn uint(b: &[u8], big: bool) -> u64 {
    if !big {
        match *b {
            [x] => return u64::from(x),
            [a, b] => return u64::from(u16::from_le_bytes([a, b])),
            [a, b, c, d] => return u64::from(u32::from_le_bytes([a, b, c, d])),
            [a, b, c, d, e, f, g, h] => return u64::from_le_bytes([a, b, c, d, e, f, g, h]),
            _ => {}
        }
    }
    let mut v = 0u64;
    if big {
        for x in b.iter().take(8) {
            v = (v << 8) | u64::from(*x);
        }
    } else {
        for (k, x) in b.iter().enumerate().take(8) {
            v |= u64::from(*x) << (8 * k);
        }
    }
    v
}

/// A field's bytes in a record: its inline bytes, or the array a `__data_loc`/`__rel_loc`
/// points at; empty when out of bounds. With `flexible`, a size-0 inline array (`print`'s
/// `char buf[]`) is the rest of the record. Every reader of field bytes goes through here.
#[inline(always)]
pub fn field_bytes(
    rec: &[u8],
    (offset, size, loc): (usize, usize, LocKind),
    big: bool,
    flexible: bool,
) -> &[u8] {
    let Some(b) = rec.get(offset..offset + size) else {
        return &[];
    };
    match loc {
        LocKind::Inline if size == 0 && flexible => &rec[offset..],
        LocKind::Inline => b,
        LocKind::DataLoc | LocKind::RelLoc => {
            let v = uint(&b[..size.min(4)], big) as usize;
            let (mut start, len) = (v & 0xffff, v >> 16);
            if loc == LocKind::RelLoc {
                start += offset + size;
            }
            rec.get(start..start + len).unwrap_or(&[])
        }
    }
}

/// Where a field's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocKind {
    /// In the record at the field's offset.
    Inline,
    /// `__data_loc`: a u32 (len << 16 | offset from the record start).
    DataLoc,
    /// `__rel_loc`: like `DataLoc`, offset from the end of the field.
    RelLoc,
}

/// Facts about where a trace came from, for `pmlab trace info` and `pmlab dump`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TraceMeta {
    /// trace.dat file version (6 or 7); 0 for ftrace text.
    pub version: u32,
    /// Compression of a v7 file ("zstd", "zlib"), None when uncompressed.
    pub compression: Option<String>,
    /// Trace clock ("local", "global", "x86-tsc", ...), when the file says.
    pub clock: Option<String>,
    /// The CPU count trace-cmd reports (`cpus=N`).
    pub cpus_reported: u32,
    /// Buffer (instance) names; index 0 is the top buffer (""). One entry when the file has no instances.
    pub buffers: Vec<String>,
    /// Per event: index into `buffers`. Empty when all events come from buffer 0.
    pub event_buffer: Vec<u8>,
    /// Events lost before event `index` (as trace-cmd reports them): -1 when the count is unknown.
    pub missed_before: Vec<(usize, i64)>,
    /// True when timestamps are in nanoseconds (not raw counter ticks such as x86-tsc).
    pub ts_in_ns: bool,
    /// The recording machine's `uname` as the file's UNAME option has it (trace-cmd writes
    /// "sysname nodename release version machine", pmlab "sysname nodename release machine").
    pub uname: Option<String>,
    /// The window `[from, to)` (trace ns) a trace was cut to ([`Trace::window`]): the
    /// analyses then take it as the trace's span. None: first to last event.
    pub window: Option<(u64, u64)>,
}

impl TraceMeta {
    /// The kernel release (`uname -r`), the third word of [`TraceMeta::uname`].
    pub fn kernel_release(&self) -> Option<&str> {
        self.uname.as_deref()?.split_whitespace().nth(2)
    }
}

/// A whole decoded trace.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// Byte order of the traced machine.
    pub endian: Endian,
    /// The traced kernel's `long` size, bytes (4 or 8).
    pub long_size: u32,
    /// Ring-buffer page (sub-buffer) size, bytes.
    pub page_size: u32,
    /// Number of CPUs: the file's CPU count, or more when events name a higher CPU.
    pub cpus: u32,
    /// Formats by event id.
    pub formats: HashMap<u16, EventFormat>,
    /// The events, in columns, sorted by timestamp.
    pub events: Events,
    /// pid → comm from saved_cmdlines.
    pub cmdlines: HashMap<i32, String>,
    /// Kernel symbols from kallsyms, sorted by address.
    pub kallsyms: crate::kallsyms::Kallsyms,
    /// printk format strings by address (for bprint).
    pub printk_formats: HashMap<u64, String>,
    /// Events lost per CPU as counted from page headers (None where unknown).
    pub lost: Vec<Option<u64>>,
    /// Free-form source description: "trace.dat v6", "trace.dat v7 (zstd)", "ftrace text".
    pub source: String,
    /// Version, compression, buffers, missed-event marks.
    pub meta: TraceMeta,
}

impl Trace {
    /// The span the analyses measure over: the window the trace was cut to
    /// ([`Trace::window`]), else its first to last event (0, 0 without events).
    pub fn bounds(&self) -> (u64, u64) {
        match self.meta.window {
            Some(w) => w,
            None => (
                self.events.ts.first().copied().unwrap_or(0),
                self.events.ts.last().copied().unwrap_or(0),
            ),
        }
    }

    /// The events with timestamps in `[from, to)` as a trace of their own (formats,
    /// symbols and names shared by copy), its span that window: what `pmlab analyze
    /// --from --to` analyses, and what `pmlab top` analyses per interval. Lost-event counts
    /// and missed-event marks stay the whole trace's.
    pub fn window(&self, from: u64, to: u64) -> Trace {
        let ev = &self.events;
        let a = ev.ts.partition_point(|&t| t < from);
        let b = ev.ts.partition_point(|&t| t < to).max(a);
        let mut out = Events::default();
        let mut raw = Vec::new();
        for i in a..b {
            let r = ev.record(i);
            let off = raw.len();
            raw.extend_from_slice(r);
            out.push(ev.ts[i], ev.cpu[i], ev.pid[i], ev.id[i], off, r.len());
        }
        out.raw = Raw::from(raw);
        let mut meta = self.meta.clone();
        meta.window = Some((from, to.max(from)));
        meta.event_buffer = meta.event_buffer.get(a..b).unwrap_or_default().to_vec();
        meta.missed_before = Vec::new();
        Trace {
            endian: self.endian,
            long_size: self.long_size,
            page_size: self.page_size,
            cpus: self.cpus,
            formats: self.formats.clone(),
            events: out,
            cmdlines: self.cmdlines.clone(),
            kallsyms: self.kallsyms.clone(),
            printk_formats: self.printk_formats.clone(),
            lost: self.lost.clone(),
            source: self.source.clone(),
            meta,
        }
    }

    /// The id of `system:name` (or bare `name`), if the trace has that event.
    pub fn event_id(&self, system: &str, name: &str) -> Option<u16> {
        self.formats
            .values()
            .find(|f| f.name == name && (system.is_empty() || f.system == system))
            .map(|f| f.id)
    }

    /// Resolve `field` of event `id` for fast per-event reads.
    pub fn field(&self, id: u16, field: &str) -> Option<FieldRef> {
        let f = self.formats.get(&id)?.field(field)?;
        let loc = match f.kind {
            FieldKind::DataLoc { .. } => LocKind::DataLoc,
            FieldKind::RelLoc { .. } => LocKind::RelLoc,
            _ => LocKind::Inline,
        };
        Some(FieldRef {
            offset: f.offset,
            size: f.size,
            signed: f.signed,
            loc,
        })
    }

    #[inline(always)]
    pub(crate) fn read_uint(&self, b: &[u8]) -> u64 {
        uint(b, self.endian == Endian::Big)
    }

    /// Unsigned value of an integer field of event `i` (0 if out of bounds).
    #[inline(always)]
    pub fn u64_at(&self, i: usize, f: FieldRef) -> u64 {
        let r = self.events.record(i);
        let (o, s) = (f.offset as usize, f.size as usize);
        r.get(o..o + s).map_or(0, |b| self.read_uint(b))
    }

    /// Signed value of an integer field of event `i` (sign-extended from its size).
    #[inline(always)]
    pub fn i64_at(&self, i: usize, f: FieldRef) -> i64 {
        let v = self.u64_at(i, f);
        let bits = f.size.min(8) * 8;
        if bits == 64 || bits == 0 {
            v as i64
        } else {
            ((v << (64 - bits)) as i64) >> (64 - bits)
        }
    }

    /// The bytes of a fixed array or a `__data_loc`/`__rel_loc` field of event `i`.
    #[inline]
    pub fn bytes_at(&self, i: usize, f: FieldRef) -> &[u8] {
        self.field_bytes(i, f, false)
    }

    /// As [`Trace::bytes_at`], a size-0 inline array (`print`'s `char buf[]`) being the rest
    /// of the record.
    pub fn flexible_bytes_at(&self, i: usize, f: FieldRef) -> &[u8] {
        self.field_bytes(i, f, true)
    }

    #[inline]
    fn field_bytes(&self, i: usize, f: FieldRef, flexible: bool) -> &[u8] {
        let at = (f.offset as usize, f.size as usize, f.loc);
        field_bytes(
            self.events.record(i),
            at,
            self.endian == Endian::Big,
            flexible,
        )
    }

    /// A char array or string field of event `i`, cut at the first NUL.
    #[inline]
    pub fn str_at(&self, i: usize, f: FieldRef) -> &str {
        let b = self.bytes_at(i, f);
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        std::str::from_utf8(&b[..end]).unwrap_or("")
    }

    /// The kernel symbol containing `addr`, if kallsyms has one at or below it.
    pub fn sym(&self, addr: u64) -> Option<&str> {
        self.kallsyms.containing(addr)
    }

    /// The command name of `pid` from saved cmdlines.
    pub fn comm(&self, pid: i32) -> Option<&str> {
        self.cmdlines.get(&pid).map(|s| s.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_each_of_finds_every_event_across_blocks() {
        let mut e = Events::default();
        for i in 0..1000u64 {
            let id = if i % 300 == 7 || i == 999 { 5 } else { 1 };
            e.push(i, 0, 0, id, 0, 0);
        }
        let mut got = Vec::new();
        e.for_each_of(5, |i| got.push(i));
        assert_eq!(got, [7, 307, 607, 907, 999]);
        assert!(e.has_any(&[9, 5]));
        assert!(!e.has_any(&[9, 2]));
        assert!(!Events::default().has_any(&[1]));
    }
}
