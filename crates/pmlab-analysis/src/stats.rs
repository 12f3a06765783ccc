//! Small statistics helpers: the summary of a set of durations (n, min, mean, p50, p99, max) by
//! nearest-rank percentiles, and time formatting.

use serde::Serialize;

/// The distribution of a set of durations in a trace (residencies, latencies). Not the lab's
/// `stats::Summary`, which summarises a handful of run results with a confidence interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct DurationSummary {
    /// Number of durations.
    pub n: u64,
    /// Their sum, ns.
    pub total_ns: u64,
    /// Smallest, ns.
    pub min_ns: u64,
    /// Mean, ns.
    pub mean_ns: f64,
    /// Median (nearest rank), ns.
    pub p50_ns: u64,
    /// 99th percentile (nearest rank), ns.
    pub p99_ns: u64,
    /// Largest, ns.
    pub max_ns: u64,
}

/// The note under tables that show percentiles.
pub const PERCENTILE_NOTE: &str = "p50/p99 are nearest-rank percentiles: the smallest value with at least that share of the values at or below it";

/// Nearest-rank percentile `p` (0-100) of sorted values; 0 when empty.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    pmlab_kernel::units::percentile(sorted, p / 100.0).unwrap_or(0)
}

/// Nearest-rank percentiles `ps` (ascending, in percent) of `v`, as [`percentile`] gives them
/// on the sorted values, by selection (O(n) each, from the highest down) instead of a sort;
/// `v` is reordered. None when `v` is empty.
pub fn select_percentiles<const N: usize>(v: &mut [u64], ps: [f64; N]) -> Option<[u64; N]> {
    if v.is_empty() {
        return None;
    }
    let mut out = [0u64; N];
    let mut upto = v.len();
    for i in (0..N).rev() {
        let k = pmlab_kernel::units::nearest_rank(v.len(), ps[i] / 100.0);
        // Lower ranks lie left of a selected one: each selection works on what is left.
        let k = k.min(upto.saturating_sub(1));
        out[i] = *v[..upto].select_nth_unstable(k).1;
        upto = k + 1;
    }
    Some(out)
}

/// Nearest-rank indices of p50 and p99 among `n` values, as in [`percentile`].
fn ranks(n: usize) -> (usize, usize) {
    let rank = |p: f64| pmlab_kernel::units::nearest_rank(n, p / 100.0);
    (rank(50.0), rank(99.0))
}

/// Inputs up to this many values are copied and selected in place; larger ones take a
/// radix selection over the parts.
const COPY_UP_TO: usize = 1 << 14;

/// Bits of the value range resolved per radix pass (a 2048-bucket histogram).
const RADIX_BITS: u32 = 11;

impl DurationSummary {
    /// DurationSummary of the values of all `parts` together, without copying large inputs: p50 and
    /// p99 come from a radix selection, a few passes over the values (each resolves 11 bits
    /// of the value range). The result equals [`DurationSummary::of`] on the concatenation.
    pub fn of_parts(parts: &[&[u64]]) -> DurationSummary {
        let n: usize = parts.iter().map(|p| p.len()).sum();
        if n <= COPY_UP_TO {
            return DurationSummary::of(&mut parts.concat());
        }
        let values = || parts.iter().flat_map(|p| p.iter().copied());
        let (mut total, mut min, mut max) = (0u64, u64::MAX, 0u64);
        for x in values() {
            total += x;
            min = min.min(x);
            max = max.max(x);
        }
        let (k50, k99) = ranks(n);
        // Per percentile: its value lies in [lo, lo + 2^bits), and `rank` values below it
        // lie in that range too.
        let mut lo = [min; 2];
        let mut bits = [u64::BITS - (max - min).leading_zeros(); 2];
        let mut rank = [k50 as u64, k99 as u64];
        while bits.iter().any(|&b| b > 0) {
            let shift = bits.map(|b| b.saturating_sub(RADIX_BITS));
            let mut hist = [[0u64; 1 << RADIX_BITS]; 2];
            for x in values() {
                for t in 0..2 {
                    let d = x.wrapping_sub(lo[t]);
                    if bits[t] > 0 && x >= lo[t] && (bits[t] == u64::BITS || d >> bits[t] == 0) {
                        hist[t][(d >> shift[t]) as usize] += 1;
                    }
                }
            }
            for t in 0..2 {
                if bits[t] == 0 {
                    continue;
                }
                let mut below = 0u64;
                for (b, &c) in hist[t].iter().enumerate() {
                    if below + c > rank[t] {
                        rank[t] -= below;
                        lo[t] += (b as u64) << shift[t];
                        break;
                    }
                    below += c;
                }
                bits[t] = shift[t];
            }
        }
        DurationSummary {
            n: n as u64,
            total_ns: total,
            min_ns: min,
            mean_ns: total as f64 / n as f64,
            p50_ns: lo[0],
            p99_ns: lo[1],
            max_ns: max,
        }
    }

