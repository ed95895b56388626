//! The status walk: which paths of the work tree differ from the index (staged, unstaged and
//! untracked-not-ignored), as `git status` answers it, at git's own cost or below.
//!
//! libgit2's status lstat()s every index entry on one thread and reads every folder again on
//! each call. Here, as git's preload-index does, the entries are checked in parallel, folder by
//! folder (the folder opened once, its files stat'ed by name), and a [`Snapshot`] of the first
//! walk lets later checks in the same run skip listing the folders whose stamp has not changed
//! since: only a folder whose entries changed can hold a new untracked file. Tracked files are
//! still checked one by one. What the stat data cannot settle (changed or racy stat data,
//! gitlinks, untracked symlinks, ignore rules) is asked of libgit2, so the answers are libgit2's;
//! what the fast walk does not handle (a case-insensitive work tree, conflicts, an unreadable
//! folder) falls back to libgit2's own walk.
//!
//! git's own accelerators (`core.untrackedCache`'s index extension, `core.fsmonitor`) are not
//! read: libgit2 does not read them, and gitoxide's released walk does not use them either, so
//! taking it would double the build for nothing here. Within a run the snapshot does the
//! untracked cache's job; an index that carries them is walked like any other.

use super::{label, staged_paths, Dirty};
use crate::error::{Error, Result};
use git2::{Repository, Status, StatusOptions};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// How untracked files inside an untracked folder are listed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Untracked {
    /// The folder once, as `d/` (what a person reads: `git status`).
    Folders,
    /// Each file (what a restore removes: `git status -uall`).
    Files,
}

/// What the first walk of a run saw, so a later check can skip listing folders that have not
/// changed since.
pub struct Snapshot {
    changes: Vec<Dirty>,
    seen: Option<Seen>,
    /// From the fast walk's own stat of every tracked file (`None` when libgit2 walked):
    /// what a restore needs to put back modes like 0600, at no extra cost.
    odd_modes: Option<Vec<(Vec<u8>, u32)>>,
}

/// The folder stamps of a fast walk, valid while the index is the one they were taken against.
struct Seen {
    index: IndexStamp,
    /// A lower bound of the file-system clock when the walk began: a folder whose mtime is not
    /// below it may change again within the same timestamp tick, so it is never trusted.
    tick: Time,
    dirs: HashMap<Vec<u8>, DirRecord>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Time {
    sec: i64,
    nsec: u32,
}

/// What identifies a folder's list of entries: creating, removing or renaming an entry changes
/// its mtime and ctime (and a user cannot set ctime back).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct DirStamp {
    dev: u64,
    ino: u64,
    mtime: Time,
    ctime: Time,
}

struct DirRecord {
    stamp: DirStamp,
    /// Untracked, not ignored entries the listing found (name, is a folder).
    untracked: Vec<(Vec<u8>, bool)>,
}

/// The index file as read: its trailing checksum and its mtime (the racy-entry threshold).
#[derive(Clone, PartialEq, Eq, Debug)]
struct IndexStamp {
    checksum: Vec<u8>,
    mtime: Time,
}

impl Snapshot {
    /// Walks the work tree once (staged, unstaged, untracked), remembering each folder's stamp.
    pub fn take(repo: &Repository) -> Result<Snapshot> {
        let tick = walk_tick(repo);
        let mut changes = staged_paths(repo)?;
        crate::trace::mark("    status: staged (index vs HEAD)");
        let mut odd_modes = None;
        let seen = match fast_walk(repo, None, Untracked::Folders)? {
            Some(walk) => {
                changes.extend(walk.dirty);
                odd_modes = Some(walk.odd_modes);
                Some(Seen {
                    index: walk.index,
                    tick,
                    dirs: walk.dirs,
                })
            }
            None => {
                changes.extend(libgit2_workdir(repo, Untracked::Folders, true)?);
                None
            }
        };
        Ok(Snapshot {
            changes: sorted(changes),
            seen,
            odd_modes,
        })
    }

    /// Tracked regular files whose mode a checkout would not recreate (0600), when the walk
    /// stat'ed every tracked file itself.
    pub fn odd_modes(&self) -> Option<&[(Vec<u8>, u32)]> {
        self.odd_modes.as_deref()
    }

    /// What differed when the snapshot was taken; untracked folders as `d/`.
    pub fn changes(&self) -> &[Dirty] {
        &self.changes
    }

    /// Refuses a work tree with any staged, unstaged or untracked-not-ignored change, listing up
    /// to 10 of them.
    pub fn ensure_clean(&self) -> Result<()> {
        if self.changes.is_empty() {
            return Ok(());
        }
        let mut err = Error::new("the work tree has uncommitted changes");
        for d in self.changes.iter().take(10) {
            err = err.detail(format!("{}: {}", d.label, d.path));
        }
        if self.changes.len() > 10 {
            err = err.detail(format!("… and {} more", self.changes.len() - 10));
        }
        Err(err.hint(
            "commit or stash them (git stash -u), or run with --worktree to leave your tree alone",
        ))
    }

    /// What differs now (untracked files one by one), listing again only the folders whose
    /// stamp changed since the snapshot, or was racy then. Same answer as a full walk.
    pub fn changes_since(&self, repo: &Repository) -> Result<Vec<Dirty>> {
        changes_with(repo, self.seen.as_ref(), Untracked::Files)
    }
}

