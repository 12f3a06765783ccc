//! Decoding of one kernel ring-buffer page (sub-buffer) into event records:
//! time deltas, time-extend and absolute-timestamp records, padding, the commit
//! field and the missed-events flags. Shared by the readers and the recorder.
//!
//! The hot path ([`for_each_record`]) allocates nothing: it calls back with each
//! record's timestamp and position inside the page.

use crate::error::Malformed;
use crate::format::HeaderPage;
use crate::model::Endian;

/// `commit` flag: events were lost before this page.
pub const RB_MISSED_EVENTS: u64 = 1 << 31;
/// `commit` flag: the number of lost events is stored after the data.
pub const RB_MISSED_STORED: u64 = 1 << 30;
const COMMIT_MASK: u64 = (1 << 27) - 1;
const TS_MSB: u64 = 0xf8 << 56;

/// Type of a padding record (discarded space, or the rest of the page).
pub const TYPE_PADDING: u32 = 29;
/// Type of a time-extend record (a delta too large for the 27-bit field).
pub const TYPE_TIME_EXTEND: u32 = 30;
/// Type of an absolute timestamp record.
pub const TYPE_TIME_STAMP: u32 = 31;

/// How pages of one trace are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    /// Byte order of the pages.
    pub endian: Endian,
    /// Size of the `commit` field: the kernel's long size (4 or 8).
    pub commit_size: u32,
    /// Offset of the first event in a page.
    pub data_offset: u32,
}

impl PageLayout {
    /// The layout from the trace's byte order and its `header_page`.
    pub fn new(endian: Endian, header: &HeaderPage) -> PageLayout {
        PageLayout {
            endian,
            commit_size: header.commit_size,
            data_offset: header.data_offset,
        }
    }

    /// The layout of this machine's kernel.
    pub fn native() -> PageLayout {
        let endian = if cfg!(target_endian = "big") {
            Endian::Big
        } else {
            Endian::Little
        };
        PageLayout::new(
            endian,
            &HeaderPage::for_long_size(std::mem::size_of::<usize>() as u32),
        )
    }

    #[inline(always)]
    fn u32_at(&self, b: &[u8], o: usize) -> u32 {
        // One bounds check and one load (indexing each byte compiles to four byte loads).
        let a: [u8; 4] = b[o..o + 4].try_into().unwrap();
        match self.endian {
            Endian::Little => u32::from_le_bytes(a),
            Endian::Big => u32::from_be_bytes(a),
        }
    }

    #[inline(always)]
    fn u64_at(&self, b: &[u8], o: usize) -> u64 {
        let a: [u8; 8] = b[o..o + 8].try_into().unwrap();
        match self.endian {
            Endian::Little => u64::from_le_bytes(a),
            Endian::Big => u64::from_be_bytes(a),
        }
    }

    fn long_at(&self, b: &[u8], o: usize) -> u64 {
        if self.commit_size == 8 {
            self.u64_at(b, o)
        } else {
            self.u32_at(b, o) as u64
        }
    }
}

/// Events lost before a page, as its header tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Missed {
    /// Nothing was lost.
    None,
    /// Events were lost; the kernel did not store how many.
    Unknown,
    /// This many events were lost.
    Count(u64),
}

/// A page header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    /// Timestamp that the first record's delta is relative to.
    pub timestamp: u64,
    /// Bytes of event data after `data_offset`.
    pub commit: u32,
    /// Events lost before this page.
    pub missed: Missed,
}

/// Read a page header and check that its commit fits the page.
pub fn read_header(layout: &PageLayout, page: &[u8]) -> Result<PageHeader, Malformed> {
    let d = layout.data_offset as usize;
    if page.len() < d {
        return Err(Malformed(format!(
            "page of {} bytes is shorter than its header ({d} bytes)",
            page.len()
        )));
    }
    let timestamp = layout.u64_at(page, 0);
    let flags = layout.long_at(page, 8);
    let commit = flags & COMMIT_MASK;
    if commit as usize > page.len() - d {
        return Err(Malformed(format!(
            "corrupt page header: commit {commit} exceeds the page's {} data bytes",
            page.len() - d
        )));
    }
    let missed = if flags & RB_MISSED_EVENTS != 0 {
        if flags & RB_MISSED_STORED != 0 {
            let at = d + commit as usize;
            if at + layout.commit_size as usize > page.len() {
                return Err(Malformed(
                    "corrupt page header: missed-events count beyond the page".into(),
                ));
            }
            Missed::Count(layout.long_at(page, at))
        } else {
            Missed::Unknown
        }
    } else {
        Missed::None
    };
    Ok(PageHeader {
        timestamp,
        commit: commit as u32,
        missed,
    })
}

