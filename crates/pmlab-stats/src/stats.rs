//! Statistics for experiments: per-configuration summaries, pairwise comparisons
//! (Fieller CI of the ratio of means, Welch's t-test, Mann-Whitney U), verdicts and the sweep knee.
//!
//! Everything here is computed from raw samples at read time; nothing is stored.
//!
//! Methods (documented choices):
//! - Summary CI: mean ± t(0.975, n−1)·s/√n (the t and normal distributions are statrs').
//! - Relative change of B against the reference A: ratio of means mB/mA − 1, with a 95% CI from
//!   **Fieller's theorem** for two independent means, using Welch–Satterthwaite degrees of freedom.
//!   Unlike "Welch CI of the difference divided by mA", Fieller accounts for the uncertainty of
//!   the denominator; its CI excludes 0 exactly when Welch's t-test rejects at 5%, so the CI and
//!   the p-value never disagree. When the reference mean itself is not significantly different
//!   from 0 (g ≥ 1) the CI is unbounded and the verdict is "no significant change".
//! - Skew: when either sample is significantly skewed (|G1| > 2·SES, the standard error of
//!   skewness for its n, so small samples are not called skewed by chance), a Mann-Whitney U test (normal
//!   approximation with tie and continuity corrections, as scipy's `method="asymptotic"`) must
//!   also reject at 5% for a verdict to call the change significant.
//! - Outliers: modified z-score 0.6745·|x − median|/MAD > 3.5 (Iglewicz–Hoaglin); when the MAD
//!   is 0 the mean absolute deviation (scaled by 0.7979) is used instead. Outliers are flagged,
//!   never dropped.
//! - Knee (see [`knee`]): the first configuration, in sweep order, that is not shown to be worse
//!   than the best by more than the noise margin.

use pmlab_kernel::Direction;
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};
use statrs::function::gamma::gamma_ur;

/// Confidence level used everywhere (two-sided).
pub const CONFIDENCE: f64 = 0.95;
/// Significance level of the tests (1 − CONFIDENCE).
pub const ALPHA: f64 = 0.05;
/// A sample is skewed when |G1| exceeds this many standard errors of skewness.
pub const SKEW_STANDARD_ERRORS: f64 = 2.0;
/// Modified z-score above which a sample is flagged as an outlier.
pub const OUTLIER_Z: f64 = 3.5;

// ---------------------------------------------------------------------------------------------
// Special functions and distributions.

/// ln Γ(x) for x > 0.
pub fn ln_gamma(x: f64) -> f64 {
    statrs::function::gamma::ln_gamma(x)
}

/// Student's t with `df` (real, > 0) degrees of freedom, centred at 0 with scale 1.
fn student_t(df: f64) -> StudentsT {
    StudentsT::new(0.0, 1.0, df).expect("student t: df > 0")
}

/// Two-sided tail probability of Student's t: P(|T| ≥ |t|) with `df` degrees of freedom.
pub fn student_t_two_sided_p(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return if t.is_nan() { f64::NAN } else { 0.0 };
    }
    (2.0 * student_t(df).sf(t.abs())).clamp(0.0, 1.0)
}

/// CDF of Student's t with `df` (real, > 0) degrees of freedom.
pub fn student_t_cdf(t: f64, df: f64) -> f64 {
    student_t(df).cdf(t)
}

/// Quantile of Student's t: the `t` with CDF(t) = `p`, for 0 < p < 1 and df > 0.
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    assert!(
        p > 0.0 && p < 1.0 && df > 0.0,
        "student_t_quantile({p}, {df})"
    );
    student_t(df).inverse_cdf(p)
}

/// Upper tail of the standard normal distribution, P(Z > z).
///
/// From the regularized upper incomplete gamma function, P(Z > z) = Q(1/2, z²/2)/2 for
/// z ≥ 0: statrs' `Normal` goes through its `erfc`, which is 1e-11 off in the tail.
pub fn normal_sf(z: f64) -> f64 {
    let x = z * z / 2.0;
    // statrs refuses x = 0 and x = ∞, where Q is 1 and 0.
    let q = match x {
        0.0 => 1.0,
        x if x.is_infinite() => 0.0,
        x => gamma_ur(0.5, x),
    };
    let half_tail = 0.5 * q;
    if z >= 0.0 {
        half_tail
    } else {
        1.0 - half_tail
    }
}

