//! The run records and their seals an agent must leave as they were (SPEC §7, the agent
//! audit): every `refs/factory/<run_id>` and every `.git/factory/made/<run_id>`. A record and
//! its seal under the run id a later run will have (ids come from public inputs) would make
//! that run be served a PASS no check of this clone ran, and `--commit` commit its change; an
//! unconfined agent can read the sealing key, so the seal alone proves nothing. Recorded
//! before the agent runs (names and object ids; the seals' stat data and bytes, a hundred
//! bytes each), compared after it exits: what changed is put back — a new record or seal
//! removed, a moved or removed record set back, a changed or removed seal written back.
//!
//! Other runs of the repo write their own records and seals meanwhile (a batch, a
//! `--worktree` run started by hand); by `git::restore`'s one rule
//! ([`runs_in_progress`](crate::git::restore::runs_in_progress)) those of a run seen under way
//! in a live harness — at the capture, every 50 ms while the agent works (a run of a batch
//! may start and end meanwhile), or at the audit — are theirs and left alone, as are the
//! run's own. Unconfined, an agent runs as the user: it could plant an owner file naming a
//! live process of its own making as another run's harness, so outside `--sandbox` (where
//! the key is hidden and `.git` read-only) this is detection, not a wall.

use super::watched::{stamp, PutBack, Stamp};
use crate::error::Result;
use crate::git::nofollow;
use git2::{Oid, Repository};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

const RECORDS: &str = "refs/factory/";
const SEALS: &str = "made";

/// See the module's documentation.
#[derive(Debug)]
pub struct Sealed {
    /// `.git/factory/made`.
    seals_dir: PathBuf,
    factory_dir: PathBuf,
    records: BTreeMap<String, Oid>,
    seals: BTreeMap<Vec<u8>, (Stamp, Option<Vec<u8>>)>,
    /// The runs seen under way in other harnesses (or other runs of this process): at the
    /// capture, and every [`POLL`] while the agent works ([`Sealed::watching`]).
    under_way: std::sync::Mutex<BTreeSet<String>>,
}

/// How often the runs under way are looked at while an agent works: a run of a batch that
/// starts and ends meanwhile writes its record and seal and is gone by the audit.
const POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Every run record ref (not the journal) and what it points at.
fn records(repo: &Repository) -> Result<BTreeMap<String, Oid>> {
    let mut out = BTreeMap::new();
    for r in repo.references_glob("refs/factory/*")? {
        let r = r?;
        let Some(name) = r.name() else { continue };
        if name.starts_with("refs/factory/journal/") {
            continue;
        }
        // A symbolic one points at nothing of its own: its name is what counts.
        out.insert(name.to_string(), r.target().unwrap_or_else(Oid::zero));
    }
    Ok(out)
}

/// Every entry of `made/` with its stat data (never followed).
fn seal_stamps(dir: &std::path::Path) -> BTreeMap<Vec<u8>, Stamp> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if let Ok(meta) = std::fs::symlink_metadata(e.path()) {
            out.insert(e.file_name().as_bytes().to_vec(), stamp(&meta));
        }
    }
    out
}

/// A seal's file is named by its run id.
fn id_of_seal(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

impl Sealed {
    pub fn capture(repo: &Repository) -> Result<Self> {
        crate::trace::mark("  agent audit: capturing seals");
        let factory_dir = crate::git::factory_dir(repo);
        let seals_dir = factory_dir.join(SEALS);
        let mut seals = BTreeMap::new();
        for (name, st) in seal_stamps(&seals_dir) {
            let path = seals_dir.join(std::ffi::OsStr::from_bytes(&name));
            let small =
                std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() <= 4096);
            let bytes = small.then(|| std::fs::read(&path).ok()).flatten();
            seals.insert(name, (st, bytes));
        }
        crate::trace::mark("  agent audit: seals captured");
        Ok(Sealed {
            records: records(repo)?,
            seals,
            under_way: std::sync::Mutex::new(crate::git::restore::runs_in_progress(&factory_dir)),
            seals_dir,
            factory_dir,
        })
    }

    /// Runs `work` (the agent) while noting, every [`POLL`], the runs under way beside it.
    pub fn watching<T>(&self, work: impl FnOnce() -> T) -> T {
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    self.note_under_way();
                    std::thread::sleep(POLL);
                }
            });
            let out = work();
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            out
        })
    }

    fn note_under_way(&self) {
        let now = crate::git::restore::runs_in_progress(&self.factory_dir);
        let mut seen = match self.under_way.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        seen.extend(now);
    }

    /// Puts back every record and seal that changed and is neither this run's (`own`) nor
    /// another run's under way, naming each in `out`.
    pub fn put_back(&self, repo: &Repository, own: &str, out: &mut PutBack) -> Result<()> {
        self.note_under_way();
        let under_way = match self.under_way.lock() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let theirs = |id: &str| id == own || under_way.contains(id);
        let now = records(repo)?;
        let names: BTreeSet<&String> = self.records.keys().chain(now.keys()).collect();
        for name in names {
            let (was, is) = (self.records.get(name), now.get(name));
            if was == is || theirs(name.strip_prefix(RECORDS).unwrap_or(name)) {
                continue;
            }
            let done =
                crate::store::set_record_back(repo, name, was.copied().filter(|o| !o.is_zero()));
            let how = match (was, is) {
                (None, _) => "made by the agent; removed",
                (_, None) => "removed by the agent; put back",
                _ => "moved by the agent; put back",
            };
            match done {
                Ok(()) => out.restored.push(format!("{name} ({how})")),
                Err(e) => out
                    .failed
                    .push(format!("{name} (not put back: {})", e.message)),
            }
        }
        let stamps = seal_stamps(&self.seals_dir);
        let names: BTreeSet<&Vec<u8>> = self.seals.keys().chain(stamps.keys()).collect();
        for name in names {
            let was = self.seals.get(name);
            if was.map(|(s, _)| s) == stamps.get(name) || theirs(&id_of_seal(name)) {
                continue;
            }
            let shown = format!(".git/factory/made/{}", name.escape_ascii());
            let done = match was {
                None => nofollow::remove_file(&self.seals_dir, name)
                    .or_else(|_| {
                        std::fs::remove_dir_all(
                            self.seals_dir.join(std::ffi::OsStr::from_bytes(name)),
                        )
                    })
                    .map(|()| "made by the agent; removed"),
                Some((st, Some(bytes))) => {
                    nofollow::replace_file(&self.seals_dir, name, bytes, st.mode & 0o7777)
                        .map(|()| "changed by the agent; put back")
                }
                Some((_, None)) => Err(std::io::Error::other("not kept")),
            };
            match done {
                Ok(how) => out.restored.push(format!("{shown} ({how})")),
                Err(e) => out.failed.push(format!("{shown} (not put back: {e})")),
            }
        }
        crate::trace::mark("  agent audit: records and seals compared");
        Ok(())
    }
}
