//! Runs in git: the run commit, notes, the cache of finished runs, `log` and `show`.

use crate::common::*;
use serde_json::Value;

const APP: [&str; 3] = ["one", "two", "three"];

fn run_fail_then_pass(r: &TestRepo, counter: &std::path::Path) -> std::process::Output {
    run_fail_then_pass_with(r, counter, &[])
}

fn run_fail_then_pass_with(
    r: &TestRepo,
    counter: &std::path::Path,
    extra: &[&str],
) -> std::process::Output {
    let cmd = format!(
        "sh -c 'echo x >> {}; grep -qx TWO app.txt'",
        counter.display()
    );
    let wo = r.work_order(basic_order(&[&cmd]));
    let replay = r.replay(
        "rp",
        &[
            (
                "1.json",
                proposal(&diff_replace("app.txt", &APP, "two", "Two"), "first"),
            ),
            (
                "2.json",
                proposal(&diff_replace("app.txt", &APP, "two", "TWO"), "second"),
            ),
        ],
    );
    r.run_replay(&wo, &replay, extra)
}

#[test]
fn run_commit_holds_artifacts_and_attempt_parents() {
    let r = TestRepo::simple();
    let counter = r.outside.join("count");
    let out = run_fail_then_pass(&r, &counter);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let id = r.run_ids().remove(0);
    let run = format!("refs/factory/{id}");
    let files = r.git(&["ls-tree", "-r", "--name-only", &run]);
    for f in [
        "run_summary.json",
        "work_order.json",
        "attempt_1/prompt.txt",
        "attempt_2/proposed_patch.diff",
    ] {
        assert!(files.lines().any(|l| l == f), "missing {f} in {files}");
    }
    let parents: Vec<String> = r
        .git(&["rev-list", "--parents", "-n", "1", &run])
        .split_whitespace()
        .skip(1)
        .map(str::to_string)
        .collect();
    assert_eq!(parents.len(), 2);
    let baseline = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    for (i, p) in parents.iter().enumerate() {
        assert_eq!(r.git(&["rev-parse", &format!("{p}^")]).trim(), baseline);
        let content = r.git(&["show", &format!("{p}:app.txt")]);
        assert_eq!(
            content,
            if i == 0 {
                "one\nTwo\nthree\n"
            } else {
                "one\nTWO\nthree\n"
            }
        );
    }
    let note = r.git(&["notes", "--ref=factory", "show", "HEAD"]);
    assert_eq!(note, format!("factory {id} PASS wo-1 attempts=2\n"));
}

#[test]
fn finished_runs_are_served_from_the_cache_and_force_keeps_history() {
    let r = TestRepo::simple();
    let counter = r.outside.join("count");
    assert_eq!(run_fail_then_pass(&r, &counter).status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&counter).expect("count"), "x\nx\n");
    // Same inputs after resetting the tree: no command runs again, same verdict.
    r.git(&["checkout", "--", "app.txt"]);
    let id = r.run_ids().remove(0);
    let first_commit = r
        .git(&["rev-parse", &format!("refs/factory/{id}")])
        .trim()
        .to_string();
    let again = run_fail_then_pass(&r, &counter);
    assert_eq!(again.status.code(), Some(0));
    assert!(
        stderr_of(&again).contains("already recorded"),
        "{}",
        stderr_of(&again)
    );
    assert_eq!(std::fs::read_to_string(&counter).expect("count"), "x\nx\n");
    assert_eq!(r.read("app.txt").as_deref(), Some("one\ntwo\nthree\n"));
    // --force runs again and keeps the old run commit as a parent.
    let forced = run_fail_then_pass_with(&r, &counter, &["--force"]);
    assert_eq!(forced.status.code(), Some(0), "{}", stderr_of(&forced));
    let parents = r.git(&[
        "rev-list",
        "--parents",
        "-n",
        "1",
        &format!("refs/factory/{id}"),
    ]);
    assert!(parents.contains(&first_commit), "{parents}");
    let note = r.git(&["notes", "--ref=factory", "show", "HEAD"]);
    assert_eq!(
        note.lines().count(),
        1,
        "the same line is not appended twice: {note}"
    );
}

