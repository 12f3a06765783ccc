//! The energy-meter options every experiment and `pmlab run` take (`--meter-counter`,
//! `--meter-wrap`, `--meter-stream`), turned into the lab's `MeterSpec`.

use pmlab_lab::meter::{parse_wrap, MeterSpec};

/// An external energy meter, read around every run's measured part.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct MeterArgs {
    /// Energy meter: a shell command that prints cumulative joules (one number), run before
    /// and after every measured part (e.g. 'cat /run/meter/energy_j').
    #[arg(
        long,
        value_name = "CMD",
        global = true,
        conflicts_with = "meter_stream"
    )]
    pub meter_counter: Option<String>,
    /// The value at which --meter-counter wraps to 0 (joules: 262143.99, 262kJ). Without
    /// it, a counter that goes backwards fails the run.
    #[arg(long, value_name = "J", global = true, requires = "meter_counter", value_parser = wrap)]
    pub meter_wrap: Option<f64>,
    /// Energy meter: a shell command that prints `TIMESTAMP WATTS` lines (Unix seconds, as
    /// `date +%s.%N`) until SIGINT; started once, integrated over every run's window.
    #[arg(long, value_name = "CMD", global = true)]
    pub meter_stream: Option<String>,
}

fn wrap(s: &str) -> Result<f64, String> {
    parse_wrap(s).map_err(|e| e.to_string())
}

impl MeterArgs {
    /// The meter asked for, checked; `None` without one.
    pub fn spec(&self) -> anyhow::Result<Option<MeterSpec>> {
        let spec = match (&self.meter_counter, &self.meter_stream) {
            (Some(c), _) => MeterSpec::Counter {
                command: c.clone(),
                wrap: self.meter_wrap,
            },
            (None, Some(s)) => MeterSpec::Stream { command: s.clone() },
            (None, None) => return Ok(None),
        };
        spec.validate()?;
        Ok(Some(spec))
    }
}
