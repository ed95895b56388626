//! Trust boundaries (SPEC §7): fetched run records, proposals and names are untrusted input;
//! commits the harness makes are the ones `git add` + `git commit` would make.

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

const APP: [&str; 3] = ["one", "two", "three"];

fn good() -> String {
    proposal(
        &diff_replace("app.txt", &APP, "two", "TWO"),
        "uppercase two",
    )
}

/// git in `dir`, hermetic, with optional stdin and extra environment; returns trimmed stdout.
fn git_in(
    dir: &Path,
    home: &Path,
    args: &[&str],
    input: Option<&[u8]>,
    env: &[(&str, &Path)],
) -> String {
    let mut cmd = std::process::Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", home)
        .env("GIT_AUTHOR_NAME", "Mallory")
        .env("GIT_AUTHOR_EMAIL", "m@example.invalid")
        .env("GIT_COMMITTER_NAME", "Mallory")
        .env("GIT_COMMITTER_EMAIL", "m@example.invalid")
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("git starts");
    if let Some(bytes) = input {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(bytes)
            .expect("write stdin");
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Every file under `dir` (the repo with its `.git`, the remote, the folder outside): path → bytes.
fn everything(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("readdir").flatten() {
            let meta = std::fs::symlink_metadata(e.path()).expect("meta");
            if meta.is_dir() {
                out.insert(e.path(), b"<dir>".to_vec());
                stack.push(e.path());
            } else if meta.file_type().is_symlink() {
                let t = std::fs::read_link(e.path()).expect("link");
                out.insert(e.path(), t.to_string_lossy().into_owned().into_bytes());
            } else {
                out.insert(e.path(), std::fs::read(e.path()).expect("read"));
            }
        }
    }
    out
}

/// A hostile publisher: a clone of the user's repo where a real run PASSed, whose record it
/// rewrites with plumbing, then publishes through a bare remote the user fetches from.
struct Publisher {
    dir: PathBuf,
    home: PathBuf,
    run: String,
    baseline: String,
}

impl Publisher {
    fn new(r: &TestRepo) -> Self {
        let dir = r.tmp.path().join("mallory");
        git_in(
            r.tmp.path(),
            &r.home,
            &["clone", "-q", r.root.to_str().expect("utf-8"), "mallory"],
            None,
            &[],
        );
        git_in(
            &dir,
            &r.home,
            &["config", "factory.verify", "true"],
            None,
            &[],
        );
        let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
        let replay = r.replay("publisher", &[("1.json", good())]);
        let mut cmd = assert_cmd::Command::cargo_bin("git-factory").expect("binary");
        hermetic(&mut cmd, &r.home);
        let out = cmd
            .current_dir(&dir)
            .args(["run", "-w"])
            .arg(&wo)
            .arg("--replay")
            .arg(&replay)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        let run = git_in(
            &dir,
            &r.home,
            &["for-each-ref", "--format=%(refname)", "refs/factory/"],
            None,
            &[],
        );
        let baseline = git_in(&dir, &r.home, &["rev-parse", "HEAD"], None, &[]);
        Publisher {
            dir,
            home: r.home.clone(),
            run,
            baseline,
        }
    }

    fn git(&self, args: &[&str]) -> String {
        git_in(&self.dir, &self.home, args, None, &[])
    }

    fn hash(&self, kind: &str, bytes: &[u8]) -> String {
        git_in(
            &self.dir,
            &self.home,
            &["hash-object", "-t", kind, "--literally", "-w", "--stdin"],
            Some(bytes),
            &[],
        )
    }

    /// A tree object written byte for byte, whatever names and modes git would refuse.
    fn raw_tree(&self, entries: &[(&str, &[u8], &str)]) -> String {
        let mut bytes = Vec::new();
        for (mode, name, oid) in entries {
            bytes.extend_from_slice(mode.as_bytes());
            bytes.push(b' ');
            bytes.extend_from_slice(name);
            bytes.push(0);
            for i in (0..oid.len()).step_by(2) {
                bytes.push(u8::from_str_radix(&oid[i..i + 2], 16).expect("hex"));
            }
        }
        self.hash("tree", &bytes)
    }

    /// The baseline tree's entries plus `extra`, as a new attempt commit on the baseline.
    fn attempt_with(&self, extra: (&str, &[u8], &str)) -> String {
        let listing = self.git(&["ls-tree", &format!("{}^{{tree}}", self.baseline)]);
        let mut owned: Vec<(String, Vec<u8>, String)> = listing
            .lines()
            .map(|l| {
                let (meta, name) = l.split_once('\t').expect("tab");
                let parts: Vec<&str> = meta.split(' ').collect();
                (
                    parts[0].to_string(),
                    name.as_bytes().to_vec(),
                    parts[2].to_string(),
                )
            })
            .collect();
        owned.push((extra.0.to_string(), extra.1.to_vec(), extra.2.to_string()));
        let entries: Vec<(&str, &[u8], &str)> = owned
            .iter()
            .map(|(m, n, o)| (m.as_str(), n.as_slice(), o.as_str()))
            .collect();
        let tree = self.raw_tree(&entries);
        self.git(&["commit-tree", &tree, "-p", &self.baseline, "-m", "attempt"])
    }

    /// Publishes a copy of the good run as `refs/factory/<id>` whose attempt tree is `attempt`
    /// and whose stored files are replaced by `files` (empty bytes: removed).
    fn publish(&self, id: &str, attempt: &str, files: &[(&str, &[u8])]) {
        self.publish_titled(id, attempt, files, None);
    }

    /// `publish`, with the run's title (summary and commit message) replaced.
    fn publish_titled(
        &self,
        id: &str,
        attempt: &str,
        files: &[(&str, &[u8])],
        title: Option<&str>,
    ) {
        let summary = self.git(&["show", &format!("{}:run_summary.json", self.run)]);
        let mut s: Value = serde_json::from_str(&summary).expect("summary");
        s["run_id"] = Value::from(id);
        if let Some(t) = title {
            s["work_order_title"] = Value::from(t);
            s["attempts"][0]["summary"] = Value::from(t);
        }
        for a in s["attempts"].as_array_mut().expect("attempts") {
            a["tree_commit"] = Value::from(attempt);
        }
        let index = self.dir.join(format!("index-{id}"));
        let env = [("GIT_INDEX_FILE", index.as_path())];
        git_in(
            &self.dir,
            &self.home,
            &["read-tree", &format!("{}^{{tree}}", self.run)],
            None,
            &env,
        );
        let text = serde_json::to_string_pretty(&s).expect("json");
        let mut all: Vec<(&str, &[u8])> = vec![("run_summary.json", text.as_bytes())];
        all.extend_from_slice(files);
        for (path, bytes) in all {
            if bytes.is_empty() {
                let args = ["update-index", "--force-remove", path];
                git_in(&self.dir, &self.home, &args, None, &env);
                continue;
            }
            let blob = self.hash("blob", bytes);
            git_in(
                &self.dir,
                &self.home,
                &[
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    &format!("100644,{blob},{path}"),
                ],
                None,
                &env,
            );
        }
        let tree = git_in(&self.dir, &self.home, &["write-tree"], None, &env);
        let mut message = self.git(&["log", "-1", "--format=%B", &self.run]);
        if let Some(t) = title {
            let start = message.find("title: ").expect("title line");
            let end = start + message[start..].find('\n').expect("end of line");
            message.replace_range(start..end, &format!("title: {t}"));
        }
        let commit = self.git(&["commit-tree", &tree, "-p", attempt, "-m", &message]);
        self.git(&["update-ref", &format!("refs/factory/{id}"), &commit]);
    }
}

/// The user's clone after fetching the publisher's runs through a bare remote.
fn fetched(r: &TestRepo, p: &Publisher) {
    let bare = r.tmp.path().join("remote.git");
    git_in(
        r.tmp.path(),
        &r.home,
        &[
            "clone",
            "-q",
            "--mirror",
            p.dir.to_str().expect("utf-8"),
            "remote.git",
        ],
        None,
        &[],
    );
    r.git(&["remote", "add", "origin", bare.to_str().expect("utf-8")]);
    r.git(&["fetch", "-q", "origin", "refs/factory/*:refs/factory/*"]);
}

struct Crafted {
    id: &'static str,
    /// What the refusal names: the entry's path and why.
    entry: &'static str,
    why: &'static str,
}

/// Builds one crafted run per hostile tree shape.
fn craft_trees(p: &Publisher) -> Vec<Crafted> {
    let hook = p.hash("blob", b"#!/bin/sh\nexit 1\n");
    let hooks = p.raw_tree(&[("100755", b"pre-commit", &hook)]);
    let dotgit = p.raw_tree(&[("40000", b"hooks", &hooks)]);
    let victim = p.raw_tree(&[("100644", b"victim.txt", &hook)]);
    let target = p.hash("blob", b"../../outside");
    let absolute = p.hash("blob", b"/etc");
    // (run id, mode, entry name, object, why it is refused)
    let cases: Vec<(&str, &str, &str, String, &str)> = vec![
        (
            "dead00000001",
            "40000",
            ".git",
            dotgit.clone(),
            "a .git entry",
        ),
        (
            "dead00000002",
            "40000",
            ".GIT",
            dotgit.clone(),
            "a .git entry",
        ),
        (
            "dead00000003",
            "40000",
            "..",
            victim.clone(),
            "a \"..\" entry",
        ),
        (
            "dead00000004",
            "40000",
            ".",
            victim.clone(),
            "a \".\" entry",
        ),
        (
            "dead00000005",
            "100644",
            "../outside/x",
            hook.clone(),
            "a name containing \"/\"",
        ),
        (
            "dead00000006",
            "120000",
            "link",
            target,
            "a symbolic link pointing outside the tree",
        ),
        (
            "dead00000007",
            "120000",
            "abs",
            absolute,
            "a symbolic link to an absolute path",
        ),
        (
            "dead00000008",
            "160000",
            "sub",
            p.baseline.clone(),
            "a submodule (gitlink) entry",
        ),
        ("dead00000009", "40000", ".git.", dotgit, "a .git entry"),
    ];
    let mut out = Vec::new();
    for (id, mode, name, oid, why) in cases {
        let attempt = p.attempt_with((mode, name.as_bytes(), &oid));
        p.publish(id, &attempt, &[]);
        out.push(Crafted {
            id,
            entry: name,
            why,
        });
    }
    out
}

fn refused_with_nothing_written(r: &TestRepo, args: &[&str], expected: &str) {
    let before_all = everything(r.tmp.path());
    let before = r.snapshot();
    let out = r.factory().args(args).output().expect("runs");
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(err.contains(expected), "{args:?}: {err}");
    assert!(
        err.contains("hint: the record was crafted or damaged; do not use it"),
        "{err}"
    );
    assert_eq!(r.snapshot(), before, "{args:?}");
    let after_all = everything(r.tmp.path());
    let changed: Vec<&PathBuf> = before_all
        .keys()
        .chain(after_all.keys())
        .filter(|k| before_all.get(*k) != after_all.get(*k))
        // `run` takes its repo lock, marks its status walk's clock tick and keeps the walk's
        // folder stamps for the next run (its own files) before it looks at the provider.
        .filter(|k| {
            !k.ends_with(".git/factory")
                && !k.ends_with(".git/factory/lock")
                && !k.ends_with(".git/factory/status-tick")
                && !k.ends_with(".git/factory/status-cache")
        })
        .collect();
    assert!(changed.is_empty(), "{args:?} wrote {changed:?}");
}

#[test]
fn crafted_run_trees_are_refused_by_apply_checkout_and_reverify() {
    let r = TestRepo::simple();
    let p = Publisher::new(&r);
    let crafted = craft_trees(&p);
    fetched(&r, &p);
    std::fs::write(r.outside.join("sentinel"), "keep\n").expect("write");
    for c in &crafted {
        let expected = format!(
            "error: run {} is unsafe: attempt 1's tree has {} at {:?}; nothing was written",
            c.id, c.why, c.entry
        );
        refused_with_nothing_written(&r, &["apply", c.id], &expected);
        let dest = r.outside.join(format!("co-{}", c.id));
        refused_with_nothing_written(
            &r,
            &[
                "checkout",
                c.id,
                "--attempt",
                "1",
                dest.to_str().expect("utf-8"),
            ],
            &expected,
        );
        assert!(!dest.exists());
        refused_with_nothing_written(&r, &["reverify", c.id], &expected);
    }
}

#[test]
fn crafted_record_text_cannot_drive_the_terminal() {
    let r = TestRepo::simple();
    let p = Publisher::new(&r);
    let attempt = p.git(&["rev-parse", &format!("{}^1", p.run)]);
    let hostile = "fix\u{1b}]0;owned\u{7}\u{1b}[2J\rhidden";
    p.publish_titled("abad00000001", &attempt, &[], Some(hostile));
    fetched(&r, &p);
    let log = r.factory().args(["log"]).output().expect("log");
    assert_eq!(log.status.code(), Some(0), "{}", stderr_of(&log));
    let show = r
        .factory()
        .args(["show", "abad00000001"])
        .output()
        .expect("show");
    assert_eq!(show.status.code(), Some(0), "{}", stderr_of(&show));
    let escaped = "fix\\e]0;owned\\a\\e[2J^Mhidden";
    for (what, out) in [("log", &log), ("show", &show)] {
        let text = stdout_of(out);
        assert!(text.contains(escaped), "{what}: {text}");
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\r'),
            "{what}"
        );
    }
    assert!(stdout_of(&show).contains(&format!("  summary: {escaped}\n")));
}

