//! The reading commands under `--root` on real machines' trees (Intel pepc's emulation data
//! through `pmlab_kernel::sysinfo::emul`; skipped with the reason where it is absent): `info`,
//! `knob list`, `knob get` and `study --plan` on an Intel server (spr1: intel_pstate, legacy
//! uncore), AMD servers (genoa0: acpi-cpufreq; turin0: amd-pstate-epp), a Xeon Phi (knl0:
//! intel_pstate passive, 4 threads per core) and a hybrid client (adl0: P and E cores), each
//! checked against the tree's own files, with nothing written under the root or in the
//! working directory; and, with `PMLAB_PEPC_ALL=1`, the same checks on every machine of the
//! data. The checks read the files here, without pmlab's readers, and skip an item where the
//! tree lacks it.

use crate::util::pmlab;
use pmlab_kernel::sysinfo::emul::{self, EmulRoot};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{Debug, Display};
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

/// What the tree's own files say, read here without pmlab's readers; empty or `None` where
/// the tree lacks the file.
struct Expected {
    /// `/proc/sys/kernel/osrelease`, else the release in `/proc/version`.
    release: Option<String>,
    /// `processor` lines of `/proc/cpuinfo`.
    cpus: usize,
    /// Distinct `physical id`s.
    packages: usize,
    /// Distinct (`physical id`, `core id`) pairs.
    cores: usize,
    /// The most CPUs of one core.
    threads_per_core: usize,
    /// The first policy's `scaling_driver`; `None`: no cpufreq policy.
    cpufreq_driver: Option<String>,
    /// `cpuidle/current_driver`.
    cpuidle_driver: Option<String>,
    /// cpu0's idle state names, by index.
    states: Vec<String>,
    /// Uncore frequency domains (legacy `package_*_die_*` or TPMI `uncore*`), by directory.
    uncore: Vec<String>,
    /// CPUs with an `energy_perf_bias` file.
    epb_cpus: usize,
    /// CPUs with a `pm_qos_resume_latency_us` file.
    pmqos_cpus: usize,
    /// CPUs of each package (`physical id`).
    package_cpus: BTreeMap<u32, usize>,
    /// `policyN` numbers.
    policies: Vec<u32>,
    /// Hybrid core types: `cpu_core`, `cpu_atom`, `cpu_lowpower` without `cpu_`, and CPUs.
    core_types: BTreeMap<String, Vec<u64>>,
    /// NUMA nodes and their CPUs.
    nodes: BTreeMap<u32, Vec<u64>>,
}

const CPU: &str = "/sys/devices/system/cpu";
const UNCORE: &str = "/sys/devices/system/cpu/intel_uncore_frequency";

/// `0-3,8` as the kernel writes CPU lists, parsed here on purpose (not with pmlab's parser).
fn cpu_list(s: &str) -> Vec<u64> {
    s.trim()
        .split(',')
        .filter(|p| !p.is_empty())
        .flat_map(|p| match p.split_once('-') {
            Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).collect::<Vec<u64>>(),
            None => vec![p.parse().unwrap()],
        })
        .collect()
}

/// The numbers N of the entries `PREFIXN` in `dir`, sorted.
fn numbered(t: &EmulRoot, dir: &str, prefix: &str) -> Vec<u32> {
    let mut out: Vec<u32> = std::fs::read_dir(t.root.path(dir))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.strip_prefix(prefix)?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn expected(t: &EmulRoot) -> Expected {
    let release = file(t, "/proc/sys/kernel/osrelease").or_else(|| {
        file(t, "/proc/version")?
            .strip_prefix("Linux version ")?
            .split_whitespace()
            .next()
            .map(String::from)
    });
    let cpuinfo = file(t, "/proc/cpuinfo").unwrap_or_default();
    let field = |l: &str| l.split(':').nth(1).unwrap().trim().to_string();
    let mut package_cpus = BTreeMap::new();
    let mut core_cpus: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    let mut cpus = 0;
    for block in cpuinfo.split("\n\n").filter(|b| b.contains("processor")) {
        cpus += 1;
        let get = |k: &str| {
            block
                .lines()
                .find(|l| l.split(':').next().unwrap().trim() == k)
                .map(|l| field(l).parse::<u32>().unwrap())
        };
        if let Some(p) = get("physical id") {
            *package_cpus.entry(p).or_insert(0) += 1;
            if let Some(c) = get("core id") {
                *core_cpus.entry((p, c)).or_insert(0) += 1;
            }
        }
    }
    let mut states: Vec<(u32, String)> = numbered(t, &format!("{CPU}/cpu0/cpuidle"), "state")
        .into_iter()
        .filter_map(|n| Some((n, file(t, &format!("{CPU}/cpu0/cpuidle/state{n}/name"))?)))
        .collect();
    states.sort();
    let mut uncore: Vec<String> = std::fs::read_dir(t.root.path(UNCORE))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("package_") || n.starts_with("uncore"))
                .collect()
        })
        .unwrap_or_default();
    uncore.sort();
    let with = |rel: &str| {
        numbered(t, CPU, "cpu")
            .into_iter()
            .filter(|n| t.root.path(&format!("{CPU}/cpu{n}/{rel}")).is_file())
            .count()
    };
    let policies = numbered(t, &format!("{CPU}/cpufreq"), "policy");
    let core_types = ["core", "atom", "lowpower"]
        .into_iter()
        .filter_map(|k| {
            Some((
                k.to_string(),
                cpu_list(&file(t, &format!("/sys/devices/cpu_{k}/cpus"))?),
            ))
        })
        .collect();
    let nodes = numbered(t, "/sys/devices/system/node", "node")
        .into_iter()
        .filter_map(|n| {
            Some((
                n,
                cpu_list(&file(
                    t,
                    &format!("/sys/devices/system/node/node{n}/cpulist"),
                )?),
            ))
        })
        .collect();
    Expected {
        release,
        cpus,
        packages: package_cpus.len(),
        cores: core_cpus.len(),
        threads_per_core: core_cpus.values().copied().max().unwrap_or(0),
        cpufreq_driver: policies
            .first()
            .and_then(|p| file(t, &format!("{CPU}/cpufreq/policy{p}/scaling_driver"))),
        cpuidle_driver: file(t, &format!("{CPU}/cpuidle/current_driver")),
        states: states.into_iter().map(|(_, n)| n).collect(),
        uncore,
        epb_cpus: with("power/energy_perf_bias"),
        pmqos_cpus: with("power/pm_qos_resume_latency_us"),
        package_cpus,
        policies,
        core_types,
        nodes,
    }
}

