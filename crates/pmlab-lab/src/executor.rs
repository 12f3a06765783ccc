//! The `Executor` trait — what the protocol asks of the machine (validate, configure, run,
//! hooks, restore) — and the fake executor that makes scheduling and statistics tests
//! deterministic (hyperfine style; the CLI exposes it behind a hidden `--fake-executor SPEC`).

use crate::spec::{Configuration, Experiment, WorkloadDef};
use crate::system::SystemSnapshot;
use pmlab_kernel::knob::{KnobError, KnobId};
use pmlab_kernel::{Direction, Metric};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// Why an executor refused or failed outside a single run.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// Bad input to a fake or simulated executor, found before anything ran.
    #[error("{0}")]
    Invalid(String),
    /// A workload's words that describe no workload.
    #[error(transparent)]
    Workload(#[from] pmlab_workload::WorkloadError),
    /// A configuration's knobs refused before anything was written.
    #[error("configuration `{label}`")]
    Configuration {
        /// The configuration's label.
        label: String,
        /// Why its knobs were refused.
        #[source]
        source: KnobError,
    },
    /// The machine could not be configured or restored.
    #[error(transparent)]
    Knob(#[from] KnobError),
    /// The hotplug lab's machine (CPUs, loaders, cgroups, tracer).
    #[error(transparent)]
    Hotplug(Box<dyn std::error::Error + Send + Sync>),
    /// The boot lab's guest (QEMU, its kernel, what it sent back).
    #[error(transparent)]
    Boot(Box<dyn std::error::Error + Send + Sync>),
}

/// Which hook a command is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKind {
    /// Once, before the warm-up runs.
    Setup,
    /// Before every run, after the configuration is applied.
    Prepare,
    /// Once, after the last run and before the knobs are restored.
    Cleanup,
}

impl HookKind {
    /// The hook's name in messages (`setup`, `prepare`, `cleanup`).
    pub fn as_str(self) -> &'static str {
        match self {
            HookKind::Setup => "setup",
            HookKind::Prepare => "prepare",
            HookKind::Cleanup => "cleanup",
        }
    }
}

/// Where a run sits in the experiment.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// The experiment's id in the store (0 for `pmlab run`).
    pub experiment_id: i64,
    /// Index of the run's configuration in the experiment.
    pub configuration: usize,
    /// Index of the run's workload in the experiment.
    pub workload: usize,
    /// The round the run belongs to.
    pub round: usize,
    /// Where the run is in its round (as stored).
    pub position: usize,
    /// A discarded warm-up run.
    pub warmup: bool,
    /// Runs started so far in this experiment (warm-ups included), before this one.
    pub sequence: usize,
}

impl RunContext {
    /// The only run of a one-run plan (`pmlab run`).
    pub fn single() -> RunContext {
        RunContext {
            experiment_id: 0,
            configuration: 0,
            workload: 0,
            round: 1,
            position: 0,
            warmup: false,
            sequence: 0,
        }
    }
}

/// What one run produced.
#[derive(Debug, Clone, Default)]
pub struct RunOutput {
    /// The workload's metrics, primary first.
    pub metrics: Vec<Metric>,
    /// Side metrics: counter deltas, trace analyses.
    pub side_metrics: Vec<Metric>,
    /// The run's trace file; None: not traced.
    pub trace_path: Option<PathBuf>,
}

/// What the protocol needs from the machine. Implementations: the real one (knobs through the
/// journaled transaction, workloads, counters) and [`FakeExecutor`].
pub trait Executor {
    /// Check every configuration and workload without changing anything.
    fn validate(&mut self, experiment: &Experiment) -> Result<(), ExecError>;
    /// The system snapshot, with the current values of the experiment's knobs.
    fn snapshot(&mut self, experiment: &Experiment) -> SystemSnapshot;
    /// Put the machine in this configuration: as found, plus its knobs.
    fn configure(&mut self, configuration: &Configuration) -> Result<(), ExecError>;
    /// Let the machine settle before a run (the protocol's `Budget::settle`). Executors that
    /// run nothing on the machine (the fake one, simulations) have nothing to wait for.
    fn settle(&mut self, _duration: Duration) -> Result<(), RunError> {
        Ok(())
    }
    /// One measured run of a workload in the current configuration. The error is recorded.
    fn run(&mut self, workload: &WorkloadDef, context: &RunContext) -> Result<RunOutput, RunError>;
    /// Run a hook command (default: `sh -c COMMAND`, failing on a non-zero exit).
    fn hook(&mut self, kind: HookKind, command: &str) -> Result<(), HookError> {
        run_shell(kind, command)
    }
    /// Put the machine back as found. Called at the end and on every interruption.
    fn restore(&mut self) -> Result<(), ExecError>;
}

