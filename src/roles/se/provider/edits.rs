//! `--agent-edits`: a coding agent that edits files (seed 003's sandbox). Each attempt gets a
//! scratch worktree at the baseline; when the agent exits, the scratch tree's difference from
//! the baseline — edits, new files, deletions, mode changes, its own commits — *is* the
//! proposal. The scratch worktree is always removed; the user's tree is never the agent's.
//!
//! Agents keep bookkeeping in the folder they work in (aider's `.aider*`, Codex's `.codex/`,
//! Claude Code's `.claude/`), and some add themselves to `.gitignore` when git does not ignore
//! them yet. The globs of `factory.agentIgnore` are therefore ignored for the agent through a
//! `core.excludesFile` of its own, given in its environment (`GIT_CONFIG_COUNT`), so neither
//! the user's `.gitignore` nor `info/exclude` changes and `git check-ignore` already says yes;
//! and new files matching them never enter the proposal.

use super::contract::{Provider, ProviderError, Request, Response};
use crate::config::{Config, AGENT_IGNORE, AGENT_WRITABLE, DEFAULT_AGENT_IGNORE};
use crate::git;
use crate::roles::po::exec::{self, tail_chars, CommandSpec, LogFiles, Sandbox};
use crate::roles::se::proposal::OutputFormat;
use crate::roles::tr::protect::wildmatch;
use crate::store::records::Usage;
use git2::{Oid, Repository};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct AgentEdits {
    pub argv: Vec<String>,
    pub timeout: Duration,
}

impl AgentEdits {
    /// `{prompt_file}` and `{attempt}` inside any argument are replaced.
    fn argv_for(&self, prompt_file: &str, attempt: u32) -> Vec<String> {
        self.argv
            .iter()
            .map(|a| {
                a.replace("{prompt_file}", prompt_file)
                    .replace("{attempt}", &attempt.to_string())
            })
            .collect()
    }
}

fn failed(msg: impl Into<String>) -> ProviderError {
    ProviderError::Failed(msg.into())
}

/// The globs an agent's bookkeeping matches, read as gitignore lines: a trailing `/` matches
/// folders only, a glob without `/` matches a name at any depth, one with `/` is anchored at
/// the root, `!` re-includes, the last matching line wins.
#[derive(Debug, Clone)]
pub struct AgentIgnore {
    lines: Vec<String>,
}

impl AgentIgnore {
    pub fn from_config(cfg: &Config) -> Self {
        let given = cfg.multi(AGENT_IGNORE);
        let lines = if given.is_empty() {
            DEFAULT_AGENT_IGNORE.iter().map(|s| s.to_string()).collect()
        } else {
            given
        };
        AgentIgnore {
            lines: lines
                .into_iter()
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .collect(),
        }
    }

    /// The lines as an exclude file's text.
    pub fn text(&self) -> String {
        self.lines.iter().map(|l| format!("{l}\n")).collect()
    }

    /// Whether a file at `path` (or a folder above it) is ignored by these lines.
    pub fn matches(&self, path: &[u8]) -> bool {
        let parts: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
        // Each prefix of the path: every folder above the file, then the file itself.
        (1..=parts.len()).any(|n| {
            let is_dir = n < parts.len();
            let prefix = parts[..n].join(&b'/');
            self.verdict(&prefix, parts[n - 1], is_dir)
        })
    }

    fn verdict(&self, path: &[u8], name: &[u8], is_dir: bool) -> bool {
        let mut ignored = false;
        for line in &self.lines {
            let (negated, pattern) = match line.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, line.as_str()),
            };
            let (dir_only, pattern) = match pattern.strip_suffix('/') {
                Some(rest) => (true, rest),
                None => (false, pattern),
            };
            if pattern.is_empty() || (dir_only && !is_dir) {
                continue;
            }
            let hit = if pattern.contains('/') {
                wildmatch(pattern.trim_start_matches('/').as_bytes(), path)
            } else {
                wildmatch(pattern.as_bytes(), name)
            };
            if hit {
                ignored = !negated;
            }
        }
        ignored
    }
}