/// The mismatches one machine's checks found, each naming the item.
#[derive(Default)]
struct Fails(Vec<String>);

impl Fails {
    fn eq<A: PartialEq<B> + Debug, B: Debug>(&mut self, what: impl Display, got: A, want: B) {
        if got != want {
            self.0
                .push(format!("{what}: pmlab says {got:?}, the tree {want:?}"));
        }
    }
    fn ok(&mut self, what: impl Display, holds: bool) {
        if !holds {
            self.0.push(what.to_string());
        }
    }
    /// Panics with every mismatch of machine `m`.
    fn assert(self, m: &str) {
        assert!(self.0.is_empty(), "{m}:\n  {}", self.0.join("\n  "));
    }
}

/// A JSON number or boolean against a file's text (`0`/`1` for booleans).
fn same(v: &Value, text: &str) -> bool {
    match v {
        Value::Bool(b) => text == if *b { "1" } else { "0" },
        Value::String(s) => s == text,
        v => serde_json::to_string(v).is_ok_and(|s| s == text),
    }
}

/// `info --json` and `info` against the tree's files: release, counts, hybrid core types,
/// NUMA nodes, cpufreq (driver, every policy's limits, governor and EPP, intel_pstate's and
/// amd-pstate's files), cpuidle (driver, state names), uncore domains, EPB and PM QoS per
/// CPU, ASPM.
fn check_info(t: &EmulRoot, want: &Expected, j: &Value, text: &str) -> Fails {
    let mut f = Fails::default();
    match &want.release {
        Some(r) => f.eq("kernel.release", &j["kernel"]["release"], r.as_str()),
        None => f.eq(
            "kernel.release (absent)",
            &j["unavailable"]["kernel.release"]["status"],
            "absent",
        ),
    }
    let c = &j["layout"]["counts"];
    if want.cpus > 0 {
        f.eq("counts.cpus", &c["cpus"], want.cpus);
    }
    if want.packages > 0 {
        f.eq("counts.packages", &c["packages"], want.packages);
        let counts = format!("{} packages", want.packages);
        f.ok(format!("info: no `{counts}`"), text.contains(&counts));
    }
    if want.cores > 0 {
        f.eq("counts.cores", &c["cores"], want.cores);
        f.eq(
            "counts.threads_per_core",
            &c["threads_per_core"],
            want.threads_per_core,
        );
    }
    let types: BTreeMap<String, Vec<u64>> = j["layout"]["core_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["name"].as_str().unwrap().to_string(),
                serde_json::from_value(x["cpus"].clone()).unwrap(),
            )
        })
        .collect();
    f.eq("layout.core_types", &types, &want.core_types);
    let nodes: BTreeMap<u32, Vec<u64>> = j["layout"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["id"].as_u64().unwrap() as u32,
                serde_json::from_value(x["cpus"].clone()).unwrap(),
            )
        })
        .collect();
    f.eq("layout.nodes", &nodes, &want.nodes);

    let freq = &j["cpufreq"];
    match &want.cpufreq_driver {
        None => f.ok(
            format!("cpufreq: no policy in the tree, yet {freq}"),
            want.policies.is_empty() == freq.is_null(),
        ),
        Some(d) => {
            f.eq("cpufreq.driver", &freq["driver"], d.as_str());
            f.ok(
                format!("info: no cpufreq driver `{d}`"),
                text.contains(d.as_str()),
            );
            let policies = freq["policies"].as_array().unwrap();
            f.eq("cpufreq.policies", policies.len(), want.policies.len());
            for (p, id) in policies.iter().zip(&want.policies) {
                let base = format!("{CPU}/cpufreq/policy{id}");
                for (key, name) in [
                    ("driver", "scaling_driver"),
                    ("governor", "scaling_governor"),
                    ("min", "scaling_min_freq"),
                    ("max", "scaling_max_freq"),
                    ("hw_min", "cpuinfo_min_freq"),
                    ("hw_max", "cpuinfo_max_freq"),
                    ("base", "base_frequency"),
                    ("avg", "cpuinfo_avg_freq"),
                    ("boost", "boost"),
                    ("epp", "energy_performance_preference"),
                ] {
                    if let Some(v) = file(t, &format!("{base}/{name}")) {
                        f.ok(
                            format!("policy{id}.{key}: pmlab says {}, {name} {v:?}", p[key]),
                            same(&p[key], &v),
                        );
                    }
                }
            }
            let ip = &freq["intel_pstate"];
            for name in [
                "status",
                "no_turbo",
                "min_perf_pct",
                "max_perf_pct",
                "hwp_dynamic_boost",
            ] {
                if let Some(v) = file(t, &format!("{CPU}/intel_pstate/{name}")) {
                    f.ok(
                        format!(
                            "intel_pstate.{name}: pmlab says {}, the tree {v:?}",
                            ip[name]
                        ),
                        same(&ip[name], &v),
                    );
                }
            }
            if let Some(v) = file(t, &format!("{CPU}/amd_pstate/status")) {
                f.eq("amd_pstate_status", &freq["amd_pstate_status"], v.as_str());
            }
        }
    }

    let idle = &j["cpuidle"];
    if let Some(d) = &want.cpuidle_driver {
        f.eq("cpuidle.driver", &idle["driver"], d.as_str());
    }
    if !want.states.is_empty() {
        let names: Vec<&str> = idle["cpus"][0]["states"]
            .as_array()
            .map(|s| {
                s.iter()
                    .map(|s| s["name"].as_str().unwrap_or("?"))
                    .collect()
            })
            .unwrap_or_default();
        f.eq("cpu0 idle states", names, want.states.clone());
    }

    // Every CPU's idle states, field by field.
    for c in idle["cpus"].as_array().into_iter().flatten() {
        let cpu = &c["cpu"];
        for st in c["states"].as_array().into_iter().flatten() {
            let base = format!("{CPU}/cpu{cpu}/cpuidle/state{}", st["index"]);
            for (key, name) in [
                ("name", "name"),
                ("desc", "desc"),
                ("latency_us", "latency"),
                ("residency_us", "residency"),
                ("usage", "usage"),
                ("time_us", "time"),
                ("above", "above"),
                ("below", "below"),
                ("rejected", "rejected"),
                ("disabled", "disable"),
                ("default_status", "default_status"),
            ] {
                if let Some(v) = file(t, &format!("{base}/{name}")) {
                    if !same(&st[key], &v) {
                        f.0.push(format!(
                            "{base}/{name}: pmlab says {}, the tree {v:?}",
                            st[key]
                        ));
                    }
                }
            }
        }
    }
    // Every CPU's package, core, die, node and core type; its thread siblings.
    let cpuinfo = file(t, "/proc/cpuinfo").unwrap_or_default();
    let mut place: BTreeMap<u64, (Option<u64>, Option<u64>)> = BTreeMap::new();
    for block in cpuinfo.split("\n\n") {
        let get = |k: &str| {
            block
                .lines()
                .find(|l| l.split(':').next().unwrap().trim() == k)
                .and_then(|l| l.split(':').nth(1)?.trim().parse::<u64>().ok())
        };
        if let Some(n) = get("processor") {
            place.insert(n, (get("physical id"), get("core id")));
        }
    }
    let of_node = |cpu: u64| {
        want.nodes
            .iter()
            .find(|(_, c)| c.contains(&cpu))
            .map(|(n, _)| *n as u64)
    };
    let of_type = |cpu: u64| {
        want.core_types
            .iter()
            .find(|(_, c)| c.contains(&cpu))
            .map(|(n, _)| n.clone())
    };
    for tp in j["topology"].as_array().into_iter().flatten() {
        let cpu = tp["cpu"].as_u64().unwrap();
        let topo = |n: &str| {
            file(t, &format!("{CPU}/cpu{cpu}/topology/{n}")).and_then(|v| v.parse::<u64>().ok())
        };
        let (pkg, core) = place.get(&cpu).copied().unwrap_or_default();
        if let Some(p) = topo("physical_package_id").or(pkg) {
            f.eq(format!("cpu{cpu}.package"), tp["package"].as_u64(), Some(p));
        }
        if let Some(c) = topo("core_id").or(core) {
            f.eq(format!("cpu{cpu}.core"), tp["core"].as_u64(), Some(c));
            let siblings: Vec<u64> = place
                .iter()
                .filter(|(_, pc)| **pc == (pkg, core))
                .map(|(n, _)| *n)
                .collect();
            if topo("core_id").is_none() && pkg.is_some() {
                f.eq(
                    format!("cpu{cpu}.thread_siblings"),
                    serde_json::from_value::<Vec<u64>>(tp["thread_siblings"].clone()).ok(),
                    Some(siblings),
                );
            }
        }
        if let Some(d) = topo("die_id") {
            f.eq(format!("cpu{cpu}.die"), tp["die"].as_u64(), Some(d));
        }
        if !want.nodes.is_empty() {
            f.eq(format!("cpu{cpu}.node"), tp["node"].as_u64(), of_node(cpu));
        }
        f.eq(
            format!("cpu{cpu}.core_type"),
            tp["core_type"].as_str().map(String::from),
            of_type(cpu),
        );
    }
    // Caches: one entry per instance, its id and CPUs as the first CPU's files say.
    for c in j["layout"]["caches"].as_array().unwrap() {
        let first = &c["cpus"][0];
        let base = format!("{CPU}/cpu{first}/cache/index{}", c["index"]);
        if let Some(v) = file(t, &format!("{base}/id")) {
            f.ok(
                format!("{base}/id: pmlab says {}, the tree {v:?}", c["id"]),
                same(&c["id"], &v),
            );
        }
        if let Some(v) = file(t, &format!("{base}/shared_cpu_list")) {
            f.eq(
                format!("{base}/shared_cpu_list"),
                serde_json::from_value::<Vec<u64>>(c["cpus"].clone()).ok(),
                Some(cpu_list(&v)),
            );
        }
        for (key, name) in [("level", "level"), ("type", "type")] {
            if let Some(v) = file(t, &format!("{base}/{name}")) {
                f.ok(
                    format!("{base}/{name}: pmlab says {}, the tree {v:?}", c[key]),
                    same(&c[key], &v),
                );
            }
        }
    }

    let power = &j["power"];
    // ACPI CPPC of every CPU listed.
    for g in power["cppc"].as_array().unwrap() {
        for cpu in g["cpus"].as_array().unwrap() {
            for (key, name) in [
                ("highest_perf", "highest_perf"),
                ("nominal_perf", "nominal_perf"),
                ("lowest_nonlinear_perf", "lowest_nonlinear_perf"),
                ("lowest_perf", "lowest_perf"),
                ("guaranteed_perf", "guaranteed_perf"),
                ("reference_perf", "reference_perf"),
                ("nominal_freq_mhz", "nominal_freq"),
                ("lowest_freq_mhz", "lowest_freq"),
            ] {
                if let Some(v) = file(t, &format!("{CPU}/cpu{cpu}/acpi_cppc/{name}")) {
                    let got = &g["value"][key];
                    f.ok(
                        format!("cpu{cpu}/acpi_cppc/{name}: pmlab says {got}, the tree {v:?}"),
                        same(got, &v),
                    );
                }
            }
        }
    }
    let cppc_cpus: usize = power["cppc"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["cpus"].as_array().unwrap().len())
        .sum();
    let cppc_dirs = numbered(t, CPU, "cpu")
        .into_iter()
        .filter(|n| t.root.path(&format!("{CPU}/cpu{n}/acpi_cppc")).is_dir())
        .count();
    f.eq("cppc: CPUs listed", cppc_cpus, cppc_dirs);
    if let Some(v) = file(t, &format!("{CPU}/cpuidle/intel_c1_demotion")) {
        f.eq(
            "c1_demotion",
            power["c1_demotion"].as_str(),
            Some(v.as_str()),
        );
    }
    let domains = power["uncore"].as_array().unwrap();
    let mut dirs: Vec<&str> = domains.iter().map(|d| d["dir"].as_str().unwrap()).collect();
    dirs.sort();
    f.eq("uncore domains", dirs, want.uncore.clone());
    for d in domains {
        let base = format!("{UNCORE}/{}", d["dir"].as_str().unwrap());
        for (key, name) in [
            ("min", "min_freq_khz"),
            ("max", "max_freq_khz"),
            ("hw_min", "initial_min_freq_khz"),
            ("hw_max", "initial_max_freq_khz"),
        ] {
            if let Some(v) = file(t, &format!("{base}/{name}")) {
                f.eq(format!("{base}/{name}"), d[key].to_string(), v);
            }
        }
    }
    for (key, rel, cpus) in [
        ("epb", "energy_perf_bias", want.epb_cpus),
        (
            "pmqos_resume_latency_us",
            "pm_qos_resume_latency_us",
            want.pmqos_cpus,
        ),
    ] {
        let groups = power[key].as_array().unwrap();
        let listed: usize = groups
            .iter()
            .map(|g| g["cpus"].as_array().unwrap().len())
            .sum();
        f.eq(format!("{key}: CPUs listed"), listed, cpus);
        for g in groups {
            for cpu in g["cpus"].as_array().unwrap() {
                let v = file(t, &format!("{CPU}/cpu{cpu}/power/{rel}"));
                f.eq(
                    format!("{key} of cpu{cpu}"),
                    g["value"].as_str(),
                    v.as_deref(),
                );
            }
        }
    }
    if let Some(v) = file(t, "/sys/module/pcie_aspm/parameters/policy") {
        let selected = v
            .split_whitespace()
            .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'));
        f.eq("aspm.policy", power["aspm"]["policy"].as_str(), selected);
    }
    f
}

