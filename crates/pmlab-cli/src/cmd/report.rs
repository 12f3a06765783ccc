//! `pmlab report ID...`: a self-contained HTML report (or mail/markdown text with the same
//! findings and tables) for experiments or a study in the store.

use anyhow::{bail, Context};
use pmlab_report::html;
use pmlab_report::render::Format;
use pmlab_store::store::Store;
use pmlab_study::{self as study, record};
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  pmlab report                       # the latest study (else the latest experiment)
  pmlab report 12 --out /tmp/r       # one experiment: /tmp/r/report.html
  pmlab report 3 7                   # compare mode: #7 overlaid on #3
  pmlab report study:2 --format mail # a study's findings and tables as text

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
    /// Output format: html (a directory), mail or markdown (text on stdout).
    #[arg(long, value_enum, default_value = "html")]
    pub format: Format,
    /// The result store.
    #[arg(long, value_name = "PATH", default_value = "pmlab.db")]
    pub db: PathBuf,
}

fn input(args: &Args) -> anyhow::Result<(html::Input, Option<PathBuf>)> {
    if !args.db.exists() {
        bail!(
            "no store at {} (run an experiment or `pmlab study` first)",
            args.db.display()
        );
    }
    let study_id = match args.ids.as_slice() {
        [] => Some(None),
        [one] if one == "study" => Some(None),
        [one] if one.starts_with("study:") => Some(Some(
            one["study:".len()..]
                .parse::<i64>()
                .with_context(|| format!("bad study id `{one}`"))?,
        )),
        _ => None,
    };
    if let Some(id) = study_id {
        match record::load(&args.db, id)? {
            Some(rec) => {
                let dir = PathBuf::from(&rec.out_dir);
                return Ok((study::report_input(&args.db, &rec)?, Some(dir)));
            }
            None if id.is_some() || !args.ids.is_empty() => {
                bail!("no such study in {}", args.db.display())
            }
            None => {}
        }
    }
    let store = Store::open(&args.db)?;
    let ids: Vec<i64> = if args.ids.is_empty() {
        vec![store
            .latest_id()?
            .with_context(|| format!("{} holds no experiment", args.db.display()))?]
    } else {
        args.ids
            .iter()
            .map(|s| {
                s.parse::<i64>()
                    .with_context(|| format!("bad experiment id `{s}`"))
            })
            .collect::<Result<_, _>>()?
    };
    let experiments = ids
        .iter()
        .map(|&id| store.load(id))
        .collect::<Result<Vec<_>, _>>()?;
    let title = match ids.as_slice() {
        [one] => format!("pmlab experiment {one}"),
        [a, b] => format!("pmlab experiments {a} vs {b}"),
        many => format!(
            "pmlab experiments {}",
            many.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Ok((
        html::Input {
            title,
            experiments,
            stages: vec![],
            facts: vec![],
        },
        None,
    ))
}

/// The formats of `pmlab report`: the whole report (tables, findings, stages) as a page or
/// as text; an experiment's tables alone come from `pmlab results show`.
const REPORT_FORMATS: &[Format] = &[Format::Html, Format::Mail, Format::Markdown];

pub fn run(args: Args) -> anyhow::Result<()> {
    let format = args.format.check("pmlab report", REPORT_FORMATS)?;
    let (input, study_dir) = input(&args)?;
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
        _ => print!("{}", html::text::text(&input, format == Format::Markdown)?),
    }
    Ok(())
}
