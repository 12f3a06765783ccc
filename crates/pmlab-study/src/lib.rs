//! `pmlab study`: the battery that adapts to the machine — idle baseline, idle-polling sweep,
//! cpuidle governors, CPU hotplug, wakeups, polling predicted from the wakeups trace,
//! CPU-bound runtime, the cpufreq driver's EPP or governors, the uncore frequency and guest
//! boots — each stage run through the experiment protocol (or the hotplug lab)
//! into the store, skipped with a stated reason where the machine cannot do it, and ending
//! with the HTML report.
#![forbid(unsafe_code)]

pub mod detect;
pub mod plan;
pub mod predict;
pub mod record;
pub mod sim;

// The lab's protocol and the data model under their own names (`crate::store::..`).
use pmlab_lab::{executor, protocol};
use pmlab_store::{spec, store, system};

use crate::executor::{ExecError, Executor};
use crate::protocol::{Observer, ProtocolError, StopReason};
use crate::store::{Store, StoreError};
pub use detect::Caps;
pub use plan::{Stage, StagePlan, Step};
use pmlab_hotplug::{self as hotplug, LabOptions, LoaderKind, Mitigation, Paths};
use pmlab_report::html::{self, StageNote, StageStatus};
pub use record::StudyRecord;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Study errors.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// The store could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The HTML report could not be written.
    #[error(transparent)]
    Html(#[from] html::HtmlError),
    /// Another failure, in words.
    #[error("{0}")]
    Other(String),
    /// `study:N` with N not a number.
    #[error("bad study id `{0}`")]
    BadStudyId(String),
    /// The store holds no such study.
    #[error("no such study in {}", .0.display())]
    NoStudy(PathBuf),
}

