//! `git factory apply <run>`: brings a PASSed run's change into the current work tree,
//! 3-way when HEAD has moved on since the run's baseline. All or nothing: a conflict is
//! reported and nothing is written.

use crate::error::{Exit, Result};
use crate::git;
use crate::ops::apply::{apply_run, Applied};
use crate::ui::Ui;
use clap::Args;

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A run id or a unique prefix of at least 4 hex digits (default: the newest run)
    #[arg(value_name = "RUN")]
    pub run: Option<String>,
    /// The repository (default: discovered from the current directory)
    #[arg(long, value_name = "DIR")]
    pub repo: Option<std::path::PathBuf>,
}

pub fn cmd_apply(ui: &Ui, args: ApplyArgs) -> Result<Exit> {
    let repo = git::open(args.repo.as_deref())?;
    let root = git::workdir(&repo)?;
    let run = super::run_or_newest(&repo, args.run.as_deref())?;
    match apply_run(&repo, &root, &run)? {
        Applied::NothingToApply => {
            ui.info(format!(
                "run {} was already satisfied at its baseline: it has no change to apply",
                run.run_id
            ));
            Ok(Exit::Success)
        }
        Applied::Conflict(paths) => {
            ui.always(format!(
                "{} run {}'s change conflicts with HEAD in: {}\nnothing was changed; apply it by hand from git factory show {} --patch",
                console::style("conflict:").red().bold(),
                run.run_id,
                paths.join(", "),
                run.run_id
            ));
            Ok(Exit::Fail)
        }
        Applied::Written { files, merged } => {
            ui.always(format!(
                "applied run {} ({} file{}{}); the change is in your work tree, uncommitted",
                run.run_id,
                files,
                if files == 1 { "" } else { "s" },
                if merged {
                    ", merged 3-way onto HEAD"
                } else {
                    ""
                }
            ));
            Ok(Exit::Success)
        }
    }
}
