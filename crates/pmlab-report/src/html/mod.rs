//! The self-contained HTML report of experiments or a study: a summary of findings first,
//! system facts and the exact knobs of every configuration, then per experiment inline-SVG
//! plots (sweep curves with CI bands and the knee, latency CDFs, idle residency, wakeup
//! causes, per-CPU runtime, hotplug scatter and waterfall), each with a table; compare mode
//! overlays two experiments. Raw data (CSV/JSON) is written beside the HTML and linked.
//! Statistics come from `report` (never recomputed differently).

pub mod boot;
pub mod causes;
pub mod cdf;
pub mod cpu;
pub mod findings;
pub mod fleet;
pub mod hotplug;
mod page;
pub mod residency;
pub mod svg;
pub mod sweep;
pub mod table;
pub mod text;
pub mod traced;

use crate::report::{Report, SideSelection};
use crate::spec::Kind;
use crate::store::StoredExperiment;
use crate::system::SystemSnapshot;
use findings::Finding;
use pmlab_kernel::MetricKey;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use svg::esc;

/// Errors writing a report; each names its file.
#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    /// A file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The report model of an experiment could not be made.
    #[error(transparent)]
    Report(#[from] crate::report::ReportError),
    /// An experiment's data could not be exported beside the page.
    #[error(transparent)]
    Export(#[from] crate::export::ExportError),
    /// JSON data of the page could not be written (what, and why).
    #[error("{0}")]
    Json(String, #[source] serde_json::Error),
    /// A text form of the report could not be rendered.
    #[error(transparent)]
    Render(#[from] crate::render::RenderError),
}

/// One workload of one experiment, with its metric names and CPUs found once.
pub struct View<'a> {
    /// The stored experiment.
    pub e: &'a StoredExperiment,
    /// The index of the workload in `e.workloads`.
    pub w: usize,
    keys: Vec<MetricKey>,
    cpus: Vec<u32>,
}

impl<'a> View<'a> {
    /// The view of workload `w` of `e`.
    pub fn new(e: &'a StoredExperiment, w: usize) -> View<'a> {
        let keys: Vec<MetricKey> = e.metric_keys(w).iter().map(|k| k.key()).collect();
        let mut cpus: Vec<u32> = keys.iter().filter_map(|k| k.cpu).collect();
        cpus.sort();
        cpus.dedup();
        View { e, w, keys, cpus }
    }
    /// The workload's label.
    pub fn label(&self) -> &str {
        &self.e.workloads[self.w].label
    }
    /// CPUs that have per-CPU metrics.
    pub fn cpus(&self) -> Vec<u32> {
        self.cpus.clone()
    }
    /// Mean of a metric over the measured runs of configuration `c`.
    pub fn mean(&self, c: usize, metric: impl Into<MetricKey>) -> Option<f64> {
        let xs = self.e.samples(self.w, c, metric);
        (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
    }
    /// The `X` of per-CPU metrics named `{prefix}X{suffix}`, in first-seen order.
    pub fn per_cpu_middles(&self, prefix: &str, suffix: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for k in &self.keys {
            if k.cpu.is_none() {
                continue;
            }
            let base = &k.name;
            if let Some(mid) = base
                .strip_prefix(prefix)
                .and_then(|r| r.strip_suffix(suffix))
            {
                if !mid.is_empty() && !out.iter().any(|o| o == mid) {
                    out.push(mid.to_string());
                }
            }
        }
        out
    }
}

/// How a study stage ended.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StageStatus {
    /// It ran to its end.
    Done,
    /// It could not run here (the reason says why).
    Skipped,
    /// It failed (the reason says how).
    Failed,
    /// It was stopped by a signal.
    Interrupted,
}

impl StageStatus {
    /// The status as the store and the text forms write it.
    pub fn as_str(self) -> &'static str {
        match self {
            StageStatus::Done => "done",
            StageStatus::Skipped => "skipped",
            StageStatus::Failed => "failed",
            StageStatus::Interrupted => "interrupted",
        }
    }
}

impl std::fmt::Display for StageStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl PartialEq<&str> for StageStatus {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// What a study stage did.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StageNote {
    /// The stage's name (`idle`, `polling`, ...).
    pub stage: String,
    /// How it ended.
    pub status: StageStatus,
    /// Why it was skipped, failed or stopped (empty when done).
    pub reason: String,
    /// The experiments it stored.
    pub experiments: Vec<i64>,
    /// Its wall time.
    pub seconds: f64,
}

/// Everything a report is made of.
pub struct Input {
    /// The report's title.
    pub title: String,
    /// The experiments it shows, loaded from the store.
    pub experiments: Vec<StoredExperiment>,
    /// Study stages (empty for plain experiments).
    pub stages: Vec<StageNote>,
    /// Machine facts and capabilities (name, value), e.g. from the study's detection.
    pub facts: Vec<(String, String)>,
}

/// A rendered report.
pub struct Output {
    /// The HTML page.
    pub html: String,
    /// The findings, best first.
    pub findings: Vec<Finding>,
    /// The report model of each experiment.
    pub reports: Vec<Report>,
}

/// The reports of the experiments (all side metrics, per-CPU ones included).
pub fn reports(experiments: &[StoredExperiment]) -> Result<Vec<Report>, HtmlError> {
    experiments
        .iter()
        .map(|e| Report::of(e, None, &SideSelection::Default).map_err(HtmlError::Report))
        .collect()
}

fn systems_table(systems: &[SystemSnapshot], facts: &[(String, String)]) -> String {
    let mut seen: Vec<&SystemSnapshot> = Vec::new();
    for s in systems {
        if !seen
            .iter()
            .any(|x| x.boot_id == s.boot_id && x.kernel_release == s.kernel_release)
        {
            seen.push(s);
        }
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    for s in seen {
        for (k, v) in [
            ("kernel", s.kernel_release.clone()),
            ("CPU", format!("{} ({} CPUs)", s.cpu_model, s.cpus)),
            ("virtualization", s.virtualization.clone()),
            ("host", s.hostname.clone()),
            ("boot id", s.boot_id.clone()),
            ("cmdline", s.cmdline.clone()),
        ] {
            rows.push(vec![k.into(), v]);
        }
    }
    rows.extend(facts.iter().map(|(k, v)| vec![k.clone(), v.clone()]));
    let g = crate::report::Grid {
        headers: vec!["system".into(), "".into()],
        rows,
        right: vec![false, false],
    };
    table::grid(&g, &[])
}

fn knobs_table(e: &StoredExperiment) -> String {
    let mut rows: Vec<Vec<String>> = e
        .configurations
        .iter()
        .map(|c| {
            vec![
                c.label.clone(),
                if c.knobs.is_empty() {
                    "(as found)".into()
                } else {
                    crate::report::scoped_knobs(&c.knobs)
                },
            ]
        })
        .collect();
    if let Some(s) = &e.system {
        for (k, v) in &s.knobs {
            rows.push(vec!["as found".into(), format!("{k}={v}")]);
        }
    }
    let g = crate::report::Grid {
        headers: vec!["configuration".into(), "knobs".into()],
        rows,
        right: vec![false, false],
    };
    table::grid(&g, &[])
}

fn section(e: &StoredExperiment, r: &Report, links: &[(String, String)]) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<h2 id="e{}">Experiment {}: {}</h2><p class="sub">{} · {} · {} measured runs ({} failed) · started {} UTC · <code>{}</code></p>"#,
        e.info.id,
        e.info.id,
        esc(&e.info.name),
        esc(e.info.kind.as_str()),
        esc(&r.header.status),
        r.header.runs,
        r.header.failed_runs,
        esc(&r.header.started),
        esc(&e.info.command)
    );
    if !r.header.stop_reason.is_empty() {
        let _ = write!(
            s,
            "<p class=\"sub\">stopped: {}</p>",
            esc(&r.header.stop_reason)
        );
    }
    s.push_str(&knobs_table(e));
    if boot::is_boot(e) {
        s.push_str(&boot::section(e, r));
    } else if hotplug::is_hotplug(e) {
        s.push_str(&hotplug::scatter(e).unwrap_or_default());
        s.push_str(&hotplug::waterfall(e).unwrap_or_else(|| {
            "<p class=\"sub\">No traced steps (run untraced): no waterfall.</p>".into()
        }));
    } else {
        let sweep = e.info.kind == Kind::Sweep || !e.swept.is_empty();
        for (w, wr) in r.workloads.iter().enumerate() {
            let v = View::new(e, w);
            let _ = write!(
                s,
                "<h3>{}</h3><p class=\"sub\">{}</p>",
                esc(&wr.label),
                esc(&wr.metric_line())
            );
            if wr.rows.len() >= 2 {
                s.push_str(&sweep::curve(wr, sweep).unwrap_or_default());
            }
            s.push_str(&table::grid(&wr.grid(false), &sweep::row_hover(wr)));
            if let Some(k) = wr.knee_line() {
                let _ = write!(s, "<p>{}</p>", esc(&k));
            }
            if let Some(g) = wr.side_grid() {
                s.push_str(&table::grid(&g, &[]));
            }
            let name = e.workloads[w]
                .argv
                .first()
                .map(String::as_str)
                .unwrap_or("");
            if name == "wakeup" {
                s.push_str(&cdf::plot(&v).unwrap_or_default());
            }
            if name == "idle" || !v.per_cpu_middles("idle.", ".share_pct").is_empty() {
                s.push_str(&residency::plot(&v).unwrap_or_default());
            }
            if name == "idle" || name == "messaging" {
                s.push_str(&causes::plot(&v).unwrap_or_default());
            }
            if name == "spin" {
                s.push_str(&cpu::plot(&v).unwrap_or_default());
            }
            if let Some(t) = traced::analyze(e, w) {
                s.push_str(&traced::section(&wr.label, &t));
            }
        }
    }
    if !r.notes.is_empty() {
        s.push_str("<ul class=\"sub\">");
        for n in &r.notes {
            let _ = write!(s, "<li>{}</li>", esc(n));
        }
        s.push_str("</ul>");
    }
    let mine: Vec<String> = links
        .iter()
        .filter(|(name, _)| name.contains(&format!("experiment-{}", e.info.id)))
        .map(|(name, href)| format!(r#"<a href="{}">{}</a>"#, esc(href), esc(name)))
        .collect();
    if !mine.is_empty() {
        let _ = write!(s, "<p class=\"sub\">raw data: {}</p>", mine.join(" · "));
    }
    s
}

fn compare_section(a: &StoredExperiment, b: &StoredExperiment) -> String {
    let Ok(r) = Report::cross(a, b, &SideSelection::Default) else {
        return String::new();
    };
    let mut s = format!(
        "<h2>Compare: experiment {} vs {}</h2><p class=\"sub\">every configuration of #{} against the configuration of #{} with the same label (or its reference); relative change on hover and in the verdict column</p>",
        a.info.id, b.info.id, b.info.id, a.info.id
    );
    for wr in &r.workloads {
        let _ = write!(s, "<h3>{}</h3>", esc(&wr.label));
        s.push_str(&sweep::curve(wr, false).unwrap_or_default());
        s.push_str(&table::grid(&wr.grid(false), &sweep::row_hover(wr)));
    }
    for n in &r.notes {
        let _ = write!(s, "<p class=\"sub\">{}</p>", esc(n));
    }
    s
}

/// Render the page; `links` are (name, relative href) of the raw data files.
pub fn render(input: &Input, links: &[(String, String)]) -> Result<Output, HtmlError> {
    let reports = reports(&input.experiments)?;
    let items: Vec<(&StoredExperiment, &Report)> =
        input.experiments.iter().zip(reports.iter()).collect();
    let all = findings::findings(&items, &input.stages);
    let mut body = format!("<h1>{}</h1>", esc(&input.title));
    let _ = write!(
        body,
        "<p class=\"sub\">pmlab {} · generated {} UTC · {} experiment(s)</p>",
        env!("CARGO_PKG_VERSION"),
        crate::store::format_time(crate::store::now_ns()),
        input.experiments.len()
    );
    body.push_str("<div class=\"summary\"><h2 style=\"border:0;margin-top:8px\">Summary</h2><ol>");
    for f in all.iter().take(3) {
        let _ = write!(body, "<li>{}</li>", esc(&f.text));
    }
    if all.is_empty() {
        body.push_str("<li>No measurements to summarise.</li>");
    }
    body.push_str("</ol></div>");
    if all.len() > 3 {
        body.push_str("<h3>More findings</h3><ul>");
        for f in all.iter().skip(3) {
            let _ = write!(body, "<li>{}</li>", esc(&f.text));
        }
        body.push_str("</ul>");
    }
    if !input.stages.is_empty() {
        body.push_str("<h2>Stages</h2>");
        let rows: Vec<Vec<String>> = input
            .stages
            .iter()
            .map(|s| {
                vec![
                    s.stage.clone(),
                    s.status.to_string(),
                    format!("{:.1}", s.seconds),
                    s.experiments
                        .iter()
                        .map(|i| format!("#{i}"))
                        .collect::<Vec<_>>()
                        .join(" "),
                    s.reason.clone(),
                ]
            })
            .collect();
        let g = crate::report::Grid {
            headers: [
                "stage",
                "status",
                "seconds",
                "experiments",
                "reason / notes",
            ]
            .map(String::from)
            .to_vec(),
            rows,
            right: vec![false, false, true, false, false],
        };
        body.push_str(&table::grid(&g, &[]));
    }
    body.push_str("<h2>System</h2>");
    let systems: Vec<SystemSnapshot> = input
        .experiments
        .iter()
        .filter_map(|e| e.system.clone())
        .collect();
    body.push_str(&systems_table(&systems, &input.facts));
    if input.experiments.len() == 2
        && !input.experiments.iter().any(hotplug::is_hotplug)
        && input.stages.is_empty()
    {
        body.push_str(&compare_section(
            &input.experiments[0],
            &input.experiments[1],
        ));
    }
    for (e, r) in &items {
        body.push_str(&section(e, r, links));
    }
    if !links.is_empty() {
        body.push_str("<h2>Raw data</h2><ul>");
        for (name, href) in links {
            let _ = write!(
                body,
                r#"<li><a href="{}">{}</a></li>"#,
                esc(href),
                esc(name)
            );
        }
        body.push_str("</ul>");
    }
    Ok(Output {
        html: page::document(&input.title, &body),
        findings: all,
        reports,
    })
}

/// What [`write`] wrote.
pub struct Written {
    /// The page written (`DIR/report.html`).
    pub html: PathBuf,
    /// Its size.
    pub bytes: usize,
    /// The findings, best first.
    pub findings: Vec<Finding>,
    /// The data files written beside it.
    pub data: Vec<PathBuf>,
}

fn put(path: &Path, bytes: &[u8]) -> Result<(), HtmlError> {
    std::fs::write(path, bytes).map_err(|source| HtmlError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Write `DIR/report.html`, raw data under `DIR/data/` (per experiment: runs CSV, runs JSON,
/// report JSON) and `DIR/data/summary.json` (findings and stages).
pub fn write(input: &Input, dir: &Path) -> Result<Written, HtmlError> {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).map_err(|source| HtmlError::Io {
        path: data.clone(),
        source,
    })?;
    let mut links = Vec::new();
    let mut files = Vec::new();
    for e in &input.experiments {
        let id = e.info.id;
        let csv = crate::export::runs_csv(e)?;
        let json = crate::export::runs_json(e)?;
        for (name, bytes) in [
            (format!("experiment-{id}-runs.csv"), csv),
            (format!("experiment-{id}-runs.json"), json),
        ] {
            let p = data.join(&name);
            put(&p, &bytes)?;
            links.push((name.clone(), format!("data/{name}")));
            files.push(p);
        }
    }
    let out = render(input, &links)?;
    for (e, r) in input.experiments.iter().zip(&out.reports) {
        let name = format!("experiment-{}-report.json", e.info.id);
        let p = data.join(&name);
        let text = serde_json::to_vec_pretty(r).map_err(|e| HtmlError::Json(name.clone(), e))?;
        put(&p, &text)?;
        files.push(p);
    }
    let summary = serde_json::json!({
        "title": input.title,
        "findings": out.findings,
        "stages": input.stages,
        "experiments": input.experiments.iter().map(|e| e.info.id).collect::<Vec<_>>(),
        "facts": input.facts,
    });
    let p = data.join("summary.json");
    put(&p, &serde_json::to_vec_pretty(&summary).unwrap_or_default())?;
    files.push(p);
    let html = dir.join("report.html");
    put(&html, out.html.as_bytes())?;
    Ok(Written {
        bytes: out.html.len(),
        html,
        findings: out.findings,
        data: files,
    })
}