/// `knob list --json` against the tree's files: each value equals its file (ASPM: the
/// bracketed word; intel_pstate turbo: `no_turbo` inverted), each kind has one scope, and
/// each kind the tree supports is listed with its scope and count.
fn check_knob_list(t: &EmulRoot, want: &Expected, j: &Value, text: &str) -> Fails {
    let mut f = Fails::default();
    let mut kinds: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for k in j.as_array().unwrap() {
        let name = k["name"].as_str().unwrap();
        let kind = name.split('@').next().unwrap().to_string();
        let scope = k["scope"].as_str().unwrap().to_string();
        let e = kinds.entry(kind.clone()).or_insert((scope.clone(), 0));
        f.eq(format!("{kind}: one scope"), &scope, &e.0);
        e.1 += 1;
        let path = k["file"].as_str().unwrap();
        let raw = std::fs::read_to_string(path).unwrap_or_default();
        let raw = raw.trim();
        let v = k["value"].as_str().unwrap_or("?");
        match kind.as_str() {
            "aspm.policy" => f.ok(
                format!("{name}: {v} not the bracketed word of {raw}"),
                raw.contains(&format!("[{v}]")),
            ),
            "cpufreq.turbo" if path.ends_with("no_turbo") => f.eq(
                format!("{name} ({path})"),
                v,
                if raw == "0" { "1" } else { "0" },
            ),
            k if k.starts_with("msr.") => {
                // The field's bits of the register at its offset of /dev/cpu/N/msr.
                let (addr, lo, width) = msr_field(k);
                let bytes = std::fs::read(path).unwrap_or_default();
                let bits = bytes.get(addr..addr + 8).map(|b| {
                    let r = u64::from_le_bytes(b.try_into().unwrap());
                    ((r >> lo) & ((1 << width) - 1)).to_string()
                });
                f.eq(format!("{name} ({path})"), Some(v.to_string()), bits);
            }
            _ => f.eq(format!("{name} ({path})"), v, raw),
        }
    }
    let kind = |k: &str| kinds.get(k).map(|(s, n)| (s.as_str(), *n));
    let has = |abs: &str| t.root.path(abs).is_file();
    for s in &want.states {
        f.eq(
            format!("cpuidle.{s}.disable"),
            kind(&format!("cpuidle.{s}.disable")),
            Some(("cpu", want.cpus)),
        );
    }
    let pmqos = (want.pmqos_cpus > 0).then_some(("cpu", want.pmqos_cpus));
    f.eq(
        "pmqos.resume_latency_us",
        kind("pmqos.resume_latency_us"),
        pmqos,
    );
    let epb = (want.epb_cpus > 0).then_some(("cpu", want.epb_cpus));
    f.eq("epb", kind("epb"), epb);
    // Where the kernel shows TPMI domains (`uncoreNN`) beside the legacy per-package ones,
    // the knob sets the TPMI ones: the same hardware is not written twice.
    let tpmi = want
        .uncore
        .iter()
        .filter(|d| d.starts_with("uncore"))
        .count();
    let domains = if tpmi > 0 { tpmi } else { want.uncore.len() };
    let uncore = (domains > 0).then_some(("die", domains));
    f.eq("uncore.max_freq", kind("uncore.max_freq"), uncore);
    f.eq("uncore.min_freq", kind("uncore.min_freq"), uncore);
    let aspm = has("/sys/module/pcie_aspm/parameters/policy").then_some(("global", 1));
    f.eq("aspm.policy", kind("aspm.policy"), aspm);
    for (k, file) in [
        ("intel_pstate.no_turbo", "intel_pstate/no_turbo"),
        ("intel_pstate.status", "intel_pstate/status"),
        ("intel_pstate.min_perf_pct", "intel_pstate/min_perf_pct"),
        ("intel_pstate.max_perf_pct", "intel_pstate/max_perf_pct"),
        (
            "intel_pstate.hwp_dynamic_boost",
            "intel_pstate/hwp_dynamic_boost",
        ),
        ("amd_pstate.status", "amd_pstate/status"),
        ("cpufreq.boost", "cpufreq/boost"),
    ] {
        let global = has(&format!("{CPU}/{file}")).then_some(("global", 1));
        f.eq(k, kind(k), global);
    }
    // Per policy, where every policy has the file.
    let policies = |name: &str| {
        (!want.policies.is_empty()
            && want
                .policies
                .iter()
                .all(|p| has(&format!("{CPU}/cpufreq/policy{p}/{name}"))))
        .then_some(("policy", want.policies.len()))
    };
    for (k, name) in [
        ("cpufreq.governor", "scaling_governor"),
        ("cpufreq.min_freq", "scaling_min_freq"),
        ("cpufreq.max_freq", "scaling_max_freq"),
        ("cpufreq.epp", "energy_performance_preference"),
    ] {
        f.eq(k, kind(k), policies(name));
    }
    // Turbo: intel_pstate's no_turbo, else the global boost, else each policy's boost.
    let turbo =
        if has(&format!("{CPU}/intel_pstate/no_turbo")) || has(&format!("{CPU}/cpufreq/boost")) {
            Some(("global", 1))
        } else {
            policies("boost")
        };
    f.eq("cpufreq.turbo", kind("cpufreq.turbo"), turbo);
    // MSR knobs: per CPU on Intel where /dev/cpu/N/msr exists, absent elsewhere.
    let intel = file(t, "/proc/cpuinfo").is_some_and(|c| c.contains("GenuineIntel"));
    let msr_cpus = std::fs::read_dir(t.root.path("/dev/cpu"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().join("msr").is_file())
                .count()
        })
        .unwrap_or(0);
    for k in [
        "msr.pkg_cstate_limit",
        "msr.c1_demotion",
        "msr.c1e_autopromote",
    ] {
        let want = (intel && msr_cpus > 0).then_some(("cpu", msr_cpus));
        f.eq(k, kind(k), want);
    }
    let header = text.lines().find(|l| l.contains("knob")).unwrap_or("");
    f.ok(
        format!("knob list: no scope column in `{header}`"),
        header.contains("scope"),
    );
    f
}

