//! Isolation and delivery: worktree mode, --commit, --branch, apply, verify, the pre-push hook.

use crate::common::*;
use serde_json::Value;

const APP: [&str; 3] = ["one", "two", "three"];

fn good() -> String {
    proposal(
        &diff_replace("app.txt", &APP, "two", "TWO"),
        "uppercase two",
    )
}

fn run_with(
    r: &TestRepo,
    accept: &str,
    proposals: &[(&str, String)],
    extra: &[&str],
) -> (std::process::Output, Value) {
    let wo = r.work_order(basic_order(&[accept]));
    let replay = r.replay(
        &format!("rp{}", r.outside.read_dir().map(|d| d.count()).unwrap_or(0)),
        proposals,
    );
    let out = r
        .factory()
        .args(["run", "--json", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .args(extra)
        .output()
        .expect("runs");
    let s = serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null);
    (out, s)
}

/// No worktree is left but idle pooled ones (SPEC §5), and git records no other.
fn no_worktrees_left(r: &TestRepo) {
    let pooled = only_idle_pooled_worktrees(r);
    let admin = r.root.join(".git/worktrees");
    assert!(!admin.exists() || std::fs::read_dir(&admin).expect("dir").count() == pooled);
}

#[test]
fn worktree_run_leaves_a_dirty_user_tree_alone_and_delivers_a_branch() {
    let r = TestRepo::simple();
    r.write("app.txt", "my own edit\n");
    r.write("scratch.txt", "untracked\n");
    r.git(&["add", "scratch.txt"]);
    let before = r.snapshot();
    let (out, s) = run_with(
        &r,
        "grep -qx TWO app.txt",
        &[("1.json", good())],
        &["--worktree"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let mut after = r.snapshot();
    after.refs.retain(|r| !r.starts_with("refs/heads/factory/"));
    assert_eq!(after, before, "only the delivered branch is new");
    let id = s["run_id"].as_str().expect("id");
    assert_eq!(s["mode"], "worktree");
    let branch = format!("refs/heads/factory/run-{id}");
    assert_eq!(
        r.git(&["show", &format!("{branch}:app.txt")]),
        "one\nTWO\nthree\n"
    );
    assert_eq!(
        r.git(&["rev-parse", &format!("{branch}^")]),
        r.git(&["rev-parse", "HEAD"])
    );
    assert_eq!(
        s["result_commit"].as_str(),
        Some(r.git(&["rev-parse", &branch]).trim())
    );
    no_worktrees_left(&r);
}

/// The branch a `--worktree` PASS is committed on is the name to merge: `git merge
/// factory/<run_id>` would resolve to the record `refs/factory/<run_id>` first and merge the
/// record's artifacts, so the branch is `factory/run-<run_id>`, and the final line names it.
#[test]
fn the_run_branch_is_what_git_merge_brings_in_and_the_final_line_names_it() {
    let r = TestRepo::simple();
    let (out, s) = run_with(
        &r,
        "grep -qx TWO app.txt",
        &[("1.json", good())],
        &["--worktree"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let id = s["run_id"].as_str().expect("id");
    let branch = format!("factory/run-{id}");
    let plain = r
        .factory()
        .args(["run", "-w"])
        .arg(r.work_order(basic_order(&["grep -qx TWO app.txt"])))
        .arg("--replay")
        .arg(r.replay("again", &[("1.json", good())]))
        .args(["--worktree", "--force"])
        .output()
        .expect("runs");
    assert!(
        stderr_of(&plain).contains(&format!("on branch {branch}")),
        "{}",
        stderr_of(&plain)
    );
    r.git(&["merge", "-q", "--ff-only", &branch]);
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    let files = r.git(&["ls-files"]);
    assert_eq!(
        files, ".gitignore\napp.txt\nother.txt\n",
        "no record artifact merged"
    );
}

/// A record made before the rename, whose branch is `factory/<run_id>`: served from the cache,
/// it still says the change is on that branch, and `apply` still brings it in.
#[test]
fn a_run_branch_of_the_old_name_is_still_found() {
    let r = TestRepo::simple();
    let (out, s) = run_with(
        &r,
        "grep -qx TWO app.txt",
        &[("1.json", good())],
        &["--worktree"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let id = s["run_id"].as_str().expect("id");
    r.git(&[
        "branch",
        "-m",
        &format!("factory/run-{id}"),
        &format!("factory/{id}"),
    ]);
    let (out, _) = run_with(
        &r,
        "grep -qx TWO app.txt",
        &[("1.json", good())],
        &["--worktree"],
    );
    assert!(
        stderr_of(&out).contains(&format!("on branch factory/{id}")),
        "{}",
        stderr_of(&out)
    );
    let apply = r.factory().args(["apply", id]).output().expect("runs");
    assert_eq!(apply.status.code(), Some(0), "{}", stderr_of(&apply));
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
}

#[test]
fn worktree_fail_leaves_no_branch_and_no_worktree() {
    let r = TestRepo::simple();
    let (out, s) = run_with(
        &r,
        "false",
        &[("1.json", good())],
        &["--worktree", "--max-attempts", "1"],
    );
    assert_eq!(out.status.code(), Some(1));
    let id = s["run_id"].as_str().expect("id");
    assert!(r
        .git(&["branch", "--list", &format!("factory/run-{id}")])
        .is_empty());
    no_worktrees_left(&r);
}

#[test]
fn two_worktree_runs_at_once_both_finish() {
    let r = TestRepo::simple();
    let mut children = Vec::new();
    for (i, accept) in [
        "sh -c 'sleep 1; grep -qx TWO app.txt'",
        "sh -c 'sleep 1; grep -q TWO app.txt'",
    ]
    .iter()
    .enumerate()
    {
        let wo = r.work_order(basic_order(&[accept]));
        let replay = r.replay(&format!("c{i}"), &[("1.json", good())]);
        let child = r
            .spawn(&["run", "--worktree", "-w"])
            .arg(&wo)
            .arg("--replay")
            .arg(&replay)
            .spawn()
            .expect("starts");
        children.push(child);
    }
    for mut c in children {
        assert_eq!(c.wait().expect("ends").code(), Some(0));
    }
    assert_eq!(r.git(&["branch", "--list", "factory/*"]).lines().count(), 2);
    no_worktrees_left(&r);
}

#[test]
fn commit_makes_one_conventional_commit_with_a_trailer() {
    let r = TestRepo::simple();
    let head = r.git(&["rev-parse", "HEAD"]);
    let (out, s) = run_with(
        &r,
        "grep -qx TWO app.txt",
        &[("1.json", good())],
        &["--commit"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let id = s["run_id"].as_str().expect("id");
    assert_eq!(r.git(&["status", "--porcelain"]), "");
    assert_eq!(r.git(&["rev-parse", "HEAD^"]), head);
    let msg = r.git(&["log", "-1", "--format=%B"]);
    assert!(
        msg.starts_with("feat(app): change app.txt\n\nuppercase two\n"),
        "{msg}"
    );
    assert!(msg.contains(&format!("Factory-Run: {id}")), "{msg}");
    assert_eq!(
        r.git(&[
            "log",
            "-1",
            "--format=%(trailers:key=Factory-Run,valueonly)"
        ])
        .trim(),
        id
    );
    let note = r.git(&["notes", "--ref=factory", "show", "HEAD"]);
    assert!(note.contains(&format!("factory {id} PASS")));
}

#[test]
fn branch_in_situ_checks_out_a_new_branch_only_on_pass() {
    let r = TestRepo::simple();
    let (out, _) = run_with(
        &r,
        "false",
        &[("1.json", good())],
        &["--branch", "feature/two", "--max-attempts", "1"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(r.git(&["branch", "--list", "feature/two"]).is_empty());
    assert_eq!(r.git(&["symbolic-ref", "--short", "HEAD"]).trim(), "main");

    let (out, _) = run_with(
        &r,
        "grep -qx TWO app.txt",
        &[("1.json", good())],
        &["--branch", "feature/two"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        r.git(&["symbolic-ref", "--short", "HEAD"]).trim(),
        "feature/two"
    );
    assert_eq!(r.git(&["status", "--porcelain"]), "");
    assert_eq!(r.git(&["show", "main:app.txt"]), "one\ntwo\nthree\n");

    r.git(&["checkout", "-q", "main"]);
    let before = r.snapshot();
    let (out, _) = run_with(
        &r,
        "true",
        &[("1.json", good())],
        &["--branch", "feature/two"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("branch feature/two already exists"));
    assert_eq!(r.snapshot(), before);
}

#[test]
fn apply_brings_a_passed_run_onto_a_moved_tree_and_refuses_conflicts() {
    let r = TestRepo::simple();
    let (out, s) = run_with(
        &r,
        "grep -qx TWO app.txt",
        &[("1.json", good())],
        &["--worktree"],
    );
    assert_eq!(out.status.code(), Some(0));
    let id = s["run_id"].as_str().expect("id").to_string();
    // HEAD moves on with an unrelated change.
    r.write("other.txt", "moved on\n");
    r.git(&["commit", "-qam", "unrelated"]);
    let out = r.factory().args(["apply", &id]).output().expect("apply");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    assert_eq!(r.read("other.txt").as_deref(), Some("moved on\n"));
    r.git(&["checkout", "--", "app.txt"]);
    // HEAD changes the same line: a conflict, and nothing is written.
    r.write("app.txt", "one\nzwei\nthree\n");
    r.git(&["commit", "-qam", "conflicting"]);
    let before = r.snapshot();
    let out = r.factory().args(["apply", &id]).output().expect("apply");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("conflicts with HEAD in: app.txt"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(r.snapshot(), before);
    // A run that did not pass is refused.
    let (_, f) = run_with(
        &r,
        "false",
        &[(
            "1.json",
            proposal(
                &diff_replace("app.txt", &["one", "zwei", "three"], "zwei", "2"),
                "x",
            ),
        )],
        &["--worktree", "--max-attempts", "1"],
    );
    let out = r
        .factory()
        .args(["apply", f["run_id"].as_str().expect("id")])
        .output()
        .expect("apply");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("did not pass"));
}

/// A bare remote, the hook installed, and `git` able to find `git factory`.
fn push_setup() -> (TestRepo, std::path::PathBuf, std::path::PathBuf) {
    let r = TestRepo::simple();
    let counter = r.outside.join("verified");
    r.git(&[
        "config",
        "factory.verify",
        &format!(
            "sh -c 'echo x >> {}; grep -q ok state.txt'",
            counter.display()
        ),
    ]);
    r.write("state.txt", "ok\n");
    r.git(&["add", "state.txt"]);
    r.git(&["commit", "-qm", "state"]);
    let bare = r.tmp.path().join("remote.git");
    r.git(&[
        "init",
        "-q",
        "--bare",
        "-b",
        "main",
        bare.to_str().expect("utf8"),
    ]);
    r.git(&["remote", "add", "origin", bare.to_str().expect("utf8")]);
    (r, bare, counter)
}

fn git_with_factory(r: &TestRepo, args: &[&str]) -> std::process::Output {
    let bin = assert_cmd::cargo::cargo_bin("git-factory");
    let path = format!(
        "{}:{}",
        bin.parent().expect("dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = assert_cmd::Command::new("git");
    hermetic(&mut cmd, &r.home);
    cmd.current_dir(&r.root)
        .env("PATH", path)
        .args(args)
        .output()
        .expect("git runs")
}

#[test]
fn pre_push_blocks_failures_passes_good_pushes_and_caches_by_tree() {
    let (r, bare, counter) = push_setup();
    let out = r
        .factory()
        .args(["hook", "install"])
        .output()
        .expect("install");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // A failing tip is blocked and the remote stays empty.
    r.write("state.txt", "bad\n");
    r.git(&["commit", "-qam", "break"]);
    let out = git_with_factory(&r, &["push", "-q", "origin", "main"]);
    assert!(!out.status.success());
    assert!(
        stderr_of(&out).contains("fails verification"),
        "{}",
        stderr_of(&out)
    );
    let mut ls = assert_cmd::Command::new("git");
    hermetic(&mut ls, &r.home);
    let remote_refs = ls
        .arg("--git-dir")
        .arg(&bare)
        .args(["for-each-ref"])
        .output()
        .expect("ls");
    assert_eq!(stdout_of(&remote_refs), "");
    // Fixed: the push goes through.
    r.write("state.txt", "ok\n");
    r.git(&["commit", "-qam", "fix"]);
    let out = git_with_factory(&r, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let runs = lines_in(&counter);
    assert!(runs > 0, "the passing push ran verification");
    // The same tree again (another branch name): answered from the cache, nothing runs.
    r.git(&["checkout", "-q", "-b", "copy"]);
    r.git(&["commit", "-q", "--allow-empty", "-m", "same tree"]);
    let out = git_with_factory(&r, &["push", "-q", "origin", "copy"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(lines_in(&counter), runs);
    // --no-verify bypasses, as with any hook.
    r.write("state.txt", "bad again\n");
    r.git(&["commit", "-qam", "break again"]);
    assert!(
        git_with_factory(&r, &["push", "-q", "--no-verify", "origin", "copy"])
            .status
            .success()
    );
}

#[test]
fn pre_push_refuses_a_commit_of_a_run_that_did_not_pass() {
    let (r, _bare, _) = push_setup();
    r.factory().args(["hook", "install"]).assert().success();
    // A run that failed, then a hand-made commit claiming it.
    let (out, s) = run_with(&r, "false", &[("1.json", good())], &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let id = s["run_id"].as_str().expect("id");
    r.git(&[
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        &format!("sneak\n\nFactory-Run: {id}"),
    ]);
    let out = git_with_factory(&r, &["push", "-q", "origin", "main"]);
    assert!(!out.status.success());
    assert!(
        stderr_of(&out).contains("whose verdict is FAIL"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn hook_install_keeps_a_foreign_hook_and_uninstall_is_clean() {
    let r = TestRepo::simple();
    let hook = r.root.join(".git/hooks/pre-push");
    std::fs::create_dir_all(hook.parent().expect("dir")).expect("mkdir");
    std::fs::write(&hook, "#!/bin/sh\necho mine\n").expect("write");
    let out = r
        .factory()
        .args(["hook", "install"])
        .output()
        .expect("install");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(&hook).expect("read"),
        "#!/bin/sh\necho mine\n"
    );
    r.factory()
        .args(["hook", "install", "--force"])
        .assert()
        .success();
    assert!(std::fs::read_to_string(&hook)
        .expect("read")
        .contains("# START git-factory"));
    r.factory().args(["hook", "install"]).assert().success(); // idempotent
    assert_eq!(
        std::fs::read_to_string(&hook)
            .expect("read")
            .matches("# START git-factory")
            .count(),
        1
    );
    r.factory().args(["hook", "uninstall"]).assert().success();
    assert_eq!(
        std::fs::read_to_string(&hook).expect("read"),
        "#!/bin/sh\necho mine\n"
    );
    // core.hooksPath is honoured.
    r.git(&["config", "core.hooksPath", "myhooks"]);
    r.factory().args(["hook", "install"]).assert().success();
    assert!(r.root.join("myhooks/pre-push").is_file());
}

#[test]
fn verify_command_runs_in_a_temporary_worktree_and_caches() {
    let (r, _bare, counter) = push_setup();
    let before = r.snapshot();
    let out = r.factory().args(["verify"]).output().expect("verify");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let out = r
        .factory()
        .args(["verify", "HEAD"])
        .output()
        .expect("verify");
    assert!(stderr_of(&out).contains("cached"));
    assert_eq!(lines_in(&counter), 1);
    let out = r
        .factory()
        .args(["verify", "--no-cache"])
        .output()
        .expect("verify");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(lines_in(&counter), 2);
    let out = r
        .factory()
        .args(["verify", "HEAD~1"])
        .output()
        .expect("verify");
    assert_eq!(out.status.code(), Some(1), "HEAD~1 has no state.txt");
    assert_eq!(r.snapshot(), before);
    no_worktrees_left(&r);
}

#[test]
fn a_worktree_run_proceeds_beside_an_in_situ_run() {
    let r = TestRepo::simple();
    let marker = r.outside.join("in-situ-started");
    let slow = format!(
        "sh -c 'touch {}; sleep 2; grep -qx TWO app.txt'",
        marker.display()
    );
    let wo = r.work_order(basic_order(&[&slow]));
    let replay = r.replay("slow", &[("1.json", good())]);
    let mut in_situ = r
        .spawn(&["run", "-q", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .spawn()
        .expect("starts");
    wait_for(&marker);
    let (out, _) = run_with(
        &r,
        "grep -q TWO app.txt",
        &[("1.json", good())],
        &["--worktree"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        r.journals().len() == 1,
        "the in-situ run's journal is not the worktree run's to remove"
    );
    assert_eq!(in_situ.wait().expect("ends").code(), Some(0));
}
