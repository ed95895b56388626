//! The repo's one Python bytecode cache (SPEC §3.7): `.git/factory/pycache` of the common git
//! dir, given to every check as `PYTHONPYCACHEPREFIX` and kept between attempts and runs, so a
//! check runs as warm as in the user's own shell.
//!
//! Python maps a source `/abs/dir/m.py` to `<prefix>/abs/dir/m.<tag>.pyc` (no `__pycache__`
//! level; pytest's assertion rewriter uses the same folder, as `m.<tag>-pytest-<v>.pyc`), and
//! trusts an entry whose header matches the source's size and mtime second. So whenever the
//! harness writes a file (applies a change, rolls one back, restores a side effect) the entries
//! of that path are forgotten: a same-size edit within the same second would otherwise run the
//! bytecode of the other version.
//!
//! Under `--sandbox` the checks run model-written code, so they never write the shared folder:
//! they get a per-attempt [`View`] whose entries are symlinks into it (read-only inside the
//! sandbox) and whose writes are thrown away with the attempt. The harness fills the shared
//! folder itself, compiling real sources only: the baseline's files before any change
//! ([`PyCache::prefill`]), and after an attempt the interpreter's modules its checks needed
//! ([`PyCache::learn`]).
//!
//! Temporary worktrees share the folder too: their checkouts give every file a new mtime, so
//! what they reuse is the interpreter's modules, and their own entries go with them.

use super::exec::{self, CommandSpec, LogFiles, Sandbox};
use crate::store::records::CmdResult;
use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The shared bytecode folder of one repository.
#[derive(Debug)]
pub struct PyCache {
    dir: PathBuf,
    /// Whether an attempt's checks were learnt from already: later views link the folders
    /// outside the work tree whole (one symlink each, not one per entry).
    learnt: AtomicBool,
    /// The change time just after this process's last compile into the folder ended: a mark
    /// is taken only once the clock has passed it (see [`PyCache::mark`]).
    compiled_until: Mutex<Option<(i64, i64)>>,
    /// Per work-tree root, its tracked symlinks to folders inside it (alias, target — both
    /// repo-relative): Python names a source by the path it imported it through (`lib/m.py`
    /// for a tracked `lib -> src`), so a changed `src/m.py` is forgotten under every alias
    /// too. Listed once per root from the index (no tree walk).
    aliases: Mutex<HashMap<PathBuf, Vec<(PathBuf, PathBuf)>>>,
}

impl PyCache {
    /// The cache of the repository whose common git dir holds `factory_dir` (`.git/factory`):
    /// linked worktrees share it.
    pub fn in_factory_dir(factory_dir: &Path) -> Self {
        PyCache {
            dir: factory_dir.join("pycache"),
            learnt: AtomicBool::new(false),
            compiled_until: Mutex::new(None),
            aliases: Mutex::new(HashMap::new()),
        }
    }

    pub fn of(repo: &git2::Repository) -> Self {
        Self::in_factory_dir(&crate::git::factory_dir(repo))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The variables for a check whose bytecode goes to `prefix` (the shared folder, or an
    /// attempt's view of it). A prefix that is not UTF-8 cannot be passed faithfully, so
    /// Python is then told not to write bytecode at all (slow but never stale).
    pub fn env(prefix: &Path, root: &Path) -> Vec<(String, String)> {
        let addopts = match crate::env::pytest_addopts() {
            Some(v) => format!("{v} -p no:cacheprovider"),
            None => "-p no:cacheprovider".to_string(),
        };
        let pytest = ("PYTEST_ADDOPTS".to_string(), addopts);
        match prefix.to_str() {
            Some(p) if mirror_fits(prefix, root) => {
                vec![("PYTHONPYCACHEPREFIX".to_string(), p.to_string()), pytest]
            }
            // No usable cache: nothing written (an empty prefix is no prefix to Python).
            _ => vec![
                ("PYTHONPYCACHEPREFIX".to_string(), String::new()),
                ("PYTHONDONTWRITEBYTECODE".to_string(), "1".to_string()),
                pytest,
            ],
        }
    }

    /// Makes sure the folder exists (the sandbox binds views' symlinks into it).
    pub fn create(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)
    }

    /// Removes the entries of the given paths of the work tree at `root` (repo-relative, as
    /// the change, rollback and status walks name them): `<stem>.*.pyc` beside where the
    /// source's mirror is, and the whole mirror of a path that is a folder. Best effort: a
    /// missing entry is already forgotten.
    pub fn forget<'p>(&self, root: &Path, paths: impl IntoIterator<Item = &'p [u8]>) {
        self.forget_with(root, None, paths);
    }

