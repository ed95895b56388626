//! Naming rules of the bytecode cache that need no cache: whether a path is one a fill asked
//! for, and which source a `.pyc` entry was compiled from. The cache (`pycache.rs`) reads them;
//! they sit in their own file so it need not import its own fill (`fill.rs`), which extends it.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Whether a repo-relative path is one of `wanted` or inside one of them.
pub(crate) fn wanted(path: &[u8], wanted: &[Vec<u8>]) -> bool {
    wanted
        .iter()
        .any(|w| path == w.as_slice() || (path.starts_with(w) && path.get(w.len()) == Some(&b'/')))
}

/// The source a bytecode entry is of, by the import system's naming (`<stem>.<tag>.pyc`,
/// repo-relative folder `rel`): `rel/<stem>.py`.
pub(crate) fn source_of(rel: &Path, name: &OsStr) -> Option<Vec<u8>> {
    let bytes = name.as_bytes();
    if !bytes.ends_with(b".pyc") {
        return None;
    }
    let stem = bytes.split(|b| *b == b'.').next()?;
    let mut path = rel.as_os_str().as_bytes().to_vec();
    if !path.is_empty() {
        path.push(b'/');
    }
    path.extend_from_slice(stem);
    path.extend_from_slice(b".py");
    Some(path)
}
