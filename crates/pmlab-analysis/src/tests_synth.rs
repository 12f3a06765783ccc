//! Unit tests of the analyses on small hand-built traces with known answers.

use crate::all::{self, Extras};
use crate::energy::{self, Model, ModelError};
use crate::idle::{self, Source};
use crate::testutil::{s, Builder, Std, Ty, EXIT, V};
use crate::{freq, wakeups, Options, StateInfo};
use std::collections::BTreeMap;

fn marker(b: &mut Builder, ts: u64, cpu: u32) {
    // any event: fixes the trace span
    let id = b.event("ftrace", &format!("mark{ts}"), &[]);
    b.push(ts, cpu, 1, id, &[]);
}

fn base() -> (Builder, Std) {
    let mut b = Builder::new(2);
    let e = b.std_events();
    (b, e)
}

#[test]
fn two_overlapping_idle_periods() {
    let (mut b, e) = base();
    marker(&mut b, 0, 0);
    e.idle(&mut b, 10, 0, 1);
    e.idle(&mut b, 50, 0, EXIT);
    e.idle(&mut b, 30, 1, 2);
    e.idle(&mut b, 70, 1, EXIT);
    marker(&mut b, 100, 1);
    let t = b.build();
    let r = idle::analyze(&t, &Options::default()).unwrap();
    assert_eq!(r.span_ns, 100);
    assert_eq!(r.cpus[0].idle_ns, 40);
    assert_eq!(r.cpus[1].idle_ns, 40);
    assert_eq!(r.cpus[0].states[0].state, 1);
    assert_eq!(r.cpus[1].states[0].residency.p50_ns, 40);
    assert_eq!(r.all_idle_ns, 20);
    assert!((r.all_idle_share - 0.2).abs() < 1e-12);
    assert_eq!(r.cpus[0].source, Source::CpuIdle);
}

#[test]
fn missing_exit_at_trace_end_and_exit_before_any_enter() {
    let (mut b, e) = base();
    marker(&mut b, 0, 0);
    e.idle(&mut b, 5, 0, EXIT); // idle since before the trace
    b.push(5, 0, 0, e.timer_entry, &[V::I(236)]);
    e.idle(&mut b, 80, 0, 1); // never exits
    marker(&mut b, 100, 0);
    let t = b.build();
    let p = idle::periods(&t, &Options::default()).unwrap();
    let ps = &p.by_cpu[&0];
    assert_eq!(ps.len(), 2);
    assert!(ps[0].open_start && ps[0].len() == 5);
    assert!(ps[1].open_end && ps[1].len() == 20);
    let r = idle::report(&t, &Options::default(), &p);
    assert_eq!(r.cpus[0].idle_ns, 25);
    let st1 = r.cpus[0].states.iter().find(|s| s.state == 1).unwrap();
    assert_eq!(
        (st1.entries, st1.residency.n),
        (1, 0),
        "a truncated period is no residency sample"
    );
    let w = wakeups::analyze(&t, &Options::default()).unwrap();
    assert_eq!(w.cpus[0].exits, 1, "the open period has no exit");
}

#[test]
fn idle_task_fallback_where_cpu_idle_is_missing() {
    let (mut b, e) = base();
    marker(&mut b, 0, 1);
    e.idle(&mut b, 10, 0, 1);
    e.idle(&mut b, 20, 0, EXIT);
    e.switch(&mut b, 30, 1, (42, "work", 1), (0, "swapper/1"));
    e.switch(&mut b, 60, 1, (0, "swapper/1", 0), (42, "work"));
    marker(&mut b, 100, 0);
    let t = b.build();
    let r = idle::analyze(&t, &Options::default()).unwrap();
    assert_eq!(r.cpus[1].source, Source::IdleTask);
    assert_eq!(r.cpus[1].idle_ns, 30);
    assert_eq!(r.cpus[1].states[0].name, "idle-task");
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("CPU 1") && n.contains("idle-task")),
        "{:?}",
        r.notes
    );
    assert_eq!(r.all_idle_ns, 0);
}

