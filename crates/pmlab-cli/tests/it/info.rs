//! Integration tests for `pmlab info`: fake trees through `--root`, the real machine
//! as root (mounting tracefs first if needed), and a non-root run.

use crate::util::{is_root, pmlab};
use pmlab_kernel::sysinfo::fake::FakeTree;
use serde_json::Value;
use std::path::Path;

fn json(args: &[&str]) -> Value {
    let out = pmlab().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn text(args: &[&str]) -> String {
    let out = pmlab().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn sys(path: &str) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_string()
}

it_test!(info_fake_intel_box_shows_states_pstate_rapl);
fn info_fake_intel_box_shows_states_pstate_rapl() {
    let t = FakeTree::intel_box();
    let root = t.path().to_str().unwrap();
    let out = text(&["info", "--root", root]);
    for want in [
        "intel_idle",
        "MWAIT 0x20",
        "intel_pstate",
        "balance_performance",
        "package-0",
        "cpus 1-7 only",
        "RAPL: package-0, core, dram",
        "mounted at /sys/kernel/tracing, writable",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    let j = json(&["info", "--json", "--root", root]);
    assert_eq!(j["cpuidle"]["cpus"].as_array().unwrap().len(), 8);
    assert_eq!(j["cpuidle"]["cpus"][7]["states"][3]["name"], "C6");
    assert_eq!(j["cpufreq"]["policies"][0]["epp"], "balance_performance");
    let c = &j["capabilities"];
    assert_eq!(c["rapl"], true);
    assert_eq!(c["cpufreq"], true);
    assert_eq!(c["hotplug_cpus"].as_array().unwrap().len(), 7);
}

it_test!(info_fake_without_cpuidle_says_so);
fn info_fake_without_cpuidle_says_so() {
    let t = FakeTree::no_cpuidle();
    let root = t.path().to_str().unwrap();
    let out = text(&["info", "--root", root]);
    assert!(out.contains("no cpuidle driver"), "{out}");
    assert!(out.contains("CONFIG_CPU_IDLE"), "{out}");
    let j = json(&["info", "--json", "--root", root]);
    assert_eq!(j["cpuidle"]["present"], false);
    assert_eq!(j["capabilities"]["cpuidle_driver"], Value::Null);
}

it_test!(info_json_has_one_shape_per_key_and_says_apart_why_an_item_is_missing);
/// A key is its value or `null` on every machine; why an item pmlab tried to read is
/// missing is under `unavailable`, by the item's dotted path (`cpuidle.driver` is a string
/// on the Intel box, `null` with `{status: absent, path}` apart without cpuidle).
fn info_json_has_one_shape_per_key_and_says_apart_why_an_item_is_missing() {
    let trees = [
        FakeTree::intel_box(),
        FakeTree::no_cpuidle(),
        FakeTree::haltpoll_guest(true),
        FakeTree::haltpoll_guest(false),
    ];
    let mut shapes = Default::default();
    let mut all = Vec::new();
    for t in &trees {
        let j = json(&["info", "--json", "--root", t.path().to_str().unwrap()]);
        crate::util::info_json_shapes(&j, &mut shapes);
        all.push(j);
    }
    let two = crate::util::two_shapes(&shapes);
    assert!(two.is_empty(), "keys with two shapes: {two:#?}");
    let (intel, bare) = (&all[0], &all[1]);
    assert_eq!(intel["cpuidle"]["driver"], "intel_idle");
    assert!(intel["unavailable"].get("cpuidle.driver").is_none());
    assert_eq!(bare["cpuidle"]["driver"], Value::Null);
    let why = &bare["unavailable"]["cpuidle.driver"];
    assert_eq!(why["status"], "absent", "{why}");
    assert_eq!(
        why["path"], "/sys/devices/system/cpu/cpuidle/current_driver",
        "{why}"
    );
    // Every entry of `unavailable` names a key that is null.
    for j in &all {
        for (path, why) in j["unavailable"].as_object().unwrap() {
            let mut v = j;
            for k in path.split('.') {
                v = match k.parse::<usize>() {
                    Ok(i) if v.is_array() => &v[i],
                    _ => &v[k],
                };
            }
            assert!(v.is_null(), "{path} is {v}, yet unavailable: {why}");
            assert!(
                why["status"].is_string() && why["path"].is_string(),
                "{why}"
            );
        }
    }
}

it_test!(info_fake_haltpoll_guest_shows_polling_knob_and_per_cpu_states);
fn info_fake_haltpoll_guest_shows_polling_knob_and_per_cpu_states() {
    let t = FakeTree::haltpoll_guest(true);
    t.offline(2, 1);
    let root = t.path().to_str().unwrap();
    let out = text(&["info", "--root", root]);
    for want in [
        "haltpoll (guest_halt_poll_ns)",
        "cpu1 only",
        "1 (offline)",
        "guest_halt_poll_grow_start",
        "default architecture idle",
        "no RAPL, model only",
        "no cpufreq driver",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    let j = json(&["info", "--json", "--root", root]);
    let c = &j["capabilities"];
    assert_eq!(c["polling_knob"], "haltpoll.guest_halt_poll_ns");
    assert_eq!(c["cpuidle_driver"], "haltpoll");
    assert_eq!(c["idle_states"], serde_json::json!(["POLL", "haltpoll"]));
    assert_eq!(j["cpus"]["offline"], serde_json::json!([1]));
    assert!(out.contains("free page reporting          off"), "{out}");
}

it_test!(info_fake_guest_with_free_page_reporting_says_what_it_changes);
fn info_fake_guest_with_free_page_reporting_says_what_it_changes() {
    let t = FakeTree::haltpoll_guest(true);
    t.balloon(true);
    let root = t.path().to_str().unwrap();
    let out = text(&["info", "--root", root]);
    assert!(
        out.contains("free page reporting          on (free blocks of order 9 and up): the host takes free memory back, so pmlab asks for no huge pages"),
        "{out}"
    );
    let j = json(&["info", "--json", "--root", root]);
    assert_eq!(j["virt"]["free_page_reporting"]["order"], 9);
}

it_test!(info_bad_root_is_an_error);
fn info_bad_root_is_an_error() {
    pmlab()
        .args(["info", "--root", "/nonexistent/pmlab"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("pmlab: error: --root"));
}

/// Mount tracefs at /sys/kernel/tracing when it is not mounted (as pmlab record would).
fn ensure_tracefs() {
    let mounts = sys("/proc/mounts");
    if !mounts
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("tracefs"))
    {
        let st = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
            .status()
            .unwrap();
        assert!(st.success(), "mount tracefs failed");
    }
}

it_test!(info_real_machine_json);
fn info_real_machine_json() {
    if !is_root() {
        skip!("needs root (the project's machines run tests as root)");
    }
    ensure_tracefs();
    let j = json(&["info", "--json"]);
    let driver = sys("/sys/devices/system/cpu/cpuidle/current_driver");
    assert_eq!(j["cpuidle"]["driver"], driver.as_str());
    let cpus = j["cpuidle"]["cpus"].as_array().unwrap();
    if driver == "haltpoll" {
        assert_eq!(cpus.len(), 2, "{}", j["cpuidle"]);
        for c in cpus {
            let states = c["states"].as_array().unwrap();
            assert_eq!(states.len(), 2, "{c}");
            // Counters restart when a CPU comes back online (a hotplug test may have just
            // run), and POLL may not have been entered since: one used state is enough.
            assert!(
                states.iter().any(|s| s["usage"].as_u64().unwrap() > 0),
                "{c}"
            );
        }
        assert_eq!(
            j["capabilities"]["polling_knob"],
            "haltpoll.guest_halt_poll_ns"
        );
    } else {
        // This boot has no cpuidle driver (KVM without KVM_HINTS_REALTIME and
        // cpuidle_haltpoll.force=N): no states, and info must say why.
        eprintln!("note: cpuidle driver is {driver:?}, not haltpoll, on this boot");
        let has_states = Path::new("/sys/devices/system/cpu/cpu0/cpuidle").exists();
        assert_eq!(cpus.is_empty(), !has_states);
        assert_eq!(j["capabilities"]["polling_knob"], Value::Null);
        let idle = j["capabilities"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["area"] == "idle")
            .unwrap();
        assert!(idle["reason"]
            .as_str()
            .unwrap()
            .contains("cpuidle_haltpoll.force"));
    }
    let params = j["haltpoll"]["parameters"].as_object().unwrap();
    let mut names: Vec<&str> = params.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "guest_halt_poll_allow_shrink",
            "guest_halt_poll_grow",
            "guest_halt_poll_grow_start",
            "guest_halt_poll_ns",
            "guest_halt_poll_shrink"
        ]
    );
    assert_eq!(
        params["guest_halt_poll_ns"],
        sys("/sys/module/haltpoll/parameters/guest_halt_poll_ns").as_str()
    );
    let hp: Vec<u64> = j["cpus"]["hotpluggable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!(hp.contains(&1) && !hp.contains(&0), "{hp:?}");
    assert_eq!(j["capabilities"]["hotplug_cpus"], serde_json::json!([1]));
    assert_eq!(j["tracefs"]["mounted"], true);
    assert_eq!(j["tracefs"]["writable"], true, "{}", j["tracefs"]);
    assert_eq!(j["capabilities"]["trace_writable"], true);
    // readable, mountable by pmlab as root, or blocked with the reason named
    let features = std::fs::read_to_string("/sys/kernel/debug/sched/features");
    match features {
        Ok(_) => assert_eq!(j["capabilities"]["sched_features"], true),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            assert_eq!(j["capabilities"]["sched_features"], false);
            let detail = j["sched_features"]["detail"].as_str().unwrap_or_default();
            assert!(detail.contains("lockdown"), "{}", j["sched_features"]);
        }
        Err(_) => {}
    }
    assert_eq!(j["virt"]["hypervisor_flag"], true);
    assert_eq!(j["hotplug_states"][0]["name"], "offline");
    assert_eq!(
        j["kernel"]["release"],
        sys("/proc/sys/kernel/osrelease").as_str()
    );
}

it_test!(info_real_machine_human_output);
fn info_real_machine_human_output() {
    let out = text(&["info"]);
    for want in [
        "System",
        "cpuidle",
        "haltpoll",
        "What pmlab can do here",
        "hotplug",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
}

it_test!(info_as_nobody_says_needs_root_and_exits_0);
fn info_as_nobody_says_needs_root_and_exits_0() {
    if !is_root() {
        skip!("needs root to switch to nobody");
    }
    ensure_tracefs();
    let bin = assert_cmd::cargo::cargo_bin("pmlab");
    let run = |json: bool| {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .arg("info");
        if json {
            c.arg("--json");
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let out = run(false);
    assert!(out.contains("needs root"), "{out}");
    assert!(out.contains("not root"), "{out}");
    let j: Value = serde_json::from_str(&run(true)).unwrap();
    assert_eq!(j["is_root"], false);
    // One shape per key: the value or null, and why apart.
    assert!(j["sched_features"].is_null(), "{}", j["sched_features"]);
    assert_eq!(j["unavailable"]["sched_features"]["status"], "needs root");
    assert_eq!(j["tracefs"]["needs_root"], true);
    assert_eq!(j["tracefs"]["writable"], false);
    assert_eq!(j["capabilities"]["trace_writable"], false);
    // world-readable items are still there
    assert!(j["haltpoll"]["parameters"]["guest_halt_poll_ns"].is_string());
    assert!(j["hotplug_states"].is_array());
}

it_test!(info_format_markdown_and_csv_have_their_shape);
/// `info --format markdown` is one heading per section and well-formed tables; `--format csv`
/// parses as `section,item,value` records holding what the text shows; mail draws no boxes.
fn info_format_markdown_and_csv_have_their_shape() {
    let t = FakeTree::intel_box();
    let root = t.path().to_str().unwrap();
    let md = text(&["info", "--format", "markdown", "-v", "--root", root]);
    assert!(md.starts_with("### System\n"), "{md}");
    for h in [
        "### cpuidle\n",
        "### powercap\n",
        "### What pmlab can do here\n",
    ] {
        assert!(md.contains(h), "missing {h:?} in\n{md}");
    }
    // A table is a header, a `---` line with as many cells, then rows of as many cells.
    let cells = |l: &str| l.replace("\\|", "").matches('|').count();
    let lines: Vec<&str> = md.lines().collect();
    let mut tables = 0;
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with('|') && !lines[i - 1].starts_with('|') {
            tables += 1;
            assert!(lines[i + 1].starts_with("|---|"), "{l}");
            let n = cells(l);
            for row in lines[i..].iter().take_while(|r| r.starts_with('|')) {
                assert_eq!(cells(row), n, "{row}");
            }
        }
    }
    assert!(tables >= 10, "{tables} tables in\n{md}");
    assert!(md.contains("| cpu | state | name |"), "{md}");

    let csv_text = text(&["info", "--format", "csv", "-v", "--root", root]);
    let mut r = csv::Reader::from_reader(csv_text.as_bytes());
    assert_eq!(r.headers().unwrap(), vec!["section", "item", "value"]);
    let recs: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
    let get = |section: &str, item: &str| {
        recs.iter()
            .find(|x| &x[0] == section && &x[1] == item)
            .map(|x| x[2].to_string())
    };
    assert_eq!(get("cpuidle", "driver").as_deref(), Some("intel_idle"));
    assert_eq!(
        get("cpuidle", "cpu 7, state state3: name").as_deref(),
        Some("C6")
    );
    assert_eq!(
        get("What pmlab can do here", "area energy: usable").as_deref(),
        Some("yes")
    );
    assert!(recs.len() > 100, "{csv_text}");

    let mail = text(&["info", "--format", "mail", "--root", root]);
    assert!(mail.contains("  cpu state"), "{mail}");
    assert!(!mail.contains('│') && !mail.contains('─'), "{mail}");
    // `--json` is `--format json`.
    assert_eq!(
        json(&["info", "--format", "json", "--root", root]),
        json(&["info", "--json", "--root", root])
    );
}

it_test!(info_format_bogus_is_refused_listing_the_values);
/// An unknown `--format` names the values; html is refused naming the ones info prints; both
/// print nothing on stdout.
fn info_format_bogus_is_refused_listing_the_values() {
    for (format, says) in [
        (
            "bogus",
            "unknown format `bogus`; possible values: table, markdown, mail, json, csv",
        ),
        (
            "html",
            "--format html is not supported by a command that prints text; choose table, markdown, mail, json or csv",
        ),
    ] {
        let out = pmlab().args(["info", "--format", format]).output().unwrap();
        assert!(!out.status.success());
        assert!(out.stdout.is_empty());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{err}");
    }
}
