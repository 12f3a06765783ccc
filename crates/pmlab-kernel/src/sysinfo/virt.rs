//! Virtualization: the `hypervisor` CPU flag, the hypervisor's CPUID signature and
//! KVM paravirt features/hints (CPUID leaves 0x40000000/1, real machine only), DMI,
//! clocksources (kvm-clock), whether the cpuidle-haltpoll driver could register, and
//! whether the host takes free guest memory back (free page reporting).

use super::item::{list_names, read_num, read_text, read_words};
use crate::Root;
use serde::Serialize;

/// The virtualisation picture: hypervisor, clocksource, KVM features.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Virt {
    /// /proc/cpuinfo `flags` has `hypervisor` (we run in a guest).
    pub hypervisor_flag: bool,
    /// Best name for the hypervisor: CPUID signature, /sys/hypervisor/type, or DMI.
    pub hypervisor: Option<String>,
    /// How `hypervisor` was found.
    pub hypervisor_source: Option<String>,
    /// DMI `sys_vendor` (`QEMU`, `Amazon EC2`).
    pub dmi_vendor: Option<String>,
    /// DMI `product_name`.
    pub dmi_product: Option<String>,
    /// The current clocksource (`kvm-clock`, `tsc`).
    pub clocksource: Option<String>,
    /// The available clocksources.
    pub available_clocksources: Vec<String>,
    /// `kvm-clock` is among the clocksources.
    pub kvm_clock: bool,
    /// KVM CPUID leaves; `None` on a fake tree, on non-x86 or outside KVM.
    pub kvm_cpuid: Option<KvmCpuid>,
    /// Why `kvm_cpuid` is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kvm_cpuid_note: Option<String>,
    /// `Some` when the guest reports free memory to the host (virtio-balloon).
    pub free_page_reporting: Option<FreePageReporting>,
}

/// Free page reporting is on: the virtio-balloon driver hands free blocks of memory to the
/// host, which takes their backing away, so the next touch of such a block faults in the
/// host as well as in the guest. Only large free blocks are reported, so huge pages (which
/// need them) pay for it and 4 KiB pages rarely do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FreePageReporting {
    /// Free blocks of 2^order pages and larger are reported (`page_reporting_order`).
    pub order: Option<u32>,
}

/// The virtio device id of a memory balloon, as sysfs writes it.
const VIRTIO_ID_BALLOON: &str = "0x0005";
/// VIRTIO_BALLOON_F_REPORTING: the feature bit, a position in sysfs' `features` string.
const VIRTIO_BALLOON_F_REPORTING: usize = 5;

/// Whether a bound virtio-balloon device negotiated free page reporting.
pub fn free_page_reporting(root: &Root) -> Option<FreePageReporting> {
    let base = "/sys/bus/virtio/devices";
    let on = list_names(root, base).ok()?.iter().any(|d| {
        let dev = format!("{base}/{d}");
        read_text(root, &format!("{dev}/device")).is_ok_and(|id| id == VIRTIO_ID_BALLOON)
            && root.path(&format!("{dev}/driver")).exists()
            && read_text(root, &format!("{dev}/features"))
                .is_ok_and(|f| f.as_bytes().get(VIRTIO_BALLOON_F_REPORTING) == Some(&b'1'))
    });
    on.then(|| FreePageReporting {
        order: read_num(
            root,
            "/sys/module/page_reporting/parameters/page_reporting_order",
        )
        .and_then(|o| u32::try_from(o).ok()),
    })
}

