//! What the study can do on this machine: the cpuidle driver and governors, idle-polling
//! knobs, hot-pluggable CPUs, tracefs, cpufreq and root — read from a root path (`/`, or a
//! fake tree in tests): `pmlab info`'s capabilities (`pmlab_kernel::sysinfo`), plus the few
//! values the study prints (governor lists, the poll limit as found).

use serde::Serialize;
use std::path::Path;

/// The machine as the study sees it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Caps {
    /// pmlab runs as root (needed for knobs, tracing and hotplug).
    pub root: bool,
    /// CPUs online as found.
    pub cpus_online: Vec<u32>,
    /// The registered cpuidle driver; None when there is none (`current_driver` = `none`).
    pub cpuidle_driver: Option<String>,
    /// The cpuidle governors available.
    pub governors: Vec<String>,
    /// The cpuidle governor in use; None: no cpuidle governor file.
    pub current_governor: Option<String>,
    /// `haltpoll.guest_halt_poll_ns` as found, when the module parameter exists.
    pub haltpoll_poll_ns: Option<String>,
    /// A `POLL` idle state on cpu0.
    pub poll_state: bool,
    /// The poll-limit knob, when it has an effect here (`haltpoll.guest_halt_poll_ns`).
    pub polling_knob: Option<String>,
    /// `pmlab info`'s verdicts: (area, "summary — reason").
    pub info: Vec<(String, String)>,
    /// Online CPUs with an `online` file (all but the first when every online CPU has one).
    pub hotpluggable: Vec<u32>,
    /// tracefs is mounted, or mountable (root).
    pub tracefs: bool,
    /// cpufreq policies exist.
    pub cpufreq: bool,
    /// The default guest kernel the boot stage boots (QEMU and busybox found too).
    pub guest_kernel: Option<std::path::PathBuf>,
    /// Why there is no guest to boot, when there is none.
    pub no_guest: Option<String>,
}

fn read(root: &Path, abs: &str) -> Option<String> {
    std::fs::read_to_string(root.join(abs.trim_start_matches('/')))
        .ok()
        .map(|s| s.trim().to_string())
}

fn exists(root: &Path, abs: &str) -> bool {
    root.join(abs.trim_start_matches('/')).exists()
}

/// Root privileges (`PMLAB_ASSUME_NONROOT=1` pretends otherwise, for tests).
pub fn is_root() -> bool {
    if std::env::var_os("PMLAB_ASSUME_NONROOT").is_some_and(|v| v == "1") {
        return false;
    }
    pmlab_kernel::sysinfo::item::is_root()
}

impl Caps {
    /// Detect under `root`.
    pub fn detect(root: &Path) -> Caps {
        let cpu = "/sys/devices/system/cpu";
        let info =
            pmlab_kernel::sysinfo::SystemInfo::read(&pmlab_kernel::Root::new(root)).capabilities();
        let cpus_online = read(root, &format!("{cpu}/online"))
            .and_then(|s| pmlab_hotplug::parse_cpu_list(&s).ok())
            .unwrap_or_default();
        let cpuidle_driver = info
            .cpuidle_driver
            .clone()
            .filter(|d| !d.is_empty() && d != "none");
        let governors = read(root, &format!("{cpu}/cpuidle/available_governors"))
            .map(|s| s.split_whitespace().map(String::from).collect())
            .unwrap_or_default();
        let current_governor = read(root, &format!("{cpu}/cpuidle/current_governor"))
            .or_else(|| read(root, &format!("{cpu}/cpuidle/current_governor_ro")));
        let haltpoll_poll_ns = read(root, "/sys/module/haltpoll/parameters/guest_halt_poll_ns");
        let poll_state = info.poll_state
            || read(root, &format!("{cpu}/cpu0/cpuidle/state0/name")).as_deref() == Some("POLL");
        let mut hotpluggable: Vec<u32> = cpus_online
            .iter()
            .copied()
            .filter(|c| {
                info.hotplug_cpus.contains(c) || exists(root, &format!("{cpu}/cpu{c}/online"))
            })
            .collect();
        if hotpluggable.len() == cpus_online.len() && !hotpluggable.is_empty() {
            hotpluggable.remove(0);
        }
        let root_user = is_root();
        // Guests boot on this machine, whatever root the rest is read under.
        let guest = pmlab_boot::lab::available_guest();
        let items = info
            .items
            .iter()
            .map(|i| {
                let text = if i.reason.is_empty() {
                    i.summary.clone()
                } else {
                    format!("{} — {}", i.summary, i.reason)
                };
                (format!("info: {}", i.area), text)
            })
            .collect();
        Caps {
            root: root_user,
            cpus_online,
            cpuidle_driver,
            governors,
            current_governor,
            haltpoll_poll_ns,
            poll_state,
            polling_knob: info.polling_knob.clone(),
            info: items,
            hotpluggable,
            tracefs: root_user && info.trace_writable,
            cpufreq: info.cpufreq,
            guest_kernel: guest.as_ref().ok().cloned(),
            no_guest: guest.err().map(|e| pmlab_kernel::error_chain(&e)),
        }
    }

