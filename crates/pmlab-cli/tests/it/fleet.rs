//! The fleet recipe end to end: contrib/ansible's playbook runs a battery on an inventory
//! of two targets (two real sshd instances on 127.0.0.1, each with its own pmlab state
//! and temp directories), fetches each target's result bundles, `results import` loads
//! them, DuckDB reads them with hive partitioning and `fleet report` renders them.

use crate::sshd::{Options, Sshd};
use crate::util::pmlab;
use std::path::{Path, PathBuf};
use std::process::Command;

fn ansible_playbook() -> Option<PathBuf> {
    let out = Command::new("sh")
        .args(["-c", "command -v ansible-playbook"])
        .output()
        .ok()?;
    let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !p.is_empty()).then(|| PathBuf::from(p))
}

it_test!(ansible_runs_the_quick_study_on_two_targets_and_brings_their_bundles);
fn ansible_runs_the_quick_study_on_two_targets_and_brings_their_bundles() {
    let Some(playbook_cmd) = ansible_playbook() else {
        skip!("ansible-playbook is not installed (scripts/setup.sh installs ansible-core)");
    };
    let (a, b) = (
        Sshd::start(Options::default()),
        Sshd::start(Options::default()),
    );
    let dir = tempfile::tempdir().unwrap();
    // The targets run Ansible's modules with this python3 (a version manager's shim on PATH
    // may not resolve in an ssh session).
    let py = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let py = String::from_utf8_lossy(&py.stdout).trim().to_string();
    let mut inventory = String::from("[targets]\n");
    for (name, s) in [("t1", &a), ("t2", &b)] {
        inventory.push_str(&format!(
            "{name} ansible_host=127.0.0.1 ansible_port={} ansible_user=root \
             ansible_ssh_private_key_file={} ansible_ssh_common_args='-F {}' \
             ansible_python_interpreter={py} pmlab_workdir={}\n",
            s.port,
            s.key.display(),
            s.client_config.display(),
            s.remote_tmp.join("fleet").display(),
        ));
    }
    let inv = dir.path().join("inventory.ini");
    std::fs::write(&inv, inventory).unwrap();
    let bundles = dir.path().join("bundles");
    let site = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/ansible/site.yml");
    let bin = assert_cmd::cargo::cargo_bin("pmlab");
    // Both targets are this machine: one at a time (-f 1), or the two batteries would set
    // the same knobs at once. On a real fleet Ansible's forks run them in parallel.
    let out = Command::new(playbook_cmd)
        .arg("-i")
        .arg(&inv)
        .arg(&site)
        .args(["-f", "1", "-e"])
        .arg(format!("pmlab_binary={}", bin.display()))
        .arg("-e")
        .arg(r#"{"pmlab_battery": [["study", "--quick", "--only", "idle", "-q"]]}"#)
        .arg("-e")
        .arg(format!("pmlab_bundles_dir={}", bundles.display()))
        .env("ANSIBLE_NOCOLOR", "1")
        // Ansible's own speed-ups, the playbook unchanged: pipelining sends each module
        // through the open ssh connection instead of copying it over first, and the default
        // ssh arguments without -C (zlib on loopback, here mostly of the 55 MB binary's
        // copy). Per-task overhead, not the battery, was most of this test's time.
        .env("ANSIBLE_PIPELINING", "1")
        .env(
            "ANSIBLE_SSH_ARGS",
            "-o ControlMaster=auto -o ControlPersist=60s",
        )
        .env("ANSIBLE_LOCAL_TEMP", dir.path().join("ansible-local"))
        .env("ANSIBLE_REMOTE_TMP", dir.path().join("ansible-remote"))
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{log}");
    assert!(log.contains("t1") && log.contains("failed=0"), "{log}");
    // The bundles pmlab itself finds there (bundle::find, as `results import` does).
    let found: Vec<PathBuf> = pmlab_store::bundle::find(&bundles)
        .unwrap_or_default()
        .iter()
        .map(|db| db.with_file_name("manifest.json"))
        .collect();
    assert_eq!(found.len(), 2, "one bundle per target: {found:?}\n{log}");
    for (m, inv_host) in found.iter().zip(["inventory=t1", "inventory=t2"]) {
        assert!(
            m.display().to_string().contains(inv_host),
            "{}",
            m.display()
        );
        assert!(m.with_file_name("metrics.parquet").is_file());
    }
    // The targets' work directories are gone.
    for s in [&a, &b] {
        assert!(!s.remote_tmp.join("fleet").exists());
    }
    let fleet_db = dir.path().join("fleet.db");
    let out = pmlab()
        .args(["results", "--db"])
        .arg(&fleet_db)
        .arg("import")
        .arg(&bundles)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("imported 2 experiment(s)"), "{text}");
    let query = format!(
        "import duckdb; print(duckdb.sql(\"SELECT inventory, count(DISTINCT experiment) FROM \
         read_parquet('{}/**/metrics.parquet', hive_partitioning = true) GROUP BY ALL ORDER BY 1\").fetchall())",
        bundles.display()
    );
    let out = Command::new("python3")
        .args(["-c", &query])
        .output()
        .unwrap();
    if String::from_utf8_lossy(&out.stderr).contains("No module named 'duckdb'") {
        skip_part!("the duckdb Python module is not installed (scripts/setup.sh installs it)");
    } else {
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "[('t1', 1), ('t2', 1)]",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let html = dir.path().join("fleet.html");
    let out = pmlab()
        .args(["fleet", "report"])
        .arg(&bundles)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (dom, err, req) = crate::study::browse(&html, &["--dump-dom"]);
    assert!(crate::study::console_lines(&err).is_empty(), "{err}");
    assert!(crate::study::page_requests(&req).is_empty(), "{req:?}");
    let plots = crate::study::plots(&dom);
    assert!(
        !plots.is_empty() && plots.iter().all(|(_, marks)| *marks > 0),
        "{plots:?}"
    );
}
