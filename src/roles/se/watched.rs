//! What an agent must leave as it was and the run's restore does not own (SPEC §7, the agent
//! audit): the user's ignored files — compared by their stat data, so a rewrite shows even
//! when the size stays — the notes refs (`refs/notes/*`, where a sealed PASS note would make
//! `git factory verify` believe a tree it never checked) and git-factory's own files in
//! `.git/factory/` (the sealing key). Recorded before the agent runs, compared and put back
//! after it exits: a changed or deleted file is written back from the bytes kept at capture, a
//! new one removed. A notes ref is shared with the other runs of the repo, which add their
//! lines while the agent works: it is never set back wholesale, but mended line by line (see
//! [`put_back_notes`]). Bytes are kept only for files up to
//! [`KEEP_UP_TO`] (secrets, settings, `.pth` files: what an attack rewrites), at most
//! [`KEEP_TOTAL`] in all; a larger file that changed is named as not put back.
//!
//! The repo's object files are linked aside before an unconfined agent runs and linked back
//! if it deleted or replaced them (see [`ObjectFiles`]).
//!
//! Writes never follow a link a command planted (`git::nofollow`). The folders of live
//! state in `.git/factory/` (runs being recorded, worktrees, locks, the bytecode cache, whose
//! forgeries are removed by change time elsewhere) are not compared: other runs of the same
//! repo write them while an agent works.

use crate::error::Result;
use crate::git::{self, nofollow};
use crate::store::notes;
use git2::{Oid, Repository};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The largest file whose bytes are kept to be written back.
pub const KEEP_UP_TO: u64 = 256 * 1024;
/// The most bytes kept in all.
pub const KEEP_TOTAL: u64 = 32 * 1024 * 1024;

/// A file's stat data: any write, chmod, replacement or rename changes one of these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Stamp {
    ino: u64,
    pub(super) mode: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