#[test]
fn notes_are_appended_not_clobbered() {
    let r = TestRepo::simple();
    r.git(&[
        "notes",
        "--ref=factory",
        "add",
        "-m",
        "a human note",
        "HEAD",
    ]);
    let counter = r.outside.join("count");
    assert_eq!(run_fail_then_pass(&r, &counter).status.code(), Some(0));
    let note = r.git(&["notes", "--ref=factory", "show", "HEAD"]);
    assert!(note.starts_with("a human note\n"), "{note}");
    assert!(note.contains("PASS wo-1 attempts=2"));
}

#[test]
fn log_and_show() {
    let r = TestRepo::simple();
    let counter = r.outside.join("count");
    assert_eq!(run_fail_then_pass(&r, &counter).status.code(), Some(0));
    let id = r.run_ids().remove(0);
    let log = r.factory().args(["log"]).output().expect("log");
    assert_eq!(log.status.code(), Some(0));
    let line = stdout_of(&log);
    assert!(
        line.starts_with(&id)
            && line.contains("PASS")
            && line.contains("wo-1")
            && line.contains("Change app.txt"),
        "{line}"
    );
    let json_log: Value = serde_json::from_str(&stdout_of(
        &r.factory().args(["log", "--json"]).output().expect("log"),
    ))
    .expect("json");
    assert_eq!(json_log[0]["run_id"], id.as_str());
    assert_eq!(json_log[0]["attempts"], 2);
    let none = r
        .factory()
        .args(["log", "--verdict", "fail"])
        .output()
        .expect("log");
    assert_eq!(stdout_of(&none), "");

    let show = r.factory().args(["show", &id[..6]]).output().expect("show");
    assert_eq!(show.status.code(), Some(0), "{}", stderr_of(&show));
    let text = stdout_of(&show);
    assert!(
        text.contains("attempt 1: acceptance_failed") && text.contains("attempt 2: passed"),
        "{text}"
    );
    let patch = stdout_of(
        &r.factory()
            .args(["show", &id, "--patch"])
            .output()
            .expect("show"),
    );
    assert!(patch.contains("+TWO"));
    let patch1 = stdout_of(
        &r.factory()
            .args(["show", &id, "--patch", "--attempt", "1"])
            .output()
            .expect("show"),
    );
    assert!(patch1.contains("+Two"));
    let stored = r.git(&["show", &format!("refs/factory/{id}:run_summary.json")]);
    assert_eq!(
        stdout_of(
            &r.factory()
                .args(["show", &id, "--json"])
                .output()
                .expect("show")
        ),
        stored
    );
    let unknown = r.factory().args(["show", "ffffff"]).output().expect("show");
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr_of(&unknown).contains("no run matches ffffff"));
}

#[test]
fn checkout_materialises_an_attempt_tree() {
    let r = TestRepo::simple();
    let counter = r.outside.join("count");
    assert_eq!(run_fail_then_pass(&r, &counter).status.code(), Some(0));
    let id = r.run_ids().remove(0);
    let dest = r.outside.join("attempt1");
    let out = r
        .factory()
        .args(["checkout", &id, "--attempt", "1"])
        .arg(&dest)
        .output()
        .expect("checkout");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        std::fs::read_to_string(dest.join("app.txt")).expect("read"),
        "one\nTwo\nthree\n"
    );
    assert_eq!(
        std::fs::read_to_string(dest.join("other.txt")).expect("read"),
        "keep me\n"
    );
    let again = r
        .factory()
        .args(["checkout", &id, "--attempt", "1"])
        .arg(&dest)
        .output()
        .expect("checkout");
    assert_eq!(
        again.status.code(),
        Some(2),
        "a non-empty folder is refused"
    );
    let missing = r
        .factory()
        .args(["checkout", &id, "--attempt", "9"])
        .arg(r.outside.join("x"))
        .output()
        .expect("checkout");
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr_of(&missing).contains("has no attempt 9"));
}