/// What differs now, with one full walk.
pub fn changes(repo: &Repository, untracked: Untracked) -> Result<Vec<Dirty>> {
    changes_with(repo, None, untracked)
}

fn changes_with(
    repo: &Repository,
    seen: Option<&Seen>,
    untracked: Untracked,
) -> Result<Vec<Dirty>> {
    let mut out = staged_paths(repo)?;
    crate::trace::mark("    status: staged (index vs HEAD)");
    match fast_walk(repo, seen, untracked)? {
        Some(walk) => out.extend(walk.dirty),
        None => out.extend(libgit2_workdir(repo, untracked, true)?),
    }
    Ok(sorted(out))
}

fn sorted(mut v: Vec<Dirty>) -> Vec<Dirty> {
    v.sort_by(|a, b| a.raw.cmp(&b.raw));
    v.dedup_by(|a, b| a.raw == b.raw);
    v
}

fn dirty(raw: Vec<u8>, label: &'static str, tracked: bool) -> Dirty {
    Dirty {
        path: String::from_utf8_lossy(&raw).into_owned(),
        raw,
        label,
        tracked,
    }
}

fn os(bytes: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(bytes))
}

/// libgit2's own walk of the work tree against the index (the fallback, and the reference the
/// fast walk is tested against).
pub(super) fn libgit2_workdir(
    repo: &Repository,
    untracked: Untracked,
    include_untracked: bool,
) -> Result<Vec<Dirty>> {
    let mut opts = StatusOptions::new();
    opts.show(git2::StatusShow::Workdir)
        .include_untracked(include_untracked)
        .recurse_untracked_dirs(untracked == Untracked::Files)
        .include_ignored(false)
        .exclude_submodules(false)
        .renames_head_to_index(false)
        .renames_index_to_workdir(false);
    let statuses = repo.statuses(Some(&mut opts))?;
    Ok(statuses
        .iter()
        .filter(|e| e.status() != Status::CURRENT && !e.status().contains(Status::IGNORED))
        .map(|e| {
            let (label, tracked) = label(e.status());
            dirty(e.path_bytes().to_vec(), label, tracked)
        })
        .collect())
}

// ---------------------------------------------------------------------------------------------
// The index as the walk needs it.

/// One stage-0 index entry's path and cached stat data.
struct Entry {
    path: Vec<u8>,
    /// Where the file name starts in `path`.
    name_at: usize,
    mode: u32,
    size: u32,
    mtime: Time,
    ctime: Time,
    ino: u32,
    uid: u32,
    gid: u32,
    /// skip-worktree (sparse checkout) or assume-unchanged: git does not look at the file.
    skip: bool,
    /// intent-to-add: libgit2 decides what it is.
    intent_to_add: bool,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.path[self.name_at..]
    }
    fn gitlink(&self) -> bool {
        self.mode & 0o170000 == 0o160000
    }
}

/// A folder that holds index entries: its files (in name order) and sub-folders.
struct Node {
    rel: Vec<u8>,
    parent: Option<usize>,
    files: Vec<usize>,
    subdirs: Vec<(Vec<u8>, usize)>,
}

/// The index's entries and their folders (parents always before children).
struct Tracked {
    entries: Vec<Entry>,
    nodes: Vec<Node>,
}

const MODE_GITLINK: u32 = 0o160000;
const FLAG_VALID: u16 = 0x8000;
const FLAG_STAGE: u16 = 0x3000;
const EXT_INTENT_TO_ADD: u16 = 1 << 13;
const EXT_SKIP_WORKTREE: u16 = 1 << 14;

impl Tracked {
    /// `None` when an entry is conflicted (libgit2's walk reports conflicts).
    fn read(index: &git2::Index) -> Option<Tracked> {
        let mut entries = Vec::with_capacity(index.len());
        for e in index.iter() {
            if e.flags & FLAG_STAGE != 0 {
                return None;
            }
            let name_at = e.path.iter().rposition(|&b| b == b'/').map_or(0, |p| p + 1);
            entries.push(Entry {
                name_at,
                mode: e.mode,
                size: e.file_size,
                mtime: Time {
                    sec: i64::from(e.mtime.seconds()),
                    nsec: e.mtime.nanoseconds(),
                },
                ctime: Time {
                    sec: i64::from(e.ctime.seconds()),
                    nsec: e.ctime.nanoseconds(),
                },
                ino: e.ino,
                uid: e.uid,
                gid: e.gid,
                skip: e.flags & FLAG_VALID != 0 || e.flags_extended & EXT_SKIP_WORKTREE != 0,
                intent_to_add: e.flags_extended & EXT_INTENT_TO_ADD != 0,
                path: e.path,
            });
        }
        Some(Tracked::from_entries(entries))
    }

    /// The folders of entries in index (path) order.
    fn from_entries(entries: Vec<Entry>) -> Tracked {
        let mut nodes = vec![Node {
            rel: Vec::new(),
            parent: None,
            files: Vec::new(),
            subdirs: Vec::new(),
        }];
        let mut by_path: HashMap<Vec<u8>, usize> = HashMap::new();
        by_path.insert(Vec::new(), 0);
        let mut last: (Vec<u8>, usize) = (Vec::new(), 0);
        for (i, e) in entries.iter().enumerate() {
            let dir = &e.path[..e.name_at.saturating_sub(1)];
            let node = if dir == last.0.as_slice() {
                last.1
            } else {
                let n = node_for(&mut nodes, &mut by_path, dir);
                last = (dir.to_vec(), n);
                n
            };
            nodes[node].files.push(i);
        }
        for n in &mut nodes {
            n.subdirs.sort();
            // Index order is path order, so a folder's files are already in name order.
        }
        Tracked { entries, nodes }
    }