    /// DurationSummary of `v` (reordered in place: the percentiles are selected, not fully sorted).
    pub fn of(v: &mut [u64]) -> DurationSummary {
        if v.is_empty() {
            return DurationSummary::default();
        }
        let n = v.len();
        let [p50, p99] = select_percentiles(v, [50.0, 99.0]).expect("not empty");
        let total: u64 = v.iter().sum();
        DurationSummary {
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
    fn selected_percentiles_equal_the_sorted_ones() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for n in [1usize, 2, 5, 99, 100, 101, 1000, 4097] {
            let mut v: Vec<u64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x % 1000
                })
                .collect();
            let mut sorted = v.clone();
            sorted.sort_unstable();
            let ps = [1.0, 10.0, 50.0, 99.0];
            let got = select_percentiles(&mut v, ps).unwrap();
            for (g, p) in got.iter().zip(ps) {
                assert_eq!(*g, percentile(&sorted, p), "n {n} p{p}");
            }
        }
        assert_eq!(select_percentiles(&mut [], [50.0]), None);
    }
    #[test]
    fn nearest_rank() {
        let mut v: Vec<u64> = (1..=100).collect();
        let s = DurationSummary::of(&mut v);
        assert_eq!((s.p50_ns, s.p99_ns, s.min_ns, s.max_ns), (50, 99, 1, 100));
        assert_eq!(s.mean_ns, 50.5);
        assert_eq!(DurationSummary::of(&mut []).n, 0);
        let mut w: Vec<u64> = (0..1000).map(|i| (i * 7919) % 1009).collect();
        let mut sorted = w.clone();
        sorted.sort_unstable();
        let s = DurationSummary::of(&mut w);
        assert_eq!(s.p50_ns, percentile(&sorted, 50.0));
        assert_eq!(s.p99_ns, percentile(&sorted, 99.0));
        assert_eq!((s.min_ns, s.max_ns), (sorted[0], sorted[999]));
        let s = DurationSummary::of(&mut [5]);
        assert_eq!((s.p50_ns, s.p99_ns, s.min_ns, s.max_ns), (5, 5, 5, 5));
    }

    /// The radix selection over parts gives what selection on the concatenation gives:
    /// wide and narrow ranges, ties, extremes, empty parts.
    #[test]
    fn parts_match_the_concatenation() {
        let mut x = 99u64;
        let mut rnd = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 11
        };
        let sets: Vec<Vec<u64>> = vec![
            (0..50_000).map(|_| rnd() % 1_000_000).collect(),
            (0..40_000).map(|_| rnd() >> 20).collect(),
            (0..30_000).map(|_| 7 + rnd() % 3).collect(),
            vec![42; 20_000],
            (0..20_000)
                .map(|i| if i % 2 == 0 { 0 } else { 1 << 48 })
                .collect(),
            (0..100).collect(),
        ];
        for v in &sets {
            for cut in [0, 1, v.len() / 3, v.len()] {
                let parts: Vec<&[u64]> = vec![&v[..cut], &[], &v[cut..]];
                let want = DurationSummary::of(&mut v.clone());
                assert_eq!(
                    DurationSummary::of_parts(&parts),
                    want,
                    "n {} cut {cut}",
                    v.len()
                );
            }
        }
        assert_eq!(DurationSummary::of_parts(&[]), DurationSummary::default());
    }
}