#[test]
fn crafted_stored_patches_are_refused_by_replay() {
    let r = TestRepo::simple();
    let p = Publisher::new(&r);
    let good_attempt = p.attempt_with(("100644", b"extra.txt", &p.hash("blob", b"x\n")));
    let cases: [(&str, &str, &str); 3] = [
        ("beef00000001", ".git/hooks/pre-commit", "a .git entry"),
        ("beef00000002", "../outside/pwned", "a \"..\" entry"),
        ("beef00000003", "a/.Git/config", "a .git entry"),
    ];
    for (id, path, _) in cases {
        let diff = format!(
            "diff --git a/{path} b/{path}\nnew file mode 100755\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+pwned\n"
        );
        p.publish(
            id,
            &good_attempt,
            &[("attempt_1/proposed_patch.diff", diff.as_bytes())],
        );
    }
    // Whole-file writes are checked the same way.
    let writes =
        serde_json::json!([{"path": "/etc/evil", "base_sha256": null, "content": "x"}]).to_string();
    let files: [(&str, &[u8]); 2] = [
        ("attempt_1/proposed_patch.diff", b""),
        ("attempt_1/proposed_writes.json", writes.as_bytes()),
    ];
    p.publish("beef00000004", &good_attempt, &files);
    let writes =
        serde_json::json!([{"path": "a\u{0}b", "base_sha256": null, "content": "x"}]).to_string();
    let files: [(&str, &[u8]); 2] = [
        ("attempt_1/proposed_patch.diff", b""),
        ("attempt_1/proposed_writes.json", writes.as_bytes()),
    ];
    p.publish("beef00000005", &good_attempt, &files);
    fetched(&r, &p);
    let wo = r.work_order(basic_order(&["true"]));
    let wo = wo.to_str().expect("utf-8");
    for (id, path, why) in cases {
        let expected = format!(
            "error: run {id} is unsafe: attempt 1's proposal has {why} at {path:?}; nothing was written"
        );
        refused_with_nothing_written(&r, &["run", "-w", wo, "--replay", id], &expected);
    }
    refused_with_nothing_written(
        &r,
        &["run", "-w", wo, "--replay", "beef00000005"],
        "error: run beef00000005 is unsafe: attempt 1's proposal has a name containing NUL at \"a^@b\"",
    );
    refused_with_nothing_written(
        &r,
        &["run", "-w", wo, "--replay", "beef00000004"],
        "error: run beef00000004 is unsafe: attempt 1's proposal has an absolute path at \"/etc/evil\"",
    );
}