    /// Why idle polling cannot be measured here, or None when it can.
    pub(crate) fn polling_unavailable(&self) -> Option<String> {
        if self.polling_knob.is_some() || (self.cpuidle_driver.is_some() && self.poll_state) {
            return (!self.root).then(|| "changing idle-polling knobs needs root".into());
        }
        match (&self.cpuidle_driver, &self.haltpoll_poll_ns, self.poll_state) {
            (None, Some(v), _) => Some(format!(
                "no cpuidle driver is registered (current_driver = none), so idle is the arch default (HLT) and haltpoll.guest_halt_poll_ns (= {v}) has no effect"
            )),
            (None, None, _) => Some("no cpuidle driver and no idle-polling knob (no haltpoll module, no POLL state)".into()),
            (Some(d), None, false) => Some(format!("cpuidle driver `{d}` has no POLL state and there is no haltpoll poll limit")),
            _ if !self.root => Some("changing idle-polling knobs needs root".into()),
            _ => None,
        }
    }

    /// Why governors cannot be compared here, or None.
    pub(crate) fn governors_unavailable(&self) -> Option<String> {
        if self.cpuidle_driver.is_none() {
            return Some(format!(
                "no cpuidle driver is registered, so no governor picks an idle state (available: {}; current: {}) — switching them changes nothing",
                if self.governors.is_empty() { "none".into() } else { self.governors.join(", ") },
                self.current_governor.as_deref().unwrap_or("none")
            ));
        }
        if self.governors.len() < 2 {
            return Some(format!(
                "only one cpuidle governor is available ({})",
                self.governors.first().map(String::as_str).unwrap_or("none")
            ));
        }
        if !self.root {
            return Some("switching the cpuidle governor needs root".into());
        }
        None
    }

    /// Why hotplug cannot be measured here, or None.
    pub(crate) fn hotplug_unavailable(&self) -> Option<String> {
        if !self.root {
            return Some("CPU hotplug needs root (it writes cpuN/online)".into());
        }
        if self.hotpluggable.is_empty() {
            return Some(
                "no online CPU but one has an online file: nothing can be hot-unplugged".into(),
            );
        }
        None
    }

    /// Facts for the report's system table.
    pub fn facts(&self) -> Vec<(String, String)> {
        let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
        vec![
            ("root".into(), yes(self.root)),
            (
                "online CPUs".into(),
                pmlab_hotplug::format_cpu_list(&self.cpus_online),
            ),
            (
                "cpuidle driver".into(),
                self.cpuidle_driver
                    .clone()
                    .unwrap_or_else(|| "none (idle is the arch default, HLT)".into()),
            ),
            (
                "cpuidle governors".into(),
                format!(
                    "{} (current: {})",
                    self.governors.join(", "),
                    self.current_governor.as_deref().unwrap_or("none")
                ),
            ),
            (
                "haltpoll.guest_halt_poll_ns".into(),
                self.haltpoll_poll_ns
                    .clone()
                    .unwrap_or_else(|| "absent".into()),
            ),
            ("POLL idle state".into(), yes(self.poll_state)),
            (
                "hot-pluggable CPUs".into(),
                if self.hotpluggable.is_empty() {
                    "none".into()
                } else {
                    pmlab_hotplug::format_cpu_list(&self.hotpluggable)
                },
            ),
            ("tracefs".into(), yes(self.tracefs)),
            ("cpufreq".into(), yes(self.cpufreq)),
        ]
        .into_iter()
        .chain(self.info.iter().cloned())
        .collect()
    }
}