impl Virt {
    /// We run in a guest (the `hypervisor` flag or a hypervisor name was found).
    pub fn is_guest(&self) -> bool {
        self.hypervisor_flag || self.hypervisor.is_some()
    }
    /// The hypervisor is KVM (CPUID signature, kvm-clock, or its name).
    pub(crate) fn is_kvm(&self) -> bool {
        self.kvm_cpuid.is_some()
            || self.kvm_clock
            || self
                .hypervisor
                .as_deref()
                .is_some_and(|h| h.contains("KVM"))
    }
    /// One line for a stored system snapshot: `none` on bare metal, else the hypervisor
    /// (`KVM` for QEMU/KVM however found) with the DMI product when there is one, e.g.
    /// `KVM (Standard PC (Q35 + ICH9, 2009))`.
    pub fn describe(&self) -> String {
        let Some(h) = self.hypervisor.as_deref() else {
            return "none".into();
        };
        let name = if self.is_kvm() || matches!(h, "QEMU" | "KVM") {
            "KVM"
        } else if h == "unknown" {
            "unknown hypervisor"
        } else {
            h
        };
        match &self.dmi_product {
            Some(p) => format!("{name} ({p})"),
            None => name.to_string(),
        }
    }

    /// KVM_HINTS_REALTIME: KVM says vCPUs are never preempted; cpuidle-haltpoll
    /// registers by default only then.
    pub fn realtime_hint(&self) -> Option<bool> {
        self.kvm_cpuid
            .as_ref()
            .map(|c| c.hints.iter().any(|h| h == "REALTIME"))
    }
}

/// The KVM CPUID leaves (x86 only, read with the `cpuid` instruction).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KvmCpuid {
    /// The CPUID base the KVM signature was found at (0x40000000, or 0x40000100 with Hyper-V).
    pub base: String,
    /// KVM_FEATURE_* names from EAX of base+1.
    pub features: Vec<String>,
    /// KVM_HINTS_* names from EDX of base+1.
    pub hints: Vec<String>,
    /// EAX of base+1 in hex, for features this list does not name.
    pub features_raw: String,
}

const KVM_FEATURES: &[(u32, &str)] = &[
    (0, "CLOCKSOURCE"),
    (1, "NOP_IO_DELAY"),
    (2, "MMU_OP"),
    (3, "CLOCKSOURCE2"),
    (4, "ASYNC_PF"),
    (5, "STEAL_TIME"),
    (6, "PV_EOI"),
    (7, "PV_UNHALT"),
    (9, "PV_TLB_FLUSH"),
    (10, "ASYNC_PF_VMEXIT"),
    (11, "PV_SEND_IPI"),
    (12, "POLL_CONTROL"),
    (13, "PV_SCHED_YIELD"),
    (14, "ASYNC_PF_INT"),
    (15, "MSI_EXT_DEST_ID"),
    (16, "HC_MAP_GPA_RANGE"),
    (17, "MIGRATION_CONTROL"),
    (24, "CLOCKSOURCE_STABLE_BIT"),
];

/// Decode KVM_FEATURE_* bits (EAX of leaf 0x40000001).
pub fn kvm_feature_names(eax: u32) -> Vec<String> {
    KVM_FEATURES
        .iter()
        .filter(|(b, _)| eax & (1 << b) != 0)
        .map(|(_, n)| n.to_string())
        .collect()
}

/// Hypervisor names by CPUID signature (leaf 0x40000000 EBX, ECX, EDX).
fn signature_name(sig: &str) -> Option<&'static str> {
    Some(match sig.trim_end_matches('\0') {
        "KVMKVMKVM" => "KVM",
        "Microsoft Hv" => "Hyper-V",
        "VMwareVMware" => "VMware",
        "XenVMMXenVMM" => "Xen",
        "TCGTCGTCGTCG" => "QEMU TCG",
        "bhyve bhyve" => "bhyve",
        "ACRNACRNACRN" => "ACRN",
        " lrpepyh  vr" => "Parallels",
        "QNXQVMBSQG" => "QNX",
        _ => return None,
    })
}

