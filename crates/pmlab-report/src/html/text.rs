//! The text forms of the report `pmlab report` writes as HTML: the same findings, the stages
//! that did not run, and each experiment's tables, as mail (72 columns) or markdown; and its
//! findings and stages as data (JSON).

use super::findings::{findings, Finding};
use super::{reports, HtmlError, Input, StageNote};
use crate::render::Format;
use serde::Serialize;
use std::fmt::Write;

/// The report's findings and stages as data: `pmlab report --format json`, the same object
/// `pmlab study --json` prints for the study it ran.
#[derive(Debug, Serialize)]
pub struct Summary<'a> {
    /// The report's title.
    pub title: &'a str,
    /// The experiments it shows, by id.
    pub experiments: Vec<i64>,
    /// Study stages (empty for plain experiments).
    pub stages: &'a [StageNote],
    /// The findings, best first.
    pub findings: Vec<Finding>,
}

/// The findings and stages of `input`.
pub fn summary(input: &Input) -> Result<Summary<'_>, HtmlError> {
    let reports = reports(&input.experiments)?;
    let items: Vec<_> = input.experiments.iter().zip(reports.iter()).collect();
    Ok(Summary {
        title: &input.title,
        experiments: input.experiments.iter().map(|e| e.info.id).collect(),
        stages: &input.stages,
        findings: findings(&items, &input.stages),
    })
}

/// The report of `input` as mail text, or as markdown when `markdown` is true.
pub fn text(input: &Input, markdown: bool) -> Result<String, HtmlError> {
    let md = markdown;
    let reports = reports(&input.experiments)?;
    let items: Vec<_> = input.experiments.iter().zip(reports.iter()).collect();
    let all = findings(&items, &input.stages);
    let mut out = String::new();
    let _ = writeln!(out, "{}{}\n", if md { "# " } else { "" }, input.title);
    let _ = writeln!(out, "{}", if md { "## Summary\n" } else { "Summary:" });
    for (i, f) in all.iter().take(3).enumerate() {
        let lines = wrap(&f.text, if md { 1000 } else { 68 }, 4);
        let _ = writeln!(out, "{}. {}", i + 1, lines.join("\n"));
    }
    out.push('\n');
    for s in &input.stages {
        if s.status != "done" {
            let line = format!("{}: {} — {}", s.stage, s.status, s.reason);
            let lines = wrap(&line, if md { 1000 } else { 70 }, 2);
            let _ = writeln!(out, "{}{}", if md { "- " } else { "" }, lines.join("\n"));
        }
    }
    let fmt = if md { Format::Markdown } else { Format::Mail };
    for r in &reports {
        out.push('\n');
        out.push_str(&fmt.renderer().render(r)?);
    }
    Ok(out)
}

/// Wrap at `limit` columns; continuation lines indented by `indent`.
fn wrap(text: &str, limit: usize, indent: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let cur = lines.last_mut().expect("one line");
        if !cur.trim().is_empty() && cur.chars().count() + 1 + word.chars().count() > limit {
            lines.push(" ".repeat(indent) + word);
        } else {
            if !cur.trim().is_empty() {
                cur.push(' ');
            }
            cur.push_str(word);
        }
    }
    lines
}
