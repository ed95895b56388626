//! A killed run's saved state (its index, config and hooks as they were): `recover` puts
//! them back from the one file a capture writes, from the folder layout an older build left,
//! and refuses a torn file by name instead of guessing. (Kill points need `test-hooks`.)

use crate::common::*;
use std::path::{Path, PathBuf};

/// A run killed while its check has changed the index, `.git/config` and a hook.
fn killed_run(r: &TestRepo) {
    use std::os::unix::process::ExitStatusExt;
    let check = "sh -c 'echo staged > staged.txt; git add staged.txt; git config user.planted yes; echo evil >> .git/hooks/pre-commit.sample; sleep 1'";
    let wo = r.work_order(basic_order(&[check]));
    let replay = r.replay(
        "rp",
        &[(
            "1.json",
            proposal(
                &diff_replace("app.txt", &["one", "two", "three"], "two", "TWO"),
                "fix",
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
    // The killed check finishes its work before recover looks.
    std::thread::sleep(std::time::Duration::from_millis(1300));
}

/// The killed run's saved folder.
fn saved_folder(r: &TestRepo) -> PathBuf {
    let factory = r.root.join(".git/factory");
    let found: Vec<PathBuf> = std::fs::read_dir(&factory)
        .expect("factory dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("saved-"))
        })
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.into_iter().next().expect("one")
}

fn git_file(r: &TestRepo, rel: &str) -> Vec<u8> {
    std::fs::read(r.root.join(".git").join(rel)).expect("read")
}

fn hooks(r: &TestRepo) -> Vec<(String, Vec<u8>)> {
    let dir = r.root.join(".git/hooks");
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    (name, std::fs::read(e.path()).unwrap_or_default())
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// A repo with a hook of its own, so there is one to put back.
fn repo_with_hook() -> TestRepo {
    let r = TestRepo::simple();
    let dir = r.root.join(".git/hooks");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("pre-commit.sample"), "#!/bin/sh\nexit 0\n").expect("write");
    r
}

#[test]
fn recover_puts_back_the_index_config_and_hooks_from_the_one_saved_file() {
    let r = repo_with_hook();
    let (before, config, hooks_before) = (r.snapshot(), git_file(&r, "config"), hooks(&r));
    killed_run(&r);
    let saved = saved_folder(&r);
    let names: Vec<_> = std::fs::read_dir(&saved)
        .expect("saved")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["state"], "one file holds the saved state");
    assert_ne!(
        git_file(&r, "config"),
        config,
        "the check changed the config"
    );
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    assert_eq!(r.snapshot(), before);
    assert_eq!(git_file(&r, "config"), config);
    assert_eq!(hooks(&r), hooks_before);
    assert!(!saved.exists(), "the saved state goes with the journal");
}

/// An older build kept the saved bytes as a file each (`index`, `config`, `hooks/<name>`):
/// its killed run is still recovered.
#[test]
fn recover_reads_the_saved_folder_of_an_older_build() {
    let r = repo_with_hook();
    let (before, config, hooks_before) = (r.snapshot(), git_file(&r, "config"), hooks(&r));
    killed_run(&r);
    let saved = saved_folder(&r);
    std::fs::remove_file(saved.join("state")).expect("rm");
    std::fs::write(saved.join("index"), &before.index).expect("write");
    std::fs::write(saved.join("config"), &config).expect("write");
    std::fs::create_dir(saved.join("hooks")).expect("mkdir");
    for (name, bytes) in &hooks_before {
        std::fs::write(saved.join("hooks").join(name), bytes).expect("write");
    }
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    assert_eq!(r.snapshot(), before);
    assert_eq!(git_file(&r, "config"), config);
    assert_eq!(hooks(&r), hooks_before);
}

/// A saved state cut short is refused by name; nothing is guessed from what is left of it.
#[test]
fn recover_refuses_a_torn_saved_state_by_name() {
    let r = repo_with_hook();
    killed_run(&r);
    let state = saved_folder(&r).join("state");
    let bytes = std::fs::read(&state).expect("read");
    std::fs::write(&state, &bytes[..bytes.len() / 2]).expect("write");
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(2), "{}", stderr_of(&rec));
    let err = stderr_of(&rec);
    assert!(err.contains("saved state"), "{err}");
    assert!(err.contains(&display(&state)), "{err}");
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

/// A saved state that a command rewrote is not the one the capture wrote: `recover` refuses
/// it by name (its digest is in the journal) rather than "restoring" what the command put
/// there — here a valid state file from another run, whose config differs.
#[test]
fn recover_refuses_a_saved_state_rewritten_after_the_capture() {
    let r = repo_with_hook();
    killed_run(&r);
    let other = repo_with_hook();
    other.git(&["config", "user.other", "theirs"]);
    killed_run(&other);
    let forged = std::fs::read(saved_folder(&other).join("state")).expect("read");
    let state = saved_folder(&r).join("state");
    std::fs::write(&state, forged).expect("write");
    for _ in 0..2 {
        let rec = r.factory().arg("recover").output().expect("recover");
        assert_eq!(rec.status.code(), Some(2), "{}", stderr_of(&rec));
        let err = stderr_of(&rec);
        assert!(err.contains("was changed after the run's capture"), "{err}");
        assert!(err.contains(&display(&state)), "{err}");
    }
}

/// A check that damages the run's saved state and changes `.git/config` is still rolled back
/// whole: the run keeps what it captured in memory, so the index, config, tree and refs come
/// back and the attempt fails as its check did.
#[test]
fn a_check_that_damages_the_saved_state_is_still_rolled_back() {
    let r = repo_with_hook();
    let (before, config, hooks_before) = (r.snapshot(), git_file(&r, "config"), hooks(&r));
    let check = "sh -c 'for s in .git/factory/saved-*/state; do truncate -s 10 \"$s\"; done; git config user.planted yes; echo evil >> .git/hooks/pre-commit.sample; echo junk > junk.txt; exit 1'";
    let wo = r.work_order(basic_order(&[check]));
    let patch = diff_replace("app.txt", &["one", "two", "three"], "two", "TWO");
    let replay = r.replay("rp", &[("1.json", proposal(&patch, "fix"))]);
    let out = r.run_replay(&wo, &replay, &["--json", "--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let s: serde_json::Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["verdict"], "FAIL", "{s}");
    assert_eq!(r.snapshot(), before);
    assert_eq!(git_file(&r, "config"), config);
    assert_eq!(hooks(&r), hooks_before);
}
