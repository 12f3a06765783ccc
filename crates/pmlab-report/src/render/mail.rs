//! Mail output: fixed-width plain text no wider than 72 columns, ready to paste under a
//! patch's cover letter. Wide tables are split into several, each repeating the label column;
//! verdicts are listed under the tables, wrapped.

use super::{header_lines, Render, RenderError};
use crate::report::{Grid, Report};

/// Width of a mail line.
pub const MAIL_WIDTH: usize = 72;

pub struct MailRender {
    pub width: usize,
}

fn width(s: &str) -> usize {
    s.chars().count()
}

/// Wrap `text` at `limit` columns, continuation lines indented by `indent`.
pub(crate) fn wrap(text: &str, limit: usize, indent: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        let extra = if cur.is_empty() { 0 } else { 1 };
        if !cur.is_empty() && width(&cur) + extra + width(word) > limit {
            lines.push(std::mem::take(&mut cur));
            cur = " ".repeat(indent);
        }
        if !cur.trim().is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.trim().is_empty() {
        lines.push(cur);
    }
    lines
}

fn cut(s: &str, max: usize) -> String {
    if width(s) <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Lay a grid out in tables no wider than `limit`, each repeating the first (label) column;
/// columns in `skip` are left out.
pub(super) fn layout(grid: &Grid, skip: &[usize], limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let cols: Vec<usize> = (1..grid.headers.len())
        .filter(|i| !skip.contains(i))
        .collect();
    let col_width = |i: usize| {
        grid.rows
            .iter()
            .map(|r| width(&r[i]))
            .chain([width(&grid.headers[i])])
            .max()
            .unwrap_or(0)
    };
    let label_width = col_width(0).min(limit / 3);
    let max_cell = limit.saturating_sub(label_width + 2).max(1);
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut used = label_width;
    for &c in &cols {
        let wdt = col_width(c).min(max_cell);
        if !current.is_empty() && used + 2 + wdt > limit {
            groups.push(std::mem::take(&mut current));
            used = label_width;
        }
        current.push(c);
        used += 2 + wdt;
    }
    if !current.is_empty() {
        groups.push(current);
    }
    for g in groups {
        out.push(String::new());
        let widths: Vec<usize> = g.iter().map(|&c| col_width(c).min(max_cell)).collect();
        let line = |cells: &Vec<String>| {
            let mut s = format!("{:<lw$}", cut(&cells[0], label_width), lw = label_width);
            for (k, &c) in g.iter().enumerate() {
                let cell = cut(&cells[c], widths[k]);
                if grid.right[c] {
                    s.push_str(&format!("  {:>w$}", cell, w = widths[k]));
                } else {
                    s.push_str(&format!("  {:<w$}", cell, w = widths[k]));
                }
            }
            s.trim_end().to_string()
        };
        out.push(line(&grid.headers));
        out.push("-".repeat(label_width + widths.iter().map(|w| w + 2).sum::<usize>()));
        for r in &grid.rows {
            out.push(line(r));
        }
    }
    out
}

impl Render for MailRender {
    fn render(&self, report: &Report) -> Result<String, RenderError> {
        let limit = self.width;
        let mut out: Vec<String> = Vec::new();
        for l in header_lines(report) {
            out.extend(wrap(&l, limit, 2));
        }
        for w in &report.workloads {
            out.push(String::new());
            out.extend(wrap(&w.metric_line(), limit, 2));
            let grid = w.grid(true);
            // Every column except the verdict (index 4), which is listed below the table.
            out.extend(layout(&grid, &[4], limit));
            out.push(String::new());
            out.push(format!("{}:", grid.headers[4]));
            for r in &grid.rows {
                if !r[4].is_empty() {
                    out.extend(wrap(&format!("  {}: {}", r[0], r[4]), limit, 4));
                }
            }
            if let Some(k) = w.knee_line() {
                out.extend(wrap(&k, limit, 2));
            }
            if let Some(side) = w.side_grid() {
                out.extend(layout(&side, &[], limit));
            }
        }
        if !report.notes.is_empty() {
            out.push(String::new());
            for n in &report.notes {
                out.extend(wrap(&format!("note: {n}"), limit, 2));
            }
        }
        let mut s = out.join("\n");
        s.push('\n');
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mail_fits_in_72_columns() {
        let r = super::super::tests::sample_report();
        let text = MailRender { width: MAIL_WIDTH }.render(&r).unwrap();
        for l in text.lines() {
            assert!(width(l) <= MAIL_WIDTH, "too wide ({}): {l}", width(l));
        }
        assert!(text.contains("50us (knee)"), "{text}");
        assert!(text.contains("faster by 33.0%"), "{text}");
        assert!(text.contains("CAL/s"), "{text}");
        // A narrow width forces the table to split, repeating the label column.
        let narrow = MailRender { width: 40 }.render(&r).unwrap();
        assert!(
            narrow.lines().filter(|l| l.starts_with("config")).count() >= 2,
            "{narrow}"
        );
        assert!(narrow.lines().all(|l| width(l) <= 40), "{narrow}");
    }

    #[test]
    fn wrap_breaks_on_words() {
        assert_eq!(wrap("aaa bbb ccc", 7, 2), vec!["aaa bbb", "  ccc"]);
    }
}
