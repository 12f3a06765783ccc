//! SystemInfo and capabilities on fake trees: a bare-metal Intel box (intel_pstate
//! with EPP, RAPL, 8 CPUs, 4 idle states), a machine without cpuidle, and KVM guests
//! shaped like the project's machine (haltpoll, 2 CPUs; with and without the driver).

use super::fake::FakeTree;
use super::*;
use crate::KHz;

fn intel_box() -> FakeTree {
    FakeTree::intel_box()
}

fn haltpoll_guest(driver: bool) -> FakeTree {
    FakeTree::haltpoll_guest(driver)
}

fn item_area<'a>(c: &'a Capabilities, area: &str) -> &'a Capability {
    c.items.iter().find(|i| i.area == area).unwrap()
}

#[test]
fn intel_box_with_pstate_epp_rapl_8_cpus_4_states() {
    let t = intel_box();
    let si = SystemInfo::read(&t.root);
    assert_eq!(si.kernel.release.value().unwrap(), "6.18.0-test");
    assert_eq!(si.kernel.cmdline.value().unwrap(), "console=ttyS0 quiet");
    assert_eq!(si.kernel.rcu_expedited.value(), Some(&false));
    assert_eq!(si.cpus.model.value().unwrap(), "Intel(R) Core(TM) i7-1280P");
    assert_eq!(si.cpus.vendor.as_deref(), Some("GenuineIntel"));
    assert_eq!(si.cpus.family, Some(6));
    assert_eq!(
        si.cpus.present.value().unwrap(),
        &(0..8).collect::<Vec<_>>()
    );
    assert_eq!(si.cpus.hotpluggable, (1..8).collect::<Vec<_>>());
    assert!(si.cpus.offline.is_empty());
    assert!(!si.virt.is_guest());

    let topo = si.topology.value().unwrap();
    assert_eq!(topo.len(), 8);
    assert_eq!(topo[3].core, Some(1));
    assert_eq!(topo[3].thread_siblings, vec![2, 3]);
    assert_eq!(topo[3].package, Some(0));
    assert_eq!(topo[3].cluster, None);

    assert_eq!(si.cpuidle.driver_name(), Some("intel_idle"));
    assert_eq!(si.cpuidle.governor.value().unwrap(), "menu");
    assert_eq!(si.cpuidle.cpus.len(), 8);
    for c in &si.cpuidle.cpus {
        assert_eq!(c.states.len(), 4);
    }
    let c6 = &si.cpuidle.cpus[5].states[3];
    assert_eq!((c6.name.as_str(), c6.desc.as_str()), ("C6", "MWAIT 0x20"));
    assert_eq!((c6.latency_us, c6.residency_us), (Some(170), Some(600)));
    assert_eq!((c6.usage, c6.time_us), (Some(405), Some(40_000)));
    assert_eq!(
        (c6.above, c6.below, c6.rejected),
        (Some(3), Some(6), Some(0))
    );
    assert_eq!(c6.disabled.value(), Some(&false));
    assert_eq!(c6.default_status.as_deref(), Some("enabled"));

    let cf = si.cpufreq.as_ref().unwrap();
    assert_eq!(cf.driver.as_deref(), Some("intel_pstate"));
    assert_eq!(cf.intel_pstate_status.as_deref(), Some("active"));
    assert_eq!(cf.policies.len(), 8);
    let p = &cf.policies[2];
    assert_eq!(p.cpus, vec![2]);
    assert_eq!(p.governor.as_deref(), Some("powersave"));
    assert_eq!(
        (p.min, p.max, p.cur),
        (
            Some(KHz(800_000)),
            Some(KHz(4_800_000)),
            Some(KHz(1_200_000))
        )
    );
    assert_eq!(
        p.epp.as_ref().unwrap().value().unwrap(),
        "balance_performance"
    );
    assert_eq!(p.available_epp.as_ref().unwrap().len(), 5);

    assert_eq!(si.powercap.len(), 3);
    assert_eq!(si.powercap[0].name, "package-0");
    assert_eq!(si.powercap[0].energy_uj.value(), Some(&123456789));
    assert_eq!(si.powercap[0].max_energy_range_uj, Some(262143328850));

    assert!(si.tracefs.mounted && si.tracefs.writable);
    assert_eq!(si.tracefs.path.as_deref(), Some("/sys/kernel/tracing"));
    let f = si.sched_features.value().unwrap();
    assert_eq!(f.len(), 4);
    assert!(f.iter().any(|x| x.name == "NEXT_BUDDY" && !x.enabled));
    assert_eq!(si.hotplug_states.value().unwrap()[2].name, "sched:active");

    let c = si.capabilities();
    assert_eq!(c.hotplug_cpus, (1..8).collect::<Vec<_>>());
    assert_eq!(item_area(&c, "hotplug").summary, "cpus 1-7 only");
    assert!(item_area(&c, "hotplug")
        .reason
        .contains("cpu0 has no online file"));
    assert_eq!(c.cpuidle_driver.as_deref(), Some("intel_idle"));
    assert_eq!(c.idle_states, vec!["POLL", "C1", "C1E", "C6"]);
    assert!(c.poll_state);
    assert_eq!(c.polling_knob, None);
    assert_eq!(c.governors, vec!["ladder", "menu", "teo"]);
    assert!(c.cpufreq && c.epp && c.rapl && c.energy_readable);
    assert!(c.trace_writable && c.sched_features && c.rcu_expedited && c.hotplug_states);
    assert_eq!(
        item_area(&c, "energy").summary,
        "RAPL: package-0, core, dram"
    );
    assert!(item_area(&c, "frequency")
        .summary
        .contains("intel_pstate (8 policies, EPP)"));
    serde_json::to_string(&si).unwrap();
    serde_json::to_string(&c).unwrap();
}

