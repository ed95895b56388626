//! `--sandbox` as SPEC §7.1 draws it, tried as an attacker would: each case runs under
//! bubblewrap, under Landlock, and under `auto` with a bubblewrap first on `PATH` that fails as
//! Ubuntu 24.04's does (AppArmor refusing the user namespace), where Landlock must take over.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const APP: [&str; 3] = ["one", "two", "three"];

/// How a case is confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    Bwrap,
    Landlock,
    /// `auto`, with a bwrap on `PATH` that cannot make its user namespace.
    AutoBrokenBwrap,
}

impl Way {
    /// The backend each way must end up recording.
    pub(crate) fn backend(self) -> &'static str {
        match self {
            Way::Bwrap => "bwrap",
            Way::Landlock | Way::AutoBrokenBwrap => "landlock",
        }
    }

    /// The environment confining a command this way: the backend setting, and for
    /// `AutoBrokenBwrap` a failing bwrap first on `PATH`.
    pub(crate) fn env(self, r: &TestRepo) -> Vec<(&'static str, std::ffi::OsString)> {
        let mut out = Vec::new();
        let setting = match self {
            Way::Bwrap => "bwrap",
            Way::Landlock => "landlock",
            Way::AutoBrokenBwrap => {
                out.push(("PATH", with_path_first(&broken_bwrap(r))));
                "auto"
            }
        };
        out.push((
            "GIT_CONFIG_PARAMETERS",
            format!("'factory.sandboxBackend'='{setting}'").into(),
        ));
        out
    }
}

/// Every way this machine offers (bubblewrap is installed by `.ci/run`).
pub(crate) fn ways() -> Vec<Way> {
    let mut out = Vec::new();
    if bwrap_or_skip() {
        out.push(Way::Bwrap);
    }
    out.extend([Way::Landlock, Way::AutoBrokenBwrap]);
    out
}

/// A folder holding a `bwrap` that fails as Ubuntu 24.04's does.
pub(crate) fn broken_bwrap(r: &TestRepo) -> PathBuf {
    let dir = r.outside.join("broken-bwrap");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let bin = dir.join("bwrap");
    std::fs::write(
        &bin,
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n",
    )
    .expect("write");
    make_executable(&bin);
    dir
}

pub(crate) fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

pub(crate) fn with_path_first(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).expect("PATH")
}

/// `git factory run --sandbox --json FLAGS` in `cwd`, confined the given way.
fn run_in(
    r: &TestRepo,
    way: Way,
    cwd: &Path,
    wo: &Path,
    replay: &Path,
    flags: &[&str],
) -> std::process::Output {
    let mut all = vec!["--sandbox", "--json", "--force"];
    all.extend(flags);
    r.replay_command(wo, replay, &all)
        .current_dir(cwd)
        .envs(way.env(r))
        .output()
        .expect("git factory runs")
}

/// The work order and replay of a run whose one proposal makes app.txt's `two` `TWO`, with
/// `check` as its acceptance command before the real one.
pub(crate) fn upper_two_order(r: &TestRepo, check: &str) -> (PathBuf, PathBuf) {
    let wo = r.work_order(basic_order(&[check, "grep -qx TWO app.txt"]));
    (wo, upper_two_replay(r))
}

/// A replay whose one proposal makes app.txt's `two` `TWO`.
pub(crate) fn upper_two_replay(r: &TestRepo) -> PathBuf {
    r.replay(
        "rp",
        &[(
            "1.json",
            proposal(&diff_replace("app.txt", &APP, "two", "TWO"), "s"),
        )],
    )
}

/// `git factory run --sandbox --json --max-attempts 1` of `upper_two_order(check)` in the
/// repo's root, confined `way`, with `env` on top of the test's own.
pub(crate) fn confined_run(
    r: &TestRepo,
    way: Way,
    check: &str,
    env: &[(&str, &str)],
) -> std::process::Output {
    let (wo, replay) = upper_two_order(r, check);
    r.replay_command(
        &wo,
        &replay,
        &["--sandbox", "--json", "--max-attempts", "1"],
    )
    .envs(way.env(r))
    .envs(env.iter().copied())
    .output()
    .expect("runs")
}