/// CDF of the standard normal distribution.
pub fn normal_cdf(z: f64) -> f64 {
    1.0 - normal_sf(z)
}

// ---------------------------------------------------------------------------------------------
// Descriptive statistics.

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

fn sample_variance(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() - 1) as f64
}

/// Resamples of [`quantile_change`]'s bootstrap.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// The relative change of a quantile of B against A, with a percentile-bootstrap CI.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct QuantileChange {
    /// Relative change of the quantile, q(b)/q(a) − 1.
    pub change: f64,
    /// Lower bound of the 95% bootstrap CI of the change.
    pub low: f64,
    /// Upper bound of the 95% bootstrap CI of the change.
    pub high: f64,
}

/// Quantile `q` of `b` over that of `a`, minus 1, with a 95% percentile-bootstrap CI
/// ([`BOOTSTRAP_RESAMPLES`] resamples of each sample from `rng`): for tails (p99 of hotplug
/// latencies), where no closed form holds. None under 2 samples or a non-positive base.
pub fn quantile_change(
    a: &[f64],
    b: &[f64],
    q: f64,
    rng: &mut impl rand::Rng,
) -> Option<QuantileChange> {
    let quantile = |xs: &[f64]| {
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        pmlab_kernel::units::percentile(&v, q).unwrap_or(f64::NAN)
    };
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (qa, qb) = (quantile(a), quantile(b));
    if qa <= 0.0 {
        return None;
    }
    let mut changes = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    let mut ra = vec![0.0; a.len()];
    let mut rb = vec![0.0; b.len()];
    for _ in 0..BOOTSTRAP_RESAMPLES {
        for x in ra.iter_mut() {
            *x = a[rng.random_range(0..a.len())];
        }
        for x in rb.iter_mut() {
            *x = b[rng.random_range(0..b.len())];
        }
        let base = quantile(&ra);
        if base > 0.0 {
            changes.push(quantile(&rb) / base - 1.0);
        }
    }
    changes.sort_by(f64::total_cmp);
    let at = |p: f64| pmlab_kernel::units::percentile(&changes, p).unwrap_or(f64::NAN);
    Some(QuantileChange {
        change: qb / qa - 1.0,
        low: at(0.025),
        high: at(0.975),
    })
}

/// The sample median of runs (middle two averaged), not pmlab's nearest-rank percentile of
/// latency distributions: the MAD rule's 0.6745 scale and the summaries' published median
/// assume the textbook estimator; on a handful of runs nearest-rank would bias it low.
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Adjusted Fisher–Pearson skewness G1 (scipy `skew(bias=False)`); 0 for n < 3 or no spread.
pub fn skewness(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    if xs.len() < 3 {
        return 0.0;
    }
    let m = mean(xs);
    let m2 = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n;
    let m3 = xs.iter().map(|x| (x - m).powi(3)).sum::<f64>() / n;
    if m2 <= f64::EPSILON * m * m || m2 == 0.0 {
        return 0.0;
    }
    let g1 = m3 / m2.powf(1.5);
    g1 * (n * (n - 1.0)).sqrt() / (n - 2.0)
}

/// Standard error of the adjusted skewness G1 for a normal sample of size n (n ≥ 3).
pub fn skewness_standard_error(n: usize) -> f64 {
    let n = n as f64;
    (6.0 * n * (n - 1.0) / ((n - 2.0) * (n + 1.0) * (n + 3.0))).sqrt()
}

/// True when the sample's skewness is significant (|G1| > 2·SES).
pub fn is_skewed(xs: &[f64]) -> bool {
    xs.len() >= 3 && skewness(xs).abs() > SKEW_STANDARD_ERRORS * skewness_standard_error(xs.len())
}

/// Indices of the samples flagged as outliers by the modified z-score (see module docs).
pub fn mad_outliers(xs: &[f64]) -> Vec<usize> {
    if xs.len() < 3 {
        return Vec::new();
    }
    let med = median(xs);
    let deviations: Vec<f64> = xs.iter().map(|x| (x - med).abs()).collect();
    let mad = median(&deviations);
    // Scale so that `scale` estimates σ for normal data.
    let scale = if mad > 0.0 {
        mad / 0.674_489_750_196_081_7
    } else {
        let mean_ad = mean(&deviations);
        if mean_ad == 0.0 {
            return Vec::new();
        }
        mean_ad / 0.797_884_560_802_865_4
    };
    deviations
        .iter()
        .enumerate()
        .filter(|(_, d)| *d / scale > OUTLIER_Z)
        .map(|(i, _)| i)
        .collect()
}

