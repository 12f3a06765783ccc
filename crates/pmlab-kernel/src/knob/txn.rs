//! `Transaction`: this process's journaled knob changes. Originals are journaled and fsynced
//! before any write, every write is read back, a failed call is rolled back, and
//! everything goes back on `restore`, on drop (errors, panics) and on signals.

use super::journal::{self, DirLock, Entry, Journal, OnDisk};
use super::{file, haltpoll, plan, signal, Access, Assignment, KnobError, Plan};
use crate::Root;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Knob writes made by this process (for the test hook).
static WRITES: AtomicUsize = AtomicUsize::new(0);

/// Journaled knob changes of this process.
#[derive(Debug)]
pub struct Transaction {
    root: Root,
    dir: PathBuf,
    journal: Option<Journal>,
    entries: Vec<Entry>,
    finished: bool,
    /// What `begin` did about journals of dead pmlab processes (one line each).
    pub recovered: Vec<String>,
}

fn same_file(e: &Entry, t: &super::Target) -> bool {
    e.path == t.path && e.feature == t.feature && e.msr == t.register()
}

impl Transaction {
    /// Start a transaction; journals of dead pmlab processes are restored first.
    pub fn begin(root: &Root) -> Result<Transaction, KnobError> {
        Self::begin_in(root, &journal::state_dir())
    }

    /// `begin` with an explicit journal directory.
    pub fn begin_in(root: &Root, dir: &Path) -> Result<Transaction, KnobError> {
        let recovered = journal::sweep(dir, false)?;
        Ok(Transaction {
            root: root.clone(),
            dir: dir.to_path_buf(),
            journal: None,
            entries: Vec::new(),
            finished: false,
            recovered,
        })
    }

    /// The journal file, once something was journaled.
    pub fn journal_path(&self) -> Option<&Path> {
        self.journal.as_ref().map(|j| j.path.as_path())
    }

    /// Knobs journaled so far (names).
    pub fn knobs(&self) -> Vec<String> {
        self.entries.iter().map(|e| e.knob.clone()).collect()
    }

    /// Validate all, journal the originals (fsynced), then write and read back each one.
    /// On failure the writes of this call are rolled back and the error names the knob
    /// and the step.
    pub fn apply(&mut self, assignments: &[Assignment]) -> Result<(), KnobError> {
        let plans = plan(&self.root, assignments)?;
        self.journal_originals(&plans)?;
        let mut written: Vec<(&Plan, String)> = Vec::new();
        for p in &plans {
            match self.write_one(p) {
                Ok(Some(prev)) => written.push((p, prev)),
                Ok(None) => {}
                Err((step, reason)) => {
                    let rollback = rollback(&written);
                    return Err(KnobError::Write {
                        knob: p.target.knob.clone(),
                        step,
                        reason,
                        rollback,
                    });
                }
            }
        }
        // Even an unchanged value restarts them: the windows are part of what it sets.
        let haltpoll = plans
            .iter()
            .find_map(|p| haltpoll::param_root(&p.target.path).map(|r| (p, r)));
        if let Some((p, root)) = haltpoll {
            let _g = signal::engine_lock();
            if let Err(e) = haltpoll::restart_windows(&root) {
                return Err(KnobError::Write {
                    knob: p.target.knob.clone(),
                    step: "restarting haltpoll's per-CPU poll windows (cpuidle governor away and back)"
                        .into(),
                    reason: file::describe(&e),
                    rollback: rollback(&written),
                });
            }
        }
        Ok(())
    }

    /// Machine = as found + these assignments: knobs of earlier calls that are not named
    /// here go back to their original values.
    pub fn switch_to(&mut self, assignments: &[Assignment]) -> Result<(), KnobError> {
        let plans = plan(&self.root, assignments)?;
        let back: Vec<Entry> = self
            .entries
            .iter()
            // An MSR is journaled whole for all its fields: it goes back too, and the fields
            // named here are written again.
            .filter(|e| e.msr.is_some() || !plans.iter().any(|p| same_file(e, &p.target)))
            .cloned()
            .collect();
        {
            let _g = signal::engine_lock();
            let (_, failures) = journal::restore_entries(&back);
            if !failures.is_empty() {
                return Err(KnobError::Restore(failures.join("; ")));
            }
        }
        self.apply(assignments)
    }

