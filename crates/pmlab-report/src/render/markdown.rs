//! Markdown output: a GitHub-flavoured table per workload.

use super::{header_lines, Render, RenderError};
use crate::report::{Grid, Report};

pub struct MarkdownRender;

fn escape(cell: &str) -> String {
    cell.replace('|', "\\|")
}

pub(super) fn table(grid: &Grid) -> String {
    let mut out = format!(
        "| {} |\n",
        grid.headers
            .iter()
            .map(|h| escape(h))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    out.push_str(&format!(
        "|{}|\n",
        grid.right
            .iter()
            .map(|r| if *r { "---:" } else { ":---" })
            .collect::<Vec<_>>()
            .join("|")
    ));
    for row in &grid.rows {
        out.push_str(&format!(
            "| {} |\n",
            row.iter()
                .map(|c| escape(c))
                .collect::<Vec<_>>()
                .join(" | ")
        ));
    }
    out
}

impl Render for MarkdownRender {
    fn render(&self, report: &Report) -> Result<String, RenderError> {
        let mut lines = header_lines(report);
        lines[0] = format!("### {}", lines[0]);
        let mut out = String::new();
        out.push_str(&lines[0]);
        out.push_str("\n\n");
        for l in &lines[1..] {
            out.push_str(&format!("{l}  \n"));
        }
        for w in &report.workloads {
            out.push_str(&format!("\n{}\n\n", w.metric_line()));
            out.push_str(&table(&w.grid(true)));
            if let Some(k) = w.knee_line() {
                out.push_str(&format!("\n**{k}**\n"));
            }
            if let Some(side) = w.side_grid() {
                out.push('\n');
                out.push_str(&table(&side));
            }
        }
        if !report.notes.is_empty() {
            out.push('\n');
            for n in &report.notes {
                out.push_str(&format!("- {n}\n"));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_table_is_well_formed() {
        let r = super::super::tests::sample_report();
        let text = MarkdownRender.render(&r).unwrap();
        let table: Vec<&str> = text.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(table.len(), 2 + 3, "{text}");
        let cols = table[0].matches(" | ").count();
        assert!(
            table.iter().all(|l| l.matches(" | ").count() == cols
                || l.starts_with("|:")
                || l.starts_with("|-")),
            "{text}"
        );
        assert!(text.contains("**knee: 50us"), "{text}");
    }
}
