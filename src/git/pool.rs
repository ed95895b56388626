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
//!   git files as the pool made them; only then is its marker written
//!   (`.git/factory/pool/<n>.idle`: the commit it holds and those files' bytes). Taking it
//!   removes the marker before anything changes, so a killed holder leaves a worktree
//!   without one, which the next taker removes and replaces — never reuses.
//! - Commands that ran in a worktree may have rewritten its git files (the `.git` file, and
//!   `gitdir`, `commondir`, `config.worktree` in its admin folder) to lead git to a config
//!   of their own, whose fsmonitor command or hooks would then run with the harness's
//!   rights. So the harness's git never finds the repository through them: it is pointed
//!   at the admin folder and common dir the pool made, runs no fsmonitor command (and, for
//!   the pool's own git, no hook), and a worktree whose files are not as made is replaced.
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

/// At most this many tracked paths are put back one by one at give-back; more are reset.
const MAX_RESTORED: usize = 256;

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
    /// Its git files as the pool made them.
    admin: Admin,
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
/// `factory.poolSize` (default: the number of CPUs); a value that is not a number is refused
/// naming the key — checked up front by runs that use the pool.
pub fn pool_size(repo: &Repository) -> Result<usize> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    crate::config::Config::of(repo).value(None, crate::config::POOL_SIZE, cpus)
}

/// A `git -C <path>` command (the worktree or checkout at `path`), with nothing inherited
/// that could point it at another repository, work tree, index or object store, and no
/// fsmonitor command run. In a pooled worktree this process holds, git is pointed at the
/// admin folder and common dir the pool made (`--git-dir`, `GIT_COMMON_DIR`), never at
/// whatever the `.git` file or the admin folder's `commondir` say now: a command that ran
/// there may have rewritten them to lead git to a config of its own (hooks, fsmonitor). When
/// the admin folder itself is not as the pool made it, git is pointed at a folder that does
/// not exist, so it refuses rather than reads a config the pool cannot vouch for.
pub(crate) fn in_tree(path: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(path);
    cmd.args(["-c", "core.fsmonitor=false"]);
    cmd.args(super::worktree::NO_BACKGROUND_WORK);
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
    ] {
        cmd.env_remove(var);
    }
    if let Some((git_dir, admin)) = held(path) {
        let proven = admin.still_at(&git_dir, path);
        let dir = match proven {
            true => admin.dir.clone(),
            false => admin.dir.with_extension("admin-files-changed-by-a-command"),
        };
        cmd.arg("--git-dir")
            .arg(dir)
            .arg("--work-tree")
            .arg(path)
            .env("GIT_COMMON_DIR", git_dir);
    }
    cmd.stdin(std::process::Stdio::null());
    cmd
}

/// The pooled worktrees this process holds: (path, common dir, git files as made).
static HELD: std::sync::Mutex<Vec<(PathBuf, PathBuf, Admin)>> = std::sync::Mutex::new(Vec::new());

/// Whether the harness's git may run in the tree at `path`: anything but a pooled worktree,
/// or a pooled one whose git files are still as the pool made them.
pub(crate) fn vouched_for(path: &Path) -> bool {
    match held(path) {
        Some((git_dir, admin)) => admin.still_at(&git_dir, path),
        None => true,
    }
}

/// The held pooled worktree at `path`, however the caller spells it (libgit2 may name a
/// worktree by its real path, the pool by the one under the common dir it was given).
fn held(path: &Path) -> Option<(PathBuf, Admin)> {
    let held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    let found = held.iter().find(|(p, _, _)| p == path).or_else(|| {
        let real = std::fs::canonicalize(path).ok()?;
        (held.iter()).find(|(p, _, _)| std::fs::canonicalize(p).is_ok_and(|p| p == real))
    });
    found.map(|(_, git_dir, admin)| (git_dir.clone(), admin.clone()))
}

fn set_held(path: &Path, entry: Option<(PathBuf, Admin)>) {
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    held.retain(|(p, _, _)| p != path);
    if let Some((git_dir, admin)) = entry {
        held.push((path.to_path_buf(), git_dir, admin));
    }
}

/// A file's bytes, if it is a plain file (not a symlink, not a folder).
fn read_plain(path: &Path) -> Option<Vec<u8>> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    meta.is_file().then(|| std::fs::read(path).ok()).flatten()
}

