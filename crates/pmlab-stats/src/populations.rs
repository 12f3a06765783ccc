//! One population per verdict: a configuration's runs grouped by the regime each measured
//! (named by the workload, e.g. `pipe`'s one CPU or two), a gap test that catches a
//! multimodal sample whose cause pmlab cannot name, and comparisons made only within one
//! regime ("inconclusive: mixed regimes" otherwise).
//!
//! The gap rule (documented choice): sort the sample, on a log scale when every value is
//! positive (timings vary by ratios); it is **bimodal** when it splits into a lower and an
//! upper group, each of at least 3 runs and 10% of the sample, separated by a gap between
//! neighbouring values larger than [`GAP_SDS`] times the larger of the two groups' standard
//! deviations and than a change of [`GAP_MIN_REL`]. Simulated unimodal samples (normal,
//! log-normal, shifted exponential) of 6-60 runs are called bimodal in about 1% of cases at 6-8
//! runs and almost never from 20 on; two regimes 8x apart (5 and 40 µs/op, CV 10-15%) are
//! caught in 8 of 10 samples of 10 runs and in every sample of 20 (the unit tests check both).

use crate::stats::{self, Comparison, Outcome, Summary};
use pmlab_kernel::Direction;
use pmlab_workload::Regime;
use serde::Serialize;

/// Runs a side needs in a regime for a verdict within it.
pub const MIN_REGIME_RUNS: usize = 3;
/// The gap between two modes, in standard deviations of the wider one.
pub const GAP_SDS: f64 = 4.0;
/// The gap between two modes, at least this share of the sample's median.
pub const GAP_MIN_REL: f64 = 0.05;
/// Each mode holds at least this share of the runs (and 3).
const MODE_MIN_SHARE: f64 = 0.1;

/// One measured run: its primary value and the regime it measured, when its workload says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    /// The run's primary metric, in that metric's unit.
    pub value: f64,
    /// The regime the run measured; None: its workload names none.
    pub regime: Option<Regime>,
    /// What other tasks took of the workload's CPUs during the run; None: not measured.
    pub disturbance: Option<crate::disturbance::RunDisturbance>,
}

/// Where a sample splits in two: `sorted[..at]` and `sorted[at..]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Modes {
    /// Runs in the lower mode.
    pub lower_n: usize,
    /// Runs in the upper mode.
    pub upper_n: usize,
    /// Median of the lower mode, in the sample's unit.
    pub lower_median: f64,
    /// Median of the upper mode, in the sample's unit.
    pub upper_median: f64,
}

fn sd(xs: &[f64]) -> f64 {
    Summary::of(xs).map(|s| s.stddev).unwrap_or(0.0)
}

/// The gap rule: two modes, or None for a sample that shows one.
pub fn modes(xs: &[f64]) -> Option<Modes> {
    let n = xs.len();
    let min_group = 3usize.max((MODE_MIN_SHARE * n as f64).ceil() as usize);
    if n < 2 * min_group {
        return None;
    }
    let mut sorted: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if sorted.len() != n {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let log = sorted[0] > 0.0;
    let (s, min_gap): (Vec<f64>, f64) = if log {
        (sorted.iter().map(|x| x.ln()).collect(), GAP_MIN_REL.ln_1p())
    } else {
        (sorted.clone(), GAP_MIN_REL * stats::median(&sorted).abs())
    };
    let mut best: Option<(f64, usize)> = None;
    for at in min_group..=n - min_group {
        let gap = s[at] - s[at - 1];
        let spread = sd(&s[..at]).max(sd(&s[at..]));
        if gap > GAP_SDS * spread && gap > min_gap {
            let score = if spread > 0.0 {
                gap / spread
            } else {
                f64::INFINITY
            };
            if best.is_none_or(|(b, _)| score > b) {
                best = Some((score, at));
            }
        }
    }
    best.map(|(_, at)| Modes {
        lower_n: at,
        upper_n: n - at,
        lower_median: stats::median(&sorted[..at]),
        upper_median: stats::median(&sorted[at..]),
    })
}

/// A configuration's runs in one regime.
#[derive(Debug, Clone, Serialize)]
pub struct RegimeGroup {
    /// None: runs whose workload names no regime.
    pub regime: Option<Regime>,
    /// Summary of the group's values.
    pub summary: Summary,
}

/// What a configuration's runs are made of.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Population {
    /// Runs per regime, most runs first (one group: a single population).
    pub regimes: Vec<RegimeGroup>,
    /// The gap rule found two modes in one regime's runs (the regime, and where).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bimodal: Option<(Option<Regime>, Modes)>,
}

