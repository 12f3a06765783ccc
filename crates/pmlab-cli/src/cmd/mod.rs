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
