//! trace.dat v6 writer: the file `trace-cmd report` and KernelShark read, assembled from
//! the machine's tracefs metadata (header_page, header_event, format files, kallsyms,
//! printk formats, saved cmdlines) and raw per-CPU ring-buffer pages.
//!
//! Layout (trace-cmd.dat.v6(5)): magic, version "6", endian, long size, page size;
//! header_page/header_event; ftrace formats; event systems; kallsyms; printk formats;
//! cmdlines; CPU count; options; "flyrecord" with (offset, size) per CPU, then the
//! trace clock; then each CPU's pages at a page-aligned offset.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Option ids of the trace.dat options section (trace-cmd.dat.v7(5) lists them all).
pub(crate) mod option_id {
    /// `cpustat`: per-CPU buffer statistics text.
    pub const CPUSTAT: u16 = 2;
    /// `trace_clock`: the clock list with the one used in brackets.
    pub const TRACECLOCK: u16 = 4;
    /// `uname`: the traced kernel's uname line.
    pub const UNAME: u16 = 5;
    /// `cpucount`: number of CPUs with data.
    pub const CPUCOUNT: u16 = 8;
}

/// Why a trace.dat file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The CPU data of some CPU is not whole pages.
    #[error("{path}: CPU data is {len} bytes, not a whole number of {page_size}-byte pages")]
    PartialPage {
        /// The file.
        path: PathBuf,
        /// The CPU data's length, bytes.
        len: u64,
        /// The page size, bytes.
        page_size: u32,
    },
    /// A section too large for its 32-bit size field.
    #[error("{what} is {len} bytes, more than a trace.dat v6 size field can hold")]
    TooLarge {
        /// What was too large (`option`, `event system count`, ...).
        what: &'static str,
        /// Its size, bytes.
        len: usize,
    },
    /// A page size that is not a power of two.
    #[error("page size {0} is not a power of two")]
    BadPageSize(u32),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> WriteError + '_ {
    move |source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One event system (directory under `events/`) and the format files stored for it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventSystem {
    /// The system's name (`sched`).
    pub name: String,
    /// Contents of `events/<system>/<event>/format`, one per event.
    pub formats: Vec<Vec<u8>>,
}

/// Everything in a trace.dat v6 file except the CPU data.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceDatHeader {
    /// The traced machine is big-endian.
    pub big_endian: bool,
    /// Size of a userspace `long` on the traced machine (4 or 8).
    pub long_size: u8,
    /// Size of one ring-buffer page (sub-buffer) as stored in the CPU data.
    pub page_size: u32,
    /// `events/header_page`.
    pub header_page: Vec<u8>,
    /// `events/header_event`.
    pub header_event: Vec<u8>,
    /// `events/ftrace/*/format`.
    pub ftrace_formats: Vec<Vec<u8>>,
    /// The event systems stored besides `ftrace`.
    pub event_systems: Vec<EventSystem>,
    /// `/proc/kallsyms`.
    pub kallsyms: Vec<u8>,
    /// `printk_formats`.
    pub printk_formats: Vec<u8>,
    /// `saved_cmdlines` format: "PID COMM" per line.
    pub cmdlines: Vec<u8>,
    /// Contents of the `trace_clock` file (`[local] global ...`); also selects the clock.
    pub trace_clock: Option<String>,
    /// `uname` as "sysname nodename release machine".
    pub uname: Option<String>,
    /// `per_cpu/cpuN/stats`, one string per CPU (prefixed "CPU: N").
    pub cpu_stats: Vec<String>,
}

impl Default for TraceDatHeader {
    fn default() -> Self {
        TraceDatHeader {
            big_endian: cfg!(target_endian = "big"),
            long_size: std::mem::size_of::<usize>() as u8,
            page_size: 4096,
            header_page: Vec::new(),
            header_event: Vec::new(),
            ftrace_formats: Vec::new(),
            event_systems: Vec::new(),
            kallsyms: Vec::new(),
            printk_formats: Vec::new(),
            cmdlines: Vec::new(),
            trace_clock: None,
            uname: None,
            cpu_stats: Vec::new(),
        }
    }
}

