//! What the walks say and remember: the answers' shape and the stamps a snapshot keeps of
//! folders and of the index. Plain types, read by every step of the walk.

use crate::git::Dirty;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// How untracked files inside an untracked folder are listed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Untracked {
    /// The folder once, as `d/` (what a person reads: `git status`).
    Folders,
    /// Each file (what a restore removes: `git status -uall`).
    Files,
}

/// The folder stamps of a fast walk, valid while the index is the one they were taken against.
pub(super) struct Seen {
    pub(super) index: IndexStamp,
    /// A lower bound of the file-system clock when the walk began: a folder whose mtime is not
    /// below it may change again within the same timestamp tick, so it is never trusted.
    pub(super) tick: Time,
    pub(super) dirs: HashMap<Vec<u8>, DirRecord>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) struct Time {
    pub(super) sec: i64,
    pub(super) nsec: u32,
}

/// What identifies a folder's list of entries: creating, removing or renaming an entry changes
/// its mtime and ctime (and a user cannot set ctime back).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct DirStamp {
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) mtime: Time,
    pub(super) ctime: Time,
    /// Its permission bits (a chmod changes ctime too, so the stamp tells it anyway).
    pub(super) mode: u32,
}

pub(super) struct DirRecord {
    pub(super) stamp: DirStamp,
    /// Untracked, not ignored entries the listing found (name, is a folder).
    pub(super) untracked: Vec<(Vec<u8>, bool)>,
    /// Untracked entries the ignore rules hide (name, inode): what a restore keeps.
    pub(super) ignored: Vec<(Vec<u8>, u64)>,
}

/// The index file as read: its trailing checksum and its mtime (the racy-entry threshold).
#[derive(Clone, PartialEq, Eq, Debug)]
pub(super) struct IndexStamp {
    pub(super) checksum: Vec<u8>,
    pub(super) mtime: Time,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) enum Kind {
    Dir,
    Symlink,
    Other,
}

pub(super) fn dirty(raw: Vec<u8>, label: &'static str, tracked: bool) -> Dirty {
    Dirty {
        path: crate::git::shown_path(&raw),
        raw,
        label,
        tracked,
    }
}

pub(super) fn os(bytes: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(bytes))
}

pub(super) fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(dir.len() + 1 + name.len());
    if !dir.is_empty() {
        p.extend_from_slice(dir);
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}
