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
    /// Summary of `v` (reordered in place: the percentiles are selected, not fully sorted).
    pub fn of(v: &mut [u64]) -> Summary {
        if v.is_empty() {
            return Summary::default();
        }
        let n = v.len();
        // Nearest-rank indices as in `percentile`; p50 <= p99.
        let rank = |p: f64| (((p / 100.0) * n as f64).ceil() as usize).clamp(1, n) - 1;
        let (k50, k99) = (rank(50.0), rank(99.0));
        let (below, &mut p99, _) = v.select_nth_unstable(k99);
        let p50 = if k50 < k99 {
            *below.select_nth_unstable(k50).1
        } else {
            p99
        };
        let total: u64 = v.iter().sum();
        Summary {
            n: n as u64,
            total_ns: total,
            min_ns: *v.iter().min().expect("not empty"),
            mean_ns: total as f64 / n as f64,
            p50_ns: p50,
            p99_ns: p99,
            max_ns: *v.iter().max().expect("not empty"),
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
        let mut w: Vec<u64> = (0..1000).map(|i| (i * 7919) % 1009).collect();
        let mut sorted = w.clone();
        sorted.sort_unstable();
        let s = Summary::of(&mut w);
        assert_eq!(s.p50_ns, percentile(&sorted, 50.0));
        assert_eq!(s.p99_ns, percentile(&sorted, 99.0));
        assert_eq!((s.min_ns, s.max_ns), (sorted[0], sorted[999]));
        let s = Summary::of(&mut [5]);
        assert_eq!((s.p50_ns, s.p99_ns, s.min_ns, s.max_ns), (5, 5, 5, 5));
    }
}
