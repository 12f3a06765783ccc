//! powercap zones (RAPL and others) under /sys/class/powercap: name, whether
//! `energy_uj` is readable (root only on current kernels), and its wrap-around range.

use super::item::{item, list_names, read_bool, read_num, read_parse, read_text, Item};
use crate::Root;
use serde::Serialize;

/// The powercap class directory (kernel path; RAPL zones live here).
pub(crate) const POWERCAP_DIR: &str = "/sys/class/powercap";

/// One powercap zone (RAPL or another energy counter).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowercapZone {
    /// Directory name, e.g. `intel-rapl:0` or `intel-rapl:0:1`.
    pub id: String,
    /// `name`, e.g. `package-0`, `core`, `dram`, `psys`.
    pub name: String,
    /// `enabled`; `None` where the file is absent.
    pub enabled: Option<bool>,
    /// The energy counter, µJ (root only on current kernels).
    pub energy_uj: Item<u64>,
    /// The counter wraps at this value, µJ.
    pub max_energy_range_uj: Option<u64>,
}

impl PowercapZone {
    /// The energy counter could be read (usually root only).
    pub(crate) fn energy_readable(&self) -> bool {
        self.energy_uj.value().is_some()
    }
    /// A RAPL zone (intel-rapl, intel-rapl-mmio, amd's rapl uses the same names).
    pub fn is_rapl(&self) -> bool {
        self.id.starts_with("intel-rapl")
    }
}

/// Every zone that has an energy counter. Empty when powercap is absent.
pub fn read(root: &Root) -> Vec<PowercapZone> {
    let mut out = Vec::new();
    for id in list_names(root, POWERCAP_DIR).unwrap_or_default() {
        let base = format!("{POWERCAP_DIR}/{id}");
        let energy = format!("{base}/energy_uj");
        if !root.path(&energy).exists() {
            continue;
        }
        out.push(PowercapZone {
            name: read_text(root, &format!("{base}/name")).unwrap_or_default(),
            enabled: read_bool(root, &format!("{base}/enabled")).ok(),
            energy_uj: item(root, read_parse(root, &energy, "µJ")),
            max_energy_range_uj: read_num(root, &format!("{base}/max_energy_range_uj")),
            id,
        });
    }
    out
}
