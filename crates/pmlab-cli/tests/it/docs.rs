//! The documentation tells the truth: every ```` ```console ```` block of README.md and
//! docs/*.md runs, each command exits 0 and prints output of the shape shown; relative links
//! point at files that exist. The convention is in docs/development.md ("The documentation's
//! examples").

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{cpuidle_driver, fixtures, is_root, online_cpus};

/// The repository's root.
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One command of a block and the output shown under it.
#[derive(Debug, PartialEq)]
struct Step {
    cmd: String,
    shown: Vec<String>,
}

/// A ```` ```console ```` block: where it is, what it needs, its commands.
#[derive(Debug)]
struct Block {
    at: String,
    needs: Vec<Need>,
    steps: Vec<Step>,
}

/// The console blocks of one markdown text (`name` for messages). A `<!-- needs: ... -->`
/// line right before a block lists what it needs; a command line ending in `\` goes on. An
/// unknown need, output before a command and an open block are errors.
fn blocks(name: &str, text: &str) -> Result<Vec<Block>, String> {
    let mut out = Vec::new();
    let mut needs: Vec<Need> = Vec::new();
    let mut cur: Option<Block> = None;
    let mut continued = false;
    for (i, line) in text.lines().enumerate() {
        if let Some(b) = cur.as_mut() {
            if line.trim_start().starts_with("```") {
                out.push(cur.take().unwrap());
            } else if continued {
                let s = b.steps.last_mut().unwrap();
                s.cmd.push('\n');
                s.cmd.push_str(line);
                continued = line.ends_with('\\');
            } else if let Some(cmd) = line.strip_prefix("$ ") {
                b.steps.push(Step {
                    cmd: cmd.to_string(),
                    shown: Vec::new(),
                });
                continued = cmd.ends_with('\\');
            } else {
                let Some(s) = b.steps.last_mut() else {
                    return Err(format!(
                        "{name}:{}: output before the first `$ ` line",
                        i + 1
                    ));
                };
                s.shown.push(line.to_string());
            }
            continue;
        }
        if line.trim() == "```console" {
            cur = Some(Block {
                at: format!("{name}:{}", i + 1),
                needs: std::mem::take(&mut needs),
                steps: Vec::new(),
            });
        } else if let Some(rest) = line
            .trim()
            .strip_prefix("<!-- needs:")
            .and_then(|r| r.strip_suffix("-->"))
        {
            needs = rest
                .split_whitespace()
                .map(|n| n.parse().map_err(|e| format!("{name}:{}: {e}", i + 1)))
                .collect::<Result<_, _>>()?;
        } else {
            needs.clear();
        }
    }
    if let Some(b) = cur {
        return Err(format!("{}: a console block is not closed", b.at));
    }
    Ok(out)
}

/// The shape of text: each number (digits, `.` or `,` between digits, a unit glued on)
/// becomes `#`, runs of one punctuation or drawing character become one, whitespace runs one
/// space.
fn shape_text(s: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = s.trim().chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_digit() {
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || (matches!(chars[i], '.' | ',')
                        && chars.get(i + 1).is_some_and(|&n| n.is_ascii_digit())))
            {
                i += 1;
            }
            // An exponent (JSON's `4.47e-05`) is part of the number.
            if matches!(chars.get(i), Some('e' | 'E')) {
                let mut j = i + 1;
                if matches!(chars.get(j), Some('+' | '-')) {
                    j += 1;
                }
                if chars.get(j).is_some_and(|c| c.is_ascii_digit()) {
                    i = j;
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            // A unit glued to the number (`50us`, `37.0%`) is part of the value.
            while i < chars.len() && (chars[i].is_alphabetic() || chars[i] == '%') {
                i += 1;
            }
            out.push('#');
            continue;
        }
        if c.is_whitespace() {
            if !out.ends_with(' ') {
                out.push(' ');
            }
        } else if c.is_alphanumeric() || !out.ends_with(c) {
            out.push(c);
        }
        i += 1;
    }
    out
}

/// The shape of a line: for a table row (cells between `│`, `┆` or `|`) the number of cells
/// and the first cell's text less a note in parentheses (values and verdicts vary, labels and
/// columns do not); else its text's shape.
fn shape(line: &str) -> String {
    if line.contains('│') || line.trim_start().starts_with('|') {
        let cells: Vec<&str> = line.split(['│', '┆', '|']).collect();
        let first = cells
            .iter()
            .map(|c| c.trim())
            .find(|c| !c.is_empty())
            .unwrap_or("");
        // A label's note in parentheses (`0 (knee)`) depends on the results.
        let first = first.split(" (").next().unwrap_or(first);
        return format!("row {}: {}", cells.len(), shape_text(first));
    }
    shape_text(line)
}

/// Where the output shown does not fit the real output: the first shown line (by its shape)
/// not found, in order, among the real lines. `...` lines and blank lines stand for nothing.
fn misfit(shown: &[String], real: &str) -> Option<String> {
    let real: Vec<String> = real
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(shape)
        .collect();
    let mut at = 0;
    for want in shown {
        if want.trim().is_empty() || want.trim() == "..." {
            continue;
        }
        let s = shape(want);
        match real[at..].iter().position(|r| *r == s) {
            Some(k) => at += k + 1,
            None => return Some(want.clone()),
        }
    }
    None
}

