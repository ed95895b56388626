//! The folders of the work tree: walked at capture (ignored ones and nested repositories
//! left out), and put back after the files — made readable, created ones removed, empty ones
//! made again, modes as recorded. Each recorded folder is stat'ed once before the sweep (the
//! first look); after the put-back only the folders that look or the put-back's own writes
//! give reason to doubt are stat'ed again, and only folders whose time moved are read.

use super::facts::{DirFact, RelPath, Restore};
use super::paths::{chmod_dir_at, dir_mode_at, real_parents, rmdir_at, split};
use super::report::Report;
use crate::git::nofollow::open_root;
use git2::Repository;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
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

/// A recorded folder as one stat found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    /// Its list of entries may have changed since capture: its time moved, or it has no
    /// nanoseconds (a file system keeping whole seconds, where a same-second change would not
    /// show).
    moved: bool,
    /// Absent, not a folder (a link a command planted), out of reach through real folders, or
    /// with another mode than recorded.
    off: bool,
}

/// What one look at the recorded folders found: the root, and each folder looked at (by its
/// index in [`Restore::dirs`]).
struct Look {
    root_moved: bool,
    seen: Vec<Option<Seen>>,
}

impl Look {
    /// The folders whose list of entries may have changed (the root as `b""`, first).
    fn moved(&self, dirs: &[DirFact]) -> Vec<Vec<u8>> {
        let root = self.root_moved.then(Vec::new);
        let moved = (dirs.iter().zip(&self.seen))
            .filter(|(_, s)| s.is_some_and(|s| s.moved))
            .map(|(d, _)| d.path.as_bytes().to_vec());
        root.into_iter().chain(moved).collect()
    }

    /// The recorded folders absent, out of reach or with another mode.
    fn off<'d>(&self, dirs: &'d [DirFact]) -> Vec<&'d DirFact> {
        (dirs.iter().zip(&self.seen))
            .filter(|(_, s)| s.is_some_and(|s| s.off))
            .map(|(d, _)| d)
            .collect()
    }
}

/// The first look at every recorded folder, taken once before the sweep (see
/// [`Restore::first_look`]); the put-back stats again only what it cannot vouch for.
pub(super) struct FirstLook {
    look: Look,
    /// Something other than the put-back's own writes may have changed folders since (the
    /// fallback walk that opens every folder up): every folder is stat'ed again.
    distrusted: bool,
}

impl FirstLook {
    /// The folders whose list of entries may have changed since capture (the root as
    /// `b""`): the ones the sweep reads.
    pub(super) fn moved(&self, dirs: &[DirFact]) -> Vec<Vec<u8>> {
        self.look.moved(dirs)
    }

    /// Folders may have changed in ways the put-back does not list (every unreadable folder
    /// opened up): nothing this look found is taken as still true.
    pub(super) fn distrust(&mut self) {
        self.distrusted = true;
    }
}

/// The work-tree paths a restore removed, wrote or checked out since the first look at the
/// folders: what may have changed a folder that look found as recorded.
#[derive(Default)]
pub(super) struct Touched {
    paths: HashSet<Vec<u8>>,
    /// How much of the report's `files` and `unlisted` is in `paths` already.
    files_seen: usize,
    unlisted_seen: usize,
}

impl Touched {
    pub(super) fn add(&mut self, path: &[u8]) {
        let path = path.strip_suffix(b"/").unwrap_or(path);
        if !self.paths.contains(path) {
            self.paths.insert(path.to_vec());
        }
    }

    /// Takes in every path `report` lists as removed or written since the last call.
    pub(super) fn note(&mut self, report: &Report) {
        let files = report.files.get(self.files_seen..).unwrap_or_default();
        let unlisted = report
            .unlisted
            .get(self.unlisted_seen..)
            .unwrap_or_default();
        for path in files.iter().chain(unlisted) {
            self.add(path);
        }
        self.files_seen = report.files.len();
        self.unlisted_seen = report.unlisted.len();
    }
}

/// The components of a path (empty ones left out): sorting by them puts a folder before
/// everything under it, and everything under it together.
fn components(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.split(|b| *b == b'/').filter(|c| !c.is_empty())
}