/// `study --plan --json` and its text against the tree: the facts it read, every stage
/// running or saying why not, the frequency stage comparing EPP where every policy offers
/// `performance` and `balance_power` (else governors), the uncore stage where uncore exists.
fn check_plan(t: &EmulRoot, want: &Expected, j: &Value, text: &str) -> Fails {
    let mut f = Fails::default();
    let machine: BTreeMap<&str, &str> = j["machine"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_str().unwrap(), p[1].as_str().unwrap()))
        .collect();
    if let Some(d) = want.cpuidle_driver.as_deref().filter(|d| *d != "none") {
        f.eq(
            "plan: cpuidle driver",
            machine.get("cpuidle driver").copied(),
            Some(d),
        );
    }
    f.eq(
        "plan: cpufreq driver",
        machine.get("cpufreq driver").copied(),
        Some(want.cpufreq_driver.as_deref().unwrap_or("none")),
    );
    f.eq(
        "plan: idle states",
        machine.get("idle states").copied(),
        Some(want.states.join(" ").as_str()),
    );
    f.eq(
        "plan: uncore domains",
        machine.get("uncore domains").copied(),
        Some(want.uncore.len().to_string().as_str()),
    );
    let topo = format!("{} CPUs, {} packages", want.cpus, want.packages);
    f.ok(
        format!(
            "plan: topology {:?} does not start with {topo:?}",
            machine.get("topology")
        ),
        machine
            .get("topology")
            .is_some_and(|x| x.starts_with(&topo)),
    );
    let stages = j["stages"].as_array().unwrap();
    for s in stages {
        f.ok(
            format!("plan: a stage that neither runs nor says why: {s}"),
            s["skip"].is_string() || !s["steps"].as_array().unwrap().is_empty(),
        );
    }
    let stage = |name: &str| stages.iter().find(|s| s["stage"] == name);
    let step = |name: &str| {
        stage(name)
            .and_then(|s| s["steps"][0].as_str())
            .unwrap_or("")
    };
    let epp_pair = !want.policies.is_empty()
        && want.policies.iter().all(|p| {
            let l = file(
                t,
                &format!("{CPU}/cpufreq/policy{p}/energy_performance_available_preferences"),
            )
            .unwrap_or_default();
            l.split_whitespace().any(|w| w == "performance")
                && l.split_whitespace().any(|w| w == "balance_power")
        });
    if want.policies.is_empty() {
        let why = stage("frequency")
            .and_then(|s| s["skip"].as_str())
            .unwrap_or("");
        f.ok(
            format!("plan: frequency runs without cpufreq: {why}"),
            why.contains("no cpufreq driver"),
        );
    } else if epp_pair {
        f.ok(
            format!(
                "plan: frequency does not compare EPP: {}",
                step("frequency")
            ),
            step("frequency").contains("cpufreq.epp=performance; ")
                && step("frequency").contains("cpufreq.epp=balance_power]"),
        );
    } else if !step("frequency").is_empty() {
        f.ok(
            format!(
                "plan: frequency does not compare governors: {}",
                step("frequency")
            ),
            step("frequency").contains("[cpufreq.governor=performance; cpufreq.governor="),
        );
    }
    if want.uncore.is_empty() {
        let why = stage("uncore")
            .and_then(|s| s["skip"].as_str())
            .unwrap_or("");
        f.ok(
            format!("plan: uncore runs without uncore: {why}"),
            why.contains("no uncore frequency control"),
        );
    } else {
        f.ok(
            format!("plan: uncore stage: {}", step("uncore")),
            step("uncore").contains("uncore.max_freq=min"),
        );
    }
    let states = format!("idle states: {}", want.states.join(" "));
    f.ok(
        format!("plan text: no `{states}`"),
        text.starts_with("machine (") && text.contains(&states),
    );
    f
}

