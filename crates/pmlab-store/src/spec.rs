//! What an experiment is: configurations (knob sets) × workloads, the protocol's budget,
//! and the parsers shared by the CLI and `run-spec` TOML files.

use pmlab_kernel::knob::{Assignment, AssignmentError, KnobId};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Errors in an experiment's description; nothing has run when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// A sweep axis with no values; the axis as written.
    #[error("empty value list in sweep `{0}` (write KNOB=V1,V2,...)")]
    EmptySweep(String),
    /// An assignment without `=`; as written.
    #[error("`{0}` is not KNOB=VALUE")]
    NotAnAssignment(String),
    /// A knob name or assignment that does not parse (no name, bad `@CPUS`).
    #[error("bad knob assignment")]
    Assignment(#[source] AssignmentError),
    /// The same knob in two sweep axes; the knob.
    #[error("knob `{0}` is swept twice")]
    DuplicateSweep(KnobId),
    /// The experiment names no workload.
    #[error("no workload given")]
    NoWorkload,
    /// The experiment has no configuration.
    #[error("no configuration given")]
    NoConfiguration,
    /// Two configurations share a label; the label.
    #[error("two configurations are labelled `{0}`")]
    DuplicateLabel(String),
    /// The reference names no configuration: the reference, and the labels there are.
    #[error("unknown reference `{0}` (configurations: {1})")]
    UnknownReference(String, String),
    /// A setting has a value it cannot take.
    #[error("bad {what} `{value}`: {why}")]
    BadValue {
        /// The setting (e.g. `target-ci`).
        what: &'static str,
        /// The value as written.
        value: String,
        /// Why it is refused.
        why: String,
    },
    /// A duration that does not parse.
    #[error("bad duration `{value}`")]
    Duration {
        /// The value as written.
        value: String,
        /// Why it does not parse.
        #[source]
        source: pmlab_workload::units::DurationError,
    },
    /// A spec file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The spec file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A spec file is not valid TOML or not a valid spec.
    #[error("{path}: {message}")]
    SpecFile {
        /// The spec file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A workload group names a workload index that does not exist.
    #[error("bad workload groups: there is no workload {0}")]
    GroupOfNoWorkload(usize),
    /// A workload is in no workload group, or in several.
    #[error(
        "bad workload groups: workload `{workload}` is in {groups} groups (each must be in one)"
    )]
    WorkloadGroups {
        /// The workload's label.
        workload: String,
        /// How many groups it is in.
        groups: usize,
    },
}

/// One configuration: the machine as found plus these knob assignments (`NAME[@CPUS]=VALUE`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Configuration {
    /// The configuration's name in tables (`A`, `B`, or the swept values).
    pub label: String,
    /// Knob assignments (stored and serialised as `NAME[@CPUS]=VALUE` each); empty: the
    /// machine as found.
    pub knobs: Vec<Assignment>,
}

impl Configuration {
    /// A configuration from a space-separated assignment list; `""` is the machine as found.
    pub fn parse(label: &str, assignments: &str) -> Result<Configuration, SpecError> {
        Ok(Configuration {
            label: label.to_string(),
            knobs: parse_assignments(assignments.split_whitespace())?,
        })
    }

    /// `"as found"` for no knobs, else the assignments joined by spaces.
    pub fn describe(&self) -> String {
        if self.knobs.is_empty() {
            "as found".into()
        } else {
            self.knobs
                .iter()
                .map(Assignment::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        }
    }
}

/// Parse one `NAME[@CPUS]=VALUE` as written in a spec or on the command line.
pub fn parse_assignment(text: &str) -> Result<Assignment, SpecError> {
    text.parse().map_err(|e| match e {
        AssignmentError::NotAnAssignment { text } => SpecError::NotAnAssignment(text),
        e => SpecError::Assignment(e),
    })
}

/// Parse each of `texts` ([`parse_assignment`]); the first bad one is the error.
pub fn parse_assignments<S: AsRef<str>>(
    texts: impl IntoIterator<Item = S>,
) -> Result<Vec<Assignment>, SpecError> {
    texts
        .into_iter()
        .map(|t| parse_assignment(t.as_ref()))
        .collect()
}

/// One workload, in the words of `pmlab run` (e.g. `["pipe", "--loops", "20000"]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadDef {
    /// The workload's name in tables: its arguments joined by spaces.
    pub label: String,
    /// The arguments of `pmlab run`, placement written out.
    pub argv: Vec<String>,
}

