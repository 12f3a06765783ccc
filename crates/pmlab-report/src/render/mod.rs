//! Output formats for a [`Report`]: each format is one file behind the small [`Render`] trait
//! (hyperfine style): terminal table, markdown, mail (72 columns), json, csv.

mod csv;
pub mod info;
mod json;
mod mail;
mod markdown;
pub mod run;
pub mod sheet;
pub mod store;
pub mod study;
mod table;
pub mod tables;
pub mod trace;

use crate::report::Report;

/// Why rendering failed.
#[derive(Debug, thiserror::Error)]
#[error("rendering {format}: {message}")]
pub struct RenderError {
    /// The format being rendered.
    pub format: &'static str,
    /// What went wrong.
    pub message: String,
}

/// Turns a report into text.
pub trait Render {
    /// The report in this renderer's format.
    fn render(&self, report: &Report) -> Result<String, RenderError>;
}

/// The output formats: the one set of `--format` values of every command that prints results.
/// A command that cannot produce one of them says which it supports ([`UnsupportedFormat`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A terminal table (comfy-table).
    Table,
    /// Markdown tables, for issues and pull requests.
    #[value(alias = "md")]
    Markdown,
    /// Plain text fit for a mail or a patch cover letter (72 columns).
    Mail,
    /// JSON.
    Json,
    /// CSV, through the `csv` crate.
    Csv,
    /// A directory of HTML pages (`pmlab report` only).
    Html,
}

/// A `--format` value refused while the arguments are parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// No such format.
    #[error(transparent)]
    Unknown(#[from] UnknownFormat),
    /// A format the command cannot produce.
    #[error(transparent)]
    Unsupported(#[from] UnsupportedFormat),
}

/// A `--format` value that a command cannot produce.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--format {format} is not supported by {command}; choose {}",
    names(supported)
)]
pub struct UnsupportedFormat {
    /// The command (`pmlab report`).
    pub command: &'static str,
    /// The format asked for.
    pub format: Format,
    /// The formats the command supports.
    pub supported: &'static [Format],
}

/// A `--format` value that names no format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format `{given}`; possible values: {}", list(supported))]
pub struct UnknownFormat {
    /// What was given.
    pub given: String,
    /// The formats that could have been given.
    pub supported: &'static [Format],
}

fn list(formats: &[Format]) -> String {
    let n: Vec<String> = formats.iter().map(|f| f.to_string()).collect();
    n.join(", ")
}

fn names(formats: &[Format]) -> String {
    let n: Vec<String> = formats.iter().map(|f| f.to_string()).collect();
    match n.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => n.join(""),
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use clap::ValueEnum;
        let v = self.to_possible_value().expect("no Format is skipped");
        f.write_str(v.get_name())
    }
}

impl Format {
    /// The formats printed as text on stdout (every format but HTML).
    pub const TEXT: &'static [Format] = &[
        Format::Table,
        Format::Markdown,
        Format::Mail,
        Format::Json,
        Format::Csv,
    ];

    /// The format named `s` (or an alias, `md`), if it prints text: the `--format` parser of
    /// every command that prints on stdout. An unknown name gets an error listing the values.
    pub fn parse_text(s: &str) -> Result<Format, FormatError> {
        use clap::ValueEnum;
        let f = Format::from_str(s, false).map_err(|_| UnknownFormat {
            given: s.to_string(),
            supported: Format::TEXT,
        })?;
        Ok(f.check("a command that prints text", Format::TEXT)?)
    }

    /// This format if `supported` holds it, else an error naming what `command` supports.
    pub fn check(
        self,
        command: &'static str,
        supported: &'static [Format],
    ) -> Result<Format, UnsupportedFormat> {
        if supported.contains(&self) {
            Ok(self)
        } else {
            Err(UnsupportedFormat {
                command,
                format: self,
                supported,
            })
        }
    }

    /// The renderer of this format ([`Format::Html`] is a directory, written by the `html`
    /// module: its renderer returns an error).
    pub fn renderer(self) -> Box<dyn Render> {
        match self {
            Format::Table => Box::new(table::TableRender),
            Format::Markdown => Box::new(markdown::MarkdownRender),
            Format::Mail => Box::new(mail::MailRender {
                width: mail::MAIL_WIDTH,
            }),
            Format::Json => Box::new(json::JsonRender),
            Format::Csv => Box::new(csv::CsvRender),
            Format::Html => Box::new(NoHtml),
        }
    }
}

/// HTML is not a text on stdout: `pmlab report` writes it into a directory.
struct NoHtml;

impl Render for NoHtml {
    fn render(&self, _: &Report) -> Result<String, RenderError> {
        Err(RenderError {
            format: "html",
            message: "an HTML report is a directory: use `pmlab report ID --format html`".into(),
        })
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
    use crate::spec::{Configuration, Experiment, Kind, WorkloadDef};
    use crate::store::Store;
    use crate::system::SystemSnapshot;
    use pmlab_kernel::{Direction, Metric};

    /// A sweep with three values and two side metrics, stored and reloaded.
    pub fn sample_report() -> Report {
        sample_report_on("haltpoll")
    }

    #[test]
    fn format_values_are_one_set_and_unsupported_ones_name_the_others() {
        use super::Format;
        use clap::ValueEnum;
        assert_eq!(Format::from_str("md", false), Ok(Format::Markdown));
        assert_eq!(Format::Csv.to_string(), "csv");
        assert!(Format::from_str("pdf", false).is_err());
        assert_eq!(
            Format::parse_text("pdf").unwrap_err().to_string(),
            "unknown format `pdf`; possible values: table, markdown, mail, json, csv"
        );
        assert_eq!(Format::parse_text("md"), Ok(Format::Markdown));
        assert!(matches!(
            Format::parse_text("html"),
            Err(super::FormatError::Unsupported(_))
        ));
        assert_eq!(
            Format::Mail.check("pmlab report", Format::TEXT),
            Ok(Format::Mail)
        );
        let e = Format::Html
            .check("pmlab whatif", Format::TEXT)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--format html is not supported by pmlab whatif; choose table, markdown, mail, json or csv"
        );
        assert!(Format::Html.renderer().render(&sample_report()).is_err());
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
        let means = [30.0, 20.1, 20.0];
        let noise = [0.1, -0.1, 0.05, -0.05, 0.0];
        let outcome = pmlab_lab::scripted::store_scripted(
            &mut store,
            &exp,
            5,
            sys,
            "pmlab sweep haltpoll.guest_halt_poll_ns=0,50us,200us pipe",
            &mut |p| {
                let (c, d) = (p.configuration, noise[p.round - 1]);
                pmlab_lab::executor::RunOutput {
                    metrics: vec![Metric::new(
                        "pipe.us_per_op",
                        means[c] + d,
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
                }
            },
        )
        .unwrap();
        let e = store.load(outcome.experiment_id).unwrap();
        Report::of(&e, None, &SideSelection::Default).unwrap()
    }
}
