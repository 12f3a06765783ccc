//! Raw reads and writes of one knob file: plain attributes, and the debugfs sched
//! `features` file where one file holds many boolean knobs (`NAME` / `NO_NAME`), and bit
//! fields of MSRs in `/dev/cpu/N/msr` (journaled as the whole 8-byte register).

use std::io::{self, Write};
use std::path::Path;

/// The raw value a knob file holds now: the trimmed content; for a list file that marks
/// its setting in brackets (`[default] performance`, PCIe ASPM's policy) the bracketed word,
/// which is what the kernel takes back; for a sched feature `NAME` / `NO_NAME`.
pub fn read_raw(path: &Path, feature: Option<&str>) -> io::Result<String> {
    let text = std::fs::read_to_string(path)?;
    match feature {
        None if text.split_whitespace().nth(1).is_some() => {
            Ok(crate::sysinfo::power::selected_word(&text)
                .unwrap_or_else(|| text.trim().to_string()))
        }
        None => Ok(text.trim().to_string()),
        Some(f) => feature_state(&text, f)
            .map(|on| if on { f.to_string() } else { format!("NO_{f}") })
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no sched feature {f} in {}", path.display()),
                )
            }),
    }
}

/// Whether feature `f` is on (`f` listed), off (`NO_f` listed), or unknown.
pub fn feature_state(text: &str, f: &str) -> Option<bool> {
    let no = format!("NO_{f}");
    text.split_whitespace().find_map(|w| {
        if w == f {
            Some(true)
        } else if w == no {
            Some(false)
        } else {
            None
        }
    })
}

/// Which part of a knob's file a value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part<'a> {
    /// The file's text ([`read_raw`]).
    Text,
    /// One sched feature of the debugfs `features` file: `NAME` / `NO_NAME`.
    Feature(&'a str),
    /// A bit field of an MSR, in decimal; written by read-modify-write.
    Field(crate::msr::Field),
    /// A whole MSR (address), as `0x` and 16 hex digits: what the journal keeps.
    Register(u32),
}

/// The value of `part` of `path`.
pub fn read_part(path: &Path, part: Part) -> io::Result<String> {
    match part {
        Part::Text => read_raw(path, None),
        Part::Feature(f) => read_raw(path, Some(f)),
        Part::Field(f) => Ok(crate::msr::read_field(path, f)?.to_string()),
        Part::Register(a) => Ok(format!("{:#018x}", crate::msr::read(path, a)?)),
    }
}

/// Write `value` (as [`read_part`] gives it) to `part` of `path`.
pub fn write_part(path: &Path, part: Part, value: &str) -> io::Result<()> {
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{value}` is not a register value"),
        )
    };
    match part {
        Part::Text | Part::Feature(_) => write_raw(path, value),
        Part::Field(f) => {
            let v = value.parse::<u64>().map_err(|_| bad())?;
            crate::msr::write_field(path, f, v).map(|_| ())?;
            Ok(())
        }
        Part::Register(a) => {
            let hex = value.strip_prefix("0x").ok_or_else(bad)?;
            let v = u64::from_str_radix(hex, 16).map_err(|_| bad())?;
            Ok(crate::msr::write(path, a, v)?)
        }
    }
}

/// Write `value` in one write(2), as `echo value > path` does.
pub fn write_raw(path: &Path, value: &str) -> io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?;
    f.write_all(value.as_bytes())
}

/// Readable form of an I/O error: `EBUSY (Device or resource busy)`.
pub fn describe(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let name = match code {
                libc::EBUSY => "EBUSY",
                libc::EAGAIN => "EAGAIN",
                libc::EINVAL => "EINVAL",
                libc::EIO => "EIO",
                libc::EPERM => "EPERM",
                libc::EACCES => "EACCES",
                libc::ENOENT => "ENOENT",
                libc::ENODEV => "ENODEV",
                libc::ERANGE => "ERANGE",
                libc::EROFS => "EROFS",
                _ => "",
            };
            let msg = std::io::Error::from_raw_os_error(code).to_string();
            let msg = msg.split(" (os error").next().unwrap_or(&msg).to_string();
            if name.is_empty() {
                msg
            } else {
                format!("{name} ({msg})")
            }
        }
        // Errors of pmlab's own (an MSR's) carry their cause: keep it.
        None => crate::error_chain(e),
    }
}