/// A `--sandbox` run that asks for bwrap by name while the bwrap first on `PATH` fails as
/// Ubuntu 24.04's does; its output (the callers assert the refusal).
pub(crate) fn run_asking_for_broken_bwrap(r: &TestRepo) -> std::process::Output {
    let wo = r.work_order(basic_order(&["true"]));
    let replay = r.replay("rp", &[]);
    r.replay_command(&wo, &replay, &["--sandbox"])
        .env("PATH", with_path_first(&broken_bwrap(r)))
        .env("GIT_CONFIG_PARAMETERS", "'factory.sandboxBackend'='bwrap'")
        .output()
        .expect("runs")
}

/// The summary of a run confined `way`, which must PASS with its first check confined by the
/// way's backend.
pub(crate) fn passed_under(way: Way, out: &std::process::Output) -> Value {
    let s: Value = serde_json::from_str(&stdout_of(out))
        .unwrap_or_else(|_| panic!("{way:?}: {}\n{}", stderr_of(out), stdout_of(out)));
    assert_eq!(
        s["verdict"],
        "PASS",
        "{way:?}: {}\n{}",
        stderr_of(out),
        stdout_of(out)
    );
    assert_eq!(
        s["attempts"][0]["acceptance"][0]["sandbox"],
        way.backend(),
        "{way:?}"
    );
    s
}

/// A run whose one proposal makes app.txt's `two` `TWO`, with `check` as its acceptance
/// command before the real one; it must PASS under the way's backend.
fn attack(r: &TestRepo, way: Way, cwd: &Path, check: &str, flags: &[&str]) -> Value {
    let (wo, replay) = upper_two_order(r, check);
    let mut all = vec!["--max-attempts", "1"];
    all.extend(flags);
    passed_under(way, &run_in(r, way, cwd, &wo, &replay, &all))
}

#[test]
fn a_check_cannot_hijack_a_linked_worktree_through_its_git_file() {
    for way in ways() {
        let r = TestRepo::simple();
        let wt = r.tmp.path().join(format!("wt-{}", way.backend()));
        r.git(&["worktree", "add", "-q", "-b", "side", &wt.to_string_lossy()]);
        let before = std::fs::read(wt.join(".git")).expect(".git file");
        let check = "sh -c 'printf \"gitdir: elsewhere\\n\" > .git; rm -f .git; printf \"gitdir: elsewhere\\n\" > .git; true'";
        attack(&r, way, &wt, check, &[]);
        assert_eq!(
            std::fs::read(wt.join(".git")).expect(".git file"),
            before,
            "{way:?}"
        );
        r.git(&["worktree", "remove", "--force", &wt.to_string_lossy()]);
        r.git(&["branch", "-D", "side"]);
    }
}

#[test]
fn a_check_in_a_worktree_run_cannot_plant_a_hook_the_delivery_runs() {
    for way in ways() {
        let r = TestRepo::simple();
        let marker = r.outside.join(format!("hooked-{}", way.backend()));
        let check = format!(
            "sh -c 'git init -q fake && printf \"#!/bin/sh\\ntouch {m}\\n\" > fake/.git/hooks/pre-commit && chmod +x fake/.git/hooks/pre-commit; printf \"gitdir: fake/.git\\n\" > .git; true'",
            m = marker.display()
        );
        attack(&r, way, &r.root, &check, &["--worktree"]);
        assert!(!marker.exists(), "{way:?}: the planted hook ran");
    }
}

#[test]
fn a_check_cannot_overwrite_an_ignored_env_file() {
    for way in ways() {
        let r = TestRepo::simple();
        r.write(".env", "SECRET=1\n");
        r.write("build/keep.txt", "built\n");
        let check = "sh -c 'echo pwned > .env; rm -f .env; echo pwned > .env; echo pwned > build/keep.txt; rm -rf build; true'";
        attack(&r, way, &r.root, check, &[]);
        assert_eq!(r.read(".env").as_deref(), Some("SECRET=1\n"), "{way:?}");
        assert_eq!(
            r.read("build/keep.txt").as_deref(),
            Some("built\n"),
            "{way:?}"
        );
    }
}

