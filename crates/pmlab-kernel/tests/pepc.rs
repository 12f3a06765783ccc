//! pmlab-kernel on real machines' trees: fake roots built from Intel pepc's emulation data
//! (`sysinfo::emul`; data from $PMLAB_PEPC_EMUL_DATA or the cache, skipped without it) of an
//! Intel server (spr1, legacy uncore), a TPMI Xeon (srf8), a Xeon Phi (knl0), a hybrid client
//! (adl0) and an AMD server (genoa0): facts against the tree's files, knob listing, set and
//! restore of each new knob kind through the transaction (success, unwinding, SIGKILL and the
//! next transaction's repair), and bad input refused with nothing changed.

#[macro_use]
#[path = "../../../tests/support/harness.rs"]
mod harness;

use pmlab_kernel::knob::{self, Assignment, KnobError, KnobId, Transaction};
use pmlab_kernel::sysinfo::emul::{self, EmulRoot};
use pmlab_kernel::sysinfo::SystemInfo;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Env of the child process the SIGKILL test starts: `TREE|JOURNALS|ASSIGNMENT ...`.
const CHILD_ENV: &str = "PMLAB_PEPC_TEST_CHILD";

fn data() -> PathBuf {
    match emul::data_dir() {
        Ok(d) => d,
        Err(why) => skip!("{why}"),
    }
}

fn machine(name: &str) -> EmulRoot {
    emul::build_temp(&data().join(name)).unwrap()
}

fn file(t: &EmulRoot, abs: &str) -> String {
    std::fs::read_to_string(t.root.path(abs))
        .unwrap()
        .trim()
        .to_string()
}

/// Every file of the tree below `/sys` and its bytes.
fn snapshot(t: &EmulRoot) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(d: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&t.root.path("/sys"), &mut out);
    out
}

/// Files that differ between two snapshots, byte for byte up to the trailing newline (ASPM's list file is compared by its setting:
/// the kernel takes back the bracketed word only, so that is what is restored).
fn changed(a: &BTreeMap<PathBuf, Vec<u8>>, b: &BTreeMap<PathBuf, Vec<u8>>) -> Vec<String> {
    a.iter()
        .filter(|(p, v)| {
            let w = &b[*p];
            if p.ends_with("pcie_aspm/parameters/policy") {
                let sel = |x: &[u8]| {
                    pmlab_kernel::sysinfo::power::selected_word(&String::from_utf8_lossy(x))
                        .unwrap_or_else(|| String::from_utf8_lossy(x).trim().to_string())
                };
                sel(v) != sel(w)
            } else {
                // sysfs prints its own trailing newline whatever was written: a plain file
                // written with the kernel's value has none, so the newline is not compared.
                v.trim_ascii_end() != w.trim_ascii_end()
            }
        })
        .map(|(p, _)| p.display().to_string())
        .collect()
}

fn s(v: &[&str]) -> Vec<Assignment> {
    Assignment::parse_all(v).unwrap()
}

