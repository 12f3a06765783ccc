//! pmlab-workload through its public API: specs checked before anything runs, the pipe
//! ping-pong on the placement it is given (one CPU or two), and a short idle run.

#[macro_use]
#[path = "../../../tests/support/harness.rs"]
mod harness;

use pmlab_workload::{
    allowed_cpus, run, NoProbe, Placement, Regime, WorkloadError, WorkloadResult, WorkloadSpec,
};

/// A pipe spec; pinned CPUs imply their placement, none: the default (two CPUs).
fn pipe(loops: u64, threads: bool, cpus: Option<Vec<u32>>) -> WorkloadSpec {
    let placement = match &cpus {
        Some(c) if c.len() == 2 && c[0] == c[1] => Placement::Same,
        _ => Placement::Spread,
    };
    WorkloadSpec::Pipe {
        loops,
        threads,
        cpus,
        placement,
    }
}

fn metric(r: &WorkloadResult, name: &str) -> f64 {
    r.metrics
        .iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", r.metrics))
        .value
}

it_test!(bad_specs_are_refused_before_running);
fn bad_specs_are_refused_before_running() {
    for (spec, want) in [
        (pipe(0, false, None), "pipe loops"),
        (pipe(10, false, Some(vec![0])), "expected two CPUs"),
        (pipe(10, false, Some(vec![0, 4096])), "4096"),
    ] {
        let e = run(&spec, &mut NoProbe).unwrap_err();
        assert!(matches!(e, WorkloadError::Invalid(_)), "{e:?}");
        assert!(e.to_string().contains(want), "{e}");
    }
}

it_test!(pipe_reports_its_primary_metric_first);
fn pipe_reports_its_primary_metric_first() {
    let spec = pipe(2000, false, None);
    let r = run(&spec, &mut NoProbe).unwrap();
    assert_eq!(r.primary().name, pmlab_workload::primary_metric_name(&spec));
    assert!(r.primary().value > 0.0, "{:?}", r.primary());
    let share = metric(&r, "same_cpu_share");
    assert!((0.0..=1.0).contains(&share), "{share}");
}

it_test!(pipe_pinned_to_one_cpu_stays_on_it);
fn pipe_pinned_to_one_cpu_stays_on_it() {
    let cpu = allowed_cpus().unwrap()[0];
    for threads in [false, true] {
        let r = run(&pipe(5000, threads, Some(vec![cpu, cpu])), &mut NoProbe).unwrap();
        assert_eq!(metric(&r, "same_cpu_share"), 1.0, "threads: {threads}");
    }
}

it_test!(pipe_pinned_to_two_cpus_is_never_on_one);
fn pipe_pinned_to_two_cpus_is_never_on_one() {
    let cpus = allowed_cpus().unwrap();
    if cpus.len() < 2 {
        skip!("one CPU allowed (pipe_pinned_to_one_cpu_stays_on_it covers one)");
    }
    for threads in [false, true] {
        let r = run(
            &pipe(5000, threads, Some(vec![cpus[0], cpus[1]])),
            &mut NoProbe,
        )
        .unwrap();
        assert_eq!(metric(&r, "same_cpu_share"), 0.0, "threads: {threads}");
    }
}

it_test!(each_placement_measures_its_regime);
/// `same` puts both sides on one CPU, `spread` (the default) on two, and the run says so.
fn each_placement_measures_its_regime() {
    if allowed_cpus().unwrap().len() < 2 {
        skip!("one CPU allowed: spread needs two");
    }
    for (placement, regime) in [
        (Placement::Same, Regime::OneCpu),
        (Placement::Spread, Regime::TwoCpus),
    ] {
        let spec = WorkloadSpec::Pipe {
            loops: 5000,
            threads: false,
            cpus: None,
            placement,
        };
        let r = run(&spec, &mut NoProbe).unwrap();
        assert_eq!(Regime::of_result(&r.metrics), Some(regime), "{placement}");
    }
}

it_test!(idle_lasts_its_duration);
fn idle_lasts_its_duration() {
    let spec = WorkloadSpec::Idle {
        duration: pmlab_workload::units::parse_duration("200ms").unwrap(),
    };
    let r = run(&spec, &mut NoProbe).unwrap();
    let wall_ms = r.wall.0 as f64 / 1e6;
    assert!((195.0..400.0).contains(&wall_ms), "{wall_ms} ms");
}

fn main() -> std::process::ExitCode {
    harness::main(vec![harness::source_check(
        "harness::every_test_is_registered",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests"),
    )])
}
