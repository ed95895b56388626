//! The user's pre-existing ignored files survive any confined command (SPEC §7.1), tried as an
//! attacker would: through links (`.env -> a file outside`, `.venv -> a real environment`), by
//! renaming their folder away, by turning their folder into a link, through another name of
//! their inode, and with the harness killed (`kill -9`) while the check runs. Each case runs
//! under bubblewrap and under Landlock, and under `auto` with a bubblewrap first on `PATH`
//! that fails as Ubuntu 24.04's does; the real binary, real git, the kernel's real sandboxes.

use crate::common::*;
use crate::sandbox::{confined_run, passed_under, upper_two_order, ways, Way};
use serde_json::Value;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A repo with `app.txt`, a tracked folder `conf/` and the given `.gitignore`, whose global
/// verification is `true`.
fn repo(ignore: &str) -> TestRepo {
    let r = TestRepo::with_files(&[
        ("app.txt", "one\ntwo\nthree\n"),
        ("conf/app.cfg", "cfg\n"),
        ("a/b/lib.txt", "lib\n"),
        (".gitignore", ignore),
    ]);
    r.git(&["config", "factory.verify", "true"]);
    r
}

/// `git factory run --sandbox` of `check` in the repo's root, confined `way`; it must PASS
/// under the backend the way names. The summary.
fn passes(r: &TestRepo, way: Way, check: &str) -> Value {
    passed_under(way, &confined_run(r, way, check, &[]))
}