pub(super) fn stamp(meta: &std::fs::Metadata) -> Stamp {
    Stamp {
        ino: meta.ino(),
        mode: meta.mode(),
        size: meta.size(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
        ctime: (meta.ctime(), meta.ctime_nsec()),
    }
}

/// One file as it was: its stat data, and its bytes when kept.
#[derive(Debug, Clone)]
struct Kept {
    stamp: Stamp,
    bytes: Option<Vec<u8>>,
}

/// Files under one folder, by path relative to it.
#[derive(Debug, Clone)]
struct Files {
    root: PathBuf,
    /// How to name a path of this folder for people (`.git/factory/` for git-factory's).
    prefix: &'static str,
    files: BTreeMap<Vec<u8>, Kept>,
}

impl Files {
    fn capture(root: PathBuf, prefix: &'static str, paths: Vec<Vec<u8>>, budget: &mut u64) -> Self {
        let mut files = BTreeMap::new();
        for rel in paths {
            let full = root.join(std::ffi::OsStr::from_bytes(&rel));
            let Ok(meta) = std::fs::symlink_metadata(&full) else {
                continue;
            };
            let bytes = (meta.is_file() && meta.len() <= KEEP_UP_TO && meta.len() <= *budget)
                .then(|| std::fs::read(&full).ok())
                .flatten();
            if let Some(b) = &bytes {
                *budget -= b.len() as u64;
            }
            files.insert(
                rel,
                Kept {
                    stamp: stamp(&meta),
                    bytes,
                },
            );
        }
        Files {
            root,
            prefix,
            files,
        }
    }

    /// Puts back what differs from the capture (`now`: the paths there now); the names of
    /// what was put back go to `restored`, of what could not be to `failed`.
    fn put_back(&self, now: Vec<Vec<u8>>, restored: &mut Vec<String>, failed: &mut Vec<String>) {
        let shown = |rel: &[u8]| format!("{}{}", self.prefix, rel.escape_ascii());
        for rel in &now {
            if self.files.contains_key(rel) {
                continue;
            }
            match nofollow::remove_file(&self.root, rel) {
                Ok(()) => restored.push(shown(rel)),
                Err(e) => failed.push(format!("{} (new; not removed: {e})", shown(rel))),
            }
        }
        for (rel, was) in &self.files {
            let full = self.root.join(std::ffi::OsStr::from_bytes(rel));
            let same = std::fs::symlink_metadata(&full).is_ok_and(|m| stamp(&m) == was.stamp);
            if same {
                continue;
            }
            match &was.bytes {
                Some(bytes) => {
                    match nofollow::replace_file(&self.root, rel, bytes, was.stamp.mode & 0o7777) {
                        Ok(()) => restored.push(shown(rel)),
                        Err(e) => failed.push(format!("{} (not put back: {e})", shown(rel))),
                    }
                }
                None => failed.push(format!(
                    "{} (changed; too large to have been kept, not put back)",
                    shown(rel)
                )),
            }
        }
    }
}

/// The files git ignores in the work tree of `repo` (inside ignored folders too).
fn ignored_files(repo: &Repository) -> Vec<Vec<u8>> {
    let mut opts = git2::StatusOptions::new();
    opts.include_ignored(true)
        .recurse_ignored_dirs(true)
        .include_untracked(false)
        .exclude_submodules(true);
    let Ok(statuses) = repo.statuses(Some(&mut opts)) else {
        return Vec::new();
    };
    statuses
        .iter()
        .filter(|s| s.status().is_ignored())
        .map(|s| s.path_bytes().to_vec())
        .filter(|p| !p.ends_with(b"/"))
        .collect()
}

/// The names (by prefix) in `.git/factory/` of live state that this run's other candidates and
/// other runs of the repo write while an agent works: folders, and each run's own files (its
/// command group, owner, journal, saved bytes and index files, the commit message a delivery
/// hands to the commit-msg hook, the provider memory, a sealing key being linked into place),
/// `log`'s cache of the run list (derived from the refs, rebuilt by any `git factory log`), and
/// the seals of the records runs made here (`made/`, written as each run ends; compared run by
/// run in `sealed`, with the records).
/// An agent that removed one of these would break another run, and a put-back that removed
/// one would too, so they are neither compared nor put back here.
const LIVE: [&str; 18] = [
    "runs",
    "made",
    "worktrees",
    "locks",
    "tmp",
    "pycache",
    "pool",
    "lock",
    "status-tick",
    "journal",
    "command.",
    "run.",
    "index.",
    "saved-",
    "COMMIT_EDITMSG.",
    "log-cache",
    "providers.json",
    "verify-key.",
];

/// git-factory's own files in `.git/factory/` that no command may change (the sealing key and
/// the like): its top-level files other than live state.
fn factory_files(dir: &Path) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
        .map(|e| e.file_name().as_bytes().to_vec())
        .filter(|n| !LIVE.iter().any(|l| n.starts_with(l.as_bytes())))
        .collect()
}

/// The repo's object files (loose objects and packs), hard-linked aside before an agent that
/// runs unconfined: its own git writes to a private object folder, but as the user it could
/// still delete or replace the repo's. A link keeps a deleted or replaced file's bytes
/// (objects are never written in place by git), so what went is linked back. A file
/// rewritten in place shares its inode with the link: named when its size changed, not put
/// back; one rewritten to the same size is not seen (only hashing every object would). Under
/// `--sandbox` the objects are read-only to the agent and nothing is linked.
#[derive(Debug)]
struct ObjectFiles {
    objects: PathBuf,
    keep: tempfile::TempDir,
    /// Per file (relative to `objects`): its inode and size. Not its times: git and libgit2
    /// "freshen" an object they are asked to write again by touching it.
    files: Vec<(PathBuf, u64, u64)>,
}

