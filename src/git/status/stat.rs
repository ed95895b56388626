//! Stat data: what git caches in the index, and when it settles that a file or a folder's
//! listing is unchanged.

use super::index::Entry;
use super::model::{DirStamp, Time};

/// The stat fields git caches in the index, from either `statat` or the folder's `fstat`.
#[derive(Clone, Copy, Debug)]
pub(super) struct FileStat {
    pub(super) mode: u32,
    pub(super) size: u64,
    pub(super) mtime: Time,
    pub(super) ctime: Time,
    pub(super) ino: u64,
    pub(super) dev: u64,
    pub(super) uid: u32,
    pub(super) gid: u32,
}

// The field types of `struct stat` differ between architectures.
#[allow(clippy::unnecessary_cast)]
pub(super) fn file_stat(st: &rustix::fs::Stat) -> FileStat {
    FileStat {
        mode: st.st_mode as u32,
        size: st.st_size as u64,
        mtime: Time {
            sec: st.st_mtime as i64,
            nsec: st.st_mtime_nsec as u32,
        },
        ctime: Time {
            sec: st.st_ctime as i64,
            nsec: st.st_ctime_nsec as u32,
        },
        ino: st.st_ino as u64,
        dev: st.st_dev as u64,
        uid: st.st_uid as u32,
        gid: st.st_gid as u32,
    }
}

/// How strictly stat data is compared (git's `core.trustctime` and `core.checkStat`).
#[derive(Clone, Copy)]
pub(super) struct Compare {
    /// Entries whose cached mtime is not below this (the index file's mtime) are racy: the file
    /// may have changed again within the same timestamp tick after its stat was cached.
    pub(super) racy_from: Time,
    pub(super) trust_ctime: bool,
    pub(super) full_stat: bool,
}

/// Whether the file is certainly as the index entry says, from its stat data alone.
pub(super) fn unchanged(e: &Entry, st: &FileStat, cmp: &Compare) -> bool {
    const S_IFMT: u32 = 0o170000;
    let kind_ok = match e.mode {
        0o120000 => st.mode & S_IFMT == 0o120000,
        0o100644 | 0o100755 => {
            st.mode & S_IFMT == 0o100000 && (st.mode & 0o100 != 0) == (e.mode == 0o100755)
        }
        _ => false,
    };
    kind_ok
        && e.mtime < cmp.racy_from
        && st.size as u32 == e.size
        && st.mtime == e.mtime
        && (!cmp.trust_ctime || st.ctime == e.ctime)
        && (!cmp.full_stat || (st.ino as u32 == e.ino && st.uid == e.uid && st.gid == e.gid))
}

/// Whether a folder's listing from the snapshot still holds: the same stamp, and one not in the
/// walk's own timestamp tick (an entry added later in that tick would leave the stamp as it was).
pub(super) fn listing_holds(then: &DirStamp, now: &DirStamp, tick: Time) -> bool {
    then == now && then.mtime < tick
}
