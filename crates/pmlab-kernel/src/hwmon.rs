//! hwmon energy and power channels under `/sys/class/hwmon/hwmon*/`: `energyN_input`
//! (cumulative µJ) and `powerN_input` / `powerN_average` (µW), with the chip's `name` and
//! the channel's `_label`. Read around a run by `counters::Snapshot`; deltas in
//! `counters::delta_metrics`.

use crate::counters::{numbered, read_text, read_u64, CountersError};
use crate::Root;
use serde::{Deserialize, Serialize};

/// Where hwmon chips live (kernel path, mapped through the root).
pub(crate) const HWMON_DIR: &str = "/sys/class/hwmon";

/// What a channel measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChannelKind {
    /// `energyN_input`: cumulative energy, µJ.
    Energy,
    /// `powerN_input`: instantaneous power, µW.
    Power,
    /// `powerN_average`: power averaged by the device over `powerN_average_interval`, µW.
    PowerAverage,
}

impl ChannelKind {
    fn parse(file: &str) -> Option<(ChannelKind, u32)> {
        let (kind, rest) = if let Some(r) = file.strip_prefix("energy") {
            (ChannelKind::Energy, r.strip_suffix("_input")?)
        } else if let Some(r) = file.strip_prefix("power") {
            match r.strip_suffix("_input") {
                Some(n) => (ChannelKind::Power, n),
                None => (ChannelKind::PowerAverage, r.strip_suffix("_average")?),
            }
        } else {
            return None;
        };
        Some((kind, rest.parse().ok()?))
    }
}

/// One energy or power channel of one hwmon chip.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Channel {
    /// The hwmon directory: `hwmon3`.
    pub chip: String,
    /// The chip's `name` file: `amd_energy`, `ina226`.
    pub chip_name: String,
    /// Energy counter or power reading (and which power file).
    pub kind: ChannelKind,
    /// N of `energyN_input`.
    pub index: u32,
    /// `energyN_label` when present: `Esocket0`.
    pub label: Option<String>,
    /// µJ for energy, µW for power.
    pub value: u64,
}

impl Channel {
    /// Stable identity across two snapshots.
    pub fn id(&self) -> (String, ChannelKind, u32) {
        (self.chip.clone(), self.kind, self.index)
    }

    /// Metric-safe name: `CHIPNAME.LABEL`, or `CHIPNAME.energyN` without a label.
    pub fn metric_name(&self) -> String {
        let own = match &self.label {
            Some(l) => l.clone(),
            None => match self.kind {
                ChannelKind::Energy => format!("energy{}", self.index),
                ChannelKind::Power => format!("power{}", self.index),
                ChannelKind::PowerAverage => format!("power{}_average", self.index),
            },
        };
        crate::counters::metric_safe(&format!("{}.{own}", self.chip_name))
    }
}

/// Every energy and power channel under `root`'s /sys/class/hwmon, by chip then file. Empty
/// when hwmon is absent. A channel the caller may not read (permission) is left out.
pub fn read(root: &Root) -> Result<Vec<Channel>, CountersError> {
    let mut out = Vec::new();
    for (_, dir) in numbered(&root.path(HWMON_DIR), "hwmon")? {
        let chip = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let mut files: Vec<(ChannelKind, u32, String)> = std::fs::read_dir(&dir)
            .map_err(|source| CountersError::Io {
                path: dir.clone(),
                source,
            })?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_string();
                let (k, n) = ChannelKind::parse(&name)?;
                Some((k, n, name))
            })
            .collect();
        if files.is_empty() {
            continue;
        }
        files.sort_by(|a, b| a.2.cmp(&b.2));
        let chip_name = read_text(&dir.join("name")).unwrap_or_else(|_| chip.clone());
        for (kind, index, file) in files {
            let value = match read_u64(&dir.join(&file)) {
                Ok(v) => v,
                Err(CountersError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::PermissionDenied =>
                {
                    continue
                }
                Err(e) => return Err(e),
            };
            let prefix = if kind == ChannelKind::Energy {
                "energy"
            } else {
                "power"
            };
            let label = read_text(&dir.join(format!("{prefix}{index}_label"))).ok();
            out.push(Channel {
                chip: chip.clone(),
                chip_name: chip_name.clone(),
                kind,
                index,
                label,
                value,
            });
        }
    }
    Ok(out)
}

/// Whether a channel counts toward the hwmon energy total: where some channels are
/// sockets or packages (amd_energy has `Ecore*` inside `Esocket*`), only those, so that
/// nothing is counted twice; else every energy channel.
pub fn counts_in_total(channel: &Channel, all: &[Channel]) -> bool {
    let whole = |c: &Channel| {
        c.label.as_deref().is_some_and(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("socket") || l.contains("package")
        })
    };
    channel.kind == ChannelKind::Energy
        && (whole(channel)
            || !all
                .iter()
                .any(|c| c.kind == ChannelKind::Energy && whole(c)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(root: &std::path::Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    #[test]
    fn reads_energy_and_power_channels_with_labels() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "sys/class/hwmon/hwmon0/name", "k10temp\n");
        write(r, "sys/class/hwmon/hwmon0/temp1_input", "40000\n");
        write(r, "sys/class/hwmon/hwmon2/name", "amd_energy\n");
        write(r, "sys/class/hwmon/hwmon2/energy1_input", "1000\n");
        write(r, "sys/class/hwmon/hwmon2/energy1_label", "Ecore000\n");
        write(r, "sys/class/hwmon/hwmon2/energy2_input", "5000000\n");
        write(r, "sys/class/hwmon/hwmon2/energy2_label", "Esocket0\n");
        write(r, "sys/class/hwmon/hwmon10/name", "ina226\n");
        write(r, "sys/class/hwmon/hwmon10/power1_input", "2500000\n");
        write(r, "sys/class/hwmon/hwmon10/power1_average", "2400000\n");
        write(r, "sys/class/hwmon/hwmon10/in0_input", "12000\n");
        let c = read(&Root::new(r)).unwrap();
        assert_eq!(c.len(), 4, "{c:?}");
        assert_eq!(c[0].chip, "hwmon2");
        assert_eq!(c[0].metric_name(), "amd_energy.Ecore000");
        assert_eq!(c[1].value, 5_000_000);
        assert_eq!(c[2].kind, ChannelKind::PowerAverage);
        assert_eq!(c[2].metric_name(), "ina226.power1_average");
        assert_eq!(c[3].kind, ChannelKind::Power);
        assert!(!counts_in_total(&c[0], &c), "a core inside a socket");
        assert!(counts_in_total(&c[1], &c));
        assert!(!counts_in_total(&c[3], &c), "power is not energy");
    }

    #[test]
    fn absent_hwmon_is_empty_and_garbage_names_its_path() {
        let d = tempfile::tempdir().unwrap();
        assert!(read(&Root::new(d.path())).unwrap().is_empty());
        write(d.path(), "sys/class/hwmon/hwmon0/energy1_input", "lots\n");
        let e = read(&Root::new(d.path())).unwrap_err().to_string();
        assert!(
            e.contains("hwmon0/energy1_input") && e.contains("lots"),
            "{e}"
        );
    }
}