/// Why one step of a stage did not run to its end.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StepError {
    /// The lab could not make an executor.
    #[error(transparent)]
    Lab(#[from] pmlab_lab::lab::LabError),
    /// The store could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The experiment protocol failed.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// The hotplug lab failed.
    #[error(transparent)]
    Hotplug(#[from] pmlab_hotplug::HotplugError),
    /// The polling prediction failed.
    #[error(transparent)]
    Predict(#[from] predict::PredictError),
    /// The predicted-polling stage needs the wakeup stage, which did not run.
    #[error("the wakeup stage did not run here, and its trace is what is replayed")]
    NoWakeupStage,
    /// The boot lab refused or failed.
    #[error(transparent)]
    Boot(Box<pmlab_boot::BootError>),
}

impl StepError {
    /// The prediction has no traced wakeup run, or its trace lacks the events it needs.
    fn nothing_to_replay(&self) -> bool {
        matches!(
            self,
            StepError::NoWakeupStage
                | StepError::Predict(
                    predict::PredictError::NoTrace | predict::PredictError::Missing(_)
                )
        )
    }

    /// A knob this machine does not have: the stage is skipped, not failed.
    fn knob_unavailable(&self) -> bool {
        use pmlab_kernel::knob::KnobError;
        matches!(
            self,
            StepError::Protocol(ProtocolError::Invalid(
                ExecError::Configuration {
                    source: KnobError::Unknown { .. },
                    ..
                } | ExecError::Knob(KnobError::Unknown { .. })
            ))
        )
    }
}

/// What to run.
pub struct Options {
    /// `/`, or a fake tree (tests).
    pub root: PathBuf,
    /// The result store.
    pub db: PathBuf,
    /// Where the report goes (default: `pmlab-study-ID`).
    pub out: Option<PathBuf>,
    /// The quick battery (fewer runs and shorter workloads).
    pub quick: bool,
    /// Stages to run (empty: all).
    pub only: Vec<Stage>,
    /// Seed of the per-round shuffles and of the simulated machine.
    pub seed: u64,
    /// Set to stop the study (the lab's stop token).
    pub stop: Arc<AtomicBool>,
    /// The command line, recorded with the study.
    pub command: String,
}

/// Where the study is, for a progress bar.
#[derive(Debug, Clone)]
pub struct StageProgress {
    /// The stage's index in the study, from 0.
    pub index: usize,
    /// Number of stages in the study.
    pub total: usize,
    /// The stage running.
    pub stage: Stage,
    /// Share of the study's estimated time done (0..1) and the estimated time left.
    pub done: f64,
    /// Estimated time left.
    pub eta: Duration,
    /// What the stage is doing (e.g. `round 3, 12 runs`).
    pub message: String,
}

/// What the study needs from its caller (the CLI): executors and a place to show progress.
pub trait Host {
    /// A fresh executor for one experiment; `trace`: record a trace of every run.
    fn executor(&mut self, trace: bool) -> Result<Box<dyn Executor>, pmlab_lab::lab::LabError>;
    /// Show where the study is.
    fn progress(&mut self, p: &StageProgress);
    /// A line worth printing above the bar.
    fn note(&mut self, line: &str);
    /// Hotplug is run for real only when this is true (false for simulated machines).
    fn real_machine(&self) -> bool {
        true
    }
}

/// How the study ended.
pub struct Outcome {
    /// The study as stored.
    pub record: StudyRecord,
    /// The report's files.
    pub written: html::Written,
}

struct Clock {
    started: Instant,
    estimates: Vec<Duration>,
    index: usize,
    stage_started: Instant,
}

impl Clock {
    fn progress(&self, stage: Stage, within: f64, message: String) -> StageProgress {
        let total: f64 = self.estimates.iter().map(Duration::as_secs_f64).sum();
        let before: f64 = self.estimates[..self.index]
            .iter()
            .map(Duration::as_secs_f64)
            .sum();
        let cur = self.estimates[self.index].as_secs_f64();
        let done_s = before + cur * within.clamp(0.0, 1.0);
        let elapsed = self.started.elapsed().as_secs_f64();
        let left_est = (total - done_s).max(0.0);
        // Scale the estimate by how fast the study has gone so far.
        let speed = if done_s > 1.0 { elapsed / done_s } else { 1.0 };
        let _ = self.stage_started;
        StageProgress {
            index: self.index,
            total: self.estimates.len(),
            stage,
            done: if total > 0.0 { done_s / total } else { 0.0 },
            eta: Duration::from_secs_f64(left_est * speed.clamp(0.3, 5.0)),
            message,
        }
    }
}

struct StageObserver<'a> {
    host: &'a mut dyn Host,
    clock: &'a Clock,
    stage: Stage,
}

impl Observer for StageObserver<'_> {
    fn progress(&mut self, p: &protocol::Progress) {
        let within = if p.max_runs > 0 {
            p.runs as f64 / p.max_runs as f64
        } else {
            0.0
        };
        let msg = if p.warmup {
            "warm-up".to_string()
        } else {
            format!("round {}, {} runs", p.round, p.runs)
        };
        let pr = self.clock.progress(self.stage, within, msg);
        self.host.progress(&pr);
    }
    fn run_failed(&mut self, label: &str, error: &str) {
        self.host.note(&format!(
            "{}: run of {label} failed: {}",
            self.stage.as_str(),
            error.lines().next().unwrap_or("")
        ));
    }
}

impl hotplug::lab::Progress for StageObserver<'_> {
    fn begin(&mut self, _: u64) {}
    fn step(&mut self, message: &str) {
        let pr = self.clock.progress(self.stage, 0.5, message.to_string());
        self.host.progress(&pr);
    }
    fn finish(&mut self) {}
}

fn run_experiment_step(
    opts: &Options,
    host: &mut dyn Host,
    clock: &Clock,
    stage: Stage,
    experiment: &crate::spec::Experiment,
    budget: &crate::spec::Budget,
    trace: bool,
) -> Result<(i64, StopReason, String), StepError> {
    let mut exec = host.executor(trace)?;
    let mut store = Store::open(&opts.db)?;
    let mut obs = StageObserver { host, clock, stage };
    match protocol::run_experiment(
        &mut store,
        exec.as_mut(),
        experiment,
        budget,
        &opts.command,
        &opts.stop,
        &mut obs,
    ) {
        Ok(o) => Ok((o.experiment_id, o.stop, o.stop_description)),
        Err(e) => Err(e.into()),
    }
}

