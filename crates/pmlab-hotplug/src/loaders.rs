//! Background load for the hotplug lab: N instances of a built-in workload, each a child
//! process in its own process group, killed when pmlab dies (PR_SET_PDEATHSIG) and stopped
//! (SIGTERM, then SIGKILL) on drop — so every exit path stops them.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pmlab_workload::Affinity;
use serde::Serialize;

use super::{HotplugError, InputError};

/// Which built-in workload loads the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LoaderKind {
    /// Periodic sleeps and wakeups (cyclictest-like), 1 ms interval.
    Wakeup,
    /// A busy loop.
    Spin,
    /// Message passing between processes (hackbench-like).
    Messaging,
}

impl LoaderKind {
    /// A loader by its command-line word (`wakeup`, `spin`, `messaging`).
    pub fn parse(s: &str) -> Result<LoaderKind, InputError> {
        match s {
            "wakeup" => Ok(LoaderKind::Wakeup),
            "spin" => Ok(LoaderKind::Spin),
            "messaging" => Ok(LoaderKind::Messaging),
            other => Err(InputError::UnknownLoader(other.to_string())),
        }
    }
    /// Its command-line word.
    pub fn as_str(self) -> &'static str {
        match self {
            LoaderKind::Wakeup => "wakeup",
            LoaderKind::Spin => "spin",
            LoaderKind::Messaging => "messaging",
        }
    }
}

/// How to start one loader instance: `program args...` (normally `pmlab run KIND ...`).
#[derive(Debug, Clone)]
pub struct LoaderCommand {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
}

impl LoaderCommand {
    /// One instance of `kind` from system tools: a shell busy loop, `cyclictest` (one
    /// thread, 1 ms), `perf bench sched messaging` (one group).
    pub fn system_tool(kind: LoaderKind) -> LoaderCommand {
        let sh = |script: &str| LoaderCommand {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
        };
        match kind {
            LoaderKind::Spin => sh("while :; do :; done"),
            LoaderKind::Wakeup => LoaderCommand {
                program: "cyclictest".into(),
                args: ["-q", "-t", "1", "-i", "1000"].map(String::from).to_vec(),
            },
            LoaderKind::Messaging => LoaderCommand {
                program: "perf".into(),
                args: ["bench", "sched", "messaging", "-g", "1", "-l", "100000000"]
                    .map(String::from)
                    .to_vec(),
            },
        }
    }

    /// One instance of `kind` run by the pmlab binary `exe` until stopped.
    pub fn pmlab_run(exe: PathBuf, kind: LoaderKind) -> LoaderCommand {
        // A day is "until stopped": the lab always stops its loaders.
        let mut args = vec!["run".to_string(), kind.as_str().to_string()];
        match kind {
            LoaderKind::Wakeup => args.extend(["--duration".into(), "24h".into()]),
            LoaderKind::Spin => args.extend(["--work".into(), "24h".into()]),
            LoaderKind::Messaging => args.extend(["--loops".into(), "1000000000".into()]),
        }
        LoaderCommand { program: exe, args }
    }
}

/// Running loader instances; stopped on drop.
#[derive(Debug)]
pub struct Loaders {
    children: Vec<Child>,
    /// What they run.
    pub kind: LoaderKind,
}

impl Loaders {
    /// No load.
    pub fn none(kind: LoaderKind) -> Loaders {
        Loaders {
            children: Vec::new(),
            kind,
        }
    }

    /// Start `count` instances of `cmd` with CPU mask `affinity` (the caller's when None);
    /// if any fails to start, the others are stopped.
    pub fn start(
        kind: LoaderKind,
        cmd: &LoaderCommand,
        count: u32,
        affinity: Option<Affinity>,
    ) -> Result<Loaders, HotplugError> {
        let mut loaders = Loaders::none(kind);
        for _ in 0..count {
            let mut c = Command::new(&cmd.program);
            c.args(&cmd.args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0);
            // SAFETY: prctl and sched_setaffinity are async-signal-safe; nothing else runs
            // between fork and exec.
            unsafe {
                c.pre_exec(move || {
                    rustix::process::set_parent_process_death_signal(Some(
                        rustix::process::Signal::KILL,
                    ))?;
                    match affinity {
                        Some(a) => a.apply(),
                        None => Ok(()),
                    }
                });
            }
            let child = c.spawn().map_err(|source| HotplugError::Loader {
                what: format!("cannot start loader {}", cmd.program.display()),
                source,
            })?;
            loaders.children.push(child);
        }
        // A loader that dies at once (bad arguments) is an error, not silent zero load.
        std::thread::sleep(Duration::from_millis(if count > 0 { 150 } else { 0 }));
        for c in &mut loaders.children {
            if let Ok(Some(status)) = c.try_wait() {
                return Err(HotplugError::Loader {
                    what: format!(
                        "loader `{} {}` exited at once ({status})",
                        cmd.program.display(),
                        cmd.args.join(" ")
                    ),
                    source: std::io::Error::other("loader exited"),
                });
            }
        }
        Ok(loaders)
    }