#[test]
fn reverify_reruns_po_per_attempt_tree_and_dedupes() {
    let r = TestRepo::simple();
    let counter = r.outside.join("count");
    assert_eq!(run_fail_then_pass(&r, &counter).status.code(), Some(0));
    let id = r.run_ids().remove(0);
    r.git(&["checkout", "--", "app.txt"]);
    let before = r.snapshot();
    let out = r
        .factory()
        .args(["reverify", &id, "--json"])
        .output()
        .expect("reverify");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let rows: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(rows[0]["recorded"], "acceptance_failed");
    assert_eq!(rows[0]["now"], "acceptance_failed");
    assert_eq!(rows[1]["recorded"], "passed");
    assert_eq!(rows[1]["now"], "passed");
    // Two more runs of the acceptance command (one per distinct tree), none in the user's tree.
    assert_eq!(
        std::fs::read_to_string(&counter).expect("count"),
        "x\nx\nx\nx\n"
    );
    assert_eq!(r.snapshot(), before);
    only_idle_pooled_worktrees(&r);
    // When the checks change their mind, reverify says so and exits 1.
    r.git(&["config", "factory.verify", "false"]);
    let changed = r
        .factory()
        .args(["reverify", &id])
        .output()
        .expect("reverify");
    assert_eq!(changed.status.code(), Some(1));
    assert!(stdout_of(&changed).contains("CHANGED"));
}

#[test]
fn replay_of_a_stored_run_reproduces_it_without_the_provider() {
    let r = TestRepo::simple();
    let counter = r.outside.join("count");
    assert_eq!(run_fail_then_pass(&r, &counter).status.code(), Some(0));
    let id = r.run_ids().remove(0);
    r.git(&["checkout", "--", "app.txt"]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r
        .factory()
        .args(["run", "--json", "-w"])
        .arg(&wo)
        .args(["--replay", &id])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["attempts"].as_array().map(Vec::len), Some(2));
    assert!(s["config"]["model"]
        .as_str()
        .unwrap_or("")
        .starts_with("replay:"));
}

#[test]
fn runs_are_shared_with_push_and_fetch() {
    let r = TestRepo::simple();
    let counter = r.outside.join("count");
    assert_eq!(run_fail_then_pass(&r, &counter).status.code(), Some(0));
    let id = r.run_ids().remove(0);
    let bare = r.tmp.path().join("remote.git");
    r.git(&[
        "init",
        "-q",
        "--bare",
        "-b",
        "main",
        bare.to_str().expect("utf8"),
    ]);
    r.git(&[
        "push",
        "-q",
        bare.to_str().expect("utf8"),
        "main",
        "refs/factory/*:refs/factory/*",
        "refs/notes/factory",
    ]);
    let clone_dir = r.tmp.path().join("clone");
    r.git(&[
        "clone",
        "-q",
        bare.to_str().expect("utf8"),
        clone_dir.to_str().expect("utf8"),
    ]);
    let mut fetch = assert_cmd::Command::new("git");
    hermetic(&mut fetch, &r.home);
    fetch
        .current_dir(&clone_dir)
        .args([
            "fetch",
            "-q",
            "origin",
            "refs/factory/*:refs/factory/*",
            "refs/notes/factory:refs/notes/factory",
        ])
        .assert()
        .success();
    let mut log = assert_cmd::Command::cargo_bin("git-factory").expect("bin");
    hermetic(&mut log, &r.home);
    let out = log
        .current_dir(&clone_dir)
        .arg("log")
        .output()
        .expect("log");
    assert!(stdout_of(&out).starts_with(&id), "{}", stdout_of(&out));
    let mut show = assert_cmd::Command::cargo_bin("git-factory").expect("bin");
    hermetic(&mut show, &r.home);
    let out = show
        .current_dir(&clone_dir)
        .args(["show", &id, "--patch"])
        .output()
        .expect("show");
    assert!(stdout_of(&out).contains("+TWO"));
    let mut notes = assert_cmd::Command::new("git");
    hermetic(&mut notes, &r.home);
    let out = notes
        .current_dir(&clone_dir)
        .args(["log", "--notes=factory", "-1"])
        .output()
        .expect("git log");
    assert!(stdout_of(&out).contains(&format!("factory {id} PASS")));
}

