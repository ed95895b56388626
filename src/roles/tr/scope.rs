//! TR scope rules (SPEC §3.5): which paths a change may touch.
//!
//! The allow-list is matched byte for byte after normalisation, so a case or Unicode variant
//! of an allowed path is simply another path. The always-refused rules hold with or without
//! an allow-list (the `patch` plumbing has none).

use super::diff::FilePatch;
use super::protect::Protected;
use crate::workorder::normalise_path;
use std::path::Path;

const MODE_SYMLINK: u32 = 0o120000;
const MODE_GITLINK: u32 = 0o160000;

/// Why a change was refused before anything was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub path: String,
    pub reason: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

fn violation(path: &str, reason: impl Into<String>) -> Violation {
    Violation {
        path: path.to_string(),
        reason: reason.into(),
    }
}

/// Normalises one path the diff names and applies every path rule to it. A protected path
/// is refused first, so the reason says so whether or not it was allowed.
pub fn check_path(
    raw: &str,
    allowed: Option<&[String]>,
    protected: Option<&Protected>,
    root: &Path,
) -> Result<String, Violation> {
    let path = normalise_path(raw).map_err(|why| violation(raw, why))?;
    if let Some(why) = protected.and_then(|p| p.why(&path)) {
        return Err(violation(
            &path,
            format!("protected ({why}); the model may not edit the checks that judge it"),
        ));
    }
    if let Some(allowed) = allowed {
        if !allowed.iter().any(|a| a == &path) {
            return Err(violation(&path, "not in allowed_files"));
        }
    }
    through_symlink(&path, root)?;
    Ok(path)
}