#[test]
fn a_check_has_a_private_temporary_folder_whatever_tmpdir_said() {
    for way in ways() {
        let r = TestRepo::simple();
        // The user's own TMPDIR, under /tmp: under bubblewrap hidden by the private /tmp.
        let users = tempfile::Builder::new()
            .prefix("users-tmp-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let check = "sh -c 'f=$(mktemp) && echo x > \"$f\" && test -s \"$f\"'";
        let (wo, replay) = upper_two_order(&r, check);
        let mut cmd = r.factory();
        if way == Way::AutoBrokenBwrap {
            cmd.env("PATH", with_path_first(&broken_bwrap(&r)));
        }
        let backend = if way == Way::Bwrap {
            "bwrap"
        } else {
            "landlock"
        };
        let out = cmd
            .env("TMPDIR", users.path())
            .env(
                "GIT_CONFIG_PARAMETERS",
                format!("'factory.sandboxBackend'='{backend}'"),
            )
            .args(["run", "--sandbox", "--json", "--max-attempts", "1", "-w"])
            .arg(&wo)
            .arg("--replay")
            .arg(&replay)
            .output()
            .expect("runs");
        let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
        assert_eq!(s["verdict"], "PASS", "{way:?}: {}", stdout_of(&out));
    }
}

#[test]
fn a_check_gets_no_network_not_even_loopback() {
    for way in ways() {
        let r = TestRepo::simple();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
        let port = listener.local_addr().expect("addr").port();
        // Exits 0 only when the connection is refused.
        let check = format!(
            "python3 -c \"import socket,sys\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 3)\nexcept OSError:\n    sys.exit(0)\nsys.exit(7)\""
        );
        attack(&r, way, &r.root, &check, &[]);
        drop(listener);
    }
}

#[test]
fn a_bwrap_that_cannot_start_falls_back_or_is_refused_up_front() {
    let r = TestRepo::simple();
    // Asked for by name, a bwrap that cannot confine is refused before anything runs.
    let out = run_asking_for_broken_bwrap(&r);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("setting up uid map: Permission denied"),
        "{}",
        stderr_of(&out)
    );
    assert!(r.run_ids().is_empty());
}

