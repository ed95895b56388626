//! Putting a repo back (SPEC §7): the one owner of it. A [`Restore`] is built from facts
//! recorded before anything changed — the worktree (its root and git dir), the baseline, HEAD
//! and its branch, every other ref, the index's bytes, `.git/config`'s bytes, the folders of
//! the work tree, and the exact pre-images (bytes and mode) of the paths a change will write —
//! and [`Restore::apply`] puts them back in a fixed order: refs, then the index (a lock file
//! and a rename), then the work tree. Rollback, the PASS side-effect restore, the audit of an
//! agent that prints its proposal, a failed delivery and `git factory recover` all use it, so
//! the order and the care below are decided once.
//!
//! The work tree is written without ever following a symlink a command may have planted:
//! every write opens its parent folders one by one from the root with `O_NOFOLLOW` and
//! removes whatever is in the way (a link, a file where a folder belongs) instead of going
//! through it. Paths are bytes throughout; a path that cannot be put back is named, never
//! skipped in silence.
//!
//! What commands left is judged against what existed at capture, never against rules the
//! commands could change: the untracked entries that existed (ignored files and folders, with
//! their inodes), `.git/info/exclude`, the hooks folder and the odd modes (0600) of tracked
//! files are recorded, and the ignore rules are made the baseline's again before the status
//! walk looks at anything. New files the baseline's rules ignore stay (SPEC §5: `git clean
//! -fd`, no `-x`); a pre-existing ignored entry a command renamed is moved back, one it
//! deleted is named (its content was never copied). In a `--worktree` run the refs,
//! `.git/config` and `info/exclude` are shared with the user's ongoing work and with other
//! runs: what changed there is named in [`Report::left`], never put back (no ref there is
//! provably a command's); the hooks are put back in every mode. In git-factory's own
//! namespaces only run records a command deleted are put back: concurrent `--worktree` runs
//! create and advance records and notes (`refs/notes/factory*`) while an in-situ run is under
//! way, so a note a command wrote cannot be told from theirs here.

use crate::error::{Error, Result};
use crate::git::files::{checkout_modes, with_exec, FileOutcome};
use git2::build::CheckoutBuilder;
use git2::{Oid, Repository, Status, StatusOptions};
use rustix::fs::{AtFlags, Mode, OFlags};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A path relative to the work tree, as bytes; kept as text in the journal when it is UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RelPath {
    Text(String),
    Bytes(Vec<u8>),
}

impl RelPath {
    pub fn from_bytes(bytes: &[u8]) -> Self {
        match std::str::from_utf8(bytes) {
            Ok(s) => RelPath::Text(s.to_string()),
            Err(_) => RelPath::Bytes(bytes.to_vec()),
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        match self {
            RelPath::Text(s) => s.as_bytes(),
            RelPath::Bytes(b) => b,
        }
    }

    fn path(&self) -> &Path {
        Path::new(OsStr::from_bytes(self.as_bytes()))
    }

    /// For people: lossy, with the bytes that are not UTF-8 shown as `\xNN`.
    pub fn display(&self) -> String {
        match self {
            RelPath::Text(s) => s.clone(),
            RelPath::Bytes(b) => b.escape_ascii().to_string(),
        }
    }
}

/// What one path must hold: a blob with an exact mode, or nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    pub path: RelPath,
    /// The blob of its bytes; `None` when the path must not exist.
    pub blob: Option<String>,
    /// The exact permission bits (e.g. 0o600), not just git's 644/755.
    #[serde(default = "default_mode")]
    pub mode: u32,
}

fn default_mode() -> u32 {
    0o644
}

/// A ref as it was: a commit id, or the name a symbolic ref points at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefFact {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbolic: Option<String>,
}

/// A folder of the work tree as it was (ignored folders and nested repositories excluded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirFact {
    pub path: RelPath,
    pub mode: u32,
    /// Empty folders are kept; empty folders that were not there are removed.
    #[serde(default)]
    pub empty: bool,
    /// Its modification time (seconds, nanoseconds): a folder whose time has not moved has
    /// had no entry added, so a restore need not read it to find folders a command made.
    #[serde(default)]
    pub mtime: (i64, i64),
}

fn mtime_of(meta: &std::fs::Metadata) -> (i64, i64) {
    use std::os::unix::fs::MetadataExt;
    (meta.mtime(), meta.mtime_nsec())
}

/// Everything needed to put one worktree back, recorded before anything changed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Restore {
    /// The worktree this belongs to: its root and its own git dir (a linked worktree's is
    /// `.git/worktrees/<name>`), so `recover` run elsewhere knows which tree to put back.
    pub root: PathBuf,
    pub git_dir: PathBuf,
    pub baseline: String,
    /// The ref HEAD pointed at (`refs/heads/main`), or `None` when detached.
    pub head_ref: Option<String>,
    /// Every ref outside git-factory's own namespaces; `None` when the refs are not ours to
    /// put back (a `--worktree` run shares them with the user's ongoing work).
    pub refs: Option<Vec<RefFact>>,
    /// With `refs` `None`: the shared refs as they were, so what changed is named (never put
    /// back: the user may be moving them at the same time).
    #[serde(default)]
    pub shared_refs: Vec<RefFact>,
    /// In-situ: the run records (`refs/factory/<run_id>`) that existed. One a command deleted
    /// is put back; nothing else in git-factory's namespaces is touched (concurrent
    /// `--worktree` runs create and advance their own records while this run is under way).
    #[serde(default)]
    pub records: Vec<RefFact>,
    /// The folder holding the saved bytes of the index (`index`) and of `.git/config`
    /// (`config`): real copies, written before any change.
    pub saved: PathBuf,
    pub had_index: bool,
    pub dirs: Vec<DirFact>,
    /// The work tree root's own modification time (see [`DirFact::mtime`]).
    #[serde(default)]
    pub root_mtime: (i64, i64),
    /// The pre-images of the paths the current change writes (set before it is applied).
    #[serde(default)]
    pub images: Vec<Image>,
    /// Entries that were neither tracked nor recorded folders at capture — in a clean tree,
    /// the ignored files and folders (not what is inside an ignored folder) and nested
    /// repositories — with their inode. Only these are kept by a restore: what a command
    /// hides behind ignore rules of its own (a `.gitignore` it writes, `info/exclude`) is
    /// judged against this list, never against the rules as the command left them.
    #[serde(default)]
    pub kept: Vec<KeptEntry>,
    /// Tracked files whose mode is not the one a checkout creates (e.g. 0600): put back after
    /// the checkout, which knows only git's 644/755.
    #[serde(default)]
    pub modes: Vec<(RelPath, u32)>,
    /// `.git/info/exclude` did not exist at capture (its bytes are saved when it did).
    #[serde(default)]
    pub exclude_absent: bool,
    /// The hooks folder as it was: a hook planted by a command or an agent would run on the
    /// user's next commit, so hooks are put back like `.git/config`.
    #[serde(default)]
    pub hooks: Option<HooksFact>,
    /// The change time (seconds, nanoseconds) of a file made at capture: Python bytecode in
    /// the work tree that changed since is a command's, and goes (see [`is_bytecode`]).
    #[serde(default)]
    pub since: Option<(i64, i64)>,
}

/// Bytecode where the user's own Python looks for it (`__pycache__/`, or a sourceless
/// `mod.pyc` it imports as a module). Checks compile into the harness's cache instead
/// (SPEC §3.7), so what a command wrote here is a check that cleared the prefix — or one
/// that forged it: Python trusts an entry by its header's source size and mtime alone, so a
/// forgery left behind would run in the user's next `python` after the run had put the
/// sources back. Ignored files are otherwise kept (SPEC §5), but these are a cache: removed,
/// Python compiles them again.
fn is_bytecode(name: &[u8]) -> bool {
    name == b"__pycache__" || name.ends_with(b".pyc")
}

/// An untracked entry that existed at capture (see [`Restore::kept`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptEntry {
    pub path: RelPath,
    /// Its inode: an entry a command renamed is found by it and moved back, not deleted.
    #[serde(default)]
    pub ino: u64,
}

/// The hooks folder (`core.hooksPath` honoured) as it was: each entry's name and mode; its
/// bytes (a link's target) are saved under `saved/hooks/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HooksFact {
    pub dir: PathBuf,
    pub files: Vec<HookFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookFile {
    pub name: RelPath,
    /// The exact permission bits, or 0o120000 for a symbolic link.
    pub mode: u32,
}

const LINK_MODE: u32 = 0o120000;

/// A hook's mode and bytes as they are now (a link's target for a link); `None` when absent.
/// Folders inside the hooks folder are not hooks and are left alone.
fn hook_state(path: &Path) -> Option<(u32, Vec<u8>)> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).ok()?;
        return Some((LINK_MODE, target.as_os_str().as_bytes().to_vec()));
    }
    if !meta.is_file() {
        return None;
    }
    Some((
        meta.permissions().mode() & 0o7777,
        std::fs::read(path).ok()?,
    ))
}

fn hook_names(dir: &Path) -> Vec<Vec<u8>> {
    let mut names: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| hook_state(&e.path()).is_some())
                .map(|e| e.file_name().as_bytes().to_vec())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