impl ObjectFiles {
    fn capture(repo: &Repository) -> Result<Self> {
        let objects = repo.commondir().join("objects");
        let scratch = crate::git::factory_dir(repo).join("tmp");
        std::fs::create_dir_all(&scratch)?;
        let keep = tempfile::Builder::new()
            .prefix("objects-")
            .tempdir_in(&scratch)?;
        let mut files = Vec::new();
        for dir in std::fs::read_dir(&objects)?.flatten() {
            let name = dir.file_name();
            let fan_out = name.len() == 2 && name.as_bytes().iter().all(u8::is_ascii_hexdigit);
            if !(fan_out || name == "pack") || !dir.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            std::fs::create_dir_all(keep.path().join(&name))?;
            for file in std::fs::read_dir(dir.path())?.flatten() {
                // Objects and packs only: a temporary file another writer is about to rename
                // (git's `tmp_obj_*`, libgit2's `tmp_object_git2_*`) goes by itself.
                let fname = file.file_name();
                let fname = fname.as_bytes();
                let object = if fan_out {
                    fname.iter().all(u8::is_ascii_hexdigit)
                } else {
                    fname.starts_with(b"pack-")
                };
                if !object || !file.file_type().is_ok_and(|t| t.is_file()) {
                    continue;
                }
                let rel = Path::new(&name).join(file.file_name());
                if std::fs::hard_link(file.path(), keep.path().join(&rel)).is_err() {
                    continue;
                }
                if let Ok(m) = std::fs::symlink_metadata(file.path()) {
                    files.push((rel, m.ino(), m.size()));
                }
            }
        }
        Ok(ObjectFiles {
            objects,
            keep,
            files,
        })
    }

    fn put_back(&self, out: &mut PutBack) {
        let (mut back, mut rewritten) = (0usize, 0usize);
        for (rel, ino, size) in &self.files {
            let path = self.objects.join(rel);
            match std::fs::symlink_metadata(&path) {
                // Same name and size: the same object (its name is its hash). Another writer
                // (libgit2 renames its new file over an existing one) may have replaced it.
                Ok(m) if m.size() == *size => continue,
                Ok(m) if m.ino() == *ino => {
                    rewritten += 1;
                    continue;
                }
                Ok(_) => {
                    let _ = std::fs::remove_file(&path);
                }
                Err(_) => {
                    if let Some(parent) = path.parent() {
                        let _ = std::fs::create_dir_all(parent);
                    }
                }
            }
            match std::fs::hard_link(self.keep.path().join(rel), &path) {
                Ok(()) => back += 1,
                Err(e) => out.failed.push(format!(
                    "{} (deleted; not put back: {e})",
                    shown_object(rel)
                )),
            }
        }
        if back > 0 {
            out.restored.push(format!(
                "{back} object file(s) of .git/objects (deleted or replaced)"
            ));
        }
        if rewritten > 0 {
            out.failed.push(format!(
                "{rewritten} object file(s) of .git/objects (rewritten in place; not put back: run git fsck)"
            ));
        }
    }
}

fn shown_object(rel: &Path) -> String {
    format!(".git/objects/{}", rel.as_os_str().as_bytes().escape_ascii())
}

/// See the module's documentation.
#[derive(Debug)]
pub struct Watched {
    /// The ignored files of the run's work tree (in a `--worktree` run the user's own tree
    /// is shared with their ongoing work, which the audit must not undo).
    tree: Files,
    factory: Files,
    /// Every notes ref and the commit it pointed at.
    notes: BTreeMap<String, Oid>,
    /// `None` for a sandboxed agent, to which the objects are read-only.
    objects: Option<ObjectFiles>,
    /// The names of the files `recover` acts on (see [`RECOVERY_FILES`]) as they were.
    recovery: BTreeSet<Vec<u8>>,
}

/// The files in `.git/factory/` that `recover` acts on: a killed in-situ run's journal, a
/// killed `--worktree` run's owner file, the process groups a killed harness noted. Each is
/// named `<kind>.<run_id>.<pid>.<start>…` by the harness that writes it. Live state, so the
/// audit does not put back what other runs write there; but one an agent planted (an old
/// journal kept aside) would have the user's next `recover` put an old baseline back.
const RECOVERY_FILES: [&str; 3] = ["journal.", "run.", "command."];

fn recovery_files(dir: &Path) -> BTreeSet<Vec<u8>> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().as_bytes().to_vec())
        .filter(|n| RECOVERY_FILES.iter().any(|k| n.starts_with(k.as_bytes())))
        .collect()
}

