//! The pool of kept worktrees (SPEC §5): every worktree a run, a candidate, an agent's scratch
//! tree, `verify` or the pre-push hook uses is taken from `.git/factory/worktrees/pool-<n>`
//! and given back clean, so isolation costs about what an in-situ run costs instead of a full
//! checkout.
//!
//! - One process holds a pooled worktree at a time: an `flock` on `.git/factory/locks/pool.<n>`,
//!   which the kernel frees when the holder dies.
//! - git keeps its hands off: each one is `git worktree lock`ed with [`LOCK_REASON`], so
//!   `git worktree prune` never removes it and `git worktree list` says whose it is; HEAD is
//!   always detached.
//! - An idle one is proven clean: when it is given back, what commands left is swept (`git
//!   reset --hard` and `git clean -fd` semantics: ignored files stay, as in a rollback), `git
//!   status` must then be empty, HEAD detached at the commit it was handed out at, and its
//!   `.git` file unchanged; only then is its marker written (`.git/factory/pool/<n>.idle`:
//!   the commit it holds and its `.git` file's bytes). Taking it removes the marker before
//!   anything changes, so a killed holder leaves a worktree without one, which the next taker
//!   removes and replaces — never reuses.
//! - Taking an idle one at another commit writes only the paths that differ between the two
//!   trees (`git read-tree -m -u`, which refuses to overwrite a file that is not as its index
//!   says), and tells the bytecode cache which paths changed.
//! - At most `factory.poolSize` idle ones are kept (default: the number of CPUs); one given
//!   back beyond that is removed. [`prune_idle`] removes idle ones.
//! - New ones are made side by side: only `git worktree add --no-checkout` takes turns (git's
//!   admin files), the checkouts themselves run at once.

use crate::error::{Error, Result};
use crate::git::worktree::{git_cmd, remove_worktree, run_git, AdminLock, Forget};
use git2::Repository;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The reason pooled worktrees are locked with (`git worktree list --porcelain` shows it).
pub const LOCK_REASON: &str =
    "git-factory: pooled worktree, kept for the next run (git factory prune removes idle ones)";

/// Names of pooled worktrees: `pool-1`, `pool-2`, …
const PREFIX: &str = "pool-";

/// At most this many pooled worktrees exist at once (held and idle).
const MAX_POOLED: u32 = 256;

/// What the bytecode cache must drop when a pooled worktree's files change (SPEC §3.7). The
/// caller hands it in, so this floor never names that room.
#[derive(Clone, Copy)]
pub struct Bytecode {
    /// Every entry of a worktree (one made, replaced or removed).
    pub all: Forget,
    /// The entries of the given repo-relative paths of a worktree (files written or removed).
    pub paths: fn(git_dir: &Path, worktree: &Path, paths: &[Vec<u8>]),
}

/// A pooled worktree held by this process, detached at the commit it was taken for. Give it
/// back with [`Pooled::give_back`]; dropped, it is given back the same way.
pub struct Pooled {
    git_dir: PathBuf,
    pub path: PathBuf,
    name: String,
    lock: Option<File>,
    /// The commit it was handed out at.
    base: String,
    /// Its `.git` file's bytes when it was made.
    dotgit: Vec<u8>,
    bytecode: Bytecode,
    pool_size: usize,
    /// Sandboxed commands ran here: their ignored outputs go too (SPEC §7.1).
    sandboxed: bool,
    done: bool,
}

/// The pool's folders: worktrees, idle markers, locks.
fn worktrees_dir(git_dir: &Path) -> PathBuf {
    git_dir.join("factory").join("worktrees")
}

fn marker_path(git_dir: &Path, name: &str) -> PathBuf {
    git_dir
        .join("factory")
        .join("pool")
        .join(format!("{name}.idle"))
}

fn lock_path(git_dir: &Path, name: &str) -> PathBuf {
    git_dir
        .join("factory")
        .join("locks")
        .join(format!("pool.{name}"))
}

/// Takes the lock of pooled worktree `name` if no live process holds it. The lock file is
/// checked to still be the one at its path after locking ([`prune_idle`] unlinks the files
/// of the worktrees it removes, while holding their lock).
fn try_lock(git_dir: &Path, name: &str) -> Option<File> {
    let path = lock_path(git_dir, name);
    std::fs::create_dir_all(path.parent()?).ok()?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .ok()?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).ok()?;
    let held = file.metadata().ok()?;
    let there = std::fs::metadata(&path).ok()?;
    (held.ino() == there.ino() && held.dev() == there.dev()).then_some(file)
}

