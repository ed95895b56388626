//! Ignore rules as git applies them, and the untracked folders they leave to report.

use super::model::{dirty, join, os, Kind, Untracked};
use crate::error::Result;
use crate::git::Dirty;
use git2::Repository;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Ignore rules as libgit2 reads them: `.gitignore` in every folder up the path,
/// `.git/info/exclude`, `core.excludesFile`.
pub(super) struct Ignored<'a> {
    pub(super) repo: &'a Repository,
    pub(super) workdir: &'a Path,
}

impl Ignored<'_> {
    pub(super) fn is(&self, path: &[u8], kind: Kind) -> Result<bool> {
        match kind {
            Kind::Dir => {
                let mut with_slash = path.to_vec();
                with_slash.push(b'/');
                Ok(self.repo.is_path_ignored(os(&with_slash))?)
            }
            Kind::Other => Ok(self.repo.is_path_ignored(os(path))?),
            // libgit2's path check follows a symlink to decide whether it names a folder;
            // git never does, and neither does libgit2's own status of the path.
            Kind::Symlink => {
                let by_libgit2 = self.repo.is_path_ignored(os(path))?;
                if !self.workdir.join(os(path)).is_dir() {
                    return Ok(by_libgit2);
                }
                // A symlink to a folder: libgit2 follows it and applies folder-only rules
                // (`build/`); git never follows it. git itself answers this rare case.
                let asked = std::process::Command::new("git")
                    .arg("-C")
                    .arg(self.workdir)
                    .args(["check-ignore", "-q", "--no-index", "--"])
                    .arg(os(path))
                    .env_remove("GIT_DIR")
                    .env_remove("GIT_WORK_TREE")
                    .env_remove("GIT_INDEX_FILE")
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status();
                Ok(match asked.map(|s| s.code()) {
                    Ok(Some(0)) => true,
                    Ok(Some(1)) => false,
                    _ => by_libgit2,
                })
            }
        }
    }

    /// Reports an untracked folder: `d/` (nested repositories always, or with `Folders`), or
    /// each untracked, not ignored file in it. Nothing when it holds none.
    pub(super) fn untracked_dir(
        &self,
        rel: &[u8],
        untracked: Untracked,
        out: &mut Vec<Dirty>,
    ) -> Result<()> {
        let mut files = Vec::new();
        let whole = self.collect(rel, untracked == Untracked::Folders, &mut files)?;
        if whole {
            let mut p = rel.to_vec();
            p.push(b'/');
            out.push(dirty(p, "untracked", false));
        } else if untracked == Untracked::Folders {
            if !files.is_empty() {
                let mut p = rel.to_vec();
                p.push(b'/');
                out.push(dirty(p, "untracked", false));
            }
        } else {
            out.extend(files.into_iter().map(|f| dirty(f, "untracked", false)));
        }
        Ok(())
    }

    /// Collects untracked, not ignored files under `rel`; `true` when the folder must be
    /// reported whole (a nested repository, or a folder that cannot be read).
    pub(super) fn collect(
        &self,
        rel: &[u8],
        first_only: bool,
        files: &mut Vec<Vec<u8>>,
    ) -> Result<bool> {
        let full: PathBuf = self.workdir.join(os(rel));
        let Ok(read) = std::fs::read_dir(&full) else {
            return Ok(true);
        };
        let mut entries: Vec<(Vec<u8>, Kind)> = Vec::new();
        for entry in read {
            let Ok(entry) = entry else {
                return Ok(true);
            };
            let name = entry.file_name().as_bytes().to_vec();
            if name == b".git" {
                return Ok(true);
            }
            let kind = match entry.file_type() {
                Ok(t) if t.is_dir() => Kind::Dir,
                Ok(t) if t.is_symlink() => Kind::Symlink,
                _ => Kind::Other,
            };
            entries.push((name, kind));
        }
        entries.sort();
        for (name, kind) in entries {
            let path = join(rel, &name);
            if self.is(&path, kind)? {
                continue;
            }
            if kind == Kind::Dir {
                let before = files.len();
                if self.collect(&path, first_only, files)? {
                    // A nested repository inside an untracked folder: listed whole.
                    files.truncate(before);
                    let mut p = path;
                    p.push(b'/');
                    files.push(p);
                }
            } else {
                files.push(path);
            }
            if first_only && !files.is_empty() {
                return Ok(false);
            }
        }
        Ok(false)
    }
}