it_test!(facts_of_real_machines_match_their_files);
fn facts_of_real_machines_match_their_files() {
    let cpuinfo_packages = |t: &EmulRoot| {
        let text = file(t, "/proc/cpuinfo");
        let mut ids: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("physical id"))
            .map(|l| l.split(':').nth(1).unwrap().trim())
            .collect();
        ids.sort();
        ids.dedup();
        ids.len() as u32
    };
    for (m, packages, hybrid, uncore) in [
        ("spr1", 4, false, 4),
        ("srf8", 0, false, 0),
        ("knl0", 1, false, 0),
        ("adl0", 1, true, 1),
        ("genoa0", 2, false, 0),
    ] {
        let t = machine(m);
        let info = SystemInfo::read(&t.root);
        let version = file(&t, "/proc/version");
        let release = info.kernel.release.value().expect(m);
        assert!(
            version.starts_with(&format!("Linux version {release} ")),
            "{m}"
        );
        let c = &info.layout.counts;
        assert_eq!(c.packages, cpuinfo_packages(&t), "{m}");
        if packages > 0 {
            assert_eq!(c.packages, packages, "{m}");
        }
        assert!(c.cores > 0 && c.threads_per_core >= 1, "{m}: {c:?}");
        assert_eq!(c.cpus as usize, info.topology.value().unwrap().len(), "{m}");
        for tp in info.topology.value().unwrap() {
            assert!(
                tp.package.is_some() && tp.core.is_some(),
                "{m}: cpu{}",
                tp.cpu
            );
            assert!(tp.thread_siblings.contains(&tp.cpu), "{m}: cpu{}", tp.cpu);
        }
        assert_eq!(
            serde_json::to_value(&info.layout.sources).unwrap()["package"],
            "/proc/cpuinfo",
            "{m}: these snapshots have no physical_package_id"
        );
        assert_eq!(!info.layout.core_types.is_empty(), hybrid, "{m}");
        assert!(
            !info.layout.caches.is_empty() && !info.layout.nodes.is_empty(),
            "{m}"
        );
        if uncore > 0 {
            assert_eq!(info.power.uncore.len(), uncore, "{m}");
        }
        // Every per-CPU fact equals its file.
        for g in &info.power.epb {
            for cpu in &g.cpus {
                let f = format!("/sys/devices/system/cpu/cpu{cpu}/power/energy_perf_bias");
                assert_eq!(file(&t, &f), g.value, "{m}");
            }
        }
        for g in &info.power.pmqos_resume_latency_us {
            for cpu in &g.cpus {
                let f = format!("/sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us");
                assert_eq!(file(&t, &f), g.value, "{m}");
            }
        }
        for d in &info.power.uncore {
            let f = format!("{}/{}/max_freq_khz", emul_uncore(), d.dir);
            assert_eq!(file(&t, &f), d.max.unwrap().0.to_string(), "{m}");
        }
        let cf = info.cpufreq.as_ref().unwrap();
        match &cf.intel_pstate {
            Some(ip) => {
                let nt = file(&t, "/sys/devices/system/cpu/intel_pstate/no_turbo") == "1";
                assert_eq!(ip.no_turbo, Some(nt), "{m}");
                assert_eq!(cf.turbo, Some(!nt), "{m}");
            }
            None => assert_eq!(
                cf.turbo,
                Some(file(&t, "/sys/devices/system/cpu/cpufreq/boost") == "1"),
                "{m}"
            ),
        }
        let aspm = info.power.aspm.as_ref().unwrap();
        assert_eq!(aspm.policy.as_deref(), Some("default"), "{m}");
    }
    let t = machine("srf8");
    let info = SystemInfo::read(&t.root);
    // srf8 shows both interfaces; the knobs use the TPMI one.
    assert!(info
        .power
        .uncore
        .iter()
        .any(|d| d.kind == pmlab_kernel::sysinfo::power::UncoreKind::Tpmi));
    let list = knob::list(&t.root);
    let u: Vec<_> = list
        .iter()
        .filter(|k| k.name.starts_with("uncore.max_freq"))
        .collect();
    assert!(
        !u.is_empty()
            && u.iter()
                .all(|k| k.file.to_string_lossy().contains("/uncore")),
        "{u:?}"
    );
}

fn emul_uncore() -> &'static str {
    pmlab_kernel::sysinfo::power::UNCORE_DIR
}

it_test!(knob_list_of_real_machines_has_every_kind_with_its_scope);
fn knob_list_of_real_machines_has_every_kind_with_its_scope() {
    for (m, want, absent) in [
        (
            "spr1",
            &[
                "cpufreq.turbo",
                "intel_pstate.no_turbo",
                "intel_pstate.min_perf_pct",
                "intel_pstate.status",
                "epb@0",
                "uncore.max_freq@package0.die0",
                "aspm.policy",
                "cpuidle.C6.disable@0",
                "cpufreq.epp@0",
            ][..],
            &["cpufreq.boost", "amd_pstate.status"][..],
        ),
        (
            "srf8",
            &["uncore.min_freq@package0.die0", "epb@0"][..],
            &[][..],
        ),
        (
            "knl0",
            &["intel_pstate.no_turbo", "epb@0"][..],
            &["uncore.max_freq@package0.die0"][..],
        ),
        (
            "adl0",
            &["uncore.max_freq@package0.die0", "cpufreq.epp@15"][..],
            &[][..],
        ),
        (
            "genoa0",
            &["cpufreq.turbo", "cpufreq.boost", "aspm.policy"][..],
            &["intel_pstate.no_turbo", "epb@0"][..],
        ),
    ] {
        let t = machine(m);
        let list = knob::list(&t.root);
        let names: Vec<&str> = list.iter().map(|k| k.name.as_str()).collect();
        for w in want {
            assert!(names.contains(w), "{m}: no {w} in {names:?}");
        }
        for a in absent {
            assert!(!names.contains(a), "{m}: {a} listed");
        }
        let uncore = list.iter().find(|k| k.name.starts_with("uncore."));
        if let Some(u) = uncore {
            assert_eq!(serde_json::to_value(u.scope).unwrap(), "die");
        }
    }
}