/// Whether a recovery file named `name` can be a live run's: its harness (the pid and start
/// in its name) runs now and is a `git factory` (the same program as this one).
fn a_live_harness_wrote(name: &[u8]) -> bool {
    let text = String::from_utf8_lossy(name);
    let mut parts = text.split('.').skip(2);
    let (Some(pid), Some(start)) = (parts.next(), parts.next()) else {
        return false;
    };
    let marker = format!("{pid}.{start}");
    if marker == crate::harness::marker() {
        return true;
    }
    let same_program = |pid: &str| {
        let theirs = std::fs::metadata(format!("/proc/{pid}/exe"));
        let ours = std::env::current_exe().and_then(std::fs::metadata);
        matches!((theirs, ours), (Ok(a), Ok(b)) if a.dev() == b.dev() && a.ino() == b.ino())
    };
    crate::harness::alive(&marker) && same_program(pid)
}

/// What putting back did: names put back, names that could not be.
#[derive(Debug, Default)]
pub struct PutBack {
    pub restored: Vec<String>,
    pub failed: Vec<String>,
}

impl Watched {
    pub fn capture(repo: &Repository, sandboxed: bool) -> Result<Self> {
        let mut budget = KEEP_TOTAL;
        let root = crate::git::workdir(repo)?;
        let tree = Files::capture(root, "", ignored_files(repo), &mut budget);
        let dir = crate::git::factory_dir(repo);
        let factory = Files::capture(
            dir.clone(),
            ".git/factory/",
            factory_files(&dir),
            &mut budget,
        );
        Ok(Watched {
            tree,
            factory,
            notes: notes_heads(repo)?,
            objects: if sandboxed {
                None
            } else {
                Some(ObjectFiles::capture(repo)?)
            },
            recovery: recovery_files(&dir),
        })
    }

    /// Puts back every watched thing that differs, naming each.
    pub fn put_back(&self, repo: &Repository) -> Result<PutBack> {
        let mut out = PutBack::default();
        if let Some(objects) = &self.objects {
            objects.put_back(&mut out);
        }
        self.tree
            .put_back(ignored_files(repo), &mut out.restored, &mut out.failed);
        self.factory.put_back(
            factory_files(&self.factory.root),
            &mut out.restored,
            &mut out.failed,
        );
        put_back_notes(repo, &self.notes, &mut out)?;
        for name in recovery_files(&self.factory.root) {
            if self.recovery.contains(&name) || a_live_harness_wrote(&name) {
                continue;
            }
            let path = self.factory.root.join(std::ffi::OsStr::from_bytes(&name));
            let shown = format!(".git/factory/{}", String::from_utf8_lossy(&name));
            match std::fs::remove_file(&path) {
                Ok(()) => out.restored.push(format!("{shown} (removed)")),
                Err(e) => out.failed.push(format!("{shown}: {e}")),
            }
        }
        Ok(out)
    }
}

/// The notes of the notes commit `commit`, by the object each annotates (`None`: not a notes
/// commit, so nothing in it is anyone's lines). Read when the audit needs them, not at the
/// capture: a commit never changes, and the audit puts the repo's objects back first.
fn notes_at(repo: &Repository, commit: Oid) -> Option<BTreeMap<Oid, Vec<u8>>> {
    let tree = repo.find_commit(commit).ok()?.tree().ok()?;
    notes::all_in(repo, &tree)
        .ok()
        .map(|n| n.into_iter().collect())
}

/// Every ref under `refs/notes/` and the object it points at.
fn notes_heads(repo: &Repository) -> Result<BTreeMap<String, Oid>> {
    let mut out = BTreeMap::new();
    for r in repo.references_glob("refs/notes/*")? {
        let r = r?;
        if let (Some(name), Some(oid)) = (r.name(), r.target()) {
            out.insert(name.to_string(), oid);
        }
    }
    Ok(out)
}

/// A note's lines, without their terminators.
fn lines_of(text: &[u8]) -> Vec<&[u8]> {
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    if text.is_empty() {
        return Vec::new();
    }
    text.split(|b| *b == b'\n').collect()
}

/// Lines by the object whose note holds them.
type Lines = BTreeMap<Oid, BTreeSet<Vec<u8>>>;

/// The lines the notes commits between `from` (exclusive) and `to` added, following first
/// parents (at most `CHAIN` commits back): by git-factory processes, and by anyone.
struct Chain {
    by_harness: Lines,
    by_anyone: Lines,
}

