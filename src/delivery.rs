//! Delivering a PASS as a commit (SPEC §5, seeds 003/004): a Conventional Commits message
//! derived from the work order, on the current branch (`--commit`), on a new branch checked
//! out (`--branch` in-situ), or on `factory/run-<run_id>` / `--branch` beside the user's work
//! (worktree mode).

use crate::error::{Error, Result};
use crate::git::restore::{Purpose, Restore};
use crate::roles::tr::apply::FileOutcome;
use crate::workorder::WorkOrder;
use git2::{Oid, Repository};
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

const TYPES: [&str; 11] = [
    "feat", "fix", "docs", "test", "refactor", "perf", "build", "ci", "chore", "style", "revert",
];

/// Where a PASS goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// In-situ default: the change stays in the work tree, uncommitted.
    Uncommitted,
    /// In-situ `--commit`: one commit on the current branch.
    CurrentBranch,
    /// In-situ `--branch NAME`: NAME created at the baseline, checked out, the change committed.
    NewBranchCheckedOut(String),
    /// Worktree mode: a branch (`factory/run-<run_id>` or `--branch`), not checked out.
    Branch(String),
}

/// `type(scope): title`, the summary, the run id and a `Factory-Run:` trailer.
pub fn message(order: &WorkOrder, summary: &str, run_id: &str) -> String {
    let title = order.title.trim();
    let (kind, title) = match title.split_once(':') {
        Some((head, rest))
            if TYPES.contains(
                &head
                    .trim()
                    .split('(')
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase()
                    .as_str(),
            ) =>
        {
            (
                head.trim()
                    .split('(')
                    .next()
                    .unwrap_or("feat")
                    .to_ascii_lowercase(),
                rest.trim(),
            )
        }
        _ => {
            let lower = format!("{} {}", title, order.intent).to_ascii_lowercase();
            let kind = if order.allowed_files.iter().all(|f| f.contains("test")) {
                "test"
            } else if order
                .allowed_files
                .iter()
                .all(|f| f.ends_with(".md") || f.starts_with("docs/"))
            {
                "docs"
            } else if ["fix", "bug", "broken", "crash", "error", "typo", "wrong"]
                .iter()
                .any(|w| lower.contains(w))
            {
                "fix"
            } else {
                "feat"
            };
            (kind.to_string(), title)
        }
    };
    let scope = scope_of(&order.allowed_files);
    let mut subject_title = title.to_string();
    if let Some(first) = subject_title.get(..1) {
        if first.chars().all(|c| c.is_ascii_uppercase())
            && !subject_title
                .get(1..2)
                .is_some_and(|c| c.chars().all(|c| c.is_ascii_uppercase()))
        {
            subject_title = format!("{}{}", first.to_ascii_lowercase(), &subject_title[1..]);
        }
    }
    let subject = match scope {
        Some(s) => format!("{kind}({s}): {subject_title}"),
        None => format!("{kind}: {subject_title}"),
    };
    let mut body = String::new();
    if !summary.trim().is_empty() {
        body.push_str(summary.trim());
        body.push_str("\n\n");
    }
    body.push_str(&format!(
        "Work order {} passed verification and acceptance in git factory run {run_id}.\n\nFactory-Run: {run_id}\n",
        order.id
    ));
    format!("{subject}\n\n{body}")
}

/// The shared top folder of the allowed files, or the single file's stem.
fn scope_of(files: &[String]) -> Option<String> {
    if let [only] = files {
        let name = only.rsplit('/').next().unwrap_or(only);
        return Some(name.split('.').next().unwrap_or(name).to_string()).filter(|s| !s.is_empty());
    }
    let first: Vec<&str> = files
        .iter()
        .filter_map(|f| f.split_once('/').map(|(d, _)| d))
        .collect();
    if first.len() == files.len() && first.windows(2).all(|w| w[0] == w[1]) {
        return first.first().map(|s| s.to_string());
    }
    None
}