    /// [`PyCache::forget`], with the repository of `root` already open (the folder links are
    /// read from its index instead of opening it again).
    pub fn forget_with<'p>(
        &self,
        root: &Path,
        repo: Option<&git2::Repository>,
        paths: impl IntoIterator<Item = &'p [u8]>,
    ) {
        let paths: Vec<&[u8]> = paths.into_iter().collect();
        if paths.is_empty() {
            return;
        }
        // The next fill compiles them again (see `fill`).
        self.note_gaps(root, paths.iter().copied());
        let mirrors = self.mirrors_of(root);
        let aliases = {
            let mut known = self.aliases.lock().unwrap_or_else(|e| e.into_inner());
            known
                .entry(root.to_path_buf())
                .or_insert_with(|| folder_links(root, repo))
                .clone()
        };
        for path in paths {
            let rel = Path::new(OsStr::from_bytes(path));
            if relative_parts(rel).is_none() {
                continue;
            }
            for name in names_of(rel, &aliases) {
                let Some(parts) = relative_parts(&name) else {
                    continue;
                };
                for mirror in &mirrors {
                    forget_in(&self.dir, mirror, &parts);
                }
            }
        }
    }

    /// Removes every entry of the work tree at `root` (a temporary worktree being removed:
    /// its path may be used again by a different checkout).
    pub fn forget_root(&self, root: &Path) {
        self.drop_record(root);
        for mirror in self.mirrors_of(root) {
            if let Some(dir) = real_dir_inside(&self.dir, &mirror) {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }

    /// Removes every entry of a worktree being made or removed (the pool's [`Forget`]), found
    /// through the common git dir that holds the cache.
    ///
    /// [`Forget`]: crate::git::worktree::Forget
    pub fn forget_worktree(git_dir: &Path, worktree: &Path) {
        Self::in_factory_dir(&git_dir.join("factory")).forget_root(worktree);
    }

    /// Removes the entries of the given paths of a pooled worktree (the pool's
    /// [`Bytecode::paths`]: files it wrote or removed), found through the common git dir.
    ///
    /// [`Bytecode::paths`]: crate::git::pool::Bytecode
    pub fn forget_worktree_paths(git_dir: &Path, worktree: &Path, paths: &[Vec<u8>]) {
        Self::in_factory_dir(&git_dir.join("factory"))
            .forget(worktree, paths.iter().map(Vec::as_slice));
    }

    /// What the worktree pool tells the cache (SPEC §3.7, §5): a pooled worktree keeps its
    /// path, so its entries stay warm, and only those of the paths it writes go.
    pub const POOLED: crate::git::pool::Bytecode = crate::git::pool::Bytecode {
        all: Self::forget_worktree,
        paths: Self::forget_worktree_paths,
    };

    /// Empties the cache (`recover`: nothing is known about what a killed run left in it).
    pub fn clear(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let Some(memory) = memory_dir() else {
            return;
        };
        let prefix = self.view_prefix();
        for entry in std::fs::read_dir(memory).into_iter().flatten().flatten() {
            let name = entry.file_name();
            let Some(rest) = name.as_bytes().strip_prefix(prefix.as_bytes()) else {
                continue;
            };
            // `<pid>-<random>`: a view of a process still running (a --worktree run, a
            // reverify, beside the killed one) is left to it.
            let owner = std::str::from_utf8(rest)
                .ok()
                .and_then(|r| r.split('-').next()?.parse::<i32>().ok())
                .and_then(rustix::process::Pid::from_raw);
            let alive = owner.is_some_and(|pid| {
                pid != rustix::process::getpid() && rustix::process::test_kill_process(pid).is_ok()
            });
            if !alive && entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }

    /// Where the entries of the tree at `root` live: under its absolute path as the checks'
    /// Python sees it (`getcwd()` resolves symlinks), and as given when that differs.
    fn mirrors_of(&self, root: &Path) -> Vec<PathBuf> {
        let mut roots = vec![root.to_path_buf()];
        if let Ok(real) = root.canonicalize() {
            if real != root {
                roots.insert(0, real);
            }
        }
        roots
            .iter()
            .filter(|r| r.is_absolute())
            .map(|r| self.dir.join(strip_root(r)))
            .collect()
    }

    /// Fills the cache from the baseline's own files before any change is applied (`--sandbox`
    /// only: its checks cannot write the cache). Runs `python -m compileall -q` over the tree
    /// in the same sandbox, with only the cache made writable; `-I` keeps the tree off
    /// `sys.path` and the environment out, `-X pycache_prefix` names the cache. Returns `None`
    /// when there is nothing to fill: no Python file in `baseline`, or no usable paths.
    /// A failure (no interpreter, a baseline file that does not compile) only leaves the
    /// cache colder; the checks report such problems themselves.
    pub fn prefill(&self, list: Vec<u8>, how: &Compiler<'_>) -> Option<CmdResult> {
        if list.is_empty() || !mirror_fits(&self.dir, how.root) {
            return None;
        }
        let mut argv = self.compile_argv(how.interpreter)?;
        argv.extend(["-i".to_string(), "-".to_string()]);
        self.compile(argv, list, how, "pycache_prefill")
    }

    /// What [`PyCache::prefill`] compiles: the absolute paths of the baseline's Python files
    /// in the tree at `root`, a line each; empty when there is none.
    pub fn prefill_list(baseline: &git2::Tree<'_>, root: &Path) -> Vec<u8> {
        Self::python_files(baseline, root, None).unwrap_or_default()
    }

    /// The absolute paths of `baseline`'s Python files in the tree at `root`, a line each:
    /// all of them, or those `only` names (or lies inside of).
    pub(crate) fn python_files(
        baseline: &git2::Tree<'_>,
        root: &Path,
        only: Option<&[Vec<u8>]>,
    ) -> Option<Vec<u8>> {
        let real_root = root.canonicalize().ok()?;
        let root = real_root.to_str()?;
        // The baseline's own files, by name on standard input (`-i -`): never what else
        // lies in the folder (`.git/`, the harness's own copies, other worktrees).
        let mut list = Vec::new();
        let _ = baseline.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            let name = entry.name_bytes();
            let blob = entry.filemode() == 0o100644 || entry.filemode() == 0o100755;
            if blob && name.ends_with(b".py") {
                let path = [dir.as_bytes(), name].concat();
                if only.is_some_and(|only| !super::pyc_paths::wanted(&path, only)) {
                    return git2::TreeWalkResult::Ok;
                }
                // One name a line, as text: names that cannot be told so are left to the checks.
                if let Ok(path) = std::str::from_utf8(&path) {
                    if !path.contains(['\n', '\r']) {
                        list.extend_from_slice(format!("{root}/{path}\n").as_bytes());
                    }
                }
            }
            git2::TreeWalkResult::Ok
        });
        Some(list)
    }

    /// A mark taken just before unsandboxed checks start, for [`PyCache::drop_compiled_since`]
    /// and [`PyCache::drop_outside_since`] (see [`crate::git::restore::change_time_now`]).
    ///
    /// Change times come from a clock that ticks every few milliseconds, and a check's first
    /// write often lands in the mark's own tick (a `sh -c` does, one time in four): so what
    /// changed *at or after* the mark is the checks'. For that to hold of the harness's own
    /// compiles, a mark is taken only once the clock has passed the end of the last one —
    /// a wait of at most a tick, and only right after a compile (never on a warm run).
    pub fn mark(&self) -> Option<(i64, i64)> {
        self.create().ok()?;
        let path = self.dir.join(".mark");
        let until = *self
            .compiled_until
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Bounded: a clock set back leaves the harness's entries to be compiled once more.
        for _ in 0..100 {
            let mark = crate::git::restore::change_time_now(&path)?;
            if until.is_none_or(|until| mark > until) {
                return Some(mark);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        crate::git::restore::change_time_now(&path)
    }

    /// Notes that a compile of the harness ended (see [`PyCache::mark`]).
    fn compiled(&self) {
        let now = crate::git::restore::change_time_now(&self.dir.join(".mark"));
        *self
            .compiled_until
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = now;
    }

    /// Unsandboxed checks write the shared folder themselves, whatever version of a file they
    /// saw (one they generated, edited and put back, or reached through a symlink). What they
    /// compiled in the work tree's mirror is dropped when they end, so every entry there is
    /// the harness's own compile of a file it knows (the prefill), which it forgets whenever it
    /// writes that file. Entries are judged by their change time, which no process can set,
    /// against `mark` (see [`PyCache::mark`]): one changed at or after it is the checks'.
    ///
    /// What was dropped is noted for the next fill (see `fill`): checks that compiled the
    /// tree's files run Python, and those files are compiled again before the next checks.
    pub fn drop_compiled_since(&self, root: &Path, mark: (i64, i64)) {
        let mut dropped = Vec::new();
        for mirror in self.mirrors_of(root) {
            if let Some(dir) = real_dir_inside(&self.dir, &mirror) {
                drop_newer(&dir, Path::new(""), mark, &mut dropped);
            }
        }
        if dropped.is_empty() {
            return;
        }
        if self.record(root).is_none() {
            self.set_record(root, None);
        }
        dropped.sort();
        dropped.dedup();
        self.note_gaps(root, dropped.iter().map(Vec::as_slice));
    }

    /// Unsandboxed checks write the shared folder for files outside the work tree too (the
    /// standard library, site-packages), and a check that wrote forged bytecode there for a
    /// module every later check imports would rule them all, sandboxed or not (SPEC §7.1).
    /// So what was written there since `mark` goes too, and the sources of what went are
    /// returned, for the harness to compile them again itself ([`PyCache::relearn`]).
    ///
    /// Judged by each entry's own change time, which no process can set and every way of
    /// changing a file moves: a new entry or a rename into a folder (how Python writes
    /// bytecode), but also a write into an existing entry, a chmod, a new hard link — the
    /// last ones move neither the folder's change time nor the entry's name, so every entry
    /// is stat'ed (a few microseconds for a thousand). The work tree's mirror is left to
    /// [`PyCache::drop_compiled_since`]; the harness's own files (`.mark`, the fill's
    /// records) are not bytecode and stay.
    pub fn drop_outside_since(&self, root: &Path, mark: (i64, i64)) -> Vec<PathBuf> {
        use std::os::unix::fs::MetadataExt;
        let trees = self.mirrors_of(root);
        let own = [self.dir.join(".mark"), self.dir.join(".filled")];
        let mut sources = Vec::new();
        let mut stack = vec![self.dir.clone()];
        while let Some(dir) = stack.pop() {
            if trees.contains(&dir) {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if dir == self.dir && own.contains(&entry.path()) {
                    continue;
                }
                if kind.is_dir() {
                    stack.push(entry.path());
                    continue;
                }
                let Ok(m) = entry.metadata() else {
                    continue;
                };
                let changed = (m.ctime(), m.ctime_nsec()) >= mark;
                if (kind.is_symlink() || changed) && std::fs::remove_file(entry.path()).is_ok() {
                    sources.extend(source_of(&self.dir, &entry.path()));
                }
            }
        }
        sources.sort();
        sources.dedup();
        sources
    }

    /// Compiles `sources` (files outside the work tree whose entries a check wrote and
    /// [`PyCache::drop_outside_since`] removed) from the real files, as the harness: the
    /// cache stays warm without keeping anything a check wrote. Runs nothing for none.
    pub fn relearn(&self, sources: Vec<PathBuf>, how: &Compiler<'_>) -> Option<CmdResult> {
        self.compile_files(sources, how)
    }

    /// Compiles those of `sources` that are regular files named in UTF-8 (the first
    /// [`LEARN_LIMIT`] of them) into the cache, as the harness. Runs nothing for none.
    fn compile_files(
        &self,
        sources: impl IntoIterator<Item = PathBuf>,
        how: &Compiler<'_>,
    ) -> Option<CmdResult> {
        let sources: Vec<String> = sources
            .into_iter()
            .filter(|s| std::fs::metadata(s).is_ok_and(|m| m.is_file()))
            .filter_map(|s| s.to_str().map(str::to_string))
            .take(LEARN_LIMIT)
            .collect();
        if sources.is_empty() {
            return None;
        }
        let mut argv = self.compile_argv(how.interpreter)?;
        argv.extend(sources);
        self.compile(argv, Vec::new(), how, "pycache_learn")
    }

    /// `python -I -X pycache_prefix=<cache> -m compileall -q`: isolated (no tree on
    /// `sys.path`, no `PYTHON*` variables), writing into the shared folder.
    fn compile_argv(&self, interpreter: &str) -> Option<Vec<String>> {
        let prefix = self.dir.to_str()?;
        Some(
            [
                interpreter,
                "-I",
                "-X",
                &format!("pycache_prefix={prefix}"),
                "-m",
                "compileall",
                "-q",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        )
    }

    /// Runs a harness compile in the sandbox with only the shared folder made writable.
    fn compile(
        &self,
        argv: Vec<String>,
        stdin: Vec<u8>,
        how: &Compiler<'_>,
        label: &'static str,
    ) -> Option<CmdResult> {
        let Compiler {
            root,
            sandbox,
            env_remove,
            timeout,
            log_dir,
            ..
        } = *how;
        self.create().ok()?;
        let sandbox = sandbox.map(|s| s.clone().with_writable(self.dir.clone()));
        let spec = CommandSpec {
            argv,
            cwd: root.to_path_buf(),
            timeout,
            env_remove: env_remove.to_vec(),
            env_set: Vec::new(),
            stdin: (!stdin.is_empty()).then_some(stdin),
            label,
            sandbox,
            pgid_file: None,
        };
        std::fs::create_dir_all(log_dir).ok()?;
        let logs = LogFiles::in_dir(log_dir, "", label);
        let ran = exec::run(&spec, &logs);
        self.compiled();
        Some(ran)
    }

    /// A view of the cache for sandboxed checks: nothing they write in it outlives their
    /// attempt (the view is refreshed before the next checks and removed with the run), and the
    /// shared folder is read-only inside the sandbox.
    ///
    /// - The work tree's mirror is copied: real folders and a file of its own per entry, so a
    ///   check can compile a module it created or edited anywhere in the tree (`compileall`
    ///   fails on bytecode it cannot write, and refuses to write over a symlink).
    /// - Everything else (the interpreter's modules, whose sources no check can change) is
    ///   linked: real folders with one symlink per entry until an attempt was learnt from,
    ///   then each folder whole, except along the way to the tree and under `/tmp`, where
    ///   checks may create sources.
    ///
    /// The view is made on a memory file system when there is one (`/dev/shm`), where a copy
    /// or link costs microseconds, and in `scratch` otherwise.
    pub fn view(&self, scratch: &Path, root: &Path) -> std::io::Result<View> {
        self.create()?;
        let trees: Vec<PathBuf> = self
            .mirrors_of(root)
            .iter()
            .map(|m| m.strip_prefix(&self.dir).unwrap_or(m).to_path_buf())
            .collect();
        let build = |dir: tempfile::TempDir, reusable: bool| -> std::io::Result<View> {
            let mut view = View {
                dir,
                trees: trees.clone(),
                copies: HashMap::new(),
                reusable,
                synced: now(),
            };
            self.sync(&mut view)?;
            Ok(view)
        };
        if let Some(memory) = memory_dir() {
            // A full memory file system falls back to the disk.
            if let Ok(view) = self.view_dir(&memory).and_then(|d| build(d, true)) {
                return Ok(view);
            }
        }
        std::fs::create_dir_all(scratch)?;
        build(self.view_dir(scratch)?, false)
    }

    /// Makes a view used by earlier checks (all ended) what [`PyCache::view`] would make now,
    /// redoing only what differs: whatever those checks wrote, replaced or removed in it, and
    /// what the shared folder gained or lost (a forgotten change, learnt modules). A view on
    /// disk is made anew instead (see [`Stamp`]).
    pub fn refresh(&self, view: &mut View, scratch: &Path, root: &Path) -> std::io::Result<()> {
        if view.reusable && self.sync(view).is_ok() {
            return Ok(());
        }
        *view = self.view(scratch, root)?;
        Ok(())
    }

    fn sync(&self, view: &mut View) -> std::io::Result<()> {
        let trees = view.trees.clone();
        let mut mirror = Mirror {
            view: view.dir.path(),
            shared: &self.dir,
            trees: &trees,
            open: &[PathBuf::from("tmp")],
            whole: self.learnt.load(Ordering::Relaxed),
            copies: &mut view.copies,
            synced: view.synced,
        };
        mirror.folder(Path::new(""))?;
        view.synced = now();
        Ok(())
    }

    /// A fresh, private folder for a view, named after this cache and the process that owns
    /// it, so `recover` can find the views a killed run left on a shared memory file system
    /// and leave those of live ones alone.
    fn view_dir(&self, parent: &Path) -> std::io::Result<tempfile::TempDir> {
        tempfile::Builder::new()
            .prefix(&format!("{}{}-", self.view_prefix(), std::process::id()))
            .tempdir_in(parent)
    }

    fn view_prefix(&self) -> String {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(self.dir.as_os_str().as_bytes());
        let tag: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
        format!("git-factory-pycache-{tag}-")
    }

    /// After sandboxed checks: the interpreter's own modules (outside the work tree) that they
    /// had to compile, because the cache did not have them yet, are compiled into the shared
    /// folder by the harness itself, from the real sources: what the checks wrote is only a
    /// hint of which files, never used. Compiling runs no code of those files, and nothing
    /// outside the work tree is writable to a sandboxed check, so the result is faithful.
    /// Runs nothing when there is nothing new.
    pub fn learn(&self, view: &View, how: &Compiler<'_>) -> Option<CmdResult> {
        let root = how.root;
        self.learnt.store(true, Ordering::Relaxed);
        let mut sources = BTreeSet::new();
        view.written(view.path(), Path::new(""), &mut sources);
        let real_root = root.canonicalize().ok();
        let outside = sources.into_iter().filter(|s| {
            !s.starts_with(root)
                && !real_root.as_ref().is_some_and(|r| s.starts_with(r))
                && !s.starts_with(&self.dir)
        });
        self.compile_files(outside, how)
    }
}

/// How the harness compiles into the cache under `--sandbox`: the interpreter the checks use
/// (so the bytecode tag matches), in their tree, sandbox, environment and time limit.
#[derive(Clone, Copy)]
pub struct Compiler<'a> {
    pub root: &'a Path,
    pub interpreter: &'a str,
    /// `None`: unsandboxed runs fill the cache too, without a sandbox (compiling runs none of
    /// the files' code).
    pub sandbox: Option<&'a Sandbox>,
    pub env_remove: &'a [String],
    pub timeout: Duration,
    pub log_dir: &'a Path,
}

/// A run's private view of the cache (see [`PyCache::view`]); removed when dropped.
pub struct View {
    dir: tempfile::TempDir,
    /// The work tree's mirrors, relative to the cache.
    trees: Vec<PathBuf>,
    /// Per copied entry (relative to the view): the copy's stamp and its source's.
    copies: HashMap<PathBuf, (Stamp, Stamp)>,
    /// On a memory file system: kept between attempts and refreshed.
    reusable: bool,
    /// When it was last made ready for checks (see [`Stamp::before`]).
    synced: (i64, i64),
}

impl View {
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The sources of the bytecode files the checks wrote into the view (regular files, not
    /// the links it was made of), outside the work tree's mirror.
    fn written(&self, dir: &Path, rel: &Path, out: &mut BTreeSet<PathBuf>) {
        if self.trees.iter().any(|t| rel.starts_with(t)) || out.len() >= LEARN_LIMIT {
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            if kind.is_dir() {
                self.written(&entry.path(), &rel.join(&name), out);
            } else if kind.is_file() {
                let bytes = name.as_bytes();
                let Some(stem) = bytes.split(|b| *b == b'.').next() else {
                    continue;
                };
                // `<stem>.<tag>.pyc` as the import system and compileall name them; pytest's
                // rewritten tests (`-pytest-`) are not the interpreter's own modules.
                if !bytes.ends_with(b".pyc") || bytes.windows(8).any(|w| w == b"-pytest-") {
                    continue;
                }
                let mut source = Path::new("/").join(rel);
                let mut file = stem.to_vec();
                file.extend_from_slice(b".py");
                source.push(OsStr::from_bytes(&file));
                out.insert(source);
            }
        }
    }
}

/// At most this many sources are learnt after one attempt (a bound on one compile command).
const LEARN_LIMIT: usize = 20_000;

/// How a view mirrors the shared folder (see [`PyCache::view`]).
struct Mirror<'a> {
    view: &'a Path,
    shared: &'a Path,
    /// The work tree's mirrors: real folders and copied entries.
    trees: &'a [PathBuf],
    /// Where checks may create sources: real folders, linked entries.
    open: &'a [PathBuf],
    /// Link every other folder whole (nothing more to learn from it).
    whole: bool,
    /// The view's copies, with what they were made from.
    copies: &'a mut HashMap<PathBuf, (Stamp, Stamp)>,
    /// When the view was last made ready for checks.
    synced: (i64, i64),
}

/// What an entry of a view should be.
enum Want {
    Folder,
    Link(PathBuf),
    Copy(std::fs::Metadata),
}

impl Mirror<'_> {
    /// Makes `view/rel` match `shared/rel`: folders real or linked whole, entries copied or
    /// linked, as the fields say; what the view has beyond that is removed. A view's folder
    /// is only ever written by checks that have all ended, so nothing moves meanwhile.
    fn folder(&mut self, rel: &Path) -> std::io::Result<()> {
        let mut wanted: HashMap<std::ffi::OsString, Want> = HashMap::new();
        for entry in std::fs::read_dir(self.shared.join(rel))
            .into_iter()
            .flatten()
            .flatten()
        {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            let inner = rel.join(&name);
            let in_tree = self.trees.iter().any(|t| inner.starts_with(t));
            let on_the_way = (self.trees.iter().chain(self.open))
                .any(|t| inner.starts_with(t) || t.starts_with(&inner));
            let want = if kind.is_dir() && (on_the_way || !self.whole) {
                Want::Folder
            } else if in_tree {
                // Python does not write bytecode through a symlink but replaces it;
                // `compileall` refuses to, so a check that edits a module and compiles it
                // needs the entry to be a file of its own. What is not a regular file in the
                // shared folder was not written by Python and is left out.
                match entry.metadata() {
                    Ok(meta) if kind.is_file() => Want::Copy(meta),
                    _ => continue,
                }
            } else {
                Want::Link(entry.path())
            };
            wanted.insert(name, want);
        }
        let here = self.view.join(rel);
        for entry in std::fs::read_dir(&here)?.flatten() {
            let name = entry.file_name();
            let path = entry.path();
            let kind = entry.file_type()?;
            let keep = match wanted.get(&name) {
                Some(Want::Folder) => kind.is_dir(),
                Some(Want::Link(target)) => {
                    kind.is_symlink() && std::fs::read_link(&path).is_ok_and(|t| t == *target)
                }
                Some(Want::Copy(source)) => {
                    let made = self.copies.get(&rel.join(&name));
                    let now = entry.metadata().ok();
                    kind.is_file()
                        && made.is_some_and(|(copy, from)| {
                            now.is_some_and(|n| Stamp::of(&n) == *copy)
                                && Stamp::of(source) == *from
                                && (copy.before(self.synced)
                                    || same_bytes(&path, &self.shared.join(rel).join(&name)))
                        })
                }
                None => false,
            };
            if keep {
                if matches!(wanted.get(&name), Some(Want::Folder)) {
                    self.folder(&rel.join(&name))?;
                }
                wanted.remove(&name);
                continue;
            }
            if kind.is_dir() {
                std::fs::remove_dir_all(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
            self.copies.remove(&rel.join(&name));
        }
        for (name, want) in wanted {
            let inner = rel.join(&name);
            let path = self.view.join(&inner);
            match want {
                Want::Folder => {
                    std::fs::create_dir(&path)?;
                    self.folder(&inner)?;
                }
                Want::Link(target) => std::os::unix::fs::symlink(target, &path)?,
                Want::Copy(_) => {
                    let source = self.shared.join(&inner);
                    if let Some(from) = copy_no_follow(&source, &path)? {
                        let copy = Stamp::of(&std::fs::symlink_metadata(&path)?);
                        self.copies.insert(inner, (copy, from));
                    }
                }
            }
        }
        Ok(())
    }
}

/// When a file was last changed, as far as the kernel tells: any write, rename over, chmod
/// or re-creation changes the inode or its change time, which no process can set. Enough to
/// trust an unchanged copy on a memory file system, whose inode numbers are not reused; on
/// disk a view is made anew for every attempt instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    ctime: (i64, i64),
    mtime: (i64, i64),
}

impl Stamp {
    /// Whether this copy was made well before `synced` (the moment checks could first touch
    /// it): the kernel stamps changes with a clock that may move only every few
    /// milliseconds, so a check's write just after the copy could leave its stamp as it was.
    fn before(&self, synced: (i64, i64)) -> bool {
        const MARGIN_NS: i128 = 50_000_000;
        let ns = |(s, n): (i64, i64)| s as i128 * 1_000_000_000 + n as i128;
        ns(self.ctime) + MARGIN_NS < ns(synced)
    }

    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            mtime: (meta.mtime(), meta.mtime_nsec()),
        }
    }
}

