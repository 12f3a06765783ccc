//! The latency lab: an executor of the experiment protocol whose unit of work is one timed
//! offline or online write; each round runs every (configuration, load level) cycle in an
//! order shuffled from the recorded seed, every CPU offline then online, each operation
//! timed around its write and stored as it completes; the session is traced whole and
//! each operation's steps are added to its run at the end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Serialize;

use super::boost::{BoostCgroup, BoostMode};
use super::loaders::{LoaderCommand, LoaderKind, Loaders};
use super::runs::{configuration, lower, ms, run_protocol, step_metrics, Fatal, WALL_METRIC};
use super::states::StateTable;
use super::sysfs::{errno_meaning, read_trimmed, CpuFiles, Direction, TimedWrite};
use super::trace::OpTrace;
use super::tracer::{LabTracer, TimedOp};
use super::{HotplugError, Mitigation, Paths};
use crate::executor::{ExecError, Executor, RunContext, RunError, RunOutput};
use crate::protocol::StopReason;
use crate::spec::{Budget, Configuration, Experiment, Kind, WorkloadDef};
use crate::store::Store;
use crate::system::SystemSnapshot;
use pmlab_kernel::knob::{value::parse_bool, Assignment, Transaction};
use pmlab_kernel::Root;
use pmlab_workload::{allowed_cpus, Affinity, AffinityGuard};

/// What to run.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// Kernel files, under a root (`/` or a fake tree).
    pub paths: Paths,
    /// CPUs to cycle, one at a time.
    pub cpus: Vec<u32>,
    /// Measured cycles per CPU, configuration and load level.
    pub cycles: u32,
    /// Load levels: loader instances running in the background.
    pub loads: Vec<u32>,
    /// The background loader.
    pub loader: LoaderKind,
    /// How to start one loader instance.
    pub loader_command: LoaderCommand,
    /// Configurations, baseline first (see [`Mitigation::configurations`]).
    pub configurations: Vec<Mitigation>,
    /// Seed of the per-round shuffles (recorded with the experiment).
    pub seed: u64,
    /// Trace the session (per-step times need it).
    pub trace: bool,
    /// Set by a signal handler: stop after the current operation.
    pub stop: Arc<AtomicBool>,
}

/// One measured operation.
#[derive(Debug, Clone, Serialize)]
pub struct OpRecord {
    /// The CPU written.
    pub cpu: u32,
    /// Offline (`down`) or online (`up`).
    #[serde(serialize_with = "Direction::serialize_short")]
    pub direction: Direction,
    /// Load level (loader instances) it ran under.
    pub load: u32,
    /// The configuration (mitigation) it ran in.
    pub config: Mitigation,
    /// Round, from 0.
    pub round: u32,
    /// CLOCK_MONOTONIC just before the write.
    pub start_ns: u64,
    /// CLOCK_MONOTONIC just after it returned.
    pub end_ns: u64,
    /// Wall time around the write(2).
    pub wall_ns: u64,
    /// Its cpuhp steps, when traced.
    pub trace: Option<OpTrace>,
}

/// Everything the report needs.
#[derive(Debug, Clone, Serialize)]
pub struct LabResult {
    /// The session's experiment in the store.
    #[serde(skip)]
    pub experiment: i64,
    /// CPUs cycled.
    pub cpus: Vec<u32>,
    /// Measured cycles per CPU, configuration and load level.
    pub cycles: u32,
    /// Load levels.
    pub loads: Vec<u32>,
    /// The background loader.
    pub loader: LoaderKind,
    /// Configurations, baseline first.
    pub configurations: Vec<Mitigation>,
    /// Seed of the per-round shuffles.
    pub seed: u64,
    /// How kthread-boost was applied, when it was compared.
    pub boost_mode: Option<BoostMode>,
    /// Whether the session was traced.
    pub traced: bool,
    /// Stopped early by a signal; `ops` holds what was measured until then.
    pub interrupted: bool,
    /// Every measured operation, in run order.
    pub ops: Vec<OpRecord>,
    /// What a reader should know (repairs, loaders that exited, trace gaps).
    pub notes: Vec<String>,
    /// `hotplug/states` as read at the start.
    #[serde(skip)]
    pub states: StateTable,
}

