//! What `git factory recover` trusts in `.git/factory/` (SPEC §7): a journal and a
//! `--worktree` run's owner file are files an unconfined check or agent can write, and
//! `recover` acts on what they name — it rewrites a worktree, puts hooks back, removes the
//! saved state and a run's worktree. A file naming another repository or any folder of the
//! user's must leave them alone.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A run killed while its check ran: its journal is left for `recover`.
fn killed_run(r: &TestRepo) -> PathBuf {
    use std::os::unix::process::ExitStatusExt;
    let wo = r.work_order(basic_order(&["true"]));
    let replay = r.replay(
        "rp",
        &[(
            "1.json",
            proposal(
                &diff_replace("app.txt", &["one", "two", "three"], "two", "TWO"),
                "s",
            ),
        )],
    );
    let out = r
        .factory()
        .env("GIT_FACTORY_TEST_CRASH_AT", "during_acceptance")
        .args(["run", "--max-attempts", "1", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("runs");
    assert_eq!(out.status.signal(), Some(9), "{}", stderr_of(&out));
    let journal = std::fs::read_dir(r.root.join(".git/factory"))
        .expect("factory dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with("journal.") && name.ends_with(".json")
        });
    journal.expect("a journal is left")
}

/// Rewrites the journal at `path` with `edit`.
fn forge(path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut j: Value = serde_json::from_slice(&std::fs::read(path).expect("read")).expect("json");
    edit(&mut j);
    std::fs::write(path, serde_json::to_vec_pretty(&j).expect("json")).expect("write");
}

/// A folder of the user's outside the repo, with a file in it.
fn precious(r: &TestRepo, name: &str) -> PathBuf {
    let dir = r.outside.join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("keep.txt"), "precious\n").expect("write");
    dir
}

fn recover(r: &TestRepo) -> std::process::Output {
    r.factory().arg("recover").output().expect("recover runs")
}

/// A journal whose hooks folder, saved state or worktree is not this repository's is
/// refused, and nothing it names is touched: `recover` would otherwise empty the folder it
/// names as the hooks (removing every "hook" not in the journal), remove the folder it names
/// as the saved state, or put another repository's tree and index back over its user's work.
#[test]
fn recover_refuses_a_journal_that_names_places_outside_its_repository() {
    type Edit = fn(&mut Value, &Path, &TestRepo);
    let cases: [(&str, Edit); 3] = [
        ("hooks", |j, victim, _| {
            j["restore"]["hooks"]["dir"] = victim.to_string_lossy().into();
        }),
        ("saved", |j, victim, _| {
            j["restore"]["saved"] = victim.to_string_lossy().into();
        }),
        ("another repo", |j, _, other| {
            let root = format!("{}/", other.root.display());
            j["restore"]["root"] = root.clone().into();
            j["restore"]["git_dir"] = format!("{root}.git/").into();
            j["restore"]["baseline"] = other.git(&["rev-parse", "HEAD"]).trim().into();
            j["restore"]["refs"] = serde_json::json!([]);
            j["restore"]["kept"] = serde_json::json!([]);
        }),
    ];
    for (what, edit) in cases {
        let r = TestRepo::simple();
        let other = TestRepo::simple();
        other.write("app.txt", "the user's own work\n");
        other.write("notes.txt", "untracked, the user's\n");
        let other_before = other.snapshot();
        let journal = killed_run(&r);
        let victim = precious(&r, "victim");
        forge(&journal, |j| edit(j, &victim, &other));
        let forged = std::fs::read(&journal).expect("read");

        let out = recover(&r);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{what}: {err}");
        assert!(
            err.contains("was not written by a run of this repository") && err.contains("hint:"),
            "{what}: {err}"
        );
        assert_eq!(
            std::fs::read_to_string(victim.join("keep.txt"))
                .ok()
                .as_deref(),
            Some("precious\n"),
            "{what}: the user's folder was touched"
        );
        assert_eq!(
            std::fs::read_dir(&victim).expect("victim").count(),
            1,
            "{what}"
        );
        assert_eq!(
            other.snapshot(),
            other_before,
            "{what}: another repo changed"
        );
        assert_eq!(
            std::fs::read(&journal).ok(),
            Some(forged),
            "{what}: journal kept"
        );
    }
}

