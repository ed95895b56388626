//! The pre-push hook (`git factory hook`): its stub between markers in the hooks folder
//! (honouring `core.hooksPath`), installed and removed without touching what else the file
//! holds, and what it checks of each pushed ref.

use crate::config::{self, Config};
use crate::error::{Error, Result};
use crate::git;
use crate::store::{self, records::Verdict};
use git2::{Oid, Repository};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

const START: &str = "# START git-factory";
const END: &str = "# END git-factory";
const SAVED: &str = "pre-push.factory-saved";
const ZERO: &str = "0000000000000000000000000000000000000000";

fn block() -> String {
    format!("{START}\ngit factory hook pre-push \"$@\" || exit $?\n{END}\n")
}

/// `text` around our block: what comes before it, and what comes after it (without the
/// newlines right after it); `None` if it has no block.
fn split_block(text: &str) -> Option<(&str, &str)> {
    let (head, rest) = text.split_once(START)?;
    let tail = rest
        .split_once(END)
        .map(|(_, t)| t.trim_start_matches('\n'))
        .unwrap_or("");
    Some((head, tail))
}

/// Installs the pre-push hook: our block replaced in place if it is there, else a new hook (a
/// hook we did not write is refused, or with `force` kept beside ours). Returns its path.
pub fn install(repo: &Repository, force: bool) -> Result<PathBuf> {
    let dir = git::hooks_dir(repo)?;
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("pre-push");
    let existing = std::fs::read_to_string(&path).ok();
    let text = match existing.as_deref().map(split_block) {
        Some(Some((head, tail))) => format!("{head}{}{tail}", block()),
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
    Ok(path)
}

/// Removes our block from the pre-push hook (the file too when nothing else is left, putting
/// back a hook `install --force` saved). Returns its path, or `None` when there is no hook.
pub fn uninstall(repo: &Repository) -> Result<Option<PathBuf>> {
    let dir = git::hooks_dir(repo)?;
    let path = dir.join("pre-push");
    let Some(old) = std::fs::read_to_string(&path).ok() else {
        return Ok(None);
    };
    let Some((head, tail)) = split_block(&old) else {
        return Err(
            Error::new(format!("{} was not written by git factory", path.display()))
                .hint("leave it, or remove it yourself"),
        );
    };
    let left = format!("{head}{tail}");
    if left.trim().is_empty() || left.trim() == "#!/bin/sh" {
        std::fs::remove_file(&path)?;
        if dir.join(SAVED).exists() {
            std::fs::rename(dir.join(SAVED), &path)?;
        }
    } else {
        std::fs::write(&path, left)?;
    }
    Ok(Some(path))
}

/// Each command's time limit in the hook, or `None` when `factory.prePush` turns it off.
pub fn pre_push_timeout(repo: &Repository) -> Result<Option<Duration>> {
    let cfg = Config::of(repo);
    if cfg
        .string(config::PRE_PUSH)
        .is_some_and(|v| matches!(v.as_str(), "false" | "no" | "off" | "0"))
    {
        return Ok(None);
    }
    Ok(Some(Duration::from_secs(cfg.value(
        None,
        config::TIMEOUT_SECONDS,
        config::DEFAULT_TIMEOUT_SECONDS,
    )?)))
}

/// One line git gives the pre-push hook: a ref it is about to update on the remote.
pub struct Update<'a> {
    pub local_ref: &'a str,
    pub local_sha: &'a str,
    pub local: Oid,
    pub remote_sha: &'a str,
}

impl<'a> Update<'a> {
    /// The update `line` names, or `None` for what the hook leaves alone: a malformed line, a
    /// deletion, and run records (they are not code: sharing them is never verified, SPEC §6).
    pub fn parse(line: &'a str) -> Result<Option<Update<'a>>> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [local_ref, local_sha, remote_ref, remote_sha] = fields[..] else {
            return Ok(None);
        };
        if [local_ref, remote_ref].iter().any(|r| is_run_record(r)) {
            return Ok(None);
        }
        if local_sha == ZERO {
            return Ok(None); // a deletion
        }
        Ok(Some(Update {
            local_ref,
            local_sha,
            local: Oid::from_str(local_sha)?,
            remote_sha,
        }))
    }
}

/// `refs/factory/*` and `refs/notes/factory*`: what `git factory push` sends.
fn is_run_record(refname: &str) -> bool {
    refname.starts_with("refs/factory/") || refname.starts_with("refs/notes/factory")
}

/// A pushed commit a factory run made whose verdict is not PASS.
pub struct Blocked {
    pub commit: Oid,
    pub run_id: String,
    pub verdict: Option<Verdict>,
}

/// The first commit `update` sends that a factory run made without passing, if any.
pub fn made_by_failed_run(repo: &Repository, update: &Update<'_>) -> Result<Option<Blocked>> {
    for c in pushed_commits(repo, update.local, update.remote_sha)? {
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
            return Ok(Some(Blocked {
                commit: c,
                run_id: run_id.trim().to_string(),
                verdict,
            }));
        }
    }
    Ok(None)
}

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

#[cfg(test)]
mod tests {
    use super::{block, split_block};

    #[test]
    fn the_block_comes_out_with_its_newlines_and_nothing_else() {
        let text = format!("#!/bin/sh\necho mine\n{}\n\necho after\n", block());
        assert_eq!(
            split_block(&text),
            Some(("#!/bin/sh\necho mine\n", "echo after\n"))
        );
        assert_eq!(split_block("#!/bin/sh\necho mine\n"), None);
    }
}
