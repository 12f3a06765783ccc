//! pmlab-report: every rendering of stored results: the report model (rows, comparisons,
//! notes), text, markdown, mail, JSON and CSV renderers, and the HTML report.
#![forbid(unsafe_code)]

pub mod html;
pub mod render;
pub mod report;

// The data model and statistics under their own names, so paths read `crate::store::..`.
use pmlab_stats::{populations, stats};
use pmlab_store::{bundle, export, lineup, spec, store, system};
