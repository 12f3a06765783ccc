//! Result bundles: `results export --bundle` from a store holding two hosts' runs, read back
//! by DuckDB with hive partitioning and loaded by `results import` into a fleet store.

use crate::lineup::store_with_two_kernels;
use crate::util::{pmlab, stdout_of};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `store_with_two_kernels(db, "6.19.0-patched")`, built once per test process (three compares,
/// most of these tests' time) and copied to `db`: each test still starts from its own file.
/// The shared copy lives under one root per user that the next test process of that user
/// empties first.
fn two_host_store(db: &Path) {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let root = std::env::temp_dir().join(format!(
            "pmlab-bundle-tests-{}",
            rustix::process::getuid().as_raw()
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let built = root.join("two.db");
        store_with_two_kernels(&built, "6.19.0-patched");
        built
    });
    std::fs::copy(built, db).unwrap();
    // SQLite folds the WAL into the file when the last connection closes; a WAL left behind
    // goes along.
    let wal = built.with_extension("db-wal");
    if wal.exists() {
        std::fs::copy(wal, db.with_extension("db-wal")).unwrap();
    }
}

it_test!(bundles_of_two_hosts_read_by_duckdb_and_imported_once);
fn bundles_of_two_hosts_read_by_duckdb_and_imported_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("two.db");
    two_host_store(&db);
    let root = dir.path().join("bundles");
    let written = stdout_of(
        pmlab()
            .args(["results", "--db"])
            .arg(&db)
            .args(["export", "all", "--bundle"])
            .arg(&root),
    );
    assert_eq!(written.lines().count(), 3, "{written}");
    assert!(
        written.contains("host=other/kernel=6.19.0-patched/experiment="),
        "{written}"
    );
    let query = format!(
        "import duckdb; print(duckdb.sql(\"SELECT host, kernel, count(DISTINCT experiment), count(*) \
         FROM read_parquet('{}/**/metrics.parquet', hive_partitioning = true) \
         WHERE metric = 'us_per_op' AND NOT warmup GROUP BY ALL ORDER BY host\").fetchall())",
        root.display()
    );
    match Command::new("python3").args(["-c", &query]).output() {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            let here = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
            let want = format!(
                "[('other', '6.19.0-patched', 2, 12), ('{}', '{}', 1, 6)]",
                here.trim(),
                release.trim()
            );
            // DuckDB orders 'other' and the host name as strings; compare as sets of rows.
            let rows = |s: &str| {
                let mut v: Vec<String> = s
                    .trim()
                    .trim_matches(['[', ']'])
                    .split("), (")
                    .map(|r| r.trim_matches(['(', ')']).to_string())
                    .collect();
                v.sort();
                v
            };
            assert_eq!(rows(&text), rows(&want), "{text}");
        }
        Ok(out) if String::from_utf8_lossy(&out.stderr).contains("No module named 'duckdb'") => {
            skip_part!("the duckdb Python module is not installed (scripts/setup.sh installs it)")
        }
        other => panic!("duckdb query failed: {other:?}"),
    }
    let fleet = dir.path().join("fleet.db");
    let first = stdout_of(
        pmlab()
            .args(["results", "--db"])
            .arg(&fleet)
            .args(["import"])
            .arg(&root),
    );
    assert!(first.contains("imported 3 experiment(s)"), "{first}");
    let again = stdout_of(
        pmlab()
            .args(["results", "--db"])
            .arg(&fleet)
            .args(["import"])
            .arg(&root),
    );
    assert!(
        again.contains("imported 0 experiment(s)") && again.contains("3 already there"),
        "{again}"
    );
    let table = stdout_of(
        pmlab()
            .args(["results", "--db"])
            .arg(&fleet)
            .args(["compare", "--by", "host", "latest"]),
    );
    assert!(table.contains("other A"), "{table}");
    // A directory without bundles: refused, the store unchanged.
    let out = pmlab()
        .args(["results", "--db"])
        .arg(&fleet)
        .args(["import"])
        .arg(dir.path().join("nothing-here"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let list: Vec<serde_json::Value> = serde_json::from_str(&stdout_of(
        pmlab()
            .args(["results", "--db"])
            .arg(&fleet)
            .args(["list", "--json"]),
    ))
    .unwrap();
    assert_eq!(list.len(), 3);
}

it_test!(fleet_report_of_two_hosts_loads_in_headless_chromium);
/// `pmlab fleet report` over two hosts' bundles renders both side by side and loads in
/// headless Chromium without console errors or network requests, its plot not empty.
fn fleet_report_of_two_hosts_loads_in_headless_chromium() {
    use crate::study::{browse, console_lines, page_requests, plots};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("two.db");
    two_host_store(&db);
    let root = dir.path().join("bundles");
    stdout_of(
        pmlab()
            .args(["results", "--db"])
            .arg(&db)
            .args(["export", "all", "--bundle"])
            .arg(&root),
    );
    let html = dir.path().join("fleet.html");
    let out = stdout_of(
        pmlab()
            .args(["fleet", "report"])
            .arg(&root)
            .arg("-o")
            .arg(&html)
            .arg("--json"),
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["machines"], 2, "{out}");
    assert_eq!(v["experiments"], 1, "{out}");
    let (dom, err, req) = browse(&html, &["--dump-dom"]);
    assert!(console_lines(&err).is_empty(), "{:?}", console_lines(&err));
    assert!(page_requests(&req).is_empty(), "{:?}", page_requests(&req));
    let p = plots(&dom);
    assert!(
        !p.is_empty() && p.iter().all(|(_, marks)| *marks > 0),
        "{p:?}"
    );
    assert!(
        dom.contains("other · 6.19.0-patched B"),
        "rows per host and kernel"
    );
    // No bundles: refused, nothing written.
    let none = dir.path().join("none.html");
    let out = pmlab()
        .args(["fleet", "report"])
        .arg(dir.path().join("missing"))
        .arg("-o")
        .arg(&none)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!none.exists());
}
