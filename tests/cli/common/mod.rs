//! Shared test fixtures: hermetic real git repos in temp dirs, the real binary, snapshots.

#![allow(dead_code)]

pub mod browser;
pub mod tmux;

use assert_cmd::Command;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub struct TestRepo {
    pub tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub outside: PathBuf,
}

/// Environment every child gets: no user or system config, fixed dates, C locale, no colour,
/// no provider keys.
pub fn hermetic(cmd: &mut Command, home: &Path) {
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", home)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env("GIT_AUTHOR_DATE", "2024-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2024-01-01T00:00:00Z")
        .env("TZ", "UTC")
        .env("LC_ALL", "C")
        .env("NO_COLOR", "1")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("PYTEST_ADDOPTS")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE");
}

impl TestRepo {
    /// A repo with the given files committed (path, content).
    pub fn with_files(files: &[(&str, &str)]) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("repo");
        let home = tmp.path().join("home");
        let outside = tmp.path().join("outside");
        for d in [&root, &home, &outside] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        let repo = TestRepo {
            tmp,
            root,
            home,
            outside,
        };
        repo.git(&["init", "-q", "-b", "main"]);
        for (path, content) in files {
            repo.write(path, content);
        }
        repo.git(&["add", "-A"]);
        repo.git(&["commit", "-q", "-m", "init"]);
        repo
    }

    /// A small Python-free repo whose global verification is `true`.
    pub fn simple() -> Self {
        let r = Self::with_files(&[
            ("app.txt", "one\ntwo\nthree\n"),
            ("other.txt", "keep me\n"),
            (".gitignore", ".env\nbuild/\n"),
        ]);
        r.git(&["config", "factory.verify", "true"]);
        r
    }

    pub fn write(&self, path: &str, content: &str) {
        let full = self.root.join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(full, content).expect("write");
    }

    pub fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(path)).ok()
    }

    pub fn git(&self, args: &[&str]) -> String {
        let mut cmd = Command::new("git");
        hermetic(&mut cmd, &self.home);
        let out = cmd
            .current_dir(&self.root)
            .args(args)
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs git and returns its exit code and stdout, whatever the code.
    pub fn git_code(&self, args: &[&str]) -> (i32, String) {
        let mut cmd = Command::new("git");
        hermetic(&mut cmd, &self.home);
        let out = cmd
            .current_dir(&self.root)
            .args(args)
            .output()
            .expect("git runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    pub fn factory(&self) -> Command {
        let mut cmd = Command::cargo_bin("git-factory").expect("binary");
        hermetic(&mut cmd, &self.home);
        cmd.current_dir(&self.root);
        cmd
    }

    /// `git factory run FLAGS -w WORK_ORDER --replay REPLAY`, to completion.
    pub fn run_replay(
        &self,
        work_order: &Path,
        replay: &Path,
        flags: &[&str],
    ) -> std::process::Output {
        self.replay_command(work_order, replay, flags)
            .output()
            .expect("git factory runs")
    }

    /// `git factory run FLAGS -w WORK_ORDER --replay REPLAY`, not yet run: for callers that
    /// set its environment or folder first.
    pub fn replay_command(&self, work_order: &Path, replay: &Path, flags: &[&str]) -> Command {
        let mut cmd = self.factory();
        cmd.arg("run")
            .args(flags)
            .arg("-w")
            .arg(work_order)
            .arg("--replay")
            .arg(replay);
        cmd
    }

    /// The binary as a plain background process (hermetic like `factory()`), for runs that a
    /// test interrupts or races.
    pub fn spawn(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("git-factory"));
        cmd.current_dir(&self.root)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", &self.home)
            .env("NO_COLOR", "1")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .args(args);
        cmd
    }

    /// `git factory run FLAGS -w WORK_ORDER --replay REPLAY` started in the background (like
    /// `spawn`), its output piped, for runs a test waits on, interrupts or races.
    pub fn spawn_replay(
        &self,
        work_order: &Path,
        replay: &Path,
        flags: &[&str],
    ) -> std::process::Child {
        self.spawn(&["run"])
            .args(flags)
            .arg("-w")
            .arg(work_order)
            .arg("--replay")
            .arg(replay)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("git factory starts")
    }

    /// Writes a replay folder outside the repo: proposal N from `items[N-1]` (name, content).
    pub fn replay(&self, name: &str, items: &[(&str, String)]) -> PathBuf {
        let dir = self.outside.join(name);
        std::fs::create_dir_all(&dir).expect("mkdir");
        for (file, content) in items {
            std::fs::write(dir.join(file), content).expect("write");
        }
        dir
    }

    /// Writes a work order outside the repo and returns its path.
    pub fn work_order(&self, value: serde_json::Value) -> PathBuf {
        let path = self.outside.join(format!(
            "wo-{}.json",
            self.outside.read_dir().map(|d| d.count()).unwrap_or(0)
        ));
        std::fs::write(&path, serde_json::to_string_pretty(&value).expect("json")).expect("write");
        path
    }

    /// The in-situ journals in `.git/factory/` (each named by its run and process).
    pub fn journals(&self) -> Vec<String> {
        std::fs::read_dir(self.root.join(".git/factory"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("journal.") && n.ends_with(".json"))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn run_ids(&self) -> Vec<String> {
        self.git(&[
            "for-each-ref",
            "--format=%(refname:lstrip=2)",
            "refs/factory/",
        ])
        .lines()
        .filter(|l| !l.starts_with("journal"))
        .map(str::to_string)
        .collect()
    }

    /// Everything a failed run must leave as it was: HEAD, the index file's bytes, every ref
    /// outside git-factory's namespaces, and every file of the work tree (ignored ones too).
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot_of(&self.root)
    }

    /// The same for any worktree of this repo (its own HEAD and index, the shared refs).
    pub fn snapshot_of(&self, root: &Path) -> Snapshot {
        let git = |args: &[&str]| -> String {
            let mut cmd = Command::new("git");
            hermetic(&mut cmd, &self.home);
            let out = cmd.current_dir(root).args(args).output().expect("git runs");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let refs = git(&["for-each-ref", "--format=%(refname) %(objectname)"])
            .lines()
            .filter(|l| !l.starts_with("refs/factory/") && !l.starts_with("refs/notes/factory"))
            .map(str::to_string)
            .collect();
        let git_dir = root.join(git(&["rev-parse", "--git-dir"]).trim());
        let mut files = BTreeMap::new();
        walk(root, root, &mut files);
        Snapshot {
            head: std::fs::read_to_string(git_dir.join("HEAD")).expect("HEAD"),
            index: std::fs::read(git_dir.join("index")).unwrap_or_default(),
            refs,
            files,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub head: String,
    pub index: Vec<u8>,
    pub refs: Vec<String>,
    pub files: BTreeMap<String, (u32, Vec<u8>)>,
}

/// Every entry below `dir` with its mode and bytes (directories with their mode, links with
/// their target); names that are not UTF-8 are kept as escaped bytes, an unreadable folder
/// is recorded as such rather than ending the test.
fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, (u32, Vec<u8>)>) {
    let Ok(read) = std::fs::read_dir(dir) else {
        out.insert(format!("{}<unreadable>", dir.display()), (0, Vec::new()));
        return;
    };
    let mut entries: Vec<_> = read.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let rel = path.strip_prefix(root).expect("inside");
        let rel = String::from_utf8_lossy(
            &rel.as_os_str()
                .as_encoded_bytes()
                .escape_ascii()
                .collect::<Vec<u8>>(),
        )
        .into_owned();
        if rel == ".git" {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path).expect("meta");
        if meta.is_dir() {
            out.insert(format!("{rel}/"), (meta.permissions().mode(), Vec::new()));
            walk(root, &path, out);
        } else if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path).expect("link");
            out.insert(
                rel,
                (0o120000, target.as_os_str().as_encoded_bytes().to_vec()),
            );
        } else {
            out.insert(
                rel,
                (
                    meta.permissions().mode(),
                    std::fs::read(&path).unwrap_or_else(|_| b"<unreadable>".to_vec()),
                ),
            );
        }
    }
}

