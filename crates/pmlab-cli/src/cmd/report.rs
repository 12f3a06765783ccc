//! `pmlab report ID...`: a self-contained HTML report (or mail/markdown text with the same
//! findings and tables) for experiments or a study in the store.

use pmlab_report::html;
use pmlab_report::render::Format;
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  pmlab report                       # the latest study (else the latest experiment)
  pmlab report 12 --out /tmp/r       # one experiment: /tmp/r/report.html
  pmlab report 3 7                   # compare mode: #7 overlaid on #3
  pmlab report study:2 --format mail # a study's findings and tables as text
  pmlab report study --format json   # its findings and stages as data

IDs are experiment numbers (`pmlab results list`), `study` (the latest study) or
`study:N`. HTML goes to DIR/report.html with raw CSV/JSON in DIR/data/.";

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Experiment IDs, `study` or `study:N`.
    pub ids: Vec<String>,
    /// Directory of the HTML report (default: ./pmlab-report, or the study's directory).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Output format: html (a directory), mail or markdown (text on stdout), or json (the
    /// findings and stages, on stdout).
    #[arg(long, value_enum, default_value = "html")]
    pub format: Format,
    /// The result store.
    #[arg(long, value_name = "PATH", default_value = "pmlab.db")]
    pub db: PathBuf,
}

/// The formats of `pmlab report`: the whole report (tables, findings, stages) as a page or
/// as text; an experiment's tables alone come from `pmlab results show`.
const REPORT_FORMATS: &[Format] = &[Format::Html, Format::Mail, Format::Markdown, Format::Json];

pub fn run(args: Args) -> anyhow::Result<()> {
    let format = args.format.check("pmlab report", REPORT_FORMATS)?;
    let (input, study_dir) = pmlab_study::report_of(&args.db, &args.ids)?;
    match format {
        Format::Html => {
            let dir = args
                .out
                .clone()
                .or(study_dir)
                .unwrap_or_else(|| PathBuf::from("pmlab-report"));
            let t = std::time::Instant::now();
            let w = html::write(&input, &dir)?;
            eprintln!(
                "pmlab: report written in {} ms ({} bytes)",
                t.elapsed().as_millis(),
                w.bytes
            );
            for (i, f) in w.findings.iter().take(3).enumerate() {
                println!("{}. {}", i + 1, f.text);
            }
            println!("{}", w.html.display());
        }
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&html::text::summary(&input)?)?
        ),
        _ => print!("{}", html::text::text(&input, format == Format::Markdown)?),
    }
    Ok(())
}