    fn file_named(&self, node: usize, name: &[u8]) -> Option<&Entry> {
        let files = &self.nodes[node].files;
        files
            .binary_search_by(|&i| self.entries[i].name().cmp(name))
            .ok()
            .map(|k| &self.entries[files[k]])
    }

    fn subdir_named(&self, node: usize, name: &[u8]) -> bool {
        self.nodes[node]
            .subdirs
            .binary_search_by(|(n, _)| n.as_slice().cmp(name))
            .is_ok()
    }
}

fn node_for(nodes: &mut Vec<Node>, by_path: &mut HashMap<Vec<u8>, usize>, dir: &[u8]) -> usize {
    if let Some(&i) = by_path.get(dir) {
        return i;
    }
    let (parent_dir, name) = match dir.iter().rposition(|&b| b == b'/') {
        Some(p) => (&dir[..p], &dir[p + 1..]),
        None => (&dir[..0], dir),
    };
    let parent = node_for(nodes, by_path, parent_dir);
    let i = nodes.len();
    nodes.push(Node {
        rel: dir.to_vec(),
        parent: Some(parent),
        files: Vec::new(),
        subdirs: Vec::new(),
    });
    nodes[parent].subdirs.push((name.to_vec(), i));
    by_path.insert(dir.to_vec(), i);
    i
}

// ---------------------------------------------------------------------------------------------
// Stat data.

/// The stat fields git caches in the index, from either `statat` or the folder's `fstat`.
#[derive(Clone, Copy, Debug)]
struct FileStat {
    mode: u32,
    size: u64,
    mtime: Time,
    ctime: Time,
    ino: u64,
    dev: u64,
    uid: u32,
    gid: u32,
}

