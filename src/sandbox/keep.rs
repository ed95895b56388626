//! The user's pre-existing ignored files inside a tree a confined command may write (SPEC
//! §7.1): each backend makes them read-only as far as it can, and under both every such file
//! and link is also saved before the command — into the run's own state on disk, fsynced, so
//! `recover` has the copies after a `kill -9` — and after the command, and again after the
//! attempt's tree restore, compared with what it was and put back if the command changed,
//! removed or replaced it. One mechanism for both backends: whatever a backend could not stop
//! (a folder renamed away with its read-only mounts, a file written through another name of
//! its inode) is found and undone here.
//!
//! Putting back never follows a link: the way from the tree's root is opened folder by folder
//! with `O_NOFOLLOW`, so a link a command planted on the way stops the put back (which is then
//! named) instead of steering it out of the tree; a later pass, after the tree restore has
//! removed that link, puts the file back. A file whose inode is still the saved one is
//! rewritten in place, so every other name of a hard-linked file gets its bytes back too.

use super::Policy;
use crate::git::nofollow;
use crate::git::restore::RelPath;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Files bigger than this are not copied; the backends keep them read-only whole instead
/// (Landlock carves their folder around them).
pub const CAP: u64 = 16 << 20;

/// The manifest's name in a store's folder.
const MANIFEST: &str = "manifest.json";

/// `p` with its folder resolved and its last component as it is: a link stays the link.
pub fn real_entry(p: &Path) -> PathBuf {
    match (p.parent(), p.file_name()) {
        (Some(dir), Some(name)) => dir
            .canonicalize()
            .map(|d| d.join(name))
            .unwrap_or_else(|_| p.to_path_buf()),
        _ => p.to_path_buf(),
    }
}

/// What is saved for `policy`: every read-only file or link inside a writable folder (with
/// that folder, which is the root put backs are walked from). Folders, devices and files over
/// [`CAP`] are left to the backends.
pub fn wanted(policy: &Policy) -> Vec<(PathBuf, PathBuf)> {
    let writable: Vec<PathBuf> = (policy.writable.iter())
        .map(|w| w.canonicalize().unwrap_or_else(|_| w.clone()))
        .collect();
    let mut out = Vec::new();
    for r in policy.read_only.iter().map(|p| real_entry(p)) {
        let Some(w) = writable.iter().find(|w| r != **w && r.starts_with(w)) else {
            continue;
        };
        match std::fs::symlink_metadata(&r) {
            Ok(m) if m.file_type().is_symlink() || (m.is_file() && m.len() <= CAP) => {
                out.push((w.clone(), r))
            }
            _ => {}
        }
    }
    out
}

/// What changes whenever a file is written, replaced or linked anew: its identity, its change
/// time (which no process can set) and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    dev: u64,
    ino: u64,
    ctime: (i64, i64),
    size: u64,
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            ctime: (m.ctime(), m.ctime_nsec()),
            size: m.len(),
        }
    }
}

/// One saved entry: where it is, what it was, and the file in the store holding its bytes
/// (a link's target).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    root: RelPath,
    path: RelPath,
    link: bool,
    mode: u32,
    /// Names of its inode when saved: more than one means a write through another name
    /// changes it too.
    nlink: u64,
    copy: String,
    stamp: Stamp,
}

impl Entry {
    fn root(&self) -> &Path {
        Path::new(std::ffi::OsStr::from_bytes(self.root.as_bytes()))
    }

    fn full(&self) -> PathBuf {
        self.root()
            .join(std::ffi::OsStr::from_bytes(self.path.as_bytes()))
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    entries: Vec<Entry>,
}

/// Where the saved copies live: the run's own state (`saved-<run_id>/kept/` beside its
/// journal), or a temporary folder that goes with the command.
pub struct Store {
    dir: PathBuf,
    _temporary: Option<tempfile::TempDir>,
}

/// What a put back did: the entries put back (as `root`-relative paths, shown) and those
/// that could not be, each with why.
#[derive(Debug, Default)]
pub struct PutBack {
    pub restored: Vec<PathBuf>,
    pub failed: Vec<String>,
}

impl Store {
    /// The store of a run, in `dir` (made on the first save).
    pub fn at(dir: PathBuf) -> Store {
        Store {
            dir,
            _temporary: None,
        }
    }

    /// A store for one command, removed with it (named by this process, so what a killed
    /// harness left is swept by the next, see `leftovers.rs`).
    pub fn temporary() -> std::io::Result<Store> {
        let tmp = tempfile::Builder::new()
            .prefix(&super::leftovers::prefix(super::leftovers::KEPT))
            .tempdir()?;
        Ok(Store {
            dir: tmp.path().to_path_buf(),
            _temporary: Some(tmp),
        })
    }

