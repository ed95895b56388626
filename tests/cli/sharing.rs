//! `git factory push` / `fetch`: any number of clones with runs share them without
//! non-fast-forward refusals; the pre-push hook leaves run records alone.

use crate::common::*;
use std::path::{Path, PathBuf};

/// The origin (bare) and a second clone of it; the TestRepo is the first clone.
fn two_clones(r: &TestRepo) -> (PathBuf, PathBuf) {
    let bare = origin_with_main(r);
    let other = clone_of(r, &bare, "other");
    (bare, other)
}

fn notes_of_head(r: &TestRepo, dir: &Path) -> String {
    stdout_of(&in_dir(
        r,
        dir,
        "git",
        &["notes", "--ref=factory", "show", "HEAD"],
    ))
}

#[test]
fn two_clones_with_runs_push_and_fetch_without_refusals() {
    let r = TestRepo::simple();
    let (bare, other) = two_clones(&r);
    let mine = a_failing_run_in(&r, &r.root, "mine");
    let theirs = a_failing_run_in(&r, &other, "theirs");

    let out = in_dir(&r, &other, "factory", &["push"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        stderr_of(&out),
        "pushed 1 run and the merged notes (origin)\n"
    );

    // The plain git push the notes used to need is refused now: both sides have notes.
    let (code, _) = r.git_code(&["push", "-q", "origin", "refs/notes/factory"]);
    assert_ne!(
        code, 0,
        "a plain push of diverged notes is non-fast-forward"
    );

    let out = r.factory().arg("push").output().expect("push");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        stderr_of(&out),
        "pushed 1 run and the merged notes (origin)\n"
    );
    let both = notes_of_head(&r, &r.root);
    assert!(
        both.contains(&format!("factory {mine} FAIL wo-mine"))
            && both.contains(&format!("factory {theirs} FAIL wo-theirs")),
        "cat_sort_uniq kept both lines:\n{both}"
    );

    let out = in_dir(&r, &other, "factory", &["fetch"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        stderr_of(&out),
        "fetched 1 run and the merged notes (origin)\n"
    );
    let log = stdout_of(&in_dir(&r, &other, "factory", &["log", "--oneline"]));
    assert!(log.contains(&mine) && log.contains(&theirs), "{log}");
    assert_eq!(
        notes_of_head(&r, &other),
        both,
        "both clones hold the same notes"
    );

    // Nothing new: up to date, both ways; the remote holds both runs.
    let out = in_dir(&r, &other, "factory", &["push"]);
    assert_eq!(
        stderr_of(&out),
        "origin: runs and notes already up to date\n"
    );
    let out = r
        .factory()
        .args(["fetch", "origin"])
        .output()
        .expect("fetch");
    assert_eq!(
        stderr_of(&out),
        "fetched 1 run (origin)\n",
        "their run; the notes were merged by push"
    );
    let out = r
        .factory()
        .args(["fetch", "origin"])
        .output()
        .expect("fetch");
    assert_eq!(
        stderr_of(&out),
        "origin: runs and notes already up to date\n"
    );
    let remote = r.git(&["ls-remote", bare.to_str().expect("utf8"), "refs/factory/*"]);
    assert!(
        remote.contains(&mine) && remote.contains(&theirs),
        "{remote}"
    );

    // A third run on each side, pushed in turn: still no refusal.
    r.git(&["checkout", "--", "."]);
    let mine2 = a_failing_run_in(&r, &r.root, "mine2");
    let theirs2 = a_failing_run_in(&r, &other, "theirs2");
    for dir in [&r.root, &other] {
        let out = in_dir(&r, dir, "factory", &["push"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    }
    let out = r.factory().arg("fetch").output().expect("fetch");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let notes = notes_of_head(&r, &r.root);
    for id in [&mine, &theirs, &mine2, &theirs2] {
        assert!(notes.contains(id.as_str()), "{id}: {notes}");
    }
}

#[test]
fn push_to_a_missing_remote_is_refused_naming_the_fix() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let out = r.factory().arg("push").output().expect("push");
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert!(err.starts_with("error: push to origin: "), "{err}");
    assert!(
        err.contains(
            "hint: check the remote with git remote -v (or name one: git factory push <remote>)"
        ),
        "{err}"
    );
    assert_eq!(r.snapshot(), before);
}

#[test]
fn the_pre_push_hook_leaves_run_records_alone() {
    let r = TestRepo::simple();
    let (_bare, _other) = two_clones(&r);
    let id = a_failing_run_in(&r, &r.root, "hooked");
    let out = r
        .factory()
        .args(["hook", "install"])
        .output()
        .expect("hook");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // Verification that fails: code pushes are blocked, run records are not verified.
    r.git(&["config", "factory.verify", "false"]);
    r.git(&["commit", "-q", "--allow-empty", "-m", "code"]);
    let bin = assert_cmd::cargo::cargo_bin("git-factory");
    let path = format!(
        "{}:{}",
        bin.parent().expect("dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut push = assert_cmd::Command::new("git");
    hermetic(&mut push, &r.home);
    let code = push
        .current_dir(&r.root)
        .env("PATH", &path)
        .args(["push", "-q", "origin", "main"])
        .output()
        .expect("push");
    assert_ne!(code.status.code(), Some(0), "the hook blocks failing code");
    let mut share = r.factory();
    let out = share.env("PATH", &path).arg("push").output().expect("push");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(!stderr_of(&out).contains("blocked"), "{}", stderr_of(&out));
    let mut plain = assert_cmd::Command::new("git");
    hermetic(&mut plain, &r.home);
    let out = plain
        .current_dir(&r.root)
        .env("PATH", &path)
        .args([
            "push",
            "origin",
            &format!("refs/factory/{id}:refs/factory/{id}-copy"),
        ])
        .output()
        .expect("push");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(!stderr_of(&out).contains("verified"), "{}", stderr_of(&out));
}

#[test]
fn fetched_run_refs_that_are_not_commits_are_skipped_and_named() {
    let r = TestRepo::simple();
    let (bare, _other) = two_clones(&r);
    let git_in = |dir: &Path, args: &[&str]| {
        let out = in_dir(&r, dir, "git", args);
        assert!(out.status.success(), "{args:?}: {}", stderr_of(&out));
        stdout_of(&out).trim().to_string()
    };
    // The remote holds a run ref pointing at a blob, and a good run.
    let good = a_failing_run_in(&r, &r.root, "good");
    r.git(&["push", "-q", "origin", &format!("refs/factory/{good}")]);
    r.git(&["update-ref", "-d", &format!("refs/factory/{good}")]);
    let blob = git_in(&bare, &["hash-object", "-w", "--stdin"]);
    let bad = "abcdef012345";
    git_in(
        &bare,
        &["update-ref", &format!("refs/factory/{bad}"), &blob],
    );

    let out = r.factory().args(["fetch"]).output().expect("fetch");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains(&format!(
            "warning: skipped origin's refs/factory/{bad}: it points at a blob, not a run record"
        )),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(r.run_ids(), vec![good.clone()]);

    // One that got in another way is named, with the way to remove it.
    r.git(&["update-ref", &format!("refs/factory/{bad}"), &blob]);
    for args in [vec!["show", bad], vec!["apply", bad]] {
        let out = r.factory().args(&args).output().expect("runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr_of(&out);
        assert!(
            err.contains(&format!(
                "error: refs/factory/{bad} points at a blob, not a run record"
            )),
            "{args:?}: {err}"
        );
        assert!(
            err.contains(&format!("git update-ref -d refs/factory/{bad}")),
            "{args:?}: {err}"
        );
    }
    let out = r
        .factory()
        .args(["log", "--no-pager"])
        .output()
        .expect("log");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(stdout_of(&out).contains(&good), "{}", stdout_of(&out));
    assert!(
        stderr_of(&out).contains(&format!(
            "warning: refs/factory/{bad} points at a blob, not a run record (not listed); it was damaged or fetched from an untrusted place; delete it with git update-ref -d refs/factory/{bad}"
        )),
        "{}",
        stderr_of(&out)
    );
    r.git(&["update-ref", "-d", &format!("refs/factory/{bad}")]);

    // A remote whose notes ref is a blob: explained, nothing changed here.
    git_in(&bare, &["update-ref", "refs/notes/factory", &blob]);
    let notes_before = r.git_code(&["rev-parse", "-q", "--verify", "refs/notes/factory"]);
    let out = r.factory().args(["fetch"]).output().expect("fetch");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out)
            .contains("origin's refs/notes/factory points at a blob, not a notes commit"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(
        r.git_code(&["rev-parse", "-q", "--verify", "refs/notes/factory"]),
        notes_before
    );
}

/// A run killed in this clone, whose run id a finished run of another clone has too: every
/// command that could change the repo refuses, pointing to `recover` (SPEC §7), and the killed
/// run's RUNNING record is never replaced by the fetched one; `log` and `show` still work.
#[test]
fn after_a_killed_run_every_command_that_could_change_the_repo_points_to_recover() {
    for worktree in [false, true] {
        let r = TestRepo::simple();
        let (_bare, other) = two_clones(&r);
        let theirs = a_failing_run_in(&r, &other, "same");
        assert_eq!(
            in_dir(&r, &other, "factory", &["push"]).status.code(),
            Some(0)
        );
        // The same order and proposal here, killed mid-run.
        let mut order = basic_order(&["false"]);
        order["id"] = "wo-same".into();
        let wo = r.work_order(order);
        let replay = r.replay(
            "rp-killed",
            &[(
                "1.json",
                proposal(
                    &diff_replace("app.txt", &["one", "two", "three"], "two", "TWO"),
                    "same",
                ),
            )],
        );
        let mut flags = vec!["--max-attempts", "1"];
        if worktree {
            flags.push("--worktree");
        }
        let out = r
            .replay_command(&wo, &replay, &flags)
            .env("GIT_FACTORY_TEST_CRASH_AT", "during_verify")
            .output()
            .expect("runs");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(9), "{}", stderr_of(&out));
        assert_eq!(r.run_ids(), vec![theirs.clone()], "the same run id");
        let record = r.git(&["rev-parse", &format!("refs/factory/{theirs}")]);
        let commands: [&[&str]; 8] = [
            &["fetch"],
            &["push"],
            &["prune", "--older-than", "0s"],
            &["hook", "install"],
            &["attest", "verify", "HEAD"],
            &["verify", "HEAD"],
            &["apply", &theirs],
            &["reverify", &theirs],
        ];
        for args in commands {
            let out = r.factory().args(args).output().expect("runs");
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr_of(&out));
            assert!(
                stderr_of(&out).contains("git factory recover"),
                "{args:?} (worktree {worktree}): {}",
                stderr_of(&out)
            );
        }
        assert_eq!(
            r.git(&["rev-parse", &format!("refs/factory/{theirs}")]),
            record,
            "the killed run's record is as it was"
        );
        assert!(!r.root.join(".git/hooks/pre-push").exists());
        for args in [&["log"][..], &["show", &theirs]] {
            let out = r.factory().args(args).output().expect("runs");
            assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr_of(&out));
        }
        let rec = r.factory().arg("recover").output().expect("recover");
        assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
        let out = r.factory().arg("fetch").output().expect("fetch");
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    }
}