/// The folders (or files) of `factory.agentWritable`, `~/` expanded; a missing one is made as
/// a folder (the agent would make it), so it can be bound writable into the sandbox. A value that names no usable
/// folder is a misconfiguration: the run is refused before its first attempt counts.
pub(super) fn agent_writable(cfg: &Config) -> Result<Vec<PathBuf>, ProviderError> {
    let refuse = |raw: &str, why: String| {
        ProviderError::Unreachable {
        message: format!("git config {AGENT_WRITABLE} {raw:?}: {why}"),
        hint: format!(
            "name an absolute folder or one under ~/, e.g. git config --replace-all {AGENT_WRITABLE} ~/.codex"
        ),
    }
    };
    let mut out = Vec::new();
    for raw in cfg.multi(AGENT_WRITABLE) {
        let path = match raw.strip_prefix('~') {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => match crate::env::home() {
                Some(home) => home.join(rest.trim_start_matches('/')),
                None => return Err(refuse(&raw, "HOME is not set".into())),
            },
            _ => PathBuf::from(&raw),
        };
        if !path.is_absolute() {
            return Err(refuse(&raw, "not an absolute folder".into()));
        }
        // A file is bound as it is (Claude Code keeps ~/.claude.json beside ~/.claude/).
        if std::fs::symlink_metadata(&path).is_err() {
            std::fs::create_dir_all(&path).map_err(|e| refuse(&raw, e.to_string()))?;
        }
        out.push(path);
    }
    Ok(out)
}

/// The exclude file the agent's git reads instead of the user's own `core.excludesFile`: the
/// user's lines first (so nothing they ignore shows up), then the agent globs.
fn exclude_text(repo: &Repository, ignore: &AgentIgnore) -> Vec<u8> {
    let user_file = repo
        .config()
        .ok()
        .and_then(|c| c.get_path("core.excludesFile").ok())
        .or_else(crate::env::default_excludes_file);
    let mut text = user_file
        .and_then(|p| std::fs::read(p).ok())
        .unwrap_or_default();
    if !text.is_empty() && !text.ends_with(b"\n") {
        text.push(b'\n');
    }
    text.extend_from_slice(ignore.text().as_bytes());
    text
}

/// `core.excludesFile=<file>` for the agent's git, after any `git -c` settings it inherits.
fn exclude_env(file: &Path) -> Vec<(String, String)> {
    let n = crate::env::var("GIT_CONFIG_COUNT")
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(0);
    vec![
        ("GIT_CONFIG_COUNT".into(), (n + 1).to_string()),
        (format!("GIT_CONFIG_KEY_{n}"), "core.excludesFile".into()),
        (format!("GIT_CONFIG_VALUE_{n}"), file.display().to_string()),
    ]
}

/// Where a sandboxed agent sees its scratch worktree: a folder named like the user's repo,
/// outside any `.git` (Claude Code refuses to edit files under a `.git` folder).
const SANDBOX_WORKTREE: &str = "/tmp/git-factory";

/// The agent's own object directory (SPEC §7.1): every object its git writes — `git add`,
/// `git commit` — goes here, and the repo's objects are reached read-only as an alternate
/// (`GIT_OBJECT_DIRECTORY`, `GIT_ALTERNATE_OBJECT_DIRECTORIES`), so nothing it does to objects
/// reaches the user's history. After the audit the harness copies in only the blobs its
/// proposal needs ([`take_in`]); the folder goes with the scratch worktree.
struct PrivateObjects {
    dir: PathBuf,
}

