//! `git factory hook install|uninstall`, and the pre-push hook itself: every pushed tip is
//! verified in a temporary worktree (cached by tree), and a commit made by a factory run that
//! did not PASS is refused. A tip whose tree carries signed evidence the user trusts, covering
//! today's checks, goes through at once (SPEC §6).

use crate::error::{Exit, Result};
use crate::git;
use crate::ops::hook::{self, Update};
use crate::ui::Ui;
use clap::{Args, Subcommand};
use git2::Repository;
use std::io::BufRead;

#[derive(Debug, Args)]
pub struct HookArgs {
    #[command(subcommand)]
    pub action: HookAction,
}

#[derive(Debug, Subcommand)]
pub enum HookAction {
    /// Install the pre-push hook (honours core.hooksPath)
    Install {
        /// Replace a pre-push hook git factory did not write (it is kept as pre-push.factory-saved)
        #[arg(long)]
        force: bool,
    },
    /// Remove the pre-push hook git factory installed (restoring a saved one)
    Uninstall,
    /// The hook itself, as git runs it: `git factory hook pre-push <remote> <url>`
    #[command(name = "pre-push", hide = true)]
    PrePush {
        remote: Option<String>,
        url: Option<String>,
    },
}

pub fn cmd_hook(ui: &Ui, args: HookArgs) -> Result<Exit> {
    let repo = git::open(None)?;
    match args.action {
        HookAction::Install { force } => install(ui, &repo, force),
        HookAction::Uninstall => uninstall(ui, &repo),
        HookAction::PrePush { remote, .. } => pre_push(ui, &repo, remote.as_deref().unwrap_or("")),
    }
}

fn install(ui: &Ui, repo: &Repository, force: bool) -> Result<Exit> {
    let path = hook::install(repo, force)?;
    ui.always(format!(
        "installed the git factory pre-push hook in {}",
        path.display()
    ));
    Ok(Exit::Success)
}

fn uninstall(ui: &Ui, repo: &Repository) -> Result<Exit> {
    let Some(path) = hook::uninstall(repo)? else {
        ui.info("no pre-push hook is installed");
        return Ok(Exit::Success);
    };
    ui.always(format!(
        "removed the git factory pre-push hook from {}",
        path.display()
    ));
    Ok(Exit::Success)
}

fn pre_push(ui: &Ui, repo: &Repository, remote: &str) -> Result<Exit> {
    let Some(timeout) = hook::pre_push_timeout(repo)? else {
        return Ok(Exit::Success);
    };
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line?;
        let Some(update) = Update::parse(&line)? else {
            continue;
        };
        if let Some(b) = hook::made_by_failed_run(repo, &update)? {
            ui.always(format!(
                "{} {} was made by git factory run {} whose verdict is {}; not pushing to {remote}",
                console::style("blocked:").red().bold(),
                git::short(&b.commit.to_string()),
                b.run_id,
                b.verdict.map(|v| v.as_str()).unwrap_or("?")
            ));
            return Ok(Exit::Fail);
        }
        if let Some(signer) = crate::evidence::attested_by(repo, update.local) {
            ui.info(format!(
                "git factory: {} attested by {}",
                update.local_ref,
                crate::ui::escape_controls(&signer)
            ));
            continue;
        }
        let v = super::verify::verify_commit(repo, update.local, false, timeout, true, ui)?;
        if !v.passed {
            ui.always(format!(
                "{} {} ({}) fails verification; not pushing to {remote}\n{}\nhint: fix it, or push with --no-verify to skip the hook",
                console::style("blocked:").red().bold(),
                update.local_ref,
                git::short(update.local_sha),
                v.excerpt
            ));
            return Ok(Exit::Fail);
        }
        ui.info(format!(
            "git factory: {} verified{}{}",
            update.local_ref,
            super::verify::judged_by(&v),
            if v.cached { " (cached)" } else { "" }
        ));
    }
    Ok(Exit::Success)
}
