//! pmlab-workload: built-in workloads (pipe, messaging, wakeup, spin, idle, cmd),
//! each returning typed metrics, primary first.
//!
//! Every workload calls `Probe::before()` right before and `Probe::after()` right after
//! its measured part, so that counter snapshots (side metrics) cover exactly that part.
//! Child processes are killed on every exit path: a guard kills their process group on
//! drop (errors and panics), `PR_SET_PDEATHSIG` kills them if pmlab dies, and
//! [`cancel::request`] (async-signal-safe) kills them from a signal handler.

pub mod args;
pub mod cancel;
mod children;
mod cmd;
mod cpus;
mod gate;
mod idle;
mod messaging;
mod pipe;
pub mod placement;
pub mod spec;
mod spin;
pub mod units;
mod wakeup;

use pmlab_kernel::{Metric, Nanos};
use serde::{Deserialize, Serialize};

pub use cmd::invoking_user;
pub use cpus::{allowed_cpus, parse_cpu_list, Affinity, AffinityGuard};
pub use placement::{Placement, Regime};
pub use spec::{CmdMetric, WorkloadSpec, DEFAULT_PIPE_LOOPS, KINDS};

/// Why a probe failed: its own error, with its causes.
pub type ProbeError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Called around the measured part of a workload (counter snapshots, trace start/stop).
pub trait Probe {
    fn before(&mut self) -> Result<(), ProbeError>;
    fn after(&mut self) -> Result<(), ProbeError>;
}

/// A probe that does nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProbe;

impl Probe for NoProbe {
    fn before(&mut self) -> Result<(), ProbeError> {
        Ok(())
    }
    fn after(&mut self) -> Result<(), ProbeError> {
        Ok(())
    }
}

/// A latency histogram with fixed-width buckets starting at zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// Width of each bucket.
    pub bucket: Nanos,
    /// `counts[i]` = samples in `[i*bucket, (i+1)*bucket)`.
    pub counts: Vec<u64>,
    /// Samples at or beyond `counts.len() * bucket`.
    pub overflow: u64,
}

/// What a workload measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkloadResult {
    /// Primary metric first.
    pub metrics: Vec<Metric>,
    /// Wall time of the measured part.
    pub wall: Nanos,
    pub histogram: Option<Histogram>,
}

impl WorkloadResult {
    /// The primary metric.
    pub fn primary(&self) -> &Metric {
        &self.metrics[0]
    }
}

/// Why a workload failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("invalid workload: {0}")]
    Invalid(String),
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}")]
    File {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A worker of a built-in workload (a thread or a forked process), on `cpu` when known.
    #[error("worker failed: {workload}{}", cpu.map(|c| format!(": CPU {c}")).unwrap_or_default())]
    Worker {
        workload: &'static str,
        cpu: Option<u32>,
        #[source]
        source: WorkerError,
    },
    #[error("cannot run `{program}`")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{program}` {status}; last lines of its stderr:\n{stderr_tail}")]
    CmdFailed {
        program: String,
        status: String,
        stderr_tail: String,
    },
    #[error(
        "--metric-regex '{regex}' did not match the output of `{program}`; its last lines:\n{tail}"
    )]
    RegexNoMatch {
        regex: String,
        program: String,
        tail: String,
    },
    /// Words that do not describe a workload (the parser's message says why).
    #[error("workload {words:?}: {message}")]
    Words { words: String, message: String },
    /// A side measurement around the measured part (counters, the tracer) failed.
    #[error("side measurement")]
    Probe(#[source] ProbeError),
    #[error("interrupted")]
    Cancelled,
}

/// Why a worker of a built-in workload failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("pinning to CPU {cpu}")]
    Pin {
        cpu: u32,
        #[source]
        source: std::io::Error,
    },
    #[error("SCHED_FIFO priority {prio}")]
    Fifo {
        prio: u32,
        #[source]
        source: std::io::Error,
    },
    #[error("clock_nanosleep")]
    Sleep(#[source] std::io::Error),
    #[error("waitpid")]
    Wait(#[source] std::io::Error),
    #[error("interrupted")]
    Interrupted,
    #[error("peer closed its pipe")]
    PeerClosed,
    #[error("write to the peer's pipe failed")]
    PeerWrite,
    #[error("worker process {pid}: {end}")]
    Process { pid: i32, end: ProcessEnd },
    #[error("thread panicked")]
    Panicked,
    #[error("a worker died before it was ready")]
    DiedBeforeReady,
    #[error("a worker thread failed")]
    ThreadFailed,
    /// Several workers failed to set up (each with its cause chain).
    #[error("{}", .0.iter().map(|e| pmlab_kernel::error_chain(e)).collect::<Vec<_>>().join("; "))]
    Setup(Vec<WorkerError>),
}

/// How a worker process ended when it did not exit with 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProcessEnd {
    #[error("exited with status {0}")]
    Exit(i32),
    #[error("killed by signal {0}")]
    Signal(i32),
    #[error("ended with wait status {0:#x}")]
    Status(i32),
}

