//! The hotplug driver: a CPU's `online`, `hotplug/fail` and `hotplug/state` files, the
//! timed write to `online` (CLOCK_MONOTONIC around the write(2) alone), and errno meanings.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use pmlab_kernel::Nanos;

use super::HotplugError;

/// Current CLOCK_MONOTONIC time in nanoseconds (the clock the trace is recorded with).
pub fn monotonic_ns() -> u64 {
    pmlab_kernel::units::monotonic_ns()
}

/// Which way a hotplug operation goes: the analysis's type (one for both).
pub use pmlab_analysis::hotplug::Direction;

/// What an errno from a hotplug write means, in words.
pub fn errno_meaning(errno: i32) -> &'static str {
    match errno {
        libc::EAGAIN => "a hotplug step failed and the kernel rolled the CPU back (injected fault or transient failure)",
        libc::EBUSY => "the kernel refused: hotplug is busy or disabled, or this is the last online CPU",
        libc::EINVAL => "the kernel refused the value (state not injectable, or CPU not present)",
        libc::EPERM | libc::EACCES => "permission denied: CPU hotplug needs root",
        libc::EIO => "the CPU did not respond during bringup or teardown",
        libc::ENOMEM => "the kernel ran out of memory for the operation",
        libc::ECANCELED => "the kernel cancelled the bringup (CPU not bootable)",
        libc::ENODEV | libc::ENOENT => "no such CPU",
        _ => "unexpected error",
    }
}

/// The outcome of one timed write to `online`.
#[derive(Debug, Clone, Copy)]
pub struct TimedWrite {
    /// CLOCK_MONOTONIC just before the write(2).
    pub start_ns: u64,
    /// CLOCK_MONOTONIC just after it returned.
    pub end_ns: u64,
    /// errno when the write failed.
    pub errno: Option<i32>,
}

impl TimedWrite {
    /// Wall time of the write.
    pub fn wall(&self) -> Nanos {
        Nanos(self.end_ns.saturating_sub(self.start_ns))
    }
}

/// One CPU's hotplug files under a sysfs root.
#[derive(Debug, Clone)]
pub struct CpuFiles {
    /// The CPU number.
    pub cpu: u32,
    dir: PathBuf,
}

impl CpuFiles {
    /// The files of `cpu` under `sys_cpu` (normally `/sys/devices/system/cpu`).
    pub fn new(sys_cpu: &Path, cpu: u32) -> CpuFiles {
        CpuFiles {
            cpu,
            dir: sys_cpu.join(format!("cpu{cpu}")),
        }
    }

    /// `cpuN/online`.
    pub fn online_path(&self) -> PathBuf {
        self.dir.join("online")
    }
    /// `cpuN/hotplug/fail`.
    pub fn fail_path(&self) -> PathBuf {
        self.dir.join("hotplug/fail")
    }
    /// `cpuN/hotplug/state`.
    pub fn state_path(&self) -> PathBuf {
        self.dir.join("hotplug/state")
    }

    /// Whether the CPU can be hot-(un)plugged at all (it has an `online` file).
    pub fn has_online_file(&self) -> bool {
        self.online_path().is_file()
    }

    /// Whether the CPU is online now.
    pub fn is_online(&self) -> Result<bool, HotplugError> {
        let v = read_trimmed(&self.online_path())?;
        match v.as_str() {
            "1" => Ok(true),
            "0" => Ok(false),
            other => Err(HotplugError::Parse {
                path: self.online_path(),
                what: format!("expected 0 or 1, found {other:?}"),
            }),
        }
    }

    /// The armed injection state (-1 when none).
    pub fn fail(&self) -> Result<i32, HotplugError> {
        read_int(&self.fail_path())
    }

    /// The CPU's current hotplug state number (236-ish online, 0 offline).
    pub fn state(&self) -> Result<i32, HotplugError> {
        read_int(&self.state_path())
    }

    /// Arm (or with -1 disarm) fault injection; returns the kernel's errno on refusal.
    pub fn set_fail(&self, state: i32) -> Result<(), HotplugError> {
        write_value(&self.fail_path(), &state.to_string())
    }

    /// Write 0/1 to `online`, timing only the write(2) with CLOCK_MONOTONIC.
    /// A refusal by the kernel is not an `Err`: it is in `TimedWrite::errno`.
    pub fn write_online_timed(&self, online: bool) -> Result<TimedWrite, HotplugError> {
        let path = self.online_path();
        let mut f = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .map_err(|source| HotplugError::Io {
                path: path.clone(),
                source,
            })?;
        let value: &[u8] = if online { b"1" } else { b"0" };
        let start_ns = monotonic_ns();
        let res = f.write_all(value);
        let end_ns = monotonic_ns();
        let errno = match res {
            Ok(_) => None,
            Err(e) => Some(e.raw_os_error().unwrap_or(libc::EIO)),
        };
        Ok(TimedWrite {
            start_ns,
            end_ns,
            errno,
        })
    }

