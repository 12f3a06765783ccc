//! trace.dat reader, versions 6 and 7 (sections; zstd or zlib compression): headers,
//! formats, cmdlines, kallsyms, printk formats, then per-CPU ring-buffer pages decoded
//! into columns and merged by timestamp the way `trace-cmd report` orders them.

use std::collections::HashMap;
use std::io::Read;

use crate::error::{FormatError, Malformed};
use crate::format::{parse_format_opts, parse_header_page, HeaderPage};
use crate::kallsyms::Kallsyms;
use crate::model::{Endian, EventFormat, Events, Raw, Trace, TraceMeta};
use crate::page::{PageCursor, PageLayout};

/// The first bytes of every trace.dat file.
pub const MAGIC: &[u8; 10] = b"\x17\x08\x44tracing";

/// What to load besides the events.
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions {
    /// Parse kallsyms (needed to render `%pS` fields).
    pub kallsyms: bool,
    /// Decode the events; without, only the headers are read (formats, CPUs, clock,
    /// cmdlines): what `pmlab.open` needs before a table is asked for.
    pub events: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            kallsyms: true,
            events: true,
        }
    }
}

impl LoadOptions {
    /// Events without kallsyms: what `pmlab trace info` and the tables of `pmlab.open` read.
    pub fn without_kallsyms() -> LoadOptions {
        LoadOptions {
            kallsyms: false,
            ..LoadOptions::default()
        }
    }
}

/// Errors of the byte-level reader before the path is attached.
#[derive(Debug)]
pub enum DatError {
    /// Bytes that do not decode.
    Malformed(Malformed),
    /// An event format file that does not parse.
    Format(FormatError),
}

impl From<Malformed> for DatError {
    fn from(m: Malformed) -> Self {
        DatError::Malformed(m)
    }
}
impl From<FormatError> for DatError {
    fn from(f: FormatError) -> Self {
        DatError::Format(f)
    }
}

type R<T> = Result<T, DatError>;

fn bad<T>(msg: impl Into<String>) -> R<T> {
    Err(DatError::Malformed(Malformed(msg.into())))
}

/// A bounds-checked reader over the file bytes.
struct Cur<'a> {
    b: &'a [u8],
    pos: usize,
    big: bool,
}

impl<'a> Cur<'a> {
    fn at(b: &'a [u8], pos: usize, big: bool) -> Cur<'a> {
        Cur { b, pos, big }
    }
    fn take(&mut self, n: usize, what: &str) -> R<&'a [u8]> {
        if n > self.b.len() || self.pos > self.b.len() - n {
            return bad(format!(
                "truncated: {what} needs {n} bytes at offset {} but the data ends at {}",
                self.pos,
                self.b.len()
            ));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u16(&mut self, what: &str) -> R<u16> {
        let s = self.take(2, what)?;
        let a = [s[0], s[1]];
        Ok(if self.big {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        })
    }
    fn u32(&mut self, what: &str) -> R<u32> {
        let s = self.take(4, what)?;
        let a = [s[0], s[1], s[2], s[3]];
        Ok(if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        })
    }
    fn u64(&mut self, what: &str) -> R<u64> {
        let s = self.take(8, what)?;
        let a: [u8; 8] = s.try_into().unwrap();
        Ok(if self.big {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        })
    }
    fn cstr(&mut self, what: &str) -> R<&'a str> {
        let rest = self.b.get(self.pos..).unwrap_or(&[]);
        let Some(n) = rest.iter().position(|&c| c == 0) else {
            return bad(format!(
                "truncated: {what} at offset {} has no terminating NUL",
                self.pos
            ));
        };
        let s = std::str::from_utf8(&rest[..n])
            .map_err(|_| Malformed(format!("{what} at offset {} is not UTF-8", self.pos)))?;
        self.pos += n + 1;
        Ok(s)
    }
    fn sized_text(&mut self, size: u64, what: &str) -> R<String> {
        let n = usize::try_from(size).unwrap_or(usize::MAX);
        let s = self.take(n, what)?;
        Ok(match std::str::from_utf8(s) {
            Ok(t) => t.to_owned(),
            Err(_) => String::from_utf8_lossy(s).into_owned(),
        })
    }
}

/// Everything the headers say, before the events are decoded.
#[derive(Default)]
struct Headers {
    version: u32,
    big: bool,
    long_size: u32,
    page_size: u32,
    compression: Option<String>,
    header_page: Option<String>,
    ftrace_formats: Vec<String>,
    event_formats: Vec<(String, String)>,
    kallsyms: Option<KallsymsText>,
    /// Leave kallsyms unread (megabytes of text nobody asked for: no copy, no decompression).
    skip_kallsyms: bool,
    printk: Option<String>,
    cmdlines: Option<String>,
    cpus: u32,
    clock: Option<String>,
    uname: Option<String>,
    tsc2nsec: bool,
    buffers: Vec<Buffer>,
}

/// The kallsyms section's text: where it lies in the file (v6), or decoded (v7 sections,
/// which may be compressed).
enum KallsymsText {
    At(std::ops::Range<usize>),
    Owned(String),
}

struct Buffer {
    name: String,
    /// (cpu id, file offset, size) in file order.
    cpus: Vec<(u32, u64, u64)>,
    compressed: bool,
}

/// Decompresses v7 blocks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Codec {
    None,
    Zstd,
    Zlib,
}

impl Codec {
    fn from_name(name: &str) -> R<Codec> {
        match name {
            "none" | "" => Ok(Codec::None),
            "zstd" => Ok(Codec::Zstd),
            "zlib" => Ok(Codec::Zlib),
            other => bad(format!("unsupported compression `{other}`")),
        }
    }

    fn decompress_into(self, src: &[u8], usize_: usize, out: &mut Vec<u8>, what: &str) -> R<()> {
        let start = out.len();
        match self {
            Codec::None => {
                return bad(format!(
                    "{what} is flagged compressed but the file names no compression"
                ))
            }
            Codec::Zstd => {
                out.reserve(usize_);
                let mut dec = zstd::stream::read::Decoder::with_buffer(src)
                    .map_err(|e| Malformed(format!("{what}: zstd: {e}")))?;
                let got = (&mut dec)
                    .take(usize_ as u64 + 1)
                    .read_to_end(out)
                    .map_err(|e| Malformed(format!("{what}: zstd: {e}")))?;
                let _ = got;
            }
            Codec::Zlib => {
                out.reserve(usize_);
                let dec = flate2::read::ZlibDecoder::new(src);
                dec.take(usize_ as u64 + 1)
                    .read_to_end(out)
                    .map_err(|e| Malformed(format!("{what}: zlib: {e}")))?;
            }
        }
        let got = out.len() - start;
        if got != usize_ {
            return bad(format!(
                "{what}: decompressed to {got} bytes, the header says {usize_}"
            ));
        }
        Ok(())
    }
}

