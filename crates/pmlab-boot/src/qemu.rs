//! QEMU for a guest architecture: where its binary is, its version and machines (QMP
//! `query-machines`, for each machine's vCPU limit), whether KVM boots a guest here (a probe
//! boot), and the command line of one boot.

use crate::BootError;
use pmlab_store::spec::{Accel, GuestArch};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One QEMU system emulator.
#[derive(Debug, Clone)]
pub struct Qemu {
    /// The binary.
    pub binary: PathBuf,
    /// `qemu-system-x86_64 7.2.22 (Debian ...)`.
    pub version: String,
    /// The guest architecture it emulates.
    pub arch: GuestArch,
    /// Machine types: (name, alias, vCPU limit).
    machines: Vec<(String, Option<String>, u32)>,
}

/// The binary's name for `arch`.
pub fn binary_name(arch: GuestArch) -> &'static str {
    match arch {
        GuestArch::X86_64 => "qemu-system-x86_64",
        GuestArch::Arm64 => "qemu-system-aarch64",
    }
}

fn package(arch: GuestArch) -> &'static str {
    match arch {
        GuestArch::X86_64 => "qemu-system-x86",
        GuestArch::Arm64 => "qemu-system-arm",
    }
}

/// `name` in the directories of PATH.
pub(crate) fn in_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

impl Qemu {
    /// Find QEMU for `arch` (`given`, else in PATH) and ask it its version and machines.
    pub fn find(arch: GuestArch, given: Option<&Path>) -> Result<Qemu, BootError> {
        let name = binary_name(arch);
        let binary = match given {
            Some(p) => p.to_path_buf(),
            None => in_path(name).ok_or_else(|| BootError::Missing {
                what: format!("QEMU ({name}) for {arch} guests"),
                hint: format!(
                    "apt-get install {} (scripts/setup.sh installs it)",
                    package(arch)
                ),
            })?,
        };
        let mut child = Command::new(&binary)
            .args([
                "-machine",
                "none",
                "-qmp",
                "stdio",
                "-display",
                "none",
                "-nodefaults",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| BootError::Io {
                path: binary.clone(),
                source,
            })?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(
                b"{\"execute\":\"qmp_capabilities\"}\n{\"execute\":\"query-machines\"}\n{\"execute\":\"quit\"}\n",
            );
        }
        let out = child.wait_with_output().map_err(|source| BootError::Io {
            path: binary.clone(),
            source,
        })?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut version = None;
        let mut machines = Vec::new();
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if let Some(q) = v.pointer("/QMP/version") {
                let n = |k: &str| q.pointer(&format!("/qemu/{k}")).and_then(|x| x.as_u64());
                version = Some(format!(
                    "{name} {}.{}.{} ({})",
                    n("major").unwrap_or(0),
                    n("minor").unwrap_or(0),
                    n("micro").unwrap_or(0),
                    q.get("package").and_then(|p| p.as_str()).unwrap_or("")
                ));
            }
            if let Some(list) = v.get("return").and_then(|r| r.as_array()) {
                for m in list {
                    if let (Some(n), Some(max)) = (
                        m.get("name").and_then(|x| x.as_str()),
                        m.get("cpu-max").and_then(|x| x.as_u64()),
                    ) {
                        let alias = m.get("alias").and_then(|x| x.as_str()).map(str::to_string);
                        machines.push((n.to_string(), alias, max as u32));
                    }
                }
            }
        }
        let version = version.ok_or_else(|| BootError::Qemu {
            what: format!("{} did not answer QMP", binary.display()),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })?;
        Ok(Qemu {
            binary,
            version,
            arch,
            machines,
        })
    }

    /// The vCPU limit of `machine` (a name or an alias such as `pc`), or why it has none.
    pub fn max_cpus(&self, machine: &str) -> Result<u32, BootError> {
        let base = machine.split(',').next().unwrap_or(machine);
        self.machines
            .iter()
            .find(|(n, a, _)| n == base || a.as_deref() == Some(base))
            .map(|m| m.2)
            .ok_or_else(|| {
                BootError::Invalid(format!(
                    "{} has no machine type `{base}` (see `{} -machine help`)",
                    self.version,
                    self.binary.display()
                ))
            })
    }
}

/// What one boot runs: everything QEMU is told.
#[derive(Debug, Clone)]
pub struct BootCommand<'a> {
    /// The emulator.
    pub qemu: &'a Qemu,
    /// Accelerator and its options (`tcg,thread=multi`).
    pub accel: Accel,
    /// The accelerator's options after its name (`thread=multi`), possibly empty.
    pub accel_options: &'a str,
    /// Machine type.
    pub machine: &'a str,
    /// CPU model with its options.
    pub cpu: &'a str,
    /// vCPUs.
    pub vcpus: u32,
    /// Memory, MiB.
    pub memory_mib: u32,
    /// Kernel image.
    pub kernel: &'a Path,
    /// The initramfs.
    pub initrd: &'a Path,
    /// The whole kernel command line.
    pub append: String,
    /// Where the console goes.
    pub console: &'a Path,
    /// Where the guest's results go (the `org.pmlab.out` virtio port).
    pub output: &'a Path,
}

impl BootCommand<'_> {
    /// The `-accel` argument.
    pub fn accel_arg(&self) -> String {
        if self.accel_options.is_empty() {
            self.accel.as_str().to_string()
        } else {
            format!("{},{}", self.accel.as_str(), self.accel_options)
        }
    }

    /// The QEMU command: no network, no disk, no display; the console and the results port
    /// are files of the session's work directory.
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.qemu.binary);
        c.args(["-accel", &self.accel_arg()])
            .args(["-machine", self.machine])
            .args(["-cpu", self.cpu])
            .args(["-smp", &self.vcpus.to_string()])
            .args(["-m", &format!("{}M", self.memory_mib)])
            .args([
                "-nodefaults",
                "-no-user-config",
                "-display",
                "none",
                "-no-reboot",
            ])
            .arg("-kernel")
            .arg(self.kernel)
            .arg("-initrd")
            .arg(self.initrd)
            .args(["-append", &self.append])
            .arg("-chardev")
            .arg(format!("file,id=con,path={}", self.console.display()))
            .args(["-serial", "chardev:con"])
            .args(["-device", "virtio-serial-pci"])
            .arg("-chardev")
            .arg(format!("file,id=out,path={}", self.output.display()))
            .args(["-device", "virtserialport,chardev=out,name=org.pmlab.out"])
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        c
    }
}

/// The console device of `arch`'s default machine.
pub fn console_device(arch: GuestArch) -> &'static str {
    match arch {
        GuestArch::X86_64 => "ttyS0",
        GuestArch::Arm64 => "ttyAMA0",
    }
}

/// Defaults per architecture: machine, CPU model, accelerator options under TCG.
/// x86: `-cpu max` without LA57 and CMPXCHG16B: with either, Debian's 6.12 crashed under
/// QEMU 7.2's TCG here (double faults in SLUB's cmpxchg16b path); arm64: `max` with the
/// implementation-defined pointer authentication, which TCG runs much faster.
pub fn defaults(arch: GuestArch, accel: Accel) -> (&'static str, &'static str) {
    match (arch, accel) {
        (GuestArch::X86_64, Accel::Tcg) => ("pc", "max,la57=off,cx16=off"),
        (GuestArch::X86_64, Accel::Kvm) => ("pc", "host"),
        (GuestArch::Arm64, Accel::Tcg) => ("virt,gic-version=3", "max,pauth-impdef=on"),
        (GuestArch::Arm64, Accel::Kvm) => ("virt,gic-version=3", "host"),
    }
}
