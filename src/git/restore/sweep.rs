//! The sweep of what commands left that the status walk cannot see: ignore rules a command
//! wrote, files where a sparse checkout left a path out, kept entries a command renamed, new
//! bytecode. Runs before the walk, so the walk judges by the baseline's rules.

use super::dirs::{FirstLook, Known};
use super::facts::{Image, KeptEntry, RelPath, Restore};
use super::images::write_image;
use super::paths::{identity_at, identity_in, move_back, open_dir_at, present, remove_at};
use super::python::is_bytecode;
use super::report::Report;
use crate::error::Result;
use git2::Repository;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What the index holds at a path, for the sweep.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tracked {
    /// A tracked file (or submodule) in the work tree.
    Yes,
    /// A folder holding tracked paths in the work tree.
    Folder,
    /// Only paths a sparse checkout leaves out: nothing belongs there.
    LeftOut,
    No,
}

/// The index entry flag of a path a sparse checkout leaves out (`git update-index
/// --skip-worktree`): such a path is not in the work tree, so a file there is a command's.
pub(super) const SKIP_WORKTREE: u16 = 0x4000;

impl Restore {
    /// Makes the ignore rules the baseline's before the status walk judges anything by them,
    /// and removes what that walk cannot see. With `new_ignored` (confined commands, an
    /// agent) every entry that was not there at capture goes, ignored or not (SPEC §7.1
    /// "left behind: nothing"). Otherwise SPEC §5 keeps ignored files (`git clean -fd`,
    /// no `-x`) — ignored by the baseline's rules, never by rules a command wrote: a
    /// `.gitignore` it planted (one that ignores itself, a new folder ignoring `*`) goes here,
    /// a tracked one it edited is written back from the index (`info/exclude` was put back
    /// with `.git/config`). Files written where a sparse checkout left a path out go too (the
    /// walk does not look at skip-worktree paths). A recorded entry a command renamed (same
    /// inode and birth time — or, where the file system keeps no birth time, size and
    /// modification time — old name gone) is moved back, so the user's ignored data is not
    /// deleted under its new name; one it deleted is named. Only folders whose stamp moved
    /// (as `first` found them), and new ones, are read.
    pub(super) fn sweep(
        &self,
        repo: &Repository,
        images: &[Image],
        known: &Known<'_>,
        first: &FirstLook,
        new_ignored: bool,
        report: &mut Report,
    ) -> Result<()> {
        let index = repo.index()?;
        self.rewrite_gitignores(repo, &index, report);
        let queue = first.moved(&self.dirs);
        if queue.is_empty() {
            return Ok(());
        }
        let mut sweep = Sweep {
            root: &self.root,
            index: &index,
            known,
            images: images.iter().map(|i| i.path.as_bytes()).collect(),
            kept: self.kept.iter().map(|k| k.path.as_bytes()).collect(),
            missing: self
                .kept
                .iter()
                .filter_map(|k| {
                    let id = k.id?;
                    let now = identity_at(&self.root, k.path.as_bytes());
                    (!now.is_some_and(|n| id.same_entry(&n))).then_some((id.ino, k))
                })
                .collect(),
            new_ignored,
            report,
        };
        sweep.folders(queue);
        sweep.name_deleted();
        Ok(())
    }

    /// Tracked `.gitignore` files, written back from the index: one a command edited must not
    /// hide its files from the walk.
    fn rewrite_gitignores(&self, repo: &Repository, index: &git2::Index, report: &mut Report) {
        for e in index.iter() {
            if e.flags_extended & SKIP_WORKTREE != 0 {
                continue;
            }
            let name = e.path.rsplit(|b| *b == b'/').next().unwrap_or(&[]);
            if name == b".gitignore" && e.mode != 0o160000 {
                let path = RelPath::from_bytes(&e.path);
                let mode = self
                    .modes
                    .iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, m)| *m)
                    .unwrap_or(if e.mode == 0o100755 { 0o755 } else { 0o644 });
                let image = Image {
                    blob: Some(e.id.to_string()),
                    mode,
                    path,
                };
                match write_image(repo, &self.root, &image) {
                    Ok(true) => {
                        report.paths.push(image.path.display());
                        report.files.push(image.path.as_bytes().to_vec());
                    }
                    Ok(false) => {}
                    Err(err) => report
                        .failed
                        .push(format!("{}: {err}", image.path.display())),
                }
            }
        }
    }
}

/// What the index says of a path, by binary search (no set of every path is built).
fn tracked(index: &git2::Index, c: &[u8]) -> Tracked {
    if let Some(e) = index.get_path(Path::new(OsStr::from_bytes(c)), 0) {
        return if e.flags_extended & SKIP_WORKTREE != 0 {
            Tracked::LeftOut
        } else {
            Tracked::Yes
        };
    }
    let prefix = [c, b"/"].concat();
    let Ok(mut pos) = index.find_prefix(prefix.as_slice()) else {
        return Tracked::No;
    };
    let mut any = false;
    while let Some(e) = index.get(pos) {
        if !e.path.starts_with(&prefix) {
            break;
        }
        any = true;
        if e.flags_extended & SKIP_WORKTREE == 0 {
            return Tracked::Folder;
        }
        pos += 1;
    }
    if any {
        Tracked::LeftOut
    } else {
        Tracked::No
    }
}

