//! `git factory hook install|uninstall`, and the pre-push hook itself: every pushed tip is
//! verified in a temporary worktree (cached by tree), and a commit made by a factory run that
//! did not PASS is refused. A tip whose tree carries signed evidence the user trusts, covering
//! today's checks, goes through at once (SPEC §6).

use crate::config::{self, Config};
use crate::error::{Error, Exit, Result};
use crate::git;
use crate::store::{self, records::Verdict};
use crate::ui::Ui;
use clap::{Args, Subcommand};
use git2::{Oid, Repository};
use std::io::BufRead;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

const START: &str = "# START git-factory";
const END: &str = "# END git-factory";
const SAVED: &str = "pre-push.factory-saved";

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

fn hooks_dir(repo: &Repository) -> Result<PathBuf> {
    git::hooks_dir(repo)
}

fn block() -> String {
    format!("{START}\ngit factory hook pre-push \"$@\" || exit $?\n{END}\n")
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
    let dir = hooks_dir(repo)?;
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("pre-push");
    let existing = std::fs::read_to_string(&path).ok();
    let text = match existing {
        Some(old) if old.contains(START) => {
            let (head, rest) = old.split_once(START).unwrap_or((&old, ""));
            let tail = rest
                .split_once(END)
                .map(|(_, t)| t.trim_start_matches('\n'))
                .unwrap_or("");
            format!("{head}{}{tail}", block())
        }
        Some(_) if !force => return Err(Error::new(format!(
            "{} exists and was not written by git factory",
            path.display()
        ))
        .hint(
            "keep it, or pass --force to install ours (yours is kept as pre-push.factory-saved)",
        )),
        Some(_) => {
            std::fs::rename(&path, dir.join(SAVED))?;
            format!("#!/bin/sh\n{}", block())
        }
        None => format!("#!/bin/sh\n{}", block()),
    };
    std::fs::write(&path, text)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    ui.always(format!(
        "installed the git factory pre-push hook in {}",
        path.display()
    ));
    Ok(Exit::Success)
}

fn uninstall(ui: &Ui, repo: &Repository) -> Result<Exit> {
    let dir = hooks_dir(repo)?;
    let path = dir.join("pre-push");
    let Some(old) = std::fs::read_to_string(&path).ok() else {
        ui.info("no pre-push hook is installed");
        return Ok(Exit::Success);
    };
    let Some((head, rest)) = old.split_once(START) else {
        return Err(
            Error::new(format!("{} was not written by git factory", path.display()))
                .hint("leave it, or remove it yourself"),
        );
    };
    let tail = rest
        .split_once(END)
        .map(|(_, t)| t.trim_start_matches('\n'))
        .unwrap_or("");
    let left = format!("{head}{tail}");
    if left.trim().is_empty() || left.trim() == "#!/bin/sh" {
        std::fs::remove_file(&path)?;
        if dir.join(SAVED).exists() {
            std::fs::rename(dir.join(SAVED), &path)?;
        }
    } else {
        std::fs::write(&path, left)?;
    }
    ui.always(format!(
        "removed the git factory pre-push hook from {}",
        path.display()
    ));
    Ok(Exit::Success)
}

/// `refs/factory/*` and `refs/notes/factory*`: what `git factory push` sends.
fn is_run_record(refname: &str) -> bool {
    refname.starts_with("refs/factory/") || refname.starts_with("refs/notes/factory")
}

const ZERO: &str = "0000000000000000000000000000000000000000";

/// Commits the push sends: `remote..local`, or what no remote-tracking ref has yet.
fn pushed_commits(repo: &Repository, local: Oid, remote_sha: &str) -> Result<Vec<Oid>> {
    let mut walk = repo.revwalk()?;
    walk.push(local)?;
    if remote_sha != ZERO {
        if let Ok(oid) = Oid::from_str(remote_sha) {
            if repo.find_commit(oid).is_ok() {
                let _ = walk.hide(oid);
            }
        }
    } else {
        let _ = walk.hide_glob("refs/remotes/*");
    }
    Ok(walk.flatten().take(1000).collect())
}

fn pre_push(ui: &Ui, repo: &Repository, remote: &str) -> Result<Exit> {
    let cfg = Config::of(repo);
    if cfg
        .string(config::PRE_PUSH)
        .is_some_and(|v| matches!(v.as_str(), "false" | "no" | "off" | "0"))
    {
        return Ok(Exit::Success);
    }
    let timeout = Duration::from_secs(cfg.value(
        None,
        config::TIMEOUT_SECONDS,
        config::DEFAULT_TIMEOUT_SECONDS,
    )?);
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line?;
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [local_ref, local_sha, remote_ref, remote_sha] = fields[..] else {
            continue;
        };
        // Run records are not code: sharing them is never verified (SPEC §6).
        if [local_ref, remote_ref].iter().any(|r| is_run_record(r)) {
            continue;
        }
        if local_sha == ZERO {
            continue; // a deletion
        }
        let local = Oid::from_str(local_sha)?;
        for c in pushed_commits(repo, local, remote_sha)? {
            let commit = repo.find_commit(c)?;
            let message = commit.message().unwrap_or("");
            let Some(run_id) = message
                .lines()
                .rev()
                .find_map(|l| l.strip_prefix("Factory-Run: "))
            else {
                continue;
            };
            let verdict = store::find_run(repo, run_id.trim())?.map(|r| r.summary.verdict);
            if verdict.is_some_and(|v| v != Verdict::Pass) {
                ui.always(format!(
                    "{} {} was made by git factory run {} whose verdict is {}; not pushing to {remote}",
                    console::style("blocked:").red().bold(),
                    git::short(&c.to_string()),
                    run_id.trim(),
                    verdict.map(|v| v.as_str()).unwrap_or("?")
                ));
                return Ok(Exit::Fail);
            }
        }
        if let Some(signer) = crate::evidence::attested_by(repo, local) {
            ui.info(format!(
                "git factory: {local_ref} attested by {}",
                crate::ui::escape_controls(&signer)
            ));
            continue;
        }
        let v = super::verify::verify_commit(repo, local, false, timeout, ui)?;
        if !v.passed {
            ui.always(format!(
                "{} {local_ref} ({}) fails verification; not pushing to {remote}\n{}\nhint: fix it, or push with --no-verify to skip the hook",
                console::style("blocked:").red().bold(),
                git::short(local_sha),
                v.excerpt
            ));
            return Ok(Exit::Fail);
        }
        ui.info(format!(
            "git factory: {local_ref} verified{}",
            if v.cached { " (cached)" } else { "" }
        ));
    }
    Ok(Exit::Success)
}