#[test]
fn show_prints_a_commands_full_log_and_lists_ambiguous_prefixes() {
    let r = TestRepo::simple();
    let counter = r.outside.join("count");
    let cmd = format!(
        "sh -c 'echo out-line; echo err-line >&2; echo x >> {}; grep -qx TWO app.txt'",
        counter.display()
    );
    let wo = r.work_order(basic_order(&[&cmd]));
    let replay = r.replay(
        "rp",
        &[(
            "1.json",
            proposal(&diff_replace("app.txt", &APP, "two", "Two"), "first"),
        )],
    );
    let out = r.run_replay(&wo, &replay, &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let id = r.run_ids().remove(0);
    let log = r
        .factory()
        .args(["show", &id, "--log", "acceptance:0"])
        .output()
        .expect("show");
    assert_eq!(log.status.code(), Some(0), "{}", stderr_of(&log));
    assert!(stdout_of(&log).contains("out-line") && stdout_of(&log).contains("err-line"));
    let bad = r
        .factory()
        .args(["show", &id, "--log", "nonsense"])
        .output()
        .expect("show");
    assert_eq!(bad.status.code(), Some(2));
    // A second run id sharing the first six digits makes that prefix ambiguous.
    let twin = format!("{}ffffff", &id[..6]);
    let commit = r.git(&["rev-parse", &format!("refs/factory/{id}")]);
    r.git(&["update-ref", &format!("refs/factory/{twin}"), commit.trim()]);
    let amb = r.factory().args(["show", &id[..6]]).output().expect("show");
    assert_eq!(amb.status.code(), Some(2));
    let err = stderr_of(&amb);
    assert!(
        err.contains("is ambiguous") && err.contains(&id) && err.contains(&twin),
        "{err}"
    );
}

#[test]
fn log_follows_moved_and_deleted_run_refs() {
    let r = TestRepo::simple();
    let counter = r.outside.join("count");
    assert_eq!(run_fail_then_pass(&r, &counter).status.code(), Some(0));
    let id = r.run_ids().remove(0);
    assert!(stdout_of(&r.factory().arg("log").output().expect("log")).contains("PASS"));
    // The same ref now points at a FAIL record: log must say so, not what it cached.
    r.git(&["checkout", "--", "app.txt"]);
    let wo = r.work_order(basic_order(&["false"]));
    let replay = r.replay(
        "again",
        &[(
            "1.json",
            proposal(&diff_replace("app.txt", &APP, "two", "TWO"), "x"),
        )],
    );
    let out = r.run_replay(&wo, &replay, &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let other = r
        .run_ids()
        .into_iter()
        .find(|i| *i != id)
        .expect("a second run");
    let failed = r.git(&["rev-parse", &format!("refs/factory/{other}")]);
    r.git(&["update-ref", &format!("refs/factory/{id}"), failed.trim()]);
    let log = stdout_of(&r.factory().args(["log", "--json"]).output().expect("log"));
    let runs: Value = serde_json::from_str(&log).expect("json");
    let moved = runs
        .as_array()
        .expect("list")
        .iter()
        .find(|x| x["run_id"] == id.as_str())
        .expect("listed");
    assert_eq!(moved["verdict"], "FAIL");
    r.git(&["update-ref", "-d", &format!("refs/factory/{id}")]);
    let log = stdout_of(&r.factory().arg("log").output().expect("log"));
    assert!(!log.contains(&id), "{log}");
}

/// `git …` as a user types it, with this binary on PATH so `git factory` finds it.
fn git_cli(r: &TestRepo, args: &[&str]) -> std::process::Output {
    let bin = assert_cmd::cargo::cargo_bin("git-factory");
    let dir = bin.parent().expect("bin dir");
    let path = format!(
        "{}:{}",
        dir.display(),
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

/// Three runs started within the same second (fixed commit dates): A FAIL, B FAIL, C PASS.
fn three_runs(r: &TestRepo) -> Vec<String> {
    let mut ids = Vec::new();
    for (name, accept) in [
        ("a", "false"),
        ("b", "false"),
        ("c", "grep -qx TWO app.txt"),
    ] {
        let mut order = basic_order(&[accept]);
        order["id"] = format!("wo-{name}").into();
        order["title"] = format!("run {name}").into();
        let wo = r.work_order(order);
        let replay = r.replay(
            &format!("rp-{name}"),
            &[(
                "1.json",
                proposal(&diff_replace("app.txt", &APP, "two", "TWO"), name),
            )],
        );
        let out = r.run_replay(&wo, &replay, &["--max-attempts", "1", "--json"]);
        let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
        ids.push(s["run_id"].as_str().expect("id").to_string());
    }
    r.git(&["checkout", "--", "app.txt"]);
    ids
}

#[test]
fn log_follows_gits_conventions() {
    let r = TestRepo::simple();
    let ids = three_runs(&r);
    let (a, b, c) = (&ids[0], &ids[1], &ids[2]);
    let log = |args: &[&str]| {
        let out = r.factory().arg("log").args(args).output().expect("log");
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        stdout_of(&out)
    };
    assert_eq!(
        log(&["--oneline"]),
        format!("{c} PASS run c\n{b} FAIL run b\n{a} FAIL run a\n"),
        "newest first, also within one second"
    );
    assert_eq!(
        log(&["--oneline", "-2"]),
        format!("{c} PASS run c\n{b} FAIL run b\n")
    );
    assert_eq!(log(&["-1", "--oneline"]), format!("{c} PASS run c\n"));
    assert_eq!(log(&["--oneline", "-n", "1"]), format!("{c} PASS run c\n"));
    for v in ["PASS", "pass", "Pass"] {
        assert_eq!(
            log(&["--oneline", "--verdict", v]),
            format!("{c} PASS run c\n")
        );
    }
    assert_eq!(
        log(&["--oneline", "--verdict", "FAIL"]),
        format!("{b} FAIL run b\n{a} FAIL run a\n")
    );
    let full = log(&["-2"]);
    assert_eq!(full.lines().count(), 2, "{full}");
    assert!(full.starts_with(&format!("{c} PASS")), "{full}");
}

#[test]
fn show_apply_and_reverify_default_to_the_newest_run() {
    let r = TestRepo::simple();
    let ids = three_runs(&r);
    let newest = &ids[2];
    let show = r.factory().arg("show").output().expect("show");
    assert_eq!(show.status.code(), Some(0), "{}", stderr_of(&show));
    assert!(
        stdout_of(&show).starts_with(&format!("run {newest}  PASS")),
        "{}",
        stdout_of(&show)
    );
    let patch = r
        .factory()
        .args(["show", "--patch"])
        .output()
        .expect("show");
    assert!(stdout_of(&patch).contains("+TWO"));
    let reverify = r.factory().arg("reverify").output().expect("reverify");
    assert_eq!(reverify.status.code(), Some(0), "{}", stderr_of(&reverify));
    assert!(
        stdout_of(&reverify).contains("attempt 1: recorded passed"),
        "the newest run (the only PASS) was re-verified: {}",
        stdout_of(&reverify)
    );
    let apply = r.factory().arg("apply").output().expect("apply");
    assert_eq!(apply.status.code(), Some(0), "{}", stderr_of(&apply));
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));

    let empty = TestRepo::simple();
    let before = empty.snapshot();
    let out = empty.factory().arg("show").output().expect("show");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr_of(&out),
        "error: no runs are recorded in this repository yet\nhint: start one with git factory run (or see one with git factory demo)\n"
    );
    assert_eq!(empty.snapshot(), before);
}

#[test]
fn git_dash_c_settings_are_honoured() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["false"]));
    let replay = r.replay(
        "c",
        &[
            (
                "1.json",
                proposal(&diff_replace("app.txt", &APP, "two", "Two"), "1"),
            ),
            (
                "2.json",
                proposal(&diff_replace("app.txt", &APP, "two", "TWO"), "2"),
            ),
        ],
    );
    let wo = wo.to_str().expect("utf8");
    let replay = replay.to_str().expect("utf8");
    let out = git_cli(
        &r,
        &[
            "-c",
            "factory.maxAttempts=1",
            "factory",
            "run",
            "-w",
            wo,
            "--replay",
            replay,
        ],
    );
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("after 1 attempt ("),
        "git -c factory.maxAttempts=1:\n{err}"
    );
    // The command line still wins over git -c.
    let out = git_cli(
        &r,
        &[
            "-c",
            "factory.maxAttempts=1",
            "factory",
            "run",
            "-w",
            wo,
            "--replay",
            replay,
            "--max-attempts",
            "2",
            "--force",
        ],
    );
    assert!(
        stderr_of(&out).contains("after 2 attempts ("),
        "{}",
        stderr_of(&out)
    );
    // color.ui=always colours even into a pipe; never does not; --color wins over both.
    let coloured = git_cli(&r, &["-c", "color.ui=always", "factory", "log"]);
    assert!(stdout_of(&coloured).contains('\u{1b}'), "color.ui=always");
    let plain = git_cli(
        &r,
        &[
            "-c",
            "color.ui=always",
            "factory",
            "log",
            "--color",
            "never",
        ],
    );
    assert!(!stdout_of(&plain).contains('\u{1b}'));
    let plain = git_cli(&r, &["-c", "color.ui=never", "factory", "log"]);
    assert!(!stdout_of(&plain).contains('\u{1b}'));
}