impl WorkloadDef {
    /// A workload from `pmlab run`'s arguments, its placement written out; refused when empty.
    pub fn new(argv: Vec<String>) -> Result<WorkloadDef, SpecError> {
        if argv.is_empty() {
            return Err(SpecError::NoWorkload);
        }
        // The placement a workload runs under is part of what it is: written out.
        let argv = pmlab_workload::args::with_placement(&argv);
        Ok(WorkloadDef {
            label: argv.join(" "),
            argv,
        })
    }
}

/// Optional shell commands run around the measurements (hyperfine's setup/prepare/cleanup).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hooks {
    /// Once, before the warm-up runs.
    pub setup: Option<String>,
    /// Before every run (warm-ups included), after the configuration is applied.
    pub prepare: Option<String>,
    /// Once, after the last run and before the knobs are restored.
    pub cleanup: Option<String>,
}

/// The kind of experiment, as recorded in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// `pmlab compare`.
    Compare,
    /// `pmlab sweep`.
    Sweep,
    /// `pmlab run-spec` (and every other kind).
    RunSpec,
    /// A hotplug latency session (`pmlab hotplug`): one run per offline or online write.
    Hotplug,
    /// A hotplug fault-injection walk (`pmlab hotplug --inject-fail`): one run per attempt.
    Inject,
    /// Guests booted per configuration and vCPU count (`pmlab boot`): one run per boot.
    Boot,
}

impl Kind {
    /// The name the store records (`compare`, `sweep`, `run-spec`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Compare => "compare",
            Kind::Sweep => "sweep",
            Kind::RunSpec => "run-spec",
            Kind::Hotplug => "hotplug",
            Kind::Inject => "inject",
            Kind::Boot => "boot",
        }
    }
    /// The kind a store row names; a word this build does not know reads as `RunSpec`.
    pub fn parse(s: &str) -> Kind {
        match s {
            "compare" => Kind::Compare,
            "sweep" => Kind::Sweep,
            "hotplug" => Kind::Hotplug,
            "inject" => Kind::Inject,
            "boot" => Kind::Boot,
            _ => Kind::RunSpec,
        }
    }
    /// Either hotplug kind: a latency session or a fault-injection walk.
    pub fn is_hotplug(self) -> bool {
        matches!(self, Kind::Hotplug | Kind::Inject)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Configurations × workloads, with the reference configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Experiment {
    /// What kind of experiment it is.
    pub kind: Kind,
    /// The experiment's name (shown in lists and reports).
    pub name: String,
    /// The configurations, reference included.
    pub configurations: Vec<Configuration>,
    /// The workloads each configuration runs.
    pub workloads: Vec<WorkloadDef>,
    /// Index of the reference configuration.
    pub reference: usize,
    /// For sweeps: the swept knob names, in order (the knee is searched in configuration order).
    pub swept: Vec<String>,
    /// Shell commands run around the measurements.
    pub hooks: Hooks,
    /// Workloads that run back to back, in this order, in one configuration: a hotplug
    /// cycle (each CPU's offline, then its online). The protocol shuffles (configuration,
    /// group) pairs. Empty: every workload is a group of its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<Vec<usize>>,
    /// What each configuration boots, in configuration order (`pmlab boot`); empty for
    /// experiments that boot nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guests: Vec<GuestSpec>,
}

/// A guest's architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GuestArch {
    /// x86-64, booted by `qemu-system-x86_64`.
    X86_64,
    /// arm64 (aarch64), booted by `qemu-system-aarch64` on the `virt` machine.
    Arm64,
}

impl GuestArch {
    /// The name users write (`x86_64`, `arm64`).
    pub fn as_str(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "x86_64",
            GuestArch::Arm64 => "arm64",
        }
    }
}