/// Summary of one sample.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample median (middle two averaged).
    pub median: f64,
    /// Sample standard deviation (n − 1); 0 for one value.
    pub stddev: f64,
    /// Coefficient of variation, stddev / mean.
    pub cv: f64,
    /// Half-width of the 95% CI of the mean (NaN for n < 2).
    pub ci_half_width: f64,
    /// Lower bound of the 95% CI of the mean (NaN for n < 2).
    pub ci_low: f64,
    /// Upper bound of the 95% CI of the mean (NaN for n < 2).
    pub ci_high: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Indices (into the sample, in run order) of MAD outliers; kept in every statistic.
    pub outliers: Vec<usize>,
    /// Adjusted skewness G1 (0 for n < 3 or no spread).
    pub skewness: f64,
}

impl Summary {
    /// Summarise a sample; `None` when it is empty.
    pub fn of(xs: &[f64]) -> Option<Summary> {
        if xs.is_empty() {
            return None;
        }
        let n = xs.len();
        let m = mean(xs);
        let sd = sample_variance(xs).sqrt();
        let hw = if n >= 2 {
            student_t_quantile(0.5 + CONFIDENCE / 2.0, (n - 1) as f64) * sd / (n as f64).sqrt()
        } else {
            f64::NAN
        };
        Some(Summary {
            n,
            mean: m,
            median: median(xs),
            stddev: sd,
            cv: if m != 0.0 { sd / m.abs() } else { f64::NAN },
            ci_half_width: hw,
            ci_low: m - hw,
            ci_high: m + hw,
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            outliers: mad_outliers(xs),
            skewness: skewness(xs),
        })
    }

    /// CI half-width relative to the mean (NaN when undefined).
    pub fn relative_half_width(&self) -> f64 {
        if self.mean == 0.0 {
            f64::NAN
        } else {
            self.ci_half_width / self.mean.abs()
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tests.

/// Welch's unequal-variance t-test of mean(b) − mean(a).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Welch {
    /// The t statistic.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Mean difference b − a and its 95% CI.
    pub diff: f64,
    /// Lower bound of the 95% CI of the difference.
    pub diff_low: f64,
    /// Upper bound of the 95% CI of the difference.
    pub diff_high: f64,
}

/// Welch's t-test; `None` if either sample has fewer than 2 values.
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (va, vb) = (
        sample_variance(a) / a.len() as f64,
        sample_variance(b) / b.len() as f64,
    );
    let diff = mean(b) - mean(a);
    let se2 = va + vb;
    if se2 == 0.0 {
        // Two constant samples: identical means are no change, different ones are certain.
        let p = if diff == 0.0 { 1.0 } else { 0.0 };
        return Some(Welch {
            t: if diff == 0.0 {
                0.0
            } else {
                diff.signum() * f64::INFINITY
            },
            df: f64::INFINITY,
            p,
            diff,
            diff_low: diff,
            diff_high: diff,
        });
    }
    let df = se2 * se2 / (va * va / (a.len() - 1) as f64 + vb * vb / (b.len() - 1) as f64);
    let se = se2.sqrt();
    let t = diff / se;
    let tq = student_t_quantile(0.5 + CONFIDENCE / 2.0, df);
    Some(Welch {
        t,
        df,
        p: student_t_two_sided_p(t, df),
        diff,
        diff_low: diff - tq * se,
        diff_high: diff + tq * se,
    })
}

/// Mann-Whitney U test (two-sided, normal approximation with tie and continuity corrections).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MannWhitney {
    /// U of the first sample (scipy's `statistic`).
    pub u: f64,
    /// The normal approximation's z (tie and continuity corrected).
    pub z: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// Mann-Whitney U of `a` against `b`; `None` if either sample is empty.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let count = (j - i + 1) as f64;
        let avg_rank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum_a += all[i..=j].iter().filter(|e| e.1).count() as f64 * avg_rank;
        tie_term += count * count * count - count;
        i = j + 1;
    }
    let u1 = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
    let nn = n1 + n2;
    let mu = n1 * n2 / 2.0;
    let var = n1 * n2 / 12.0 * ((nn + 1.0) - tie_term / (nn * (nn - 1.0)));
    if var <= 0.0 {
        return Some(MannWhitney {
            u: u1,
            z: 0.0,
            p: 1.0,
        });
    }
    let u = u1.max(n1 * n2 - u1);
    let z = (u - mu - 0.5) / var.sqrt();
    Some(MannWhitney {
        u: u1,
        z,
        p: (2.0 * normal_sf(z)).min(1.0),
    })
}

