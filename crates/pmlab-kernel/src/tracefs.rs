//! tracefs access: find (or, as root, mount) tracefs, and private instances
//! `instances/pmlab-<pid>` that pmlab records into. Only files inside pmlab's own
//! instance are ever written; the global `set_event`, `tracing_on` and
//! `current_tracer` are never touched, nor `/proc/sys/kernel/ftrace_enabled`.
//!
//! Every live instance is kept in a process-wide registry so that a signal handler
//! can remove them ([`remove_live_instances`]); instances left by killed processes
//! are removed by [`remove_stale_instances`] at the start of every recording.

use crate::Root;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where pmlab mounts tracefs when it is absent.
pub const TRACEFS_MOUNT_POINT: &str = "/sys/kernel/tracing";
/// Instance names are `pmlab-<pid>` (a second instance of one process: `pmlab-<pid>-<n>`).
pub const INSTANCE_PREFIX: &str = "pmlab-";

/// Why a tracefs operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TracefsError {
    /// tracefs is not mounted and pmlab may not mount it.
    #[error("tracefs is not mounted (looked in {mounts}) and pmlab cannot mount it: {why}")]
    NotMounted {
        /// The mount table read.
        mounts: PathBuf,
        /// Why mounting was not possible (not root, a fake root, ...).
        why: String,
    },
    /// Mounting tracefs failed.
    #[error("mounting tracefs at {path}: {source}")]
    Mount {
        /// The mount point.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Reading a tracefs file, or creating or removing an instance, failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Writing a tracefs file failed.
    #[error("writing {value:?} to {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The value written.
        value: String,
        /// The OS error.
        source: io::Error,
    },
    /// A relative path that leaves the instance (`..`, absolute, empty), refused before any access.
    #[error("{0:?} is not a file inside the instance")]
    OutsideInstance(String),
    /// No such event in this kernel.
    #[error("unknown trace event {name:?}: no {path}")]
    UnknownEvent {
        /// The event as given.
        name: String,
        /// Its `events/SYSTEM/NAME` directory that is missing.
        path: PathBuf,
    },
    /// A bare event name that several systems have.
    #[error("event name {name:?} matches several systems: {systems}; write it as SYSTEM:EVENT")]
    AmbiguousEvent {
        /// The event as given.
        name: String,
        /// The systems that have it, comma-separated.
        systems: String,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> TracefsError + '_ {
    move |source| TracefsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Decode the octal escapes (`\040`) that /proc/mounts uses in paths.
pub(crate) fn unescape_mount_path(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The tracefs mount point listed in `/proc/mounts`, if any: a `tracefs` mount, or
/// `tracing/` inside a `debugfs` mount. Paths are mapped through `root`.
pub fn find_tracefs(root: &Root) -> Option<PathBuf> {
    let mounts = fs::read_to_string(root.path("/proc/mounts")).ok()?;
    let mut debugfs = None;
    for line in mounts.lines() {
        let mut f = line.split_whitespace();
        let (_dev, Some(dir), Some(fstype)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let dir = unescape_mount_path(dir);
        match fstype {
            "tracefs" => {
                let p = root.path(&dir);
                if p.join("events").is_dir() || p.join("instances").is_dir() {
                    return Some(p);
                }
            }
            "debugfs" if debugfs.is_none() => debugfs = Some(dir),
            _ => {}
        }
    }
    let p = root.path(&format!("{}/tracing", debugfs?.trim_end_matches('/')));
    p.join("instances").is_dir().then_some(p)
}

/// The tracefs directory: found in /proc/mounts, or mounted at /sys/kernel/tracing
/// when absent and running as root on the real filesystem.
pub fn tracefs_dir(root: &Root) -> Result<PathBuf, TracefsError> {
    if let Some(p) = find_tracefs(root) {
        return Ok(p);
    }
    let mounts = root.path("/proc/mounts");
    if !root.is_system() {
        return Err(TracefsError::NotMounted {
            mounts,
            why: "not the real root filesystem".into(),
        });
    }
    if !crate::sysinfo::item::is_root() {
        return Err(TracefsError::NotMounted {
            mounts,
            why: "mounting needs root".into(),
        });
    }
    mount_tracefs(Path::new(TRACEFS_MOUNT_POINT))?;
    find_tracefs(root).ok_or(TracefsError::NotMounted {
        mounts,
        why: "mounted, but not listed afterwards".into(),
    })
}

fn mount_tracefs(dir: &Path) -> Result<(), TracefsError> {
    rustix::mount::mount(
        "nodev",
        dir,
        "tracefs",
        rustix::mount::MountFlags::empty(),
        None,
    )
    .map_err(|e| TracefsError::Mount {
        path: dir.to_path_buf(),
        source: e.into(),
    })
}

/// Write `value` to a tracefs file in one `write` call (tracefs parses each write whole).
pub fn write_file(path: &Path, value: &str) -> Result<(), TracefsError> {
    let werr = |source| TracefsError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    };
    let mut f = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(werr)?;
    f.write_all(value.as_bytes()).map_err(werr)
}

/// Read a tracefs file whole. Some (`events/header_page`, `header_event`) answer only
/// the first `read` and report size 0, so the first read gets a large buffer.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, TracefsError> {
    use std::io::Read;
    let mut f = fs::File::open(path).map_err(io_err(path))?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match f.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(TracefsError::Io {
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }
    buf.truncate(len);
    Ok(buf)
}

/// Read a tracefs file as text (see [`read_bytes`]).
pub fn read_file(path: &Path) -> Result<String, TracefsError> {
    Ok(String::from_utf8_lossy(&read_bytes(path)?).into_owned())
}

/// Names of the event systems (directories under `events/`).
pub fn event_systems(tracefs: &Path) -> Result<Vec<String>, TracefsError> {
    list_dirs(&tracefs.join("events"))
}

/// Names of the events of `system`.
pub fn system_events(tracefs: &Path, system: &str) -> Result<Vec<String>, TracefsError> {
    list_dirs(&tracefs.join("events").join(system))
}

fn list_dirs(dir: &Path) -> Result<Vec<String>, TracefsError> {
    let mut v = Vec::new();
    for e in fs::read_dir(dir).map_err(io_err(dir))? {
        let e = e.map_err(io_err(dir))?;
        if e.file_type().map_err(io_err(dir))?.is_dir() {
            v.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    v.sort();
    Ok(v)
}

/// Is `system:event` (or the whole `system` when `event` is None) present?
pub fn event_exists(tracefs: &Path, system: &str, event: Option<&str>) -> bool {
    let valid = |s: &str| !s.is_empty() && !s.contains('/') && s != "." && s != "..";
    if !valid(system) || event.is_some_and(|e| !valid(e)) {
        return false;
    }
    let mut p = tracefs.join("events").join(system);
    if let Some(e) = event {
        p.push(e);
    }
    p.join("enable").is_file()
}

/// Resolve an event spec — `system`, `system:event`, `system/event` or a bare event
/// name — into (system, Some(event)) or (system, None) for a whole system.
pub fn resolve_event(tracefs: &Path, spec: &str) -> Result<(String, Option<String>), TracefsError> {
    let unknown = |path: PathBuf| TracefsError::UnknownEvent {
        name: spec.to_string(),
        path,
    };
    let events = tracefs.join("events");
    if let Some((sys, ev)) = spec.split_once([':', '/']) {
        let ev = (!ev.is_empty() && ev != "*").then_some(ev);
        if event_exists(tracefs, sys, ev) {
            return Ok((sys.to_string(), ev.map(str::to_string)));
        }
        return Err(unknown(events.join(sys).join(ev.unwrap_or(""))));
    }
    if event_exists(tracefs, spec, None) {
        return Ok((spec.to_string(), None));
    }
    let systems: Vec<String> = event_systems(tracefs)?
        .into_iter()
        .filter(|s| event_exists(tracefs, s, Some(spec)))
        .collect();
    match systems.len() {
        0 => Err(unknown(events.join(spec))),
        1 => Ok((systems[0].clone(), Some(spec.to_string()))),
        _ => Err(TracefsError::AmbiguousEvent {
            name: spec.to_string(),
            systems: systems.join(", "),
        }),
    }
}

type AbortHook = Arc<dyn Fn() + Send + Sync>;

struct LiveInstance {
    id: u64,
    dir: PathBuf,
    /// Called before removal by a signal handler: must make the owner close its files in the instance.
    before_remove: Option<AbortHook>,
}

static LIVE: Mutex<Vec<LiveInstance>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn live() -> std::sync::MutexGuard<'static, Vec<LiveInstance>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Paths of the instances this process currently owns.
pub fn live_instances() -> Vec<PathBuf> {
    live().iter().map(|l| l.dir.clone()).collect()
}

/// Remove every instance this process owns (for signal handlers and panics: call it
/// from a normal thread, e.g. a signal-hook iterator, not from the handler itself).
/// Runs each owner's abort hook first so it closes its files. Returns what failed.
pub fn remove_live_instances() -> Vec<TracefsError> {
    remove_live_instances_where(|_| true)
}

/// [`remove_live_instances`] for the instances whose directory matches `pred`.
pub fn remove_live_instances_where(pred: impl Fn(&Path) -> bool) -> Vec<TracefsError> {
    let entries: Vec<LiveInstance> = {
        let mut all = live();
        let (take, keep) = std::mem::take(&mut *all)
            .into_iter()
            .partition(|l| pred(&l.dir));
        *all = keep;
        take
    };
    let mut errors = Vec::new();
    for e in entries {
        if let Some(hook) = &e.before_remove {
            hook();
        }
        if let Err(err) = remove_instance_dir(&e.dir) {
            errors.push(err);
        }
    }
    errors
}

/// rmdir an instance, retrying briefly while files in it are still being closed.
fn remove_instance_dir(dir: &Path) -> Result<(), TracefsError> {
    let mut delay = Duration::from_millis(2);
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(delay);
                delay = (delay * 2).min(Duration::from_millis(100));
            }
            Err(source) => {
                return Err(TracefsError::Io {
                    path: dir.to_path_buf(),
                    source,
                })
            }
        }
    }
}

/// The pid an instance name belongs to, if it is a pmlab instance name.
pub fn instance_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(INSTANCE_PREFIX)?;
    let pid = rest.split('-').next()?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let tail = &rest[pid.len()..];
    if !(tail.is_empty()
        || tail
            .strip_prefix('-')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())))
    {
        return None;
    }
    pid.parse().ok()
}

