//! pmlab-lab: the lab object (one interrupt policy, knob transactions, side sources: counters,
//! tracer, energy meters), the interleaved adaptive protocol and its executors.
#![forbid(unsafe_code)]

pub mod disturbance;
pub mod executor;
pub mod lab;
pub mod machine;
pub mod meter;
pub mod protocol;
pub mod quiet;
pub mod recording;
pub mod request;
pub mod scripted;
pub mod tracing;

// The data model and statistics under their own names, so paths read `crate::store::..`.
use pmlab_stats::{populations, stats};
use pmlab_store::{spec, store, system};
