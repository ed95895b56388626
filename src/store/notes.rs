//! Notes as bytes, end to end.
//!
//! A note is a blob in the tree of a notes commit, named by the hex id of the object it
//! annotates, directly or under two-digit fan-out folders (`ab/cdef…`) as git writes them
//! when there are many. A fetched note can hold any bytes, so notes are read and written here
//! as bytes: a line is never decoded, dropped or rewritten when another line is added or
//! taken away. Every change is a new notes commit whose parent is the one it was computed
//! from, and the ref moves only if it still points at that parent (compare and swap); when
//! another process moved it first, the change is computed again from the new commit.

use super::backoff::Backoff;
use super::signature;
use crate::error::{Error, Result};
use git2::{ObjectType, Oid, Repository, Tree};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// What to do to the note on each object (by hex id): a new blob, or `None` to remove it.
pub type Edits = BTreeMap<String, Option<Oid>>;

const BLOB_MODE: i32 = 0o100644;
const TREE_MODE: i32 = 0o040000;

/// The commit a notes ref points at, if any.
fn head(repo: &Repository, notes_ref: &str) -> Result<Option<Oid>> {
    match repo.refname_to_id(notes_ref) {
        Ok(oid) => Ok(Some(oid)),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The blob of the note on the object `hex` in a notes tree, fan-out folders included.
fn blob_in(repo: &Repository, tree: &Tree<'_>, hex: &str) -> Result<Option<Oid>> {
    if let Some(e) = tree.get_name(hex) {
        if e.kind() == Some(ObjectType::Blob) {
            return Ok(Some(e.id()));
        }
    }
    if hex.len() > 2 {
        if let Some(e) = tree.get_name(&hex[..2]) {
            if e.kind() == Some(ObjectType::Tree) {
                let sub = repo.find_tree(e.id())?;
                return blob_in(repo, &sub, &hex[2..]);
            }
        }
    }
    Ok(None)
}

/// The note on `target`, byte for byte (`None`: there is none).
pub fn read(repo: &Repository, notes_ref: &str, target: Oid) -> Result<Option<Vec<u8>>> {
    let Some(commit) = head(repo, notes_ref)? else {
        return Ok(None);
    };
    let tree = repo.find_commit(commit)?.tree()?;
    read_in(repo, &tree, target)
}

fn read_in(repo: &Repository, tree: &Tree<'_>, target: Oid) -> Result<Option<Vec<u8>>> {
    Ok(match blob_in(repo, tree, &target.to_string())? {
        Some(blob) => Some(repo.find_blob(blob)?.content().to_vec()),
        None => None,
    })
}

/// Every note of a notes ref: (annotated object, note bytes), sorted by object.
pub fn all(repo: &Repository, notes_ref: &str) -> Result<Vec<(Oid, Vec<u8>)>> {
    let Some(commit) = head(repo, notes_ref)? else {
        return Ok(Vec::new());
    };
    all_in(repo, &repo.find_commit(commit)?.tree()?)
}

/// Every note of a notes tree, sorted by the object it annotates.
pub fn all_in(repo: &Repository, tree: &Tree<'_>) -> Result<Vec<(Oid, Vec<u8>)>> {
    let mut out = Vec::new();
    collect(repo, tree, String::new(), &mut out)?;
    out.sort();
    Ok(out)
}

fn collect(
    repo: &Repository,
    tree: &Tree<'_>,
    prefix: String,
    out: &mut Vec<(Oid, Vec<u8>)>,
) -> Result<()> {
    for entry in tree.iter() {
        let Some(name) = entry.name() else {
            continue;
        };
        let full = format!("{prefix}{name}");
        match entry.kind() {
            Some(ObjectType::Blob) => {
                if let Ok(target) = Oid::from_str(&full).map(|o| (full.len() == 40, o)) {
                    if target.0 {
                        out.push((target.1, repo.find_blob(entry.id())?.content().to_vec()));
                    }
                }
            }
            Some(ObjectType::Tree) if name.len() == 2 && full.len() < 40 => {
                collect(repo, &repo.find_tree(entry.id())?, full, out)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The notes tree with `edits` made: a note is replaced or removed where it is (fan-out
/// folders kept, a folder left empty removed); a new one is put at the top, as git reads it
/// wherever it is. Everything else stays as it was, names git-factory does not know included.
fn edited_tree(repo: &Repository, base: Option<&Tree<'_>>, edits: &Edits) -> Result<Oid> {
    let mut placed = BTreeSet::new();
    let mut top = repo.treebuilder(None)?;
    if let Some(base) = base {
        let edited = edit_level(repo, base, "", edits, &mut placed)?;
        top = repo.treebuilder(Some(&repo.find_tree(edited)?))?;
    }
    for (hex, blob) in edits {
        if let (false, Some(blob)) = (placed.contains(hex), blob) {
            top.insert(hex.as_str(), *blob, BLOB_MODE)?;
        }
    }
    Ok(top.write()?)
}

fn edit_level(
    repo: &Repository,
    tree: &Tree<'_>,
    prefix: &str,
    edits: &Edits,
    placed: &mut BTreeSet<String>,
) -> Result<Oid> {
    let mut builder = repo.treebuilder(Some(tree))?;
    for entry in tree.iter() {
        let Some(name) = entry.name() else {
            continue;
        };
        let full = format!("{prefix}{name}");
        match entry.kind() {
            Some(ObjectType::Blob) => {
                if let Some(edit) = edits.get(&full) {
                    placed.insert(full.clone());
                    match edit {
                        Some(blob) => {
                            builder.insert(name, *blob, BLOB_MODE)?;
                        }
                        None => builder.remove(name)?,
                    }
                }
            }
            Some(ObjectType::Tree)
                if name.len() == 2
                    && edits
                        .range(full.clone()..)
                        .next()
                        .is_some_and(|(k, _)| k.starts_with(&full)) =>
            {
                let sub = repo.find_tree(entry.id())?;
                let edited = edit_level(repo, &sub, &full, edits, placed)?;
                if repo.find_tree(edited)?.is_empty() {
                    builder.remove(name)?;
                } else {
                    builder.insert(name, edited, TREE_MODE)?;
                }
            }
            _ => {}
        }
    }
    Ok(builder.write()?)
}

/// Whether a ref update lost to another process (it moved the ref, or holds its lock).
fn lost_a_race(e: &git2::Error) -> bool {
    matches!(
        e.code(),
        git2::ErrorCode::Locked | git2::ErrorCode::Modified | git2::ErrorCode::Exists
    ) || e.message().contains("failed to create locked file")
        || e.message().contains("failed to lock")
}

/// Creates the ref `name` at `commit` only if no other process made it first. (libgit2's
/// non-forced create looks for the ref before it takes the ref's lock, so two processes
/// making the first note at once would both succeed, the second erasing the first's line;
/// here the lock is taken first and the ref looked for under it.)
fn create(
    repo: &Repository,
    name: &str,
    commit: Oid,
    message: &str,
) -> std::result::Result<(), git2::Error> {
    let mut tx = repo.transaction()?;
    tx.lock_ref(name)?;
    if repo.find_reference(name).is_ok() {
        return Err(git2::Error::new(
            git2::ErrorCode::Exists,
            git2::ErrorClass::Reference,
            format!("{name} was made by another process"),
        ));
    }
    tx.set_target(name, commit, None, message)?;
    tx.commit()
}

/// Changes a notes ref as one commit: `plan` is given the current notes tree and says what
/// to change (`None`: nothing). Tried again from the new tree whenever another process
/// moved the ref first. Returns whether a commit was made.
pub fn update<F>(repo: &Repository, notes_ref: &str, message: &str, mut plan: F) -> Result<bool>
where
    F: FnMut(&Repository, Option<&Tree<'_>>) -> Result<Option<Edits>>,
{
    let sig = signature(repo)?;
    let mut backoff = Backoff::new(
        Duration::from_secs(30),
        Duration::from_millis(2),
        Duration::from_millis(100),
    );
    loop {
        let parent = match head(repo, notes_ref)? {
            Some(oid) => Some(repo.find_commit(oid)?),
            None => None,
        };
        let base = match &parent {
            Some(c) => Some(c.tree()?),
            None => None,
        };
        let Some(edits) = plan(repo, base.as_ref())? else {
            return Ok(false);
        };
        let tree = repo.find_tree(edited_tree(repo, base.as_ref(), &edits)?)?;
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        let commit = repo.commit(None, &sig, &sig, message, &tree, &parents)?;
        let moved = match &parent {
            Some(p) => repo
                .reference_matching(notes_ref, commit, true, p.id(), message)
                .map(drop),
            None => create(repo, notes_ref, commit, message),
        };
        match moved {
            Ok(()) => return Ok(true),
            Err(e) if lost_a_race(&e) => {
                if !backoff.wait() {
                    return Err(Error::new(format!(
                        "could not update {notes_ref}: other processes kept changing it for 30 s"
                    ))
                    .detail(format!("last refusal: {}", e.message()))
                    .hint("try again when the other git-factory commands have finished"));
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether `text` holds `line` as one of its lines (with or without a terminator).
fn has_line(text: &[u8], line: &[u8]) -> bool {
    text.split(|b| *b == b'\n')
        .any(|l| l == line || l.strip_suffix(b"\r") == Some(line))
}

/// The message of every notes commit [`append_line`] makes: how the agent audit tells a
/// git-factory process's line from a command's own `git notes`.
pub const ADDED: &str = "Notes added by 'git factory'";

/// Adds `line` to the note on `target` unless it is there already. The lines already there
/// stay byte for byte, whatever their encoding; a last line without a newline gets one.
pub fn append_line(repo: &Repository, notes_ref: &str, target: Oid, line: &[u8]) -> Result<()> {
    update(repo, notes_ref, ADDED, |repo, tree| {
        let existing = match tree {
            Some(t) => read_in(repo, t, target)?.unwrap_or_default(),
            None => Vec::new(),
        };
        if has_line(&existing, line) {
            return Ok(None);
        }
        let mut text = existing;
        if !text.is_empty() && !text.ends_with(b"\n") {
            text.push(b'\n');
        }
        text.extend_from_slice(line);
        text.push(b'\n');
        let blob = repo.blob(&text)?;
        Ok(Some(Edits::from([(target.to_string(), Some(blob))])))
    })?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fresh repository in a temporary folder, with a committer set (for the notes tests
    /// here and of the rooms that write notes).
    pub(crate) fn repo() -> (tempfile::TempDir, Repository) {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init(dir.path()).expect("init");
        {
            let mut cfg = repo.config().expect("config");
            cfg.set_str("user.name", "T").expect("name");
            cfg.set_str("user.email", "t@example.invalid")
                .expect("email");
        }
        (dir, repo)
    }

    #[test]
    fn lines_of_any_encoding_stay_byte_for_byte() {
        let (_d, repo) = repo();
        let target = repo.blob(b"annotated").expect("blob");
        let nref = "refs/notes/test";
        append_line(&repo, nref, target, b"caf\xe9 without newline").expect("append");
        // A last line without a terminator, written by someone else.
        update(&repo, nref, "raw", |repo, _| {
            let blob = repo.blob(b"caf\xe9\r\nlast").expect("blob");
            Ok(Some(Edits::from([(target.to_string(), Some(blob))])))
        })
        .expect("raw");
        append_line(&repo, nref, target, b"factory abc PASS").expect("append");
        append_line(&repo, nref, target, b"factory abc PASS").expect("again");
        assert_eq!(
            read(&repo, nref, target).expect("read").expect("note"),
            b"caf\xe9\r\nlast\nfactory abc PASS\n"
        );
        assert_eq!(all(&repo, nref).expect("all").len(), 1);
    }

    #[test]
    fn notes_under_fanout_folders_are_found_edited_and_removed_in_place() {
        let (_d, repo) = repo();
        let nref = "refs/notes/test";
        let a = repo.blob(b"a").expect("blob");
        let b = repo.blob(b"b").expect("blob");
        let (ha, hb) = (a.to_string(), b.to_string());
        // A tree as git writes one with many notes: `xx/` fan-out folders.
        update(&repo, nref, "fanout", |repo, _| {
            let note = repo.blob(b"old\n").expect("blob");
            let mut sub = repo.treebuilder(None).expect("tb");
            sub.insert(&ha[2..], note, BLOB_MODE).expect("insert");
            let sub = sub.write().expect("write");
            let mut top = repo.treebuilder(None).expect("tb");
            top.insert(&ha[..2], sub, TREE_MODE).expect("insert");
            top.insert("README", note, BLOB_MODE).expect("insert");
            let top = top.write().expect("write");
            // Written directly as the first commit's tree.
            let sig = signature(repo).expect("sig");
            let tree = repo.find_tree(top).expect("tree");
            let c = repo
                .commit(None, &sig, &sig, "m", &tree, &[])
                .expect("commit");
            repo.reference(nref, c, true, "m").expect("ref");
            Ok(None)
        })
        .expect("setup");
        append_line(&repo, nref, a, b"new").expect("append");
        append_line(&repo, nref, b, b"other").expect("append");
        assert_eq!(
            read(&repo, nref, a).expect("read"),
            Some(b"old\nnew\n".to_vec())
        );
        let tree = repo
            .find_commit(repo.refname_to_id(nref).expect("ref"))
            .expect("commit")
            .tree()
            .expect("tree");
        assert!(tree.get_name(&ha).is_none(), "edited where it was");
        assert!(tree.get_name(&ha[..2]).is_some());
        assert!(tree.get_name(&hb).is_some(), "a new note at the top");
        assert_eq!(all(&repo, nref).expect("all").len(), 2);
        update(&repo, nref, "remove", |_, _| {
            Ok(Some(Edits::from([(ha.clone(), None)])))
        })
        .expect("remove");
        let tree = repo
            .find_commit(repo.refname_to_id(nref).expect("ref"))
            .expect("commit")
            .tree()
            .expect("tree");
        assert!(tree.get_name(&ha[..2]).is_none(), "an emptied folder goes");
        assert!(tree.get_name("README").is_some(), "unknown names stay");
        assert_eq!(read(&repo, nref, a).expect("read"), None);
    }
}
