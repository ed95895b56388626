//! Capture: the facts a restore needs, recorded before the first change.

use super::dirs::{walk_dirs, Known, NO_FACT};
use super::facts::{mtime_of, DirFact, HooksFact, KeptEntry, RelPath, Restore};
use super::gitfiles::exclude_path;
use super::hooks::hooks_dir;
use super::refs::{list_records, list_refs};
use super::saved::SavedState;
use super::sweep::SKIP_WORKTREE;
use crate::error::Result;
use crate::git::files::checkout_modes;
use crate::git::status::Folders;
use git2::Repository;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

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
        let files = GitFiles::save(repo, &root, &saved)?;
        crate::trace::mark("  restore capture: refs, index, config, hooks");
        let tree = match (walk.and_then(|w| w.folders()), known_modes) {
            (Some(folders), Some(modes)) => TreeFacts::from_walk(repo, &root, folders, modes),
            _ => TreeFacts::walk(repo, &root, known_modes)?,
        };
        crate::trace::mark("  restore capture: folders");
        let root_mtime = std::fs::symlink_metadata(&root)
            .map(|m| mtime_of(&m))
            .unwrap_or_default();
        Ok(Restore {
            root,
            git_dir: repo.path().to_path_buf(),
            baseline,
            head_ref,
            refs,
            shared_refs,
            records,
            saved,
            had_index: files.had_index,
            dirs: tree.dirs,
            root_mtime,
            images: Vec::new(),
            kept: tree.kept,
            modes: tree.modes,
            exclude_absent: files.exclude_absent,
            hooks: files.hooks,
            since: files.since,
            state_digest: Some(files.digest),
            state: Some(files.state),
            confined: false,
        })
    }
}

/// The repository's own files as they were, their bytes in the saved state.
struct GitFiles {
    had_index: bool,
    exclude_absent: bool,
    hooks: Option<HooksFact>,
    /// The saved state's change time (see [`Restore::since`]).
    since: Option<(i64, i64)>,
    digest: String,
    state: std::sync::Arc<SavedState>,
}

impl GitFiles {
    /// Saves the index, `.git/config`, `info/exclude` and the hooks in a fresh `saved`
    /// folder, as one file (see [`SavedState`]).
    fn save(repo: &Repository, root: &Path, saved: &Path) -> Result<Self> {
        let read = |path: &Path| match std::fs::read(path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        };
        let (hooks, saved_hooks) = match hooks_dir(repo, root) {
            Some(dir) => {
                let (fact, saved) = HooksFact::capture(dir);
                (Some(fact), saved)
            }
            None => (None, Vec::new()),
        };
        let state = SavedState {
            index: read(&repo.path().join("index"))?,
            config: std::fs::read(repo.commondir().join("config")).ok(),
            exclude: read(&exclude_path(repo))?,
            hooks: saved_hooks,
        };
        let _ = std::fs::remove_dir_all(saved);
        std::fs::create_dir_all(saved)?;
        let (since, digest) = state.write(saved)?;
        Ok(GitFiles {
            had_index: state.index.is_some(),
            exclude_absent: state.exclude.is_none(),
            hooks,
            since,
            digest,
            state: std::sync::Arc::new(state),
        })
    }
}

/// The work tree as the capture's folder walk found it.
struct TreeFacts {
    dirs: Vec<DirFact>,
    kept: Vec<KeptEntry>,
    modes: Vec<(RelPath, u32)>,
}

impl TreeFacts {
    /// The facts the preflight walk of a clean tree already holds: its folders, the entries
    /// the ignore rules hide (each given its identity here: they are few) and the odd modes.
    /// Only the untracked folders it left unwalked (empty ones, ones holding ignored files
    /// only) are walked here, as [`TreeFacts::walk`] would.
    fn from_walk(
        repo: &Repository,
        root: &Path,
        folders: Folders,
        modes: &[(Vec<u8>, u32)],
    ) -> Self {
        let mut dirs: Vec<DirFact> = folders
            .dirs
            .into_iter()
            .map(|d| DirFact {
                path: RelPath::from_bytes(&d.path),
                mode: d.mode,
                empty: false,
                mtime: d.mtime,
            })
            .collect();
        let keep = |rel: &[u8], ino: u64| {
            let id = kept_identity(root, rel);
            KeptEntry {
                path: RelPath::from_bytes(rel),
                ino: id.map_or(ino, |i| i.ino),
                id,
            }
        };
        let mut kept: Vec<KeptEntry> = folders
            .hidden
            .iter()
            .map(|(rel, ino)| keep(rel, *ino))
            .collect();
        for start in &folders.untracked_dirs {
            walk_dirs(
                repo,
                root,
                start,
                false,
                None,
                &mut |rel, meta, empty| dirs.push(walked(rel, meta, empty)),
                Some(&mut |rel, entry| {
                    use std::os::unix::fs::DirEntryExt;
                    // Nothing under an untracked folder is in the index.
                    kept.push(keep(rel, entry.ino()));
                }),
            );
        }
        dirs.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        kept.sort_by(|a, b| a.path.cmp(&b.path));
        let mut modes: Vec<(RelPath, u32)> = modes
            .iter()
            .map(|(p, m)| (RelPath::from_bytes(p), *m))
            .collect();
        modes.sort();
        TreeFacts { dirs, kept, modes }
    }