/// Where one CPU's raw pages come from.
#[derive(Debug, Clone, Copy)]
pub enum CpuData<'a> {
    /// A file holding whole pages, copied in kernel (copy_file_range) where possible.
    File(&'a Path),
    /// Pages in memory.
    Bytes(&'a [u8]),
}

/// The clock name selected in a `trace_clock` file (`[local] global` → `local`).
pub fn selected_clock(trace_clock: &str) -> Option<&str> {
    trace_clock
        .split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
}

struct Enc {
    big: bool,
    buf: Vec<u8>,
}

impl Enc {
    fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    fn u16(&mut self, v: u16) {
        self.bytes(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    fn u32(&mut self, v: u32) {
        self.bytes(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    fn u32_len(&mut self, what: &'static str, len: usize) -> Result<(), WriteError> {
        let v = u32::try_from(len).map_err(|_| WriteError::TooLarge { what, len })?;
        self.u32(v);
        Ok(())
    }
    fn option(&mut self, id: u16, data: &[u8]) -> Result<(), WriteError> {
        self.u16(id);
        self.u32_len("option", data.len())?;
        self.bytes(data);
        Ok(())
    }
}

fn nul_terminated(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

impl TraceDatHeader {
    /// The file from its start up to and including the options section (everything
    /// before "flyrecord").
    pub fn encode(&self, cpus: u32) -> Result<Vec<u8>, WriteError> {
        if !self.page_size.is_power_of_two() {
            return Err(WriteError::BadPageSize(self.page_size));
        }
        let mut e = Enc {
            big: self.big_endian,
            buf: Vec::with_capacity(self.kallsyms.len() + 65536),
        };
        e.bytes(&[0x17, 0x08, 0x44]);
        e.bytes(b"tracing");
        e.bytes(b"6\0");
        e.bytes(&[u8::from(self.big_endian), self.long_size]);
        e.u32(self.page_size);

        e.bytes(b"header_page\0");
        e.u64(self.header_page.len() as u64);
        e.bytes(&self.header_page);
        e.bytes(b"header_event\0");
        e.u64(self.header_event.len() as u64);
        e.bytes(&self.header_event);

        e.u32_len("ftrace format count", self.ftrace_formats.len())?;
        for f in &self.ftrace_formats {
            e.u64(f.len() as u64);
            e.bytes(f);
        }
        e.u32_len("event system count", self.event_systems.len())?;
        for sys in &self.event_systems {
            e.bytes(&nul_terminated(&sys.name));
            e.u32_len("event count", sys.formats.len())?;
            for f in &sys.formats {
                e.u64(f.len() as u64);
                e.bytes(f);
            }
        }
        e.u32_len("kallsyms", self.kallsyms.len())?;
        e.bytes(&self.kallsyms);
        e.u32_len("printk_formats", self.printk_formats.len())?;
        e.bytes(&self.printk_formats);
        e.u64(self.cmdlines.len() as u64);
        e.bytes(&self.cmdlines);

        e.u32(cpus);
        e.bytes(b"options  \0");
        if let Some(clock) = &self.trace_clock {
            e.option(option_id::TRACECLOCK, &nul_terminated(clock.trim_end()))?;
        }
        if let Some(uname) = &self.uname {
            e.option(option_id::UNAME, &nul_terminated(uname))?;
        }
        let mut count = Vec::new();
        {
            let mut c = Enc {
                big: self.big_endian,
                buf: Vec::new(),
            };
            c.u32(cpus);
            count.extend_from_slice(&c.buf);
        }
        e.option(option_id::CPUCOUNT, &count)?;
        for stat in &self.cpu_stats {
            e.option(option_id::CPUSTAT, &nul_terminated(stat))?;
        }
        e.u16(0);
        Ok(e.buf)
    }

    /// The clock trailer trace-cmd reads after the flyrecord table when a TRACECLOCK option is present.
    fn clock_trailer(&self) -> Option<Vec<u8>> {
        let clock = self.trace_clock.as_deref()?;
        let name = selected_clock(clock).unwrap_or("local");
        let s = format!("[{name}]");
        let mut e = Enc {
            big: self.big_endian,
            buf: Vec::new(),
        };
        e.u64(s.len() as u64);
        e.bytes(s.as_bytes());
        Some(e.buf)
    }
}

fn cpu_len(c: &CpuData, page_size: u32) -> Result<u64, WriteError> {
    let (len, path) = match c {
        CpuData::File(p) => (fs::metadata(p).map_err(io_err(p))?.len(), p.to_path_buf()),
        CpuData::Bytes(b) => (b.len() as u64, PathBuf::from("<memory>")),
    };
    if len % page_size as u64 != 0 {
        return Err(WriteError::PartialPage {
            path,
            len,
            page_size,
        });
    }
    Ok(len)
}

/// The flyrecord table (with the clock trailer) for CPU data of `lens` bytes after a head
/// of `head_len` bytes, and where each CPU's data starts (page-aligned).
fn flyrecord(header: &TraceDatHeader, head_len: u64, lens: &[u64]) -> (Enc, Vec<u64>) {
    let page = u64::from(header.page_size);
    let mut table = Enc {
        big: header.big_endian,
        buf: Vec::new(),
    };
    table.bytes(b"flyrecord\0");
    let table_len = 10 + 16 * lens.len() as u64;
    let trailer = header.clock_trailer().unwrap_or_default();
    let mut pos = head_len + table_len + trailer.len() as u64;
    let mut offsets = Vec::with_capacity(lens.len());
    for len in lens {
        pos = pos.div_ceil(page) * page;
        offsets.push(pos);
        table.u64(pos);
        table.u64(*len);
        pos += len;
    }
    table.bytes(&trailer);
    (table, offsets)
}

/// A trace.dat v6 file of `cpus` CPUs without events, in memory: the formats, symbols and
/// names that `pmlab top` decodes each interval's pages against (read back with
/// [`crate::dat::parse`], the one reader).
pub fn encode_without_events(header: &TraceDatHeader, cpus: u32) -> Result<Vec<u8>, WriteError> {
    let mut out = header.encode(cpus)?;
    let (table, _) = flyrecord(header, out.len() as u64, &vec![0; cpus as usize]);
    out.extend_from_slice(&table.buf);
    Ok(out)
}

/// Write a complete trace.dat v6 file to `out`; returns its size in bytes.
/// The file is written to a temporary name beside `out` and renamed into place.
pub fn write_trace_dat_v6(
    out: &Path,
    header: &TraceDatHeader,
    cpus: &[CpuData],
) -> Result<u64, WriteError> {
    let head = header.encode(cpus.len() as u32)?;
    let lens = cpus
        .iter()
        .map(|c| cpu_len(c, header.page_size))
        .collect::<Result<Vec<_>, _>>()?;

    let (table, offsets) = flyrecord(header, head.len() as u64, &lens);
    let tmp = temp_beside(out);
    let result = (|| {
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(&head).map_err(io_err(&tmp))?;
        f.write_all(&table.buf).map_err(io_err(&tmp))?;
        let mut written = head.len() as u64 + table.buf.len() as u64;
        for ((c, off), len) in cpus.iter().zip(&offsets).zip(&lens) {
            if *len == 0 {
                continue;
            }
            if *off > written {
                f.write_all(&vec![0u8; (*off - written) as usize])
                    .map_err(io_err(&tmp))?;
                written = *off;
            }
            match c {
                CpuData::Bytes(b) => f.write_all(b).map_err(io_err(&tmp))?,
                CpuData::File(p) => {
                    let mut src = File::open(p).map_err(io_err(p))?;
                    let n = io::copy(&mut src, &mut f).map_err(io_err(p))?;
                    if n != *len {
                        return Err(WriteError::Io {
                            path: p.to_path_buf(),
                            source: io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "file changed while copying",
                            ),
                        });
                    }
                }
            }
            written += len;
        }
        f.sync_data().map_err(io_err(&tmp))?;
        fs::rename(&tmp, out).map_err(io_err(out))?;
        Ok(written)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn temp_beside(out: &Path) -> PathBuf {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "trace.dat".into());
    out.with_file_name(format!(".{name}.{}.partial", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TraceDatHeader {
        TraceDatHeader {
            big_endian: false,
            long_size: 8,
            page_size: 4096,
            header_page: b"hp".to_vec(),
            header_event: b"he".to_vec(),
            ftrace_formats: vec![b"f1".to_vec()],
            event_systems: vec![EventSystem {
                name: "sched".into(),
                formats: vec![b"s1".to_vec(), b"s2".to_vec()],
            }],
            kallsyms: b"ffff t x\n".to_vec(),
            printk_formats: Vec::new(),
            cmdlines: b"1 init\n".to_vec(),
            trace_clock: Some("[local] global\n".into()),
            uname: None,
            cpu_stats: vec!["CPU: 0\nentries: 0\n".into()],
        }
    }

    #[test]
    fn header_starts_with_magic_and_version() {
        let b = sample().encode(2).unwrap();
        assert_eq!(&b[..3], &[0x17, 0x08, 0x44]);
        assert_eq!(&b[3..10], b"tracing");
        assert_eq!(&b[10..12], b"6\0");
        assert_eq!(b[12], 0);
        assert_eq!(b[13], 8);
        assert_eq!(u32::from_le_bytes(b[14..18].try_into().unwrap()), 4096);
        assert_eq!(&b[18..30], b"header_page\0");
        assert_eq!(u64::from_le_bytes(b[30..38].try_into().unwrap()), 2);
    }

    #[test]
    fn big_endian_numbers_are_big_endian() {
        let h = TraceDatHeader {
            big_endian: true,
            ..sample()
        };
        let b = h.encode(1).unwrap();
        assert_eq!(b[12], 1);
        assert_eq!(u32::from_be_bytes(b[14..18].try_into().unwrap()), 4096);
    }

    #[test]
    fn options_end_with_zero_and_contain_clock() {
        let b = sample().encode(2).unwrap();
        assert_eq!(&b[b.len() - 2..], &[0, 0]);
        let s = String::from_utf8_lossy(&b);
        assert!(s.contains("options  \0"));
        assert!(s.contains("[local] global\0"));
    }

    #[test]
    fn selected_clock_finds_bracketed_name() {
        assert_eq!(selected_clock("local [global] counter"), Some("global"));
        assert_eq!(selected_clock("local global"), None);
    }

    #[test]
    fn cpu_data_is_page_aligned_and_table_points_at_it() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.dat");
        let h = sample();
        let p0 = vec![1u8; 4096];
        let p1 = vec![2u8; 8192];
        let n = write_trace_dat_v6(
            &out,
            &h,
            &[
                CpuData::Bytes(&p0),
                CpuData::Bytes(&[]),
                CpuData::Bytes(&p1),
            ],
        )
        .unwrap();
        let b = fs::read(&out).unwrap();
        assert_eq!(n, b.len() as u64);
        let head = h.encode(3).unwrap();
        let t = &b[head.len()..];
        assert_eq!(&t[..10], b"flyrecord\0");
        let rd = |i: usize| u64::from_le_bytes(t[10 + 8 * i..18 + 8 * i].try_into().unwrap());
        let (o0, s0, s1, o2, s2) = (rd(0), rd(1), rd(3), rd(4), rd(5));
        assert_eq!((s0, s1, s2), (4096, 0, 8192));
        assert_eq!(o0 % 4096, 0);
        assert_eq!(o2 % 4096, 0);
        assert!(b[o0 as usize..(o0 + s0) as usize].iter().all(|&x| x == 1));
        assert!(b[o2 as usize..(o2 + s2) as usize].iter().all(|&x| x == 2));
        // the clock trailer follows the table
        let tr = &t[10 + 48..];
        assert_eq!(u64::from_le_bytes(tr[..8].try_into().unwrap()), 7);
        assert_eq!(&tr[8..15], b"[local]");
    }

    #[test]
    fn partial_pages_are_refused_and_nothing_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.dat");
        let err = write_trace_dat_v6(&out, &sample(), &[CpuData::Bytes(&[0u8; 100])]).unwrap_err();
        assert!(matches!(err, WriteError::PartialPage { .. }), "{err}");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
