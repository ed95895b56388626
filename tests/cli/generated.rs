//! Generated and snapshot files must match what the code produces now. Regenerate with
//! `UPDATE_GENERATED=1 cargo test --features test-hooks generated`.

use crate::common::*;
use std::path::Path;

fn check(dir: &str, files: Vec<(String, String)>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let update = std::env::var_os("UPDATE_GENERATED").is_some();
    if update {
        std::fs::create_dir_all(&root).expect("mkdir");
    }
    let mut stale = Vec::new();
    for (name, text) in &files {
        let path = root.join(name);
        if update {
            std::fs::write(&path, text).expect("write");
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(format!("{dir}/{name}"));
        }
    }
    assert!(
        stale.is_empty(),
        "out of date: {}\nregenerate with: UPDATE_GENERATED=1 cargo test --features test-hooks generated",
        stale.join(", ")
    );
}

#[test]
fn generated_man_pages_are_current() {
    let pages = git_factory::cli::generated::man_pages();
    assert!(pages.iter().any(|(n, _)| n == "git-factory.1"));
    assert!(pages.iter().any(|(n, t)| n == "git-factory-run.1"
        && t.contains("factory.maxAttempts")
        && t.contains("EXIT STATUS")));
    check("man/man1", pages);
}

#[test]
fn generated_completions_are_current() {
    let files = git_factory::cli::generated::completion_files();
    assert!(
        files[0].1.contains("_git_factory()"),
        "bash glue for git's completion"
    );
    check("completions", files);
}

fn mask(text: &str) -> String {
    // Durations, run ids, temp paths and dates vary; everything else is the snapshot.
    let mut out = String::new();
    for line in text.lines() {
        let mut masked = String::new();
        for word in line.split(' ') {
            let w = word.trim_end_matches([',', ')']);
            let tail = &word[w.len()..];
            let hex12 = w.len() == 12 && w.bytes().all(|b| b.is_ascii_hexdigit());
            let secs = w.ends_with('s')
                && w[..w.len().saturating_sub(1)].parse::<f64>().is_ok()
                && w.contains('.');
            let piece = if hex12 {
                format!("[RUN]{tail}")
            } else if w.starts_with("refs/factory/") && w.len() == 25 {
                format!("refs/factory/[RUN]{tail}")
            } else if secs {
                format!("[SECS]{tail}")
            } else {
                word.to_string()
            };
            masked.push_str(&piece);
            masked.push(' ');
        }
        out.push_str(masked.strip_suffix(' ').unwrap_or(&masked));
        out.push('\n');
    }
    out
}

fn snapshots(r: &TestRepo) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let help = r.factory().arg("--help").output().expect("help");
    files.push(("help.txt".to_string(), stdout_of(&help)));
    let help = r.factory().args(["run", "--help"]).output().expect("help");
    files.push(("run-help.txt".to_string(), stdout_of(&help)));

    let app = ["one", "two", "three"];
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let replay = r.replay(
        "snap",
        &[
            (
                "1.json",
                proposal(&diff_replace("app.txt", &app, "two", "Two"), "w"),
            ),
            (
                "2.json",
                proposal(&diff_replace("app.txt", &app, "two", "TWO"), "w"),
            ),
        ],
    );
    let pass = r.run_replay(&wo, &replay, &[]);
    files.push(("report-pass.txt".to_string(), mask(&stderr_of(&pass))));
    r.git(&["checkout", "--", "app.txt"]);
    let wo = r.work_order(basic_order(&["false"]));
    let fail = r.run_replay(&wo, &replay, &[]);
    files.push(("report-fail.txt".to_string(), mask(&stderr_of(&fail))));

    // Each refusal's message.
    let mut refusals = String::new();
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "no work order",
            vec!["run".into(), "--replay".into(), "x".into()],
        ),
        (
            "unknown field",
            vec![
                "run".into(),
                "-w".into(),
                r.work_order(serde_json::json!({"id": "x", "allowed_file": []}))
                    .display()
                    .to_string(),
            ],
        ),
        (
            "no provider",
            vec![
                "run".into(),
                "-w".into(),
                r.work_order(basic_order(&["true"])).display().to_string(),
            ],
        ),
        ("bad run prefix", vec!["show".into(), "zz".into()]),
        ("unknown run", vec!["show".into(), "abcd".into()]),
    ];
    for (name, args) in cases {
        let out = r.factory().args(&args).output().expect("runs");
        refusals.push_str(&format!(
            "## {name} (exit {})\n{}",
            out.status.code().unwrap_or(-1),
            stderr_of(&out)
        ));
    }
    r.write("dirty.txt", "x\n");
    let out = r
        .factory()
        .args(["run", "--replay"])
        .arg(&replay)
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("runs");
    refusals.push_str(&format!(
        "## dirty tree (exit {})\n{}",
        out.status.code().unwrap_or(-1),
        stderr_of(&out)
    ));
    files.push((
        "refusals.txt".to_string(),
        refusals.replace(&r.outside.display().to_string(), "[OUTSIDE]"),
    ));
    files
}