/// Parse a whole trace.dat held in memory.
pub fn parse(bytes: &[u8], opts: &LoadOptions) -> R<Trace> {
    let h = parse_headers(bytes, opts)?;
    build_trace(bytes, || Raw::from(bytes.to_vec()), None, h, opts)
}

/// Parse a mapped trace.dat; uncompressed event data is used in place.
pub fn parse_mapped(map: std::sync::Arc<memmap2::Mmap>, opts: &LoadOptions) -> R<Trace> {
    let bytes: &[u8] = &map;
    let h = parse_headers(bytes, opts)?;
    // The map was made without MAP_POPULATE: page tables for the event data are filled
    // here in one call per CPU (cheaper than a fault per 64 KiB), and the header sections
    // nobody reads (kallsyms when unwanted) are never mapped in. A headers-only open
    // (`opts.events` off) maps in no event data at all.
    for b in h.buffers.iter().filter(|_| opts.events) {
        for &(_, off, size) in &b.cpus {
            let (off, size) = (off as usize, size as usize);
            if off < map.len() && size > 0 {
                let len = size.min(map.len() - off);
                let _ = map.advise_range(memmap2::Advice::PopulateRead, off, len);
            }
        }
    }
    build_trace(bytes, || Raw::mapped(map.clone()), Some(&map), h, opts)
}

fn parse_headers(bytes: &[u8], opts: &LoadOptions) -> R<Headers> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return bad("not a trace.dat file (wrong magic)");
    }
    let mut c = Cur::at(bytes, MAGIC.len(), false);
    let version_str = c.cstr("version")?;
    let version: u32 = version_str
        .parse()
        .map_err(|_| Malformed(format!("bad version `{version_str}`")))?;
    if version != 6 && version != 7 {
        return bad(format!(
            "unsupported trace.dat version {version} (pmlab reads 6 and 7)"
        ));
    }
    let endian = c.take(1, "endianness")?[0];
    let long_size = c.take(1, "long size")?[0] as u32;
    if endian > 1 {
        return bad(format!("bad endianness flag {endian}"));
    }
    if long_size != 4 && long_size != 8 {
        return bad(format!("bad long size {long_size}"));
    }
    c.big = endian == 1;
    let page_size = c.u32("page size")?;
    if !(256..=(1 << 24)).contains(&page_size) || !page_size.is_power_of_two() {
        return bad(format!("bad page size {page_size}"));
    }
    let mut h = Headers {
        version,
        big: c.big,
        long_size,
        page_size,
        skip_kallsyms: !opts.kallsyms,
        ..Default::default()
    };
    if version == 6 {
        parse_v6(&mut c, &mut h)?;
    } else {
        parse_v7(&mut c, &mut h)?;
    }
    Ok(h)
}

fn read_header_files(c: &mut Cur, h: &mut Headers) -> R<()> {
    let tag = c.take(12, "header_page tag")?;
    if tag != b"header_page\0" {
        return bad(format!("expected `header_page` at offset {}", c.pos - 12));
    }
    let n = c.u64("header_page size")?;
    h.header_page = Some(c.sized_text(n, "header_page")?);
    let tag = c.take(13, "header_event tag")?;
    if tag != b"header_event\0" {
        return bad(format!("expected `header_event` at offset {}", c.pos - 13));
    }
    let n = c.u64("header_event size")?;
    c.take(usize::try_from(n).unwrap_or(usize::MAX), "header_event")?;
    Ok(())
}

fn read_ftrace_formats(c: &mut Cur, h: &mut Headers) -> R<()> {
    let count = c.u32("ftrace format count")?;
    for _ in 0..count {
        let n = c.u64("ftrace format size")?;
        h.ftrace_formats.push(c.sized_text(n, "ftrace format")?);
    }
    Ok(())
}

fn read_event_formats(c: &mut Cur, h: &mut Headers) -> R<()> {
    let systems = c.u32("event system count")?;
    for _ in 0..systems {
        let sys = c.cstr("event system name")?.to_string();
        let count = c.u32("event count")?;
        for _ in 0..count {
            let n = c.u64("event format size")?;
            let text = c.sized_text(n, "event format")?;
            h.event_formats.push((sys.clone(), text));
        }
    }
    Ok(())
}

fn read_u32_sized(c: &mut Cur, what: &str) -> R<String> {
    let n = c.u32(what)?;
    c.sized_text(n as u64, what)
}

fn parse_v6(c: &mut Cur, h: &mut Headers) -> R<()> {
    read_header_files(c, h)?;
    read_ftrace_formats(c, h)?;
    read_event_formats(c, h)?;
    let n = c.u32("kallsyms")? as usize;
    let at = c.pos;
    c.take(n, "kallsyms")?;
    if !h.skip_kallsyms {
        h.kallsyms = Some(KallsymsText::At(at..at + n));
    }
    h.printk = Some(read_u32_sized(c, "printk formats")?);
    let n = c.u64("cmdlines size")?;
    h.cmdlines = Some(c.sized_text(n, "cmdlines")?);
    h.cpus = c.u32("cpu count")?;
    if h.cpus > 4096 {
        return bad(format!("implausible cpu count {}", h.cpus));
    }
    let mut instances: Vec<(String, u64)> = Vec::new();
    let top = read_v6_data_kind(c, h, &mut instances)?;
    h.buffers.push(Buffer {
        name: String::new(),
        cpus: top,
        compressed: false,
    });
    for (name, off) in instances {
        let mut ic = Cur::at(c.b, usize::try_from(off).unwrap_or(usize::MAX), c.big);
        let mut nested = Vec::new();
        let cpus = read_v6_data_kind(&mut ic, h, &mut nested)?;
        h.buffers.push(Buffer {
            name,
            cpus,
            compressed: false,
        });
    }
    Ok(())
}

