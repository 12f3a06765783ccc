//! pmlab-study through its public API: the battery planned for fake machines' capabilities
//! (what runs, what is skipped and why), the frequency and uncore stages planned on real
//! machines' trees (pepc's emulation data, skipped without it) with their configurations
//! applied and restored there, and the simulated machine run through the experiment
//! protocol into a store.

#[macro_use]
#[path = "../../../tests/support/harness.rs"]
mod harness;

use pmlab_lab::executor::ExecError;
use pmlab_lab::protocol::{self, ProtocolError, Silent};
use pmlab_store::spec::{Configuration, Experiment, Kind, WorkloadDef};
use pmlab_store::store::Store;
use pmlab_study::detect::Caps;
use pmlab_study::plan::{self, Stage, StagePlan, Step};
use pmlab_study::sim::SimExecutor;
use std::sync::atomic::AtomicBool;

/// A haltpoll KVM guest like this one, as root: two CPUs, cpu1 hot-pluggable, tracefs.
fn guest() -> Caps {
    Caps {
        root: true,
        cpus_online: vec![0, 1],
        cpuidle_driver: Some("haltpoll".into()),
        governors: vec!["menu".into(), "haltpoll".into()],
        current_governor: Some("haltpoll".into()),
        haltpoll_poll_ns: Some("0".into()),
        polling_knob: Some("haltpoll.guest_halt_poll_ns".into()),
        hotpluggable: vec![1],
        tracefs: true,
        guest_kernel: Some("/var/cache/pmlab/guest/x86_64/vmlinuz-6.12".into()),
        ..Caps::default()
    }
}

fn skip_reason(p: &StagePlan) -> Option<&str> {
    match p {
        StagePlan::Skip(why) => Some(why),
        StagePlan::Run { .. } => None,
    }
}

/// The one experiment step of a stage that runs one.
fn experiment_of(p: StagePlan) -> (Experiment, pmlab_store::spec::Budget, bool) {
    match p {
        StagePlan::Run { mut steps, .. } => match (steps.pop(), steps.is_empty()) {
            (
                Some(Step::Experiment {
                    experiment,
                    budget,
                    trace,
                }),
                true,
            ) => (*experiment, budget, trace),
            other => panic!("{other:?}"),
        },
        StagePlan::Skip(why) => panic!("skipped: {why}"),
    }
}

it_test!(stage_names_parse_and_unknown_ones_are_refused);
fn stage_names_parse_and_unknown_ones_are_refused() {
    for s in Stage::ALL {
        assert_eq!(Stage::parse(s.as_str()), Ok(s));
    }
    let e = Stage::parse("polling-sweep").unwrap_err();
    assert!(e.to_string().contains("polling-predicted"), "{e}");
}

it_test!(the_boot_stage_boots_a_guest_where_one_is_found_and_says_why_not_elsewhere);
fn the_boot_stage_boots_a_guest_where_one_is_found_and_says_why_not_elsewhere() {
    let caps = guest();
    match plan::plan(Stage::Boot, &caps, false, 7) {
        StagePlan::Run { steps, .. } => match steps.as_slice() {
            [Step::Boot(b)] => {
                assert_eq!(b.cmdlines, ["cpuhp.parallel=0", "cpuhp.parallel=1"]);
                assert_eq!(b.vcpus, [2, 4, 8]);
            }
            s => panic!("{s:?}"),
        },
        p => panic!("{p:?}"),
    }
    match plan::plan(Stage::Boot, &caps, true, 7) {
        StagePlan::Run { steps, .. } => match steps.as_slice() {
            [Step::Boot(b)] => {
                assert_eq!((b.vcpus.as_slice(), b.budget.max_runs), (&[2][..], Some(1)))
            }
            s => panic!("{s:?}"),
        },
        p => panic!("{p:?}"),
    }
    let none = Caps {
        guest_kernel: None,
        no_guest: Some(
            "QEMU (qemu-system-x86_64) not found: apt-get install qemu-system-x86".into(),
        ),
        ..guest()
    };
    let p = plan::plan(Stage::Boot, &none, true, 7);
    assert!(skip_reason(&p).is_some_and(|r| r.contains("QEMU")), "{p:?}");
}

