//! pmlab-stats: the statistics of pmlab's experiments: summaries with confidence intervals,
//! Welch comparisons with their verdicts, quantile changes, and populations (runs grouped by
//! the regime they measured, and the multimodality check).
#![forbid(unsafe_code)]

pub mod disturbance;
pub mod populations;
pub mod stats;
