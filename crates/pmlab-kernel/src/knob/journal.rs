//! The knob journal of DESIGN.md §5: one file per transaction in `$PMLAB_STATE_DIR`
//! (default /var/lib/pmlab/journal), JSON lines: a header with the owner (PID, start time,
//! boot id), then one line per knob with its original value, fsynced before the knob is
//! written. Kept journals (`pmlab knob set`) end in `.kept`.

use super::file;
use super::KnobError;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The first line of a journal.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Header {
    /// PID of the process that owns the journal.
    pub pid: i32,
    /// Start time of the owner (field 22 of /proc/PID/stat), so a reused PID is not taken
    /// for the owner.
    pub start: u64,
    /// /proc/sys/kernel/random/boot_id: a journal of an earlier boot is stale.
    pub boot: String,
}

/// One journaled knob: restoring it writes `orig` to `path`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Entry {
    /// Canonical knob name (`cpuidle.POLL.disable@1`).
    pub knob: String,
    /// The file to write back (below the root).
    pub path: PathBuf,
    /// The value found before the first write, written back on restore.
    pub orig: String,
    /// A sched feature: `path` is the features file, `orig` is `NAME` or `NO_NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature: Option<String>,
    /// An MSR (address): `path` is `/dev/cpu/N/msr`, `orig` the whole 8-byte register
    /// (`0x` and 16 hex digits), written back whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msr: Option<u32>,
}

impl Entry {
    /// The part of `path` that `orig` is.
    pub fn part(&self) -> file::Part<'_> {
        match (self.msr, &self.feature) {
            (Some(a), _) => file::Part::Register(a),
            (None, Some(f)) => file::Part::Feature(f),
            (None, None) => file::Part::Text,
        }
    }
}

/// The directory of journals.
pub fn state_dir() -> PathBuf {
    std::env::var_os("PMLAB_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/lib/pmlab/journal"))
}

fn jerr(path: &Path, e: impl std::fmt::Display) -> KnobError {
    KnobError::Journal {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

/// Start time of a process, or None when it does not exist.
pub fn start_time(pid: i32) -> Option<u64> {
    crate::procstat::ProcStat::of(i64::from(pid))
        .filter(|s| !s.is_dead())
        .map(|s| s.start_ticks)
}

/// This boot's id.
pub fn boot_id() -> String {
    crate::sysinfo::kernel::boot_id(&crate::Root::system()).unwrap_or_default()
}

/// The header of this process.
pub fn own_header() -> Header {
    let pid = std::process::id() as i32;
    Header {
        pid,
        start: start_time(pid).unwrap_or(0),
        boot: boot_id(),
    }
}

/// An exclusive lock on the journal directory (held while journals are inspected or
/// created, so two pmlab processes do not race on one knob).
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Create the directory if needed and block until the lock is ours (`flock`, released on drop).
    pub fn take(dir: &Path) -> Result<DirLock, KnobError> {
        std::fs::create_dir_all(dir).map_err(|e| jerr(dir, e))?;
        let p = dir.join(".lock");
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&p)
            .map_err(|e| jerr(&p, e))?;
        rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| jerr(&p, std::io::Error::from(e)))?;
        Ok(DirLock { _file: f })
    }
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// A journal being written by this process.
#[derive(Debug)]
pub struct Journal {
    /// The journal file (`.kept` after [`Journal::keep`]).
    pub path: PathBuf,
    file: File,
}

