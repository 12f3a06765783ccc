//! Statistics derived at read time from a stored experiment: per workload, per configuration,
//! the primary metric's summary and verdict against its baseline, side metrics beside it, and
//! the knee of a sweep. Renderers (`render`) turn a [`Report`] into text.

use crate::populations::{self, Population, Run};
use crate::spec::Kind;
pub use crate::stats::fmt_num;
use crate::stats::{self, Comparison, Summary};
use crate::store::{format_time, MetricInfo, RunStatus, StoredExperiment};
use crate::system::SystemSnapshot;
use pmlab_kernel::Direction;
use pmlab_kernel::MetricKey;
use serde::Serialize;

/// Side metrics shown beside the primary metric by default, when the runs have them
/// (counter names from `pmlab_kernel::counters`, `disturbance.*` from pmlab-lab's
/// disturbance source; `fake.*` from the fake executor).
pub const DEFAULT_SIDE_METRICS: &[&str] = &[
    "idle.POLL.time_ms",
    "irq.CAL.per_s",
    "irq.RES.per_s",
    "idle.exits_per_s",
    "idle.share_pct",
    "ctxt.per_s",
    "power.W",
    "energy.J",
    "disturbance.share_pct",
    "fake.idle_residency",
    "fake.ipis",
];

/// At most this many side metrics are shown as columns beside the primary metric; all the
/// selected ones also go to a second table (one row per metric) when there are more.
pub const INLINE_SIDE_METRICS: usize = 4;

/// Which side metrics a report shows.
#[derive(Debug, Clone, Default)]
pub enum SideSelection {
    /// [`DEFAULT_SIDE_METRICS`] that are present.
    #[default]
    Default,
    /// Every total (not per-CPU) side metric.
    AllTotals,
    /// Every side metric, per-CPU ones included.
    All,
    /// Names or prefixes ending in `*`.
    Names(Vec<String>),
}

impl SideSelection {
    /// The selection `--side` names: `default`, `totals`, `all`, `none`, or a comma-separated
    /// list of names (a trailing `*` matches a prefix).
    pub fn parse(s: &str) -> SideSelection {
        match s {
            "default" => SideSelection::Default,
            "all" => SideSelection::All,
            "totals" => SideSelection::AllTotals,
            "none" | "" => SideSelection::Names(Vec::new()),
            list => SideSelection::Names(list.split(',').map(|x| x.trim().to_string()).collect()),
        }
    }

    fn pick(&self, keys: &[MetricInfo]) -> Vec<MetricInfo> {
        let side = keys.iter().filter(|k| k.side);
        match self {
            SideSelection::Default => DEFAULT_SIDE_METRICS
                .iter()
                .filter_map(|n| keys.iter().find(|k| k.side && k.label() == *n).cloned())
                .collect(),
            SideSelection::AllTotals => side.filter(|k| k.cpu.is_none()).cloned().collect(),
            SideSelection::All => side.cloned().collect(),
            SideSelection::Names(names) => {
                let mut out: Vec<MetricInfo> = Vec::new();
                for n in names {
                    for k in keys.iter().filter(|k| k.side) {
                        let hit = match n.strip_suffix('*') {
                            Some(prefix) => k.label().starts_with(prefix),
                            None => k.label() == *n,
                        };
                        if hit && !out.iter().any(|o| o.key() == k.key()) {
                            out.push(k.clone());
                        }
                    }
                }
                out
            }
        }
    }
}

/// A side metric of one row.
#[derive(Debug, Clone, Serialize)]
pub struct SideCell {
    /// The metric's name.
    pub name: String,
    /// The CPU of a per-CPU metric.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// Its unit.
    pub unit: String,
    /// Its summary over the row's runs (None without values).
    pub summary: Option<Summary>,
    /// Its change against the row this one is compared with.
    pub comparison: Option<Comparison>,
}

impl SideCell {
    /// Its metric's name as tables and CSV write it (`NAME` or `NAME@cpuN`).
    pub fn label(&self) -> String {
        MetricKey {
            name: self.name.clone(),
            cpu: self.cpu,
        }
        .to_string()
    }
}