fn run_boot_step(
    opts: &Options,
    host: &mut dyn Host,
    clock: &Clock,
    p: &plan::BootPlan,
) -> Result<(i64, StopReason, String), StepError> {
    let boot = pmlab_boot::BootOptions {
        configs: p
            .cmdlines
            .iter()
            .map(|c| pmlab_boot::GuestConfig {
                label: None,
                kernel: p.kernel.clone(),
                cmdline: c.clone(),
            })
            .collect(),
        vcpus: p.vcpus.clone(),
        db: opts.db.clone(),
        ..Default::default()
    };
    let prepared = pmlab_boot::lab::prepare(&boot).map_err(|e| StepError::Boot(Box::new(e)))?;
    let mut exec = prepared.executor;
    let mut store = Store::open(&opts.db)?;
    let mut obs = StageObserver {
        host,
        clock,
        stage: Stage::Boot,
    };
    let o = protocol::run_experiment(
        &mut store,
        &mut exec,
        &prepared.experiment,
        &p.budget,
        &opts.command,
        &opts.stop,
        &mut obs,
    )?;
    Ok((o.experiment_id, o.stop, o.stop_description))
}

fn run_hotplug_step(
    opts: &Options,
    host: &mut dyn Host,
    clock: &Clock,
    p: &plan::HotplugPlan,
) -> Result<(i64, bool), StepError> {
    let paths = Paths::new(&opts.root);
    hotplug::check_cpus(&paths.sys_cpu(), &p.cpus)?;
    let lab = LabOptions {
        paths: paths.clone(),
        cpus: p.cpus.clone(),
        cycles: p.cycles,
        loads: p.loads.clone(),
        loader: LoaderKind::Wakeup,
        loader_command: match std::env::current_exe() {
            Ok(exe) => hotplug::LoaderCommand::pmlab_run(exe, LoaderKind::Wakeup),
            Err(_) => hotplug::LoaderCommand::system_tool(LoaderKind::Wakeup),
        },
        configurations: Mitigation::configurations(&[]),
        seed: opts.seed,
        trace: p.trace,
        stop: opts.stop.clone(),
    };
    let mut obs = StageObserver {
        host,
        clock,
        stage: Stage::Hotplug,
    };
    let mut store = Store::open(&opts.db)?;
    let result = hotplug::run_lab(&lab, &mut store, &opts.command, &mut obs)?;
    Ok((result.experiment, result.interrupted))
}

/// The polling-predicted stage: replay the wakeup stage's traced run; Err: why not.
fn predict_step(opts: &Options, done: &[StageNote]) -> Result<String, StepError> {
    let wakeups = done
        .iter()
        .find(|s| s.stage == Stage::Wakeups.as_str() && s.status == StageStatus::Done)
        .and_then(|s| s.experiments.first())
        .ok_or(StepError::NoWakeupStage)?;
    Ok(predict::predict(&opts.db, *wakeups)?)
}