/// A git-style diff replacing line `old` by `new` in a file whose lines are `lines`.
pub fn diff_replace(path: &str, lines: &[&str], old: &str, new: &str) -> String {
    let idx = lines.iter().position(|l| *l == old).expect("line present");
    let mut body = String::new();
    for (i, l) in lines.iter().enumerate() {
        if i == idx {
            body.push_str(&format!("-{l}\n+{new}\n"));
        } else {
            body.push_str(&format!(" {l}\n"));
        }
    }
    format!(
        "diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,{n} +1,{n} @@\n{body}",
        n = lines.len()
    )
}

/// Wraps a diff as the strict JSON proposal.
pub fn proposal(diff: &str, summary: &str) -> String {
    serde_json::json!({"unified_diff": diff, "summary": summary}).to_string()
}

pub fn basic_order(accept: &[&str]) -> serde_json::Value {
    serde_json::json!({
        "id": "wo-1",
        "title": "Change app.txt",
        "intent": "Replace two with TWO.",
        "allowed_files": ["app.txt"],
        "context_files": ["app.txt"],
        "acceptance_commands": accept,
    })
}

/// How many lines a file has (0 when it does not exist): counters that commands append to.
pub fn lines_in(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Waits (up to 20 s) for a file a command creates when it has started.
pub fn wait_for(path: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !path.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(path.exists(), "{} never appeared", path.display());
}

/// Live processes whose command line contains `marker`, other than this test process.
pub fn processes_with(marker: &str) -> Vec<String> {
    live_processes(|_, cmd| cmd.contains(marker))
}

/// Live processes working inside `dir` (their current directory is there), or, when
/// `or_naming` is given, naming it in their arguments; other than this test process.
pub fn processes_in(dir: &Path, or_naming: bool) -> Vec<String> {
    let marker = dir.to_string_lossy().into_owned();
    live_processes(|pid, cmd| {
        std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(dir))
            || (or_naming && cmd.contains(&marker))
    })
}

