//! What a restore records before anything changes: the worktree's refs, folders, kept
//! entries, hooks and pre-images, as the journal stores them. Plain records; every step of the
//! restore reads them, none of them acts.

use serde::{Deserialize, Serialize};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
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

    pub(super) fn path(&self) -> &Path {
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

pub(super) fn mtime_of(meta: &std::fs::Metadata) -> (i64, i64) {
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
    /// The run's saved folder: its `state` file holds the bytes of the index, `.git/config`,
    /// `info/exclude` and the hooks, written once before any change (`saved.rs` reads and
    /// writes it); a run from before it kept them as files here. The sandbox's kept copies
    /// live here too.
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
    /// The change time (seconds, nanoseconds) of the saved state, written at capture: Python
    /// bytecode in the work tree that changed since is a command's, and goes (see
    /// `is_bytecode` in `python.rs`).
    #[serde(default)]
    pub since: Option<(i64, i64)>,
    /// SHA-256 (hex) of the saved state file as the capture wrote it: `recover` reads the
    /// file back only when it is still that (a command may have rewritten it since).
    #[serde(default)]
    pub state_digest: Option<String>,
    /// The saved state as captured, kept in memory: a restore within the run never reads it
    /// back from disk, where a command could have damaged or rewritten it.
    #[serde(skip)]
    pub(super) state: Option<std::sync::Arc<SavedState>>,
    /// The commands run in this worktree are confined (`--sandbox`, SPEC §7.1): what they
    /// made is removed when the attempt ends — new files the baseline's rules ignore too (a
    /// native module or a `.pth` the user's next `python` would import) — and listed. Without
    /// it new ignored files stay (SPEC §5), except after an agent (its audit removes them).
    #[serde(default)]
    pub confined: bool,
}

/// An untracked entry that existed at capture (see [`Restore::kept`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptEntry {
    pub path: RelPath,
    /// Its inode: an entry a command renamed is found by it and moved back, not deleted.
    #[serde(default)]
    pub ino: u64,
    /// What tells this entry from a later one given the same inode number (the kernel hands
    /// a freed number to the next file made): see [`Identity`]. `None` in journals written
    /// before it was recorded: such an entry is never taken for a rename.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Identity>,
}

/// An entry's identity beyond its inode number, as a rename keeps it: its birth time where
/// the file system records one (no command can set it), else its size and modification time
/// (a rename changes neither; a new file made after the capture has another).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub ino: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub born: Option<(i64, u32)>,
    pub size: u64,
    pub mtime: (i64, u32),
}

impl Identity {
    /// Whether `now` is the same entry as `self` was: same inode, and the same birth time
    /// when both know one, else the same size and modification time.
    pub fn same_entry(&self, now: &Identity) -> bool {
        if self.ino != now.ino {
            return false;
        }
        match (self.born, now.born) {
            (Some(a), Some(b)) => a == b,
            _ => self.size == now.size && self.mtime == now.mtime,
        }
    }
}

/// The hooks folder (`core.hooksPath` honoured) as it was: each entry's name and mode; its
/// bytes (a link's target) are in the saved state.
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

/// One hook's saved entry: its name, exact mode (0o120000 for a link) and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SavedHook {
    pub name: Vec<u8>,
    pub mode: u32,
    pub bytes: Vec<u8>,
}

/// What a capture saved (the file it is kept in is `saved.rs`'s); `None` for a file that did
/// not exist (or, for the config, could not be read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct SavedState {
    pub index: Option<Vec<u8>>,
    pub config: Option<Vec<u8>>,
    pub exclude: Option<Vec<u8>>,
    pub hooks: Vec<SavedHook>,
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
}
