//! Reaching a path of the work tree through real folders only. Unlike `git::nofollow`, which
//! refuses a link on the way, a restore removes what a command put where a folder belongs
//! (a link, a file) and goes on: the tree is being put back, not written into.

use super::facts::Identity;
use crate::git::nofollow::open_root;
use rustix::fs::{AtFlags, Mode, OFlags};
use std::os::fd::OwnedFd;
use std::path::Path;

/// A folder's mode, reached through real folders only (`None`: absent, not a folder, or
/// under a link a command planted).
pub(super) fn dir_mode_at(root: &Path, rel: &[u8]) -> Option<u32> {
    let (parents, name) = split(rel);
    let dir = open_parent(root, &parents, false).ok()??;
    let st = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    (rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory)
        .then_some(st.st_mode & 0o7777)
}

/// Sets a folder's mode, reached through real folders only; a link there is left alone.
pub(super) fn chmod_dir_at(root: &Path, rel: &[u8], mode: u32) -> std::io::Result<()> {
    let (parents, name) = split(rel);
    let dir = open_parent(root, &parents, false)?
        .ok_or_else(|| std::io::Error::other("not reachable through real folders"))?;
    let st = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Directory {
        return Err(std::io::Error::other("not a folder"));
    }
    Ok(rustix::fs::chmodat(
        &dir,
        name,
        Mode::from_raw_mode(mode),
        AtFlags::empty(),
    )?)
}

/// The identity of the entry `name` in `dir` (never followed if a link): see [`Identity`].
pub(super) fn identity_in(dir: &OwnedFd, name: &[u8]) -> Option<Identity> {
    use rustix::fs::StatxFlags;
    let st = rustix::fs::statx(
        dir,
        name,
        AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::BASIC_STATS | StatxFlags::BTIME,
    )
    .ok()?;
    let born = (st.stx_mask & StatxFlags::BTIME.bits() != 0)
        .then_some((st.stx_btime.tv_sec, st.stx_btime.tv_nsec));
    Some(Identity {
        ino: st.stx_ino,
        born,
        size: st.stx_size,
        mtime: (st.stx_mtime.tv_sec, st.stx_mtime.tv_nsec),
    })
}

/// The identity of the entry at `rel`, reached through real folders only.
pub(super) fn identity_at(root: &Path, rel: &[u8]) -> Option<Identity> {
    let (parents, name) = split(rel);
    let dir = open_parent(root, &parents, false).ok()??;
    identity_in(&dir, name)
}

/// Whether anything (a link included) is at `rel`, reached through real folders only.
pub(super) fn present(root: &Path, rel: &[u8]) -> bool {
    let (parents, name) = split(rel);
    matches!(open_parent(root, &parents, false), Ok(Some(dir))
        if rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).is_ok())
}

/// Opens a folder of the work tree (`b""`: the root) through real folders only.
pub(super) fn open_dir_at(root: &Path, rel: &[u8]) -> Option<OwnedFd> {
    if rel.is_empty() {
        return open_root(root).ok();
    }
    let (mut parents, name) = split(rel);
    parents.push(name);
    open_parent(root, &parents, false).ok()?
}

/// Renames `name` in `dir` back to `to` (repo-relative), through real folders only.
pub(super) fn move_back(root: &Path, dir: &OwnedFd, name: &[u8], to: &[u8]) -> std::io::Result<()> {
    let (parents, to_name) = split(to);
    let target = open_parent(root, &parents, false)?
        .ok_or_else(|| std::io::Error::other("its folder is gone"))?;
    // What stands in its place now (a link a command put there) is the command's: it goes.
    if rustix::fs::statat(&target, to_name, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
        remove_at(&target, to_name)?;
    }
    Ok(rustix::fs::renameat(dir, name, &target, to_name)?)
}

/// Removes an empty folder reached through real folders only.
pub(super) fn rmdir_at(root: &Path, rel: &[u8]) -> std::io::Result<()> {
    let (parents, name) = split(rel);
    let dir = open_parent(root, &parents, false)?
        .ok_or_else(|| std::io::Error::other("not reachable through real folders"))?;
    Ok(rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR)?)
}

