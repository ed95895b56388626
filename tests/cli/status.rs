//! The status walks (the preflight clean check and the rollback check) say what `git status`
//! says, on every kind of tree state; and a rollback finds what a command left behind.

use crate::common::*;
use git_factory::git::{self, status::Snapshot};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What `git status --porcelain -z` lists (paths as bytes), with `-uall` or `-unormal`.
fn git_status(r: &TestRepo, all: bool) -> Vec<Vec<u8>> {
    let mut cmd = assert_cmd::Command::new("git");
    hermetic(&mut cmd, &r.home);
    let out = cmd
        .current_dir(&r.root)
        // Without refreshing the index, so the snapshot's index stays the one it was taken on.
        .args(["--no-optional-locks", "status", "--porcelain", "-z"])
        .arg(if all { "-uall" } else { "-unormal" })
        .output()
        .expect("git runs");
    assert!(out.status.success());
    let mut paths: Vec<Vec<u8>> = out
        .stdout
        .split(|&b| b == 0)
        .filter(|e| e.len() > 3)
        .map(|e| e[3..].to_vec())
        .collect();
    paths.sort();
    paths
}

fn raw(dirty: &[git::Dirty]) -> Vec<Vec<u8>> {
    let mut paths: Vec<Vec<u8>> = dirty.iter().map(|d| d.raw.clone()).collect();
    paths.sort();
    paths
}

