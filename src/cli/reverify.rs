//! `git factory reverify <run>`: re-runs PO on every recorded attempt tree, offline, in a
//! temporary worktree, and prints what was recorded next to what happens now.

use crate::config::{self, Config};
use crate::error::{Error, Exit, Result};
use crate::git;
use crate::roles::po::verify;
use crate::store;
use crate::store::checked::{self, checked_tree};
use crate::ui::Ui;
use crate::workorder::LoadedWorkOrder;
use clap::Args;
use serde::Serialize;
use std::time::Duration;

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
    /// Run the checks under bubblewrap, as `run --sandbox` does: the attempts' trees are
    /// model-written code, and a fetched record's came from anyone [config: factory.sandbox]
    #[arg(long, overrides_with = "no_sandbox")]
    pub sandbox: bool,
    /// Run the checks without the sandbox, whatever factory.sandbox says
    #[arg(long = "no-sandbox", overrides_with = "sandbox")]
    pub no_sandbox: bool,
}

#[derive(Debug, Serialize)]
struct Row {
    attempt: u32,
    tree: String,
    recorded: String,
    now: String,
    same: bool,
    /// Set when this tree was evaluated already for an earlier attempt.
    same_tree_as: Option<u32>,
}

/// A fetched record is untrusted: every attempt tree is checked before the first worktree is
/// made, so a crafted one is refused with nothing written.
fn check_trees(repo: &git2::Repository, run: &store::StoredRun) -> Result<()> {
    let head = git::head_commit(repo)?.tree()?;
    for a in &run.summary.attempts {
        let Some(commit) = a.tree_commit.as_deref() else {
            continue;
        };
        let Ok(tree) = git2::Oid::from_str(commit)
            .and_then(|oid| repo.find_commit(oid))
            .and_then(|c| c.tree())
        else {
            continue;
        };
        checked_tree(repo, &tree, Some(&head)).map_err(|e| {
            checked::refusal(
                &run.run_id,
                &format!("attempt {}'s tree", a.attempt_index),
                &e,
            )
        })?;
    }
    Ok(())
}

pub fn cmd_reverify(ui: &Ui, args: ReverifyArgs) -> Result<Exit> {
    let repo = git::open(args.repo.as_deref())?;
    crate::journal::refuse_if_pending(&repo, crate::journal::Beside::Allow)?;
    let run = super::run_or_newest(&repo, args.run.as_deref())?;
    let raw = store::read_artifact(&repo, run.commit, "work_order.json")?
        .ok_or_else(|| Error::new(format!("run {} has no work_order.json", run.run_id)))?;
    let text = String::from_utf8(raw).map_err(|_| {
        Error::new(format!("run {}'s work_order.json is not UTF-8", run.run_id))
            .hint("the record was damaged or crafted; run the work order again instead")
    })?;
    let order = LoadedWorkOrder::from_json_text(&text, "work_order.json")?;
    let cfg = Config::of(&repo);
    let configured = cfg.multi(config::VERIFY);
    let sandboxed = super::sandbox_wanted(args.sandbox, args.no_sandbox, &cfg)?;
    let timeout = Duration::from_secs(
        args.timeout_seconds
            .unwrap_or(run.summary.config.timeout_seconds),
    );
    check_trees(&repo, &run)?;
    let mut rows: Vec<Row> = Vec::new();
    for a in &run.summary.attempts {
        let recorded = match &a.failure_brief {
            Some(b) => b.stage.as_str().to_string(),
            None => "passed".to_string(),
        };
        let Some(commit) = a.tree_commit.as_deref() else {
            ui.info(format!(
                "attempt {}: {recorded} (no tree: never applied)",
                a.attempt_index
            ));
            continue;
        };
        if a.repeat_of.is_some() {
            continue;
        }
        let tree = repo
            .find_commit(git2::Oid::from_str(commit)?)
            .map_err(|_| {
                Error::new(format!("attempt commit {commit} is missing"))
                    .hint("fetch the run's objects")
            })?
            .tree()?;
        let tree_id = tree.id().to_string();
        // The same tree was evaluated for an earlier attempt: its result stands for this one.
        let earlier = rows
            .iter()
            .find(|r| r.tree == tree_id)
            .map(|r| (r.now.clone(), Some(r.attempt)));
        let (now, same_tree_as) = match earlier {
            Some(found) => found,
            None => {
                ui.info(format!(
                    "attempt {}: re-running PO on {}",
                    a.attempt_index,
                    git::short(&tree_id)
                ));
                let verify_cmds =
                    verify::commands_for_tree(&tree, &configured).map_err(Error::new)?;
                let outcome = verify::run_in_temporary_worktree(
                    &repo,
                    &format!("reverify-{}-{}", run.run_id, a.attempt_index),
                    commit,
                    &verify::Checks {
                        verify: &verify_cmds,
                        pass_to_pass: &order.pass_to_pass_argv(),
                        fail_to_pass: &order.fail_to_pass_argv(),
                        acceptance: &order.acceptance_argv(),
                    },
                    timeout,
                    sandboxed,
                    |kind, argv| ui.detail(format!("  {kind}: {}", argv.join(" "))),
                )?;
                let now = outcome
                    .failed
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_else(|| "passed".to_string());
                (now, None)
            }
        };
        rows.push(Row {
            attempt: a.attempt_index,
            tree: tree_id,
            same: now == recorded,
            recorded,
            now,
            same_tree_as,
        });
    }
    let all_same = rows.iter().all(|r| r.same);
    if args.json {
        ui.out(format!(
            "{}\n",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        ));
    } else {
        let mut text = String::new();
        for r in &rows {
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
        ui.out(text);
    }
    Ok(if all_same { Exit::Success } else { Exit::Fail })
}
