//! Unit tests of the knob engine on fake sysfs trees: an 8-CPU intel_pstate machine with
//! EPP and 4 idle states, and a machine with no cpuidle driver.

use super::journal::{self, Entry, Header};
use super::*;
use std::fs;
use std::path::Path;

fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel.trim_start_matches('/'));
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn get(root: &Path, rel: &str) -> String {
    fs::read_to_string(root.join(rel.trim_start_matches('/')))
        .unwrap()
        .trim()
        .to_string()
}

/// 8 CPUs, cpu0 without `online`, 4 idle states, intel_pstate with EPP, haltpoll params,
/// sched features, rcu_expedited, and a symlink out of /sys.
fn big_tree() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    let c = "/sys/devices/system/cpu";
    put(r, &format!("{c}/cpuidle/current_governor"), "menu\n");
    put(
        r,
        &format!("{c}/cpuidle/available_governors"),
        "ladder menu teo haltpoll\n",
    );
    put(r, &format!("{c}/cpuidle/current_driver"), "intel_idle\n");
    put(
        r,
        &format!("{c}/hotplug/states"),
        "  0: offline\n236: online\n",
    );
    for cpu in 0..8 {
        if cpu > 0 {
            put(r, &format!("{c}/cpu{cpu}/online"), "1\n");
        }
        for (k, n) in ["POLL", "C1", "C1E", "C6"].iter().enumerate() {
            put(
                r,
                &format!("{c}/cpu{cpu}/cpuidle/state{k}/name"),
                &format!("{n}\n"),
            );
            put(r, &format!("{c}/cpu{cpu}/cpuidle/state{k}/disable"), "0\n");
        }
        put(
            r,
            &format!("{c}/cpu{cpu}/power/pm_qos_resume_latency_us"),
            "0\n",
        );
        let p = format!("{c}/cpufreq/policy{cpu}");
        put(r, &format!("{p}/affected_cpus"), &format!("{cpu}\n"));
        put(r, &format!("{p}/related_cpus"), &format!("{cpu}\n"));
        put(r, &format!("{p}/scaling_governor"), "powersave\n");
        put(
            r,
            &format!("{p}/scaling_available_governors"),
            "performance powersave\n",
        );
        put(r, &format!("{p}/cpuinfo_min_freq"), "800000\n");
        put(r, &format!("{p}/cpuinfo_max_freq"), "4200000\n");
        put(r, &format!("{p}/scaling_min_freq"), "800000\n");
        put(r, &format!("{p}/scaling_max_freq"), "4200000\n");
        put(
            r,
            &format!("{p}/energy_performance_preference"),
            "balance_performance\n",
        );
        put(
            r,
            &format!("{p}/energy_performance_available_preferences"),
            "default performance balance_performance balance_power power \n",
        );
    }
    put(r, "/sys/kernel/rcu_expedited", "0\n");
    put(
        r,
        "/sys/kernel/debug/sched/features",
        "GENTLE_FAIR_SLEEPERS NO_HRTICK TTWU_QUEUE\n",
    );
    let m = "/sys/module/haltpoll/parameters";
    put(r, &format!("{m}/guest_halt_poll_ns"), "200000\n");
    put(r, &format!("{m}/guest_halt_poll_allow_shrink"), "Y\n");
    put(r, &format!("{m}/guest_halt_poll_grow"), "2\n");
    put(r, "/etc/passwd", "root:x:0:0\n");
    std::os::unix::fs::symlink(r.join("etc"), r.join("sys/evil")).unwrap();
    d
}

/// 2 CPUs, both with `online` files, no cpuidle driver.
fn small_tree() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    let c = "/sys/devices/system/cpu";
    put(r, &format!("{c}/cpuidle/current_driver"), "none\n");
    put(r, &format!("{c}/cpuidle/current_governor"), "menu\n");
    put(
        r,
        &format!("{c}/cpuidle/available_governors"),
        "ladder menu\n",
    );
    put(r, &format!("{c}/cpu0/online"), "1\n");
    put(r, &format!("{c}/cpu1/online"), "0\n");
    d
}