/// A journal whose run id is a path (its files' names are made from it) is refused before
/// anything is stopped, removed or put back.
#[test]
fn recover_refuses_a_journal_whose_run_id_is_a_path() {
    let r = TestRepo::simple();
    let journal = killed_run(&r);
    forge(&journal, |j| j["run_id"] = "../../outside/x".into());
    let out = recover(&r);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("is not a run id"),
        "{}",
        stderr_of(&out)
    );
    assert!(journal.exists());
}

/// An owner file (a `--worktree` run's, `.git/factory/run.<id>.<harness>.json`) that names a
/// folder outside the pool of worktrees is not a run's: `recover` removed the folder it
/// named, whole.
#[test]
fn recover_never_removes_a_folder_a_forged_owner_file_names() {
    let r = TestRepo::simple();
    let victim = precious(&r, "project");
    std::fs::create_dir_all(victim.join("src")).expect("mkdir");
    std::fs::write(victim.join("src/main.c"), "int main;\n").expect("write");
    std::fs::create_dir_all(r.root.join(".git/factory")).expect("mkdir");
    let owner = r.root.join(".git/factory/run.aaaaaaaaaaaa.999999.1.json");
    std::fs::write(
        &owner,
        serde_json::json!({
            "run_id": "aaaaaaaaaaaa",
            "harness": "999999.1",
            "worktree": victim,
            "race": false,
        })
        .to_string(),
    )
    .expect("write");
    let out = recover(&r);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        std::fs::read_to_string(victim.join("keep.txt"))
            .ok()
            .as_deref(),
        Some("precious\n")
    );
    assert_eq!(
        std::fs::read_to_string(victim.join("src/main.c"))
            .ok()
            .as_deref(),
        Some("int main;\n")
    );
}

/// A process-group file (`command.<run>.<harness>.*.pgid`) beside a killed run's journal
/// names the group `recover` stops: one a command wrote, naming a process of the user's
/// that no harness started (their editor, their shell), was killed with SIGKILL.
#[test]
fn recover_never_kills_a_process_group_that_no_run_started() {
    let r = TestRepo::simple();
    let journal = killed_run(&r);
    let mut victim = std::process::Command::new("setsid")
        .args(["sleep", "60"])
        .spawn()
        .expect("setsid sleep");
    // `setsid` execs sleep as the leader of a session (and group) of its own once forked.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let name = journal
        .file_name()
        .expect("name")
        .to_string_lossy()
        .trim_start_matches("journal.")
        .trim_end_matches(".json")
        .to_string();
    std::fs::write(
        r.root
            .join(format!(".git/factory/command.{name}.evil.pgid")),
        victim.id().to_string(),
    )
    .expect("write");
    let out = recover(&r);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let still = victim.try_wait().expect("wait").is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(still, "recover killed a process no run started");
}

/// SPEC §7.1: under `--sandbox` everything outside the tree is read-only. Landlock's rights
/// (up to ABI 7) do not cover a file's mode, and the put-back covers only the tree's own and
/// the git dirs', so a confined check still `chmod`s any file its user owns: a private key
/// made readable to all (`0600` to `0644`), `/etc/shadow` when run as root. Bubblewrap's
/// read-only mounts refuse it (`EROFS`).
#[test]
#[ignore = "open: under Landlock a confined check changes the mode of files outside the tree (no Landlock right covers chmod; seccomp cannot see the path)"]
fn a_check_under_landlock_cannot_change_modes_outside_the_tree() {
    use std::os::unix::fs::PermissionsExt;
    let r = TestRepo::simple();
    let key = r.outside.join("id_ed25519");
    std::fs::write(&key, "private\n").expect("write");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let check = format!("chmod 644 {}", key.display());
    let out = crate::sandbox::confined_run(&r, crate::sandbox::Way::Landlock, &check, &[]);
    let mode = std::fs::metadata(&key).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", stdout_of(&out));
}

