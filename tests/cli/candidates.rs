//! Best of N (`--candidates`): candidates in their own worktrees, the gates pick the winner,
//! several models race, one record, a token budget, interruption.

use crate::common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

const APP: [&str; 3] = ["one", "two", "three"];

/// The acceptance command: app.txt's second line must be TWO.
const ACCEPT: &str = "grep -qx TWO app.txt";

fn good() -> String {
    diff_replace("app.txt", &APP, "two", "TWO")
}

/// A passing change that also rewrites a second line: more changed lines.
fn good_long() -> String {
    "diff --git a/app.txt b/app.txt\n--- a/app.txt\n+++ b/app.txt\n@@ -1,3 +1,3 @@\n-one\n-two\n+ONE\n+TWO\n three\n"
        .to_string()
}

fn bad() -> String {
    diff_replace("app.txt", &APP, "two", "zwei")
}

/// An `--agent-command` script printing, as its proposal, the diff file named after its
/// `FACTORY_CANDIDATE` (`c<i>.diff`), or failing when there is none.
fn agent_by_candidate(r: &TestRepo, diffs: &[(u32, String)]) -> String {
    let dir = r.outside.join("agent");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (i, diff) in diffs {
        std::fs::write(dir.join(format!("c{i}.diff")), diff).expect("write");
    }
    let script = dir.join("agent.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat >/dev/null\necho \"$FACTORY_CANDIDATE\" >> {seen}\nexec cat {dir}/c$FACTORY_CANDIDATE.diff\n",
            seen = r.outside.join("seen").display(),
            dir = dir.display()
        ),
    )
    .expect("write");
    format!("sh {}", script.display())
}

struct Ran {
    code: i32,
    stderr: String,
    summary: Value,
}

fn run(r: &TestRepo, flags: &[&str]) -> Ran {
    let wo = r.work_order(basic_order(&[ACCEPT]));
    let out = r
        .factory()
        .args(["run", "--json", "-w"])
        .arg(&wo)
        .args(flags)
        .output()
        .expect("runs");
    Ran {
        code: out.status.code().unwrap_or(-1),
        stderr: stderr_of(&out),
        summary: serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null),
    }
}