fn chain_lines(repo: &Repository, from: Option<Oid>, to: Option<Oid>) -> Chain {
    const CHAIN: usize = 10_000;
    let mut out = Chain {
        by_harness: Lines::new(),
        by_anyone: Lines::new(),
    };
    let mut at = to.and_then(|to| repo.find_commit(to).ok());
    for _ in 0..CHAIN {
        let Some(commit) = at.take() else { break };
        if Some(commit.id()) == from {
            break;
        }
        let parent = commit.parent(0).ok();
        let before = parent.as_ref().and_then(|p| p.tree().ok());
        let mut added = Lines::new();
        if let Ok(tree) = commit.tree() {
            if let Ok(diff) = repo.diff_tree_to_tree(before.as_ref(), Some(&tree), None) {
                for delta in diff.deltas() {
                    note_lines_added(repo, &delta, &mut added);
                }
            }
        }
        let harness = git::restore::another_runs_notes_commit(&commit);
        for (target, lines) in added {
            if harness {
                let set = out.by_harness.entry(target).or_default();
                set.extend(lines.iter().cloned());
            }
            out.by_anyone.entry(target).or_default().extend(lines);
        }
        at = parent;
    }
    out
}

/// Which lines of a notes ref that moved are to be taken away (`unproven`: added, and not
/// provably another run's) and which put back (`gone`: there at the capture, or added since
/// by another run, and not there now).
fn judge(
    repo: &Repository,
    name: &str,
    was: &BTreeMap<Oid, Vec<u8>>,
    now: &BTreeMap<Oid, Vec<u8>>,
    chain: &Chain,
) -> (Lines, Lines) {
    let theirs = |target: &Oid, line: &[u8]| {
        if name == crate::store::NOTES_REF {
            git::restore::another_runs_note_line(repo, line)
        } else {
            name.starts_with("refs/notes/factory-")
                && (chain.by_harness.get(target)).is_some_and(|s| s.contains(line))
        }
    };
    let (mut unproven, mut gone) = (Lines::new(), Lines::new());
    for (target, text) in now {
        let had = was.get(target).map(|t| lines_of(t)).unwrap_or_default();
        for line in lines_of(text) {
            if !had.contains(&line) && !theirs(target, line) {
                unproven.entry(*target).or_default().insert(line.to_vec());
            }
        }
    }
    let mut owed = Lines::new();
    for (target, text) in was {
        let set = owed.entry(*target).or_default();
        set.extend(lines_of(text).into_iter().map(<[u8]>::to_vec));
    }
    for (target, lines) in &chain.by_anyone {
        for line in lines.iter().filter(|l| theirs(target, l)) {
            owed.entry(*target).or_default().insert(line.clone());
        }
    }
    for (target, lines) in owed {
        let has = now.get(&target).map(|t| lines_of(t)).unwrap_or_default();
        for line in lines {
            if !has.contains(&line.as_slice()) {
                gone.entry(target).or_default().insert(line);
            }
        }
    }
    (unproven, gone)
}

/// The lines one changed note file of a notes commit added, under the object it annotates.
fn note_lines_added(repo: &Repository, delta: &git2::DiffDelta<'_>, out: &mut Lines) {
    let Some(path) = delta.new_file().path_bytes() else {
        return;
    };
    let hex: Vec<u8> = path.iter().copied().filter(|b| *b != b'/').collect();
    let Some(target) = std::str::from_utf8(&hex)
        .ok()
        .filter(|h| h.len() == 40)
        .and_then(|h| Oid::from_str(h).ok())
    else {
        return;
    };
    let blob = |id: Oid| {
        repo.find_blob(id)
            .map(|b| b.content().to_vec())
            .unwrap_or_default()
    };
    let old = blob(delta.old_file().id());
    let new = blob(delta.new_file().id());
    let had = lines_of(&old);
    let set = out.entry(target).or_default();
    for line in lines_of(&new) {
        if !had.contains(&line) {
            set.insert(line.to_vec());
        }
    }
}