#[test]
fn cpu_idle_logged_by_another_cpu_still_leaves_the_logger_its_fallback() {
    // CPU1 logs CPU0's cpu_idle events (cpu_id 0) and none of its own: CPU0 gets its
    // cpu_idle period, CPU1 its idle-task period.
    let (mut b, e) = base();
    marker(&mut b, 0, 0);
    b.push(10, 1, 0, e.cpu_idle, &[V::U(1), V::U(0)]);
    b.push(20, 1, 0, e.cpu_idle, &[V::U(EXIT), V::U(0)]);
    e.switch(&mut b, 30, 1, (42, "work", 1), (0, "swapper/1"));
    e.switch(&mut b, 60, 1, (0, "swapper/1", 0), (42, "work"));
    marker(&mut b, 100, 0);
    let t = b.build();
    let r = idle::analyze(&t, &Options::default()).unwrap();
    assert_eq!((r.cpus[0].source, r.cpus[0].idle_ns), (Source::CpuIdle, 10));
    assert_eq!(
        (r.cpus[1].source, r.cpus[1].idle_ns),
        (Source::IdleTask, 30)
    );
}

#[test]
fn idle_task_period_ends_when_a_task_runs_without_a_switch_out_of_idle() {
    // The kernel of the project machine logs no sched_switch out of CPU1's idle task.
    let (mut b, e) = base();
    marker(&mut b, 0, 0);
    e.idle(&mut b, 5, 0, 1);
    e.switch(&mut b, 10, 1, (42, "work", 1), (0, "swapper/1"));
    b.push(30, 1, 0, e.csfs_entry, &[V::I(251)]); // the IPI, taken in the idle task
    e.waking(&mut b, 35, 1, 42, (7, "peer"), 0); // the woken task runs: no switch to it
    e.switch(&mut b, 50, 1, (42, "work", 1), (0, "swapper/1"));
    e.waking(&mut b, 70, 1, 42, (7, "peer"), 0); // no idle-task event before it
    e.switch(&mut b, 80, 1, (42, "work", 1), (0, "swapper/1"));
    marker(&mut b, 100, 0);
    let t = b.build();
    let p = idle::periods(&t, &Options::default()).unwrap();
    let spans: Vec<(u64, u64)> = p.by_cpu[&1].iter().map(|q| (q.start, q.end)).collect();
    assert_eq!(spans, [(10, 30), (50, 70), (80, 100)]);
    let r = idle::report(&t, &Options::default(), &p);
    assert_eq!(r.cpus[1].idle_ns, 60);
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("CPU 1: 2 of 3")
                && n.contains("no sched_switch out of the idle task")),
        "{:?}",
        r.notes
    );
    // With the switch logged, the rule changes nothing.
    let (mut b, e) = base();
    marker(&mut b, 0, 0);
    e.idle(&mut b, 5, 0, 1);
    e.switch(&mut b, 10, 1, (42, "work", 1), (0, "swapper/1"));
    b.push(30, 1, 0, e.csfs_entry, &[V::I(251)]);
    e.switch(&mut b, 33, 1, (0, "swapper/1", 0), (42, "work"));
    e.waking(&mut b, 35, 1, 42, (7, "peer"), 0);
    marker(&mut b, 100, 0);
    let t = b.build();
    let p = idle::periods(&t, &Options::default()).unwrap();
    let spans: Vec<(u64, u64)> = p.by_cpu[&1].iter().map(|q| (q.start, q.end)).collect();
    assert_eq!(spans, [(10, 33)]);
    assert!(
        !p.notes.iter().any(|n| n.contains("no sched_switch out")),
        "{:?}",
        p.notes
    );
}

