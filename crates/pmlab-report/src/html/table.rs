//! HTML tables: a [`Grid`] from `report` (the same cells as the text renderers) or plain rows.

use super::svg::esc;
use crate::report::Grid;
use std::fmt::Write;

/// A report grid as an HTML table; `hover[i]` is an optional title per row.
pub fn grid(g: &Grid, hover: &[String]) -> String {
    let mut s = String::from("<table><thead><tr>");
    for h in &g.headers {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr></thead><tbody>");
    for (i, row) in g.rows.iter().enumerate() {
        match hover.get(i).filter(|h| !h.is_empty()) {
            Some(h) => {
                let _ = write!(s, r#"<tr title="{}">"#, esc(h));
            }
            None => s.push_str("<tr>"),
        }
        for (j, cell) in row.iter().enumerate() {
            let class = if g.right.get(j).copied().unwrap_or(false) {
                r#" class="num""#
            } else {
                ""
            };
            let _ = write!(s, "<td{class}>{}</td>", esc(cell));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// A plain table; columns after the first are numbers (right-aligned).
pub fn plain(headers: &[&str], rows: &[Vec<String>]) -> String {
    let g = Grid {
        headers: headers.iter().map(|h| h.to_string()).collect(),
        rows: rows.to_vec(),
        right: (0..headers.len()).map(|i| i > 0).collect(),
    };
    grid(&g, &[])
}