/// The assignments of each new knob kind on an Intel server and an AMD server.
fn kinds(m: &str) -> Vec<&'static str> {
    match m {
        "spr1" => vec![
            "cpufreq.turbo=off",
            "intel_pstate.min_perf_pct=50%",
            "intel_pstate.max_perf_pct=90",
            "intel_pstate.status=passive",
            "intel_pstate.hwp_dynamic_boost=0",
            "epb@package1=power",
            "uncore.max_freq@package0.die0=min",
            "uncore.min_freq@die1=1.2GHz",
            "aspm.policy=powersave",
            "cpuidle.C6.disable@all=1",
            "cpufreq.max_freq@package1=base",
            "cpufreq.epp@core3=balance_power",
        ],
        "srf8" => vec!["uncore.max_freq@package0=1.6GHz", "epb@all=balance-power"],
        "genoa0" => vec![
            "cpufreq.turbo=0",
            "cpufreq.min_freq@package1=max",
            "aspm.policy=performance",
            "cpuidle.C2.disable@node1=1",
        ],
        _ => unreachable!(),
    }
}

it_test!(each_new_knob_kind_sets_and_restores_byte_for_byte);
fn each_new_knob_kind_sets_and_restores_byte_for_byte() {
    for m in ["spr1", "srf8", "genoa0"] {
        let t = machine(m);
        let before = snapshot(&t);
        let journals = tempfile::tempdir().unwrap();
        let mut txn = Transaction::begin_in(&t.root, journals.path()).unwrap();
        txn.apply(&s(&kinds(m)))
            .unwrap_or_else(|e| panic!("{m}: {e}"));
        let after = snapshot(&t);
        assert!(!changed(&before, &after).is_empty(), "{m}: nothing written");
        if m == "spr1" {
            assert_eq!(
                file(&t, "/sys/devices/system/cpu/intel_pstate/no_turbo"),
                "1"
            );
            let info = SystemInfo::read(&t.root);
            let topo = info.topology.value().unwrap();
            let in1 = topo.iter().find(|x| x.package == Some(1)).unwrap().cpu;
            let f = |c: u32| format!("/sys/devices/system/cpu/cpu{c}/power/energy_perf_bias");
            assert_eq!(file(&t, &f(in1)), "15");
            assert_eq!(
                file(&t, "/sys/devices/system/cpu/cpu0/power/energy_perf_bias"),
                file_of(
                    &before,
                    &t,
                    "/sys/devices/system/cpu/cpu0/power/energy_perf_bias"
                )
            );
            let d = format!("{}/package_00_die_00", emul_uncore());
            assert_eq!(
                file(&t, &format!("{d}/max_freq_khz")),
                file(&t, &format!("{d}/initial_min_freq_khz"))
            );
            assert_eq!(
                file(&t, "/sys/module/pcie_aspm/parameters/policy"),
                "powersave"
            );
            // One uncore file per die, journaled once.
            let n = txn
                .knobs()
                .iter()
                .filter(|k| k.starts_with("uncore.max_freq"))
                .count();
            assert_eq!(n, 1);
        }
        txn.restore().unwrap();
        let left = changed(&before, &snapshot(&t));
        assert!(
            left.is_empty(),
            "{m}: {} files not restored, first {:?}",
            left.len(),
            left.first()
        );
    }
}

fn file_of(snap: &BTreeMap<PathBuf, Vec<u8>>, t: &EmulRoot, abs: &str) -> String {
    String::from_utf8_lossy(&snap[&t.root.path(abs)])
        .trim()
        .to_string()
}

