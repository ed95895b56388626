//! Refusals that change nothing: work-order validation, preflight, scope rules, the lock.

use crate::common::*;
use serde_json::{json, Value};

const APP: [&str; 3] = ["one", "two", "three"];

fn good() -> String {
    proposal(
        &diff_replace("app.txt", &APP, "two", "TWO"),
        "uppercase two",
    )
}

/// Runs with the given work order and replay proposals; asserts exit 2, an unchanged repo,
/// no run record, and returns stderr.
fn refused(r: &TestRepo, order: Value, extra: &[&str]) -> String {
    let wo = r.work_order(order);
    let replay = r.replay("rp-refused", &[("1.json", good())]);
    let before = r.snapshot();
    let out = r.run_replay(&wo, &replay, extra);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(r.snapshot(), before, "a refusal changed the repo");
    assert!(r.run_ids().is_empty(), "a refusal wrote a record");
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("hint: "), "{err}");
    err
}

#[test]
fn each_work_order_rule_is_refused_naming_field_and_value() {
    let r = TestRepo::simple();
    let base = basic_order(&["true"]);
    let cases: Vec<(&str, Value, &str)> = vec![
        ("allowed_file", json!(["app.txt"]), "allowed_file"),
        ("allowed_files", json!(["/etc/passwd"]), "/etc/passwd"),
        ("allowed_files", json!(["C:/x.txt"]), "C:/x.txt"),
        ("allowed_files", json!(["../x.txt"]), "../x.txt"),
        ("allowed_files", json!([".git/config"]), ".git/config"),
        ("acceptance_commands", json!([]), "acceptance_commands"),
        (
            "acceptance_commands",
            json!(["echo 'unbalanced"]),
            "unbalanced",
        ),
        ("context_files", json!(["other.txt"]), "other.txt"),
        ("title", json!(null), "title"),
    ];
    for (field, value, needle) in cases {
        let mut order = base.clone();
        if value.is_null() {
            order.as_object_mut().expect("object").remove(field);
        } else {
            order[field] = value;
        }
        let err = refused(&r, order, &[]);
        assert!(err.contains(needle), "{field}: {err}");
        assert!(err.contains("invalid work order"), "{err}");
    }
    let mut many = base.clone();
    let files: Vec<String> = (0..11).map(|i| format!("f{i}")).collect();
    many["allowed_files"] = json!(files);
    many["context_files"] = json!(files);
    assert!(refused(&r, many, &[]).contains("at most 10"));
}

#[test]
fn dirty_trees_are_refused_listing_paths() {
    let r = TestRepo::simple();
    r.write("app.txt", "changed\n");
    r.write("notes.txt", "new\n");
    let err = refused(&r, basic_order(&["true"]), &[]);
    assert!(err.contains("uncommitted changes"), "{err}");
    assert!(err.contains("modified: app.txt"), "{err}");
    assert!(err.contains("untracked: notes.txt"), "{err}");
}

#[test]
fn staged_changes_are_refused() {
    let r = TestRepo::simple();
    r.write("other.txt", "staged\n");
    r.git(&["add", "other.txt"]);
    let err = refused(&r, basic_order(&["true"]), &[]);
    assert!(err.contains("staged: other.txt"), "{err}");
}

#[test]
fn not_a_repo_unborn_head_and_merges_are_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["true"]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let out = r
        .factory()
        .args(["run", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .arg("--repo")
        .arg(tmp.path())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("not inside a git repository"));

    let unborn = tmp.path().join("unborn");
    std::fs::create_dir(&unborn).expect("mkdir");
    let mut git = assert_cmd::Command::new("git");
    hermetic(&mut git, &r.home);
    git.current_dir(&unborn)
        .args(["init", "-q"])
        .assert()
        .success();
    let out = r
        .factory()
        .args(["run", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .arg("--repo")
        .arg(&unborn)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_of(&out).contains("HEAD has no commit yet"),
        "{}",
        stderr_of(&out)
    );

    let head = r.git(&["rev-parse", "HEAD"]);
    std::fs::write(r.root.join(".git/MERGE_HEAD"), head).expect("write");
    let err = refused(&r, basic_order(&["true"]), &[]);
    assert!(err.contains("a merge is in progress"), "{err}");
}

#[test]
fn out_inside_the_work_tree_is_refused() {
    let r = TestRepo::simple();
    let err = refused(&r, basic_order(&["true"]), &["--out", "artifacts/here"]);
    assert!(err.contains("inside the work tree"), "{err}");
}

#[test]
fn missing_provider_and_key_are_refused() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["true"]));
    let out = r
        .factory()
        .args(["run", "-w"])
        .arg(&wo)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("no SE provider"));
    let out = r
        .factory()
        .args(["run", "--llm-model", "gpt-4o", "-w"])
        .arg(&wo)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("OPENAI_API_KEY is not set"));
    assert!(r.run_ids().is_empty());
}

