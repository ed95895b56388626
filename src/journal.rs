//! The in-situ journal: written to `.git/factory/journal.<run_id>.<harness>.json`, named by the
//! run and the process that runs it (temp file and rename), before
//! every mutation of the user's tree — durably (fsync of the file and the folder) before an
//! apply, the stage whose pre-images a power cut must not lose — with the [`Restore`] that
//! `recover` applies after a crash. The running command's process group is noted beside it,
//! in a file named by the run and its harness process (see `run::orphans`). Under
//! `--sandbox`, the copies of the tree's read-only files saved before each check live in the
//! run's saved folder too ([`Journal::kept_dir`]), put back after every restore and by
//! `recover`.

use crate::error::{Error, Result};
use crate::git::files::FileOutcome;
use crate::git::restore::{RelPath, Report, Restore};
use git2::Repository;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    pub run_id: String,
    pub pid: u32,
    /// The harness process that wrote it ([`crate::harness::marker`]): its commands carry
    /// this in their environment, and its files name it. `None` in a journal from before.
    #[serde(default)]
    pub harness: Option<String>,
    pub stage: String,
    /// What putting the repo back needs, recorded before the first change: the worktree
    /// (root and git dir), baseline, HEAD and refs, saved index, pre-images with modes.
    pub restore: Restore,
}

/// The file of a run's journal: named by the run and its harness process; a journal written
/// before runs had their own files is `journal.json`.
fn path_of(factory_dir: &Path, run_id: &str, harness: Option<&str>) -> PathBuf {
    match harness {
        Some(harness) => factory_dir.join(format!("journal.{run_id}.{harness}.json")),
        None => factory_dir.join("journal.json"),
    }
}