/// Progress callbacks (the CLI draws a bar).
pub trait Progress {
    /// The session starts: `total_ops` operations are planned.
    fn begin(&mut self, total_ops: u64);
    /// One operation done; `message` says which.
    fn step(&mut self, message: &str);
    /// The session is over.
    fn finish(&mut self);
}

/// A no-op progress.
pub struct NoProgress;
impl Progress for NoProgress {
    fn begin(&mut self, _: u64) {}
    fn step(&mut self, _: &str) {}
    fn finish(&mut self) {}
}

/// Begin the session's knob transaction (the kernel's one kind, journals of dead pmlab
/// sessions restored first) and journal in it each CPU's `online` and `fail` as found,
/// before anything is written: `Transaction::restore` (also on drop, and after a SIGKILL
/// the next pmlab command) puts them back, `fail` first (journaled last).
pub(crate) fn begin_transaction(paths: &Paths, cpus: &[u32]) -> Result<Transaction, HotplugError> {
    let sys_cpu = paths.sys_cpu();
    let mut txn = Transaction::begin(&Root::new(paths.root.clone()))?;
    let mut online = Vec::new();
    let mut fail = Vec::new();
    for &c in cpus {
        let f = CpuFiles::new(&sys_cpu, c);
        online.push(Assignment::cpu_online(c, f.is_online()?));
        if f.fail().map(|x| x == -1).unwrap_or(false) {
            // The knob names the file as on the machine; the transaction puts it under its root.
            fail.push(Assignment::hotplug_fail(c, -1));
        }
    }
    txn.apply(&online)?;
    if !fail.is_empty() {
        txn.apply(&fail)?;
    }
    Ok(txn)
}

/// Set `rcu_expedited` to 1 (`on`) or back to `found` through the session's transaction.
fn set_rcu_expedited(
    txn: &mut Transaction,
    found: Option<&str>,
    on: bool,
) -> Result<(), HotplugError> {
    let found = found.ok_or_else(|| {
        HotplugError::Unsupported("this kernel has no /sys/kernel/rcu_expedited".into())
    })?;
    let want = on
        || parse_bool(found).ok_or_else(|| {
            HotplugError::Unsupported(format!(
                "/sys/kernel/rcu_expedited reads `{found}`, not a boolean"
            ))
        })?;
    Ok(txn.apply(&[Assignment::rcu_expedited(want)])?)
}

/// One timed operation; a kernel refusal is an error naming the errno.
fn timed_op(cpu: &CpuFiles, dir: Direction) -> Result<TimedWrite, HotplugError> {
    let w = cpu.write_online_timed(dir.online_after())?;
    if let Some(errno) = w.errno {
        return Err(HotplugError::Refused {
            path: cpu.online_path(),
            value: if dir.online_after() { "1" } else { "0" }.into(),
            errno,
            meaning: errno_meaning(errno),
        });
    }
    Ok(w)
}

/// The hotplug lab as an executor of the experiment protocol. Its unit of work is one timed
/// offline or online write of one CPU (a workload per CPU, direction and load level); the
/// workloads of a load level form a group, so each (configuration, load) step is a cycle:
/// every CPU offline then online, back to back. Loaders run for the level of the step; when
/// the level changes they are restarted and one unrecorded cycle per CPU warms them up.
struct CycleExecutor<'a> {
    opts: &'a LabOptions,
    /// CPUs' `online`/`fail` journaled, `rcu_expedited` set through it.
    txn: Transaction,
    /// `rcu_expedited` as found (None: this kernel has none).
    rcu_found: Option<String>,
    boost: Option<BoostCgroup>,
    cpus: Vec<CpuFiles>,
    /// Per workload: load level, index into `cpus`, direction.
    units: Vec<(u32, usize, Direction)>,
    loaders: Option<(u32, Loaders)>,
    /// The loaders' CPU mask: the one pmlab was started with, not the writer's.
    loader_affinity: Option<Affinity>,
    config: Option<Mitigation>,
    ops: Vec<OpRecord>,
    /// Where each op's run is in the store: (round, position).
    places: Vec<(usize, usize)>,
    notes: Vec<String>,
    /// A refusal that ended the session (returned as it is, not as text).
    fatal: Option<HotplugError>,
    progress: &'a mut dyn Progress,
}

