//! The agent audit among other live runs (SPEC §5.2, §7): the runs of a batch write their
//! records, their delivered branches and their note lines while an agent of another run is
//! working. The audit must not blame those writes on the agent, and its put-back must never
//! erase them; what an agent itself wrote is still found and taken back, line by line.

use crate::common::*;
use serde_json::Value;
use std::path::PathBuf;

const APP: [&str; 3] = ["one", "two", "three"];
const PASSES: &str = "grep -qx TWO app.txt";

/// An `--agent-command` script that reads its prompt, waits a little (so the batch's other
/// runs write their refs and notes while it works), runs `evil` when its prompt names the
/// work order `wo-evil`, and prints the proposal `two` → `TWO`.
fn agent(r: &TestRepo, evil: &str) -> String {
    let dir = r.outside.join("agent");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("change.diff"),
        diff_replace("app.txt", &APP, "two", "TWO"),
    )
    .expect("write");
    let script = dir.join("agent.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprompt=$(cat)\nsleep 0.3\n\
             case \"$prompt\" in *wo-evil*) {evil} ;; esac\n\
             exec cat {dir}/change.diff\n",
            dir = dir.display()
        ),
    )
    .expect("write");
    format!("sh {}", script.display())
}

/// A work order named `id`, written outside the repo.
fn order(r: &TestRepo, id: &str) -> PathBuf {
    let mut wo = basic_order(&[PASSES]);
    wo["id"] = id.into();
    wo["title"] = format!("order {id}").into();
    let path = r.outside.join(format!("{id}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&wo).expect("json")).expect("write");
    path
}

/// A work order named `id` with a red→green contract: its baseline check records the
/// contract's results in `refs/notes/factory-verify` (each order a command list of its own).
fn contract_order(r: &TestRepo, id: &str) -> PathBuf {
    let mut wo = basic_order(&[&format!("sh check-{id}.sh")]);
    wo["id"] = id.into();
    wo["title"] = format!("order {id}").into();
    wo["fail_to_pass"] = serde_json::json!([format!("sh check-{id}.sh")]);
    let path = r.outside.join(format!("{id}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&wo).expect("json")).expect("write");
    path
}

/// `git factory run --json --jobs 3 --max-attempts 1 -w ORDERS… --agent-command AGENT`.
fn batch(r: &TestRepo, orders: &[PathBuf], agent: &str) -> (Option<i32>, String, Vec<Value>) {
    let mut cmd = r.factory();
    cmd.args(["run", "--json", "--jobs", "3", "--max-attempts", "1", "-w"]);
    for o in orders {
        cmd.arg(o);
    }
    let out = cmd
        .args(["--agent-command", agent])
        .output()
        .expect("git factory runs");
    let runs = serde_json::from_str::<Vec<Value>>(&stdout_of(&out)).unwrap_or_default();
    (out.status.code(), stderr_of(&out), runs)
}

/// The note lines on HEAD in `refs/notes/factory`.
fn note_lines(r: &TestRepo) -> Vec<String> {
    let (code, text) = r.git_code(&["notes", "--ref", "factory", "show", "HEAD"]);
    if code != 0 {
        return Vec::new();
    }
    text.lines().map(str::to_string).collect()
}

fn stage_of(run: &Value) -> String {
    run["attempts"][0]["failure_brief"]["stage"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// No process this test started (the batch, its runs, their agents and checks, all of which
/// name files under the test's `outside` folder) is still running.
fn nothing_running(r: &TestRepo) {
    let left = processes_with(r.outside.to_str().expect("utf-8"));
    assert!(left.is_empty(), "still running: {left:?}");
}

fn orders(r: &TestRepo, ids: &[&str]) -> Vec<PathBuf> {
    ids.iter().map(|id| order(r, id)).collect()
}

fn has_branch(r: &TestRepo, name: &str) -> bool {
    r.git_code(&["rev-parse", "-q", "--verify", name]).0 == 0
}

#[test]
fn agents_of_a_batch_are_not_blamed_for_the_other_runs_writes() {
    for round in 0..3 {
        let r = TestRepo::simple();
        let ids = ["wo-0", "wo-1", "wo-2", "wo-3", "wo-4", "wo-5"];
        let (code, err, runs) = batch(&r, &orders(&r, &ids), &agent(&r, "true"));
        nothing_running(&r);
        let stages: Vec<String> = runs
            .iter()
            .map(|run| format!("{} {}", stage_of(run), run["attempts"][0]["failure_brief"]))
            .collect();
        assert_eq!(code, Some(0), "round {round}: {stages:?}\n{err}");
        assert_eq!(runs.len(), 6, "round {round}: {err}");
        for run in &runs {
            assert_eq!(run["verdict"], "PASS", "round {round}: {run}");
            let id = run["run_id"].as_str().expect("run_id");
            assert!(
                has_branch(&r, &format!("refs/heads/factory/run-{id}")),
                "round {round}: the PASS of {id} is delivered"
            );
        }
        assert_eq!(r.run_ids().len(), 6, "round {round}: one record per order");
        let lines = note_lines(&r);
        assert_eq!(
            lines.len(),
            6,
            "round {round}: one note line per run: {lines:?}"
        );
        for run in &runs {
            let id = run["run_id"].as_str().expect("run_id");
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with(&format!("factory {id} PASS "))),
                "round {round}: the note line of {id} is kept: {lines:?}"
            );
        }
    }
}

/// What an escaping agent does to the shared refs, once the batch's four other runs have
/// written their note lines while it worked: a forged run line, a note line of an earlier run
/// taken away, a branch named like a delivery of a run that does not exist. (It waits so that
/// no other agent is working when it escapes: an agent's audit cannot tell another agent's
/// writes from its own.)
fn evil(r: &TestRepo) -> String {
    let kept = r.outside.join("kept.txt");
    format!(
        "i=0; while [ \"$(git notes --ref factory show HEAD | grep -c ' PASS ')\" -lt 5 ] \
           && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; \
         git notes --ref factory append -m 'factory 000000000000 PASS forged attempts=1' HEAD; \
         git notes --ref factory show HEAD | grep -v '^factory earlier0000 ' > {kept}; \
         git notes --ref factory add -f -F {kept} HEAD; \
         git branch factory/deadbeef0000 HEAD",
        kept = kept.display()
    )
}

#[test]
fn an_agent_that_escapes_in_a_batch_is_caught_and_only_its_writes_are_taken_back() {
    for round in 0..2 {
        let r = TestRepo::simple();
        // A line of an earlier run, which the agent removes.
        r.git(&[
            "notes",
            "--ref",
            "factory",
            "add",
            "-m",
            "factory earlier0000 PASS wo-old attempts=1",
            "HEAD",
        ]);
        let ids = ["wo-0", "wo-1", "wo-evil", "wo-2", "wo-3"];
        let (code, err, runs) = batch(&r, &orders(&r, &ids), &agent(&r, &evil(&r)));
        nothing_running(&r);
        assert_eq!(code, Some(1), "round {round}: {err}");
        assert_eq!(runs.len(), 5, "round {round}: {err}");
        for run in &runs {
            let evil = run["work_order_id"] == "wo-evil";
            if evil {
                assert_eq!(run["verdict"], "FAIL", "round {round}: {run}");
                assert_eq!(stage_of(run), "agent_escaped", "round {round}: {run}");
            } else {
                assert_eq!(run["verdict"], "PASS", "round {round}: {run}");
            }
        }
        let lines = note_lines(&r);
        assert!(
            !lines.iter().any(|l| l.contains("forged")),
            "round {round}: the forged line is taken back: {lines:?}"
        );
        assert!(
            lines.iter().any(|l| l.starts_with("factory earlier0000 ")),
            "round {round}: the removed line is put back: {lines:?}"
        );
        // The earlier line, and one line per run of the batch.
        assert_eq!(lines.len(), 6, "round {round}: {lines:?}");
        for run in &runs {
            let id = run["run_id"].as_str().expect("run_id");
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with(&format!("factory {id} "))),
                "round {round}: the note line of {id} is kept: {lines:?}"
            );
        }
    }
}

/// The lines of the note on the baseline's tree in `refs/notes/factory-verify`.
fn verify_lines(r: &TestRepo) -> Vec<String> {
    let (code, text) = r.git_code(&["notes", "--ref", "factory-verify", "show", "HEAD^{tree}"]);
    if code != 0 {
        return Vec::new();
    }
    text.lines().map(str::to_string).collect()
}

/// An agent that, once the four other runs are done, replaces the note on the baseline's tree
/// in `refs/notes/factory-verify` by a forged line: the other runs' cached results are put
/// back, the forged line taken away.
fn forger(r: &TestRepo) -> String {
    let _ = r;
    "i=0; while [ \"$(git notes --ref factory show HEAD | grep -c ' PASS ')\" -lt 4 ] \
       && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; \
     git notes --ref factory-verify add -f -m 'PASS forged' 'HEAD^{tree}'"
        .to_string()
}

#[test]
fn other_runs_cached_results_are_kept_and_a_forged_one_taken_back() {
    let ids = ["wo-0", "wo-1", "wo-evil", "wo-2", "wo-3"];
    let files: Vec<(String, &str)> = ids
        .iter()
        .map(|id| (format!("check-{id}.sh"), "grep -qx TWO app.txt\n"))
        .collect();
    for round in 0..2 {
        let mut all: Vec<(&str, &str)> = vec![
            ("app.txt", "one\ntwo\nthree\n"),
            (".gitignore", ".env\nbuild/\n"),
        ];
        all.extend(files.iter().map(|(p, c)| (p.as_str(), *c)));
        let r = TestRepo::with_files(&all);
        r.git(&["config", "factory.verify", "true"]);
        let orders: Vec<PathBuf> = ids.iter().map(|id| contract_order(&r, id)).collect();
        let (code, err, runs) = batch(&r, &orders, &agent(&r, &forger(&r)));
        nothing_running(&r);
        assert_eq!(code, Some(1), "round {round}: {err}");
        for run in &runs {
            let evil = run["work_order_id"] == "wo-evil";
            let want = if evil { "FAIL" } else { "PASS" };
            assert_eq!(run["verdict"], want, "round {round}: {run}");
            if evil {
                assert_eq!(stage_of(run), "agent_escaped", "round {round}: {run}");
            }
        }
        let lines = verify_lines(&r);
        assert!(
            !lines.iter().any(|l| l.contains("forged")),
            "round {round}: {lines:?}"
        );
        // Every order's baseline check recorded its results on the baseline's tree: its red
        // command's, and its acceptance command's reports.
        for kind in ["fail_to_pass", "acceptance"] {
            let results = (lines.iter())
                .filter(|l| {
                    l.starts_with("RESULTS ") && l.contains(&format!("\"kind\":\"{kind}\""))
                })
                .count();
            assert_eq!(results, ids.len(), "round {round}: {kind}: {lines:?}");
        }
    }
}

#[test]
fn two_worktree_runs_started_by_hand_do_not_blame_each_others_agent() {
    for round in 0..3 {
        let r = TestRepo::simple();
        let agent = agent(&r, "true");
        let children: Vec<std::process::Child> = ["wo-a", "wo-b"]
            .iter()
            .map(|id| {
                r.spawn(&["run", "--json", "--worktree", "--max-attempts", "1", "-w"])
                    .arg(order(&r, id))
                    .args(["--agent-command", &agent])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("spawn")
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().expect("wait");
            let s: Value = serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null);
            assert_eq!(
                out.status.code(),
                Some(0),
                "round {round}: {s}\n{}",
                stderr_of(&out)
            );
        }
        nothing_running(&r);
        assert_eq!(
            note_lines(&r).len(),
            2,
            "round {round}: {:?}",
            note_lines(&r)
        );
    }
}

/// The check side-effect restore of an in-situ run, whose check runs while a `--worktree` run
/// beside it delivers its branch `factory/run-<run_id>`: that branch is the other run's, neither
/// deleted nor listed as a side effect.
#[test]
fn an_in_situ_runs_restore_keeps_a_worktree_runs_delivery() {
    let r = TestRepo::simple();
    let started = r.outside.join("started");
    let go = r.outside.join("go");
    let check = format!(
        "sh -c 'touch {started}; i=0; while [ ! -f {go} ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done; grep -qx TWO app.txt'",
        started = started.display(),
        go = go.display()
    );
    let mut in_situ_order = basic_order(&[&check]);
    in_situ_order["id"] = "wo-here".into();
    let in_situ_order = r.work_order(in_situ_order);
    let diff = diff_replace("app.txt", &APP, "two", "TWO");
    let replay = r.replay("proposals", &[("1.diff", diff)]);
    let in_situ = r.spawn_replay(&in_situ_order, &replay, &["--json", "--max-attempts", "1"]);
    wait_for(&started);
    let beside = r
        .factory()
        .args(["run", "--json", "--worktree", "-w"])
        .arg(order(&r, "wo-beside"))
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("runs");
    assert_eq!(beside.status.code(), Some(0), "{}", stderr_of(&beside));
    let theirs: Value = serde_json::from_str(&stdout_of(&beside)).expect("json");
    let branch = format!(
        "refs/heads/factory/run-{}",
        theirs["run_id"].as_str().expect("id")
    );
    std::fs::write(&go, "").expect("go");
    let out = in_situ.wait_with_output().expect("wait");
    nothing_running(&r);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert!(has_branch(&r, &branch), "{branch} is kept: {s}");
    assert!(
        !s["side_effects"].to_string().contains("factory/"),
        "not a side effect: {}",
        s["side_effects"]
    );
}

/// A slow agent's audit among runs of its batch that start and end while it works: their
/// records and seals are written and their harnesses are gone by the audit, yet they are
/// theirs — neither blamed on the agent nor taken away.
#[test]
fn runs_that_start_and_end_while_an_agent_works_keep_their_records_and_seals() {
    let r = TestRepo::simple();
    let agent = agent(&r, "sleep 4");
    let mut cmd = r.factory();
    cmd.args(["run", "--json", "--jobs", "2", "--max-attempts", "1", "-w"]);
    for o in orders(&r, &["wo-evil", "wo-1", "wo-2", "wo-3"]) {
        cmd.arg(o);
    }
    let out = cmd
        .args(["--agent-command", &agent])
        .output()
        .expect("runs");
    let runs = serde_json::from_str::<Vec<Value>>(&stdout_of(&out)).unwrap_or_default();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(runs.len(), 4);
    for run in &runs {
        assert_eq!(run["verdict"], "PASS", "{run}");
        let id = run["run_id"].as_str().expect("id");
        assert!(has_branch(&r, &format!("refs/factory/{id}")), "{id}");
        assert!(r.root.join(".git/factory/made").join(id).exists(), "{id}");
    }
    assert_eq!(note_lines(&r).len(), 4, "{:?}", note_lines(&r));
    nothing_running(&r);
}