/// Why one run failed. The store keeps its cause chain (`pmlab_kernel::error_chain`) as the run's error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The workload failed.
    #[error(transparent)]
    Workload(#[from] pmlab_workload::WorkloadError),
    /// The machine refused or failed.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// A hook command failed.
    #[error(transparent)]
    Hook(#[from] HookError),
    /// A failure the fake or simulated executor was told to produce.
    #[error("{0}")]
    Simulated(String),
    /// The machine refused in a way that ends the experiment (the run is stored as failed).
    #[error(transparent)]
    Fatal(ExecError),
}

/// Why a hook command failed.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// The hook command could not be started.
    #[error("{} hook `{command}` could not start", kind.as_str())]
    Spawn {
        /// Which hook.
        kind: HookKind,
        /// The command, as given.
        command: String,
        /// Why it could not start.
        #[source]
        source: std::io::Error,
    },
    /// The hook command exited unsuccessfully.
    #[error("{} hook `{command}` failed: {status}", kind.as_str())]
    Failed {
        /// Which hook.
        kind: HookKind,
        /// The command, as given.
        command: String,
        /// Its exit status.
        status: std::process::ExitStatus,
    },
}

/// Run a hook through `sh -c`.
pub(crate) fn run_shell(kind: HookKind, command: &str) -> Result<(), HookError> {
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .status()
        .map_err(|source| HookError::Spawn {
            kind,
            command: command.into(),
            source,
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(HookError::Failed {
            kind,
            command: command.into(),
            status,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The fake executor.

/// Noise distribution of the fake executor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FakeDistribution {
    /// Normal with `sd` as its standard deviation.
    Normal,
    /// Log-normal with the given sd of log values (skewed to the right).
    LogNormal,
}

/// Settings of the fake executor, parsed from `key=value,key=value`.
///
/// Keys: `mean` (100), `sd` (1, in metric units), `drift` (0, added per run started, warm-ups
/// included), `dist` (`normal` | `lognormal`), `seed` (the experiment seed), `fail_at` (a run
/// sequence number that fails), `sleep_ms` (0, per run), `log` (a file that gets one line per
/// event), `direction` (`lower` | `higher`), `unit` (`us/op`), `regimes` (`1`: each run also
/// reports `same_cpu_share`, 1 for a run of the second mode and 0 otherwise, as `pipe` does).
/// Configurations set per-configuration values with knobs `fake.mean=X`, `fake.sd=X`,
/// `fake.fail=1` (every run fails), `fake.mode2=X` and `fake.mode2_share=P` (a second
/// population with mean X drawn with probability P: a bimodal metric), `fake.disturb=PCT`
/// (from run sequence `disturb_from` on, others take PCT% of CPU 1: the run reports it as
/// `disturbance.workload_pct@cpu1` and its value is divided by 1 − PCT/100, as a CPU-bound
/// task given that much less CPU); any other knob is refused as unknown, like the real one.
#[derive(Debug, Clone)]
pub struct FakeSpec {
    /// Mean of the metric (`mean`), in `unit`.
    pub mean: f64,
    /// Standard deviation (`sd`), in `unit`.
    pub sd: f64,
    /// Added to the mean per run started (`drift`), in `unit`.
    pub drift: f64,
    /// Noise distribution (`dist`).
    pub distribution: FakeDistribution,
    /// Seed of the noise (`seed`); None: the experiment's seed.
    pub seed: Option<u64>,
    /// The run sequence number that fails (`fail_at`); None: none fails.
    pub fail_at: Option<usize>,
    /// Sleep per run (`sleep_ms`).
    pub sleep: Duration,
    /// A file that gets one line per event (`log`); None: no log.
    pub log: Option<PathBuf>,
    /// Which way is better (`direction`).
    pub direction: Direction,
    /// The metric's unit (`unit`).
    pub unit: String,
    /// Report the mode of each run as a `pipe`-style regime.
    pub regimes: bool,
    /// Runs from this sequence number on are disturbed by `fake.disturb` (`disturb_from`).
    pub disturb_from: usize,
}

impl FakeSpec {
    /// Parse `key=value,key=value` (keys above); an unknown key or bad value is refused.
    pub fn parse(s: &str) -> Result<FakeSpec, ExecError> {
        let mut spec = FakeSpec {
            mean: 100.0,
            sd: 1.0,
            drift: 0.0,
            distribution: FakeDistribution::Normal,
            seed: None,
            fail_at: None,
            sleep: Duration::ZERO,
            log: None,
            direction: Direction::Lower,
            unit: "us/op".into(),
            regimes: false,
            disturb_from: 0,
        };
        let bad = |item: &str, why: &str| {
            ExecError::Invalid(format!("fake executor spec `{item}`: {why}"))
        };
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| bad(item, "not key=value"))?;
            let number = || value.parse::<f64>().map_err(|_| bad(item, "not a number"));
            match key {
                "mean" => spec.mean = number()?,
                "sd" => spec.sd = number()?,
                "drift" => spec.drift = number()?,
                "dist" => {
                    spec.distribution = match value {
                        "normal" => FakeDistribution::Normal,
                        "lognormal" => FakeDistribution::LogNormal,
                        _ => return Err(bad(item, "dist is normal or lognormal")),
                    }
                }
                "seed" => spec.seed = Some(value.parse().map_err(|_| bad(item, "not an integer"))?),
                "fail_at" => {
                    spec.fail_at = Some(value.parse().map_err(|_| bad(item, "not an integer"))?)
                }
                "sleep_ms" => spec.sleep = Duration::from_secs_f64(number()? / 1000.0),
                "log" => spec.log = Some(PathBuf::from(value)),
                "direction" => {
                    spec.direction = match value {
                        "lower" => Direction::Lower,
                        "higher" => Direction::Higher,
                        _ => return Err(bad(item, "direction is lower or higher")),
                    }
                }
                "unit" => spec.unit = value.to_string(),
                "regimes" => spec.regimes = number()? != 0.0,
                "disturb_from" => {
                    spec.disturb_from = value.parse().map_err(|_| bad(item, "not an integer"))?
                }
                _ => return Err(bad(item, "unknown key")),
            }
        }
        Ok(spec)
    }
}

/// A deterministic stand-in for the machine: values are `mean + drift·sequence + noise`.
pub struct FakeExecutor {
    spec: FakeSpec,
    rng: ChaCha8Rng,
    current: Option<Configuration>,
    /// Every event, in order (also appended to `spec.log` when set).
    pub events: Vec<String>,
}

impl FakeExecutor {
    /// A fake executor; its noise is seeded by `spec.seed`, else by `experiment_seed`.
    pub fn new(spec: FakeSpec, experiment_seed: u64) -> FakeExecutor {
        let seed = spec.seed.unwrap_or(experiment_seed) ^ 0x9E37_79B9_7F4A_7C15;
        FakeExecutor {
            spec,
            rng: ChaCha8Rng::seed_from_u64(seed),
            current: None,
            events: Vec::new(),
        }
    }

    fn log(&mut self, event: String) {
        if let Some(path) = &self.spec.log {
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = writeln!(f, "{event}");
            }
        }
        self.events.push(event);
    }

    fn knob(&self, name: &str) -> Option<f64> {
        let c = self.current.as_ref()?;
        let id = KnobId::new(name);
        c.knobs
            .iter()
            .find_map(|a| (*a.knob() == id).then(|| a.value().parse().ok()).flatten())
    }

    /// A standard normal variate (Box–Muller).
    fn gaussian(&mut self) -> f64 {
        let u1: f64 = self.rng.random_range(f64::EPSILON..1.0);
        let u2: f64 = self.rng.random();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// Knob names the fake executor gives a meaning to.
const FAKE_KNOBS: &[&str] = &[
    "fake.mean",
    "fake.sd",
    "fake.fail",
    "fake.mode2",
    "fake.mode2_share",
    "fake.disturb",
];

impl Executor for FakeExecutor {
    fn validate(&mut self, experiment: &Experiment) -> Result<(), ExecError> {
        // Refused as the machine's knobs are: `KnobError` under the configuration's label.
        for c in &experiment.configurations {
            for a in &c.knobs {
                let refuse = |source| ExecError::Configuration {
                    label: c.label.clone(),
                    source,
                };
                if !FAKE_KNOBS.iter().any(|n| *a.knob() == KnobId::new(*n)) {
                    return Err(refuse(KnobError::Unknown {
                        name: Box::new(a.knob().clone()),
                        hint: format!(" (the fake executor knows {})", FAKE_KNOBS.join(", ")),
                    }));
                }
                if a.value().parse::<f64>().is_err() {
                    return Err(refuse(KnobError::Invalid {
                        assignment: a.to_string(),
                        reason: format!("value `{}` is not a number", a.value()),
                    }));
                }
            }
        }
        Ok(())
    }

    fn snapshot(&mut self, experiment: &Experiment) -> SystemSnapshot {
        SystemSnapshot {
            kernel_release: "fake".into(),
            cpu_model: "fake executor".into(),
            cpus: 1,
            virtualization: "none".into(),
            knobs: experiment
                .all_knob_names()
                .into_iter()
                .map(|n| (n.to_string(), "0".to_string()))
                .collect(),
            ..Default::default()
        }
    }

    fn configure(&mut self, configuration: &Configuration) -> Result<(), ExecError> {
        self.log(format!("configure {}", configuration.label));
        self.current = Some(configuration.clone());
        Ok(())
    }

    fn run(&mut self, workload: &WorkloadDef, context: &RunContext) -> Result<RunOutput, RunError> {
        let label = self
            .current
            .as_ref()
            .map(|c| c.label.clone())
            .unwrap_or_default();
        let kind = if context.warmup { "warmup" } else { "run" };
        self.log(format!(
            "{kind} {label} {} round={}",
            workload.label, context.round
        ));
        if !self.spec.sleep.is_zero() {
            std::thread::sleep(self.spec.sleep);
        }
        // Draw the noise first so that a failure does not shift later values.
        let z = self.gaussian();
        let z_side = self.gaussian();
        if self.spec.fail_at == Some(context.sequence)
            || self.knob("fake.fail").is_some_and(|f| f != 0.0)
        {
            return Err(RunError::Simulated(format!(
                "fake failure in run {}",
                context.sequence
            )));
        }
        // The second mode is drawn only where one is asked for: other streams stay as they were.
        let second = match (self.knob("fake.mode2"), self.knob("fake.mode2_share")) {
            (Some(m), Some(p)) => (self.rng.random::<f64>() < p).then_some(m),
            _ => None,
        };
        let mean = second.unwrap_or(self.knob("fake.mean").unwrap_or(self.spec.mean));
        let sd = self.knob("fake.sd").unwrap_or(self.spec.sd);
        let noise = match self.spec.distribution {
            FakeDistribution::Normal => sd * z,
            // Right-skewed noise with roughly the same spread.
            FakeDistribution::LogNormal => mean * ((sd / mean * z).exp() - 1.0),
        };
        let disturb = match self.knob("fake.disturb") {
            Some(p) if context.sequence >= self.spec.disturb_from => (p / 100.0).clamp(0.0, 0.99),
            _ => 0.0,
        };
        let value = (mean + self.spec.drift * context.sequence as f64 + noise) / (1.0 - disturb);
        let mut metrics = vec![Metric::new(
            "fake.time",
            value,
            self.spec.unit.clone(),
            self.spec.direction,
        )];
        if self.spec.regimes {
            let share = if second.is_some() { 1.0 } else { 0.0 };
            metrics.push(Metric::new(
                pmlab_workload::placement::SAME_CPU_SHARE,
                share,
                "",
                Direction::Neutral,
            ));
        }
        let mut side_metrics = vec![
            Metric::new(
                "fake.idle_residency",
                50.0 + mean / 10.0 + z_side,
                "%",
                Direction::Neutral,
            ),
            Metric::new(
                "fake.ipis",
                1000.0 + 10.0 * z_side,
                "1/s",
                Direction::Neutral,
            ),
        ];
        if self.knob("fake.disturb").is_some() {
            side_metrics.push(
                Metric::new(
                    crate::disturbance::names::WORKLOAD_PCT,
                    100.0 * disturb,
                    "%",
                    Direction::Neutral,
                )
                .on_cpu(1),
            );
        }
        Ok(RunOutput {
            metrics,
            side_metrics,
            trace_path: None,
        })
    }

    fn hook(&mut self, kind: HookKind, command: &str) -> Result<(), HookError> {
        self.log(format!("hook {}", kind.as_str()));
        run_shell(kind, command)
    }

    fn restore(&mut self) -> Result<(), ExecError> {
        self.log("restore".into());
        self.current = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_spec_parses_and_refuses() {
        let s = FakeSpec::parse(
            "mean=5, sd=0.5,drift=0.1,dist=lognormal,fail_at=3,sleep_ms=2,direction=higher",
        )
        .unwrap();
        assert_eq!((s.mean, s.sd, s.drift, s.fail_at), (5.0, 0.5, 0.1, Some(3)));
        assert_eq!(s.distribution, FakeDistribution::LogNormal);
        assert_eq!(s.sleep, Duration::from_millis(2));
        assert!(FakeSpec::parse("bogus=1").is_err());
        assert!(FakeSpec::parse("mean=x").is_err());
        assert!(FakeSpec::parse("mean").is_err());
    }

    #[test]
    fn fake_values_are_deterministic() {
        let w = WorkloadDef::new(vec!["pipe".into()]).unwrap();
        let c = Configuration::parse("a", "fake.mean=10").unwrap();
        let values = |seed| {
            let mut f = FakeExecutor::new(FakeSpec::parse("").unwrap(), seed);
            f.configure(&c).unwrap();
            (0..5)
                .map(|i| {
                    let ctx = RunContext {
                        experiment_id: 1,
                        configuration: 0,
                        workload: 0,
                        round: 1,
                        position: 0,
                        warmup: false,
                        sequence: i,
                    };
                    f.run(&w, &ctx).unwrap().metrics[0].value
                })
                .collect::<Vec<f64>>()
        };
        assert_eq!(values(1), values(1));
        assert_ne!(values(1), values(2));
        assert!(values(1).iter().all(|v| (*v - 10.0).abs() < 6.0));
    }
}
