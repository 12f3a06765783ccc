//! `pmlab results list|show|compare|export`: read the result store. Statistics are derived
//! from the stored runs at read time.

use anyhow::{bail, Context};
use pmlab_report::render::Format;
use pmlab_report::report::{Report, SideSelection};
use pmlab_store::lineup::{self, LineUpBy};
use pmlab_store::store::{Store, StoredExperiment};
use std::io::Write;
use std::path::{Path, PathBuf};

const EXAMPLES: &str = "\
Examples:
  pmlab results list
  pmlab results show 12
  pmlab results show latest --format mail
  pmlab results show 12 --reference 200us --side all
  pmlab results compare 3 7            # e.g. before/after a kernel change, on different boots
  pmlab results export 12 --format csv > runs.csv
  pmlab results --db /srv/pmlab.db export 12 --format json --output runs.json
  pmlab results export 12 --format parquet --output out/   # experiment-12-{experiment,configurations,runs,metrics}.parquet";

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// The result store.
    #[arg(long, value_name = "PATH", default_value = "pmlab.db", global = true)]
    pub db: PathBuf,
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(clap::Subcommand)]
pub enum Sub {
    /// Every experiment in the store, oldest first.
    #[command(after_help = "Examples:\n  pmlab results list\n  pmlab results list --json")]
    List {
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// One experiment's statistics: per configuration, verdicts, side metrics, knee.
    #[command(
        after_help = "Examples:\n  pmlab results show 12\n  pmlab results show latest --format markdown --side totals"
    )]
    Show {
        /// Experiment id, or `latest`.
        id: String,
        #[command(flatten)]
        view: View,
        /// Also list every run (round, order, status, error, primary value).
        #[arg(long)]
        runs: bool,
    },
    /// Compare two experiments: each configuration of the second against the same label
    /// in the first (or against the first's reference). With --by, one experiment against
    /// itself run on other kernels or hosts.
    #[command(
        after_help = "Examples:\n  pmlab results compare 3 7\n  pmlab results compare 3 latest --format mail\n  pmlab results compare --by kernel latest     # every run of this experiment, per kernel, oldest kernel first\n  pmlab results compare --by host 12 --format markdown"
    )]
    Compare {
        /// The baseline experiment (with --by: the experiment to line up).
        id1: String,
        /// The experiment compared with it (not with --by).
        #[arg(required_unless_present = "by", conflicts_with = "by")]
        id2: Option<String>,
        /// Line up every stored run of ID1's experiment (same name, configurations and
        /// workloads) by the kernel (release and build) or host it ran on, each group's runs
        /// pooled; the oldest group is the baseline.
        #[arg(long, value_enum, value_name = "kernel|host")]
        by: Option<ByArg>,
        #[command(flatten)]
        view: View,
    },
    /// Raw runs and metrics of an experiment: csv (one row per run and metric), json, or
    /// parquet (one file per table: experiment, configurations, runs, metrics); or, with
    /// --bundle, a result bundle per experiment for fleets (Parquet tables, manifest.json and
    /// a one-experiment store, under DIR/host=H/kernel=K/experiment=UID/).
    #[command(
        after_help = "Examples:\n  pmlab results export 12 --format csv > runs.csv\n  pmlab results export 12 --format json\n  pmlab results export latest --format parquet --output out/\n  duckdb -c \"FROM 'out/experiment-12-metrics.parquet' WHERE metric = 'time_per_op'\"\n  pmlab results export all --bundle bundles/\n  duckdb -c \"SELECT host, kernel, metric, avg(value) FROM read_parquet('bundles/**/metrics.parquet', hive_partitioning = true) GROUP BY ALL\""
    )]
    Export {
        /// Experiment id, or `latest` (with --bundle also `all`).
        id: String,
        /// csv (long table), json (everything stored), or parquet (files in --output DIR, default .).
        #[arg(long, value_parser = ["csv", "json", "parquet"], default_value = "csv", conflicts_with = "bundle")]
        format: String,
        /// Write to this file instead of stdout (parquet: into this directory).
        #[arg(long, short, value_name = "FILE", conflicts_with = "bundle")]
        output: Option<PathBuf>,
        /// Write result bundles under this directory (existing bundles are kept as they are).
        #[arg(long, value_name = "DIR")]
        bundle: Option<PathBuf>,
    },
    /// Load result bundles (from `export --bundle`, another host or a fleet run) into this
    /// store; experiments it already holds are skipped, so importing twice changes nothing.
    #[command(
        after_help = "Examples:\n  pmlab results import bundles/\n  pmlab results --db fleet.db import host-a/bundles host-b/bundles"
    )]
    Import {
        /// Bundle directories, or directories holding bundles at any depth.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        /// JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
}