it_test!(sigkill_with_knobs_set_then_the_next_transaction_repairs);
fn sigkill_with_knobs_set_then_the_next_transaction_repairs() {
    for m in ["spr1", "genoa0"] {
        let t = machine(m);
        let before = snapshot(&t);
        let journals = tempfile::tempdir().unwrap();
        let n = kinds(m).len();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .env(
                CHILD_ENV,
                format!(
                    "{}|{}|{}",
                    t.root.path("/").display(),
                    journals.path().display(),
                    kinds(m).join(" ")
                ),
            )
            .env("PMLAB_TEST_PAUSE_AFTER_WRITE", (n / 2).max(1).to_string())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The child says when it is paused after its write.
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        use std::io::BufRead;
        while err.read_line(&mut line).unwrap() > 0 && !line.contains("paused after write") {}
        assert!(line.contains("paused after write"), "{m}: {line}");
        assert!(
            !changed(&before, &snapshot(&t)).is_empty(),
            "{m}: the child wrote nothing"
        );
        // SAFETY: kill(2) on the PID of our own child; no memory is involved.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
        let txn = Transaction::begin_in(&t.root, journals.path()).unwrap();
        assert!(!txn.recovered.is_empty(), "{m}: nothing recovered");
        let left = changed(&before, &snapshot(&t));
        assert!(
            left.is_empty(),
            "{m}: {} files not repaired, first {:?}",
            left.len(),
            left.first()
        );
    }
}

it_test!(bad_input_on_real_machines_is_refused_and_changes_nothing);
fn bad_input_on_real_machines_is_refused_and_changes_nothing() {
    let mut trees: BTreeMap<&str, EmulRoot> = BTreeMap::new();
    for (m, a, says) in [
        (
            "knl0",
            "epb@package3=1",
            "there is no package3 here (packages: 0)",
        ),
        (
            "spr1",
            "uncore.max_freq@package9=2GHz",
            "no package9 with an uncore domain",
        ),
        ("spr1", "cpufreq.max_freq@0=9GHz", "out of range"),
        ("spr1", "uncore.min_freq=100MHz", "out of range"),
        (
            "spr1",
            "cpufreq.epp=turbo",
            "not one of the kernel's allowed values",
        ),
        (
            "genoa0",
            "intel_pstate.no_turbo=1",
            "this machine lacks `intel_pstate.no_turbo`",
        ),
        ("genoa0", "epb=power", "this machine lacks `epb`"),
        (
            "genoa0",
            "uncore.max_freq=2GHz",
            "no uncore frequency domains",
        ),
        (
            "genoa0",
            "cpufreq.max_freq=base",
            "`base`: this machine has no",
        ),
        (
            "knl0",
            "intel_pstate.status=guided",
            "not one of the kernel's allowed values",
        ),
        (
            "adl0",
            "rcu.expedited@package0=1",
            "one setting for the machine",
        ),
        (
            "adl0",
            "aspm.policy=fast",
            "not one of the kernel's allowed values",
        ),
    ] {
        let t = trees.entry(m).or_insert_with(|| machine(m));
        let before = snapshot(t);
        let journals = tempfile::tempdir().unwrap();
        let mut txn = Transaction::begin_in(&t.root, journals.path()).unwrap();
        let e = txn.apply(&s(&["cpuidle.POLL.disable=1", a])).unwrap_err();
        let text = e.to_string();
        assert!(text.contains(says), "{m} {a}: {text}");
        assert!(
            matches!(e, KnobError::Invalid { .. } | KnobError::Unknown { .. }),
            "{m} {a}"
        );
        assert!(changed(&before, &snapshot(t)).is_empty(), "{m} {a}");
        assert!(txn.journal_path().is_none(), "{m} {a}: journaled");
    }
    let t = machine("spr1");
    assert_eq!(
        knob::read(&t.root, &"cpufreq.turbo".parse::<KnobId>().unwrap()).unwrap(),
        "1"
    );
}

fn child() {
    let spec = std::env::var(CHILD_ENV).unwrap();
    let mut parts = spec.splitn(3, '|');
    let (root, dir, assigned) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let assigned: Vec<&str> = assigned.split(' ').collect();
    let mut txn = Transaction::begin_in(&pmlab_kernel::Root::new(root), Path::new(dir)).unwrap();
    txn.apply(&s(&assigned)).unwrap();
    std::process::exit(3);
}

