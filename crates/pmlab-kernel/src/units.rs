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

impl KHz {
    /// The frequency in MHz, rounded to the nearest (799,500 kHz is 800 MHz, not 799).
    pub fn mhz(self) -> u64 {
        (self.0 + 500) / 1000
    }
}

impl From<Nanos> for Micros {
    fn from(n: Nanos) -> Self {
        Micros(n.0 as f64 / 1000.0)
    }
}

/// CLOCK_MONOTONIC now, in nanoseconds (the clock traces are recorded with).
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Index of the nearest-rank percentile `q` (a fraction, 0 to 1) among `n` sorted values
/// (n > 0): the smallest value with at least `q` of the values at or below it. pmlab's one
/// percentile definition, for analyses and workloads alike.
pub fn nearest_rank(n: usize, q: f64) -> usize {
    ((q * n as f64).ceil() as usize).clamp(1, n) - 1
}

/// Nearest-rank percentile `q` (0 to 1) of sorted values (see [`nearest_rank`]); `None` when empty.
pub fn percentile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    (!sorted.is_empty()).then(|| sorted[nearest_rank(sorted.len(), q)])
}

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Smaller is better (latency, time).
    Lower,
    /// Larger is better (throughput).
    Higher,
    /// A side metric with no better direction (e.g. idle exits/s).
    Neutral,
}

impl Direction {
    /// `lower`, `higher` or `neutral`, as stored and printed.
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
    /// Metric name (`us_per_op`, `latency.p99_us`); the unit is not part of it.
    pub name: String,
    /// The CPU of a per-CPU metric; `None` for a whole-machine one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// The value, in `unit`.
    pub value: f64,
    /// Unit as printed (`us`, `s`, `ops/s`, `%`; empty for a count).
    pub unit: String,
    /// Which way it improves.
    pub direction: Direction,
}

impl Metric {
    /// A whole-machine metric (no CPU).
    pub fn new(
        name: impl Into<String>,
        value: f64,
        unit: impl Into<String>,
        direction: Direction,
    ) -> Self {
        Metric {
            name: name.into(),
            cpu: None,
            value,
            unit: unit.into(),
            direction,
        }
    }

    /// The same metric, measured on one CPU.
    pub fn on_cpu(mut self, cpu: u32) -> Self {
        self.cpu = Some(cpu);
        self
    }

    /// Its identity.
    pub fn key(&self) -> MetricKey {
        MetricKey {
            name: self.name.clone(),
            cpu: self.cpu,
        }
    }

    /// Whether this is the metric `key` names.
    pub fn is(&self, key: &MetricKey) -> bool {
        self.name == key.name && self.cpu == key.cpu
    }
}

/// A metric's identity: its name and, for a per-CPU metric, the CPU.
///
/// Written (in tables, CSV and on the command line) as `NAME` or `NAME@cpuN`; that text form
/// is made by `Display` and read by `FromStr`, nowhere else.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MetricKey {
    /// Metric name.
    pub name: String,
    /// The CPU of a per-CPU metric; `None` for a whole-machine one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
}

impl MetricKey {
    /// A whole-machine metric.
    pub fn new(name: impl Into<String>) -> MetricKey {
        MetricKey {
            name: name.into(),
            cpu: None,
        }
    }

    /// A metric of one CPU.
    pub fn on_cpu(name: impl Into<String>, cpu: u32) -> MetricKey {
        MetricKey {
            name: name.into(),
            cpu: Some(cpu),
        }
    }
}

impl std::fmt::Display for MetricKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.cpu {
            Some(c) => write!(f, "{}@cpu{c}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl std::str::FromStr for MetricKey {
    type Err = std::convert::Infallible;
    /// `NAME@cpuN` is CPU N's `NAME`; any other text is a whole-machine name.
    fn from_str(s: &str) -> Result<MetricKey, Self::Err> {
        Ok(match s.rsplit_once("@cpu") {
            Some((name, n))
                if !name.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) =>
            {
                match n.parse() {
                    Ok(cpu) => MetricKey::on_cpu(name, cpu),
                    Err(_) => MetricKey::new(s),
                }
            }
            _ => MetricKey::new(s),
        })
    }
}

impl From<&str> for MetricKey {
    fn from(s: &str) -> MetricKey {
        match s.parse() {
            Ok(k) => k,
            Err(e) => match e {},
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_suffix_splits() {
        let k = |s: &str| s.parse::<MetricKey>().unwrap();
        assert_eq!(
            k("irq.CAL.per_s@cpu1"),
            MetricKey::on_cpu("irq.CAL.per_s", 1)
        );
        assert_eq!(k("idle.share_pct"), MetricKey::new("idle.share_pct"));
        assert_eq!(k("x@cpu"), MetricKey::new("x@cpu"));
        assert_eq!(k("x@cpu1a"), MetricKey::new("x@cpu1a"));
        assert_eq!(
            MetricKey::on_cpu("irq.CAL.per_s", 1).to_string(),
            "irq.CAL.per_s@cpu1"
        );
    }

    #[test]
    fn a_metric_keeps_its_cpu_out_of_its_name_in_json() {
        let m = Metric::new("irq.LOC.per_s", 3.0, "/s", Direction::Neutral).on_cpu(1);
        let j = serde_json::to_value(&m).unwrap();
        assert_eq!(j["name"], "irq.LOC.per_s");
        assert_eq!(j["cpu"], 1);
        let total = serde_json::to_value(Metric::new("x", 1.0, "", Direction::Neutral)).unwrap();
        assert!(total.get("cpu").is_none());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let s: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&s, 0.5), Some(50));
        assert_eq!(percentile(&s, 0.999), Some(100));
        assert_eq!(percentile(&[1, 2], 0.5), Some(1));
        assert_eq!(percentile::<u32>(&[], 0.5), None);
    }
}
