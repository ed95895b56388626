//! Runs that never step on each other, nor on the user (SPEC §5.1, §7): a race that finds the
//! user's tree changed delivers nothing, a race without a PASS says so, and a PASS signs its
//! evidence when asked.

use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const APP: [&str; 3] = ["one", "two", "three"];

fn good() -> String {
    diff_replace("app.txt", &APP, "two", "TWO")
}

fn bad() -> String {
    diff_replace("app.txt", &APP, "two", "zwei")
}

/// A replay folder of per-candidate folders: candidate i proposes `diffs[i-1]`.
fn per_candidate(r: &TestRepo, name: &str, diffs: &[String]) -> std::path::PathBuf {
    let dir = r.outside.join(name);
    for (i, d) in diffs.iter().enumerate() {
        let sub = dir.join((i + 1).to_string());
        std::fs::create_dir_all(&sub).expect("mkdir");
        std::fs::write(sub.join("1.json"), proposal(d, "try")).expect("write");
    }
    dir
}

/// Waits until no live process's command line holds `marker` (the kernel may take a moment).
fn none_left(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left = processes_with(marker);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        left = processes_with(marker);
    }
    assert!(left.is_empty(), "still running: {left:?}");
}

fn summary_of(stdout: &[u8]) -> Value {
    serde_json::from_slice(stdout).unwrap_or(Value::Null)
}