/// Every journal file in `factory_dir` (an in-situ run holds the repo lock, so there is at
/// most one of a live run; a killed run's stays until `recover`).
fn journal_files(factory_dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(factory_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("journal.") && name.ends_with(".json")
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// A run id as [`crate::identity::run_id`] makes it: 12 hex digits (never a path).
pub fn is_run_id(id: &str) -> bool {
    id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A harness marker as [`crate::harness::marker`] makes it: `<pid>.<start>`, digits only.
fn is_marker(marker: &str) -> bool {
    marker.split_once('.').is_some_and(|(pid, start)| {
        [pid, start]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Whether `a` and `b` name the same folder (links resolved where they exist).
fn same_dir(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    canon(a) == canon(b)
}

/// The folder of a run's saved state: one file holding the bytes of its index, config,
/// excludes and hooks, and under `--sandbox` the kept copies of read-only files.
pub fn saved_dir(factory_dir: &Path, run_id: &str) -> PathBuf {
    factory_dir.join(format!("saved-{run_id}"))
}

impl Journal {
    /// The journal left in `factory_dir`, if any.
    pub fn read(factory_dir: &Path) -> Result<Option<Journal>> {
        for file in journal_files(factory_dir) {
            match std::fs::read(&file) {
                Ok(bytes) => {
                    return serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                        Error::new(format!("the journal {} is unreadable: {e}", file.display()))
                            .hint("inspect it; if no run was interrupted, remove it")
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(None)
    }

    /// Why this journal, found in `factory_dir`, cannot be one a run of `repo`'s (the
    /// worktree its facts name, already opened) wrote; `None` when it can. `recover` acts
    /// on what a journal names — it writes the worktree and the hooks folder and removes the
    /// saved folder — and a journal is a file in `.git/factory/` that an unconfined command
    /// can write: one naming another repository, or any folder of the user's, would have
    /// `recover` rewrite or remove it.
    pub fn foreign(&self, factory_dir: &Path, repo: &Repository) -> Option<String> {
        if let Some(why) = self.foreign_names() {
            return Some(why);
        }
        // `factory_dir` is `<common git dir>/factory`.
        let common = factory_dir.parent().unwrap_or(factory_dir);
        if !same_dir(common, repo.commondir()) {
            return Some(format!(
                "it names the worktree {}, which belongs to another repository",
                self.restore.root.display()
            ));
        }
        if !same_dir(&self.restore.saved, &saved_dir(factory_dir, &self.run_id)) {
            return Some(format!(
                "it names {} as its saved state, not {}",
                self.restore.saved.display(),
                saved_dir(factory_dir, &self.run_id).display()
            ));
        }
        match &self.restore.hooks {
            Some(h) if !self.restore.hooks_are_the_repos(repo) => Some(format!(
                "it names {} as the hooks folder, which is not this repository's",
                h.dir.display()
            )),
            _ => None,
        }
    }

    /// Why the names this journal gives its own files (its run id and harness, which make
    /// up the paths of its files) cannot be a run's; `None` when they can.
    pub fn foreign_names(&self) -> Option<String> {
        if !is_run_id(&self.run_id) {
            return Some(format!("its run id {:?} is not a run id", self.run_id));
        }
        (self.harness.as_deref())
            .filter(|h| !is_marker(h))
            .map(|h| format!("its harness {h:?} names no process"))
    }

    /// This journal's file.
    pub fn path(&self, factory_dir: &Path) -> PathBuf {
        path_of(factory_dir, &self.run_id, self.harness.as_deref())
    }

    /// Writes the journal; `durable` adds the fsyncs that make it survive a power cut.
    pub fn write(&self, factory_dir: &Path, durable: bool) -> Result<()> {
        let target = self.path(factory_dir);
        let mut tmp = target.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let text =
            serde_json::to_vec_pretty(self).map_err(|e| Error::new(format!("journal: {e}")))?;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&text)?;
        if durable {
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &target)?;
        if durable {
            if let Ok(dir) = std::fs::File::open(factory_dir) {
                let _ = dir.sync_all();
            }
        }
        Ok(())
    }

    /// Records the stage and, before an apply, the pre-images of every path it will write.
    /// Only what recovery cannot do without (the journal itself, the pre-images) is fsynced;
    /// later stage names are for the record.
    pub fn stage(
        &mut self,
        factory_dir: &Path,
        repo: &Repository,
        stage: &str,
        outcomes: Option<&[FileOutcome]>,
    ) -> Result<()> {
        self.stage = stage.to_string();
        if let Some(outcomes) = outcomes {
            self.restore.set_images(repo, outcomes)?;
        }
        self.write(factory_dir, outcomes.is_some())
    }

    /// Where the sandbox keeps its saved copies of the read-only files of this run's tree
    /// (SPEC §7.1): beside the saved index, fsynced, gone with the journal.
    pub fn kept_dir(&self) -> PathBuf {
        self.restore.saved.join("kept")
    }

    /// After the tree is put back (a rollback, the side-effect restore, `recover`): every
    /// read-only file a sandboxed command changed, removed or replaced is put back from its
    /// saved copy — now that the folders on its way are real again — and named in `report`
    /// (so in `side_effects`); one that cannot be is named as failed. Nothing to do when no
    /// sandboxed command ran.
    pub fn put_back_kept(&self, report: &mut Report) -> Vec<String> {
        let dir = self.kept_dir();
        if !dir.is_dir() {
            return Vec::new();
        }
        let done = crate::sandbox::keep::Store::at(dir).put_back();
        let shown: Vec<String> = (done.restored.iter())
            .map(|p| RelPath::from_bytes(p.as_os_str().as_bytes()).display())
            .collect();
        for (p, name) in done.restored.iter().zip(&shown) {
            report.paths.push(name.clone());
            report.files.push(p.as_os_str().as_bytes().to_vec());
        }
        report.failed.extend(
            (done.failed.into_iter())
                .map(|f| format!("{f} (a read-only file a sandboxed command changed)")),
        );
        shown
    }

    /// Removes the journal and the bytes it kept.
    pub fn clear(&self, factory_dir: &Path) {
        let _ = std::fs::remove_file(self.path(factory_dir));
        let _ = std::fs::remove_dir_all(&self.restore.saved);
    }
}

/// The refusal for a journal left by a run whose process is gone; it names the worktree
/// the run changed, which is the one `recover` puts back.
pub fn interrupted_error(j: &Journal) -> Error {
    Error::new(format!(
        "git factory run {} was interrupted at stage {} (pid {} is gone); the worktree at {} may hold part of its change",
        j.run_id,
        j.stage,
        j.pid,
        j.restore.root.display()
    ))
    .hint(format!(
        "run git factory recover to restore the baseline of {} and finish its record",
        j.restore.root.display()
    ))
}

/// A run outside the user's tree, as its owner file names it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Owner {
    pub run_id: String,
    pub harness: String,
    /// The run's own worktree.
    pub worktree: PathBuf,
    /// A race's candidates ran in worktrees of their own too.
    pub race: bool,
}

fn owner_path(factory_dir: &Path, run_id: &str, harness: &str) -> PathBuf {
    factory_dir.join(format!("run.{run_id}.{harness}.json"))
}

impl Owner {
    /// Notes a run outside the user's tree before its worktree exists.
    pub fn write(factory_dir: &Path, run_id: &str, worktree: &Path, race: bool) -> Result<Owner> {
        let owner = Owner {
            run_id: run_id.to_string(),
            harness: crate::harness::marker().to_string(),
            worktree: worktree.to_path_buf(),
            race,
        };
        let text = serde_json::to_vec_pretty(&owner)
            .map_err(|e| crate::error::Error::new(format!("owner file: {e}")))?;
        let path = owner_path(factory_dir, run_id, &owner.harness);
        crate::harness::note_run_here(run_id, true);
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &path)?;
        Ok(owner)
    }

    /// Whether this owner file (at `file`) is one a run of ours wrote: named by its run and
    /// harness, and naming a worktree of the pool (`.git/factory/worktrees/<name>`).
    fn is_ours(&self, factory_dir: &Path, file: &Path) -> bool {
        let named = is_run_id(&self.run_id)
            && is_marker(&self.harness)
            && file.file_name() == owner_path(factory_dir, &self.run_id, &self.harness).file_name();
        let pool = factory_dir.join("worktrees");
        let in_pool = self.worktree.file_name().is_some()
            && self.worktree.parent().is_some_and(|p| same_dir(p, &pool));
        named && in_pool
    }

    /// The run is over: its owner file goes.
    pub fn remove(&self, factory_dir: &Path) {
        let _ = std::fs::remove_file(owner_path(factory_dir, &self.run_id, &self.harness));
        crate::harness::note_run_here(&self.run_id, false);
    }

    /// Every owner file of this repo, with its path.
    pub(crate) fn all(factory_dir: &Path) -> Vec<(PathBuf, Owner)> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(factory_dir)
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !(name.starts_with("run.") && name.ends_with(".json")) {
                continue;
            }
            let owner = std::fs::read(entry.path())
                .ok()
                .and_then(|b| serde_json::from_slice::<Owner>(&b).ok());
            // `recover` removes the worktree an owner file names: only one of the pool's,
            // named by a run of ours, is ever a run's (a file a command wrote could name any
            // folder of the user's).
            if let Some(owner) = owner.filter(|o| o.is_ours(factory_dir, &entry.path())) {
                found.push((entry.path(), owner));
            }
        }
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
    }
}

/// A run outside the user's tree (`--worktree`, a race) whose process was killed and that
/// nothing has finished yet: its worktree and record wait for `recover`.
pub fn killed_outside_run(factory_dir: &Path) -> Option<Owner> {
    Owner::all(factory_dir)
        .into_iter()
        .map(|(_, o)| o)
        .find(|o| {
            !crate::harness::alive(&o.harness)
                && crate::git::lock::RepoLock::acquire_run(factory_dir, &o.run_id).is_ok()
        })
}

/// The refusal for a killed run outside the user's tree.
pub fn killed_outside_error(o: &Owner) -> Error {
    Error::new(format!(
        "git factory run {} was killed while it ran outside your tree (a --worktree {}); its worktree {} and its record are unfinished",
        o.run_id,
        if o.race { "race" } else { "run" },
        o.worktree.display()
    ))
    .hint("run git factory recover to stop its commands, give its worktree back and record it as INTERRUPTED")
}

/// Whether a command may go on beside an in-situ run that is under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beside {
    /// It touches the user's work tree: wait for the run.
    Refuse,
    /// It works in its own worktree or folder: fine while a run is under way.
    Allow,
}

/// Refuses to go on after an in-situ run was interrupted (and, for commands that touch the
/// work tree, while one is under way).
pub fn refuse_if_pending(repo: &Repository, beside: Beside) -> Result<()> {
    let dir = crate::git::factory_dir(repo);
    if let Some(killed) = killed_outside_run(&dir) {
        return Err(killed_outside_error(&killed));
    }
    let Some(j) = Journal::read(&dir)? else {
        return Ok(());
    };
    if crate::git::lock::RepoLock::is_held(&dir) {
        if beside == Beside::Allow {
            return Ok(());
        }
        return Err(Error::new(format!(
            "git factory run {} (pid {}) is in progress in this repo",
            j.run_id, j.pid
        ))
        .hint("wait for it to finish"));
    }
    Err(interrupted_error(&j))
}