#[test]
fn a_bwrap_that_fails_after_its_probe_is_a_spawn_error_not_exit_1() {
    if !bwrap_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    // The first bwrap (the probe) is the real one; every later one fails.
    let dir = r.outside.join("flaky-bwrap");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let count = r.outside.join("bwrap-calls");
    let real = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v bwrap"])
            .output()
            .expect("sh")
            .stdout,
    )
    .expect("utf-8");
    std::fs::write(
        dir.join("bwrap"),
        format!(
            "#!/bin/sh\nif [ -e {c} ]; then echo 'bwrap: setting up uid map: Permission denied' >&2; exit 1; fi\ntouch {c}\nexec {real} \"$@\"\n",
            c = count.display(),
            real = real.trim()
        ),
    )
    .expect("write");
    make_executable(&dir.join("bwrap"));
    let wo = r.work_order(basic_order(&["true"]));
    let replay = upper_two_replay(&r);
    let out = r
        .factory()
        .env("PATH", with_path_first(&dir))
        .env("GIT_CONFIG_PARAMETERS", "'factory.sandboxBackend'='bwrap'")
        .args(["run", "--sandbox", "--json", "--max-attempts", "1", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("runs");
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    let verify = &s["attempts"][0]["verify"][0];
    assert_eq!(verify["exit_code"], Value::Null, "{verify}");
    let why = verify["spawn_error"].as_str().unwrap_or("");
    assert!(
        why.contains("sandbox (bwrap)") && why.contains("uid map"),
        "{verify}"
    );
    assert_eq!(s["verdict"], "FAIL");
}

/// Under bubblewrap the tree is writable, so only the end-of-attempt removal of new files a
/// sandboxed command made (SPEC §7.1, "Left behind: nothing") can pass this;
/// tested here under every backend.
#[test]
fn a_check_cannot_leave_a_native_module_the_next_python_imports() {
    let suffix = String::from_utf8(
        Command::new("python3")
            .args([
                "-c",
                "import importlib.machinery as m; print(m.EXTENSION_SUFFIXES[0])",
            ])
            .output()
            .expect("python3")
            .stdout,
    )
    .expect("utf-8");
    let planted = format!("json{}", suffix.trim());
    for way in ways() {
        let r = TestRepo::simple();
        r.write(".gitignore", ".env\nbuild/\n*.so\n");
        r.git(&["commit", "-qam", "ignore native modules"]);
        let check = format!("sh -c 'printf planted > {planted}; true'");
        attack(&r, way, &r.root, &check, &[]);
        let out = Command::new("python3")
            .env("HOME", &r.home)
            .current_dir(&r.root)
            .args(["-c", "import json"])
            .output()
            .expect("python3");
        assert!(
            out.status.success(),
            "{way:?}: python imported the planted {planted}: {}",
            stderr_of(&out)
        );
    }
}

#[test]
fn show_names_the_backend_that_confined_each_attempt() {
    for way in ways() {
        let r = TestRepo::simple();
        // In a folder the check may add files to, so Landlock cannot single the file out.
        r.write("sub/keep.txt", "k\n");
        r.git(&["add", "sub/keep.txt"]);
        r.git(&["commit", "-qm", "sub"]);
        r.write("sub/.env", "SECRET=1\n");
        let s = attack(&r, way, &r.root, "sh -c 'echo pwned > sub/.env; true'", &[]);
        assert_eq!(r.read("sub/.env").as_deref(), Some("SECRET=1\n"), "{way:?}");
        let run_id = s["run_id"].as_str().expect("run id");
        let out = r.factory().args(["show", run_id]).output().expect("show");
        let text = stdout_of(&out);
        assert!(
            text.contains(&format!("sandbox: {}", way.backend())),
            "{way:?}: {text}"
        );
        // Where the backend could not keep the file read-only, it put it back, and says so.
        if way.backend() == "landlock" {
            let listed = s["side_effects"].to_string();
            assert!(listed.contains("sub/.env"), "{way:?}: {listed}");
        }
    }
}

#[test]
fn a_check_cannot_read_the_verify_key_nor_the_users_ssh_keys() {
    for way in ways() {
        let r = TestRepo::simple();
        // `git factory verify` makes the clone's sealing key.
        let v = r.factory().args(["verify"]).output().expect("verify");
        assert_eq!(v.status.code(), Some(0), "{}", stderr_of(&v));
        assert!(r.root.join(".git/factory/verify-key").is_file());
        std::fs::create_dir_all(r.home.join(".ssh")).expect("mkdir");
        std::fs::write(r.home.join(".ssh/id_ed25519"), "PRIVATE\n").expect("write");
        let check = "sh -c 'cat .git/factory/verify-key && exit 9; cat \"$HOME/.ssh/id_ed25519\" && exit 8; true'";
        attack(&r, way, &r.root, check, &[]);
    }
}

/// The usual ssh signing setup — `user.signingKey` naming the public half inside `~/.ssh` —
/// must not stop the sandbox from starting (hiding `~/.ssh` already hides the key), and a key
/// kept outside `~/.ssh` is hidden with its private half, not only the `.pub` that is named.
#[test]
fn a_check_runs_beside_the_users_signing_keys_and_cannot_read_them() {
    for way in ways() {
        for inside_ssh in [true, false] {
            let r = TestRepo::simple();
            let dir = if inside_ssh {
                r.home.join(".ssh")
            } else {
                r.outside.join("keys")
            };
            std::fs::create_dir_all(&dir).expect("mkdir");
            std::fs::write(dir.join("signer"), "PRIVATE\n").expect("write");
            std::fs::write(dir.join("signer.pub"), "ssh-ed25519 AAAA t\n").expect("write");
            r.git(&["config", "gpg.format", "ssh"]);
            r.git(&[
                "config",
                "user.signingKey",
                &dir.join("signer.pub").to_string_lossy(),
            ]);
            let check = format!(
                "sh -c 'cat {} && exit 9; true'",
                dir.join("signer").display()
            );
            attack(&r, way, &r.root, &check, &[]);
        }
    }
}

/// `git -c factory.sandbox=…` turns the sandbox on as the repo's config does, in every form
/// git passes it on (`-c key=value`, a bare `-c key`, `GIT_CONFIG_COUNT`): an ignored key
/// would run model-written code unconfined while the user believes it confined.
/// `git factory run --json` (no `--sandbox`) of an order accepting `two` made `TWO`, with
/// `env` on top of the test's own; its output and summary.
fn plain_run_with(r: &TestRepo, env: &[(&str, &str)]) -> (std::process::Output, Value) {
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let replay = upper_two_replay(r);
    let out = r
        .replay_command(&wo, &replay, &["--json"])
        .envs(env.iter().copied())
        .output()
        .expect("runs");
    let s: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (out, s)
}

#[test]
fn git_dash_c_factory_sandbox_turns_the_sandbox_on() {
    let forms: [&[(&str, &str)]; 4] = [
        &[("GIT_CONFIG_PARAMETERS", "'factory.sandbox'='true'")],
        &[("GIT_CONFIG_PARAMETERS", "'factory.sandbox'")],
        &[("GIT_CONFIG_PARAMETERS", "'factory.sandbox'='yes'")],
        &[
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "factory.sandbox"),
            ("GIT_CONFIG_VALUE_0", "1"),
        ],
    ];
    for env in forms {
        let r = TestRepo::simple();
        let (out, s) = plain_run_with(&r, env);
        assert_eq!(s["verdict"], "PASS", "{env:?}: {}", stderr_of(&out));
        let backend = &s["attempts"][0]["acceptance"][0]["sandbox"];
        assert!(
            backend == "bwrap" || backend == "landlock",
            "{env:?}: not confined: {s}"
        );
    }
    // And `git -c factory.sandbox=false` leaves it off.
    let r = TestRepo::simple();
    r.git(&["config", "factory.sandbox", "true"]);
    let (out, s) = plain_run_with(
        &r,
        &[("GIT_CONFIG_PARAMETERS", "'factory.sandbox'='false'")],
    );
    assert_eq!(s["verdict"], "PASS", "{}", stderr_of(&out));
    assert!(
        s["attempts"][0]["acceptance"][0]["sandbox"].is_null(),
        "{s}"
    );
}

