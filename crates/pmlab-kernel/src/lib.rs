//! pmlab-kernel: access to the kernel's files (sysfs, procfs, debugfs, tracefs),
//! topology, counters, knobs and the knob journal. Every reader takes a root path.

pub mod counters;
pub mod tracefs;
pub mod units;

// TEMPORARY (record branch): until `Root` lands from the kernel helper.
mod root_stub;
pub use root_stub::Root;

pub use units::{Direction, KHz, Metric, Micros, Nanos};