/// Refuses a `--branch` name that would be read as another ref: `refs/…` (it would make
/// `refs/heads/refs/heads/main`, or shadow `refs/factory`), `heads/…`, `tags/…`, `remotes/…`
/// (git resolves those to the other namespace first), git's own `*_HEAD` names
/// (`FETCH_HEAD`, `ORIG_HEAD`) and `factory/run-<run id>` (the run branches `--worktree` makes,
/// which another run owns; also `factory/<run id>`, as they were once named); then everything [`check_branch`] refuses.
pub fn check_requested_branch(repo: &Repository, name: &str, force: bool) -> Result<()> {
    if !git2::Reference::is_valid_name(&format!("refs/heads/{name}")) {
        return check_branch(repo, name, force); // refused there as git refuses it
    }
    let shadows = ["refs/", "heads/", "tags/", "remotes/"]
        .iter()
        .find(|p| name.starts_with(*p));
    let git_own = name.ends_with("_HEAD")
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit());
    let run_branch = crate::store::run_id_of_branch(name).is_some();
    let why = if let Some(prefix) = shadows {
        Some(format!(
            "it starts with {prefix:?}, so git would read it as another ref"
        ))
    } else if git_own {
        Some("git uses names like it for its own refs".to_string())
    } else if run_branch {
        Some("factory/run-<run id> names are the run branches --worktree creates".to_string())
    } else {
        None
    };
    if let Some(why) = why {
        return Err(Error::new(format!(
            "{:?} cannot be a --branch name: {why}",
            crate::ui::escape_line(name)
        ))
        .hint("choose a plain branch name, e.g. --branch fix/parser"));
    }
    check_branch(repo, name, force)
}

/// Refuses a branch name `git check-ref-format --branch` would refuse (also `HEAD`, `@` and a
/// leading `-`, which git's commands would read as something else), an existing branch without
/// `--force`, and — even with `--force` — a branch checked out in any worktree of the repo.
pub fn check_branch(repo: &Repository, name: &str, force: bool) -> Result<()> {
    let full = format!("refs/heads/{name}");
    if name == "HEAD"
        || name == "@"
        || name.starts_with('-')
        || !git2::Reference::is_valid_name(&full)
    {
        return Err(Error::new(format!(
            "{:?} is not a valid branch name",
            crate::ui::escape_line(name)
        ))
        .hint("choose a name git accepts, e.g. factory/fix-parser"));
    }
    if repo.find_reference(&full).is_ok() {
        if !force {
            return Err(Error::new(format!("branch {name} already exists"))
                .hint("choose another name with --branch, or pass --force to move it"));
        }
        if let Some(worktree) = checked_out_in(repo, &full) {
            return Err(Error::new(format!(
                "branch {name} is checked out in {}; --force does not move a checked-out branch",
                worktree.display()
            ))
            .hint("choose another name with --branch, or switch that worktree to another branch"));
        }
    }
    Ok(())
}

/// The work tree (main or linked) whose HEAD is on `full_ref`, if any.
fn checked_out_in(repo: &Repository, full_ref: &str) -> Option<std::path::PathBuf> {
    let common = repo.commondir();
    let on_it = |git_dir: &Path| {
        std::fs::read_to_string(git_dir.join("HEAD"))
            .is_ok_and(|h| h.trim_end().strip_prefix("ref: ") == Some(full_ref))
    };
    if on_it(common) {
        let main = common.parent().unwrap_or(common);
        return Some(main.to_path_buf());
    }
    let names = repo.worktrees().ok()?;
    for name in names.iter().flatten() {
        if on_it(&common.join("worktrees").join(name)) {
            let path = repo
                .find_worktree(name)
                .map(|w| w.path().to_path_buf())
                .unwrap_or_else(|_| common.join("worktrees").join(name));
            return Some(path);
        }
    }
    None
}

/// What a delivery made: its commit, or why a commit hook refused it.
#[derive(Debug, Default)]
pub struct Delivered {
    pub commit: Option<Oid>,
    /// A pre-commit or commit-msg hook refused: nothing was committed, the index is as before,
    /// and this says which hook and what it printed.
    pub refused: Option<String>,
}

/// `git -C ROOT …` with nothing inherited that could point it at another repo or index,
/// nor a literal-pathspec mode that would change what its pathspecs name.
fn git_at(root: &Path) -> Command {
    let mut cmd = crate::git::pool::in_tree(root);
    cmd.env_remove("GIT_LITERAL_PATHSPECS");
    cmd
}

fn run_git(mut cmd: Command, input: Option<&[u8]>, what: &str) -> Result<std::process::Output> {
    let spawned = cmd
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = spawned.map_err(|e| {
        Error::new(format!("{what}: cannot run git: {e}"))
            .hint("install git and make sure it is on PATH")
    })?;
    if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
        // A git that refused early closes its input: what it said is the error, not the
        // broken pipe (`git_ok` names it from its status and stderr).
        let _ = stdin.write_all(bytes);
    }
    Ok(child.wait_with_output()?)
}

