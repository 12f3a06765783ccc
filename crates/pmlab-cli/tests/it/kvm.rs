//! VM exits by reason (`pmlab analyze`'s kvm section): the synthetic fixtures under
//! tests/fixtures/kvm are rebuilt here from the kernel's format files and must not drift; the
//! table is checked against an independent count of the fixture's `trace-cmd report` text;
//! and a live test against `perf kvm stat` where the host runs KVM guests (skipped here).

use crate::util::{fixtures, need_program, pmlab, stdout_of};
use pmlab_trace::writer::{self, CpuData, EventSystem, TraceDatHeader};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn dir() -> PathBuf {
    fixtures().join("kvm")
}

fn read(name: &str) -> Vec<u8> {
    let p = dir().join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One event of the synthetic trace.
struct Ev {
    ts: u64,
    cpu: usize,
    pid: i32,
    rec: Vec<u8>,
}

const EXIT_ID: u16 = 2088;
const ENTRY_ID: u16 = 2097;

fn common(id: u16, pid: i32, len: usize) -> Vec<u8> {
    let mut r = vec![0u8; len];
    r[0..2].copy_from_slice(&id.to_le_bytes());
    r[2] = 1; // irqs off, as KVM's exit and entry run
    r[4..8].copy_from_slice(&pid.to_le_bytes());
    r
}

/// `kvm_exit` as the format file lays it out (exit_reason @8, guest_rip @16, isa @24,
/// info1 @32, info2 @40, intr_info @48, error_code @52, vcpu_id @56).
fn exit_rec(pid: i32, reason: u32, isa: u32, vcpu: u32, rip: u64) -> Vec<u8> {
    let mut r = common(EXIT_ID, pid, 60);
    r[8..12].copy_from_slice(&reason.to_le_bytes());
    r[16..24].copy_from_slice(&rip.to_le_bytes());
    r[24..28].copy_from_slice(&isa.to_le_bytes());
    r[56..60].copy_from_slice(&vcpu.to_le_bytes());
    r
}

/// `kvm_entry` (vcpu_id @8, rip @16).
fn entry_rec(pid: i32, vcpu: u32, rip: u64) -> Vec<u8> {
    let mut r = common(ENTRY_ID, pid, 24);
    r[8..12].copy_from_slice(&vcpu.to_le_bytes());
    r[16..24].copy_from_slice(&rip.to_le_bytes());
    r
}

/// A vCPU thread of the scenario: its pid, vCPU index, host CPU, `isa` (1 VMX, 2 SVM),
/// exit reasons with weights and host-side time ranges (ns), exits to make, and whether the
/// last exit is left without its entry (the recording stopped in the host).
struct Vcpu {
    pid: i32,
    vcpu: u32,
    cpu: usize,
    isa: u32,
    reasons: &'static [(u32, u32, u64, u64)],
    exits: usize,
    open_at_end: bool,
}

/// VMX: EXTERNAL_INTERRUPT, HLT, MSR_WRITE, EPT_MISCONFIG, APIC_WRITE, PREEMPTION_TIMER, and
/// 70, which the kernel's table does not name (printed as 0x46).
const VMX: &[(u32, u32, u64, u64)] = &[
    (1, 20, 600, 9_000),
    (12, 25, 40_000, 2_000_000),
    (32, 15, 300, 4_000),
    (49, 12, 1_000, 30_000),
    (56, 20, 400, 3_000),
    (52, 6, 300, 2_000),
    (70, 2, 500, 1_500),
];
/// SVM: interrupt, hlt, msr, npf.
const SVM: &[(u32, u32, u64, u64)] = &[
    (0x060, 30, 600, 9_000),
    (0x078, 30, 40_000, 2_000_000),
    (0x07c, 20, 300, 4_000),
    (0x400, 20, 1_000, 30_000),
];

/// The scenario's events, in time order: a VMX guest's two vCPU threads (pids 4101, 4102)
/// and one vCPU of an SVM guest (pid 4201, vCPU index 0 like pid 4101's), interleaved.
fn scenario(with_entries: bool) -> Vec<Ev> {
    let vcpus = [
        Vcpu {
            pid: 4101,
            vcpu: 0,
            cpu: 2,
            isa: 1,
            reasons: VMX,
            exits: 160,
            open_at_end: false,
        },
        Vcpu {
            pid: 4102,
            vcpu: 1,
            cpu: 3,
            isa: 1,
            reasons: VMX,
            exits: 140,
            open_at_end: true,
        },
        Vcpu {
            pid: 4201,
            vcpu: 0,
            cpu: 1,
            isa: 2,
            reasons: SVM,
            exits: 40,
            open_at_end: false,
        },
    ];
    // A fixed LCG: the fixture is rebuilt bit for bit.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = move |lo: u64, hi: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        lo + (seed >> 33) % (hi - lo + 1)
    };
    let mut out = Vec::new();
    for v in &vcpus {
        let mut ts = 5_000_000_000_000 + rnd(0, 50_000);
        let weights: u32 = v.reasons.iter().map(|r| r.1).sum();
        for k in 0..v.exits {
            ts += rnd(2_000, 200_000); // in the guest
            let mut pick = rnd(0, u64::from(weights) - 1) as u32;
            let &(reason, _, lo, hi) = v
                .reasons
                .iter()
                .find(|r| {
                    let hit = pick < r.1;
                    pick = pick.saturating_sub(r.1);
                    hit
                })
                .expect("within the weights");
            let rip = 0xffff_ffff_8100_0000 + rnd(0, 0xf_ffff);
            out.push(Ev {
                ts,
                cpu: v.cpu,
                pid: v.pid,
                rec: exit_rec(v.pid, reason, v.isa, v.vcpu, rip),
            });
            ts += rnd(lo, hi); // in the host
            if with_entries && !(v.open_at_end && k + 1 == v.exits) {
                out.push(Ev {
                    ts,
                    cpu: v.cpu,
                    pid: v.pid,
                    rec: entry_rec(v.pid, v.vcpu, rip + 3),
                });
            }
        }
    }
    out.sort_by_key(|e| (e.ts, e.cpu));
    out
}