/// (name, KVM leaves) from CPUID, on x86_64 when the hypervisor bit is set.
#[cfg(target_arch = "x86_64")]
fn cpuid_probe() -> (Option<String>, Option<KvmCpuid>) {
    use core::arch::x86_64::__cpuid;
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every x86_64 CPU; unknown leaves return defined values.
    let cpuid = |leaf: u32| unsafe { __cpuid(leaf) };
    if cpuid(1).ecx & (1 << 31) == 0 {
        return (None, None);
    }
    let sig = |leaf: u32| {
        let r = cpuid(leaf);
        let mut b = Vec::with_capacity(12);
        for w in [r.ebx, r.ecx, r.edx] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        String::from_utf8_lossy(&b).into_owned()
    };
    let first = signature_name(&sig(0x4000_0000)).map(str::to_string);
    // KVM may sit at a later base when it also offers Hyper-V enlightenments.
    let mut kvm = None;
    for base in (0x4000_0000u32..0x4001_0000).step_by(0x100) {
        if sig(base).trim_end_matches('\0') == "KVMKVMKVM" {
            let r = cpuid(base + 1);
            let mut hints = Vec::new();
            if r.edx & 1 != 0 {
                hints.push("REALTIME".to_string());
            }
            kvm = Some(KvmCpuid {
                base: format!("{base:#x}"),
                features: kvm_feature_names(r.eax),
                hints,
                features_raw: format!("{:#x}", r.eax),
            });
            break;
        }
    }
    (first, kvm)
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_probe() -> (Option<String>, Option<KvmCpuid>) {
    (None, None)
}

/// Read the virtualisation picture; `hypervisor_flag` is /proc/cpuinfo's `hypervisor` flag.
pub fn read(root: &Root, hypervisor_flag: bool) -> Virt {
    let opt = |abs: &str| read_text(root, abs).ok().filter(|s| !s.is_empty());
    let cs = "/sys/devices/system/clocksource/clocksource0";
    let available_clocksources =
        read_words(root, &format!("{cs}/available_clocksource")).unwrap_or_default();
    let clocksource = opt(&format!("{cs}/current_clocksource"));
    let kvm_clock = available_clocksources.iter().any(|c| c == "kvm-clock");
    let dmi_vendor = opt("/sys/class/dmi/id/sys_vendor");
    let dmi_product = opt("/sys/class/dmi/id/product_name");
    let real = root.path("/") == std::path::Path::new("/");
    let (sig_name, kvm_cpuid, note) = if !real {
        (
            None,
            None,
            Some("CPUID is read on the real machine only".into()),
        )
    } else if !cfg!(target_arch = "x86_64") {
        (None, None, Some("CPUID is read on x86_64 only".into()))
    } else {
        let (n, k) = cpuid_probe();
        let note = k
            .is_none()
            .then(|| "no KVM signature in CPUID leaves 0x40000000-0x4000ff00".to_string());
        (n, k, note)
    };
    let (hypervisor, source) = if let Some(n) = sig_name {
        (Some(n), Some("CPUID signature"))
    } else if let Some(t) = opt("/sys/hypervisor/type") {
        (Some(t), Some("/sys/hypervisor/type"))
    } else if matches!(
        dmi_vendor.as_deref(),
        Some("QEMU" | "KVM" | "Xen" | "Microsoft Corporation" | "VMware, Inc.")
    ) {
        (dmi_vendor.clone(), Some("DMI sys_vendor"))
    } else if hypervisor_flag && kvm_clock {
        (Some("KVM".to_string()), Some("kvm-clock clocksource"))
    } else if hypervisor_flag {
        (Some("unknown".to_string()), Some("hypervisor CPU flag"))
    } else {
        (None, None)
    };
    Virt {
        hypervisor_flag,
        hypervisor,
        hypervisor_source: source.map(str::to_string),
        dmi_vendor,
        dmi_product,
        clocksource,
        available_clocksources,
        kvm_clock,
        kvm_cpuid,
        kvm_cpuid_note: note,
        free_page_reporting: free_page_reporting(root),
    }
}