fn s(v: &[&str]) -> Vec<Assignment> {
    Assignment::parse_all(v).unwrap()
}

fn id(name: &str) -> KnobId {
    name.parse().unwrap()
}

/// The error of parsing then validating `a` (text is parsed first, as at the edges).
fn err(root: &Root, a: &[&str]) -> String {
    match Assignment::parse_all(a) {
        Ok(a) => validate(root, &a).unwrap_err().to_string(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn list_shows_every_knob_that_resolves() {
    let d = big_tree();
    let root = Root::new(d.path());
    let names: Vec<String> = list(&root).into_iter().map(|k| k.name).collect();
    for n in [
        "cpu.online@7",
        "cpuidle.governor",
        "cpuidle.POLL.disable@0",
        "cpuidle.C6.disable@7",
        "pmqos.resume_latency_us@3",
        "cpufreq.governor@0",
        "cpufreq.epp@5",
        "cpufreq.max_freq@7",
        "rcu.expedited",
        "sched.feature.HRTICK",
        "haltpoll.guest_halt_poll_ns",
    ] {
        assert!(names.contains(&n.to_string()), "{n} missing from {names:?}");
    }
    assert!(!names.contains(&"cpu.online@0".to_string()));
    let gov = list(&root)
        .into_iter()
        .find(|k| k.name == "cpuidle.governor")
        .unwrap();
    assert_eq!(gov.value, "menu");
    assert_eq!(gov.allowed, "ladder|menu|teo|haltpoll");
    assert_eq!(read(&root, &id("sched.feature.HRTICK")).unwrap(), "0");
    assert_eq!(read(&root, &id("cpuidle.C1.disable@1-2")).unwrap(), "0");
}

#[test]
fn values_are_converted_and_checked() {
    let d = big_tree();
    let root = Root::new(d.path());
    let p = plan(
        &root,
        &s(&[
            "haltpoll.guest_halt_poll_ns=200us",
            "cpufreq.max_freq@1=2.1GHz",
            "cpufreq.epp@0-1=performance",
            "cpufreq.epp@2=128",
            "cpuidle.POLL.disable@3=on",
            "cpuidle.state2.disable@3=Y",
            "haltpoll.guest_halt_poll_allow_shrink=off",
            "sched.feature.TTWU_QUEUE=off",
            "pmqos.resume_latency_us@0=n/a",
            "pmqos.resume_latency_us@1=0.1ms",
        ]),
    )
    .unwrap();
    let v: Vec<(&str, &str)> = p
        .iter()
        .map(|p| (p.target.knob.as_str(), p.value.as_str()))
        .collect();
    assert_eq!(
        v,
        [
            ("haltpoll.guest_halt_poll_ns", "200000"),
            ("cpufreq.max_freq@1", "2100000"),
            ("cpufreq.epp@0", "performance"),
            ("cpufreq.epp@1", "performance"),
            ("cpufreq.epp@2", "128"),
            ("cpuidle.POLL.disable@3", "1"),
            ("cpuidle.state2.disable@3", "1"),
            ("haltpoll.guest_halt_poll_allow_shrink", "0"),
            ("sched.feature.TTWU_QUEUE", "NO_TTWU_QUEUE"),
            ("pmqos.resume_latency_us@0", "n/a"),
            ("pmqos.resume_latency_us@1", "100"),
        ]
    );
    assert!(p[6].target.path.ends_with("cpu3/cpuidle/state2/disable"));
    assert!(err(&root, &["cpufreq.max_freq=5GHz"]).contains("out of range 800000kHz..4200000kHz"));
    assert!(err(&root, &["cpufreq.epp=turbo"]).contains("balance_power"));
    assert!(err(&root, &["cpuidle.governor=fast"]).contains("ladder, menu, teo, haltpoll"));
    assert!(err(&root, &["haltpoll.guest_halt_poll_ns=-1"]).contains("out of range"));
    assert!(err(&root, &["haltpoll.guest_halt_poll_ns=2GHz"]).contains("frequency unit"));
    assert!(err(&root, &["rcu.expedited=maybe"]).contains("not a boolean"));
    assert!(err(&root, &["rcu.expedited@1=1"]).contains("takes no @CPUS"));
    assert!(err(&root, &["cpuidle.C9.disable@1=1"]).contains("states: POLL, C1, C1E, C6"));
    assert!(err(&root, &["cpuidle.POLL.disable@9=1"]).contains("no cpu9"));
    assert!(err(&root, &["rcu.expedited"]).contains("NAME[@CPUS]=VALUE"));
    assert!(err(&root, &["rcu.expedited=1", "rcu.expedited=0"]).contains("also set"));
}

#[test]
fn unknown_names_get_a_suggestion() {
    let d = big_tree();
    let root = Root::new(d.path());
    let e = err(&root, &["haltpoll.guest_halt_pol_ns=1"]);
    assert!(
        e.contains("unknown knob") && e.contains("did you mean `haltpoll.guest_halt_poll_ns`"),
        "{e}"
    );
    let e = err(&root, &["cpuidle.govenor=menu"]);
    assert!(e.contains("did you mean `cpuidle.governor`"), "{e}");
    let e = err(&root, &["sched.feature.NOPE=1"]);
    assert!(e.contains("unknown knob"), "{e}");
}

#[test]
fn sysfs_paths_stay_in_sys() {
    let d = big_tree();
    let root = Root::new(d.path());
    assert!(err(&root, &["sysfs:/sys/../etc/passwd=x"]).contains("not a path under /sys"));
    assert!(err(&root, &["sysfs:/etc/passwd=x"]).contains("not a path under /sys"));
    assert!(err(&root, &["sysfs:/sys/evil/passwd=x"]).contains("leads out of /sys"));
    let p = plan(&root, &s(&["sysfs:/sys/kernel/./debug/../rcu_expedited=1"])).unwrap();
    assert_eq!(p[0].target.knob, "sysfs:/sys/kernel/rcu_expedited");
}

#[test]
fn hotplug_refusals() {
    let d = big_tree();
    let root = Root::new(d.path());
    assert!(err(&root, &["cpu.online@0=0"]).contains("cpu0 has no `online` file"));
    // cpu0 cannot go offline, so offlining all others is fine.
    validate(&root, &s(&["cpu.online@1-7=0"])).unwrap();
    let d2 = small_tree();
    let root2 = Root::new(d2.path());
    let e = err(&root2, &["cpu.online@0=0"]);
    assert!(
        e.contains("offlining cpu0 would leave no CPU online"),
        "{e}"
    );
    validate(&root2, &s(&["cpu.online@1=1", "cpu.online@0=0"])).unwrap();
    let e = err(&root2, &["cpuidle.POLL.disable@1=1"]);
    assert!(e.contains("no idle states (cpuidle driver: none"), "{e}");
    let e = err(&root2, &["cpufreq.governor=performance"]);
    assert!(e.contains("no cpufreq policies"), "{e}");
}

#[test]
fn transaction_writes_and_restores() {
    let d = big_tree();
    let r = d.path();
    let root = Root::new(r);
    let jdir = tempfile::tempdir().unwrap();
    let mut t = Transaction::begin_in(&root, jdir.path()).unwrap();
    t.apply(&s(&[
        "haltpoll.guest_halt_poll_ns=150us",
        "cpuidle.POLL.disable@1=1",
        "sched.feature.HRTICK=on",
    ]))
    .unwrap();
    let m = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";
    assert_eq!(get(r, m), "150000");
    assert_eq!(
        get(r, "/sys/devices/system/cpu/cpu1/cpuidle/state0/disable"),
        "1"
    );
    assert_eq!(read(&root, &id("sched.feature.HRTICK")).unwrap(), "1");
    let j = journal::OnDisk::load(t.journal_path().unwrap()).unwrap();
    assert_eq!(j.entries.len(), 3);
    assert_eq!(j.entries[0].orig, "200000");
    assert_eq!(j.entries[2].orig, "NO_HRTICK");
    assert!(j.owner_alive());
    // A bad list writes nothing.
    let e = t
        .apply(&s(&["rcu.expedited=1", "cpuidle.POLL.disable@1=2"]))
        .unwrap_err();
    assert!(e.to_string().contains("not a boolean"));
    assert_eq!(get(r, "/sys/kernel/rcu_expedited"), "0");
    // switch_to: as found + these.
    t.switch_to(&s(&["rcu.expedited=1"])).unwrap();
    assert_eq!(get(r, m), "200000");
    assert_eq!(
        get(r, "/sys/devices/system/cpu/cpu1/cpuidle/state0/disable"),
        "0"
    );
    assert_eq!(get(r, "/sys/kernel/rcu_expedited"), "1");
    t.apply(&s(&["haltpoll.guest_halt_poll_ns=0"])).unwrap();
    t.restore().unwrap();
    t.restore().unwrap();
    assert_eq!(get(r, m), "200000");
    assert_eq!(get(r, "/sys/kernel/rcu_expedited"), "0");
    assert_eq!(read(&root, &id("sched.feature.HRTICK")).unwrap(), "0");
    assert!(journal::scan(jdir.path()).is_empty());
    // Drop restores too.
    {
        let mut t = Transaction::begin_in(&root, jdir.path()).unwrap();
        t.apply(&s(&["rcu.expedited=1"])).unwrap();
    }
    assert_eq!(get(r, "/sys/kernel/rcu_expedited"), "0");
}

fn write_journal(dir: &Path, name: &str, h: &Header, entries: &[Entry]) {
    let mut text = serde_json::to_string(h).unwrap() + "\n";
    for e in entries {
        text += &(serde_json::to_string(e).unwrap() + "\n");
    }
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join(name), text).unwrap();
}

#[test]
fn dead_owners_are_restored_and_live_ones_refuse() {
    let d = big_tree();
    let r = d.path();
    let root = Root::new(r);
    let jdir = tempfile::tempdir().unwrap();
    let m = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";
    let entry = Entry {
        knob: "haltpoll.guest_halt_poll_ns".into(),
        path: r.join(m.trim_start_matches('/')),
        orig: "200000".into(),
        feature: None,
        msr: None,
    };
    // A dead owner: a PID that exited.
    let child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id() as i32;
    let mut child = child;
    child.wait().unwrap();
    let dead = Header {
        pid,
        start: 1,
        boot: journal::boot_id(),
    };
    put(r, m, "5\n");
    write_journal(
        jdir.path(),
        "00000000000000000001-1.journal",
        &dead,
        std::slice::from_ref(&entry),
    );
    let t = Transaction::begin_in(&root, jdir.path()).unwrap();
    assert_eq!(get(r, m), "200000");
    assert!(
        t.recovered[0].contains("dead pmlab process"),
        "{:?}",
        t.recovered
    );
    drop(t);
    // A stale journal of another boot is dropped, not restored.
    put(r, m, "7\n");
    let stale = Header {
        boot: "another-boot".into(),
        ..dead.clone()
    };
    write_journal(
        jdir.path(),
        "00000000000000000002-1.journal",
        &stale,
        std::slice::from_ref(&entry),
    );
    Transaction::begin_in(&root, jdir.path()).unwrap();
    assert_eq!(get(r, m), "7");
    assert!(journal::scan(jdir.path()).is_empty());
    // A live owner (our parent) holds the knob: refused, naming it.
    let ppid = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
    let live = Header {
        pid: ppid,
        start: journal::start_time(ppid).unwrap(),
        boot: journal::boot_id(),
    };
    write_journal(
        jdir.path(),
        "00000000000000000003-1.journal",
        &live,
        std::slice::from_ref(&entry),
    );
    let mut t = Transaction::begin_in(&root, jdir.path()).unwrap();
    let e = t
        .apply(&s(&["rcu.expedited=1", "haltpoll.guest_halt_poll_ns=1"]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("in use by pmlab process {ppid}")),
        "{e}"
    );
    assert_eq!(get(r, "/sys/kernel/rcu_expedited"), "0");
    fs::remove_file(jdir.path().join("00000000000000000003-1.journal")).unwrap();
}

#[test]
fn kept_journals_wait_for_knob_restore() {
    let d = big_tree();
    let r = d.path();
    let root = Root::new(r);
    let jdir = tempfile::tempdir().unwrap();
    let mut t = Transaction::begin_in(&root, jdir.path()).unwrap();
    t.apply(&s(&["rcu.expedited=1", "cpufreq.governor@2=performance"]))
        .unwrap();
    t.keep();
    let p2 = "/sys/devices/system/cpu/cpufreq/policy2/scaling_governor";
    assert_eq!(get(r, p2), "performance");
    // A later transaction does not touch kept settings, and restores to them.
    let mut t = Transaction::begin_in(&root, jdir.path()).unwrap();
    t.apply(&s(&["cpufreq.governor@2=powersave"])).unwrap();
    t.restore().unwrap();
    assert_eq!(get(r, p2), "performance");
    assert_eq!(get(r, "/sys/kernel/rcu_expedited"), "1");
    let done = journal::sweep(jdir.path(), true).unwrap();
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(get(r, p2), "powersave");
    assert_eq!(get(r, "/sys/kernel/rcu_expedited"), "0");
    assert!(journal::sweep(jdir.path(), true).unwrap().is_empty());
}

#[test]
fn haltpoll_knobs_without_the_haltpoll_driver_get_a_note() {
    let d = big_tree(); // intel_idle
    let set = s(&["haltpoll.guest_halt_poll_ns=200us"]);
    let notes = effect_notes(&Root::new(d.path()), &set);
    assert_eq!(notes.len(), 1);
    assert!(notes[0].contains("intel_idle"), "{notes:?}");
    let other = s(&["rcu.expedited=1"]);
    assert!(effect_notes(&Root::new(d.path()), &other).is_empty());
    put(
        d.path(),
        "/sys/devices/system/cpu/cpuidle/current_driver",
        "haltpoll\n",
    );
    // Under the haltpoll driver the note says the windows restart, when the governor is
    // haltpoll (the fake tree's governor starts as menu).
    assert!(effect_notes(&Root::new(d.path()), &set).is_empty());
    put(
        d.path(),
        "/sys/devices/system/cpu/cpuidle/current_governor",
        "haltpoll\n",
    );
    let notes = effect_notes(&Root::new(d.path()), &set);
    assert!(
        notes[0].contains("restart every CPU's adaptive poll window"),
        "{notes:?}"
    );
}

#[test]
fn haltpoll_writes_and_restores_leave_the_governor_haltpoll() {
    let d = big_tree();
    let r = d.path();
    let gov = "/sys/devices/system/cpu/cpuidle/current_governor";
    put(r, gov, "haltpoll\n");
    let jdir = tempfile::tempdir().unwrap();
    let mut t = Transaction::begin_in(&Root::new(r), jdir.path()).unwrap();
    t.apply(&s(&["haltpoll.guest_halt_poll_ns=100us"])).unwrap();
    assert_eq!(get(r, gov), "haltpoll");
    t.restore().unwrap();
    assert_eq!(get(r, gov), "haltpoll");
    assert_eq!(
        get(r, "/sys/module/haltpoll/parameters/guest_halt_poll_ns"),
        "200000"
    );
}