impl std::fmt::Display for GuestArch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How QEMU runs a guest's CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Accel {
    /// Hardware virtualization through `/dev/kvm`.
    Kvm,
    /// QEMU's emulator: emulated CPUs, times are the emulator's.
    Tcg,
}

impl Accel {
    /// QEMU's name (`kvm`, `tcg`).
    pub fn as_str(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

impl std::fmt::Display for Accel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one configuration of a boot experiment boots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestSpec {
    /// The guest's architecture.
    pub arch: GuestArch,
    /// The kernel image booted.
    pub kernel: std::path::PathBuf,
    /// Its release, as its image says (`6.12.95+deb12-cloud-amd64`), when it says.
    pub kernel_release: Option<String>,
    /// The configuration's own command-line words (pmlab adds its console and tracing words).
    pub cmdline: String,
    /// Guest memory, MiB.
    pub memory_mib: u32,
    /// QEMU machine type (`pc`, `q35`, `virt`).
    pub machine: String,
    /// QEMU CPU model with its options (`max,la57=off,cx16=off`).
    pub cpu_model: String,
    /// The accelerator the boots ran on.
    pub accel: Accel,
    /// The accelerator's own options as given to QEMU (`tcg,thread=multi`).
    pub accel_options: String,
    /// Why this accelerator (e.g. why KVM could not boot the guest here).
    pub accel_reason: String,
    /// The QEMU binary and its version.
    pub qemu: String,
    /// The host's KVM module parameters the boots ran with (`halt_poll_ns=200000`, ...),
    /// under KVM.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_kvm: Vec<String>,
    /// Whether the host's `kvm:*` events were recorded per boot (VM exits by reason).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kvm_exits: bool,
}

impl Experiment {
    /// Check labels and the reference; `reference` is a configuration label.
    pub fn new(
        kind: Kind,
        name: String,
        configurations: Vec<Configuration>,
        workloads: Vec<WorkloadDef>,
        reference: Option<&str>,
    ) -> Result<Experiment, SpecError> {
        if configurations.is_empty() {
            return Err(SpecError::NoConfiguration);
        }
        if workloads.is_empty() {
            return Err(SpecError::NoWorkload);
        }
        for (i, c) in configurations.iter().enumerate() {
            if configurations[..i].iter().any(|d| d.label == c.label) {
                return Err(SpecError::DuplicateLabel(c.label.clone()));
            }
        }
        let reference = match reference {
            None => 0,
            Some(r) => configurations
                .iter()
                .position(|c| c.label == r)
                .ok_or_else(|| {
                    SpecError::UnknownReference(
                        r.to_string(),
                        configurations
                            .iter()
                            .map(|c| c.label.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    )
                })?,
        };
        Ok(Experiment {
            kind,
            name,
            configurations,
            workloads,
            reference,
            swept: Vec::new(),
            hooks: Hooks::default(),
            groups: Vec::new(),
            guests: Vec::new(),
        })
    }

    /// The workload groups: [`Experiment::groups`], or each workload alone.
    pub fn workload_groups(&self) -> Vec<Vec<usize>> {
        if self.groups.is_empty() {
            (0..self.workloads.len()).map(|w| vec![w]).collect()
        } else {
            self.groups.clone()
        }
    }

    /// Run `groups` of workloads back to back (see [`Experiment::groups`]); every workload
    /// must be in exactly one group.
    pub fn with_groups(mut self, groups: Vec<Vec<usize>>) -> Result<Experiment, SpecError> {
        let mut seen = vec![0usize; self.workloads.len()];
        for &w in groups.iter().flatten() {
            match seen.get_mut(w) {
                Some(n) => *n += 1,
                None => return Err(SpecError::GroupOfNoWorkload(w)),
            }
        }
        if let Some(w) = seen.iter().position(|&n| n != 1) {
            return Err(SpecError::WorkloadGroups {
                workload: self.workloads[w].label.clone(),
                groups: seen[w],
            });
        }
        self.groups = groups;
        Ok(self)
    }

    /// Every distinct knob assignment used by any configuration.
    pub(crate) fn all_assignments(&self) -> Vec<Assignment> {
        let mut v: Vec<Assignment> = Vec::new();
        for c in &self.configurations {
            for k in &c.knobs {
                if !v.contains(k) {
                    v.push(k.clone());
                }
            }
        }
        v
    }

    /// Every distinct knob (with `@CPUS`) used by any configuration.
    pub fn all_knob_names(&self) -> Vec<KnobId> {
        let mut v: Vec<KnobId> = Vec::new();
        for a in self.all_assignments() {
            if !v.contains(a.knob()) {
                v.push(a.knob().clone());
            }
        }
        v
    }
}

/// One swept knob: `NAME[@CPUS]=V1,V2,...`.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepAxis {
    /// The knob, `NAME[@CPUS]`.
    pub knob: KnobId,
    /// Its values, in sweep order.
    pub values: Vec<String>,
}

impl SweepAxis {
    /// Parse `NAME[@CPUS]=V1,V2,...`; refused when a value is empty.
    pub fn parse(s: &str) -> Result<SweepAxis, SpecError> {
        let a = parse_assignment(s)?;
        SweepAxis::new(a.knob().clone(), a.value())
    }

    /// The axis of `knob` over `values` (`V1,V2,...`); refused when a value is empty.
    pub fn new(knob: KnobId, values: &str) -> Result<SweepAxis, SpecError> {
        let values: Vec<String> = values
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .collect();
        if values.is_empty() {
            return Err(SpecError::EmptySweep(knob.to_string()));
        }
        Ok(SweepAxis { knob, values })
    }
}

/// The short name of a knob for labels: its last `.`-separated part, `@CPUS` kept.
fn short_knob(knob: &str) -> &str {
    let (name, _) = knob.split_once('@').unwrap_or((knob, ""));
    let short_start = name.rfind('.').map_or(0, |i| i + 1);
    &knob[short_start..]
}

/// The cartesian product of the axes, first axis slowest. One axis: labels are the values.
pub fn sweep_configurations(axes: &[SweepAxis]) -> Result<Vec<Configuration>, SpecError> {
    for (i, a) in axes.iter().enumerate() {
        if axes[..i].iter().any(|b| b.knob == a.knob) {
            return Err(SpecError::DuplicateSweep(a.knob.clone()));
        }
    }
    let mut combos: Vec<Vec<(KnobId, String)>> = vec![Vec::new()];
    for axis in axes {
        let mut next = Vec::new();
        for c in &combos {
            for v in &axis.values {
                let mut c = c.clone();
                c.push((axis.knob.clone(), v.clone()));
                next.push(c);
            }
        }
        combos = next;
    }
    Ok(combos
        .into_iter()
        .map(|c| {
            let label = if axes.len() == 1 {
                c[0].1.clone()
            } else {
                c.iter()
                    .map(|(k, v)| format!("{}={v}", short_knob(&k.to_string())))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            Configuration {
                label,
                knobs: c.into_iter().map(|(k, v)| k.set(v)).collect(),
            }
        })
        .collect())
}

/// The order of runs within the measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Every round runs every configuration once, in a freshly shuffled order (the default).
    Interleaved,
    /// All runs of the first configuration, then the next (for demonstrating drift; not adaptive).
    Sequential,
}

/// The budget and the stopping rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Stop when every configuration's 95% CI half-width is below this fraction of its mean.
    pub target_ci: f64,
    /// At most this many measured runs (warm-ups not counted).
    pub max_runs: Option<usize>,
    /// At most this much wall time (warm-ups counted).
    pub max_time: Option<Duration>,
    /// Adaptive stops are only considered after this many rounds.
    pub min_rounds: usize,
    /// Seed of the per-round shuffles (recorded).
    pub seed: u64,
    /// How runs are ordered within the experiment.
    pub order: Order,
    /// Also stop early once every comparison with the reference is decided at 99.9% (see protocol docs).
    pub stop_when_decided: bool,
    /// Run one discarded warm-up per configuration and workload.
    pub warmup: bool,
    /// Idle before each run (after its configuration is applied): what ran before, pmlab's own
    /// start-up included, fades from the scheduler's load tracking (see [`DEFAULT_SETTLE`]).
    pub settle: Duration,
}

/// The default settle: about six half-lives (32 ms) of the scheduler's load tracking, after
/// which load left by the previous run weighs under 2%. Measured on a 2-vCPU guest: short
/// unpinned pipe runs after 0.2 s of idle land where their own start-up puts them, back to
/// back they follow the run before (docs/development.md, "Benchmarks").
pub const DEFAULT_SETTLE: Duration = Duration::from_millis(200);

impl Default for Budget {
    fn default() -> Self {
        Budget {
            target_ci: 0.01,
            max_runs: None,
            max_time: None,
            min_rounds: 3,
            seed: 0,
            order: Order::Interleaved,
            stop_when_decided: true,
            warmup: true,
            settle: DEFAULT_SETTLE,
        }
    }
}

/// Default number of rounds when `--max-runs` is not given.
pub const DEFAULT_MAX_ROUNDS: usize = 30;
/// Smallest allowed `min_rounds`.
pub const MIN_ROUNDS: usize = 3;

/// Parse a CI target: `1%`, `0.5%` or a fraction `0.01`.
pub fn parse_fraction(s: &str) -> Result<f64, SpecError> {
    let bad = |why: &str| SpecError::BadValue {
        what: "target CI",
        value: s.to_string(),
        why: why.to_string(),
    };
    let t = s.trim();
    let v = if let Some(p) = t.strip_suffix('%') {
        p.trim().parse::<f64>().map_err(|_| bad("not a number"))? / 100.0
    } else {
        t.parse::<f64>()
            .map_err(|_| bad("not a number (write 1% or 0.01)"))?
    };
    if !(v > 0.0 && v < 1.0) {
        return Err(bad("must be between 0 and 100%"));
    }
    Ok(v)
}

/// Parse a duration in the workloads' grammar (`300s`, `5m`, `1h`, `1.5m`, `500ms`, `200us`);
/// a bare number is seconds, as spec files have always written it.
pub fn parse_duration(s: &str) -> Result<Duration, SpecError> {
    let bad = |why: String| SpecError::BadValue {
        what: "duration",
        value: s.to_string(),
        why,
    };
    let t = s.trim();
    let with_unit = if t.parse::<f64>().is_ok() {
        format!("{t}s")
    } else {
        t.to_string()
    };
    let ns = pmlab_workload::units::parse_duration(&with_unit).map_err(|source| {
        SpecError::Duration {
            value: s.to_string(),
            source,
        }
    })?;
    if ns.0 == 0 {
        return Err(bad("must be positive".into()));
    }
    Ok(Duration::from_nanos(ns.0))
}

/// Parse a settle time: like [`parse_duration`], and `0` turns settling off.
pub fn parse_settle(s: &str) -> Result<Duration, SpecError> {
    match s.trim().parse::<f64>() {
        Ok(0.0) => Ok(Duration::ZERO),
        _ => parse_duration(s),
    }
}

/// Split a command line into words as a POSIX shell does (quotes and backslashes, no other
/// shell syntax).
pub(crate) fn split_words(s: &str) -> Result<Vec<String>, SpecError> {
    shell_words::split(s).map_err(|_| SpecError::BadValue {
        what: "command line",
        value: s.to_string(),
        why: "unterminated quote".into(),
    })
}

// ---------------------------------------------------------------------------------------------
// run-spec TOML files.

/// A knob list written either as one string (`"A=1 B=2"`) or as an array of assignments.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum KnobList {
    One(String),
    Many(Vec<String>),
}