/// What a block needs of the machine, as `<!-- needs: ... -->` names it.
#[derive(Debug, PartialEq)]
enum Need {
    /// `root`
    Root,
    /// `haltpoll`: the haltpoll cpuidle driver.
    Haltpoll,
    /// `hotplug`: a hot-pluggable cpu1.
    Hotplug,
    /// `python`: the Python package installed.
    Python,
    /// `man`: man-db.
    Man,
    /// `cpus=N`: at least N CPUs online.
    Cpus(usize),
}

impl std::str::FromStr for Need {
    type Err = String;

    /// An unknown name is an error: a typo must not turn into a skip.
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "root" => Need::Root,
            "haltpoll" => Need::Haltpoll,
            "hotplug" => Need::Hotplug,
            "python" => Need::Python,
            "man" => Need::Man,
            _ => match s.strip_prefix("cpus=").map(str::parse) {
                Some(Ok(n)) => Need::Cpus(n),
                _ => {
                    return Err(format!(
                        "unknown need `{s}` (root, haltpoll, hotplug, python, man, cpus=N)"
                    ))
                }
            },
        })
    }
}

impl Need {
    /// Why this machine cannot run a block that needs this, or `None` when it can.
    fn missing(&self) -> Option<String> {
        let runs = |prog: &str, args: &[&str]| {
            Command::new(prog)
                .args(args)
                .output()
                .is_ok_and(|o| o.status.success())
        };
        match self {
            Need::Root if !is_root() => Some("needs root".into()),
            Need::Haltpoll if cpuidle_driver() != "haltpoll" => Some(format!(
                "needs the haltpoll cpuidle driver (here: {})",
                cpuidle_driver()
            )),
            Need::Hotplug if !Path::new("/sys/devices/system/cpu/cpu1/online").exists() => {
                Some("needs a hot-pluggable cpu1".into())
            }
            Need::Python if !runs("python3", &["-c", "import pmlab"]) => {
                Some("needs the Python package (scripts/test.sh installs it)".into())
            }
            Need::Man if !runs("man", &["--version"]) => {
                Some("needs man-db (scripts/setup.sh installs it)".into())
            }
            Need::Cpus(n) if online_cpus().len() < *n => Some(format!("needs {n} CPUs online")),
            _ => None,
        }
    }
}

/// A fresh directory for a block: `tests/fixtures` of the repository in it, `pmlab` on PATH.
fn sandbox() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("tests")).unwrap();
    std::os::unix::fs::symlink(fixtures(), dir.path().join("tests/fixtures")).unwrap();
    let bin = assert_cmd::cargo::cargo_bin("pmlab");
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (dir, path)
}

/// Runs every block of `files` (relative to the repository); a block whose needs this
/// machine lacks is left out and the test reported skipped with the reason.
fn run_examples(files: &[PathBuf]) -> usize {
    let mut ran = 0;
    for f in files {
        let name = f.strip_prefix(repo()).unwrap_or(f).display().to_string();
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{name}: {e}"));
        for b in blocks(&name, &text).unwrap_or_else(|e| panic!("{e}")) {
            if let Some(why) = b.needs.iter().find_map(Need::missing) {
                skip_part!("{}: {why}", b.at);
                continue;
            }
            let (dir, path) = sandbox();
            for s in &b.steps {
                // README's quick study is the suite's longest run: the study tests run it
                // once, as written, and check the rest of what it did.
                let shared = (s.cmd == "pmlab study --quick")
                    .then(|| &crate::study::readme_quick_study().out);
                let out = match shared {
                    Some(out) => out.clone(),
                    None => Command::new("bash")
                        .args(["-o", "pipefail", "-c", &s.cmd])
                        .current_dir(dir.path())
                        .env("PATH", &path)
                        .output()
                        .unwrap(),
                };
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success(),
                    "{}: `{}` failed ({}):\n{}{}",
                    b.at,
                    s.cmd,
                    out.status,
                    stdout,
                    String::from_utf8_lossy(&out.stderr)
                );
                if let Some(line) = misfit(&s.shown, &stdout) {
                    panic!(
                        "{}: `{}`: the line shown\n  {line}\nis not in its output (in order, by shape):\n{stdout}",
                        b.at, s.cmd
                    );
                }
                ran += 1;
            }
        }
    }
    ran
}

/// docs/*.md, sorted.
fn guide() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    v.sort();
    v
}

it_test!(readme_examples_run_and_print_what_readme_shows);
/// Every console block of README.md; README shows at least five.
fn readme_examples_run_and_print_what_readme_shows() {
    let readme = repo().join("README.md");
    let text = std::fs::read_to_string(&readme).unwrap();
    let n = blocks("README.md", &text).unwrap().len();
    assert!(n >= 5, "README.md has {n} console examples");
    run_examples(&[readme]);
}

