//! `git factory completions <shell>`.

use crate::error::{Exit, Result};
use crate::ui::Ui;
use clap::Args;

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to print the completion script for
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

pub fn cmd_completions(ui: &Ui, args: CompletionsArgs) -> Result<Exit> {
    ui.out(super::generated::completion(args.shell));
    Ok(Exit::Success)
}
