//! Read-only files a backend cannot single out (Landlock's rules cover folders): each is saved
//! before the command and put back after it if the command changed, removed or replaced it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// One saved file: its bytes (or a link's target), mode and identity before the command.
struct Saved {
    path: PathBuf,
    link: bool,
    bytes: Vec<u8>,
    mode: u32,
    stamp: Stamp,
}

/// What changes whenever a file is written or replaced; the change time no process can set.
#[derive(PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    ctime: (i64, i64),
    size: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::symlink_metadata(path).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        ctime: (m.ctime(), m.ctime_nsec()),
        size: m.len(),
    })
}

#[derive(Default)]
pub struct Kept(Vec<Saved>);

impl Kept {
    /// Saves `files` (regular files and links; anything else is left as it is).
    pub fn save(files: &[PathBuf]) -> std::io::Result<Kept> {
        let mut saved = Vec::new();
        for path in files {
            let meta = std::fs::symlink_metadata(path)?;
            let (link, bytes) = if meta.file_type().is_symlink() {
                let target = std::fs::read_link(path)?;
                (
                    true,
                    std::os::unix::ffi::OsStrExt::as_bytes(target.as_os_str()).to_vec(),
                )
            } else if meta.is_file() {
                (false, std::fs::read(path)?)
            } else {
                continue;
            };
            saved.push(Saved {
                path: path.clone(),
                link,
                bytes,
                mode: meta.mode() & 0o7777,
                stamp: stamp(path).unwrap_or(Stamp {
                    dev: 0,
                    ino: 0,
                    ctime: (0, 0),
                    size: 0,
                }),
            });
        }
        Ok(Kept(saved))
    }

    /// Puts back every saved file the command touched; returns those put back, and those
    /// that could not be (with why).
    pub fn put_back(self) -> (Vec<PathBuf>, Vec<String>) {
        let mut restored = Vec::new();
        let mut failed = Vec::new();
        for s in self.0 {
            if stamp(&s.path).is_some_and(|now| now == s.stamp) {
                continue;
            }
            match put(&s) {
                Ok(()) => restored.push(s.path),
                Err(e) => failed.push(format!("{}: {e}", s.path.display())),
            }
        }
        (restored, failed)
    }
}

/// Writes a saved file back in place. Saved paths are real (no link on the way when saved),
/// so the way is walked from `/` without following any link: one planted by the command stops
/// the put back, which is then reported, instead of steering it elsewhere.
fn put(s: &Saved) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let rel = s
        .path
        .strip_prefix("/")
        .unwrap_or(&s.path)
        .as_os_str()
        .as_bytes();
    if std::fs::symlink_metadata(&s.path).is_ok_and(|m| m.is_dir()) {
        std::fs::remove_dir(&s.path)?;
    }
    let root = Path::new("/");
    if s.link {
        let (Some(dir), Some(name)) = (s.path.parent(), s.path.file_name()) else {
            return Err(std::io::Error::other("no parent folder"));
        };
        if let Some(linked) = crate::git::nofollow::linked_parent(root, rel) {
            return Err(std::io::Error::other(format!("{linked} is a link")));
        }
        match std::fs::remove_file(&s.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let fd = crate::git::nofollow::open_root(dir)?;
        crate::git::nofollow::symlink_at(&fd, name.as_bytes(), &s.bytes)
    } else {
        crate::git::nofollow::replace_file(root, rel, &s.bytes, s.mode)
    }
}