fn show(paths: &[Vec<u8>]) -> Vec<String> {
    paths
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

/// The fast walk, the walk from a snapshot taken before `change`, and git all agree.
fn agrees_with_git(r: &TestRepo, name: &str, change: impl FnOnce(&TestRepo)) {
    let repo = git2::Repository::open(&r.root).expect("open");
    let snapshot = Snapshot::take(&repo).expect("snapshot");
    assert_eq!(
        show(&raw(snapshot.changes())),
        show(&git_status(r, false)),
        "{name}: before the change"
    );
    change(r);
    let repo = git2::Repository::open(&r.root).expect("open");
    let want_all = git_status(r, true);
    let want_normal = git_status(r, false);
    let files = git::dirty_paths(&repo, true).expect("walk");
    let folders = git::dirty_paths(&repo, false).expect("walk");
    let since = snapshot.changes_since(&repo).expect("walk");
    assert_eq!(show(&raw(&files)), show(&want_all), "{name}: -uall");
    assert_eq!(show(&raw(&folders)), show(&want_normal), "{name}: -unormal");
    assert_eq!(
        show(&raw(&since)),
        show(&want_all),
        "{name}: since the snapshot"
    );
}

/// A repo with a bit of everything: hidden, executable, symlinked, non-UTF-8, nested and
/// ignored (by every kind of rule) files, an empty folder and a tracked file inside an ignored
/// folder.
fn varied() -> TestRepo {
    let r = TestRepo::with_files(&[
        ("a.txt", "alpha\n"),
        ("b.txt", "bravo\n"),
        (".hidden", "tracked and hidden\n"),
        ("src/m/x.rs", "fn x() {}\n"),
        ("src/m/y.rs", "fn y() {}\n"),
        ("src/n/z.rs", "fn z() {}\n"),
        ("deep/er/est/f.txt", "deep\n"),
        ("logs/.gitignore", "*.tmp\n"),
        ("logs/readme.txt", "logs\n"),
        (".gitignore", "*.log\n!keep.log\nbuild/\nlinkdir/\n"),
    ]);
    r.write("exec.sh", "#!/bin/sh\n");
    std::fs::set_permissions(
        r.root.join("exec.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    std::os::unix::fs::symlink("a.txt", r.root.join("link")).expect("symlink");
    std::os::unix::fs::symlink("src", r.root.join("dirlink")).expect("symlink");
    std::fs::write(r.root.join(OsStr::from_bytes(b"bytes-\xff.txt")), "raw\n").expect("write");
    r.write("build/forced.txt", "tracked in an ignored folder\n");
    r.git(&["add", "-A"]);
    r.git(&["add", "-f", "build/forced.txt"]);
    r.git(&["commit", "-q", "-m", "more"]);
    std::fs::write(r.root.join(".git/info/exclude"), "*.excl\n").expect("exclude");
    let global = r.outside.join("global-ignore");
    std::fs::write(&global, "*.glob\n").expect("write");
    r.git(&[
        "config",
        "core.excludesFile",
        global.to_str().expect("utf-8 temp path"),
    ]);
    for (path, text) in [
        ("x.log", "ignored\n"),
        ("build/out.o", "ignored\n"),
        ("logs/t.tmp", "ignored\n"),
        ("a.excl", "ignored\n"),
        ("a.glob", "ignored\n"),
        ("onlyignored/z.log", "ignored\n"),
    ] {
        r.write(path, text);
    }
    std::fs::create_dir_all(r.root.join("emptydir")).expect("mkdir");
    r
}

/// One way a tree can change.
type Change = Box<dyn FnOnce(&TestRepo)>;

fn sh(r: &TestRepo, script: &str) {
    let status = std::process::Command::new("sh")
        .current_dir(&r.root)
        .args(["-c", script])
        .status()
        .expect("sh runs");
    assert!(status.success(), "{script}");
}

#[test]
fn the_status_walks_agree_with_git_status() {
    let cases: Vec<(&str, Change)> = vec![
        ("nothing", Box::new(|_| {})),
        (
            "hidden untracked file in an existing folder",
            Box::new(|r| r.write("src/m/.new", "x\n")),
        ),
        (
            "file in a brand-new nested folder",
            Box::new(|r| r.write("src/m/new/deeper/f.txt", "x\n")),
        ),
        (
            "ignored files by every rule, and one a rule re-includes",
            Box::new(|r| {
                for p in [
                    "src/m/x.log",
                    "logs/a.tmp",
                    "build/new.o",
                    "q.excl",
                    "src/q.glob",
                    "newbuild/build/o.o",
                    "keep.log",
                ] {
                    r.write(p, "x\n");
                }
            }),
        ),
        (
            "a tracked file modified keeping its size and mtime",
            Box::new(|r| {
                sh(
                    r,
                    "cp -p b.txt ../ref && printf 'BRAVO\\n' > b.txt && touch -r ../ref b.txt",
                )
            }),
        ),
        (
            "a file and a whole folder deleted",
            Box::new(|r| sh(r, "rm a.txt && rm -r deep")),
        ),
        (
            "a folder replaced by a symlink to another",
            Box::new(|r| sh(r, "rm -r src/n && ln -s m src/n")),
        ),
        (
            "a file replaced by a folder",
            Box::new(|r| sh(r, "rm a.txt && mkdir a.txt && echo x > a.txt/inner.txt")),
        ),
        (
            "executable bit and symlink target changed",
            Box::new(|r| sh(r, "chmod +x a.txt && ln -sfn b.txt link")),
        ),
        (
            "untracked folders: only ignored files, empty, a nested repository",
            Box::new(|r| {
                r.write("newdir/x.log", "x\n");
                std::fs::create_dir_all(r.root.join("empty2/inner")).expect("mkdir");
                sh(r, "git init -q nested && echo x > nested/f.txt");
            }),
        ),
        (
            "non-UTF-8 names",
            Box::new(|r| {
                std::fs::write(r.root.join(OsStr::from_bytes(b"src/new-\xfe.txt")), "x\n")
                    .expect("write");
                std::fs::write(r.root.join(OsStr::from_bytes(b"bytes-\xff.txt")), "RAW\n")
                    .expect("write");
            }),
        ),
        (
            "an untracked symlink named like an ignored folder",
            Box::new(|r| sh(r, "ln -s src linkdir && ln -s nowhere dangling")),
        ),
        (
            "a symlink to a folder replaced by the folder",
            Box::new(|r| sh(r, "rm dirlink && mkdir dirlink && echo x > dirlink/f")),
        ),
    ];
    for (name, change) in cases {
        let r = varied();
        agrees_with_git(&r, name, change);
    }
}

#[test]
fn sparse_checkouts_and_assume_unchanged_entries_are_not_changes() {
    let r = varied();
    r.git(&["sparse-checkout", "set", "--no-cone", "/*", "!/deep/"]);
    assert!(!r.root.join("deep").exists());
    r.git(&["update-index", "--assume-unchanged", "b.txt"]);
    agrees_with_git(&r, "sparse", |r| {
        r.write("b.txt", "changed but assumed unchanged\n");
        r.write("deep/er/untracked.txt", "x\n");
        r.write("src/m/new.txt", "x\n");
    });
}

#[test]
fn submodules_are_walked_as_git_does() {
    let r = varied();
    let sub = TestRepo::with_files(&[("s.txt", "sub\n")]);
    r.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        sub.root.to_str().expect("utf-8 temp path"),
        "sub",
    ]);
    r.git(&["commit", "-q", "-m", "submodule"]);
    agrees_with_git(&r, "untracked file in a submodule", |r| {
        r.write("sub/new.txt", "x\n")
    });
    agrees_with_git(&r, "submodule file changed", |r| {
        r.write("sub/s.txt", "changed\n")
    });
}

#[test]
fn a_folder_of_thousands_of_files_is_walked_in_parallel_chunks() {
    let r = TestRepo::with_files(&[("README", "big\n")]);
    for i in 0..5000 {
        r.write(&format!("many/f{i:05}.txt"), &format!("{i}\n"));
    }
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "many"]);
    agrees_with_git(&r, "thousands", |r| {
        r.write("many/f02500.txt", "2501\n");
        r.write("many/new.txt", "x\n");
        std::fs::remove_file(r.root.join("many/f04999.txt")).expect("rm");
    });
}