/// One configuration of one workload.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The configuration's label.
    pub label: String,
    /// The knobs, or `as found`.
    pub knobs: String,
    /// Measured runs (ok + failed) and failures.
    pub runs: usize,
    /// Measured runs that failed.
    pub failed: usize,
    /// Why they failed: each distinct first line of their errors, with its count.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<(String, usize)>,
    /// The primary metric over the runs that succeeded.
    pub primary: Option<Summary>,
    /// The label of the row this one is compared with (None for the reference itself).
    pub versus: Option<String>,
    /// The primary metric's change against `versus`.
    pub comparison: Option<Comparison>,
    /// The side metrics selected for the report.
    pub side: Vec<SideCell>,
    /// Raw primary values in run order (for JSON consumers).
    pub values: Vec<f64>,
    /// The runs by the regime each measured, and whether the gap rule found two modes.
    pub population: Population,
}

/// The knee of a sweep, by label.
#[derive(Debug, Clone, Serialize)]
pub struct KneeReport {
    /// The knee configuration's label.
    pub label: String,
    /// The configuration with the best mean.
    pub best: String,
    /// Noise margin, as a fraction of the best mean.
    pub margin: f64,
}

/// One workload's table.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadReport {
    /// The workload's label.
    pub label: String,
    /// Its primary metric.
    pub primary: Option<MetricInfo>,
    /// One row per configuration.
    pub rows: Vec<Row>,
    /// The side metrics the rows carry, in column order.
    pub side_metrics: Vec<MetricInfo>,
    /// The knee of a sweep.
    pub knee: Option<KneeReport>,
}

/// Header facts of a report.
#[derive(Debug, Clone, Serialize)]
pub struct Header {
    /// e.g. `experiment 12 (sweep)` or `experiments 3 vs 7`.
    pub title: String,
    /// The experiments shown.
    pub ids: Vec<i64>,
    /// The kind of experiment (`compare`, `sweep`, ...).
    pub kind: String,
    /// The experiment's name.
    pub name: String,
    /// How it ended (`complete`, `stopped`, ...).
    pub status: String,
    /// Why it stopped (empty when the budget or the CI target ended it as planned).
    pub stop_reason: String,
    /// The seed of the per-round shuffles.
    pub seed: u64,
    /// Start time (UTC).
    pub started: String,
    /// Rounds run.
    pub rounds: usize,
    /// Measured runs.
    pub runs: usize,
    /// Measured runs that failed.
    pub failed_runs: usize,
    /// The 95% CI target, as a fraction of the mean.
    pub target_ci: f64,
    /// The command line that ran it.
    pub command: String,
}

/// Everything the renderers need.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// What ran, how it stopped.
    pub header: Header,
    /// The systems it ran on (one per distinct boot).
    pub systems: Vec<SystemSnapshot>,
    /// One table per workload.
    pub workloads: Vec<WorkloadReport>,
    /// Lines worth saying under the tables (failed runs, outliers, skew, boots differ).
    pub notes: Vec<String>,
}

fn summarise(xs: &[f64]) -> Option<Summary> {
    Summary::of(xs)
}

fn header_of(e: &StoredExperiment) -> Header {
    let rounds = e
        .runs
        .iter()
        .filter(|r| !r.warmup)
        .map(|r| r.round)
        .max()
        .unwrap_or(0);
    Header {
        title: format!("experiment {} ({})", e.info.id, e.info.kind),
        ids: vec![e.info.id],
        kind: e.info.kind.as_str().to_string(),
        name: e.info.name.clone(),
        status: e.info.status.as_str().to_string(),
        stop_reason: e.info.stop_reason.clone().unwrap_or_default(),
        seed: e.info.seed,
        started: format_time(e.info.created_ns),
        rounds,
        runs: e.info.runs,
        failed_runs: e.info.failed_runs,
        target_ci: e.info.target_ci,
        command: e.info.command.clone(),
    }
}

/// A row's values for one workload and configuration of an experiment.
struct Source<'a> {
    experiment: &'a StoredExperiment,
    workload: usize,
    configuration: usize,
    label: String,
}

