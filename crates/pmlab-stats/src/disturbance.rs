//! Disturbed runs in verdicts: what other tasks (and the host) took of the workload's CPUs
//! during each side's runs, and the rule that turns a verdict into "inconclusive: machine
//! busy" when that alone could explain the effect.
//!
//! The rule (documented choice, docs/disturbance.md):
//! - a side's disturbance D is the mean, over its runs, of the share of the workload's
//!   busiest-by-others CPU that others took (`disturbance.workload_pct@cpuN`);
//! - a side is **disturbed** when D ≥ [`DISTURBED`];
//! - a workload that got only 1 − D of its CPU can be slowed by up to D / (1 − D), and a
//!   change of placement under load can speed it as much, so the disturbance alone can
//!   explain a relative change of up to E = D / (1 − D) (D of the more disturbed side);
//! - a significant change whose CI bound nearest zero is within E is **inconclusive:
//!   machine busy**; a larger one stands, with a note beside it naming the disturbance;
//! - sides whose D differ by [`DISTURBED`] or more get a note that they were disturbed
//!   differently, whatever the verdict.

use crate::populations::Run;
use crate::stats::{Comparison, Outcome};
use serde::Serialize;

/// A side whose runs lost this share (or more) of a workload CPU to others is disturbed.
pub const DISTURBED: f64 = 0.03;

/// The side metric a run's disturbance is read from: per workload CPU, the share (%) of its
/// time that other tasks and the host took (written by pmlab-lab's disturbance source).
pub const WORKLOAD_PCT: &str = "disturbance.workload_pct";

/// What others took of one run's workload CPUs: its busiest-by-others CPU.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RunDisturbance {
    /// The CPU (one of the workload's).
    pub cpu: u32,
    /// The share of that CPU's time others took during the run (0–1; a value a little below
    /// zero is the tick resolution of the kernel's accounting, kept so means stay unbiased).
    pub share: f64,
}

impl RunDisturbance {
    /// From a run's metrics as (name, cpu, value): the workload CPU with the largest
    /// [`WORKLOAD_PCT`]; None when the run has none.
    pub fn of_metrics<'a>(
        metrics: impl IntoIterator<Item = (&'a str, Option<u32>, f64)>,
    ) -> Option<RunDisturbance> {
        metrics
            .into_iter()
            .filter(|(n, _, v)| *n == WORKLOAD_PCT && v.is_finite())
            .filter_map(|(_, cpu, v)| {
                Some(RunDisturbance {
                    cpu: cpu?,
                    share: v / 100.0,
                })
            })
            .max_by(|a, b| a.share.total_cmp(&b.share))
    }
}

/// One side's disturbance over its runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SideDisturbance {
    /// Mean share over the side's runs that report one (0–1).
    pub mean: f64,
    /// The CPU most taken from: that of the run with the largest share.
    pub cpu: u32,
    /// Runs that reported a disturbance.
    pub runs: usize,
}

impl SideDisturbance {
    /// The disturbance of a side's runs; None when none reported one.
    pub fn of(runs: &[Run]) -> Option<SideDisturbance> {
        let ds: Vec<RunDisturbance> = runs.iter().filter_map(|r| r.disturbance).collect();
        let worst = ds.iter().max_by(|a, b| a.share.total_cmp(&b.share))?;
        Some(SideDisturbance {
            mean: ds.iter().map(|d| d.share).sum::<f64>() / ds.len() as f64,
            cpu: worst.cpu,
            runs: ds.len(),
        })
    }

    /// The largest relative change this disturbance alone can cause: D / (1 − D).
    pub fn explains_up_to(&self) -> f64 {
        let d = self.mean.clamp(0.0, 0.99);
        d / (1.0 - d)
    }

    fn words(&self) -> String {
        format!(
            "other tasks used {:.0}% of CPU {}",
            100.0 * self.mean.max(0.0),
            self.cpu
        )
    }
}