/// Each proposal must be refused as a scope violation with no file created anywhere.
#[test]
fn scope_violations_create_no_file_anywhere() {
    let cases: Vec<(&str, String)> = vec![
        ("outside file", diff_replace("other.txt", &["keep me"], "keep me", "changed")),
        ("deleting a non-allowed file", "--- a/other.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-keep me\n".to_string()),
        ("rename target outside", "diff --git a/app.txt b/moved.txt\nsimilarity index 100%\nrename from app.txt\nrename to moved.txt\n".to_string()),
        (".git path", "--- /dev/null\n+++ b/.git/hooks/pre-commit\n@@ -0,0 +1 @@\n+evil\n".to_string()),
        ("../ path", "--- /dev/null\n+++ b/../escaped.txt\n@@ -0,0 +1 @@\n+evil\n".to_string()),
        ("absolute path", "--- /dev/null\n+++ /tmp/escaped-by-factory.txt\n@@ -0,0 +1 @@\n+evil\n".to_string()),
        ("symlink creation", "diff --git a/app.txt b/app.txt\ndeleted file mode 100644\n--- a/app.txt\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-one\n-two\n-three\ndiff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n".to_string()),
        ("headers disagree", "diff --git a/app.txt b/app.txt\n--- a/app.txt\n+++ b/other.txt\n@@ -1 +1 @@\n-one\n+ONE\n".to_string()),
    ];
    for (name, diff) in cases {
        let r = TestRepo::simple();
        let mut order = basic_order(&["true"]);
        order["allowed_files"] = json!(["app.txt", "link"]);
        order["context_files"] = json!([]);
        let wo = r.work_order(order);
        let replay = r.replay("rp", &[("1.json", proposal(&diff, name))]);
        let before = r.snapshot();
        let outside_before: Vec<_> = std::fs::read_dir(r.tmp.path())
            .expect("dir")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        let out = r.run_replay(&wo, &replay, &["--json", "--max-attempts", "1"]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr_of(&out));
        let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
        assert_eq!(
            s["attempts"][0]["failure_brief"]["stage"], "patch_scope_violation",
            "{name}: {s}"
        );
        assert_eq!(r.snapshot(), before, "{name}");
        let outside_after: Vec<_> = std::fs::read_dir(r.tmp.path())
            .expect("dir")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(outside_before, outside_after, "{name}");
        assert!(!std::path::Path::new("/tmp/escaped-by-factory.txt").exists());
    }
}

#[test]
fn ignored_files_survive_rollback_and_side_effects_are_restored_on_pass() {
    let r = TestRepo::simple();
    r.write(".env", "TOKEN=keep\n");
    r.write("build/out.o", "object\n");
    let cmd = "sh -c 'echo noise > stray.txt; echo changed > other.txt; rm -f build/out.o; grep -qx TWO app.txt'";
    let wo = r.work_order(basic_order(&[cmd]));
    let replay = r.replay(
        "rp",
        &[
            (
                "1.json",
                proposal(&diff_replace("app.txt", &APP, "two", "Two"), "w"),
            ),
            ("2.json", good()),
        ],
    );
    let out = r.run_replay(&wo, &replay, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.read(".env").as_deref(), Some("TOKEN=keep\n"));
    assert_eq!(r.read("other.txt").as_deref(), Some("keep me\n"));
    assert!(!r.root.join("stray.txt").exists());
    assert_eq!(r.git(&["status", "--porcelain"]), " M app.txt\n");
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["side_effects"], json!(["other.txt", "stray.txt"]));
}