#[test]
fn help_reports_and_refusals_match_their_snapshots() {
    let r = TestRepo::simple();
    check("tests/cli/snapshots", snapshots(&r));
}

#[test]
fn no_escape_codes_without_a_terminal_or_with_no_color() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["false"]));
    let replay = r.replay(
        "nc",
        &[(
            "1.json",
            proposal(
                &diff_replace("app.txt", &["one", "two", "three"], "two", "TWO"),
                "w",
            ),
        )],
    );
    let plain = r
        .factory()
        .env_remove("NO_COLOR")
        .args(["run", "--max-attempts", "1", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("run");
    assert!(
        !stderr_of(&plain).contains('\u{1b}'),
        "not a terminal: no escapes"
    );
    let forced = r
        .factory()
        .env_remove("NO_COLOR")
        .args(["show", "--color", "always", &r.run_ids()[0]])
        .output()
        .expect("show");
    assert!(
        stdout_of(&forced).contains('\u{1b}'),
        "--color always colours"
    );
    let no_color = r
        .factory()
        .env("NO_COLOR", "1")
        .args(["show", &r.run_ids()[0]])
        .output()
        .expect("show");
    assert!(!stdout_of(&no_color).contains('\u{1b}'));
    let quiet = r.run_replay(&wo, &replay, &["-q"]);
    let lines: Vec<String> = stderr_of(&quiet).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 1, "-q prints only the verdict line: {lines:?}");
    assert!(lines[0].starts_with("FAIL "));
}

#[test]
fn completion_below_the_subcommand_through_gits_own_completion() {
    let r = TestRepo::simple();
    let Some(pane) = tmux::Pane::start(&r, 200) else {
        return;
    };
    // (tmux trims the space completion adds after a word.)
    let s = pane.complete("git facto", "git factory");
    assert!(s.contains("$ git factory"), "the subcommand itself:\n{s}");
    let s = pane.complete("git factory sh", "git factory show");
    assert!(s.contains("$ git factory show"), "a subcommand:\n{s}");
    let s = pane.complete("git factory run --", "--work-order");
    for flag in [
        "--work-order",
        "--llm-model",
        "--agent-edits",
        "--max-attempts",
    ] {
        assert!(s.contains(flag), "run --<TAB> lists {flag}:\n{s}");
    }
    let s = pane.complete("git factory show --", "--patch");
    assert!(
        s.contains("--patch") && s.contains("--attempt"),
        "show --<TAB>:\n{s}"
    );
    assert!(!s.contains("--work-order"), "only show's flags:\n{s}");
    let s = pane.complete("git factory log --verdict ", "interrupted");
    for v in ["pass", "fail", "error", "interrupted"] {
        assert!(s.contains(v), "log --verdict <TAB> lists {v}:\n{s}");
    }
    assert!(!s.contains("app.txt"), "verdicts, not files:\n{s}");
    let s = pane.complete("git -C . factory log --verd", "log --verdict");
    assert!(s.contains("log --verdict"), "after git's own options:\n{s}");
}

/// The README's block that installs the man pages and completions, as a user copies it.
fn readme_install_block() -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let after = readme
        .split_once("<!-- install-docs")
        .expect("the install-docs marker in README.md")
        .1;
    let block = after.split_once("```sh\n").expect("a sh block").1;
    block
        .split_once("```")
        .expect("the block's end")
        .0
        .to_string()
}

#[test]
fn readme_install_commands_work_for_a_cargo_install_user_in_a_fresh_home() {
    let have_man = std::process::Command::new("man")
        .arg("-w")
        .arg("man")
        .output()
        .is_ok();
    if !have_man {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install man-db (see .ci/run)"
        );
        eprintln!("skipped: man is not installed");
        return;
    }
    let home = tempfile::tempdir().expect("home");
    // Where `cargo install` puts the binary.
    let bin = home.path().join(".cargo/bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::os::unix::fs::symlink(
        assert_cmd::cargo::cargo_bin("git-factory"),
        bin.join("git-factory"),
    )
    .expect("symlink");
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    let help = || {
        std::process::Command::new("git")
            .args(["help", "factory"])
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", &path)
            .env("MANPAGER", "cat")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git help runs")
    };
    assert!(
        !help().status.success(),
        "no page before the README's commands"
    );
    let block = readme_install_block();
    let out = std::process::Command::new("bash")
        .args(["-e", "-c", &block])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", &path)
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "the README's commands fail in a fresh HOME:\n{block}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = help();
    assert!(
        page.status.success(),
        "{}",
        String::from_utf8_lossy(&page.stderr)
    );
    let text = String::from_utf8_lossy(&page.stdout);
    assert!(
        text.contains("git-factory") && text.contains("EXIT STATUS"),
        "{text}"
    );
    for installed in [
        ".local/share/bash-completion/completions/git-factory",
        ".zfunc/_git-factory",
        ".config/fish/completions/git-factory.fish",
    ] {
        assert!(home.path().join(installed).is_file(), "{installed}");
    }
}
