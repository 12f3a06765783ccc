//! `pmlab record` on the lab: trace a command (or a duration) through `pmlab_trace`'s
//! recorder, with counter snapshots around it for `pmlab analyze`'s cross-check. The command
//! runs without a shell, as the invoking user (pmlab-workload's one sudo rule), and is
//! supervised by events only: its exit, a signal (from the lab's watcher) or the deadline.

use crate::lab::{Lab, LabError};
use pmlab_analysis::crosscheck;
use pmlab_kernel::counters::Snapshot;
use pmlab_trace::record::{RecordOptions, RecordSummary, Recorder};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What to record.
pub struct RecordRequest {
    /// What the recorder records (events, buffers, output file).
    pub options: RecordOptions,
    /// The command and its arguments (empty: record for `duration`, or until a signal).
    pub command: Vec<String>,
    /// Stop after this long; a command still running then gets SIGTERM (SIGKILL 5 s later).
    pub duration: Option<Duration>,
    /// Run the command as root even when pmlab was started through sudo.
    pub as_root: bool,
    /// Send the command's stdout to pmlab's stderr (stdout carries JSON).
    pub stdout_to_stderr: bool,
}

/// How a recording ended.
pub struct Recording {
    /// The recorder's summary (events, lost events, file).
    pub summary: RecordSummary,
    /// The recorder's notes at start (events this kernel lacks, ...).
    pub start_notes: Vec<String>,
    /// Problems with the counters cross-check file (the trace itself is fine).
    pub warnings: Vec<String>,
    /// The first signal that stopped the recording.
    pub interrupted: Option<i32>,
    /// The command's exit status, when there was a command.
    pub status: Option<ExitStatus>,
    /// The duration ran out while the command was running (it was terminated).
    pub duration_over: bool,
}

/// The program's path, found like execvp would (so a bad name fails before tracing starts).
pub(crate) fn find_program(name: &str) -> Result<PathBuf, LabError> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if name.contains('/') {
        let p = PathBuf::from(name);
        if executable(&p) {
            return Ok(p);
        }
        return Err(LabError::NotExecutable(name.into()));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        let p = dir.join(name);
        if executable(&p) {
            return Ok(p);
        }
    }
    Err(LabError::NotInPath(name.into()))
}

enum Event {
    ChildExited(std::io::Result<ExitStatus>),
    Signal(i32),
}

impl Lab {
    /// Record: start the recorder, run the command (or wait for the duration or a signal),
    /// stop, and write the counters sidecar beside the trace.
    pub fn record(&self, req: RecordRequest) -> Result<Recording, LabError> {
        let program = match req.command.first() {
            Some(name) => Some(find_program(name)?),
            None => None,
        };
        let user = pmlab_workload::invoking_user(req.as_root)?;
        let signals = self.signals();
        let (tx, rx) = mpsc::channel::<Event>();
        let sig_tx = tx.clone();
        // Blocks until the lab's watcher forwards a signal: no periodic wake.
        std::thread::spawn(move || {
            for sig in signals {
                if sig_tx.send(Event::Signal(sig)).is_err() {
                    break;
                }
            }
        });
        let recorder = Recorder::start(self.root(), req.options).map_err(LabError::RecordStart)?;
        let start_notes = recorder.notes().to_vec();
        let counters_before = Snapshot::take_at(&self.root().path("/"));

        let mut child_pid = None;
        if let Some(program) = &program {
            let mut cmd = Command::new(program);
            cmd.arg0(&req.command[0]).args(&req.command[1..]);
            if let Some((uid, gid)) = user {
                cmd.uid(uid).gid(gid);
            }
            if req.stdout_to_stderr {
                use std::os::fd::AsFd;
                let err = std::io::stderr()
                    .as_fd()
                    .try_clone_to_owned()
                    .map_err(LabError::Signals)?;
                cmd.stdout(Stdio::from(err));
            }
            let mut child = cmd
                .spawn()
                .map_err(|e| LabError::Spawn(req.command[0].clone(), e))?;
            child_pid = Some(child.id() as i32);
            let child_tx = tx.clone();
            std::thread::spawn(move || {
                let _ = child_tx.send(Event::ChildExited(child.wait()));
            });
        }
        drop(tx);

        let deadline = req.duration.map(|d| Instant::now() + d);
        let mut status = None;
        let mut interrupted = None;
        let mut child_running = child_pid.is_some();
        let mut kill_deadline: Option<Instant> = None;
        let mut duration_over = false;
        let mut wait_error = None;
        loop {
            let wait_until = [
                deadline.filter(|_| interrupted.is_none() && kill_deadline.is_none()),
                kill_deadline,
            ]
            .into_iter()
            .flatten()
            .min();
            // One wait per event: the next deadline, not a polling interval.
            let ev = match wait_until {
                Some(t) => match rx.recv_timeout(t.saturating_duration_since(Instant::now())) {
                    Ok(ev) => Some(ev),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                },
                None => match rx.recv() {
                    Ok(ev) => Some(ev),
                    Err(_) => break,
                },
            };
            match ev {
                Some(Event::ChildExited(st)) => {
                    match st {
                        Ok(s) => status = Some(s),
                        Err(e) => wait_error = Some(e),
                    }
                    break;
                }
                Some(Event::Signal(sig)) => {
                    interrupted.get_or_insert(sig);
                    match child_pid.filter(|_| child_running) {
                        Some(pid) => {
                            send(pid, sig);
                            kill_deadline.get_or_insert(Instant::now() + Duration::from_secs(5));
                        }
                        None => break,
                    }
                }
                None => match child_pid.filter(|_| child_running) {
                    // duration over (first) or the command ignored SIGTERM for 5 s (then)
                    Some(pid) if kill_deadline.is_none() => {
                        duration_over = true;
                        send(pid, libc::SIGTERM);
                        kill_deadline = Some(Instant::now() + Duration::from_secs(5));
                    }
                    Some(pid) => {
                        send(pid, libc::SIGKILL);
                        child_running = false;
                        kill_deadline = None;
                        // the wait thread still reports the exit
                    }
                    None => break,
                },
            }
        }
        let counters_after = Snapshot::take_at(&self.root().path("/"));
        let summary = recorder.stop().map_err(LabError::RecordStop)?;
        if let Some(e) = wait_error {
            return Err(LabError::Wait(e));
        }
        let mut warnings = Vec::new();
        let sidecar = crosscheck::sidecar_path(&summary.path);
        match (counters_before, counters_after) {
            (Ok(before), Ok(after)) => {
                let side = crosscheck::Sidecar { before, after };
                let written = serde_json::to_vec(&side)
                    .map_err(std::io::Error::other)
                    .and_then(|b| std::fs::write(&sidecar, b));
                if let Err(e) = written {
                    warnings.push(format!("cannot write {}: {e}", sidecar.display()));
                }
            }
            (Err(e), _) | (_, Err(e)) => {
                warnings.push(format!("no counters cross-check for this trace: {e}"));
                let _ = std::fs::remove_file(&sidecar);
            }
        }
        Ok(Recording {
            summary,
            start_notes,
            warnings,
            interrupted,
            status,
            duration_over,
        })
    }
}

/// Send signal `sig` to process `pid` (errors ignored: it may have just exited).
fn send(pid: i32, sig: i32) {
    use rustix::process::{kill_process, Pid, Signal};
    if let (Some(pid), Some(sig)) = (Pid::from_raw(pid), Signal::from_named_raw(sig)) {
        let _ = kill_process(pid, sig);
    }
}