/// Relative change of mean(b) against mean(a), with its Fieller 95% CI (see module docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RelativeChange {
    /// mean(b)/mean(a) − 1.
    pub change: f64,
    /// Lower CI bound of the relative change; infinite when the CI is unbounded.
    pub low: f64,
    /// Upper CI bound of the relative change; infinite when unbounded.
    pub high: f64,
}

impl RelativeChange {
    /// True when the CI lies wholly on one side of 0: a significant change.
    pub fn excludes_zero(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

/// Fieller CI of mean(b)/mean(a) − 1 at `confidence`; `None` if a sample has < 2 values or mean(a) = 0.
pub fn relative_change(a: &[f64], b: &[f64], confidence: f64) -> Option<RelativeChange> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (ma, mb) = (mean(a), mean(b));
    if ma == 0.0 {
        return None;
    }
    let (sa2, sb2) = (
        sample_variance(a) / a.len() as f64,
        sample_variance(b) / b.len() as f64,
    );
    let ratio = mb / ma;
    if sa2 + sb2 == 0.0 {
        return Some(RelativeChange {
            change: ratio - 1.0,
            low: ratio - 1.0,
            high: ratio - 1.0,
        });
    }
    let df =
        (sa2 + sb2).powi(2) / (sa2 * sa2 / (a.len() - 1) as f64 + sb2 * sb2 / (b.len() - 1) as f64);
    let t = student_t_quantile(0.5 + confidence / 2.0, df);
    let g = t * t * sa2 / (ma * ma);
    if g >= 1.0 {
        return Some(RelativeChange {
            change: ratio - 1.0,
            low: f64::NEG_INFINITY,
            high: f64::INFINITY,
        });
    }
    let half = t / ma.abs() * (sb2 * (1.0 - g) + ratio * ratio * sa2).sqrt();
    let lo = (ratio - half) / (1.0 - g) - 1.0;
    let hi = (ratio + half) / (1.0 - g) - 1.0;
    Some(RelativeChange {
        change: ratio - 1.0,
        low: lo.min(hi),
        high: lo.max(hi),
    })
}

// ---------------------------------------------------------------------------------------------
// Comparison and verdict.

/// What a comparison concludes, with respect to the metric's direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Significantly better in the metric's direction.
    Better,
    /// Significantly worse in the metric's direction.
    Worse,
    /// Significant, on a metric without a better direction.
    Changed,
    /// No change the tests can tell from noise.
    NoSignificantChange,
    /// Too few samples to say anything.
    Undetermined,
    /// The runs are not one population (mixed regimes, or two modes): no verdict across them.
    Inconclusive,
}

/// A sample compared with the reference sample.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Relative change of the means with its Fieller CI; None: too few values or a zero reference mean.
    pub relative: Option<RelativeChange>,
    /// Welch's t-test; None: a side has fewer than 2 values.
    pub welch: Option<Welch>,
    /// Present when either sample is skewed; then it must agree for a significant verdict.
    pub mann_whitney: Option<MannWhitney>,
    /// Either sample is significantly skewed (then Mann-Whitney must agree).
    pub skewed: bool,
    /// The conclusion, with respect to the metric's direction.
    pub outcome: Outcome,
    /// The conclusion in words, for tables (e.g. "faster by 10.0% (CI ...)").
    pub verdict: String,
    /// Comparisons within each regime both sides ran in (`crate::populations`), when the runs
    /// were not one population.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by_regime: Vec<crate::populations::RegimeComparison>,
    /// What other tasks took of the workload's CPUs on each side, and how the verdict
    /// weighed it (`crate::disturbance`); None: the runs did not measure it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disturbance: Option<crate::disturbance::Judged>,
}