impl Source<'_> {
    fn samples(&self, metric: MetricKey) -> Vec<f64> {
        self.experiment
            .samples(self.workload, self.configuration, metric)
    }

    fn runs(&self, metric: MetricKey) -> Vec<Run> {
        self.experiment
            .runs_of(self.workload, self.configuration, metric)
    }
}

fn build_rows(
    sources: &[Source],
    baselines: &[Option<usize>],
    primary: Option<&MetricInfo>,
    side: &[MetricInfo],
) -> Vec<Row> {
    sources
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let runs = primary.map(|p| s.runs(p.key())).unwrap_or_default();
            let values: Vec<f64> = runs.iter().map(|r| r.value).collect();
            let baseline = baselines[i].map(|b| &sources[b]);
            let comparison = match (primary, baseline) {
                (Some(p), Some(b)) => Some(populations::compare_named(
                    &b.runs(p.key()),
                    &runs,
                    p.direction,
                    true,
                    (&b.label, &s.label),
                )),
                _ => None,
            };
            let measured: Vec<_> = s
                .experiment
                .runs
                .iter()
                .filter(|r| {
                    r.workload == s.workload && r.configuration == s.configuration && !r.warmup
                })
                .collect();
            let side = side
                .iter()
                .map(|k| {
                    let xs = s.samples(k.key());
                    SideCell {
                        name: k.name.clone(),
                        cpu: k.cpu,
                        unit: k.unit.clone(),
                        summary: summarise(&xs),
                        comparison: baseline
                            .map(|b| stats::compare(&b.samples(k.key()), &xs, k.direction, false)),
                    }
                })
                .collect();
            let conf = &s.experiment.configurations[s.configuration];
            Row {
                label: s.label.clone(),
                knobs: if conf.knobs.is_empty() {
                    "as found".into()
                } else {
                    scoped_knobs(&conf.knobs)
                },
                runs: measured.len(),
                failed: measured
                    .iter()
                    .filter(|r| r.status != RunStatus::Ok)
                    .count(),
                errors: measured
                    .iter()
                    .filter(|r| r.status != RunStatus::Ok)
                    .filter_map(|r| r.error.as_deref())
                    .fold(Vec::<(String, usize)>::new(), |mut v, e| {
                        let e = e.lines().next().unwrap_or(e).to_string();
                        match v.iter_mut().find(|(x, _)| *x == e) {
                            Some(x) => x.1 += 1,
                            None => v.push((e, 1)),
                        }
                        v
                    }),
                primary: summarise(&values),
                versus: baseline.map(|b| b.label.clone()),
                comparison,
                side,
                values,
                population: Population::of(&runs),
            }
        })
        .collect()
}

