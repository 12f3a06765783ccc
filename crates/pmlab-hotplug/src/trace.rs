//! What the lab keeps of an operation's trace: its span and its steps (by hotplug/states
//! name and callback), where each ran, exclusive times, arch part and rollback — built from
//! `pmlab_analysis::hotplug` operations.

use pmlab_analysis::hotplug::Operation;
use serde::Serialize;

/// One cpuhp step of one operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepTime {
    /// hotplug state number.
    pub state: i32,
    /// Its name in `hotplug/states`.
    pub name: String,
    /// The callback symbol.
    pub callback: String,
    /// The CPU it ran on.
    pub exec_cpu: u32,
    /// Ran on the CPU being plugged (else on the control CPU).
    pub on_target: bool,
    /// When it started (trace clock, ns).
    pub start_ns: u64,
    /// How long it ran, nested steps included.
    pub duration_ns: u64,
    /// Duration minus the steps nested in it (AP steps inside the control CPU's kick).
    pub exclusive_ns: u64,
    /// The callback's return value (non-zero: the step failed).
    pub ret: i32,
    /// Part of the arch bringup/teardown (kick_ap, bringup, starting/dying, teardown).
    pub arch: bool,
    /// Undoing an earlier step after a failure.
    pub rollback: bool,
    /// Runs inside another step.
    pub nested: bool,
}

/// The traced part of one operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpTrace {
    /// First step's start to last step's end.
    pub span_ns: u64,
    /// Sum of exclusive step times (= time covered by steps, gaps excluded).
    pub steps_sum_ns: u64,
    /// Exclusive time in arch steps.
    pub arch_ns: u64,
    /// Time the writing task was preempted between top-level steps (0 when not traced).
    pub preempted_ns: u64,
    /// Time the control CPU was in interrupts between top-level steps (0 when not traced).
    pub interrupted_ns: u64,
    /// Timestamp of the operation's first cpuhp event.
    pub first_ns: u64,
    /// Timestamp of its last cpuhp event.
    pub last_ns: u64,
    /// Its steps, in start order.
    pub steps: Vec<StepTime>,
}

impl OpTrace {
    /// The lab's view of an analysed operation.
    pub fn from_operation(op: &Operation) -> OpTrace {
        let steps = op
            .steps
            .iter()
            .map(|s| StepTime {
                state: s.state,
                name: s.name.clone().unwrap_or_else(|| "?".into()),
                callback: s.callback.clone(),
                exec_cpu: s.exec_cpu,
                on_target: s.on_target,
                start_ns: s.start_ns,
                duration_ns: s.duration_ns,
                exclusive_ns: s.exclusive_ns,
                ret: s.ret,
                arch: s.arch,
                rollback: s.rollback,
                nested: s.depth > 0,
            })
            .collect();
        OpTrace {
            preempted_ns: op.preempted_ns.unwrap_or(0),
            interrupted_ns: op.interrupted_ns.unwrap_or(0),
            ..OpTrace::new(op.start_ns, op.end_ns, steps)
        }
    }

    /// An operation from its first and last event times and its steps (sums derived).
    pub fn new(first_ns: u64, last_ns: u64, steps: Vec<StepTime>) -> OpTrace {
        let steps_sum_ns = steps.iter().map(|s| s.exclusive_ns).sum();
        let arch_ns = steps
            .iter()
            .filter(|s| s.arch)
            .map(|s| s.exclusive_ns)
            .sum();
        OpTrace {
            span_ns: last_ns.saturating_sub(first_ns),
            steps_sum_ns,
            arch_ns,
            preempted_ns: 0,
            interrupted_ns: 0,
            first_ns,
            last_ns,
            steps,
        }
    }

    /// steps_sum / span (1.0 = the steps account for the whole span).
    pub fn coverage(&self) -> f64 {
        if self.span_ns == 0 {
            1.0
        } else {
            self.steps_sum_ns as f64 / self.span_ns as f64
        }
    }

    /// (steps_sum + preempted + interrupted) / span: the span accounted for by steps, and by
    /// preemption of the writing task and interrupts on its CPU between them.
    pub fn accounted(&self) -> f64 {
        if self.span_ns == 0 {
            1.0
        } else {
            (self.steps_sum_ns + self.preempted_ns + self.interrupted_ns) as f64
                / self.span_ns as f64
        }
    }

    /// The step with the most exclusive time.
    pub fn slowest(&self) -> Option<&StepTime> {
        self.steps.iter().max_by_key(|s| s.exclusive_ns)
    }

    /// When the failure happened: the end of the last forward (non-wrapper) step before the
    /// first rollback step, or `op_start_ns` when nothing ran before it.
    pub fn failure_ns(&self, op_start_ns: u64) -> u64 {
        pmlab_analysis::hotplug::failure_point(
            self.steps
                .iter()
                .map(|s| (s.start_ns, s.start_ns + s.duration_ns, s.rollback)),
            op_start_ns,
        )
    }

    /// How many of its steps were rollback steps.
    pub fn rollback_steps(&self) -> usize {
        self.steps.iter().filter(|s| s.rollback).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn step(state: i32, start: u64, dur: u64, excl: u64, rollback: bool) -> StepTime {
        StepTime {
            state,
            name: format!("s{state}"),
            callback: format!("cb{state}"),
            exec_cpu: 0,
            on_target: false,
            start_ns: start,
            duration_ns: dur,
            exclusive_ns: excl,
            ret: 0,
            arch: state == 83,
            rollback,
            nested: false,
        }
    }

    #[test]
    fn sums_coverage_and_slowest() {
        let t = OpTrace::new(
            100,
            200,
            vec![step(1, 100, 40, 40, false), step(83, 140, 59, 59, false)],
        );
        assert_eq!(t.span_ns, 100);
        assert_eq!(t.steps_sum_ns, 99);
        assert_eq!(t.arch_ns, 59);
        assert!((t.coverage() - 0.99).abs() < 1e-9);
        assert_eq!(t.slowest().unwrap().state, 83);
    }

    #[test]
    fn failure_point_is_before_the_first_rollback_step() {
        let t = OpTrace::new(
            100,
            300,
            vec![
                step(235, 100, 50, 50, false),
                step(234, 150, 20, 20, false),
                step(234, 200, 30, 30, true),
                step(235, 230, 70, 70, true),
            ],
        );
        assert_eq!(t.failure_ns(90), 170);
        assert_eq!(t.rollback_steps(), 2);
        let none = OpTrace::new(100, 100, vec![]);
        assert_eq!(none.failure_ns(90), 90);
    }
}
