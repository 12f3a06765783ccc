//! One module per subcommand; each has `Args` (clap) and `run(Args)`.

pub mod analyze;
pub mod compare;
pub mod dump;
pub mod export;
pub mod fleet;
pub mod hotplug;
pub mod info;
pub mod knob;
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

/// `--format` of a command that prints text on stdout: every [`Format`] but html, refused
/// while the arguments are parsed, before anything runs.
pub fn text_format(s: &str) -> Result<Format, String> {
    let f = <Format as clap::ValueEnum>::from_str(s, false).map_err(|_| {
        let names: Vec<String> = Format::TEXT.iter().map(|f| f.to_string()).collect();
        format!("possible values: {}", names.join(", "))
    })?;
    f.check("a command that prints text", Format::TEXT)
        .map_err(|e| e.to_string())
}