/// What is known of each machine of the detailed tests (not read from its files): its
/// cpufreq driver, uncore domains, EPB, and the frequency stage's configurations.
struct Known {
    name: &'static str,
    driver: &'static str,
    uncore: usize,
    epb: bool,
    frequency: &'static str,
}

const MACHINES: [Known; 5] = [
    Known {
        name: "spr1",
        driver: "intel_pstate",
        uncore: 4,
        epb: true,
        frequency: "cpufreq.epp=performance; cpufreq.epp=balance_power",
    },
    Known {
        name: "genoa0",
        driver: "acpi-cpufreq",
        uncore: 0,
        epb: false,
        frequency: "cpufreq.governor=performance; cpufreq.governor=schedutil",
    },
    // amd-pstate-epp under the performance governor, which lists only the EPP `performance`.
    Known {
        name: "turin0",
        driver: "amd-pstate-epp",
        uncore: 0,
        epb: false,
        frequency: "cpufreq.governor=performance; cpufreq.governor=powersave",
    },
    // Xeon Phi: intel_pstate passive (intel_cpufreq), 4 threads per core.
    Known {
        name: "knl0",
        driver: "intel_cpufreq",
        uncore: 0,
        epb: true,
        frequency: "cpufreq.governor=performance; cpufreq.governor=schedutil",
    },
    // Hybrid: P cores (cpu_core) and E cores (cpu_atom).
    Known {
        name: "adl0",
        driver: "intel_pstate",
        uncore: 1,
        epb: true,
        frequency: "cpufreq.epp=performance; cpufreq.epp=balance_power",
    },
];

