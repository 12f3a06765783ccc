//! Fault injection through `cpuN/hotplug/fail`: find the states that accept injection
//! (the kernel answers EINVAL for atomic STARTING/DYING states, states without callbacks,
//! and — while the CPU is online — states at or below `cpu:bringup`), arm one, attempt
//! the operation, and check that it failed (EAGAIN), that the CPU is back in its prior
//! state and that `fail` reads -1 again; the trace gives the rollback time and steps.
//!
//! Injection fires only where the state has a callback for the direction taken; an armed
//! state without one lets the operation succeed and stays armed. Such attempts are reported
//! as "not triggered", the state is disarmed and the CPU put back.
//!
//! The walk is an experiment of the protocol (kind `inject`): one workload per planned
//! attempt (CPU, direction, state), run once each in walk order (sequential order, one
//! round), each attempt stored by the protocol as it completes; rollback times from the
//! trace are added to the stored runs at the end, as the latency lab adds its steps.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Serialize;

use super::lab::{begin_transaction, Progress};
use super::runs::{configuration, lower, ms, run_protocol, Fatal};
use super::states::{HotplugState, StateTable};
use super::sysfs::{CpuFiles, Direction};
use super::tracer::{LabTracer, TimedOp};
use super::{HotplugError, Mitigation, Paths};
use crate::executor::{ExecError, Executor, RunContext, RunError, RunOutput};
use crate::protocol::StopReason;
use crate::spec::{Budget, Configuration, Experiment, Kind, Order, WorkloadDef};
use crate::store::Store;
use crate::system::SystemSnapshot;
use pmlab_kernel::knob::Transaction;
use pmlab_kernel::{Direction as MetricDirection, Metric};

/// Which states to walk.
#[derive(Debug, Clone)]
pub enum InjectTarget {
    /// Every state the kernel accepts for injection.
    All,
    /// One state (by name or number from `hotplug/states`).
    One(HotplugState),
}

/// What the fault-injection walk does.
#[derive(Debug, Clone)]
pub struct InjectOptions {
    /// Kernel files, under a root (`/` or a fake tree).
    pub paths: Paths,
    /// CPUs to walk, one at a time.
    pub cpus: Vec<u32>,
    /// Which states to arm.
    pub target: InjectTarget,
    /// Trace the walk (rollback times and steps need it).
    pub trace: bool,
    /// Set by the lab's signal watcher: stop before the next attempt.
    pub stop: Arc<AtomicBool>,
}

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum InjectOutcome {
    /// Failed with EAGAIN, CPU back in its prior state, `fail` back at -1.
    RolledBack,
    /// No callback for this direction: the operation succeeded; disarmed and put back.
    NotTriggered,
    /// Anything else (described).
    Unexpected(String),
}

/// One armed attempt.
#[derive(Debug, Clone, Serialize)]
pub struct InjectAttempt {
    /// The CPU written.
    pub cpu: u32,
    /// Offline (`down`, from online) or online (`up`, from offline).
    #[serde(serialize_with = "Direction::serialize_short")]
    pub direction: Direction,
    /// The armed state's number.
    pub state: i32,
    /// The armed state's name.
    pub name: String,
    /// How the attempt ended.
    pub outcome: InjectOutcome,
    /// errno of the `online` write, when it failed.
    pub errno: Option<i32>,
    /// Wall time around the `online` write.
    pub wall_ns: u64,
    /// From the failure to the write's return (trace needed).
    pub rollback_ns: Option<u64>,
    /// Steps rolled back (trace needed).
    pub rollback_steps: Option<usize>,
    /// CPU's `online` and hotplug `state` after the attempt.
    pub online_after: bool,
    /// `hotplug/state` after the attempt.
    pub state_after: i32,
    /// `hotplug/fail` after the attempt (-1: disarmed).
    pub fail_after: i32,
    #[serde(skip)]
    start_ns: u64,
    #[serde(skip)]
    end_ns: u64,
}

/// The walk's result.
#[derive(Debug, Clone, Serialize)]
pub struct InjectResult {
    /// The walk's experiment in the store.
    #[serde(skip)]
    pub experiment: i64,
    /// The CPUs walked.
    pub cpus: Vec<u32>,
    /// Per CPU and direction: states the kernel accepted for arming.
    #[serde(serialize_with = "accepted_short")]
    pub accepted: Vec<(u32, Direction, Vec<i32>)>,
    /// Every attempt, in walk order.
    pub attempts: Vec<InjectAttempt>,
    /// Whether the walk was traced.
    pub traced: bool,
    /// What a reader should know (trace gaps, repairs).
    pub notes: Vec<String>,
}

