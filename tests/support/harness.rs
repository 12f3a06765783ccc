//! The test harness of pmlab's test binaries that may skip (`harness = false`): libtest's
//! command line and output through libtest-mimic, where a test that cannot run here is
//! reported as `ignored, REASON`, never as passed.
//!
//! A binary includes this file as a module (`#[macro_use] #[path = ".../tests/support/harness.rs"]
//! mod harness;`) and calls `harness::main(...)` from its `main`. A test is a plain
//! `fn NAME()` registered by `it_test!(NAME);` on the line where libtest's `#[test]` would be
//! (with `harness = false`, rustc drops `#[test]` functions, so `#[test]` must not be used:
//! the source check below fails the run if one is left). A test that cannot run calls
//! `skip!("REASON")` (a `format!` string), from the test or any helper it calls: that
//! unwinds (guards still drop) and the runner reports the test as ignored with the reason.
//! `skip_part!("REASON")` lets the test go on and reports it ignored when it returns (a part
//! it could not check here).
//! With `PMLAB_TEST_SKIP_LOG=FILE`, each skip is also appended to FILE as `NAME: REASON`
//! (scripts/test.sh prints them). With `PMLAB_TEST_NO_ROOT=1` a root run first drops to
//! the `nobody` user, so every test that needs root really cannot have it.
#![allow(dead_code)]

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::process::ExitCode;

/// One registered test: `it_test!(name)` submits it.
pub struct Test {
    /// `module_path!()` where it was registered (`it::remote`).
    pub module: &'static str,
    pub name: &'static str,
    pub run: fn(),
    /// Files in, text out: no knob, tracefs, hotplug, timing or machine state, so it may run
    /// beside another such test (`it_test!(NAME, fixture)`).
    pub fixture: bool,
}

inventory::collect!(Test);

impl Test {
    /// The name libtest would give it: the module path without the crate (`remote::foo`).
    fn full_name(&self) -> String {
        match self.module.split_once("::") {
            Some((_, m)) => format!("{m}::{}", self.name),
            None => self.name.to_string(),
        }
    }
}

/// Registers `fn $name()` as a test of this binary (put it where `#[test]` would be).
#[allow(unused_macros)]
macro_rules! it_test {
    ($name:ident) => {
        ::inventory::submit! {
            $crate::harness::Test {
                module: module_path!(),
                name: stringify!($name),
                run: $name,
                fixture: false,
            }
        }
    };
    ($name:ident, fixture) => {
        ::inventory::submit! {
            $crate::harness::Test {
                module: module_path!(),
                name: stringify!($name),
                run: $name,
                fixture: true,
            }
        }
    };
}

/// Ends the running test as skipped with the reason (`format!` arguments); type `!`.
#[allow(unused_macros)]
macro_rules! skip {
    ($($arg:tt)*) => {
        $crate::harness::skip(format!($($arg)*))
    };
}

/// Ends the running test as skipped when it returns (`format!` arguments): the rest of it
/// still runs and may fail, but a test with a part left unchecked never counts as passed.
#[allow(unused_macros)]
macro_rules! skip_part {
    ($($arg:tt)*) => {
        $crate::harness::skip_part(format!($($arg)*))
    };
}