impl Population {
    /// Group `runs` by regime and test each group for two modes.
    pub fn of(runs: &[Run]) -> Population {
        let mut keys: Vec<Option<Regime>> = runs.iter().map(|r| r.regime).collect();
        keys.sort();
        keys.dedup();
        let mut regimes: Vec<RegimeGroup> = keys
            .into_iter()
            .filter_map(|k| {
                let xs = values_in(runs, k);
                Summary::of(&xs).map(|summary| RegimeGroup { regime: k, summary })
            })
            .collect();
        regimes.sort_by_key(|g| std::cmp::Reverse(g.summary.n));
        let bimodal = regimes
            .iter()
            .find_map(|g| modes(&values_in(runs, g.regime)).map(|m| (g.regime, m)));
        Population { regimes, bimodal }
    }

    /// One regime and one mode.
    pub fn is_single(&self) -> bool {
        self.regimes.len() <= 1 && self.bimodal.is_none()
    }

    /// The regime every run measured, when there is exactly one named regime.
    pub fn regime(&self) -> Option<Regime> {
        match self.regimes.as_slice() {
            [g] => g.regime,
            _ => None,
        }
    }

    /// Words for a table cell: `two CPUs`, `one CPU 6, two CPUs 4`, `bimodal 6+4`, or empty
    /// for a single population whose workload names no regime.
    pub fn describe(&self) -> String {
        let mut s = match self.regimes.as_slice() {
            [] => String::new(),
            [g] => g.regime.map(|r| r.to_string()).unwrap_or_default(),
            gs => gs
                .iter()
                .map(|g| format!("{} {}", regime_words(g.regime), g.summary.n))
                .collect::<Vec<_>>()
                .join(", "),
        };
        if let Some((_, m)) = &self.bimodal {
            if !s.is_empty() {
                s.push_str("; ");
            }
            s.push_str(&format!("bimodal {}+{}", m.lower_n, m.upper_n));
        }
        s
    }
}

fn regime_words(r: Option<Regime>) -> &'static str {
    r.map(|r| r.as_str()).unwrap_or("no regime")
}

fn values_in(runs: &[Run], regime: Option<Regime>) -> Vec<f64> {
    runs.iter()
        .filter(|r| r.regime == regime)
        .map(|r| r.value)
        .collect()
}

/// A comparison within one regime.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegimeComparison {
    /// The regime compared; None: runs whose workload names no regime.
    pub regime: Option<Regime>,
    /// Reference runs in this regime.
    pub reference_n: usize,
    /// Compared runs in this regime.
    pub n: usize,
    /// The comparison of the two sides' runs in this regime.
    pub comparison: Comparison,
}

/// Compare `sample` with `reference` within one population: as [`stats::compare`] when both are
/// one regime and one mode; else per regime where both sides have [`MIN_REGIME_RUNS`], and
/// "inconclusive" where no regime has them, the qualifying regimes disagree, or a sample is
/// bimodal for a reason pmlab cannot name.
pub fn compare(reference: &[Run], sample: &[Run], direction: Direction, speed: bool) -> Comparison {
    compare_named(
        reference,
        sample,
        direction,
        speed,
        ("the reference", "this configuration"),
    )
}

/// [`compare`], then the disturbance rule (`crate::disturbance::judge`), which names the
/// sides `names` (reference, sample) in its words.
pub fn compare_named(
    reference: &[Run],
    sample: &[Run],
    direction: Direction,
    speed: bool,
    names: (&str, &str),
) -> Comparison {
    let mut c = compare_populations(reference, sample, direction, speed);
    crate::disturbance::judge(&mut c, reference, sample, names);
    c
}