impl CycleExecutor<'_> {
    fn stopped(&self) -> bool {
        self.opts.stop.load(Ordering::Relaxed)
    }

    fn mitigation(c: &Configuration) -> Result<Mitigation, ExecError> {
        Mitigation::parse(&c.label).map_err(|e| ExecError::Invalid(e.to_string()))
    }

    /// Loaders for `load` (restarted when the level changes, then one warm-up cycle per CPU).
    fn level(&mut self, load: u32) -> Result<(), HotplugError> {
        if self.loaders.as_ref().is_some_and(|(l, _)| *l == load) {
            return Ok(());
        }
        self.stop_loaders();
        let loaders = Loaders::start(
            self.opts.loader,
            &self.opts.loader_command,
            load,
            self.loader_affinity,
        )?;
        self.loaders = Some((load, loaders));
        for cpu in &self.cpus {
            for dir in [Direction::Offline, Direction::Online] {
                if self.stopped() {
                    return Err(HotplugError::Interrupted);
                }
                timed_op(cpu, dir)?;
            }
        }
        Ok(())
    }

    fn stop_loaders(&mut self) {
        if let Some((load, mut l)) = self.loaders.take() {
            if !l.all_running() {
                let note = format!(
                    "a {} loader exited during load level {load}",
                    self.opts.loader.as_str()
                );
                if !self.notes.contains(&note) {
                    self.notes.push(note);
                }
            }
            l.stop();
        }
    }

    /// One timed operation in the current configuration (kthread-boost around an online).
    fn operate(&mut self, k: usize, dir: Direction) -> Result<TimedWrite, HotplugError> {
        let boosted = self.config == Some(Mitigation::KthreadBoost) && dir == Direction::Online;
        if boosted {
            if let (Some(b), Some((_, l))) = (self.boost.as_mut(), self.loaders.as_ref()) {
                b.enter(&l.processes())?;
            }
        }
        let w = timed_op(&self.cpus[k], dir);
        if boosted {
            if let Some(b) = self.boost.as_mut() {
                b.leave()?;
            }
        }
        w
    }
}

impl Fatal for CycleExecutor<'_> {
    fn fatal(&mut self) -> &mut Option<HotplugError> {
        &mut self.fatal
    }
}

