//! `pmlab run-spec` (not built yet).

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`pmlab run-spec` is not implemented yet")
}