/// A component no recorded folder's path holds (capture never records one, and no path
/// reached through one is the work tree's).
fn refused(comp: &[u8]) -> bool {
    comp == b"." || comp == b".." || comp.eq_ignore_ascii_case(b".git")
}

/// Every folder on the way to `path` (not the root, not `path` itself).
fn on_the_way(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    (path.iter().enumerate())
        .filter(|(i, b)| **b == b'/' && *i > 0)
        .map(move |(i, _)| &path[..i])
}

/// The folder `parents` names (the root when empty), reached from the deepest folder `chain`
/// already holds open, one component at a time, never following a link (`None`: out of
/// reach). Opened for looking only (`O_PATH`): a folder's own mode does not stop it.
fn reach<'c, 'p>(
    root: &'c OwnedFd,
    chain: &'c mut Vec<(&'p [u8], OwnedFd)>,
    parents: &[&'p [u8]],
) -> Option<&'c OwnedFd> {
    let keep = (chain.iter().zip(parents))
        .take_while(|((held, _), want)| held == *want)
        .count();
    chain.truncate(keep);
    for comp in &parents[keep..] {
        if refused(comp) {
            return None;
        }
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let from = chain.last().map_or(root, |(_, fd)| fd);
        let next = rustix::fs::openat(from, *comp, flags, Mode::empty()).ok()?;
        chain.push((comp, next));
    }
    Some(chain.last().map_or(root, |(_, fd)| fd))
}

impl Restore {
    /// One stat of each recorded folder (and the root), before the sweep: the sweep's list of
    /// moved folders and the put-back's list of folders whose mode or presence is off both
    /// come from it. A folder a command made unreadable (chmod 000) is opened up on the way,
    /// before anything under it is looked at: the status walk would otherwise not see inside
    /// it. Its recorded mode is put back by `restore_dirs`.
    pub(super) fn first_look(&self) -> FirstLook {
        FirstLook {
            look: self.look(&vec![true; self.dirs.len()], true),
            distrusted: false,
        }
    }

