//! pmlab-stats through its public API: verdicts on samples whose answer is known, confidence
//! intervals that narrow as runs are added, and populations that split two regimes.

#[macro_use]
#[path = "../../../tests/support/harness.rs"]
mod harness;

use pmlab_kernel::Direction;
use pmlab_stats::populations::{self, Population, Run};
use pmlab_stats::stats::{self, Outcome, Summary};
use pmlab_workload::Regime;

/// `n` values spread evenly over `centre` ± `spread` (deterministic, symmetric).
fn sample(centre: f64, spread: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| centre + spread * (2.0 * i as f64 / (n - 1) as f64 - 1.0))
        .collect()
}

fn runs(values: &[f64], regime: Option<Regime>) -> Vec<Run> {
    values
        .iter()
        .map(|&value| Run {
            value,
            regime,
            disturbance: None,
        })
        .collect()
}

it_test!(a_clear_change_gets_a_verdict_in_the_metrics_direction);
/// 10 µs against 12 µs with a spread of ±0.5: slower when lower is better, better when higher
/// is, "changed" when the metric has no direction.
fn a_clear_change_gets_a_verdict_in_the_metrics_direction() {
    let a = sample(10.0, 0.5, 10);
    let b = sample(12.0, 0.5, 10);
    let c = stats::compare(&a, &b, Direction::Lower, true);
    assert_eq!(c.outcome, Outcome::Worse, "{}", c.verdict);
    assert!(c.verdict.starts_with("slower by 20.0%"), "{}", c.verdict);
    let rel = c.relative.unwrap();
    assert!((rel.change - 0.2).abs() < 1e-9, "{rel:?}");
    assert!(rel.low > 0.0 && rel.low < 0.2 && rel.high > 0.2, "{rel:?}");
    assert!(c.welch.unwrap().p < 0.001, "{:?}", c.welch);
    assert_eq!(
        stats::compare(&a, &b, Direction::Higher, false).outcome,
        Outcome::Better
    );
    assert_eq!(
        stats::compare(&a, &b, Direction::Neutral, false).outcome,
        Outcome::Changed
    );
}

it_test!(noise_is_within_noise_and_one_run_is_undetermined);
fn noise_is_within_noise_and_one_run_is_undetermined() {
    let a = sample(10.0, 2.0, 8);
    let b = sample(10.1, 2.0, 8);
    let c = stats::compare(&a, &b, Direction::Lower, true);
    assert_eq!(c.outcome, Outcome::NoSignificantChange, "{}", c.verdict);
    assert!(!c.relative.unwrap().excludes_zero());
    assert!(
        c.verdict.starts_with("no significant change"),
        "{}",
        c.verdict
    );
    let one = stats::compare(&a, &[10.0], Direction::Lower, true);
    assert_eq!(one.outcome, Outcome::Undetermined);
    assert!(one.relative.is_none() && one.welch.is_none());
}

it_test!(ci_width_shrinks_as_runs_are_added);
/// The same spread measured 5, 20 and 80 times: the CI of the mean narrows (roughly as 1/√n)
/// and always contains the mean.
fn ci_width_shrinks_as_runs_are_added() {
    let widths: Vec<f64> = [5, 20, 80]
        .iter()
        .map(|&n| {
            let s = Summary::of(&sample(100.0, 10.0, n)).unwrap();
            assert_eq!(s.n, n);
            assert!((s.mean - 100.0).abs() < 1e-9, "{s:?}");
            assert!(s.ci_low < s.mean && s.mean < s.ci_high, "{s:?}");
            assert!((s.ci_high - s.ci_low - 2.0 * s.ci_half_width).abs() < 1e-9);
            s.ci_half_width
        })
        .collect();
    assert!(widths[0] > 2.0 * widths[1], "{widths:?}");
    assert!(widths[1] > 1.5 * widths[2], "{widths:?}");
    assert!(Summary::of(&[]).is_none());
    assert!(Summary::of(&[3.0]).unwrap().ci_half_width.is_nan());
}

it_test!(outliers_are_flagged_not_dropped);
fn outliers_are_flagged_not_dropped() {
    let mut xs = sample(10.0, 0.3, 12);
    xs.push(50.0);
    let s = Summary::of(&xs).unwrap();
    assert_eq!(s.outliers, vec![12]);
    assert_eq!(s.n, 13);
    assert_eq!(s.max, 50.0);
}

it_test!(populations_split_two_regimes_and_compare_within_each);
/// Runs on one CPU (5 µs/op) and on two (40 µs/op): two groups, and a comparison made per
/// regime, not across the mixture.
fn populations_split_two_regimes_and_compare_within_each() {
    let one = sample(5.0, 0.3, 6);
    let two = sample(40.0, 2.0, 4);
    let mut mixed = runs(&one, Some(Regime::OneCpu));
    mixed.extend(runs(&two, Some(Regime::TwoCpus)));
    let p = Population::of(&mixed);
    assert!(!p.is_single());
    assert_eq!(p.regimes.len(), 2);
    assert_eq!(p.regimes[0].regime, Some(Regime::OneCpu)); // most runs first
    assert_eq!(p.regimes[0].summary.n, 6);
    assert!((p.regimes[1].summary.mean - 40.0).abs() < 1e-9);
    assert_eq!(p.regime(), None);

    let single = Population::of(&runs(&two, Some(Regime::TwoCpus)));
    assert!(single.is_single());
    assert_eq!(single.regime(), Some(Regime::TwoCpus));

    // The same mixture on both sides, the one-CPU runs 10% slower: per regime, the one-CPU
    // runs are worse and the two-CPU runs unchanged, so no single verdict holds.
    let mut slower = runs(&sample(5.5, 0.3, 6), Some(Regime::OneCpu));
    slower.extend(runs(&two, Some(Regime::TwoCpus)));
    let c = populations::compare(&mixed, &slower, Direction::Lower, true);
    assert_eq!(c.by_regime.len(), 2, "{c:?}");
    let by = |r| c.by_regime.iter().find(|x| x.regime == Some(r)).unwrap();
    assert_eq!(by(Regime::OneCpu).comparison.outcome, Outcome::Worse);
    assert_eq!(
        by(Regime::TwoCpus).comparison.outcome,
        Outcome::NoSignificantChange
    );
    assert_eq!(c.outcome, Outcome::Inconclusive, "{}", c.verdict);
    assert!(
        c.verdict.contains("mixed regimes disagree"),
        "{}",
        c.verdict
    );
    assert!(!populations::comparable(&mixed, &slower));
    let two_runs = runs(&two, Some(Regime::TwoCpus));
    assert!(populations::comparable(&two_runs, &two_runs));
}

it_test!(the_gap_rule_finds_two_unnamed_modes);
fn the_gap_rule_finds_two_unnamed_modes() {
    let mut xs = sample(5.0, 0.4, 7);
    xs.extend(sample(40.0, 3.0, 5));
    let m = populations::modes(&xs).expect("two modes");
    assert_eq!((m.lower_n, m.upper_n), (7, 5));
    assert!((m.lower_median - 5.0).abs() < 1e-9 && (m.upper_median - 40.0).abs() < 1e-9);
    assert!(populations::modes(&sample(10.0, 1.0, 12)).is_none());
    let p = Population::of(&runs(&xs, None));
    assert!(p.bimodal.is_some() && !p.is_single());
    assert!(p.describe().contains("bimodal 7+5"), "{}", p.describe());
}

fn main() -> std::process::ExitCode {
    harness::main(vec![harness::source_check(
        "harness::every_test_is_registered",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests"),
    )])
}
