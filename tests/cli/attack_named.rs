//! Attacks on named tests (SPEC §3.9) and what they reuse: the baseline cache, the red-first
//! confirmation, the per-test rule `verify` and the hook apply to a run's commit, and the
//! run's private report folder. Real pytest, real git, the real binary.

use crate::common::*;
use crate::per_test::{named_order, named_project, rewrite, CALC, FIXED, NAMED_RED};

/// A named-tests run that PASSes and commits its change; its run id.
fn committed_named_run(r: &TestRepo) -> String {
    let answer = r.outside.join("answer.json");
    std::fs::write(&answer, proposal(&rewrite("calc.py", CALC, FIXED), "fix")).expect("write");
    let wo = r.work_order(named_order(&[NAMED_RED]));
    let out = r
        .factory()
        .args(["run", "--max-attempts", "1", "--commit", "--agent-command"])
        .arg(format!("cat {}", answer.display()))
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    r.run_ids().last().cloned().expect("a run")
}

#[test]
fn a_forged_factory_run_trailer_does_not_lend_the_runs_lenient_rule_to_another_commit() {
    // Verification is the whole suite, with the baseline's unrelated known failure.
    let r = named_project();
    r.git(&["config", "factory.verify", "python -m pytest -q"]);
    let id = committed_named_run(&r);
    // The known failure is fixed by hand: the suite is green.
    r.write(
        "tests/test_known.py",
        "def test_known_broken():\n    assert 1 == 1\n",
    );
    r.git(&["commit", "-qam", "fix the known failure"]);
    let out = r.factory().arg("verify").output().expect("verify");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // A later commit the run never judged breaks it again and names the run in a trailer:
    // the run's rule (its baseline's failures may keep failing) is not this commit's.
    r.write(
        "tests/test_known.py",
        "def test_known_broken():\n    assert 2 == 3\n",
    );
    r.git(&[
        "commit",
        "-qam",
        &format!("break it again\n\nFactory-Run: {id}"),
    ]);
    let out = r.factory().arg("verify").output().expect("verify");
    let text = format!("{}{}", stdout_of(&out), stderr_of(&out));
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(!text.contains("judged per test"), "{text}");
    assert!(text.contains("test_known_broken"), "{text}");
}

/// `calc.py` with a module-level cache an earlier test fills, and the fix of `absolute`.
const CALC_CACHED: &str = "CACHE = {}\n\n\ndef absolute(x):\n    return x\n";
const FIXED_CACHED: &str = "CACHE = {}\n\n\ndef absolute(x):\n    return -x if x < 0 else x\n";

