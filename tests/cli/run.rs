//! `git factory run` end to end: verdicts, rollback, briefs, artifacts, refusals.

use crate::common::*;
use serde_json::{json, Value};

const APP: [&str; 3] = ["one", "two", "three"];

fn good() -> String {
    proposal(
        &diff_replace("app.txt", &APP, "two", "TWO"),
        "uppercase two",
    )
}

fn wrong() -> String {
    proposal(
        &diff_replace("app.txt", &APP, "two", "Two"),
        "capitalise two",
    )
}

const CHECK_TWO: &str = "grep -qx TWO app.txt";

#[test]
fn pass_on_first_attempt_leaves_the_change_uncommitted() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&[CHECK_TWO]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let out = r.run_replay(&wo, &replay, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    assert_eq!(r.git(&["status", "--porcelain"]), " M app.txt\n");
    let ids = r.run_ids();
    assert_eq!(ids.len(), 1);
    let last = stderr_of(&out).lines().last().unwrap_or("").to_string();
    assert!(last.starts_with(&format!("PASS {}", ids[0])), "{last}");
    assert!(last.contains(&format!("refs/factory/{}", ids[0])));
}

#[test]
fn fail_then_pass_and_the_first_attempt_leaves_no_trace() {
    let r = TestRepo::simple();
    // Attempt 1 also creates a file; its rollback must remove it.
    let mut order = basic_order(&[CHECK_TWO]);
    order["allowed_files"] = json!(["app.txt", "made/new.txt"]);
    let attempt1 = format!(
        "{}diff --git a/made/new.txt b/made/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/made/new.txt\n@@ -0,0 +1 @@\n+x\n",
        diff_replace("app.txt", &APP, "two", "Two")
    );
    let wo = r.work_order(order);
    let replay = r.replay(
        "rp",
        &[("1.json", proposal(&attempt1, "a")), ("2.json", good())],
    );
    let out = r.run_replay(&wo, &replay, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        !r.root.join("made").exists(),
        "attempt 1's new file and folder are gone"
    );
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    let summary: Value = serde_json::from_str(&stdout_of(&out)).expect("json summary");
    assert_eq!(summary["verdict"], "PASS");
    assert_eq!(
        summary["attempts"][0]["failure_brief"]["stage"],
        "acceptance_failed"
    );
    assert_eq!(summary["attempts"][1]["apply_method"], "strict");
    // The brief fed to attempt 2 names the failing command; the prompt includes it.
    let run_id = summary["run_id"].as_str().expect("id");
    let prompt = r.git(&[
        "show",
        &format!("refs/factory/{run_id}:attempt_2/prompt.txt"),
    ]);
    assert!(prompt.contains("The previous attempt failed"));
    assert!(prompt.contains("grep -qx TWO app.txt"));
}

