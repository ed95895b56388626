//! `git factory push [<remote>]`: share runs without non-fast-forward refusals.

use crate::error::{Exit, Result};
use crate::git;
use crate::store::share::{self, Shared};
use crate::ui::Ui;
use clap::Args;

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The remote (a name or URL) to send runs to
    #[arg(value_name = "REMOTE", default_value = "origin")]
    pub remote: String,
    /// The repository (default: discovered from the current directory)
    #[arg(long, value_name = "DIR")]
    pub repo: Option<std::path::PathBuf>,
}

/// The report line shared by push and fetch.
pub(super) fn report(ui: &Ui, shared: &Shared, moved: &str, remote: &str) {
    let runs = shared.runs.len();
    let mut line = match (runs, shared.notes) {
        (0, false) => format!("{remote}: runs and notes already up to date"),
        (n, notes) => format!(
            "{moved} {n} run{}{}",
            if n == 1 { "" } else { "s" },
            if notes { " and the merged notes" } else { "" }
        ),
    };
    if runs > 0 || shared.notes {
        line.push_str(&format!(" ({remote})"));
    }
    ui.always(line);
    for (name, kind) in &shared.not_runs {
        ui.warn(format!(
            "skipped {remote}'s {name}: it points at a {kind}, not a run record"
        ));
    }
    for id in &shared.cut_off {
        ui.warn(format!(
            "skipped {remote}'s run {id}: its history is cut off there (a shallow remote) and this clone is not shallow; fetch it into a shallow clone, or push the history it starts from to {remote}"
        ));
    }
    for id in &shared.diverged {
        ui.warn(format!(
            "run {id} has a different record on each side; each keeps its own (see it with git factory show {id})"
        ));
    }
}

pub fn cmd_push(ui: &Ui, args: PushArgs) -> Result<Exit> {
    let repo = git::open(args.repo.as_deref())?;
    let shared = share::push(&repo, &args.remote)?;
    report(ui, &shared, "pushed", &args.remote);
    Ok(Exit::Success)
}
