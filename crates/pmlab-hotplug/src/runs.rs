//! Hotplug results in the result store: a latency session is stored by the protocol as it
//! runs ([`super::lab`]): configurations are the mitigations, workloads are (direction, CPU,
//! load level), every operation is a run with its wall time as primary metric and span, arch
//! time and per-step times as side metrics. An injection walk is stored the same way, one
//! run per attempt, here.

use std::collections::BTreeMap;
use std::path::Path;

use pmlab_kernel::{Direction as MetricDirection, Metric};

use super::inject::{InjectOutcome, InjectResult};
use super::sysfs::{monotonic_ns, Direction};
use super::trace::OpTrace;
use super::Mitigation;
use crate::spec::{Budget, Configuration, Experiment, Kind, WorkloadDef};
use crate::store::{now_ns, ExperimentStatus, NewRun, RunStatus, Store, StoreError};
use crate::system::SystemSnapshot;

pub use crate::spec::HOTPLUG_WALL_METRIC as WALL_METRIC;

pub(crate) fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

pub(crate) fn lower(name: impl Into<String>, value: f64, unit: &str) -> Metric {
    Metric::new(name, value, unit, MetricDirection::Lower)
}

/// Realtime ns of a CLOCK_MONOTONIC instant (for `started_ns`).
fn realtime_of(mono_ns: u64, offset: i64) -> i64 {
    mono_ns as i64 + offset
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

/// Store an injection walk; returns the experiment id.
pub fn save_inject(
    db: &Path,
    r: &InjectResult,
    command: &str,
    root: &Path,
) -> Result<i64, StoreError> {
    let mut store = Store::open(db)?;
    let workloads: Vec<WorkloadDef> = [Direction::Offline, Direction::Online]
        .iter()
        .map(|d| {
            let argv: Vec<String> = ["hotplug", "inject-fail", d.short()]
                .map(String::from)
                .to_vec();
            WorkloadDef {
                label: argv.join(" "),
                argv,
            }
        })
        .collect();
    let experiment = Experiment::new(
        Kind::RunSpec,
        "hotplug inject-fail".into(),
        vec![configuration(Mitigation::None)],
        workloads,
        None,
    )
    .expect("one configuration");
    let budget = Budget {
        max_runs: Some(r.attempts.len()),
        settle: std::time::Duration::ZERO,
        ..Budget::default()
    };
    let mut system = SystemSnapshot::read(root);
    system.knobs = knobs_as_found(root, &r.cpus);
    let ids = store.create_experiment(&experiment, &budget, command, &system)?;
    let offset = now_ns() - monotonic_ns() as i64;
    for (i, a) in r.attempts.iter().enumerate() {
        let mut side = vec![
            Metric::new("cpu", a.cpu as f64, "", MetricDirection::Neutral),
            Metric::new("inject.state", a.state as f64, "", MetricDirection::Neutral),
            Metric::new(
                "inject.rolled_back",
                (a.outcome == InjectOutcome::RolledBack) as u8 as f64,
                "",
                MetricDirection::Neutral,
            ),
        ];
        if let Some(rb) = a.rollback_ns {
            side.push(lower("inject.rollback_ms", ms(rb), "ms"));
        }
        let (status, error) = match &a.outcome {
            InjectOutcome::Unexpected(d) => (RunStatus::Failed, Some(d.clone())),
            _ => (RunStatus::Ok, None),
        };
        store.insert_run(&NewRun {
            experiment: ids.experiment,
            configuration: ids.configurations[0],
            workload: ids.workloads[(a.direction == Direction::Online) as usize],
            round: 0,
            position: i,
            warmup: false,
            started_ns: realtime_of(a.start_ns(), offset),
            duration_ns: a.wall_ns as i64,
            status,
            error,
            metrics: vec![lower("inject.wall_ms", ms(a.wall_ns), "ms")],
            side_metrics: side,
            trace_path: None,
        })?;
    }
    store.finish_experiment(ids.experiment, ExperimentStatus::Complete, "walk done")?;
    Ok(ids.experiment)
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
