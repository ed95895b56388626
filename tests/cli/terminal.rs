//! What reaches the user's terminal: model and record text with control characters escaped
//! (SPEC §7), patches byte-exact to a pipe.

use crate::common::*;
use serde_json::json;

/// A model-chosen path that would set the window title and clear the screen.
const HOSTILE: &str = "g\u{1b}]0;PWNED\u{7}\u{1b}[2J.txt";

fn assert_no_terminal_control(out: &[u8], what: &str) {
    let text = String::from_utf8_lossy(out);
    for bad in ["\u{1b}]", "\u{7}", "\u{1b}[2J", "\u{0}"] {
        assert!(!text.contains(bad), "{what} passes {bad:?} raw: {text:?}");
    }
}

#[test]
fn model_chosen_paths_are_escaped_on_every_line_printed() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["true"]));
    let writes =
        json!({"writes": [{"path": HOSTILE, "base_sha256": null, "content": "x"}], "summary": "s"});
    let replay = r.replay("rp", &[("1.json", writes.to_string())]);
    for colour in ["never", "always"] {
        let out = r.run_replay(
            &wo,
            &replay,
            &["--max-attempts", "1", "-v", "--force", "--color", colour],
        );
        assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
        assert_no_terminal_control(&out.stderr, "run");
        assert!(
            stderr_of(&out).contains("g\\e]0;PWNED\\a\\e[2J.txt"),
            "{}",
            stderr_of(&out)
        );
    }
    // Our own colours survive the escaping.
    let out = r.run_replay(
        &wo,
        &replay,
        &["--max-attempts", "1", "--force", "--color", "always"],
    );
    assert!(
        stderr_of(&out).contains("\u{1b}[31m"),
        "{}",
        stderr_of(&out)
    );

    // `git factory patch`: its refusal and its report of applied paths.
    let diff = format!("--- /dev/null\n+++ b/../{HOSTILE}\n@@ -0,0 +1 @@\n+x\n");
    let out = r
        .factory()
        .args(["patch", "--color", "always", "-"])
        .write_stdin(diff)
        .output()
        .expect("patch");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_no_terminal_control(&out.stderr, "patch");
    assert!(
        stderr_of(&out).contains("\\e]0;PWNED\\a"),
        "{}",
        stderr_of(&out)
    );
}

/// A run whose patch changes a Latin-1 file and carries an OSC 52 clipboard write.
fn run_with_raw_patch(r: &TestRepo) -> String {
    std::fs::write(r.root.join("l.txt"), b"caf\xe9\n").expect("write");
    r.git(&["add", "l.txt"]);
    r.git(&["commit", "-q", "-m", "latin-1"]);
    let wo = r.work_order(json!({
        "id": "t1", "title": "t", "intent": "c", "allowed_files": ["l.txt"],
        "acceptance_commands": ["true"]
    }));
    let dir = r.outside.join("raw");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("1.diff"),
        b"--- a/l.txt\n+++ b/l.txt\n@@ -1 +1 @@\n-caf\xe9\n+se\xf1or\x1b]52;c;ZXZpbA==\x07\n",
    )
    .expect("write");
    let out = r.run_replay(&wo, &dir, &["-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    r.run_ids()[0].clone()
}

#[test]
fn show_patch_is_byte_exact_to_a_pipe_and_escaped_on_a_terminal() {
    let r = TestRepo::simple();
    let id = run_with_raw_patch(&r);
    let stored = std::process::Command::new("git")
        .current_dir(&r.root)
        .args([
            "cat-file",
            "blob",
            &format!("refs/factory/{id}:attempt_1/proposed_patch.diff"),
        ])
        .output()
        .expect("git");
    assert!(stored.stdout.windows(4).any(|w| w == b"se\xf1o"));
    let out = r
        .factory()
        .args(["show", "--patch", &id])
        .output()
        .expect("show");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        out.stdout, stored.stdout,
        "show --patch to a pipe is not byte-exact"
    );

    // On a terminal (a pseudo-terminal made by script(1)), with and without the pager.
    let bin = assert_cmd::cargo::cargo_bin("git-factory");
    for (pager, colour) in [
        ("--no-pager", "never"),
        ("--no-pager", "always"),
        ("", "always"),
    ] {
        let cmd = format!(
            "{} show --patch {pager} --color {colour} {id}",
            bin.display()
        );
        let mut script = assert_cmd::Command::new("script");
        hermetic(&mut script, &r.home);
        let out = script
            .current_dir(&r.root)
            .env("TERM", "dumb")
            .env("GIT_PAGER", "cat -u")
            .env_remove("NO_COLOR")
            .args(["-qec", &cmd, "/dev/null"])
            .output()
            .expect("script");
        assert_eq!(out.status.code(), Some(0), "{cmd}: {}", stderr_of(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("\u{1b}]52"), "{cmd}: {text:?}");
        assert!(!text.contains('\u{7}'), "{cmd}: {text:?}");
        assert!(text.contains("\\e]52;c;ZXZpbA==\\a"), "{cmd}: {text:?}");
        if colour == "always" {
            assert!(
                text.contains("\u{1b}[32m"),
                "{cmd}: coloured as git diff: {text:?}"
            );
        }
    }
}

/// The recorded verdict of the only run.
fn only_verdict(r: &TestRepo) -> String {
    let ids = r.run_ids();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let s: serde_json::Value = serde_json::from_str(
        &r.git(&["show", &format!("refs/factory/{}:run_summary.json", ids[0])]),
    )
    .expect("json");
    s["verdict"].as_str().unwrap_or("").to_string()
}

#[test]
fn a_reader_that_goes_away_interrupts_the_run_even_when_nothing_is_written() {
    use std::io::BufRead;
    // Quiet and --json runs write nothing until the end: `… | true` must still stop them.
    for flags in [&["-q"][..], &["--json"][..]] {
        let r = TestRepo::simple();
        let wo = r.work_order(basic_order(&["sleep 1", "grep -q TWO app.txt"]));
        let replay = r.replay(
            "rp",
            &[(
                "1.json",
                proposal(
                    &diff_replace("app.txt", &["one", "two", "three"], "two", "TWO"),
                    "w",
                ),
            )],
        );
        let before = r.snapshot();
        let mut cmd = r.spawn(&["run"]);
        cmd.args(flags)
            .arg("-w")
            .arg(&wo)
            .arg("--replay")
            .arg(&replay)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("spawn");
        drop(child.stdout.take());
        drop(child.stderr.take());
        let status = child.wait().expect("wait");
        assert_eq!(status.code(), Some(130), "{flags:?}");
        assert_eq!(
            r.snapshot(),
            before,
            "{flags:?}: the change was left in the tree"
        );
        assert_eq!(only_verdict(&r), "INTERRUPTED", "{flags:?}");
    }

    // A reader that takes one line and leaves while a check runs.
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["sleep 2", "grep -q TWO app.txt"]));
    let replay = r.replay(
        "rp",
        &[(
            "1.json",
            proposal(
                &diff_replace("app.txt", &["one", "two", "three"], "two", "TWO"),
                "w",
            ),
        )],
    );
    let before = r.snapshot();
    let mut cmd = r.spawn(&["run"]);
    cmd.arg("-w")
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut reader = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    reader.read_line(&mut line).expect("a first line");
    drop(reader);
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130));
    assert_eq!(r.snapshot(), before);
    assert_eq!(only_verdict(&r), "INTERRUPTED");
}