/// Each machine of the detailed tests, with its tree and what its files say; the data's
/// facts are checked against what is known of the machine first.
fn each_machine(mut test: impl FnMut(&Known, &EmulRoot, &Expected)) {
    for k in &MACHINES {
        let t = machine(k.name);
        let want = expected(&t);
        let m = k.name;
        assert_eq!(
            want.cpufreq_driver.as_deref(),
            Some(k.driver),
            "{m}: the data changed"
        );
        assert_eq!(want.uncore.len(), k.uncore, "{m}: the data changed");
        assert_eq!(want.epb_cpus > 0, k.epb, "{m}: the data changed");
        test(k, &t, &want);
    }
}

it_test!(metal_info_root_reports_the_trees_facts_and_writes_nothing);
fn metal_info_root_reports_the_trees_facts_and_writes_nothing() {
    let mut shapes = Default::default();
    each_machine(|k, t, want| {
        let j = json(t, &["info", "--json"]);
        let text = run(t, &["info"]);
        check_info(t, want, &j, &text).assert(k.name);
        crate::util::info_json_shapes(&j, &mut shapes);
        match k.name {
            "knl0" => assert_eq!(j["layout"]["counts"]["threads_per_core"], 4),
            "adl0" => {
                let types: Vec<&str> = j["layout"]["core_types"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x["name"].as_str().unwrap())
                    .collect();
                assert_eq!(types, ["core", "atom"], "adl0: P and E cores");
                assert_eq!(j["topology"][8]["core_type"], "atom", "adl0");
            }
            _ => {}
        }
    });
    let two = crate::util::two_shapes(&shapes);
    assert!(two.is_empty(), "keys with two shapes: {two:#?}");
}

it_test!(metal_knob_list_root_lists_each_kind_with_its_scope_and_the_files_values);
fn metal_knob_list_root_lists_each_kind_with_its_scope_and_the_files_values() {
    each_machine(|k, t, want| {
        let j = json(t, &["knob", "list", "--json"]);
        let text = run(t, &["knob", "list"]);
        check_knob_list(t, want, &j, &text).assert(k.name);
    });
}

it_test!(metal_knob_get_root_reads_scoped_knobs_and_refuses_what_the_tree_lacks);
fn metal_knob_get_root_reads_scoped_knobs_and_refuses_what_the_tree_lacks() {
    each_machine(|k, t, want| {
        let (m, uncore) = (k.name, k.uncore);
        let last = *want.package_cpus.keys().last().unwrap();
        let state = want.states.last().unwrap();
        let pkg = format!("pmqos.resume_latency_us@package{last}");
        let all = format!("cpuidle.{state}.disable@all");
        let j = json(t, &["knob", "get", "--json", "cpufreq.turbo", &pkg, &all]);
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
                assert_eq!(v.as_str(), file(t, &f).as_deref(), "{m}: {k}");
            }
        }
        assert!(got.contains_key("cpufreq.turbo"), "{m}: {got:?}");

        if uncore > 0 {
            let u = json(t, &["knob", "get", "--json", "uncore.max_freq@package0"]);
            let (k, v) = u.as_object().unwrap().iter().next().unwrap();
            assert!(k.starts_with("uncore.max_freq@package0"), "{m}: {k}");
            let f = format!("{UNCORE}/{}/max_freq_khz", want.uncore[0]);
            assert_eq!(v.as_str(), file(t, &f).as_deref(), "{m}");
        }
    });
    // What the tree lacks, or a scope it has not, is refused with the knob named.
    let t = machine("genoa0");
    let root = dir(&t);
    let before = snapshot(&root);
    for (arg, says) in [
        ("uncore.max_freq", "uncore.max_freq"),
        ("epb", "epb"),
        ("pmqos.resume_latency_us@package7", "package7"),
        (
            "msr.c1_demotion",
            "is an Intel MSR (0xe2); this CPU is AuthenticAMD",
        ),
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
    // An Intel tree without /dev/cpu: get and set name the missing device, write nothing.
    let t = machine("spr1");
    std::fs::remove_dir_all(t.root.path("/dev/cpu")).unwrap();
    let root = dir(&t);
    let before = snapshot(&root);
    let state = tempfile::tempdir().unwrap();
    for cmd in ["get", "set"] {
        let mut args = vec!["knob", cmd, "--root", root.to_str().unwrap()];
        args.push(if cmd == "get" {
            "msr.pkg_cstate_limit@package0"
        } else {
            "msr.c1e_autopromote@all=on"
        });
        let out = pmlab()
            .env("PMLAB_STATE_DIR", state.path())
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{cmd}: {err}");
        assert!(
            err.contains("needs /dev/cpu/0/msr: load the msr module"),
            "{cmd}: {err}"
        );
    }
    assert!(
        before == snapshot(&root),
        "a refused MSR knob changed the tree"
    );
    assert_eq!(crate::knob::journals(state.path()), 0);
}

