//! The repository's own files a restore puts back after the refs and before the work tree:
//! the index and `.git/config` (through a lock file and a rename, as git writes them),
//! `info/exclude`, and the lock files a killed command left — all from the capture's one
//! saved-state file, read once per restore.

use super::facts::Restore;
use super::report::{Purpose, Report};
use super::saved::{state_path, SavedState};
use crate::error::{Error, Result};
use git2::Repository;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// `.git/info/exclude` of the common git dir: ignore rules a command can change.
pub(super) fn exclude_path(repo: &Repository) -> PathBuf {
    repo.commondir().join("info").join("exclude")
}

/// Replaces `target` with `bytes` as git does: `<target>.lock` created exclusively, written,
/// synced, renamed over. Returns whether anything changed; a lock someone else holds is an
/// error naming it.
pub fn replace_locked(target: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    if std::fs::read(target).ok().as_deref() == Some(bytes) {
        return Ok(false);
    }
    let mut lock_name = target.as_os_str().to_os_string();
    lock_name.push(".lock");
    let lock = PathBuf::from(lock_name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                std::io::Error::other(format!(
                    "{} exists: another git process (or an editor) holds it; close it, or remove the file if nothing does",
                    lock.display()
                ))
            } else {
                e
            }
        })?;
    let written = file
        .write_all(bytes)
        .and_then(|_| file.sync_all())
        .and_then(|_| std::fs::rename(&lock, target));
    if written.is_err() {
        let _ = std::fs::remove_file(&lock);
    }
    written.map(|_| true)
}

impl Restore {
    /// What the capture saved: the copy it kept in memory (a restore within the run), else
    /// the file, read back only when it is the one the capture wrote (`recover`).
    fn saved_state(&self) -> Result<std::sync::Arc<SavedState>> {
        if let Some(state) = &self.state {
            return Ok(state.clone());
        }
        let digest = self.state_digest.as_deref();
        let state = SavedState::load_checked(&self.saved, self.hooks.as_ref(), digest)?;
        Ok(std::sync::Arc::new(state))
    }

    /// The index as the capture found it, parsed from its saved bytes; `None` when there was
    /// none. git reads an index from a file only, so the bytes are copied to a temporary one
    /// beside the saved state for the read (a rare path: a race's final check).
    pub fn saved_index(&self) -> Result<Option<git2::Index>> {
        if !self.had_index {
            return Ok(None);
        }
        let state = self.saved_state()?;
        let Some(bytes) = &state.index else {
            return Ok(None);
        };
        let mut copy = tempfile::NamedTempFile::new_in(&self.saved)?;
        copy.write_all(bytes)?;
        copy.flush()?;
        Ok(Some(git2::Index::open(copy.path())?))
    }

    /// The repository's own files, after the refs and before the work tree: the index (its
    /// saved bytes), `.git/config` (in-situ only; a `--worktree` run names it), the hooks (in
    /// every mode) and `info/exclude`.
    pub(super) fn put_back_git_files(
        &self,
        repo: &Repository,
        purpose: Purpose,
        report: &mut Report,
    ) -> Result<()> {
        if purpose == Purpose::Recover {
            self.clear_stale_locks(repo, report);
        }
        let state = self.saved_state()?;
        if self.had_index {
            let Some(saved) = &state.index else {
                return Err(Error::new(format!(
                    "the saved state in {} holds no index, though the run's capture found one",
                    self.saved.display()
                ))
                .hint("put .git/index back by hand if it changed (git reset resets it to HEAD), then remove the journal (journal.*.json)"));
            };
            match replace_locked(&repo.path().join("index"), saved) {
                Ok(true) => report.git.push(".git/index".to_string()),
                Ok(false) => {}
                Err(e) => report.failed.push(format!(".git/index: {e}")),
            }
        }
        if let Some(saved) = &state.config {
            let config = repo.commondir().join("config");
            if std::fs::read(&config).ok().as_deref() != Some(saved.as_slice()) {
                // The user's own config edits during a --worktree run are theirs: only
                // reported there; an in-situ run holds the repo and puts it back.
                if self.refs.is_some() {
                    if let Err(e) = replace_locked(&config, saved) {
                        report.failed.push(format!(".git/config: {e}"));
                    }
                    report.git.push(".git/config".to_string());
                } else {
                    report.left.push(".git/config".to_string());
                }
            }
        }
        if let Some(hooks) = &self.hooks {
            // In every mode, also where the repo is shared with the user's ongoing work: a
            // planted hook would run the checks' code on the user's next commit.
            let differed = hooks.restore(&state, true, &mut report.failed);
            report.git.extend(differed);
        }
        self.put_back_exclude(repo, state.exclude.as_deref(), report);
        Ok(())
    }

