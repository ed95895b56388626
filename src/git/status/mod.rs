//! The status walk: which paths of the work tree differ from the index (staged, unstaged and
//! untracked-not-ignored), as `git status` answers it, at git's own cost or below.
//!
//! libgit2's status lstat()s every index entry on one thread and reads every folder again on
//! each call. Here, as git's preload-index does, the entries are checked in parallel, folder by
//! folder (the folder opened once, its files stat'ed by name), and a [`Snapshot`] of the first
//! walk lets later checks in the same run skip listing the folders whose stamp has not changed
//! since: only a folder whose entries changed can hold a new untracked file. Tracked files are
//! still checked one by one. What the stat data cannot settle (changed or racy stat data,
//! gitlinks, untracked symlinks, ignore rules) is asked of libgit2, so the answers are libgit2's;
//! what the fast walk does not handle (a case-insensitive work tree, conflicts, an unreadable
//! folder) falls back to libgit2's own walk.
//!
//! git's own accelerators (`core.untrackedCache`'s index extension, `core.fsmonitor`) are not
//! read: libgit2 does not read them, and gitoxide's released walk does not use them either, so
//! taking it would double the build for nothing here. Within a run the snapshot does the
//! untracked cache's job; an index that carries them is walked like any other.

mod cache;
mod ignored;
mod index;
mod jobs;
mod model;
mod stat;
#[cfg(test)]
mod tests;
mod walk;

pub use model::Untracked;

use super::{staged_paths, Dirty};
use crate::error::{Error, Result};
use git2::Repository;
use model::{Seen, Time};
use std::os::unix::fs::MetadataExt;
use walk::{fast_walk, libgit2_workdir};

/// What the first walk of a run saw, so a later check can skip listing folders that have not
/// changed since.
pub struct Snapshot {
    changes: Vec<Dirty>,
    seen: Option<Seen>,
    /// From the fast walk's own stat of every tracked file (`None` when libgit2 walked):
    /// what a restore needs to put back modes like 0600, at no extra cost.
    odd_modes: Option<Vec<(Vec<u8>, u32)>>,
    /// Whether the index has skip-worktree or assume-unchanged entries.
    skips: bool,
}

/// The folders of a clean work tree and the entries its ignore rules hide, as a walk saw them
/// (see [`Snapshot::folders`]).
pub struct Folders {
    /// Every folder holding tracked files but the root, parents first.
    pub dirs: Vec<FolderFact>,
    /// The untracked entries the ignore rules hide, with their inodes.
    pub hidden: Vec<(Vec<u8>, u64)>,
    /// Untracked folders the ignore rules do not hide: empty, or holding only ignored
    /// entries (the tree is clean). Not walked: what is inside is for the caller to read.
    pub untracked_dirs: Vec<Vec<u8>>,
}

/// One folder: its path, permission bits and modification time (seconds, nanoseconds).
pub struct FolderFact {
    pub path: Vec<u8>,
    pub mode: u32,
    pub mtime: (i64, i64),
}

impl Snapshot {
    /// Walks the work tree once (staged, unstaged, untracked), remembering each folder's stamp.
    pub fn take(repo: &Repository) -> Result<Snapshot> {
        let tick = walk_tick(repo);
        let mut changes = staged_paths(repo)?;
        crate::trace::mark("    status: staged (index vs HEAD)");
        let mut odd_modes = None;
        let mut skips = true;
        // The last run's stamps of this work tree: only folders changed since are listed.
        let kept = cache::load(repo);
        let mut walked = fast_walk(repo, kept.as_ref().map(|k| &k.seen), Untracked::Folders)?;
        if let (Some(kept), Some(walk)) = (&kept, &walked) {
            if !kept.covers(&walk.dirs) {
                // A `.gitignore` the last run did not see: every folder is listed again.
                walked = fast_walk(repo, None, Untracked::Folders)?;
            }
        }
        let seen = match walked {
            Some(walk) => {
                changes.extend(walk.dirty);
                odd_modes = Some(walk.odd_modes);
                skips = walk.skips;
                let gitignores = walk.gitignores;
                let seen = Seen {
                    index: walk.index,
                    tick,
                    dirs: walk.dirs,
                };
                cache::save(repo, &seen, skips, &gitignores);
                Some(seen)
            }
            None => {
                changes.extend(libgit2_workdir(repo, Untracked::Folders, true)?);
                None
            }
        };
        Ok(Snapshot {
            changes: sorted(changes),
            seen,
            odd_modes,
            skips,
        })
    }