it_test!(a_guest_with_haltpoll_runs_every_stage);
fn a_guest_with_haltpoll_runs_every_stage() {
    let caps = guest();
    for s in Stage::ALL {
        let p = plan::plan(s, &caps, true, 7);
        match s {
            // A guest like this one has no cpufreq policy and no uncore control.
            Stage::Frequency => assert!(
                skip_reason(&p).is_some_and(|r| r.contains("no cpufreq driver")),
                "{p:?}"
            ),
            Stage::Uncore => assert!(
                skip_reason(&p).is_some_and(|r| r.contains("no uncore frequency control")),
                "{p:?}"
            ),
            _ => assert_eq!(skip_reason(&p), None, "{s:?}"),
        }
    }
    let (sweep, budget, trace) = experiment_of(plan::plan(Stage::Polling, &caps, true, 7));
    assert_eq!(sweep.kind, Kind::Sweep);
    assert_eq!(sweep.swept, ["haltpoll.guest_halt_poll_ns"]);
    assert_eq!(sweep.configurations.len(), 4, "quick: 0,25us,100us,200us");
    assert_eq!(budget.seed, 7);
    assert!(!trace);
    // The pipe's two sides on two CPUs: polling acts on wakes across CPUs.
    assert!(
        sweep.workloads[0].label.contains("--placement spread"),
        "{:?}",
        sweep.workloads
    );
    let full = experiment_of(plan::plan(Stage::Polling, &caps, false, 7)).0;
    assert!(full.configurations.len() > sweep.configurations.len());

    let (gov, _, _) = experiment_of(plan::plan(Stage::Governors, &caps, true, 7));
    assert_eq!(
        gov.configurations[gov.reference].label, "haltpoll",
        "the governor as found"
    );
    match plan::plan(Stage::Hotplug, &caps, true, 7) {
        StagePlan::Run { steps, .. } => match steps.as_slice() {
            [Step::Hotplug(h)] => assert_eq!((h.cpus.as_slice(), h.trace), (&[1][..], true)),
            other => panic!("{other:?}"),
        },
        StagePlan::Skip(why) => panic!("{why}"),
    }
    assert!(
        experiment_of(plan::plan(Stage::Wakeups, &caps, true, 7)).2,
        "traced"
    );
}

it_test!(a_machine_without_root_or_cpuidle_skips_with_reasons);
fn a_machine_without_root_or_cpuidle_skips_with_reasons() {
    let bare = Caps {
        cpus_online: vec![0],
        ..Caps::default()
    };
    let why = |s| skip_reason(&plan::plan(s, &bare, true, 1)).map(str::to_string);
    assert!(why(Stage::Polling).unwrap().contains("no cpuidle driver"));
    assert!(why(Stage::Governors).unwrap().contains("no cpuidle driver"));
    assert!(why(Stage::Hotplug).unwrap().contains("needs root"));
    assert!(why(Stage::PollingPredicted).unwrap().contains("tracefs"));
    assert_eq!(why(Stage::Idle), None);
    assert_eq!(why(Stage::Cpu), None);
    // The guest as a user: polling knobs exist but cannot be changed.
    let guest_as_user = Caps {
        root: false,
        ..guest()
    };
    let p = plan::plan(Stage::Polling, &guest_as_user, true, 1);
    assert!(skip_reason(&p).unwrap().contains("needs root"), "{p:?}");
    let (idle, _, trace) = experiment_of(plan::plan(Stage::Idle, &bare, true, 1));
    assert!(!trace, "no tracefs: not traced");
    assert!(idle.workloads[0].argv.starts_with(&["idle".to_string()]));
}