#[test]
fn a_named_red_test_red_in_the_whole_suite_but_green_alone_is_no_flake_on_the_baseline() {
    // test_negative is red every time the suite runs (an earlier test fills the cache it
    // reads), and green when it is collected alone: red by order, not by chance.
    let r = named_project();
    r.write("calc.py", CALC_CACHED);
    r.write(
        "tests/test_calc.py",
        "import calc\nfrom calc import absolute\n\n\ndef test_fills_cache():\n    calc.CACHE['x'] = 1\n\n\ndef test_negative():\n    assert absolute(-3) == 3 or not calc.CACHE\n",
    );
    r.git(&["commit", "-qam", "an order-dependent red test"]);
    let answer = r.outside.join("answer.json");
    std::fs::write(
        &answer,
        proposal(&rewrite("calc.py", CALC_CACHED, FIXED_CACHED), "fix"),
    )
    .expect("write");
    let wo = r.work_order(named_order(&[NAMED_RED]));
    let out = r
        .factory()
        .args(["run", "--max-attempts", "1", "--agent-command"])
        .arg(format!("cat {}", answer.display()))
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("runs");
    let err = stderr_of(&out);
    assert!(!err.contains("flaky on the baseline"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(r.read("calc.py").as_deref(), Some(FIXED_CACHED));
}

/// Attempt 1's `calc.py`: still wrong, and Python that, run at interpreter start, puts a
/// correct `calc` in place of the tree's.
const PLANTED: &str = "# PLANT\nimport sys, types\nm = types.ModuleType('calc')\nm.absolute = lambda x: -x if x < 0 else x\nsys.modules['calc'] = m\n\n\ndef absolute(x):\n    return x\n";

#[test]
fn what_attempt_ones_check_leaves_in_the_report_folder_never_runs_in_attempt_two() {
    let r = named_project();
    let tidy = format!("{CALC}# tidy\n");
    let replay = r.replay(
        "two-attempts",
        &[
            (
                "1.json",
                proposal(&rewrite("calc.py", CALC, PLANTED), "first"),
            ),
            (
                "2.json",
                proposal(&rewrite("calc.py", CALC, &tidy), "second"),
            ),
        ],
    );
    // Attempt 1's check copies its code into the report folder (first on PYTHONPATH) as
    // `sitecustomize.py`, which every later Python runs at start, then fails the attempt.
    let mut o = named_order(&[NAMED_RED]);
    o["acceptance_commands"] = serde_json::json!([
        "sh -c 'if grep -q PLANT calc.py; then cp calc.py \"${PYTHONPATH%%:*}/sitecustomize.py\"; exit 1; fi'",
        "python -m pytest -q",
    ]);
    let wo = r.work_order(o);
    let out = r.run_replay(&wo, &replay, &["--sandbox", "--max-attempts", "2"]);
    let err = stderr_of(&out);
    // Attempt 2 changed nothing that fixes absolute(): its red test stays red.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(r.read("calc.py").as_deref(), Some(CALC));
    let (summary, _) = crate::per_test::records(&r);
    assert_eq!(summary["verdict"], "FAIL", "{summary}");
}

#[test]
#[ignore = "open: SPEC §3.9 re-runs a failing pytest test alone and calls it flaky if it then passes; a regression by order passes alone"]
fn a_regression_red_in_the_whole_suite_but_green_alone_is_no_flake_after_the_change() {
    // The change fixes the red test but leaves state behind that breaks a test collected
    // later: red every time the suite runs, green when that test runs alone.
    let r = named_project();
    r.write("calc.py", CALC_CACHED);
    r.write(
        "tests/test_positive.py",
        "import calc\nfrom calc import absolute\n\n\ndef test_positive():\n    assert absolute(2) == 2 and not calc.CACHE\n",
    );
    r.git(&["commit", "-qam", "a test that reads the cache"]);
    let leaky = "CACHE = {}\n\n\ndef absolute(x):\n    if x < 0:\n        CACHE[x] = 1\n        return -x\n    return x\n";
    let answer = r.outside.join("answer.json");
    std::fs::write(
        &answer,
        proposal(&rewrite("calc.py", CALC_CACHED, leaky), "fix"),
    )
    .expect("write");
    let wo = r.work_order(named_order(&[NAMED_RED]));
    let out = r
        .factory()
        .args(["run", "--max-attempts", "1", "--agent-command"])
        .arg(format!("cat {}", answer.display()))
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("runs");
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(r.read("calc.py").as_deref(), Some(CALC_CACHED));
    let (summary, _) = crate::per_test::records(&r);
    assert_eq!(summary["verdict"], "FAIL", "{summary}");
    assert_eq!(
        summary["attempts"][0]["failure_brief"]["stage"], "regression",
        "{summary}"
    );
}

/// `git factory run` of `order` with an agent that leaves a mark each time it is asked.
fn run_marked(r: &TestRepo, diff: &str, order: serde_json::Value) -> (std::process::Output, bool) {
    let answer = r.outside.join("answer.json");
    let mark = r.outside.join("asked");
    let _ = std::fs::remove_file(&mark);
    std::fs::write(&answer, proposal(diff, "change")).expect("write");
    let wo = r.work_order(order);
    let out = r
        .factory()
        .args(["run", "--max-attempts", "1", "--agent-command"])
        .arg(format!(
            "sh -c 'echo asked >> {}; cat {}'",
            mark.display(),
            answer.display()
        ))
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("git factory runs");
    (out, mark.exists())
}

#[test]
#[ignore = "open: the baseline cache is keyed by the commit's tree (SPEC §3.8), but in-situ checks also see ignored files"]
fn an_ignored_file_that_made_a_named_test_red_is_no_cached_red_once_it_is_gone() {
    // The committed code is already right; an ignored conftest.py breaks it for pytest.
    let r = named_project();
    r.write("calc.py", FIXED);
    r.write(".gitignore", "tests/conftest.py\n");
    r.git(&["add", "-A"]);
    r.git(&[
        "commit",
        "-qm",
        "absolute is right; a local conftest is ignored",
    ]);
    r.write(
        "tests/conftest.py",
        "import calc\n\ncalc.absolute = lambda x: x\n",
    );
    let tidy = format!("{FIXED}# tidy\n");
    let (out, _) = run_marked(
        &r,
        &rewrite("calc.py", FIXED, &tidy),
        named_order(&[NAMED_RED]),
    );
    assert!(
        !stderr_of(&out).contains("already"),
        "red with the untracked file: {}",
        stderr_of(&out)
    );
    r.git(&["checkout", "--", "calc.py"]);
    // Without it, the named red test passes on the same commit: nothing to change.
    std::fs::remove_file(r.root.join("tests/conftest.py")).expect("remove");
    let mut o = named_order(&[NAMED_RED]);
    o["id"] = serde_json::Value::from("abs-again");
    let (out, asked) = run_marked(&r, &rewrite("calc.py", FIXED, &tidy), o);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        !asked,
        "no model is asked for a test that passes already: {err}"
    );
    assert_eq!(r.read("calc.py").as_deref(), Some(FIXED));
    let (summary, _) = crate::per_test::records(&r);
    assert_eq!(summary["ended_stage"], "already_satisfied", "{summary}");
}

#[test]
fn an_ignored_file_a_sandboxed_attempts_check_leaves_does_not_outlive_the_run() {
    // Were it kept, the next run's baseline check would see it and cache what it made red.
    // (Unsandboxed checks' ignored outputs stay by design, SPEC §5 and §7.)
    let r = named_project();
    r.write(".gitignore", "tests/conftest.py\n");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "a local conftest is ignored"]);
    let planted = "# PLANT\nimport calc\n\ncalc.absolute = lambda x: x\n";
    let mut o = named_order(&[NAMED_RED]);
    o["acceptance_commands"] = serde_json::json!([
        "sh -c 'if grep -q PLANT calc.py; then cp calc.py tests/conftest.py; exit 1; fi'",
        "python -m pytest -q",
    ]);
    let answer = r.outside.join("answer.json");
    std::fs::write(
        &answer,
        proposal(&rewrite("calc.py", CALC, planted), "plant"),
    )
    .expect("write");
    let wo = r.work_order(o);
    let out = r
        .factory()
        .args(["run", "--sandbox"])
        .args(["--max-attempts", "1", "--agent-command"])
        .arg(format!("cat {}", answer.display()))
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        !r.root.join("tests/conftest.py").exists(),
        "{}",
        stderr_of(&out)
    );
}
