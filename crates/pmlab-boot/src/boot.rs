//! One guest boot: QEMU started as a supervised child (its own process group, killed with
//! pmlab, on a signal, on a deadline and on drop), its console and results read back, and
//! the boot judged: completed, panicked, crashed, hung (timed out) or refused by QEMU.

use crate::qemu::BootCommand;
use crate::BootError;
use pmlab_workload::supervised::{Ended, Supervised};
use serde::Serialize;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Console lines kept with a failed boot.
pub const TAIL_LINES: usize = 8;

/// How a boot ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Outcome {
    /// Reached pmlab's init, which sent its results and powered off.
    Completed,
    /// The kernel panicked: the panic line.
    Panicked {
        /// `Kernel panic - not syncing: ...`.
        line: String,
    },
    /// The kernel oopsed or hit a BUG or a double fault and did not finish: the first such
    /// line.
    Crashed {
        /// `Oops: ...`, `BUG: ...`, `traps: PANIC: double fault`.
        line: String,
    },
    /// No result within the deadline; QEMU was killed.
    TimedOut {
        /// The deadline.
        after_s: u64,
    },
    /// QEMU refused or failed before the guest ran: its last error line.
    QemuFailed {
        /// QEMU's message.
        message: String,
    },
    /// The guest ran but sent no results (init did not finish).
    NoResults,
    /// pmlab was asked to stop; QEMU was killed.
    Cancelled,
}

impl Outcome {
    /// One line for tables and run errors.
    pub fn describe(&self) -> String {
        match self {
            Outcome::Completed => "completed".into(),
            Outcome::Panicked { line } => format!("panicked: {line}"),
            Outcome::Crashed { line } => format!("crashed: {line}"),
            Outcome::TimedOut { after_s } => format!("timed out after {after_s} s"),
            Outcome::QemuFailed { message } => format!("QEMU failed: {message}"),
            Outcome::NoResults => "finished without sending results".into(),
            Outcome::Cancelled => "cancelled".into(),
        }
    }
}

/// What one boot left.
#[derive(Debug, Clone)]
pub struct Booted {
    /// How it ended.
    pub outcome: Outcome,
    /// The console, as text.
    pub console: String,
    /// The guest's results archive, when it sent one.
    pub results: Option<PathBuf>,
    /// QEMU's start to its exit.
    pub wall: Duration,
    /// QEMU's process id (its threads, the vCPUs among them, were forked from it).
    pub pid: u32,
}

impl Booted {
    /// The console's last lines (for failed boots).
    pub fn tail(&self) -> Vec<String> {
        let lines: Vec<&str> = self
            .console
            .lines()
            .map(|l| l.trim_end_matches('\r'))
            .filter(|l| !l.trim().is_empty())
            .collect();
        lines[lines.len().saturating_sub(TAIL_LINES)..]
            .iter()
            .map(|l| l.to_string())
            .collect()
    }
}

/// Boot once and wait at most `timeout`.
pub fn boot(cmd: &BootCommand, timeout: Duration) -> Result<Booted, BootError> {
    for p in [cmd.console, cmd.output] {
        let _ = std::fs::remove_file(p);
    }
    let stderr_path = cmd.console.with_extension("stderr");
    let stderr_file = std::fs::File::create(&stderr_path).map_err(|source| BootError::Io {
        path: stderr_path.clone(),
        source,
    })?;
    let mut command = cmd.command();
    command.stderr(stderr_file);
    let t0 = Instant::now();
    let mut child = Supervised::spawn(command).map_err(|source| BootError::Io {
        path: cmd.qemu.binary.clone(),
        source,
    })?;
    let pid = child.pid();
    let ended = child.wait(Some(timeout)).map_err(|source| BootError::Io {
        path: cmd.qemu.binary.clone(),
        source,
    })?;
    let wall = t0.elapsed();
    drop(child);
    let stderr = read_lossy(&stderr_path);
    let console = read_lossy(cmd.console);
    let results = std::fs::metadata(cmd.output)
        .ok()
        .filter(|m| m.len() > 0)
        .map(|_| cmd.output.to_path_buf());
    let outcome = judge(&ended, &console, &stderr, results.is_some(), timeout);
    Ok(Booted {
        outcome,
        console,
        results,
        wall,
        pid,
    })
}