    fn read(&self) -> std::io::Result<Manifest> {
        match std::fs::read(self.dir.join(MANIFEST)) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(std::io::Error::other),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Manifest::default()),
            Err(e) => Err(e),
        }
    }

    /// Whether the copies must survive this process (a run's store) and so are fsynced.
    fn durable(&self) -> bool {
        self._temporary.is_none()
    }

    /// Writes a file of the store, readable by its owner only (the copies are the user's
    /// secrets), fsynced when the store is durable.
    fn file(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?;
        f.write_all(bytes)?;
        if self.durable() {
            f.sync_all()?;
        }
        Ok(())
    }

    /// Writes the manifest: a temporary file renamed into place, the file and the folder
    /// fsynced when the store is durable.
    fn write(&self, m: &Manifest) -> std::io::Result<()> {
        let text = serde_json::to_vec_pretty(m).map_err(std::io::Error::other)?;
        let tmp = self.dir.join("manifest.json.tmp");
        self.file(&tmp, &text)?;
        std::fs::rename(&tmp, self.dir.join(MANIFEST))?;
        if self.durable() {
            std::fs::File::open(&self.dir)?.sync_all()?;
        }
        Ok(())
    }

    /// Saves each of `wanted` (see [`wanted`]) not saved yet: its bytes copied into the store
    /// (fsynced, in a run's store) before the manifest naming them is written. An entry gone
    /// already is skipped. An entry saved before is never saved anew: what is there now may
    /// be a command's, waiting for the tree restore's put back (the harness itself never
    /// writes one: a change to an ignored file is out of scope).
    pub fn save(&self, wanted: &[(PathBuf, PathBuf)]) -> std::io::Result<()> {
        if wanted.is_empty() {
            return Ok(());
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let mut m = self.read()?;
        let before = m.entries.len();
        for (root, full) in wanted {
            let Ok(rel) = full.strip_prefix(root) else {
                continue;
            };
            let rel = RelPath::from_bytes(rel.as_os_str().as_bytes());
            let root = RelPath::from_bytes(root.as_os_str().as_bytes());
            if m.entries.iter().any(|e| e.root == root && e.path == rel) {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(full) else {
                continue;
            };
            let link = meta.file_type().is_symlink();
            let bytes = if link {
                std::os::unix::ffi::OsStringExt::into_vec(
                    std::fs::read_link(full)?.into_os_string(),
                )
            } else {
                std::fs::read(full)?
            };
            let copy = format!("k{}", m.entries.len());
            self.file(&self.dir.join(&copy), &bytes)?;
            m.entries.push(Entry {
                root,
                path: rel,
                link,
                mode: meta.mode() & 0o7777,
                nlink: meta.nlink(),
                copy,
                stamp: Stamp::of(&meta),
            });
        }
        if m.entries.len() != before {
            self.write(&m)?;
        }
        Ok(())
    }

    /// Compares every saved entry with what is there now and puts back each one a command
    /// changed, removed or replaced. An entry whose stamp moved but whose bytes, kind and
    /// mode are the saved ones (a rename there and back) is only stamped anew.
    pub fn put_back(&self) -> PutBack {
        let mut out = PutBack::default();
        let mut m = match self.read() {
            Ok(m) => m,
            Err(e) => {
                out.failed.push(format!(
                    "{}: the saved ignored files cannot be read: {e}",
                    self.dir.display()
                ));
                return out;
            }
        };
        let mut moved = false;
        for e in &mut m.entries {
            let now = std::fs::symlink_metadata(e.full()).ok();
            if now.as_ref().is_some_and(|n| Stamp::of(n) == e.stamp) {
                continue;
            }
            let saved = match std::fs::read(self.dir.join(&e.copy)) {
                Ok(b) => b,
                Err(err) => {
                    out.failed.push(format!(
                        "{}: its saved copy is gone: {err}",
                        e.path.display()
                    ));
                    continue;
                }
            };
            if !now.as_ref().is_some_and(|n| holds(e, n, &saved)) {
                match put(e, &saved) {
                    Ok(()) => out.restored.push(PathBuf::from(std::ffi::OsStr::from_bytes(
                        e.path.as_bytes(),
                    ))),
                    Err(err) => {
                        out.failed.push(format!("{}: {err}", e.path.display()));
                        continue;
                    }
                }
            }
            if let Ok(n) = std::fs::symlink_metadata(e.full()) {
                e.stamp = Stamp::of(&n);
                moved = true;
            }
        }
        if moved {
            if let Err(err) = self.write(&m) {
                out.failed
                    .push(format!("{}: {err}", self.dir.join(MANIFEST).display()));
            }
        }
        out
    }
}

/// Whether the entry as it is now (`now`) holds what was saved.
fn holds(e: &Entry, now: &std::fs::Metadata, saved: &[u8]) -> bool {
    if e.link {
        return now.file_type().is_symlink()
            && std::fs::read_link(e.full()).is_ok_and(|t| t.as_os_str().as_bytes() == saved);
    }
    now.is_file()
        && now.mode() & 0o7777 == e.mode
        && now.len() == saved.len() as u64
        && std::fs::read(e.full()).is_ok_and(|b| b == saved)
}

/// The folder holding `rel` under `root`, opened one folder at a time without following a
/// link; the error names the first component that is a link or not a folder.
fn open_parent(root: &Path, rel: &[u8]) -> std::io::Result<OwnedFd> {
    let mut fd = nofollow::open_root(root)?;
    let parts: Vec<&[u8]> = rel
        .split(|b| *b == b'/')
        .filter(|p| !p.is_empty())
        .collect();
    let Some((_, folders)) = parts.split_last() else {
        return Err(std::io::Error::other("an empty path"));
    };
    let mut shown: Vec<u8> = Vec::new();
    for comp in folders {
        if !shown.is_empty() {
            shown.push(b'/');
        }
        shown.extend_from_slice(comp);
        fd = nofollow::open_dir_at(&fd, comp, false, &shown)?;
    }
    Ok(fd)
}

/// Puts one entry back as saved, never through a link.
fn put(e: &Entry, saved: &[u8]) -> std::io::Result<()> {
    use rustix::fs::{AtFlags, Mode, OFlags};
    let rel = e.path.as_bytes();
    let name = rel.rsplit(|b| *b == b'/').next().unwrap_or(rel);
    let dir = open_parent(e.root(), rel)?;
    let now = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).ok();
    let kind = now
        .as_ref()
        .map(|s| rustix::fs::FileType::from_raw_mode(s.st_mode));
    if !e.link
        && kind == Some(rustix::fs::FileType::RegularFile)
        && now
            .as_ref()
            .is_some_and(|s| s.st_dev == e.stamp.dev && s.st_ino == e.stamp.ino)
    {
        // The same inode: rewritten in place, so its other names (a hard link inside the
        // tree or outside it) hold the saved bytes again too.
        let fd = rustix::fs::openat(
            &dir,
            name,
            OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::TRUNC,
            Mode::empty(),
        )?;
        let mut f = std::fs::File::from(fd);
        f.write_all(saved)?;
        rustix::fs::fchmod(&f, Mode::from_raw_mode(e.mode))?;
        return f.sync_all();
    }
    if kind == Some(rustix::fs::FileType::Directory) {
        // A folder the command made in its place: removed with what it holds.
        remove_folder_at(&dir, name, 0)?;
    }
    if e.link {
        match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(err) => return Err(err.into()),
        }
        return nofollow::symlink_at(&dir, name, saved);
    }
    // A new file renamed into place: whatever is there (a link, another file) is replaced,
    // never written through.
    let tmp: Vec<u8> = [b".", name, b".factory-kept"].concat();
    let _ = rustix::fs::unlinkat(&dir, tmp.as_slice(), AtFlags::empty());
    let written = nofollow::create_file_at(&dir, &tmp, saved, e.mode)
        .and_then(|()| Ok(rustix::fs::renameat(&dir, tmp.as_slice(), &dir, name)?));
    if written.is_err() {
        let _ = rustix::fs::unlinkat(&dir, tmp.as_slice(), AtFlags::empty());
    }
    written
}

