//! Nothing lost, ever: kill points, recover, interruption, hostile commands, the sandbox.

use crate::common::*;
use serde_json::{json, Value};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

const APP: [&str; 3] = ["one", "two", "three"];

fn two_file_change() -> String {
    format!(
        "{}diff --git a/other.txt b/other.txt\n--- a/other.txt\n+++ b/other.txt\n@@ -1 +1 @@\n-keep me\n+changed\n",
        diff_replace("app.txt", &APP, "two", "TWO")
    )
}

fn order(verify_and_accept: &[&str]) -> Value {
    json!({
        "id": "wo-crash", "title": "crash", "intent": "i",
        "allowed_files": ["app.txt", "other.txt"],
        "acceptance_commands": verify_and_accept,
    })
}

#[cfg(feature = "test-hooks")]
#[test]
fn every_kill_point_is_recovered_byte_for_byte() {
    // (kill point, acceptance commands, extra flags)
    let points: [(&str, &[&str], &[&str]); 10] = [
        ("after_preflight", &["true"], &[]),
        ("mid_apply", &["true"], &[]),
        ("during_verify", &["true"], &[]),
        (
            "during_acceptance",
            &["sh -c 'sleep 1; echo late > late.txt'"],
            &[],
        ),
        ("during_rollback", &["false"], &[]),
        ("during_ref_update", &["true"], &[]),
        // A PASS whose check left a file and a tag: killed while they are being put back.
        (
            "during_side_effect_restore",
            &["sh -c 'echo junk > stray.txt; git tag stray'"],
            &[],
        ),
        // Killed after the delivery's commit moved the branch, before the index followed.
        ("during_delivery", &["true"], &["--commit"]),
        ("during_delivery", &["true"], &["--branch", "feature"]),
        // A delivery refused (an editor holds the index lock), killed while it is undone.
        (
            "during_delivery_undo",
            &["sh -c 'touch .git/index.lock'"],
            &["--commit"],
        ),
    ];
    for (point, accept, flags) in points {
        let r = TestRepo::simple();
        r.write(".env", "SECRET=1\n");
        if point == "during_verify" {
            r.git(&[
                "config",
                "factory.verify",
                "sh -c 'sleep 1; echo late > late.txt'",
            ]);
        }
        let before = r.snapshot();
        let wo = r.work_order(order(accept));
        let replay = r.replay(
            "rp",
            &[("1.json", proposal(&two_file_change(), "two files"))],
        );
        let out = r
            .factory()
            .env("GIT_FACTORY_TEST_CRASH_AT", point)
            .args(["run", "--max-attempts", "1"])
            .args(flags)
            .arg("-w")
            .arg(&wo)
            .arg("--replay")
            .arg(&replay)
            .output()
            .expect("runs");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(9), "{point}: {}", stderr_of(&out));
        // The editor of the last case lets go of the index (its lock is not ours to remove).
        let _ = std::fs::remove_file(r.root.join(".git/index.lock"));

        // Every command that could change the repo refuses, pointing at recover.
        let again = r.run_replay(&wo, &replay, &[]);
        assert_eq!(again.status.code(), Some(2), "{point}");
        assert!(
            stderr_of(&again).contains("git factory recover"),
            "{point}: {}",
            stderr_of(&again)
        );
        let patch = r
            .factory()
            .args(["patch", "-"])
            .write_stdin(two_file_change())
            .output()
            .expect("patch");
        assert_eq!(patch.status.code(), Some(2), "{point}");
        assert_eq!(
            r.factory().arg("log").output().expect("log").status.code(),
            Some(0)
        );

        let rec = r.factory().arg("recover").output().expect("recover");
        assert_eq!(rec.status.code(), Some(0), "{point}: {}", stderr_of(&rec));
        std::thread::sleep(Duration::from_millis(1300)); // a killed harness's command must not write later
        assert_eq!(
            r.snapshot(),
            before,
            "{point}: the baseline is restored byte for byte"
        );
        let ids = r.run_ids();
        assert_eq!(ids.len(), 1, "{point}: the run has a record");
        let show = r
            .factory()
            .args(["show", &ids[0], "--json"])
            .output()
            .expect("show");
        let s: Value = serde_json::from_str(&stdout_of(&show)).expect("readable record");
        assert_eq!(s["verdict"], "INTERRUPTED", "{point}");
        // And the repo works again.
        let next = r.run_replay(&wo, &replay, &["--force"]);
        assert!(
            matches!(next.status.code(), Some(0) | Some(1)),
            "{point}: {}",
            stderr_of(&next)
        );
    }
}

