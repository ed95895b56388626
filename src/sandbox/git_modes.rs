//! The modes of everything in a git dir under Landlock, known across a process's confined
//! commands. Landlock has no right for modes, so a check may `chmod 0` a loose object, a pack
//! or a ref and leave the repository unreadable to its user. Noting every entry with a `stat`
//! before and after each command cost two walks of the git dir per command (32,000 `stat`s
//! a failed attempt in a repo of 16,000 loose objects). Instead each git dir is walked once
//! per process, and an inotify watch on each of its folders names what changed since: a
//! changed mode of an entry already noted is put back, an entry that is new (the harness's
//! own objects, refs and index, which a confined command cannot create there) is noted as
//! found. When the kernel's event queue overflowed, or a folder cannot be watched, every
//! entry is compared again, as before.

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What a settle found: entries whose mode was put back, and why others could not be.
#[derive(Debug, Default)]
pub struct Settled {
    pub restored: Vec<PathBuf>,
    pub failed: Vec<String>,
}

/// One git dir's noted modes and the watches that say what changed.
struct Watched {
    dir: PathBuf,
    /// The harness's own folder, noted one level deep only (see `modes.rs`).
    skip: PathBuf,
    inotify: OwnedFd,
    folders: HashMap<i32, PathBuf>,
    noted: HashMap<PathBuf, Mode>,
    /// A folder could not be watched: every settle compares every entry.
    blind: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mode {
    dev: u64,
    ino: u64,
    mode: u32,
}

static WATCHED: Mutex<Vec<Watched>> = Mutex::new(Vec::new());

/// Puts back every mode in git dir `dir` (all of it but `skip`'s insides) that changed since
/// it was last settled, and notes entries made since; the first call walks and watches it.
/// `None` when inotify is not there to use: the caller walks as before.
pub fn settle(dir: &Path, skip: &Path) -> Option<Settled> {
    let mut all = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(w) = all.iter_mut().find(|w| w.dir == dir && w.skip == skip) {
        return Some(w.settle());
    }
    let inotify = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()?;
    let mut w = Watched {
        dir: dir.to_path_buf(),
        skip: skip.to_path_buf(),
        inotify,
        folders: HashMap::new(),
        noted: HashMap::new(),
        blind: false,
    };
    w.take_in(dir);
    all.push(w);
    Some(Settled::default())
}

impl Watched {
    /// Watches folder `path` (the git dir or one below it) and notes it and what is below.
    fn take_in(&mut self, path: &Path) {
        let flags = WatchFlags::ATTRIB
            | WatchFlags::CREATE
            | WatchFlags::MOVED_TO
            | WatchFlags::DONT_FOLLOW
            | WatchFlags::ONLYDIR
            | WatchFlags::EXCL_UNLINK;
        // The watch before the listing: an entry made in between is then in one or the other.
        match inotify::add_watch(&self.inotify, path, flags) {
            Ok(wd) => {
                self.folders.insert(wd, path.to_path_buf());
            }
            Err(_) => self.blind = true,
        }
        self.note(path);
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        for entry in entries.flatten() {
            let inner = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) && self.goes_into(&inner) {
                self.take_in(&inner);
                continue;
            }
            // Stat'ed through the listing's folder (no walk of the whole path per entry).
            match entry.metadata().ok().and_then(|m| mode_from(&m)) {
                Some(m) => {
                    self.noted.insert(inner, m);
                }
                None => {
                    self.noted.remove(&inner);
                }
            }
        }
    }

    /// Whether folder `path` is watched with what is in it: all but what lies below the
    /// harness's own folder's first level (the folder itself is watched for its entries).
    fn goes_into(&self, path: &Path) -> bool {
        path.parent() != Some(self.skip.as_path())
    }

    /// Notes `path`'s mode as it is now (a link's own mode means nothing: not noted).
    fn note(&mut self, path: &Path) {
        match mode_of(path) {
            Some(m) => {
                self.noted.insert(path.to_path_buf(), m);
            }
            None => {
                self.noted.remove(path);
            }
        }
    }