/// Reads `options  \0`… then `flyrecord\0` and the per-CPU (offset, size) pairs.
fn read_v6_data_kind(
    c: &mut Cur,
    h: &mut Headers,
    instances: &mut Vec<(String, u64)>,
) -> R<Vec<(u32, u64, u64)>> {
    loop {
        let tag = c.take(10, "data kind")?;
        match tag {
            b"options  \0" => loop {
                let id = c.u16("option id")?;
                if id == 0 {
                    break;
                }
                let size = c.u32("option size")?;
                let data = c.take(size as usize, "option")?;
                handle_option(id, data, c.big, h, instances, false)?;
            },
            b"flyrecord\0" => {
                let mut v = Vec::with_capacity(h.cpus as usize);
                for cpu in 0..h.cpus {
                    let off = c.u64("cpu data offset")?;
                    let size = c.u64("cpu data size")?;
                    v.push((cpu, off, size));
                }
                return Ok(v);
            }
            b"latency  \0" => return bad("latency (text) trace.dat files are not supported"),
            _ => {
                return bad(format!(
                    "unknown data kind {:?} at offset {}",
                    String::from_utf8_lossy(tag),
                    c.pos - 10
                ))
            }
        }
    }
}

fn handle_option(
    id: u16,
    data: &[u8],
    big: bool,
    h: &mut Headers,
    instances: &mut Vec<(String, u64)>,
    v7: bool,
) -> R<()> {
    let mut d = Cur::at(data, 0, big);
    match id {
        // BUFFER
        3 => {
            let off = d.u64("buffer offset")?;
            let name = d.cstr("buffer name")?.to_string();
            if !v7 {
                if !name.is_empty() {
                    instances.push((name, off));
                }
                return Ok(());
            }
            let clock = d.cstr("buffer clock")?.to_string();
            let _page_size = d.u32("buffer page size")?;
            let n = d.u32("buffer cpu count")?;
            if n > 4096 {
                return bad(format!("implausible buffer cpu count {n}"));
            }
            let mut cpus = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let cpu = d.u32("buffer cpu id")?;
                let o = d.u64("buffer cpu offset")?;
                let s = d.u64("buffer cpu size")?;
                if cpu > 4095 {
                    return bad(format!("implausible cpu id {cpu}"));
                }
                cpus.push((cpu, o, s));
            }
            if name.is_empty() && h.clock.is_none() {
                h.clock = Some(clock);
            }
            // The section header at `off` says whether the data is compressed.
            h.buffers.push(Buffer {
                name,
                cpus,
                compressed: off != 0 && off < u64::MAX,
            });
            instances.push((String::new(), off));
        }
        // TRACECLOCK
        4 => {
            let text = String::from_utf8_lossy(data);
            if let Some(start) = text.find('[') {
                if let Some(end) = text[start..].find(']') {
                    h.clock = Some(text[start + 1..start + end].to_string());
                }
            }
        }
        // UNAME: "sysname nodename release machine"
        5 => {
            let text = String::from_utf8_lossy(data);
            let text = text.trim_end_matches('\0').trim();
            if !text.is_empty() {
                h.uname = Some(text.to_string());
            }
        }
        // CPUCOUNT
        8 => {
            h.cpus = d.u32("cpu count")?;
        }
        // TSC2NSEC
        14 => h.tsc2nsec = true,
        _ => {}
    }
    Ok(())
}

struct SectionHeader {
    id: u16,
    flags: u16,
    size: u64,
}

fn read_section_header(c: &mut Cur) -> R<SectionHeader> {
    let id = c.u16("section id")?;
    let flags = c.u16("section flags")?;
    let _desc = c.u32("section description")?;
    let size = c.u64("section size")?;
    Ok(SectionHeader { id, flags, size })
}

/// The bytes of a section after its header, decompressed when flagged.
fn section_body<'a>(
    bytes: &'a [u8],
    offset: u64,
    want_id: u16,
    codec: Codec,
    big: bool,
    buf: &'a mut Vec<u8>,
) -> R<&'a [u8]> {
    let mut c = Cur::at(bytes, usize::try_from(offset).unwrap_or(usize::MAX), big);
    let sh = read_section_header(&mut c)?;
    if sh.id != want_id {
        return bad(format!(
            "section at offset {offset} has id {}, expected {want_id}",
            sh.id
        ));
    }
    if sh.flags & 1 == 0 {
        return c.take(usize::try_from(sh.size).unwrap_or(usize::MAX), "section");
    }
    let csize = c.u32("compressed size")?;
    let usize_ = c.u32("uncompressed size")?;
    if csize as u64 + 8 > sh.size {
        return bad(format!(
            "section {want_id} at offset {offset}: compressed size {csize} exceeds the section size {}",
            sh.size
        ));
    }
    let src = c.take(csize as usize, "compressed section")?;
    buf.clear();
    codec.decompress_into(
        src,
        usize_ as usize,
        buf,
        &format!("section {want_id} at offset {offset}"),
    )?;
    Ok(&buf[..])
}

fn parse_v7(c: &mut Cur, h: &mut Headers) -> R<()> {
    let name = c.cstr("compression name")?.to_string();
    let _ver = c.cstr("compression version")?;
    let codec = Codec::from_name(&name)?;
    if codec != Codec::None {
        h.compression = Some(name);
    }
    let mut next = c.u64("options offset")?;
    let bytes = c.b;
    let big = c.big;
    let mut offsets: Vec<(u16, u64)> = Vec::new();
    let mut buffer_offsets: Vec<(String, u64)> = Vec::new();
    let mut seen = 0;
    let mut buf = Vec::new();
    while next != 0 {
        seen += 1;
        if seen > 1000 {
            return bad("options sections form a loop");
        }
        let body = section_body(bytes, next, 0, codec, big, &mut buf)?.to_vec();
        let mut o = Cur::at(&body, 0, big);
        loop {
            let id = o.u16("option id")?;
            let size = o.u32("option size")?;
            let data = o.take(size as usize, "option")?;
            match id {
                0 => {
                    next = Cur::at(data, 0, big).u64("next options offset")?;
                    break;
                }
                19 if h.skip_kallsyms => {}
                16..=21 => offsets.push((id, Cur::at(data, 0, big).u64("section offset")?)),
                _ => handle_option(id, data, big, h, &mut buffer_offsets, true)?,
            }
        }
    }
    for (id, off) in offsets {
        let body = section_body(bytes, off, id, codec, big, &mut buf)?;
        let mut s = Cur::at(body, 0, big);
        match id {
            16 => read_header_files(&mut s, h)?,
            17 => read_ftrace_formats(&mut s, h)?,
            18 => read_event_formats(&mut s, h)?,
            19 => h.kallsyms = Some(KallsymsText::Owned(read_u32_sized(&mut s, "kallsyms")?)),
            20 => h.printk = Some(read_u32_sized(&mut s, "printk formats")?),
            21 => {
                let n = s.u64("cmdlines size")?;
                h.cmdlines = Some(s.sized_text(n, "cmdlines")?);
            }
            _ => {}
        }
    }
    // Flyrecord section headers: is the data compressed?
    for (b, (_, off)) in h.buffers.iter_mut().zip(buffer_offsets.iter()) {
        let mut s = Cur::at(bytes, usize::try_from(*off).unwrap_or(usize::MAX), big);
        let sh = read_section_header(&mut s)?;
        if sh.id != 3 {
            return bad(format!(
                "buffer section at offset {off} has id {}, expected 3",
                sh.id
            ));
        }
        b.compressed = sh.flags & 1 != 0;
        if b.compressed && codec == Codec::None {
            return bad("buffer data is flagged compressed but the file names no compression");
        }
    }
    if h.header_page.is_none() {
        return bad("no header_page section");
    }
    // trace-cmd puts the top buffer first.
    h.buffers.sort_by_key(|b| !b.name.is_empty());
    if h.buffers
        .first()
        .map(|b| !b.name.is_empty())
        .unwrap_or(true)
    {
        h.buffers.insert(
            0,
            Buffer {
                name: String::new(),
                cpus: Vec::new(),
                compressed: false,
            },
        );
    }
    h.compression = h.compression.take();
    let _ = codec;
    h.tsc2nsec |= false;
    Ok(())
}

