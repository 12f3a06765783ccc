//! The system snapshot stored with every experiment: kernel, boot, CPU, virtualization,
//! and the values the experiment's knobs had when it started.

use pmlab_kernel::sysinfo::{self, Item};
use pmlab_kernel::Root;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What the machine was when an experiment began.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemSnapshot {
    /// `uname -r`.
    pub kernel_release: String,
    /// `/proc/cmdline`.
    pub cmdline: String,
    /// The CPU model name (`/proc/cpuinfo`).
    pub cpu_model: String,
    /// Number of processors `/proc/cpuinfo` lists.
    pub cpus: u32,
    /// `none`, or the hypervisor as the guest sees it (e.g. `KVM (QEMU Standard PC)`).
    pub virtualization: String,
    /// The host name.
    pub hostname: String,
    /// `/proc/sys/kernel/random/boot_id`: tells one boot from another.
    pub boot_id: String,
    /// Knob name → value as found, for every knob the experiment touches.
    pub knobs: Vec<(String, String)>,
    /// `/sys/devices/system/cpu/cpuidle/current_driver` (`none`: no cpuidle driver, idle is
    /// the arch default and polling knobs have no effect; empty: not recorded).
    #[serde(default)]
    pub cpuidle_driver: String,
    /// `uname -v`: the kernel's build (number, date, options), to tell two builds of one
    /// release apart.
    #[serde(default)]
    pub kernel_build: String,
    /// The pmlab that took the snapshot.
    #[serde(default)]
    pub pmlab_version: String,
}

impl SystemSnapshot {
    /// Read the snapshot under `root` (`/` in production, a fake tree in tests) with
    /// pmlab-kernel's system readers, the ones `pmlab info` shows. Missing files give empty
    /// fields: a snapshot never fails.
    pub fn read(root: &Path) -> SystemSnapshot {
        let root = Root::new(root);
        let kernel = sysinfo::kernel::read(&root);
        let cpus = sysinfo::cpu::read(&root);
        let virt = sysinfo::virt::read(&root, cpus.hypervisor_flag);
        let text = |i: Item<String>| i.into_value().unwrap_or_default();
        SystemSnapshot {
            kernel_release: text(kernel.release),
            cmdline: text(kernel.cmdline),
            cpu_model: text(cpus.model),
            cpus: cpus.processors,
            virtualization: virt.describe(),
            hostname: sysinfo::kernel::hostname(&root).unwrap_or_default(),
            boot_id: sysinfo::kernel::boot_id(&root).unwrap_or_default(),
            knobs: Vec::new(),
            cpuidle_driver: sysinfo::cpuidle::read(&root)
                .driver
                .into_value()
                .unwrap_or_else(|| "none".into()),
            kernel_build: text(kernel.version),
            pmlab_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_of_this_machine() {
        let s = SystemSnapshot::read(Path::new("/"));
        let file = |p: &str| std::fs::read_to_string(p).unwrap().trim().to_string();
        assert_eq!(s.boot_id, file("/proc/sys/kernel/random/boot_id"));
        assert_eq!(s.hostname, file("/proc/sys/kernel/hostname"));
        assert_eq!(s.kernel_release, file("/proc/sys/kernel/osrelease"));
        assert_eq!(s.kernel_build, file("/proc/sys/kernel/version"));
        assert_eq!(s.cmdline, file("/proc/cmdline"));
        assert_eq!(s.pmlab_version, env!("CARGO_PKG_VERSION"));
        assert!(!s.cpu_model.is_empty());
    }

    #[test]
    fn reads_a_fake_tree() {
        let dir = tempfile::tempdir().unwrap();
        let w = |p: &str, s: &str| {
            let path = dir.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, s).unwrap();
        };
        w("proc/sys/kernel/osrelease", "6.18.0\n");
        w("proc/cmdline", "console=ttyS0 quiet\n");
        w("proc/cpuinfo", "processor\t: 0\nmodel name\t: Fake CPU\nflags\t\t: fpu hypervisor\n\nprocessor\t: 1\nmodel name\t: Fake CPU\n");
        w("sys/class/dmi/id/sys_vendor", "QEMU\n");
        w(
            "sys/class/dmi/id/product_name",
            "Standard PC (Q35 + ICH9, 2009)\n",
        );
        w("proc/sys/kernel/random/boot_id", "abc\n");
        let guest = tempfile::tempdir().unwrap();
        let wg = |p: &str, s: &str| {
            let path = guest.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, s).unwrap();
        };
        wg(
            "proc/cpuinfo",
            "processor\t: 0\nflags\t\t: fpu hypervisor\n",
        );
        wg(
            "sys/devices/system/clocksource/clocksource0/available_clocksource",
            "kvm-clock tsc acpi_pm\n",
        );
        assert_eq!(
            SystemSnapshot::read(guest.path()).virtualization,
            "KVM",
            "no DMI (e.g. Firecracker): KVM from kvm-clock"
        );
        let s = SystemSnapshot::read(dir.path());
        assert_eq!(s.kernel_release, "6.18.0");
        assert_eq!(s.cmdline, "console=ttyS0 quiet");
        assert_eq!(s.cpu_model, "Fake CPU");
        assert_eq!(s.cpus, 2);
        assert_eq!(s.virtualization, "KVM (Standard PC (Q35 + ICH9, 2009))");
        assert_eq!(s.boot_id, "abc");
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(SystemSnapshot::read(empty.path()).virtualization, "none");
    }
}