impl Executor for CycleExecutor<'_> {
    fn validate(&mut self, experiment: &Experiment) -> Result<(), ExecError> {
        for c in &experiment.configurations {
            Self::mitigation(c)?;
        }
        Ok(())
    }

    fn snapshot(&mut self, _: &Experiment) -> SystemSnapshot {
        let mut system = SystemSnapshot::read(&self.opts.paths.root);
        system.knobs = super::runs::knobs_as_found(&self.opts.paths.root, &self.opts.cpus);
        system
    }

    fn configure(&mut self, configuration: &Configuration) -> Result<(), ExecError> {
        let m = Self::mitigation(configuration)?;
        if self.config != Some(m) {
            // After a signal the knob write is refused: the protocol stops as interrupted.
            if self.opts.configurations.contains(&Mitigation::RcuExpedited) {
                set_rcu_expedited(
                    &mut self.txn,
                    self.rcu_found.as_deref(),
                    m == Mitigation::RcuExpedited,
                )?;
            }
            self.config = Some(m);
        }
        Ok(())
    }

    fn run(&mut self, _: &WorkloadDef, context: &RunContext) -> Result<RunOutput, RunError> {
        let (load, k, dir) = self.units[context.workload];
        if let Err(e) = self.level(load) {
            return Err(match e {
                HotplugError::Interrupted => RunError::Exec(e.into()),
                e => self.fail(e),
            });
        }
        let cpu = self.cpus[k].cpu;
        let already = match self.cpus[k].is_online() {
            Ok(online) => online == dir.online_after(),
            Err(e) => return Err(self.fail(e)),
        };
        if already {
            // Changed by someone else: this run fails, the session goes on.
            let e =
                HotplugError::Unexpected(format!(
                "cpu{cpu} was already {} before a {} operation (changed by someone else); skipped",
                if dir.online_after() { "online" } else { "offline" },
                dir.short()
            ));
            self.notes.push(e.to_string());
            return Err(RunError::Exec(e.into()));
        }
        let w = match self.operate(k, dir) {
            Ok(w) => w,
            Err(e) => return Err(self.fail(e)),
        };
        let config = self.config.unwrap_or(Mitigation::None);
        self.ops.push(OpRecord {
            cpu,
            direction: dir,
            load,
            config,
            round: context.round.saturating_sub(1) as u32,
            start_ns: w.start_ns,
            end_ns: w.end_ns,
            wall_ns: w.wall().0,
            trace: None,
        });
        self.places.push((context.round, context.position));
        self.progress.step(&format!(
            "load {load} · {} · cpu{cpu} {}",
            config.as_str(),
            dir.short()
        ));
        Ok(RunOutput {
            metrics: vec![lower(WALL_METRIC, ms(w.wall().0), "ms", cpu)],
            side_metrics: Vec::new(),
            trace_path: None,
        })
    }

    fn restore(&mut self) -> Result<(), ExecError> {
        // rcu_expedited is put back by the transaction with the CPUs.
        self.stop_loaders();
        if let Some(b) = self.boost.as_mut() {
            b.remove()?;
        }
        Ok(self.txn.restore()?)
    }
}

/// The experiment of a session: configurations are the mitigations, workloads (load, CPU,
/// direction), grouped per load level into cycles; the unit map says what each workload is.
fn experiment_of(opts: &LabOptions) -> (Experiment, Vec<(u32, usize, Direction)>) {
    let configurations = opts
        .configurations
        .iter()
        .map(|&m| configuration(m))
        .collect();
    let (mut workloads, mut units, mut groups) = (Vec::new(), Vec::new(), Vec::new());
    for &load in &opts.loads {
        let mut group = Vec::new();
        for (k, &cpu) in opts.cpus.iter().enumerate() {
            for dir in [Direction::Offline, Direction::Online] {
                let argv: Vec<String> = [
                    "hotplug",
                    dir.short(),
                    "--cpus",
                    &cpu.to_string(),
                    "--load",
                    &load.to_string(),
                    "--loader",
                    opts.loader.as_str(),
                ]
                .map(String::from)
                .to_vec();
                group.push(workloads.len());
                units.push((load, k, dir));
                workloads.push(WorkloadDef::new(argv).expect("a hotplug workload has words"));
            }
        }
        groups.push(group);
    }
    let experiment = Experiment::new(
        Kind::Hotplug,
        "hotplug".into(),
        configurations,
        workloads,
        None,
    )
    .and_then(|e| e.with_groups(groups))
    .expect("hotplug workloads are distinct, each in one group");
    (experiment, units)
}

