//! Renderers of analysis tables ([`pmlab_analysis::Table`]): terminal (comfy-table), markdown,
//! CSV (the `csv` crate, through [`Table::to_csv`]); and the `pmlab whatif` report built on them.

use super::{Format, RenderError};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table as Comfy};
use pmlab_analysis::all::{Analyzed, Section};
use pmlab_analysis::replay::cpuidle::GovernorReport;
use pmlab_analysis::replay::WhatifReport;
use pmlab_analysis::{Cell, Table, Tabular};
use std::fmt::Write;
use std::path::Path;

/// A terminal table: floats with `prec` decimals.
pub fn text(t: &Table, prec: usize) -> String {
    comfy(&t.columns, &t.rows, prec)
}

fn comfy(columns: &[String], rows: &[Vec<Cell>], prec: usize) -> String {
    let mut c = Comfy::new();
    c.load_preset(UTF8_FULL_CONDENSED);
    c.set_header(columns.to_vec());
    for row in rows {
        c.add_row(row.iter().map(|x| x.text(prec)).collect::<Vec<_>>());
    }
    c.to_string()
}

/// A terminal table under its title, its first `limit` rows (floats with 3 decimals), and a
/// line saying how many more there are: the form of `pmlab analyze`.
pub fn text_titled(t: &Table, limit: usize) -> String {
    let mut out = format!("{}\n", t.title);
    if t.rows.is_empty() {
        out.push_str("  (no rows)\n");
        return out;
    }
    let shown = &t.rows[..t.rows.len().min(limit)];
    let _ = writeln!(out, "{}", comfy(&t.columns, shown, 3));
    if t.rows.len() > limit {
        let _ = writeln!(
            out,
            "  … {} more rows (--all-rows, --json or --export for all)",
            t.rows.len() - limit
        );
    }
    out
}