/// What `results compare --by` lines runs up by.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ByArg {
    Kernel,
    Host,
}

#[derive(clap::Args)]
pub struct View {
    #[command(flatten)]
    pub out: super::FormatArgs,
    /// Compare against this configuration (a label) instead of the stored reference.
    #[arg(long, value_name = "LABEL")]
    pub reference: Option<String>,
    /// Side metrics to show: default, totals, all, none, or names (a trailing * matches a prefix).
    #[arg(long, value_name = "LIST", default_value = "default")]
    pub side: String,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Sub::Import { dirs, json } = &args.command {
        return import(&args.db, dirs, *json);
    }
    let store = Store::open_existing(&args.db)?;
    match args.command {
        Sub::Import { .. } => unreachable!("handled above"),
        Sub::Export {
            id,
            bundle: Some(root),
            ..
        } => {
            let ids = if id == "all" {
                store.list()?.iter().map(|e| e.id).collect()
            } else {
                vec![store.resolve_id(&id)?]
            };
            for id in ids {
                let b = pmlab_store::bundle::export(&store, id, &root)?;
                let what = if b.written { "" } else { " (already there)" };
                println!("{}{what}", b.dir.display());
            }
            Ok(())
        }
        Sub::List { json } => list(&store, json),
        Sub::Show { id, view, runs } => {
            let e = store.load(store.resolve_id(&id)?)?;
            let report = Report::of(
                &e,
                view.reference.as_deref(),
                &SideSelection::parse(&view.side),
            )?;
            print!("{}", view.out.get().renderer().render(&report)?);
            if runs && view.out.get() == Format::Table {
                println!("\n{}", pmlab_report::render::store::runs(&e));
            }
            Ok(())
        }
        Sub::Compare { id1, id2, by, view } => {
            if view.reference.is_some() {
                bail!("--reference does not apply to results compare: configurations are matched by label");
            }
            let side = SideSelection::parse(&view.side);
            let report = match (by, id2) {
                (Some(by), _) => {
                    let by = match by {
                        ByArg::Kernel => LineUpBy::Kernel,
                        ByArg::Host => LineUpBy::Host,
                    };
                    let groups = lineup::groups(&store, store.resolve_id(&id1)?, by)?;
                    let named: Vec<(String, &StoredExperiment)> = groups
                        .iter()
                        .map(|g| (g.label.clone(), &g.pooled))
                        .collect();
                    Report::lined_up(&named, &side)?
                }
                (None, Some(id2)) => {
                    let a = store.load(store.resolve_id(&id1)?)?;
                    let b = store.load(store.resolve_id(&id2)?)?;
                    Report::cross(&a, &b, &side)?
                }
                (None, None) => unreachable!("clap requires ID2 without --by"),
            };
            print!("{}", view.out.get().renderer().render(&report)?);
            Ok(())
        }
        Sub::Export {
            id, format, output, ..
        } => {
            let e = store.load(store.resolve_id(&id)?)?;
            let bytes = match format.as_str() {
                "csv" => pmlab_store::export::runs_csv(&e)?,
                "json" => pmlab_store::export::runs_json(&e)?,
                _ => {
                    let dir = output.unwrap_or_else(|| PathBuf::from("."));
                    for p in pmlab_store::export::write_parquet(&e, &dir)? {
                        println!("{}", p.display());
                    }
                    return Ok(());
                }
            };
            match output {
                Some(path) => std::fs::write(&path, bytes)
                    .with_context(|| format!("writing {}", path.display()))?,
                None => std::io::stdout().write_all(&bytes)?,
            }
            Ok(())
        }
    }
}

/// `results import`: the store is created if missing (a fleet's results start here).
fn import(db: &Path, dirs: &[PathBuf], json: bool) -> anyhow::Result<()> {
    let mut store = Store::open(db)?;
    let got = pmlab_store::bundle::import(&mut store, dirs)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&got)?);
        return Ok(());
    }
    let new = got.iter().filter(|i| i.id.is_some()).count();
    println!(
        "imported {new} experiment(s) into {} ({} already there)",
        db.display(),
        got.len() - new
    );
    Ok(())
}

fn list(store: &Store, json: bool) -> anyhow::Result<()> {
    let infos = store.list()?;
    if json {
        println!("{}", serde_json::to_string_pretty(&infos)?);
        return Ok(());
    }
    if infos.is_empty() {
        println!("no experiments in {}", store.path().display());
        return Ok(());
    }
    println!("{}", pmlab_report::render::store::experiments(&infos));
    Ok(())
}