/// Ring-buffer pages of one CPU's events (4096-byte pages, 8-byte commit field): a 32-bit
/// header per record (type_len = length / 4, time delta), a time-extend record for deltas
/// beyond 27 bits.
fn pages(events: &[&Ev]) -> Vec<u8> {
    const PAGE: usize = 4096;
    let mut out = Vec::new();
    let mut page: Vec<u8> = Vec::new();
    let mut last = 0u64;
    let flush = |out: &mut Vec<u8>, page: &mut Vec<u8>| {
        if page.len() > 16 {
            let commit = (page.len() - 16) as u64;
            page[8..16].copy_from_slice(&commit.to_le_bytes());
            page.resize(PAGE, 0);
            out.append(page);
        }
        page.clear();
    };
    for e in events {
        let need = 8 + 4 + e.rec.len().div_ceil(4) * 4;
        if page.is_empty() || page.len() + need > PAGE {
            flush(&mut out, &mut page);
            page.extend_from_slice(&e.ts.to_le_bytes());
            page.extend_from_slice(&[0; 8]);
            last = e.ts;
        }
        let delta = e.ts - last;
        let delta = if delta >= 1 << 27 {
            page.extend_from_slice(&((((delta & ((1 << 27) - 1)) as u32) << 5) | 30).to_le_bytes());
            page.extend_from_slice(&((delta >> 27) as u32).to_le_bytes());
            0
        } else {
            delta as u32
        };
        last = e.ts;
        let padded = e.rec.len().div_ceil(4) * 4;
        page.extend_from_slice(&((delta << 5) | (padded / 4) as u32).to_le_bytes());
        page.extend_from_slice(&e.rec);
        page.resize(page.len() + padded - e.rec.len(), 0);
    }
    flush(&mut out, &mut page);
    out
}