/// SPEC §7.1 (read-only outside the tree) and the terminal rule (a command has no terminal
/// to type into): under Landlock `/dev/pts` is granted whole (a check's own pseudo-terminals
/// need it), so a confined check opens the terminal `git factory` runs in by its path —
/// `/dev/pts/N`, not `/dev/tty` — and writes to it (escape sequences: a forged verdict, the
/// clipboard) or reads the user's keystrokes from it. `TIOCSTI` stays refused. Bubblewrap's
/// own `/dev` has no host terminal.
#[test]
fn a_check_under_landlock_cannot_write_to_the_users_terminal() {
    let r = TestRepo::simple();
    let check = "sh -c 'for t in /dev/pts/[0-9]*; do (echo PTS-$((6*7))-WRITTEN > $t) 2>/dev/null; done; true'";
    let (wo, replay) = crate::sandbox::upper_two_order(&r, check);
    let mut line = vec![assert_cmd::cargo::cargo_bin("git-factory")
        .to_string_lossy()
        .into_owned()];
    line.extend(["run", "--sandbox", "--max-attempts", "1", "-w"].map(String::from));
    line.push(wo.to_string_lossy().into_owned());
    line.push("--replay".into());
    line.push(replay.to_string_lossy().into_owned());
    let line = shlex::try_join(line.iter().map(String::as_str)).expect("quotable");
    let mut script = std::process::Command::new("script");
    script.args(["-qefc", &line, "/dev/null"]);
    let mut plain = r.spawn(&[]);
    plain.envs(crate::sandbox::Way::Landlock.env(&r));
    for (k, v) in plain.get_envs() {
        match v {
            Some(v) => script.env(k, v),
            None => script.env_remove(k),
        };
    }
    script.current_dir(&r.root).env("SHELL", "/bin/sh");
    let out = script
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script runs");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("PASS"), "{shown}");
    assert!(!shown.contains("PTS-42-WRITTEN"), "{shown}");
}

/// The harness keeps API keys from checks: it scrubs them from a check's environment and
/// makes itself non-dumpable so `/proc/<harness>/environ` cannot be read. A harness run as
/// root (a CI container) gives an unconfined check `CAP_SYS_PTRACE`, which reads a
/// non-dumpable process's environment anyway: the check reads the key its parent started
/// with.
#[test]
#[ignore = "open: run as root, an unconfined check reads the harness's API key from /proc/<harness>/environ (CAP_SYS_PTRACE overrides non-dumpable)"]
fn an_unconfined_check_run_by_root_cannot_read_the_harness_api_key() {
    let r = TestRepo::simple();
    let check = "sh -c 'tr \"\\0\" \"\\n\" < /proc/$PPID/environ | grep -q attack-key-value && exit 1; exit 0'";
    let (wo, replay) = crate::sandbox::upper_two_order(&r, check);
    let out = r
        .replay_command(&wo, &replay, &["--json", "--max-attempts", "1"])
        .env("OPENAI_API_KEY", "sk-attack-key-value")
        .output()
        .expect("runs");
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["verdict"], "PASS", "{s}");
}

/// The agent audit (SPEC §7) left `.git/factory/`'s live files alone (`journal.*`, owner
/// and command files), so an unconfined agent planted a journal — here the one an earlier
/// killed run left, kept aside — and its run still PASSed, naming nothing. Every later
/// command then pointed the user at `recover`, which put the planted journal's baseline
/// back: the branch lost the user's newer commit and the tree its change.
#[test]
fn an_agent_cannot_plant_a_journal_that_recover_then_acts_on() {
    let r = TestRepo::simple();
    let journal = killed_run(&r);
    let factory = r.root.join(".git/factory");
    let stash = r.outside.join("stash");
    std::fs::create_dir_all(&stash).expect("mkdir");
    let copy = |from: &Path, to: &Path| {
        let ok = std::process::Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .expect("cp");
        assert!(ok.success());
    };
    copy(&journal, &stash);
    let run_id = journal
        .file_name()
        .expect("name")
        .to_string_lossy()
        .split('.')
        .nth(1)
        .expect("run id")
        .to_string();
    copy(&factory.join(format!("saved-{run_id}")), &stash);
    assert_eq!(recover(&r).status.code(), Some(0));
    r.git(&["checkout", "-q", "."]);
    r.write("work.txt", "the user's newer commit\n");
    r.git(&["add", "work.txt"]);
    r.git(&["commit", "-qm", "newer"]);
    let newer = r.git(&["rev-parse", "HEAD"]);

    let agent = r.outside.join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            "sed -i 's/two/TWO/' app.txt\ncp -a {}/. {}/\n",
            stash.display(),
            factory.display()
        ),
    )
    .expect("write");
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r
        .factory()
        .args(["run", "--json", "--max-attempts", "1", "-w"])
        .arg(&wo)
        .arg("--agent-edits")
        .arg(format!("sh {}", agent.display()))
        .output()
        .expect("runs");
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    let planted = std::fs::read_dir(&factory)
        .expect("factory")
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("journal."));
    assert!(
        !planted || s["verdict"] != "PASS",
        "a planted journal survived a PASS run: {s}"
    );
    let _ = recover(&r);
    assert_eq!(
        r.git(&["rev-parse", "HEAD"]),
        newer,
        "recover moved the branch back"
    );
}