fn main() -> std::process::ExitCode {
    if std::env::var_os(CHILD_ENV).is_some() {
        child();
    }
    harness::main(Vec::new())
}

/// The MSR knobs: (name, register, lowest bit, width).
const MSR_KNOBS: [(&str, u32, u32, u32); 3] = [
    ("msr.pkg_cstate_limit", 0xe2, 0, 4),
    ("msr.c1_demotion", 0xe2, 26, 1),
    ("msr.c1e_autopromote", 0x1fc, 1, 1),
];

/// MSR `addr` of each CPU, from the machine's `msr/msr.txt` (`ADDR:CPU|VAL ...`, hex).
fn msr_txt(m: &str, addr: u32) -> BTreeMap<u32, u64> {
    let text = std::fs::read_to_string(data().join(m).join("msr/msr.txt")).unwrap();
    let line = text
        .lines()
        .find(|l| l.split(':').next() == Some(&format!("{addr:x}")))
        .unwrap_or_else(|| panic!("{m}: no MSR {addr:#x} in msr.txt"));
    line.split_once(':')
        .unwrap()
        .1
        .split_whitespace()
        .map(|p| {
            let (c, v) = p.split_once('|').unwrap();
            (c.parse().unwrap(), u64::from_str_radix(v, 16).unwrap())
        })
        .collect()
}

/// Every `/dev/cpu/N/msr` file of the tree (by CPU) and its bytes.
fn msr_files(t: &EmulRoot) -> BTreeMap<u32, Vec<u8>> {
    let Ok(rd) = std::fs::read_dir(t.root.path("/dev/cpu")) else {
        return BTreeMap::new();
    };
    rd.flatten()
        .map(|e| {
            let cpu = e.file_name().to_str().unwrap().parse().unwrap();
            (cpu, std::fs::read(e.path().join("msr")).unwrap())
        })
        .collect()
}

fn reg(bytes: &[u8], addr: u32) -> u64 {
    let a = addr as usize;
    u64::from_le_bytes(bytes[a..a + 8].try_into().unwrap())
}

fn field(v: u64, lo: u32, width: u32) -> u64 {
    (v >> lo) & ((1 << width) - 1)
}

/// The CPUs of `knob` (`NAME@SCOPE`) as the engine resolves them.
fn cpus_of(t: &EmulRoot, knob: &str) -> Vec<u32> {
    knob::read_all(&t.root, &knob.parse::<KnobId>().unwrap())
        .unwrap()
        .iter()
        .map(|(k, _)| k.rsplit('@').next().unwrap().parse().unwrap())
        .collect()
}

