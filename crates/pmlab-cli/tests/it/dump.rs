//! Integration tests for `pmlab dump`'s formatted view against `trace-cmd report` (the
//! formatted view, not `-R`), line by line: every fixture as found (v6) and converted to
//! v7 zstd; the flags (`-R`, `-t`, `--cpu`, `-e`) against trace-cmd's own; bad flags; and
//! fresh recordings of this machine (root, tracefs): pipe with the default event set,
//! a hotplug cycle, 3 s idle, `sched_waking` with `--stacktrace`, and the function and
//! function_graph tracers where the kernel lets them run; their lines also on a fixture
//! whose records are rewritten into ftrace events.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::record::machine;
use crate::trace::{convert_v7, fixture_dats, has_trace_cmd, normalized};
use crate::util::{is_root, pmlab, Cpu1Online};

/// Line kinds (event names) where pmlab's line may differ from trace-cmd's. None today:
/// every line of every file here is equal. A kind listed here must say why in docs/traces.md.
const MAY_DIFFER: &[&str] = &[];

/// The event name of a report line (`comm-pid [cpu] ts: NAME: ...`), or the whole line.
fn kind(line: &str) -> &str {
    line.split(": ")
        .nth(1)
        .filter(|_| line.contains("] "))
        .unwrap_or(line)
}

/// `pmlab dump ARGS FILE` against `trace-cmd report TC_ARGS -i FILE`, line by line with
/// whitespace runs collapsed. Lines of the kinds in MAY_DIFFER may differ; nothing else.
/// Returns the number of lines.
fn assert_formatted(file: &Path, ours_args: &[&str], theirs_args: &[&str]) -> usize {
    let ours = pmlab()
        .arg("dump")
        .args(ours_args)
        .arg(file)
        .output()
        .unwrap();
    assert!(
        ours.status.success(),
        "pmlab dump {ours_args:?} {}: {}",
        file.display(),
        String::from_utf8_lossy(&ours.stderr)
    );
    let theirs = Command::new("trace-cmd")
        .arg("report")
        .args(theirs_args)
        .arg("-i")
        .arg(file)
        .output()
        .expect("running trace-cmd report");
    assert!(theirs.status.success(), "trace-cmd report failed");
    // Lines pmlab knows differ are warned about; none here.
    assert!(
        ours.stderr.is_empty(),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&ours.stderr)
    );
    let (a, b) = (normalized(&ours.stdout), normalized(&theirs.stdout));
    assert_eq!(
        a.len(),
        b.len(),
        "{} {ours_args:?}: pmlab printed {} lines, trace-cmd {}",
        file.display(),
        a.len(),
        b.len()
    );
    let mut differ = 0;
    for (n, (x, y)) in a.iter().zip(b.iter()).enumerate() {
        if x != y {
            assert!(
                MAY_DIFFER.contains(&kind(y)),
                "{} {ours_args:?}: line {} differs (pmlab first, trace-cmd second)\n{x}\n{y}",
                file.display(),
                n + 1
            );
            differ += 1;
        }
    }
    if differ > 0 {
        eprintln!("{}: {differ} lines of known kinds differ", file.display());
    }
    a.len()
}

/// The formatted view, then the flags, of one file.
fn check(file: &Path) -> usize {
    let n = assert_formatted(file, &[], &[]);
    assert!(n > 1, "{}: no events", file.display());
    n
}

it_test!(
    formatted_dump_equals_trace_cmd_report_on_every_fixture_v6_and_v7,
    fixture
);
fn formatted_dump_equals_trace_cmd_report_on_every_fixture_v6_and_v7() {
    assert!(has_trace_cmd(), "trace-cmd is needed for the oracle test");
    let tmp = tempfile::tempdir().unwrap();
    for f in fixture_dats() {
        let n = check(&f);
        let v7 = tmp.path().join(f.file_name().unwrap());
        let v7 = convert_v7(&f, "zstd", &v7).expect("trace-cmd convert to v7 zstd");
        assert_eq!(check(&v7), n, "{}: v7 differs from v6", f.display());
    }
}