#[test]
fn sched_wait_ends_at_the_tasks_first_event_when_no_switch_runs_it() {
    let (mut b, e) = base();
    marker(&mut b, 0, 0);
    e.switch(&mut b, 5, 1, (42, "work", 1), (0, "swapper/1"));
    // 42 is woken onto CPU1 at 10 and logs its first event at 16, with no switch to it.
    e.waking(&mut b, 10, 0, 7, (42, "work"), 1);
    e.waking(&mut b, 16, 1, 42, (7, "peer"), 0);
    // 7 is woken at 20 and switched in at 23: the switch ends that wait.
    e.switch(&mut b, 18, 0, (7, "peer", 1), (0, "swapper/0"));
    e.waking(&mut b, 20, 1, 42, (7, "peer"), 0);
    e.switch(&mut b, 23, 0, (0, "swapper/0", 0), (7, "peer"));
    e.waking(&mut b, 25, 0, 7, (9, "x"), 0);
    // A wakeup of a task that is running is no wait: 7 switches out before it runs again.
    e.waking(&mut b, 30, 1, 42, (7, "peer"), 0);
    e.switch(&mut b, 32, 0, (7, "peer", 1), (0, "swapper/0"));
    e.switch(&mut b, 90, 0, (0, "swapper/0", 0), (7, "peer"));
    marker(&mut b, 100, 0);
    let t = b.build();
    let r = crate::sched::analyze(&t, &Options::default()).unwrap();
    let w = r.overall.wakeup;
    assert_eq!((w.n, w.min_ns, w.max_ns), (2, 3, 6), "{w:?}");
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with("1 waits end at the task's first event")),
        "{:?}",
        r.notes
    );
}

fn wake_trace() -> pmlab_trace::Trace {
    let (mut b, e) = base();
    b.sym(0x1000, "ttwu_queue_wakelist");
    b.sym(0x2000, "generic_smp_call_function_single_interrupt");
    b.sym(0x3000, "tick_nohz_handler");
    b.sym(0x4000, "zzz_end");
    b.comm(42, "waker");
    let send = |b: &mut Builder, ts| {
        b.push(
            ts,
            0,
            42,
            e.send_cpu,
            &[V::U(1), V::U(0x1010), V::U(0x2000)],
        );
    };
    marker(&mut b, 0, 0);
    // 1. x86 order: the IPI entry comes before the cpu_idle exit
    e.idle(&mut b, 10, 1, 1);
    e.waking(&mut b, 18, 0, 42, (77, "sleeper"), 1);
    send(&mut b, 19);
    b.push(20, 1, 0, e.csfs_entry, &[V::I(251)]);
    e.idle(&mut b, 21, 1, EXIT);
    e.switch(&mut b, 22, 1, (0, "swapper/1", 0), (77, "sleeper"));
    e.switch(&mut b, 30, 1, (77, "sleeper", 1), (0, "swapper/1"));
    // 2. the IPI entry comes after the exit
    e.idle(&mut b, 40, 1, 1);
    send(&mut b, 45);
    e.idle(&mut b, 50, 1, EXIT);
    b.push(51, 1, 0, e.csfs_entry, &[V::I(251)]);
    e.switch(&mut b, 55, 1, (0, "swapper/1", 0), (77, "sleeper"));
    e.switch(&mut b, 58, 1, (77, "sleeper", 1), (0, "swapper/1"));
    // 3. the tick
    e.idle(&mut b, 60, 1, 1);
    b.push(70, 1, 0, e.timer_entry, &[V::I(236)]);
    b.push(70, 1, 0, e.hrtimer, &[V::U(1), V::I(70), V::U(0x3000)]);
    e.idle(&mut b, 71, 1, EXIT);
    // 4. a polling wakeup without IPI
    e.idle(&mut b, 80, 1, 0);
    b.push(85, 0, 42, e.no_ipi, &[V::I(1)]);
    e.idle(&mut b, 86, 1, EXIT);
    e.switch(&mut b, 87, 1, (0, "swapper/1", 0), (77, "sleeper"));
    // 5. an IRQ after the next switch is not this period's cause
    e.idle(&mut b, 100, 1, 1);
    e.idle(&mut b, 110, 1, EXIT);
    e.switch(&mut b, 111, 1, (0, "swapper/1", 0), (77, "sleeper"));
    b.push(112, 1, 0, e.irq, &[V::I(11), s("virtio0")]);
    // 6. a device IRQ
    e.idle(&mut b, 120, 1, 1);
    b.push(125, 1, 0, e.irq, &[V::I(11), s("virtio0")]);
    e.idle(&mut b, 126, 1, EXIT);
    marker(&mut b, 1_000_000_000, 0);
    b.build()
}

