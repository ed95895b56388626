//! `git factory reverify <run>`: re-runs PO on every recorded attempt tree, offline, in a
//! temporary worktree, and prints what was recorded next to what happens now.

use crate::config::Config;
use crate::error::{Exit, Result};
use crate::git;
use crate::ops::reverify::{self, Progress, Row, Settings};
use crate::ui::Ui;
use clap::Args;

#[derive(Debug, Args)]
pub struct ReverifyArgs {
    /// A run id or a unique prefix of at least 4 hex digits (default: the newest run)
    #[arg(value_name = "RUN")]
    pub run: Option<String>,
    /// Time limit in seconds for each command [default: the run's own]
    #[arg(long = "timeout-seconds", value_name = "S")]
    pub timeout_seconds: Option<u64>,
    /// Print the comparison as JSON on stdout
    #[arg(long)]
    pub json: bool,
    /// The repository (default: discovered from the current directory)
    #[arg(long, value_name = "DIR")]
    pub repo: Option<std::path::PathBuf>,
    /// Run the checks confined, as `run --sandbox` does: the attempts' trees are
    /// model-written code, and a fetched record's came from anyone [config: factory.sandbox]
    #[arg(long, overrides_with = "no_sandbox")]
    pub sandbox: bool,
    /// Run the checks without the sandbox, whatever factory.sandbox says
    #[arg(long = "no-sandbox", overrides_with = "sandbox")]
    pub no_sandbox: bool,
}

pub fn cmd_reverify(ui: &Ui, args: ReverifyArgs) -> Result<Exit> {
    let repo = git::open(args.repo.as_deref())?;
    let run = super::run_or_newest(&repo, args.run.as_deref())?;
    let order = reverify::recorded_order(&repo, &run)?;
    let settings = Settings {
        timeout_seconds: args.timeout_seconds,
        sandboxed: super::sandbox_wanted(args.sandbox, args.no_sandbox, &Config::of(&repo))?,
    };
    let rows = reverify::reverify(&repo, &run, &order, &settings, |event| match event {
        Progress::NoTree { attempt, recorded } => ui.info(format!(
            "attempt {attempt}: {recorded} (no tree: never applied)"
        )),
        Progress::Checking { attempt, tree } => ui.info(format!(
            "attempt {attempt}: re-running PO on {}",
            git::short(tree)
        )),
        Progress::Command { kind, argv } => ui.detail(format!("  {kind}: {}", argv.join(" "))),
    })?;
    let all_same = rows.iter().all(|r| r.same);
    if args.json {
        ui.out(format!(
            "{}\n",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        ));
    } else {
        ui.out(table(&rows));
    }
    Ok(if all_same { Exit::Success } else { Exit::Fail })
}

/// One line per attempt: recorded, now, and whether they agree.
fn table(rows: &[Row]) -> String {
    let mut text = String::new();
    for r in rows {
        let mark = if r.same {
            console::style("same").green()
        } else {
            console::style("CHANGED").red().bold()
        };
        let note = r
            .same_tree_as
            .map(|k| format!(" (same tree as attempt {k})"))
            .unwrap_or_default();
        text.push_str(&format!(
            "attempt {}: recorded {:<20} now {:<20} {mark}{note}\n",
            r.attempt, r.recorded, r.now
        ));
    }
    text
}