thread_local! {
    /// The reasons `skip_part!` gave in the test running on this thread.
    static PARTS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Marks the running test to be reported skipped when it returns (see `skip_part!`).
pub fn skip_part(reason: String) {
    PARTS.with(|p| p.borrow_mut().push(reason));
}

/// The payload of a skip's unwind.
pub struct Skip(pub String);

/// Ends the running test as skipped (see `skip!`).
pub fn skip(reason: String) -> ! {
    std::panic::panic_any(Skip(reason))
}

/// The variable that makes a root run drop to `nobody` (simulating a machine without root).
pub const NO_ROOT: &str = "PMLAB_TEST_NO_ROOT";

/// True when this process runs as root (after `PMLAB_TEST_NO_ROOT` dropped it, false).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Skips the running test unless it runs as root; `what` says what needs root.
pub fn need_root(what: &str) {
    if !is_root() {
        skip!("needs root: {what}");
    }
}

/// Skips the running test unless `path` exists; `why` says what it is for.
pub fn need_path(path: impl AsRef<Path>, why: &str) {
    let p = path.as_ref();
    if !p.exists() {
        skip!("{} missing: {why}", p.display());
    }
}

/// Skips the running test unless `program` is on PATH; `hint` says how to get it.
pub fn need_program(program: &str, hint: &str) {
    let found = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| {
            std::fs::metadata(d.join(program)).is_ok_and(|m| {
                m.is_file()
                    && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
            })
        })
    });
    if !found {
        skip!("{program} is not installed ({hint})");
    }
}

/// Skips the running test unless `python3` imports every module of `modules`; `hint` says
/// how to get them.
pub fn need_python(modules: &[&str], hint: &str) {
    let ok = std::process::Command::new("python3")
        .args(["-c", &format!("import {}", modules.join(", "))])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        skip!("python3 cannot import {} ({hint})", modules.join(", "));
    }
}

/// Under `PMLAB_TEST_NO_ROOT=1`, a root process becomes `nobody` (uid and gid 65534, no
/// supplementary groups) for good, before any test runs.
fn drop_root_if_asked() {
    let asked = std::env::var(NO_ROOT).is_ok_and(|v| !v.is_empty() && v != "0");
    if !asked || !is_root() {
        return;
    }
    let nobody = (
        rustix::process::Gid::from_raw(65534),
        rustix::process::Uid::from_raw(65534),
    );
    // Group first: after the uid changes, the process may no longer change its groups.
    rustix::thread::set_thread_groups(&[]).expect("setgroups");
    rustix::thread::set_thread_res_gid(nobody.0, nobody.0, nobody.0).expect("setresgid");
    rustix::thread::set_thread_res_uid(nobody.1, nobody.1, nobody.1).expect("setresuid");
    eprintln!("{NO_ROOT}: running as nobody (uid 65534)");
}

/// `$PMLAB_TEST_SKIP_LOG`, opened for appending before any privilege is dropped.
static SKIP_LOG: std::sync::OnceLock<std::sync::Mutex<std::fs::File>> = std::sync::OnceLock::new();

/// Appends `name: reason` to `$PMLAB_TEST_SKIP_LOG` when set.
fn log_skip(name: &str, reason: &str) {
    if let Some(f) = SKIP_LOG.get() {
        let line = format!("{name}: {}\n", reason.replace('\n', " "));
        let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = f.write_all(line.as_bytes()) {
            eprintln!("harness: cannot write the skip log: {e}");
        }
    }
}

/// The message of a panic's payload.
fn message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panicked".to_string()
    }
}

/// `$PMLAB_TEST_TIME_LOG`, opened for appending before any privilege is dropped.
static TIME_LOG: std::sync::OnceLock<std::sync::Mutex<std::fs::File>> = std::sync::OnceLock::new();

/// Opens `$var` for appending into `slot`, when set.
fn open_log(var: &str, slot: &std::sync::OnceLock<std::sync::Mutex<std::fs::File>>) {
    let Some(path) = std::env::var_os(var) else {
        return;
    };
    match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        Ok(f) => {
            let _ = slot.set(std::sync::Mutex::new(f));
        }
        Err(e) => eprintln!("harness: cannot open {}: {e}", Path::new(&path).display()),
    }
}

/// Appends `SECONDS NAME` to `$PMLAB_TEST_TIME_LOG` when set (scripts/test.sh prints the
/// slowest, to keep the suite's time in view).
fn log_time(name: &str, secs: f64) {
    if let Some(f) = TIME_LOG.get() {
        let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = f.write_all(format!("{secs:.1} {name}\n").as_bytes()) {
            eprintln!("harness: cannot write the time log: {e}");
        }
    }
}