#[test]
fn sigint_stops_the_command_rolls_back_and_exits_130() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let marker = r.outside.join("started");
    let cmd = format!("sh -c 'touch {}; sleep 41'", marker.display());
    let wo = r.work_order(basic_order(&[&cmd]));
    let replay = r.replay(
        "rp",
        &[(
            "1.json",
            proposal(&diff_replace("app.txt", &APP, "two", "TWO"), "s"),
        )],
    );
    let mut child = r
        .spawn(&["run", "-q", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    wait_for(&marker);
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("signal");
    std::thread::sleep(Duration::from_millis(30));
    // A second Ctrl-C during the rollback does not abandon it.
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
    let start = Instant::now();
    let status = child.wait().expect("ends");
    assert_eq!(status.code(), Some(130));
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(r.snapshot(), before);
    assert!(processes_with("sleep 41").is_empty());
    let id = r.run_ids().remove(0);
    let s: Value =
        serde_json::from_str(&r.git(&["show", &format!("refs/factory/{id}:run_summary.json")]))
            .expect("json");
    assert_eq!(s["verdict"], "INTERRUPTED");
    assert_eq!(s["ended_stage"], "interrupted");
    assert!(r.journals().is_empty());
}

/// Runs one hostile acceptance command; returns the summary and how long the run took.
fn hostile(cmd: &str, timeout: &str) -> (Value, Duration) {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&[cmd]));
    let replay = r.replay(
        "rp",
        &[(
            "1.json",
            proposal(&diff_replace("app.txt", &APP, "two", "TWO"), "s"),
        )],
    );
    let start = Instant::now();
    let out = r
        .factory()
        .args([
            "run",
            "--json",
            "--max-attempts",
            "1",
            "--timeout-seconds",
            timeout,
            "-w",
        ])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("runs");
    let took = start.elapsed();
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    (s["attempts"][0]["acceptance"][0].clone(), took)
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_after_the_grace() {
    let (c, took) = hostile("sh -c 'trap \"\" TERM; sleep 43; sleep 43'", "1");
    assert_eq!(c["timed_out"], true);
    // The command alone would take 86 s; well under that proves the group was killed (loose: CI is loaded).
    assert!(took < Duration::from_secs(40), "{took:?}");
    assert!(processes_with("sleep 43").is_empty());
}

#[test]
fn a_daemon_holding_the_pipes_does_not_hang_the_harness() {
    let (c, took) = hostile(
        "sh -c 'setsid sh -c \"sleep 47; echo x\" & echo started'",
        "30",
    );
    assert_eq!(c["exit_code"], 0);
    // The daemon holds the pipes for 47 s; well under that proves the harness did not wait.
    assert!(took < Duration::from_secs(25), "{took:?}");
    assert!(
        processes_with("sleep 47").is_empty(),
        "{:?}",
        processes_with("sleep 47")
    );
}

#[test]
fn a_command_that_leaves_its_process_group_leaves_nothing_behind() {
    let (c, took) = hostile(
        "sh -c 'setsid sleep 53 >/dev/null 2>&1 < /dev/null & exit 0'",
        "30",
    );
    assert_eq!(c["exit_code"], 0);
    assert!(took < Duration::from_secs(8));
    assert!(processes_with("sleep 53").is_empty());
}

#[test]
fn gigabytes_of_output_hit_the_cap() {
    let (c, took) = hostile("head -c 1073741824 /dev/zero", "120");
    assert_eq!(c["exit_code"], 0);
    let bytes = c["stdout_bytes"].as_u64().expect("bytes");
    assert!(
        bytes > 64 * 1024 * 1024 && bytes < 64 * 1024 * 1024 + 100,
        "{bytes}"
    );
    assert!(took < Duration::from_secs(60));
}