#[test]
fn a_race_without_a_pass_records_winner_null() {
    let r = TestRepo::simple();
    let dir = per_candidate(&r, "replays", &[bad(), bad()]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r
        .run_replay(
            &wo,
            &dir,
            &["--candidates", "2", "--max-attempts", "1", "--json"],
        )
        .clone();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let s = summary_of(&out.stdout);
    assert_eq!(s["verdict"], "FAIL");
    assert_eq!(
        s.as_object().and_then(|o| o.get("winner")),
        Some(&Value::Null),
        "the key is there, null: {s}"
    );
    // The stored record says the same.
    let id = s["run_id"].as_str().expect("run_id");
    let stored = r.git(&["show", &format!("refs/factory/{id}:run_summary.json")]);
    let stored: Value = serde_json::from_str(&stored).expect("json");
    assert_eq!(
        stored.as_object().and_then(|o| o.get("winner")),
        Some(&Value::Null)
    );
    // A run without a race has no winner key at all.
    let single = r.replay("single", &[("1.json", proposal(&good(), "fix"))]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r.run_replay(&wo, &single, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s = summary_of(&out.stdout);
    assert!(
        s.as_object().is_some_and(|o| !o.contains_key("winner")),
        "{s}"
    );
}

/// The user commits, stages, edits and adds a file while the candidates' checks wait; the
/// winner is then not delivered and none of that is touched.
fn race_while_the_user_works(round: usize) {
    let r = TestRepo::simple();
    let gate = r.outside.join("gate");
    std::fs::create_dir_all(&gate).expect("mkdir");
    let marker = format!("race-check-{round}-{}", std::process::id());
    // Each candidate's check says it started, then waits for the test (at most 30 s).
    let check = format!(
        "sh -c ': {marker}; mktemp -p {g} started.XXXXXX >/dev/null; i=0; while [ ! -e {g}/go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; grep -qx TWO app.txt'",
        g = gate.display()
    );
    let wo = r.work_order(basic_order(&[&check]));
    let dir = per_candidate(&r, "replays", &[good(), good()]);
    let child = r.spawn_replay(&wo, &dir, &["--json", "--candidates", "2", "--jobs", "2"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_dir(&gate).map(|d| d.count()).unwrap_or(0) < 2 {
        assert!(Instant::now() < deadline, "the checks never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The user works meanwhile.
    r.write("notes.txt", "my notes\n");
    r.git(&["add", "notes.txt"]);
    r.git(&["commit", "-qm", "my work"]);
    r.write("m.txt", "staged\n");
    r.git(&["add", "m.txt"]);
    r.write("other.txt", "my edit\n");
    r.write("n.txt", "my new file\n");
    let mine = r.snapshot();
    let head = r.git(&["rev-parse", "HEAD"]);
    std::fs::write(gate.join("go"), "").expect("go");
    let out = child.wait_with_output().expect("waits");
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let s = summary_of(&out.stdout);
    assert_eq!(s["verdict"], "PASS", "{s}");
    assert_eq!(s["delivered"], false, "{s}");
    assert!(s["winner"].as_u64().is_some(), "{s}");
    let id = s["run_id"].as_str().expect("run_id").to_string();
    // Nothing of the user's was touched: their commit, index, edit and new file stand.
    assert_eq!(r.snapshot(), mine, "{stderr}");
    assert_eq!(r.git(&["rev-parse", "HEAD"]), head);
    assert!(!stderr.contains("restored side effects"), "{stderr}");
    // The final line names what changed and how to bring the winner in.
    let last = stderr.lines().last().unwrap_or("");
    assert!(last.contains("PASS"), "{stderr}");
    assert!(last.contains("not delivered"), "{last}");
    assert!(last.contains("refs/heads/main moved"), "{last}");
    assert!(last.contains("the index changed"), "{last}");
    assert!(last.contains("other.txt"), "{last}");
    assert!(last.contains("n.txt"), "{last}");
    assert!(last.contains(&format!("git factory apply {id}")), "{last}");
    none_left(&marker);
    // The winner is there to bring in once the user is ready.
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "the rest of my work"]);
    let applied = r.factory().args(["apply", &id]).output().expect("apply");
    assert_eq!(applied.status.code(), Some(0), "{}", stderr_of(&applied));
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    assert_eq!(r.read("other.txt").as_deref(), Some("my edit\n"));
}

#[test]
fn a_race_never_delivers_over_work_the_user_did_meanwhile() {
    for round in 0..3 {
        race_while_the_user_works(round);
    }
}

#[test]
fn an_untouched_tree_still_gets_the_winner() {
    let r = TestRepo::simple();
    let dir = per_candidate(&r, "replays", &[bad(), good()]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r.run_replay(&wo, &dir, &["--candidates", "2", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s = summary_of(&out.stdout);
    assert_eq!(s["winner"], 2);
    assert!(s.as_object().is_some_and(|o| !o.contains_key("delivered")));
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
}

// ---------------------------------------------------------------------------------------------
// --attest on a run (SPEC §6.1)

fn signing_tools() -> bool {
    let here = ["ssh-keygen"].iter().all(|p| {
        Command::new("sh")
            .args(["-c", &format!("command -v {p}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if !here {
        assert!(
            std::env::var_os("CI").is_none(),
            "ssh-keygen is missing on CI"
        );
        eprintln!("ssh-keygen is not installed; skipping");
    }
    here
}

/// An ed25519 key made here, trusted as `principal`, set as this repo's signing key.
fn ssh_signing(r: &TestRepo, principal: &str) {
    let dir = r.home.join("keys");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let key = dir.join("id");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", principal, "-f"])
        .arg(&key)
        .env("HOME", &r.home)
        .stdin(Stdio::null())
        .output()
        .expect("ssh-keygen");
    assert!(made.status.success(), "{}", stderr_of(&made));
    let public = dir.join("id.pub");
    let text = std::fs::read_to_string(&public).expect("pub");
    let allowed = r.home.join("allowed_signers");
    std::fs::write(&allowed, format!("{principal} {}", text.trim())).expect("write");
    r.git(&["config", "gpg.format", "ssh"]);
    r.git(&["config", "user.signingKey", path_str(&public)]);
    r.git(&["config", "gpg.ssh.allowedSignersFile", path_str(&allowed)]);
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

fn attested(r: &TestRepo) -> std::process::Output {
    r.factory()
        .env_remove("SSH_AUTH_SOCK")
        .args(["attest", "verify", "HEAD"])
        .output()
        .expect("attest verify")
}

#[test]
fn a_passing_run_with_attest_signs_its_result_tree() {
    if !signing_tools() {
        return;
    }
    let r = TestRepo::simple();
    ssh_signing(&r, "alice@example.com");
    let replay = r.replay("r", &[("1.json", proposal(&good(), "fix"))]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r.run_replay(&wo, &replay, &["--commit", "--attest"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let verified = attested(&r);
    assert_eq!(verified.status.code(), Some(0), "{}", stderr_of(&verified));
    assert!(
        stderr_of(&verified).contains("attested by alice@example.com"),
        "{}",
        stderr_of(&verified)
    );
    // The statement names the run and the checks that passed.
    let tree = r.git(&["rev-parse", "HEAD^{tree}"]);
    let note = r.git(&["notes", "--ref", "factory-attest", "show", tree.trim()]);
    assert_eq!(note.lines().filter(|l| !l.is_empty()).count(), 1, "{note}");

    // --no-attest wins over factory.attest; a failing run is never attested.
    r.git(&["config", "factory.attest", "true"]);
    let replay = r.replay("r2", &[("1.json", proposal(&good(), "fix"))]);
    let wo = r.work_order(serde_json::json!({
        "id": "wo-2", "title": "t", "intent": "i", "allowed_files": ["app.txt"],
        "acceptance_commands": ["false"],
    }));
    let out = r.run_replay(&wo, &replay, &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let out = r.run_replay(
        &wo,
        &replay,
        &["--max-attempts", "1", "--force", "--no-attest"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let note = r.git(&["notes", "--ref", "factory-attest", "list"]);
    assert_eq!(note.lines().count(), 1, "{note}");
}

#[test]
fn a_keyless_attest_run_is_refused_before_any_model_call() {
    let r = TestRepo::simple();
    let ran = r.outside.join("ran");
    let replay = r.replay("r", &[("1.json", proposal(&good(), "fix"))]);
    let wo = r.work_order(basic_order(&[&format!("touch {}", ran.display())]));
    let before = r.snapshot();
    for flags in [&["--attest"][..], &[]] {
        if flags.is_empty() {
            r.git(&["config", "factory.attest", "true"]);
        }
        let out = r.run_replay(&wo, &replay, flags);
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains("git config user.signingKey"),
            "{}",
            stderr_of(&out)
        );
        assert!(!ran.exists(), "no check ran");
        assert!(r.run_ids().is_empty(), "no record");
    }
    r.git(&["config", "--unset", "factory.attest"]);
    assert_eq!(r.snapshot(), before);
    // --no-attest runs without a key.
    r.git(&["config", "factory.attest", "true"]);
    let out = r.run_replay(&wo, &replay, &["--no-attest"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

#[test]
fn a_signature_that_fails_after_a_pass_is_a_warning() {
    if !signing_tools() {
        return;
    }
    let r = TestRepo::simple();
    ssh_signing(&r, "alice@example.com");
    // The key is there at preflight, gone by the time the PASS is signed.
    let key = r.home.join("keys/id");
    let replay = r.replay("r", &[("1.json", proposal(&good(), "fix"))]);
    let wo = r.work_order(basic_order(&[&format!(
        "sh -c 'rm -f {}; grep -qx TWO app.txt'",
        key.display()
    )]));
    let out = r.run_replay(&wo, &replay, &["--attest", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(summary_of(&out.stdout)["verdict"], "PASS");
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("warning: the PASS stands, but its evidence was not signed"),
        "{stderr}"
    );
    assert_eq!(
        r.git_code(&["rev-parse", "-q", "--verify", "refs/notes/factory-attest"])
            .0,
        1
    );
}

// ---------------------------------------------------------------------------------------------
// A commit hook's checkout (SPEC §7)

#[test]
fn a_commit_hook_that_checks_out_another_commit_is_undone_entirely() {
    let r = TestRepo::simple();
    // Another commit that changes a file the run's change never touches, and adds one.
    r.git(&["checkout", "-q", "-b", "side"]);
    r.write("other.txt", "the other commit's\n");
    r.write("x.txt", "only on side\n");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "side"]);
    let side = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    r.git(&["checkout", "-q", "main"]);
    let head = r.git(&["rev-parse", "HEAD"]);
    let index = std::fs::read(r.root.join(".git/index")).expect("index");
    let hook = r.root.join(".git/hooks/pre-commit");
    std::fs::write(&hook, format!("#!/bin/sh\ngit checkout -q {side}\n")).expect("hook");
    std::fs::set_permissions(
        &hook,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .expect("chmod");
    let replay = r.replay("r", &[("1.json", proposal(&good(), "fix"))]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r.run_replay(&wo, &replay, &["--commit"]);
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("a commit hook moved HEAD"), "{stderr}");
    assert!(
        stderr.contains("the files it changed were put back too: other.txt, x.txt"),
        "{stderr}"
    );
    // HEAD, its branch and the index as before; the change uncommitted in the tree, and
    // nothing of the other commit left.
    assert_eq!(r.git(&["symbolic-ref", "HEAD"]), "refs/heads/main\n");
    assert_eq!(r.git(&["rev-parse", "main"]), head);
    assert_eq!(
        std::fs::read(r.root.join(".git/index")).expect("index"),
        index
    );
    assert_eq!(r.read("other.txt").as_deref(), Some("keep me\n"));
    assert!(
        r.read("x.txt").is_none(),
        "the other commit's new file is gone"
    );
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    assert_eq!(r.git(&["status", "--porcelain"]), " M app.txt\n");
}

// ---------------------------------------------------------------------------------------------
// Every run's own state; recover after a kill (SPEC §7)

/// A work order whose check notes it started (`<gate>/<name>.started`), then waits for
/// `<gate>/<name>.go` (at most 40 s), then writes `<gate>/<name>.late` and passes. Its command
/// line carries `marker`.
fn waiting_order(
    r: &TestRepo,
    id: &str,
    gate: &Path,
    name: &str,
    marker: &str,
) -> std::path::PathBuf {
    let g = gate.display();
    let check = format!(
        "sh -c ': {marker}; touch {g}/{name}.started; i=0; while [ ! -e {g}/{name}.go ] && [ $i -lt 800 ]; do sleep 0.05; i=$((i+1)); done; touch {g}/{name}.late; grep -qx TWO app.txt'"
    );
    let mut order = basic_order(&[&check]);
    order["id"] = Value::from(id);
    r.work_order(order)
}

fn wait_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn show_json(r: &TestRepo, id: &str) -> Value {
    let out = r
        .factory()
        .args(["show", id, "--json"])
        .output()
        .expect("show");
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn worktrees_left(r: &TestRepo) -> Vec<String> {
    r.git(&["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .filter(|p| Path::new(p) != r.root.as_path())
        .map(str::to_string)
        .collect()
}

fn one_kill_beside_a_live_worktree_run(round: usize) {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let gate = r.outside.join("gate");
    std::fs::create_dir_all(&gate).expect("mkdir");
    let pid = std::process::id();
    let (mark_a, mark_b) = (
        format!("insitu-{round}-{pid}"),
        format!("beside-{round}-{pid}"),
    );
    let replay = r.replay("r", &[("1.json", proposal(&good(), "fix"))]);
    let wo_a = waiting_order(&r, "wo-a", &gate, "a", &mark_a);
    let wo_b = waiting_order(&r, "wo-b", &gate, "b", &mark_b);
    let mut a = r
        .spawn(&["run", "-w"])
        .arg(&wo_a)
        .arg("--replay")
        .arg(&replay)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn a");
    let b = r.spawn_replay(&wo_b, &replay, &["--worktree", "--json"]);
    wait_file(&gate.join("a.started"));
    wait_file(&gate.join("b.started"));
    // Each run's state is its own, named by the run and its process (a group file is
    // written a moment after its command starts).
    let listing = || {
        std::fs::read_dir(r.root.join(".git/factory"))
            .expect("factory dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
    };
    let count = |names: &[String], prefix: &str, pid: u32| {
        names
            .iter()
            .filter(|n| n.starts_with(prefix) && n.contains(&format!(".{pid}.")))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut factory = listing();
    while (count(&factory, "command.", a.id()) == 0 || count(&factory, "command.", b.id()) == 0)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
        factory = listing();
    }
    let by = |prefix: &str, pid: u32| count(&factory, prefix, pid);
    assert_eq!(r.journals().len(), 1, "{factory:?}");
    assert_eq!(by("journal.", a.id()), 1, "{factory:?}");
    assert_eq!(by("command.", a.id()), 1, "{factory:?}");
    assert_eq!(by("command.", b.id()), 1, "{factory:?}");
    assert_eq!(by("run.", b.id()), 1, "{factory:?}");
    assert!(!factory.iter().any(|n| n == "command.pgid"), "{factory:?}");
    a.kill().expect("kill -9");
    let _ = a.wait();
    let out = r.factory().arg("recover").output().expect("recover");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // The killed run's check is stopped before its tree is restored; it never writes again.
    none_left(&mark_a);
    assert_eq!(r.snapshot(), before);
    // The live worktree run was neither signalled nor recorded: it goes on and passes.
    assert!(
        !processes_with(&mark_b).is_empty(),
        "the live run's check was stopped"
    );
    std::fs::write(gate.join("b.go"), "").expect("go");
    std::fs::write(gate.join("a.go"), "").expect("go");
    let b = b.wait_with_output().expect("b");
    assert_eq!(b.status.code(), Some(0), "{}", stderr_of(&b));
    assert_eq!(summary_of(&b.stdout)["verdict"], "PASS");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !gate.join("a.late").exists(),
        "the killed run's check wrote after recover"
    );
    let ids = r.run_ids();
    let verdicts: Vec<String> = ids
        .iter()
        .map(|id| {
            show_json(&r, id)["verdict"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    let mut sorted = verdicts.clone();
    sorted.sort();
    assert_eq!(sorted, ["INTERRUPTED", "PASS"], "{ids:?} {verdicts:?}");
    none_left(&mark_b);
}

#[test]
fn recover_after_one_kill_never_touches_a_live_run() {
    for round in 0..3 {
        one_kill_beside_a_live_worktree_run(round);
    }
}

#[cfg(feature = "test-hooks")]
#[test]
fn a_kill_right_after_a_check_starts_leaves_no_check_running_after_recover() {
    use std::os::unix::process::ExitStatusExt;
    for round in 0..3 {
        let r = TestRepo::simple();
        let before = r.snapshot();
        let gate = r.outside.join("gate");
        std::fs::create_dir_all(&gate).expect("mkdir");
        let mark = format!("gap-{round}-{}", std::process::id());
        let wo = waiting_order(&r, "wo-gap", &gate, "c", &mark);
        let replay = r.replay("r", &[("1.json", proposal(&good(), "fix"))]);
        let out = r
            .factory()
            .env("GIT_FACTORY_TEST_CRASH_AT", "spawned_acceptance")
            .args(["run", "-w"])
            .arg(&wo)
            .arg("--replay")
            .arg(&replay)
            .output()
            .expect("runs");
        assert_eq!(out.status.signal(), Some(9), "{}", stderr_of(&out));
        wait_file(&gate.join("c.started"));
        let rec = r.factory().arg("recover").output().expect("recover");
        assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
        none_left(&mark);
        assert_eq!(r.snapshot(), before);
        assert!(!gate.join("c.late").exists());
        assert_eq!(show_json(&r, &r.run_ids()[0])["verdict"], "INTERRUPTED");
    }
}

fn killed_worktree_run_is_recovered(flags: &[&str], round: usize) {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let gate = r.outside.join("gate");
    std::fs::create_dir_all(&gate).expect("mkdir");
    let mark = format!("wt-{}-{round}-{}", flags.len(), std::process::id());
    let wo = waiting_order(&r, "wo-wt", &gate, "w", &mark);
    let replay = if flags.is_empty() {
        r.replay("r", &[("1.json", proposal(&good(), "fix"))])
    } else {
        per_candidate(&r, "replays", &[good(), good()])
    };
    let mut child = r
        .spawn(&["run", "--worktree", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .args(flags)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    wait_file(&gate.join("w.started"));
    child.kill().expect("kill -9");
    let _ = child.wait();
    let out = r.factory().arg("recover").output().expect("recover");
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("that was killed"), "{stderr}");
    // What it did is not followed by a claim that there was nothing to do.
    assert!(!stderr.contains("nothing to recover"), "{stderr}");
    none_left(&mark);
    // Nor is any saved state of the run or of its candidates left behind.
    let saved: Vec<String> = std::fs::read_dir(r.root.join(".git/factory"))
        .expect("factory dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("saved-"))
        .collect();
    assert!(saved.is_empty(), "{saved:?}");
    assert!(worktrees_left(&r).is_empty(), "{:?}", worktrees_left(&r));
    assert_eq!(r.snapshot(), before);
    let ids = r.run_ids();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(show_json(&r, &ids[0])["verdict"], "INTERRUPTED");
    // Nothing is left for a second recover.
    let again = r.factory().arg("recover").output().expect("recover");
    assert!(
        stderr_of(&again).contains("nothing to recover"),
        "{}",
        stderr_of(&again)
    );
}

#[test]
fn recover_completes_a_killed_worktree_run() {
    for round in 0..2 {
        killed_worktree_run_is_recovered(&[], round);
    }
}

#[test]
fn recover_completes_a_killed_worktree_race() {
    for round in 0..2 {
        killed_worktree_run_is_recovered(&["--candidates", "2", "--jobs", "2"], round);
    }
}

/// Two `--worktree` runs at once (as in a batch): the branch one delivers while the other
/// still runs is that run's delivery, not a side effect of the other's checks — the other
/// run neither names nor touches it.
#[test]
fn a_worktree_run_does_not_report_another_runs_branch() {
    let r = TestRepo::simple();
    let gate = r.outside.join("gate");
    std::fs::create_dir_all(&gate).expect("mkdir");
    let slow_check = format!(
        "sh -c 'touch {g}/slow.started; while [ ! -e {g}/go ]; do sleep 0.05; done; grep -qx TWO app.txt'",
        g = gate.display()
    );
    let slow = r.work_order(basic_order(&[&slow_check]));
    let mut fast = basic_order(&["grep -qx TWO app.txt"]);
    fast["id"] = "wo-other".into();
    let fast = r.work_order(fast);
    let replay = r.replay("rp", &[("1.json", proposal(&good(), "try"))]);
    let first = r.spawn_replay(&slow, &replay, &["--worktree", "--json"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !gate.join("slow.started").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if !gate.join("slow.started").exists() {
        let out = first.wait_with_output().expect("wait");
        panic!("the first run never started its check: {}", stderr_of(&out));
    }
    let second = r.run_replay(&fast, &replay, &["--worktree", "--json"]);
    assert_eq!(second.status.code(), Some(0), "{}", stderr_of(&second));
    let branch = format!(
        "refs/heads/factory/run-{}",
        summary_of(&second.stdout)["run_id"].as_str().unwrap_or("?")
    );
    std::fs::write(gate.join("go"), "").expect("write");
    let out = first.wait_with_output().expect("wait");
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let short = branch.trim_start_matches("refs/heads/");
    assert!(!stderr.contains(short), "{stderr}");
    assert!(r.git(&["show-ref", &branch]).contains(&branch));
}

/// A `--worktree` run shares its refs with the user: a branch its check made is named as
/// left as it is, never claimed as restored, and it stays.
#[test]
fn a_worktree_runs_check_that_makes_a_branch_is_named_not_claimed_restored() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&[
        "sh -c 'git branch planted-by-check 2>/dev/null; grep -qx TWO app.txt'",
    ]));
    let replay = r.replay("rp", &[("1.json", proposal(&good(), "try"))]);
    let out = r.run_replay(&wo, &replay, &["--worktree"]);
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("left as it is: refs/heads/planted-by-check"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("restored files the checks changed"),
        "{stderr}"
    );
    assert!(r
        .git(&["branch", "--list", "planted-by-check"])
        .contains("planted-by-check"));
}

/// A fetched record is someone's claim: one placed under the run_id a user's run will have
/// (ids are derived from public inputs) never gets its change committed without the checks
/// running in this clone, and a record that names another run is refused by name. The
/// clone that made a PASS still delivers it from its cache.
#[test]
fn a_fetched_pass_is_never_committed_unchecked_and_a_lying_record_is_refused() {
    let r = TestRepo::simple();
    r.git(&["config", "factory.verify", "true"]);
    let bare = origin_with_main(&r);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let replay = r.replay("rp", &[("1.json", proposal(&good(), "try"))]);
    let made = r.run_replay(&wo, &replay, &["--json"]);
    assert_eq!(made.status.code(), Some(0), "{}", stderr_of(&made));
    let id = summary_of(&made.stdout)["run_id"]
        .as_str()
        .expect("id")
        .to_string();
    r.git(&["checkout", "-q", "--", "."]);
    let pushed = r.factory().arg("push").output().expect("push");
    assert!(pushed.status.success(), "{}", stderr_of(&pushed));
    // The clone that made it delivers it from the cache.
    let here = r.run_replay(&wo, &replay, &["--commit"]);
    assert_eq!(here.status.code(), Some(0), "{}", stderr_of(&here));
    assert!(
        stderr_of(&here).contains("now committed"),
        "{}",
        stderr_of(&here)
    );
    // Another clone fetches the record: it may show the verdict, never commit the change.
    let other = clone_of(&r, &bare, "other");
    let fetched = in_dir(&r, &other, "git-factory", &["fetch"]);
    assert!(fetched.status.success(), "{}", stderr_of(&fetched));
    let head = in_dir(&r, &other, "git", &["rev-parse", "HEAD"]).stdout;
    let mut run = command_in(&r, &other, "git-factory");
    run.args(["run", "--commit", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay);
    let out = run.output().expect("run");
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not by a run in this clone"), "{stderr}");
    assert_eq!(
        in_dir(&r, &other, "git", &["rev-parse", "HEAD"]).stdout,
        head
    );
    assert_eq!(
        std::fs::read_to_string(other.join("app.txt")).expect("read"),
        "one\ntwo\nthree\n"
    );
    // With --force its checks run here, and then it is delivered.
    let mut forced = command_in(&r, &other, "git-factory");
    forced
        .args(["run", "--commit", "--force", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay);
    let out = forced.output().expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // A record put under another run's name is refused, naming both.
    let lying = r.work_order({
        let mut o = basic_order(&["false"]);
        o["id"] = "wo-lying".into();
        o
    });
    r.git(&["reset", "-q", "--hard", "HEAD~1"]);
    let first = r.run_replay(&lying, &replay, &["--json", "--max-attempts", "1"]);
    assert_eq!(first.status.code(), Some(1), "{}", stderr_of(&first));
    let lying_id = summary_of(&first.stdout)["run_id"]
        .as_str()
        .expect("id")
        .to_string();
    r.git(&[
        "update-ref",
        &format!("refs/factory/{lying_id}"),
        &format!("refs/factory/{id}"),
    ]);
    let out = r.run_replay(&lying, &replay, &["--max-attempts", "1"]);
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("holds the record of another run"),
        "{stderr}"
    );
}

/// A record pushed while its run was RUNNING is replaced on the remote by the finished one
/// when the run's clone pushes again, and a clone that fetched it RUNNING takes the finished
/// one on its next fetch: nobody is left with a run that never ends.
#[test]
fn a_record_pushed_mid_run_is_replaced_by_the_finished_one_everywhere() {
    let r = TestRepo::simple();
    r.git(&["config", "factory.verify", "true"]);
    let bare = origin_with_main(&r);
    let gate = r.outside.join("gate");
    std::fs::create_dir_all(&gate).expect("mkdir");
    let check = format!(
        "sh -c 'touch {g}/started; while [ ! -e {g}/go ]; do sleep 0.05; done; grep -qx TWO app.txt'",
        g = gate.display()
    );
    let wo = r.work_order(basic_order(&[&check]));
    let replay = r.replay("rp", &[("1.json", proposal(&good(), "try"))]);
    let run = r.spawn_replay(
        &wo,
        &replay,
        &["--worktree", "--json", "--no-baseline-check"],
    );
    wait_for(&gate.join("started"));
    let mid = r.factory().arg("push").output().expect("push");
    assert!(mid.status.success(), "{}", stderr_of(&mid));
    let other = clone_of(&r, &bare, "other");
    let fetched = in_dir(&r, &other, "git-factory", &["fetch"]);
    assert!(fetched.status.success(), "{}", stderr_of(&fetched));
    std::fs::write(gate.join("go"), "").expect("go");
    let out = run.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let id = summary_of(&out.stdout)["run_id"]
        .as_str()
        .expect("id")
        .to_string();
    let again = r.factory().arg("push").output().expect("push");
    assert!(again.status.success(), "{}", stderr_of(&again));
    assert!(
        !stderr_of(&again).contains("different record"),
        "{}",
        stderr_of(&again)
    );
    let subject = |dir: &Path| {
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(dir)
            .args(["log", "-1", "--format=%s", &format!("refs/factory/{id}")])
            .output()
            .expect("git");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert!(subject(&bare).contains(" PASS "), "{}", subject(&bare));
    let refetched = in_dir(&r, &other, "git-factory", &["fetch"]);
    assert!(refetched.status.success(), "{}", stderr_of(&refetched));
    assert!(
        subject(&other.join(".git")).contains(" PASS "),
        "{}",
        subject(&other.join(".git"))
    );
}

/// A tracked file under a folder the user's excludes ignore (`src/` in `info/exclude`, as for
/// vendored code) is delivered like any change, in-situ with `--commit` and with `--worktree`.
#[test]
fn a_change_to_a_tracked_file_under_an_ignored_folder_is_delivered() {
    let r = TestRepo::with_files(&[("src/app.txt", "one\ntwo\nthree\n")]);
    r.git(&["config", "factory.verify", "true"]);
    std::fs::write(r.root.join(".git/info/exclude"), "src/\n").expect("write");
    let mut order = basic_order(&["grep -qx TWO src/app.txt"]);
    order["allowed_files"] = serde_json::json!(["src/app.txt"]);
    order["context_files"] = serde_json::json!(["src/app.txt"]);
    let wo = r.work_order(order);
    let change = diff_replace("src/app.txt", &APP, "two", "TWO");
    let replay = r.replay("rp", &[("1.json", proposal(&change, "try"))]);
    for flags in [
        &["--worktree", "--json"][..],
        &["--commit", "--force", "--json"][..],
    ] {
        let out = r.run_replay(&wo, &replay, flags);
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(0), "{flags:?}: {stderr}");
        let s = summary_of(&out.stdout);
        let commit = s["result_commit"].as_str().expect("a commit");
        let shown = r.git(&["show", &format!("{commit}:src/app.txt")]);
        assert!(shown.contains("TWO"), "{flags:?}: {shown}");
    }
}

#[test]
fn work_the_user_does_during_the_final_check_is_kept_not_restored() {
    let r = TestRepo::simple();
    let gate = r.outside.join("final-gate");
    std::fs::create_dir_all(&gate).expect("mkdir");
    // Only the final check, in the user's own tree (where .git is a folder), waits for the
    // test; the candidates' checks in their pooled worktrees go straight on.
    let check = format!(
        "sh -c 'if [ -d .git ]; then touch {g}/started; i=0; while [ ! -e {g}/go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; fi; grep -qx TWO app.txt'",
        g = gate.display()
    );
    let wo = r.work_order(basic_order(&[&check]));
    let dir = per_candidate(&r, "replays", &[good(), good()]);
    let child = r.spawn_replay(&wo, &dir, &["--json", "--candidates", "2", "--jobs", "2"]);
    wait_for(&gate.join("started"));
    // The user edits a file and adds one while PO runs once more in their tree.
    r.write("other.txt", "my edit\n");
    r.write("n.txt", "my new file\n");
    std::fs::write(gate.join("go"), "").expect("go");
    let out = child.wait_with_output().expect("waits");
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let s = summary_of(&out.stdout);
    assert_eq!(s["verdict"], "PASS", "{s}");
    assert_eq!(s["delivered"], false, "{s}");
    let id = s["run_id"].as_str().expect("run_id").to_string();
    // The user's work stands; the winner's change is taken back.
    assert_eq!(
        r.read("other.txt").as_deref(),
        Some("my edit\n"),
        "{stderr}"
    );
    assert_eq!(
        r.read("n.txt").as_deref(),
        Some("my new file\n"),
        "{stderr}"
    );
    assert_eq!(
        r.read("app.txt").as_deref(),
        Some("one\ntwo\nthree\n"),
        "{stderr}"
    );
    let last = stderr.lines().last().unwrap_or("");
    assert!(last.contains("not delivered"), "{stderr}");
    assert!(last.contains("other.txt"), "{last}");
    assert!(last.contains(&format!("git factory apply {id}")), "{last}");
    assert!(r.journals().is_empty());
    // The winner is there to bring in.
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "my work"]);
    let applied = r.factory().args(["apply", &id]).output().expect("apply");
    assert_eq!(applied.status.code(), Some(0), "{}", stderr_of(&applied));
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
}
