//! Repository access: opening, preflight facts, status walks and tree ids. Putting a repo
//! back is `restore`'s alone.

pub mod files;
pub mod lock;
pub mod nofollow;
pub mod pool;
pub mod restore;
pub mod status;
#[cfg(test)]
pub(crate) mod test_repo;
pub mod worktree;

use crate::error::{Error, Result};
use crate::git::files::FileOutcome;
use git2::build::TreeUpdateBuilder;
use git2::{FileMode, Oid, Repository, RepositoryState, Status};
use std::path::{Path, PathBuf};

/// Opens the repository containing `dir` (or the current directory), as git would.
pub fn open(dir: Option<&Path>) -> Result<Repository> {
    let start = match dir {
        Some(d) => d.to_path_buf(),
        // Like git: GIT_DIR and friends when set (hooks, `git -C`), else discovery from cwd.
        None => {
            return Repository::open_from_env().map_err(|_| {
                Error::new("not inside a git repository")
                    .hint("run inside a git work tree, or pass --repo DIR")
            })
        }
    };
    Repository::discover(&start).map_err(|_| {
        Error::new(format!(
            "{} is not inside a git repository",
            start.display()
        ))
        .hint("run inside a git work tree, or pass --repo DIR")
    })
}

/// The work tree root of a non-bare repository.
pub fn workdir(repo: &Repository) -> Result<PathBuf> {
    repo.workdir().map(Path::to_path_buf).ok_or_else(|| {
        Error::new("the repository is bare (it has no work tree)")
            .hint("run inside a clone that has a work tree")
    })
}

/// Where git-factory keeps its own files: `.git/factory/` of the common git dir.
pub fn factory_dir(repo: &Repository) -> PathBuf {
    repo.commondir().join("factory")
}

/// The folder git runs hooks from: `core.hooksPath` (relative to the work tree, as git reads
/// it) or the common git dir's `hooks`.
pub fn hooks_dir(repo: &Repository) -> Result<PathBuf> {
    match crate::config::Config::of(repo).string("core.hooksPath") {
        Some(p) => {
            let p = PathBuf::from(p);
            Ok(if p.is_absolute() {
                p
            } else {
                workdir(repo)?.join(p)
            })
        }
        None => Ok(repo.commondir().join("hooks")),
    }
}

/// HEAD's commit id, refusing an unborn HEAD.
pub fn head_commit(repo: &Repository) -> Result<git2::Commit<'_>> {
    let head = repo.head().map_err(|_| {
        Error::new("HEAD has no commit yet")
            .hint("make a first commit: git commit --allow-empty -m init")
    })?;
    Ok(head.peel_to_commit()?)
}

/// The commit a batch pinned for its runs: a full object id naming a commit of this
/// repository, nothing git would read as something else (a branch, `HEAD~1`, a tag, a tree).
pub fn pinned_commit<'r>(repo: &'r Repository, id: &str) -> Result<git2::Commit<'r>> {
    let refuse = || {
        Error::new(format!(
            "{} is {id:?}, which is not a commit of this repository",
            crate::env::BATCH_BASELINE
        ))
        .hint(format!(
            "it names, by its full id, the commit a batch's runs start from: unset {} to run at HEAD",
            crate::env::BATCH_BASELINE
        ))
    };
    let full = matches!(id.len(), 40 | 64) && id.bytes().all(|b| b.is_ascii_hexdigit());
    if !full {
        return Err(refuse());
    }
    let oid = git2::Oid::from_str(id).map_err(|_| refuse())?;
    repo.find_commit(oid).map_err(|_| refuse())
}

/// Refuses while a merge, rebase, cherry-pick, revert or bisect is under way.
pub fn ensure_no_operation(repo: &Repository) -> Result<()> {
    let what = match repo.state() {
        RepositoryState::Clean => return Ok(()),
        RepositoryState::Merge => "a merge",
        RepositoryState::Revert | RepositoryState::RevertSequence => "a revert",
        RepositoryState::CherryPick | RepositoryState::CherryPickSequence => "a cherry-pick",
        RepositoryState::Bisect => "a bisect",
        RepositoryState::Rebase
        | RepositoryState::RebaseInteractive
        | RepositoryState::RebaseMerge => "a rebase",
        RepositoryState::ApplyMailbox | RepositoryState::ApplyMailboxOrRebase => "a git am",
    };
    Err(Error::new(format!("{what} is in progress"))
        .hint("finish or abort it first (e.g. git merge --abort, git rebase --abort)"))
}

