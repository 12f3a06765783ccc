//! Fault injection through `cpuN/hotplug/fail`: find the states that accept injection
//! (the kernel answers EINVAL for atomic STARTING/DYING states, states without callbacks,
//! and — while the CPU is online — states at or below `cpu:bringup`), arm one, attempt
//! the operation, and check that it failed (EAGAIN), that the CPU is back in its prior
//! state and that `fail` reads -1 again; the trace gives the rollback time and steps.
//!
//! Injection fires only where the state has a callback for the direction taken; an armed
//! state without one lets the operation succeed and stays armed. Such attempts are reported
//! as "not triggered", the state is disarmed and the CPU put back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Serialize;

use super::lab::{MachineGuard, Progress};
use super::states::{HotplugState, StateTable};
use super::sysfs::{CpuFiles, Direction};
use super::tracer::{LabTracer, TimedOp};
use super::{HotplugError, Paths};

/// Which states to walk.
#[derive(Debug, Clone)]
pub enum InjectTarget {
    All,
    One(HotplugState),
}

#[derive(Debug, Clone)]
pub struct InjectOptions {
    pub paths: Paths,
    pub cpus: Vec<u32>,
    pub target: InjectTarget,
    pub trace: bool,
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
    pub cpu: u32,
    #[serde(serialize_with = "Direction::serialize_short")]
    pub direction: Direction,
    pub state: i32,
    pub name: String,
    pub outcome: InjectOutcome,
    pub errno: Option<i32>,
    pub wall_ns: u64,
    /// From the failure to the write's return (trace needed).
    pub rollback_ns: Option<u64>,
    pub rollback_steps: Option<usize>,
    /// CPU's `online` and hotplug `state` after the attempt.
    pub online_after: bool,
    pub state_after: i32,
    pub fail_after: i32,
    #[serde(skip)]
    start_ns: u64,
    #[serde(skip)]
    end_ns: u64,
}

/// The walk's result.
#[derive(Debug, Clone, Serialize)]
pub struct InjectResult {
    pub cpus: Vec<u32>,
    /// Per CPU and direction: states the kernel accepted for arming.
    #[serde(serialize_with = "accepted_short")]
    pub accepted: Vec<(u32, Direction, Vec<i32>)>,
    pub attempts: Vec<InjectAttempt>,
    pub traced: bool,
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
    pub fn count(&self, f: impl Fn(&InjectOutcome) -> bool) -> usize {
        self.attempts.iter().filter(|a| f(&a.outcome)).count()
    }
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

/// Walk the injectable states of each CPU in both directions (down first, from online).
pub fn run_inject(
    opts: &InjectOptions,
    progress: &mut dyn Progress,
) -> Result<InjectResult, HotplugError> {
    let sys_cpu = opts.paths.sys_cpu();
    let table = StateTable::read(&sys_cpu)?;
    let mut guard = MachineGuard::new(&opts.paths, &opts.cpus)?;
    let tracer = if opts.trace {
        Some(LabTracer::start(&opts.paths, &opts.cpus)?)
    } else {
        None
    };
    let mut accepted = Vec::new();
    let mut attempts = Vec::new();
    let mut notes = Vec::new();
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
    // First find what each CPU accepts in each direction, so progress has a total.
    let mut plan: Vec<(CpuFiles, Direction, Vec<i32>)> = Vec::new();
    for &c in &opts.cpus {
        let cpu = CpuFiles::new(&sys_cpu, c);
        for dir in [Direction::Offline, Direction::Online] {
            stop()?;
            cpu.set_online(!dir.online_after())?;
            let acc = accepted_states(&cpu, &table)?;
            accepted.push((c, dir, acc.clone()));
            plan.push((
                cpu.clone(),
                dir,
                acc.into_iter().filter(|&n| wanted(n)).collect(),
            ));
        }
        cpu.set_online(true)?;
    }
    if let InjectTarget::One(s) = &opts.target {
        if plan.iter().all(|(_, _, v)| v.is_empty()) {
            return Err(HotplugError::Invalid(format!(
                "hotplug state {} ({}) does not accept fault injection in either direction \
                 (atomic STARTING/DYING state, or no callbacks)",
                s.number, s.name
            )));
        }
    }
    progress.begin(plan.iter().map(|(_, _, v)| v.len() as u64).sum());
    for (cpu, dir, states) in &plan {
        for &n in states {
            stop()?;
            let state = HotplugState {
                number: n,
                name: table.name_of(n).unwrap_or("?").to_string(),
            };
            let a = attempt(cpu, *dir, &state)?;
            progress.step(&format!(
                "cpu{} {} {}:{}",
                cpu.cpu,
                dir.short(),
                n,
                state.name
            ));
            attempts.push(a);
        }
    }
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
        for (a, tr) in attempts.iter_mut().zip(traces) {
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
        }
    } else {
        notes.push("not traced: rollback times need tracefs".into());
    }
    guard.restore()?;
    progress.finish();
    Ok(InjectResult {
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
            cpus: vec![1],
            accepted: vec![(1, Direction::Online, vec![5])],
            attempts: vec![a],
            traced: false,
            notes: vec![],
        };
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["attempts"][0]["direction"], "down");
        assert_eq!(j["accepted"], serde_json::json!([[1, "up", [5]]]));
    }
}
