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
pub mod cputime;
mod gate;
mod idle;
mod messaging;
mod pipe;
pub mod placement;
pub mod spec;
mod spin;
pub mod supervised;
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
    /// Called right before the measured part starts; an error stops the run before it.
    fn before(&mut self) -> Result<(), ProbeError>;
    /// Called right after the measured part ends, before any clean-up.
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
    /// Latency histogram (1 µs buckets), for workloads that time each event (`wakeup`); None for the others.
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
    /// The spec or its options are refused before anything runs (the message says why).
    #[error("invalid workload: {0}")]
    Invalid(String),
    /// A system call of the workload's own set-up or clean-up failed.
    #[error("{what}")]
    Io {
        /// What was being done (e.g. "pipe").
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file the workload needed (e.g. `/dev/cpu_dma_latency`) could not be opened or written.
    #[error("{path}")]
    File {
        /// That file.
        path: std::path::PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A worker of a built-in workload (a thread or a forked process), on `cpu` when known.
    #[error("worker failed: {workload}{}", cpu.map(|c| format!(": CPU {c}")).unwrap_or_default())]
    Worker {
        /// Workload kind (`pipe`, `wakeup`, ...).
        workload: &'static str,
        /// The CPU the worker was pinned to; None when unpinned or unknown.
        cpu: Option<u32>,
        /// What went wrong in the worker.
        #[source]
        source: WorkerError,
    },
    /// A `cmd` program could not be started.
    #[error("cannot run `{program}`")]
    Spawn {
        /// The program (argv\[0\], or `/bin/sh` with `shell`).
        program: String,
        /// The OS error from spawning it.
        #[source]
        source: std::io::Error,
    },
    /// A `cmd` program ended with a non-zero status or a signal.
    #[error("`{program}` {status}; last lines of its stderr:\n{stderr_tail}")]
    CmdFailed {
        /// The program as given.
        program: String,
        /// How it ended, as text (`exited with status 2`, `was killed by signal 9`).
        status: String,
        /// The last lines of its stderr, for the error message.
        stderr_tail: String,
    },
    #[error(
        "--metric-regex '{regex}' did not match the output of `{program}`; its last lines:\n{tail}"
    )]
    /// A `cmd` metric regex matched nothing in the program's output.
    RegexNoMatch {
        /// The regex as given.
        regex: String,
        /// The program as given.
        program: String,
        /// The last lines of its output.
        tail: String,
    },
    /// Words that do not describe a workload (the parser's message says why).
    #[error("workload {words:?}: {message}")]
    Words {
        /// The words as given, joined by spaces.
        words: String,
        /// The parser's message.
        message: String,
    },
    /// A side measurement around the measured part (counters, the tracer) failed.
    #[error("side measurement")]
    Probe(#[source] ProbeError),
    /// Stopped by a signal or [`cancel::request`] before the measured part finished.
    #[error("interrupted")]
    Cancelled,
}

/// Why a worker of a built-in workload failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// `sched_setaffinity` to one CPU failed.
    #[error("pinning to CPU {cpu}")]
    Pin {
        /// The CPU number (kernel numbering).
        cpu: u32,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// `sched_setscheduler(SCHED_FIFO)` failed (not root, or RT throttled off).
    #[error("SCHED_FIFO priority {prio}")]
    Fifo {
        /// The priority asked for (1-99).
        prio: u32,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// `clock_nanosleep` failed with something other than EINTR.
    #[error("clock_nanosleep")]
    Sleep(#[source] std::io::Error),
    /// `waitpid` on a worker process failed.
    #[error("waitpid")]
    Wait(#[source] std::io::Error),
    /// The worker saw the cancel request and stopped early.
    #[error("interrupted")]
    Interrupted,
    /// The other side of a pipe pair closed its end (it died or failed).
    #[error("peer closed its pipe")]
    PeerClosed,
    /// A write to the other side's pipe was short or failed.
    #[error("write to the peer's pipe failed")]
    PeerWrite,
    /// A worker process did not exit with 0.
    #[error("worker process {pid}: {end}")]
    Process {
        /// Its PID.
        pid: i32,
        /// How it ended.
        end: ProcessEnd,
    },
    /// A worker thread panicked.
    #[error("thread panicked")]
    Panicked,
    /// A worker process ended before it reported itself ready, so the run never started.
    #[error("a worker died before it was ready")]
    DiedBeforeReady,
    /// A worker thread returned an error (the first cause is in the chain).
    #[error("a worker thread failed")]
    ThreadFailed,
    /// Several workers failed to set up (each with its cause chain).
    #[error("{}", .0.iter().map(|e| pmlab_kernel::error_chain(e)).collect::<Vec<_>>().join("; "))]
    Setup(Vec<WorkerError>),
}

/// How a worker process ended when it did not exit with 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProcessEnd {
    /// It exited with this status (non-zero).
    #[error("exited with status {0}")]
    Exit(i32),
    /// It was killed by this signal number.
    #[error("killed by signal {0}")]
    Signal(i32),
    /// Neither exit nor signal: the raw wait status.
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