impl Journal {
    /// Create a new journal (header written and fsynced, directory fsynced).
    pub fn create(dir: &Path) -> Result<Journal, KnobError> {
        std::fs::create_dir_all(dir).map_err(|e| jerr(dir, e))?;
        let h = own_header();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let path = dir.join(format!("{nanos:020}-{}.journal", h.pid));
        let mut file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&path)
            .map_err(|e| jerr(&path, e))?;
        let line = serde_json::to_string(&h).map_err(|e| jerr(&path, e))?;
        writeln!(file, "{line}").map_err(|e| jerr(&path, e))?;
        file.sync_all().map_err(|e| jerr(&path, e))?;
        sync_dir(dir);
        Ok(Journal { path, file })
    }

    /// Append an entry and fsync it.
    pub fn append(&mut self, e: &Entry) -> Result<(), KnobError> {
        let line = serde_json::to_string(e).map_err(|x| jerr(&self.path, x))?;
        writeln!(self.file, "{line}").map_err(|x| jerr(&self.path, x))?;
        self.file.sync_data().map_err(|x| jerr(&self.path, x))
    }

    /// Mark as kept: a later `pmlab knob restore` restores it, dead-owner sweeps do not.
    pub fn keep(&mut self) -> Result<(), KnobError> {
        let kept = self.path.with_extension("kept");
        std::fs::rename(&self.path, &kept).map_err(|e| jerr(&self.path, e))?;
        if let Some(d) = kept.parent() {
            sync_dir(d);
        }
        self.path = kept;
        Ok(())
    }
}

/// A journal on disk.
#[derive(Debug, Clone)]
pub struct OnDisk {
    /// The journal file.
    pub path: PathBuf,
    /// Its first line; `None` when missing or torn (owner unknown: treated as dead).
    pub header: Option<Header>,
    /// The journaled knobs, in write order.
    pub entries: Vec<Entry>,
    /// The file ends in `.kept`: `pmlab knob set` left these knobs changed on purpose.
    pub kept: bool,
}

impl OnDisk {
    /// Read a journal; a torn last line (crash during append) is ignored: its knob was not
    /// written yet.
    pub fn load(path: &Path) -> Result<OnDisk, KnobError> {
        let text = std::fs::read_to_string(path).map_err(|e| jerr(path, e))?;
        let mut lines = text.lines();
        let header = lines.next().and_then(|l| serde_json::from_str(l).ok());
        let entries = lines.filter_map(|l| serde_json::from_str(l).ok()).collect();
        Ok(OnDisk {
            path: path.to_path_buf(),
            header,
            entries,
            kept: path.extension().is_some_and(|e| e == "kept"),
        })
    }

    /// The owner is alive (same PID and start time, same boot).
    pub fn owner_alive(&self) -> bool {
        match &self.header {
            Some(h) => h.boot == boot_id() && start_time(h.pid) == Some(h.start),
            None => false,
        }
    }

    /// Written on an earlier boot: the kernel state it describes is gone.
    pub fn stale(&self) -> bool {
        self.header.as_ref().is_some_and(|h| h.boot != boot_id())
    }

    /// PID of the owner, 0 when the header is missing.
    pub fn owner_pid(&self) -> i32 {
        self.header.as_ref().map(|h| h.pid).unwrap_or(0)
    }

    /// Write every original value back (last journaled first), skipping knobs already at
    /// their original value. On full success the journal file is removed.
    pub fn restore(&self) -> Result<Vec<String>, KnobError> {
        let (restored, failures) = restore_entries(&self.entries);
        if failures.is_empty() {
            remove(&self.path);
            Ok(restored)
        } else {
            Err(KnobError::Restore(format!(
                "{} (journal kept: {})",
                failures.join("; "),
                self.path.display()
            )))
        }
    }
}

/// Remove a journal file (and fsync its directory).
pub fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
    if let Some(d) = path.parent() {
        sync_dir(d);
    }
}

