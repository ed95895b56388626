//! A newcomer's first hour: misconfiguration refused up front, output that says why and
//! where, git's conventions.

use crate::common::*;
use std::path::Path;

fn one_pass(r: &TestRepo, name: &str) -> std::path::PathBuf {
    r.replay(
        name,
        &[(
            "1.json",
            proposal(
                &diff_replace("app.txt", &["one", "two", "three"], "two", "TWO"),
                "w",
            ),
        )],
    )
}

/// A refusal before the first attempt: exit 2, the message, nothing recorded, repo as before.
fn assert_refused_up_front(r: &TestRepo, out: &std::process::Output, message: &str, hint: &str) {
    let err = stderr_of(out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(message), "message {message:?} in:\n{err}");
    assert!(err.contains(hint), "hint {hint:?} in:\n{err}");
    assert!(!err.contains("attempt 1"), "no attempt was made:\n{err}");
    assert!(r.run_ids().is_empty(), "nothing recorded");
    assert!(r.git(&["notes", "--ref", "factory", "list"]).is_empty());
}

#[test]
fn a_missing_acceptance_program_is_refused_before_the_first_attempt() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let wo = r.work_order(basic_order(&["no-such-checker-xyz --all"]));
    let out = r.run_replay(&wo, &one_pass(&r, "p"), &[]);
    assert_refused_up_front(
        &r,
        &out,
        "error: acceptance command \"no-such-checker-xyz --all\" needs no-such-checker-xyz, which is not on PATH",
        "hint: install it, or fix the work order's acceptance_commands",
    );
    assert_eq!(r.snapshot(), before);
}

#[test]
fn a_missing_agent_program_is_refused_before_the_first_attempt() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let wo = r.work_order(basic_order(&["true"]));
    for (flag, argv, message) in [
        (
            "--agent-command",
            "no-such-agent-xyz --json",
            "error: --agent-command program \"no-such-agent-xyz\" is not on PATH",
        ),
        (
            "--agent-edits",
            "/nonexistent/bin/coder -p",
            "error: --agent-edits program \"/nonexistent/bin/coder\" does not exist or is not executable",
        ),
    ] {
        let out = r
            .factory()
            .args(["run", "-w"])
            .arg(&wo)
            .args([flag, argv])
            .output()
            .expect("runs");
        assert_refused_up_front(&r, &out, message, "hint: install it, or give its full path");
    }
    assert_eq!(r.snapshot(), before);
}

#[test]
fn python_defaults_in_a_repo_without_python_name_the_fix() {
    let r = TestRepo::with_files(&[("app.txt", "one\ntwo\nthree\n")]);
    // A PATH with git and nothing else: no python.
    let bin = r.tmp.path().join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let git = ["/usr/bin/git", "/usr/local/bin/git", "/bin/git"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("git installed");
    std::os::unix::fs::symlink(git, bin.join("git")).expect("symlink");
    let before = r.snapshot();
    let wo = r.work_order(basic_order(&["git diff --quiet"]));
    let replay = one_pass(&r, "p");
    let run = |r: &TestRepo| {
        r.factory()
            .env("PATH", &bin)
            .args(["run", "-w"])
            .arg(&wo)
            .arg("--replay")
            .arg(&replay)
            .output()
            .expect("runs")
    };
    let out = run(&r);
    assert_refused_up_front(
        &r,
        &out,
        "error: global verification needs python, which is not on PATH",
        "hint: set this repo's checks: git config factory.verify 'make test' (one value per command), or add scripts/verify.sh",
    );
    assert!(stderr_of(&out).contains("  python -m compileall -q .   (the Python default"));
    assert_eq!(r.snapshot(), before);
    // The fix the hint names works.
    r.git(&["config", "factory.verify", "git diff --check"]);
    let out = run(&r);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
}

#[test]
fn a_shell_operator_in_an_acceptance_command_is_refused_naming_sh_c() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let wo = r.work_order(basic_order(&["grep -q x app.txt && true"]));
    let out = r.run_replay(&wo, &one_pass(&r, "p"), &[]);
    assert_refused_up_front(
        &r,
        &out,
        "error: invalid work order: acceptance_commands: \"grep -q x app.txt && true\" passes \"&&\" to grep as an argument; commands are not run by a shell",
        "hint: to use shell syntax, run it through a shell: sh -c 'grep -q x app.txt && true'",
    );
    assert_eq!(r.snapshot(), before);
    for cmd in [
        "grep x app.txt | wc -l",
        "true ; false",
        "echo x > f",
        "a || b",
        // Redirections and operators glued to a word, backgrounding, substitutions.
        "true 2>&1",
        "true 2>/dev/null",
        "true >out",
        "true |& cat",
        "true &>log",
        "sleep 1 &",
        "echo $(id)",
        "echo `id`",
    ] {
        let wo = r.work_order(basic_order(&[cmd]));
        let out = r.run_replay(&wo, &one_pass(&r, "p"), &[]);
        assert_refused_up_front(&r, &out, "commands are not run by a shell", "sh -c '");
    }
    // Quoted, the operator is an argument on purpose; inside sh -c it is the shell's.
    for cmd in [
        "grep -c '|' app.txt",
        "sh -c 'grep -q TWO app.txt && true'",
        "grep -c \"a|b;c>d\" app.txt",
        "grep -c '2>&1' app.txt",
    ] {
        let wo = r.work_order(basic_order(&[cmd]));
        let out = r.run_replay(&wo, &one_pass(&r, &format!("q{}", cmd.len())), &[]);
        assert_ne!(out.status.code(), Some(2), "{cmd}: {}", stderr_of(&out));
        r.git(&["checkout", "--", "app.txt"]);
    }
}