    /// How many instances were started.
    pub fn count(&self) -> usize {
        self.children.len()
    }

    /// Every process of every instance (with descendants), for moving them between cgroups.
    pub fn processes(&self) -> Vec<i32> {
        let roots: Vec<i32> = self.children.iter().map(|c| c.id() as i32).collect();
        descendants(&roots)
    }

    /// Whether each instance is still running.
    pub fn all_running(&mut self) -> bool {
        self.children
            .iter_mut()
            .all(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// SIGTERM every process group, wait up to a second, then SIGKILL what is left.
    pub fn stop(&mut self) {
        for c in &self.children {
            signal_group(c, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(1);
        for c in &mut self.children {
            loop {
                match c.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    Ok(None) => {
                        signal_group(c, rustix::process::Signal::KILL);
                        let _ = c.wait();
                        break;
                    }
                }
            }
            // Stragglers that left the group but are still ours.
            signal_group(c, rustix::process::Signal::KILL);
        }
        self.children.clear();
    }
}

/// Signals the process group a loader leads (each starts its own); a group already gone
/// is not an error here.
fn signal_group(c: &std::process::Child, sig: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(c.id() as i32) {
        let _ = rustix::process::kill_process_group(pid, sig);
    }
}

impl Drop for Loaders {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `roots` and their descendants (by /proc ppid).
fn descendants(roots: &[i32]) -> Vec<i32> {
    let mut parent_of: Vec<(i32, i32)> = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Some(s) = pmlab_kernel::procstat::ProcStat::of(i64::from(pid)) {
                parent_of.push((pid, s.ppid));
            }
        }
    }
    let mut procs: Vec<i32> = roots.to_vec();
    let mut i = 0;
    while i < procs.len() {
        let p = procs[i];
        for &(pid, ppid) in &parent_of {
            if ppid == p && !procs.contains(&pid) {
                procs.push(pid);
            }
        }
        i += 1;
    }
    procs.sort_unstable();
    procs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleeper() -> LoaderCommand {
        LoaderCommand {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "sleep 30 & sleep 30".into()],
        }
    }

    fn alive(pid: i32) -> bool {
        // Zombies count as gone.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                !s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().starts_with('Z'))
                    .unwrap_or(false)
            })
            .unwrap_or(false)
    }

    #[test]
    fn loaders_and_their_children_are_stopped_on_drop() {
        let l = Loaders::start(LoaderKind::Spin, &sleeper(), 2, None).unwrap();
        assert_eq!(l.count(), 2);
        let tasks = l.processes();
        assert!(tasks.len() >= 4, "two shells and their sleeps: {tasks:?}");
        drop(l);
        std::thread::sleep(Duration::from_millis(100));
        for t in tasks {
            assert!(!alive(t), "task {t} survived");
        }
    }

    #[test]
    fn a_loader_that_exits_at_once_is_an_error() {
        let cmd = LoaderCommand {
            program: "/bin/false".into(),
            args: vec![],
        };
        let e = Loaders::start(LoaderKind::Wakeup, &cmd, 1, None).unwrap_err();
        assert!(e.to_string().contains("exited at once"), "{e}");
    }

    #[test]
    fn missing_program_is_an_error() {
        let cmd = LoaderCommand {
            program: "/nonexistent/loader".into(),
            args: vec![],
        };
        assert!(Loaders::start(LoaderKind::Spin, &cmd, 1, None).is_err());
    }

    #[test]
    fn loaders_get_the_mask_they_are_given_not_the_starting_thread_s() {
        let all = pmlab_workload::allowed_cpus().unwrap();
        if all.len() < 2 {
            eprintln!("skipped: one CPU allowed, no mask to tell apart");
            return;
        }
        let allowed = |pid: u32| {
            let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .unwrap()
                .trim()
                .to_string()
        };
        let _g = pmlab_workload::AffinityGuard::save().unwrap();
        Affinity::of(&all[..1]).apply().unwrap();
        let wide =
            Loaders::start(LoaderKind::Spin, &sleeper(), 1, Some(Affinity::of(&all))).unwrap();
        let inherited = Loaders::start(LoaderKind::Spin, &sleeper(), 1, None).unwrap();
        let list = pmlab_kernel::cpulist::format_cpu_list(&all);
        assert_eq!(allowed(wide.children[0].id()), list);
        assert_eq!(allowed(inherited.children[0].id()), all[0].to_string());
    }

    #[test]
    fn zero_load_starts_nothing() {
        let mut l = Loaders::start(LoaderKind::Spin, &sleeper(), 0, None).unwrap();
        assert_eq!(l.count(), 0);
        assert!(l.all_running());
    }

    #[test]
    fn kinds_parse() {
        assert_eq!(LoaderKind::parse("spin").unwrap(), LoaderKind::Spin);
        assert!(LoaderKind::parse("stress").is_err());
    }
}
