//! Where the tasks of a workload with more than one task run (an input of the experiment),
//! and the regime a run measured (an output of the run).
//!
//! A ping-pong left to the scheduler lands on one CPU (a context switch per hop) or on two
//! (a wakeup and an idle exit per hop) by the scheduler's choice, which follows what ran just
//! before. Power-management questions are about the second regime, so `pipe` pins its two
//! sides to two CPUs unless told otherwise; `same` pins both to one CPU; `any` leaves it to the
//! scheduler, as `perf bench` does, and the run then says which regime it measured.

use pmlab_kernel::Metric;
use serde::{Deserialize, Serialize};

/// How a workload's tasks are placed on CPUs.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// Each side on a CPU of its own (two CPUs, not SMT siblings where the machine allows).
    Spread,
    /// Every task on one CPU.
    Same,
    /// The scheduler's choice (no pinning), as `perf bench` runs.
    Any,
}

impl Placement {
    /// The word `--placement` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Spread => "spread",
            Placement::Same => "same",
            Placement::Any => "any",
        }
    }
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The metric a run's regime is read from: the share of round trips with both sides on one CPU.
pub const SAME_CPU_SHARE: &str = "same_cpu_share";

/// At or above this share a run measured one CPU.
const ONE_REGIME: f64 = 0.9;
/// At or below this share a run measured two CPUs.
const TWO_REGIME: f64 = 0.1;

/// Which regime a run measured.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Regime {
    /// Both sides on one CPU (≥ 90% of the round trips noted).
    OneCpu,
    /// The sides on two CPUs (≤ 10% of the round trips on one).
    TwoCpus,
    /// The run moved between the two during its course.
    Switching,
}

impl Regime {
    /// The regime of a run whose same-CPU share was `share`.
    pub fn of_share(share: f64) -> Regime {
        if share >= ONE_REGIME {
            Regime::OneCpu
        } else if share <= TWO_REGIME {
            Regime::TwoCpus
        } else {
            Regime::Switching
        }
    }

    /// The regime a run's metrics show, when its workload reports one.
    pub fn of_metrics<'a>(metrics: impl IntoIterator<Item = (&'a str, f64)>) -> Option<Regime> {
        metrics
            .into_iter()
            .find(|(name, _)| *name == SAME_CPU_SHARE)
            .map(|(_, v)| Regime::of_share(v))
    }

    /// The regime in a workload's result.
    pub fn of_result(metrics: &[Metric]) -> Option<Regime> {
        Regime::of_metrics(metrics.iter().map(|m| (m.name.as_str(), m.value)))
    }

    /// Words for tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Regime::OneCpu => "one CPU",
            Regime::TwoCpus => "two CPUs",
            Regime::Switching => "switching",
        }
    }

    /// The placement that measures this regime on purpose.
    pub fn placement(self) -> Option<Placement> {
        match self {
            Regime::OneCpu => Some(Placement::Same),
            Regime::TwoCpus => Some(Placement::Spread),
            Regime::Switching => None,
        }
    }
}

impl std::fmt::Display for Regime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Two CPUs for the two sides of a spread placement: the first allowed CPU and the next one
/// that is not its SMT sibling (or simply the next one where every CPU is a sibling).
pub(crate) fn spread_pair(allowed: &[u32], siblings: impl Fn(u32) -> Vec<u32>) -> Option<[u32; 2]> {
    let first = *allowed.first()?;
    let sib = siblings(first);
    let second = allowed[1..]
        .iter()
        .copied()
        .find(|c| !sib.contains(c))
        .or_else(|| allowed.get(1).copied())?;
    Some([first, second])
}

/// SMT siblings of `cpu` on this machine (empty when the kernel does not say).
pub(crate) fn thread_siblings(cpu: u32) -> Vec<u32> {
    std::fs::read_to_string(format!(
        "/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"
    ))
    .ok()
    .and_then(|t| pmlab_kernel::cpulist::parse_cpu_list(t.trim()).ok())
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_classify_into_regimes() {
        assert_eq!(Regime::of_share(1.0), Regime::OneCpu);
        assert_eq!(Regime::of_share(0.9), Regime::OneCpu);
        assert_eq!(Regime::of_share(0.5), Regime::Switching);
        assert_eq!(Regime::of_share(0.1), Regime::TwoCpus);
        assert_eq!(Regime::of_share(0.0), Regime::TwoCpus);
        assert_eq!(
            Regime::of_metrics([("us_per_op", 4.0), (SAME_CPU_SHARE, 0.97)]),
            Some(Regime::OneCpu)
        );
        assert_eq!(Regime::of_metrics([("total_s", 1.0)]), None);
    }

    #[test]
    fn spread_avoids_smt_siblings() {
        // 0 and 2 share a core, as do 1 and 3 (a common numbering).
        let sib = |c: u32| {
            if c.is_multiple_of(2) {
                vec![0, 2]
            } else {
                vec![1, 3]
            }
        };
        assert_eq!(spread_pair(&[0, 1, 2, 3], sib), Some([0, 1]));
        // 0 and 1 share a core.
        let sib = |c: u32| vec![c & !1, c | 1];
        assert_eq!(spread_pair(&[0, 1, 2, 3], sib), Some([0, 2]));
        // Only siblings allowed: still two CPUs.
        assert_eq!(spread_pair(&[0, 1], sib), Some([0, 1]));
        assert_eq!(spread_pair(&[3], sib), None);
    }
}