/// The disturbance of both sides of a comparison, as judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judged {
    /// The reference's runs.
    pub reference: Option<SideDisturbance>,
    /// The compared configuration's runs.
    pub sample: Option<SideDisturbance>,
    /// The largest change the disturbance alone can explain (relative).
    pub explains_up_to: f64,
    /// The verdict was made inconclusive by it.
    pub inconclusive: bool,
    /// The sides were disturbed differently (their means differ by [`DISTURBED`] or more).
    pub differ: bool,
}

/// Whether the disturbance of either side alone could explain a change whose CI is
/// `low..high` (relative): the more disturbed side is disturbed and the CI's bound nearest
/// zero is within what that disturbance can cause. The protocol's early "decided" stop and
/// [`judge`] share it.
pub fn could_explain(reference: &[Run], sample: &[Run], low: f64, high: f64) -> bool {
    let worst = [SideDisturbance::of(reference), SideDisturbance::of(sample)]
        .into_iter()
        .flatten()
        .max_by(|a, b| a.mean.total_cmp(&b.mean));
    let nearest_zero = if low <= 0.0 && high >= 0.0 {
        0.0
    } else {
        low.abs().min(high.abs())
    };
    worst.is_some_and(|w| w.mean >= DISTURBED && nearest_zero <= w.explains_up_to())
}

/// The smallest and largest disturbance of these runs (0, 0 without any).
fn spread<'a>(runs: impl Iterator<Item = &'a Run>) -> (f64, f64) {
    runs.filter_map(|r| r.disturbance)
        .map(|d| d.share)
        .fold(None, |acc: Option<(f64, f64)>, x| match acc {
            None => Some((x, x)),
            Some((a, b)) => Some((a.min(x), b.max(x))),
        })
        .unwrap_or((0.0, 0.0))
}

