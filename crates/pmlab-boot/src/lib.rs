//! pmlab-boot: the boot lab. Guests booted under QEMU per kernel, command line and vCPU
//! count, as runs of the lab's protocol (interleaved, adaptive, stored, compared); each
//! guest's boot-time trace brought back by pmlab's init and broken down by the hotplug
//! analysis; failed boots kept as outcomes.

pub mod boot;
pub mod bringup;
pub mod guest;
pub mod host;
pub mod image;
pub mod lab;
pub mod qemu;

pub use image::KernelImage;
pub use lab::{BootLab, BootOptions, GuestConfig, Prepared};
pub use pmlab_store::spec::{Accel, GuestArch, GuestSpec};

use std::path::PathBuf;

/// Where set-up leaves guest kernels and busybox builds (`PMLAB_GUEST_DIR`, default
/// `/var/cache/pmlab/guest`).
pub fn cache_dir() -> PathBuf {
    std::env::var_os("PMLAB_GUEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/pmlab/guest"))
}

/// Why the boot lab refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    /// Bad input, found before anything ran.
    #[error("{0}")]
    Invalid(String),
    /// A file that is not a kernel pmlab can boot.
    #[error("{} is not a kernel: {why}", path.display())]
    NotAKernel {
        /// The file.
        path: PathBuf,
        /// What it lacks.
        why: String,
    },
    /// Something the lab needs is not on this machine.
    #[error("{what} not found: {hint}")]
    Missing {
        /// What is missing.
        what: String,
        /// How to get it.
        hint: String,
    },
    /// QEMU misbehaved outside a boot.
    #[error("{what}: {detail}")]
    Qemu {
        /// What was asked.
        what: String,
        /// What it said.
        detail: String,
    },
    /// A file of the session.
    #[error("{}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A boot that did not complete (kept as a failed run).
    #[error("boot failed: {outcome}")]
    Failed {
        /// What happened, with the console's last lines.
        outcome: String,
    },
    /// What a guest sent back could not be read.
    #[error("{what}")]
    Results {
        /// What was being read.
        what: String,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The host's kvm events could not be recorded (`--kvm-exits`).
    #[error(
        "--kvm-exits: the host's kvm:* events cannot be recorded (load the kvm module and \
         mount tracefs, or give --kvm-exits off)"
    )]
    HostTrace(#[source] pmlab_trace::record::RecordError),
    /// The lab (store, protocol) failed.
    #[error(transparent)]
    Lab(#[from] pmlab_lab::lab::LabError),
}