/// One section of `pmlab analyze` as text: its name, why it could not run, its tables (or
/// their differences against a baseline, when there are some), and its notes.
fn analyze_section(s: &Section, diff: Option<&[Table]>, limit: usize) -> String {
    let mut out = format!("\n== {} ==\n", s.name);
    if let Some(p) = &s.problem {
        let _ = writeln!(out, "{p}");
    }
    let tables = match diff {
        Some(d) if !d.is_empty() => d,
        _ => s.tables.as_slice(),
    };
    for t in tables {
        out.push_str(&text_titled(t, limit));
    }
    for n in &s.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// One section of `pmlab analyze` as markdown: a heading, why it could not run, every row of
/// its tables (or of their differences against a baseline), and its notes as a list.
fn analyze_section_markdown(s: &Section, diff: Option<&[Table]>) -> String {
    let mut out = format!("\n#### {}\n\n", s.name);
    if let Some(p) = &s.problem {
        let _ = writeln!(out, "{p}\n");
    }
    let tables = match diff {
        Some(d) if !d.is_empty() => d,
        _ => s.tables.as_slice(),
    };
    for t in tables {
        out.push_str(&markdown(t, 3));
    }
    for n in &s.notes {
        let _ = writeln!(out, "- {n}");
    }
    out
}

/// `pmlab analyze FILE` as a table or markdown: a line on the trace, then every section (with
/// `diffs`, each section's differences against a baseline); `limit` rows per terminal table.
pub fn analyze(
    file: &Path,
    a: &Analyzed,
    diffs: Option<&[(String, Vec<Table>)]>,
    format: Format,
    limit: usize,
) -> String {
    let r = &a.report;
    let (md, against) = match format {
        Format::Markdown => (true, " (differences against the baseline)"),
        _ => (false, "  (differences against the baseline)"),
    };
    let mut out = if md {
        format!("### pmlab analyze {}\n\n", file.display())
    } else {
        format!("{}: ", file.display())
    };
    let _ = writeln!(
        out,
        "{} events, {} CPUs, {:.6} s{}",
        r.events,
        r.cpus,
        r.span_ns as f64 / 1e9,
        if diffs.is_some() { against } else { "" }
    );
    for s in &a.sections() {
        let diff = diffs
            .and_then(|d| d.iter().find(|d| d.0 == s.name))
            .map(|d| d.1.as_slice());
        out.push_str(&if md {
            analyze_section_markdown(s, diff)
        } else {
            analyze_section(s, diff, limit)
        });
    }
    out
}

/// A markdown table under its title in bold, followed by a blank line.
pub fn markdown(t: &Table, prec: usize) -> String {
    let mut out = format!("**{}**\n\n", t.title);
    let _ = writeln!(out, "| {} |", t.columns.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(t.columns.len()));
    for row in &t.rows {
        let cells: Vec<String> = row.iter().map(|c| c.text(prec)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out.push('\n');
    out
}

/// A plain fixed-width table (for mail): the columns named in `keep` that the table has,
/// right-aligned, indented by two spaces; floats with `prec` decimals.
pub fn plain(t: &Table, keep: &[&str], prec: usize) -> String {
    let idx: Vec<usize> = keep.iter().filter_map(|k| t.col(k)).collect();
    let rows: Vec<Vec<String>> =
        std::iter::once(idx.iter().map(|&i| t.columns[i].clone()).collect())
            .chain(
                t.rows
                    .iter()
                    .map(|r| idx.iter().map(|&i| r[i].text(prec)).collect()),
            )
            .collect();
    let w: Vec<usize> = (0..idx.len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r.iter().zip(&w).map(|(c, w)| format!("{c:>w$}")).collect();
        let _ = writeln!(out, "  {}", line.join(" "));
    }
    out
}

/// The columns of the mail form of `pmlab whatif`: the ones fit for a cover letter.
const WHATIF_MAIL_COLUMNS: &[&str] = &[
    "value_us",
    "caught",
    "missed",
    "catch_pct",
    "poll_wall_pct",
    "saved_ms",
    "us_per_op_first",
    "us_per_op_causal",
];

/// The `pmlab whatif` report of the replay of `file`, in `format` (every format but HTML).
pub fn whatif(file: &Path, r: &WhatifReport, format: Format) -> Result<String, RenderError> {
    let head = format!(
        "{}: {:.6} s replayed under {:?}",
        file.display(),
        r.span_ns as f64 / 1e9,
        r.policy
    );
    whatif_report(file, &head, r, WHATIF_MAIL_COLUMNS, format)
}

/// The columns of the mail form of `pmlab whatif --governor`.
const GOVERNOR_MAIL_COLUMNS: &[&str] = &[
    "state",
    "name",
    "rec_use_pct",
    "use_pct",
    "rec_time_pct",
    "time_pct",
    "rec_above",
    "above",
    "rec_below",
    "below",
];

/// The `pmlab whatif --governor` report of the replay of `file`, in `format`.
pub fn whatif_governor(
    file: &Path,
    r: &GovernorReport,
    format: Format,
) -> Result<String, RenderError> {
    let head = format!(
        "{}: {:.6} s, {} idle periods on CPU {} replayed under {} (Linux {}) onto {}",
        file.display(),
        r.span_ns as f64 / 1e9,
        r.periods,
        pmlab_kernel::cpulist::format_cpu_list(&r.cpus),
        r.governor.name(),
        r.modelled_kernel,
        r.table.source
    );
    whatif_report(file, &head, r, GOVERNOR_MAIL_COLUMNS, format)
}

/// A what-if report in `format`: JSON of the whole report, CSV of its tables, markdown,
/// mail (the first table's `mail` columns) or terminal tables under `head`.
fn whatif_report<R: Tabular + serde::Serialize>(
    file: &Path,
    head: &str,
    r: &R,
    mail: &[&str],
    format: Format,
) -> Result<String, RenderError> {
    let tables = r.tables();
    let notes = r.notes();
    let mut out = String::new();
    match format {
        Format::Json => {
            out = serde_json::to_string_pretty(r).map_err(|e| RenderError {
                format: "json",
                message: e.to_string(),
            })?;
            out.push('\n');
        }
        Format::Csv => {
            for t in &tables {
                out.push_str(&t.to_csv());
            }
        }
        Format::Markdown => {
            let _ = writeln!(out, "### pmlab whatif {}\n", file.display());
            for t in &tables {
                out.push_str(&markdown(t, 2));
            }
            for n in &notes {
                let _ = writeln!(out, "- {n}");
            }
        }
        Format::Mail => {
            let _ = writeln!(out, "pmlab whatif {}", file.display());
            for t in tables.iter().take(1) {
                out.push_str(&plain(t, mail, 1));
            }
            for n in &notes {
                let _ = writeln!(out, "  * {n}");
            }
        }
        Format::Table => {
            let _ = writeln!(out, "{head}");
            for t in &tables {
                let _ = writeln!(out, "{}\n{}", t.title, text(t, 2));
            }
            for n in &notes {
                let _ = writeln!(out, "note: {n}");
            }
        }
        Format::Html => {
            return Err(RenderError {
                format: "html",
                message: "`pmlab whatif` prints text: choose table, markdown, mail, json or csv"
                    .into(),
            })
        }
    }
    Ok(out)
}