pub(super) fn split(path: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let trimmed = path.strip_suffix(b"/").unwrap_or(path);
    let mut parts: Vec<&[u8]> = trimmed
        .split(|b| *b == b'/')
        .filter(|p| !p.is_empty())
        .collect();
    let last = parts.pop().unwrap_or(b"");
    (parts, last)
}

/// Opens the folder holding `path`, one component at a time from the root, never following
/// a link. With `make`, whatever stands where a folder belongs (a link, a file) is removed
/// and the folder created; without, `Ok(None)` says the path cannot exist.
pub(super) fn open_parent(
    root: &Path,
    parents: &[&[u8]],
    make: bool,
) -> std::io::Result<Option<OwnedFd>> {
    let mut fd = open_root(root)?;
    for comp in parents {
        if *comp == b".." || *comp == b"." || comp.eq_ignore_ascii_case(b".git") {
            return Err(std::io::Error::other(
                "refusing a path through . .. or .git",
            ));
        }
        let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
        let next = match rustix::fs::openat(&fd, *comp, flags, Mode::empty()) {
            Ok(next) => next,
            Err(e) if !make => {
                if matches!(
                    e,
                    rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP
                ) {
                    return Ok(None);
                }
                return Err(e.into());
            }
            Err(rustix::io::Errno::NOENT) => {
                rustix::fs::mkdirat(&fd, *comp, Mode::from_raw_mode(0o755))?;
                rustix::fs::openat(&fd, *comp, flags, Mode::empty())?
            }
            Err(rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP) => {
                // A link or a file a command put where a folder belongs: it goes, unfollowed.
                rustix::fs::unlinkat(&fd, *comp, AtFlags::empty())?;
                rustix::fs::mkdirat(&fd, *comp, Mode::from_raw_mode(0o755))?;
                rustix::fs::openat(&fd, *comp, flags, Mode::empty())?
            }
            Err(e) => return Err(e.into()),
        };
        fd = next;
    }
    Ok(Some(fd))
}

/// Makes every folder on the way to `path` a real folder (see [`open_parent`]).
pub(super) fn real_parents(root: &Path, path: &[u8]) -> std::io::Result<()> {
    let (parents, _) = split(path);
    open_parent(root, &parents, true).map(|_| ())
}

/// Removes what a command left at `path` — a file, a link (never followed) or a folder with
/// everything in it.
pub(super) fn remove_path(root: &Path, path: &[u8]) -> std::io::Result<()> {
    let (parents, name) = split(path);
    let Some(dir) = open_parent(root, &parents, false)? else {
        return Ok(()); // under a link or a file: it is not in the tree, the parent goes
    };
    remove_at(&dir, name)
}

pub(super) fn remove_at(dir: &OwnedFd, name: &[u8]) -> std::io::Result<()> {
    let stat = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(s) => s,
        Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Directory {
        return Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?);
    }
    let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
    let sub = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::ACCESS) => {
            let _ = rustix::fs::chmodat(dir, name, Mode::from_raw_mode(0o700), AtFlags::empty());
            rustix::fs::openat(dir, name, flags, Mode::empty())?
        }
        Err(e) => return Err(e.into()),
    };
    let _ = rustix::fs::fchmod(&sub, Mode::from_raw_mode(0o700));
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(&sub)? {
        let entry = entry?;
        let n = entry.file_name().to_bytes();
        if n != b"." && n != b".." {
            names.push(n.to_vec());
        }
    }
    for n in names {
        remove_at(&sub, &n)?;
    }
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_in_the_way_is_removed_not_followed() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("root");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&root).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(outside.join("f"), "outside\n").expect("write");
        std::os::unix::fs::symlink(&outside, root.join("d")).expect("link");
        real_parents(&root, b"d/f").expect("parents");
        assert!(root.join("d").is_dir() && !root.join("d").is_symlink());
        assert_eq!(
            std::fs::read(outside.join("f")).expect("read"),
            b"outside\n"
        );
        std::os::unix::fs::symlink(&outside, root.join("e")).expect("link");
        remove_path(&root, b"e/f").expect("nothing under a link");
        remove_path(&root, b"e").expect("the link itself");
        assert!(!root.join("e").exists());
        assert!(outside.join("f").exists());
    }
}