/// The names of the idle worktrees (those with a marker), in order.
fn idle_names(git_dir: &Path) -> Vec<String> {
    let dir = git_dir.join("factory").join("pool");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?.strip_suffix(".idle")?;
            name.starts_with(PREFIX).then(|| name.to_string())
        })
        .collect();
    names.sort_by_key(|n| n[PREFIX.len()..].parse::<u32>().unwrap_or(u32::MAX));
    names
}

/// How many idle worktrees the repo keeps: `factory.poolSize`, else the number of CPUs.
fn pool_size(repo: &Repository) -> Result<usize> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    crate::config::Config::of(repo).value(None, crate::config::POOL_SIZE, cpus)
}

/// A `git -C <path>` command (the worktree or checkout at `path`), with nothing inherited
/// that could point it at another repository, work tree, index or object store.
pub(crate) fn in_tree(path: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(path);
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    ] {
        cmd.env_remove(var);
    }
    cmd.stdin(std::process::Stdio::null());
    cmd
}

/// The paths `git status` lists in the worktree at `path` (tracked changes and untracked
/// files, one by one; ignored ones are not listed).
fn status_paths(path: &Path) -> Result<Vec<Vec<u8>>> {
    let mut cmd = in_tree(path);
    cmd.args([
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--no-renames",
        "--ignore-submodules=none",
    ]);
    let out = cmd
        .output()
        .map_err(|e| Error::new(format!("reading a pooled worktree's status: {e}")))?;
    if !out.status.success() {
        return Err(Error::new(format!(
            "reading a pooled worktree's status: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|e| e.len() > 3)
        .map(|e| e[3..].to_vec())
        .collect())
}

/// The paths whose entry differs between two commits' trees (either side's name).
fn changed_paths(repo: &Repository, from: &str, to: &str) -> Result<Vec<Vec<u8>>> {
    let tree = |c: &str| -> Result<git2::Tree<'_>> {
        Ok(repo.find_commit(git2::Oid::from_str(c)?)?.tree()?)
    };
    let (old, new) = (tree(from)?, tree(to)?);
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), None)?;
    let mut paths = Vec::new();
    for d in diff.deltas() {
        for side in [d.old_file(), d.new_file()] {
            if let Some(p) = side.path_bytes() {
                if paths.last().map(Vec::as_slice) != Some(p) {
                    paths.push(p.to_vec());
                }
            }
        }
    }
    Ok(paths)
}

/// What a marker says: the commit an idle worktree holds, and its `.git` file's bytes.
fn read_marker(git_dir: &Path, name: &str) -> Option<(String, Vec<u8>)> {
    let bytes = std::fs::read(marker_path(git_dir, name)).ok()?;
    let nl = bytes.iter().position(|b| *b == b'\n')?;
    let commit = std::str::from_utf8(&bytes[..nl]).ok()?.to_string();
    git2::Oid::from_str(&commit).ok()?;
    Some((commit, bytes[nl + 1..].to_vec()))
}

/// The worktree's own admin folder, as its `.git` file names it.
fn admin_dir(dotgit: &[u8]) -> Option<PathBuf> {
    let rest = dotgit.strip_prefix(b"gitdir: ")?;
    let rest = rest.strip_suffix(b"\n").unwrap_or(rest);
    Some(PathBuf::from(OsStr::from_bytes(rest)))
}

/// Takes a pooled worktree of `repo`, detached at `commit` with a tree exactly `commit`'s: an
/// idle one brought there, else a new one (or a replacement for one that cannot be trusted).
pub fn take(repo: &Repository, commit: &str, bytecode: Bytecode) -> Result<Pooled> {
    let git_dir = repo.commondir().to_path_buf();
    std::fs::create_dir_all(worktrees_dir(&git_dir))?;
    std::fs::create_dir_all(git_dir.join("factory").join("pool"))?;
    let pool_size = pool_size(repo)?;
    let held = |name: &str, lock: File| Pooled {
        git_dir: git_dir.clone(),
        path: worktrees_dir(&git_dir).join(name),
        name: name.to_string(),
        lock: Some(lock),
        base: commit.to_string(),
        dotgit: Vec::new(),
        bytecode,
        pool_size,
        sandboxed: false,
        done: false,
    };
    // An idle one first; then the first name no live process holds (new, or a leftover).
    let idle = idle_names(&git_dir);
    let fresh = (1..=MAX_POOLED).map(|n| format!("{PREFIX}{n}"));
    for name in idle.into_iter().chain(fresh) {
        let Some(lock) = try_lock(&git_dir, &name) else {
            continue;
        };
        let mut wt = held(&name, lock);
        wt.claim(repo)?;
        return Ok(wt);
    }
    Err(Error::new(format!(
        "cannot take a pooled worktree: all {MAX_POOLED} are in use"
    ))
    .hint("wait for the other git factory commands on this repo to finish"))
}