    /// What a restore's capture records of the folders, with no walk of its own: `None` unless
    /// the fast walk took this snapshot of a clean tree whose index has no skip-worktree or
    /// assume-unchanged entry — then every folder it listed holds tracked files (none is
    /// empty), and every untracked entry is either hidden by the ignore rules or a folder
    /// holding nothing else, which the caller walks itself.
    pub fn folders(&self) -> Option<Folders> {
        let seen = self.seen.as_ref()?;
        if !self.changes.is_empty() || self.skips {
            return None;
        }
        let mut dirs = Vec::with_capacity(seen.dirs.len());
        let mut hidden = Vec::new();
        let mut untracked_dirs = Vec::new();
        for (rel, record) in &seen.dirs {
            for (name, ino) in &record.ignored {
                hidden.push((model::join(rel, name), *ino));
            }
            for (name, is_dir) in &record.untracked {
                if !is_dir {
                    // An untracked file in a clean tree: the snapshot is not what it says.
                    return None;
                }
                untracked_dirs.push(model::join(rel, name));
            }
            if !rel.is_empty() {
                let m = record.stamp.mtime;
                dirs.push(FolderFact {
                    path: rel.clone(),
                    mode: record.stamp.mode,
                    mtime: (m.sec, i64::from(m.nsec)),
                });
            }
        }
        // Byte order puts every folder after its parent.
        dirs.sort_by(|a, b| a.path.cmp(&b.path));
        hidden.sort();
        untracked_dirs.sort();
        Some(Folders {
            dirs,
            hidden,
            untracked_dirs,
        })
    }

    /// Tracked regular files whose mode a checkout would not recreate (0600), when the walk
    /// stat'ed every tracked file itself.
    pub fn odd_modes(&self) -> Option<&[(Vec<u8>, u32)]> {
        self.odd_modes.as_deref()
    }

    /// What differed when the snapshot was taken; untracked folders as `d/`.
    pub fn changes(&self) -> &[Dirty] {
        &self.changes
    }

    /// Refuses a work tree with any staged, unstaged or untracked-not-ignored change, listing up
    /// to 10 of them.
    pub fn ensure_clean(&self) -> Result<()> {
        if self.changes.is_empty() {
            return Ok(());
        }
        let mut err = Error::new("the work tree has uncommitted changes");
        for d in self.changes.iter().take(10) {
            err = err.detail(format!("{}: {}", d.label, d.path));
        }
        if self.changes.len() > 10 {
            err = err.detail(format!("… and {} more", self.changes.len() - 10));
        }
        Err(err.hint(
            "commit or stash them (git stash -u), or run with --worktree to leave your tree alone",
        ))
    }

    /// What differs now (untracked files one by one), listing again only the folders whose
    /// stamp changed since the snapshot, or was racy then. Same answer as a full walk.
    pub fn changes_since(&self, repo: &Repository) -> Result<Vec<Dirty>> {
        changes_with(repo, self.seen.as_ref(), Untracked::Files)
    }
}

/// What differs now, with one full walk.
pub fn changes(repo: &Repository, untracked: Untracked) -> Result<Vec<Dirty>> {
    changes_with(repo, None, untracked)
}

fn changes_with(
    repo: &Repository,
    seen: Option<&Seen>,
    untracked: Untracked,
) -> Result<Vec<Dirty>> {
    let mut out = staged_paths(repo)?;
    crate::trace::mark("    status: staged (index vs HEAD)");
    match fast_walk(repo, seen, untracked)? {
        Some(walk) => out.extend(walk.dirty),
        None => out.extend(libgit2_workdir(repo, untracked, true)?),
    }
    Ok(sorted(out))
}

fn sorted(mut v: Vec<Dirty>) -> Vec<Dirty> {
    v.sort_by(|a, b| a.raw.cmp(&b.raw));
    v.dedup_by(|a, b| a.raw == b.raw);
    v
}

/// A lower bound of the file-system clock now: the mtime of a file written now beside the
/// index (same file system as the work tree in almost every repo), and never later than two
/// seconds before the wall clock (file systems with coarse timestamps, or another clock).
fn walk_tick(repo: &Repository) -> Time {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.saturating_sub(std::time::Duration::from_secs(2)))
        .unwrap_or_default();
    let wall = Time {
        sec: i64::try_from(wall.as_secs()).unwrap_or(i64::MAX),
        nsec: wall.subsec_nanos(),
    };
    let dir = super::factory_dir(repo);
    let marker = dir.join("status-tick");
    // Its own file, rewritten in place (its mtime moves), never through a planted link.
    let written = std::fs::create_dir_all(&dir)
        .and_then(|()| super::nofollow::rewrite_own(&marker, b""))
        .and_then(|file| file.metadata());
    match written {
        Ok(meta) => wall.min(Time {
            sec: meta.mtime(),
            nsec: meta.mtime_nsec() as u32,
        }),
        Err(_) => wall,
    }
}
