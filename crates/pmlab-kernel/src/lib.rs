//! pmlab-kernel: access to the kernel's files (sysfs, procfs, debugfs, tracefs),
//! topology, counters, knobs and the knob journal. Every reader takes a root path.

pub mod counters;
pub mod cpulist;
pub mod knob;
pub mod procstat;
pub mod sysinfo;
pub mod tracefs;
pub mod units;

pub mod root;
pub use root::Root;

pub use units::{Direction, KHz, Metric, MetricKey, Micros, Nanos};