#[test]
fn machine_without_cpuidle() {
    let t = FakeTree::no_cpuidle();
    let si = SystemInfo::read(&t.root);
    assert!(!si.cpuidle.present);
    assert_eq!(si.cpuidle.driver.status(), Some(Status::Absent));
    assert!(si.cpuidle.cpus.is_empty());
    assert!(si.haltpoll.is_none() && si.cpufreq.is_none() && si.powercap.is_empty());
    assert!(!si.tracefs.mounted && !si.tracefs.writable);
    assert_eq!(si.sched_features.status(), Some(Status::NotMounted));
    let c = si.capabilities();
    assert!(c.hotplug_cpus.is_empty());
    assert_eq!(c.cpuidle_driver, None);
    assert!(c.governors.is_empty() && c.idle_states.is_empty() && !c.poll_state);
    assert_eq!(c.polling_knob, None);
    assert!(!c.cpufreq && !c.rapl && !c.trace_writable && !c.sched_features);
    let idle = item_area(&c, "idle");
    assert_eq!(idle.summary, "no cpuidle driver");
    assert!(idle.reason.contains("CONFIG_CPU_IDLE"), "{}", idle.reason);
    assert_eq!(item_area(&c, "energy").summary, "no RAPL, model only");
    assert_eq!(item_area(&c, "frequency").summary, "no cpufreq driver");
    let j = serde_json::to_value(&si).unwrap();
    assert_eq!(j["cpuidle"]["driver"]["status"], "absent");
    assert_eq!(j["sched_features"]["status"], "not mounted");
}

#[test]
fn kvm_guest_with_haltpoll_driver_2_cpus() {
    let t = haltpoll_guest(true);
    let si = SystemInfo::read(&t.root);
    assert!(si.virt.hypervisor_flag && si.virt.kvm_clock && si.virt.is_kvm());
    assert_eq!(si.virt.hypervisor.as_deref(), Some("KVM"));
    assert!(si.virt.kvm_cpuid.is_none() && si.virt.kvm_cpuid_note.is_some());
    assert_eq!(si.cpuidle.driver_name(), Some("haltpoll"));
    assert_eq!(si.cpuidle.cpus.len(), 2);
    for c in &si.cpuidle.cpus {
        assert_eq!(c.states.len(), 2);
        assert!(c.states.iter().all(|s| s.usage.unwrap() > 0));
    }
    let hp = si.haltpoll.as_ref().unwrap();
    assert_eq!(hp.parameters.len(), 5);
    assert_eq!(hp.param("guest_halt_poll_ns"), Some("200000"));
    assert_eq!(hp.driver_force, Some(false));
    assert_eq!(si.cpus.hotpluggable, vec![1]);
    let c = si.capabilities();
    assert!(c.guest);
    assert_eq!(c.hotplug_cpus, vec![1]);
    assert_eq!(item_area(&c, "hotplug").summary, "cpu1 only");
    assert_eq!(
        c.polling_knob.as_deref(),
        Some("haltpoll.guest_halt_poll_ns")
    );
    assert_eq!(
        item_area(&c, "polling").summary,
        "haltpoll (guest_halt_poll_ns)"
    );
    assert_eq!(c.idle_states, vec!["POLL", "haltpoll"]);
    assert!(!c.rapl && !c.cpufreq);
    assert!(item_area(&c, "energy").reason.contains("guest"));
    assert!(item_area(&c, "frequency").reason.contains("host"));
}

