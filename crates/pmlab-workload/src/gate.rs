//! A start gate for worker threads: workers check in and wait; the main thread waits for
//! every spawned worker to check in, then opens the gate (telling them to run or to abort).

use crate::{Probe, WorkerError, WorkloadError};
use std::sync::{Condvar, Mutex};
use std::thread::JoinHandle;

#[derive(Default)]
pub(crate) struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    checked_in: usize,
    errors: Vec<WorkerError>,
    open: Option<bool>,
}

impl Gate {
    /// Worker: report set-up (an error aborts the run), then wait; true means "run".
    pub(crate) fn check_in_and_wait(&self, setup: Result<(), WorkerError>) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.checked_in += 1;
        if let Err(e) = setup {
            s.errors.push(e);
        }
        self.changed.notify_all();
        loop {
            if let Some(go) = s.open {
                return go;
            }
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Main: wait until `workers` have checked in; returns their set-up errors.
    pub(crate) fn wait_checked_in(&self, workers: usize) -> Vec<WorkerError> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while s.checked_in < workers {
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        std::mem::take(&mut s.errors)
    }

    /// Main, after spawning `handles` (a spawn that failed is `spawn_error`): wait for every
    /// worker's check-in, then take the probe's `before`. On any failure the workers are told
    /// to return and are joined, and the first error comes back; the gate is left shut either
    /// way (open it with `true` to start the run).
    pub(crate) fn ready<T>(
        &self,
        handles: &mut Vec<JoinHandle<T>>,
        spawn_error: Option<WorkloadError>,
        probe: &mut dyn Probe,
        workload: &'static str,
    ) -> Result<(), WorkloadError> {
        let errors = self.wait_checked_in(handles.len());
        let ready = match spawn_error {
            Some(e) => Err(e),
            None if !errors.is_empty() => {
                let mut errors = errors;
                let source = if errors.len() == 1 {
                    errors.remove(0)
                } else {
                    WorkerError::Setup(errors)
                };
                Err(WorkloadError::worker(workload, None, source))
            }
            None => probe.before().map_err(WorkloadError::Probe),
        };
        if ready.is_err() {
            self.open(false);
            for h in handles.drain(..) {
                let _ = h.join();
            }
        }
        ready
    }

    /// Main: open the gate to run, join the workers (one per CPU of `cpus`, in order) and
    /// check the run: their results and its wall time, or why it failed (cancelled, a
    /// worker's error or panic, the probe's `after`).
    pub(crate) fn run_and_join<T>(
        &self,
        handles: Vec<JoinHandle<Result<T, WorkerError>>>,
        cpus: &[u32],
        probe: &mut dyn Probe,
        workload: &'static str,
    ) -> Result<(Vec<(u32, T)>, std::time::Duration), WorkloadError> {
        let t0 = std::time::Instant::now();
        self.open(true);
        let mut results = Vec::with_capacity(cpus.len());
        let mut failure = None;
        for (h, &cpu) in handles.into_iter().zip(cpus) {
            match h.join() {
                Ok(Ok(r)) => results.push((cpu, r)),
                Ok(Err(e)) => failure = Some((cpu, e)),
                Err(_) => failure = Some((cpu, WorkerError::Panicked)),
            }
        }
        let wall = t0.elapsed();
        if crate::cancel::is_requested() {
            return Err(WorkloadError::Cancelled);
        }
        if let Some((cpu, e)) = failure {
            return Err(WorkloadError::worker(workload, Some(cpu), e));
        }
        probe.after().map_err(WorkloadError::Probe)?;
        Ok((results, wall))
    }

    /// Main: release the workers, to run (`true`) or to return at once (`false`).
    pub(crate) fn open(&self, run: bool) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.open = Some(run);
        self.changed.notify_all();
    }
}
