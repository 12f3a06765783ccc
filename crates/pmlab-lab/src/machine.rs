//! The real executor: knobs through a [`Knobs`] backend (the journaled kernel transaction),
//! the built-in workloads, and side metrics from [`SideSource`]s (counter deltas, traces)
//! taken right around each workload's measured part.

use crate::executor::{ExecError, Executor, RunContext, RunError, RunOutput};
use crate::spec::{Configuration, Experiment, WorkloadDef};
use crate::system::SystemSnapshot;
use pmlab_kernel::knob::{Assignment, KnobError, KnobId};
use pmlab_kernel::Metric;
use pmlab_workload::{Probe, ProbeError, WorkloadError, WorkloadResult, WorkloadSpec};
use std::path::PathBuf;

/// How knobs are validated, read, set and restored.
pub trait Knobs {
    /// Check assignments without writing anything.
    fn validate(&self, assignments: &[Assignment]) -> Result<(), KnobError>;
    /// Current values of knobs (names with `@CPUS`), for the system snapshot.
    fn read(&self, names: &[KnobId]) -> Vec<(String, String)>;
    /// Machine = as found + these assignments (knobs set by an earlier call and absent here go back).
    fn switch_to(&mut self, assignments: &[Assignment]) -> Result<(), KnobError>;
    /// Every knob back as found.
    fn restore(&mut self) -> Result<(), KnobError>;
}

/// A backend without knob support: the machine as found only.
pub struct NoKnobs {
    /// Why knobs are unavailable (said when one is asked for).
    pub reason: String,
}

impl Knobs for NoKnobs {
    fn validate(&self, assignments: &[Assignment]) -> Result<(), KnobError> {
        match assignments.first() {
            None => Ok(()),
            Some(a) => Err(KnobError::Invalid {
                assignment: a.to_string(),
                reason: format!("cannot be set: {}", self.reason),
            }),
        }
    }
    fn read(&self, _: &[KnobId]) -> Vec<(String, String)> {
        Vec::new()
    }
    fn switch_to(&mut self, assignments: &[Assignment]) -> Result<(), KnobError> {
        self.validate(assignments)
    }
    fn restore(&mut self) -> Result<(), KnobError> {
        Ok(())
    }
}

/// Knobs through the journaled kernel transaction (`pmlab_kernel::knob::Transaction`):
/// validated before any write, journaled, restored on restore/drop/signals.
pub struct TransactionKnobs {
    root: pmlab_kernel::Root,
    txn: Option<pmlab_kernel::knob::Transaction>,
}

impl TransactionKnobs {
    /// Knobs under `root`; no transaction until the first configuration.
    pub fn new(root: pmlab_kernel::Root) -> Self {
        TransactionKnobs { root, txn: None }
    }
}

impl Knobs for TransactionKnobs {
    fn validate(&self, assignments: &[Assignment]) -> Result<(), KnobError> {
        pmlab_kernel::knob::validate(&self.root, assignments)
    }
    fn read(&self, names: &[KnobId]) -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| {
                let v =
                    pmlab_kernel::knob::read(&self.root, n).unwrap_or_else(|e| format!("({e})"));
                (n.to_string(), v)
            })
            .collect()
    }
    fn switch_to(&mut self, assignments: &[Assignment]) -> Result<(), KnobError> {
        if self.txn.is_none() {
            if assignments.is_empty() {
                return Ok(());
            }
            let t = pmlab_kernel::knob::Transaction::begin(&self.root)?;
            self.txn = Some(t);
        }
        let t = self.txn.as_mut().expect("transaction");
        t.switch_to(assignments)
    }
    fn restore(&mut self) -> Result<(), KnobError> {
        match self.txn.as_mut() {
            Some(t) => t.restore(),
            None => Ok(()),
        }
    }
}