// The field types of `struct stat` differ between architectures.
#[allow(clippy::unnecessary_cast)]
fn file_stat(st: &rustix::fs::Stat) -> FileStat {
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
struct Compare {
    /// Entries whose cached mtime is not below this (the index file's mtime) are racy: the file
    /// may have changed again within the same timestamp tick after its stat was cached.
    racy_from: Time,
    trust_ctime: bool,
    full_stat: bool,
}

/// Whether the file is certainly as the index entry says, from its stat data alone.
fn unchanged(e: &Entry, st: &FileStat, cmp: &Compare) -> bool {
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
fn listing_holds(then: &DirStamp, now: &DirStamp, tick: Time) -> bool {
    then == now && then.mtime < tick
}

// ---------------------------------------------------------------------------------------------
// The parallel part: one job per folder (big folders split), no libgit2 inside.

/// What a folder turned out to be.
#[derive(Clone, Copy, Debug)]
enum DirState {
    Dir(DirStamp),
    /// Missing, or not a real folder (a file or a symlink stands there).
    Absent,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    Dir,
    Symlink,
    Other,
}

/// An entry of a listing that is not in the index.
struct Unknown {
    name: Vec<u8>,
    kind: Kind,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Check {
    Deleted,
    /// Stat data differs or is racy, or the entry needs libgit2 (gitlink, intent-to-add).
    Ask,
}

struct Job {
    node: usize,
    from: usize,
    to: usize,
    /// The job that opens the folder first: it reports the folder's state and listing.
    lead: bool,
}

#[derive(Default)]
struct JobOut {
    node: usize,
    state: Option<DirState>,
    /// `Some` when the folder was listed (unknown entries), `None` when its stamp is unchanged.
    listing: Option<Vec<Unknown>>,
    checks: Vec<(usize, Check)>,
    /// Tracked regular files whose permission bits are not the ones a checkout creates.
    odd_modes: Vec<(usize, u32)>,
    /// An error the fast walk does not handle (e.g. an unreadable folder).
    failed: bool,
}

const CHUNK: usize = 2048;
/// Up to this many files, an unchanged folder's files are stat'ed by path (no open and close).
const FEW: usize = 8;

/// Where a job stats its files from.
enum Base {
    Root,
    Folder(OwnedFd),
    Listed(Dir),
}

struct Ctx<'a> {
    root: &'a OwnedFd,
    tracked: &'a Tracked,
    seen: Option<&'a Seen>,
    cmp: Compare,
}

impl Ctx<'_> {
    fn run(&self, job: &Job) -> JobOut {
        let mut out = JobOut {
            node: job.node,
            ..JobOut::default()
        };
        let files = &self.tracked.nodes[job.node].files[job.from..job.to];
        if let Some(base) = self.base(job, files.len(), &mut out) {
            self.check(&base, files, &mut out);
        }
        out
    }

    /// Opens what the job stats its files from; the lead job also stamps the folder and lists
    /// it unless the snapshot's listing still holds. `None` when the job is done (the folder
    /// is absent, or the walk must stand aside), with `out` saying so.
    fn base(&self, job: &Job, files: usize, out: &mut JobOut) -> Option<Base> {
        let node = &self.tracked.nodes[job.node];
        let rel: &[u8] = if node.rel.is_empty() { b"." } else { &node.rel };
        let open = || {
            rustix::fs::openat(
                self.root,
                rel,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
        };
        if !job.lead {
            return match open() {
                Ok(fd) => Some(Base::Folder(fd)),
                // The folder changed under the walk: libgit2's walk answers instead.
                Err(_) => {
                    out.failed = true;
                    None
                }
            };
        }
        // The stamp is read before the listing: a change made during the listing shows as
        // a changed stamp next time.
        let stamp = match rustix::fs::statat(self.root, rel, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if st.st_mode & 0o170000 == 0o040000 => {
                let st = file_stat(&st);
                DirStamp {
                    dev: st.dev,
                    ino: st.ino,
                    mtime: st.mtime,
                    ctime: st.ctime,
                }
            }
            Ok(_) | Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => {
                out.state = Some(DirState::Absent);
                return None;
            }
            Err(_) => {
                out.failed = true;
                return None;
            }
        };
        out.state = Some(DirState::Dir(stamp));
        let holds = self.seen.is_some_and(|s| {
            s.dirs
                .get(&node.rel)
                .is_some_and(|r| listing_holds(&r.stamp, &stamp, s.tick))
        });
        if holds && files <= FEW {
            // A few files are cheaper to stat by path than through an opened folder.
            return Some(Base::Root);
        }
        match open().map(|fd| (holds, fd)) {
            Ok((true, fd)) => Some(Base::Folder(fd)),
            Ok((false, fd)) => match Dir::new(fd)
                .ok()
                .and_then(|mut dir| self.list(job.node, &mut dir).map(|u| (dir, u)))
            {
                Some((dir, unknown)) => {
                    out.listing = Some(unknown);
                    Some(Base::Listed(dir))
                }
                None => {
                    out.failed = true;
                    None
                }
            },
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => {
                out.state = Some(DirState::Absent);
                None
            }
            Err(_) => {
                out.failed = true;
                None
            }
        }
    }

    /// Stats the job's files: what their stat data cannot settle is asked of libgit2 later.
    fn check(&self, base: &Base, files: &[usize], out: &mut JobOut) {
        for &i in files {
            let e = &self.tracked.entries[i];
            if e.skip {
                continue;
            }
            if e.gitlink() || e.intent_to_add {
                out.checks.push((i, Check::Ask));
                continue;
            }
            let stat = match base {
                Base::Root => {
                    rustix::fs::statat(self.root, e.path.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
                }
                Base::Folder(fd) => rustix::fs::statat(fd, e.name(), AtFlags::SYMLINK_NOFOLLOW),
                Base::Listed(dir) => dir
                    .fd()
                    .and_then(|fd| rustix::fs::statat(fd, e.name(), AtFlags::SYMLINK_NOFOLLOW)),
            };
            match stat {
                Ok(st) => {
                    let st = file_stat(&st);
                    let (plain, exec) = crate::git::files::checkout_modes();
                    let perm = st.mode & 0o7777;
                    if st.mode & 0o170000 == 0o100000 && perm != plain && perm != exec {
                        out.odd_modes.push((i, perm));
                    }
                    if st.mode & 0o170000 == 0o040000 {
                        // A folder where a file is tracked: the file is gone (the listing
                        // reports what the folder holds).
                        out.checks.push((i, Check::Deleted));
                    } else if !unchanged(e, &st, &self.cmp) {
                        out.checks.push((i, Check::Ask));
                    }
                }
                Err(Errno::NOENT | Errno::NOTDIR) => out.checks.push((i, Check::Deleted)),
                Err(_) => out.checks.push((i, Check::Ask)),
            }
        }
    }

    /// The folder's entries that are not in the index (`.git` never counts, as in git).
    fn list(&self, node: usize, dir: &mut Dir) -> Option<Vec<Unknown>> {
        let mut unknown = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.ok()?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." || name == b".git" {
                continue;
            }
            let kind = match entry.file_type() {
                FileType::Directory => Kind::Dir,
                FileType::Symlink => Kind::Symlink,
                FileType::Unknown => {
                    match dir
                        .fd()
                        .and_then(|fd| rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW))
                    {
                        Ok(st) => match st.st_mode & 0o170000 {
                            0o040000 => Kind::Dir,
                            0o120000 => Kind::Symlink,
                            _ => Kind::Other,
                        },
                        Err(_) => Kind::Other,
                    }
                }
                _ => Kind::Other,
            };
            if let Some(e) = self.tracked.file_named(node, name) {
                // A tracked file, or a folder standing where one is tracked (a submodule's
                // folder is its gitlink).
                if kind != Kind::Dir || e.mode == MODE_GITLINK || e.skip {
                    continue;
                }
            } else if self.tracked.subdir_named(node, name) && kind == Kind::Dir {
                continue;
            }
            unknown.push(Unknown {
                name: name.to_vec(),
                kind,
            });
        }
        Some(unknown)
    }
}

fn run_jobs(ctx: &Ctx<'_>, jobs: &[Job], next: &AtomicUsize) -> Vec<JobOut> {
    let mut outs = Vec::new();
    loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        let Some(job) = jobs.get(k) else {
            return outs;
        };
        outs.push(ctx.run(job));
    }
}

// ---------------------------------------------------------------------------------------------
// The walk.

struct Walk {
    dirty: Vec<Dirty>,
    /// Tracked files with modes a checkout would not recreate (see `JobOut::odd_modes`).
    odd_modes: Vec<(Vec<u8>, u32)>,
    index: IndexStamp,
    dirs: HashMap<Vec<u8>, DirRecord>,
}