it_test!(msr_knobs_read_the_bits_set_only_them_and_restore_byte_for_byte);
/// On an Intel server (spr1), a hybrid client (adl0) and a Xeon Phi (knl0, whose 0xe2 is
/// locked by its firmware): each MSR knob reads the bits of msr.txt on every CPU and is
/// listed per CPU; set through the transaction (scoped @package0, @all, @core0) only the
/// intended bits of the intended CPUs change, the journal keeps each whole register, and
/// restore gives every msr file back byte for byte.
fn msr_knobs_read_the_bits_set_only_them_and_restore_byte_for_byte() {
    for m in ["spr1", "adl0", "knl0"] {
        let t = machine(m);
        let listed = knob::list(&t.root);
        for (name, addr, lo, width) in MSR_KNOBS {
            let want = msr_txt(m, addr);
            let got = knob::read_all(&t.root, &name.parse::<KnobId>().unwrap())
                .unwrap_or_else(|e| panic!("{m} {name}: {e}"));
            assert_eq!(got.len(), want.len(), "{m} {name}: one per CPU");
            for (k, v) in &got {
                let cpu: u32 = k.rsplit('@').next().unwrap().parse().unwrap();
                assert_eq!(
                    v,
                    &field(want[&cpu], lo, width).to_string(),
                    "{m} {k} vs {:#x}",
                    want[&cpu]
                );
                let l = listed.iter().find(|i| &i.name == k).expect(k);
                assert_eq!(l.scope, knob::Scope::Cpu, "{m} {k}");
                assert_eq!(&l.value, v, "{m} {k}");
            }
        }
        let locked = msr_txt(m, 0xe2)[&0] & (1 << 15) != 0;
        assert_eq!(locked, m == "knl0", "{m}: the lock bit of 0xe2");
        let before = msr_files(&t);
        let sys_before = snapshot(&t);
        let e2 = msr_txt(m, 0xe2)[&0];
        let fc = msr_txt(m, 0x1fc)[&0];
        let limit = if field(e2, 0, 4) == 0 { 1 } else { 0 };
        let demote = 1 - field(e2, 26, 1);
        let promote = 1 - field(fc, 1, 1);
        let mut set = vec![
            format!("msr.c1_demotion@all={}", ["off", "on"][demote as usize]),
            format!("msr.c1e_autopromote@core0={promote}"),
        ];
        if !locked {
            set.push(format!("msr.pkg_cstate_limit@package0={limit}"));
        }
        let pkg0 = cpus_of(&t, "msr.pkg_cstate_limit@package0");
        let core0 = cpus_of(&t, "msr.c1e_autopromote@core0");
        assert!(
            !core0.is_empty() && core0.len() < before.len(),
            "{m}: {core0:?}"
        );
        let journals = tempfile::tempdir().unwrap();
        let mut txn = Transaction::begin_in(&t.root, journals.path()).unwrap();
        let set: Vec<&str> = set.iter().map(String::as_str).collect();
        txn.apply(&s(&set)).unwrap_or_else(|e| panic!("{m}: {e}"));
        for (cpu, now) in msr_files(&t) {
            let was = &before[&cpu];
            assert_eq!(now.len(), was.len(), "{m} cpu{cpu}");
            // Only the bytes of the two registers may differ.
            for (i, (a, b)) in was.iter().zip(&now).enumerate() {
                let i = i as u32;
                assert!(
                    a == b || (0xe2..0xea).contains(&i) || (0x1fc..0x204).contains(&i),
                    "{m} cpu{cpu}: byte {i:#x} changed"
                );
            }
            let (e_was, e_now) = (reg(was, 0xe2), reg(&now, 0xe2));
            let (f_was, f_now) = (reg(was, 0x1fc), reg(&now, 0x1fc));
            let limit_bits = if !locked && pkg0.contains(&cpu) {
                0xf
            } else {
                0
            };
            assert_eq!(
                (e_was ^ e_now) & !((1 << 26) | limit_bits),
                0,
                "{m} cpu{cpu}"
            );
            assert_eq!(field(e_now, 26, 1), demote, "{m} cpu{cpu}");
            if limit_bits != 0 {
                assert_eq!(field(e_now, 0, 4), limit, "{m} cpu{cpu}");
            }
            if core0.contains(&cpu) {
                assert_eq!(f_was ^ f_now, 1 << 1, "{m} cpu{cpu}");
            } else {
                assert_eq!(f_was, f_now, "{m} cpu{cpu}");
            }
        }
        // The journal holds each register whole, once, as found.
        let text = std::fs::read_to_string(txn.journal_path().unwrap()).unwrap();
        let entries: Vec<serde_json::Value> = text
            .lines()
            .skip(1)
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|e: &serde_json::Value| e["msr"] == 0xe2)
            .collect();
        assert_eq!(entries.len(), before.len(), "{m}: one 0xe2 entry per CPU");
        for e in &entries {
            let cpu: u32 = e["path"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .nth(1)
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(
                e["orig"],
                format!("{:#018x}", reg(&before[&cpu], 0xe2)),
                "{m} cpu{cpu}"
            );
        }
        txn.restore().unwrap();
        assert!(msr_files(&t) == before, "{m}: msr files not restored");
        assert!(changed(&sys_before, &snapshot(&t)).is_empty(), "{m}: /sys");
    }
}

