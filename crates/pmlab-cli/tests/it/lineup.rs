//! `pmlab results compare --by kernel|host`: one experiment lined up across kernels or
//! hosts. The second kernel's identity is written through the store's own API.

use crate::util::{pmlab, stdout_of};
use pmlab_store::store::Store;
use std::path::Path;

/// Three runs of one compare experiment; experiments 2 and 3 then say they ran on
/// `kernel` (build `#2`) on host `other`.
pub fn store_with_two_kernels(db: &Path, kernel: &str) {
    for _ in 0..3 {
        stdout_of(
            pmlab()
                .args(["compare", "-q", "--db"])
                .arg(db)
                .args(["--a", "", "--b", "", "--max-runs", "6"])
                .args(["pipe", "--loops", "2000"]),
        );
    }
    let mut s = Store::open(db).unwrap();
    for id in [2, 3] {
        let mut sys = s.load(id).unwrap().system.unwrap();
        sys.kernel_release = kernel.into();
        sys.kernel_build = "#2 SMP PREEMPT_DYNAMIC".into();
        sys.hostname = "other".into();
        s.set_system(id, &sys).unwrap();
    }
}

it_test!(by_kernel_gives_the_before_after_table_with_cis);
fn by_kernel_gives_the_before_after_table_with_cis() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("k.db");
    store_with_two_kernels(&db, "6.19.0-patched");
    let here = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let here = here.trim();
    let table = stdout_of(
        pmlab()
            .args(["results", "--db"])
            .arg(&db)
            .args(["compare", "--by", "kernel", "3"]),
    );
    assert!(table.contains(&format!("{here} A")), "{table}");
    assert!(table.contains("6.19.0-patched B"), "{table}");
    assert!(table.contains("kernels differ"), "{table}");
    let json: serde_json::Value = serde_json::from_str(&stdout_of(
        pmlab()
            .args(["results", "--db"])
            .arg(&db)
            .args(["compare", "--by", "kernel", "1", "--json"]),
    ))
    .unwrap();
    let rows = json["workloads"][0]["rows"].as_array().unwrap();
    let labels: Vec<&str> = rows.iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(
        labels,
        [
            format!("{here} A"),
            format!("{here} B"),
            "6.19.0-patched A".into(),
            "6.19.0-patched B".into()
        ]
    );
    // The patched kernel's rows pool experiments 2 and 3: twice the runs, each with its
    // CI and a verdict against the baseline kernel's configuration of the same label.
    assert_eq!(rows[0]["primary"]["n"], 3, "{}", rows[0]);
    assert_eq!(rows[2]["primary"]["n"], 6, "{}", rows[2]);
    for r in &rows[2..] {
        assert!(r["primary"]["ci_low"].as_f64().unwrap() <= r["primary"]["mean"].as_f64().unwrap());
        assert!(r["comparison"].is_object(), "{r}");
    }
    assert_eq!(json["header"]["ids"], serde_json::json!([1, 2]));
}

it_test!(by_host_and_refusals);
fn by_host_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    store_with_two_kernels(&db, "6.19.0-patched");
    let table = stdout_of(
        pmlab()
            .args(["results", "--db"])
            .arg(&db)
            .args(["compare", "--by", "host", "latest", "--format", "markdown"]),
    );
    assert!(table.contains("other B"), "{table}");
    // One kernel only: a clear refusal.
    let single = dir.path().join("one.db");
    stdout_of(pmlab().args(["compare", "-q", "--db"]).arg(&single).args([
        "--a",
        "",
        "--b",
        "",
        "--max-runs",
        "6",
        "pipe",
        "--loops",
        "2000",
    ]));
    let out = pmlab()
        .args(["results", "--db"])
        .arg(&single)
        .args(["compare", "--by", "kernel", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("nothing to line up"), "{err}");
    // --by with a second id, or neither: refused by the parser.
    for args in [
        &["compare", "--by", "kernel", "1", "2"][..],
        &["compare", "1"][..],
    ] {
        let out = pmlab()
            .args(["results", "--db"])
            .arg(&db)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}