fn run_one(name: String, run: fn()) -> Result<Completion, Failed> {
    PARTS.with(|p| p.borrow_mut().clear());
    let t0 = std::time::Instant::now();
    let result = catch_unwind(AssertUnwindSafe(run));
    log_time(&name, t0.elapsed().as_secs_f64());
    let parts = PARTS.with(|p| std::mem::take(&mut *p.borrow_mut()));
    match result {
        Ok(()) if parts.is_empty() => Ok(Completion::Completed),
        Ok(()) => {
            let reason = format!("part not checked: {}", parts.join("; "));
            log_skip(&name, &reason);
            Ok(Completion::ignored_with(reason))
        }
        Err(payload) => match payload.downcast::<Skip>() {
            Ok(skip) => {
                log_skip(&name, &skip.0);
                Ok(Completion::ignored_with(skip.0))
            }
            Err(payload) => Err(message(&*payload).into()),
        },
    }
}

/// Lines of the `.rs` files under `dir` that would lose a test or a skip: a `#[test]` (which
/// this harness never runs) or a `skipped:` printed and returned from (which would pass).
pub fn unregistered(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    for f in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs"))
    {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            let printed_skip = t.contains("println!(\"skipped") && !t.starts_with("//");
            if t == "#[test]" || t.starts_with("#[test]") || printed_skip {
                found.push(format!("{}:{}: {t}", f.display(), i + 1));
            }
        }
    }
    found
}

/// Runs every registered test and `extra` trials with libtest's arguments and output.
pub fn main(extra: Vec<Trial>) -> ExitCode {
    let args = Arguments::from_args();
    open_log("PMLAB_TEST_SKIP_LOG", &SKIP_LOG);
    open_log("PMLAB_TEST_TIME_LOG", &TIME_LOG);
    drop_root_if_asked();
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<Skip>().is_none() {
            default_hook(info);
        }
    }));
    let mut tests: Vec<&'static Test> = inventory::iter::<Test>.into_iter().collect();
    tests.sort_by_key(|t| t.full_name());
    let trial = |t: &'static Test| {
        let name = t.full_name();
        Trial::ignorable_test(name.clone(), move || run_one(name, t.run))
    };
    // One at a time (`--test-threads=1`, as the live tests need): the fixture tests first,
    // two at a time where there are two cores, then the rest one at a time.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if args.test_threads == Some(1) && cores > 1 && !args.list {
        let (fixture, live): (Vec<_>, Vec<_>) = tests.into_iter().partition(|t| t.fixture);
        let mut first: Vec<Trial> = fixture.into_iter().map(trial).collect();
        first.extend(extra);
        let live: Vec<Trial> = live.into_iter().map(trial).collect();
        let two = Arguments {
            test_threads: Some(2),
            ..args.clone()
        };
        let a = libtest_mimic::run(&two, first);
        let b = libtest_mimic::run(&args, live);
        return if a.has_failed() || b.has_failed() {
            ExitCode::from(101)
        } else {
            ExitCode::SUCCESS
        };
    }
    let mut trials: Vec<Trial> = tests.into_iter().map(trial).collect();
    trials.extend(extra);
    trials.sort_by(|a, b| a.name().cmp(b.name()));
    libtest_mimic::run(&args, trials).exit_code()
}

/// The trial that fails when a file in `dir` has a `#[test]` or a printed `skipped:`.
pub fn source_check(name: &str, dir: &'static str) -> Trial {
    Trial::test(name.to_string(), move || {
        let found = unregistered(Path::new(dir));
        if found.is_empty() {
            return Ok(());
        }
        Err(format!(
            "with harness = false, `#[test]` functions never run and a printed skip passes: \
             replace `#[test]` with `it_test!(NAME);` and `eprintln!(\"skipped: R\"); return;` \
             with `skip!(\"R\");` (tests/support/harness.rs):\n{}",
            found.join("\n")
        )
        .into())
    })
}