fn pct(x: f64) -> String {
    if x.is_infinite() {
        if x > 0.0 {
            "+inf".into()
        } else {
            "-inf".into()
        }
    } else {
        format!("{:.1}", 100.0 * x)
    }
}

fn signed_pct(x: f64) -> String {
    if x.is_infinite() {
        pct(x)
    } else {
        format!("{:+.1}", 100.0 * x)
    }
}

/// Words for a change in a metric, given its direction: `speed` metrics say faster/slower.
fn direction_words(direction: Direction, speed: bool) -> (&'static str, &'static str) {
    match (direction, speed) {
        (Direction::Neutral, _) => ("higher", "lower"),
        (_, true) => ("faster", "slower"),
        (_, false) => ("better", "worse"),
    }
}

/// Compare `sample` against `reference`. `speed` picks faster/slower wording (primary metrics).
pub fn compare(reference: &[f64], sample: &[f64], direction: Direction, speed: bool) -> Comparison {
    let relative = relative_change(reference, sample, CONFIDENCE);
    let welch = welch(reference, sample);
    let skewed = is_skewed(reference) || is_skewed(sample);
    let mann_whitney = if skewed {
        mann_whitney(reference, sample)
    } else {
        None
    };
    let Some(rel) = relative else {
        return Comparison {
            relative,
            welch,
            mann_whitney,
            skewed,
            outcome: Outcome::Undetermined,
            verdict: "undetermined (need at least 2 runs each)".into(),
            by_regime: Vec::new(),
            disturbance: None,
        };
    };
    let mwu_agrees = !matches!(mann_whitney, Some(m) if m.p >= ALPHA);
    let significant = rel.excludes_zero() && mwu_agrees;
    if !significant {
        let why = if rel.excludes_zero() {
            "Mann-Whitney disagrees on skewed data"
        } else {
            "CI straddles 0"
        };
        let verdict = format!(
            "no significant change ({why}: {}–{}%)",
            signed_pct(rel.low),
            signed_pct(rel.high)
        );
        return Comparison {
            relative,
            welch,
            mann_whitney,
            skewed,
            outcome: Outcome::NoSignificantChange,
            verdict,
            by_regime: Vec::new(),
            disturbance: None,
        };
    }
    let increased = rel.change > 0.0;
    let (up_word, down_word) = direction_words(direction, speed);
    // Magnitudes, ordered, in the direction of the change.
    let (a, b) = if increased {
        (rel.low, rel.high)
    } else {
        (-rel.high, -rel.low)
    };
    let outcome = match (direction, increased) {
        (Direction::Neutral, _) => Outcome::Changed,
        (Direction::Higher, true) | (Direction::Lower, false) => Outcome::Better,
        _ => Outcome::Worse,
    };
    let word = match (direction, outcome) {
        (Direction::Neutral, _) => {
            if increased {
                up_word
            } else {
                down_word
            }
        }
        (_, Outcome::Better) => up_word,
        _ => down_word,
    };
    let verdict = format!(
        "{word} by {}% (CI {}–{}%)",
        pct(rel.change.abs()),
        pct(a),
        pct(b)
    );
    Comparison {
        relative,
        welch,
        mann_whitney,
        skewed,
        outcome,
        verdict,
        by_regime: Vec::new(),
        disturbance: None,
    }
}

// ---------------------------------------------------------------------------------------------
// Sweep knee.

/// The knee of a sweep and how it was found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Knee {
    /// Index (in sweep order) of the knee configuration.
    pub index: usize,
    /// Index of the configuration with the best mean.
    pub best: usize,
    /// Noise margin used, as a fraction of the best mean.
    pub margin: f64,
}