#[test]
fn a_cached_run_says_where_its_change_is_and_delivers_it_on_commit_or_branch() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let replay = one_pass(&r, "p");
    let first = r.run_replay(&wo, &replay, &[]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr_of(&first));
    let run = r.run_ids()[0].clone();
    r.git(&["checkout", "--", "app.txt"]);
    let before = r.snapshot();

    let again = r.run_replay(&wo, &replay, &[]);
    let err = stderr_of(&again);
    assert_eq!(again.status.code(), Some(0), "{err}");
    assert_eq!(
        err,
        format!(
            "run {run} is already recorded (PASS); nothing was run again: its change is not in your work tree\n\
             hint: bring it in with git factory apply {run}, or run again with --commit to commit it\n\
             PASS {run} after 1 attempt (success) → refs/factory/{run}  (from the cache)\n"
        )
    );
    assert!(!err.contains("the change is in your work tree"), "{err}");
    assert_eq!(r.snapshot(), before, "a cached run changes nothing");

    // --commit delivers the recorded change as a new run would.
    let head = r.git(&["rev-parse", "HEAD"]);
    let commit = r.run_replay(&wo, &replay, &["--commit"]);
    let err = stderr_of(&commit);
    assert_eq!(commit.status.code(), Some(0), "{err}");
    assert!(
        err.contains(
            "nothing was run again: its recorded change is now committed on the current branch as"
        ),
        "{err}"
    );
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    assert_eq!(
        r.git(&["rev-parse", "HEAD~1"]),
        head,
        "one commit on the branch"
    );
    assert!(
        r.git(&["status", "--porcelain"]).is_empty(),
        "committed, index and tree clean"
    );
    assert!(r
        .git(&["log", "-1", "--format=%B"])
        .contains(&format!("Factory-Run: {run}")));
    assert_eq!(r.run_ids(), vec![run.clone()], "no new run was recorded");

    // --branch NAME: created at HEAD, checked out, the change committed on it.
    r.git(&["reset", "-q", "--hard", "HEAD~1"]);
    let branch = r.run_replay(&wo, &replay, &["--branch", "feat/cached"]);
    let err = stderr_of(&branch);
    assert_eq!(branch.status.code(), Some(0), "{err}");
    assert!(
        err.contains("now committed on branch feat/cached as"),
        "{err}"
    );
    assert_eq!(
        r.git(&["symbolic-ref", "--short", "HEAD"]).trim(),
        "feat/cached"
    );
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    assert_eq!(r.git(&["rev-parse", "main"]), head, "main untouched");

    // A dirty tree is refused before anything changes.
    r.git(&["checkout", "-q", "main"]);
    r.write("other.txt", "edited\n");
    let before = r.snapshot();
    let dirty = r.run_replay(&wo, &replay, &["--commit"]);
    assert_eq!(dirty.status.code(), Some(2), "{}", stderr_of(&dirty));
    assert!(stderr_of(&dirty).contains("error: the work tree has uncommitted changes"));
    assert_eq!(r.snapshot(), before);
}

