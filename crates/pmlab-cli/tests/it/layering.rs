//! The crates' layering: every workspace crate's README names its job and the pmlab crates
//! it may depend on (`- May depend on: ...`), and `cargo metadata` must show no other edge.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Crate name → the workspace crates it depends on (normal and build dependencies).
fn edges(metadata: &Value) -> BTreeMap<String, (PathBuf, BTreeSet<String>)> {
    let members: BTreeSet<String> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    let mut out = BTreeMap::new();
    for p in metadata["packages"].as_array().unwrap() {
        let deps = p["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null() || d["kind"] == "build")
            .map(|d| d["name"].as_str().unwrap().to_string())
            .filter(|n| members.contains(n))
            .collect();
        let dir = Path::new(p["manifest_path"].as_str().unwrap())
            .parent()
            .unwrap()
            .to_path_buf();
        out.insert(p["name"].as_str().unwrap().to_string(), (dir, deps));
    }
    out
}

/// What a README allows: `Ok(None)` for "any pmlab crate but X, Y" (then the exceptions),
/// `Ok(Some(set))` for a list of backticked names or "no pmlab crate".
fn allowed(readme: &str) -> Result<(bool, BTreeSet<String>), String> {
    if !readme.lines().any(|l| l.starts_with("- Job: ")) {
        return Err("no `- Job: ` line".into());
    }
    // The list item, with its indented continuation lines.
    let mut lines = readme
        .lines()
        .skip_while(|l| !l.starts_with("- May depend on: "));
    let first = lines.next().ok_or("no `- May depend on: ` line")?;
    let mut line = first["- May depend on: ".len()..].to_string();
    for l in lines.take_while(|l| l.starts_with("  ")) {
        line.push(' ');
        line.push_str(l.trim());
    }
    let names: BTreeSet<String> = line
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    if line.starts_with("any pmlab crate") {
        Ok((true, names))
    } else if line.starts_with("no pmlab crate") || !names.is_empty() {
        Ok((false, names))
    } else {
        Err(format!("cannot read `- May depend on: {line}`"))
    }
}

/// Every edge a README does not allow, and every README that cannot be read.
fn violations(graph: &BTreeMap<String, (PathBuf, BTreeSet<String>)>) -> Vec<String> {
    let mut bad = Vec::new();
    for (name, (dir, deps)) in graph {
        let readme = match std::fs::read_to_string(dir.join("README.md")) {
            Ok(t) => t,
            Err(e) => {
                bad.push(format!("{name}: README.md: {e}"));
                continue;
            }
        };
        match allowed(&readme) {
            Err(e) => bad.push(format!("{name}: README.md: {e}")),
            Ok((any, names)) => {
                for d in deps {
                    let ok = if any {
                        !names.contains(d)
                    } else {
                        names.contains(d)
                    };
                    if !ok {
                        bad.push(format!(
                            "{name} depends on {d}, which its README does not allow"
                        ));
                    }
                }
            }
        }
    }
    bad
}

fn metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace())
        .output();
    let out = match out {
        Ok(out) => out,
        // As `nobody` (PMLAB_TEST_NO_ROOT=1) root's cargo cannot be run.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            skip!("cargo metadata cannot be run by this user: {e}")
        }
        Err(e) => panic!("cargo metadata: {e}"),
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

it_test!(every_crate_depends_only_on_what_its_readme_allows);
/// `cargo metadata`'s edges between workspace crates, each allowed by the depending crate's
/// README; and the allowed graph has no cycle.
fn every_crate_depends_only_on_what_its_readme_allows() {
    let graph = edges(&metadata());
    assert!(graph.len() >= 14, "{:?}", graph.keys());
    let bad = violations(&graph);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    // The lower layers in order: an edge upwards would be a cycle of jobs.
    let order = [
        "pmlab-kernel",
        "pmlab-trace",
        "pmlab-analysis",
        "pmlab-workload",
        "pmlab-stats",
        "pmlab-store",
        "pmlab-lab",
        "pmlab-hotplug",
        "pmlab-study",
    ];
    for (i, low) in order.iter().enumerate() {
        for high in &order[i + 1..] {
            assert!(
                !graph[*low].1.contains(*high),
                "{low} depends on {high}, a crate above it"
            );
        }
    }
}

it_test!(an_edge_the_readme_does_not_name_is_refused);
/// The check fails on an edge its README does not allow, and on a README without the lines.
fn an_edge_the_readme_does_not_name_is_refused() {
    let mut graph = edges(&metadata());
    graph
        .get_mut("pmlab-kernel")
        .unwrap()
        .1
        .insert("pmlab-lab".into());
    let bad = violations(&graph);
    assert_eq!(
        bad,
        vec!["pmlab-kernel depends on pmlab-lab, which its README does not allow".to_string()]
    );
    assert!(allowed("# x\n\n- May depend on: `a`\n").is_err());
    assert!(allowed("- Job: y\nno such line\n").is_err());
    let (_, wrapped) = allowed("- Job: y\n- May depend on: `a`,\n  `b`.\n\n  `c`\n").unwrap();
    assert_eq!(wrapped.into_iter().collect::<Vec<_>>(), ["a", "b"]);
    let (any, but) =
        allowed("- Job: y\n- May depend on: any pmlab crate but `pmlab-py`.\n").unwrap();
    assert!(any && but.contains("pmlab-py"));
}