fn compare_populations(
    reference: &[Run],
    sample: &[Run],
    direction: Direction,
    speed: bool,
) -> Comparison {
    let values = |rs: &[Run]| rs.iter().map(|r| r.value).collect::<Vec<_>>();
    let (pa, pb) = (Population::of(reference), Population::of(sample));
    let same_regime = pa.regimes.len() <= 1
        && pb.regimes.len() <= 1
        && pa.regimes.first().map(|g| g.regime) == pb.regimes.first().map(|g| g.regime);
    if same_regime && pa.bimodal.is_none() && pb.bimodal.is_none() {
        return stats::compare(&values(reference), &values(sample), direction, speed);
    }
    let mut whole = stats::compare(&values(reference), &values(sample), direction, speed);
    if let Some(((regime, m), side)) = pa
        .bimodal
        .map(|b| (b, "reference"))
        .or(pb.bimodal.map(|b| (b, "this configuration")))
    {
        whole.outcome = Outcome::Inconclusive;
        whole.verdict = format!(
            "inconclusive: bimodal runs ({side}{}: {} around {}, {} around {}), a condition \
             pmlab did not control",
            regime.map(|r| format!(", {r}")).unwrap_or_default(),
            m.lower_n,
            stats::fmt_num(m.lower_median),
            m.upper_n,
            stats::fmt_num(m.upper_median),
        );
        return whole;
    }
    let mut by_regime = Vec::new();
    for g in &pa.regimes {
        let a = values_in(reference, g.regime);
        let b = values_in(sample, g.regime);
        if a.len() >= MIN_REGIME_RUNS && b.len() >= MIN_REGIME_RUNS {
            by_regime.push(RegimeComparison {
                regime: g.regime,
                reference_n: a.len(),
                n: b.len(),
                comparison: stats::compare(&a, &b, direction, speed),
            });
        }
    }
    let counts = |p: &Population| {
        p.regimes
            .iter()
            .map(|g| format!("{} {}", g.summary.n, regime_words(g.regime)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let fix = fix_hint(&pa, &pb);
    let mut c = match by_regime.as_slice() {
        [] => Comparison {
            outcome: Outcome::Inconclusive,
            verdict: format!(
                "inconclusive: mixed regimes (reference: {}; this: {}){fix}",
                counts(&pa),
                counts(&pb)
            ),
            ..whole
        },
        [one] => {
            let mut c = one.comparison.clone();
            if matches!(c.outcome, Outcome::Undetermined) {
                c.outcome = Outcome::Inconclusive;
            }
            c.verdict = format!(
                "{} within {} runs ({} vs {})",
                c.verdict,
                regime_words(one.regime),
                one.reference_n,
                one.n
            );
            c
        }
        many => {
            let agree = many
                .iter()
                .all(|r| r.comparison.outcome == many[0].comparison.outcome);
            let parts = many
                .iter()
                .map(|r| format!("{}: {}", regime_words(r.regime), r.comparison.verdict))
                .collect::<Vec<_>>()
                .join("; ");
            Comparison {
                outcome: if agree {
                    many[0].comparison.outcome
                } else {
                    Outcome::Inconclusive
                },
                verdict: if agree {
                    format!("per regime: {parts}")
                } else {
                    format!("inconclusive: mixed regimes disagree ({parts}){fix}")
                },
                ..whole
            }
        }
    };
    c.by_regime = by_regime;
    c
}

/// `; pin with --placement spread` (or `same`): the placement that measures the regime the
/// reference ran in most.
fn fix_hint(a: &Population, b: &Population) -> String {
    let main = a
        .regimes
        .first()
        .or(b.regimes.first())
        .and_then(|g| g.regime)
        .and_then(|r| r.placement());
    let named = a
        .regimes
        .iter()
        .chain(&b.regimes)
        .any(|g| g.regime.is_some());
    match main {
        Some(p) => format!("; pin with --placement {p}"),
        None if named => "; pin with --placement spread or same".into(),
        None => String::new(),
    }
}

/// Whether a comparison of these two samples stays within one population (the protocol's
/// early "decided" stop needs it).
pub fn comparable(reference: &[Run], sample: &[Run]) -> bool {
    let (pa, pb) = (Population::of(reference), Population::of(sample));
    pa.is_single() && pb.is_single() && pa.regime() == pb.regime()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn gaussian(rng: &mut ChaCha8Rng) -> f64 {
        let u1: f64 = rng.random_range(f64::EPSILON..1.0);
        let u2: f64 = rng.random();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    fn runs(xs: &[f64], regime: Option<Regime>) -> Vec<Run> {
        xs.iter()
            .map(|&value| Run {
                value,
                regime,
                disturbance: None,
            })
            .collect()
    }

    #[test]
    fn two_regimes_are_two_modes() {
        let xs = [4.1, 4.3, 4.0, 38.0, 41.0, 4.2, 39.5, 40.2, 4.4, 37.9];
        let m = modes(&xs).expect("bimodal");
        assert_eq!((m.lower_n, m.upper_n), (5, 5));
        assert!(m.lower_median < 5.0 && m.upper_median > 37.0);
    }

    #[test]
    fn unimodal_noise_is_rarely_called_bimodal() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut flagged = [0usize; 3];
        let trials = 3000;
        for t in 0..trials {
            let n = [6, 8, 10, 20, 30, 60][t % 6];
            let normal: Vec<f64> = (0..n).map(|_| 100.0 + 5.0 * gaussian(&mut rng)).collect();
            let lognormal: Vec<f64> = (0..n)
                .map(|_| 100.0 * (0.3 * gaussian(&mut rng)).exp())
                .collect();
            let exponential: Vec<f64> = (0..n)
                .map(|_| 100.0 - 20.0 * rng.random_range(f64::EPSILON..1.0).ln())
                .collect();
            flagged[0] += usize::from(modes(&normal).is_some());
            flagged[1] += usize::from(modes(&lognormal).is_some());
            flagged[2] += usize::from(modes(&exponential).is_some());
        }
        for (kind, f) in ["normal", "lognormal", "exponential"].iter().zip(flagged) {
            let rate = f as f64 / trials as f64;
            assert!(rate < 0.01, "{kind}: {rate}");
        }
    }

    #[test]
    fn two_regimes_are_caught_from_ten_runs() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for (n, at_least) in [(10, 0.7), (20, 0.98)] {
            let trials = 500;
            let caught = (0..trials)
                .filter(|_| {
                    let xs: Vec<f64> = (0..n)
                        .map(|_| {
                            if rng.random::<f64>() < 0.4 {
                                5.0 * (1.0 + 0.1 * gaussian(&mut rng))
                            } else {
                                40.0 * (1.0 + 0.15 * gaussian(&mut rng))
                            }
                        })
                        .collect();
                    modes(&xs).is_some()
                })
                .count();
            let rate = caught as f64 / trials as f64;
            assert!(rate >= at_least, "n={n}: {rate}");
        }
    }

    #[test]
    fn a_few_outliers_are_not_a_mode() {
        let mut xs: Vec<f64> = (0..20).map(|i| 10.0 + 0.01 * i as f64).collect();
        xs.extend([30.0, 31.0]);
        assert!(modes(&xs).is_none());
    }

    #[test]
    fn one_regime_compares_as_before() {
        let a = runs(&[40.0, 41.0, 39.0, 40.5, 39.5], Some(Regime::TwoCpus));
        let b = runs(&[7.0, 7.1, 6.9, 7.05, 6.95], Some(Regime::TwoCpus));
        let c = compare(&a, &b, Direction::Lower, true);
        assert_eq!(c.outcome, Outcome::Better);
        assert!(c.verdict.starts_with("faster by"), "{}", c.verdict);
        assert!(c.by_regime.is_empty());
    }

    #[test]
    fn mixed_regimes_without_enough_runs_are_inconclusive() {
        let mut a = runs(&[40.0, 41.0], Some(Regime::TwoCpus));
        a.extend(runs(&[4.0, 4.1, 4.2], Some(Regime::OneCpu)));
        let b = runs(&[7.0, 7.1, 6.9, 7.05], Some(Regime::TwoCpus));
        let c = compare(&a, &b, Direction::Lower, true);
        assert_eq!(c.outcome, Outcome::Inconclusive);
        assert!(
            c.verdict.starts_with("inconclusive: mixed regimes"),
            "{}",
            c.verdict
        );
        assert!(c.verdict.contains("--placement"), "{}", c.verdict);
    }

    #[test]
    fn mixed_regimes_compare_within_the_regime_both_have() {
        let mut a = runs(&[40.0, 41.0, 39.0, 40.5], Some(Regime::TwoCpus));
        a.extend(runs(&[4.0, 4.1, 4.2, 4.05], Some(Regime::OneCpu)));
        let mut b = runs(&[30.0, 30.5, 29.5, 30.2], Some(Regime::TwoCpus));
        b.extend(runs(&[4.3], Some(Regime::OneCpu)));
        let c = compare(&a, &b, Direction::Lower, true);
        assert_eq!(c.outcome, Outcome::Better);
        assert!(c.verdict.contains("within two CPUs runs"), "{}", c.verdict);
        assert_eq!(c.by_regime.len(), 1);
    }

    #[test]
    fn an_unnamed_bimodal_sample_gets_no_verdict() {
        let a = runs(
            &[4.1, 4.3, 4.0, 38.0, 41.0, 4.2, 39.5, 40.2, 4.4, 37.9],
            None,
        );
        let b = runs(
            &[7.0, 7.1, 6.9, 7.05, 6.95, 7.0, 7.1, 6.9, 7.05, 6.95],
            None,
        );
        let c = compare(&a, &b, Direction::Lower, true);
        assert_eq!(c.outcome, Outcome::Inconclusive);
        assert!(c.verdict.contains("bimodal"), "{}", c.verdict);
        assert!(!comparable(&a, &b));
    }
}