/// Run the lab through the protocol, storing every operation as a run of `store`'s
/// experiment as it completes (each traced step is added to its run at the end). Every exit
/// path restores the machine: the protocol's restore puts CPUs, knobs and the boost cgroup
/// back and stops the loaders; the guards' drops do it again on an early return.
pub fn run_lab(
    opts: &LabOptions,
    store: &mut Store,
    command: &str,
    progress: &mut dyn Progress,
) -> Result<LabResult, HotplugError> {
    let sys_cpu = opts.paths.sys_cpu();
    let states = StateTable::read(&sys_cpu)?;
    let mut txn = begin_transaction(&opts.paths, &opts.cpus)?;
    let rcu_found = read_trimmed(&opts.paths.rcu_expedited()).ok();
    let mut notes: Vec<String> = txn
        .recovered
        .iter()
        .map(|l| format!("repaired what a killed pmlab session left: {l}"))
        .collect();
    let boost = if opts.configurations.contains(&Mitigation::KthreadBoost) {
        let b = BoostCgroup::create(&opts.paths.cgroup_fs())?;
        if b.mode == BoostMode::ThrottleLoaders {
            notes.push(
                "kthread-boost: this kernel refuses to move kthreadd (pid 2) between cgroups \
                 (EINVAL); applied the equivalent instead: the loaders go into a minimum-weight \
                 cpu cgroup for each online operation"
                    .to_string(),
            );
        }
        Some(b)
    } else {
        None
    };
    let boost_mode = boost.as_ref().map(|b| b.mode);
    if opts.configurations.contains(&Mitigation::RcuExpedited) {
        // Refuse before any operation when the knob is missing.
        set_rcu_expedited(&mut txn, rcu_found.as_deref(), false)?;
    }
    let tracer = if opts.trace {
        Some(LabTracer::start(&opts.paths, &opts.cpus)?)
    } else {
        None
    };
    let (experiment, units) = experiment_of(opts);
    let writer = pin_writer(opts, &mut notes)?;
    let per_round = units.len() * opts.configurations.len();
    let budget = Budget {
        // A fixed number of cycles: no adaptive stop.
        target_ci: 0.0,
        max_runs: Some(opts.cycles as usize * per_round),
        min_rounds: opts.cycles as usize,
        seed: opts.seed,
        stop_when_decided: false,
        warmup: false,
        // The unit is one write; the gaps between writes are the lab's own (the writer's pace).
        settle: std::time::Duration::ZERO,
        ..Budget::default()
    };
    progress.begin((opts.cycles as usize * per_round) as u64);
    let mut exec = CycleExecutor {
        opts,
        txn,
        rcu_found,
        boost,
        cpus: opts
            .cpus
            .iter()
            .map(|&c| CpuFiles::new(&sys_cpu, c))
            .collect(),
        units,
        loaders: None,
        loader_affinity: writer.as_ref().map(|g| g.saved()),
        config: None,
        ops: Vec::new(),
        places: Vec::new(),
        notes: Vec::new(),
        fatal: None,
        progress,
    };
    let outcome = run_protocol(store, &mut exec, &experiment, &budget, command, &opts.stop)?;
    notes.append(&mut exec.notes);
    let mut ops = std::mem::take(&mut exec.ops);
    if let Some(t) = tracer {
        let timed: Vec<TimedOp> = ops
            .iter()
            .map(|o| TimedOp {
                cpu: o.cpu,
                direction: o.direction,
                start_ns: o.start_ns,
                end_ns: o.end_ns,
            })
            .collect();
        let (traces, trace_notes) = t.finish(&timed, &states)?;
        notes.extend(trace_notes);
        for (op, tr) in ops.iter_mut().zip(traces) {
            op.trace = tr;
        }
        let missing = ops.iter().filter(|o| o.trace.is_none()).count();
        if missing > 0 {
            notes.push(format!(
                "{missing} operations have no cpuhp events in the trace"
            ));
        }
        let steps: Vec<_> = ops
            .iter()
            .zip(&exec.places)
            .filter_map(|(op, &place)| Some((place, step_metrics(op.trace.as_ref()?, op.cpu))))
            .collect();
        store.add_side_metrics(outcome.experiment_id, &steps)?;
    }
    exec.progress.finish();
    Ok(LabResult {
        experiment: outcome.experiment_id,
        cpus: opts.cpus.clone(),
        cycles: opts.cycles,
        loads: opts.loads.clone(),
        loader: opts.loader,
        configurations: opts.configurations.clone(),
        seed: opts.seed,
        boost_mode,
        traced: opts.trace,
        interrupted: outcome.stop == StopReason::Interrupted,
        ops,
        notes,
        states,
    })
}