impl HooksFact {
    fn capture(dir: PathBuf, saved: &Path) -> Result<Self> {
        let store = saved.join("hooks");
        std::fs::create_dir_all(&store)?;
        let mut files = Vec::new();
        for name in hook_names(&dir) {
            let os = OsStr::from_bytes(&name);
            if let Some((mode, bytes)) = hook_state(&dir.join(os)) {
                std::fs::write(store.join(os), bytes)?;
                files.push(HookFile {
                    name: RelPath::from_bytes(&name),
                    mode,
                });
            }
        }
        Ok(HooksFact { dir, files })
    }

    /// Compares the folder with what was recorded; with `put_back`, rewrites each hook that
    /// changed and removes each that was added. Returns the hooks that differed.
    fn restore(&self, saved: &Path, put_back: bool, failed: &mut Vec<String>) -> Vec<String> {
        let store = saved.join("hooks");
        let mut differed = Vec::new();
        let shown = |name: &[u8]| self.dir.join(OsStr::from_bytes(name)).display().to_string();
        // A folder a link now stands in for is not written through: the link goes first.
        if std::fs::symlink_metadata(&self.dir).is_ok_and(|m| m.file_type().is_symlink()) {
            differed.push(self.dir.display().to_string());
            if !put_back {
                return differed;
            }
            if let Err(e) =
                std::fs::remove_file(&self.dir).and_then(|_| std::fs::create_dir(&self.dir))
            {
                failed.push(format!("{}: {e}", self.dir.display()));
                return differed;
            }
        }
        for hook in &self.files {
            let name = hook.name.as_bytes();
            let path = self.dir.join(OsStr::from_bytes(name));
            let Ok(bytes) = std::fs::read(store.join(OsStr::from_bytes(name))) else {
                failed.push(format!("{}: its saved copy is gone", shown(name)));
                continue;
            };
            if hook_state(&path) == Some((hook.mode, bytes.clone())) {
                continue;
            }
            differed.push(shown(name));
            if put_back {
                if let Err(e) = write_hook(&path, hook.mode, &bytes) {
                    failed.push(format!("{}: {e}", shown(name)));
                }
            }
        }
        for name in hook_names(&self.dir) {
            if self
                .files
                .iter()
                .any(|h| h.name.as_bytes() == name.as_slice())
            {
                continue;
            }
            differed.push(shown(&name));
            if put_back {
                if let Err(e) = std::fs::remove_file(self.dir.join(OsStr::from_bytes(&name))) {
                    failed.push(format!("{}: {e}", shown(&name)));
                }
            }
        }
        differed.sort();
        differed
    }
}

/// Writes a hook anew (never through what is there: it is removed first) with its exact mode.
fn write_hook(path: &Path, mode: u32, bytes: &[u8]) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path)?,
        Ok(_) => std::fs::remove_file(path)?,
        Err(_) => {}
    }
    if mode == LINK_MODE {
        return std::os::unix::fs::symlink(OsStr::from_bytes(bytes), path);
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    file.write_all(bytes)?;
    file.set_permissions(std::fs::Permissions::from_mode(mode))
}

/// Why a restore runs: names its kill point and its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Rollback,
    SideEffects,
    AgentAudit,
    Delivery,
    Recover,
}

impl Purpose {
    fn kill_point(self) -> &'static str {
        match self {
            Purpose::Rollback => "during_rollback",
            Purpose::SideEffects => "during_side_effect_restore",
            Purpose::AgentAudit => "during_agent_audit",
            Purpose::Delivery => "during_delivery_undo",
            Purpose::Recover => "during_recover",
        }
    }
}

/// What a restore did, and what it could not do.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Work-tree paths put back (restored, removed, or rewritten to their image), as shown.
    pub paths: Vec<String>,
    /// The same files as bytes, repo-relative (no folders, modes or submodule notes): what
    /// the bytecode cache forgets.
    pub files: Vec<Vec<u8>>,
    /// Refs put back (`HEAD`, `refs/heads/x`, …), the index, `.git/config`.
    pub git: Vec<String>,
    /// Paths that could not be put back, each with why.
    pub failed: Vec<String>,
    /// What commands changed that is not this restore's to put back — in a `--worktree` run,
    /// the refs and `.git/config`/`info/exclude` shared with the user's ongoing work — named
    /// so no message claims it restored.
    pub left: Vec<String>,
    /// Bytecode commands wrote in the work tree, removed (see [`is_bytecode`]): a cache, not
    /// a change, so kept apart from `paths`.
    pub bytecode: Vec<String>,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.paths.is_empty() && self.git.is_empty() && self.left.is_empty()
    }

    /// Everything that changed, for `side_effects` and warnings: work-tree paths, then refs
    /// and `.git/…` files.
    pub fn changed(&self) -> Vec<String> {
        let mut all = self.paths.clone();
        all.extend(self.git.iter().cloned());
        all.extend(self.left.iter().cloned());
        all
    }

    /// The line that names the bytecode removed, when there was any (up to five names).
    pub fn bytecode_note(&self) -> Option<String> {
        let first: Vec<&str> = self.bytecode.iter().take(5).map(String::as_str).collect();
        let more = match self.bytecode.len() {
            n if n > 5 => format!(" and {} more", n - 5),
            _ => String::new(),
        };
        (!first.is_empty()).then(|| {
            format!(
                "removed the Python bytecode a command wrote beside the sources (Python compiles it again): {}{more}",
                first.join(", ")
            )
        })
    }

    /// The error for paths that stayed different, naming each.
    pub fn error(&self, what: &str) -> Option<Error> {
        if self.failed.is_empty() {
            return None;
        }
        let names: Vec<&str> = self
            .failed
            .iter()
            .take(10)
            .map(|f| f.split(": ").next().unwrap_or(f))
            .collect();
        let more = if self.failed.len() > 10 { ", …" } else { "" };
        let mut err = Error::new(format!(
            "{what} could not put back {}{more}",
            names.join(", ")
        ));
        for f in self.failed.iter().take(20) {
            err = err.detail(f.clone());
        }
        if self.failed.len() > 20 {
            err = err.detail(format!("… and {} more", self.failed.len() - 20));
        }
        Some(
            err.hint(
                "fix what is named (git status shows the paths), then run git factory recover",
            ),
        )
    }
}

/// What the index holds at a path, for the sweep.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tracked {
    /// A tracked file (or submodule) in the work tree.
    Yes,
    /// A folder holding tracked paths in the work tree.
    Folder,
    /// Only paths a sparse checkout leaves out: nothing belongs there.
    LeftOut,
    No,
}

/// The index entry flag of a path a sparse checkout leaves out (`git update-index
/// --skip-worktree`): such a path is not in the work tree, so a file there is a command's.
const SKIP_WORKTREE: u16 = 0x4000;

/// `.git/info/exclude` of the common git dir: ignore rules a command can change.
fn exclude_path(repo: &Repository) -> PathBuf {
    repo.commondir().join("info").join("exclude")
}

fn is_ours(name: &str) -> bool {
    name.starts_with("refs/factory/") || name.starts_with("refs/notes/factory")
}

