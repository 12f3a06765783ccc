//! `pmlab completions` and `pmlab man`: bash completes with the script pmlab prints, `man -l`
//! renders the pages pmlab writes, and bad input is refused with nothing written.

use std::process::Command;

use crate::harness::need_program;
use crate::util::{pmlab, stdout_of};

/// What bash's completion function offers for the words `words` (the last is being typed),
/// with the script `pmlab completions bash` prints sourced in a fresh `bash -c`.
fn bash_offers(words: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("pmlab.bash");
    std::fs::write(
        &script,
        stdout_of(pmlab().args(["completions", "bash"])).as_bytes(),
    )
    .unwrap();
    let call = format!(
        "source {}; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE=\"${{COMP_WORDS[*]}}\"; \
         COMP_POINT=${{#COMP_LINE}}; _pmlab pmlab \"${{COMP_WORDS[COMP_CWORD]}}\" \
         \"${{COMP_WORDS[COMP_CWORD-1]}}\" 2>/dev/null; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        words.join(" "),
        words.len() - 1
    );
    let out = Command::new("bash").args(["-c", &call]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

it_test!(bash_completes_subcommands_and_their_values);
/// `pmlab comp<TAB>` offers `completions` (and `compare`, nothing else); `pmlab completions
/// <TAB>` the shells; `pmlab kno<TAB>` `knob` alone.
fn bash_completes_subcommands_and_their_values() {
    need_program("bash", "the completion is a bash script");
    let comp = bash_offers(&["pmlab", "comp"]);
    assert!(comp.contains(&"completions".to_string()), "{comp:?}");
    assert!(comp.contains(&"compare".to_string()), "{comp:?}");
    assert!(comp.iter().all(|w| w.starts_with("comp")), "{comp:?}");
    let shells = bash_offers(&["pmlab", "completions", ""]);
    for s in ["bash", "zsh", "fish"] {
        assert!(shells.contains(&s.to_string()), "{shells:?}");
    }
    assert_eq!(bash_offers(&["pmlab", "kno"]), ["knob"]);
}

it_test!(zsh_and_fish_scripts_name_every_subcommand);
/// The zsh and fish scripts are generated and name the subcommands.
fn zsh_and_fish_scripts_name_every_subcommand() {
    for shell in ["zsh", "fish"] {
        let s = stdout_of(pmlab().args(["completions", shell]));
        for sub in ["analyze", "whatif", "completions", "man"] {
            assert!(s.contains(sub), "{shell}: no {sub}");
        }
    }
}

it_test!(man_writes_pages_that_man_renders);
/// `pmlab man DIR` writes pmlab.1 and a page per subcommand; `man -l` renders them with the
/// text of `--help`; `pmlab man` alone prints pmlab.1.
fn man_writes_pages_that_man_renders() {
    need_program("man", "scripts/setup.sh installs man-db");
    let dir = tempfile::tempdir().unwrap();
    pmlab()
        .args(["man", dir.path().to_str().unwrap()])
        .assert()
        .success();
    for page in [
        "pmlab.1",
        "pmlab-knob.1",
        "pmlab-knob-set.1",
        "pmlab-whatif.1",
    ] {
        assert!(dir.path().join(page).is_file(), "{page} not written");
    }
    let render = |page: &std::path::Path| {
        let out = Command::new("man")
            .args(["-P", "cat", "-l"])
            .arg(page)
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let top = render(&dir.path().join("pmlab.1"));
    for want in [
        "NAME",
        "SYNOPSIS",
        "A lab for CPU power management",
        "completions",
        "pmlab study --quick",
    ] {
        assert!(top.contains(want), "pmlab.1 lacks {want}:\n{top}");
    }
    let knob = render(&dir.path().join("pmlab-knob-set.1"));
    assert!(knob.contains("pmlab-knob-set"), "{knob}");
    let printed = stdout_of(pmlab().arg("man"));
    assert_eq!(
        printed,
        std::fs::read_to_string(dir.path().join("pmlab.1")).unwrap()
    );
}

it_test!(man_and_completions_refuse_bad_input);
/// A directory that does not exist and an unknown shell are refused, and nothing is written.
fn man_and_completions_refuse_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let out = pmlab()
        .args(["man", missing.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a directory"), "{err}");
    assert!(!missing.exists());
    let file = dir.path().join("f");
    std::fs::write(&file, "x").unwrap();
    let out = pmlab()
        .args(["man", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
    let out = pmlab().args(["completions", "tcsh"]).output().unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("invalid value 'tcsh'") && err.contains("bash"),
        "{err}"
    );
}