impl PrivateObjects {
    fn make(repo: &Repository, name: &str) -> Result<Self, ProviderError> {
        let dir = git::factory_dir(repo)
            .join("worktrees")
            .join(format!("{name}.objects"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("pack"))
            .and_then(|()| std::fs::create_dir_all(dir.join("info")))
            .map_err(|e| failed(format!("cannot make the agent's object folder: {e}")))?;
        Ok(PrivateObjects { dir })
    }

    /// The agent's environment: its objects here, the repo's as a read-only alternate.
    fn env(&self, repo: &Repository) -> Vec<(String, String)> {
        vec![
            (
                "GIT_OBJECT_DIRECTORY".into(),
                self.dir.display().to_string(),
            ),
            (
                "GIT_ALTERNATE_OBJECT_DIRECTORIES".into(),
                repo.commondir().join("objects").display().to_string(),
            ),
        ]
    }
}

impl Drop for PrivateObjects {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A sandboxed agent's own git dir (SPEC §7.1): a repository of its own that its git is
/// pointed at (`GIT_DIR`, `GIT_WORK_TREE`) and may write — its scratch worktree's `HEAD` and
/// `index`, the repo's config and excludes, its branches and tags as they were (a
/// `packed-refs` of their own), no hooks — so `git add`, `git commit`, `git stash`, a branch
/// of its own and their logs all land here, read back by nobody. Its objects are the private
/// object directory, with the repo's as a read-only alternate. The repo's refs, config and the
/// worktree's admin folder stay read-only in the sandbox; the harness reads the proposal from
/// the scratch tree's files, through the real admin folder.
struct PrivateGitDir {
    dir: PathBuf,
}

impl PrivateGitDir {
    fn make(repo: &Repository, name: &str, admin: &Path) -> Result<Self, ProviderError> {
        let dir = git::factory_dir(repo)
            .join("worktrees")
            .join(format!("{name}.gitdir"));
        let _ = std::fs::remove_dir_all(&dir);
        let made = PrivateGitDir { dir };
        let common = repo.commondir();
        let copy = || -> std::io::Result<()> {
            for sub in ["logs", "refs/heads", "refs/tags", "info"] {
                std::fs::create_dir_all(made.dir.join(sub))?;
            }
            let files = [
                (admin.join("HEAD"), "HEAD"),
                (admin.join("index"), "index"),
                (admin.join("config.worktree"), "config.worktree"),
                (common.join("config"), "config"),
                (common.join("info/exclude"), "info/exclude"),
                (common.join("shallow"), "shallow"),
            ];
            for (from, to) in files {
                match std::fs::read(from) {
                    Ok(bytes) => drop(git::nofollow::rewrite_own(&made.dir.join(to), &bytes)?),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            let refs = packed_refs(repo);
            git::nofollow::rewrite_own(&made.dir.join("packed-refs"), &refs).map(drop)
        };
        copy().map_err(|e| failed(format!("cannot make the agent's git folder: {e}")))?;
        Ok(made)
    }

    /// The agent's environment: this git dir, and its worktree where the agent sees it.
    fn env(&self, worktree: &Path) -> Vec<(String, String)> {
        vec![
            ("GIT_DIR".into(), self.dir.display().to_string()),
            ("GIT_WORK_TREE".into(), worktree.display().to_string()),
        ]
    }
}

/// The repo's branches, tags and remote-tracking branches as a `packed-refs` file (the
/// agent's view of them; never git-factory's records or notes).
fn packed_refs(repo: &Repository) -> Vec<u8> {
    let mut lines: Vec<(Vec<u8>, Oid)> = Vec::new();
    if let Ok(refs) = repo.references() {
        for r in refs.flatten() {
            let name = r.name_bytes();
            let shared = [&b"refs/heads/"[..], b"refs/tags/", b"refs/remotes/"]
                .iter()
                .any(|p| name.starts_with(p));
            if let (true, Some(oid)) = (shared, r.target()) {
                lines.push((name.to_vec(), oid));
            }
        }
    }
    lines.sort();
    let mut out = b"# pack-refs with: sorted \n".to_vec();
    for (name, oid) in lines {
        out.extend_from_slice(format!("{oid} ").as_bytes());
        out.extend_from_slice(&name);
        out.push(b'\n');
    }
    out
}

impl Drop for PrivateGitDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Copies into the repo's object store what the proposal's tree needs and the repo lacks
/// (the scratch repository reads the agent's objects as an alternate): the trees and blobs
/// of what the agent added or changed, nothing else it wrote. Only a subtree equal to the
/// baseline's at the same path is skipped (the baseline is whole in the repo's store). A
/// tree's presence in the repo's store proves nothing of its blobs — hashing the scratch
/// index writes its trees there while the blobs an agent staged (`git add`) or committed are
/// only in its own objects — so changed trees are always walked; a blob present is whole.
fn take_in(
    scratch: &Repository,
    user: &Repository,
    tree: Oid,
    base: Option<Oid>,
) -> Result<(), git2::Error> {
    let from = scratch.odb()?;
    let into = user.odb()?;
    let mut queue = vec![(tree, base)];
    while let Some((id, base)) = queue.pop() {
        if Some(id) == base {
            continue;
        }
        let before = match base {
            Some(b) => Some(scratch.find_tree(b)?),
            None => None,
        };
        let t = scratch.find_tree(id)?;
        for entry in t.iter() {
            let was = before
                .as_ref()
                .and_then(|b| b.get_name_bytes(entry.name_bytes()))
                .map(|e| (e.id(), e.kind()));
            if was.is_some_and(|(old, _)| old == entry.id()) {
                continue;
            }
            match entry.kind() {
                Some(git2::ObjectType::Tree) => {
                    let old = was
                        .filter(|(_, kind)| *kind == Some(git2::ObjectType::Tree))
                        .map(|(old, _)| old);
                    queue.push((entry.id(), old));
                }
                Some(git2::ObjectType::Blob) if !into.exists(entry.id()) => {
                    let blob = from.read(entry.id())?;
                    into.write(blob.kind(), blob.data())?;
                }
                _ => {}
            }
        }
        if !into.exists(id) {
            let object = from.read(id)?;
            into.write(object.kind(), object.data())?;
        }
    }
    Ok(())
}

/// The sandbox of a coding agent: the one agent policy (SPEC §7.1) — its scratch worktree
/// (shown at `/tmp/git-factory/<repo>` under bubblewrap), its private git dir and object
/// directory (the repo's own objects and the worktree's admin folder stay read-only: an agent
/// that could write them could delete or rewrite the history, or re-point the worktree), the
/// `factory.agentWritable` folders; network on. Also where the agent sees its worktree.
fn agent_sandbox(
    at: crate::sandbox::AgentIn<'_>,
    writable: Vec<PathBuf>,
) -> Result<(Sandbox, PathBuf), ProviderError> {
    let backend = crate::sandbox::require(at.repo).map_err(|e| failed(e.message))?;
    // Named after the user's repository (also in a --worktree run, whose tree is elsewhere).
    let name = (at.repo.commondir().parent())
        .and_then(Path::file_name)
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "repo".into());
    let shown_at = Path::new(SANDBOX_WORKTREE).join(name);
    let seen_at = match backend {
        crate::sandbox::Backend::Bwrap => shown_at.clone(),
        crate::sandbox::Backend::Landlock => at.scratch.to_path_buf(),
    };
    let policy = crate::sandbox::Policy::for_agent(at, writable, shown_at);
    Ok((Sandbox::new(policy, backend), seen_at))
}

/// A `--sandbox` agent's confinement: its sandbox, the private git dir its git works
/// through, and where it sees its worktree.
struct Confined {
    sandbox: Sandbox,
    git_dir: PrivateGitDir,
    seen_at: PathBuf,
}

/// `at`: the scratch worktree, the agent's object directory, the worktree's admin folder.
fn confine(
    repo: &Repository,
    name: &str,
    at: (&Path, &Path, &Path),
    writable: Vec<PathBuf>,
) -> Result<Confined, ProviderError> {
    let (scratch, objects, admin) = at;
    let user_root = git::workdir(repo).map_err(|e| failed(e.message))?;
    let git_dir = PrivateGitDir::make(repo, name, admin)?;
    let at = crate::sandbox::AgentIn {
        repo,
        user_root: &user_root,
        scratch,
        git_dir: &git_dir.dir,
        objects,
    };
    let (sandbox, seen_at) = agent_sandbox(at, writable)?;
    Ok(Confined {
        sandbox,
        git_dir,
        seen_at,
    })
}

/// The scratch tree's tree id: tracked plus untracked files, the agent globs left out as git
/// leaves out ignored files; the index file of the scratch worktree is not written. The
/// scratch repository reads the agent's own objects (its index may name blobs only they
/// hold) as an alternate; what the harness hashes here is kept in memory.
fn scratch_tree(
    scratch: &Path,
    admin: &Path,
    objects: &Path,
    ignore: &AgentIgnore,
) -> Result<(Repository, Oid), git2::Error> {
    // Through the admin folder found before the agent ran, never through the tree's `.git`
    // entry, which the agent could have re-pointed.
    let repo = Repository::open(admin)?;
    repo.set_workdir(scratch, false)?;
    // libgit2 takes the alternate as text: a folder whose path is not UTF-8 is refused, never
    // read at a lossy spelling that names another folder.
    let objects = objects.to_str().ok_or_else(|| {
        git2::Error::from_str("the agent's object folder has a path that is not UTF-8")
    })?;
    {
        let odb = repo.odb()?;
        odb.add_disk_alternate(objects)?;
        // What hashing the scratch tree writes stays in memory: only [`take_in`] writes the
        // repo's store, and only what the proposal needs (a tree naming a blob the store
        // lacks — an agent's staged bookkeeping — would be a broken object there).
        odb.add_new_mempack_backend(1000)?;
    }
    repo.add_ignore_rule(&ignore.text())?;
    let mut index = repo.index()?;
    index.add_all(["*"].iter(), git2::IndexAddOption::DEFAULT, None)?;
    index.update_all(["*"].iter(), None)?;
    let tree = index.write_tree()?;
    drop(index);
    Ok((repo, tree))
}

/// `tree` without the files that are new since `base` and match the agent globs (an agent
/// that committed its bookkeeping does not make it part of the proposal).
fn without_bookkeeping(
    repo: &Repository,
    base: Oid,
    tree: Oid,
    ignore: &AgentIgnore,
) -> Result<Oid, git2::Error> {
    let old = repo.find_tree(base)?;
    let new = repo.find_tree(tree)?;
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), None)?;
    let mut builder = git2::build::TreeUpdateBuilder::new();
    let mut any = false;
    for delta in diff.deltas() {
        if delta.status() != git2::Delta::Added {
            continue;
        }
        if let Some(path) = delta.new_file().path_bytes() {
            if ignore.matches(path) {
                builder.remove(Path::new(std::ffi::OsStr::from_bytes(path)));
                any = true;
            }
        }
    }
    if !any {
        return Ok(tree);
    }
    builder.create_updated(repo, &new)
}

/// The key of the line an agent may end its output with to say what it used (SPEC §3.3 Cost):
/// `{"factory_usage": {"model": "claude-sonnet-4-5", "input_tokens": 1200, "output_tokens":
/// 300, "cache_read_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0, "cost_usd":
/// 0.0081}}`, every field optional. `cost_usd` is believed as the agent's bill; else the tokens
/// are priced as `model`'s; an agent that says neither is unpriced.
pub const USAGE_KEY: &str = "factory_usage";

/// The usage an agent reported on the last non-empty line of its stdout, the model it named,
/// and where that line starts (what is before it is the proposal); `None` when the last line
/// is not such a report.
pub fn reported_usage(stdout: &[u8]) -> Option<(usize, Usage, Option<String>)> {
    let end = stdout.iter().rposition(|b| !b.is_ascii_whitespace())? + 1;
    let start = stdout[..end]
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    let line: serde_json::Value = serde_json::from_slice(&stdout[start..end]).ok()?;
    let object = line.as_object().filter(|o| o.len() == 1)?;
    let u = object.get(USAGE_KEY)?.as_object()?;
    let n = |k: &str| u.get(k).and_then(serde_json::Value::as_u64);
    let usage = Usage {
        input_tokens: n("input_tokens"),
        output_tokens: n("output_tokens"),
        cache_read_tokens: n("cache_read_tokens"),
        cache_write_tokens: n("cache_write_tokens"),
        reasoning_tokens: n("reasoning_tokens"),
        server_cost_usd: super::api::reported_cost(u.get("cost_usd")),
        ..Usage::default()
    };
    let model = (u.get("model").and_then(serde_json::Value::as_str))
        .map(crate::roles::se::provider::http::one_line)
        .filter(|m| !m.is_empty());
    Some((start, usage, model))
}

/// The agent's answer with the usage its stdout's last line reported, if it did.
fn with_reported_usage(response: Response, stdout: &Path) -> Response {
    let said = std::fs::read(stdout)
        .ok()
        .and_then(|out| reported_usage(&out));
    Response {
        usage: said.as_ref().map(|s| s.1.clone()),
        served_model: said.and_then(|s| s.2),
        ..response
    }
}

impl Provider for AgentEdits {
    fn propose(&mut self, request: &Request<'_>) -> Result<Response, ProviderError> {
        let repo = git2::Repository::open(request.root)
            .map_err(|e| failed(format!("cannot open the repo: {}", e.message())))?;
        let cfg = Config::of(&repo);
        let ignore = AgentIgnore::from_config(&cfg);
        let writable = if request.sandbox {
            agent_writable(&cfg)?
        } else {
            Vec::new()
        };
        let baseline =
            git2::Oid::from_str(request.baseline).map_err(|e| failed(e.message().to_string()))?;
        let base_tree = repo
            .find_commit(baseline)
            .and_then(|c| c.tree())
            .map_err(|e| failed(e.message().to_string()))?
            .id();
        // Candidates of one race run at once: each gets its own scratch worktree.
        let name = match request.candidate {
            Some(i) => format!("agent-{}-c{i}-{}", request.run_id, request.attempt),
            None => format!("agent-{}-{}", request.run_id, request.attempt),
        };
        let mut scratch = git::pool::take(
            &repo,
            request.baseline,
            crate::roles::po::pycache::PyCache::POOLED,
        )
        .map_err(|e| failed(e.message))?;
        // Nothing the agent made, ignored or not, is left for the next holder.
        scratch.sweep_ignored();
        crate::trace::mark("  agent: scratch worktree added");
        let prompt_file = request.attempt_dir.join("agent_prompt.txt");
        std::fs::write(&prompt_file, request.prompt)
            .map_err(|e| failed(format!("cannot write the prompt file: {e}")))?;
        let prompt_path = prompt_file.display().to_string();
        let objects = PrivateObjects::make(&repo, &name)?;
        // The scratch worktree's admin folder, found before the agent runs.
        let admin = Repository::open(&scratch.path)
            .map(|r| r.path().to_path_buf())
            .map_err(|e| failed(format!("cannot open the scratch worktree: {}", e.message())))?;
        let at = (
            scratch.path.as_path(),
            objects.dir.as_path(),
            admin.as_path(),
        );
        let confined = (request.sandbox)
            .then(|| confine(&repo, &name, at, writable))
            .transpose()?;
        // Beside the scratch worktree, never inside the run record (it holds the user's own
        // global excludes).
        let exclude = git::factory_dir(&repo)
            .join("worktrees")
            .join(format!("{name}.exclude"));
        std::fs::write(&exclude, exclude_text(&repo, &ignore))
            .map_err(|e| failed(format!("cannot write the agent's exclude file: {e}")))?;
        let mut env_set: Vec<(String, String)> = vec![
            ("FACTORY_PROMPT_FILE".into(), prompt_path.clone()),
            ("FACTORY_ATTEMPT".into(), request.attempt.to_string()),
            ("FACTORY_RUN_ID".into(), request.run_id.to_string()),
            ("FACTORY_ALLOWED_FILES".into(), request.allowed.join("\n")),
        ];
        env_set.extend(exclude_env(&exclude));
        env_set.extend(objects.env(&repo));
        if let Some(c) = &confined {
            env_set.extend(c.git_dir.env(&c.seen_at));
        }
        env_set.extend(request.candidate_env());
        let spec = CommandSpec {
            argv: self.argv_for(&prompt_path, request.attempt),
            cwd: scratch.path.clone(),
            timeout: self.timeout,
            env_set,
            stdin: Some(request.prompt.as_bytes().to_vec()),
            label: "agent",
            sandbox: confined.as_ref().map(|c| c.sandbox.clone()),
            ..CommandSpec::default()
        };
        let logs = LogFiles::in_dir(request.attempt_dir, request.attempt_rel, "agent");
        let result = exec::run(&spec, &logs);
        crate::trace::mark("  agent: ran");
        let _ = std::fs::remove_file(&exclude);
        if !result.succeeded() {
            drop(scratch);
            return Err(failed(format!(
                "agent {}: {}\n{}",
                result.display(),
                result.outcome(),
                tail_chars(result.stderr_trunc.trim_end(), 1500)
            )));
        }
        // Whatever the agent did — edits, new untracked files, deletions, chmod, commits — the
        // scratch work tree now holds it; its tree against the baseline's is the proposal.
        drop(confined);
        let diff = scratch_tree(&scratch.path, &admin, &objects.dir, &ignore)
            .and_then(|(scratch_repo, tree)| {
                let tree = without_bookkeeping(&scratch_repo, base_tree, tree, &ignore)?;
                take_in(&scratch_repo, &repo, tree, Some(base_tree))?;
                Ok(tree)
            })
            .map_err(crate::error::Error::from)
            .and_then(|tree| git::diff_trees(&repo, base_tree, tree))
            .map_err(|e| failed(format!("reading the agent's changes: {}", e.message)));
        crate::trace::mark("  agent: its changes read");
        scratch.give_back().map_err(|e| failed(e.message))?;
        crate::trace::mark("  agent: scratch worktree removed");
        let diff = diff?;
        let raw = if diff.iter().all(u8::is_ascii_whitespace) {
            serde_json::json!({"unified_diff": "", "summary": "the agent changed nothing"})
                .to_string()
                .into_bytes()
        } else {
            diff
        };
        let plain = Response::plain(raw, OutputFormat::AgentText);
        let sandbox = result.sandbox.clone();
        Ok(with_reported_usage(
            Response { sandbox, ..plain },
            &logs.stdout,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_last_line_of_factory_usage_alone_reports_usage() {
        let said = reported_usage(
            b"{\"summary\": \"x\"}\n{\"factory_usage\": {\"model\": \"m\", \"input_tokens\": 5, \"cost_usd\": 0.25}}\n\n",
        );
        let (start, usage, model) = said.expect("reported");
        assert_eq!(start, 17);
        assert_eq!(usage.input_tokens, Some(5));
        assert_eq!(usage.server_cost_usd, Some(0.25));
        assert_eq!(model.as_deref(), Some("m"));
        for not in [
            &b"{\"factory_usage\": {}}\nthe proposal after it\n"[..],
            b"{\"factory_usage\": {}, \"summary\": \"two keys\"}\n",
            b"{\"factory_usage\": 3}\n",
            b"factory_usage\n",
            b"",
        ] {
            assert!(
                reported_usage(not).is_none(),
                "{}",
                String::from_utf8_lossy(not)
            );
        }
        let (_, negative, _) =
            reported_usage(b"{\"factory_usage\": {\"cost_usd\": -1}}").expect("reported");
        assert_eq!(negative.server_cost_usd, None);
    }

    fn lines(l: &[&str]) -> AgentIgnore {
        AgentIgnore {
            lines: l.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn agent_globs_read_as_gitignore_lines() {
        let d = lines(&DEFAULT_AGENT_IGNORE);
        assert!(d.matches(b".aider.chat.history.md"));
        assert!(d.matches(b".aider.tags.cache.v4/cache.db"));
        assert!(d.matches(b"sub/.aider.input.history"));
        assert!(d.matches(b".codex/state.json"));
        assert!(d.matches(b"pkg/.claude/settings.local.json"));
        assert!(
            !d.matches(b".codex"),
            "a file named .codex is not the folder"
        );
        assert!(!d.matches(b"src/aider.py"));
        assert!(!d.matches(b"hello.txt"));
        let anchored = lines(&["/build/", "docs/*.tmp", "*.log", "!keep.log"]);
        assert!(anchored.matches(b"build/x.o"));
        assert!(!anchored.matches(b"src/build/x.o"));
        assert!(anchored.matches(b"docs/a.tmp"));
        assert!(!anchored.matches(b"docs/sub/a.tmp"));
        assert!(anchored.matches(b"a/b.log"));
        assert!(!anchored.matches(b"keep.log"));
    }
}
