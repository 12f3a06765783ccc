//! The lab object: the one way every command that changes or measures the machine
//! (`run`, `compare`, `sweep`, `run-spec`, `study`, `hotplug`, `record`, `knob set`) does
//! so. It owns the interrupt policy (one blocking signal watcher, one stop token, workload
//! cancellation, knob restore), the knob transaction, the side sources (counters, tracer,
//! an energy meter)
//! and running a [`WorkloadSpec`]: `run` is a plan of one configuration and one run,
//! experiments go through the protocol, the hotplug lab and the study get the stop token.

use crate::executor::{ExecError, Executor, FakeExecutor, FakeSpec, RunContext};
use crate::machine::{
    CounterSource, Knobs, MachineExecutor, NoKnobs, SideSource, TransactionKnobs,
};
use crate::protocol::{self, Observer, Outcome, ProtocolError};
use crate::spec::{Budget, Configuration, Experiment};
use crate::store::Store;
use crate::tracing::TraceSource;
use pmlab_kernel::knob::{self, Assignment, KnobError, KnobId, Transaction};
use pmlab_kernel::{Metric, Root};
use pmlab_workload::{WorkloadError, WorkloadResult, WorkloadSpec};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How long the main thread has, after the first SIGINT/SIGTERM/SIGHUP, to stop the
/// workload and restore by itself before the watcher restores the knobs and exits.
pub const GRACE: Duration = Duration::from_secs(10);

