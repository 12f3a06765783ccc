//! Needless wakeups and idle-balance kicks against an independent computation from
//! `trace-cmd report -R -t` text: every idle exit of every fixture and of new recordings
//! here (pipe, 3 s idle, a timer-heavy workload) is classified the same way (a task ran,
//! which and for how long, or handlers only); the nohz kicks pmlab counts per CPU equal
//! trace-cmd's `csd_function_entry` lines with `nohz_csd_func`, live under a CPU-bound loop
//! pinned to CPU 0; the needless side metric of a traced compare is stored and shown.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use pmlab_analysis::kicks::{self, BalanceKind};
use pmlab_analysis::wakeups::{self, Afterwards, CauseKind};
use pmlab_analysis::{idle, Options};

use crate::util::{fixtures, is_root, pmlab};

/// One line of `trace-cmd report -R -t`.
struct Line {
    pid: i32,
    cpu: u32,
    ts: u64,
    event: String,
    fields: String,
}

impl Line {
    fn field(&self, name: &str) -> Option<&str> {
        let key = format!("{name}=");
        self.fields
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key.as_str()))
    }
    fn num(&self, name: &str) -> Option<i64> {
        self.field(name).and_then(|v| v.parse().ok())
    }
}

/// Parse trace-cmd's text: `COMM-PID [CPU] SECS.NANOS: EVENT: FIELDS`.
fn parse(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    for l in text.lines() {
        let Some(open) = l.find(" [") else { continue };
        let Some(close) = l[open..].find("] ").map(|c| c + open) else {
            continue;
        };
        let Ok(cpu) = l[open + 2..close].trim().parse::<u32>() else {
            continue;
        };
        let head = l[..open].trim();
        let Some(pid) = head.rsplit('-').next().and_then(|p| p.parse().ok()) else {
            continue;
        };
        let rest = l[close + 1..].trim_start();
        let Some((ts, rest)) = rest.split_once(": ") else {
            continue;
        };
        let Some((secs, nanos)) = ts.split_once('.') else {
            continue;
        };
        assert_eq!(nanos.len(), 9, "trace-cmd -t prints ns: {l}");
        let ts = secs.parse::<u64>().unwrap() * 1_000_000_000 + nanos.parse::<u64>().unwrap();
        let (event, fields) = rest.split_once(':').unwrap_or((rest, ""));
        out.push(Line {
            pid,
            cpu,
            ts,
            event: event.trim().to_string(),
            fields: fields.trim().to_string(),
        });
    }
    out
}

fn trace_cmd_text(file: &Path) -> String {
    String::from_utf8_lossy(&crate::util::trace_cmd_report(&["-R", "-t"], file).stdout).into_owned()
}

/// What followed one exit, by the independent computation.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Then {
    Needless,
    Task(i32, u64),
    Unfinished,
}

/// Idle exits of the CPUs that log `cpu_idle`, by (cpu, exit time): a period opens at an
/// enter (an enter while open closes the open one there), closes at an exit (the first exit
/// of a CPU without an enter opens at the trace's first event); after an exit, a task ran
/// if an event logged on that CPU before the next enter has a non-zero pid or switches to
/// one; tasks ran from their first sign until a switch to pid 0 or the next enter.
fn independent(lines: &[Line]) -> BTreeMap<(u32, u64), Then> {
    let t0 = lines.first().map_or(0, |l| l.ts);
    let t1 = lines.last().map_or(0, |l| l.ts);
    // (start, end) per cpu_id
    let mut periods: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    let mut open: BTreeMap<u32, u64> = BTreeMap::new();
    let mut seen: BTreeSet<u32> = BTreeSet::new();
    for l in lines.iter().filter(|l| l.event == "cpu_idle") {
        let (Some(state), Some(cpu)) = (l.num("state"), l.num("cpu_id")) else {
            continue;
        };
        let cpu = cpu as u32;
        let ps = periods.entry(cpu).or_default();
        if state == 4294967295 {
            if let Some(s) = open.remove(&cpu) {
                ps.push((s, l.ts));
            } else if seen.insert(cpu) {
                ps.push((t0, l.ts));
            }
        } else {
            if let Some(s) = open.remove(&cpu) {
                ps.push((s, l.ts));
            }
            open.insert(cpu, l.ts);
            seen.insert(cpu);
        }
    }
    let mut out = BTreeMap::new();
    for (&cpu, ps) in &periods {
        let mine: Vec<&Line> = lines.iter().filter(|l| l.cpu == cpu).collect();
        for (k, &(_, end)) in ps.iter().enumerate() {
            // The next period's start: a closed one after it, or the open one at the end.
            let next = ps
                .get(k + 1)
                .map(|p| p.0)
                .or_else(|| open.get(&cpu).copied());
            let upto = next.unwrap_or(u64::MAX);
            let (mut first, mut run, mut since) = (None, 0u64, None::<u64>);
            for l in mine.iter().filter(|l| l.ts >= end && l.ts < upto) {
                if l.pid != 0 {
                    first.get_or_insert(l.pid);
                    since.get_or_insert(l.ts);
                }
                if l.event == "sched_switch" {
                    let nx = l.num("next_pid").unwrap() as i32;
                    if nx != 0 {
                        first.get_or_insert(nx);
                        since.get_or_insert(l.ts);
                    } else if let Some(s) = since.take() {
                        run += l.ts - s;
                    }
                }
            }
            if let Some(s) = since {
                run += next.unwrap_or(t1) - s;
            }
            let then = match (first, next) {
                (Some(p), _) => Then::Task(p, run),
                (None, Some(_)) => Then::Needless,
                (None, None) => Then::Unfinished,
            };
            out.insert((cpu, end), then);
        }
    }
    out
}

