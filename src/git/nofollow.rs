//! Writing under a root folder without ever following a symbolic link (SPEC §7).
//!
//! A path is never handed to the kernel whole: each folder on the way is opened from the one
//! before with `O_NOFOLLOW | O_DIRECTORY`, so a link anywhere on the way — planted by a
//! command, left in the user's tree, or created a moment ago by the same writer from a crafted
//! tree — stops the write instead of steering it out of the root. Files are created with
//! `O_EXCL | O_NOFOLLOW` and put in place by `renameat`, which replaces a final link rather
//! than writing through it.

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use std::io::{self, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

const DIR_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::RDONLY)
    .union(OFlags::CLOEXEC);

/// Opens the root folder itself (the caller's choice of root may be reached through links).
pub fn open_root(root: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        root,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// The error for a path component that is a link or not a folder.
fn not_a_folder(shown: &[u8]) -> io::Error {
    io::Error::other(format!(
        "{} is a symbolic link or not a folder; refusing to write through it",
        crate::ui::escape_line(&String::from_utf8_lossy(shown))
    ))
}

/// Opens the folder `name` inside `dir` without following a link; with `create`, makes it
/// first when it does not exist. `shown` names it in errors.
pub fn open_dir_at(dir: impl AsFd, name: &[u8], create: bool, shown: &[u8]) -> io::Result<OwnedFd> {
    refuse_special(name, shown)?;
    match rustix::fs::openat(&dir, name, DIR_FLAGS, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(Errno::NOENT) if create => {
            match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            rustix::fs::openat(&dir, name, DIR_FLAGS, Mode::empty())
                .map_err(|e| map_walk_error(e, shown))
        }
        Err(e) => Err(map_walk_error(e, shown)),
    }
}

fn map_walk_error(e: Errno, shown: &[u8]) -> io::Error {
    match e {
        Errno::LOOP | Errno::NOTDIR => not_a_folder(shown),
        e => e.into(),
    }
}

/// `.`, `..` and empty components never name a folder to walk into.
fn refuse_special(name: &[u8], shown: &[u8]) -> io::Result<()> {
    if matches!(name, b"" | b"." | b"..") || name.contains(&b'/') || name.contains(&0) {
        return Err(io::Error::other(format!(
            "{} is not a plain path inside the folder",
            crate::ui::escape_line(&String::from_utf8_lossy(shown))
        )));
    }
    Ok(())
}

/// A slash-separated relative path as its folders and its final name.
fn split(path: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let mut parts: Vec<&[u8]> = path
        .split(|b| *b == b'/')
        .filter(|p| !p.is_empty() && *p != b".")
        .collect();
    let last = parts.pop().unwrap_or(b"");
    (parts, last)
}

/// The folders on the way to `rel` opened one by one from `root` (the root first), or `None`
/// when one does not exist and `create` is off.
fn open_chain(root: &Path, parents: &[&[u8]], create: bool) -> io::Result<Option<Vec<OwnedFd>>> {
    let mut chain = vec![open_root(root)?];
    let mut shown: Vec<u8> = Vec::new();
    for comp in parents {
        if !shown.is_empty() {
            shown.push(b'/');
        }
        shown.extend_from_slice(comp);
        let last = chain.last().expect("the chain starts with the root");
        match open_dir_at(last, comp, create, &shown) {
            Ok(fd) => chain.push(fd),
            Err(e) if !create && e.raw_os_error() == Some(Errno::NOENT.raw_os_error()) => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Some(chain))
}

/// The first folder on the way to `rel` under `root` that is a symbolic link or not a folder
/// (`None` when every existing one is a real folder; missing ones would be created).
pub fn linked_parent(root: &Path, rel: &[u8]) -> Option<String> {
    let (parents, _) = split(rel);
    let mut fd = open_root(root).ok()?;
    let mut shown: Vec<u8> = Vec::new();
    for comp in parents {
        if !shown.is_empty() {
            shown.push(b'/');
        }
        shown.extend_from_slice(comp);
        match rustix::fs::openat(&fd, comp, DIR_FLAGS, Mode::empty()) {
            Ok(next) => fd = next,
            Err(Errno::NOENT) => return None,
            Err(_) => return Some(String::from_utf8_lossy(&shown).into_owned()),
        }
    }
    None
}

/// Creates the regular file `name` in `dir` holding `bytes` with exactly `mode`; it must not
/// exist yet (a second entry of the same name, or a link, is an error).
pub fn create_file_at(dir: impl AsFd, name: &[u8], bytes: &[u8], mode: u32) -> io::Result<()> {
    refuse_special(name, name)?;
    let fd = rustix::fs::openat(
        &dir,
        name,
        OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    // fchmod, not the creation mode, so the umask does not decide the bits.
    rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
    Ok(())
}

/// Writes `bytes` over the harness's own file at `path` in place (no new file per write):
/// only a regular file with one name, owned by this user, is written into; anything else at
/// that name (a link, a second name of another file, a folder) is removed and a new file
/// made — never written through. Returns the file, written.
pub fn rewrite_own(path: &Path, bytes: &[u8]) -> io::Result<std::fs::File> {
    if let Some(mut file) = open_own(path, OFlags::WRONLY) {
        file.set_len(0)?;
        file.write_all(bytes)?;
        return Ok(file);
    }
    replace_own(path)?;
    let fd = rustix::fs::open(
        path,
        OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    Ok(file)
}

/// The harness's own file at `path`, opened with `access` (`RDONLY`, `WRONLY`…): only a
/// regular file with one name, owned by this user, never through a link; `None` for
/// anything else there (or nothing).
pub fn open_own(path: &Path, access: OFlags) -> Option<std::fs::File> {
    use rustix::fs::FileType;
    let flags = access | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags, Mode::empty()).ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    let own = FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
        && st.st_nlink == 1
        && st.st_uid == rustix::process::geteuid().as_raw();
    own.then(|| std::fs::File::from(fd))
}

/// Removes whatever stands at `path` (a link, a folder, a second name of another file), so
/// a file of the harness's own can be made there anew.
pub fn replace_own(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path)?,
        Ok(_) => std::fs::remove_file(path)?,
        Err(_) => {}
    }
    Ok(())
}

/// Creates the symbolic link `name` in `dir` pointing at `target` (never replacing anything).
pub fn symlink_at(dir: impl AsFd, name: &[u8], target: &[u8]) -> io::Result<()> {
    refuse_special(name, name)?;
    Ok(rustix::fs::symlinkat(target, &dir, name)?)
}

/// Makes `rel` under `root` a regular file holding `bytes` with `mode`, atomically (a temporary
/// file renamed into place), creating missing folders; no link on the way is followed, and a
/// link at `rel` itself is replaced, not written through.
pub fn replace_file(root: &Path, rel: &[u8], bytes: &[u8], mode: u32) -> io::Result<()> {
    let (parents, name) = split(rel);
    refuse_special(name, rel)?;
    let chain = open_chain(root, &parents, true)?.expect("created folders exist");
    let dir = chain.last().expect("the chain starts with the root");
    let tmp: Vec<u8> = [b".", name, b".factory-tmp"].concat();
    let _ = rustix::fs::unlinkat(dir, tmp.as_slice(), AtFlags::empty());
    let written = create_file_at(dir, &tmp, bytes, mode)
        .and_then(|()| Ok(rustix::fs::renameat(dir, tmp.as_slice(), dir, name)?));
    if written.is_err() {
        let _ = rustix::fs::unlinkat(dir, tmp.as_slice(), AtFlags::empty());
    }
    written
}

/// Removes the file or link `rel` under `root` (absent is fine), then the folders it leaves
/// empty up to the root, as git does; never through a link.
pub fn remove_file(root: &Path, rel: &[u8]) -> io::Result<()> {
    let (parents, name) = split(rel);
    refuse_special(name, rel)?;
    let Some(chain) = open_chain(root, &parents, false)? else {
        return Ok(());
    };
    match rustix::fs::unlinkat(chain.last().expect("root"), name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(e) => return Err(e.into()),
    }
    for i in (0..parents.len()).rev() {
        if rustix::fs::unlinkat(&chain[i], parents[i], AtFlags::REMOVEDIR).is_err() {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The harness's own file is written in place; a link or a second name planted at its
    /// path is replaced, and what it led to is left as it was.
    #[test]
    fn an_own_file_is_rewritten_in_place_and_never_through_a_link() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().expect("tempdir");
        let own = tmp.path().join("own");
        rewrite_own(&own, b"one").expect("made");
        let ino = std::fs::metadata(&own).expect("meta").ino();
        rewrite_own(&own, b"two").expect("rewritten");
        assert_eq!(std::fs::read(&own).expect("read"), b"two");
        assert_eq!(
            std::fs::metadata(&own).expect("meta").ino(),
            ino,
            "in place"
        );
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, b"precious").expect("write");
        std::fs::remove_file(&own).expect("rm");
        std::os::unix::fs::symlink(&victim, &own).expect("link");
        rewrite_own(&own, b"three").expect("replaced");
        assert_eq!(std::fs::read(&victim).expect("read"), b"precious");
        assert!(!std::fs::symlink_metadata(&own).expect("meta").is_symlink());
        std::fs::remove_file(&own).expect("rm");
        std::fs::hard_link(&victim, &own).expect("hard link");
        rewrite_own(&own, b"four").expect("replaced");
        assert_eq!(std::fs::read(&victim).expect("read"), b"precious");
        assert_eq!(std::fs::read(&own).expect("read"), b"four");
    }

    #[test]
    fn never_writes_through_a_link() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("root");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&root).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::os::unix::fs::symlink(&outside, root.join("out")).expect("link");
        let err = replace_file(&root, b"out/x.txt", b"x", 0o644).expect_err("refused");
        assert!(err.to_string().contains("out is a symbolic link"), "{err}");
        assert_eq!(linked_parent(&root, b"out/x.txt").as_deref(), Some("out"));
        assert!(remove_file(&root, b"out/y").is_err());
        assert_eq!(std::fs::read_dir(&outside).expect("ls").count(), 0);

        replace_file(&root, b"a/b/c.txt", b"c", 0o600).expect("written");
        assert_eq!(linked_parent(&root, b"a/b/c.txt"), None);
        let meta = std::fs::metadata(root.join("a/b/c.txt")).expect("meta");
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
            0o600
        );
        // A final link is replaced, not followed.
        std::os::unix::fs::symlink(outside.join("t"), root.join("a/l")).expect("link");
        replace_file(&root, b"a/l", b"l", 0o644).expect("written");
        assert!(!outside.join("t").exists());
        remove_file(&root, b"a/b/c.txt").expect("removed");
        assert!(!root.join("a/b").exists() && root.join("a/l").exists());
        assert!(replace_file(&root, b"a/../x", b"x", 0o644).is_err());
    }
}