    /// Ignore rules first: what follows must not trust the ones a command wrote.
    fn put_back_exclude(&self, repo: &Repository, saved: Option<&[u8]>, report: &mut Report) {
        let exclude = exclude_path(repo);
        let now = std::fs::read(&exclude).ok();
        match saved {
            Some(saved) if now.as_deref() != Some(saved) && self.refs.is_none() => {
                // Shared with the user's ongoing work (as `.git/config` is): named, not undone.
                report
                    .git
                    .push(".git/info/exclude (changed, left as is)".to_string());
            }
            Some(saved) if now.as_deref() != Some(saved) => {
                let written = std::fs::create_dir_all(exclude.parent().unwrap_or(repo.path()))
                    .and_then(|_| replace_locked(&exclude, saved));
                match written {
                    Ok(_) => report.git.push(".git/info/exclude".to_string()),
                    Err(e) => report.failed.push(format!(".git/info/exclude: {e}")),
                }
            }
            None if self.exclude_absent && now.is_some() && self.refs.is_some() => {
                match std::fs::remove_file(&exclude) {
                    Ok(()) => report.git.push(".git/info/exclude".to_string()),
                    Err(e) => report.failed.push(format!(".git/info/exclude: {e}")),
                }
            }
            _ => {}
        }
    }

    /// `recover` only: lock files (`index.lock`, `HEAD.lock`) that a command of the killed run
    /// left when `recover` stopped it mid-write (a `git commit` in a check). One is removed
    /// only when it was made after the capture (newer than the saved state) and no live
    /// process has it open — `recover` holds the repo lock and has just stopped the run's
    /// command group, so such a lock has no owner left. Anything else stays and is named by
    /// the index write as before.
    fn clear_stale_locks(&self, repo: &Repository, report: &mut Report) {
        // The saved state's time; a run from before it saved its files in the folder.
        let captured = std::fs::symlink_metadata(state_path(&self.saved))
            .or_else(|_| std::fs::metadata(&self.saved))
            .and_then(|m| m.modified());
        let Ok(captured) = captured else {
            return;
        };
        for name in ["index.lock", "HEAD.lock"] {
            let lock = repo.path().join(name);
            let Ok(meta) = std::fs::symlink_metadata(&lock) else {
                continue;
            };
            let newer = meta.modified().is_ok_and(|t| t >= captured);
            if newer && meta.is_file() && !held_open(&lock) {
                match std::fs::remove_file(&lock) {
                    Ok(()) => report.git.push(format!(".git/{name}")),
                    Err(e) => report.failed.push(format!(".git/{name}: {e}")),
                }
            }
        }
    }
}

/// Whether any live process has `path` open (Linux `/proc/<pid>/fd`); `true` when that cannot
/// be told, so an unknown owner's lock is never taken away.
fn held_open(path: &Path) -> bool {
    let Ok(target) = path.canonicalize() else {
        return true;
    };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return true;
    };
    for p in procs.flatten() {
        if !p.file_name().as_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue; // gone, or not ours to read (another user's cannot hold our repo's lock)
        };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l == target))
        {
            return true;
        }
    }
    false
}