#[test]
fn a_cached_pass_delivered_with_worktree_leaves_the_users_tree_and_index_alone() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let replay = one_pass(&r, "p");
    let first = r.run_replay(&wo, &replay, &[]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr_of(&first));
    let run = r.run_ids()[0].clone();
    r.git(&["checkout", "--", "app.txt"]);
    // Worktree runs do not need a clean tree: a staged edit elsewhere must stay as it is.
    r.write("other.txt", "staged\n");
    r.git(&["add", "other.txt"]);
    let before = r.snapshot();
    let out = r.run_replay(&wo, &replay, &["--worktree", "--branch", "feat/wt-cached"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(
        r.git(&["show", "feat/wt-cached:app.txt"]),
        "one\nTWO\nthree\n",
        "the branch holds the change"
    );
    assert!(r
        .git(&["log", "-1", "--format=%B", "feat/wt-cached"])
        .contains(&format!("Factory-Run: {run}")));
    let mut after = r.snapshot();
    after.refs.retain(|line| !line.contains("feat/wt-cached"));
    assert_eq!(
        after, before,
        "the user's tree, index and other refs are untouched"
    );
    // The delivery's worktree is given back to the pool: idle, clean, locked (SPEC §5).
    assert!(only_idle_pooled_worktrees(&r) <= 1);
}

#[test]
fn a_failing_stage_line_says_why() {
    let r = TestRepo::simple();
    let app = ["one", "two", "three"];
    let replay = r.replay(
        "why",
        &[
            (
                "1.json",
                proposal(&diff_replace("app.txt", &app, "two", "Two"), "w"),
            ),
            (
                "2.json",
                proposal(&diff_replace("nope.txt", &app, "two", "TWO"), "w"),
            ),
        ],
    );
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r.run_replay(&wo, &replay, &[]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("  ✗ acceptance_failed: grep -qx TWO app.txt → exit 1\n"),
        "the command and its exit code:\n{err}"
    );
    let refusal = err
        .lines()
        .find(|l| l.starts_with("  ✗ patch_scope_violation: "))
        .unwrap_or_else(|| panic!("the scope refusal's first line:\n{err}"));
    assert!(refusal.contains("nope.txt"), "{refusal}");
}

#[test]
fn status_lines_fit_a_narrow_terminal() {
    let r = TestRepo::simple();
    let Some(pane) = tmux::Pane::start(&r, 40) else {
        return;
    };
    let wo = r.work_order(basic_order(&[
        "sh -c 'sleep 2; grep -qx TWO app.txt # a long acceptance command line'",
    ]));
    let replay = one_pass(&r, "p");
    pane.type_line(&format!(
        "clear; git factory run -w {} --replay {}",
        wo.display(),
        replay.display()
    ));
    let screen = pane.wait_for("→ refs/factory/");
    assert!(screen.contains("PASS"), "{screen}");
    let rows = pane.history();
    let acceptance_rows = rows.lines().filter(|l| l.contains("PO acceptance")).count();
    assert_eq!(
        acceptance_rows, 1,
        "one row for a 2 s command, not one per spinner tick:\n{rows}"
    );
    let shown = rows.lines().filter(|l| !l.trim().is_empty()).count();
    assert!(shown < 25, "{shown} rows:\n{rows}");
}

#[test]
fn a_closed_stderr_stops_the_run_like_ctrl_c() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let wo = r.work_order(basic_order(&["sh -c 'sleep 1; grep -qx TWO app.txt'"]));
    let replay = one_pass(&r, "p");
    let mut child = r
        .spawn(&["run", "-w", wo.to_str().expect("utf8"), "--replay"])
        .arg(&replay)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // The reader goes away at once (`… 2>&1 | head -0`).
    drop(child.stderr.take());
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130), "stopped, not a panic (101)");
    assert_eq!(r.snapshot(), before, "rolled back");
    let ids = r.run_ids();
    assert_eq!(ids.len(), 1, "recorded");
    let show = r.factory().args(["show", &ids[0]]).output().expect("show");
    assert!(
        stdout_of(&show).contains("INTERRUPTED"),
        "{}",
        stdout_of(&show)
    );
    // The lock is released: the next run goes ahead.
    let next = r.run_replay(&wo, &replay, &["--force"]);
    assert_eq!(next.status.code(), Some(0), "{}", stderr_of(&next));
}
