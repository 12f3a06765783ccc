//! `pmlab completions SHELL` and `pmlab man [DIR]`: shell completions and man pages generated
//! from the command line's own clap definitions, so they say what `--help` says.

use std::path::PathBuf;

use anyhow::{bail, Context};

/// `pmlab completions`.
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  source <(pmlab completions bash)\n  pmlab completions bash > /usr/local/share/bash-completion/completions/pmlab\n  pmlab completions zsh > /usr/local/share/zsh/site-functions/_pmlab\n  pmlab completions fish > ~/.config/fish/completions/pmlab.fish\n\nscripts/setup.sh installs the bash, zsh and fish scripts where the machine has their directories."
)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    pub shell: clap_complete::Shell,
}

/// Print the completion script for `a.shell` to stdout.
pub fn completions(a: CompletionsArgs, mut cli: clap::Command) -> anyhow::Result<()> {
    clap_complete::generate(a.shell, &mut cli, "pmlab", &mut std::io::stdout());
    Ok(())
}

/// `pmlab man`.
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  pmlab man | man -l -\n  pmlab man /usr/local/share/man/man1      # pmlab.1, pmlab-knob.1, pmlab-knob-set.1, ...\n\nscripts/setup.sh installs the pages into /usr/local/share/man/man1."
)]
pub struct ManArgs {
    /// Write pmlab.1 and a page per subcommand (pmlab-knob.1, pmlab-knob-set.1, ...) into this
    /// existing directory. Without it, pmlab.1 goes to stdout.
    pub dir: Option<PathBuf>,
}

/// Print pmlab.1, or write every page into `a.dir`.
pub fn man(a: ManArgs, cli: clap::Command) -> anyhow::Result<()> {
    let Some(dir) = a.dir else {
        // As `generate_to` makes the pages: `help` is not a page of its own.
        let cli = cli.disable_help_subcommand(true);
        clap_mangen::Man::new(cli).render(&mut std::io::stdout().lock())?;
        return Ok(());
    };
    if !dir.is_dir() {
        bail!("{}: not a directory (create it first)", dir.display());
    }
    clap_mangen::generate_to(cli, &dir)
        .with_context(|| format!("writing man pages into {}", dir.display()))
}