/// Write the synthetic trace.dat (v6, 4 CPUs) with pmlab-trace's writer.
fn synthesize(out: &Path, with_entries: bool) {
    let kvm = EventSystem {
        name: "kvm".into(),
        formats: vec![read("format/kvm_exit"), read("format/kvm_entry")],
    };
    write_events(out, &scenario(with_entries), vec![kvm]);
}

/// Write `evs` (4 CPUs) with these event systems' formats.
fn write_events(out: &Path, evs: &[Ev], event_systems: Vec<EventSystem>) {
    let cpus = 4;
    let data: Vec<Vec<u8>> = (0..cpus)
        .map(|c| pages(&evs.iter().filter(|e| e.cpu == c).collect::<Vec<_>>()))
        .collect();
    let mut comms: BTreeMap<i32, &str> = BTreeMap::new();
    for e in evs {
        comms.insert(
            e.pid,
            match e.pid {
                4101 => "CPU 0/KVM",
                4102 => "CPU 1/KVM",
                4100 | 4200 => "qemu-system-x86",
                _ => "CPU 0/KVM",
            },
        );
    }
    let header = TraceDatHeader {
        big_endian: false,
        long_size: 8,
        page_size: 4096,
        header_page: read("format/header_page"),
        header_event: read("format/header_event"),
        event_systems,
        cmdlines: comms
            .iter()
            .map(|(p, c)| format!("{p} {c}\n"))
            .collect::<String>()
            .into_bytes(),
        trace_clock: Some("[local] global counter uptime perf mono mono_raw boot\n".into()),
        cpu_stats: (0..cpus)
            .map(|c| format!("CPU: {c}\nentries: 0\n"))
            .collect(),
        ..Default::default()
    };
    let cpu_data: Vec<CpuData> = data.iter().map(|d| CpuData::Bytes(d)).collect();
    writer::write_trace_dat_v6(out, &header, &cpu_data).unwrap();
}

/// `sched_process_fork` as this kernel lays it out (format/sched_process_fork: the comms are
/// `__data_loc` strings after the fixed fields).
fn fork_rec(parent: i32, child: i32, comm: &str) -> Vec<u8> {
    let mut r = common(366, parent, 24);
    let loc = |off: usize, len: usize| ((len as u32) << 16 | off as u32).to_le_bytes();
    let c = format!("{comm}\0");
    r[8..12].copy_from_slice(&loc(24, c.len()));
    r[12..16].copy_from_slice(&parent.to_le_bytes());
    r[16..20].copy_from_slice(&loc(24 + c.len(), c.len()));
    r[20..24].copy_from_slice(&child.to_le_bytes());
    r.extend_from_slice(c.as_bytes());
    r.extend_from_slice(c.as_bytes());
    r
}

const FULL: &str = "kvm_synthetic.dat";
const EXITS_ONLY: &str = "kvm_synthetic_exits_only.dat";
const TEXT: &str = "kvm_synthetic.txt";

it_test!(kvm_fixtures_are_what_the_generator_writes);
/// The committed fixtures are this file's generator's output; `PMLAB_REGEN_KVM_FIXTURES=1`
/// rewrites them (the text form with `trace-cmd report -N -t`: the kernel's print formats,
/// not libtraceevent's kvm plugin, whose SVM names differ: `EXIT_NPF` for `npf`).
fn kvm_fixtures_are_what_the_generator_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let regen = std::env::var_os("PMLAB_REGEN_KVM_FIXTURES").is_some();
    for (name, entries) in [(FULL, true), (EXITS_ONLY, false)] {
        let out = tmp.path().join(name);
        synthesize(&out, entries);
        let made = std::fs::read(&out).unwrap();
        if regen {
            std::fs::write(dir().join(name), &made).unwrap();
        }
        assert!(
            made == read(name),
            "{name} differs from the generator's output"
        );
    }
    if regen {
        let text = Command::new("trace-cmd")
            .args(["report", "-N", "-t", "-i"])
            .arg(dir().join(FULL))
            .output()
            .unwrap();
        assert!(text.status.success());
        std::fs::write(dir().join(TEXT), text.stdout).unwrap();
    }
}

