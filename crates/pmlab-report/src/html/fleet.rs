//! The fleet report: one HTML page across the hosts and kernels of a set of result bundles;
//! per experiment, every host and kernel side by side (means with 95% CIs, verdicts against
//! the first) and the machines they ran on.

use super::{esc, page, sweep, table, HtmlError};
use crate::bundle::{self, BundleError};
use crate::lineup::{self, LineUpBy};
use crate::report::{Report, SideSelection};
use crate::store::Store;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Why a fleet report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// A bundle could not be read.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// The runs could not be lined up by host and kernel.
    #[error(transparent)]
    LineUp(#[from] lineup::LineUpError),
    /// The page could not be written.
    #[error(transparent)]
    Html(#[from] HtmlError),
}

/// What [`write`] made.
#[derive(Debug)]
pub struct FleetReport {
    /// The page written.
    pub html: PathBuf,
    /// Distinct (host, kernel) pairs.
    pub machines: usize,
    /// Distinct experiments (by kind and name).
    pub experiments: usize,
}

/// Render the report of every experiment in `store`.
pub fn render(store: &Store) -> Result<(String, usize, usize), FleetError> {
    let infos = store.list().map_err(lineup::LineUpError::from)?;
    let mut machines: Vec<Vec<String>> = Vec::new();
    let mut seen: Vec<(crate::spec::Kind, String)> = Vec::new();
    let mut body = String::new();
    let mut n_experiments = 0;
    for info in &infos {
        if seen.contains(&(info.kind, info.name.clone())) || info.runs == 0 {
            continue;
        }
        seen.push((info.kind, info.name.clone()));
        n_experiments += 1;
        let groups = lineup::all_groups(store, info.id, LineUpBy::Machine)?;
        for g in &groups {
            let s = g.pooled.system.clone().unwrap_or_default();
            let row = vec![
                s.hostname.clone(),
                s.kernel_release.clone(),
                s.kernel_build.clone(),
                format!("{} ({} CPUs)", s.cpu_model, s.cpus),
                s.virtualization.clone(),
                s.cpuidle_driver.clone(),
            ];
            if !machines.iter().any(|m| m[..3] == row[..3]) {
                machines.push(row);
            }
        }
        let named: Vec<(String, &crate::store::StoredExperiment)> = groups
            .iter()
            .map(|g| (g.label.clone(), &g.pooled))
            .collect();
        let r = Report::lined_up(&named, &SideSelection::Default).map_err(HtmlError::Report)?;
        let _ = write!(
            body,
            "<h2>{}</h2><p class=\"sub\">{} · {} host/kernel group(s), {} measured runs; each row against the first group's configuration of the same label</p>",
            esc(&info.name),
            esc(info.kind.as_str()),
            groups.len(),
            r.header.runs
        );
        for wr in &r.workloads {
            let _ = write!(
                body,
                "<h3>{}</h3><p class=\"sub\">{}</p>",
                esc(&wr.label),
                esc(&wr.metric_line())
            );
            body.push_str(&sweep::curve(wr, false).unwrap_or_default());
            body.push_str(&table::grid(&wr.grid(false), &sweep::row_hover(wr)));
            if let Some(g) = wr.side_grid() {
                body.push_str(&table::grid(&g, &[]));
            }
        }
        if !r.notes.is_empty() {
            body.push_str("<ul class=\"sub\">");
            for n in &r.notes {
                let _ = write!(body, "<li>{}</li>", esc(n));
            }
            body.push_str("</ul>");
        }
    }
    let mut head = String::from("<h1>pmlab fleet report</h1>");
    let _ = write!(
        head,
        "<p class=\"sub\">pmlab {} · generated {} UTC · {} host/kernel pair(s) · {} experiment(s)</p><h2>Machines</h2>",
        env!("CARGO_PKG_VERSION"),
        crate::store::format_time(crate::store::now_ns()),
        machines.len(),
        n_experiments
    );
    head.push_str(&table::plain(
        &[
            "host",
            "kernel",
            "build",
            "CPU",
            "virtualization",
            "cpuidle driver",
        ],
        &machines,
    ));
    if n_experiments == 0 {
        head.push_str("<p>No measured runs in these bundles.</p>");
    }
    Ok((
        page::document("pmlab fleet report", &(head + &body)),
        machines.len(),
        n_experiments,
    ))
}

/// Load the bundles in or below `dirs` (into a temporary store) and write the report to
/// `out`.
pub fn write(dirs: &[PathBuf], out: &Path) -> Result<FleetReport, FleetError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| HtmlError::Io { path, source }
    };
    let tmp = tempfile::tempdir().map_err(io(&std::env::temp_dir()))?;
    let mut store = Store::open(&tmp.path().join("fleet.db")).map_err(BundleError::from)?;
    bundle::import(&mut store, dirs)?;
    let (html, machines, experiments) = render(&store)?;
    std::fs::write(out, html).map_err(io(out))?;
    Ok(FleetReport {
        html: out.to_path_buf(),
        machines,
        experiments,
    })
}
