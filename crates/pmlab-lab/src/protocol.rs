//! The measurement protocol: validate, snapshot, one discarded warm-up per configuration and
//! workload, then rounds in which every (configuration, workload) runs once in an order shuffled
//! per round from the recorded seed; stop adaptively or on the budget; restore always.
//!
//! Stopping rules, checked after each complete round once `min_rounds` (≥ 3) rounds are done:
//! - **precision**: every unit's 95% CI half-width of its primary metric is below `target_ci`
//!   of its mean (units that never succeeded after 3 tries are left out);
//! - **decided** (when `stop_when_decided`, with ≥ 2 configurations, not for sweeps, whose knee
//!   needs precision around the best value): every configuration's
//!   change against the reference has a **99.9%** Fieller CI that excludes 0. The stricter level
//!   pays for looking after every round (Bonferroni over up to 50 looks keeps the overall false
//!   positive rate of this early stop under 5%); the verdict is still reported at 95%;
//! - **budget**: `max_runs` measured runs (default 30 rounds) or `max_time` wall time;
//! - **interrupted**: the stop flag (set by SIGINT/SIGTERM/SIGHUP in the CLI) ends the
//!   experiment between runs; the runs so far stay in the store, marked incomplete.
//!
//! With workload groups ([`Experiment::groups`]) the shuffle is over (configuration, group)
//! steps, and a step runs its group's workloads back to back. A run failing with
//! [`RunError::Fatal`] is stored and ends the experiment.
//!
//! Order of calls on the executor: validate → snapshot → setup hook → for every run
//! (configure → prepare hook → settle → run) → cleanup hook → restore. Restore runs on every
//! exit path. The settle (`Budget::settle`) is idle time on the machine before each run.
//! The early "decided" stop also needs each compared pair to be one population (one regime,
//! one mode: `crate::populations`); mixed runs go on to the budget.

use crate::executor::{ExecError, Executor, HookKind, RunContext, RunError, RunOutput};
use crate::populations;
use crate::spec::{Budget, Experiment, Kind, Order, DEFAULT_MAX_ROUNDS, MIN_ROUNDS};
use crate::stats::{self, Summary};
use crate::store::{now_ns, ExperimentStatus, NewRun, RunStatus, Store, StoreError};
use pmlab_kernel::error_chain;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Confidence level of the early "decided" stop (see module docs).
pub(crate) const DECIDED_CONFIDENCE: f64 = 0.999;
/// A unit that failed this many times without a single success no longer holds up the stop.
const FAILING_AFTER: usize = 3;

/// Why the protocol stopped.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Every CI half-width under the target.
    TargetReached,
    /// Every comparison with the reference decided (99.9% CI excludes 0).
    Decided,
    /// The run budget (`max_runs`) was used up.
    MaxRuns,
    /// The time budget (`max_time`) was used up.
    MaxTime,
    /// Sequential order runs a fixed number of rounds.
    FixedRounds,
    /// Every unit failed repeatedly.
    AllFailing,
    /// A signal stopped the experiment.
    Interrupted,
    /// An error outside a single run (store, configuration hook).
    Error(String),
}

impl StopReason {
    /// Why the experiment stopped, in words, with the budget's numbers.
    pub fn describe(&self, budget: &Budget) -> String {
        match self {
            StopReason::TargetReached => {
                format!(
                    "target reached: every 95% CI half-width < {}% of the mean",
                    fmt_pct(budget.target_ci)
                )
            }
            StopReason::Decided => {
                "decided: every difference from the reference is significant at 99.9%".into()
            }
            // No precision target: a fixed number of runs (the hotplug lab's cycles).
            StopReason::MaxRuns if budget.target_ci <= 0.0 => "all runs done".into(),
            StopReason::MaxRuns => "budget spent: --max-runs reached before the target CI".into(),
            StopReason::MaxTime => "budget spent: --max-time reached before the target CI".into(),
            StopReason::FixedRounds => "fixed number of rounds (sequential order)".into(),
            StopReason::AllFailing => "every configuration keeps failing".into(),
            StopReason::Interrupted => "interrupted".into(),
            StopReason::Error(e) => format!("error: {e}"),
        }
    }

    fn status(&self) -> ExperimentStatus {
        match self {
            StopReason::Interrupted | StopReason::Error(_) => ExperimentStatus::Incomplete,
            _ => ExperimentStatus::Complete,
        }
    }
}