/// Find the knee of a sweep: the first configuration (in the given order) whose metric is
/// within the noise margin of the best.
///
/// The best is the configuration with the best mean (by `direction`). The noise margin is the
/// larger of the best's own relative 95% CI half-width and `min_margin` (the experiment's
/// `--target-ci`). A configuration is within the margin when its Fieller 95% CI of the change
/// against the best does not show it worse than the best by more than the margin, i.e. the
/// CI bound nearest to "no change" lies within the margin. `None` for neutral metrics or when
/// no sample has 2 values.
pub fn knee(samples: &[Vec<f64>], direction: Direction, min_margin: f64) -> Option<Knee> {
    if direction == Direction::Neutral {
        return None;
    }
    let summaries: Vec<Option<Summary>> = samples
        .iter()
        .map(|s| Summary::of(s).filter(|s| s.n >= 2))
        .collect();
    let better = |x: f64, y: f64| {
        if direction == Direction::Lower {
            x < y
        } else {
            x > y
        }
    };
    let mut best: Option<usize> = None;
    for (i, s) in summaries.iter().enumerate() {
        if let Some(s) = s {
            let replace = match best {
                None => true,
                Some(b) => better(s.mean, summaries[b].as_ref().unwrap().mean),
            };
            if replace {
                best = Some(i);
            }
        }
    }
    let best = best?;
    let best_summary = summaries[best].as_ref().unwrap();
    let margin = best_summary.relative_half_width().max(min_margin);
    for (i, s) in summaries.iter().enumerate() {
        if s.is_none() {
            continue;
        }
        if i == best {
            return Some(Knee {
                index: i,
                best,
                margin,
            });
        }
        let Some(rel) = relative_change(&samples[best], &samples[i], CONFIDENCE) else {
            continue;
        };
        // How much worse than the best, at the CI bound most favourable to this configuration.
        let least_worse = if direction == Direction::Lower {
            rel.low
        } else {
            -rel.high
        };
        if least_worse <= margin {
            return Some(Knee {
                index: i,
                best,
                margin,
            });
        }
    }
    Some(Knee {
        index: best,
        best,
        margin,
    })
}

/// A number for people: about 4 significant digits, no exponent for usual magnitudes.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100_000.0 {
        format!("{v:.0}")
    } else if a >= 1000.0 {
        format!("{v:.1}")
    } else if a >= 100.0 {
        format!("{v:.2}")
    } else if a >= 10.0 {
        format!("{v:.3}")
    } else if a >= 0.001 {
        format!("{v:.4}")
    } else {
        format!("{v:.3e}")
    }
}