fn read_lossy(p: &Path) -> String {
    let mut b = Vec::new();
    if let Ok(mut f) = std::fs::File::open(p) {
        let _ = f.read_to_end(&mut b);
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// Judge a boot from how QEMU ended, the console, QEMU's stderr and whether results came.
pub fn judge(
    ended: &Ended,
    console: &str,
    stderr: &str,
    results: bool,
    timeout: Duration,
) -> Outcome {
    let line = |pat: &str| {
        console
            .lines()
            .find(|l| l.contains(pat))
            .map(|l| strip_time(l).to_string())
    };
    if let Some(l) = line("Kernel panic - not syncing") {
        return Outcome::Panicked { line: l };
    }
    let crash = ["Oops:", "BUG:", "double fault", "general protection fault"]
        .iter()
        .find_map(|p| line(p));
    let done = console.contains("PMLAB-DONE");
    match ended {
        Ended::Cancelled => Outcome::Cancelled,
        Ended::TimedOut => match crash {
            Some(l) => Outcome::Crashed { line: l },
            None => Outcome::TimedOut {
                after_s: timeout.as_secs(),
            },
        },
        Ended::Exited(status) => {
            if done && results && crash.is_none() {
                Outcome::Completed
            } else if let Some(l) = crash {
                Outcome::Crashed { line: l }
            } else if !status.success()
                || !console.contains("PMLAB-INIT") && !stderr.trim().is_empty()
            {
                Outcome::QemuFailed {
                    message: stderr
                        .lines()
                        .rev()
                        .find(|l| !l.trim().is_empty())
                        .unwrap_or("exited before the guest started")
                        .trim()
                        .to_string(),
                }
            } else {
                Outcome::NoResults
            }
        }
    }
}

/// A console line without its `[    1.234567] ` time stamp.
pub fn strip_time(line: &str) -> &str {
    let l = line.trim_end_matches('\r');
    match l.trim_start().strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((t, after)) if t.trim().parse::<f64>().is_ok() => after.trim_start(),
            _ => l,
        },
        None => l,
    }
}

/// The time stamp of a console line, seconds, when it has one.
pub fn line_time(line: &str) -> Option<f64> {
    let rest = line.trim_start().strip_prefix('[')?;
    rest.split_once(']')?.0.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn ok() -> Ended {
        Ended::Exited(std::process::ExitStatus::from_raw(0))
    }

    #[test]
    fn a_panic_is_named_by_its_line() {
        let c = "[    1.0] foo\n[    2.041292] Kernel panic - not syncing: VFS: Unable to mount root fs\n";
        assert_eq!(
            judge(&ok(), c, "", false, Duration::from_secs(9)),
            Outcome::Panicked {
                line: "Kernel panic - not syncing: VFS: Unable to mount root fs".into()
            }
        );
    }

    #[test]
    fn a_hang_with_an_oops_is_a_crash_and_without_one_a_timeout() {
        let t = Duration::from_secs(30);
        assert!(matches!(
            judge(
                &Ended::TimedOut,
                "[ 1.0] Oops: double fault: 0000 [#1]\n",
                "",
                false,
                t
            ),
            Outcome::Crashed { .. }
        ));
        assert_eq!(
            judge(&Ended::TimedOut, "[ 1.0] booting\n", "", false, t),
            Outcome::TimedOut { after_s: 30 }
        );
    }

    #[test]
    fn completion_needs_the_done_line_and_results() {
        let t = Duration::from_secs(30);
        let c = "PMLAB-INIT 1.0\nPMLAB-DONE 100\n";
        assert_eq!(judge(&ok(), c, "", true, t), Outcome::Completed);
        assert_eq!(judge(&ok(), c, "", false, t), Outcome::NoResults);
    }

    #[test]
    fn qemu_refusals_carry_its_message() {
        let st = std::process::ExitStatus::from_raw(1 << 8);
        let o = judge(
            &Ended::Exited(st),
            "",
            "qemu-system-x86_64: Invalid SMP CPUs 300. The max CPUs supported by machine 'pc-i440fx-7.2' is 255\n",
            false,
            Duration::from_secs(3),
        );
        assert!(
            matches!(o, Outcome::QemuFailed { ref message } if message.contains("255")),
            "{o:?}"
        );
    }

    #[test]
    fn console_times_are_read_and_stripped() {
        let l = "[    0.606444] smp: Bringing up secondary CPUs ...";
        assert_eq!(line_time(l), Some(0.606444));
        assert_eq!(strip_time(l), "smp: Bringing up secondary CPUs ...");
    }
}