#[test]
fn wakeup_causes_either_order() {
    let t = wake_trace();
    let w = wakeups::analyze(&t, &Options::default()).unwrap();
    let cpu1 = w.cpus.iter().find(|c| c.cpu == 1).unwrap();
    assert_eq!(cpu1.exits, 6);
    assert_eq!(cpu1.by_kind.get("ipi"), Some(&2), "{:?}", w.causes);
    assert_eq!(cpu1.by_kind.get("timer"), Some(&1));
    assert_eq!(cpu1.by_kind.get("polling"), Some(&1));
    assert_eq!(cpu1.by_kind.get("irq"), Some(&1));
    assert_eq!(cpu1.by_kind.get("unknown"), Some(&1));
    let ipi = w
        .causes
        .iter()
        .find(|r| r.cpu == 1 && r.cause.kind == "ipi")
        .unwrap();
    assert_eq!(
        ipi.cause.detail,
        "call_function_single: remote wakeup (ttwu_queue_wakelist)"
    );
    assert_eq!(ipi.exits, 2);
    assert_eq!(ipi.origin, Some(("waker:42".into(), 2)));
    assert!((w.share(1, "ipi", "remote wakeup") - 2.0 / 6.0).abs() < 1e-12);
    let timer = w
        .causes
        .iter()
        .find(|r| r.cpu == 1 && r.cause.kind == "timer")
        .unwrap();
    assert_eq!(timer.cause.detail, "tick_nohz_handler");
    let irq = w
        .causes
        .iter()
        .find(|r| r.cpu == 1 && r.cause.kind == "irq")
        .unwrap();
    assert_eq!(irq.cause.detail, "virtio0");
    assert_eq!(w.wakers[0].waker, "waker:42");
    assert_eq!(w.wakers[0].wakee, "sleeper:77");
}

#[test]
fn frequency_change_in_the_middle_of_an_idle_period() {
    let (mut b, e) = base();
    let f = |b: &mut Builder, ts, khz| b.push(ts, 0, 0, e.cpu_frequency, &[V::U(khz), V::U(0)]);
    f(&mut b, 0, 1_000_000);
    e.idle(&mut b, 10, 0, 0);
    f(&mut b, 20, 2_000_000);
    e.idle(&mut b, 30, 0, EXIT);
    marker(&mut b, 40, 0);
    let t = b.build();
    let fr = freq::analyze(&t, &Options::default()).unwrap();
    let c = &fr.cpus[0];
    assert_eq!(
        c.residency
            .iter()
            .map(|r| (r.khz, r.time_ns))
            .collect::<Vec<_>>(),
        [(1_000_000, 20), (2_000_000, 20)]
    );
    assert_eq!(c.avg_khz, 1_500_000.0);
    let m = Model::from_toml(
        r#"[[domain]]
cpus = "0"
wakeup_uj = 1.0
idle_mw = { "0" = 10.0 }
opp = [ { khz = 1000000, mw = 100.0 }, { khz = 2000000, mw = 300.0 } ]"#,
        "m.toml",
    )
    .unwrap();
    let p = idle::periods(&t, &Options::default()).unwrap();
    let r = energy::analyze(&t, &Options::default(), &p, &m).unwrap();
    let c = &r.cpus[0];
    // active 10 ns at 1 GHz (100 mW) and 10 ns at 2 GHz (300 mW); idle 20 ns at 10 mW
    assert!(
        (c.active_mj - (100.0 * 10.0 + 300.0 * 10.0) / 1e9).abs() < 1e-15,
        "{c:?}"
    );
    assert!((c.idle_mj - 10.0 * 20.0 / 1e9).abs() < 1e-15);
    assert!((c.wakeup_mj - 1e-3).abs() < 1e-15);
}

