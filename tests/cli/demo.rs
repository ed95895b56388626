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

#[test]
fn demo_without_a_folder_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().expect("tmp");
    let scratch = tmp.path().join("tmp");
    std::fs::create_dir_all(&scratch).expect("mkdir");
    for _ in 0..2 {
        let mut cmd = assert_cmd::Command::cargo_bin("git-factory").expect("binary");
        hermetic(&mut cmd, tmp.path());
        let out = cmd
            .env("TMPDIR", &scratch)
            .current_dir(tmp.path())
            .arg("demo")
            .output()
            .expect("demo runs");
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(stdout_of(&out).contains("attempt 2: passed"));
        assert!(
            err.contains("the demo repo was temporary and is removed; to keep one and explore it: git factory demo ./factory-demo"),
            "{err}"
        );
        let left: Vec<_> = std::fs::read_dir(&scratch).expect("readdir").collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}