#[test]
fn a_command_reading_stdin_gets_eof() {
    let (c, took) = hostile("cat", "30");
    assert_eq!(c["exit_code"], 0);
    assert!(took < Duration::from_secs(5));
}

#[test]
fn sandbox_cuts_the_network_and_keeps_git_read_only() {
    if std::process::Command::new("bwrap")
        .arg("--version")
        .output()
        .is_err()
    {
        // CI installs bubblewrap (.ci/run), so there the sandbox is always tested for real.
        assert!(std::env::var_os("CI").is_none(), "bwrap is missing on CI");
        eprintln!("bwrap is not installed; skipping (.ci/run installs it)");
        return;
    }
    let r = TestRepo::simple();
    // Writes to .git and outside the tree fail, /tmp is private (it holds only the way to the
    // test's own temporary repo), the bytecode folder is writable, and only loopback exists.
    let check = "sh -c 'touch .git/evil 2>/dev/null && exit 10; touch /usr/evil 2>/dev/null && exit 11; test -z \"$(ls -A /tmp | grep -v ^.tmp)\" || exit 12; touch \"$PYTHONPYCACHEPREFIX/ok\" || exit 14; test $(grep -c : /proc/net/dev) -eq 1 || exit 13; echo ok > inside.txt'";
    let wo = r.work_order(basic_order(&[check, "grep -qx TWO app.txt"]));
    let replay = r.replay(
        "rp",
        &[(
            "1.json",
            proposal(&diff_replace("app.txt", &APP, "two", "TWO"), "s"),
        )],
    );
    // In the user's tree, and in the worktrees the harness makes under .git (which is
    // read-only inside: the worktree, deeper, is mounted over it and stays writable).
    for mode in [&[][..], &["--worktree"], &["--candidates", "2"]] {
        let mut flags = vec!["--json", "--sandbox", "--force"];
        flags.extend(mode);
        let out = r.run_replay(&wo, &replay, &flags);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{mode:?}: {}\n{}",
            stderr_of(&out),
            stdout_of(&out)
        );
        assert!(!r.root.join(".git/evil").exists());
        r.git(&["checkout", "--", "app.txt"]);
    }
}

#[test]
fn model_output_cannot_choose_commands_or_flags() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["true"]));
    let sneaky = json!({"unified_diff": "", "summary": "done", "acceptance_commands": ["rm -rf /"], "env": {"X": "1"}});
    let replay = r.replay("rp", &[("1.json", sneaky.to_string())]);
    let out = r.run_replay(&wo, &replay, &["--json", "--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(
        s["attempts"][0]["failure_brief"]["stage"],
        "llm_output_invalid"
    );
    assert_eq!(s["attempts"][0]["acceptance"], json!([]));
}