fn git_ok(cmd: Command, input: Option<&[u8]>, what: &str) -> Result<Vec<u8>> {
    let out = run_git(cmd, input, what)?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        return Err(Error::new(format!(
            "{what}: {}",
            crate::git::worktree::failure_text(&out.status, said.trim())
        )));
    }
    Ok(out.stdout)
}

/// Stages the changed paths as `git add -A -- PATHS` would, by running git itself: libgit2
/// applies `core.autocrlf` and `.gitattributes` `text`/`eol`, but not external filter drivers
/// (`filter.<name>.clean`, LFS), so only git stages the bytes git would commit and leaves
/// `git status` clean. git takes `index.lock` itself; every other entry keeps its stat data.
pub fn stage_outcomes(repo: &Repository, outcomes: &[FileOutcome]) -> Result<()> {
    if outcomes.is_empty() {
        return Ok(());
    }
    let root = crate::git::workdir(repo)?;
    if !crate::git::pool::vouched_for(&root) {
        return Err(Error::new(
            "staging the change: a command changed this worktree's own git files (its .git file, gitdir, commondir or config.worktree — e.g. git config --worktree or git sparse-checkout in a check): the change is not committed through git files the harness cannot vouch for",
        )
        .hint("run again (the pool replaces that worktree), and keep the checks from configuring the worktree they run in"));
    }
    let mut list = Vec::new();
    for o in outcomes {
        list.extend_from_slice(o.path.as_bytes());
        list.push(0);
    }
    let mut cmd = git_at(&root);
    // `--force`: the paths are exactly the change's, which its scope allowed; a tracked file
    // under a folder the user's excludes ignore (`vendor/`, `gen/`) is still the change's.
    cmd.args([
        "--literal-pathspecs",
        "add",
        "-A",
        "--force",
        "--pathspec-from-file=-",
        "--pathspec-file-nul",
    ]);
    git_ok(cmd, Some(&list), "staging the change").map(|_| ())
}

/// The tree of the index as it now is (`git write-tree`: git reads every index format the
/// user's git writes, sparse ones included).
fn index_tree(root: &Path) -> Result<Oid> {
    let mut cmd = git_at(root);
    cmd.arg("write-tree");
    let out = git_ok(cmd, None, "writing the staged tree")?;
    Ok(Oid::from_str(String::from_utf8_lossy(&out).trim())?)
}

/// Runs pre-commit, then commit-msg (which may edit the message), as `git commit` does, unless
/// `factory.commitHooks` is false. `Ok(Err(why))` when a hook refused.
fn commit_hooks(repo: &Repository, root: &Path, message: &str) -> Result<Result<String, String>> {
    let cfg = crate::config::Config::of(repo);
    if !cfg.flag(crate::config::COMMIT_HOOKS, true) {
        return Ok(Ok(message.to_string()));
    }
    let refused = |hook: &str, out: &std::process::Output| {
        let mut text = String::from_utf8_lossy(&out.stderr).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stdout));
        let excerpt: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(5)
            .collect();
        let code = out
            .status
            .code()
            .map_or_else(|| "killed".to_string(), |c| format!("exit {c}"));
        let mut why = format!("the {hook} hook refused the commit ({code})");
        if !excerpt.is_empty() {
            why.push_str(": ");
            why.push_str(&excerpt.join(" / "));
        }
        why
    };
    let mut pre = git_at(root);
    pre.args(["hook", "run", "--ignore-missing", "pre-commit"]);
    let out = run_git(pre, None, "running the pre-commit hook")?;
    if String::from_utf8_lossy(&out.stderr).contains("'hook' is not a git command") {
        return Err(
            Error::new("running commit hooks needs git 2.36 or newer (git hook run)")
                .hint("upgrade git, or skip the hooks with git config factory.commitHooks false"),
        );
    }
    if !out.status.success() {
        return Ok(Err(refused("pre-commit", &out)));
    }
    let dir = crate::git::factory_dir(repo);
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(format!("COMMIT_EDITMSG.{}", std::process::id()));
    std::fs::write(&file, message)?;
    let mut msg = git_at(root);
    msg.args(["hook", "run", "--ignore-missing", "commit-msg", "--"])
        .arg(&file);
    let out = run_git(msg, None, "running the commit-msg hook");
    let edited = std::fs::read(&file);
    let _ = std::fs::remove_file(&file);
    let out = out?;
    if !out.status.success() {
        return Ok(Err(refused("commit-msg", &out)));
    }
    match String::from_utf8(edited?) {
        Ok(text) if !text.trim().is_empty() => Ok(Ok(text)),
        Ok(_) => Ok(Err("the commit-msg hook left an empty message".to_string())),
        Err(_) => Ok(Err(
            "the commit-msg hook wrote a message that is not UTF-8".to_string()
        )),
    }
}