/// Nothing of a race is left: no worktree but idle pooled ones (and git's records of them),
/// no branch, no lock, no scratch index.
fn assert_nothing_left(r: &TestRepo) {
    let git_dir = r.root.join(".git");
    let pooled = only_idle_pooled_worktrees(r);
    let gits = std::fs::read_dir(git_dir.join("worktrees"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
        .unwrap_or_default();
    assert_eq!(gits.len(), pooled, "git worktree records left: {gits:?}");
    assert_eq!(r.git(&["branch", "--list"]).trim(), "* main", "no branch");
    let factory = std::fs::read_dir(git_dir.join("factory"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    assert!(
        !factory
            .iter()
            .any(|f| f.starts_with("index.") || f == "journal"),
        "scratch files left: {factory:?}"
    );
}

fn candidates(summary: &Value) -> Vec<Value> {
    summary["candidates"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn replay_folders_where_only_some_pass_deliver_the_winner_in_the_users_tree() {
    let r = TestRepo::simple();
    let dir = r.outside.join("replays");
    for (i, diffs) in [
        (1, vec![bad(), bad()]),
        (2, vec![bad(), good()]),
        (3, vec![bad()]),
    ] {
        let sub = dir.join(i.to_string());
        std::fs::create_dir_all(&sub).expect("mkdir");
        for (n, d) in diffs.iter().enumerate() {
            std::fs::write(sub.join(format!("{}.json", n + 1)), proposal(d, "try")).expect("w");
        }
    }
    let ran = run(
        &r,
        &[
            "--candidates",
            "3",
            "--jobs",
            "2",
            "--replay",
            dir.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let s = &ran.summary;
    assert_eq!(s["verdict"], "PASS");
    assert_eq!(s["winner"], 2);
    let c = candidates(s);
    let verdicts: Vec<&str> = c
        .iter()
        .map(|c| c["verdict"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(verdicts, ["FAIL", "PASS", "FAIL"]);
    assert_eq!(c[0]["attempts"], 2);
    assert_eq!(c[1]["attempts"], 2);
    assert_eq!(c[2]["attempts"], 2, "the replay ran out at attempt 2");
    assert_eq!(c[2]["ended_stage"], "llm_call_failed");
    assert_eq!(c[1]["changed_lines"], 2);
    // Delivered like a single run: in the user's tree, uncommitted, verified there.
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    assert_eq!(s["attempts"].as_array().map(Vec::len), Some(1));
    assert!(s["attempts"][0]["acceptance"][0]["exit_code"] == 0);
    // One record: the run commit's parents are every candidate's attempt commits (the
    // delivery attempt's commit too).
    let id = s["run_id"].as_str().expect("id");
    let parents = r.git(&[
        "rev-list",
        "--parents",
        "-n1",
        &format!("refs/factory/{id}"),
    ]);
    assert_eq!(parents.split_whitespace().count() - 1, 2 + 2 + 1);
    let stored = r.git(&[
        "show",
        &format!("refs/factory/{id}:candidate_2/attempt_2/proposed_patch.diff"),
    ]);
    assert!(stored.contains("+TWO"));
    assert!(
        ran.stderr
            .contains("1/3 candidates passed; candidate 2 wins"),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr
            .contains(&format!("PASS {id} after 6 attempts in 3 candidates (")),
        "the final line counts the candidates' attempts: {}",
        ran.stderr
    );
    r.git(&["checkout", "--", "app.txt"]);
    assert_nothing_left(&r);
    // log counts, show lists the candidates.
    let log = r.factory().args(["log"]).output().expect("log");
    assert!(
        stdout_of(&log).contains("1/3 passed"),
        "{}",
        stdout_of(&log)
    );
    let show = r.factory().args(["show", id]).output().expect("show");
    let shown = stdout_of(&show);
    assert!(
        shown.contains("candidates: 1/3 passed, winner 2"),
        "{shown}"
    );
    assert!(
        shown.contains("after 6 attempts in 3 candidates (2 at most each)"),
        "{shown}"
    );
    assert!(
        shown
            .lines()
            .any(|l| l.trim_start().starts_with("*  2") && l.contains("PASS")),
        "{shown}"
    );
}

#[test]
fn consensus_beats_size_and_fewest_lines_break_the_rest() {
    let r = TestRepo::simple();
    // Candidates 2 and 3 agree on the longer change; 1 has the short one; 4 fails.
    let agent = agent_by_candidate(
        &r,
        &[(1, good()), (2, good_long()), (3, good_long()), (4, bad())],
    );
    let ran = run(
        &r,
        &[
            "--candidates",
            "4",
            "--max-attempts",
            "1",
            "--agent-command",
            &agent,
        ],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(ran.summary["winner"], 2);
    let c = candidates(&ran.summary);
    assert_eq!(c[1]["change_set"], c[2]["change_set"]);
    assert_ne!(c[0]["change_set"], c[1]["change_set"]);
    assert_eq!(r.read("app.txt").as_deref(), Some("ONE\nTWO\nthree\n"));
    // Every candidate's agent was told its index.
    let mut seen: Vec<String> = std::fs::read_to_string(r.outside.join("seen"))
        .expect("seen")
        .lines()
        .map(str::to_string)
        .collect();
    seen.sort();
    assert_eq!(seen, ["1", "2", "3", "4"]);

    // Without consensus the fewest changed lines win, whatever the index.
    let r = TestRepo::simple();
    let agent = agent_by_candidate(&r, &[(1, good_long()), (2, good()), (3, bad())]);
    let ran = run(
        &r,
        &[
            "--candidates",
            "3",
            "--max-attempts",
            "1",
            "--agent-command",
            &agent,
        ],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(ran.summary["winner"], 2);
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
}

/// The record of a run without what depends on the clock.
fn timeless(mut s: Value) -> Value {
    for key in [
        "started_utc",
        "started_unix_ms",
        "ended_utc",
        "duration_seconds",
        "repo_path",
        "work_order_path",
    ] {
        s[key] = Value::Null;
    }
    for list in ["candidates", "attempts"] {
        if let Some(items) = s[list].as_array_mut() {
            for c in items {
                c["duration_seconds"] = Value::Null;
                // Commits carry the time they were made.
                c["tree_commit"] = Value::Null;
                for kind in ["verify", "acceptance"] {
                    if let Some(cmds) = c[kind].as_array_mut() {
                        for cmd in cmds {
                            cmd["duration_seconds"] = Value::Null;
                        }
                    }
                }
            }
        }
    }
    s
}

#[test]
fn jobs_1_and_jobs_3_give_the_same_run() {
    let results: Vec<Value> = ["1", "3"]
        .iter()
        .map(|jobs| {
            let r = TestRepo::simple();
            agent_by_candidate(&r, &[(1, bad()), (2, good_long()), (3, good())]);
            // The agent's argv is part of the run id: the same words in both repos.
            let wo = r.work_order(basic_order(&[ACCEPT]));
            let out = r
                .factory()
                .env("AGENT_DIR", r.outside.join("agent"))
                .args(["run", "--json", "-w"])
                .arg(&wo)
                .args(["--candidates", "3", "--jobs", jobs, "--max-attempts", "1"])
                .args(["--agent-command", "sh -c 'exec sh \"$AGENT_DIR/agent.sh\"'"])
                .output()
                .expect("runs");
            let ran = Ran {
                code: out.status.code().unwrap_or(-1),
                stderr: stderr_of(&out),
                summary: serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null),
            };
            assert_eq!(ran.code, 0, "jobs {jobs}: {}", ran.stderr);
            assert_nothing_left_but_the_change(&r);
            timeless(ran.summary)
        })
        .collect();
    assert_eq!(results[0]["winner"], 3);
    assert_eq!(results[0], results[1]);
}

fn assert_nothing_left_but_the_change(r: &TestRepo) {
    r.git(&["checkout", "--", "app.txt"]);
    assert_nothing_left(r);
}

#[test]
fn no_pass_is_fail_with_the_repo_byte_identical() {
    let r = TestRepo::simple();
    r.write(".env", "SECRET=1\n");
    let before = r.snapshot();
    let agent = agent_by_candidate(&r, &[(1, bad()), (2, bad())]);
    let ran = run(
        &r,
        &[
            "--candidates",
            "2",
            "--max-attempts",
            "2",
            "--agent-command",
            &agent,
        ],
    );
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert_eq!(ran.summary["verdict"], "FAIL");
    assert_eq!(
        ran.summary.as_object().and_then(|o| o.get("winner")),
        Some(&Value::Null),
        "the key is present"
    );
    assert_eq!(ran.summary["attempts"].as_array().map(Vec::len), Some(0));
    let c = candidates(&ran.summary);
    assert_eq!(c.len(), 2);
    assert!(c
        .iter()
        .all(|c| c["verdict"] == "FAIL" && c["attempts"] == 2));
    assert_eq!(r.snapshot(), before);
    assert_nothing_left(&r);
    // Cached like any finished run.
    let again = run(
        &r,
        &[
            "--candidates",
            "2",
            "--max-attempts",
            "2",
            "--agent-command",
            &agent,
        ],
    );
    assert_eq!(again.code, 1);
    assert!(
        again.stderr.contains("already recorded"),
        "{}",
        again.stderr
    );
}

#[test]
fn worktree_mode_commits_the_winner_on_its_branch_and_leaves_the_tree_alone() {
    let r = TestRepo::simple();
    r.write("app.txt", "dirty\n");
    let agent = agent_by_candidate(&r, &[(1, bad()), (2, good())]);
    let ran = run(
        &r,
        &[
            "--worktree",
            "--candidates",
            "2",
            "--max-attempts",
            "1",
            "--agent-command",
            &agent,
        ],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let id = ran.summary["run_id"].as_str().expect("id");
    assert_eq!(r.read("app.txt").as_deref(), Some("dirty\n"));
    let branch = format!("refs/heads/factory/run-{id}");
    assert_eq!(
        r.git(&["show", &format!("{branch}:app.txt")]),
        "one\nTWO\nthree\n"
    );
    r.git(&["branch", "-D", &format!("factory/run-{id}")]);
    r.git(&["checkout", "--", "app.txt"]);
    assert_nothing_left(&r);
}

#[test]
fn one_candidate_is_a_plain_run_with_the_same_run_id() {
    let r = TestRepo::simple();
    let replay = r.replay("one", &[("1.json", proposal(&good(), "fix"))]);
    let plain = run(&r, &["--replay", replay.to_str().expect("utf-8")]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    r.git(&["checkout", "--", "app.txt"]);
    let one = run(
        &r,
        &[
            "--candidates",
            "1",
            "--replay",
            replay.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(one.code, 0);
    assert!(one.stderr.contains("already recorded"), "{}", one.stderr);
    let two = run(
        &r,
        &[
            "--candidates",
            "2",
            "--replay",
            replay.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(two.code, 0, "{}", two.stderr);
    assert_ne!(two.summary["run_id"], plain.summary["run_id"]);
    // A flat folder serves every candidate: they agree, candidate 1 wins.
    assert_eq!(two.summary["winner"], 1);
}

#[test]
fn refusals_name_the_fix() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    for (flags, message) in [
        (
            vec!["--candidates", "0", "--replay", "x"],
            "--candidates must be at least 1",
        ),
        (
            vec!["--candidates", "2", "--jobs", "0", "--replay", "x"],
            "--jobs must be at least 1",
        ),
        (
            vec![
                "--llm-model",
                "a",
                "--llm-model",
                "b",
                "--llm-base-url",
                "http://127.0.0.1:9",
            ],
            "2 models were given for 1 candidate(s)",
        ),
        (
            vec!["--max-tokens", "0", "--replay", "x"],
            "--max-tokens must be at least 1",
        ),
    ] {
        let ran = run(&r, &flags);
        assert_eq!(ran.code, 2, "{flags:?}: {}", ran.stderr);
        assert!(ran.stderr.contains(message), "{flags:?}: {}", ran.stderr);
        assert!(ran.stderr.contains("hint:"), "{}", ran.stderr);
    }
    assert_eq!(r.snapshot(), before);
    assert!(r.run_ids().is_empty());
}

/// A loopback OpenAI-compatible server answering every request (on its own thread) by the
/// requested model: `good` proposes the passing change, anything else a failing one. Every
/// answer reports 150 tokens. Stops after `max` requests or 60 s without one.
fn model_server(max: usize) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    listener.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        let mut served = 0;
        let mut idle = std::time::Instant::now();
        while served < max && idle.elapsed() < std::time::Duration::from_secs(60) {
            let Ok((stream, _)) = listener.accept() else {
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            };
            served += 1;
            idle = std::time::Instant::now();
            stream.set_nonblocking(false).expect("blocking");
            let log = Arc::clone(&log);
            std::thread::spawn(move || answer_model(stream, &log));
        }
    });
    (url, seen)
}

fn answer_model(stream: std::net::TcpStream, log: &Mutex<Vec<Value>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut line = String::new();
    let mut length = 0usize;
    let _ = reader.read_line(&mut line);
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 {
            return;
        }
        let header = header.trim_end().to_ascii_lowercase();
        if header.is_empty() {
            break;
        }
        if let Some(v) = header.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let diff = if body["model"] == "good" {
        good()
    } else {
        bad()
    };
    log.lock().expect("lock").push(body);
    let answer = json!({
        "id": "x", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": proposal(&diff, "change")}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
    })
    .to_string();
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
        answer.len()
    );
}

#[test]
fn several_models_race_with_a_seed_per_candidate() {
    let r = TestRepo::simple();
    let (url, seen) = model_server(20);
    let ran = run(
        &r,
        &[
            "--llm-base-url",
            &url,
            "--llm-model",
            "bad",
            "--llm-model",
            "good",
            "--candidates",
            "3",
            "--max-attempts",
            "1",
        ],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(ran.summary["winner"], 2);
    let c = candidates(&ran.summary);
    let models: Vec<&str> = c
        .iter()
        .map(|c| c["model"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        models,
        [
            format!("openai:bad@{url}"),
            format!("openai:good@{url}"),
            format!("openai:bad@{url}")
        ]
    );
    assert_eq!(
        ran.summary["config"]["model"],
        format!("openai:bad@{url},openai:good@{url}")
    );
    assert!(c.iter().all(|c| c["tokens"] == 150));
    let mut asked: Vec<(String, u64)> = seen
        .lock()
        .expect("lock")
        .iter()
        .map(|b| {
            (
                b["model"].as_str().unwrap_or("").to_string(),
                b["seed"].as_u64().unwrap_or(999),
            )
        })
        .collect();
    asked.sort_by_key(|(_, seed)| *seed);
    assert_eq!(
        asked,
        [
            ("bad".to_string(), 1),
            ("good".to_string(), 2),
            ("bad".to_string(), 3)
        ]
    );
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
}

#[test]
fn the_token_budget_stops_the_race_and_a_single_run() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let (url, _) = model_server(20);
    // Each answer reports 150 tokens: the second answer goes past 200.
    let ran = run(
        &r,
        &[
            "--llm-base-url",
            &url,
            "--llm-model",
            "good",
            "--candidates",
            "3",
            "--jobs",
            "1",
            "--max-tokens",
            "200",
        ],
    );
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert_eq!(ran.summary["verdict"], "FAIL");
    assert_eq!(ran.summary["ended_stage"], "budget_exhausted");
    let stages: Vec<String> = candidates(&ran.summary)
        .iter()
        .map(|c| c["ended_stage"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(stages, ["success", "budget_exhausted", "budget_exhausted"]);
    assert_eq!(r.snapshot(), before);
    assert_nothing_left(&r);

    // A single run with a failing model: attempt 2's answer goes past the budget.
    let (url, _) = model_server(20);
    let ran = run(
        &r,
        &[
            "--llm-base-url",
            &url,
            "--llm-model",
            "bad",
            "--max-attempts",
            "3",
            "--max-tokens",
            "200",
        ],
    );
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert_eq!(ran.summary["ended_stage"], "budget_exhausted");
    assert_eq!(ran.summary["attempts"].as_array().map(Vec::len), Some(2));
    assert_eq!(r.snapshot(), before);
}

#[test]
fn ctrl_c_mid_race_stops_every_candidate_and_leaves_nothing() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let started = r.outside.join("started");
    let script = r.outside.join("slow.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat >/dev/null\ntouch {}.$FACTORY_CANDIDATE\nsleep 30\n",
            started.display()
        ),
    )
    .expect("write");
    let wo = r.work_order(basic_order(&[ACCEPT]));
    let mut child = r
        .spawn(&["run", "--candidates", "3", "--jobs", "3", "-w"])
        .arg(&wo)
        .arg("--agent-command")
        .arg(format!("sh {}", script.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(r.outside.join("stderr")).expect("create"))
        .spawn()
        .expect("spawn");
    for i in 1..=3 {
        let marker = r.outside.join(format!("started.{i}"));
        for _ in 0..1000 {
            if marker.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(
            marker.exists(),
            "candidate {i} never started: {}",
            std::fs::read_to_string(r.outside.join("stderr")).unwrap_or_default()
        );
    }
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("kill");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130));
    assert_eq!(r.snapshot(), before);
    assert_nothing_left(&r);
    assert!(processes_with(script.to_str().expect("utf-8")).is_empty());
    let ids = r.run_ids();
    assert_eq!(ids.len(), 1);
    let show = r.factory().args(["show", &ids[0]]).output().expect("show");
    assert!(
        stdout_of(&show).contains("INTERRUPTED"),
        "{}",
        stdout_of(&show)
    );
}

#[test]
fn kill_9_mid_race_then_recover_leaves_nothing() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let agent = agent_by_candidate(&r, &[(1, good()), (2, good()), (3, good())]);
    let marker = r.outside.join("checks");
    std::fs::create_dir_all(&marker).expect("mkdir");
    // Every candidate's check notes that it started, then hangs.
    let hang = format!(
        "sh -c 'mktemp -p {} started.XXXXXX >/dev/null; sleep 31'",
        marker.display()
    );
    let wo = r.work_order(basic_order(&[&hang]));
    // The run's temp dir, to count what it leaves there.
    let tmp = r.outside.join("tmp");
    std::fs::create_dir_all(&tmp).expect("mkdir");
    let mut child = r
        .spawn(&["run", "--candidates", "3", "--jobs", "3", "-w"])
        .arg(&wo)
        .arg("--agent-command")
        .arg(&agent)
        .env("TMPDIR", &tmp)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    for _ in 0..3000 {
        if std::fs::read_dir(&marker).map(|d| d.count()).unwrap_or(0) == 3 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        std::fs::read_dir(&marker).map(|d| d.count()).unwrap_or(0),
        3
    );
    child.kill().expect("kill -9");
    let _ = child.wait();
    let out = r.factory().arg("recover").output().expect("recover");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.snapshot(), before);
    assert_nothing_left(&r);
    // The run's per-test folders are named after its run id (in /var/tmp, else TMPDIR).
    let id = r
        .run_ids()
        .last()
        .cloned()
        .expect("the killed run's record");
    let leaked: Vec<_> = [tmp.clone(), std::path::PathBuf::from("/var/tmp")]
        .iter()
        .flat_map(std::fs::read_dir)
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| {
            let n = n.to_string_lossy();
            n.starts_with("git-factory-tests-") && n.contains(&id)
                || n.starts_with(&format!("git-factory-tests.{id}."))
        })
        .collect();
    assert!(leaked.is_empty(), "left in the temp dir: {leaked:?}");
    let factory: Vec<_> = std::fs::read_dir(r.root.join(".git/factory"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("tests."))
        .collect();
    assert!(factory.is_empty(), "left in .git/factory: {factory:?}");
    // The checks' process groups were stopped by recover (the kernel may take a moment).
    let mut left = processes_with(&marker.display().to_string());
    // (Bounded at 10 s: a loaded machine reaps slowly; an empty list returns at once.)
    for _ in 0..500 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        left = processes_with(&marker.display().to_string());
    }
    assert!(left.is_empty(), "{left:?}");
    let ids = r.run_ids();
    let show = r.factory().args(["show", &ids[0]]).output().expect("show");
    assert!(
        stdout_of(&show).contains("INTERRUPTED"),
        "{}",
        stdout_of(&show)
    );
}

#[test]
fn kill_9_mid_worktree_race_then_recover_leaves_nothing() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let agent = agent_by_candidate(&r, &[(1, good()), (2, good()), (3, good())]);
    let marker = r.outside.join("checks");
    std::fs::create_dir_all(&marker).expect("mkdir");
    // Every candidate's check notes that it started, then hangs.
    let hang = format!(
        "sh -c 'mktemp -p {} started.XXXXXX >/dev/null; sleep 31'",
        marker.display()
    );
    let wo = r.work_order(basic_order(&[&hang]));
    let mut child = r
        .spawn(&[
            "run",
            "--worktree",
            "--candidates",
            "3",
            "--jobs",
            "3",
            "-w",
        ])
        .arg(&wo)
        .arg("--agent-command")
        .arg(&agent)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    for _ in 0..3000 {
        if std::fs::read_dir(&marker).map(|d| d.count()).unwrap_or(0) == 3 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        std::fs::read_dir(&marker).map(|d| d.count()).unwrap_or(0),
        3
    );
    child.kill().expect("kill -9");
    let _ = child.wait();
    let out = r.factory().arg("recover").output().expect("recover");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("a --worktree race that was killed"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(r.snapshot(), before);
    assert_nothing_left(&r);
    // The checks' process groups were stopped by recover (the kernel may take a moment).
    let mut left = processes_with(&marker.display().to_string());
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        left = processes_with(&marker.display().to_string());
    }
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn coding_agents_edit_their_own_scratch_worktrees_side_by_side() {
    let r = TestRepo::simple();
    let script = r.outside.join("edit.sh");
    // Candidate 2 writes the passing line; the others a failing one.
    std::fs::write(
        &script,
        "#!/bin/sh\nif [ \"$FACTORY_CANDIDATE\" = 2 ]; then w=TWO; else w=zwei; fi\nprintf 'one\\n%s\\nthree\\n' \"$w\" > app.txt\n",
    )
    .expect("write");
    let ran = run(
        &r,
        &[
            "--candidates",
            "3",
            "--jobs",
            "3",
            "--max-attempts",
            "1",
            "--agent-edits",
            &format!("sh {}", script.display()),
        ],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(ran.summary["winner"], 2);
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    r.git(&["checkout", "--", "app.txt"]);
    assert_nothing_left(&r);
}