#[test]
fn all_attempts_failing_leave_the_repo_byte_identical() {
    let r = TestRepo::simple();
    r.write(".env", "SECRET=1\n");
    r.write("build/cache.bin", "cached\n");
    // Touch the index so its bytes are what git last wrote.
    r.git(&["status", "--porcelain"]);
    let before = r.snapshot();
    let order = json!({
        "id": "wo-f", "title": "t", "intent": "i",
        "allowed_files": ["app.txt", ".env"],
        "acceptance_commands": ["sh -c 'echo junk > junk.txt; echo more >> other.txt; mkdir -p d/e; echo x > d/e/f; false'"],
    });
    let wo = r.work_order(order);
    let touch_env =
        "diff --git a/.env b/.env\n--- a/.env\n+++ b/.env\n@@ -1 +1 @@\n-SECRET=1\n+SECRET=2\n";
    let replay = r.replay(
        "rp",
        &[
            ("1.json", wrong()),
            ("2.json", proposal(touch_env, "edit the ignored file")),
            ("3.json", good()),
        ],
    );
    let out = r.run_replay(&wo, &replay, &["--max-attempts", "3"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(r.snapshot(), before);
    assert_eq!(r.read(".env").as_deref(), Some("SECRET=1\n"));
    assert!(stderr_of(&out)
        .lines()
        .last()
        .unwrap_or("")
        .starts_with("FAIL "));
}

#[test]
fn no_shell_is_used_for_acceptance() {
    let r = TestRepo::simple();
    // Quoted, `&&` is an argument on purpose (a bare one is refused up front).
    let wo = r.work_order(basic_order(&["echo ok '&&' false"]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let out = r.run_replay(&wo, &replay, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(
        s["attempts"][0]["acceptance"][0]["stdout_trunc"],
        "ok && false\n"
    );
}

#[test]
fn missing_program_is_a_spawn_error_not_a_crash() {
    let r = TestRepo::simple();
    // A path (a name is looked up on PATH and refused before the first attempt).
    let wo = r.work_order(basic_order(&["./no-such-program-here --flag"]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let out = r.run_replay(&wo, &replay, &["--json", "--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    let cmd = &s["attempts"][0]["acceptance"][0];
    assert!(
        cmd["spawn_error"]
            .as_str()
            .unwrap_or("")
            .contains("not found"),
        "{cmd}"
    );
    assert_eq!(cmd["exit_code"], Value::Null);
    assert_eq!(r.read("app.txt").as_deref(), Some("one\ntwo\nthree\n"));
}

#[test]
fn timeout_kills_a_backgrounded_grandchild() {
    let r = TestRepo::simple();
    let pidfile = r.outside.join("pid");
    let cmd = format!("sh -c 'sleep 300 & echo $! > {}; wait'", pidfile.display());
    let wo = r.work_order(basic_order(&[&cmd]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let out = r.run_replay(
        &wo,
        &replay,
        &["--json", "--max-attempts", "1", "--timeout-seconds", "1"],
    );
    assert_eq!(out.status.code(), Some(1));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["attempts"][0]["acceptance"][0]["timed_out"], true);
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .expect("pid")
        .trim()
        .parse()
        .expect("number");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let alive = std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ");
    assert!(!alive, "grandchild {pid} survived the timeout");
}

#[test]
fn verify_script_runs_through_bash_without_the_exec_bit() {
    let r = TestRepo::with_files(&[
        ("app.txt", "one\ntwo\nthree\n"),
        ("scripts/verify.sh", "grep -q TWO app.txt\n"),
    ]);
    let wo = r.work_order(basic_order(&["true"]));
    let replay = r.replay("rp", &[("1.json", wrong()), ("2.json", good())]);
    let out = r.run_replay(&wo, &replay, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["attempts"][0]["failure_brief"]["stage"], "verify_failed");
    assert_eq!(
        s["attempts"][0]["verify"][0]["command"],
        json!(["bash", "scripts/verify.sh"])
    );
}

#[test]
fn no_change_proposal_goes_to_po() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["grep -qx two app.txt"]));
    let replay = r.replay(
        "rp",
        &[(
            "1.json",
            json!({"unified_diff": "", "summary": "already done"}).to_string(),
        )],
    );
    let out = r.run_replay(&wo, &replay, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.git(&["status", "--porcelain"]), "");
}

#[test]
fn a_repeated_proposal_is_not_verified_again() {
    let r = TestRepo::simple();
    let counter = r.outside.join("count");
    let cmd = format!("sh -c 'echo x >> {}; false'", counter.display());
    let wo = r.work_order(basic_order(&[&cmd]));
    let replay = r.replay("rp", &[("1.json", good()), ("2.json", good())]);
    let out = r.run_replay(&wo, &replay, &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&counter).expect("count"), "x\n");
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["attempts"][1]["repeat_of"], 1);
    assert!(s["attempts"][1]["failure_brief"]["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .contains("repeated attempt 1"));
}

#[test]
fn writes_proposals_check_base_sha256() {
    let r = TestRepo::simple();
    let sha = {
        use sha2::{Digest, Sha256};
        let d = Sha256::digest(b"one\ntwo\nthree\n");
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let bad = json!({"writes": [{"path": "app.txt", "base_sha256": "0".repeat(64), "content": "one\nTWO\nthree\n"}], "summary": "s"});
    let ok = json!({"writes": [{"path": "app.txt", "base_sha256": sha, "content": "one\nTWO\nthree\n"}], "summary": "s"});
    let wo = r.work_order(basic_order(&[CHECK_TWO]));
    let replay = r.replay(
        "rp",
        &[("1.json", bad.to_string()), ("2.json", ok.to_string())],
    );
    let out = r.run_replay(&wo, &replay, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(
        s["attempts"][0]["failure_brief"]["stage"],
        "patch_apply_failed"
    );
    assert_eq!(s["attempts"][1]["apply_method"], "writes");
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
}

#[test]
fn invalid_output_fails_the_attempt_with_no_change() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&[CHECK_TWO]));
    let replay = r.replay(
        "rp",
        &[
            (
                "1.json",
                "Sure! Here is the patch:\n```diff\n```".to_string(),
            ),
            ("2.json", good()),
        ],
    );
    let out = r.run_replay(&wo, &replay, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(
        s["attempts"][0]["failure_brief"]["stage"],
        "llm_output_invalid"
    );
    assert_eq!(s["attempts"][0]["apply_ok"], false);
    let id = s["run_id"].as_str().expect("id");
    let raw = r.git(&[
        "show",
        &format!("refs/factory/{id}:attempt_1/llm_output.txt"),
    ]);
    assert!(raw.starts_with("Sure! Here is the patch"));
}

#[test]
fn replay_running_out_ends_the_run_with_llm_call_failed() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&[CHECK_TWO]));
    let replay = r.replay("rp", &[("1.json", wrong())]);
    let out = r.run_replay(&wo, &replay, &["--json", "--max-attempts", "3"]);
    assert_eq!(out.status.code(), Some(1));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["attempts"].as_array().map(Vec::len), Some(2));
    assert_eq!(s["ended_stage"], "llm_call_failed");
    assert!(s["attempts"][1]["failure_brief"]["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .contains("replay has no proposal 2"));
}

#[test]
fn replay_with_both_json_and_diff_is_refused_at_start() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&[CHECK_TWO]));
    let replay = r.replay(
        "rp",
        &[
            ("1.json", good()),
            ("1.diff", diff_replace("app.txt", &APP, "two", "TWO")),
        ],
    );
    let before = r.snapshot();
    let out = r.run_replay(&wo, &replay, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("both 1.json and 1.diff"));
    assert_eq!(r.snapshot(), before);
    assert!(r.run_ids().is_empty());
}

#[test]
fn out_dir_gets_the_seed_layout() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&[CHECK_TWO]));
    let replay = r.replay("rp", &[("1.json", wrong()), ("2.json", good())]);
    let out_dir = r.outside.join("artifacts");
    let out = r
        .factory()
        .args(["run", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let id = &r.run_ids()[0];
    let base = out_dir.join(id);
    for f in [
        "run_summary.json",
        "attempt_1/prompt.txt",
        "attempt_1/llm_output.txt",
        "attempt_1/proposed_patch.diff",
        "attempt_1/apply_result.json",
        "attempt_1/verify_result.json",
        "attempt_1/acceptance_result.json",
        "attempt_1/failure_brief.json",
        "attempt_1/acceptance_0_stdout.txt",
        "attempt_1/acceptance_0_stderr.txt",
        "attempt_2/apply_result.json",
    ] {
        assert!(base.join(f).is_file(), "missing {f}");
    }
    assert!(!base.join("attempt_2/failure_brief.json").exists());
    let apply: Value = serde_json::from_str(
        &std::fs::read_to_string(base.join("attempt_2/apply_result.json")).expect("read"),
    )
    .expect("json");
    assert_eq!(apply["method"], "strict");
    assert!(stderr_of(&out).contains("run_summary.json"));
}

#[test]
fn dry_run_prints_the_prompt_and_changes_nothing() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&[CHECK_TWO]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let before = r.snapshot();
    let out = r.run_replay(&wo, &replay, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(0));
    let prompt = stdout_of(&out);
    assert!(prompt.contains("# Work order wo-1: Change app.txt"));
    assert!(prompt.contains("- app.txt"));
    assert!(prompt.contains("one\ntwo\nthree\n"));
    assert!(prompt.contains("Output contract"));
    assert_eq!(r.snapshot(), before);
    assert!(r.run_ids().is_empty());
    // The same inputs give the same prompt, byte for byte.
    let again = r.run_replay(&wo, &replay, &["--dry-run"]);
    assert_eq!(stdout_of(&again), prompt);
}

#[test]
fn work_order_from_stdin_and_inline_flags() {
    let r = TestRepo::simple();
    let replay = r.replay("rp", &[("1.json", good())]);
    let out = r
        .factory()
        .args(["run", "-w", "-", "--replay"])
        .arg(&replay)
        .write_stdin(basic_order(&[CHECK_TWO]).to_string())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let r2 = TestRepo::simple();
    let out = r2
        .factory()
        .args([
            "run",
            "--id",
            "wo-1",
            "--title",
            "Change app.txt",
            "--intent",
            "Replace two with TWO.",
            "--allow",
            "app.txt",
            "--context",
            "app.txt",
            "--accept",
            CHECK_TWO,
            "--replay",
        ])
        .arg(&replay)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // Inline flags hash like the equivalent JSON: both repos have the same tree, so same run id.
    assert_eq!(r.run_ids(), r2.run_ids());
}
