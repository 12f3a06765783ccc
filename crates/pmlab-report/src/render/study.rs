//! `pmlab study`'s outcome for people: each stage's status, time and experiments, the first
//! findings and where the report is.

use crate::html::{StageNote, StageStatus, Written};
use std::fmt::Write;

/// Study `id`, `seconds` long: its `stages` and the `written` report.
pub fn text(id: i64, seconds: f64, stages: &[StageNote], written: &Written) -> String {
    let mut o = format!("pmlab study #{id} ({seconds:.0} s)\n");
    for s in stages {
        let ids: Vec<String> = s.experiments.iter().map(|i| format!("#{i}")).collect();
        let reason = if s.status == StageStatus::Done {
            ""
        } else {
            s.reason.as_str()
        };
        let _ = writeln!(
            o,
            "  {:<17} {:<11} {:>6.1} s  {} {reason}",
            s.stage,
            s.status,
            s.seconds,
            ids.join(" "),
        );
    }
    o.push_str("\nSummary:\n");
    for (i, f) in written.findings.iter().take(3).enumerate() {
        let _ = writeln!(o, "  {}. {}", i + 1, f.text);
    }
    let _ = writeln!(o, "\nreport: {}", written.html.display());
    o
}