/// A source of side metrics around the measured part of a run. Sources start in list order
/// and stop in reverse order, so the first source's own cost stays outside the others.
pub trait SideSource {
    /// Which run comes next (before `before`); `label` is the configuration's.
    fn begin_run(&mut self, _context: &RunContext, _label: &str) {}
    /// The CPUs the next run's workload runs on (empty: any), before `before`.
    fn workload_cpus(&mut self, _cpus: &[u32]) {}
    /// Start measuring, right before the measured part.
    fn before(&mut self) -> Result<(), ProbeError>;
    /// Stop measuring, right after the measured part; the metrics of the run.
    fn after(&mut self) -> Result<Vec<Metric>, ProbeError>;
    /// A trace file written by this source for the last run, if any.
    fn trace_path(&mut self) -> Option<PathBuf> {
        None
    }
}

/// Counter deltas (cpuidle, interrupts by kind, softirqs, context switches, RAPL) around the
/// measured part, from `pmlab_kernel::counters`.
pub struct CounterSource {
    root: PathBuf,
    before: Option<pmlab_kernel::counters::Snapshot>,
}

impl CounterSource {
    /// Counters read under `root` (`/`, or a fake tree).
    pub fn new(root: PathBuf) -> Self {
        CounterSource { root, before: None }
    }
}

impl SideSource for CounterSource {
    fn before(&mut self) -> Result<(), ProbeError> {
        self.before = Some(pmlab_kernel::counters::Snapshot::take_at(&self.root)?);
        Ok(())
    }
    fn after(&mut self) -> Result<Vec<Metric>, ProbeError> {
        let after = pmlab_kernel::counters::Snapshot::take_at(&self.root)?;
        match self.before.take() {
            Some(before) => Ok(pmlab_kernel::counters::delta_metrics(&before, &after)),
            None => Ok(Vec::new()),
        }
    }
}

/// The executor that runs experiments on this machine.
pub struct MachineExecutor {
    root: PathBuf,
    knobs: Box<dyn Knobs>,
    specs: Vec<WorkloadSpec>,
    sources: Vec<Box<dyn SideSource>>,
    /// Label of the configuration in place.
    label: String,
    /// `--wait-quiet`: wait for a quiet machine after each settle.
    wait_quiet: Option<crate::quiet::WaitQuiet>,
    /// How the last wait for a quiet machine ended, for the next run's side metrics.
    waited: Option<crate::quiet::Waited>,
}

impl MachineExecutor {
    /// `root` is `/` in production (a fake tree in tests: only the system snapshot reads it).
    pub fn new(root: PathBuf, knobs: Box<dyn Knobs>, sources: Vec<Box<dyn SideSource>>) -> Self {
        MachineExecutor {
            root,
            knobs,
            specs: Vec::new(),
            sources,
            label: String::new(),
            wait_quiet: None,
            waited: None,
        }
    }

    /// Wait for a quiet machine before each run (`--wait-quiet`); None: do not.
    pub fn waiting_quiet(mut self, wait_quiet: Option<crate::quiet::WaitQuiet>) -> Self {
        self.wait_quiet = wait_quiet;
        self
    }
}

impl MachineExecutor {
    /// One run of a workload in the configuration in place, with every side source around
    /// its measured part: the result, the side metrics and the trace written, if any.
    pub fn run_spec(
        &mut self,
        spec: &WorkloadSpec,
        context: &RunContext,
    ) -> Result<(WorkloadResult, Vec<Metric>, Option<PathBuf>), WorkloadError> {
        // A workload whose CPUs cannot be told is taken to use any CPU.
        let cpus = spec.cpus().unwrap_or_default();
        for s in self.sources.iter_mut() {
            s.begin_run(context, &self.label);
            s.workload_cpus(&cpus);
        }
        let mut probe = SourcesProbe {
            sources: &mut self.sources,
            metrics: Vec::new(),
        };
        let result = pmlab_workload::run(spec, &mut probe);
        let side_metrics = std::mem::take(&mut probe.metrics);
        let trace_path = self.sources.iter_mut().find_map(|s| s.trace_path());
        result.map(|r| (r, side_metrics, trace_path))
    }
}