it_test!(frequency_stage_picks_epp_else_governors_and_says_why_it_cannot);
fn frequency_stage_picks_epp_else_governors_and_says_why_it_cannot() {
    let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    let knobs = |e: &Experiment| {
        e.configurations
            .iter()
            .map(|c| c.describe())
            .collect::<Vec<_>>()
    };
    // intel_pstate active, governor performance as found: EPP under powersave on both sides.
    let hwp = Caps {
        cpufreq_driver: Some("intel_pstate".into()),
        cpufreq_governors: words("performance powersave"),
        cpufreq_governor: Some("performance".into()),
        epp_words: words("default performance balance_performance balance_power power"),
        epp: Some("balance_power".into()),
        ..guest()
    };
    let (e, budget, trace) = experiment_of(plan::plan(Stage::Frequency, &hwp, true, 7));
    assert_eq!(
        knobs(&e),
        [
            "cpufreq.governor=powersave cpufreq.epp=performance",
            "cpufreq.governor=powersave cpufreq.epp=balance_power"
        ]
    );
    assert_eq!(e.kind, Kind::Compare);
    assert_eq!(e.configurations[e.reference].label, "epp balance_power");
    assert_eq!((budget.max_runs, trace), (Some(36), false));
    let spin = e.workloads.iter().any(|w| w.argv[0] == "spin");
    assert!(spin, "{:?}", e.workloads);
    // Under powersave the governor is left alone.
    let (e, _, _) = experiment_of(plan::plan(
        Stage::Frequency,
        &Caps {
            cpufreq_governor: Some("powersave".into()),
            ..hwp.clone()
        },
        true,
        7,
    ));
    assert_eq!(
        knobs(&e),
        ["cpufreq.epp=performance", "cpufreq.epp=balance_power"]
    );
    // No EPP: performance against schedutil, else powersave; the one found is the reference.
    let acpi = Caps {
        cpufreq_driver: Some("acpi-cpufreq".into()),
        cpufreq_governors: words("conservative userspace powersave performance schedutil"),
        cpufreq_governor: Some("schedutil".into()),
        ..guest()
    };
    let (e, _, _) = experiment_of(plan::plan(Stage::Frequency, &acpi, false, 7));
    assert_eq!(
        knobs(&e),
        ["cpufreq.governor=performance", "cpufreq.governor=schedutil"]
    );
    assert_eq!(e.reference, 1);
    let epp_locked = Caps {
        cpufreq_driver: Some("amd-pstate-epp".into()),
        cpufreq_governors: words("performance powersave"),
        epp_words: words("performance"),
        ..acpi.clone()
    };
    let (e, _, _) = experiment_of(plan::plan(Stage::Frequency, &epp_locked, true, 7));
    assert_eq!(
        knobs(&e),
        ["cpufreq.governor=performance", "cpufreq.governor=powersave"]
    );
    // Why not: no driver, no pair, no root.
    for (caps, says) in [
        (guest(), "no cpufreq driver"),
        (
            Caps {
                cpufreq_governors: words("userspace"),
                ..acpi.clone()
            },
            "offers neither",
        ),
        (
            Caps {
                root: false,
                ..acpi.clone()
            },
            "needs root",
        ),
    ] {
        let p = plan::plan(Stage::Frequency, &caps, true, 7);
        assert!(skip_reason(&p).is_some_and(|r| r.contains(says)), "{p:?}");
    }
}

it_test!(uncore_stage_sets_the_upper_limit_low_and_high_where_uncore_exists);
fn uncore_stage_sets_the_upper_limit_low_and_high_where_uncore_exists() {
    let caps = Caps {
        uncore_domains: 4,
        ..guest()
    };
    let (e, _, _) = experiment_of(plan::plan(Stage::Uncore, &caps, true, 7));
    let knobs: Vec<String> = e.configurations.iter().map(|c| c.describe()).collect();
    assert_eq!(
        knobs,
        [
            "uncore.min_freq=min uncore.max_freq=max",
            "uncore.min_freq=min uncore.max_freq=min"
        ]
    );
    assert_eq!(e.reference, 0, "the hardware's highest, as machines start");
    let nonroot = Caps {
        root: false,
        ..caps
    };
    let p = plan::plan(Stage::Uncore, &nonroot, true, 7);
    assert!(
        skip_reason(&p).is_some_and(|r| r.contains("needs root")),
        "{p:?}"
    );
}

