//! Kernel facts: release, version, boot command line, and `/sys/kernel/rcu_expedited`.

use super::item::{item, read_bool, read_text, Item};
use crate::Root;
use serde::Serialize;

/// The running kernel: release, version, command line, rcu_expedited.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Kernel {
    /// `uname -r`, from /proc/sys/kernel/osrelease, else the release in /proc/version.
    pub release: Item<String>,
    /// `uname -v`, from /proc/sys/kernel/version.
    pub version: Item<String>,
    /// /proc/cmdline.
    pub cmdline: Item<String>,
    /// /sys/kernel/rcu_expedited (a hotplug mitigation knob).
    pub rcu_expedited: Item<bool>,
}

/// Read the kernel's picture; never fails (each part says why it is missing).
pub fn read(root: &Root) -> Kernel {
    Kernel {
        release: item(
            root,
            read_text(root, "/proc/sys/kernel/osrelease").or_else(|e| {
                // `Linux version RELEASE (...)`: what pepc's snapshots have.
                read_text(root, "/proc/version")
                    .ok()
                    .and_then(|v| {
                        Some(
                            v.strip_prefix("Linux version ")?
                                .split(' ')
                                .next()?
                                .to_string(),
                        )
                    })
                    .ok_or(e)
            }),
        ),
        version: item(root, read_text(root, "/proc/sys/kernel/version")),
        cmdline: item(root, read_text(root, "/proc/cmdline")),
        rcu_expedited: item(root, read_bool(root, "/sys/kernel/rcu_expedited")),
    }
}

/// The host name (`/proc/sys/kernel/hostname`).
pub fn hostname(root: &Root) -> Option<String> {
    read_text(root, "/proc/sys/kernel/hostname").ok()
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`), to tell boots apart.
pub fn boot_id(root: &Root) -> Option<String> {
    read_text(root, "/proc/sys/kernel/random/boot_id").ok()
}
