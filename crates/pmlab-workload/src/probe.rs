//! `CounterProbe`: kernel counter snapshots right before and after the measured part, and
//! the side metrics between them (see README.md for their names).

use crate::Probe;
use pmlab_kernel::counters::{delta_metrics, Snapshot};
use pmlab_kernel::Metric;
use std::path::PathBuf;

/// Takes a `pmlab_kernel::counters::Snapshot` in `before()` and in `after()`.
pub struct CounterProbe {
    root: PathBuf,
    pub before: Option<Snapshot>,
    pub after: Option<Snapshot>,
}

impl CounterProbe {
    /// Counters under the file-system root `root` ("/" on the real machine).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        CounterProbe {
            root: root.into(),
            before: None,
            after: None,
        }
    }

    /// Side metrics of the last complete run (empty before one).
    pub fn side_metrics(&self) -> Vec<Metric> {
        match (&self.before, &self.after) {
            (Some(b), Some(a)) => delta_metrics(b, a),
            _ => Vec::new(),
        }
    }
}

/// An error with its causes: `a: b: c`.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s += &format!(": {c}");
        cause = c.source();
    }
    s
}

impl Probe for CounterProbe {
    fn before(&mut self) -> Result<(), String> {
        self.after = None;
        self.before = Some(Snapshot::take_at(&self.root).map_err(|e| error_chain(&e))?);
        Ok(())
    }
    fn after(&mut self) -> Result<(), String> {
        self.after = Some(Snapshot::take_at(&self.root).map_err(|e| error_chain(&e))?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn side_metrics_after_a_run() {
        let mut p = CounterProbe::new("/");
        assert!(p.side_metrics().is_empty());
        crate::run(
            &crate::WorkloadSpec::Idle {
                duration: pmlab_kernel::Nanos(20_000_000),
            },
            &mut p,
        )
        .unwrap();
        let m = p.side_metrics();
        let window = m
            .iter()
            .find(|m| m.name == "counters.window_s")
            .unwrap()
            .value;
        assert!(window >= 0.02, "{window}");
        assert!(m.iter().any(|m| m.name == "ctxt.per_s"));
    }

    #[test]
    fn missing_tree_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = CounterProbe::new(dir.path());
        let e = p.before().unwrap_err();
        assert!(e.contains("proc/stat") && e.contains("No such file"), "{e}");
    }
}