/// Calls every side source around the measured part and keeps what they report.
struct SourcesProbe<'a> {
    sources: &'a mut [Box<dyn SideSource>],
    metrics: Vec<Metric>,
}

impl Probe for SourcesProbe<'_> {
    fn before(&mut self) -> Result<(), ProbeError> {
        for s in self.sources.iter_mut() {
            s.before()?;
        }
        Ok(())
    }
    fn after(&mut self) -> Result<(), ProbeError> {
        for s in self.sources.iter_mut().rev() {
            self.metrics.extend(s.after()?);
        }
        // energy.J / power.W: the best source among all of them (a meter over the counters').
        pmlab_kernel::counters::best_energy(&mut self.metrics);
        Ok(())
    }
}

impl Executor for MachineExecutor {
    fn settle(&mut self, duration: std::time::Duration) -> Result<(), RunError> {
        if pmlab_workload::settle(pmlab_kernel::Nanos(duration.as_nanos() as u64))? {
            return Err(pmlab_workload::WorkloadError::Cancelled.into());
        }
        self.waited = None;
        if let Some(q) = self.wait_quiet {
            self.waited = Some(q.wait(&self.root).map_err(|e| match e {
                crate::quiet::QuietError::Cancelled => {
                    RunError::from(pmlab_workload::WorkloadError::Cancelled)
                }
                e => RunError::from(pmlab_workload::WorkloadError::Probe(Box::new(e))),
            })?);
        }
        Ok(())
    }

    fn validate(&mut self, experiment: &Experiment) -> Result<(), ExecError> {
        let mut specs = Vec::new();
        for w in &experiment.workloads {
            specs.push(WorkloadSpec::from_words(&w.argv)?);
        }
        for c in &experiment.configurations {
            self.knobs
                .validate(&c.knobs)
                .map_err(|source| ExecError::Configuration {
                    label: c.label.clone(),
                    source,
                })?;
        }
        self.specs = specs;
        Ok(())
    }

    fn snapshot(&mut self, experiment: &Experiment) -> SystemSnapshot {
        let mut s = SystemSnapshot::read(&self.root);
        s.knobs = self.knobs.read(&experiment.all_knob_names());
        s
    }

    fn configure(&mut self, configuration: &Configuration) -> Result<(), ExecError> {
        self.label = configuration.label.clone();
        Ok(self.knobs.switch_to(&configuration.knobs)?)
    }

    fn run(&mut self, workload: &WorkloadDef, context: &RunContext) -> Result<RunOutput, RunError> {
        let spec = match self.specs.get(context.workload) {
            Some(s) => s.clone(),
            None => WorkloadSpec::from_words(&workload.argv)?,
        };
        let (r, mut side_metrics, trace_path) = self.run_spec(&spec, context)?;
        if let Some(w) = self.waited.take() {
            side_metrics.extend(w.metrics());
        }
        Ok(RunOutput {
            metrics: r.metrics,
            side_metrics,
            trace_path,
        })
    }

