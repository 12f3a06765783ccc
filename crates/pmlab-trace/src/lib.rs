//! pmlab-trace: trace events — format files, ring-buffer pages, trace.dat v6/v7
//! and ftrace text reading, trace.dat v6 writing, columnar tables, and the recorder.

pub mod columns;
pub mod dat;
pub mod error;
pub mod format;
pub mod kallsyms;
pub mod model;
pub mod names;
mod open;
pub mod page;
mod prefault;
pub mod record;
pub mod summary;
pub mod text;
pub mod writer;

pub use error::{FormatError, FormatProblem, Malformed, TraceError};
pub use kallsyms::Kallsyms;
pub use model::{
    Endian, EventFormat, Events, Field, FieldKind, FieldRef, LocKind, Trace, TraceMeta,
};
pub use open::{open, open_with};
