//! The hotplug lab: CPU offline/online latency, per direction and load level, step by step
//! from the cpuhp tracepoints; mitigations (rcu-expedited, kthread-boost) as interleaved
//! configurations; and fault injection through `cpuN/hotplug/fail` with rollback timing.
//!
//! Every path leaves the machine as found: CPUs back in their original state, `fail` files
//! at -1, knobs restored, loaders stopped, the boost cgroup and tracefs instance removed.

pub mod boost;
pub mod inject;
pub mod lab;
pub mod loaders;
pub mod report;
pub mod runs;
pub mod states;
pub mod sysfs;
pub mod trace;
pub mod tracer;

use std::path::{Path, PathBuf};

// The lab's protocol and the data model under their own names (`crate::store::..`).
use pmlab_lab::executor::ExecError;
use pmlab_lab::lab::Lab;
use pmlab_lab::{executor, protocol};
use pmlab_stats::stats;
use pmlab_store::{spec, store, system};

use serde::Serialize;

pub use inject::{run_inject, InjectAttempt, InjectOptions, InjectOutcome, InjectTarget};
pub use lab::{run_lab, LabOptions, LabResult, OpRecord};
pub use loaders::{LoaderCommand, LoaderKind};
pub use states::{HotplugState, StateTable};
pub use sysfs::{CpuFiles, Direction};

/// Errors of the hotplug lab; each names the file it failed on.
#[derive(Debug, thiserror::Error)]
pub enum HotplugError {
    /// A kernel file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A kernel file held something the lab cannot read.
    #[error("{path}: {what}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong with it.
        what: String,
    },
    /// The kernel refused a write (EBUSY, EAGAIN, EINVAL...).
    #[error("writing {value:?} to {path}: {} ({meaning})", std::io::Error::from_raw_os_error(*errno))]
    Refused {
        /// The file.
        path: PathBuf,
        /// The value written.
        value: String,
        /// The kernel's errno.
        errno: i32,
        /// What that errno means for hotplug.
        meaning: &'static str,
    },
    /// A request refused before anything was touched (CPU list, state, options).
    #[error("{0}")]
    Invalid(String),
    /// This machine lacks what the request needs (no `rcu_expedited`, no cgroup `cpu`).
    #[error("{0}")]
    Unsupported(String),
    /// A loader could not be started or stopped.
    #[error("{what}: {source}")]
    Loader {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// Reading or setting the writer's CPU affinity.
    #[error("CPU affinity of the hotplug writer")]
    Affinity(#[source] std::io::Error),
    /// The machine did something the lab did not expect (described).
    #[error("{0}")]
    Unexpected(String),
    /// Stopped by a signal; everything was put back.
    #[error("interrupted; CPUs, knobs and cgroups were restored and loaders stopped")]
    Interrupted,
    /// The result store.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The lab's protocol refused the session or could not store or restore it.
    #[error(transparent)]
    Protocol(#[from] protocol::ProtocolError),
    /// The session's knob transaction (journal, write, read-back or restore).
    #[error("knob transaction")]
    Knob(#[from] pmlab_kernel::knob::KnobError),
    /// `hotplug/states` did not parse.
    #[error("{path}")]
    States {
        /// The file.
        path: PathBuf,
        /// What did not parse.
        #[source]
        source: InputError,
    },
}

/// A value the hotplug lab was given that it does not accept: an option's word, a STATE, a
/// line of `hotplug/states`. Nothing has run when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// A mitigation word that is not one.
    #[error("unknown mitigation {0:?}: expected rcu-expedited, kthread-boost or none")]
    UnknownMitigation(String),
    /// A loader word that is not one.
    #[error("unknown loader {0:?}: expected wakeup, spin or messaging")]
    UnknownLoader(String),
    /// A line of `hotplug/states` that is not `N: name`.
    #[error("line {line}: expected `N: name`, found {text:?}")]
    StateLine {
        /// Line number, from 1.
        line: usize,
        /// The line.
        text: String,
    },
    /// A state number that is not a number.
    #[error("line {line}: bad state number {text:?}")]
    StateNumber {
        /// Line number, from 1.
        line: usize,
        /// The number as written.
        text: String,
    },
    /// `hotplug/states` lists nothing.
    #[error("no states")]
    NoStates,
    /// No state has that name or number.
    #[error(
        "no hotplug state {spec:?} in /sys/devices/system/cpu/hotplug/states{}",
        similar_hint(.similar)
    )]
    UnknownState {
        /// The STATE given.
        spec: String,
        /// Names that look like it.
        similar: Vec<String>,
    },
    /// More than one state has that name.
    #[error(
        "hotplug state name {spec:?} is ambiguous: numbers {}; give the number",
        join(.numbers)
    )]
    AmbiguousState {
        /// The name given.
        spec: String,
        /// The states that have it.
        numbers: Vec<i32>,
    },
}