/// Run the study, store it, and write its report.
pub fn run(opts: &Options, host: &mut dyn Host) -> Result<Outcome, StudyError> {
    let caps = Caps::detect(&opts.root);
    let stages: Vec<Stage> = Stage::ALL
        .iter()
        .copied()
        .filter(|s| opts.only.is_empty() || opts.only.contains(s))
        .collect();
    let mut plans: Vec<(Stage, StagePlan)> = stages
        .iter()
        .map(|&s| (s, plan::plan(s, &caps, opts.quick, opts.seed)))
        .collect();
    if !host.real_machine() {
        for (s, p) in plans.iter_mut() {
            if *s == Stage::Hotplug && matches!(p, StagePlan::Run { .. }) {
                *p = StagePlan::Skip("simulated machine: hotplug is not simulated".into());
            }
        }
    }
    let mut rec = StudyRecord {
        quick: opts.quick,
        command: opts.command.clone(),
        facts: caps.facts(),
        ..Default::default()
    };
    rec.id = record::save(&opts.db, &rec)?;
    rec.out_dir = opts
        .out
        .clone()
        .unwrap_or_else(|| record::default_out(rec.id))
        .display()
        .to_string();
    let clock_estimates = plans
        .iter()
        .map(|(_, p)| match p {
            StagePlan::Run { estimate, .. } => *estimate,
            StagePlan::Skip(_) => Duration::from_millis(10),
        })
        .collect();
    let mut clock = Clock {
        started: Instant::now(),
        estimates: clock_estimates,
        index: 0,
        stage_started: Instant::now(),
    };
    for (i, (stage, p)) in plans.iter().enumerate() {
        clock.index = i;
        clock.stage_started = Instant::now();
        let t0 = Instant::now();
        let mut note = StageNote {
            stage: stage.as_str().into(),
            status: StageStatus::Done,
            reason: String::new(),
            experiments: vec![],
            seconds: 0.0,
        };
        if opts.stop.load(Ordering::SeqCst) {
            note.status = StageStatus::Interrupted;
            note.reason = "not started: interrupted".into();
            rec.stages.push(note);
            continue;
        }
        host.progress(&clock.progress(*stage, 0.0, "starting".into()));
        match p {
            StagePlan::Skip(why) => {
                note.status = StageStatus::Skipped;
                note.reason = why.clone();
                host.note(&format!("{}: skipped — {why}", stage.as_str()));
            }
            StagePlan::Run { steps, notes, .. } => {
                let mut reasons = notes.clone();
                for step in steps {
                    let r = match step {
                        Step::Experiment {
                            experiment,
                            budget,
                            trace,
                        } => run_experiment_step(
                            opts, host, &clock, *stage, experiment, budget, *trace,
                        )
                        .map(|(id, stop, desc)| {
                            let interrupted = matches!(stop, StopReason::Interrupted);
                            if let StopReason::Error(e) = &stop {
                                reasons.push(format!("stopped on an error: {e}"));
                            } else {
                                reasons.push(desc);
                            }
                            (id, interrupted)
                        }),
                        Step::Hotplug(h) => run_hotplug_step(opts, host, &clock, h),
                        Step::Boot(b) => {
                            run_boot_step(opts, host, &clock, b).map(|(id, stop, desc)| {
                                reasons.push(desc);
                                (id, matches!(stop, StopReason::Interrupted))
                            })
                        }
                        Step::PredictPolling => {
                            match predict_step(opts, &rec.stages) {
                                Ok(sentence) => reasons.push(sentence),
                                Err(why) => {
                                    // Nothing to replay is a skip; a trace that cannot be
                                    // read or replayed is a failure.
                                    note.status = if why.nothing_to_replay() {
                                        StageStatus::Skipped
                                    } else {
                                        StageStatus::Failed
                                    };
                                    reasons.push(pmlab_kernel::error_chain(&why));
                                }
                            }
                            continue;
                        }
                    };
                    match r {
                        Ok((id, interrupted)) => {
                            note.experiments.push(id);
                            if interrupted {
                                note.status = StageStatus::Interrupted;
                            }
                        }
                        Err(e) if e.knob_unavailable() => {
                            note.status = StageStatus::Skipped;
                            reasons.push(pmlab_kernel::error_chain(&e));
                        }
                        Err(e) => {
                            let e = match e {
                                StepError::Protocol(ProtocolError::Restore { error, outcome }) => {
                                    format!(
                                        "experiment {} ran, but restoring the machine failed: {error}",
                                        outcome.experiment_id
                                    )
                                }
                                e => pmlab_kernel::error_chain(&e),
                            };
                            note.status = if opts.stop.load(Ordering::SeqCst) {
                                StageStatus::Interrupted
                            } else {
                                StageStatus::Failed
                            };
                            host.note(&format!("{}: {e}", stage.as_str()));
                            reasons.push(e);
                        }
                    }
                }
                note.reason = reasons.join("; ");
            }
        }
        note.seconds = t0.elapsed().as_secs_f64();
        rec.stages.push(note);
        record::save(&opts.db, &rec)?;
    }
    rec.interrupted = opts.stop.load(Ordering::SeqCst);
    record::save(&opts.db, &rec)?;
    let written = write_report(&opts.db, &rec, Path::new(&rec.out_dir))?;
    Ok(Outcome {
        record: rec,
        written,
    })
}

