//! Restarting the haltpoll governor's per-CPU poll windows after a `haltpoll.*` write.
//!
//! The governor keeps an adaptive window per CPU and changes it only when a CPU halts
//! (`haltpoll_reflect`). A CPU whose polls keep catching their wakeups never halts, so
//! after `guest_halt_poll_ns=0` it can go on polling at its old window: a configuration
//! would inherit the previous one's polling. Switching the cpuidle governor away and back
//! re-enables every cpuidle device, and `haltpoll_enable_device` sets each window to 0, as
//! at boot.

use std::io;
use std::path::{Path, PathBuf};

const PARAMS: &str = "sys/module/haltpoll/parameters";
const CPUIDLE: &str = "sys/devices/system/cpu/cpuidle";

/// What [`restart_windows`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restart {
    /// The governor went to `via` and back to haltpoll: every window is 0 now.
    Restarted {
        /// The governor it switched through (e.g. `menu`).
        via: String,
    },
    /// The cpuidle governor is not haltpoll, so its parameters move no window.
    NotHaltpoll,
    /// haltpoll is the only governor available, so the windows could not be restarted.
    NoOtherGovernor,
}

/// The tree root of a haltpoll parameter file (`/` on the machine, a fake tree in tests),
/// or `None` when `path` is not one.
pub fn param_root(path: &Path) -> Option<PathBuf> {
    let dir = path.parent()?;
    let root = dir.to_str()?.strip_suffix(PARAMS)?;
    Some(PathBuf::from(if root.is_empty() { "/" } else { root }))
}

/// Restart every CPU's poll window if the cpuidle governor is haltpoll.
pub fn restart_windows(root: &Path) -> io::Result<Restart> {
    let cpuidle = root.join(CPUIDLE);
    let current = cpuidle.join("current_governor");
    if std::fs::read_to_string(&current)?.trim() != "haltpoll" {
        return Ok(Restart::NotHaltpoll);
    }
    let available = std::fs::read_to_string(cpuidle.join("available_governors"))?;
    let Some(via) = available.split_whitespace().find(|g| *g != "haltpoll") else {
        return Ok(Restart::NoOtherGovernor);
    };
    super::file::write_raw(&current, via)?;
    // Back to haltpoll whatever happened; one retry, as a lost governor is a leak.
    let back = super::file::write_raw(&current, "haltpoll")
        .or_else(|_| super::file::write_raw(&current, "haltpoll"));
    back?;
    let now = std::fs::read_to_string(&current)?;
    if now.trim() != "haltpoll" {
        return Err(io::Error::other(format!(
            "cpuidle governor reads `{}` after switching back to haltpoll",
            now.trim()
        )));
    }
    Ok(Restart::Restarted {
        via: via.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(current: &str, available: &str) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let c = t.path().join(CPUIDLE);
        std::fs::create_dir_all(&c).unwrap();
        std::fs::write(c.join("current_governor"), current).unwrap();
        std::fs::write(c.join("available_governors"), available).unwrap();
        t
    }

    #[test]
    fn param_root_finds_the_tree() {
        let p = Path::new("/sys/module/haltpoll/parameters/guest_halt_poll_ns");
        assert_eq!(param_root(p), Some(PathBuf::from("/")));
        let p = Path::new("/tmp/x/sys/module/haltpoll/parameters/guest_halt_poll_ns");
        assert_eq!(param_root(p), Some(PathBuf::from("/tmp/x/")));
        assert_eq!(param_root(Path::new("/proc/sys/kernel/x")), None);
    }

    #[test]
    fn switches_away_and_back_only_under_haltpoll() {
        let t = tree("haltpoll\n", "ladder menu haltpoll\n");
        assert_eq!(
            restart_windows(t.path()).unwrap(),
            Restart::Restarted {
                via: "ladder".into()
            }
        );
        let gov = std::fs::read_to_string(t.path().join(CPUIDLE).join("current_governor"));
        assert_eq!(gov.unwrap(), "haltpoll");

        let t = tree("menu\n", "ladder menu haltpoll\n");
        assert_eq!(restart_windows(t.path()).unwrap(), Restart::NotHaltpoll);
        let t = tree("haltpoll\n", "haltpoll\n");
        assert_eq!(restart_windows(t.path()).unwrap(), Restart::NoOtherGovernor);
    }
}