/// One data record of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Absolute timestamp, in the trace clock's unit.
    pub ts: u64,
    /// Offset of the payload (common fields first) from the page start.
    pub offset: u32,
    /// Payload length as the kernel stored it (rounded up to 4 bytes).
    pub len: u32,
    /// True for the page's first record when no time-extend or padding precedes it:
    /// trace-cmd reports the page's missed events only on such a record.
    pub at_page_start: bool,
}

/// Decode the next data record of one page's data, skipping time and padding records.
/// `data` is the page's committed data; `pos` and `ts` carry the walk state.
/// Returns (ts, payload offset in `data`, payload length, record started at data offset 0).
#[inline(always)]
fn next_in_page<const BIG: bool>(
    data: &[u8],
    pos: &mut usize,
    ts: &mut u64,
) -> Result<Option<(u64, usize, u32, bool)>, Malformed> {
    let size = data.len();
    while *pos < size {
        let p = *pos;
        if p + 4 > size {
            return Err(Malformed(format!(
                "corrupt page: record header at {p} crosses the commit end {size}"
            )));
        }
        let w = word::<BIG>(data, p);
        let (type_len, delta) = if BIG {
            (w >> 27, w & COMMIT_MASK as u32)
        } else {
            (w & 31, w >> 5)
        };
        match type_len {
            1..=28 => {
                let len = type_len as usize * 4;
                let off = p + 4;
                if off + len > size {
                    return Err(Malformed(format!(
                        "corrupt page: record at {p} of {len} bytes crosses the commit end {size}"
                    )));
                }
                *ts = ts.wrapping_add(delta as u64);
                *pos = off + len;
                return Ok(Some((*ts, off, len as u32, p == 0)));
            }
            0 => {
                if p + 8 > size {
                    return Err(Malformed(format!(
                        "corrupt page: record at {p} crosses the commit end {size}"
                    )));
                }
                let raw = word::<BIG>(data, p + 4);
                if raw < 4 {
                    return Err(Malformed(format!(
                        "corrupt page: record at {p} has length {raw}"
                    )));
                }
                let len = ((raw - 4 + 3) & !3) as usize;
                let off = p + 8;
                if off + len > size {
                    return Err(Malformed(format!(
                        "corrupt page: record at {p} of {len} bytes crosses the commit end {size}"
                    )));
                }
                *ts = ts.wrapping_add(delta as u64);
                *pos = off + len;
                return Ok(Some((*ts, off, len as u32, p == 0)));
            }
            TYPE_PADDING => {
                *ts = ts.wrapping_add(delta as u64);
                if p + 8 > size {
                    *pos = size;
                    break;
                }
                let len = word::<BIG>(data, p + 4) as usize;
                if len == 0 {
                    // A null padding event: nothing more on this page.
                    *pos = size;
                    break;
                }
                *pos = p.saturating_add(4).saturating_add(len);
            }
            _ => {
                // TIME_EXTEND or TIME_STAMP
                if p + 8 > size {
                    return Err(Malformed(format!(
                        "corrupt page: time record at {p} crosses the commit end {size}"
                    )));
                }
                let ext = ((word::<BIG>(data, p + 4) as u64) << 27) + delta as u64;
                *ts = if type_len == TYPE_TIME_STAMP {
                    ext | (*ts & TS_MSB)
                } else {
                    ts.wrapping_add(ext)
                };
                *pos = p + 8;
            }
        }
    }
    Ok(None)
}

