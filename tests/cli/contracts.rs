//! Red→green contracts (SPEC §3.8) and protected paths (SPEC §3.5): the baseline check before
//! any model call, its cache, the PO order, and the checks a proposal may not bend. The model
//! is an `--agent-command` script that counts its calls in a file outside the repo.

use crate::common::*;
use serde_json::{json, Value};
use std::path::PathBuf;

const CALC: [&str; 2] = ["def absolute(x):", "    return x"];
const RED: &str = "python -m unittest tests/test_calc.py";
const GREEN: &str = "python -m unittest tests/test_positive.py";

/// A small Python project: `absolute` is wrong for negative numbers; one test says so, one
/// test of positive numbers passes.
fn python_project() -> TestRepo {
    let r = TestRepo::with_files(&[
        ("calc.py", "def absolute(x):\n    return x\n"),
        (
            "tests/test_calc.py",
            "import unittest\n\nfrom calc import absolute\n\n\nclass Absolute(unittest.TestCase):\n    def test_negative(self):\n        self.assertEqual(absolute(-3), 3)\n",
        ),
        (
            "tests/test_positive.py",
            "import unittest\n\nfrom calc import absolute\n\n\nclass Positive(unittest.TestCase):\n    def test_positive(self):\n        self.assertEqual(absolute(2), 2)\n",
        ),
    ]);
    r.git(&["config", "factory.verify", "true"]);
    r
}

fn fix() -> String {
    proposal(
        &diff_replace(
            "calc.py",
            &CALC,
            "    return x",
            "    return -x if x < 0 else x",
        ),
        "negate negative numbers",
    )
}

fn contract_order(fail_to_pass: &[&str], pass_to_pass: &[&str]) -> Value {
    json!({
        "id": "abs-neg",
        "title": "absolute() of negative numbers",
        "intent": "absolute(x) must return -x for negative x.",
        "allowed_files": ["calc.py"],
        "context_files": ["calc.py"],
        "fail_to_pass": fail_to_pass,
        "pass_to_pass": pass_to_pass,
    })
}

/// An `--agent-command` that appends a line to a counter file outside the repo, keeps the
/// request it got, and prints `answer`.
struct Agent {
    argv: String,
    calls: PathBuf,
    requests: PathBuf,
}

impl Agent {
    fn new(r: &TestRepo, answer: &str) -> Self {
        let calls = r.outside.join("model-calls");
        let requests = r.outside.join("requests");
        std::fs::create_dir_all(&requests).expect("mkdir");
        let answer_file = r.outside.join("answer.json");
        std::fs::write(&answer_file, answer).expect("write");
        let script = r.outside.join("agent.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho call >> '{calls}'\ncat > '{req}'/$(wc -l < '{calls}' | tr -d ' ').json\ncat '{answer}'\n",
                calls = calls.display(),
                req = requests.display(),
                answer = answer_file.display()
            ),
        )
        .expect("write");
        Agent {
            argv: format!("sh {}", script.display()),
            calls,
            requests,
        }
    }

    fn calls(&self) -> usize {
        lines_in(&self.calls)
    }

    fn prompt(&self, n: usize) -> String {
        let text =
            std::fs::read_to_string(self.requests.join(format!("{n}.json"))).expect("request");
        let v: Value = serde_json::from_str(&text).expect("json");
        v["prompt"].as_str().unwrap_or("").to_string()
    }
}

fn run(r: &TestRepo, agent: &Agent, order: Value, flags: &[&str]) -> std::process::Output {
    let wo = r.work_order(order);
    r.factory()
        .arg("run")
        .args(flags)
        .arg("--agent-command")
        .arg(&agent.argv)
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("git factory runs")
}

/// A check command that appends `label` to a counter outside the repo, then runs `cmd`.
fn counted(r: &TestRepo, label: &str, cmd: &str) -> String {
    format!(
        "sh -c 'echo {label} >> {}; {cmd}'",
        r.outside.join("checks").display()
    )
}