#[test]
fn api_keys_never_reach_commands_or_artifacts() {
    let r = TestRepo::simple();
    r.git(&["config", "factory.scrubEnv", "MY_TOKEN"]);
    let env_dump = r.outside.join("env.txt");
    let cmd = format!("sh -c 'env > {}'", env_dump.display());
    let wo = r.work_order(basic_order(&[&cmd]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let out = r
        .factory()
        .env("OPENAI_API_KEY", "sk-test-secret-123")
        .env("ANTHROPIC_API_KEY", "sk-ant-secret-456")
        .env("MY_TOKEN", "tok-789")
        .env("KEEP_ME", "visible")
        .args(["run", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let env = std::fs::read_to_string(&env_dump).expect("env dump");
    assert!(
        !env.contains("sk-test-secret-123")
            && !env.contains("sk-ant-secret-456")
            && !env.contains("tok-789")
    );
    assert!(env.contains("KEEP_ME=visible"));
    let prefix = env
        .lines()
        .find_map(|l| l.strip_prefix("PYTHONPYCACHEPREFIX="))
        .expect("a bytecode folder");
    assert!(prefix.ends_with(".git/factory/pycache"), "{prefix}");
    assert!(
        std::path::Path::new(prefix).is_dir(),
        "the repo's one cache, kept between attempts and runs"
    );
    assert!(env.contains("PYTEST_ADDOPTS=-p no:cacheprovider"));
}

#[test]
fn a_second_in_situ_run_is_refused_while_one_holds_the_lock() {
    let r = TestRepo::simple();
    let marker = r.outside.join("started");
    let cmd = format!("sh -c 'touch {}; sleep 3'", marker.display());
    let wo = r.work_order(basic_order(&[&cmd]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let mut first = r.spawn(&["run", "-q", "-w"]);
    first
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .stderr(std::process::Stdio::null());
    let mut child = first.spawn().expect("first run starts");
    wait_for(&marker);
    assert!(marker.exists(), "first run reached its acceptance command");
    let wo2 = r.work_order(basic_order(&["true"]));
    let out = r.run_replay(&wo2, &replay, &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert!(err.contains("holds the repo lock"), "{err}");
    assert!(err.contains(&format!("pid {}", child.id())), "{err}");
    let status = child.wait().expect("first run ends");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn a_check_that_stages_and_commits_is_undone() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let cmd = "sh -c 'echo x > new.txt && git add new.txt && git -c user.name=a -c user.email=a@a.invalid commit -qm sneaky && echo y > other.txt && git add other.txt; false'";
    let wo = r.work_order(basic_order(&[cmd]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let out = r.run_replay(&wo, &replay, &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(
        r.snapshot(),
        before,
        "HEAD, the branch, the index and the tree are as before"
    );
    // And in a worktree run the same check leaves nothing behind either.
    let out = r.run_replay(&wo, &replay, &["--worktree", "--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(r.snapshot(), before);
}

#[test]
fn git_config_supplies_defaults_the_command_line_overrides_and_bad_values_are_refused() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["false"]));
    let replay = r.replay(
        "cfg",
        &[("1.json", good()), ("2.json", good()), ("3.json", good())],
    );
    r.git(&["config", "factory.maxAttempts", "3"]);
    let out = r.run_replay(&wo, &replay, &["--json"]);
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["max_attempts"], 3, "from git config");
    let out = r.run_replay(&wo, &replay, &["--json", "--max-attempts", "1"]);
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["max_attempts"], 1, "the command line wins");
    r.git(&["config", "factory.maxAttempts", "lots"]);
    let (runs, before) = (r.run_ids(), r.snapshot());
    let out = r.run_replay(&wo, &replay, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        (r.run_ids(), r.snapshot()),
        (runs, before),
        "nothing changed"
    );
    let err = stderr_of(&out);
    assert!(
        err.contains("git config factory.maxAttempts has an invalid value \"lots\""),
        "{err}"
    );
}
