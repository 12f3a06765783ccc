//! The system snapshot stored with every experiment: kernel, boot, CPU, virtualization,
//! and the values the experiment's knobs had when it started.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What the machine was when an experiment began.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemSnapshot {
    pub kernel_release: String,
    pub cmdline: String,
    pub cpu_model: String,
    pub cpus: u32,
    /// `none`, or the hypervisor as the guest sees it (e.g. `KVM (QEMU Standard PC)`).
    pub virtualization: String,
    pub hostname: String,
    pub boot_id: String,
    /// Knob name → value as found, for every knob the experiment touches.
    pub knobs: Vec<(String, String)>,
    /// `/sys/devices/system/cpu/cpuidle/current_driver` (`none`: no cpuidle driver, idle is
    /// the arch default and polling knobs have no effect; empty: not recorded).
    #[serde(default)]
    pub cpuidle_driver: String,
}

fn read_trimmed(root: &Path, abs: &str) -> Option<String> {
    let path: PathBuf = root.join(abs.trim_start_matches('/'));
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

impl SystemSnapshot {
    /// Read the snapshot under `root` (`/` in production, a fake tree in tests). Missing files
    /// give empty fields: a snapshot never fails.
    pub fn read(root: &Path) -> SystemSnapshot {
        let cpuinfo = read_trimmed(root, "/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim().to_string())
            })
        };
        let cpu_model = field("model name")
            .or_else(|| field("Model"))
            .or_else(|| field("cpu model"))
            .unwrap_or_default();
        let cpus = cpuinfo
            .lines()
            .filter(|l| l.split(':').next().map(str::trim) == Some("processor"))
            .count() as u32;
        let hypervisor_flag =
            field("flags").is_some_and(|f| f.split_whitespace().any(|x| x == "hypervisor"));
        let vendor = read_trimmed(root, "/sys/class/dmi/id/sys_vendor").unwrap_or_default();
        let product = read_trimmed(root, "/sys/class/dmi/id/product_name").unwrap_or_default();
        let hv_type = read_trimmed(root, "/sys/hypervisor/type");
        let virtualization = if let Some(t) = hv_type.filter(|t| !t.is_empty()) {
            t
        } else if hypervisor_flag
            || matches!(
                vendor.as_str(),
                "QEMU" | "KVM" | "Xen" | "Microsoft Corporation" | "VMware, Inc."
            )
        {
            let clocksources = read_trimmed(
                root,
                "/sys/devices/system/clocksource/clocksource0/available_clocksource",
            )
            .unwrap_or_default();
            let idle_driver = read_trimmed(root, "/sys/devices/system/cpu/cpuidle/current_driver")
                .unwrap_or_default();
            let kvm = cpuinfo.contains("kvm")
                || clocksources.contains("kvm-clock")
                || idle_driver == "haltpoll";
            let kvm = kvm && !clocksources.contains("hyperv");
            let name = match (kvm, vendor.as_str()) {
                (_, "QEMU") | (_, "KVM") | (true, _) => "KVM".to_string(),
                (_, "") => "unknown hypervisor".to_string(),
                (_, v) => v.to_string(),
            };
            if product.is_empty() {
                name
            } else {
                format!("{name} ({product})")
            }
        } else {
            "none".to_string()
        };
        SystemSnapshot {
            kernel_release: read_trimmed(root, "/proc/sys/kernel/osrelease").unwrap_or_default(),
            cmdline: read_trimmed(root, "/proc/cmdline").unwrap_or_default(),
            cpu_model,
            cpus,
            virtualization,
            hostname: read_trimmed(root, "/proc/sys/kernel/hostname").unwrap_or_default(),
            boot_id: read_trimmed(root, "/proc/sys/kernel/random/boot_id").unwrap_or_default(),
            knobs: Vec::new(),
            cpuidle_driver: read_trimmed(root, "/sys/devices/system/cpu/cpuidle/current_driver")
                .unwrap_or_else(|| "none".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