fn similar_hint(similar: &[String]) -> String {
    if similar.is_empty() {
        String::new()
    } else {
        format!(" (similar: {})", similar.join(", "))
    }
}

fn join(numbers: &[i32]) -> String {
    numbers
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A mitigation compared as one configuration of the experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mitigation {
    /// The baseline: nothing changed.
    None,
    /// `rcu.expedited=1`: synchronize_rcu() in the hotplug path becomes expedited.
    RcuExpedited,
    /// kthreads get more CPU bandwidth than the load during each online operation.
    KthreadBoost,
}

impl Mitigation {
    /// A mitigation by its command-line word (`rcu-expedited`, `kthread-boost`, `none`).
    pub fn parse(s: &str) -> Result<Mitigation, InputError> {
        match s {
            "none" => Ok(Mitigation::None),
            "rcu-expedited" => Ok(Mitigation::RcuExpedited),
            "kthread-boost" => Ok(Mitigation::KthreadBoost),
            other => Err(InputError::UnknownMitigation(other.to_string())),
        }
    }
    /// Its command-line word.
    pub fn as_str(self) -> &'static str {
        match self {
            Mitigation::None => "none",
            Mitigation::RcuExpedited => "rcu-expedited",
            Mitigation::KthreadBoost => "kthread-boost",
        }
    }
    /// The configurations to run: the baseline first, then each distinct mitigation.
    pub fn configurations(requested: &[Mitigation]) -> Vec<Mitigation> {
        let mut v = vec![Mitigation::None];
        for m in requested {
            if !v.contains(m) {
                v.push(*m);
            }
        }
        v
    }
}

pub use pmlab_kernel::cpulist::{format_cpu_list, parse_cpu_list};

/// Paths of the kernel files the lab uses, under a root ("/" or a fake tree).
#[derive(Debug, Clone)]
pub struct Paths {
    /// The root: `/` on the machine, a temporary directory for a fake tree.
    pub root: PathBuf,
}

impl Paths {
    /// Paths under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Paths {
        Paths { root: root.into() }
    }
    fn at(&self, abs: &str) -> PathBuf {
        self.root.join(abs.trim_start_matches('/'))
    }
    /// `/sys/devices/system/cpu`.
    pub fn sys_cpu(&self) -> PathBuf {
        self.at("/sys/devices/system/cpu")
    }
    /// `/sys/kernel/rcu_expedited`.
    pub fn rcu_expedited(&self) -> PathBuf {
        self.at("/sys/kernel/rcu_expedited")
    }
    /// `/sys/fs/cgroup`.
    pub fn cgroup_fs(&self) -> PathBuf {
        self.at("/sys/fs/cgroup")
    }
    /// `/sys/kernel/tracing`.
    pub fn tracefs(&self) -> PathBuf {
        self.at("/sys/kernel/tracing")
    }
}

/// The refusals made before anything is touched: CPUs without an `online` file (cpu0),
/// CPUs not present or offline, and a list that covers every online CPU.
pub fn check_cpus(sys_cpu: &Path, cpus: &[u32]) -> Result<(), HotplugError> {
    if cpus.is_empty() {
        return Err(HotplugError::Invalid("no CPUs given".into()));
    }
    let online = sysfs::online_cpus(sys_cpu)?;
    if online.iter().all(|c| cpus.contains(c)) {
        return Err(HotplugError::Invalid(format!(
            "the CPU list {} would offline every online CPU ({}); at least one must stay online",
            format_cpu_list(cpus),
            format_cpu_list(&online)
        )));
    }
    for &cpu in cpus {
        let f = CpuFiles::new(sys_cpu, cpu);
        if !sys_cpu.join(format!("cpu{cpu}")).is_dir() {
            return Err(HotplugError::Invalid(format!(
                "cpu{cpu} does not exist ({} has no cpu{cpu})",
                sys_cpu.display()
            )));
        }
        if !f.has_online_file() {
            return Err(HotplugError::Invalid(format!(
                "cpu{cpu} cannot be hot-unplugged: {} does not exist",
                f.online_path().display()
            )));
        }
        if !f.is_online()? {
            return Err(HotplugError::Invalid(format!(
                "cpu{cpu} is offline; bring it online first (pmlab cycles online CPUs and leaves them online)"
            )));
        }
    }
    Ok(())
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    pmlab_kernel::sysinfo::item::is_root()
}

#[cfg(test)]
pub(crate) mod testing {
    use std::fs;
    use std::path::Path;