/// The index file's stamp, or `None` when it cannot be read (the fast walk then stands aside).
fn index_stamp(index: &git2::Index) -> Option<IndexStamp> {
    use std::io::{Read, Seek, SeekFrom};
    let path = index.path()?;
    let mut file = std::fs::File::open(path).ok()?;
    let meta = file.metadata().ok()?;
    let mut checksum = vec![0u8; 32];
    let len = meta.len().min(32);
    file.seek(SeekFrom::End(-(len as i64))).ok()?;
    checksum.truncate(len as usize);
    file.read_exact(&mut checksum).ok()?;
    Some(IndexStamp {
        checksum,
        mtime: Time {
            sec: meta.mtime(),
            nsec: meta.mtime_nsec() as u32,
        },
    })
}

/// The fast walk, or `None` where it stands aside for libgit2's.
fn fast_walk(repo: &Repository, seen: Option<&Seen>, untracked: Untracked) -> Result<Option<Walk>> {
    let Some(workdir) = repo.workdir() else {
        return Ok(None);
    };
    let Some(prep) = Prep::read(repo, workdir, seen)? else {
        return Ok(None);
    };
    let Some(outs) = prep.stat_all() else {
        return Ok(None);
    };
    let tracked = &prep.tracked;
    let mut found = Found::gather(tracked, outs);
    crate::trace::mark(&format!(
        "    status: {} of {} folders listed, {} entries stat'ed",
        found.listing.iter().filter(|l| l.is_some()).count(),
        tracked.nodes.len(),
        tracked.entries.len()
    ));
    let asked = found.ask.len();
    found.settle(repo, tracked, untracked)?;
    crate::trace::mark(&format!(
        "    status: {asked} racy or changed entries asked of libgit2"
    ));
    let ignored = Ignored { repo, workdir };
    let dirs = found.untracked(&ignored, tracked, prep.seen, untracked)?;
    crate::trace::mark("    status: untracked entries");
    found.odd_modes.sort();
    Ok(Some(Walk {
        odd_modes: found.odd_modes,
        dirty: found.dirty,
        index: prep.stamp,
        dirs,
    }))
}

/// What the walk reads before it stats anything: the index, its stamp, git's stat settings.
struct Prep<'s> {
    tracked: Tracked,
    stamp: IndexStamp,
    /// The snapshot, when it was taken against this same index.
    seen: Option<&'s Seen>,
    cmp: Compare,
    root: OwnedFd,
}

impl<'s> Prep<'s> {
    /// `None` where the fast walk stands aside: a case-insensitive work tree, an index that
    /// cannot be read or holds a conflict, a root that cannot be opened.
    fn read(repo: &Repository, workdir: &Path, seen: Option<&'s Seen>) -> Result<Option<Self>> {
        let config = repo.config()?;
        let flag = |key: &str, default: bool| config.get_bool(key).unwrap_or(default);
        if flag("core.ignorecase", false) {
            return Ok(None);
        }
        let cmp_stat = config
            .get_string("core.checkStat")
            .map(|v| v.to_ascii_lowercase());
        let mut index = repo.index()?;
        index.read(false)?;
        let Some(stamp) = index_stamp(&index) else {
            return Ok(None);
        };
        let Some(tracked) = Tracked::read(&index) else {
            return Ok(None);
        };
        crate::trace::mark("    status: index read");
        // A snapshot taken against another index says nothing about what is untracked now.
        let seen = seen.filter(|s| s.index.checksum == stamp.checksum);
        let racy_from = match seen {
            // Restoring the index's bytes gives it a new mtime, not new stat data.
            Some(s) => s.index.mtime.min(stamp.mtime),
            None => stamp.mtime,
        };
        let cmp = Compare {
            racy_from,
            trust_ctime: flag("core.trustctime", true),
            full_stat: cmp_stat.as_deref() != Ok("minimal"),
        };
        let root = match rustix::fs::open(
            workdir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(_) => return Ok(None),
        };
        Ok(Some(Prep {
            tracked,
            stamp,
            seen,
            cmp,
            root,
        }))
    }

    /// Runs every job, on up to 8 threads for a big index; `None` when one failed or a
    /// thread panicked (libgit2's walk answers then).
    fn stat_all(&self) -> Option<Vec<JobOut>> {
        let jobs = jobs(&self.tracked);
        let ctx = Ctx {
            root: &self.root,
            tracked: &self.tracked,
            seen: self.seen,
            cmp: self.cmp,
        };
        let next = AtomicUsize::new(0);
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8)
            .min(1 + self.tracked.entries.len() / 4096);
        let mut outs = Vec::with_capacity(jobs.len());
        let mut panicked = false;
        std::thread::scope(|s| {
            let helpers: Vec<_> = (1..threads)
                .map(|_| s.spawn(|| run_jobs(&ctx, &jobs, &next)))
                .collect();
            outs.extend(run_jobs(&ctx, &jobs, &next));
            for h in helpers {
                match h.join() {
                    Ok(o) => outs.extend(o),
                    Err(_) => panicked = true,
                }
            }
        });
        if panicked || outs.iter().any(|o| o.failed) {
            return None;
        }
        Some(outs)
    }
}

/// One job per folder; a big folder's files are split into jobs of `CHUNK`.
fn jobs(tracked: &Tracked) -> Vec<Job> {
    let mut jobs = Vec::new();
    for (n, node) in tracked.nodes.iter().enumerate() {
        let mut from = 0;
        loop {
            let to = (from + CHUNK).min(node.files.len());
            jobs.push(Job {
                node: n,
                from,
                to,
                lead: from == 0,
            });
            if to >= node.files.len() {
                break;
            }
            from = to;
        }
    }
    jobs
}