/// Whether `a` and `b` name the same existing file or folder.
fn same_place(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The git files of a pooled worktree: its `.git` file, and in its admin folder
/// (`<common dir>/worktrees/<name>`) `gitdir`, `commondir` and `config.worktree`. git reads
/// them to find the repository, and so the config (hooks, fsmonitor, filters) it obeys.
/// The pool records them when it makes a worktree and runs git there only while they are
/// as made, byte for byte, and lead back to this repository and this worktree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Admin {
    dotgit: Vec<u8>,
    dir: PathBuf,
    gitdir: Vec<u8>,
    commondir: Vec<u8>,
    config_worktree: Option<Vec<u8>>,
}

impl Admin {
    /// Whether the worktree at `path` still has exactly these git files.
    fn still_at(&self, git_dir: &Path, path: &Path) -> bool {
        Admin::read(git_dir, path).is_some_and(|now| now == *self)
    }

    /// The worktree's git files as they are now; `None` when they do not lead back to
    /// `git_dir` and `path` (or are not plain files in a plain folder).
    fn read(git_dir: &Path, path: &Path) -> Option<Admin> {
        let dotgit = read_plain(&path.join(".git"))?;
        let dir = admin_dir(&dotgit)?;
        let name = dir.file_name()?;
        if !same_place(dir.parent()?, &git_dir.join("worktrees"))
            || !std::fs::symlink_metadata(&dir).ok()?.is_dir()
        {
            return None;
        }
        let dir = git_dir.join("worktrees").join(name);
        let gitdir = read_plain(&dir.join("gitdir"))?;
        let named = PathBuf::from(OsStr::from_bytes(gitdir.trim_ascii_end()));
        if !same_place(&named, &path.join(".git")) {
            return None;
        }
        let commondir = read_plain(&dir.join("commondir"))?;
        let common = dir.join(OsStr::from_bytes(commondir.trim_ascii_end()));
        if !same_place(&common, git_dir) {
            return None;
        }
        let config = dir.join("config.worktree");
        let config_worktree = match std::fs::symlink_metadata(&config) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Ok(m) if m.is_file() => Some(std::fs::read(&config).ok()?),
            _ => return None,
        };
        Some(Admin {
            dotgit,
            dir,
            gitdir,
            commondir,
            config_worktree,
        })
    }

    /// The marker's body: each file's bytes after its length (`-` for no `config.worktree`).
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut field = |bytes: Option<&[u8]>| match bytes {
            Some(b) => {
                out.extend_from_slice(format!("{}\n", b.len()).as_bytes());
                out.extend_from_slice(b);
            }
            None => out.extend_from_slice(b"-\n"),
        };
        field(Some(&self.dotgit));
        field(Some(self.dir.as_os_str().as_bytes()));
        field(Some(&self.gitdir));
        field(Some(&self.commondir));
        field(self.config_worktree.as_deref());
        out
    }

    fn decode(mut bytes: &[u8]) -> Option<Admin> {
        let mut field = || -> Option<Option<Vec<u8>>> {
            let nl = bytes.iter().position(|b| *b == b'\n')?;
            let head = &bytes[..nl];
            if head == b"-" {
                bytes = &bytes[nl + 1..];
                return Some(None);
            }
            let len: usize = std::str::from_utf8(head).ok()?.parse().ok()?;
            let value = bytes.get(nl + 1..nl + 1 + len)?.to_vec();
            bytes = &bytes[nl + 1 + len..];
            Some(Some(value))
        };
        let admin = Admin {
            dotgit: field()??,
            dir: PathBuf::from(OsStr::from_bytes(&field()??)),
            gitdir: field()??,
            commondir: field()??,
            config_worktree: field()?,
        };
        bytes.is_empty().then_some(admin)
    }
}

/// Repo-relative paths, as bytes.
type Paths = Vec<Vec<u8>>;