impl WorkloadError {
    pub(crate) fn worker(workload: &'static str, cpu: Option<u32>, source: WorkerError) -> Self {
        WorkloadError::Worker {
            workload,
            cpu,
            source,
        }
    }
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        WorkloadError::Io {
            what: what.into(),
            source,
        }
    }
    pub(crate) fn last_os(what: impl Into<String>) -> Self {
        WorkloadError::io(what, std::io::Error::last_os_error())
    }
}

/// Let the machine settle before a measured run: one blocking wait on the cancellation pipe
/// (nothing of pmlab's wakes meanwhile). Returns true when cancellation was requested.
pub fn settle(duration: Nanos) -> Result<bool, WorkloadError> {
    cancel::init().map_err(|e| WorkloadError::io("cancel pipe", e))?;
    if duration.0 == 0 {
        return Ok(cancel::is_requested());
    }
    idle::wait(duration)
}

/// Run one workload; `probe` is called right around its measured part.
pub fn run(spec: &WorkloadSpec, probe: &mut dyn Probe) -> Result<WorkloadResult, WorkloadError> {
    spec.validate()?;
    cancel::init().map_err(|e| WorkloadError::io("cancel pipe", e))?;
    if cancel::is_requested() {
        return Err(WorkloadError::Cancelled);
    }
    match spec {
        WorkloadSpec::Pipe { loops, threads, .. } => {
            pipe::run(*loops, *threads, spec.pipe_sides()?, probe)
        }
        WorkloadSpec::Messaging {
            groups,
            loops,
            pipe,
            threads,
            placement,
        } => {
            // `same`: every worker inherits a one-CPU mask from here; the caller's is put back.
            let _restore =
                AffinityGuard::save().map_err(|e| WorkloadError::io("sched_getaffinity", e))?;
            if *placement == Placement::Same {
                let cpu = allowed_cpus().map_err(|e| WorkloadError::io("sched_getaffinity", e))?[0];
                Affinity::of(&[cpu])
                    .apply()
                    .map_err(|e| WorkloadError::io(format!("pinning to CPU {cpu}"), e))?;
            }
            messaging::run(*groups, *loops, *pipe, *threads, probe)
        }
        WorkloadSpec::Wakeup {
            cpus,
            interval,
            loops,
            duration,
            rt_prio,
            dma_latency,
        } => {
            let opts = wakeup::Options {
                cpus: cpus.clone(),
                interval: *interval,
                loops: *loops,
                duration: *duration,
                rt_prio: *rt_prio,
                dma_latency: *dma_latency,
            };
            wakeup::run(&opts, probe)
        }
        WorkloadSpec::Spin { cpus, work } => spin::run(cpus.as_deref(), *work, probe),
        WorkloadSpec::Idle { duration } => idle::run(*duration, probe),
        WorkloadSpec::Cmd { .. } => cmd::run(spec, probe),
    }
}

/// Name of the metric `run` reports first for this spec.
pub fn primary_metric_name(spec: &WorkloadSpec) -> &'static str {
    match spec {
        WorkloadSpec::Pipe { .. } => pipe::PRIMARY,
        WorkloadSpec::Messaging { .. } => messaging::PRIMARY,
        WorkloadSpec::Wakeup { .. } => wakeup::PRIMARY,
        WorkloadSpec::Spin { .. } => spin::PRIMARY,
        WorkloadSpec::Idle { .. } => idle::PRIMARY,
        WorkloadSpec::Cmd { metric, .. } => match metric {
            Some(m) => intern(&m.name),
            None => cmd::PRIMARY_WALL,
        },
    }
}

/// A `'static` copy of a user-chosen metric name, leaked once per distinct name.
fn intern(name: &str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut guard = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let set = guard.get_or_insert_with(HashSet::new);
    if let Some(s) = set.get(name) {
        return s;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    set.insert(leaked);
    leaked
}