    /// Stats the recorded folders `pick` names (by index), each once, relative to its
    /// parent's fd: from the root, through real folders only, parents before what is under
    /// them. With `open_up`, a folder lacking its owner's rwx that was not recorded so gets
    /// it before anything under it is stat'ed.
    fn look(&self, pick: &[bool], open_up: bool) -> Look {
        let moved = |st: &rustix::fs::Stat, was: (i64, i64)| -> bool {
            FileType::from_raw_mode(st.st_mode) == FileType::Directory
                && ((st.st_mtime, st.st_mtime_nsec as i64) != was || was.1 == 0)
        };
        let gone = Seen {
            moved: false,
            off: true,
        };
        let mut out = Look {
            root_moved: false,
            seen: vec![None; self.dirs.len()],
        };
        let mut order: Vec<usize> = (0..self.dirs.len())
            .filter(|i| pick.get(*i).copied().unwrap_or(false))
            .collect();
        let Ok(root) = open_root(&self.root) else {
            for i in order {
                out.seen[i] = Some(gone);
            }
            return out;
        };
        out.root_moved = rustix::fs::fstat(&root).is_ok_and(|st| moved(&st, self.root_mtime));
        order.sort_by(|a, b| {
            components(self.dirs[*a].path.as_bytes()).cmp(components(self.dirs[*b].path.as_bytes()))
        });
        let mut chain: Vec<(&[u8], OwnedFd)> = Vec::new();
        for i in order {
            let d = &self.dirs[i];
            let (parents, name) = split(d.path.as_bytes());
            if refused(name) || parents.iter().any(|c| refused(c)) {
                // Never a work-tree folder: left alone, neither read nor put back.
                out.seen[i] = Some(Seen {
                    moved: false,
                    off: false,
                });
                continue;
            }
            let Some(dir) = reach(&root, &mut chain, &parents) else {
                out.seen[i] = Some(gone);
                continue;
            };
            let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
                out.seen[i] = Some(gone);
                continue;
            };
            let is_dir = FileType::from_raw_mode(st.st_mode) == FileType::Directory;
            let mode = st.st_mode & 0o7777;
            if open_up && is_dir && mode != d.mode && mode & 0o700 != 0o700 {
                let wider = Mode::from_raw_mode(mode | 0o700);
                let _ = rustix::fs::chmodat(dir, name, wider, AtFlags::empty());
            }
            out.seen[i] = Some(Seen {
                moved: moved(&st, d.mtime),
                off: !(is_dir && mode == d.mode),
            });
        }
        out
    }

    /// The recorded folders to stat again after a put-back. Every other one the first look
    /// found as recorded, and nothing the restore did since can have changed it: the restore
    /// changes the tree only at the paths it lists as touched (a write or a removal there, a
    /// folder made or a link replaced on the way to it) and at folders the first look found
    /// moved (the sweep reads and clears only those, and new folders under them) or off
    /// (opened up, their modes put back, empty ones made again). So: those, the folders on
    /// the way to a touched path or to an off one, and every recorded folder at or under a
    /// touched path (a removal takes everything under it). All of them once the first look
    /// is distrusted.
    fn to_look_again(&self, first: &FirstLook, touched: &Touched) -> Vec<bool> {
        if first.distrusted {
            return vec![true; self.dirs.len()];
        }
        let off = (self.dirs.iter().zip(&first.look.seen))
            .filter(|(_, s)| s.is_some_and(|s| s.off))
            .map(|(d, _)| d.path.as_bytes());
        let way: HashSet<&[u8]> = (touched.paths.iter().map(Vec::as_slice))
            .chain(off)
            .flat_map(on_the_way)
            .collect();
        let under_touched = |path: &[u8]| {
            !touched.paths.is_empty()
                && (touched.paths.contains(path)
                    || on_the_way(path).any(|up| touched.paths.contains(up)))
        };
        (self.dirs.iter().zip(&first.look.seen))
            .map(|(d, seen)| {
                let path = d.path.as_bytes();
                seen.is_none_or(|s| s.moved || s.off) || way.contains(path) || under_touched(path)
            })
            .collect()
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
    /// ones that existed put back, modes as recorded. Only the folders the first look or the
    /// put-back since give reason to doubt are stat'ed again (see
    /// [`Restore::to_look_again`]).
    pub(super) fn restore_dirs(
        &self,
        repo: &Repository,
        known: &Known<'_>,
        first: &FirstLook,
        touched: &Touched,
        report: &mut Report,
    ) {
        // Removing folders a command created changes no recorded folder's mode: one stat of
        // each serves both steps.
        let look = self.look(&self.to_look_again(first, touched), false);
        let (moved, off) = (look.moved(&self.dirs), look.off(&self.dirs));
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

#[cfg(test)]
mod tests {
    use super::super::paths::{real_parents, remove_path};
    use super::{Known, Restore, Touched};
    use crate::git::restore::Report;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    fn git(root: &Path, args: &[&str]) {
        crate::git::test_repo::git(root, args);
    }

    use crate::git::test_repo::write;

    fn mode(root: &Path, rel: &str) -> Option<u32> {
        std::fs::symlink_metadata(root.join(rel))
            .ok()
            .filter(|m| m.is_dir())
            .map(|m| m.permissions().mode() & 0o7777)
    }

    fn chmod(root: &Path, rel: &str, mode: u32) {
        std::fs::set_permissions(root.join(rel), std::fs::Permissions::from_mode(mode))
            .expect("chmod");
    }

    /// A committed repo with `a/b/c.txt`, `a/d.txt`, `sub/f.txt` (`sub` 0750) and the empty
    /// folder `keep/empty` (0750), captured.
    fn captured(tmp: &Path) -> (git2::Repository, Restore) {
        let root = tmp.join("repo");
        std::fs::create_dir_all(&root).expect("mkdir");
        git(&root, &["init", "-q"]);
        write(&root, "a/b/c.txt", "c\n");
        write(&root, "a/d.txt", "d\n");
        write(&root, "sub/f.txt", "f\n");
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-q", "-m", "one"]);
        std::fs::create_dir_all(root.join("keep/empty")).expect("mkdir");
        chmod(&root, "keep/empty", 0o750);
        chmod(&root, "sub", 0o750);
        let repo = git2::Repository::open(&root).expect("open");
        let restore = Restore::capture(&repo, tmp.join("saved"), true, None).expect("capture");
        (repo, restore)
    }

    /// The recorded folders [`Restore::to_look_again`] names, by path.
    fn picked(restore: &Restore, first: &super::FirstLook, touched: &Touched) -> Vec<String> {
        let picks = restore.to_look_again(first, touched);
        (restore.dirs.iter().zip(picks))
            .filter(|(_, p)| *p)
            .map(|(d, _)| d.path.display())
            .collect()
    }

    fn put_back(
        repo: &git2::Repository,
        restore: &Restore,
        first: &super::FirstLook,
        touched: &Touched,
    ) {
        let known: Known<'_> = restore
            .dirs
            .iter()
            .map(|d| (d.path.as_bytes(), d))
            .collect();
        let mut report = Report::default();
        restore.restore_dirs(repo, &known, first, touched, &mut report);
        assert!(report.failed.is_empty(), "{:?}", report.failed);
    }

    /// After the put-back only what it touched is stat'ed again: a recorded folder under a
    /// path it removed is made again (with its mode), one it made again on the way to a file
    /// it checked out gets its recorded mode back, and a folder nothing gave reason to doubt
    /// is not looked at.
    #[test]
    fn folders_the_put_back_removed_or_made_again_are_looked_at_again() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (repo, restore) = captured(tmp.path());
        let root = restore.root.clone();
        let first = restore.first_look();
        let whole_seconds = restore.dirs.iter().any(|d| d.mtime.1 == 0);
        if !whole_seconds {
            assert!(
                picked(&restore, &first, &Touched::default()).is_empty(),
                "nothing changed, nothing is stat'ed again"
            );
        }
        // The restore's own work: an untracked path removed (a recorded empty folder under
        // it), a tracked file checked out again into a folder it had to make.
        remove_path(&root, b"keep").expect("remove");
        remove_path(&root, b"sub").expect("remove");
        real_parents(&root, b"sub/f.txt").expect("parents");
        std::fs::write(root.join("sub/f.txt"), "f\n").expect("write");
        chmod(&root, "sub", 0o755);
        let mut touched = Touched::default();
        touched.add(b"keep");
        touched.add(b"sub/f.txt");
        let again = picked(&restore, &first, &touched);
        for want in ["keep", "keep/empty", "sub"] {
            assert!(again.iter().any(|p| p == want), "{want} in {again:?}");
        }
        if !whole_seconds {
            assert!(!again.iter().any(|p| p.starts_with('a')), "{again:?}");
        }
        put_back(&repo, &restore, &first, &touched);
        assert_eq!(mode(&root, "keep/empty"), Some(0o750));
        assert_eq!(mode(&root, "sub"), Some(0o750));
        assert!(root.join("sub/f.txt").is_file());
    }

    /// What commands did to folders is still found by the one first look: a chmod 000 is
    /// opened up before anything under it is stat'ed (so a changed mode below it is seen),
    /// every mode is put back and a removed empty folder made again, with nothing touched by
    /// the put-back itself; once the first look is distrusted every folder is stat'ed again.
    #[test]
    fn folders_a_command_changed_are_put_back() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (repo, restore) = captured(tmp.path());
        let root = restore.root.clone();
        let was_a = mode(&root, "a").expect("a");
        let was_b = mode(&root, "a/b").expect("a/b");
        chmod(&root, "a/b", 0o700);
        chmod(&root, "a", 0o000);
        std::fs::remove_dir(root.join("keep/empty")).expect("rmdir");
        let mut first = restore.first_look();
        assert!(std::fs::read_dir(root.join("a")).is_ok(), "opened up");
        let off = first.look.off(&restore.dirs);
        let off: Vec<String> = off.iter().map(|d| d.path.display()).collect();
        assert_eq!(off, ["a", "a/b", "keep/empty"]);
        put_back(&repo, &restore, &first, &Touched::default());
        assert_eq!(mode(&root, "a"), Some(was_a));
        assert_eq!(mode(&root, "a/b"), Some(was_b));
        assert_eq!(mode(&root, "keep/empty"), Some(0o750));
        first.distrust();
        assert_eq!(
            picked(&restore, &first, &Touched::default()).len(),
            restore.dirs.len()
        );
    }
}
