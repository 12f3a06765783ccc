//! Small statistics helpers: a residency/latency summary (n, min, mean, p50, p99, max) by
//! nearest-rank percentiles, and time formatting.

use serde::Serialize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Summary {
    pub n: u64,
    pub total_ns: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

/// Nearest-rank percentile `p` (0-100) of sorted values; 0 when empty.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Summary {
    /// Summary of `v` (sorted in place).
    pub fn of(v: &mut [u64]) -> Summary {
        if v.is_empty() {
            return Summary::default();
        }
        v.sort_unstable();
        let total: u64 = v.iter().sum();
        Summary {
            n: v.len() as u64,
            total_ns: total,
            min_ns: v[0],
            mean_ns: total as f64 / v.len() as f64,
            p50_ns: percentile(v, 50.0),
            p99_ns: percentile(v, 99.0),
            max_ns: v[v.len() - 1],
        }
    }
}

/// ns as µs with 3 decimals.
pub fn us(ns: f64) -> f64 {
    (ns / 1e3 * 1e3).round() / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn nearest_rank() {
        let mut v: Vec<u64> = (1..=100).collect();
        let s = Summary::of(&mut v);
        assert_eq!((s.p50_ns, s.p99_ns, s.min_ns, s.max_ns), (50, 99, 1, 100));
        assert_eq!(s.mean_ns, 50.5);
        assert_eq!(Summary::of(&mut []).n, 0);
    }
}