it_test!(msr_knobs_are_refused_without_intel_or_the_msr_device_or_when_locked);
/// Refused, with nothing written or journaled: on AMD (genoa0: `knob list` leaves the MSR
/// knobs out, get and set name the vendor), on an Intel tree whose /dev/cpu was removed
/// (they name the missing device), a limit write on a locked 0xe2 (knl0 as found; spr1 with
/// bit 15 set on one CPU), and values out of the fields' range.
fn msr_knobs_are_refused_without_intel_or_the_msr_device_or_when_locked() {
    let genoa = machine("genoa0");
    let nodev = machine("spr1");
    std::fs::remove_dir_all(nodev.root.path("/dev/cpu")).unwrap();
    let knl = machine("knl0");
    let spr = machine("spr1");
    let dev3 = pmlab_kernel::msr::device(&spr.root, 3);
    let e2 = pmlab_kernel::msr::read(&dev3, 0xe2).unwrap();
    pmlab_kernel::msr::write(&dev3, 0xe2, e2 | 1 << 15).unwrap();
    for (t, says) in [
        (&genoa, "is an Intel MSR (0xe2); this CPU is AuthenticAMD"),
        (
            &nodev,
            "needs /dev/cpu/0/msr: load the msr module (modprobe msr); this machine has none",
        ),
    ] {
        assert!(
            !knob::list(&t.root)
                .iter()
                .any(|k| k.name.starts_with("msr.")),
            "{says}: listed"
        );
        for (name, ..) in MSR_KNOBS {
            let e = knob::read(&t.root, &name.parse::<KnobId>().unwrap()).unwrap_err();
            let says = says.replace(
                "0xe2",
                if name.contains("c1e") {
                    "0x1fc"
                } else {
                    "0xe2"
                },
            );
            assert!(e.to_string().contains(&says), "get {name}: {e}");
        }
    }
    for (t, a, says) in [
        (&genoa, "msr.c1_demotion=off", "is an Intel MSR"),
        (&nodev, "msr.c1e_autopromote@all=on", "needs /dev/cpu/0/msr"),
        (&knl, "msr.pkg_cstate_limit=0", "locked (bit 15 is set"),
        (
            &spr,
            "msr.pkg_cstate_limit@all=0",
            "MSR 0xe2 of cpu3 is locked",
        ),
        (&spr, "msr.pkg_cstate_limit=16", "out of range 0..15"),
        (&spr, "msr.c1_demotion@0=2", "not a boolean"),
        (&spr, "msr.c1e_autopromote@9999=1", "there is no cpu9999"),
    ] {
        let (before, sys) = (msr_files(t), snapshot(t));
        let journals = tempfile::tempdir().unwrap();
        let mut txn = Transaction::begin_in(&t.root, journals.path()).unwrap();
        let e = txn.apply(&s(&["cpuidle.POLL.disable=1", a])).unwrap_err();
        assert!(e.to_string().contains(says), "{a}: {e}");
        assert!(matches!(e, KnobError::Invalid { .. }), "{a}: {e:?}");
        assert!(msr_files(t) == before, "{a}: msr written");
        assert!(changed(&sys, &snapshot(t)).is_empty(), "{a}: /sys written");
        assert!(txn.journal_path().is_none(), "{a}: journaled");
    }
    // Locked, the limit still reads, and the other fields of 0xe2 still set.
    assert_eq!(
        knob::read(
            &knl.root,
            &"msr.pkg_cstate_limit".parse::<KnobId>().unwrap()
        )
        .unwrap(),
        "3"
    );
    let journals = tempfile::tempdir().unwrap();
    let mut txn = Transaction::begin_in(&spr.root, journals.path()).unwrap();
    txn.apply(&s(&["msr.c1_demotion@3=off", "msr.pkg_cstate_limit@3=3"]))
        .unwrap();
    assert_eq!(
        pmlab_kernel::msr::read(&dev3, 0xe2).unwrap(),
        (e2 | 1 << 15) & !(1 << 26)
    );
    txn.restore().unwrap();
    assert_eq!(pmlab_kernel::msr::read(&dev3, 0xe2).unwrap(), e2 | 1 << 15);
}