/// Refuses a path that is, or lies below, a symbolic link in the work tree: writing there
/// would land wherever the link points, possibly outside the repo.
fn through_symlink(path: &str, root: &Path) -> Result<(), Violation> {
    let mut cur = root.to_path_buf();
    for part in path.split('/') {
        cur.push(part);
        match std::fs::symlink_metadata(&cur) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(violation(
                    path,
                    "goes through a symbolic link in the work tree",
                ))
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

/// Checks every file section; returns the normalised touched paths, sorted and unique.
pub fn check_patches(
    patches: &mut [FilePatch],
    allowed: Option<&[String]>,
    protected: Option<&Protected>,
    root: &Path,
    repo: Option<&git2::Repository>,
) -> Result<Vec<String>, Violation> {
    let mut touched: Vec<String> = Vec::new();
    let mut targets: Vec<String> = Vec::new();
    for patch in patches.iter_mut() {
        let name = patch.target().to_string();
        if patch.binary {
            return Err(violation(&name, "binary patches are refused"));
        }
        for mode in [patch.old_mode, patch.new_mode].into_iter().flatten() {
            if mode == MODE_SYMLINK {
                return Err(violation(&name, "symbolic links (mode 120000) are refused"));
            }
            if mode == MODE_GITLINK {
                return Err(violation(
                    &name,
                    "submodule changes (mode 160000) are refused",
                ));
            }
            if mode != 0o100644 && mode != 0o100755 {
                return Err(violation(&name, format!("unsupported file mode {mode:o}")));
            }
        }
        if let Some(p) = patch.old_path.take() {
            patch.old_path = Some(check_path(&p, allowed, protected, root)?);
        }
        if let Some(p) = patch.new_path.take() {
            patch.new_path = Some(check_path(&p, allowed, protected, root)?);
        }
        // A path may be the result of one section only; a copy's source may be read by others.
        let mut written: Vec<String> = patch.new_path.iter().cloned().collect();
        if !patch.is_copy && patch.old_path != patch.new_path {
            written.extend(patch.old_path.iter().cloned());
        }
        for p in written {
            if targets.contains(&p) {
                return Err(violation(
                    &p,
                    "touched twice in one change (conflicting sections)",
                ));
            }
            targets.push(p);
        }
        for p in patch.touched_paths() {
            if !touched.iter().any(|t| t == p) {
                touched.push(p.to_string());
            }
        }
    }
    touched.sort();
    check_repo_rules(&touched, root, repo)?;
    Ok(touched)
}

/// The always-refused rules that need the repository: a path inside a submodule (or a nested
/// repository), and an untracked git-ignored path (SPEC §3.5) — neither the run record nor a
/// `--commit` could carry such a change faithfully. Without a repository there is nothing to
/// check.
pub fn check_repo_rules(
    paths: &[String],
    root: &Path,
    repo: Option<&git2::Repository>,
) -> Result<(), Violation> {
    let Some(repo) = crate::git::given_or_opened(repo, root) else {
        return Ok(());
    };
    let Some(index) = crate::git::current_index(&repo) else {
        return Ok(());
    };
    for path in paths {
        inside_submodule(path, root, &index)?;
        untracked_ignored(path, &repo, &index)?;
    }
    Ok(())
}

/// Refuses a path at or below a submodule (a gitlink in the index) or a nested repository.
fn inside_submodule(path: &str, root: &Path, index: &git2::Index) -> Result<(), Violation> {
    let mut prefix = String::new();
    for part in path.split('/') {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        let gitlink = index
            .get_path(Path::new(&prefix), 0)
            .is_some_and(|e| e.mode == MODE_GITLINK);
        let nested =
            prefix != path && std::fs::symlink_metadata(root.join(&prefix).join(".git")).is_ok();
        if gitlink || nested {
            return Err(violation(
                path,
                format!(
                    "lies inside the submodule {prefix} (writes inside a submodule are refused)"
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses creating, changing or deleting a file git does not track and ignores (a `.env`).
fn untracked_ignored(
    path: &str,
    repo: &git2::Repository,
    index: &git2::Index,
) -> Result<(), Violation> {
    if index.get_path(Path::new(path), 0).is_some() {
        return Ok(());
    }
    if repo.is_path_ignored(Path::new(path)).unwrap_or(false) {
        return Err(violation(
            path,
            "is ignored by git and not tracked (a change to it could not be recorded or committed)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roles::tr::diff::{parse, Strip};

    fn check(diff: &str, allowed: &[&str]) -> Result<Vec<String>, Violation> {
        let dir = tempfile::tempdir().expect("tempdir");
        let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
        let mut p = parse(diff.as_bytes(), Strip::Auto).expect("parses");
        check_patches(&mut p, Some(&allowed), None, dir.path(), None)
    }

    #[test]
    fn outside_and_variants_are_refused() {
        let d = "--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(check(d, &["a.py"]).is_err());
        assert!(check(d, &["B.py"]).is_err());
        assert_eq!(check(d, &["b.py"]).expect("allowed"), vec!["b.py"]);
        let d = "--- a/caf\u{e9}.py\n+++ b/caf\u{e9}.py\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(check(d, &["cafe\u{301}.py"]).is_err());
    }

    #[test]
    fn rename_target_outside_is_refused() {
        let d = "diff --git a/a b/z\nrename from a\nrename to z\n";
        let e = check(d, &["a"]).expect_err("refused");
        assert_eq!(e.path, "z");
    }

    #[test]
    fn always_refused_whatever_the_allow_list() {
        let sym = "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+/etc/passwd\n";
        assert!(check(sym, &["l"]).is_err());
        let git = "--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(check(git, &[".git/config"]).is_err());
        let up = "--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(check(up, &["../x"]).is_err());
        let abs = "--- /tmp/x\n+++ /tmp/x\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(check(abs, &["tmp/x"]).is_err());
        let sub = "diff --git a/m b/m\nnew file mode 160000\n--- /dev/null\n+++ b/m\n@@ -0,0 +1 @@\n+Subproject commit 1\n";
        assert!(check(sub, &["m"]).is_err());
    }

    #[test]
    fn protected_paths_are_refused_even_when_allowed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let protected = Protected::from_patterns(&["tests/**"]);
        let allowed = vec!["tests/t.py".to_string(), "a.py".to_string()];
        let d = "diff --git a/a.py b/tests/t.py\nrename from a.py\nrename to tests/t.py\n";
        let mut p = parse(d.as_bytes(), Strip::Auto).expect("parses");
        let e = check_patches(&mut p, Some(&allowed), Some(&protected), dir.path(), None)
            .expect_err("refused");
        assert_eq!(e.path, "tests/t.py");
        assert!(
            e.reason.starts_with("protected (it matches"),
            "{}",
            e.reason
        );
        let e = check_path(
            "./tests//t.py",
            Some(&allowed),
            Some(&protected),
            dir.path(),
        )
        .expect_err("refused");
        assert!(e.reason.starts_with("protected"), "{}", e.reason);
        // Not allowed and protected: the reason is that it is protected.
        let e = check_path(
            "tests/other.py",
            Some(&allowed),
            Some(&protected),
            dir.path(),
        )
        .expect_err("refused");
        assert!(e.reason.starts_with("protected"), "{}", e.reason);
        assert!(check_path("a.py", Some(&allowed), Some(&protected), dir.path()).is_ok());
    }

    #[test]
    fn symlink_in_the_tree_is_not_written_through() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink("/tmp", dir.path().join("out")).expect("symlink");
        let allowed = vec!["out/x".to_string()];
        assert!(check_path("out/x", Some(&allowed), None, dir.path()).is_err());
    }
}