fn fmt_pct(x: f64) -> String {
    let s = format!("{:.3}", x * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Errors that end an experiment.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// Refused before anything ran or was stored.
    #[error(transparent)]
    Invalid(#[from] ExecError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The machine could not be restored: the experiment's own outcome is in `outcome`.
    #[error("restoring the machine failed: {error}")]
    Restore {
        /// Why the restore failed.
        error: String,
        /// The experiment's outcome.
        outcome: Box<Outcome>,
    },
}

/// A snapshot of the protocol's state, for progress bars.
#[derive(Debug, Clone)]
pub struct Progress {
    /// The current round.
    pub round: usize,
    /// The round is the warm-up.
    pub warmup: bool,
    /// Measured runs done (warm-ups not counted) and the run budget.
    pub runs: usize,
    /// The run budget.
    pub max_runs: usize,
    /// Measured runs so far that did not end ok.
    pub failed: usize,
    /// Time since the experiment started.
    pub elapsed: Duration,
    /// Estimated time left; None: not known yet.
    pub eta: Option<Duration>,
    /// Per unit: label and relative 95% CI half-width (NaN until 2 values).
    pub ci: Vec<(String, f64)>,
    /// Target relative CI half-width.
    pub target_ci: f64,
}

impl Progress {
    /// Where the experiment is, for a progress bar's prefix: `warm-up` or `round N`.
    pub fn stage(&self) -> String {
        if self.warmup {
            "warm-up".to_string()
        } else {
            format!("round {}", self.round)
        }
    }

    /// The ETA, each unit's CI against the target (the widest alone when they do not fit in
    /// 60 columns) and the failed runs: a progress bar's message.
    pub fn status(&self) -> String {
        let cis: Vec<String> = self
            .ci
            .iter()
            .map(|(l, w)| match w.is_finite() {
                true => format!("{l} ±{:.1}%", w * 100.0),
                false => format!("{l} -"),
            })
            .collect();
        let mut cis_text = cis.join(", ");
        if cis_text.chars().count() > 60 {
            let widest = self
                .ci
                .iter()
                .map(|(_, w)| *w)
                .filter(|w| w.is_finite())
                .fold(0.0, f64::max);
            cis_text = format!("widest CI ±{:.1}%", widest * 100.0);
        }
        let eta = self
            .eta
            .map(|e| format!("ETA {}  ", fmt_eta(e)))
            .unwrap_or_default();
        let failed = match self.failed {
            0 => String::new(),
            n => format!("  {n} failed"),
        };
        let target = self.target_ci * 100.0;
        format!("{eta}CI {cis_text} (target ±{target:.1}%){failed}")
    }
}

/// `1h02m` or `3m07s`.
fn fmt_eta(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// Receives progress; the CLI draws a bar with it.
pub trait Observer {
    /// Called after each run with the protocol's state.
    fn progress(&mut self, progress: &Progress);
    /// Whether [`Observer::progress`] is wanted at all: its CIs and ETA take t quantiles per
    /// unit, work the protocol skips between runs when nobody reads it.
    fn wants_progress(&self) -> bool {
        true
    }
    /// A run failed (the experiment goes on).
    fn run_failed(&mut self, _label: &str, _error: &str) {}
}

/// An observer that ignores everything.
pub struct Silent;
impl Observer for Silent {
    fn progress(&mut self, _: &Progress) {}
    fn wants_progress(&self) -> bool {
        false
    }
}

/// How an experiment ended.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The experiment's id in the store.
    pub experiment_id: i64,
    /// Why it stopped.
    pub stop: StopReason,
    /// Why it stopped, in words.
    pub stop_description: String,
    /// Rounds run.
    pub rounds: usize,
    /// Measured runs (warm-ups not counted).
    pub runs: usize,
    /// Measured runs that did not end ok.
    pub failed: usize,
    /// Wall time of the experiment.
    pub elapsed: Duration,
}

/// One (configuration, workload) pair.
#[derive(Debug, Clone, Copy)]
struct Unit {
    configuration: usize,
    workload: usize,
}

struct State {
    units: Vec<Unit>,
    samples: Vec<Vec<f64>>,
    /// The regime of each sample, as the run reported it.
    regimes: Vec<Vec<Option<pmlab_workload::Regime>>>,
    /// What others took of the workload's CPUs during each sample's run.
    disturbances: Vec<Vec<Option<pmlab_stats::disturbance::RunDisturbance>>>,
    failures: Vec<usize>,
    measured: usize,
    failed: usize,
    sequence: usize,
    rounds_done: usize,
    round_durations: Vec<Duration>,
    run_durations: Vec<Duration>,
}

/// Run an experiment to its end, storing every run as it completes. `stop` is polled between runs.
pub fn run_experiment(
    store: &mut Store,
    executor: &mut dyn Executor,
    experiment: &Experiment,
    budget: &Budget,
    command: &str,
    stop: &AtomicBool,
    observer: &mut dyn Observer,
) -> Result<Outcome, ProtocolError> {
    executor.validate(experiment)?;
    let system = executor.snapshot(experiment);
    let ids = store.create_experiment(experiment, budget, command, &system)?;
    let started = Instant::now();
    let units: Vec<Unit> = (0..experiment.workloads.len())
        .flat_map(|w| {
            (0..experiment.configurations.len()).map(move |c| Unit {
                configuration: c,
                workload: w,
            })
        })
        .collect();
    let mut state = State {
        samples: vec![Vec::new(); units.len()],
        regimes: vec![Vec::new(); units.len()],
        disturbances: vec![Vec::new(); units.len()],
        failures: vec![0; units.len()],
        units,
        measured: 0,
        failed: 0,
        sequence: 0,
        rounds_done: 0,
        round_durations: Vec::new(),
        run_durations: Vec::new(),
    };
    let mut setup_done = false;
    let stop_reason = measure(
        store,
        executor,
        experiment,
        budget,
        &ids,
        stop,
        observer,
        &mut state,
        started,
        &mut setup_done,
    );
    let stop_reason = stop_reason.unwrap_or_else(|e| StopReason::Error(e.to_string()));
    // Cleanup (if setup ran) and restore, whatever happened.
    let mut restore_error = None;
    if setup_done {
        if let Some(cmd) = &experiment.hooks.cleanup {
            if let Err(e) = executor.hook(HookKind::Cleanup, cmd) {
                restore_error = Some(error_chain(&e));
            }
        }
    }
    if let Err(e) = executor.restore() {
        restore_error = Some(e.to_string());
    }
    // An interruption that arrived during the last run still makes the experiment incomplete.
    let stop_reason =
        if stop.load(Ordering::SeqCst) && stop_reason.status() == ExperimentStatus::Complete {
            StopReason::Interrupted
        } else {
            stop_reason
        };
    let description = stop_reason.describe(budget);
    store.finish_experiment(ids.experiment, stop_reason.status(), &description)?;
    let outcome = Outcome {
        experiment_id: ids.experiment,
        stop: stop_reason,
        stop_description: description,
        rounds: state.rounds_done,
        runs: state.measured,
        failed: state.failed,
        elapsed: started.elapsed(),
    };
    match restore_error {
        Some(error) => Err(ProtocolError::Restore {
            error,
            outcome: Box::new(outcome),
        }),
        None => Ok(outcome),
    }
}

#[allow(clippy::too_many_arguments)]
fn measure(
    store: &mut Store,
    executor: &mut dyn Executor,
    experiment: &Experiment,
    budget: &Budget,
    ids: &crate::store::ExperimentIds,
    stop: &AtomicBool,
    observer: &mut dyn Observer,
    state: &mut State,
    started: Instant,
    setup_done: &mut bool,
) -> Result<StopReason, StoreError> {
    let n_units = state.units.len();
    let max_runs = budget
        .max_runs
        .unwrap_or(DEFAULT_MAX_ROUNDS * n_units)
        .max(1);
    let min_rounds = budget.min_rounds.max(MIN_ROUNDS);
    let mut rng = ChaCha8Rng::seed_from_u64(budget.seed);

    if stop.load(Ordering::SeqCst) {
        return Ok(StopReason::Interrupted);
    }
    if let Some(cmd) = &experiment.hooks.setup {
        *setup_done = true;
        if let Err(e) = executor.hook(HookKind::Setup, cmd) {
            return Ok(StopReason::Error(error_chain(&e)));
        }
    } else {
        *setup_done = true;
    }

    // The schedule: a list of rounds, each a list of unit indices, produced lazily. A step
    // is a (configuration, workload group) pair; units are indexed workload-major.
    let n_configs = experiment.configurations.len();
    let steps: Vec<Vec<usize>> = experiment
        .workload_groups()
        .iter()
        .flat_map(|g| (0..n_configs).map(move |c| g.iter().map(|&w| w * n_configs + c).collect()))
        .collect();
    let sequential_rounds = (max_runs / n_units).max(1);
    let mut round = if budget.warmup { 0 } else { 1 };
    loop {
        let warmup = round == 0;
        if !warmup {
            if budget.order == Order::Sequential {
                if round > 1 {
                    return Ok(StopReason::FixedRounds);
                }
            } else if let Some(reason) =
                should_stop(experiment, budget, state, min_rounds, max_runs, started)
            {
                return Ok(reason);
            }
        }
        // Run order of this "round": its steps shuffled, each step's units back to back.
        // Sequential: one pass over the steps, each repeated; `rep` counts the repeats.
        let order: Vec<(usize, usize)> = match (budget.order, warmup) {
            (Order::Sequential, false) => steps
                .iter()
                .flat_map(|s| {
                    (0..sequential_rounds).flat_map(move |r| s.iter().map(move |&u| (u, r)))
                })
                .collect(),
            _ => {
                let mut o: Vec<&Vec<usize>> = steps.iter().collect();
                o.shuffle(&mut rng);
                o.into_iter().flatten().map(|&u| (u, 0)).collect()
            }
        };
        let round_started = Instant::now();
        for (position, &(u, rep)) in order.iter().enumerate() {
            if stop.load(Ordering::SeqCst) {
                return Ok(StopReason::Interrupted);
            }
            if !warmup && state.measured >= max_runs {
                return Ok(StopReason::MaxRuns);
            }
            if budget.max_time.is_some_and(|t| started.elapsed() >= t) {
                return Ok(StopReason::MaxTime);
            }
            let unit = state.units[u];
            let (run_round, run_position) = match (budget.order, warmup) {
                (Order::Sequential, false) => (rep + 1, u),
                _ => (round, position),
            };
            let context = RunContext {
                experiment_id: ids.experiment,
                configuration: unit.configuration,
                workload: unit.workload,
                round: run_round,
                position: run_position,
                warmup,
                sequence: state.sequence,
            };
            state.sequence += 1;
            let configuration = &experiment.configurations[unit.configuration];
            let workload = &experiment.workloads[unit.workload];
            let started_ns = now_ns();
            let t0 = Instant::now();
            let result = (|| -> Result<RunOutput, RunError> {
                executor.configure(configuration)?;
                if let Some(cmd) = &experiment.hooks.prepare {
                    executor.hook(HookKind::Prepare, cmd)?;
                }
                executor.settle(budget.settle)?;
                executor.run(workload, &context)
            })();
            let fatal = matches!(result, Err(RunError::Fatal(_)));
            let result = result.map_err(|e| error_chain(&e));
            let duration = t0.elapsed();
            let interrupted = stop.load(Ordering::SeqCst);
            let (status, error, output) = match result {
                Ok(o) if o.metrics.is_empty() => (
                    RunStatus::Failed,
                    Some("the workload reported no metric".to_string()),
                    None,
                ),
                Ok(o) => (RunStatus::Ok, None, Some(o)),
                Err(e) if interrupted => (RunStatus::Interrupted, Some(e), None),
                Err(e) => (RunStatus::Failed, Some(e), None),
            };
            let output = output.unwrap_or_default();
            if !warmup {
                state.measured += 1;
                state.run_durations.push(duration);
                match status {
                    RunStatus::Ok => {
                        state.samples[u].push(output.metrics[0].value);
                        state.regimes[u].push(pmlab_workload::Regime::of_result(&output.metrics));
                        state.disturbances[u].push(
                            pmlab_stats::disturbance::RunDisturbance::of_metrics(
                                output
                                    .side_metrics
                                    .iter()
                                    .map(|m| (m.name.as_str(), m.cpu, m.value)),
                            ),
                        );
                    }
                    _ => {
                        state.failed += 1;
                        state.failures[u] += 1;
                    }
                }
            }
            if status == RunStatus::Failed {
                observer.run_failed(
                    &unit_label(experiment, unit),
                    error.as_deref().unwrap_or(""),
                );
            }
            let fatal = fatal.then(|| error.clone().unwrap_or_default());
            store.insert_run(&NewRun {
                experiment: ids.experiment,
                configuration: ids.configurations[unit.configuration],
                workload: ids.workloads[unit.workload],
                round: run_round,
                position: run_position,
                warmup,
                started_ns,
                duration_ns: duration.as_nanos() as i64,
                status,
                error,
                metrics: output.metrics,
                side_metrics: output.side_metrics,
                trace_path: output.trace_path,
            })?;
            if observer.wants_progress() {
                observer.progress(&progress(
                    experiment, budget, state, round, warmup, max_runs, started, min_rounds,
                ));
            }
            if let Some(e) = fatal {
                return Ok(StopReason::Error(e));
            }
        }
        if !warmup {
            state.rounds_done = if budget.order == Order::Sequential {
                sequential_rounds
            } else {
                round
            };
            state.round_durations.push(round_started.elapsed());
        }
        round += 1;
    }
}

impl State {
    fn runs(&self, u: usize) -> Vec<populations::Run> {
        self.samples[u]
            .iter()
            .zip(&self.regimes[u])
            .zip(&self.disturbances[u])
            .map(|((&value, &regime), &disturbance)| populations::Run {
                value,
                regime,
                disturbance,
            })
            .collect()
    }
}

fn unit_label(experiment: &Experiment, unit: Unit) -> String {
    let c = &experiment.configurations[unit.configuration].label;
    if experiment.workloads.len() > 1 {
        format!("{c} / {}", experiment.workloads[unit.workload].label)
    } else {
        c.clone()
    }
}

fn is_failing(state: &State, u: usize) -> bool {
    state.samples[u].is_empty() && state.failures[u] >= FAILING_AFTER
}

/// The stopping rules, checked at a round boundary.
fn should_stop(
    experiment: &Experiment,
    budget: &Budget,
    state: &State,
    min_rounds: usize,
    max_runs: usize,
    started: Instant,
) -> Option<StopReason> {
    let n_units = state.units.len();
    if state.measured >= max_runs || (state.measured > 0 && state.measured + n_units > max_runs) {
        return Some(StopReason::MaxRuns);
    }
    if let Some(max_time) = budget.max_time {
        let mean_round = mean_duration(&state.round_durations);
        if started.elapsed() + mean_round.unwrap_or_default() > max_time {
            return Some(StopReason::MaxTime);
        }
    }
    if state.rounds_done < min_rounds {
        return None;
    }
    if (0..n_units).all(|u| is_failing(state, u)) {
        return Some(StopReason::AllFailing);
    }
    let precise = (0..n_units).filter(|&u| !is_failing(state, u)).all(|u| {
        Summary::of(&state.samples[u])
            .is_some_and(|s| s.n >= 2 && s.relative_half_width() < budget.target_ci)
    });
    if precise {
        return Some(StopReason::TargetReached);
    }
    // Sweeps need precision around the best value to place the knee: no early "decided" stop.
    if budget.stop_when_decided
        && experiment.configurations.len() >= 2
        && experiment.kind != Kind::Sweep
        && experiment.swept.is_empty()
    {
        let decided = state.units.iter().enumerate().all(|(u, unit)| {
            if unit.configuration == experiment.reference {
                return true;
            }
            let Some(r) = state.units.iter().position(|x| {
                x.workload == unit.workload && x.configuration == experiment.reference
            }) else {
                return false;
            };
            // A decision across regimes or modes is no decision (`crate::populations`), nor
            // one that what else ran could explain (`pmlab_stats::disturbance`).
            let (ra, ua) = (state.runs(r), state.runs(u));
            populations::comparable(&ra, &ua)
                && stats::relative_change(&state.samples[r], &state.samples[u], DECIDED_CONFIDENCE)
                    .is_some_and(|c| {
                        c.excludes_zero()
                            && !pmlab_stats::disturbance::could_explain(&ra, &ua, c.low, c.high)
                    })
        });
        if decided {
            return Some(StopReason::Decided);
        }
    }
    None
}

fn mean_duration(ds: &[Duration]) -> Option<Duration> {
    if ds.is_empty() {
        None
    } else {
        Some(ds.iter().sum::<Duration>() / ds.len() as u32)
    }
}

#[allow(clippy::too_many_arguments)]
fn progress(
    experiment: &Experiment,
    budget: &Budget,
    state: &State,
    round: usize,
    warmup: bool,
    max_runs: usize,
    started: Instant,
    min_rounds: usize,
) -> Progress {
    let ci: Vec<(String, f64)> = state
        .units
        .iter()
        .enumerate()
        .map(|(u, unit)| {
            let w = Summary::of(&state.samples[u])
                .filter(|s| s.n >= 2)
                .map_or(f64::NAN, |s| s.relative_half_width());
            (unit_label(experiment, *unit), w)
        })
        .collect();
    // Runs still needed: for each unit, n such that t·s/√n < target·mean, at least min_rounds.
    let eta = mean_duration(&state.run_durations).map(|per_run| {
        let mut rounds_needed = min_rounds;
        for (u, samples) in state.samples.iter().enumerate() {
            if is_failing(state, u) {
                continue;
            }
            let needed = match Summary::of(samples).filter(|s| s.n >= 2) {
                Some(s) if s.mean != 0.0 => {
                    let t = stats::student_t_quantile(0.975, (s.n - 1).max(1) as f64);
                    ((t * s.stddev / (budget.target_ci * s.mean.abs())).powi(2)).ceil() as usize
                }
                _ => DEFAULT_MAX_ROUNDS,
            };
            rounds_needed = rounds_needed.max(needed);
        }
        let runs_needed = rounds_needed
            .saturating_mul(state.units.len())
            .min(max_runs);
        let mut eta = per_run * runs_needed.saturating_sub(state.measured) as u32;
        if let Some(t) = budget.max_time {
            eta = eta.min(t.saturating_sub(started.elapsed()));
        }
        eta
    });
    Progress {
        round,
        warmup,
        runs: state.measured,
        max_runs,
        failed: state.failed,
        elapsed: started.elapsed(),
        eta,
        ci,
        target_ci: budget.target_ci,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::{FakeExecutor, FakeSpec, RunOutput};
    use crate::spec::{Configuration, Hooks, Kind, WorkloadDef};
    use crate::system::SystemSnapshot;

    fn experiment(configs: &[(&str, &str)]) -> Experiment {
        Experiment::new(
            Kind::Compare,
            "t".into(),
            configs
                .iter()
                .map(|(l, k)| Configuration::parse(l, k).unwrap())
                .collect(),
            vec![WorkloadDef::new(vec!["pipe".into()]).unwrap()],
            None,
        )
        .unwrap()
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("t.db")).unwrap();
        (dir, s)
    }

    fn verdict(store: &Store, id: i64) -> crate::stats::Comparison {
        let e = store.load(id).unwrap();
        stats::compare(
            &e.samples(0, 0, "fake.time"),
            &e.samples(0, 1, "fake.time"),
            pmlab_kernel::Direction::Lower,
            true,
        )
    }

    /// A compare of a bimodal reference (`fake.mode2` with share `p`) with a unimodal sample,
    /// its verdict read back as reports make it.
    fn bimodal_compare(fake: &str, a: &str, b: &str) -> crate::stats::Comparison {
        let (_d, mut store) = store();
        let exp = experiment(&[("a", a), ("b", b)]);
        let budget = Budget {
            seed: 3,
            max_runs: Some(20),
            target_ci: 1e-9,
            settle: Duration::ZERO,
            ..Budget::default()
        };
        let mut fake = FakeExecutor::new(FakeSpec::parse(fake).unwrap(), 3);
        let out = run_experiment(
            &mut store,
            &mut fake,
            &exp,
            &budget,
            "t",
            &AtomicBool::new(false),
            &mut Silent,
        )
        .unwrap();
        assert_eq!(
            out.runs, 20,
            "a mixed population never stops early as decided"
        );
        let e = store.load(out.experiment_id).unwrap();
        populations::compare(
            &e.runs_of(0, 0, "fake.time"),
            &e.runs_of(0, 1, "fake.time"),
            pmlab_kernel::Direction::Lower,
            true,
        )
    }

    #[test]
    fn named_regimes_give_a_verdict_only_within_one() {
        // Half of a's runs in each regime (40 on two CPUs, 5 on one); b always on two CPUs.
        let c = bimodal_compare(
            "sd=0.5,regimes=1",
            "fake.mean=40 fake.mode2=5 fake.mode2_share=0.5",
            "fake.mean=7",
        );
        assert_eq!(c.by_regime.len(), 1, "{}", c.verdict);
        assert_eq!(c.by_regime[0].regime, Some(pmlab_workload::Regime::TwoCpus));
        assert!(c.verdict.contains("within two CPUs runs"), "{}", c.verdict);
        // The change is the within-regime one (7 against 40), not across both (7 against ~22).
        let rel = c.relative.unwrap().change;
        assert!((rel - (7.0 / 40.0 - 1.0)).abs() < 0.02, "{rel}");
    }

    #[test]
    fn regimes_with_nothing_in_common_are_inconclusive() {
        // a always on two CPUs, b always on one.
        let c = bimodal_compare(
            "sd=0.5,regimes=1",
            "fake.mean=40",
            "fake.mean=7 fake.mode2=5 fake.mode2_share=1",
        );
        assert_eq!(c.outcome, crate::stats::Outcome::Inconclusive);
        assert!(
            c.verdict.starts_with("inconclusive: mixed regimes"),
            "{}",
            c.verdict
        );
    }

    #[test]
    fn an_unnamed_bimodal_metric_is_inconclusive() {
        let c = bimodal_compare(
            "sd=0.5",
            "fake.mean=40 fake.mode2=5 fake.mode2_share=0.5",
            "fake.mean=7",
        );
        assert_eq!(c.outcome, crate::stats::Outcome::Inconclusive);
        assert!(c.verdict.contains("bimodal"), "{}", c.verdict);
    }

    #[test]
    fn the_machine_settles_before_every_run() {
        struct Settles(Vec<String>);
        impl Executor for Settles {
            fn validate(&mut self, _: &Experiment) -> Result<(), ExecError> {
                Ok(())
            }
            fn snapshot(&mut self, _: &Experiment) -> SystemSnapshot {
                SystemSnapshot::default()
            }
            fn configure(&mut self, _: &Configuration) -> Result<(), ExecError> {
                self.0.push("configure".into());
                Ok(())
            }
            fn settle(&mut self, d: Duration) -> Result<(), RunError> {
                self.0.push(format!("settle {}", d.as_millis()));
                Ok(())
            }
            fn run(&mut self, _: &WorkloadDef, _: &RunContext) -> Result<RunOutput, RunError> {
                self.0.push("run".into());
                Ok(one_metric())
            }
            fn restore(&mut self) -> Result<(), ExecError> {
                Ok(())
            }
        }
        let (_d, mut store) = store();
        let exp = experiment(&[("a", ""), ("b", "")]);
        let budget = Budget {
            max_runs: Some(6),
            target_ci: 1e-9,
            settle: Duration::from_millis(150),
            ..Budget::default()
        };
        let mut exec = Settles(Vec::new());
        let out = run_experiment(
            &mut store,
            &mut exec,
            &exp,
            &budget,
            "t",
            &AtomicBool::new(false),
            &mut Silent,
        )
        .unwrap();
        // Two warm-ups and six runs, each: configure, settle, run.
        let expected: Vec<String> = (0..8)
            .flat_map(|_| ["configure", "settle 150", "run"].map(String::from))
            .collect();
        assert_eq!(exec.0, expected);
        let e = store.load(out.experiment_id).unwrap();
        assert_eq!(e.info.settle_s, Some(0.15));
    }

    #[test]
    fn warmup_then_shuffled_rounds_with_recorded_seed() {
        let (_d, mut store) = store();
        let exp = experiment(&[("a", ""), ("b", ""), ("c", "")]);
        let budget = Budget {
            seed: 7,
            max_runs: Some(15),
            stop_when_decided: false,
            target_ci: 1e-9,
            ..Budget::default()
        };
        let mut fake = FakeExecutor::new(FakeSpec::parse("").unwrap(), 7);
        let out = run_experiment(
            &mut store,
            &mut fake,
            &exp,
            &budget,
            "test",
            &AtomicBool::new(false),
            &mut Silent,
        )
        .unwrap();
        assert_eq!(out.stop, StopReason::MaxRuns);
        assert_eq!(out.runs, 15);
        let e = store.load(out.experiment_id).unwrap();
        assert_eq!(e.info.seed, 7);
        let warm: Vec<_> = e.runs.iter().filter(|r| r.warmup).collect();
        assert_eq!(warm.len(), 3, "one warm-up per configuration");
        assert!(e.runs[..3].iter().all(|r| r.warmup && r.round == 0));
        // Every round runs each configuration exactly once; orders differ between rounds.
        let mut orders = Vec::new();
        for round in 1..=5 {
            let mut o: Vec<usize> = e
                .runs
                .iter()
                .filter(|r| r.round == round && !r.warmup)
                .map(|r| r.configuration)
                .collect();
            orders.push(o.clone());
            o.sort();
            assert_eq!(o, vec![0, 1, 2]);
        }
        assert!(
            orders.iter().any(|o| o != &orders[0]),
            "orders are shuffled: {orders:?}"
        );
        // Same seed, same schedule.
        let mut fake = FakeExecutor::new(FakeSpec::parse("").unwrap(), 7);
        let out2 = run_experiment(
            &mut store,
            &mut fake,
            &exp,
            &budget,
            "test",
            &AtomicBool::new(false),
            &mut Silent,
        )
        .unwrap();
        let e2 = store.load(out2.experiment_id).unwrap();
        let sched = |e: &crate::store::StoredExperiment| {
            e.runs
                .iter()
                .map(|r| (r.round, r.configuration))
                .collect::<Vec<_>>()
        };
        assert_eq!(sched(&e), sched(&e2));
        assert_eq!(e.samples(0, 1, "fake.time"), e2.samples(0, 1, "fake.time"));
    }

    #[test]
    fn adaptive_stop_on_target_ci() {
        let (_d, mut store) = store();
        let exp = experiment(&[("a", ""), ("b", "")]);
        let budget = Budget {
            seed: 1,
            target_ci: 0.01,
            stop_when_decided: false,
            ..Budget::default()
        };
        let mut fake = FakeExecutor::new(FakeSpec::parse("sd=1").unwrap(), 1);
        let out = run_experiment(
            &mut store,
            &mut fake,
            &exp,
            &budget,
            "t",
            &AtomicBool::new(false),
            &mut Silent,
        )
        .unwrap();
        assert_eq!(out.stop, StopReason::TargetReached);
        assert!(out.rounds >= 3 && out.rounds < 30, "{out:?}");
        let e = store.load(out.experiment_id).unwrap();
        for c in 0..2 {
            let s = Summary::of(&e.samples(0, c, "fake.time")).unwrap();
            assert!(s.relative_half_width() < 0.01);
        }
        // Noisier data needs more rounds.
        let mut fake = FakeExecutor::new(FakeSpec::parse("sd=2").unwrap(), 1);
        let out2 = run_experiment(
            &mut store,
            &mut fake,
            &exp,
            &budget,
            "t",
            &AtomicBool::new(false),
            &mut Silent,
        )
        .unwrap();
        assert!(
            out2.rounds > out.rounds,
            "{} vs {}",
            out2.rounds,
            out.rounds
        );
    }

    #[test]
    fn big_difference_stops_early_as_decided() {
        let (_d, mut store) = store();
        let exp = experiment(&[("a", "fake.mean=100"), ("b", "fake.mean=130")]);
        let budget = Budget {
            seed: 3,
            target_ci: 0.001,
            ..Budget::default()
        };
        let mut fake = FakeExecutor::new(FakeSpec::parse("sd=3").unwrap(), 3);
        let out = run_experiment(
            &mut store,
            &mut fake,
            &exp,
            &budget,
            "t",
            &AtomicBool::new(false),
            &mut Silent,
        )
        .unwrap();
        assert_eq!(out.stop, StopReason::Decided);
        assert!(out.rounds <= 5, "{out:?}");
        assert_eq!(
            verdict(&store, out.experiment_id).outcome,
            crate::stats::Outcome::Worse
        );
    }

    #[test]
    fn max_time_budget() {
        let (_d, mut store) = store();
        let exp = experiment(&[("a", ""), ("b", "")]);
        let budget = Budget {
            seed: 1,
            target_ci: 1e-9,
            max_time: Some(Duration::from_millis(150)),
            stop_when_decided: false,
            ..Budget::default()
        };
        let mut fake = FakeExecutor::new(FakeSpec::parse("sleep_ms=10").unwrap(), 1);
        let out = run_experiment(
            &mut store,
            &mut fake,
            &exp,
            &budget,
            "t",
            &AtomicBool::new(false),
            &mut Silent,
        )
        .unwrap();
        assert_eq!(out.stop, StopReason::MaxTime);
        assert!(
            out.elapsed < Duration::from_millis(400),
            "{:?}",
            out.elapsed
        );
    }

    /// Regression guard for honesty: same configuration twice must rarely be called different.
    #[test]
    fn aa_false_positive_rate_is_near_nominal() {
        let (_d, mut store) = store();
        let exp = experiment(&[("a", ""), ("b", "")]);
        let trials = 200;
        let mut positives = 0;
        for seed in 0..trials {
            let budget = Budget {
                seed,
                ..Budget::default()
            };
            let mut fake = FakeExecutor::new(FakeSpec::parse("sd=2").unwrap(), seed);
            let out = run_experiment(
                &mut store,
                &mut fake,
                &exp,
                &budget,
                "t",
                &AtomicBool::new(false),
                &mut Silent,
            )
            .unwrap();
            if verdict(&store, out.experiment_id).outcome
                != crate::stats::Outcome::NoSignificantChange
            {
                positives += 1;
            }
        }
        // Nominal 5%; allow binomial noise (sd ≈ 1.5%) but catch a broken test or stop rule.
        eprintln!("A/A false positives: {positives}/{trials}");
        assert!(positives <= 18, "{positives}/{trials} false positives");
    }

    #[test]
    fn interleaving_cancels_linear_drift() {
        let (_d, mut store) = store();
        let exp = experiment(&[("a", ""), ("b", "")]);
        let fake_spec = "sd=0.5,drift=0.2";
        for order in [Order::Interleaved, Order::Sequential] {
            let budget = Budget {
                seed: 11,
                order,
                max_runs: Some(40),
                target_ci: 1e-9,
                stop_when_decided: false,
                ..Budget::default()
            };
            let mut fake = FakeExecutor::new(FakeSpec::parse(fake_spec).unwrap(), 11);
            let out = run_experiment(
                &mut store,
                &mut fake,
                &exp,
                &budget,
                "t",
                &AtomicBool::new(false),
                &mut Silent,
            )
            .unwrap();
            assert_eq!(out.runs, 40);
            let v = verdict(&store, out.experiment_id);
            match order {
                Order::Interleaved => assert_eq!(
                    v.outcome,
                    crate::stats::Outcome::NoSignificantChange,
                    "{}",
                    v.verdict
                ),
                Order::Sequential => assert_ne!(
                    v.outcome,
                    crate::stats::Outcome::NoSignificantChange,
                    "{}",
                    v.verdict
                ),
            }
        }
    }

    #[test]
    fn failed_run_is_recorded_and_experiment_goes_on() {
        let (_d, mut store) = store();
        let exp = experiment(&[("a", ""), ("b", "")]);
        let budget = Budget {
            seed: 1,
            max_runs: Some(10),
            target_ci: 1e-9,
            stop_when_decided: false,
            ..Budget::default()
        };
        let mut fake = FakeExecutor::new(FakeSpec::parse("fail_at=4").unwrap(), 1);
        let out = run_experiment(
            &mut store,
            &mut fake,
            &exp,
            &budget,
            "t",
            &AtomicBool::new(false),
            &mut Silent,
        )
        .unwrap();
        assert_eq!((out.runs, out.failed), (10, 1));
        let e = store.load(out.experiment_id).unwrap();
        let failed: Vec<_> = e
            .runs
            .iter()
            .filter(|r| r.status == RunStatus::Failed)
            .collect();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].error.as_deref(), Some("fake failure in run 4"));
        assert_eq!(e.info.status, ExperimentStatus::Complete);
    }

    #[test]
    fn always_failing_configuration_does_not_block_the_stop() {
        let (_d, mut store) = store();
        let exp = experiment(&[("a", ""), ("b", "fake.fail=1")]);
        let budget = Budget {
            seed: 1,
            stop_when_decided: false,
            ..Budget::default()
        };
        let mut fake = FakeExecutor::new(FakeSpec::parse("sd=0.5").unwrap(), 1);
        let out = run_experiment(
            &mut store,
            &mut fake,
            &exp,
            &budget,
            "t",
            &AtomicBool::new(false),
            &mut Silent,
        )
        .unwrap();
        assert_eq!(out.stop, StopReason::TargetReached);
        let exp = experiment(&[("a", "fake.fail=1")]);
        let out = run_experiment(
            &mut store,
            &mut fake,
            &exp,
            &budget,
            "t",
            &AtomicBool::new(false),
            &mut Silent,
        )
        .unwrap();
        assert_eq!(out.stop, StopReason::AllFailing);
    }

    #[test]
    fn unknown_knob_is_refused_before_anything() {
        let (_d, mut store) = store();
        let exp = experiment(&[("a", ""), ("b", "nosuch.knob=1")]);
        let mut fake = FakeExecutor::new(FakeSpec::parse("").unwrap(), 1);
        let err = run_experiment(
            &mut store,
            &mut fake,
            &exp,
            &Budget::default(),
            "t",
            &AtomicBool::new(false),
            &mut Silent,
        )
        .unwrap_err();
        let chain = pmlab_kernel::error_chain(&err);
        assert!(
            chain.contains("configuration `b`") && chain.contains("unknown knob `nosuch.knob`"),
            "{chain}"
        );
        assert!(fake.events.is_empty());
        assert!(store.list().unwrap().is_empty());
    }

    /// A run's output with one metric.
    fn one_metric() -> RunOutput {
        RunOutput {
            metrics: vec![pmlab_kernel::Metric::new(
                "m",
                1.0,
                "s",
                pmlab_kernel::Direction::Lower,
            )],
            ..Default::default()
        }
    }

    /// An executor that records the order of calls and stops the experiment after `stop_after` runs.
    struct Recorder<'a> {
        calls: Vec<String>,
        stop_after: Option<(usize, &'a AtomicBool)>,
        runs: usize,
    }

    impl Executor for Recorder<'_> {
        fn validate(&mut self, _: &Experiment) -> Result<(), ExecError> {
            self.calls.push("validate".into());
            Ok(())
        }
        fn snapshot(&mut self, _: &Experiment) -> SystemSnapshot {
            self.calls.push("snapshot".into());
            SystemSnapshot::default()
        }
        fn configure(&mut self, c: &Configuration) -> Result<(), ExecError> {
            self.calls.push(format!("configure {}", c.label));
            Ok(())
        }
        fn run(&mut self, _: &WorkloadDef, ctx: &RunContext) -> Result<RunOutput, RunError> {
            self.calls.push(if ctx.warmup {
                "warmup".into()
            } else {
                "run".into()
            });
            self.runs += 1;
            if let Some((n, flag)) = self.stop_after {
                if self.runs == n {
                    flag.store(true, Ordering::SeqCst);
                }
            }
            Ok(one_metric())
        }
        fn hook(&mut self, kind: HookKind, _: &str) -> Result<(), crate::executor::HookError> {
            self.calls.push(kind.as_str().into());
            Ok(())
        }
        fn restore(&mut self) -> Result<(), ExecError> {
            self.calls.push("restore".into());
            Ok(())
        }
    }

    #[test]
    fn hooks_run_in_order() {
        let (_d, mut store) = store();
        let mut exp = experiment(&[("a", "")]);
        exp.hooks = Hooks {
            setup: Some("s".into()),
            prepare: Some("p".into()),
            cleanup: Some("c".into()),
        };
        let budget = Budget {
            max_runs: Some(3),
            stop_when_decided: false,
            target_ci: 1e-9,
            ..Budget::default()
        };
        let mut rec = Recorder {
            calls: Vec::new(),
            stop_after: None,
            runs: 0,
        };
        run_experiment(
            &mut store,
            &mut rec,
            &exp,
            &budget,
            "t",
            &AtomicBool::new(false),
            &mut Silent,
        )
        .unwrap();
        let mut expected: Vec<String> = [
            "validate",
            "snapshot",
            "setup",
            "configure a",
            "prepare",
            "warmup",
        ]
        .map(String::from)
        .to_vec();
        for _ in 0..3 {
            expected.extend(["configure a", "prepare", "run"].map(String::from));
        }
        expected.extend(["cleanup", "restore"].map(String::from));
        assert_eq!(rec.calls, expected);
    }

    #[test]
    fn interruption_restores_and_marks_incomplete() {
        let (_d, mut store) = store();
        let mut exp = experiment(&[("a", ""), ("b", "")]);
        exp.hooks.cleanup = Some("c".into());
        let flag = AtomicBool::new(false);
        let mut rec = Recorder {
            calls: Vec::new(),
            stop_after: Some((5, &flag)),
            runs: 0,
        };
        let out = run_experiment(
            &mut store,
            &mut rec,
            &exp,
            &Budget::default(),
            "t",
            &flag,
            &mut Silent,
        )
        .unwrap();
        assert_eq!(out.stop, StopReason::Interrupted);
        assert_eq!(
            rec.calls[rec.calls.len() - 2..],
            ["cleanup".to_string(), "restore".to_string()]
        );
        let e = store.load(out.experiment_id).unwrap();
        assert_eq!(e.info.status, ExperimentStatus::Incomplete);
        assert_eq!(e.runs.len(), 5, "the runs so far are kept");
    }

    /// Records (configuration, workload, round, position) of each run; fails fatally at run `fatal_at`.
    struct GroupRecorder {
        current: String,
        runs: Vec<(String, usize, usize, usize)>,
        fatal_at: Option<usize>,
        restored: bool,
    }

    impl Executor for GroupRecorder {
        fn validate(&mut self, _: &Experiment) -> Result<(), ExecError> {
            Ok(())
        }
        fn snapshot(&mut self, _: &Experiment) -> SystemSnapshot {
            SystemSnapshot::default()
        }
        fn configure(&mut self, c: &Configuration) -> Result<(), ExecError> {
            self.current = c.label.clone();
            Ok(())
        }
        fn run(&mut self, _: &WorkloadDef, ctx: &RunContext) -> Result<RunOutput, RunError> {
            self.runs
                .push((self.current.clone(), ctx.workload, ctx.round, ctx.position));
            if self.fatal_at == Some(self.runs.len()) {
                return Err(RunError::Fatal(ExecError::Invalid(
                    "the machine refused".into(),
                )));
            }
            Ok(one_metric())
        }
        fn restore(&mut self) -> Result<(), ExecError> {
            self.restored = true;
            Ok(())
        }
    }

    fn grouped() -> Experiment {
        let w = |a: &str| WorkloadDef::new(vec!["pipe".into(), a.into()]).unwrap();
        Experiment::new(
            Kind::RunSpec,
            "g".into(),
            vec![
                Configuration::parse("a", "").unwrap(),
                Configuration::parse("b", "").unwrap(),
            ],
            vec![
                w("--loops=1"),
                w("--loops=2"),
                w("--loops=3"),
                w("--loops=4"),
            ],
            None,
        )
        .unwrap()
        .with_groups(vec![vec![0, 1], vec![2, 3]])
        .unwrap()
    }

    /// The grouped experiment run by a [`GroupRecorder`]: its store, executor and outcome.
    fn run_grouped(
        budget: &Budget,
        fatal_at: Option<usize>,
    ) -> (tempfile::TempDir, Store, GroupRecorder, Outcome) {
        let (d, mut store) = store();
        let mut ex = GroupRecorder {
            current: String::new(),
            runs: Vec::new(),
            fatal_at,
            restored: false,
        };
        let stop = AtomicBool::new(false);
        let out = run_experiment(
            &mut store,
            &mut ex,
            &grouped(),
            budget,
            "t",
            &stop,
            &mut Silent,
        )
        .unwrap();
        (d, store, ex, out)
    }

    #[test]
    fn a_group_runs_back_to_back_in_one_configuration_and_steps_are_shuffled() {
        let budget = Budget {
            max_runs: Some(5 * 8),
            target_ci: 0.0,
            stop_when_decided: false,
            warmup: false,
            seed: 3,
            ..Budget::default()
        };
        let (_d, store, ex, out) = run_grouped(&budget, None);
        assert_eq!(out.stop, StopReason::MaxRuns);
        assert_eq!(ex.runs.len(), 40);
        let mut orders = std::collections::BTreeSet::new();
        for round in ex.runs.chunks(8) {
            // Pairs: a group's first workload, then its second, in the same configuration.
            for pair in round.chunks(2) {
                assert_eq!(pair[0].0, pair[1].0, "{round:?}");
                assert!(
                    matches!((pair[0].1, pair[1].1), (0, 1) | (2, 3)),
                    "{round:?}"
                );
                assert_eq!(pair[0].3 + 1, pair[1].3);
            }
            let mut units: Vec<(String, usize)> =
                round.iter().map(|r| (r.0.clone(), r.1)).collect();
            units.sort();
            units.dedup();
            assert_eq!(units.len(), 8, "every unit once per round: {round:?}");
            orders.insert(round.iter().map(|r| (r.0.clone(), r.1)).collect::<Vec<_>>());
        }
        assert!(orders.len() > 1, "steps are shuffled per round");
        // Every run is stored where the executor was told it is.
        let e = store.load(out.experiment_id).unwrap();
        assert_eq!(e.runs.len(), 40);
    }

    #[test]
    fn bad_groups_are_refused() {
        let e = grouped()
            .with_groups(vec![vec![0, 1], vec![1, 2, 3]])
            .unwrap_err();
        assert!(e.to_string().contains("is in 2 groups"), "{e}");
        let e = grouped().with_groups(vec![vec![0, 1, 2]]).unwrap_err();
        assert!(e.to_string().contains("is in 0 groups"), "{e}");
        let e = grouped()
            .with_groups(vec![vec![0, 1, 2, 3, 9]])
            .unwrap_err();
        assert!(e.to_string().contains("no workload 9"), "{e}");
    }

    #[test]
    fn a_fatal_run_is_stored_and_ends_the_experiment_with_a_restore() {
        let budget = Budget {
            max_runs: Some(40),
            warmup: false,
            ..Budget::default()
        };
        let (_d, store, ex, out) = run_grouped(&budget, Some(3));
        assert_eq!(ex.runs.len(), 3, "nothing runs after the fatal one");
        assert!(ex.restored);
        assert_eq!(out.stop, StopReason::Error("the machine refused".into()));
        let e = store.load(out.experiment_id).unwrap();
        assert_eq!(e.runs.len(), 3);
        assert_eq!(e.runs[2].status, RunStatus::Failed);
    }
}