/// Apply the rule to a comparison of `sample` against `reference`; `names` are the two sides'
/// names in words (configuration labels). Runs without disturbance leave it as it is.
pub fn judge(c: &mut Comparison, reference: &[Run], sample: &[Run], names: (&str, &str)) {
    let (r, s) = (SideDisturbance::of(reference), SideDisturbance::of(sample));
    let busiest = match (r, s) {
        (None, None) => return,
        (Some(a), Some(b)) if b.mean > a.mean => (b, names.1),
        (Some(a), _) => (a, names.0),
        (None, Some(b)) => (b, names.1),
    };
    let (worst, worst_name) = busiest;
    let explains = worst.explains_up_to();
    let disturbed = worst.mean >= DISTURBED;
    let differ = matches!((r, s), (Some(a), Some(b)) if (a.mean - b.mean).abs() >= DISTURBED);
    let significant = matches!(
        c.outcome,
        Outcome::Better | Outcome::Worse | Outcome::Changed
    );
    // A bimodal or mixed-regime sample is already inconclusive; when the disturbance can
    // explain its whole change, the disturbance is the cause to name.
    let explained = (significant || c.outcome == Outcome::Inconclusive)
        && c.relative
            .is_some_and(|rel| could_explain(reference, sample, rel.low, rel.high));
    // "No change" under a load that came and went (a hog started halfway): the runs mix
    // conditions, and an effect as large as the load's could be hidden in them.
    let (lo, hi) = spread(reference.iter().chain(sample));
    let varied = hi - lo >= DISTURBED;
    let hidden = c.outcome == Outcome::NoSignificantChange && disturbed && varied;
    let inconclusive = explained || hidden;
    let during = |d: &SideDisturbance, name: &str| format!("{} during {name}'s runs", d.words());
    if hidden {
        c.verdict = format!(
            "inconclusive: machine busy ({}, from {:.0}% to {:.0}% of a workload CPU from run \
             to run; alone that can change the result by up to {:.0}%, so {} does not show \
             there is none)",
            during(&worst, worst_name),
            100.0 * lo.max(0.0),
            100.0 * hi,
            100.0 * explains,
            c.verdict
        );
        c.outcome = Outcome::Inconclusive;
    } else if explained {
        c.verdict = format!(
            "inconclusive: machine busy ({}; alone that can change the result by up to {:.0}%, \
             more than the {})",
            during(&worst, worst_name),
            100.0 * explains,
            c.verdict
        );
        c.outcome = Outcome::Inconclusive;
    } else if differ {
        let (a, b) = (r.expect("differ"), s.expect("differ"));
        c.verdict = format!(
            "{}; note: sides disturbed differently: {}, {:.0}% of CPU {} during {}'s",
            c.verdict,
            during(&a, names.0),
            100.0 * b.mean.max(0.0),
            b.cpu,
            names.1
        );
    } else if disturbed {
        c.verdict = format!(
            "{}; note: machine busy: {} (alone that can change the result by up to {:.0}%)",
            c.verdict,
            during(&worst, worst_name),
            100.0 * explains
        );
    }
    c.disturbance = Some(Judged {
        reference: r,
        sample: s,
        explains_up_to: explains,
        inconclusive,
        differ,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmlab_kernel::Direction;

    fn runs(values: &[f64], share: Option<f64>) -> Vec<Run> {
        values
            .iter()
            .map(|&value| Run {
                value,
                regime: None,
                disturbance: share.map(|share| RunDisturbance { cpu: 1, share }),
            })
            .collect()
    }

    fn compared(a: &[Run], b: &[Run]) -> Comparison {
        crate::populations::compare_named(a, b, Direction::Lower, true, ("A", "B"))
    }

    const A: &[f64] = &[100.0, 101.0, 99.0, 100.5, 99.5, 100.2];
    const B10: &[f64] = &[110.0, 111.0, 109.0, 110.5, 109.5, 110.2];

    #[test]
    fn a_change_the_disturbance_could_cause_is_inconclusive_machine_busy() {
        // B is 10% slower, and others took 23% of CPU 1 during B's runs: up to 30%.
        let c = compared(&runs(A, Some(0.0)), &runs(B10, Some(0.23)));
        assert_eq!(c.outcome, Outcome::Inconclusive, "{}", c.verdict);
        assert!(
            c.verdict.starts_with(
                "inconclusive: machine busy (other tasks used 23% of CPU 1 during B's runs"
            ),
            "{}",
            c.verdict
        );
        let j = c.disturbance.unwrap();
        assert!(j.inconclusive && j.differ);
        assert!((j.explains_up_to - 0.23 / 0.77).abs() < 1e-9);
    }

    #[test]
    fn a_larger_change_stands_with_a_note_beside_it() {
        // 88% faster, 5% disturbed on both sides: explains at most 5.3%.
        let fast: Vec<f64> = A.iter().map(|v| v * 0.12).collect();
        let c = compared(&runs(A, Some(0.05)), &runs(&fast, Some(0.05)));
        assert_eq!(c.outcome, Outcome::Better, "{}", c.verdict);
        assert!(c.verdict.starts_with("faster by 88.0%"), "{}", c.verdict);
        assert!(
            c.verdict
                .contains("note: machine busy: other tasks used 5% of CPU 1 during A's runs"),
            "{}",
            c.verdict
        );
    }

    #[test]
    fn sides_disturbed_differently_get_a_note_whatever_the_verdict() {
        let fast: Vec<f64> = A.iter().map(|v| v * 0.5).collect();
        let c = compared(&runs(A, Some(0.01)), &runs(&fast, Some(0.08)));
        assert_eq!(c.outcome, Outcome::Better);
        assert!(
            c.verdict.contains(
                "note: sides disturbed differently: other tasks used 1% of CPU 1 during A's runs, 8% of CPU 1 during B's"
            ),
            "{}",
            c.verdict
        );
    }

    #[test]
    fn a_runs_disturbance_is_its_busiest_workload_cpu() {
        let d = RunDisturbance::of_metrics([
            (WORKLOAD_PCT, Some(0), 2.0),
            (WORKLOAD_PCT, Some(1), 23.0),
            ("disturbance.share_pct", Some(1), 50.0),
            (WORKLOAD_PCT, None, 90.0),
        ])
        .unwrap();
        assert_eq!(
            d,
            RunDisturbance {
                cpu: 1,
                share: 0.23
            }
        );
        assert!(RunDisturbance::of_metrics([("us_per_op", None, 5.0)]).is_none());
        assert!(could_explain(
            &runs(A, Some(0.1)),
            &runs(A, None),
            0.02,
            0.08
        ));
        assert!(!could_explain(
            &runs(A, Some(0.1)),
            &runs(A, None),
            0.2,
            0.3
        ));
        assert!(!could_explain(
            &runs(A, Some(0.01)),
            &runs(A, None),
            0.0,
            0.005
        ));
    }

    #[test]
    fn a_bimodal_side_whose_second_mode_is_the_disturbance_names_it() {
        // Half of B's runs under a hog: 43% slower, 30% of CPU 1 taken in those runs.
        let mut b = runs(A, Some(0.0));
        b.extend(runs(
            &A.iter().map(|v| v / 0.7).collect::<Vec<_>>(),
            Some(0.3),
        ));
        let c = compared(&runs(A, Some(0.0)), &b);
        assert_eq!(c.outcome, Outcome::Inconclusive);
        assert!(
            c.verdict
                .starts_with("inconclusive: machine busy (other tasks used 15% of CPU 1"),
            "{}",
            c.verdict
        );
    }

    #[test]
    fn quiet_or_unmeasured_runs_leave_the_verdict_alone() {
        let quiet = compared(&runs(A, Some(0.004)), &runs(B10, Some(-0.003)));
        let plain = compared(&runs(A, None), &runs(B10, None));
        assert_eq!(quiet.verdict, plain.verdict);
        assert_eq!(quiet.outcome, Outcome::Worse);
        assert!(plain.disturbance.is_none());
        assert!(!quiet.disturbance.unwrap().inconclusive);
    }

    #[test]
    fn no_change_under_a_load_that_started_halfway_is_inconclusive() {
        // A/A, a hog from the sixth round on: half of each side's runs lost 6% of CPU 1 and
        // are 4% slower, inside the runs' own noise (one population, not two modes).
        let noisy = [
            100.0, 104.0, 97.0, 102.0, 99.0, 103.0, 98.0, 101.0, 96.0, 105.0,
        ];
        let half = |shift: usize| -> Vec<Run> {
            (0..noisy.len())
                .map(|i| {
                    let value = noisy[(i + shift) % noisy.len()];
                    let busy = i >= 5;
                    Run {
                        value: if busy { value * 1.04 } else { value },
                        regime: None,
                        disturbance: Some(RunDisturbance {
                            cpu: 1,
                            share: if busy { 0.06 } else { 0.0 },
                        }),
                    }
                })
                .collect()
        };
        let c = compared(&half(0), &half(3));
        assert_eq!(c.outcome, Outcome::Inconclusive, "{}", c.verdict);
        assert!(
            c.verdict
                .starts_with("inconclusive: machine busy (other tasks used 3% of CPU 1"),
            "{}",
            c.verdict
        );
        assert!(c.verdict.contains("from 0% to 6%"), "{}", c.verdict);
        assert!(c.verdict.contains("no significant change"), "{}", c.verdict);
        assert!(c.disturbance.unwrap().inconclusive);
    }

    #[test]
    fn no_significant_change_under_load_says_the_machine_was_busy() {
        let c = compared(&runs(A, Some(0.2)), &runs(A, Some(0.2)));
        assert_eq!(c.outcome, Outcome::NoSignificantChange);
        assert!(c.verdict.contains("note: machine busy"), "{}", c.verdict);
    }
}
