//! The latency lab: per load level, start the loaders, then cycle each CPU offline/online
//! with the configurations interleaved round by round (order shuffled per round from a
//! recorded seed), each operation timed around its write and traced; then restore.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::boost::{BoostCgroup, BoostMode};
use super::loaders::{LoaderCommand, LoaderKind, Loaders};
use super::states::StateTable;
use super::sysfs::{errno_meaning, read_trimmed, CpuFiles, Direction, TimedWrite};
use super::trace::OpTrace;
use super::tracer::{LabTracer, TimedOp};
use super::{HotplugError, Mitigation, Paths};
use pmlab_kernel::knob::{KnobError, Transaction};
use pmlab_kernel::Root;

/// What to run.
#[derive(Debug, Clone)]
pub struct LabOptions {
    pub paths: Paths,
    pub cpus: Vec<u32>,
    pub cycles: u32,
    pub loads: Vec<u32>,
    pub loader: LoaderKind,
    pub loader_command: LoaderCommand,
    /// Configurations, baseline first (see [`Mitigation::configurations`]).
    pub configurations: Vec<Mitigation>,
    pub seed: u64,
    pub trace: bool,
    /// Set by a signal handler: stop after the current operation.
    pub stop: Arc<AtomicBool>,
}

/// One measured operation.
#[derive(Debug, Clone, Serialize)]
pub struct OpRecord {
    pub cpu: u32,
    #[serde(serialize_with = "Direction::serialize_short")]
    pub direction: Direction,
    pub load: u32,
    pub config: Mitigation,
    pub round: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Wall time around the write(2).
    pub wall_ns: u64,
    pub trace: Option<OpTrace>,
}

/// Everything the report needs.
#[derive(Debug, Clone, Serialize)]
pub struct LabResult {
    pub cpus: Vec<u32>,
    pub cycles: u32,
    pub loads: Vec<u32>,
    pub loader: LoaderKind,
    pub configurations: Vec<Mitigation>,
    pub seed: u64,
    pub boost_mode: Option<BoostMode>,
    pub traced: bool,
    /// Stopped early by a signal; `ops` holds what was measured until then.
    pub interrupted: bool,
    pub ops: Vec<OpRecord>,
    pub notes: Vec<String>,
    #[serde(skip)]
    pub states: StateTable,
}

/// Progress callbacks (the CLI draws a bar).
pub trait Progress {
    fn begin(&mut self, total_ops: u64);
    fn step(&mut self, message: &str);
    fn finish(&mut self);
}

/// A no-op progress.
pub struct NoProgress;
impl Progress for NoProgress {
    fn begin(&mut self, _: u64) {}
    fn step(&mut self, _: &str) {}
    fn finish(&mut self) {}
}

/// Restores, on drop, each CPU's `online` and `fail` and the rcu_expedited knob as found.
/// The originals are journaled by a `pmlab_kernel::knob::Transaction` before anything is
/// written, so a session killed by SIGKILL is repaired by the next pmlab command.
pub struct MachineGuard {
    cpus: Vec<(CpuFiles, bool)>,
    rcu: Option<(PathBuf, String)>,
    txn: Transaction,
    /// What the transaction repaired of dead sessions (one line each).
    pub recovered: Vec<String>,
}

fn knob_err(e: KnobError) -> HotplugError {
    HotplugError::Unexpected(format!("knob journal: {e}"))
}

impl MachineGuard {
    pub fn new(paths: &Paths, cpus: &[u32]) -> Result<MachineGuard, HotplugError> {
        let sys_cpu = paths.sys_cpu();
        let mut v = Vec::new();
        for &c in cpus {
            let f = CpuFiles::new(&sys_cpu, c);
            let online = f.is_online()?;
            v.push((f, online));
        }
        let rcu_path = paths.rcu_expedited();
        let rcu = match read_trimmed(&rcu_path) {
            Ok(v) => Some((rcu_path, v)),
            Err(_) => None,
        };
        let mut txn = Transaction::begin(&Root::new(paths.root.clone())).map_err(knob_err)?;
        let recovered = std::mem::take(&mut txn.recovered);
        // Journal each CPU's `online` (then its `fail`: restored first, last journaled first).
        let online: Vec<String> = v
            .iter()
            .map(|(f, on)| format!("cpu.online@{}={}", f.cpu, u8::from(*on)))
            .collect();
        txn.apply(&online).map_err(knob_err)?;
        let fail: Vec<String> = v
            .iter()
            .filter(|(f, _)| f.fail().map(|x| x == -1).unwrap_or(false))
            .map(|(f, _)| format!("sysfs:{}=-1", f.fail_path().display()))
            .collect();
        if !fail.is_empty() {
            txn.apply(&fail).map_err(knob_err)?;
        }
        Ok(MachineGuard {
            cpus: v,
            rcu,
            txn,
            recovered,
        })
    }

    /// Set `rcu_expedited` (1, or as found) through the knob transaction.
    pub fn set_rcu_expedited(&mut self, on: bool) -> Result<(), HotplugError> {
        let (_, orig) = self.rcu.as_ref().ok_or_else(|| {
            HotplugError::Unsupported("this kernel has no /sys/kernel/rcu_expedited".into())
        })?;
        let want = if on { "1" } else { orig.as_str() };
        self.txn
            .apply(&[format!("rcu.expedited={want}")])
            .map_err(knob_err)
    }