/// A run whose check leaves `script`'s effects behind: FAIL, and the repo byte for byte as
/// before.
fn rolled_back(r: &TestRepo, script: &str) {
    const APP: [&str; 3] = ["one", "two", "three"];
    let before = r.snapshot();
    let cmd = format!("sh -c '{script}; false'");
    let wo = r.work_order(basic_order(&[&cmd]));
    let replay = r.replay(
        "rp",
        &[(
            "1.json",
            proposal(&diff_replace("app.txt", &APP, "two", "TWO"), "w"),
        )],
    );
    let out = r.run_replay(&wo, &replay, &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(r.snapshot(), before, "{script}");
    assert_eq!(r.git(&["status", "--porcelain"]), "", "{script}");
}

fn folders_repo() -> TestRepo {
    let r = TestRepo::with_files(&[
        ("app.txt", "one\ntwo\nthree\n"),
        ("other.txt", "keep me\n"),
        (".gitignore", ".env\nbuild/\n"),
        ("src/lib.rs", "pub fn f() {}\n"),
        ("src/util/mod.rs", "pub fn g() {}\n"),
    ]);
    r.git(&["config", "factory.verify", "true"]);
    r.write(".env", "TOKEN=keep\n");
    r
}

#[test]
fn a_file_created_in_an_existing_folder_within_the_preflight_second_is_rolled_back() {
    // The whole run takes well under a second: the folder's new mtime falls in the same second
    // (and often the same timestamp tick) as the preflight walk that saw it.
    let r = folders_repo();
    rolled_back(&r, "echo x > src/new.rs; echo y > src/util/.hidden");
}

#[test]
fn a_file_created_in_a_brand_new_nested_folder_is_rolled_back() {
    let r = folders_repo();
    rolled_back(
        &r,
        "mkdir -p src/util/a/b/c && echo x > src/util/a/b/c/new.rs",
    );
}

#[test]
fn a_tracked_file_modified_keeping_size_and_mtime_is_rolled_back() {
    let r = folders_repo();
    // Same size, same mtime to the nanosecond: only the ctime and the content tell.
    rolled_back(
        &r,
        "cp -p src/lib.rs ../lib.ref && printf \"pub fn F() {}\\n\" > src/lib.rs && touch -r ../lib.ref src/lib.rs",
    );
}

#[test]
fn deleted_files_and_folders_are_rolled_back() {
    let r = folders_repo();
    rolled_back(&r, "rm other.txt && rm -r src/util");
}

#[test]
fn a_folder_replaced_by_a_symlink_is_rolled_back() {
    let r = folders_repo();
    rolled_back(&r, "rm -r src/util && ln -s .. src/util");
}

#[test]
fn ignored_files_a_command_makes_stay_and_non_utf8_names_are_rolled_back() {
    let r = folders_repo();
    let name = OsStr::from_bytes(b"src/caf\xe9.rs");
    std::fs::write(r.root.join(name), "latin-1 name\n").expect("write");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "latin-1"]);
    rolled_back(
        &r,
        "printf \"changed\\n\" > \"$(printf \"src/caf\\351.rs\")\"; echo x > \"$(printf \"new-\\376.txt\")\"",
    );
    assert!(Path::new(&r.root.join(name)).exists());
    // A file the ignore rules cover is the command's business, not the rollback's.
    let before_ignored = r.read(".env");
    let wo = r.work_order(basic_order(&[
        "sh -c 'mkdir -p build && echo x > build/cache.o; false'",
    ]));
    let replay = r.replay("rp-ignored", &[("1.json", proposal("", "nothing"))]);
    let out = r.run_replay(&wo, &replay, &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(r.read("build/cache.o").as_deref(), Some("x\n"));
    assert_eq!(r.read(".env"), before_ignored);
}