/// The jobs' answers, gathered per folder.
struct Found {
    state: Vec<Option<DirState>>,
    /// Whether each folder was reached through real folders only (never a symlink).
    reached: Vec<bool>,
    listing: Vec<Option<Vec<Unknown>>>,
    /// Entries whose stat data could not settle them, for libgit2.
    ask: Vec<usize>,
    dirty: Vec<Dirty>,
    odd_modes: Vec<(Vec<u8>, u32)>,
}

impl Found {
    /// Gathers per folder; a folder is reached only through real folders (never a symlink).
    fn gather(tracked: &Tracked, outs: Vec<JobOut>) -> Found {
        let nodes = &tracked.nodes;
        let mut state: Vec<Option<DirState>> = vec![None; nodes.len()];
        for o in &outs {
            if o.state.is_some() {
                state[o.node] = o.state;
            }
        }
        let mut reached = vec![false; nodes.len()];
        for (n, node) in nodes.iter().enumerate() {
            let parent_ok = node.parent.is_none_or(|p| reached[p]);
            reached[n] = parent_ok && matches!(state[n], Some(DirState::Dir(_)));
        }
        let mut listing: Vec<Option<Vec<Unknown>>> = (0..nodes.len()).map(|_| None).collect();
        let mut ask: Vec<usize> = Vec::new();
        let mut out: Vec<Dirty> = Vec::new();
        let mut odd_modes: Vec<(Vec<u8>, u32)> = Vec::new();
        for o in outs {
            if !reached[o.node] {
                continue;
            }
            odd_modes.extend(
                o.odd_modes
                    .iter()
                    .map(|(i, m)| (tracked.entries[*i].path.clone(), *m)),
            );
            if o.listing.is_some() {
                listing[o.node] = o.listing;
            }
            for (i, check) in o.checks {
                match check {
                    Check::Deleted => {
                        out.push(dirty(tracked.entries[i].path.clone(), "deleted", true))
                    }
                    Check::Ask => ask.push(i),
                }
            }
        }
        // Entries under a folder that is missing or not a real folder are gone, as git says.
        for (n, node) in nodes.iter().enumerate() {
            if reached[n] {
                continue;
            }
            for &i in &node.files {
                let e = &tracked.entries[i];
                if e.skip {
                    continue;
                }
                if e.gitlink() || e.intent_to_add {
                    ask.push(i);
                } else {
                    out.push(dirty(e.path.clone(), "deleted", true));
                }
            }
        }
        Found {
            state,
            reached,
            listing,
            ask,
            dirty: out,
            odd_modes,
        }
    }

    /// What the stat data could not settle, libgit2 decides: path by path, or with one walk
    /// of its own when there are many.
    fn settle(&mut self, repo: &Repository, tracked: &Tracked, untracked: Untracked) -> Result<()> {
        let ask = std::mem::take(&mut self.ask);
        let out = &mut self.dirty;
        if ask.len() > 64 + tracked.entries.len() / 64 {
            let asked: std::collections::HashSet<&[u8]> = ask
                .iter()
                .map(|&i| tracked.entries[i].path.as_slice())
                .collect();
            out.extend(
                libgit2_workdir(repo, untracked, false)?
                    .into_iter()
                    .filter(|d| asked.contains(d.raw.as_slice())),
            );
        } else {
            for i in ask {
                let path = &tracked.entries[i].path;
                let wt = Status::WT_NEW
                    | Status::WT_MODIFIED
                    | Status::WT_DELETED
                    | Status::WT_TYPECHANGE
                    | Status::WT_RENAMED
                    | Status::CONFLICTED;
                match repo.status_file(os(path)) {
                    Ok(s) if !s.intersects(wt) => {}
                    Ok(s) => out.push(dirty(path.clone(), label(s & wt).0, true)),
                    Err(_) => out.push(dirty(path.clone(), "modified", true)),
                }
            }
        }
        Ok(())
    }

    /// Untracked entries: from this walk's listing, or from the snapshot where the folder is
    /// unchanged. Returns each reached folder's record for the next snapshot.
    fn untracked(
        &mut self,
        ignored: &Ignored<'_>,
        tracked: &Tracked,
        seen: Option<&Seen>,
        untracked: Untracked,
    ) -> Result<HashMap<Vec<u8>, DirRecord>> {
        let mut dirs: HashMap<Vec<u8>, DirRecord> = HashMap::new();
        for (n, node) in tracked.nodes.iter().enumerate() {
            if !self.reached[n] {
                continue;
            }
            let Some(DirState::Dir(stamp)) = self.state[n] else {
                continue;
            };
            let found: Vec<(Vec<u8>, bool)> = match self.listing[n].take() {
                Some(unknown) => {
                    let mut found = Vec::new();
                    for u in unknown {
                        let path = join(&node.rel, &u.name);
                        if !ignored.is(&path, u.kind)? {
                            found.push((u.name, u.kind == Kind::Dir));
                        }
                    }
                    found
                }
                None => match seen.and_then(|s| s.dirs.get(&node.rel)) {
                    Some(record) => record.untracked.clone(),
                    None => Vec::new(),
                },
            };
            for (name, is_dir) in &found {
                let path = join(&node.rel, name);
                // git lists a folder standing where a file is tracked only file by file.
                let shadows_file = tracked.file_named(n, name).is_some();
                if *is_dir && shadows_file && untracked == Untracked::Folders {
                    continue;
                }
                if *is_dir {
                    ignored.untracked_dir(&path, untracked, &mut self.dirty)?;
                } else {
                    self.dirty.push(dirty(path, "untracked", false));
                }
            }
            dirs.insert(
                node.rel.clone(),
                DirRecord {
                    stamp,
                    untracked: found,
                },
            );
        }
        Ok(dirs)
    }
}

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(dir.len() + 1 + name.len());
    if !dir.is_empty() {
        p.extend_from_slice(dir);
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// Ignore rules as libgit2 reads them: `.gitignore` in every folder up the path,
/// `.git/info/exclude`, `core.excludesFile`.
struct Ignored<'a> {
    repo: &'a Repository,
    workdir: &'a Path,
}

