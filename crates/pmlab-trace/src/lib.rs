//! pmlab-trace: trace events — format files, ring-buffer pages, trace.dat v6/v7
//! and ftrace text reading, trace.dat v6 writing, and the recorder.

pub mod model;
pub mod record;
pub mod writer;

pub use model::{Endian, EventFormat, Events, Field, FieldKind, FieldRef, Trace};