/// The up-front note and the brief's sentence of an in-situ Landlock run (SPEC §7.1).
const ROOT_CLOSED: &str = "cannot create, rename or remove files directly at the root of this tree";

fn brief_of(s: &Value) -> String {
    s["attempts"][0]["failure_brief"]["primary_error_excerpt"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Under Landlock a check in the user's own tree cannot make a file at its root (granting the
/// root would grant `.git`): the run says so once, up front, and a check that fails on it gets
/// the reason in its brief and in `show`, naming `--worktree`; a pooled worktree's root takes
/// new files, and a failure for another reason gets no such sentence.
#[test]
fn landlock_says_why_a_check_cannot_make_a_file_at_the_users_tree_root() {
    let r = TestRepo::simple();
    let out = confined_run(&r, Way::Landlock, "touch report.xml", &[]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.matches(ROOT_CLOSED).count(), 1, "said once: {err}");
    assert!(err.contains("--worktree"), "{err}");
    let s: Value = serde_json::from_slice(&out.stdout).expect("summary");
    assert_eq!(s["verdict"], "FAIL");
    let brief = brief_of(&s);
    assert!(brief.contains(ROOT_CLOSED), "{brief}");
    assert!(brief.contains("--worktree"), "{brief}");
    let run_id = s["run_id"].as_str().expect("run id");
    let shown = r.factory().args(["show", run_id]).output().expect("show");
    assert!(
        stdout_of(&shown).contains(ROOT_CLOSED),
        "{}",
        stdout_of(&shown)
    );
    assert_eq!(r.read("report.xml"), None);
    // `sed -i` makes its temporary file beside the file it edits.
    let out = confined_run(&r, Way::Landlock, "sed -i s/keep/KEEP/ other.txt", &[]);
    let s: Value = serde_json::from_slice(&out.stdout).expect("summary");
    assert_eq!(s["verdict"], "FAIL", "{}", stderr_of(&out));
    assert!(brief_of(&s).contains(ROOT_CLOSED), "{}", brief_of(&s));
    assert_eq!(r.read("other.txt").as_deref(), Some("keep me\n"));

    // Other permission errors and other failures say nothing of the root.
    for check in [
        "sh -c 'echo nope >&2; exit 1'",
        "sh -c 'echo x > .git/planted'",
        "sh -c 'echo Permission denied >&2; exit 1'",
    ] {
        let out = confined_run(&r, Way::Landlock, check, &[]);
        let s: Value = serde_json::from_slice(&out.stdout).expect("summary");
        assert_eq!(s["verdict"], "FAIL", "{check}");
        assert!(
            !brief_of(&s).contains(ROOT_CLOSED),
            "{check}: {}",
            brief_of(&s)
        );
    }

    // A pooled worktree's root takes new files, and nothing is said.
    let (wo, replay) = upper_two_order(&r, "touch report.xml");
    let out = r
        .replay_command(
            &wo,
            &replay,
            &[
                "--sandbox",
                "--json",
                "--force",
                "--worktree",
                "--max-attempts",
                "1",
            ],
        )
        .envs(Way::Landlock.env(&r))
        .output()
        .expect("runs");
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains(ROOT_CLOSED), "{err}");
}

/// Under bubblewrap the root of the user's tree takes new files: nothing to say.
#[test]
fn bubblewrap_lets_a_check_make_a_file_at_the_users_tree_root() {
    if !bwrap_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    let out = confined_run(&r, Way::Bwrap, "touch report.xml", &[]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains(ROOT_CLOSED), "{err}");
}
