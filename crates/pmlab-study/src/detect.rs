//! What the study can do on this machine: the cpuidle driver and governors, idle-polling
//! knobs, hot-pluggable CPUs, tracefs, the cpufreq driver with its governors and EPP words,
//! uncore frequency domains and root — read from a root path (`/`, or a fake tree in tests):
//! `pmlab info`'s capabilities (`pmlab_kernel::sysinfo`), plus the few values the study
//! prints (governor lists, the poll limit as found).

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
    /// The cpufreq scaling driver (`intel_pstate`, `acpi-cpufreq`, `amd-pstate-epp`...).
    pub cpufreq_driver: Option<String>,
    /// intel_pstate's or amd-pstate's mode (`active`, `passive`, `guided`), where shown.
    pub pstate_mode: Option<String>,
    /// The cpufreq governors every policy offers, in the first policy's order.
    pub cpufreq_governors: Vec<String>,
    /// The first policy's cpufreq governor as found.
    pub cpufreq_governor: Option<String>,
    /// The EPP words every policy offers (`energy_performance_available_preferences`);
    /// empty where a policy has no EPP.
    pub epp_words: Vec<String>,
    /// The first policy's EPP as found.
    pub epp: Option<String>,
    /// Uncore frequency domains (`intel_uncore_frequency`, legacy or TPMI).
    pub uncore_domains: usize,
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

/// The frequency stage's two sides (the first is `performance` in both).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FrequencyPair {
    /// `cpufreq.epp` performance against balance_power.
    Epp,
    /// `cpufreq.governor` performance against this governor.
    Governor(String),
}

/// The words every list holds, in the first list's order; empty when a list is missing.
fn in_every(lists: impl Iterator<Item = Option<Vec<String>>>) -> Vec<String> {
    let mut out: Option<Vec<String>> = None;
    for l in lists {
        let Some(l) = l else { return Vec::new() };
        out = Some(match out {
            None => l,
            Some(o) => o.into_iter().filter(|w| l.contains(w)).collect(),
        });
    }
    out.unwrap_or_default()
}

fn list_or_none(l: &[String]) -> String {
    if l.is_empty() {
        "none".into()
    } else {
        l.join(", ")
    }
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
        let si = pmlab_kernel::sysinfo::SystemInfo::read(&pmlab_kernel::Root::new(root));
        let info = si.capabilities();
        let policies = si
            .cpufreq
            .as_ref()
            .map(|c| c.policies.as_slice())
            .unwrap_or_default();
        let cpufreq_governors =
            in_every(policies.iter().map(|p| Some(p.available_governors.clone())));
        let epp_words = in_every(policies.iter().map(|p| p.available_epp.clone()));
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
            cpufreq_driver: si.cpufreq.as_ref().and_then(|c| c.driver.clone()),
            pstate_mode: si.cpufreq.as_ref().and_then(|c| {
                c.intel_pstate
                    .as_ref()
                    .and_then(|i| i.status.clone())
                    .or_else(|| c.amd_pstate_status.clone())
            }),
            cpufreq_governors,
            cpufreq_governor: policies.first().and_then(|p| p.governor.clone()),
            epp_words,
            epp: policies
                .first()
                .and_then(|p| p.epp.as_ref())
                .and_then(|e| e.value().cloned()),
            uncore_domains: si.power.uncore.len(),
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

    /// What the frequency stage compares: EPP `performance` against `balance_power` where
    /// every policy offers both (intel_pstate and amd-pstate in active mode), else the
    /// governor `performance` against `schedutil` or `powersave`; Err: why it cannot run.
    pub(crate) fn frequency_pair(&self) -> Result<FrequencyPair, String> {
        let Some(driver) = &self.cpufreq_driver else {
            return Err(
                "no cpufreq driver has registered a policy (no cpufreq/policyN): there is no frequency knob to compare".into(),
            );
        };
        let has = |l: &[String], w: &str| l.iter().any(|x| x == w);
        let pair = if has(&self.epp_words, "performance") && has(&self.epp_words, "balance_power") {
            Some(FrequencyPair::Epp)
        } else if has(&self.cpufreq_governors, "performance") {
            ["schedutil", "powersave"]
                .into_iter()
                .find(|g| has(&self.cpufreq_governors, g))
                .map(|g| FrequencyPair::Governor(g.to_string()))
        } else {
            None
        };
        let Some(pair) = pair else {
            return Err(format!(
                "cpufreq driver `{driver}` offers neither the EPP words performance and balance_power (EPP: {}) nor the governor performance and schedutil or powersave (governors: {})",
                list_or_none(&self.epp_words),
                list_or_none(&self.cpufreq_governors)
            ));
        };
        if !self.root {
            return Err("changing cpufreq knobs needs root".into());
        }
        Ok(pair)
    }

    /// Why the uncore stage cannot run here, or None.
    pub(crate) fn uncore_unavailable(&self) -> Option<String> {
        if self.uncore_domains == 0 {
            return Some(
                "no uncore frequency control (no intel_uncore_frequency domain, legacy or TPMI)"
                    .into(),
            );
        }
        (!self.root).then(|| "changing uncore frequency limits needs root".into())
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
            (
                "cpufreq driver".into(),
                self.cpufreq_driver.clone().unwrap_or_else(|| "none".into()),
            ),
        ]
        .into_iter()
        .chain(
            self.pstate_mode
                .as_ref()
                .map(|m| ("pstate mode".to_string(), m.clone())),
        )
        .chain([(
            "uncore domains".to_string(),
            self.uncore_domains.to_string(),
        )])
        .chain(self.info.iter().cloned())
        .collect()
    }
}