it_test!(kvm_text_form_is_trace_cmds_view_of_the_dat);
fn kvm_text_form_is_trace_cmds_view_of_the_dat() {
    need_program("trace-cmd", "apt-get install trace-cmd");
    let text = Command::new("trace-cmd")
        .args(["report", "-N", "-t", "-i"])
        .arg(dir().join(FULL))
        .output()
        .unwrap();
    assert!(text.status.success());
    assert!(
        text.stdout == read(TEXT),
        "trace-cmd report -t of {FULL} is not {TEXT}"
    );
}

/// Per reason from `trace-cmd report -N -t` text, counted without pmlab: exits, and for each
/// exit closed by its thread's next kvm_entry (before its next exit) the time in ns.
#[derive(Default, Debug)]
struct Count {
    samples: u64,
    times: Vec<u64>,
}

fn independent(text: &str, pids: Option<&[i32]>) -> BTreeMap<String, Count> {
    let mut by: BTreeMap<String, Count> = BTreeMap::new();
    let mut open: BTreeMap<i32, (u64, String)> = BTreeMap::new();
    for line in text.lines() {
        // `   CPU 0/KVM-4101  [002] 5000.000123456: kvm_exit:   vcpu 0 reason HLT rip ...`
        let Some((head, body)) = line.split_once(": kvm_") else {
            continue;
        };
        let mut words = head.split_whitespace().rev();
        let ts = words.next().unwrap().trim_end_matches(':');
        let (s, ns) = ts.split_once('.').unwrap();
        let ts: u64 = s.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap();
        words.next(); // [cpu]
        let task = words.next().unwrap();
        let pid: i32 = task.rsplit_once('-').unwrap().1.parse().unwrap();
        if pids.is_some_and(|p| !p.contains(&pid)) {
            continue;
        }
        if let Some(rest) = body.strip_prefix("exit:") {
            let reason = rest.split(" reason ").nth(1).unwrap();
            let reason = reason.split_whitespace().next().unwrap().to_string();
            by.entry(reason.clone()).or_default().samples += 1;
            open.insert(pid, (ts, reason));
        } else if body.starts_with("entry:") {
            if let Some((at, reason)) = open.remove(&pid) {
                by.get_mut(&reason).unwrap().times.push(ts - at);
            }
        }
    }
    by
}