/// One entry of a status walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dirty {
    /// The path for people (and for comparing with paths we generated).
    pub path: String,
    /// The path's bytes as they are on disk: what a restore writes or removes.
    pub raw: Vec<u8>,
    pub label: &'static str,
    pub tracked: bool,
}

/// A repository a caller handed over, or one opened for the call.
pub enum RepoAt<'a> {
    Given(&'a Repository),
    Opened(Repository),
}

impl std::ops::Deref for RepoAt<'_> {
    type Target = Repository;
    fn deref(&self) -> &Repository {
        match self {
            RepoAt::Given(repo) => repo,
            RepoAt::Opened(repo) => repo,
        }
    }
}

/// `repo` when given (its index is parsed already: on a big tree that is most of opening
/// it), else the repository at `root` opened now; `None` when there is none there.
pub fn given_or_opened<'a>(repo: Option<&'a Repository>, root: &Path) -> Option<RepoAt<'a>> {
    match repo {
        Some(repo) => Some(RepoAt::Given(repo)),
        None => Repository::open(root).ok().map(RepoAt::Opened),
    }
}

/// The repository's index as it is on disk now (read again only if it changed since).
pub fn current_index(repo: &Repository) -> Option<git2::Index> {
    let mut index = repo.index().ok()?;
    index.read(false).ok()?;
    Some(index)
}

/// A path for people: as it is when it is UTF-8, else with the other bytes as `\xNN` (never
/// a replacement character two different names would share).
pub fn shown_path(raw: &[u8]) -> String {
    match std::str::from_utf8(raw) {
        Ok(s) => s.to_string(),
        Err(_) => raw.escape_ascii().to_string(),
    }
}

fn label(s: Status) -> (&'static str, bool) {
    if s.contains(Status::WT_NEW) && !s.intersects(Status::INDEX_NEW | Status::INDEX_MODIFIED) {
        return ("untracked", false);
    }
    if s.intersects(
        Status::INDEX_NEW
            | Status::INDEX_MODIFIED
            | Status::INDEX_DELETED
            | Status::INDEX_RENAMED
            | Status::INDEX_TYPECHANGE,
    ) {
        return ("staged", true);
    }
    if s.contains(Status::WT_DELETED) {
        return ("deleted", true);
    }
    if s.contains(Status::CONFLICTED) {
        return ("conflicted", true);
    }
    ("modified", true)
}

/// One status walk: staged, unstaged and untracked-not-ignored paths, sorted.
/// `recurse` lists each untracked file rather than its top directory.
pub fn dirty_paths(repo: &Repository, recurse: bool) -> Result<Vec<Dirty>> {
    let untracked = if recurse {
        status::Untracked::Files
    } else {
        status::Untracked::Folders
    };
    status::changes(repo, untracked)
}

/// Paths whose index entry differs from HEAD. Answered from the index's cached tree when it
/// matches HEAD's tree (the usual case), so HEAD's trees are read only when something is staged.
pub fn staged_paths(repo: &Repository) -> Result<Vec<Dirty>> {
    // An unborn HEAD stages every entry; a HEAD whose tree cannot be read (a command deleted
    // objects) is an error, never "nothing staged".
    let head_tree = match repo.head() {
        Ok(head) => Some(
            head.peel_to_tree()
                .map_err(|e| Error::new(format!("reading HEAD's tree: {}", e.message())))?,
        ),
        Err(e) if e.code() == git2::ErrorCode::UnbornBranch => None,
        Err(e) => return Err(Error::new(format!("reading HEAD: {}", e.message()))),
    };
    let mut index = repo.index()?;
    if index.has_conflicts() {
        return Ok(index
            .conflicts()?
            .flatten()
            .filter_map(|c| c.our.or(c.their).or(c.ancestor))
            .map(|e| Dirty {
                path: shown_path(&e.path),
                raw: e.path,
                label: "conflicted",
                tracked: true,
            })
            .collect());
    }
    if head_tree
        .as_ref()
        .is_some_and(|t| index.write_tree().ok() == Some(t.id()))
    {
        return Ok(Vec::new());
    }
    let diff = repo.diff_tree_to_index(head_tree.as_ref(), Some(&index), None)?;
    Ok(diff
        .deltas()
        .filter_map(|d| {
            d.new_file()
                .path_bytes()
                .or(d.old_file().path_bytes())
                .map(<[u8]>::to_vec)
        })
        .map(|raw| Dirty {
            path: shown_path(&raw),
            raw,
            label: "staged",
            tracked: true,
        })
        .collect())
}

