//! Runs in git: the run commit, notes, the cache of finished runs, `log` and `show`.

use crate::common::*;
use serde_json::Value;

const APP: [&str; 3] = ["one", "two", "three"];

fn run_fail_then_pass(r: &TestRepo, counter: &std::path::Path) -> std::process::Output {
    run_fail_then_pass_with(r, counter, &[])
}

fn run_fail_then_pass_with(r: &TestRepo, counter: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let cmd = format!("sh -c 'echo x >> {}; grep -qx TWO app.txt'", counter.display());
    let wo = r.work_order(basic_order(&[&cmd]));
    let replay = r.replay(
        "rp",
        &[
            ("1.json", proposal(&diff_replace("app.txt", &APP, "two", "Two"), "first")),
            ("2.json", proposal(&diff_replace("app.txt", &APP, "two", "TWO"), "second")),
        ],
    );
    r.factory().args(["run", "-w"]).arg(&wo).arg("--replay").arg(&replay).args(extra).output().expect("runs")
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
    for f in ["run_summary.json", "work_order.json", "attempt_1/prompt.txt", "attempt_2/proposed_patch.diff"] {
        assert!(files.lines().any(|l| l == f), "missing {f} in {files}");
    }
    let parents: Vec<String> = r.git(&["rev-list", "--parents", "-n", "1", &run]).split_whitespace().skip(1).map(str::to_string).collect();
    assert_eq!(parents.len(), 2);
    let baseline = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    for (i, p) in parents.iter().enumerate() {
        assert_eq!(r.git(&["rev-parse", &format!("{p}^")]).trim(), baseline);
        let content = r.git(&["show", &format!("{p}:app.txt")]);
        assert_eq!(content, if i == 0 { "one\nTwo\nthree\n" } else { "one\nTWO\nthree\n" });
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
    let first_commit = r.git(&["rev-parse", &format!("refs/factory/{id}")]).trim().to_string();
    let again = run_fail_then_pass(&r, &counter);
    assert_eq!(again.status.code(), Some(0));
    assert!(stderr_of(&again).contains("already recorded"), "{}", stderr_of(&again));
    assert_eq!(std::fs::read_to_string(&counter).expect("count"), "x\nx\n");
    assert_eq!(r.read("app.txt").as_deref(), Some("one\ntwo\nthree\n"));
    // --force runs again and keeps the old run commit as a parent.
    let forced = run_fail_then_pass_with(&r, &counter, &["--force"]);
    assert_eq!(forced.status.code(), Some(0), "{}", stderr_of(&forced));
    let parents = r.git(&["rev-list", "--parents", "-n", "1", &format!("refs/factory/{id}")]);
    assert!(parents.contains(&first_commit), "{parents}");
    let note = r.git(&["notes", "--ref=factory", "show", "HEAD"]);
    assert_eq!(note.lines().count(), 1, "the same line is not appended twice: {note}");
}

#[test]
fn notes_are_appended_not_clobbered() {
    let r = TestRepo::simple();
    r.git(&["notes", "--ref=factory", "add", "-m", "a human note", "HEAD"]);
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
    assert!(line.starts_with(&id) && line.contains("PASS") && line.contains("wo-1") && line.contains("Change app.txt"), "{line}");
    let json_log: Value = serde_json::from_str(&stdout_of(&r.factory().args(["log", "--json"]).output().expect("log"))).expect("json");
    assert_eq!(json_log[0]["run_id"], id.as_str());
    assert_eq!(json_log[0]["attempts"], 2);
    let none = r.factory().args(["log", "--verdict", "fail"]).output().expect("log");
    assert_eq!(stdout_of(&none), "");

    let show = r.factory().args(["show", &id[..6]]).output().expect("show");
    assert_eq!(show.status.code(), Some(0), "{}", stderr_of(&show));
    let text = stdout_of(&show);
    assert!(text.contains("attempt 1: acceptance_failed") && text.contains("attempt 2: passed"), "{text}");
    let patch = stdout_of(&r.factory().args(["show", &id, "--patch"]).output().expect("show"));
    assert!(patch.contains("+TWO"));
    let patch1 = stdout_of(&r.factory().args(["show", &id, "--patch", "--attempt", "1"]).output().expect("show"));
    assert!(patch1.contains("+Two"));
    let stored = r.git(&["show", &format!("refs/factory/{id}:run_summary.json")]);
    assert_eq!(stdout_of(&r.factory().args(["show", &id, "--json"]).output().expect("show")), stored);
    let unknown = r.factory().args(["show", "ffffff"]).output().expect("show");
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr_of(&unknown).contains("no run matches ffffff"));
}