    /// Every knob back to its original value; the journal is removed. Idempotent.
    pub fn restore(&mut self) -> Result<(), KnobError> {
        if self.finished {
            return Ok(());
        }
        let _g = signal::engine_lock();
        let (_, failures) = journal::restore_entries(&self.entries);
        if !failures.is_empty() {
            return Err(KnobError::Restore(failures.join("; ")));
        }
        if let Some(j) = self.journal.take() {
            signal::unregister(&j.path);
            journal::remove(&j.path);
        }
        self.entries.clear();
        Ok(())
    }

    /// Leave the values set and the journal on disk (as kept) for a later
    /// `pmlab knob restore`.
    pub fn keep(mut self) {
        let _g = signal::engine_lock();
        if let Some(mut j) = self.journal.take() {
            if let Err(e) = j.keep() {
                eprintln!("pmlab: warning: {e}");
            }
            signal::unregister(&j.path);
            // The original path is gone; forget it too.
            signal::unregister(&j.path.with_extension("journal"));
        }
        self.finished = true;
    }

    /// Under the journal directory lock: refuse knobs owned by another live pmlab process,
    /// then journal (and fsync) the original of every file not journaled yet.
    fn journal_originals(&mut self, plans: &[Plan]) -> Result<(), KnobError> {
        let _lock = DirLock::take(&self.dir)?;
        let me = journal::own_header();
        for other in journal::scan(&self.dir) {
            if other.kept || other.header.as_ref() == Some(&me) {
                continue;
            }
            if !other.owner_alive() {
                if !other.stale() {
                    other.restore()?;
                }
                continue;
            }
            if let Some(p) = plans
                .iter()
                .find(|p| other.entries.iter().any(|e| same_file(e, &p.target)))
            {
                return Err(KnobError::Busy {
                    knob: p.target.knob.clone(),
                    pid: other.owner_pid(),
                    journal: other.path.display().to_string(),
                });
            }
        }
        for p in plans {
            if self.entries.iter().any(|e| same_file(e, &p.target)) {
                continue;
            }
            let t = &p.target;
            let orig =
                file::read_part(&t.path, t.journal_part()).map_err(|e| KnobError::Write {
                    knob: t.knob.clone(),
                    step: format!("reading the original value of {}", t.path.display()),
                    reason: file::describe(&e),
                    rollback: "nothing was written".into(),
                })?;
            if self.journal.is_none() {
                let j = Journal::create(&self.dir)?;
                signal::register(&j.path);
                self.journal = Some(j);
            }
            let e = Entry {
                knob: t.knob.clone(),
                path: t.path.clone(),
                orig,
                feature: t.feature.clone(),
                msr: t.register(),
            };
            self.journal.as_mut().unwrap().append(&e)?;
            self.entries.push(e);
        }
        Ok(())
    }

    /// Write one plan and read it back. `Some(previous raw value)` when written, `None`
    /// when it already had the value; `Err((step, reason))` on failure.
    fn write_one(&self, p: &Plan) -> Result<Option<String>, (String, String)> {
        let t = &p.target;
        let written = {
            let _g = signal::engine_lock();
            if signal::stop_requested() {
                return Err(("writing".into(), "interrupted by a signal".into()));
            }
            let prev = file::read_part(&t.path, t.part())
                .map_err(|e| (format!("reading {}", t.path.display()), file::describe(&e)))?;
            if prev == p.value {
                return Ok(None);
            }
            let armed = hotplug_fail(&self.root, t);
            if let Err(e) = file::write_part(&t.path, t.part(), &p.value) {
                let step = format!("writing `{}` to {}", p.value, t.path.display());
                let mut reason = file::describe(&e);
                if t.def.access == Access::Online {
                    reason.push_str(&hotplug_step(&self.root, t, armed));
                }
                return Err((step, reason));
            }
            let got = file::read_part(&t.path, t.part()).map_err(|e| {
                (
                    format!("reading back {}", t.path.display()),
                    file::describe(&e),
                )
            });
            match got {
                Ok(g) if super::resolve::same_value(t, &p.value, &g) => {}
                Ok(g) => {
                    let _ = file::write_part(&t.path, t.part(), &prev);
                    return Err((
                        format!("reading back {}", t.path.display()),
                        format!("wrote `{}` but it reads `{g}`", p.value),
                    ));
                }
                Err(e) => {
                    let _ = file::write_part(&t.path, t.part(), &prev);
                    return Err(e);
                }
            }
            prev
        };
        test_pause(&t.knob);
        Ok(Some(written))
    }
}

