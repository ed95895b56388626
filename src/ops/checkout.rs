//! Materialising one attempt's tree of a stored run into a new folder (`git factory
//! checkout`), checked first and written without following links.

use crate::error::{Error, Result};
use crate::git::nofollow;
use crate::store::checked::{self, checked_tree};
use crate::store::StoredRun;
use git2::{ObjectType, Repository, Tree};
use std::os::fd::OwnedFd;
use std::path::Path;

/// Writes attempt `attempt`'s tree of `run` into `dir` (new, or empty); returns how many
/// files and links it wrote and the attempt's commit.
pub fn checkout_attempt(
    repo: &Repository,
    run: &StoredRun,
    attempt: u32,
    dir: &Path,
) -> Result<(usize, String)> {
    let record = run
        .summary
        .attempts
        .iter()
        .find(|a| a.attempt_index == attempt)
        .ok_or_else(|| {
            Error::new(format!("run {} has no attempt {}", run.run_id, attempt)).hint(format!(
                "it has attempts 1 to {}",
                run.summary.attempts.len()
            ))
        })?;
    let commit = record.tree_commit.as_deref().ok_or_else(|| {
        Error::new(format!(
            "attempt {} of run {} never applied a change, so it has no tree",
            attempt, run.run_id
        ))
        .hint("see its failure brief with git factory show RUN --attempt N")
    })?;
    if dir.exists()
        && std::fs::read_dir(dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(
            Error::new(format!("{} exists and is not empty", dir.display()))
                .hint("give a new folder"),
        );
    }
    let oid = git2::Oid::from_str(commit)?;
    let tree = repo
        .find_commit(oid)
        .map_err(|_| {
            Error::new(format!(
                "the attempt commit {commit} is not in this repository"
            ))
            .hint("fetch the run with its objects: git factory fetch <remote>")
        })?
        .tree()?;
    // A fetched record is untrusted: every entry is checked before the first write.
    checked_tree(repo, &tree, None)
        .map_err(|e| checked::refusal(&run.run_id, &format!("attempt {attempt}'s tree"), &e))?;
    std::fs::create_dir_all(dir)?;
    let root = nofollow::open_root(dir)?;
    let files = write_tree(repo, &tree, &root, b"")?;
    Ok((files, commit.to_string()))
}

/// Writes `tree` into the folder `dir` (an open descriptor), entry by entry: folders are
/// opened without following links and files and links are created exclusively, so nothing this
/// writer made (a link `a -> .` beside a folder `a` in a crafted tree) can steer a later write.
fn write_tree(repo: &Repository, tree: &Tree<'_>, dir: &OwnedFd, shown: &[u8]) -> Result<usize> {
    let mut count = 0;
    for entry in tree.iter() {
        // Names were checked by `checked_tree` before the first write.
        let name = entry.name_bytes();
        let path = [shown, if shown.is_empty() { b"" } else { b"/" }, name].concat();
        let failed = |e: std::io::Error| {
            Error::new(format!(
                "writing {} failed: {e}",
                crate::ui::escape_line(&String::from_utf8_lossy(&path))
            ))
        };
        match (entry.kind(), entry.filemode()) {
            (Some(ObjectType::Tree), _) => {
                rustix::fs::mkdirat(dir, name, rustix::fs::Mode::from_raw_mode(0o777))
                    .map_err(|e| failed(e.into()))?;
                let sub = nofollow::open_dir_at(dir, name, false, &path).map_err(failed)?;
                count += write_tree(repo, &repo.find_tree(entry.id())?, &sub, &path)?;
            }
            (Some(ObjectType::Blob), 0o120000) => {
                let blob = repo.find_blob(entry.id())?;
                nofollow::symlink_at(dir, name, blob.content()).map_err(failed)?;
                count += 1;
            }
            (Some(ObjectType::Blob), mode) => {
                let blob = repo.find_blob(entry.id())?;
                let mode = if mode == 0o100755 { 0o755 } else { 0o644 };
                nofollow::create_file_at(dir, name, blob.content(), mode).map_err(failed)?;
                count += 1;
            }
            _ => {}
        }
    }
    Ok(count)
}
