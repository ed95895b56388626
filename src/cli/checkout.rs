//! `git factory checkout <run> --attempt N <dir>`: materialise an attempt's tree.

use crate::error::{Exit, Result};
use crate::git;
use crate::ops::checkout::checkout_attempt;
use crate::store;
use crate::ui::Ui;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct CheckoutArgs {
    /// A run id or a unique prefix of at least 4 hex digits
    #[arg(value_name = "RUN")]
    pub run: String,
    /// The attempt whose tree to write
    #[arg(long, value_name = "N")]
    pub attempt: u32,
    /// Where to write it (must not exist, or be empty)
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The repository (default: discovered from the current directory)
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
}

pub fn cmd_checkout(ui: &Ui, args: CheckoutArgs) -> Result<Exit> {
    let repo = git::open(args.repo.as_deref())?;
    let run = store::resolve(&repo, &args.run)?;
    let (files, commit) = checkout_attempt(&repo, &run, args.attempt, &args.dir)?;
    ui.info(format!(
        "wrote attempt {} of run {} ({} files, commit {}) to {}",
        args.attempt,
        run.run_id,
        files,
        git::short(&commit),
        args.dir.display()
    ));
    Ok(Exit::Success)
}