/// Whether two files hold the same bytes (either unreadable: no).
fn same_bytes(a: &Path, b: &Path) -> bool {
    match (std::fs::read(a), std::fs::read(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The wall clock as file change times use it.
fn now() -> (i64, i64) {
    let t =
        (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)).unwrap_or_default();
    (t.as_secs() as i64, t.subsec_nanos() as i64)
}

/// Copies a regular file without following a symlink at `from` (swapped in since it was
/// listed): the view must never show a check what lies elsewhere.
fn copy_no_follow(from: &Path, to: &Path) -> std::io::Result<Option<Stamp>> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(from);
    let mut source = match opened {
        Ok(f) => f,
        // Gone (forgotten meanwhile) or a symlink: nothing to show.
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let meta = source.metadata()?;
    if !meta.is_file() {
        return Ok(None);
    }
    let mut target = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)?;
    std::io::copy(&mut source, &mut target)?;
    Ok(Some(Stamp::of(&meta)))
}

/// A memory file system for views, when the machine has one.
fn memory_dir() -> Option<PathBuf> {
    let shm = Path::new("/dev/shm");
    shm.is_dir().then(|| shm.to_path_buf())
}

/// The tracked symlinks of the tree at `root` that lead to a folder inside it, as (link,
/// target) repo-relative paths. A link added by a change itself is not listed: the alias set
/// is the baseline's (the change's own links are in its change set, not its checks' way in).
fn folder_links(root: &Path, repo: Option<&git2::Repository>) -> Vec<(PathBuf, PathBuf)> {
    let Some(index) =
        crate::git::given_or_opened(repo, root).and_then(|r| crate::git::current_index(&r))
    else {
        return Vec::new();
    };
    let Ok(real_root) = root.canonicalize() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in index.iter().filter(|e| e.mode == 0o120000) {
        let rel = PathBuf::from(OsStr::from_bytes(&entry.path));
        let Ok(real) = root.join(&rel).canonicalize() else {
            continue;
        };
        if !real.is_dir() {
            continue;
        }
        if let Ok(target) = real.strip_prefix(&real_root) {
            out.push((rel, target.to_path_buf()));
        }
    }
    out
}

/// Every name a repo-relative path has through the folder links (the path itself first);
/// links to links are followed a few levels, never in circles.
fn names_of(path: &Path, links: &[(PathBuf, PathBuf)]) -> Vec<PathBuf> {
    let mut names = vec![path.to_path_buf()];
    let mut next = 0;
    while next < names.len() && names.len() < 64 {
        let here = names[next].clone();
        next += 1;
        for (link, target) in links {
            let Ok(rest) = here.strip_prefix(target) else {
                continue;
            };
            let alias = if rest.as_os_str().is_empty() {
                link.clone()
            } else {
                link.join(rest)
            };
            if !names.contains(&alias) {
                names.push(alias);
            }
        }
    }
    names
}

/// `/a/b` as `a/b`, to join under the cache folder.
fn strip_root(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect()
}

/// The components of a repo-relative path, or `None` for one that is empty or leaves the
/// tree (a path from a status walk or a change never does; this is the door anyway).
fn relative_parts(path: &Path) -> Option<Vec<&OsStr>> {
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => parts.push(p),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!parts.is_empty()).then_some(parts)
}