it_test!(metal_study_plan_root_follows_each_machine_and_writes_nothing);
fn metal_study_plan_root_follows_each_machine_and_writes_nothing() {
    let mut plans = Vec::new();
    each_machine(|k, t, want| {
        let j = json(t, &["study", "--plan", "--json"]);
        let text = run(t, &["study", "--plan"]);
        check_plan(t, want, &j, &text).assert(k.name);
        plans.push(j["stages"].clone());
    });
    for (i, a) in plans.iter().enumerate() {
        for (b, k) in plans.iter().zip(&MACHINES).skip(i + 1) {
            if MACHINES[i].frequency != k.frequency || MACHINES[i].uncore.min(1) != k.uncore.min(1)
            {
                assert_ne!(
                    a, b,
                    "{} and {} plan the same stages",
                    MACHINES[i].name, k.name
                );
            }
        }
    }
}

it_test!(metal_study_plan_root_compares_the_frequency_driver_and_uncore_each_machine_has);
/// The frequency stage compares what the driver offers (EPP on intel_pstate active; the
/// governors on acpi-cpufreq, intel_pstate passive, and amd-pstate-epp whose performance
/// governor lists only the EPP `performance`), the uncore stage runs where uncore control
/// exists: the stages themselves differ between the machines, not only the facts above them.
fn metal_study_plan_root_compares_the_frequency_driver_and_uncore_each_machine_has() {
    each_machine(|k, t, _| {
        let m = k.name;
        let j = json(t, &["study", "--plan", "--quick", "--json"]);
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
            step.contains(&format!("configurations [{}]", k.frequency)),
            "{m}: {step}"
        );
        let u = stage("uncore");
        if k.uncore > 0 {
            let step = u["steps"][0].as_str().unwrap_or_else(|| panic!("{m}: {u}"));
            assert!(
                step.contains("uncore.max_freq=max; uncore.min_freq=min uncore.max_freq=min"),
                "{m}: {step}"
            );
        } else {
            let why = u["skip"].as_str().unwrap_or_else(|| panic!("{m}: {u}"));
            assert!(why.contains("no uncore frequency control"), "{m}: {why}");
        }
    });
}

/// Files whose mode or bytes differ between two snapshots, up to the trailing newline
/// (sysfs prints its own whatever was written; a plain file written with the kernel's
/// value has none). ASPM's list file is compared by its bracketed word: the kernel takes
/// back that word only, so that is what is restored.
fn changed_files(
    a: &BTreeMap<PathBuf, (u32, Option<Vec<u8>>)>,
    b: &BTreeMap<PathBuf, (u32, Option<Vec<u8>>)>,
) -> Vec<PathBuf> {
    let norm = |p: &Path, e: Option<&(u32, Option<Vec<u8>>)>| {
        e.map(|(mode, bytes)| {
            let text = bytes
                .as_ref()
                .map(|b| String::from_utf8_lossy(b.trim_ascii_end()).into_owned());
            let text = match text {
                Some(t) if p.ends_with("pcie_aspm/parameters/policy") => Some(
                    t.split_whitespace()
                        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
                        .unwrap_or(&t)
                        .to_string(),
                ),
                t => t,
            };
            (*mode, text)
        })
    };
    a.keys()
        .chain(b.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|p| norm(p, a.get(*p)) != norm(p, b.get(*p)))
        .cloned()
        .collect()
}

/// (register offset, lowest bit, width) of an MSR knob's field.
fn msr_field(kind: &str) -> (usize, u32, u32) {
    match kind {
        "msr.pkg_cstate_limit" => (0xe2, 0, 4),
        "msr.c1_demotion" => (0xe2, 26, 1),
        "msr.c1e_autopromote" => (0x1fc, 1, 1),
        _ => panic!("unknown MSR knob {kind}"),
    }
}