/// Exits by (cpu, exit time), the CPUs pmlab cannot decide, and its exits as given.
type Ours = (
    BTreeMap<(u32, u64), Then>,
    BTreeSet<u32>,
    Vec<wakeups::Exit>,
);

/// pmlab's classification of every exit, and the CPUs where it says it cannot decide.
fn ours(file: &Path) -> Ours {
    let trace = pmlab_trace::open(file).unwrap();
    let opts = Options::default();
    let Ok(p) = idle::periods(&trace, &opts) else {
        return Default::default();
    };
    let Ok(exits) = wakeups::exits(&trace, &opts, &p) else {
        return Default::default();
    };
    let mut map = BTreeMap::new();
    let mut undecided = BTreeSet::new();
    for e in &exits {
        let then = match &e.afterwards {
            Afterwards::Needless => Then::Needless,
            Afterwards::Task { pid, run_ns, .. } => Then::Task(*pid, *run_ns),
            Afterwards::Unfinished => Then::Unfinished,
            Afterwards::Undecidable => {
                undecided.insert(e.cpu);
                continue;
            }
        };
        assert!(
            map.insert((e.cpu, e.exit), then).is_none(),
            "two exits at one time"
        );
    }
    (map, undecided, exits)
}

/// Walk every exit of `file`: pmlab's classification equals the independent one; CPUs
/// without cpu_idle are said to be undecidable. Returns (exits, needless).
fn check_file(file: &Path) -> (usize, usize) {
    let lines = parse(&trace_cmd_text(file));
    let want = independent(&lines);
    let (got, undecided, exits) = ours(file);
    let logs_idle: BTreeSet<u32> = want.keys().map(|k| k.0).collect();
    for c in &undecided {
        assert!(
            !logs_idle.contains(c),
            "{}: CPU {c} logs cpu_idle yet pmlab cannot decide",
            file.display()
        );
    }
    let exit_cpus: BTreeSet<u32> = exits.iter().map(|e| e.cpu).collect();
    for c in exit_cpus.difference(&logs_idle) {
        assert!(
            undecided.contains(c),
            "{}: CPU {c} has no cpu_idle, so needless exits there are invisible; pmlab must say so",
            file.display()
        );
    }
    let mut diff = Vec::new();
    for (k, v) in &want {
        if got.get(k) != Some(v) {
            diff.push(format!("{k:?}: trace-cmd {v:?}, pmlab {:?}", got.get(k)));
        }
    }
    for k in got.keys().filter(|k| !want.contains_key(k)) {
        diff.push(format!("{k:?}: only pmlab has this exit"));
    }
    assert!(
        diff.is_empty(),
        "{}: {} of {} exits differ:\n{}",
        file.display(),
        diff.len(),
        want.len(),
        diff[..diff.len().min(20)].join("\n")
    );
    let needless = want.values().filter(|t| **t == Then::Needless).count();
    eprintln!(
        "{}: {} exits walked, {needless} needless, CPUs undecidable: {undecided:?}",
        file.display(),
        want.len()
    );
    (want.len(), needless)
}

