//! A report made of titled tables with typed cells (anything [`Tabular`]) under a few head
//! lines, in every text format through the drawers the experiment reports use: terminal
//! (comfy-table, numbers right-aligned), markdown, mail (72 columns, wide tables split), CSV
//! (its first table, through the `csv` crate) and JSON (the data the tables were built from).
//! `pmlab hotplug` prints through it.

use super::{mail, markdown, table, Format, RenderError};
use crate::report::Grid;
use pmlab_analysis::{Cell, Table, Tabular};
use serde::Serialize;
use std::fmt::Write;

/// Decimals of floating-point cells for people (CSV and JSON keep every digit).
const PRECISION: usize = 2;

/// A table for people: cells as text (an empty cell as `-`), numeric columns right-aligned.
/// With `merge_keys`, the key columns become one label column (the mail form repeats the
/// first column in each part of a table it splits).
fn grid(t: &Table, merge_keys: bool) -> Grid {
    let text = |c: &Cell| match c {
        Cell::Empty => "-".to_string(),
        c => c.text(PRECISION),
    };
    let numeric = |i: usize| {
        t.rows.iter().any(|r| r[i].num().is_some())
            && t.rows
                .iter()
                .all(|r| r[i].num().is_some() || r[i] == Cell::Empty)
    };
    let merged = if merge_keys && t.keys > 1 { t.keys } else { 1 };
    let join = |cells: Vec<String>| cells.join(" ");
    let mut headers = vec![join(t.columns[..merged].to_vec())];
    headers.extend(t.columns[merged..].iter().cloned());
    let rows = t
        .rows
        .iter()
        .map(|r| {
            let mut row = vec![join(r[..merged].iter().map(text).collect())];
            row.extend(r[merged..].iter().map(text));
            row
        })
        .collect();
    let mut right = vec![merged == 1 && numeric(0)];
    right.extend((merged..t.columns.len()).map(numeric));
    Grid {
        headers,
        rows,
        right,
    }
}

