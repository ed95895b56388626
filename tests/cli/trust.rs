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
fn git_in(dir: &Path, home: &Path, args: &[&str], input: Option<&[u8]>, env: &[(&str, &Path)]) -> String {
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
        git_in(r.tmp.path(), &r.home, &["clone", "-q", r.root.to_str().expect("utf-8"), "mallory"], None, &[]);
        git_in(&dir, &r.home, &["config", "factory.verify", "true"], None, &[]);
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
        let run = git_in(&dir, &r.home, &["for-each-ref", "--format=%(refname)", "refs/factory/"], None, &[]);
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
                (parts[0].to_string(), name.as_bytes().to_vec(), parts[2].to_string())
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
        let summary = self.git(&["show", &format!("{}:run_summary.json", self.run)]);
        let mut s: Value = serde_json::from_str(&summary).expect("summary");
        s["run_id"] = Value::from(id);
        for a in s["attempts"].as_array_mut().expect("attempts") {
            a["tree_commit"] = Value::from(attempt);
        }
        let index = self.dir.join(format!("index-{id}"));
        let env = [("GIT_INDEX_FILE", index.as_path())];
        git_in(&self.dir, &self.home, &["read-tree", &format!("{}^{{tree}}", self.run)], None, &env);
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
                &["update-index", "--add", "--cacheinfo", &format!("100644,{blob},{path}")],
                None,
                &env,
            );
        }
        let tree = git_in(&self.dir, &self.home, &["write-tree"], None, &env);
        let message = self.git(&["log", "-1", "--format=%B", &self.run]);
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
        &["clone", "-q", "--mirror", p.dir.to_str().expect("utf-8"), "remote.git"],
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
    let cases: Vec<(&'static str, &str, &[u8], String, &'static str, &'static str)> = vec![
        ("dead00000001", "40000", b".git", dotgit.clone(), ".git", "a .git entry"),
        ("dead00000002", "40000", b".GIT", dotgit.clone(), ".GIT", "a .git entry"),
        ("dead00000003", "40000", b"..", victim.clone(), "..", "a \"..\" entry"),
        ("dead00000004", "40000", b".", victim.clone(), ".", "a \".\" entry"),
        ("dead00000005", "100644", b"../outside/x", hook.clone(), "../outside/x", "a name containing \"/\""),
        ("dead00000006", "120000", b"link", target, "link", "a symbolic link pointing outside the tree"),
        ("dead00000007", "120000", b"abs", absolute, "abs", "a symbolic link to an absolute path"),
        ("dead00000008", "160000", b"sub", p.baseline.clone(), "sub", "a submodule (gitlink) entry"),
        ("dead00000009", "40000", b".git.", dotgit, ".git.", "a .git entry"),
    ];
    let mut out = Vec::new();
    for (id, mode, name, oid, entry, why) in cases {
        let attempt = p.attempt_with((mode, name, &oid));
        p.publish(id, &attempt, &[]);
        out.push(Crafted { id, entry, why });
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
        // `run` takes its repo lock (its own file) before it looks at the provider.
        .filter(|k| !k.ends_with(".git/factory") && !k.ends_with(".git/factory/lock"))
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
            &["checkout", c.id, "--attempt", "1", dest.to_str().expect("utf-8")],
            &expected,
        );
        assert!(!dest.exists());
        refused_with_nothing_written(&r, &["reverify", c.id], &expected);
    }
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
        p.publish(id, &good_attempt, &[("attempt_1/proposed_patch.diff", diff.as_bytes())]);
    }
    // Whole-file writes are checked the same way.
    let writes = serde_json::json!([{"path": "/etc/evil", "base_sha256": null, "content": "x"}]).to_string();
    let files: [(&str, &[u8]); 2] = [
        ("attempt_1/proposed_patch.diff", b""),
        ("attempt_1/proposed_writes.json", writes.as_bytes()),
    ];
    p.publish("beef00000004", &good_attempt, &files);
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
    let json = r.factory().args(["show", &id, "--json"]).output().expect("show");
    assert!(stdout_of(&json).contains("\\u001b]52;c;cHduZWQ=\\u0007case\\r"));
}

#[test]
fn branch_names_git_refuses_are_refused() {
    let r = TestRepo::simple();
    let replay = r.replay("rp", &[("1.json", good())]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    for name in ["HEAD", "-x", "@", "a..b", "x.lock", "bad name", "a/", "refs/../x"] {
        let before = r.snapshot();
        let out = r.run_replay(&wo, &replay, &[&format!("--branch={name}")]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains(&format!("error: {name:?} is not a valid branch name\nhint: choose a name git accepts")),
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
    r.git(&["worktree", "add", "-q", "-b", "topic", other.to_str().expect("utf-8")]);
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
    let out = r.run_replay(&wo, &replay, &["--worktree", "--branch", "spare", "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.git(&["show", "spare:app.txt"]), "one\nTWO\nthree\n");
}
