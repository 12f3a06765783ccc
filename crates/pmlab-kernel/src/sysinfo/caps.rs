//! "What pmlab can do here": a verdict per area, derived from a [`SystemInfo`], each
//! with its reason, plus typed fields for programs (the study picks stages from them).

use super::SystemInfo;
use crate::cpulist::format_cpu_list;
use serde::Serialize;

/// What pmlab can do on this machine: typed answers plus one line per area for people.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capabilities {
    /// pmlab runs as root (effective UID 0).
    pub is_root: bool,
    /// Running in a virtual machine.
    pub guest: bool,
    /// Present CPUs that can be offlined (`cpuN/online` exists).
    pub hotplug_cpus: Vec<u32>,
    /// The registered cpuidle driver (`None`: no driver, the kernel's default idle).
    pub cpuidle_driver: Option<String>,
    /// Idle state names (of the first CPU with states).
    pub idle_states: Vec<String>,
    /// A `POLL` idle state exists (`cpuidle.POLL.disable` is a knob).
    pub poll_state: bool,
    /// The knob that limits idle polling, when it has an effect here
    /// (`haltpoll.guest_halt_poll_ns` with the haltpoll driver).
    pub polling_knob: Option<String>,
    /// cpuidle governors one can switch between (empty without a driver).
    pub governors: Vec<String>,
    /// cpufreq policies exist.
    pub cpufreq: bool,
    /// Some policy has `energy_performance_preference`.
    pub epp: bool,
    /// RAPL zones exist.
    pub rapl: bool,
    /// RAPL energy counters are readable now (root only on current kernels).
    pub energy_readable: bool,
    /// pmlab can record traces: tracefs writable, or not mounted and we are root
    /// on the real machine (pmlab mounts it then).
    pub trace_writable: bool,
    /// Sched features can be read and switched: debugfs `sched/features` is readable,
    /// or debugfs is not mounted and we are root on the real machine (the knob
    /// engine mounts it then).
    pub sched_features: bool,
    /// /sys/kernel/rcu_expedited exists.
    pub rcu_expedited: bool,
    /// The hotplug state table is readable (steps can be named).
    pub hotplug_states: bool,
    /// One line per area, for people.
    pub items: Vec<Capability>,
}

/// One area's verdict for people (`pmlab info`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capability {
    /// The area: `hotplug`, `idle`, `governors`, `polling`, `frequency`, `energy`, `trace`, ...
    pub area: &'static str,
    /// The area is usable (possibly partly).
    pub ok: bool,
    /// What is there, in a few words.
    pub summary: String,
    /// Why it is (partly) unusable, or what it needs; empty when fully usable.
    pub reason: String,
}

fn cap(area: &'static str, ok: bool, summary: String, reason: String) -> Capability {
    Capability {
        area,
        ok,
        summary,
        reason,
    }
}

fn cpus_text(cpus: &[u32]) -> String {
    match cpus {
        [one] => format!("cpu{one}"),
        many => format!("cpus {}", format_cpu_list(many)),
    }
}