#[test]
fn pager_and_patch_colours_on_a_terminal() {
    let r = TestRepo::simple();
    let ids = three_runs(&r);
    let newest = &ids[2];
    // Not a terminal: never paged, even with a pager set.
    let out = r
        .factory()
        .env("GIT_PAGER", "sed s/^/PAGED:/")
        .arg("log")
        .output()
        .expect("log");
    assert!(!stdout_of(&out).contains("PAGED:"));
    let Some(pane) = tmux::Pane::start(&r, 200) else {
        return;
    };
    // Markers are echoed as END$((0+n)), so the typed line itself never matches `ENDn`.
    pane.type_line("clear; GIT_PAGER='sed s/^/PAGED:/' git factory log --oneline");
    let s = pane.wait_for(&format!("PAGED:{newest}"));
    assert!(
        s.contains(&format!("PAGED:{newest} PASS run c")),
        "GIT_PAGER:\n{s}"
    );
    pane.type_line(
        "clear; GIT_PAGER='sed s/^/PAGED:/' git factory log --oneline --no-pager; echo END$((0+1))",
    );
    let s = pane.wait_for("END1\n");
    assert!(
        s.contains(&format!("{newest} PASS run c")) && !s.contains("PAGED:"),
        "--no-pager:\n{s}"
    );
    pane.type_line("clear; git -c core.pager='sed s/^/CORE:/' factory show");
    let s = pane.wait_for(&format!("CORE:run {newest}"));
    assert!(
        s.contains(&format!("CORE:run {newest}")),
        "core.pager:\n{s}"
    );
    pane.type_line(
        "clear; git --no-pager -c core.pager='sed s/^/CORE:/' factory show; echo END$((0+2))",
    );
    let s = pane.wait_for("END2\n");
    assert!(
        s.contains(&format!("run {newest}")) && !s.contains("CORE:"),
        "git --no-pager:\n{s}"
    );
    // show --patch is coloured like git diff on a terminal, and not with color.ui=never.
    pane.type_line("clear; GIT_PAGER=cat git factory show --patch; echo END$((0+3))");
    pane.wait_for("END3\n");
    let s = pane.tmux(&["capture-pane", "-p", "-e", "-t", "0"]);
    assert!(s.contains("\u{1b}[32m+TWO"), "added line green:\n{s:?}");
    assert!(s.contains("\u{1b}[31m-two"), "removed line red:\n{s:?}");
    assert!(s.contains("\u{1b}[36m"), "hunk header cyan:\n{s:?}");
    pane.type_line(
        "clear; GIT_PAGER=cat git -c color.ui=never factory show --patch; echo END$((0+4))",
    );
    pane.wait_for("END4\n");
    let s = pane.tmux(&["capture-pane", "-p", "-e", "-t", "0"]);
    assert!(
        s.contains("+TWO") && !s.contains("\u{1b}[32m"),
        "color.ui=never:\n{s:?}"
    );
}

#[test]
fn two_reverifies_of_one_run_at_once_each_check_in_a_worktree_of_their_own() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["sh -c 'sleep 1; grep -qx TWO app.txt'"]));
    let good = proposal(
        &diff_replace("app.txt", &["one", "two", "three"], "two", "TWO"),
        "up",
    );
    let replay = r.replay("rp", &[("1.json", good)]);
    assert_eq!(r.run_replay(&wo, &replay, &[]).status.code(), Some(0));
    let id = r.run_ids().remove(0);
    r.git(&["checkout", "--", "app.txt"]);
    let both: Vec<_> = (0..2)
        .map(|_| {
            r.spawn(&["reverify", &id, "--json"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("starts")
        })
        .collect();
    for child in both {
        let out = child.wait_with_output().expect("ends");
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        let rows: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
        assert_eq!(rows[0]["now"], "passed", "{rows}");
    }
    only_idle_pooled_worktrees(&r);
}
