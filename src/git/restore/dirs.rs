//! The folders of the work tree: walked at capture (ignored ones and nested repositories
//! left out), and put back after the files — made readable, created ones removed, empty ones
//! made again, modes as recorded. Only folders whose time moved are read again.

use super::facts::{mtime_of, DirFact, RelPath, Restore};
use super::paths::{chmod_dir_at, dir_mode_at, real_parents, rmdir_at};
use super::report::Report;
use git2::Repository;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A placeholder for folders known from the index rather than from a capture.
pub(super) static NO_FACT: DirFact = DirFact {
    path: RelPath::Text(String::new()),
    mode: 0,
    empty: false,
    mtime: (0, 0),
};

/// Folders recorded at capture, by path: known not to be ignored, so a later walk need not
/// ask again (asking git about ignores is most of a walk's cost).
pub(super) type Known<'a> = std::collections::HashMap<&'a [u8], &'a DirFact>;

/// Walks the folders of the work tree (not `.git`, not ignored ones, not nested
/// repositories) from `start` (`b""` for the root); calls `visit(path, metadata, empty)`
/// for each, parents first. With `fix`, a
/// folder that cannot be read (a command's chmod 000) is made readable so nothing under it
/// stays hidden; its recorded mode is put back afterwards. `others` is told of every other
/// entry met (files, links, and the ignored folders and nested repositories not walked).
#[allow(clippy::type_complexity)]
pub(super) fn walk_dirs(
    repo: &Repository,
    root: &Path,
    start: &[u8],
    fix: bool,
    known: Option<&Known<'_>>,
    visit: &mut dyn FnMut(&[u8], &std::fs::Metadata, bool),
    mut others: Option<&mut dyn FnMut(&[u8], &std::fs::DirEntry)>,
) {
    let mut stack: Vec<Vec<u8>> = vec![start.to_vec()];
    while let Some(rel) = stack.pop() {
        let full = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(OsStr::from_bytes(&rel))
        };
        let Ok(meta) = std::fs::symlink_metadata(&full) else {
            continue;
        };
        let mode = meta.permissions().mode() & 0o7777;
        let entries = match std::fs::read_dir(&full) {
            Ok(r) => r,
            Err(_) if !fix => continue,
            Err(_) => {
                let _ =
                    std::fs::set_permissions(&full, std::fs::Permissions::from_mode(mode | 0o700));
                match std::fs::read_dir(&full) {
                    Ok(r) => r,
                    Err(_) => continue,
                }
            }
        };
        let mut empty = true;
        let mut children = Vec::new();
        for e in entries.flatten() {
            empty = false;
            let name = e.file_name();
            let name = name.as_bytes();
            if rel.is_empty() && name == b".git" {
                continue;
            }
            let child = if rel.is_empty() {
                name.to_vec()
            } else {
                [rel.as_slice(), b"/", name].concat()
            };
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                if let Some(tell) = others.as_mut() {
                    tell(&child, &e);
                }
                continue;
            }
            let is_known = known.is_some_and(|k| k.contains_key(child.as_slice()));
            if !is_known {
                // A submodule or nested repository is not ours to walk, nor an ignored folder.
                if e.path().join(".git").exists()
                    || repo
                        .is_path_ignored(Path::new(OsStr::from_bytes(&child)))
                        .unwrap_or(false)
                {
                    if let Some(tell) = others.as_mut() {
                        tell(&child, &e);
                    }
                    continue;
                }
            }
            children.push(child);
        }
        if !rel.is_empty() {
            visit(&rel, &meta, empty);
        }
        children.sort_by(|a, b| b.cmp(a));
        stack.extend(children);
    }
}

impl Restore {
    /// Folders whose list of entries may have changed since capture (the root as `b""`):
    /// their time moved, or it has no nanoseconds (a file system keeping whole seconds,
    /// where a same-second change would not show).
    pub(super) fn moved_dirs(&self) -> Vec<Vec<u8>> {
        self.dir_states().0
    }

    /// One stat per recorded folder (by path; anything odd is looked at again through real
    /// folders only): the folders whose list of entries may have changed, as
    /// [`Restore::moved_dirs`], and the recorded ones no longer there with their mode.
    fn dir_states(&self) -> (Vec<Vec<u8>>, Vec<&DirFact>) {
        let moved = |m: &std::fs::Metadata, was: (i64, i64)| -> bool {
            m.is_dir() && (mtime_of(m) != was || was.1 == 0)
        };
        let mut out = Vec::new();
        let mut off = Vec::new();
        if std::fs::symlink_metadata(&self.root).is_ok_and(|m| moved(&m, self.root_mtime)) {
            out.push(Vec::new());
        }
        for d in &self.dirs {
            match std::fs::symlink_metadata(self.root.join(d.path.path())) {
                Ok(m) => {
                    if moved(&m, d.mtime) {
                        out.push(d.path.as_bytes().to_vec());
                    }
                    if !(m.is_dir() && m.permissions().mode() & 0o7777 == d.mode) {
                        off.push(d);
                    }
                }
                Err(_) => off.push(d),
            }
        }
        (out, off)
    }

