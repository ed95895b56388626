//! History that survives: note text kept as bytes, pushes that lose no run to a race,
//! records of a bounded size, and `git factory prune`.

use crate::common::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const APP: [&str; 3] = ["one", "two", "three"];

fn git_ok(r: &TestRepo, dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = in_dir(r, dir, "git", args);
    assert!(out.status.success(), "git {args:?}: {}", stderr_of(&out));
    out.stdout
}

/// The lines of the `refs/notes/factory` note on `rev`, as bytes, sorted.
fn note_lines(r: &TestRepo, dir: &Path, rev: &str) -> Vec<Vec<u8>> {
    let mut lines: Vec<Vec<u8>> = git_ok(r, dir, &["notes", "--ref=factory", "show", rev])
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    lines.sort();
    lines
}

#[test]
fn a_fetched_note_line_that_is_not_utf8_survives_the_next_runs_append() {
    let r = TestRepo::simple();
    let bare = origin_with_main(&r);
    let other = clone_of(&r, &bare, "other");
    // Someone else's note on the baseline, written by git in Latin-1, shared through origin.
    let latin1: &[u8] = b"reviewed by Ren\xe9 \xe0 Z\xfcrich";
    let file = r.outside.join("latin1-note");
    let mut text = latin1.to_vec();
    text.push(b'\n');
    std::fs::write(&file, &text).expect("write");
    git_ok(
        &r,
        &other,
        &[
            "notes",
            "--ref=factory",
            "add",
            "-F",
            file.to_str().expect("utf8"),
            "HEAD",
        ],
    );
    git_ok(&r, &other, &["push", "-q", "origin", "refs/notes/factory"]);

    // My own run, not pushed yet; then the fetch merges the Latin-1 line in.
    let mine = a_failing_run_in(&r, &r.root, "mine");
    let out = r.factory().arg("fetch").output().expect("fetch");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let mine_line = format!("factory {mine} FAIL wo-mine attempts=1").into_bytes();
    let mut want = vec![latin1.to_vec(), mine_line];
    want.sort();
    assert_eq!(note_lines(&r, &r.root, "HEAD"), want, "the merge kept both");

    // The next run appends its line and drops none.
    let next = a_failing_run_in(&r, &r.root, "next");
    want.push(format!("factory {next} FAIL wo-next attempts=1").into_bytes());
    want.sort();
    assert_eq!(
        note_lines(&r, &r.root, "HEAD"),
        want,
        "every earlier line kept byte for byte"
    );
    // And `git log --notes` still shows the run lines.
    let log = r.git(&["log", "-1", "--notes=factory", "--format=%N"]);
    assert!(log.contains(&next) && log.contains(&mine), "{log}");
}

/// `git factory ARGS` in `dir` as a plain child process, hermetic like `TestRepo::factory`.
fn spawn_factory(r: &TestRepo, dir: &Path, args: &[&str]) -> std::process::Child {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("git-factory"));
    cmd.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", &r.home)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env("TZ", "UTC")
        .env("LC_ALL", "C")
        .env("NO_COLOR", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd.spawn().expect("spawn git-factory")
}

/// Every run ref and every line of the `refs/notes/factory` note on `main` in the bare remote.
fn remote_state(r: &TestRepo, bare: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let runs = String::from_utf8(git_ok(
        r,
        bare,
        &[
            "for-each-ref",
            "--format=%(refname:lstrip=2)",
            "refs/factory/",
        ],
    ))
    .expect("ascii")
    .lines()
    .map(str::to_string)
    .collect();
    let lines = note_lines(r, bare, "main")
        .into_iter()
        .map(|l| String::from_utf8(l).expect("our lines are ascii"))
        .collect();
    (runs, lines)
}