/// The u32 at `o`, in the byte order `BIG` says.
#[inline(always)]
fn word<const BIG: bool>(b: &[u8], o: usize) -> u32 {
    let a: [u8; 4] = b[o..o + 4].try_into().unwrap();
    if BIG {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

/// Call `f` with every data record of `page`, in page order. Returns the header.
#[inline]
pub fn for_each_record<F: FnMut(Record)>(
    layout: &PageLayout,
    page: &[u8],
    mut f: F,
) -> Result<PageHeader, Malformed> {
    let header = read_header(layout, page)?;
    let d = layout.data_offset as usize;
    let data = &page[d..d + header.commit as usize];
    let mut ts = header.timestamp;
    let mut pos = 0usize;
    let big = layout.endian == Endian::Big;
    loop {
        let next = if big {
            next_in_page::<true>(data, &mut pos, &mut ts)?
        } else {
            next_in_page::<false>(data, &mut pos, &mut ts)?
        };
        let Some((t, off, len, at_page_start)) = next else {
            break;
        };
        f(Record {
            ts: t,
            offset: (d + off) as u32,
            len,
            at_page_start,
        });
    }
    Ok(header)
}

/// A record as [`PageCursor`] returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CursorRecord {
    /// Absolute timestamp, in the trace clock's unit.
    pub ts: u64,
    /// Offset of the payload from the start of the cursor's data.
    pub offset: usize,
    /// Payload length. All fields are full words: a record copied right after it was
    /// built then loads each word from one store (a word loaded from two narrower stores
    /// stalls store forwarding; that was the top cost of the merge).
    pub len: usize,
}

/// Walks the records of a run of pages (one CPU's data) one at a time, without allocating.
pub struct PageCursor<'a> {
    layout: PageLayout,
    data: &'a [u8],
    page_size: usize,
    /// Start of the next page to load.
    next_page: usize,
    /// Absolute start of the current page's data and its committed slice.
    data_start: usize,
    page_data: &'a [u8],
    pos: usize,
    ts: u64,
    page_missed: Missed,
    /// `offset` of the current page's first record when that record starts the page
    /// (no time-extend or padding before it), else usize::MAX.
    start_offset: usize,
    /// Sum of stored lost-event counts of the pages loaded so far.
    pub lost: u64,
    /// True when some page had lost events without a stored count.
    pub lost_unknown: bool,
    /// Why the walk stopped early, when a page was corrupt.
    pub error: Option<Malformed>,
}

