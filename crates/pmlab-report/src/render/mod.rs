//! Output formats for a [`Report`]: each format is one file behind the small [`Render`] trait
//! (hyperfine style): terminal table, markdown, mail (72 columns), json, csv.

mod csv;
mod json;
mod mail;
mod markdown;
mod table;

use crate::report::Report;

/// Why rendering failed.
#[derive(Debug, thiserror::Error)]
#[error("rendering {format}: {message}")]
pub struct RenderError {
    pub format: &'static str,
    pub message: String,
}

/// Turns a report into text.
pub trait Render {
    fn render(&self, report: &Report) -> Result<String, RenderError>;
}

/// The output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Markdown,
    Mail,
    Json,
    Csv,
}

impl Format {
    pub const NAMES: &'static [&'static str] = &["table", "markdown", "mail", "json", "csv"];

    pub fn parse(s: &str) -> Option<Format> {
        Some(match s {
            "table" => Format::Table,
            "markdown" | "md" => Format::Markdown,
            "mail" => Format::Mail,
            "json" => Format::Json,
            "csv" => Format::Csv,
            _ => return None,
        })
    }

    /// The renderer of this format.
    pub fn renderer(self) -> Box<dyn Render> {
        match self {
            Format::Table => Box::new(table::TableRender),
            Format::Markdown => Box::new(markdown::MarkdownRender),
            Format::Mail => Box::new(mail::MailRender {
                width: mail::MAIL_WIDTH,
            }),
            Format::Json => Box::new(json::JsonRender),
            Format::Csv => Box::new(csv::CsvRender),
        }
    }
}

/// The lines above every table: what ran, how it stopped.
pub(crate) fn header_lines(report: &Report) -> Vec<String> {
    let h = &report.header;
    let mut lines = vec![format!("pmlab {}: {} [{}]", h.title, h.name, h.status)];
    if !h.stop_reason.is_empty() {
        lines.push(format!("stopped: {}", h.stop_reason));
    }
    lines.push(format!(
        "{} measured runs ({} failed) in {} rounds, seed {}, started {} UTC",
        h.runs, h.failed_runs, h.rounds, h.seed, h.started
    ));
    for s in &report.systems {
        if !s.kernel_release.is_empty() {
            lines.push(format!(
                "system: Linux {} on {} ({} CPUs, virtualization: {})",
                s.kernel_release, s.cpu_model, s.cpus, s.virtualization
            ));
        }
    }
    lines
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::report::{Report, SideSelection};
    use crate::spec::{Budget, Configuration, Experiment, Kind, WorkloadDef};
    use crate::store::{now_ns, NewRun, RunStatus, Store};
    use crate::system::SystemSnapshot;
    use pmlab_kernel::{Direction, Metric};

    /// A sweep with three values and two side metrics, stored and reloaded.
    pub fn sample_report() -> Report {
        sample_report_on("haltpoll")
    }

    #[test]
    fn no_cpuidle_driver_is_said_when_cpuidle_knobs_are_turned() {
        let on = |d| sample_report_on(d).notes.join("\n");
        assert!(!on("haltpoll").contains("no cpuidle driver"));
        let none = on("none");
        assert!(
            none.contains("no cpuidle driver on this machine")
                && none.contains("haltpoll.guest_halt_poll_ns had no effect"),
            "{none}"
        );
    }

    /// [`sample_report`] on a machine with this cpuidle driver.
    pub fn sample_report_on(cpuidle_driver: &str) -> Report {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("r.db")).unwrap();
        let configs: Vec<Configuration> = ["0", "50us", "200us"]
            .iter()
            .map(|v| Configuration::parse(v, &format!("haltpoll.guest_halt_poll_ns={v}")).unwrap())
            .collect();
        let mut exp = Experiment::new(
            Kind::Sweep,
            "poll sweep".into(),
            configs,
            vec![WorkloadDef::new(vec!["pipe".into()]).unwrap()],
            None,
        )
        .unwrap();
        exp.swept = vec!["haltpoll.guest_halt_poll_ns".into()];
        let sys = SystemSnapshot {
            kernel_release: "6.18.0".into(),
            cpu_model: "Test CPU".into(),
            cpus: 2,
            virtualization: "KVM".into(),
            cpuidle_driver: cpuidle_driver.into(),
            ..Default::default()
        };
        let ids = store
            .create_experiment(
                &exp,
                &Budget::default(),
                "pmlab sweep haltpoll.guest_halt_poll_ns=0,50us,200us pipe",
                &sys,
            )
            .unwrap();
        let means = [30.0, 20.1, 20.0];
        let noise = [0.1, -0.1, 0.05, -0.05, 0.0];
        for (round, d) in noise.iter().enumerate() {
            for (c, m) in means.iter().enumerate() {
                store
                    .insert_run(&NewRun {
                        experiment: ids.experiment,
                        configuration: ids.configurations[c],
                        workload: ids.workloads[0],
                        round: round + 1,
                        position: c,
                        warmup: false,
                        started_ns: now_ns(),
                        duration_ns: 1,
                        status: RunStatus::Ok,
                        error: None,
                        metrics: vec![Metric::new(
                            "pipe.us_per_op",
                            m + d,
                            "us/op",
                            Direction::Lower,
                        )],
                        side_metrics: vec![
                            Metric::new(
                                "idle.POLL.time_ms",
                                c as f64 * 100.0 + d,
                                "ms",
                                Direction::Neutral,
                            ),
                            Metric::new(
                                "irq.CAL.per_s",
                                40000.0 - c as f64 * 15000.0 + d * 100.0,
                                "/s",
                                Direction::Neutral,
                            ),
                            Metric::new("irq.CAL.per_s", 1.0, "/s", Direction::Neutral).on_cpu(0),
                        ],
                        trace_path: None,
                    })
                    .unwrap();
            }
        }
        store
            .finish_experiment(
                ids.experiment,
                crate::store::ExperimentStatus::Complete,
                "target reached",
            )
            .unwrap();
        let e = store.load(ids.experiment).unwrap();
        Report::of(&e, None, &SideSelection::Default).unwrap()
    }
}