it_test!(metal_knob_set_root_interrupted_or_killed_leaves_the_tree_as_found);
/// `pmlab knob set --root TREE` of pepc's knob kinds on a writable copy of an Intel server
/// (spr1: EPB per package, uncore min and max per die, intel_pstate's no_turbo, perf % and
/// dynamic boost and mode, EPP, max frequency `base` per package, ASPM, the three MSR
/// knobs, each on its own CPU's /dev/cpu/N/msr) and an AMD server
/// (genoa0: boost, min frequency per package, a governor per core, ASPM, a C-state per NUMA
/// node, PM QoS per package): after success
/// and `pmlab knob restore`; stopped after its first, middle and last write by SIGINT or
/// SIGTERM (the lab restores and exits 128+N); and killed (SIGKILL) midway, then repaired by
/// the next `pmlab knob restore`. Each time the tree is as found and no journal is left.
fn metal_knob_set_root_interrupted_or_killed_leaves_the_tree_as_found() {
    use crate::knob::{journals, kill, start_paused};
    let cases: [(&str, &[&str]); 2] = [
        (
            "spr1",
            &[
                "epb@package1=power",
                "uncore.max_freq@package0=min",
                "uncore.min_freq@die1=1.2GHz",
                "intel_pstate.no_turbo=1",
                "intel_pstate.min_perf_pct=50%",
                "intel_pstate.max_perf_pct=90",
                "intel_pstate.hwp_dynamic_boost=0",
                "cpufreq.epp@all=balance_power",
                "cpufreq.max_freq@package1=base",
                "aspm.policy=powersave",
                "intel_pstate.status=passive",
                // One msr file per write (the pause counts files): cpu0, cpu1, cpu2.
                "msr.pkg_cstate_limit@0=0",
                "msr.c1_demotion@1=off",
                "msr.c1e_autopromote@2=on",
            ],
        ),
        (
            "genoa0",
            &[
                "cpufreq.turbo=0",
                "cpufreq.min_freq@package1=max",
                "cpufreq.governor@core3=performance",
                "aspm.policy=performance",
                "cpuidle.C2.disable@node1=1",
                "pmqos.resume_latency_us@package0=10us",
            ],
        ),
    ];
    for (m, kinds) in cases {
        let t = machine(m);
        let root = dir(&t);
        let state = tempfile::tempdir().unwrap();
        let before = snapshot(&root);
        let mut args = vec!["--root".to_string(), root.to_str().unwrap().to_string()];
        args.extend(kinds.iter().map(|k| k.to_string()));
        // What sysfs would print again after a restore: the original bytes (its trailing
        // newline, ASPM's whole list), for files equal to them as `changed_files` compares.
        let as_sysfs_prints = || {
            for (p, (_, bytes)) in &before {
                let full = root.join(p);
                if let Some(b) = bytes {
                    if std::fs::read(&full).ok().as_ref() != Some(b) {
                        std::fs::write(&full, b).unwrap();
                    }
                }
            }
        };
        let restore = || {
            let out = pmlab()
                .env("PMLAB_STATE_DIR", state.path())
                .args(["knob", "restore"])
                .output()
                .unwrap();
            assert!(out.status.success(), "{m}: knob restore: {out:?}");
        };
        // Success: every kind written, one write per changed file; restore puts it back.
        let out = pmlab()
            .env("PMLAB_STATE_DIR", state.path())
            .args(["knob", "set"])
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{m}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let writes = changed_files(&before, &snapshot(&root)).len();
        assert!(writes >= kinds.len(), "{m}: only {writes} files written");
        assert_eq!(journals(state.path()), 1, "{m}: the set's journal is kept");
        restore();
        let left = changed_files(&before, &snapshot(&root));
        assert!(left.is_empty(), "{m}: after restore: {left:?}");
        assert_eq!(journals(state.path()), 0, "{m}");
        as_sysfs_prints();

        for (sig, n) in [
            (libc::SIGINT, 1),
            (libc::SIGTERM, writes / 2),
            (libc::SIGINT, writes),
            (libc::SIGKILL, writes / 2),
        ] {
            let mut child = start_paused(state.path(), &args, n);
            let partial = changed_files(&before, &snapshot(&root));
            assert_eq!(partial.len(), n, "{m}: paused after write {n}");
            kill(&child, sig);
            let status = child.wait().unwrap();
            if sig == libc::SIGKILL {
                assert_eq!(journals(state.path()), 1, "{m}: the dead process's journal");
                restore();
            } else {
                assert_eq!(status.code(), Some(128 + sig), "{m}: signal {sig}");
            }
            let left = changed_files(&before, &snapshot(&root));
            assert!(
                left.is_empty(),
                "{m}: signal {sig} at write {n}: {} files differ, first {:?}",
                left.len(),
                left.first()
            );
            assert_eq!(journals(state.path()), 0, "{m}: signal {sig}");
            as_sysfs_prints();
        }
    }
    // A root that is not a directory is refused before anything is written or journaled.
    let state = tempfile::tempdir().unwrap();
    let out = pmlab()
        .env("PMLAB_STATE_DIR", state.path())
        .args([
            "knob",
            "set",
            "--root",
            "/nonexistent-pmlab-tree",
            "epb=power",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("not a directory"), "{err}");
    assert_eq!(journals(state.path()), 0);
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

/// `pmlab ARGS --root` on `t`: its JSON and its text, or the first line of its error.
fn try_run(t: &EmulRoot, args: &[&str], json: bool) -> Result<(Value, String), String> {
    let root = dir(t);
    let cwd = tempfile::tempdir().unwrap();
    let mut full = args.to_vec();
    if json {
        full.push("--json");
    }
    let out = pmlab()
        .current_dir(cwd.path())
        .args(&full)
        .args(["--root", root.to_str().unwrap()])
        .output()
        .unwrap();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(err.lines().next().unwrap_or("no message").to_string());
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !json {
        return Ok((Value::Null, text));
    }
    serde_json::from_str(&text)
        .map(|v| (v, text))
        .map_err(|e| format!("not JSON: {e}"))
}

it_test!(metal_every_machine_reads_lists_and_plans_without_error);
/// On every machine of the data: `info`, `knob list` and `study --plan` run, every value
/// they show matches the tree's files (the detailed tests' checks, each skipped where the
/// machine lacks the item), and each key of `info --json` has one type on every machine.
fn metal_every_machine_reads_lists_and_plans_without_error() {
    if std::env::var_os("PMLAB_PEPC_ALL").is_none_or(|v| v.is_empty() || v == "0") {
        skip!(
            "set PMLAB_PEPC_ALL=1: builds the 46 machines' trees (about 6 min on a 2-vCPU guest)"
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
    // The JSON type of each key of `info --json`, over every machine: one each, or null.
    let mut shapes = BTreeMap::new();
    type Check = fn(&EmulRoot, &Expected, &Value, &str) -> Fails;
    let commands: [(&[&str], Check); 3] = [
        (&["info"], check_info),
        (&["knob", "list"], check_knob_list),
        (&["study", "--plan"], check_plan),
    ];
    for m in &machines {
        let t = emul::build_temp(&data.join(m)).unwrap();
        let want = expected(&t);
        for (args, check) in commands {
            let ran =
                try_run(&t, args, true).and_then(|(j, _)| Ok((j, try_run(&t, args, false)?.1)));
            match ran {
                Err(e) => failures.push(format!("{m}: {}: {e}", args.join(" "))),
                Ok((j, text)) => {
                    failures.extend(
                        check(&t, &want, &j, &text)
                            .0
                            .into_iter()
                            .map(|f| format!("{m}: {f}")),
                    );
                    if args[0] == "info" {
                        crate::util::info_json_shapes(&j, &mut shapes);
                    }
                    if args[0] == "study" {
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
                            .map(|p| {
                                format!("{}={}", p[0].as_str().unwrap(), p[1].as_str().unwrap())
                            })
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
        }
    }
    for (plan, ms) in &plans {
        eprintln!("{} machines: {plan}: {}", ms.len(), ms.join(" "));
    }
    let failed: BTreeSet<_> = failures
        .iter()
        .map(|f| f.split(':').next().unwrap())
        .collect();
    eprintln!(
        "{} of {} machines read, listed and planned with every value as in their files; {} distinct plans",
        machines.len() - failed.len(),
        machines.len(),
        plans.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let two = crate::util::two_shapes(&shapes);
    assert!(two.is_empty(), "info --json keys with two shapes: {two:#?}");
    assert!(plans.len() > 1, "every machine got the same plan");
}
