//! Modes put back (SPEC §7.1: what a backend's rules cannot single out is saved and put
//! back). Landlock's rights up to ABI 7 do not cover a file's mode, and under bubblewrap the
//! tree's root is writable: a confined command may still `chmod` what it cannot write — the
//! tree's root folder, a git dir's `config`, `hooks/` and what is in it, the verify key —
//! within what the seccomp filter allows (never setuid, setgid or world-writable, see
//! `process.rs`). Their modes are noted before each command and put back after it.
//!
//! Only modes: a file replaced under the same name is `keep.rs`'s business, and timestamps
//! git does not read.

use super::Policy;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The entries of a git dir whose mode is noted, besides the folder itself.
const GIT_DIR_ENTRIES: [&str; 8] = [
    "config",
    "hooks",
    "HEAD",
    "objects",
    "refs",
    "info",
    "factory",
    "commondir",
];

/// The modes of the entries a command may `chmod` but not write, as they were before it.
#[derive(Debug, Default)]
pub struct Noted {
    entries: Vec<Entry>,
    /// Git dirs whose every entry `git_modes.rs` watches (Landlock), each with the harness's
    /// own folder in it, settled again after the command.
    watched: Vec<(PathBuf, PathBuf)>,
    /// The writable folders, to show a put-back entry relative to the one it is in.
    writable: Vec<PathBuf>,
    /// What was put back before the command (a command that ran alongside changed it).
    before: PutBack,
}

#[derive(Debug)]
struct Entry {
    path: PathBuf,
    /// How it is listed: relative to the writable folder it is in (`.` for that folder).
    shown: PathBuf,
    dev: u64,
    ino: u64,
    mode: u32,
}

/// What [`Noted::put_back`] did.
#[derive(Debug, Default)]
pub struct PutBack {
    /// Entries whose mode was put back (relative to the writable folder they are in).
    pub restored: Vec<PathBuf>,
    /// Entries whose mode could not be put back, with why.
    pub failed: Vec<String>,
}