#[cfg(feature = "test-hooks")]
#[test]
fn a_recover_killed_half_way_is_finished_by_the_next_recover() {
    use std::os::unix::process::ExitStatusExt;
    let r = TestRepo::simple();
    let before = r.snapshot();
    let wo = r.work_order(order(&["sh -c 'git tag stray; echo x > stray.txt'"]));
    let replay = r.replay(
        "rp",
        &[("1.json", proposal(&two_file_change(), "two files"))],
    );
    let out = r
        .factory()
        .env("GIT_FACTORY_TEST_CRASH_AT", "during_acceptance")
        .args(["run", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("runs");
    assert_eq!(out.status.signal(), Some(9));
    std::thread::sleep(Duration::from_millis(300)); // the orphaned check finishes its work
    let rec = r
        .factory()
        .env("GIT_FACTORY_TEST_CRASH_AT", "during_recover")
        .arg("recover")
        .output()
        .expect("recover");
    assert_eq!(rec.status.signal(), Some(9), "{}", stderr_of(&rec));
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    assert_eq!(r.snapshot(), before);
    let s: Value = serde_json::from_str(&stdout_of(
        &r.factory()
            .args(["show", &r.run_ids()[0], "--json"])
            .output()
            .expect("show"),
    ))
    .expect("json");
    assert_eq!(s["verdict"], "INTERRUPTED");
}

#[cfg(feature = "test-hooks")]
#[test]
fn a_kill_while_an_agents_commit_is_put_back_is_recovered() {
    use std::os::unix::process::ExitStatusExt;
    let r = TestRepo::simple();
    let before = r.snapshot();
    let diff = r.outside.join("answer.diff");
    std::fs::write(&diff, diff_replace("app.txt", &APP, "two", "TWO")).expect("write");
    let script = r.outside.join("agent.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat > /dev/null\necho note > notes.txt\ngit add notes.txt\ngit commit -qm bookkeeping\ncat {}\n",
            diff.display()
        ),
    )
    .expect("write");
    let wo = r.work_order(basic_order(&["true"]));
    let out = r
        .factory()
        .env("GIT_FACTORY_TEST_CRASH_AT", "during_agent_audit")
        .args(["run", "-w"])
        .arg(&wo)
        .arg("--agent-command")
        .arg(format!("sh {}", script.display()))
        .output()
        .expect("runs");
    assert_eq!(out.status.signal(), Some(9), "{}", stderr_of(&out));
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    assert_eq!(r.snapshot(), before);
}

#[test]
fn factory_sandbox_in_git_config_sandboxes_run_and_reverify() {
    if !bwrap_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    // The check passes only where it cannot write the repo's shared bytecode cache: under
    // the sandbox. Unsandboxed, it would plant there what later runs trust.
    let check = "sh -c 'd=$(git rev-parse --git-common-dir)/factory/pycache; mkdir -p \"$d\" 2>/dev/null; touch \"$d/planted\" 2>/dev/null && exit 7; exit 0'";
    let wo = r.work_order(basic_order(&[check, "grep -qx TWO app.txt"]));
    let replay = r.replay(
        "rp",
        &[(
            "1.json",
            proposal(&diff_replace("app.txt", &APP, "two", "TWO"), "s"),
        )],
    );
    r.git(&["config", "factory.sandbox", "true"]);
    let out = r.run_replay(&wo, &replay, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let planted = r.root.join(".git/factory/pycache/planted");
    assert!(!planted.exists());
    let id = r.run_ids().remove(0);
    r.git(&["checkout", "--", "app.txt"]);
    // reverify of the record's model-written tree: sandboxed by the same setting.
    let again = r
        .factory()
        .args(["reverify", &id])
        .output()
        .expect("reverify");
    assert_eq!(again.status.code(), Some(0), "{}", stderr_of(&again));
    assert!(!planted.exists(), "reverify ran the checks sandboxed");
    // --no-sandbox wins over the setting, and the check then sees the difference.
    let bare = r
        .factory()
        .args(["reverify", &id, "--no-sandbox"])
        .output()
        .expect("reverify");
    assert_eq!(bare.status.code(), Some(1), "{}", stderr_of(&bare));
    assert!(stdout_of(&bare).contains("CHANGED"), "{}", stdout_of(&bare));
    r.git(&["config", "--unset", "factory.sandbox"]);
    let _ = std::fs::remove_file(&planted);
    let flag = r
        .factory()
        .args(["reverify", &id, "--sandbox"])
        .output()
        .expect("reverify");
    assert_eq!(flag.status.code(), Some(0), "{}", stderr_of(&flag));
    assert!(!planted.exists());
}

#[test]
fn a_sandboxed_check_cannot_write_the_python_environment_in_the_tree() {
    if !bwrap_or_skip() {
        return;
    }
    let r = TestRepo::with_files(&[
        ("app.txt", "one\ntwo\nthree\n"),
        (".gitignore", ".venv/\nenvs/\n.envs/\n"),
    ]);
    r.git(&["config", "factory.verify", "true"]);
    // An ignored virtualenv at the root and a conda environment one folder down: what the
    // user's python runs from. A file planted in either runs in every later interpreter.
    r.write(".venv/pyvenv.cfg", "home = /usr/bin\n");
    r.write(".venv/lib/python3/site-packages/keep.txt", "");
    r.write("envs/py311/conda-meta/history", "");
    // Deeper (as pyenv-style trees keep them), and below a folder whose name is not UTF-8
    // (bound by its bytes, or bwrap cannot start at all).
    r.write(".envs/3.11/py311/pyvenv.cfg", "home = /usr/bin\n");
    let odd = r.root.join(std::ffi::OsStr::from_bytes(b"env\xff"));
    std::fs::create_dir_all(odd.join(".venv")).expect("mkdir");
    std::fs::write(odd.join(".venv/pyvenv.cfg"), "home = /usr/bin\n").expect("write");
    let before = r.snapshot();
    let check = "sh -c 'touch .venv/lib/python3/site-packages/sitecustomize.py 2>/dev/null && exit 7; mkdir .venv/planted 2>/dev/null && exit 8; touch envs/py311/x.pth 2>/dev/null && exit 9; touch .envs/3.11/py311/x.pth 2>/dev/null && exit 10; touch env*/.venv/x.pth 2>/dev/null && exit 11; echo built > out.txt'";
    let wo = r.work_order(basic_order(&[check, "grep -qx TWO app.txt"]));
    let replay = r.replay(
        "rp",
        &[(
            "1.json",
            proposal(&diff_replace("app.txt", &APP, "two", "TWO"), "s"),
        )],
    );
    let out = r.run_replay(
        &wo,
        &replay,
        &["--json", "--sandbox", "--max-attempts", "1"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    r.git(&["checkout", "--", "app.txt"]);
    assert_eq!(
        r.snapshot().files,
        before.files,
        "the environments are as they were"
    );
}

#[cfg(feature = "test-hooks")]
#[test]
fn a_recovered_record_lists_the_attempt_it_holds() {
    let r = TestRepo::simple();
    r.git(&["config", "factory.verify", "sh -c 'sleep 1'"]);
    let wo = r.work_order(order(&["true"]));
    let replay = r.replay(
        "rp",
        &[("1.json", proposal(&two_file_change(), "two files"))],
    );
    let out = r
        .factory()
        .env("GIT_FACTORY_TEST_CRASH_AT", "during_verify")
        .args(["run", "--max-attempts", "1", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("runs");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9), "{}", stderr_of(&out));
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    let ids = r.run_ids();
    assert_eq!(ids.len(), 1);
    let listing = r.git(&[
        "ls-tree",
        "--name-only",
        &format!("refs/factory/{}", ids[0]),
    ]);
    assert!(listing.lines().any(|l| l == "attempt_1"), "{listing}");
    let show = r
        .factory()
        .args(["show", &ids[0], "--json"])
        .output()
        .expect("show");
    let s: Value = serde_json::from_str(&stdout_of(&show)).expect("readable record");
    assert_eq!(s["verdict"], "INTERRUPTED");
    let attempts = s["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 1, "{s:#}");
    assert_eq!(attempts[0]["attempt_index"], 1);
    assert_eq!(attempts[0]["apply_ok"], true, "{s:#}");
    assert!(
        attempts[0]["touched_files"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{s:#}"
    );
}

#[cfg(feature = "test-hooks")]
#[test]
fn a_killed_worktree_run_points_the_next_run_to_recover() {
    let r = TestRepo::simple();
    r.git(&["config", "factory.verify", "sh -c 'sleep 1'"]);
    let wo = r.work_order(order(&["true"]));
    let replay = r.replay(
        "rp",
        &[("1.json", proposal(&two_file_change(), "two files"))],
    );
    let out = r
        .factory()
        .env("GIT_FACTORY_TEST_CRASH_AT", "during_verify")
        .args(["run", "--worktree", "--max-attempts", "1", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("runs");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9), "{}", stderr_of(&out));
    let before = r.snapshot();
    for flags in [&[][..], &["--worktree"][..]] {
        let again = r.run_replay(&wo, &replay, flags);
        assert_eq!(
            again.status.code(),
            Some(2),
            "{flags:?}: {}",
            stderr_of(&again)
        );
        assert!(
            stderr_of(&again).contains("git factory recover"),
            "{flags:?}: {}",
            stderr_of(&again)
        );
        assert_eq!(r.snapshot(), before, "{flags:?}: nothing touched");
    }
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    let next = r.run_replay(&wo, &replay, &["--worktree", "--force"]);
    assert_eq!(next.status.code(), Some(0), "{}", stderr_of(&next));
}