    /// The cheap common case: a recorded folder still there with its mode (one stat by path;
    /// anything else is looked at again through real folders only).
    fn dir_as_recorded(&self, d: &DirFact) -> bool {
        std::fs::symlink_metadata(self.root.join(d.path.path()))
            .is_ok_and(|m| m.is_dir() && m.permissions().mode() & 0o7777 == d.mode)
    }

    /// Recorded folders a command made unreadable (chmod 000) are opened up before the
    /// status walk, which would otherwise not see inside them; their modes are put back by
    /// `restore_dirs`. A stat each, no directory reads.
    pub(super) fn make_readable(&self) {
        for d in self.dirs.iter().filter(|d| !self.dir_as_recorded(d)) {
            let rel = d.path.as_bytes();
            if let Some(mode) = dir_mode_at(&self.root, rel) {
                if mode != d.mode && mode & 0o700 != 0o700 {
                    let _ = chmod_dir_at(&self.root, rel, mode | 0o700);
                }
            }
        }
    }

    /// Folders a command created directly inside a recorded one (or the root): only folders
    /// whose modification time moved are read. A time with no nanoseconds may come from a
    /// file system that keeps whole seconds, where a same-second change would not show: such
    /// folders are always read.
    fn new_dirs(&self, repo: &Repository, known: &Known<'_>, moved: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let mut found = Vec::new();
        for rel in moved {
            let rel = rel.as_slice();
            let full = if rel.is_empty() {
                self.root.clone()
            } else {
                self.root.join(OsStr::from_bytes(rel))
            };
            let Ok(entries) = std::fs::read_dir(&full) else {
                continue;
            };
            for e in entries.flatten() {
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = e.file_name();
                let name = name.as_bytes();
                if rel.is_empty() && name == b".git" {
                    continue;
                }
                let child = if rel.is_empty() {
                    name.to_vec()
                } else {
                    [rel, b"/", name].concat()
                };
                if known.contains_key(child.as_slice())
                    || e.path().join(".git").exists()
                    || repo
                        .is_path_ignored(Path::new(OsStr::from_bytes(&child)))
                        .unwrap_or(false)
                {
                    continue;
                }
                found.push(child);
            }
        }
        found
    }

    /// Folders as they were: created ones that are empty now removed (deepest first), empty
    /// ones that existed put back, modes as recorded.
    pub(super) fn restore_dirs(&self, repo: &Repository, known: &Known<'_>, report: &mut Report) {
        // Removing folders a command created changes no recorded folder's mode: one stat of
        // each serves both steps.
        let (moved, off) = self.dir_states();
        let mut now: Vec<Vec<u8>> = Vec::new();
        for rel in self.new_dirs(repo, known, moved) {
            walk_dirs(
                repo,
                &self.root,
                &rel,
                true,
                None,
                &mut |sub, _, _| now.push(sub.to_vec()),
                None,
            );
        }
        now.sort_by(|a, b| b.len().cmp(&a.len()).then(b.cmp(a)));
        for rel in &now {
            // Only empty ones: remove_dir refuses the rest (they hold ignored files).
            if rmdir_at(&self.root, rel).is_ok() {
                report
                    .paths
                    .push(format!("{}/", RelPath::from_bytes(rel).display()));
            }
        }
        for d in off {
            let rel = d.path.as_bytes();
            match dir_mode_at(&self.root, rel) {
                Some(mode) if mode != d.mode => {
                    let _ = chmod_dir_at(&self.root, rel, d.mode);
                    report.paths.push(format!("{}/", d.path.display()));
                }
                Some(_) => {}
                None if d.empty => {
                    let made = real_parents(&self.root, &[rel, b"/x"].concat())
                        .and_then(|_| chmod_dir_at(&self.root, rel, d.mode));
                    match made {
                        Ok(()) => report.paths.push(format!("{}/", d.path.display())),
                        Err(e) => report.failed.push(format!("{}/: {e}", d.path.display())),
                    }
                }
                _ => {}
            }
        }
    }
}
