//! Raw reads and writes of one knob file: plain attributes, and the debugfs sched
//! `features` file where one file holds many boolean knobs (`NAME` / `NO_NAME`).

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
        None => e.to_string(),
    }
}
