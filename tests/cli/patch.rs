//! The apply engine through `git factory patch`: a table of damaged diffs that must land
//! exactly, traps that must be refused with the tree unchanged, the other dialects, and a
//! randomized round trip against `git diff`.

use crate::common::*;

const MODULE: &str = "import os\nimport sys\n\n\ndef load(path):\n    with open(path) as f:\n        return f.read()\n\n\ndef parse(text):\n    items = []\n    for line in text.splitlines():\n        line = line.strip()\n        if not line:\n            continue\n        items.append(line)\n    return items\n\n\ndef main():\n    data = load(sys.argv[1])\n    for item in parse(data):\n        print(item)\n\n\nif __name__ == \"__main__\":\n    main()\n";

fn expected() -> String {
    MODULE.replace("items.append(line)", "items.append(line.lower())")
}

/// The correct hunk body for the change: lines 13-19 of MODULE around `items.append(line)`.
fn good_hunk_body() -> String {
    [
        "         line = line.strip()",
        "         if not line:",
        "             continue",
        "-        items.append(line)",
        "+        items.append(line.lower())",
        "     return items",
        " ",
        " ",
    ]
    .join("\n")
        + "\n"
}

fn run_patch(r: &TestRepo, diff: &str, extra: &[&str]) -> std::process::Output {
    r.factory()
        .args(["patch", "-"])
        .args(extra)
        .write_stdin(diff.to_string())
        .output()
        .expect("patch runs")
}

#[test]
fn damaged_diffs_land_exactly_where_intended() {
    let git_header = "diff --git a/mod.py b/mod.py\n--- a/mod.py\n+++ b/mod.py\n";
    let cases: Vec<(&str, String, &str)> = vec![
        ("exact", format!("{git_header}@@ -13,7 +13,7 @@ def parse(text):\n{}", good_hunk_body()), "strict"),
        ("wrong line numbers", format!("{git_header}@@ -40,8 +41,8 @@\n{}", good_hunk_body()), "recount"),
        ("wrong counts", format!("{git_header}@@ -13,5 +13,9 @@\n{}", good_hunk_body()), "recount"),
        ("placeholder header", format!("{git_header}@@ ... @@\n{}", good_hunk_body()), "recount"),
        ("no diff --git line", format!("--- a/mod.py\n+++ b/mod.py\n@@ -13,7 +13,7 @@\n{}", good_hunk_body()), "strict"),
        ("no a/ b/ prefixes", format!("--- mod.py\n+++ mod.py\n@@ -13,7 +13,7 @@\n{}", good_hunk_body()), "strict"),
        (
            "blank context lines without their space",
            format!("{git_header}@@ -13,7 +13,7 @@\n{}", good_hunk_body().replace("\n \n \n", "\n\n\n")),
            "strict",
        ),
        (
            "indentation turned to tabs",
            format!("{git_header}@@ -13,7 +13,7 @@\n{}", good_hunk_body().replace("         line = line.strip()", " \t\tline = line.strip()")),
            "fuzzy",
        ),
        (
            "a lost blank context line",
            format!(
                "{git_header}@@ -16,4 +16,4 @@\n-        items.append(line)\n+        items.append(line.lower())\n     return items\n def main():\n"
            ),
            "fuzzy",
        ),
    ];
    for (name, diff, method) in cases {
        let r = TestRepo::with_files(&[("mod.py", MODULE)]);
        let out = run_patch(&r, &diff, &[]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr_of(&out));
        assert_eq!(
            r.read("mod.py").as_deref(),
            Some(expected().as_str()),
            "{name}"
        );
        assert_eq!(stdout_of(&out), format!("{method:<8} mod.py\n"), "{name}");
    }
}

#[test]
fn trailing_whitespace_lost_by_the_model_is_tolerated() {
    let file = MODULE.replace("    return items\n", "    return items   \n");
    let r = TestRepo::with_files(&[("mod.py", &file)]);
    let diff = format!(
        "--- a/mod.py\n+++ b/mod.py\n@@ -13,7 +13,7 @@\n{}",
        good_hunk_body()
    );
    let out = run_patch(&r, &diff, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "fuzzy    mod.py\n");
    assert_eq!(
        r.read("mod.py"),
        Some(file.replace("items.append(line)", "items.append(line.lower())"))
    );
}

