//! Hotplug results in the result store: a latency session is stored by the protocol as it
//! runs ([`super::lab`]): configurations are the mitigations, workloads are (direction, CPU,
//! load level), every operation is a run with its wall time as primary metric and span, arch
//! time and per-step times as side metrics. An injection walk is stored the same way by the
//! protocol ([`super::inject`]), one run per attempt.

use std::collections::BTreeMap;
use std::path::Path;

use pmlab_kernel::knob::Assignment;
use pmlab_kernel::{Direction as MetricDirection, Metric};

use super::trace::OpTrace;
use super::Mitigation;
use crate::spec::Configuration;

pub use crate::spec::HOTPLUG_WALL_METRIC as WALL_METRIC;

pub(crate) fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

pub(crate) fn lower(name: impl Into<String>, value: f64, unit: &str) -> Metric {
    Metric::new(name, value, unit, MetricDirection::Lower)
}

pub(crate) fn configuration(m: Mitigation) -> Configuration {
    Configuration {
        label: m.as_str().to_string(),
        knobs: match m {
            Mitigation::RcuExpedited => vec![Assignment::rcu_expedited(true)],
            _ => Vec::new(),
        },
    }
}

/// The side metrics of a traced operation: span, sum of steps, arch time, each step's time.
pub(crate) fn step_metrics(t: &OpTrace) -> Vec<Metric> {
    let mut side = vec![
        lower("hotplug.span_ms", ms(t.span_ns), "ms"),
        lower("hotplug.steps_ms", ms(t.steps_sum_ns), "ms"),
        lower("hotplug.arch_ms", ms(t.arch_ns), "ms"),
    ];
    let mut per_step: BTreeMap<String, u64> = BTreeMap::new();
    for s in &t.steps {
        *per_step
            .entry(format!("step_ms:{}:{}", s.state, s.callback))
            .or_default() += s.exclusive_ns;
    }
    side.extend(per_step.into_iter().map(|(k, v)| lower(k, ms(v), "ms")));
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