/// Start time of process `pid` as seconds since the epoch, from /proc (None if it is gone).
fn process_start(root: &Root, pid: u32) -> Option<f64> {
    let start_ticks = crate::procstat::ProcStat::read(root, i64::from(pid))?.start_ticks as f64;
    let btime: f64 = fs::read_to_string(root.path("/proc/stat"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let hz = match rustix::param::clock_ticks_per_second() {
        0 => 100.0,
        n => n as f64,
    };
    Some(btime + start_ticks / hz)
}

/// Is the owner of instance `dir` (named for `pid`) still running? A live pid that
/// started after the instance was created is a reused pid, so the instance is stale.
fn owner_alive(root: &Root, pid: u32, dir: &Path) -> bool {
    if pid == std::process::id() {
        return live().iter().any(|l| l.dir == dir);
    }
    let Some(start) = process_start(root, pid) else {
        return root.path(&format!("/proc/{pid}")).exists();
    };
    let created = fs::metadata(dir)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64());
    match created {
        Some(c) => start <= c + 2.0,
        None => true,
    }
}

/// Remove `pmlab-<pid>` instances whose process is gone (left by SIGKILL or a crash).
/// Returns the names removed. Instances of live pmlab processes are left alone.
pub fn remove_stale_instances(root: &Root, tracefs: &Path) -> Result<Vec<String>, TracefsError> {
    let dir = tracefs.join("instances");
    let mut removed = Vec::new();
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(removed),
        Err(source) => return Err(TracefsError::Io { path: dir, source }),
    };
    for e in entries {
        let e = e.map_err(io_err(&dir))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = instance_owner(&name) else {
            continue;
        };
        let path = e.path();
        if owner_alive(root, pid, &path) {
            continue;
        }
        remove_instance_dir(&path)?;
        removed.push(name);
    }
    Ok(removed)
}