/// Every ref outside git-factory's own namespaces, sorted by name.
fn list_refs(repo: &Repository) -> Result<Vec<RefFact>> {
    let mut out = Vec::new();
    for r in repo.references()? {
        let r = r?;
        let Some(name) = r.name().map(str::to_string) else {
            continue;
        };
        if is_ours(&name) {
            continue;
        }
        out.push(RefFact {
            name,
            oid: r.target().map(|o| o.to_string()),
            symbolic: r.symbolic_target().map(str::to_string),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

impl Restore {
    /// Records the worktree `repo` is open on. `own_refs` says whether the refs are this
    /// run's to put back (in-situ) or shared with the user's ongoing work (`--worktree`).
    /// With the run's preflight `walk`, the modes of tracked files come from its own stat of
    /// each; without, the capture's folder walk stats them.
    pub fn capture(
        repo: &Repository,
        saved: PathBuf,
        own_refs: bool,
        walk: Option<&crate::git::status::Snapshot>,
    ) -> Result<Self> {
        let known_modes = walk.and_then(|w| w.odd_modes());
        let root = crate::git::workdir(repo)?;
        let head = repo.find_reference("HEAD")?;
        let head_ref = head.symbolic_target().map(str::to_string);
        let baseline = head.peel_to_commit()?.id().to_string();
        let (refs, shared_refs) = if own_refs {
            (Some(list_refs(repo)?), Vec::new())
        } else {
            (None, list_refs(repo)?)
        };
        let records = if own_refs {
            list_records(repo)?
        } else {
            Vec::new()
        };
        let _ = std::fs::remove_dir_all(&saved);
        std::fs::create_dir_all(&saved)?;
        let index = repo.path().join("index");
        let had_index = match std::fs::read(&index) {
            Ok(bytes) => {
                std::fs::write(saved.join("index"), bytes)?;
                true
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(e.into()),
        };
        if let Ok(bytes) = std::fs::read(repo.commondir().join("config")) {
            std::fs::write(saved.join("config"), bytes)?;
        }
        let exclude_absent = match std::fs::read(exclude_path(repo)) {
            Ok(bytes) => {
                std::fs::write(saved.join("exclude"), bytes)?;
                false
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => return Err(e.into()),
        };
        let hooks = match hooks_dir(repo, &root) {
            Some(dir) => Some(HooksFact::capture(dir, &saved)?),
            None => None,
        };
        crate::trace::mark("  restore capture: refs, index, config, hooks");
        // Folders holding tracked files are not ignored: git need only be asked about the rest.
        let mut tracked: std::collections::HashSet<Vec<u8>> = std::collections::HashSet::new();
        let index = repo.index()?;
        for entry in index.iter() {
            let mut path = entry.path.as_slice();
            while let Some(cut) = path.iter().rposition(|b| *b == b'/') {
                path = &path[..cut];
                if !tracked.insert(path.to_vec()) {
                    break;
                }
            }
        }
        let tracked_dirs: Known<'_> = tracked.iter().map(|p| (p.as_slice(), &NO_FACT)).collect();
        let mut dirs = Vec::new();
        let mut kept = Vec::new();
        let mut modes = Vec::new();
        let (plain, exec) = checkout_modes();
        walk_dirs(
            repo,
            &root,
            b"",
            false,
            Some(&tracked_dirs),
            &mut |rel, meta, empty| {
                dirs.push(DirFact {
                    path: RelPath::from_bytes(rel),
                    mode: meta.permissions().mode() & 0o7777,
                    empty,
                    mtime: mtime_of(meta),
                })
            },
            Some(&mut |rel, entry| {
                use std::os::unix::fs::DirEntryExt;
                let in_index = index
                    .get_path(Path::new(OsStr::from_bytes(rel)), 0)
                    .is_some_and(|e| e.flags_extended & SKIP_WORKTREE == 0);
                if !in_index {
                    kept.push(KeptEntry {
                        path: RelPath::from_bytes(rel),
                        ino: entry.ino(),
                    });
                } else if known_modes.is_some() {
                    // The preflight walk stat'ed it already.
                } else if let Ok(meta) = entry.metadata() {
                    // One stat per tracked file: the odd modes a checkout would not recreate.
                    let mode = meta.permissions().mode() & 0o7777;
                    if meta.is_file() && mode != plain && mode != exec {
                        modes.push((RelPath::from_bytes(rel), mode));
                    }
                }
            }),
        );
        if let Some(known) = known_modes {
            modes = known
                .iter()
                .map(|(p, m)| (RelPath::from_bytes(p), *m))
                .collect();
        }
        kept.sort_by(|a, b| a.path.cmp(&b.path));
        modes.sort();
        crate::trace::mark("  restore capture: folders");
        let root_mtime = std::fs::symlink_metadata(&root)
            .map(|m| mtime_of(&m))
            .unwrap_or_default();
        let since = change_time_now(&saved.join("since"));
        Ok(Restore {
            root,
            git_dir: repo.path().to_path_buf(),
            baseline,
            head_ref,
            refs,
            shared_refs,
            records,
            saved,
            had_index,
            dirs,
            root_mtime,
            images: Vec::new(),
            kept,
            modes,
            exclude_absent,
            hooks,
            since,
        })
    }

    /// The Python environments in the work tree: a folder holding `pyvenv.cfg` or
    /// `conda-meta/`, at most three folders below a git-ignored one (`.venv`, `envs/py311`,
    /// `.envs/3.11/py311`): what the user's own `python` and the checks' run from. The restore
    /// keeps ignored files (SPEC §5), so a sandboxed check must not write there at all: a
    /// `.pth`, a `sitecustomize` or bytecode planted in `site-packages` would run in every
    /// later interpreter of that environment. The search reads at most 4,096 folders (an
    /// ignored `node_modules` is not read to its end) and never follows a link.
    pub fn environments(&self) -> Vec<PathBuf> {
        const DEPTH: usize = 3;
        const FOLDERS: usize = 4096;
        let is_env =
            |dir: &Path| dir.join("pyvenv.cfg").is_file() || dir.join("conda-meta").is_dir();
        let mut out = Vec::new();
        let mut queue: std::collections::VecDeque<(PathBuf, usize)> = (self.kept.iter())
            .map(|k| (self.root.join(k.path.path()), 0))
            .filter(|(dir, _)| std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()))
            .collect();
        let mut read = 0;
        while let Some((dir, depth)) = queue.pop_front() {
            if is_env(&dir) {
                out.push(dir);
                continue;
            }
            if depth == DEPTH || read == FOLDERS {
                continue;
            }
            read += 1;
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    queue.push_back((entry.path(), depth + 1));
                }
            }
        }
        out.sort();
        out
    }

    /// Records the pre-images of the paths a change is about to write: their bytes (as
    /// blobs) and their exact modes, read from the tree as it is now.
    pub fn set_images(&mut self, repo: &Repository, outcomes: &[FileOutcome]) -> Result<()> {
        self.images = outcomes
            .iter()
            .map(|o| {
                let path = RelPath::from_bytes(o.path.as_bytes());
                let mode = exact_mode(&self.root, &path);
                Ok(Image {
                    blob: match &o.before {
                        Some(s) => Some(repo.blob(&s.bytes)?.to_string()),
                        None => None,
                    },
                    mode: mode.unwrap_or_else(|| {
                        if o.before.as_ref().is_some_and(|s| s.executable) {
                            0o755
                        } else {
                            0o644
                        }
                    }),
                    path,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(())
    }

    /// The images of baseline + change: each changed path's after-state, in the mode its
    /// pre-image had (the executable bit as the change says).
    pub fn change_images(&self, repo: &Repository, outcomes: &[FileOutcome]) -> Result<Vec<Image>> {
        outcomes
            .iter()
            .map(|o| {
                let path = RelPath::from_bytes(o.path.as_bytes());
                let before = self
                    .images
                    .iter()
                    .find(|i| i.path == path && i.blob.is_some())
                    .map(|i| i.mode);
                Ok(Image {
                    blob: match &o.after {
                        Some(s) => Some(repo.blob(&s.bytes)?.to_string()),
                        None => None,
                    },
                    mode: with_exec(
                        before.unwrap_or(0o644),
                        o.after.as_ref().is_some_and(|s| s.executable),
                    ),
                    path,
                })
            })
            .collect()
    }

    /// Whether `repo` is open on the worktree this restore belongs to.
    pub fn belongs_to(&self, repo: &Repository) -> bool {
        same_dir(repo.path(), &self.git_dir)
    }

    /// Opens the worktree this restore belongs to, or says why it cannot be.
    pub fn open_worktree(&self) -> Result<Repository> {
        let refuse = |why: &str| {
            Error::new(format!(
                "the interrupted run changed the worktree at {}, {why}",
                self.root.display()
            ))
            .hint(format!(
                "put that worktree back where it was and run git factory recover there; or, if it is gone for good, remove {}",
                self.saved.parent().unwrap_or(&self.saved).join("journal.json").display()
            ))
        };
        let repo = Repository::open(&self.root).map_err(|_| refuse("which is no longer there"))?;
        if !self.belongs_to(&repo) {
            return Err(refuse(
                "which now belongs to another repository or worktree",
            ));
        }
        Ok(repo)
    }

    /// Puts the worktree back: refs (HEAD and its branch, then every other ref), the index
    /// (its saved bytes, through `index.lock` and a rename), `.git/config`, then the work
    /// tree — what commands left removed first, then `images` written (their exact bytes and
    /// modes) and every other tracked path checked out from the baseline, folders as they
    /// were. `images` are the pre-images for a rollback, or baseline + change after a PASS.
    pub fn apply(&self, images: &[Image], purpose: Purpose) -> Result<Report> {
        let repo = Repository::open(&self.root)?;
        self.apply_with(&repo, images, purpose)
    }

    /// [`Restore::apply`] through a repository the caller already has open on this worktree
    /// (its parsed index and config are reused; the index is re-read when its file changed).
    pub fn apply_with(
        &self,
        repo: &Repository,
        images: &[Image],
        purpose: Purpose,
    ) -> Result<Report> {
        self.apply_walked(repo, images, purpose, None)
    }

    /// [`Restore::apply_with`] that finds what commands left with the run's preflight walk:
    /// only folders whose stamp changed since are listed again (SPEC §7 order unchanged).
    pub fn apply_walked(
        &self,
        repo: &Repository,
        images: &[Image],
        purpose: Purpose,
        walk: Option<&crate::git::status::Snapshot>,
    ) -> Result<Report> {
        if !self.belongs_to(repo) {
            return Err(Error::new(format!(
                "internal: a restore of {} was asked of another worktree",
                self.root.display()
            )));
        }
        let mut report = Report::default();
        let baseline = Oid::from_str(&self.baseline)?;
        // 1. Refs.
        report
            .git
            .extend(restore_head(repo, self.head_ref.as_deref(), baseline)?);
        match &self.refs {
            Some(refs) => {
                report.git.extend(restore_refs(repo, refs)?);
                report.git.extend(restore_records(repo, &self.records));
            }
            None => report.left.extend(changed_refs(repo, &self.shared_refs)?),
        }
        // 2. The index.
        if purpose == Purpose::Recover {
            self.clear_stale_locks(repo, &mut report);
        }
        if self.had_index {
            let saved = std::fs::read(self.saved.join("index"))?;
            match replace_locked(&repo.path().join("index"), &saved) {
                Ok(true) => report.git.push(".git/index".to_string()),
                Ok(false) => {}
                Err(e) => report.failed.push(format!(".git/index: {e}")),
            }
        }
        if let Ok(saved) = std::fs::read(self.saved.join("config")) {
            let config = repo.commondir().join("config");
            if std::fs::read(&config).ok().as_deref() != Some(saved.as_slice()) {
                // The user's own config edits during a --worktree run are theirs: only
                // reported there; an in-situ run holds the repo and puts it back.
                if self.refs.is_some() {
                    if let Err(e) = replace_locked(&config, &saved) {
                        report.failed.push(format!(".git/config: {e}"));
                    }
                    report.git.push(".git/config".to_string());
                } else {
                    report.left.push(".git/config".to_string());
                }
            }
        }
        if let Some(hooks) = &self.hooks {
            // In every mode, also where the repo is shared with the user's ongoing work: a
            // planted hook would run the checks' code on the user's next commit.
            let differed = hooks.restore(&self.saved, true, &mut report.failed);
            report.git.extend(differed);
        }
        // Ignore rules first: what follows must not trust the ones a command wrote.
        let exclude = exclude_path(repo);
        let now = std::fs::read(&exclude).ok();
        match std::fs::read(self.saved.join("exclude")) {
            Ok(saved) if now.as_deref() != Some(saved.as_slice()) && self.refs.is_none() => {
                // Shared with the user's ongoing work (as `.git/config` is): named, not undone.
                let _ = saved;
                report
                    .git
                    .push(".git/info/exclude (changed, left as is)".to_string());
            }
            Ok(saved) if now.as_deref() != Some(saved.as_slice()) => {
                let written = std::fs::create_dir_all(exclude.parent().unwrap_or(repo.path()))
                    .and_then(|_| replace_locked(&exclude, &saved));
                match written {
                    Ok(_) => report.git.push(".git/info/exclude".to_string()),
                    Err(e) => report.failed.push(format!(".git/info/exclude: {e}")),
                }
            }
            Err(_) if self.exclude_absent && now.is_some() && self.refs.is_some() => {
                match std::fs::remove_file(&exclude) {
                    Ok(()) => report.git.push(".git/info/exclude".to_string()),
                    Err(e) => report.failed.push(format!(".git/info/exclude: {e}")),
                }
            }
            _ => {}
        }
        crate::trace::mark("  restore: refs, index, config, hooks, excludes");
        crate::crash::point(purpose.kill_point());
        // 3. The work tree.
        let baseline_tree = repo.find_commit(baseline)?.tree()?;
        self.restore_tree(repo, &baseline_tree, images, walk, &mut report)?;
        crate::trace::mark("  restore: work tree");
        report.paths.sort();
        report.paths.dedup();
        Ok(report)
    }

    fn restore_tree(
        &self,
        repo: &Repository,
        tree: &git2::Tree<'_>,
        images: &[Image],
        walk: Option<&crate::git::status::Snapshot>,
        report: &mut Report,
    ) -> Result<()> {
        let root = &self.root;
        // Folders first: an unreadable one (chmod 000) would hide what is under it.
        let known: Known<'_> = self.dirs.iter().map(|d| (d.path.as_bytes(), d)).collect();
        self.make_readable();
        self.sweep(repo, images, &known, report)?;
        crate::trace::mark("  restore: ignore rules and hidden entries");
        self.drop_kept_bytecode(report);
        crate::trace::mark("  restore: bytecode beside the sources");
        let image_paths: Vec<&[u8]> = images.iter().map(|i| i.path.as_bytes()).collect();
        let others = |walk: Vec<Dirty>| -> Vec<Dirty> {
            walk.into_iter()
                .filter(|d| !image_paths.contains(&d.path.as_slice()))
                .collect()
        };
        let mut pending = match tree_walk(repo, walk) {
            Ok(found) => others(found),
            Err(_) => {
                // A folder a command made unreadable hides what is under it: open them all up.
                walk_dirs(repo, root, b"", true, Some(&known), &mut |_, _, _| {}, None);
                others(tree_walk(repo, walk)?)
            }
        };
        crate::trace::mark("  restore: status walk");
        for round in 0..3 {
            let mut checkout: Vec<Vec<u8>> = Vec::new();
            for d in &pending {
                let name = RelPath::from_bytes(&d.path).display();
                if d.submodule {
                    clean_submodule(root, &d.path, d.gitlink, report);
                } else if d.untracked {
                    match remove_path(root, &d.path) {
                        Ok(()) => {
                            report.paths.push(name.trim_end_matches('/').to_string());
                            report.files.push(d.path.clone());
                        }
                        Err(e) => report.failed.push(format!("{name}: {e}")),
                    }
                } else {
                    if d.modified {
                        // A change its stat data hides (same size and mtime second) is one
                        // libgit2's checkout would skip as unmodified: the file goes first
                        // (never through a link), so it is written again.
                        let _ = remove_path(root, &d.path);
                    }
                    checkout.push(d.path.clone());
                }
            }
            for image in images {
                match write_image(repo, root, image) {
                    Ok(true) => {
                        report.paths.push(image.path.display());
                        report.files.push(image.path.as_bytes().to_vec());
                    }
                    Ok(false) => {}
                    Err(e) if round == 2 => {
                        report.failed.push(format!("{}: {e}", image.path.display()))
                    }
                    Err(_) => {}
                }
            }
            if !checkout.is_empty() {
                let mut builder = CheckoutBuilder::new();
                builder
                    .force()
                    .update_index(false)
                    .remove_untracked(false)
                    .disable_pathspec_match(true);
                for p in &checkout {
                    // Nothing on the way to a tracked path may be a link or a file.
                    if let Err(e) = real_parents(root, p) {
                        report
                            .failed
                            .push(format!("{}: {e}", RelPath::from_bytes(p).display()));
                    }
                    builder.path(p.as_slice());
                }
                if let Err(e) = repo.checkout_tree(tree.as_object(), Some(&mut builder)) {
                    report.failed.push(format!("checkout: {}", e.message()));
                }
                report
                    .paths
                    .extend(checkout.iter().map(|p| RelPath::from_bytes(p).display()));
                report.files.extend(checkout.iter().cloned());
            }
            crate::trace::mark("  restore: paths put back");
            self.restore_dirs(repo, &known, report);
            crate::trace::mark("  restore: folders put back");
            let images_done = images.iter().all(|i| image_matches(root, i));
            if pending.is_empty() && images_done {
                break;
            }
            pending = others(tree_walk(repo, walk)?);
            if pending.is_empty() && images_done {
                break;
            }
        }
        self.restore_modes(images, report);
        for d in &pending {
            let name = RelPath::from_bytes(&d.path).display();
            if !report.failed.iter().any(|f| f.starts_with(&name)) {
                report
                    .failed
                    .push(format!("{name}: still differs from the baseline"));
            }
        }
        for image in images {
            if !image_matches(root, image) {
                let name = image.path.display();
                if !report.failed.iter().any(|f| f.starts_with(&name)) {
                    report
                        .failed
                        .push(format!("{name}: could not be written back"));
                }
            }
        }
        Ok(())
    }

    /// Makes the ignore rules the baseline's before the status walk judges anything by them,
    /// and removes what that walk cannot see. SPEC §5 keeps ignored files (`git clean -fd`,
    /// no `-x`) — ignored by the baseline's rules, never by rules a command wrote: a
    /// `.gitignore` it planted (one that ignores itself, a new folder ignoring `*`) goes here,
    /// a tracked one it edited is written back from the index (`info/exclude` was put back
    /// with `.git/config`). Files written where a sparse checkout left a path out go too (the
    /// walk does not look at skip-worktree paths). A recorded entry a command renamed (same
    /// inode, old name gone) is moved back, so the user's ignored data is not deleted under
    /// its new name; one it deleted is named. Only folders whose stamp moved, and new ones,
    /// are read.
    fn sweep(
        &self,
        repo: &Repository,
        images: &[Image],
        known: &Known<'_>,
        report: &mut Report,
    ) -> Result<()> {
        let index = repo.index()?;
        for e in index.iter() {
            if e.flags_extended & SKIP_WORKTREE != 0 {
                continue;
            }
            let name = e.path.rsplit(|b| *b == b'/').next().unwrap_or(&[]);
            if name == b".gitignore" && e.mode != 0o160000 {
                let path = RelPath::from_bytes(&e.path);
                let mode = self
                    .modes
                    .iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, m)| *m)
                    .unwrap_or(if e.mode == 0o100755 { 0o755 } else { 0o644 });
                let image = Image {
                    blob: Some(e.id.to_string()),
                    mode,
                    path,
                };
                match write_image(repo, &self.root, &image) {
                    Ok(true) => {
                        report.paths.push(image.path.display());
                        report.files.push(image.path.as_bytes().to_vec());
                    }
                    Ok(false) => {}
                    Err(err) => report
                        .failed
                        .push(format!("{}: {err}", image.path.display())),
                }
            }
        }
        let mut queue = self.moved_dirs();
        if queue.is_empty() {
            return Ok(());
        }
        // What the index says of a path, by binary search (no set of every path is built).
        let tracked = |c: &[u8]| -> Tracked {
            if let Some(e) = index.get_path(Path::new(OsStr::from_bytes(c)), 0) {
                return if e.flags_extended & SKIP_WORKTREE != 0 {
                    Tracked::LeftOut
                } else {
                    Tracked::Yes
                };
            }
            let prefix = [c, b"/"].concat();
            let Ok(mut pos) = index.find_prefix(prefix.as_slice()) else {
                return Tracked::No;
            };
            let mut any = false;
            while let Some(e) = index.get(pos) {
                if !e.path.starts_with(&prefix) {
                    break;
                }
                any = true;
                if e.flags_extended & SKIP_WORKTREE == 0 {
                    return Tracked::Folder;
                }
                pos += 1;
            }
            if any {
                Tracked::LeftOut
            } else {
                Tracked::No
            }
        };
        let image_paths: HashSet<&[u8]> = images.iter().map(|i| i.path.as_bytes()).collect();
        let kept: HashSet<&[u8]> = self.kept.iter().map(|k| k.path.as_bytes()).collect();
        // Recorded entries gone from their place, by inode: candidates for a rename back.
        let mut missing: std::collections::HashMap<u64, &KeptEntry> = self
            .kept
            .iter()
            .filter(|k| k.ino != 0 && inode_at(&self.root, k.path.as_bytes()) != Some(k.ino))
            .map(|k| (k.ino, k))
            .collect();
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        while let Some(rel) = queue.pop() {
            if !seen.insert(rel.clone()) {
                continue;
            }
            let Some(dir) = open_dir_at(&self.root, &rel) else {
                continue;
            };
            let Ok(listing) = rustix::fs::Dir::read_from(&dir) else {
                continue;
            };
            let mut entries: Vec<(Vec<u8>, u64, bool)> = Vec::new();
            for entry in listing.flatten() {
                let name = entry.file_name().to_bytes();
                if name == b"." || name == b".." || (rel.is_empty() && name == b".git") {
                    continue;
                }
                let is_dir = entry.file_type() == rustix::fs::FileType::Directory;
                entries.push((name.to_vec(), entry.ino(), is_dir));
            }
            entries.sort();
            for (name, ino, is_dir) in entries {
                let child = if rel.is_empty() {
                    name.clone()
                } else {
                    [rel.as_slice(), b"/", name.as_slice()].concat()
                };
                let c = child.as_slice();
                if kept.contains(c) || image_paths.contains(c) {
                    continue;
                }
                let in_index = tracked(c);
                if in_index == Tracked::Yes {
                    continue;
                }
                let shown = RelPath::from_bytes(c).display();
                if let Some(was) = missing.remove(&ino) {
                    match move_back(&self.root, &dir, &name, was.path.as_bytes()) {
                        Ok(()) => {
                            report.paths.push(shown);
                            report.paths.push(was.path.display());
                            report
                                .files
                                .extend([c.to_vec(), was.path.as_bytes().to_vec()]);
                        }
                        Err(e) => report.failed.push(format!(
                            "{shown}: the ignored {} moved here and could not be moved back: {e}",
                            was.path.display()
                        )),
                    }
                    continue;
                }
                if in_index == Tracked::No && is_bytecode(&name) {
                    match remove_at(&dir, &name) {
                        Ok(()) => report.bytecode.push(shown),
                        Err(e) => report.failed.push(format!("{shown}: {e}")),
                    }
                    continue;
                }
                if name == b".gitignore" || in_index == Tracked::LeftOut {
                    match remove_at(&dir, &name) {
                        Ok(()) => {
                            report.paths.push(shown);
                            report.files.push(c.to_vec());
                        }
                        Err(e) => report.failed.push(format!("{shown}: {e}")),
                    }
                    continue;
                }
                // A recorded folder is read when its own stamp moved; a new one always (a
                // planted rule or a renamed entry may be anywhere in it).
                if is_dir && !known.contains_key(c) {
                    queue.push(child);
                }
            }
        }
        // Recorded ignored entries a command deleted: SPEC §5 promises not to delete them, not
        // to keep copies of their content, so they are named.
        for k in missing
            .values()
            .filter(|k| !present(&self.root, k.path.as_bytes()))
        {
            report.paths.push(format!(
                "{} (ignored; removed by a command, not restored)",
                k.path.display()
            ));
        }
        Ok(())
    }

    /// Bytecode the user had beside their sources (recorded ignored entries) that changed
    /// since capture: rewritten in place, which moves no folder's time, so each entry is
    /// looked at (a rename or a link into the folder moves the entry's own change time too).
    /// A `__pycache__` that is no longer the recorded folder (a link or a folder in its
    /// place; the sweep moved a renamed original back) or that no one can read goes whole.
    /// New bytecode was removed by the sweep.
    fn drop_kept_bytecode(&self, report: &mut Report) {
        let Some(since) = self.since else {
            return;
        };
        let changed = |st: &rustix::fs::Stat| (st.st_ctime, st.st_ctime_nsec as i64) >= since;
        let drop = |dir: &OwnedFd, name: &[u8], shown: String, report: &mut Report| match remove_at(
            dir, name,
        ) {
            Ok(()) => report.bytecode.push(shown),
            Err(e) => report.failed.push(format!("{shown}: {e}")),
        };
        let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
        for k in &self.kept {
            let (parents, name) = split(k.path.as_bytes());
            if !is_bytecode(name) {
                continue;
            }
            let Ok(Some(dir)) = open_parent(&self.root, &parents, false) else {
                continue;
            };
            let Ok(st) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            let is_dir =
                rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory;
            if !is_dir {
                if changed(&st) || (k.ino != 0 && st.st_ino != k.ino) {
                    drop(&dir, name, k.path.display(), report);
                }
                continue;
            }
            let recorded = k.ino == 0 || st.st_ino == k.ino;
            let listing = recorded
                .then(|| rustix::fs::openat(&dir, name, flags, Mode::empty()).ok())
                .flatten()
                .and_then(|sub| Some((rustix::fs::Dir::read_from(&sub).ok()?, sub)));
            let Some((listing, sub)) = listing else {
                drop(&dir, name, k.path.display(), report);
                continue;
            };
            let names: Vec<Vec<u8>> = listing
                .flatten()
                .map(|e| e.file_name().to_bytes().to_vec())
                .filter(|n| n != b"." && n != b"..")
                .collect();
            for n in names {
                if rustix::fs::statat(&sub, n.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| changed(&st))
                {
                    let shown = RelPath::from_bytes(&[k.path.as_bytes(), b"/", &n].concat());
                    drop(&sub, &n, shown.display(), report);
                }
            }
        }
    }

    /// `recover` only: lock files (`index.lock`, `HEAD.lock`) that a command of the killed run
    /// left when `recover` stopped it mid-write (a `git commit` in a check). One is removed
    /// only when it was made after the capture (newer than the saved index) and no live
    /// process has it open — `recover` holds the repo lock and has just stopped the run's
    /// command group, so such a lock has no owner left. Anything else stays and is named by
    /// the index write as before.
    fn clear_stale_locks(&self, repo: &Repository, report: &mut Report) {
        let Ok(captured) = std::fs::metadata(&self.saved).and_then(|m| m.modified()) else {
            return;
        };
        for name in ["index.lock", "HEAD.lock"] {
            let lock = repo.path().join(name);
            let Ok(meta) = std::fs::symlink_metadata(&lock) else {
                continue;
            };
            let newer = meta.modified().is_ok_and(|t| t >= captured);
            if newer && meta.is_file() && !held_open(&lock) {
                match std::fs::remove_file(&lock) {
                    Ok(()) => report.git.push(format!(".git/{name}")),
                    Err(e) => report.failed.push(format!(".git/{name}: {e}")),
                }
            }
        }
    }

    /// Folders whose list of entries may have changed since capture (the root as `b""`):
    /// their time moved, or it has no nanoseconds (a file system keeping whole seconds,
    /// where a same-second change would not show).
    fn moved_dirs(&self) -> Vec<Vec<u8>> {
        let moved = |full: &Path, was: (i64, i64)| -> bool {
            std::fs::symlink_metadata(full)
                .map(|m| m.is_dir() && (mtime_of(&m) != was || was.1 == 0))
                .unwrap_or(false)
        };
        let mut out = Vec::new();
        if moved(&self.root, self.root_mtime) {
            out.push(Vec::new());
        }
        for d in &self.dirs {
            if moved(&self.root.join(d.path.path()), d.mtime) {
                out.push(d.path.as_bytes().to_vec());
            }
        }
        out
    }

    /// Tracked files with a recorded odd mode (0600) that are not what they were: a checkout
    /// wrote them 644, or a command chmodded them. Paths `images` own are theirs.
    fn restore_modes(&self, images: &[Image], report: &mut Report) {
        for (path, mode) in &self.modes {
            if images.iter().any(|i| &i.path == path) {
                continue;
            }
            let (parents, name) = split(path.as_bytes());
            let Ok(Some(dir)) = open_parent(&self.root, &parents, false) else {
                continue;
            };
            let Ok(st) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile
                || st.st_mode & 0o7777 == *mode
            {
                continue;
            }
            match rustix::fs::chmodat(&dir, name, Mode::from_raw_mode(*mode), AtFlags::empty()) {
                Ok(()) => report.paths.push(path.display()),
                Err(e) => report.failed.push(format!("{}: {e}", path.display())),
            }
        }
    }

    /// The cheap common case: a recorded folder still there with its mode (one stat by path;
    /// anything else is looked at again through real folders only).
    fn dir_as_recorded(&self, d: &DirFact) -> bool {
        std::fs::symlink_metadata(self.root.join(d.path.path()))
            .is_ok_and(|m| m.is_dir() && m.permissions().mode() & 0o7777 == d.mode)
    }

    /// Recorded folders a command made unreadable (chmod 000) are opened up before the
    /// status walk, which would otherwise not see inside them; their modes are put back by
    /// `restore_dirs`. A stat each, no directory reads.
    fn make_readable(&self) {
        for d in self.dirs.iter().filter(|d| !self.dir_as_recorded(d)) {
            let rel = d.path.as_bytes();
            if let Some(mode) = dir_mode_at(&self.root, rel) {
                if mode != d.mode && mode & 0o700 != 0o700 {
                    let _ = chmod_dir_at(&self.root, rel, mode | 0o700);
                }
            }
        }
    }

    /// Folders a command created directly inside a recorded one (or the root): only folders
    /// whose modification time moved are read. A time with no nanoseconds may come from a
    /// file system that keeps whole seconds, where a same-second change would not show: such
    /// folders are always read.
    fn new_dirs(&self, repo: &Repository, known: &Known<'_>) -> Vec<Vec<u8>> {
        let moved = |full: &Path, was: (i64, i64)| -> bool {
            std::fs::symlink_metadata(full)
                .map(|m| m.is_dir() && (mtime_of(&m) != was || was.1 == 0))
                .unwrap_or(false)
        };
        let mut parents: Vec<&[u8]> = Vec::new();
        if moved(&self.root, self.root_mtime) {
            parents.push(b"");
        }
        for d in &self.dirs {
            if moved(&self.root.join(d.path.path()), d.mtime) {
                parents.push(d.path.as_bytes());
            }
        }
        let mut found = Vec::new();
        for rel in parents {
            let full = if rel.is_empty() {
                self.root.clone()
            } else {
                self.root.join(OsStr::from_bytes(rel))
            };
            let Ok(entries) = std::fs::read_dir(&full) else {
                continue;
            };
            for e in entries.flatten() {
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = e.file_name();
                let name = name.as_bytes();
                if rel.is_empty() && name == b".git" {
                    continue;
                }
                let child = if rel.is_empty() {
                    name.to_vec()
                } else {
                    [rel, b"/", name].concat()
                };
                if known.contains_key(child.as_slice())
                    || e.path().join(".git").exists()
                    || repo
                        .is_path_ignored(Path::new(OsStr::from_bytes(&child)))
                        .unwrap_or(false)
                {
                    continue;
                }
                found.push(child);
            }
        }
        found
    }

    /// Folders as they were: created ones that are empty now removed (deepest first), empty
    /// ones that existed put back, modes as recorded.
    fn restore_dirs(&self, repo: &Repository, known: &Known<'_>, report: &mut Report) {
        let mut now: Vec<Vec<u8>> = Vec::new();
        for rel in self.new_dirs(repo, known) {
            walk_dirs(
                repo,
                &self.root,
                &rel,
                true,
                None,
                &mut |sub, _, _| now.push(sub.to_vec()),
                None,
            );
        }
        now.sort_by(|a, b| b.len().cmp(&a.len()).then(b.cmp(a)));
        for rel in &now {
            // Only empty ones: remove_dir refuses the rest (they hold ignored files).
            if rmdir_at(&self.root, rel).is_ok() {
                report
                    .paths
                    .push(format!("{}/", RelPath::from_bytes(rel).display()));
            }
        }
        for d in self.dirs.iter().filter(|d| !self.dir_as_recorded(d)) {
            let rel = d.path.as_bytes();
            match dir_mode_at(&self.root, rel) {
                Some(mode) if mode != d.mode => {
                    let _ = chmod_dir_at(&self.root, rel, d.mode);
                    report.paths.push(format!("{}/", d.path.display()));
                }
                Some(_) => {}
                None if d.empty => {
                    let made = real_parents(&self.root, &[rel, b"/x"].concat())
                        .and_then(|_| chmod_dir_at(&self.root, rel, d.mode));
                    match made {
                        Ok(()) => report.paths.push(format!("{}/", d.path.display())),
                        Err(e) => report.failed.push(format!("{}/: {e}", d.path.display())),
                    }
                }
                _ => {}
            }
        }
    }
}

/// A folder's mode, reached through real folders only (`None`: absent, not a folder, or
/// under a link a command planted).
fn dir_mode_at(root: &Path, rel: &[u8]) -> Option<u32> {
    let (parents, name) = split(rel);
    let dir = open_parent(root, &parents, false).ok()??;
    let st = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    (rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory)
        .then_some(st.st_mode & 0o7777)
}

/// Sets a folder's mode, reached through real folders only; a link there is left alone.
fn chmod_dir_at(root: &Path, rel: &[u8], mode: u32) -> std::io::Result<()> {
    let (parents, name) = split(rel);
    let dir = open_parent(root, &parents, false)?
        .ok_or_else(|| std::io::Error::other("not reachable through real folders"))?;
    let st = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Directory {
        return Err(std::io::Error::other("not a folder"));
    }
    Ok(rustix::fs::chmodat(
        &dir,
        name,
        Mode::from_raw_mode(mode),
        AtFlags::empty(),
    )?)
}

/// The hooks folder git runs hooks from (`core.hooksPath`, relative to the work tree), or
/// `None` when it lies inside the work tree (the work-tree restore owns it then).
fn hooks_dir(repo: &Repository, root: &Path) -> Option<PathBuf> {
    let configured = repo
        .config()
        .ok()
        .and_then(|c| c.get_path("core.hooksPath").ok());
    let dir = match configured {
        Some(p) if p.is_absolute() => p,
        Some(p) => root.join(p),
        None => repo.commondir().join("hooks"),
    };
    let real = dir.canonicalize().unwrap_or_else(|_| dir.clone());
    let real_root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let inside_git = real.starts_with(repo.commondir().canonicalize().unwrap_or_default());
    (inside_git || !real.starts_with(&real_root)).then_some(dir)
}

/// The inode of what is at `rel` (a link itself, not its target), through real folders only.
fn inode_at(root: &Path, rel: &[u8]) -> Option<u64> {
    let (parents, name) = split(rel);
    let dir = open_parent(root, &parents, false).ok()??;
    rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|st| st.st_ino)
}

/// Whether any live process has `path` open (Linux `/proc/<pid>/fd`); `true` when that cannot
/// be told, so an unknown owner's lock is never taken away.
fn held_open(path: &Path) -> bool {
    let Ok(target) = path.canonicalize() else {
        return true;
    };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return true;
    };
    for p in procs.flatten() {
        if !p.file_name().as_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue; // gone, or not ours to read (another user's cannot hold our repo's lock)
        };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l == target))
        {
            return true;
        }
    }
    false
}

