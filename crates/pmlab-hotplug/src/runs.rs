//! Hotplug results in the result store: a latency session is stored by the protocol as it
//! runs ([`super::lab`]): configurations are the mitigations, workloads are (direction, CPU,
//! load level), every operation is a run with its wall time as primary metric and span, arch
//! time and per-step times as side metrics. An injection walk is stored the same way by the
//! protocol ([`super::inject`]), one run per attempt. Every metric of such a run is about the
//! CPU it wrote, and carries it in [`Metric::cpu`]. Both executors go through the protocol by
//! [`run_protocol`], which returns a refusal that ended the session as it is.

use std::collections::BTreeMap;
use std::path::Path;

use std::sync::atomic::AtomicBool;

use pmlab_kernel::{error_chain, Direction as MetricDirection, Metric};

use super::trace::OpTrace;
use super::{HotplugError, Mitigation};
use crate::executor::{ExecError, Executor, RunError};
use crate::protocol::{self, Outcome, Silent, StopReason};
use crate::spec::{Budget, Configuration, Experiment};
use crate::store::Store;

pub use crate::spec::HOTPLUG_WALL_METRIC as WALL_METRIC;

pub(crate) fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// A metric of the run that wrote `cpu`, lower is better.
pub(crate) fn lower(name: impl Into<String>, value: f64, unit: &str, cpu: u32) -> Metric {
    Metric::new(name, value, unit, MetricDirection::Lower).on_cpu(cpu)
}

/// A hotplug executor keeps the refusal that ended its session typed, for [`run_protocol`]
/// to return as it is (the protocol only sees its text).
pub(crate) trait Fatal: Executor {
    /// Where the refusal is kept.
    fn fatal(&mut self) -> &mut Option<HotplugError>;

    /// A refusal ends the session: kept typed, the run fails as fatal.
    fn fail(&mut self, e: HotplugError) -> RunError {
        let message = ExecError::Invalid(error_chain(&e));
        *self.fatal() = Some(e);
        RunError::Fatal(message)
    }
}

/// Run `experiment` through the protocol with a hotplug executor: the refusal that ended it
/// (kept by the executor) comes back as it is, a protocol failure with its cause, and a stop
/// on an error as [`HotplugError::Unexpected`]; otherwise the outcome (completed or
/// interrupted, as the caller decides).
pub(crate) fn run_protocol(
    store: &mut Store,
    exec: &mut dyn Fatal,
    experiment: &Experiment,
    budget: &Budget,
    command: &str,
    stop: &AtomicBool,
) -> Result<Outcome, HotplugError> {
    let outcome = protocol::run_experiment(
        store,
        &mut *exec,
        experiment,
        budget,
        command,
        stop,
        &mut Silent,
    );
    if let Some(e) = exec.fatal().take() {
        return Err(e);
    }
    let outcome = outcome?;
    if let StopReason::Error(e) = &outcome.stop {
        return Err(HotplugError::Unexpected(e.clone()));
    }
    Ok(outcome)
}

pub(crate) fn configuration(m: Mitigation) -> Configuration {
    Configuration {
        label: m.as_str().to_string(),
        knobs: match m {
            Mitigation::RcuExpedited => vec!["rcu.expedited=1".to_string()],
            _ => Vec::new(),
        },
    }
}

/// The side metrics of a traced operation of `cpu`: span, sum of steps, arch time, each
/// step's time.
pub(crate) fn step_metrics(t: &OpTrace, cpu: u32) -> Vec<Metric> {
    let mut side = vec![
        lower("hotplug.span_ms", ms(t.span_ns), "ms", cpu),
        lower("hotplug.steps_ms", ms(t.steps_sum_ns), "ms", cpu),
        lower("hotplug.arch_ms", ms(t.arch_ns), "ms", cpu),
    ];
    let mut per_step: BTreeMap<String, u64> = BTreeMap::new();
    for s in &t.steps {
        *per_step
            .entry(format!("step_ms:{}:{}", s.state, s.callback))
            .or_default() += s.exclusive_ns;
    }
    side.extend(
        per_step
            .into_iter()
            .map(|(k, v)| lower(k, ms(v), "ms", cpu)),
    );
    side
}

/// The knobs a hotplug session touches, as they are now (after restore: as found).
pub(crate) fn knobs_as_found(root: &Path, cpus: &[u32]) -> Vec<(String, String)> {
    let read = |p: &str| {
        std::fs::read_to_string(root.join(p.trim_start_matches('/')))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let mut v = vec![(
        "rcu.expedited".to_string(),
        read("/sys/kernel/rcu_expedited"),
    )];
    for c in cpus {
        v.push((
            format!("cpu.online@{c}"),
            read(&format!("/sys/devices/system/cpu/cpu{c}/online")),
        ));
        v.push((
            format!("cpu.hotplug_fail@{c}"),
            read(&format!("/sys/devices/system/cpu/cpu{c}/hotplug/fail")),
        ));
    }
    v
}