/// The paths `git status --untracked-files=all` lists in the pooled worktree (tracked
/// changes, staged or not, and untracked files one by one; ignored ones are not listed):
/// (tracked, untracked). Read in-process by the walk a rollback proves a tree with (git's
/// answers, at a fraction of a `git status` run's cost on a big tree), through the git files
/// [`Pooled::proven`] has just checked: libgit2 runs no fsmonitor command and no hook.
fn status_paths(wt: &Pooled) -> Result<(Paths, Paths)> {
    let repo = Repository::open(&wt.path).map_err(|e| {
        Error::new(format!(
            "reading a pooled worktree's status: {}",
            e.message()
        ))
    })?;
    let found = crate::git::status::changes(&repo, crate::git::status::Untracked::Files)?;
    let (tracked, untracked): (Vec<_>, Vec<_>) = found.into_iter().partition(|d| d.tracked);
    let raw = |list: Vec<crate::git::Dirty>| list.into_iter().map(|d| d.raw).collect();
    Ok((raw(tracked), raw(untracked)))
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

/// What a marker says: the commit an idle worktree holds, and its git files as made.
fn read_marker(git_dir: &Path, name: &str) -> Option<(String, Admin)> {
    let bytes = std::fs::read(marker_path(git_dir, name)).ok()?;
    let nl = bytes.iter().position(|b| *b == b'\n')?;
    let commit = std::str::from_utf8(&bytes[..nl]).ok()?.to_string();
    git2::Oid::from_str(&commit).ok()?;
    Some((commit, Admin::decode(&bytes[nl + 1..])?))
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
        admin: Admin::default(),
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

/// Pooled worktrees taken in the background for a race, so the candidates' worktrees are made
/// side by side with the run's own (and with each other) instead of after it: on a new repo
/// each is a full checkout. Each is taken on a thread of its own and handed to the first
/// candidate that asks; those nobody asks for are given back when the reserve is dropped.
pub struct Reserve {
    pending: std::sync::Mutex<Vec<std::thread::JoinHandle<Result<Pooled>>>>,
    /// Worktrees being given back while the run goes on (see [`Reserve::give_back_later`]).
    returning: std::sync::Mutex<Vec<std::thread::JoinHandle<Result<()>>>>,
}

impl Reserve {
    /// No worktree taken ahead.
    pub fn none() -> Self {
        Reserve {
            pending: std::sync::Mutex::new(Vec::new()),
            returning: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Starts taking `count` pooled worktrees of the repository at `commondir`, detached at
    /// `commit`; with `sandboxed`, what confined commands leave there goes at give-back too.
    pub fn start(
        commondir: &Path,
        commit: &str,
        bytecode: Bytecode,
        count: usize,
        sandboxed: bool,
    ) -> Self {
        let pending = (0..count)
            .map(|_| {
                let (commondir, commit) = (commondir.to_path_buf(), commit.to_string());
                std::thread::spawn(move || {
                    let repo = Repository::open(&commondir)?;
                    let mut wt = take(&repo, &commit, bytecode)?;
                    if sandboxed {
                        wt.sweep_ignored();
                    }
                    Ok(wt)
                })
            })
            .collect();
        Reserve {
            pending: std::sync::Mutex::new(pending),
            returning: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Gives a candidate's worktree back on a thread of its own, so the race goes on (the
    /// winner's delivery, the checks where it lands) while it is swept; the reserve waits for
    /// it when dropped, so after the run every worktree is idle and clean, or removed. One
    /// that cannot be swept is removed, as a give-back always does; one that cannot even be
    /// removed is not trusted by the next taker.
    pub fn give_back_later(&self, wt: Pooled) {
        let handle = std::thread::spawn(move || wt.give_back());
        match self.returning.lock() {
            Ok(mut returning) => returning.push(handle),
            Err(_) => {
                let _ = handle.join();
            }
        }
    }

    /// One of the worktrees taken ahead, once it is ready (or why it could not be taken);
    /// `None` when none is left.
    pub fn next(&self) -> Option<Result<Pooled>> {
        let handle = self.pending.lock().ok()?.pop()?;
        Some(handle.join().unwrap_or_else(|_| {
            Err(Error::new(
                "taking a pooled worktree ahead of a race failed",
            ))
        }))
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        // Those no candidate asked for are given back (a `Pooled` dropped gives itself back).
        while let Some(taken) = self.next() {
            drop(taken);
        }
        let returning = match self.returning.get_mut() {
            Ok(returning) => std::mem::take(returning),
            Err(poisoned) => std::mem::take(poisoned.into_inner()),
        };
        for handle in returning {
            let _ = handle.join();
        }
    }
}

impl Pooled {
    /// Sandboxed commands or a coding agent ran here: when it is given back, what they left
    /// that the tree's rules ignore is removed too, so nothing they made outlives the run
    /// (SPEC §7.1); unsandboxed checks' ignored build outputs stay, warm for the next.
    pub fn sweep_ignored(&mut self) {
        self.sandboxed = true;
    }

    /// The pool's own git in the worktree: [`in_tree`] (pointed at the admin folder the pool
    /// made), and no hook of any config run.
    fn git(&self) -> Command {
        let mut cmd = in_tree(&self.path);
        cmd.args(["-c", "core.hooksPath=/dev/null"]);
        cmd
    }

    /// Whether the worktree's git files are as the pool made them.
    fn proven(&self) -> bool {
        self.admin.still_at(&self.git_dir, &self.path) && !self.has_leftover_state()
    }

    /// What a command left in the worktree's admin folder that would change what the next
    /// holder's git does: a `*.lock` (`index.lock` of a git killed mid-write, or planted —
    /// every later git there would refuse), or an operation in progress (a bisect, merge,
    /// rebase, cherry-pick, revert, sequencer). Such a worktree is replaced, never reused.
    fn has_leftover_state(&self) -> bool {
        const IN_PROGRESS: [&[u8]; 9] = [
            b"BISECT_",
            b"MERGE_",
            b"AUTO_MERGE",
            b"CHERRY_PICK_HEAD",
            b"REVERT_HEAD",
            b"REBASE_HEAD",
            b"rebase-merge",
            b"rebase-apply",
            b"sequencer",
        ];
        std::fs::read_dir(&self.admin.dir).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                let name = e.file_name();
                let name = name.as_bytes();
                name.ends_with(b".lock") || IN_PROGRESS.iter().any(|p| name.starts_with(p))
            })
        })
    }

    /// Records the worktree as held by this process, its git files as `admin`.
    fn hold(&mut self, admin: Admin) {
        set_held(&self.path, Some((self.git_dir.clone(), admin.clone())));
        self.admin = admin;
    }

    /// Brings the worktree this process now holds to `self.base`: reused when its marker
    /// proves it clean, else removed and made anew.
    fn claim(&mut self, repo: &Repository) -> Result<()> {
        let marker = read_marker(&self.git_dir, &self.name);
        // From here on, until it is given back, it is not idle: a holder killed now leaves
        // no marker, so no one trusts what it left.
        let _ = std::fs::remove_file(marker_path(&self.git_dir, &self.name));
        if let Some((held, admin)) = marker {
            self.hold(admin);
            if self.trusted(&held) && self.move_to(repo, &held).is_ok() {
                crate::trace::mark("  pool: idle worktree taken");
                return Ok(());
            }
        }
        self.replace()
    }

    /// Whether the idle worktree is as its marker says: its git files as the pool made them,
    /// git's record of it locked, HEAD detached at the commit the marker names.
    fn trusted(&self, held: &str) -> bool {
        if !self.proven() {
            return false;
        }
        let head = read_plain(&self.admin.dir.join("HEAD")).unwrap_or_default();
        self.admin.dir.join("locked").is_file() && head.trim_ascii() == held.as_bytes()
    }

    /// From the clean tree of `held` to `self.base`: only the paths that differ are written.
    fn move_to(&self, repo: &Repository, held: &str) -> Result<()> {
        if held == self.base {
            return Ok(());
        }
        let changed = changed_paths(repo, held, &self.base)?;
        let mut cmd = self.git();
        cmd.args(["read-tree", "-m", "-u", held, &self.base]);
        let moved = run_git(cmd, "bringing a pooled worktree to the baseline");
        (self.bytecode.paths)(&self.git_dir, &self.path, &changed);
        moved?;
        let mut head = self.git();
        head.args(["update-ref", "--no-deref", "HEAD", &self.base]);
        run_git(head, "detaching a pooled worktree at the baseline")
    }

    /// Removes whatever is at this name and makes a new worktree there at `self.base`.
    fn replace(&mut self) -> Result<()> {
        set_held(&self.path, None);
        let dotgit = read_plain(&self.path.join(".git"));
        if self.path.exists() || dotgit.is_some() {
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
        let admin = Admin::read(&self.git_dir, &self.path).ok_or_else(|| {
            Error::new("a new pooled worktree's git files do not lead back to this repository")
        })?;
        self.hold(admin);
        // Outside the turn, so several checkouts run at once; parallel checkout inside each.
        let mut checkout = self.git();
        checkout.args(["-c", "checkout.workers=0", "reset", "--hard", "--quiet"]);
        run_git(checkout, "checking out a pooled worktree")?;
        crate::trace::mark("  pool: worktree made");
        Ok(())
    }

    /// Sweeps what was left and proves the tree clean: its git files as the pool made them
    /// (checked before any git runs there), HEAD detached at `self.base` again, tracked files
    /// as there, untracked ones removed (ignored ones stay), `git status` empty.
    fn sweep(&self) -> Result<()> {
        let unproven = |why: &str| Error::new(format!("a pooled worktree {why}"));
        if !self.proven() {
            return Err(unproven("had its git files changed"));
        }
        // HEAD as the admin folder holds it; a branch or anything but a commit id is moved.
        let head_file = read_plain(&self.admin.dir.join("HEAD")).unwrap_or_default();
        let head = std::str::from_utf8(head_file.trim_ascii())
            .ok()
            .filter(|h| git2::Oid::from_str(h).is_ok() && h.len() == self.base.len())
            .map(str::to_string);
        let (tracked, untracked) = status_paths(self)?;
        crate::trace::mark("  pool: status read");
        let mut written = [&tracked[..], &untracked[..]].concat();
        if let Some(head) = head.as_deref().filter(|h| *h != self.base) {
            let repo = Repository::open(&self.git_dir)?;
            written.extend(changed_paths(&repo, head, &self.base).unwrap_or_default());
        }
        let moved = head.as_deref() != Some(self.base.as_str());
        // Only the steps the status calls for: on a big tree each is a walk of it.
        let mut swept = Ok(());
        if moved {
            // Detached first, so the reset moves no branch a command checked out here.
            let mut head = self.git();
            head.args(["update-ref", "--no-deref", "HEAD", &self.base]);
            swept = run_git(head, "detaching a pooled worktree");
        }
        // The few tracked paths that differ are put back one by one (index and file); a
        // reset, which walks the whole tree, only when HEAD moved or they are many, or that
        // fails.
        let few = !moved && (1..=MAX_RESTORED).contains(&tracked.len());
        let restored = few && self.restore_paths(&tracked).is_ok();
        if moved || (!tracked.is_empty() && !restored) {
            let mut reset = self.git();
            reset.args(["reset", "--hard", "--quiet", &self.base]);
            swept = swept.and_then(|()| run_git(reset, "sweeping a pooled worktree"));
        }
        crate::trace::mark("  pool: tracked files put back");
        // Untracked files (ignored ones too after sandboxed commands) go as `git clean`
        // removes them; a reset alone leaves every tracked file as committed, so with none
        // there is nothing left for a second status to find.
        let cleaning = moved || !untracked.is_empty() || self.sandboxed;
        if cleaning {
            let mut clean = self.git();
            clean.args(["clean", "-f", "-d", "--quiet"]);
            if self.sandboxed {
                clean.arg("-x");
            }
            swept = swept.and_then(|()| run_git(clean, "sweeping a pooled worktree"));
            crate::trace::mark("  pool: cleaned");
        }
        if !written.is_empty() {
            (self.bytecode.paths)(&self.git_dir, &self.path, &written);
            crate::trace::mark("  pool: bytecode of the written paths dropped");
        }
        swept?;
        if cleaning && !status_paths(self)?.0.is_empty() {
            return Err(unproven("could not be swept clean"));
        }
        if !self.trusted(&self.base) {
            return Err(unproven("is not as it was made"));
        }
        Ok(())
    }

    /// Puts `paths` (tracked paths `git status` listed) back as `self.base` has them, in the
    /// index and the tree: one that `self.base` lacks is removed.
    fn restore_paths(&self, paths: &[Vec<u8>]) -> Result<()> {
        let mut restore = self.git();
        restore.args([
            "--literal-pathspecs",
            "restore",
            "--quiet",
            "--staged",
            "--worktree",
            "--ignore-unmatch",
            "--source",
            &self.base,
            "--",
        ]);
        restore.args(paths.iter().map(|p| OsStr::from_bytes(p)));
        run_git(restore, "putting back a pooled worktree's files")
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
        set_held(&self.path, None);
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
        bytes.extend_from_slice(&self.admin.encode());
        std::fs::write(marker_path(&self.git_dir, &self.name), bytes).is_ok()
    }

    /// Removes the held worktree, its record and its lock file (still held, so no one else
    /// can be taking it).
    fn remove_held(&self) -> Result<()> {
        let _ = std::fs::remove_file(marker_path(&self.git_dir, &self.name));
        set_held(&self.path, None);
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

/// The pooled worktrees of the repo by name, made or marked idle.
fn pooled_names(git_dir: &Path) -> Vec<String> {
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
    names
}

/// Each pooled worktree no process holds that is idle for longer than `older_than` (or was
/// never proven clean: a killed holder's), handed to `each` while its lock is held, so no
/// run can take it meanwhile. Returns the paths `each` said yes to.
fn unheld_older_than(
    git_dir: &Path,
    older_than: Duration,
    mut each: impl FnMut(&str, &Path) -> Result<bool>,
) -> Result<Vec<PathBuf>> {
    let mut chosen = Vec::new();
    for name in pooled_names(git_dir) {
        // A held one's lock is taken: a running command is using it, so it is never touched.
        let Some(lock) = try_lock(git_dir, &name) else {
            continue;
        };
        let young = std::fs::metadata(marker_path(git_dir, &name))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < older_than);
        let path = worktrees_dir(git_dir).join(&name);
        if !young && each(&name, &path)? {
            chosen.push(path);
        }
        drop(lock);
    }
    Ok(chosen)
}

/// Removes the pooled worktrees no process holds: idle ones given back longer than
/// `older_than` ago, and every untrusted leftover (a killed holder's). Returns their paths.
/// `git factory prune` calls this; `bytecode` drops their cache entries.
pub fn prune_idle(
    repo: &Repository,
    older_than: Duration,
    bytecode: Forget,
) -> Result<Vec<PathBuf>> {
    let git_dir = repo.commondir();
    unheld_older_than(git_dir, older_than, |name, path| {
        let _ = std::fs::remove_file(marker_path(git_dir, name));
        remove_worktree(git_dir, path, bytecode)?;
        let _ = std::fs::remove_file(lock_path(git_dir, name));
        Ok(true)
    })
}

/// What [`prune_idle`] would remove now, removing nothing (`git factory prune --dry-run`).
pub fn idle_older_than(repo: &Repository, older_than: Duration) -> Result<Vec<PathBuf>> {
    unheld_older_than(repo.commondir(), older_than, |_, _| Ok(true))
}

/// Removes the pooled worktrees no process holds and none proved clean (a killed holder's),
/// keeping the idle ones (`recover`). Returns their paths.
pub fn remove_untrusted(repo: &Repository, bytecode: Forget) -> Result<Vec<PathBuf>> {
    prune_idle(repo, Duration::MAX, bytecode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_reads_back_exactly_what_was_written_and_nothing_else() {
        let admin = Admin {
            dotgit: b"gitdir: /r/.git/worktrees/pool-1\n".to_vec(),
            dir: PathBuf::from(OsStr::from_bytes(b"/r/.git/worktrees/p\xffol-1")),
            gitdir: b"/r/.git/factory/worktrees/pool-1/.git\n".to_vec(),
            commondir: b"../..\n".to_vec(),
            config_worktree: None,
        };
        assert_eq!(Admin::decode(&admin.encode()), Some(admin.clone()));
        let with = Admin {
            config_worktree: Some(b"[core]\n\tsparseCheckout = true\n".to_vec()),
            ..admin.clone()
        };
        assert_eq!(Admin::decode(&with.encode()), Some(with.clone()));
        assert_ne!(Admin::decode(&with.encode()), Some(admin));
        let mut cut = with.encode();
        cut.pop();
        assert_eq!(Admin::decode(&cut), None);
        let mut more = with.encode();
        more.push(b'x');
        assert_eq!(Admin::decode(&more), None);
        assert_eq!(Admin::decode(b"99999\nshort"), None);
        assert_eq!(Admin::decode(b""), None);
    }
}