#[test]
fn energy_model_refusals() {
    let bad = r#"[[domain]]
name = "big"
cpus = "0-1"
opp = [ { khz = 500000, mw = 100.0 }, { khz = 900000, mw = 90.0 } ]"#;
    let e = Model::from_toml(bad, "m.toml").unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("\"big\"") && msg.contains("900000 kHz") && msg.contains("does not rise"),
        "{msg}"
    );
    let e = Model::from_toml("[[domain]]\ncpus = 3\n", "m.toml").unwrap_err();
    assert!(matches!(e, ModelError::Parse { .. }), "{e}");
    assert!(e.to_string().starts_with("m.toml:"), "{e}");
    let e = Model::from_toml("[[domain]]\ncpus = \"0-x\"\n", "m.toml").unwrap_err();
    assert!(e.to_string().contains("0-x"), "{e}");
    let e = Model::from_toml("domain = []\n", "m.toml").unwrap_err();
    assert!(e.to_string().contains("no [[domain]]"), "{e}");
}

#[test]
fn lisa_plat_info_imports() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/lisa_sched_load_plat_info.yml");
    let m = Model::load(&p).unwrap();
    assert_eq!(m.domain.len(), 6);
    let d0 = m.domain.iter().find(|d| d.cpus == "0").unwrap();
    assert_eq!(d0.opp[0].khz, 450000);
    assert_eq!(d0.opp[0].mw, 42.0);
    assert_eq!(d0.idle_mw.get("WFI"), Some(&0.0));
    assert_eq!(d0.idle_mw.get("2"), Some(&0.0));
}

#[test]
fn missing_events_are_named_and_other_analyses_run() {
    let (mut b, e) = base();
    e.waking(&mut b, 1, 0, 1, (2, "x"), 0);
    e.switch(&mut b, 2, 0, (1, "a", 0), (2, "x"));
    let mut t = b.build();
    t.formats
        .retain(|_, f| f.name == "sched_waking" || f.name == "sched_switch");
    let r = all::run(&t, &Options::default(), &[], Extras::default());
    let fr = r.freq.as_ref().unwrap();
    let all::Outcome::Missing { missing } = fr else {
        panic!("freq should be missing")
    };
    assert!(
        missing
            .to_string()
            .contains("pmlab record -e power:cpu_frequency"),
        "{missing}"
    );
    assert!(matches!(r.haltpoll, Some(all::Outcome::Missing { .. })));
    assert!(matches!(r.sched, Some(all::Outcome::Done(_))));
    assert!(
        matches!(r.idle, Some(all::Outcome::Done(_))),
        "sched_switch gives the idle-task fallback"
    );
    let w = r.wakeups.as_ref().unwrap();
    let all::Outcome::Missing { missing } = w else {
        panic!("wakeups should be missing")
    };
    assert!(
        missing.events.iter().any(|e| e.contains("irq_vectors")),
        "{missing:?}"
    );
}

#[test]
fn governor_misses_from_events_and_from_target_residencies() {
    let (mut b, e) = base();
    let miss = b.event(
        "power",
        "cpu_idle_miss",
        &[
            ("cpu_id", crate::testutil::Ty::U32),
            ("state", crate::testutil::Ty::U32),
            ("below", crate::testutil::Ty::U8),
        ],
    );
    marker(&mut b, 0, 0);
    e.idle(&mut b, 10, 0, 2);
    e.idle(&mut b, 11, 0, EXIT); // 1 ns in state 2: too deep
    b.push(11, 0, 0, miss, &[V::U(0), V::U(2), V::U(0)]);
    e.idle(&mut b, 20, 0, 1);
    e.idle(&mut b, 1020, 0, EXIT); // 1000 ns in state 1: state 2 would have paid off
    marker(&mut b, 2000, 0);
    let t = b.build();
    let r = idle::analyze(&t, &Options::default()).unwrap();
    assert_eq!(r.misses_from, "cpu_idle_miss");
    let s2 = r.cpus[0].states.iter().find(|s| s.state == 2).unwrap();
    assert_eq!((s2.above, s2.below), (Some(1), Some(0)));
    let mut t2 = t.clone();
    t2.formats.retain(|_, f| f.name != "cpu_idle_miss");
    let mut states = BTreeMap::new();
    states.insert(
        1,
        StateInfo {
            name: "C1".into(),
            target_residency_ns: Some(2),
        },
    );
    states.insert(
        2,
        StateInfo {
            name: "C6".into(),
            target_residency_ns: Some(500),
        },
    );
    let opts = Options {
        states: Some(states),
        ..Default::default()
    };
    let r = idle::analyze(&t2, &opts).unwrap();
    assert_eq!(r.misses_from, "target residencies");
    let c6 = r.cpus[0].states.iter().find(|s| s.name == "C6").unwrap();
    let c1 = r.cpus[0].states.iter().find(|s| s.name == "C1").unwrap();
    assert_eq!((c6.above, c6.below), (Some(1), Some(0)));
    assert_eq!((c1.above, c1.below), (Some(0), Some(1)));
}