/// Where HEAD was before the commit hooks ran: the branch it is on (or none) and its commit.
struct HeadState {
    branch: Option<String>,
    commit: Option<Oid>,
}

impl HeadState {
    fn of(repo: &Repository) -> Self {
        let head = repo.find_reference("HEAD").ok();
        HeadState {
            branch: head
                .as_ref()
                .and_then(|h| h.symbolic_target().map(str::to_string)),
            commit: repo.refname_to_id("HEAD").ok(),
        }
    }

    /// Why the hooks' run left HEAD elsewhere, if it did (only asked when they ran).
    fn moved_in<T>(&self, repo: &Repository, hooks: &Result<T>) -> Option<String> {
        if hooks.is_err() {
            return None;
        }
        let now = HeadState::of(repo);
        let shown = |s: &HeadState| match (&s.branch, s.commit) {
            (Some(b), Some(c)) => format!(
                "{} at {}",
                b.trim_start_matches("refs/heads/"),
                crate::git::short(&c.to_string())
            ),
            (Some(b), None) => b.trim_start_matches("refs/heads/").to_string(),
            (None, Some(c)) => format!("a detached HEAD at {}", crate::git::short(&c.to_string())),
            (None, None) => "nothing".to_string(),
        };
        (now.branch != self.branch || now.commit != self.commit).then(|| {
            format!(
                "a commit hook moved HEAD (from {} to {}); HEAD was put back and nothing was committed",
                shown(self),
                shown(&now)
            )
        })
    }

    /// Puts HEAD back on its branch, and the branch back on its commit.
    fn put_back(&self, repo: &Repository) -> Result<()> {
        if let (Some(branch), Some(commit)) = (&self.branch, self.commit) {
            repo.reference(
                branch,
                commit,
                true,
                "git factory: undo a commit hook's move",
            )?;
        }
        match (&self.branch, self.commit) {
            (Some(branch), _) => repo.set_head(branch)?,
            (None, Some(commit)) => repo.set_head_detached(commit)?,
            (None, None) => {}
        }
        Ok(())
    }
}

/// The index file's bytes, to put back if a hook refuses the commit.
struct SavedIndex {
    path: std::path::PathBuf,
    bytes: Option<Vec<u8>>,
}

impl SavedIndex {
    fn of(repo: &Repository) -> Self {
        let path = repo.path().join("index");
        let bytes = std::fs::read(&path).ok();
        SavedIndex { path, bytes }
    }

    /// Writes the saved bytes back through `index.lock` and a rename, as git does (the one
    /// locked write the restore module uses too).
    fn put_back(&self) -> Result<()> {
        let Some(bytes) = &self.bytes else {
            let _ = std::fs::remove_file(&self.path);
            return Ok(());
        };
        crate::git::restore::replace_locked(&self.path, bytes).map_err(|e| {
            Error::new(format!("cannot unstage the change: {e}"))
                .hint("run git reset once the other git command is done")
        })?;
        Ok(())
    }
}

/// A hook that moved HEAD is undone through the one restore: refs and the index as captured,
/// the work tree back to baseline + change (the files a checkout brought in put back or
/// removed). What it put back, and anything it could not, is named.
fn undo_hook(
    repo: &Repository,
    restore: &Restore,
    outcomes: &[FileOutcome],
    why: String,
) -> Result<String> {
    let images = restore.change_images(repo, outcomes)?;
    let report = restore.apply_with(repo, &images, Purpose::Delivery)?;
    let changed: Vec<&str> = (report.paths.iter())
        .filter(|p| !outcomes.iter().any(|o| o.path == **p))
        .map(String::as_str)
        .collect();
    let mut why = why;
    if !changed.is_empty() {
        let more = if changed.len() > 10 { ", …" } else { "" };
        let shown: Vec<&str> = changed.iter().take(10).copied().collect();
        why.push_str(&format!(
            "; the files it changed were put back too: {}{more}",
            shown.join(", ")
        ));
    }
    if let Some(e) = report.error("undoing the hook") {
        why.push_str(&format!("; {}: {}", e.message, e.details.join("; ")));
    }
    Ok(why)
}