/// Why the lab refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The signal watcher could not be installed.
    #[error("installing the signal watcher")]
    Signals(#[source] std::io::Error),
    /// The knob transaction could not start (it needs root).
    #[error("starting a knob transaction (needs root)")]
    Transaction(#[source] KnobError),
    /// The knobs could not be restored.
    #[error("restoring the knobs")]
    Restore(#[source] KnobError),
    /// A knob was refused or could not be written.
    #[error(transparent)]
    Knob(#[from] KnobError),
    /// The executor refused or failed.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// The workload failed.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// `--trace` could not record.
    #[error(transparent)]
    Trace(#[from] crate::tracing::TraceSourceError),
    /// The recording could not start.
    #[error("starting the recording")]
    RecordStart(#[source] pmlab_trace::record::RecordError),
    /// The recording could not be finished.
    #[error("finishing the recording")]
    RecordStop(#[source] pmlab_trace::record::RecordError),
    /// The command is not an executable file; the command.
    #[error("command {0:?} is not an executable file")]
    NotExecutable(String),
    /// The command is not found in PATH; the command.
    #[error("command {0:?} not found in PATH")]
    NotInPath(String),
    /// The command could not be started: the command, and why.
    #[error("starting {0:?}")]
    Spawn(String, #[source] std::io::Error),
    /// Waiting for the command failed.
    #[error("waiting for the command")]
    Wait(#[source] std::io::Error),
    /// The energy meter could not be started.
    #[error("starting the energy meter")]
    Meter(#[from] crate::meter::MeterError),
    /// A signal stopped the run; the workload's workers were killed.
    #[error("interrupted: the workload's workers were killed")]
    Interrupted,
    /// `--reference` names no configuration of the experiment.
    #[error("--reference {label}: no configuration has that label (labels: {})", labels.join(", "))]
    NoReference {
        /// The label asked for.
        label: String,
        /// The experiment's configuration labels.
        labels: Vec<String>,
    },
    /// The result store could not be opened.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// The process-wide interrupt state: the stop token and who listens for signals.
struct Interrupts {
    stop: Arc<AtomicBool>,
    listeners: Mutex<Vec<Sender<i32>>>,
    grace: Mutex<Duration>,
}

static INTERRUPTS: OnceLock<Interrupts> = OnceLock::new();

/// What the signal watcher puts back before a forced exit besides knobs, meters and tracefs
/// instances (the terminal of `pmlab top`), registered by [`Lab::at_forced_exit`].
static AT_FORCED_EXIT: Mutex<Vec<fn()>> = Mutex::new(Vec::new());

/// A forced exit (a second signal, a zero grace, or the grace timer with knobs still live):
/// the registered functions, the meters, this process's tracefs instances, then the knobs.
fn forced_exit(sig: i32) -> ! {
    for f in AT_FORCED_EXIT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
    {
        f();
    }
    crate::meter::kill_live();
    for e in pmlab_kernel::tracefs::remove_live_instances() {
        eprintln!("pmlab: error: {e}");
    }
    pmlab_kernel::knob::restore_live_and_exit(sig)
}

/// Install the one signal watcher (once per process; later calls share it). It blocks in
/// `Signals::forever` and wakes only on a signal: then it sets the stop token, stops new
/// knob writes, cancels the running workload (its workers are killed), tells listeners, and
/// arms a one-shot grace timer; if knobs are still live when it fires (or on a second
/// signal) it restores them and exits with 128+signal. A zero grace restores and exits at once.
fn interrupts(grace: Duration) -> Result<&'static Interrupts, LabError> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    if let Some(i) = INTERRUPTS.get() {
        *i.grace.lock().unwrap_or_else(|e| e.into_inner()) = grace;
        return Ok(i);
    }
    pmlab_workload::cancel::init().map_err(LabError::Signals)?;
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(LabError::Signals)?;
    let state = INTERRUPTS.get_or_init(|| Interrupts {
        stop: Arc::new(AtomicBool::new(false)),
        listeners: Mutex::new(Vec::new()),
        grace: Mutex::new(grace),
    });
    std::thread::Builder::new()
        .name("pmlab-signals".into())
        .spawn(move || {
            let mut first = true;
            for sig in signals.forever() {
                pmlab_kernel::knob::request_stop();
                state.stop.store(true, Ordering::SeqCst);
                pmlab_workload::cancel::request();
                state
                    .listeners
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .retain(|l| l.send(sig).is_ok());
                let grace = *state.grace.lock().unwrap_or_else(|e| e.into_inner());
                if !first || grace.is_zero() {
                    forced_exit(sig);
                }
                first = false;
                // One timer after the first signal (not a periodic wake).
                let _ = std::thread::Builder::new()
                    .name("pmlab-grace".into())
                    .spawn(move || {
                        std::thread::sleep(grace);
                        if pmlab_kernel::knob::has_live_journals() {
                            forced_exit(sig);
                        }
                    });
            }
        })
        .map_err(LabError::Signals)?;
    Ok(state)
}

/// Where a run's side metrics come from besides the counters.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// Record a trace of every run's measured part beside this store, with these events
    /// (empty: the analyses' set).
    pub trace: Option<(PathBuf, Vec<String>)>,
    /// An external energy meter read around every run's measured part.
    pub meter: Option<crate::meter::MeterSpec>,
    /// Before each run, wait for a quiet machine (`--wait-quiet`).
    pub wait_quiet: Option<crate::quiet::WaitQuiet>,
}

/// One `pmlab run`: the workload's result and the side metrics around its measured part.
pub struct OneRun {
    /// The workload's result.
    pub result: WorkloadResult,
    /// Side metrics around the measured part (counters, traces, energy).
    pub side_metrics: Vec<Metric>,
    /// What the knob transaction repaired of dead sessions, and knobs that do nothing here.
    pub notes: Vec<String>,
}

/// One knob file after `knob set`.
#[derive(Debug, Clone)]
pub struct KnobChange {
    /// Canonical name (`cpuidle.POLL.disable@1`).
    pub knob: String,
    /// Its value now.
    pub value: String,
    /// Its value before, when it could be read.
    pub was: Option<String>,
}

/// What [`Lab::set_knobs`] did.
#[derive(Debug, Clone)]
pub struct KnobsSet {
    /// Every knob file written, with its old and new value.
    pub changes: Vec<KnobChange>,
    /// What was repaired of dead sessions first.
    pub recovered: Vec<String>,
    /// Knobs that do nothing here (for example a disabled state no CPU enters).
    pub notes: Vec<String>,
}

/// The lab: see the module documentation.
#[derive(Clone)]
pub struct Lab {
    root: Root,
    interrupts: &'static Interrupts,
}

impl Lab {
    /// The lab on the machine (`/`), with the interrupt policy installed.
    pub fn open() -> Result<Lab, LabError> {
        Lab::at(Root::system(), GRACE)
    }

    /// The lab under `root` (a fake tree in tests) with this grace after a first signal
    /// (zero: restore and exit at once, for commands that only write knobs).
    pub fn at(root: Root, grace: Duration) -> Result<Lab, LabError> {
        Ok(Lab {
            root,
            interrupts: interrupts(grace)?,
        })
    }

    /// The stop token: set by the first signal; loops check it between steps.
    pub fn stop_token(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.interrupts.stop)
    }

    /// Whether a signal asked to stop.
    pub fn interrupted(&self) -> bool {
        self.interrupts.stop.load(Ordering::SeqCst)
    }

    /// Call `f` before a forced exit (a second signal): for what must be put back even then,
    /// such as a terminal in raw mode. The first signal only sets the stop token.
    pub fn at_forced_exit(&self, f: fn()) {
        AT_FORCED_EXIT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(f);
    }

    /// Signal numbers as they arrive (for commands that wait on several events at once).
    pub fn signals(&self) -> Receiver<i32> {
        let (tx, rx) = channel();
        self.interrupts
            .listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tx);
        rx
    }

    /// The root the lab reads and writes under (`/`, or a fake tree).
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// A knob transaction; journals of dead pmlab processes are restored first (its
    /// `recovered` says what was repaired).
    pub fn transaction(&self) -> Result<Transaction, LabError> {
        Transaction::begin(&self.root).map_err(LabError::Transaction)
    }

    /// Knobs for an executor: the journaled transaction as root, else none (with the reason).
    pub fn knobs(&self) -> Box<dyn Knobs> {
        if pmlab_kernel::sysinfo::item::is_root() {
            Box::new(TransactionKnobs::new(self.root.clone()))
        } else {
            Box::new(NoKnobs {
                reason: "setting knobs needs root; only the machine as found (--a '' --b '') can \
                         be measured"
                    .into(),
            })
        }
    }

    /// Side sources: the tracer first (started first, stopped last: its cost stays outside
    /// the counter deltas), then the meter (started here; a stream's wait for the sample
    /// that closes a run's window stays outside the counter deltas), then the counters.
    pub(crate) fn side_sources(
        &self,
        sources: &Sources,
    ) -> Result<Vec<Box<dyn SideSource>>, LabError> {
        let mut v: Vec<Box<dyn SideSource>> = Vec::new();
        if let Some((db, events)) = &sources.trace {
            v.push(Box::new(TraceSource::new(
                self.root.clone(),
                db,
                events.clone(),
            )?));
        }
        if let Some(m) = &sources.meter {
            v.push(Box::new(crate::meter::MeterSource::start(m)?));
        }
        v.push(Box::new(CounterSource::new(self.root_path())));
        // Last: its window around the measured part holds the least of the others' reads.
        v.push(Box::new(crate::disturbance::DisturbanceSource::new(
            self.root_path(),
        )));
        Ok(v)
    }

    fn root_path(&self) -> PathBuf {
        self.root.path("/")
    }

    /// `pmlab knob set`: validate every assignment before any write, apply them in one
    /// journaled transaction and keep it (`pmlab knob restore` undoes it). Journals of dead
    /// pmlab processes are restored first ([`KnobsSet::recovered`]).
    pub fn set_knobs(&self, assignments: &[Assignment]) -> Result<KnobsSet, LabError> {
        knob::validate(&self.root, assignments)?;
        let names: Vec<&KnobId> = assignments.iter().map(Assignment::knob).collect();
        let before: Vec<Vec<(String, String)>> = names
            .iter()
            .map(|n| knob::read_all(&self.root, n).unwrap_or_default())
            .collect();
        let mut t = self.transaction()?;
        let recovered = t.recovered.clone();
        t.apply(assignments)?;
        let mut changes = Vec::new();
        for (n, old) in names.iter().zip(before) {
            for (k, v) in knob::read_all(&self.root, n)? {
                let was = old.iter().find(|(o, _)| *o == k).map(|(_, v)| v.clone());
                changes.push(KnobChange {
                    knob: k,
                    value: v,
                    was,
                });
            }
        }
        t.keep();
        Ok(KnobsSet {
            changes,
            recovered,
            notes: knob::effect_notes(&self.root, assignments),
        })
    }

    /// The executor of this machine.
    pub fn machine_executor(&self, sources: &Sources) -> Result<MachineExecutor, LabError> {
        Ok(
            MachineExecutor::new(self.root_path(), self.knobs(), self.side_sources(sources)?)
                .waiting_quiet(sources.wait_quiet),
        )
    }

    /// The executor for an experiment: the fake one when a spec is given (tests), else the machine.
    pub fn executor(
        &self,
        fake: Option<&str>,
        seed: u64,
        sources: &Sources,
    ) -> Result<Box<dyn Executor>, LabError> {
        match fake {
            Some(f) => Ok(Box::new(FakeExecutor::new(FakeSpec::parse(f)?, seed))),
            None => Ok(Box::new(self.machine_executor(sources)?)),
        }
    }

    /// Run an experiment through the protocol, stopping on the lab's stop token.
    pub fn experiment(
        &self,
        store: &mut Store,
        executor: &mut dyn Executor,
        experiment: &Experiment,
        budget: &Budget,
        command: &str,
        observer: &mut dyn Observer,
    ) -> Result<Outcome, ProtocolError> {
        protocol::run_experiment(
            store,
            executor,
            experiment,
            budget,
            command,
            &self.interrupts.stop,
            observer,
        )
    }

    /// `pmlab run`: a plan of one configuration (the machine as found plus `knobs`) and
    /// one run, with counter side metrics (and `sources`' meter); the knobs are restored on
    /// every path.
    pub fn run_once(
        &self,
        spec: &WorkloadSpec,
        knobs: &[Assignment],
        settle: std::time::Duration,
        sources: &Sources,
    ) -> Result<OneRun, LabError> {
        spec.validate()?;
        if let Some(m) = &sources.meter {
            m.validate()?;
        }
        let mut notes = Vec::new();
        let knob_backend: Box<dyn Knobs> = if knobs.is_empty() {
            Box::new(NoKnobs {
                reason: String::new(),
            })
        } else {
            pmlab_kernel::knob::validate(&self.root, knobs)?;
            // Repair what a killed session left before anything is written.
            let mut t = self.transaction()?;
            notes.append(&mut t.recovered);
            Box::new(TransactionKnobs::new(self.root.clone()))
        };
        let mut exec = MachineExecutor::new(
            self.root_path(),
            knob_backend,
            self.side_sources(&Sources {
                trace: None,
                meter: sources.meter.clone(),
                wait_quiet: None,
            })?,
        );
        let configuration = Configuration {
            label: String::new(),
            knobs: knobs.to_vec(),
        };
        exec.configure(&configuration)?;
        notes.extend(pmlab_kernel::knob::effect_notes(&self.root, knobs));
        let out = match pmlab_workload::settle(pmlab_kernel::Nanos(settle.as_nanos() as u64)) {
            Ok(true) => Err(WorkloadError::Cancelled),
            Ok(false) => match sources.wait_quiet.map(|q| q.wait(&self.root_path())) {
                Some(Err(crate::quiet::QuietError::Cancelled)) => Err(WorkloadError::Cancelled),
                Some(Err(e)) => Err(WorkloadError::Probe(Box::new(e))),
                waited => exec.run_spec(spec, &RunContext::single()).map(|mut r| {
                    if let Some(Ok(w)) = waited {
                        r.1.extend(w.metrics());
                    }
                    r
                }),
            },
            Err(e) => Err(e),
        };
        exec.restore()?;
        match out {
            Ok((result, side_metrics, _)) => Ok(OneRun {
                result,
                side_metrics,
                notes,
            }),
            Err(WorkloadError::Cancelled) => Err(LabError::Interrupted),
            Err(e) => Err(e.into()),
        }
    }
}