/// A machine of pepc's emulation data as a writable tree; the test is skipped without it.
fn emul_machine(name: &str) -> pmlab_kernel::sysinfo::emul::EmulRoot {
    use pmlab_kernel::sysinfo::emul;
    let data = match emul::data_dir() {
        Ok(d) => d,
        Err(why) => skip!("{why}"),
    };
    emul::build_temp(&data.join(name)).unwrap()
}

/// Every file under `d` and its bytes.
fn tree_bytes(d: &std::path::Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![d.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                todo.push(e.path());
            } else {
                out.insert(e.path(), std::fs::read(e.path()).unwrap());
            }
        }
    }
    out
}

it_test!(frequency_and_uncore_stages_on_real_trees_follow_driver_and_uncore_and_apply_there);
/// spr1 (intel_pstate active, legacy uncore), genoa0 (acpi-cpufreq, no uncore), turin0
/// (amd-pstate-epp under the performance governor, which lists only the EPP `performance`),
/// adl0 (intel_pstate, TPMI-less client uncore) and knl0 (intel_pstate passive): each plan's
/// configurations switch one after the other through a knob transaction on the tree, the
/// files take the values, and the restore leaves the tree byte for byte as it was (up to
/// the trailing newline sysfs adds).
fn frequency_and_uncore_stages_on_real_trees_follow_driver_and_uncore_and_apply_there() {
    use pmlab_kernel::knob::Transaction;
    let cases = [
        (
            "spr1",
            Some(["cpufreq.epp=performance", "cpufreq.epp=balance_power"]),
            true,
        ),
        (
            "genoa0",
            Some(["cpufreq.governor=performance", "cpufreq.governor=schedutil"]),
            false,
        ),
        (
            "turin0",
            Some(["cpufreq.governor=performance", "cpufreq.governor=powersave"]),
            false,
        ),
        (
            "knl0",
            Some(["cpufreq.governor=performance", "cpufreq.governor=schedutil"]),
            false,
        ),
        (
            "adl0",
            Some(["cpufreq.epp=performance", "cpufreq.epp=balance_power"]),
            true,
        ),
    ];
    for (m, want_freq, want_uncore) in cases {
        let t = emul_machine(m);
        let dir = t.root.path("/");
        // As root, whoever runs the test: the tree is ours to write.
        let caps = Caps {
            root: true,
            ..Caps::detect(&dir)
        };
        let freq = plan::plan(Stage::Frequency, &caps, true, 7);
        let uncore = plan::plan(Stage::Uncore, &caps, true, 7);
        match want_freq {
            Some(want) => {
                let (e, _, _) = experiment_of(freq);
                let got: Vec<String> = e.configurations.iter().map(|c| c.describe()).collect();
                assert_eq!(got, want, "{m}");
                apply_each(m, &t.root, &e);
            }
            None => assert!(skip_reason(&freq).is_some(), "{m}"),
        }
        if want_uncore {
            let (e, _, _) = experiment_of(uncore);
            apply_each(m, &t.root, &e);
        } else {
            let why = skip_reason(&uncore).unwrap_or_else(|| panic!("{m}: {uncore:?}"));
            assert!(why.contains("no uncore frequency control"), "{m}: {why}");
        }
    }

    /// Each configuration in turn, read back from the files, then restored byte for byte.
    fn apply_each(m: &str, root: &pmlab_kernel::Root, e: &Experiment) {
        let before = tree_bytes(&root.path("/"));
        let journals = tempfile::tempdir().unwrap();
        let mut txn = Transaction::begin_in(root, journals.path()).unwrap();
        for c in &e.configurations {
            txn.switch_to(&c.knobs)
                .unwrap_or_else(|err| panic!("{m}: {}: {err}", c.label));
            for a in &c.knobs {
                let name = a.knob().name();
                if let Some(limit) = name.strip_prefix("uncore.") {
                    // `min`/`max`: the hardware's own limits, from each domain's files.
                    let limit = limit.trim_end_matches("_freq");
                    let dir = root.path("/sys/devices/system/cpu/intel_uncore_frequency");
                    for d in std::fs::read_dir(dir).unwrap().flatten() {
                        let f = |n: &str| std::fs::read_to_string(d.path().join(n)).ok();
                        let Some(initial) = f(&format!("initial_{}_freq_khz", a.value())) else {
                            continue;
                        };
                        assert_eq!(
                            f(&format!("{limit}_freq_khz")).map(|v| v.trim().to_string()),
                            Some(initial.trim().to_string()),
                            "{m}: {}: {:?}",
                            c.label,
                            d.file_name()
                        );
                    }
                    continue;
                }
                for (k, v) in pmlab_kernel::knob::read_all(root, a.knob()).unwrap() {
                    assert_eq!(v, a.value(), "{m}: {}: {k}", c.label);
                }
            }
        }
        txn.restore().unwrap();
        let after = tree_bytes(&root.path("/"));
        let changed: Vec<_> = before
            .iter()
            // sysfs prints its own trailing newline whatever was written; a plain file
            // written with the kernel's value has none, so that newline is not compared.
            .filter(|(p, b)| after.get(*p).map(|a| a.trim_ascii_end()) != Some(b.trim_ascii_end()))
            .map(|(p, b)| {
                let now = after
                    .get(p)
                    .map(|a| String::from_utf8_lossy(a).into_owned());
                format!(
                    "{}: {:?} -> {now:?}",
                    p.display(),
                    String::from_utf8_lossy(b)
                )
            })
            .take(3)
            .collect();
        assert!(
            changed.is_empty() && before.len() == after.len(),
            "{m}: the tree differs after the restore: {changed:?}"
        );
    }
}

