//! The fast walk, step by step — read the index, stat every tracked file in parallel, gather
//! per folder, let libgit2 settle what stat data cannot, list the untracked entries — and
//! libgit2's own walk, which it falls back on.

use super::ignored::Ignored;
use super::index::{index_stamp, Tracked};
use super::jobs::{jobs, run_jobs, Check, Ctx, DirState, JobOut, Unknown};
use super::model::{dirty, join, os, DirRecord, IndexStamp, Kind, Seen, Untracked};
use super::stat::Compare;
use crate::error::Result;
use crate::git::{label, Dirty};
use git2::{Repository, Status, StatusOptions};
use rustix::fs::{Mode, OFlags};
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::AtomicUsize;

pub(super) struct Walk {
    pub(super) dirty: Vec<Dirty>,
    /// Tracked files with modes a checkout would not recreate (see `JobOut::odd_modes`).
    pub(super) odd_modes: Vec<(Vec<u8>, u32)>,
    pub(super) index: IndexStamp,
    pub(super) dirs: HashMap<Vec<u8>, DirRecord>,
    /// Whether an index entry is skip-worktree or assume-unchanged (git does not look at it).
    pub(super) skips: bool,
    /// The tracked `.gitignore` files (rules the status cache must see rewritten).
    pub(super) gitignores: Vec<Vec<u8>>,
}

/// The fast walk, or `None` where it stands aside for libgit2's.
pub(super) fn fast_walk(
    repo: &Repository,
    seen: Option<&Seen>,
    untracked: Untracked,
) -> Result<Option<Walk>> {
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
        skips: tracked.entries.iter().any(|e| e.skip),
        gitignores: (tracked.entries.iter())
            .filter(|e| e.name() == b".gitignore")
            .map(|e| e.path.clone())
            .collect(),
        odd_modes: found.odd_modes,
        dirty: found.dirty,
        index: prep.stamp,
        dirs,
    }))
}

/// What the walk reads before it stats anything: the index, its stamp, git's stat settings.
pub(super) struct Prep<'s> {
    pub(super) tracked: Tracked,
    pub(super) stamp: IndexStamp,
    /// The snapshot, when it was taken against this same index.
    pub(super) seen: Option<&'s Seen>,
    pub(super) cmp: Compare,
    pub(super) root: OwnedFd,
}

impl<'s> Prep<'s> {
    /// `None` where the fast walk stands aside: a case-insensitive work tree, an index that
    /// cannot be read or holds a conflict, a root that cannot be opened.
    pub(super) fn read(
        repo: &Repository,
        workdir: &Path,
        seen: Option<&'s Seen>,
    ) -> Result<Option<Self>> {
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
    pub(super) fn stat_all(&self) -> Option<Vec<JobOut>> {
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

/// The jobs' answers, gathered per folder.
pub(super) struct Found {
    pub(super) state: Vec<Option<DirState>>,
    /// Whether each folder was reached through real folders only (never a symlink).
    pub(super) reached: Vec<bool>,
    pub(super) listing: Vec<Option<Vec<Unknown>>>,
    /// Entries whose stat data could not settle them, for libgit2.
    pub(super) ask: Vec<usize>,
    pub(super) dirty: Vec<Dirty>,
    pub(super) odd_modes: Vec<(Vec<u8>, u32)>,
}

impl Found {
    /// Gathers per folder; a folder is reached only through real folders (never a symlink).
    pub(super) fn gather(tracked: &Tracked, outs: Vec<JobOut>) -> Found {
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
    pub(super) fn settle(
        &mut self,
        repo: &Repository,
        tracked: &Tracked,
        untracked: Untracked,
    ) -> Result<()> {
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
    pub(super) fn untracked(
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
            let (found, hidden) = match self.listing[n].take() {
                Some(unknown) => {
                    let mut found = Vec::new();
                    let mut hidden = Vec::new();
                    for u in unknown {
                        let path = join(&node.rel, &u.name);
                        if ignored.is(&path, u.kind)? {
                            hidden.push((u.name, u.ino));
                        } else {
                            found.push((u.name, u.kind == Kind::Dir));
                        }
                    }
                    (found, hidden)
                }
                None => match seen.and_then(|s| s.dirs.get(&node.rel)) {
                    Some(record) => (record.untracked.clone(), record.ignored.clone()),
                    None => (Vec::new(), Vec::new()),
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
                    ignored: hidden,
                },
            );
        }
        Ok(dirs)
    }
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
