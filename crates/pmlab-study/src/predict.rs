//! The "polling (predicted)" stage: the wakeup stage's traced run replayed under the haltpoll
//! governor (`pmlab whatif`), so a machine where polling cannot be switched on still gets an
//! answer, labelled as a prediction with its bounds.

use crate::store::Store;
use pmlab_analysis::replay::{self, Config, WhatifReport};
use std::path::Path;

/// The poll value the sentence is about: haltpoll's default `guest_halt_poll_ns`.
const AT_NS: u64 = 200_000;

/// Why there is no prediction.
#[derive(Debug, thiserror::Error)]
pub enum PredictError {
    /// The wakeup stage's experiment has no traced run.
    #[error("the wakeup stage stored no traced run to replay")]
    NoTrace,
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The trace could not be read.
    #[error("cannot read the wakeup stage's trace {path}")]
    Trace {
        /// The trace file.
        path: String,
        /// Why it could not be read.
        #[source]
        source: pmlab_trace::TraceError,
    },
    /// The trace lacks events the replay needs.
    #[error(transparent)]
    Missing(#[from] pmlab_analysis::Missing),
}

/// Replay the first traced run of `experiment` and say what polling would have done.
pub fn predict(db: &Path, experiment: i64) -> Result<String, PredictError> {
    let store = Store::open(db)?;
    let e = store.load(experiment)?;
    let run = e
        .runs
        .iter()
        .find(|r| !r.warmup && r.trace_path.is_some())
        .ok_or(PredictError::NoTrace)?;
    let path = store.trace_of_run(run.id)?;
    let trace = pmlab_trace::open_with(&path, &pmlab_trace::dat::LoadOptions::without_kallsyms())
        .map_err(|source| PredictError::Trace {
        path: path.display().to_string(),
        source,
    })?;
    let (haltpoll, _) = replay::governor::machine_or_default();
    let cfg = Config {
        haltpoll,
        ..Config::default()
    };
    let report = replay::run(&trace, &pmlab_analysis::Options::default(), &cfg)?;
    Ok(sentence(&report, run.id))
}

/// One line for the study's summary.
pub fn sentence(r: &WhatifReport, run: i64) -> String {
    let us = |ns: u64| format!("{:.0} µs", ns as f64 / 1e3);
    let mut s = format!(
        "Polling (predicted, not measured: run {run}'s trace replayed under the haltpoll governor): "
    );
    match r.value(AT_NS) {
        Some(v) if v.caught + v.missed > 0 => {
            s += &format!(
                "at {} it would catch {} of {} wakes that ended a halt by IPI ({:.0}%), polling {:.1}% of idle time, and save {:.1} µs per caught wake at p50",
                us(AT_NS),
                v.caught,
                v.caught + v.missed,
                v.catch_rate * 100.0,
                v.poll_share_idle * 100.0,
                v.saved_p50_ns as f64 / 1e3,
            );
            if let Some(b) = &v.us_per_op {
                s += &format!(
                    "; the ping-pong's {:.1} µs/op would become {:.1}..{:.1}",
                    r.pingpong.as_ref().map_or(0.0, |p| p.traced_us_per_op),
                    b.low(),
                    b.high()
                );
            }
            if let Some(k) = r.knee_ns {
                s += &format!("; knee {}", us(k));
            }
            s += ".";
        }
        _ => s += "no wake in the trace ended a halt by IPI, so polling would catch nothing.",
    }
    s
}