/// `accepted` with each direction as its short word, as the lab writes directions.
fn accepted_short<S: serde::Serializer>(
    v: &[(u32, Direction, Vec<i32>)],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|(cpu, d, states)| (cpu, d.short(), states)))
}

impl InjectAttempt {
    /// CLOCK_MONOTONIC at the write.
    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }
}

impl InjectResult {
    /// How many attempts ended in an outcome that `f` accepts.
    pub fn count(&self, f: impl Fn(&InjectOutcome) -> bool) -> usize {
        self.attempts.iter().filter(|a| f(&a.outcome)).count()
    }
    /// Whether every attempt rolled back or was not triggered (none unexpected).
    pub fn all_as_expected(&self) -> bool {
        self.count(|o| matches!(o, InjectOutcome::Unexpected(_))) == 0
    }
}

/// States of `table` that `cpu` accepts in its current online state (arm, then disarm).
pub fn accepted_states(cpu: &CpuFiles, table: &StateTable) -> Result<Vec<i32>, HotplugError> {
    let mut v = Vec::new();
    for s in &table.states {
        match cpu.set_fail(s.number) {
            Ok(()) => {
                v.push(s.number);
                cpu.set_fail(-1)?;
            }
            Err(HotplugError::Refused { errno, .. }) if errno == libc::EINVAL => {}
            Err(e) => {
                let _ = cpu.set_fail(-1);
                return Err(e);
            }
        }
    }
    Ok(v)
}

/// Arm `state`, attempt `dir`, classify, and put the CPU back where it was.
fn attempt(
    cpu: &CpuFiles,
    dir: Direction,
    state: &HotplugState,
) -> Result<InjectAttempt, HotplugError> {
    let before_online = !dir.online_after();
    cpu.set_online(before_online)?;
    let before_state = cpu.state()?;
    cpu.set_fail(state.number)?;
    let w = cpu.write_online_timed(dir.online_after())?;
    let online_after = cpu.is_online()?;
    let fail_after = cpu.fail()?;
    let state_after = cpu.state()?;
    let outcome = match w.errno {
        Some(libc::EAGAIN)
            if online_after == before_online && fail_after == -1 && state_after == before_state =>
        {
            InjectOutcome::RolledBack
        }
        None if online_after == dir.online_after() => InjectOutcome::NotTriggered,
        errno => InjectOutcome::Unexpected(format!(
            "write returned {}; online={} (expected {}), state={} (expected {}), fail={} (expected -1)",
            errno.map_or("success".to_string(), |e| std::io::Error::from_raw_os_error(e).to_string()),
            online_after as u8,
            before_online as u8,
            state_after,
            before_state,
            fail_after
        )),
    };
    // Disarm and put the CPU back, whatever happened.
    if cpu.fail()? != -1 {
        cpu.set_fail(-1)?;
    }
    cpu.set_online(before_online)?;
    Ok(InjectAttempt {
        cpu: cpu.cpu,
        direction: dir,
        state: state.number,
        name: state.name.clone(),
        outcome,
        errno: w.errno,
        wall_ns: w.wall().0,
        rollback_ns: None,
        rollback_steps: None,
        online_after,
        state_after,
        fail_after,
        start_ns: w.start_ns,
        end_ns: w.end_ns,
    })
}

/// The walk as an executor of the protocol: workload `k` is the `k`th planned attempt.
struct AttemptExecutor<'a> {
    paths: &'a Paths,
    cpus: &'a [u32],
    plan: Vec<(CpuFiles, Direction, HotplugState)>,
    /// CPUs' `online`/`fail` journaled before the first write; restored by `restore`.
    txn: Transaction,
    attempts: Vec<InjectAttempt>,
    /// Where each attempt's run is in the store: (round, position).
    places: Vec<(usize, usize)>,
    /// A failure that ended the walk (returned as it is, not as text).
    fatal: Option<HotplugError>,
    progress: &'a mut dyn Progress,
}

