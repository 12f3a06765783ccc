//! The reading commands under `--root` on real machines' trees (Intel pepc's emulation data
//! through `pmlab_kernel::sysinfo::emul`; skipped with the reason where it is absent): `info`,
//! `knob list`, `knob get` and `study --plan` on an Intel server (spr1: intel_pstate, legacy
//! uncore) and an AMD server (genoa0: acpi-cpufreq, no uncore), each checked against the
//! tree's own files, with nothing written under the root or in the working directory; and,
//! with `PMLAB_PEPC_ALL=1`, `info`, `knob list` and `study --plan` on every machine of the data.

use crate::util::pmlab;
use pmlab_kernel::sysinfo::emul::{self, EmulRoot};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn machine(name: &str) -> EmulRoot {
    let data = match emul::data_dir() {
        Ok(d) => d,
        Err(why) => skip!("{why}"),
    };
    emul::build_temp(&data.join(name)).unwrap()
}

fn dir(t: &EmulRoot) -> PathBuf {
    t.root.path("/")
}

fn file(t: &EmulRoot, abs: &str) -> Option<String> {
    std::fs::read_to_string(t.root.path(abs))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Every entry below `d`: its mode and, for a file, its bytes (a directory has none).
fn snapshot(d: &Path) -> BTreeMap<PathBuf, (u32, Option<Vec<u8>>)> {
    fn walk(base: &Path, d: &Path, out: &mut BTreeMap<PathBuf, (u32, Option<Vec<u8>>)>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(base).unwrap().to_path_buf();
            if meta.is_dir() {
                out.insert(rel, (meta.permissions().mode(), None));
                walk(base, &p, out);
            } else {
                let bytes = std::fs::read(&p).unwrap_or_default();
                out.insert(rel, (meta.permissions().mode(), Some(bytes)));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(d, d, &mut out);
    out
}

/// Runs `pmlab ARGS` on `t` from an empty working directory that is also its HOME, and
/// asserts that it succeeded, and that neither the tree nor that directory changed.
fn run(t: &EmulRoot, args: &[&str]) -> String {
    let root = dir(t);
    let before = snapshot(&root);
    let cwd = tempfile::tempdir().unwrap();
    let mut full: Vec<&str> = args.to_vec();
    full.extend(["--root", root.to_str().unwrap()]);
    let out = pmlab()
        .current_dir(cwd.path())
        .env("HOME", cwd.path())
        .env("XDG_CACHE_HOME", cwd.path().join("cache"))
        .env("XDG_DATA_HOME", cwd.path().join("data"))
        .env("XDG_STATE_HOME", cwd.path().join("state"))
        .args(&full)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pmlab {full:?}: {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let after = snapshot(&root);
    let changed: Vec<_> = before
        .keys()
        .chain(after.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|p| before.get(*p) != after.get(*p))
        .take(5)
        .collect();
    assert!(
        changed.is_empty(),
        "pmlab {full:?} changed the tree: {changed:?}"
    );
    let left: Vec<_> = std::fs::read_dir(cwd.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "pmlab {full:?} wrote {left:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn json(t: &EmulRoot, args: &[&str]) -> Value {
    let out = run(t, args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

/// What the tree's own files say, read here without pmlab's readers.
struct Expected {
    release: String,
    cpus: usize,
    packages: usize,
    cpufreq_driver: String,
    cpuidle_driver: String,
    /// cpu0's idle state names, by index.
    states: Vec<String>,
    /// Uncore frequency domains (legacy `package_*_die_*` or TPMI `uncore*`).
    uncore: usize,
    /// CPUs with an `energy_perf_bias` file.
    epb_cpus: usize,
    /// CPUs of each package (`physical id`).
    package_cpus: BTreeMap<u32, usize>,
}

fn expected(t: &EmulRoot) -> Expected {
    let version = file(t, "/proc/version").unwrap();
    let release = version
        .strip_prefix("Linux version ")
        .and_then(|v| v.split_whitespace().next())
        .unwrap()
        .to_string();
    let cpuinfo = file(t, "/proc/cpuinfo").unwrap();
    let field = |l: &str| l.split(':').nth(1).unwrap().trim().to_string();
    let cpus = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    let mut package_cpus = BTreeMap::new();
    for l in cpuinfo.lines().filter(|l| l.starts_with("physical id")) {
        *package_cpus.entry(field(l).parse().unwrap()).or_insert(0) += 1;
    }
    let cpu = "/sys/devices/system/cpu";
    let mut states: Vec<(u32, String)> =
        std::fs::read_dir(t.root.path(&format!("{cpu}/cpu0/cpuidle")))
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let n = e
                    .file_name()
                    .to_str()?
                    .strip_prefix("state")?
                    .parse()
                    .ok()?;
                Some((
                    n,
                    std::fs::read_to_string(e.path().join("name"))
                        .ok()?
                        .trim()
                        .to_string(),
                ))
            })
            .collect();
    states.sort();
    let uncore = std::fs::read_dir(t.root.path(&format!("{cpu}/intel_uncore_frequency")))
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.starts_with("package_") || n.starts_with("uncore")
                })
                .count()
        })
        .unwrap_or(0);
    let epb_cpus = (0..cpus)
        .filter(|n| {
            t.root
                .path(&format!("{cpu}/cpu{n}/power/energy_perf_bias"))
                .is_file()
        })
        .count();
    Expected {
        release,
        cpus,
        packages: package_cpus.len(),
        cpufreq_driver: file(t, &format!("{cpu}/cpufreq/policy0/scaling_driver")).unwrap(),
        cpuidle_driver: file(t, &format!("{cpu}/cpuidle/current_driver")).unwrap(),
        states: states.into_iter().map(|(_, n)| n).collect(),
        uncore,
        epb_cpus,
        package_cpus,
    }
}

/// The two machines, with what each must show: (name, driver, uncore domains, EPB, AMD).
const MACHINES: [(&str, &str, usize, bool); 2] = [
    ("spr1", "intel_pstate", 4, true),
    ("genoa0", "acpi-cpufreq", 0, false),
];

it_test!(metal_info_root_reports_the_trees_facts_and_writes_nothing);
fn metal_info_root_reports_the_trees_facts_and_writes_nothing() {
    for (m, driver, uncore, epb) in MACHINES {
        let t = machine(m);
        let want = expected(&t);
        assert_eq!(want.cpufreq_driver, driver, "{m}: the data changed");
        assert_eq!(want.uncore, uncore, "{m}: the data changed");
        let j = json(&t, &["info", "--json"]);
        assert_eq!(j["kernel"]["release"], want.release.as_str(), "{m}");
        let c = &j["layout"]["counts"];
        assert_eq!(c["cpus"], want.cpus, "{m}");
        assert_eq!(c["packages"], want.packages, "{m}");
        assert!(c["threads_per_core"].as_u64().unwrap() >= 1, "{m}: {c}");
        assert_eq!(j["cpufreq"]["driver"], want.cpufreq_driver.as_str(), "{m}");
        assert_eq!(j["cpuidle"]["driver"], want.cpuidle_driver.as_str(), "{m}");
        let names: Vec<&str> = j["cpuidle"]["cpus"][0]["states"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, want.states, "{m}");
        let domains = j["power"]["uncore"].as_array().unwrap();
        assert_eq!(domains.len(), want.uncore, "{m}");
        for d in domains {
            let base = format!(
                "/sys/devices/system/cpu/intel_uncore_frequency/{}",
                d["dir"].as_str().unwrap()
            );
            for (key, f) in [("min", "min_freq_khz"), ("max", "max_freq_khz")] {
                let v = file(&t, &format!("{base}/{f}")).unwrap();
                assert_eq!(d[key].to_string(), v, "{m}: {base}/{f}");
            }
        }
        let epb_listed: usize = j["power"]["epb"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["cpus"].as_array().unwrap().len())
            .sum();
        assert_eq!(epb_listed, want.epb_cpus, "{m}");
        assert_eq!(epb_listed > 0, epb, "{m}");

        let text = run(&t, &["info"]);
        let counts = format!("{} packages", want.packages);
        assert!(text.contains(&counts), "{m}: no `{counts}` in:\n{text}");
        assert!(text.contains(driver), "{m}");
    }
}

it_test!(metal_knob_list_root_lists_each_kind_with_its_scope_and_the_files_values);
fn metal_knob_list_root_lists_each_kind_with_its_scope_and_the_files_values() {
    for (m, _, uncore, epb) in MACHINES {
        let t = machine(m);
        let want = expected(&t);
        let j = json(&t, &["knob", "list", "--json"]);
        let knobs = j.as_array().unwrap();
        // Each kind's scope, and how many knobs of it.
        let mut kinds: BTreeMap<String, (String, usize)> = BTreeMap::new();
        for k in knobs {
            let name = k["name"].as_str().unwrap();
            let kind = name.split('@').next().unwrap().to_string();
            let scope = k["scope"].as_str().unwrap().to_string();
            let e = kinds.entry(kind.clone()).or_insert((scope.clone(), 0));
            assert_eq!(e.0, scope, "{m}: {kind} has two scopes");
            e.1 += 1;
            // The value is the file's, but where the knob reads it another way.
            let f = k["file"].as_str().unwrap();
            let raw = std::fs::read_to_string(f).unwrap();
            let raw = raw.trim();
            let v = k["value"].as_str().unwrap();
            match kind.as_str() {
                // The kernel's list with the setting in brackets.
                "aspm.policy" => assert!(raw.contains(&format!("[{v}]")), "{m}: {raw} / {v}"),
                // intel_pstate's no_turbo, inverted.
                "cpufreq.turbo" if f.ends_with("no_turbo") => {
                    assert_eq!(v, if raw == "0" { "1" } else { "0" }, "{m}")
                }
                _ => assert_eq!(v, raw, "{m}: {name} ({f})"),
            }
        }
        let kind = |k: &str| kinds.get(k).map(|(s, n)| (s.as_str(), *n));
        for s in &want.states {
            assert_eq!(
                kind(&format!("cpuidle.{s}.disable")),
                Some(("cpu", want.cpus)),
                "{m}: {s}"
            );
        }
        assert_eq!(kind("aspm.policy"), Some(("global", 1)), "{m}");
        assert_eq!(kind("cpufreq.turbo"), Some(("global", 1)), "{m}");
        assert_eq!(
            kind("uncore.max_freq"),
            (uncore > 0).then_some(("die", uncore)),
            "{m}"
        );
        assert_eq!(
            kind("uncore.min_freq"),
            (uncore > 0).then_some(("die", uncore)),
            "{m}"
        );
        assert_eq!(kind("epb").is_some(), epb, "{m}");
        if m == "spr1" {
            for k in [
                "intel_pstate.no_turbo",
                "intel_pstate.status",
                "intel_pstate.max_perf_pct",
            ] {
                assert_eq!(kind(k).map(|k| k.0), Some("global"), "{m}: {k}");
            }
        } else {
            assert_eq!(kind("cpufreq.boost"), Some(("global", 1)), "{m}");
            assert!(!kinds.keys().any(|k| k.starts_with("intel_pstate.")), "{m}");
        }

        let text = run(&t, &["knob", "list"]);
        let header = text.lines().find(|l| l.contains("knob")).unwrap();
        assert!(header.contains("scope"), "{m}: {header}");
    }
}

it_test!(metal_knob_get_root_reads_scoped_knobs_and_refuses_what_the_tree_lacks);
fn metal_knob_get_root_reads_scoped_knobs_and_refuses_what_the_tree_lacks() {
    for (m, _, uncore, _) in MACHINES {
        let t = machine(m);
        let want = expected(&t);
        let last = *want.package_cpus.keys().last().unwrap();
        let state = want.states.last().unwrap();
        let pkg = format!("pmqos.resume_latency_us@package{last}");
        let all = format!("cpuidle.{state}.disable@all");
        let j = json(&t, &["knob", "get", "--json", "cpufreq.turbo", &pkg, &all]);
        let got = j.as_object().unwrap();
        let count = |prefix: &str| got.keys().filter(|k| k.starts_with(prefix)).count();
        assert_eq!(
            count("pmqos.resume_latency_us@"),
            want.package_cpus[&last],
            "{m}"
        );
        assert_eq!(
            count(&format!("cpuidle.{state}.disable@")),
            want.cpus,
            "{m}"
        );
        for (k, v) in got {
            if let Some(cpu) = k.strip_prefix(&format!("cpuidle.{state}.disable@")) {
                let i = want.states.len() - 1;
                let f = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle/state{i}/disable");
                assert_eq!(v.as_str(), file(&t, &f).as_deref(), "{m}: {k}");
            }
        }
        assert!(got.contains_key("cpufreq.turbo"), "{m}: {got:?}");

        if uncore > 0 {
            let u = json(&t, &["knob", "get", "--json", "uncore.max_freq@package0"]);
            let (k, v) = u.as_object().unwrap().iter().next().unwrap();
            assert!(k.starts_with("uncore.max_freq@package0"), "{m}: {k}");
            let f = "/sys/devices/system/cpu/intel_uncore_frequency/package_00_die_00/max_freq_khz";
            assert_eq!(v.as_str(), file(&t, f).as_deref(), "{m}");
        }
    }
    // What the tree lacks, or a scope it has not, is refused with the knob named.
    let t = machine("genoa0");
    let root = dir(&t);
    let before = snapshot(&root);
    for (arg, says) in [
        ("uncore.max_freq", "uncore.max_freq"),
        ("epb", "epb"),
        ("pmqos.resume_latency_us@package7", "package7"),
    ] {
        let out = pmlab()
            .args(["knob", "get", arg, "--root", root.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{arg}: {err}");
        assert!(err.contains(says), "{arg}: {err}");
    }
    assert!(before == snapshot(&root), "a refused get changed the tree");
}

it_test!(metal_study_plan_root_follows_each_machine_and_writes_nothing);
fn metal_study_plan_root_follows_each_machine_and_writes_nothing() {
    let mut plans = Vec::new();
    for (m, driver, uncore, _) in MACHINES {
        let t = machine(m);
        let want = expected(&t);
        let j = json(&t, &["study", "--plan", "--json"]);
        let machine: BTreeMap<&str, &str> = j["machine"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_str().unwrap(), p[1].as_str().unwrap()))
            .collect();
        assert_eq!(machine["cpuidle driver"], want.cpuidle_driver, "{m}");
        assert_eq!(machine["cpufreq driver"], driver, "{m}");
        assert_eq!(machine["idle states"], want.states.join(" "), "{m}");
        assert_eq!(machine["uncore domains"], uncore.to_string(), "{m}");
        assert!(
            machine["topology"]
                .starts_with(&format!("{} CPUs, {} packages", want.cpus, want.packages)),
            "{m}: {}",
            machine["topology"]
        );
        let stages = j["stages"].as_array().unwrap();
        assert!(!stages.is_empty(), "{m}");
        for s in stages {
            assert!(
                s["skip"].is_string() || !s["steps"].as_array().unwrap().is_empty(),
                "{m}: a stage that neither runs nor says why: {s}"
            );
        }
        let text = run(&t, &["study", "--plan"]);
        let states = format!("idle states: {}", want.states.join(" "));
        assert!(text.starts_with("machine ("), "{m}: {text}");
        assert!(text.contains(&states), "{m}: no `{states}` in:\n{text}");
        plans.push(j["machine"].clone());
    }
    assert_ne!(plans[0], plans[1], "the two machines' plans read the same");
}

it_test!(metal_study_plan_root_compares_the_frequency_driver_and_uncore_each_machine_has);
/// The frequency stage compares what the driver offers (EPP on intel_pstate active; the
/// governors on acpi-cpufreq, and on amd-pstate-epp whose performance governor lists only
/// the EPP `performance`), the uncore stage runs where uncore control exists: the stages
/// themselves differ between the machines, not only the facts above them.
fn metal_study_plan_root_compares_the_frequency_driver_and_uncore_each_machine_has() {
    let cases = [
        (
            "spr1",
            "cpufreq.epp=performance; cpufreq.epp=balance_power",
            true,
        ),
        (
            "genoa0",
            "cpufreq.governor=performance; cpufreq.governor=schedutil",
            false,
        ),
        (
            "turin0",
            "cpufreq.governor=performance; cpufreq.governor=powersave",
            false,
        ),
    ];
    let mut stages = Vec::new();
    for (m, pair, uncore) in cases {
        let t = machine(m);
        let j = json(&t, &["study", "--plan", "--quick", "--json"]);
        let stage = |name: &str| {
            j["stages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["stage"] == name)
                .unwrap_or_else(|| panic!("{m}: no stage {name}"))
                .clone()
        };
        let freq = stage("frequency");
        let step = freq["steps"][0]
            .as_str()
            .unwrap_or_else(|| panic!("{m}: {freq}"));
        assert!(
            step.contains(&format!("configurations [{pair}]")),
            "{m}: {step}"
        );
        let u = stage("uncore");
        if uncore {
            let step = u["steps"][0].as_str().unwrap_or_else(|| panic!("{m}: {u}"));
            assert!(
                step.contains("uncore.max_freq=max; uncore.min_freq=min uncore.max_freq=min"),
                "{m}: {step}"
            );
        } else {
            let why = u["skip"].as_str().unwrap_or_else(|| panic!("{m}: {u}"));
            assert!(why.contains("no uncore frequency control"), "{m}: {why}");
        }
        stages.push(j["stages"].clone());
    }
    assert_ne!(stages[0], stages[1], "spr1 and genoa0 plan the same stages");
    assert_ne!(
        stages[1], stages[2],
        "genoa0 and turin0 plan the same stages"
    );
}

it_test!(metal_reading_commands_end_quietly_on_a_closed_pipe);
/// `pmlab knob list --root T | head -1` and the other reading commands under `--root`: long
/// outputs, ended by SIGPIPE as `cat` is, never with a panic.
fn metal_reading_commands_end_quietly_on_a_closed_pipe() {
    let t = machine("spr1");
    let root = dir(&t);
    let root = root.to_str().unwrap();
    for args in [
        &["knob", "list"][..],
        &["knob", "get", "epb@all"],
        &["study", "--plan"],
        &["info"],
    ] {
        let mut full = args.to_vec();
        full.extend(["--root", root]);
        crate::util::assert_quiet_on_closed_pipe(&full);
    }
}

/// `pmlab ARGS --root` on `t`: its JSON, or the first line of its error.
fn try_json(t: &EmulRoot, args: &[&str]) -> Result<Value, String> {
    let root = dir(t);
    let cwd = tempfile::tempdir().unwrap();
    let out = pmlab()
        .current_dir(cwd.path())
        .args(args)
        .args(["--root", root.to_str().unwrap()])
        .output()
        .unwrap();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(err.lines().next().unwrap_or("no message").to_string());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("not JSON: {e}"))
}

it_test!(metal_every_machine_reads_lists_and_plans_without_error);
fn metal_every_machine_reads_lists_and_plans_without_error() {
    if std::env::var_os("PMLAB_PEPC_ALL").is_none_or(|v| v.is_empty() || v == "0") {
        skip!(
            "set PMLAB_PEPC_ALL=1: builds the 46 machines' trees (about 4 min on a 2-vCPU guest)"
        );
    }
    let data = match emul::data_dir() {
        Ok(d) => d,
        Err(why) => skip!("{why}"),
    };
    let machines = emul::machines(&data);
    let mut failures = Vec::new();
    // Each distinct plan (what it read of the machine that steers the study, and which
    // stages run) with the machines that got it.
    let mut plans: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in &machines {
        let t = emul::build_temp(&data.join(m)).unwrap();
        for args in [&["info", "--json"][..], &["knob", "list", "--json"]] {
            if let Err(e) = try_json(&t, args) {
                failures.push(format!("{m}: {}: {e}", args.join(" ")));
            }
        }
        match try_json(&t, &["study", "--plan", "--json"]) {
            Err(e) => failures.push(format!("{m}: study --plan: {e}")),
            Ok(j) => {
                let read: Vec<String> = j["machine"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|p| {
                        [
                            "cpuidle driver",
                            "idle states",
                            "cpufreq driver",
                            "pstate mode",
                            "uncore domains",
                        ]
                        .contains(&p[0].as_str().unwrap())
                    })
                    .map(|p| format!("{}={}", p[0].as_str().unwrap(), p[1].as_str().unwrap()))
                    .collect();
                let stages: Vec<String> = j["stages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| {
                        let name = s["stage"].as_str().unwrap_or("?");
                        if s["skip"].is_string() {
                            format!("-{name}")
                        } else {
                            format!("+{name}")
                        }
                    })
                    .collect();
                let key = format!("{} | {}", read.join(", "), stages.join(" "));
                plans.entry(key).or_default().push(m.clone());
            }
        }
    }
    for (plan, ms) in &plans {
        eprintln!("{} machines: {plan}: {}", ms.len(), ms.join(" "));
    }
    eprintln!(
        "{} of {} machines read, listed and planned without error; {} distinct plans",
        machines.len()
            - failures
                .iter()
                .map(|f| f.split(':').next())
                .collect::<BTreeSet<_>>()
                .len(),
        machines.len(),
        plans.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(plans.len() > 1, "every machine got the same plan");
}