fn codec_of(h: &Headers) -> Codec {
    match h.compression.as_deref() {
        Some("zstd") => Codec::Zstd,
        Some("zlib") => Codec::Zlib,
        _ => Codec::None,
    }
}

/// A vector whose pages the kernel may back with transparent huge pages
/// (fewer page faults when filling hundreds of megabytes), where that pays.
pub fn huge_vec<T>(cap: usize) -> Vec<T> {
    let v: Vec<T> = Vec::with_capacity(cap);
    let bytes = cap * std::mem::size_of::<T>();
    if bytes >= 4 << 20 && huge_pages_pay() {
        let start = v.as_ptr() as usize;
        // SAFETY: memory this Vec owns; the advice changes no bytes.
        let _ = unsafe { advise_inside(start, start + bytes, rustix::mm::Advice::LinuxHugepage) };
    }
    v
}

/// `madvise` over the whole pages inside `[start, end)` (none: Ok). Callers that only advise
/// ignore a failure (an older kernel); the prefault helper stops on one.
///
/// # Safety
/// The range lies in memory the caller owns and keeps alive for the call, and `advice`
/// changes none of its bytes.
pub(crate) unsafe fn advise_inside(
    start: usize,
    end: usize,
    advice: rustix::mm::Advice,
) -> rustix::io::Result<()> {
    let (start, end) = ((start + 4095) & !4095, end & !4095);
    if end <= start {
        return Ok(());
    }
    // SAFETY: the caller's promise, for whole pages inside its range.
    unsafe { rustix::mm::madvise(start as *mut std::ffi::c_void, end - start, advice) }
}

/// A job that maps in the pages of `v`'s spare capacity (MADV_POPULATE_WRITE), for another
/// thread to run while this one works on something else: filling the vector then takes no
/// page faults. It pays only while `v` is alive and ungrown (a scoped thread joined before
/// `v` is filled); run later, it maps pages in uselessly or fails, and changes no bytes.
pub fn populate_job<T>(v: &Vec<T>) -> impl FnOnce() + Send + 'static {
    let start = v.as_ptr() as usize + v.len() * std::mem::size_of::<T>();
    let end = v.as_ptr() as usize + v.capacity() * std::mem::size_of::<T>();
    move || {
        // SAFETY: populating maps pages in as a write would, without writing: no bytes
        // change, whatever the range holds when the job runs, and an unmapped range fails
        // harmlessly.
        let _ = unsafe { advise_inside(start, end, rustix::mm::Advice::LinuxPopulateWrite) };
    }
}

/// Whether asking for huge pages pays: not in a guest whose host takes free memory back
/// (free page reporting). There a huge page comes from a reported block, and its first
/// touch faults in the host too, so huge pages fill slower than 4 KiB ones after a few idle
/// seconds (figures in docs/development.md, "Benchmarks").
fn huge_pages_pay() -> bool {
    static PAY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PAY.get_or_init(|| {
        pmlab_kernel::sysinfo::virt::free_page_reporting(&pmlab_kernel::Root::system()).is_none()
    })
}