/// The report input of a stored study.
pub fn report_input(db: &Path, rec: &StudyRecord) -> Result<html::Input, StudyError> {
    let store = Store::open(db)?;
    let mut experiments = Vec::new();
    for s in &rec.stages {
        for id in &s.experiments {
            experiments.push(store.load(*id)?);
        }
    }
    Ok(html::Input {
        title: format!(
            "pmlab study #{}{}",
            rec.id,
            if rec.quick { " (quick)" } else { "" }
        ),
        experiments,
        stages: rec.stages.clone(),
        facts: rec.facts.clone(),
    })
}

/// What `pmlab report IDS` renders from the store at `db`, and the study's own directory: the
/// latest study (`study`, or no id while the store holds a study), study N (`study:N`), or
/// experiments by id (a number or `latest`; no id and no study: the latest experiment).
pub fn report_of(db: &Path, ids: &[String]) -> Result<(html::Input, Option<PathBuf>), StudyError> {
    let store = Store::open_existing(db)?;
    let study_id = match ids {
        [] => Some(None),
        [one] if one == "study" => Some(None),
        [one] => match one.strip_prefix("study:") {
            Some(n) => Some(Some(
                n.parse::<i64>()
                    .map_err(|_| StudyError::BadStudyId(one.clone()))?,
            )),
            None => None,
        },
        _ => None,
    };
    if let Some(id) = study_id {
        match record::load(db, id)? {
            Some(rec) => {
                let dir = PathBuf::from(&rec.out_dir);
                return Ok((report_input(db, &rec)?, Some(dir)));
            }
            None if !ids.is_empty() => return Err(StudyError::NoStudy(db.to_path_buf())),
            None => {}
        }
    }
    let ids = match ids {
        [] => vec![store.resolve_id("latest")?],
        ids => ids
            .iter()
            .map(|s| store.resolve_id(s))
            .collect::<Result<_, _>>()?,
    };
    let experiments = ids
        .iter()
        .map(|&id| store.load(id))
        .collect::<Result<Vec<_>, _>>()?;
    let title = match ids.as_slice() {
        [one] => format!("pmlab experiment {one}"),
        [a, b] => format!("pmlab experiments {a} vs {b}"),
        many => format!(
            "pmlab experiments {}",
            many.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let input = html::Input {
        title,
        experiments,
        stages: vec![],
        facts: vec![],
    };
    Ok((input, None))
}

/// Write the HTML report of a stored study into `dir`.
pub(crate) fn write_report(
    db: &Path,
    rec: &StudyRecord,
    dir: &Path,
) -> Result<html::Written, StudyError> {
    let input = report_input(db, rec)?;
    Ok(html::write(&input, dir)?)
}

/// The study as a method of the lab object, so that it stops on the lab's stop token.
pub trait StudyLab {
    /// Run the study's stages on `host`.
    fn study(&self, opts: Options, host: &mut dyn Host) -> Result<Outcome, StudyError>;
}

impl StudyLab for pmlab_lab::lab::Lab {
    fn study(&self, mut opts: Options, host: &mut dyn Host) -> Result<Outcome, StudyError> {
        opts.stop = self.stop_token();
        run(&opts, host)
    }
}
