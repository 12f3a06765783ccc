//! pmlab-dump: a trace's events in the forms other tools read: `trace-cmd report`'s formatted
//! view (an interpreter of the events' print formats) and the raw dump, JSON lines, LISA's
//! Parquet layout and Perfetto's protobuf trace.

pub mod json;
mod lines;
pub mod lisa;
pub mod perfetto;
mod printfmt;
pub mod render;
pub mod report;
pub mod symbolic;

// The trace model under its own names, so paths read `crate::model::..`.
use pmlab_trace::{columns, kallsyms, model};
