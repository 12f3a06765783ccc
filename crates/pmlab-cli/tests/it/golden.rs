//! Golden outputs: `analyze`, `whatif`, `results show`, `report --format mail` and
//! `info --json` on the trace fixtures, on a small store recorded once on a 2-vCPU KVM guest
//! (tests/golden/store.db: one `compare` of rcu.expedited, 10 pipe runs) and on fake sysfs
//! trees, compared byte for byte with the files in `tests/golden/`. `PMLAB_BLESS=1`
//! rewrites them from this binary's output (review the diff before committing it).

use crate::util::{fixtures, pmlab};
use pmlab_kernel::sysinfo::fake::FakeTree;
use std::path::{Path, PathBuf};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Whether this run rewrites the goldens (`PMLAB_BLESS=1`).
fn blessing() -> bool {
    std::env::var("PMLAB_BLESS").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `pmlab ARGS` run in `cwd`: its stdout, after it succeeded with nothing on stderr but notes.
fn output_in(cwd: &Path, args: &[&str]) -> String {
    let out = pmlab().current_dir(cwd).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "pmlab {args:?}: {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Compares `got` with golden file `name`, or writes it under `PMLAB_BLESS=1`.
fn check(name: &str, got: &str) {
    let path = golden_dir().join(name);
    if blessing() {
        std::fs::write(&path, got).unwrap();
        eprintln!("blessed {}", path.display());
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (PMLAB_BLESS=1 writes it)", path.display()));
    if got == want {
        return;
    }
    let line = got
        .lines()
        .zip(want.lines())
        .position(|(g, w)| g != w)
        .unwrap_or(got.lines().count().min(want.lines().count()));
    panic!(
        "{name} differs from its golden at line {}:\n got: {:?}\nwant: {:?}\n\
         ({} against {} bytes; if the change is meant, PMLAB_BLESS=1 cargo test --release -p \
         pmlab-cli --test it -- golden:: rewrites the goldens: review their diff)",
        line + 1,
        got.lines().nth(line).unwrap_or("<end>"),
        want.lines().nth(line).unwrap_or("<end>"),
        got.len(),
        want.len()
    );
}

/// The committed store, copied: a command that migrates a store must not change the golden one.
fn store_copy() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.db");
    std::fs::copy(golden_dir().join("store.db"), &db).unwrap();
    let db = db.to_str().unwrap().to_string();
    (dir, db)
}

const TRACES: [&str; 6] = [
    "haltpoll_pipe_200us.dat",
    "haltpoll_pipe_off.dat",
    "lisa_rtapp.dat",
    "lisa_sched_load.dat",
    "trappy_idle.dat",
    "trappy_trace.dat",
];

it_test!(golden_analyze_of_every_fixture);
fn golden_analyze_of_every_fixture() {
    for t in TRACES {
        let stem = t.trim_end_matches(".dat");
        check(
            &format!("analyze-{stem}.txt"),
            &output_in(&fixtures(), &["analyze", t]),
        );
    }
    check(
        "analyze-haltpoll_pipe_200us.json",
        &output_in(
            &fixtures(),
            &["analyze", "--json", "haltpoll_pipe_200us.dat"],
        ),
    );
}

/// The kernel's default haltpoll parameters, given: without them whatif reads this machine's
/// (its module's current `guest_halt_poll_ns` included), which a live test may be changing.
const PARAMS: &str = "--haltpoll-params=2,2,50us,Y";

it_test!(golden_whatif_of_the_haltpoll_fixtures);
fn golden_whatif_of_the_haltpoll_fixtures() {
    let f = fixtures();
    check(
        "whatif-haltpoll_pipe_off.txt",
        &output_in(&f, &["whatif", PARAMS, "haltpoll_pipe_off.dat"]),
    );
    check(
        "whatif-haltpoll_pipe_off-calibrated.json",
        &output_in(
            &f,
            &[
                "whatif",
                PARAMS,
                "--json",
                "--calibrate",
                "haltpoll_pipe_200us.dat",
                "haltpoll_pipe_off.dat",
            ],
        ),
    );
    check(
        "whatif-haltpoll_pipe_200us-reverse.txt",
        &output_in(
            &f,
            &["whatif", PARAMS, "--reverse", "haltpoll_pipe_200us.dat"],
        ),
    );
}

it_test!(golden_results_show_and_mail_report_of_the_recorded_store);
fn golden_results_show_and_mail_report_of_the_recorded_store() {
    let (dir, db) = store_copy();
    let d = dir.path();
    check(
        "results-show-1.txt",
        &output_in(d, &["results", "show", "1", "--db", &db]),
    );
    check(
        "results-show-1.json",
        &output_in(d, &["results", "show", "1", "--json", "--db", &db]),
    );
    check(
        "results-show-1.csv",
        &output_in(d, &["results", "show", "1", "--format", "csv", "--db", &db]),
    );
    check(
        "report-1-mail.txt",
        &output_in(d, &["report", "1", "--format", "mail", "--db", &db]),
    );
}

it_test!(format_values_a_command_cannot_produce_are_refused_naming_the_others);
/// `--format` takes one set of values everywhere; a command refuses the ones it cannot produce,
/// says which it can, and writes nothing.
fn format_values_a_command_cannot_produce_are_refused_naming_the_others() {
    let (dir, db) = store_copy();
    let d = dir.path();
    pmlab()
        .current_dir(d)
        .args(["report", "1", "--format", "csv", "--db", &db])
        .assert()
        .failure()
        .stderr(predicates::str::contains(
            "--format csv is not supported by pmlab report; choose html, mail, markdown or json",
        ));
    assert!(
        !d.join("pmlab-report").exists(),
        "a refused report writes nothing"
    );
    pmlab()
        .current_dir(d)
        .args(["results", "show", "1", "--format", "html", "--db", &db])
        .assert()
        .failure()
        .stderr(predicates::str::contains(
            "choose table, markdown, mail, json or csv",
        ));
    // `md` stays an alias of markdown, as whatif took it.
    pmlab()
        .current_dir(d)
        .args(["results", "show", "1", "--format", "md", "--db", &db])
        .assert()
        .success();
}

/// Who runs the test is not the tree's: every `is_root` becomes `"<masked>"`.
fn mask_is_root(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "is_root" {
                    *x = serde_json::Value::String("<masked>".into());
                } else {
                    mask_is_root(x);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(mask_is_root),
        _ => {}
    }
}

it_test!(golden_info_json_of_fake_trees);
fn golden_info_json_of_fake_trees() {
    // info words capabilities by who asks ("changing it needs root"): the goldens are root's.
    crate::util::need_root("info's goldens are its output as root");
    for (name, t) in [
        ("intel_box", FakeTree::intel_box()),
        ("no_cpuidle", FakeTree::no_cpuidle()),
        ("haltpoll_guest", FakeTree::haltpoll_guest(true)),
    ] {
        let root = t.path().to_str().unwrap();
        let text = output_in(t.path(), &["info", "--json", "--root", root]);
        let mut j: serde_json::Value = serde_json::from_str(&text).unwrap();
        mask_is_root(&mut j);
        let masked = serde_json::to_string_pretty(&j)
            .unwrap()
            .replace(root, "$ROOT")
            + "\n";
        check(&format!("info-{name}.json"), &masked);
    }
}