it_test!(flags_print_what_trace_cmds_flags_print, fixture);
fn flags_print_what_trace_cmds_flags_print() {
    assert!(has_trace_cmd(), "trace-cmd is needed for the oracle test");
    for name in [
        "haltpoll_pipe_200us.dat",
        "lisa_rtapp.dat",
        "trappy_trace.dat",
    ] {
        let f = crate::util::fixtures().join(name);
        assert_formatted(&f, &["-R"], &["-R"]);
        assert_formatted(&f, &["-t"], &["-t"]);
        assert_formatted(&f, &["-R", "-t"], &["-R", "-t"]);
        assert_formatted(&f, &["--cpu", "1"], &["--cpu", "1"]);
        assert_formatted(&f, &["--cpu", "0,2-3"], &["--cpu", "0,2-3"]);
    }
    let f = crate::util::fixtures().join("haltpoll_pipe_off.dat");
    let n = assert_formatted(
        &f,
        &["-e", "sched_switch", "-e", "power:cpu_idle"],
        &["-F", "sched_switch,cpu_idle"],
    );
    let all = assert_formatted(&f, &[], &[]);
    assert!(1 < n && n < all, "-e selected {n} of {all} lines");
}

it_test!(bad_flags_fail_clearly_and_print_nothing);
fn bad_flags_fail_clearly_and_print_nothing() {
    let f = crate::util::fixtures().join("trappy_idle.dat");
    let out = pmlab()
        .args(["dump", "-e", "nosuch"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "printed before failing");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no event \"nosuch\"") && err.contains("sched:sched_switch"),
        "{err}"
    );
    for bad in ["x", "1-", "3-1"] {
        let out = pmlab()
            .args(["dump", "--cpu", bad])
            .arg(&f)
            .output()
            .unwrap();
        assert!(!out.status.success(), "--cpu {bad} accepted");
        assert!(out.stdout.is_empty());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--cpu"), "--cpu {bad}: {err}");
    }
    let out = pmlab()
        .args(["dump", "--json", "-R"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(!out.status.success(), "--json with -R accepted");
}

// ---------------------------------------------------------------------------
// Fresh recordings of this machine.

/// Why this machine cannot record, if it cannot.
fn cannot_record() -> Option<&'static str> {
    if !is_root() {
        return Some("not root");
    }
    if !has_trace_cmd() {
        return Some("no trace-cmd");
    }
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let tracefs = mounts.lines().any(|l| l.contains(" tracefs "))
        || Path::new("/sys/kernel/tracing").is_dir();
    (!tracefs).then_some("no tracefs")
}