/// Puts back the notes refs an agent changed, line by line, never wholesale: other runs of
/// the repo add their lines while the agent works (SPEC §5.2). A line that was there and is
/// gone, or was altered, is added back (as `fetch` merges notes); a line that appeared is kept
/// when it is provably another run's (`git::restore`'s one rule: in `refs/notes/factory`, the
/// exact line a final run record says; in git-factory's other notes, a line a git-factory
/// process appended), and otherwise taken away — that line only. Each ref mended is named.
fn put_back_notes(repo: &Repository, was: &BTreeMap<String, Oid>, out: &mut PutBack) -> Result<()> {
    let now = notes_heads(repo)?;
    let names: BTreeSet<&String> = was.keys().chain(now.keys()).collect();
    for name in names {
        let before = was.get(name).copied();
        let is = now.get(name).copied();
        if before == is {
            continue;
        }
        match mend_notes_ref(repo, name, before, is) {
            Ok(Some(what)) => out.restored.push(format!("{name} ({what})")),
            Ok(None) => {}
            Err(e) => out
                .failed
                .push(format!("{name} (not put back: {})", e.message)),
        }
    }
    Ok(())
}

/// Mends one notes ref that moved; says what it did, `None` when every change was another
/// run's.
fn mend_notes_ref(
    repo: &Repository,
    name: &str,
    before: Option<Oid>,
    is: Option<Oid>,
) -> Result<Option<String>> {
    let now = match is {
        Some(commit) => match notes_at(repo, commit) {
            Some(n) => n,
            // Not a notes commit any more: nobody's lines are readable in it.
            None => return set_back(repo, name, before).map(Some),
        },
        None => BTreeMap::new(),
    };
    let was = before.and_then(|b| notes_at(repo, b)).unwrap_or_default();
    let chain = chain_lines(repo, before, is);
    let (unproven, gone) = judge(repo, name, &was, &now, &chain);
    let (added, removed) = (count(&unproven), count(&gone));
    if added == 0 && removed == 0 {
        return Ok(None);
    }
    notes::update(repo, name, MENDED, |repo, tree| {
        let current: BTreeMap<Oid, Vec<u8>> = match tree {
            Some(t) => notes::all_in(repo, t)?.into_iter().collect(),
            None => BTreeMap::new(),
        };
        let mut edits = notes::Edits::new();
        let targets: BTreeSet<&Oid> = unproven.keys().chain(gone.keys()).collect();
        for target in targets {
            let text = current.get(target).map(Vec::as_slice).unwrap_or_default();
            let mended = mended_note(text, unproven.get(target), gone.get(target));
            if mended.as_slice() != text {
                let blob = (!mended.is_empty())
                    .then(|| repo.blob(&mended))
                    .transpose()?;
                edits.insert(target.to_string(), blob);
            }
        }
        Ok((!edits.is_empty()).then_some(edits))
    })?;
    if before.is_none() {
        drop_if_empty(repo, name)?;
    }
    Ok(Some(format!(
        "{added} line(s) the agent added taken away, {removed} line(s) it took away put back"
    )))
}

/// A notes ref the agent made, once mended: removed when no note is left in it — under its
/// lock, and only if no other process added one meanwhile.
fn drop_if_empty(repo: &Repository, name: &str) -> Result<()> {
    let mut tx = repo.transaction()?;
    tx.lock_ref(name)?;
    let Ok(oid) = repo.refname_to_id(name) else {
        return Ok(());
    };
    if repo.find_commit(oid)?.tree()?.is_empty() {
        tx.remove(name)?;
        tx.commit()?;
    }
    Ok(())
}

/// The message of a notes commit the audit makes.
const MENDED: &str = "Notes put back by the git factory agent audit";

fn count(lines: &Lines) -> usize {
    lines.values().map(BTreeSet::len).sum()
}

