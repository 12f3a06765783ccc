//! pmlab-lab: experiments — plans, the interleaved adaptive protocol, statistics,
//! the SQLite result store and report rendering.

pub mod bundle;
pub mod executor;
pub mod export;
pub mod hotplug;
pub mod html;
pub mod lab;
pub mod lineup;
pub mod machine;
pub mod meter;
pub mod populations;
pub mod protocol;
pub mod recording;
pub mod remote;
pub mod render;
pub mod report;
pub mod spec;
pub mod stats;
pub mod store;
pub mod study;
pub mod system;
pub mod tracing;