#[test]
fn eight_clones_pushing_at_once_to_one_remote_all_land_every_run_and_line() {
    let r = TestRepo::simple();
    let bare = origin_with_main(&r);
    let clones: Vec<PathBuf> = (0..8)
        .map(|i| clone_of(&r, &bare, &format!("clone{i}")))
        .collect();
    let mut runs = BTreeSet::new();
    let mut lines = BTreeSet::new();
    for round in 0..3 {
        for (i, dir) in clones.iter().enumerate() {
            let name = format!("c{i}r{round}");
            let id = a_failing_run_in(&r, dir, &name);
            lines.insert(format!("factory {id} FAIL wo-{name} attempts=1"));
            runs.insert(id);
        }
        let start = std::time::Instant::now();
        let pushers: Vec<_> = clones
            .iter()
            .map(|dir| spawn_factory(&r, dir, &["push"]))
            .collect();
        for (i, child) in pushers.into_iter().enumerate() {
            let out = child.wait_with_output().expect("wait");
            assert_eq!(
                out.status.code(),
                Some(0),
                "round {round}, clone {i}: {}",
                stderr_of(&out)
            );
            assert_eq!(
                stderr_of(&out),
                "pushed 1 run and the merged notes (origin)\n",
                "round {round}, clone {i}"
            );
        }
        eprintln!(
            "round {round}: 8 concurrent pushers all landed in {:.2} s",
            start.elapsed().as_secs_f64()
        );
        let (remote_runs, remote_lines) = remote_state(&r, &bare);
        assert_eq!(remote_runs, runs, "round {round}: every run ref arrived");
        assert_eq!(
            remote_lines, lines,
            "round {round}: every note line arrived"
        );
    }
    assert_eq!(processes_in(r.tmp.path(), false), Vec::<String>::new());
}

#[test]
fn a_push_the_remote_partly_refuses_names_what_was_sent_and_what_was_not() {
    let r = TestRepo::simple();
    let bare = origin_with_main(&r);
    // The remote takes run refs but refuses notes (a hook of its owner's).
    let hook = bare.join("hooks").join("update");
    std::fs::write(
        &hook,
        "#!/bin/sh\ncase \"$1\" in refs/notes/*) echo \"notes are closed here\" >&2; exit 1;; esac\nexit 0\n",
    )
    .expect("hook");
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let id = a_failing_run_in(&r, &r.root, "mine");
    let start = std::time::Instant::now();
    let out = r.factory().arg("push").output().expect("push");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        start.elapsed() < std::time::Duration::from_secs(20),
        "a hook's refusal is not a race: no waiting it out"
    );
    let err = stderr_of(&out);
    assert!(
        err.starts_with(
            "error: push to origin: refs/notes/factory refused: [remote rejected] (hook declined)\n"
        ),
        "{err}"
    );
    assert!(
        err.contains(&format!("sent to origin: 1 run ({id})")),
        "{err}"
    );
    assert!(err.contains("remote: notes are closed here"), "{err}");
    assert!(
        err.contains("not sent: refs/notes/factory [remote rejected] (hook declined)"),
        "{err}"
    );
    assert!(!err.contains("nothing was changed"), "{err}");
    let runs =
        String::from_utf8(git_ok(&r, &bare, &["for-each-ref", "refs/factory/"])).expect("ascii");
    assert!(runs.contains(&id), "the run did arrive: {runs}");
    let (code, _) = r.git_code(&[
        "--git-dir",
        bare.to_str().expect("utf8"),
        "rev-parse",
        "-q",
        "--verify",
        "refs/notes/factory",
    ]);
    assert_ne!(code, 0, "the notes did not");
}