impl Executor for AttemptExecutor<'_> {
    fn validate(&mut self, _: &Experiment) -> Result<(), ExecError> {
        Ok(())
    }

    fn snapshot(&mut self, _: &Experiment) -> SystemSnapshot {
        let mut system = SystemSnapshot::read(&self.paths.root);
        system.knobs = super::runs::knobs_as_found(&self.paths.root, self.cpus);
        system
    }

    fn configure(&mut self, _: &Configuration) -> Result<(), ExecError> {
        Ok(())
    }

    fn run(&mut self, _: &WorkloadDef, context: &RunContext) -> Result<RunOutput, RunError> {
        let (cpu, dir, state) = &self.plan[context.workload];
        let a = match attempt(cpu, *dir, state) {
            Ok(a) => a,
            Err(e) => return Err(self.fail(e)),
        };
        self.progress.step(&format!(
            "cpu{} {} {}:{}",
            cpu.cpu,
            dir.short(),
            state.number,
            state.name
        ));
        let outcome = a.outcome.clone();
        let side = vec![
            Metric::new("inject.state", a.state as f64, "", MetricDirection::Neutral).on_cpu(a.cpu),
            Metric::new(
                "inject.rolled_back",
                (a.outcome == InjectOutcome::RolledBack) as u8 as f64,
                "",
                MetricDirection::Neutral,
            )
            .on_cpu(a.cpu),
        ];
        let wall = a.wall_ns;
        self.attempts.push(a);
        self.places.push((context.round, context.position));
        match outcome {
            // The run fails with what went wrong; the walk goes on.
            InjectOutcome::Unexpected(d) => Err(RunError::Exec(HotplugError::Unexpected(d).into())),
            _ => Ok(RunOutput {
                metrics: vec![lower("inject.wall_ms", ms(wall), "ms", cpu.cpu)],
                side_metrics: side,
                trace_path: None,
            }),
        }
    }

    fn restore(&mut self) -> Result<(), ExecError> {
        Ok(self.txn.restore().map_err(HotplugError::from)?)
    }
}

impl Fatal for AttemptExecutor<'_> {
    fn fatal(&mut self) -> &mut Option<HotplugError> {
        &mut self.fatal
    }
}

/// The walk's experiment: one configuration (the baseline), one workload per attempt.
fn experiment_of(plan: &[(CpuFiles, Direction, HotplugState)]) -> Experiment {
    let workloads = plan
        .iter()
        .map(|(cpu, dir, state)| {
            let argv: Vec<String> = [
                "hotplug",
                "inject-fail",
                dir.short(),
                "--cpus",
                &cpu.cpu.to_string(),
                "--state",
                &state.number.to_string(),
            ]
            .map(String::from)
            .to_vec();
            WorkloadDef {
                label: format!("{} {}", argv.join(" "), state.name),
                argv,
            }
        })
        .collect();
    Experiment::new(
        Kind::Inject,
        "hotplug inject-fail".into(),
        vec![configuration(Mitigation::None)],
        workloads,
        None,
    )
    .expect("one configuration, distinct attempts")
}