impl Pooled {
    /// Sandboxed commands or a coding agent ran here: when it is given back, what they left
    /// that the tree's rules ignore is removed too, so nothing they made outlives the run
    /// (SPEC §7.1); unsandboxed checks' ignored build outputs stay, warm for the next.
    pub fn sweep_ignored(&mut self) {
        self.sandboxed = true;
    }

    /// Brings the worktree this process now holds to `self.base`: reused when its marker
    /// proves it clean, else removed and made anew.
    fn claim(&mut self, repo: &Repository) -> Result<()> {
        let marker = read_marker(&self.git_dir, &self.name);
        // From here on, until it is given back, it is not idle: a holder killed now leaves
        // no marker, so no one trusts what it left.
        let _ = std::fs::remove_file(marker_path(&self.git_dir, &self.name));
        if let Some((held, dotgit)) = marker {
            if self.trusted(&held, &dotgit) && self.move_to(repo, &held).is_ok() {
                self.dotgit = dotgit;
                crate::trace::mark("  pool: idle worktree taken");
                return Ok(());
            }
        }
        self.replace()
    }

    /// Whether the idle worktree is as its marker says: the same `.git` file, git's record of
    /// it locked, HEAD detached at the commit the marker names.
    fn trusted(&self, held: &str, dotgit: &[u8]) -> bool {
        if std::fs::read(self.path.join(".git")).ok().as_deref() != Some(dotgit) {
            return false;
        }
        let Some(admin) = admin_dir(dotgit) else {
            return false;
        };
        let head = std::fs::read(admin.join("HEAD")).unwrap_or_default();
        admin.join("locked").is_file() && head.trim_ascii() == held.as_bytes()
    }

    /// From the clean tree of `held` to `self.base`: only the paths that differ are written.
    fn move_to(&self, repo: &Repository, held: &str) -> Result<()> {
        if held == self.base {
            return Ok(());
        }
        let changed = changed_paths(repo, held, &self.base)?;
        let mut cmd = in_tree(&self.path);
        cmd.args(["read-tree", "-m", "-u", held, &self.base]);
        let moved = run_git(cmd, "bringing a pooled worktree to the baseline");
        (self.bytecode.paths)(&self.git_dir, &self.path, &changed);
        moved?;
        let mut head = in_tree(&self.path);
        head.args(["update-ref", "--no-deref", "HEAD", &self.base]);
        run_git(head, "detaching a pooled worktree at the baseline")
    }

    /// Removes whatever is at this name and makes a new worktree there at `self.base`.
    fn replace(&mut self) -> Result<()> {
        let admin = std::fs::read(self.path.join(".git"))
            .ok()
            .and_then(|g| admin_dir(&g));
        if self.path.exists() || admin.is_some() {
            // Whatever is left of it is git's to replace below (`add --force --force`).
            let _ = remove_worktree(&self.git_dir, &self.path, self.bytecode.all);
        }
        let turn = AdminLock::take(&self.git_dir);
        let repo = Repository::open(&self.git_dir)?;
        // `--force` twice: a locked record whose folder went missing is replaced too.
        let mut add = git_cmd(&repo);
        add.args([
            "worktree",
            "add",
            "--force",
            "--force",
            "--detach",
            "--quiet",
            "--no-checkout",
        ])
        .arg(&self.path)
        .arg(&self.base);
        let added = run_git(add, "creating a pooled worktree").and_then(|()| {
            let mut lock = git_cmd(&repo);
            lock.args(["worktree", "lock", "--reason", LOCK_REASON])
                .arg(&self.path);
            run_git(lock, "locking a pooled worktree")
        });
        drop(turn);
        (self.bytecode.all)(&self.git_dir, &self.path);
        added?;
        self.dotgit = std::fs::read(self.path.join(".git"))?;
        // Outside the turn, so several checkouts run at once; parallel checkout inside each.
        let mut checkout = in_tree(&self.path);
        checkout.args(["-c", "checkout.workers=0", "reset", "--hard", "--quiet"]);
        run_git(checkout, "checking out a pooled worktree")?;
        crate::trace::mark("  pool: worktree made");
        Ok(())
    }

