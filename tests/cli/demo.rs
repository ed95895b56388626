//! `git factory demo`: needs nothing but git and the binary.

use crate::common::*;

#[test]
fn demo_fails_once_then_passes_and_shows_the_run() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("demo");
    let mut cmd = assert_cmd::Command::cargo_bin("git-factory").expect("binary");
    hermetic(&mut cmd, tmp.path());
    let out = cmd.arg("demo").arg(&dir).output().expect("demo runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        std::fs::read_to_string(dir.join("greeting.txt")).expect("read"),
        "Hello, world!\n"
    );
    let text = stdout_of(&out);
    assert!(text.contains("attempt 1: acceptance_failed"), "{text}");
    assert!(text.contains("attempt 2: passed"), "{text}");
    let again = {
        let mut cmd = assert_cmd::Command::cargo_bin("git-factory").expect("binary");
        hermetic(&mut cmd, tmp.path());
        cmd.arg("demo").arg(&dir).output().expect("runs")
    };
    assert_eq!(
        again.status.code(),
        Some(2),
        "an existing folder is refused"
    );
}
