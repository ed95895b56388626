//! The restore's own status walks: what differs from the baseline now, as bytes (never a
//! lossy name), with submodules told apart.

use crate::error::Result;
use git2::{Oid, Repository, Status, StatusOptions};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// One entry of the restore's own status walk: bytes, never a lossy name.
pub(super) struct Dirty {
    pub(super) path: Vec<u8>,
    pub(super) untracked: bool,
    pub(super) submodule: bool,
    /// Tracked and present, but not the baseline's content.
    pub(super) modified: bool,
    /// For a submodule: the commit the index records for it.
    pub(super) gitlink: Option<Oid>,
}

/// What commands left in the work tree, found with the status walk of `git::status` (with the
/// run's preflight walk, only folders that changed since are listed again).
pub(super) fn tree_walk(
    repo: &Repository,
    walk: Option<&crate::git::status::Snapshot>,
) -> Result<Vec<Dirty>> {
    let found = match walk {
        Some(snapshot) => snapshot.changes_since(repo)?,
        None => crate::git::dirty_paths(repo, true)?,
    };
    let index = repo.index()?;
    Ok(found
        .into_iter()
        .map(|d| {
            let gitlink = if d.tracked {
                index
                    .get_path(Path::new(OsStr::from_bytes(&d.raw)), 0)
                    .filter(|e| e.mode == 0o160000)
                    .map(|e| e.id)
            } else {
                None
            };
            let submodule = gitlink.is_some();
            Dirty {
                gitlink,
                untracked: !d.tracked,
                modified: d.tracked && !submodule && d.label == "modified",
                submodule,
                path: d
                    .raw
                    .strip_suffix(b"/")
                    .map(<[u8]>::to_vec)
                    .unwrap_or(d.raw),
            }
        })
        .collect())
}

/// The work tree against the index (restored first, so against the baseline): modified,
/// deleted and untracked-not-ignored paths, each untracked file listed on its own.
pub(super) fn status_walk(repo: &Repository) -> Result<Vec<Dirty>> {
    let mut opts = StatusOptions::new();
    opts.show(git2::StatusShow::Workdir)
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false)
        .exclude_submodules(false)
        .renames_index_to_workdir(false);
    let statuses = repo.statuses(Some(&mut opts))?;
    let index = repo.index()?;
    let mut out = Vec::new();
    for e in statuses.iter() {
        let s = e.status();
        if s == Status::CURRENT || s.contains(Status::IGNORED) {
            continue;
        }
        let path = e.path_bytes().to_vec();
        // A gitlink in the index: a submodule, whose own tree is cleaned on its own.
        let submodule = !s.contains(Status::WT_NEW)
            && index
                .get_path(Path::new(OsStr::from_bytes(&path)), 0)
                .is_some_and(|e| e.mode == 0o160000);
        out.push(Dirty {
            gitlink: None,
            untracked: s.contains(Status::WT_NEW),
            modified: s.contains(Status::WT_MODIFIED) && !submodule,
            submodule,
            path,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