/// `head` (its first line the title), then `body`'s tables and notes, in `format`; `data` is
/// what `body` was built from, the JSON form. An empty table is one line saying so; CSV is
/// the first table only (the others differ in columns: they are in the JSON form).
pub fn sheet<T: Tabular + Serialize>(
    head: &[String],
    body: &T,
    format: Format,
) -> Result<String, RenderError> {
    let tables = body.tables();
    let notes = body.notes();
    let mut out = String::new();
    match format {
        Format::Json => {
            out = serde_json::to_string_pretty(body).map_err(|e| RenderError {
                format: "json",
                message: e.to_string(),
            })?;
            out.push('\n');
        }
        Format::Csv => {
            if let Some(t) = tables.first() {
                out = t.to_csv();
            }
        }
        Format::Table => {
            for l in head {
                let _ = writeln!(out, "{l}");
            }
            for t in &tables {
                if t.rows.is_empty() {
                    let _ = write!(out, "\n{}: none\n", t.title);
                } else {
                    let _ = write!(out, "\n{}\n{}", t.title, table::draw(&grid(t, false)));
                }
            }
            if !notes.is_empty() {
                out.push('\n');
            }
            for n in &notes {
                let _ = writeln!(out, "note: {n}");
            }
        }
        Format::Markdown => {
            for (i, l) in head.iter().enumerate() {
                let _ = match i {
                    0 => writeln!(out, "### {l}\n"),
                    _ => writeln!(out, "{l}  "),
                };
            }
            for t in &tables {
                if t.rows.is_empty() {
                    let _ = write!(out, "\n**{}**: none\n", t.title);
                } else {
                    let _ = write!(
                        out,
                        "\n**{}**\n\n{}",
                        t.title,
                        markdown::table(&grid(t, false))
                    );
                }
            }
            if !notes.is_empty() {
                out.push('\n');
            }
            for n in &notes {
                let _ = writeln!(out, "- {n}");
            }
        }
        Format::Mail => {
            let width = mail::MAIL_WIDTH;
            let mut lines: Vec<String> =
                head.iter().flat_map(|l| mail::wrap(l, width, 2)).collect();
            for t in &tables {
                lines.push(String::new());
                if t.rows.is_empty() {
                    lines.extend(mail::wrap(&format!("{}: none", t.title), width, 2));
                } else {
                    lines.extend(mail::wrap(&format!("{}:", t.title), width, 2));
                    lines.extend(mail::layout(&grid(t, true), &[], width));
                }
            }
            if !notes.is_empty() {
                lines.push(String::new());
            }
            for n in &notes {
                lines.extend(mail::wrap(&format!("note: {n}"), width, 2));
            }
            out = lines.join("\n");
            out.push('\n');
        }
        Format::Html => {
            return Err(RenderError {
                format: "html",
                message: "this command prints text: choose table, markdown, mail, json or csv"
                    .into(),
            })
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Body {
        rows: Vec<(String, String, u32, f64)>,
    }

    impl Tabular for Body {
        fn tables(&self) -> Vec<Table> {
            let mut a = Table::new(
                "latency",
                "Latency per direction",
                &[
                    "config",
                    "dir",
                    "n",
                    "p50 ms",
                    "a rather long column name",
                    "x",
                ],
                2,
            );
            for (c, d, n, p) in &self.rows {
                a.row(vec![
                    c.as_str().into(),
                    d.as_str().into(),
                    (*n).into(),
                    (*p).into(),
                    "some words, with a comma".into(),
                    Cell::Empty,
                ]);
            }
            let b = Table::new("outliers", "Outliers", &["config", "ms"], 1);
            vec![a, b]
        }
        fn notes(&self) -> Vec<String> {
            vec!["percentiles are nearest rank".into()]
        }
    }

    fn body() -> Body {
        Body {
            rows: vec![
                ("none".into(), "down".into(), 20, 31.256),
                ("rcu-expedited".into(), "up".into(), 20, 4.5),
            ],
        }
    }

    fn head() -> Vec<String> {
        vec!["CPU hotplug latency: cpus 1".into(), "second line".into()]
    }

    #[test]
    fn the_table_form_right_aligns_numbers_and_says_when_a_table_is_empty() {
        let t = sheet(&head(), &body(), Format::Table).unwrap();
        assert!(
            t.starts_with("CPU hotplug latency: cpus 1\nsecond line\n\nLatency per direction\n")
        );
        assert!(t.contains("31.26") && !t.contains("31.256"), "{t}");
        // Right-aligned: the shorter number is padded on the left.
        assert!(t.contains("  4.50 "), "{t}");
        assert!(t.contains("\nOutliers: none\n"), "{t}");
        assert!(t.ends_with("\nnote: percentiles are nearest rank\n"), "{t}");
    }

    #[test]
    fn markdown_has_a_heading_and_aligned_tables() {
        let t = sheet(&head(), &body(), Format::Markdown).unwrap();
        assert!(
            t.starts_with("### CPU hotplug latency: cpus 1\n\nsecond line  \n"),
            "{t}"
        );
        assert!(t.contains("| config | dir | n | p50 ms |"), "{t}");
        assert!(t.contains("|:---|:---|---:|---:|"), "{t}");
        assert!(t.contains("**Outliers**: none"), "{t}");
        assert!(t.contains("- percentiles are nearest rank"), "{t}");
    }

    #[test]
    fn mail_fits_72_columns_and_repeats_the_merged_keys() {
        let t = sheet(&head(), &body(), Format::Mail).unwrap();
        assert!(t.lines().all(|l| l.chars().count() <= 72), "{t}");
        assert!(t.contains("rcu-expedited up"), "{t}");
        assert!(
            t.lines().filter(|l| l.starts_with("config dir")).count() >= 1,
            "{t}"
        );
    }

    #[test]
    fn csv_is_the_first_table_and_json_the_data() {
        let t = sheet(&head(), &body(), Format::Csv).unwrap();
        let mut r = ::csv::Reader::from_reader(t.as_bytes());
        assert_eq!(r.headers().unwrap().get(3), Some("p50 ms"));
        let rows: Vec<::csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(&rows[0][3], "31.256");
        assert_eq!(&rows[1][4], "some words, with a comma");
        let j: serde_json::Value =
            serde_json::from_str(&sheet(&head(), &body(), Format::Json).unwrap()).unwrap();
        assert_eq!(j["rows"][1][0], "rcu-expedited");
        assert!(sheet(&head(), &body(), Format::Html).is_err());
    }
}
