//! History that survives: note text kept as bytes, pushes that lose no run to a race,
//! records of a bounded size, and `git factory prune`.

use crate::common::*;
use std::path::{Path, PathBuf};

const APP: [&str; 3] = ["one", "two", "three"];

fn in_dir(r: &TestRepo, dir: &Path, program: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = if program == "git" {
        assert_cmd::Command::new("git")
    } else {
        assert_cmd::Command::cargo_bin("git-factory").expect("binary")
    };
    hermetic(&mut cmd, &r.home);
    cmd.current_dir(dir).args(args).output().expect("runs")
}

fn git_ok(r: &TestRepo, dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = in_dir(r, dir, "git", args);
    assert!(out.status.success(), "git {args:?}: {}", stderr_of(&out));
    out.stdout
}

/// A FAIL run of work order `wo-<name>` in the clone at `dir`; returns its run id.
fn a_run(r: &TestRepo, dir: &Path, name: &str) -> String {
    let mut order = basic_order(&["false"]);
    order["id"] = format!("wo-{name}").into();
    let wo = r.work_order(order);
    let replay = r.replay(
        &format!("rp-{name}"),
        &[(
            "1.json",
            proposal(&diff_replace("app.txt", &APP, "two", "TWO"), name),
        )],
    );
    let out = in_dir(
        r,
        dir,
        "factory",
        &[
            "run",
            "--max-attempts",
            "1",
            "--json",
            "-w",
            wo.to_str().expect("utf8"),
            "--replay",
            replay.to_str().expect("utf8"),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let s: serde_json::Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    s["run_id"].as_str().expect("id").to_string()
}

/// A bare origin holding `main`, with the TestRepo as its first clone.
fn origin(r: &TestRepo) -> PathBuf {
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
    r.git(&["push", "-q", "origin", "main"]);
    bare
}

/// Another clone of the origin, set up to run work orders.
fn clone_of(r: &TestRepo, bare: &Path, name: &str) -> PathBuf {
    let dir = r.tmp.path().join(name);
    r.git(&[
        "clone",
        "-q",
        bare.to_str().expect("utf8"),
        dir.to_str().expect("utf8"),
    ]);
    git_ok(r, &dir, &["config", "factory.verify", "true"]);
    dir
}

/// The lines of the `refs/notes/factory` note on `rev`, as bytes, sorted.
fn note_lines(r: &TestRepo, dir: &Path, rev: &str) -> Vec<Vec<u8>> {
    let mut lines: Vec<Vec<u8>> = git_ok(r, dir, &["notes", "--ref=factory", "show", rev])
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    lines.sort();
    lines
}

#[test]
fn a_fetched_note_line_that_is_not_utf8_survives_the_next_runs_append() {
    let r = TestRepo::simple();
    let bare = origin(&r);
    let other = clone_of(&r, &bare, "other");
    // Someone else's note on the baseline, written by git in Latin-1, shared through origin.
    let latin1: &[u8] = b"reviewed by Ren\xe9 \xe0 Z\xfcrich";
    let file = r.outside.join("latin1-note");
    let mut text = latin1.to_vec();
    text.push(b'\n');
    std::fs::write(&file, &text).expect("write");
    git_ok(
        &r,
        &other,
        &[
            "notes",
            "--ref=factory",
            "add",
            "-F",
            file.to_str().expect("utf8"),
            "HEAD",
        ],
    );
    git_ok(&r, &other, &["push", "-q", "origin", "refs/notes/factory"]);

    // My own run, not pushed yet; then the fetch merges the Latin-1 line in.
    let mine = a_run(&r, &r.root, "mine");
    let out = r.factory().arg("fetch").output().expect("fetch");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let mine_line = format!("factory {mine} FAIL wo-mine attempts=1").into_bytes();
    let mut want = vec![latin1.to_vec(), mine_line];
    want.sort();
    assert_eq!(note_lines(&r, &r.root, "HEAD"), want, "the merge kept both");

    // The next run appends its line and drops none.
    let next = a_run(&r, &r.root, "next");
    want.push(format!("factory {next} FAIL wo-next attempts=1").into_bytes());
    want.sort();
    assert_eq!(
        note_lines(&r, &r.root, "HEAD"),
        want,
        "every earlier line kept byte for byte"
    );
    // And `git log --notes` still shows the run lines.
    let log = r.git(&["log", "-1", "--notes=factory", "--format=%N"]);
    assert!(log.contains(&next) && log.contains(&mine), "{log}");
}
