//! Worktrees under `.git/factory/worktrees/`, administered by git itself (its own behaviour
//! is the point here): git aimed at the repository, the turn taken while git adds or removes
//! one, and their removal with their administrative files. The pool (`pool.rs`, above this) keeps
//! the worktrees runs use; what is here removes them and the leftovers of killed processes.

use crate::error::{Error, Result};
use git2::Repository;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A `git` command aimed at this repository, with nothing inherited that could redirect it.
pub fn git_cmd(repo: &Repository) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("--git-dir").arg(repo.commondir());
    cmd.args(NO_BACKGROUND_WORK);
    cmd.env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .env_remove("GIT_ALTERNATE_OBJECT_DIRECTORIES")
        .stdin(std::process::Stdio::null());
    cmd
}

/// The harness's own git leaves nothing running behind it: no `git maintenance run --auto
/// --detach` (or older git's `gc --auto`) after its fetches, pushes and commits — the user's
/// own git still does that housekeeping.
pub(crate) const NO_BACKGROUND_WORK: [&str; 4] =
    ["-c", "maintenance.auto=false", "-c", "gc.auto=0"];

/// The harness's own git processes running in groups of their own (see [`run_git`]): they
/// are helpers, not leftovers of a command, whoever sweeps this process's children.
static HELPERS: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Whether `pid` is one of the harness's own git processes started by [`run_git`].
pub fn is_helper(pid: u32) -> bool {
    HELPERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&pid)
}

pub(crate) fn run_git(mut cmd: Command, what: &str) -> Result<()> {
    // Its own process group: a Ctrl-C at the terminal reaches the harness, which stops at
    // the next safe point, not git half way through a checkout or a worktree record (a
    // worktree left so could be neither trusted nor given back clean). It is noted as a
    // helper while it runs (under the lock, so no sweep sees it unnoted).
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let spawned = {
        let mut helpers = HELPERS.lock().unwrap_or_else(|e| e.into_inner());
        let child = cmd.spawn();
        if let Ok(child) = &child {
            helpers.push(child.id());
        }
        child
    };
    let child = spawned.map_err(|e| {
        Error::new(format!("{what}: cannot run git: {e}"))
            .hint("install git and make sure it is on PATH")
    })?;
    let pid = child.id();
    let out = child.wait_with_output();
    HELPERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|p| *p != pid);
    let out = out.map_err(|e| Error::new(format!("{what}: git: {e}")))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(Error::new(format!(
        "{what}: {}",
        failure_text(&out.status, stderr.trim())
    )))
}

/// What git said when it failed, or, when it said nothing (stopped by a signal, as on
/// Ctrl-C), how it ended — never an empty cause.
pub(crate) fn failure_text(status: &std::process::ExitStatus, said: &str) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (said.is_empty(), status.code(), status.signal()) {
        (false, _, _) => said.to_string(),
        (true, _, Some(signal)) => format!("git was stopped by signal {signal}"),
        (true, Some(code), _) => format!("git exited with {code} and said nothing"),
        (true, None, None) => "git ended and said nothing".to_string(),
    }
}

/// Held while git adds or removes a worktree: git's own `worktree remove` and `prune` tidy
/// `.git/worktrees/` and can pull it from under another process's `worktree add` (two
/// `--worktree` runs at once, an agent's scratch worktree beside a run, the candidates of a
/// race: a lock per open file, so threads of one process take turns too). Waits, briefly.
pub(crate) struct AdminLock(std::fs::File);

/// Opens `.git/factory/locks/<name>` and takes its lock (`op`: waiting or not).
fn lock_file(
    git_dir: &Path,
    name: &std::ffi::OsStr,
    op: rustix::fs::FlockOperation,
) -> Option<(std::fs::File, PathBuf)> {
    let dir = git_dir.join("factory").join("locks");
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join(name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .ok()?;
    rustix::fs::flock(&file, op).ok()?;
    Some((file, path))
}

impl AdminLock {
    pub(crate) fn take(git_dir: &Path) -> Option<Self> {
        let (file, _) = lock_file(
            git_dir,
            "worktrees".as_ref(),
            rustix::fs::FlockOperation::LockExclusive,
        )?;
        Some(AdminLock(file))
    }
}

impl Drop for AdminLock {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.0, rustix::fs::FlockOperation::Unlock);
    }
}