/// The change time the kernel gives a file made now at `mark` (a new one, never written
/// through a link planted in its place): the clock files get theirs from, which no process
/// can set, and which may move only every few milliseconds (so the wall clock would not do).
pub(crate) fn change_time_now(mark: &Path) -> Option<(i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let _ = std::fs::remove_file(mark);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(mark)
        .ok()?;
    let meta = file.metadata().ok()?;
    Some((meta.ctime(), meta.ctime_nsec()))
}

/// Whether anything (a link included) is at `rel`, reached through real folders only.
fn present(root: &Path, rel: &[u8]) -> bool {
    let (parents, name) = split(rel);
    matches!(open_parent(root, &parents, false), Ok(Some(dir))
        if rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).is_ok())
}

/// Opens a folder of the work tree (`b""`: the root) through real folders only.
fn open_dir_at(root: &Path, rel: &[u8]) -> Option<OwnedFd> {
    if rel.is_empty() {
        return root_fd(root).ok();
    }
    let (mut parents, name) = split(rel);
    parents.push(name);
    open_parent(root, &parents, false).ok()?
}

/// Renames `name` in `dir` back to `to` (repo-relative), through real folders only.
fn move_back(root: &Path, dir: &OwnedFd, name: &[u8], to: &[u8]) -> std::io::Result<()> {
    let (parents, to_name) = split(to);
    let target = open_parent(root, &parents, false)?
        .ok_or_else(|| std::io::Error::other("its folder is gone"))?;
    // What stands in its place now (a link a command put there) is the command's: it goes.
    if rustix::fs::statat(&target, to_name, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
        remove_at(&target, to_name)?;
    }
    Ok(rustix::fs::renameat(dir, name, &target, to_name)?)
}