/// `pmlab record ARGS -o FILE`: Ok(file), or Err(stderr) when pmlab refused or failed.
fn record(dir: &Path, name: &str, args: &[&str]) -> Result<PathBuf, String> {
    let file = dir.join(name);
    let out = pmlab()
        .args(["record", "-o"])
        .arg(&file)
        .args(args)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(file)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn live(name: &str, args: &[&str]) {
    if let Some(why) = cannot_record() {
        skip!("{why}");
    }
    let _m = machine();
    let tmp = tempfile::tempdir().unwrap();
    let file = record(tmp.path(), name, args).unwrap_or_else(|e| panic!("{name}: {e}"));
    check(&file);
}

it_test!(live_pipe_with_the_default_events);
fn live_pipe_with_the_default_events() {
    let bin = assert_cmd::cargo::cargo_bin("pmlab");
    live(
        "pipe.dat",
        &[
            "--",
            bin.to_str().unwrap(),
            "run",
            "pipe",
            "--loops",
            "5000",
        ],
    );
}

it_test!(live_hotplug_cycle);
fn live_hotplug_cycle() {
    let _cpu1 = Cpu1Online;
    let online = "/sys/devices/system/cpu/cpu1/online";
    if is_root() && !Path::new(online).exists() {
        skip!("cpu1 is not hot-pluggable");
    }
    let cmd = format!("echo 0 > {online}; echo 1 > {online}");
    live("hotplug.dat", &["--", "sh", "-c", &cmd]);
}

it_test!(live_three_seconds_idle);
fn live_three_seconds_idle() {
    live("idle.dat", &["--duration", "3s"]);
}

it_test!(live_sched_waking_with_stacktrace);
fn live_sched_waking_with_stacktrace() {
    live(
        "stack.dat",
        &[
            "-e",
            "sched:sched_waking",
            "--stacktrace",
            "--",
            "sleep",
            "0.2",
        ],
    );
}

fn instances() -> usize {
    std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// A tracer over a short command. Where the kernel runs it, the recording is checked; where it
/// refuses (this guest: EPERM on the function tracer, no function_graph), the refusal is: a
/// clear error naming the tracer, no file, and the instance made for it removed. Either way a
/// line says which path ran; the records' lines are checked on a fixture below.
fn live_tracer(tracer: &str) {
    if let Some(why) = cannot_record() {
        skip!("{why}");
    }
    let _m = machine();
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "--tracer",
        tracer,
        "-e",
        "sched:sched_switch",
        "--buffer-kb",
        "8192",
        "--",
        "sleep",
        "0.01",
    ];
    let before = instances();
    let name = format!("{tracer}.dat");
    match record(tmp.path(), &name, &args) {
        Ok(file) => {
            check(&file);
            eprintln!("{tracer}: recorded and checked");
        }
        Err(e) => {
            let available = std::fs::read_to_string("/sys/kernel/tracing/available_tracers")
                .unwrap_or_default();
            let offered = available.split_whitespace().any(|t| t == tracer);
            if offered {
                assert!(
                    e.contains(&format!("writing \"{tracer}\"")) && e.contains("current_tracer"),
                    "the refusal does not say which write failed: {e}"
                );
            } else {
                assert!(
                    e.contains(&format!("tracer \"{tracer}\" is not available")),
                    "the refusal does not name the missing tracer: {e}"
                );
            }
            assert!(!tmp.path().join(&name).exists(), "a file was left: {e}");
            assert_eq!(before, instances(), "an instance was left behind: {e}");
            eprintln!("{tracer}: refused by this kernel, cleanly: {}", e.trim());
        }
    }
}

it_test!(live_function_tracer);
/// The function tracer, recorded or refused cleanly.
fn live_function_tracer() {
    live_tracer("function");
}

it_test!(live_function_graph_tracer);
/// The function_graph tracer, recorded or refused cleanly.
fn live_function_graph_tracer() {
    live_tracer("function_graph");
}

it_test!(an_unknown_tracer_is_refused_before_anything_changes);
fn an_unknown_tracer_is_refused_before_anything_changes() {
    if let Some(why) = cannot_record() {
        skip!("{why}");
    }
    let _m = machine();
    let tmp = tempfile::tempdir().unwrap();
    let before = instances();
    let err = record(tmp.path(), "x.dat", &["--tracer", "nosuch", "--", "true"])
        .expect_err("an unknown tracer was accepted");
    assert!(
        err.contains("tracer \"nosuch\" is not available") && err.contains("nop"),
        "{err}"
    );
    assert_eq!(before, instances(), "an instance was left behind");
    assert!(!tmp.path().join("x.dat").exists());
}

// ---------------------------------------------------------------------------
// The function and function_graph tracers' lines, on a fixture whose records are rewritten
// into ftrace events (this guest's kernel runs neither tracer; the file's own ftrace formats
// and kallsyms say what the records mean).

/// Little-endian `v` into `b` at `off`, `size` bytes.
fn put(b: &mut [u8], off: usize, size: usize, v: u64) {
    b[off..off + size].copy_from_slice(&v.to_le_bytes()[..size]);
}

it_test!(function_and_function_graph_lines_equal_trace_cmds);
fn function_and_function_graph_lines_equal_trace_cmds() {
    assert!(has_trace_cmd(), "trace-cmd is needed for the oracle test");
    // An uncompressed little-endian v6 file: records lie in the file as decoded.
    let src = crate::util::fixtures().join("lisa_sched_load.dat");
    let trace = pmlab_trace::open(&src).unwrap();
    let mut bytes = std::fs::read(&src).unwrap();
    let fmt = |name: &str| {
        trace
            .formats
            .values()
            .find(|f| f.system == "ftrace" && f.name == name)
            .unwrap_or_else(|| panic!("no ftrace:{name} format in the fixture"))
            .clone()
    };
    let (func, entry, exit) = (
        fmt("function"),
        fmt("funcgraph_entry"),
        fmt("funcgraph_exit"),
    );
    let off = |f: &pmlab_trace::EventFormat, n: &str| {
        let x = f
            .field(n)
            .unwrap_or_else(|| panic!("{} has no {n}", f.name));
        (x.offset as usize, x.size as usize)
    };
    let need = |f: &pmlab_trace::EventFormat| {
        f.fields
            .iter()
            .map(|x| (x.offset + x.size) as usize)
            .max()
            .unwrap()
    };
    // Symbols to call: some with an offset into them, one address no symbol covers.
    let syms: Vec<u64> = trace
        .kallsyms
        .iter()
        .filter(|(a, _)| *a > 0)
        .step_by(997)
        .take(40)
        .map(|(a, _)| a)
        .collect();
    assert!(syms.len() >= 20, "the fixture has too few symbols");
    let addr = |k: usize| match k % 5 {
        4 => 0x10,
        3 => syms[k % syms.len()] + 4,
        _ => syms[k % syms.len()],
    };
    let ev = &trace.events;
    let (mut leaves, mut nested, mut functions) = (0, 0, 0);
    let mut i = 0;
    let mut k = 0usize;
    while i + 1 < ev.len() {
        let (o, l) = (ev.off(i), ev.rec_len(i));
        assert_eq!(
            &bytes[o..o + l],
            ev.record(i),
            "record {i} is not at its offset"
        );
        let (o2, l2) = (ev.off(i + 1), ev.rec_len(i + 1));
        let id = |f: &pmlab_trace::EventFormat| u64::from(f.id);
        // As the tracer writes them: an entry and the exit after it on one CPU.
        let same_cpu = ev.cpu[i] == ev.cpu[i + 1];
        match k % 4 {
            // a leaf: an entry and its exit next, same pid and function
            0 | 1 if l >= need(&entry) && l2 >= need(&exit) && same_cpu => {
                let (f, d) = (addr(k), (k % 7) as u64);
                let r = &mut bytes[o..o + l];
                put(r, 0, 2, id(&entry));
                put(r, off(&entry, "func").0, off(&entry, "func").1, f);
                put(r, off(&entry, "depth").0, off(&entry, "depth").1, d);
                let pid = u64::from(ev.pid[i] as u32);
                let r = &mut bytes[o2..o2 + l2];
                put(r, 0, 2, id(&exit));
                put(r, 4, 4, pid);
                put(r, off(&exit, "func").0, off(&exit, "func").1, f);
                put(r, off(&exit, "depth").0, off(&exit, "depth").1, d);
                let call = 1_000_000 + k as u64;
                // durations across the overhead marks: none, +, !, #, $
                let dur = [512, 15_000, 150_000, 1_500_000, 1_500_000_000][k % 5] + k as u64;
                put(r, off(&exit, "calltime").0, 8, call);
                put(r, off(&exit, "rettime").0, 8, call + dur);
                leaves += 1;
                i += 2;
            }
            // a nested entry (the next record is something else), then a lone exit
            2 if l >= need(&entry) && l2 >= need(&exit) && same_cpu => {
                let r = &mut bytes[o..o + l];
                put(r, 0, 2, id(&entry));
                put(r, off(&entry, "func").0, off(&entry, "func").1, addr(k));
                put(r, off(&entry, "depth").0, off(&entry, "depth").1, 3);
                let r = &mut bytes[o2..o2 + l2];
                put(r, 0, 2, id(&exit));
                put(r, off(&exit, "func").0, off(&exit, "func").1, addr(k + 1));
                put(r, off(&exit, "depth").0, off(&exit, "depth").1, 2);
                put(r, off(&exit, "calltime").0, 8, 5);
                put(r, off(&exit, "rettime").0, 8, 5 + 42_042);
                nested += 1;
                i += 2;
            }
            3 if l >= off(&func, "parent_ip").0 + 8 => {
                let r = &mut bytes[o..o + l];
                put(r, 0, 2, id(&func));
                put(r, off(&func, "ip").0, 8, addr(k));
                put(r, off(&func, "parent_ip").0, 8, addr(k + 2));
                functions += 1;
                i += 1;
            }
            _ => i += 1,
        }
        k += 1;
    }
    assert!(
        leaves > 50 && nested > 20 && functions > 20,
        "{leaves} {nested} {functions}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("ftrace.dat");
    if let Ok(keep) = std::env::var("PMLAB_KEEP_FTRACE_DAT") {
        std::fs::write(keep, &bytes).unwrap();
    }
    std::fs::write(&f, &bytes).unwrap();
    let n = check(&f);
    // the leaves' exits are not lines of their own
    assert_eq!(n, ev.len() + 1 - leaves);
}

// Flag tables whose values name enum constants the file's formats do not define: ext4's
// `{ (1 << ES_WRITTEN_B), "W" }`. libtraceevent evaluates the name inside the shift as 0
// (`strtoll` of a name), so every entry is 1 and `0x11` prints `W0x10`. The fixture has
// the ext4 formats but no ext4 events: records are rewritten into them.

/// Replaces event `name`'s print format in a trace file's bytes by `ours`, padded with
/// blanks to the same length (so no offset in the file moves); returns the old one.
fn replace_print_fmt(bytes: &mut [u8], name: &str, ours: &str) -> Vec<u8> {
    let head = format!("name: {name}\n");
    let at = bytes
        .windows(head.len())
        .position(|w| w == head.as_bytes())
        .unwrap_or_else(|| panic!("no {name} format"));
    let pf = at
        + bytes[at..]
            .windows(11)
            .position(|w| w == b"print fmt: ")
            .unwrap()
        + 11;
    let end = pf + bytes[pf..].iter().position(|&b| b == b'\n').unwrap();
    assert!(
        ours.len() <= end - pf,
        "{name}: the replacement is longer than the format"
    );
    let was = bytes[pf..end].to_vec();
    bytes[pf..end].fill(b' ');
    bytes[pf..pf + ours.len()].copy_from_slice(ours.as_bytes());
    was
}

it_test!(flag_tables_naming_undefined_enums_print_what_trace_cmd_prints);
fn flag_tables_naming_undefined_enums_print_what_trace_cmd_prints() {
    assert!(has_trace_cmd(), "trace-cmd is needed for the oracle test");
    let src = crate::util::fixtures().join("lisa_sched_load.dat");
    let trace = pmlab_trace::open(&src).unwrap();
    let mut bytes = std::fs::read(&src).unwrap();
    let fmt = |name: &str| {
        trace
            .formats
            .values()
            .find(|f| f.system == "ext4" && f.name == name)
            .unwrap_or_else(|| panic!("no ext4:{name} format in the fixture"))
            .clone()
    };
    let (lookup, insert) = (
        fmt("ext4_es_lookup_extent_exit"),
        fmt("ext4_es_insert_extent"),
    );
    assert!(lookup.print_fmt.contains("(1 << ES_WRITTEN_B)"));
    // A third event's print format is replaced (same length, padded with blanks) by one
    // with the other cases of libtraceevent's evaluation: a name alone (-1), a known name,
    // a cast alone, a negative value, a saturated number, right-grouped `-` and `+`.
    let cache = fmt("ext4_es_cache_extent");
    let ours = r#""%s|%s|%s", __print_flags(REC->status, "", { (1 << ES_WRITTEN_B), "W" }, { 0x20 | (FOO + 2), "F" }), __print_flags(REC->status, ",", { NAME, "n" }, { (u8)0x102, "T" }, { ~3, "N" }, { 0xfffffffffffffffff >> 60, "B" }), __print_symbolic(REC->status, { -2, "g" }, { TIMER_SOFTIRQ, "t" }, { 1 - 2 + 4, "3" }, { 16 - 1 - 1, "x" })"#;
    let was = replace_print_fmt(&mut bytes, "ext4_es_cache_extent", ours);
    assert_eq!(was, cache.print_fmt.as_bytes());
    let at = |f: &pmlab_trace::EventFormat, n: &str| {
        let x = f
            .field(n)
            .unwrap_or_else(|| panic!("{} has no {n}", f.name));
        (x.offset as usize, x.size as usize)
    };
    let ev = &trace.events;
    let mut rewritten = 0;
    for i in (0..ev.len()).step_by(7) {
        let (o, l) = (ev.off(i), ev.rec_len(i));
        if l < 48 {
            continue;
        }
        let k = rewritten as u64;
        let f = [&lookup, &insert, &cache][k as usize % 3];
        let r = &mut bytes[o..o + l];
        put(r, 0, 2, u64::from(f.id));
        put(r, at(f, "dev").0, 4, (8 << 20) | (k % 16));
        put(r, at(f, "ino").0, 8, 1000 + k);
        put(r, at(f, "lblk").0, 4, k * 3);
        put(r, at(f, "len").0, 4, 1 + k % 5);
        put(r, at(f, "pblk").0, 8, (1 << 20) | k);
        // every bit pattern of the byte's low half and high half, zero included
        let status = [
            0, 0x11, 0x10, 0x1f, 0xff, 0x01, 0x80, 0x07, 0x23, 0x0e, 0x02,
        ];
        put(r, at(f, "status").0, 1, status[k as usize % status.len()]);
        if f.name == "ext4_es_lookup_extent_exit" {
            put(r, at(f, "found").0, 4, u64::from(!k.is_multiple_of(3)));
        }
        rewritten += 1;
    }
    assert!(rewritten > 100, "{rewritten} records rewritten");
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("ext4.dat");
    std::fs::write(&f, &bytes).unwrap();
    let n = check(&f);
    assert_eq!(n, ev.len() + 1);
    // the line the issue quotes, with the value it quotes
    let out = pmlab().arg("dump").arg(&f).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("ext4_es_insert_extent:") && l.ends_with("status W0x10")),
        "no `status W0x10` line"
    );
    // the replaced format parses (in both) and its cases print
    let cached: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("ext4_es_cache_extent:"))
        .collect();
    assert!(cached.len() > 30 && cached.iter().all(|l| !l.contains("FAILED")));
    for want in [
        "W0x10|0x11|0x11",
        "W0x6|B|0x7",
        "WF|0x23|0x23",
        "|n|0x0",
        "0x10|0x10|x",
        "W|0x1|t",
    ] {
        assert!(
            cached.iter().any(|l| l.ends_with(want)),
            "no line ends with {want}"
        );
    }
}