/// Held for a named (unpooled) worktree's whole life (`.git/factory/locks/worktree.<name>`): a
/// path whose lock no live process holds is a killed process's leftover, safe to remove and
/// use again; one that is held belongs to a process still checking in it (two `reverify`s
/// of one run), and is never touched.
struct PathLock {
    file: std::fs::File,
    path: PathBuf,
}

impl PathLock {
    /// Takes the lock of worktree `name` if no live process holds it.
    fn try_take(git_dir: &Path, name: &std::ffi::OsStr) -> Option<Self> {
        let mut file = std::ffi::OsString::from("worktree.");
        file.push(name);
        let op = rustix::fs::FlockOperation::NonBlockingLockExclusive;
        let (file, path) = lock_file(git_dir, &file, op)?;
        Some(PathLock { file, path })
    }

    /// Gives the lock up, its file removed while adds take no turn (so no one can be taking
    /// the lock of a file that is being unlinked).
    fn release(self, git_dir: &Path) {
        let _turn = AdminLock::take(git_dir);
        let _ = std::fs::remove_file(&self.path);
        let _ = rustix::fs::flock(&self.file, rustix::fs::FlockOperation::Unlock);
    }
}

/// Drops what other rooms keep under a worktree's path (the bytecode cache's entries, SPEC
/// §3.7): called when a path is taken again and when its worktree goes, since another checkout
/// may use the path next. The caller hands it in, so this floor never names those rooms.
pub type Forget = fn(git_dir: &Path, worktree: &Path);

/// Removes a worktree of ours left by a killed process, with git's record of it; one a live
/// process still holds is left alone.
pub fn remove_path(repo: &Repository, path: &Path, forget: Forget) -> Result<()> {
    let git_dir = repo.commondir();
    let Some(lock) = path
        .file_name()
        .and_then(|name| PathLock::try_take(git_dir, name))
    else {
        return Ok(());
    };
    let removed = remove_worktree(git_dir, path, forget);
    lock.release(git_dir);
    removed
}

/// What the harness's own git runs with where a command may have left a worktree's files
/// leading to a config of its own: no fsmonitor command, no hook.
const HARDENED: [&str; 4] = [
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
];

pub(crate) fn remove_worktree(git_dir: &Path, path: &Path, forget: Forget) -> Result<()> {
    // The files go first, outside the turn (on a big repo this is the costly part); git
    // then removes what is left and its record of the worktree. Symlinks are removed, never
    // followed; whatever cannot be removed here is left to git.
    for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
        if entry.file_name() == ".git" {
            continue;
        }
        let _ = match entry.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(entry.path()),
            _ => std::fs::remove_file(entry.path()),
        };
    }
    forget(git_dir, path);
    let _turn = AdminLock::take(git_dir);
    let mut cmd = Command::new("git");
    cmd.arg("--git-dir")
        .arg(git_dir)
        .args(HARDENED)
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
            .args(HARDENED)
            .args(["worktree", "prune"]);
        let _ = prune.output();
    }
    result
}

#[cfg(test)]
mod failure_tests {
    use super::*;

    #[test]
    fn a_git_that_said_nothing_is_named_by_how_it_ended() {
        let killed = Command::new("sh")
            .args(["-c", "kill -INT $$"])
            .status()
            .expect("sh");
        assert_eq!(failure_text(&killed, ""), "git was stopped by signal 2");
        let failed = Command::new("sh")
            .args(["-c", "exit 128"])
            .status()
            .expect("sh");
        assert_eq!(
            failure_text(&failed, ""),
            "git exited with 128 and said nothing"
        );
        assert_eq!(failure_text(&failed, "fatal: x"), "fatal: x");
    }
}