    /// A fake sysfs CPU tree: cpu0 without `online`, the others online.
    pub fn fake_sys_cpu(dir: &Path, ncpus: u32) {
        for cpu in 0..ncpus {
            let d = dir.join(format!("cpu{cpu}/hotplug"));
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("fail"), "-1\n").unwrap();
            fs::write(d.join("state"), "236\n").unwrap();
            if cpu > 0 {
                fs::write(dir.join(format!("cpu{cpu}/online")), "1\n").unwrap();
            }
        }
        fs::write(dir.join("online"), format!("0-{}\n", ncpus - 1)).unwrap();
        fs::create_dir_all(dir.join("hotplug")).unwrap();
        fs::write(dir.join("hotplug/states"), super::states::SAMPLE).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_put_the_baseline_first() {
        use Mitigation::*;
        assert_eq!(Mitigation::configurations(&[]), vec![None]);
        assert_eq!(
            Mitigation::configurations(&[RcuExpedited, None, RcuExpedited]),
            vec![None, RcuExpedited]
        );
        let e = Mitigation::parse("turbo").unwrap_err();
        assert_eq!(e, InputError::UnknownMitigation("turbo".into()));
        assert_eq!(
            e.to_string(),
            "unknown mitigation \"turbo\": expected rcu-expedited, kthread-boost or none"
        );
    }

    #[test]
    fn refuses_cpu0_without_online_file() {
        let t = tempfile::tempdir().unwrap();
        testing::fake_sys_cpu(t.path(), 2);
        let e = check_cpus(t.path(), &[0]).unwrap_err().to_string();
        assert!(e.contains("cpu0 cannot be hot-unplugged"), "{e}");
    }

    #[test]
    fn refuses_a_list_covering_every_online_cpu() {
        let t = tempfile::tempdir().unwrap();
        testing::fake_sys_cpu(t.path(), 3);
        // Make cpu0 hotpluggable too, as on arm64.
        std::fs::write(t.path().join("cpu0/online"), "1\n").unwrap();
        let e = check_cpus(t.path(), &[0, 1, 2]).unwrap_err().to_string();
        assert!(e.contains("every online CPU"), "{e}");
        check_cpus(t.path(), &[1, 2]).unwrap();
    }

    #[test]
    fn refuses_missing_and_offline_cpus() {
        let t = tempfile::tempdir().unwrap();
        testing::fake_sys_cpu(t.path(), 3);
        assert!(check_cpus(t.path(), &[7])
            .unwrap_err()
            .to_string()
            .contains("does not exist"));
        std::fs::write(t.path().join("cpu2/online"), "0\n").unwrap();
        assert!(check_cpus(t.path(), &[2])
            .unwrap_err()
            .to_string()
            .contains("offline"));
    }
}

impl From<HotplugError> for ExecError {
    fn from(e: HotplugError) -> ExecError {
        ExecError::Hotplug(Box::new(e))
    }
}

/// The hotplug lab as methods of the lab object, so that it stops on the lab's stop token
/// (Ctrl-C, SIGTERM) like every other command.
pub trait HotplugLab {
    /// The hotplug latency lab through the protocol into `store`.
    fn hotplug(
        &self,
        opts: LabOptions,
        store: &mut store::Store,
        command: &str,
        progress: &mut dyn lab::Progress,
    ) -> Result<LabResult, HotplugError>;

    /// The hotplug fault-injection walk through the protocol into `store`.
    fn hotplug_inject(
        &self,
        opts: InjectOptions,
        store: &mut store::Store,
        command: &str,
        progress: &mut dyn lab::Progress,
    ) -> Result<inject::InjectResult, HotplugError>;

    /// Repair what a killed pmlab session left (its knob journal: CPUs offline, `fail`
    /// armed, `rcu_expedited`), before the CPUs are looked at; one line per repair.
    fn hotplug_repair(&self) -> Result<Vec<String>, HotplugError>;
}

impl HotplugLab for Lab {
    fn hotplug(
        &self,
        mut opts: LabOptions,
        store: &mut store::Store,
        command: &str,
        progress: &mut dyn lab::Progress,
    ) -> Result<LabResult, HotplugError> {
        opts.stop = self.stop_token();
        run_lab(&opts, store, command, progress)
    }

    fn hotplug_inject(
        &self,
        mut opts: InjectOptions,
        store: &mut store::Store,
        command: &str,
        progress: &mut dyn lab::Progress,
    ) -> Result<inject::InjectResult, HotplugError> {
        opts.stop = self.stop_token();
        run_inject(&opts, store, command, progress)
    }

    fn hotplug_repair(&self) -> Result<Vec<String>, HotplugError> {
        // Beginning a transaction on the lab's root restores dead sessions' journals (as
        // `Lab::transaction` does); this one journals nothing, so dropping it writes nothing.
        let txn = pmlab_kernel::knob::Transaction::begin(self.root())?;
        Ok(txn.recovered.clone())
    }
}

/// A shuffle seed from the clock, for a session given none (it is recorded and printed): the
/// lab's one rule.
pub use pmlab_lab::request::clock_seed;
