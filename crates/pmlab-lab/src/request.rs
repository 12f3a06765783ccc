//! What a command asks of the lab for one experiment (budget settings over a spec file's,
//! the seed, the reference by label, hook overrides, side sources) and the running of it:
//! everything checked before the store is opened, then the protocol.

use crate::executor::Executor;
use crate::lab::{Lab, LabError, Sources};
use crate::protocol::{Observer, Outcome, ProtocolError};
use crate::spec::{Budget, Experiment, Hooks, Order, RunSpec, DEFAULT_SETTLE};
use crate::store::Store;
use std::path::PathBuf;
use std::time::Duration;

/// A command's budget settings; `None` falls back to the spec file's, then to the default.
#[derive(Debug, Clone)]
pub struct BudgetRequest {
    /// Target 95% CI half-width as a fraction of the mean (default 0.01).
    pub target_ci: Option<f64>,
    /// At most this many measured runs.
    pub max_runs: Option<usize>,
    /// At most this much wall time.
    pub max_time: Option<Duration>,
    /// Seed of the per-round shuffles (default: from the clock, see [`clock_seed`]).
    pub seed: Option<u64>,
    /// Idle before each run (default [`DEFAULT_SETTLE`]).
    pub settle: Option<Duration>,
    /// Adaptive stops are considered from this round on.
    pub min_rounds: usize,
    /// Interleaved (the default) or sequential.
    pub order: Order,
    /// Stop once every comparison with the reference is decided.
    pub stop_when_decided: bool,
    /// Whether to run a discarded warm-up per configuration and workload (None: yes).
    pub warmup: Option<bool>,
}

impl BudgetRequest {
    /// The budget: this request's settings, then the spec file's, then the defaults.
    pub fn resolve(&self, file: Option<&RunSpec>) -> Budget {
        Budget {
            target_ci: self
                .target_ci
                .or(file.and_then(|f| f.target_ci))
                .unwrap_or(0.01),
            max_runs: self.max_runs.or(file.and_then(|f| f.max_runs)),
            max_time: self.max_time.or(file.and_then(|f| f.max_time)),
            min_rounds: self.min_rounds,
            seed: self
                .seed
                .or(file.and_then(|f| f.seed))
                .unwrap_or_else(clock_seed),
            order: self.order,
            stop_when_decided: self.stop_when_decided,
            warmup: self.warmup.unwrap_or(true),
            settle: self
                .settle
                .or(file.and_then(|f| f.settle))
                .unwrap_or(DEFAULT_SETTLE),
        }
    }
}

/// A seed from the clock and the process id, short enough to type back (under 10^9); it is
/// recorded with the experiment, so a run can be replayed in the same order.
pub fn clock_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    (t ^ u64::from(std::process::id()).rotate_left(32)) % 1_000_000_000
}

/// One experiment as a command asks for it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The result store (created when missing, only once everything else checked out).
    pub db: PathBuf,
    /// The reference configuration's label (default: the first configuration).
    pub reference: Option<String>,
    /// Hooks that replace the experiment's own where given.
    pub hooks: Hooks,
    /// Budget settings.
    pub budget: BudgetRequest,
    /// Tracer and meter around each run (ignored by the fake executor).
    pub sources: Sources,
    /// A fake executor's spec (tests), instead of the machine.
    pub fake_executor: Option<String>,
}

/// An experiment that ran: its store, the budget it had, and how the protocol ended.
pub struct Ran {
    /// The store the runs are in.
    pub store: Store,
    /// The budget, seed included.
    pub budget: Budget,
    /// The protocol's outcome; a `ProtocolError::Restore` still carries the outcome.
    pub result: Result<Outcome, ProtocolError>,
}

impl Lab {
    /// Run `experiment` as `request` asks, stopping on the lab's stop token. Bad input (an
    /// unknown reference, knobs or workloads this machine refuses, a meter that cannot start)
    /// is refused before the store is opened, so it changes nothing.
    pub fn run_request(
        &self,
        experiment: Experiment,
        request: &Request,
        file: Option<&RunSpec>,
        command: &str,
        observer: &mut dyn Observer,
    ) -> Result<Ran, LabError> {
        self.run_request_on(experiment, request, file, command, observer, None)
    }

    /// [`Lab::run_request`] on `executor` (another lab's: the boot lab's guests) instead of
    /// this machine's; `None`: the machine (or the request's fake executor).
    pub fn run_request_on(
        &self,
        mut experiment: Experiment,
        request: &Request,
        file: Option<&RunSpec>,
        command: &str,
        observer: &mut dyn Observer,
        executor: Option<Box<dyn Executor + '_>>,
    ) -> Result<Ran, LabError> {
        if let Some(label) = &request.reference {
            experiment.reference = experiment
                .configurations
                .iter()
                .position(|c| &c.label == label)
                .ok_or_else(|| LabError::NoReference {
                    label: label.clone(),
                    labels: experiment
                        .configurations
                        .iter()
                        .map(|c| c.label.clone())
                        .collect(),
                })?;
        }
        let h = &request.hooks;
        for (hook, value) in [
            (&mut experiment.hooks.setup, &h.setup),
            (&mut experiment.hooks.prepare, &h.prepare),
            (&mut experiment.hooks.cleanup, &h.cleanup),
        ] {
            if value.is_some() {
                *hook = value.clone();
            }
        }
        let budget = request.budget.resolve(file);
        let mut sources = request.sources.clone();
        if request.fake_executor.is_some() {
            sources.meter = None;
        }
        if sources.meter.is_some() {
            // Knobs and workloads are checked before the meter is started (it runs a command).
            self.executor(None, budget.seed, &Sources::default())?
                .validate(&experiment)?;
        }
        let mut exec = match executor {
            Some(e) => e,
            None => self.executor(request.fake_executor.as_deref(), budget.seed, &sources)?,
        };
        exec.validate(&experiment)?;
        let mut store = Store::open(&request.db)?;
        let result = self.experiment(
            &mut store,
            exec.as_mut(),
            &experiment,
            &budget,
            command,
            observer,
        );
        Ok(Ran {
            store,
            budget,
            result,
        })
    }
}