fn checks_run(r: &TestRepo) -> Vec<String> {
    std::fs::read_to_string(r.outside.join("checks"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn nothing_recorded(r: &TestRepo) {
    assert!(r.run_ids().is_empty(), "no run record: {:?}", r.run_ids());
    assert_eq!(
        r.git_code(&["rev-parse", "-q", "--verify", "refs/notes/factory"])
            .0,
        1,
        "no note"
    );
}

#[test]
fn red_to_green_passes_and_the_first_prompt_shows_the_red_test() {
    let r = python_project();
    let agent = Agent::new(&r, &fix());
    let out = run(&r, &agent, contract_order(&[RED], &[GREEN]), &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(agent.calls(), 1);
    let prompt = agent.prompt(1);
    assert!(
        prompt.contains("## The failing tests, run on the original files"),
        "{prompt}"
    );
    assert!(
        prompt.contains(&format!("command: {RED}\nexit code: 1\n")),
        "{prompt}"
    );
    assert!(prompt.contains("AssertionError: -3 != 3"), "{prompt}");
    assert!(prompt.contains(&format!("- {GREEN} (pass_to_pass")));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("summary");
    assert_eq!(s["verdict"], "PASS");
    assert_eq!(s["baseline_check"]["result"], "red");
    let kinds: Vec<&str> = s["baseline_check"]["commands"]
        .as_array()
        .expect("commands")
        .iter()
        .map(|c| c["kind"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(kinds, ["verify", "pass_to_pass", "fail_to_pass"]);
    let red = &s["baseline_check"]["commands"][2];
    assert_eq!(
        (red["passed"].clone(), red["exit_code"].clone()),
        (json!(false), json!(1))
    );
    assert!(red["excerpt"]
        .as_str()
        .unwrap_or("")
        .contains("AssertionError"));
    assert_eq!(s["contract"]["fail_to_pass"], json!([RED]));
    assert_eq!(s["attempts"][0]["pass_to_pass"][0]["exit_code"], 0);
    assert_eq!(s["attempts"][0]["fail_to_pass"][0]["exit_code"], 0);
    assert_eq!(
        r.read("calc.py").as_deref(),
        Some("def absolute(x):\n    return -x if x < 0 else x\n")
    );
    assert_eq!(r.git(&["status", "--porcelain"]), " M calc.py\n");
    // show: the contract and the baseline check; --json: the stored summary with both.
    let id = s["run_id"].as_str().expect("id");
    let shown = r.factory().args(["show", id]).output().expect("show");
    assert_eq!(shown.status.code(), Some(0));
    let text = stdout_of(&shown);
    assert!(text.contains(&format!("fail_to_pass: {RED}")), "{text}");
    assert!(
        text.contains("protected:") && text.contains("tests/test_calc.py"),
        "{text}"
    );
    assert!(text.contains("baseline check: red"), "{text}");
    // The baseline's logs are in the record; reverify re-runs the contract on the attempt.
    let log = r.git(&[
        "show",
        &format!("refs/factory/{id}:baseline/fail_to_pass_0_stderr.txt"),
    ]);
    assert!(log.contains("AssertionError: -3 != 3"), "{log}");
    let again = r
        .factory()
        .args(["reverify", id])
        .output()
        .expect("reverify");
    assert_eq!(again.status.code(), Some(0), "{}", stderr_of(&again));
    assert!(
        stdout_of(&again).contains("recorded passed"),
        "{}",
        stdout_of(&again)
    );
    let stored = r
        .factory()
        .args(["show", "--json", id])
        .output()
        .expect("show");
    let stored: Value = serde_json::from_slice(&stored.stdout).expect("json");
    assert_eq!(stored["baseline_check"], s["baseline_check"]);
}

#[test]
fn a_broken_baseline_is_refused_before_any_model_call_and_nothing_is_recorded() {
    let r = python_project();
    r.git(&["status", "--porcelain"]);
    let before = r.snapshot();
    let agent = Agent::new(&r, &fix());
    // pass_to_pass fails on the baseline; its command leaves a file behind, which goes too.
    let broken = "sh -c 'touch left-behind.txt; python -m unittest tests/test_calc.py'";
    let out = run(&r, &agent, contract_order(&[RED], &[broken]), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(err.contains("error: the baseline is broken"), "{err}");
    assert!(
        err.contains("touch left-behind.txt") && err.contains("(pass_to_pass) → exit 1"),
        "{err}"
    );
    assert!(
        err.contains("AssertionError: -3 != 3"),
        "the excerpt: {err}"
    );
    assert!(err.contains("hint:"), "{err}");
    assert_eq!(agent.calls(), 0, "no model call");
    nothing_recorded(&r);
    assert_eq!(r.snapshot(), before);

    // Global verification failing on the baseline is refused the same way.
    r.git(&[
        "config",
        "factory.verify",
        "sh -c 'echo verification says no; exit 3'",
    ]);
    let out = run(&r, &agent, contract_order(&[RED], &[]), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(err.contains("(global verification) → exit 3"), "{err}");
    assert!(err.contains("verification says no"), "{err}");
    assert_eq!(agent.calls(), 0);
    nothing_recorded(&r);
    assert_eq!(r.snapshot(), before);
}

#[test]
fn an_order_already_satisfied_passes_with_no_attempt_and_is_recorded() {
    let r = python_project();
    r.git(&["status", "--porcelain"]);
    let before = r.snapshot();
    let agent = Agent::new(&r, &fix());
    let out = run(&r, &agent, contract_order(&[GREEN], &[]), &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(agent.calls(), 0, "no model call");
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("summary");
    assert_eq!(s["verdict"], "PASS");
    assert_eq!(s["ended_stage"], "already_satisfied");
    assert_eq!(s["attempts"], json!([]));
    assert_eq!(s["baseline_check"]["result"], "already_satisfied");
    let id = s["run_id"].as_str().expect("id").to_string();
    assert_eq!(r.run_ids(), vec![id.clone()]);
    assert_eq!(r.snapshot(), before, "nothing changed in the tree");
    let last = stderr_of(&out).lines().last().unwrap_or("").to_string();
    assert!(
        last.starts_with(&format!("PASS {id} after 0 attempts (already_satisfied)")),
        "{last}"
    );
    assert!(last.contains("nothing to change"), "{last}");
    assert!(!last.contains("in your work tree"), "{last}");
    let note = r.git(&["notes", "--ref=factory", "show", "HEAD"]);
    assert!(
        note.contains(&format!("factory {id} PASS abs-neg attempts=0")),
        "{note}"
    );
    // log marks it.
    let log = stdout_of(&r.factory().args(["log"]).output().expect("log"));
    let line = log.lines().find(|l| l.contains(&id)).unwrap_or("");
    assert!(line.contains("already satisfied"), "{log}");
    let applied = r.factory().args(["apply", &id]).output().expect("apply");
    assert_eq!(applied.status.code(), Some(0), "{}", stderr_of(&applied));
    assert!(stderr_of(&applied).contains("no change to apply"));
    assert_eq!(r.snapshot(), before);
}

#[test]
fn a_red_command_that_is_already_green_is_refused_as_not_a_failing_test() {
    let r = python_project();
    let agent = Agent::new(&r, &fix());
    let out = run(&r, &agent, contract_order(&[RED, GREEN], &[]), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(err.contains("not a failing test"), "{err}");
    assert!(err.contains(&format!("passes already: {GREEN}")), "{err}");
    assert!(!err.contains(&format!("passes already: {RED}")), "{err}");
    assert_eq!(agent.calls(), 0);
    nothing_recorded(&r);
}

#[test]
fn the_second_run_on_the_same_baseline_runs_no_baseline_command() {
    let r = python_project();
    r.git(&["config", "factory.verify", &counted(&r, "verify", "true")]);
    let mut order = contract_order(&[&counted(&r, "red", RED)], &[&counted(&r, "green", GREEN)]);
    // The acceptance commands run on the baseline too, for their per-test reports: cached
    // like the rest.
    order["acceptance_commands"] = json!([counted(&r, "accept", "true")]);
    // The model answers prose: PO never runs in an attempt, so every check line is the
    // baseline check's.
    let agent = Agent::new(&r, "I think the fix is easy.");
    let out = run(&r, &agent, order.clone(), &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    // The red result is confirmed by a second run (SPEC §3.9).
    assert_eq!(checks_run(&r), ["verify", "green", "red", "red", "accept"]);
    assert_eq!(agent.calls(), 1);
    // Same baseline, same contract, another run (forced): the baseline check is free, and the
    // red result still reaches the prompt.
    let out = run(
        &r,
        &agent,
        order.clone(),
        &["--max-attempts", "1", "--force", "--json"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(
        checks_run(&r),
        ["verify", "green", "red", "red", "accept"],
        "nothing ran again"
    );
    assert_eq!(agent.calls(), 2);
    assert!(agent.prompt(2).contains("AssertionError: -3 != 3"));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("summary");
    assert!(s["baseline_check"]["commands"]
        .as_array()
        .expect("commands")
        .iter()
        .all(|c| c["cached"] == json!(true)));
    // git factory verify shares the cache: the baseline's verification passed already.
    let v = r.factory().args(["verify"]).output().expect("verify");
    assert_eq!(v.status.code(), Some(0), "{}", stderr_of(&v));
    assert!(stderr_of(&v).contains("cached"), "{}", stderr_of(&v));
    assert_eq!(checks_run(&r).len(), 5);
}

#[test]
fn git_factory_verify_fills_the_cache_a_run_reads() {
    let r = python_project();
    r.git(&["config", "factory.verify", &counted(&r, "verify", "true")]);
    let v = r.factory().args(["verify"]).output().expect("verify");
    assert_eq!(v.status.code(), Some(0), "{}", stderr_of(&v));
    assert_eq!(checks_run(&r), ["verify"]);
    let agent = Agent::new(&r, "prose");
    let out = run(
        &r,
        &agent,
        contract_order(&[RED], &[]),
        &["--max-attempts", "1"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(
        checks_run(&r),
        ["verify"],
        "verification came from the cache"
    );
}

#[test]
fn a_regression_fails_the_attempt_at_stage_regression() {
    let r = python_project();
    // "Fixes" negatives by always returning 3: the red test passes, the green one breaks.
    let bad = proposal(
        &diff_replace("calc.py", &CALC, "    return x", "    return 3"),
        "return 3",
    );
    let agent = Agent::new(&r, &bad);
    let out = run(
        &r,
        &agent,
        contract_order(&[RED], &[GREEN]),
        &["--max-attempts", "1", "--json"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("summary");
    assert_eq!(s["attempts"][0]["failure_brief"]["stage"], "regression");
    assert_eq!(s["attempts"][0]["failure_brief"]["command"], GREEN);
    assert_eq!(
        s["attempts"][0]["fail_to_pass"],
        Value::Null,
        "fail_to_pass did not run"
    );
    assert_eq!(
        r.read("calc.py").as_deref(),
        Some("def absolute(x):\n    return x\n")
    );
}

#[test]
fn a_red_test_still_red_after_the_change_is_acceptance_failed() {
    let r = python_project();
    let noop = proposal(
        &diff_replace("calc.py", &CALC, "    return x", "    return x  # fixed"),
        "comment",
    );
    let agent = Agent::new(&r, &noop);
    let mut order = contract_order(&[RED], &[]);
    order["acceptance_commands"] = json!(["true"]);
    let out = run(&r, &agent, order, &["--max-attempts", "1", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("summary");
    assert_eq!(
        s["attempts"][0]["failure_brief"]["stage"],
        "acceptance_failed"
    );
    assert_eq!(s["attempts"][0]["failure_brief"]["command"], RED);
    assert_eq!(
        s["attempts"][0]["acceptance"],
        json!([]),
        "acceptance runs after fail_to_pass"
    );
}

#[test]
fn a_proposal_editing_a_contract_test_is_refused_as_protected() {
    let r = python_project();
    // The cheapest way to green: rewrite the test that judges the change.
    let test_lines = [
        "import unittest",
        "",
        "from calc import absolute",
        "",
        "",
        "class Absolute(unittest.TestCase):",
        "    def test_negative(self):",
        "        self.assertEqual(absolute(-3), 3)",
    ];
    let cheat = proposal(
        &diff_replace(
            "tests/test_calc.py",
            &test_lines,
            "        self.assertEqual(absolute(-3), 3)",
            "        self.assertEqual(absolute(-3), -3)",
        ),
        "fix the test",
    );
    let writes = json!({"writes": [{"path": "./tests//test_calc.py", "base_sha256": null, "content": "x"}], "summary": "s"}).to_string();
    let replay = r.replay("rp", &[("1.json", cheat), ("2.json", writes)]);
    let wo = r.work_order(contract_order(&[RED], &[]));
    let out = r.run_replay(&wo, &replay, &["--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("summary");
    for a in 0..2 {
        let brief = &s["attempts"][a]["failure_brief"];
        assert_eq!(brief["stage"], "patch_scope_violation");
        let text = brief["primary_error_excerpt"].as_str().unwrap_or("");
        assert!(
            text.contains("tests/test_calc.py: protected (it is named by the fail_to_pass command"),
            "{text}"
        );
    }
    assert_eq!(
        s["attempts"][0]["touched_files"],
        json!(["tests/test_calc.py"])
    );
    assert!(r
        .read("tests/test_calc.py")
        .unwrap_or_default()
        .contains("absolute(-3), 3)"));
}

#[test]
fn an_order_allowing_a_protected_path_is_refused_at_validation() {
    let r = python_project();
    r.write("scripts/verify.sh", "exit 0\n");
    r.write(".github/workflows/ci.yml", "on: push\n");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "more"]);
    r.git(&["config", "--add", "factory.protect", ".github/**"]);
    let agent = Agent::new(&r, &fix());
    let cases: [(&str, &str); 4] = [
        (
            "tests/test_calc.py",
            "it is named by the fail_to_pass command `python -m unittest tests/test_calc.py`",
        ),
        (
            "tests/test_positive.py",
            "it is named by the pass_to_pass command",
        ),
        ("scripts/verify.sh", "it is the global verification script"),
        (
            ".github/workflows/ci.yml",
            "it matches git config factory.protect \".github/**\"",
        ),
    ];
    for (path, why) in cases {
        let mut order = contract_order(&[RED], &[GREEN]);
        order["allowed_files"] = json!(["calc.py", format!("./{path}")]);
        let out = run(&r, &agent, order, &["--dry-run"]);
        assert_eq!(out.status.code(), Some(2), "{path}: {}", stderr_of(&out));
        let err = stderr_of(&out);
        assert!(
            err.contains(&format!(
                "error: invalid work order: allowed_files: \"{path}\" is protected: {why}"
            )),
            "{err}"
        );
        assert!(err.contains("hint: remove it from allowed_files"), "{err}");
    }
    // A path the contract names that does not exist at the baseline is not protected.
    let mut order = contract_order(&["python -m unittest tests/test_new.py"], &[]);
    order["allowed_files"] = json!(["calc.py", "tests/test_new.py"]);
    let out = run(&r, &agent, order, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(agent.calls(), 0);
    nothing_recorded(&r);
}

#[test]
fn factory_protect_globs_refuse_files_even_without_a_contract() {
    let r = TestRepo::simple();
    r.write("tests/check.sh", "exit 0\n");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "tests"]);
    r.git(&["config", "--add", "factory.protect", "tests/**"]);
    // A new file under tests/ is as protected as an old one.
    let create = "diff --git a/tests/new.sh b/tests/new.sh\nnew file mode 100644\n--- /dev/null\n+++ b/tests/new.sh\n@@ -0,0 +1 @@\n+exit 0\n";
    let replay = r.replay("rp", &[("1.json", proposal(create, "new test"))]);
    let wo = r.work_order(basic_order(&["true"]));
    let out = r.run_replay(&wo, &replay, &["--json", "--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("summary");
    let brief = &s["attempts"][0]["failure_brief"];
    assert_eq!(brief["stage"], "patch_scope_violation");
    assert!(brief["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .contains("tests/new.sh: protected (it matches git config factory.protect \"tests/**\")"));
    assert!(!r.root.join("tests/new.sh").exists());
    assert!(
        s["baseline_check"].is_null(),
        "no contract: no baseline check by default"
    );
}

#[test]
fn the_baseline_check_follows_its_flags_and_config() {
    let r = python_project();
    let agent = Agent::new(&r, "prose");
    // Already satisfied, but the check is off: the model is asked.
    let out = run(
        &r,
        &agent,
        contract_order(&[GREEN], &[]),
        &["--no-baseline-check", "--max-attempts", "1"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(agent.calls(), 1);
    r.git(&["config", "factory.baselineCheck", "false"]);
    let out = run(
        &r,
        &agent,
        contract_order(&[GREEN], &[]),
        &["--max-attempts", "2"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(agent.calls(), 3);
    // The flag wins over the config.
    let out = run(
        &r,
        &agent,
        contract_order(&[GREEN], &[]),
        &["--baseline-check", "--max-attempts", "3"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(agent.calls(), 3);
    // On for an order without a contract: a broken verification is refused before the model.
    r.git(&["config", "factory.verify", "false"]);
    let out = run(&r, &agent, basic_order(&["true"]), &["--baseline-check"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("the baseline is broken: `false` (global verification)"));
    assert_eq!(agent.calls(), 3);
    r.git(&["config", "factory.baselineCheck", "maybe"]);
    let out = run(&r, &agent, basic_order(&["true"]), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("git config factory.baselineCheck has an invalid value"));
}

#[test]
fn the_baseline_check_runs_in_the_worktree_in_worktree_mode() {
    let r = python_project();
    r.write("calc.py", "def absolute(x):\n    return abs(x)\n");
    let agent = Agent::new(&r, &fix());
    // The user's uncommitted fix is not the baseline: HEAD is, and its test is red.
    let out = run(
        &r,
        &agent,
        contract_order(&[RED], &[GREEN]),
        &["--worktree", "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(agent.calls(), 1);
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("summary");
    assert_eq!(s["baseline_check"]["result"], "red");
    assert_eq!(
        r.read("calc.py").as_deref(),
        Some("def absolute(x):\n    return abs(x)\n")
    );
}

#[test]
fn a_red_command_that_cannot_start_is_refused() {
    let r = python_project();
    let agent = Agent::new(&r, &fix());
    let out = run(
        &r,
        &agent,
        contract_order(&["no-such-test-runner tests/test_calc.py"], &[]),
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains(
            "the fail_to_pass command `no-such-test-runner tests/test_calc.py` could not start"
        ),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(agent.calls(), 0);
    nothing_recorded(&r);
}

#[test]
fn dry_run_shows_the_cached_red_result_and_runs_nothing() {
    let r = python_project();
    let order = contract_order(&[&counted(&r, "red", RED)], &[]);
    let agent = Agent::new(&r, "prose");
    let out = run(&r, &agent, order.clone(), &["--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(checks_run(&r).is_empty(), "a dry run runs no check");
    assert!(!stdout_of(&out).contains("## The failing tests"));
    let out = run(&r, &agent, order.clone(), &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(checks_run(&r), ["red", "red"]);
    let out = run(&r, &agent, order, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out).contains("AssertionError: -3 != 3"),
        "{}",
        stdout_of(&out)
    );
    assert_eq!(checks_run(&r), ["red", "red"]);
    assert_eq!(agent.calls(), 1);
}

#[test]
fn ctrl_c_during_the_baseline_check_leaves_no_record_and_caches_nothing() {
    let r = python_project();
    r.git(&["status", "--porcelain"]);
    let before = r.snapshot();
    let marker = r.outside.join("started");
    let slow = format!(
        "sh -c 'touch {} left-behind.txt; sleep 59'",
        marker.display()
    );
    let wo = r.work_order(contract_order(&[&slow], &[]));
    let agent = Agent::new(&r, &fix());
    let child = r
        .spawn(&["run", "-q", "--agent-command", &agent.argv, "-w"])
        .arg(&wo)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    wait_for(&marker);
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("signal");
    let out = child.wait_with_output().expect("ends");
    assert_eq!(out.status.code(), Some(130), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("interrupted during the baseline check"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(agent.calls(), 0);
    nothing_recorded(&r);
    assert_eq!(r.snapshot(), before);
    assert!(processes_with("sleep 59").is_empty());
    assert!(r.journals().is_empty());
    let (_, notes) = r.git_code(&["log", "-p", "refs/notes/factory-verify"]);
    assert!(
        !notes.contains("RESULTS"),
        "an interrupted red is not cached: {notes}"
    );
}

#[test]
fn a_run_killed_during_the_baseline_check_is_recovered_with_no_record() {
    let r = python_project();
    r.git(&["status", "--porcelain"]);
    let before = r.snapshot();
    // The red command leaves a file behind, then the harness is killed while it runs.
    let red = "sh -c 'touch left-behind.txt; sleep 1; exit 1'";
    let agent = Agent::new(&r, &fix());
    let wo = r.work_order(contract_order(&[red], &[]));
    let out = r
        .factory()
        .env("GIT_FACTORY_TEST_CRASH_AT", "during_acceptance")
        .args(["run", "--agent-command", &agent.argv, "-w"])
        .arg(&wo)
        .output()
        .expect("runs");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9), "{}", stderr_of(&out));
    let again = r
        .factory()
        .args(["run", "--agent-command", &agent.argv, "-w"])
        .arg(&wo)
        .output()
        .expect("runs");
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr_of(&again).contains("git factory recover"),
        "{}",
        stderr_of(&again)
    );
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    std::thread::sleep(std::time::Duration::from_millis(1200));
    assert_eq!(r.snapshot(), before);
    assert_eq!(agent.calls(), 0);
    nothing_recorded(&r);
}

#[test]
fn a_contract_file_is_protected_however_the_command_spells_it() {
    let r = python_project();
    // A second name for the red test: a link inside the repo.
    std::os::unix::fs::symlink("test_calc.py", r.root.join("tests/link_calc.py")).expect("link");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "link"]);
    let agent = Agent::new(&r, &fix());
    let absolute = format!(
        "python -m unittest {}",
        r.root.join("tests/test_calc.py").display()
    );
    let spellings = [
        absolute.as_str(),
        "python -m unittest tests/../tests/test_calc.py",
        "sh -c 'python -m unittest tests/test_calc.py;'",
        "sh -c 'python -m unittest tests/test_calc.py&&true'",
        "sh -c 'python - <tests/test_calc.py'",
        "python -m unittest tests/link_calc.py",
    ];
    for red in spellings {
        let mut order = contract_order(&[red], &[]);
        order["allowed_files"] = json!(["calc.py", "tests/test_calc.py"]);
        let out = run(&r, &agent, order, &["--dry-run"]);
        assert_eq!(out.status.code(), Some(2), "{red}: {}", stderr_of(&out));
        let err = stderr_of(&out);
        assert!(
            err.contains(&format!(
                "error: invalid work order: allowed_files: \"tests/test_calc.py\" is protected: it is named by the fail_to_pass command `{red}`"
            )),
            "{red}: {err}"
        );
    }
    // The link itself is protected too: editing it bends the check as much.
    let mut order = contract_order(&["python -m unittest tests/link_calc.py"], &[]);
    order["allowed_files"] = json!(["calc.py", "tests/link_calc.py"]);
    let out = run(&r, &agent, order, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert_eq!(agent.calls(), 0);
    nothing_recorded(&r);
}

/// The verify cache's key of a command list, as `roles::po::cache::key` computes it.
fn cache_key(command: &str) -> String {
    use sha2::{Digest, Sha256};
    let words = shlex::split(command).expect("splits").join("\u{1f}");
    Sha256::digest(words.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn only_results_this_clone_ran_are_believed_from_the_verify_cache() {
    let r = python_project();
    let red = counted(&r, "red", RED);
    let tree = r.git(&["rev-parse", "HEAD^{tree}"]).trim().to_string();
    let key = cache_key(&red);
    let argv = serde_json::to_string(&shlex::split(&red).expect("splits")).expect("json");
    let green = format!(
        r#"[{{"kind":"fail_to_pass","command":{argv},"passed":true,"exit_code":0,"outcome":"exit 0","excerpt":"","duration_seconds":0.0,"cached":false}}]"#
    );
    // Hand-written notes claiming the red test passes: unsealed, and with a made-up seal.
    let unsealed = format!("RESULTS {key} {green}");
    let made_up = format!("RESULTS {key} {} {green}", "0".repeat(64));
    for line in [&unsealed, &made_up] {
        r.git(&["notes", "--ref=factory-verify", "append", "-m", line, &tree]);
    }
    let agent = Agent::new(&r, &fix());
    let out = run(&r, &agent, contract_order(&[&red], &[]), &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("summary");
    assert_eq!(s["ended_stage"], "success", "not already_satisfied");
    assert_eq!(s["baseline_check"]["result"], "red");
    assert_eq!(s["baseline_check"]["commands"][0]["cached"], json!(false));
    assert_eq!(agent.calls(), 1);
    assert_eq!(checks_run(&r)[0], "red", "the red test ran on the baseline");

    // Results sealed by another clone (another secret) are not believed either.
    r.git(&["checkout", "--", "calc.py"]);
    std::fs::write(r.root.join(".git/factory/verify-key"), [7u8; 32]).expect("write");
    let runs_before = checks_run(&r).len();
    let out = run(
        &r,
        &agent,
        contract_order(&[&red], &[]),
        &["--json", "--force"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("summary");
    assert_eq!(s["baseline_check"]["commands"][0]["cached"], json!(false));
    assert!(checks_run(&r).len() > runs_before);
    // Its own results it believes: the next run on this baseline runs no baseline command.
    r.git(&["checkout", "--", "calc.py"]);
    let out = run(
        &r,
        &agent,
        contract_order(&[&red], &[]),
        &["--json", "--force"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("summary");
    assert_eq!(s["baseline_check"]["commands"][0]["cached"], json!(true));
}

#[test]
fn git_factory_fetch_never_brings_the_verify_cache() {
    let r = python_project();
    let tree = r.git(&["rev-parse", "HEAD^{tree}"]).trim().to_string();
    r.git(&[
        "notes",
        "--ref=factory-verify",
        "add",
        "-m",
        "PASS x",
        &tree,
    ]);
    let bare = r.outside.join("remote.git");
    r.git(&["init", "-q", "--bare", bare.to_str().expect("utf-8")]);
    r.git(&["remote", "add", "origin", bare.to_str().expect("utf-8")]);
    r.git(&["push", "-q", "origin", "main", "refs/notes/factory-verify"]);
    // git factory push does not send it either.
    let other = r.outside.join("other.git");
    r.git(&["init", "-q", "--bare", other.to_str().expect("utf-8")]);
    r.git(&["config", "factory.verify", "true"]);
    let agent = Agent::new(&r, &fix());
    let out = run(&r, &agent, contract_order(&[RED], &[]), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let out = r
        .factory()
        .args(["push", other.to_str().expect("utf-8")])
        .output()
        .expect("push");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let sent = r.git(&["ls-remote", other.to_str().expect("utf-8")]);
    assert!(
        sent.contains("refs/factory/") && !sent.contains("factory-verify"),
        "{sent}"
    );
    // A teammate's clone.
    let mate = TestRepo::with_files(&[("x", "x\n")]);
    mate.git(&["remote", "add", "origin", bare.to_str().expect("utf-8")]);
    let out = mate
        .factory()
        .args(["fetch", "origin"])
        .output()
        .expect("fetch");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        mate.git_code(&["rev-parse", "-q", "--verify", "refs/notes/factory-verify"])
            .0,
        1,
        "the verify cache is local state"
    );
}