#[test]
fn kvm_guest_without_cpuidle_driver_says_why_polling_is_off() {
    let t = haltpoll_guest(false);
    let si = SystemInfo::read(&t.root);
    assert!(si.cpuidle.present);
    assert_eq!(si.cpuidle.driver.value().unwrap(), "none");
    assert_eq!(si.cpuidle.driver_name(), None);
    assert_eq!(si.haltpoll.as_ref().unwrap().parameters.len(), 5);
    let c = si.capabilities();
    assert_eq!(c.polling_knob, None);
    assert!(c.governors.is_empty());
    let idle = item_area(&c, "idle");
    assert!(
        idle.reason.contains("cpuidle_haltpoll.force=N"),
        "{}",
        idle.reason
    );
    assert!(!item_area(&c, "polling").ok);
    assert!(item_area(&c, "governors").reason.contains("do nothing"));
}

#[test]
fn read_only_tracefs_is_not_writable() {
    let t = FakeTree::new();
    t.mount("nodev", "/sys/kernel/tracing", "tracefs", "ro,relatime")
        .mkdir("/sys/kernel/tracing/instances");
    let si = SystemInfo::read(&t.root);
    assert!(si.tracefs.mounted && !si.tracefs.writable);
    assert!(si.tracefs.note.contains("read-only"));
}

#[test]
fn parsers() {
    let s = hotplug_states::parse("  0: offline\n 92: sched:active\nbad\n235: online\n");
    assert_eq!(s.len(), 3);
    assert_eq!((s[1].number, s[1].name.as_str()), (92, "sched:active"));
    let f = sched_features::parse("TTWU_QUEUE NO_HRTICK\n");
    assert_eq!(f[1].name, "HRTICK");
    assert!(f[0].enabled && !f[1].enabled);
    assert_eq!(
        virt::kvm_feature_names((1 << 3) | (1 << 7) | (1 << 12)),
        vec!["CLOCKSOURCE2", "PV_UNHALT", "POLL_CONTROL"]
    );
}

#[test]
fn offline_cpu_stays_hotpluggable_and_loses_its_topology() {
    let t = haltpoll_guest(true);
    t.offline(2, 1);
    let si = SystemInfo::read(&t.root);
    assert_eq!(si.cpus.online.value().unwrap(), &vec![0]);
    assert_eq!(si.cpus.offline, vec![1]);
    assert_eq!(si.cpus.hotpluggable, vec![1]);
    let topo = si.topology.value().unwrap();
    assert_eq!(topo.len(), 1);
    assert_eq!(si.capabilities().hotplug_cpus, vec![1]);
}

#[test]
fn free_page_reporting_is_read_from_a_bound_balloon_with_the_feature_bit() {
    let none = haltpoll_guest(true);
    assert_eq!(SystemInfo::read(&none.root).virt.free_page_reporting, None);

    let off = haltpoll_guest(true);
    off.balloon(false);
    // The network device beside it has bit 5 set; only a balloon's bit 5 means reporting.
    assert_eq!(SystemInfo::read(&off.root).virt.free_page_reporting, None);

    let on = haltpoll_guest(true);
    on.balloon(true);
    let si = SystemInfo::read(&on.root);
    assert_eq!(
        si.virt.free_page_reporting,
        Some(virt::FreePageReporting { order: Some(9) })
    );
    let j = serde_json::to_value(&si).unwrap();
    assert_eq!(j["virt"]["free_page_reporting"]["order"], 9);

    // A balloon no driver is bound to reports nothing.
    std::fs::remove_dir(on.path().join("sys/bus/virtio/devices/virtio0/driver")).unwrap();
    assert_eq!(virt::free_page_reporting(&on.root), None);
}