/// Move the calling (writer) thread off the CPUs it cycles, until the guard drops. Writing
/// `0` to the online file of the CPU one runs on makes the kernel migrate the writer too,
/// and the time shows it (docs/development.md, "Validation figures", gives a shell loop's figures floating and
/// pinned). None on a fake tree (its CPUs are not this machine's) and when no other CPU is
/// allowed (noted).
fn pin_writer(
    opts: &LabOptions,
    notes: &mut Vec<String>,
) -> Result<Option<AffinityGuard>, HotplugError> {
    if !Root::new(&opts.paths.root).is_system() {
        return Ok(None);
    }
    let others: Vec<u32> = allowed_cpus()
        .map_err(HotplugError::Affinity)?
        .into_iter()
        .filter(|c| !opts.cpus.contains(c))
        .collect();
    if others.is_empty() {
        notes.push(
            "every CPU pmlab may run on is cycled: the writer migrates off each CPU it \
             offlines, and the times include that"
                .to_string(),
        );
        return Ok(None);
    }
    let guard = AffinityGuard::save().map_err(HotplugError::Affinity)?;
    Affinity::of(&others)
        .apply()
        .map_err(HotplugError::Affinity)?;
    Ok(Some(guard))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loaders::LoaderKind;
    use crate::store::RunStatus;
    use crate::testing::fake_sys_cpu;

    /// A session on a fake tree (two hot-pluggable CPUs, rcu_expedited): the protocol
    /// interleaves the configurations, each step a whole cycle, and stores every operation.
    #[test]
    fn a_session_goes_through_the_protocol_into_the_store() {
        let (t, sys_cpu) = fake_tree(3);
        std::fs::create_dir_all(t.path().join("sys/kernel")).unwrap();
        std::fs::write(t.path().join("sys/kernel/rcu_expedited"), "0\n").unwrap();
        let opts = LabOptions {
            paths: Paths::new(t.path()),
            cpus: vec![1, 2],
            cycles: 3,
            loads: vec![0],
            loader: LoaderKind::Spin,
            loader_command: LoaderCommand::system_tool(LoaderKind::Spin),
            configurations: vec![Mitigation::None, Mitigation::RcuExpedited],
            seed: 42,
            trace: false,
            stop: Arc::new(AtomicBool::new(false)),
        };
        let mut store = Store::in_memory().unwrap();
        let r = run_lab(&opts, &mut store, "pmlab hotplug", &mut NoProgress).unwrap();
        assert!(!r.interrupted);
        // 3 rounds × 2 configurations × 2 CPUs × (down, up).
        assert_eq!(r.ops.len(), 24);
        for round in 0..3 {
            for config in [Mitigation::None, Mitigation::RcuExpedited] {
                let ops: Vec<(u32, Direction)> = r
                    .ops
                    .iter()
                    .filter(|o| o.round == round && o.config == config)
                    .map(|o| (o.cpu, o.direction))
                    .collect();
                // Each step is one cycle, back to back: every CPU offline, then online.
                assert_eq!(
                    ops,
                    [
                        (1, Direction::Offline),
                        (1, Direction::Online),
                        (2, Direction::Offline),
                        (2, Direction::Online)
                    ]
                );
            }
        }
        // The machine is as found.
        for c in [1, 2] {
            assert!(CpuFiles::new(&sys_cpu, c).is_online().unwrap());
        }
        let rcu = std::fs::read_to_string(t.path().join("sys/kernel/rcu_expedited")).unwrap();
        assert_eq!(rcu.trim(), "0");
        let e = store.load(r.experiment).unwrap();
        assert_eq!(e.configurations.len(), 2);
        assert_eq!(
            e.configurations[1].knobs,
            vec!["rcu.expedited=1".to_string()]
        );
        assert_eq!(e.workloads.len(), 4, "(cpu, direction) at one load");
        assert_eq!(e.runs.len(), 24);
        assert!(e
            .runs
            .iter()
            .all(|r| r.status == RunStatus::Ok && !r.warmup));
        assert_eq!(e.runs[0].metrics[0].name, WALL_METRIC);
        // Each run's CPU is its metrics' CPU, the one its workload writes; no value metric.
        for run in &e.runs {
            let argv = &e.workloads[run.workload].argv;
            let cpu: u32 = argv[argv.iter().position(|a| a == "--cpus").unwrap() + 1]
                .parse()
                .unwrap();
            assert!(run.metrics.iter().all(|m| m.cpu == Some(cpu)), "{run:?}");
            assert!(run.metrics.iter().all(|m| m.name != "cpu"), "{run:?}");
        }
        assert_eq!(e.info.seed, 42);
    }

    /// A fake tree with `ncpus` CPUs (cpu0 without `online`) and its sysfs CPU directory.
    fn fake_tree(ncpus: u32) -> (tempfile::TempDir, std::path::PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let sys_cpu = t.path().join("sys/devices/system/cpu");
        fake_sys_cpu(&sys_cpu, ncpus);
        (t, sys_cpu)
    }

    /// Two cycles of cpu1 at load 0, baseline only, untraced.
    fn one_cpu(t: &tempfile::TempDir) -> LabOptions {
        LabOptions {
            paths: Paths::new(t.path()),
            cpus: vec![1],
            cycles: 2,
            loads: vec![0],
            loader: LoaderKind::Spin,
            loader_command: LoaderCommand::system_tool(LoaderKind::Spin),
            configurations: vec![Mitigation::None],
            seed: 1,
            trace: false,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Without `rcu_expedited` (and no mitigation that needs it) a session runs and restores.
    #[test]
    fn a_kernel_without_rcu_expedited_runs_a_plain_session() {
        let (t, sys_cpu) = fake_tree(2);
        let mut store = Store::in_memory().unwrap();
        let r = run_lab(&one_cpu(&t), &mut store, "pmlab hotplug", &mut NoProgress).unwrap();
        assert_eq!(r.ops.len(), 4);
        assert!(CpuFiles::new(&sys_cpu, 1).is_online().unwrap());
    }

    #[test]
    fn a_stop_before_the_first_operation_changes_nothing_and_is_interrupted() {
        let (t, sys_cpu) = fake_tree(2);
        let mut opts = one_cpu(&t);
        opts.stop = Arc::new(AtomicBool::new(true));
        let mut store = Store::in_memory().unwrap();
        let r = run_lab(&opts, &mut store, "pmlab hotplug", &mut NoProgress).unwrap();
        assert!(r.interrupted);
        assert!(r.ops.is_empty());
        assert!(CpuFiles::new(&sys_cpu, 1).is_online().unwrap());
    }

    /// A loader that cannot start ends the session with its typed error: the run that
    /// needed it is stored as failed and is the last one, and the machine is as found.
    #[test]
    fn a_machine_refusal_ends_the_session_with_its_error_and_restores() {
        let (t, sys_cpu) = fake_tree(2);
        let mut opts = one_cpu(&t);
        opts.loads = vec![0, 1];
        opts.loader_command = LoaderCommand {
            program: t.path().join("no-such-loader"),
            args: Vec::new(),
        };
        let mut store = Store::in_memory().unwrap();
        let e = run_lab(&opts, &mut store, "pmlab hotplug", &mut NoProgress).unwrap_err();
        assert!(matches!(e, HotplugError::Loader { .. }), "{e:?}");
        assert!(e.to_string().contains("cannot start loader"), "{e}");
        assert!(CpuFiles::new(&sys_cpu, 1).is_online().unwrap());
        let id = store.latest_id().unwrap().unwrap();
        let x = store.load(id).unwrap();
        let failed: Vec<_> = x
            .runs
            .iter()
            .filter(|r| r.status == RunStatus::Failed)
            .collect();
        assert_eq!(failed.len(), 1, "the run that needed the loader");
        assert_eq!(x.runs.last().unwrap().status, RunStatus::Failed);
        assert!(x.runs.len() <= 3, "nothing runs after the refusal");
    }
}
