//! One module per subcommand; each has `Args` (clap) and `run(Args)`.

pub mod analyze;
pub mod boot;
pub mod compare;
pub mod dump;
pub mod export;
pub mod fleet;
pub mod hotplug;
pub mod info;
pub mod knob;
pub mod manual;
pub mod meter;
pub mod record;
pub mod remote;
pub mod report;
pub mod results;
pub mod run;
pub mod run_spec;
pub mod study;
pub mod sweep;
pub mod top;
pub mod trace;
pub mod whatif;

use pmlab_report::render::Format;

/// `--format` and its `--json` shorthand, as the commands that print results take them: every
/// [`Format`] but html, refused while the arguments are parsed, before anything runs.
#[derive(clap::Args, Clone, Debug)]
pub struct FormatArgs {
    /// Output format: table, markdown (md), mail, json or csv.
    #[arg(long, value_parser = Format::parse_text, default_value = "table")]
    pub format: Format,
    /// Same as --format json.
    #[arg(long)]
    pub json: bool,
}

impl FormatArgs {
    /// The format asked for.
    pub fn get(&self) -> Format {
        if self.json {
            Format::Json
        } else {
            self.format
        }
    }
}

/// `--format`'s parser for a command that declares the flag itself ([`Format::parse_text`]).
pub fn text_format(s: &str) -> Result<Format, pmlab_report::render::FormatError> {
    Format::parse_text(s)
}
