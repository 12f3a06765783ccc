//! `open(path)`: read a trace.dat (v6/v7) or ftrace text file, detected from its first bytes.

use std::path::Path;

use crate::dat::{self, DatError, LoadOptions};
use crate::error::TraceError;
use crate::model::Trace;

/// Open a trace.dat v6/v7 or ftrace text file (auto-detected).
pub fn open(path: &Path) -> Result<Trace, TraceError> {
    open_with(path, &LoadOptions::default())
}

/// [`open`] with options (e.g. skip kallsyms when no symbol is printed).
pub fn open_with(path: &Path, opts: &LoadOptions) -> Result<Trace, TraceError> {
    let file = std::fs::File::open(path).map_err(|e| TraceError::io(path, e))?;
    let meta = file.metadata().map_err(|e| TraceError::io(path, e))?;
    if meta.is_dir() {
        return Err(TraceError::malformed(
            path,
            "is a directory, not a trace file",
        ));
    }
    let len = meta.len();
    if len == 0 {
        return Err(TraceError::malformed(path, "empty file: no trace header"));
    }
    // SAFETY: a private read-only map; trace-cmd maps trace files the same way. A file truncated
    // by another process while we read it can raise SIGBUS, as it would for trace-cmd.
    let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) }
        .map_err(|e| TraceError::io(path, e))?;
    let map = std::sync::Arc::new(map);
    if map.starts_with(&dat::MAGIC[..3]) {
        return dat::parse_mapped(map, opts).map_err(|e| match e {
            DatError::Malformed(m) => TraceError::malformed(path, m.0),
            DatError::Format(f) => TraceError::Format {
                path: path.to_path_buf(),
                err: f,
            },
        });
    }
    crate::text::parse(&map).map_err(|m| TraceError::malformed(path, m.0))
}