#[test]
fn crlf_files_apply_strictly_when_the_diff_keeps_the_cr() {
    let file = MODULE.replace('\n', "\r\n");
    let r = TestRepo::with_files(&[("mod.py", &file)]);
    let body: String = good_hunk_body()
        .lines()
        .map(|l| format!("{l}\r\n"))
        .collect();
    let out = run_patch(
        &r,
        &format!("--- a/mod.py\n+++ b/mod.py\n@@ -13,7 +13,7 @@\n{body}"),
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.read("mod.py"), Some(expected().replace('\n', "\r\n")));
    // Without the CR the whitespace-tolerant pass places it, and keeps the file's CRLF context.
    let r = TestRepo::with_files(&[("mod.py", &file)]);
    let out = run_patch(
        &r,
        &format!(
            "--- a/mod.py\n+++ b/mod.py\n@@ -13,7 +13,7 @@\n{}",
            good_hunk_body()
        ),
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(r
        .read("mod.py")
        .unwrap_or_default()
        .contains("    return items\r\n"));
}

#[test]
fn traps_are_refused_and_the_tree_is_unchanged() {
    let twice = "def a():\n    x = 1\n    return x\n\n\ndef b():\n    x = 1\n    return x\n";
    let cases: Vec<(&str, &str, String, &str)> = vec![
        (
            "context in two places, wrong line numbers",
            twice,
            "--- a/f.py\n+++ b/f.py\n@@ -30,2 +30,2 @@\n     x = 1\n-    return x\n+    return x + 1\n".to_string(),
            "2 places",
        ),
        (
            "absent context",
            MODULE,
            "--- a/f.py\n+++ b/f.py\n@@ -3,2 +3,2 @@\n def load(path):\n-    pass\n+    return 0\n".to_string(),
            "closest text",
        ),
    ];
    for (name, file, diff, needle) in cases {
        let r = TestRepo::with_files(&[("f.py", file)]);
        let before = r.snapshot();
        let out = run_patch(&r, &diff, &[]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        assert!(
            stderr_of(&out).contains(needle),
            "{name}: {}",
            stderr_of(&out)
        );
        assert_eq!(r.snapshot(), before, "{name}");
    }
}

#[test]
fn strict_flag_disables_the_fallbacks() {
    let r = TestRepo::with_files(&[("mod.py", MODULE)]);
    let diff = format!(
        "--- a/mod.py\n+++ b/mod.py\n@@ -40,8 +41,8 @@\n{}",
        good_hunk_body()
    );
    let out = run_patch(&r, &diff, &["--strict"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(r.read("mod.py").as_deref(), Some(MODULE));
    let out = run_patch(&r, &diff, &["--check"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        r.read("mod.py").as_deref(),
        Some(MODULE),
        "--check writes nothing"
    );
}

#[test]
fn a_failing_third_file_leaves_no_partial_write() {
    let r = TestRepo::with_files(&[("a.txt", "a\n"), ("b.txt", "b\n"), ("c.txt", "c\n")]);
    let before = r.snapshot();
    let diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-b\n+B\n--- a/c.txt\n+++ b/c.txt\n@@ -1 +1 @@\n-zzz\n+C\n--- /dev/null\n+++ b/d.txt\n@@ -0,0 +1 @@\n+d\n";
    let out = run_patch(&r, diff, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(r.snapshot(), before);
}

#[test]
fn always_refused_rules_hold_without_an_allow_list() {
    let r = TestRepo::with_files(&[("a.txt", "a\n")]);
    std::os::unix::fs::symlink(&r.outside, r.root.join("out")).expect("symlink");
    let before = r.snapshot();
    for diff in [
        "--- /dev/null\n+++ b/.git/hooks/post-commit\n@@ -0,0 +1 @@\n+evil\n",
        "--- /dev/null\n+++ b/out/escaped.txt\n@@ -0,0 +1 @@\n+evil\n",
        "--- /dev/null\n+++ b/../escaped.txt\n@@ -0,0 +1 @@\n+evil\n",
        "diff --git a/a.txt b/a.txt\nindex 1..2\nGIT binary patch\nliteral 1\n",
    ] {
        let out = run_patch(&r, diff, &[]);
        assert_eq!(out.status.code(), Some(1), "{diff}");
        assert_eq!(r.snapshot(), before, "{diff}");
    }
    assert_eq!(std::fs::read_dir(&r.outside).expect("dir").count(), 0);
}

#[test]
fn begin_patch_envelope_adds_updates_moves_and_deletes() {
    let r = TestRepo::with_files(&[
        ("mod.py", MODULE),
        ("old.txt", "bye\n"),
        ("move_me.txt", "one\ntwo\n"),
    ]);
    let envelope = "*** Begin Patch\n*** Add File: docs/new.md\n+# New\n+text\n*** Update File: mod.py\n@@ def parse(text):\n         if not line:\n             continue\n-        items.append(line)\n+        items.append(line.lower())\n*** Update File: move_me.txt\n*** Move to: moved.txt\n@@\n one\n-two\n+TWO\n*** Delete File: old.txt\n-bye\n*** End Patch\n";
    let out = run_patch(&r, envelope, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.read("mod.py"), Some(expected()));
    assert_eq!(r.read("docs/new.md").as_deref(), Some("# New\ntext\n"));
    assert_eq!(r.read("moved.txt").as_deref(), Some("one\nTWO\n"));
    assert!(r.read("move_me.txt").is_none() && r.read("old.txt").is_none());
}

#[test]
fn search_replace_blocks_need_a_unique_match() {
    let r = TestRepo::with_files(&[("mod.py", MODULE)]);
    let blocks = "mod.py\n```python\n<<<<<<< SEARCH\n        items.append(line)\n=======\n        items.append(line.lower())\n>>>>>>> REPLACE\n```\n";
    let out = run_patch(&r, blocks, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.read("mod.py"), Some(expected()));
    let r = TestRepo::with_files(&[("mod.py", MODULE)]);
    let ambiguous = "mod.py\n<<<<<<< SEARCH\n\n\ndef\n=======\nx\n>>>>>>> REPLACE\n";
    let out = run_patch(&r, ambiguous, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(r.read("mod.py").as_deref(), Some(MODULE));
}

#[test]
fn agent_command_dialects_run_end_to_end() {
    let r = TestRepo::with_files(&[("mod.py", MODULE)]);
    r.git(&["config", "factory.verify", "true"]);
    let script = r.outside.join("agent.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\ncat > /dev/null\ncat <<'EOF'\n*** Begin Patch\n*** Update File: mod.py\n@@\n-        items.append(line)\n+        items.append(line.lower())\n*** End Patch\nEOF\n",
    )
    .expect("write");
    let out = r
        .factory()
        .args([
            "run",
            "--json",
            "--id",
            "d",
            "--title",
            "t",
            "--intent",
            "i",
            "--allow",
            "mod.py",
            "--accept",
            "grep -q lower mod.py",
            "--agent-command",
        ])
        .arg(format!("sh {}", script.display()))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: serde_json::Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["attempts"][0]["apply_method"], "recount");
    let id = s["run_id"].as_str().expect("id");
    let stored = r.git(&[
        "show",
        &format!("refs/factory/{id}:attempt_1/proposed_patch.diff"),
    ]);
    assert!(
        stored.starts_with("diff --git a/mod.py b/mod.py"),
        "{stored}"
    );
}

/// A deterministic xorshift generator for the randomized tests.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn text(&mut self) -> String {
        let n = self.next() % 40;
        let mut s: String = (0..n)
            .map(|_| match self.next() % 6 {
                0 => "\n".to_string(),
                1 => "  \n".to_string(),
                k => format!("line {}\n", self.next() % (k * 3)),
            })
            .collect();
        if self.next() % 5 == 0 {
            s.push_str("no newline");
        }
        s
    }
}

#[test]
fn git_diffs_of_random_texts_always_reproduce_the_second_text() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let tmp = tempfile::tempdir().expect("tmp");
    for round in 0..150 {
        let (a, b) = (rng.text(), rng.text());
        let r = TestRepo::with_files(&[("f.txt", a.as_str())]);
        let other = tmp.path().join(format!("b{round}.txt"));
        std::fs::write(&other, &b).expect("write");
        let mut git = assert_cmd::Command::new("git");
        hermetic(&mut git, &r.home);
        let out = git
            .current_dir(&r.root)
            .args(["diff", "--no-index", "--no-prefix", "f.txt"])
            .arg(&other)
            .output()
            .expect("git diff");
        if a == b {
            continue;
        }
        let raw = stdout_of(&out);
        // Name both sides f.txt, as a diff of the file's two versions would.
        let other_name = other.to_string_lossy().trim_start_matches('/').to_string();
        let diff = raw
            .replace(&format!("/{other_name}"), "f.txt")
            .replace(&other_name, "f.txt");
        let applied = r
            .factory()
            .args(["patch", "-p", "0", "--strict", "-"])
            .write_stdin(diff.clone())
            .output()
            .expect("patch");
        assert_eq!(
            applied.status.code(),
            Some(0),
            "round {round}: {}\n{diff}",
            stderr_of(&applied)
        );
        assert_eq!(
            r.read("f.txt").as_deref(),
            Some(b.as_str()),
            "round {round}\n{diff}"
        );
    }
}

#[test]
fn mangled_diffs_never_panic() {
    let mut rng = Rng(0xfeed_0000_1111_2222);
    let r = TestRepo::with_files(&[("mod.py", MODULE)]);
    let seed = format!(
        "diff --git a/mod.py b/mod.py\n--- a/mod.py\n+++ b/mod.py\n@@ -13,7 +13,7 @@\n{}",
        good_hunk_body()
    );
    let pieces = [
        "@@",
        "\n",
        " ",
        "-",
        "+",
        "\\ No newline at end of file\n",
        "--- a/x\n",
        "+++ b/y\n",
        "\"",
        "\\",
        "diff --git ",
        "@@ -0,0 +1 @@\n",
        "*** Begin Patch\n",
        "<<<<<<< SEARCH\n",
        "=======\n",
    ];
    for round in 0..120 {
        let mut text: Vec<char> = seed.chars().collect();
        for _ in 0..(1 + rng.next() % 6) {
            let at = (rng.next() as usize) % (text.len() + 1);
            match rng.next() % 3 {
                0 if !text.is_empty() => {
                    let end = (at + (rng.next() % 8) as usize).min(text.len());
                    text.drain(at.min(end)..end);
                }
                _ => {
                    let piece = pieces[(rng.next() as usize) % pieces.len()];
                    for (k, c) in piece.chars().enumerate() {
                        text.insert((at + k).min(text.len()), c);
                    }
                }
            }
        }
        let diff: String = text.into_iter().collect();
        let out = run_patch(&r, &diff, &["--check"]);
        assert!(
            matches!(out.status.code(), Some(0) | Some(1)),
            "round {round} crashed: {}\n{diff}",
            stderr_of(&out)
        );
    }
}

#[test]
fn a_modification_of_a_missing_file_from_an_empty_pre_image_creates_it() {
    let r = TestRepo::with_files(&[("a.txt", "a\n")]);
    let diff = "--- a/docs/new.md\n+++ b/docs/new.md\n@@ -0,0 +1,2 @@\n+# New\n+text\n";
    let out = run_patch(&r, diff, &["--strict"]);
    assert_eq!(out.status.code(), Some(1), "strict refuses it");
    assert!(r.read("docs/new.md").is_none());
    let out = run_patch(&r, diff, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "recount  docs/new.md\n");
    assert_eq!(r.read("docs/new.md").as_deref(), Some("# New\ntext\n"));
}

#[test]
fn a_hunk_quoting_words_of_an_error_still_gets_every_pass() {
    // The context says "already exists" and "not a regular file", and needs the fuzzy pass:
    // whether to try the next pass must not depend on what the quoted text says.
    let file = "fn f() {\n    // fails when the file already exists   \n    // or is not a regular file\n    x();\n}\n";
    let r = TestRepo::with_files(&[("f.rs", file)]);
    let diff = "--- a/f.rs\n+++ b/f.rs\n@@ -1,5 +1,5 @@\n fn f() {\n     // fails when the file already exists\n     // or is not a regular file\n-    x();\n+    y();\n }\n";
    let out = run_patch(&r, diff, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "fuzzy    f.rs\n");
    assert_eq!(r.read("f.rs"), Some(file.replace("x();", "y();")));
}

/// `git factory patch` fed raw bytes (a diff that is not UTF-8 must reach the engine as is).
fn run_patch_bytes(r: &TestRepo, diff: &[u8], extra: &[&str]) -> std::process::Output {
    r.factory()
        .args(["patch", "-"])
        .args(extra)
        .write_stdin(diff.to_vec())
        .output()
        .expect("patch runs")
}

/// Commits `bytes` at `path` (contents that are not UTF-8).
fn commit_bytes(r: &TestRepo, path: &str, bytes: &[u8]) {
    std::fs::write(r.root.join(path), bytes).expect("write");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "bytes"]);
}

fn read_bytes(r: &TestRepo, path: &str) -> Option<Vec<u8>> {
    std::fs::read(r.root.join(path)).ok()
}

/// Expects a refusal with `needle` in it and the tree exactly as before.
fn assert_refused(r: &TestRepo, diff: &str, needle: &str) {
    let before = r.snapshot();
    let out = run_patch(r, diff, &[]);
    assert_eq!(out.status.code(), Some(1), "{}\n{diff}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains(needle),
        "wanted {needle:?} in: {}",
        stderr_of(&out)
    );
    assert_eq!(r.snapshot(), before, "{diff}");
}

const JS: &str = "import { a } from './a.js';\nimport { b } from './b.js';\n\nexport function run(x) {\n\tif (x) {\n\t\ta();\n\t}\n\tb();\n\treturn x;\n}\n\nexport function stop() {\n\treturn null;\n}\n";

#[test]
fn a_blank_context_line_the_file_lacks_is_tolerated_away_from_changes() {
    // The model wrote a blank context line between two imports that the file does not have.
    let r = TestRepo::with_files(&[("m.js", JS)]);
    let diff = "--- a/m.js\n+++ b/m.js\n@@ -1,6 +1,6 @@\n import { a } from './a.js';\n \n import { b } from './b.js';\n \n export function run(x) {\n-\tif (x) {\n+\tif (x && x.ok) {\n";
    let out = run_patch(&r, diff, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "fuzzy    m.js\n");
    assert_eq!(
        r.read("m.js"),
        Some(JS.replace("\tif (x) {", "\tif (x && x.ok) {"))
    );
}

#[test]
fn a_lost_blank_line_next_to_added_lines_is_refused_as_ambiguous() {
    // The file has a blank line between the imports and the function; the diff dropped it and
    // inserts a line there: before or after the blank, the diff cannot say.
    let r = TestRepo::with_files(&[("m.js", JS)]);
    let diff = "--- a/m.js\n+++ b/m.js\n@@ -2,3 +2,4 @@\n import { b } from './b.js';\n+import { c } from './c.js';\n export function run(x) {\n";
    assert_refused(&r, diff, "blank line");
    // The other direction: a blank line the file lacks, written next to an added line.
    let diff = "--- a/m.js\n+++ b/m.js\n@@ -4,3 +4,4 @@\n export function run(x) {\n \n+\tconsole.log(x);\n \tif (x) {\n";
    assert_refused(&r, diff, "blank line");
    // Next to a removed line.
    let diff = "--- a/m.js\n+++ b/m.js\n@@ -2,3 +2,2 @@\n-import { b } from './b.js';\n export function run(x) {\n \tif (x) {\n";
    assert_refused(&r, diff, "blank line");
}

#[test]
fn a_blank_line_lost_between_context_lines_keeps_its_place() {
    let r = TestRepo::with_files(&[("m.js", JS)]);
    let diff = "--- a/m.js\n+++ b/m.js\n@@ -9,5 +9,5 @@\n \treturn x;\n }\n export function stop() {\n-\treturn null;\n+\treturn undefined;\n }\n";
    let out = run_patch(&r, diff, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        r.read("m.js"),
        Some(JS.replace("\treturn null;", "\treturn undefined;"))
    );
}

#[test]
fn a_context_line_that_lost_its_space_is_never_a_shorter_hunk() {
    // `\tb();` lost its leading space: it is neither context nor a change. Reading it as the
    // end of the hunk applied the first half and dropped the second as prose.
    let r = TestRepo::with_files(&[("m.js", JS)]);
    let diff = "--- a/m.js\n+++ b/m.js\n@@ -5,5 +5,5 @@\n \tif (x) {\n-\t\ta();\n+\t\ta(x);\n \t}\n\tb();\n-\treturn x;\n+\treturn !x;\n }\n";
    assert_refused(&r, diff, "line 8");
    let out = run_patch(&r, diff, &[]);
    assert!(stderr_of(&out).contains("\\tb();"), "{}", stderr_of(&out));
    // The same when the header's counts are already reached before the damaged line.
    let diff = "--- a/m.js\n+++ b/m.js\n@@ -5,3 +5,3 @@\n \tif (x) {\n-\t\ta();\n+\t\ta(x);\n \t}\n\tb();\n-\treturn x;\n+\treturn !x;\n }\n";
    assert_refused(&r, diff, "line 8");
}

#[test]
fn prose_after_a_complete_hunk_is_still_prose() {
    // git format-patch output: a signature after the last hunk.
    let r = TestRepo::with_files(&[("m.js", JS)]);
    let diff = "From 1234 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] stop\n\n---\n m.js | 2 +-\n\ndiff --git a/m.js b/m.js\n--- a/m.js\n+++ b/m.js\n@@ -12,3 +12,3 @@ export function stop() {\n export function stop() {\n-\treturn null;\n+\treturn undefined;\n }\n-- \n2.43.0\n\n";
    let out = run_patch(&r, diff, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "strict   m.js\n");
    assert_eq!(
        r.read("m.js"),
        Some(JS.replace("\treturn null;", "\treturn undefined;"))
    );
}

#[test]
fn file_headers_inside_an_over_counted_hunk_start_the_next_file() {
    let pkg = "{\n  \"name\": \"m\",\n  \"version\": \"1.0.0\"\n}\n";
    let r = TestRepo::with_files(&[("m.js", JS), ("package.json", pkg)]);
    // No diff --git, no a/ b/, and the first hunk claims 9 lines where it has 4.
    let diff = "--- m.js\n+++ m.js\n@@ -13,9 +13,9 @@\n export function stop() {\n-\treturn null;\n+\treturn undefined;\n }\n--- package.json\n+++ package.json\n@@ -2,2 +2,2 @@\n   \"name\": \"m\",\n-  \"version\": \"1.0.0\"\n+  \"version\": \"1.0.1\"\n";
    let out = run_patch(&r, diff, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "recount  m.js\nstrict   package.json\n");
    assert_eq!(
        r.read("m.js"),
        Some(JS.replace("\treturn null;", "\treturn undefined;"))
    );
    assert_eq!(r.read("package.json"), Some(pkg.replace("1.0.0", "1.0.1")));
}

/// "café crème\n" and its neighbours in Latin-1.
const LATIN1: &[u8] = b"menu\ncaf\xe9 cr\xe8me\nth\xe9\nfin\n";

#[test]
fn latin1_lines_from_git_diff_are_matched_and_written_byte_for_byte() {
    let r = TestRepo::with_files(&[("a.txt", "a\n")]);
    commit_bytes(&r, "menu.txt", LATIN1);
    let want: &[u8] = b"menu\ncaf\xe9 cr\xe8me br\xfbl\xe9e\nth\xe9\nfin\n";
    std::fs::write(r.root.join("menu.txt"), want).expect("write");
    let mut git = assert_cmd::Command::new("git");
    hermetic(&mut git, &r.home);
    let diff = git
        .current_dir(&r.root)
        .args(["diff", "menu.txt"])
        .output()
        .expect("git diff")
        .stdout;
    r.git(&["checkout", "--", "menu.txt"]);
    for extra in [&["--strict"][..], &[][..]] {
        let out = run_patch_bytes(&r, &diff, extra);
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        assert_eq!(read_bytes(&r, "menu.txt").as_deref(), Some(want));
        r.git(&["checkout", "--", "menu.txt"]);
    }
    // Damaged (wrong numbers, so the recount pass places it): still byte for byte.
    let damaged: Vec<u8> = String::from_utf8_lossy(&diff)
        .find("@@ -1,")
        .map(|at| {
            let mut d = diff[..at].to_vec();
            d.extend_from_slice(b"@@ -7,4 +7,4 @@");
            let rest = &diff[at..];
            let end = rest.iter().position(|b| *b == b'\n').expect("header end");
            d.extend_from_slice(&rest[end..]);
            d
        })
        .expect("a hunk header");
    let out = run_patch_bytes(&r, &damaged, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "recount  menu.txt\n");
    assert_eq!(read_bytes(&r, "menu.txt").as_deref(), Some(want));
}

#[test]
fn latin1_edits_of_an_agent_reach_the_tree_byte_for_byte() {
    let r = TestRepo::with_files(&[("a.txt", "a\n")]);
    commit_bytes(&r, "menu.txt", LATIN1);
    r.git(&["config", "factory.verify", "true"]);
    let want: &[u8] = b"menu\ncaf\xe9 cr\xe8me br\xfbl\xe9e\nth\xe9\nfin\n";
    let expected = r.outside.join("expected.txt");
    std::fs::write(&expected, want).expect("write");
    let script = r.outside.join("agent.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat > /dev/null\ncp {} menu.txt\n",
            expected.display()
        ),
    )
    .expect("write");
    let out = r
        .factory()
        .args([
            "run", "--json", "--id", "l1", "--title", "t", "--intent", "i",
        ])
        .args(["--allow", "menu.txt", "--accept"])
        .arg(format!("cmp menu.txt {}", expected.display()))
        .arg("--agent-edits")
        .arg(format!("sh {}", script.display()))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(read_bytes(&r, "menu.txt").as_deref(), Some(want));
}