it_test!(the_simulated_machine_runs_the_polling_sweep_into_a_store);
/// The model speeds the pipe up with polling: the 25 µs configuration measures faster than
/// polling off, and the experiment is stored complete with its runs.
fn the_simulated_machine_runs_the_polling_sweep_into_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let (sweep, budget, _) = experiment_of(plan::plan(Stage::Polling, &guest(), true, 3));
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let mut sim = SimExecutor::new(dir.path().to_path_buf(), 3);
    let stop = AtomicBool::new(false);
    let out = protocol::run_experiment(
        &mut store,
        &mut sim,
        &sweep,
        &budget,
        "test",
        &stop,
        &mut Silent,
    )
    .unwrap();
    assert!(out.runs > 0 && out.failed == 0, "{out:?}");
    let e = store.load(out.experiment_id).unwrap();
    assert_eq!(e.configurations.len(), 4);
    let mean = |c: usize| {
        let xs = e.samples(0, c, "us_per_op");
        assert!(xs.len() >= 2, "configuration {c}: {xs:?}");
        xs.iter().sum::<f64>() / xs.len() as f64
    };
    assert!(mean(1) < mean(0), "25us {} vs off {}", mean(1), mean(0));
}

it_test!(the_simulated_machine_refuses_knobs_it_does_not_have);
fn the_simulated_machine_refuses_knobs_it_does_not_have() {
    let dir = tempfile::tempdir().unwrap();
    let e = Experiment::new(
        Kind::Compare,
        "x".into(),
        vec![
            Configuration::parse("A", "").unwrap(),
            Configuration::parse("B", "cpufreq.governor=performance").unwrap(),
        ],
        vec![WorkloadDef::new(vec!["idle".into()]).unwrap()],
        None,
    )
    .unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let mut sim = SimExecutor::new(dir.path().to_path_buf(), 1);
    let err = protocol::run_experiment(
        &mut store,
        &mut sim,
        &e,
        &Default::default(),
        "test",
        &AtomicBool::new(false),
        &mut Silent,
    )
    .unwrap_err();
    assert!(
        matches!(
            &err,
            ProtocolError::Invalid(ExecError::Configuration { label, .. }) if label == "B"
        ),
        "{err:?}"
    );
    assert!(
        store.list().unwrap().is_empty(),
        "refused before anything was stored"
    );
}

fn main() -> std::process::ExitCode {
    harness::main(vec![harness::source_check(
        "harness::every_test_is_registered",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests"),
    )])
}
