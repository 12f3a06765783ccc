//! The kthread-boost mitigation: a cpu cgroup that gives kernel threads more CPU bandwidth
//! than the load during each online operation. The classic trick moves kthreadd (pid 2) into
//! a high-weight group so the kthreads it forks inherit it. Kernels that pin kthreadd to the
//! root (it refuses with EINVAL) get the equivalent: the loaders go into a minimum-weight
//! group for the operation, so every root-group kthread outweighs them. The group is removed
//! on drop; groups left by a dead pmlab are recovered at creation.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::sysfs::{read_trimmed, write_value};
use super::HotplugError;

const PREFIX: &str = "pmlab-hotplug-boost-";
const KTHREADD: i32 = 2;

/// How the boost is applied on this kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BoostMode {
    /// kthreadd moved into a high-weight group for each online operation.
    Kthreadd,
    /// kthreadd cannot move; the loaders are moved into a minimum-weight group instead.
    ThrottleLoaders,
}

/// cgroup v1 `cpu` controller or v2 with `cpu` enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CgroupVersion {
    /// cgroup v1: a `cpu` hierarchy of its own.
    V1,
    /// cgroup v2: the unified hierarchy with `cpu` enabled.
    V2,
}

/// Find the hierarchy with a cpu controller under `cgroup_fs` (`/sys/fs/cgroup`):
/// v2 where `cpu` is enabled in the root's subtree_control, else the v1 `cpu` hierarchy.
pub fn find_cpu_hierarchy(cgroup_fs: &Path) -> Option<(PathBuf, CgroupVersion)> {
    for v2 in [cgroup_fs.to_path_buf(), cgroup_fs.join("unified")] {
        if let Ok(ctl) = fs::read_to_string(v2.join("cgroup.subtree_control")) {
            if ctl.split_whitespace().any(|c| c == "cpu") {
                return Some((v2, CgroupVersion::V2));
            }
        }
    }
    for v1 in [cgroup_fs.join("cpu"), cgroup_fs.join("cpu,cpuacct")] {
        if v1.join("cpu.shares").is_file() {
            return Some((v1, CgroupVersion::V1));
        }
    }
    None
}

/// The boost group; removed (tasks moved back to the root) on drop.
#[derive(Debug)]
pub struct BoostCgroup {
    hierarchy: PathBuf,
    dir: PathBuf,
    /// The cgroup version of the hierarchy it was made in.
    pub version: CgroupVersion,
    /// What it does around each online operation.
    pub mode: BoostMode,
    /// Processes currently moved in by `enter`.
    moved: Vec<i32>,
    removed: bool,
}

impl BoostCgroup {
    /// Create the group under `cgroup_fs`, probing whether kthreadd may move.
    pub fn create(cgroup_fs: &Path) -> Result<BoostCgroup, HotplugError> {
        let (hierarchy, version) = find_cpu_hierarchy(cgroup_fs).ok_or_else(|| {
            HotplugError::Unsupported(format!(
                "kthread-boost needs a cpu cgroup controller: neither {}/cpu (v1) nor a cgroup2 \
                 mount with cpu in cgroup.subtree_control was found",
                cgroup_fs.display()
            ))
        })?;
        recover_stale(&hierarchy);
        let dir = hierarchy.join(format!("{PREFIX}{}", std::process::id()));
        fs::create_dir(&dir).map_err(|source| HotplugError::Io {
            path: dir.clone(),
            source,
        })?;
        let mut g = BoostCgroup {
            hierarchy,
            dir,
            version,
            mode: BoostMode::Kthreadd,
            moved: Vec::new(),
            removed: false,
        };
        // Probe: can kthreadd move? Move it in and straight back.
        match g.move_to_group(KTHREADD) {
            Ok(()) => {
                g.move_to_root(KTHREADD)?;
                g.set_weight(true)?;
            }
            Err(HotplugError::Refused { errno, .. }) if errno == libc::EINVAL => {
                g.mode = BoostMode::ThrottleLoaders;
                g.set_weight(false)?;
            }
            Err(e) => return Err(e),
        }
        Ok(g)
    }

    /// The boost group's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// High weight (kthreadd mode) or the minimum (throttle mode).
    fn set_weight(&self, high: bool) -> Result<(), HotplugError> {
        let (file, value) = match (self.version, high) {
            (CgroupVersion::V1, true) => ("cpu.shares", "262144"),
            (CgroupVersion::V1, false) => ("cpu.shares", "2"),
            (CgroupVersion::V2, true) => ("cpu.weight", "10000"),
            (CgroupVersion::V2, false) => ("cpu.weight", "1"),
        };
        write_value(&self.dir.join(file), value)
    }

