//! Saving hotplug results in the result store: one experiment per session; configurations
//! are the mitigations, workloads are (direction, load level), every operation is a run
//! with its wall time as primary metric and span, arch time and per-step times as side
//! metrics. An injection walk is stored the same way, one run per attempt.

use std::collections::BTreeMap;
use std::path::Path;

use pmlab_kernel::{Direction as MetricDirection, Metric};

use super::inject::{InjectOutcome, InjectResult};
use super::lab::LabResult;
use super::sysfs::{monotonic_ns, Direction};
use super::Mitigation;
use crate::spec::{Budget, Configuration, Experiment, Kind, WorkloadDef};
use crate::store::{now_ns, ExperimentStatus, NewRun, RunStatus, Store, StoreError};
use crate::system::SystemSnapshot;

/// Name of the primary metric of a hotplug run.
pub const WALL_METRIC: &str = "hotplug.wall_ms";

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn lower(name: impl Into<String>, value: f64, unit: &str) -> Metric {
    Metric::new(name, value, unit, MetricDirection::Lower)
}

/// Realtime ns of a CLOCK_MONOTONIC instant (for `started_ns`).
fn realtime_of(mono_ns: u64, offset: i64) -> i64 {
    mono_ns as i64 + offset
}

fn configuration(m: Mitigation) -> Configuration {
    Configuration {
        label: m.as_str().to_string(),
        knobs: match m {
            Mitigation::RcuExpedited => vec!["rcu.expedited=1".to_string()],
            _ => Vec::new(),
        },
    }
}

/// Store a latency session; returns the experiment id.
pub fn save_lab(db: &Path, r: &LabResult, command: &str, root: &Path) -> Result<i64, StoreError> {
    let mut store = Store::open(db)?;
    let cpus = super::format_cpu_list(&r.cpus);
    let mut workloads = Vec::new();
    let mut workload_index = BTreeMap::new();
    for &load in &r.loads {
        for dir in [Direction::Offline, Direction::Online] {
            workload_index.insert((dir, load), workloads.len());
            let argv: Vec<String> = [
                "hotplug",
                dir.short(),
                "--cpus",
                &cpus,
                "--load",
                &load.to_string(),
                "--loader",
                r.loader.as_str(),
            ]
            .map(String::from)
            .to_vec();
            workloads.push(WorkloadDef {
                label: argv.join(" "),
                argv,
            });
        }
    }
    let configs: Vec<Configuration> = r.configurations.iter().map(|&m| configuration(m)).collect();
    let mut experiment = Experiment::new(Kind::RunSpec, "hotplug".into(), configs, workloads, None)
        .expect("hotplug experiment labels are distinct");
    experiment.hooks = Default::default();
    let budget = Budget {
        max_runs: Some(r.ops.len()),
        seed: r.seed,
        ..Budget::default()
    };
    let mut system = SystemSnapshot::read(root);
    system.knobs = knobs_as_found(root, &r.cpus);
    let ids = store.create_experiment(&experiment, &budget, command, &system)?;
    let offset = now_ns() - monotonic_ns() as i64;
    let mut position_in_round: BTreeMap<u32, usize> = BTreeMap::new();
    for op in &r.ops {
        let config = r
            .configurations
            .iter()
            .position(|c| *c == op.config)
            .unwrap_or(0);
        let workload = workload_index[&(op.direction, op.load)];
        let pos = position_in_round.entry(op.round).or_insert(0);
        let mut side = vec![Metric::new(
            "cpu",
            op.cpu as f64,
            "",
            MetricDirection::Neutral,
        )];
        if let Some(t) = &op.trace {
            side.push(lower("hotplug.span_ms", ms(t.span_ns), "ms"));
            side.push(lower("hotplug.steps_ms", ms(t.steps_sum_ns), "ms"));
            side.push(lower("hotplug.arch_ms", ms(t.arch_ns), "ms"));
            let mut per_step: BTreeMap<String, u64> = BTreeMap::new();
            for s in &t.steps {
                *per_step
                    .entry(format!("step_ms:{}:{}", s.state, s.callback))
                    .or_default() += s.exclusive_ns;
            }
            side.extend(per_step.into_iter().map(|(k, v)| lower(k, ms(v), "ms")));
        }
        store.insert_run(&NewRun {
            experiment: ids.experiment,
            configuration: ids.configurations[config],
            workload: ids.workloads[workload],
            round: op.round as usize,
            position: *pos,
            warmup: false,
            started_ns: realtime_of(op.start_ns, offset),
            duration_ns: op.wall_ns as i64,
            status: RunStatus::Ok,
            error: None,
            metrics: vec![lower(WALL_METRIC, ms(op.wall_ns), "ms")],
            side_metrics: side,
            trace_path: None,
        })?;
        *pos += 1;
    }
    let (status, reason) = if r.interrupted {
        (ExperimentStatus::Incomplete, "interrupted by a signal")
    } else {
        (ExperimentStatus::Complete, "all cycles done")
    };
    store.finish_experiment(ids.experiment, status, reason)?;
    Ok(ids.experiment)
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
fn knobs_as_found(root: &Path, cpus: &[u32]) -> Vec<(String, String)> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotplug::lab::OpRecord;
    use crate::hotplug::loaders::LoaderKind;

    #[test]
    fn a_session_round_trips_through_the_store() {
        let t = tempfile::tempdir().unwrap();
        let db = t.path().join("pmlab.db");
        let ops: Vec<OpRecord> = (0..4)
            .flat_map(|round| {
                [Mitigation::None, Mitigation::RcuExpedited].map(|config| OpRecord {
                    cpu: 1,
                    direction: if round % 2 == 0 {
                        Direction::Offline
                    } else {
                        Direction::Online
                    },
                    load: 0,
                    config,
                    round,
                    start_ns: 1_000,
                    end_ns: 31_000_000,
                    wall_ns: 30_000_000 + round as u64,
                    trace: None,
                })
            })
            .collect();
        let r = LabResult {
            cpus: vec![1],
            cycles: 2,
            loads: vec![0],
            loader: LoaderKind::Spin,
            configurations: vec![Mitigation::None, Mitigation::RcuExpedited],
            seed: 42,
            boost_mode: None,
            traced: false,
            interrupted: false,
            ops,
            notes: vec![],
            states: Default::default(),
        };
        let id = save_lab(&db, &r, "pmlab hotplug", t.path()).unwrap();
        let store = Store::open(&db).unwrap();
        let e = store.load(id).unwrap();
        assert_eq!(e.configurations.len(), 2);
        assert_eq!(
            e.configurations[1].knobs,
            vec!["rcu.expedited=1".to_string()]
        );
        assert_eq!(e.workloads.len(), 2);
        assert_eq!(e.runs.len(), 8);
        assert_eq!(e.runs[0].metrics[0].name, WALL_METRIC);
        assert!((e.runs[0].metrics[0].value - 30.0).abs() < 1e-9);
        assert_eq!(e.info.seed, 42);
    }
}
