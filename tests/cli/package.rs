//! The crates.io package (`Cargo.toml`'s `include`): `cargo package --list` holds exactly what
//! builds and installs the crate — build.rs, every file under src/, man/ and completions/, the
//! README and licences — and nothing else (no tests, fixtures, benches, CI tools, examples or
//! scripts). `.ci/run` also runs `cargo publish --dry-run`, which builds from that list.

use std::collections::BTreeSet;
use std::path::Path;

fn top() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The package's folders, by name: a new module, page or completion needs no edit anywhere.
const FOLDERS: [&str; 3] = ["src", "man", "completions"];
/// Its single files, and the two cargo writes into every package.
const FILES: [&str; 8] = [
    "build.rs",
    "Cargo.toml",
    "Cargo.lock",
    "README.md",
    "LICENSE-MIT",
    "LICENSE-APACHE",
    "Cargo.toml.orig",
    ".cargo_vcs_info.json",
];

fn run(program: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(program)
        .args(args)
        .current_dir(top())
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf8")
}

/// Every path `include_str!`/`include_bytes!` in `src/` reads, relative to the package.
fn included_by_macros() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let listed = run("git", &["ls-files", "--", "src"]);
    for file in listed.lines().filter(|f| f.ends_with(".rs")) {
        let text = std::fs::read_to_string(top().join(file)).expect("read");
        for mac in ["include_str!(\"", "include_bytes!(\""] {
            for (at, _) in text.match_indices(mac) {
                let rest = &text[at + mac.len()..];
                let Some(end) = rest.find('"') else { continue };
                let dir = Path::new(file).parent().expect("a folder");
                let mut parts: Vec<&str> = dir.to_str().expect("utf8").split('/').collect();
                for part in rest[..end].split('/') {
                    match part {
                        ".." => {
                            parts.pop();
                        }
                        "." | "" => {}
                        p => parts.push(p),
                    }
                }
                found.insert(parts.join("/"));
            }
        }
    }
    found
}

#[test]
fn the_package_holds_what_builds_and_installs_the_crate_and_nothing_else() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    // --allow-dirty: a test may run on a work tree with changes; the list is the same rule.
    let listed: BTreeSet<String> = run(&cargo, &["package", "--list", "--locked", "--allow-dirty"])
        .lines()
        .map(str::to_string)
        .collect();

    let mut args = vec![
        "ls-files",
        "--cached",
        "--others",
        "--exclude-standard",
        "--",
    ];
    args.extend(FOLDERS);
    let mut want: BTreeSet<String> = run("git", &args).lines().map(str::to_string).collect();
    // A tracked file deleted in the work tree is not packaged.
    want.retain(|f| top().join(f).is_file());
    want.extend(FILES.iter().map(|f| f.to_string()));
    // Packaged from a checkout without git's record of the commit, cargo writes no vcs info.
    if !listed.contains(".cargo_vcs_info.json") {
        want.remove(".cargo_vcs_info.json");
    }

    let missing: Vec<_> = want.difference(&listed).collect();
    let unexpected: Vec<_> = listed.difference(&want).collect();
    assert!(
        missing.is_empty() && unexpected.is_empty(),
        "cargo package --list and Cargo.toml's include disagree\nmissing: {missing:?}\nunexpected: {unexpected:?}"
    );
    for needed in included_by_macros() {
        assert!(listed.contains(&needed), "src reads {needed}, not packaged");
    }
    for must in [
        "src/main.rs",
        "man/man1/git-factory.1",
        "completions/git-factory.bash",
    ] {
        assert!(listed.contains(must), "{must}");
    }
    for never in [
        "tests/",
        "benches/",
        ".ci/",
        ".github/",
        "examples/",
        "scripts/",
        "target/",
    ] {
        assert!(
            !listed.iter().any(|f| f.starts_with(never)),
            "{never} is not part of the crate"
        );
    }
}
