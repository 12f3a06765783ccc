//! pmlab-lab: experiments — plans, the interleaved adaptive protocol, statistics,
//! the SQLite result store and report rendering.

pub mod hotplug;
pub mod spec;
pub mod stats;
pub mod store;
pub mod system;
