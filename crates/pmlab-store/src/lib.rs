//! pmlab-store: the data model of experiments (specs, configurations, workloads, runs, metrics,
//! the machine's identity) and the SQLite result store with its schema and migrations,
//! result bundles, import and export.
#![forbid(unsafe_code)]

pub mod bundle;
pub mod export;
pub mod lineup;
pub mod spec;
pub mod store;
pub mod system;