    /// Put everything back; returns the first problem (after trying everything).
    pub fn restore(&mut self) -> Result<(), HotplugError> {
        let mut first = None;
        for (f, online) in &self.cpus {
            if f.fail().map(|v| v != -1).unwrap_or(false) {
                if let Err(e) = f.set_fail(-1) {
                    first.get_or_insert(e);
                }
            }
            if let Err(e) = f.set_online(*online) {
                first.get_or_insert(e);
            }
        }
        if let Err(e) = self.txn.restore() {
            first.get_or_insert(knob_err(e));
        }
        first.map_or(Ok(()), Err)
    }
}

impl Drop for MachineGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("pmlab: warning: restoring the machine: {e}");
        }
    }
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

/// Run the lab. Every exit path restores the machine (guards are dropped in reverse order:
/// tracer, loaders, boost cgroup, then CPUs and knobs).
pub fn run_lab(opts: &LabOptions, progress: &mut dyn Progress) -> Result<LabResult, HotplugError> {
    let sys_cpu = opts.paths.sys_cpu();
    let states = StateTable::read(&sys_cpu)?;
    let mut guard = MachineGuard::new(&opts.paths, &opts.cpus)?;
    let mut notes: Vec<String> = guard
        .recovered
        .iter()
        .map(|l| format!("repaired what a killed pmlab session left: {l}"))
        .collect();
    let mut boost = if opts.configurations.contains(&Mitigation::KthreadBoost) {
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
    if opts.configurations.contains(&Mitigation::RcuExpedited) {
        // Refuse before any operation when the knob is missing.
        guard.set_rcu_expedited(false)?;
    }
    let tracer = if opts.trace {
        Some(LabTracer::start(&opts.paths, &opts.cpus)?)
    } else {
        None
    };
    let cpus: Vec<CpuFiles> = opts
        .cpus
        .iter()
        .map(|&c| CpuFiles::new(&sys_cpu, c))
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let total = opts.loads.len() as u64
        * opts.cycles as u64
        * opts.configurations.len() as u64
        * cpus.len() as u64
        * 2;
    progress.begin(total);
    let mut ops = Vec::new();
    let stopped = || opts.stop.load(Ordering::Relaxed);
    'levels: for &load in &opts.loads {
        if stopped() {
            break;
        }
        let mut loaders = Loaders::start(opts.loader, &opts.loader_command, load)?;
        // Warm-up: one unrecorded cycle per CPU under this load.
        for cpu in &cpus {
            if stopped() {
                break 'levels;
            }
            timed_op(cpu, Direction::Offline)?;
            timed_op(cpu, Direction::Online)?;
        }
        for round in 0..opts.cycles {
            let mut order = opts.configurations.clone();
            order.shuffle(&mut rng);
            for &config in &order {
                if stopped() {
                    // No knob write after a signal: the guard's restore puts them back.
                    break 'levels;
                }
                if let Err(e) = guard.set_rcu_expedited_if(config, &opts.configurations) {
                    // A signal between the check above and the write: the write is refused.
                    if stopped() {
                        break 'levels;
                    }
                    return Err(e);
                }
                for cpu in &cpus {
                    for dir in [Direction::Offline, Direction::Online] {
                        if stopped() {
                            // Finish the cycle: a CPU left offline is brought back below.
                            break 'levels;
                        }
                        if cpu.is_online()? == dir.online_after() {
                            notes.push(format!(
                                "cpu{} was already {} before a {} operation (changed by someone else); skipped",
                                cpu.cpu,
                                if dir.online_after() { "online" } else { "offline" },
                                dir.short()
                            ));
                            continue;
                        }
                        let boosted =
                            config == Mitigation::KthreadBoost && dir == Direction::Online;
                        if boosted {
                            if let Some(b) = boost.as_mut() {
                                b.enter(&loaders.processes())?;
                            }
                        }
                        let w = timed_op(cpu, dir);
                        if boosted {
                            if let Some(b) = boost.as_mut() {
                                b.leave()?;
                            }
                        }
                        let w = w?;
                        ops.push(OpRecord {
                            cpu: cpu.cpu,
                            direction: dir,
                            load,
                            config,
                            round,
                            start_ns: w.start_ns,
                            end_ns: w.end_ns,
                            wall_ns: w.wall().0,
                            trace: None,
                        });
                        progress.step(&format!(
                            "load {load} · {} · cpu{} {}",
                            config.as_str(),
                            cpu.cpu,
                            dir.short()
                        ));
                    }
                }
            }
        }
        if !loaders.all_running() {
            notes.push(format!(
                "a {} loader exited during load level {load}",
                opts.loader.as_str()
            ));
        }
        loaders.stop();
    }
    if !stopped() {
        guard.set_rcu_expedited(false)?;
    }
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
    }
    if let Some(b) = boost.as_mut() {
        b.remove()?;
    }
    guard.restore()?;
    progress.finish();
    Ok(LabResult {
        cpus: opts.cpus.clone(),
        cycles: opts.cycles,
        loads: opts.loads.clone(),
        loader: opts.loader,
        configurations: opts.configurations.clone(),
        seed: opts.seed,
        boost_mode: boost.as_ref().map(|b| b.mode),
        traced: opts.trace,
        interrupted: stopped(),
        ops,
        notes,
        states,
    })
}

impl MachineGuard {
    /// rcu_expedited on for the rcu-expedited configuration, as found otherwise.
    fn set_rcu_expedited_if(
        &mut self,
        config: Mitigation,
        all: &[Mitigation],
    ) -> Result<(), HotplugError> {
        if all.contains(&Mitigation::RcuExpedited) {
            self.set_rcu_expedited(config == Mitigation::RcuExpedited)?;
        }
        Ok(())
    }
}
