//! pmlab-kernel: access to the kernel's files (sysfs, procfs, debugfs, tracefs),
//! topology, counters, knobs and the knob journal. Every reader takes a root path.

pub mod counters;
pub mod units;

pub use units::{Direction, Metric, Micros, Nanos, KHz};
