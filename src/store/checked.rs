//! The one door for stored trees and patches (SPEC §7): run records can be fetched from anyone,
//! so a tree or a patch read from one is checked here before anything writes from it — the idea
//! of git's `verify_path`, applied to every entry.

use crate::error::Error;
use git2::{ObjectType, Repository, Tree};
use std::collections::HashSet;

const MODE_TREE: i32 = 0o040000;
const MODE_BLOB: i32 = 0o100644;
const MODE_EXEC: i32 = 0o100755;
const MODE_SYMLINK: i32 = 0o120000;
const MODE_GITLINK: i32 = 0o160000;

/// An entry a stored tree or patch must not carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsafeEntry {
    /// The entry's path inside the tree, shown with control characters escaped.
    pub path: String,
    pub why: String,
}

/// Characters HFS+ ignores when comparing names, so `.g\u{200c}it` is `.git` there.
fn hfs_ignorable(c: char) -> bool {
    matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}')
}

/// Why one path component (a tree entry's name) is unsafe to write, if it is.
pub fn name_fault(name: &[u8]) -> Option<&'static str> {
    match name {
        b"" => return Some("an empty name"),
        b"." => return Some("a \".\" entry"),
        b".." => return Some("a \"..\" entry"),
        _ => {}
    }
    if name.contains(&b'/') {
        return Some("a name containing \"/\"");
    }
    if name.contains(&0) {
        return Some("a name containing NUL");
    }
    // `.git` in any case, and the names NTFS and HFS+ read as `.git`: trailing dots and spaces,
    // the 8.3 short name, stream suffixes, ignorable code points.
    let text: String = String::from_utf8_lossy(name)
        .chars()
        .filter(|c| !hfs_ignorable(*c))
        .collect::<String>()
        .trim_end_matches(['.', ' '])
        .to_ascii_lowercase();
    // `.git::$INDEX_ALLOCATION` and other NTFS stream names open `.git` itself.
    let stream_less = text
        .split(':')
        .next()
        .unwrap_or_default()
        .trim_end_matches(['.', ' ']);
    if text == ".git" || text == "git~1" || (text.contains(':') && stream_less == ".git") {
        return Some("a .git entry");
    }
    None
}

/// Why a slash-separated relative path (from a stored patch) is unsafe, if it is. Empty and
/// `.` components are what normalisation removes (`./a//b` is `a/b`), so they pass here.
pub fn path_fault(path: &[u8]) -> Option<&'static str> {
    if path.first() == Some(&b'/') {
        return Some("an absolute path");
    }
    path.split(|b| *b == b'/')
        .filter(|part| !part.is_empty() && *part != b".")
        .find_map(name_fault)
}

/// Why a symbolic link at `dir` (the slash-separated folder holding it) with `target` points
/// outside the tree or into `.git`, if it does.
fn symlink_fault(dir: &[u8], target: &[u8]) -> Option<&'static str> {
    if target.is_empty() {
        return Some("a symbolic link with an empty target");
    }
    if target.first() == Some(&b'/') {
        return Some("a symbolic link to an absolute path");
    }
    let mut depth: i64 = dir.split(|b| *b == b'/').filter(|p| !p.is_empty()).count() as i64;
    let mut named = false;
    for part in target.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            // `x/..` is the parent of wherever `x` leads, and `x` may be another link.
            b".." if named => {
                return Some("a symbolic link with \"..\" after a name in its target")
            }
            b".." => {
                depth -= 1;
                if depth < 0 {
                    return Some("a symbolic link pointing outside the tree");
                }
            }
            other => {
                if name_fault(other) == Some("a .git entry") {
                    return Some("a symbolic link pointing into .git");
                }
                if other.contains(&0) {
                    return Some("a symbolic link whose target contains NUL");
                }
                depth += 1;
                named = true;
            }
        }
    }
    None
}

/// Walks `tree` and refuses the first unsafe entry: an unsafe name (see [`name_fault`]), a
/// submodule, a symbolic link out of the tree or into `.git`, or an unknown mode. Sub-trees
/// identical (same id, same path) to the `trusted` tree's — the user's own HEAD — are not
/// walked again, so checking a run's tree costs what the run changed.
pub fn checked_tree(
    repo: &Repository,
    tree: &Tree<'_>,
    trusted: Option<&Tree<'_>>,
) -> Result<(), UnsafeEntry> {
    walk(repo, tree, trusted, &[])
}