    /// One walk of the folders: each folder's mode and time, the untracked entries that are
    /// kept, and (unless the preflight walk knows them) the odd modes of tracked files.
    fn walk(
        repo: &Repository,
        root: &Path,
        known_modes: Option<&[(Vec<u8>, u32)]>,
    ) -> Result<Self> {
        let index = repo.index()?;
        let tracked = tracked_folders(&index);
        let tracked_dirs: Known<'_> = tracked.iter().map(|p| (p.as_slice(), &NO_FACT)).collect();
        let mut dirs = Vec::new();
        let mut kept = Vec::new();
        let mut modes = Vec::new();
        let (plain, exec) = checkout_modes();
        walk_dirs(
            repo,
            root,
            b"",
            false,
            Some(&tracked_dirs),
            &mut |rel, meta, empty| dirs.push(walked(rel, meta, empty)),
            Some(&mut |rel, entry| {
                use std::os::unix::fs::DirEntryExt;
                let in_index = index
                    .get_path(Path::new(OsStr::from_bytes(rel)), 0)
                    .is_some_and(|e| e.flags_extended & SKIP_WORKTREE == 0);
                if !in_index {
                    let id = kept_identity(root, rel);
                    kept.push(KeptEntry {
                        path: RelPath::from_bytes(rel),
                        ino: id.map_or(entry.ino(), |i| i.ino),
                        id,
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
        Ok(TreeFacts { dirs, kept, modes })
    }
}

/// A folder as a capture's walk of the folders meets it.
fn walked(rel: &[u8], meta: &std::fs::Metadata, empty: bool) -> DirFact {
    DirFact {
        path: RelPath::from_bytes(rel),
        mode: meta.permissions().mode() & 0o7777,
        empty,
        mtime: mtime_of(meta),
    }
}

/// A kept entry's identity (one `statx`; kept entries are the few untracked names at the top
/// of what git ignores, not what is inside an ignored folder).
fn kept_identity(root: &Path, rel: &[u8]) -> Option<super::facts::Identity> {
    super::paths::identity_at(root, rel)
}

/// Folders holding tracked files are not ignored: git need only be asked about the rest.
fn tracked_folders(index: &git2::Index) -> HashSet<Vec<u8>> {
    let mut tracked: HashSet<Vec<u8>> = HashSet::new();
    for entry in index.iter() {
        let mut path = entry.path.as_slice();
        while let Some(cut) = path.iter().rposition(|b| *b == b'/') {
            path = &path[..cut];
            if !tracked.insert(path.to_vec()) {
                break;
            }
        }
    }
    tracked
}

#[cfg(test)]
mod tests {
    use super::TreeFacts;
    use crate::git::status::Snapshot;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    fn git(root: &Path, args: &[&str]) {
        crate::git::test_repo::git(root, args);
    }

    use crate::git::test_repo::write;

    /// The capture built from the preflight walk records what its own walk of the folders
    /// records: folders, kept entries (ignored files and folders, ones inside untracked
    /// folders that hold nothing else) and odd modes.
    #[test]
    fn the_capture_from_a_preflight_walk_matches_its_own_walk() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        git(root, &["init", "-q"]);
        write(root, ".gitignore", "*.log\nbuild/\n");
        write(root, "a/b/c.txt", "c\n");
        write(root, "a/d.txt", "d\n");
        write(root, "top.txt", "t\n");
        write(root, "secret.txt", "s\n");
        std::fs::set_permissions(
            root.join("secret.txt"),
            std::fs::Permissions::from_mode(0o600),
        )
        .expect("chmod");
        git(root, &["add", "-A"]);
        git(root, &["commit", "-q", "-m", "one"]);
        write(root, "a/b/run.log", "ignored\n");
        write(root, "build/out/x.o", "ignored folder\n");
        write(
            root,
            "only-ignored/deep/y.log",
            "under an untracked folder\n",
        );
        std::fs::create_dir_all(root.join("empty/inner")).expect("mkdir");
        std::fs::set_permissions(root.join("a/b"), std::fs::Permissions::from_mode(0o750))
            .expect("chmod");
        let repo = git2::Repository::open(root).expect("open");
        let snapshot = Snapshot::take(&repo).expect("walk");
        assert!(snapshot.changes().is_empty());
        let root = crate::git::workdir(&repo).expect("workdir");
        let walked = TreeFacts::walk(&repo, &root, None).expect("walk");
        let folders = snapshot.folders().expect("a clean fast walk");
        let modes = snapshot.odd_modes().expect("modes");
        let reused = TreeFacts::from_walk(&repo, &root, folders, modes);
        let dirs = |t: &TreeFacts| {
            let mut v: Vec<_> = t
                .dirs
                .iter()
                .map(|d| (d.path.clone(), d.mode, d.empty, d.mtime))
                .collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        assert_eq!(dirs(&reused), dirs(&walked));
        assert!(dirs(&walked).iter().any(|d| d.1 == 0o750));
        assert!(
            dirs(&walked).iter().any(|d| d.2),
            "an empty folder is recorded"
        );
        assert_eq!(reused.kept, walked.kept);
        assert_eq!(walked.kept.len(), 3, "{:?}", walked.kept);
        assert_eq!(reused.modes, walked.modes);
        assert_eq!(walked.modes.len(), 1);
    }
}