/// A passing run whose check prints a first line, `middle` bytes, and a last line, with
/// `--out`; returns (run id, the out folder).
fn a_loud_run(r: &TestRepo, name: &str, middle: usize, config: &[&str]) -> (String, PathBuf) {
    let mut order = basic_order(&[&format!(
        "sh -c 'echo FIRST-LINE; yes 0123456789abcde | head -c {middle}; echo LAST-LINE'"
    )]);
    order["id"] = format!("wo-{name}").into();
    let wo = r.work_order(order);
    let replay = r.replay(
        &format!("rp-{name}"),
        &[(
            "1.json",
            proposal(&diff_replace("app.txt", &APP, "two", "TWO"), name),
        )],
    );
    let out_dir = r.outside.join(format!("out-{name}"));
    // Through git, so `git -c factory.X=…` reaches the run as it does for a user.
    let bin = assert_cmd::cargo::cargo_bin("git-factory");
    let path = format!(
        "{}:{}",
        bin.parent().expect("dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut git = assert_cmd::Command::new("git");
    hermetic(&mut git, &r.home);
    let out = git
        .current_dir(&r.root)
        .env("PATH", path)
        .args(config.iter().flat_map(|c| ["-c", c]))
        .args(["factory", "run", "--json", "--out"])
        .arg(&out_dir)
        .arg("-w")
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: serde_json::Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    let id = s["run_id"].as_str().expect("id").to_string();
    r.git(&["reset", "-q", "--hard"]);
    let dir = out_dir.join(&id);
    (id, dir)
}

#[test]
fn a_record_keeps_the_head_and_tail_of_a_huge_stream_and_out_keeps_it_whole() {
    let r = TestRepo::simple();
    let middle = 3 * 1024 * 1024;
    let (id, out) = a_loud_run(&r, "loud", middle, &[]);
    let path = "attempt_1/acceptance_0_stdout.txt";
    let whole = std::fs::read(out.join(path)).expect("--out has the stream");
    assert_eq!(
        whole.len(),
        "FIRST-LINE\n".len() + middle + "LAST-LINE\n".len()
    );
    let record = git_ok(
        &r,
        &r.root,
        &["cat-file", "blob", &format!("refs/factory/{id}:{path}")],
    );
    let cap = 1024 * 1024;
    let left_out = whole.len() - cap;
    let marker = format!(
        "\n[git-factory: {left_out} bytes left out here; the record keeps the first {} and the last {} bytes of {} (factory.recordLogBytes); run with --out DIR to keep whole streams]\n",
        cap / 2,
        cap / 2,
        whole.len()
    );
    assert!(record.len() <= cap + marker.len(), "{}", record.len());
    assert_eq!(
        &record[..cap / 2],
        &whole[..cap / 2],
        "the head, byte for byte"
    );
    assert_eq!(
        &record[record.len() - cap / 2..],
        &whole[whole.len() - cap / 2..],
        "the tail, byte for byte"
    );
    assert_eq!(&record[cap / 2..record.len() - cap / 2], marker.as_bytes());
    assert!(record.starts_with(b"FIRST-LINE\n") && record.ends_with(b"LAST-LINE\n"));

    let out = r
        .factory()
        .args(["show", &id, "--log", "acceptance:0"])
        .output()
        .expect("show");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out).contains(marker.trim()),
        "show --log shows the marker"
    );

    // A smaller cap from git config; a stream under it is kept whole.
    let (id, out) = a_loud_run(&r, "capped", 10_000, &["factory.recordLogBytes=4096"]);
    let whole = std::fs::read(out.join(path)).expect("--out");
    let record = git_ok(
        &r,
        &r.root,
        &["cat-file", "blob", &format!("refs/factory/{id}:{path}")],
    );
    assert!(record.len() < 4096 + 300, "{}", record.len());
    assert!(record.starts_with(&whole[..2048]) && record.ends_with(&whole[whole.len() - 2048..]));
    let (id, out) = a_loud_run(&r, "quiet", 100, &[]);
    let whole = std::fs::read(out.join(path)).expect("--out");
    let record = git_ok(
        &r,
        &r.root,
        &["cat-file", "blob", &format!("refs/factory/{id}:{path}")],
    );
    assert_eq!(record, whole);
}