/// Remove instances left by dead pmlab processes (SIGKILL, crash) when running as root and
/// tracefs is already mounted; never mounts, never fails. Every pmlab command calls this
/// first, so an instance left by `kill -9` is gone after the next pmlab command.
pub fn sweep_stale_quietly() -> Vec<String> {
    if !crate::sysinfo::item::is_root() {
        return Vec::new();
    }
    let root = Root::system();
    match find_tracefs(&root) {
        Some(t) => remove_stale_instances(&root, &t).unwrap_or_default(),
        None => Vec::new(),
    }
}

/// A private tracefs instance owned by this process; removed on [`Instance::remove`] or drop.
pub struct Instance {
    name: String,
    dir: PathBuf,
    id: u64,
    removed: bool,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("dir", &self.dir)
            .field("removed", &self.removed)
            .finish()
    }
}

impl Instance {
    /// Create `instances/pmlab-<pid>` (or `pmlab-<pid>-<n>` if this process already has one).
    pub fn create(tracefs: &Path) -> Result<Instance, TracefsError> {
        let base = tracefs.join("instances");
        let pid = std::process::id();
        let mut registry = live();
        for n in 1..1000u32 {
            let name = if n == 1 {
                format!("{INSTANCE_PREFIX}{pid}")
            } else {
                format!("{INSTANCE_PREFIX}{pid}-{n}")
            };
            let dir = base.join(&name);
            if registry.iter().any(|l| l.dir == dir) {
                continue;
            }
            let created = match fs::create_dir(&dir) {
                Ok(()) => true,
                // Ours from an earlier, unregistered life of this pid: it is stale.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let _ = remove_instance_dir(&dir);
                    if dir.exists() {
                        false
                    } else {
                        fs::create_dir(&dir).map_err(|source| TracefsError::Io {
                            path: dir.clone(),
                            source,
                        })?;
                        true
                    }
                }
                Err(source) => return Err(TracefsError::Io { path: dir, source }),
            };
            if created {
                let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
                registry.push(LiveInstance {
                    id,
                    dir: dir.clone(),
                    before_remove: None,
                });
                return Ok(Instance {
                    name,
                    dir,
                    id,
                    removed: false,
                });
            }
        }
        Err(TracefsError::Io {
            path: base,
            source: io::Error::other("no free pmlab instance name"),
        })
    }

    /// The instance's name: `pmlab-PID` (or `pmlab-PID-N`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The instance directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Register what a signal handler must call before removing this instance
    /// (stop the readers and close their files).
    pub fn set_abort_hook(&self, hook: Arc<dyn Fn() + Send + Sync>) {
        if let Some(l) = live().iter_mut().find(|l| l.id == self.id) {
            l.before_remove = Some(hook);
        }
    }

    /// Path of a file inside the instance; refuses anything that would leave it.
    pub fn file(&self, rel: &str) -> Result<PathBuf, TracefsError> {
        let p = Path::new(rel);
        let inside = !rel.is_empty()
            && p.components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !inside {
            return Err(TracefsError::OutsideInstance(rel.to_string()));
        }
        Ok(self.dir.join(p))
    }

    /// Write `value` to a file inside the instance (path relative to it).
    pub fn write(&self, rel: &str, value: &str) -> Result<(), TracefsError> {
        write_file(&self.file(rel)?, value)
    }

    /// Read a file inside the instance (path relative to it).
    pub fn read(&self, rel: &str) -> Result<String, TracefsError> {
        read_file(&self.file(rel)?)
    }

    /// Turn recording into this instance's buffer on or off.
    pub fn set_tracing_on(&self, on: bool) -> Result<(), TracefsError> {
        self.write("tracing_on", if on { "1" } else { "0" })
    }

    /// Per-CPU buffer size in KiB.
    pub fn set_buffer_kb(&self, kb: u64) -> Result<(), TracefsError> {
        self.write("buffer_size_kb", &kb.to_string())
    }

    /// How full (percent) a CPU buffer gets before blocked readers are woken.
    pub fn set_buffer_percent(&self, percent: u32) -> Result<(), TracefsError> {
        self.write("buffer_percent", &percent.to_string())
    }

    /// Turn off the `block` trace option (an instance inherits it from the global one):
    /// with it on, `poll` on `trace_pipe_raw` always says readable, and a reader that waits
    /// in `poll` would spin. Kernels without the option are left as they are.
    pub fn set_poll_waits(&self) -> Result<(), TracefsError> {
        match self.file("options/block") {
            Ok(p) if p.exists() => self.write("options/block", "0"),
            _ => Ok(()),
        }
    }

    /// Enable one event, or a whole system when `event` is None.
    pub fn enable_event(&self, system: &str, event: Option<&str>) -> Result<(), TracefsError> {
        self.write(&event_rel(system, event, "enable"), "1")
    }

    /// Set a filter on one event, or on every event of a system.
    pub fn set_filter(
        &self,
        system: &str,
        event: Option<&str>,
        filter: &str,
    ) -> Result<(), TracefsError> {
        self.write(&event_rel(system, event, "filter"), filter)
    }

    /// CPUs that have a buffer in this instance (`per_cpu/cpuN`).
    pub fn cpus(&self) -> Result<Vec<u32>, TracefsError> {
        let dir = self.dir.join("per_cpu");
        let mut v: Vec<u32> = list_dirs(&dir)?
            .iter()
            .filter_map(|n| n.strip_prefix("cpu").and_then(|n| n.parse().ok()))
            .collect();
        v.sort_unstable();
        Ok(v)
    }

    /// Remove the instance (retrying while its files are being closed).
    pub fn remove(&mut self) -> Result<(), TracefsError> {
        if self.removed {
            return Ok(());
        }
        let _ = self.set_tracing_on(false);
        let r = remove_instance_dir(&self.dir);
        if r.is_ok() {
            self.removed = true;
            live().retain(|l| l.id != self.id);
        }
        r
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.remove();
        live().retain(|l| l.id != self.id);
    }
}