impl Ignored<'_> {
    fn is(&self, path: &[u8], kind: Kind) -> Result<bool> {
        match kind {
            Kind::Dir => {
                let mut with_slash = path.to_vec();
                with_slash.push(b'/');
                Ok(self.repo.is_path_ignored(os(&with_slash))?)
            }
            Kind::Other => Ok(self.repo.is_path_ignored(os(path))?),
            // libgit2's path check follows a symlink to decide whether it names a folder;
            // git never does, and neither does libgit2's own status of the path.
            Kind::Symlink => {
                let by_libgit2 = self.repo.is_path_ignored(os(path))?;
                if !self.workdir.join(os(path)).is_dir() {
                    return Ok(by_libgit2);
                }
                // A symlink to a folder: libgit2 follows it and applies folder-only rules
                // (`build/`); git never follows it. git itself answers this rare case.
                let asked = std::process::Command::new("git")
                    .arg("-C")
                    .arg(self.workdir)
                    .args(["check-ignore", "-q", "--no-index", "--"])
                    .arg(os(path))
                    .env_remove("GIT_DIR")
                    .env_remove("GIT_WORK_TREE")
                    .env_remove("GIT_INDEX_FILE")
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status();
                Ok(match asked.map(|s| s.code()) {
                    Ok(Some(0)) => true,
                    Ok(Some(1)) => false,
                    _ => by_libgit2,
                })
            }
        }
    }

    /// Reports an untracked folder: `d/` (nested repositories always, or with `Folders`), or
    /// each untracked, not ignored file in it. Nothing when it holds none.
    fn untracked_dir(&self, rel: &[u8], untracked: Untracked, out: &mut Vec<Dirty>) -> Result<()> {
        let mut files = Vec::new();
        let whole = self.collect(rel, untracked == Untracked::Folders, &mut files)?;
        if whole {
            let mut p = rel.to_vec();
            p.push(b'/');
            out.push(dirty(p, "untracked", false));
        } else if untracked == Untracked::Folders {
            if !files.is_empty() {
                let mut p = rel.to_vec();
                p.push(b'/');
                out.push(dirty(p, "untracked", false));
            }
        } else {
            out.extend(files.into_iter().map(|f| dirty(f, "untracked", false)));
        }
        Ok(())
    }

    /// Collects untracked, not ignored files under `rel`; `true` when the folder must be
    /// reported whole (a nested repository, or a folder that cannot be read).
    fn collect(&self, rel: &[u8], first_only: bool, files: &mut Vec<Vec<u8>>) -> Result<bool> {
        let full: PathBuf = self.workdir.join(os(rel));
        let Ok(read) = std::fs::read_dir(&full) else {
            return Ok(true);
        };
        let mut entries: Vec<(Vec<u8>, Kind)> = Vec::new();
        for entry in read {
            let Ok(entry) = entry else {
                return Ok(true);
            };
            let name = entry.file_name().as_bytes().to_vec();
            if name == b".git" {
                return Ok(true);
            }
            let kind = match entry.file_type() {
                Ok(t) if t.is_dir() => Kind::Dir,
                Ok(t) if t.is_symlink() => Kind::Symlink,
                _ => Kind::Other,
            };
            entries.push((name, kind));
        }
        entries.sort();
        for (name, kind) in entries {
            let path = join(rel, &name);
            if self.is(&path, kind)? {
                continue;
            }
            if kind == Kind::Dir {
                let before = files.len();
                if self.collect(&path, first_only, files)? {
                    // A nested repository inside an untracked folder: listed whole.
                    files.truncate(before);
                    let mut p = path;
                    p.push(b'/');
                    files.push(p);
                }
            } else {
                files.push(path);
            }
            if first_only && !files.is_empty() {
                return Ok(false);
            }
        }
        Ok(false)
    }
}

