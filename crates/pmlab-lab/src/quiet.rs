//! `--wait-quiet MAX`: before each run, after the settle, wait until the machine has been
//! quiet for one window ([`WINDOW`]: no CPU with more than [`QUIET_PCT`] of its time used by
//! tasks other than the experiment's, or by the host), at most MAX, and say how long it waited.
//!
//! Each window is one blocking wait (the same one as the settle's, woken early only by a
//! cancellation) between two readings of /proc/stat, so the number of wakeups is bounded by
//! MAX / WINDOW, and all of them are before the run's measured part, never inside it.
//! The kernel offers no event for "the machine went quiet" (a PSI trigger fires on pressure
//! rising, not falling), hence the coarse windows.

use crate::disturbance::{self, names, Reading};
use pmlab_kernel::{Direction, Metric, Nanos};
use std::path::Path;
use std::time::{Duration, Instant};

/// One quiet check's window.
pub const WINDOW: Duration = Duration::from_millis(500);
/// A window is quiet when no CPU had more than this share (%) taken by others.
pub const QUIET_PCT: f64 = 5.0;

/// `--wait-quiet`'s setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitQuiet {
    /// The longest wait before a run goes ahead anyway.
    pub max: Duration,
}

/// How one wait ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Waited {
    /// Time waited.
    pub waited: Duration,
    /// A quiet window was seen (false: MAX ran out first).
    pub quiet: bool,
    /// The busiest CPU's share taken by others in the last window, %.
    pub last_pct: f64,
}

impl Waited {
    /// Side metrics of the run that followed: `disturbance.waited_s`, `disturbance.quiet`.
    pub fn metrics(&self) -> Vec<Metric> {
        vec![
            Metric::new(
                names::WAITED_S,
                self.waited.as_secs_f64(),
                "s",
                Direction::Neutral,
            ),
            Metric::new(
                "disturbance.quiet",
                if self.quiet { 1.0 } else { 0.0 },
                "",
                Direction::Neutral,
            ),
        ]
    }
}

/// Why the wait stopped early.
#[derive(Debug, thiserror::Error)]
pub enum QuietError {
    /// Cancelled by a signal.
    #[error("interrupted while waiting for a quiet machine")]
    Cancelled,
    /// /proc/stat or the own-time reading failed.
    #[error("waiting for a quiet machine")]
    Read(#[source] pmlab_workload::ProbeError),
    /// The blocking wait failed.
    #[error("waiting for a quiet machine")]
    Wait(#[source] pmlab_workload::WorkloadError),
}

impl WaitQuiet {
    /// Wait under `root` until one window is quiet, at most `self.max` (at least one window).
    pub fn wait(&self, root: &Path) -> Result<Waited, QuietError> {
        let started = Instant::now();
        let tick = disturbance::tick_ns();
        loop {
            let before = Reading::take(root).map_err(QuietError::Read)?;
            let window = Nanos(WINDOW.as_nanos() as u64);
            if pmlab_workload::settle(window).map_err(QuietError::Wait)? {
                return Err(QuietError::Cancelled);
            }
            let after = Reading::take(root).map_err(QuietError::Read)?;
            let busiest = disturbance::metrics(&before, &after, &[], tick)
                .iter()
                .filter(|m| m.name == names::SHARE_PCT && m.cpu.is_some())
                .map(|m| m.value)
                .fold(0.0, f64::max);
            let quiet = busiest <= QUIET_PCT;
            if quiet || started.elapsed() + WINDOW > self.max {
                return Ok(Waited {
                    waited: started.elapsed(),
                    quiet,
                    last_pct: busiest,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_cpu_makes_it_wait_to_the_bound_and_says_so() {
        let hog = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        struct Kill(std::process::Child);
        impl Drop for Kill {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let _hog = Kill(hog);
        std::thread::sleep(Duration::from_millis(100));
        let w = WaitQuiet {
            max: Duration::from_millis(1200),
        }
        .wait(Path::new("/"))
        .unwrap();
        assert!(!w.quiet, "{w:?}");
        assert!(w.last_pct > 50.0, "{w:?}");
        assert!(
            w.waited >= Duration::from_millis(1000) && w.waited < Duration::from_millis(2000),
            "{w:?}"
        );
        let m = w.metrics();
        assert_eq!(m[1].value, 0.0);
    }

    #[test]
    fn a_missing_proc_stat_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = WaitQuiet {
            max: Duration::from_secs(1),
        }
        .wait(dir.path())
        .unwrap_err();
        assert!(pmlab_kernel::error_chain(&e).contains("proc/stat"));
    }
}
