//! pmlab-top through its public API: the interval engine on a fixture trace fed in chunks
//! that do not line up with the intervals (each interval equals the analyses over its
//! window of the whole trace; the intervals' exits and idle time add up to the whole
//! trace's), a backwards interval refused, and the JSON object of an interval.

#[macro_use]
#[path = "../../../tests/support/harness.rs"]
mod harness;

use pmlab_analysis::all::Report;
use pmlab_analysis::idle::Source;
use pmlab_analysis::Options;
use pmlab_top::engine::{analyze_window, Engine, EngineError};
use pmlab_trace::page::PageLayout;
use pmlab_trace::{Events, Trace};
use std::path::PathBuf;

fn fixture(name: &str) -> Trace {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name);
    pmlab_trace::open(&p).unwrap()
}

/// Events `a..b` of a trace, as a batch of decoded events.
fn chunk(t: &Trace, a: usize, b: usize) -> Events {
    let mut e = Events::default();
    let mut raw = Vec::new();
    for i in a..b {
        let r = t.events.record(i);
        e.push(
            t.events.ts[i],
            t.events.cpu[i],
            t.events.pid[i],
            t.events.id[i],
            raw.len(),
            r.len(),
        );
        raw.extend_from_slice(r);
    }
    e.raw = raw.into();
    e
}

/// A trace's formats, symbols and names without its events.
fn skeleton(t: &Trace) -> Trace {
    let mut s = t.clone();
    s.events = Events::default();
    s
}

/// The counts that must agree: per CPU exits, by kind, needless, idle time per state, kicks.
fn counts(r: &Report) -> serde_json::Value {
    let idle = r.idle.as_ref().and_then(|o| o.done()).unwrap();
    let w = r.wakeups.as_ref().and_then(|o| o.done()).unwrap();
    let k = r.kicks.as_ref().and_then(|o| o.done()).unwrap();
    serde_json::json!({
        "idle": idle.cpus.iter().map(|c| (c.cpu, c.idle_ns, c.states.iter().map(|s| (s.state, s.time_ns)).collect::<Vec<_>>())).collect::<Vec<_>>(),
        "exits": w.cpus.iter().map(|c| (c.cpu, c.exits, &c.by_kind, c.needless.map(|n| (n.exits, n.needless)))).collect::<Vec<_>>(),
        "causes": w.causes.iter().map(|c| (c.cpu, &c.cause.detail, c.exits, c.needless.needless)).collect::<Vec<_>>(),
        "kicks": k.cpus.iter().map(|c| (c.cpu, c.kicks, c.tick_balances)).collect::<Vec<_>>(),
    })
}

it_test!(intervals_equal_the_analyses_of_their_windows);
/// Feeds haltpoll_pipe_off.dat in chunks cut 3 ms past each interval's end (so every
/// interval gets events of the next, which must wait), and checks each interval against
/// `analyze_window` on the whole trace, then the sums of exits and idle time.
fn intervals_equal_the_analyses_of_their_windows() {
    for name in ["haltpoll_pipe_off.dat", "haltpoll_pipe_200us.dat"] {
        let t = fixture(name);
        let opts = Options::default();
        let (t0, t1) = (t.events.ts[0], *t.events.ts.last().unwrap() + 1);
        let n = 5u64;
        let edges: Vec<u64> = (0..=n).map(|k| t0 + (t1 - t0) * k / n).collect();
        let mut engine = Engine::new(skeleton(&t), PageLayout::native(), opts.clone(), t0);
        let mut fed = 0;
        // Exits of CPUs with cpu_idle, and of idle-task CPUs.
        let (mut exits, mut idle_ns) = ([0u64; 2], 0u64);
        for w in edges.windows(2) {
            let cut = t.events.ts.partition_point(|&ts| ts < w[1] + 3_000_000);
            let iv = engine.push_events(chunk(&t, fed, cut), w[1]).unwrap();
            fed = cut;
            assert_eq!((iv.from_ns, iv.to_ns), (w[0], w[1]));
            assert_eq!(iv.late, 0);
            let whole = analyze_window(&t, w[0], w[1], &opts);
            assert_eq!(iv.events, t.window(w[0], w[1]).events.len());
            assert_eq!(
                counts(&iv.report),
                counts(&whole),
                "{name} interval {}",
                iv.index
            );
            let wk = iv.report.wakeups.as_ref().and_then(|o| o.done()).unwrap();
            for c in &wk.cpus {
                exits[usize::from(c.source != Source::CpuIdle)] += c.exits;
            }
            let id = iv.report.idle.as_ref().and_then(|o| o.done()).unwrap();
            idle_ns += id
                .cpus
                .iter()
                .filter(|c| c.source == Source::CpuIdle)
                .map(|c| c.idle_ns)
                .sum::<u64>();
        }
        let all = analyze_window(&t, t0, t1, &opts);
        let w = all.wakeups.as_ref().and_then(|o| o.done()).unwrap();
        let mut whole_exits = [0u64; 2];
        for c in &w.cpus {
            whole_exits[usize::from(c.source != Source::CpuIdle)] += c.exits;
        }
        let whole_idle: u64 = all
            .idle
            .as_ref()
            .and_then(|o| o.done())
            .unwrap()
            .cpus
            .iter()
            .filter(|c| c.source == Source::CpuIdle)
            .map(|c| c.idle_ns)
            .sum();
        assert!(whole_exits[0] > 1000, "{name}: {whole_exits:?} exits");
        // An idle period cut by an interval edge is two periods, and idle time adds up;
        // its `cpu_idle` exit lies in one interval. On an idle-task CPU (no `cpu_idle`) a
        // period that began before the interval has no start there and its end is not
        // counted as an exit (nor its time before the edge): at most one exit an edge goes
        // uncounted. cpu_idle CPUs' idle time adds up to the ns.
        assert_eq!(exits[0], whole_exits[0], "{name}: cpu_idle exits");
        let uncounted = whole_exits[1] - exits[1];
        assert!(
            uncounted < n,
            "{name}: {uncounted} idle-task exits lost at {} edges",
            n - 1
        );
        assert!(whole_idle > 0, "{name}");
        assert_eq!(idle_ns, whole_idle, "{name}: cpu_idle CPUs' idle time");
    }
}

it_test!(an_interval_must_end_after_it_began);
/// A backwards or empty interval is refused with the typed error, and the engine goes on.
fn an_interval_must_end_after_it_began() {
    let t = fixture("haltpoll_pipe_off.dat");
    let t0 = t.events.ts[0];
    let mut engine = Engine::new(skeleton(&t), PageLayout::native(), Options::default(), t0);
    let err = engine.push_events(Events::default(), t0).unwrap_err();
    assert!(matches!(err, EngineError::Backwards { .. }), "{err}");
    let iv = engine
        .push_events(chunk(&t, 0, 100), t0 + 1_000_000)
        .unwrap();
    assert_eq!(iv.index, 0);
    assert!(iv.events > 0);
}

fn main() -> std::process::ExitCode {
    harness::main(vec![harness::source_check(
        "harness::every_test_is_registered",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests"),
    )])
}
