//! The repository's own files a restore puts back after the refs and before the work tree:
//! the index and `.git/config` (through a lock file and a rename, as git writes them),
//! `info/exclude`, and the lock files a killed command left.

use super::facts::Restore;
use super::report::Report;
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
    /// `recover` only: lock files (`index.lock`, `HEAD.lock`) that a command of the killed run
    /// left when `recover` stopped it mid-write (a `git commit` in a check). One is removed
    /// only when it was made after the capture (newer than the saved index) and no live
    /// process has it open — `recover` holds the repo lock and has just stopped the run's
    /// command group, so such a lock has no owner left. Anything else stays and is named by
    /// the index write as before.
    pub(super) fn clear_stale_locks(&self, repo: &Repository, report: &mut Report) {
        let Ok(captured) = std::fs::metadata(&self.saved).and_then(|m| m.modified()) else {
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