#[test]
fn crlf_files_stay_crlf_in_every_pass_and_dialect() {
    let file = MODULE.replace('\n', "\r\n");
    let want = expected().replace('\n', "\r\n");
    let added = "+        items.append(line.lower())\n+        count += 1\n";
    let want_added = MODULE
        .replace(
            "items.append(line)\n",
            "items.append(line.lower())\n        count += 1\n",
        )
        .replace('\n', "\r\n");
    let body_lf = good_hunk_body().replace("+        items.append(line.lower())\n", added);
    let cases: Vec<(&str, String, String)> = vec![
        (
            "unified diff without CR, wrong numbers",
            format!("--- a/mod.py\n+++ b/mod.py\n@@ -40,7 +40,8 @@\n{body_lf}"),
            want_added.clone(),
        ),
        (
            "unified diff without CR, lost indentation",
            format!(
                "--- a/mod.py\n+++ b/mod.py\n@@ -13,7 +13,8 @@\n{}",
                body_lf.replace("         if not line:", " \tif not line:")
            ),
            want_added.clone(),
        ),
        (
            "begin patch",
            "*** Begin Patch\n*** Update File: mod.py\n@@\n-        items.append(line)\n+        items.append(line.lower())\n*** End Patch\n".to_string(),
            want.clone(),
        ),
        (
            "search/replace",
            "mod.py\n<<<<<<< SEARCH\n        items.append(line)\n=======\n        items.append(line.lower())\n>>>>>>> REPLACE\n".to_string(),
            want.clone(),
        ),
        (
            "begin patch written with CRLF",
            "*** Begin Patch\r\n*** Update File: mod.py\r\n@@\r\n-        items.append(line)\r\n+        items.append(line.lower())\r\n*** End Patch\r\n".to_string(),
            want.clone(),
        ),
    ];
    for (name, diff, want) in cases {
        let r = TestRepo::with_files(&[("mod.py", &file)]);
        let out = run_patch(&r, &diff, &[]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr_of(&out));
        assert_eq!(r.read("mod.py"), Some(want), "{name}");
    }
}

