//! What an agent must leave as it was and the run's restore does not own (SPEC §7, the agent
//! audit): the user's ignored files — compared by their stat data, so a rewrite shows even
//! when the size stays — the notes refs (`refs/notes/*`, where a sealed PASS note would make
//! `git factory verify` believe a tree it never checked) and git-factory's own files in
//! `.git/factory/` (the sealing key). Recorded before the agent runs, compared and put back
//! after it exits: a changed or deleted file is written back from the bytes kept at capture, a
//! new one removed, a notes ref set back. Bytes are kept only for files up to
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
use crate::git::nofollow;
use git2::{Oid, Repository};
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The largest file whose bytes are kept to be written back.
pub const KEEP_UP_TO: u64 = 256 * 1024;
/// The most bytes kept in all.
pub const KEEP_TOTAL: u64 = 32 * 1024 * 1024;

/// A file's stat data: any write, chmod, replacement or rename changes one of these.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    mode: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

fn stamp(meta: &std::fs::Metadata) -> Stamp {
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
/// command group, owner, journal and index files, the provider memory, a sealing key being
/// linked into place). An agent that removed one of these would break another run, so they
/// are neither compared nor put back.
const LIVE: [&str; 13] = [
    "runs",
    "worktrees",
    "locks",
    "tmp",
    "pycache",
    "lock",
    "status-tick",
    "journal",
    "command.",
    "run.",
    "index.",
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

/// Every ref under `refs/notes/`, by name.
fn notes(repo: &Repository) -> Result<BTreeMap<String, Oid>> {
    let mut out = BTreeMap::new();
    for r in repo.references_glob("refs/notes/*")? {
        let r = r?;
        if let (Some(name), Some(oid)) = (r.name(), r.target()) {
            out.insert(name.to_string(), oid);
        }
    }
    Ok(out)
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
    notes: BTreeMap<String, Oid>,
    /// `None` for a sandboxed agent, to which the objects are read-only.
    objects: Option<ObjectFiles>,
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
            notes: notes(repo)?,
            objects: if sandboxed {
                None
            } else {
                Some(ObjectFiles::capture(repo)?)
            },
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
        let now = notes(repo)?;
        for (name, oid) in &now {
            if self.notes.get(name) == Some(oid) {
                continue;
            }
            let done = match self.notes.get(name) {
                Some(was) => repo
                    .reference(name, *was, true, "git-factory: agent audit")
                    .map(drop),
                None => repo.find_reference(name).and_then(|mut r| r.delete()),
            };
            match done {
                Ok(()) => out.restored.push(name.clone()),
                Err(e) => out.failed.push(format!("{name} ({})", e.message())),
            }
        }
        for (name, was) in &self.notes {
            if !now.contains_key(name) {
                match repo.reference(name, *was, true, "git-factory: agent audit") {
                    Ok(_) => out.restored.push(name.clone()),
                    Err(e) => out.failed.push(format!("{name} ({})", e.message())),
                }
            }
        }
        Ok(out)
    }
}