#[test]
fn cpus_option_selects() {
    let t = wake_trace();
    let opts = Options {
        cpus: Some([1].into_iter().collect()),
        ..Default::default()
    };
    let r = idle::analyze(&t, &opts).unwrap();
    assert_eq!(r.cpus.iter().map(|c| c.cpu).collect::<Vec<_>>(), [1]);
}

/// Needless wakeups: an idle tick after which nothing ran is needless (with the idle it cut
/// short and the busy time until the next idle entry); an IPI after which a task ran names
/// it and its run time; an exit the trace ends after is unfinished; a CPU with idle-task
/// periods only (no cpu_idle) is undecidable, and its row has no needless count.
#[test]
fn needless_exits_and_what_ran_after_the_others() {
    let (mut b, e) = base();
    marker(&mut b, 0, 0);
    e.idle(&mut b, 10, 0, 1);
    b.push(49, 0, 0, e.timer_entry, &[V::I(236)]);
    e.idle(&mut b, 50, 0, EXIT);
    e.idle(&mut b, 60, 0, 1);
    b.push(99, 0, 0, e.csfs_entry, &[V::I(251)]);
    e.idle(&mut b, 100, 0, EXIT);
    e.switch(&mut b, 101, 0, (0, "swapper/0", 0), (7, "worker"));
    e.switch(&mut b, 120, 0, (7, "worker", 1), (0, "swapper/0"));
    e.idle(&mut b, 125, 0, 1);
    b.push(199, 0, 0, e.timer_entry, &[V::I(236)]);
    e.idle(&mut b, 200, 0, EXIT);
    // CPU 1: idle-task periods only
    e.switch(&mut b, 20, 1, (5, "a", 1), (0, "swapper/1"));
    b.push(70, 1, 0, e.timer_entry, &[V::I(236)]);
    e.switch(&mut b, 80, 1, (0, "swapper/1", 0), (5, "a"));
    marker(&mut b, 300, 1);
    let t = b.build();
    let opts = Options::default();
    let p = idle::periods(&t, &opts).unwrap();
    let ex = wakeups::exits(&t, &opts, &p).unwrap();
    let on0: Vec<_> = ex.iter().filter(|x| x.cpu == 0).collect();
    assert_eq!(on0.len(), 3);
    assert_eq!(on0[0].afterwards, wakeups::Afterwards::Needless);
    assert_eq!(on0[0].cause.kind, wakeups::CauseKind::Timer);
    assert_eq!(
        on0[1].afterwards,
        wakeups::Afterwards::Task {
            task: "<...>:7".into(),
            pid: 7,
            run_ns: 19
        }
    );
    assert_eq!(on0[2].afterwards, wakeups::Afterwards::Unfinished);
    assert!(ex
        .iter()
        .filter(|x| x.cpu == 1)
        .all(|x| x.afterwards == wakeups::Afterwards::Undecidable));
    let w = wakeups::analyze(&t, &opts).unwrap();
    let c0 = w.cpus.iter().find(|c| c.cpu == 0).unwrap();
    let n = c0.needless.unwrap();
    assert_eq!(
        (n.exits, n.needless, n.cut_idle_ns, n.busy_ns),
        (2, 1, 40, 10)
    );
    assert!((c0.needless_per_s.unwrap() - 1.0 / 300e-9).abs() < 1.0);
    assert!(w
        .cpus
        .iter()
        .find(|c| c.cpu == 1)
        .unwrap()
        .needless
        .is_none());
    assert!(
        w.notes.iter().any(|n| n.contains("not decidable")),
        "{:?}",
        w.notes
    );
    let timer = w
        .causes
        .iter()
        .find(|r| r.cpu == 0 && r.cause.kind == wakeups::CauseKind::Timer)
        .unwrap();
    assert_eq!(timer.needless.needless, 1);
    let after: Vec<_> = w.after.iter().filter(|r| r.cpu == 0).collect();
    assert_eq!(after.len(), 2, "{after:?}");
    assert!(after
        .iter()
        .any(|r| r.task.is_none() && r.exits == 1 && r.busy_ns == 10));
}