/// A folder's entries (name, inode, whether a folder), sorted; the root's `.git` left out.
fn entries_of(dir: &OwnedFd, rel: &[u8]) -> Option<Vec<(Vec<u8>, u64, bool)>> {
    let listing = rustix::fs::Dir::read_from(dir).ok()?;
    let mut entries: Vec<(Vec<u8>, u64, bool)> = Vec::new();
    for entry in listing.flatten() {
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." || (rel.is_empty() && name == b".git") {
            continue;
        }
        let is_dir = entry.file_type() == rustix::fs::FileType::Directory;
        entries.push((name.to_vec(), entry.ino(), is_dir));
    }
    entries.sort();
    Some(entries)
}

/// One sweep: what it must leave alone, and the recorded entries it has not found yet.
struct Sweep<'a, 'r> {
    root: &'a Path,
    index: &'a git2::Index,
    known: &'a Known<'a>,
    images: HashSet<&'a [u8]>,
    kept: HashSet<&'a [u8]>,
    /// Recorded entries gone from their place, by inode: candidates for a rename back.
    missing: HashMap<u64, &'a KeptEntry>,
    /// Every new entry goes, ignored or not: the commands were confined, or an agent's.
    new_ignored: bool,
    report: &'r mut Report,
}

impl Sweep<'_, '_> {
    /// Reads the folders in `queue`, and every new folder met on the way.
    fn folders(&mut self, mut queue: Vec<Vec<u8>>) {
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        while let Some(rel) = queue.pop() {
            if !seen.insert(rel.clone()) {
                continue;
            }
            let Some(dir) = open_dir_at(self.root, &rel) else {
                continue;
            };
            let Some(entries) = entries_of(&dir, &rel) else {
                continue;
            };
            for (name, ino, is_dir) in entries {
                let child = if rel.is_empty() {
                    name.clone()
                } else {
                    [rel.as_slice(), b"/", name.as_slice()].concat()
                };
                // A recorded folder is read when its own stamp moved; a new one always (a
                // planted rule or a renamed entry may be anywhere in it).
                if self.entry(&dir, &name, &child, ino)
                    && is_dir
                    && !self.known.contains_key(child.as_slice())
                {
                    queue.push(child);
                }
            }
        }
    }

    /// Judges one entry: moved back, removed, or left. `true` when it is left and not tracked.
    fn entry(&mut self, dir: &OwnedFd, name: &[u8], c: &[u8], ino: u64) -> bool {
        let report = &mut *self.report;
        if self.kept.contains(c) || self.images.contains(c) {
            return false;
        }
        let in_index = tracked(self.index, c);
        if in_index == Tracked::Yes {
            return false;
        }
        let shown = RelPath::from_bytes(c).display();
        // The same inode number is not the same file: the kernel gives a freed number to the
        // next file made, so a deleted ignored file and a new one would be taken for a rename
        // and the new one's bytes written back under the old name.
        let renamed = self.missing.get(&ino).is_some_and(|was| {
            was.id
                .zip(identity_in(dir, name))
                .is_some_and(|(then, now)| then.same_entry(&now))
        });
        if let Some(was) = renamed.then(|| self.missing.remove(&ino)).flatten() {
            match move_back(self.root, dir, name, was.path.as_bytes()) {
                Ok(()) => {
                    report.paths.push(shown);
                    report.paths.push(was.path.display());
                    report
                        .files
                        .extend([c.to_vec(), was.path.as_bytes().to_vec()]);
                }
                Err(e) => report.failed.push(format!(
                    "{shown}: the ignored {} moved here and could not be moved back: {e}",
                    was.path.display()
                )),
            }
            return false;
        }
        if in_index == Tracked::No && is_bytecode(name) {
            match remove_at(dir, name) {
                Ok(()) => {
                    report.bytecode.push(shown);
                    report.unlisted.push(c.to_vec());
                }
                Err(e) => report.failed.push(format!("{shown}: {e}")),
            }
            return false;
        }
        // A folder recorded at capture (one holding only ignored entries) is not new.
        let new = self.new_ignored && in_index == Tracked::No && !self.known.contains_key(c);
        if new || name == b".gitignore" || in_index == Tracked::LeftOut {
            match remove_at(dir, name) {
                Ok(()) => {
                    report.paths.push(shown);
                    report.files.push(c.to_vec());
                }
                Err(e) => report.failed.push(format!("{shown}: {e}")),
            }
            return false;
        }
        true
    }

    /// Recorded ignored entries a command deleted: SPEC §5 promises not to delete them, not
    /// to keep copies of their content, so they are named.
    fn name_deleted(&mut self) {
        for k in self
            .missing
            .values()
            .filter(|k| !present(self.root, k.path.as_bytes()))
        {
            self.report.paths.push(format!(
                "{} (ignored; removed by a command, not restored)",
                k.path.display()
            ));
        }
    }
}