impl Noted {
    /// Notes the modes of the policy's writable roots, its read-only and hidden entries, and
    /// of what is in each read-only git dir ([`GIT_DIR_ENTRIES`], each hook). `whole_git_dirs`
    /// (Landlock, where `chmod` reaches into a git dir, unlike bubblewrap's read-only mounts):
    /// everything in each git dir — loose-object folders and objects, packs, refs, the index,
    /// logs — but the harness's own `factory/` below its first level (its pooled worktrees and
    /// caches are large, and proven or rebuilt before they are trusted); a `chmod 0` there
    /// would leave the repo unreadable to its user, with the run a PASS. Watched by
    /// `git_modes.rs` where inotify serves, else walked before each command.
    pub fn of(policy: &Policy, whole_git_dirs: bool) -> Noted {
        let mut noted = Noted {
            writable: policy.writable.clone(),
            ..Noted::default()
        };
        let mut paths: Vec<PathBuf> = (policy.writable.iter())
            .chain(&policy.read_only)
            .chain(&policy.hidden)
            .cloned()
            .collect();
        for dir in policy.read_only.iter().filter(|d| is_git_dir(d)) {
            let own = dir.join("factory");
            // Watched across commands where inotify serves (every entry, these too): only what
            // changed is looked at.
            if whole_git_dirs {
                if let Some(settled) = super::git_modes::settle(dir, &own) {
                    noted.took(settled);
                    noted.watched.push((dir.clone(), own));
                    continue;
                }
            }
            paths.extend(GIT_DIR_ENTRIES.iter().map(|e| dir.join(e)));
            if let Ok(hooks) = std::fs::read_dir(dir.join("hooks")) {
                paths.extend(hooks.flatten().map(|h| h.path()));
            }
            paths.push(own.join(super::VERIFY_KEY));
            if whole_git_dirs {
                walk(dir, &own, &mut paths);
                if let Ok(own) = std::fs::read_dir(&own) {
                    paths.extend(own.flatten().map(|e| e.path()));
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        paths.retain(|p| seen.insert(p.clone()));
        let entries = paths.into_iter().filter_map(|path| {
            let m = std::fs::symlink_metadata(&path).ok()?;
            // A link's own mode means nothing, and a chmod through it reaches its target.
            (!m.file_type().is_symlink()).then(|| Entry {
                shown: shown(&policy.writable, &path),
                dev: m.dev(),
                ino: m.ino(),
                mode: m.mode() & 0o7777,
                path,
            })
        });
        noted.entries = entries.collect();
        noted
    }

    /// Keeps what a settle of a watched git dir put back before the command, to report with
    /// what it puts back after.
    fn took(&mut self, settled: super::git_modes::Settled) {
        let shown = (settled.restored.iter()).map(|p| shown(&self.writable, p));
        self.before.restored.extend(shown);
        self.before.failed.extend(settled.failed);
    }

    /// Puts back each noted mode that changed, on the entry noted (never on another file or a
    /// link now found under its name).
    pub fn put_back(&self) -> PutBack {
        let mut out = PutBack {
            restored: self.before.restored.clone(),
            failed: self.before.failed.clone(),
        };
        for (dir, own) in &self.watched {
            if let Some(settled) = super::git_modes::settle(dir, own) {
                out.restored
                    .extend(settled.restored.iter().map(|p| shown(&self.writable, p)));
                out.failed.extend(settled.failed);
            }
        }
        for e in &self.entries {
            let Ok(m) = std::fs::symlink_metadata(&e.path) else {
                continue;
            };
            let same = m.dev() == e.dev && m.ino() == e.ino && !m.file_type().is_symlink();
            if !same || m.mode() & 0o7777 == e.mode {
                continue;
            }
            match std::fs::set_permissions(&e.path, std::fs::Permissions::from_mode(e.mode)) {
                Ok(()) => out.restored.push(e.shown.clone()),
                Err(err) => out
                    .failed
                    .push(format!("the mode of {}: {err}", e.path.display())),
            }
        }
        out
    }
}

/// `path` as a put-back list shows it: relative to the writable folder it is in (`.` for
/// that folder), else whole.
fn shown(writable: &[PathBuf], path: &Path) -> PathBuf {
    let within = writable.iter().find(|w| path.starts_with(w));
    match within.and_then(|w| path.strip_prefix(w).ok()) {
        Some(rest) if rest.as_os_str().is_empty() => PathBuf::from("."),
        Some(rest) => rest.to_path_buf(),
        None => path.to_path_buf(),
    }
}

/// Every entry below `dir`, each folder before its entries (links as themselves, never
/// followed), `skip` and what lies below it aside.
fn walk(dir: &Path, skip: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path == skip {
            continue;
        }
        // A folder before what is in it: its mode goes back first, so what is in it can be
        // reached again.
        out.push(path.clone());
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            walk(&path, skip, out);
        }
    }
}

/// Whether `dir` is a git dir (a folder with a `HEAD`), not a `.git` file or a tree.
fn is_git_dir(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) && dir.join("HEAD").is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_mode_is_put_back_and_an_unchanged_one_left() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let tree = tmp.path().join("tree");
        let git = tree.join(".git");
        std::fs::create_dir_all(git.join("hooks")).expect("mkdir");
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").expect("write");
        std::fs::write(git.join("config"), "").expect("write");
        std::fs::write(git.join("hooks/pre-commit.sample"), "").expect("write");
        let policy = Policy {
            writable: vec![tree.clone()],
            read_only: vec![git.clone()],
            ..Policy::default()
        };
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").mode() & 0o7777;
        let before: Vec<u32> = [&tree, &git.join("config"), &git.join("hooks")]
            .iter()
            .map(|p| mode(p))
            .collect();
        let noted = Noted::of(&policy, false);
        let set = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod")
        };
        set(&tree, 0o700);
        set(&git.join("config"), 0o640);
        set(&git.join("hooks/pre-commit.sample"), 0o755);
        let done = noted.put_back();
        assert_eq!(
            done.restored,
            [".", ".git/config", ".git/hooks/pre-commit.sample"].map(PathBuf::from),
        );
        assert!(done.failed.is_empty());
        let after: Vec<u32> = [&tree, &git.join("config"), &git.join("hooks")]
            .iter()
            .map(|p| mode(p))
            .collect();
        assert_eq!(before, after);
        assert!(
            noted.put_back().restored.is_empty(),
            "nothing changed since"
        );
    }
}