#[test]
fn the_preflight_refusal_names_hidden_untracked_and_deleted_paths() {
    let r = folders_repo();
    r.write("src/util/.hidden", "x\n");
    r.write("fresh/deeper/new.txt", "x\n");
    std::fs::remove_file(r.root.join("other.txt")).expect("rm");
    let wo = r.work_order(basic_order(&["true"]));
    let replay = r.replay("rp", &[("1.json", proposal("", "nothing"))]);
    let out = r.run_replay(&wo, &replay, &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert!(err.contains("deleted: other.txt"), "{err}");
    assert!(err.contains("untracked: fresh/\n"), "{err}");
    assert!(err.contains("untracked: src/util/.hidden"), "{err}");
    assert!(!err.contains(".env"), "{err}");
}

#[test]
fn an_index_with_git_s_untracked_cache_and_fsmonitor_settings_is_walked_the_same() {
    let r = varied();
    r.git(&["config", "core.untrackedCache", "true"]);
    r.git(&["update-index", "--untracked-cache"]);
    r.git(&["status", "--porcelain"]);
    let index = std::fs::read(r.root.join(".git/index")).expect("index");
    assert!(
        index.windows(4).any(|w| w == b"UNTR"),
        "git wrote its untracked cache"
    );
    agrees_with_git(&r, "untracked cache", |r| {
        r.write("src/m/new.txt", "x\n");
        r.write("fresh/dir/f.txt", "x\n");
        sh(r, "rm src/n/z.rs");
    });
}

#[test]
fn untracked_files_seen_by_the_snapshot_are_still_reported_from_unchanged_folders() {
    let r = varied();
    r.write("src/m/pre.txt", "untracked before\n");
    r.write("pre/dir/f.txt", "untracked before\n");
    agrees_with_git(&r, "untracked before the snapshot", |r| {
        r.write("b.txt", "changed elsewhere\n");
        r.write("pre/dir/g.txt", "inside an untracked folder\n");
    });
}

/// Every folder of the work tree (not `.git`) dated an hour back, so a walk trusts its stamp.
fn age_folders(r: &TestRepo) {
    sh(
        r,
        "find . -path ./.git -prune -o -type d -exec touch -d '1 hour ago' {} +",
    );
}

/// A failing one-attempt run (nothing delivered), whose preflight keeps the walk's stamps.
fn failing_run(r: &TestRepo, id: &str) -> std::process::Output {
    let wo = r.work_order(serde_json::json!({
        "id": id, "title": "t", "intent": "i",
        "allowed_files": ["app.txt"],
        "acceptance_commands": ["false"],
    }));
    let patch = diff_replace("app.txt", &["one", "two", "three"], "two", "TWO");
    let replay = r.replay(&format!("rp-{id}"), &[("1.json", proposal(&patch, "s"))]);
    r.run_replay(&wo, &replay, &["--max-attempts", "1"])
}

/// The stamps a run's preflight keeps for the next (`.git/factory/status-cache`) never hide a
/// change no folder stamp shows: an ignore rule outside the tree rewritten (`info/exclude`,
/// the global excludes file) or an ignored `.gitignore` edited in place makes files
/// untracked in folders whose entries did not change — the next run still refuses, naming
/// them, as git does.
#[test]
fn the_walk_kept_between_runs_never_hides_a_file_a_changed_rule_uncovers() {
    type Uncover = fn(&TestRepo);
    let cases: Vec<(&str, &str, Uncover)> = vec![
        ("info/exclude", "a/keep.excl", |r| {
            std::fs::write(r.root.join(".git/info/exclude"), "b/.gitignore\n").expect("write")
        }),
        ("global excludes", "a/keep.glob", |r| {
            // The global file is a link, as dotfile managers make it: only its target changes.
            std::fs::write(r.outside.join("dotfiles-ignore"), "").expect("write")
        }),
        ("an ignored .gitignore edited in place", "b/keep.o", |r| {
            // Same file (O_TRUNC): the folder's entries, and so its stamp, do not change.
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(r.root.join("b/.gitignore"))
                .expect("open");
            std::io::Write::write_all(&mut f, b"# nothing\n").expect("write");
        }),
        (
            "a tracked .gitignore rewritten at its size and mtime",
            "c/keep.tmp",
            |r| {
                // With core.trustctime off the stat check cannot see it; its change time moved.
                let path = r.root.join("c/.gitignore");
                let mtime = std::fs::metadata(&path)
                    .expect("meta")
                    .modified()
                    .expect("mtime");
                std::fs::write(&path, "*.tmx\n").expect("same size");
                let file = std::fs::File::options()
                    .write(true)
                    .open(&path)
                    .expect("open");
                file.set_modified(mtime).expect("mtime put back");
            },
        ),
    ];
    for (name, uncovered, uncover) in cases {
        let r = TestRepo::with_files(&[
            ("app.txt", "one\ntwo\nthree\n"),
            ("a/tracked.txt", "a\n"),
            ("b/tracked.txt", "b\n"),
            ("c/.gitignore", "*.tmp\n"),
        ]);
        r.git(&["config", "factory.verify", "true"]);
        r.git(&["config", "core.trustctime", "false"]);
        std::fs::write(r.root.join(".git/info/exclude"), "*.excl\nb/.gitignore\n").expect("write");
        let target = r.outside.join("dotfiles-ignore");
        std::fs::write(&target, "*.glob\n").expect("write");
        let global = r.outside.join("global-ignore");
        std::os::unix::fs::symlink(&target, &global).expect("link");
        r.git(&[
            "config",
            "core.excludesFile",
            global.to_str().expect("utf-8"),
        ]);
        r.write("b/.gitignore", "*.o\n");
        for path in ["a/keep.excl", "a/keep.glob", "b/keep.o", "c/keep.tmp"] {
            r.write(path, "kept\n");
        }
        age_folders(&r);
        let first = failing_run(&r, "first");
        assert_eq!(
            first.status.code(),
            Some(1),
            "{name}: {}",
            stderr_of(&first)
        );
        assert!(
            r.root.join(".git/factory/status-cache").is_file(),
            "{name}: the preflight kept its walk"
        );
        // The first run's own writes are an hour in the past too, so only the rule can tell.
        age_folders(&r);
        let again = failing_run(&r, "again");
        assert_eq!(
            again.status.code(),
            Some(1),
            "{name}: {}",
            stderr_of(&again)
        );
        uncover(&r);
        let refused = failing_run(&r, "refused");
        assert_eq!(
            refused.status.code(),
            Some(2),
            "{name}: {}",
            stderr_of(&refused)
        );
        assert!(
            stderr_of(&refused).contains(uncovered),
            "{name}: {}",
            stderr_of(&refused)
        );
        assert_eq!(r.read(uncovered).as_deref(), Some("kept\n"), "{name}");
    }
}

/// A file made in a folder after a run, and a cache file torn or forged, change nothing of
/// what the next preflight finds.
#[test]
fn the_walk_kept_between_runs_sees_new_files_and_survives_a_torn_cache() {
    let r = TestRepo::with_files(&[("app.txt", "one\ntwo\nthree\n"), ("a/t.txt", "a\n")]);
    r.git(&["config", "factory.verify", "true"]);
    age_folders(&r);
    assert_eq!(failing_run(&r, "one").status.code(), Some(1));
    r.write("a/new.txt", "new\n");
    let refused = failing_run(&r, "two");
    assert_eq!(refused.status.code(), Some(2), "{}", stderr_of(&refused));
    assert!(
        stderr_of(&refused).contains("a/new.txt"),
        "{}",
        stderr_of(&refused)
    );
    std::fs::remove_file(r.root.join("a/new.txt")).expect("rm");
    let cache = r.root.join(".git/factory/status-cache");
    let bytes = std::fs::read(&cache).expect("a kept walk");
    std::fs::write(&cache, &bytes[..bytes.len() / 2]).expect("tear");
    age_folders(&r);
    r.write("a/other.txt", "other\n");
    sh(&r, "touch -d '1 hour ago' a");
    let refused = failing_run(&r, "three");
    assert_eq!(refused.status.code(), Some(2), "{}", stderr_of(&refused));
    assert!(
        stderr_of(&refused).contains("a/other.txt"),
        "{}",
        stderr_of(&refused)
    );
}

/// With `feature.manyFiles` git writes the index without its checksum (`index.skipHash`):
/// a file committed, then un-committed by `git reset HEAD~` and edited, is untracked in a
/// folder whose entries did not change; the next run still refuses it (the kept walk is tied
/// to the index's bytes, not to its zeroed trailer), and the file is kept.
#[test]
fn the_walk_kept_between_runs_knows_an_index_written_without_its_checksum() {
    let r = TestRepo::with_files(&[("app.txt", "one\n"), ("z/f.txt", "one\ntwo\nthree\n")]);
    r.git(&["config", "factory.verify", "true"]);
    r.git(&["config", "feature.manyFiles", "true"]);
    r.write("draft.md", "draft v1\n");
    r.git(&["add", "draft.md"]);
    r.git(&["commit", "-qm", "add draft"]);
    // Runs whose change is in z/, so the root folder's entries never change.
    let run = |id: &str| {
        let wo = r.work_order(serde_json::json!({
            "id": id, "title": "t", "intent": "i",
            "allowed_files": ["z/f.txt"],
            "acceptance_commands": ["false"],
        }));
        let patch = diff_replace("z/f.txt", &["one", "two", "three"], "two", "TWO");
        let replay = r.replay(&format!("rp-{id}"), &[("1.json", proposal(&patch, "s"))]);
        r.run_replay(&wo, &replay, &["--max-attempts", "1"])
    };
    age_folders(&r);
    assert_eq!(run("one").status.code(), Some(1));
    r.git(&["reset", "-q", "HEAD~"]);
    std::fs::write(r.root.join("draft.md"), "draft v1\nv2, nowhere in git\n").expect("write");
    let refused = run("two");
    assert_eq!(refused.status.code(), Some(2), "{}", stderr_of(&refused));
    assert!(
        stderr_of(&refused).contains("draft.md"),
        "{}",
        stderr_of(&refused)
    );
    assert_eq!(
        r.read("draft.md").as_deref(),
        Some("draft v1\nv2, nowhere in git\n")
    );
}

/// A name that is not UTF-8 is named in the refusal with its bytes shown (`\xff`), never
/// with a replacement character that two different names would share.
#[test]
fn the_preflight_refusal_shows_a_name_that_is_not_utf8_byte_for_byte() {
    let r = TestRepo::simple();
    let dir = r.root.join(OsStr::from_bytes(b"d\xffir"));
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(dir.join("mine"), "mine\n").expect("write");
    let out = failing_run(&r, "nonutf8");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(err.contains("untracked: d\\xffir/"), "{err}");
    assert!(!err.contains('\u{fffd}'), "{err}");
    assert!(dir.join("mine").is_file());
}

/// A `.gitignore` made after the last run, that ignores itself (so the tree still looks
/// clean) and un-ignores files in the folders below it whose listings the kept walk would
/// reuse: the next run lists every folder again, refuses the tree naming the file, and keeps
/// it.
#[test]
fn a_new_self_ignoring_gitignore_never_hides_a_file_it_uncovers_below() {
    let r = TestRepo::with_files(&[
        ("app.txt", "one\ntwo\nthree\n"),
        ("src/a.txt", "a\n"),
        ("src/sub/s.txt", "s\n"),
        (".gitignore", "*.log\n"),
    ]);
    r.git(&["config", "factory.verify", "true"]);
    r.write("src/sub/keep.log", "precious\n");
    age_folders(&r);
    assert_eq!(failing_run(&r, "one").status.code(), Some(1));
    // src/sub is left as the first run saw it (a stamp older than its walk); src is listed
    // again, as the new file in it moves its time.
    r.write("src/.gitignore", ".gitignore\n!*.log\n");
    sh(&r, "touch -d '1 hour ago' src/.gitignore");
    let refused = failing_run(&r, "two");
    assert_eq!(refused.status.code(), Some(2), "{}", stderr_of(&refused));
    assert!(
        stderr_of(&refused).contains("src/sub/keep.log"),
        "{}",
        stderr_of(&refused)
    );
    assert_eq!(r.read("src/sub/keep.log").as_deref(), Some("precious\n"));
}

/// With `XDG_CONFIG_HOME` set but empty, git and libgit2 disagree on which global excludes
/// file applies: no kept walk is trusted then, and a file the other reading would ignore is
/// never removed by the rollback.
#[test]
fn an_empty_xdg_config_home_means_a_full_walk_and_nothing_removed() {
    let r = TestRepo::with_files(&[("app.txt", "one\ntwo\nthree\n"), ("src/sub/s.txt", "s\n")]);
    r.git(&["config", "factory.verify", "true"]);
    let global = r.home.join(".config/git/ignore");
    std::fs::create_dir_all(global.parent().expect("parent")).expect("mkdir");
    std::fs::write(&global, "*.dat\n").expect("write");
    r.write("src/sub/keep.dat", "precious\n");
    age_folders(&r);
    assert_eq!(failing_run(&r, "one").status.code(), Some(1));
    let wo = r.work_order(serde_json::json!({
        "id": "two", "title": "t", "intent": "i",
        "allowed_files": ["app.txt"],
        "acceptance_commands": ["sh -c 'echo junk > src/sub/junk.txt; exit 1'"],
    }));
    let patch = diff_replace("app.txt", &["one", "two", "three"], "two", "TWO");
    let replay = r.replay("rp-xdg", &[("1.json", proposal(&patch, "s"))]);
    let out = r
        .replay_command(&wo, &replay, &["--max-attempts", "1"])
        .env("XDG_CONFIG_HOME", "")
        .output()
        .expect("runs");
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(r.read("src/sub/keep.dat").as_deref(), Some("precious\n"));
    assert!(!r.root.join("src/sub/junk.txt").exists());
}

/// A check that changes an ignore rule the restore does not own (the user's global excludes
/// file) un-ignores a file that was there before the run: the rollback keeps it, as it keeps
/// everything that existed before the run.
#[test]
fn a_file_from_before_the_run_survives_a_check_that_un_ignores_it() {
    let r = TestRepo::with_files(&[("app.txt", "one\ntwo\nthree\n"), ("src/s.txt", "s\n")]);
    r.git(&["config", "factory.verify", "true"]);
    let global = r.home.join(".config/git/ignore");
    std::fs::create_dir_all(global.parent().expect("parent")).expect("mkdir");
    std::fs::write(&global, "*.dat\n").expect("write");
    r.write("src/keep.dat", "precious\n");
    let wo = r.work_order(serde_json::json!({
        "id": "unignore", "title": "t", "intent": "i",
        "allowed_files": ["app.txt"],
        "acceptance_commands": ["sh -c 'printf \"\" > \"$HOME/.config/git/ignore\"; echo junk > src/junk.txt; exit 1'"],
    }));
    let patch = diff_replace("app.txt", &["one", "two", "three"], "two", "TWO");
    let replay = r.replay("rp-unignore", &[("1.json", proposal(&patch, "s"))]);
    let out = r.run_replay(&wo, &replay, &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(r.read("src/keep.dat").as_deref(), Some("precious\n"));
    assert!(
        !r.root.join("src/junk.txt").exists(),
        "what the check made goes"
    );
    assert_eq!(r.read("app.txt").as_deref(), Some("one\ntwo\nthree\n"));
}