/// Percentile `q` (0 to 1) of unsorted values by pmlab's one definition, nearest rank
/// ([`pmlab_kernel::units::percentile`]); NaN when empty. For the lab's samples in ms and
/// the bootstrap's changes; durations in ns go through `pmlab_analysis::stats::DurationSummary`.
pub fn percentile(xs: &[f64], q: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    pmlab_kernel::units::percentile(&v, q).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_quantile_change_and_its_bootstrap_interval() {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let a: Vec<f64> = (1..=200).map(f64::from).collect();
        let doubled: Vec<f64> = a.iter().map(|x| 2.0 * x).collect();
        let c = super::quantile_change(&a, &doubled, 0.5, &mut rng).unwrap();
        assert!((c.change - 1.0).abs() < 1e-9, "{c:?}");
        assert!(c.low < 1.0 && c.high > 1.0 && c.low > 0.5, "{c:?}");
        let same = super::quantile_change(&a, &a, 0.99, &mut rng).unwrap();
        assert_eq!(same.change, 0.0);
        assert!(same.low <= 0.0 && same.high >= 0.0, "{same:?}");
        assert!(super::quantile_change(&a[..1], &a, 0.5, &mut rng).is_none());
    }

    use super::*;

    // Reference values from scipy 1.17.1 (numpy 2.4.6), computed once with fixed inputs:
    //   from scipy import stats; import numpy as np
    const A: [f64; 8] = [10.2, 9.8, 10.5, 10.1, 9.9, 10.3, 10.0, 10.4];
    const B: [f64; 7] = [10.9, 11.2, 10.7, 11.0, 11.5, 10.8, 11.1];
    const C: [f64; 9] = [1.0, 1.1, 1.05, 1.2, 3.5, 1.0, 1.15, 1.1, 5.0];
    const D: [f64; 9] = [1.3, 1.2, 1.25, 1.4, 1.2, 1.35, 6.0, 1.3, 1.28];

    fn close(actual: f64, expected: f64, rel: f64) {
        let err = ((actual - expected) / expected).abs();
        assert!(
            err < rel,
            "actual {actual} expected {expected} (relative error {err:e})"
        );
    }

    #[test]
    fn ln_gamma_known_values() {
        close(ln_gamma(0.5), 0.572_364_942_924_700_1, 1e-13);
        close(ln_gamma(10.0), 12.801_827_480_081_469, 1e-13);
        close(ln_gamma(0.1), 2.252_712_651_734_206, 1e-13);
    }

    #[test]
    fn t_quantiles_match_scipy() {
        // stats.t.ppf(0.975, df)
        let cases = [
            (1.0, 12.706204736174694),
            (2.0, 4.302652729749462),
            (3.0, 3.1824463052837078),
            (4.0, 2.7764451051977934),
            (5.0, 2.5705818356363146),
            (7.3, 2.345066736547703),
            (10.0, 2.228138851986274),
            (29.0, 2.045229642132703),
            (30.0, 2.0422724563012378),
            (100.0, 1.9839715185235518),
            (1000.0, 1.9623390808264083),
        ];
        for (df, q) in cases {
            close(student_t_quantile(0.975, df), q, 1e-10);
            close(student_t_quantile(0.025, df), -q, 1e-10);
        }
        // stats.t.ppf(0.9995, 3)
        close(student_t_quantile(0.9995, 3.0), 12.923978636687961, 1e-9);
    }

    #[test]
    fn t_and_normal_cdf_match_scipy() {
        close(student_t_cdf(1.5, 4.0), 0.896, 1e-12); // stats.t.cdf(1.5, 4)
        close(student_t_cdf(-2.2, 12.5), 0.023641591451071933, 1e-10); // stats.t.cdf(-2.2, 12.5)
        close(normal_cdf(1.96), 0.9750021048517795, 1e-13); // stats.norm.cdf(1.96)
        close(normal_sf(3.1), 0.0009676032132183563, 1e-10); // stats.norm.sf(3.1)
    }

    #[test]
    fn summary_matches_numpy() {
        let s = Summary::of(&A).unwrap();
        close(s.mean, 10.15, 1e-14);
        close(s.median, 10.15, 1e-14);
        close(s.stddev, 0.24494897427831772, 1e-13); // x.std(ddof=1)
        close(s.ci_half_width, 0.2047824672284116, 1e-10); // t.ppf(0.975, n-1) * sd / sqrt(n)
        let s = Summary::of(&B).unwrap();
        close(s.stddev, 0.2690370836538196, 1e-13);
        close(s.ci_half_width, 0.2488178029571211, 1e-10);
        assert_eq!((s.min, s.max, s.n), (10.7, 11.5, 7));
    }

    #[test]
    fn welch_matches_scipy() {
        // r = stats.ttest_ind(B, A, equal_var=False); r.confidence_interval(0.95)
        let w = welch(&A, &B).unwrap();
        close(w.t, 6.577759563637572, 1e-12);
        close(w.df, 12.30960806321104, 1e-12);
        close(w.p, 2.3166284326389525e-05, 1e-8);
        close(w.diff_low, 0.5883637378717632, 1e-10);
        close(w.diff_high, 1.1687791192710895, 1e-10);
        // stats.ttest_ind(D, C, equal_var=False)
        let w = welch(&C, &D).unwrap();
        close(w.t, 0.028078885256688557, 1e-10);
        close(w.df, 15.888445833382361, 1e-12);
        close(w.p, 0.977948899776521, 1e-10);
    }

    #[test]
    fn mann_whitney_matches_scipy() {
        // stats.mannwhitneyu(C, D, method='asymptotic', use_continuity=True, alternative='two-sided')
        let m = mann_whitney(&C, &D).unwrap();
        assert_eq!(m.u, 17.0);
        close(m.p, 0.041517408227424585, 1e-10);
        // stats.mannwhitneyu(A, B, method='asymptotic')
        let m = mann_whitney(&A, &B).unwrap();
        assert_eq!(m.u, 0.0);
        close(m.p, 0.0014600619162422478, 1e-10);
    }

    #[test]
    fn skewness_matches_scipy() {
        close(skewness(&C), 1.8920954771863323, 1e-12); // stats.skew(C, bias=False)
        assert!(skewness(&A).abs() < 1e-12);
        assert!(is_skewed(&C));
        assert!(
            !is_skewed(&[1.0, 1.1, 5.0]),
            "n = 3 cannot show significant skew"
        );
        close(
            skewness_standard_error(9),
            (432.0_f64 / 840.0).sqrt(),
            1e-12,
        );
    }

    #[test]
    fn fieller_matches_formula_evaluated_with_scipy() {
        // r = mb/ma; g = t²·sa²/ma²; half = t/ma·sqrt(sb²(1−g) + r²·sa²); CI = (r ± half)/(1−g) − 1,
        // t = stats.t.ppf(0.975, welch_df), sa² = var(A, ddof=1)/nA, sb² likewise.
        let r = relative_change(&A, &B, 0.95).unwrap();
        close(r.change, 0.08655876143560848, 1e-12);
        close(r.low, 0.05726736133963484, 1e-9);
        close(r.high, 0.11659726602307363, 1e-9);
    }

    #[test]
    fn fieller_ci_agrees_with_welch_test() {
        // Excludes 0 exactly when p < 0.05, on a family of shifted samples.
        for k in 0..200 {
            let shift = k as f64 * 0.002;
            let b: Vec<f64> = A.iter().map(|x| x + shift).collect();
            let r = relative_change(&A, &b, 0.95).unwrap();
            let w = welch(&A, &b).unwrap();
            assert_eq!(r.excludes_zero(), w.p < 0.05, "shift {shift}: {r:?} {w:?}");
        }
    }

    #[test]
    fn verdicts_respect_direction() {
        let b: Vec<f64> = A.iter().map(|x| x * 0.9).collect();
        let c = compare(&A, &b, Direction::Lower, true);
        assert_eq!(c.outcome, Outcome::Better);
        assert!(
            c.verdict.starts_with("faster by 10.0% (CI "),
            "{}",
            c.verdict
        );
        let c = compare(&A, &b, Direction::Higher, true);
        assert_eq!(c.outcome, Outcome::Worse);
        assert!(c.verdict.starts_with("slower by 10.0%"), "{}", c.verdict);
        let c = compare(&A, &b, Direction::Neutral, false);
        assert!(c.verdict.starts_with("lower by 10.0%"), "{}", c.verdict);
        let same: Vec<f64> = A.iter().rev().copied().collect();
        let c = compare(&A, &same, Direction::Lower, true);
        assert_eq!(c.outcome, Outcome::NoSignificantChange);
        assert!(
            c.verdict
                .starts_with("no significant change (CI straddles 0: -"),
            "{}",
            c.verdict
        );
        let c = compare(&A[..1], &same, Direction::Lower, true);
        assert_eq!(c.outcome, Outcome::Undetermined);
    }

    #[test]
    fn skewed_samples_need_mann_whitney_too() {
        let c = compare(&C, &D, Direction::Lower, true);
        assert!(c.skewed);
        assert!(c.mann_whitney.is_some());
        assert_eq!(c.outcome, Outcome::NoSignificantChange);
    }

    #[test]
    fn outliers_are_flagged() {
        assert_eq!(mad_outliers(&C), vec![4, 8]);
        assert!(mad_outliers(&A).is_empty());
        assert_eq!(mad_outliers(&[1.0, 1.0, 1.0, 1.0, 9.0]), vec![4]);
        let s = Summary::of(&C).unwrap();
        assert_eq!(s.n, 9, "outliers are kept");
    }

    #[test]
    fn knee_is_first_value_within_noise_of_best() {
        // Lower is better: 0 is slow, 10 better, 25..100 flat (within noise).
        let base = [1.0, -1.0, 0.5, -0.5, 0.0, 0.2];
        let mk = |m: f64| base.iter().map(|d| m + d * 0.5).collect::<Vec<f64>>();
        let samples = vec![mk(150.0), mk(120.0), mk(100.4), mk(100.0), mk(100.3)];
        let k = knee(&samples, Direction::Lower, 0.01).unwrap();
        assert_eq!(k.best, 3);
        assert_eq!(k.index, 2);
        // Higher is better, mirrored.
        let samples = vec![mk(50.0), mk(80.0), mk(99.8), mk(100.0)];
        let k = knee(&samples, Direction::Higher, 0.01).unwrap();
        assert_eq!((k.best, k.index), (3, 2));
        assert!(knee(&samples, Direction::Neutral, 0.01).is_none());
    }
}
