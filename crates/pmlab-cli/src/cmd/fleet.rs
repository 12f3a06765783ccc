//! `pmlab fleet report`: one HTML report across the hosts and kernels of result bundles.

use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  pmlab fleet report bundles/ -o fleet.html
  pmlab fleet report host-a/bundles host-b/bundles --json

Bundles come from `pmlab results export --bundle DIR` on each host (contrib/ansible fetches
them from a whole inventory). Every experiment is shown per host and kernel side by side,
means with 95% CIs, each against the first host/kernel's configuration of the same label.";

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(clap::Subcommand)]
pub enum Sub {
    /// Render the fleet report of the bundles in or below DIR...
    #[command(after_help = EXAMPLES)]
    Report {
        /// Bundle directories, or directories holding bundles at any depth.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        /// The HTML file to write.
        #[arg(short, long, value_name = "FILE", default_value = "fleet.html")]
        output: PathBuf,
        /// Print what was written as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Sub::Report { dirs, output, json } => {
            let r = pmlab_report::html::fleet::write(&dirs, &output)?;
            if json {
                println!(
                    "{}",
                    serde_json::json!({
                        "html": r.html,
                        "machines": r.machines,
                        "experiments": r.experiments,
                    })
                );
            } else {
                println!(
                    "{} ({} host/kernel pair(s), {} experiment(s))",
                    r.html.display(),
                    r.machines,
                    r.experiments
                );
            }
            Ok(())
        }
    }
}
