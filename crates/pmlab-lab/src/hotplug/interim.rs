//! Kept for callers outside the hotplug lab (study): the loader command, now
//! [`LoaderCommand::system_tool`]. The interim tracer, parser and breakdown are gone.

use super::loaders::{LoaderCommand, LoaderKind};

/// Same as [`LoaderCommand::system_tool`].
pub fn loader_command(kind: LoaderKind) -> LoaderCommand {
    LoaderCommand::system_tool(kind)
}