it_test!(guide_examples_run_and_print_what_the_guide_shows);
/// Every console block of docs/*.md.
fn guide_examples_run_and_print_what_the_guide_shows() {
    run_examples(&guide());
}

/// Chapters other branches write, linked from the index before they land.
const COMING: &[&str] = &[
    "whatif.md",
    "bare-metal.md",
    "reader.md",
    "disturbance.md",
    "boot.md",
];

it_test!(relative_links_in_readme_and_the_guide_point_at_files);
/// Every `](path)` link that is not a URL names a file that exists (anchors aside).
fn relative_links_in_readme_and_the_guide_point_at_files() {
    let mut files = vec![repo().join("README.md")];
    files.extend(guide());
    let mut bad = Vec::new();
    let mut coming = std::collections::BTreeSet::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split('#').next().unwrap();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            if !f.parent().unwrap().join(target).exists() {
                let base = Path::new(target).file_name().unwrap().to_string_lossy();
                if COMING.contains(&base.as_ref()) {
                    coming.insert(base.into_owned());
                } else {
                    bad.push(format!("{}: {target}", f.display()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "links to nothing: {bad:#?}");
    for c in coming {
        skip_part!("docs/{c} (another branch writes it) is not here yet");
    }
}

it_test!(doc_blocks_are_parsed_with_their_needs_and_continued_lines);
/// The parser: needs right before a fence, `\` continuations, output under its command.
fn doc_blocks_are_parsed_with_their_needs_and_continued_lines() {
    let md = "text\n<!-- needs: root cpus=2 -->\n```console\n$ a \\\n  b\nout 1\n...\n$ c\n```\n\n```console\n$ d\n```\n```sh\n$ e\n```\n";
    let b = blocks("x.md", md).unwrap();
    assert_eq!(b.len(), 2);
    assert_eq!(b[0].needs, [Need::Root, Need::Cpus(2)]);
    assert_eq!(b[0].at, "x.md:3");
    assert_eq!(
        b[0].steps,
        [
            Step {
                cmd: "a \\\n  b".into(),
                shown: vec!["out 1".into(), "...".into()]
            },
            Step {
                cmd: "c".into(),
                shown: vec![]
            }
        ]
    );
    assert!(b[1].needs.is_empty(), "needs apply to the next block only");
}

it_test!(output_shape_allows_other_numbers_but_not_other_words_or_columns);
/// The shape check: numbers and column widths may differ; words, columns, order may not.
fn output_shape_allows_other_numbers_but_not_other_words_or_columns() {
    let real = "┌─────┬──────┐\n│ cpu ┆ idle │\n╞═════╪══════╡\n│ 0   ┆ 12.5 │\nidle 99.1% of 2.00 s\ndone\n";
    let shown = |s: &str| s.lines().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(
        misfit(
            &shown("┌──┬──┐\n│ cpu ┆ idle │\n...\n│ 1 ┆ 3 │\nidle 7% of 1.5 s"),
            real
        ),
        None
    );
    assert_eq!(misfit(&shown("...\ndone"), real), None);
    assert_eq!(
        misfit(&shown("busy 7% of 1.5 s"), real).as_deref(),
        Some("busy 7% of 1.5 s")
    );
    assert_eq!(
        misfit(&shown("│ cpu ┆ idle ┆ poll │"), real).as_deref(),
        Some("│ cpu ┆ idle ┆ poll │")
    );
    assert!(misfit(&shown("done\n│ cpu ┆ idle │"), real).is_some());
    assert!(misfit(&shown("│ 0 ┆ 12.5 ┆ 3 │"), real).is_some());
    assert_eq!(shape("│ 0 (knee) ┆ 3 │"), shape("│ 50us ┆ 3 │"));
    assert_eq!(
        shape("knee: 0 (within 37.0% of 50us)"),
        shape("knee: 200us (within 3% of 0)")
    );
    assert_ne!(shape("│ A ┆ 3 │"), shape("│ B ┆ 3 │"));
    // JSON writes small numbers with an exponent.
    assert_eq!(
        shape(r#"{"idle_share":0,"x":1.5}"#),
        shape(r#"{"idle_share":4.47e-05,"x":2E+3}"#)
    );
}

it_test!(an_unknown_need_fails_instead_of_skipping);
/// A misspelt need, output before a command and an open block are errors, not skips.
fn an_unknown_need_fails_instead_of_skipping() {
    assert!("hapltoll".parse::<Need>().unwrap_err().contains("hapltoll"));
    assert!("cpus=two".parse::<Need>().is_err());
    assert_eq!("cpus=1".parse::<Need>(), Ok(Need::Cpus(1)));
    assert_eq!(Need::Cpus(1).missing(), None);
    let e = blocks("x.md", "<!-- needs: rot -->\n```console\n```\n").unwrap_err();
    assert!(e.starts_with("x.md:1: unknown need `rot`"), "{e}");
    let e = blocks("x.md", "```console\nout\n```\n").unwrap_err();
    assert!(e.contains("x.md:2: output before"), "{e}");
    let e = blocks("x.md", "```console\n$ ls\n").unwrap_err();
    assert!(e.contains("x.md:1: a console block is not closed"), "{e}");
}