/// Removes an empty folder reached through real folders only.
fn rmdir_at(root: &Path, rel: &[u8]) -> std::io::Result<()> {
    let (parents, name) = split(rel);
    let dir = open_parent(root, &parents, false)?
        .ok_or_else(|| std::io::Error::other("not reachable through real folders"))?;
    Ok(rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR)?)
}

fn same_dir(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    canon(a) == canon(b)
}

/// The permission bits of a regular file in the work tree, if it is one.
fn exact_mode(root: &Path, path: &RelPath) -> Option<u32> {
    let meta = std::fs::symlink_metadata(root.join(path.path())).ok()?;
    meta.is_file().then_some(meta.permissions().mode() & 0o7777)
}

/// Points HEAD (and the branch it was on) back at the baseline.
pub fn restore_head(repo: &Repository, head_ref: Option<&str>, commit: Oid) -> Result<Vec<String>> {
    let mut fixed = Vec::new();
    let head = repo.find_reference("HEAD")?;
    match head_ref {
        Some(name) => {
            if head.symbolic_target() != Some(name) {
                repo.reference_symbolic("HEAD", name, true, "git factory: restore HEAD")?;
                fixed.push("HEAD".to_string());
            }
            if repo.refname_to_id(name).ok() != Some(commit) {
                repo.reference(name, commit, true, "git factory: restore the baseline")?;
                fixed.push(name.to_string());
            }
        }
        None => {
            if head.symbolic_target().is_some() || head.target() != Some(commit) {
                repo.set_head_detached(commit)?;
                fixed.push("HEAD".to_string());
            }
        }
    }
    Ok(fixed)
}