/// A workload written as one command line or as an argument array.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Words {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecConfiguration {
    label: String,
    #[serde(default)]
    knobs: Option<KnobList>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecWorkload {
    #[serde(default)]
    label: Option<String>,
    run: Words,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecSweep {
    knob: String,
    values: toml::Value,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    reference: Option<String>,
    #[serde(default)]
    target_ci: Option<String>,
    #[serde(default)]
    max_runs: Option<usize>,
    #[serde(default)]
    max_time: Option<String>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    settle: Option<String>,
    #[serde(default)]
    setup: Option<String>,
    #[serde(default)]
    prepare: Option<String>,
    #[serde(default)]
    cleanup: Option<String>,
    #[serde(default, rename = "configuration")]
    configurations: Vec<SpecConfiguration>,
    /// Sweep axes, in order (an alternative to `[[configuration]]`).
    #[serde(default)]
    sweep: Vec<SpecSweep>,
    #[serde(default, rename = "workload")]
    workloads: Vec<SpecWorkload>,
}

/// A parsed `run-spec` file: the experiment and the budget settings it gives.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The experiment the file describes.
    pub experiment: Experiment,
    /// `target-ci` (relative CI half-width, e.g. 0.02); None: not given.
    pub target_ci: Option<f64>,
    /// `max-runs`; None: not given.
    pub max_runs: Option<usize>,
    /// `max-time`; None: not given.
    pub max_time: Option<Duration>,
    /// `seed`; None: not given.
    pub seed: Option<u64>,
    /// `settle`, idle time before each measured run; None: not given.
    pub settle: Option<Duration>,
}