/// Refuses a work tree with any staged, unstaged or untracked-not-ignored change,
/// listing up to 10 of them.
pub fn ensure_clean(repo: &Repository) -> Result<()> {
    status::Snapshot::take(repo)?.ensure_clean()
}

/// The git tree id of the work tree (tracked plus untracked-not-ignored files), computed in an
/// in-memory copy of the index: its stat cache means only changed files are hashed, and the
/// user's index file is never written.
pub fn worktree_tree(root: &Path) -> Result<Oid> {
    let repo = Repository::open(root)?;
    let mut index = repo.index()?;
    index.add_all(["*"].iter(), git2::IndexAddOption::DEFAULT, None)?;
    index.update_all(["*"].iter(), None)?;
    Ok(index.write_tree()?)
}

/// The tree of `base` with the outcomes' after-states applied, built in memory.
pub fn tree_with(repo: &Repository, base: Oid, outcomes: &[FileOutcome]) -> Result<Oid> {
    let base_tree = repo.find_tree(base)?;
    let mut builder = TreeUpdateBuilder::new();
    for o in outcomes {
        match &o.after {
            None => {
                builder.remove(o.path.as_str());
            }
            Some(state) => {
                let blob = repo.blob(&state.bytes)?;
                let mode = if state.executable {
                    FileMode::BlobExecutable
                } else {
                    FileMode::Blob
                };
                builder.upsert(o.path.as_str(), blob, mode);
            }
        }
    }
    Ok(builder.create_updated(repo, &base_tree)?)
}

/// The git-style unified diff between two trees (modes, creations, deletions included), as
/// bytes: the files' lines are bytes.
pub fn diff_trees(repo: &Repository, old: Oid, new: Oid) -> Result<Vec<u8>> {
    let old = repo.find_tree(old)?;
    let new = repo.find_tree(new)?;
    let mut opts = git2::DiffOptions::new();
    opts.show_binary(false);
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), Some(&mut opts))?;
    let mut text = Vec::new();
    diff.print(git2::DiffFormat::Patch, |_, _, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            text.push(line.origin() as u8);
        }
        text.extend_from_slice(line.content());
        true
    })?;
    Ok(text)
}

/// Short (7-hex) form of an object id, for people.
pub fn short(oid: &str) -> &str {
    &oid[..oid.len().min(7)]
}

#[cfg(test)]
mod tests {
    use super::test_repo::git;

    /// A staged change in a tree whose HEAD tree a command deleted is never "nothing
    /// staged": a pooled worktree in that state was once given back as clean.
    #[test]
    fn a_head_whose_tree_cannot_be_read_is_an_error_not_a_clean_index() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        git(root, &["init", "-q"]);
        std::fs::write(root.join("a.txt"), "one\n").expect("write");
        git(root, &["add", "a.txt"]);
        git(root, &["commit", "-qm", "one"]);
        std::fs::write(root.join("a.txt"), "two\n").expect("write");
        git(root, &["add", "a.txt"]);
        let repo = git2::Repository::open(root).expect("open");
        assert_eq!(super::staged_paths(&repo).expect("staged").len(), 1);
        let tree = git(root, &["rev-parse", "HEAD^{tree}"]);
        let loose = root.join(".git/objects").join(&tree[..2]).join(&tree[2..]);
        std::fs::remove_file(loose).expect("the tree is a loose object");
        let repo = git2::Repository::open(root).expect("open");
        let err = super::staged_paths(&repo).expect_err("HEAD's tree is gone");
        assert!(err.message.contains("HEAD's tree"), "{}", err.message);
    }

    /// On an unborn HEAD every index entry is staged.
    #[test]
    fn an_unborn_head_stages_every_entry() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        git(root, &["init", "-q"]);
        std::fs::write(root.join("a.txt"), "one\n").expect("write");
        git(root, &["add", "a.txt"]);
        let repo = git2::Repository::open(root).expect("open");
        let staged = super::staged_paths(&repo).expect("staged");
        assert_eq!(staged.len(), 1);
        assert_eq!(staged[0].raw, b"a.txt");
    }
}