fn kvm_json(file: &Path) -> Value {
    let out = stdout_of(
        pmlab()
            .args(["analyze", "--only", "kvm", "--json"])
            .arg(file),
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    v["kvm"].clone()
}

/// The JSON report's reasons against the independent count: samples exactly, times to the ns
/// (both come from the same integer timestamps).
fn check(report: &Value, want: &BTreeMap<String, Count>) {
    let reasons = report["reasons"].as_array().expect("reasons");
    assert_eq!(reasons.len(), want.len(), "{report}");
    let all: u64 = want.values().map(|c| c.samples).sum();
    assert_eq!(report["samples"].as_u64(), Some(all));
    for r in reasons {
        let name = r["reason"].as_str().unwrap();
        let c = &want[name];
        assert_eq!(r["samples"].as_u64(), Some(c.samples), "{name}");
        assert_eq!(r["timed"].as_u64(), Some(c.times.len() as u64), "{name}");
        let share = r["share"].as_f64().unwrap();
        assert!(
            (share - c.samples as f64 / all as f64).abs() < 1e-9,
            "{name}"
        );
        if !c.times.is_empty() {
            assert_eq!(
                r["total"].as_u64(),
                Some(c.times.iter().sum::<u64>()),
                "{name}"
            );
            assert_eq!(r["min"].as_u64(), c.times.iter().min().copied(), "{name}");
            assert_eq!(r["max"].as_u64(), c.times.iter().max().copied(), "{name}");
        }
    }
}

it_test!(kvm_exits_by_reason_match_an_independent_count);
fn kvm_exits_by_reason_match_an_independent_count() {
    let text = String::from_utf8(read(TEXT)).unwrap();
    let want = independent(&text, None);
    // Both tables named by the print format: VMX's and SVM's, and a number with no name.
    for r in ["HLT", "EXTERNAL_INTERRUPT", "hlt", "npf", "0x46"] {
        assert!(
            want.contains_key(r),
            "{r} not in the fixture: {:?}",
            want.keys()
        );
    }
    // The trace.dat: reasons through the print format.
    let dat = kvm_json(&dir().join(FULL));
    check(&dat, &want);
    assert_eq!(dat["untimed"].as_u64(), Some(1));
    // The same recording as text: reasons as printed.
    check(&kvm_json(&dir().join(TEXT)), &want);
    // Per vCPU: three threads, two sharing vCPU index 0 (two VMs), named apart.
    let vcpus = dat["vcpus"].as_array().unwrap();
    assert_eq!(vcpus.len(), 3);
    let shared = vcpus.iter().filter(|v| v["shared_index"] == true).count();
    assert_eq!(shared, 2);
    let per_thread: u64 = vcpus.iter().map(|v| v["samples"].as_u64().unwrap()).sum();
    assert_eq!(per_thread, dat["samples"].as_u64().unwrap());
    // Exits only: the same counts, no times, and the note saying why.
    let only = kvm_json(&dir().join(EXITS_ONLY));
    assert_eq!(only["timed"], false);
    for r in only["reasons"].as_array().unwrap() {
        let name = r["reason"].as_str().unwrap();
        assert_eq!(r["samples"].as_u64(), Some(want[name].samples), "{name}");
        assert!(r["total"].is_null() && r["min"].is_null(), "{r}");
    }
    assert!(only["notes"].to_string().contains("no kvm:kvm_entry"));
}

it_test!(kvm_pid_filter_counts_one_vm);
/// The boot lab's call: only the QEMU process's threads (the VMX guest's two vCPUs).
fn kvm_pid_filter_counts_one_vm() {
    let text = String::from_utf8(read(TEXT)).unwrap();
    let pids = [4101, 4102];
    let want = independent(&text, Some(&pids));
    let trace = pmlab_trace::open(&dir().join(FULL)).unwrap();
    let r = pmlab_analysis::kvm::exits(&trace, Some(&pids)).unwrap();
    let all: u64 = want.values().map(|c| c.samples).sum();
    assert_eq!(r.samples, all);
    for s in &r.reasons {
        assert_eq!(s.samples, want[&s.reason].samples, "{}", s.reason);
        assert_eq!(s.timed, want[&s.reason].times.len() as u64, "{}", s.reason);
    }
    assert!(r.vcpus.iter().all(|v| !v.shared_index));
    let m = r.metrics();
    let get = |name: &str, cpu: Option<u32>| {
        m.iter()
            .find(|x| x.name == name && x.cpu == cpu)
            .map(|x| x.value)
    };
    let hlt = &want["HLT"];
    assert_eq!(get("kvm.exits:HLT", None), Some(hlt.samples as f64));
    let mean = hlt.times.iter().sum::<u64>() as f64 / hlt.times.len() as f64 / 1e3;
    assert!((get("kvm.exit_us:HLT", None).unwrap() - mean).abs() < 1e-9);
    assert!(get("kvm.exits", Some(1)).is_some() && get("kvm.exits", Some(2)).is_none());
    // A pid with no exits: the analysis says what is missing.
    assert!(pmlab_analysis::kvm::exits(&trace, Some(&[1])).is_err());
}

it_test!(kvm_boot_host_side_counts_only_the_qemu_it_started);
/// The boot lab's host recording: QEMU (pid 4100) forks its vCPU threads (4101, 4102) while
/// recorded; the other VM's thread (4201, forked by 4200) is not counted. The exits are
/// what the fixture's `trace-cmd` text counts for those two threads.
fn kvm_boot_host_side_counts_only_the_qemu_it_started() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("host.dat");
    let mut evs = scenario(true);
    let t0 = evs.iter().map(|e| e.ts).min().unwrap() - 1_000_000;
    for (i, (parent, child, cpu)) in [(4100, 4101, 2), (4100, 4102, 3), (4200, 4201, 1)]
        .into_iter()
        .enumerate()
    {
        evs.push(Ev {
            ts: t0 + i as u64 * 1000,
            cpu,
            pid: parent,
            rec: fork_rec(parent, child, "qemu-system-x86"),
        });
    }
    evs.sort_by_key(|e| (e.ts, e.cpu));
    let systems = vec![
        EventSystem {
            name: "kvm".into(),
            formats: vec![read("format/kvm_exit"), read("format/kvm_entry")],
        },
        EventSystem {
            name: "sched".into(),
            formats: vec![read("format/sched_process_fork")],
        },
    ];
    write_events(&out, &evs, systems);
    let trace = pmlab_trace::open(&out).unwrap();
    let m = pmlab_boot::host::exit_metrics(&trace, 4100).unwrap();
    let get = |m: &[pmlab_kernel::Metric], name: &str| {
        m.iter()
            .find(|x| x.name == name && x.cpu.is_none())
            .map(|x| x.value)
    };
    assert_eq!(get(&m, "boot.qemu_threads"), Some(3.0));
    let text = String::from_utf8(read(TEXT)).unwrap();
    let want = independent(&text, Some(&[4101, 4102]));
    let all: u64 = want.values().map(|c| c.samples).sum();
    assert_eq!(get(&m, "kvm.exits"), Some(all as f64));
    for (reason, c) in &want {
        assert_eq!(
            get(&m, &format!("kvm.exits:{reason}")),
            Some(c.samples as f64),
            "{reason}"
        );
    }
    assert!(get(&m, "kvm.exits:hlt").is_none(), "the SVM guest's exits");
    // A QEMU that made no exits (TCG): 0, not a missing row.
    let m = pmlab_boot::host::exit_metrics(&trace, 4999).unwrap();
    assert_eq!(get(&m, "kvm.exits"), Some(0.0));
    assert_eq!(get(&m, "boot.qemu_threads"), Some(1.0));
    // A recording without forks cannot tell QEMU's threads: said, not guessed.
    let no_forks = pmlab_trace::open(&dir().join(FULL)).unwrap();
    let e = pmlab_boot::host::exit_metrics(&no_forks, 4100).unwrap_err();
    assert!(
        pmlab_kernel::error_chain(&e).contains("sched_process_fork"),
        "{}",
        pmlab_kernel::error_chain(&e)
    );
}

