//! pmlab-lab: experiments — plans, the interleaved adaptive protocol, statistics,
//! the SQLite result store and report rendering.

pub mod stats;