#[test]
fn control_characters_in_id_or_title_are_refused() {
    let r = TestRepo::simple();
    let replay = r.replay("rp", &[("1.json", good())]);
    for (field, value, shown) in [
        ("id", "wo-1\nfactory 000000000000 PASS forged attempts=1", "\"wo-1^Jfactory 000000000000 PASS forged attempts=1\" holds a control character ('\\n')"),
        ("title", "clear \u{1b}[2J screen", "\"clear \\\\e[2J screen\" holds a control character ('\\u{1b}')"),
    ] {
        let mut order = basic_order(&["true"]);
        order[field] = Value::from(value);
        let wo = r.work_order(order);
        let before = r.snapshot();
        let out = r.run_replay(&wo, &replay, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        let err = stderr_of(&out);
        assert!(
            err.contains(&format!("error: invalid work order: {field}: {shown}; it must be one line of plain text")),
            "{err}"
        );
        assert!(!err.contains('\u{1b}'), "the refusal itself must not carry the escape");
        assert_eq!(r.snapshot(), before);
        assert!(r.run_ids().is_empty());
    }
}

#[test]
fn record_text_is_printed_with_controls_escaped() {
    let r = TestRepo::simple();
    let hostile = "up\u{1b}]52;c;cHduZWQ=\u{7}case\r\u{9b}2J";
    let p = proposal(&diff_replace("app.txt", &APP, "two", "TWO"), hostile);
    let replay = r.replay("rp", &[("1.json", p)]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r.run_replay(&wo, &replay, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let id = r.run_ids().remove(0);
    let show = r.factory().args(["show", &id]).output().expect("show");
    assert_eq!(show.status.code(), Some(0));
    let text = stdout_of(&show);
    assert!(
        text.contains("  summary: up\\e]52;c;cHduZWQ=\\acase^M\\u{9b}2J\n"),
        "{text}"
    );
    assert!(!text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\r'));
    // --json keeps the stored text, escaped as JSON escapes it.
    let json = r
        .factory()
        .args(["show", &id, "--json"])
        .output()
        .expect("show");
    assert!(stdout_of(&json).contains("\\u001b]52;c;cHduZWQ=\\u0007case\\r"));
}

#[test]
fn branch_names_git_refuses_are_refused() {
    let r = TestRepo::simple();
    let replay = r.replay("rp", &[("1.json", good())]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    for name in [
        "HEAD",
        "-x",
        "@",
        "a..b",
        "x.lock",
        "bad name",
        "a/",
        "refs/../x",
    ] {
        let before = r.snapshot();
        let out = r.run_replay(&wo, &replay, &[&format!("--branch={name}")]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains(&format!(
                "error: {name:?} is not a valid branch name\nhint: choose a name git accepts"
            )),
            "{name}: {}",
            stderr_of(&out)
        );
        assert_eq!(r.snapshot(), before);
        assert!(r.run_ids().is_empty());
        // git refuses each too, except `@`, which it reads as HEAD's other name.
        let (code, _) = r.git_code(&["check-ref-format", "--branch", name]);
        assert!(code != 0 || name == "@", "git accepts {name}, so should we");
    }
}

#[test]
fn force_never_moves_a_checked_out_branch() {
    let r = TestRepo::simple();
    let replay = r.replay("rp", &[("1.json", good())]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    // The branch the user's own tree has checked out.
    let before = r.snapshot();
    let out = r.run_replay(&wo, &replay, &["--worktree", "--branch", "main", "--force"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let root = r.root.canonicalize().expect("canonical");
    assert!(
        stderr_of(&out).contains(&format!(
            "error: branch main is checked out in {}; --force does not move a checked-out branch",
            root.display()
        )),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(r.snapshot(), before);
    // A branch another worktree has checked out.
    let other = r.tmp.path().join("other-wt");
    r.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "topic",
        other.to_str().expect("utf-8"),
    ]);
    let before = r.snapshot();
    let out = r.run_replay(&wo, &replay, &["--branch", "topic", "--force"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("error: branch topic is checked out in ")
            && stderr_of(&out).contains("other-wt"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(r.snapshot(), before);
    assert!(r.run_ids().is_empty());
    // A branch nobody has checked out moves with --force.
    r.git(&["branch", "spare"]);
    let out = r.run_replay(
        &wo,
        &replay,
        &["--worktree", "--branch", "spare", "--force"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.git(&["show", "spare:app.txt"]), "one\nTWO\nthree\n");
}

/// A `writes` proposal replacing `path`'s current bytes in `r` by `content`.
fn write_over(r: &TestRepo, path: &str, content: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let base = std::fs::read(r.root.join(path)).expect("read");
    let hex: String = Sha256::digest(&base)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    serde_json::json!({
        "writes": [{"path": path, "base_sha256": hex, "content": String::from_utf8(content.to_vec()).expect("utf-8")}],
        "summary": "rewrite"
    })
    .to_string()
}

fn order_for(path: &str, accept: &str) -> Value {
    serde_json::json!({
        "id": "wo-f",
        "title": "Change a filtered file",
        "intent": "Rewrite it.",
        "allowed_files": [path],
        "acceptance_commands": [accept],
    })
}

/// Runs `writes` over `path` with `flags`; returns the output.
fn deliver_run(r: &TestRepo, path: &str, content: &[u8], flags: &[&str]) -> std::process::Output {
    let replay = r.replay(
        &format!("rp{}", r.outside.read_dir().map(|d| d.count()).unwrap_or(0)),
        &[("1.json", write_over(r, path, content))],
    );
    let wo = r.work_order(order_for(path, "true"));
    r.run_replay(&wo, &replay, flags)
}

fn status_clean(r: &TestRepo, dir: &Path) {
    let out = git_in(
        dir,
        &r.home,
        &["status", "--porcelain", "--untracked-files=all"],
        None,
        &[],
    );
    assert_eq!(out, "", "git status is not clean in {}", dir.display());
}

/// Lets git record fresh stat data for files just checked out: an entry written in the same
/// second as the index is "racily clean", and the in-process status walk (which does not run
/// filter drivers) would then compare raw bytes with the cleaned blob.
fn settle(r: &TestRepo) {
    std::thread::sleep(std::time::Duration::from_millis(1100));
    r.git(&["update-index", "-q", "--refresh"]);
}

/// Repos whose committed bytes differ from their work-tree bytes, one per mechanism.
/// (what, repo, path, work-tree bytes to write, bytes git commits)
type Filtered = (&'static str, TestRepo, &'static str, Vec<u8>, &'static str);

fn filtered_repos() -> Vec<Filtered> {
    let mut out = Vec::new();
    // core.autocrlf: the work tree has CRLF, commits hold LF.
    let r = TestRepo::with_files(&[("app.txt", "one\ntwo\n")]);
    r.git(&["config", "core.autocrlf", "true"]);
    r.git(&["config", "factory.verify", "true"]);
    std::fs::remove_file(r.root.join("app.txt")).expect("rm");
    r.git(&["checkout", "--", "app.txt"]);
    assert_eq!(r.read("app.txt").as_deref(), Some("one\r\ntwo\r\n"));
    out.push((
        "autocrlf",
        r,
        "app.txt",
        b"one\r\nTWO\r\n".to_vec(),
        "one\nTWO\n",
    ));
    // .gitattributes eol=crlf.
    let r = TestRepo::with_files(&[
        (".gitattributes", "*.txt text eol=crlf\n"),
        ("app.txt", "one\ntwo\n"),
    ]);
    r.git(&["config", "factory.verify", "true"]);
    std::fs::remove_file(r.root.join("app.txt")).expect("rm");
    r.git(&["checkout", "--", "app.txt"]);
    assert_eq!(r.read("app.txt").as_deref(), Some("one\r\ntwo\r\n"));
    out.push((
        "eol=crlf",
        r,
        "app.txt",
        b"one\r\nTWO\r\n".to_vec(),
        "one\nTWO\n",
    ));
    // A real clean/smudge filter driver (rot13 both ways), as LFS-style filters are.
    let r = TestRepo::with_files(&[("keep.txt", "x\n")]);
    r.git(&["config", "filter.rot.clean", "tr A-Za-z N-ZA-Mn-za-m"]);
    r.git(&["config", "filter.rot.smudge", "tr A-Za-z N-ZA-Mn-za-m"]);
    r.git(&["config", "filter.rot.required", "true"]);
    r.git(&["config", "factory.verify", "true"]);
    r.write(".gitattributes", "*.dat filter=rot\n");
    r.write("data.dat", "hello\n");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "filtered"]);
    assert_eq!(r.git(&["cat-file", "blob", "HEAD:data.dat"]), "uryyb\n");
    settle(&r);
    out.push((
        "clean/smudge",
        r,
        "data.dat",
        b"hello world\n".to_vec(),
        "uryyb jbeyq\n",
    ));
    out
}

#[test]
fn commit_and_branch_hold_what_git_add_would_stage() {
    for (what, r, path, content, committed) in filtered_repos() {
        let out = deliver_run(&r, path, &content, &["--commit"]);
        assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr_of(&out));
        assert_eq!(
            r.git(&["cat-file", "blob", &format!("HEAD:{path}")]),
            committed,
            "{what}"
        );
        assert_eq!(
            std::fs::read(r.root.join(path)).expect("read"),
            content,
            "{what}"
        );
        status_clean(&r, &r.root);
        // --branch: the same bytes on the new branch, checked out, status clean.
        r.git(&["checkout", "-q", "HEAD~1"]);
        settle(&r);
        // (The same order on the same tree: --force, or the cached PASS would answer.)
        let out = deliver_run(&r, path, &content, &["--branch", "feature", "--force"]);
        assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr_of(&out));
        assert_eq!(
            r.git(&["cat-file", "blob", &format!("feature:{path}")]),
            committed,
            "{what}"
        );
        assert_eq!(
            r.git(&["symbolic-ref", "HEAD"]).trim(),
            "refs/heads/feature"
        );
        status_clean(&r, &r.root);
    }
}

#[test]
fn worktree_delivery_holds_what_git_add_would_stage() {
    for (what, r, path, content, committed) in filtered_repos() {
        let before = r.snapshot();
        let out = deliver_run(&r, path, &content, &["--worktree", "--json"]);
        assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr_of(&out));
        let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
        let branch = format!(
            "refs/heads/factory/run-{}",
            s["run_id"].as_str().expect("id")
        );
        assert_eq!(
            r.git(&["cat-file", "blob", &format!("{branch}:{path}")]),
            committed,
            "{what}"
        );
        let mut after = r.snapshot();
        after.refs.retain(|l| !l.starts_with("refs/heads/factory/"));
        assert_eq!(after, before, "{what}");
        // `apply` brings exactly the change in: git sees one changed line, and committing it
        // by hand gives the delivered bytes.
        let id = s["run_id"].as_str().expect("id");
        let out = r.factory().args(["apply", id]).output().expect("apply");
        assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr_of(&out));
        assert_eq!(
            std::fs::read(r.root.join(path)).expect("read"),
            content,
            "{what}"
        );
        assert_eq!(
            r.git(&["diff", "--numstat"]),
            format!("1\t1\t{path}\n"),
            "{what}"
        );
        r.git(&["commit", "-q", "-am", "by hand"]);
        assert_eq!(
            r.git(&["cat-file", "blob", &format!("HEAD:{path}")]),
            committed,
            "{what}"
        );
        status_clean(&r, &r.root);
        // Checked out, the delivered branch is clean and holds the proposal's bytes.
        r.git(&["checkout", "-q", branch.trim_start_matches("refs/heads/")]);
        assert_eq!(
            std::fs::read(r.root.join(path)).expect("read"),
            content,
            "{what}"
        );
        status_clean(&r, &r.root);
    }
}

fn hook(r: &TestRepo, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = r.root.join(".git/hooks").join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write hook");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[test]
fn commit_hooks_run_and_a_refusing_hook_leaves_the_change_uncommitted() {
    let r = TestRepo::simple();
    let ran = r.outside.join("pre-commit-ran");
    hook(
        &r,
        "pre-commit",
        &format!(
            "echo x >> {}\necho 'lint says no' >&2\nexit 1",
            ran.display()
        ),
    );
    let head = r.git(&["rev-parse", "HEAD"]);
    let index = std::fs::read(r.root.join(".git/index")).expect("index");
    let replay = r.replay("rp", &[("1.json", good())]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r.run_replay(&wo, &replay, &["--commit"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains(
            "error: the pre-commit hook refused the commit (exit 1): lint says no; the change passed but was not committed (it is in the work tree, uncommitted)"
        ),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(lines_in(&ran), 1);
    assert_eq!(r.git(&["rev-parse", "HEAD"]), head);
    assert_eq!(
        std::fs::read(r.root.join(".git/index")).expect("index"),
        index,
        "unstaged again"
    );
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    assert_eq!(r.git(&["status", "--porcelain"]), " M app.txt\n");
    let id = r.run_ids().remove(0);
    let show = r
        .factory()
        .args(["show", &id, "--json"])
        .output()
        .expect("show");
    let s: Value = serde_json::from_str(&stdout_of(&show)).expect("json");
    assert_eq!(s["verdict"], "PASS");
    assert_eq!(s["result_commit"], Value::Null);

    // factory.commitHooks=false: no hook runs, the commit is made.
    r.git(&["checkout", "--", "app.txt"]);
    r.git(&["config", "factory.commitHooks", "false"]);
    let out = r.run_replay(&wo, &replay, &["--commit", "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(lines_in(&ran), 1, "the hook did not run");
    assert_eq!(r.git(&["show", "HEAD:app.txt"]), "one\nTWO\nthree\n");
}

#[test]
fn commit_msg_hook_edits_or_refuses_the_message() {
    let r = TestRepo::simple();
    hook(
        &r,
        "commit-msg",
        "printf '\\nSigned-off-by: Hook <h@example.invalid>\\n' >> \"$1\"",
    );
    let replay = r.replay("rp", &[("1.json", good())]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r.run_replay(&wo, &replay, &["--branch", "signed"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let msg = r.git(&["log", "-1", "--format=%B", "signed"]);
    assert!(
        msg.trim_end()
            .ends_with("Signed-off-by: Hook <h@example.invalid>"),
        "{msg}"
    );
    assert!(msg.contains("Factory-Run: "), "{msg}");
    status_clean(&r, &r.root);

    let r = TestRepo::simple();
    hook(&r, "commit-msg", "echo 'missing ticket id' >&2; exit 3");
    let replay = r.replay("rp", &[("1.json", good())]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let before_refs = r.snapshot().refs;
    let out = r.run_replay(&wo, &replay, &["--branch", "signed"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out)
            .contains("error: the commit-msg hook refused the commit (exit 3): missing ticket id;"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(r.snapshot().refs, before_refs, "no branch was created");
    assert_eq!(r.git(&["symbolic-ref", "HEAD"]).trim(), "refs/heads/main");
}

fn summary_of(out: &std::process::Output) -> Value {
    serde_json::from_str(&stdout_of(out)).unwrap_or(Value::Null)
}

fn create(path: &str, text: &str) -> String {
    serde_json::json!({
        "writes": [{"path": path, "base_sha256": null, "content": text}],
        "summary": "create"
    })
    .to_string()
}

#[test]
fn ignored_untracked_files_are_out_of_scope() {
    let r = TestRepo::simple();
    let new_env = "diff --git a/.env b/.env\nnew file mode 100644\n--- /dev/null\n+++ b/.env\n@@ -0,0 +1 @@\n+TOKEN=x\n";
    let cases = [
        (
            "create by diff",
            ".env",
            proposal(new_env, "add env"),
            false,
        ),
        (
            "create by writes",
            "build/out.txt",
            create("build/out.txt", "x\n"),
            false,
        ),
        (
            "modify by writes",
            ".env",
            write_over_text(".env", "SECRET=1\n", "SECRET=2\n"),
            true,
        ),
    ];
    for (what, path, prop, exists) in cases {
        if exists {
            r.write(path, "SECRET=1\n");
        }
        let replay = r.replay(
            &format!("rp-{}", what.replace(' ', "-")),
            &[("1.json", prop)],
        );
        let mut order = order_for(path, "true");
        order["id"] = Value::from(format!("wo-{}", what.replace(' ', "-")));
        let wo = r.work_order(order);
        let before = r.snapshot();
        let out = r.run_replay(&wo, &replay, &["--json", "--max-attempts", "1", "--commit"]);
        assert_eq!(out.status.code(), Some(1), "{what}: {}", stderr_of(&out));
        let s = summary_of(&out);
        let brief = &s["attempts"][0]["failure_brief"];
        assert_eq!(brief["stage"], "patch_scope_violation", "{what}");
        assert!(
            brief["primary_error_excerpt"].as_str().unwrap_or("").contains(&format!(
                "scope violation: {path}: is ignored by git and not tracked (a change to it could not be recorded or committed)"
            )),
            "{what}: {brief}"
        );
        assert_eq!(r.snapshot(), before, "{what}");
    }
}

/// A writes proposal over a file whose current text is `old` (computed, not read).
fn write_over_text(path: &str, old: &str, new: &str) -> String {
    use sha2::{Digest, Sha256};
    let hex: String = Sha256::digest(old.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    serde_json::json!({
        "writes": [{"path": path, "base_sha256": hex, "content": new}],
        "summary": "rewrite"
    })
    .to_string()
}

#[test]
fn apply_does_not_overwrite_an_ignored_file() {
    let r = TestRepo::simple();
    let replay = r.replay("rp", &[("1.json", create("notes.txt", "from the run\n"))]);
    let wo = r.work_order(order_for("notes.txt", "true"));
    let out = r.run_replay(&wo, &replay, &["--worktree"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let id = r.run_ids().remove(0);
    // Since the run, the user keeps a private notes.txt that git ignores.
    std::fs::write(r.root.join(".git/info/exclude"), "notes.txt\n").expect("exclude");
    r.write("notes.txt", "mine, private\n");
    let before = r.snapshot();
    let out = r.factory().args(["apply", &id]).output().expect("apply");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains(
            "error: notes.txt is in your work tree but not tracked by git (untracked or ignored); the run would overwrite it\nhint: move it out of the way, then run git factory apply again"
        ),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(r.snapshot(), before);
    assert_eq!(r.read("notes.txt").as_deref(), Some("mine, private\n"));
}

#[test]
fn writes_inside_a_submodule_are_a_scope_violation() {
    let r = TestRepo::simple();
    let lib = r.tmp.path().join("lib");
    git_in(
        r.tmp.path(),
        &r.home,
        &["init", "-q", "-b", "main", "lib"],
        None,
        &[],
    );
    std::fs::write(lib.join("lib.txt"), "lib\n").expect("write");
    git_in(&lib, &r.home, &["add", "-A"], None, &[]);
    git_in(&lib, &r.home, &["commit", "-q", "-m", "lib"], None, &[]);
    r.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        lib.to_str().expect("utf-8"),
        "sub",
    ]);
    r.git(&["commit", "-q", "-m", "add sub"]);
    let diff = "diff --git a/sub/new.txt b/sub/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/sub/new.txt\n@@ -0,0 +1 @@\n+x\n";
    let edit = diff_replace("sub/lib.txt", &["lib"], "lib", "LIB");
    for (what, path, prop) in [
        ("new file", "sub/new.txt", proposal(diff, "add")),
        ("edit", "sub/lib.txt", proposal(&edit, "edit")),
        (
            "writes",
            "sub/lib.txt",
            write_over_text("sub/lib.txt", "lib\n", "LIB\n"),
        ),
    ] {
        let replay = r.replay(&format!("rp-{what}"), &[("1.json", prop)]);
        let mut order = order_for(path, "true");
        order["id"] = Value::from(format!("wo-{}", what.replace(' ', "-")));
        let wo = r.work_order(order);
        let before = r.snapshot();
        let sub_before = git_in(
            &r.root.join("sub"),
            &r.home,
            &["status", "--porcelain"],
            None,
            &[],
        );
        let out = r.run_replay(&wo, &replay, &["--json", "--max-attempts", "1"]);
        assert_eq!(out.status.code(), Some(1), "{what}: {}", stderr_of(&out));
        let s = summary_of(&out);
        let brief = &s["attempts"][0]["failure_brief"];
        assert_eq!(brief["stage"], "patch_scope_violation", "{what}: {s}");
        assert!(
            brief["primary_error_excerpt"].as_str().unwrap_or("").contains(&format!(
                "scope violation: {path}: lies inside the submodule sub (writes inside a submodule are refused)"
            )),
            "{what}: {brief}"
        );
        assert_eq!(r.snapshot(), before, "{what}");
        assert_eq!(
            git_in(
                &r.root.join("sub"),
                &r.home,
                &["status", "--porcelain"],
                None,
                &[]
            ),
            sub_before
        );
    }
}

#[test]
fn a_sparse_checkout_is_not_a_dirty_tree() {
    let r = TestRepo::simple();
    r.write("docs/guide.md", "guide\n");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "docs"]);
    r.git(&[
        "sparse-checkout",
        "set",
        "--no-cone",
        "/app.txt",
        "/.gitignore",
        "/other.txt",
    ]);
    assert!(!r.root.join("docs").exists());
    assert_eq!(r.git(&["status", "--porcelain"]), "");
    // A failing run leaves the sparse tree exactly as it was.
    let replay = r.replay("rp-fail", &[("1.json", good())]);
    let wo = r.work_order(basic_order(&["false"]));
    let before = r.snapshot();
    let out = r.run_replay(&wo, &replay, &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(r.snapshot(), before);
    assert!(!r.root.join("docs").exists());
    // A passing one commits only the change, and the sparse file stays out of the tree.
    let replay = r.replay("rp-pass", &[("1.json", good())]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r.run_replay(&wo, &replay, &["--commit"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.git(&["show", "HEAD:app.txt"]), "one\nTWO\nthree\n");
    assert_eq!(r.git(&["show", "HEAD:docs/guide.md"]), "guide\n");
    assert!(!r.root.join("docs").exists());
    assert_eq!(r.git(&["status", "--porcelain"]), "");
}

#[test]
fn context_files_are_never_read_through_a_symlink() {
    let r = TestRepo::simple();
    let secret_dir = r.outside.join("secrets");
    std::fs::create_dir_all(&secret_dir).expect("mkdir");
    std::fs::write(secret_dir.join("key.txt"), "TOP SECRET\n").expect("write");
    std::os::unix::fs::symlink(secret_dir.join("key.txt"), r.root.join("link.txt"))
        .expect("symlink");
    std::os::unix::fs::symlink(&secret_dir, r.root.join("dir")).expect("symlink");
    r.git(&["add", "link.txt", "dir"]);
    r.git(&["commit", "-q", "-m", "links"]);
    let replay = r.replay("rp", &[("1.json", good())]);
    for (path, why) in [
        ("link.txt", "is a symbolic link"),
        ("dir/key.txt", "goes through the symbolic link dir"),
    ] {
        for flags in [&[][..], &["--worktree"][..], &["--dry-run"][..]] {
            let wo = r.work_order(serde_json::json!({
                "id": "wo-ctx",
                "title": "Read context",
                "intent": "x",
                "allowed_files": ["app.txt", path],
                "context_files": [path],
                "acceptance_commands": ["true"],
            }));
            let before = r.snapshot();
            let out = r.run_replay(&wo, &replay, flags);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{path} {flags:?}: {}",
                stderr_of(&out)
            );
            let err = stderr_of(&out);
            assert!(
                err.contains(&format!(
                    "error: invalid work order: context_files: {path:?} {why}; context files are read only as regular files inside the work tree"
                )),
                "{path} {flags:?}: {err}"
            );
            assert!(!err.contains("TOP SECRET") && !stdout_of(&out).contains("TOP SECRET"));
            assert_eq!(r.snapshot(), before);
            assert!(r.run_ids().is_empty());
        }
    }
}

#[test]
fn duplicate_tree_entries_cannot_steer_checkout_outside_its_folder() {
    // A link `a -> .` beside a folder `a`, nested twice (`a/b -> ..`, `a/b/c -> ..`): written
    // in order, `a/b/c/victim.txt` would land two folders above the checkout's folder.
    let r = TestRepo::simple();
    let p = Publisher::new(&r);
    let victim = p.hash("blob", b"OVERWRITTEN\n");
    let dot = p.hash("blob", b".");
    let up = p.hash("blob", b"..");
    let inner = p.raw_tree(&[("100644", b"victim.txt", &victim)]);
    let c = p.raw_tree(&[("120000", b"c", &up), ("40000", b"c", &inner)]);
    let b = p.raw_tree(&[("120000", b"b", &up), ("40000", b"b", &c)]);
    let root = p.raw_tree(&[("120000", b"a", &dot), ("40000", b"a", &b)]);
    let attempt = p.git(&["commit-tree", &root, "-p", &p.baseline, "-m", "attempt"]);
    p.publish("dead000000d1", &attempt, &[]);
    // Only the folder `a` twice, no link: still two entries of one name.
    let plain = p.raw_tree(&[("40000", b"a", &inner), ("40000", b"a", &inner)]);
    let attempt2 = p.git(&["commit-tree", &plain, "-p", &p.baseline, "-m", "attempt"]);
    p.publish("dead000000d2", &attempt2, &[]);
    fetched(&r, &p);
    std::fs::create_dir_all(r.outside.join("x")).expect("mkdir");
    std::fs::write(r.outside.join("victim.txt"), "ORIGINAL\n").expect("write");
    for id in ["dead000000d1", "dead000000d2"] {
        let expected = format!(
            "error: run {id} is unsafe: attempt 1's tree has a duplicate entry (two entries of one name) at \"a\"; nothing was written"
        );
        let dest = r.outside.join("x/dir");
        let dest = dest.to_str().expect("utf-8");
        refused_with_nothing_written(&r, &["checkout", id, "--attempt", "1", dest], &expected);
        refused_with_nothing_written(&r, &["apply", id], &expected);
        refused_with_nothing_written(&r, &["reverify", id], &expected);
        assert!(!r.outside.join("x/dir").exists());
    }
    assert_eq!(
        std::fs::read_to_string(r.outside.join("victim.txt")).expect("read"),
        "ORIGINAL\n"
    );
}

#[test]
fn apply_never_writes_through_a_symlinked_folder_in_the_work_tree() {
    let r = TestRepo::simple();
    let replay = r.replay("rp", &[("1.json", create("out/x.txt", "from the run\n"))]);
    let wo = r.work_order(order_for("out/x.txt", "true"));
    let out = r.run_replay(&wo, &replay, &["--worktree"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let id = r.run_ids().remove(0);
    // The user's `out` is an untracked link to a folder elsewhere (a build output folder).
    let elsewhere = r.outside.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    std::os::unix::fs::symlink(&elsewhere, r.root.join("out")).expect("link");
    let before = r.snapshot();
    let out = r.factory().args(["apply", &id]).output().expect("apply");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains(
            "error: out/x.txt is reached through out, which is a symbolic link or not a folder in your work tree; apply never writes through one\nhint: replace it with a real folder (or move it away), then run git factory apply again; nothing was changed"
        ),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(r.snapshot(), before);
    assert_eq!(std::fs::read_dir(&elsewhere).expect("ls").count(), 0);
}

/// Appends `poison` to every string in `v` but the ones a record needs to be read at all.
fn poison_strings(v: &mut Value, poison: &str) {
    match v {
        Value::String(s) => s.push_str(poison),
        Value::Array(items) => items.iter_mut().for_each(|i| poison_strings(i, poison)),
        Value::Object(map) => {
            for (k, item) in map.iter_mut() {
                if !["run_id", "verdict", "stage"].contains(&k.as_str()) {
                    poison_strings(item, poison);
                }
            }
        }
        _ => {}
    }
}

fn assert_no_controls(what: &str, text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
        .collect();
    assert!(bad.is_empty(), "{what} printed {bad:?}:\n{text}");
}

#[test]
fn no_string_of_a_crafted_record_reaches_the_terminal_raw() {
    let r = TestRepo::simple();
    let p = Publisher::new(&r);
    let poison = "\u{1b}]0;PWNED\u{7}\u{1b}[2J\u{9b}2J\r";
    // Every string field of the summary, a contract and a baseline check included.
    let summary = p.git(&["show", &format!("{}:run_summary.json", p.run)]);
    let mut s: Value = serde_json::from_str(&summary).expect("summary");
    s["run_id"] = Value::from("abad000000c1");
    s["contract"] = serde_json::json!({
        "fail_to_pass": ["python3 tests/t.py"], "pass_to_pass": ["true"],
        "protected": [{"path": "tests/t.py", "why": "named"}]
    });
    s["baseline_check"] = serde_json::json!({
        "result": "red",
        "commands": [{"kind": "fail_to_pass", "command": ["python3", "tests/t.py"], "passed": false,
            "exit_code": 1, "outcome": "exit 1", "excerpt": "Traceback\nline", "duration_seconds": 0.1,
            "cached": false}]
    });
    s["error"] = Value::from("broke");
    poison_strings(&mut s, poison);
    let text = serde_json::to_string_pretty(&s).expect("json");
    let attempt = p.git(&["rev-parse", &format!("{}^1", p.run)]);
    p.publish(
        "abad000000c1",
        &attempt,
        &[("run_summary.json", text.as_bytes())],
    );
    // A run commit whose message forges the verdict and baseline `log` reads.
    let tree = p.git(&["rev-parse", "refs/factory/abad000000c1^{tree}"]);
    let message = format!(
        "factory abad000000c1 {poison} wo{poison} attempts=1\n\ntitle: t{poison}\nbaseline: {poison}\nstarted: 2026{poison}\nstage: x{poison}\n"
    );
    let commit = p.git(&["commit-tree", &tree, "-p", &attempt, "-m", &message]);
    p.git(&["update-ref", "refs/factory/abad000000c2", &commit]);
    fetched(&r, &p);
    for args in [
        &["show", "abad000000c1"][..],
        &["show", "abad000000c2"],
        &["log"],
        &["log", "--oneline"],
    ] {
        let out = r.factory().args(args).output().expect("runs");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr_of(&out));
        assert_no_controls(&format!("{args:?}"), &stdout_of(&out));
        assert_no_controls(&format!("{args:?} stderr"), &stderr_of(&out));
    }
    let show = stdout_of(
        &r.factory()
            .args(["show", "abad000000c1"])
            .output()
            .expect("show"),
    );
    for field in [
        "ended:",
        "apply:",
        "fail_to_pass: python3",
        "fail_to_pass: python3 tests/t.py",
        "│ line",
    ] {
        let line = show.lines().find(|l| l.contains(field)).unwrap_or("");
        assert!(
            line.contains("\\e]0;PWNED\\a\\e[2J\\u{9b}2J^M"),
            "{field}: {show}"
        );
    }
}

#[test]
fn show_log_is_byte_exact_to_a_pipe_and_escaped_to_a_terminal() {
    let r = TestRepo::simple();
    let noisy = "printf 'out\\033]0;PWNED\\007\\377\\n'; exit 1";
    let wo = r.work_order(basic_order(&[&format!("sh -c \"{noisy}\"")]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let out = r.run_replay(&wo, &replay, &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let id = r.run_ids().remove(0);
    let piped = r
        .factory()
        .args(["show", &id, "--log", "acceptance:0"])
        .output()
        .expect("show");
    assert_eq!(piped.status.code(), Some(0), "{}", stderr_of(&piped));
    assert_eq!(
        piped.stdout, b"out\x1b]0;PWNED\x07\xff\n",
        "a pipe gets the bytes"
    );
    let Some(pane) = tmux::Pane::start(&r, 200) else {
        return;
    };
    pane.type_line(&format!(
        "GIT_PAGER=cat git factory show {id} --log acceptance:0; echo END-OF-$((6*7))"
    ));
    let screen = pane.wait_for("END-OF-42");
    assert!(screen.contains("out\\e]0;PWNED\\a"), "{screen}");
}

#[test]
fn an_ignored_untracked_context_file_is_refused_at_validation() {
    let r = TestRepo::simple();
    r.write(".env", "TOKEN=secret\n");
    let replay = r.replay("rp", &[("1.json", good())]);
    let mut order = basic_order(&["grep -qx TWO app.txt"]);
    order["allowed_files"] = serde_json::json!(["app.txt", ".env"]);
    order["context_files"] = serde_json::json!(["app.txt", ".env"]);
    let wo = r.work_order(order);
    let before = r.snapshot();
    for flags in [&[][..], &["--dry-run"]] {
        let out = r.run_replay(&wo, &replay, flags);
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains(
                "error: invalid work order: context_files: \".env\" is ignored by git and not tracked; its contents would go to the provider and into the run record, which is shared\nhint: track it (git add -f) if it may be shared, or remove it from context_files"
            ),
            "{}",
            stderr_of(&out)
        );
        assert!(!stdout_of(&out).contains("TOKEN"));
    }
    assert_eq!(r.snapshot(), before);
    assert!(r.run_ids().is_empty());
    // Tracked (forced past .gitignore), it is the user's to share.
    r.git(&["add", "-f", ".env"]);
    r.git(&["commit", "-q", "-m", "env"]);
    let out = r.run_replay(&wo, &replay, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

#[test]
fn branch_names_that_read_as_other_refs_are_refused() {
    let r = TestRepo::simple();
    let replay = r.replay("rp", &[("1.json", good())]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let cases = [
        (
            "refs/heads/main",
            "it starts with \"refs/\", so git would read it as another ref",
        ),
        (
            "refs/factory/abc",
            "it starts with \"refs/\", so git would read it as another ref",
        ),
        (
            "heads/main",
            "it starts with \"heads/\", so git would read it as another ref",
        ),
        (
            "tags/v1",
            "it starts with \"tags/\", so git would read it as another ref",
        ),
        ("FETCH_HEAD", "git uses names like it for its own refs"),
        ("ORIG_HEAD", "git uses names like it for its own refs"),
        (
            "factory/run-0123456789ab",
            "factory/run-<run id> names are the run branches --worktree creates",
        ),
        (
            "factory/0123456789ab",
            "factory/run-<run id> names are the run branches --worktree creates",
        ),
    ];
    for (name, why) in cases {
        for mode in [&[][..], &["--worktree"]] {
            let before = r.snapshot();
            let mut flags = vec![format!("--branch={name}")];
            flags.extend(mode.iter().map(|s| s.to_string()));
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            let out = r.run_replay(&wo, &replay, &flags);
            assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr_of(&out));
            assert!(
                stderr_of(&out).contains(&format!(
                    "error: {name:?} cannot be a --branch name: {why}\nhint: choose a plain branch name"
                )),
                "{name}: {}",
                stderr_of(&out)
            );
            assert_eq!(r.snapshot(), before);
            assert!(r.run_ids().is_empty());
        }
    }
    assert_eq!(
        r.git(&["for-each-ref", "--format=%(refname)", "refs/heads/"]),
        "refs/heads/main\n"
    );
}

#[test]
fn a_commit_hook_that_switches_branch_does_not_choose_where_the_commit_goes() {
    let r = TestRepo::simple();
    hook(&r, "pre-commit", "git checkout -q -b sneaky");
    let head = r.git(&["rev-parse", "HEAD"]);
    let index = std::fs::read(r.root.join(".git/index")).expect("index");
    let replay = r.replay("rp", &[("1.json", good())]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r.run_replay(&wo, &replay, &["--commit"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let short = &head[..7];
    assert!(
        stderr_of(&out).contains(&format!(
            "error: a commit hook moved HEAD (from main at {short} to sneaky at {short}); HEAD was put back and nothing was committed; the change passed but was not committed (it is in the work tree, uncommitted)"
        )),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(r.git(&["symbolic-ref", "HEAD"]), "refs/heads/main\n");
    assert_eq!(r.git(&["rev-parse", "main"]), head);
    // No commit went to the hook's branch: the branch it made is undone with the rest.
    assert_eq!(
        r.git(&["for-each-ref", "--format=%(refname)", "refs/heads/"]),
        "refs/heads/main\n"
    );
    assert_eq!(
        std::fs::read(r.root.join(".git/index")).expect("index"),
        index
    );
    assert_eq!(r.git(&["status", "--porcelain"]), " M app.txt\n");
}

#[test]
fn a_sandboxed_check_cannot_read_the_verify_cache_secret() {
    if std::process::Command::new("bwrap")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(std::env::var_os("CI").is_none(), "bwrap is missing on CI");
        eprintln!("bwrap is not installed; skipping (.ci/run installs it)");
        return;
    }
    let r = TestRepo::simple();
    // `git factory verify` caches its pass, sealed with this clone's secret.
    let v = r.factory().args(["verify"]).output().expect("verify");
    assert_eq!(v.status.code(), Some(0), "{}", stderr_of(&v));
    let secret = r.root.join(".git/factory/verify-key");
    assert_eq!(std::fs::read(&secret).expect("secret").len(), 32);
    let peek = "sh -c 'test ! -s .git/factory/verify-key'";
    let wo = r.work_order(basic_order(&[peek, "grep -qx TWO app.txt"]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let out = r.run_replay(&wo, &replay, &["--sandbox", "--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // Unsandboxed, the same check sees it (the run's own user can read it).
    r.git(&["checkout", "--", "app.txt"]);
    let out = r.run_replay(&wo, &replay, &["--max-attempts", "1", "--force"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
}

#[test]
fn apply_refuses_a_name_it_cannot_write_faithfully() {
    let r = TestRepo::simple();
    let p = Publisher::new(&r);
    let blob = p.hash("blob", b"planted\n");
    let attempt = p.attempt_with(("100644", b"caf\xe9.txt", &blob));
    p.publish("beef00000001", &attempt, &[]);
    fetched(&r, &p);
    let before_all = everything(r.tmp.path());
    let before = r.snapshot();
    let out = r
        .factory()
        .args(["apply", "beef00000001"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("error: run beef00000001 changes caf\\xE9.txt, a name that is not UTF-8; apply cannot write it byte for byte, so nothing was written"),
        "{err}"
    );
    assert!(
        err.contains(
            "hint: materialise the attempt with git factory checkout beef00000001 --attempt N DIR"
        ),
        "{err}"
    );
    assert_eq!(r.snapshot(), before);
    let after_all = everything(r.tmp.path());
    let lossy = r.root.join("caf\u{fffd}.txt");
    assert!(!lossy.exists(), "written under a lossy name");
    let changed: Vec<&PathBuf> = before_all
        .keys()
        .chain(after_all.keys())
        .filter(|k| before_all.get(*k) != after_all.get(*k))
        .filter(|k| !k.ends_with(".git/factory") && !k.ends_with(".git/factory/lock"))
        .collect();
    assert!(changed.is_empty(), "apply wrote {changed:?}");
}