/// Walk the injectable states of each CPU in both directions (down first, from online),
/// through the protocol into `store` (one run per attempt).
pub fn run_inject(
    opts: &InjectOptions,
    store: &mut Store,
    command: &str,
    progress: &mut dyn Progress,
) -> Result<InjectResult, HotplugError> {
    let sys_cpu = opts.paths.sys_cpu();
    let table = StateTable::read(&sys_cpu)?;
    let txn = begin_transaction(&opts.paths, &opts.cpus)?;
    let tracer = if opts.trace {
        Some(LabTracer::start(&opts.paths, &opts.cpus)?)
    } else {
        None
    };
    let mut accepted = Vec::new();
    let mut notes: Vec<String> = txn
        .recovered
        .iter()
        .map(|l| format!("repaired what a killed pmlab session left: {l}"))
        .collect();
    let stop = || {
        if opts.stop.load(Ordering::Relaxed) {
            Err(HotplugError::Interrupted)
        } else {
            Ok(())
        }
    };
    let wanted = |n: i32| match &opts.target {
        InjectTarget::All => true,
        InjectTarget::One(s) => s.number == n,
    };
    // First find what each CPU accepts in each direction: the plan, one run per attempt.
    let mut plan: Vec<(CpuFiles, Direction, HotplugState)> = Vec::new();
    for &c in &opts.cpus {
        let cpu = CpuFiles::new(&sys_cpu, c);
        for dir in [Direction::Offline, Direction::Online] {
            stop()?;
            cpu.set_online(!dir.online_after())?;
            let acc = accepted_states(&cpu, &table)?;
            for &n in acc.iter().filter(|&&n| wanted(n)) {
                let state = HotplugState {
                    number: n,
                    name: table.name_of(n).unwrap_or("?").to_string(),
                };
                plan.push((cpu.clone(), dir, state));
            }
            accepted.push((c, dir, acc));
        }
        cpu.set_online(true)?;
    }
    if plan.is_empty() {
        return Err(HotplugError::Invalid(match &opts.target {
            InjectTarget::One(s) => format!(
                "hotplug state {} ({}) does not accept fault injection in either direction \
                 (atomic STARTING/DYING state, or no callbacks)",
                s.number, s.name
            ),
            InjectTarget::All => "no hotplug state accepts fault injection on these CPUs".into(),
        }));
    }
    progress.begin(plan.len() as u64);
    let experiment = experiment_of(&plan);
    let budget = Budget {
        target_ci: 0.0,
        max_runs: Some(plan.len()),
        min_rounds: 1,
        order: Order::Sequential,
        stop_when_decided: false,
        warmup: false,
        settle: std::time::Duration::ZERO,
        ..Budget::default()
    };
    let mut exec = AttemptExecutor {
        paths: &opts.paths,
        cpus: &opts.cpus,
        plan,
        txn,
        attempts: Vec::new(),
        places: Vec::new(),
        fatal: None,
        progress,
    };
    let outcome = run_protocol(store, &mut exec, &experiment, &budget, command, &opts.stop)?;
    if outcome.stop == StopReason::Interrupted {
        return Err(HotplugError::Interrupted);
    }
    let mut attempts = std::mem::take(&mut exec.attempts);
    if let Some(t) = tracer {
        let timed: Vec<TimedOp> = attempts
            .iter()
            .map(|a| TimedOp {
                cpu: a.cpu,
                direction: a.direction,
                start_ns: a.start_ns,
                end_ns: a.end_ns,
            })
            .collect();
        let (traces, trace_notes) = t.finish(&timed, &table)?;
        notes.extend(trace_notes);
        let mut rollback = Vec::new();
        for ((a, tr), &place) in attempts.iter_mut().zip(traces).zip(&exec.places) {
            if a.outcome != InjectOutcome::RolledBack {
                continue;
            }
            match tr {
                Some(tr) => {
                    a.rollback_ns = Some(a.end_ns.saturating_sub(tr.failure_ns(a.start_ns)));
                    a.rollback_steps = Some(tr.rollback_steps());
                }
                None => {
                    // Failed before any traced step ran: nothing to roll back.
                    a.rollback_ns = Some(0);
                    a.rollback_steps = Some(0);
                }
            }
            if let Some(rb) = a.rollback_ns {
                rollback.push((
                    place,
                    vec![lower("inject.rollback_ms", ms(rb), "ms", a.cpu)],
                ));
            }
        }
        store.add_side_metrics(outcome.experiment_id, &rollback)?;
    } else {
        notes.push("not traced: rollback times need tracefs".into());
    }
    exec.progress.finish();
    Ok(InjectResult {
        experiment: outcome.experiment_id,
        cpus: opts.cpus.clone(),
        accepted,
        attempts,
        traced: opts.trace,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fake_sys_cpu;

    #[test]
    fn fake_tree_accepts_every_state_and_attempts_succeed_untriggered() {
        // Regular files accept any write, so every state is "accepted" and no write fails:
        // the attempt is classified NotTriggered and the CPU put back.
        let t = tempfile::tempdir().unwrap();
        fake_sys_cpu(t.path(), 2);
        let table = StateTable::read(t.path()).unwrap();
        let cpu = CpuFiles::new(t.path(), 1);
        let acc = accepted_states(&cpu, &table).unwrap();
        assert_eq!(acc.len(), table.states.len());
        assert_eq!(cpu.fail().unwrap(), -1);
        let a = attempt(&cpu, Direction::Offline, &table.states[5]).unwrap();
        assert_eq!(a.outcome, InjectOutcome::NotTriggered);
        assert!(cpu.is_online().unwrap());
        assert_eq!(cpu.fail().unwrap(), -1);
        // Directions are written down/up, in the attempts and in `accepted` alike.
        let r = InjectResult {
            experiment: 0,
            cpus: vec![1],
            accepted: vec![(1, Direction::Online, vec![5])],
            attempts: vec![a],
            traced: false,
            notes: vec![],
        };
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["attempts"][0]["direction"], "down");
        // Its tables: the attempts first (the CSV form), typed cells.
        use pmlab_analysis::{Cell, Tabular};
        let t = r.tables();
        assert_eq!(t[0].name, "attempts");
        assert_eq!(t[0].rows[0][0], Cell::Int(1));
        assert_eq!(
            t[0].rows[0][3],
            Cell::Str("not triggered (no callback this way)".into())
        );
        assert_eq!(t[0].rows[0][6], Cell::Empty, "no rollback time untraced");
        assert_eq!(t[1].rows[0][2], Cell::Int(1), "one state accepted");
        assert!(r.head()[1].starts_with("1 attempts: 0 failed and rolled back, 1 not triggered"));
        assert_eq!(j["accepted"], serde_json::json!([[1, "up", [5]]]));
    }

    #[test]
    fn the_walk_goes_through_the_protocol_into_the_store() {
        let t = tempfile::tempdir().unwrap();
        let sys_cpu = t.path().join("sys/devices/system/cpu");
        fake_sys_cpu(&sys_cpu, 2);
        let table = StateTable::read(&sys_cpu).unwrap();
        let opts = InjectOptions {
            paths: Paths::new(t.path()),
            cpus: vec![1],
            target: InjectTarget::One(table.states[5].clone()),
            trace: false,
            stop: Arc::new(AtomicBool::new(false)),
        };
        let mut store = Store::in_memory().unwrap();
        let r = run_inject(
            &opts,
            &mut store,
            "pmlab hotplug",
            &mut crate::lab::NoProgress,
        )
        .unwrap();
        // One attempt per direction; regular files accept the writes, so neither triggers.
        let dirs: Vec<Direction> = r.attempts.iter().map(|a| a.direction).collect();
        assert_eq!(dirs, [Direction::Offline, Direction::Online]);
        assert!(r
            .attempts
            .iter()
            .all(|a| a.outcome == InjectOutcome::NotTriggered));
        let cpu = CpuFiles::new(&sys_cpu, 1);
        assert!(cpu.is_online().unwrap());
        assert_eq!(cpu.fail().unwrap(), -1);
        // Stored by the protocol: kind inject, one run per attempt, in walk order.
        let e = store.load(r.experiment).unwrap();
        assert_eq!(e.info.kind, Kind::Inject);
        assert_eq!(e.workloads.len(), 2);
        assert_eq!(e.runs.len(), 2);
        for (k, run) in e.runs.iter().enumerate() {
            assert_eq!(run.workload, k);
            assert_eq!(run.status, crate::store::RunStatus::Ok);
            assert_eq!(run.metrics[0].name, "inject.wall_ms");
            assert!(run.metrics.iter().all(|m| m.cpu == Some(1)), "{run:?}");
        }
        assert_eq!(e.workloads[0].argv[..3], ["hotplug", "inject-fail", "down"]);
    }

    #[test]
    fn a_walk_with_nothing_to_attempt_is_refused_and_stores_nothing() {
        let t = tempfile::tempdir().unwrap();
        let sys_cpu = t.path().join("sys/devices/system/cpu");
        fake_sys_cpu(&sys_cpu, 2);
        let opts = InjectOptions {
            paths: Paths::new(t.path()),
            cpus: vec![1],
            target: InjectTarget::One(HotplugState {
                number: 999,
                name: "nonesuch".into(),
            }),
            trace: false,
            stop: Arc::new(AtomicBool::new(false)),
        };
        let mut store = Store::in_memory().unwrap();
        let e = run_inject(
            &opts,
            &mut store,
            "pmlab hotplug",
            &mut crate::lab::NoProgress,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("does not accept fault injection"),
            "{e}"
        );
        assert!(store.list().unwrap().is_empty());
        assert!(CpuFiles::new(&sys_cpu, 1).is_online().unwrap());
    }
}