it_test!(needless_exits_of_every_fixture_match_trace_cmd);
fn needless_exits_of_every_fixture_match_trace_cmd() {
    let mut files: Vec<_> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "dat"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{files:?}");
    let mut walked = 0;
    for f in &files {
        walked += check_file(f).0;
    }
    assert!(walked > 1000, "only {walked} exits in the fixtures");
}

/// `pmlab record -o FILE ARGS...` (the command's output is discarded).
fn record(file: &Path, args: &[&str]) {
    let out = pmlab()
        .args(["record", "-o"])
        .arg(file)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pmlab record {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn live() -> bool {
    if !is_root() || !Path::new("/sys/kernel/tracing/events/power/cpu_idle").exists() {
        skip!("needs root and tracefs with power:cpu_idle");
    }
    true
}

it_test!(needless_exits_of_new_recordings_match_trace_cmd);
fn needless_exits_of_new_recordings_match_trace_cmd() {
    if !live() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let me = env!("CARGO_BIN_EXE_pmlab");
    let pipe = dir.path().join("pipe.dat");
    record(
        &pipe,
        &["--", me, "run", "pipe", "--loops", "20000", "--cpus", "0,1"],
    );
    check_file(&pipe);
    let idle = dir.path().join("idle.dat");
    let ((), others) = crate::util::others_share(|| record(&idle, &["--duration", "3s"]));
    let (exits, needless) = check_file(&idle);
    if exits == 0 {
        // Other work kept every CPU busy (or the kernel logged no cpu_idle): nothing to
        // classify here, and the rest would show nothing either.
        skip!("no cpu_idle exit in 3 s of recording: the CPUs never idled");
    }
    if needless == 0 && others > 0.05 {
        // A CPU busy with other work seldom idles long enough for a tick to find it so.
        skip!(
            "3 s idle: {exits} exits, none needless, while other processes used {:.0}% of \
             the CPUs",
            others * 100.0
        );
    }
    assert!(needless > 0, "3 s idle: {exits} exits, none needless");
    // Idle ticks that run nothing are needless.
    let (_, _, ex) = ours(&idle);
    let ticks = ex
        .iter()
        .filter(|e| e.cause.kind == CauseKind::Timer && e.afterwards == Afterwards::Needless)
        .count();
    assert!(ticks > 0, "no needless timer exit in 3 s of idle");
    let timers = dir.path().join("wakeup.dat");
    record(
        &timers,
        &[
            "--",
            me,
            "run",
            "wakeup",
            "--interval",
            "1ms",
            "--duration",
            "2s",
        ],
    );
    // Every exit equals trace-cmd's (check_file); how many there are follows what else
    // keeps the CPUs busy (1 ms timers on an otherwise idle CPU give ~1000/s).
    let (exits, needless) = check_file(&timers);
    eprintln!("1 ms timers for 2 s: {exits} exits, {needless} needless");
}

/// Per CPU, trace-cmd's `csd_function_entry` lines whose func is nohz_csd_func.
fn trace_cmd_kicks(file: &Path) -> BTreeMap<u32, u64> {
    let mut m = BTreeMap::new();
    for l in parse(&trace_cmd_text(file)) {
        if l.event == "csd_function_entry" && l.field("func") == Some("nohz_csd_func") {
            *m.entry(l.cpu).or_default() += 1;
        }
    }
    m
}

fn our_kicks(file: &Path) -> kicks::KicksReport {
    let trace = pmlab_trace::open(file).unwrap();
    kicks::analyze(&trace, &Options::default()).expect("kicks analysis")
}

it_test!(kicks_of_a_fixture_match_trace_cmd);
fn kicks_of_a_fixture_match_trace_cmd() {
    let f = fixtures().join("haltpoll_pipe_off.dat");
    let want = trace_cmd_kicks(&f);
    let r = our_kicks(&f);
    assert!(want.values().sum::<u64>() > 100, "{want:?}");
    for (cpu, n) in &want {
        assert_eq!(r.kicks_on(*cpu), *n, "CPU {cpu}");
    }
    // Each kick but one the trace cut short has its outcome; every one has its sender here.
    let ks: Vec<_> = r
        .kicks
        .iter()
        .filter(|k| k.kind == BalanceKind::Kick)
        .collect();
    let open = ks.iter().filter(|k| k.then_ran.is_none()).count();
    assert!(open <= want.len(), "{open} kicks without an outcome");
    // nohz_csd_func raises SCHED_SOFTIRQ only on a CPU still idle (here some kicks share
    // their IPI with a remote wakeup, which makes the CPU busy): those move nothing.
    assert!(ks.iter().any(|k| k.softirq), "no kick ran SCHED_SOFTIRQ");
    assert!(ks.iter().all(|k| k.softirq || k.migrated == 0));
    let known = ks.iter().filter(|k| k.kicker_cpu.is_some()).count();
    assert_eq!(known, ks.len(), "kicks without a kicker");
}

it_test!(kicks_live_under_a_loop_pinned_to_cpu0);
fn kicks_live_under_a_loop_pinned_to_cpu0() {
    if !live() {
        return;
    }
    if std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|s| s.trim() == "0")
        .unwrap_or(true)
    {
        skip!("needs two online CPUs");
    }
    if !Path::new("/sys/kernel/tracing/events/csd/csd_function_entry").exists() {
        skip!("this kernel has no csd:csd_function_entry tracepoint");
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("spin.dat");
    record(
        &f,
        &[
            "--",
            "sh",
            "-c",
            "taskset -c 0 timeout 5 sh -c 'while :; do :; done'; exit 0",
        ],
    );
    let want = trace_cmd_kicks(&f);
    let r = our_kicks(&f);
    let tc = want.get(&1).copied().unwrap_or(0);
    if tc == 0 {
        skip!("no nohz idle-balance kick reached CPU 1 in 5 s on this kernel");
    }
    let got = r.kicks_on(1);
    assert!(
        (got as f64 - tc as f64).abs() <= tc as f64 * 0.01,
        "CPU 1: pmlab {got} kicks, trace-cmd {tc}"
    );
    let on1: Vec<_> = r
        .kicks
        .iter()
        .filter(|k| k.kind == BalanceKind::Kick && k.cpu == 1)
        .collect();
    let open = on1.iter().filter(|k| k.then_ran.is_none()).count();
    assert!(open <= 1, "{open} kicks on CPU 1 without an outcome");
    let c1 = r.cpus.iter().find(|c| c.cpu == 1).unwrap();
    assert_eq!(c1.migrated + c1.moved_nothing, c1.kicks);
    eprintln!(
        "CPU 1: {got} kicks ({:.1}/s), {} moved nothing, {} then ran a task; trace-cmd {tc}",
        c1.kicks_per_s, c1.moved_nothing, c1.then_ran
    );
}

it_test!(traced_compare_has_the_needless_side_metric);
fn traced_compare_has_the_needless_side_metric() {
    if !live() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pmlab.db");
    let out = pmlab()
        .args(["compare", "--trace", "--max-runs", "2", "--seed", "3", "-q"])
        .args(["--side", "trace.wakeups.needless*", "--db"])
        .arg(&db)
        .args(["idle", "--duration", "1s"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    let out = pmlab()
        .args(["results", "--db"])
        .arg(&db)
        .args(["export", "latest", "--format", "json"])
        .output()
        .unwrap();
    let e: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = e["runs"].as_array().unwrap();
    let measured: Vec<_> = runs.iter().filter(|r| r["warmup"] != true).collect();
    assert!(!measured.is_empty());
    // The metric exists only where needless exits can be seen: CPUs that logged cpu_idle.
    let decidable = |r: &serde_json::Value| {
        let t = pmlab_trace::open(Path::new(r["trace_path"].as_str().unwrap())).unwrap();
        idle::periods(&t, &Options::default())
            .is_ok_and(|p| p.source.values().any(|s| *s == idle::Source::CpuIdle))
    };
    let measured: Vec<_> = measured.into_iter().filter(|r| decidable(r)).collect();
    if measured.is_empty() {
        skip!("no CPU logged cpu_idle in the traced runs (the CPUs never idled)");
    }
    assert!(
        table.contains("trace.wakeups.needless.per_s"),
        "not in the table:\n{table}"
    );
    for r in measured {
        let m: Vec<_> = r["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["name"] == "trace.wakeups.needless.per_s")
            .collect();
        assert!(!m.is_empty(), "run without the needless metric: {r}");
        assert!(m.iter().all(|m| m["value"].as_f64().unwrap() >= 0.0));
    }
}