    fn settle(&mut self) -> Settled {
        let mut out = Settled::default();
        let mut changed: Vec<PathBuf> = Vec::new();
        let mut overflowed = self.blind;
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
        let mut reader = inotify::Reader::new(&self.inotify, &mut buf);
        let mut gone = Vec::new();
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::AGAIN) => break, // nothing more queued
                Err(_) => {
                    overflowed = true; // unreadable: compare every entry
                    break;
                }
            };
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                overflowed = true;
                continue;
            }
            if flags.contains(ReadFlags::IGNORED) {
                gone.push(event.wd());
                continue;
            }
            let Some(folder) = self.folders.get(&event.wd()) else {
                continue;
            };
            changed.push(match event.file_name() {
                Some(name) => folder.join(OsStr::from_bytes(name.to_bytes())),
                None => folder.clone(),
            });
        }
        for wd in gone {
            self.folders.remove(&wd);
        }
        if overflowed {
            changed = self.noted.keys().cloned().collect();
        }
        changed.sort();
        changed.dedup();
        for path in changed {
            self.settle_one(&path, &mut out);
        }
        if overflowed {
            // Folders made while events were lost: watched and noted now.
            let dir = self.dir.clone();
            self.take_in_new(&dir);
        }
        out
    }

    /// `path` changed: a noted entry whose mode moved gets it back; anything else (a new
    /// file, a new folder with what is in it, a file replaced by rename) is noted as found.
    fn settle_one(&mut self, path: &Path, out: &mut Settled) {
        let Some(now) = mode_of(path) else {
            self.noted.remove(path);
            return;
        };
        match self.noted.get(path) {
            Some(was) if was.dev == now.dev && was.ino == now.ino => {
                if was.mode != now.mode {
                    let perms = std::fs::Permissions::from_mode(was.mode);
                    match std::fs::set_permissions(path, perms) {
                        Ok(()) => out.restored.push(path.to_path_buf()),
                        Err(e) => out
                            .failed
                            .push(format!("the mode of {}: {e}", path.display())),
                    }
                }
            }
            _ => {
                let is_dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
                if is_dir && self.goes_into(path) && !self.is_watched(path) {
                    self.take_in(path);
                } else {
                    self.noted.insert(path.to_path_buf(), now);
                }
            }
        }
    }

    fn is_watched(&self, path: &Path) -> bool {
        self.folders.values().any(|f| f == path)
    }

    /// After lost events: every folder below `path` not watched yet is taken in.
    fn take_in_new(&mut self, path: &Path) {
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        for entry in entries.flatten() {
            let inner = entry.path();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) || !self.goes_into(&inner) {
                continue;
            }
            if self.is_watched(&inner) {
                self.take_in_new(&inner);
            } else {
                self.take_in(&inner);
            }
        }
    }
}

fn mode_of(path: &Path) -> Option<Mode> {
    mode_from(&std::fs::symlink_metadata(path).ok()?)
}

/// A link's own mode means nothing: none.
fn mode_from(m: &std::fs::Metadata) -> Option<Mode> {
    (!m.file_type().is_symlink()).then(|| Mode {
        dev: m.dev(),
        ino: m.ino(),
        mode: m.mode() & 0o7777,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(p: &Path, m: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod");
    }

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).expect("stat").mode() & 0o7777
    }

    #[test]
    fn a_mode_changed_between_settles_is_put_back_and_new_entries_are_noted() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let git = tmp.path().join(".git");
        let objects = git.join("objects/ab");
        std::fs::create_dir_all(&objects).expect("mkdir");
        std::fs::create_dir_all(git.join("factory/deep/inner")).expect("mkdir");
        let object = objects.join("cdef");
        std::fs::write(&object, "x").expect("write");
        set(&object, 0o444);
        let skip = git.join("factory");
        let first = settle(&git, &skip).expect("inotify");
        assert!(first.restored.is_empty());

        // A command's chmods, of a file and of a folder.
        set(&object, 0o000);
        set(&objects, 0o000);
        let done = settle(&git, &skip).expect("inotify");
        assert_eq!(mode(&object), 0o444);
        assert_eq!(mode(&objects), 0o755 & mode(&git));
        assert_eq!(done.restored.len(), 2, "{:?}", done.restored);

        // The harness's own new object and folder are noted as made, then guarded too.
        let made = git.join("objects/cd");
        std::fs::create_dir(&made).expect("mkdir");
        std::fs::write(made.join("0123"), "y").expect("write");
        set(&made.join("0123"), 0o444);
        assert!(settle(&git, &skip).expect("inotify").restored.is_empty());
        set(&made.join("0123"), 0o600);
        let done = settle(&git, &skip).expect("inotify");
        assert_eq!(done.restored, [made.join("0123")]);
        assert_eq!(mode(&made.join("0123")), 0o444);

        // The harness's own folder: its first level guarded, what lies below it not.
        set(&git.join("factory/deep"), 0o700);
        set(&git.join("factory/deep/inner"), 0o700);
        let done = settle(&git, &skip).expect("inotify");
        assert_eq!(done.restored, [git.join("factory/deep")]);
    }

    /// More changes than the kernel queues (16,384 events by default): every entry is
    /// compared, so none is missed.
    #[test]
    fn a_queue_that_overflowed_is_settled_by_comparing_every_entry() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let git = tmp.path().join(".git");
        let objects = git.join("objects/ab");
        std::fs::create_dir_all(&objects).expect("mkdir");
        let files: Vec<PathBuf> = (0..17_000)
            .map(|i| objects.join(format!("{i:038}")))
            .collect();
        for f in &files {
            std::fs::write(f, "").expect("write");
            set(f, 0o444);
        }
        let skip = git.join("factory");
        settle(&git, &skip).expect("inotify");
        for f in &files {
            set(f, 0o000);
        }
        let done = settle(&git, &skip).expect("inotify");
        assert_eq!(done.restored.len(), files.len());
        assert!(files.iter().all(|f| mode(f) == 0o444));
    }
}