    fn move_to_group(&self, pid: i32) -> Result<(), HotplugError> {
        write_value(&self.dir.join("cgroup.procs"), &pid.to_string())
    }

    fn move_to_root(&self, pid: i32) -> Result<(), HotplugError> {
        match write_value(&self.hierarchy.join("cgroup.procs"), &pid.to_string()) {
            // Gone already: nothing to move.
            Err(HotplugError::Refused { errno, .. }) if errno == libc::ESRCH => Ok(()),
            r => r,
        }
    }

    /// Before an online operation: kthreadd in (kthreadd mode) or the loaders in (throttle mode).
    pub fn enter(&mut self, loader_processes: &[i32]) -> Result<(), HotplugError> {
        let pids: Vec<i32> = match self.mode {
            BoostMode::Kthreadd => vec![KTHREADD],
            BoostMode::ThrottleLoaders => loader_processes.to_vec(),
        };
        for pid in pids {
            match self.move_to_group(pid) {
                Ok(()) => self.moved.push(pid),
                Err(HotplugError::Refused { errno, .. }) if errno == libc::ESRCH => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// After the operation: everything moved in goes back to the root group.
    pub fn leave(&mut self) -> Result<(), HotplugError> {
        let moved = std::mem::take(&mut self.moved);
        let mut first_err = None;
        for pid in moved {
            if let Err(e) = self.move_to_root(pid) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Move every task left in the group to the root and remove the group.
    pub fn remove(&mut self) -> Result<(), HotplugError> {
        if self.removed {
            return Ok(());
        }
        let _ = self.leave();
        let r = empty_and_remove(&self.hierarchy, &self.dir);
        self.removed = r.is_ok();
        r
    }
}

impl Drop for BoostCgroup {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            eprintln!("pmlab: warning: {e}");
        }
    }
}

fn empty_and_remove(hierarchy: &Path, dir: &Path) -> Result<(), HotplugError> {
    let mut last = None;
    for _ in 0..50 {
        if !dir.exists() {
            return Ok(());
        }
        if let Ok(procs) = read_trimmed(&dir.join("cgroup.procs")) {
            for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                let _ = write_value(&hierarchy.join("cgroup.procs"), &pid.to_string());
            }
        }
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(source) => last = Some(source),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(HotplugError::Io {
        path: dir.to_path_buf(),
        source: last.unwrap_or_else(|| std::io::Error::other("cannot remove cgroup")),
    })
}

/// Remove boost groups whose owning pmlab process is gone.
pub fn recover_stale(hierarchy: &Path) -> Vec<PathBuf> {
    let mut recovered = Vec::new();
    let Ok(rd) = fs::read_dir(hierarchy) else {
        return recovered;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        // Signal 0 only checks for existence.
        let alive = rustix::process::Pid::from_raw(pid)
            .is_some_and(|p| rustix::process::test_kill_process(p).is_ok());
        if !alive && empty_and_remove(hierarchy, &e.path()).is_ok() {
            recovered.push(e.path());
        }
    }
    recovered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_v2_with_cpu_then_v1() {
        let t = tempfile::tempdir().unwrap();
        assert!(find_cpu_hierarchy(t.path()).is_none());
        fs::create_dir_all(t.path().join("cpu")).unwrap();
        fs::write(t.path().join("cpu/cpu.shares"), "1024\n").unwrap();
        fs::create_dir_all(t.path().join("unified")).unwrap();
        fs::write(t.path().join("unified/cgroup.subtree_control"), "memory\n").unwrap();
        assert_eq!(find_cpu_hierarchy(t.path()).unwrap().1, CgroupVersion::V1);
        fs::write(
            t.path().join("unified/cgroup.subtree_control"),
            "cpu memory\n",
        )
        .unwrap();
        let (p, v) = find_cpu_hierarchy(t.path()).unwrap();
        assert_eq!(v, CgroupVersion::V2);
        assert!(p.ends_with("unified"));
    }

    #[test]
    fn no_controller_is_a_clear_error() {
        let t = tempfile::tempdir().unwrap();
        let e = BoostCgroup::create(t.path()).unwrap_err().to_string();
        assert!(e.contains("cpu cgroup controller"), "{e}");
    }

    #[test]
    fn stale_groups_of_dead_owners_are_removed() {
        let t = tempfile::tempdir().unwrap();
        // pid i32::MAX - 1 cannot exist; an empty dir stands for the group.
        let stale = t.path().join(format!("{PREFIX}{}", i32::MAX - 1));
        fs::create_dir(&stale).unwrap();
        let mine = t.path().join(format!("{PREFIX}{}", std::process::id()));
        fs::create_dir(&mine).unwrap();
        let r = recover_stale(t.path());
        assert_eq!(r, vec![stale.clone()]);
        assert!(!stale.exists() && mine.exists());
    }
}