/// A FAIL run of work order `wo_id`, made distinct by `variant` (its intent); returns its id.
fn a_run_of(r: &TestRepo, wo_id: &str, variant: &str) -> String {
    let mut order = basic_order(&["false"]);
    order["id"] = wo_id.into();
    order["intent"] = format!("Replace two with TWO ({variant}).").into();
    let wo = r.work_order(order);
    let replay = r.replay(
        &format!("rp-{variant}"),
        &[(
            "1.json",
            proposal(&diff_replace("app.txt", &APP, "two", "TWO"), variant),
        )],
    );
    let out = r.run_replay(&wo, &replay, &["--max-attempts", "1", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let s: serde_json::Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    s["run_id"].as_str().expect("id").to_string()
}

fn prune(r: &TestRepo, days_ahead: u64, args: &[&str]) -> std::process::Output {
    r.factory()
        .env(
            "GIT_FACTORY_TEST_CLOCK_AHEAD",
            (days_ahead * 86_400).to_string(),
        )
        .arg("prune")
        .args(args)
        .output()
        .expect("prune")
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn prune_removes_old_runs_beyond_the_newest_per_work_order_with_their_note_lines() {
    let r = TestRepo::simple();
    let a1 = a_run_of(&r, "wo-a", "1");
    let a2 = a_run_of(&r, "wo-a", "2");
    let a3 = a_run_of(&r, "wo-a", "3");
    let b1 = a_run_of(&r, "wo-b", "1");
    // A run killed after its first record: RUNNING until recovered.
    let mut order = basic_order(&["false"]);
    order["id"] = "wo-a".into();
    order["intent"] = "Replace two with TWO (killed).".into();
    let wo = r.work_order(order);
    let replay = r.replay(
        "rp-killed",
        &[(
            "1.json",
            proposal(&diff_replace("app.txt", &APP, "two", "TWO"), "killed"),
        )],
    );
    let out = r
        .factory()
        .env("GIT_FACTORY_TEST_CRASH_AT", "after_preflight")
        .args(["run", "--max-attempts", "1", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("run");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9), "{}", stderr_of(&out));
    let running: Vec<String> = r
        .run_ids()
        .into_iter()
        .filter(|id| ![&a1, &a2, &a3, &b1].contains(&id))
        .collect();
    assert_eq!(running.len(), 1, "{running:?}");
    let running = running[0].clone();
    // Someone's own line on the baseline's note, in Latin-1, written by git.
    let mut note = git_ok(&r, &r.root, &["notes", "--ref=factory", "show", "HEAD"]);
    note.extend_from_slice(b"reviewed by Ren\xe9\n");
    let file = r.outside.join("note");
    std::fs::write(&file, &note).expect("write");
    r.git(&[
        "notes",
        "--ref=factory",
        "add",
        "-f",
        "-F",
        file.to_str().expect("utf8"),
        "HEAD",
    ]);
    let line = |id: &str, wo: &str| format!("factory {id} FAIL {wo} attempts=1").into_bytes();
    let all = r.run_ids();
    // While the killed run waits for recover, prune refuses like every command that could
    // change the repo (SPEC §7).
    let out = prune(&r, 100, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("git factory recover"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(r.run_ids(), all);
    // A RUNNING record with no journal here (a run going on elsewhere) is kept by prune.
    for j in r.journals() {
        std::fs::remove_file(r.root.join(".git/factory").join(j)).expect("journal");
    }

    // No age given: nothing ages out.
    let out = prune(&r, 100, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        stderr_of(&out),
        "nothing to prune: runs never age out here\nhint: give an age (git factory prune --older-than 90d) or set one (git config factory.pruneOlderThan 90d)\n"
    );
    // Today, nothing is 90 days old.
    let out = prune(&r, 0, &["--older-than", "90d"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stderr_of(&out), "nothing to prune: 5 runs kept\n");
    assert_eq!(stdout_of(&out), "");
    // An age that does not read is refused.
    let out = prune(&r, 0, &["--older-than", "90 days"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr_of(&out),
        "error: --older-than has an invalid age \"90 days\"\nhint: give a number and a unit: 90d, 12h, 2w, 30m, 45s (or never)\n"
    );
    assert_eq!(r.run_ids(), all);

    // A hundred days on, a dry run lists what would go and removes nothing.
    let out = prune(
        &r,
        100,
        &["--older-than", "90d", "--keep", "1", "--dry-run"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        stdout_of(&out),
        format!(
            "would remove {a3} FAIL wo-a (started 100 days ago)\nwould remove {a2} FAIL wo-a (started 100 days ago)\nwould remove {a1} FAIL wo-a (started 100 days ago)\n"
        )
    );
    assert_eq!(
        stderr_of(&out),
        "would remove 3 runs and 3 note lines; 2 runs kept\n"
    );
    assert_eq!(r.run_ids(), all);
    assert_eq!(
        git_ok(&r, &r.root, &["notes", "--ref=factory", "show", "HEAD"]),
        note
    );

    // The age from git config; the newest two of wo-a stay (one of them RUNNING).
    r.git(&["config", "factory.pruneOlderThan", "90d"]);
    let out = prune(&r, 100, &["--keep", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        stdout_of(&out),
        format!(
            "removed {a2} FAIL wo-a (started 100 days ago)\nremoved {a1} FAIL wo-a (started 100 days ago)\n"
        )
    );
    assert_eq!(
        stderr_of(&out),
        "removed 2 runs and 2 note lines; 3 runs kept (their objects stay until git gc)\n"
    );
    assert_eq!(
        r.run_ids(),
        sorted(vec![a3.clone(), b1.clone(), running.clone()])
    );
    let mut want = vec![
        line(&a3, "wo-a"),
        line(&b1, "wo-b"),
        b"reviewed by Ren\xe9".to_vec(),
    ];
    want.sort();
    assert_eq!(
        note_lines(&r, &r.root, "HEAD"),
        want,
        "other lines byte for byte"
    );

    // Keeping none: everything old goes but the RUNNING run.
    let out = prune(&r, 100, &["--keep", "0"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.run_ids(), vec![running.clone()]);
    assert_eq!(
        note_lines(&r, &r.root, "HEAD"),
        vec![b"reviewed by Ren\xe9".to_vec()]
    );
    let log = r
        .factory()
        .args(["log", "--oneline"])
        .output()
        .expect("log");
    assert_eq!(log.status.code(), Some(0));
    let log = stdout_of(&log);
    assert!(
        log.contains(&running) && !log.contains(&a3) && !log.contains(&b1),
        "{log}"
    );
}

/// `prune` is this clone's housekeeping: pushing afterwards never takes another clone's note
/// line off the shared remote (SPEC §4.1: every line of every clone ends on the remote).
#[test]
fn a_push_after_prune_takes_no_line_off_the_remote() {
    let r = TestRepo::simple();
    let bare = origin_with_main(&r);
    let a1 = a_run_of(&r, "wo-a", "1");
    let a2 = a_run_of(&r, "wo-a", "2");
    let pushed = r.factory().arg("push").output().expect("push");
    assert!(pushed.status.success(), "{}", stderr_of(&pushed));
    let remote_lines = || {
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&bare)
            .args(["notes", "--ref=factory", "show", "main"])
            .output()
            .expect("git");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let before = remote_lines();
    assert!(before.contains(&a1) && before.contains(&a2), "{before}");
    assert!(r.root.join(".git/factory/made").join(&a1).is_file());
    let out = prune(&r, 30, &["--older-than", "1d", "--keep", "1"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    // The pruned run's seal went with its record; the kept one's stays.
    let sealed = |id: &str| r.root.join(".git/factory/made").join(id).is_file();
    assert!(sealed(&a1) != sealed(&a2), "one of the two runs is pruned");
    let again = r.factory().arg("push").output().expect("push");
    assert!(again.status.success(), "{}", stderr_of(&again));
    let after = remote_lines();
    assert!(
        after.contains(&a1) && after.contains(&a2),
        "before:\n{before}\nafter:\n{after}"
    );
}