/// Put back the writes of a failed call, last first; a sentence for the error.
fn rollback(written: &[(&Plan, String)]) -> String {
    if written.is_empty() {
        return "nothing else was written".into();
    }
    let _g = signal::engine_lock();
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    for (p, prev) in written.iter().rev() {
        match file::write_part(&p.target.path, p.target.part(), prev) {
            Ok(()) => ok.push(p.target.knob.clone()),
            Err(e) => bad.push(format!("{}: {}", p.target.knob, file::describe(&e))),
        }
    }
    let mut s = format!("rolled back {}", ok.join(", "));
    if !bad.is_empty() {
        s.push_str(&format!("; rollback FAILED for {}", bad.join(", ")));
    }
    s
}

/// The armed `cpuN/hotplug/fail` state before an online write, if any.
fn hotplug_fail(root: &Root, t: &super::Target) -> Option<i64> {
    if t.def.access != Access::Online {
        return None;
    }
    let f = root.path(&format!(
        "/sys/devices/system/cpu/cpu{}/hotplug/fail",
        t.cpu?
    ));
    std::fs::read_to_string(f)
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|v: &i64| *v >= 0)
}

/// ` at hotplug step N (name), cpuN now at state M (name)` for a failed online write.
fn hotplug_step(root: &Root, t: &super::Target, armed: Option<i64>) -> String {
    let states = std::fs::read_to_string(root.path("/sys/devices/system/cpu/hotplug/states"))
        .unwrap_or_default();
    let name = |n: i64| {
        states
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim().parse::<i64>().ok()? == n).then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| "?".into())
    };
    let cpu = t.cpu.unwrap_or(0);
    let now = std::fs::read_to_string(
        root.path(&format!("/sys/devices/system/cpu/cpu{cpu}/hotplug/state")),
    )
    .ok()
    .and_then(|s| s.trim().parse::<i64>().ok());
    let mut s = String::new();
    if let Some(a) = armed {
        s.push_str(&format!(
            " at hotplug step {a} ({}), fault injected through cpu{cpu}/hotplug/fail",
            name(a)
        ));
    }
    if let Some(n) = now {
        s.push_str(&format!("; cpu{cpu} is at state {n} ({})", name(n)));
    }
    s
}

/// Test hook: `PMLAB_TEST_PAUSE_AFTER_WRITE=N` blocks after the Nth knob write of this
/// process (crash-safety tests kill it there).
fn test_pause(knob: &str) {
    let n = WRITES.fetch_add(1, Ordering::SeqCst) + 1;
    let Some(at) = std::env::var("PMLAB_TEST_PAUSE_AFTER_WRITE")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    else {
        return;
    };
    if n == at {
        eprintln!("pmlab: test hook: paused after write {n} ({knob})");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("pmlab: error: {e}");
        }
    }
}

/// Restore the journal files of this process named in `paths` (signal path).
pub(crate) fn restore_paths(paths: &[PathBuf]) -> Vec<String> {
    let mut errors = Vec::new();
    for p in paths {
        match OnDisk::load(p).and_then(|j| j.restore()) {
            Ok(_) => {}
            Err(e) => errors.push(e.to_string()),
        }
    }
    errors
}