/// Removes the folder `name` in `dir` and everything in it, never following a link (a link
/// inside is removed as itself). `depth` bounds the walk.
fn remove_folder_at(dir: &OwnedFd, name: &[u8], depth: usize) -> std::io::Result<()> {
    use rustix::fs::{AtFlags, FileType};
    if depth > 256 {
        return Err(std::io::Error::other("folders nested too deep to remove"));
    }
    let inner = nofollow::open_dir_at(dir, name, false, name)?;
    let listing: Vec<(Vec<u8>, FileType)> = rustix::fs::Dir::read_from(&inner)?
        .flatten()
        .map(|e| (e.file_name().to_bytes().to_vec(), e.file_type()))
        .filter(|(n, _)| n != b"." && n != b"..")
        .collect();
    for (entry, kind) in listing {
        if kind == FileType::Directory {
            remove_folder_at(&inner, &entry, depth + 1)?;
        } else {
            rustix::fs::unlinkat(&inner, entry.as_slice(), AtFlags::empty())?;
        }
    }
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf, Store) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().canonicalize().expect("real").join("tree");
        std::fs::create_dir_all(root.join("a/b")).expect("mkdir");
        let store = Store::at(tmp.path().join("store"));
        (tmp, root, store)
    }

    #[test]
    fn a_changed_removed_or_relinked_entry_is_put_back_by_its_bytes() {
        let (_tmp, root, store) = setup();
        let name = std::ffi::OsStr::from_bytes(b"caf\xe9.env");
        std::fs::write(root.join(name), "SECRET").expect("write");
        std::os::unix::fs::symlink("/nowhere/x", root.join("a/link")).expect("link");
        let wanted = vec![
            (root.clone(), root.join(name)),
            (root.clone(), root.join("a/link")),
        ];
        store.save(&wanted).expect("saved");
        assert!(store.put_back().restored.is_empty(), "nothing changed");
        std::fs::write(root.join(name), "pwned").expect("write");
        std::fs::remove_file(root.join("a/link")).expect("rm");
        std::fs::create_dir_all(root.join("a/link/deep")).expect("a folder in its place");
        std::fs::write(root.join("a/link/deep/f"), "f").expect("write");
        std::os::unix::fs::symlink("/", root.join("a/link/deep/up")).expect("link");
        let done = store.put_back();
        assert!(done.failed.is_empty(), "{:?}", done.failed);
        assert_eq!(done.restored.len(), 2);
        assert_eq!(std::fs::read(root.join(name)).expect("read"), b"SECRET");
        assert_eq!(
            std::fs::read_link(root.join("a/link")).expect("link"),
            PathBuf::from("/nowhere/x")
        );
        // A second store read from disk (a new process) sees them as saved.
        assert!(Store::at(store.dir.clone()).put_back().restored.is_empty());
    }

    #[test]
    fn a_put_back_never_goes_through_a_planted_link_and_a_later_one_succeeds() {
        let (tmp, root, store) = setup();
        std::fs::write(root.join("a/b/.env"), "SECRET").expect("write");
        store
            .save(&[(root.clone(), root.join("a/b/.env"))])
            .expect("saved");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::rename(root.join("a/b"), root.join("a/c")).expect("mv");
        std::os::unix::fs::symlink(&outside, root.join("a/b")).expect("link");
        let done = store.put_back();
        assert_eq!(done.failed.len(), 1, "{done:?}");
        assert_eq!(std::fs::read_dir(&outside).expect("ls").count(), 0);
        // The tree restore removes the link and puts the folder back; then it goes back.
        std::fs::remove_file(root.join("a/b")).expect("rm");
        std::fs::create_dir(root.join("a/b")).expect("mkdir");
        let done = store.put_back();
        assert!(done.failed.is_empty(), "{done:?}");
        assert_eq!(
            std::fs::read(root.join("a/b/.env")).expect("read"),
            b"SECRET"
        );
    }

    #[test]
    fn a_later_save_never_takes_what_a_command_left() {
        let (_tmp, root, store) = setup();
        let wanted = vec![(root.clone(), root.join("a/b/.env"))];
        std::fs::write(root.join("a/b/.env"), "SECRET").expect("write");
        store.save(&wanted).expect("saved");
        std::fs::write(root.join("a/b/.env"), "the command's").expect("write");
        store.save(&wanted).expect("saved again");
        assert_eq!(store.put_back().restored.len(), 1);
        assert_eq!(
            std::fs::read(root.join("a/b/.env")).expect("read"),
            b"SECRET"
        );
    }

    #[test]
    fn a_hard_linked_file_is_rewritten_in_place_so_its_other_name_is_too() {
        let (tmp, root, store) = setup();
        let other = tmp.path().join("other.env");
        std::fs::write(&other, "SECRET").expect("write");
        std::fs::hard_link(&other, root.join(".env")).expect("link");
        store
            .save(&[(root.clone(), root.join(".env"))])
            .expect("saved");
        std::fs::write(&other, "pwned!").expect("write through the other name");
        let done = store.put_back();
        assert_eq!(done.restored, vec![PathBuf::from(".env")]);
        assert_eq!(std::fs::read(&other).expect("read"), b"SECRET");
        assert_eq!(std::fs::read(root.join(".env")).expect("read"), b"SECRET");
    }
}