it_test!(kvm_table_in_every_format);
fn kvm_table_in_every_format() {
    let f = dir().join(FULL);
    let table = stdout_of(pmlab().arg("analyze").arg(&f));
    assert!(
        table.contains("== kvm ==") && table.contains("VM exits by reason"),
        "{table}"
    );
    assert!(
        table.contains("EXTERNAL_INTERRUPT") && table.contains("npf"),
        "{table}"
    );
    let md = stdout_of(pmlab().args(["analyze", "--format", "markdown"]).arg(&f));
    assert!(md.contains("#### kvm") && md.contains("| HLT"), "{md}");
    // Traces without VM exits show no kvm section unless asked for.
    let lisa = fixtures().join("lisa_sched_load.dat");
    let other = stdout_of(pmlab().arg("analyze").arg(&lisa));
    assert!(!other.contains("== kvm =="), "{other}");
    let asked = pmlab()
        .args(["analyze", "--only", "kvm"])
        .arg(&lisa)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&asked.stdout);
    assert!(
        !asked.status.success() && said.contains("no kvm:kvm_exit"),
        "{said}"
    );
    assert!(
        said.contains("pmlab record -e kvm:kvm_exit -e kvm:kvm_entry"),
        "{said}"
    );
}

it_test!(kvm_exits_match_perf_kvm_stat_live);
/// On a host that runs KVM guests: `perf kvm stat record` around `pmlab record` around a short
/// guest, so both see the same exits; per reason, pmlab's timed exits (perf counts an exit at
/// its entry) against perf's samples. This machine's /dev/kvm is a PVM backend (kvm-pvm) that
/// emits no kvm_exit, so here the test says so and skips.
fn kvm_exits_match_perf_kvm_stat_live() {
    if Path::new("/sys/module/kvm_pvm").exists() {
        skip!(
            "/dev/kvm is kvm-pvm here, which emits no kvm:kvm_exit events (no VM exits to count)"
        );
    }
    let tracepoint = [
        "/sys/kernel/tracing/events/kvm/kvm_exit",
        "/sys/kernel/debug/tracing/events/kvm/kvm_exit",
    ];
    if !tracepoint.iter().any(|p| Path::new(p).exists()) {
        skip!("no kvm:kvm_exit tracepoint (KVM is not loaded, or tracefs is not mounted)");
    }
    need_program("perf", "apt-get install linux-perf");
    need_program("qemu-system-x86_64", "apt-get install qemu-system-x86");
    let tmp = tempfile::tempdir().unwrap();
    let (dat, perf_data) = (tmp.path().join("kvm.dat"), tmp.path().join("perf.data"));
    // A guest without a disk: the firmware finds no boot device and halts; 2 s of it.
    let status = Command::new("perf")
        .args(["kvm", "stat", "record", "-o"])
        .arg(&perf_data)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_pmlab"))
        .args(["record", "-e", "kvm:kvm_exit", "-e", "kvm:kvm_entry", "-o"])
        .arg(&dat)
        .args(["--", "timeout", "2", "qemu-system-x86_64", "-accel", "kvm"])
        .args(["-display", "none", "-nodefaults", "-no-reboot", "-m", "64"])
        .status()
        .unwrap();
    assert!(dat.exists() && perf_data.exists(), "{status}");
    let ours = kvm_json(&dat);
    if ours["samples"].as_u64().unwrap_or(0) == 0 {
        skip!("no VM exit recorded in 2 s of a guest: this KVM emits no kvm_exit");
    }
    let report = Command::new("perf")
        .args(["kvm", "stat", "report", "--event", "vmexit", "-i"])
        .arg(&perf_data)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    // `  REASON  SAMPLES  SAMPLES%  TIME%  MIN  MAX  AVG (+- X%)`
    let perf: BTreeMap<&str, u64> = text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (reason, n) = (w.next()?, w.next()?.parse().ok()?);
            w.next()?.ends_with('%').then_some((reason, n))
        })
        .collect();
    assert!(
        !perf.is_empty(),
        "no table in perf kvm stat report:\n{text}"
    );
    for r in ours["reasons"].as_array().unwrap() {
        let (name, timed) = (r["reason"].as_str().unwrap(), r["timed"].as_u64().unwrap());
        let theirs = perf.get(name).copied().unwrap_or(0);
        // perf drops samples when its buffer fills; the counts agree within 1% (and 2).
        let slack = (timed / 100).max(2);
        assert!(
            timed.abs_diff(theirs) <= slack,
            "{name}: pmlab {timed}, perf {theirs}\n{text}"
        );
    }
}
