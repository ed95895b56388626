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
    ] {
        let wo = r.work_order(basic_order(&[cmd]));
        let out = r.run_replay(&wo, &one_pass(&r, "p"), &[]);
        assert_refused_up_front(&r, &out, "commands are not run by a shell", "sh -c '");
    }
    // Quoted, the operator is an argument on purpose; inside sh -c it is the shell's.
    for cmd in ["grep -c '|' app.txt", "sh -c 'grep -q TWO app.txt && true'"] {
        let wo = r.work_order(basic_order(&[cmd]));
        let out = r.run_replay(&wo, &one_pass(&r, &format!("q{}", cmd.len())), &[]);
        assert_ne!(out.status.code(), Some(2), "{cmd}: {}", stderr_of(&out));
        r.git(&["checkout", "--", "app.txt"]);
    }
}
