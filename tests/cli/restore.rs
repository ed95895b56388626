//! Putting the repo back (SPEC §7): rollback, the PASS side-effect restore, `recover` and a
//! failed delivery, against hostile checks — each compared byte for byte with the repo before
//! (work tree with ignored files and modes, index bytes, HEAD, every ref) and, where a check
//! aims outside, with a sentinel folder that must not change.

use crate::common::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

const APP: [&str; 3] = ["one", "two", "three"];

fn good() -> String {
    proposal(
        &diff_replace("app.txt", &APP, "two", "TWO"),
        "uppercase two",
    )
}

/// One attempt with the good change and `check` as the acceptance command.
fn run_check(r: &TestRepo, check: &str, flags: &[&str]) -> std::process::Output {
    let wo = r.work_order(basic_order(&[check]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let mut all = vec!["--max-attempts", "1"];
    all.extend_from_slice(flags);
    r.run_replay(&wo, &replay, &all)
}

/// A run in the worktree at `cwd` with the good change, killed (-9) while its check runs;
/// returns its replay folder.
fn killed_mid_check(r: &TestRepo, cwd: &Path) -> std::path::PathBuf {
    let marker = r.outside.join("started");
    let check = format!("sh -c 'touch {}; sleep 30'", marker.display());
    let wo = r.work_order(basic_order(&[&check]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let mut child = r
        .spawn(&["run", "-q", "-w"])
        .current_dir(cwd)
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    wait_for(&marker);
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
    replay
}

fn summary_of(r: &TestRepo, id: &str) -> Value {
    serde_json::from_str(&r.git(&["show", &format!("refs/factory/{id}:run_summary.json")]))
        .expect("a readable record")
}

/// Every file below `dir` with its bytes and mode.
fn folder(dir: &Path) -> Vec<(String, u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir).expect("dir").flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let meta = std::fs::symlink_metadata(e.path()).expect("meta");
        let name = e.file_name().to_string_lossy().into_owned();
        if meta.is_dir() {
            out.push((format!("{name}/"), meta.permissions().mode(), Vec::new()));
            for (n, m, b) in folder(&e.path()) {
                out.push((format!("{name}/{n}"), m, b));
            }
        } else {
            out.push((
                name,
                meta.permissions().mode(),
                std::fs::read(e.path()).expect("read"),
            ));
        }
    }
    out
}

fn sentinel(r: &TestRepo) -> std::path::PathBuf {
    let s = r.outside.join("sentinel");
    std::fs::create_dir_all(&s).expect("mkdir");
    std::fs::write(s.join("app.txt"), "outside\n").expect("write");
    std::fs::write(s.join("new.txt"), "outside new\n").expect("write");
    // A folder named like one of the repo's, with another mode: not to be "put back".
    std::fs::create_dir_all(s.join("deep")).expect("mkdir");
    std::fs::set_permissions(s.join("deep"), std::fs::Permissions::from_mode(0o500))
        .expect("chmod");
    s
}

/// A repo whose change touches `src/app.txt` and creates `src/new.txt`.
fn nested() -> (TestRepo, std::path::PathBuf, std::path::PathBuf) {
    let r = TestRepo::with_files(&[
        ("src/app.txt", "one\ntwo\nthree\n"),
        ("src/deep/x.txt", "x\n"),
        ("keep.txt", "k\n"),
    ]);
    r.git(&["config", "factory.verify", "true"]);
    let diff = format!(
        "{}diff --git a/src/new.txt b/src/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/src/new.txt\n@@ -0,0 +1 @@\n+created\n",
        diff_replace("src/app.txt", &APP, "two", "TWO")
    );
    let wo = r.work_order(json!({
        "id": "wo-n", "title": "nested", "intent": "i",
        "allowed_files": ["src/app.txt", "src/new.txt"],
        "acceptance_commands": ["false"],
    }));
    let replay = r.replay("rp-n", &[("1.json", proposal(&diff, "s"))]);
    (r, wo, replay)
}

fn nested_run(
    r: &TestRepo,
    wo: &Path,
    replay: &Path,
    check: &str,
    flags: &[&str],
) -> std::process::Output {
    let mut order: Value = serde_json::from_slice(&std::fs::read(wo).expect("wo")).expect("json");
    order["acceptance_commands"] = json!([check]);
    std::fs::write(wo, order.to_string()).expect("write");
    let mut all = vec!["--max-attempts", "1"];
    all.extend_from_slice(flags);
    r.run_replay(wo, replay, &all)
}

#[test]
fn rollback_never_writes_through_a_symlink_a_check_planted() {
    for flags in [&[][..], &["--sandbox"][..]] {
        if flags.contains(&"--sandbox")
            && std::process::Command::new("bwrap")
                .arg("--version")
                .output()
                .is_err()
        {
            continue;
        }
        let (r, wo, replay) = nested();
        let s = sentinel(&r);
        let outside_before = folder(&s);
        let before = r.snapshot();
        let check = format!("sh -c 'rm -rf src && ln -s {} src; false'", s.display());
        let out = nested_run(&r, &wo, &replay, &check, flags);
        assert_eq!(out.status.code(), Some(1), "{flags:?}: {}", stderr_of(&out));
        assert_eq!(
            folder(&s),
            outside_before,
            "{flags:?}: nothing outside the repo changed"
        );
        assert_eq!(r.snapshot(), before, "{flags:?}");
    }
}

#[test]
fn rollback_never_writes_under_a_file_symlink_either() {
    let (r, wo, replay) = nested();
    let s = sentinel(&r);
    let outside_before = folder(&s);
    let before = r.snapshot();
    let check = format!(
        "sh -c 'rm -f src/app.txt && ln -s {}/app.txt src/app.txt; false'",
        s.display()
    );
    let out = nested_run(&r, &wo, &replay, &check, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(folder(&s), outside_before);
    assert_eq!(r.snapshot(), before);
}

#[test]
fn kill_9_while_a_check_had_staged_and_committed_is_recovered() {
    let r = TestRepo::simple();
    r.write(".env", "SECRET=1\n");
    let before = r.snapshot();
    let marker = r.outside.join("committed");
    let check = format!(
        "sh -c 'echo x > new.txt && git add new.txt && git -c user.name=a -c user.email=a@a.invalid commit -qm sneaky && git tag sneaky && echo y > other.txt && git add other.txt && touch {} && sleep 30'",
        marker.display()
    );
    let wo = r.work_order(basic_order(&[&check]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let mut child = r
        .spawn(&["run", "-q", "--max-attempts", "1", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    wait_for(&marker);
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    assert_eq!(r.snapshot(), before, "refs, index and tree are back");
    let ids = r.run_ids();
    assert_eq!(summary_of(&r, &ids[0])["verdict"], "INTERRUPTED");
    let again = r.run_replay(&wo, &replay, &["--force", "--max-attempts", "1"]);
    assert_ne!(again.status.code(), Some(2), "{}", stderr_of(&again));
}

#[test]
fn the_index_is_saved_as_bytes_not_a_link_to_itself() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    // Rewrites .git/index in place (same inode), as some tools do.
    let out = run_check(&r, "sh -c 'printf junk > .git/index; false'", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(r.snapshot(), before);
    assert_eq!(r.git(&["status", "--porcelain"]), "");
}

fn set_mode(r: &TestRepo, path: &str, mode: u32) {
    std::fs::set_permissions(r.root.join(path), std::fs::Permissions::from_mode(mode))
        .expect("chmod");
}

fn mode_of(r: &TestRepo, path: &str) -> u32 {
    std::fs::metadata(r.root.join(path))
        .expect("meta")
        .permissions()
        .mode()
}

#[test]
fn restored_files_keep_their_exact_mode() {
    let r = TestRepo::simple();
    set_mode(&r, "app.txt", 0o600);
    let before = r.snapshot();
    let out = run_check(&r, "false", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(r.snapshot(), before, "0600 stays 0600 after a rollback");
    let out = run_check(&r, "true", &["--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let mode = mode_of(&r, "app.txt");
    assert_eq!(mode & 0o777, 0o600, "the change keeps the file's mode too");
}

#[cfg(feature = "test-hooks")]
#[test]
fn recover_restores_exact_modes() {
    let r = TestRepo::simple();
    set_mode(&r, "app.txt", 0o600);
    let before = r.snapshot();
    let wo = r.work_order(basic_order(&["true"]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let out = r
        .factory()
        .env("GIT_FACTORY_TEST_CRASH_AT", "during_acceptance")
        .args(["run", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("runs");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9));
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    assert_eq!(r.snapshot(), before);
}

#[test]
fn recover_run_in_another_worktree_restores_the_run_worktree_only() {
    let r = TestRepo::simple();
    let other = r.tmp.path().join("other-wt");
    r.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "side",
        other.to_str().expect("utf8"),
    ]);
    std::fs::write(other.join("app.txt"), "my uncommitted edit\n").expect("write");
    std::fs::write(other.join("mine.txt"), "untracked of mine\n").expect("write");
    let before_main = r.snapshot();
    let before_other = r.snapshot_of(&other);
    let replay = killed_mid_check(&r, &r.root);
    // Every changing command in the other worktree names the worktree to recover.
    let wo2 = r.work_order(basic_order(&["true"]));
    let refused = r
        .factory()
        .current_dir(&other)
        .args(["run", "-w"])
        .arg(&wo2)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("runs");
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr_of(&refused).contains(&r.root.display().to_string()),
        "{}",
        stderr_of(&refused)
    );
    let rec = r
        .factory()
        .current_dir(&other)
        .arg("recover")
        .output()
        .expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    assert_eq!(
        r.snapshot_of(&other),
        before_other,
        "the worktree recover ran in is untouched"
    );
    assert_eq!(r.snapshot(), before_main, "the run's worktree is restored");
    assert_eq!(summary_of(&r, &r.run_ids()[0])["verdict"], "INTERRUPTED");
}

#[test]
fn recover_refuses_naming_a_worktree_that_is_gone() {
    let r = TestRepo::simple();
    let wt = r.tmp.path().join("run-wt");
    r.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "side",
        wt.to_str().expect("utf8"),
    ]);
    killed_mid_check(&r, &wt);
    std::fs::rename(&wt, r.tmp.path().join("moved-away")).expect("mv");
    let before = r.snapshot();
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(2), "{}", stderr_of(&rec));
    assert!(
        stderr_of(&rec).contains(&wt.display().to_string()),
        "{}",
        stderr_of(&rec)
    );
    assert_eq!(
        r.snapshot(),
        before,
        "the worktree recover ran in is untouched"
    );
}

#[test]
fn a_held_index_lock_at_delivery_undoes_the_delivery_and_finishes_the_record() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    // An editor holds the index lock from the moment the checks ran.
    let check = "sh -c 'touch .git/index.lock'";
    let out = run_check(&r, check, &["--commit"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("index.lock"),
        "{}",
        stderr_of(&out)
    );
    std::fs::remove_file(r.root.join(".git/index.lock"))
        .expect("the lock is the editor's, left alone");
    assert_eq!(r.snapshot(), before, "the delivery is undone");
    let ids = r.run_ids();
    assert_eq!(summary_of(&r, &ids[0])["verdict"], "ERROR");
    assert!(r.journals().is_empty());
    let rec = r.factory().arg("recover").output().expect("recover");
    assert!(
        stderr_of(&rec).contains("nothing to recover"),
        "{}",
        stderr_of(&rec)
    );
    let again = run_check(&r, "true", &["--commit"]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr_of(&again));
}

#[test]
fn an_agent_command_that_stages_and_commits_is_restored_and_its_attempt_fails() {
    // SPEC §7: an --agent-command agent that changes the repo is audited like an
    // --agent-edits one: put back, and the attempt fails with agent_escaped.
    let r = TestRepo::simple();
    let before = r.snapshot();
    let diff = r.outside.join("answer.diff");
    std::fs::write(&diff, diff_replace("app.txt", &APP, "two", "TWO")).expect("write");
    let script = r.outside.join("agent.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncase \"$(cat)\" in *'\"attempt\":1'*)\necho note > notes.txt\ngit add notes.txt\ngit commit -qm 'agent bookkeeping'\necho staged > other.txt\ngit add other.txt;;\nesac\ncat {}\n",
            diff.display()
        ),
    )
    .expect("write");
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r
        .factory()
        .args(["run", "--json", "-w"])
        .arg(&wo)
        .arg("--agent-command")
        .arg(format!("sh {}", script.display()))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    let brief = &s["attempts"][0]["failure_brief"];
    assert_eq!(brief["stage"], "agent_escaped");
    let text = brief["primary_error_excerpt"].as_str().unwrap_or("");
    assert!(
        text.contains("put back: notes.txt, other.txt, refs/heads/main, .git/index"),
        "{text}"
    );
    assert!(
        text.contains("instead of only printing your proposal"),
        "{text}"
    );
    assert_eq!(s["attempts"][0]["apply_ok"], false);
    let after = r.snapshot();
    assert_eq!(
        (&after.head, &after.refs, &after.index),
        (&before.head, &before.refs, &before.index)
    );
    assert_eq!(r.git(&["status", "--porcelain"]), " M app.txt\n");
    assert_eq!(s["verdict"], "PASS");
}

#[test]
fn two_worktree_runs_with_the_same_run_id_never_share_a_worktree() {
    let r = TestRepo::simple();
    let marker = r.outside.join("started");
    let check = format!(
        "sh -c 'touch {}; sleep 2; grep -qx TWO app.txt'",
        marker.display()
    );
    let wo = r.work_order(basic_order(&[&check]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let mut first = r
        .spawn(&["run", "-q", "--worktree", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    wait_for(&marker);
    let second = r.run_replay(&wo, &replay, &["--worktree"]);
    assert_eq!(second.status.code(), Some(2), "{}", stderr_of(&second));
    assert!(
        stderr_of(&second).contains(&format!("pid {}", first.id())),
        "{}",
        stderr_of(&second)
    );
    assert_eq!(
        first.wait().expect("ends").code(),
        Some(0),
        "the first run is not disturbed"
    );
    only_idle_pooled_worktrees(&r);
}

#[test]
fn an_untracked_file_in_a_submodule_is_rolled_back() {
    let r = TestRepo::simple();
    let sub = r.tmp.path().join("subsrc");
    std::fs::create_dir_all(&sub).expect("mkdir");
    let mut git = assert_cmd::Command::new("git");
    hermetic(&mut git, &r.home);
    git.current_dir(&sub)
        .args(["init", "-q", "-b", "main"])
        .assert()
        .success();
    std::fs::write(sub.join("lib.txt"), "lib\n").expect("write");
    for args in [&["add", "-A"][..], &["commit", "-qm", "lib"][..]] {
        let mut git = assert_cmd::Command::new("git");
        hermetic(&mut git, &r.home);
        git.current_dir(&sub).args(args).assert().success();
    }
    r.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        sub.to_str().expect("utf8"),
        "sub",
    ]);
    r.git(&["commit", "-qm", "submodule"]);
    let before = r.snapshot();
    let out = run_check(
        &r,
        "sh -c 'echo x > sub/stray.txt; echo y > sub/lib.txt; false'",
        &["--json"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(r.snapshot(), before);
}

#[test]
fn a_commit_a_check_makes_inside_a_submodule_is_undone_and_the_attempt_recorded() {
    let r = TestRepo::simple();
    let sub = r.tmp.path().join("subsrc");
    std::fs::create_dir_all(&sub).expect("mkdir");
    std::fs::write(sub.join("lib.txt"), "lib\n").expect("write");
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"][..],
        &["commit", "-qm", "lib"][..],
    ] {
        let mut git = assert_cmd::Command::new("git");
        hermetic(&mut git, &r.home);
        git.current_dir(&sub).args(args).assert().success();
    }
    r.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        sub.to_str().expect("utf8"),
        "sub",
    ]);
    r.git(&["commit", "-qm", "submodule"]);
    let head = |r: &TestRepo| {
        let mut git = std::process::Command::new("git");
        git.current_dir(r.root.join("sub"))
            .args(["rev-parse", "HEAD"])
            .env("HOME", &r.home);
        String::from_utf8(git.output().expect("git").stdout).expect("utf8")
    };
    let was = head(&r);
    let out = run_check(
        &r,
        "sh -c 'cd sub && echo y >> lib.txt && echo u > new.txt && git -c user.name=T -c user.email=t@e commit -qam x; exit 1'",
        &["--json"],
    );
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("a summary");
    assert_eq!(s["verdict"], "FAIL", "{s}");
    assert_eq!(s["attempts"].as_array().map(Vec::len), Some(1), "{s}");
    assert_eq!(head(&r), was, "the submodule is back at its gitlink commit");
    assert_eq!(r.git(&["status", "--porcelain"]), "", "clean again");
    let again = run_check(&r, "true", &[]);
    assert_eq!(
        again.status.code(),
        Some(0),
        "no journal left pending: {}",
        stderr_of(&again)
    );
}

#[test]
fn a_file_name_that_is_not_utf8_is_rolled_back() {
    use std::os::unix::ffi::OsStrExt;
    let r = TestRepo::simple();
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(r.root.join(name), "latin-1 name\n").expect("write");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "latin-1"]);
    let before = r.snapshot();
    let out = run_check(&r, "sh -c 'echo changed > \"$(printf \"caf\\351.txt\")\"; echo new > \"$(printf \"n\\351w.txt\")\"; false'", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(r.snapshot(), before);
}

#[test]
fn a_directory_chmodded_000_is_rolled_back() {
    let r = TestRepo::simple();
    r.write("d/f.txt", "in d\n");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "d"]);
    let before = r.snapshot();
    let out = run_check(
        &r,
        "sh -c 'mkdir -p made && echo x > made/y && chmod 000 made d; false'",
        &[],
    );
    let after = r.snapshot();
    // Readable again, so the temporary folder can be removed whatever the outcome.
    let _ = std::fs::set_permissions(r.root.join("d"), std::fs::Permissions::from_mode(0o755));
    let _ = std::fs::set_permissions(r.root.join("made"), std::fs::Permissions::from_mode(0o755));
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(after, before);
}

#[test]
fn empty_directories_that_existed_are_kept_and_new_ones_removed() {
    let r = TestRepo::simple();
    std::fs::create_dir_all(r.root.join("keep/inner")).expect("mkdir");
    let before = r.snapshot();
    let out = run_check(
        &r,
        "sh -c 'echo x > keep/inner/stray.txt; mkdir -p made/deeper; false'",
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(r.snapshot(), before);
}

#[test]
fn refs_a_check_created_or_moved_are_put_back() {
    let r = TestRepo::simple();
    r.git(&["branch", "old"]);
    r.write("second.txt", "2\n");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "second"]);
    r.git(&["tag", "-a", "-m", "v1", "v1"]);
    let before = r.snapshot();
    let check = "sh -c 'git branch newb && git tag t1 && git branch -f old HEAD && git tag -d v1 && echo x > other.txt && git stash -q && git update-ref refs/custom/x HEAD; false'";
    let out = run_check(&r, check, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(r.snapshot(), before);
}

#[test]
fn git_config_changes_are_reported_as_side_effects_and_undone() {
    let r = TestRepo::simple();
    let config_before = std::fs::read(r.root.join(".git/config")).expect("config");
    let out = run_check(
        &r,
        "sh -c 'git config core.hooksPath /tmp/elsewhere && grep -qx TWO app.txt'",
        &["--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert!(
        s["side_effects"]
            .as_array()
            .expect("list")
            .iter()
            .any(|p| p == ".git/config"),
        "{s}"
    );
    assert_eq!(
        std::fs::read(r.root.join(".git/config")).expect("config"),
        config_before
    );
}

#[test]
fn a_closed_output_pipe_is_an_interrupt() {
    use std::io::BufRead;
    let r = TestRepo::simple();
    let before = r.snapshot();
    let wo = r.work_order(basic_order(&["sh -c 'sleep 1; true'"]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let mut child = r
        .spawn(&["run", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    {
        let mut first = String::new();
        let mut err = std::io::BufReader::new(child.stderr.take().expect("pipe"));
        err.read_line(&mut first).expect("a first line");
        assert!(first.contains("factory"), "{first}");
    } // `| head -1`: the reader is gone
    let status = child.wait().expect("ends");
    assert_eq!(status.code(), Some(130));
    assert_eq!(r.snapshot(), before);
    assert_eq!(summary_of(&r, &r.run_ids()[0])["verdict"], "INTERRUPTED");
    assert!(r.journals().is_empty());
    let again = r.run_replay(&wo, &replay, &[]);
    assert_eq!(
        again.status.code(),
        Some(0),
        "the lock was released: {}",
        stderr_of(&again)
    );
    std::thread::sleep(Duration::from_millis(10));
}

#[test]
fn a_path_that_cannot_be_put_back_is_named_and_recover_finishes_later() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    // The check stages a change, then an editor takes the index lock: the index cannot be
    // put back until it lets go.
    let check = "sh -c 'echo y > other.txt && git add other.txt && touch .git/index.lock; false'";
    let out = run_check(&r, check, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains(".git/index") && err.contains("index.lock"),
        "{err}"
    );
    let ids = r.run_ids();
    assert_eq!(summary_of(&r, &ids[0])["verdict"], "ERROR");
    // Until recover has put it back, changing commands point at it.
    let again = run_check(&r, "true", &["--force"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr_of(&again).contains("git factory recover"),
        "{}",
        stderr_of(&again)
    );
    std::fs::remove_file(r.root.join(".git/index.lock")).expect("the editor lets go");
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    assert_eq!(r.snapshot(), before);
}

#[test]
fn hooks_a_check_plants_or_changes_are_put_back_with_their_modes() {
    // A planted hook would run on the user's next commit: hooks are put back like
    // .git/config, on a failed attempt and after a PASS (named in side_effects).
    let r = TestRepo::simple();
    let hooks = r.root.join(".git/hooks");
    std::fs::create_dir_all(&hooks).expect("hooks");
    std::fs::write(hooks.join("pre-push"), "#!/bin/sh\nexit 0\n").expect("hook");
    std::fs::set_permissions(
        hooks.join("pre-push"),
        std::fs::Permissions::from_mode(0o750),
    )
    .expect("chmod");
    let before = folder(&hooks);
    let plant = "sh -c 'printf \"#!/bin/sh\\ntouch pwned\\n\" > .git/hooks/pre-commit; chmod 755 .git/hooks/pre-commit; echo evil >> .git/hooks/pre-push; chmod 777 .git/hooks/pre-push; exit 1'";
    let out = run_check(&r, plant, &["--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(folder(&hooks), before);

    let plant_and_pass = "sh -c 'echo evil >> .git/hooks/pre-push; touch .git/hooks/post-checkout; grep -qx TWO app.txt'";
    let out = run_check(&r, plant_and_pass, &["--json", "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(folder(&hooks), before);
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    let side: Vec<String> = s["side_effects"]
        .as_array()
        .expect("side_effects")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    assert!(
        side.iter().any(|p| p.ends_with(".git/hooks/post-checkout")),
        "{side:?}"
    );
    assert!(
        side.iter().any(|p| p.ends_with(".git/hooks/pre-push")),
        "{side:?}"
    );
}

/// A check that hides what it writes with ignore rules of its own: a `.gitignore` that
/// ignores itself, a new folder ignoring `*`, a line in `.git/info/exclude`.
const HIDING_CHECK: &str = "sh -c 'printf \".gitignore\\nhidden.py\\n\" > .gitignore.d; \
    mkdir -p sub && mv .gitignore.d sub/.gitignore && echo x > sub/hidden.py; \
    mkdir cache && echo \"*\" > cache/.gitignore && echo y > cache/data; \
    echo planted.txt >> .git/info/exclude && echo z > planted.txt; \
    echo leaked > build/new.txt; exit $EXIT'";

#[test]
fn files_a_check_hides_with_its_own_ignore_rules_are_removed() {
    for (exit, flags) in [("1", vec![]), ("0", vec!["--force"])] {
        let r = TestRepo::with_files(&[
            ("app.txt", "one\ntwo\nthree\n"),
            ("sub/keep.txt", "k\n"),
            (".gitignore", ".env\nbuild/\n"),
        ]);
        r.git(&["config", "factory.verify", "true"]);
        r.write(".env", "SECRET=1\n");
        r.write("build/old.txt", "old\n");
        let exclude = std::fs::read(r.root.join(".git/info/exclude")).unwrap_or_default();
        let before = r.snapshot();
        let check = HIDING_CHECK.replace("$EXIT", exit);
        let out = run_check(&r, &check, &flags);
        assert!(r.read("sub/hidden.py").is_none(), "{}", stderr_of(&out));
        assert!(r.read("sub/.gitignore").is_none());
        assert!(!r.root.join("cache").exists());
        assert!(r.read("planted.txt").is_none());
        assert_eq!(
            std::fs::read(r.root.join(".git/info/exclude")).unwrap_or_default(),
            exclude
        );
        assert_eq!(r.read(".env").as_deref(), Some("SECRET=1\n"), "kept");
        assert_eq!(r.read("build/old.txt").as_deref(), Some("old\n"), "kept");
        if exit == "1" {
            // Inside an ignored folder that existed, new files are the user's kind of data.
            let _ = std::fs::remove_file(r.root.join("build/new.txt"));
            assert_eq!(r.snapshot(), before, "rollback");
        } else {
            let _ = std::fs::remove_file(r.root.join("build/new.txt"));
            let id = r.run_ids().pop().expect("a run");
            let s = summary_of(&r, &id);
            let effects = s["side_effects"].to_string();
            for p in ["sub/hidden.py", "cache", "planted.txt", ".git/info/exclude"] {
                assert!(effects.contains(p), "{p} in {effects}");
            }
        }
    }
}

#[test]
fn an_ignored_folder_a_check_renames_is_put_back_not_deleted() {
    let r = TestRepo::simple();
    r.write("build/old.txt", "old\n");
    let before = r.snapshot();
    let out = run_check(&r, "sh -c 'mv build build2; exit 1'", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(
        r.snapshot(),
        before,
        "the user's ignored data is back in place"
    );
    // Moved aside with a link to elsewhere standing in its place.
    let elsewhere = r.outside.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    let check = format!(
        "sh -c 'mv build build.real && ln -s {} build; exit 1'",
        elsewhere.display()
    );
    let out = run_check(&r, &check, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(r.snapshot(), before, "the link goes, the folder comes back");
    assert!(elsewhere.exists());
}

#[test]
fn a_0600_file_a_check_rewrites_or_chmods_keeps_its_mode() {
    let r = TestRepo::simple();
    set_mode(&r, "other.txt", 0o600);
    let before = r.snapshot();
    let out = run_check(&r, "sh -c 'rm other.txt; echo x > other.txt; exit 1'", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(r.snapshot(), before, "a replaced 0600 file comes back 0600");
    let out = run_check(&r, "chmod 644 other.txt", &["--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let mode = mode_of(&r, "other.txt");
    assert_eq!(mode & 0o777, 0o600, "the side-effect restore keeps it 0600");
}

#[test]
fn a_file_a_check_writes_where_sparse_checkout_left_a_path_out_is_removed() {
    for (exit, flags) in [("1", vec![]), ("0", vec!["--force"])] {
        let r = TestRepo::with_files(&[
            ("app.txt", "one\ntwo\nthree\n"),
            ("far/x.txt", "far\n"),
            ("far/y.txt", "far too\n"),
        ]);
        r.git(&["config", "factory.verify", "true"]);
        r.git(&["sparse-checkout", "set", "--no-cone", "/*", "!/far/"]);
        assert!(
            !r.root.join("far").exists(),
            "sparse checkout left far/ out"
        );
        let before = r.snapshot();
        let check = format!("sh -c 'mkdir -p far && echo planted > far/x.txt; exit {exit}'");
        let out = run_check(&r, &check, &flags);
        assert!(!r.root.join("far").exists(), "{}", stderr_of(&out));
        if exit == "1" {
            assert_eq!(r.snapshot(), before);
        } else {
            r.git(&["checkout", "--", "app.txt"]);
        }
        let again = run_check(&r, "true", &["--force"]);
        assert_eq!(again.status.code(), Some(0), "{}", stderr_of(&again));
    }
}

#[test]
fn hooks_a_check_adds_or_changes_are_put_back_and_reported() {
    for (exit, flags) in [("1", vec![]), ("0", vec!["--force"])] {
        let r = TestRepo::simple();
        let hooks = r.root.join(".git/hooks");
        std::fs::create_dir_all(&hooks).expect("mkdir");
        std::fs::write(hooks.join("pre-push"), "#!/bin/sh\nexit 0\n").expect("write");
        std::fs::set_permissions(
            hooks.join("pre-push"),
            std::fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
        let before = folder(&hooks);
        let check = format!(
            "sh -c 'printf \"#!/bin/sh\\necho owned\\n\" > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; echo evil >> .git/hooks/pre-push; exit {exit}'"
        );
        let out = run_check(&r, &check, &flags);
        assert_eq!(folder(&hooks), before, "{}", stderr_of(&out));
        if exit == "0" {
            let id = r.run_ids().pop().expect("a run");
            let effects = summary_of(&r, &id)["side_effects"].to_string();
            for p in [".git/hooks/pre-commit", ".git/hooks/pre-push"] {
                assert!(effects.contains(p), "{p} in {effects}");
            }
        }
    }
}

#[test]
fn a_worktree_run_names_the_shared_refs_and_config_a_check_changed_and_never_claims_them_restored()
{
    let r = TestRepo::simple();
    let out = run_check(
        &r,
        "sh -c 'git tag planted && git config planted.key 1; exit 1'",
        &["--worktree"],
    );
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        !err.contains(".git/config; restored"),
        "the key is still set: {err}"
    );
    assert_eq!(r.git(&["config", "planted.key"]).trim(), "1");
    assert!(
        err.contains("refs/tags/planted")
            && err.contains(".git/config")
            && err.contains("left as is"),
        "{err}"
    );
}

#[cfg(feature = "test-hooks")]
#[test]
fn recover_removes_the_index_lock_of_the_command_it_stopped() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let wo = r.work_order(basic_order(&[
        "sh -c 'echo x > junk; git add junk; : > .git/index.lock; : > lock-made; exec sleep 30'",
    ]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let out = r
        .factory()
        .env("GIT_FACTORY_TEST_CRASH_AT", "during_acceptance")
        .args(["run", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("runs");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9));
    // (git add holds an index.lock of its own for a moment: wait for the marker after ours.)
    wait_for(&r.root.join("lock-made"));
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    assert!(!r.root.join(".git/index.lock").exists());
    assert_eq!(r.snapshot(), before);
    // A lock a live process holds is never taken away.
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
    // (git add holds an index.lock of its own for a moment: wait for the marker after ours.)
    wait_for(&r.root.join("lock-made"));
    let lock = std::fs::File::open(r.root.join(".git/index.lock")).expect("held");
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_ne!(rec.status.code(), Some(0), "a held lock stays");
    assert!(
        stderr_of(&rec).contains("index.lock"),
        "{}",
        stderr_of(&rec)
    );
    drop(lock);
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    assert_eq!(r.snapshot(), before);
}

#[test]
fn run_records_a_check_deletes_are_put_back() {
    let r = TestRepo::simple();
    let out = run_check(&r, "false", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let first = r.run_ids();
    assert_eq!(first.len(), 1);
    let check = format!(
        "sh -c 'git update-ref -d refs/factory/{}; exit 1'",
        first[0]
    );
    let out = run_check(&r, &check, &["--force"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let now = r.run_ids();
    assert!(
        now.contains(&first[0]),
        "the earlier run's record is back: {now:?}"
    );
    assert_eq!(now.len(), 2, "{now:?}");
}

#[test]
fn bytecode_a_check_hid_by_renaming_or_linking_the_users_pycache_is_removed() {
    // The check moves the user's pkg/__pycache__ aside, rewrites an entry in it in place,
    // and puts a link to a folder of forged bytecode where it was. The user's folder comes
    // back (it is theirs), without the rewritten entry; the forgery goes, link and all.
    for flags in [&[][..], &["--sandbox"][..]] {
        if flags.contains(&"--sandbox")
            && std::process::Command::new("bwrap")
                .arg("--version")
                .output()
                .is_err()
        {
            continue;
        }
        let r = TestRepo::with_files(&[
            ("app.txt", "one\ntwo\nthree\n"),
            (".gitignore", "build/\n__pycache__/\n"),
            ("pkg/mod.py", "X = 1\n"),
        ]);
        r.git(&["config", "factory.verify", "true"]);
        r.write("pkg/__pycache__/mod.cpython-311.pyc", "USER MOD\n");
        r.write("pkg/__pycache__/other.cpython-311.pyc", "USER OTHER\n");
        let check = "sh -c 'mv pkg/__pycache__ pkg/aside \
            && printf FORGED > pkg/aside/mod.cpython-311.pyc \
            && mkdir -p build/cache && printf FORGED > build/cache/mod.cpython-311.pyc \
            && ln -s ../build/cache pkg/__pycache__; false'";
        let out = run_check(&r, check, flags);
        assert_eq!(out.status.code(), Some(1), "{flags:?}: {}", stderr_of(&out));
        let cache = r.root.join("pkg/__pycache__");
        let meta = std::fs::symlink_metadata(&cache).expect("the user's folder is back");
        assert!(meta.is_dir(), "{flags:?}: a real folder, not the link");
        assert_eq!(
            r.read("pkg/__pycache__/other.cpython-311.pyc").as_deref(),
            Some("USER OTHER\n")
        );
        if flags.is_empty() {
            assert!(
                !cache.join("mod.cpython-311.pyc").exists(),
                "{flags:?}: rewritten, so removed"
            );
        } else {
            // Sandboxed, the user's ignored folder is read-only (SPEC §7.1): never moved nor
            // rewritten.
            assert_eq!(
                r.read("pkg/__pycache__/mod.cpython-311.pyc").as_deref(),
                Some("USER MOD\n"),
                "{flags:?}"
            );
        }
        assert!(!r.root.join("pkg/aside").exists(), "{flags:?}");
        assert!(
            !r.root.join("build/cache/mod.cpython-311.pyc").exists(),
            "{flags:?}"
        );
        assert_eq!(r.git(&["status", "--porcelain"]), "", "{flags:?}");
    }
}