/// Makes the delivery's commit as `git add` + `git commit` would: the change staged through
/// git (filters, autocrlf, attributes), the hooks run, the commit's tree read from the index.
/// A refusing hook leaves nothing committed and the index as it was. A hook that moved HEAD
/// (checked out another branch or commit) is undone entirely through `undo`, the restore
/// captured before the change (SPEC §7): refs, the index, and every work-tree file the
/// checkout changed, the change itself left in the tree uncommitted.
pub fn deliver(
    repo: &Repository,
    delivery: &Delivery,
    baseline: &git2::Commit<'_>,
    message: &str,
    outcomes: &[FileOutcome],
    undo: Option<&Restore>,
) -> Result<Delivered> {
    if *delivery == Delivery::Uncommitted {
        return Ok(Delivered::default());
    }
    let root = crate::git::workdir(repo)?;
    let saved = SavedIndex::of(repo);
    let head_before = HeadState::of(repo);
    stage_outcomes(repo, outcomes)?;
    let hooks = commit_hooks(repo, &root, message);
    // A hook is the user's code, but it must not choose where the commit goes: one that
    // switched branch (or moved it) would have the change land elsewhere.
    if let Some(why) = head_before.moved_in(repo, &hooks) {
        let why = match undo {
            Some(restore) => undo_hook(repo, restore, outcomes, why)?,
            None => {
                head_before.put_back(repo)?;
                saved.put_back()?;
                why
            }
        };
        return Ok(Delivered {
            commit: None,
            refused: Some(why),
        });
    }
    let message = match hooks {
        Ok(Ok(m)) => m,
        Ok(Err(why)) => {
            saved.put_back()?;
            return Ok(Delivered {
                commit: None,
                refused: Some(why),
            });
        }
        Err(e) => {
            saved.put_back()?;
            return Err(e);
        }
    };
    let tree = repo.find_tree(index_tree(&root)?)?;
    let sig = crate::store::signature(repo)?;
    let commit = match delivery {
        Delivery::Uncommitted => return Ok(Delivered::default()),
        Delivery::CurrentBranch => {
            let c = repo.commit(Some("HEAD"), &sig, &sig, &message, &tree, &[baseline])?;
            crate::crash::point("during_delivery");
            c
        }
        Delivery::NewBranchCheckedOut(name) => {
            let c = repo.commit(None, &sig, &sig, &message, &tree, &[baseline])?;
            let full = format!("refs/heads/{name}");
            repo.reference(&full, c, true, "git factory: deliver a passing run")?;
            repo.set_head(&full)?;
            crate::crash::point("during_delivery");
            c
        }
        Delivery::Branch(name) => {
            let c = repo.commit(None, &sig, &sig, &message, &tree, &[baseline])?;
            repo.reference(
                &format!("refs/heads/{name}"),
                c,
                true,
                "git factory: deliver a passing run",
            )?;
            c
        }
    };
    Ok(Delivered {
        commit: Some(commit),
        refused: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(title: &str, files: &[&str]) -> WorkOrder {
        WorkOrder {
            id: "wo-7".into(),
            title: title.into(),
            intent: "make it so".into(),
            allowed_files: files.iter().map(|s| s.to_string()).collect(),
            forbidden: vec![],
            acceptance_commands: vec!["true".into()],
            context_files: vec![],
            notes: None,
            fail_to_pass: vec![],
            pass_to_pass: vec![],
            fail_to_pass_tests: vec![],
            pass_to_pass_tests: vec![],
            tests_may_change: false,
        }
    }

    #[test]
    fn conventional_subject_body_and_trailer() {
        let m = message(
            &order(
                "Fix the parser on empty input",
                &["src/parse.py", "src/util.py"],
            ),
            "return [] early",
            "abc123abc123",
        );
        assert!(
            m.starts_with("fix(src): fix the parser on empty input\n\nreturn [] early\n\n"),
            "{m}"
        );
        assert!(m.ends_with("Factory-Run: abc123abc123\n"));
        let m = message(&order("docs: explain the flags", &["README.md"]), "", "x");
        assert!(m.starts_with("docs(README): explain the flags\n"), "{m}");
        let m = message(&order("Add a --json flag", &["a.rs", "b/c.rs"]), "", "x");
        assert!(m.starts_with("feat: add a --json flag\n"), "{m}");
    }
}