#[test]
fn a_deletion_without_its_content_is_refused() {
    let r = TestRepo::with_files(&[("m.js", JS), ("empty.txt", "")]);
    assert_refused(
        &r,
        "diff --git a/m.js b/m.js\ndeleted file mode 100644\nindex 1234567..0000000\n",
        "whole content",
    );
    // An empty file carries no content: git's own diff of its deletion has no hunk.
    let out = run_patch(
        &r,
        "diff --git a/empty.txt b/empty.txt\ndeleted file mode 100644\nindex e69de29..0000000\n",
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(r.read("empty.txt").is_none());
}

#[test]
fn a_context_line_quoting_the_envelope_marker_is_still_a_unified_diff() {
    let doc = "# Agents\n\nCodex prints:\n\n    *** Begin Patch\n    *** Update File: x\n\nthen the hunks.\n";
    let r = TestRepo::with_files(&[("doc.md", doc)]);
    let diff = "--- a/doc.md\n+++ b/doc.md\n@@ -3,6 +3,6 @@\n-Codex prints:\n+Codex-style agents print:\n \n     *** Begin Patch\n     *** Update File: x\n \n then the hunks.\n";
    let out = run_patch(&r, diff, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "strict   doc.md\n");
    assert_eq!(
        r.read("doc.md"),
        Some(doc.replace("Codex prints:", "Codex-style agents print:"))
    );
}

#[test]
fn the_brief_quotes_the_line_that_occurs_nowhere() {
    // The removed line exists; the context line before it does not.
    let r = TestRepo::with_files(&[("mod.py", MODULE)]);
    let diff = "--- a/mod.py\n+++ b/mod.py\n@@ -11,3 +11,3 @@\n     items = []\n     for line in text.split('\\n'):\n-        line = line.strip()\n+        line = line.rstrip()\n";
    let before = r.snapshot();
    let out = run_patch(&r, diff, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(r.snapshot(), before);
    let err = stderr_of(&out);
    assert!(!err.contains("no line of it occurs"), "{err}");
    assert!(
        err.contains("for line in text.split('\\\\n'):") && err.contains("occurs nowhere"),
        "{err}"
    );
    // The closest actual text, with its line numbers.
    assert!(
        err.contains("12") && err.contains("for line in text.splitlines():"),
        "{err}"
    );
}

#[test]
fn a_latin1_bare_diff_from_an_agent_command_is_applied_byte_for_byte() {
    let r = TestRepo::with_files(&[("a.txt", "a\n")]);
    commit_bytes(&r, "menu.txt", LATIN1);
    r.git(&["config", "factory.verify", "true"]);
    let script = r.outside.join("agent.sh");
    // Wrong line numbers, so the recount pass (not only the strict one) reads the bytes.
    std::fs::write(
        &script,
        "#!/bin/sh\ncat > /dev/null\nprintf -- '--- a/menu.txt\\n+++ b/menu.txt\\n@@ -7 +7 @@\\n-caf\\351 cr\\350me\\n+caf\\351 cr\\350me br\\373l\\351e\\n'\n",
    )
    .expect("write");
    let out = r
        .factory()
        .args([
            "run", "--json", "--id", "l1", "--title", "t", "--intent", "i",
        ])
        .args(["--allow", "menu.txt", "--accept", "true", "--agent-command"])
        .arg(format!("sh {}", script.display()))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: serde_json::Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["attempts"][0]["apply_method"], "recount");
    assert_eq!(
        read_bytes(&r, "menu.txt").as_deref(),
        Some(&b"menu\ncaf\xe9 cr\xe8me br\xfbl\xe9e\nth\xe9\nfin\n"[..])
    );
}

#[test]
fn recounted_git_diffs_of_random_texts_are_right_or_refused() {
    // With every header's numbers wrong, the fallback passes place each hunk by its lines
    // alone: a unique place is the true one, so the result is the second text or a refusal.
    let mut rng = Rng(0x0dd_ba11_cafe_0002);
    let tmp = tempfile::tempdir().expect("tmp");
    let mut applied = 0;
    for round in 0..120 {
        let (a, b) = (rng.text(), rng.text());
        if a == b {
            continue;
        }
        let r = TestRepo::with_files(&[("f.txt", a.as_str())]);
        let other = tmp.path().join(format!("b{round}.txt"));
        std::fs::write(&other, &b).expect("write");
        let mut git = assert_cmd::Command::new("git");
        hermetic(&mut git, &r.home);
        let raw = stdout_of(
            &git.current_dir(&r.root)
                .args(["diff", "--no-index", "--no-prefix", "f.txt"])
                .arg(&other)
                .output()
                .expect("git diff"),
        );
        let other_name = other.to_string_lossy().trim_start_matches('/').to_string();
        let diff: String = raw
            .replace(&format!("/{other_name}"), "f.txt")
            .replace(&other_name, "f.txt")
            .lines()
            .map(|l| match l.strip_prefix("@@ -") {
                Some(rest) => {
                    let shift = 3 + rng.next() % 5;
                    let bump = |r: &str| match r.split_once(',') {
                        Some((s, c)) => format!("{},{c}", s.parse::<u64>().unwrap_or(0) + shift),
                        None => (r.parse::<u64>().unwrap_or(0) + shift).to_string(),
                    };
                    let (ranges, tail) = rest.split_once(" @@").unwrap_or((rest, ""));
                    let (old, new) = ranges.split_once(" +").unwrap_or((ranges, "0"));
                    format!("@@ -{} +{} @@{tail}\n", bump(old), bump(new))
                }
                None => format!("{l}\n"),
            })
            .collect();
        let out = r
            .factory()
            .args(["patch", "-p", "0", "-"])
            .write_stdin(diff.clone())
            .output()
            .expect("patch");
        match out.status.code() {
            Some(0) => {
                applied += 1;
                assert_eq!(
                    r.read("f.txt").as_deref(),
                    Some(b.as_str()),
                    "round {round}\n{diff}"
                );
            }
            Some(1) => assert_eq!(r.read("f.txt").as_deref(), Some(a.as_str())),
            _ => panic!("round {round}: {}", stderr_of(&out)),
        }
    }
    assert!(applied > 10, "only {applied} applied");
}

#[test]
fn every_change_block_is_applied_or_the_proposal_is_refused() {
    // Two envelopes: both are applied, never the first alone.
    let r = TestRepo::with_files(&[("f", "a\nb\n")]);
    let two = "*** Begin Patch\n*** Update File: f\n@@\n-a\n+A\n*** End Patch\n\n*** Begin Patch\n*** Update File: f\n@@\n-b\n+BB\n*** End Patch\n";
    let out = run_patch(&r, two, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.read("f").as_deref(), Some("A\nBB\n"));
    // Blocks of two dialects: which reading is meant is not said; refused, nothing written.
    let r = TestRepo::with_files(&[("f", "a\nb\n")]);
    let mixed = [
        "f\n<<<<<<< SEARCH\na\n=======\nA\n>>>>>>> REPLACE\n\n*** Begin Patch\n*** Update File: f\n@@\n-b\n+BB\n*** End Patch\n",
        "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n\nAlso:\n\nf\n<<<<<<< SEARCH\nb\n=======\nB\n>>>>>>> REPLACE\n",
        "*** Begin Patch\n*** Update File: f\n@@\n-a\n+A\n*** End Patch\n--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\n+B\n",
        "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n\n*** Begin Patch\n*** Update File: f\n@@\n-b\n+BB\n*** End Patch\n",
    ];
    for text in mixed {
        assert_refused(&r, text, "more than one dialect");
    }
}

#[test]
fn prose_after_a_blank_line_that_follows_a_complete_hunk_is_never_written() {
    // The hunk's counts are met; after a blank line, `+ Note: …` could be prose or an
    // under-counted hunk: ambiguous, refused — never ` Note: …` in the file.
    let r = TestRepo::with_files(&[("f", "l1\nl2\na\nb\nc\n\nd\ne\n")]);
    let diff =
        "--- a/f\n+++ b/f\n@@ -3,3 +3,4 @@\n a\n+new\n b\n c\n\n+ Note: this adds new after a\n";
    assert_refused(&r, diff, "after the blank line");
    // Context lines after the blank line cannot write anything: read as context, they only
    // narrow where the hunk may go.
    let diff = "--- a/f\n+++ b/f\n@@ -3,3 +3,4 @@\n a\n+new\n b\n c\n\n d\n";
    let out = run_patch(&r, diff, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        r.read("f").as_deref(),
        Some("l1\nl2\na\nnew\nb\nc\n\nd\ne\n")
    );
}

#[test]
fn context_free_hunks_are_placed_only_by_self_consistent_numbers() {
    let src = "def f():\n    return 1\n";
    // `-1,0` means after line 1, `+1,1` says the new line is line 1: the header contradicts
    // itself (git refuses it too).
    let r = TestRepo::with_files(&[("g.py", src)]);
    assert_refused(
        &r,
        "--- a/g.py\n+++ b/g.py\n@@ -1,0 +1,1 @@\n+import os\n",
        "contradict",
    );
    // The same insertion given twice must not insert twice.
    assert_refused(
        &r,
        "--- a/g.py\n+++ b/g.py\n@@ -1,0 +2 @@\n+X\n@@ -1,0 +2 @@\n+X\n",
        "hunk 2",
    );
    // Consistent numbers: inserted at the top (before line 1), as git --unidiff-zero does.
    let out = run_patch(
        &r,
        "--- a/g.py\n+++ b/g.py\n@@ -0,0 +1,1 @@\n+import os\n",
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.read("g.py"), Some(format!("import os\n{src}")));
}

#[test]
fn an_anchor_narrows_the_search_but_never_hides_an_ambiguity() {
    let r = TestRepo::with_files(&[("f.py", "def foo():\n    x = 1\n    y = 2\n    x = 1\n")]);
    let d = "*** Begin Patch\n*** Update File: f.py\n@@ def foo():\n-    x = 1\n+    x = 99\n*** End Patch\n";
    assert_refused(&r, d, "2 places");
    // The anchor picks the one after it; stacked anchors are honoured in order.
    let src = "class A:\n    def run(self):\n        return 1\n\nclass B:\n    def run(self):\n        return 1\n";
    let r = TestRepo::with_files(&[("c.py", src)]);
    let d = "*** Begin Patch\n*** Update File: c.py\n@@ class B:\n@@     def run(self):\n-        return 1\n+        return 2\n*** End Patch\n";
    let out = run_patch(&r, d, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        r.read("c.py"),
        Some("class A:\n    def run(self):\n        return 1\n\nclass B:\n    def run(self):\n        return 2\n".to_string())
    );
    // `*** End of File`: the hunk goes at the end, where it alone matches.
    let src = "x\ny\nx\n";
    let r = TestRepo::with_files(&[("e.txt", src)]);
    let d = "*** Begin Patch\n*** Update File: e.txt\n@@\n-x\n+X\n*** End of File\n*** End Patch\n";
    let out = run_patch(&r, d, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.read("e.txt").as_deref(), Some("x\ny\nX\n"));
}

#[test]
fn a_no_newline_marker_in_the_middle_of_a_hunk_is_malformed() {
    let r = TestRepo::with_files(&[("f", "a\nb\nc\n")]);
    let diff = "--- a/f\n+++ b/f\n@@ -1,3 +1,4 @@\n a\n+X\n\\ No newline at end of file\n b\n c\n";
    assert_refused(&r, diff, "No newline");
}

#[test]
fn a_crlf_file_without_a_final_newline_stays_crlf_when_lines_follow_its_last() {
    let r = TestRepo::with_files(&[("w.txt", "")]);
    commit_bytes(&r, "w.txt", b"a\r\nb");
    let diff = "--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,3 @@\n a\r\n-b\n\\ No newline at end of file\n+b\r\n+c\n";
    let out = run_patch(&r, diff, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(read_bytes(&r, "w.txt"), Some(b"a\r\nb\r\nc\r\n".to_vec()));
    // A model's diff that keeps the last line as context (no marker, so only the recount
    // pass places it): that line gains the file's own ending; the file still ends without one.
    commit_bytes(&r, "v.txt", b"a\r\nb");
    let diff = "--- a/v.txt\n+++ b/v.txt\n@@ -2 +2,2 @@\n b\n+c\n";
    let out = run_patch(&r, diff, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "recount  v.txt\n");
    assert_eq!(read_bytes(&r, "v.txt"), Some(b"a\r\nb\r\nc".to_vec()));
}

#[test]
fn an_envelope_deletion_carries_the_files_content() {
    let r = TestRepo::with_files(&[("old.txt", "bye\nnow\n"), ("empty.txt", "")]);
    let bare = "*** Begin Patch\n*** Delete File: old.txt\n*** End Patch\n";
    assert_refused(&r, bare, "whole content");
    let partial = "*** Begin Patch\n*** Delete File: old.txt\n-bye\n*** End Patch\n";
    assert_refused(&r, partial, "whole content");
    let whole = "*** Begin Patch\n*** Delete File: old.txt\n-bye\n-now\n*** Delete File: empty.txt\n*** End Patch\n";
    let out = run_patch(&r, whole, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(r.read("old.txt").is_none() && r.read("empty.txt").is_none());
}
