//! `git factory fetch [<remote>]`: take in a remote's runs and merge its notes.

use crate::error::{Exit, Result};
use crate::git;
use crate::store::share;
use crate::ui::Ui;
use clap::Args;

#[derive(Debug, Args)]
pub struct FetchArgs {
    /// The remote (a name or URL) to take runs from
    #[arg(value_name = "REMOTE", default_value = "origin")]
    pub remote: String,
    /// The repository (default: discovered from the current directory)
    #[arg(long, value_name = "DIR")]
    pub repo: Option<std::path::PathBuf>,
}

pub fn cmd_fetch(ui: &Ui, args: FetchArgs) -> Result<Exit> {
    let repo = git::open(args.repo.as_deref())?;
    let shared = share::fetch(&repo, &args.remote)?;
    super::push::report(ui, &shared, "fetched", &args.remote);
    Ok(Exit::Success)
}