/// What lies on the way from `cache` down to `path` (a path inside it).
enum Way {
    /// Every step is a real folder.
    Folders(PathBuf),
    /// This step is a symlink (the cache is written by checks: a planted one).
    Symlink(PathBuf),
    /// Something on the way is missing or not a folder.
    Missing,
}

fn way_down(cache: &Path, path: &Path) -> Way {
    let Ok(rel) = path.strip_prefix(cache) else {
        return Way::Missing;
    };
    let mut here = cache.to_path_buf();
    let mut steps = vec![here.clone()];
    for part in rel.components() {
        here.push(part);
        steps.push(here.clone());
    }
    for step in steps {
        match std::fs::symlink_metadata(&step) {
            Ok(m) if m.file_type().is_symlink() => return Way::Symlink(step),
            Ok(m) if m.is_dir() => {}
            _ => return Way::Missing,
        }
    }
    Way::Folders(here)
}

/// Whether the cache can mirror the tree at `root` under `prefix` within `PATH_MAX` (4,096
/// bytes, the NUL included), keeping 1,024 bytes for the tree's own paths and the entries'
/// names. The mirror repeats the tree's absolute path below the prefix, so a tree at a path
/// of about 2,000 bytes fails to compile what the user's shell compiles beside the sources;
/// there the checks run with no cache (no bytecode written), as the shell would, only colder.
pub fn mirror_fits(prefix: &Path, root: &Path) -> bool {
    const PATH_MAX: usize = 4096;
    const ROOM: usize = 1024;
    prefix.as_os_str().len() + root.as_os_str().len() + ROOM < PATH_MAX
}

