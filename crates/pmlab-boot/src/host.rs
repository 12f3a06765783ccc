//! The host's side of a boot: its `kvm:kvm_exit`/`kvm:kvm_entry` events recorded by pmlab's
//! recorder while QEMU runs, with `sched_process_fork` to tell QEMU's threads (its vCPUs
//! among them) from any other VM's; and VM exits by reason of those threads as metrics
//! (`pmlab_analysis::kvm`, the table `pmlab analyze` prints for any trace with `kvm_exit`).

use crate::BootError;
use pmlab_kernel::{Direction, Metric, Root};
use pmlab_trace::record::{RecordOptions, Recorder};
use pmlab_trace::Trace;
use std::path::{Path, PathBuf};

/// What the host records during a boot.
pub const HOST_EVENTS: [&str; 3] = ["kvm:kvm_exit", "kvm:kvm_entry", "sched:sched_process_fork"];

/// The host's KVM module parameters a boot under KVM runs with (`halt_poll_ns=200000`, ...):
/// halt polling in the host decides how long a halted vCPU's thread spins before it sleeps.
pub fn kvm_parameters() -> Vec<String> {
    [
        "halt_poll_ns",
        "halt_poll_ns_grow",
        "halt_poll_ns_grow_start",
        "halt_poll_ns_shrink",
    ]
    .iter()
    .filter_map(|p| {
        let knob = pmlab_kernel::knob::KnobId::new(format!("kvm.{p}"));
        let v = pmlab_kernel::knob::read(&Root::system(), &knob).ok()?;
        Some(format!("{p}={v}"))
    })
    .collect()
}

/// Check, before any boot, that this host can record the events (tracefs, the kvm module's
/// tracepoints).
pub fn check() -> Result<(), BootError> {
    let dir = pmlab_kernel::tracefs::tracefs_dir(&Root::system())
        .map_err(|e| BootError::HostTrace(e.into()))?;
    let specs: Vec<String> = HOST_EVENTS.iter().map(|s| s.to_string()).collect();
    pmlab_trace::record::resolve_events(&dir, &specs).map_err(BootError::HostTrace)?;
    Ok(())
}

/// A recording of the host's events for one boot.
pub struct HostRecording {
    recorder: Recorder,
    path: PathBuf,
}

impl HostRecording {
    /// Start recording into `path` (before QEMU starts, so its threads' forks are seen).
    pub fn start(path: &Path) -> Result<HostRecording, BootError> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| BootError::Io {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        let opts = RecordOptions {
            events: HOST_EVENTS.iter().map(|s| s.to_string()).collect(),
            output: path.to_path_buf(),
            ..RecordOptions::default()
        };
        let recorder = Recorder::start(&Root::system(), opts).map_err(BootError::HostTrace)?;
        Ok(HostRecording {
            recorder,
            path: path.to_path_buf(),
        })
    }

    /// Stop (QEMU has exited) and read the VM exits of `qemu_pid`'s threads.
    pub fn finish(self, qemu_pid: u32) -> Result<Vec<Metric>, BootError> {
        let summary = self.recorder.stop().map_err(BootError::HostTrace)?;
        let trace = pmlab_trace::open(&self.path).map_err(|e| BootError::Results {
            what: format!("decoding {}", self.path.display()),
            source: Box::new(e),
        })?;
        let mut m = exit_metrics(&trace, qemu_pid as i32)?;
        m.push(Metric::new(
            "kvm.lost_events",
            summary.total_lost() as f64,
            "events",
            Direction::Lower,
        ));
        Ok(m)
    }
}

/// VM exits by reason of one QEMU process in a host trace, as metrics (`kvm.exits`,
/// `kvm.exits:REASON`, `kvm.exit_us:REASON`, per vCPU too: [`pmlab_analysis::kvm`]), and
/// `boot.qemu_threads`, the threads found forked from it. A QEMU that made no exits (TCG)
/// gets `kvm.exits` 0.
pub fn exit_metrics(trace: &Trace, qemu_pid: i32) -> Result<Vec<Metric>, BootError> {
    let threads: Vec<i32> = pmlab_analysis::sched::forked_from(trace, &[qemu_pid])
        .map_err(|m| BootError::Results {
            what: "the host's trace".into(),
            source: Box::new(m),
        })?
        .into_iter()
        .collect();
    let mut out = vec![Metric::new(
        "boot.qemu_threads",
        threads.len() as f64,
        "threads",
        Direction::Neutral,
    )];
    match pmlab_analysis::kvm::exits(trace, Some(&threads)) {
        Ok(e) => out.extend(e.metrics()),
        Err(_) => out.push(Metric::new("kvm.exits", 0.0, "", Direction::Lower)),
    }
    Ok(out)
}