/// The shared refs that differ from `recorded` (created, moved or deleted), named only. A
/// `--worktree` run shares them with the user and with other runs (whose branches
/// `factory/<run_id>` appear at delivery): none of them is provably a command's, so none is
/// deleted or moved; the run's report names them instead.
fn changed_refs(repo: &Repository, recorded: &[RefFact]) -> Result<Vec<String>> {
    let now = list_refs(repo)?;
    let mut out: Vec<String> = now
        .iter()
        .filter(|r| !recorded.contains(r))
        .map(|r| r.name.clone())
        .chain(
            recorded
                .iter()
                .filter(|k| !now.iter().any(|r| r.name == k.name))
                .map(|k| k.name.clone()),
        )
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// The run records (`refs/factory/<run_id>`, not the journal), sorted by name.
fn list_records(repo: &Repository) -> Result<Vec<RefFact>> {
    let mut out = Vec::new();
    for r in repo.references_glob("refs/factory/*")? {
        let r = r?;
        let Some(name) = r.name().map(str::to_string) else {
            continue;
        };
        if name.starts_with("refs/factory/journal/") {
            continue;
        }
        if let Some(oid) = r.target() {
            out.push(RefFact {
                name,
                oid: Some(oid.to_string()),
                symbolic: None,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Run records a command deleted, put back where they were (never over one that exists now).
fn restore_records(repo: &Repository, recorded: &[RefFact]) -> Vec<String> {
    let mut fixed = Vec::new();
    for k in recorded {
        if repo.find_reference(&k.name).is_ok() {
            continue;
        }
        let Some(oid) = k.oid.as_deref().and_then(|o| Oid::from_str(o).ok()) else {
            continue;
        };
        if repo
            .reference(&k.name, oid, false, "git factory: restore a run record")
            .is_ok()
        {
            fixed.push(k.name.clone());
        }
    }
    fixed
}

/// Every ref back as recorded: created ones deleted, moved or deleted ones put back.
fn restore_refs(repo: &Repository, recorded: &[RefFact]) -> Result<Vec<String>> {
    let now = list_refs(repo)?;
    let mut fixed = Vec::new();
    for r in &now {
        if !recorded.iter().any(|k| k.name == r.name) {
            if let Ok(mut reference) = repo.find_reference(&r.name) {
                reference.delete()?;
                fixed.push(r.name.clone());
            }
        }
    }
    for k in recorded {
        if now.iter().any(|r| r == k) {
            continue;
        }
        match (&k.oid, &k.symbolic) {
            (_, Some(target)) => {
                repo.reference_symbolic(&k.name, target, true, "git factory: restore a ref")?;
            }
            (Some(oid), None) => {
                repo.reference(
                    &k.name,
                    Oid::from_str(oid)?,
                    true,
                    "git factory: restore a ref",
                )?;
            }
            (None, None) => continue,
        }
        fixed.push(k.name.clone());
    }
    fixed.sort();
    fixed.dedup();
    Ok(fixed)
}

/// Replaces `target` with `bytes` as git does: `<target>.lock` created exclusively, written,
/// synced, renamed over. Returns whether anything changed; a lock someone else holds is an
/// error naming it.
pub fn replace_locked(target: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    if std::fs::read(target).ok().as_deref() == Some(bytes) {
        return Ok(false);
    }
    let mut lock_name = target.as_os_str().to_os_string();
    lock_name.push(".lock");
    let lock = PathBuf::from(lock_name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                std::io::Error::other(format!(
                    "{} exists: another git process (or an editor) holds it; close it, or remove the file if nothing does",
                    lock.display()
                ))
            } else {
                e
            }
        })?;
    let written = file
        .write_all(bytes)
        .and_then(|_| file.sync_all())
        .and_then(|_| std::fs::rename(&lock, target));
    if written.is_err() {
        let _ = std::fs::remove_file(&lock);
    }
    written.map(|_| true)
}

/// One entry of the restore's own status walk: bytes, never a lossy name.
struct Dirty {
    path: Vec<u8>,
    untracked: bool,
    submodule: bool,
    /// Tracked and present, but not the baseline's content.
    modified: bool,
    /// For a submodule: the commit the index records for it.
    gitlink: Option<Oid>,
}

/// What commands left in the work tree, found with the status walk of `git::status` (with the
/// run's preflight walk, only folders that changed since are listed again).
fn tree_walk(repo: &Repository, walk: Option<&crate::git::status::Snapshot>) -> Result<Vec<Dirty>> {
    let found = match walk {
        Some(snapshot) => snapshot.changes_since(repo)?,
        None => crate::git::dirty_paths(repo, true)?,
    };
    let index = repo.index()?;
    Ok(found
        .into_iter()
        .map(|d| {
            let gitlink = if d.tracked {
                index
                    .get_path(Path::new(OsStr::from_bytes(&d.raw)), 0)
                    .filter(|e| e.mode == 0o160000)
                    .map(|e| e.id)
            } else {
                None
            };
            let submodule = gitlink.is_some();
            Dirty {
                gitlink,
                untracked: !d.tracked,
                modified: d.tracked && !submodule && d.label == "modified",
                submodule,
                path: d
                    .raw
                    .strip_suffix(b"/")
                    .map(<[u8]>::to_vec)
                    .unwrap_or(d.raw),
            }
        })
        .collect())
}

/// The work tree against the index (restored first, so against the baseline): modified,
/// deleted and untracked-not-ignored paths, each untracked file listed on its own.
fn status_walk(repo: &Repository) -> Result<Vec<Dirty>> {
    let mut opts = StatusOptions::new();
    opts.show(git2::StatusShow::Workdir)
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false)
        .exclude_submodules(false)
        .renames_index_to_workdir(false);
    let statuses = repo.statuses(Some(&mut opts))?;
    let index = repo.index()?;
    let mut out = Vec::new();
    for e in statuses.iter() {
        let s = e.status();
        if s == Status::CURRENT || s.contains(Status::IGNORED) {
            continue;
        }
        let path = e.path_bytes().to_vec();
        // A gitlink in the index: a submodule, whose own tree is cleaned on its own.
        let submodule = !s.contains(Status::WT_NEW)
            && index
                .get_path(Path::new(OsStr::from_bytes(&path)), 0)
                .is_some_and(|e| e.mode == 0o160000);
        out.push(Dirty {
            gitlink: None,
            untracked: s.contains(Status::WT_NEW),
            modified: s.contains(Status::WT_MODIFIED) && !submodule,
            submodule,
            path,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// A placeholder for folders known from the index rather than from a capture.
static NO_FACT: DirFact = DirFact {
    path: RelPath::Text(String::new()),
    mode: 0,
    empty: false,
    mtime: (0, 0),
};

/// Folders recorded at capture, by path: known not to be ignored, so a later walk need not
/// ask again (asking git about ignores is most of a walk's cost).
type Known<'a> = std::collections::HashMap<&'a [u8], &'a DirFact>;

/// Walks the folders of the work tree (not `.git`, not ignored ones, not nested
/// repositories) from `start` (`b""` for the root); calls `visit(path, metadata, empty)`
/// for each, parents first. With `fix`, a
/// folder that cannot be read (a command's chmod 000) is made readable so nothing under it
/// stays hidden; its recorded mode is put back afterwards. `others` is told of every other
/// entry met (files, links, and the ignored folders and nested repositories not walked).
#[allow(clippy::type_complexity)]
fn walk_dirs(
    repo: &Repository,
    root: &Path,
    start: &[u8],
    fix: bool,
    known: Option<&Known<'_>>,
    visit: &mut dyn FnMut(&[u8], &std::fs::Metadata, bool),
    mut others: Option<&mut dyn FnMut(&[u8], &std::fs::DirEntry)>,
) {
    let mut stack: Vec<Vec<u8>> = vec![start.to_vec()];
    while let Some(rel) = stack.pop() {
        let full = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(OsStr::from_bytes(&rel))
        };
        let Ok(meta) = std::fs::symlink_metadata(&full) else {
            continue;
        };
        let mode = meta.permissions().mode() & 0o7777;
        let entries = match std::fs::read_dir(&full) {
            Ok(r) => r,
            Err(_) if !fix => continue,
            Err(_) => {
                let _ =
                    std::fs::set_permissions(&full, std::fs::Permissions::from_mode(mode | 0o700));
                match std::fs::read_dir(&full) {
                    Ok(r) => r,
                    Err(_) => continue,
                }
            }
        };
        let mut empty = true;
        let mut children = Vec::new();
        for e in entries.flatten() {
            empty = false;
            let name = e.file_name();
            let name = name.as_bytes();
            if rel.is_empty() && name == b".git" {
                continue;
            }
            let child = if rel.is_empty() {
                name.to_vec()
            } else {
                [rel.as_slice(), b"/", name].concat()
            };
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                if let Some(tell) = others.as_mut() {
                    tell(&child, &e);
                }
                continue;
            }
            let is_known = known.is_some_and(|k| k.contains_key(child.as_slice()));
            if !is_known {
                // A submodule or nested repository is not ours to walk, nor an ignored folder.
                if e.path().join(".git").exists()
                    || repo
                        .is_path_ignored(Path::new(OsStr::from_bytes(&child)))
                        .unwrap_or(false)
                {
                    if let Some(tell) = others.as_mut() {
                        tell(&child, &e);
                    }
                    continue;
                }
            }
            children.push(child);
        }
        if !rel.is_empty() {
            visit(&rel, &meta, empty);
        }
        children.sort_by(|a, b| b.cmp(a));
        stack.extend(children);
    }
}

fn root_fd(root: &Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        root,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

fn split(path: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let trimmed = path.strip_suffix(b"/").unwrap_or(path);
    let mut parts: Vec<&[u8]> = trimmed
        .split(|b| *b == b'/')
        .filter(|p| !p.is_empty())
        .collect();
    let last = parts.pop().unwrap_or(b"");
    (parts, last)
}

/// Opens the folder holding `path`, one component at a time from the root, never following
/// a link. With `make`, whatever stands where a folder belongs (a link, a file) is removed
/// and the folder created; without, `Ok(None)` says the path cannot exist.
fn open_parent(root: &Path, parents: &[&[u8]], make: bool) -> std::io::Result<Option<OwnedFd>> {
    let mut fd = root_fd(root)?;
    for comp in parents {
        if *comp == b".." || *comp == b"." || comp.eq_ignore_ascii_case(b".git") {
            return Err(std::io::Error::other(
                "refusing a path through . .. or .git",
            ));
        }
        let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
        let next = match rustix::fs::openat(&fd, *comp, flags, Mode::empty()) {
            Ok(next) => next,
            Err(e) if !make => {
                if matches!(
                    e,
                    rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP
                ) {
                    return Ok(None);
                }
                return Err(e.into());
            }
            Err(rustix::io::Errno::NOENT) => {
                rustix::fs::mkdirat(&fd, *comp, Mode::from_raw_mode(0o755))?;
                rustix::fs::openat(&fd, *comp, flags, Mode::empty())?
            }
            Err(rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP) => {
                // A link or a file a command put where a folder belongs: it goes, unfollowed.
                rustix::fs::unlinkat(&fd, *comp, AtFlags::empty())?;
                rustix::fs::mkdirat(&fd, *comp, Mode::from_raw_mode(0o755))?;
                rustix::fs::openat(&fd, *comp, flags, Mode::empty())?
            }
            Err(e) => return Err(e.into()),
        };
        fd = next;
    }
    Ok(Some(fd))
}

/// Makes every folder on the way to `path` a real folder (see [`open_parent`]).
fn real_parents(root: &Path, path: &[u8]) -> std::io::Result<()> {
    let (parents, _) = split(path);
    open_parent(root, &parents, true).map(|_| ())
}

/// Removes what a command left at `path` — a file, a link (never followed) or a folder with
/// everything in it.
fn remove_path(root: &Path, path: &[u8]) -> std::io::Result<()> {
    let (parents, name) = split(path);
    let Some(dir) = open_parent(root, &parents, false)? else {
        return Ok(()); // under a link or a file: it is not in the tree, the parent goes
    };
    remove_at(&dir, name)
}

fn remove_at(dir: &OwnedFd, name: &[u8]) -> std::io::Result<()> {
    let stat = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(s) => s,
        Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Directory {
        return Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?);
    }
    let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
    let sub = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::ACCESS) => {
            let _ = rustix::fs::chmodat(dir, name, Mode::from_raw_mode(0o700), AtFlags::empty());
            rustix::fs::openat(dir, name, flags, Mode::empty())?
        }
        Err(e) => return Err(e.into()),
    };
    let _ = rustix::fs::fchmod(&sub, Mode::from_raw_mode(0o700));
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(&sub)? {
        let entry = entry?;
        let n = entry.file_name().to_bytes();
        if n != b"." && n != b".." {
            names.push(n.to_vec());
        }
    }
    for n in names {
        remove_at(&sub, &n)?;
    }
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?)
}

/// Makes `image.path` hold the image exactly, without following any link on the way.
/// Returns whether it had to change anything.
fn write_image(repo: &Repository, root: &Path, image: &Image) -> std::io::Result<bool> {
    if image_matches(root, image) {
        return Ok(false);
    }
    let (parents, name) = split(image.path.as_bytes());
    let Some(blob) = &image.blob else {
        let Some(dir) = open_parent(root, &parents, false)? else {
            return Ok(true);
        };
        remove_at(&dir, name)?;
        return Ok(true);
    };
    let bytes = Oid::from_str(blob)
        .and_then(|id| repo.find_blob(id))
        .map(|b| b.content().to_vec())
        .map_err(|e| std::io::Error::other(e.message().to_string()))?;
    let dir = open_parent(root, &parents, true)?
        .ok_or_else(|| std::io::Error::other("no folder to write into"))?;
    // A folder where the file belongs goes first (what a command left).
    if let Ok(stat) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Directory {
            remove_at(&dir, name)?;
        }
    }
    let tmp: Vec<u8> = [b".", name, b".factory-restore"].concat();
    let _ = rustix::fs::unlinkat(&dir, tmp.as_slice(), AtFlags::empty());
    let fd = rustix::fs::openat(
        &dir,
        tmp.as_slice(),
        OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut file = std::fs::File::from(fd);
    let written = file
        .write_all(&bytes)
        .and_then(|_| {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(image.mode)).map_err(Into::into)
        })
        .and_then(|_| rustix::fs::renameat(&dir, tmp.as_slice(), &dir, name).map_err(Into::into));
    if written.is_err() {
        let _ = rustix::fs::unlinkat(&dir, tmp.as_slice(), AtFlags::empty());
    }
    written.map(|_| true)
}

/// Whether the path holds the image now (a regular file with its bytes and mode, or nothing).
fn image_matches(root: &Path, image: &Image) -> bool {
    let (parents, name) = split(image.path.as_bytes());
    let Ok(Some(dir)) = open_parent(root, &parents, false) else {
        return image.blob.is_none();
    };
    let stat = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(s) => s,
        Err(_) => return image.blob.is_none(),
    };
    let Some(blob) = &image.blob else {
        return false;
    };
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile
        || stat.st_mode & 0o7777 != image.mode
    {
        return false;
    }
    let Ok(fd) = rustix::fs::openat(
        &dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    let mut bytes = Vec::new();
    if std::io::Read::read_to_end(&mut std::fs::File::from(fd), &mut bytes).is_err() {
        return false;
    }
    Oid::from_str(blob).ok() == git2::Oid::hash_object(git2::ObjectType::Blob, &bytes).ok()
}

/// A submodule a command dirtied: a HEAD a command moved (a commit made inside it) is put
/// back at the recorded gitlink commit, detached, with its index and files, as `git submodule
/// update` does (the command's commit stays in its object store and reflog); then what it
/// left untracked is removed and its tracked files checked out from that HEAD.
fn clean_submodule(root: &Path, path: &[u8], gitlink: Option<Oid>, report: &mut Report) {
    let name = RelPath::from_bytes(path).display();
    let sub_root = root.join(OsStr::from_bytes(path));
    let Ok(sub) = Repository::open(&sub_root) else {
        report
            .failed
            .push(format!("{name}: a submodule that cannot be opened"));
        return;
    };
    let head = sub.head().ok().and_then(|h| h.target());
    if let Some(want) = gitlink.filter(|w| head != Some(*w)) {
        let back = sub.find_commit(want).and_then(|c| {
            sub.set_head_detached(want)?;
            let mut force = CheckoutBuilder::new();
            force.force();
            sub.reset(c.as_object(), git2::ResetType::Hard, Some(&mut force))
        });
        match back {
            Ok(()) => report.paths.push(format!("{name} (HEAD back at {want})")),
            Err(e) => report.failed.push(format!(
                "{name}: its HEAD moved and could not be put back at {want}: {}",
                e.message()
            )),
        }
    }
    let Ok(dirty) = status_walk(&sub) else {
        report
            .failed
            .push(format!("{name}: a submodule whose status cannot be read"));
        return;
    };
    let mut checkout = CheckoutBuilder::new();
    checkout
        .force()
        .update_index(false)
        .disable_pathspec_match(true);
    let mut any = false;
    for d in &dirty {
        let inner = format!("{name}/{}", RelPath::from_bytes(&d.path).display());
        if d.untracked {
            match remove_path(&sub_root, &d.path) {
                Ok(()) => report.paths.push(inner),
                Err(e) => report.failed.push(format!("{inner}: {e}")),
            }
        } else {
            checkout.path(d.path.as_slice());
            any = true;
            report.paths.push(inner);
        }
    }
    if any {
        let done = sub
            .head()
            .and_then(|h| h.peel_to_tree())
            .and_then(|t| sub.checkout_tree(t.as_object(), Some(&mut checkout)));
        if let Err(e) = done {
            report.failed.push(format!("{name}: {}", e.message()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_keep_their_bytes_through_json() {
        let p = RelPath::from_bytes(b"caf\xe9.txt");
        let text = serde_json::to_string(&p).expect("json");
        let back: RelPath = serde_json::from_str(&text).expect("back");
        assert_eq!(back.as_bytes(), b"caf\xe9.txt");
        assert_eq!(p.display(), "caf\\xe9.txt");
        let q: RelPath = serde_json::from_str("\"a/b.txt\"").expect("text");
        assert_eq!(q.as_bytes(), b"a/b.txt");
    }

    #[test]
    fn a_link_in_the_way_is_removed_not_followed() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("root");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&root).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(outside.join("f"), "outside\n").expect("write");
        std::os::unix::fs::symlink(&outside, root.join("d")).expect("link");
        real_parents(&root, b"d/f").expect("parents");
        assert!(root.join("d").is_dir() && !root.join("d").is_symlink());
        assert_eq!(
            std::fs::read(outside.join("f")).expect("read"),
            b"outside\n"
        );
        std::os::unix::fs::symlink(&outside, root.join("e")).expect("link");
        remove_path(&root, b"e/f").expect("nothing under a link");
        remove_path(&root, b"e").expect("the link itself");
        assert!(!root.join("e").exists());
        assert!(outside.join("f").exists());
    }
}