    fn restore(&mut self) -> Result<(), ExecError> {
        Ok(self.knobs.restore()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Kind;

    struct LogKnobs(std::rc::Rc<std::cell::RefCell<Vec<String>>>);
    impl Knobs for LogKnobs {
        fn validate(&self, a: &[Assignment]) -> Result<(), KnobError> {
            match a.iter().find(|k| k.knob().name().starts_with("bad")) {
                Some(k) => Err(KnobError::Unknown {
                    name: Box::new(k.knob().clone()),
                    hint: String::new(),
                }),
                None => Ok(()),
            }
        }
        fn read(&self, names: &[KnobId]) -> Vec<(String, String)> {
            names.iter().map(|n| (n.to_string(), "0".into())).collect()
        }
        fn switch_to(&mut self, a: &[Assignment]) -> Result<(), KnobError> {
            let a: Vec<String> = a.iter().map(Assignment::to_string).collect();
            self.0.borrow_mut().push(format!("switch {}", a.join(" ")));
            Ok(())
        }
        fn restore(&mut self) -> Result<(), KnobError> {
            self.0.borrow_mut().push("restore".into());
            Ok(())
        }
    }

    struct CountSource(usize);
    impl SideSource for CountSource {
        fn before(&mut self) -> Result<(), ProbeError> {
            self.0 += 1;
            Ok(())
        }
        fn after(&mut self) -> Result<Vec<Metric>, ProbeError> {
            Ok(vec![Metric::new(
                "count",
                self.0 as f64,
                "",
                pmlab_kernel::Direction::Neutral,
            )])
        }
    }

    #[test]
    fn counter_side_metrics_after_a_run() {
        let mut sources: Vec<Box<dyn SideSource>> =
            vec![Box::new(CounterSource::new(PathBuf::from("/")))];
        let mut p = SourcesProbe {
            sources: &mut sources,
            metrics: Vec::new(),
        };
        pmlab_workload::run(
            &WorkloadSpec::Idle {
                duration: pmlab_kernel::Nanos(20_000_000),
            },
            &mut p,
        )
        .unwrap();
        let window = p
            .metrics
            .iter()
            .find(|m| m.name == "counters.window_s")
            .unwrap()
            .value;
        assert!(window >= 0.02, "{window}");
        assert!(p.metrics.iter().any(|m| m.name == "ctxt.per_s"));
    }

    #[test]
    fn missing_counter_tree_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = CounterSource::new(dir.path().to_path_buf());
        let e = pmlab_kernel::error_chain(&*c.before().unwrap_err());
        assert!(e.contains("proc/stat") && e.contains("No such file"), "{e}");
    }

    #[test]
    fn runs_a_real_workload_with_side_metrics_and_knobs() {
        let log = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let mut m = MachineExecutor::new(
            PathBuf::from("/"),
            Box::new(LogKnobs(log.clone())),
            vec![Box::new(CountSource(0))],
        );
        let exp = Experiment::new(
            Kind::Compare,
            "t".into(),
            vec![Configuration::parse("a", "x.y=1").unwrap()],
            vec![WorkloadDef::new(vec!["idle".into(), "--duration".into(), "1ms".into()]).unwrap()],
            None,
        )
        .unwrap();
        m.validate(&exp).unwrap();
        assert_eq!(
            m.snapshot(&exp).knobs,
            vec![("x.y".to_string(), "0".to_string())]
        );
        m.configure(&exp.configurations[0]).unwrap();
        let ctx = RunContext {
            experiment_id: 1,
            configuration: 0,
            workload: 0,
            round: 1,
            position: 0,
            warmup: false,
            sequence: 0,
        };
        let out = m.run(&exp.workloads[0], &ctx).unwrap();
        assert!(!out.metrics.is_empty());
        assert_eq!(out.side_metrics[0].value, 1.0);
        m.restore().unwrap();
        assert_eq!(
            *log.borrow(),
            vec!["switch x.y=1".to_string(), "restore".to_string()]
        );

        let bad = Experiment::new(
            Kind::Compare,
            "t".into(),
            vec![Configuration::parse("a", "bad.knob=1").unwrap()],
            vec![WorkloadDef::new(vec!["idle".into(), "--duration".into(), "1ms".into()]).unwrap()],
            None,
        )
        .unwrap();
        assert!(pmlab_kernel::error_chain(&m.validate(&bad).unwrap_err())
            .contains("unknown knob `bad.knob`"));
        let mut bad_w = bad.clone();
        bad_w.configurations[0].knobs.clear();
        bad_w.workloads[0].argv = vec!["warp".into()];
        assert!(m.validate(&bad_w).is_err());
        assert!(NoKnobs {
            reason: "no".into()
        }
        .validate(&[Assignment::rcu_expedited(true)])
        .is_err());
    }
}