/// Parse a `run-spec` TOML text (`path` is for messages and the default name).
pub fn parse_run_spec(path: &Path, text: &str) -> Result<RunSpec, SpecError> {
    let err = |message: String| SpecError::SpecFile {
        path: path.to_path_buf(),
        message,
    };
    let file: SpecFile = toml::from_str(text).map_err(|e| err(e.to_string()))?;
    let mut configurations = Vec::new();
    let mut swept = Vec::new();
    for c in &file.configurations {
        let knobs = match &c.knobs {
            None => Vec::new(),
            Some(KnobList::One(s)) => parse_assignments(s.split_whitespace())?,
            Some(KnobList::Many(v)) => parse_assignments(v)?,
        };
        configurations.push(Configuration {
            label: c.label.clone(),
            knobs,
        });
    }
    if !file.sweep.is_empty() {
        if !configurations.is_empty() {
            return Err(err(
                "give either [[configuration]] or [[sweep]] tables, not both".into(),
            ));
        }
        let mut axes = Vec::new();
        for SpecSweep { knob, values } in &file.sweep {
            let id: KnobId = knob.parse().map_err(SpecError::Assignment)?;
            let values: Vec<String> = match values {
                toml::Value::Array(a) => a
                    .iter()
                    .map(|v| match v {
                        toml::Value::String(s) => Ok(s.clone()),
                        toml::Value::Integer(i) => Ok(i.to_string()),
                        toml::Value::Float(f) => Ok(f.to_string()),
                        toml::Value::Boolean(b) => Ok(b.to_string()),
                        other => Err(err(format!(
                            "sweep `{knob}`: value {other} is not a string or number"
                        ))),
                    })
                    .collect::<Result<_, _>>()?,
                toml::Value::String(s) => SweepAxis::new(id.clone(), s)?.values,
                other => {
                    return Err(err(format!(
                        "sweep `{knob}`: {other} is not a list of values"
                    )))
                }
            };
            if values.is_empty() {
                return Err(SpecError::EmptySweep(knob.clone()));
            }
            swept.push(id.to_string());
            axes.push(SweepAxis { knob: id, values });
        }
        configurations = sweep_configurations(&axes)?;
    }
    if configurations.is_empty() {
        configurations.push(Configuration {
            label: "as found".into(),
            knobs: Vec::new(),
        });
    }
    let mut workloads = Vec::new();
    for w in &file.workloads {
        let argv = match &w.run {
            Words::One(s) => split_words(s)?,
            Words::Many(v) => v.clone(),
        };
        let mut def =
            WorkloadDef::new(argv).map_err(|_| err("a [[workload]] has an empty `run`".into()))?;
        if let Some(l) = &w.label {
            def.label = l.clone();
        }
        if workloads.iter().any(|x: &WorkloadDef| x.label == def.label) {
            return Err(err(format!("two workloads are labelled `{}`", def.label)));
        }
        workloads.push(def);
    }
    if workloads.is_empty() {
        return Err(err("no [[workload]] given".into()));
    }
    let name = file.name.clone().unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let mut experiment = Experiment::new(
        Kind::RunSpec,
        name,
        configurations,
        workloads,
        file.reference.as_deref(),
    )?;
    experiment.swept = swept;
    experiment.hooks = Hooks {
        setup: file.setup.clone(),
        prepare: file.prepare.clone(),
        cleanup: file.cleanup.clone(),
    };
    Ok(RunSpec {
        experiment,
        target_ci: file.target_ci.as_deref().map(parse_fraction).transpose()?,
        max_runs: file.max_runs,
        max_time: file.max_time.as_deref().map(parse_duration).transpose()?,
        seed: file.seed,
        settle: file.settle.as_deref().map(parse_settle).transpose()?,
    })
}