/// A kick: `nohz_csd_func` (by kallsyms) queued from CPU 0, then SCHED_SOFTIRQ on CPU 1 with
/// a migration in it, then a task runs; a second kick moves nothing and the CPU idles again;
/// a SCHED_SOFTIRQ after a tick with no kick is a tick balance.
#[test]
fn kicks_with_kicker_migration_and_outcome() {
    use crate::kicks::{self, BalanceKind, Via};
    let (mut b, e) = base();
    let entry = b.event(
        "csd",
        "csd_function_entry",
        &[("func", Ty::U64), ("csd", Ty::U64)],
    );
    let queue = b.event(
        "csd",
        "csd_queue_cpu",
        &[
            ("cpu", Ty::U32),
            ("callsite", Ty::U64),
            ("func", Ty::U64),
            ("csd", Ty::U64),
        ],
    );
    let si = b.event("irq", "softirq_entry", &[("vec", Ty::U32)]);
    let so = b.event("irq", "softirq_exit", &[("vec", Ty::U32)]);
    let mig = b.event(
        "sched",
        "sched_migrate_task",
        &[
            ("comm", Ty::Comm),
            ("pid", Ty::I32),
            ("prio", Ty::I32),
            ("orig_cpu", Ty::I32),
            ("dest_cpu", Ty::I32),
        ],
    );
    b.sym(0x1000, "nohz_csd_func");
    b.sym(0x2000, "sched_ttwu_pending");
    marker(&mut b, 0, 0);
    // kick 1
    b.push(10, 0, 9, queue, &[V::U(1), V::U(0), V::U(0x1000), V::U(0)]);
    b.push(11, 0, 9, e.send_cpu, &[V::U(1), V::U(0), V::U(0)]);
    b.push(20, 1, 0, e.csfs_entry, &[V::I(251)]);
    b.push(21, 1, 0, entry, &[V::U(0x1000), V::U(0)]);
    b.push(22, 1, 0, si, &[V::U(7)]);
    b.push(
        23,
        1,
        0,
        mig,
        &[s("t"), V::I(42), V::I(120), V::I(0), V::I(1)],
    );
    b.push(24, 1, 0, so, &[V::U(7)]);
    e.switch(&mut b, 25, 1, (0, "swapper/1", 0), (42, "t"));
    // another CSD is not a kick
    b.push(30, 1, 42, entry, &[V::U(0x2000), V::U(0)]);
    e.switch(&mut b, 40, 1, (42, "t", 1), (0, "swapper/1"));
    // kick 2: moves nothing, CPU idles again (next interrupt on the idle task)
    b.push(50, 0, 9, queue, &[V::U(1), V::U(0), V::U(0x1000), V::U(0)]);
    b.push(51, 0, 9, e.no_ipi, &[V::I(1)]);
    b.push(60, 1, 0, entry, &[V::U(0x1000), V::U(0)]);
    b.push(61, 1, 0, si, &[V::U(7)]);
    b.push(62, 1, 0, so, &[V::U(7)]);
    b.push(80, 1, 0, e.timer_entry, &[V::I(236)]);
    // a tick balance on CPU 0
    b.push(90, 0, 9, e.timer_entry, &[V::I(236)]);
    b.push(91, 0, 9, si, &[V::U(7)]);
    b.push(92, 0, 9, so, &[V::U(7)]);
    marker(&mut b, 100, 0);
    b.comm(9, "kicker");
    let t = b.build();
    let r = kicks::analyze(&t, &Options::default()).unwrap();
    let ks: Vec<_> = r
        .kicks
        .iter()
        .filter(|k| k.kind == BalanceKind::Kick)
        .collect();
    assert_eq!(ks.len(), 2);
    assert_eq!(ks[0].kicker.as_deref(), Some("kicker:9"));
    assert_eq!((ks[0].kicker_cpu, ks[0].via), (Some(0), Some(Via::Ipi)));
    assert_eq!((ks[0].migrated, ks[0].then_ran), (1, Some(true)));
    assert_eq!(ks[1].via, Some(Via::NoIpi));
    assert_eq!((ks[1].migrated, ks[1].then_ran), (0, Some(false)));
    let c1 = r.cpus.iter().find(|c| c.cpu == 1).unwrap();
    assert_eq!(
        (
            c1.kicks,
            c1.migrated,
            c1.moved_nothing,
            c1.then_ran,
            c1.then_idle
        ),
        (2, 1, 1, 1, 1)
    );
    let c0 = r.cpus.iter().find(|c| c.cpu == 0).unwrap();
    assert_eq!((c0.kicks, c0.tick_balances), (0, 1));
    assert_eq!(r.kickers[0].kicks, 2);
}

