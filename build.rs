//! The commit git-factory is built from, and its target, for `git factory --version`
//! (`GIT_FACTORY_COMMIT`, `GIT_FACTORY_TARGET`).
//!
//! Read with git from this package's own checkout only: the crates.io package has no `.git`,
//! and a package unpacked inside some other repository (cargo's registry in a dotfiles repo,
//! `target/package/`) must not report that repository's commit — both say `unknown`. Cargo
//! runs this again only when HEAD or the branch it names moves.

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    // A build started from a git hook has GIT_DIR and friends set for that hook's repository.
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_COMMON_DIR")
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default();
    let dir = Path::new(&dir);
    let mut commit = None;
    // `.git` is a folder in a clone and a file in a linked worktree.
    if dir.join(".git").exists() {
        let top = git(dir, &["rev-parse", "--show-toplevel"]).map(std::path::PathBuf::from);
        let ours = top.is_some_and(|t| t.canonicalize().ok() == dir.canonicalize().ok());
        if ours {
            commit = git(dir, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]);
            let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
            watched.extend(git(dir, &["symbolic-ref", "--quiet", "HEAD"]));
            for name in watched {
                let Some(path) = git(dir, &["rev-parse", "--git-path", &name]) else {
                    continue;
                };
                let path = dir.join(path);
                // A missing file would make cargo run this script on every build.
                if path.exists() {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
            }
        }
    }
    let commit = commit
        .filter(|c| c.len() >= 40 && c.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=GIT_FACTORY_COMMIT={commit}");
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".to_string());
    println!("cargo:rustc-env=GIT_FACTORY_TARGET={target}");
}