/// `path` (inside `cache`) if every folder from `cache` down to it is a real folder, so a
/// removal never follows a planted symlink elsewhere.
fn real_dir_inside(cache: &Path, path: &Path) -> Option<PathBuf> {
    match way_down(cache, path) {
        Way::Folders(p) => Some(p),
        Way::Symlink(_) | Way::Missing => None,
    }
}

/// Forgets one path under one mirror root: its folder's mirror if the path was a folder, and
/// the `<stem>.*.pyc` entries of a `.py` file. A symlink met on the way is removed (Python
/// never makes one), never followed.
fn forget_in(cache: &Path, mirror: &Path, parts: &[&OsStr]) {
    let mut full = mirror.to_path_buf();
    full.extend(parts);
    let Some(parent) = full.parent() else {
        return;
    };
    let parent = match way_down(cache, parent) {
        Way::Folders(p) => p,
        Way::Symlink(link) => {
            if link != cache {
                let _ = std::fs::remove_file(link);
            }
            return;
        }
        Way::Missing => return,
    };
    match std::fs::symlink_metadata(&full) {
        Ok(m) if m.is_dir() => {
            let _ = std::fs::remove_dir_all(&full);
        }
        Ok(m) if m.file_type().is_symlink() => {
            let _ = std::fs::remove_file(&full);
        }
        _ => {}
    }
    let Some((name, _)) = parts.split_last() else {
        return;
    };
    let Some(stem) = name.as_bytes().strip_suffix(b".py") else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return;
    };
    let mut prefix = stem.to_vec();
    prefix.push(b'.');
    for entry in entries.flatten() {
        let name = entry.file_name();
        let bytes = name.as_bytes();
        if bytes.starts_with(&prefix) && bytes.ends_with(b".pyc") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The source a cache entry was compiled from: `<cache>/abs/dir/m.<tag>.pyc` (or pytest's
/// `m.<tag>-pytest-<v>.pyc`) is `/abs/dir/m.py`.
fn source_of(cache: &Path, entry: &Path) -> Option<PathBuf> {
    let rel = entry.strip_prefix(cache).ok()?;
    let name = rel.file_name()?.as_bytes();
    if !name.ends_with(b".pyc") {
        return None;
    }
    let stem = name.split(|b| *b == b'.').next()?;
    let file = [stem, b".py"].concat();
    Some(
        Path::new("/")
            .join(rel.parent()?)
            .join(OsStr::from_bytes(&file)),
    )
}

/// Whether a tree has a `.py` file anywhere (a repo without one never pays for a prefill).
/// Removes every file under `dir` (real folders only, never following a link) changed at or
/// after `since`, and links, which Python never writes.
fn drop_newer(dir: &Path, rel: &Path, since: (i64, i64), dropped: &mut Vec<Vec<u8>>) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        // A folder entry's own metadata: a link is not followed.
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if meta.is_dir() {
            drop_newer(&entry.path(), &rel.join(entry.file_name()), since, dropped);
        } else if (meta.file_type().is_symlink() || (meta.ctime(), meta.ctime_nsec()) >= since)
            && std::fs::remove_file(entry.path()).is_ok()
        {
            dropped.extend(super::pyc_paths::source_of(rel, &entry.file_name()));
        }
    }
}