    /// Sweeps what was left and proves the tree clean: HEAD detached at `self.base` again,
    /// tracked files as there, untracked ones removed (ignored ones stay), `git status` empty
    /// and the `.git` file as made.
    fn sweep(&self) -> Result<()> {
        let unproven = |why: &str| Error::new(format!("a pooled worktree {why}"));
        if std::fs::read(self.path.join(".git")).ok().as_deref() != Some(&self.dotgit[..]) {
            return Err(unproven("had its .git file changed"));
        }
        let repo = Repository::open(&self.path)?;
        let head = repo.head()?.peel_to_commit()?.id().to_string();
        let mut written = status_paths(&self.path)?;
        if head != self.base {
            written.extend(changed_paths(&repo, &head, &self.base)?);
        }
        let detached = repo.head_detached()?;
        drop(repo);
        if !written.is_empty() || head != self.base || !detached || self.sandboxed {
            let mut reset = in_tree(&self.path);
            reset.args(["reset", "--hard", "--quiet", &self.base]);
            let reset = run_git(reset, "sweeping a pooled worktree");
            let mut clean = in_tree(&self.path);
            clean.args(["clean", "-f", "-d", "--quiet"]);
            if self.sandboxed {
                clean.arg("-x");
            }
            let cleaned = reset.and_then(|()| run_git(clean, "sweeping a pooled worktree"));
            (self.bytecode.paths)(&self.git_dir, &self.path, &written);
            cleaned?;
            let mut head = in_tree(&self.path);
            head.args(["update-ref", "--no-deref", "HEAD", &self.base]);
            run_git(head, "detaching a pooled worktree")?;
            if !status_paths(&self.path)?.is_empty() {
                return Err(unproven("could not be swept clean"));
            }
        }
        if !self.trusted(&self.base, &self.dotgit) {
            return Err(unproven("is not as it was made"));
        }
        Ok(())
    }

    /// Gives the worktree back: swept and proven clean, it becomes idle (while the pool has
    /// room); otherwise it is removed. An error means it could not even be removed.
    pub fn give_back(mut self) -> Result<()> {
        self.done = true;
        self.release()
    }

    fn release(&mut self) -> Result<()> {
        let result = match self.sweep() {
            Ok(()) if self.mark_idle() => Ok(()),
            _ => self.remove_held(),
        };
        if let Some(lock) = self.lock.take() {
            let _ = rustix::fs::flock(&lock, rustix::fs::FlockOperation::Unlock);
        }
        crate::trace::mark("  pool: worktree given back");
        result
    }

    /// Writes the idle marker if the pool keeps fewer than its size; whether it did.
    fn mark_idle(&self) -> bool {
        let _turn = AdminLock::take(&self.git_dir);
        if idle_names(&self.git_dir).len() >= self.pool_size {
            return false;
        }
        let mut bytes = format!("{}\n", self.base).into_bytes();
        bytes.extend_from_slice(&self.dotgit);
        std::fs::write(marker_path(&self.git_dir, &self.name), bytes).is_ok()
    }

    /// Removes the held worktree, its record and its lock file (still held, so no one else
    /// can be taking it).
    fn remove_held(&self) -> Result<()> {
        let _ = std::fs::remove_file(marker_path(&self.git_dir, &self.name));
        let removed = remove_worktree(&self.git_dir, &self.path, self.bytecode.all);
        let _ = std::fs::remove_file(lock_path(&self.git_dir, &self.name));
        removed
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.release();
        }
    }
}

/// Removes the pooled worktrees no process holds: idle ones given back longer than
/// `older_than` ago, and every untrusted leftover (a killed holder's). Returns their paths.
/// `git factory prune` calls this; `bytecode.all` drops their cache entries.
pub fn prune_idle(
    repo: &Repository,
    older_than: Duration,
    bytecode: Forget,
) -> Result<Vec<PathBuf>> {
    let git_dir = repo.commondir();
    let mut names: Vec<String> = std::fs::read_dir(worktrees_dir(git_dir))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.starts_with(PREFIX) && n[PREFIX.len()..].parse::<u32>().is_ok())
        .collect();
    names.extend(idle_names(git_dir));
    names.sort();
    names.dedup();
    let mut removed = Vec::new();
    for name in names {
        let Some(lock) = try_lock(git_dir, &name) else {
            continue;
        };
        let marker = marker_path(git_dir, &name);
        let young = std::fs::metadata(&marker)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < older_than);
        if young {
            continue;
        }
        let _ = std::fs::remove_file(&marker);
        let path = worktrees_dir(git_dir).join(&name);
        remove_worktree(git_dir, &path, bytecode)?;
        let _ = std::fs::remove_file(lock_path(git_dir, &name));
        drop(lock);
        removed.push(path);
    }
    Ok(removed)
}

/// Removes the pooled worktrees no process holds and none proved clean (a killed holder's),
/// keeping the idle ones (`recover`). Returns their paths.
pub fn remove_untrusted(repo: &Repository, bytecode: Forget) -> Result<Vec<PathBuf>> {
    prune_idle(repo, Duration::MAX, bytecode)
}