/// A note as it is now without the lines `drop`, with the lines `add` it lacks at its end.
fn mended_note(
    text: &[u8],
    drop: Option<&BTreeSet<Vec<u8>>>,
    add: Option<&BTreeSet<Vec<u8>>>,
) -> Vec<u8> {
    let mut kept: Vec<&[u8]> = lines_of(text)
        .into_iter()
        .filter(|l| !drop.is_some_and(|d| d.contains(*l)))
        .collect();
    for line in add.into_iter().flatten() {
        if !kept.contains(&line.as_slice()) {
            kept.push(line);
        }
    }
    let mut out = Vec::new();
    for line in kept {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out
}

/// A notes ref that no longer points at a notes commit: set back where it was (or removed
/// when it did not exist), as nothing in it can be anyone's lines.
fn set_back(repo: &Repository, name: &str, before: Option<Oid>) -> Result<String> {
    match before {
        Some(b) => {
            repo.reference(name, b, true, "git-factory: agent audit")?;
            Ok("replaced by something not notes; set back".to_string())
        }
        None => {
            repo.find_reference(name)?.delete()?;
            Ok("made, not notes; removed".to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::notes::tests::repo;

    /// Sets the note on `target` to `text` as a command's own `git notes add -f` would.
    fn overwrite(repo: &Repository, name: &str, target: Oid, text: &[u8]) {
        notes::update(repo, name, "Notes added by 'git notes add'", |repo, _| {
            let blob = repo.blob(text)?;
            Ok(Some(notes::Edits::from([(target.to_string(), Some(blob))])))
        })
        .expect("overwrite");
    }

    fn note(repo: &Repository, name: &str, target: Oid) -> Vec<u8> {
        notes::read(repo, name, target)
            .expect("read")
            .unwrap_or_default()
    }

    #[test]
    fn a_mended_note_loses_only_the_dropped_lines_and_regains_the_missing_ones() {
        let drop = BTreeSet::from([b"forged".to_vec()]);
        let add = BTreeSet::from([b"kept \xff".to_vec(), b"theirs".to_vec()]);
        assert_eq!(
            mended_note(b"theirs\nforged\nnew", Some(&drop), Some(&add)),
            b"theirs\nnew\nkept \xff\n"
        );
        assert_eq!(mended_note(b"forged\n", Some(&drop), None), b"");
        assert!(lines_of(b"").is_empty());
        assert_eq!(lines_of(b"a\n\nb"), [&b"a"[..], b"", b"b"]);
    }

    #[test]
    fn cached_results_of_other_runs_stay_and_a_commands_own_lines_are_undone() {
        let (_dir, repo) = repo();
        let name = "refs/notes/factory-verify";
        let tree = repo.blob(b"a tree").expect("blob");
        notes::append_line(&repo, name, tree, b"RESULTS before").expect("append");
        let watched = Watched::capture(&repo, true).expect("capture");
        // Another run caches its results while the agent works...
        notes::append_line(&repo, name, tree, b"RESULTS theirs").expect("append");
        // ...and the agent replaces the note by a forged pass, erasing both lines...
        overwrite(&repo, name, tree, b"PASS forged\n");
        // ...after which another run caches more.
        notes::append_line(&repo, name, tree, b"RESULTS later").expect("append");
        let put = watched.put_back(&repo).expect("put back");
        assert_eq!(put.restored.len(), 1, "{put:?}");
        assert!(put.restored[0].starts_with(name), "{put:?}");
        let text = note(&repo, name, tree);
        let lines: BTreeSet<&[u8]> = lines_of(&text).into_iter().collect();
        assert_eq!(
            lines,
            BTreeSet::from([&b"RESULTS before"[..], b"RESULTS theirs", b"RESULTS later"]),
            "{}",
            text.escape_ascii()
        );
    }

    #[test]
    fn notes_other_runs_added_are_no_escape() {
        let (_dir, repo) = repo();
        let name = "refs/notes/factory-verify";
        let tree = repo.blob(b"a tree").expect("blob");
        let watched = Watched::capture(&repo, true).expect("capture");
        notes::append_line(&repo, name, tree, b"RESULTS theirs").expect("append");
        let put = watched.put_back(&repo).expect("put back");
        assert!(put.restored.is_empty() && put.failed.is_empty(), "{put:?}");
        assert_eq!(note(&repo, name, tree), b"RESULTS theirs\n");
    }

    #[test]
    fn a_run_line_naming_no_final_record_is_taken_away_and_a_notes_ref_made_for_it_goes() {
        let (_dir, repo) = repo();
        let commit = repo.blob(b"a commit").expect("blob");
        let watched = Watched::capture(&repo, true).expect("capture");
        overwrite(
            &repo,
            crate::store::NOTES_REF,
            commit,
            b"factory 000000000000 PASS forged attempts=1\n",
        );
        let put = watched.put_back(&repo).expect("put back");
        assert_eq!(put.restored.len(), 1, "{put:?}");
        assert!(repo.find_reference(crate::store::NOTES_REF).is_err());
    }
}