    /// Bring the CPU to `online` (untimed), erroring with the errno's meaning on refusal.
    pub fn set_online(&self, online: bool) -> Result<(), HotplugError> {
        if self.is_online()? == online {
            return Ok(());
        }
        let w = self.write_online_timed(online)?;
        if let Some(errno) = w.errno {
            return Err(HotplugError::Refused {
                path: self.online_path(),
                value: if online { "1" } else { "0" }.into(),
                errno,
                meaning: errno_meaning(errno),
            });
        }
        Ok(())
    }
}

pub(crate) fn read_trimmed(path: &Path) -> Result<String, HotplugError> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|source| HotplugError::Io {
            path: path.to_path_buf(),
            source,
        })
}

fn read_int(path: &Path) -> Result<i32, HotplugError> {
    let v = read_trimmed(path)?;
    v.parse().map_err(|_| HotplugError::Parse {
        path: path.to_path_buf(),
        what: format!("expected an integer, found {v:?}"),
    })
}

/// One write(2) of `value`; a kernel refusal becomes `HotplugError::Refused` with its errno.
pub(crate) fn write_value(path: &Path, value: &str) -> Result<(), HotplugError> {
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|source| HotplugError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    match f.write_all(value.as_bytes()) {
        Ok(_) => Ok(()),
        Err(e) => {
            let errno = e.raw_os_error().unwrap_or(libc::EIO);
            Err(HotplugError::Refused {
                path: path.to_path_buf(),
                value: value.to_string(),
                errno,
                meaning: errno_meaning(errno),
            })
        }
    }
}

/// The CPUs in `/sys/devices/system/cpu/online` (a CPU list).
pub fn online_cpus(sys_cpu: &Path) -> Result<Vec<u32>, HotplugError> {
    let path = sys_cpu.join("online");
    let v = read_trimmed(&path)?;
    if v.is_empty() {
        // The kernel's list parser refuses an empty list; sysfs writes one for "none".
        return Ok(Vec::new());
    }
    super::parse_cpu_list(&v).map_err(|e| HotplugError::Parse {
        path,
        what: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_cpu(root: &Path, cpu: u32, online: &str) -> CpuFiles {
        let d = root.join(format!("cpu{cpu}/hotplug"));
        fs::create_dir_all(&d).unwrap();
        fs::write(root.join(format!("cpu{cpu}/online")), online).unwrap();
        fs::write(d.join("fail"), "-1\n").unwrap();
        fs::write(d.join("state"), "236\n").unwrap();
        CpuFiles::new(root, cpu)
    }

    #[test]
    fn reads_and_writes_fake_files() {
        let t = tempfile::tempdir().unwrap();
        let c = fake_cpu(t.path(), 1, "1\n");
        assert!(c.has_online_file());
        assert!(c.is_online().unwrap());
        assert_eq!(c.fail().unwrap(), -1);
        assert_eq!(c.state().unwrap(), 236);
        let w = c.write_online_timed(false).unwrap();
        assert!(w.errno.is_none());
        assert!(w.end_ns >= w.start_ns);
        assert!(!c.is_online().unwrap());
        c.set_fail(140).unwrap();
        assert_eq!(c.fail().unwrap(), 140);
    }

    #[test]
    fn cpu_without_online_file_is_reported() {
        let t = tempfile::tempdir().unwrap();
        fs::create_dir_all(t.path().join("cpu0")).unwrap();
        let c = CpuFiles::new(t.path(), 0);
        assert!(!c.has_online_file());
        assert!(matches!(c.is_online(), Err(HotplugError::Io { .. })));
    }

    #[test]
    fn garbage_online_value_is_a_parse_error_with_path() {
        let t = tempfile::tempdir().unwrap();
        let c = fake_cpu(t.path(), 2, "yes\n");
        let e = c.is_online().unwrap_err().to_string();
        assert!(e.contains("cpu2/online"), "{e}");
    }

    #[test]
    fn errno_meanings_name_the_common_cases() {
        assert!(errno_meaning(libc::EAGAIN).contains("rolled"));
        assert!(errno_meaning(libc::EBUSY).contains("last online CPU"));
        assert!(errno_meaning(libc::EPERM).contains("root"));
    }

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a && a > 0);
    }
}