/// `map`: the mapping `bytes` is, when the file is mapped (kallsyms then stays in it).
fn build_trace(
    bytes: &[u8],
    keep: impl FnOnce() -> Raw,
    map: Option<&std::sync::Arc<memmap2::Mmap>>,
    mut h: Headers,
    opts: &LoadOptions,
) -> R<Trace> {
    let endian = if h.big { Endian::Big } else { Endian::Little };
    let header_page = match &h.header_page {
        Some(t) => parse_header_page(t)?,
        None => HeaderPage::for_long_size(h.long_size),
    };
    let layout = PageLayout::new(endian, &header_page);
    let mut formats: HashMap<u16, EventFormat> = HashMap::new();
    for text in &h.ftrace_formats {
        let mut f = parse_format_opts(text, h.long_size, false)?;
        f.system = "ftrace".into();
        formats.insert(f.id, f);
    }
    for (sys, text) in &h.event_formats {
        let mut f = parse_format_opts(text, h.long_size, false).map_err(|mut e| {
            e.event = format!("{sys}/{}", e.event);
            e
        })?;
        f.system = sys.clone();
        formats.insert(f.id, f);
    }
    let (type_off, pid_off) = common_offsets(&formats);
    let cmdlines = h
        .cmdlines
        .as_deref()
        .map(parse_cmdlines)
        .unwrap_or_default();
    let printk_formats = h
        .printk
        .as_deref()
        .map(parse_printk_formats)
        .unwrap_or_default();

    // kallsyms (megabytes of text) is parsed on another thread while the events merge.
    let kallsyms_text = h.kallsyms.take().filter(|_| opts.kallsyms);
    let (kallsyms, decoded) = std::thread::scope(|sc| {
        let kallsyms = kallsyms_text.map(|text| {
            let map = map.cloned();
            sc.spawn(move || match (text, map) {
                (KallsymsText::At(r), Some(map)) => Kallsyms::parse_mapped(map, r),
                (KallsymsText::At(r), None) => {
                    Kallsyms::parse(String::from_utf8_lossy(&bytes[r]).into_owned())
                }
                (KallsymsText::Owned(t), _) => Kallsyms::parse(t),
            })
        });
        let decoded = if opts.events {
            decode_events(bytes, keep, &h, layout, type_off, pid_off)
        } else {
            Ok(Decoded::headers_only(&h))
        };
        let kallsyms = kallsyms.map(|k| k.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        (kallsyms.unwrap_or_default(), decoded)
    });
    let Decoded {
        events,
        event_buffer,
        missed_before,
        lost,
        cpus,
        max_cpu,
    } = decoded?;
    let buffers: Vec<String> = h.buffers.iter().map(|b| b.name.clone()).collect();
    let event_buffer = if buffers.len() > 1 {
        event_buffer
    } else {
        Vec::new()
    };
    let ts_in_ns = h.tsc2nsec
        || match h.clock.as_deref() {
            None => true,
            Some(c) => {
                matches!(
                    c,
                    "local" | "global" | "uptime" | "perf" | "tai" | "tsc2nsec"
                ) || c.starts_with("mono")
            }
        };
    let source = match &h.compression {
        Some(c) => format!("trace.dat v{} ({c})", h.version),
        None => format!("trace.dat v{}", h.version),
    };
    Ok(Trace {
        endian,
        long_size: header_page.commit_size,
        page_size: h.page_size,
        cpus,
        formats,
        events,
        cmdlines,
        kallsyms,
        printk_formats,
        lost,
        source,
        meta: TraceMeta {
            version: h.version,
            compression: h.compression.clone(),
            clock: h.clock.clone(),
            cpus_reported: h.cpus.max(if h.version == 7 { max_cpu } else { 0 }),
            buffers,
            event_buffer,
            missed_before,
            ts_in_ns,
            uname: h.uname.clone(),
            window: None,
        },
    })
}

/// The events of a trace and what decoding them found out.
struct Decoded {
    events: Events,
    event_buffer: Vec<u8>,
    missed_before: Vec<(usize, i64)>,
    lost: Vec<Option<u64>>,
    cpus: u32,
    max_cpu: u32,
}

/// One more than the largest CPU id with a data region in any buffer.
fn max_cpu(h: &Headers) -> u32 {
    h.buffers
        .iter()
        .flat_map(|b| b.cpus.iter().map(|c| c.0 + 1))
        .max()
        .unwrap_or(0)
}

impl Decoded {
    /// No events: the headers alone ([`LoadOptions::events`] off); lost counts unknown.
    fn headers_only(h: &Headers) -> Decoded {
        let max_cpu = max_cpu(h);
        let cpus = h.cpus.max(max_cpu);
        Decoded {
            events: Events::default(),
            event_buffer: Vec::new(),
            missed_before: Vec::new(),
            lost: vec![None; cpus as usize],
            cpus,
            max_cpu,
        }
    }
}

/// Decodes the per-CPU ring-buffer pages (decompressing them first if needed) and merges
/// them by timestamp into the event columns.
fn decode_events(
    bytes: &[u8],
    keep: impl FnOnce() -> Raw,
    h: &Headers,
    layout: PageLayout,
    type_off: usize,
    pid_off: usize,
) -> R<Decoded> {
    // The CPU data regions: in the file itself, or decompressed into a new arena.
    let codec = codec_of(h);
    let page_size = h.page_size as usize;
    let mut regions: Vec<(u8, u32, usize, usize)> = Vec::new(); // buffer, cpu, start, len
    let any_compressed = h
        .buffers
        .iter()
        .any(|b| b.compressed && b.cpus.iter().any(|c| c.2 > 0));
    let raw: Raw = if any_compressed {
        let mut arena: Vec<u8> = huge_vec(bytes.len() * 8);
        for (bi, b) in h.buffers.iter().enumerate() {
            for &(cpu, off, size) in &b.cpus {
                if size == 0 {
                    continue;
                }
                let start = arena.len();
                if b.compressed {
                    decompress_cpu(bytes, off, size, codec, h.big, &mut arena, cpu)?;
                } else {
                    let (o, e) = region_in_file(off, size, bytes.len(), cpu)?;
                    arena.extend_from_slice(&bytes[o..e]);
                }
                regions.push((bi as u8, cpu, start, arena.len() - start));
            }
        }
        Raw::from(arena)
    } else {
        for (bi, b) in h.buffers.iter().enumerate() {
            for &(cpu, off, size) in &b.cpus {
                if size == 0 {
                    continue;
                }
                let (o, e) = region_in_file(off, size, bytes.len(), cpu)?;
                regions.push((bi as u8, cpu, o, e - o));
            }
        }
        keep()
    };
    let max_cpu = max_cpu(h);
    let cpus = h.cpus.max(max_cpu);
    let (events, event_buffer, missed_before, lost) = merge_regions(
        raw,
        &regions,
        layout,
        page_size,
        h.big,
        (type_off, pid_off),
        cpus,
    )?;
    Ok(Decoded {
        events,
        event_buffer,
        missed_before,
        lost,
        cpus,
        max_cpu,
    })
}

/// What [`merge_regions`] gives: the events, their buffers, missed-event marks, lost per CPU.
type MergedRegions = (Events, Vec<u8>, Vec<(usize, i64)>, Vec<Option<u64>>);

/// Merges the page regions `(buffer, cpu, start, len)` of `raw` into event columns
/// owning `raw`, and counts lost events per CPU: the one merge of a file's CPU data and of
/// [`decode_pages`]' batches.
fn merge_regions(
    raw: Raw,
    regions: &[(u8, u32, usize, usize)],
    layout: PageLayout,
    page_size: usize,
    big: bool,
    (type_off, pid_off): (usize, usize),
    cpus: u32,
) -> R<MergedRegions> {
    if raw.len() as u64 >= crate::model::LOC_MAX_OFF {
        return bad("event data of 1 TiB or more is not supported");
    }
    let multi_buffer = regions.iter().any(|r| r.0 != 0);
    let data_bytes: usize = regions.iter().map(|r| r.3).sum();
    let mut cursors: Vec<(u8, u32, PageCursor)> = regions
        .iter()
        .map(|&(bi, cpu, start, len)| {
            (
                bi,
                cpu,
                PageCursor::new(layout, &raw[start..start + len], page_size),
            )
        })
        .collect();
    let bases: Vec<usize> = regions.iter().map(|r| r.2).collect();
    let merge = if big { merge::<true> } else { merge::<false> };
    let merged = merge(
        &mut cursors,
        &bases,
        &raw,
        type_off,
        pid_off,
        multi_buffer,
        data_bytes / 16 + 16,
    )?;
    let mut lost: Vec<Option<u64>> = vec![Some(0); cpus as usize];
    for (_, cpu, c) in &cursors {
        if let Some(l) = lost.get_mut(*cpu as usize) {
            *l = match (*l, c.lost_unknown) {
                (Some(x), false) => Some(x + c.lost),
                _ => None,
            };
        }
    }
    drop(cursors);
    let (mut events, event_buffer, missed_before) = merged;
    events.raw = raw;
    Ok((events, event_buffer, missed_before, lost))
}

/// Decodes a batch of ring-buffer pages per CPU (`(cpu, whole pages)`) against `trace`'s
/// formats with the file reader's cursors and merge: the events of one `pmlab top`
/// interval, as the same pages read from a trace.dat would give them. Returns the events in
/// time order and the events lost per CPU (from the pages' missed-events flags).
pub fn decode_pages(
    trace: &Trace,
    layout: PageLayout,
    cpus: &[(u32, Vec<u8>)],
) -> Result<(Events, Vec<Option<u64>>), crate::error::Malformed> {
    let page_size = trace.page_size as usize;
    let mut arena = Vec::with_capacity(cpus.iter().map(|c| c.1.len()).sum());
    let mut regions = Vec::new();
    for (cpu, pages) in cpus.iter().filter(|c| !c.1.is_empty()) {
        regions.push((0u8, *cpu, arena.len(), pages.len()));
        arena.extend_from_slice(pages);
    }
    let n = cpus
        .iter()
        .map(|c| c.0 + 1)
        .max()
        .unwrap_or(0)
        .max(trace.cpus);
    let big = trace.endian == Endian::Big;
    match merge_regions(
        Raw::from(arena),
        &regions,
        layout,
        page_size,
        big,
        common_offsets(&trace.formats),
        n,
    ) {
        Ok((events, _, _, lost)) => Ok((events, lost)),
        Err(DatError::Malformed(m)) => Err(m),
        Err(DatError::Format(f)) => Err(crate::error::Malformed(f.to_string())),
    }
}

fn region_in_file(off: u64, size: u64, file_len: usize, cpu: u32) -> R<(usize, usize)> {
    match off.checked_add(size).filter(|&e| e <= file_len as u64) {
        Some(e) => Ok((off as usize, e as usize)),
        None => bad(format!(
            "truncated: cpu {cpu} data needs bytes up to {} but the file has {file_len}",
            off.saturating_add(size)
        )),
    }
}

fn decompress_cpu(
    bytes: &[u8],
    off: u64,
    size: u64,
    codec: Codec,
    big: bool,
    out: &mut Vec<u8>,
    cpu: u32,
) -> R<()> {
    let mut c = Cur::at(bytes, usize::try_from(off).unwrap_or(usize::MAX), big);
    let _ = size; // for compressed data trace-cmd records the uncompressed size here
    let end = bytes.len() as u64;
    let count = c.u32("chunk count")?;
    for i in 0..count {
        let csize = c.u32("chunk compressed size")?;
        let usize_ = c.u32("chunk uncompressed size")?;
        if c.pos as u64 + csize as u64 > end {
            return bad(format!(
                "cpu {cpu} chunk {i}: compressed size {csize} runs past the end of the file ({end} bytes)"
            ));
        }
        if usize_ > 1 << 30 {
            return bad(format!(
                "cpu {cpu} chunk {i}: implausible uncompressed size {usize_}"
            ));
        }
        let src = c.take(csize as usize, "compressed chunk")?;
        codec.decompress_into(src, usize_ as usize, out, &format!("cpu {cpu} chunk {i}"))?;
    }
    Ok(())
}

/// Offsets of `common_type` and `common_pid` (the same in every format).
fn common_offsets(formats: &HashMap<u16, EventFormat>) -> (usize, usize) {
    let mut t = 0;
    let mut p = 4;
    if let Some(f) = formats.values().next() {
        if let Some(x) = f.field("common_type") {
            t = x.offset as usize;
        }
        if let Some(x) = f.field("common_pid") {
            p = x.offset as usize;
        }
    }
    (t, p)
}

type Merged = (Events, Vec<u8>, Vec<(usize, i64)>);

/// k-way merge of the per-CPU cursors by timestamp straight into the event columns;
/// equal timestamps go to the lower cursor (buffer, then CPU position), as trace-cmd does.
#[allow(clippy::too_many_arguments)]
fn merge<const BIG: bool>(
    cursors: &mut [(u8, u32, PageCursor)],
    bases: &[usize],
    raw: &[u8],
    type_off: usize,
    pid_off: usize,
    multi_buffer: bool,
    estimate: usize,
) -> R<Merged> {
    let mut ev = Events {
        ts: huge_vec(estimate),
        cpu: huge_vec(estimate),
        pid: huge_vec(estimate),
        id: huge_vec(estimate),
        loc: huge_vec(estimate),
        raw: Raw::new(),
    };
    let mut cols = ColWriter::new();
    cols.resume(&mut ev);
    cols.populate_ahead(&ev);
    let mut out = Sink {
        ev,
        cols,
        ebuf: if multi_buffer {
            Vec::with_capacity(estimate)
        } else {
            Vec::new()
        },
        missed_before: Vec::new(),
        multi_buffer,
        type_off,
        pid_off,
        need: (type_off + 2).max(pid_off + 4),
    };
    // Each cursor's next record, kept field by field: copying a whole record that was
    // just built in memory loads 16 bytes from two 8-byte stores, which stalls store
    // forwarding (the top cost of the merge, taken at every CPU switch).
    let k = cursors.len();
    let mut head_ts = vec![0u64; k];
    let mut head_off = vec![0usize; k];
    let mut head_len = vec![0usize; k];
    let mut head_live = vec![false; k];
    for (i, (_, cpu, c)) in cursors.iter_mut().enumerate() {
        if let Some(r) = c.next_record() {
            (head_ts[i], head_off[i], head_len[i], head_live[i]) = (r.ts, r.offset, r.len, true);
        }
        cursor_error(c, *cpu)?;
    }
    if k == 2 {
        // Two CPUs (a ping-pong workload switches every event or two): the other
        // cursor's head is the limit, and a switch swaps the two.
        let (x, y) = cursors.split_at_mut(1);
        let (mut a, mut b) = (&mut x[0], &mut y[0]);
        let (mut ai, mut bi) = (0usize, 1usize);
        if head_live[1] && (!head_live[0] || head_ts[1] < head_ts[0]) {
            std::mem::swap(&mut a, &mut b);
            std::mem::swap(&mut ai, &mut bi);
        }
        while head_live[ai] {
            let (limit, wins) = if head_live[bi] {
                (head_ts[bi], bi < ai)
            } else {
                (u64::MAX, false)
            };
            let rec = crate::page::CursorRecord {
                ts: head_ts[ai],
                offset: head_off[ai],
                len: head_len[ai],
            };
            match run::<BIG>(&mut out, raw, rec, bases[ai], a, limit, wins) {
                Some(r) => (head_ts[ai], head_off[ai], head_len[ai]) = (r.ts, r.offset, r.len),
                None => {
                    cursor_error(&mut a.2, a.1)?;
                    head_live[ai] = false;
                }
            }
            if head_live[bi] {
                std::mem::swap(&mut a, &mut b);
                std::mem::swap(&mut ai, &mut bi);
            }
        }
    } else {
        loop {
            // Pick the lowest head; ties go to the lowest index.
            let mut best = usize::MAX;
            let mut best_ts = 0u64;
            for i in 0..k {
                if head_live[i] && (best == usize::MAX || head_ts[i] < best_ts) {
                    best = i;
                    best_ts = head_ts[i];
                }
            }
            if best == usize::MAX {
                break;
            }
            // The others' lowest head bounds how far this cursor may run alone.
            let mut limit = u64::MAX;
            let mut limit_wins_ties = false;
            for i in 0..k {
                if i == best || !head_live[i] {
                    continue;
                }
                let t = head_ts[i];
                if t < limit || (t == limit && i < best) {
                    limit = t;
                    limit_wins_ties = i < best;
                }
            }
            let rec = crate::page::CursorRecord {
                ts: head_ts[best],
                offset: head_off[best],
                len: head_len[best],
            };
            let c = &mut cursors[best];
            match run::<BIG>(&mut out, raw, rec, bases[best], c, limit, limit_wins_ties) {
                Some(r) => {
                    (head_ts[best], head_off[best], head_len[best]) = (r.ts, r.offset, r.len)
                }
                None => {
                    cursor_error(&mut c.2, c.1)?;
                    head_live[best] = false;
                }
            }
        }
    }
    out.cols.finish(&mut out.ev);
    Ok((out.ev, out.ebuf, out.missed_before))
}

/// Appends `rec` and the records after it from cursor `c` while they come before `limit`
/// (equal timestamps too unless `limit_wins_ties`); returns the first one that does not,
/// or None at the cursor's end.
#[inline(always)]
fn run<const BIG: bool>(
    out: &mut Sink,
    raw: &[u8],
    mut rec: crate::page::CursorRecord,
    base: usize,
    c: &mut (u8, u32, PageCursor),
    limit: u64,
    limit_wins_ties: bool,
) -> Option<crate::page::CursorRecord> {
    let (bi, cpu, cur) = (c.0, c.1, &mut c.2);
    loop {
        out.row::<BIG>(raw, &rec, base, cpu, bi, cur);
        match cur.next_record_as::<BIG>() {
            Some(r) if r.ts < limit || (r.ts == limit && !limit_wins_ties) => rec = r,
            other => return other,
        }
    }
}

/// Where [`merge`] puts the events, and how it reads their common fields.
struct Sink {
    // Dropped first: its helper is joined before the columns it populates are freed.
    cols: ColWriter,
    ev: Events,
    ebuf: Vec<u8>,
    missed_before: Vec<(usize, i64)>,
    multi_buffer: bool,
    type_off: usize,
    pid_off: usize,
    /// Bytes a record needs to hold `common_type` and `common_pid`.
    need: usize,
}

impl Sink {
    /// Appends `rec`, the record `cur` returned last, at `base` in `raw`.
    #[inline(always)]
    fn row<const BIG: bool>(
        &mut self,
        raw: &[u8],
        rec: &crate::page::CursorRecord,
        base: usize,
        cpu: u32,
        bi: u8,
        cur: &PageCursor,
    ) {
        let o = base + rec.offset;
        let (id, pid) = if rec.len >= self.need {
            let b = &raw[o..o + self.need];
            // Whole-slice conversions: one load each instead of byte-by-byte.
            let t: [u8; 2] = b[self.type_off..self.type_off + 2].try_into().unwrap();
            let p: [u8; 4] = b[self.pid_off..self.pid_off + 4].try_into().unwrap();
            if BIG {
                (u16::from_be_bytes(t), i32::from_be_bytes(p))
            } else {
                (u16::from_le_bytes(t), i32::from_le_bytes(p))
            }
        } else {
            (0, 0)
        };
        // `cur` is still on `rec`'s page: it advances after this row.
        if let Some(m) = cur.missed_at(rec) {
            self.missed_before.push((self.cols.rows(), m));
        }
        self.cols.push(
            &mut self.ev,
            rec.ts,
            cpu as u16,
            pid,
            id,
            Events::loc(o, rec.len),
        );
        if self.multi_buffer {
            self.ebuf.push(bi);
        }
    }
}

/// The error that stopped `c`, if any.
fn cursor_error(c: &mut PageCursor, cpu: u32) -> R<()> {
    match c.error.take() {
        Some(m) => bad(format!("cpu {cpu}: {}", m.0)),
        None => Ok(()),
    }
}

/// Appends rows to the five event columns with one capacity check per row instead of five
/// (Vec::push keeps five lengths and checks five capacities). Between `resume` and `finish`
/// rows are written past the Vecs' lengths; `finish` sets them.
struct ColWriter {
    n: usize,
    cap: usize,
    /// Where `push` next stops: `cap`, or before it the next progress report.
    limit: usize,
    /// Populates the columns' pages ahead of the rows being written.
    ahead: Option<crate::prefault::Prefault>,
    ts: *mut u64,
    cpu: *mut u16,
    pid: *mut i32,
    id: *mut u16,
    loc: *mut u64,
}

impl ColWriter {
    fn new() -> ColWriter {
        ColWriter {
            n: 0,
            cap: 0,
            limit: 0,
            ahead: None,
            ts: std::ptr::null_mut(),
            cpu: std::ptr::null_mut(),
            pid: std::ptr::null_mut(),
            id: std::ptr::null_mut(),
            loc: std::ptr::null_mut(),
        }
    }

    fn rows(&self) -> usize {
        self.n
    }

    /// Takes the columns' pointers and the smallest spare capacity (all hold `n` rows).
    fn resume(&mut self, ev: &mut Events) {
        self.n = ev.ts.len();
        self.cap = [
            ev.ts.capacity(),
            ev.cpu.capacity(),
            ev.pid.capacity(),
            ev.id.capacity(),
            ev.loc.capacity(),
        ]
        .into_iter()
        .min()
        .unwrap();
        self.limit = self.cap;
        self.ts = ev.ts.as_mut_ptr();
        self.cpu = ev.cpu.as_mut_ptr();
        self.pid = ev.pid.as_mut_ptr();
        self.id = ev.id.as_mut_ptr();
        self.loc = ev.loc.as_mut_ptr();
    }

    /// Has another core populate the columns' pages ahead of the rows written.
    fn populate_ahead(&mut self, ev: &Events) {
        use crate::prefault::{Column, Prefault, STEP};
        let col = |addr: usize, size: usize, cap: usize| Column { addr, size, cap };
        self.ahead = Prefault::start(vec![
            col(ev.ts.as_ptr() as usize, 8, ev.ts.capacity()),
            col(ev.cpu.as_ptr() as usize, 2, ev.cpu.capacity()),
            col(ev.pid.as_ptr() as usize, 4, ev.pid.capacity()),
            col(ev.id.as_ptr() as usize, 2, ev.id.capacity()),
            col(ev.loc.as_ptr() as usize, 8, ev.loc.capacity()),
        ]);
        if self.ahead.is_some() {
            self.limit = self.cap.min(self.n + STEP);
        }
    }

    /// Sets the columns' lengths to the rows written.
    fn finish(&mut self, ev: &mut Events) {
        self.ahead = None;
        // SAFETY: rows below `n` were written by `push` within capacity.
        unsafe {
            ev.ts.set_len(self.n);
            ev.cpu.set_len(self.n);
            ev.pid.set_len(self.n);
            ev.id.set_len(self.n);
            ev.loc.set_len(self.n);
        }
    }

    #[inline(always)]
    fn push(&mut self, ev: &mut Events, ts: u64, cpu: u16, pid: i32, id: u16, loc: u64) {
        if self.n == self.limit {
            self.stop(ev);
        }
        let n = self.n;
        // SAFETY: n < cap, the capacity of every column.
        unsafe {
            self.ts.add(n).write(ts);
            self.cpu.add(n).write(cpu);
            self.pid.add(n).write(pid);
            self.id.add(n).write(id);
            self.loc.add(n).write(loc);
        }
        self.n = n + 1;
    }

    /// At `limit`: report progress to the populating helper, or grow when full.
    #[cold]
    #[inline(never)]
    fn stop(&mut self, ev: &mut Events) {
        match &self.ahead {
            Some(a) if self.n < self.cap => {
                a.reached(self.n);
                self.limit = self.cap.min(self.n + crate::prefault::STEP);
            }
            // Full: the helper stops (it knows the old buffers only), then the columns grow.
            _ => self.grow(ev),
        }
    }

    fn grow(&mut self, ev: &mut Events) {
        self.finish(ev);
        let more = self.n.max(1024);
        ev.ts.reserve(more);
        ev.cpu.reserve(more);
        ev.pid.reserve(more);
        ev.id.reserve(more);
        ev.loc.reserve(more);
        self.resume(ev);
    }
}

/// `saved_cmdlines`: "PID COMM" per line; the first entry of a pid wins.
pub fn parse_cmdlines(text: &str) -> HashMap<i32, String> {
    let mut m = HashMap::new();
    for line in text.lines() {
        let line = line.trim_start();
        let Some(sp) = line.find(|c: char| c.is_whitespace()) else {
            continue;
        };
        let Ok(pid) = line[..sp].parse::<i32>() else {
            continue;
        };
        let comm = line[sp..].trim_start();
        if comm.is_empty() {
            continue;
        }
        m.entry(pid).or_insert_with(|| comm.to_string());
    }
    m
}

/// `printk_formats`: `0xADDR : "format"` per line.
pub fn parse_printk_formats(text: &str) -> HashMap<u64, String> {
    let mut m = HashMap::new();
    for line in text.lines() {
        let Some((a, f)) = line.split_once(':') else {
            continue;
        };
        let a = a.trim();
        let a = a.strip_prefix("0x").unwrap_or(a);
        let Ok(addr) = u64::from_str_radix(a, 16) else {
            continue;
        };
        let mut f = f.strip_prefix(' ').unwrap_or(f);
        f = f.strip_prefix('"').unwrap_or(f);
        let mut s = f.to_string();
        if s.ends_with('"') {
            s.pop();
        }
        if s.ends_with("\\n") {
            s.truncate(s.len() - 2);
        }
        m.insert(addr, s);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty(cap: usize) -> Events {
        Events {
            ts: huge_vec(cap),
            cpu: huge_vec(cap),
            pid: huge_vec(cap),
            id: huge_vec(cap),
            loc: huge_vec(cap),
            raw: Raw::new(),
        }
    }

    #[test]
    fn rows_written_past_the_estimate_while_pages_are_populated_ahead_are_all_kept() {
        // Past the capacity the columns grow: the helper that populates ahead stops first.
        let (cap, rows) = (200_000usize, 450_000usize);
        let mut ev = empty(cap);
        let mut cols = ColWriter::new();
        cols.resume(&mut ev);
        cols.populate_ahead(&ev);
        if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
            assert!(cols.ahead.is_some(), "a helper for {cap} rows");
        }
        for i in 0..rows {
            cols.push(
                &mut ev,
                i as u64 * 3,
                (i % 7) as u16,
                i as i32,
                (i % 5) as u16,
                i as u64,
            );
        }
        cols.finish(&mut ev);
        assert!(cols.ahead.is_none());
        assert!(ev.ts.capacity() >= rows);
        assert_eq!(ev.len(), rows);
        for i in (0..rows).step_by(997).chain([cap - 1, cap, rows - 1]) {
            assert_eq!(
                (ev.ts[i], ev.cpu[i], ev.pid[i], ev.id[i], ev.loc[i]),
                (
                    i as u64 * 3,
                    (i % 7) as u16,
                    i as i32,
                    (i % 5) as u16,
                    i as u64
                )
            );
        }
    }

    #[test]
    fn small_columns_get_no_helper() {
        let mut ev = empty(1000);
        let mut cols = ColWriter::new();
        cols.resume(&mut ev);
        cols.populate_ahead(&ev);
        assert!(cols.ahead.is_none());
        assert_eq!(cols.limit, cols.cap);
    }
}
