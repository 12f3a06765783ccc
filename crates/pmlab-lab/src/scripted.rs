//! `store_scripted`: an experiment whose runs return values the caller gives (per
//! configuration and round), run through the protocol into a store. For tests of what reads
//! stored experiments (reports, exports), and for trying a report on numbers from elsewhere.

use crate::executor::{ExecError, Executor, RunContext, RunError, RunOutput};
use crate::protocol::{self, Outcome, ProtocolError, Silent};
use crate::spec::{Budget, Configuration, Experiment, WorkloadDef};
use crate::store::Store;
use crate::system::SystemSnapshot;
use std::sync::atomic::AtomicBool;

/// One run's place, as the scripted values see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// Index of the configuration in the experiment.
    pub configuration: usize,
    /// Index of the workload in the experiment.
    pub workload: usize,
    /// The round, from 1.
    pub round: usize,
}

struct Scripted<'a> {
    system: SystemSnapshot,
    values: &'a mut dyn FnMut(Place) -> RunOutput,
}

impl Executor for Scripted<'_> {
    fn validate(&mut self, _: &Experiment) -> Result<(), ExecError> {
        Ok(())
    }
    fn snapshot(&mut self, _: &Experiment) -> SystemSnapshot {
        self.system.clone()
    }
    fn configure(&mut self, _: &Configuration) -> Result<(), ExecError> {
        Ok(())
    }
    fn run(&mut self, _: &WorkloadDef, c: &RunContext) -> Result<RunOutput, RunError> {
        Ok((self.values)(Place {
            configuration: c.configuration,
            workload: c.workload,
            round: c.round,
        }))
    }
    fn restore(&mut self) -> Result<(), ExecError> {
        Ok(())
    }
}

/// Run `experiment` for exactly `rounds` rounds (no warm-up, no settling, no early stop), each
/// run's output given by `values`, on a machine described by `system`; stored in `store` under
/// `command`.
pub fn store_scripted(
    store: &mut Store,
    experiment: &Experiment,
    rounds: usize,
    system: SystemSnapshot,
    command: &str,
    values: &mut dyn FnMut(Place) -> RunOutput,
) -> Result<Outcome, ProtocolError> {
    let units = experiment.configurations.len() * experiment.workloads.len();
    let budget = Budget {
        target_ci: 0.0,
        max_runs: Some(rounds * units),
        min_rounds: rounds,
        stop_when_decided: false,
        warmup: false,
        settle: std::time::Duration::ZERO,
        ..Budget::default()
    };
    protocol::run_experiment(
        store,
        &mut Scripted { system, values },
        experiment,
        &budget,
        command,
        &AtomicBool::new(false),
        &mut Silent,
    )
}
