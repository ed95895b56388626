//! The parallel part of the walk: one job per folder (big folders split), no libgit2 inside.
//! Each job stats its files through the folder opened once; the lead job also stamps and lists
//! the folder.

use super::index::{Tracked, MODE_GITLINK};
use super::model::{DirStamp, Kind, Seen};
use super::stat::{file_stat, listing_holds, unchanged, Compare};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What a folder turned out to be.
#[derive(Clone, Copy, Debug)]
pub(super) enum DirState {
    Dir(DirStamp),
    /// Missing, or not a real folder (a file or a symlink stands there).
    Absent,
}

/// An entry of a listing that is not in the index.
pub(super) struct Unknown {
    pub(super) name: Vec<u8>,
    pub(super) kind: Kind,
    pub(super) ino: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Check {
    Deleted,
    /// Stat data differs or is racy, or the entry needs libgit2 (gitlink, intent-to-add).
    Ask,
}

pub(super) struct Job {
    pub(super) node: usize,
    pub(super) from: usize,
    pub(super) to: usize,
    /// The job that opens the folder first: it reports the folder's state and listing.
    pub(super) lead: bool,
}

#[derive(Default)]
pub(super) struct JobOut {
    pub(super) node: usize,
    pub(super) state: Option<DirState>,
    /// `Some` when the folder was listed (unknown entries), `None` when its stamp is unchanged.
    pub(super) listing: Option<Vec<Unknown>>,
    pub(super) checks: Vec<(usize, Check)>,
    /// Tracked regular files whose permission bits are not the ones a checkout creates.
    pub(super) odd_modes: Vec<(usize, u32)>,
    /// An error the fast walk does not handle (e.g. an unreadable folder).
    pub(super) failed: bool,
}

pub(super) const CHUNK: usize = 2048;

/// Up to this many files, an unchanged folder's files are stat'ed by path (no open and close).
pub(super) const FEW: usize = 8;

/// Where a job stats its files from.
pub(super) enum Base {
    Root,
    Folder(OwnedFd),
    Listed(Dir),
}

pub(super) struct Ctx<'a> {
    pub(super) root: &'a OwnedFd,
    pub(super) tracked: &'a Tracked,
    pub(super) seen: Option<&'a Seen>,
    pub(super) cmp: Compare,
}

impl Ctx<'_> {
    pub(super) fn run(&self, job: &Job) -> JobOut {
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
    pub(super) fn base(&self, job: &Job, files: usize, out: &mut JobOut) -> Option<Base> {
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
                    mode: st.mode & 0o7777,
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
    pub(super) fn check(&self, base: &Base, files: &[usize], out: &mut JobOut) {
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
    pub(super) fn list(&self, node: usize, dir: &mut Dir) -> Option<Vec<Unknown>> {
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
                ino: entry.ino(),
            });
        }
        Some(unknown)
    }
}

pub(super) fn run_jobs(ctx: &Ctx<'_>, jobs: &[Job], next: &AtomicUsize) -> Vec<JobOut> {
    let mut outs = Vec::new();
    loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        let Some(job) = jobs.get(k) else {
            return outs;
        };
        outs.push(ctx.run(job));
    }
}

/// One job per folder; a big folder's files are split into jobs of `CHUNK`.
pub(super) fn jobs(tracked: &Tracked) -> Vec<Job> {
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