/// Whether any of the commands visibly runs Python (`python…`, `pytest`, `py.test`): a repo
/// whose checks do not is filled only once its checks were seen compiling its files.
pub fn runs_python(commands: &[&[Vec<String>]]) -> bool {
    commands
        .iter()
        .flat_map(|list| list.iter())
        .filter_map(|argv| argv.first())
        .filter_map(|program| Path::new(program.as_str()).file_name()?.to_str())
        .any(|n| n.starts_with("python") || n.starts_with("pytest") || n == "py.test")
}

/// The interpreter a prefill uses: the first command run as `python…` (so the bytecode's tag
/// matches the checks'), else `python3`.
pub fn interpreter_of(commands: &[&[Vec<String>]]) -> String {
    commands
        .iter()
        .flat_map(|list| list.iter())
        .filter_map(|argv| argv.first())
        .find(|program| {
            Path::new(program.as_str())
                .file_name()
                .and_then(OsStr::to_str)
                .is_some_and(|n| n.starts_with("python"))
        })
        .cloned()
        .unwrap_or_else(|| "python3".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, b"x").expect("write");
    }

    #[test]
    fn forget_removes_every_tag_of_a_source_and_nothing_else() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("tree");
        std::fs::create_dir_all(&root).expect("mkdir");
        let cache = PyCache::in_factory_dir(&tmp.path().join("factory"));
        let mirror = cache
            .dir()
            .join(strip_root(&root.canonicalize().expect("real")));
        let keep = [
            "pkg/mod.cpython-311.pyc",
            "pkg/model.cpython-311.pyc",
            "pkg/mod.txt",
            "other.cpython-311.pyc",
        ];
        let gone = [
            "pkg/mod.cpython-311.pyc.tmp.pyc",
            "pkg/m.cpython-311.pyc",
            "pkg/m.cpython-311.opt-1.pyc",
            "pkg/m.cpython-311-pytest-8.3.4.pyc",
            "sub/deep/x.cpython-311.pyc",
        ];
        for f in keep.iter().chain(&gone) {
            touch(&mirror.join(f));
        }
        cache.forget(
            &root,
            [&b"pkg/m.py"[..], b"sub/", b"missing/x.py", b"../escape.py"],
        );
        cache.forget(&root, [&b"pkg/mod.cpython-311.pyc.tmp.py"[..]]);
        for f in keep {
            assert!(mirror.join(f).exists(), "{f} kept");
        }
        for f in gone {
            assert!(!mirror.join(f).exists(), "{f} forgotten");
        }
        cache.forget_root(&root);
        assert!(!mirror.exists());
        assert!(cache.dir().exists(), "only the tree's mirror goes");
    }

    #[test]
    fn forget_takes_names_as_bytes() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("tree");
        std::fs::create_dir_all(&root).expect("mkdir");
        let cache = PyCache::in_factory_dir(&tmp.path().join("factory"));
        let mirror = cache
            .dir()
            .join(strip_root(&root.canonicalize().expect("real")));
        let entry = mirror.join(OsStr::from_bytes(b"caf\xe9.cpython-311.pyc"));
        touch(&entry);
        cache.forget(&root, [&b"caf\xe9.py"[..]]);
        assert!(!entry.exists());
    }

    #[test]
    fn forget_never_follows_a_planted_symlink() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("tree");
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(&root).expect("mkdir");
        touch(&elsewhere.join("m.cpython-311.pyc"));
        let cache = PyCache::in_factory_dir(&tmp.path().join("factory"));
        let mirror = cache
            .dir()
            .join(strip_root(&root.canonicalize().expect("real")));
        std::fs::create_dir_all(&mirror).expect("mkdir");
        std::os::unix::fs::symlink(&elsewhere, mirror.join("pkg")).expect("symlink");
        cache.forget(&root, [&b"pkg/m.py"[..]]);
        assert!(elsewhere.join("m.cpython-311.pyc").exists());
        assert!(std::fs::symlink_metadata(mirror.join("pkg")).is_err());
    }

    #[test]
    fn a_view_copies_the_trees_entries_and_links_the_rest_whole_once_learnt() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("tree");
        std::fs::create_dir_all(&root).expect("mkdir");
        let cache = PyCache::in_factory_dir(&tmp.path().join("factory"));
        let inside = strip_root(&root.canonicalize().expect("real"));
        let mirror = cache.dir().join(&inside);
        touch(&mirror.join("pkg/a.cpython-311.pyc"));
        touch(&mirror.join("lib/deep/b.cpython-311.pyc"));
        touch(&cache.dir().join("usr/lib/python3/os.cpython-311.pyc"));
        // Python never writes a symlink; one planted in the shared folder is not shown.
        std::os::unix::fs::symlink("/etc/hostname", mirror.join("pkg/p.cpython-311.pyc"))
            .expect("symlink");
        let scratch = tmp.path().join("scratch");
        for learnt in [false, true] {
            cache.learnt.store(learnt, Ordering::Relaxed);
            let view = cache.view(&scratch, &root).expect("view");
            let seen = view.path().join(&inside);
            for folder in ["pkg", "lib", "lib/deep"] {
                let meta = std::fs::symlink_metadata(seen.join(folder)).expect("folder");
                assert!(meta.is_dir(), "{folder} is a real folder of the view");
            }
            let a = std::fs::symlink_metadata(seen.join("pkg/a.cpython-311.pyc")).expect("a");
            assert!(
                a.is_file(),
                "an entry of the tree is a file of the view's own"
            );
            assert!(std::fs::symlink_metadata(seen.join("pkg/p.cpython-311.pyc")).is_err());
            assert_eq!(
                std::fs::read(seen.join("lib/deep/b.cpython-311.pyc")).expect("read"),
                b"x"
            );
            let stdlib = std::fs::symlink_metadata(view.path().join("usr")).expect("usr");
            assert_eq!(stdlib.file_type().is_symlink(), learnt);
        }
    }

    #[test]
    fn a_refreshed_view_drops_what_checks_did_to_it_and_follows_the_shared_folder() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("tree");
        std::fs::create_dir_all(&root).expect("mkdir");
        let cache = PyCache::in_factory_dir(&tmp.path().join("factory"));
        let inside = strip_root(&root.canonicalize().expect("real"));
        let mirror = cache.dir().join(&inside);
        for name in ["a", "b", "c", "d", "gone"] {
            touch(&mirror.join(format!("pkg/{name}.cpython-311.pyc")));
        }
        let scratch = tmp.path().join("scratch");
        let mut view = cache.view(&scratch, &root).expect("view");
        let seen = view.path().join(&inside).join("pkg");
        // What checks may do: write a copy in place (same size), replace one by rename,
        // swap one for a symlink, remove one, add files and folders of their own.
        std::fs::write(seen.join("a.cpython-311.pyc"), b"A").expect("write");
        std::fs::write(seen.join("new"), b"forged").expect("write");
        std::fs::rename(seen.join("new"), seen.join("b.cpython-311.pyc")).expect("rename");
        std::fs::remove_file(seen.join("c.cpython-311.pyc")).expect("rm");
        std::os::unix::fs::symlink(root.join("x"), seen.join("c.cpython-311.pyc")).expect("ln");
        std::fs::remove_file(seen.join("d.cpython-311.pyc")).expect("rm");
        touch(&seen.join("sub/planted.cpython-311.pyc"));
        touch(&view.path().join("usr/planted.cpython-311.pyc"));
        // What the harness does meanwhile: forget an entry, compile a new one.
        cache.forget(&root, [&b"pkg/gone.py"[..]]);
        touch(&mirror.join("pkg/fresh.cpython-311.pyc"));
        cache.refresh(&mut view, &scratch, &root).expect("refresh");
        let seen = view.path().join(&inside).join("pkg");
        let mut names: Vec<String> = std::fs::read_dir(&seen)
            .expect("pkg")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["a", "b", "c", "d", "fresh"].map(|n| format!("{n}.cpython-311.pyc"))
        );
        for name in &names {
            let meta = std::fs::symlink_metadata(seen.join(name)).expect("entry");
            assert!(meta.is_file(), "{name}");
            assert_eq!(
                std::fs::read(seen.join(name)).expect("read"),
                b"x",
                "{name}"
            );
        }
        assert!(!view.path().join("usr").exists());
    }

    #[test]
    fn what_checks_did_to_entries_outside_the_tree_goes_however_they_did_it() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("tree");
        std::fs::create_dir_all(&root).expect("mkdir");
        let cache = PyCache::in_factory_dir(&tmp.path().join("factory"));
        let stdlib = cache.dir().join("usr/lib/python3");
        let names = ["kept", "rewritten", "chmodded", "linked", "replaced"];
        for name in names {
            touch(&stdlib.join(format!("{name}.cpython-311.pyc")));
        }
        touch(&cache.dir().join(".filled/record"));
        // As after a compile of the harness: the mark comes once the clock has passed it.
        // The replaced one lies in a folder of its own: the others' folder must not move.
        std::fs::create_dir_all(stdlib.join("replaced")).expect("mkdir");
        std::fs::rename(
            stdlib.join("replaced.cpython-311.pyc"),
            stdlib.join("replaced/replaced.cpython-311.pyc"),
        )
        .expect("mv");
        cache.compiled();
        let mark = cache.mark().expect("mark");
        let entry = |name: &str| match name {
            "replaced" => stdlib.join("replaced/replaced.cpython-311.pyc"),
            _ => stdlib.join(format!("{name}.cpython-311.pyc")),
        };
        // In place: same file, same name, so the folder's change time stays.
        std::fs::write(entry("rewritten"), b"forged").expect("write");
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o444);
        std::fs::set_permissions(entry("chmodded"), mode).expect("chmod");
        std::fs::hard_link(entry("linked"), tmp.path().join("elsewhere")).expect("link");
        std::fs::write(tmp.path().join("new"), b"forged").expect("write");
        std::fs::rename(tmp.path().join("new"), entry("replaced")).expect("rename");
        std::fs::write(cache.dir().join(".filled/record"), b"held\n").expect("write");
        let mut sources = cache.drop_outside_since(&root, mark);
        sources.sort();
        assert!(entry("kept").exists());
        for name in &names[1..] {
            assert!(!entry(name).exists(), "{name} dropped");
        }
        assert_eq!(sources.len(), 4, "{sources:?}");
        assert!(
            cache.dir().join(".filled/record").exists(),
            "the fill's own"
        );
        assert!(cache.dir().join(".mark").exists());
    }

    #[test]
    fn the_interpreter_follows_the_commands() {
        let v = vec![vec!["bash".to_string(), "x.sh".to_string()]];
        let a = vec![vec!["/usr/bin/python3.12".to_string(), "-c".to_string()]];
        assert_eq!(interpreter_of(&[&v, &a]), "/usr/bin/python3.12");
        assert_eq!(interpreter_of(&[&v]), "python3");
    }
}