/// Write originals back in reverse order; returns (knobs changed back, failures).
pub fn restore_entries(entries: &[Entry]) -> (Vec<String>, Vec<String>) {
    let mut done: Vec<String> = Vec::new();
    let mut failures = Vec::new();
    let mut haltpoll_root = None;
    let mut seen: Vec<(&Path, Option<&str>, Option<u32>)> = Vec::new();
    // The first entry of a file holds its original value; later duplicates are ignored.
    let firsts: Vec<&Entry> = entries
        .iter()
        .filter(|e| {
            let key = (e.path.as_path(), e.feature.as_deref(), e.msr);
            if seen.contains(&key) {
                false
            } else {
                seen.push(key);
                true
            }
        })
        .collect();
    for e in firsts.into_iter().rev() {
        match file::read_part(&e.path, e.part()) {
            Ok(cur) if cur == e.orig => continue,
            Ok(_) => {}
            Err(x) if x.kind() == std::io::ErrorKind::NotFound && e.feature.is_none() => {
                // The file went away (module unloaded, CPU gone): nothing to restore.
                continue;
            }
            Err(_) => {}
        }
        match file::write_part(&e.path, e.part(), &e.orig) {
            Ok(()) => match file::read_part(&e.path, e.part()) {
                Ok(v) if v == e.orig || loose_equal(&v, &e.orig) => {
                    done.push(e.knob.clone());
                    haltpoll_root = haltpoll_root.or_else(|| super::haltpoll::param_root(&e.path));
                }
                Ok(v) => failures.push(format!(
                    "{}: wrote `{}` back but it reads `{v}`",
                    e.knob, e.orig
                )),
                Err(x) => failures.push(format!("{}: read-back: {}", e.knob, file::describe(&x))),
            },
            Err(x) => failures.push(format!(
                "{}: writing `{}` back: {}",
                e.knob,
                e.orig,
                file::describe(&x)
            )),
        }
    }
    // Windows grown under the restored values must not outlive them.
    if let Some(root) = haltpoll_root {
        if let Err(x) = super::haltpoll::restart_windows(&root) {
            failures.push(format!(
                "restarting haltpoll's per-CPU poll windows: {}",
                file::describe(&x)
            ));
        }
    }
    (done, failures)
}

fn loose_equal(a: &str, b: &str) -> bool {
    super::value::parse_bool(a).is_some()
        && super::value::parse_bool(a) == super::value::parse_bool(b)
}

/// Every journal in `dir`, newest first.
pub fn scan(dir: &Path) -> Vec<OnDisk> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "journal" || e == "kept"))
                .collect()
        })
        .unwrap_or_default();
    paths.sort();
    paths.reverse();
    paths.iter().filter_map(|p| OnDisk::load(p).ok()).collect()
}

/// Restore journals whose owner is dead (and not kept); drop stale ones of earlier boots.
/// `all` also restores kept journals (`pmlab knob restore`). Journals of live processes
/// (other than this one) are left. Returns a line per journal handled.
pub fn sweep(dir: &Path, all: bool) -> Result<Vec<String>, KnobError> {
    let _lock = DirLock::take(dir)?;
    sweep_locked(dir, all)
}

/// `sweep` with the directory lock already held.
pub fn sweep_locked(dir: &Path, all: bool) -> Result<Vec<String>, KnobError> {
    let me = own_header();
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for j in scan(dir) {
        if j.stale() {
            remove(&j.path);
            out.push(format!(
                "dropped {} (written before the last boot)",
                j.path.display()
            ));
            continue;
        }
        let mine = j.header.as_ref() == Some(&me);
        let restore = if j.kept {
            all
        } else {
            !mine && !j.owner_alive()
        };
        if !restore {
            continue;
        }
        match j.restore() {
            Ok(knobs) => out.push(format!(
                "restored {} knob(s) of {} pmlab process {}{}",
                knobs.len(),
                if j.kept { "kept settings of" } else { "dead" },
                j.owner_pid(),
                if knobs.is_empty() {
                    String::new()
                } else {
                    format!(": {}", knobs.join(", "))
                }
            )),
            Err(e) => errors.push(e.to_string()),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(KnobError::Restore(errors.join("; ")))
    }
}

/// What [`restore_all`] did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Restored {
    /// One line per knob put back (kept `knob set`s, journals of dead processes).
    pub restored: Vec<String>,
    /// Journals of pmlab processes still running (they restore their own knobs).
    pub live: Vec<String>,
}

/// Put back every knob in the journals under `dir` but those of live processes, which are
/// reported; a missing `dir` is nothing to restore.
pub fn restore_all(dir: &Path) -> Result<Restored, KnobError> {
    if !dir.exists() {
        return Ok(Restored::default());
    }
    let restored = sweep(dir, true)?;
    let live = scan(dir)
        .into_iter()
        .filter(|j| !j.kept && j.owner_alive())
        .map(|j| {
            format!(
                "pmlab process {} is running and holds {} (it restores them when it ends)",
                j.owner_pid(),
                j.entries
                    .iter()
                    .map(|e| e.knob.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect();
    Ok(Restored { restored, live })
}