fn event_rel(system: &str, event: Option<&str>, file: &str) -> String {
    match event {
        Some(e) => format!("events/{system}/{e}/{file}"),
        None => format!("events/{system}/{file}"),
    }
}

/// Seconds since the epoch (for tests and notes).
pub fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_root() -> (tempfile::TempDir, Root) {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        (d, root)
    }

    fn put(root: &Root, abs: &str, text: &str) {
        let p = root.path(abs);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    fn fake_tracefs(root: &Root) -> PathBuf {
        put(
            root,
            "/proc/mounts",
            "sysfs /sys sysfs rw 0 0\nnodev /sys/kernel/tracing tracefs rw,relatime 0 0\n",
        );
        put(root, "/sys/kernel/tracing/events/sched/enable", "0");
        put(
            root,
            "/sys/kernel/tracing/events/sched/sched_switch/enable",
            "0",
        );
        put(
            root,
            "/sys/kernel/tracing/events/sched/sched_waking/enable",
            "0",
        );
        put(root, "/sys/kernel/tracing/events/irq/enable", "0");
        put(
            root,
            "/sys/kernel/tracing/events/irq/irq_handler_entry/enable",
            "0",
        );
        put(
            root,
            "/sys/kernel/tracing/events/other/irq_handler_entry/enable",
            "0",
        );
        fs::create_dir_all(root.path("/sys/kernel/tracing/instances")).unwrap();
        root.path("/sys/kernel/tracing")
    }

    #[test]
    fn finds_tracefs_in_proc_mounts() {
        let (_d, root) = fake_root();
        let t = fake_tracefs(&root);
        assert_eq!(find_tracefs(&root), Some(t.clone()));
        assert_eq!(tracefs_dir(&root).unwrap(), t);
    }

    #[test]
    fn finds_tracing_inside_debugfs() {
        let (_d, root) = fake_root();
        put(
            &root,
            "/proc/mounts",
            "debugfs /sys/kernel/debug debugfs rw 0 0\n",
        );
        fs::create_dir_all(root.path("/sys/kernel/debug/tracing/instances")).unwrap();
        assert_eq!(
            find_tracefs(&root),
            Some(root.path("/sys/kernel/debug/tracing"))
        );
    }

    #[test]
    fn fake_root_without_tracefs_is_an_error_not_a_mount() {
        let (_d, root) = fake_root();
        put(&root, "/proc/mounts", "sysfs /sys sysfs rw 0 0\n");
        let e = tracefs_dir(&root).unwrap_err();
        assert!(matches!(e, TracefsError::NotMounted { .. }), "{e}");
    }

    #[test]
    fn mount_paths_unescape_octal() {
        assert_eq!(unescape_mount_path("/a\\040b"), "/a b");
        assert_eq!(unescape_mount_path("/plain"), "/plain");
    }

    #[test]
    fn resolves_event_specs() {
        let (_d, root) = fake_root();
        let t = fake_tracefs(&root);
        assert_eq!(resolve_event(&t, "sched").unwrap(), ("sched".into(), None));
        assert_eq!(
            resolve_event(&t, "sched:sched_switch").unwrap(),
            ("sched".into(), Some("sched_switch".into()))
        );
        assert_eq!(
            resolve_event(&t, "sched/sched_waking").unwrap(),
            ("sched".into(), Some("sched_waking".into()))
        );
        assert_eq!(
            resolve_event(&t, "sched:*").unwrap(),
            ("sched".into(), None)
        );
        assert_eq!(
            resolve_event(&t, "sched_switch").unwrap(),
            ("sched".into(), Some("sched_switch".into()))
        );
        assert!(matches!(
            resolve_event(&t, "nosuch"),
            Err(TracefsError::UnknownEvent { .. })
        ));
        assert!(matches!(
            resolve_event(&t, "sched:nosuch"),
            Err(TracefsError::UnknownEvent { .. })
        ));
        assert!(matches!(
            resolve_event(&t, "sched:../irq"),
            Err(TracefsError::UnknownEvent { .. })
        ));
        assert!(matches!(
            resolve_event(&t, "irq_handler_entry"),
            Err(TracefsError::AmbiguousEvent { .. })
        ));
    }

    #[test]
    fn instance_owner_parses_names() {
        assert_eq!(instance_owner("pmlab-123"), Some(123));
        assert_eq!(instance_owner("pmlab-123-2"), Some(123));
        assert_eq!(instance_owner("pmlab-"), None);
        assert_eq!(instance_owner("pmlab-12x"), None);
        assert_eq!(instance_owner("pmlab-12-"), None);
        assert_eq!(instance_owner("mine"), None);
    }

    #[test]
    fn stale_instances_of_dead_pids_are_removed_live_ones_kept() {
        let (_d, root) = fake_root();
        let t = fake_tracefs(&root);
        let inst = t.join("instances");
        // pid 1 is alive in the fake /proc with a start time before the instance; 999999 is gone
        put(&root, "/proc/stat", "cpu 0\nbtime 1000\n");
        put(
            &root,
            "/proc/1/stat",
            "1 (init) S 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 100 0 0\n",
        );
        fs::create_dir(inst.join("pmlab-1")).unwrap();
        fs::create_dir(inst.join("pmlab-999999")).unwrap();
        fs::create_dir(inst.join("pmlab-999999-2")).unwrap();
        fs::create_dir(inst.join("users-own")).unwrap();
        let mut removed = remove_stale_instances(&root, &t).unwrap();
        removed.sort();
        assert_eq!(removed, vec!["pmlab-999999", "pmlab-999999-2"]);
        assert!(inst.join("pmlab-1").is_dir());
        assert!(inst.join("users-own").is_dir());
    }

    #[test]
    fn reused_pid_does_not_keep_an_instance_alive() {
        let (_d, root) = fake_root();
        let t = fake_tracefs(&root);
        let inst = t.join("instances");
        // the process with this pid started long after the instance was made
        let future_ticks = ((now_secs() + 10_000.0 - 1000.0) * 100.0) as u64;
        put(&root, "/proc/stat", "btime 1000\n");
        put(
            &root,
            "/proc/4242/stat",
            &format!("4242 (x y) S 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 {future_ticks} 0\n"),
        );
        fs::create_dir(inst.join("pmlab-4242")).unwrap();
        assert_eq!(
            remove_stale_instances(&root, &t).unwrap(),
            vec!["pmlab-4242"]
        );
    }

    #[test]
    fn instance_files_stay_inside_and_removal_unregisters() {
        let (_d, root) = fake_root();
        let t = fake_tracefs(&root);
        let mut i = Instance::create(&t).unwrap();
        assert_eq!(i.name(), format!("pmlab-{}", std::process::id()));
        assert!(live_instances().contains(&i.dir().to_path_buf()));
        assert!(matches!(
            i.file("../tracing_on"),
            Err(TracefsError::OutsideInstance(_))
        ));
        assert!(matches!(
            i.file("/etc/passwd"),
            Err(TracefsError::OutsideInstance(_))
        ));
        fs::write(i.dir().join("buffer_percent"), "50").unwrap();
        i.write("buffer_percent", "80").unwrap();
        assert_eq!(i.read("buffer_percent").unwrap(), "80");
        // a second instance of the same process gets another name
        let j = Instance::create(&t).unwrap();
        assert_ne!(i.dir(), j.dir());
        // the fake dir has files, so rmdir fails; clear them as the kernel would
        for p in [i.dir().to_path_buf(), j.dir().to_path_buf()] {
            for e in fs::read_dir(&p).unwrap() {
                fs::remove_file(e.unwrap().path()).unwrap();
            }
        }
        let dir = i.dir().to_path_buf();
        i.remove().unwrap();
        assert!(!dir.exists());
        assert!(!live_instances().contains(&dir));
        let jdir = j.dir().to_path_buf();
        drop(j);
        assert!(!jdir.exists());
    }

    #[test]
    fn remove_live_instances_runs_hooks_first() {
        let (_d, root) = fake_root();
        let t = fake_tracefs(&root);
        let i = Instance::create(&t).unwrap();
        let dir = i.dir().to_path_buf();
        let called = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let c = called.clone();
        i.set_abort_hook(Arc::new(move || c.store(true, Ordering::SeqCst)));
        let errs = remove_live_instances_where(|d| d.starts_with(&t));
        assert!(errs.is_empty(), "{errs:?}");
        assert!(called.load(Ordering::SeqCst));
        assert!(!dir.exists());
        drop(i);
    }
}