/// Time on each CPU from switches: before a CPU's first switch its previous task ran since
/// the trace began, after its last switch the next task runs until the trace ends; the idle
/// task and CPUs not wanted are left out; a task renamed by exec keeps its last name.
#[test]
fn runtime_per_task_and_cpu_from_switches() {
    let (mut b, e) = base();
    marker(&mut b, 0, 0);
    e.switch(&mut b, 10, 0, (7, "cc1", 0), (0, "swapper/0"));
    e.switch(&mut b, 30, 0, (0, "swapper/0", 0), (8, "sh"));
    e.switch(&mut b, 45, 0, (8, "writer", 1), (7, "cc1"));
    e.switch(&mut b, 20, 1, (9, "pmlab", 1), (0, "swapper/1"));
    marker(&mut b, 100, 0);
    let t = b.build();
    let all = crate::sched::runtime(&t, &Options::default()).unwrap();
    let got: Vec<(i32, &str, u32, u64)> = all
        .iter()
        .map(|r| (r.pid, r.comm.as_str(), r.cpu, r.ns))
        .collect();
    assert_eq!(
        got,
        [
            (7, "cc1", 0, 10 + 55),
            (9, "pmlab", 1, 20),
            (8, "writer", 0, 15)
        ]
    );
    let only1 = Options {
        cpus: Some([1].into()),
        ..Options::default()
    };
    let got = crate::sched::runtime(&t, &only1).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].pid, got[0].ns), (9, 20));
}

#[test]
fn forked_from_follows_children_and_threads_of_children() {
    let (mut b, _) = base();
    let fork = b.event(
        "sched",
        "sched_process_fork",
        &[
            ("parent_comm", Ty::Comm),
            ("parent_pid", Ty::I32),
            ("child_comm", Ty::Comm),
            ("child_pid", Ty::I32),
        ],
    );
    let f = |b: &mut Builder, ts, parent: i32, child: i32| {
        b.push(
            ts,
            0,
            parent,
            fork,
            &[s("p"), V::I(parent as i64), s("p"), V::I(child as i64)],
        );
    };
    f(&mut b, 1, 100, 101);
    f(&mut b, 2, 101, 102);
    f(&mut b, 3, 50, 51);
    f(&mut b, 4, 102, 103);
    let t = b.build();
    let got = crate::sched::forked_from(&t, &[100, 200]).unwrap();
    assert_eq!(
        got.into_iter().collect::<Vec<_>>(),
        [100, 101, 102, 103, 200]
    );
    let (mut b, e) = base();
    e.switch(&mut b, 1, 0, (1, "a", 0), (0, "swapper/0"));
    let m = crate::sched::forked_from(&b.build(), &[1]).unwrap_err();
    assert!(format!("{m}").contains("sched_process_fork"), "{m}");
}