/// Live (neither gone nor zombie) processes other than this test process that `keep(pid,
/// command line)` accepts, each as `pid: command line`.
pub fn live_processes(keep: impl Fn(u32, &str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if state.is_empty() || state.contains(") Z ") {
            continue;
        }
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if keep(pid, &cmd) {
            out.push(format!("{pid}: {cmd}"));
        }
    }
    out
}

pub fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether bubblewrap is here; off CI a test that needs it is skipped (CI installs it).
pub fn bwrap_or_skip() -> bool {
    if std::process::Command::new("bwrap")
        .arg("--version")
        .output()
        .is_ok()
    {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "bwrap is missing on CI");
    eprintln!("bwrap is not installed; skipping (.ci/run installs it)");
    false
}

/// After any run, the only worktrees of ours left are idle pooled ones (SPEC §5): under
/// `.git/factory/worktrees/`, locked with a reason naming git-factory, detached, and clean
/// (`git status --porcelain` empty). Returns how many there are.
pub fn only_idle_pooled_worktrees(r: &TestRepo) -> usize {
    let list = r.git(&["worktree", "list", "--porcelain"]);
    let main = r.root.canonicalize().expect("real path");
    let mut pooled = 0;
    for block in list.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let path = block
            .lines()
            .find_map(|l| l.strip_prefix("worktree "))
            .expect("a path");
        if Path::new(path) == main || Path::new(path) == r.root {
            continue;
        }
        assert!(
            path.contains(".git/factory/worktrees/pool-"),
            "a worktree of ours that is not pooled: {block}"
        );
        assert!(
            block
                .lines()
                .any(|l| l.starts_with("locked") && l.contains("git-factory")),
            "{block}"
        );
        assert!(block.lines().any(|l| l == "detached"), "{block}");
        let status = std::process::Command::new("git")
            .arg("-C")
            .arg(path)
            .args(["status", "--porcelain", "--untracked-files=all"])
            .output()
            .expect("git status");
        assert!(status.stdout.is_empty(), "{path} is not clean: {status:?}");
        pooled += 1;
    }
    let ours = std::fs::read_dir(r.root.join(".git/factory/worktrees"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    assert_eq!(ours.len(), pooled, "only pooled worktrees: {ours:?}");
    pooled
}

/// `program` (`"git"`, or anything else for the factory binary) made hermetic, to run in `dir`.
pub fn command_in(r: &TestRepo, dir: &Path, program: &str) -> Command {
    let mut cmd = if program == "git" {
        Command::new("git")
    } else {
        Command::cargo_bin("git-factory").expect("binary")
    };
    hermetic(&mut cmd, &r.home);
    cmd.current_dir(dir);
    cmd
}

/// `program` (as for [`command_in`]) run with `args` in `dir`.
pub fn in_dir(r: &TestRepo, dir: &Path, program: &str, args: &[&str]) -> std::process::Output {
    command_in(r, dir, program)
        .args(args)
        .output()
        .expect("runs")
}

/// A bare `origin.git` with `main` as its first branch, added as the TestRepo's remote
/// `origin`; nothing pushed yet.
pub fn bare_remote(r: &TestRepo) -> PathBuf {
    let bare = r.tmp.path().join("origin.git");
    r.git(&[
        "init",
        "-q",
        "--bare",
        "-b",
        "main",
        bare.to_str().expect("utf8"),
    ]);
    r.git(&["remote", "add", "origin", bare.to_str().expect("utf8")]);
    bare
}

/// A bare origin holding `main`, with the TestRepo as its first clone.
pub fn origin_with_main(r: &TestRepo) -> PathBuf {
    let bare = bare_remote(r);
    r.git(&["push", "-q", "origin", "main"]);
    bare
}

/// Another clone of `bare`, at `name` in the temp dir, set up to run work orders.
pub fn clone_of(r: &TestRepo, bare: &Path, name: &str) -> PathBuf {
    let dir = r.tmp.path().join(name);
    r.git(&[
        "clone",
        "-q",
        bare.to_str().expect("utf8"),
        dir.to_str().expect("utf8"),
    ]);
    let out = in_dir(r, &dir, "git", &["config", "factory.verify", "true"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    dir
}

/// A FAIL run (check `false`) of work order `wo-<name>` in the clone at `dir`, whose
/// replayed proposal turns `two` into `TWO` in the simple repo's `app.txt`; returns its run id.
pub fn a_failing_run_in(r: &TestRepo, dir: &Path, name: &str) -> String {
    a_replayed_run_in(r, dir, name, "false", &["--max-attempts", "1"], 1)
}

/// `git factory run FLAGS --json` in `dir` of work order `wo-<name>` accepted by `check`, whose
/// replayed proposal turns `two` into `TWO` in the simple repo's `app.txt`; it must exit
/// `code`. Returns its run id.
pub fn a_replayed_run_in(
    r: &TestRepo,
    dir: &Path,
    name: &str,
    check: &str,
    flags: &[&str],
    code: i32,
) -> String {
    let mut order = basic_order(&[check]);
    order["id"] = format!("wo-{name}").into();
    let wo = r.work_order(order);
    let replay = r.replay(
        &format!("rp-{name}"),
        &[(
            "1.json",
            proposal(
                &diff_replace("app.txt", &["one", "two", "three"], "two", "TWO"),
                name,
            ),
        )],
    );
    let mut args = vec!["run"];
    args.extend(flags);
    args.extend([
        "--json",
        "-w",
        wo.to_str().expect("utf8"),
        "--replay",
        replay.to_str().expect("utf8"),
    ]);
    let out = in_dir(r, dir, "factory", &args);
    assert_eq!(out.status.code(), Some(code), "{}", stderr_of(&out));
    let s: serde_json::Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    s["run_id"].as_str().expect("id").to_string()
}
