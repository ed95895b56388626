//! What judges a run is part of its identity (SPEC §4.3): a cached verdict is never served for
//! other checks (a changed `factory.verify`) or another confinement (another `--sandbox`
//! backend), and `factory.flaky=fail` makes another run too.

use crate::common::*;
use serde_json::Value;

fn good() -> String {
    proposal(
        &diff_replace("app.txt", &["one", "two", "three"], "two", "TWO"),
        "uppercase two",
    )
}

/// One run of the same order and replay with `flags` and `env`: its exit code and summary.
fn run(r: &TestRepo, env: &[(&str, &str)], flags: &[&str]) -> (Option<i32>, Value) {
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let mut all = vec!["--json", "--max-attempts", "1"];
    all.extend_from_slice(flags);
    let mut cmd = r.replay_command(&wo, &replay, &all);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("runs");
    let s: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert!(s["run_id"].is_string(), "{}", stderr_of(&out));
    // Each run starts from the clean baseline again.
    r.git(&["checkout", "-q", "--", "."]);
    (out.status.code(), s)
}

#[test]
fn a_changed_factory_verify_is_a_new_run_never_the_old_checks_verdict() {
    let r = TestRepo::simple();
    r.git(&["config", "factory.verify", "false"]);
    let (code, first) = run(&r, &[], &[]);
    assert_eq!(code, Some(1));
    assert_eq!(first["verdict"], "FAIL");
    let (code, again) = run(&r, &[], &[]);
    assert_eq!(again["run_id"], first["run_id"], "same checks: same run");
    assert_eq!(code, Some(1));
    r.git(&["config", "factory.verify", "true"]);
    let (code, fixed) = run(&r, &[], &[]);
    assert_ne!(
        fixed["run_id"], first["run_id"],
        "other checks: another run"
    );
    assert_eq!(code, Some(0), "{fixed}");
    assert_eq!(fixed["verdict"], "PASS");
    r.git(&["config", "factory.flaky", "fail"]);
    let (_, flaky) = run(&r, &[], &[]);
    assert_ne!(
        flaky["run_id"], fixed["run_id"],
        "flaky=fail judges otherwise"
    );
}

#[test]
fn a_verify_script_in_the_tree_leaves_the_identity_as_it_was() {
    // Global verification from scripts/verify.sh: factory.verify judges nothing, so changing
    // it changes no run id.
    let r = TestRepo::with_files(&[
        ("app.txt", "one\ntwo\nthree\n"),
        ("scripts/verify.sh", "true\n"),
    ]);
    r.git(&["config", "factory.verify", "false"]);
    let (_, a) = run(&r, &[], &[]);
    r.git(&["config", "factory.verify", "true"]);
    let (_, b) = run(&r, &[], &[]);
    assert_eq!(a["run_id"], b["run_id"]);
}

#[test]
fn each_sandbox_backend_is_its_own_run() {
    if !bwrap_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    let bwrap = [("GIT_CONFIG_PARAMETERS", "'factory.sandboxBackend'='bwrap'")];
    let landlock = [(
        "GIT_CONFIG_PARAMETERS",
        "'factory.sandboxBackend'='landlock'",
    )];
    let (_, plain) = run(&r, &[], &[]);
    let (code, under_bwrap) = run(&r, &bwrap, &["--sandbox"]);
    assert_eq!(code, Some(0), "{under_bwrap}");
    let (code, under_landlock) = run(&r, &landlock, &["--sandbox"]);
    assert_eq!(code, Some(0), "{under_landlock}");
    let ids = [
        &plain["run_id"],
        &under_bwrap["run_id"],
        &under_landlock["run_id"],
    ];
    assert_ne!(ids[0], ids[1]);
    assert_ne!(ids[1], ids[2], "landlock's verdict is not bubblewrap's");
    assert_ne!(ids[0], ids[2]);
    let (_, again) = run(&r, &bwrap, &["--sandbox"]);
    assert_eq!(
        again["run_id"], under_bwrap["run_id"],
        "same backend: same run"
    );
}
