//! Unit newtypes and the `Metric` value that every measurement is reported as.

use serde::{Deserialize, Serialize};

/// A duration in nanoseconds.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct Nanos(pub u64);

/// A duration in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
pub struct Micros(pub f64);

/// A frequency in kHz, as cpufreq reports it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct KHz(pub u64);

impl From<Nanos> for Micros {
    fn from(n: Nanos) -> Self {
        Micros(n.0 as f64 / 1000.0)
    }
}

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Lower,
    Higher,
    /// A side metric with no better direction (e.g. idle exits/s).
    Neutral,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Lower => "lower",
            Direction::Higher => "higher",
            Direction::Neutral => "neutral",
        }
    }
}

/// One measured quantity: the unit of exchange between workloads, analyses and the lab.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    pub name: String,
    pub value: f64,
    pub unit: String,
    pub direction: Direction,
}

impl Metric {
    pub fn new(
        name: impl Into<String>,
        value: f64,
        unit: impl Into<String>,
        direction: Direction,
    ) -> Self {
        Metric {
            name: name.into(),
            value,
            unit: unit.into(),
            direction,
        }
    }
}