fn side_effects(s: &Value) -> Vec<String> {
    (s["side_effects"].as_array().into_iter().flatten())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

fn link_target(p: &Path) -> Option<PathBuf> {
    std::fs::read_link(p).ok()
}

#[test]
fn an_ignored_link_is_read_only_itself_and_its_target_never_becomes_writable() {
    for way in ways() {
        let r = repo(".env\n.venv\n.tool\n");
        let secret = r.outside.join("secret.env");
        let venv = r.outside.join("venv");
        std::fs::create_dir_all(venv.join("bin")).expect("mkdir");
        std::fs::write(&secret, "OUTSIDE\n").expect("write");
        std::fs::write(venv.join("bin/python"), "real\n").expect("write");
        std::os::unix::fs::symlink(&secret, r.root.join(".env")).expect("link");
        std::os::unix::fs::symlink(&venv, r.root.join(".venv")).expect("link");
        std::os::unix::fs::symlink(&secret, r.root.join("conf/.env")).expect("link");
        std::os::unix::fs::symlink(&secret, r.root.join("a/b/.tool")).expect("link");
        let check = "sh -c 'printf pwned > .env; printf pwned > .venv/bin/python; \
                     touch .venv/planted; printf pwned > conf/.env; \
                     rm -f .env conf/.env; ln -s /etc/hostname .env; ln -s /etc/hostname conf/.env; \
                     rm -f a/b/.tool; mkdir -p a/b/.tool/d; printf x > a/b/.tool/d/f; true'";
        let s = passes(&r, way, check);
        let read = |p: &Path| std::fs::read_to_string(p).ok();
        assert_eq!(read(&secret).as_deref(), Some("OUTSIDE\n"), "{way:?}");
        assert_eq!(
            read(&venv.join("bin/python")).as_deref(),
            Some("real\n"),
            "{way:?}"
        );
        assert!(!venv.join("planted").exists(), "{way:?}");
        for link in [".env", "conf/.env", "a/b/.tool"] {
            assert_eq!(
                link_target(&r.root.join(link)),
                Some(secret.clone()),
                "{way:?}: {link} is the user's link again; {:?}",
                side_effects(&s)
            );
        }
        assert_eq!(link_target(&r.root.join(".venv")), Some(venv.clone()));
        // What the check could change (the link in a writable folder) is named.
        let named = side_effects(&s);
        let changed = (s["attempts"][0]["acceptance"][0]["sandbox_put_back"].as_array())
            .map(|a| a.len())
            .unwrap_or(0);
        assert!(
            changed == 0 || named.iter().any(|e| e.contains("conf/.env")),
            "{way:?}: {named:?}"
        );
    }
}

#[test]
fn a_folder_renamed_away_takes_no_ignored_file_with_it() {
    for way in ways() {
        let r = repo(".env\nbuild/\n");
        r.write("conf/.env", "SECRET\n");
        r.write("conf/build/out.o", "built\n");
        let check = "sh -c 'mv conf conf2; mkdir conf; printf pwned > conf/.env; true'";
        passes(&r, way, check);
        assert_eq!(r.read("conf/.env").as_deref(), Some("SECRET\n"), "{way:?}");
        assert_eq!(
            r.read("conf/build/out.o").as_deref(),
            Some("built\n"),
            "{way:?}"
        );
        assert_eq!(r.read("conf/app.cfg").as_deref(), Some("cfg\n"), "{way:?}");
        assert!(!r.root.join("conf2").exists(), "{way:?}");
    }
}

#[test]
fn an_ignored_file_whose_folder_became_a_link_is_put_back_after_the_tree() {
    for way in ways() {
        let r = repo(".env\n");
        r.write("a/b/.env", "SECRET\n");
        let check = format!(
            "sh -c 'mv a/b a/c; ln -s {} a/b; true'",
            r.outside.display()
        );
        let s = passes(&r, way, &check);
        assert_eq!(r.read("a/b/.env").as_deref(), Some("SECRET\n"), "{way:?}");
        assert_eq!(r.read("a/b/lib.txt").as_deref(), Some("lib\n"), "{way:?}");
        assert!(!r.root.join("a/c").exists(), "{way:?}");
        assert!(!r.outside.join(".env").exists(), "{way:?}");
        let moved = link_target(&r.root.join("a/b")).is_none();
        assert!(moved, "{way:?}");
        if way != Way::Bwrap {
            // Landlock let the folder move: the file was put back, and that is said.
            let named = side_effects(&s);
            assert!(named.iter().any(|e| e == "a/b/.env"), "{way:?}: {named:?}");
        }
    }
}

#[test]
fn a_hard_linked_ignored_file_is_not_written_through_nor_left_changed() {
    for way in ways() {
        let r = repo(".env\n*.key\n");
        r.write("notes.txt", "SECRET\n");
        r.git(&["add", "notes.txt"]);
        r.git(&["commit", "-qm", "notes"]);
        // One name outside the tree, and one tracked name inside it.
        let real = r.outside.join("real.key");
        std::fs::write(&real, "OUTSIDE\n").expect("write");
        std::fs::hard_link(&real, r.root.join("conf/.env")).expect("link");
        std::fs::hard_link(r.root.join("notes.txt"), r.root.join("a/b/notes.key")).expect("link");
        let check = "sh -c 'printf pwned > conf/.env; printf pwned > a/b/notes.key; \
                     printf pwned > notes.txt; true'";
        passes(&r, way, check);
        assert_eq!(
            std::fs::read_to_string(&real).ok().as_deref(),
            Some("OUTSIDE\n"),
            "{way:?}: written through outside"
        );
        assert_eq!(r.read("conf/.env").as_deref(), Some("OUTSIDE\n"), "{way:?}");
        assert_eq!(
            r.read("a/b/notes.key").as_deref(),
            Some("SECRET\n"),
            "{way:?}"
        );
        assert_eq!(r.read("notes.txt").as_deref(), Some("SECRET\n"), "{way:?}");
    }
}

#[test]
fn an_ignored_file_with_a_name_that_is_not_utf8_is_put_back_byte_for_byte() {
    for way in ways() {
        let r = repo("*.key\n");
        let name = OsStr::from_bytes(b"a/b/caf\xe9.key");
        std::fs::write(r.root.join(name), b"SECRET\xff\n").expect("write");
        let check = "sh -c 'for f in a/b/*.key; do printf pwned > \"$f\"; done; true'";
        let s = passes(&r, way, check);
        assert_eq!(
            std::fs::read(r.root.join(name)).expect("there"),
            b"SECRET\xff\n",
            "{way:?}: {:?}",
            side_effects(&s)
        );
    }
}

/// Starts a sandboxed run whose check writes what it can and then waits; kills the harness
/// with SIGKILL once the check has started, then runs `recover` in `at`. Recover's output.
fn killed_mid_check(r: &TestRepo, way: Way, at: &Path, check: &str, started: &Path) -> String {
    let (wo, replay) = upper_two_order(r, check);
    let mut cmd = r.spawn(&["run", "--json", "--sandbox", "--max-attempts", "1", "-w"]);
    cmd.envs(way.env(r));
    let mut child = cmd
        .current_dir(at)
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    wait_for(started);
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let mut rec = r.factory();
    rec.current_dir(at);
    rec.envs(way.env(r));
    let out = rec.arg("recover").output().expect("recover");
    assert_eq!(out.status.code(), Some(0), "{way:?}: {}", stderr_of(&out));
    format!("{}{}", stdout_of(&out), stderr_of(&out))
}

#[test]
fn recover_after_kill_9_puts_back_the_ignored_files_a_check_changed() {
    for way in ways() {
        let r = repo(".env\n");
        r.write("conf/.env", "SECRET\n");
        let check =
            "sh -c 'printf pwned > conf/.env; rm -f a/b/lib.txt; touch conf/started; sleep 30'";
        let said = killed_mid_check(
            &r,
            way,
            &r.root.clone(),
            check,
            &r.root.join("conf/started"),
        );
        assert_eq!(
            r.read("conf/.env").as_deref(),
            Some("SECRET\n"),
            "{way:?}: {said}"
        );
        assert_eq!(r.read("a/b/lib.txt").as_deref(), Some("lib\n"), "{way:?}");
        if way != Way::Bwrap {
            // Landlock let the check write it (its folder stays writable): recover says so.
            assert!(said.contains("conf/.env"), "{way:?}: {said}");
        }
        assert!(r.journals().is_empty(), "{way:?}");
    }
}

#[test]
fn a_linked_worktrees_git_file_survives_a_check_killed_with_its_harness() {
    for way in ways() {
        let r = repo(".env\n");
        let wt = r.outside.join("wt");
        r.git(
            &["worktree", "add", "-q", "--detach"][..]
                .iter()
                .copied()
                .chain([wt.to_str().expect("utf-8")])
                .collect::<Vec<_>>(),
        );
        let git_file = std::fs::read(wt.join(".git")).expect("a .git file");
        let fake = r.outside.join("fake.git");
        let check = format!(
            "sh -c 'printf \"gitdir: {}\\n\" > .git; touch conf/started; sleep 30'",
            fake.display()
        );
        let said = killed_mid_check(&r, way, &wt, &check, &wt.join("conf/started"));
        assert_eq!(
            std::fs::read(wt.join(".git")).expect("there"),
            git_file,
            "{way:?}: {said}"
        );
        assert!(said.contains("recovered run"), "{way:?}: {said}");
        assert!(r.journals().is_empty(), "{way:?}");
    }
}
