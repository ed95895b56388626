//! Python in the work tree: bytecode a command left beside the sources goes (a forgery there
//! would run in the user's next `python`), and the environments a sandboxed check must not
//! write are found.

use super::facts::{RelPath, Restore};
use super::paths::{open_parent, remove_at, split};
use super::report::Report;
use rustix::fs::{AtFlags, Mode, OFlags};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// Bytecode where the user's own Python looks for it (`__pycache__/`, or a sourceless
/// `mod.pyc` it imports as a module). Checks compile into the harness's cache instead
/// (SPEC §3.7), so what a command wrote here is a check that cleared the prefix — or one
/// that forged it: Python trusts an entry by its header's source size and mtime alone, so a
/// forgery left behind would run in the user's next `python` after the run had put the
/// sources back. Ignored files are otherwise kept (SPEC §5), but these are a cache: removed,
/// Python compiles them again.
pub(super) fn is_bytecode(name: &[u8]) -> bool {
    name == b"__pycache__" || name.ends_with(b".pyc")
}

impl Restore {
    /// The Python environments in the work tree: a folder holding `pyvenv.cfg` or
    /// `conda-meta/`, at most three folders below a git-ignored one (`.venv`, `envs/py311`,
    /// `.envs/3.11/py311`): what the user's own `python` and the checks' run from. The restore
    /// keeps ignored files (SPEC §5), so a sandboxed check must not write there at all: a
    /// `.pth`, a `sitecustomize` or bytecode planted in `site-packages` would run in every
    /// later interpreter of that environment. The search reads at most 4,096 folders (an
    /// ignored `node_modules` is not read to its end) and never follows a link.
    pub fn environments(&self) -> Vec<PathBuf> {
        const DEPTH: usize = 3;
        const FOLDERS: usize = 4096;
        let is_env =
            |dir: &Path| dir.join("pyvenv.cfg").is_file() || dir.join("conda-meta").is_dir();
        let mut out = Vec::new();
        let mut queue: std::collections::VecDeque<(PathBuf, usize)> = (self.kept.iter())
            .map(|k| (self.root.join(k.path.path()), 0))
            .filter(|(dir, _)| std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()))
            .collect();
        let mut read = 0;
        while let Some((dir, depth)) = queue.pop_front() {
            if is_env(&dir) {
                out.push(dir);
                continue;
            }
            if depth == DEPTH || read == FOLDERS {
                continue;
            }
            read += 1;
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    queue.push_back((entry.path(), depth + 1));
                }
            }
        }
        out.sort();
        out
    }

    /// Bytecode the user had beside their sources (recorded ignored entries) that changed
    /// since capture: rewritten in place, which moves no folder's time, so each entry is
    /// looked at (a rename or a link into the folder moves the entry's own change time too).
    /// A `__pycache__` that is no longer the recorded folder (a link or a folder in its
    /// place; the sweep moved a renamed original back) or that no one can read goes whole.
    /// New bytecode was removed by the sweep.
    pub(super) fn drop_kept_bytecode(&self, report: &mut Report) {
        let Some(since) = self.since else {
            return;
        };
        let changed = |st: &rustix::fs::Stat| (st.st_ctime, st.st_ctime_nsec as i64) >= since;
        let drop = |dir: &OwnedFd, name: &[u8], shown: String, report: &mut Report| match remove_at(
            dir, name,
        ) {
            Ok(()) => report.bytecode.push(shown),
            Err(e) => report.failed.push(format!("{shown}: {e}")),
        };
        let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
        for k in &self.kept {
            let (parents, name) = split(k.path.as_bytes());
            if !is_bytecode(name) {
                continue;
            }
            let Ok(Some(dir)) = open_parent(&self.root, &parents, false) else {
                continue;
            };
            let Ok(st) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            let is_dir =
                rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory;
            if !is_dir {
                if changed(&st) || (k.ino != 0 && st.st_ino != k.ino) {
                    drop(&dir, name, k.path.display(), report);
                }
                continue;
            }
            let recorded = k.ino == 0 || st.st_ino == k.ino;
            let listing = recorded
                .then(|| rustix::fs::openat(&dir, name, flags, Mode::empty()).ok())
                .flatten()
                .and_then(|sub| Some((rustix::fs::Dir::read_from(&sub).ok()?, sub)));
            let Some((listing, sub)) = listing else {
                drop(&dir, name, k.path.display(), report);
                continue;
            };
            let names: Vec<Vec<u8>> = listing
                .flatten()
                .map(|e| e.file_name().to_bytes().to_vec())
                .filter(|n| n != b"." && n != b"..")
                .collect();
            for n in names {
                if rustix::fs::statat(&sub, n.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| changed(&st))
                {
                    let shown = RelPath::from_bytes(&[k.path.as_bytes(), b"/", &n].concat());
                    drop(&sub, &n, shown.display(), report);
                }
            }
        }
    }
}

/// The change time the kernel gives a file at `mark` now: the clock files get theirs from,
/// which no process can set, and which may move only every few milliseconds (so the wall
/// clock would not do). The mark of an earlier call that is still git-factory's own plain
/// file (one name, not a link) has its change time moved to now by a chmod — no file is made
/// per mark; anything else there is replaced by a new file, never written through.
pub(crate) fn change_time_now(mark: &Path) -> Option<(i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::fs::PermissionsExt;
    let own = crate::git::nofollow::open_own(mark, OFlags::RDONLY);
    if let Some(file) = own {
        // A chmod moves the change time to now; no new file is made.
        if file
            .set_permissions(std::fs::Permissions::from_mode(0o600))
            .is_ok()
        {
            if let Ok(meta) = file.metadata() {
                return Some((meta.ctime(), meta.ctime_nsec()));
            }
        }
    }
    let _ = crate::git::nofollow::replace_own(mark);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(mark)
        .ok()?;
    let meta = file.metadata().ok()?;
    Some((meta.ctime(), meta.ctime_nsec()))
}

#[cfg(test)]
mod tests {
    use super::change_time_now;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_mark_is_made_once_and_moved_never_through_a_link() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mark = tmp.path().join(".mark");
        let first = change_time_now(&mark).expect("made");
        let ino = std::fs::metadata(&mark).expect("meta").ino();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = change_time_now(&mark).expect("moved");
        assert!(second > first, "{first:?} {second:?}");
        assert_eq!(
            std::fs::metadata(&mark).expect("meta").ino(),
            ino,
            "the same file"
        );
        // A second name for the mark (a hard link to a file of the user's) is not chmod'ed:
        // the mark is replaced.
        let theirs = tmp.path().join("theirs");
        std::fs::write(&theirs, "x").expect("write");
        std::fs::set_permissions(&theirs, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .expect("chmod");
        std::fs::remove_file(&mark).expect("rm");
        std::fs::hard_link(&theirs, &mark).expect("link");
        assert!(change_time_now(&mark).is_some());
        let meta = std::fs::metadata(&theirs).expect("meta");
        assert_eq!(meta.mode() & 0o7777, 0o644);
        assert_eq!(meta.nlink(), 1, "the mark is a file of its own again");
        // A symbolic link is replaced, not followed.
        std::fs::remove_file(&mark).expect("rm");
        std::os::unix::fs::symlink(&theirs, &mark).expect("symlink");
        assert!(change_time_now(&mark).is_some());
        assert!(!std::fs::symlink_metadata(&mark)
            .expect("meta")
            .file_type()
            .is_symlink());
        assert_eq!(
            std::fs::metadata(&theirs).expect("meta").mode() & 0o7777,
            0o644
        );
    }
}
