//! The identity of a machine under test (host, boot, kernel, CPU, pmlab version), so runs
//! from different hosts and boots can be told apart and lined up. Read through
//! pmlab-kernel's sysinfo readers and the knob journal's boot id.

use pmlab_kernel::knob::journal;
use pmlab_kernel::sysinfo::{cpu, kernel};
use pmlab_kernel::Root;
use serde::{Deserialize, Serialize};

/// Who a machine is, as far as an experiment's results go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// `uname -n`.
    pub hostname: String,
    /// /proc/sys/kernel/random/boot_id: one per boot.
    pub boot_id: String,
    /// `uname -r`.
    pub kernel_release: Option<String>,
    /// `uname -v` (the build: number, date, options).
    pub kernel_build: Option<String>,
    /// /proc/cmdline.
    pub cmdline: Option<String>,
    pub cpu_model: Option<String>,
    /// The pmlab that read this.
    pub pmlab_version: String,
}

/// `uname -n`.
pub fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

impl Identity {
    /// This machine's identity (kernel and CPU facts read under `root`).
    pub fn read(root: &Root) -> Identity {
        let k = kernel::read(root);
        let c = cpu::read(root);
        Identity {
            hostname: hostname(),
            boot_id: journal::boot_id(),
            kernel_release: k.release.into_value(),
            kernel_build: k.version.into_value(),
            cmdline: k.cmdline.into_value(),
            cpu_model: c.model.into_value(),
            pmlab_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_of_this_machine() {
        let id = Identity::read(&Root::system());
        let file = |p: &str| std::fs::read_to_string(p).unwrap().trim().to_string();
        assert_eq!(id.boot_id, file("/proc/sys/kernel/random/boot_id"));
        assert_eq!(id.hostname, file("/proc/sys/kernel/hostname"));
        assert_eq!(
            id.kernel_release.as_deref(),
            Some(file("/proc/sys/kernel/osrelease").as_str())
        );
        assert_eq!(id.cmdline.as_deref(), Some(file("/proc/cmdline").as_str()));
        assert!(id.cpu_model.as_ref().is_some_and(|m| !m.is_empty()));
        let back: Identity = serde_json::from_str(&serde_json::to_string(&id).unwrap()).unwrap();
        assert_eq!(back, id);
    }
}