/// A lower bound of the file-system clock now: the mtime of a file written now beside the
/// index (same file system as the work tree in almost every repo), and never later than two
/// seconds before the wall clock (file systems with coarse timestamps, or another clock).
fn walk_tick(repo: &Repository) -> Time {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.saturating_sub(std::time::Duration::from_secs(2)))
        .unwrap_or_default();
    let wall = Time {
        sec: i64::try_from(wall.as_secs()).unwrap_or(i64::MAX),
        nsec: wall.subsec_nanos(),
    };
    let dir = super::factory_dir(repo);
    let marker = dir.join("status-tick");
    let written = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&marker, b""))
        .and_then(|()| std::fs::metadata(&marker));
    match written {
        Ok(meta) => wall.min(Time {
            sec: meta.mtime(),
            nsec: meta.mtime_nsec() as u32,
        }),
        Err(_) => wall,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(sec: i64, nsec: u32) -> Time {
        Time { sec, nsec }
    }

    fn entry(mode: u32) -> Entry {
        Entry {
            path: b"d/f".to_vec(),
            name_at: 2,
            mode,
            size: 6,
            mtime: t(100, 5),
            ctime: t(100, 7),
            ino: 42,
            uid: 1000,
            gid: 1000,
            skip: false,
            intent_to_add: false,
        }
    }

    fn stat_of(e: &Entry) -> FileStat {
        FileStat {
            mode: if e.mode == 0o120000 { 0o120777 } else { e.mode },
            size: u64::from(e.size),
            mtime: e.mtime,
            ctime: e.ctime,
            ino: u64::from(e.ino),
            dev: 1,
            uid: e.uid,
            gid: e.gid,
        }
    }

    const CMP: Compare = Compare {
        racy_from: Time { sec: 200, nsec: 0 },
        trust_ctime: true,
        full_stat: true,
    };

    #[test]
    fn only_identical_non_racy_stat_data_means_unchanged() {
        for mode in [0o100644, 0o100755, 0o120000] {
            let e = entry(mode);
            assert!(unchanged(&e, &stat_of(&e), &CMP), "{mode:o}");
        }
        let e = entry(0o100644);
        let same = stat_of(&e);
        let changed: Vec<(&str, FileStat)> = vec![
            ("size", FileStat { size: 7, ..same }),
            (
                "mtime nanoseconds",
                FileStat {
                    mtime: t(100, 6),
                    ..same
                },
            ),
            (
                "ctime (mtime set back)",
                FileStat {
                    ctime: t(150, 0),
                    ..same
                },
            ),
            ("inode", FileStat { ino: 43, ..same }),
            ("owner", FileStat { uid: 0, ..same }),
            (
                "executable bit",
                FileStat {
                    mode: 0o100755,
                    ..same
                },
            ),
            (
                "now a symlink",
                FileStat {
                    mode: 0o120777,
                    ..same
                },
            ),
        ];
        for (what, st) in changed {
            assert!(!unchanged(&e, &st, &CMP), "{what}");
        }
        // A gitlink is never settled by stat data.
        let g = entry(0o160000);
        assert!(!unchanged(&g, &stat_of(&g), &CMP));
    }

    #[test]
    fn racy_entries_are_never_unchanged() {
        let e = entry(0o100644);
        for racy_from in [t(100, 5), t(100, 4), t(99, 0)] {
            let cmp = Compare { racy_from, ..CMP };
            assert!(!unchanged(&e, &stat_of(&e), &cmp), "{racy_from:?}");
        }
        let cmp = Compare {
            racy_from: t(100, 6),
            ..CMP
        };
        assert!(unchanged(&e, &stat_of(&e), &cmp));
    }

    #[test]
    fn core_trustctime_and_checkstat_minimal_relax_the_comparison() {
        let e = entry(0o100644);
        let st = FileStat {
            ctime: t(150, 0),
            ino: 7,
            ..stat_of(&e)
        };
        let relaxed = Compare {
            trust_ctime: false,
            full_stat: false,
            ..CMP
        };
        assert!(unchanged(&e, &st, &relaxed));
        assert!(!unchanged(&e, &st, &CMP));
    }

    #[test]
    fn a_folder_listing_holds_only_for_the_same_stamp_outside_the_walk_tick() {
        let then = DirStamp {
            dev: 1,
            ino: 9,
            mtime: t(100, 500),
            ctime: t(100, 500),
        };
        assert!(listing_holds(&then, &then, t(100, 501)));
        // The folder changed within the walk's own tick: its stamp cannot tell.
        assert!(!listing_holds(&then, &then, t(100, 500)));
        assert!(!listing_holds(&then, &then, t(99, 0)));
        for now in [
            DirStamp {
                mtime: t(100, 501),
                ..then
            },
            DirStamp {
                ctime: t(101, 0),
                ..then
            },
            DirStamp { ino: 10, ..then },
            DirStamp { dev: 2, ..then },
        ] {
            assert!(!listing_holds(&then, &now, t(200, 0)), "{now:?}");
        }
    }

    #[test]
    fn the_index_folders_are_built_parents_first_with_sorted_names() {
        let mut entries = Vec::new();
        for p in ["a-b/x", "a/b/c", "a/d", "a/b-c/e", "top"] {
            let mut e = entry(0o100644);
            e.name_at = p.rfind('/').map_or(0, |i| i + 1);
            e.path = p.as_bytes().to_vec();
            entries.push(e);
        }
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        let tracked = Tracked::from_entries(entries);
        for (n, node) in tracked.nodes.iter().enumerate() {
            if let Some(p) = node.parent {
                assert!(p < n);
            }
        }
        let a = tracked
            .nodes
            .iter()
            .position(|n| n.rel == b"a")
            .expect("folder a");
        let names: Vec<&[u8]> = tracked.nodes[a]
            .subdirs
            .iter()
            .map(|(n, _)| n.as_slice())
            .collect();
        assert_eq!(names, vec![&b"b"[..], b"b-c"]);
        assert!(tracked.file_named(a, b"d").is_some());
        assert!(tracked.file_named(a, b"b").is_none());
        assert!(tracked.subdir_named(a, b"b-c"));
        assert!(tracked.file_named(0, b"top").is_some());
    }
}