impl SystemInfo {
    /// Derive what pmlab can do here from what was read (no further reads).
    pub fn capabilities(&self) -> Capabilities {
        let root_note = |s: &str| {
            if self.is_root {
                s.to_string()
            } else {
                format!("{s}; changing it needs root")
            }
        };
        let mut items = Vec::new();

        // hotplug
        let hotplug_cpus = self.cpus.hotpluggable.clone();
        let present = self.cpus.present.value().cloned().unwrap_or_default();
        let fixed: Vec<u32> = present
            .iter()
            .copied()
            .filter(|c| !hotplug_cpus.contains(c))
            .collect();
        items.push(if hotplug_cpus.is_empty() {
            cap(
                "hotplug",
                false,
                "no CPU can be offlined".into(),
                "no cpuN/online file (kernel without CPU hotplug, or one CPU)".into(),
            )
        } else {
            let only = if fixed.is_empty() { "" } else { " only" };
            let why = if fixed.is_empty() {
                "every present CPU has an online file".to_string()
            } else {
                format!("{} has no online file", cpus_text(&fixed))
            };
            cap(
                "hotplug",
                true,
                format!("{}{only}", cpus_text(&hotplug_cpus)),
                root_note(&why),
            )
        });

        // idle states and governors
        let ci = &self.cpuidle;
        let driver = ci.driver_name().map(str::to_string);
        let idle_states = ci.state_names();
        let poll_state = idle_states.iter().any(|s| s == "POLL");
        let halt_force = self.haltpoll.as_ref().and_then(|h| h.driver_force);
        let no_driver_reason = || -> String {
            if !ci.present {
                return "the kernel has no cpuidle (CONFIG_CPU_IDLE off)".into();
            }
            if ci.off == Some(true) {
                return "cpuidle.off=1 on the kernel command line".into();
            }
            let mut r =
                "no cpuidle driver registered; CPUs idle in the architecture's default idle (HLT on x86), no idle states or per-state counters".to_string();
            if self.virt.is_kvm() && halt_force.is_some() {
                let hint = match self.virt.realtime_hint() {
                    Some(false) => "KVM does not set KVM_HINTS_REALTIME",
                    Some(true) => "KVM sets KVM_HINTS_REALTIME",
                    None => "KVM_HINTS_REALTIME unknown",
                };
                r.push_str(&format!(
                    " (cpuidle-haltpoll: {hint} and cpuidle_haltpoll.force={})",
                    if halt_force == Some(true) { "Y" } else { "N" }
                ));
            }
            r
        };
        items.push(match &driver {
            Some(d) => cap(
                "idle",
                !idle_states.is_empty(),
                format!("driver {d}, states {}", idle_states.join(", ")),
                root_note("per-state disable and PM QoS are knobs"),
            ),
            None => cap(
                "idle",
                false,
                "no cpuidle driver".into(),
                no_driver_reason(),
            ),
        });
        let avail = ci.available_governors.value().cloned().unwrap_or_default();
        let governors = if driver.is_some() {
            avail.clone()
        } else {
            Vec::new()
        };
        let current = ci.governor.value().cloned().unwrap_or_default();
        items.push(if governors.is_empty() {
            cap(
                "governors",
                false,
                "none in effect".into(),
                if driver.is_none() && !avail.is_empty() {
                    format!(
                        "{} are built in, but without a driver they do nothing",
                        avail.join(", ")
                    )
                } else {
                    "no cpuidle governors".into()
                },
            )
        } else {
            let only = if governors.len() == 1 { " only" } else { "" };
            cap(
                "governors",
                true,
                format!("{}{only}", governors.join(", ")),
                root_note(&format!("current: {current}")),
            )
        });

        // polling
        let haltpoll_driver = driver.as_deref() == Some("haltpoll");
        let has_poll_ns = self
            .haltpoll
            .as_ref()
            .is_some_and(|h| h.parameters.contains_key("guest_halt_poll_ns"));
        let polling_knob =
            (haltpoll_driver && has_poll_ns).then(|| "haltpoll.guest_halt_poll_ns".to_string());
        items.push(if polling_knob.is_some() {
            let why = if current == "haltpoll" {
                "haltpoll governor active".to_string()
            } else {
                format!("takes effect with cpuidle.governor=haltpoll (now {current})")
            };
            cap(
                "polling",
                true,
                "haltpoll (guest_halt_poll_ns)".into(),
                root_note(&why),
            )
        } else if poll_state {
            cap(
                "polling",
                true,
                "POLL state (cpuidle.POLL.disable)".into(),
                "no poll-limit knob; the POLL state can be disabled".into(),
            )
        } else if has_poll_ns {
            cap(
                "polling",
                false,
                "haltpoll parameters without effect".into(),
                "guest_halt_poll_* exist, but the haltpoll cpuidle driver is not registered".into(),
            )
        } else {
            cap(
                "polling",
                false,
                "none".into(),
                "no POLL state, no haltpoll".into(),
            )
        });

        // frequency
        let cpufreq = self.cpufreq.is_some();
        let epp = self
            .cpufreq
            .as_ref()
            .is_some_and(|c| c.policies.iter().any(|p| p.epp.is_some()));
        items.push(match &self.cpufreq {
            Some(c) => {
                let gov = c
                    .policies
                    .first()
                    .map(|p| p.available_governors.join(", "))
                    .unwrap_or_default();
                cap(
                    "frequency",
                    true,
                    format!(
                        "{} ({} policies{})",
                        c.driver.as_deref().unwrap_or("cpufreq"),
                        c.policies.len(),
                        if epp { ", EPP" } else { "" }
                    ),
                    root_note(&format!("governors: {gov}")),
                )
            }
            None => cap(
                "frequency",
                false,
                "no cpufreq driver".into(),
                if self.virt.is_guest() {
                    "a guest: the host controls frequency; runtimes still measurable".into()
                } else {
                    "no cpufreq policy registered".into()
                },
            ),
        });

        // energy
        let rapl_zones: Vec<_> = self.powercap.iter().filter(|z| z.is_rapl()).collect();
        let rapl = !rapl_zones.is_empty();
        let energy_readable = rapl_zones.iter().any(|z| z.energy_readable());
        items.push(if rapl {
            let names: Vec<&str> = rapl_zones.iter().map(|z| z.name.as_str()).collect();
            cap(
                "energy",
                energy_readable,
                format!("RAPL: {}", names.join(", ")),
                if energy_readable {
                    "energy_uj readable".into()
                } else {
                    "energy_uj needs root".into()
                },
            )
        } else {
            cap(
                "energy",
                false,
                "no RAPL, model only".into(),
                if self.virt.is_guest() {
                    "a guest sees no RAPL; energy only from a model or an external meter".into()
                } else {
                    "no powercap RAPL zones; energy only from a model or an external meter".into()
                },
            )
        });

        // trace
        let t = &self.tracefs;
        let trace_writable = t.writable || t.mountable;
        items.push(cap(
            "trace",
            trace_writable,
            if t.writable {
                "ok".into()
            } else if t.mountable {
                "ok (pmlab mounts tracefs)".into()
            } else if t.needs_root {
                "needs root".into()
            } else {
                "unavailable".into()
            },
            t.note.clone(),
        ));

        // sched features
        let mountable = |u: &super::Unavailable| {
            u.status == super::Status::NotMounted && self.is_root && self.root == "/"
        };
        let sched_features = match &self.sched_features {
            super::Item::Value(_) => true,
            super::Item::Unavailable(u) => mountable(u),
        };
        items.push(match &self.sched_features {
            super::Item::Unavailable(u) if mountable(u) => cap(
                "sched features",
                true,
                "ok (pmlab mounts debugfs)".into(),
                "debugfs is not mounted; pmlab mounts it at /sys/kernel/debug when it sets one"
                    .into(),
            ),
            super::Item::Value(f) => cap(
                "sched features",
                true,
                format!("{} features", f.len()),
                root_note("debugfs sched/features"),
            ),
            super::Item::Unavailable(u) => cap(
                "sched features",
                false,
                u.status.to_string(),
                u.detail.clone().unwrap_or_else(|| u.path.clone()),
            ),
        });

        // rcu / hotplug states
        let rcu_expedited = self.kernel.rcu_expedited.value().is_some();
        let hotplug_states = self.hotplug_states.value().is_some();
        items.push(cap(
            "hotplug steps",
            hotplug_states,
            if hotplug_states {
                format!(
                    "{} states named",
                    self.hotplug_states.value().map_or(0, Vec::len)
                )
            } else {
                "unnamed".into()
            },
            format!(
                "hotplug/states {}; rcu_expedited {}",
                if hotplug_states {
                    "readable"
                } else {
                    "missing"
                },
                if rcu_expedited { "present" } else { "missing" }
            ),
        ));

        Capabilities {
            is_root: self.is_root,
            guest: self.virt.is_guest(),
            hotplug_cpus,
            cpuidle_driver: driver,
            idle_states,
            poll_state,
            polling_knob,
            governors,
            cpufreq,
            epp,
            rapl,
            energy_readable,
            trace_writable,
            sched_features,
            rcu_expedited,
            hotplug_states,
            items,
        }
    }
}
