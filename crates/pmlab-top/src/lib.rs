//! pmlab-top: `pmlab top`, the live view of who wakes the CPUs. The interval engine
//! ([`engine`]) decodes the recorder's new pages each refresh and runs the trace analyses
//! (idle residency, wakeup causes with needless exits, idle-balance kicks) over the
//! interval's window; [`live`] drives the recorder, the counters and the refresh loop;
//! [`ui`] draws it in the terminal (ratatui) or prints one JSON object per interval.
#![forbid(unsafe_code)]

pub mod engine;
pub mod live;
pub mod ui;