// Names and constants outside flag tables, as libtraceevent evaluates them: a name is its
// kernel symbol's address when evaluated (`schedule`), 0 inside an operation on two atoms
// (consolidated when parsed), character constants are strtoull of their text, `%p` of a
// name or string is a number, `^` of two constants is folded and of a field is 0; and its
// grouping of chained `?:` and of `* -x`. Print formats of lisa_sched_load.dat's events are
// replaced (same length, blank-padded).

it_test!(names_and_constants_print_what_trace_cmd_prints);
fn names_and_constants_print_what_trace_cmd_prints() {
    if !has_trace_cmd() {
        skip!("trace-cmd is not installed: it is this test's reference");
    }
    let src = crate::util::fixtures().join("lisa_sched_load.dat");
    let mut bytes = std::fs::read(&src).unwrap();
    let formats: [(&str, &str); 5] = [
        (
            "sched_load_se",
            r#""%llx %llx %llx %llx %d %d %d", schedule, (schedule + 4), (1 + schedule) + 0, -schedule, '1', 'a', 3 ^ 5"#,
        ),
        (
            "sched_load_cfs_rq",
            r#""%d %p %pS %p %d %d", REC->cpu ^ 5, UNDEF, schedule, "str", "12", REC->cpu == 'a'"#,
        ),
        (
            "cpu_idle",
            r#""%s %d", REC->state ? NAME : "lit", sizeof(REC->state) + UNDEF"#,
        ),
        (
            "cpu_frequency",
            r#""%d|%d", REC->cpu_id == 1 ? 5 : REC->cpu_id == 2 ? 6 : 7, REC->cpu_id * -1"#,
        ),
        (
            "sched_migrate_task",
            r#""%s|%s", __print_hex(REC->comm, 2 + 2), __print_symbolic(REC->pid, { schedule, "S" }, { 1 + N, "1" })"#,
        ),
    ];
    for (name, ours) in formats {
        replace_print_fmt(&mut bytes, name, ours);
    }
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("names.dat");
    std::fs::write(&f, &bytes).unwrap();
    check(&f);
    let out = pmlab().arg("dump").arg(&f).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = |event: &str| {
        text.lines()
            .find(|l| l.contains(&format!(" {event}: ")))
            .unwrap_or_else(|| panic!("no {event} line"))
            .split_once(&format!(" {event}: "))
            .unwrap()
            .1
            .trim()
            .to_string()
    };
    // schedule is at ffff0000087a8c28 in the file's kallsyms
    assert_eq!(
        line("sched_load_se"),
        "ffff0000087a8c28 ffff0000087a8c2c 1 fffff78573d8 1 0 6"
    );
    assert!(line("sched_load_cfs_rq").ends_with(" (nil) schedule+0x0 (nil) 12 0"));
    assert_eq!(line("cpu_idle").split(' ').nth(1), Some("4"));
    // ((cpu_id == 1 ? 5 : cpu_id) == 2) ? 6 : 7 and (cpu_id * 0) - 1: CPU 1 gets 7 (C
    // would say 5), CPU 2 gets 6; -1 for all
    let freq: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" cpu_frequency: "))
        .collect();
    assert!(freq.iter().any(|l| l.ends_with(" 7|-1")), "{freq:?}");
    assert!(freq.iter().any(|l| l.ends_with(" 6|-1")), "{freq:?}");
    assert!(!freq.iter().any(|l| l.ends_with(" 5|-1")), "{freq:?}");
}