/// A configuration's knobs as the tables show them: each with its scope (`@all` where it
/// was typed without one and applies to every CPU, policy or die).
pub fn scoped_knobs(knobs: &[String]) -> String {
    knobs
        .iter()
        .map(|k| pmlab_kernel::knob::resolve::with_scope(k))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Knob families that act on cpuidle (and do nothing without a cpuidle driver).
const CPUIDLE_KNOBS: &[&str] = &["haltpoll.", "cpuidle."];

/// What a boot experiment's guests were: how they ran (TCG times are the emulator's) and
/// what each configuration booted.
fn guest_notes(e: &StoredExperiment) -> Vec<String> {
    let Some(g) = e.guests.first() else {
        return Vec::new();
    };
    let mut notes = vec![match g.accel {
        pmlab_store::spec::Accel::Tcg => format!(
            "TCG: emulated CPUs; times are the emulator's ({}, {} with {}, -cpu {}, -machine {}). Why not KVM: {}",
            g.qemu,
            g.accel,
            if g.accel_options.is_empty() { "no options" } else { &g.accel_options },
            g.cpu_model,
            g.machine,
            g.accel_reason
        ),
        pmlab_store::spec::Accel::Kvm => format!(
            "KVM: {} ({}), -cpu {}, -machine {}; the host's KVM: {}",
            g.qemu,
            g.accel_reason,
            g.cpu_model,
            g.machine,
            if g.host_kvm.is_empty() {
                "parameters not readable".to_string()
            } else {
                g.host_kvm.join(" ")
            }
        ),
    }];
    if g.kvm_exits {
        notes.push(
            "VM exits: the host's kvm:kvm_exit/kvm_entry events were recorded per boot for \
             QEMU's threads (kvm.* side metrics; the host trace beside each guest trace)"
                .to_string(),
        );
    }
    for (c, g) in e.configurations.iter().zip(&e.guests) {
        notes.push(format!(
            "{}: {} {} (kernel {}), command line `{}`, {} MiB",
            c.label,
            g.arch,
            g.kernel.display(),
            g.kernel_release.as_deref().unwrap_or("of unknown release"),
            g.cmdline,
            g.memory_mib
        ));
    }
    notes
}

/// Say so when the experiment turns cpuidle knobs on a machine without a cpuidle driver.
fn capability_note(e: &StoredExperiment) -> Option<String> {
    let sys = e.system.as_ref()?;
    if sys.cpuidle_driver != "none" {
        return None;
    }
    let touched: Vec<&str> = e
        .configurations
        .iter()
        .flat_map(|c| c.knobs.iter())
        .filter_map(|k| k.split('=').next())
        .filter(|n| CPUIDLE_KNOBS.iter().any(|p| n.starts_with(p)))
        .fold(Vec::new(), |mut v, n| {
            if !v.contains(&n) {
                v.push(n);
            }
            v
        });
    (!touched.is_empty()).then(|| {
        format!(
            "no cpuidle driver on this machine (cpuidle/current_driver = none): idle is the arch \
             default (HLT), there is no POLL state (no POLL time), and {} had no effect on idle",
            touched.join(", ")
        )
    })
}

fn notes_for(rows: &[Row], workload: &str, multi: bool) -> Vec<String> {
    let mut notes = Vec::new();
    let prefix = if multi {
        format!("{workload}: ")
    } else {
        String::new()
    };
    for r in rows {
        if r.failed > 0 {
            notes.push(format!(
                "{prefix}{}: {} of {} runs failed (kept out of the statistics)",
                r.label, r.failed, r.runs
            ));
            for (error, n) in &r.errors {
                notes.push(format!("{prefix}{}: {n}× {error}", r.label));
            }
        }
        if let Some(s) = &r.primary {
            if !s.outliers.is_empty() {
                notes.push(format!(
                    "{prefix}{}: {} outlier(s) by MAD, kept",
                    r.label,
                    s.outliers.len()
                ));
            }
        }
        if r.population.regimes.len() > 1 {
            let unit = |g: &populations::RegimeGroup| fmt_num(g.summary.mean);
            notes.push(format!(
                "{prefix}{}: runs in {} regimes: {} (no verdict across regimes)",
                r.label,
                r.population.regimes.len(),
                r.population
                    .regimes
                    .iter()
                    .map(|g| format!(
                        "{} {} (mean {})",
                        g.regime.map(|x| x.as_str()).unwrap_or("no regime"),
                        g.summary.n,
                        unit(g)
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some((_, m)) = &r.population.bimodal {
            notes.push(format!(
                "{prefix}{}: bimodal runs by the gap rule ({} around {}, {} around {}): \
                 something the experiment did not control split them",
                r.label,
                m.lower_n,
                fmt_num(m.lower_median),
                m.upper_n,
                fmt_num(m.upper_median)
            ));
        }
        if let Some(c) = &r.comparison {
            if let Some(m) = &c.mann_whitney {
                notes.push(format!(
                    "{prefix}{}: skewed sample, Mann-Whitney U p = {:.3}",
                    r.label, m.p
                ));
            }
        }
    }
    notes
}

fn unit_of(primary: &Option<MetricInfo>) -> String {
    primary.as_ref().map(|p| p.unit.clone()).unwrap_or_default()
}

/// Why a report cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// `--reference` names no configuration of the experiment.
    #[error("no configuration labelled `{label}` (there are: {labels})")]
    NoSuchConfiguration {
        /// The label asked for.
        label: String,
        /// The labels there are, comma-separated.
        labels: String,
    },
    /// Fewer than two configurations.
    #[error("nothing to compare")]
    NothingToCompare,
    /// The experiments share no workload (their labels are given).
    #[error("experiments {0} have no workload in common")]
    NoCommonWorkload(String),
    /// The experiments' primary metrics differ (the two names).
    #[error("primary metrics differ: {0} vs {1}")]
    PrimaryDiffers(String, String),
}

impl Report {
    /// The report of one experiment. `reference` overrides the stored reference (a label).
    pub fn of(
        e: &StoredExperiment,
        reference: Option<&str>,
        side: &SideSelection,
    ) -> Result<Report, ReportError> {
        let reference = match reference {
            None => e
                .info
                .reference
                .min(e.configurations.len().saturating_sub(1)),
            Some(l) => e
                .configurations
                .iter()
                .position(|c| c.label == l)
                .ok_or_else(|| ReportError::NoSuchConfiguration {
                    label: l.to_string(),
                    labels: e
                        .configurations
                        .iter()
                        .map(|c| c.label.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })?,
        };
        let mut workloads = Vec::new();
        let mut notes = Vec::new();
        let multi = e.workloads.len() > 1;
        for (w, wl) in e.workloads.iter().enumerate() {
            let primary = e.primary_metric(w);
            let side_keys = side.pick(&e.metric_keys(w));
            let sources: Vec<Source> = e
                .configurations
                .iter()
                .enumerate()
                .map(|(c, conf)| Source {
                    experiment: e,
                    workload: w,
                    configuration: c,
                    label: conf.label.clone(),
                })
                .collect();
            let baselines: Vec<Option<usize>> = (0..sources.len())
                .map(|c| (c != reference).then_some(reference))
                .collect();
            let rows = build_rows(&sources, &baselines, primary.as_ref(), &side_keys);
            let is_sweep = e.info.kind == Kind::Sweep || !e.swept.is_empty();
            let knee = match (&primary, is_sweep && rows.len() >= 2) {
                (Some(p), true) => {
                    let samples: Vec<Vec<f64>> = rows.iter().map(|r| r.values.clone()).collect();
                    stats::knee(&samples, p.direction, e.info.target_ci).map(|k| KneeReport {
                        label: rows[k.index].label.clone(),
                        best: rows[k.best].label.clone(),
                        margin: k.margin,
                    })
                }
                _ => None,
            };
            notes.extend(notes_for(&rows, &wl.label, multi));
            workloads.push(WorkloadReport {
                label: wl.label.clone(),
                primary,
                rows,
                side_metrics: side_keys,
                knee,
            });
        }
        notes.extend(capability_note(e));
        notes.extend(guest_notes(e));
        Ok(Report {
            header: header_of(e),
            systems: e.system.iter().cloned().collect(),
            workloads,
            notes,
        })
    }

    /// Compare two experiments (e.g. before/after a kernel change, different boots): every
    /// configuration of `b` against the configuration of `a` with the same label, or against
    /// `a`'s reference. Workloads are matched by label (or paired when each has one).
    pub fn cross(
        a: &StoredExperiment,
        b: &StoredExperiment,
        side: &SideSelection,
    ) -> Result<Report, ReportError> {
        let mut r = Report::lined_up(
            &[
                (format!("#{}", a.info.id), a),
                (format!("#{}", b.info.id), b),
            ],
            side,
        )?;
        r.header.title = format!("experiments {} vs {}", a.info.id, b.info.id);
        r.header.name = format!("{} / {}", a.info.name, b.info.name);
        r.header.status = format!("{} / {}", a.info.status.as_str(), b.info.status.as_str());
        Ok(r)
    }

    /// The same experiment run on different kernels or hosts: `groups` are (label, the
    /// runs of one kernel or host pooled into one experiment), the first the baseline; every
    /// configuration of each later group is compared with the baseline's of the same label.
    pub fn lined_up(
        groups: &[(String, &StoredExperiment)],
        side: &SideSelection,
    ) -> Result<Report, ReportError> {
        let Some(((_, a), rest)) = groups.split_first() else {
            return Err(ReportError::NothingToCompare);
        };
        let mut pairs: Vec<Vec<usize>> = Vec::new();
        if groups.iter().all(|(_, e)| e.workloads.len() == 1) {
            pairs.push(vec![0; groups.len()]);
        } else {
            for w in &a.workloads {
                let found: Option<Vec<usize>> = groups
                    .iter()
                    .map(|(_, e)| e.workloads.iter().position(|x| x.label == w.label))
                    .collect();
                pairs.extend(found);
            }
        }
        if pairs.is_empty() {
            let ids: Vec<String> = groups.iter().map(|(_, e)| e.info.id.to_string()).collect();
            return Err(ReportError::NoCommonWorkload(ids.join(" and ")));
        }
        let mut workloads = Vec::new();
        let mut notes = Vec::new();
        for ws in pairs {
            let wa = ws[0];
            let primary = a.primary_metric(wa);
            for ((_, b), &wb) in rest.iter().zip(&ws[1..]) {
                if let (Some(pa), Some(pb)) = (&primary, b.primary_metric(wb)) {
                    if pa.key() != pb.key() {
                        return Err(ReportError::PrimaryDiffers(pa.label(), pb.label()));
                    }
                }
            }
            let mut keys = a.metric_keys(wa);
            for ((_, b), &wb) in rest.iter().zip(&ws[1..]) {
                keys.retain(|k| b.metric_keys(wb).iter().any(|x| x.key() == k.key()));
            }
            let side_keys = side.pick(&keys);
            let mut sources: Vec<Source> = Vec::new();
            let mut baselines: Vec<Option<usize>> = Vec::new();
            let n_a = a.configurations.len();
            for (g, ((label, e), &w)) in groups.iter().zip(&ws).enumerate() {
                for (c, conf) in e.configurations.iter().enumerate() {
                    sources.push(Source {
                        experiment: e,
                        workload: w,
                        configuration: c,
                        label: format!("{label} {}", conf.label),
                    });
                    baselines.push((g > 0).then(|| {
                        a.configurations
                            .iter()
                            .position(|x| x.label == conf.label)
                            .unwrap_or(a.info.reference.min(n_a - 1))
                    }));
                }
            }
            let rows = build_rows(&sources, &baselines, primary.as_ref(), &side_keys);
            notes.extend(notes_for(
                &rows,
                &a.workloads[wa].label,
                a.workloads.len() > 1,
            ));
            workloads.push(WorkloadReport {
                label: a.workloads[wa].label.clone(),
                primary,
                rows,
                side_metrics: side_keys,
                knee: None,
            });
        }
        let systems: Vec<_> = groups
            .iter()
            .map(|(_, e)| e.system.clone().unwrap_or_default())
            .collect();
        let sa = &systems[0];
        for sb in &systems[1..] {
            if sa.kernel_release != sb.kernel_release {
                notes.push(format!(
                    "kernels differ: {} vs {}",
                    sa.kernel_release, sb.kernel_release
                ));
            } else if sa.kernel_build != sb.kernel_build {
                notes.push(format!(
                    "builds of kernel {} differ: {} vs {}",
                    sa.kernel_release, sa.kernel_build, sb.kernel_build
                ));
            } else if sa.boot_id != sb.boot_id {
                notes.push("recorded on different boots of the same kernel".into());
            }
        }
        let mut header = header_of(a);
        let labels: Vec<&str> = groups.iter().map(|(l, _)| l.as_str()).collect();
        header.title = labels.join(" vs ");
        header.ids = groups.iter().map(|(_, e)| e.info.id).collect();
        header.runs = groups.iter().map(|(_, e)| e.info.runs).sum();
        header.failed_runs = groups.iter().map(|(_, e)| e.info.failed_runs).sum();
        header.status = groups
            .iter()
            .map(|(_, e)| e.info.status.as_str())
            .collect::<Vec<_>>()
            .join(" / ");
        header.stop_reason = String::new();
        Ok(Report {
            header,
            systems,
            workloads,
            notes,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Cell formatting shared by the text renderers.

/// `mean ± half-width`, both rounded to the half-width's second significant digit
/// (just the mean for n = 1).
pub fn fmt_mean_ci(s: &Summary) -> String {
    let hw = s.ci_half_width;
    if !hw.is_finite() || !s.mean.is_finite() {
        return fmt_num(s.mean);
    }
    if hw == 0.0 {
        return format!("{} ± 0", fmt_num(s.mean));
    }
    let decimals = (1 - hw.abs().log10().floor() as i32).clamp(0, 9) as usize;
    if s.mean.abs() >= 1e7 || (s.mean != 0.0 && s.mean.abs() < 1e-4) {
        return format!("{:.3e} ± {:.2e}", s.mean, hw);
    }
    format!("{:.*} ± {:.*}", decimals, s.mean, decimals, hw)
}

/// A fraction as a percentage with one decimal.
pub fn fmt_pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:.1}%", x * 100.0)
    } else {
        "-".into()
    }
}

/// The words for a metric's direction.
pub fn direction_words(d: Direction) -> &'static str {
    match d {
        Direction::Lower => "lower is better",
        Direction::Higher => "higher is better",
        Direction::Neutral => "no better direction",
    }
}

/// A plain table: headers and rows of cells, used by the terminal, markdown and mail renderers.
#[derive(Debug, Clone)]
pub struct Grid {
    /// Column headers.
    pub headers: Vec<String>,
    /// Rows of cells, one per header.
    pub rows: Vec<Vec<String>>,
    /// Columns aligned right (numbers).
    pub right: Vec<bool>,
}

impl WorkloadReport {
    /// The table of this workload: label, n, primary mean ± CI, CV, verdict, side metrics.
    pub fn grid(&self, compact: bool) -> Grid {
        let unit = unit_of(&self.primary);
        let mut headers = vec![
            "config".to_string(),
            "n".into(),
            format!("{unit} (95% CI)"),
            "CV".into(),
            "verdict".into(),
        ];
        let mut right = vec![false, true, true, true, false];
        // The regime beside the metric, for workloads that name one (or samples with two modes).
        let regimes: Vec<String> = self.rows.iter().map(|r| r.population.describe()).collect();
        let show_regime = regimes.iter().any(|r| !r.is_empty());
        if show_regime {
            headers.insert(2, "regime".into());
            right.insert(2, false);
        }
        let verdict_col = if show_regime { 5 } else { 4 };
        let inline = self.side_metrics.len().min(INLINE_SIDE_METRICS);
        for k in &self.side_metrics[..inline] {
            headers.push(if compact {
                short_metric(&k.label())
            } else {
                format!("{} ({})", k.label(), k.unit)
            });
            right.push(true);
        }
        let baselines: Vec<&String> = self.rows.iter().filter_map(|r| r.versus.as_ref()).collect();
        let single_baseline = baselines
            .first()
            .filter(|b| baselines.iter().all(|x| x == *b))
            .map(|b| (*b).clone());
        if let Some(b) = &single_baseline {
            headers[verdict_col] = format!("vs {b}");
        }
        let mut rows = Vec::new();
        for (r, regime) in self.rows.iter().zip(regimes) {
            let mut label = r.label.clone();
            if self.knee.as_ref().is_some_and(|k| k.label == r.label) {
                label.push_str(" (knee)");
            }
            let n = if r.failed > 0 {
                format!("{}+{}✗", r.runs - r.failed, r.failed)
            } else {
                r.runs.to_string()
            };
            let verdict = match (&r.comparison, &r.versus) {
                _ if r.primary.is_none() && r.failed > 0 => {
                    format!("no verdict: all {} runs failed", r.failed)
                }
                (Some(c), Some(v)) if single_baseline.is_none() => format!("vs {v}: {}", c.verdict),
                (Some(c), _) => c.verdict.clone(),
                (None, _) if single_baseline.as_ref() == Some(&r.label) => "reference".into(),
                (None, _) => String::new(),
            };
            let mut cells = vec![
                label,
                n,
                r.primary
                    .as_ref()
                    .map(fmt_mean_ci)
                    .unwrap_or_else(|| "-".into()),
                r.primary
                    .as_ref()
                    .map(|s| fmt_pct(s.cv))
                    .unwrap_or_else(|| "-".into()),
                verdict,
            ];
            if show_regime {
                cells.insert(2, regime);
            }
            for c in &r.side[..inline] {
                cells.push(
                    c.summary
                        .as_ref()
                        .map(fmt_mean_ci)
                        .unwrap_or_else(|| "-".into()),
                );
            }
            rows.push(cells);
        }
        Grid {
            headers,
            rows,
            right,
        }
    }

    /// When more side metrics are selected than fit beside the primary one: a table with one
    /// row per side metric and one column per configuration (mean ± 95% CI).
    pub fn side_grid(&self) -> Option<Grid> {
        if self.side_metrics.len() <= INLINE_SIDE_METRICS {
            return None;
        }
        let mut headers = vec!["side metric".to_string()];
        headers.extend(self.rows.iter().map(|r| r.label.clone()));
        let right = std::iter::once(false)
            .chain(self.rows.iter().map(|_| true))
            .collect();
        let rows = self
            .side_metrics
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let mut cells = vec![format!("{} ({})", k.label(), k.unit)];
                cells.extend(self.rows.iter().map(|r| {
                    r.side[i]
                        .summary
                        .as_ref()
                        .map(fmt_mean_ci)
                        .unwrap_or_else(|| "-".into())
                }));
                cells
            })
            .collect();
        Some(Grid {
            headers,
            rows,
            right,
        })
    }

    /// One line describing the primary metric.
    pub fn metric_line(&self) -> String {
        match &self.primary {
            Some(p) => format!(
                "workload: {}; metric: {} ({}, {})",
                self.label,
                p.label(),
                p.unit,
                direction_words(p.direction)
            ),
            None => format!("workload: {}; no successful run", self.label),
        }
    }

    /// One line about the knee, if any.
    pub fn knee_line(&self) -> Option<String> {
        self.knee.as_ref().map(|k| {
            format!(
                "knee: {} (the first value within the noise margin {} of the best, {})",
                k.label,
                fmt_pct(k.margin),
                k.best
            )
        })
    }
}

/// A short column name for a side metric: `idle.POLL.time_ms` → `POLL ms`, `irq.CAL.per_s` → `CAL/s`.
pub fn short_metric(name: &str) -> String {
    let parts: Vec<&str> = name.split('.').collect();
    match parts.as_slice() {
        ["irq", kind, "per_s"] => format!("{kind}/s"),
        ["softirq", kind, "per_s"] => format!("softirq {kind}/s"),
        ["idle", "share_pct"] => "idle %".into(),
        ["idle", "exits_per_s"] => "idle exits/s".into(),
        ["idle", state, "time_ms"] => format!("{state} ms"),
        ["idle", state, "share_pct"] => format!("{state} %"),
        ["ctxt", "per_s"] => "ctxsw/s".into(),
        ["power", "W"] => "W".into(),
        ["energy", "J"] => "J".into(),
        _ => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names() {
        assert_eq!(fmt_num(25.3141), "25.314");
        assert_eq!(fmt_num(123456.7), "123457");
        assert_eq!(fmt_num(0.5), "0.5000");
        assert_eq!(short_metric("irq.CAL.per_s"), "CAL/s");
        let s = |xs: &[f64]| Summary::of(xs).unwrap();
        assert_eq!(fmt_mean_ci(&s(&[99.0, 100.0, 101.0, 100.4])), "100.1 ± 1.3");
        assert_eq!(fmt_mean_ci(&s(&[990.0, 1000.0, 1010.0])), "1000 ± 25");
        assert_eq!(fmt_mean_ci(&s(&[5.0])), "5.0000");
        assert_eq!(fmt_mean_ci(&s(&[5.0, 5.0])), "5.0000 ± 0");
        assert_eq!(short_metric("idle.POLL.time_ms"), "POLL ms");
        assert_eq!(short_metric("x.y"), "x.y");
    }
}
