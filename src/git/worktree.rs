//! Temporary worktrees under `.git/factory/worktrees/`, administered by git itself (its own
//! behaviour is the point here), always removed with their administrative files.

use crate::error::{Error, Result};
use git2::Repository;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A `git` command aimed at this repository, with nothing inherited that could redirect it.
pub fn git_cmd(repo: &Repository) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("--git-dir").arg(repo.commondir());
    cmd.env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .env_remove("GIT_ALTERNATE_OBJECT_DIRECTORIES")
        .stdin(std::process::Stdio::null());
    cmd
}

fn run_git(mut cmd: Command, what: &str) -> Result<()> {
    let out = cmd.output().map_err(|e| {
        Error::new(format!("{what}: cannot run git: {e}"))
            .hint("install git and make sure it is on PATH")
    })?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(Error::new(format!("{what}: {}", stderr.trim())))
}

/// Held while git adds or removes a worktree: git's own `worktree remove` and `prune` tidy
/// `.git/worktrees/` and can pull it from under another process's `worktree add` (two
/// `--worktree` runs at once, an agent's scratch worktree beside a run). Waits, briefly.
struct AdminLock(std::fs::File);

impl AdminLock {
    fn take(git_dir: &Path) -> Option<Self> {
        let dir = git_dir.join("factory").join("locks");
        std::fs::create_dir_all(&dir).ok()?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("worktrees"))
            .ok()?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).ok()?;
        Some(AdminLock(file))
    }
}

impl Drop for AdminLock {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.0, rustix::fs::FlockOperation::Unlock);
    }
}

/// A detached worktree at `commit`; removed (with its `.git/worktrees/` entry) when dropped.
pub struct TempWorktree {
    repo_dir: PathBuf,
    pub path: PathBuf,
    removed: bool,
}

impl TempWorktree {
    pub fn add(repo: &Repository, name: &str, commit: &str) -> Result<Self> {
        let base = crate::git::factory_dir(repo).join("worktrees");
        std::fs::create_dir_all(&base)?;
        let _admin = AdminLock::take(repo.commondir());
        let path = base.join(name);
        if path.exists() {
            // A leftover of a killed process: git's own remove cleans its admin files too.
            let mut rm = git_cmd(repo);
            rm.args(["worktree", "remove", "--force"]).arg(&path);
            let _ = rm.output();
            let _ = std::fs::remove_dir_all(&path);
            let mut prune = git_cmd(repo);
            prune.args(["worktree", "prune"]);
            let _ = prune.output();
        }
        let mut cmd = git_cmd(repo);
        cmd.args(["worktree", "add", "--detach", "--quiet"])
            .arg(&path)
            .arg(commit);
        run_git(cmd, "creating a temporary worktree")?;
        // Bytecode entries an earlier worktree at this path left (a killed process) are not
        // this checkout's.
        forget_bytecode(repo.commondir(), &path);
        Ok(TempWorktree {
            repo_dir: repo.commondir().to_path_buf(),
            path,
            removed: false,
        })
    }

    pub fn remove(mut self) -> Result<()> {
        self.removed = true;
        remove_worktree(&self.repo_dir, &self.path)
    }
}

/// Drops the bytecode cache's entries of a worktree's files (SPEC §3.7): its path may be
/// used again by another checkout.
fn forget_bytecode(git_dir: &Path, path: &Path) {
    crate::roles::po::pycache::PyCache::in_factory_dir(&git_dir.join("factory")).forget_root(path);
}

fn remove_worktree(git_dir: &Path, path: &Path) -> Result<()> {
    let _admin = AdminLock::take(git_dir);
    forget_bytecode(git_dir, path);
    let mut cmd = Command::new("git");
    cmd.arg("--git-dir")
        .arg(git_dir)
        .args(["worktree", "remove", "--force", "--force"])
        .arg(path)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE");
    let result = run_git(cmd, "removing a temporary worktree");
    if path.exists() {
        let _ = std::fs::remove_dir_all(path);
        let mut prune = Command::new("git");
        prune
            .arg("--git-dir")
            .arg(git_dir)
            .args(["worktree", "prune"]);
        let _ = prune.output();
    }
    result
}

impl Drop for TempWorktree {
    fn drop(&mut self) {
        if !self.removed {
            let _ = remove_worktree(&self.repo_dir, &self.path);
        }
    }
}