fn fault(path: &[u8], why: &str) -> UnsafeEntry {
    UnsafeEntry {
        path: crate::ui::escape_controls(&String::from_utf8_lossy(path)),
        why: why.to_string(),
    }
}

fn walk(
    repo: &Repository,
    tree: &Tree<'_>,
    trusted: Option<&Tree<'_>>,
    dir: &[u8],
) -> Result<(), UnsafeEntry> {
    // git sorts a folder `a` as `a/`, so a link `a` and a folder `a` need not be neighbours.
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    for entry in tree.iter() {
        let name = entry.name_bytes();
        let mut path = dir.to_vec();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(name);
        if let Some(why) = name_fault(name) {
            return Err(fault(&path, why));
        }
        // git fsck's duplicateEntries: two entries of one name (a link `a -> .` beside a
        // folder `a`) would have a writer go through the first to write the second.
        if !seen.insert(name.to_vec()) {
            return Err(fault(&path, "a duplicate entry (two entries of one name)"));
        }
        let same = trusted.and_then(|t| t.get_name_bytes(name));
        if same
            .as_ref()
            .is_some_and(|s| s.id() == entry.id() && s.filemode_raw() == entry.filemode_raw())
        {
            continue;
        }
        let unreadable = |what: &str| fault(&path, &format!("{what} that cannot be read"));
        match (entry.filemode_raw(), entry.kind()) {
            (MODE_TREE, Some(ObjectType::Tree)) => {
                let sub = repo
                    .find_tree(entry.id())
                    .map_err(|_| unreadable("a folder"))?;
                let trusted_sub = same
                    .filter(|s| s.filemode_raw() == MODE_TREE)
                    .and_then(|s| repo.find_tree(s.id()).ok());
                walk(repo, &sub, trusted_sub.as_ref(), &path)?;
            }
            (MODE_BLOB | MODE_EXEC, _) => {}
            (MODE_SYMLINK, _) => {
                let blob = repo
                    .find_blob(entry.id())
                    .map_err(|_| unreadable("a symbolic link"))?;
                if let Some(why) = symlink_fault(dir, blob.content()) {
                    return Err(fault(&path, why));
                }
            }
            (MODE_GITLINK, _) => return Err(fault(&path, "a submodule (gitlink) entry")),
            (mode, _) => return Err(fault(&path, &format!("an unknown mode {mode:o}"))),
        }
    }
    Ok(())
}

/// The refusal for an unsafe entry in run `run_id`'s `what` ("attempt 2's tree").
pub fn refusal(run_id: &str, what: &str, entry: &UnsafeEntry) -> Error {
    Error::new(format!(
        "run {run_id} is unsafe: {what} has {} at {:?}; nothing was written",
        entry.why, entry.path
    ))
    .hint(format!(
        "the record was crafted or damaged; do not use it (remove it: git update-ref -d refs/factory/{run_id})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_git_refuses_are_refused() {
        for bad in [
            &b""[..],
            b".",
            b"..",
            b".git",
            b".GIT",
            b".Git.",
            b".git ",
            b"GIT~1",
            b".git::$INDEX_ALLOCATION",
            b".Git. :stream",
            ".g\u{200c}it".as_bytes(),
            b"a/b",
            b"a\0b",
        ] {
            assert!(name_fault(bad).is_some(), "{bad:?}");
        }
        for good in [&b".gitignore"[..], b"git", b"...", b".github", b"\xff\xfe"] {
            assert_eq!(name_fault(good), None, "{good:?}");
        }
    }

    #[test]
    fn paths_and_links() {
        assert!(path_fault(b"/etc/passwd").is_some());
        assert!(path_fault(b"a/../../x").is_some());
        assert!(path_fault(b"a/.GIT/config").is_some());
        assert_eq!(path_fault(b"src/lib.rs"), None);
        assert!(symlink_fault(b"", b"../x").is_some());
        assert!(symlink_fault(b"a/b", b"../../../x").is_some());
        assert!(symlink_fault(b"a", b"/etc").is_some());
        assert!(symlink_fault(b"", b"sub/.git/hooks").is_some());
        assert_eq!(symlink_fault(b"a/b", b"../../c"), None);
        assert!(
            symlink_fault(b"", b"s/b/..").is_some(),
            "s/b may itself be a link to .."
        );
        assert_eq!(symlink_fault(b"", b"./c/d"), None);
    }
}