// Events trace-cmd's plugins print with their own code (kmem's kmalloc) or whose print
// format calls a function only a plugin defines (jbd2's jiffies_to_msecs): pmlab warns
// once per event type on stderr, and every other line still equals trace-cmd's.

it_test!(events_only_trace_cmds_plugins_print_are_warned_about_once_per_type);
fn events_only_trace_cmds_plugins_print_are_warned_about_once_per_type() {
    assert!(has_trace_cmd(), "trace-cmd is needed for the oracle test");
    let src = crate::util::fixtures().join("lisa_sched_load.dat");
    let trace = pmlab_trace::open(&src).unwrap();
    let mut bytes = std::fs::read(&src).unwrap();
    let id = |sys: &str, name: &str| {
        trace
            .formats
            .values()
            .find(|f| f.system == sys && f.name == name)
            .unwrap_or_else(|| panic!("no {sys}:{name} format in the fixture"))
            .id
    };
    let ids = [id("kmem", "kmalloc"), id("jbd2", "jbd2_run_stats")];
    let ev = &trace.events;
    let mut rewritten = 0;
    for i in (0..ev.len()).step_by(11) {
        let (o, l) = (ev.off(i), ev.rec_len(i));
        if l >= 64 {
            put(&mut bytes[o..o + l], 0, 2, u64::from(ids[rewritten % 2]));
            rewritten += 1;
        }
    }
    assert!(rewritten > 20, "{rewritten} records rewritten");
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("plugins.dat");
    std::fs::write(&f, &bytes).unwrap();
    let ours = pmlab().arg("dump").arg(&f).output().unwrap();
    assert!(ours.status.success());
    let err = String::from_utf8_lossy(&ours.stderr);
    let warned: Vec<&str> = err.lines().collect();
    assert_eq!(warned.len(), 2, "{err}");
    assert!(warned[0].contains("jbd2:jbd2_run_stats") && warned[0].contains("jiffies_to_msecs()"));
    assert!(warned[1].contains("kmem:kmalloc") && warned[1].contains("kmem plugin"));
    let theirs = Command::new("trace-cmd")
        .args(["report", "-i"])
        .arg(&f)
        .output()
        .unwrap();
    let (a, b) = (normalized(&ours.stdout), normalized(&theirs.stdout));
    assert_eq!(a.len(), b.len());
    let mut differ = 0;
    for (x, y) in a.iter().zip(&b) {
        if x != y {
            assert!(
                matches!(kind(y), "kmalloc" | "jbd2_run_stats"),
                "a line of an unwarned kind differs:\n{x}\n{y}"
            );
            differ += 1;
        }
    }
    assert!(
        differ > 0,
        "the warned kinds print as trace-cmd: drop the warning"
    );
    // The raw view: trace-cmd's plugins do not change it, nothing to warn about.
    let raw = pmlab().args(["dump", "-R"]).arg(&f).output().unwrap();
    assert!(
        raw.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&raw.stderr)
    );
}