impl<'a> PageCursor<'a> {
    /// A cursor over `data`: whole pages of `page_size` bytes each, laid out as `layout` says.
    pub fn new(layout: PageLayout, data: &'a [u8], page_size: usize) -> PageCursor<'a> {
        PageCursor {
            layout,
            data,
            page_size: page_size.max(1),
            next_page: 0,
            data_start: 0,
            page_data: &[],
            pos: 0,
            ts: 0,
            page_missed: Missed::None,
            start_offset: usize::MAX,
            lost: 0,
            lost_unknown: false,
            error: None,
        }
    }

    /// The next record, or None at the end of the data or at a corrupt page (then `error`
    /// says why). No Result on this hot path: a small Option stays in registers.
    #[inline(always)]
    pub fn next_record(&mut self) -> Option<CursorRecord> {
        if self.layout.endian == Endian::Big {
            self.next_record_as::<true>()
        } else {
            self.next_record_as::<false>()
        }
    }

    /// [`PageCursor::next_record`] for data in the byte order `BIG` says, which must be
    /// the layout's: a loop that knows it has no endian test per record.
    #[inline(always)]
    pub fn next_record_as<const BIG: bool>(&mut self) -> Option<CursorRecord> {
        debug_assert_eq!(BIG, self.layout.endian == Endian::Big);
        match next_in_page::<BIG>(self.page_data, &mut self.pos, &mut self.ts) {
            Ok(Some((ts, off, len, _))) => Some(CursorRecord {
                ts,
                offset: self.data_start + off,
                len: len as usize,
            }),
            Ok(None) => self.next_page_record(),
            Err(m) => self.fail(m),
        }
    }

    #[cold]
    #[inline(never)]
    fn fail(&mut self, m: Malformed) -> Option<CursorRecord> {
        self.error = Some(Malformed(format!(
            "page at data offset {}: {}",
            self.next_page.saturating_sub(self.page_size),
            m.0
        )));
        None
    }

    /// Events lost before the current page (that of the record last returned), as
    /// trace-cmd reports them on `rec` (-1 when the count is unknown): only when `rec`
    /// starts the page.
    pub fn missed_at(&self, rec: &CursorRecord) -> Option<i64> {
        if rec.offset != self.start_offset {
            return None;
        }
        match self.page_missed {
            Missed::None => None,
            Missed::Count(n) => Some(n as i64),
            Missed::Unknown => Some(-1),
        }
    }

    /// Load pages until one has a record.
    #[inline(never)]
    fn next_page_record(&mut self) -> Option<CursorRecord> {
        loop {
            if self.next_page >= self.data.len() {
                return None;
            }
            let start = self.next_page;
            let end = (start + self.page_size).min(self.data.len());
            self.next_page = start + self.page_size;
            let page = &self.data[start..end];
            let h = match read_header(&self.layout, page) {
                Ok(h) => h,
                Err(m) => {
                    self.error = Some(Malformed(format!("page at data offset {start}: {}", m.0)));
                    return None;
                }
            };
            match h.missed {
                Missed::None => {}
                Missed::Count(n) => self.lost = self.lost.saturating_add(n),
                Missed::Unknown => self.lost_unknown = true,
            }
            self.page_missed = h.missed;
            let d = self.layout.data_offset as usize;
            self.data_start = start + d;
            self.page_data = &page[d..d + h.commit as usize];
            self.pos = 0;
            self.ts = h.timestamp;
            let next = if self.layout.endian == Endian::Big {
                next_in_page::<true>(self.page_data, &mut self.pos, &mut self.ts)
            } else {
                next_in_page::<false>(self.page_data, &mut self.pos, &mut self.ts)
            };
            match next {
                Ok(Some((ts, off, len, page_start))) => {
                    let offset = self.data_start + off;
                    self.start_offset = if page_start { offset } else { usize::MAX };
                    return Some(CursorRecord {
                        ts,
                        offset,
                        len: len as usize,
                    });
                }
                Ok(None) => continue,
                Err(m) => return self.fail(m),
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds little-endian 64-bit pages for tests.
    pub struct PageBuilder {
        pub data: Vec<u8>,
        pub ts: u64,
        pub flags: u64,
        pub missed: Option<u64>,
    }

    impl PageBuilder {
        pub fn new(ts: u64) -> PageBuilder {
            PageBuilder {
                data: Vec::new(),
                ts,
                flags: 0,
                missed: None,
            }
        }
        fn word(&mut self, type_len: u32, delta: u32) {
            self.data
                .extend_from_slice(&((delta << 5) | type_len).to_le_bytes());
        }
        pub fn event(&mut self, delta: u32, payload: &[u8]) -> &mut Self {
            let padded = (payload.len() + 3) & !3;
            if padded <= 28 * 4 && !payload.is_empty() {
                self.word((padded / 4) as u32, delta);
            } else {
                self.word(0, delta);
                self.data
                    .extend_from_slice(&(payload.len() as u32 + 4).to_le_bytes());
            }
            self.data.extend_from_slice(payload);
            self.data
                .resize(self.data.len() + padded - payload.len(), 0);
            self
        }
        pub fn extend(&mut self, delta: u64) -> &mut Self {
            self.word(TYPE_TIME_EXTEND, (delta & COMMIT_MASK) as u32);
            self.data
                .extend_from_slice(&((delta >> 27) as u32).to_le_bytes());
            self
        }
        pub fn absolute(&mut self, ts: u64) -> &mut Self {
            self.word(TYPE_TIME_STAMP, (ts & COMMIT_MASK) as u32);
            self.data
                .extend_from_slice(&((ts >> 27) as u32).to_le_bytes());
            self
        }
        /// A padding (discarded) record of `4 + len` bytes in all, as the kernel writes it:
        /// array[0] holds the length after the header word.
        pub fn padding(&mut self, delta: u32, len: u32) -> &mut Self {
            assert!(len >= 4);
            self.word(TYPE_PADDING, delta);
            self.data.extend_from_slice(&len.to_le_bytes());
            self.data.resize(self.data.len() + len as usize - 4, 0);
            self
        }
        pub fn build(&self, page_size: usize) -> Vec<u8> {
            let mut p = vec![0u8; page_size];
            p[0..8].copy_from_slice(&self.ts.to_le_bytes());
            let mut commit = self.data.len() as u64 | self.flags;
            if self.missed.is_some() {
                commit |= RB_MISSED_EVENTS | RB_MISSED_STORED;
            }
            p[8..16].copy_from_slice(&commit.to_le_bytes());
            p[16..16 + self.data.len()].copy_from_slice(&self.data);
            if let Some(m) = self.missed {
                let at = 16 + self.data.len();
                p[at..at + 8].copy_from_slice(&m.to_le_bytes());
            }
            p
        }
    }

    fn layout() -> PageLayout {
        PageLayout::new(Endian::Little, &HeaderPage::for_long_size(8))
    }

    fn records(page: &[u8]) -> Result<Vec<Record>, Malformed> {
        let mut v = Vec::new();
        for_each_record(&layout(), page, |r| v.push(r))?;
        Ok(v)
    }

    #[test]
    fn huge_missed_counts_saturate_instead_of_overflowing() {
        // found by fuzzing: two pages each claiming u64::MAX - 1 missed events
        let mut b = PageBuilder::new(1);
        b.event(1, &[1; 8]);
        b.missed = Some(u64::MAX - 1);
        let page = b.build(4096);
        let two = [page.clone(), page].concat();
        let mut c = PageCursor::new(layout(), &two, 4096);
        while c.next_record().is_some() {}
        assert_eq!(c.lost, u64::MAX);
    }

    #[test]
    fn deltas_extends_absolute_and_padding() {
        let mut b = PageBuilder::new(1000);
        b.event(5, &[1; 8])
            .extend(1 << 30)
            .event(3, &[2; 12])
            .padding(0, 8)
            .absolute(5_000_000_000)
            .event(0, &[3; 200]);
        let r = records(&b.build(4096)).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].ts, 1005);
        assert!(r[0].at_page_start);
        assert_eq!(r[0].len, 8);
        assert_eq!(r[1].ts, 1005 + (1 << 30) + 3);
        assert!(!r[1].at_page_start);
        assert_eq!(r[2].ts, 5_000_000_000);
        assert_eq!(r[2].len, 200);
        assert_eq!(r[2].offset as usize + 200, 16 + b.data.len());
    }

    #[test]
    fn corrupt_pages_are_errors_not_panics() {
        let mut b = PageBuilder::new(1);
        b.event(1, &[0; 8]);
        let mut p = b.build(4096);
        p[8..16].copy_from_slice(&5000u64.to_le_bytes());
        assert!(records(&p).unwrap_err().0.contains("commit 5000"));
        let mut p = b.build(4096);
        p[8..16].copy_from_slice(&6u64.to_le_bytes());
        assert!(records(&p)
            .unwrap_err()
            .0
            .contains("crosses the commit end"));
        assert!(records(&[0u8; 10]).is_err());
        let mut z = PageBuilder::new(1);
        z.word(0, 1);
        z.data.extend_from_slice(&2u32.to_le_bytes());
        assert!(records(&z.build(4096)).unwrap_err().0.contains("length 2"));
    }

    #[test]
    fn big_endian_32bit_page() {
        let l = PageLayout::new(Endian::Big, &HeaderPage::for_long_size(4));
        let mut p = vec![0u8; 4096];
        p[0..8].copy_from_slice(&100u64.to_be_bytes());
        p[8..12].copy_from_slice(&12u32.to_be_bytes());
        let w: u32 = (2 << 27) | 7; // type_len 2 (8 bytes), delta 7
        p[12..16].copy_from_slice(&w.to_be_bytes());
        let mut v = Vec::new();
        for_each_record(&l, &p, |r| v.push(r)).unwrap();
        assert_eq!(
            v,
            vec![Record {
                ts: 107,
                offset: 16,
                len: 8,
                at_page_start: true
            }]
        );
    }
}