it_test!(msr_knobs_killed_midway_are_repaired_by_the_next_transaction);
/// A process setting the three MSR knobs on spr1 is SIGKILLed after some of its writes;
/// the next transaction restores every register from its journal, byte for byte.
fn msr_knobs_killed_midway_are_repaired_by_the_next_transaction() {
    let t = machine("spr1");
    let before = msr_files(&t);
    let journals = tempfile::tempdir().unwrap();
    let set = "msr.pkg_cstate_limit@package1=0 msr.c1_demotion@all=off msr.c1e_autopromote@all=on";
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .env(
            CHILD_ENV,
            format!(
                "{}|{}|{set}",
                t.root.path("/").display(),
                journals.path().display()
            ),
        )
        .env("PMLAB_TEST_PAUSE_AFTER_WRITE", before.len().to_string())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    use std::io::BufRead;
    while err.read_line(&mut line).unwrap() > 0 && !line.contains("paused after write") {}
    assert!(line.contains("paused after write"), "{line}");
    let now = msr_files(&t);
    let n = before.iter().filter(|(c, b)| now[*c] != **b).count();
    assert!(n > 0, "the child wrote nothing");
    // SAFETY: kill(2) on the PID of our own child; no memory is involved.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let txn = Transaction::begin_in(&t.root, journals.path()).unwrap();
    assert!(!txn.recovered.is_empty(), "nothing recovered");
    assert!(msr_files(&t) == before, "msr files not repaired");
}

it_test!(msr_knobs_take_the_character_device_the_msr_module_makes);
/// On a real machine /dev/cpu/N/msr is a character device, not a regular file: cpu0's is
/// replaced by one that reads zeros and drops writes (1:5, like /dev/zero). The knob reads
/// it, and a set is refused at its read-back, written back, with the journal gone.
fn msr_knobs_take_the_character_device_the_msr_module_makes() {
    let t = machine("spr1");
    let dev = pmlab_kernel::msr::device(&t.root, 0);
    std::fs::remove_file(&dev).unwrap();
    let c = std::ffi::CString::new(dev.to_str().unwrap()).unwrap();
    // SAFETY: mknod(2) on a NUL-terminated path we own; no memory is shared.
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 5)) } != 0 {
        skip!(
            "mknod of a character device: {}",
            std::io::Error::last_os_error()
        );
    }
    let id = "msr.c1_demotion@0".parse::<KnobId>().unwrap();
    assert_eq!(knob::read(&t.root, &id).unwrap(), "0");
    assert!(knob::list(&t.root)
        .iter()
        .any(|k| k.name == "msr.c1_demotion@0" && k.writable));
    let journals = tempfile::tempdir().unwrap();
    let mut txn = Transaction::begin_in(&t.root, journals.path()).unwrap();
    let e = txn.apply(&s(&["msr.c1_demotion@0=on"])).unwrap_err();
    assert!(e.to_string().contains("wrote `1` but it reads `0`"), "{e}");
    txn.restore().unwrap();
    assert_eq!(
        std::fs::read_dir(journals.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name() != ".lock")
            .count(),
        0
    );
}

it_test!(amd_pstate_mode_sets_and_restores_on_an_amd_pstate_tree);
/// amd-pstate's mode (`amd_pstate.status`) on turin0 (amd-pstate-epp). pepc's snapshot lacks
/// the driver's `amd_pstate/status` file, so the test adds it as the kernel has it
/// (`active`, the EPP mode this tree's policies are in); then set, read back and restore.
fn amd_pstate_mode_sets_and_restores_on_an_amd_pstate_tree() {
    let t = machine("turin0");
    let status = t.root.path("/sys/devices/system/cpu/amd_pstate/status");
    std::fs::create_dir_all(status.parent().unwrap()).unwrap();
    std::fs::write(&status, "active\n").unwrap();
    let before = snapshot(&t);
    let journals = tempfile::tempdir().unwrap();
    let mut txn = Transaction::begin_in(&t.root, journals.path()).unwrap();
    txn.apply(&s(&["amd_pstate.status=guided"]))
        .unwrap_or_else(|e| panic!("turin0: {e}"));
    assert_eq!(
        file(&t, "/sys/devices/system/cpu/amd_pstate/status"),
        "guided"
    );
    // A word the driver does not take changes nothing.
    assert!(txn.apply(&s(&["amd_pstate.status=turbo"])).is_err());
    assert_eq!(
        file(&t, "/sys/devices/system/cpu/amd_pstate/status"),
        "guided"
    );
    txn.restore().unwrap();
    let left = changed(&before, &snapshot(&t));
    assert!(left.is_empty(), "turin0: not restored: {left:?}");
}
