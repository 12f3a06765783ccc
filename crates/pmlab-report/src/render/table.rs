//! Terminal output: a comfy-table per workload, with the header and notes around it.

use super::{header_lines, Render, RenderError};
use crate::report::{Grid, Report};
use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, ContentArrangement, Table};

pub struct TableRender;

pub(super) fn draw(grid: &Grid) -> String {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    table.set_header(grid.headers.clone());
    for row in &grid.rows {
        table.add_row(row.clone());
    }
    for (i, right) in grid.right.iter().enumerate() {
        if *right {
            if let Some(col) = table.column_mut(i) {
                col.set_cell_alignment(CellAlignment::Right);
            }
        }
    }
    format!("{table}\n")
}

impl Render for TableRender {
    fn render(&self, report: &Report) -> Result<String, RenderError> {
        let mut out = header_lines(report).join("\n");
        out.push('\n');
        for w in &report.workloads {
            out.push('\n');
            out.push_str(&w.metric_line());
            out.push('\n');
            out.push_str(&draw(&w.grid(true)));
            if let Some(k) = w.knee_line() {
                out.push_str(&k);
                out.push('\n');
            }
            if let Some(side) = w.side_grid() {
                out.push_str(&draw(&side));
            }
        }
        for n in &report.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_shows_values_verdicts_side_metrics_and_knee() {
        let r = super::super::tests::sample_report();
        let text = TableRender.render(&r).unwrap();
        assert!(text.contains("30.000 ± "), "{text}");
        assert!(text.contains("faster by 33.0% (CI"), "{text}");
        assert!(text.contains("POLL ms") && text.contains("CAL/s"), "{text}");
        assert!(text.contains("knee: 50us"), "{text}");
        assert!(text.contains("50us (knee)"), "{text}");
        assert!(
            !text.contains("@cpu0"),
            "per-CPU metrics stay out of the default table"
        );
    }
}