/// Name of the primary metric of a hotplug run (ms of one online or offline write).
pub const HOTPLUG_WALL_METRIC: &str = "hotplug.wall_ms";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settle_takes_a_duration_or_zero() {
        assert_eq!(parse_settle("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_settle("50ms").unwrap(), Duration::from_millis(50));
        assert_eq!(parse_settle("0.2").unwrap(), Duration::from_millis(200));
        assert!(parse_settle("-1s").is_err());
        assert!(parse_settle("soon").is_err());
        let text = "settle = \"0\"\n[[workload]]\nrun = \"idle\"\n";
        let s = parse_run_spec(Path::new("s.toml"), text).unwrap();
        assert_eq!(s.settle, Some(Duration::ZERO));
        let bad = "settle = \"later\"\n[[workload]]\nrun = \"idle\"\n";
        assert!(parse_run_spec(Path::new("s.toml"), bad).is_err());
    }

    #[test]
    fn sweep_is_cartesian_first_axis_slowest() {
        let axes = [
            SweepAxis::parse("a.x=1,2").unwrap(),
            SweepAxis::parse("b.y@1=p,q,r").unwrap(),
        ];
        let cs = sweep_configurations(&axes).unwrap();
        assert_eq!(cs.len(), 6);
        assert_eq!(cs[0].knobs, vec!["a.x=1", "b.y@1=p"]);
        assert_eq!(cs[0].label, "x=1,y@1=p");
        assert_eq!(cs[5].knobs, vec!["a.x=2", "b.y@1=r"]);
        let one =
            sweep_configurations(
                &[SweepAxis::parse("haltpoll.guest_halt_poll_ns=0,10us").unwrap()],
            )
            .unwrap();
        assert_eq!(one[1].label, "10us");
    }

    #[test]
    fn empty_sweep_list_is_refused() {
        assert!(matches!(SweepAxis::parse("a.x="), Err(SpecError::EmptySweep(k)) if k == "a.x"));
        assert!(matches!(
            SweepAxis::parse("a.x=,,"),
            Err(SpecError::EmptySweep(_))
        ));
        assert!(matches!(
            SweepAxis::parse("a.x"),
            Err(SpecError::NotAnAssignment(_))
        ));
        let axes = [
            SweepAxis::parse("a=1").unwrap(),
            SweepAxis::parse("a=2").unwrap(),
        ];
        assert!(matches!(
            sweep_configurations(&axes),
            Err(SpecError::DuplicateSweep(_))
        ));
    }

    #[test]
    fn configuration_parsing() {
        assert!(Configuration::parse("a", "").unwrap().knobs.is_empty());
        assert_eq!(
            Configuration::parse("b", " x=1  y@0-1=2 ").unwrap().knobs,
            vec!["x=1", "y@0-1=2"]
        );
        assert!(Configuration::parse("b", "x").is_err());
        // Parsed once, here: a bad CPU list is refused with its typed cause.
        assert!(matches!(
            Configuration::parse("b", "x=1 y@1-x=2"),
            Err(SpecError::Assignment(AssignmentError::Cpus { text, .. })) if text == "y@1-x=2"
        ));
        let c = Configuration::parse("b", "y@3,1,2=on").unwrap();
        assert_eq!(c.knobs[0].knob().cpus(), Some(&[1, 2, 3][..]));
        assert_eq!(c.describe(), "y@1-3=on");
        let j = serde_json::to_string(&c).unwrap();
        assert_eq!(j, r#"{"label":"b","knobs":["y@1-3=on"]}"#);
        assert_eq!(serde_json::from_str::<Configuration>(&j).unwrap(), c);
        let bad = parse_run_spec(
            Path::new("s.toml"),
            "[[sweep]]\nknob = \"a@\"\nvalues = [1, 2]\n[[workload]]\nrun = \"idle\"\n",
        );
        assert!(matches!(bad, Err(SpecError::Assignment(_))), "{bad:?}");
        let c = vec![
            Configuration::parse("a", "").unwrap(),
            Configuration::parse("a", "").unwrap(),
        ];
        let w = vec![WorkloadDef::new(vec!["pipe".into()]).unwrap()];
        assert!(matches!(
            Experiment::new(Kind::Compare, "t".into(), c, w.clone(), None),
            Err(SpecError::DuplicateLabel(_))
        ));
        let c = vec![Configuration::parse("a", "").unwrap()];
        assert!(matches!(
            Experiment::new(Kind::Compare, "t".into(), c, w, Some("zz")),
            Err(SpecError::UnknownReference(..))
        ));
    }

    #[test]
    fn budgets_parse() {
        assert_eq!(parse_fraction("1%").unwrap(), 0.01);
        assert_eq!(parse_fraction("0.02").unwrap(), 0.02);
        assert!(parse_fraction("0").is_err());
        assert!(parse_fraction("150%").is_err());
        assert!(parse_fraction("x").is_err());
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn words_split_with_quotes() {
        assert_eq!(
            split_words(r#"cmd --shell "sleep 1" 'a b' c"#).unwrap(),
            vec!["cmd", "--shell", "sleep 1", "a b", "c"]
        );
        assert_eq!(split_words(r#"x """#).unwrap(), vec!["x", ""]);
        assert!(split_words("a 'b").is_err());
    }

    #[test]
    fn run_spec_battery_and_sweep() {
        let text = r#"
name = "battery"
reference = "after"
target_ci = "2%"
max_time = "3m"
[[configuration]]
label = "before"
[[configuration]]
label = "after"
knobs = "haltpoll.guest_halt_poll_ns=200us"
[[workload]]
run = "pipe --loops 1000"
[[workload]]
label = "msg"
run = ["messaging", "--groups", "2"]
"#;
        let s = parse_run_spec(Path::new("b.toml"), text).unwrap();
        assert_eq!(s.experiment.reference, 1);
        assert_eq!(
            s.experiment.workloads[0].argv,
            vec!["pipe", "--loops", "1000", "--placement", "spread"]
        );
        assert_eq!(s.experiment.workloads[1].label, "msg");
        assert_eq!(s.target_ci, Some(0.02));
        assert_eq!(s.max_time, Some(Duration::from_secs(180)));

        let text = "[[sweep]]\nknob = \"haltpoll.guest_halt_poll_ns\"\nvalues = [0, \"10us\"]\n[[sweep]]\nknob = \"a.b\"\nvalues = \"1,2\"\n[[workload]]\nrun = \"pipe\"\n";
        let s = parse_run_spec(Path::new("s.toml"), text).unwrap();
        assert_eq!(s.experiment.configurations.len(), 4);
        assert_eq!(
            s.experiment.configurations[1].knobs,
            vec!["haltpoll.guest_halt_poll_ns=0", "a.b=2"]
        );
        assert_eq!(
            s.experiment.swept,
            vec!["haltpoll.guest_halt_poll_ns", "a.b"]
        );
        assert_eq!(s.experiment.name, "s");

        let text = "[[sweep]]\nknob = \"x\"\nvalues = []\n[[workload]]\nrun = \"pipe\"\n";
        assert!(matches!(
            parse_run_spec(Path::new("e.toml"), text),
            Err(SpecError::EmptySweep(_))
        ));
        assert!(parse_run_spec(Path::new("e.toml"), "bogus = 1\n").is_err());
        assert!(parse_run_spec(Path::new("e.toml"), "[[configuration]]\nlabel=\"a\"\n").is_err());
    }
}
