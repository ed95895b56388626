//! Pre-images and images: what each path a change writes must hold (bytes as a blob, the
//! exact mode), recorded before the change and written back without following a link; and
//! the odd modes (0600) of tracked files a checkout would not recreate.

use super::facts::{Image, RelPath, Restore};
use super::paths::{open_parent, remove_at, split};
use super::report::Report;
use crate::error::Result;
use crate::git::files::{with_exec, FileOutcome};
use git2::{Oid, Repository};
use rustix::fs::{AtFlags, Mode, OFlags};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

impl Restore {
    /// Records the pre-images of the paths a change is about to write: their bytes (as
    /// blobs) and their exact modes, read from the tree as it is now.
    pub fn set_images(&mut self, repo: &Repository, outcomes: &[FileOutcome]) -> Result<()> {
        self.images = outcomes
            .iter()
            .map(|o| {
                let path = RelPath::from_bytes(o.path.as_bytes());
                let mode = exact_mode(&self.root, &path);
                Ok(Image {
                    blob: match &o.before {
                        Some(s) => Some(repo.blob(&s.bytes)?.to_string()),
                        None => None,
                    },
                    mode: mode.unwrap_or_else(|| {
                        if o.before.as_ref().is_some_and(|s| s.executable) {
                            0o755
                        } else {
                            0o644
                        }
                    }),
                    path,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(())
    }

    /// The images of baseline + change: each changed path's after-state, in the mode its
    /// pre-image had (the executable bit as the change says).
    pub fn change_images(&self, repo: &Repository, outcomes: &[FileOutcome]) -> Result<Vec<Image>> {
        outcomes
            .iter()
            .map(|o| {
                let path = RelPath::from_bytes(o.path.as_bytes());
                let before = self
                    .images
                    .iter()
                    .find(|i| i.path == path && i.blob.is_some())
                    .map(|i| i.mode);
                Ok(Image {
                    blob: match &o.after {
                        Some(s) => Some(repo.blob(&s.bytes)?.to_string()),
                        None => None,
                    },
                    mode: with_exec(
                        before.unwrap_or(0o644),
                        o.after.as_ref().is_some_and(|s| s.executable),
                    ),
                    path,
                })
            })
            .collect()
    }

    /// Takes a change back by compare and swap, touching nothing else: each path that still
    /// holds exactly what the change wrote gets its pre-image back; a path that holds anything
    /// else now (someone's edit) is left as it is. Returns (taken back, left).
    pub fn take_back_change(
        &self,
        repo: &Repository,
        outcomes: &[FileOutcome],
    ) -> Result<(Vec<String>, Vec<String>)> {
        let after = self.change_images(repo, outcomes)?;
        let (mut taken, mut left) = (Vec::new(), Vec::new());
        for (image, outcome) in after.iter().zip(outcomes) {
            let before = self.images.iter().find(|i| i.path == image.path);
            match before {
                Some(before) if image_matches(&self.root, image) => {
                    write_image(repo, &self.root, before)?;
                    taken.push(outcome.path.clone());
                }
                _ => left.push(outcome.path.clone()),
            }
        }
        Ok((taken, left))
    }

    /// Tracked files with a recorded odd mode (0600) that are not what they were: a checkout
    /// wrote them 644, or a command chmodded them. Paths `images` own are theirs.
    pub(super) fn restore_modes(&self, images: &[Image], report: &mut Report) {
        for (path, mode) in &self.modes {
            if images.iter().any(|i| &i.path == path) {
                continue;
            }
            let (parents, name) = split(path.as_bytes());
            let Ok(Some(dir)) = open_parent(&self.root, &parents, false) else {
                continue;
            };
            let Ok(st) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile
                || st.st_mode & 0o7777 == *mode
            {
                continue;
            }
            match rustix::fs::chmodat(&dir, name, Mode::from_raw_mode(*mode), AtFlags::empty()) {
                Ok(()) => report.paths.push(path.display()),
                Err(e) => report.failed.push(format!("{}: {e}", path.display())),
            }
        }
    }
}

/// The permission bits of a regular file in the work tree, if it is one.
fn exact_mode(root: &Path, path: &RelPath) -> Option<u32> {
    let meta = std::fs::symlink_metadata(root.join(path.path())).ok()?;
    meta.is_file().then_some(meta.permissions().mode() & 0o7777)
}

/// Makes `image.path` hold the image exactly, without following any link on the way.
/// Returns whether it had to change anything.
pub(super) fn write_image(repo: &Repository, root: &Path, image: &Image) -> std::io::Result<bool> {
    if image_matches(root, image) {
        return Ok(false);
    }
    let (parents, name) = split(image.path.as_bytes());
    let Some(blob) = &image.blob else {
        let Some(dir) = open_parent(root, &parents, false)? else {
            return Ok(true);
        };
        remove_at(&dir, name)?;
        return Ok(true);
    };
    let bytes = Oid::from_str(blob)
        .and_then(|id| repo.find_blob(id))
        .map(|b| b.content().to_vec())
        .map_err(|e| std::io::Error::other(e.message().to_string()))?;
    let dir = open_parent(root, &parents, true)?
        .ok_or_else(|| std::io::Error::other("no folder to write into"))?;
    // A folder where the file belongs goes first (what a command left).
    if let Ok(stat) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Directory {
            remove_at(&dir, name)?;
        }
    }
    let tmp: Vec<u8> = [b".", name, b".factory-restore"].concat();
    let _ = rustix::fs::unlinkat(&dir, tmp.as_slice(), AtFlags::empty());
    let fd = rustix::fs::openat(
        &dir,
        tmp.as_slice(),
        OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut file = std::fs::File::from(fd);
    let written = file
        .write_all(&bytes)
        .and_then(|_| {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(image.mode)).map_err(Into::into)
        })
        .and_then(|_| rustix::fs::renameat(&dir, tmp.as_slice(), &dir, name).map_err(Into::into));
    if written.is_err() {
        let _ = rustix::fs::unlinkat(&dir, tmp.as_slice(), AtFlags::empty());
    }
    written.map(|_| true)
}

/// Whether the path holds the image now (a regular file with its bytes and mode, or nothing).
pub(super) fn image_matches(root: &Path, image: &Image) -> bool {
    let (parents, name) = split(image.path.as_bytes());
    let Ok(Some(dir)) = open_parent(root, &parents, false) else {
        return image.blob.is_none();
    };
    let stat = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(s) => s,
        Err(_) => return image.blob.is_none(),
    };
    let Some(blob) = &image.blob else {
        return false;
    };
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile
        || stat.st_mode & 0o7777 != image.mode
    {
        return false;
    }
    let Ok(fd) = rustix::fs::openat(
        &dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    let mut bytes = Vec::new();
    if std::io::Read::read_to_end(&mut std::fs::File::from(fd), &mut bytes).is_err() {
        return false;
    }
    Oid::from_str(blob).ok() == git2::Oid::hash_object(git2::ObjectType::Blob, &bytes).ok()
}
